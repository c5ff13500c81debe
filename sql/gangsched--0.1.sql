/*
 * gangsched 0.1 — install script.
 *
 * Owns the schema: inventory (levels, pools, nodes, devices, datasets),
 * tenancy (teams, quotas), the job queue, allocations (history + the held
 * slots that make double allocation impossible), holds for nominated jobs,
 * the events log, and the SQL-level API. The scheduling round and the
 * placement engine are C (src/); this file is the contract's SQL face.
 *
 * Storage choice for allocations (see docs/storage.md): one history row per
 * worker in `allocations` (time range, append-only, closed on release) and
 * one btree-unique row per held device slice in `held_slots`, deleted on
 * release. The unique key (node, slot) is what makes the database refuse a
 * slice to two jobs at once, at btree cost (a few µs a row) rather than GiST
 * exclusion cost (35–60 µs a row).
 */
\echo Use "CREATE EXTENSION gangsched CASCADE" to load this file. \quit
/* ------------------------------------------------------------------ */
/* Inventory                                                           */
/* ------------------------------------------------------------------ */

-- Topology level names, outermost first (depth 1). The node itself is the
-- innermost level, depth = count(*) + 1, named 'node'.
CREATE TABLE gangsched.topology_levels (
    depth   smallint PRIMARY KEY CHECK (depth >= 1),
    name    text NOT NULL UNIQUE CHECK (name ~ '^[a-z][a-z0-9_]*$' AND name <> 'node')
);

CREATE TABLE gangsched.pools (
    id      int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name    text NOT NULL UNIQUE,
    kind    text NOT NULL CHECK (kind IN ('reserved', 'opportunistic'))
);

CREATE TABLE gangsched.nodes (
    id           int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    pool_id      int NOT NULL REFERENCES gangsched.pools,
    topology     ltree NOT NULL,
    cpus         numeric NOT NULL CHECK (cpus >= 0),
    mem_gb       numeric NOT NULL CHECK (mem_gb >= 0),
    net_gbps     numeric NOT NULL CHECK (net_gbps >= 0),
    gpus         int NOT NULL CHECK (gpus >= 0 AND gpus <= 64),
    gpu_model    text,
    gpu_mem_gb   numeric CHECK (gpu_mem_gb >= 0),
    gpu_slices   int NOT NULL DEFAULT 1 CHECK (gpu_slices BETWEEN 1 AND 8),
    state        text NOT NULL DEFAULT 'up' CHECK (state IN ('up', 'draining', 'down')),
    class_id     int NOT NULL,
    added_at     timestamptz NOT NULL,
    state_since  timestamptz NOT NULL,
    heartbeat_at timestamptz,
    down_by_timeout bool NOT NULL DEFAULT false   -- marked down for silence, not by an operator
);
CREATE INDEX nodes_topology_idx ON gangsched.nodes USING btree (topology);
CREATE INDEX nodes_pool_idx ON gangsched.nodes (pool_id);

-- One row per accelerator. Devices of a node share its model; the per-device
-- rows let operators and analysts name a device and its slices.
CREATE TABLE gangsched.devices (
    node_id  int NOT NULL REFERENCES gangsched.nodes ON DELETE CASCADE,
    idx      int NOT NULL CHECK (idx >= 0),
    model    text,
    mem_gb   numeric,
    slices   int NOT NULL CHECK (slices BETWEEN 1 AND 8),
    PRIMARY KEY (node_id, idx)
);

CREATE TABLE gangsched.datasets (
    node_id   int NOT NULL REFERENCES gangsched.nodes ON DELETE CASCADE,
    dataset   text NOT NULL,
    cached_at timestamptz NOT NULL,
    PRIMARY KEY (node_id, dataset)
);
CREATE INDEX datasets_dataset_idx ON gangsched.datasets (dataset);

-- Equivalence classes of identical nodes (same pool and resources), kept by
-- add_node. Admission control reasons over classes and per-domain class
-- counts, never over every node, so submit stays cheap on 10,000 nodes.
CREATE TABLE gangsched.node_classes (
    id          int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pool_id     int NOT NULL REFERENCES gangsched.pools,
    cpus        numeric NOT NULL,
    mem_gb      numeric NOT NULL,
    net_gbps    numeric NOT NULL,
    gpus        int NOT NULL,
    gpu_model   text,
    gpu_mem_gb  numeric,
    gpu_slices  int NOT NULL,
    nodes       int NOT NULL DEFAULT 0,
    CONSTRAINT node_classes_shape_key UNIQUE NULLS NOT DISTINCT (pool_id, cpus, mem_gb, net_gbps, gpus, gpu_model, gpu_mem_gb, gpu_slices)
);

-- Node counts per (topology domain, class) at every level above the node.
CREATE TABLE gangsched.domain_classes (
    depth     smallint NOT NULL,
    domain    ltree NOT NULL,
    class_id  int NOT NULL REFERENCES gangsched.node_classes,
    nodes     int NOT NULL,
    PRIMARY KEY (depth, domain, class_id)
);

ALTER TABLE gangsched.nodes
    ADD FOREIGN KEY (class_id) REFERENCES gangsched.node_classes;

/* ------------------------------------------------------------------ */
/* Tenancy                                                             */
/* ------------------------------------------------------------------ */

CREATE TABLE gangsched.teams (
    id      int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name    text NOT NULL UNIQUE,
    weight  numeric NOT NULL DEFAULT 1 CHECK (weight > 0 AND weight < 'infinity')
);

-- Nominal quota per team and pool. A NULL borrowing limit means the team may
-- borrow any idle capacity; a NULL lending limit means all of its idle
-- nominal quota may be lent.
CREATE TABLE gangsched.quotas (
    team_id          int NOT NULL REFERENCES gangsched.teams,
    pool_id          int NOT NULL REFERENCES gangsched.pools,
    -- cpus/mem_gb: NULL is proportional to the team's GPU share of the pool,
    -- 'Infinity' not governed; net_gbps NULL: not governed. Read them
    -- through gangsched._effective_quotas (sql/src/62_quotas.sql).
    gpus             numeric NOT NULL DEFAULT 0 CHECK (gpus >= 0),
    cpus             numeric CHECK (cpus >= 0),
    mem_gb           numeric CHECK (mem_gb >= 0),
    net_gbps         numeric CHECK (net_gbps >= 0),
    borrow_gpus      numeric CHECK (borrow_gpus >= 0),
    borrow_cpus      numeric CHECK (borrow_cpus >= 0),
    borrow_mem_gb    numeric CHECK (borrow_mem_gb >= 0),
    borrow_net_gbps  numeric CHECK (borrow_net_gbps >= 0),
    lend_gpus        numeric CHECK (lend_gpus >= 0),
    lend_cpus        numeric CHECK (lend_cpus >= 0),
    lend_mem_gb      numeric CHECK (lend_mem_gb >= 0),
    lend_net_gbps    numeric CHECK (lend_net_gbps >= 0),
    PRIMARY KEY (team_id, pool_id)
);

/* ------------------------------------------------------------------ */
/* Jobs                                                                */
/* ------------------------------------------------------------------ */

CREATE SEQUENCE gangsched.queue_position_seq;

CREATE TABLE gangsched.gangs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id             int NOT NULL REFERENCES gangsched.teams,
    name                text,
    state               text NOT NULL DEFAULT 'pending' CHECK (state IN
                          ('pending', 'nominated', 'placed', 'running', 'preempting',
                           'finished', 'failed', 'cancelled', 'expired')),
    -- the gang and its per-worker request
    workers             int NOT NULL CHECK (workers >= 1),
    gpus                numeric NOT NULL CHECK (gpus >= 0),
    cpus                numeric NOT NULL DEFAULT 0 CHECK (cpus >= 0),
    mem_gb              numeric NOT NULL DEFAULT 0 CHECK (mem_gb >= 0),
    net_gbps            numeric NOT NULL DEFAULT 0 CHECK (net_gbps >= 0),
    gpu_model           text,
    gpu_mem_gb          numeric,
    priority            int NOT NULL DEFAULT 0,
    preemptible         bool NOT NULL DEFAULT true,
    pool_id             int REFERENCES gangsched.pools,
    -- shape: depths into the topology (1 = outermost level, levels+1 = node)
    group_size          int NOT NULL DEFAULT 1 CHECK (group_size >= 1),
    group_span          smallint NOT NULL,
    stages              int NOT NULL DEFAULT 1 CHECK (stages >= 1),
    stage_span          smallint,
    span                smallint,
    dataset             text,
    locality            text NOT NULL DEFAULT 'none' CHECK (locality IN ('none', 'preferred', 'required')),
    checkpoint_interval interval,
    grace               interval,
    queue_timeout       interval,
    command             text,
    -- lifecycle
    queue_pos           bigint NOT NULL,
    submitted_at        timestamptz NOT NULL,
    queued_at           timestamptz NOT NULL,   -- last (re)entry into pending
    placed_at           timestamptz,
    started_at          timestamptz,
    finished_at         timestamptz,
    preempt_deadline    timestamptz,
    last_checkpoint_at  timestamptz,
    started_nodes       int[] NOT NULL DEFAULT '{}',
    borrowed            bool NOT NULL DEFAULT false,
    preempted_for       bigint,
    preemptions         int NOT NULL DEFAULT 0,
    requeues            int NOT NULL DEFAULT 0,
    lost_gpu_seconds    numeric NOT NULL DEFAULT 0,
    reason              text,
    message             text,
    -- float8 copies of the request, computed once at submit so a round
    -- reads them without converting numerics for every pending job
    f_gpus              float8 GENERATED ALWAYS AS (gpus::float8) STORED,
    f_cpus              float8 GENERATED ALWAYS AS (cpus::float8) STORED,
    f_mem_gb            float8 GENERATED ALWAYS AS (mem_gb::float8) STORED,
    f_net_gbps          float8 GENERATED ALWAYS AS (net_gbps::float8) STORED,
    f_gpu_mem_gb        float8 GENERATED ALWAYS AS (gpu_mem_gb::float8) STORED,
    CHECK (workers % (group_size * stages) = 0)
);
-- The round reads the live jobs only; history stays out of its way.
CREATE INDEX gangs_live_idx ON gangsched.gangs (state, priority DESC, queue_pos)
    WHERE state IN ('pending', 'nominated', 'placed', 'running', 'preempting');
CREATE INDEX gangs_team_idx ON gangsched.gangs (team_id, state);

/* ------------------------------------------------------------------ */
/* Allocations                                                         */
/* ------------------------------------------------------------------ */

-- History: one row per worker. `during` is open (upper = infinity) while held
-- and closed when released. Rows are never deleted and only their open end
-- may be closed (triggers below), so the history is append-only.
CREATE TABLE gangsched.allocations (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job          bigint NOT NULL,
    worker       int NOT NULL CHECK (worker >= 0),
    node_id      int NOT NULL,
    team_id      int NOT NULL,
    devices      int[] NOT NULL DEFAULT '{}',
    first_slice  int NOT NULL DEFAULT 0,
    slices       int NOT NULL DEFAULT 0,
    gpus         numeric NOT NULL,
    cpus         numeric NOT NULL,
    mem_gb       numeric NOT NULL,
    net_gbps     numeric NOT NULL,
    borrowed     bool NOT NULL,
    during       tstzrange NOT NULL CHECK (NOT isempty(during) AND NOT lower_inf(during)),
    end_reason   text
);
CREATE INDEX allocations_job_idx ON gangsched.allocations (job);
CREATE INDEX allocations_current_idx ON gangsched.allocations (node_id)
    WHERE upper_inf(during);

-- What is held now, one row per device slice: slot = device * 8 + slice.
-- The primary key is invariant 1, enforced by the database.
CREATE TABLE gangsched.held_slots (
    node_id   int NOT NULL,
    slot      int NOT NULL,
    job       bigint NOT NULL,
    worker    int NOT NULL,
    PRIMARY KEY (node_id, slot)
);
CREATE INDEX held_slots_job_idx ON gangsched.held_slots (job);

-- Capacity held for a nominated job while its victims drain (invariant 5):
-- the planned allocation of each of its workers.
CREATE TABLE gangsched.holds (
    job          bigint NOT NULL,
    worker       int NOT NULL,
    node_id      int NOT NULL,
    devices      int[] NOT NULL DEFAULT '{}',
    first_slice  int NOT NULL DEFAULT 0,
    slices       int NOT NULL DEFAULT 0,
    cpus         numeric NOT NULL,
    mem_gb       numeric NOT NULL,
    net_gbps     numeric NOT NULL,
    PRIMARY KEY (job, worker)
);

CREATE FUNCTION gangsched._append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'gangsched.% is append-only', TG_TABLE_NAME
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = format('%s on gangsched.%I is refused; history rows are never deleted and only the open end of a current allocation may be closed.', TG_OP, TG_TABLE_NAME),
              HINT = 'End allocations with gangsched.cancel(), job_finished() or job_released().';
END $$;

-- Only closing an open range (same lower bound, finite upper) and recording
-- why may change a row; anything else is refused.
CREATE TRIGGER allocations_update_guard
    BEFORE UPDATE ON gangsched.allocations FOR EACH ROW
    WHEN (NOT (upper_inf(OLD.during) AND NOT upper_inf(NEW.during)
               AND lower(NEW.during) = lower(OLD.during)
               AND (NEW.id, NEW.job, NEW.worker, NEW.node_id, NEW.team_id, NEW.devices,
                    NEW.first_slice, NEW.slices, NEW.gpus, NEW.cpus, NEW.mem_gb,
                    NEW.net_gbps, NEW.borrowed)
                   IS NOT DISTINCT FROM
                   (OLD.id, OLD.job, OLD.worker, OLD.node_id, OLD.team_id, OLD.devices,
                    OLD.first_slice, OLD.slices, OLD.gpus, OLD.cpus, OLD.mem_gb,
                    OLD.net_gbps, OLD.borrowed)))
    EXECUTE FUNCTION gangsched._append_only();
CREATE TRIGGER allocations_delete_guard
    BEFORE DELETE OR TRUNCATE ON gangsched.allocations FOR EACH STATEMENT
    EXECUTE FUNCTION gangsched._append_only();

/* ------------------------------------------------------------------ */
/* Events                                                              */
/* ------------------------------------------------------------------ */

-- Every decision with its reason. Append-only.
CREATE TABLE gangsched.events (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL,
    kind     text NOT NULL,
    job      bigint,
    node_id  int,
    team_id  int,
    reason   text,
    detail   jsonb
);
CREATE INDEX events_job_idx ON gangsched.events (job) WHERE job IS NOT NULL;
CREATE INDEX events_at_idx ON gangsched.events USING brin (at);
CREATE TRIGGER events_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON gangsched.events FOR EACH STATEMENT
    EXECUTE FUNCTION gangsched._append_only();
/* ------------------------------------------------------------------ */
/* Per-team limits and name rules (issue 10)                           */
/* ------------------------------------------------------------------ */

-- Per-team overrides of gangsched.max_pending_per_team and
-- gangsched.max_workers_per_gang; NULL takes the setting.
ALTER TABLE gangsched.teams
    ADD COLUMN max_pending int CHECK (max_pending >= 1),
    ADD COLUMN max_workers_per_gang int CHECK (max_workers_per_gang >= 1);

