/* ------------------------------------------------------------------ */
/* Shrinking an elastic victim instead of preempting it (issue 17)     */
/* ------------------------------------------------------------------ */

-- The gangs' shrink columns (shrink_to, shrink_for, shrink_deadline) are
-- in 17_shrink_schema.sql, before the views that show them (60_views.sql).

-- A gang that stops running (ends, is requeued, goes back to the queue)
-- has no shrink pending any more.
CREATE FUNCTION gangsched._shrink_clear() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.shrink_to := NULL;
    NEW.shrink_for := NULL;
    NEW.shrink_deadline := NULL;
    RETURN NEW;
END $$;

CREATE TRIGGER gangs_shrink_clear
    BEFORE UPDATE OF state ON gangsched.gangs FOR EACH ROW
    WHEN (NEW.shrink_to IS NOT NULL AND NEW.state <> 'running')
    EXECUTE FUNCTION gangsched._shrink_clear();

-- The round's shrink decisions (src/round.c): jobs[k] gives back its
-- workers from tos[k] on to the nominated job fors[k], by t + its grace
-- (as for preempt_deadline). Only a gang still running, elastic and not
-- shrinking already, to a valid size. An event 'shrinking' each, a notice
-- to each node holding released workers, and the counters
-- gangsched_team_shrinks_total and _shrink_replicas_total (one delta row
-- per team and counter, as the round's victims statement counts its
-- preemptions: 75_metrics.sql). Returns the gangs shrunk.
CREATE FUNCTION gangsched._shrink_start(jobs bigint[], tos int[], fors bigint[], t timestamptz,
                                        default_grace int, max_grace int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
    k int;
BEGIN
    IF jobs IS NULL OR cardinality(jobs) = 0 THEN
        RETURN 0;
    END IF;
    WITH v AS (
        UPDATE gangsched.gangs g
           SET shrink_to = u.shrink_to, shrink_for = u.pfor,
               shrink_deadline = t + make_interval(secs => LEAST(COALESCE(extract(epoch FROM g.grace), default_grace),
                                                                 max_grace))
          FROM ROWS FROM (unnest(jobs), unnest(tos), unnest(fors)) AS u(job, shrink_to, pfor)
         WHERE g.id = u.job AND g.state = 'running' AND g.shrink_to IS NULL AND g.min_replicas IS NOT NULL
           AND u.shrink_to < g.workers AND u.shrink_to >= g.min_replicas * g.group_size * g.stages
           AND u.shrink_to % (g.group_size * g.stages) = 0
        RETURNING g.id, g.team_id, g.workers, g.group_size * g.stages AS unit, g.shrink_to, g.shrink_for,
                  g.shrink_deadline),
    ev AS (
        INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
        SELECT t, 'shrinking', v.id, v.team_id,
               format('shrinking from %s to %s workers for job %s', v.workers, v.shrink_to, v.shrink_for),
               jsonb_build_object('for', v.shrink_for, 'deadline', v.shrink_deadline, 'workers', v.shrink_to,
                                  'was_workers', v.workers, 'replicas', v.shrink_to / v.unit,
                                  'was_replicas', v.workers / v.unit)
          FROM v
        RETURNING job),
    m AS (
        INSERT INTO gangsched.metric_deltas (name, team_id, label, value)
        SELECT c.name, COALESCE(x.team_id, 0), '', c.value
          FROM (SELECT v.team_id, count(*)::float8 AS shrinks,
                       sum((v.workers - v.shrink_to) / v.unit)::float8 AS replicas
                  FROM v GROUP BY v.team_id) x
         CROSS JOIN LATERAL (VALUES ('shrinks', x.shrinks), ('shrink_replicas', x.replicas)) c(name, value)
        RETURNING 1),
    told AS (
        SELECT pg_notify('gangsched_node_' || a.node_id,
                         json_build_object('event', 'shrink', 'job', a.job, 'world_size', a.shrink_to,
                                           'deadline', a.shrink_deadline)::text)
          FROM (SELECT DISTINCT x.job, x.node_id, v.shrink_to, v.shrink_deadline
                  FROM v JOIN gangsched.allocations x
                    ON x.job = v.id AND upper_inf(x.during) AND x.worker >= v.shrink_to
                 ORDER BY 1, 2) a)
    SELECT (SELECT count(*) FROM v), (SELECT count(*) FROM told), (SELECT count(*) FROM ev) INTO n, k, k;
    RETURN n;
END $$;

-- End the released workers' allocations of shrinking gang `job` (on node
-- `node_id` only, or everywhere when NULL); `agent_event`, when set, is the
-- notice each node told gets ('kill' at the deadline). Returns how many ended.
CREATE FUNCTION gangsched._shrink_end_workers(job bigint, node_id int, why text, agent_event text,
                                              t timestamptz) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
    k int;
