# The command-line client, tools/cli/gangsched (docs/cli.md), driven
# subcommand by subcommand against a server, as the roles that use it: a
# portal role (submit, queue, jobs, show, why, cancel, teams, top), an
# analyst (usage), an operator (nodes), with tables and --json, and the exit
# status of each kind of failure (refused 1, usage 2, no connection 3,
# permission denied 4).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use JSON::PP;

my $srcdir = $ENV{TESTDIR} // '.';
my $cli = -x "$srcdir/tools/cli/gangsched" ? "$srcdir/tools/cli/gangsched" : 'gangsched';

my $node = PostgreSQL::Test::Cluster->new('cli');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'gangsched'
gangsched.enabled = off
gangsched.min_runtime = 0
});
$node->start;
$ENV{PGOPTIONS} = '-c search_path=pg_catalog,public';
sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q{
CREATE EXTENSION gangsched CASCADE;
CREATE ROLE cli_portal LOGIN;
CREATE ROLE cli_analyst LOGIN IN ROLE gangsched_analyst;
CREATE ROLE cli_ops LOGIN IN ROLE gangsched_operator;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_node('n2', 'gpu', 'r1', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_team('vision'), gangsched.add_team('nlp');
SELECT gangsched.set_quota('vision', 'gpu', 8);
SELECT gangsched.add_member('cli_portal', 'vision');
});

# Run the client as $user; returns (exit status, stdout, stderr).
sub cli
{
	my ($user, @args) = @_;
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGDATABASE} = 'postgres';
	local $ENV{PGUSER} = $user;
	local $ENV{PGOPTIONS} = '';
	my ($out, $err) = ('', '');
	IPC::Run::run([ $cli, @args ], '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

my ($rc, $out, $err);

# ---- the client itself --------------------------------------------------
program_help_ok($cli);
program_version_ok($cli);
($rc, $out, $err) = cli('cli_portal', 'version');
like($out, qr/^gangsched \(client\) \d+\.\d+\.\d+\ngangsched \(server\) \d+\.\d+\.\d+$/, 'version: client and server (semantic versions)') or diag $err;
($rc, $out, $err) = cli('cli_portal', 'frobnicate');
is($rc, 2, 'an unknown command is a usage error (2)');
like($err, qr/unknown command 'frobnicate'/, 'and says so');
($rc, $out, $err) = cli('cli_portal', 'submit', '--workers', '2');
is($rc, 2, 'submit without a team is a usage error');
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--bogus');
is($rc, 2, 'an unknown submit option is a usage error');
($rc, $out, $err) = cli('cli_portal', 'why', 'abc');
is($rc, 2, 'a job id that is not a number is a usage error');

# ---- submit ---------------------------------------------------------------
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--workers', '2', '--gpus', '4',
	'--name', 'resnet 50', '--cpus', '4', '--', 'python', 'train.py', '--lr', '0.1', "it's here");
is($rc, 0, 'submit as the portal') or diag $err;
my ($j1) = $out =~ /^submitted job (\d+)$/;
ok($j1, "prints the job id ($out)");
is(sql("SELECT workers || ' ' || gpus || ' ' || cpus || ' ' || name FROM gangsched.jobs WHERE job = $j1"),
	'2 4 4 resnet 50', 'the options reached submit()');
