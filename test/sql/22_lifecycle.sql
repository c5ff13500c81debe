-- Lifecycle around placement: agents confirm (job_started) until the job
-- runs; job_finished, cancel and a node going down end allocations with
-- history kept and the capacity reused; start and queue timeouts in
-- virtual time; a second round with nothing new changes nothing.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
-- agents confirm nothing here; placed jobs must not be requeued meanwhile
SET gangsched.start_timeout = '1d';

-- Virtual time: move the scheduler's clock on by some minutes.
CREATE FUNCTION pg_temp.tick(minutes int DEFAULT 1) RETURNS void
LANGUAGE sql AS $$ SELECT set_config('gangsched.clock_override', (gangsched.now() + make_interval(mins => minutes))::text, false) $$;

-- A round's summary without its duration; a minute of virtual time passes
-- after each round (agents finish and users cancel later than placement).
CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, workers_placed int, note text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT r.considered, r.placed, r.workers_placed, r.note FROM gangsched.run_round() r;
    PERFORM pg_temp.tick();
END $$;

-- One row per worker of a job: rank, node, its rack (last topology label)
-- and its devices ('2' = whole device 2; '1[0+2]' = slices 0..1 of device 1).
CREATE FUNCTION pg_temp.w(j bigint) RETURNS TABLE (worker int, node text, rack text, devices text)
LANGUAGE sql AS $$
    SELECT p.worker, p.node, subpath(p.topology, -1)::text,
           string_agg(p.device::text || CASE WHEN p.slices < n.gpu_slices
                                             THEN '[' || p.first_slice || '+' || p.slices || ']' ELSE '' END,
                      ',' ORDER BY p.device)
      FROM gangsched.placements p JOIN gangsched.nodes n ON n.name = p.node
     WHERE p.job = j GROUP BY p.worker, p.node, p.topology ORDER BY p.worker $$;
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

-- A job's allocations, current and past, one row per worker allocation.
CREATE FUNCTION pg_temp.history(j bigint) RETURNS TABLE (worker int, node text, devices int[], during tstzrange, end_reason text)
LANGUAGE sql AS $$
    SELECT a.worker, n.name, a.devices, a.during, a.end_reason
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE a.job = j ORDER BY lower(a.during), a.worker $$;

-- Events of a job (not the submission), in order; the reason of 'placed'
-- events is left out (its detail says where).
CREATE FUNCTION pg_temp.events(j bigint) RETURNS TABLE (at timestamptz, kind text, reason text, detail jsonb)
LANGUAGE sql AS $$
    SELECT at, kind, CASE WHEN kind <> 'placed' THEN reason END, detail
      FROM gangsched.events WHERE job = j AND kind <> 'submitted' ORDER BY id $$;

SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', 'r1', 32, 256, 100, 4, 'a100', 80))
  FROM (VALUES ('n1'), ('n2'), ('n3')) v(n);
SELECT gangsched.add_team('t');

/* ================================================================== */
/* 1. job_started from every node → running                            */
/* ================================================================== */

-- two 4-GPU workers: n1 and n2; n3 has no worker of it
SELECT gangsched.submit('t', 2, 4, name => 'duo');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(1);
SELECT job, state, placed_at, started_at FROM gangsched.jobs WHERE job = 1;
-- the first node confirms: still placed
SELECT gangsched.job_started(1, 'n1');
SELECT job, state, started_at FROM gangsched.jobs WHERE job = 1;
-- confirming twice is harmless
SELECT gangsched.job_started(1, 'n1');
SELECT state, started_nodes FROM gangsched.gangs WHERE id = 1;
-- a node without a worker of the job, an unknown node, an unknown job
SELECT pg_temp.try($$SELECT gangsched.job_started(1, 'n3')$$);
SELECT pg_temp.try($$SELECT gangsched.job_started(1, 'nx')$$);
SELECT pg_temp.try($$SELECT gangsched.job_started(99, 'n1')$$);
SELECT state, started_nodes FROM gangsched.gangs WHERE id = 1;
-- the last node confirms: running
SELECT gangsched.job_started(1, 'n2');
SELECT job, state, started_at, reason FROM gangsched.jobs WHERE job = 1;
SELECT * FROM pg_temp.events(1);
-- a pending job cannot be started
SELECT gangsched.submit('t', 1, 4, name => 'waits');
SELECT pg_temp.try($$SELECT gangsched.job_started(2, 'n3')$$);
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. job_finished ends allocations, keeps history, frees capacity     */
/* ================================================================== */

