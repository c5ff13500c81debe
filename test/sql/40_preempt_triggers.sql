-- Preemption triggers and the rules that forbid preemption.
--   reclaim: a job within its team's nominal quota takes back capacity
--            another team borrows;
--   fair share: a borrowing job preempts another team's borrowed gang only
--            if its team's dominant share, with the job, ends at or below
--            the victim team's without its victims (final_share, the
--            default; 46_preempt_fair_round.sql has both rules);
--   priority: within one team, higher priority over lower.
-- Never: a non-preemptible gang, another team's guaranteed work, a gang
-- younger than gangsched.min_runtime, a swap that would not keep the share
-- order, anything with gangsched.preemption = off.
-- Virtual time throughout (gangsched.clock_override); each scenario starts
-- from a fresh extension and ends with check_invariants() empty.
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

-- A fresh inventory: levels (rack), pool main, n nodes of 8 GPUs in rack r1.
CREATE FUNCTION pg_temp.cluster(n int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('main', 'reserved');
    PERFORM gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80) FROM generate_series(1, n) i;
END $$;

-- A round's summary without its duration.
CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, requeued int, note text)
LANGUAGE sql AS $$ SELECT considered, placed, preempted, requeued, note FROM gangsched.run_round() $$;

-- The agent of every node of every placed job confirms it (the job is then
-- running). Returns the jobs that started.
CREATE FUNCTION pg_temp.start_all() RETURNS TABLE (started text)
LANGUAGE sql AS $$
    SELECT string_agg(DISTINCT x.name, ',' ORDER BY x.name)
      FROM (SELECT j.name, gangsched.job_started(p.job, p.node)
              FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p
              JOIN gangsched.jobs j ON j.job = p.job
             WHERE j.state = 'placed') x $$;

-- Jobs by name: state, borrowed, priority, preempt deadline, preemptions.
CREATE FUNCTION pg_temp.jobs() RETURNS TABLE (name text, team text, state text, borrowed bool, priority int,
                                              preempt_deadline timestamptz, preemptions int)
LANGUAGE sql AS $$
    SELECT name, team, state, borrowed, priority, preempt_deadline, preemptions FROM gangsched.jobs ORDER BY job $$;

-- Which jobs hold each node now (holds of nominated jobs in brackets).
CREATE FUNCTION pg_temp.map() RETURNS TABLE (node text, rack text, jobs text)
LANGUAGE sql AS $$
    SELECT n.name, subpath(n.topology, -1)::text,
           COALESCE((SELECT string_agg(DISTINCT g.name, ',') FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
                      WHERE a.node_id = n.id AND upper_inf(a.during)), '')
        || COALESCE((SELECT ' [' || string_agg(DISTINCT g.name, ',') || ']' FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job
                      WHERE h.node_id = n.id), '')
      FROM gangsched.nodes n ORDER BY n.id $$;

-- The plan recorded with each nomination: trigger, victims by name (in the
-- recorded order), and the lost work they cost.
CREATE FUNCTION pg_temp.plans() RETURNS TABLE (preemptor text, trigger text, victims text, lost_gpu_seconds numeric)
LANGUAGE sql AS $$
    SELECT g.name, e.detail->>'trigger',
           (SELECT string_agg(v.name, ',' ORDER BY v.name) FROM jsonb_array_elements_text(e.detail->'victims') x(id)
              JOIN gangsched.gangs v ON v.id = x.id::bigint),
           (e.detail->>'lost_gpu_seconds')::numeric
      FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job
     WHERE e.kind = 'nominated' ORDER BY e.id $$;

