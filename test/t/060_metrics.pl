# Monitoring with real components (issue 18, docs/monitoring.md): Debian's
# prometheus-postgres-exporter with contrib/prometheus/queries.yaml, and a
# Prometheus server scraping it, both on loopback against a throwaway
# cluster.
#
# - the exporter connects as a LOGIN role that is only a member of
#   gangsched_analyst;
# - a scripted scenario in virtual time: two pools, a node down, two teams,
#   jobs placed, running, preempted (one released, one killed at its
#   deadline), finished, cancelled, pending;
# - every series of gangsched.metrics is in Prometheus (through
#   /api/v1/query) with the value the database holds, the queue-wait
#   histogram is a Prometheus histogram (histogram_quantile answers), the
#   invariant check reports 0 and the exporter saw no query error.
#
# Skipped when the two programs are not installed (tools/gs test installs
# them from Debian when apt can; it says so when it cannot).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Basename qw(dirname);
use Cwd qw(abs_path);
use IPC::Run;
use HTTP::Tiny;
use JSON::PP;
use Time::HiRes qw(time usleep);

my $exporter = '/usr/bin/prometheus-postgres-exporter';
my $prometheus = '/usr/bin/prometheus';
for my $bin ($exporter, $prometheus)
{
	plan skip_all => "$bin is not installed (apt-get install prometheus prometheus-postgres-exporter; "
	  . 'tools/gs test does it when apt can reach Debian)'
	  unless -x $bin;
}

my $queries = abs_path(dirname(__FILE__) . '/../../contrib/prometheus/queries.yaml');
my $alerts = abs_path(dirname(__FILE__) . '/../../contrib/prometheus/alerts.yml');
ok(-r $queries && -r $alerts, "contrib/prometheus/queries.yaml and alerts.yml are readable");

my $node = PostgreSQL::Test::Cluster->new('metrics');
$node->init;
# rounds run by the scenario itself (virtual time); the worker stays off
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'gangsched'
gangsched.database = 'postgres'
gangsched.enabled = off
});
$node->start;

sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q{
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
CREATE ROLE gs_exporter LOGIN IN ROLE gangsched_analyst;
});

# the scenario (test/sql/70_metrics.sql checks the same numbers in SQL);
# one session, so the virtual clock carries from statement to statement
sql(q{
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved'), gangsched.add_pool('spot', 'opportunistic');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 3) i;
SELECT gangsched.add_node('s1', 'spot', 'r2', 32, 256, 100, 4, 'a100', 80);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 16);
SELECT gangsched.set_quota('b', 'main', 8);
SELECT gangsched.submit('b', 1, 8, name => 'v1'), gangsched.submit('b', 1, 8, name => 'v2'),
       gangsched.submit('b', 1, 8, name => 'v3');
SET gangsched.clock_override = '2030-01-01 00:00:40+00';
SELECT placed FROM gangsched.run_round();
SELECT count(gangsched.job_started(job, node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) p;
SET gangsched.clock_override = '2030-01-01 00:30:00+00';
SELECT gangsched.submit('a', 2, 8, name => 'p');
SELECT gangsched.submit('a', 1, 4, pool => 'spot', name => 'spotjob');
SELECT gangsched.submit('b', 2, 8, name => 'waiting');
SELECT preempted FROM gangsched.run_round();
SET gangsched.clock_override = '2030-01-01 00:30:30+00';
SELECT gangsched.job_released(job, checkpointed => false) FROM gangsched.jobs
 WHERE state = 'preempting' ORDER BY job LIMIT 1;
SET gangsched.clock_override = '2030-01-01 00:31:00+00';
SELECT requeued FROM gangsched.run_round();
SELECT gangsched.job_finished(job, true) FROM gangsched.jobs WHERE name = 'v1';
SELECT gangsched.cancel(gangsched.submit('a', 1, 8, name => 'c1'));
SELECT gangsched.set_node_state('s1', 'down');
SET gangsched.clock_override = '2030-01-01 00:31:10+00';
SELECT placed FROM gangsched.run_round();
SELECT gangsched.node_heartbeat('n1');
});
is(sql(q{SELECT string_agg(name || '=' || state, ' ' ORDER BY job) FROM gangsched.jobs}),
	'v1=finished v2=placed v3=pending p=placed spotjob=pending waiting=pending c1=cancelled',
	'the scenario leaves jobs in every state');
is(sql(q{SELECT count(*) FROM gangsched.check_invariants()}), '0', 'invariants hold');

