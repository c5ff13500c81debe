/*
 * gangsched 0.1 -> 0.2 — upgrade script (ALTER EXTENSION gangsched UPDATE).
 *
 * The hand-written changes since 0.1, in the order the install script
 * (the files in sql/src) makes them; the build appends sql/src/97_dump.sql,
 * 98_privileges.sql and 99_search_path.sql, which re-register the state
 * tables for pg_dump and re-apply grants, SECURITY DEFINER and search_path
 * to every function (CREATE OR REPLACE resets the latter two).
 *
 * test/t/050_upgrade.pl installs 0.1, updates to 0.2 and compares the
 * catalog with a fresh 0.2 install: anything changed in sql/src/ and not
 * here fails it. docs/upgrade.md.
 */
\echo Use "ALTER EXTENSION gangsched UPDATE TO '0.2'" to load this file. \quit


/* ================================================================== */
/* Issue 11, bounded history: retention (sql/src/71_retention.sql,    */
/* 10_schema.sql's _append_only, 70_invariants.sql's guard list)      */
/* ================================================================== */

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
                  FROM (SELECT a.job, a.node_id, d.device * 8 + s.slice AS slot, a.during
                          FROM gangsched.allocations a, unnest(a.devices) d(device),
                               generate_series(a.first_slice, a.first_slice + a.slices - 1) s(slice)
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

-- 10_schema.sql: the statement guards let a DELETE through while an
-- archive run is open.
CREATE OR REPLACE FUNCTION gangsched._append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND TG_LEVEL = 'STATEMENT' AND gangsched._archive_cutoff() IS NOT NULL THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'gangsched.% is append-only', TG_TABLE_NAME
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = format('%s on gangsched.%I is refused; history rows are removed only by gangsched.archive_history(), and only the open end of a current allocation may be closed.', TG_OP, TG_TABLE_NAME),
              HINT = 'End allocations with gangsched.cancel(), job_finished() or job_released(); move old history with gangsched.archive_history(before).';
END $$;

-- 70_invariants.sql: invariant 4 also reports the archive guards missing
-- or disabled.
CREATE OR REPLACE FUNCTION gangsched.check_invariants()
RETURNS TABLE (invariant int, job bigint, node text, detail text)
LANGUAGE sql STABLE SET jit = off AS $$
WITH cur AS (
    SELECT a.*, n.name AS node_name, n.topology
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)),
cur_slots AS (
    SELECT c.job, c.worker, c.node_id, d.device, d.device * 8 + s.slice AS slot
      FROM cur c, unnest(c.devices) d(device), generate_series(c.first_slice, c.first_slice + c.slices - 1) s(slice)),
hist_slots AS (
    SELECT a.id, a.job, a.node_id, d.device * 8 + s.slice AS slot, a.during
      FROM gangsched.allocations a, unnest(a.devices) d(device), generate_series(a.first_slice, a.first_slice + a.slices - 1) s(slice)),
hist_ordered AS (
    SELECT h.*, lag(upper(h.during)) OVER w AS prev_upper, lag(h.job) OVER w AS prev_job
      FROM hist_slots h WINDOW w AS (PARTITION BY h.node_id, h.slot ORDER BY lower(h.during), upper(h.during)))
-- 1. slices: held rows match current allocations; no overlap in history;
--    slices stay within their device.
SELECT 1, cs.job, n.name, format('slot %s (device %s) of a current allocation is not in held_slots', cs.slot, cs.device)
  FROM cur_slots cs JOIN gangsched.nodes n ON n.id = cs.node_id
 WHERE NOT EXISTS (SELECT FROM gangsched.held_slots h WHERE h.node_id = cs.node_id AND h.slot = cs.slot AND h.job = cs.job AND h.worker = cs.worker)
UNION ALL
SELECT 1, h.job, COALESCE(n.name, '#' || h.node_id), format('held slot %s belongs to no current allocation of job %s', h.slot, h.job)
  FROM gangsched.held_slots h LEFT JOIN gangsched.nodes n ON n.id = h.node_id
 WHERE NOT EXISTS (SELECT FROM cur_slots cs WHERE cs.node_id = h.node_id AND cs.slot = h.slot AND cs.job = h.job AND cs.worker = h.worker)
UNION ALL
SELECT 1, o.job, n.name, format('device slot %s held by jobs %s and %s at overlapping times: job %s until %s, job %s from %s',
                                o.slot, o.prev_job, o.job, o.prev_job, o.prev_upper, o.job, lower(o.during))
  FROM hist_ordered o JOIN gangsched.nodes n ON n.id = o.node_id
 WHERE o.prev_upper > lower(o.during)
