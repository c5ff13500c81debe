# kill -9 and crash recovery (issue 11). The background worker runs the
# rounds; restart_after_crash = on, as in production.
#
# - a backend killed in the middle of an agent's job_finished (its
#   transaction paused with pg_sleep after the call): after the crash
#   restart the job is still running, nothing else changed, and the agent's
#   report, sent again, finishes it;
# - a backend killed in the middle of an agent's job_released of a
#   preempted job (the release places the preemptor in its transaction):
#   the victim is still preempting, the preemptor still nominated with its
#   holds; the release sent again places the preemptor;
# - the background worker killed in the middle of a round: the round is
#   made to wait, with its decisions half written, on the row lock of a job
#   it places (a superuser session holds it; no test hook in the server);
#   the postmaster's log names the round as the killed process's query.
#   After the crash restart no acknowledged job is lost, nothing of the
#   killed round remains, and the new worker runs a round within a few
#   seconds (the figure is printed) and places the queue.
# After each crash check_invariants() returns no rows.
use strict;
use warnings;

use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'gangsched'
gangsched.database = 'postgres'
gangsched.enabled = on
gangsched.round_interval = '200ms'
gangsched.min_runtime = 0
gangsched.default_grace = '10min'
gangsched.start_timeout = '10min'
restart_after_crash = on
});
$node->start;
my $connstr = $node->connstr('postgres');

sub sql { return $node->safe_psql('postgres', $_[0]); }

# Seconds until $query returns $expected (at most $timeout; undef on
# time-out). Connection errors (the server in crash recovery) count as "not
# yet".
sub seconds_until
{
	my ($query, $expected, $timeout) = @_;
	my $t0 = time;
	my ($out, $err) = ('', '');
	while (time < $t0 + $timeout)
	{
		$node->psql('postgres', $query, stdout => \$out, stderr => \$err);
		return time - $t0 if $out eq $expected;
		usleep(50_000);
	}
	diag "timed out after ${timeout}s: $query\nexpected: $expected\ngot: $out\nstderr: $err";
	return undef;
}

my @sessions;
END
{
	local $?;
	foreach my $x (@sessions) { eval { $x->{h}->kill_kill }; }
}

# A psql session as $role that stays open; returns it and its backend pid.
sub open_session
{
	my ($role) = @_;
	my $s = { in => '', out => '', err => '' };
	$s->{h} = IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', "$connstr user=$role" ],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err});
	$s->{in} .= "SELECT pg_backend_pid();\n";
	my $deadline = time + 10;
	while ($s->{out} !~ /^(\d+)\n/ && time < $deadline)
	{
		$s->{h}->pump_nb;
		usleep(10_000);
	}
	($s->{pid}) = $s->{out} =~ /^(\d+)\n/;
	$s->{out} = '';
	die "no session for $role: $s->{err}" unless $s->{pid};
	push @sessions, $s;
	return $s;
}

# Send $sql to the session and wait until its backend is in pg_sleep (the
# statements before it are done: their effects are in its open transaction).
sub run_until_sleep
{
	my ($s, $sql) = @_;
	$s->{in} .= $sql;
	$s->{h}->pump_nb;
	return seconds_until(
		"SELECT query LIKE '%pg_sleep%' AND state = 'active' FROM pg_stat_activity WHERE pid = $s->{pid}",
		't', 20);
}

# kill -9 a backend, wait for the crash restart to end and the worker's
# first round on the restarted server (at most 60 s and 30 s: liveness, not
# timing; the figures are printed); returns the seconds from the kill to
# both.
sub crash
{
	my ($pid, $what) = @_;
	my $t0 = time;
	kill 'KILL', $pid;
	my $up = seconds_until('SELECT 1', '1', 60);
	my $t_up = time;
	my $round = seconds_until('SELECT rounds > 0 FROM gangsched.worker_status()', 't', 30);
	my $t_round = time;
	ok(defined $up && defined $round, "$what: the server restarted after the crash and the worker ran a round")
	  or return;
	note(sprintf('%s: server accepting connections %.2f s after kill -9, first round of the new worker %.2f s after it',
			$what, $t_up - $t0, $t_round - $t0));
	return ($t_up - $t0, $t_round - $t0);
}

