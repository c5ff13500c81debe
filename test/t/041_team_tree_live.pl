# Team trees in the configuration users run: the background worker running
# the rounds (woken on commit), real reference agents whose workers are
# tools/agent/trainer.sh (preemption goes through SIGTERM, a checkpoint and
# the agent's release), and login roles for everyone: the operator, portals
# bound to leaf teams, agents bound to their nodes, an analyst. Nobody calls
# run_round(). (38_team_tree* and 39_team_tree_admin test the same rules
# with the worker off, as superuser.)
#
# The cluster: 4 nodes x 8 GPUs = 32 GPUs in one pool; every job is one
# worker of 4 GPUs (one trainer process), so "one job" is 4 GPUs.
#
#   research (weight 3)                 prod (weight 1; nominal 16 GPUs, lending limit 8)
#     vision (1)        lang (1)          serve (1)
#       vis_a             lang_a  scratch   serve_a
#
# - scratch runs a short job to its end (it is retired at the end);
# - lang_a borrows the idle cluster: 24 GPUs, as prod's lending limit keeps
#   8 of its 16 idle GPUs from the other division;
# - serve_a reclaims prod's quota: its first two jobs take the 8 held back,
#   its third preempts a lang_a job (reclaim, with grace), whose trainer
#   checkpoints on SIGTERM and whose agent releases; the serve_a job runs;
# - three portals submit at once (their own sessions) while rounds run; the
#   split settles at prod 16 (its nominal quota is a floor), research 16
#   (vision 8, lang 8);
# - hostile portals: no submit to a sibling or a parent, no tree
#   administration, no sight of another subtree's jobs or of their ids in
#   reasons;
# - the operator mid-run: set_team_weight (vision 3: vision 12, lang 4),
#   close_team / open_team on lang (submits refused with 55000 and a hint,
#   running jobs run on, queued ones stay queued), set_team_parent moving
#   vision with its running jobs under prod (research 16 = lang_a; prod 16
#   = serve 4 + vision 12: vis_a, cut to nothing by lang_a's fair-share
#   preemptions, takes its part of prod back from serve_a by fair share,
#   although serve_a's gangs run within prod's quota: without a quota of
#   their own, prod's children share prod's),
#   remove_team refused while a team has children or live jobs, then the
#   retirement of scratch (close, archive, remove);
# - at each steady state every team's GPUs are within one job (4 GPUs) of
#   its fair_share x 32 (team_shares, and _fair_shares() for a team the
#   view has no row for: no use, no quota) and of the weighted split worked
#   out here by hand; check_invariants() is empty; the server log has no
#   unexpected ERROR and no crash;
# - at the end a streaming standby shows the same team_shares as the
#   primary, runs no round, and answers a portal's queue and why_pending
#   (its own jobs only, no other team's job id) read-only.
use strict;
use warnings;

use IPC::Run ();
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

my $GPUS = 32;    # the cluster
my $JOB = 4;      # GPUs per job

my $node = PostgreSQL::Test::Cluster->new('treelive');
$node->init(allows_streaming => 1);
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'gangsched'
gangsched.database = 'postgres'
gangsched.enabled = on
gangsched.round_interval = '200ms'
gangsched.min_runtime = 0
gangsched.default_grace = '20s'
});
$node->start;

# the harness's own superuser sessions keep a safe search_path
$ENV{PGOPTIONS} = '-c search_path=pg_catalog,public';
my $connstr = $node->connstr('postgres');
sub sql { return $node->safe_psql('postgres', $_[0]); }

# $sql as login role $user over its own connection: (exit code, stdout,
# stderr), errors with their SQLSTATE
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

