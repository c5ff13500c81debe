# A bounded soak of the production configuration (issue 11): the background
# worker runs every round, a real gangsched-agent per node connects as its
# own non-superuser role (gangsched.add_agent) and runs the jobs' commands,
# which exit by themselves (or fail, or die of the SIGTERM of a preemption),
# and for GS_SOAK_SECONDS (default 45) concurrent non-superuser portal roles
# (gangsched.add_member) of three teams submit, cancel, and one intruder
# role makes calls it must be refused. Nobody calls run_round().
#
# Each client is one psql session fed one statement at a time (IPC::Run):
# a submit is acknowledged when its id came back (autocommit: committed).
# At the end:
# - check_invariants() returns no rows;
# - every acknowledged job is in gangsched.jobs, and no other job is;
# - after the clients stop and the portals cancel what is still pending, no
#   job stays nominated, placed, running or preempting (settle: 30 s at
#   most), and no node has work left;
# - the server log has no PANIC, FATAL or ERROR except the races and
#   refusals listed at @allowed below;
# - figures: soak length, calls by kind, jobs acknowledged vs present.
#
# GS_SOAK_SECONDS=600 make installcheck-tap PROVE_TESTS=test/t/040_soak.pl
# soaks for ten minutes (docs/testing.md).
use strict;
use warnings;

use IPC::Run ();
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $soak_seconds = $ENV{GS_SOAK_SECONDS} // 45;
die "GS_SOAK_SECONDS must be a number of seconds from 1 to 86400"
  unless $soak_seconds =~ /^\d+(\.\d+)?$/ && $soak_seconds >= 1 && $soak_seconds <= 86400;
my $seed = $ENV{GS_SOAK_SEED} // int(rand(1_000_000));
note("soak: $soak_seconds s, seed $seed (GS_SOAK_SEED=$seed repeats the clients' choices)");
srand($seed);

my $srcdir = $ENV{TESTDIR} // '.';
my $agent_bin =
  -x "$srcdir/tools/agent/gangsched-agent"
  ? "$srcdir/tools/agent/gangsched-agent"
  : 'gangsched-agent';

my @nodes = map { "n$_" } 1 .. 4;    # 4 GPUs each
my @teams = qw(a b c);

my $node = PostgreSQL::Test::Cluster->new('soak');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'gangsched'
gangsched.database = 'postgres'
gangsched.enabled = on
gangsched.round_interval = '200ms'
gangsched.min_runtime = 0
gangsched.default_grace = '3s'
# the API calls by kind, from pg_stat_user_functions
track_functions = 'all'
# who raised what: the role and the SQLSTATE of every logged line
log_line_prefix = '%m [%p] %q%u %e %a: '
# the soak's statements are many; errors still log theirs
log_statement = 'none'
});
$node->start;

my $connstr = $node->connstr('postgres');
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