BEGIN
    WITH ended AS (
        UPDATE gangsched.allocations a
           SET during = tstzrange(lower(a.during), GREATEST(lower(a.during), t),
                                  CASE WHEN t > lower(a.during) THEN '[)' ELSE '[]' END), end_reason = why
          FROM gangsched.gangs g
         WHERE g.id = _shrink_end_workers.job AND a.job = g.id AND upper_inf(a.during)
           AND a.worker >= g.shrink_to
           AND (_shrink_end_workers.node_id IS NULL OR a.node_id = _shrink_end_workers.node_id)
        RETURNING a.job, a.node_id, a.worker),
    slots AS (
        DELETE FROM gangsched.held_slots h USING ended e
         WHERE h.job = e.job AND h.worker = e.worker AND h.node_id = e.node_id
        RETURNING 1),
    told AS (
        SELECT pg_notify('gangsched_node_' || e.node_id,
                         json_build_object('event', agent_event, 'job', e.job)::text)
          FROM (SELECT DISTINCT x.job, x.node_id FROM ended x ORDER BY 1, 2) e
         WHERE agent_event IS NOT NULL)
    SELECT (SELECT count(*) FROM ended), (SELECT count(*) FROM told), (SELECT count(*) FROM slots) INTO n, k, k;
    RETURN n;
END $$;

-- Complete the shrink of gang `job` once none of its released workers
-- holds an allocation: it runs on shrink_to workers, an event 'shrunk', a
-- resize notice to every node still running it, and its preemptor placed
-- if it waits for nothing else. `lost`: GPU-seconds lost (killed at the
-- deadline; 0 after a release, whose workers checkpointed as they stopped),
-- counted in gangsched_team_lost_gpu_seconds_total as a requeue's are.
CREATE FUNCTION gangsched._shrink_complete(job bigint, how text, lost numeric, t timestamptz) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    g gangsched.gangs;
    s bigint;
BEGIN
    SELECT * INTO g FROM gangsched.gangs x WHERE x.id = _shrink_complete.job;
    IF g.shrink_to IS NULL OR EXISTS (SELECT FROM gangsched.allocations a
                                       WHERE a.job = g.id AND upper_inf(a.during) AND a.worker >= g.shrink_to) THEN
        RETURN false;
    END IF;
    UPDATE gangsched.gangs x
       SET workers = g.shrink_to, shrink_to = NULL, shrink_for = NULL, shrink_deadline = NULL,
           lost_gpu_seconds = x.lost_gpu_seconds + lost,
           last_checkpoint_at = CASE WHEN lost = 0 THEN t ELSE x.last_checkpoint_at END
     WHERE x.id = g.id;
    INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
    VALUES (t, 'shrunk', g.id, g.team_id, format('shrunk to %s workers for job %s; %s', g.shrink_to, g.shrink_for, how),
            jsonb_build_object('for', g.shrink_for, 'workers', g.shrink_to, 'was_workers', g.workers,
                               'replicas', g.shrink_to / (g.group_size * g.stages),
                               'was_replicas', g.workers / (g.group_size * g.stages),
                               'lost_gpu_seconds', round(lost, 3)));
    IF lost > 0 THEN
        INSERT INTO gangsched.metric_deltas (name, team_id, label, value)
        VALUES ('lost_gpu_seconds', COALESCE(g.team_id, 0), '', lost::float8);
    END IF;
    PERFORM pg_notify('gangsched_node_' || x.node_id,
                      json_build_object('event', 'resize', 'job', g.id,
                                        'replicas', g.shrink_to / (g.group_size * g.stages),
                                        'world_size', g.shrink_to)::text)
       FROM (SELECT DISTINCT a.node_id FROM gangsched.allocations a
              WHERE a.job = g.id AND upper_inf(a.during) ORDER BY 1) x;
    PERFORM gangsched._place_ready_nominated(g.shrink_for);
    -- other nominated jobs of the round that wait for the rest of the
    -- workers released (their 'nominated' event's waits_for)
    FOR s IN SELECT DISTINCT h.job FROM gangsched.holds h
              WHERE h.job <> g.shrink_for
                AND EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(g.id))
              ORDER BY 1
    LOOP
        PERFORM gangsched._place_ready_nominated(s);
    END LOOP;
    RETURN true;
