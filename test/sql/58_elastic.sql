-- Elastic gangs (issue 17, docs/elastic.md): submit(..., min_replicas)
-- places a job whole at the largest number of replicas from its maximum
-- down to its minimum that fits now, never below the minimum; admission
-- checks the minimum; quotas count what is held; a requeued job asks for
-- its whole gang again; resize() changes min_replicas of a pending job;
-- agents read the size held. Virtual time; ends with check_invariants() empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
\set SHOW_CONTEXT never

-- 4 nodes of 8 GPUs in one rack
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 4) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');

/* ------------------------------------------------------------------ */
/* refusals of min_replicas (22023), admission at the minimum (53xxx)  */
/* ------------------------------------------------------------------ */
\set VERBOSITY default
SELECT gangsched.submit('a', 4, 8, min_replicas => 0);
SELECT gangsched.submit('a', 4, 8, min_replicas => 5);
SELECT gangsched.submit('a', 8, 4, group_size => 2, min_replicas => 5);
-- 80 GPUs can never run on 32, but the minimum of 4 replicas can: admitted
SELECT gangsched.submit('a', 10, 8, min_replicas => 5);
SELECT gangsched.submit('a', 10, 8, min_replicas => 4, name => 'wide') AS wide \gset
\set VERBOSITY terse
SELECT name, state, workers, replicas, min_replicas, max_replicas FROM gangsched.jobs WHERE job = :wide;
-- placed at the largest size that fits: the whole cluster, 4 of its 10 replicas
SELECT placed, workers_placed FROM gangsched.run_round();
SELECT name, state, workers, replicas, min_replicas, max_replicas FROM gangsched.jobs WHERE job = :wide;
SELECT count(*) AS worker_rows, count(DISTINCT node) AS nodes FROM gangsched.placements WHERE job = :wide;
SELECT detail->'replicas' AS replicas, detail->'min_replicas' AS min, detail->'max_replicas' AS max
  FROM gangsched.events WHERE kind = 'placed' AND job = :wide;
-- agents: the size held is the world size, ranks 0 .. 3
SELECT job = :wide AS wide, action, worker, local_rank, local_world_size, world_size
  FROM gangsched.node_work('n3');
SELECT * FROM gangsched.check_invariants();
-- a node going down requeues it: it asks for its whole gang again
SELECT gangsched.set_node_state('n4', 'down');
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :wide;
SELECT * FROM gangsched.check_invariants();
-- three nodes up: 3 replicas fit, below its minimum of 4: it waits
SELECT placed, workers_placed FROM gangsched.run_round();
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :wide;
SELECT gangsched.set_node_state('n4', 'up');
SELECT gangsched.cancel(:wide);

/* ------------------------------------------------------------------ */
/* smaller when only that fits, whole when it fits, never below min   */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('b', 2, 8, name => 'blocker') AS blocker \gset
SELECT placed FROM gangsched.run_round();
-- 16 GPUs free: 4 replicas asked, 2 fit
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'shrunk') AS shrunk \gset
-- tensor groups of 2 workers × 4 GPUs on one node; 3 replicas at least:
-- 24 GPUs, more than what is free once shrunk runs
SELECT gangsched.submit('a', 8, 4, group_size => 2, min_replicas => 3, name => 'atleast3') AS atleast3 \gset
SELECT placed, workers_placed FROM gangsched.run_round();
SELECT name, state, workers, replicas, min_replicas, max_replicas FROM gangsched.jobs
 WHERE job IN (:blocker, :shrunk, :atleast3) ORDER BY job;
SELECT count(*) AS atleast3_rows FROM gangsched.placements WHERE job = :atleast3;
SELECT * FROM gangsched.why_pending(:atleast3);
SELECT * FROM gangsched.check_invariants();
-- the blocker ends: 16 GPUs free again, atleast3 (3 replicas need 24 GPUs) still waits
SELECT gangsched.job_finished(:blocker, true);
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job IN (:shrunk, :atleast3) ORDER BY job;
-- shrunk ends: atleast3 is placed whole, 4 replicas of 2 workers, each group on one node
SELECT gangsched.job_finished(:shrunk, true);
SELECT placed, workers_placed FROM gangsched.run_round();
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :atleast3;
SELECT worker / 2 AS grp, count(DISTINCT node) AS nodes FROM gangsched.placements WHERE job = :atleast3 GROUP BY 1 ORDER BY 1;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:atleast3);

/* ------------------------------------------------------------------ */
/* groups stay whole at a smaller size                                 */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('b', 3, 8, name => 'three') AS three \gset
SELECT gangsched.submit('b', 1, 4, name => 'half') AS half \gset
SELECT placed FROM gangsched.run_round();
-- 4 GPUs free on one node: one group of 2 × 2 GPUs (a replica), not 3 loose workers
SELECT gangsched.submit('a', 6, 2, group_size => 2, min_replicas => 1, name => 'grouped') AS grouped \gset
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :grouped;
SELECT DISTINCT worker, node FROM gangsched.placements WHERE job = :grouped ORDER BY worker;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:grouped), gangsched.cancel(:three), gangsched.cancel(:half);

