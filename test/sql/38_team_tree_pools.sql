-- Team trees: quotas count per pool in team_shares.fair_share and in the
-- rounds' fair allocations (gs_tree_fair_shares, src/fair.c; docs/
-- fairness.md, "Quotas in the fair share"). A team's nominal quota in a
-- pool is a floor only as far as its demand that may use that pool (its
-- use there plus its pending jobs eligible for it) reaches, and idle quota
-- it does not lend in a pool its demand may not use stays idle for every
-- team. Two pools of 60 GPUs (15 nodes of 4), 1-GPU jobs; the leaves sit
-- under a top-level team all (no quota) where no other tree is drawn, so
-- that the rounds use the tree's fair allocations; each scenario
-- shows the fair allocation (fair_gpus, from _fair_shares()), checks that
-- the rounds reach it with fair-share preemption (victims released as
-- their agents would confirm), and ends with no invariant violated.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
\set SHOW_CONTEXT never
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;
SET gangsched.min_runtime = 0;
SET gangsched.fair_preemption_delay = 0;

-- pools a and b (reserved), n nodes of 4 GPUs each (after a fresh extension)
CREATE FUNCTION pg_temp.fresh(n int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL client_min_messages = warning;
    DROP EXTENSION IF EXISTS gangsched CASCADE;
    CREATE EXTENSION gangsched CASCADE;
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('a', 'reserved');
    PERFORM gangsched.add_pool('b', 'reserved');
    PERFORM gangsched.add_node('a' || i, 'a', ('ra' || (i / 16))::ltree, 64, 512, 100, 4, NULL, NULL)
       FROM generate_series(1, n) i;
    PERFORM gangsched.add_node('b' || i, 'b', ('rb' || (i / 16))::ltree, 64, 512, 100, 4, NULL, NULL)
       FROM generate_series(1, n) i;
END $$;
-- n 1-GPU jobs of the team, in the pool (NULL: any)
CREATE FUNCTION pg_temp.jobs(team text, n int, pool text DEFAULT NULL) RETURNS bigint
LANGUAGE sql AS $$ SELECT count(gangsched.submit(team, 1, 1, pool => pool)) FROM generate_series(1, n) $$;
-- every team's fair allocation of GPUs and its fair share (_fair_shares())
CREATE FUNCTION pg_temp.shares() RETURNS TABLE (team text, fair_gpus numeric, fair_share numeric)
LANGUAGE sql AS $$
    SELECT t.name, round(f.gpus::numeric, 2), round(f.fair_share::numeric, 4)
      FROM gangsched._fair_shares() f JOIN gangsched.teams t ON t.id = f.team_id ORDER BY 1 $$;
-- GPUs each team holds in each pool
CREATE FUNCTION pg_temp.by_pool() RETURNS TABLE (team text, pool text, gpus numeric)
LANGUAGE sql AS $$
    SELECT t.name, p.name, sum(a.gpus)
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
      JOIN gangsched.pools p ON p.id = n.pool_id JOIN gangsched.teams t ON t.id = a.team_id
     WHERE upper_inf(a.during)
     GROUP BY 1, 2 ORDER BY 1, 2 $$;
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
-- per team (path order): GPUs its subtree holds (team_shares, over both
-- pools), of them borrowed, its fair allocation of GPUs and fair_share,
-- and whether it holds its fair allocation (within one job)
CREATE FUNCTION pg_temp.fair() RETURNS TABLE (path text, used_gpus numeric, borrowed_gpus numeric, fair_gpus numeric,
                                              fair_share numeric, at_fair bool)
LANGUAGE sql AS $$
    SELECT COALESCE(s.path::text, s.team), sum(s.used_gpus), sum(s.borrowed_gpus), round(f.gpus::numeric, 2),
           max(s.fair_share), abs(sum(s.used_gpus) - f.gpus) <= 1 + 1e-9
      FROM gangsched.team_shares s JOIN gangsched.teams t ON t.name = s.team
      JOIN gangsched._fair_shares() f ON f.team_id = t.id
     GROUP BY s.path, s.team, f.gpus
     ORDER BY 1 $$;

/* ================================================================== */
/* 1. A nominal quota in a pool the team's jobs may not use            */
/* ================================================================== */

-- l (1) has nominal 40 in pool a and no quota in b; o (3) has no quota.
-- o's 100 jobs may run anywhere, l's 100 only in b. Counted over both
-- pools l's 40 would be a floor (l 40, o 80), but none of l's jobs may
-- use pool a: no floor, l and o split 1:3, l 30 (in b) and o 90.
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('all', 1);
SELECT gangsched.add_team('l', 1, 'all'), gangsched.add_team('o', 3, 'all');
SELECT gangsched.set_quota('l', 'a', 40);
SELECT pg_temp.jobs('o', 100);
SELECT pg_temp.settle(5) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.jobs('l', 100, 'b');
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

-- In a tree: org (1) has l (nominal 40 in a, jobs only in b) and f (no
-- quota); o (1) is a top-level leaf. org and o split 60 / 60, l and f
-- 30 / 30 inside org (not l 40 and f 20).
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('org', 1), gangsched.add_team('o', 1);
SELECT gangsched.add_team('l', 1, 'org'), gangsched.add_team('f', 1, 'org');
SELECT gangsched.set_quota('l', 'a', 40);
SET gangsched.preemption = on;
SELECT pg_temp.jobs('l', 100, 'b'), pg_temp.jobs('f', 100), pg_temp.jobs('o', 100);
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

/* ================================================================== */
/* 2. Quotas in both pools                                             */
/* ================================================================== */

-- m (1) has nominal 20 in a and 20 in b; o (5) has no quota. With m's
-- jobs free to run in either pool its floor is 40 (20 + 20): m 40, o 80
-- (weights alone: m 20).
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('all', 1);
SELECT gangsched.add_team('m', 1, 'all'), gangsched.add_team('o', 5, 'all');
SELECT gangsched.set_quota('m', 'a', 20), gangsched.set_quota('m', 'b', 20);
SELECT pg_temp.jobs('o', 100);
SELECT pg_temp.settle(5) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.jobs('m', 100);
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

-- The same with 5 of m's jobs only for a and 100 only for b: its quota in
-- a is a floor for 5 GPUs, in b for 20: m 25, o 95.
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('all', 1);
SELECT gangsched.add_team('m', 1, 'all'), gangsched.add_team('o', 5, 'all');
SELECT gangsched.set_quota('m', 'a', 20), gangsched.set_quota('m', 'b', 20);
SELECT pg_temp.jobs('o', 100);
SELECT pg_temp.settle(5) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.jobs('m', 5, 'a'), pg_temp.jobs('m', 100, 'b');
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

/* ================================================================== */
/* 3. A lending limit in the second pool                               */
/* ================================================================== */

-- h (1) has nominal 40 in b with lending limit 0; o (3) has no quota. h
-- idle: it keeps its 40 in b back, o gets the other 80. Then h asks for
-- 60 GPUs in pool a: its quota in b is no floor for them, and it stays
-- idle (h does not lend it and its jobs may not use it): 80 GPUs to
-- share 1:3, h 20 and o 60 (counted over both pools: h 40, o 80, more
-- than o can hold).
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('all', 1);
SELECT gangsched.add_team('h', 1, 'all'), gangsched.add_team('o', 3, 'all');
SELECT gangsched.set_quota('h', 'b', 40, lending_limit_gpus => 0);
SELECT pg_temp.jobs('o', 100);
SELECT pg_temp.settle(5) AS rounds;
SELECT * FROM pg_temp.fair();
SET gangsched.preemption = on;
SELECT pg_temp.jobs('h', 60, 'a');
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT DISTINCT team, reason FROM gangsched.jobs WHERE state = 'pending' ORDER BY team;
SELECT reason, detail FROM gangsched.why_pending((SELECT min(job) FROM gangsched.jobs WHERE state = 'pending' AND team = 'h'));
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

/* ================================================================== */
/* 4. Nested teams keeping quota back in different pools               */
/* ================================================================== */

-- P (1) has nominal 40 in a with lending limit 0 and 40 in b (no limit:
-- all lent); its child c1 has nominal 40 in b with lending limit 0 and no
-- jobs; f, P's other child, has no quota. The rounds keep back pool by
-- pool: in a P's idle 40, in b the larger of P's own (nothing: it lends
-- all) and c1's 40, so 80 GPUs stay idle while P's subtree asks for
-- nothing. Summed over the pools first (P's own 40 against its children's
-- 40) only 40 would be, and the fair share would promise 80 that the
-- teams outside P cannot hold. o and o2 (1 each, 100 jobs anywhere; o2
-- first) share the 40 left: 20 each (o2 releases 20 to o).
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('P', 1), gangsched.add_team('o', 1), gangsched.add_team('o2', 1);
SELECT gangsched.add_team('c1', 1, 'P'), gangsched.add_team('f', 1, 'P');
SELECT gangsched.set_quota('P', 'a', 40, lending_limit_gpus => 0), gangsched.set_quota('P', 'b', 40);
SELECT gangsched.set_quota('c1', 'b', 40, lending_limit_gpus => 0);
SELECT pg_temp.jobs('o2', 100);
SELECT pg_temp.settle(5) AS rounds;
SELECT * FROM pg_temp.by_pool();
SET gangsched.preemption = on;
SELECT pg_temp.jobs('o', 100);
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

-- The same P with f asking for 10 GPUs in pool a: P keeps back 30 in a
-- (40 less f's 10) and c1's 40 in b, 70 in all; o and o2 share the 40
-- left: 20 each (summed over the pools first: 40 kept back, o and o2 35
-- each, which they cannot hold).
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('P', 1), gangsched.add_team('o', 1), gangsched.add_team('o2', 1);
SELECT gangsched.add_team('c1', 1, 'P'), gangsched.add_team('f', 1, 'P');
SELECT gangsched.set_quota('P', 'a', 40, lending_limit_gpus => 0), gangsched.set_quota('P', 'b', 40);
SELECT gangsched.set_quota('c1', 'b', 40, lending_limit_gpus => 0);
SELECT pg_temp.jobs('o2', 100);
SELECT pg_temp.settle(5) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.jobs('o', 100), pg_temp.jobs('f', 10, 'a');
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

-- The same P with c1 asking for 40 GPUs in any pool: wherever they run,
-- 40 stay kept back (c1's jobs in a: c1's 40 in b; in b: P's 40 in a;
-- split: 20 and 20), so o and o2 share 40 GPUs, 20 each, before c1's jobs
-- are placed too (both lower bounds on their own, P's and c1's idle
-- quota less their pool demands, would count nothing kept back).
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('P', 1), gangsched.add_team('o', 1), gangsched.add_team('o2', 1);
SELECT gangsched.add_team('c1', 1, 'P'), gangsched.add_team('f', 1, 'P');
SELECT gangsched.set_quota('P', 'a', 40, lending_limit_gpus => 0), gangsched.set_quota('P', 'b', 40);
SELECT gangsched.set_quota('c1', 'b', 40, lending_limit_gpus => 0);
SELECT pg_temp.jobs('o2', 100);
SELECT pg_temp.settle(5) AS rounds;
SET gangsched.preemption = on;
SELECT pg_temp.jobs('o', 100), pg_temp.jobs('c1', 40);
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

-- Inside P: f asks for 100 GPUs in pool b only, o (1) for 100 anywhere.
-- For f, P's idle 40 in a (a pool f's jobs may not use) and c1's 40 in b
-- (off f's path) stay idle in different pools, 80 in all; for o, P keeps
-- back 80 as above. 40 GPUs to share: f 20 (in b) and o 20 (in a).
-- Summed over the pools first, f and o would each count 40 kept back and
-- get 40, which f, with 20 GPUs of pool b free, cannot hold.
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('P', 1), gangsched.add_team('o', 1);
SELECT gangsched.add_team('c1', 1, 'P'), gangsched.add_team('f', 1, 'P');
SELECT gangsched.set_quota('P', 'a', 40, lending_limit_gpus => 0), gangsched.set_quota('P', 'b', 40);
SELECT gangsched.set_quota('c1', 'b', 40, lending_limit_gpus => 0);
SELECT pg_temp.jobs('o', 100);
SELECT pg_temp.settle(5) AS rounds;
SELECT * FROM pg_temp.by_pool();
SET gangsched.preemption = on;
SELECT pg_temp.jobs('f', 100, 'b');
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

-- The same with q (1), a top-level team with nominal 20 in a, lending
-- limit 0, and no jobs. For f, pool a stays idle as a whole: P's 40 there
-- (nothing of P's subtree may use a) and q's 20 (off f's path) add up, 60,
-- and c1's 40 in b, 100 in all; for o, P's 80 and q's 20. 20 GPUs (in b)
-- to share: f 10 and o 10 (counting the larger of P's 40 and q's 20 in a
-- for f, f would get 30, which it cannot hold).
SELECT pg_temp.fresh(15);
SELECT gangsched.add_team('P', 1), gangsched.add_team('o', 1), gangsched.add_team('q', 1);
SELECT gangsched.add_team('c1', 1, 'P'), gangsched.add_team('f', 1, 'P');
SELECT gangsched.set_quota('P', 'a', 40, lending_limit_gpus => 0), gangsched.set_quota('P', 'b', 40);
SELECT gangsched.set_quota('c1', 'b', 40, lending_limit_gpus => 0);
SELECT gangsched.set_quota('q', 'a', 20, lending_limit_gpus => 0);
SELECT pg_temp.jobs('o', 100);
SELECT pg_temp.settle(5) AS rounds;
SELECT * FROM pg_temp.by_pool();
SET gangsched.preemption = on;
SELECT pg_temp.jobs('f', 100, 'b');
SELECT * FROM pg_temp.shares();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM pg_temp.by_pool();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
