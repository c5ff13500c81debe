# gangsched-replay on a tiny hand-made trace (test/t/replay/) whose outcome
# is worked out by hand, field by field, for both policies and for an agent
# too slow to release (a kill). Two nodes of 4 GPUs; teams a and b with a
# nominal quota of 4 GPUs each; rounds every 30 s of virtual time.
#
#   j1  b  8 GPUs  submitted at 0,   runs 3600 s
#   j2  a  4 GPUs  submitted at 600, runs 1200 s
#   j3  a  2 GPUs  submitted at 700, runs 600 s, queue timeout 60 s
#
# fifo: j1 runs 0-3600; j2 waits behind it (no preemption) and runs
#   3600-4800; j3 waits behind j2 (no backfill) and expires at the round at
#   780 (700 + 60 s, on the 30 s grid).
# drf: j2 is within a's quota and reclaims: the round at 600 preempts j1
#   (borrowing 4 GPUs), which checkpoints and releases 30 s later; j2 is
#   placed at 630 in the release's transaction and runs to 1830; j3 would
#   borrow and waits behind j1 (the starvation guard keeps the free node for
#   j1), expiring at 780; j1 resumes at 1830 with its 3000 s left: 4830.
# drf, agents slower than the grace (--release-delay 120 > 60 s): j1 is
#   killed by the round at its deadline (660), loses its 660 s on 8 GPUs
#   (1.47 GPU-hours; no checkpoint yet) and restarts from scratch at 1860
#   when j2 (placed at 660) finishes: 5460.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $srcdir = $ENV{TESTDIR} // '.';
my $bin =
  -x "$srcdir/tools/replay/gangsched-replay"
  ? "$srcdir/tools/replay/gangsched-replay"
  : 'gangsched-replay';
my $data = "$srcdir/test/t/replay";

program_help_ok($bin);
program_version_ok($bin);
program_options_handling_ok($bin);
command_fails_like([$bin], qr/--nodes and --trace are required/, 'refuses to run without a trace');
command_fails_like([ $bin, '--nodes', "$data/nodes.csv", '--trace', "$data/jobs.csv", '--policies', 'lottery' ],
	qr/unknown policy "lottery"/, 'refuses an unknown policy');
command_fails_like([ $bin, '--nodes', "$data/nodes.csv", '--trace', "$data/jobs.csv", '--team-weights', 'size' ],
	qr/--team-weights is quota or equal/, 'refuses an unknown --team-weights');
command_fails_like([ $bin, '--nodes', "$data/nodes.csv", '--trace', "$data/jobs.csv", '--scale', '2' ],
	qr/--scale must be in \(0, 1\]/, 'refuses a scale above 1');

my $node = PostgreSQL::Test::Cluster->new('replay');
$node->init;
$node->start;
$ENV{PGHOST} = $node->host;
$ENV{PGPORT} = $node->port;
delete $ENV{PGDATABASE};

# Runs the replay, returns its JSON lines by policy.
sub replay
{
	my (@args) = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			$bin, '--nodes', "$data/nodes.csv", '--trace', "$data/jobs.csv",
			'--quotas', "$data/quotas.csv", '--json', '--quiet', @args
		],
		'>', \$stdout, '2>', \$stderr);
	ok($ok, "gangsched-replay @args exits 0") or diag($stderr);
	my %by;
	for my $line (split /\n/, $stdout)
	{
		my $r = decode_json($line);
		$by{ $r->{policy} } = $r;
	}
	return \%by;
}

# Compares the listed fields; numbers with a tolerance of 0.01.
sub fields
{
	my ($r, $want, $what) = @_;
	for my $k (sort keys %$want)
	{
		my ($got, $exp) = ($r->{$k}, $want->{$k});
		if (defined $got && $got =~ /^-?[\d.]+$/ && $exp =~ /^-?[\d.]+$/)
		{
			ok(abs($got - $exp) < 0.01, "$what: $k = $exp") or diag("got $got");
		}
		else
		{
			is($got, $exp, "$what: $k");
		}
	}
}

my $r = replay('--policies', 'fifo,drf', '--db-prefix', 'replaytest', '--keep');
fields(
	$r->{fifo},
	{
		jobs => 3, submitted => 3, rejected => 0, finished => 2, expired => 1, unfinished => 0,
		makespan_s => 4800, jct_mean_s => 3900, jct_p50_s => 3900, jct_p95_s => 4170,
		wait_mean_s => 1500, wait_p95_s => 2850, gpu_alloc_ratio => 1, contended_s => 3000,
		preemptions => 0, kills => 0, lost_gpu_hours => 0, partial_placements => 0,
		invariant_violations => 0, jain_fairness => 0.5, nodes => 2, gpus => 8,
		# j1 borrows (b's quota is 4), j2 runs within a's quota after 3000 s
		placed_borrowed => 1, placed_guaranteed => 1, wait_borrowed_mean_s => 0,
		wait_guaranteed_mean_s => 3000, preemptions_per_job => 0, preempted_jobs => 0,
		max_preemptions_job => 0, nominations => 0, stranded_gpus => 0, idle_gpu_hours_waiting => 0,
		# entitled at submit: j2 (a holds nothing, 4 of its 4); not j1 (8 GPUs, b's quota is 4)
		placed_entitled => 1, wait_entitled_mean_s => 3000
	},
	'fifo');