-- The names the API accepts (gangsched._check_name), enforced by the tables
-- too, so nothing else can store a name the rounds would print unescaped.
ALTER TABLE gangsched.pools
    ADD CONSTRAINT pools_name_rule CHECK (length(name) <= 63 AND name ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$');
ALTER TABLE gangsched.nodes
    ADD CONSTRAINT nodes_name_rule CHECK (length(name) <= 63 AND name ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$');
ALTER TABLE gangsched.teams
    ADD CONSTRAINT teams_name_rule CHECK (length(name) <= 63 AND name ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$');
ALTER TABLE gangsched.datasets
    ADD CONSTRAINT datasets_name_rule CHECK (length(dataset) <= 63 AND dataset ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$');

-- submit()'s pending-count cache, one row per team (written by add_team).
-- pending was the team's exact count of pending jobs when queue_position_seq
-- stood at upto; every job submitted since took a queue position, so
-- pending + (last_value - upto) bounds the team's pending jobs from above
-- (jobs requeued since are not in it; counted_at limits how old the count
-- may be). submit() counts again only when that bound reaches the limit or
-- the count is older than 10 seconds; see _check_team_limits.
CREATE TABLE gangsched.team_pending (
    team_id     int PRIMARY KEY REFERENCES gangsched.teams,
    pending     int NOT NULL,
    upto        bigint NOT NULL,
    counted_at  timestamptz NOT NULL
);

-- submit()'s per-team limits: 53S08 for a gang above the team's worker
-- limit, 53S07 when the team already has as many pending jobs as it may.
-- O(1) while the team is far from its pending limit (one index lookup and
-- a read of the sequence); near it, a count of the team's pending jobs on
-- gangs_team_idx, stopped at the limit.
CREATE FUNCTION gangsched._check_team_limits(tid int, workers int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r       record;
    lim     int;
    wlim    int;
    seq     bigint;
    n       int;
BEGIN
    SELECT t.name, t.max_pending, t.max_workers_per_gang, c.pending, c.upto, c.counted_at,
           (SELECT s.last_value FROM gangsched.queue_position_seq s) AS seq
      INTO r
      FROM gangsched.teams t LEFT JOIN gangsched.team_pending c ON c.team_id = t.id
     WHERE t.id = tid;
    wlim := COALESCE(r.max_workers_per_gang,
                     pg_catalog.current_setting('gangsched.max_workers_per_gang', true)::int, 4096);
    IF workers > wlim THEN
        RAISE EXCEPTION 'the gang of % workers is larger than team "%" may submit', workers, r.name
            USING ERRCODE = '53S08',
                  DETAIL = format('Team "%s" may submit gangs of at most %s workers (%s).', r.name, wlim,
                                  CASE WHEN r.max_workers_per_gang IS NOT NULL THEN 'its own limit'
                                       ELSE 'gangsched.max_workers_per_gang' END),
                  HINT = 'Ask for fewer workers, or ask the operator to raise the limit with gangsched.set_team_limits().';
    END IF;
    lim := COALESCE(r.max_pending,
                    pg_catalog.current_setting('gangsched.max_pending_per_team', true)::int, 10000);
    IF r.pending IS NOT NULL AND r.pending + (r.seq - r.upto) < lim
       AND r.counted_at > pg_catalog.now() - interval '10 seconds' THEN
        RETURN;
    END IF;
    -- count again: the sequence first, so jobs submitted meanwhile are in
    -- the next bound
    seq := r.seq;
    SELECT count(*)::int INTO n
      FROM (SELECT FROM gangsched.gangs g WHERE g.team_id = tid AND g.state = 'pending' LIMIT lim) s;
    IF n >= lim THEN
        RAISE EXCEPTION 'team "%" has % pending jobs, as many as it may have', r.name, n
            USING ERRCODE = '53S07',
                  DETAIL = format('Team "%s" may have at most %s pending jobs (%s).', r.name, lim,
                                  CASE WHEN r.max_pending IS NOT NULL THEN 'its own limit'
                                       ELSE 'gangsched.max_pending_per_team' END),
                  HINT = 'Submit again when some of its jobs have started or ended, cancel jobs it no longer needs, '
                         'or ask the operator to raise the limit with gangsched.set_team_limits().';
    END IF;
    -- remember the count unless another submit is remembering one (never wait)
    PERFORM FROM gangsched.team_pending c WHERE c.team_id = tid FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        UPDATE gangsched.team_pending c SET pending = n, upto = seq, counted_at = pg_catalog.now()
         WHERE c.team_id = tid;
    END IF;
END $$;

-- Operator: a team's own limits; NULL takes the settings
-- gangsched.max_pending_per_team and gangsched.max_workers_per_gang.
CREATE FUNCTION gangsched.set_team_limits(team text, max_pending int DEFAULT NULL,
                                          max_workers_per_gang int DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    IF max_pending < 1 OR max_workers_per_gang < 1 THEN
        RAISE EXCEPTION 'team limits must be at least 1, not %',
              CASE WHEN max_pending < 1 THEN max_pending ELSE max_workers_per_gang END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give a positive limit, or NULL for the default setting.';
    END IF;
    UPDATE gangsched.teams t SET max_pending = set_team_limits.max_pending,
                                 max_workers_per_gang = set_team_limits.max_workers_per_gang
     WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team limits set',
                             jsonb_build_object('team', team, 'max_pending', max_pending,
                                                'max_workers_per_gang', max_workers_per_gang));
END $$;
/* ------------------------------------------------------------------ */
/* Tenancy: roles, bindings, who is calling (docs/security.md)         */
/* ------------------------------------------------------------------ */

-- The four group roles, created when absent (roles are cluster-wide: a
-- second database with gangsched shares them). NOLOGIN: login roles are
-- bound to teams and nodes by the operator functions below, which grant
-- the group role they need.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['gangsched_operator', 'gangsched_portal', 'gangsched_agent', 'gangsched_analyst'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END $$;

-- Which roles may act as the portal of which team. A role that is a member
-- of a bound role (a login role in a bound group) is bound too. regrole:
-- stored as the role's oid, dumped and restored by its name.
CREATE TABLE gangsched.members (
    role     regrole NOT NULL,
    team_id  int NOT NULL REFERENCES gangsched.teams ON DELETE CASCADE,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (role, team_id)
);
CREATE INDEX members_team_idx ON gangsched.members (team_id);

-- Which roles may act as the agent of which node.
CREATE TABLE gangsched.agents (
    role     regrole NOT NULL,
    node_id  int NOT NULL REFERENCES gangsched.nodes ON DELETE CASCADE,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (role, node_id)
);
CREATE INDEX agents_node_idx ON gangsched.agents (node_id);

-- The role that called the outermost gangsched function (src/tenancy.c):
-- the current user outside gangsched's SECURITY DEFINER frames.
CREATE FUNCTION gangsched._caller() RETURNS oid
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_caller_sql';

-- Superuser or member of gangsched_operator.
CREATE FUNCTION gangsched._is_operator() RETURNS bool
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_is_operator_sql';

-- Its name: the default of events.actor, evaluated for every event row.
CREATE FUNCTION gangsched._caller_name() RETURNS name
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_caller_name_sql';

-- Every event records the role that acted (the worker's rounds: its role).
ALTER TABLE gangsched.events ADD COLUMN actor name NOT NULL DEFAULT gangsched._caller_name();

-- ERROR 42501 unless the caller is an operator (src/tenancy.c, the same
-- check the round makes).
CREATE FUNCTION gangsched._require_operator(action text) RETURNS void
LANGUAGE C VOLATILE STRICT AS 'MODULE_PATHNAME', 'gs_require_operator_sql';

-- Whether the caller acts for team `tid` (operators act for every team).
CREATE FUNCTION gangsched._acts_for_team(tid int) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    c oid;
BEGIN
    IF gangsched._is_operator() THEN
        RETURN true;
    END IF;
    c := gangsched._caller();
    RETURN EXISTS (SELECT FROM gangsched.members m
                    WHERE m.team_id = tid AND pg_catalog.pg_has_role(c, m.role, 'MEMBER'));
END $$;

-- Refuse unless the caller acts for team `tid`. `action` says what, e.g.
-- 'submit to team "vision"' or 'cancel job 12'.
CREATE FUNCTION gangsched._require_team(tid int, action text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT gangsched._acts_for_team(tid) THEN
        RAISE EXCEPTION 'permission denied to %', action
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('Role "%s" is not bound to the team%s.', gangsched._caller_name(),
                                             CASE WHEN action LIKE '%job%' THEN ' of that job' ELSE '' END),
                  HINT = 'An operator binds a portal role to a team with gangsched.add_member(role, team).';
    END IF;
END $$;

-- Refuse unless the caller is the agent of node `nid` (or an operator).
CREATE FUNCTION gangsched._require_node(nid int, node text, action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c oid;
BEGIN
    IF gangsched._is_operator() THEN
        RETURN;
    END IF;
    c := gangsched._caller();
    IF NOT EXISTS (SELECT FROM gangsched.agents a
                    WHERE a.node_id = nid AND pg_catalog.pg_has_role(c, a.role, 'MEMBER')) THEN
        RAISE EXCEPTION 'permission denied to % for node "%"', action, node
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('Role "%s" is not bound to node "%s".', gangsched._caller_name(), node),
                  HINT = 'An operator binds an agent role to a node with gangsched.add_agent(role, node).';
    END IF;
END $$;

-- Refuse unless the caller is the agent of a node where job `job` holds
-- workers now (or an operator).
CREATE FUNCTION gangsched._require_job_agent(job bigint, action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c oid;
BEGIN
    IF gangsched._is_operator() THEN
        RETURN;
    END IF;
    c := gangsched._caller();
    IF NOT EXISTS (SELECT FROM gangsched.allocations x JOIN gangsched.agents a ON a.node_id = x.node_id
                    WHERE x.job = _require_job_agent.job AND pg_catalog.upper_inf(x.during)
                      AND pg_catalog.pg_has_role(c, a.role, 'MEMBER')) THEN
        RAISE EXCEPTION 'permission denied to % job %', action, job
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('Role "%s" is not bound to any node where job %s holds workers.',
                                             gangsched._caller_name(), job),
                  HINT = 'Only the agents of the nodes a job runs on report on it; an operator binds them with gangsched.add_agent(role, node).';
    END IF;
END $$;

-- What the caller may see in the jobs, queue and placements views: every
-- row (operators, analysts) or its teams' rows (portals); commands only of
-- its own teams (operators: all).
CREATE FUNCTION gangsched._visibility(OUT all_rows bool, OUT all_commands bool, OUT teams int[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    c oid := gangsched._caller();
BEGIN
    all_commands := gangsched._is_operator();
    all_rows := all_commands OR pg_catalog.pg_has_role(c, 'gangsched_analyst', 'MEMBER');
    SELECT COALESCE(pg_catalog.array_agg(DISTINCT m.team_id), '{}') INTO teams
      FROM gangsched.members m WHERE pg_catalog.pg_has_role(c, m.role, 'MEMBER');
END $$;

CREATE FUNCTION gangsched._role_oid(role name, what text) RETURNS oid
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r oid;
BEGIN
    SELECT oid INTO r FROM pg_catalog.pg_roles WHERE rolname = role;
    IF r IS NULL THEN
        RAISE EXCEPTION 'role "%" does not exist', role
            USING ERRCODE = 'undefined_object',
                  HINT = pg_catalog.format('Create the login role first (CREATE ROLE ... LOGIN), then bind it as %s.', what);
    END IF;
    IF role IN ('gangsched_operator', 'gangsched_portal', 'gangsched_agent', 'gangsched_analyst')
       OR (SELECT rolsuper FROM pg_catalog.pg_roles WHERE oid = r) THEN
        RAISE EXCEPTION 'role "%" cannot be bound as %', role, what
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'gangsched''s own group roles and superusers are not bound to teams or nodes.',
                  HINT = 'Bind the login role (or a group role of your own) that the portal or agent connects as.';
    END IF;
    RETURN r;
END $$;

-- Default timeouts for a newly bound role, so a portal or agent that leaves
-- a transaction open cannot hold locks the round needs for long. Settings
-- the operator gave the role already are kept.
CREATE FUNCTION gangsched._tenant_timeouts(r oid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s text[];
    k text;
    v text;
BEGIN
    SELECT setconfig INTO s FROM pg_catalog.pg_db_role_setting WHERE setrole = r AND setdatabase = 0;
    FOR k, v IN VALUES ('lock_timeout', '5s'), ('statement_timeout', '60s'), ('idle_in_transaction_session_timeout', '60s') LOOP
        IF s IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.unnest(s) x WHERE x LIKE k || '=%') THEN
            EXECUTE pg_catalog.format('ALTER ROLE %I SET %s = %L', pg_catalog.pg_get_userbyid(r), k, v);
        END IF;
    END LOOP;
END $$;

CREATE FUNCTION gangsched.add_member(role name, team text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r   oid;
    tid int;
BEGIN
    PERFORM gangsched._require_operator('bind roles to teams');
    r := gangsched._role_oid(role, 'a team''s portal');
    tid := gangsched._team_id(team);
    INSERT INTO gangsched.members (role, team_id) VALUES (r, tid) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    EXECUTE pg_catalog.format('GRANT gangsched_portal TO %I', role);
    PERFORM gangsched._tenant_timeouts(r);
    PERFORM gangsched._event('member', NULL, NULL, tid, 'role bound to team',
                             pg_catalog.jsonb_build_object('role', role, 'team', team));
END $$;

CREATE FUNCTION gangsched.remove_member(role name, team text) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    r   oid;
    tid int;
BEGIN
    PERFORM gangsched._require_operator('unbind roles from teams');
    r := gangsched._role_oid(role, 'a team''s portal');
    tid := gangsched._team_id(team);
    DELETE FROM gangsched.members m WHERE m.role = r AND m.team_id = tid;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT FROM gangsched.members m WHERE m.role = r) THEN
        EXECUTE pg_catalog.format('REVOKE gangsched_portal FROM %I', role);
    END IF;
    PERFORM gangsched._event('member', NULL, NULL, tid, 'role unbound from team',
                             pg_catalog.jsonb_build_object('role', role, 'team', team));
    RETURN true;
END $$;

CREATE FUNCTION gangsched.add_agent(role name, node text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r oid;
    n gangsched.nodes;
BEGIN
    PERFORM gangsched._require_operator('bind agents to nodes');
    r := gangsched._role_oid(role, 'a node''s agent');
    n := gangsched._node(node);
    INSERT INTO gangsched.agents (role, node_id) VALUES (r, n.id) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    EXECUTE pg_catalog.format('GRANT gangsched_agent TO %I', role);
    PERFORM gangsched._tenant_timeouts(r);
    PERFORM gangsched._event('agent', NULL, n.id, NULL, 'role bound to node',
                             pg_catalog.jsonb_build_object('role', role, 'node', node));
END $$;

CREATE FUNCTION gangsched.remove_agent(role name, node text) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    r oid;
    n gangsched.nodes;
BEGIN
    PERFORM gangsched._require_operator('unbind agents from nodes');
    r := gangsched._role_oid(role, 'a node''s agent');
    n := gangsched._node(node);
    DELETE FROM gangsched.agents a WHERE a.role = r AND a.node_id = n.id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT FROM gangsched.agents a WHERE a.role = r) THEN
        EXECUTE pg_catalog.format('REVOKE gangsched_agent FROM %I', role);
    END IF;
    PERFORM gangsched._event('agent', NULL, n.id, NULL, 'role unbound from node',
                             pg_catalog.jsonb_build_object('role', role, 'node', node));
    RETURN true;
END $$;
/* ------------------------------------------------------------------ */
/* ltree, wherever it is installed                                     */
/* ------------------------------------------------------------------ */

-- gangsched's functions never search the schema ltree lives in (often
-- public, which tenants may be able to write in older databases). These
-- wrappers name it, as found while this script runs.
DO $$
DECLARE
    s name := (SELECT n.nspname FROM pg_catalog.pg_extension e
                 JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'ltree');
BEGIN
    EXECUTE pg_catalog.format(
        'CREATE FUNCTION gangsched._subpath(t %1$I.ltree, "offset" int, len int) RETURNS %1$I.ltree '
        'LANGUAGE sql IMMUTABLE STRICT AS $f$ SELECT %1$I.subpath(t, "offset", len) $f$', s);
    EXECUTE pg_catalog.format(
        'CREATE FUNCTION gangsched._nlevel(t %1$I.ltree) RETURNS int '
        'LANGUAGE sql IMMUTABLE STRICT AS $f$ SELECT %1$I.nlevel(t) $f$', s);
END $$;
/* ------------------------------------------------------------------ */
/* Clock and small helpers                                             */
/* ------------------------------------------------------------------ */

-- The scheduler's clock: the time of the call, pg_catalog.clock_timestamp(),
-- unless gangsched.clock_override is set (tests and trace replays run in
-- virtual time). Not the transaction's start (pg_catalog.now()): under READ
-- COMMITTED each statement reads rows committed after BEGIN, and a decision
-- stamped with BEGIN's time would be recorded before the submission, the
-- release or the placement it acted on (the clock rule, docs/concepts.md).
-- Callers take it once per decision, after the statement that read what
-- the decision acts on. STABLE, so that a statement may use it in index
-- conditions; successive calls may return later times.
CREATE FUNCTION gangsched.now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(NULLIF(pg_catalog.current_setting('gangsched.clock_override', true), '')::pg_catalog.timestamptz,
                    pg_catalog.clock_timestamp())
$$;

-- Number of named topology levels (the node is one deeper).
CREATE FUNCTION gangsched._levels() RETURNS int
LANGUAGE sql STABLE AS $$ SELECT count(*)::int FROM gangsched.topology_levels $$;

-- Depth of a level name: 1 = outermost, levels+1 = 'node'. NULL stays NULL.
CREATE FUNCTION gangsched._level_depth(level text, what text) RETURNS smallint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    d smallint;
BEGIN
    IF level IS NULL THEN
        RETURN NULL;
    END IF;
    IF level = 'node' THEN
        RETURN gangsched._levels() + 1;
    END IF;
    SELECT depth INTO d FROM gangsched.topology_levels WHERE name = level;
    IF d IS NULL THEN
        RAISE EXCEPTION 'unknown topology level "%" for %', level, what
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('The levels are %s.',
                                  (SELECT string_agg(name, ', ' ORDER BY depth) || ', node'
                                     FROM gangsched.topology_levels)),
                  HINT = 'Name one of the levels set with gangsched.set_topology_levels(), or node.';
    END IF;
    RETURN d;
END $$;

CREATE FUNCTION gangsched._level_name(depth int) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT name FROM gangsched.topology_levels l WHERE l.depth = _level_name.depth),
                    CASE WHEN depth IS NOT NULL THEN 'node' END)
$$;

-- The domain a node belongs to at a depth: the topology prefix, or the node
-- itself at the innermost level.
CREATE FUNCTION gangsched._domain(topology ltree, node_name text, depth int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN depth > gangsched._nlevel(topology) THEN topology::text || '.' || node_name
                ELSE gangsched._subpath(topology, 0, depth)::text END
$$;

-- A value as error messages show it: JSON-quoted (quotes, backslashes and
-- control characters escaped) and cut after 64 characters.
CREATE FUNCTION gangsched._shown(val text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT pg_catalog.to_json(pg_catalog.left(val, 64))::text
           || CASE WHEN pg_catalog.length(val) > 64 THEN '...' ELSE '' END
$$;

-- Names of teams, pools, nodes, datasets and GPU models: 1 to 63 characters,
-- ASCII letters, digits, '.', '_' and '-', beginning with a letter or a
-- digit (docs/sql-api.md#names). Nothing else can be printed into JSON,
-- channels, logs or shell commands unquoted by mistake. 22023 otherwise.
CREATE FUNCTION gangsched._check_name(val text, what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF val IS NULL OR val = '' THEN
        RAISE EXCEPTION '% must not be empty', what
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('Give the %s as 1 to 63 letters, digits, ".", "_" or "-".', what);
    END IF;
    IF pg_catalog.length(val) > 63 OR val !~ '^[A-Za-z0-9][A-Za-z0-9._-]*$' THEN
        RAISE EXCEPTION 'invalid %: %', what, gangsched._shown(val)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = CASE WHEN pg_catalog.length(val) > 63
                                THEN format('The %s has %s characters; at most 63 are allowed.', what, pg_catalog.length(val))
                                ELSE format('A %s is 1 to 63 ASCII letters, digits, ".", "_" and "-", beginning with a letter or a digit.', what) END,
                  HINT = format('Use a %s such as ''gpu-0042'', ''vision'' or ''imagenet.v2''.', what);
    END IF;
END $$;

-- Free-text labels (a job's name): at most max_chars characters, no control
-- characters (newlines, tabs, escapes). 22023 otherwise.
CREATE FUNCTION gangsched._check_label(val text, what text, max_chars int) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF val IS NULL THEN
        RETURN;
    END IF;
    IF pg_catalog.length(val) > max_chars THEN
        RAISE EXCEPTION '% is too long: % characters', what, pg_catalog.length(val)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A %s has at most %s characters.', what, max_chars),
                  HINT = format('Shorten the %s.', what);
    END IF;
    IF val ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION '% contains a control character: %', what, gangsched._shown(val)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A %s is printable text on one line: no newlines, tabs or other control characters.', what),
                  HINT = format('Remove the control characters from the %s.', what);
    END IF;
END $$;

-- Long text (a job's command, an agent's message): at most max_bytes bytes
-- of UTF-8. 22001 (string_data_right_truncation) otherwise; nothing is cut.
CREATE FUNCTION gangsched._check_text(val text, what text, max_bytes int) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF pg_catalog.octet_length(val) > max_bytes THEN
        RAISE EXCEPTION '% is too long: % bytes', what, pg_catalog.octet_length(val)
            USING ERRCODE = 'string_data_right_truncation',
                  DETAIL = format('A %s has at most %s bytes.', what, max_bytes),
                  HINT = format('Keep the %s short and put the rest in a file the job reads.', what);
    END IF;
END $$;

-- Refuse NULL, negative, NaN and infinite amounts, and amounts outside
-- [0.000001, max] other than 0: every amount must survive the float8 copies
-- the rounds and the generated columns make (1e-400 underflows, 1e400
-- overflows) with room to multiply by workers and nodes. 22003 otherwise.
CREATE FUNCTION gangsched._check_amount(val numeric, what text, allow_null bool DEFAULT false,
                                        max numeric DEFAULT 1e9) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF val IS NULL THEN
        IF allow_null THEN RETURN; END IF;
        RAISE EXCEPTION '% must not be null', what
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = format('Pass 0 if the %s is not needed.', what);
    END IF;
    IF val = 'NaN'::numeric OR val < 0 OR val = 'Infinity'::numeric THEN
        RAISE EXCEPTION '% must be a finite number >= 0, not %', what, val
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = format('Give %s as a non-negative finite number.', what);
    END IF;
    IF val > max OR (val > 0 AND val < 0.000001) THEN
        RAISE EXCEPTION '% must be 0 or between 0.000001 and %, not %', what, max,
              pg_catalog.btrim(pg_catalog.to_char(val, '9.999EEEE'))
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = format('Amounts are 0 or between 0.000001 and %s (docs/sql-api.md#bounds).', max),
                  HINT = format('Give %s in its unit (CPUs, GB, Gbit/s, GPUs), within the bounds.', what);
    END IF;
END $$;

CREATE FUNCTION gangsched._check_interval(val interval, what text, allow_zero bool) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF val IS NOT NULL AND (val < '0'::interval OR (NOT allow_zero AND val = '0'::interval)) THEN
        RAISE EXCEPTION '% must be %, not %', what,
              CASE WHEN allow_zero THEN 'zero or positive' ELSE 'positive' END, val
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('Give %s as a positive interval such as ''10 minutes'', or leave it NULL for the default.', what);
    END IF;
    IF val > '100 years'::interval THEN
        RAISE EXCEPTION '% must be at most 100 years, not %', what, val
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Longer intervals overflow the timestamps they are added to.',
                  HINT = format('Give %s as at most ''100 years'', or leave it NULL for the default.', what);
    END IF;
END $$;

CREATE FUNCTION gangsched._event(kind text, job bigint, node_id int, team_id int, reason text, detail jsonb DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO gangsched.events (at, kind, job, node_id, team_id, reason, detail)
    VALUES (gangsched.now(), kind, job, node_id, team_id, reason, detail)
$$;

CREATE FUNCTION gangsched._pool_id(pool text) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    id int;
BEGIN
    SELECT p.id INTO id FROM gangsched.pools p WHERE p.name = pool;
    IF id IS NULL THEN
        RAISE EXCEPTION 'pool "%" does not exist', pool
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('The pools are: %s.', COALESCE((SELECT string_agg(name, ', ' ORDER BY name) FROM gangsched.pools), 'none yet')),
                  HINT = 'Create it with gangsched.add_pool(name, kind) or name an existing pool.';
    END IF;
    RETURN id;
END $$;

CREATE FUNCTION gangsched._team_id(team text) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    id int;
BEGIN
    SELECT t.id INTO id FROM gangsched.teams t WHERE t.name = team;
    IF id IS NULL THEN
        RAISE EXCEPTION 'team "%" does not exist', team
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Create it with gangsched.add_team(name) or name an existing team (see gangsched.teams).';
    END IF;
    RETURN id;
END $$;

CREATE FUNCTION gangsched._node(node text) RETURNS gangsched.nodes
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n gangsched.nodes;
BEGIN
    SELECT * INTO n FROM gangsched.nodes WHERE name = node;
    IF n.id IS NULL THEN
        RAISE EXCEPTION 'node "%" does not exist', node
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Register it with gangsched.add_node() or name an existing node (see gangsched.nodes).';
    END IF;
    RETURN n;
END $$;
/* ------------------------------------------------------------------ */
/* Inventory API (operator)                                            */
/* ------------------------------------------------------------------ */

CREATE FUNCTION gangsched.set_topology_levels(levels text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    i int;
BEGIN
    IF levels IS NULL OR cardinality(levels) = 0 THEN
        RAISE EXCEPTION 'levels must name at least one topology level'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name the levels outermost first, for example ARRAY[''zone'', ''spine'', ''rack''].';
    END IF;
    IF array_ndims(levels) <> 1 THEN
        RAISE EXCEPTION 'levels must be a one-dimensional array, not % dimensions', array_ndims(levels)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name the levels outermost first, for example ARRAY[''zone'', ''spine'', ''rack''].';
    END IF;
    IF cardinality(levels) > 8 THEN
        RAISE EXCEPTION 'too many topology levels: %', cardinality(levels)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'At most 8 levels above the node are supported.',
                  HINT = 'Merge levels that do not matter for placement.';
    END IF;
    FOR i IN 1 .. cardinality(levels) LOOP
        IF length(levels[i]) > 63 THEN
            RAISE EXCEPTION 'invalid topology level name %', gangsched._shown(levels[i])
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('The name has %s characters; at most 63 are allowed.', length(levels[i])),
                      HINT = 'Use names such as zone, spine, rack.';
        END IF;
        IF levels[i] IS NULL OR levels[i] !~ '^[a-z][a-z0-9_]*$' OR levels[i] = 'node' THEN
            RAISE EXCEPTION 'invalid topology level name "%"', levels[i]
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'Level names are lower-case identifiers; "node" is reserved for the innermost level.',
                      HINT = 'Use names such as zone, spine, rack.';
        END IF;
        IF levels[i] = ANY (levels[1 : i - 1]) THEN
            RAISE EXCEPTION 'topology level "%" is named twice', levels[i]
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Give each level its own name.';
        END IF;
    END LOOP;
    IF EXISTS (SELECT FROM gangsched.nodes) THEN
        IF levels = (SELECT array_agg(name ORDER BY depth) FROM gangsched.topology_levels) THEN
            RETURN;
        END IF;
        RAISE EXCEPTION 'topology levels cannot change once nodes are registered'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('%s nodes use the levels %s.', (SELECT count(*) FROM gangsched.nodes),
                                  (SELECT string_agg(name, '.' ORDER BY depth) FROM gangsched.topology_levels)),
                  HINT = 'Set the levels once, before the first gangsched.add_node().';
    END IF;
    DELETE FROM gangsched.topology_levels;
    INSERT INTO gangsched.topology_levels (depth, name)
    SELECT o, l FROM unnest(levels) WITH ORDINALITY AS u(l, o);
    PERFORM gangsched._event('topology', NULL, NULL, NULL, 'levels set', to_jsonb(levels));
END $$;

CREATE FUNCTION gangsched.add_pool(name text, kind text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    id int;
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'pool name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the pool, for example ''reserved-a100''.';
    END IF;
    PERFORM gangsched._check_name(name, 'pool name');
    IF kind IS NULL OR kind NOT IN ('reserved', 'opportunistic') THEN
        RAISE EXCEPTION 'invalid pool kind "%"', kind
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A pool is reserved (committed capacity, may host non-preemptible work) or opportunistic (everything there is preemptible).',
                  HINT = 'Use kind ''reserved'' or ''opportunistic''.';
    END IF;
    IF EXISTS (SELECT FROM gangsched.pools p WHERE p.name = add_pool.name) THEN
        RAISE EXCEPTION 'pool "%" already exists', name
            USING ERRCODE = 'unique_violation', HINT = 'Choose another name or use the existing pool.';
    END IF;
    INSERT INTO gangsched.pools (name, kind) VALUES (name, kind) RETURNING pools.id INTO id;
    PERFORM gangsched._event('pool', NULL, NULL, NULL, 'pool added', jsonb_build_object('pool', name, 'kind', kind));
    RETURN id;
END $$;

CREATE FUNCTION gangsched.add_node(name text, pool text, topology ltree, cpus numeric, mem_gb numeric,
                                   net_gbps numeric, gpus int, gpu_model text, gpu_mem_gb numeric,
                                   gpu_slices int DEFAULT 1)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    pid     int;
    nlev    int := gangsched._levels();
    cid     int;
    nid     int;
    d       int;
    t       timestamptz := gangsched.now();
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'node name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use the host name, for example ''gpu-0042''.';
    END IF;
    PERFORM gangsched._check_name(name, 'node name');
    pid := gangsched._pool_id(pool);
    IF nlev = 0 THEN
        RAISE EXCEPTION 'topology levels are not set'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call gangsched.set_topology_levels(ARRAY[''zone'', ''spine'', ''rack'']) before adding nodes.';
    END IF;
    IF topology IS NULL THEN
        RAISE EXCEPTION 'topology must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Give the path of domains that contain the node, outermost first, one label per level.';
    END IF;
    IF gangsched._nlevel(topology) <> nlev THEN
        RAISE EXCEPTION 'topology "%" has % levels, the cluster has %', topology, gangsched._nlevel(topology), nlev
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The levels are %s.', (SELECT string_agg(l.name, '.' ORDER BY l.depth) FROM gangsched.topology_levels l)),
                  HINT = 'Give the path of domains that contain the node, outermost first, one label per level.';
    END IF;
    IF topology::text !~ '^[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*$' THEN
        RAISE EXCEPTION 'invalid topology %', gangsched._shown(topology::text)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Each topology label is 1 to 63 ASCII letters, digits, "_" or "-".',
                  HINT = 'Use labels such as z1.s2.r17.';
    END IF;
    PERFORM gangsched._check_amount(cpus, 'cpus', false, 1e6);
    PERFORM gangsched._check_amount(mem_gb, 'mem_gb', false, 1e9);
    PERFORM gangsched._check_amount(net_gbps, 'net_gbps', false, 1e9);
    PERFORM gangsched._check_amount(gpu_mem_gb, 'gpu_mem_gb', true, 1e6);
    IF gpus > 0 AND gpu_model IS NOT NULL THEN
        PERFORM gangsched._check_name(gpu_model, 'gpu model');
    END IF;
    IF gpus IS NULL OR gpus < 0 OR gpus > 64 THEN
        RAISE EXCEPTION 'gpus must be between 0 and 64, not %', gpus
            USING ERRCODE = 'numeric_value_out_of_range', HINT = 'Give the number of accelerators on the node, 0 for a CPU-only node.';
    END IF;
    IF gpu_slices IS NULL OR gpu_slices < 1 OR gpu_slices > 8 THEN
        RAISE EXCEPTION 'gpu_slices must be between 1 and 8, not %', gpu_slices
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = 'Use 1 for whole devices only, or the partition count the hardware offers (2, 4, 7).';
    END IF;
    IF gpus = 0 THEN
        gpu_model := NULL; gpu_mem_gb := NULL; gpu_slices := 1;
    END IF;
    IF EXISTS (SELECT FROM gangsched.nodes n WHERE n.name = add_node.name) THEN
        RAISE EXCEPTION 'node "%" already exists', name
            USING ERRCODE = 'unique_violation', HINT = 'Node names are unique; change its state with gangsched.set_node_state().';
    END IF;

    INSERT INTO gangsched.node_classes AS c (pool_id, cpus, mem_gb, net_gbps, gpus, gpu_model, gpu_mem_gb, gpu_slices, nodes)
    VALUES (pid, cpus, mem_gb, net_gbps, gpus, gpu_model, gpu_mem_gb, gpu_slices, 1)
    ON CONFLICT ON CONSTRAINT node_classes_shape_key DO UPDATE SET nodes = c.nodes + 1
    RETURNING c.id INTO cid;

    INSERT INTO gangsched.nodes (name, pool_id, topology, cpus, mem_gb, net_gbps, gpus, gpu_model,
                                 gpu_mem_gb, gpu_slices, class_id, added_at, state_since)
    VALUES (name, pid, topology, cpus, mem_gb, net_gbps, gpus, gpu_model, gpu_mem_gb, gpu_slices, cid, t, t)
    RETURNING nodes.id INTO nid;

    INSERT INTO gangsched.devices (node_id, idx, model, mem_gb, slices)
    SELECT nid, i, gpu_model, gpu_mem_gb, gpu_slices FROM generate_series(0, gpus - 1) i;

    FOR d IN 1 .. nlev LOOP
        INSERT INTO gangsched.domain_classes AS dc (depth, domain, class_id, nodes)
        VALUES (d, gangsched._subpath(topology, 0, d), cid, 1)
        ON CONFLICT (depth, domain, class_id) DO UPDATE SET nodes = dc.nodes + 1;
    END LOOP;
    PERFORM gangsched._event('node', NULL, nid, NULL, 'node added',
                             jsonb_build_object('node', name, 'pool', pool, 'topology', topology::text, 'gpus', gpus));
    RETURN nid;
END $$;

CREATE FUNCTION gangsched.cache_dataset(node text, dataset text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n gangsched.nodes := gangsched._node(node);
BEGIN
    IF dataset IS NULL OR btrim(dataset) = '' THEN
        RAISE EXCEPTION 'dataset name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the dataset as jobs name it in submit(dataset => ...).';
    END IF;
    PERFORM gangsched._check_name(dataset, 'dataset name');
    INSERT INTO gangsched.datasets (node_id, dataset, cached_at) VALUES (n.id, dataset, gangsched.now())
    ON CONFLICT ON CONSTRAINT datasets_pkey DO NOTHING;
END $$;

-- Returns whether the dataset was cached there.
CREATE FUNCTION gangsched.evict_dataset(node text, dataset text) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    n gangsched.nodes := gangsched._node(node);
BEGIN
    DELETE FROM gangsched.datasets d WHERE d.node_id = n.id AND d.dataset = evict_dataset.dataset;
    RETURN FOUND;
END $$;

CREATE FUNCTION gangsched.add_team(name text, weight numeric DEFAULT 1) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    id int;
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'team name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the team, for example ''vision''.';
    END IF;
    PERFORM gangsched._check_name(name, 'team name');
    IF weight IS NULL OR weight = 'NaN'::numeric OR weight <= 0 OR weight = 'Infinity'::numeric THEN
        RAISE EXCEPTION 'team weight must be a finite number > 0, not %', weight
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = 'Use 1 for an equal share; a team of weight 2 gets twice the dominant share.';
    END IF;
    IF weight < 0.000001 OR weight > 1000000 THEN
        RAISE EXCEPTION 'team weight must be between 0.000001 and 1000000, not %', btrim(to_char(weight, '9.999EEEE'))
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = 'Weights are compared as ratios; they need not be large or small.',
                  HINT = 'Use 1 for an equal share; a team of weight 2 gets twice the dominant share.';
    END IF;
    IF EXISTS (SELECT FROM gangsched.teams t WHERE t.name = add_team.name) THEN
        RAISE EXCEPTION 'team "%" already exists', name
            USING ERRCODE = 'unique_violation', HINT = 'Choose another name or use the existing team.';
    END IF;
    INSERT INTO gangsched.teams (name, weight) VALUES (name, weight) RETURNING teams.id INTO id;
    -- the pending-count cache of submit(): a new team has no jobs
    INSERT INTO gangsched.team_pending (team_id, pending, upto, counted_at)
    SELECT id, 0, s.last_value, pg_catalog.now() FROM gangsched.queue_position_seq s;
    PERFORM gangsched._event('team', NULL, NULL, id, 'team added', jsonb_build_object('team', name, 'weight', weight));
    RETURN id;
END $$;

CREATE FUNCTION gangsched.set_quota(team text, pool text, gpus numeric, cpus numeric DEFAULT NULL,
                                    mem_gb numeric DEFAULT NULL, net_gbps numeric DEFAULT NULL,
                                    borrowing_limit_gpus numeric DEFAULT NULL, lending_limit_gpus numeric DEFAULT NULL,
                                    borrowing_limit_cpus numeric DEFAULT NULL, lending_limit_cpus numeric DEFAULT NULL,
                                    borrowing_limit_mem_gb numeric DEFAULT NULL, lending_limit_mem_gb numeric DEFAULT NULL,
                                    borrowing_limit_net_gbps numeric DEFAULT NULL, lending_limit_net_gbps numeric DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
    pid int := gangsched._pool_id(pool);
    eff record;
BEGIN
    PERFORM gangsched._check_amount(gpus, 'gpus');
    -- cpus and mem_gb: NULL is proportional to the team's GPU share of the
    -- pool, 'Infinity' not governed (sql/src/62_quotas.sql)
    PERFORM gangsched._check_amount(NULLIF(cpus, 'Infinity'::numeric), 'cpus', true);
    PERFORM gangsched._check_amount(NULLIF(mem_gb, 'Infinity'::numeric), 'mem_gb', true);
    PERFORM gangsched._check_amount(net_gbps, 'net_gbps', true);
    PERFORM gangsched._check_amount(borrowing_limit_gpus, 'borrowing_limit_gpus', true);
    PERFORM gangsched._check_amount(borrowing_limit_cpus, 'borrowing_limit_cpus', true);
    PERFORM gangsched._check_amount(borrowing_limit_mem_gb, 'borrowing_limit_mem_gb', true);
    PERFORM gangsched._check_amount(borrowing_limit_net_gbps, 'borrowing_limit_net_gbps', true);
    PERFORM gangsched._check_amount(lending_limit_gpus, 'lending_limit_gpus', true);
    PERFORM gangsched._check_amount(lending_limit_cpus, 'lending_limit_cpus', true);
    PERFORM gangsched._check_amount(lending_limit_mem_gb, 'lending_limit_mem_gb', true);
    PERFORM gangsched._check_amount(lending_limit_net_gbps, 'lending_limit_net_gbps', true);
    IF lending_limit_gpus > gpus OR lending_limit_cpus > cpus OR lending_limit_mem_gb > mem_gb
       OR lending_limit_net_gbps > net_gbps THEN
        RAISE EXCEPTION 'lending limit exceeds the nominal quota'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A lending limit caps how much of the team''s own idle nominal quota others may borrow.',
                  HINT = 'Give a lending limit no larger than the nominal amount, or NULL to lend all of it.';
    END IF;
    INSERT INTO gangsched.quotas AS q (team_id, pool_id, gpus, cpus, mem_gb, net_gbps,
                                       borrow_gpus, borrow_cpus, borrow_mem_gb, borrow_net_gbps,
                                       lend_gpus, lend_cpus, lend_mem_gb, lend_net_gbps)
    VALUES (tid, pid, gpus, cpus, mem_gb, net_gbps,
            borrowing_limit_gpus, borrowing_limit_cpus, borrowing_limit_mem_gb, borrowing_limit_net_gbps,
            lending_limit_gpus, lending_limit_cpus, lending_limit_mem_gb, lending_limit_net_gbps)
    ON CONFLICT (team_id, pool_id) DO UPDATE
       SET gpus = EXCLUDED.gpus, cpus = EXCLUDED.cpus, mem_gb = EXCLUDED.mem_gb, net_gbps = EXCLUDED.net_gbps,
           borrow_gpus = EXCLUDED.borrow_gpus, borrow_cpus = EXCLUDED.borrow_cpus,
           borrow_mem_gb = EXCLUDED.borrow_mem_gb, borrow_net_gbps = EXCLUDED.borrow_net_gbps,
           lend_gpus = EXCLUDED.lend_gpus, lend_cpus = EXCLUDED.lend_cpus,
           lend_mem_gb = EXCLUDED.lend_mem_gb, lend_net_gbps = EXCLUDED.lend_net_gbps;
    -- a lending limit above the proportional amount of a NULL cpus / mem_gb,
    -- against the pool's nodes as they are now (later the view caps it)
    IF (cpus IS NULL AND lending_limit_cpus IS NOT NULL) OR (mem_gb IS NULL AND lending_limit_mem_gb IS NOT NULL) THEN
        SELECT e.cpus, e.mem_gb INTO eff FROM gangsched._effective_quotas e WHERE e.team_id = tid AND e.pool_id = pid;
        IF (cpus IS NULL AND lending_limit_cpus > eff.cpus) OR (mem_gb IS NULL AND lending_limit_mem_gb > eff.mem_gb) THEN
            RAISE EXCEPTION 'lending limit exceeds the nominal quota'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = CASE WHEN cpus IS NULL AND lending_limit_cpus > eff.cpus
                                    THEN format('cpus left NULL is proportional to the team''s GPU share of pool %s: %s CPUs.', pool, eff.cpus)
                                    ELSE format('mem_gb left NULL is proportional to the team''s GPU share of pool %s: %s GB.', pool, eff.mem_gb) END,
                      HINT = 'Give a lending limit no larger than the nominal amount, or NULL to lend all of it.';
        END IF;
    END IF;
    PERFORM gangsched._event('quota', NULL, NULL, tid, 'quota set',
                             jsonb_build_object('team', team, 'pool', pool, 'gpus', gpus, 'cpus', cpus,
                                                'mem_gb', mem_gb, 'net_gbps', net_gbps,
                                                'borrowing_limit_gpus', borrowing_limit_gpus,
                                                'lending_limit_gpus', lending_limit_gpus));
END $$;
/* ------------------------------------------------------------------ */
/* Admission control                                                   */
/* ------------------------------------------------------------------ */

-- Slices of one device a fractional request takes on devices with `slices`
-- partitions; 0 when the fraction is not a whole number of slices.
-- This and _fit() stay inlinable (no SET search_path): only gangsched's own
-- functions, which run under its fixed search_path, may call them (PUBLIC
-- has no EXECUTE), so their operators resolve in pg_catalog; their
-- functions are qualified all the same.
CREATE FUNCTION gangsched._slices_needed(gpus numeric, slices int) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN pg_catalog.abs(gpus * slices - pg_catalog.round(gpus * slices)) <= 0.001
                     AND pg_catalog.round(gpus * slices) >= 1
                THEN pg_catalog.round(gpus * slices)::pg_catalog.int4 ELSE 0 END
$$;

-- How many workers of one request fit on an empty node of the given shape.
CREATE FUNCTION gangsched._fit(n_cpus numeric, n_mem numeric, n_net numeric, n_gpus int, n_model text,
                               n_gpu_mem numeric, n_slices int,
                               w_gpus numeric, w_cpus numeric, w_mem numeric, w_net numeric,
                               w_model text, w_gpu_mem numeric) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT LEAST(
        CASE WHEN w_cpus > 0 THEN pg_catalog.floor(n_cpus / w_cpus) ELSE 1000000 END,
        CASE WHEN w_mem > 0 THEN pg_catalog.floor(n_mem / w_mem) ELSE 1000000 END,
        CASE WHEN w_net > 0 THEN pg_catalog.floor(n_net / w_net) ELSE 1000000 END,
        CASE WHEN w_gpus = 0 THEN 1000000
             WHEN n_gpus = 0 THEN 0
             WHEN w_model IS NOT NULL AND n_model IS DISTINCT FROM w_model THEN 0
             WHEN w_gpu_mem IS NOT NULL AND COALESCE(n_gpu_mem, 0) < w_gpu_mem THEN 0
             WHEN w_gpus >= 1 THEN pg_catalog.floor(n_gpus / w_gpus)
             WHEN gangsched._slices_needed(w_gpus, n_slices) = 0 THEN 0
             ELSE n_gpus * (n_slices / gangsched._slices_needed(w_gpus, n_slices))
        END)::int
$$;

-- Workers of one request that each domain at `depth` (0: each pool) could
-- hold on empty nodes. pack 0 sums what fits node by node; pack 1 counts
-- whole tensor groups only, each inside one node or group_span domain; pack 2
-- also whole pipeline replicas, each inside one node or stage_span domain.
-- Works on node classes and per-domain class counts, never on nodes, and
-- reads domain counts only at the deepest level where packing needs them.
CREATE FUNCTION gangsched._capacity(j gangsched.gangs, pools int[], depth int, pack int)
RETURNS TABLE (pool_id int, domain text, workers bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    d_node  int := gangsched._levels() + 1;
    rsize   int := j.group_size * j.stages;
    g_dom   bool := pack >= 1 AND j.group_span < d_node;
    s_dom   bool := pack >= 2 AND j.stage_span < d_node;
    base    int := CASE WHEN g_dom THEN j.group_span WHEN s_dom THEN j.stage_span ELSE depth END;
BEGIN
    RETURN QUERY
    WITH fits AS (  -- workers on one node of each eligible class, whole groups or replicas per node
        SELECT c.id, c.pool_id, c.nodes::bigint AS nodes, CASE
                   WHEN pack >= 2 AND j.stage_span = d_node THEN f.per / rsize * rsize
                   WHEN pack >= 1 AND NOT g_dom THEN f.per / j.group_size * j.group_size
                   ELSE f.per END AS per
          FROM gangsched.node_classes c,
               LATERAL (SELECT gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                                              j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)::bigint AS per) f
         WHERE c.pool_id = ANY (pools) AND c.nodes > 0),
    at_base AS (    -- per pool and domain at the base depth, with the enclosing
                    -- stage_span and output domains (text keys hash quickly)
        SELECT f.pool_id, NULL::text AS dom, NULL::text AS sdom, NULL::text AS odom, sum(f.nodes * f.per)::bigint AS cap
          FROM fits f WHERE base = 0 GROUP BY 1
        UNION ALL
        SELECT f.pool_id, dc.domain::text, CASE WHEN s_dom THEN gangsched._subpath(dc.domain, 0, j.stage_span)::text END,
               CASE WHEN _capacity.depth > 0 THEN gangsched._subpath(dc.domain, 0, _capacity.depth)::text END, sum(dc.nodes * f.per)::bigint
          FROM gangsched.domain_classes dc JOIN fits f ON f.id = dc.class_id
         WHERE base > 0 AND dc.depth = base GROUP BY 1, 2, 3, 4),
    grouped AS (    -- whole tensor groups per group_span domain
        SELECT b.pool_id, b.dom, b.sdom, b.odom,
               CASE WHEN g_dom THEN b.cap / j.group_size * j.group_size ELSE b.cap END AS cap
          FROM at_base b),
    replicas AS (   -- whole pipeline replicas per stage_span domain
        SELECT g.pool_id, g.odom,
               CASE WHEN s_dom THEN sum(g.cap)::bigint / rsize * rsize ELSE sum(g.cap)::bigint END AS cap
          FROM grouped g GROUP BY g.pool_id, CASE WHEN s_dom THEN g.sdom ELSE g.dom END, g.odom)
    SELECT r.pool_id, CASE WHEN depth = 0 THEN p.name ELSE r.odom END, sum(r.cap)::bigint
      FROM replicas r JOIN gangsched.pools p ON p.id = r.pool_id
     GROUP BY 1, 2;
END $$;

-- Raises the first reason a job could never run; returns nothing otherwise.
-- Reasons over node classes and per-domain class counts, not nodes.
CREATE FUNCTION gangsched._admit(j gangsched.gangs) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    pools      int[];
    best       bigint;
    r          record;
    lvl        record;
    d_node     int := gangsched._levels() + 1;
    dom        text;
    what       text;
    demand     numeric[];
    ceiling    numeric[];
    res        text[] := ARRAY['GPUs', 'CPUs', 'GB of memory', 'Gbit/s of network'];
    i          int;
    ok         bool := false;
    why        text;
BEGIN
    -- eligible pools
    IF j.pool_id IS NOT NULL THEN
        pools := ARRAY[j.pool_id];
    ELSE
        SELECT array_agg(id) INTO pools FROM gangsched.pools WHERE j.preemptible OR kind = 'reserved';
    END IF;
    IF pools IS NULL OR NOT EXISTS (SELECT FROM gangsched.node_classes WHERE pool_id = ANY (pools) AND nodes > 0) THEN
        RAISE EXCEPTION 'no eligible pool has any node'
            USING ERRCODE = '53S04',
                  DETAIL = CASE WHEN j.preemptible THEN 'No nodes are registered in the pools this job may use.'
                                ELSE 'A non-preemptible job runs only in reserved pools, and none has nodes.' END,
                  HINT = 'Register nodes with gangsched.add_node() first, or submit to another pool.';
    END IF;

    -- unknown model
    IF j.gpus > 0 AND j.gpu_model IS NOT NULL
       AND NOT EXISTS (SELECT FROM gangsched.node_classes WHERE gpu_model = j.gpu_model AND gpus > 0) THEN
        RAISE EXCEPTION 'unknown gpu model "%"', j.gpu_model
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('The cluster has %s.', COALESCE((SELECT string_agg(DISTINCT gpu_model, ', ') FROM gangsched.node_classes WHERE gpus > 0), 'no GPU models')),
                  HINT = 'Name one of the models the cluster has, or leave gpu_model NULL for any.';
    END IF;

    -- a fraction the devices cannot slice
    IF j.gpus > 0 AND j.gpus < 1 AND EXISTS (
           SELECT FROM gangsched.node_classes c
            WHERE c.pool_id = ANY (pools) AND c.gpus > 0 AND (j.gpu_model IS NULL OR c.gpu_model = j.gpu_model))
       AND NOT EXISTS (
           SELECT FROM gangsched.node_classes c
            WHERE c.pool_id = ANY (pools) AND c.gpus > 0
              AND (j.gpu_model IS NULL OR c.gpu_model = j.gpu_model)
              AND gangsched._slices_needed(j.gpus, c.gpu_slices) > 0) THEN
        RAISE EXCEPTION 'no device can be sliced into % of a GPU', trim_scale(j.gpus)
            USING ERRCODE = '53S02',
                  DETAIL = format('Eligible devices offer slices of %s of a device.',
                                  (SELECT string_agg(DISTINCT '1/' || gpu_slices, ', ') FROM gangsched.node_classes
                                    WHERE pool_id = ANY (pools) AND gpus > 0 AND (j.gpu_model IS NULL OR gpu_model = j.gpu_model))),
                  HINT = 'Ask for a whole number of slices of one device, for example 0.25 on 4-slice devices, or a whole GPU.';
    END IF;

    -- a worker bigger than every eligible node
    SELECT max(gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                              j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)) AS fit,
           max(c.cpus) AS cpus, max(c.mem_gb) AS mem, max(c.net_gbps) AS net,
           max(c.gpus) FILTER (WHERE j.gpu_model IS NULL OR c.gpu_model = j.gpu_model) AS gpus,
           max(c.gpu_mem_gb) FILTER (WHERE j.gpu_model IS NULL OR c.gpu_model = j.gpu_model) AS gpu_mem
      INTO r
      FROM gangsched.node_classes c WHERE c.pool_id = ANY (pools) AND c.nodes > 0;
    IF r.fit < 1 THEN
        IF j.gpus > 0 AND COALESCE(r.gpus, 0) = 0 THEN
            RAISE EXCEPTION 'no eligible node has GPUs%', COALESCE(' of model ' || j.gpu_model, '')
                USING ERRCODE = '53S01',
                      DETAIL = format('The pools this job may use (%s) have no such devices.%s',
                                      (SELECT string_agg(p.name, ', ' ORDER BY p.name) FROM gangsched.pools p WHERE p.id = ANY (pools)),
                                      CASE WHEN NOT j.preemptible AND j.pool_id IS NULL THEN ' A non-preemptible job runs only in reserved pools.' ELSE '' END),
                      HINT = 'Choose another pool or GPU model, or ask for gpus => 0 for a CPU-only worker.';
        ELSIF j.gpus >= 1 AND j.gpus > COALESCE(r.gpus, 0) THEN
            RAISE EXCEPTION 'worker asks for % GPUs but each eligible node has at most %', trim_scale(j.gpus), COALESCE(r.gpus, 0)
                USING ERRCODE = '53S01', DETAIL = format('Each eligible node has at most %s GPUs%s.', COALESCE(r.gpus, 0),
                                                         CASE WHEN j.gpu_model IS NOT NULL THEN ' of model ' || j.gpu_model ELSE '' END),
                      HINT = format('Ask for at most %s GPUs per worker, and more workers.', COALESCE(r.gpus, 0));
        ELSIF j.gpus > 0 AND j.gpu_mem_gb > COALESCE(r.gpu_mem, 0) THEN
            RAISE EXCEPTION 'worker asks for devices with % GB but the largest eligible device has % GB', trim_scale(j.gpu_mem_gb), COALESCE(trim_scale(r.gpu_mem), 0)
                USING ERRCODE = '53S01', DETAIL = 'No eligible node has devices with that much memory.',
                      HINT = format('Ask for gpu_mem_gb of at most %s.', COALESCE(trim_scale(r.gpu_mem), 0));
        ELSIF j.cpus > r.cpus THEN
            RAISE EXCEPTION 'worker asks for % CPUs but each eligible node has at most %', trim_scale(j.cpus), trim_scale(r.cpus)
                USING ERRCODE = '53S01', DETAIL = format('Each eligible node has at most %s CPUs.', trim_scale(r.cpus)),
                      HINT = format('Ask for at most %s CPUs per worker.', trim_scale(r.cpus));
        ELSIF j.mem_gb > r.mem THEN
            RAISE EXCEPTION 'worker asks for % GB of memory but each eligible node has at most %', trim_scale(j.mem_gb), trim_scale(r.mem)
                USING ERRCODE = '53S01', DETAIL = format('Each eligible node has at most %s GB of memory.', trim_scale(r.mem)),
                      HINT = format('Ask for at most %s GB per worker.', trim_scale(r.mem));
        ELSIF j.net_gbps > r.net THEN
            RAISE EXCEPTION 'worker asks for % Gbit/s of network but each eligible node has at most %', trim_scale(j.net_gbps), trim_scale(r.net)
                USING ERRCODE = '53S01', DETAIL = format('Each eligible node has at most %s Gbit/s.', trim_scale(r.net)),
                      HINT = format('Ask for at most %s Gbit/s per worker.', trim_scale(r.net));
        ELSE
            RAISE EXCEPTION 'no eligible node can hold one worker'
                USING ERRCODE = '53S01',
                      DETAIL = format('The worker asks for %s GPUs, %s CPUs, %s GB and %s Gbit/s together; no single eligible node has all of these.',
                                      trim_scale(j.gpus), trim_scale(j.cpus), trim_scale(j.mem_gb), trim_scale(j.net_gbps)),
                      HINT = 'Lower one of the per-worker amounts, or choose a GPU model whose nodes have more host resources.';
        END IF;
    END IF;

    -- groups, pipeline replicas and the whole gang inside their domains
    FOR lvl IN
        SELECT * FROM (VALUES (1, j.group_size, j.group_span, 'a tensor group of ' || j.group_size || ' workers', 'group_span'),
                              (2, j.group_size * j.stages, j.stage_span, 'a pipeline replica of ' || (j.group_size * j.stages) || ' workers', 'stage_span'),
                              (3, j.workers, j.span, 'the gang of ' || j.workers || ' workers', 'span')) v(k, n, depth, what, arg)
         WHERE depth IS NOT NULL
    LOOP
        IF lvl.depth = d_node THEN
            SELECT max(gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                                      j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)), NULL
              INTO best, dom
              FROM gangsched.node_classes c WHERE c.pool_id = ANY (pools) AND c.nodes > 0;
        ELSIF lvl.k = 1 OR j.group_size * j.stages = 1 THEN
            SELECT s.cap, s.domain INTO best, dom FROM (
                SELECT dc.domain::text AS domain, c.pool_id,
                       sum(dc.nodes::bigint * gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                                                             j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)) AS cap
                  FROM gangsched.domain_classes dc JOIN gangsched.node_classes c ON c.id = dc.class_id
                 WHERE dc.depth = lvl.depth AND c.pool_id = ANY (pools)
                 GROUP BY 1, 2) s
             ORDER BY s.cap DESC, s.domain LIMIT 1;
        ELSE
            -- a replica counts whole tensor groups only; the gang whole
            -- groups and whole replicas
            SELECT c.workers, c.domain INTO best, dom
              FROM gangsched._capacity(j, pools, lvl.depth, lvl.k - 1) c
             ORDER BY c.workers DESC, c.domain LIMIT 1;
        END IF;
        IF COALESCE(best, 0) < lvl.n THEN
            RAISE EXCEPTION '% does not fit inside one %', lvl.what, gangsched._level_name(lvl.depth)
                USING ERRCODE = '53S03',
                      DETAIL = format('The largest eligible %s%s holds at most %s such workers.',
                                      gangsched._level_name(lvl.depth), COALESCE(' (' || dom || ')', ''), COALESCE(best, 0)),
                      HINT = format('Make it at most %s workers, or widen %s to a larger level.', COALESCE(best, 0), lvl.arg);
        END IF;
    END LOOP;

    -- the whole gang inside one eligible pool
    IF j.group_size * j.stages = 1 THEN
        SELECT s.cap, s.name INTO best, dom FROM (
            SELECT p.name, sum(c.nodes::bigint * gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                                                                 j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)) AS cap
              FROM gangsched.node_classes c JOIN gangsched.pools p ON p.id = c.pool_id
             WHERE c.pool_id = ANY (pools) GROUP BY p.name) s
         ORDER BY s.cap DESC, s.name LIMIT 1;
    ELSE
        SELECT c.workers, c.domain INTO best, dom
          FROM gangsched._capacity(j, pools, 0, 2) c
         ORDER BY c.workers DESC, c.domain LIMIT 1;
    END IF;
    IF best < j.workers THEN
        RAISE EXCEPTION 'the gang of % workers is larger than every eligible pool', j.workers
            USING ERRCODE = '53S04',
                  DETAIL = format('The largest eligible pool, %s, holds at most %s such workers.', dom, best),
                  HINT = format('Ask for at most %s workers.', best);
    END IF;

    -- required locality
    IF j.locality = 'required' THEN
        SELECT COALESCE(max(s.cap), 0) INTO best FROM (
            SELECT n.pool_id, sum(gangsched._fit(n.cpus, n.mem_gb, n.net_gbps, n.gpus, n.gpu_model, n.gpu_mem_gb, n.gpu_slices,
                                                 j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)) AS cap
              FROM gangsched.datasets ds JOIN gangsched.nodes n ON n.id = ds.node_id
             WHERE ds.dataset = j.dataset AND n.pool_id = ANY (pools)
             GROUP BY n.pool_id) s;
        IF best < j.workers THEN
            RAISE EXCEPTION 'too few nodes cache dataset "%" for % workers', j.dataset, j.workers
                USING ERRCODE = '53S06',
                      DETAIL = format('Eligible nodes that cache it hold at most %s such workers.', best),
                      HINT = 'Cache the dataset on more nodes with gangsched.cache_dataset(), or submit with locality => ''preferred''.';
        END IF;
    END IF;

    -- more than the team could ever hold, in some eligible pool
    demand := ARRAY[j.gpus * j.workers, j.cpus * j.workers, j.mem_gb * j.workers, j.net_gbps * j.workers];
    FOR r IN
        SELECT p.id, p.name,
               ARRAY[sum(c.nodes * c.gpus), sum(c.nodes * c.cpus), sum(c.nodes * c.mem_gb), sum(c.nodes * c.net_gbps)] AS cap,
               q.team_id IS NOT NULL AS has_quota,
               ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps] AS nominal,
               ARRAY[q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps] AS borrow,
               (SELECT ARRAY[COALESCE(sum(o.gpus - o.lend_gpus), 0), COALESCE(sum(o.cpus - o.lend_cpus), 0),
                             COALESCE(sum(o.mem_gb - o.lend_mem_gb), 0), COALESCE(sum(o.net_gbps - o.lend_net_gbps), 0)]
                  FROM gangsched._effective_quotas o WHERE o.pool_id = p.id AND o.team_id <> j.team_id) AS locked
          FROM gangsched.pools p
          JOIN gangsched.node_classes c ON c.pool_id = p.id
          LEFT JOIN gangsched._effective_quotas q ON q.pool_id = p.id AND q.team_id = j.team_id
         WHERE p.id = ANY (pools)
         GROUP BY p.id, p.name, q.team_id, q.gpus, q.cpus, q.mem_gb, q.net_gbps,
                  q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps
         ORDER BY p.id
    LOOP
        ok := true;
        FOR i IN 1 .. 4 LOOP
            IF NOT j.preemptible THEN
                ceiling[i] := CASE WHEN NOT r.has_quota THEN 0
                                   WHEN r.nominal[i] IS NULL AND i > 1 THEN r.cap[i]
                                   ELSE r.nominal[i] END;
            ELSIF r.has_quota AND r.nominal[i] IS NOT NULL AND r.borrow[i] IS NOT NULL THEN
                ceiling[i] := LEAST(r.nominal[i] + r.borrow[i], r.cap[i] - r.locked[i]);
            ELSE
                ceiling[i] := GREATEST(r.cap[i] - r.locked[i], COALESCE(r.nominal[i], 0));
            END IF;
            IF demand[i] > ceiling[i] THEN
                ok := false;
                why := COALESCE(why, format('needs %s %s in pool %s but team may hold at most %s there (%s)',
                            trim_scale(demand[i]), res[i], r.name, trim_scale(ceiling[i]),
                            CASE WHEN NOT j.preemptible AND NOT r.has_quota THEN 'no quota: non-preemptible work runs only within nominal quota'
                                 WHEN NOT j.preemptible THEN 'nominal quota; non-preemptible work may not borrow'
                                 WHEN r.borrow[i] IS NOT NULL THEN format('nominal %s + borrowing limit %s', trim_scale(r.nominal[i]), trim_scale(r.borrow[i]))
                                 ELSE format('pool capacity %s less %s other teams may not lend', trim_scale(r.cap[i]), trim_scale(r.locked[i])) END));
            END IF;
        END LOOP;
        EXIT WHEN ok;
    END LOOP;
    IF NOT ok THEN
        RAISE EXCEPTION 'job is larger than team "%" could ever hold', (SELECT name FROM gangsched.teams WHERE id = j.team_id)
            USING ERRCODE = '53S05',
                  DETAIL = 'The job ' || why || '.',
                  HINT = CASE WHEN j.preemptible THEN 'Ask for fewer workers, or ask the operator to raise the quota or borrowing limit.'
                              ELSE 'Ask for fewer workers, submit it as preemptible, or ask the operator to raise the nominal quota.' END;
    END IF;
END $$;
/* ------------------------------------------------------------------ */
/* Jobs API (portal)                                                   */
/* ------------------------------------------------------------------ */

CREATE FUNCTION gangsched.submit(team text, workers int, gpus numeric, cpus numeric DEFAULT 0,
                                 mem_gb numeric DEFAULT 0, net_gbps numeric DEFAULT 0, name text DEFAULT NULL,
                                 priority int DEFAULT 0, preemptible bool DEFAULT true, pool text DEFAULT NULL,
                                 group_size int DEFAULT 1, group_span text DEFAULT 'node', stages int DEFAULT 1,
                                 stage_span text DEFAULT NULL, span text DEFAULT NULL, gpu_model text DEFAULT NULL,
                                 gpu_mem_gb numeric DEFAULT NULL, dataset text DEFAULT NULL, locality text DEFAULT 'none',
                                 checkpoint_interval interval DEFAULT NULL, grace interval DEFAULT NULL,
                                 queue_timeout interval DEFAULT NULL, command text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    j gangsched.gangs;
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
    -- goes through the SQL checks, which raise the precise error
    IF NOT gangsched._admit_fast(j) THEN
        PERFORM gangsched._admit(j);
    END IF;

    INSERT INTO gangsched.gangs (team_id, name, workers, gpus, cpus, mem_gb, net_gbps, gpu_model, gpu_mem_gb,
                                priority, preemptible, pool_id, group_size, group_span, stages, stage_span, span,
                                dataset, locality, checkpoint_interval, grace, queue_timeout, command,
                                queue_pos, submitted_at, queued_at)
    VALUES (j.team_id, name, workers, gpus, cpus, mem_gb, net_gbps, j.gpu_model, j.gpu_mem_gb,
            priority, preemptible, j.pool_id, group_size, j.group_span, stages, j.stage_span, j.span,
            dataset, locality, checkpoint_interval, grace, queue_timeout, command,
            nextval('gangsched.queue_position_seq'), gangsched.now(), gangsched.now())
    RETURNING id INTO j.id;
    INSERT INTO gangsched.events (at, kind, job, team_id, reason)
    VALUES (gangsched.now(), 'submitted', j.id, j.team_id, 'admitted');
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

-- Put a live job back in the queue at its old position.
CREATE FUNCTION gangsched._requeue(job_id bigint, why text, agent_event text DEFAULT 'kill') RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j gangsched.gangs;
BEGIN
    SELECT * INTO j FROM gangsched.gangs WHERE id = job_id FOR UPDATE;
    PERFORM gangsched._end_allocations(ARRAY[job_id], why, agent_event);
    DELETE FROM gangsched.holds WHERE job = job_id;
    UPDATE gangsched.gangs
       SET state = 'pending', placed_at = NULL, started_at = NULL, started_nodes = '{}', borrowed = false,
           preempt_deadline = NULL, preempted_for = NULL, requeues = requeues + 1, queued_at = gangsched.now(),
           lost_gpu_seconds = lost_gpu_seconds + gangsched._lost_gpu_seconds(j), reason = why
     WHERE id = job_id;
    PERFORM gangsched._event('requeued', job_id, NULL, j.team_id, why,
                             jsonb_build_object('from', j.state, 'lost_gpu_seconds', round(gangsched._lost_gpu_seconds(j), 3)));
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
       SET state = 'cancelled', finished_at = gangsched.now(), preempt_deadline = NULL,
           reason = 'cancelled while ' || j.state
     WHERE id = job;
    PERFORM gangsched._event('cancelled', job, NULL, j.team_id, 'cancelled while ' || j.state);
    PERFORM pg_notify('gangsched_events', json_build_object('event', 'cancel', 'job', job)::text);
    PERFORM gangsched._wake();
END $$;

CREATE FUNCTION gangsched.set_node_state(name text, state text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n   gangsched.nodes;
    jid bigint;
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
        FOR jid IN
            SELECT DISTINCT a.job FROM gangsched.allocations a
             WHERE a.node_id = n.id AND upper_inf(a.during)
            UNION
            SELECT DISTINCT h.job FROM gangsched.holds h WHERE h.node_id = n.id
            ORDER BY 1
        LOOP
            PERFORM gangsched._requeue(jid, format('node %s went down', name));
        END LOOP;
    END IF;
    PERFORM gangsched._wake();
END $$;
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
/* ------------------------------------------------------------------ */
/* Views                                                               */
/* ------------------------------------------------------------------ */

-- The portal's view of jobs (the table underneath is gangsched.gangs:
-- every job is a gang). Each role sees what docs/security.md says: a
-- portal its teams' jobs, an analyst and an operator every job; the command
-- only of its own teams' jobs (an operator: every command).
CREATE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds, j.reason, j.message, j.queue_pos,
       CASE WHEN v.all_commands OR j.team_id = ANY (v.teams) THEN j.command END AS command,
       j.checkpoint_interval, j.grace, j.queue_timeout
  FROM gangsched._visibility() v
  JOIN gangsched.gangs j ON v.all_rows OR j.team_id = ANY (v.teams)
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id;

-- What is held now: one row per worker and device (one row with a NULL
-- device for a CPU-only worker).
CREATE VIEW gangsched.placements AS
SELECT a.job, a.worker, n.name AS node, n.topology, d.device, a.first_slice, a.slices,
       a.cpus, a.mem_gb, a.net_gbps, a.borrowed, lower(a.during) AS since
  FROM gangsched._visibility() v
  JOIN gangsched.allocations a ON v.all_rows OR a.team_id = ANY (v.teams)
  JOIN gangsched.nodes n ON n.id = a.node_id
  LEFT JOIN LATERAL unnest(CASE WHEN cardinality(a.devices) = 0 THEN ARRAY[NULL::int] ELSE a.devices END) AS d(device) ON true
 WHERE upper_inf(a.during);

-- Who is bound to what (operators).
CREATE VIEW gangsched.bindings AS
SELECT pg_catalog.pg_get_userbyid(m.role) AS role, 'portal'::text AS kind, t.name AS team, NULL::text AS node, m.added_at
  FROM gangsched.members m JOIN gangsched.teams t ON t.id = m.team_id
UNION ALL
SELECT pg_catalog.pg_get_userbyid(a.role), 'agent', NULL, n.name, a.added_at
  FROM gangsched.agents a JOIN gangsched.nodes n ON n.id = a.node_id;

-- The allocation history for analysts: one row per worker and allocation,
-- with the names the ids stand for.
CREATE VIEW gangsched.allocation_history AS
SELECT a.id, a.job, a.worker, t.name AS team, n.name AS node, p.name AS pool, a.devices, a.first_slice, a.slices,
       a.gpus, a.cpus, a.mem_gb, a.net_gbps, a.borrowed, a.during, a.end_reason
  FROM gangsched.allocations a
  JOIN gangsched.teams t ON t.id = a.team_id
  JOIN gangsched.nodes n ON n.id = a.node_id
  JOIN gangsched.pools p ON p.id = n.pool_id;

-- Every decision with its reason and the role that acted.
CREATE VIEW gangsched.event_log AS
SELECT e.id, e.at, e.kind, e.job, n.name AS node, t.name AS team, e.reason, e.detail, e.actor
  FROM gangsched.events e
  LEFT JOIN gangsched.nodes n ON n.id = e.node_id
  LEFT JOIN gangsched.teams t ON t.id = e.team_id;
/* ------------------------------------------------------------------ */
/* Effective quotas                                                    */
/* ------------------------------------------------------------------ */

-- The quotas as every reader applies them (issue 10). Internal: the loader
-- (src/loader.c, and through it the rounds, the queue view and the
-- admission fast path), _admit, team_shares and _place_ready_nominated read
-- quotas only through this view.
--
-- cpus and mem_gb as stored in gangsched.quotas:
--   a number    that amount;
--   NULL        proportional to the team's GPU share of the pool:
--               gpus × pool CPUs / pool GPUs (memory the same), the pool's
--               totals taken from its registered nodes (node_classes), so
--               the amount does not move when a node goes down or comes
--               back; in a pool without GPUs: not governed;
--   'Infinity'  not governed (set explicitly by the operator).
-- Here a resource that is not governed is NULL, as the readers expect.
-- net_gbps stays as stored: NULL is not governed (docs/fairness.md).
--
-- Lending limits are capped at the effective nominal amount (set_quota
-- refuses larger ones against the pool as it is then, but the pool may
-- change later); borrowing limits keep their meaning above it.
CREATE VIEW gangsched._effective_quotas AS
SELECT q.team_id, q.pool_id, q.gpus, e.cpus, e.mem_gb, q.net_gbps,
       q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps,
       q.lend_gpus,
       CASE WHEN q.lend_cpus IS NOT NULL THEN LEAST(q.lend_cpus, e.cpus) END AS lend_cpus,
       CASE WHEN q.lend_mem_gb IS NOT NULL THEN LEAST(q.lend_mem_gb, e.mem_gb) END AS lend_mem_gb,
       q.lend_net_gbps
  FROM gangsched.quotas q
  LEFT JOIN (SELECT c.pool_id, sum(c.nodes::numeric * c.gpus) AS gpus, sum(c.nodes * c.cpus) AS cpus,
                    sum(c.nodes * c.mem_gb) AS mem_gb
               FROM gangsched.node_classes c GROUP BY c.pool_id) pt ON pt.pool_id = q.pool_id
 CROSS JOIN LATERAL (
       SELECT CASE WHEN q.cpus = 'Infinity'::numeric THEN NULL
                   WHEN q.cpus IS NOT NULL THEN q.cpus
                   WHEN pt.gpus > 0 THEN pg_catalog.trim_scale(q.gpus * pt.cpus / pt.gpus) END AS cpus,
              CASE WHEN q.mem_gb = 'Infinity'::numeric THEN NULL
                   WHEN q.mem_gb IS NOT NULL THEN q.mem_gb
                   WHEN pt.gpus > 0 THEN pg_catalog.trim_scale(q.gpus * pt.mem_gb / pt.gpus) END AS mem_gb) e;
/* ------------------------------------------------------------------ */
/* Scheduling round                                                    */
/* ------------------------------------------------------------------ */

-- Put live jobs back in the queue at their old positions, set-based: end
-- their allocations (history kept), drop capacity held for them, count the
-- work lost since their last checkpoint. Returns how many were requeued.
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
        SELECT g.id, gangsched._lost_gpu_seconds(g, t) AS lost FROM gangsched.gangs g
         WHERE g.id = ANY (jobs) AND g.state IN ('nominated', 'placed', 'running', 'preempting')),
    r AS (
        UPDATE gangsched.gangs g
           SET state = 'pending', placed_at = NULL, started_at = NULL, started_nodes = '{}', borrowed = false,
               preempt_deadline = NULL, preempted_for = NULL, requeues = g.requeues + 1,
               preemptions = g.preemptions + (g.state = 'preempting')::int,
               queued_at = t,
               lost_gpu_seconds = g.lost_gpu_seconds + o.lost, reason = why
          FROM o
         WHERE g.id = o.id
        RETURNING g.id, g.team_id, o.lost)
    INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
    SELECT t, 'requeued', r.id, r.team_id, why, jsonb_build_object('lost_gpu_seconds', round(r.lost, 3))
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

CREATE FUNCTION gangsched.why_pending(job bigint)
RETURNS TABLE (reason text, detail text)
LANGUAGE plpgsql VOLATILE STRICT AS $$
DECLARE
    tid int;
BEGIN
    SELECT g.team_id INTO tid FROM gangsched.gangs g WHERE g.id = why_pending.job;
    IF tid IS NOT NULL THEN
        PERFORM gangsched._require_team(tid, format('explain job %s', job));
    END IF;
    RETURN QUERY SELECT w.reason, w.detail FROM gangsched._why_pending(job) w;
END $$;
/* ------------------------------------------------------------------ */
/* Fairness views                                                      */
/* ------------------------------------------------------------------ */

-- The pending queue as the next round would try it (a dry run of the round:
-- nothing is written). Internal; read the `queue` view.
CREATE FUNCTION gangsched._queue(OUT "position" int, OUT job bigint, OUT dominant_share float8,
                                 OUT would_borrow bool, OUT fits_now bool, OUT reason text)
RETURNS SETOF record LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_queue';

-- Pending jobs in the order the next round would try them, with the
-- weighted dominant share of the job's team when it is tried and whether it
-- would run on borrowed capacity (beyond its team's nominal quota).
-- The rows of _queue() the caller may see (see the jobs view).
CREATE FUNCTION gangsched._queue_visible(OUT "position" int, OUT job bigint, OUT dominant_share float8,
                                         OUT would_borrow bool, OUT fits_now bool, OUT reason text)
RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v record := gangsched._visibility();
BEGIN
    RETURN QUERY
    SELECT q.position, q.job, q.dominant_share, q.would_borrow, q.fits_now, q.reason
      FROM gangsched._queue() q
     WHERE v.all_rows OR (SELECT g.team_id FROM gangsched.gangs g WHERE g.id = q.job) = ANY (v.teams);
END $$;

CREATE VIEW gangsched.queue AS
SELECT q.position, q.job, t.name AS team, j.name, j.priority, j.workers, j.gpus, j.preemptible,
       round(q.dominant_share::numeric, 4) AS dominant_share, q.would_borrow, q.fits_now, q.reason,
       j.submitted_at
  FROM gangsched._queue_visible() q
  JOIN gangsched.gangs j ON j.id = q.job
  JOIN gangsched.teams t ON t.id = j.team_id
 ORDER BY q.position;

-- Per team and pool: nominal quota, what the team holds, what it borrows,
-- what of its idle nominal quota others use (lent), its weighted dominant
-- share over the whole cluster (up nodes), and its weight.
--
-- Lent: borrowers first use the pool's capacity that is nobody's quota (up
-- nodes' GPUs minus the pool's nominal quotas); only the pool's borrowed
-- GPUs beyond that come out of idle quotas, and they are charged to the
-- teams pro rata to what each may lend (its idle quota, capped by its
-- lending limit).
CREATE VIEW gangsched._team_shares_rows AS
WITH cap AS (
    SELECT sum(n.gpus) AS gpus, sum(n.cpus) AS cpus, sum(n.mem_gb) AS mem, sum(n.net_gbps) AS net
      FROM gangsched.nodes n WHERE n.state = 'up'),
pool_cap AS (
    SELECT n.pool_id, sum(n.gpus) AS gpus FROM gangsched.nodes n WHERE n.state = 'up' GROUP BY n.pool_id),
held AS (
    SELECT a.team_id, n.pool_id, sum(a.gpus) AS gpus, sum(a.cpus) AS cpus, sum(a.mem_gb) AS mem,
           sum(a.net_gbps) AS net, COALESCE(sum(a.gpus) FILTER (WHERE a.borrowed), 0) AS borrowed_gpus
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)
     GROUP BY a.team_id, n.pool_id),
team_held AS (
    SELECT h.team_id, sum(h.gpus) AS gpus, sum(h.cpus) AS cpus, sum(h.mem) AS mem, sum(h.net) AS net
      FROM held h GROUP BY h.team_id),
rows AS (
    SELECT t.id AS team_id, p.id AS pool_id, t.name AS team, p.name AS pool, t.weight,
           q.gpus AS nominal_gpus, q.cpus AS nominal_cpus, q.mem_gb AS nominal_mem_gb, q.net_gbps AS nominal_net_gbps,
           q.borrow_gpus AS borrowing_limit_gpus, q.lend_gpus AS lending_limit_gpus,
           COALESCE(h.gpus, 0) AS used_gpus, COALESCE(h.cpus, 0) AS used_cpus,
           COALESCE(h.mem, 0) AS used_mem_gb, COALESCE(h.net, 0) AS used_net_gbps,
           COALESCE(h.borrowed_gpus, 0) AS borrowed_gpus,
           LEAST(GREATEST(COALESCE(q.gpus, 0) - COALESCE(h.gpus, 0), 0),
                 COALESCE(q.lend_gpus, 'Infinity'::numeric)) AS lendable_gpus
      FROM gangsched.teams t CROSS JOIN gangsched.pools p
      LEFT JOIN gangsched._effective_quotas q ON q.team_id = t.id AND q.pool_id = p.id
      LEFT JOIN held h ON h.team_id = t.id AND h.pool_id = p.id
     WHERE q.team_id IS NOT NULL OR h.team_id IS NOT NULL),
pool_lent AS (
    -- borrowed GPUs of the pool that its unassigned capacity does not cover
    SELECT r.pool_id,
           LEAST(sum(r.borrowed_gpus),
                 GREATEST(sum(r.borrowed_gpus) - (COALESCE(max(pc.gpus), 0) - COALESCE(sum(r.nominal_gpus), 0)), 0)) AS gpus,
           sum(r.lendable_gpus) AS lendable
      FROM rows r LEFT JOIN pool_cap pc ON pc.pool_id = r.pool_id
     GROUP BY r.pool_id)
SELECT r.team, r.pool, r.weight, r.nominal_gpus, r.nominal_cpus, r.nominal_mem_gb, r.nominal_net_gbps,
       r.borrowing_limit_gpus, r.lending_limit_gpus,
       r.used_gpus, r.used_cpus, r.used_mem_gb, r.used_net_gbps, r.borrowed_gpus,
       round(CASE WHEN pl.lendable > 0 THEN r.lendable_gpus * LEAST(1, pl.gpus / pl.lendable) ELSE 0 END, 3) AS lent_gpus,
       round((GREATEST(COALESCE(th.gpus / NULLIF(cap.gpus, 0), 0), COALESCE(th.cpus / NULLIF(cap.cpus, 0), 0),
                       COALESCE(th.mem / NULLIF(cap.mem, 0), 0), COALESCE(th.net / NULLIF(cap.net, 0), 0))
              / r.weight)::numeric, 4) AS dominant_share
  FROM rows r CROSS JOIN cap JOIN pool_lent pl ON pl.pool_id = r.pool_id
  LEFT JOIN team_held th ON th.team_id = r.team_id
 ORDER BY r.pool, r.team;

-- Readers get the rows above through a function that runs without JIT: the
-- view's plan is estimated above jit_above_cost on a large cluster and
-- compiling it took 0.9-2.6 s for a query that runs in milliseconds (views
-- cannot carry SET). Every reader sees every row, so the function runs as
-- the owner (SECURITY DEFINER, see 99_search_path.sql).
CREATE FUNCTION gangsched._team_shares() RETURNS SETOF gangsched._team_shares_rows
LANGUAGE sql STABLE SET jit = off AS $$ SELECT * FROM gangsched._team_shares_rows $$;

CREATE VIEW gangsched.team_shares AS
SELECT s.* FROM gangsched._team_shares() s ORDER BY s.pool, s.team;
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
-- resource). The round decided it while the victims still held their
-- capacity, which makes a priority preemptor look beyond its team's quota
-- when the swap keeps the team within it.
CREATE FUNCTION gangsched._place_ready_nominated(only_job bigint DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    ready bigint[];
    jid   bigint;
    t     timestamptz;
BEGIN
    SELECT array_agg(g.id ORDER BY g.id) INTO ready
      FROM gangsched.gangs g
     WHERE g.state = 'nominated' AND (only_job IS NULL OR g.id = only_job)
       AND NOT EXISTS (SELECT FROM gangsched.gangs v WHERE v.preempted_for = g.id AND v.state = 'preempting');
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
           SET borrowed = NOT COALESCE((
                   SELECT q.gpus >= u.gpus + g.workers * g.gpus
                          AND (q.cpus IS NULL OR q.cpus >= u.cpus + g.workers * g.cpus)
                          AND (q.mem_gb IS NULL OR q.mem_gb >= u.mem_gb + g.workers * g.mem_gb)
                          AND (q.net_gbps IS NULL OR q.net_gbps >= u.net_gbps + g.workers * g.net_gbps)
                     FROM gangsched._effective_quotas q
                     CROSS JOIN LATERAL (
                          SELECT COALESCE(sum(a.gpus), 0) AS gpus, COALESCE(sum(a.cpus), 0) AS cpus,
                                 COALESCE(sum(a.mem_gb), 0) AS mem_gb, COALESCE(sum(a.net_gbps), 0) AS net_gbps
                            FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
                           WHERE upper_inf(a.during) AND a.team_id = g.team_id AND n.pool_id = q.pool_id) u
                    WHERE q.team_id = g.team_id
                      AND q.pool_id = (SELECT n.pool_id FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
                                        WHERE h.job = g.id LIMIT 1)), false)
         WHERE g.id = jid;
        INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus,
                                           mem_gb, net_gbps, borrowed, during)
        SELECT h.job, h.worker, h.node_id, g.team_id, h.devices, h.first_slice, h.slices, g.gpus, h.cpus,
               h.mem_gb, h.net_gbps, g.borrowed, tstzrange(t, NULL)
          FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job
         WHERE h.job = jid;
    END LOOP;
    INSERT INTO gangsched.held_slots (node_id, slot, job, worker)
    SELECT h.node_id, d * 8 + s, h.job, h.worker
      FROM gangsched.holds h, unnest(h.devices) d, generate_series(h.first_slice, h.first_slice + h.slices - 1) s
     WHERE h.job = ANY (ready);
    PERFORM pg_notify('gangsched_node_' || x.node_id, json_build_object('event', 'start', 'job', x.job)::text)
       FROM (SELECT DISTINCT h.job, h.node_id FROM gangsched.holds h WHERE h.job = ANY (ready) ORDER BY 1, 2) x;
    DELETE FROM gangsched.holds WHERE job = ANY (ready);
    WITH p AS (
        UPDATE gangsched.gangs g
           SET state = 'placed', placed_at = t, started_at = NULL, started_nodes = '{}', reason = NULL
         WHERE g.id = ANY (ready) AND g.state = 'nominated'
        RETURNING g.id, g.team_id, g.borrowed)
    INSERT INTO gangsched.events (at, kind, job, team_id, reason)
    SELECT t, 'placed', p.id, p.team_id,
           CASE WHEN p.borrowed THEN 'placed on the capacity its victims released, as borrowed capacity'
                ELSE 'placed on the capacity its victims released, within nominal quota' END
      FROM p;
    RETURN cardinality(ready);
END $$;

-- Kill victims whose grace deadline has passed: their allocations end, the
-- work since their last checkpoint is lost, their agents are told to kill,
-- and they go back to pending at their old queue position. Then place the
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
             ORDER BY g.id FOR UPDATE SKIP LOCKED) l;
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
    j gangsched.gangs;
    t timestamptz;
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
    IF checkpointed THEN
        UPDATE gangsched.gangs SET last_checkpoint_at = t WHERE id = j.id;
    END IF;
    PERFORM gangsched._requeue_many(ARRAY[j.id],
                                    format('preempted for job %s; released%s', j.preempted_for,
                                           CASE WHEN checkpointed THEN ' after a checkpoint' ELSE ' without a checkpoint' END),
                                    'kill', t);
    IF j.preempted_for IS NOT NULL THEN
        PERFORM gangsched._place_ready_nominated(j.preempted_for);
    END IF;
    PERFORM gangsched._wake();
END $$;
/* ------------------------------------------------------------------ */
/* Node agents: resync, liveness, the worker's status                  */
/* ------------------------------------------------------------------ */

-- What node `node` should be running now, one row per worker placed there:
-- for an agent that starts, reconnects or missed notifications. `action` is
-- what the agent must make true: 'start' (placed, not yet confirmed by this
-- node), 'run' (confirmed), 'preempt' (stop by `deadline`, then job_released).
CREATE FUNCTION gangsched.node_work(node text)
RETURNS TABLE (job bigint, action text, state text, worker int, local_rank int, local_world_size int,
               world_size int, devices int[], first_slice int, slices int, cpus numeric, mem_gb numeric,
               net_gbps numeric, command text, rank0_node text, deadline timestamptz, placed_at timestamptz,
               gpus numeric, seconds_left float8)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n gangsched.nodes := gangsched._node(node);
BEGIN
    PERFORM gangsched._require_node(n.id, node, 'read the work');
    RETURN QUERY
    SELECT a.job,
           CASE WHEN g.state = 'preempting' THEN 'preempt'
                WHEN n.id = ANY (g.started_nodes) THEN 'run'
                ELSE 'start' END,
           g.state, a.worker,
           (row_number() OVER (PARTITION BY a.job ORDER BY a.worker) - 1)::int,
           (count(*) OVER (PARTITION BY a.job))::int,
           g.workers, a.devices, a.first_slice, a.slices, a.cpus, a.mem_gb, a.net_gbps, g.command,
           (SELECT n0.name FROM gangsched.allocations a0 JOIN gangsched.nodes n0 ON n0.id = a0.node_id
             WHERE a0.job = a.job AND a0.worker = 0 AND upper_inf(a0.during)),
           g.preempt_deadline, g.placed_at, g.gpus,
           extract(epoch FROM g.preempt_deadline - gangsched.now())::float8
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
/* ------------------------------------------------------------------ */
/* Analysts: usage, snapshots, waits, preemption losses, utilization    */
/* ------------------------------------------------------------------ */

-- Read-only functions over the history (gangsched.allocations, one row per
-- worker with the time range it held its capacity, and the gangsched.events
-- log). docs/analytics.md defines every column and shows example queries
-- and plans.
--
-- Time windows are half-open, [from, to), cut off at gangsched.now(): what
-- is still held counts until now, nothing counts in the future. Buckets
-- start at `from` and are bucket long (the last one ends at the window's
-- end); a bucket is a fixed length, so it may not contain months. JIT is
-- off in these functions: the plans over a long history look costly enough
-- to compile (100-300 ms a call) and run in well under a second without.

-- Finding the allocations that overlap a window on a long history without
-- slowing down the writes (docs/analytics.md has the measurements):
-- - open allocations (still held) are few and indexed by
--   allocations_current_idx;
-- - a closed allocation that overlaps [from, to) and lasted at most a day
--   began in [from - 1 day, to): a btree over the start of closed rows;
-- - the few that lasted longer than a day: a GiST over their time ranges.
-- Both are partial, so a round's inserts (open rows) never touch them;
-- they are written when an allocation ends, which rewrites the row anyway
-- (a new row version, with or without these indexes).
CREATE INDEX allocations_closed_start_idx ON gangsched.allocations (lower(during))
    WHERE NOT upper_inf(during);
CREATE INDEX allocations_long_during_idx ON gangsched.allocations USING gist (during)
    WHERE NOT upper_inf(during) AND upper(during) - lower(during) > interval '1 day';

-- Quota and node-state history (few rows) without scanning the events log.
CREATE INDEX events_inventory_idx ON gangsched.events (kind, at)
    WHERE kind IN ('quota', 'node_state');

-- Checks an analyst's window and bucket; returns the bucket in seconds.
CREATE FUNCTION gangsched._bucket_seconds("from" timestamptz, "to" timestamptz, bucket interval) RETURNS float8
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    s float8;
BEGIN
    IF "from" IS NULL OR "to" IS NULL OR bucket IS NULL THEN
        RAISE EXCEPTION 'from, to and bucket must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Give a window such as now() - interval ''1 day'', now() and a bucket such as ''1 hour''.';
    END IF;
    IF NOT isfinite("from") OR NOT isfinite("to") THEN
        RAISE EXCEPTION 'the window must have finite ends, not [%, %)', "from", "to"
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give real timestamps; the window is cut off at gangsched.now() anyway.';
    END IF;
    IF "to" <= "from" THEN
        RAISE EXCEPTION 'the window is empty: to (%) is not after from (%)', "to", "from"
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give the earlier timestamp first.';
    END IF;
    IF extract(month FROM bucket) <> 0 OR extract(year FROM bucket) <> 0 THEN
        RAISE EXCEPTION 'bucket % is not a fixed length', bucket
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Months and years have no fixed number of seconds.',
                  HINT = 'Use days, hours or minutes, for example ''30 days''.';
    END IF;
    s := extract(epoch FROM bucket);
    IF s <= 0 THEN
        RAISE EXCEPTION 'bucket must be positive, not %', bucket
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use an interval such as ''1 hour''.';
    END IF;
    IF extract(epoch FROM "to" - "from") / s > 1000000 THEN
        RAISE EXCEPTION 'too many buckets: % of % in [%, %)', ceil(extract(epoch FROM "to" - "from") / s), bucket, "from", "to"
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = 'At most 1,000,000 buckets are returned.',
                  HINT = 'Use a longer bucket or a shorter window.';
    END IF;
    RETURN s;
END $$;

-- The buckets of [from, least(to, now())): number k (from 0), start, end.
CREATE FUNCTION gangsched._buckets("from" timestamptz, "to" timestamptz, bs float8)
RETURNS TABLE (k int, bucket_start timestamptz, bucket_end timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT k, $1 + make_interval(secs => k * $3),
           LEAST($1 + make_interval(secs => (k + 1) * $3), LEAST($2, gangsched.now()))
      FROM generate_series(0, ceil(extract(epoch FROM LEAST($2, gangsched.now()) - $1) / $3)::int - 1) k
$$;

-- Buckets of bs seconds from spans grouped by (key, first bucket ks, last
-- bucket ke): first_part and last_part are the weighted seconds the group's
-- spans have in buckets ks and ke (ke > ks), w their summed weight, held
-- over every whole bucket in between. Returns sum(weight x seconds) per key
-- and bucket. The whole buckets go in as a difference (+w at ks + 1, -w at
-- ke) summed over the buckets at the end, so a week-long span costs no more
-- than an hour-long one. Callers group their spans with
--   floor(s / bs) AS ks, ceil(e / bs) - 1 AS ke,
--   sum(w * (LEAST(e, (ks + 1) * bs) - s)), sum(w * (e - ke * bs)), sum(w)
-- (s, e in seconds from the window's start).
CREATE FUNCTION gangsched._bucketize(key int[], ks int[], ke int[], first_part float8[], last_part float8[],
                                     w float8[], bs float8)
RETURNS TABLE (key int, k int, weighted float8)
LANGUAGE sql IMMUTABLE AS $$
WITH g AS (
    SELECT * FROM unnest($1, $2, $3, $4, $5, $6) u(key, ks, ke, first_part, last_part, w)),
per AS (
    SELECT g.key, x.k, sum(x.piece) AS piece, sum(x.diff) AS diff
      FROM g,
           LATERAL (VALUES (1, g.ks, g.first_part, 0::float8),
                           (2, g.ke, g.last_part, 0),
                           (3, g.ks + 1, 0, g.w * $7),
                           (4, g.ke, 0, -g.w * $7)) x(part, k, piece, diff)
     WHERE x.part = 1 OR (x.part = 2 AND g.ke > g.ks) OR (x.part > 2 AND g.ke > g.ks + 1)
     GROUP BY 1, 2),
grid AS (
    -- every bucket of every key, so that the differences carry over empty buckets
    SELECT kk.key, gs.k
      FROM (SELECT DISTINCT per.key FROM per) kk, generate_series(0, (SELECT max(per.k) FROM per)) gs(k))
SELECT grid.key, grid.k,
       COALESCE(per.piece, 0) + sum(COALESCE(per.diff, 0)) OVER (PARTITION BY grid.key ORDER BY grid.k)
  FROM grid LEFT JOIN per ON per.key = grid.key AND per.k = grid.k
$$;

-- Allocated GPU-seconds per bucket, team and borrowed flag over [from,
-- least(to, now())). The allocations overlapping the window come through
-- the three indexes above: closed ones that began at most a day before the
-- window, closed ones longer than a day that began earlier, and open ones.
CREATE FUNCTION gangsched._allocated("from" timestamptz, "to" timestamptz, bs float8)
RETURNS TABLE (k int, team_id int, borrowed bool, gpu_seconds float8)
LANGUAGE sql STABLE AS $$
WITH w AS MATERIALIZED (SELECT $1 AS t0, LEAST($2, gangsched.now()) AS t1),
-- (the bounds are written out, not taken from w, so that they are index conditions)
held AS (
    SELECT a.team_id, a.borrowed, a.gpus, lower(a.during) AS lo, upper(a.during) AS hi
      FROM gangsched.allocations a
     WHERE NOT upper_inf(a.during)
       AND lower(a.during) >= $1 - interval '1 day' AND lower(a.during) < LEAST($2, gangsched.now())
       AND upper(a.during) > $1
    UNION ALL
    SELECT a.team_id, a.borrowed, a.gpus, lower(a.during), upper(a.during)
      FROM gangsched.allocations a
     WHERE NOT upper_inf(a.during) AND upper(a.during) - lower(a.during) > interval '1 day'
       AND a.during && tstzrange($1, LEAST($2, gangsched.now())) AND lower(a.during) < $1 - interval '1 day'
    UNION ALL
    SELECT a.team_id, a.borrowed, a.gpus, lower(a.during), 'infinity'
      FROM gangsched.allocations a
     WHERE upper_inf(a.during) AND lower(a.during) < LEAST($2, gangsched.now())),
spans AS (
    SELECT h.team_id * 2 + h.borrowed::int AS key, h.gpus::float8 AS w,
           date_part('epoch', GREATEST(h.lo, w.t0) - w.t0) AS s,
           date_part('epoch', LEAST(h.hi, w.t1) - w.t0) AS e
      FROM held h, w),
groups AS (
    SELECT sp.key, floor(sp.s / $3)::int AS ks, ceil(sp.e / $3)::int - 1 AS ke,
           sum(sp.w * (LEAST(sp.e, (floor(sp.s / $3) + 1) * $3) - sp.s)) AS first_part,
           sum(sp.w * (sp.e - (ceil(sp.e / $3) - 1) * $3)) AS last_part, sum(sp.w) AS w
      FROM spans sp WHERE sp.e > sp.s AND sp.w > 0 GROUP BY 1, 2, 3),
arr AS (
    SELECT array_agg(key) AS key, array_agg(ks) AS ks, array_agg(ke) AS ke, array_agg(first_part) AS fp,
           array_agg(last_part) AS lp, array_agg(w) AS w
      FROM groups)
SELECT b.k, b.key / 2, b.key % 2 = 1, b.weighted
  FROM arr, gangsched._bucketize(arr.key, arr.ks, arr.ke, arr.fp, arr.lp, arr.w, $3) b
$$;

-- Capacity GPU-seconds per bucket: the GPUs of every node from its
-- registration on, except while it is down (node_state events; a draining
-- node still counts, its jobs still hold it).
CREATE FUNCTION gangsched._capacity("from" timestamptz, "to" timestamptz, bs float8)
RETURNS TABLE (k int, gpu_seconds float8)
LANGUAGE sql STABLE AS $$
WITH w AS MATERIALIZED (SELECT $1 AS t0, LEAST($2, gangsched.now()) AS t1),
changes AS (
    SELECT n.id, n.gpus, n.added_at AS at, 0::bigint AS ord, true AS up
      FROM gangsched.nodes n WHERE n.gpus > 0
    UNION ALL
    SELECT n.id, n.gpus, e.at, e.id, substring(e.reason FROM '-> *([a-z]+)') IS DISTINCT FROM 'down'
      FROM gangsched.events e JOIN gangsched.nodes n ON n.id = e.node_id
     WHERE e.kind = 'node_state' AND n.gpus > 0),
segments AS (
    SELECT c.gpus, c.up, c.at AS s0,
           COALESCE(lead(c.at) OVER (PARTITION BY c.id ORDER BY c.at, c.ord), 'infinity') AS e0
      FROM changes c),
spans AS (
    SELECT sg.gpus::float8 AS w,
           date_part('epoch', GREATEST(sg.s0, w.t0) - w.t0) AS s,
           date_part('epoch', LEAST(sg.e0, w.t1) - w.t0) AS e
      FROM segments sg, w
     WHERE sg.up AND sg.s0 < w.t1 AND sg.e0 > w.t0),
groups AS (
    SELECT floor(sp.s / $3)::int AS ks, ceil(sp.e / $3)::int - 1 AS ke,
           sum(sp.w * (LEAST(sp.e, (floor(sp.s / $3) + 1) * $3) - sp.s)) AS first_part,
           sum(sp.w * (sp.e - (ceil(sp.e / $3) - 1) * $3)) AS last_part, sum(sp.w) AS w
      FROM spans sp WHERE sp.e > sp.s GROUP BY 1, 2),
arr AS (
    SELECT array_agg(0) AS key, array_agg(ks) AS ks, array_agg(ke) AS ke, array_agg(first_part) AS fp,
           array_agg(last_part) AS lp, array_agg(w) AS w
      FROM groups)
SELECT b.k, b.weighted
  FROM arr, gangsched._bucketize(arr.key, arr.ks, arr.ke, arr.fp, arr.lp, arr.w, $3) b
$$;

-- Per bucket and team: GPU-hours held, their share of the cluster's
-- capacity in that bucket, the team's nominal GPU quota (all pools) in
-- force at the bucket's end, and the GPU-hours held as borrowed capacity.
-- Every team has a row in every bucket.
CREATE FUNCTION gangsched.usage("from" timestamptz, "to" timestamptz, bucket interval DEFAULT '1 hour')
RETURNS TABLE (bucket_start timestamptz, bucket_end timestamptz, team text, gpu_hours float8,
               share_of_capacity float8, quota_gpus numeric, borrowed_gpu_hours float8,
               capacity_gpu_hours float8)
LANGUAGE sql STABLE SET jit = off AS $$
WITH p AS (SELECT gangsched._bucket_seconds($1, $2, $3) AS bs),
b AS (SELECT x.* FROM p, gangsched._buckets($1, $2, p.bs) x),
al AS (
    SELECT x.k, x.team_id, sum(x.gpu_seconds) AS gs, sum(x.gpu_seconds) FILTER (WHERE x.borrowed) AS bgs
      FROM p, gangsched._allocated($1, $2, p.bs) x GROUP BY 1, 2),
cap AS (SELECT x.* FROM p, gangsched._capacity($1, $2, p.bs) x),
quota AS (
    -- each set_quota() is in force from its event until the next one for the same team and pool
    SELECT e.team_id, (e.detail->>'gpus')::numeric AS gpus, e.at AS since,
           COALESCE(lead(e.at) OVER (PARTITION BY e.team_id, e.detail->>'pool' ORDER BY e.at, e.id), 'infinity') AS until
      FROM gangsched.events e
     WHERE e.kind = 'quota'),
qb AS (
    SELECT b.k, q.team_id, sum(q.gpus) AS gpus
      FROM b JOIN quota q ON q.since < b.bucket_end AND b.bucket_end <= q.until
     GROUP BY 1, 2)
SELECT b.bucket_start, b.bucket_end, t.name,
       COALESCE(al.gs, 0) / 3600,
       CASE WHEN cap.gpu_seconds > 0 THEN COALESCE(al.gs, 0) / cap.gpu_seconds END,
       COALESCE(qb.gpus, 0),
       COALESCE(al.bgs, 0) / 3600,
       COALESCE(cap.gpu_seconds, 0) / 3600
  FROM b CROSS JOIN gangsched.teams t
  LEFT JOIN al ON al.k = b.k AND al.team_id = t.id
  LEFT JOIN cap ON cap.k = b.k
  LEFT JOIN qb ON qb.k = b.k AND qb.team_id = t.id
 WHERE b.bucket_end > b.bucket_start
 ORDER BY b.bucket_start, t.name
$$;

-- Per bucket: the cluster's mean capacity and allocated GPUs, their ratio,
-- and the mean GPUs held as borrowed capacity.
CREATE FUNCTION gangsched.utilization("from" timestamptz, "to" timestamptz, bucket interval DEFAULT '1 hour')
RETURNS TABLE (bucket_start timestamptz, bucket_end timestamptz, capacity_gpus float8, allocated_gpus float8,
               utilization float8, borrowed_gpus float8)
LANGUAGE sql STABLE SET jit = off AS $$
WITH p AS (SELECT gangsched._bucket_seconds($1, $2, $3) AS bs),
b AS (SELECT x.* FROM p, gangsched._buckets($1, $2, p.bs) x),
al AS (
    SELECT x.k, sum(x.gpu_seconds) AS gs, sum(x.gpu_seconds) FILTER (WHERE x.borrowed) AS bgs
      FROM p, gangsched._allocated($1, $2, p.bs) x GROUP BY 1),
cap AS (SELECT x.* FROM p, gangsched._capacity($1, $2, p.bs) x),
len AS (SELECT b.*, date_part('epoch', b.bucket_end - b.bucket_start) AS secs FROM b)
SELECT len.bucket_start, len.bucket_end,
       COALESCE(cap.gpu_seconds, 0) / len.secs,
       COALESCE(al.gs, 0) / len.secs,
       CASE WHEN cap.gpu_seconds > 0 THEN COALESCE(al.gs, 0) / cap.gpu_seconds END,
       COALESCE(al.bgs, 0) / len.secs
  FROM len
  LEFT JOIN al ON al.k = len.k
  LEFT JOIN cap ON cap.k = len.k
 WHERE len.secs > 0
 ORDER BY len.bucket_start
$$;

-- Who held what at one instant: one row per worker holding capacity then
-- (an allocation [s, e) holds at s and not at e), with its devices and
-- whether it was borrowed capacity. `until` is NULL while still held.
CREATE FUNCTION gangsched.snapshot("at" timestamptz)
RETURNS TABLE (job bigint, name text, team text, worker int, node text, devices int[], first_slice int,
               slices int, gpus numeric, cpus numeric, mem_gb numeric, net_gbps numeric, borrowed bool,
               since timestamptz, until timestamptz)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT a.job, (SELECT g.name FROM gangsched.gangs g WHERE g.id = a.job),
       (SELECT t.name FROM gangsched.teams t WHERE t.id = a.team_id), a.worker,
       (SELECT n.name FROM gangsched.nodes n WHERE n.id = a.node_id), a.devices, a.first_slice, a.slices, a.gpus, a.cpus,
       a.mem_gb, a.net_gbps, a.borrowed, lower(a.during), upper(a.during)
  FROM (SELECT * FROM gangsched.allocations x
         WHERE NOT upper_inf(x.during)
           AND lower(x.during) >= $1 - interval '1 day' AND lower(x.during) <= $1 AND x.during @> $1
        UNION ALL
        SELECT * FROM gangsched.allocations x
         WHERE NOT upper_inf(x.during) AND upper(x.during) - lower(x.during) > interval '1 day'
           AND x.during @> $1 AND lower(x.during) < $1 - interval '1 day'
        UNION ALL
        SELECT * FROM gangsched.allocations x
         WHERE upper_inf(x.during) AND lower(x.during) <= $1 AND $1 <= gangsched.now()) a
 ORDER BY a.job, a.worker
$$;

-- Queue waits of the jobs submitted in [from, to), per team and for all
-- teams (team NULL): the wait of a job is from its submit to its first
-- placement ('submitted' and first 'placed' event), wherever that falls.
-- Jobs not placed yet (still waiting) and jobs that never were (expired,
-- cancelled) are counted apart and have no wait.
CREATE FUNCTION gangsched.queue_waits("from" timestamptz, "to" timestamptz)
RETURNS TABLE (team text, submitted bigint, placed bigint, still_waiting bigint, never_placed bigint,
               mean_s float8, p50_s float8, p95_s float8, max_s float8)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._bucket_seconds($1, $2, $2 - $1);   -- refuses a bad window
WITH s AS (
    SELECT e.job, e.team_id, e.at
      FROM gangsched.events e
     WHERE e.kind = 'submitted' AND e.at >= $1 AND e.at < $2 AND e.job IS NOT NULL),
w AS (
    SELECT s.team_id, g.state,
           date_part('epoch', (SELECT min(e.at) FROM gangsched.events e WHERE e.job = s.job AND e.kind = 'placed') - s.at) AS wait
      FROM s JOIN gangsched.gangs g ON g.id = s.job)
SELECT t.name, count(*), count(w.wait),
       count(*) FILTER (WHERE w.wait IS NULL AND w.state IN ('pending', 'nominated')),
       count(*) FILTER (WHERE w.wait IS NULL AND w.state NOT IN ('pending', 'nominated')),
       avg(w.wait), percentile_cont(0.5) WITHIN GROUP (ORDER BY w.wait),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY w.wait), max(w.wait)
  FROM w JOIN gangsched.teams t ON t.id = w.team_id
 GROUP BY GROUPING SETS ((t.name), ())
 ORDER BY t.name NULLS LAST
$$;

-- Preemptions in [from, to), per team of the victims and for all teams
-- (team NULL): victims told to stop ('preempting' events), how they went
-- ('requeued' events: released by their agent, or killed at their grace
-- deadline), the work they lost (GPU-hours since their last checkpoint,
-- as recorded by the requeue), how many jobs of the team preempted
-- others ('nominated'), and the other requeues (node down, start timeout)
-- with their own lost work.
CREATE FUNCTION gangsched.preemption_summary("from" timestamptz, "to" timestamptz)
RETURNS TABLE (team text, preemptions bigint, released bigint, killed bigint, lost_gpu_hours float8,
               preemptors bigint, other_requeues bigint, other_lost_gpu_hours float8)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._bucket_seconds($1, $2, $2 - $1);   -- refuses a bad window
WITH e AS (
    SELECT e.team_id, e.kind,
           CASE WHEN e.kind <> 'requeued' THEN NULL
                WHEN e.reason LIKE 'preempted for job %' THEN 'released'
                WHEN e.reason LIKE 'killed at its grace deadline%' THEN 'killed'
                ELSE 'other' END AS how,
           COALESCE((e.detail->>'lost_gpu_seconds')::float8, 0) AS lost
      FROM gangsched.events e
     WHERE e.at >= $1 AND e.at < $2 AND e.kind IN ('preempting', 'requeued', 'nominated'))
SELECT t.name,
       count(*) FILTER (WHERE e.kind = 'preempting'),
       count(*) FILTER (WHERE e.how = 'released'),
       count(*) FILTER (WHERE e.how = 'killed'),
       COALESCE(sum(e.lost) FILTER (WHERE e.how IN ('released', 'killed')), 0) / 3600,
       count(*) FILTER (WHERE e.kind = 'nominated'),
       count(*) FILTER (WHERE e.how = 'other'),
       COALESCE(sum(e.lost) FILTER (WHERE e.how = 'other'), 0) / 3600
  FROM e JOIN gangsched.teams t ON t.id = e.team_id
 GROUP BY GROUPING SETS ((t.name), ())
 ORDER BY t.name NULLS LAST
$$;

-- Per bucket: mean jobs and GPUs waiting (pending or nominated: submitted
-- or requeued and not placed yet), and the most jobs waiting at once.
-- A job waits from its 'submitted' or 'requeued' event to its next
-- 'placed', 'expired' or 'cancelled' event. Cost: it reads the events log
-- from `from` on (to find the jobs that were waiting at `from`), so it is
-- cheap for recent windows and grows with the history after `from`.
CREATE FUNCTION gangsched.queue_depth("from" timestamptz, "to" timestamptz, bucket interval DEFAULT '1 hour')
RETURNS TABLE (bucket_start timestamptz, bucket_end timestamptz, waiting_jobs float8, waiting_gpus float8,
               max_waiting_jobs int)
LANGUAGE sql STABLE SET jit = off AS $$
WITH p AS (SELECT gangsched._bucket_seconds($1, $2, $3) AS bs),
w AS MATERIALIZED (SELECT $1 AS t0, LEAST($2, gangsched.now()) AS t1),
jobs AS (
    SELECT e.job FROM w, gangsched.events e
     WHERE e.at >= w.t0 AND e.kind IN ('submitted', 'requeued', 'placed', 'expired', 'cancelled') AND e.job IS NOT NULL
    UNION
    SELECT g.id FROM gangsched.gangs g WHERE g.state IN ('pending', 'nominated')),
ev AS (
    -- each job's own events, through events_job_idx (OFFSET 0 keeps the
    -- planner from merging the whole index with the job list)
    SELECT j.job, e.at, e.id, e.kind IN ('submitted', 'requeued') AS starts
      FROM jobs j,
           LATERAL (SELECT e.at, e.id, e.kind FROM gangsched.events e
                     WHERE e.job = j.job AND e.kind IN ('submitted', 'requeued', 'placed', 'expired', 'cancelled')
                    OFFSET 0) e),
marked AS (
    SELECT ev.*, lag(ev.starts) OVER o AS was_waiting,
           min(ev.at) FILTER (WHERE NOT ev.starts) OVER (PARTITION BY ev.job ORDER BY ev.at, ev.id
                                                         ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS next_end
      FROM ev WINDOW o AS (PARTITION BY ev.job ORDER BY ev.at, ev.id)),
spans AS (
    SELECT m.job, (SELECT (g.workers * g.gpus)::float8 FROM gangsched.gangs g WHERE g.id = m.job) AS gpus,
           date_part('epoch', GREATEST(m.at, w.t0) - w.t0) AS s,
           date_part('epoch', LEAST(COALESCE(m.next_end, 'infinity'), w.t1) - w.t0) AS e
      FROM marked m, w
     WHERE m.starts AND m.was_waiting IS DISTINCT FROM true
       AND m.at < w.t1 AND COALESCE(m.next_end, 'infinity') > w.t0),
groups AS (
    -- key 0: one per waiting job; key 1: its GPUs
    SELECT x.key, floor(sp.s / p.bs)::int AS ks, ceil(sp.e / p.bs)::int - 1 AS ke,
           sum(x.w * (LEAST(sp.e, (floor(sp.s / p.bs) + 1) * p.bs) - sp.s)) AS first_part,
           sum(x.w * (sp.e - (ceil(sp.e / p.bs) - 1) * p.bs)) AS last_part, sum(x.w) AS w
      FROM spans sp, p, LATERAL (VALUES (0, 1::float8), (1, sp.gpus)) x(key, w)
     WHERE sp.e > sp.s
     GROUP BY 1, 2, 3),
arr AS (
    SELECT array_agg(key) AS key, array_agg(ks) AS ks, array_agg(ke) AS ke, array_agg(first_part) AS fp,
           array_agg(last_part) AS lp, array_agg(w) AS w
      FROM groups),
per AS (
    SELECT bz.k, sum(bz.weighted) FILTER (WHERE bz.key = 0) AS job_secs, sum(bz.weighted) FILTER (WHERE bz.key = 1) AS gpu_secs
      FROM arr, p, gangsched._bucketize(arr.key, arr.ks, arr.ke, arr.fp, arr.lp, arr.w, p.bs) bz
     GROUP BY bz.k),
b AS (SELECT x.*, date_part('epoch', x.bucket_end - x.bucket_start) AS secs FROM p, gangsched._buckets($1, $2, p.bs) x),
peak AS (
    -- the most jobs waiting at once in each bucket: a sweep over the spans'
    -- starts (+1) and ends (-1, first at a tie) and the buckets' starts (the
    -- count carried in)
    SELECT floor(pt.x / p.bs)::int AS k, max(pt.n)::int AS n
      FROM p, (SELECT x, sum(d) OVER (ORDER BY x, d ROWS UNBOUNDED PRECEDING) AS n
                 FROM (SELECT sp.s AS x, 1 AS d FROM spans sp
                       UNION ALL SELECT sp.e, -1 FROM spans sp
                       UNION ALL SELECT b.k * p.bs, 0 FROM b, p) pts) pt
     GROUP BY 1)
SELECT b.bucket_start, b.bucket_end, COALESCE(per.job_secs, 0) / b.secs, COALESCE(per.gpu_secs, 0) / b.secs,
       COALESCE(peak.n, 0)
  FROM b LEFT JOIN per ON per.k = b.k LEFT JOIN peak ON peak.k = b.k
 WHERE b.secs > 0
 ORDER BY b.bucket_start
$$;
/* ------------------------------------------------------------------ */
/* Invariants                                                          */
/* ------------------------------------------------------------------ */

-- One row per violation; none when healthy. Numbers as in docs/invariants.md.
-- jit is off: the unnest/generate_series estimates make the plan look costly
-- enough to JIT-compile (seconds) although the rows are few.
CREATE FUNCTION gangsched.check_invariants()
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
               ('events_append_only', 'gangsched.events')) g(tgname, rel)
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
/* ------------------------------------------------------------------ */
/* C functions                                                         */
/* ------------------------------------------------------------------ */

-- Ask for a round when this transaction commits (the background worker's
-- latch is set after commit; nothing happens on abort).
CREATE FUNCTION gangsched._wake() RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_wake';

-- Admission's fast path: true when the job is certainly admissible (the
-- placement engine places it on the empty registered inventory and its team
-- could hold it); false sends submit to the SQL checks in _admit(), which
-- raise the precise error. Cached per backend, see src/admission.c.
CREATE FUNCTION gangsched._admit_fast(j gangsched.gangs) RETURNS bool
LANGUAGE C STABLE STRICT AS 'MODULE_PATHNAME', 'gs_admit_fast';

-- Any change to the inventory drops every backend's admission cache.
CREATE FUNCTION gangsched._inventory_changed() RETURNS trigger
LANGUAGE C AS 'MODULE_PATHNAME', 'gs_inventory_changed';
CREATE TRIGGER topology_levels_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.topology_levels
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
CREATE TRIGGER pools_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.pools
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
CREATE TRIGGER nodes_changed AFTER INSERT OR UPDATE OF pool_id, topology, cpus, mem_gb, net_gbps, gpus, gpu_model,
                                  gpu_mem_gb, gpu_slices OR DELETE OR TRUNCATE ON gangsched.nodes
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
CREATE TRIGGER teams_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.teams
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
CREATE TRIGGER quotas_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.quotas
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
-- the pools' registered totals, which NULL cpus / mem_gb quotas are
-- proportional to (gangsched._effective_quotas); add_node changes nodes in
-- the same statement, but nothing should depend on that
CREATE TRIGGER node_classes_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.node_classes
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
/* ------------------------------------------------------------------ */
/* pg_dump: the scheduler's state is dumped (docs/operations.md)        */
/* ------------------------------------------------------------------ */

-- The tables and sequences of an extension are its members: pg_dump writes
-- CREATE EXTENSION gangsched for all of them and none of their rows, unless
-- they are registered here as configuration tables. Every table whose rows
-- are state is registered with an empty filter (all rows: the install
-- script inserts none), so a dump holds the whole scheduler, and a restore
-- (CREATE EXTENSION, then the rows) resumes from the dumped state.
--
-- pg_dump orders the data of configuration tables by their foreign keys
-- (pools before nodes, node_classes before nodes and domain_classes, teams
-- before quotas, members, team_pending and gangs, nodes before devices,
-- datasets and agents), so a plain pg_restore needs no --disable-triggers.
-- The generated columns (gangs.f_*) are left out of the COPY and computed
-- again; the identity columns are copied as they are (COPY does not apply
-- GENERATED ALWAYS), and pg_dump writes each identity sequence's setval
-- along with its table's data, so they need no registration of their own
-- (test/t/030_backup.pl checks that new rows continue after the restored
-- ones). The triggers on these tables fire on UPDATE, DELETE or TRUNCATE
-- (the append-only guards) or only invalidate admission caches (the
-- statement triggers of 80_c.sql): none refuses the restore's COPY.
--
-- Not registered: round_lock (no rows ever, only its lock is used).
-- One call per statement (two calls in one statement would update the
-- extension's catalog row twice in one command).
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY[
        -- inventory
        'gangsched.topology_levels', 'gangsched.pools', 'gangsched.node_classes', 'gangsched.nodes',
        'gangsched.domain_classes', 'gangsched.devices', 'gangsched.datasets',
        -- tenancy: teams, quotas, the roles bound to teams and nodes (regrole:
        -- dumped as role names, restored by name; the roles are cluster-wide
        -- and must exist first, see pg_dumpall --roles-only)
        'gangsched.teams', 'gangsched.quotas', 'gangsched.members', 'gangsched.agents',
        -- submit()'s per-team pending counts: a cache, but consistent with the
        -- dumped jobs and queue_position_seq (a sequence read later than the
        -- dump's snapshot only raises its bound, which makes submit count again)
        'gangsched.team_pending',
        -- jobs, what they hold now and the capacity held for nominated jobs
        'gangsched.gangs', 'gangsched.held_slots', 'gangsched.holds',
        -- history
        'gangsched.allocations', 'gangsched.events'] LOOP
        PERFORM pg_catalog.pg_extension_config_dump(t::pg_catalog.regclass, '');
    END LOOP;
END $$;

-- Queue positions: a free-standing sequence (not owned by a column), so
-- pg_dump writes its setval only when it is registered; restored jobs keep
-- their positions and new ones come after them.
SELECT pg_catalog.pg_extension_config_dump('gangsched.queue_position_seq', '');

-- The identity sequences (pools, nodes, node_classes, teams, gangs,
-- allocations, events): owned by their columns, but pg_dump writes no
-- setval for them when the table is an extension's configuration table,
-- and a restored scheduler would hand out ids 1, 2, … again (a duplicate
-- key on the first add_team or submit). Registered too.
DO $$
DECLARE
    s pg_catalog.regclass;
BEGIN
    FOR s IN
        SELECT pg_catalog.pg_get_serial_sequence(pg_catalog.format('%I.%I', n.nspname, c.relname), a.attname)::pg_catalog.regclass
          FROM pg_catalog.pg_attribute a
          JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
          JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'gangsched' AND c.relkind = 'r' AND a.attidentity <> '' AND NOT a.attisdropped
         ORDER BY 1
    LOOP
        PERFORM pg_catalog.pg_extension_config_dump(s, '');
    END LOOP;
END $$;
/* ------------------------------------------------------------------ */
/* Privileges (docs/security.md)                                       */
/* ------------------------------------------------------------------ */

-- Nobody but the extension's owner has any privilege on the tables and
-- sequences: every change goes through the API, SECURITY DEFINER functions
-- that check the caller's role (sql/src/12_tenancy.sql). Operators may read
-- the tables; the other roles read only the views below, which show each
-- role its part.
REVOKE ALL ON SCHEMA gangsched FROM PUBLIC;
GRANT USAGE ON SCHEMA gangsched TO gangsched_operator, gangsched_portal, gangsched_agent, gangsched_analyst;
REVOKE ALL ON ALL TABLES IN SCHEMA gangsched FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA gangsched FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA gangsched FROM PUBLIC;

GRANT SELECT ON ALL TABLES IN SCHEMA gangsched TO gangsched_operator;
-- nobody but the owner may lock the round's lock table (src/round.c)
REVOKE ALL ON gangsched.round_lock FROM gangsched_operator;
GRANT SELECT ON gangsched.jobs, gangsched.queue, gangsched.placements, gangsched.team_shares TO gangsched_portal;
GRANT SELECT ON gangsched.jobs, gangsched.queue, gangsched.placements, gangsched.team_shares,
                gangsched.allocation_history, gangsched.event_log TO gangsched_analyst;

-- EXECUTE by function name, every overload.
DO $$
DECLARE
    g record;
    f regprocedure;
BEGIN
    FOR g IN
        SELECT * FROM (VALUES
            -- the views call these with the reader's privileges
            ('_visibility', 'gangsched_operator, gangsched_portal, gangsched_analyst'),
            ('_level_name', 'gangsched_operator, gangsched_portal, gangsched_analyst'),
            ('_queue_visible', 'gangsched_operator, gangsched_portal, gangsched_analyst'),
            ('_team_shares', 'gangsched_operator, gangsched_portal, gangsched_analyst'),
            -- portals act for their teams
            ('submit', 'gangsched_operator, gangsched_portal'),
            ('cancel', 'gangsched_operator, gangsched_portal'),
            ('why_pending', 'gangsched_operator, gangsched_portal'),
            -- agents act for their nodes
            ('node_channel', 'gangsched_operator, gangsched_agent'),
            ('node_work', 'gangsched_operator, gangsched_agent'),
            ('node_heartbeat', 'gangsched_operator, gangsched_agent'),
            ('job_started', 'gangsched_operator, gangsched_agent'),
            ('job_checkpointed', 'gangsched_operator, gangsched_agent'),
            ('job_finished', 'gangsched_operator, gangsched_agent'),
            ('job_released', 'gangsched_operator, gangsched_agent'),
            -- analysts read the history
            ('usage', 'gangsched_operator, gangsched_analyst'),
            ('utilization', 'gangsched_operator, gangsched_analyst'),
            ('snapshot', 'gangsched_operator, gangsched_analyst'),
            ('queue_waits', 'gangsched_operator, gangsched_analyst'),
            ('preemption_summary', 'gangsched_operator, gangsched_analyst'),
            ('queue_depth', 'gangsched_operator, gangsched_analyst')) AS v(fn, roles)
        UNION ALL
        -- operators: every other API function
        SELECT p.proname, 'gangsched_operator' FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'gangsched'::regnamespace AND p.proname !~ '^_' AND p.prorettype <> 'trigger'::regtype
    LOOP
        FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
                  WHERE p.pronamespace = 'gangsched'::regnamespace AND p.proname = g.fn
        LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f, g.roles);
        END LOOP;
    END LOOP;
END $$;

-- The settings that shape rounds and the clock are superuser-only
-- (PGC_SUSET); operators may set them too.
DO $$
DECLARE
    s text;
BEGIN
    FOREACH s IN ARRAY ARRAY['clock_override', 'start_timeout', 'default_queue_timeout', 'min_runtime',
                             'default_grace', 'max_grace', 'restart_cost', 'queue_order', 'preemption', 'backfill',
                             'max_pending_per_team', 'max_workers_per_gang'] LOOP
        EXECUTE pg_catalog.format('GRANT SET ON PARAMETER %I TO gangsched_operator', 'gangsched.' || s);
    END LOOP;
END $$;
/* ------------------------------------------------------------------ */
/* Name resolution and the caller's privileges                         */
/* ------------------------------------------------------------------ */

-- Every SQL and PL/pgSQL function of the API (and the functions views and
-- triggers call) runs as the extension's owner (SECURITY DEFINER) with a
-- search_path that holds no schema a tenant can write: pg_catalog first,
-- then gangsched, then pg_temp (searched for tables only, never for
-- functions or operators). ltree's functions are reached through wrappers
-- that name ltree's schema (sql/src/15_ltree.sql), so the schema ltree
-- lives in (often public) is never searched. C functions fix the same
-- search_path in C (src/tenancy.c) around their queries.
--
-- The internal functions (names starting with an underscore) are executable
-- by the owner only (sql/src/98_privileges.sql) and called only from
-- those, so they already run as the owner under that search_path: they get
-- neither clause, which keeps them cheap (a SET clause costs a GUC save and
-- restore per call and stops a SQL function from being inlined; a submit
-- calls about twenty of them). Their bodies qualify what is not in
-- pg_catalog or gangsched.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'gangsched'::regnamespace
           AND p.prolang IN (SELECT oid FROM pg_catalog.pg_language WHERE lanname IN ('plpgsql', 'sql'))
           AND p.proname <> 'now'
           AND (p.proname !~ '^_'
                OR p.proname IN ('_visibility', '_level_name', '_queue_visible', '_team_shares')   -- called by views, as the reader
                OR p.prorettype = 'trigger'::regtype)
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, gangsched, pg_temp', f);
    END LOOP;
END $$;
-- run_round writes as the owner too (it refuses non-operators itself).
ALTER FUNCTION gangsched.run_round() SECURITY DEFINER;

-- check_invariants() is one large query over small data: its plan's cost
-- estimate reaches the JIT threshold and compiling it costs seconds. Off.
ALTER FUNCTION gangsched.check_invariants() SET jit = off;
-- What portals and analysts call runs without JIT too: short queries whose
-- estimates on a large cluster can reach jit_above_cost (team_shares took
-- 0.9-2.6 s with JIT, 2.5 ms without). The analyst functions (69) and
-- _team_shares (66) carry SET jit = off themselves.
ALTER FUNCTION gangsched.why_pending(bigint) SET jit = off;
ALTER FUNCTION gangsched._queue_visible() SET jit = off;
-- Its hash joins over expanded device slices are estimated low and spill at
-- the default work_mem (0.5-1.2 s with ~600 running workers, 50 ms with this).
ALTER FUNCTION gangsched.check_invariants() SET work_mem = '64MB';
