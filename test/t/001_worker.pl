# The scheduler background worker: its life cycle on a real server.
#
# - it shows up in pg_stat_activity as backend_type 'gangsched scheduler';
# - before CREATE EXTENSION it waits (and says so) and does no harm;
# - a commit that submits wakes it at once: a job is placed without anyone
#   calling run_round(), although gangsched.round_interval is a minute;
# - an ERROR inside a round is logged and the worker goes on;
# - SIGHUP reloads gangsched.round_interval;
# - SIGTERM ends it cleanly (and the postmaster starts it again);
# - on a streaming standby it never runs a round.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# Poll $sql until it returns $expected, for at most $timeout seconds.
sub poll_until
{
	my ($node, $sql, $expected, $timeout) = @_;
	my $deadline = time + $timeout;
	my ($out, $err) = ('', '');
	while (time < $deadline)
	{
		$node->psql('postgres', $sql, stdout => \$out, stderr => \$err);
		return 1 if $out eq $expected;
		usleep(100_000);
	}
	diag "timed out after ${timeout}s: $sql\nexpected: $expected\ngot: $out\nstderr: $err";
	return 0;
}

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init(allows_streaming => 1);
my $host = $node->host;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'pg_cron,gangsched'
cron.database_name = 'postgres'
cron.host = '$host'
gangsched.database = 'postgres'
gangsched.enabled = on
# long on purpose: a job placed quickly was placed by a wake-up
gangsched.round_interval = '1min'
});
$node->start;

# -------------------------------------------------------------------------
# The worker is there, and waits for the extension
# -------------------------------------------------------------------------
ok( poll_until(
		$node,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler' AND datname = 'postgres'",
		'1', 30),
	'the worker shows up in pg_stat_activity with backend_type gangsched scheduler');
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler'");

$node->wait_for_log(
	qr/gangsched scheduler worker waits: extension gangsched is not installed in database "postgres"/);
pass('before CREATE EXTENSION the worker logs that it waits');

# a minute's interval, but a SIGHUP wakes it: still nothing happens
$node->reload;
usleep(300_000);
is( $node->safe_psql(
		'postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler'"),
	$pid,
	'without the extension the worker stays up (same process)');
ok(!$node->log_contains('round failed'), 'and no round was tried without the extension');

# -------------------------------------------------------------------------
# A commit that submits wakes it
# -------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION gangsched CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 16, 128, 10, 4, 'sim', 16);
SELECT gangsched.add_team('t');
});
# gangsched.round_interval is 1 min: a placement within the poll's 10 s
# can only come from the wake-up (the worker's first round ran before the
# extension existed); the time taken is printed, not asserted.
my $t0 = time;
my $job1 = $node->safe_psql('postgres', "SELECT gangsched.submit('t', 1, 1, name => 'woken')");
ok(poll_until($node, "SELECT state FROM gangsched.jobs WHERE job = $job1", 'placed', 10),
	'a submitted job is placed by the worker without anyone calling run_round(): the commit woke it');
note sprintf('placed %.2f s after the submit', time - $t0);
my ($wakeups, $rounds) = split /\|/,
  $node->safe_psql('postgres', 'SELECT wakeups, rounds FROM gangsched.worker_status()');
cmp_ok($wakeups, '>=', 1, 'worker_status() counts the wake-ups');
cmp_ok($rounds, '>=', 1, 'worker_status() counts the rounds');

# -------------------------------------------------------------------------
# An ERROR inside a round is logged; the worker goes on
# -------------------------------------------------------------------------
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	"ALTER TABLE gangsched.gangs ADD CONSTRAINT test_no_placing CHECK (state <> 'placed') NOT VALID");
my $job2 = $node->safe_psql('postgres', "SELECT gangsched.submit('t', 1, 1, name => 'blocked')");
$node->wait_for_log(qr/gangsched scheduler round failed: .*test_no_placing.* \(SQLSTATE 23514\)/, $log_offset);
pass('an error inside a round is logged, with its SQLSTATE');
# the log line's CONTEXT names the statement of the round that failed
like(
	slurp_file($node->logfile, $log_offset),
	qr/round failed: [^\n]*\(SQLSTATE 23514\)\n(?:[^\n]*\n){0,3}?[^\n]*CONTEXT:  SQL statement "WITH p AS \(/,
	'and with its context: the statement that failed');
is($node->safe_psql('postgres', "SELECT state FROM gangsched.jobs WHERE job = $job2"),
	'pending', 'the failed round changed nothing');
