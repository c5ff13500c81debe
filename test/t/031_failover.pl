# Outages and failover (issue 11): a primary whose worker runs the rounds,
# a streaming standby, two nodes with a real gangsched-agent each connected
# with a multi-host connection string (primary, standby;
# target_session_attrs=read-write) and a running 2-worker job.
#
# - on the standby the worker does not run; why_pending, the views and the
#   analyst functions work read-only; run_round() returns ran = false with a
#   note instead of failing;
# - the primary stops for longer than gangsched.node_timeout, the standby is
#   promoted: its worker runs rounds within 2 s, the agents reconnect to it
#   and keep their workers, and no node goes down, no job is requeued
#   (silence counts from when the server began to hear, heard_since());
# - the new primary is stopped for longer than node_timeout and started
#   again: nothing requeued either;
# - an agent that really stays silent is marked down after node_timeout.
use strict;
use warnings;

use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $srcdir = $ENV{TESTDIR} // '.';
my $agent_bin =
  -x "$srcdir/tools/agent/gangsched-agent"
  ? "$srcdir/tools/agent/gangsched-agent"
  : 'gangsched-agent';
my $trainer = "$srcdir/tools/agent/trainer.sh";

# node_timeout is short; the outages below last longer. The agents' backoff
# (0.5 s doubling) still reconnects them well within node_timeout of the
# server's start or promotion.
my $timeout = 5;
my $outage = $timeout + 1.5;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gangsched'
gangsched.database = 'postgres'
gangsched.enabled = on
gangsched.round_interval = '200ms'
gangsched.node_timeout = '${timeout}s'
gangsched.min_runtime = 0
});
$primary->start;

sub poll_until
{
	my ($node, $query, $expected, $secs) = @_;
	my $deadline = time + $secs;
	my ($out, $err) = ('', '');
	while (time < $deadline)
	{
		$node->psql('postgres', $query, stdout => \$out, stderr => \$err);
		return 1 if $out eq $expected;
		usleep(100_000);
	}
	diag "timed out after ${secs}s: $query\nexpected: $expected\ngot: $out\nstderr: $err";
	return 0;
}

$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION gangsched CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n' || i, 'gpu', 'r1', 8, 64, 10, 1, 'sim', 16) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('a');
SELECT gangsched.set_quota('a', 'gpu', 2);
});

$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->start;

my $workdir = PostgreSQL::Test::Utils::tempdir();
my $connstr =
	'host=' . $primary->host . ',' . $standby->host
  . ' port=' . $primary->port . ',' . $standby->port
  . ' dbname=postgres target_session_attrs=read-write connect_timeout=2';
my %agent_pid;

sub agent_log_file { return "$PostgreSQL::Test::Utils::log_path/failover_agent_$_[0].log"; }

sub start_agent
{
	my ($name) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDIN, '<', '/dev/null') or POSIX::_exit(127);
		open(STDOUT, '>>', agent_log_file($name)) or POSIX::_exit(127);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
		exec($agent_bin, '--node', $name, '--dbname', $connstr, '--workdir', $workdir,
			'--heartbeat', '1')
		  or POSIX::_exit(127);
	}
	$agent_pid{$name} = $pid;
	return;
}

sub tracked_process_groups
{
	my @pgids;
	foreach my $f (glob("$workdir/.agent-*/job-*.state"))
	{
		open(my $fh, '<', $f) or next;
		while (<$fh>)
		{
			push @pgids, $1 if /^worker \S+ \S+ \S+ \S+ (\d+)$/ && $1 > 1;
		}
		close($fh);
	}
	return @pgids;
}

END
{
	local $?;    # waitpid must not become the test's exit status
	kill 'KILL', $_ foreach values %agent_pid;
	waitpid($_, 0) foreach values %agent_pid;
	kill 'KILL', -$_ foreach tracked_process_groups();
}

sub trainer_pids
{
	my ($job) = @_;
	my @pids;
	foreach my $r (0, 1)
	{
		my $f = "$workdir/$job/rank$r.pid";
		next unless -e $f;
		my $pid = slurp_file($f);
		chomp $pid;
		push @pids, $pid;
	}
	return @pids;
}
sub alive { my $n = 0; foreach (@_) { $n++ if kill 0, $_; } return $n; }

start_agent("n$_") foreach 1 .. 2;
ok(poll_until($primary, 'SELECT count(*) FROM gangsched.nodes WHERE heartbeat_at IS NOT NULL', '2', 20),
	'both agents connected to the primary');
my $job = $primary->safe_psql('postgres',
	"SELECT gangsched.submit('a', 2, 1, name => 'train', command => 'exec sh $trainer 100000 0.1')");
ok(poll_until($primary, "SELECT state FROM gangsched.jobs WHERE job = $job", 'running', 20),
	'the 2-worker job runs on both nodes');
my @pids;
for (1 .. 100) { @pids = trainer_pids($job); last if @pids == 2; usleep(100_000); }
is(scalar(@pids), 2, 'both trainers started');
# a pending job, for why_pending and the queue on the standby
my $pending = $primary->safe_psql('postgres', "SELECT gangsched.submit('a', 1, 1, name => 'waits')");
$primary->wait_for_catchup($standby);

# -------------------------------------------------------------------------
# The standby: read-only, no rounds
# -------------------------------------------------------------------------
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery(), pid IS NULL FROM gangsched.worker_status()'),
	't|t', 'the worker does not run on the standby');
