-- Retention (docs/operations.md#retention): gangsched.archive_history(before)
-- moves the finished jobs that ended before the cutoff, with all their
-- allocations and events, into the archive tables, and nothing else; the
-- analyst functions give the same answers for windows inside the retained
-- history; check_invariants() stays empty; non-operators are refused; the
-- guards still refuse every DELETE outside the function and every row that
-- is not closed history older than the cutoff inside it.
--
-- The story in virtual time, three nodes of 4 GPUs (n3 goes down and stays
-- down), teams a and b with 4 GPUs of quota each; the cutoff is 2030-01-02:
--   day 1  00:00  a1 (a, 2 x 1) and b1 (b, 1 x 4) placed
--          01:00  a1 finishes
--          02:00  b2 (b, 1 x 2) placed: still running at the end (open)
--          03:00  b1 fails
--          04:00  a2 (a, 3 x 4, queue timeout 10 min) waits (b2 holds 2 of the
--                 12 GPUs); expires 04:10
--          05:00  n3 goes down (its state change stays in force)
--          23:00  a3 (a, 1 x 1) placed
--   day 2  00:30  a3 finishes (after the cutoff: stays, although it began before)
--          01:00  a4 (a, 1 x 2) placed; 02:00 a4 finishes
--          03:00  a5 (a, 1 x 1) submitted, cancelled at 03:05 without a placement
--          12:00  the archive runs
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET extra_float_digits = 0;
SET gangsched.start_timeout = '1d';

CREATE FUNCTION pg_temp.at(t text) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT set_config('gangsched.clock_override', t || '+00', false)::timestamptz $$;
CREATE FUNCTION pg_temp.id(job_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT id FROM gangsched.gangs WHERE name = job_name $$;
-- a round, then the agents confirm every placed job
CREATE FUNCTION pg_temp.round() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    SELECT r.placed INTO n FROM gangsched.run_round() r;
    PERFORM gangsched.job_started(p.job, p.node)
       FROM (SELECT DISTINCT pl.job, pl.node FROM gangsched.placements pl
               JOIN gangsched.gangs g ON g.id = pl.job WHERE g.state = 'placed') p;
    RETURN n;
END $$;
-- Run a statement that must be refused (as role `who`, or as the current
-- user when NULL); report its SQLSTATE, message, detail and hint.
CREATE PROCEDURE pg_temp.refused(who name, cmd text) LANGUAGE plpgsql AS $$
DECLARE
    st  text;
    msg text;
    det text;
    hnt text;
BEGIN
    BEGIN
        IF who IS NOT NULL THEN
            EXECUTE format('SET ROLE %I', who);
        END IF;
        EXECUTE cmd;
        RESET ROLE;
        RAISE NOTICE 'ACCEPTED, but it should have been refused';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        RESET ROLE;
        RAISE NOTICE '%: %', st, msg USING DETAIL = COALESCE(NULLIF(det, ''), '(none)'), HINT = COALESCE(NULLIF(hnt, ''), '(none)');
    END;
END $$;

SELECT pg_temp.at('2030-01-01 00:00');
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 4, 'a100', 80) FROM generate_series(1, 3) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 4), gangsched.set_quota('b', 'main', 4);

SELECT gangsched.submit('a', 2, 1, name => 'a1'), gangsched.submit('b', 1, 4, name => 'b1');
SELECT pg_temp.round();
SELECT pg_temp.at('2030-01-01 01:00');
SELECT gangsched.job_finished(pg_temp.id('a1'), true);
SELECT pg_temp.at('2030-01-01 02:00');
SELECT gangsched.submit('b', 1, 2, name => 'b2');
SELECT pg_temp.round();
SELECT pg_temp.at('2030-01-01 03:00');
SELECT gangsched.job_finished(pg_temp.id('b1'), false, 'out of memory');
SELECT pg_temp.at('2030-01-01 04:00');
SELECT gangsched.submit('a', 3, 4, name => 'a2', queue_timeout => '10 min');
SELECT pg_temp.round();
SELECT pg_temp.at('2030-01-01 04:10');
SELECT pg_temp.round();
SELECT pg_temp.at('2030-01-01 05:00');
SELECT gangsched.set_node_state(name, 'down') FROM gangsched.nodes
 WHERE name NOT IN (SELECT node FROM gangsched.placements) ORDER BY name DESC LIMIT 1;
