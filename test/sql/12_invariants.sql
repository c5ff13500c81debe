-- check_invariants(): each of the invariants of docs/invariants.md is reported when the
-- state is corrupted on purpose (as a superuser writing rows directly), and
-- stops being reported once the state is repaired. Each scenario runs in its
-- own transaction and is rolled back; the file ends with no violation.
-- Also: the database's own guards (the held-slot key, the append-only
-- history) and the agents' calls on placed jobs, which must keep every
-- invariant.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;

-- Run a statement that must be refused; report SQLSTATE, message, detail, hint.
CREATE PROCEDURE pg_temp.refused(cmd text) LANGUAGE plpgsql AS $$
DECLARE
    st  text;
    msg text;
    det text;
    hnt text;
BEGIN
    BEGIN
        EXECUTE cmd;
        RAISE NOTICE 'ACCEPTED, but it should have been refused';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        IF det <> '' AND hnt <> '' THEN
            RAISE NOTICE '%: %', st, msg USING DETAIL = det, HINT = hnt;
        ELSIF det <> '' THEN
            RAISE NOTICE '%: %', st, msg USING DETAIL = det;
        ELSIF hnt <> '' THEN
            RAISE NOTICE '%: %', st, msg USING HINT = hnt;
        ELSE
            RAISE NOTICE '%: %', st, msg;
        END IF;
    END;
END $$;

-- The job called `name`.
CREATE FUNCTION pg_temp.j(name text) RETURNS bigint LANGUAGE sql AS $$
    SELECT job FROM gangsched.jobs WHERE jobs.name = j.name
$$;

-- Fabricate a placement the way a round would write it: the job becomes
-- placed now, and each worker gets one allocation and its held slots.
-- spec: one word per worker, 'node' (CPU-only), 'node:d,d' (whole devices)
-- or 'node:d@s' (a fraction of device d from slice s).
CREATE FUNCTION pg_temp.place(job_name text, spec text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    j     gangsched.gangs;
    n     gangsched.nodes;
    w     text;
    rank  int;
    devs  int[];
    first int;
    nsl   int;
BEGIN
    SELECT * INTO j FROM gangsched.gangs WHERE id = pg_temp.j(job_name);
    IF j.state NOT IN ('placed', 'running', 'preempting') THEN
        UPDATE gangsched.gangs SET state = 'placed', placed_at = gangsched.now(), reason = NULL WHERE id = j.id
        RETURNING * INTO j;
    END IF;
    -- ranks continue after the job's current allocations
    SELECT count(*) INTO rank FROM gangsched.allocations a WHERE a.job = j.id AND upper_inf(a.during);
    FOREACH w IN ARRAY regexp_split_to_array(spec, ' ') LOOP
        SELECT * INTO n FROM gangsched.nodes WHERE name = split_part(w, ':', 1);
        devs := '{}'; first := 0; nsl := 0;
        IF w LIKE '%@%' THEN
            devs := ARRAY[split_part(split_part(w, ':', 2), '@', 1)::int];
            first := split_part(w, '@', 2)::int;
            nsl := gangsched._slices_needed(j.gpus, n.gpu_slices);
        ELSIF w LIKE '%:%' THEN
            devs := string_to_array(split_part(w, ':', 2), ',')::int[];
            nsl := n.gpu_slices;
        END IF;
        INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices,
                                           gpus, cpus, mem_gb, net_gbps, borrowed, during)
        VALUES (j.id, rank, n.id, j.team_id, devs, first, nsl, j.gpus, j.cpus, j.mem_gb, j.net_gbps, false,
                tstzrange(j.placed_at, NULL));
        INSERT INTO gangsched.held_slots (node_id, slot, job, worker)
        SELECT n.id, d * 8 + s, j.id, rank FROM unnest(devs) d, generate_series(first, first + nsl - 1) s;
        rank := rank + 1;
    END LOOP;
END $$;

CREATE FUNCTION pg_temp.node_id(name text) RETURNS int LANGUAGE sql AS $$
    SELECT id FROM gangsched.nodes WHERE nodes.name = node_id.name
