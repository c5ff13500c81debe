# Upgrades (issue 11, docs/upgrade.md): the released 0.1 install script, then
# ALTER EXTENSION gangsched UPDATE, must give the catalog a fresh install of
# the current version gives, and keep a live scheduler's state.
#
# - database "upgraded": CREATE EXTENSION gangsched VERSION '0.1', an
#   inventory, teams, quotas, bindings, pending and cancelled jobs and their
#   events (the server runs the new library, whose rounds refuse to run on
#   an older catalog: checked too); then ALTER EXTENSION gangsched UPDATE;
# - database "fresh": CREATE EXTENSION gangsched;
# - the catalog of both, one line per property (functions with their
#   arguments, result, body, volatility, strictness, SECURITY DEFINER,
#   settings and privileges; tables and their columns, defaults,
#   constraints, indexes, triggers and privileges; views' definitions;
#   sequences; types; what pg_dump dumps; which objects belong to the
#   extension), must be equal; differences are printed;
# - after the update the state is all there (every table's rows as before),
#   check_invariants() returns nothing and rounds, submits and agents carry
#   on.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'gangsched'
gangsched.enabled = off
gangsched.min_runtime = 0
});
$node->start;

$ENV{PGOPTIONS} = '-c search_path=pg_catalog,public';
sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

my $current = sql('postgres', "SELECT default_version FROM pg_available_extensions WHERE name = 'gangsched'");
my @versions = split /\n/, sql('postgres',
	"SELECT version FROM pg_available_extension_versions WHERE name = 'gangsched' ORDER BY version");
note "available versions: @versions; default $current";
ok((grep { $_ eq '0.1' } @versions), 'the released 0.1 install script is installed');
isnt($current, '0.1', 'the default version is a newer one');
my $path = sql('postgres', "SELECT coalesce(path, '') FROM pg_extension_update_paths('gangsched') WHERE source = '0.1' AND target = '$current'");
ok($path ne '', "an update path 0.1 -> $current exists: $path");

sql('postgres', 'CREATE DATABASE upgraded');
sql('postgres', 'CREATE DATABASE fresh');

# -------------------------------------------------------------------------
# A live 0.1 scheduler
# -------------------------------------------------------------------------
sql('upgraded', q{CREATE EXTENSION gangsched VERSION '0.1' CASCADE});
is(sql('upgraded', "SELECT extversion FROM pg_extension WHERE extname = 'gangsched'"), '0.1', '0.1 installs');
sql('upgraded', q{
CREATE ROLE up_portal LOGIN;
CREATE ROLE up_agent LOGIN;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_node('n2', 'gpu', 'r1', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_node('n3', 'gpu', 'r2', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'gpu', 16);
SELECT gangsched.add_member('up_portal', 'a');
SELECT gangsched.add_agent('up_agent', 'n1');
SELECT gangsched.submit('a', 8, 1, name => 'a-run');
SELECT gangsched.submit('a', 4, 1, name => 'a-done');
SELECT gangsched.submit('b', 8, 1, name => 'b-placed');
SELECT gangsched.submit('b', 2, 2, name => 'b-cancelled');
SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE name = 'b-cancelled';
SELECT gangsched.node_heartbeat('n1');
});
# The library is the new version's: until the update its rounds refuse (the
# C code reads and writes its own version's tables only), with the hint.
my ($rc, $out, $err) = $node->psql('upgraded', 'SELECT gangsched.run_round()');
like($err, qr/cannot run a scheduling round: gangsched in this database is version 0\.1, its library is version \Q$current\E/,
	'under the 0.1 catalog a round of the new library refuses');
like($err, qr/HINT:  Run ALTER EXTENSION gangsched UPDATE/, 'and says to update');
($rc, $out, $err) = $node->psql('upgraded', q{SELECT * FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'a-run'))});
like($err, qr/cannot explain a pending job: gangsched in this database is version 0\.1/, 'so does why_pending');
is(sql('upgraded', 'SELECT count(*) FROM gangsched.check_invariants()'), '0', 'the 0.1 scheduler is consistent');
is(sql('upgraded', q{SELECT string_agg(name || ':' || state, ' ' ORDER BY job) FROM gangsched.jobs}),
	'a-run:pending a-done:pending b-placed:pending b-cancelled:cancelled',
	'jobs in several states before the update');

