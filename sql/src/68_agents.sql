/* ------------------------------------------------------------------ */
/* Node agents: resync, liveness, the worker's status                  */
/* ------------------------------------------------------------------ */

-- What node `node` should be running now, one row per worker placed there:
-- for an agent that starts, reconnects or missed notifications. `action` is
-- what the agent must make true: 'start' (placed, not yet confirmed by this
-- node), 'run' (confirmed), 'preempt' (stop by `deadline`, then job_released).
-- A job with a time limit has `limit_at`, when the limit ends (placed_at +
-- time_limit), and `limit_seconds_left` until then: at that time it is told
-- to preempt with its grace, and it fails with reason 'time limit'
-- (docs/time.md). NULL for jobs without a limit. A shrinking elastic gang
-- (docs/elastic.md#shrinking): its released workers have action 'shrink'
-- (stop them by `deadline`, then workers_released), and every row of it
-- has the world size after the shrink. `grace` is the time a stop gives the
-- job's workers to checkpoint (its own grace, else gangsched.default_grace,
-- at most gangsched.max_grace): the agent waits that long before SIGKILL
-- when it restarts them at a new size (docs/agent.md).
CREATE FUNCTION gangsched.node_work(node text)
RETURNS TABLE (job bigint, action text, state text, worker int, local_rank int, local_world_size int,
               world_size int, devices int[], first_slice int, slices int, cpus numeric, mem_gb numeric,
               net_gbps numeric, command text, rank0_node text, deadline timestamptz, placed_at timestamptz,
               gpus numeric, seconds_left float8, time_limit interval, limit_at timestamptz,
               limit_seconds_left float8, grace interval)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n gangsched.nodes := gangsched._node(node);
BEGIN
    PERFORM gangsched._require_node(n.id, node, 'read the work');
    RETURN QUERY
    SELECT a.job,
           CASE WHEN g.state = 'preempting' THEN 'preempt'
                WHEN a.worker >= g.shrink_to THEN 'shrink'
                WHEN n.id = ANY (g.started_nodes) THEN 'run'
                ELSE 'start' END,
           g.state, a.worker,
           (row_number() OVER (PARTITION BY a.job ORDER BY a.worker) - 1)::int,
           (count(*) OVER (PARTITION BY a.job))::int,
           COALESCE(g.shrink_to, g.workers), a.devices, a.first_slice, a.slices, a.cpus, a.mem_gb, a.net_gbps, g.command,
           (SELECT n0.name FROM gangsched.allocations a0 JOIN gangsched.nodes n0 ON n0.id = a0.node_id
             WHERE a0.job = a.job AND a0.worker = 0 AND upper_inf(a0.during)),
           CASE WHEN a.worker >= g.shrink_to THEN g.shrink_deadline ELSE g.preempt_deadline END, g.placed_at, g.gpus,
           extract(epoch FROM CASE WHEN a.worker >= g.shrink_to THEN g.shrink_deadline ELSE g.preempt_deadline END
                              - gangsched.now())::float8,
           g.time_limit, g.placed_at + g.time_limit,
           extract(epoch FROM g.placed_at + g.time_limit - gangsched.now())::float8,
           LEAST(COALESCE(g.grace, pg_catalog.current_setting('gangsched.default_grace')::interval),
                 pg_catalog.current_setting('gangsched.max_grace')::interval)
      FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
     WHERE a.node_id = n.id AND upper_inf(a.during) AND g.state IN ('placed', 'running', 'preempting')
     ORDER BY a.job, a.worker;
END $$;

-- When this server began to hear agents: its start-up or, on a promoted
-- standby, the promotion (NULL on a standby; see src/worker.c).
CREATE FUNCTION gangsched.heard_since() RETURNS timestamptz
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_heard_since';

-- Tests: what heard_since() returns in this session (NULL: the real rule).
CREATE FUNCTION gangsched._test_heard_since(at timestamptz) RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_test_heard_since';

-- Nodes whose agent sent heartbeats and then fell silent for longer than
-- gangsched.node_timeout go down (their jobs are requeued, lost work
-- recorded). Nodes that never sent a heartbeat are left alone. Silence
-- counts from the last heartbeat or from when the server began to hear
-- (start-up, promotion: heard_since()), whichever is later: an outage of
-- the database is not an agent's silence. Returns how many went down.
CREATE FUNCTION gangsched._mark_silent_nodes() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t   interval := pg_catalog.current_setting('gangsched.node_timeout')::interval;
    hs  timestamptz := gangsched.heard_since();
    nm  text;
    n   int := 0;
BEGIN
    IF t <= interval '0' THEN
        RETURN 0;
    END IF;
    FOR nm IN
        SELECT name FROM gangsched.nodes
         WHERE state <> 'down' AND heartbeat_at IS NOT NULL
           AND GREATEST(heartbeat_at, hs) < gangsched.now() - t
         ORDER BY id
    LOOP
        PERFORM gangsched.set_node_state(nm, 'down');
        UPDATE gangsched.nodes SET down_by_timeout = true WHERE name = nm;
        PERFORM gangsched._event('node_state', NULL, (SELECT id FROM gangsched.nodes WHERE name = nm), NULL,
                                 format('no heartbeat for more than %s: marked down', t), jsonb_build_object('node', nm));
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

-- The background worker as seen from SQL: its process id (NULL when not
-- running), commits that asked for a round, and rounds it ran since start.
CREATE FUNCTION gangsched.worker_status(OUT pid int, OUT wakeups bigint, OUT rounds bigint)
RETURNS record LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_worker_stats';

-- An agent's start-up: its node's id and the channel it LISTENs on.
CREATE FUNCTION gangsched.node_channel(node text, OUT node_id int, OUT channel text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n gangsched.nodes := gangsched._node(node);
BEGIN
    PERFORM gangsched._require_node(n.id, node, 'listen');
    node_id := n.id;
    channel := 'gangsched_node_' || n.id;
END $$;
