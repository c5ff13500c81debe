-- The mechanics of a preemption: the preemptor is nominated and its exact
-- capacity held (gangsched.holds) while its victims drain; no other job may
-- take that capacity; the last job_released places the preemptor on it in
-- the same transaction; victims that miss their grace deadline (capped by
-- gangsched.max_grace) are killed by the next round, which places the
-- preemptor; victims requeue at their old queue position with their
-- preemption count and lost work; why_pending on a nominated job; a victim
-- that finishes or is cancelled instead of releasing; cancelling a
-- nominated job; job_released's errors.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';
SET gangsched.max_grace = '10min';
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

-- The agent of every node of every placed job confirms it.
CREATE FUNCTION pg_temp.start_all() RETURNS TABLE (started text)
LANGUAGE sql AS $$
    SELECT string_agg(DISTINCT x.name, ',' ORDER BY x.name)
      FROM (SELECT j.name, gangsched.job_started(p.job, p.node)
              FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p
              JOIN gangsched.jobs j ON j.job = p.job
             WHERE j.state = 'placed') x $$;

CREATE FUNCTION pg_temp.id(job_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT job FROM gangsched.jobs WHERE name = job_name $$;

-- Jobs by name: the columns preemption changes.
CREATE FUNCTION pg_temp.jobs() RETURNS TABLE (name text, state text, borrowed bool, queue_pos bigint, placed_at timestamptz,
                                              preempt_deadline timestamptz, preemptions int, lost_gpu_seconds numeric)
LANGUAGE sql AS $$
    SELECT name, state, borrowed, queue_pos, placed_at, preempt_deadline, preemptions, lost_gpu_seconds
      FROM gangsched.jobs ORDER BY job $$;

-- Which jobs hold each node now (preempting ones starred; holds of
-- nominated jobs in brackets).
CREATE FUNCTION pg_temp.map() RETURNS TABLE (node text, jobs text)
LANGUAGE sql AS $$
    SELECT n.name,
           COALESCE((SELECT string_agg(DISTINCT g.name || CASE WHEN g.state = 'preempting' THEN '*' ELSE '' END, ',')
                       FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
                      WHERE a.node_id = n.id AND upper_inf(a.during)), '')
        || COALESCE((SELECT ' [' || string_agg(DISTINCT g.name, ',') || ']' FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job
                      WHERE h.node_id = n.id), '')
      FROM gangsched.nodes n ORDER BY n.id $$;

-- Preemption events of the named jobs, in order (events of one kind at one
-- instant by job name).
CREATE FUNCTION pg_temp.events(names text[]) RETURNS TABLE (at timestamptz, kind text, job text, reason text)
LANGUAGE sql AS $$
    SELECT e.at, e.kind, g.name, e.reason FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job
     WHERE g.name = ANY (names) AND e.kind IN ('nominated', 'preempting', 'requeued', 'placed', 'cancelled', 'finished')
       AND e.at > '2030-01-01 00:00:00+00'
     ORDER BY e.at, min(e.id) OVER (PARTITION BY e.at, e.kind), g.name $$;

-- Run a statement; show 'ok' or its SQLSTATE and message.
CREATE FUNCTION pg_temp.try(cmd text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    st  text;
    msg text;
BEGIN
    EXECUTE cmd;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
    RETURN st || ': ' || msg;
END $$;

-- The capacity held for nominated jobs, as it was when captured.
CREATE TEMP TABLE held (job bigint, worker int, node_id int, devices int[], first_slice int, slices int,
                        cpus numeric, mem_gb numeric, net_gbps numeric);

/* ================================================================== */
/* 1. held capacity, release, requeue                                  */
/* ================================================================== */
-- Three 8-GPU nodes. Team a has a nominal quota of 24 GPUs; b and c none.
-- b borrows n1 and n2 (v1, v2); n3 is free. p (a, 3 × 8 GPUs, within
-- quota) needs n3 and both of b's gangs.
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(3);
SELECT gangsched.add_team('a'), gangsched.add_team('b'), gangsched.add_team('c');
SELECT gangsched.set_quota('a', 'main', 24);
SELECT gangsched.submit('b', 1, 8, name => 'v1', grace => '2min'),
       gangsched.submit('b', 1, 8, name => 'v2');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 00:30:00+00';
SELECT gangsched.job_checkpointed(pg_temp.id('v2'));
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 3, 8, name => 'p');
SELECT * FROM pg_temp.round();
-- v1 gave a grace of 2 minutes, v2 none (gangsched.default_grace: 1 minute)
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.why_pending(pg_temp.id('p'));
INSERT INTO held SELECT job, worker, node_id, devices, first_slice, slices, cpus, mem_gb, net_gbps FROM gangsched.holds;
SELECT h.worker, n.name AS node, h.devices, h.first_slice, h.slices FROM held h JOIN gangsched.nodes n ON n.id = h.node_id ORDER BY h.worker;
SELECT * FROM gangsched.check_invariants();

-- n3 is free but held for p. third (team c: no work at all, so the lowest
-- dominant share) would fit exactly there; rounds while the victims drain
-- leave it pending and the holds as they were.
SELECT gangsched.submit('c', 1, 8, name => 'third');
SET gangsched.clock_override = '2030-01-01 01:00:05+00';
SELECT * FROM pg_temp.round();
SET gangsched.clock_override = '2030-01-01 01:00:10+00';
SELECT * FROM pg_temp.round();
SELECT * FROM gangsched.why_pending(pg_temp.id('third'));
SELECT name, state FROM gangsched.jobs WHERE name IN ('p', 'third') ORDER BY job;
SELECT count(*) AS holds_changed FROM ((TABLE held EXCEPT SELECT job, worker, node_id, devices, first_slice, slices, cpus, mem_gb, net_gbps FROM gangsched.holds)
                                       UNION ALL
                                       (SELECT job, worker, node_id, devices, first_slice, slices, cpus, mem_gb, net_gbps FROM gangsched.holds EXCEPT TABLE held)) x;
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();

-- v1 releases after writing a checkpoint: it loses nothing. p still waits
-- for v2, whose deadline is now the last.
SET gangsched.clock_override = '2030-01-01 01:00:20+00';
SELECT gangsched.job_released(pg_temp.id('v1'), checkpointed => true);
SELECT * FROM gangsched.why_pending(pg_temp.id('p'));
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();

-- v2 releases without a checkpoint. In that same transaction p is placed
-- on exactly the capacity held for it, and the holds are gone.
SET gangsched.clock_override = '2030-01-01 01:00:30+00';
BEGIN;
SELECT gangsched.job_released(pg_temp.id('v2'), checkpointed => false);
SELECT name, state, placed_at FROM gangsched.jobs WHERE name = 'p';
SELECT count(*) AS holds_left FROM gangsched.holds;
SELECT count(*) AS not_as_held
  FROM ((SELECT h.worker, h.node_id, d, h.first_slice, h.slices FROM held h, unnest(h.devices) d
         EXCEPT
         SELECT p.worker, n.id, p.device, p.first_slice, p.slices
           FROM gangsched.placements p JOIN gangsched.nodes n ON n.name = p.node WHERE p.job = pg_temp.id('p'))
        UNION ALL
        (SELECT p.worker, n.id, p.device, p.first_slice, p.slices
           FROM gangsched.placements p JOIN gangsched.nodes n ON n.name = p.node WHERE p.job = pg_temp.id('p')
         EXCEPT
         SELECT h.worker, h.node_id, d, h.first_slice, h.slices FROM held h, unnest(h.devices) d)) x;
SELECT * FROM gangsched.check_invariants();
COMMIT;
-- the victims are pending again with one preemption each; v1 lost nothing
-- (it checkpointed as it stopped), v2 its 8 GPUs × 1830 s since the
-- checkpoint at 00:30; their queue positions are the old ones
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.map();
-- in the queue they come before third, submitted after them
SELECT position, name, team FROM gangsched.queue;
SELECT * FROM pg_temp.events(ARRAY['p', 'v1', 'v2']);
-- v2's allocation history: ended at the release
SELECT a.worker, n.name AS node, a.during, a.end_reason FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
 WHERE a.job IN (pg_temp.id('v1'), pg_temp.id('v2')) ORDER BY a.id;
SELECT * FROM pg_temp.start_all();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. deadline kill, grace capped by gangsched.max_grace               */
/* ================================================================== */
-- k1 asks for a grace of 2 hours (capped at max_grace, 10 minutes), k2
-- gives none (default_grace, 3 minutes here), k3 5 minutes.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
TRUNCATE held;
SET gangsched.default_grace = '3min';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(3);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 24);
SELECT gangsched.submit('b', 1, 8, name => 'k1', grace => '2h'),
       gangsched.submit('b', 1, 8, name => 'k2'),
       gangsched.submit('b', 1, 8, name => 'k3', grace => '5min');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 00:50:00+00';