is( $standby->safe_psql('postgres', 'SELECT ran, placed, note FROM gangsched.run_round()'),
	'f|0|the server is a standby (in recovery): rounds run on the primary',
	'run_round() on the standby does nothing and says why');
like($standby->safe_psql('postgres', "SELECT reason FROM gangsched.why_pending($pending)"),
	qr/\S/, 'why_pending works on the standby');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM gangsched.queue'), '1', 'the queue view works on the standby');
is($standby->safe_psql('postgres', "SELECT team, used_gpus FROM gangsched.team_shares"),
	'a|2', 'team_shares works on the standby');
is($standby->safe_psql('postgres', "SELECT count(*) FROM gangsched.placements WHERE job = $job"),
	'2', 'placements and jobs work on the standby');
my $from = "pg_catalog.now() - interval '1 hour'";
my $to = "pg_catalog.now() + interval '1 hour'";
is( $standby->safe_psql(
		'postgres', qq{
SELECT (SELECT count(*) > 0 FROM gangsched.usage($from, $to)),
       (SELECT count(*) > 0 FROM gangsched.utilization($from, $to)),
       (SELECT count(*) FROM gangsched.snapshot(pg_catalog.now())),
       (SELECT count(*) >= 0 FROM gangsched.queue_waits($from, $to)),
       (SELECT count(*) >= 0 FROM gangsched.preemption_summary($from, $to)),
       (SELECT count(*) > 0 FROM gangsched.queue_depth($from, $to)),
       (SELECT count(*) > 0 FROM gangsched.allocation_history),
       (SELECT count(*) > 0 FROM gangsched.event_log)}),
	't|t|2|t|t|t|t|t', 'the analyst functions and history views work on the standby');
is($standby->safe_psql('postgres', 'SELECT gangsched.heard_since() IS NULL'),
	't', 'a standby hears no agents: heard_since() is NULL');

# -------------------------------------------------------------------------
# Failover after an outage longer than node_timeout
# -------------------------------------------------------------------------
$primary->stop('immediate');
my $stopped = time;
usleep(int($outage * 1e6));
$standby->promote;
my $promoted = time;
ok(poll_until($standby, 'SELECT rounds > 0 FROM gangsched.worker_status()', 't', 2),
	'the promoted standby runs rounds within 2 s');
note(sprintf('first round %.2f s after promotion (primary down %.1f s)', time - $promoted, $promoted - $stopped));
ok( poll_until(
		$standby,
		"SELECT count(*) FROM gangsched.nodes WHERE heartbeat_at > pg_catalog.now() - interval '1.5 s'",
		'2', $timeout + 5),
	'both agents reconnected to the new primary');
# rounds keep running for longer than node_timeout after the promotion
usleep(int(($timeout + 1) * 1e6));
is( $standby->safe_psql(
		'postgres', "SELECT j.state, j.requeues FROM gangsched.jobs j WHERE j.job = $job"),
	'running|0', 'the running job is not requeued by the failover');
is($standby->safe_psql('postgres', "SELECT string_agg(state, ',' ORDER BY name) FROM gangsched.nodes"),
	'up,up', 'no node was marked down');
is( $standby->safe_psql(
		'postgres', "SELECT count(*) FROM gangsched.events WHERE reason LIKE 'no heartbeat%'"),
	'0', 'no node went down for silence');
is(alive(@pids), 2, 'the agents kept their workers (same processes)');
ok($standby->safe_psql('postgres', 'SELECT gangsched.heard_since() > pg_catalog.pg_postmaster_start_time()') eq 't',
	'heard_since() is the promotion, after the server start');

# -------------------------------------------------------------------------
# A restart longer than node_timeout
# -------------------------------------------------------------------------
$standby->stop('fast');
usleep(int($outage * 1e6));
$standby->start;
ok(poll_until($standby, 'SELECT rounds > 0 FROM gangsched.worker_status()', 't', 5), 'rounds again after the restart');
ok( poll_until(
		$standby,
		"SELECT count(*) FROM gangsched.nodes WHERE heartbeat_at > pg_catalog.now() - interval '1.5 s'",
		'2', $timeout + 5),
	'both agents reconnected after the restart');
usleep(int(($timeout + 1) * 1e6));
is( $standby->safe_psql(
		'postgres', "SELECT j.state, j.requeues FROM gangsched.jobs j WHERE j.job = $job"),
	'running|0', 'the running job is not requeued by the restart');
is($standby->safe_psql('postgres', "SELECT string_agg(state, ',' ORDER BY name) FROM gangsched.nodes"),
	'up,up', 'no node was marked down by the restart');
is(alive(@pids), 2, 'the workers still run');

# -------------------------------------------------------------------------
# An agent that really falls silent goes down after node_timeout
# -------------------------------------------------------------------------
my $victim = delete $agent_pid{n2};
kill 'KILL', $victim;
waitpid($victim, 0);
my $killed = time;
ok(poll_until($standby, "SELECT state FROM gangsched.nodes WHERE name = 'n2'", 'down', $timeout + 5),
	'the silent node is marked down');
my $after = time - $killed;
cmp_ok($after, '>=', $timeout - 1.5, sprintf('not before node_timeout (%.1f s after its last heartbeat)', $after));
is($standby->safe_psql('postgres', "SELECT requeues FROM gangsched.jobs WHERE job = $job"),
	'1', 'its job is requeued');

$standby->stop;
done_testing();