-- job 2 takes n3; a third job of two 4-GPU workers waits for room
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(2);
SELECT gangsched.submit('t', 2, 4, name => 'next');
SELECT * FROM pg_temp.round();
SELECT job, state FROM gangsched.jobs ORDER BY job;
-- job 1 finishes well, job 2 fails
SELECT gangsched.job_finished(1, true, 'done');
SELECT gangsched.job_finished(2, false, 'exit code 1');
SELECT job, state, finished_at, message, reason FROM gangsched.jobs WHERE job IN (1, 2) ORDER BY job;
-- the allocation rows are still there, closed at the finish time
SELECT * FROM pg_temp.history(1);
SELECT * FROM pg_temp.history(2);
-- nothing held any more, and a final job cannot finish again
SELECT count(*) AS current FROM gangsched.placements WHERE job IN (1, 2);
SELECT count(*) AS held_slots FROM gangsched.held_slots WHERE job IN (1, 2);
SELECT pg_temp.try($$SELECT gangsched.job_finished(1, true)$$);
SELECT pg_temp.try($$SELECT gangsched.job_started(1, 'n1')$$);
SELECT * FROM pg_temp.events(1);
SELECT * FROM gangsched.check_invariants();
-- the next round reuses the capacity: job 3 on two of the freed nodes
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(3);
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. cancel                                                           */
/* ================================================================== */

-- a pending job is cancelled: nothing to end
SELECT gangsched.submit('t', 3, 4, name => 'too-big-now');
SELECT * FROM pg_temp.round();
SELECT gangsched.cancel(4);
SELECT job, state, finished_at, reason FROM gangsched.jobs WHERE job = 4;
SELECT * FROM pg_temp.history(4);
-- a placed job is cancelled: its allocations end, the capacity is free
SELECT gangsched.submit('t', 2, 4, name => 'after-cancel');
SELECT * FROM pg_temp.round();
SELECT job, state FROM gangsched.jobs WHERE job = 5;
SELECT gangsched.cancel(3);
SELECT job, state, finished_at, reason FROM gangsched.jobs WHERE job = 3;
SELECT * FROM pg_temp.history(3);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(5);
-- cancelling again, or an unknown job, is refused
SELECT pg_temp.try($$SELECT gangsched.cancel(3)$$);
SELECT pg_temp.try($$SELECT gangsched.cancel(99)$$);
SELECT * FROM gangsched.check_invariants();

-- A job cancelled (or finished) at the very instant it was placed: in the
-- round's own transaction, or in virtual time that has not moved. Its
-- allocations are closed all the same; history keeps them.
SELECT gangsched.cancel(5);
SELECT gangsched.submit('t', 1, 4, name => 'same-instant-cancel');
BEGIN;
SELECT placed FROM gangsched.run_round();
SELECT gangsched.cancel(6);
COMMIT;
SELECT job, state FROM gangsched.jobs WHERE job = 6;
SELECT worker, node, lower(during) = upper(during) AS zero_length, upper_inf(during) AS still_open, end_reason
  FROM pg_temp.history(6);
SELECT gangsched.submit('t', 1, 4, name => 'same-instant-finish');
SELECT placed FROM gangsched.run_round();
SELECT gangsched.job_finished(7, true);
SELECT job, state FROM gangsched.jobs WHERE job = 7;
SELECT worker, node, lower(during) = upper(during) AS zero_length, upper_inf(during) AS still_open, end_reason
  FROM pg_temp.history(7);
SELECT count(*) AS held_slots FROM gangsched.held_slots;
SELECT * FROM gangsched.check_invariants();
SELECT pg_temp.tick();

/* ================================================================== */
/* 4. start_timeout: a placed job that never starts is requeued        */
/* ================================================================== */