SELECT gangsched.job_checkpointed(pg_temp.id('k2'));
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 3, 8, name => 'p');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
INSERT INTO held SELECT job, worker, node_id, devices, first_slice, slices, cpus, mem_gb, net_gbps FROM gangsched.holds;
-- k3 releases in time
SET gangsched.clock_override = '2030-01-01 01:01:00+00';
SELECT gangsched.job_released(pg_temp.id('k3'));
-- a second before k2's deadline: nothing happens
SET gangsched.clock_override = '2030-01-01 01:02:59+00';
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
-- at k2's deadline the round kills it: allocations ended, the 8 GPUs ×
-- 780 s since its checkpoint at 00:50 counted as lost
SET gangsched.clock_override = '2030-01-01 01:03:00+00';
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.why_pending(pg_temp.id('p'));
SELECT * FROM gangsched.check_invariants();
-- k1 does not release either. At 01:10 (capped grace) the round kills it
-- and places p in that round, on the capacity held for it.
SET gangsched.clock_override = '2030-01-01 01:09:59+00';
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs WHERE name IN ('k1', 'p') ORDER BY job;
SET gangsched.clock_override = '2030-01-01 01:10:00+00';
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT * FROM pg_temp.map();
SELECT count(*) AS holds_left FROM gangsched.holds;
SELECT count(*) AS not_as_held
  FROM ((SELECT h.worker, h.node_id, d FROM held h, unnest(h.devices) d
         EXCEPT
         SELECT p.worker, n.id, p.device FROM gangsched.placements p JOIN gangsched.nodes n ON n.name = p.node WHERE p.job = pg_temp.id('p'))
        UNION ALL
        (SELECT p.worker, n.id, p.device FROM gangsched.placements p JOIN gangsched.nodes n ON n.name = p.node WHERE p.job = pg_temp.id('p')
         EXCEPT
         SELECT h.worker, h.node_id, d FROM held h, unnest(h.devices) d)) x;