END $$;

-- An agent reports that the workers of shrinking job `job` it was told to
-- stop on node `node` have exited (node_work's action 'shrink'). Ends their
-- allocations; when they were the last, the shrink completes and the
-- preemptor is placed. Returns the allocations ended: 0 when there is
-- nothing (left) to release on the node — a repeated call changes nothing.
CREATE FUNCTION gangsched.workers_released(node text, job bigint) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n gangsched.nodes := gangsched._node(node);
    g gangsched.gangs;
    t timestamptz;
    k int;
BEGIN
    PERFORM gangsched._require_node(n.id, node, 'release workers');
    SELECT * INTO g FROM gangsched.gangs x WHERE x.id = workers_released.job FOR UPDATE;
    IF g.id IS NULL THEN
        RAISE EXCEPTION 'job % does not exist', job
            USING ERRCODE = 'foreign_key_violation', HINT = 'See gangsched.gangs for the job ids.';
    END IF;
    IF g.shrink_to IS NULL THEN
        -- nothing pending: a repeated report (its node still runs the job, or
        -- gave its workers back in this run's last shrink) changes nothing
        IF EXISTS (SELECT FROM gangsched.allocations a
                    WHERE a.job = g.id AND a.node_id = n.id
                      AND (upper_inf(a.during)
                           OR (a.worker >= g.workers AND g.placed_at IS NOT NULL
                               AND lower(a.during) >= g.placed_at))) THEN
            RETURN 0;
        END IF;
        RAISE EXCEPTION 'job % has no shrink pending and no worker on node %', job, node
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Job %s is %s with %s workers.', job, g.state, g.workers),
                  HINT = 'Report only the workers node_work(node) shows with action ''shrink''.';
    END IF;
    -- releases for the same preemptor take turns, as in job_released
    PERFORM FROM gangsched.gangs x WHERE x.id = g.shrink_for FOR UPDATE;
    t := gangsched.now();
    k := gangsched._shrink_end_workers(g.id, n.id, 'released by a shrink', NULL, t);
    PERFORM gangsched._shrink_complete(g.id, 'released', 0, t);
    PERFORM gangsched._wake();
    RETURN k;
END $$;

-- Shrinks past their deadline (_kill_overdue): the released workers still
-- holding allocations are killed (the work since the last checkpoint of
-- those workers is lost) and the shrink completes. Rows locked by a
-- release in progress are skipped, as for preempted gangs. Returns shrinks
-- completed.
CREATE FUNCTION gangsched._shrink_kill_overdue() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    g gangsched.gangs;
    t timestamptz;
    n int := 0;
    lost numeric;
BEGIN
    FOR g IN SELECT * FROM gangsched.gangs x
              WHERE x.shrink_for IS NOT NULL AND x.shrink_deadline <= gangsched.now()
              ORDER BY x.id FOR UPDATE SKIP LOCKED
    LOOP
        t := gangsched.now();
        SELECT COALESCE(sum(a.gpus), 0)
               * CASE WHEN g.started_at IS NULL THEN 0
                      ELSE GREATEST(0, extract(epoch FROM t - GREATEST(g.started_at,
                                                                      COALESCE(g.last_checkpoint_at, g.started_at))))
                 END
          INTO lost
          FROM gangsched.allocations a
         WHERE a.job = g.id AND upper_inf(a.during) AND a.worker >= g.shrink_to;
        PERFORM gangsched._shrink_end_workers(g.id, NULL, 'killed at its shrink deadline', 'kill', t);
        IF gangsched._shrink_complete(g.id, 'killed at its deadline', lost, t) THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END $$;
