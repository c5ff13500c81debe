-- Preemption over a whole round (issue 12): later decisions of a round see
-- the earlier ones (victims leave their team's share, preemptors join
-- theirs); the fair-share rule gangsched.fair_preemption converges to the
-- weighted split without swinging past it; victims whose GPUs the preemptor
-- uses win over larger ones; several reclaims of one round take no more
-- victims than they need together; a refused preemption says why.
-- Virtual time throughout; each scenario starts from a fresh extension and
-- ends with check_invariants() empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';
SET gangsched.restart_cost = '1min';

-- n nodes of 8 GPUs in one rack of pool main.
CREATE FUNCTION pg_temp.cluster(n int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('main', 'reserved');
    PERFORM gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80) FROM generate_series(1, n) i;
END $$;

CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, requeued int, note text)
LANGUAGE sql AS $$ SELECT considered, placed, preempted, requeued, note FROM gangsched.run_round() $$;

CREATE FUNCTION pg_temp.start_all() RETURNS void
LANGUAGE sql AS $$
    SELECT count(gangsched.job_started(p.job, p.node))::int * 0
      FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p
      JOIN gangsched.jobs j ON j.job = p.job
     WHERE j.state = 'placed' $$;

CREATE FUNCTION pg_temp.plans() RETURNS TABLE (preemptor text, trigger text, victims text, waits_for text, stranded_gpus numeric)
LANGUAGE sql AS $$
    SELECT g.name, e.detail->>'trigger',
           (SELECT string_agg(v.name, ',' ORDER BY v.name) FROM jsonb_array_elements_text(e.detail->'victims') x(id)
              JOIN gangsched.gangs v ON v.id = x.id::bigint),
           (SELECT string_agg(v.name, ',' ORDER BY v.name) FROM jsonb_array_elements_text(e.detail->'waits_for') x(id)
              JOIN gangsched.gangs v ON v.id = x.id::bigint),
           (e.detail->>'stranded_gpus')::numeric
      FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job
     WHERE e.kind = 'nominated' ORDER BY e.id $$;

-- GPUs each team holds (placed or running), as 'team=n' in team order.
CREATE FUNCTION pg_temp.split() RETURNS text
LANGUAGE sql AS $$
    SELECT string_agg(t.name || '=' || COALESCE((SELECT sum(j.workers * j.gpus) FROM gangsched.jobs j
                                                   WHERE j.team = t.name AND j.state IN ('placed', 'running')), 0),
                      ' ' ORDER BY t.id)
      FROM gangsched.teams t $$;

