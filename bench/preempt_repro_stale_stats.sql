/*
 * bench/preempt_repro_stale_stats.sql — reproducer (not a benchmark): after
 * a round that places many jobs, and until autovacuum analyzes
 * gangsched.allocations and gangsched.gangs, every round with
 * gangsched.preemption = on (the default) that has a job that does not fit
 * spends 175–300 ms (2,048 nodes, 954 running gangs) in one statement: the
 * lazily loaded running allocations (src/loader.c gs_load_running, "SELECT
 * a.job, a.node_id, a.devices … JOIN gangsched.gangs g … WHERE
 * upper_inf(a.during) AND g.state IN ('placed', 'running')"), planned from
 * statistics that still say no job runs: a nested loop that, for each of
 * the 954 running gangs, ANDs a bitmap of its allocations with a fresh bitmap
 * of all 11,793 current allocations. After ANALYZE the same statement takes
 * 5–10 ms (hash join). Measured 2026-11-29: round 178 ms with preemption on
 * vs 62 ms off before ANALYZE; 66 vs 54 ms after. The search runs even when no running job can be a victim (all
 * younger than gangsched.min_runtime), so it is paid by steady-state rounds.
 * bench/fairness.sh's steady chains showed it as rounds of 200–450 ms that
 * dropped to 50–80 ms at the moment autovacuum analyzed the tables.
 *
 * Run in a scratch database with the extension (takes ~20 s):
 *   createdb x && psql -d x -c 'CREATE EXTENSION gangsched CASCADE' &&
 *   psql -d x -f bench/preempt_repro_stale_stats.sql
 * Autovacuum is switched off for the two tables so that it cannot fix the
 * statistics half-way.
 */
\set ON_ERROR_STOP 1
\set nodes 2048
\set gpn 8
\set rack_nodes 8
\set spine_racks 16
\set zone_spines 4
\set frac_every 8
\set teams 10
\set seed 0.42
\set first 1
\set last 20000
SET client_min_messages = warning;
\ir cluster.sql
\ir jobs.sql
ALTER TABLE gangsched.allocations SET (autovacuum_enabled = off);
ALTER TABLE gangsched.gangs SET (autovacuum_enabled = off);
ANALYZE;                                  -- as after a bulk import: nothing runs yet

SELECT placed FROM gangsched.run_round();    -- fills the cluster
SELECT count(gangsched.job_started(job, node)) AS started
  FROM (SELECT DISTINCT a.job, n.name AS node FROM gangsched.allocations a
          JOIN gangsched.nodes n ON n.id = a.node_id WHERE upper_inf(a.during)) s;

\echo '--- the loader statement with statistics from before the round'
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON)
SELECT a.job, a.node_id, a.devices, a.first_slice, a.slices, a.cpus::float8, a.mem_gb::float8, a.net_gbps::float8
  FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
 WHERE upper_inf(a.during) AND g.state IN ('placed', 'running');
\timing on
BEGIN; SET LOCAL gangsched.preemption = on;  SELECT considered, placed, preempted, ms FROM gangsched.run_round(); ROLLBACK;
BEGIN; SET LOCAL gangsched.preemption = off; SELECT considered, placed, preempted, ms FROM gangsched.run_round(); ROLLBACK;
\timing off

ANALYZE gangsched.allocations, gangsched.gangs;
\echo '--- the same after ANALYZE'
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON)
SELECT a.job, a.node_id, a.devices, a.first_slice, a.slices, a.cpus::float8, a.mem_gb::float8, a.net_gbps::float8
  FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
 WHERE upper_inf(a.during) AND g.state IN ('placed', 'running');
\timing on
BEGIN; SET LOCAL gangsched.preemption = on;  SELECT considered, placed, preempted, ms FROM gangsched.run_round(); ROLLBACK;
BEGIN; SET LOCAL gangsched.preemption = off; SELECT considered, placed, preempted, ms FROM gangsched.run_round(); ROLLBACK;
\timing off
ALTER TABLE gangsched.allocations RESET (autovacuum_enabled);
ALTER TABLE gangsched.gangs RESET (autovacuum_enabled);
