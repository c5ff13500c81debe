# Tenancy over real connections: LOGIN roles bound to teams (portals) and
# nodes (agents), the background worker running the rounds and a real
# gangsched-agent connected as its own login role (no superuser anywhere but
# the operator's set-up).
#
# - portal A submits, the worker places, the agent (role agent_n1, bound to
#   n1 only) starts and finishes the job, and the events name each actor;
# - portal B cannot cancel A's job, read its command or UPDATE it (42501);
# - a login role bound to nothing can do nothing;
# - agent_n1 cannot heartbeat, read the work of, start or release for n2;
# - a tenant holding the round's old advisory key, or a row lock a round needs
#   (its own timeouts off), does not stop the rounds;
# - the clock and the round-shaping settings are refused to portals;
# - shadowing functions and operators planted in public (CREATE granted to
#   PUBLIC, public before pg_catalog on the portal's and the worker's
#   search_path) are never executed by the worker's rounds, the agent's or the
#   portal's API calls: their side-effect table stays empty.
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

my $node = PostgreSQL::Test::Cluster->new('tenancy');
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
});
$node->start;

# The test harness's own (superuser) sessions keep a safe search_path
# whatever the database's setting is below; the roles under test get theirs
# from the server (connection options are cleared for them).
$ENV{PGOPTIONS} = '-c search_path=pg_catalog,public';

my $connstr = $node->connstr('postgres');
sub sql { return $node->safe_psql('postgres', $_[0]); }

# Run $sql as login role $user over its own connection, with its own
# server-side settings (search_path included). Returns (exit code, stdout,
# stderr); errors carry their SQLSTATE (VERBOSITY verbose).
sub as_role
{
	my ($user, $sql) = @_;
	local $ENV{PGOPTIONS} = '';
	my ($out, $err) = ('', '');
	my $rc = $node->psql(
		'postgres', $sql,
		connstr => "$connstr user=$user",
		stdout => \$out,
		stderr => \$err,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($rc, $out, $err);
}

# $sql as $user must fail with SQLSTATE $state and an error matching $re.
sub refused
{
	my ($user, $sql, $state, $re, $what) = @_;
	my ($rc, $out, $err) = as_role($user, $sql);
	ok($rc != 0 && $err =~ /ERROR:  $state: / && $err =~ $re, $what)
	  or diag "rc=$rc\nstdout: $out\nstderr: $err";
	return;
}

sub allowed
{
	my ($user, $sql, $what) = @_;
	my ($rc, $out, $err) = as_role($user, $sql);
	ok($rc == 0, $what) or diag "rc=$rc\nstdout: $out\nstderr: $err";
	return $out;
}

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

# -------------------------------------------------------------------------
# Set-up by the superuser: the extension, an operator login role; the rest
# is done by the operator
# -------------------------------------------------------------------------
sql(q{
CREATE EXTENSION gangsched CASCADE;
CREATE ROLE ops LOGIN IN ROLE gangsched_operator;
CREATE ROLE portal_a LOGIN;
CREATE ROLE portal_b LOGIN;
CREATE ROLE agent_n1 LOGIN;
CREATE ROLE nobody LOGIN;
});
is(sql("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'gangsched\\_%' AND NOT rolcanlogin"),
	'4', 'the install script created the four group roles, NOLOGIN');

allowed(
	'ops', q{
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 8, 64, 10, 2, 'sim', 16);
SELECT gangsched.add_node('n2', 'gpu', 'r1', 8, 64, 10, 2, 'sim', 16);
SELECT gangsched.set_node_state('n2', 'draining');
SELECT gangsched.add_team('a');
SELECT gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'gpu', 2);
SELECT gangsched.set_quota('b', 'gpu', 2);
SELECT gangsched.add_member('portal_a', 'a');
SELECT gangsched.add_member('portal_b', 'b');
SELECT gangsched.add_agent('agent_n1', 'n1');
}, 'the operator (a login role in gangsched_operator) builds the cluster and binds the roles');
is(sql(q{SELECT string_agg(role || ':' || kind || ':' || coalesce(team, node), ' ' ORDER BY role)
           FROM gangsched.bindings}),
	'agent_n1:agent:n1 portal_a:portal:a portal_b:portal:b', 'gangsched.bindings lists them');

