/* ------------------------------------------------------------------ */
/* Preemption                                                          */
/* ------------------------------------------------------------------ */

-- Place nominated jobs whose victims have all let go, on exactly the
-- capacity held for them (gangsched.holds), in this transaction. With a job
-- id, only that one. Returns how many were placed.
CREATE FUNCTION gangsched._place_ready_nominated(only_job bigint DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    ready bigint[];
    t     timestamptz := gangsched.now();
BEGIN
    SELECT array_agg(g.id ORDER BY g.id) INTO ready
      FROM gangsched.gangs g
     WHERE g.state = 'nominated' AND (only_job IS NULL OR g.id = only_job)
       AND NOT EXISTS (SELECT FROM gangsched.gangs v WHERE v.preempted_for = g.id AND v.state = 'preempting');
    IF ready IS NULL THEN
        RETURN 0;
    END IF;
    -- lock them and keep those still nominated (a concurrent call may have won)
    SELECT array_agg(g.id ORDER BY g.id) INTO ready
      FROM (SELECT id FROM gangsched.gangs WHERE id = ANY (ready) ORDER BY id FOR UPDATE) l
      JOIN gangsched.gangs g ON g.id = l.id
     WHERE g.state = 'nominated';
    IF ready IS NULL THEN
        RETURN 0;
    END IF;
    INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus,
                                       mem_gb, net_gbps, borrowed, during)
    SELECT h.job, h.worker, h.node_id, g.team_id, h.devices, h.first_slice, h.slices, g.gpus, h.cpus,
           h.mem_gb, h.net_gbps, g.borrowed, tstzrange(t, NULL)
      FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job
     WHERE h.job = ANY (ready);
    INSERT INTO gangsched.held_slots (node_id, slot, job, worker)
    SELECT h.node_id, d * 8 + s, h.job, h.worker
      FROM gangsched.holds h, unnest(h.devices) d, generate_series(h.first_slice, h.first_slice + h.slices - 1) s
     WHERE h.job = ANY (ready);
    PERFORM pg_notify('gangsched_node_' || x.node_id, json_build_object('event', 'start', 'job', x.job)::text)
       FROM (SELECT DISTINCT h.job, h.node_id FROM gangsched.holds h WHERE h.job = ANY (ready)) x;
    DELETE FROM gangsched.holds WHERE job = ANY (ready);
    WITH p AS (
        UPDATE gangsched.gangs g
           SET state = 'placed', placed_at = t, started_at = NULL, started_nodes = '{}', reason = NULL
         WHERE g.id = ANY (ready)
        RETURNING g.id, g.team_id)
    INSERT INTO gangsched.events (at, kind, job, team_id, reason)
    SELECT t, 'placed', p.id, p.team_id, 'placed on the capacity its victims released' FROM p;
    RETURN cardinality(ready);
END $$;

-- Kill victims whose grace deadline has passed: their allocations end, the
-- work since their last checkpoint is lost, their agents are told to kill,
-- and they go back to pending at their old queue position. Then place the
-- preemptors that no longer wait for anyone. Returns victims killed.
CREATE FUNCTION gangsched._kill_overdue() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    overdue bigint[];
    n       int;
BEGIN
    SELECT array_agg(g.id ORDER BY g.id) INTO overdue
      FROM gangsched.gangs g
     WHERE g.state = 'preempting' AND g.preempt_deadline <= gangsched.now();
    n := gangsched._requeue_many(overdue, 'killed at its grace deadline', 'kill');
    PERFORM gangsched._place_ready_nominated();
    RETURN n;
END $$;

-- An agent reports that a preempted job let its capacity go (its workers
-- exited). With checkpointed = true the job wrote a checkpoint as it
-- stopped, so nothing is lost. The job goes back to pending at its old queue
-- position; if it was the last victim its preemptor is placed at once.
CREATE FUNCTION gangsched.job_released(job bigint, checkpointed bool DEFAULT true) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j gangsched.gangs := gangsched._live_job(job, ARRAY['preempting'], 'release');
BEGIN
    IF checkpointed IS NULL THEN
        RAISE EXCEPTION 'checkpointed must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass true if the workers wrote a checkpoint before exiting, false otherwise.';
    END IF;
    IF checkpointed THEN
        UPDATE gangsched.gangs SET last_checkpoint_at = gangsched.now() WHERE id = j.id;
    END IF;
    PERFORM gangsched._requeue_many(ARRAY[j.id],
                                    format('preempted for job %s; released%s', j.preempted_for,
                                           CASE WHEN checkpointed THEN ' after a checkpoint' ELSE ' without a checkpoint' END),
                                    'kill');
    IF j.preempted_for IS NOT NULL THEN
        PERFORM gangsched._place_ready_nominated(j.preempted_for);
    END IF;
    PERFORM gangsched._wake();
END $$;
