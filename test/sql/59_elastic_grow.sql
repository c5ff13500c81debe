-- Elastic gangs growing (issue 17, docs/elastic.md): after every waiting
-- job had its try, a running elastic gang below its maximum takes the
-- capacity still free, one replica at a time, in fair order; never what a
-- waiting job takes, what the starvation guard keeps or beyond the team's
-- nominal quota for guaranteed work; a 'grown' event, the new workers'
-- allocations and a resize notice to its nodes. Virtual time; ends with
-- check_invariants() empty.
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
SET gangsched.preemption = off;

/* ------------------------------------------------------------------ */
/* grows when capacity frees                                           */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('b', 2, 8, name => 'blocker') AS blocker \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'el') AS el \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.job_started(:el, node) FROM (SELECT DISTINCT node FROM gangsched.placements WHERE job = :el) n;
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :el;
-- nothing free: a round grows nothing
SELECT placed FROM gangsched.run_round();
SELECT count(*) AS grown_events FROM gangsched.events WHERE kind = 'grown';
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.job_finished(:blocker, true);
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :el;
SELECT reason, detail FROM gangsched.events WHERE kind = 'grown' AND job = :el;
SELECT worker, node, since FROM gangsched.placements WHERE job = :el AND device = 0 ORDER BY worker;
-- every node's agent reads the new world size; the new nodes start their workers
SELECT p.node, w.action, w.worker, w.world_size FROM gangsched.placements p
  CROSS JOIN LATERAL (SELECT * FROM gangsched.node_work(p.node) x WHERE x.job = :el AND x.worker = p.worker) w
 WHERE p.job = :el AND p.device = 0 ORDER BY w.worker;
SELECT * FROM gangsched.check_invariants();
SET gangsched.clock_override = '2030-01-01 02:00:00+00';
SELECT gangsched.job_finished(:el, true);
SELECT workers, replicas, since, until FROM gangsched.replica_history('2030-01-01', '2030-01-02') WHERE job = :el;

/* ------------------------------------------------------------------ */
/* waiting jobs first                                                  */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('b', 2, 8, name => 'b2') AS b2 \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'ea') AS ea \gset
SELECT placed FROM gangsched.run_round();
-- b2 ends (2 nodes free) while a rigid job of b waits for one node: it is
-- placed first, ea grows into the node left
SELECT gangsched.submit('b', 1, 8, name => 'waiting') AS waiting \gset
SELECT gangsched.job_finished(:b2, true);
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers FROM gangsched.jobs WHERE job IN (:ea, :waiting) ORDER BY job;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:ea), gangsched.cancel(:waiting);

/* ------------------------------------------------------------------ */
/* fair order between growing gangs: one replica at a time             */
/* ------------------------------------------------------------------ */
SELECT gangsched.add_team('c');
SELECT gangsched.submit('c', 2, 8, name => 'fill1') AS fill1 \gset
SELECT gangsched.submit('c', 1, 8, name => 'fill2') AS fill2 \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'fa') AS fa \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.job_finished(:fill2, true);
SELECT gangsched.submit('b', 4, 8, min_replicas => 1, name => 'fb') AS fb \gset
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers FROM gangsched.jobs WHERE job IN (:fa, :fb) ORDER BY job;
-- fill1 ends: 2 nodes free, one replica each (equal shares, then the older
-- first; then b has the lower share)
SELECT gangsched.job_finished(:fill1, true);
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers FROM gangsched.jobs WHERE job IN (:fa, :fb) ORDER BY job;
SELECT job = :fa AS fa, detail FROM gangsched.events WHERE kind = 'grown' AND job IN (:fa, :fb) ORDER BY id;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:fa), gangsched.cancel(:fb);

/* ------------------------------------------------------------------ */
/* replicas of tensor groups grow whole                                */
/* ------------------------------------------------------------------ */
-- replicas of 2 tensor-parallel workers × 4 GPUs, each group on one node:
-- 1 replica on the node free, then all 4 when the rest frees, every group
-- on one node
SELECT gangsched.submit('c', 3, 8, name => 'fill3') AS fill3 \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('a', 8, 4, group_size => 2, min_replicas => 1, name => 'tg') AS tg \gset
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :tg;
SELECT gangsched.job_finished(:fill3, true);
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :tg;
SELECT worker / 2 AS grp, count(DISTINCT node) AS nodes
  FROM gangsched.placements WHERE job = :tg GROUP BY 1 ORDER BY 1;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:tg);

/* ------------------------------------------------------------------ */
/* the starvation guard's capacity is not grown into                   */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('b', 1, 8, name => 'r1') AS r1 \gset
SELECT gangsched.submit('b', 2, 8, name => 'r2') AS r2 \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'eg') AS eg \gset
SELECT placed FROM gangsched.run_round();
-- big (3 nodes) is first in line; r1 ends: its node is kept for big
SELECT gangsched.submit('b', 3, 8, name => 'big') AS big \gset
SELECT gangsched.job_finished(:r1, true);
SELECT placed, note FROM gangsched.run_round();
SELECT name, state, workers FROM gangsched.jobs WHERE job IN (:eg, :big) ORDER BY job;
SELECT count(*) AS grown_events FROM gangsched.events WHERE kind = 'grown' AND job = :eg;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:eg), gangsched.cancel(:big), gangsched.cancel(:r2);

/* ------------------------------------------------------------------ */
/* quotas: guaranteed work grows within nominal quota only             */
/* ------------------------------------------------------------------ */
SELECT gangsched.add_team('q');
SELECT gangsched.set_quota('q', 'main', gpus => 16, cpus => 128, mem_gb => 1024, net_gbps => 400);
SELECT gangsched.submit('b', 3, 8, name => 'three') AS three \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('q', 4, 8, preemptible => false, min_replicas => 1, name => 'eq') AS eq \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.job_finished(:three, true);
SELECT placed FROM gangsched.run_round();
-- 8 GPUs held, 16 of quota: grown to 2 replicas, not to the 4 that are free
SELECT name, state, workers, borrowed FROM gangsched.jobs WHERE job = :eq;
SELECT pool, nominal_gpus, used_gpus FROM gangsched.team_shares WHERE team = 'q';
SELECT placed FROM gangsched.run_round();
SELECT name, workers FROM gangsched.jobs WHERE job = :eq;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:eq);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