sub invariants_ok
{
	my ($what) = @_;
	my $rows = sql('SELECT count(*) FROM gangsched.check_invariants()');
	is($rows, '0', "$what: check_invariants() returns no rows")
	  or diag(sql('SELECT * FROM gangsched.check_invariants()'));
	return;
}

sql(q{
CREATE EXTENSION gangsched CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n' || i, 'gpu', 'r1', 32, 256, 100, 8, 'sim', 16) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'gpu', 16);
CREATE ROLE agent_n1 LOGIN;
CREATE ROLE agent_n2 LOGIN;
SELECT gangsched.add_agent('agent_n1', 'n1');
SELECT gangsched.add_agent('agent_n2', 'n2');
});

# A snapshot of the scheduler's state, to compare before and after a crash.
my $state_sql = q{
SELECT string_agg(format('%s %s %s', job, state, placed_at), ', ' ORDER BY job) FROM gangsched.jobs;
SELECT count(*) FROM gangsched.allocations WHERE upper_inf(during);
SELECT count(*) FROM gangsched.holds;
SELECT count(*) FROM gangsched.events;
};

# -------------------------------------------------------------------------
# kill -9 of a backend in the middle of job_finished
# -------------------------------------------------------------------------
# b borrows n1 (v), a runs on n2 (w): both confirmed by their agents
my $v = sql("SELECT gangsched.submit('b', 1, 8, name => 'v')");
ok(defined seconds_until("SELECT state FROM gangsched.jobs WHERE job = $v", 'placed', 10), 'v is placed');
my $vnode = sql("SELECT DISTINCT node FROM gangsched.placements WHERE job = $v");
$node->safe_psql('postgres', "SELECT gangsched.job_started($v, '$vnode')", connstr => "$connstr user=agent_$vnode");
my $w = sql("SELECT gangsched.submit('a', 1, 8, name => 'w')");
ok(defined seconds_until("SELECT state FROM gangsched.jobs WHERE job = $w", 'placed', 10), 'w is placed');
my $wnode = sql("SELECT DISTINCT node FROM gangsched.placements WHERE job = $w");
$node->safe_psql('postgres', "SELECT gangsched.job_started($w, '$wnode')", connstr => "$connstr user=agent_$wnode");
is(sql("SELECT string_agg(state, ',' ORDER BY job) FROM gangsched.jobs"), 'running,running', 'both run');
my $before = sql($state_sql);

my $s = open_session("agent_$wnode");
ok( defined run_until_sleep(
		$s, "BEGIN;\nSELECT gangsched.job_finished($w, true, 'done');\nSELECT pg_sleep(300);\n"),
	"agent_$wnode called job_finished($w) and its transaction is paused");
is(sql("SELECT state FROM gangsched.jobs WHERE job = $w"), 'running', 'uncommitted: w still runs for others');
crash($s->{pid}, 'kill -9 mid-finish');
$s->{h}->kill_kill;
is(sql($state_sql), $before, 'after the crash restart the state is as before the call (w running, nothing else changed)');
invariants_ok('after the crash mid-finish');
$node->safe_psql('postgres', "SELECT gangsched.job_finished($w, true, 'done')", connstr => "$connstr user=agent_$wnode");
is(sql("SELECT state || ' ' || message FROM gangsched.jobs WHERE job = $w"), 'finished done',
	'the agent reports again: w finished');
invariants_ok('after the finish');

# -------------------------------------------------------------------------
# kill -9 of a backend in the middle of job_released
# -------------------------------------------------------------------------
# p (team a, within quota) needs n1: v is preempted for it, p nominated
my $p = sql("SELECT gangsched.submit('a', 2, 8, name => 'p')");
ok(defined seconds_until("SELECT string_agg(state, ',' ORDER BY job) FROM gangsched.jobs WHERE job IN ($v, $p)",
		'preempting,nominated', 10),
	'v is preempted for p, p is nominated');
$before = sql($state_sql);
$s = open_session("agent_$vnode");
ok( defined run_until_sleep(
		$s, "BEGIN;\nSELECT gangsched.job_released($v, checkpointed => true);\nSELECT pg_sleep(300);\n"),
	"agent_$vnode called job_released($v) and its transaction is paused");