SELECT pg_temp.at('2030-01-01 23:00');
SELECT gangsched.submit('a', 1, 1, name => 'a3');
SELECT pg_temp.round();
SELECT pg_temp.at('2030-01-02 00:30');
SELECT gangsched.job_finished(pg_temp.id('a3'), true);
SELECT pg_temp.at('2030-01-02 01:00');
SELECT gangsched.submit('a', 1, 2, name => 'a4');
SELECT pg_temp.round();
SELECT pg_temp.at('2030-01-02 02:00');
SELECT gangsched.job_finished(pg_temp.id('a4'), true);
SELECT pg_temp.at('2030-01-02 03:00');
SELECT gangsched.submit('a', 1, 1, name => 'a5', queue_timeout => '1 hour');
SELECT pg_temp.at('2030-01-02 03:05');
SELECT gangsched.cancel(pg_temp.id('a5'));
SELECT pg_temp.at('2030-01-02 12:00');
-- an operator, an analyst and a portal of team a
CREATE ROLE gs51_op;
CREATE ROLE gs51_an;
CREATE ROLE gs51_pv;
GRANT gangsched_operator TO gs51_op;
GRANT gangsched_analyst TO gs51_an;
SELECT gangsched.add_member('gs51_pv', 'a');

SELECT name, state, submitted_at, finished_at FROM gangsched.gangs ORDER BY id;
SELECT name, state, state_since FROM gangsched.nodes ORDER BY id;
SELECT * FROM gangsched.check_invariants();

/* ---------------- what the analysts see of the retained window, before ---------------- */

-- Every analyst answer for windows that begin at the cutoff or later, and
-- the history views' rows from the cutoff on, kept to compare after.
CREATE TEMP TABLE answers_before AS
SELECT 'usage' AS f, u::text AS r FROM gangsched.usage('2030-01-02 00:00+00', '2030-01-02 12:00+00', '1 hour') u
UNION ALL SELECT 'usage 30m', u::text FROM gangsched.usage('2030-01-02 00:00+00', '2030-01-02 03:00+00', '30 minutes') u
UNION ALL SELECT 'utilization', u::text FROM gangsched.utilization('2030-01-02 00:00+00', '2030-01-02 12:00+00', '1 hour') u
UNION ALL SELECT 'snapshot 00:15', s::text FROM gangsched.snapshot('2030-01-02 00:15+00') s
UNION ALL SELECT 'snapshot 01:30', s::text FROM gangsched.snapshot('2030-01-02 01:30+00') s
UNION ALL SELECT 'queue_waits', q::text FROM gangsched.queue_waits('2030-01-02 00:00+00', '2030-01-02 12:00+00') q
UNION ALL SELECT 'preemption_summary', p::text FROM gangsched.preemption_summary('2030-01-02 00:00+00', '2030-01-02 12:00+00') p
UNION ALL SELECT 'queue_depth', q::text FROM gangsched.queue_depth('2030-01-02 00:00+00', '2030-01-02 12:00+00', '1 hour') q
UNION ALL SELECT 'allocation_history', h::text FROM gangsched.allocation_history h WHERE upper(h.during) >= '2030-01-02' OR upper_inf(h.during)
UNION ALL SELECT 'event_log', e::text FROM gangsched.event_log e WHERE e.at >= '2030-01-02';
-- the first day, which the archive will take out of the live tables
SELECT team, gpu_hours, capacity_gpu_hours FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-02 00:00+00', '1 day');
-- the capacity of the retained window: n3 is down all of it (2 x 4 GPUs)
SELECT DISTINCT capacity_gpus FROM gangsched.utilization('2030-01-02 00:00+00', '2030-01-02 12:00+00', '1 hour');

-- every row as it is, to account for each one after
CREATE TEMP TABLE alloc_before AS SELECT * FROM gangsched.allocations;
CREATE TEMP TABLE events_before AS SELECT * FROM gangsched.events;
CREATE TEMP TABLE gangs_before AS SELECT * FROM gangsched.gangs;

/* ---------------- who may archive ---------------- */

