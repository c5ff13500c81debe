-- Team trees (issue 15): the quota model in team_shares.fair_share and the
-- rounds' fair allocations (gs_tree_fair_shares, src/fair.c). A nominal
-- quota is a floor up to the team's demand, at every level (a child's
-- carved out of its parent's; a parent's nominal less its children's
-- quotas first for its children without a quota row); what is left is
-- shared by weighted H-DRF among the teams still asking, from their
-- floors; a lending limit keeps the idle nominal it does not lend from
-- every team outside the subtree (siblings included); borrowing limits cap
-- as before. Each scenario shows the fair allocation (fair_gpus, from
-- _fair_shares()) and checks that the rounds reach it, with preemption
-- and virtual time (victims released as their agents would confirm), and
-- ends with no invariant violated. 120 GPUs (30 nodes of 4), 1-GPU jobs.
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

-- n nodes of 4 GPUs in pool main (after a fresh extension)
CREATE FUNCTION pg_temp.fresh(n int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL client_min_messages = warning;
    DROP EXTENSION IF EXISTS gangsched CASCADE;
    CREATE EXTENSION gangsched CASCADE;
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('main', 'reserved');
    PERFORM gangsched.add_node('n' || i, 'main', ('r' || (i / 16))::ltree, 64, 512, 100, 4, NULL, NULL)
       FROM generate_series(1, n) i;
END $$;
CREATE FUNCTION pg_temp.jobs(team text, n int) RETURNS bigint
LANGUAGE sql AS $$ SELECT count(gangsched.submit(team, 1, 1)) FROM generate_series(1, n) $$;
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
-- per team (path order): GPUs its subtree holds, of them borrowed, its
-- fair allocation of GPUs and fair_share, and whether it holds its fair
-- allocation (within one job)
CREATE FUNCTION pg_temp.fair() RETURNS TABLE (path text, used_gpus numeric, borrowed_gpus numeric, fair_gpus numeric,
                                              fair_share numeric, at_fair bool)
LANGUAGE sql AS $$
    SELECT COALESCE(s.path::text, s.team), s.used_gpus, s.borrowed_gpus, round(f.gpus::numeric, 2), s.fair_share,
           abs(s.used_gpus - f.gpus) <= 1 + 1e-9
      FROM gangsched.team_shares s JOIN gangsched.teams t ON t.name = s.team
      JOIN gangsched._fair_shares() f ON f.team_id = t.id
     ORDER BY 1 $$;

/* ================================================================== */
/* 1. A floor with little weight                                       */
/* ================================================================== */

-- Flat: big (weight 9, no quota) and small (weight 1, nominal 40), 100
-- jobs each. Weighted DRF alone gives small 12; its nominal quota is a
-- floor: small 40, big the other 80. The round runs small's 40 as
-- guaranteed work first.
SELECT pg_temp.fresh(30);
SELECT gangsched.add_team('big', 9), gangsched.add_team('small', 1);
SELECT gangsched.set_quota('small', 'main', 40);
SELECT pg_temp.jobs('big', 100), pg_temp.jobs('small', 100);
SELECT pg_temp.settle(5) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM gangsched.check_invariants();

-- In a tree: org (1) has big (9) and small (1, nominal 40); other (1) is
-- a top-level leaf without a quota. org and other split 60 / 60; inside
-- org small keeps its floor of 40 and big gets the rest, 20 (without
-- floors: big 54, small 6). First big and other fill the cluster (60
-- each), then small asks: it reclaims 40 within its nominal (from other,
-- outside org, first), then other takes back from big by fair share.
SELECT pg_temp.fresh(30);
SELECT gangsched.add_team('org', 1), gangsched.add_team('other', 1);
SELECT gangsched.add_team('big', 9, 'org'), gangsched.add_team('small', 1, 'org');
SELECT gangsched.set_quota('small', 'main', 40);
SELECT pg_temp.jobs('big', 100), pg_temp.jobs('other', 100);
SELECT pg_temp.settle(5) AS rounds;
SELECT * FROM pg_temp.fair();
SET gangsched.preemption = on;
SELECT pg_temp.jobs('small', 100);
SELECT * FROM pg_temp.fair();
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

/* ================================================================== */
/* 2. A lending limit keeps capacity from a sibling and an outsider    */
/* ================================================================== */

-- p (1) has x (nominal 40, lending limit 10, idle) and y (no quota); z
-- (1) is a top-level leaf without a quota; y and z ask for 100 each. x
-- lends 10 of its idle 40 and keeps 30, from its sibling y as from z: 90
-- GPUs to share, y 45 and z 45. Then x asks for 40: its floor; p and z
-- split 60 / 60 with x's 40 in p's: y 20, z 60. x reclaims within its
-- nominal (from z first, outside p), then z takes from y by fair share.
SELECT pg_temp.fresh(30);
SELECT gangsched.add_team('p', 1), gangsched.add_team('z', 1);
SELECT gangsched.add_team('x', 1, 'p'), gangsched.add_team('y', 1, 'p');
SELECT gangsched.set_quota('x', 'main', 40, lending_limit_gpus => 10);
SELECT pg_temp.jobs('y', 100), pg_temp.jobs('z', 100);
SELECT pg_temp.settle(5) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT DISTINCT team, reason FROM gangsched.jobs WHERE state = 'pending' ORDER BY team;
-- the same without the lending limit: all 120 lent, 60 / 60
SELECT gangsched.set_quota('x', 'main', 40);
SELECT path, fair_gpus FROM pg_temp.fair();
SELECT gangsched.set_quota('x', 'main', 40, lending_limit_gpus => 10);
SET gangsched.preemption = on;
SELECT pg_temp.jobs('x', 40);
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

/* ================================================================== */
/* 3. Nested floors                                                    */
/* ================================================================== */

-- p (1, nominal 60) has c1 (1, nominal 20), c2 (1, no quota) and c3 (4,
-- nominal 10); q (3) is a top-level leaf without a quota. c1, c2 and c3
-- ask for 100 each, q for 30. Floors: c1 20, c3 10 (carved out of p's
-- 60), c2 the 30 p's nominal leaves over (guaranteed work of a child
-- without a quota row); p holds its 60. q gets its 30; the 30 left go
-- to p, where H-DRF from the floors gives them to c3 (10 / 4 against 20
-- and 30): c1 20, c2 30, c3 40. Then q asks for 70 more: q and p split
-- 1:3 above p's floor of 60, so q 60 and p 60; c3 gives up what it
-- borrowed.
SELECT pg_temp.fresh(30);
SELECT gangsched.add_team('p', 1), gangsched.add_team('q', 3);
SELECT gangsched.add_team('c1', 1, 'p'), gangsched.add_team('c2', 1, 'p'), gangsched.add_team('c3', 4, 'p');
SELECT gangsched.set_quota('p', 'main', 60);
SELECT gangsched.set_quota('c1', 'main', 20);
SELECT gangsched.set_quota('c3', 'main', 10);
SELECT pg_temp.jobs('c1', 100), pg_temp.jobs('c2', 100), pg_temp.jobs('c3', 100), pg_temp.jobs('q', 30);
SELECT pg_temp.settle(5) AS rounds;
SELECT * FROM pg_temp.fair();
SET gangsched.preemption = on;
SELECT pg_temp.jobs('q', 70);
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