$$;

-- What check_invariants() reports, in a stable order.
CREATE TEMP VIEW violations AS
SELECT * FROM gangsched.check_invariants() ORDER BY invariant, job, node, detail;

/* ---------------- the cluster ---------------- */

-- rack r1: a1, a2 — 4 whole a100 each, 32 cpus, 128 GB, 10 Gbit/s
-- rack r2: b1 — 4 a30 in 4 slices; c1 — no devices, 16 cpus, 64 GB, 10 Gbit/s
-- pool q (rack r3): q1 — 4 whole a100
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved'), gangsched.add_pool('q', 'reserved');
SELECT gangsched.add_node('a1', 'p', 'r1', 32, 128, 10, 4, 'a100', 80),
       gangsched.add_node('a2', 'p', 'r1', 32, 128, 10, 4, 'a100', 80),
       gangsched.add_node('b1', 'p', 'r2', 32, 128, 10, 4, 'a30', 24, 4),
       gangsched.add_node('c1', 'p', 'r2', 16, 64, 10, 0, NULL, NULL),
       gangsched.add_node('q1', 'q', 'r3', 32, 128, 10, 4, 'a100', 80);
SELECT gangsched.cache_dataset('a1', 'ds');
SELECT gangsched.add_team('t');
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
TABLE violations;

/* ---------------- a healthy state, and the agents keeping it healthy ---------------- */

BEGIN;
SELECT gangsched.submit('t', 2, 2, cpus => 8, mem_gb => 32, net_gbps => 2, group_size => 2, pool => 'p', name => 'A');
SELECT gangsched.submit('t', 2, 0.25, cpus => 1, mem_gb => 4, pool => 'p', name => 'B');
SELECT gangsched.submit('t', 1, 0, cpus => 10, mem_gb => 10, pool => 'p', name => 'C');
SELECT gangsched.submit('t', 2, 1, cpus => 2, mem_gb => 8, stages => 2, stage_span => 'rack', span => 'rack',
                        dataset => 'ds', locality => 'preferred', name => 'D');
SELECT pg_temp.place('A', 'a1:0,1 a1:2,3');
SELECT pg_temp.place('B', 'b1:0@0 b1:0@1');
SELECT pg_temp.place('C', 'c1');
SELECT pg_temp.place('D', 'a2:0 a2:1');
SELECT job, worker, node, topology, device, first_slice, slices, cpus, mem_gb, net_gbps, borrowed
  FROM gangsched.placements ORDER BY job, worker, device;
SELECT n.name, h.slot, h.job, h.worker FROM gangsched.held_slots h JOIN gangsched.nodes n ON n.id = h.node_id
 ORDER BY 1, 2;
TABLE violations;

-- job_started: only for a node the job uses; running once every node confirmed
SET LOCAL gangsched.clock_override = '2030-01-01 00:01:00+00';
CALL pg_temp.refused(format('SELECT gangsched.job_started(%s, %L)', pg_temp.j('D'), 'a1'));
CALL pg_temp.refused(format('SELECT gangsched.job_started(%s, %L)', pg_temp.j('D'), 'nowhere'));
SELECT gangsched.job_started(pg_temp.j('D'), 'a2');
SELECT gangsched.job_started(pg_temp.j('D'), 'a2');     -- again: no change
SELECT name, state, started_at, started_nodes = ARRAY[pg_temp.node_id('a2')] AS started_nodes_ok
  FROM gangsched.gangs WHERE name = 'D';
TABLE violations;

-- job_checkpointed: not in the future; never moves back
SET LOCAL gangsched.clock_override = '2030-01-01 00:05:00+00';
CALL pg_temp.refused(format('SELECT gangsched.job_checkpointed(%s, %L)', pg_temp.j('D'), '2030-01-01 00:06:00+00'));
SELECT gangsched.job_checkpointed(pg_temp.j('D'));
SELECT gangsched.job_checkpointed(pg_temp.j('D'), '2030-01-01 00:02:00+00');
SELECT name, last_checkpoint_at FROM gangsched.gangs WHERE name = 'D';

