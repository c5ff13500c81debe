# End to end with real processes: a server whose background worker runs the
# rounds, three nodes with a gangsched-agent each, and jobs whose workers are
# tools/agent/trainer.sh (a step counter that checkpoints on SIGTERM and
# resumes from its checkpoint). Nobody calls run_round() here.
#
# - team B (quota 0) borrows the whole cluster with one 6-worker gang;
# - team A submits a job within its quota: B is preempted, its trainers get
#   SIGTERM, checkpoint and exit, the agent of B's rank 0 releases, and A is
#   placed in the release's own transaction and running within a second;
# - A finishes (reported by its agent), B is placed again and resumes from
#   its checkpointed step;
# - an agent killed with SIGKILL and restarted adopts its running workers
#   (no duplicate processes, the job stays running);
# - a server restart loses and duplicates nothing: the agents reconnect;
# - a cancel kills the workers; a failing worker fails its job;
# - a pipeline of jobs that wait for each other (submit's after) runs step
#   by step, and a failing step fails the steps that wait for it.
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
ok(-r $trainer, 'the trainer script is there');

# -------------------------------------------------------------------------
# The agent's command line
# -------------------------------------------------------------------------
program_help_ok($agent_bin);
program_version_ok($agent_bin);
program_options_handling_ok($agent_bin);
command_fails_like([$agent_bin], qr/--node is required/, 'the agent refuses to start without --node');
command_fails_like([ $agent_bin, '--node', 'x', '--heartbeat', '0' ],
	qr/invalid --heartbeat/, 'the agent refuses a heartbeat of 0 s');

# -------------------------------------------------------------------------
# Server, cluster, agents
# -------------------------------------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('e2e');
$node->init;
my $host = $node->host;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'pg_cron,gangsched'
cron.database_name = 'postgres'
cron.host = '$host'
gangsched.database = 'postgres'
gangsched.enabled = on
gangsched.round_interval = '200ms'
gangsched.min_runtime = 0
gangsched.default_grace = '20s'
});
$node->start;

sub sql { return $node->safe_psql('postgres', $_[0]); }

# Poll $query until it returns $expected, for at most $timeout seconds.
# Connection errors (the server restarting) count as "not yet".
sub poll_until
{
	my ($query, $expected, $timeout) = @_;
	my $deadline = time + $timeout;
	my ($out, $err) = ('', '');
	while (time < $deadline)
	{
		$node->psql('postgres', $query, stdout => \$out, stderr => \$err);
		return 1 if $out eq $expected;
		usleep(100_000);
	}
	diag "timed out after ${timeout}s: $query\nexpected: $expected\ngot: $out\nstderr: $err";
	return 0;
}

# Wait until $code returns true, for at most $timeout seconds.
sub wait_for
{
	my ($code, $timeout, $what) = @_;
	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		return 1 if $code->();
		usleep(100_000);
	}
	diag "timed out after ${timeout}s waiting for $what";
	return 0;
}

sql(q{
CREATE EXTENSION gangsched CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n' || i, 'gpu', 'r1', 8, 64, 10, 2, 'sim', 16) FROM generate_series(1, 3) i;
SELECT gangsched.add_team('a');
SELECT gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'gpu', 2);
SELECT gangsched.set_quota('b', 'gpu', 0);
});

my $workdir = PostgreSQL::Test::Utils::tempdir();
my $connstr = $node->connstr('postgres');
my %agent_pid;

sub agent_log_file { return "$PostgreSQL::Test::Utils::log_path/agent_$_[0].log"; }
sub agent_log { my $f = agent_log_file($_[0]); return -e $f ? slurp_file($f) : ''; }

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

# Signal an agent and wait for it; returns its wait status.
sub stop_agent
{
	my ($name, $sig) = @_;
	my $pid = delete $agent_pid{$name};
	kill $sig, $pid;
	waitpid($pid, 0);
	return $?;
}

# The workers the agents still track, from their state files.
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
	# never leave an agent or a trainer behind, whatever happened
	kill 'KILL', $_ foreach values %agent_pid;
	waitpid($_, 0) foreach values %agent_pid;
	kill 'KILL', -$_ foreach tracked_process_groups();
}

sub trainer_log
{
	my ($job) = @_;
	my $f = "$workdir/$job/trainer.log";
	return -e $f ? slurp_file($f) : '';
}