# -------------------------------------------------------------------------
# the exporter and Prometheus on loopback
# -------------------------------------------------------------------------
my $tmp = PostgreSQL::Test::Utils::tempdir();
my $exp_port = PostgreSQL::Test::Cluster::get_free_port();
my $prom_port = PostgreSQL::Test::Cluster::get_free_port();
my $dsn = 'host=' . $node->host . ' port=' . $node->port . ' user=gs_exporter dbname=postgres sslmode=disable';
my ($exp_out, $prom_out) = ('', '');
my $exp_h = IPC::Run::start(
	[
		$exporter, "--web.listen-address=127.0.0.1:$exp_port",
		"--extend.query-path=$queries", '--disable-default-metrics',
		'--disable-settings-metrics'
	],
	'>&', \$exp_out,
	init => sub { $ENV{DATA_SOURCE_NAME} = $dsn; });
open(my $cf, '>', "$tmp/prometheus.yml") or die;
print $cf <<"YML";
global:
  scrape_interval: 5s
  scrape_timeout: 5s
  evaluation_interval: 1s
rule_files:
  - $alerts
scrape_configs:
  - job_name: gangsched
    static_configs:
      - targets: ['127.0.0.1:$exp_port']
YML
close $cf;
my $prom_h = IPC::Run::start(
	[
		$prometheus, "--config.file=$tmp/prometheus.yml",
		"--storage.tsdb.path=$tmp/tsdb", "--web.listen-address=127.0.0.1:$prom_port"
	],
	'>&', \$prom_out);
# whatever happens below, neither is left running
END { eval { $exp_h->kill_kill } if $exp_h; eval { $prom_h->kill_kill } if $prom_h; }

my $ua = HTTP::Tiny->new(timeout => 10);

sub http
{
	my $r = $ua->get($_[0]);
	return $r->{success} ? $r->{content} : '';
}

sub promql
{
	my ($q) = @_;
	return http("http://127.0.0.1:$prom_port/api/v1/query?" . $ua->www_form_urlencode({ query => $q }));
}

# the values of a query's result: "labels-json value" lines are not needed,
# the count and the one value are (the selectors name one series)
sub values_of
{
	my ($json) = @_;
	my @v = $json =~ /"value":\[[0-9.]+,"([^"]+)"\]/g;
	return @v;
}

# wait until Prometheus holds a scrape in which every family is present
# (the last query of the exporter's file is gangsched_invariants)
my $deadline = time + 120;
my $ready = 0;
while (time < $deadline)
{
	my @v = values_of(promql('gangsched_invariants_violations{invariant="all"}'));
	my @up = values_of(promql('up{job="gangsched"}'));
	if (@v == 1 && @up == 1 && $up[0] eq '1') { $ready = 1; last; }
	usleep(250_000);
}
ok($ready, 'Prometheus scraped the exporter') or diag "exporter:\n$exp_out\nprometheus:\n$prom_out";