SET gangsched.start_timeout = '10min';
SELECT gangsched.now() AS t0 \gset
-- job 8 (two nodes) is placed; job 9, submitted later, waits
SELECT gangsched.submit('t', 2, 4, name => 'slow-start');
SELECT gangsched.submit('t', 2, 4, name => 'later');
SELECT * FROM pg_temp.round();
SELECT job, state, placed_at FROM gangsched.jobs WHERE job IN (8, 9) ORDER BY job;
SELECT * FROM pg_temp.w(8);
-- one agent confirms; the other does not
SELECT gangsched.job_started(8, (SELECT min(node) FROM gangsched.placements WHERE job = 8));
-- 9 minutes after placement: still within start_timeout
SELECT pg_temp.tick(8);
SELECT requeued, placed FROM gangsched.run_round();
SELECT job, state FROM gangsched.jobs WHERE job = 8;
-- 10 minutes: requeued, its allocations ended (history kept), and placed
-- again in the same round, ahead of job 9 since it keeps its queue position
SELECT pg_temp.tick(1);
SELECT requeued, placed FROM gangsched.run_round();
SELECT j.job, j.state, j.requeues, j.placed_at - :'t0' AS placed_after, j.started_at, g.started_nodes, g.queue_pos < (SELECT queue_pos FROM gangsched.gangs WHERE id = 9) AS ahead_of_9
  FROM gangsched.jobs j JOIN gangsched.gangs g ON g.id = j.job WHERE job IN (8, 9) ORDER BY job;
SELECT worker, node, lower(during) - :'t0' AS from_, upper(during) - :'t0' AS to_, end_reason FROM pg_temp.history(8);
SELECT at - :'t0' AS after, kind, reason FROM pg_temp.events(8);
SELECT count(*) AS held_slots FROM gangsched.held_slots WHERE job = 8;
SELECT * FROM gangsched.check_invariants();
RESET gangsched.start_timeout;
SET gangsched.start_timeout = '1d';
SELECT gangsched.cancel(8);
SELECT gangsched.cancel(9);
SELECT pg_temp.tick();

/* ================================================================== */
/* 5. queue timeout: expired, with the last waiting reason             */
/* ================================================================== */

SELECT gangsched.now() AS t1 \gset
-- n1 and n2 busy (job 10); job 11 needs three nodes and waits with a
-- 30-minute queue timeout; job 12 has none and the default is off
SELECT gangsched.submit('t', 2, 4, name => 'busy');
SELECT * FROM pg_temp.round();
SELECT gangsched.submit('t', 3, 4, queue_timeout => '30 min', name => 'impatient');
SELECT gangsched.submit('t', 3, 4, name => 'patient');
SELECT * FROM pg_temp.round();
SELECT job, state, reason FROM gangsched.jobs WHERE job IN (11, 12) ORDER BY job;
-- 29 minutes after submission: still pending
SELECT pg_temp.tick(28);
SELECT expired FROM gangsched.run_round();
-- 30 minutes: expired, with the reason it was waiting
SELECT pg_temp.tick(1);
SELECT expired FROM gangsched.run_round();
SELECT job, state, finished_at - :'t1' AS after, reason FROM gangsched.jobs WHERE job IN (11, 12) ORDER BY job;
SELECT kind, reason FROM pg_temp.events(11) WHERE kind = 'expired';
SELECT * FROM pg_temp.history(11);
-- the default queue timeout applies to jobs without their own, counted
-- from when they entered the queue
SET gangsched.default_queue_timeout = '1h';
SELECT expired FROM gangsched.run_round();
SELECT job, state FROM gangsched.jobs WHERE job = 12;
SELECT pg_temp.tick(30);
SELECT expired FROM gangsched.run_round();
SELECT job, state, reason FROM gangsched.jobs WHERE job = 12;
RESET gangsched.default_queue_timeout;
-- an expired job cannot be cancelled or started
SELECT pg_temp.try($$SELECT gangsched.cancel(11)$$);
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 6. A node goes down: its jobs are requeued, lost work recorded      */
/* ================================================================== */

