/* ------------------------------------------------------------------ */
/* Retention: moving old history out of the live tables                */
/* (docs/operations.md#retention, docs/storage.md#retention)           */
/* ------------------------------------------------------------------ */

-- The unit of retention is a finished job: gangsched.archive_history(before)
-- moves every job that ended (finished, failed, cancelled, expired) before
-- the cutoff, with all its allocations and all its events, into the
-- *_archive tables (or deletes them, discard => true), and the events with
-- no job older than the cutoff, except the quota and node-state changes
-- still in force at the cutoff. A job moves only as a whole, and only when
-- none of its allocations is open or ended at or after the cutoff and none
-- of its events is that recent: so what stays is exactly the jobs that are
-- live or ended at or after the cutoff, with all their rows, and every
-- invariant and every analyst function over a window that begins at or
-- after the cutoff sees what it saw before (docs/analytics.md#retention).

-- The archive door (src/retention.c): _archive_begin(cutoff) opens it for
-- the rest of the calling (sub)transaction or until _archive_end();
-- _archive_cutoff() is the open run's cutoff, NULL when closed. Internal:
-- only the extension's owner may call them.
CREATE FUNCTION gangsched._archive_begin(cutoff timestamptz) RETURNS void
LANGUAGE C VOLATILE STRICT AS 'MODULE_PATHNAME', 'gs_archive_begin';
CREATE FUNCTION gangsched._archive_end() RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_archive_end';
CREATE FUNCTION gangsched._archive_cutoff() RETURNS timestamptz
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_archive_cutoff';

-- The row guards: while the door is open (the statement guards of
-- 10_schema.sql let the DELETE through) each deleted row must be closed
-- history older than the cutoff; with the door closed every row is
-- refused. The rule is each trigger's WHEN clause, so a row that may go
-- costs no function call. No hot path deletes from these tables: a round,
-- submit or release never evaluates them.
CREATE FUNCTION gangsched._archive_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_LEVEL = 'STATEMENT' THEN
        RAISE EXCEPTION '% on gangsched.% is refused', TG_OP, TG_TABLE_NAME
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Jobs leave gangsched.gangs only with their history, through gangsched.archive_history().',
                  HINT = 'Move old history with gangsched.archive_history(before).';
    END IF;
    RAISE EXCEPTION 'row % of gangsched.% may not be removed', OLD.id, TG_TABLE_NAME
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = CASE WHEN gangsched._archive_cutoff() IS NULL
                            THEN format('Rows of gangsched.%I are removed only by gangsched.archive_history().', TG_TABLE_NAME)
                            ELSE format('Only closed history older than the cutoff %s may be removed.', gangsched._archive_cutoff()) END,
              HINT = 'Move old history with gangsched.archive_history(before); open allocations, live jobs and rows at or after the cutoff stay.';
END $$;

CREATE TRIGGER allocations_archive_guard
    BEFORE DELETE ON gangsched.allocations FOR EACH ROW
    WHEN (NOT COALESCE(upper(OLD.during) < gangsched._archive_cutoff(), false))
    EXECUTE FUNCTION gangsched._archive_guard();
CREATE TRIGGER events_archive_guard
    BEFORE DELETE ON gangsched.events FOR EACH ROW
    WHEN (NOT COALESCE(OLD.at < gangsched._archive_cutoff(), false))
    EXECUTE FUNCTION gangsched._archive_guard();
CREATE TRIGGER gangs_archive_guard
    BEFORE DELETE ON gangsched.gangs FOR EACH ROW
    WHEN (NOT COALESCE(OLD.state IN ('finished', 'failed', 'cancelled', 'expired')
                       AND OLD.finished_at < gangsched._archive_cutoff(), false))
    EXECUTE FUNCTION gangsched._archive_guard();
CREATE TRIGGER gangs_truncate_guard
    BEFORE TRUNCATE ON gangsched.gangs FOR EACH STATEMENT
    EXECUTE FUNCTION gangsched._archive_guard();

-- The archive: the same columns as the live tables (the generated f_*
-- columns of gangs as plain ones; no identity, no defaults, no triggers).
-- Not append-only: gangsched.purge_archive() trims it once exported.
-- Registered for pg_dump (97_dump.sql). A column added to gangs,
-- allocations or events must be added to its archive too, in the same
-- position (archive_history() refuses to run until it is).
CREATE TABLE gangsched.gangs_archive (LIKE gangsched.gangs);
ALTER TABLE gangsched.gangs_archive ADD PRIMARY KEY (id);
CREATE INDEX gangs_archive_finished_idx ON gangsched.gangs_archive (finished_at);
CREATE TABLE gangsched.allocations_archive (LIKE gangsched.allocations);
CREATE INDEX allocations_archive_job_idx ON gangsched.allocations_archive (job);
CREATE TABLE gangsched.events_archive (LIKE gangsched.events);
CREATE INDEX events_archive_at_idx ON gangsched.events_archive USING brin (at);
CREATE INDEX events_archive_job_idx ON gangsched.events_archive (job) WHERE job IS NOT NULL;

-- The archive runs' own events (history_horizon() reads the latest).
CREATE INDEX events_archived_idx ON gangsched.events (at) WHERE kind = 'history_archived';

-- NULL when each live table and its archive have the same columns in the
-- same order; otherwise which differ.
CREATE FUNCTION gangsched._archive_columns_differ() RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT string_agg(format('gangsched.%s and gangsched.%s_archive', t.name, t.name), ', ')
      FROM (VALUES ('gangs'), ('allocations'), ('events')) t(name)
     WHERE (SELECT array_agg(a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
              FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = ('gangsched.' || t.name)::regclass AND a.attnum > 0 AND NOT a.attisdropped)
           IS DISTINCT FROM
           (SELECT array_agg(a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
              FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = ('gangsched.' || t.name || '_archive')::regclass AND a.attnum > 0 AND NOT a.attisdropped)
$$;

-- Checks a cutoff given to archive_history() or purge_archive().
CREATE FUNCTION gangsched._check_cutoff(before timestamptz, what text, future_ok bool) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF before IS NULL THEN
        RAISE EXCEPTION 'the cutoff of % must not be null', what
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Give a time in the past, such as gangsched.now() - interval ''90 days''.';
    END IF;
    IF NOT isfinite(before) THEN
        RAISE EXCEPTION 'the cutoff of % must be a finite timestamp, not %', what, before
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give a time in the past, such as gangsched.now() - interval ''90 days''.';
    END IF;
    IF NOT future_ok AND before > gangsched.now() THEN
        RAISE EXCEPTION 'the cutoff of % is in the future: % is after the scheduler''s clock, %', what, before, gangsched.now()
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Only history that ended before the cutoff is moved, and nothing has ended after now.',
                  HINT = 'Give a time in the past, such as gangsched.now() - interval ''90 days''.';
    END IF;
END $$;

-- Operators: move (or, with discard, delete) the finished jobs that ended
-- before `before`, with their allocations and events, and the job-less
-- events older than `before` that no longer describe the present. Returns
-- what it moved; records an event 'history_archived' with the cutoff, the
-- counts and (events.actor) who ran it. One run at a time; rounds, submits
-- and releases go on meanwhile (it locks only the finished jobs it moves).
-- jit is off: the slot expansion's estimates look costly enough to compile
-- (0.7 s a statement, measured on a run that moved six jobs).
CREATE FUNCTION gangsched.archive_history(before timestamptz, discard bool DEFAULT false)
RETURNS TABLE (jobs bigint, allocations bigint, events bigint)
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    ids     bigint[];
    n_jobs  bigint;
    n_alloc bigint;
    n_ev    bigint;
    differ  text;
    bad     record;
BEGIN
    PERFORM gangsched._require_operator('archive history');
    PERFORM gangsched._check_cutoff(before, 'archive_history', false);
    IF discard IS NULL THEN
        RAISE EXCEPTION 'discard must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass discard => false to keep the rows in the archive tables, true to delete them.';
    END IF;
    differ := gangsched._archive_columns_differ();
    IF differ IS NOT NULL THEN
        RAISE EXCEPTION 'the archive tables do not match the live tables: %', differ
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Rows are moved column by column; an archive table needs its live table''s columns in the same order.',
                  HINT = 'Add the missing columns to the archive table (ALTER TABLE … ADD COLUMN, as the extension''s owner).';
    END IF;
    -- one run at a time (a self-conflicting lock only the owner may take)
    LOCK TABLE gangsched.gangs_archive IN SHARE ROW EXCLUSIVE MODE;

    -- the jobs that go: ended before the cutoff, every allocation closed
    -- before it, every event older, no live job pointing at it
    SELECT COALESCE(array_agg(s.id ORDER BY s.id), '{}') INTO ids
      FROM (SELECT g.id FROM gangsched.gangs g
             WHERE g.state IN ('finished', 'failed', 'cancelled', 'expired') AND g.finished_at < before
               AND NOT EXISTS (SELECT FROM gangsched.allocations a
                                WHERE a.job = g.id AND NOT COALESCE(upper(a.during) < before, false))
               AND NOT EXISTS (SELECT FROM gangsched.events e WHERE e.job = g.id AND e.at >= before)
               -- a live victim still names its preemptor (invariant 5); NOT IN
               -- over the few live jobs, hashed once (an anti-join may probe
               -- the live jobs once per finished job)
               AND g.id NOT IN (SELECT v.preempted_for FROM gangsched.gangs v
                                 WHERE v.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
                                   AND v.preempted_for IS NOT NULL)
               FOR UPDATE OF g) s;

    -- rows an invariant still needs stay: if an allocation that would go
    -- overlaps another on a slot (invariant 1; compared with everything
    -- that began before the cutoff) or lies outside its job's interval
    -- (invariant 4), nothing moves
    SELECT o.* INTO bad FROM (
        SELECT h.job, h.prev_job, h.node_id, h.slot, h.lo, h.prev_hi, NULL::text AS what
          FROM (SELECT x.job, x.node_id, x.slot, lower(x.during) AS lo,
                       lag(x.job) OVER w AS prev_job, lag(upper(x.during)) OVER w AS prev_hi
                  FROM (SELECT a.job, a.node_id, s.slot, a.during
                          FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s
                         WHERE lower(a.during) < before) x
                WINDOW w AS (PARTITION BY x.node_id, x.slot ORDER BY lower(x.during), upper(x.during))) h
         WHERE h.prev_hi > h.lo AND (h.job IN (SELECT unnest(ids)) OR h.prev_job IN (SELECT unnest(ids)))
        UNION ALL
        SELECT a.job, NULL, a.node_id, NULL, lower(a.during), upper(a.during), 'outside'
          FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
         WHERE a.job IN (SELECT unnest(ids)) AND (lower(a.during) < g.submitted_at OR upper(a.during) > g.finished_at)
         LIMIT 1) o;
    IF FOUND THEN
        RAISE EXCEPTION 'history before % is not archived: allocations of job % break an invariant', before, bad.job
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN bad.what IS NULL
                                THEN format('Jobs %s and %s held slot %s of node #%s at overlapping times (until %s, from %s).',
                                            bad.prev_job, bad.job, bad.slot, bad.node_id, bad.prev_hi, bad.lo)
                                ELSE format('An allocation [%s, %s) lies outside the job''s submitted-to-finished interval.', bad.lo, bad.prev_hi) END,
                  HINT = 'See SELECT * FROM gangsched.check_invariants(); history an invariant still needs is not moved.';
    END IF;

    PERFORM gangsched._archive_begin(before);
    n_jobs := cardinality(ids);
    IF discard THEN
        DELETE FROM gangsched.allocations a WHERE a.job IN (SELECT unnest(ids));
        GET DIAGNOSTICS n_alloc = ROW_COUNT;
    ELSE
        WITH d AS (DELETE FROM gangsched.allocations a WHERE a.job IN (SELECT unnest(ids)) RETURNING a.*)
        INSERT INTO gangsched.allocations_archive SELECT * FROM d;
        GET DIAGNOSTICS n_alloc = ROW_COUNT;
    END IF;

    -- events: the jobs' own, then those older than the cutoff that belong
    -- to no job left, except the last quota change of each team and pool
    -- and the last state change of each node before the cutoff (still in
    -- force: usage() and utilization() read them)
    IF discard THEN
        DELETE FROM gangsched.events e WHERE e.job IN (SELECT unnest(ids));
    ELSE
        WITH d AS (DELETE FROM gangsched.events e WHERE e.job IN (SELECT unnest(ids)) RETURNING e.*)
        INSERT INTO gangsched.events_archive SELECT * FROM d;
    END IF;
    GET DIAGNOSTICS n_ev = ROW_COUNT;
    WITH d AS (
        DELETE FROM gangsched.events e
         WHERE e.at < before
           AND (e.job IS NULL OR NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id = e.job))
           AND e.id NOT IN (SELECT DISTINCT ON (q.team_id, q.detail->>'pool') q.id FROM gangsched.events q
                             WHERE q.kind = 'quota' AND q.at < before
                             ORDER BY q.team_id, q.detail->>'pool', q.at DESC, q.id DESC)
           AND e.id NOT IN (SELECT DISTINCT ON (q.node_id) q.id FROM gangsched.events q
                             WHERE q.kind = 'node_state' AND q.at < before
                             ORDER BY q.node_id, q.at DESC, q.id DESC)
        RETURNING e.*),
    kept AS (INSERT INTO gangsched.events_archive SELECT * FROM d WHERE NOT discard RETURNING 1)
    SELECT n_ev + count(*) INTO n_ev FROM d;

    IF discard THEN
        DELETE FROM gangsched.gangs g WHERE g.id IN (SELECT unnest(ids));
    ELSE
        WITH d AS (DELETE FROM gangsched.gangs g WHERE g.id IN (SELECT unnest(ids)) RETURNING g.*)
        INSERT INTO gangsched.gangs_archive SELECT * FROM d;
    END IF;
    PERFORM gangsched._archive_end();

    PERFORM gangsched._event('history_archived', NULL, NULL, NULL,
                             format('history before %s %s', before, CASE WHEN discard THEN 'discarded' ELSE 'archived' END),
                             pg_catalog.jsonb_build_object('before', before, 'jobs', n_jobs, 'allocations', n_alloc,
                                                           'events', n_ev, 'discarded', discard));
    RETURN QUERY SELECT n_jobs, n_alloc, n_ev;
END $$;

-- Operators: delete from the archive the jobs that ended before `before`
-- (with their allocations and events) and the job-less events older than
-- it, once they are exported. Records an event 'archive_purged'.
CREATE FUNCTION gangsched.purge_archive(before timestamptz)
RETURNS TABLE (jobs bigint, allocations bigint, events bigint)
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    ids     bigint[];
    n_alloc bigint;
    n_ev    bigint;
BEGIN
    PERFORM gangsched._require_operator('purge archived history');
    PERFORM gangsched._check_cutoff(before, 'purge_archive', true);
    LOCK TABLE gangsched.gangs_archive IN SHARE ROW EXCLUSIVE MODE;
    WITH d AS (DELETE FROM gangsched.gangs_archive g WHERE g.finished_at < before RETURNING g.id)
    SELECT COALESCE(array_agg(d.id), '{}') INTO ids FROM d;
    DELETE FROM gangsched.allocations_archive a WHERE a.job IN (SELECT unnest(ids));
    GET DIAGNOSTICS n_alloc = ROW_COUNT;
    DELETE FROM gangsched.events_archive e
     WHERE e.job IN (SELECT unnest(ids))
        OR (e.at < before AND (e.job IS NULL OR NOT EXISTS (SELECT FROM gangsched.gangs_archive g WHERE g.id = e.job)));
    GET DIAGNOSTICS n_ev = ROW_COUNT;
    PERFORM gangsched._event('archive_purged', NULL, NULL, NULL, format('archived history before %s purged', before),
                             pg_catalog.jsonb_build_object('before', before, 'jobs', cardinality(ids),
                                                           'allocations', n_alloc, 'events', n_ev));
    RETURN QUERY SELECT cardinality(ids)::bigint, n_alloc, n_ev;
END $$;

-- Analysts and operators: the cutoff of the latest archive run, NULL when
-- the history was never archived. The history tables and every analyst
-- function are complete for windows that begin at or after it.
CREATE FUNCTION gangsched.history_horizon() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT max((e.detail->>'before')::timestamptz) FROM gangsched.events e WHERE e.kind = 'history_archived'
$$;
