/* ------------------------------------------------------------------ */
/* Jobs API (portal)                                                   */
/* ------------------------------------------------------------------ */

-- The shape rules of a gang's request that submit() and resize() share:
-- whole GPUs above 1, a worker asking for something, group_size and
-- stages at least 1, workers a whole number of replicas (22023).
CREATE FUNCTION gangsched._check_worker_shape(workers int, gpus numeric, cpus numeric, mem_gb numeric,
                                              net_gbps numeric, group_size int, stages int) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF gpus > 1 AND gpus <> trunc(gpus) THEN
        RAISE EXCEPTION 'gpus must be a whole number or a fraction of one device, not %', gpus
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A worker takes whole devices, or whole slices of one device.',
                  HINT = format('Ask for %s or %s GPUs per worker.', trunc(gpus), trunc(gpus) + 1);
    END IF;
    IF gpus = 0 AND cpus = 0 AND mem_gb = 0 AND net_gbps = 0 THEN
        RAISE EXCEPTION 'worker asks for no resources'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Ask for some gpus, or cpus and mem_gb for a CPU-only worker.';
    END IF;
    IF group_size IS NULL OR group_size < 1 OR stages IS NULL OR stages < 1 THEN
        RAISE EXCEPTION 'group_size and stages must be at least 1'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use 1 for a dimension the job does not use.';
    END IF;
    IF workers % (group_size::bigint * stages) <> 0 THEN
        RAISE EXCEPTION 'workers (%) is not divisible by group_size × stages (% × %)', workers, group_size, stages
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Data-parallel replicas are workers / (group_size × stages) and must be whole.',
                  HINT = format('Use a multiple of %s workers, for example %s.', group_size::bigint * stages,
                                greatest(1, round(workers::numeric / (group_size::bigint * stages))) * group_size::bigint * stages);
    END IF;
END $$;

-- An elastic job's minimum (submit() and resize()): between 1 and the
-- replicas of the gang, workers / (group_size × stages) (22023). NULL is
-- a rigid job. Returns the workers of the minimum (the whole gang when rigid).
CREATE FUNCTION gangsched._check_min_replicas(workers int, group_size int, stages int, min_replicas int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    r int := workers / (group_size * stages);
BEGIN
    IF min_replicas IS NULL THEN
        RETURN workers;
    END IF;
    IF min_replicas < 1 OR min_replicas > r THEN
        RAISE EXCEPTION 'min_replicas must be between 1 and %, not %', r, min_replicas
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The job has %s data-parallel replica%s of %s worker%s (group_size × stages); an elastic job runs on min_replicas to all of them.',
                                  r, CASE WHEN r = 1 THEN '' ELSE 's' END, group_size * stages,
                                  CASE WHEN group_size * stages = 1 THEN '' ELSE 's' END),
                  HINT = format('Give min_replicas from 1 to %s, or leave it out for a rigid gang.', r);
    END IF;
    RETURN min_replicas * group_size * stages;
END $$;