SELECT * FROM pg_temp.events(ARRAY['k1', 'k2', 'k3', 'p']);
SELECT n.name AS node, a.during, a.end_reason FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
 WHERE a.job IN (pg_temp.id('k1'), pg_temp.id('k2')) ORDER BY a.id;
SELECT * FROM gangsched.check_invariants();
RESET gangsched.default_grace;
SET gangsched.default_grace = '1min';

/* ================================================================== */
/* 3. a victim finishes or is cancelled instead of releasing           */
/* ================================================================== */
-- The capacity is free but still held: the next round places p on it
-- first, before any other job (a third job that would fit waits).
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(2);
SELECT gangsched.add_team('a'), gangsched.add_team('b'), gangsched.add_team('c');
SELECT gangsched.set_quota('a', 'main', 16);
SELECT gangsched.submit('b', 1, 8, name => 'v1'), gangsched.submit('b', 1, 8, name => 'v2');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 2, 8, name => 'p');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.map();
SET gangsched.clock_override = '2030-01-01 01:00:10+00';
SELECT gangsched.job_finished(pg_temp.id('v1'), true, 'done anyway');
SELECT gangsched.cancel(pg_temp.id('v2'));
SELECT name, state, preemptions FROM gangsched.jobs ORDER BY job;
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.why_pending(pg_temp.id('p'));
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.submit('c', 1, 8, name => 'third');
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 4. cancelling a nominated job frees its holds                       */
/* ================================================================== */
-- p holds n3 (free) and waits for v1 and v2. It is cancelled: the holds
-- go, n3 is free for others at the next round. The victims were told to
-- stop and stay preempting until they release or reach their deadline;
-- their release places nobody, and they requeue as usual.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT pg_temp.cluster(3);
SELECT gangsched.add_team('a'), gangsched.add_team('b'), gangsched.add_team('c');
SELECT gangsched.set_quota('a', 'main', 24);
SELECT gangsched.submit('b', 1, 8, name => 'v1'), gangsched.submit('b', 1, 8, name => 'v2');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 3, 8, name => 'p');
SELECT * FROM pg_temp.round();
SELECT gangsched.submit('c', 1, 8, name => 'third');
SELECT * FROM pg_temp.map();
SELECT gangsched.cancel(pg_temp.id('p'));
SELECT count(*) AS holds_left FROM gangsched.holds;
SELECT name, state, reason FROM gangsched.jobs ORDER BY job;
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.map();
-- a release must say whether the job checkpointed
SELECT pg_temp.try($$SELECT gangsched.job_released(pg_temp.id('v1'), NULL)$$);
SELECT gangsched.job_released(pg_temp.id('v1'));
SELECT gangsched.job_released(pg_temp.id('v2'));
SELECT name, state, preemptions FROM gangsched.jobs ORDER BY job;
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5. job_released and job_checkpointed refuse what makes no sense     */
/* ================================================================== */
-- v1 and v2 are pending, third is placed, p cancelled: none is preempting.
SELECT pg_temp.try($$SELECT gangsched.job_released(pg_temp.id('v1'))$$);
SELECT pg_temp.try($$SELECT gangsched.job_released(pg_temp.id('third'))$$);
SELECT pg_temp.try($$SELECT gangsched.job_released(pg_temp.id('p'))$$);
SELECT pg_temp.try($$SELECT gangsched.job_released(999)$$);
SELECT pg_temp.try($$SELECT gangsched.job_checkpointed(pg_temp.id('v1'))$$);
SELECT pg_temp.try($$SELECT gangsched.job_checkpointed(999)$$);
SELECT pg_temp.try($$SELECT gangsched.job_checkpointed(pg_temp.id('third'), '2030-01-01 02:00:00+00')$$);
-- the whole error, as an agent sees it
\set SHOW_CONTEXT never
SELECT gangsched.job_released(pg_temp.id('v1'));
\set SHOW_CONTEXT errors
-- nothing changed
SELECT name, state, preemptions FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