-- One step of a busy cluster: a round; every victim it chose releases
-- (after a checkpoint), which places their preemptors; every placed gang
-- starts; the clock moves on 20 minutes (past min_runtime, so every running
-- gang may be a victim in the next step).
CREATE FUNCTION pg_temp.step(OUT split text, OUT victims int, OUT preemptions bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v bigint;
BEGIN
    PERFORM gangsched.run_round();
    victims := 0;
    FOR v IN SELECT job FROM gangsched.jobs WHERE state = 'preempting' ORDER BY job LOOP
        PERFORM gangsched.job_released(v, checkpointed => true);
        victims := victims + 1;
    END LOOP;
    PERFORM pg_temp.start_all();
    PERFORM set_config('gangsched.clock_override',
                       (current_setting('gangsched.clock_override')::timestamptz + interval '20 minutes')::text, false);
    split := pg_temp.split();
    SELECT sum(j.preemptions) INTO preemptions FROM gangsched.jobs j;
END $$;

-- n steps, one row each.
CREATE FUNCTION pg_temp.steps(n int) RETURNS TABLE (step int, split text, victims int, preemptions bigint)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. n LOOP
        step := i;
        SELECT s.split, s.victims, s.preemptions INTO split, victims, preemptions FROM pg_temp.step() s;
        RETURN NEXT;
    END LOOP;
END $$;

/* ================================================================== */
/* 1. a late arrival of weight 2 (final_share, the default)            */
/* ================================================================== */
-- b holds all 24 GPUs of three 8-GPU nodes with 24 one-GPU jobs; a, of
-- weight 2, arrives with 24. The weighted fair split is a=16 b=8 (16/2 =
-- 8/1). One round reaches it: each victim counts as leaving b as the round
-- goes on, so the 17th preemption (a at 17/48 against b at 7/24) is not
-- made. 16 preemptions, the distance to the split, and nothing moves after.
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SHOW gangsched.fair_preemption;
SELECT pg_temp.cluster(3);
SELECT gangsched.add_team('a', weight => 2), gangsched.add_team('b');
SELECT count(gangsched.submit('b', 1, 1)) FROM generate_series(1, 24);
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT count(gangsched.submit('a', 1, 1)) FROM generate_series(1, 24);
SELECT * FROM pg_temp.steps(5);
SELECT sum(preemptions) <= 16 AS at_most_16_preemptions,
       bool_and(preemptions <= 1) AS no_job_preempted_twice
  FROM gangsched.jobs;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. the same with equal weights                                      */
/* ================================================================== */
-- Fair split 12/12: 12 preemptions in the first round, none after.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(3);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT count(gangsched.submit('b', 1, 1)) FROM generate_series(1, 24);
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT count(gangsched.submit('a', 1, 1)) FROM generate_series(1, 24);
SELECT * FROM pg_temp.steps(4);
SELECT sum(preemptions) <= 12 AS at_most_12_preemptions FROM gangsched.jobs;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. the two strategies on the case that tells them apart             */
/* ================================================================== */
-- Four 8-GPU nodes, no quotas. a runs one 8-GPU job; b runs a 16-GPU gang
-- (old enough to be a victim) and an 8-GPU gang started 5 minutes ago
-- (younger than min_runtime). a asks for 8 more. The only candidate is the
-- 16-GPU gang:
--  - final_share: a would end at 16/32 = 0.5, b without the gang at 0.25:
--    a would end above b, so it is refused, and why_pending and the events
--    log say so (and that the young gang was spared);
--  - initial_share: a would end at 0.5, below b's 0.75 before the swap, so
--    the gang is preempted: a ends at 16 and b at 8, past the fair split
--    (16/16), and b may not take it back (b with its 16 would be at 0.75,
--    above a's 0.5): the overshoot final_share rules out.
-- The two rules alone: gangsched.fair_preemption_hysteresis (section 8)
-- would refuse the gang under initial_share too (b would end at 8, below
-- its entitled 16).
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.fair_preemption_hysteresis = off;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(4);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.submit('a', 1, 8, name => 'a1'), gangsched.submit('b', 2, 8, name => 'b16');
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 00:55:00+00';
SELECT gangsched.submit('b', 1, 8, name => 'b8');
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'a2');
SELECT placed, preempted FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'a2'));
SELECT reason FROM gangsched.jobs WHERE name = 'a2';
SELECT kind, reason, detail FROM gangsched.events WHERE kind = 'preemption refused' ORDER BY id;
-- a later round with nothing changed does not log it again
SELECT placed, preempted FROM pg_temp.round();
SELECT count(*) AS refused_events FROM gangsched.events WHERE kind = 'preemption refused';
SELECT * FROM gangsched.check_invariants();
-- initial_share on the same position
SET gangsched.fair_preemption = 'initial_share';
SELECT placed, preempted FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT gangsched.job_released((SELECT job FROM gangsched.jobs WHERE name = 'b16'));
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:20:00+00';
SELECT placed, preempted FROM pg_temp.round();
SELECT pg_temp.split();
SELECT * FROM gangsched.check_invariants();
RESET gangsched.fair_preemption;
RESET gangsched.fair_preemption_hysteresis;
-- a bad value is explained
SET gangsched.fair_preemption = 'below';

