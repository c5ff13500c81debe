/* ------------------------------------------------------------------ */
/* Preemption                                                          */
/* ------------------------------------------------------------------ */

-- Place nominated jobs whose victims have all let go, on exactly the
-- capacity held for them (gangsched.holds), in this transaction. With a job
-- id, only that one. Returns how many were placed.
--
-- Whether a preemptor runs as guaranteed or borrowed work is settled here,
-- now that its victims are gone: its team's current use in the pool plus
-- the gang, against the team's nominal quota there (every governed
-- resource: gangsched._beyond_nominal, the rule the rounds apply). The round decided it while the victims still held their
-- capacity, which makes a priority preemptor look beyond its team's quota
-- when the swap keeps the team within it.
CREATE FUNCTION gangsched._place_ready_nominated(only_job bigint DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    ready bigint[];
    jid   bigint;
    t     timestamptz;
BEGIN
    -- Ready: none of its own victims is still preempting, and no slot it
    -- holds is still allocated (a round may let a preemptor wait for what
    -- an earlier preemptor of the round left of its victims: those are not
    -- its own victims).
    SELECT array_agg(g.id ORDER BY g.id) INTO ready
      FROM gangsched.gangs g
     WHERE g.state = 'nominated' AND (only_job IS NULL OR g.id = only_job)
       AND NOT EXISTS (SELECT FROM gangsched.gangs v WHERE v.preempted_for = g.id AND v.state = 'preempting')
       AND NOT EXISTS (SELECT FROM gangsched.gangs v WHERE v.shrink_for = g.id)   -- a shrink for it pending
       AND NOT EXISTS (SELECT FROM gangsched.holds h
                         CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
                         JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
                        WHERE h.job = g.id);
    IF ready IS NULL THEN
        RETURN 0;
    END IF;
    -- Lock them and keep those still nominated: a concurrent release may
    -- have placed one, a cancel cancelled it. The state test must be in the
    -- locking query itself: after waiting for a lock, READ COMMITTED checks
    -- its WHERE against the row as committed, while a join would read the
    -- version of this statement's snapshot.
    SELECT array_agg(l.id ORDER BY l.id) INTO ready
      FROM (SELECT g.id FROM gangsched.gangs g
             WHERE g.id = ANY (ready) AND g.state = 'nominated'
             ORDER BY g.id FOR UPDATE) l;
    IF ready IS NULL THEN
        RETURN 0;
    END IF;
    -- the clock rule: stamped after the locking read saw the victims' releases
    t := gangsched.now();
    -- one job at a time, so that a team's second preemptor counts the first
    FOREACH jid IN ARRAY ready LOOP
        UPDATE gangsched.gangs g
           SET borrowed = gangsched._beyond_nominal(
                   g.team_id, p.pool_id,
                   ARRAY[g.workers * g.gpus, g.workers * g.cpus, g.workers * g.mem_gb, g.workers * g.net_gbps],
                   (SELECT ARRAY[COALESCE(sum(a.gpus), 0), COALESCE(sum(a.cpus), 0),
                                 COALESCE(sum(a.mem_gb), 0), COALESCE(sum(a.net_gbps), 0)]
                      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
                     WHERE upper_inf(a.during) AND a.team_id = g.team_id AND n.pool_id = p.pool_id))
          FROM (SELECT (SELECT n.pool_id FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
                         WHERE h.job = jid LIMIT 1) AS pool_id) p
         WHERE g.id = jid;
        INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus,
                                           mem_gb, net_gbps, borrowed, during)
        SELECT h.job, h.worker, h.node_id, g.team_id, h.devices, h.first_slice, h.slices, g.gpus, h.cpus,
               h.mem_gb, h.net_gbps, g.borrowed, tstzrange(t, NULL)
          FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job
         WHERE h.job = jid;
    END LOOP;
    INSERT INTO gangsched.held_slots (node_id, slot, job, worker)
    SELECT h.node_id, s.slot, h.job, h.worker
      FROM gangsched.holds h, gangsched._slots(h.devices, h.first_slice, h.slices) s
     WHERE h.job = ANY (ready);
    -- an elastic gang's notice carries the size it starts at (docs/elastic.md)
    PERFORM pg_notify('gangsched_node_' || x.node_id,
                      CASE WHEN x.min_replicas IS NULL THEN json_build_object('event', 'start', 'job', x.job)
                           ELSE json_build_object('event', 'start', 'job', x.job, 'world_size', x.workers,
                                                  'replicas', x.workers / (x.group_size * x.stages)) END::text)
       FROM (SELECT DISTINCT h.job, h.node_id, g.workers, g.min_replicas, g.group_size, g.stages
               FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job
              WHERE h.job = ANY (ready) ORDER BY 1, 2) x;
    DELETE FROM gangsched.holds WHERE job = ANY (ready);
    -- the events and their counts for gangsched.metrics (the events
    -- trigger leaves 'placed' to its writers: sql/src/75_metrics.sql)
    WITH p AS (
        UPDATE gangsched.gangs g
           SET state = 'placed', placed_at = t, started_at = NULL, started_nodes = '{}', reason = NULL
         WHERE g.id = ANY (ready) AND g.state = 'nominated'
        RETURNING g.id, g.team_id, g.borrowed, g.queued_at),
    c AS (
        INSERT INTO gangsched.metric_deltas (name, team_id, label, value)
        SELECT x.name, p.team_id, x.label, sum(x.value)
          FROM p CROSS JOIN LATERAL gangsched._event_counts('placed', NULL, NULL, date_part('epoch', t - p.queued_at)) x
         GROUP BY 1, 2, 3)
    INSERT INTO gangsched.events (at, kind, job, team_id, reason)
    SELECT t, 'placed', p.id, p.team_id,
           CASE WHEN p.borrowed THEN 'placed on the capacity its victims released, as borrowed capacity'
                ELSE 'placed on the capacity its victims released, within nominal quota' END
      FROM p;
    RETURN cardinality(ready);
