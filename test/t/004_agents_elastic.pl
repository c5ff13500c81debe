# Elastic gangs end to end with real processes (docs/elastic.md, docs/agent.md):
# a server whose background worker runs the rounds, two nodes with a
# gangsched-agent each, and an elastic job whose workers are
# tools/agent/trainer.sh (a step counter that checkpoints on SIGTERM and
# resumes from its checkpoint). Nobody calls run_round() here.
#
# - the elastic job starts at its minimum of 2 replicas (the rest of the
#   cluster is held), then grows to 4 when capacity frees: the agent stops
#   its two running trainers (SIGTERM, they checkpoint) and starts all four
#   of the node's workers at world size 4, ranks 0..3, from the checkpoint;
# - an agent killed and restarted adopts the resized workers (nothing is
#   started again);
# - a reclaim shrinks it back to 2 replicas instead of preempting it whole:
#   the released workers checkpoint and stop, the agent calls
#   workers_released, the two remaining workers restart at world size 2
#   from the checkpoint, and the reclaiming job runs; the agent is killed
#   and restarted while the workers checkpoint, and finishes the shrink;
# - at its minimum it is preempted whole; its agent is restarted while the
#   server is down and leaves the checkpointing trainers alone;
# - across two nodes: a grow onto a node new to the job, then a shrink that
#   releases all of that node's workers while the other node restarts its
#   workers at the new size;
# - workers that ignore SIGTERM are killed after the restart grace;
# - an agent killed while launching a job's workers: the next one kills
#   what was launched and starts them all again;
# - check_invariants() is empty at the end.
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

my $node = PostgreSQL::Test::Cluster->new('elastic');
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

# two nodes of 4 GPUs; team x holds capacity within its quota, team e
# (quota 0) runs the elastic job on borrowed capacity, team p reclaims
sql(q{
CREATE EXTENSION gangsched CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n' || i, 'gpu', 'r1', 8, 64, 10, 4, 'sim', 16) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('x');
SELECT gangsched.add_team('e');
SELECT gangsched.add_team('p');
SELECT gangsched.set_quota('x', 'gpu', 6);
SELECT gangsched.set_quota('e', 'gpu', 0);
SELECT gangsched.set_quota('p', 'gpu', 2);
});

my $workdir = PostgreSQL::Test::Utils::tempdir();
my $connstr = $node->connstr('postgres');
my %agent_pid;

sub agent_log_file { return "$PostgreSQL::Test::Utils::log_path/elastic_agent_$_[0].log"; }
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

# the trainer log's lines of one kind since offset $from
sub trainer_since { my ($job, $from) = @_; return substr(trainer_log($job), $from); }

start_agent("n$_") foreach 1 .. 2;
ok(poll_until('SELECT count(*) FROM gangsched.nodes WHERE heartbeat_at IS NOT NULL', '2', 20),
	'two agents connected and sent heartbeats');

# -------------------------------------------------------------------------
# Team x holds one whole node and half of the other (no processes)
# -------------------------------------------------------------------------
my $x = sql("SELECT gangsched.submit('x', 1, 4, name => 'x-whole-node')");
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $x", 'running', 20), 'x holds a whole node');
my $full = sql("SELECT string_agg(DISTINCT node, ',') FROM gangsched.placements WHERE job = $x");
my $en = $full eq 'n1' ? 'n2' : 'n1';
my $y = sql("SELECT gangsched.submit('x', 1, 2, name => 'x-half-node')");
ok(poll_until("SELECT state || ' ' || (SELECT string_agg(DISTINCT node, ',') FROM gangsched.placements WHERE job = $y) FROM gangsched.jobs WHERE job = $y",
		"running $en", 20),
	"and half of $en");

# -------------------------------------------------------------------------
# The elastic job starts at its minimum, 2 of 4 replicas
# -------------------------------------------------------------------------
my $e = sql(
	"SELECT gangsched.submit('e', 4, 1, name => 'e-elastic', min_replicas => 2,
	                         command => 'export TRAINER_STOP_DELAY=3; exec sh $trainer 100000 0.1')");
