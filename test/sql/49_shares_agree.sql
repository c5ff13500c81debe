-- The dominant share has one meaning (issue 14): team_shares shows the
-- share rounds use, the same as the queue view's. A gang told to stop no
-- longer counts for its team; the capacity held for a nominated job counts
-- for the nominee's. Virtual time; ends with check_invariants() empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';

-- 2 nodes of 8 GPUs; a and b have 8 GPUs of nominal quota each.
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8), gangsched.set_quota('b', 'main', 8);

-- b fills the cluster: 8 GPUs within its quota, 8 borrowed.
SELECT count(gangsched.submit('b', 1, 1, name => 'b' || i)) FROM generate_series(1, 16) i;
SELECT placed FROM gangsched.run_round();
SELECT count(gangsched.job_started(p.job, p.node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) p;
SET gangsched.clock_override = '2030-01-01 01:00:00+00';

-- Both views agree while nothing moves: b 16/16, a 0.
SELECT gangsched.submit('b', 1, 1, name => 'b17') IS NOT NULL AS b17;
SELECT team, used_gpus, borrowed_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;
SELECT name, team, dominant_share FROM gangsched.queue ORDER BY position;

-- a reclaims 4 GPUs: 4 of b's borrowed gangs are told to stop, a's job is
-- nominated with 4 GPUs held for it. Until they release, b's allocations
-- still hold 16 GPUs (used_gpus) but its share counts 12; a's share counts
-- the 4 held for it.
SELECT gangsched.submit('a', 4, 1, name => 'a1') IS NOT NULL AS a1;
SELECT placed, preempted FROM gangsched.run_round();
SELECT name, state FROM gangsched.jobs WHERE state IN ('nominated', 'preempting') ORDER BY name;
SELECT gangsched.submit('a', 1, 1, name => 'a2') IS NOT NULL AS a2;
SELECT team, used_gpus, borrowed_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;
-- The queue shows each job's team share when the next round would try it,
-- after that round's earlier decisions: a2 goes first (a is below b) and
-- would reclaim one more of b's borrowed GPUs, so b17 is tried at 11/16.
SELECT name, team, dominant_share FROM gangsched.queue ORDER BY position;
-- With no earlier decision to move the shares (no preemption in the
-- simulated round), every waiting job's team share is team_shares' own.
SET gangsched.preemption = off;
SELECT name, team, dominant_share FROM gangsched.queue ORDER BY position;
SELECT count(*) AS disagreeing
  FROM gangsched.queue q JOIN gangsched.team_shares s ON s.team = q.team AND s.pool = 'main'
 WHERE q.dominant_share <> s.dominant_share;
RESET gangsched.preemption;

-- after the releases a1 is placed: the share is what the allocations hold again
SELECT count(gangsched.job_released(j.job, checkpointed => true)) FROM gangsched.jobs j WHERE j.state = 'preempting';
SELECT name, state FROM gangsched.jobs WHERE name = 'a1';
SELECT team, used_gpus, borrowed_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
