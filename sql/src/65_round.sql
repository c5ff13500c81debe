/* ------------------------------------------------------------------ */
/* Scheduling round                                                    */
/* ------------------------------------------------------------------ */

-- Put live jobs back in the queue at their old positions, set-based: end
-- their allocations (history kept), drop capacity held for them, count the
-- work lost since their last checkpoint. Returns how many were requeued.
-- The one requeue: rounds (start timeouts, src/round.c), kills at the grace
-- deadline, releases and a node going down all call it; each 'requeued'
-- event says the state the job left and the work it lost.
CREATE FUNCTION gangsched._requeue_many(jobs bigint[], why text, agent_event text DEFAULT 'kill',
                                        at timestamptz DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
    t timestamptz := COALESCE(at, gangsched.now());   -- one time for the whole requeue
BEGIN
    IF jobs IS NULL OR cardinality(jobs) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM gangsched._end_allocations(jobs, why, agent_event, t);
    DELETE FROM gangsched.holds WHERE job = ANY (jobs);
    -- the work lost is computed from the rows as they were: RETURNING sees
    -- the updated row, whose started_at is already cleared
    WITH o AS (
        SELECT g.id, g.state, gangsched._lost_gpu_seconds(g, t) AS lost FROM gangsched.gangs g
         WHERE g.id = ANY (jobs) AND g.state IN ('nominated', 'placed', 'running', 'preempting')),
    r AS (
        UPDATE gangsched.gangs g
           SET state = 'pending', placed_at = NULL, started_at = NULL, started_nodes = '{}', borrowed = false,
               workers = COALESCE(g.max_workers, g.workers),   -- an elastic job asks for its whole gang again
               preempt_deadline = NULL, preempted_for = NULL, requeues = g.requeues + 1,
               preemptions = g.preemptions + (g.state = 'preempting')::int,
               queued_at = t,
               lost_gpu_seconds = g.lost_gpu_seconds + o.lost, reason = why
          FROM o
         WHERE g.id = o.id
        RETURNING g.id, g.team_id, o.state, o.lost)
    INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
    SELECT t, 'requeued', r.id, r.team_id, why, jsonb_build_object('from', r.state, 'lost_gpu_seconds', round(r.lost, 3))
      FROM r;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

-- Rounds take turns on this table's EXCLUSIVE lock (never rows in it): a
-- round tries it and returns at once if another round holds it;
-- set_node_state(..., 'down') waits for it. No role but the owner may lock
-- it, unlike an advisory lock, which any session could hold forever.
CREATE TABLE gangsched.round_lock ();

-- One scheduling round in this transaction. Returns at once (ran = false)
-- when another round holds the round's lock.
CREATE FUNCTION gangsched.run_round(OUT ran bool, OUT considered int, OUT placed int, OUT workers_placed int,
                                    OUT preempted int, OUT expired int, OUT requeued int, OUT ms float8,
                                    OUT note text)
RETURNS record LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_run_round';

-- Why a job waits, computed now against the current state by simulating
-- the next round without writing anything. Internal: why_pending() checks
-- that the caller acts for the job's team first.
CREATE FUNCTION gangsched._why_pending(job bigint)
RETURNS TABLE (reason text, detail text)
LANGUAGE C VOLATILE STRICT AS 'MODULE_PATHNAME', 'gs_why_pending';

-- A text a portal reads with the jobs of teams it may not see named as "a
-- job of another team" (as the jobs view does for "for job N"): every
-- "job N" whose job is not of one of `teams` (or does not exist).
CREATE FUNCTION gangsched._mask_jobs(txt text, teams int[])
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    jid bigint;
BEGIN
    IF txt IS NULL OR strpos(txt, 'job ') = 0 THEN
        RETURN txt;
    END IF;
    FOR jid IN SELECT DISTINCT m[1]::bigint FROM regexp_matches(txt, '\mjob ([0-9]{1,18})\M', 'g') m LOOP
        IF NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id = jid AND g.team_id = ANY (teams)) THEN
            txt := regexp_replace(txt, '\mjob ' || jid || '\M', 'a job of another team', 'g');
        END IF;
    END LOOP;
    RETURN txt;
END $$;

CREATE FUNCTION gangsched.why_pending(job bigint)
RETURNS TABLE (reason text, detail text)
LANGUAGE plpgsql VOLATILE STRICT AS $$
DECLARE
    tid int;
    vis record;
BEGIN
    SELECT g.team_id INTO tid FROM gangsched.gangs g WHERE g.id = why_pending.job;
    IF tid IS NOT NULL THEN
        PERFORM gangsched._require_team(tid, format('explain job %s', job));
    END IF;
    SELECT * INTO vis FROM gangsched._visibility();
    IF vis.all_rows THEN
        RETURN QUERY SELECT w.reason, w.detail FROM gangsched._why_pending(job) w;
    ELSE
        -- a portal: the job first in line, or the one capacity is kept
        -- for, reads "a job of another team" when it may not see it
        RETURN QUERY SELECT gangsched._mask_jobs(w.reason, vis.teams), gangsched._mask_jobs(w.detail, vis.teams)
                       FROM gangsched._why_pending(job) w;
    END IF;
END $$;