-- job_finished closes the allocations (history kept) and frees the slots
SET LOCAL gangsched.clock_override = '2030-01-01 00:10:00+00';
CALL pg_temp.refused(format('SELECT gangsched.job_finished(%s, NULL)', pg_temp.j('D')));
SELECT gangsched.job_finished(pg_temp.j('D'), true, 'converged');
SELECT name, state, finished_at, message, reason FROM gangsched.gangs WHERE name = 'D';
SELECT worker, during, end_reason FROM gangsched.allocations WHERE job = pg_temp.j('D') ORDER BY worker;
SELECT count(*) AS d_slots_held FROM gangsched.held_slots WHERE job = pg_temp.j('D');
CALL pg_temp.refused(format('SELECT gangsched.job_finished(%s, false)', pg_temp.j('D')));
SELECT gangsched.job_finished(pg_temp.j('C'), false, 'out of memory');
SELECT name, state, message FROM gangsched.gangs WHERE name = 'C';
TABLE violations;

-- a node going down requeues the jobs on it at their old queue position,
-- counting the GPU-seconds since the last checkpoint as lost
SELECT gangsched.job_started(pg_temp.j('A'), 'a1');
SET LOCAL gangsched.clock_override = '2030-01-01 00:20:00+00';
SELECT gangsched.job_checkpointed(pg_temp.j('A'));
SET LOCAL gangsched.clock_override = '2030-01-01 00:25:00+00';
SELECT gangsched.set_node_state('a1', 'down');
SELECT name, state, queue_pos, requeues, lost_gpu_seconds, reason, placed_at, started_at, started_nodes
  FROM gangsched.gangs WHERE name = 'A';
SELECT worker, during, end_reason FROM gangsched.allocations WHERE job = pg_temp.j('A') ORDER BY worker;
SELECT kind, reason, detail FROM gangsched.events WHERE job = pg_temp.j('A') ORDER BY id;
TABLE violations;

-- cancel ends a placed job's allocations too
SELECT gangsched.cancel(pg_temp.j('B'));
SELECT worker, during, end_reason FROM gangsched.allocations WHERE job = pg_temp.j('B') ORDER BY worker;
SELECT count(*) AS slots_held FROM gangsched.held_slots;
TABLE violations;
ROLLBACK;

-- A job that ends in the very instant it was placed (same transaction, or a
-- fixed virtual clock) still closes its allocations: [t, t], not an empty range.
BEGIN;
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'E');
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'F');
SELECT pg_temp.place('E', 'a1:0');
SELECT pg_temp.place('F', 'a1:1');
SELECT gangsched.cancel(pg_temp.j('E'));
SELECT gangsched.job_finished(pg_temp.j('F'), true);
SELECT job, during, isempty(during) AS empty, end_reason FROM gangsched.allocations ORDER BY job;
-- the slots are free again; a new holder at the same instant does not overlap
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'G');
SELECT pg_temp.place('G', 'a1:0');
TABLE violations;
ROLLBACK;

-- The round's set-based requeue (start timeouts, lost nodes) records the
-- work lost since the last checkpoint, on the job and in its event.
BEGIN;
SELECT gangsched.submit('t', 2, 2, pool => 'p', name => 'R');
SELECT pg_temp.place('R', 'a1:0,1 a2:0,1');
SELECT gangsched.job_started(pg_temp.j('R'), n) FROM unnest(ARRAY['a1', 'a2']) n;
SET LOCAL gangsched.clock_override = '2030-01-01 00:10:00+00';
SELECT gangsched._requeue_many(ARRAY[pg_temp.j('R')], 'start timeout') AS requeued;
SELECT name, state, requeues, lost_gpu_seconds, reason FROM gangsched.gangs WHERE name = 'R';
SELECT kind, reason, detail FROM gangsched.events WHERE job = pg_temp.j('R') ORDER BY id;
SELECT worker, during, end_reason FROM gangsched.allocations WHERE job = pg_temp.j('R') ORDER BY worker;
TABLE violations;
ROLLBACK;