UNION ALL
SELECT 1, c.job, c.node_name, CASE WHEN d.device >= n.gpus OR d.device < 0
                                   THEN format('allocation %s uses device %s but the node has %s', c.id, d.device,
                                               CASE WHEN n.gpus = 0 THEN 'no devices' ELSE format('devices 0..%s', n.gpus - 1) END)
                                   ELSE format('allocation %s uses slices %s..%s of device %s, which has slices 0..%s',
                                               c.id, c.first_slice, c.first_slice + c.slices - 1, d.device, n.gpu_slices - 1) END
  FROM cur c JOIN gangsched.nodes n ON n.id = c.node_id, unnest(c.devices) d(device)
 WHERE d.device >= n.gpus OR d.device < 0 OR c.first_slice < 0 OR c.first_slice + c.slices > n.gpu_slices
UNION ALL
-- 2. host resources not over-committed
SELECT 2, NULL, n.name, format('node over-committed: cpus %s/%s, mem_gb %s/%s, net_gbps %s/%s',
                               s.cpus, n.cpus, s.mem, n.mem_gb, s.net, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM cur GROUP BY node_id) s
  JOIN gangsched.nodes n ON n.id = s.node_id
 WHERE s.cpus > n.cpus OR s.mem > n.mem_gb OR s.net > n.net_gbps
UNION ALL
-- 3. live jobs hold exactly their workers, in shape; other jobs hold nothing
SELECT 3, j.id, NULL, format('job is %s and holds %s allocations (ranks %s distinct) for %s workers',
                             j.state, COALESCE(s.n, 0), COALESCE(s.ranks, 0), j.workers)
  FROM gangsched.gangs j
  LEFT JOIN (SELECT c.job, count(*) n, count(DISTINCT c.worker) FILTER (WHERE c.worker < g.workers) ranks
               FROM cur c JOIN gangsched.gangs g ON g.id = c.job GROUP BY c.job) s ON s.job = j.id
 WHERE (j.state IN ('placed', 'running', 'preempting') AND (s.n IS DISTINCT FROM j.workers OR s.ranks IS DISTINCT FROM j.workers::bigint))
    OR (j.state NOT IN ('placed', 'running', 'preempting') AND s.n > 0)
UNION ALL
SELECT 3, a.job, CASE WHEN n.id IS NULL THEN '#' || a.node_id ELSE n.name END,
       format('current allocation %s belongs to %s', a.id,
              CASE WHEN n.id IS NULL THEN 'a node that does not exist' ELSE 'a job that does not exist' END)
  FROM gangsched.allocations a LEFT JOIN gangsched.nodes n ON n.id = a.node_id
 WHERE upper_inf(a.during)
   AND (n.id IS NULL OR NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id = a.job))
UNION ALL
SELECT 3, c.job, c.node_name, format('worker %s holds %s GPUs (%s devices × %s slices), %s cpus, %s mem_gb, %s net_gbps; the job asks for %s, %s, %s, %s',
                                     c.worker, c.gpus, cardinality(c.devices), c.slices, c.cpus, c.mem_gb, c.net_gbps, j.gpus, j.cpus, j.mem_gb, j.net_gbps)
       || CASE WHEN j.gpus > 0 AND j.gpu_model IS NOT NULL AND n.gpu_model IS DISTINCT FROM j.gpu_model
               THEN format('; the node''s devices are %s, the job asks for %s', COALESCE(n.gpu_model, 'of no model'), j.gpu_model) ELSE '' END
       || CASE WHEN j.gpus > 0 AND j.gpu_mem_gb IS NOT NULL AND COALESCE(n.gpu_mem_gb, 0) < j.gpu_mem_gb
               THEN format('; the node''s devices have %s GB, the job asks for %s', COALESCE(n.gpu_mem_gb, 0), j.gpu_mem_gb) ELSE '' END
       || CASE WHEN j.pool_id IS NOT NULL AND n.pool_id <> j.pool_id THEN '; the node is outside the job''s pool' ELSE '' END
  FROM cur c JOIN gangsched.gangs j ON j.id = c.job JOIN gangsched.nodes n ON n.id = c.node_id
 WHERE c.cpus <> j.cpus OR c.mem_gb <> j.mem_gb OR c.net_gbps <> j.net_gbps OR c.gpus <> j.gpus
    OR (j.gpus >= 1 AND (cardinality(c.devices) <> j.gpus OR c.first_slice <> 0 OR c.slices <> n.gpu_slices))
    OR (j.gpus > 0 AND j.gpus < 1 AND (cardinality(c.devices) <> 1 OR c.slices <> gangsched._slices_needed(j.gpus, n.gpu_slices)))
    OR (j.gpus = 0 AND cardinality(c.devices) <> 0)
    OR (j.gpus > 0 AND j.gpu_model IS NOT NULL AND n.gpu_model IS DISTINCT FROM j.gpu_model)
    OR (j.gpus > 0 AND j.gpu_mem_gb IS NOT NULL AND COALESCE(n.gpu_mem_gb, 0) < j.gpu_mem_gb)
    OR (j.pool_id IS NOT NULL AND n.pool_id <> j.pool_id)