ok(poll_until("SELECT state || ' ' || workers FROM gangsched.jobs WHERE job = $e", 'running 2', 20),
	'the elastic job runs at its minimum, 2 workers');
is(sql("SELECT string_agg(DISTINCT node, ',') FROM gangsched.placements WHERE job = $e"), $en, "on $en");
ok(wait_for(sub { count_lines(trainer_log($e), qr/ start step=0 world=2 /) == 2 }, 10, 'two trainers'),
	'two trainers started at world size 2');
like(trainer_log($e), qr/rank=0 .* env gangsched_rank=0 gangsched_world_size=2 time_left=unset\n/,
	'rank 0 got GANGSCHED_RANK and GANGSCHED_WORLD_SIZE, and no GANGSCHED_TIME_LEFT (the job has no time limit)');
ok( wait_for(
		sub {
			my $f = "$workdir/$e/progress";
			return -e $f && slurp_file($f) >= 5;
		},
		20,
		'the elastic job to make progress'),
	'it trains (step 5 reached)');

# -------------------------------------------------------------------------
# Capacity frees: the job grows to 4 replicas; its workers restart at
# world size 4 from their checkpoint
# -------------------------------------------------------------------------
my @old_pids = trainer_pids($e, 0, 1);
my $log_from = length(trainer_log($e));
my $alog = length(agent_log($en));
sql("SELECT gangsched.cancel($y)");
ok(poll_until("SELECT state || ' ' || workers FROM gangsched.jobs WHERE job = $e", 'running 4', 20),
	'the elastic job grew to 4 workers');
# the trainers take 3 seconds to stop (TRAINER_STOP_DELAY): the agent is
# killed and started again meanwhile, and finishes the restart
ok( wait_for(sub { substr(agent_log($en), $alog) =~ /job $e: resized \(world size 2 -> 4, 2 -> 4 workers here\)/ }, 20,
		'the restart'),
	'the agent stops the two workers to restart them at world size 4');
stop_agent($en, 'KILL');
is(alive(@old_pids), 2, 'the agent is killed while they checkpoint');
$alog = length(agent_log($en));
start_agent($en);
is(sql("SELECT string_agg(worker || '\@' || node, ',' ORDER BY worker) FROM gangsched.placements WHERE job = $e"),
	"0\@$en,1\@$en,2\@$en,3\@$en", "its four workers on $en");
is(sql("SELECT count(*) FROM gangsched.events WHERE job = $e AND kind = 'grown'"), '1', "a 'grown' event");
ok( wait_for(sub { count_lines(trainer_since($e, $log_from), qr/ start step=\d+ world=4 /) == 4 }, 20,
		'four trainers at world size 4'),
	'the agent started four trainers at world size 4');