/* ---------------- invariant 1: no device slice held twice ---------------- */

BEGIN;
SELECT gangsched.submit('t', 2, 2, pool => 'p', name => 'A');
SELECT gangsched.submit('t', 2, 0.5, pool => 'p', name => 'B');
SELECT pg_temp.place('A', 'a1:0,1 a1:2,3');
SELECT pg_temp.place('B', 'b1:1@0 b1:1@2');
TABLE violations;

-- the key over held slots refuses a second holder, whoever asks
CALL pg_temp.refused(format('INSERT INTO gangsched.held_slots VALUES (%s, 0, %s, 0)', pg_temp.node_id('a1'), pg_temp.j('B')));
CALL pg_temp.refused(format('INSERT INTO gangsched.held_slots VALUES (%s, 8 + 2, %s, 0)', pg_temp.node_id('b1'), pg_temp.j('A')));

-- a held slot that no current allocation accounts for
SAVEPOINT s;
INSERT INTO gangsched.held_slots VALUES (pg_temp.node_id('a2'), 0, pg_temp.j('A'), 0);
TABLE violations;
DELETE FROM gangsched.held_slots WHERE node_id = pg_temp.node_id('a2');
TABLE violations;
-- held for the right slot but the wrong worker
UPDATE gangsched.held_slots SET worker = 1 WHERE node_id = pg_temp.node_id('a1') AND slot = 0;
TABLE violations;
ROLLBACK TO s;

-- a slot of a current allocation missing from held_slots
DELETE FROM gangsched.held_slots WHERE node_id = pg_temp.node_id('a1') AND slot = 3 * 8;
TABLE violations;
INSERT INTO gangsched.held_slots VALUES (pg_temp.node_id('a1'), 3 * 8, pg_temp.j('A'), 1);
TABLE violations;

-- a held slot on a node that does not exist
INSERT INTO gangsched.held_slots VALUES (9999, 0, pg_temp.j('A'), 0);
TABLE violations;
DELETE FROM gangsched.held_slots WHERE node_id = 9999;
TABLE violations;

-- overlapping time ranges in the history: job H held a1's device 0 until
-- 01:00, but A has held it since 00:00
SAVEPOINT s;
SET LOCAL gangsched.clock_override = '2029-12-31 22:00:00+00';
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'H');
UPDATE gangsched.gangs SET state = 'finished', placed_at = '2029-12-31 23:00:00+00', finished_at = '2030-01-01 01:00:00+00'
 WHERE id = pg_temp.j('H');
INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus, mem_gb,
                                   net_gbps, borrowed, during, end_reason)
SELECT pg_temp.j('H'), 0, pg_temp.node_id('a1'), 1, '{0}', 0, 1, 1, 0, 0, 0, false,
       tstzrange('2029-12-31 23:00:00+00', '2030-01-01 01:00:00+00'), 'finished';
TABLE violations;
ROLLBACK TO s;
-- ... while a range that ends the instant the next begins is fine
SAVEPOINT s;
SET LOCAL gangsched.clock_override = '2029-12-31 22:00:00+00';
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'H');
UPDATE gangsched.gangs SET state = 'finished', placed_at = '2029-12-31 23:00:00+00', finished_at = '2030-01-01 00:00:00+00'
 WHERE id = pg_temp.j('H');
INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus, mem_gb,
                                   net_gbps, borrowed, during, end_reason)
SELECT pg_temp.j('H'), 0, pg_temp.node_id('a1'), 1, '{0}', 0, 1, 1, 0, 0, 0, false,
       tstzrange('2029-12-31 23:00:00+00', '2030-01-01 00:00:00+00'), 'finished';
TABLE violations;
ROLLBACK TO s;