# -------------------------------------------------------------------------
# The shadowing trap: functions and operators in public that would record
# every call, on the search_path before pg_catalog of the portal and of the
# database (so of the worker, which connects to it)
# -------------------------------------------------------------------------
sql(q{
GRANT CREATE ON SCHEMA public TO PUBLIC;
CREATE TABLE public.shadow_hits (fn text, usr name DEFAULT current_user, backend text);
GRANT INSERT, SELECT ON public.shadow_hits TO PUBLIC;
});
# planted by a tenant (portal_b), who has nothing but CREATE on public
allowed(
	'portal_b', q{
SET search_path = public, pg_catalog;
CREATE FUNCTION public.hit(f text) RETURNS void LANGUAGE sql SET search_path = pg_catalog AS
  $$ INSERT INTO public.shadow_hits (fn, backend)
     SELECT f, a.backend_type FROM pg_catalog.pg_stat_activity a WHERE a.pid = pg_catalog.pg_backend_pid() $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('now()'); SELECT pg_catalog.now() $$;
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('clock_timestamp()'); SELECT pg_catalog.clock_timestamp() $$;
CREATE FUNCTION public.upper_inf(anyrange) RETURNS bool LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('upper_inf()'); SELECT pg_catalog.upper_inf($1) $$;
CREATE FUNCTION public.lower(anyrange) RETURNS anyelement LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('lower()'); SELECT pg_catalog.lower($1) $$;
CREATE FUNCTION public.tstzrange(timestamptz, timestamptz) RETURNS tstzrange LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('tstzrange()'); SELECT pg_catalog.tstzrange($1, $2) $$;
CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('pg_notify()'); SELECT pg_catalog.pg_notify($1, $2) $$;
CREATE FUNCTION public.pg_has_role(oid, oid, text) RETURNS bool LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('pg_has_role()'); SELECT true $$;
CREATE FUNCTION public.cardinality(anyarray) RETURNS int LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('cardinality()'); SELECT pg_catalog.cardinality($1) $$;
CREATE FUNCTION public.array_length(anyarray, int) RETURNS int LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('array_length()'); SELECT pg_catalog.array_length($1, $2) $$;
CREATE FUNCTION public.current_setting(text) RETURNS text LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('current_setting()'); SELECT pg_catalog.current_setting($1) $$;
CREATE FUNCTION public.json_build_object(text, text, text, bigint) RETURNS json LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('json_build_object()'); SELECT pg_catalog.json_build_object($1, $2, $3, $4) $$;
CREATE FUNCTION public.shadow_eq(int, int) RETURNS bool LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('=(int,int)'); SELECT pg_catalog.int4eq($1, $2) $$;
CREATE OPERATOR public.= (LEFTARG = int, RIGHTARG = int, FUNCTION = public.shadow_eq);
CREATE FUNCTION public.shadow_eq8(bigint, bigint) RETURNS bool LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('=(bigint,bigint)'); SELECT pg_catalog.int8eq($1, $2) $$;
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.shadow_eq8);
CREATE FUNCTION public.shadow_teq(text, text) RETURNS bool LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('=(text,text)'); SELECT pg_catalog.texteq($1, $2) $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.shadow_teq);
CREATE FUNCTION public.shadow_sum_sf(numeric, numeric) RETURNS numeric LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('sum(numeric)'); SELECT pg_catalog.numeric_add(coalesce($1, 0), coalesce($2, 0)) $$;
CREATE AGGREGATE public.sum(numeric) (SFUNC = public.shadow_sum_sf, STYPE = numeric);
CREATE FUNCTION public.shadow_count_sf(bigint) RETURNS bigint LANGUAGE sql VOLATILE SET search_path = pg_catalog AS
  $$ SELECT public.hit('count(*)'); SELECT $1 + 1 $$;
CREATE AGGREGATE public.count(*) (SFUNC = public.shadow_count_sf, STYPE = bigint, INITCOND = '0');
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC;
}, 'a tenant with CREATE on public plants shadowing functions, operators and aggregates');
sql(q{
ALTER ROLE portal_a SET search_path = public, pg_catalog, gangsched;
ALTER DATABASE postgres SET search_path = public, pg_catalog, gangsched;
});
# the trap works: a plain query of the portal's runs the shadows
my ($rc, $out, $err) = as_role('portal_a', q{SELECT now() IS NOT NULL, 1 = 1, count(*) FROM (VALUES (1)) v});
is(sql(q{SELECT string_agg(DISTINCT fn, ' ' ORDER BY fn) FROM public.shadow_hits WHERE usr = 'portal_a'}),
	'=(int,int) count(*) now()', "the trap works: the portal's own query ran the shadowing now(), = and count(*)");
sql('TRUNCATE public.shadow_hits');
# the worker connects again with the database's search_path
$node->restart;
ok(poll_until("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler'", '1', 30),
	'the worker is up again (with the database\'s search_path)');