is( $node->safe_psql(
		'postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler'"),
	$pid,
	'the worker survived the error (same process)');
$node->safe_psql('postgres', 'ALTER TABLE gangsched.gangs DROP CONSTRAINT test_no_placing');

# -------------------------------------------------------------------------
# SIGHUP reloads gangsched.round_interval
# -------------------------------------------------------------------------
# With a minute's interval and nothing to wake it, the worker is idle.
my $r0 = $node->safe_psql('postgres', 'SELECT rounds FROM gangsched.worker_status()');
sleep 1;
my $r1 = $node->safe_psql('postgres', 'SELECT rounds FROM gangsched.worker_status()');
cmp_ok($r1 - $r0, '<=', 1, 'idle with gangsched.round_interval = 1min');
$node->safe_psql('postgres', "ALTER SYSTEM SET gangsched.round_interval = '100ms'");
$node->reload;
ok(poll_until($node, "SELECT state FROM gangsched.jobs WHERE job = $job2", 'placed', 10),
	'after the reload the worker places the job the failed round left');
$r0 = $node->safe_psql('postgres', 'SELECT rounds FROM gangsched.worker_status()');
sleep 2;
$r1 = $node->safe_psql('postgres', 'SELECT rounds FROM gangsched.worker_status()');
cmp_ok($r1 - $r0, '>=', 5, "after SIGHUP it runs a round every 100 ms (${\ ($r1 - $r0)} rounds in 2 s)");

# The worker folds the metrics' counts after its rounds, in a transaction of
# its own (the rounds themselves leave them): the deltas empty out, and the
# counters hold both submits and both placements, once each.
ok(poll_until($node, 'SELECT count(*) FROM gangsched.metric_deltas', '0', 10),
	'the worker folded the counts its rounds and the submits wrote');
is( $node->safe_psql(
		'postgres', "SELECT string_agg(c.name || '=' || c.value, ',' ORDER BY c.name)
		  FROM gangsched.metric_counters c JOIN gangsched.teams t ON t.id = c.team_id
		 WHERE t.name = 't' AND c.name IN ('jobs_submitted', 'jobs_placed')"),
	'jobs_placed=2,jobs_submitted=2',
	'the counters hold each submit and each placement once');
is( $node->safe_psql(
		'postgres', "SELECT value FROM gangsched.metrics
		 WHERE name = 'gangsched_team_jobs_placed_total' AND labels ->> 'team' = 't'"),
	'2', 'and the view reads them');
is($node->safe_psql('postgres', 'SELECT count(*) FROM gangsched.check_invariants()'),
	'0', 'invariants hold');

# -------------------------------------------------------------------------
# SIGTERM ends the worker cleanly; the postmaster starts it again
# -------------------------------------------------------------------------
$log_offset = -s $node->logfile;
kill 'TERM', $pid;
$node->wait_for_log(qr/terminating background worker "gangsched scheduler" due to administrator command/,
	$log_offset);
pass('SIGTERM ends the worker');

# -------------------------------------------------------------------------
# A standby never runs rounds (checked while the primary's worker restarts)
# -------------------------------------------------------------------------
$node->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'b1', has_streaming => 1);
$standby->start;
my $job3 = $node->safe_psql('postgres', "SELECT gangsched.submit('t', 1, 1, name => 'after backup')");
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
sleep 1;
is( $standby->safe_psql(
		'postgres', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler'"),
	'0',
	'no scheduler worker on the standby');
is($standby->safe_psql('postgres', 'SELECT coalesce(rounds, 0) FROM gangsched.worker_status()'),
	'0', 'the standby ran no round');
ok( !$standby->log_contains('gangsched scheduler worker started')
	  && !$standby->log_contains('round failed')
	  && !$standby->log_contains('in a read-only transaction'),
	'the standby log has no worker start and no round error');

ok( poll_until(
		$node,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler' AND pid <> $pid",
		'1', 30),
	'the postmaster restarted the worker after its SIGTERM');
ok(poll_until($node, "SELECT state FROM gangsched.jobs WHERE job = $job3", 'placed', 10),
	'the restarted worker places jobs');
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', "SELECT state FROM gangsched.jobs WHERE job = $job3"),
	'placed', 'the standby sees the primary\'s decisions, replicated');
is($node->safe_psql('postgres', 'SELECT count(*) FROM gangsched.check_invariants()'),
	'0', 'invariants hold at the end');

$standby->stop;
$node->stop;
ok(!$node->log_contains('terminated by signal') && !$node->log_contains('PANIC'),
	'no crash in the primary\'s log');

done_testing();