/* ------------------------------------------------------------------ */
/* quotas count what is held                                           */
/* ------------------------------------------------------------------ */
-- team q: 16 GPUs of nominal quota; a non-preemptible job runs within it
-- only: 4 replicas asked, 2 allowed although the whole cluster is free
SELECT gangsched.add_team('q');
SELECT gangsched.set_quota('q', 'main', gpus => 16, cpus => 128, mem_gb => 1024, net_gbps => 400);
\set VERBOSITY default
SELECT gangsched.submit('q', 4, 8, preemptible => false, min_replicas => 3);
\set VERBOSITY terse
SELECT gangsched.submit('q', 4, 8, preemptible => false, min_replicas => 1, name => 'inquota') AS inquota \gset
SELECT placed, workers_placed FROM gangsched.run_round();
SELECT name, state, workers, replicas, borrowed FROM gangsched.jobs WHERE job = :inquota;
SELECT pool, nominal_gpus, used_gpus, borrowed_gpus FROM gangsched.team_shares WHERE team = 'q';
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:inquota);

/* ------------------------------------------------------------------ */
/* resize(min_replicas) of a pending job                               */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('b', 4, 8, name => 'full') AS full \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('a', 4, 8, name => 'rigid') AS rigid \gset
SELECT gangsched.submit('a', 4, 8, min_replicas => 2, name => 'el') AS el \gset
SELECT queue_pos AS el_pos FROM gangsched.gangs WHERE id = :el \gset
SELECT gangsched.resize(:el, min_replicas => 1);
SELECT gangsched.resize(:rigid, min_replicas => 2);
SELECT gangsched.resize(:el, workers => 2);
SELECT name, workers, replicas, min_replicas, max_replicas FROM gangsched.jobs WHERE job IN (:rigid, :el) ORDER BY job;
SELECT queue_pos = :el_pos AS same_position FROM gangsched.gangs WHERE id = :el;
SELECT reason, detail FROM gangsched.events WHERE kind = 'resized' ORDER BY id;
\set VERBOSITY default
SELECT gangsched.resize(:el, min_replicas => 3);
SELECT gangsched.resize(:rigid, workers => 2);
SELECT gangsched.resize(:rigid, workers => 6, gpus => 8);
SELECT gangsched.resize(:full, min_replicas => 1);
\set VERBOSITY terse
SELECT name, workers, min_replicas FROM gangsched.jobs WHERE job IN (:rigid, :el) ORDER BY job;
SELECT gangsched.job_finished(:full, true);
SELECT placed, workers_placed FROM gangsched.run_round();
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job IN (:rigid, :el) ORDER BY job;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:rigid), gangsched.cancel(:el);

/* ------------------------------------------------------------------ */
/* a nominated elastic job: victims for its minimum only               */
/* ------------------------------------------------------------------ */
SET gangsched.min_runtime = 0;
-- team b borrows the whole cluster; q's quota (16 GPUs) is reclaimed for
-- an elastic job of 4 replicas that can start on 1
SELECT gangsched.submit('b', 2, 8, name => 'borrow1') AS borrow1 \gset
SELECT gangsched.submit('b', 2, 8, name => 'borrow2') AS borrow2 \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('q', 4, 8, min_replicas => 1, name => 'reclaim') AS reclaim \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job IN (:borrow1, :borrow2, :reclaim) ORDER BY job;
SELECT count(*) AS held_workers FROM gangsched.holds WHERE job = :reclaim;
SELECT detail->'replicas' AS replicas, detail->'victims' AS victims FROM gangsched.events WHERE kind = 'nominated' AND job = :reclaim;
SELECT * FROM gangsched.check_invariants();
-- its victim releases: it is placed on the capacity held, at its minimum
SELECT gangsched.job_released(job, true) FROM gangsched.jobs WHERE state = 'preempting';
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :reclaim;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:reclaim), gangsched.cancel(:borrow1), gangsched.cancel(:borrow2);
RESET gangsched.min_runtime;

/* ------------------------------------------------------------------ */
/* a portal submits and resizes elastic jobs of its own team           */
/* ------------------------------------------------------------------ */
CREATE ROLE gs58_portal LOGIN;
SELECT gangsched.add_member('gs58_portal', 'a');
SET ROLE gs58_portal;
SELECT gangsched.submit('a', 2, 8, min_replicas => 1, name => 'portal') AS portal \gset
SELECT gangsched.resize(:portal, min_replicas => 2);
SELECT name, workers, replicas, min_replicas, max_replicas FROM gangsched.jobs WHERE job = :portal;
\set VERBOSITY default
SELECT gangsched.submit('b', 2, 8, min_replicas => 1);
\set VERBOSITY terse
RESET ROLE;
DROP OWNED BY gs58_portal;
DROP ROLE gs58_portal;
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers FROM gangsched.jobs WHERE job = :portal;
-- analysts: the replicas each job held, from the history (the jobs above
-- held theirs for no time: the clock stood still)
SET gangsched.clock_override = '2030-01-01 03:00:00+00';
SELECT gangsched.job_finished(:portal, true);
SELECT gangsched.submit('b', 3, 8, name => 'taker') AS taker \gset
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'late') AS late \gset
SELECT placed FROM gangsched.run_round();
SET gangsched.clock_override = '2030-01-01 04:00:00+00';
SELECT gangsched.set_node_state(node, 'down') FROM (SELECT DISTINCT node FROM gangsched.placements WHERE job = :late) n;
SELECT name, team, since, until, workers, replicas, min_replicas, max_replicas
  FROM gangsched.replica_history('2029-12-31', '2030-01-02') ORDER BY job, since;
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