-- a device index beyond the node's devices, and slices beyond the device's
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'I');
SELECT pg_temp.place('I', 'a2:4');
SELECT gangsched.submit('t', 1, 0.5, pool => 'p', name => 'K');
SELECT pg_temp.place('K', 'b1:3@3');
TABLE violations;
ROLLBACK;
TABLE violations;

/* ---------------- invariant 2: host resources not over-committed ---------------- */

BEGIN;
SELECT gangsched.submit('t', 1, 0, cpus => 10, mem_gb => 40, net_gbps => 5, pool => 'p', name => 'A');
SELECT gangsched.submit('t', 1, 0, cpus => 10, mem_gb => 20, net_gbps => 5, pool => 'p', name => 'B');
SELECT gangsched.submit('t', 2, 0, cpus => 1, mem_gb => 1, net_gbps => 3, pool => 'p', name => 'C');
SELECT pg_temp.place('A', 'c1');
TABLE violations;
SELECT pg_temp.place('B', 'c1');                       -- cpus 20 of 16
TABLE violations;
SELECT gangsched.job_finished(pg_temp.j('B'), true);   -- repaired by releasing B
TABLE violations;
SELECT pg_temp.place('C', 'c1 c1');                    -- network 11 of 10 Gbit/s
TABLE violations;
SELECT gangsched.cancel(pg_temp.j('C'));
TABLE violations;
ROLLBACK;

/* ---------------- invariant 3: live jobs hold exactly their workers, in shape ---------------- */

BEGIN;
SELECT gangsched.submit('t', 2, 2, cpus => 4, mem_gb => 16, pool => 'p', name => 'A');
-- too few allocations
SELECT pg_temp.place('A', 'a1:0,1');
TABLE violations;
SELECT pg_temp.place('A', 'a1:2,3');
TABLE violations;
-- a worker's allocation ended while the job stays placed
UPDATE gangsched.allocations SET during = tstzrange(lower(during), gangsched.now(), '[]'), end_reason = 'test'
 WHERE job = pg_temp.j('A') AND worker = 1;
DELETE FROM gangsched.held_slots WHERE job = pg_temp.j('A') AND worker = 1;
TABLE violations;
ROLLBACK;

BEGIN;
SELECT gangsched.submit('t', 2, 2, cpus => 4, mem_gb => 16, pool => 'p', name => 'A');
-- the same worker twice (ranks 0 and 0): the count is right but a rank is missing
SELECT pg_temp.place('A', 'a1:0,1');
INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus, mem_gb,
                                   net_gbps, borrowed, during)
SELECT job, 0, pg_temp.node_id('a2'), team_id, '{0,1}', 0, 1, gpus, cpus, mem_gb, net_gbps, false, during
  FROM gangsched.allocations WHERE job = pg_temp.j('A');
INSERT INTO gangsched.held_slots VALUES (pg_temp.node_id('a2'), 0, pg_temp.j('A'), 0), (pg_temp.node_id('a2'), 8, pg_temp.j('A'), 0);
TABLE violations;
ROLLBACK;

BEGIN;
-- per-worker resources that differ from the request
SELECT gangsched.submit('t', 1, 2, cpus => 4, mem_gb => 16, net_gbps => 1, pool => 'p', name => 'A');
SELECT gangsched.submit('t', 1, 0.5, gpu_model => 'a30', name => 'B');
SELECT gangsched.submit('t', 1, 1, gpu_model => 'a100', gpu_mem_gb => 40, name => 'C');
SELECT gangsched.submit('t', 1, 0, cpus => 2, mem_gb => 2, name => 'D');
SELECT pg_temp.place('A', 'a1:0,1');
SELECT pg_temp.place('B', 'b1:0@0');
SELECT pg_temp.place('C', 'a2:0');
SELECT pg_temp.place('D', 'c1');
TABLE violations;
SAVEPOINT s;
-- rows are append-only, so corruptions are written with the guard disabled
ALTER TABLE gangsched.allocations DISABLE TRIGGER allocations_update_guard;
UPDATE gangsched.allocations SET cpus = 3 WHERE job = pg_temp.j('A');
UPDATE gangsched.allocations SET slices = 1 WHERE job = pg_temp.j('B');
UPDATE gangsched.allocations SET devices = '{}' WHERE job = pg_temp.j('D');
ALTER TABLE gangsched.allocations ENABLE TRIGGER allocations_update_guard;
TABLE violations;
ROLLBACK TO s;
SAVEPOINT s;
ALTER TABLE gangsched.allocations DISABLE TRIGGER allocations_update_guard;
UPDATE gangsched.allocations SET devices = '{0}' WHERE job = pg_temp.j('A');        -- one device for two GPUs
UPDATE gangsched.allocations SET devices = '{0}', slices = 1, gpus = 0, cpus = 2, mem_gb = 2
 WHERE job = pg_temp.j('D');                                                       -- a device for a CPU-only worker