/* ================================================================== */
/* 1. reclaim                                                          */
/* ================================================================== */
-- Two 8-GPU nodes. Teams a and b each have a nominal quota of 8 GPUs.
-- b runs b1 within its quota and b2 on a's idle quota (borrowed). Then a
-- wants its 8 GPUs back: b2 is preempted, a1 nominated on b2's node.
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8), gangsched.set_quota('b', 'main', 8);
SELECT gangsched.submit('b', 1, 8, name => 'b1'), gangsched.submit('b', 1, 8, name => 'b2');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SELECT * FROM pg_temp.jobs();
-- an hour later a submits a job within its quota; nothing is free
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'a1');
SELECT * FROM pg_temp.round();
-- b2 (borrowed) is preempting with a grace deadline of one minute; b1
-- (within b's quota) keeps running; a1 is nominated, will be guaranteed work
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.map();
SELECT * FROM pg_temp.plans();
SELECT name, reason FROM gangsched.jobs WHERE name IN ('a1', 'b2') ORDER BY name;
SELECT kind, reason, detail FROM gangsched.events WHERE kind IN ('nominated', 'preempting') ORDER BY id;
SELECT * FROM gangsched.check_invariants();
-- b2 releases: a1 is placed at once, within a's quota
SELECT gangsched.job_released((SELECT job FROM gangsched.jobs WHERE name = 'b2'));
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. fair share                                                       */
/* ================================================================== */
-- No quotas at all (plain DRF: everything runs borrowed). Four 8-GPU
-- nodes; b holds all 32 GPUs (dominant share 1.0). a submits one 8-GPU
-- job: after the swap a would hold 0.25 and b 0.75, so one of b's gangs is
-- preempted (b1: the four are alike in priority, lost work and age).
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(4);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.submit('b', 1, 8, name => 'b' || i) FROM generate_series(1, 4) i;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'a1');
SELECT team, used_gpus, borrowed_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();
-- b1 releases; a1 runs. Now a holds 0.25 and b 0.75.
SELECT gangsched.job_released((SELECT job FROM gangsched.jobs WHERE name = 'b1'));
SELECT * FROM pg_temp.start_all();
SELECT team, used_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;
-- a asks for 8 more: after a swap a would hold 0.5 and b 0.5: level, which
-- final_share allows (a strict "below" would leave a at a third of b's
-- share for ever), so b2 is preempted; the next round preempts nothing
-- more (b at 0.5 may not take back: it would end above a)
SET gangsched.clock_override = '2030-01-01 02:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'a2');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();
-- The same position for a team of weight 2: its share counts half, so
-- after the swap it would hold 0.5 / 2 = 0.25 < b's 0.5, and it may
-- preempt one of b's gangs.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(4);
SELECT gangsched.add_team('w', weight => 2), gangsched.add_team('b');
SELECT gangsched.submit('w', 1, 8, name => 'w1');
SELECT gangsched.submit('b', 1, 8, name => 'b' || i) FROM generate_series(1, 3) i;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('w', 1, 8, name => 'w2');
SELECT team, weight, used_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();

-- The swap is the whole plan: b holds all 32 GPUs and a asks for 24 (three
-- of b's gangs). Each of b's gangs alone would leave b at 0.75, level with
-- a's 0.75, but the three together leave b at 0.25: a would end above b,
-- so nothing is preempted. An 8-GPU job of a (0.25 against 0.75) may.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(4);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.submit('b', 1, 8, name => 'b' || i) FROM generate_series(1, 4) i;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 3, 8, name => 'a24');
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT * FROM pg_temp.plans();
SELECT job, kind, reason FROM gangsched.events WHERE kind = 'preemption refused' ORDER BY id;
SELECT gangsched.cancel((SELECT job FROM gangsched.jobs WHERE name = 'a24'));
SELECT gangsched.submit('a', 1, 8, name => 'a8');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. priority (within one team)                                       */
/* ================================================================== */
-- One team, two 8-GPU nodes full of its priority-0 and priority-5 work. A
-- priority-5 job preempts nothing (equal priority is not enough); a
-- priority-9 job preempts a priority-0 gang, not the priority-5 one.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('t');
SELECT gangsched.set_quota('t', 'main', 16);
SELECT gangsched.submit('t', 1, 8, name => 'low', priority => 0),
       gangsched.submit('t', 1, 8, name => 'mid', priority => 5);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('t', 1, 8, name => 'same', priority => 0);
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT gangsched.cancel((SELECT job FROM gangsched.jobs WHERE name = 'same'));
SELECT gangsched.submit('t', 1, 8, name => 'high', priority => 9);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 4. never a non-preemptible gang                                     */
/* ================================================================== */
-- Same team: np (priority 0, non-preemptible) and p (priority 5,
-- preemptible). A priority-9 job takes p's place, never np's, although np
-- has the lower priority. Once p is gone too, a second priority-9 job
-- waits: the only gang left is non-preemptible.
-- high1 is nominated while p still holds its GPUs, so the round sees the
-- team beyond its quota (borrowed); once p has let go the team holds 16
-- GPUs, its nominal quota, and high1 runs as guaranteed work.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('t');
SELECT gangsched.set_quota('t', 'main', 16);
SELECT gangsched.submit('t', 1, 8, name => 'np', priority => 0, preemptible => false),
       gangsched.submit('t', 1, 8, name => 'p', priority => 5);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('t', 1, 8, name => 'high1', priority => 9);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.plans();