UNION ALL
SELECT 3, s.job, NULL, format('%s %s spans %s %s domains', s.what, s.k, s.domains, COALESCE(gangsched._level_name(s.depth), 'pool'))
  FROM (SELECT c.job, 'tensor group' what, c.worker / j.group_size k, j.group_span depth,
               count(DISTINCT gangsched._domain(c.topology, c.node_name, j.group_span)) domains
          FROM cur c JOIN gangsched.gangs j ON j.id = c.job GROUP BY 1, 2, 3, 4
        UNION ALL
        SELECT c.job, 'pipeline replica', c.worker / (j.group_size * j.stages), j.stage_span,
               count(DISTINCT gangsched._domain(c.topology, c.node_name, j.stage_span))
          FROM cur c JOIN gangsched.gangs j ON j.id = c.job WHERE j.stage_span IS NOT NULL GROUP BY 1, 2, 3, 4
        UNION ALL
        SELECT c.job, 'gang', 0, j.span, count(DISTINCT gangsched._domain(c.topology, c.node_name, j.span))
          FROM cur c JOIN gangsched.gangs j ON j.id = c.job WHERE j.span IS NOT NULL GROUP BY 1, 2, 3, 4
        UNION ALL
        SELECT c.job, 'gang', 0, NULL::smallint, count(DISTINCT n.pool_id)
          FROM cur c JOIN gangsched.nodes n ON n.id = c.node_id GROUP BY 1, 2, 3, 4) s
 WHERE s.domains > 1
UNION ALL
SELECT 3, c.job, c.node_name, format('worker %s of a %s job is on a node that does not cache %s', c.worker, j.locality, j.dataset)
  FROM cur c JOIN gangsched.gangs j ON j.id = c.job
 WHERE j.locality = 'required'
   AND NOT EXISTS (SELECT FROM gangsched.datasets d WHERE d.node_id = c.node_id AND d.dataset = j.dataset)
UNION ALL
-- 4. allocation time ranges inside the job's placed interval; history guards on
SELECT 4, a.job, NULL, format('allocation %s (%s) lies outside job''s placed interval [%s, %s)', a.id, a.during,
                              COALESCE(j.placed_at, j.submitted_at), j.finished_at)
  FROM gangsched.allocations a JOIN gangsched.gangs j ON j.id = a.job
 WHERE lower(a.during) < j.submitted_at
    OR (upper_inf(a.during) AND lower(a.during) IS DISTINCT FROM j.placed_at)
    OR (j.finished_at IS NOT NULL AND upper(a.during) > j.finished_at)
UNION ALL
SELECT 4, j.id, NULL, 'job''s times are out of order: ' || concat_ws('; ',
           CASE WHEN j.queued_at < j.submitted_at THEN format('queued at %s, before it was submitted at %s', j.queued_at, j.submitted_at) END,
           CASE WHEN j.placed_at < j.queued_at THEN format('placed at %s, before it was queued at %s', j.placed_at, j.queued_at) END,
           CASE WHEN j.started_at < j.placed_at THEN format('started at %s, before it was placed at %s', j.started_at, j.placed_at) END,
           CASE WHEN j.finished_at < COALESCE(j.placed_at, j.queued_at)
                THEN format('finished at %s, before it was %s at %s', j.finished_at,
                            CASE WHEN j.placed_at IS NOT NULL THEN 'placed' ELSE 'queued' END, COALESCE(j.placed_at, j.queued_at)) END)
  FROM gangsched.gangs j
 WHERE j.queued_at < j.submitted_at OR j.placed_at < j.queued_at OR j.started_at < j.placed_at
    OR j.finished_at < COALESCE(j.placed_at, j.queued_at)
UNION ALL
SELECT 4, a.job, NULL, format('allocation %s (%s) belongs to a job that does not exist', a.id, a.during)
  FROM gangsched.allocations a
 WHERE NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id = a.job)