sub count_lines
{
	my ($text, $re) = @_;
	my @m = grep { /$re/ } split /\n/, $text;
	return scalar @m;
}

# pids of a job's trainers, by rank, from their pid files
sub trainer_pids
{
	my ($job, @ranks) = @_;
	my @pids;
	foreach my $r (@ranks)
	{
		my $pid = slurp_file("$workdir/$job/rank$r.pid");
		chomp $pid;
		push @pids, $pid;
	}
	return @pids;
}

sub alive { my $n = 0; foreach (@_) { $n++ if kill 0, $_; } return $n; }

start_agent("n$_") foreach 1 .. 3;
ok(poll_until('SELECT count(*) FROM gangsched.nodes WHERE heartbeat_at IS NOT NULL', '3', 20),
	'three agents connected and sent heartbeats');

# -------------------------------------------------------------------------
# Team B borrows the whole cluster
# -------------------------------------------------------------------------
my $b = sql("SELECT gangsched.submit('b', 6, 1, name => 'b-train', command => 'exec sh $trainer 100000 0.1')");
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $b", 'running', 20),
	"team B's 6-worker gang is placed and every agent confirms it");
is(sql("SELECT count(DISTINCT node), bool_and(borrowed) FROM gangsched.placements WHERE job = $b"),
	'3|t', 'it fills all three nodes, on borrowed capacity');
ok(wait_for(sub { count_lines(trainer_log($b), qr/ start step=0 /) == 6 }, 10, 'six trainers'),
	'six trainer processes started from step 0');

my $rank0_node = sql("SELECT node FROM gangsched.placements WHERE job = $b AND worker = 0");
my $port = 29500 + $b % 1000;
like(
	trainer_log($b),
	qr/rank=0 .* start step=0 world=6 local_rank=0 master=$rank0_node:$port devices=0\n/,
	'rank 0 got RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR (its node), MASTER_PORT and CUDA_VISIBLE_DEVICES');
like(trainer_log($b), qr/rank=5 .* start step=0 world=6 local_rank=1 master=$rank0_node:$port devices=1\n/,
	'rank 5 too, with its own local rank and device');

ok( wait_for(
		sub {
			my $f = "$workdir/$b/progress";
			return -e $f && slurp_file($f) >= 5;
		},
		20,
		'B to make progress'),
	'B trains (step 5 reached)');

# -------------------------------------------------------------------------
# Team A reclaims its quota: B checkpoints and releases, A starts at once
# -------------------------------------------------------------------------
my $a = sql("SELECT gangsched.submit('a', 2, 1, name => 'a-train', command => 'exec sh $trainer 20 0.1')");
ok(poll_until("SELECT state IN ('running', 'finished') FROM gangsched.jobs WHERE job = $a", 't', 30),
	"team A's job runs, with nobody calling run_round()");