crash($s->{pid}, 'kill -9 mid-release');
$s->{h}->kill_kill;
is(sql($state_sql), $before,
	'after the crash restart the state is as before the call (v preempting, p nominated with its holds)');
invariants_ok('after the crash mid-release');
$node->safe_psql('postgres', "SELECT gangsched.job_released($v, checkpointed => true)",
	connstr => "$connstr user=agent_$vnode");
is(sql("SELECT string_agg(state, ',' ORDER BY job) FROM gangsched.jobs WHERE job IN ($v, $p)"),
	'pending,placed', 'the agent releases again: v requeued, p placed in the release');
invariants_ok('after the release');

# -------------------------------------------------------------------------
# kill -9 of the background worker in the middle of a round
# -------------------------------------------------------------------------
# 18 more nodes and 400 queued one-GPU jobs, submitted while the worker is
# paused; a superuser session locks the row of the first of them
sql(q{
ALTER SYSTEM SET gangsched.enabled = off;
SELECT pg_reload_conf();
});
ok(defined seconds_until("SELECT setting FROM pg_settings WHERE name = 'gangsched.enabled'", 'off', 10),
	'the worker is paused');
usleep(500_000);    # a round in progress ends
sql(q{SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE state NOT IN ('finished', 'failed', 'cancelled')});
sql(q{SELECT gangsched.add_node('m' || i, 'gpu', 'r2', 32, 256, 100, 8, 'sim', 16) FROM generate_series(1, 18) i});
my @acked = split /\n/, sql(q{SELECT gangsched.submit('a', 1, 1, name => 'q' || i) FROM generate_series(1, 400) i});
is(scalar(@acked), 400, '400 jobs submitted (acknowledged)');
my $first = $acked[0];
my $r0 = sql('SELECT rounds FROM gangsched.worker_status()');

my $locker = open_session('postgres');
ok( defined run_until_sleep(
		$locker, "BEGIN;\nSELECT 1 FROM gangsched.gangs WHERE id = $first FOR UPDATE;\nSELECT pg_sleep(300);\n"),
	"a superuser session holds the row of job $first");
sql(q{
ALTER SYSTEM SET gangsched.enabled = on;
SELECT pg_reload_conf();
});
my $wpid = sql('SELECT pid FROM gangsched.worker_status()');
ok( defined seconds_until(
		"SELECT wait_event_type = 'Lock' AND query = 'SELECT * FROM gangsched.run_round()'
		   FROM pg_stat_activity WHERE pid = $wpid", 't', 20),
	'the worker is in a round, waiting for the row of a job it places');
is(sql('SELECT count(*) FROM gangsched.jobs WHERE state = \'placed\''), '0', 'nothing of that round is visible');
my $log_offset = -s $node->logfile;
my ($up, $first_round) = crash($wpid, 'kill -9 of the worker mid-round');
$locker->{h}->kill_kill;
ok($node->log_contains(qr/background worker "gangsched scheduler" \(PID $wpid\) was terminated by signal 9/,
		$log_offset),
	'the postmaster saw the worker killed');
ok($node->log_contains(qr/Failed process was running: SELECT \* FROM gangsched\.run_round\(\)/, $log_offset),
	'in the middle of its round');

my %present = map { ($_ => 1) } split /\n/, sql('SELECT job FROM gangsched.jobs');
is(scalar(grep { !$present{$_} } @acked), 0, 'no acknowledged job is lost');
ok( defined seconds_until(
		"SELECT count(*) FILTER (WHERE state = 'placed') || ' ' || count(*) FILTER (WHERE state = 'pending')
		   FROM gangsched.jobs WHERE job >= $first", '160 240', 20),
	'the rounds resume: 160 jobs placed (20 nodes of 8 GPUs), 240 pending');
is(sql("SELECT count(*) FROM gangsched.events WHERE job = $first AND kind = 'placed'"), '1',
	'the first job placed once (nothing of the killed round remains)');
invariants_ok('after the crash of the worker');
cmp_ok(sql('SELECT rounds FROM gangsched.worker_status()'), '>', 0, 'the worker keeps running rounds');

$node->stop;
ok(!$node->log_contains('PANIC'), 'no PANIC in the server log');
done_testing();