# -------------------------------------------------------------------------
# Set-up (the superuser): nodes, teams with quotas (team c borrows: its
# quota is 0, so the others' demand preempts it), and the login roles
# -------------------------------------------------------------------------
sql(q{
CREATE EXTENSION gangsched CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n' || i, 'gpu', ('r' || (i + 1) / 2)::ltree, 16, 128, 10, 4, 'sim', 16)
  FROM generate_series(1, 4) i;
SELECT gangsched.add_team(t) FROM unnest(ARRAY['a', 'b', 'c']) t;
SELECT gangsched.set_quota('a', 'gpu', 8);
SELECT gangsched.set_quota('b', 'gpu', 8);
SELECT gangsched.set_quota('c', 'gpu', 0);
CREATE ROLE portal_a1 LOGIN;
CREATE ROLE portal_a2 LOGIN;
CREATE ROLE portal_b LOGIN;
CREATE ROLE portal_c LOGIN;
CREATE ROLE intruder LOGIN;
SELECT gangsched.add_member('portal_a1', 'a');
SELECT gangsched.add_member('portal_a2', 'a');
SELECT gangsched.add_member('portal_b', 'b');
SELECT gangsched.add_member('portal_c', 'c');
SELECT gangsched.add_member('intruder', 'c');
});
foreach my $n (@nodes)
{
	sql("CREATE ROLE agent_$n LOGIN; SELECT gangsched.add_agent('agent_$n', '$n')");
}
is(sql("SELECT count(*) FROM pg_roles WHERE (rolname LIKE 'portal%' OR rolname LIKE 'agent%' OR rolname = 'intruder')
          AND NOT rolsuper"),
	'9', 'nine non-superuser login roles: four agents, four portals, an intruder');

# -------------------------------------------------------------------------
# Agents
# -------------------------------------------------------------------------
my $workdir = PostgreSQL::Test::Utils::tempdir();
my %agent_pid;
sub agent_log_file { return "$PostgreSQL::Test::Utils::log_path/soak_agent_$_[0].log"; }
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
		exec($agent_bin, '--node', $name, '--dbname', "$connstr user=agent_$name",
			'--workdir', $workdir, '--heartbeat', '1')
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

my @clients;
END
{
	local $?;
	kill 'KILL', $_ foreach values %agent_pid;
	waitpid($_, 0) foreach values %agent_pid;
	kill 'KILL', -$_ foreach ($workdir ? tracked_process_groups() : ());
	foreach my $c (@clients) { eval { $c->{h}->kill_kill } if $c->{h}; }
}

start_agent($_) foreach @nodes;
ok(poll_until('SELECT count(*) FROM gangsched.nodes WHERE heartbeat_at IS NOT NULL', '4', 20),
	'four agents connected as their own roles and sent heartbeats');

# -------------------------------------------------------------------------
# Clients: each a psql session, fed its next statement when the last one
# answered (the marker @@ ends each answer)
# -------------------------------------------------------------------------
sub start_client
{
	my ($name, $role, $next, $think) = @_;
	my $c = { name => $name, role => $role, next => $next, think => $think,
		in => '', out => '', err => '', sent => 0, answered => 0, ready_at => 0, pending => undef,
		errors => {} };
	$c->{h} = IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', '-v', 'VERBOSITY=verbose',
		  '-d', "$connstr user=$role" ],
		'<', \$c->{in}, '>', \$c->{out}, '2>', \$c->{err});
	push @clients, $c;
	return $c;
}

# Commands the agents run: mostly short sleeps that exit 0 (killed by
# SIGTERM if preempted), some failures, some checkpointing trainers.
my $trainer = "$srcdir/tools/agent/trainer.sh";
sub random_command
{
	my $r = rand();
	return sprintf('exec sleep %.1f', 0.3 + rand(1.5)) if $r < 0.75;
	return 'sleep 0.2; exit 3' if $r < 0.85;
	return sprintf('exec sh %s %d 0.1', $trainer, 3 + int(rand(10)));
}

my %acked;    # job id => team
my %counts;   # figures by kind

sub submitter
{
	my ($team) = @_;
	return sub {
		my $workers = (1, 1, 2, 2, 3, 4)[ int(rand(6)) ];
		my $prio = int(rand(3));
		my $cmd = random_command();
		return {
			kind => 'submit', team => $team,
			sql => "SELECT gangsched.submit('$team', $workers, 1, priority => $prio, command => \$c\$$cmd\$c\$);"
		};
	};
}

# a random live job of the team (portals see only their teams' jobs); the
# job may end before cancel() locks it: 55000 "job N is already finished"
sub canceller
{
	return sub {
		return {
			kind => 'cancel',
			sql => "SELECT count(gangsched.cancel(job)) FROM (SELECT job FROM gangsched.jobs
			         WHERE state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
			         ORDER BY random() LIMIT 1) s;"
		};
	};
}

# the intruder (a portal of team c) tries another team's job: cancel() and
# an agent's report must both be refused with 42501
sub intruder
{
	return sub {
		my @others = grep { $acked{$_} ne 'c' } keys %acked;
		return undef unless @others;
		my $job = $others[ int(rand(@others)) ];
		return rand() < 0.5
		  ? { kind => 'hostile', sql => "SELECT gangsched.cancel($job);" }
		  : { kind => 'hostile', sql => "SELECT gangsched.job_finished($job, true, 'forged');" };
	};
}

my ($r0) = sql('SELECT rounds FROM gangsched.worker_status()');
my $started = time;
my $deadline = $started + $soak_seconds;
start_client('submit-a1', 'portal_a1', submitter('a'), 0.6);
start_client('submit-a2', 'portal_a2', submitter('a'), 0.6);
start_client('submit-b', 'portal_b', submitter('b'), 0.4);
start_client('submit-c', 'portal_c', submitter('c'), 0.3);
start_client('cancel-a', 'portal_a1', canceller(), 0.8);
start_client('cancel-c', 'portal_c', canceller(), 0.8);
start_client('intruder', 'intruder', intruder(), 1.0);