-- job 10 runs on n1 and n2 (4 GPUs each)
SELECT * FROM pg_temp.w(10);
SELECT gangsched.job_started(10, 'n1');
SELECT gangsched.job_started(10, 'n2');
SELECT gangsched.now() AS t2 \gset
-- it checkpoints 10 minutes later; the node fails 20 minutes after that
SELECT pg_temp.tick(10);
SELECT gangsched.job_checkpointed(10);
SELECT pg_temp.tick(20);
SELECT gangsched.set_node_state('n2', 'down');
-- requeued: 2 workers × 4 GPUs × 1200 s since the checkpoint were lost
SELECT job, state, requeues, lost_gpu_seconds, reason FROM gangsched.jobs WHERE job = 10;
SELECT worker, node, during, end_reason FROM pg_temp.history(10) WHERE NOT upper_inf(during) AND upper(during) = gangsched.now();
SELECT count(*) AS still_held FROM gangsched.held_slots WHERE job = 10;
SELECT kind, reason, detail FROM pg_temp.events(10) WHERE kind = 'requeued';
SELECT * FROM gangsched.check_invariants();
-- the next round places it again, not on the down node: n1 and n3
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(10);
-- a job that was placed but never started loses nothing when its node fails
SELECT gangsched.set_node_state('n3', 'down');
SELECT job, state, requeues, lost_gpu_seconds FROM gangsched.jobs WHERE job = 10;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.set_node_state('n2', 'up');
SELECT gangsched.set_node_state('n3', 'up');

/* ================================================================== */
/* 7. Two rounds in a row: the second changes nothing                  */
/* ================================================================== */

-- Fingerprint of the scheduler's state: jobs, allocations, held slots,
-- events.
CREATE FUNCTION pg_temp.fingerprint() RETURNS text
LANGUAGE sql AS $$
    SELECT md5((SELECT string_agg(g::text, '|' ORDER BY g.id) FROM gangsched.gangs g)) || '/' ||
           md5((SELECT string_agg(a::text, '|' ORDER BY a.id) FROM gangsched.allocations a)) || '/' ||
           md5(COALESCE((SELECT string_agg(h::text, '|' ORDER BY h.node_id, h.slot) FROM gangsched.held_slots h), '')) || '/' ||
           (SELECT count(*) FROM gangsched.events)::text $$;

-- job 10 (two nodes) is pending; n3 goes down and a three-node job comes:
-- it cannot fit until n3 is back, so nothing is kept for it
SELECT gangsched.set_node_state('n3', 'down');
SELECT gangsched.submit('t', 3, 4, name => 'three-nodes');
SELECT * FROM pg_temp.round();
SELECT job, state, reason FROM gangsched.jobs WHERE state NOT IN ('finished', 'failed', 'cancelled', 'expired') ORDER BY job;
SELECT * FROM pg_temp.w(10);
SELECT pg_temp.fingerprint() AS before \gset
SELECT considered, placed, workers_placed, expired, requeued, note FROM gangsched.run_round();
SELECT pg_temp.fingerprint() = :'before' AS unchanged;
-- and once more, a minute later
SELECT pg_temp.tick();
SELECT considered, placed, workers_placed, expired, requeued, note FROM gangsched.run_round();
SELECT pg_temp.fingerprint() = :'before' AS unchanged;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 8. A silent node is marked down and gets no work in that round      */
/* ================================================================== */

-- clear the cluster; every agent sends a heartbeat
SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE state IN ('pending', 'placed', 'running') ORDER BY job;
SELECT gangsched.set_node_state('n3', 'up');
SELECT gangsched.node_heartbeat(n) FROM unnest(ARRAY['n1', 'n2', 'n3']) n;
-- two minutes later n1's agent has gone quiet (gangsched.node_timeout is
-- 1 minute); a one-node job would go to n1 first (first of equal nodes)
SELECT pg_temp.tick(2);
SELECT gangsched.node_heartbeat(n) FROM unnest(ARRAY['n2', 'n3']) n;
SELECT current_setting('gangsched.node_timeout') AS node_timeout;
SELECT gangsched.submit('t', 1, 4, name => 'after-silence');
-- the round marks n1 down and places the job elsewhere
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.nodes ORDER BY name;
SELECT * FROM pg_temp.w(14);
SELECT kind, reason, detail FROM gangsched.events WHERE kind = 'node_state' ORDER BY id DESC LIMIT 2;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