CALL pg_temp.refused('gs51_an', $$SELECT * FROM gangsched.archive_history('2030-01-02')$$);
CALL pg_temp.refused('gs51_pv', $$SELECT * FROM gangsched.archive_history('2030-01-02')$$);
CALL pg_temp.refused('gs51_pv', $$SELECT * FROM gangsched.purge_archive('2030-01-02')$$);
-- EXECUTE granted by hand does not make an analyst an operator
GRANT EXECUTE ON FUNCTION gangsched.archive_history(timestamptz, bool), gangsched.purge_archive(timestamptz) TO gs51_an;
CALL pg_temp.refused('gs51_an', $$SELECT * FROM gangsched.archive_history('2030-01-02')$$);
CALL pg_temp.refused('gs51_an', $$SELECT * FROM gangsched.purge_archive('2030-01-02')$$);
REVOKE EXECUTE ON FUNCTION gangsched.archive_history(timestamptz, bool), gangsched.purge_archive(timestamptz) FROM gs51_an;
-- the archive tables: operators read them, analysts and portals do not
CALL pg_temp.refused('gs51_an', $$SELECT count(*) FROM gangsched.allocations_archive$$);
CALL pg_temp.refused('gs51_pv', $$SELECT count(*) FROM gangsched.gangs_archive$$);
-- an analyst reads the horizon (none yet)
SET ROLE gs51_an;
SELECT gangsched.history_horizon();
RESET ROLE;

/* ---------------- bad cutoffs ---------------- */

CALL pg_temp.refused(NULL, $$SELECT * FROM gangsched.archive_history(NULL)$$);
CALL pg_temp.refused(NULL, $$SELECT * FROM gangsched.archive_history('2030-01-02 12:00:01+00')$$);
CALL pg_temp.refused(NULL, $$SELECT * FROM gangsched.archive_history('infinity')$$);
CALL pg_temp.refused(NULL, $$SELECT * FROM gangsched.archive_history('2030-01-02', discard => NULL)$$);
CALL pg_temp.refused(NULL, $$SELECT * FROM gangsched.purge_archive(NULL)$$);
-- nothing moved
SELECT (SELECT count(*) FROM gangsched.allocations_archive) AS allocations_archived,
       (SELECT count(*) FROM gangsched.events_archive) AS events_archived,
       (SELECT count(*) FROM gangsched.gangs_archive) AS jobs_archived;

/* ---------------- the guards outside the function ---------------- */

CALL pg_temp.refused(NULL, format($$DELETE FROM gangsched.allocations WHERE job = %s$$, pg_temp.id('a1')));
CALL pg_temp.refused(NULL, $$DELETE FROM gangsched.events WHERE at < '2030-01-02'$$);
CALL pg_temp.refused(NULL, format($$DELETE FROM gangsched.gangs WHERE id = %s$$, pg_temp.id('a1')));
CALL pg_temp.refused(NULL, $$TRUNCATE gangsched.gangs$$);
CALL pg_temp.refused(NULL, $$TRUNCATE gangsched.allocations$$);
CALL pg_temp.refused(NULL, $$TRUNCATE gangsched.events$$);
-- the door open (as only archive_history opens it), the rows themselves:
-- an open allocation, a closed one ending after the cutoff, a recent event,
-- a live job are refused; TRUNCATE still is
BEGIN;
SELECT gangsched._archive_begin('2030-01-02');
CALL pg_temp.refused(NULL, format($$DELETE FROM gangsched.allocations WHERE job = %s$$, pg_temp.id('b2')));
CALL pg_temp.refused(NULL, format($$DELETE FROM gangsched.allocations WHERE job = %s$$, pg_temp.id('a3')));
CALL pg_temp.refused(NULL, $$DELETE FROM gangsched.events WHERE at >= '2030-01-02'$$);
CALL pg_temp.refused(NULL, format($$DELETE FROM gangsched.gangs WHERE id = %s$$, pg_temp.id('b2')));
CALL pg_temp.refused(NULL, format($$DELETE FROM gangsched.gangs WHERE id = %s$$, pg_temp.id('a4')));
CALL pg_temp.refused(NULL, $$TRUNCATE gangsched.allocations$$);
ROLLBACK;
-- a subtransaction that opened the door and rolled back closed it
BEGIN;
SAVEPOINT s;
SELECT gangsched._archive_begin('2030-01-02');
ROLLBACK TO s;
SELECT gangsched._archive_cutoff() IS NULL AS closed;
CALL pg_temp.refused(NULL, format($$DELETE FROM gangsched.allocations WHERE job = %s$$, pg_temp.id('a1')));
ROLLBACK;

/* ---------------- history an invariant still needs is not moved ---------------- */

-- an old allocation of a1 that overlaps b1's on slot 0 of b1's node
BEGIN;
INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus, mem_gb,
                                   net_gbps, borrowed, during, end_reason)