my $since = trainer_since($e, $log_from);
is(count_lines($since, qr/checkpoint step=\d+ \(SIGTERM\)/), 2, 'after the two running ones checkpointed on SIGTERM');
my ($ckpt1) = $since =~ /rank=0 .* checkpoint step=(\d+) \(SIGTERM\)/;
cmp_ok($ckpt1 // 0, '>=', 5, "rank 0 checkpointed at step " . ($ckpt1 // '?'));
is(join(',', map { $since =~ /rank=$_ .* start step=(\d+) world=4 local_rank=$_ / ? $1 : 'none' } 0 .. 3),
	join(',', ($ckpt1 // -1) x 4),
	'ranks 0..3 (local ranks 0..3) all resumed from the checkpointed step');
is(alive(@old_pids), 0, 'the trainers of world size 2 are gone');
is(alive(trainer_pids($e, 0 .. 3)), 4, 'the four new ones run');
ok(wait_for(sub { trainer_since($e, $log_from) =~ /rank=3 .* env gangsched_rank=3 gangsched_world_size=4 / }, 10, 'env'),
	'GANGSCHED_WORLD_SIZE is 4');
is(sql("SELECT state FROM gangsched.jobs WHERE job = $e"), 'running', 'the job stayed running throughout');
like(substr(agent_log($en), $alog), qr/job $e: local workers stopped; starting 4 of its 4 workers at world size 4/,
	'the restarted agent started them');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold after the grow');

# -------------------------------------------------------------------------
# The agent killed and restarted adopts the resized workers
# -------------------------------------------------------------------------
ok(wait_for(sub { my $f = "$workdir/$e/progress"; return slurp_file($f) > ($ckpt1 // 0) + 3 }, 20, 'progress'),
	'the job trains on at world size 4');
my @pids4 = trainer_pids($e, 0 .. 3);
my $starts = count_lines(trainer_log($e), qr/ start step=/);
stop_agent($en, 'KILL');
$alog = length(agent_log($en));
start_agent($en);
ok( wait_for(
		sub { substr(agent_log($en), $alog) =~ /job $e: found 4 of its 4 local workers still running/ },
		10, 'the restarted agent'),
	'the restarted agent finds the four workers');
ok(wait_for(sub { substr(agent_log($en), $alog) =~ /connected to database/ }, 10, 'reconnect'), 'and connects');
sleep 2;    # two heartbeats, two resyncs
is(count_lines(trainer_log($e), qr/ start step=/), $starts, 'no worker was started again');
is(alive(@pids4), 4, 'the same four trainers run');

# -------------------------------------------------------------------------
# Team p reclaims its quota: the elastic job shrinks back to 2 replicas
# instead of being preempted whole; the agent is killed and restarted while
# the workers checkpoint
# -------------------------------------------------------------------------
my $log2 = length(trainer_log($e));
my @released = trainer_pids($e, 2, 3);
$alog = length(agent_log($en));
my $p = sql("SELECT gangsched.submit('p', 2, 1, name => 'p-reclaim', command => 'exec sh $trainer 100000 0.1')");
ok( wait_for(sub { substr(agent_log($en), $alog) =~ /job $e: shrinking: workers released \(world size 4 -> 2, 4 -> 2 workers here\)/ },
		20, 'the shrink'),
	'the agent stops the four workers to shrink the job to world size 2');
stop_agent($en, 'KILL');
$alog = length(agent_log($en));
start_agent($en);
ok(poll_until("SELECT state IN ('running', 'finished') FROM gangsched.jobs WHERE job = $p", 't', 40),
	'the reclaiming job runs');
is(sql("SELECT state || ' ' || workers || ' ' || preemptions FROM gangsched.jobs WHERE job = $e"), 'running 2 0',
	'the elastic job runs on 2 workers: shrunk, not preempted');
is(sql("SELECT count(*) FROM gangsched.events WHERE job = $e AND kind = 'shrunk'"), '1', "a 'shrunk' event");
is(sql("SELECT string_agg(worker::text, ',' ORDER BY worker) FROM gangsched.placements WHERE job = $e"), '0,1',
	'it keeps ranks 0 and 1');
like(substr(agent_log($en), $alog), qr/job $e: shrunk; its released workers on this node stopped \(workers_released: 2 allocations ended\)/,
	'the restarted agent called workers_released once the released workers had stopped');
ok( wait_for(sub { count_lines(trainer_since($e, $log2), qr/ start step=\d+ world=2 /) == 2 }, 20,
		'two trainers at world size 2'),
	'two trainers started again at world size 2');
$since = trainer_since($e, $log2);
is(count_lines($since, qr/checkpoint step=\d+ \(SIGTERM\)/), 4, 'after all four checkpointed on SIGTERM');
like($since, qr/rank=2 .* checkpoint step=\d+ \(SIGTERM\)/, 'released rank 2 checkpointed and stopped');
like($since, qr/rank=3 .* checkpoint step=\d+ \(SIGTERM\)/, 'released rank 3 too');
is(alive(@released), 0, 'the released trainers are gone');
my ($ckpt2) = $since =~ /rank=0 .* checkpoint step=(\d+) \(SIGTERM\)/;
cmp_ok($ckpt2 // 0, '>', $ckpt1 // 0, 'rank 0 checkpointed at a later step than before the grow');
is(join(',', map { $since =~ /rank=$_ .* start step=(\d+) world=2 local_rank=$_ / ? $1 : 'none' } 0, 1),
	join(',', ($ckpt2 // -1) x 2), 'ranks 0 and 1 resumed from that step at world size 2');
is(count_lines($since, qr/rank=[23] .* start step=/), 0, 'ranks 2 and 3 were not started again');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold after the shrink');


# -------------------------------------------------------------------------
# At its minimum the job is preempted whole; its agent is restarted while
# the server is down and the trainers still checkpoint: it does not kill
# them (the grace deadline is in its state file), and releases once the
# server is back
# -------------------------------------------------------------------------
my @last = trainer_pids($e, 0, 1);
$alog = length(agent_log($en));
my $x2 = sql("SELECT gangsched.submit('x', 1, 2, name => 'x-reclaims')");
ok(wait_for(sub { substr(agent_log($en), $alog) =~ /job $e: preempted; SIGTERM to 2 local workers/ }, 20, 'the preemption'),
	'the job at its minimum is preempted whole: SIGTERM to its two workers');
stop_agent($en, 'KILL');
$node->stop('fast');
$alog = length(agent_log($en));
start_agent($en);
ok(wait_for(sub { substr(agent_log($en), $alog) =~ /could not connect to the server/ }, 10, 'the agent to try'),
	'the restarted agent cannot reach the server');
usleep(500_000);
is(alive(@last), 2, 'and leaves the two checkpointing trainers alone');
unlike(agent_log($en), qr/job $e: grace deadline reached/, 'no grace deadline was reached');
$node->start;
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $x2", 'running', 40), 'the reclaiming job runs');
is( sql("SELECT reason FROM gangsched.events WHERE job = $e AND kind = 'requeued' ORDER BY id DESC LIMIT 1"),
	"preempted for job $x2; released after a checkpoint",
	'the elastic job was released after a checkpoint');
like(substr(agent_log($en), $alog), qr/job $e: released \(checkpointed = true; rank 0: exit 0, rank 1: exit 0\)/,
	'reported by the restarted agent');

sql("SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE state NOT IN ('finished', 'failed', 'cancelled', 'expired')");

# -------------------------------------------------------------------------
# Across two nodes: a grow onto a node new to the job, then a shrink that
# releases every worker of that node (its agent calls workers_released and
# drops the job) while the other node's agent restarts the remaining
# workers at world size 2 without releasing anything
# -------------------------------------------------------------------------
ok(poll_until("SELECT count(*) FROM gangsched.jobs WHERE state IN ('nominated', 'placed', 'running', 'preempting')", '0', 20),
	'the cluster is empty again');
my $x3 = sql("SELECT gangsched.submit('x', 1, 4, name => 'x-hold')");
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $x3", 'running', 20), 'x holds a whole node');
my $na = sql("SELECT string_agg(DISTINCT node, ',') FROM gangsched.placements WHERE job = $x3");
my $nb = $na eq 'n1' ? 'n2' : 'n1';
my $e2 = sql(
	"SELECT gangsched.submit('e', 4, 2, name => 'e-two-nodes', min_replicas => 2,
	                         command => 'export TRAINER_STOP_DELAY=1; exec sh $trainer 100000 0.1')");
ok(poll_until("SELECT state || ' ' || workers || ' ' || (SELECT string_agg(DISTINCT node, ',') FROM gangsched.placements WHERE job = $e2)
                 FROM gangsched.jobs WHERE job = $e2", "running 2 $nb", 20),
	"a second elastic job runs on 2 workers of 2 GPUs on $nb");
ok(wait_for(sub { my $f = "$workdir/$e2/progress"; return -e $f && slurp_file($f) >= 3 }, 20, 'progress'), 'it trains');
$log_from = length(trainer_log($e2));
my %alog_at = map { ($_ => length(agent_log($_))) } ($na, $nb);
sql("SELECT gangsched.cancel($x3)");
ok(poll_until("SELECT string_agg(worker || '\@' || node, ',' ORDER BY worker) FROM (SELECT DISTINCT worker, node FROM gangsched.placements WHERE job = $e2) p",
		"0\@$nb,1\@$nb,2\@$na,3\@$na", 20),
	"it grows to 4 workers, ranks 2 and 3 on $na");
ok( wait_for(sub { count_lines(trainer_since($e2, $log_from), qr/ start step=\d+ world=4 /) == 4 }, 20,
		'four trainers at world size 4'),
	'four trainers run at world size 4');
$since = trainer_since($e2, $log_from);
my ($c3) = $since =~ /rank=0 .* checkpoint step=(\d+) \(SIGTERM\)/;
is(join(',', map { $since =~ /rank=$_ node=$nb .* start step=(\d+) world=4 local_rank=$_ / ? $1 : 'none' } 0, 1),
	join(',', ($c3 // -1) x 2), "ranks 0 and 1 restarted on $nb from their checkpoint");
like($since, qr/rank=2 node=$na .* start step=\d+ world=4 local_rank=0 /, "rank 2 started on $na, local rank 0");
like($since, qr/rank=3 node=$na .* start step=\d+ world=4 local_rank=1 /, "rank 3 too, local rank 1");
like(substr(agent_log($na), $alog_at{$na}), qr/job $e2: placed here; launching 2 of its 4 workers/,
	"$na\'s agent launched the new workers of a job new to it");

$log_from = length(trainer_log($e2));
%alog_at = map { ($_ => length(agent_log($_))) } ($na, $nb);
my $x4 = sql("SELECT gangsched.submit('x', 2, 2, name => 'x-reclaims-two')");
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $x4", 'running', 30), 'x reclaims 2 workers of 2 GPUs');
is(sql("SELECT state || ' ' || workers || ' ' || preemptions FROM gangsched.jobs WHERE job = $e2"), 'running 2 0',
	'the elastic job shrank to 2 workers');
ok( wait_for(sub { count_lines(trainer_since($e2, $log_from), qr/ start step=\d+ world=2 /) == 2 }, 20,
		'two trainers at world size 2'),
	'two trainers run at world size 2');
$since = trainer_since($e2, $log_from);
like(substr(agent_log($na), $alog_at{$na}),
	qr/job $e2: shrinking: workers released \(world size 4 -> 2, 2 -> 0 workers here\); SIGTERM to 2 local workers to stop them/,
	"$na holds only released workers: its agent stops them");
like(substr(agent_log($na), $alog_at{$na}),
	qr/job $e2: shrunk; its released workers on this node stopped \(workers_released: 2 allocations ended\).*\n.*job $e2: no worker of it is left on this node/,
	"$na\'s agent stopped the released ranks 2 and 3, called workers_released and dropped the job");
like(substr(agent_log($nb), $alog_at{$nb}), qr/job $e2: resized \(world size 4 -> 2, 2 -> 2 workers here\)/,
	"$nb\'s agent restarted ranks 0 and 1 at world size 2");
unlike(substr(agent_log($nb), $alog_at{$nb}), qr/workers_released/, 'without releasing anything');
my ($c4) = $since =~ /rank=0 .* checkpoint step=(\d+) \(SIGTERM\)/;
is(join(',', map { $since =~ /rank=$_ node=$nb .* start step=(\d+) world=2 local_rank=$_ / ? $1 : 'none' } 0, 1),
	join(',', ($c4 // -1) x 2), 'from their checkpoint');
is(count_lines($since, qr/rank=[23] .* start step=/), 0, 'ranks 2 and 3 were not started again');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold after the shrink across nodes');

# -------------------------------------------------------------------------
# Workers that do not stop within the restart grace (gangsched.default_grace,
# here 2 s) are killed, and the restart goes on
# -------------------------------------------------------------------------
sql("SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE state NOT IN ('finished', 'failed', 'cancelled', 'expired')");
ok(poll_until("SELECT count(*) FROM gangsched.jobs WHERE state IN ('nominated', 'placed', 'running', 'preempting')", '0', 20),
	'the cluster is empty again');
sql("ALTER SYSTEM SET gangsched.default_grace = '2s'");
sql("SELECT pg_reload_conf()");
my $x5 = sql("SELECT gangsched.submit('x', 1, 4, name => 'x-hold-again')");
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $x5", 'running', 20), 'x holds a whole node');
$na = sql("SELECT string_agg(DISTINCT node, ',') FROM gangsched.placements WHERE job = $x5");
$nb = $na eq 'n1' ? 'n2' : 'n1';
my $e3 = sql(
	"SELECT gangsched.submit('e', 4, 2, name => 'e-slow-to-stop', min_replicas => 2,
	                         command => 'export TRAINER_STOP_DELAY=600; exec sh $trainer 100000 0.1')");
ok(poll_until("SELECT state || ' ' || workers FROM gangsched.jobs WHERE job = $e3", 'running 2', 20),
	'a third elastic job runs on 2 workers');
ok(wait_for(sub { count_lines(trainer_log($e3), qr/ start step=0 world=2 /) == 2 }, 10, 'two trainers'), 'two trainers');
my @slow = trainer_pids($e3, 0, 1);
$alog = length(agent_log($nb));
sql("SELECT gangsched.cancel($x5)");
ok( wait_for(sub { count_lines(trainer_log($e3), qr/ start step=\d+ world=4 /) == 4 }, 20,
		'four trainers at world size 4'),
	'it grows to 4 workers and four trainers run at world size 4');
like(substr(agent_log($nb), $alog),
	qr/job $e3: resized .* SIGKILL in 2\.0 s\n(.*\n)*.*job $e3: restart deadline reached with 2 local workers running; SIGKILL\n(.*\n)*.*job $e3: local workers stopped \(some killed at the restart's deadline\); starting 2 of its 4 workers at world size 4/,
	"the two that ignored SIGTERM were killed after the restart grace (default_grace), then started again");
is(alive(@slow), 0, 'they are gone');
is(count_lines(trainer_log($e3), qr/checkpoint step=/), 0, 'without a checkpoint');
is(sql("SELECT state FROM gangsched.jobs WHERE job = $e3"), 'running', 'the job runs on');
# An agent killed while it launches a job's workers leaves a record that
# says so (as if it had been killed between two of them, simulated here by
# editing the record): the next agent kills the workers launched and starts
# them all again, rather than starting second copies
my ($state_file) = glob("$workdir/.agent-$nb/job-$e3-*.state");
ok(defined $state_file && slurp_file($state_file) =~ /^launching 0$/m, "$nb\'s record of the job says its launch is done");
my @before = trainer_pids($e3, 0, 1);
my $starts3 = count_lines(trainer_log($e3), qr/ start step=/);
stop_agent($nb, 'KILL');
{
	my $text = slurp_file($state_file);
	$text =~ s/^launching 0$/launching 1/m;
	open(my $fh, '>', $state_file) or die "write $state_file: $!";
	print $fh $text;
	close($fh);
}
$alog = length(agent_log($nb));
start_agent($nb);
ok( wait_for(sub { count_lines(trainer_log($e3), qr/ start step=/) == $starts3 + 2 }, 20, 'the relaunch'),
	'the restarted agent starts the two workers again');
like(substr(agent_log($nb), $alog), qr/job $e3: the previous agent stopped while launching its workers; SIGKILL to the 2 it launched/,
	'after killing the two it found');
is(alive(@before), 0, 'the old two are gone');
is(alive(trainer_pids($e3, 0, 1)), 2, 'two run, not four');
is(sql("SELECT state || ' ' || workers FROM gangsched.jobs WHERE job = $e3"), 'running 4', 'the job runs on at 4 workers');
sql("ALTER SYSTEM RESET gangsched.default_grace");
sql("SELECT pg_reload_conf()");

sql("SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE state NOT IN ('finished', 'failed', 'cancelled', 'expired')");
ok(wait_for(sub { scalar(tracked_process_groups()) == 0 }, 10, 'the agents to drop their records'),
	'the agents track no worker any more');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold at the end');

foreach my $n (sort keys %agent_pid)
{
	is(stop_agent($n, 'TERM'), 0, "agent $n exits 0 on SIGTERM");
	# (an agent started while the server is down says so at ERROR level)
	unlike(join("\n", grep { !/could not connect to the server/ } split /\n/, agent_log($n)),
		qr/ ERROR: /, "agent $n logged no other error");
}

$node->stop;
ok(!$node->log_contains('terminated by signal') && !$node->log_contains('PANIC'), 'no crash in the server log');

done_testing();