UPDATE gangsched.allocations SET node_id = pg_temp.node_id('q1') WHERE job = pg_temp.j('A');  -- outside its pool
ALTER TABLE gangsched.allocations ENABLE TRIGGER allocations_update_guard;
DELETE FROM gangsched.held_slots WHERE job IN (pg_temp.j('A'), pg_temp.j('D'));
INSERT INTO gangsched.held_slots VALUES (pg_temp.node_id('q1'), 0, pg_temp.j('A'), 0);
TABLE violations;
ROLLBACK TO s;
-- the model or device memory the job asked for
UPDATE gangsched.nodes SET gpu_model = 'v100', gpu_mem_gb = 16 WHERE name = 'a2';
TABLE violations;
ROLLBACK;

BEGIN;
-- topology: a tensor group split across nodes, a pipeline replica across
-- racks, a gang outside its span, a gang across pools
SELECT gangsched.submit('t', 2, 1, group_size => 2, name => 'A');
SELECT gangsched.submit('t', 4, 1, group_size => 1, stages => 2, stage_span => 'rack', name => 'B');
SELECT gangsched.submit('t', 2, 1, span => 'rack', name => 'C');
SELECT gangsched.submit('t', 2, 1, gpu_model => 'a100', name => 'D');
SELECT pg_temp.place('A', 'a1:0 a2:0');
SELECT pg_temp.place('B', 'a1:1 a2:1 a1:2 q1:0');
SELECT pg_temp.place('C', 'a1:3 q1:1');
SELECT pg_temp.place('D', 'a2:2 a2:3');
TABLE violations;
ROLLBACK;

BEGIN;
-- required locality on a node that does not cache the dataset
SELECT gangsched.submit('t', 2, 1, dataset => 'ds', locality => 'required', name => 'A');
SELECT pg_temp.place('A', 'a1:0 a2:0');
TABLE violations;
SELECT gangsched.cache_dataset('a2', 'ds');
TABLE violations;
ROLLBACK;

BEGIN;
-- jobs that are not live hold nothing: pending, nominated, final
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'A');
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'B');
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'C');
SELECT pg_temp.place('A', 'a1:0');
SELECT pg_temp.place('B', 'a1:1');
SELECT pg_temp.place('C', 'a1:2');
UPDATE gangsched.gangs SET state = 'pending' WHERE name = 'A';
UPDATE gangsched.gangs SET state = 'nominated' WHERE name = 'B';
UPDATE gangsched.gangs SET state = 'finished', finished_at = gangsched.now() WHERE name = 'C';
TABLE violations;
-- an allocation of a job that does not exist
INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus, mem_gb,
                                   net_gbps, borrowed, during)
VALUES (9999, 0, pg_temp.node_id('c1'), 1, '{}', 0, 0, 0, 1, 1, 0, false, tstzrange(gangsched.now(), NULL));
-- and one on a node that does not exist
INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus, mem_gb,
                                   net_gbps, borrowed, during)
SELECT id, 0, 9999, team_id, '{}', 0, 0, 0, 1, 1, 0, false, tstzrange(gangsched.now(), NULL)
  FROM gangsched.gangs WHERE name = 'A';
TABLE violations;
ROLLBACK;
TABLE violations;

