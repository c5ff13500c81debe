-- Team trees, a seeded property test that the view and the rounds agree
-- on hierarchical weighted DRF: the fair_share column of team_shares (and
-- the per-resource allocations of _fair_shares, both from gs_hdrf in
-- src/fair.c) against what the rounds do with the C order (next_fair_tree,
-- src/order.c) and the fair allocations preemption's hysteresis compares
-- with (the same gs_hdrf; not callable from SQL, so compared through what
-- the rounds leave). On random trees (two or three levels, random weights
-- per level) with 1-GPU jobs on 320 GPUs and no quotas, every team's
-- subtree must end holding its fair_share of the cluster within one job
-- (1/320, plus the view's rounding to 4 places). Part 1: every leaf
-- submits at once, one round (the order). Part 2: half of the leaves fill
-- the cluster first, the others submit later and preemption takes back
-- what their fair allocations give them (victims released as their agents
-- would confirm, rounds repeated).
-- Part 3: two resources, 320 GPUs and 640 CPUs (16 a node). Each leaf asks
-- for GPUs (1-GPU jobs) or for CPUs only (8-CPU jobs, one being 1/80 of the
-- CPUs), so that both resources run out and a subtree blocked on one is
-- re-levelled on the other (H-DRF). Every team's subtree must hold its
-- fair allocation of each resource (_fair_shares, the per-resource
-- amounts) within two jobs of either kind, after one round and after late
-- leaves took theirs back by preemption (whose hysteresis moves a gang
-- only from a side that stays at or above its allocation, so a side may
-- stay short by what its siblings hold above theirs, less than a job
-- each). Two, not one, after one round too: the order fills by whole
-- jobs, and a CPU job is 1/80 of the CPUs where a GPU job is 1/320 of the
-- GPUs, so a subtree holding both kinds can stand a CPU job above the
-- level when the GPUs run out, and its GPU leaves short of theirs by
-- what that job is worth in its siblings' GPUs (seed 0.44: t1.1 73 GPUs
-- for 71.11, t1.2 34 for 35.56, a gap of 0.003 in weighted share where
-- one of t1.2's CPU jobs is 0.0125). Then subtrees holding from an
-- earlier round what their active leaves no longer ask for (a satisfied
-- leaf's GPUs, used-up GPUs): the order compares them on what they still
-- ask for, as H-DRF does, within one job.
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;
SET gangsched.min_runtime = 0;
SET gangsched.fair_preemption_delay = 0;
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;

CREATE FUNCTION pg_temp.leaves() RETURNS text[]
LANGUAGE sql AS $$
    SELECT ARRAY(SELECT t.name FROM gangsched.teams t
                  WHERE NOT EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = t.id) ORDER BY t.id) $$;

-- A random tree on 40 nodes of 8 GPUs and `cpus` CPUs (after a fresh
-- extension); returns how many leaves it has.
CREATE FUNCTION pg_temp.tree(seed float8, cpus int DEFAULT 64) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    i int; k int; m int;
    kids int;
    grandkids int;
BEGIN
    SET LOCAL client_min_messages = warning;
    DROP EXTENSION IF EXISTS gangsched CASCADE;
    CREATE EXTENSION gangsched CASCADE;
    PERFORM setseed(seed);
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('main', 'reserved');
    PERFORM gangsched.add_node('n' || x, 'main', ('r' || (x / 10))::ltree, cpus, 512, 100, 8, NULL, NULL)
       FROM generate_series(1, 40) x;
    FOR i IN 1 .. 2 + floor(random() * 2)::int LOOP
        PERFORM gangsched.add_team('t' || i, 1 + floor(random() * 4)::int);
        kids := floor(random() * 4)::int;     -- 0: a leaf at the top
        FOR k IN 1 .. kids LOOP
            PERFORM gangsched.add_team('t' || i || '.' || k, 1 + floor(random() * 4)::int, 't' || i);
            grandkids := CASE WHEN random() < 0.4 THEN 2 + floor(random() * 2)::int ELSE 0 END;
            FOR m IN 1 .. grandkids LOOP
                PERFORM gangsched.add_team('t' || i || '.' || k || '.' || m, 1 + floor(random() * 4)::int,
                                           't' || i || '.' || k);
            END LOOP;
        END LOOP;
    END LOOP;
    RETURN cardinality(pg_temp.leaves());
END $$;

-- Demands of the given leaves: one in four wants little (5..40 GPUs, so
-- that some subtrees are satisfied below their weight's part), the rest
-- 60..260. Returns the GPUs asked for.
CREATE FUNCTION pg_temp.demand(leaves text[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    name text;
    d int;
    total bigint := 0;
BEGIN
    FOREACH name IN ARRAY leaves LOOP
        d := CASE WHEN random() < 0.25 THEN 5 + floor(random() * 36)::int ELSE 60 + floor(random() * 200)::int END;
        PERFORM gangsched.submit(name, 1, 1) FROM generate_series(1, d);
        total := total + d;
    END LOOP;
    RETURN total;
END $$;

-- Rounds with victims released between them, until a round places and
-- preempts nothing (at most n rounds); returns the rounds run.
CREATE FUNCTION pg_temp.settle(n int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    i int;
    r record;
BEGIN
    FOR i IN 1 .. n LOOP
        SELECT * INTO r FROM gangsched.run_round();
        PERFORM gangsched.job_released(g.id) FROM gangsched.gangs g WHERE g.state = 'preempting';
        IF r.placed = 0 AND r.preempted = 0 THEN
            RETURN i;
        END IF;
    END LOOP;
    RETURN n;
END $$;

-- GPUs the top-level subtrees keep back from everyone outside them: a
-- team's unlent idle nominal quota (nominal less lending limit less use),
-- or the sum of what its children keep back when larger (deepest first).
CREATE FUNCTION pg_temp.kept() RETURNS numeric
LANGUAGE plpgsql AS $$
DECLARE
    t record;
    h jsonb := '{}';    -- team id -> its children's sum so far
    own numeric;
    total numeric := 0;
BEGIN
    FOR t IN SELECT x.id, x.parent_id, s.nominal_gpus AS n, s.lending_limit_gpus AS l, COALESCE(s.used_gpus, 0) AS u
               FROM gangsched.teams x JOIN gangsched.team_shares s ON s.team = x.name
              ORDER BY s.depth DESC, x.id LOOP
        own := CASE WHEN t.n IS NOT NULL AND t.l IS NOT NULL THEN greatest(0, t.n - t.l - t.u) ELSE 0 END;
        own := greatest(own, COALESCE((h ->> t.id::text)::numeric, 0));
        IF t.parent_id IS NULL THEN
            total := total + own;
        ELSE
            h := h || jsonb_build_object(t.parent_id::text, COALESCE((h ->> t.parent_id::text)::numeric, 0) + own);
        END IF;
    END LOOP;
    RETURN total;
END $$;

-- Every team's subtree use against its fair_share: teams, inner teams,
-- teams off by more than one job, the largest gap in jobs (2 decimals),
-- and whether the cluster is full (but for what is kept back) or all
-- demand placed.
CREATE FUNCTION pg_temp.check(demand bigint, tol numeric DEFAULT 1)
RETURNS TABLE (teams bigint, inner_teams bigint, violations bigint, max_gap_jobs numeric, full_or_done bool)
LANGUAGE sql AS $$
    WITH s AS (
        SELECT t.name, t.id, COALESCE(ts.used_gpus, 0) AS used, COALESCE(ts.fair_share, 0) AS fair
          FROM gangsched.teams t LEFT JOIN gangsched.team_shares ts ON ts.team = t.name),
    gap AS (SELECT s.*, abs(s.used - s.fair * 320) AS gap FROM s)
    SELECT count(*),
           count(*) FILTER (WHERE EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = gap.id)),
           count(*) FILTER (WHERE gap > tol + 320 * 0.00005 + 1e-9),
           round(max(gap), 2),
           (SELECT sum(g.gpus * g.workers) FROM gangsched.gangs g WHERE g.state IN ('placed', 'running'))
               IN (320 - pg_temp.kept(), demand)
      FROM gap $$;

/* Part 1: every leaf at once, one round (the order) */
SELECT pg_temp.tree(0.21) AS leaves;
SELECT pg_temp.demand(pg_temp.leaves()) AS demand \gset
SELECT considered > 0 AS ran FROM gangsched.run_round();
SELECT * FROM pg_temp.check(:demand);
SELECT * FROM gangsched.check_invariants();

SELECT pg_temp.tree(-0.47) AS leaves;
SELECT pg_temp.demand(pg_temp.leaves()) AS demand \gset
SELECT considered > 0 AS ran FROM gangsched.run_round();
SELECT * FROM pg_temp.check(:demand);
SELECT * FROM gangsched.check_invariants();

SELECT pg_temp.tree(0.83) AS leaves;
SELECT pg_temp.demand(pg_temp.leaves()) AS demand \gset
SELECT considered > 0 AS ran FROM gangsched.run_round();
SELECT * FROM pg_temp.check(:demand);
SELECT * FROM gangsched.check_invariants();

/* Part 2: late leaves take their fair share back by preemption */
SET gangsched.preemption = off;
SELECT pg_temp.tree(0.36) AS leaves;
SELECT pg_temp.demand(l[1:cardinality(l) / 2]) AS early FROM pg_temp.leaves() l \gset
SELECT pg_temp.settle(3) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.demand(l[cardinality(l) / 2 + 1:]) AS late FROM pg_temp.leaves() l \gset
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.check(:early + :late);
SELECT * FROM gangsched.check_invariants();

SET gangsched.preemption = off;
SELECT pg_temp.tree(-0.62) AS leaves;
SELECT pg_temp.demand(l[1:cardinality(l) / 2]) AS early FROM pg_temp.leaves() l \gset
SELECT pg_temp.settle(3) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.demand(l[cardinality(l) / 2 + 1:]) AS late FROM pg_temp.leaves() l \gset
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.check(:early + :late);
SELECT * FROM gangsched.check_invariants();

/* Part 3: two resources (GPU leaves and CPU-only leaves) */

-- Demands as pg_temp.demand, each leaf asking for GPUs or (two in five)
-- for CPUs only, in 8-CPU jobs.
CREATE FUNCTION pg_temp.demand2(leaves text[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    name text;
    d int;
    cpu bool;
    total bigint := 0;
BEGIN
    FOREACH name IN ARRAY leaves LOOP
        cpu := random() < 0.4;
        d := CASE WHEN random() < 0.25 THEN 5 + floor(random() * 36)::int ELSE 60 + floor(random() * 200)::int END;
        IF cpu THEN
            PERFORM gangsched.submit(name, 1, 0, 8) FROM generate_series(1, d);
        ELSE
            PERFORM gangsched.submit(name, 1, 1) FROM generate_series(1, d);
        END IF;
        total := total + d;
    END LOOP;
    RETURN total;
END $$;

-- Every team's subtree use of GPUs and CPUs against its H-DRF allocation:
-- teams, teams off by more than tol jobs in either resource, the largest
-- gap in jobs, and whether GPUs and CPUs were both used up (some leaf of
-- each kind asking for more than it got).
CREATE FUNCTION pg_temp.check2(tol numeric DEFAULT 2)
RETURNS TABLE (teams bigint, violations bigint, max_gap_jobs numeric, both_full bool)
LANGUAGE sql AS $$
    WITH u AS (
        SELECT t.id, COALESCE(sum(ts.used_gpus), 0) AS gpus, COALESCE(sum(ts.used_cpus), 0) AS cpus
          FROM gangsched.teams t LEFT JOIN gangsched.team_shares ts ON ts.team = t.name GROUP BY t.id),
    gap AS (
        SELECT GREATEST(abs(u.gpus - f.gpus), abs(u.cpus - f.cpus) / 8) AS gap
          FROM u JOIN gangsched._fair_shares() f ON f.team_id = u.id)
    SELECT count(*), count(*) FILTER (WHERE gap > tol + 1e-6), round(max(gap)::numeric, 2),
           (SELECT sum(g.gpus * g.workers) = 320 AND sum(g.cpus * g.workers) > 640 - 8
              FROM gangsched.gangs g WHERE g.state IN ('placed', 'running'))
      FROM gap $$;

SELECT pg_temp.tree(-0.81, 16) AS leaves;
SELECT pg_temp.demand2(pg_temp.leaves()) > 0 AS asked;
SELECT considered > 0 AS ran FROM gangsched.run_round();
SELECT * FROM pg_temp.check2();
SELECT * FROM gangsched.check_invariants();

SELECT pg_temp.tree(0.55, 16) AS leaves;
SELECT pg_temp.demand2(pg_temp.leaves()) > 0 AS asked;
SELECT considered > 0 AS ran FROM gangsched.run_round();
SELECT * FROM pg_temp.check2();
SELECT * FROM gangsched.check_invariants();

SELECT pg_temp.tree(0.44, 16) AS leaves;
SELECT pg_temp.demand2(pg_temp.leaves()) > 0 AS asked;
SELECT considered > 0 AS ran FROM gangsched.run_round();
SELECT * FROM pg_temp.check2();
SELECT * FROM gangsched.check_invariants();

SET gangsched.preemption = off;
SELECT pg_temp.tree(0.36, 16) AS leaves;
SELECT pg_temp.demand2(l[1:cardinality(l) / 2]) > 0 AS early FROM pg_temp.leaves() l;
SELECT pg_temp.settle(3) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.demand2(l[cardinality(l) / 2 + 1:]) > 0 AS late FROM pg_temp.leaves() l;
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.check2();
SELECT * FROM gangsched.check_invariants();

-- A subtree holding what its active leaves no longer ask for, from an
-- earlier round (preemption off, so only the order decides): a (children
-- a.1 and a.2) and b, weight 1 each, on the 40 nodes of 8 GPUs and 16
-- CPUs. a.1 takes GPUs first; then a.2 and b ask for 100 8-CPU jobs each
-- (80 fit). H-DRF (_fair_shares) splits the CPUs 320/320: a.1 is
-- satisfied (first case) or blocked on the used-up GPUs (second case), so
-- a is compared on the CPUs a.2 still asks for. The order compares so
-- (order.c, member_share): within one job, here exactly. Comparing a's
-- whole dominant share gave a.2 256 CPUs (b 384) in the first case, none
-- in the second (a at share 1 with all the GPUs).
CREATE FUNCTION pg_temp.held_then_cpus(gpu_jobs int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL client_min_messages = warning;
    DROP EXTENSION IF EXISTS gangsched CASCADE;
    CREATE EXTENSION gangsched CASCADE;
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('main', 'reserved');
    PERFORM gangsched.add_node('n' || x, 'main', ('r' || (x / 10))::ltree, 16, 512, 100, 8, NULL, NULL)
       FROM generate_series(1, 40) x;
    PERFORM gangsched.add_team('a', 1), gangsched.add_team('b', 1);
    PERFORM gangsched.add_team('a.1', 1, 'a'), gangsched.add_team('a.2', 1, 'a');
    PERFORM gangsched.submit('a.1', 1, 1) FROM generate_series(1, gpu_jobs);
    PERFORM gangsched.run_round();
    PERFORM gangsched.submit(t, 1, 0, 8) FROM unnest(ARRAY['a.2', 'b']) t, generate_series(1, 100);
END $$;

SET gangsched.preemption = off;
SELECT pg_temp.held_then_cpus(192);
SELECT placed FROM gangsched.run_round();
SELECT team, used_gpus, used_cpus FROM gangsched.team_shares ORDER BY team;
SELECT * FROM pg_temp.check2(1);
SELECT * FROM gangsched.check_invariants();

SELECT pg_temp.held_then_cpus(400);
SELECT placed FROM gangsched.run_round();
SELECT team, used_gpus, used_cpus FROM gangsched.team_shares ORDER BY team;
SELECT * FROM pg_temp.check2(1);
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = on;

/* Part 4: random quotas (floors, lending limits, borrowing limits) */

-- Random nominal quotas on about half of the teams, parents before
-- children, each carved out of what its nearest ancestor with a quota
-- (or the cluster's 320 GPUs) has left: up to half of it. One in three
-- quotas gets a lending limit below its nominal, one in five a borrowing
-- limit. The fair share is then the quota model's (floors up to demand,
-- kept idle quota, caps) and the rounds, guaranteed work first, reclaim
-- within nominal quotas and fair-share preemption, must reach it within
-- one job after one round, and within two jobs after late leaves: with
-- quotas the fair allocations are seldom whole jobs, and preemption's
-- hysteresis moves a gang only from a side that stays at or above its
-- allocation, so a team can stay short of its allocation by the sum of
-- its siblings' fractions above theirs (1.49 jobs once in the last tree
-- without lending limits, below two siblings 0.33 and 0.68 of a job above
-- theirs). With late leaves,
-- once early borrowers fill the cluster but for what others keep back, a
-- late leaf may not borrow the free capacity; below its fair share it
-- still preempts by fair share (the plan leaves the kept capacity idle).
CREATE FUNCTION pg_temp.quotas(lend bool DEFAULT true) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t record;
    a int;
    q int;
    n int := 0;
    left_of jsonb := '{"0": 320}';
BEGIN
    FOR t IN SELECT id, name, parent_id FROM gangsched.teams ORDER BY id LOOP
        a := 0;     -- the nearest ancestor with a quota, 0: the cluster
        FOR a IN WITH RECURSIVE up(id, parent_id, d) AS (
                     SELECT id, parent_id, 0 FROM gangsched.teams WHERE id = t.parent_id
                     UNION ALL SELECT x.id, x.parent_id, up.d + 1 FROM gangsched.teams x JOIN up ON x.id = up.parent_id)
                 SELECT COALESCE((SELECT id FROM up WHERE left_of ? id::text ORDER BY d LIMIT 1), 0) LOOP
        END LOOP;
        IF random() < 0.5 THEN
            q := floor(random() * (left_of ->> a::text)::int / 2)::int;
            PERFORM gangsched.set_quota(t.name, 'main', q,
                        lending_limit_gpus => CASE WHEN random() < 0.33 AND lend THEN floor(random() * q)::int END,
                        borrowing_limit_gpus => CASE WHEN random() < 0.2 THEN 20 + floor(random() * 100)::int END);
            left_of := left_of || jsonb_build_object(a::text, (left_of ->> a::text)::int - q, t.id::text, q);
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END $$;

SELECT pg_temp.tree(0.12) AS leaves;
SELECT pg_temp.quotas() > 0 AS quotas;
SELECT pg_temp.demand(pg_temp.leaves()) AS demand \gset
SELECT pg_temp.settle(5) > 0 AS ran;
SELECT * FROM pg_temp.check(:demand);
SELECT * FROM gangsched.check_invariants();

SELECT pg_temp.tree(-0.29) AS leaves;
SELECT pg_temp.quotas() > 0 AS quotas;
SELECT pg_temp.demand(pg_temp.leaves()) AS demand \gset
SELECT pg_temp.settle(5) > 0 AS ran;
SELECT * FROM pg_temp.check(:demand);
SELECT * FROM gangsched.check_invariants();

SET gangsched.preemption = off;
SELECT pg_temp.tree(0.67) AS leaves;
SELECT pg_temp.quotas() > 0 AS quotas;
SELECT pg_temp.demand(l[1:cardinality(l) / 2]) AS early FROM pg_temp.leaves() l \gset
SELECT pg_temp.settle(3) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.demand(l[cardinality(l) / 2 + 1:]) AS late FROM pg_temp.leaves() l \gset
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.check(:early + :late, 2);
SELECT * FROM gangsched.check_invariants();

SET gangsched.preemption = off;
SELECT pg_temp.tree(-0.74) AS leaves;
SELECT pg_temp.quotas() > 0 AS quotas;
SELECT pg_temp.demand(l[1:cardinality(l) / 2]) AS early FROM pg_temp.leaves() l \gset
SELECT pg_temp.settle(3) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.demand(l[cardinality(l) / 2 + 1:]) AS late FROM pg_temp.leaves() l \gset
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.check(:early + :late, 2);
SELECT * FROM gangsched.check_invariants();

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
