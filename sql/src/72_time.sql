/* ------------------------------------------------------------------ */
/* Time limits (docs/time.md)                                          */
/* ------------------------------------------------------------------ */

-- The jobs' column is in 16_time_schema.sql (before the views that show it).

-- Per-team default and maximum; NULL takes gangsched.default_time_limit and
-- gangsched.max_time_limit.
ALTER TABLE gangsched.teams
    ADD COLUMN default_time_limit interval CHECK (default_time_limit > '0'::interval AND default_time_limit <= '100 years'::interval),
    ADD COLUMN max_time_limit interval CHECK (max_time_limit > '0'::interval AND max_time_limit <= '100 years'::interval);

-- A setting in seconds (GUC_UNIT_S) as an interval; NULL when 0 or unset.
CREATE FUNCTION gangsched._setting_interval(name text) RETURNS interval
LANGUAGE sql STABLE AS $$
    SELECT NULLIF(pg_catalog.current_setting(name, true), '')::interval
     WHERE COALESCE(NULLIF(pg_catalog.current_setting(name, true), '')::interval, '0'::interval) > '0'::interval
$$;

-- submit()'s time limit: the one asked for, else the team's default, else
-- gangsched.default_time_limit; 53S09 when the one asked for is above the
-- maximum (the team's, else gangsched.max_time_limit). A default above the
-- maximum is cut to it.
CREATE FUNCTION gangsched._resolve_time_limit(tid int, asked interval) RETURNS interval
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t   record;
    mx  interval;
    dflt interval;
BEGIN
    PERFORM gangsched._check_interval(asked, 'time_limit', false);
    SELECT name, default_time_limit, max_time_limit INTO t FROM gangsched.teams WHERE id = tid;
    mx := COALESCE(t.max_time_limit, gangsched._setting_interval('gangsched.max_time_limit'));
    IF asked IS NOT NULL THEN
        IF asked > mx THEN
            RAISE EXCEPTION 'time limit % is longer than team "%" may ask for', asked, t.name
                USING ERRCODE = '53S09',
                      DETAIL = format('Jobs of team "%s" may run for at most %s (%s).', t.name, mx,
                                      CASE WHEN t.max_time_limit IS NOT NULL THEN 'its own maximum'
                                           ELSE 'gangsched.max_time_limit' END),
                      HINT = format('Ask for at most %s, or ask the operator to raise the maximum with gangsched.set_team_time_limits().', mx);
        END IF;
        RETURN asked;
    END IF;
    dflt := COALESCE(t.default_time_limit, gangsched._setting_interval('gangsched.default_time_limit'));
    RETURN CASE WHEN dflt > mx THEN mx ELSE dflt END;
END $$;

-- Operator: a team's default and maximum time limit; NULL takes the
-- settings gangsched.default_time_limit and gangsched.max_time_limit.
CREATE FUNCTION gangsched.set_team_time_limits(team text, default_time_limit interval DEFAULT NULL,
                                               max_time_limit interval DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    PERFORM gangsched._require_operator('set a team''s time limits');
    PERFORM gangsched._check_interval(default_time_limit, 'default_time_limit', false);
    PERFORM gangsched._check_interval(max_time_limit, 'max_time_limit', false);
    IF default_time_limit > max_time_limit THEN
        RAISE EXCEPTION 'default time limit % is longer than the maximum %', default_time_limit, max_time_limit
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give a default no longer than the maximum, or NULL for the setting.';
    END IF;
    UPDATE gangsched.teams t SET default_time_limit = set_team_time_limits.default_time_limit,
                                 max_time_limit = set_team_time_limits.max_time_limit
     WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team time limits set',
                             jsonb_build_object('team', team, 'default_time_limit', default_time_limit,
                                                'max_time_limit', max_time_limit));
END $$;

-- End jobs stopped for their time limit (state 'preempting' with no
-- preemptor): allocations end, agents are told to kill, and the job fails
-- with reason 'time limit'; the work since its last checkpoint is lost.
CREATE FUNCTION gangsched._end_time_limited(jobs bigint[], how text, at timestamptz DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := COALESCE(at, gangsched.now());
    n int;
BEGIN
    IF jobs IS NULL OR cardinality(jobs) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM gangsched._end_allocations(jobs, 'time limit', 'kill', t);
    DELETE FROM gangsched.holds WHERE job = ANY (jobs);
    WITH o AS (
        SELECT g.id, gangsched._lost_gpu_seconds(g, t) AS lost FROM gangsched.gangs g
         WHERE g.id = ANY (jobs) AND g.state = 'preempting' AND g.preempted_for IS NULL),
    f AS (
        UPDATE gangsched.gangs g
           SET state = 'failed', finished_at = t, preempt_deadline = NULL, reason = 'time limit',
               message = how, lost_gpu_seconds = g.lost_gpu_seconds + o.lost
          FROM o
         WHERE g.id = o.id
        RETURNING g.id, g.team_id, g.time_limit, o.lost),
    e AS (
        INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
        SELECT t, 'failed', f.id, f.team_id, 'time limit',
               jsonb_build_object('time_limit', f.time_limit, 'how', how, 'lost_gpu_seconds', round(f.lost, 3))
          FROM f
        RETURNING job)
    SELECT count(pg_notify('gangsched_events', json_build_object('event', 'failed', 'job', e.job)::text))
      INTO n FROM e;
    RETURN n;
END $$;

-- The round's time rule for limits: jobs whose limit has passed get the
-- preemption signal with their grace (they checkpoint and release; a
-- 'time limit' event, not counted as a preemption by the metrics), and
-- those still holding capacity at that deadline are killed and fail with
-- reason 'time limit'. Returns how many were killed.
CREATE FUNCTION gangsched._enforce_time_limits() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t      timestamptz := gangsched.now();
    told   int;
    due    bigint[];
    overdue bigint[];
BEGIN
    -- the jobs past their limit, locked in one scan first: as a semi-join
    -- of the UPDATE, a stale row estimate (1 right after a big round)
    -- made the planner rescan the locking subquery for every running job
    SELECT array_agg(l.id ORDER BY l.id) INTO due
      FROM (SELECT x.id FROM gangsched.gangs x
             WHERE x.state IN ('placed', 'running') AND x.time_limit IS NOT NULL
               AND x.placed_at + x.time_limit <= t
             ORDER BY x.id FOR UPDATE SKIP LOCKED) l;
    WITH s AS (
        UPDATE gangsched.gangs g
           SET state = 'preempting', preempted_for = NULL,
               preempt_deadline = t + LEAST(COALESCE(g.grace, pg_catalog.current_setting('gangsched.default_grace')::interval),
                                            pg_catalog.current_setting('gangsched.max_grace')::interval),
               reason = 'time limit'
         WHERE g.id = ANY (due)
           AND g.state IN ('placed', 'running')
        RETURNING g.id, g.team_id, g.preempt_deadline, g.time_limit),
    ev AS (
        INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
        SELECT t, 'time limit', s.id, s.team_id, 'stopped at its time limit',
               jsonb_build_object('time_limit', s.time_limit, 'deadline', s.preempt_deadline)
          FROM s RETURNING 1)
    SELECT count(pg_notify('gangsched_node_' || a.node_id,
                           json_build_object('event', 'preempt', 'job', s.id, 'deadline', s.preempt_deadline,
                                             'reason', 'time limit')::text))
      INTO told
      FROM s JOIN (SELECT DISTINCT x.job, x.node_id FROM gangsched.allocations x
                    WHERE upper_inf(x.during) AND x.job IN (SELECT s.id FROM s)) a ON a.job = s.id;
    SELECT array_agg(l.id ORDER BY l.id) INTO overdue
      FROM (SELECT g.id FROM gangsched.gangs g
             WHERE g.state = 'preempting' AND g.preempted_for IS NULL AND g.preempt_deadline <= t
             ORDER BY g.id FOR UPDATE SKIP LOCKED) l;
    RETURN gangsched._end_time_limited(overdue, 'killed at the grace deadline after its time limit', t);
END $$;

-- Analysts: requested against used time, per team (and a total row), of
-- the jobs with a time limit that ended in [from, to): the limit as
-- requested (its GPU-hours: limit × workers × gpus) against the time its
-- last placement held its capacity (placed_at to finished_at), and how many
-- were stopped at their limit. Jobs moved by archive_history() are not in
-- it.
CREATE FUNCTION gangsched.time_limit_use("from" timestamptz, "to" timestamptz)
RETURNS TABLE (team text, jobs bigint, stopped_at_limit bigint, requested_gpu_hours float8,
               used_gpu_hours float8, used_fraction float8, p50_used_fraction float8)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._bucket_seconds($1, $2, $2 - $1);   -- refuses a bad window
WITH j AS (
    SELECT g.team_id, g.reason = 'time limit' AND g.state = 'failed' AS stopped,
           date_part('epoch', g.time_limit) / 3600 * g.workers * g.gpus AS req,
           date_part('epoch', g.finished_at - g.placed_at) / 3600 * g.workers * g.gpus AS used,
           date_part('epoch', g.finished_at - g.placed_at) / date_part('epoch', g.time_limit) AS frac
      FROM gangsched.gangs g
     WHERE g.time_limit IS NOT NULL AND g.placed_at IS NOT NULL
       AND g.finished_at >= $1 AND g.finished_at < $2)
SELECT t.name, count(*), count(*) FILTER (WHERE j.stopped),
       sum(j.req), sum(j.used), sum(j.used) / NULLIF(sum(j.req), 0),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY j.frac)
  FROM j JOIN gangsched.teams t ON t.id = j.team_id
 GROUP BY GROUPING SETS ((t.name), ())
 ORDER BY t.name NULLS LAST
$$;
