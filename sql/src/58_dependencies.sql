/* ------------------------------------------------------------------ */
/* Job dependencies (docs/dependencies.md)                            */
/* ------------------------------------------------------------------ */

-- submit(..., after => ARRAY[...], after_mode => 'ok' | 'any'): the job
-- stays pending, outside the queue, until every listed job has finished
-- successfully (ok) or ended in any state (any). after_jobs is the list as
-- submitted (sorted, without duplicates); waiting_for the listed jobs that
-- have not ended yet, NULL once none: rounds read only pending jobs with
-- a NULL waiting_for. A job can only name jobs that already exist, and
-- the list never changes after submit, so dependencies cannot form a
-- cycle.
ALTER TABLE gangsched.gangs
    ADD COLUMN after_jobs  bigint[],
    ADD COLUMN after_mode  text CHECK (after_mode IN ('ok', 'any')),
    ADD COLUMN waiting_for bigint[];
-- the jobs that wait for a job that ends: one probe per ended job; and
-- the list of waiting jobs (queue view, invariant 8). Both hold only the
-- waiting jobs, so jobs without dependencies cost them nothing.
CREATE INDEX gangs_waiting_idx ON gangsched.gangs USING gin (waiting_for) WHERE waiting_for IS NOT NULL;
CREATE INDEX gangs_waiting_list_idx ON gangsched.gangs (id) WHERE waiting_for IS NOT NULL;

-- The most jobs one job may wait for.
CREATE FUNCTION gangsched._max_after() RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT 100 $$;