CREATE FUNCTION gangsched.submit(team text, workers int, gpus numeric, cpus numeric DEFAULT 0,
                                 mem_gb numeric DEFAULT 0, net_gbps numeric DEFAULT 0, name text DEFAULT NULL,
                                 priority int DEFAULT 0, preemptible bool DEFAULT true, pool text DEFAULT NULL,
                                 group_size int DEFAULT 1, group_span text DEFAULT 'node', stages int DEFAULT 1,
                                 stage_span text DEFAULT NULL, span text DEFAULT NULL, gpu_model text DEFAULT NULL,
                                 gpu_mem_gb numeric DEFAULT NULL, dataset text DEFAULT NULL, locality text DEFAULT 'none',
                                 checkpoint_interval interval DEFAULT NULL, grace interval DEFAULT NULL,
                                 queue_timeout interval DEFAULT NULL, command text DEFAULT NULL,
                                 time_limit interval DEFAULT NULL,
                                 after bigint[] DEFAULT NULL, after_mode text DEFAULT 'ok',
                                 reservation text DEFAULT NULL, min_replicas int DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    j gangsched.gangs;
    minw int;
BEGIN
    j.team_id := gangsched._team_id(team);
    PERFORM gangsched._require_team(j.team_id, format('submit to team "%s"', team));
    IF workers IS NULL OR workers < 1 THEN
        RAISE EXCEPTION 'workers must be at least 1, not %', COALESCE(workers::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'A gang has one or more workers.';
    END IF;
    PERFORM gangsched._check_amount(gpus, 'gpus', false, 64);
    PERFORM gangsched._check_amount(cpus, 'cpus', false, 1e6);
    PERFORM gangsched._check_amount(mem_gb, 'mem_gb', false, 1e9);
    PERFORM gangsched._check_amount(net_gbps, 'net_gbps', false, 1e9);
    PERFORM gangsched._check_amount(gpu_mem_gb, 'gpu_mem_gb', true, 1e6);
    PERFORM gangsched._check_label(name, 'job name', 200);
    PERFORM gangsched._check_text(command, 'command', 65536);
    IF dataset IS NOT NULL THEN
        PERFORM gangsched._check_name(dataset, 'dataset name');
    END IF;
    IF gpu_model IS NOT NULL THEN
        PERFORM gangsched._check_name(gpu_model, 'gpu model');
    END IF;
    PERFORM gangsched._check_worker_shape(workers, gpus, cpus, mem_gb, net_gbps, group_size, stages);
    minw := gangsched._check_min_replicas(workers, group_size, stages, min_replicas);
    IF locality IS NULL OR locality NOT IN ('none', 'preferred', 'required') THEN
        RAISE EXCEPTION 'invalid locality "%"', locality
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use ''none'', ''preferred'' or ''required''.';
    END IF;
    IF locality <> 'none' AND dataset IS NULL THEN
        RAISE EXCEPTION 'locality % needs a dataset', locality
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the dataset, or use locality ''none''.';
    END IF;
    IF locality <> 'none' AND NOT EXISTS (SELECT FROM gangsched.datasets d WHERE d.dataset = submit.dataset) THEN
        RAISE EXCEPTION 'unknown dataset "%"', dataset
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = 'No node caches that dataset.',
                  HINT = 'Cache it first with gangsched.cache_dataset(node, dataset), or submit with locality ''none''.';
    END IF;
    IF preemptible IS NULL OR priority IS NULL THEN
        RAISE EXCEPTION 'preemptible and priority must not be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Leave them out to take the defaults.';
    END IF;
    PERFORM gangsched._check_interval(checkpoint_interval, 'checkpoint_interval', false);
    PERFORM gangsched._check_interval(grace, 'grace', true);
    PERFORM gangsched._check_interval(queue_timeout, 'queue_timeout', false);
    PERFORM gangsched._check_team_limits(j.team_id, workers);
    -- its own limit, else the team's or the global default; never above the maximum
    j.time_limit := gangsched._resolve_time_limit(j.team_id, time_limit);
    -- a reservation to run in (73_reservations.sql): a portal names only its teams'
    IF reservation IS NOT NULL THEN
        j.reservation_id := gangsched._submit_reservation(reservation);
        PERFORM gangsched._check_reservation_fits(j.reservation_id, reservation, minw, gpus);
    END IF;
    IF pool IS NOT NULL THEN
        j.pool_id := gangsched._pool_id(pool);
        IF NOT preemptible AND (SELECT kind FROM gangsched.pools WHERE id = j.pool_id) = 'opportunistic' THEN
            RAISE EXCEPTION 'non-preemptible job cannot run in opportunistic pool "%"', pool
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'Everything in an opportunistic pool is preemptible.',
                      HINT = 'Submit it to a reserved pool, or as preemptible.';
        END IF;
    END IF;
    j.group_span := gangsched._level_depth(COALESCE(group_span, 'node'), 'group_span');
    j.stage_span := gangsched._level_depth(stage_span, 'stage_span');
    j.span := gangsched._level_depth(span, 'span');
    IF j.stage_span > j.group_span OR j.span > j.stage_span OR j.span > j.group_span THEN
        RAISE EXCEPTION 'spans are not nested: group_span % must lie inside stage_span %, inside span %',
              COALESCE(group_span, 'node'), COALESCE(stage_span, '-'), COALESCE(span, '-')
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A tensor group lies inside its pipeline replica, which lies inside the gang.',
                  HINT = 'Give group_span a level no wider than stage_span, and stage_span no wider than span.';
    END IF;

    j.workers := workers; j.gpus := gpus; j.cpus := cpus; j.mem_gb := mem_gb; j.net_gbps := net_gbps;
    j.name := name; j.priority := priority; j.preemptible := preemptible;
    j.group_size := group_size; j.stages := stages;
    j.gpu_model := CASE WHEN gpus > 0 THEN gpu_model END;
    j.gpu_mem_gb := CASE WHEN gpus > 0 THEN gpu_mem_gb END;
    j.dataset := dataset; j.locality := locality;
    -- the C fast path admits in microseconds; anything it does not certify
    -- goes through the SQL checks, which raise the precise error. An
    -- elastic job is admitted when its minimum could ever run.
    j.workers := minw;
    IF NOT gangsched._admit_fast(j) THEN
        PERFORM gangsched._admit(j);
    END IF;
    j.workers := workers;

    -- last, so the listed jobs are locked for the shortest time (58_dependencies.sql)
    IF after IS NOT NULL THEN
        SELECT c.after_jobs, c.waiting_for INTO j.after_jobs, j.waiting_for
          FROM gangsched._check_after(j.team_id, after, after_mode) c;
        j.after_mode := CASE WHEN j.after_jobs IS NOT NULL THEN after_mode END;
    END IF;
    INSERT INTO gangsched.gangs (team_id, name, workers, gpus, cpus, mem_gb, net_gbps, gpu_model, gpu_mem_gb,
                                priority, preemptible, pool_id, group_size, group_span, stages, stage_span, span,
                                dataset, locality, checkpoint_interval, grace, queue_timeout, command,
                                queue_pos, submitted_at, queued_at, time_limit, after_jobs, after_mode, waiting_for, reason,
                                reservation_id, min_replicas, max_workers)
    VALUES (j.team_id, name, workers, gpus, cpus, mem_gb, net_gbps, j.gpu_model, j.gpu_mem_gb,
            priority, preemptible, j.pool_id, group_size, j.group_span, stages, j.stage_span, j.span,
            dataset, locality, checkpoint_interval, grace, queue_timeout, command,
            nextval('gangsched.queue_position_seq'), gangsched.now(), gangsched.now(), j.time_limit,
            j.after_jobs, j.after_mode, j.waiting_for,
            CASE WHEN j.waiting_for IS NOT NULL THEN gangsched._waiting_reason(j.waiting_for, j.after_mode) END,
            j.reservation_id, min_replicas, CASE WHEN min_replicas IS NOT NULL THEN workers END)
    RETURNING id INTO j.id;
    -- the event, and its count for gangsched.metrics in the same statement
    -- (the events trigger leaves 'submitted' to this: sql/src/75_metrics.sql)
    WITH e AS (
        INSERT INTO gangsched.events (at, kind, job, team_id, reason)
        VALUES (gangsched.now(), 'submitted', j.id, j.team_id, 'admitted')
        RETURNING team_id)
    INSERT INTO gangsched.metric_deltas (name, team_id, label, value)
    SELECT 'jobs_submitted', e.team_id, '', 1 FROM e;
    PERFORM gangsched._wake();
    RETURN j.id;
END $$;

-- Lost work of a job whose allocations end at `at` (default: now):
-- GPU-seconds since it started or last checkpointed (0 if it never started).
CREATE FUNCTION gangsched._lost_gpu_seconds(j gangsched.gangs, at timestamptz DEFAULT NULL) RETURNS numeric
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN j.started_at IS NULL THEN 0
                ELSE j.workers * j.gpus * GREATEST(0, extract(epoch FROM COALESCE(at, gangsched.now())
                         - GREATEST(j.started_at, COALESCE(j.last_checkpoint_at, j.started_at)))) END
$$;

-- End the current allocations of the given jobs (history kept), free their
-- slots and tell each node's agent. Returns the allocations ended. An
-- allocation ended in the instant it began becomes [t, t], never empty.
-- `at`: the decision's time when the caller took it already (default: now).
CREATE FUNCTION gangsched._end_allocations(jobs bigint[], why text, agent_event text, at timestamptz DEFAULT NULL)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    t   timestamptz := COALESCE(at, gangsched.now());
    n   int;
BEGIN
    WITH ended AS (
        UPDATE gangsched.allocations a
           SET during = tstzrange(lower(a.during), GREATEST(lower(a.during), t),
                                  CASE WHEN t > lower(a.during) THEN '[)' ELSE '[]' END), end_reason = why
         WHERE a.job = ANY (jobs) AND upper_inf(a.during)
        RETURNING a.job, a.node_id),
    told AS (
        SELECT pg_notify('gangsched_node_' || e.node_id,
                         json_build_object('event', agent_event, 'job', e.job)::text)
          FROM (SELECT DISTINCT job, node_id FROM ended ORDER BY job, node_id) e)
    SELECT (SELECT count(*) FROM ended), (SELECT count(*) FROM told) INTO n;
    DELETE FROM gangsched.held_slots WHERE job = ANY (jobs);
    RETURN n;
END $$;

CREATE FUNCTION gangsched.cancel(job bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j gangsched.gangs;
BEGIN
    -- the role check comes before the row lock: a refused caller locks nothing
    SELECT * INTO j FROM gangsched.gangs WHERE id = job;
    IF j.id IS NULL THEN
        RAISE EXCEPTION 'job % does not exist', job
            USING ERRCODE = 'foreign_key_violation', HINT = 'See gangsched.jobs for the job ids.';
    END IF;
    PERFORM gangsched._require_team(j.team_id, format('cancel job %s', job));
    SELECT * INTO j FROM gangsched.gangs WHERE id = job FOR UPDATE;
    IF j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN
        RAISE EXCEPTION 'job % is already %', job, j.state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'A job in a final state holds nothing and cannot be cancelled.',
                  HINT = 'Nothing to do; submit a new job to run it again.';
    END IF;
    PERFORM gangsched._end_allocations(ARRAY[job], 'cancelled', 'cancel');
    DELETE FROM gangsched.holds h WHERE h.job = cancel.job;
    UPDATE gangsched.gangs
       SET state = 'cancelled', finished_at = gangsched.now(), preempt_deadline = NULL, waiting_for = NULL,
           reason = 'cancelled while ' || j.state
     WHERE id = job;
    PERFORM gangsched._event('cancelled', job, NULL, j.team_id, 'cancelled while ' || j.state);
    PERFORM pg_notify('gangsched_events', json_build_object('event', 'cancel', 'job', job)::text);
    PERFORM gangsched._wake();
END $$;

CREATE FUNCTION gangsched.set_node_state(name text, state text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n    gangsched.nodes;
    jobs bigint[];
BEGIN
    PERFORM gangsched._require_operator('change a node''s state');
    n := gangsched._node(name);
    IF state IS NULL OR state NOT IN ('up', 'draining', 'down') THEN
        RAISE EXCEPTION 'invalid node state "%"', state
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'up takes work, draining keeps its jobs but takes no new work, down requeues its jobs at once.',
                  HINT = 'Use ''up'', ''draining'' or ''down''.';
    END IF;
    IF state = 'down' THEN
        -- Take the scheduling round's lock (src/round.c: EXCLUSIVE on
        -- gangsched.round_lock): wait for a round in progress, and keep
        -- rounds out until this commits. Otherwise a round that placed work
        -- on this node and has not committed, or that reads the node as up
        -- while this is not committed, leaves work on a down node.
        LOCK TABLE gangsched.round_lock IN EXCLUSIVE MODE;
    END IF;
    SELECT * INTO n FROM gangsched.nodes WHERE id = n.id FOR UPDATE;
    IF n.state = state THEN
        RETURN;
    END IF;
    UPDATE gangsched.nodes SET state = set_node_state.state, state_since = gangsched.now(), down_by_timeout = false
     WHERE id = n.id;
    PERFORM gangsched._event('node_state', NULL, n.id, NULL, format('%s -> %s', n.state, state),
                             jsonb_build_object('node', name));
    IF state = 'down' THEN
        -- its jobs, and those holding capacity on it, locked in id order
        SELECT array_agg(l.id ORDER BY l.id) INTO jobs
          FROM (SELECT g.id FROM gangsched.gangs g
                 WHERE g.id IN (SELECT a.job FROM gangsched.allocations a
                                 WHERE a.node_id = n.id AND upper_inf(a.during)
                                UNION
                                SELECT h.job FROM gangsched.holds h WHERE h.node_id = n.id)
                 ORDER BY g.id FOR UPDATE) l;
        PERFORM gangsched._requeue_many(jobs, format('node %s went down', name));
    END IF;
    PERFORM gangsched._wake();
END $$;
