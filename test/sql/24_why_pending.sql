-- why_pending(job): the next round simulated against the current state,
-- without writing anything, in words a user can act on: capacity,
-- topology, capacity kept for another job, queue order, 'fits now', and
-- what it says for jobs that are not pending or do not exist.
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
-- A round in which only the named nodes take work (the others drain for
-- its duration): lays out fillers exactly where a scenario needs them.
CREATE FUNCTION pg_temp.round_on(VARIADIC nodes text[]) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    others text[];
    n      text;
    placed int;
BEGIN
    SELECT array_agg(name ORDER BY name) INTO others FROM gangsched.nodes WHERE name <> ALL (round_on.nodes) AND state = 'up';
    FOREACH n IN ARRAY COALESCE(others, '{}') LOOP
        PERFORM gangsched.set_node_state(n, 'draining');
    END LOOP;
    SELECT r.placed INTO placed FROM gangsched.run_round() r;
    FOREACH n IN ARRAY COALESCE(others, '{}') LOOP
        PERFORM gangsched.set_node_state(n, 'up');
    END LOOP;
    PERFORM pg_temp.tick();
    RETURN placed;
END $$;


-- Everything a round could write, to show why_pending writes nothing.
CREATE FUNCTION pg_temp.fingerprint() RETURNS text
LANGUAGE sql AS $$
    SELECT md5((SELECT string_agg(g::text, '|' ORDER BY g.id) FROM gangsched.gangs g)) || '/' ||
           md5(COALESCE((SELECT string_agg(a::text, '|' ORDER BY a.id) FROM gangsched.allocations a), '')) || '/' ||
           md5(COALESCE((SELECT string_agg(h::text, '|' ORDER BY h.node_id, h.slot) FROM gangsched.held_slots h), '')) || '/' ||
           (SELECT count(*) FROM gangsched.events)::text $$;

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

SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', t::ltree, 32, 256, 100, 4, 'a100', 80))
  FROM (VALUES ('a1', 'z1.r1'), ('a2', 'z1.r1'), ('b1', 'z1.r2'), ('b2', 'z1.r2')) v(n, t);
SELECT gangsched.add_team('t');

/* ---------------- fits now ---------------- */

SELECT gangsched.submit('t', 2, 4, name => 'fits');
SELECT * FROM gangsched.why_pending(1);
-- and the next round does place it
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(1);
-- a placed job is not pending
SELECT * FROM gangsched.why_pending(1);

/* ---------------- capacity ---------------- */

-- rack r1 is full (job 1); 8 GPUs free in r2. Three 4-GPU workers: 12 GPUs.
SELECT gangsched.submit('t', 3, 4, name => 'capacity');
SELECT pg_temp.fingerprint() AS before \gset
SELECT * FROM gangsched.why_pending(2);
SELECT pg_temp.fingerprint() = :'before' AS nothing_written;

/* ---------------- topology ---------------- */

SELECT gangsched.cancel(2);
SELECT gangsched.job_finished(1, true);
-- 2 GPUs used on a1 (job 3) and 2 on b1 (job 4): 6 free in each rack
SELECT gangsched.submit('t', 1, 2, name => 'a1-part');
SELECT pg_temp.round_on('a1');
SELECT gangsched.submit('t', 1, 2, name => 'b1-part');
SELECT pg_temp.round_on('b1');
SELECT node, job, count(*) AS gpus FROM gangsched.placements GROUP BY node, job ORDER BY node;
-- 4 workers inside one rack: fits
SELECT gangsched.submit('t', 4, 1, span => 'rack', name => 'span-fits');
SELECT * FROM gangsched.why_pending(5);
SELECT gangsched.cancel(5);
-- 8 workers inside one rack: 12 GPUs free in all, 6 at most in a rack
SELECT gangsched.submit('t', 8, 1, span => 'rack', name => 'span-rack');
SELECT * FROM gangsched.why_pending(6);
SELECT gangsched.cancel(6);
-- tensor groups of 4: 12 free, but only a2 and b2 hold a group of 4
SELECT gangsched.submit('t', 12, 1, group_size => 4, name => 'groups');
SELECT * FROM gangsched.why_pending(7);
SELECT gangsched.cancel(7);
-- a pipeline replica of 4 stages × 2 inside one rack (stage_span)
SELECT gangsched.submit('t', 8, 1, group_size => 2, stages => 4, stage_span => 'rack', name => 'replica');
SELECT * FROM gangsched.why_pending(8);
SELECT gangsched.cancel(8);
SELECT * FROM gangsched.check_invariants();