# Every state table's rows, as text, over the columns 0.1 has (an update
# may add columns; it must keep every row and every value there was).
my $tables = sql('upgraded', q{
SELECT string_agg(c.relname || ':' || (SELECT string_agg(quote_ident(a.attname), ',' ORDER BY a.attnum)
                                          FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                  ' ' ORDER BY c.relname)
  FROM pg_class c WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relkind = 'r'});
my $rows = "SET TimeZone = 'UTC';\n" . join("\nUNION ALL\n", map {
	my ($t, $cols) = split /:/, $_, 2;
	"SELECT '$t ' || count(*) || ' ' || md5(coalesce(string_agg(r::text, E'\\n' ORDER BY r::text), '')) "
	  . "FROM (SELECT ROW($cols) AS r FROM gangsched.$t) s"
} split / /, $tables) . ";\n";
my $before = sql('upgraded', $rows);

sql('upgraded', 'ALTER EXTENSION gangsched UPDATE');
is(sql('upgraded', "SELECT extversion FROM pg_extension WHERE extname = 'gangsched'"), $current,
	"ALTER EXTENSION gangsched UPDATE reaches $current");
# 0.1 required btree_gist (sql/gangsched--0.1.control) and never used it;
# the update records the new version's requirements (ltree alone, as a
# fresh install has them: the catalog comparison below) and leaves
# btree_gist installed, for its owner to drop.
is(sql('upgraded', q{SELECT string_agg(r.extname, ',' ORDER BY r.extname) FROM pg_depend d
    JOIN pg_extension e ON d.classid = 'pg_extension'::regclass AND d.objid = e.oid
    JOIN pg_extension r ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = r.oid
   WHERE e.extname = 'gangsched'}), 'ltree', 'after the update gangsched requires ltree alone');
is(sql('upgraded', "SELECT count(*) FROM pg_extension WHERE extname = 'btree_gist'"), '1',
	'btree_gist, which 0.1 installed, stays installed');

sql('fresh', 'CREATE EXTENSION gangsched CASCADE');

# -------------------------------------------------------------------------
# The catalog, one line per property
# -------------------------------------------------------------------------
# ACLs are listed sorted (their order depends on the order of the GRANTs);
# columns by name (an update adds a column at the end of its table, an
# install where it belongs; nothing in gangsched depends on column order:
# views' definitions name their columns).
my $catalog = q{
WITH ns AS (SELECT 'gangsched'::regnamespace AS oid)
SELECT string_agg(line, E'\n' ORDER BY line) FROM (
  SELECT 'function ' || p.oid::regprocedure || ' returns ' || pg_get_function_result(p.oid)
         || ' kind=' || p.prokind::text || ' volatile=' || p.provolatile::text || ' strict=' || p.proisstrict
         || ' secdef=' || p.prosecdef || ' parallel=' || p.proparallel::text || ' leakproof=' || p.proleakproof
         || ' cost=' || p.procost || ' rows=' || p.prorows || ' lang=' || l.lanname
         || ' config=' || coalesce(array_to_string(p.proconfig, ';'), '')
         || ' bin=' || coalesce(p.probin, '') || ' src=' || md5(p.prosrc)
         || ' args=' || pg_get_function_arguments(p.oid)
         || ' acl=' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(p.proacl) x), 'default')
         || ' comment=' || coalesce(md5(obj_description(p.oid, 'pg_proc')), '') AS line
    FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang, ns WHERE p.pronamespace = ns.oid
  UNION ALL
  SELECT 'relation ' || c.relname || ' kind=' || c.relkind::text || ' persistence=' || c.relpersistence::text
         || ' rls=' || c.relrowsecurity || ' options=' || coalesce(array_to_string(c.reloptions, ';'), '')
         || ' acl=' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(c.relacl) x), 'default')
         || ' comment=' || coalesce(md5(obj_description(c.oid, 'pg_class')), '')
    FROM pg_class c, ns WHERE c.relnamespace = ns.oid AND c.relkind <> 'i'
  UNION ALL
  SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
         || ' notnull=' || a.attnotnull || ' identity=' || a.attidentity::text || ' generated=' || a.attgenerated::text
         || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
         || ' acl=' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(a.attacl) x), 'default')
    FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
         LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum, ns
   WHERE c.relnamespace = ns.oid AND c.relkind IN ('r', 'v', 'p', 'f') AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'constraint ' || c.relname || '.' || k.conname || ' ' || pg_get_constraintdef(k.oid)
    FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid, ns WHERE c.relnamespace = ns.oid
  UNION ALL
  SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid, ns WHERE c.relnamespace = ns.oid
  UNION ALL
  SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid, ns WHERE c.relnamespace = ns.oid AND NOT t.tgisinternal
  UNION ALL
  SELECT 'view ' || c.relname || ' ' || md5(pg_get_viewdef(c.oid))
    FROM pg_class c, ns WHERE c.relnamespace = ns.oid AND c.relkind IN ('v', 'm')
  UNION ALL
  SELECT 'sequence ' || c.relname || ' type=' || format_type(s.seqtypid, NULL) || ' start=' || s.seqstart
         || ' increment=' || s.seqincrement || ' min=' || s.seqmin || ' max=' || s.seqmax || ' cycle=' || s.seqcycle
    FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid, ns WHERE c.relnamespace = ns.oid
  UNION ALL
  SELECT 'type ' || t.typname || ' kind=' || t.typtype::text
         || coalesce(' labels=' || (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid), '')
    FROM pg_type t, ns WHERE t.typnamespace = ns.oid AND t.typtype <> 'b' AND t.typrelid = 0
  UNION ALL
  SELECT 'policy ' || c.relname || '.' || p.polname || ' ' || p.polcmd::text || ' ' || coalesce(pg_get_expr(p.polqual, p.polrelid), '')
    FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid, ns WHERE c.relnamespace = ns.oid
  UNION ALL
  SELECT 'dumped ' || x.tbl::regclass || ' where=' || coalesce(x.cond, '')
    FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS x(tbl, cond) WHERE e.extname = 'gangsched'
  UNION ALL
  SELECT 'member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
    FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
   WHERE e.extname = 'gangsched' AND d.deptype = 'e'
  UNION ALL
  SELECT 'requires ' || r.extname FROM pg_depend d
    JOIN pg_extension e ON d.classid = 'pg_extension'::regclass AND d.objid = e.oid
    JOIN pg_extension r ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = r.oid
   WHERE e.extname = 'gangsched'
  UNION ALL
  SELECT 'schema acl=' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(n.nspacl) x), 'default')
    FROM pg_namespace n, ns WHERE n.oid = ns.oid
  UNION ALL
  SELECT 'parameter ' || p.parname || ' acl=' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(p.paracl) x), 'default')
    FROM pg_parameter_acl p WHERE p.parname LIKE 'gangsched.%'
) s;
};

