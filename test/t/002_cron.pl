# Rounds driven by pg_cron instead of the background worker, and the
# round's lock, which keeps two rounds (cron's, the worker's, a
# person's) from interleaving.
#
# pg_cron 1.4.2 (Debian 12) accepts cron syntax only, so a cron-driven round
# runs at the next minute boundary: the test polls for up to 90 s.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

sub poll_until
{
	my ($node, $sql, $expected, $timeout) = @_;
	my $deadline = time + $timeout;
	my ($out, $err) = ('', '');
	while (time < $deadline)
	{
		$node->psql('postgres', $sql, stdout => \$out, stderr => \$err);
		return 1 if $out eq $expected;
		usleep(200_000);
	}
	diag "timed out after ${timeout}s: $sql\nexpected: $expected\ngot: $out\nstderr: $err";
	return 0;
}

my $node = PostgreSQL::Test::Cluster->new('cron');
$node->init;
my $host = $node->host;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'pg_cron,gangsched'
cron.database_name = 'postgres'
cron.host = '$host'
gangsched.database = 'postgres'
# the worker is loaded but paused: only cron runs rounds
gangsched.enabled = off
gangsched.round_interval = '100ms'
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_cron;
CREATE EXTENSION gangsched CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 16, 128, 10, 4, 'sim', 16);
SELECT gangsched.add_team('t');
});

# -------------------------------------------------------------------------
# Which schedules the installed pg_cron takes
# -------------------------------------------------------------------------
my $cron_version = $node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'");
my ($major, $minor) = $cron_version =~ /^(\d+)\.(\d+)/;
my ($ret, $out, $err) = $node->psql('postgres', "SELECT cron.schedule('probe', '5 seconds', 'SELECT 1')");
if ($major > 1 || ($major == 1 && $minor >= 5))
{
	is($ret, 0, "pg_cron $cron_version accepts a schedule in seconds");
	$node->safe_psql('postgres', "SELECT cron.unschedule('probe')");
}
else
{
	isnt($ret, 0, "pg_cron $cron_version refuses '5 seconds' (cron syntax only): the recipe uses '* * * * *'");
}

# -------------------------------------------------------------------------
# A cron-scheduled round places a pending job
# -------------------------------------------------------------------------
my $job1 = $node->safe_psql('postgres', "SELECT gangsched.submit('t', 2, 1, name => 'by cron')");
$node->safe_psql('postgres',
	"SELECT cron.schedule('gangsched', '* * * * *', 'SELECT gangsched.run_round()')");
is($node->safe_psql('postgres', "SELECT schedule, command FROM cron.job WHERE jobname = 'gangsched'"),
	'* * * * *|SELECT gangsched.run_round()', 'the round is scheduled with cron syntax');
ok(poll_until($node, "SELECT state FROM gangsched.jobs WHERE job = $job1", 'placed', 90),
	'a pending job is placed by the cron-scheduled round');
ok( poll_until(
		$node,
		"SELECT count(*) > 0 FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		  WHERE j.jobname = 'gangsched' AND d.status = 'succeeded'",
		't', 10),
	'cron.job_run_details records the round as succeeded');
is($node->safe_psql('postgres', 'SELECT rounds FROM gangsched.worker_status()'),
	'0', 'the paused background worker ran no round: cron did');
$node->safe_psql('postgres', "SELECT cron.unschedule('gangsched')");

# -------------------------------------------------------------------------
# The round's lock: one round at a time
# -------------------------------------------------------------------------
# A round left open in a transaction holds the lock until it ends.
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
is($holder->query_safe('SELECT ran FROM gangsched.run_round()'), 't', 'a round runs and keeps its lock until commit');

# lock_timeout: a round that waited for the lock would fail here instead
# of returning (the holder keeps it until the end of this section).
my ($rc2, $second, $err2) = ('', '', '');
$rc2 = $node->psql('postgres', "SET lock_timeout = '20s'; SELECT ran, note FROM gangsched.run_round()",
	stdout => \$second, stderr => \$err2);
like($second, qr/^f\|.+/, 'a second round finds the lock taken, returns ran = false and says why');
is($err2, '', 'and returns at once instead of waiting for the lock (no lock timeout)');

# The worker's rounds meet the same lock: switched on now, it runs rounds
# that do nothing while the held round's transaction is open.
my $job2 = $node->safe_psql('postgres', "SELECT gangsched.submit('t', 1, 1, name => 'waits for the lock')");
$node->safe_psql('postgres', 'ALTER SYSTEM SET gangsched.enabled = on');
$node->reload;
my $r0 = $node->safe_psql('postgres', 'SELECT rounds FROM gangsched.worker_status()');
ok(poll_until($node, "SELECT rounds > $r0 + 3 FROM gangsched.worker_status()", 't', 10),
	'the background worker now runs rounds');
is($node->safe_psql('postgres', "SELECT state FROM gangsched.jobs WHERE job = $job2"),
	'pending', 'but they place nothing while another round holds the lock');
$holder->query_safe('COMMIT');
ok(poll_until($node, "SELECT state FROM gangsched.jobs WHERE job = $job2", 'placed', 10),
	'once the held round commits, the worker\'s next round places the job');
$holder->quit;

is($node->safe_psql('postgres', 'SELECT count(*) FROM gangsched.check_invariants()'),
	'0', 'invariants hold');

$node->stop;
ok(!$node->log_contains('terminated by signal') && !$node->log_contains('PANIC'), 'no crash in the log');

done_testing();