-- The reason a waiting job shows: 'waiting for jobs 12, 13 to finish successfully'.
CREATE FUNCTION gangsched._waiting_reason(waiting_for bigint[], after_mode text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT format('waiting for job%s %s to %s',
                  CASE WHEN cardinality(waiting_for) = 1 THEN '' ELSE 's' END,
                  array_to_string(waiting_for, ', '),
                  CASE WHEN after_mode = 'ok' THEN 'finish successfully' ELSE 'end' END)
$$;

-- submit()'s check of `after` for a job of team tid: the sorted list
-- without duplicates, and the listed jobs that have not ended. The listed
-- rows are locked FOR SHARE until the submit commits, so a job that ends
-- meanwhile either ends first (and is seen ended here) or finds the new
-- job among its dependents. Jobs of other teams are reported exactly as
-- unknown ones: a tenant learns nothing of another team's jobs.
CREATE FUNCTION gangsched._check_after(tid int, after bigint[], after_mode text,
                                       OUT after_jobs bigint[], OUT waiting_for bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    r        record;
    missing  bigint;
BEGIN
    IF after IS NULL OR cardinality(after) = 0 THEN
        RETURN;
    END IF;
    IF after_mode IS NULL OR after_mode NOT IN ('ok', 'any') THEN
        RAISE EXCEPTION 'invalid after_mode "%"', COALESCE(after_mode, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use ''ok'' (every listed job must finish successfully) or ''any'' (every listed job must end).';
    END IF;
    IF array_position(after, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'after must not contain NULL'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'List the ids of the jobs this one waits for.';
    END IF;
    _check_after.after_jobs := ARRAY(SELECT DISTINCT a FROM unnest(after) a ORDER BY a);
    IF cardinality(_check_after.after_jobs) > gangsched._max_after() THEN
        RAISE EXCEPTION 'a job may wait for at most % jobs, not %', gangsched._max_after(), cardinality(_check_after.after_jobs)
            USING ERRCODE = 'program_limit_exceeded',
                  HINT = 'Chain the work through fewer jobs, for example one job that waits for a group''s last job.';
    END IF;
    SELECT a INTO missing
      FROM unnest(_check_after.after_jobs) a
     WHERE NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id = a AND g.team_id = tid)
     ORDER BY a LIMIT 1;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'job % does not exist in team "%"', missing, (SELECT t.name FROM gangsched.teams t WHERE t.id = tid)
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = 'A job may wait only for jobs of its own team that have been submitted.',
                  HINT = 'See gangsched.jobs for the job ids.';
    END IF;
    _check_after.waiting_for := '{}';
    FOR r IN SELECT g.id, g.state, COALESCE(g.reason, g.message) AS reason FROM gangsched.gangs g
              WHERE g.id = ANY (_check_after.after_jobs) ORDER BY g.id FOR SHARE
    LOOP
        IF r.state IN ('failed', 'cancelled', 'expired') AND after_mode = 'ok' THEN
            RAISE EXCEPTION 'job % has already %, so a job that waits for it to finish successfully could never start',
                  r.id, CASE r.state WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'been cancelled' ELSE 'expired' END
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('Job %s is %s%s.', r.id, r.state, COALESCE(': ' || r.reason, '')),
                      HINT = format('Submit job %s''s work again and wait for the new job, or use after_mode => ''any'' to wait only for it to end.', r.id);
        ELSIF r.state NOT IN ('finished', 'failed', 'cancelled', 'expired') THEN
            _check_after.waiting_for := _check_after.waiting_for || r.id;
        END IF;
    END LOOP;
    IF cardinality(_check_after.waiting_for) = 0 THEN
        _check_after.waiting_for := NULL;
    END IF;
END $$;

-- A job that ended: its dependents stop waiting for it. Under after_mode
-- ok a job that did not finish successfully fails its waiting dependents
-- and, in the same statement, theirs (the whole chain: one level of
-- nesting, however long the chain); a dependent with nothing left to wait
-- for enters the queue, its wait (and queue timeout) counted from now.
CREATE FUNCTION gangsched._job_ended_dependents() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    why   text;
    n     int;
BEGIN
    IF NOT EXISTS (SELECT FROM gangsched.gangs d WHERE d.waiting_for @> ARRAY[NEW.id] AND d.state = 'pending') THEN
        RETURN NULL;
    END IF;
    IF NEW.state <> 'finished' THEN
        why := format('job %s, which it waits for, %s', NEW.id,
                      CASE NEW.state WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'was cancelled' ELSE 'expired' END);
        -- the reason names the job it waits for and, further down the
        -- chain, the job whose end started it all
        WITH RECURSIVE doomed(id, why) AS (
            SELECT d.id, why FROM gangsched.gangs d
             WHERE d.waiting_for @> ARRAY[NEW.id] AND d.state = 'pending' AND d.after_mode = 'ok'
            UNION
            SELECT d.id, format('job %s, which it waits for, failed because job %s %s', x.id, NEW.id,
                                CASE NEW.state WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'was cancelled'
                                     ELSE 'expired' END)
              FROM doomed x JOIN gangsched.gangs d ON d.waiting_for @> ARRAY[x.id]
             WHERE d.state = 'pending' AND d.after_mode = 'ok'),
        failed AS (
            UPDATE gangsched.gangs g
               SET state = 'failed', finished_at = gangsched.now(), waiting_for = NULL,
                   reason = (SELECT x.why FROM doomed x WHERE x.id = g.id LIMIT 1)
             WHERE g.id IN (SELECT x.id FROM doomed x) AND g.state = 'pending'
            RETURNING g.id, g.team_id, g.reason)
        INSERT INTO gangsched.events (at, kind, job, team_id, reason)
        SELECT gangsched.now(), 'failed', f.id, f.team_id, f.reason FROM failed f;
    END IF;
    -- the rest (after_mode any, or ok and it finished) stop waiting for it
    WITH u AS (
        UPDATE gangsched.gangs g
           SET waiting_for = NULLIF(array_remove(g.waiting_for, NEW.id), '{}'),
               queued_at = CASE WHEN g.waiting_for = ARRAY[NEW.id] THEN gangsched.now() ELSE g.queued_at END,
               reason = CASE WHEN g.waiting_for = ARRAY[NEW.id] THEN NULL
                             ELSE gangsched._waiting_reason(array_remove(g.waiting_for, NEW.id), g.after_mode) END
         WHERE g.waiting_for @> ARRAY[NEW.id] AND g.state = 'pending'
        RETURNING g.id, g.team_id, g.waiting_for IS NULL AS queued),
    e AS (
        INSERT INTO gangsched.events (at, kind, job, team_id, reason)
        SELECT gangsched.now(), 'queued', u.id, u.team_id, format('job %s %s', NEW.id, NEW.state)
          FROM u WHERE u.queued
        RETURNING 1)
    SELECT count(*) INTO n FROM e;
    IF n > 0 THEN
        PERFORM gangsched._wake();
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER gangs_dependents
    AFTER UPDATE OF state ON gangsched.gangs FOR EACH ROW
    WHEN (NEW.state IN ('finished', 'failed', 'cancelled', 'expired')
          AND OLD.state NOT IN ('finished', 'failed', 'cancelled', 'expired'))
    EXECUTE FUNCTION gangsched._job_ended_dependents();
