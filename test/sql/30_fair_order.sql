-- Fair order: the DRF paper's example (no quotas at all is plain DRF),
-- weighted DRF (a weight-2 team ends with twice the resources of a
-- weight-1 team), and gangsched.queue_order = 'priority' (priority, then
-- submit order across teams, quota rules still applied). Preemption is off
-- throughout: these scenarios are about order and quota only. Each scenario
-- starts on a fresh extension and ends with no invariant violated.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
-- agents confirm nothing here; placed jobs must not be requeued meanwhile
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;

-- A round's summary without its duration.
CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, note text)
LANGUAGE sql AS $$ SELECT r.considered, r.placed, r.preempted, r.note FROM gangsched.run_round() r $$;

/* ================================================================== */
/* 1. The DRF paper's example                                          */
/* ================================================================== */

-- One node with 9 CPUs and 18 GB, no GPUs, no quotas. Team A's tasks need
-- <1 CPU, 4 GB> (dominant: memory, 4/18 = 0.222 each), team B's <3 CPUs,
-- 1 GB> (dominant: CPU, 3/9 = 0.333 each). Ten single-worker jobs each, A's
-- submitted first.
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('cpu1', 'main', 'r1', 9, 18, 0, 0, NULL, NULL);
SELECT gangsched.add_team('A');
SELECT gangsched.add_team('B');
SELECT count(gangsched.submit('A', 1, 0, cpus => 1, mem_gb => 4)) FROM generate_series(1, 10);
SELECT count(gangsched.submit('B', 1, 0, cpus => 3, mem_gb => 1)) FROM generate_series(1, 10);

-- The queue before the round, as the round will try it: progressive filling
-- alternates by dominant share (the share shown is the team's when the job
-- is tried). Both start at 0, a tie: A's job is older -> A (memory 4/18 =
-- 0.222); B 0 < 0.222 -> B (CPU 3/9 = 0.333); A 0.222 < 0.333 -> A (8/18 =
-- 0.444); B 0.333 < 0.444 -> B (6/9 = 0.667); A 0.444 < 0.667 -> A (12/18 =
-- 0.667; CPUs 3 + 6 = 9 of 9: full). Then A 0.667 = B 0.667, a tie: A's
-- job 4 is older and does not fit. Without quotas every job is beyond its
-- team's nominal quota (none), so every one would borrow.
SELECT position, job, team, dominant_share, would_borrow, fits_now
  FROM gangsched.queue WHERE position <= 6 ORDER BY position;
-- The rest do not fit now; all twenty are listed once.
SELECT count(*) AS queued, count(DISTINCT job) AS distinct_jobs,
       count(*) FILTER (WHERE fits_now) AS fit_now,
       count(*) FILTER (WHERE position > 5 AND NOT fits_now) AS wait
  FROM gangsched.queue;

SELECT * FROM pg_temp.round();
-- After the round A runs 3 and B runs 2: A holds 3 CPUs and 12 GB (dominant
-- share 12/18 = 0.667), B 6 CPUs and 2 GB (6/9 = 0.667).
SELECT team, count(*) AS placed, sum(cpus) AS cpus, sum(mem_gb) AS mem_gb, bool_and(borrowed) AS borrowed
  FROM gangsched.jobs WHERE state = 'placed' GROUP BY team ORDER BY team;
SELECT job, team FROM gangsched.jobs WHERE state = 'placed' ORDER BY job;
SELECT team, pool, used_cpus, used_mem_gb, dominant_share FROM gangsched.team_shares ORDER BY team;
-- the node: 9 of 9 CPUs and 14 of 18 GB held
SELECT node, sum(cpus) AS cpus, sum(mem_gb) AS mem_gb FROM gangsched.placements GROUP BY node;

-- A second round changes nothing.
SELECT * FROM pg_temp.round();
SELECT team, count(*) FROM gangsched.jobs WHERE state = 'placed' GROUP BY team ORDER BY team;

-- One of B's jobs finishes (3 CPUs, 1 GB free): B's share drops to 3/9 =
-- 0.333 < A's 0.667, so B's next job is tried first and takes the CPUs
-- back; A's next job (a tie at 0.667 afterwards) does not fit. Still A 3, B 2.
SELECT gangsched.job_finished(11, true);
SELECT position, job, team, dominant_share, fits_now FROM gangsched.queue WHERE position <= 2;
SELECT * FROM pg_temp.round();
SELECT team, count(*) FROM gangsched.jobs WHERE state = 'placed' GROUP BY team ORDER BY team;
SELECT job, team, state FROM gangsched.jobs WHERE job IN (4, 11, 13) ORDER BY job;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. Weighted DRF                                                     */
/* ================================================================== */