END $$;

-- Kill victims whose grace deadline has passed: their allocations end, the
-- work since their last checkpoint is lost, their agents are told to kill,
-- and they go back to pending at their old queue position. Shrinks past
-- their deadline kill their released workers and complete. Then place the
-- preemptors that no longer wait for anyone. Returns victims killed.
--
-- The victims' rows are locked first, and a victim whose row is locked is
-- skipped: its release is in progress (job_released locks the row before
-- it ends the allocations; waiting for it here while holding the
-- allocations would deadlock), and that release requeues it and places
-- its preemptor. If the release rolls back, the next round kills it.
CREATE FUNCTION gangsched._kill_overdue() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    overdue bigint[];
    n       int;
BEGIN
    SELECT array_agg(l.id ORDER BY l.id) INTO overdue
      FROM (SELECT g.id FROM gangsched.gangs g
             WHERE g.state = 'preempting' AND g.preempt_deadline <= gangsched.now()
               AND g.preempted_for IS NOT NULL   -- stopped for a time limit: 72_time.sql
             ORDER BY g.id FOR UPDATE SKIP LOCKED) l;
    n := gangsched._requeue_many(overdue, 'killed at its grace deadline', 'kill');
    -- shrinks past their deadline (67_shrink.sql) complete too
    PERFORM gangsched._shrink_kill_overdue();
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
    j gangsched.gangs;
    t timestamptz;
    sharers bigint[];
    s bigint;
BEGIN
    PERFORM gangsched._require_job_agent(job, 'release');
    j := gangsched._live_job(job, ARRAY['preempting'], 'release');
    PERFORM gangsched._require_job_agent(job, 'release');
    IF checkpointed IS NULL THEN
        RAISE EXCEPTION 'checkpointed must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass true if the workers wrote a checkpoint before exiting, false otherwise.';
    END IF;
    -- Releases of the same preemptor's victims take turns: each sees the
    -- others' committed releases, so the last one to commit places it (two
    -- concurrent releases would otherwise each see the other victim still
    -- preempting, and leave it to the next round).
    PERFORM FROM gangsched.gangs g WHERE g.id = j.preempted_for FOR UPDATE;
    t := gangsched.now();   -- the release's one time: its checkpoint, its requeue
    -- other nominated jobs that wait for part of this job's capacity (the
    -- rest its preemptor does not take over), placed too if it was the last
    SELECT array_agg(DISTINCT h.job ORDER BY h.job) INTO sharers
      FROM gangsched.holds h
     CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
      JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
     WHERE hs.job = j.id AND h.job IS DISTINCT FROM j.preempted_for;
    IF checkpointed THEN
        UPDATE gangsched.gangs SET last_checkpoint_at = t WHERE id = j.id;
    END IF;
    -- stopped for its time limit (no preemptor): it ends, failed
    IF j.preempted_for IS NULL THEN
        PERFORM gangsched._end_time_limited(ARRAY[j.id],
                                            CASE WHEN checkpointed THEN 'released after a checkpoint'
                                                 ELSE 'released without a checkpoint' END, t);
        FOREACH s IN ARRAY COALESCE(sharers, '{}') LOOP
            PERFORM gangsched._place_ready_nominated(s);
        END LOOP;
        PERFORM gangsched._wake();
        RETURN;
    END IF;
    PERFORM gangsched._requeue_many(ARRAY[j.id],
                                    format('preempted for job %s; released%s', j.preempted_for,
                                           CASE WHEN checkpointed THEN ' after a checkpoint' ELSE ' without a checkpoint' END),
                                    'kill', t);
    IF j.preempted_for IS NOT NULL THEN
        PERFORM gangsched._place_ready_nominated(j.preempted_for);
    END IF;
    FOREACH s IN ARRAY COALESCE(sharers, '{}') LOOP
        PERFORM gangsched._place_ready_nominated(s);
    END LOOP;
    PERFORM gangsched._wake();
END $$;