/* ================================================================== */
/* 4. a 4-GPU need takes a 4-GPU victim, not an 8-GPU one              */
/* ================================================================== */
-- Two 8-GPU nodes. a is entitled to 8 GPUs, b to none: b borrows both
-- nodes with b8 (8 GPUs on n1), b4 and b4young (4 each on n2; b4young
-- younger than min_runtime). b8 checkpointed a minute ago, b4 never: by
-- lost work alone b8 is the cheaper victim (8 × 60 s + 8 × 60 s against
-- 4 × 3600 s + 4 × 60 s). a's 4-GPU job reclaims: b4 is chosen, whose 4
-- GPUs it uses, rather than b8, which would leave 4 GPUs idle.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8);
SELECT gangsched.submit('b', 1, 8, name => 'b8'), gangsched.submit('b', 1, 4, name => 'b4');
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 00:55:00+00';
SELECT gangsched.submit('b', 1, 4, name => 'b4young');
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.job_checkpointed(job, '2030-01-01 00:59:00+00') FROM gangsched.jobs WHERE name = 'b8';
SELECT gangsched.submit('a', 1, 4, name => 'a4');
SELECT placed, preempted FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT gangsched.job_released((SELECT job FROM gangsched.jobs WHERE name = 'b4'));
SELECT name, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5. several reclaims in one round: the fewest victims together       */
/* ================================================================== */
-- Two 8-GPU nodes, b borrows both with two 8-GPU gangs; a, entitled to 8,
-- submits two 4-GPU jobs at once. The first takes one of b's gangs and uses
-- 4 of its GPUs; the second waits for the other 4 of that same gang instead
-- of preempting b's second gang: one victim for both, no GPU stranded.
-- Its release places both.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8);
SELECT gangsched.submit('b', 1, 8, name => 'bx'), gangsched.submit('b', 1, 8, name => 'by');
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 4, name => 'a4-1'), gangsched.submit('a', 1, 4, name => 'a4-2');
SELECT placed, preempted FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT name, state, reason FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'a4-2'));
SELECT * FROM gangsched.check_invariants();
SET gangsched.clock_override = '2030-01-01 01:00:30+00';
SELECT gangsched.job_released((SELECT job FROM gangsched.jobs WHERE state = 'preempting'));
SELECT name, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT j.name, n.name AS node, count(*) AS gpus
  FROM gangsched.placements p JOIN gangsched.jobs j ON j.job = p.job JOIN gangsched.nodes n ON n.name = p.node
 GROUP BY j.name, n.name ORDER BY 1, 2;
SELECT * FROM gangsched.check_invariants();
-- The same when the victim is killed at its deadline instead: the round
-- that kills it places both.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8);
SELECT gangsched.submit('b', 1, 8, name => 'bx'), gangsched.submit('b', 1, 8, name => 'by');
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 4, name => 'a4-1'), gangsched.submit('a', 1, 4, name => 'a4-2');
SELECT placed, preempted FROM pg_temp.round();
SET gangsched.clock_override = '2030-01-01 01:01:00+00';
SELECT placed, preempted, requeued FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5b. a team back within its quota loses nothing                      */
/* ================================================================== */
-- Five 8-GPU nodes; a is entitled to 8 GPUs, b to 16, c to 8 with weight
-- 2. b runs b1 and b2 within its quota and b3 on borrowed capacity; c runs
-- c1 within its quota and c2 borrowed. b1 finishes: b is back within its
-- quota, though b3 stays marked borrowed; c borrows the free node (c3). b
-- now has the highest weighted share (16/40 against c's 24/40/2), so by
-- the victim order alone b3 would go first; but b borrows nothing any
-- more, and a's reclaim takes one of c's gangs.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(5);
SELECT gangsched.add_team('a'), gangsched.add_team('b'), gangsched.add_team('c', weight => 2);
SELECT gangsched.set_quota('a', 'main', 8), gangsched.set_quota('b', 'main', 16), gangsched.set_quota('c', 'main', 8);
SELECT gangsched.submit('b', 1, 8, name => 'b' || i) FROM generate_series(1, 3) i;
SELECT gangsched.submit('c', 1, 8, name => 'c' || i) FROM generate_series(1, 2) i;
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SELECT gangsched.job_finished(job, true) FROM gangsched.jobs WHERE name = 'b1';
SET gangsched.clock_override = '2030-01-01 00:10:00+00';
SELECT gangsched.submit('c', 1, 8, name => 'c3');
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SELECT name, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT team, used_gpus, borrowed_gpus, weight, dominant_share FROM gangsched.team_shares ORDER BY team;
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'a8');
SELECT placed, preempted FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 6. anti-thrash: a reclaimed job does not borrow back what is reclaimed */
/* ================================================================== */
-- Three 8-GPU nodes; a is entitled to all 24 GPUs, b to none. b runs six
-- 4-GPU gangs on borrowed capacity; only b1 is old enough to be a victim.
-- a's 4-GPU job reclaims b1. Then a asks for two 8-GPU jobs (within its
-- quota; b's other gangs are too young to be victims), and two of b's
-- gangs finish, freeing 4 GPUs on two nodes. The first of a's jobs gets
-- the starvation guard's reservation; b1 fits the other 4 free GPUs as
-- borrowed work, but a's guaranteed work still waits: b1 would only be
-- reclaimed again, so it waits and says why. Once a's jobs are gone, b1
-- borrows again.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(3);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 24);
SELECT gangsched.submit('b', 1, 4, name => 'b1');
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 00:55:00+00';
SELECT gangsched.submit('b', 1, 4, name => 'b' || i) FROM generate_series(2, 6) i;
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 4, name => 'a4');
SELECT placed, preempted FROM pg_temp.round();
SELECT gangsched.job_released((SELECT job FROM gangsched.jobs WHERE name = 'b1'));
SELECT pg_temp.start_all();
SELECT gangsched.submit('a', 1, 8, name => 'a8x'), gangsched.submit('a', 1, 8, name => 'a8y');
SELECT placed, preempted FROM pg_temp.round();
-- two of b's gangs on different nodes finish
SELECT p.node, string_agg(DISTINCT j.name, ',' ORDER BY j.name) AS jobs
  FROM gangsched.placements p JOIN gangsched.jobs j ON j.job = p.job GROUP BY p.node ORDER BY p.node;