-- 24 GPUs (3 nodes x 8), plenty of CPUs and memory: GPUs are every job's
-- dominant resource (1 of 24 = 0.0417 per job). Team light (weight 1)
-- submits 20 one-GPU jobs first, then team heavy (weight 2) 20 more. A
-- weighted share is GPUs/24/weight, so equal weighted shares on a full
-- cluster mean heavy 16 GPUs (16/24/2 = 0.333) and light 8 (8/24 = 0.333):
-- a 2:1 ratio, although every one of light's jobs is older.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('g' || i, 'main', 'r1', 64, 512, 100, 8, 'a100', 80)) FROM generate_series(1, 3) i;
SELECT gangsched.add_team('light');
SELECT gangsched.add_team('heavy', 2);
SELECT count(gangsched.submit('light', 1, 1, cpus => 2, mem_gb => 8)) FROM generate_series(1, 20);
SELECT count(gangsched.submit('heavy', 1, 1, cpus => 2, mem_gb => 8)) FROM generate_series(1, 20);

-- Progressive filling: heavy takes two jobs for each of light's (its
-- weighted share grows half as fast).
SELECT position, job, team, dominant_share FROM gangsched.queue WHERE position <= 9 ORDER BY position;

SELECT * FROM pg_temp.round();
SELECT team, count(*) AS placed, sum(gpus * workers) AS gpus
  FROM gangsched.jobs WHERE state = 'placed' GROUP BY team ORDER BY team;
SELECT team, weight, used_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;
-- the ratio of what they hold, from the placements themselves
SELECT sum(p.slices) FILTER (WHERE j.team = 'heavy')::numeric / sum(p.slices) FILTER (WHERE j.team = 'light') AS heavy_to_light
  FROM gangsched.placements p JOIN gangsched.jobs j ON j.job = p.job;
SELECT * FROM gangsched.check_invariants();

-- Three teams of weights 1, 2 and 3 on 48 GPUs (6 nodes), 30 jobs each,
-- the lightest submitting first: equal weighted shares g/48/w on a full
-- cluster give 8, 16 and 24 GPUs (each 1/6).
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('g' || i, 'main', 'r1', 64, 512, 100, 8, 'a100', 80)) FROM generate_series(1, 6) i;
SELECT gangsched.add_team('w1', 1);
SELECT gangsched.add_team('w2', 2);
SELECT gangsched.add_team('w3', 3);
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['w1', 'w2', 'w3']) t, generate_series(1, 30);
SELECT * FROM pg_temp.round();
SELECT team, count(*) AS placed FROM gangsched.jobs WHERE state = 'placed' GROUP BY team ORDER BY team;
SELECT team, weight, used_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. gangsched.queue_order = 'priority'                               */
/* ================================================================== */

