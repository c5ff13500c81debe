-- Elastic gangs with a span (issue 17, docs/elastic.md#growing): the whole
-- gang must lie in one domain of the span's level, so a grow takes free
-- capacity only inside the domain that already holds the gang, never in
-- another one with more room. Also node_work's grace column, which the
-- agent restarts an elastic gang's workers with. Virtual time; ends with
-- check_invariants() empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.preemption = off;
\set SHOW_CONTEXT never

-- two racks of two 8-GPU nodes; rack r2 is down at first
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', (CASE WHEN i <= 2 THEN 'r1' ELSE 'r2' END)::ltree,
                                32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 4) i;
SELECT gangsched.set_node_state('n3', 'down'), gangsched.set_node_state('n4', 'down');
SELECT gangsched.add_team('a'), gangsched.add_team('b');

-- b holds one node of r1; el (4 replicas of one 8-GPU worker, at least 1,
-- all in one rack) starts on the other
SELECT gangsched.submit('b', 1, 8, name => 'blk') AS blk \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, span => 'rack', grace => '2 minutes', name => 'el') AS el \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.job_started(:el, node) FROM (SELECT DISTINCT node FROM gangsched.placements WHERE job = :el) n;
SELECT name, state, workers, replicas, span FROM gangsched.jobs WHERE job = :el;
-- node_work gives each job's grace (the agent's restart grace): el's own,
-- blk the default (60 s); both at most gangsched.max_grace
SELECT p.job = :el AS el, w.grace
  FROM (SELECT DISTINCT job, node FROM gangsched.placements) p
 CROSS JOIN LATERAL (SELECT DISTINCT x.grace FROM gangsched.node_work(p.node) x WHERE x.job = p.job) w ORDER BY 1;
SET gangsched.max_grace = '90s';
SELECT DISTINCT w.grace FROM gangsched.placements p
 CROSS JOIN LATERAL gangsched.node_work(p.node) w WHERE p.job = :el AND w.job = :el;
RESET gangsched.max_grace;

-- r2 comes up: two free nodes, but in the other rack: no grow
SELECT gangsched.set_node_state('n3', 'up'), gangsched.set_node_state('n4', 'up');
SELECT placed FROM gangsched.run_round();
SELECT name, workers FROM gangsched.jobs WHERE job = :el;
SELECT count(*) AS grown_events FROM gangsched.events WHERE kind = 'grown' AND job = :el;

-- blk ends: its node is in el's rack: el grows onto it (to 2, not to 4)
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.job_finished(:blk, true);
SELECT placed FROM gangsched.run_round();
SELECT name, workers, replicas FROM gangsched.jobs WHERE job = :el;
SELECT reason FROM gangsched.events WHERE kind = 'grown' AND job = :el;
SELECT count(DISTINCT subpath(p.topology, 0, 1)) AS racks, count(*) AS workers
  FROM gangsched.placements p
 WHERE p.job = :el AND p.device = 0;
-- nothing more in r1: further rounds grow nothing
SELECT placed FROM gangsched.run_round();
SELECT name, workers FROM gangsched.jobs WHERE job = :el;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:el);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