/* ---------------- capacity held for another job, queue order ---------------- */

-- 'big' (job 9, four 4-GPU workers) is first in line and cannot fit while
-- a1-part and b1-part run: capacity is kept for it. 'small' (job 10) would
-- fit on a2 or b2, but that capacity is kept: it waits behind it.
SELECT gangsched.submit('t', 4, 4, name => 'big');
SELECT gangsched.submit('t', 1, 4, name => 'small');
SELECT * FROM gangsched.why_pending(9);
SELECT * FROM gangsched.why_pending(10);
-- the round agrees: nothing placed, capacity kept for job 9
SELECT * FROM pg_temp.round();
SELECT job, state, reason FROM gangsched.jobs WHERE job IN (9, 10) ORDER BY job;
-- a higher-priority job goes before both: it fits now (first in queue
-- order), and 'small' now has two jobs before it
SELECT gangsched.submit('t', 1, 2, priority => 5, name => 'urgent');
SELECT * FROM gangsched.why_pending(11);
SELECT * FROM gangsched.why_pending(10);
SELECT gangsched.cancel(11);
-- a1-part and b1-part finish: the big gang fits now; 'small' still waits,
-- now because the big gang takes everything
SELECT gangsched.job_finished(3, true);
SELECT gangsched.job_finished(4, true);
SELECT * FROM gangsched.why_pending(9);
SELECT * FROM gangsched.why_pending(10);
SELECT * FROM pg_temp.round();
SELECT job, state FROM gangsched.jobs WHERE job IN (9, 10) ORDER BY job;
SELECT * FROM gangsched.check_invariants();

/* ---------------- nodes not up, locality, model ---------------- */

SELECT gangsched.cancel(9);
SELECT gangsched.set_node_state('b1', 'draining');
SELECT gangsched.set_node_state('b2', 'down');
-- job 10 (one 4-GPU worker) goes to r1 in the next round; three 4-GPU
-- workers cannot: only a1 and a2 are up
SELECT gangsched.submit('t', 3, 4, name => 'nodes-down');
SELECT * FROM gangsched.why_pending(12);
SELECT gangsched.cancel(12);
SELECT gangsched.set_node_state('b1', 'up');
SELECT gangsched.set_node_state('b2', 'up');
-- required locality: only b2 caches the dataset; b2 is busy
SELECT gangsched.cache_dataset('b2', 'web');
SELECT gangsched.submit('t', 1, 4, name => 'b2-busy');
SELECT pg_temp.round_on('b2');
SELECT gangsched.submit('t', 1, 4, dataset => 'web', locality => 'required', name => 'needs-web');
SELECT * FROM gangsched.why_pending(14);
SELECT * FROM gangsched.check_invariants();

/* ---------------- queue timeout, not pending, unknown ---------------- */

SELECT gangsched.submit('t', 4, 4, queue_timeout => '10 min', name => 'impatient');
SELECT pg_temp.tick(10);
SELECT * FROM gangsched.why_pending(15);
SELECT * FROM pg_temp.round();
SELECT * FROM gangsched.why_pending(15);
SELECT * FROM gangsched.why_pending(13);
SELECT pg_temp.try($$SELECT * FROM gangsched.why_pending(999)$$);
SELECT count(*) AS rows_for_null FROM gangsched.why_pending(NULL);
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