-- 8 GPUs (2 nodes x 4). alpha: nominal 1, borrowing limit 4 (at most 5
-- GPUs); beta: nominal 1. beta submits six 1-GPU jobs at priority 0
-- (jobs 1-6, b1..b6), then alpha six at priority 5 (jobs 7-12, a1..a6).
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT count(gangsched.add_node('g' || i, 'p', 'r1', 64, 512, 100, 4, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('alpha');
SELECT gangsched.add_team('beta');
SELECT gangsched.set_quota('alpha', 'p', 1, borrowing_limit_gpus => 4);
SELECT gangsched.set_quota('beta', 'p', 1);
SELECT count(gangsched.submit('beta', 1, 1, name => 'b' || i)) FROM generate_series(1, 6) i;
SELECT count(gangsched.submit('alpha', 1, 1, name => 'a' || i, priority => 5)) FROM generate_series(1, 6) i;

-- Priority order, across teams: a1 (within alpha's nominal 1), a2..a5
-- (borrowing, up to nominal + limit = 5), a6 refused by the borrowing
-- limit although it has priority 5; then priority 0 in submit order: b1
-- (beta's nominal 1), b2 and b3 (borrowing the last 2 GPUs), b4..b6 (no
-- room). Jobs quota refuses are never tried: they come last.
SET gangsched.queue_order = 'priority';
SELECT position, name, team, priority, would_borrow, fits_now FROM gangsched.queue ORDER BY position;
-- The same queue in fair order: guaranteed first (a1: a tie at 0, priority
-- 5 goes first; b1), then the borrowing ones alternating by dominant share
-- (ties at 1/8, 2/8, 3/8 go to alpha's priority 5): alpha 4, beta 4.
SET gangsched.queue_order = 'fair';
SELECT position, name, team, dominant_share, would_borrow, fits_now FROM gangsched.queue WHERE position <= 9 ORDER BY position;
SELECT team, count(*) FILTER (WHERE fits_now) AS would_place FROM gangsched.queue GROUP BY team ORDER BY team;

-- The round in priority order: alpha 5 (1 guaranteed, 4 borrowed), beta 3
-- (1 guaranteed, 2 borrowed).
SET gangsched.queue_order = 'priority';
SELECT * FROM pg_temp.round();
SELECT name, team, priority, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT team, count(*) AS placed, count(*) FILTER (WHERE borrowed) AS borrowed
  FROM gangsched.jobs WHERE state = 'placed' GROUP BY team ORDER BY team;
-- a6 waits for the borrowing limit, b4 for capacity
SELECT name, (SELECT string_agg(w.reason || ': ' || w.detail, '; ') FROM gangsched.why_pending(job) w) AS why
  FROM gangsched.jobs WHERE name IN ('a6', 'b4') ORDER BY job;
SELECT team, nominal_gpus, borrowing_limit_gpus, used_gpus, borrowed_gpus FROM gangsched.team_shares ORDER BY team;
SELECT * FROM gangsched.check_invariants();
RESET gangsched.queue_order;

-- Priority order, too, tries a guaranteed job that does not fit again as
-- borrowed work elsewhere. Reserved pool p (8 GPUs) is full of beta's
-- borrowed work; opportunistic pool spot (8 GPUs) is empty; alpha has a
-- nominal quota of 4 in p. beta's bq (2 GPUs in p, priority 9) is first in
-- line and gets the starvation guard; alpha's a1 fits its quota in p but p
-- is full: it runs in spot, borrowed.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT gangsched.add_pool('spot', 'opportunistic');
SELECT gangsched.add_node('p1', 'p', 'r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_node('s1', 'spot', 'r2', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team('alpha');
SELECT gangsched.add_team('beta');
SELECT gangsched.set_quota('alpha', 'p', 4);
SET gangsched.queue_order = 'priority';
SELECT count(gangsched.submit('beta', 1, 1, pool => 'p')) FROM generate_series(1, 8);
SELECT * FROM pg_temp.round();
SELECT gangsched.submit('beta', 1, 2, pool => 'p', priority => 9, name => 'bq');
SELECT gangsched.submit('alpha', 1, 1, name => 'a1');
-- a1 is tried twice: within its quota in p, then borrowing (p or spot)
SELECT position, name, would_borrow, fits_now FROM gangsched.queue ORDER BY position;
SELECT * FROM pg_temp.round();
SELECT j.name, j.state, j.borrowed, p.node FROM gangsched.jobs j LEFT JOIN gangsched.placements p ON p.job = j.job
 WHERE j.name IN ('bq', 'a1') ORDER BY j.job;
SELECT * FROM gangsched.check_invariants();
RESET gangsched.queue_order;

/* ================================================================== */
/* 4. why_pending names the fair order                                 */
/* ================================================================== */

-- 8 GPUs on one node, no quotas. H holds 4 (dominant share 0.5). Then H
-- submits one more 1-GPU job (job 5), after it L1 and L2 two each (6, 7
-- and 8, 9). The round tries L1 and L2 first (shares 0, 1/8, 1/8, 2/8),
-- they fill the node, and H's older job is tried last at 0.5: two teams
-- with a lower dominant share went first.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('g1', 'main', 'r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team(t) FROM unnest(ARRAY['H', 'L1', 'L2']) t;
SELECT count(gangsched.submit('H', 1, 1)) FROM generate_series(1, 4);
SELECT * FROM pg_temp.round();
SELECT gangsched.submit('H', 1, 1);
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['L1', 'L2']) t, generate_series(1, 2);
SELECT position, job, team, dominant_share, fits_now FROM gangsched.queue ORDER BY position;
SELECT * FROM gangsched.why_pending(5);
SELECT * FROM pg_temp.round();
SELECT team, count(*) FILTER (WHERE state = 'placed') AS placed, count(*) FILTER (WHERE state = 'pending') AS pending
  FROM gangsched.jobs GROUP BY team ORDER BY team;
-- Now H's job is the only one waiting: no team goes before it any more; it
-- waits for capacity alone.
SELECT * FROM gangsched.why_pending(5);
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
