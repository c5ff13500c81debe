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
-- The round reads the live jobs only; history stays out of its way. The
-- INCLUDE columns let gangsched.metrics count the live jobs from the index
-- alone (src/metrics.c): none of them changes but with the state, so they
-- make no update less HOT.
CREATE INDEX gangs_live_idx ON gangsched.gangs (state, priority DESC, queue_pos)
    INCLUDE (team_id, workers, gpus, queued_at)
    WHERE state IN ('pending', 'nominated', 'placed', 'running', 'preempting');
CREATE INDEX gangs_team_idx ON gangsched.gangs (team_id, state);
-- The gangs holding capacity, in job order: the round's victim candidates
-- (src/loader.c reads them ORDER BY id, so victim searches do not depend on
-- the table's physical order) without a scan of every finished job.
CREATE INDEX gangs_held_idx ON gangsched.gangs (id) WHERE state IN ('placed', 'running');

/* ------------------------------------------------------------------ */
/* Allocations                                                         */
/* ------------------------------------------------------------------ */

-- History: one row per worker. `during` is open (upper = infinity) while held
-- and closed when released. Only their open end may be closed and rows are
-- deleted only by gangsched.archive_history(), which moves finished jobs'
-- closed rows older than a cutoff (triggers below and in 71_retention.sql),
-- so the history is append-only within the retention window.
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
-- (INCLUDE: gangsched.metrics sums the open allocations from the index
-- alone, src/metrics.c; only closing an allocation updates it, and that
-- leaves the index's condition, so they make no update less HOT)
CREATE INDEX allocations_current_idx ON gangsched.allocations (node_id)
    INCLUDE (team_id, gpus, borrowed)
    WHERE upper_inf(during);
-- A job's open allocations (ending them: job_finished, cancel, a release or
-- a requeue). Those statements run with generic plans (99_search_path.sql);
-- without this index their plan ANDs allocations_current_idx, reading every
-- open allocation of the cluster for each job ended.
CREATE INDEX allocations_open_job_idx ON gangsched.allocations (job)
    WHERE upper_inf(during);

-- What is held now, one row per device slice: slot = device * 8 + slice
-- (gangsched._slots() in SQL, GS_SLOTS_PER_DEVICE in src/model.h).
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

-- The statement guards below. A DELETE passes only inside
-- gangsched.archive_history() (the archive door of src/retention.c is open),
-- and then the row guards of 71_retention.sql refuse every row that is not
-- closed history older than the run's cutoff.
CREATE FUNCTION gangsched._append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND TG_LEVEL = 'STATEMENT' AND gangsched._archive_cutoff() IS NOT NULL THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'gangsched.% is append-only', TG_TABLE_NAME
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = format('%s on gangsched.%I is refused; history rows are removed only by gangsched.archive_history(), and only the open end of a current allocation may be closed.', TG_OP, TG_TABLE_NAME),
              HINT = 'End allocations with gangsched.cancel(), job_finished() or job_released(); move old history with gangsched.archive_history(before).';
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
-- Each job's last preemption, read by every round for the anti-thrash rule
-- (docs/preemption.md): one probe per pending job that was ever preempted.
CREATE INDEX events_preempting_idx ON gangsched.events (job, id) WHERE kind = 'preempting';
CREATE TRIGGER events_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON gangsched.events FOR EACH STATEMENT
    EXECUTE FUNCTION gangsched._append_only();