SELECT gangsched.job_finished(min(p.job), true)
  FROM gangsched.placements p JOIN gangsched.jobs j ON j.job = p.job
 WHERE j.team = 'b' AND p.node IN ('n2', 'n3') GROUP BY p.node;
SELECT n.name, n.gpus - COALESCE((SELECT sum(a.gpus) FROM gangsched.allocations a
                                   WHERE a.node_id = n.id AND upper_inf(a.during)), 0) AS free_gpus
  FROM gangsched.nodes n ORDER BY n.name;
SELECT placed, preempted FROM pg_temp.round();
SELECT name, state, reason FROM gangsched.jobs WHERE name IN ('b1', 'a8x', 'a8y') ORDER BY job;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE name IN ('a8x', 'a8y');
SELECT placed, preempted FROM pg_temp.round();
SELECT name, state, borrowed FROM gangsched.jobs WHERE name = 'b1';
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 7. property: several weighted teams converge, no GPU moves twice    */
/* ================================================================== */
-- Seeded random trials on four 8-GPU nodes, one-GPU jobs, no quotas:
-- 2 to 4 teams of weight 1 to 3; the cluster starts full, split at random
-- among one or two of them; every team then has more pending work than the
-- cluster holds. Steps (round, releases, starts) run until two in a row
-- preempt nothing. Each seed runs twice: with
-- gangsched.fair_preemption_hysteresis off (final_share alone) and on (the
-- default: capacity moves only from a team that keeps its entitlement
-- 32 × w_i / Σw to a team below it). Checked:
--  - stable: no team may preempt another any more: under final_share
--    ((x_i + 1) / w_i > (x_j - 1) / w_j for every pair); with hysteresis,
--    for every pair where x_i / w_i is below the fair level L = 32 / Σw and
--    (x_j - 1) / w_j is not, final_share refuses it;
--  - never past the fair split: a team that started at or above its
--    entitlement does not end below it by more than final_share allows
--    (with hysteresis: not below it at all), and no team that gained ends
--    a whole GPU above it;
--  - no oscillation: the preemptions equal the GPUs the gaining teams
--    gained (no GPU was taken back);
--  - no more preemptions than the distance from the starting split to the
--    weighted fair split (32 × w_i / Σw for each team), rounded up.
CREATE FUNCTION pg_temp.trial(seed float8, hysteresis bool)
RETURNS TABLE (weights int[], start int[], final int[], preemptions bigint, distance int,
               stable bool, never_past bool, no_oscillation bool, within_distance bool)
