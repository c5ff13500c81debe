-- Victim decisions do not depend on the physical order of rows (issue 12).
-- A victim search looks at no more than 4,096 running gangs as candidates
-- (src/preempt.c, MAX_CANDIDATES); which ones must not be "the first read":
-- they are the first 4,096 in victim order (lowest priority, least lost
-- work, newest, then job id). The running jobs and their allocations are
-- loaded in job order, so every remaining tie is broken the same way
-- whatever the heap order. The same preemption is decided twice on the
-- same state: once as the rows were written, once after the tables were
-- rewritten newest row first (CLUSTER on a descending index), and the
-- victims must be the same.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';

/* ================================================================== */
/* 1. more candidates than a search looks at                           */
/* ================================================================== */
-- 520 nodes × 8 GPUs = 4,160 GPUs in one pool. Team a has a nominal
-- quota of 8 GPUs, team b none: b fills the cluster with 4,160 one-GPU
-- gangs, all borrowed, all started at the same time without a
-- checkpoint: they would lose the same work, so job id decides between
-- them. a1 (8 GPUs on one node, within a's quota) reclaims.
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', ('r' || (i - 1) / 8)::ltree, 32, 256, 100, 8, 'a100', 80))
  FROM generate_series(1, 520) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8);
SELECT count(gangsched.submit('b', 1, 1, name => 'b' || i)) FROM generate_series(1, 4160) i;
SELECT considered, placed, preempted FROM gangsched.run_round();
SELECT count(gangsched.job_started(p.job, p.node))
  FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p;
SELECT state, count(*), bool_and(borrowed) AS borrowed FROM gangsched.gangs GROUP BY state;
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'a1') > 0 AS submitted;

-- (a) as the rows were written: the oldest ids are read first
BEGIN;
SELECT considered, placed, preempted FROM gangsched.run_round();
SELECT string_agg(name, ',' ORDER BY job) AS victims_written_order
  FROM gangsched.jobs WHERE state = 'preempting' \gset
SELECT :'victims_written_order' AS victims;
SELECT * FROM gangsched.check_invariants();
ROLLBACK;

-- (b) the running gangs and their allocations rewritten newest first: a
-- sequential scan now reads the highest ids first, so "the first 4,096
-- read" would leave out the 64 oldest gangs, the ones victim order takes.
CREATE INDEX gangs_rev_order ON gangsched.gangs (id DESC);
CLUSTER gangsched.gangs USING gangs_rev_order;
DROP INDEX gangsched.gangs_rev_order;
CREATE INDEX allocations_rev_order ON gangsched.allocations (job DESC, worker DESC);
CLUSTER gangsched.allocations USING allocations_rev_order;
DROP INDEX gangsched.allocations_rev_order;
ANALYZE gangsched.gangs;
ANALYZE gangsched.allocations;
SELECT (SELECT g.id FROM gangsched.gangs g OFFSET 0 LIMIT 1) = max(id) AS newest_row_first FROM gangsched.gangs;
BEGIN;
SELECT considered, placed, preempted FROM gangsched.run_round();
SELECT string_agg(name, ',' ORDER BY job) AS victims_reversed_order
  FROM gangsched.jobs WHERE state = 'preempting' \gset
SELECT :'victims_reversed_order' AS victims,
       :'victims_reversed_order' = :'victims_written_order' AS same_victims;
SELECT * FROM gangsched.check_invariants();
ROLLBACK;

-- (c) the same with index scans only (the rows in index order, not the heap's)
BEGIN;
SET LOCAL enable_seqscan = off;
SELECT considered, placed, preempted FROM gangsched.run_round();
SELECT string_agg(name, ',' ORDER BY job) = :'victims_written_order' AS same_victims
  FROM gangsched.jobs WHERE state = 'preempting';
SELECT * FROM gangsched.check_invariants();
ROLLBACK;

-- (d) the round for real, after the rewrite
SELECT considered, placed, preempted FROM gangsched.run_round();
SELECT string_agg(name, ',' ORDER BY job) = :'victims_written_order' AS same_victims
  FROM gangsched.jobs WHERE state = 'preempting';
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