# Feed and read the clients until the deadline; then let each finish its
# statement in flight.
sub answer
{
	my ($c) = @_;
	my $i = index($c->{out}, "@@\n");
	return 0 if $i < 0;
	my $out = substr($c->{out}, 0, $i);
	$c->{out} = substr($c->{out}, $i + 3);
	my $err = $c->{err};
	$c->{err} = '';
	my $s = delete $c->{pending};
	$c->{answered}++;
	if ($err =~ /ERROR:  ([0-9A-Z]{5}): (.*)/)
	{
		$c->{errors}{"$s->{kind} $1"}++;
		$counts{"$s->{kind} refused $1"}++;
	}
	elsif ($s->{kind} eq 'submit' && $out =~ /^(\d+)\n\z/)
	{
		$acked{$1} = $s->{team};
		$counts{'submit acknowledged'}++;
	}
	elsif ($s->{kind} eq 'cancel' && $out =~ /^1\n\z/)
	{
		$counts{'cancel done'}++;
	}
	elsif ($s->{kind} eq 'cancel' && $out =~ /^0\n\z/)
	{
		$counts{'cancel found nothing'}++;
	}
	else
	{
		$counts{"$s->{kind} unexpected"}++;
		diag "$c->{name}: unexpected answer to $s->{sql}\nstdout: $out\nstderr: $err";
	}
	$c->{ready_at} = time + rand(2 * $c->{think});
	return 1;
}

while (1)
{
	my $now = time;
	my $busy = 0;
	foreach my $c (@clients)
	{
		if (!$c->{pending} && $now < $deadline && $now >= $c->{ready_at})
		{
			my $s = $c->{next}->();
			if ($s)
			{
				$c->{pending} = $s;
				$c->{in} .= "$s->{sql}\n\\echo \@\@\n";
				$c->{sent}++;
				$counts{"$s->{kind} sent"}++;
			}
			else
			{
				$c->{ready_at} = $now + 0.2;
			}
		}
		$busy++ if $c->{pending};
		$c->{h}->pump_nb;
		answer($c) if $c->{pending};
	}
	last if $now >= $deadline && !$busy;
	last if $now >= $deadline + 60;    # a client hung: reported below
	usleep(10_000);
}
my $soak_length = time - $started;
my $in_flight = grep { $_->{pending} } @clients;
is($in_flight, 0, 'every client statement was answered');
foreach my $c (@clients)
{
	$c->{in} .= "\\q\n";
	$c->{h}->finish;
	delete $c->{h};
}

# -------------------------------------------------------------------------
# Settle: the portals cancel what is still pending, the running jobs end
# -------------------------------------------------------------------------
my $soak_end_rounds = sql('SELECT rounds FROM gangsched.worker_status()');
# (a job that ends meanwhile is left alone: the exception block is not
# logged). Each cancel commits on its own, as a portal's calls do: one
# transaction cancelling them all held each job's row while waiting for the
# next, and deadlocked with a round that locked two of them the other way.
foreach my $t (@teams)
{
	my $role = $t eq 'a' ? 'portal_a1' : "portal_$t";
	$counts{'cancel at the end'} += $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM gangsched.jobs WHERE state = 'pending';
DO $$
DECLARE j bigint;
BEGIN
    FOR j IN SELECT job FROM gangsched.jobs WHERE state = 'pending' ORDER BY job LOOP
        BEGIN
            PERFORM gangsched.cancel(j);
        EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL;
        END;
        COMMIT;
    END LOOP;
END $$;},
		connstr => "$connstr user=$role");
}
my $settled = poll_until(
	"SELECT count(*) FROM gangsched.jobs WHERE state IN ('pending', 'nominated', 'placed', 'running', 'preempting')",
	'0', 30);
ok($settled, 'after the soak every job ends within 30 s (no job stays live)');
is( sql(
		"SELECT count(*) FROM gangsched.jobs WHERE state IN ('nominated', 'placed', 'preempting')"),
	'0', 'no job is stuck nominated, placed or preempting');