fields(
	$r->{drf},
	{
		jobs => 3, finished => 2, expired => 1, unfinished => 0,
		makespan_s => 4830, jct_mean_s => 3030, jct_p50_s => 3030, jct_p95_s => 4650,
		wait_mean_s => 15, wait_p95_s => 28.5, gpu_alloc_ratio => 0.5122, contended_s => 1230,
		preemptions => 1, kills => 0, lost_gpu_hours => 0, partial_placements => 0,
		invariant_violations => 0,
		# j2 (guaranteed) waits 30 s for j1's release; j1 (borrowed) none. j2
		# uses 4 of j1's 8 GPUs: the other 4 are stranded. Idle while waiting:
		# 8 GPUs x 1230 s contended - 5040 GPU-s allocated = 4800 GPU-s
		placed_borrowed => 1, placed_guaranteed => 1, wait_borrowed_mean_s => 0,
		wait_guaranteed_mean_s => 30, preemptions_per_job => 0.3333, preempted_jobs => 1,
		max_preemptions_job => 1, nominations => 1, stranded_gpus => 4, idle_gpu_hours_waiting => 1.33,
		placed_entitled => 1, wait_entitled_mean_s => 30
	},
	'drf');
is($node->safe_psql('replaytest_drf', q{SELECT string_agg(name || ' ' || weight, ', ' ORDER BY name) FROM gangsched.teams}),
	'a 4, b 4', 'drf: each team weighs its nominal quota (--team-weights quota)');
cmp_ok($r->{drf}{invariant_checks}, '>=', 1, 'drf: check_invariants() ran');

# The kept databases hold the story: placements in order, the preemption,
# the expiry; the analyst functions agree with the replay.
is( $node->safe_psql(
		'replaytest_drf', q{
SELECT string_agg(format('%s %s %s', g.name, e.kind, extract(epoch FROM e.at - '2017-10-02 00:00+00')::int), ', ' ORDER BY e.id)
  FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job
 WHERE e.kind IN ('placed', 'nominated', 'preempting', 'requeued', 'expired', 'finished')}),
	'j1 placed 0, j2 nominated 600, j1 preempting 600, j1 requeued 630, j2 placed 630, '
	  . 'j3 expired 780, j2 finished 1830, j1 placed 1830, j1 finished 4830',
	'drf: the events in order');
is( $node->safe_psql(
		'replaytest_fifo', q{
SELECT string_agg(format('%s %s %s', g.name, e.kind, extract(epoch FROM e.at - '2017-10-02 00:00+00')::int), ', ' ORDER BY e.id)
  FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job
 WHERE e.kind IN ('placed', 'nominated', 'preempting', 'requeued', 'expired', 'finished')}),
	'j1 placed 0, j3 expired 780, j1 finished 3600, j2 placed 3600, j2 finished 4800',
	'fifo: the events in order');
is( $node->safe_psql(
		'replaytest_drf', q{
SELECT submitted || ' ' || placed || ' ' || never_placed || ' ' || mean_s
  FROM gangsched.queue_waits('2017-10-02 00:00+00', '2017-10-03 00:00+00') WHERE team IS NULL}),
	'3 2 1 15',
	'drf: queue_waits agrees with wait_mean_s');
is( $node->safe_psql(
		'replaytest_drf', q{
SELECT preemptions || ' ' || released || ' ' || killed
  FROM gangsched.preemption_summary('2017-10-02 00:00+00', '2017-10-03 00:00+00') WHERE team = 'b'}),
	'1 1 0',
	'drf: preemption_summary');
is($node->safe_psql('replaytest_drf', 'SELECT count(*) FROM gangsched.check_invariants()'),
	'0', 'drf: no invariant violated at the end');
is( $node->safe_psql(
		'replaytest_drf', q{
SELECT string_agg(to_char(bucket_start, 'HH24:MI') || ' ' || round(allocated_gpus::numeric, 2), ', ' ORDER BY bucket_start)
  FROM gangsched.utilization('2017-10-02 00:00+00', '2017-10-02 02:00+00', '1 hour')}),
	# 00:00-01:00: j1 8 GPUs x 630 s + j2 4 x 1200 s + j1 8 x 1770 s = 24000 GPU-s
	# 01:00-02:00: j1 8 GPUs x 1230 s = 9840 GPU-s
	'00:00 6.67, 01:00 2.73',
	'drf: utilization from the history');

# A fresh database per run: the same prefix is replaced, not reused.
$r = replay('--policies', 'drf', '--db-prefix', 'replaytest', '--release-delay', '120');
fields(
	$r->{drf},
	{
		finished => 2, expired => 1, makespan_s => 5460, jct_mean_s => 3360, wait_mean_s => 30,
		preemptions => 1, kills => 1, lost_gpu_hours => 1.47, invariant_violations => 0
	},
	'drf with agents too slow to release');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_database WHERE datname LIKE 'replaytest%'}),
	'1', 'without --keep the database is dropped (the fifo one kept earlier remains)');

# The readable table.
command_like(
	[
		$bin, '--nodes', "$data/nodes.csv", '--trace', "$data/jobs.csv", '--quotas', "$data/quotas.csv",
		'--quiet', '--limit', '2'
	],
	qr/^policy\s+fifo\s+drf\n.*^\s+finished\s+2\s+2\n/ms,
	'the table names the policies and their numbers');

$node->stop;
done_testing();