my $raw = http("http://127.0.0.1:$exp_port/metrics");
like($raw, qr/^# TYPE gangsched_queue_wait_seconds histogram$/m, 'the exporter serves the queue wait as a histogram');
like($raw, qr/^# TYPE gangsched_team_preemptions_total counter$/m, 'counters as counters');
like($raw, qr/^# TYPE gangsched_pool_gpus gauge$/m, 'gauges as gauges');
unlike($raw, qr/pg_exporter_user_queries_load_error\{[^}]*\} 1/, 'the exporter loaded queries.yaml without an error');
like($raw, qr/^pg_exporter_last_scrape_error 0$/m, 'and its last scrape had no error');

# every series of the view, with the value the database holds (all of
# them are stable with the worker off, except the rounds' ages)
my @rows = split /\n/, sql(q{
SELECT name || '|' || COALESCE((SELECT string_agg(format('%s="%s"', k, v), ',' ORDER BY k)
                                   FROM jsonb_each_text(labels) x(k, v)), '') || '|' || value
  FROM gangsched.metrics
 WHERE name NOT IN ('gangsched_round_last_age_seconds', 'gangsched_pool_heartbeat_age_max_seconds')
 ORDER BY 1});
cmp_ok(scalar(@rows), '>', 80, 'the view has ' . scalar(@rows) . ' series to compare');
my @wrong;
my %families;
for my $r (@rows)
{
	my ($name, $labels, $value) = split /\|/, $r;
	$families{$name} = 1;
	my @v = values_of(promql("$name\{$labels\}"));
	push @wrong, "$name\{$labels\}: database $value, Prometheus " . (@v ? join(',', @v) : 'none')
	  . (@wrong ? '' : ' (' . promql("$name\{$labels\}") . ')')
	  unless @v == 1 && abs($v[0] - $value) <= 1e-6 * (1 + abs($value));
}
is(scalar(@wrong), 0, 'every series is in Prometheus with the database\'s value (' . scalar(keys %families) . ' families)')
  or diag join("\n", @wrong);

# a few by name, so a failure reads plainly
is((values_of(promql('gangsched_team_kills_total{team="b"}')))[0], '1', 'kills: team b 1');
is((values_of(promql('gangsched_nodes{pool="spot",state="down"}')))[0], '1', 'nodes down: spot 1');
is((values_of(promql('gangsched_jobs_live{team="b",state="pending"}')))[0], '2', 'pending jobs: team b 2');
is((values_of(promql('gangsched_queue_wait_seconds_count{team="a"}')))[0], '2', 'queue waits counted: team a 2');
is((values_of(promql('histogram_quantile(0.5, gangsched_queue_wait_seconds_bucket{team="b"})')))[0], '45',
	'histogram_quantile answers over the buckets (team b: four waits of 40 s, the median interpolated in (30, 60])');
is((values_of(promql('gangsched_invariants_violations{invariant="all"}')))[0], '0', 'invariant violations 0');
cmp_ok((values_of(promql('gangsched_round_duration_seconds_count')))[0], '>=', 4, 'rounds counted');
is((values_of(promql('gangsched_worker_up')))[0], sql('SELECT (pid IS NOT NULL)::int FROM gangsched.worker_status()'),
	'worker up as worker_status() says');

# the alert rules: loaded, and the one whose condition holds (a node of
# spot is down) is pending (its `for` is 5 minutes), no other
$deadline = time + 60;
my $alerting = '';
while (time < $deadline)
{
	$alerting = http("http://127.0.0.1:$prom_port/api/v1/alerts");
	last if $alerting =~ /GangschedNodesDown/;
	usleep(250_000);
}
my @active = eval { @{ JSON::PP::decode_json($alerting)->{data}{alerts} } };
is( join(' ', map { "$_->{labels}{alertname}/" . ($_->{labels}{pool} // '') . "/$_->{state}" } @active),
	'GangschedNodesDown/spot/pending' . (sql('SELECT pid IS NULL FROM gangsched.worker_status()') eq 't' ? ' GangschedWorkerDown//pending' : ''),
	'GangschedNodesDown is pending for pool spot (its for: is 5 minutes), and no other alert (the rounds ran in 2030 on the virtual clock)');
my $rules = http("http://127.0.0.1:$prom_port/api/v1/rules");
my $ok_rules = () = $rules =~ /"health":"ok"/g;
is($ok_rules, 6, 'all six rules of alerts.yml evaluate without error');

# the Grafana dashboard: every panel's query is valid PromQL and names
# only series that exist
my $dash_file = abs_path(dirname(__FILE__) . '/../../contrib/grafana/gangsched.json');
my $dash = do { local $/; open(my $fh, '<', $dash_file) or die "$dash_file: $!"; JSON::PP::decode_json(<$fh>) };
my @bad;
my $nexpr = 0;
for my $panel (@{ $dash->{panels} })
{
	for my $t (@{ $panel->{targets} })
	{
		$nexpr++;
		my $r = promql($t->{expr});
		push @bad, "$panel->{title}: $t->{expr}: $r" unless $r =~ /"status":"success"/;
		for my $series ($t->{expr} =~ /\b(gangsched_[a-z0-9_]+)/g)
		{
			push @bad, "$panel->{title}: no series $series"
			  unless values_of(promql("count($series)"));
		}
	}
}
is(scalar(@bad), 0, "the dashboard's $nexpr queries are valid and name existing series") or diag join("\n", @bad);

# the exporter's role may not do what an operator does
my ($rc, $out, $err) = ('', '', '');
$rc = $node->psql('postgres', 'SELECT * FROM gangsched.check_invariants()', extra_params => [ '-U', 'gs_exporter' ],
	stdout => \$out, stderr => \$err);
like($err, qr/permission denied/, 'the exporter\'s role cannot call check_invariants() itself');

diag 'scrape duration: ' . join(',', values_of(promql('scrape_duration_seconds{job="gangsched"}'))) . ' s';
$exp_h->kill_kill;
$prom_h->kill_kill;
$node->stop;
done_testing();