# -------------------------------------------------------------------------
# A real agent, connected as agent_n1 (not a superuser, no table access)
# -------------------------------------------------------------------------
my $workdir = PostgreSQL::Test::Utils::tempdir();
my $agent_log = "$PostgreSQL::Test::Utils::log_path/agent_tenancy_n1.log";
my $agent_pid = fork();
die "fork: $!" unless defined $agent_pid;
if ($agent_pid == 0)
{
	open(STDIN, '<', '/dev/null') or POSIX::_exit(127);
	open(STDOUT, '>>', $agent_log) or POSIX::_exit(127);
	open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
	# the agent keeps a safe search_path of its own (its connection options)
	$ENV{PGOPTIONS} = '-c search_path=pg_catalog';
	exec($agent_bin, '--node', 'n1', '--dbname', "$connstr user=agent_n1", '--workdir', $workdir,
		'--heartbeat', '1')
	  or POSIX::_exit(127);
}
END
{
	if ($agent_pid)
	{
		kill 'KILL', $agent_pid;
		waitpid($agent_pid, 0);
	}
}
ok(poll_until("SELECT heartbeat_at IS NOT NULL FROM gangsched.nodes WHERE name = 'n1'", 't', 20),
	'the agent, connected as agent_n1, sends heartbeats for n1')
  or diag(-e $agent_log ? slurp_file($agent_log) : 'no agent log');
is(sql(q{SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = 'agent_n1'}),
	't', 'it is connected as agent_n1');

# -------------------------------------------------------------------------
# Portal A submits; the worker places; the agent runs and finishes it
# -------------------------------------------------------------------------
my $marker = "$workdir/job-ran";
$out = allowed('portal_a',
	"SELECT gangsched.submit('a', 1, 2, name => 'a-job', command => 'sleep 8; touch $marker')",
	'portal A submits for team a');
my ($job) = $out =~ /^(\d+)$/m;
ok(defined $job, "job $job");
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $job", 'running', 20),
	"the worker placed A's job on n1 and the agent started it");

# Portal B's attempts on A's job
refused('portal_b', "SELECT gangsched.cancel($job)", '42501',
	qr/permission denied to cancel job $job.*\n.*DETAIL:  Role "portal_b" is not bound to the team/s,
	"portal B cannot cancel A's job (42501, not bound to the team)");
refused('portal_b', "SELECT command FROM gangsched.gangs WHERE id = $job", '42501',
	qr/permission denied for table gangs/, "portal B cannot read A's command from the table (42501)");
refused('portal_b', "UPDATE gangsched.gangs SET command = 'rm -rf ~' WHERE id = $job", '42501',
	qr/permission denied for table gangs/, "portal B cannot UPDATE A's command (42501)");
refused('portal_b', "UPDATE gangsched.jobs SET command = 'rm -rf ~' WHERE job = $job", '55000',
	qr/cannot update view "jobs"/, "nor through the jobs view (not updatable)");
refused('portal_b', "SELECT gangsched.job_finished($job, false, 'forged')", '42501',
	qr/permission denied for function job_finished/, "portal B cannot report A's job finished (42501)");
refused('portal_b', "SELECT gangsched.submit('a', 1, 1, command => 'echo pwned')", '42501',
	qr/permission denied to submit.*\n.*DETAIL:  Role "portal_b" is not bound/s,
	'portal B cannot submit for team a (42501)');
is((as_role('portal_b', "SELECT count(*) FROM gangsched.jobs WHERE job = $job"))[1],
	"0", "portal B does not see A's job in the jobs view");
refused('portal_b', "SET gangsched.clock_override = '2100-01-01'", '42501',
	qr/permission denied to set parameter "gangsched.clock_override"/,
	'portal B cannot SET gangsched.clock_override (42501)');
refused('portal_b', 'SET gangsched.start_timeout = 1', '42501',
	qr/permission denied to set parameter "gangsched.start_timeout"/, 'nor gangsched.start_timeout');
refused('portal_b', 'SELECT gangsched.run_round()', '42501', qr/permission denied/,
	'portal B cannot run a round (42501)');
is((as_role('portal_a', "SELECT command FROM gangsched.jobs WHERE job = $job"))[1],
	"sleep 8; touch $marker", 'portal A reads its own command');

# Anyone may NOTIFY the agent's channel (PostgreSQL has no privilege for
# it): a forged "kill" only makes the agent resync, and node_work says the
# job still runs
my $chan = sql("SELECT 'gangsched_node_' || id FROM gangsched.nodes WHERE name = 'n1'");
allowed('nobody', qq{NOTIFY $chan, '{"event": "kill", "job": $job}'},
	'an unbound role can NOTIFY the agent\'s channel');