SELECT pg_temp.id('a1'), 0, a.node_id, 1, '{0}', 0, 1, 1, 0, 0, 0, false,
       tstzrange('2030-01-01 00:30+00', '2030-01-01 00:45+00'), 'forged'
  FROM gangsched.allocations a WHERE a.job = pg_temp.id('b1');
SELECT invariant, detail FROM gangsched.check_invariants();
CALL pg_temp.refused('gs51_op', $$SELECT * FROM gangsched.archive_history('2030-01-02')$$);
ROLLBACK;
-- a column added to a live table and not to its archive
BEGIN;
ALTER TABLE gangsched.events ADD COLUMN extra int;
CALL pg_temp.refused('gs51_op', $$SELECT * FROM gangsched.archive_history('2030-01-02')$$);
ROLLBACK;

-- a job a live victim still names as its preemptor stays (b2 made a victim of a1 by hand)
BEGIN;
UPDATE gangsched.gangs SET state = 'preempting', preempted_for = pg_temp.id('a1'),
                           preempt_deadline = gangsched.now() + interval '1 minute' WHERE name = 'b2';
SELECT * FROM gangsched.archive_history('2030-01-02');
SELECT name FROM gangsched.gangs_archive ORDER BY id;
SELECT * FROM gangsched.check_invariants();
ROLLBACK;

/* ---------------- archiving ---------------- */

SET ROLE gs51_op;
SELECT * FROM gangsched.archive_history('2030-01-02');
RESET ROLE;

-- the jobs that moved: those that ended before the cutoff (a1, b1, a2);
-- a3 (began before it, ended after), b2 (running), a4 and a5 stay
SELECT name, state, finished_at FROM gangsched.gangs_archive ORDER BY id;
SELECT name, state FROM gangsched.gangs ORDER BY id;
-- each allocation is in exactly one place; the archived ones are exactly
-- the rows of the jobs that ended before the cutoff
SELECT (SELECT count(*) FROM alloc_before) AS before,
       (SELECT count(*) FROM gangsched.allocations) AS live,
       (SELECT count(*) FROM gangsched.allocations_archive) AS archived,
       (SELECT count(*) FROM (SELECT * FROM alloc_before
                              EXCEPT ALL (SELECT * FROM gangsched.allocations UNION ALL SELECT * FROM gangsched.allocations_archive)) x) AS lost,
       (SELECT count(*) FROM (SELECT * FROM gangsched.allocations_archive
                              EXCEPT ALL SELECT a.* FROM alloc_before a JOIN gangs_before g ON g.id = a.job
                                          WHERE g.finished_at < '2030-01-02') x) AS archived_but_not_old,
       (SELECT count(*) FROM gangsched.allocations a JOIN gangs_before g ON g.id = a.job
         WHERE g.finished_at < '2030-01-02') AS old_left;
SELECT g.name, a.worker, a.during, a.end_reason FROM gangsched.allocations_archive a JOIN gangsched.gangs_archive g ON g.id = a.job
 ORDER BY a.id;
-- the open allocation of the running job b2 and a3's, which began before the cutoff, are live
SELECT g.name, a.worker, a.during FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job ORDER BY a.id;
-- events: the moved jobs' own and the job-less ones older than the cutoff,
-- but the quota changes and n3's state change still in force stay
SELECT e.kind, g.name AS job, e.reason FROM gangsched.events_archive e LEFT JOIN gangsched.gangs_archive g ON g.id = e.job ORDER BY e.id;
SELECT e.at, e.kind, g.name AS job, e.reason FROM gangsched.events e LEFT JOIN gangsched.gangs g ON g.id = e.job
 WHERE e.at < '2030-01-02' ORDER BY e.id;
SELECT (SELECT count(*) FROM (SELECT * FROM events_before
                              EXCEPT ALL (SELECT * FROM gangsched.events UNION ALL SELECT * FROM gangsched.events_archive)) x) AS events_lost,
       (SELECT count(*) FROM gangsched.events_archive WHERE at >= '2030-01-02') AS recent_archived,
       (SELECT count(*) FROM (SELECT * FROM gangs_before
                              EXCEPT ALL (SELECT * FROM gangsched.gangs UNION ALL SELECT * FROM gangsched.gangs_archive)) x) AS jobs_lost;
-- the run is an event: who, the cutoff, the counts
SELECT kind, actor, reason, detail FROM gangsched.events WHERE kind = 'history_archived';
SET ROLE gs51_an;
SELECT gangsched.history_horizon();
RESET ROLE;
SELECT * FROM gangsched.check_invariants();