sub refused
{
	my ($user, $sql, $state, $re, $what) = @_;
	my ($rc, $out, $err) = as_role($user, $sql);
	ok($rc != 0 && $err =~ /ERROR:  $state: / && $err =~ $re, $what)
	  or diag "rc=$rc\nstdout: $out\nstderr: $err";
	return $err;
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

# Wait until the worker has run $n more rounds (so a state can be seen to
# stay, without sleeping a fixed time)
sub rounds { return sql('SELECT rounds FROM gangsched.worker_status()'); }

sub wait_rounds
{
	my ($n) = @_;
	my $start = rounds();
	return wait_for(sub { rounds() >= $start + $n }, 30, "$n rounds");
}

# -------------------------------------------------------------------------
# Set-up: the superuser creates the extension and the login roles; the
# operator (not a superuser) builds the cluster, the tree and the bindings
# -------------------------------------------------------------------------
sql(q{
CREATE EXTENSION gangsched CASCADE;
CREATE ROLE ops LOGIN IN ROLE gangsched_operator;
CREATE ROLE grafana LOGIN IN ROLE gangsched_analyst;
CREATE ROLE portal_va LOGIN;
CREATE ROLE portal_la LOGIN;
CREATE ROLE portal_sa LOGIN;
CREATE ROLE agent_n1 LOGIN;
CREATE ROLE agent_n2 LOGIN;
CREATE ROLE agent_n3 LOGIN;
CREATE ROLE agent_n4 LOGIN;
});
allowed(
	'ops', q{
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n' || i, 'gpu', 'r1', 32, 256, 10, 8, 'sim', 16) FROM generate_series(1, 4) i;
SELECT gangsched.add_team('research', 3);
SELECT gangsched.add_team('vision', 1, parent => 'research');
SELECT gangsched.add_team('lang', 1, parent => 'research');
SELECT gangsched.add_team('vis_a', 1, parent => 'vision');
SELECT gangsched.add_team('lang_a', 1, parent => 'lang');
SELECT gangsched.add_team('scratch', 1, parent => 'lang');
SELECT gangsched.add_team('prod', 1);
SELECT gangsched.add_team('serve', 1, parent => 'prod');
SELECT gangsched.add_team('serve_a', 1, parent => 'serve');
SELECT gangsched.set_quota('prod', 'gpu', 16, lending_limit_gpus => 8);
SELECT gangsched.add_member('portal_va', 'vis_a');
SELECT gangsched.add_member('portal_la', 'lang_a');
SELECT gangsched.add_member('portal_sa', 'serve_a');
SELECT gangsched.add_agent('agent_n' || i, 'n' || i) FROM generate_series(1, 4) i;
}, 'the operator builds 4 nodes, a three-level tree with a quota and a lending limit on prod, and the bindings');
is(sql(q{SELECT string_agg(path, ' ' ORDER BY path) FROM gangsched._team_tree t JOIN gangsched.teams x ON x.id = t.team_id WHERE t.leaf}),
	'prod/serve/serve_a research/lang/lang_a research/lang/scratch research/vision/vis_a', 'the leaves of the tree');

# -------------------------------------------------------------------------
# Agents, each connected as its node's role
# -------------------------------------------------------------------------
my $workdir = PostgreSQL::Test::Utils::tempdir();
my %agent_pid;

sub agent_log_file { return "$PostgreSQL::Test::Utils::log_path/agent_tree_$_[0].log"; }

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
		$ENV{PGOPTIONS} = '-c search_path=pg_catalog';
		exec($agent_bin, '--node', $name, '--dbname', "$connstr user=agent_$name", '--workdir', $workdir,
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

start_agent("n$_") foreach 1 .. 4;
ok(poll_until('SELECT count(*) FROM gangsched.nodes WHERE heartbeat_at IS NOT NULL', '4', 20),
	'four agents, each as its own role, connected and sent heartbeats');

my $long = "exec sh $trainer 100000 0.5";    # runs until preempted or cancelled

# submit $n jobs as $role to $team, one statement (and commit) each;
# returns the job ids
sub submit_jobs
{
	my ($role, $team, $n, $cmd) = @_;
	$cmd //= $long;
	my $out = allowed($role,
		join('', map { "SELECT gangsched.submit('$team', 1, $JOB, name => '$team-$_', command => '$cmd');\n" } 1 .. $n),
		"$role submits $n jobs to $team");
	return ($out =~ /^(\d+)$/mg);
}

# per-leaf running/pending counts, as the operator sees them
sub states
{
	my ($team) = @_;
	return sql(
		"SELECT count(*) FILTER (WHERE state = 'running') || '|' || count(*) FILTER (WHERE state = 'pending')
		   FROM gangsched.jobs WHERE team = '$team'");
}

# The steady-state check. For every team (leaves and inner teams, so every
# sibling set): |used_gpus - fair_share x 32| is at most one job (4 GPUs;
# plus 32 x 0.00005 for fair_share's rounding to 4 decimals; a team without
# a row in team_shares uses 0 and its fair_share is _fair_shares()'s, the
# function behind the view), and each team in %expect holds its
# hand-computed weighted split within one job. Nothing is leaving or arriving (no gang preempting
# or nominated), the cluster is full, and every leaf in %expect still has a
# pending job (it is busy: it asks for more than it gets). Returns '' when
# all hold, else what is off.
sub share_gaps
{
	my ($skip, %expect) = @_;
	my $rows = sql(
		"SELECT t.name || ' ' || COALESCE(s.used_gpus, 0) || ' ' || COALESCE(s.fair_share, round(f.fair_share::numeric, 4), 0)
		   FROM gangsched.teams t LEFT JOIN gangsched.team_shares s ON s.team = t.name AND s.pool = 'gpu'
		   LEFT JOIN gangsched._fair_shares() f ON f.team_id = t.id ORDER BY t.name");
	my @off;
	foreach (split /\n/, $rows)
	{
		my ($team, $used, $fair) = split / /;
		next if $skip->{$team};
		push @off, "$team uses $used, fair_share $fair x $GPUS = " . $fair * $GPUS
		  if abs($used - $fair * $GPUS) > $JOB + $GPUS * 0.00005 + 1e-9;
		push @off, "$team uses $used, its weighted split is $expect{$team}"
		  if defined $expect{$team} && abs($used - $expect{$team}) > $JOB;
	}
	my $moving = sql("SELECT count(*) FROM gangsched.jobs WHERE state IN ('preempting', 'nominated', 'placed')");
	push @off, "$moving jobs preempting, nominated or placed" if $moving;
	my $used = sql("SELECT COALESCE(sum(gpus * workers), 0) FROM gangsched.jobs WHERE state = 'running'");
	push @off, "$used GPUs run, not $GPUS" if $used != $GPUS;
	foreach my $leaf (grep { /_a$/ } sort keys %expect)
	{
		push @off, "$leaf has no pending job"
		  unless sql("SELECT count(*) FROM gangsched.jobs WHERE team = '$leaf' AND state = 'pending'");
	}
	return join('; ', @off);
}

# Poll the check until it holds, then again after a few rounds (steady).
sub steady_shares
{
	my ($what, %expect) = @_;
	my %skip;
	my $last = '';
	my $ok = wait_for(sub { $last = share_gaps(\%skip, %expect); return $last eq '' }, 20, $what);
	diag "last: $last" unless $ok;
	if ($ok)
	{
		wait_rounds(5);
		$last = share_gaps(\%skip, %expect);
		$ok = $last eq '';
		diag "after 5 more rounds: $last" unless $ok;
	}
	ok($ok, $what);
	diag sql("SELECT path, used_gpus, fair_share, dominant_share FROM gangsched.team_shares ORDER BY path") unless $ok;
	return $ok;
}

# -------------------------------------------------------------------------
# scratch runs a short job to its end (its history keeps it until archived)
# -------------------------------------------------------------------------
my $sc = allowed('ops', "SELECT gangsched.submit('scratch', 1, $JOB, name => 'short', command => 'exec sh $trainer 3 0.1')",
	'the operator submits a short job to scratch');
($sc) = $sc =~ /^(\d+)$/m;
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $sc", 'finished', 20), 'it runs and finishes');

# -------------------------------------------------------------------------
# lang_a borrows the idle cluster, but not what prod's lending limit keeps
# -------------------------------------------------------------------------
# (these trainers take a second to stop, so a preempting job can be seen)
my @la = submit_jobs('portal_la', 'lang_a', 8, "export TRAINER_STOP_DELAY=1; $long");
is(scalar @la, 8, 'portal_la got 8 job ids');
ok(poll_until("SELECT count(*) FROM gangsched.jobs WHERE team = 'lang_a' AND state = 'running'", '6', 30),
	"6 of lang_a's 8 jobs run (24 GPUs), with nobody calling run_round()");
wait_rounds(5);
is(states('lang_a'), '6|2', 'after 5 more rounds still 6 running and 2 pending');
is(sql("SELECT sum(gpus * workers) FILTER (WHERE borrowed) || '/' || sum(gpus * workers) FROM gangsched.jobs WHERE team = 'lang_a' AND state = 'running'"),
	'24/24', 'all 24 GPUs are borrowed (research has no quota)');
my ($la_pending) = grep { sql("SELECT state FROM gangsched.jobs WHERE job = $_") eq 'pending' } @la;
like((as_role('portal_la', "SELECT gangsched.why_pending($la_pending)"))[1], qr/prod.*does not lend|does not lend.*prod/,
	"why_pending says the 8 idle GPUs are prod's, which it does not lend");

# -------------------------------------------------------------------------
# serve_a reclaims prod's quota from the other division
# -------------------------------------------------------------------------
my @sa = submit_jobs('portal_sa', 'serve_a', 2);
ok(poll_until("SELECT count(*) FROM gangsched.jobs WHERE team = 'serve_a' AND state = 'running'", '2', 20),
	"serve_a's first two jobs run on the 8 GPUs prod's lending limit kept");
is(sql("SELECT count(*) FROM gangsched.events WHERE kind = 'preempting'"), '0', 'without preempting anything');
my ($sa3) = submit_jobs('portal_sa', 'serve_a', 1);
push @sa, $sa3;
my $seen = '';
ok( wait_for(
		sub { $seen = (as_role('portal_la', "SELECT job || ' ' || reason FROM gangsched.jobs WHERE state = 'preempting'"))[1]; $seen ne '' },
		20, 'a preempting lang_a job'),
	'portal_la sees one of its jobs preempting');
like($seen, qr/^\d+ preempted for a job of another team \(reclaim\)$/, "its reason does not name serve_a's job");
ok(poll_until("SELECT state FROM gangsched.jobs WHERE job = $sa3", 'running', 30),
	"serve_a's third job (within prod's nominal 16) runs");
my $victim = sql(
	"SELECT job FROM gangsched.events WHERE kind = 'preempting' AND reason = 'preempted for job $sa3 (reclaim)'");
like($victim, qr/^\d+$/, "one job was preempted for it (reclaim): job $victim");
is(sql("SELECT team FROM gangsched.jobs WHERE job = $victim"), 'lang_a', "a borrowed lang_a job");
is(sql("SELECT reason FROM gangsched.events WHERE job = $victim AND kind = 'requeued'"),
	"preempted for job $sa3; released after a checkpoint", "its agent released it after a checkpoint");
like(trainer_log($victim), qr/checkpoint step=\d+ \(SIGTERM\)/, "its trainer got SIGTERM and wrote a checkpoint");
is( sql(
		"SELECT (SELECT min(at) FROM gangsched.events WHERE job = $sa3 AND kind = 'running')
		      > (SELECT at FROM gangsched.events WHERE job = $victim AND kind = 'requeued')"),
	't', "serve_a's job started after the release");
is(sql("SELECT preemptions || ' ' || lost_gpu_seconds FROM gangsched.jobs WHERE job = $victim"),
	'1 0', 'the victim lost no work');
is(states('lang_a'), '5|3', 'lang_a: 5 running, 3 pending');
is((split / /, $seen)[0], $victim, 'it was that job');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold after the reclaim');

# -------------------------------------------------------------------------
# Three portals submit at once, each in its own session, while rounds run
# -------------------------------------------------------------------------
my $psql = $node->installed_command('psql');
my %burst = (portal_va => [ 'vis_a', 5 ], portal_sa => [ 'serve_a', 2 ], portal_la => [ 'lang_a', 1 ]);
my %h;
foreach my $role (sort keys %burst)
{
	my ($team, $n) = @{ $burst{$role} };
	my $script = join('',
		map { "SELECT gangsched.submit('$team', 1, $JOB, name => '$team-b$_', command => '$long');\nSELECT pg_sleep(0.1);\n" }
		  1 .. $n);
	my ($out, $err) = ('', '');
	local $ENV{PGOPTIONS} = '';
	$h{$role} = {
		out => \$out,
		err => \$err,
		h => IPC::Run::start([ $psql, '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', "$connstr user=$role", '-f', '-' ],
			'<', \$script, '>', \$out, '2>', \$err)
	};
}
my %burst_jobs;
foreach my $role (sort keys %h)
{
	my $done = $h{$role}{h}->finish;
	ok($done, "$role\'s concurrent session submitted without error")
	  or diag ${ $h{$role}{err} };
	my @ids = (${ $h{$role}{out} } =~ /^(\d+)$/mg);
	is(scalar @ids, $burst{$role}[1], "$role got its $burst{$role}[1] job ids");
	$burst_jobs{$role} = \@ids;
}
my @va = @{ $burst_jobs{portal_va} };
push @la, @{ $burst_jobs{portal_la} };
push @sa, @{ $burst_jobs{portal_sa} };

# research 3 : prod 1 of 32 would be 24 : 8, but prod's nominal 16 is a
# floor (serve_a asks for 20): prod 16, research 16 = vision 8 + lang 8
steady_shares('steady state 1: prod 16 (serve_a 16), research 16 (vis_a 8, lang_a 8), each team within one job of fair_share',
	research => 16, vision => 8, lang => 8, vis_a => 8, lang_a => 8, prod => 16, serve => 16, serve_a => 16);
like(sql("SELECT string_agg(DISTINCT e.reason, ', ') FROM gangsched.events e JOIN gangsched.jobs j USING (job)
           WHERE e.kind = 'preempting' AND j.team = 'lang_a' AND e.reason LIKE '%(fair share)'"),
	qr/preempted for job \d+ \(fair share\)/, 'vis_a took its part from lang_a by fair-share preemption');
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold at steady state 1');

# -------------------------------------------------------------------------
# Hostile tenants in the tree
# -------------------------------------------------------------------------
refused('portal_la', "SELECT gangsched.submit('scratch', 1, 4)", '42501', qr/permission denied to submit/,
	'portal_la cannot submit to its sibling scratch (42501)');
refused('portal_la', "SELECT gangsched.submit('lang', 1, 4)", '42501|55S01', qr/permission denied|child teams|leaf/,
	'nor to its parent lang');
refused('portal_va', "SELECT gangsched.submit('lang_a', 1, 4)", '42501', qr/permission denied to submit/,
	'portal_va cannot submit to lang_a (the other subtree of research)');
refused('portal_sa', "SELECT gangsched.submit('vis_a', 1, 4)", '42501', qr/permission denied to submit/,
	'portal_sa cannot submit to vis_a (the other division)');
refused('portal_la', "SELECT gangsched.set_team_parent('lang_a', 'prod')", '42501', qr/permission denied/,
	'portal_la cannot call set_team_parent');
refused('portal_la', "SELECT gangsched.close_team('vis_a', 'mine now')", '42501', qr/permission denied/,
	'nor close_team');
refused('portal_la', "SELECT gangsched.set_team_weight('lang', 100)", '42501', qr/permission denied/,
	'nor set_team_weight');
refused('portal_la', "SELECT gangsched.set_quota('lang_a', 'gpu', 32)", '42501', qr/permission denied/,
	'nor set_quota');
refused('portal_sa', "SELECT gangsched.cancel($la[0])", '42501', qr/permission denied to cancel/,
	"portal_sa cannot cancel a lang_a job");

# what each portal sees: only its own leaf's jobs, and no other team's job
# id in any reason it can read (jobs, queue, why_pending)
my %own = (portal_va => [ 'vis_a', \@va ], portal_la => [ 'lang_a', \@la ], portal_sa => [ 'serve_a', \@sa ]);
foreach my $role (sort keys %own)
{
	my ($team, $ids) = @{ $own{$role} };
	my %mine = map { ($_ => 1) } @$ids;
	is((as_role($role, 'SELECT string_agg(DISTINCT team, \',\') FROM gangsched.jobs'))[1],
		$team, "$role sees only $team\'s jobs");
	is((as_role($role, 'SELECT count(*) FROM gangsched.jobs'))[1], scalar(@$ids), "all " . scalar(@$ids) . " of them");
	is((as_role($role, "SELECT count(*) FROM gangsched.placements p JOIN gangsched.jobs j USING (job) WHERE j.team <> '$team'"))[1],
		'0', "$role sees no other team's placements");
	is((as_role($role, "SELECT count(*) FROM gangsched.queue WHERE team <> '$team'"))[1], '0',
		"$role sees no other team's queue rows");
	my $reasons = (as_role($role,
		"SELECT string_agg(COALESCE(reason, ''), E'\\n') FROM gangsched.jobs
		 UNION ALL SELECT string_agg(COALESCE(reason, ''), E'\\n') FROM gangsched.queue"))[1];
	my @named = ($reasons =~ /\bjobs? (\d+)/g);
	my @foreign = grep { !$mine{$_} } @named;
	is("@foreign", '', "no reason $role reads in jobs or queue names another team's job")
	  or diag $reasons;
	# why_pending names no job of another team either (the job first in
	# line reads "a job of another team")
	my $why = (as_role($role,
		"SELECT string_agg(w.reason || ': ' || w.detail, E'\\n')
		   FROM gangsched.jobs j, gangsched.why_pending(j.job) w WHERE j.state = 'pending'"))[1];
	@named = ($why =~ /\bjobs? (\d+)/g);
	@foreign = grep { !$mine{$_} } @named;
	is("@foreign", '', "why_pending names no job of another team to $role")
	  or diag $why;
}
is((as_role('grafana', "SELECT count(*) || ' ' || count(command) FROM gangsched.jobs"))[1],
	(scalar(@la) + scalar(@va) + scalar(@sa) + 1) . ' 0', 'the analyst sees every job (scratch\'s too), no command');
like((as_role('grafana',
	"SELECT string_agg(team || '=' || (gpu_hours > 0)::text, ' ' ORDER BY path) FROM gangsched.usage(gangsched.now() - interval '1 hour', gangsched.now() + interval '1 minute', '2 hours', by => 'subtree')"))[1],
	qr/prod=true .*research=true/, "the analyst's usage(by => 'subtree') rolls the divisions up");
refused('grafana', "SELECT gangsched.submit('vis_a', 1, 4)", '42501', qr/permission denied/, 'the analyst cannot submit');

# -------------------------------------------------------------------------
# The operator mid-run: weights
# -------------------------------------------------------------------------
allowed('ops', "SELECT gangsched.set_team_weight('vision', 3)", 'the operator sets vision\'s weight to 3');
# vision 3 : lang 1 of research's 16
steady_shares('steady state 2: vis_a 12, lang_a 4, serve_a 16, each team within one job of fair_share',
	research => 16, vision => 12, lang => 4, vis_a => 12, lang_a => 4, prod => 16, serve => 16, serve_a => 16);
is(sql("SELECT detail->>'weight' || ' was ' || (detail->>'was') FROM gangsched.events WHERE kind = 'team' AND reason = 'team weight set' ORDER BY id DESC LIMIT 1"),
	'3 was 1', 'the change is logged');

# -------------------------------------------------------------------------
# close_team / open_team on an inner team
# -------------------------------------------------------------------------
my $running_la = sql(
	"SELECT string_agg(job || ':' || placed_at, ',' ORDER BY job) FROM gangsched.jobs WHERE team = 'lang_a' AND state = 'running'");
my $pending_la = sql("SELECT string_agg(job::text, ',' ORDER BY job) FROM gangsched.jobs WHERE team = 'lang_a' AND state = 'pending'");
allowed('ops', "SELECT gangsched.close_team('lang', 'audit')", 'the operator closes lang (and with it lang_a and scratch)');
my $err = refused('portal_la', "SELECT gangsched.submit('lang_a', 1, 4)", '55000',
	qr/team "lang_a" is closed to new work: team "lang" above it is closed/,
	"portal_la's submit is refused (55000, naming lang)");
like($err, qr/HINT:  Ask the operator to reopen it with gangsched.open_team\('lang'\)/, 'with the hint');
like($err, qr/DETAIL:  .*: audit, /, 'and the reason in the detail');
ok(poll_until(
		"SELECT bool_and(reason LIKE 'team lang (above lang_a) is closed to new work%') FROM gangsched.jobs WHERE team = 'lang_a' AND state = 'pending'",
		't', 20),
	"lang_a's queued jobs say the team above is closed");
# cancelling a running vis_a job frees 4 GPUs: a closed lang_a job never gets them
my $freed = sql("SELECT job FROM gangsched.jobs WHERE team = 'vis_a' AND state = 'running' ORDER BY job LIMIT 1");
allowed('portal_va', "SELECT gangsched.cancel($freed)", 'portal_va cancels a running job of its own');
wait_rounds(5);
is(sql("SELECT string_agg(job || ':' || placed_at, ',' ORDER BY job) FROM gangsched.jobs WHERE team = 'lang_a' AND state = 'running'"),
	$running_la, "lang_a's running jobs run on, in their placements");
is(sql("SELECT string_agg(job::text, ',' ORDER BY job) FROM gangsched.jobs WHERE team = 'lang_a' AND state = 'pending'"),
	$pending_la, 'its pending jobs stay queued, none placed');
ok(poll_until("SELECT count(*) FROM gangsched.jobs WHERE team = 'vis_a' AND state = 'running'", '3', 20),
	"vis_a's next job takes the freed GPUs");
allowed('ops', "SELECT gangsched.open_team('lang')", 'the operator opens lang again');
my ($la_new) = submit_jobs('portal_la', 'lang_a', 1);
ok(defined $la_new, 'portal_la submits again');
push @la, $la_new;
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'invariants hold after close and open');

# -------------------------------------------------------------------------
# set_team_parent: vision (with its running jobs) moves under prod
# -------------------------------------------------------------------------
refused('ops', "SELECT gangsched.set_team_parent('research', 'lang')", '22023', qr/team "research" cannot move under "lang"/,
	'moving research under its own child lang is refused (22023)');
refused('ops', "SELECT gangsched.set_team_parent('vision', 'lang_a')", '55006', qr/team "lang_a" has \d+ live jobs and cannot become a parent/,
	'moving vision under lang_a, which has live jobs, is refused (55006)');
my $va_running = sql("SELECT count(*) FROM gangsched.jobs WHERE team = 'vis_a' AND state = 'running'");
cmp_ok($va_running, '>', 0, "vis_a has $va_running running jobs");
allowed('ops', "SELECT gangsched.set_team_parent('vision', 'prod')", 'the operator moves vision under prod');
is(sql("SELECT DISTINCT path FROM gangsched.queue WHERE team = 'vis_a'"), 'prod/vision/vis_a',
	"vis_a's queued jobs show the new path");
# research (lang only) 16 = lang_a; prod 16 = serve 4 + vision 12 (vision
# has weight 3 since set_team_weight above).
# lang_a's fair-share preemptions take prod's side down to its 16 from
# vis_a, whose gangs were placed as borrowed, so serve_a holds all of
# prod's 16 with gangs placed within prod's quota (not borrowed). Those are
# guaranteed against teams outside prod only: vis_a takes its 12 back from
# them by fair share (docs/preemption.md, "Never a victim").
steady_shares('steady state 3 after the move: lang_a 16, serve_a 4, vis_a 12, each team within one job of fair_share',
	research => 16, lang => 16, lang_a => 16, prod => 16, serve => 4, vision => 12, serve_a => 4, vis_a => 12);

# -------------------------------------------------------------------------
# remove_team: refused while a team has children or jobs; a leaf retired
# -------------------------------------------------------------------------
refused('ops', "SELECT gangsched.remove_team('lang')", '55006', qr/team "lang" has subteams/, 'remove_team(lang) is refused: it has children (55006)');
refused('ops', "SELECT gangsched.remove_team('vis_a')", '55006', qr/team "vis_a" has \d+ live jobs/, 'remove_team(vis_a) is refused: it has jobs (55006)');
# scratch, whose only job ended, is retired as docs/fairness.md says:
# close, archive its history, remove
refused('ops', "SELECT gangsched.remove_team('scratch')", '55006', qr/team "scratch" still has 1 ended jobs in the history/,
	'remove_team(scratch) is refused while its ended job is in the history (55006)');
allowed('ops', "SELECT gangsched.close_team('scratch', 'retired')", 'scratch is closed');
is((as_role('ops', "SELECT jobs > 0 FROM gangsched.archive_history(gangsched.now())"))[1], 't',
	'the history up to now is archived');
allowed('ops', "SELECT gangsched.remove_team('scratch')", 'remove_team(scratch) succeeds on the emptied leaf');
is(sql("SELECT count(*) FROM gangsched.teams WHERE name = 'scratch'"), '0', 'scratch is gone');

# -------------------------------------------------------------------------
# The end: still steady, invariants, logs
# -------------------------------------------------------------------------
steady_shares('the end: every leaf busy, each team within one job of fair_share',
	research => 16, lang => 16, lang_a => 16, prod => 16, serve => 4, vision => 12, serve_a => 4, vis_a => 12);
is(sql('SELECT count(*) FROM gangsched.check_invariants()'), '0', 'check_invariants() returns no rows');
is(sql("SELECT count(*) FROM gangsched.events WHERE kind = 'requeued' AND reason NOT LIKE '%released after a checkpoint'"),
	'0', 'every preempted job was released by its agent after a checkpoint');

foreach my $n (sort keys %agent_pid)
{
	my $pid = delete $agent_pid{$n};
	kill 'TERM', $pid;
	waitpid($pid, 0);
	is($?, 0, "agent $n exits 0 on SIGTERM");
	unlike(slurp_file(agent_log_file($n)), qr/ ERROR: /, "agent $n logged no error");
}
# -------------------------------------------------------------------------
# A streaming standby reads the tree as the primary does
# -------------------------------------------------------------------------
$node->backup('treelive_b');
my $standby = PostgreSQL::Test::Cluster->new('treestandby');
$standby->init_from_backup($node, 'treelive_b', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
my $shares_q = "SELECT string_agg(path || ' ' || used_gpus || ' ' || fair_share, ', ' ORDER BY path) FROM gangsched.team_shares";
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is($standby->safe_psql('postgres', $shares_q), sql($shares_q),
	"team_shares on the standby: every team's path, use and fair share as on the primary");
is($standby->safe_psql('postgres', 'SELECT ran FROM gangsched.run_round()'), 'f', 'no round runs on the standby');
# a portal on the standby: its own subtree only, and why_pending masks
# other teams' jobs there too
my $sb_connstr = $standby->connstr('postgres');
my ($sb_out, $sb_err) = ('', '');
{
local $ENV{PGOPTIONS} = '';
$standby->psql('postgres',
	"SELECT (SELECT count(*) FROM gangsched.queue WHERE team <> 'vis_a') || ' '
	     || (SELECT count(*) FROM gangsched.jobs j, gangsched.why_pending(j.job) w
	          WHERE j.state = 'pending' AND (w.detail ~ '\\mjob [0-9]' AND NOT EXISTS (
	                SELECT FROM gangsched.jobs o WHERE o.team = 'vis_a'
	                   AND w.detail ~ ('\\mjob ' || o.job || '\\M'))))
	     || ' ' || (SELECT count(*) FROM gangsched.jobs j, gangsched.why_pending(j.job) w WHERE j.state = 'pending')",
	connstr => "$sb_connstr user=portal_va", stdout => \$sb_out, stderr => \$sb_err);
}
like($sb_out, qr/^0 0 [1-9]\d*$/,
	"portal_va on the standby: no other team's queue rows, why_pending explains its pending jobs and names no other team's job")
  or diag "$sb_out $sb_err";
$standby->stop;
unlike(slurp_file($standby->logfile), qr/\b(?:ERROR|PANIC):|terminated by signal/, 'the standby logged no error');

$node->stop;
my $log = slurp_file($node->logfile);
# the ERRORs the test provoked on purpose (the refusals above), and the
# worker's FATAL at shutdown; anything else is unexpected
my $expected_errors = qr/ERROR:  (?:permission denied|team "lang_a" is closed to new work|team "\w+" has \d+ live jobs|team "lang" has subteams|team "scratch" still has 1 ended jobs|team "research" cannot move under)|FATAL:  terminating background worker "gangsched scheduler" due to administrator command/;
my @unexpected = grep { /\b(?:ERROR|PANIC|FATAL):/ && !/$expected_errors/ } split /\n/, $log;
is(join("\n", @unexpected), '', 'the server log has no unexpected ERROR, FATAL or PANIC');
ok(!$node->log_contains('terminated by signal'), 'no crash in the server log');

done_testing();