/* ---------------- invariant 4: allocations inside the placed interval; history append-only ---------------- */

BEGIN;
SELECT gangsched.submit('t', 1, 0, cpus => 1, pool => 'p', name => 'A');
SELECT gangsched.submit('t', 1, 0, cpus => 1, pool => 'p', name => 'B');
SELECT pg_temp.place('A', 'c1');
SELECT pg_temp.place('B', 'c1');
TABLE violations;

-- what the guards refuse: rewriting any column, reopening or moving a range,
-- rewriting a closed row, deleting, truncating
CALL pg_temp.refused($$UPDATE gangsched.allocations SET cpus = 2$$);
CALL pg_temp.refused($$UPDATE gangsched.allocations SET during = tstzrange(lower(during) - interval '1 hour', NULL)$$);
CALL pg_temp.refused($$UPDATE gangsched.allocations SET during = tstzrange(lower(during) + interval '1 hour', upper(during) + interval '2 hours')$$);
CALL pg_temp.refused($$UPDATE gangsched.allocations SET job = job + 1000, during = tstzrange(lower(during), gangsched.now() + interval '1 hour')$$);
CALL pg_temp.refused($$DELETE FROM gangsched.allocations$$);
CALL pg_temp.refused($$DELETE FROM gangsched.allocations WHERE false$$);
CALL pg_temp.refused($$TRUNCATE gangsched.allocations$$);
CALL pg_temp.refused($$UPDATE gangsched.events SET reason = 'rewritten'$$);
CALL pg_temp.refused($$DELETE FROM gangsched.events$$);
CALL pg_temp.refused($$TRUNCATE gangsched.events$$);
-- closing an open range (and saying why) is the one change allowed ...
UPDATE gangsched.allocations SET during = tstzrange(lower(during), '2030-01-01 01:00:00+00'), end_reason = 'closed by hand'
 WHERE job = pg_temp.j('A');
SELECT job, during, end_reason FROM gangsched.allocations WHERE job = pg_temp.j('A');
-- ... and only once
CALL pg_temp.refused(format($$UPDATE gangsched.allocations SET during = tstzrange(lower(during), '2030-01-01 02:00:00+00') WHERE job = %s$$, pg_temp.j('A')));
CALL pg_temp.refused(format($$UPDATE gangsched.allocations SET end_reason = 'why not' WHERE job = %s$$, pg_temp.j('A')));
DELETE FROM gangsched.held_slots WHERE job = pg_temp.j('A');
UPDATE gangsched.gangs SET state = 'finished', finished_at = '2030-01-01 01:00:00+00' WHERE name = 'A';
TABLE violations;

-- allocations outside the placed interval: before submission, opened at
-- another time than the placement, ending after the job finished
SAVEPOINT s;
UPDATE gangsched.gangs SET finished_at = '2030-01-01 00:30:00+00' WHERE name = 'A';
UPDATE gangsched.gangs SET placed_at = placed_at + interval '5 minutes' WHERE name = 'B';
INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus, mem_gb,
                                   net_gbps, borrowed, during, end_reason)
SELECT id, 0, pg_temp.node_id('c1'), team_id, '{}', 0, 0, 0, 1, 0, 0, false,
       tstzrange(submitted_at - interval '1 day', submitted_at - interval '23 hours'), 'ancient'
  FROM gangsched.gangs WHERE name = 'A';
TABLE violations;
ROLLBACK TO s;

-- a guard that is disabled, or missing, is reported
SAVEPOINT s;
ALTER TABLE gangsched.allocations DISABLE TRIGGER allocations_update_guard;
ALTER TABLE gangsched.events DISABLE TRIGGER events_append_only;
TABLE violations;
ALTER TABLE gangsched.events ENABLE ALWAYS TRIGGER events_append_only;
ALTER TABLE gangsched.allocations ENABLE TRIGGER allocations_update_guard;
TABLE violations;
ALTER TABLE gangsched.allocations ENABLE REPLICA TRIGGER allocations_delete_guard;
TABLE violations;
ROLLBACK TO s;
SAVEPOINT s;
DROP TRIGGER allocations_delete_guard ON gangsched.allocations;
TABLE violations;
ROLLBACK TO s;
TABLE violations;
ROLLBACK;