is(sql('SELECT count(*) FROM gangsched.allocations WHERE upper_inf(during)'),
	'0', 'no allocation is left open');
is( sql(
		"SELECT count(*) FROM gangsched.nodes n, LATERAL gangsched.node_work(n.name) w"),
	'0', 'no node has work left');

# -------------------------------------------------------------------------
# Invariants, no lost job
# -------------------------------------------------------------------------
my $invariant_rows = sql('SELECT count(*) FROM gangsched.check_invariants()');
is($invariant_rows, '0', 'check_invariants() returns no rows');
diag(sql('SELECT * FROM gangsched.check_invariants()')) if $invariant_rows ne '0';

my %present = map { split /\|/ } split /\n/, sql('SELECT job, team FROM gangsched.jobs');
my @lost = grep { !exists $present{$_} || $present{$_} ne $acked{$_} } sort { $a <=> $b } keys %acked;
my @unknown = grep { !exists $acked{$_} } sort { $a <=> $b } keys %present;
cmp_ok(scalar(keys %acked), '>', 0, 'submits were acknowledged');
is(scalar(@lost), 0, 'every acknowledged job is in gangsched.jobs, in its team')
  or diag("lost: @lost[0 .. ($#lost < 20 ? $#lost : 19)]");
is(scalar(@unknown), 0, 'gangsched.jobs holds no job that was not acknowledged')
  or diag("unknown: @unknown[0 .. ($#unknown < 20 ? $#unknown : 19)]");

my %by_state = map { split /\|/ } split /\n/,
  sql('SELECT state, count(*) FROM gangsched.jobs GROUP BY state');