/* ================================================================== */
/* 4. A parent's floor less what a child keeps back (the view)         */
/* ================================================================== */

-- p (1, nominal 60) has x (nominal 40, lending limit 10, idle) and y (no
-- quota, 100 jobs); z (3, no quota, 100 jobs) is a top-level leaf. x
-- keeps 30 back from y and z: 90 GPUs to share. p's floor is its nominal
-- less what x keeps back, 30: y 30 (its 20 left over from x's quota as
-- guaranteed work, and x's 10 lent), z the other 60 (by weight alone,
-- 1:3, y would get 22.5; counting x's kept 30 in p's floor, 60). The
-- round's fair order fills the cluster to y 23, z 67, all but x's kept
-- 30: then borrowing would use idle quota x does not lend, so y's jobs
-- may not borrow the free GPUs; below their fair share they still preempt
-- z's borrowed jobs by fair share (the plan leaves x's 30 idle) until y
-- holds 30 and z 60. why_pending says so for y's first job (preemption,
-- fair share), and why y's jobs wait once y holds 30 (quota).
SELECT pg_temp.fresh(30);
SELECT gangsched.add_team('p', 1), gangsched.add_team('z', 3);
SELECT gangsched.add_team('x', 1, 'p'), gangsched.add_team('y', 1, 'p');
SELECT gangsched.set_quota('p', 'main', 60);
SELECT gangsched.set_quota('x', 'main', 40, lending_limit_gpus => 10);
SELECT pg_temp.jobs('y', 100), pg_temp.jobs('z', 100);
SELECT t.name, round(f.gpus::numeric, 2) AS fair_gpus, round(f.fair_share::numeric, 4) AS fair_share
  FROM gangsched._fair_shares() f JOIN gangsched.teams t ON t.id = f.team_id ORDER BY t.name;
SELECT pg_temp.settle(5) AS rounds;
SELECT * FROM pg_temp.fair();
SET gangsched.preemption = on;
SELECT reason, detail FROM gangsched.why_pending((SELECT min(job) FROM gangsched.jobs WHERE state = 'pending' AND team = 'y'));
SELECT pg_temp.settle(20) AS rounds;
SELECT * FROM pg_temp.fair();
SELECT DISTINCT team, reason FROM gangsched.jobs WHERE state = 'pending' ORDER BY team;
SELECT reason, detail FROM gangsched.why_pending((SELECT min(job) FROM gangsched.jobs WHERE state = 'pending' AND team = 'y'));
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
