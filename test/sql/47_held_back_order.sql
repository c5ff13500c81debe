-- Held-back jobs (issue 15): a preemptible job that may not borrow the
-- free capacity only because it is idle quota another team does not lend
-- (a lending limit) gets its fair-share victim search at its own place in
-- the round's order: in the fair order's second phase at its team's turn
-- (by dominant share), in the priority order at its priority; not after
-- every other candidate of the round, who could take the same victims
-- first (src/schedule.c held_back_turn, src/order.c). 16 GPUs (4 nodes of
-- 4), 1-GPU jobs unless said, victims released as their agents would
-- confirm. Every scenario ends with check_invariants() empty.
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

-- 4 nodes of 4 GPUs in pool main (after a fresh extension)
CREATE FUNCTION pg_temp.fresh() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL client_min_messages = warning;
    DROP EXTENSION IF EXISTS gangsched CASCADE;
    CREATE EXTENSION gangsched CASCADE;
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('main', 'reserved');
    PERFORM gangsched.add_node('n' || i, 'main', 'r1', 64, 512, 100, 4, NULL, NULL)
       FROM generate_series(1, 4) i;
END $$;
CREATE FUNCTION pg_temp.jobs(team text, n int, prio int DEFAULT 0) RETURNS bigint
LANGUAGE sql AS $$ SELECT count(gangsched.submit(team, 1, 1, priority => prio)) FROM generate_series(1, n) $$;
-- One round: who preempted whom (victims' team -> the preemptor's team,
-- gangs); then the victims are released.
CREATE FUNCTION pg_temp.round() RETURNS TABLE (victims text, preemptor text, gangs bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gangsched.run_round();
    RETURN QUERY
        SELECT tv.name, tp.name, count(*)
          FROM gangsched.gangs v JOIN gangsched.gangs p ON p.id = v.preempted_for
          JOIN gangsched.teams tv ON tv.id = v.team_id JOIN gangsched.teams tp ON tp.id = p.team_id
         WHERE v.state = 'preempting' GROUP BY 1, 2 ORDER BY 1, 2;
    PERFORM gangsched.job_released(g.id) FROM gangsched.gangs g WHERE g.state = 'preempting';
END $$;
-- GPUs each team holds (placed or running, with its nominees)
CREATE FUNCTION pg_temp.holds() RETURNS TABLE (team text, gpus numeric, borrowed numeric)
LANGUAGE sql AS $$
    SELECT t.name, COALESCE(sum(g.workers * g.gpus), 0), COALESCE(sum(g.workers * g.gpus) FILTER (WHERE g.borrowed), 0)
      FROM gangsched.teams t LEFT JOIN gangsched.gangs g ON g.team_id = t.id AND g.state IN ('placed', 'running')
     GROUP BY t.name ORDER BY t.name $$;

/* ================================================================== */
/* 1. The lending team's own borrowing job later in the fair order     */
/* ================================================================== */

-- k (nominal 6, lending limit 0) holds 2 and keeps its idle 4 from every
-- other team; v (nominal 9) holds 10, one borrowed. The 4 free GPUs are
-- k's unlent idle quota. Then k asks for a 5-GPU job (beyond its nominal:
-- borrowing, and k may use its own idle quota, so not held back) and a
-- for one GPU (held back by k's lending limit). Both need v's only
-- borrowed gang. The fair order's second phase tries a (share 0) before
-- k (2/16): a's victim search comes first and a gets it; k's job waits.
-- (Before, a's search came after every other candidate: k's job took
-- the victim and a, holding nothing, found none, in every later round.)
SELECT pg_temp.fresh();
SELECT gangsched.add_team('a'), gangsched.add_team('k'), gangsched.add_team('v');
SELECT gangsched.set_quota('k', 'main', 6, lending_limit_gpus => 0);
SELECT gangsched.set_quota('v', 'main', 9);
SELECT pg_temp.jobs('k', 2), pg_temp.jobs('v', 10);
SELECT placed FROM gangsched.run_round();
SELECT * FROM pg_temp.holds();
SET gangsched.preemption = on;
SELECT gangsched.submit('k', 5, 1) > 0 AS k5, pg_temp.jobs('a', 1);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.holds();
SELECT team, reason FROM gangsched.jobs WHERE state = 'pending' ORDER BY job;
SELECT * FROM gangsched.check_invariants();

-- The same under the priority order: a's job has priority 1, k's 0 (and
-- was submitted first); a's search comes at its place, first.
SET gangsched.preemption = off;
SET gangsched.queue_order = priority;
SELECT pg_temp.fresh();
SELECT gangsched.add_team('a'), gangsched.add_team('k'), gangsched.add_team('v');
SELECT gangsched.set_quota('k', 'main', 6, lending_limit_gpus => 0);
SELECT gangsched.set_quota('v', 'main', 9);
SELECT pg_temp.jobs('k', 2), pg_temp.jobs('v', 10);
SELECT placed FROM gangsched.run_round();
SET gangsched.preemption = on;
SELECT gangsched.submit('k', 5, 1) > 0 AS k5, pg_temp.jobs('a', 1, 1);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.holds();
SELECT * FROM gangsched.check_invariants();
RESET gangsched.queue_order;

/* ================================================================== */
/* 2. Two held-back teams: the fair order, not the submit order        */
/* ================================================================== */

-- k (nominal 4, lending limit 0, idle) keeps 4 GPUs from everyone; v
-- (nominal 7) holds 8, one borrowed; b holds 4 (borrowed). a and b then
-- ask for 10 more each, b first. Both are held back (borrowing would use
-- k's idle quota) and both may take v's borrowed gang by fair share; a's
-- team holds the lower share (0 against b's 4/16), so the fair order
-- reaches a first and a gets it. (Before, the held-back searches came at
-- the round's end in submit order: b got it and a, holding nothing, kept
-- waiting, as b, below its entitled share, is no victim.)
SET gangsched.preemption = off;
SELECT pg_temp.fresh();
SELECT gangsched.add_team('a'), gangsched.add_team('b'), gangsched.add_team('k'), gangsched.add_team('v');
SELECT gangsched.set_quota('k', 'main', 4, lending_limit_gpus => 0);
SELECT gangsched.set_quota('v', 'main', 7);
SELECT pg_temp.jobs('b', 4), pg_temp.jobs('v', 8);
SELECT placed FROM gangsched.run_round();
SELECT * FROM pg_temp.holds();
SET gangsched.preemption = on;
SELECT pg_temp.jobs('b', 10), pg_temp.jobs('a', 10);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.holds();
SELECT DISTINCT team, reason FROM gangsched.jobs WHERE state = 'pending' ORDER BY team;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. The same in a tree                                               */
/* ================================================================== */

-- g (1) has a and b; k (nominal 4, lending limit 0, idle) and v (nominal
-- 7) are top-level leaves. As in 2: a and b are held back by k (a
-- subtree off their path); the H-DRF order picks a inside g (share 0
-- against b's 4/16), a takes v's borrowed gang, then b's fourth GPU by
-- fair share inside g (a 2 against b 3; g's allocation is 5: the 12 GPUs
-- k does not keep, less v's floor of 7). One round, two preemptions.
-- (Before: v's gang went to b, whose searches came first in submit order,
-- and b then gave two back to a: three preemptions for the same split.)
SET gangsched.preemption = off;
SELECT pg_temp.fresh();
SELECT gangsched.add_team('g'), gangsched.add_team('k'), gangsched.add_team('v');
SELECT gangsched.add_team('a', 1, 'g'), gangsched.add_team('b', 1, 'g');
SELECT gangsched.set_quota('k', 'main', 4, lending_limit_gpus => 0);
SELECT gangsched.set_quota('v', 'main', 7);
SELECT pg_temp.jobs('b', 4), pg_temp.jobs('v', 8);
SELECT placed FROM gangsched.run_round();
SELECT * FROM pg_temp.holds();
SET gangsched.preemption = on;
SELECT pg_temp.jobs('b', 10), pg_temp.jobs('a', 10);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.holds();
SELECT * FROM gangsched.check_invariants();

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