/* ---------------- invariant 5: capacity held for a nominated job is not allocated to another ---------------- */

BEGIN;
SELECT gangsched.submit('t', 1, 2, cpus => 4, pool => 'p', name => 'V');       -- running on a1
SELECT gangsched.submit('t', 1, 0, cpus => 12, pool => 'p', name => 'W');      -- running on c1
SELECT gangsched.submit('t', 1, 4, cpus => 8, pool => 'p', name => 'N');       -- nominated, wants all of a1
SELECT gangsched.submit('t', 1, 0, cpus => 8, pool => 'p', name => 'M');       -- nominated, wants 8 cpus of c1
SELECT pg_temp.place('V', 'a1:0,1');
SELECT pg_temp.place('W', 'c1');
UPDATE gangsched.gangs SET state = 'running', started_at = placed_at WHERE name IN ('V', 'W');
UPDATE gangsched.gangs SET state = 'nominated' WHERE name IN ('N', 'M');
INSERT INTO gangsched.holds (job, worker, node_id, devices, first_slice, slices, cpus, mem_gb, net_gbps)
VALUES (pg_temp.j('N'), 0, pg_temp.node_id('a1'), '{0,1,2,3}', 0, 1, 8, 0, 0),
       (pg_temp.j('M'), 0, pg_temp.node_id('c1'), '{}', 0, 0, 8, 0, 0);
-- V holds slots 0 and 8 of a1 that are held for N; W holds cpus of c1
-- that, with M's, over-commit it
TABLE violations;
-- once V and W are N's and M's victims, draining, that is expected
UPDATE gangsched.gangs SET state = 'preempting', preempted_for = pg_temp.j('N'),
                           preempt_deadline = gangsched.now() + interval '1 minute' WHERE name = 'V';
UPDATE gangsched.gangs SET state = 'preempting', preempted_for = pg_temp.j('M'),
                           preempt_deadline = gangsched.now() + interval '1 minute' WHERE name = 'W';
TABLE violations;
-- a victim of another job does not excuse it
UPDATE gangsched.gangs SET preempted_for = pg_temp.j('M') WHERE name = 'V';
TABLE violations;
UPDATE gangsched.gangs SET preempted_for = pg_temp.j('N') WHERE name = 'V';
-- two nominated jobs holding one slot
SELECT gangsched.submit('t', 1, 1, pool => 'p', name => 'O');
UPDATE gangsched.gangs SET state = 'nominated' WHERE name = 'O';
INSERT INTO gangsched.holds (job, worker, node_id, devices, first_slice, slices, cpus, mem_gb, net_gbps)
VALUES (pg_temp.j('O'), 0, pg_temp.node_id('a1'), '{3}', 0, 1, 0, 0, 0);
TABLE violations;
-- holds of a job that is no longer nominated
DELETE FROM gangsched.holds WHERE job = pg_temp.j('O');
UPDATE gangsched.gangs SET state = 'pending' WHERE name = 'N';
TABLE violations;
-- cancelling the job drops what is held for it
SELECT gangsched.cancel(pg_temp.j('N'));
SELECT count(*) AS holds_of_n FROM gangsched.holds WHERE job = pg_temp.j('N');
UPDATE gangsched.gangs SET preempted_for = NULL WHERE name = 'V';
TABLE violations;
ROLLBACK;

/* ---------------- healthy again ---------------- */

SELECT count(*) AS jobs, (SELECT count(*) FROM gangsched.allocations) AS allocations,
       (SELECT count(*) FROM gangsched.held_slots) AS held_slots, (SELECT count(*) FROM gangsched.holds) AS holds
  FROM gangsched.gangs;
TABLE violations;
RESET gangsched.clock_override;
DROP VIEW violations;
DROP EXTENSION gangsched;