LANGUAGE plpgsql AS $$
DECLARE
    nteams int;
    w int[] := '{}';
    x0 int[] := '{}';
    x int[];
    quiet int := 0;
    k int;
    holders int;
    left_gpus int := 32;
    s record;
    fair float8;
    dist float8 := 0;
    lvl float8;
BEGIN
    PERFORM set_config('gangsched.fair_preemption_hysteresis', hysteresis::text, false);
    PERFORM setseed(seed);
    nteams := 2 + floor(random() * 3)::int;
    holders := 1 + floor(random() * 2)::int;
    PERFORM set_config('gangsched.clock_override', '2030-01-01 00:00:00+00', false);
    PERFORM pg_temp.cluster(4);
    FOR k IN 1 .. nteams LOOP
        w := w || (1 + floor(random() * 3)::int);
        PERFORM gangsched.add_team('t' || k, weight => w[k]);
    END LOOP;
    -- the starting split among the first `holders` teams
    FOR k IN 1 .. nteams LOOP
        IF k > holders THEN
            x0 := x0 || 0;
        ELSIF k = holders THEN
            x0 := x0 || left_gpus;
        ELSE
            x0 := x0 || floor(random() * (left_gpus + 1))::int;
            left_gpus := left_gpus - x0[k];
        END IF;
        IF x0[k] > 0 THEN
            PERFORM gangsched.submit('t' || k, 1, 1) FROM generate_series(1, x0[k]);
        END IF;
    END LOOP;
    PERFORM gangsched.run_round();
    PERFORM pg_temp.start_all();
    PERFORM set_config('gangsched.clock_override', '2030-01-01 01:00:00+00', false);
    FOR k IN 1 .. nteams LOOP
        PERFORM gangsched.submit('t' || k, 1, 1) FROM generate_series(1, 40 - x0[k]);
    END LOOP;
    FOR k IN 1 .. 20 LOOP
        SELECT * INTO s FROM pg_temp.step();
        quiet := CASE WHEN s.victims = 0 THEN quiet + 1 ELSE 0 END;
        EXIT WHEN quiet >= 2;
    END LOOP;
    SELECT array_agg(COALESCE((SELECT count(*) FROM gangsched.jobs j
                                WHERE j.team = 't' || i AND j.state IN ('placed', 'running')), 0)::int ORDER BY i)
      INTO x FROM generate_series(1, nteams) i;
    FOR k IN 1 .. nteams LOOP
        fair := 32.0 * w[k] / (SELECT sum(v) FROM unnest(w) v);
        dist := dist + greatest(fair - x0[k], 0);
    END LOOP;
    weights := w;
    start := x0;
    final := x;
    SELECT COALESCE(sum(j.preemptions), 0) INTO preemptions FROM gangsched.jobs j;
    distance := ceil(dist - 1e-9)::int;
    lvl := 32.0 / (SELECT sum(v) FROM unnest(w) v);
    stable := NOT EXISTS (SELECT FROM generate_series(1, nteams) i, generate_series(1, nteams) j
                           WHERE i <> j AND x[j] > 0
                             AND (x[i] + 1)::float8 / w[i] <= (x[j] - 1)::float8 / w[j] + 1e-12
                             AND (NOT hysteresis OR (x[i]::float8 / w[i] < lvl - 1e-12
                                                     AND (x[j] - 1)::float8 / w[j] >= lvl - 1e-12)));
    never_past := NOT EXISTS (SELECT FROM generate_series(1, nteams) i
                               WHERE (x[i] < x0[i] AND x[i]::float8 / w[i] < lvl - 1e-12
                                      AND (hysteresis OR (x[i] + 1)::float8 / w[i] < lvl - 1e-12))
                                  OR (x[i] > x0[i] AND (x[i] - 1)::float8 / w[i] >= lvl - 1e-12));
    no_oscillation := preemptions = (SELECT sum(greatest(x[i] - x0[i], 0)) FROM generate_series(1, nteams) i);
    within_distance := preemptions <= distance;
    RETURN NEXT;