/* ---------------- the analysts' answers for the retained window, after ---------------- */

CREATE TEMP TABLE answers_after AS
SELECT 'usage' AS f, u::text AS r FROM gangsched.usage('2030-01-02 00:00+00', '2030-01-02 12:00+00', '1 hour') u
UNION ALL SELECT 'usage 30m', u::text FROM gangsched.usage('2030-01-02 00:00+00', '2030-01-02 03:00+00', '30 minutes') u
UNION ALL SELECT 'utilization', u::text FROM gangsched.utilization('2030-01-02 00:00+00', '2030-01-02 12:00+00', '1 hour') u
UNION ALL SELECT 'snapshot 00:15', s::text FROM gangsched.snapshot('2030-01-02 00:15+00') s
UNION ALL SELECT 'snapshot 01:30', s::text FROM gangsched.snapshot('2030-01-02 01:30+00') s
UNION ALL SELECT 'queue_waits', q::text FROM gangsched.queue_waits('2030-01-02 00:00+00', '2030-01-02 12:00+00') q
UNION ALL SELECT 'preemption_summary', p::text FROM gangsched.preemption_summary('2030-01-02 00:00+00', '2030-01-02 12:00+00') p
UNION ALL SELECT 'queue_depth', q::text FROM gangsched.queue_depth('2030-01-02 00:00+00', '2030-01-02 12:00+00', '1 hour') q
UNION ALL SELECT 'allocation_history', h::text FROM gangsched.allocation_history h WHERE upper(h.during) >= '2030-01-02' OR upper_inf(h.during)
UNION ALL SELECT 'event_log', e::text FROM gangsched.event_log e WHERE e.at >= '2030-01-02' AND e.kind <> 'history_archived';
-- the same answers, row for row (and each function answered something)
SELECT f, count(*) AS rows FROM answers_before GROUP BY f ORDER BY f;
SELECT * FROM (SELECT * FROM answers_before EXCEPT ALL SELECT * FROM answers_after) x
UNION ALL
SELECT * FROM (SELECT * FROM answers_after EXCEPT ALL SELECT * FROM answers_before) y;
-- n3 is still down in the retained window: its state change stayed
SELECT DISTINCT capacity_gpus FROM gangsched.utilization('2030-01-02 00:00+00', '2030-01-02 12:00+00', '1 hour');
-- the first day is no longer in the live tables (a3 only, from 23:00)
SELECT team, gpu_hours FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-02 00:00+00', '1 day');

/* ---------------- again, later, and discarding ---------------- */

-- the same cutoff again moves nothing (but its run is recorded)
SELECT * FROM gangsched.archive_history('2030-01-02');
-- b2 finishes; a cutoff after a3, a4 and a5 ended, discarding: they go, b2
-- (ended after the cutoff) stays
SELECT gangsched.job_finished(pg_temp.id('b2'), true);
SELECT pg_temp.at('2030-01-03 00:00');
SELECT * FROM gangsched.archive_history('2030-01-02 06:00', discard => true);
SELECT name, state FROM gangsched.gangs ORDER BY id;
SELECT count(*) AS archived_jobs FROM gangsched.gangs_archive;
SELECT kind, actor, detail->>'before' AS before, detail->'jobs' AS jobs, detail->'discarded' AS discarded
  FROM gangsched.events WHERE kind = 'history_archived' ORDER BY id;
SELECT gangsched.history_horizon();
SELECT * FROM gangsched.check_invariants();

/* ---------------- exporting and purging the archive ---------------- */

COPY (SELECT id, name, state, finished_at FROM gangsched.gangs_archive ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER);
SET ROLE gs51_op;
SELECT * FROM gangsched.purge_archive('2030-01-01 02:00');
SELECT name FROM gangsched.gangs_archive ORDER BY id;
SELECT * FROM gangsched.purge_archive('2030-01-03');
RESET ROLE;
SELECT (SELECT count(*) FROM gangsched.gangs_archive) AS jobs, (SELECT count(*) FROM gangsched.allocations_archive) AS allocations,
       (SELECT count(*) FROM gangsched.events_archive) AS events;
SELECT kind, actor, reason FROM gangsched.events WHERE kind = 'archive_purged' ORDER BY id;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
DROP ROLE gs51_op, gs51_an, gs51_pv;
