-- A round's writes do not follow the physical order of rows (issue 12).
-- The round writes its placements, nominations and victims (and so their
-- events, which agents read in id order) in the order of the pending
-- queue's load; that load reads the queue in job order, so the events of
-- one round come in job order whatever the heap order of gangs (which
-- autovacuum and HOT pruning change). Agents act on those events in that
-- order (gangsched-replay releases victims in it, and which of two
-- preemptors a release places first decides whether the second counts as
-- borrowed), so a replay under load and one alone made different
-- decisions. Here the queue is rewritten newest row first (CLUSTER on a
-- descending index) before each round: the events must still come in job
-- order.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';

-- 4 nodes of 8 GPUs; team a has a nominal quota of 16 GPUs, team b none.
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r0'::ltree, 32, 256, 100, 8, 'a100', 80))
  FROM generate_series(1, 4) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 16);

/* ================================================================== */
/* 1. placements: b's eight 4-GPU gangs fill the cluster, borrowed     */
/* ================================================================== */
SELECT count(gangsched.submit('b', 1, 4, name => 'b' || i)) FROM generate_series(1, 8) i;
CREATE INDEX gangs_rev_order ON gangsched.gangs (id DESC);
CLUSTER gangsched.gangs USING gangs_rev_order;
ANALYZE gangsched.gangs;
SELECT (SELECT g.id FROM gangsched.gangs g OFFSET 0 LIMIT 1) = max(id) AS newest_row_first FROM gangsched.gangs;
SELECT considered, placed, preempted FROM gangsched.run_round();
-- the 'placed' events in id order: job order
SELECT string_agg(j.name, ',' ORDER BY e.id) AS placed_in_event_order,
       bool_and(j.job > COALESCE(p.job, 0)) AS ascending
  FROM gangsched.events e
  JOIN gangsched.jobs j ON j.job = e.job
  LEFT JOIN LATERAL (SELECT e2.job FROM gangsched.events e2
                      WHERE e2.kind = 'placed' AND e2.id < e.id ORDER BY e2.id DESC LIMIT 1) p ON true
 WHERE e.kind = 'placed';
SELECT count(gangsched.job_started(p.job, p.node))
  FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. nominations and victims: a's four 4-GPU gangs reclaim            */
/* ================================================================== */
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT count(gangsched.submit('a', 1, 4, name => 'a' || i)) FROM generate_series(1, 4) i;
CLUSTER gangsched.gangs USING gangs_rev_order;
DROP INDEX gangsched.gangs_rev_order;
ANALYZE gangsched.gangs;
SELECT (SELECT g.id FROM gangsched.gangs g OFFSET 0 LIMIT 1) = max(id) AS newest_row_first FROM gangsched.gangs;
SELECT considered, placed, preempted FROM gangsched.run_round();
-- the nominated preemptors, and the victims told to stop, in event order
SELECT e.kind, string_agg(j.name, ',' ORDER BY e.id) AS jobs_in_event_order
  FROM gangsched.events e JOIN gangsched.jobs j ON j.job = e.job
 WHERE e.kind IN ('nominated', 'preempting')
 GROUP BY e.kind ORDER BY e.kind;
-- each victim's event follows the order of the preemptors it is for
SELECT bool_and(v.pfor_rank <= w.pfor_rank) AS victims_in_preemptor_order
  FROM (SELECT e.id, dense_rank() OVER (ORDER BY g.preempted_for) AS pfor_rank
          FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job
         WHERE e.kind = 'preempting') v
  JOIN (SELECT e.id, dense_rank() OVER (ORDER BY g.preempted_for) AS pfor_rank
          FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job
         WHERE e.kind = 'preempting') w ON w.id > v.id;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