my @fresh = split /\n/, sql('fresh', $catalog);
my @upgraded = split /\n/, sql('upgraded', $catalog);
cmp_ok(scalar(@fresh), '>', 500, 'the catalog listing covers the extension (' . scalar(@fresh) . ' lines)');
my %in_fresh = map { $_ => 1 } @fresh;
my %in_upgraded = map { $_ => 1 } @upgraded;
my @missing = grep { !$in_upgraded{$_} } @fresh;
my @extra = grep { !$in_fresh{$_} } @upgraded;
is(scalar(@missing), 0, 'nothing of a fresh install is missing or different after the update')
  or diag join("\n", 'fresh install only:', map { "  $_" } @missing);
is(scalar(@extra), 0, 'the update leaves nothing a fresh install does not have')
  or diag join("\n", 'updated only:', map { "  $_" } @extra);
ok(scalar(grep { /^function gangsched\.submit\(/ && /secdef=true/ && /config=search_path=pg_catalog, gangsched, pg_temp/ } @upgraded),
	'the listing sees SECURITY DEFINER and search_path (a sample line)');

# -------------------------------------------------------------------------
# The state survived and the scheduler carries on
# -------------------------------------------------------------------------
is(sql('upgraded', $rows), $before, 'every state table holds the same rows after the update');
is(sql('upgraded', 'SELECT count(*) FROM gangsched.check_invariants()'), '0', 'no invariant violation after the update');
my $placed = sql('upgraded', 'SELECT placed FROM gangsched.run_round()');
is(sql('upgraded', q{SELECT string_agg(name || ':' || state, ' ' ORDER BY job) FROM gangsched.jobs}),
	'a-run:placed a-done:placed b-placed:placed b-cancelled:cancelled',
	"the first round after the update places the jobs submitted under 0.1 ($placed placed)");
sql('upgraded', q{
SELECT gangsched.job_started(job, node) FROM (SELECT DISTINCT p.job, p.node FROM gangsched.placements p JOIN gangsched.jobs j USING (job)
 WHERE j.name IN ('a-run', 'a-done')) s;
SELECT gangsched.job_finished(job, true) FROM gangsched.jobs WHERE name = 'a-done';
SELECT gangsched.submit('a', 8, 2, name => 'a-waits');
SELECT gangsched.run_round();
SELECT gangsched.job_finished(job, true) FROM gangsched.jobs WHERE name = 'a-run';
SELECT gangsched.run_round();
});
is(sql('upgraded', q{SELECT string_agg(name || ':' || state, ' ' ORDER BY job) FROM gangsched.jobs}),
	'a-run:finished a-done:finished b-placed:placed b-cancelled:cancelled a-waits:placed',
	'jobs start, finish and are placed after the update');
$rc = $node->psql('upgraded', q{SELECT gangsched.submit('a', 1, 1, name => 'after') > 0},
	connstr => $node->connstr('upgraded') . ' user=up_portal', stdout => \$out, stderr => \$err);
ok($rc == 0 && $out eq 't', 'a portal bound under 0.1 submits after the update') or diag $err;
$rc = $node->psql('upgraded', q{SELECT gangsched.submit('b', 1, 1)},
	connstr => $node->connstr('upgraded') . ' user=up_portal', stdout => \$out, stderr => \$err);
like($err, qr/permission denied to submit to team "b"/, 'and still only for its own team');
$rc = $node->psql('upgraded', q{SELECT count(*) >= 0 FROM gangsched.node_work('n1')},
	connstr => $node->connstr('upgraded') . ' user=up_agent', stdout => \$out, stderr => \$err);
ok($rc == 0, 'an agent bound under 0.1 reads its work after the update') or diag $err;
is(sql('upgraded', 'SELECT count(*) FROM gangsched.check_invariants()'), '0', 'no invariant violation at the end');

# -------------------------------------------------------------------------
# The worker across an update: it waits on the old catalog and runs rounds
# once the catalog is updated
# -------------------------------------------------------------------------
sql('postgres', 'CREATE DATABASE later');
sql('later', q{
CREATE EXTENSION gangsched VERSION '0.1' CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('w1', 'gpu', 'r1', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_team('w');
SELECT gangsched.submit('w', 4, 1, name => 'w-job');
});
$node->append_conf('postgresql.conf', "gangsched.enabled = on\ngangsched.database = 'later'\ngangsched.round_interval = '200ms'\n");
$node->restart;
my $waited = 0;
for (1 .. 100)
{
	last if $waited = $node->log_contains(qr/gangsched scheduler worker waits: gangsched in database "later" is version 0\.1, its library is version \Q$current\E/);
	usleep(100_000);
}
ok($waited, 'the worker says it waits for the update');
usleep(600_000);
is(sql('later', q{SELECT state FROM gangsched.jobs WHERE name = 'w-job'}), 'pending', 'and runs no round on the old catalog');
ok(!$node->log_contains('round failed'), 'no round was tried (and failed) meanwhile');
my $t0 = time;
sql('later', 'ALTER EXTENSION gangsched UPDATE');
my $placed_after;
for (1 .. 200)
{
	if (sql('later', q{SELECT state FROM gangsched.jobs WHERE name = 'w-job'}) eq 'placed')
	{
		$placed_after = time - $t0;
		last;
	}
	usleep(50_000);
}
ok(defined $placed_after, 'after the update the worker places the waiting job')
  and note sprintf('placed %.2f s after ALTER EXTENSION gangsched UPDATE', $placed_after);
is(sql('later', 'SELECT count(*) FROM gangsched.check_invariants()'), '0', 'no invariant violation in the updated database');

$node->stop;
done_testing();