END $$;
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.11, false);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.11, true);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.23, false);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.23, true);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.37, false);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.37, true);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.52, false);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.52, true);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.68, false);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.68, true);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.81, false);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT * FROM pg_temp.trial(0.81, true);
SELECT * FROM gangsched.check_invariants();

RESET gangsched.fair_preemption_hysteresis;

/* ================================================================== */
/* 8. hysteresis: no preemption inside the dead band around the split */
/* ================================================================== */
-- gangsched.fair_preemption_hysteresis (on by default): a fair-share
-- preemption moves capacity only from a team that keeps at least its
-- entitled share (the round's weighted max-min fair level L, from every
-- team's use plus pending work) to a team below it.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SHOW gangsched.fair_preemption_hysteresis;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
-- Four 8-GPU nodes; teams a, b, c of weight 2 and d of weight 1 hold
-- 10/10/8/4 GPUs and all want more: L = 32/7, entitlements 9.14 (a, b, c)
-- and 4.57 (d). c is below its entitlement, but one GPU from a or b would
-- take that team to 9, below its own: nothing moves. (final_share alone
-- would move one: c at 9/2 = a at 9/2.)
SELECT pg_temp.cluster(4);
SELECT gangsched.add_team('a', weight => 2), gangsched.add_team('b', weight => 2),
       gangsched.add_team('c', weight => 2), gangsched.add_team('d', weight => 1);
SELECT count(gangsched.submit(t, 1, 1)) FROM (VALUES ('a', 10), ('b', 10), ('c', 8), ('d', 4)) v(t, n), generate_series(1, n);
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT count(gangsched.submit(t, 1, 1, name => t || '_more')) FROM unnest(ARRAY['a', 'b', 'c', 'd']) t, generate_series(1, 4);
SELECT placed, preempted FROM pg_temp.round();
SELECT pg_temp.split();
SELECT DISTINCT team, reason FROM gangsched.jobs WHERE state = 'pending' AND team IN ('c', 'd') ORDER BY team;
SELECT w.reason, w.detail FROM gangsched.why_pending((SELECT min(job) FROM gangsched.jobs WHERE team = 'c' AND state = 'pending')) w
 WHERE w.reason = 'preemption refused';
SELECT count(*) AS refused_events FROM gangsched.events WHERE kind = 'preemption refused' AND team_id = (SELECT id FROM gangsched.teams WHERE name = 'c');
SELECT * FROM gangsched.check_invariants();
-- off: final_share alone moves one GPU (to c), then nothing more.
SET gangsched.fair_preemption_hysteresis = off;
SELECT s.split, s.victims FROM pg_temp.step() s;
SELECT s.split, s.victims FROM pg_temp.step() s;
SELECT * FROM gangsched.check_invariants();
RESET gangsched.fair_preemption_hysteresis;

-- A team that holds its entitlement already does not preempt for fair
-- share, even from a team above it: three 8-GPU nodes, equal weights; a
-- holds 8, b 12, c 4, and c waits for an 8-GPU gang: L = 8. c's gang may
-- not preempt (final_share: c would end at 12 against b's 4); a's next job
-- may not either (a holds its 8, its entitlement), although b holds more
-- than a (9 <= 11 under final_share).
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(3);
SELECT gangsched.add_team('a'), gangsched.add_team('b'), gangsched.add_team('c');
SELECT count(gangsched.submit(t, 1, 1)) FROM (VALUES ('a', 8), ('b', 12), ('c', 4)) v(t, n), generate_series(1, n);
SELECT placed FROM pg_temp.round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('c', 1, 8, name => 'c8') AS c8 \gset
SELECT gangsched.submit('a', 1, 1, name => 'a9') AS a9 \gset
SELECT placed, preempted FROM pg_temp.round();
SELECT name, state, reason FROM gangsched.jobs WHERE job IN (:c8, :a9) ORDER BY job;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