cmp_ok($by_state{finished} // 0, '>', 0, 'jobs finished (reported by their agents)');
cmp_ok($by_state{cancelled} // 0, '>', 0, 'jobs were cancelled');
is($counts{'submit unexpected'} // 0, 0, 'every submit returned an id');
is(join(',', grep { /^submit refused/ } sort keys %counts), '', 'no submit was refused');
is(join(',', grep { /^cancel refused/ && $_ ne 'cancel refused 55000' } sort keys %counts),
	'', 'cancels were refused only with 55000 (the job ended first)');
is($counts{'hostile refused 42501'} // 0, $counts{'hostile sent'} // 0,
	'every call of the intruder was refused with 42501');
cmp_ok($counts{'hostile sent'} // 0, '>', 0, 'the intruder tried');
is(sql(q{SELECT count(*) FROM gangsched.jobs WHERE message = 'forged'}), '0',
	'no forged report landed');

# -------------------------------------------------------------------------
# The server log
# -------------------------------------------------------------------------
# Allowed ERROR lines, by role, SQLSTATE and message (every other ERROR,
# and any FATAL or PANIC, fails the test):
# - a portal canceller's cancel() of a job that finished or failed between
#   the canceller's SELECT and cancel()'s row lock: 55000;
# - an agent's report on a job that moved on first (docs/agent.md, "Who
#   reports": the agent logs it and treats the report as done):
#   55000 "job N is <state>, cannot start|finish|release" when the job had
#   changed state by the time its row was locked (cancelled, failed by
#   another node's report, preempted before every node confirmed, requeued;
#   any state: the report is about one the job has left),
#   and 42501 "permission denied to report the end of|release job N" when
#   it no longer held workers on the agent's node at the call (another node
#   reported the job's failure first; the agent maps 42501 on job_* calls
#   to "over already");
# - the intruder's calls: 42501 from cancel() (the job is another team's)
#   and from EXECUTE on job_finished (a portal may not call it).
my @allowed = (
	[ qr/^portal_(a1|c)$/, '55000', qr/^job \d+ is already (finished|failed)$/ ],
	[ qr/^agent_n\d$/, '55000',
	  qr/^job \d+ is (pending|nominated|placed|running|preempting|finished|failed|cancelled|expired), cannot (start|finish|release)$/ ],
	[ qr/^agent_n\d$/, '42501', qr/^permission denied to (report the end of|release) job \d+$/ ],
	[ qr/^intruder$/, '42501', qr/^permission denied (to cancel job \d+|for function job_finished)$/ ],
);
my (%log_allowed, @log_bad);
foreach my $line (split /\n/, slurp_file($node->logfile))
{
	next unless $line =~ /\b(ERROR|FATAL|PANIC):  /;
	my ($u, $e, $m) = $line =~ /^\S+ \S+ \S+ \[\d+\] (\S*) (\S+) [^:]*: ERROR:  (.*)$/;
	if (defined $m && grep { $u =~ $_->[0] && $e eq $_->[1] && $m =~ $_->[2] } @allowed)
	{
		$log_allowed{"$u $e"}++;
	}
	else
	{
		push @log_bad, $line;
	}
}
is(scalar(@log_bad), 0, 'the server log has no ERROR, FATAL or PANIC but the allowed races and refusals')
  or diag(join("\n", @log_bad[0 .. ($#log_bad < 20 ? $#log_bad : 19)]));

# -------------------------------------------------------------------------
# Stop, figures
# -------------------------------------------------------------------------
foreach my $n (sort keys %agent_pid)
{
	my $pid = delete $agent_pid{$n};
	kill 'TERM', $pid;
	waitpid($pid, 0);
	is($?, 0, "agent $n exits 0 on SIGTERM");
	unlike(agent_log($n), qr/ (ERROR|FATAL): /, "agent $n logged no error");
}
usleep(1_200_000);    # the backends' function statistics reach the shared stats
my %calls = map { split /\|/ } split /\n/, sql(
	q{SELECT funcname, calls FROM pg_stat_user_functions WHERE schemaname = 'gangsched'
	   AND funcname IN ('submit', 'cancel', 'run_round', 'job_started', 'job_finished',
	                    'job_released', 'node_heartbeat', 'node_work')});
my $rounds = sql('SELECT rounds FROM gangsched.worker_status()') - $r0;
my ($preempted, $lost_work) = split /\|/,
  sql('SELECT sum(preemptions), round(sum(lost_gpu_seconds), 1) FROM gangsched.jobs');
my $xacts = sql(q{SELECT xact_commit || ' committed, ' || xact_rollback || ' rolled back'
                    FROM pg_stat_database WHERE datname = 'postgres'});

my $fig = sprintf(
	"soak length %.1f s (GS_SOAK_SECONDS=%s), seed %s\n"
	  . "  client statements: %d submits sent, %d acknowledged; %d cancels sent, %d cancelled, %d found nothing,"
	  . " %d refused 55000 (job ended first), %d cancelled at the end; %d intruder calls, %d refused 42501\n"
	  . "  worker rounds: %d during the soak and settle (%d by the end of the soak)\n"
	  . "  server calls (pg_stat_user_functions): submit %s, cancel %s, run_round %s; agent calls: node_work %s,"
	  . " node_heartbeat %s, job_started %s, job_finished %s, job_released %s\n"
	  . "  database: %s transactions\n"
	  . "  jobs: %d acknowledged, %d present, %d lost, %d unknown; by state: %s; %s preemptions, %s GPU-s lost work\n"
	  . "  check_invariants(): %s rows; allowed log errors: %s",
	$soak_length, $soak_seconds, $seed,
	$counts{'submit sent'} // 0, $counts{'submit acknowledged'} // 0,
	$counts{'cancel sent'} // 0, $counts{'cancel done'} // 0, $counts{'cancel found nothing'} // 0,
	$counts{'cancel refused 55000'} // 0, $counts{'cancel at the end'} // 0,
	$counts{'hostile sent'} // 0, $counts{'hostile refused 42501'} // 0,
	$rounds, $soak_end_rounds - $r0,
	map({ $calls{$_} // 0 } qw(submit cancel run_round node_work node_heartbeat job_started job_finished job_released)),
	$xacts,
	scalar(keys %acked), scalar(keys %present), scalar(@lost), scalar(@unknown),
	join(', ', map { "$_ $by_state{$_}" } sort keys %by_state), $preempted // 0, $lost_work // 0,
	$invariant_rows, join(', ', map { "$_ x$log_allowed{$_}" } sort keys %log_allowed) || 'none');
diag($fig);
open(my $fh, '>', "$PostgreSQL::Test::Utils::log_path/soak_figures.txt") or die;
print $fh "$fig\n";
close $fh;

$node->stop;
ok(!$node->log_contains('terminated by signal') && !$node->log_contains('PANIC'), 'no crash in the server log');

done_testing();