UNION ALL
SELECT 4, NULL, NULL, format('history guard trigger %s on %s is missing or disabled', g.tgname, g.rel)
  FROM (VALUES ('allocations_update_guard', 'gangsched.allocations'), ('allocations_delete_guard', 'gangsched.allocations'),
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job (its
--    own victims, still draining, excepted)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL unnest(h.devices) d(device)
 CROSS JOIN LATERAL generate_series(h.first_slice, h.first_slice + h.slices - 1) s(slice)
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = d.device * 8 + s.slice
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting' AND v.preempted_for = h.job)
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2 WHERE h2.job = v.preempted_for AND h2.node_id = c.node_id))
              GROUP BY c.node_id) o ON o.node_id = h.node_id
 WHERE h.cpus + COALESCE(o.cpus, 0) > n.cpus OR h.mem + COALESCE(o.mem, 0) > n.mem_gb OR h.net + COALESCE(o.net, 0) > n.net_gbps
UNION ALL
SELECT 5, h.job, NULL, format('job holds capacity but is %s', j.state)
  FROM (SELECT DISTINCT job FROM gangsched.holds) h JOIN gangsched.gangs j ON j.id = h.job
 WHERE j.state <> 'nominated'
UNION ALL
SELECT 5, h.job, n.name, format('two nominated jobs hold slot %s', d.device * 8 + s.slice)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id,
       unnest(h.devices) d(device), generate_series(h.first_slice, h.first_slice + h.slices - 1) s(slice)
 WHERE EXISTS (SELECT FROM gangsched.holds h2, unnest(h2.devices) d2(device),
                      generate_series(h2.first_slice, h2.first_slice + h2.slices - 1) s2(slice)
                WHERE h2.node_id = h.node_id AND h2.job < h.job AND d2.device * 8 + s2.slice = d.device * 8 + s.slice)
UNION ALL
-- 6. inventory: each node's device rows are exactly its declared GPUs, and
--    its equivalence class has its shape (admission reasons over classes).
SELECT 6, NULL, n.name, format('node declares %s GPUs of %s slices but its device rows are %s', n.gpus, n.gpu_slices,
                               COALESCE(dv.list, 'none'))
  FROM gangsched.nodes n
  LEFT JOIN LATERAL (SELECT count(*) AS cnt, string_agg(d.idx || ':' || d.slices, ', ' ORDER BY d.idx) AS list,
                            bool_and(d.idx < n.gpus AND d.slices = n.gpu_slices) AS ok
                       FROM gangsched.devices d WHERE d.node_id = n.id) dv ON true
 WHERE dv.cnt <> n.gpus OR NOT COALESCE(dv.ok, true)
UNION ALL
SELECT 6, NULL, n.name, format('node''s shape (pool %s, %s cpus, %s GB, %s Gb/s, %s GPUs) differs from its class %s',
                               n.pool_id, n.cpus, n.mem_gb, n.net_gbps, n.gpus, n.class_id)
  FROM gangsched.nodes n JOIN gangsched.node_classes c ON c.id = n.class_id
 WHERE (n.pool_id, n.cpus, n.mem_gb, n.net_gbps, n.gpus, n.gpu_model, n.gpu_mem_gb, n.gpu_slices)
       IS DISTINCT FROM (c.pool_id, c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices)
UNION ALL
-- 7. the privilege boundary: no role but the owner may write gangsched's
--    tables or sequences (operators may read them, the other roles only the
--    views), nobody else may create in its schema, PUBLIC executes nothing.
SELECT 7, NULL, NULL, format('%s has %s on %s', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END,
                             a.privilege_type, c.oid::regclass)
  FROM pg_catalog.pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
 WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relkind IN ('r', 'p', 'S', 'v', 'm')
   AND a.grantee <> c.relowner
   AND NOT (a.grantee <> 0 AND (SELECT rolsuper FROM pg_catalog.pg_roles WHERE oid = a.grantee))
   AND NOT (a.privilege_type = 'SELECT' AND a.grantee <> 0
            AND pg_get_userbyid(a.grantee) = 'gangsched_operator')
   AND NOT (a.privilege_type = 'SELECT' AND c.relkind = 'v' AND a.grantee <> 0
            AND pg_get_userbyid(a.grantee) IN ('gangsched_portal', 'gangsched_analyst'))
UNION ALL
SELECT 7, NULL, NULL, format('%s may %s in schema gangsched', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END,
                             a.privilege_type)
  FROM pg_catalog.pg_namespace s CROSS JOIN LATERAL aclexplode(s.nspacl) a
 WHERE s.nspname = 'gangsched' AND a.grantee <> s.nspowner
   AND NOT (a.privilege_type = 'USAGE' AND a.grantee <> 0
            AND pg_get_userbyid(a.grantee) IN ('gangsched_operator', 'gangsched_portal', 'gangsched_agent', 'gangsched_analyst'))
UNION ALL
SELECT 7, NULL, NULL, format('PUBLIC may execute %s', p.oid::regprocedure)
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'gangsched'::regnamespace
   AND (p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0))
$$;

/* ---------------- end of issue 11, bounded history ---------------- */