SELECT gangsched.job_released((SELECT job FROM gangsched.jobs WHERE name = 'p'));
SELECT * FROM pg_temp.start_all();
SELECT name, state, borrowed FROM gangsched.jobs WHERE name = 'high1';
SELECT team, nominal_gpus, used_gpus, borrowed_gpus FROM gangsched.team_shares;
SELECT kind, reason FROM gangsched.events WHERE job = (SELECT job FROM gangsched.jobs WHERE name = 'high1') AND kind = 'placed';
-- p is back in the queue (priority 5 < 9 of high1, and np is not a victim)
SET gangsched.clock_override = '2030-01-01 02:00:00+00';
SELECT gangsched.submit('t', 1, 8, name => 'high2', priority => 9);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5. never another team's guaranteed work                             */
/* ================================================================== */
-- Quotas promise more than the cluster has: a and b 16 GPUs each on 16
-- GPUs. b runs 16 GPUs, all within its quota. a's job is within a's quota
-- too (reclaim), but b borrows nothing: nothing may be taken from b.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('a'), gangsched.add_team('b'), gangsched.add_team('c');
SELECT gangsched.set_quota('a', 'main', 16), gangsched.set_quota('b', 'main', 16);
SELECT gangsched.submit('b', 1, 8, name => 'b' || i) FROM generate_series(1, 2) i;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'a1');
-- c has no quota (it could only borrow) and a dominant share of 0, far
-- below b's 1.0, yet b's work is guaranteed: no fair-share preemption
-- either
SELECT gangsched.submit('c', 1, 8, name => 'c1');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 6. thrash guard: gangsched.min_runtime                              */
/* ================================================================== */
-- The reclaim of scenario 1, with the victim younger than min_runtime
-- (10 minutes). Age counts from when every agent confirmed (started_at):
-- b2 is placed at 00:00 but starts at 00:05.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8), gangsched.set_quota('b', 'main', 8);
SELECT gangsched.submit('b', 1, 8, name => 'b1'), gangsched.submit('b', 1, 8, name => 'b2');
SELECT * FROM pg_temp.round();
SET gangsched.clock_override = '2030-01-01 00:05:00+00';
SELECT * FROM pg_temp.start_all();
SELECT name, placed_at, started_at, borrowed FROM gangsched.jobs ORDER BY job;
SET gangsched.clock_override = '2030-01-01 00:12:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'a1');
-- 00:12: b2 has run 7 minutes: not a victim
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
-- 00:14:59: still one second short
SET gangsched.clock_override = '2030-01-01 00:14:59+00';
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs WHERE name IN ('a1', 'b2') ORDER BY name;
-- a shorter min_runtime lets it go at once
SET gangsched.min_runtime = '5min';
BEGIN;
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs WHERE name IN ('a1', 'b2') ORDER BY name;
ROLLBACK;
SET gangsched.min_runtime = '10min';
-- 00:15: ten minutes since it started: now it is a victim
SET gangsched.clock_override = '2030-01-01 00:15:00+00';
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 7. gangsched.preemption = off                                       */
/* ================================================================== */
-- The same reclaim, well past min_runtime: with preemption off a1 waits
-- (the starvation guard keeps capacity for it instead); on again, b2 is
-- preempted.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8), gangsched.set_quota('b', 'main', 8);
SELECT gangsched.submit('b', 1, 8, name => 'b1'), gangsched.submit('b', 1, 8, name => 'b2');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'a1');
SET gangsched.preemption = off;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();
RESET gangsched.preemption;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