usleep(1_500_000);
is(sql("SELECT state FROM gangsched.jobs WHERE job = $job"), 'running',
	"a forged kill notification changes nothing: A's job still runs");
ok(!-e $marker, 'and its command has not been cut short');

# An unbound login role can do nothing
refused('nobody', "SELECT gangsched.submit('a', 1, 1)", '42501', qr/permission denied/,
	'an unbound role cannot submit');
refused('nobody', "SELECT gangsched.cancel($job)", '42501', qr/permission denied/, 'nor cancel');
refused('nobody', 'SELECT * FROM gangsched.jobs', '42501', qr/permission denied/, 'nor read jobs');
refused('nobody', 'SELECT * FROM gangsched.gangs', '42501', qr/permission denied/, 'nor the tables');
refused('nobody', "SELECT gangsched.node_heartbeat('n1')", '42501', qr/permission denied/, 'nor heartbeat');
refused('nobody', "SELECT * FROM gangsched.node_work('n1')", '42501', qr/permission denied/,
	'nor read a node\'s work');
refused('nobody', "SELECT gangsched.job_finished($job, false)", '42501', qr/permission denied/,
	'nor finish a job');
refused('nobody', 'SELECT gangsched.run_round()', '42501', qr/permission denied/, 'nor run a round');
refused('nobody', 'DELETE FROM gangsched.held_slots', '42501', qr/permission denied/,
	'nor delete held slots');
refused('nobody', "SET gangsched.clock_override = '2100-01-01'", '42501', qr/permission denied/,
	'nor set the clock');

# The agent of n1 on n2
refused('agent_n1', "SELECT gangsched.node_heartbeat('n2')", '42501',
	qr/not bound to node "n2"/, 'agent_n1 cannot heartbeat for n2 (42501, not bound to node "n2")');
refused('agent_n1', "SELECT * FROM gangsched.node_work('n2')", '42501', qr/not bound to node "n2"/,
	"agent_n1 cannot read n2's work");
refused('agent_n1', "SELECT gangsched.set_node_state('n2', 'up')", '42501', qr/permission denied/,
	'agent_n1 cannot set node states');
refused('agent_n1', "UPDATE gangsched.nodes SET gpus = 64", '42501', qr/permission denied for table nodes/,
	'agent_n1 cannot UPDATE nodes SET gpus = 64');
refused('agent_n1', "SELECT gangsched.cancel($job)", '42501', qr/permission denied/,
	'agent_n1 cannot cancel (agents are not portals)');

# A job of team b on n2 (no agent there): agent_n1 may not touch it
allowed('ops', "SELECT gangsched.set_node_state('n2', 'up')", 'the operator brings n2 up');
$out = allowed('portal_b', "SELECT gangsched.submit('b', 1, 2, name => 'b-job', command => 'sleep 600')",
	'portal B submits for team b');
my ($jobb) = $out =~ /^(\d+)$/m;
ok(poll_until("SELECT DISTINCT node FROM gangsched.placements WHERE job = $jobb", 'n2', 20),
	"the worker placed B's job on n2");
# (a placed job is refused for its state before the binding is checked)
refused('agent_n1', "SELECT gangsched.job_released($jobb, false)", '(?:42501|55000)',
	qr/not bound to any node where job $jobb holds workers|job $jobb is placed, cannot release/,
	"agent_n1 cannot release n2's job");
refused('agent_n1', "SELECT gangsched.job_started($jobb, 'n2')", '42501', qr/permission denied/,
	"agent_n1 cannot confirm n2's job");
refused('agent_n1', "SELECT gangsched.job_finished($jobb, true)", '42501', qr/permission denied/,
	"agent_n1 cannot finish n2's job");
is(sql("SELECT state FROM gangsched.jobs WHERE job = $jobb"), 'placed', "B's job is untouched");

# A finishes, reported by its agent
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $job", 'finished', 30),
	"A's job finished (reported by agent_n1)");
