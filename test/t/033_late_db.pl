# The worker and a database or an extension that appears after start-up
# (issue 11: "the worker connects within 2 s after its database or the
# extension appears").
#
# - gangsched.database names a database that does not exist yet: the first
#   connection attempt fails once (FATAL, logged), the restarted worker waits
#   connected to no database (it holds up neither CREATE DATABASE nor DROP
#   DATABASE of another one), and after CREATE DATABASE and CREATE EXTENSION
#   it runs its first round within 2 s of the CREATE EXTENSION's commit;
# - the database exists and the worker is connected, the extension is
#   created later: the first round within 2 s too (the worker looks for the
#   extension every 200 ms, whatever gangsched.round_interval);
# - the extension dropped and created again: rounds resume.
# The measured delays are printed. round_interval is the default (1 s).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('late_db');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'gangsched'
gangsched.database = 'sched'
gangsched.enabled = on
});
$node->start;

# Seconds from now until $sql (in $db) returns 't', polling every 20 ms, at
# most $timeout seconds; undef on time-out. Errors (the extension's
# functions not there yet) count as "not yet".
sub seconds_until
{
	my ($db, $sql, $timeout) = @_;
	my $t0 = time;
	my ($out, $err) = ('', '');
	while (time < $t0 + $timeout)
	{
		$node->psql($db, $sql, stdout => \$out, stderr => \$err);
		return time - $t0 if $out eq 't';
		usleep(20_000);
	}
	diag "timed out after ${timeout}s: $sql\ngot: $out\nstderr: $err";
	return undef;
}

sub worker_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler'");
}

# -------------------------------------------------------------------------
# The database does not exist yet
# -------------------------------------------------------------------------
$node->wait_for_log(qr/FATAL:  database "sched" does not exist/);
pass('the first attempt fails: database "sched" does not exist');
# (20 s, not wait_for_log's 180: a worker failing at every look must fail
# this test soon)
my $waits_deadline = time + 20;
usleep(100_000)
  until slurp_file($node->logfile) =~ /gangsched scheduler worker waits: database "sched" does not exist/
  || time > $waits_deadline;
ok(time <= $waits_deadline, 'the restarted worker says it waits for the database');
ok( defined seconds_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler' AND datid IS NULL",
		10),
	'it waits connected to no database');

# the waiting worker holds up no CREATE or DROP DATABASE
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('postgres', 'DROP DATABASE other');
pass('CREATE DATABASE and DROP DATABASE of another database work meanwhile');
usleep(500_000);
# (the waiting worker reads pg_database with no database selected: it must
# not need the relcache init file, which no backend has written yet here)
my @fatal = slurp_file($node->logfile) =~ /^.*\bFATAL: .*$/mg;
is(join("\n", @fatal) =~ s/^.*FATAL:  //mgr, 'database "sched" does not exist',
	'one FATAL only, the first attempt\'s: the waiting worker looks without failing');

my $log_offset = -s $node->logfile;
my $t_db = time;
$node->safe_psql('postgres', 'CREATE DATABASE sched');
$node->safe_psql('sched', 'CREATE EXTENSION gangsched CASCADE');
my $created = time;    # both committed
my $first = seconds_until('sched', 'SELECT rounds > 0 FROM gangsched.worker_status()', 10);
ok(defined $first, 'after CREATE DATABASE and CREATE EXTENSION the worker runs rounds');
$first //= 99;
cmp_ok($first, '<', 2,
	sprintf('its first round ran %.2f s after the CREATE EXTENSION committed (CREATE DATABASE just before)', $first));
note(sprintf('late database: first round %.3f s after CREATE EXTENSION, %.3f s after CREATE DATABASE began',
		$first, $created + $first - $t_db));
ok($node->log_contains(qr/gangsched scheduler worker restarts to connect: database "sched" exists now/, $log_offset),
	'the waiting worker said it restarts to connect');
is($node->safe_psql('sched', "SELECT datname FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler'"),
	'sched', 'the worker is connected to sched');

# it schedules: a job is placed by a wake-up
$node->safe_psql(
	'sched', q{
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 16, 128, 10, 4, 'sim', 16);
SELECT gangsched.add_team('t');
});
my $job = $node->safe_psql('sched', "SELECT gangsched.submit('t', 1, 1)");
ok(defined seconds_until('sched', "SELECT state = 'placed' FROM gangsched.jobs WHERE job = $job", 10),
	'the worker places jobs in the late database');

# -------------------------------------------------------------------------
# The database exists, the extension comes later
# -------------------------------------------------------------------------
# A restart with the database in place: the worker connects at once and
# waits for the extension.
$node->safe_psql('sched', 'DROP EXTENSION gangsched');
$log_offset = -s $node->logfile;
$node->restart;
$node->wait_for_log(qr/gangsched scheduler worker waits: extension gangsched is not installed in database "sched"/,
	$log_offset);
pass('after a restart the worker waits for the extension in its database');
my $pid = worker_pid();
usleep(1_500_000);    # the worker has looked for the extension several times
$node->safe_psql('sched', 'CREATE EXTENSION gangsched CASCADE');
my $later = seconds_until('sched', 'SELECT rounds > 0 FROM gangsched.worker_status()', 10);
ok(defined $later, 'after CREATE EXTENSION the connected worker runs rounds');
$later //= 99;
cmp_ok($later, '<', 2, sprintf('its first round ran %.2f s after the CREATE EXTENSION committed', $later));
note(sprintf('late extension: first round %.3f s after CREATE EXTENSION', $later));
is(worker_pid(), $pid, 'the same worker process (no restart needed)');

# -------------------------------------------------------------------------
# Dropped and created again
# -------------------------------------------------------------------------
# (a job submitted in the CREATE EXTENSION's transaction: its commit wakes
# the worker, so this checks that the rounds resume, not how fast)
$log_offset = -s $node->logfile;
$node->safe_psql('sched', 'DROP EXTENSION gangsched');
$node->wait_for_log(qr/gangsched scheduler worker waits: extension gangsched is not installed/, $log_offset);
($job) = $node->safe_psql(
	'sched', q{
BEGIN;
CREATE EXTENSION gangsched CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 16, 128, 10, 4, 'sim', 16);
SELECT gangsched.add_team('t');
SELECT gangsched.submit('t', 1, 1);
COMMIT;
}) =~ /(\d+)\s*\z/;
ok(defined seconds_until('sched', "SELECT state = 'placed' FROM gangsched.jobs WHERE job = $job", 10),
	'the extension dropped and created again: the worker places jobs again');
is($node->safe_psql('sched', 'SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold');
ok(!$node->log_contains('round failed'), 'no round failed on the way');

$node->stop;
ok(!$node->log_contains('terminated by signal') && !$node->log_contains('PANIC'), 'no crash in the server log');

done_testing();