is(sql("SELECT command FROM gangsched.jobs WHERE job = $j1"), q{python train.py --lr 0.1 'it'\''s here'},
	'the command after -- is stored quoted for sh, word by word');

($rc, $out, $err) = cli('cli_portal', '--json', 'submit', '--team', 'vision', '--gpus', '2', '--no-preempt',
	'--queue-timeout', '2 h', '--name', 'guaranteed');
is($rc, 0, 'submit --json') or diag $err;
my $j2 = eval { decode_json($out)->{job} };
ok($j2, 'prints {"job": N}');
is(sql("SELECT preemptible || ' ' || queue_timeout FROM gangsched.jobs WHERE job = $j2"), 'false 02:00:00',
	'--no-preempt and --queue-timeout reached submit()');

# what a tenant types is data, never SQL
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--gpus', '1', '--name', q{x'); DROP TABLE gangsched.gangs; --});
is($rc, 0, 'a name with SQL in it is just a name') or diag $err;
my ($j3) = $out =~ /^submitted job (\d+)$/;
is(sql("SELECT name FROM gangsched.jobs WHERE job = $j3"), q{x'); DROP TABLE gangsched.gangs; --}, 'stored as typed');
is(sql("SELECT count(*) FROM gangsched.jobs"), '3', 'and nothing else happened');
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--workers', q{1); SELECT 1; --});
is($rc, 1, 'a number that is not one is refused by the database');
like($err, qr/ERROR:  22P02: invalid input syntax for type integer/, 'with its SQLSTATE');
($rc, $out, $err) = cli('cli_portal', 'cancel', $j3);
is($rc, 0, 'cancel it again') or diag $err;

# refusals: the scheduler's message with SQLSTATE, detail and hint
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--gpus', '16');
is($rc, 1, 'an impossible shape is refused (1)');
like($err, qr/^ERROR:  53S01: .*\nDETAIL:  .*\nHINT:  /m, 'with SQLSTATE, detail and hint');
unlike($err, qr/LOCATION:|CONTEXT:|psql:/, "without psql's location, context or prefix");
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'nlp', '--gpus', '1');
is($rc, 4, 'submitting for a team the portal is not bound to is permission denied (4)');
like($err, qr/ERROR:  42501: permission denied to submit to team "nlp"/, 'and says so');

# ---- reading ---------------------------------------------------------------
($rc, $out, $err) = cli('cli_portal', 'queue');
is($rc, 0, 'queue') or diag $err;
like($out, qr/^\s*position \| job \|\s+team\s+\|/m, 'a table with a header');
like($out, qr/^\s*1 \|\s+$j1 \| vision \| resnet 50 .*fits now/m, 'the first job fits now');
($rc, $out, $err) = cli('cli_portal', 'queue', '--json');
my $q = eval { decode_json($out) };
is(ref $q, 'ARRAY', 'queue --json is an array') or diag $out;
is(join(',', map { $_->{job} } @$q), "$j1,$j2", 'in queue order');
like($q->[1]{reason}, qr/not being preemptible, may not borrow/, 'with the reason each waits');

($rc, $out, $err) = cli('cli_portal', 'why', $j2);
is($rc, 0, 'why') or diag $err;
like($out, qr/may not borrow/, 'says why the job waits');

sql('SELECT gangsched.run_round()');
($rc, $out, $err) = cli('cli_portal', '--json', 'jobs');
my $jobs = eval { decode_json($out) };
is(join(' ', map { "$_->{job}:$_->{state}" } @$jobs), "$j1:placed $j2:pending", 'jobs --json: states after a round');
($rc, $out, $err) = cli('cli_portal', 'jobs', '--state', 'placed');
like($out, qr/^\s*$j1 \| vision \| resnet 50 \| placed/m, 'jobs --state placed');
unlike($out, qr/^\s*$j2 \|/m, 'only placed ones');

($rc, $out, $err) = cli('cli_portal', 'show', $j1);
is($rc, 0, 'show') or diag $err;
like($out, qr/^job\s+\| $j1$/m, 'every column of the job');
like($out, qr/^\s*0 \| n[12]\s+\| [0-9,]+ \|/m, 'and where its workers run');
($rc, $out, $err) = cli('cli_portal', '--json', 'show', $j1);
my $shown = eval { decode_json($out) };
is(scalar @{ $shown->{placements} // [] }, 8, 'show --json: 2 workers x 4 devices placed');
($rc, $out, $err) = cli('cli_portal', 'show', '999999');
is($rc, 1, 'show of a job that is not there is refused (1)');

($rc, $out, $err) = cli('cli_portal', 'teams');
is($rc, 0, 'teams') or diag $err;
like($out, qr/^\s*vision\s+\| gpu\s+\|/m, 'shares per team and pool');

($rc, $out, $err) = cli('cli_portal', 'top', '--once');
is($rc, 0, 'top --once') or diag $err;
like($out, qr/placed 1/, 'jobs by state');
like($out, qr/position \| job/, 'and the head of the queue');
($rc, $out, $err) = cli('cli_portal', '--json', 'top');
ok(eval { decode_json($out)->{jobs}{placed} } == 1, 'top --json (not a terminal: one screen)');

# ---- roles -------------------------------------------------------------------
($rc, $out, $err) = cli('cli_portal', 'nodes');
is($rc, 4, 'nodes as a portal: permission denied (4)');
like($err, qr/operators/, 'with a hint who may');
($rc, $out, $err) = cli('cli_ops', 'nodes');
is($rc, 0, 'nodes as an operator') or diag $err;
like($out, qr/^ n1\s+\| gpu\s+\| r1\s+\| up\s+\|\s+8 \| a100\s+\|\s+[48] \|/m, 'with the GPUs in use');
($rc, $out, $err) = cli('cli_analyst', '--json', 'usage', '--by', 'team');
is($rc, 0, 'usage as an analyst') or diag $err;
is(ref(eval { decode_json($out) }), 'ARRAY', 'usage --json');
# team trees: teams shows each team's path; usage --by subtree rolls up
sql("SELECT gangsched.add_team('org'), gangsched.add_team('org-a', 1, 'org'), gangsched.set_quota('org-a', 'gpu', 0)");
($rc, $out, $err) = cli('cli_portal', 'teams');
is($rc, 0, 'teams with a tree') or diag $err;
($rc, $out, $err) = cli('cli_ops', 'teams');
like($out, qr/^\s*org\/org-a\s+\|/m, 'teams shows the path of a subteam') or diag $out;
($rc, $out, $err) = cli('cli_analyst', 'usage', '--by', 'subtree');
is($rc, 0, 'usage --by subtree') or diag $err;
like($out, qr/^\s*org\/org-a\s+\|\s+0\.00 \|/m, 'a row per team, by path');
($rc, $out, $err) = cli('cli_portal', 'usage');
is($rc, 4, 'usage as a portal: permission denied (4)');
($rc, $out, $err) = cli('cli_analyst', 'usage', '--by', 'week');
is($rc, 2, 'usage --by week is a usage error');

# ---- resize ------------------------------------------------------------------
my $rz = sql("SELECT gangsched.submit('vision', 2, 1, name => 'to-resize')");
($rc, $out, $err) = cli('cli_portal', 'resize', $rz, '--workers', '1', '--gpus', '2');
is($rc, 0, 'resize') or diag $err;
is($out, "resized job $rz\n", 'says so');
is(sql("SELECT workers || ' ' || gpus FROM gangsched.jobs WHERE job = $rz"), '1 2', 'the new shape reached resize()');
($rc, $out, $err) = cli('cli_portal', 'resize', $rz);
is($rc, 2, 'resize without --workers or --gpus is a usage error');
($rc, $out, $err) = cli('cli_portal', 'resize', $rz, '--workers', '0');
is($rc, 1, 'a refused resize (1)');
like($err, qr/ERROR:  22023: workers must be at least 1, not 0/, 'with the SQLSTATE');
sql("SELECT gangsched.cancel($rz)");

# ---- cancel ------------------------------------------------------------------
($rc, $out, $err) = cli('cli_portal', 'cancel', $j2);
is($rc, 0, 'cancel') or diag $err;
is($out, "cancelled job $j2\n", 'says so');
is(sql("SELECT state FROM gangsched.jobs WHERE job = $j2"), 'cancelled', 'the job is cancelled');
($rc, $out, $err) = cli('cli_portal', 'cancel', $j2);
is($rc, 1, 'cancelling it again is refused (1)');
like($err, qr/ERROR:  55000:/, 'object_not_in_prerequisite_state');

# ---- dependencies --------------------------------------------------------------
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--gpus', '1', '--name', 'after-j1',
	'--after', $j1, '--after-mode', 'any');
is($rc, 0, 'submit --after --after-mode') or diag $err;
my ($j4) = $out =~ /^submitted job (\d+)$/;
is(sql("SELECT after_jobs::text || ' ' || after_mode FROM gangsched.gangs WHERE id = $j4"), "{$j1} any",
	'--after and --after-mode reached submit()');
($rc, $out, $err) = cli('cli_portal', 'why', $j4);
is($rc, 0, 'why of a waiting job') or diag $err;
like($out, qr/dependencies.*waiting for job $j1 to end/, 'says what it waits for');
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--after', "$j1; SELECT 1");
is($rc, 2, '--after with anything but ids is a usage error');
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--after', '999999');
is($rc, 1, 'waiting for an unknown job is refused (1)');
like($err, qr/ERROR:  23503: job 999999 does not exist in team "vision"/, 'with the SQLSTATE');

# ---- elastic gangs -------------------------------------------------------------
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--workers', '4', '--gpus', '1',
	'--name', 'elastic', '--min-replicas', '2');
is($rc, 0, 'submit --min-replicas') or diag $err;
my ($j5) = $out =~ /^submitted job (\d+)$/;
is(sql("SELECT min_replicas || ' ' || max_replicas FROM gangsched.jobs WHERE job = $j5"), '2 4',
	'--min-replicas reached submit()');
($rc, $out, $err) = cli('cli_portal', 'resize', $j5, '--min-replicas', '3');
is($rc, 0, 'resize --min-replicas') or diag $err;
is(sql("SELECT min_replicas FROM gangsched.jobs WHERE job = $j5"), '3', 'the new minimum reached resize()');
($rc, $out, $err) = cli('cli_portal', 'submit', '--team', 'vision', '--workers', '2', '--min-replicas', '5');
is($rc, 1, 'a minimum above the replicas is refused (1)');
like($err, qr/ERROR:  22023: min_replicas must be between 1 and 2, not 5/, 'with the SQLSTATE');
sql("SELECT gangsched.cancel($j5)");

# ---- no server ---------------------------------------------------------------
{
	local $ENV{PGCONNECT_TIMEOUT} = 2;
	my ($o, $e) = ('', '');
	IPC::Run::run([ $cli, '--dbname', 'host=' . $node->host . ' port=1 dbname=postgres', 'jobs' ], '>', \$o, '2>', \$e);
	is($? >> 8, 3, 'no connection: exit status 3');
}

is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'no invariant violation');
$node->stop;
done_testing();
