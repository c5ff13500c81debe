/* ------------------------------------------------------------------ */
/* Node agents                                                         */
/* ------------------------------------------------------------------ */

CREATE FUNCTION gangsched._live_job(job bigint, allowed text[], action text) RETURNS gangsched.gangs
LANGUAGE plpgsql AS $$
DECLARE
    j gangsched.gangs;
BEGIN
    SELECT * INTO j FROM gangsched.gangs WHERE id = job FOR UPDATE;
    IF j.id IS NULL THEN
        RAISE EXCEPTION 'job % does not exist', job
            USING ERRCODE = 'foreign_key_violation', HINT = 'See gangsched.gangs for the job ids.';
    END IF;
    IF NOT j.state = ANY (allowed) THEN
        RAISE EXCEPTION 'job % is %, cannot %', job, j.state, action
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Only a job that is %s can %s.', array_to_string(allowed, ' or '), action),
                  HINT = 'Resync with gangsched.node_work(node) to see what this node should run.';
    END IF;
    RETURN j;
END $$;

CREATE FUNCTION gangsched.job_started(job bigint, node text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n      gangsched.nodes := gangsched._node(node);
    j      gangsched.gangs;
    needed int[];
BEGIN
    PERFORM gangsched._require_node(n.id, node, 'confirm jobs');
    j := gangsched._live_job(job, ARRAY['placed', 'running'], 'start');
    SELECT array_agg(DISTINCT a.node_id) INTO needed FROM gangsched.allocations a
     WHERE a.job = j.id AND upper_inf(a.during);
    IF NOT n.id = ANY (needed) THEN
        RAISE EXCEPTION 'job % has no worker on node %', job, node
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Only the agents of the nodes the job was placed on confirm it; see gangsched.placements.';
    END IF;
    IF n.id = ANY (j.started_nodes) THEN
        RETURN;
    END IF;
    j.started_nodes := j.started_nodes || n.id;
    IF j.state = 'placed' AND needed <@ j.started_nodes THEN
        UPDATE gangsched.gangs SET started_nodes = j.started_nodes, state = 'running', started_at = gangsched.now(),
                                  reason = NULL
         WHERE id = j.id;
        PERFORM gangsched._event('running', j.id, NULL, j.team_id, 'every node confirmed');
    ELSE
        UPDATE gangsched.gangs SET started_nodes = j.started_nodes WHERE id = j.id;
    END IF;
END $$;

CREATE FUNCTION gangsched.job_checkpointed(job bigint, at timestamptz DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j gangsched.gangs;
    t timestamptz := COALESCE(at, gangsched.now());
BEGIN
    -- the binding first (another node's agent learns nothing of the job),
    -- then again once the row is locked (the job may have moved meanwhile)
    PERFORM gangsched._require_job_agent(job, 'report a checkpoint of');
    j := gangsched._live_job(job, ARRAY['placed', 'running', 'preempting'], 'checkpoint');
    PERFORM gangsched._require_job_agent(job, 'report a checkpoint of');
    IF t > gangsched.now() THEN
        RAISE EXCEPTION 'checkpoint time % is in the future', t
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Report the time the checkpoint was written, or leave it out for now.';
    END IF;
    UPDATE gangsched.gangs SET last_checkpoint_at = GREATEST(last_checkpoint_at, t) WHERE id = j.id;
END $$;

CREATE FUNCTION gangsched.job_finished(job bigint, success bool, message text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j gangsched.gangs;
    s text := CASE WHEN success THEN 'finished' ELSE 'failed' END;
BEGIN
    PERFORM gangsched._require_job_agent(job, 'report the end of');
    j := gangsched._live_job(job, ARRAY['placed', 'running', 'preempting'], 'finish');
    PERFORM gangsched._require_job_agent(job, 'report the end of');
    IF success IS NULL THEN
        RAISE EXCEPTION 'success must not be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass true for a clean exit, false for a failure.';
    END IF;
    PERFORM gangsched._check_text(message, 'message', 8192);
    PERFORM gangsched._end_allocations(ARRAY[job], s, 'finished');
    DELETE FROM gangsched.holds h WHERE h.job = job_finished.job;
    UPDATE gangsched.gangs
       SET state = s, finished_at = gangsched.now(), preempt_deadline = NULL,
           message = job_finished.message, reason = NULL
     WHERE id = job;
    PERFORM gangsched._event(s, job, NULL, j.team_id, COALESCE(message, s));
    PERFORM pg_notify('gangsched_events', json_build_object('event', s, 'job', job)::text);
    PERFORM gangsched._wake();
END $$;

-- An agent's sign of life. A node that was marked down only because its
-- heartbeats stopped (gangsched.node_timeout) comes back up with the next one;
-- a node an operator took down stays down.
CREATE FUNCTION gangsched.node_heartbeat(node text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n gangsched.nodes := gangsched._node(node);
BEGIN
    PERFORM gangsched._require_node(n.id, node, 'send heartbeats');
    UPDATE gangsched.nodes SET heartbeat_at = gangsched.now() WHERE id = n.id;
    IF n.state = 'down' AND n.down_by_timeout THEN
        UPDATE gangsched.nodes SET state = 'up', state_since = gangsched.now(), down_by_timeout = false
         WHERE id = n.id;
        PERFORM gangsched._event('node_state', NULL, n.id, NULL, 'down -> up: heartbeats resumed',
                                 jsonb_build_object('node', node));
        PERFORM gangsched._wake();
    END IF;
END $$;