ok(-e $marker, 'its command ran, unchanged');
is( sql(
		"SELECT string_agg(kind || '=' || actor, ' ' ORDER BY id) FROM gangsched.events
		  WHERE job = $job AND kind IN ('submitted', 'running', 'finished')"),
	'submitted=portal_a running=agent_n1 finished=agent_n1',
	'the events name the acting roles (portal_a submitted, agent_n1 started and finished)');
my $worker_role = sql("SELECT usename FROM pg_stat_activity WHERE backend_type = 'gangsched scheduler'");
is(sql("SELECT string_agg(DISTINCT actor, ' ') FROM gangsched.events WHERE job = $job AND kind = 'placed'"),
	$worker_role, "the placement names the worker's role ($worker_role)");

allowed('portal_b', "SELECT gangsched.cancel($jobb)", 'portal B cancels its own job');

# -------------------------------------------------------------------------
# A tenant cannot stall the rounds
# -------------------------------------------------------------------------
# The round's lock is not an advisory lock: a portal's session holding the
# key rounds once used, or any other, stops nothing; the lock table itself
# cannot be locked by a tenant.
my $squatter = $node->background_psql('postgres', extra_params => [ '-U', 'portal_a' ]);
$squatter->query_safe('SELECT pg_advisory_lock(1735615336, 1)');
refused('portal_a', 'BEGIN; LOCK TABLE gangsched.round_lock IN EXCLUSIVE MODE; COMMIT', '42501', qr/permission denied/,
	"a portal cannot take the round's lock");
$out = allowed('portal_a', "SELECT gangsched.submit('a', 1, 1, name => 'while a tenant holds the old key')",
	'portal A submits while its other session holds the old advisory key');
my ($jobk) = $out =~ /^(\d+)$/m;
ok(poll_until("SELECT state IN ('placed', 'running') FROM gangsched.jobs WHERE job = $jobk", 't', 20),
	"the worker's rounds go on: the job is placed");
allowed('portal_a', "SELECT gangsched.cancel($jobk)", 'portal A cancels it');
$squatter->quit;

# A portal that keeps a row lock a round needs (an uncommitted cancel of a
# pending job the round wants to place), with its own timeouts switched
# off: the round gives up after gangsched.round_lock_timeout, the worker
# ends that session, and the next round places the job.
sql("ALTER SYSTEM SET gangsched.round_lock_timeout = '1s'");
$node->reload;
sql("SELECT gangsched.set_node_state('n2', 'draining')");
$out = allowed('portal_a', "SELECT gangsched.submit('a', 2, 2, name => 'needs n1 and n2', command => 'sleep 600')",
	'portal A submits a job that must wait');
my ($jobw) = $out =~ /^(\d+)$/m;
my $offset = -s $node->logfile;
my $blocker = $node->background_psql('postgres', extra_params => [ '-U', 'portal_a' ], on_error_stop => 0);
$blocker->query_safe("SET idle_in_transaction_session_timeout = 0; SET statement_timeout = 0; SET lock_timeout = 0");
$blocker->query_safe('BEGIN');
$blocker->query_safe("SELECT gangsched.cancel($jobw)");
# n2 comes back: the round wants to place the job whose row the blocker holds
sql("SELECT gangsched.set_node_state('n2', 'up')");
ok($node->wait_for_log(qr/gangsched scheduler round gave up waiting for a lock/, $offset),
	'the round gives up waiting for the lock after gangsched.round_lock_timeout and says so');
ok($node->wait_for_log(qr/gangsched ended the session of role "portal_a"/, $offset),
	"the worker ends the portal's session that held it");
ok(poll_until("SELECT state IN ('placed', 'running') FROM gangsched.jobs WHERE job = $jobw", 't', 20),
	"the next round places the job (the portal's cancel was rolled back)");
is(sql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'portal_a' AND state LIKE 'idle in transaction%'"),
	'0', "the portal's idle transaction is gone");
allowed('portal_a', "SELECT gangsched.cancel($jobw)", 'portal A can cancel it now, over a new connection');
sql("ALTER SYSTEM RESET gangsched.round_lock_timeout");
$node->reload;

# -------------------------------------------------------------------------
# The shadows never ran
# -------------------------------------------------------------------------
is(sql(q{SELECT count(*) || ' ' || coalesce(string_agg(DISTINCT usr || '/' || backend || '/' || fn, ', '), '')
           FROM public.shadow_hits}),
	'0 ',
	'no shadowing function, operator or aggregate ran in the worker\'s rounds or the API calls');
cmp_ok(sql('SELECT rounds FROM gangsched.worker_status()'), '>', 5, 'while the worker ran rounds');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold');

kill 'TERM', $agent_pid;
waitpid($agent_pid, 0);
is($?, 0, 'the agent exits 0 on SIGTERM');
$agent_pid = 0;
unlike(slurp_file($agent_log), qr/ ERROR: /, 'the agent logged no error');

$node->stop;
ok(!$node->log_contains('terminated by signal') && !$node->log_contains('PANIC'), 'no crash in the server log');

done_testing();