is( sql(
		"SELECT string_agg(kind || ': ' || reason, '; ' ORDER BY id) FROM gangsched.events
		  WHERE job = $b AND kind IN ('preempting', 'requeued')"),
	"preempting: preempted for job $a (reclaim); requeued: preempted for job $a; released after a checkpoint",
	'B was preempted for A and released after a checkpoint');
ok(wait_for(sub { count_lines(trainer_log($b), qr/checkpoint step=\d+ \(SIGTERM\)/) == 6 }, 10, 'checkpoints'),
	"all six of B's trainers got SIGTERM and exited");
my ($ckpt_step) = trainer_log($b) =~ /rank=0 .* checkpoint step=(\d+) \(SIGTERM\)/;
cmp_ok($ckpt_step, '>=', 5, "B's rank 0 wrote its checkpoint at step $ckpt_step");

my $gap = sql(
	"SELECT extract(epoch FROM (SELECT at FROM gangsched.events WHERE job = $a AND kind = 'running')
	                         - (SELECT at FROM gangsched.events WHERE job = $b AND kind = 'requeued'))");
# that A was placed by the release itself is asserted next (same
# transaction); the time to running is the agents' and is printed only
cmp_ok($gap, '>=', 0, "A was running after B's release, not before");
note sprintf("A was running %.3f s after B's release", $gap);
is( sql(
		"SELECT (SELECT xmin FROM gangsched.events WHERE job = $a AND kind = 'placed')
		      = (SELECT xmin FROM gangsched.events WHERE job = $b AND kind = 'requeued')"),
	't', "A was placed in the transaction of B's release");
is(sql("SELECT preemptions || ' ' || lost_gpu_seconds FROM gangsched.jobs WHERE job = $b"),
	'1 0', 'B lost no work (it checkpointed)');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold after the preemption');

# -------------------------------------------------------------------------
# A finishes; B comes back and resumes from its checkpoint
# -------------------------------------------------------------------------
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $a", 'finished', 20),
	'A finished (reported by the agent of its rank 0)');
like(sql("SELECT message FROM gangsched.jobs WHERE job = $a"),
	qr/^node n\d: rank 0: exit 0, rank 1: exit 0$/, 'with its workers\' exit statuses');
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $b", 'running', 20), 'B runs again');
ok(wait_for(sub { count_lines(trainer_log($b), qr/ start step=/) == 12 }, 10, 'B restarted'),
	"B's six trainers started again");
like(trainer_log($b), qr/rank=0 .* start step=$ckpt_step /,
	"B's rank 0 resumed from its checkpointed step $ckpt_step, not from zero");
is(count_lines(trainer_log($b), qr/ start step=$ckpt_step /), 6, 'so did every rank');

# -------------------------------------------------------------------------
# An agent killed and restarted adopts its running workers
# -------------------------------------------------------------------------
my $victim = sql("SELECT node FROM gangsched.placements WHERE job = $b AND worker = 0");
my @ranks = split /,/,
  sql("SELECT string_agg(worker::text, ',' ORDER BY worker) FROM gangsched.placements WHERE job = $b AND node = '$victim'");
my @pids = trainer_pids($b, @ranks);
my $starts = count_lines(trainer_log($b), qr/ start step=/);
is(alive(@pids), 2, "B's two trainers on $victim (ranks @ranks) run");

stop_agent($victim, 'KILL');
usleep(500_000);
is(alive(@pids), 2, "they keep running when $victim\'s agent is killed (SIGKILL)");
my $log_before = length(agent_log($victim));
start_agent($victim);
ok( wait_for(
		sub { substr(agent_log($victim), $log_before) =~ /job $b: found 2 of its 2 local workers still running/ },
		10, 'the restarted agent'),
	'the restarted agent finds its two workers still running');
ok(wait_for(sub { substr(agent_log($victim), $log_before) =~ /connected to database/ }, 10, 'reconnect'),
	'and connects');
sleep 2;    # two heartbeats, two resyncs
is(count_lines(trainer_log($b), qr/ start step=/), $starts, 'no worker was started twice');
is(alive(@pids), 2, 'the same two trainer processes still run');
is( sql(
		"SELECT state || ' ' || (SELECT string_agg(action, ',') FROM gangsched.node_work('$victim'))
		   FROM gangsched.jobs WHERE job = $b"),
	'running run,run',
	'B stays running, both workers accounted for');

# -------------------------------------------------------------------------
# A server restart loses and duplicates nothing
# -------------------------------------------------------------------------
my @all_ranks = (0 .. 5);
my @all_pids = trainer_pids($b, @all_ranks);
my $placed_at = sql("SELECT placed_at FROM gangsched.jobs WHERE job = $b");
my %log_len = map { ($_ => length(agent_log($_))) } keys %agent_pid;
$node->restart;
foreach my $n (sort keys %agent_pid)
{
	ok(wait_for(sub { substr(agent_log($n), $log_len{$n}) =~ /reconnected to database/ }, 30, "$n to reconnect"),
		"agent $n reconnected after the server restart");
}
sleep 2;    # resyncs
is(alive(@all_pids), 6, "B's six trainers ran through the restart");
is(count_lines(trainer_log($b), qr/ start step=/), $starts, 'none was started again');
is(sql("SELECT state, placed_at = '$placed_at' FROM gangsched.jobs WHERE job = $b"),
	'running|t', 'B is still running, in the same placement');
is(sql("SELECT count(*) FROM gangsched.jobs WHERE state IN ('nominated', 'placed', 'running', 'preempting')"),
	'1', 'no other job appeared');
is(sql("SELECT count(*) FROM gangsched.placements WHERE job = $b"), '6', 'B holds its six workers');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold after the restart');

# -------------------------------------------------------------------------
# Cancel kills the workers; a failing worker fails its job
# -------------------------------------------------------------------------
sql("SELECT gangsched.cancel($b)");
ok(wait_for(sub { alive(@all_pids) == 0 }, 10, "B's trainers to die"), "cancel: the agents killed B's six trainers");

my $f = sql(
	"SELECT gangsched.submit('a', 2, 1, name => 'a-fails',
	                         command => 'export TRAINER_FAIL_AT=3; exec sh $trainer 100 0.05')");
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $f", 'failed', 20), 'a job whose workers exit 3 failed');
like(sql("SELECT message FROM gangsched.jobs WHERE job = $f"), qr/rank \d: exit 3/, 'the message has the exit status');

my $idle = sql("SELECT gangsched.submit('a', 1, 1, name => 'no command')");
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $idle", 'running', 20),
	'a job without a command is confirmed and holds its capacity');
sql("SELECT gangsched.cancel($idle)");

# -------------------------------------------------------------------------
# A pipeline (submit's after): each step starts when the one before has
# finished, with the worker running the rounds; a failing step fails the
# steps after it at once
# -------------------------------------------------------------------------
my $train = sql("SELECT gangsched.submit('a', 2, 1, name => 'p-train', command => 'exec sh $trainer 20 0.05')");
my $eval = sql("SELECT gangsched.submit('a', 1, 1, name => 'p-eval', after => ARRAY[$train]::bigint[],
                                        command => 'exec sh $trainer 5 0.05')");
my $export = sql("SELECT gangsched.submit('a', 1, 1, name => 'p-export', after => ARRAY[$eval]::bigint[],
                                          command => 'exec sh $trainer 5 0.05')");
like(sql("SELECT reason FROM gangsched.jobs WHERE job = $export"), qr/^waiting for job $eval to finish successfully$/,
	'the last step waits for the one before');
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $export", 'finished', 30),
	'the pipeline ran to its end without anybody calling run_round()');
