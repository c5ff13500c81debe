/*
 * bench/preempt_repro_hostcount.sql — reproducer (not a benchmark): within
 * one round, a preemptor nominated earlier is counted twice on a node's
 * CPUs (its victims' allocations stay counted while its holds are counted
 * too), so a later preemptor on that node sees fewer free CPUs than it will
 * have and takes more victims than it needs, or none at all.
 *
 * Run in a scratch database with the extension:
 *   createdb x && psql -d x -c 'CREATE EXTENSION gangsched CASCADE' && psql -d x -f bench/preempt_repro_hostcount.sql
 *
 * One node: 8 GPUs, 96 CPUs. Team b (nominal quota 0, so all it runs is
 * borrowed) runs v1 (4 GPUs, 40 CPUs), v2 and v3 (1 GPU, 10 CPUs each) and v4
 * (2 GPUs, 20 CPUs): 8 GPUs and 80 CPUs busy. Team a (nominal quota 8 GPUs)
 * submits p1 (1 worker × 4 GPUs, 40 CPUs, priority 10) and p2 (2 workers × 1
 * GPU, 10 CPUs each, priority 0).
 *
 * Expected: p1 takes v1; p2 takes v2 and v3 (the two cheapest; afterwards the
 * node runs p1 40 + p2 20 + v4 20 = 80 CPUs of 96). Both nominated, three
 * victims.
 * Seen (src/preempt.c at the time of writing): p1 takes v1; for p2 the model
 * still counts v1's 40 CPUs and p1's 40 held CPUs, so free CPUs are
 * 96 − 80 − 40 = −24, and even with v2, v3 and v4 released only 16 CPUs are
 * free, room for one worker: p2 is not nominated (or, in larger clusters,
 * takes extra victims whose GPUs then stay idle).
 */
\set ON_ERROR_STOP 1
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('n1', 'main', 'r1', 96, 1024, 400, 8, 'H100', 80);
SELECT gangsched.add_team('a');
SELECT gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8);
SELECT gangsched.set_quota('b', 'main', 0);
SELECT gangsched.submit('b', 1, 4, cpus => 40, mem_gb => 64, name => 'v1');
SELECT gangsched.submit('b', 1, 1, cpus => 10, mem_gb => 16, name => 'v2');
SELECT gangsched.submit('b', 1, 1, cpus => 10, mem_gb => 16, name => 'v3');
SELECT gangsched.submit('b', 1, 2, cpus => 20, mem_gb => 32, name => 'v4');
SELECT placed FROM gangsched.run_round();
SELECT count(gangsched.job_started(job, 'n1')) AS started FROM gangsched.jobs WHERE state = 'placed';

SET gangsched.clock_override = '2030-01-01 01:00:00+00';   -- past gangsched.min_runtime
SELECT gangsched.submit('a', 1, 4, cpus => 40, mem_gb => 64, name => 'p1', priority => 10);
SELECT gangsched.submit('a', 2, 1, cpus => 10, mem_gb => 16, name => 'p2');
SELECT placed, preempted, note FROM gangsched.run_round();

SELECT name, state, borrowed, reason FROM gangsched.jobs ORDER BY job;
SELECT count(*) FILTER (WHERE name = 'p2' AND state = 'nominated') = 1 AS p2_nominated,
       count(*) FILTER (WHERE state = 'preempting') AS victims
  FROM gangsched.jobs;
SELECT * FROM gangsched.check_invariants();