is(sql("SELECT bool_and(e.started_at >= t.finished_at) FROM gangsched.jobs t, gangsched.jobs e
         WHERE (t.job, e.job) IN (($train, $eval), ($eval, $export))"), 't',
	'each step started after the one before had finished');
# The three in one transaction: p-bad fails about 0.1 s after it starts,
# and a step submitted after that is refused (what it waits for has failed
# already), so a portal that submits them one by one races the worker,
# woken by each commit (CI saw it once, on a loaded machine).
my ($bad, $after_bad, $cleanup) = split /\n/, sql("BEGIN;
SELECT gangsched.submit('a', 1, 1, name => 'p-bad',
                        command => 'export TRAINER_FAIL_AT=2; exec sh $trainer 100 0.05') AS bad \\gset
SELECT :bad;
SELECT gangsched.submit('a', 1, 1, name => 'p-after-bad', after => ARRAY[:bad]::bigint[]);
SELECT gangsched.submit('a', 1, 1, name => 'p-cleanup', after => ARRAY[:bad]::bigint[],
                        after_mode => 'any', command => 'exec sh $trainer 2 0.05');
COMMIT;");
like("$bad $after_bad $cleanup", qr/^\d+ \d+ \d+$/, 'a failing step and two steps after it submitted in one transaction');
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $after_bad", 'failed', 20),
	'a step after a failing one fails');
is(sql("SELECT reason FROM gangsched.jobs WHERE job = $after_bad"), "job $bad, which it waits for, failed",
	'with the reason');
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $cleanup", 'finished', 20),
	'a step after any end runs after the failure');

ok(wait_for(sub { scalar(tracked_process_groups()) == 0 }, 10, 'the agents to drop their records'),
	'the agents track no worker any more');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold at the end');

# -------------------------------------------------------------------------
# Agents stop cleanly
# -------------------------------------------------------------------------
foreach my $n (sort keys %agent_pid)
{
	is(stop_agent($n, 'TERM'), 0, "agent $n exits 0 on SIGTERM");
	unlike(agent_log($n), qr/ ERROR: /, "agent $n logged no error");
}

$node->stop;
ok(!$node->log_contains('terminated by signal') && !$node->log_contains('PANIC'), 'no crash in the server log');

done_testing();
