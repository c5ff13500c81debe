/*
 * gangsched 0.1 -> 0.2 — upgrade script (ALTER EXTENSION gangsched UPDATE).
 *
 * The hand-written changes since 0.1, in the order the install script
 * (the files in sql/src) makes them; the build appends sql/src/97_dump.sql,
 * 98_privileges.sql and 99_search_path.sql, which re-register the state
 * tables for pg_dump and re-apply grants, SECURITY DEFINER and search_path
 * to every function (CREATE OR REPLACE resets the latter two).
 *
 * test/t/050_upgrade.pl installs 0.1, updates to 0.2 and compares the
 * catalog with a fresh 0.2 install: anything changed in sql/src/ and not
 * here fails it. docs/upgrade.md.
 */
\echo Use "ALTER EXTENSION gangsched UPDATE TO '0.2.0'" to load this file. \quit


/* ------------------------------------------------------------------ */
/* Inventory: the 65th pool is refused (rounds handle 64)              */
/* ------------------------------------------------------------------ */
CREATE OR REPLACE FUNCTION gangsched.add_pool(name text, kind text) RETURNS int
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
    -- a round handles at most 64 pools (src/loader.c): a 65th would stop
    -- every round, so it is refused here
    IF (SELECT count(*) FROM gangsched.pools) >= 64 THEN
        RAISE EXCEPTION 'too many pools: a cluster has at most 64'
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = 'Scheduling rounds handle at most 64 pools.',
                  HINT = 'Merge pools that share a kind: nodes of different GPU models can share a pool (jobs ask for a model).';
    END IF;
    INSERT INTO gangsched.pools (name, kind) VALUES (name, kind) RETURNING pools.id INTO id;
    PERFORM gangsched._event('pool', NULL, NULL, NULL, 'pool added', jsonb_build_object('pool', name, 'kind', kind));
    RETURN id;
END $$;
/* ================================================================== */
/* Issue 18, monitoring: gangsched.metrics (sql/src/75_metrics.sql,   */
/* as it is there; src/metrics.c and the round's _metrics_fold call   */
/* in src/round.c need no SQL)                                        */
/* ================================================================== */

-- The counters (`_total`): how many jobs were submitted, placed, ended,
-- preempted, killed and requeued, the GPU-seconds lost, and the queue-wait
-- histogram. They are counted where events are written, not derived from
-- the events table: old history may be archived (its rows leave
-- gangsched.events), and a counter must never go down.
--
-- Every event of a counted kind adds its counts to metric_deltas (a
-- trigger on gangsched.events; 'submitted' by submit() itself) (insert-only: concurrent writers never wait for each other there); each
-- round folds the deltas into metric_counters (rounds take turns, so one
-- writer updates the counters' rows). gangsched.metrics reads the sum of
-- both, so a count is visible as soon as its event commits.
--
-- A restore (pg_restore, or psql with a plain dump) loads the events with
-- COPY: those are not counted again, the dumped counters come back as they
-- were (both tables are dumped, 97_dump.sql). Nothing else writes the table
-- with COPY (nobody but the owner may write it, and the API never does).
CREATE TABLE gangsched.metric_counters (
    name     text NOT NULL,
    team_id  int NOT NULL,     -- 0: the count belongs to no team
    label    text NOT NULL,    -- the second label ('' none): a job state, a bucket's bound
    value    float8 NOT NULL,
    PRIMARY KEY (name, team_id, label)
);
CREATE TABLE gangsched.metric_deltas (
    name     text NOT NULL,
    team_id  int NOT NULL,
    label    text NOT NULL,
    value    float8 NOT NULL
);

-- The queue-wait histogram's upper bounds in seconds (+Inf is the count).
CREATE FUNCTION gangsched._wait_buckets() RETURNS float8[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT '{1,5,15,30,60,120,300,600,1800,3600,7200,14400,43200,86400}'::float8[]
$$;

-- The same for readers of the metrics view (an internal function has no
-- SET search_path and so is the owner's only, 98_privileges.sql).
CREATE FUNCTION gangsched.queue_wait_buckets() RETURNS float8[]
LANGUAGE sql IMMUTABLE AS $$ SELECT gangsched._wait_buckets() $$;

-- What one event counts: (counter, label, amount) rows. `wait` is the
-- queue wait of a 'placed' event in seconds (since the job last entered
-- the queue), NULL for other kinds.
CREATE FUNCTION gangsched._event_counts(kind text, reason text, detail jsonb, wait float8)
RETURNS TABLE (name text, label text, value float8)
LANGUAGE sql IMMUTABLE AS $$
    SELECT c.name, c.label, c.value
      FROM (VALUES
        ('jobs_submitted', '', CASE WHEN kind = 'submitted' THEN 1 END),
        ('jobs_placed', '', CASE WHEN kind = 'placed' THEN 1 END),
        ('jobs_ended', kind, CASE WHEN kind IN ('finished', 'failed', 'cancelled', 'expired') THEN 1 END),
        ('preemptions', '', CASE WHEN kind = 'preempting' THEN 1 END),
        ('requeues', '', CASE WHEN kind = 'requeued' THEN 1 END),
        ('kills', '', CASE WHEN kind = 'requeued' AND reason LIKE 'killed at its grace deadline%' THEN 1 END),
        ('lost_gpu_seconds', '', CASE WHEN kind = 'requeued' THEN COALESCE((detail ->> 'lost_gpu_seconds')::float8, 0) END),
        ('queue_wait_seconds', '', CASE WHEN kind = 'placed' THEN GREATEST(wait, 0) END),
        -- the smallest bucket the wait falls in ('+Inf' above the last);
        -- gangsched.metrics makes the buckets cumulative
        ('queue_wait_bucket',
         COALESCE((SELECT min(b.le)::text FROM unnest(gangsched._wait_buckets()) b(le) WHERE wait <= b.le), '+Inf'),
         CASE WHEN kind = 'placed' THEN 1 END)) AS c(name, label, value)
     WHERE c.value IS NOT NULL
$$;

-- A row trigger with a WHEN clause: an event of a kind nothing counts
-- costs the clause's test alone, and a single-row INSERT (an agent's
-- report, a cancel) pays no statement-level transition table. The two hot
-- paths count in the statement that writes their events: 'submitted' in
-- submit() (sql/src/50_jobs.sql; a statement trigger cost each submit
-- about 87 us, this row trigger 39 us, the inline count a few) and
-- 'placed' in the round (src/round.c) and in _place_ready_nominated
-- (67_preemption.sql; this trigger cost a round about 40 us per job placed).
CREATE FUNCTION gangsched._count_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    wait float8;
BEGIN
    -- a restore (pg_dump writes COPY gangsched.events ... FROM stdin): the
    -- dumped counters hold these already. Only the owner may COPY into the
    -- table; a tenant's COPY (SELECT gangsched.submit(...)) TO STDOUT starts
    -- with "COPY (" and is counted like any other statement.
    IF pg_catalog.current_query() ~* '^\s*copy\s+(gangsched\.)?"?events"?[\s(]' THEN
        RETURN NULL;
    END IF;
    IF NEW.kind = 'placed' THEN
        SELECT date_part('epoch', NEW.at - g.queued_at) INTO wait FROM gangsched.gangs g WHERE g.id = NEW.job;
    END IF;
    INSERT INTO gangsched.metric_deltas (name, team_id, label, value)
    SELECT c.name, COALESCE(NEW.team_id, 0), c.label, c.value
      FROM gangsched._event_counts(NEW.kind, NEW.reason, NEW.detail, wait) c;
    RETURN NULL;
END $$;

CREATE TRIGGER events_counted
    AFTER INSERT ON gangsched.events
    FOR EACH ROW WHEN (NEW.kind IN ('finished', 'failed', 'cancelled', 'expired', 'preempting', 'requeued'))
    EXECUTE FUNCTION gangsched._count_event();

-- Each round (src/round.c) folds the deltas into the counters.
CREATE FUNCTION gangsched._metrics_fold() RETURNS void
LANGUAGE sql AS $$
    WITH d AS (DELETE FROM gangsched.metric_deltas RETURNING name, team_id, label, value)
    INSERT INTO gangsched.metric_counters AS c (name, team_id, label, value)
    SELECT d.name, d.team_id, d.label, sum(d.value) FROM d GROUP BY 1, 2, 3
        ON CONFLICT (name, team_id, label) DO UPDATE SET value = c.value + excluded.value
$$;

-- Rounds since the server started, as the rounds record them in shared
-- memory (src/metrics.c): NULLs without shared_preload_libraries.
CREATE FUNCTION gangsched.round_stats(OUT rounds bigint, OUT seconds float8, OUT last_end timestamptz,
                                       OUT last_seconds float8)
RETURNS record LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_round_stats_sql';

-- Every metric, one row per series, in Prometheus terms: name, type
-- (gauge, counter, histogram), help text, labels (a JSON object of text
-- values) and value. Analysts and operators read it (98_privileges.sql);
-- the exporter's queries (contrib/prometheus/queries.yaml) select one
-- family at a time by name, and a condition on the name skips the other
-- branches. docs/monitoring.md describes each metric.
CREATE VIEW gangsched.metrics AS
WITH clock AS (SELECT gangsched.now() AS now),
node_pool AS (
    SELECT p.id AS pool_id, p.name AS pool, n.state, count(n.id) AS nodes, COALESCE(sum(n.gpus), 0) AS gpus,
           max(date_part('epoch', c.now - n.heartbeat_at)) FILTER (WHERE n.state <> 'down') AS heartbeat_age
      FROM gangsched.pools p CROSS JOIN clock c
      LEFT JOIN gangsched.nodes n ON n.pool_id = p.id
     GROUP BY p.id, p.name, n.state),
-- float8 sums (gangs.f_gpus, allocations.gpus as float8): numeric sums
-- over every live job cost several times more
held AS (
    SELECT x.team_id, n.pool_id, sum(x.gpus) AS gpus, sum(x.borrowed) AS borrowed
      FROM (SELECT a.team_id, a.node_id, sum(a.gpus::float8) AS gpus,
                   sum(a.gpus::float8) FILTER (WHERE a.borrowed) AS borrowed
              FROM gangsched.allocations a WHERE upper_inf(a.during)
             GROUP BY a.team_id, a.node_id) x
      JOIN gangsched.nodes n ON n.id = x.node_id
     GROUP BY x.team_id, n.pool_id),
live AS (
    SELECT g.team_id, g.state, count(*) AS jobs, sum(g.workers * g.f_gpus) AS gpus, min(g.queued_at) AS oldest
      FROM gangsched.gangs g
     WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
     GROUP BY g.team_id, g.state),
counted AS (
    SELECT s.name, s.team_id, s.label, sum(s.value) AS value
      FROM (SELECT name, team_id, label, value FROM gangsched.metric_counters
            UNION ALL
            SELECT name, team_id, label, value FROM gangsched.metric_deltas) s
     GROUP BY 1, 2, 3),
team AS (SELECT 0 AS id, '' AS name UNION ALL SELECT t.id, t.name FROM gangsched.teams t),
rounds AS (SELECT r.*, w.pid, w.wakeups, w.rounds AS worker_rounds
             FROM gangsched.round_stats() r, gangsched.worker_status() w)
-- pools
SELECT 'gangsched_pool_gpus'::text AS name, 'gauge'::text AS type,
       'GPUs on the registered nodes of the pool, whatever their state.'::text AS help,
       jsonb_build_object('pool', np.pool) AS labels, sum(np.gpus)::float8 AS value
  FROM node_pool np GROUP BY np.pool
UNION ALL
SELECT 'gangsched_pool_gpus_unavailable', 'gauge',
       'GPUs on nodes of the pool that are draining or down.',
       jsonb_build_object('pool', np.pool), COALESCE(sum(np.gpus) FILTER (WHERE np.state <> 'up'), 0)::float8
  FROM node_pool np GROUP BY np.pool
UNION ALL
SELECT 'gangsched_pool_gpus_allocated', 'gauge',
       'GPUs held now by the workers of placed, running and preempting jobs.',
       jsonb_build_object('pool', p.name), COALESCE((SELECT sum(h.gpus) FROM held h WHERE h.pool_id = p.id), 0)::float8
  FROM gangsched.pools p
UNION ALL
SELECT 'gangsched_pool_gpus_borrowed', 'gauge',
       'GPUs held now as borrowed capacity (beyond the teams'' nominal quotas).',
       jsonb_build_object('pool', p.name), COALESCE((SELECT sum(h.borrowed) FROM held h WHERE h.pool_id = p.id), 0)::float8
  FROM gangsched.pools p
UNION ALL
SELECT 'gangsched_pool_gpus_held', 'gauge',
       'GPUs kept for nominated jobs while their preemption victims drain.',
       jsonb_build_object('pool', p.name),
       COALESCE((SELECT sum(g.gpus) FROM gangsched.holds x JOIN gangsched.gangs g ON g.id = x.job
                   JOIN gangsched.nodes n ON n.id = x.node_id WHERE n.pool_id = p.id), 0)::float8
  FROM gangsched.pools p
UNION ALL
SELECT 'gangsched_pool_heartbeat_age_max_seconds', 'gauge',
       'Seconds since the least recent agent heartbeat among the pool''s nodes that are not down (absent when none has sent one).',
       jsonb_build_object('pool', np.pool), max(np.heartbeat_age)::float8
  FROM node_pool np GROUP BY np.pool HAVING max(np.heartbeat_age) IS NOT NULL
UNION ALL
SELECT 'gangsched_nodes', 'gauge', 'Nodes of the pool by state (up, draining, down).',
       jsonb_build_object('pool', np.pool, 'state', s.state),
       COALESCE((SELECT x.nodes FROM node_pool x WHERE x.pool_id = np.pool_id AND x.state = s.state), 0)::float8
  FROM (SELECT DISTINCT pool_id, pool FROM node_pool) np CROSS JOIN (VALUES ('up'), ('draining'), ('down')) s(state)
-- jobs and teams
UNION ALL
SELECT 'gangsched_jobs_live', 'gauge', 'Jobs by team and live state (pending, nominated, placed, running, preempting).',
       jsonb_build_object('team', t.name, 'state', s.state),
       COALESCE((SELECT l.jobs FROM live l WHERE l.team_id = t.id AND l.state = s.state), 0)::float8
  FROM gangsched.teams t
 CROSS JOIN (VALUES ('pending'), ('nominated'), ('placed'), ('running'), ('preempting')) s(state)
UNION ALL
SELECT 'gangsched_jobs_ended_total', 'counter', 'Jobs that ended, by team and final state (finished, failed, cancelled, expired).',
       jsonb_build_object('team', t.name, 'state', s.state),
       COALESCE((SELECT c.value FROM counted c WHERE c.name = 'jobs_ended' AND c.team_id = t.id AND c.label = s.state), 0)
  FROM gangsched.teams t
 CROSS JOIN (VALUES ('finished'), ('failed'), ('cancelled'), ('expired')) s(state)
UNION ALL
SELECT 'gangsched_team_pending_jobs', 'gauge', 'Jobs of the team waiting in the queue (state pending).',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT l.jobs FROM live l WHERE l.team_id = t.id AND l.state = 'pending'), 0)::float8
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_team_pending_gpus', 'gauge', 'GPUs the team''s pending jobs ask for (workers times GPUs per worker).',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT l.gpus FROM live l WHERE l.team_id = t.id AND l.state = 'pending'), 0)::float8
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_team_oldest_pending_age_seconds', 'gauge',
       'Seconds the team''s longest-waiting pending job has been in the queue since it last entered it (0 when none waits).',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT date_part('epoch', c.now - l.oldest) FROM live l WHERE l.team_id = t.id AND l.state = 'pending'), 0)::float8
  FROM gangsched.teams t CROSS JOIN clock c
UNION ALL
SELECT 'gangsched_team_gpus_allocated', 'gauge', 'GPUs the team''s jobs hold now, in every pool.',
       jsonb_build_object('team', t.name), COALESCE((SELECT sum(h.gpus) FROM held h WHERE h.team_id = t.id), 0)::float8
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_team_gpus_borrowed', 'gauge', 'GPUs the team''s jobs hold now as borrowed capacity.',
       jsonb_build_object('team', t.name), COALESCE((SELECT sum(h.borrowed) FROM held h WHERE h.team_id = t.id), 0)::float8
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_team_' || m.name || '_total', 'counter', m.help, jsonb_build_object('team', t.name),
       COALESCE((SELECT c.value FROM counted c WHERE c.name = m.name AND c.team_id = t.id AND c.label = ''), 0)
  FROM gangsched.teams t
 CROSS JOIN (VALUES
    ('jobs_submitted', 'Jobs the team submitted (admitted).'),
    ('jobs_placed', 'Placements of the team''s jobs (a requeued job placed again counts again).'),
    ('preemptions', 'Times the team''s jobs were told to stop for a preemptor.'),
    ('kills', 'Preempted jobs of the team killed at their grace deadline.'),
    ('requeues', 'Times the team''s jobs went back to the queue (preempted, killed, not started in time, node down).'),
    ('lost_gpu_seconds', 'GPU-seconds of work the team''s requeued jobs lost since their last checkpoint.')) m(name, help)
-- queue wait: a histogram of the waits of placements (since the job last
-- entered the queue); histogram_quantile() over rate() gives a window's p95
UNION ALL
SELECT 'gangsched_queue_wait_seconds_bucket', 'histogram',
       'Placements of the team''s jobs that had waited at most `le` seconds in the queue.',
       jsonb_build_object('team', t.name, 'le', b.le),
       (SELECT COALESCE(sum(c.value), 0) FROM counted c
         WHERE c.name = 'queue_wait_bucket' AND c.team_id = t.id
           AND (b.le = '+Inf' OR (c.label <> '+Inf' AND c.label::float8 <= b.le::float8)))
  FROM gangsched.teams t
 CROSS JOIN (SELECT x::text FROM unnest(gangsched.queue_wait_buckets()) x UNION ALL SELECT '+Inf') b(le)
UNION ALL
SELECT 'gangsched_queue_wait_seconds_sum', 'histogram', 'Summed queue waits of the team''s placements, seconds.',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT c.value FROM counted c WHERE c.name = 'queue_wait_seconds' AND c.team_id = t.id AND c.label = ''), 0)
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_queue_wait_seconds_count', 'histogram', 'Placements of the team''s jobs.',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT c.value FROM counted c WHERE c.name = 'jobs_placed' AND c.team_id = t.id AND c.label = ''), 0)
  FROM gangsched.teams t
-- rounds and the worker
UNION ALL
SELECT 'gangsched_round_duration_seconds_count', 'counter', 'Rounds that ran since the server started (worker, pg_cron or by hand).',
       '{}'::jsonb, r.rounds::float8 FROM rounds r WHERE r.rounds IS NOT NULL
UNION ALL
SELECT 'gangsched_round_duration_seconds_sum', 'counter', 'Summed duration of those rounds, seconds.',
       '{}'::jsonb, r.seconds FROM rounds r WHERE r.seconds IS NOT NULL
UNION ALL
SELECT 'gangsched_round_last_duration_seconds', 'gauge', 'Duration of the last round, seconds.',
       '{}'::jsonb, r.last_seconds FROM rounds r WHERE r.last_end IS NOT NULL
UNION ALL
SELECT 'gangsched_round_last_age_seconds', 'gauge', 'Seconds since the last round ended (on the scheduler''s clock).',
       '{}'::jsonb, date_part('epoch', c.now - r.last_end) FROM rounds r CROSS JOIN clock c WHERE r.last_end IS NOT NULL
UNION ALL
SELECT 'gangsched_worker_up', 'gauge', '1 when the background worker runs, 0 when not.',
       '{}'::jsonb, (r.pid IS NOT NULL)::int::float8 FROM rounds r
UNION ALL
SELECT 'gangsched_worker_rounds_total', 'counter', 'Rounds the background worker ran since the server started.',
       '{}'::jsonb, r.worker_rounds::float8 FROM rounds r WHERE r.worker_rounds IS NOT NULL
UNION ALL
SELECT 'gangsched_worker_wakeups_total', 'counter', 'Commits that asked the worker for a round since the server started.',
       '{}'::jsonb, r.wakeups::float8 FROM rounds r WHERE r.wakeups IS NOT NULL;

-- check_invariants() is too costly for every scrape (tens of milliseconds
-- on a large cluster): the exporter asks for this separately, at a low
-- frequency (contrib/prometheus/queries.yaml caches it). Analysts may call
-- it; the rows themselves stay with operators.
-- One row per invariant of docs/invariants.md (1-7 and any other that
-- reports a row; zero when it holds) and row 0, the total.
CREATE FUNCTION gangsched.invariant_violations(OUT invariant int, OUT violations bigint)
RETURNS SETOF record
LANGUAGE sql STABLE AS $$
    WITH c AS MATERIALIZED (SELECT x.invariant FROM gangsched.check_invariants() x)
    SELECT 0, (SELECT count(*) FROM c)
    UNION ALL
    SELECT i.n, (SELECT count(*) FROM c WHERE c.invariant = i.n)
      FROM (SELECT generate_series(1, 7) UNION SELECT c.invariant FROM c) i(n)
$$;

-- The counters start at zero with the update: the events a 0.1 scheduler
-- wrote before it are not counted (docs/monitoring.md#counters).

/* ------------------------------------------------------------------ */
/* submit() counts its own 'submitted' event for gangsched.metrics     */
/* (after the metrics section: it writes gangsched.metric_deltas)      */
/* ------------------------------------------------------------------ */
CREATE OR REPLACE FUNCTION gangsched.submit(team text, workers int, gpus numeric, cpus numeric DEFAULT 0,
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

/* ------------------------------------------------------------------ */
/* Issue 12: preemption over a whole round (branch preempt)            */
/* ------------------------------------------------------------------ */
-- A nominated job may wait for what an earlier preemptor of the same round
-- left of its victims: it is ready once no slot it holds is allocated any
-- more (67_preemption.sql), such a victim's release places it too, and
-- invariant 5 accepts under held capacity the victims it waits for as its
-- 'nominated' event records them (70_invariants.sql). The new setting
-- gangsched.fair_preemption is granted to operators by 98_privileges.sql,
-- appended below.

CREATE OR REPLACE FUNCTION gangsched._place_ready_nominated(only_job bigint DEFAULT NULL) RETURNS int
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
       AND NOT EXISTS (SELECT FROM gangsched.holds h
                         CROSS JOIN LATERAL unnest(h.devices) d(device)
                         CROSS JOIN LATERAL generate_series(h.first_slice, h.first_slice + h.slices - 1) s(slice)
                         JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = d.device * 8 + s.slice
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

CREATE OR REPLACE FUNCTION gangsched.job_released(job bigint, checkpointed bool DEFAULT true) RETURNS void
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
     CROSS JOIN LATERAL unnest(h.devices) d(device)
     CROSS JOIN LATERAL generate_series(h.first_slice, h.first_slice + h.slices - 1) s(slice)
      JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = d.device * 8 + s.slice
     WHERE hs.job = j.id AND h.job IS DISTINCT FROM j.preempted_for;
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
    FOREACH s IN ARRAY COALESCE(sharers, '{}') LOOP
        PERFORM gangsched._place_ready_nominated(s);
    END LOOP;
    PERFORM gangsched._wake();
END $$;

-- check_invariants(): replaced once, in its merged form, in the last section below


/* ================================================================== */
/* Issue 11, bounded history: retention (sql/src/71_retention.sql,    */
/* 10_schema.sql's _append_only, 70_invariants.sql's guard list)      */
/* ================================================================== */

-- The unit of retention is a finished job: gangsched.archive_history(before)
-- moves every job that ended (finished, failed, cancelled, expired) before
-- the cutoff, with all its allocations and all its events, into the
-- *_archive tables (or deletes them, discard => true), and the events with
-- no job older than the cutoff, except the quota and node-state changes
-- still in force at the cutoff. A job moves only as a whole, and only when
-- none of its allocations is open or ended at or after the cutoff and none
-- of its events is that recent: so what stays is exactly the jobs that are
-- live or ended at or after the cutoff, with all their rows, and every
-- invariant and every analyst function over a window that begins at or
-- after the cutoff sees what it saw before (docs/analytics.md#retention).

-- The archive door (src/retention.c): _archive_begin(cutoff) opens it for
-- the rest of the calling (sub)transaction or until _archive_end();
-- _archive_cutoff() is the open run's cutoff, NULL when closed. Internal:
-- only the extension's owner may call them.
CREATE FUNCTION gangsched._archive_begin(cutoff timestamptz) RETURNS void
LANGUAGE C VOLATILE STRICT AS 'MODULE_PATHNAME', 'gs_archive_begin';
CREATE FUNCTION gangsched._archive_end() RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_archive_end';
CREATE FUNCTION gangsched._archive_cutoff() RETURNS timestamptz
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_archive_cutoff';

-- The row guards: while the door is open (the statement guards of
-- 10_schema.sql let the DELETE through) each deleted row must be closed
-- history older than the cutoff; with the door closed every row is
-- refused. The rule is each trigger's WHEN clause, so a row that may go
-- costs no function call. No hot path deletes from these tables: a round,
-- submit or release never evaluates them.
CREATE FUNCTION gangsched._archive_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_LEVEL = 'STATEMENT' THEN
        RAISE EXCEPTION '% on gangsched.% is refused', TG_OP, TG_TABLE_NAME
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Jobs leave gangsched.gangs only with their history, through gangsched.archive_history().',
                  HINT = 'Move old history with gangsched.archive_history(before).';
    END IF;
    RAISE EXCEPTION 'row % of gangsched.% may not be removed', OLD.id, TG_TABLE_NAME
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = CASE WHEN gangsched._archive_cutoff() IS NULL
                            THEN format('Rows of gangsched.%I are removed only by gangsched.archive_history().', TG_TABLE_NAME)
                            ELSE format('Only closed history older than the cutoff %s may be removed.', gangsched._archive_cutoff()) END,
              HINT = 'Move old history with gangsched.archive_history(before); open allocations, live jobs and rows at or after the cutoff stay.';
END $$;

CREATE TRIGGER allocations_archive_guard
    BEFORE DELETE ON gangsched.allocations FOR EACH ROW
    WHEN (NOT COALESCE(upper(OLD.during) < gangsched._archive_cutoff(), false))
    EXECUTE FUNCTION gangsched._archive_guard();
CREATE TRIGGER events_archive_guard
    BEFORE DELETE ON gangsched.events FOR EACH ROW
    WHEN (NOT COALESCE(OLD.at < gangsched._archive_cutoff(), false))
    EXECUTE FUNCTION gangsched._archive_guard();
CREATE TRIGGER gangs_archive_guard
    BEFORE DELETE ON gangsched.gangs FOR EACH ROW
    WHEN (NOT COALESCE(OLD.state IN ('finished', 'failed', 'cancelled', 'expired')
                       AND OLD.finished_at < gangsched._archive_cutoff(), false))
    EXECUTE FUNCTION gangsched._archive_guard();
CREATE TRIGGER gangs_truncate_guard
    BEFORE TRUNCATE ON gangsched.gangs FOR EACH STATEMENT
    EXECUTE FUNCTION gangsched._archive_guard();

-- The archive: the same columns as the live tables (the generated f_*
-- columns of gangs as plain ones; no identity, no defaults, no triggers).
-- Not append-only: gangsched.purge_archive() trims it once exported.
-- Registered for pg_dump (97_dump.sql). A column added to gangs,
-- allocations or events must be added to its archive too, in the same
-- position (archive_history() refuses to run until it is).
CREATE TABLE gangsched.gangs_archive (LIKE gangsched.gangs);
ALTER TABLE gangsched.gangs_archive ADD PRIMARY KEY (id);
CREATE INDEX gangs_archive_finished_idx ON gangsched.gangs_archive (finished_at);
CREATE TABLE gangsched.allocations_archive (LIKE gangsched.allocations);
CREATE INDEX allocations_archive_job_idx ON gangsched.allocations_archive (job);
CREATE TABLE gangsched.events_archive (LIKE gangsched.events);
CREATE INDEX events_archive_at_idx ON gangsched.events_archive USING brin (at);
CREATE INDEX events_archive_job_idx ON gangsched.events_archive (job) WHERE job IS NOT NULL;

-- The archive runs' own events (history_horizon() reads the latest).
CREATE INDEX events_archived_idx ON gangsched.events (at) WHERE kind = 'history_archived';

-- NULL when each live table and its archive have the same columns in the
-- same order; otherwise which differ.
CREATE FUNCTION gangsched._archive_columns_differ() RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT string_agg(format('gangsched.%s and gangsched.%s_archive', t.name, t.name), ', ')
      FROM (VALUES ('gangs'), ('allocations'), ('events')) t(name)
     WHERE (SELECT array_agg(a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
              FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = ('gangsched.' || t.name)::regclass AND a.attnum > 0 AND NOT a.attisdropped)
           IS DISTINCT FROM
           (SELECT array_agg(a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
              FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = ('gangsched.' || t.name || '_archive')::regclass AND a.attnum > 0 AND NOT a.attisdropped)
$$;

-- Checks a cutoff given to archive_history() or purge_archive().
CREATE FUNCTION gangsched._check_cutoff(before timestamptz, what text, future_ok bool) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF before IS NULL THEN
        RAISE EXCEPTION 'the cutoff of % must not be null', what
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Give a time in the past, such as gangsched.now() - interval ''90 days''.';
    END IF;
    IF NOT isfinite(before) THEN
        RAISE EXCEPTION 'the cutoff of % must be a finite timestamp, not %', what, before
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give a time in the past, such as gangsched.now() - interval ''90 days''.';
    END IF;
    IF NOT future_ok AND before > gangsched.now() THEN
        RAISE EXCEPTION 'the cutoff of % is in the future: % is after the scheduler''s clock, %', what, before, gangsched.now()
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Only history that ended before the cutoff is moved, and nothing has ended after now.',
                  HINT = 'Give a time in the past, such as gangsched.now() - interval ''90 days''.';
    END IF;
END $$;

-- Operators: move (or, with discard, delete) the finished jobs that ended
-- before `before`, with their allocations and events, and the job-less
-- events older than `before` that no longer describe the present. Returns
-- what it moved; records an event 'history_archived' with the cutoff, the
-- counts and (events.actor) who ran it. One run at a time; rounds, submits
-- and releases go on meanwhile (it locks only the finished jobs it moves).
-- jit is off: the slot expansion's estimates look costly enough to compile
-- (0.7 s a statement, measured on a run that moved six jobs).
CREATE FUNCTION gangsched.archive_history(before timestamptz, discard bool DEFAULT false)
RETURNS TABLE (jobs bigint, allocations bigint, events bigint)
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    ids     bigint[];
    n_jobs  bigint;
    n_alloc bigint;
    n_ev    bigint;
    differ  text;
    bad     record;
BEGIN
    PERFORM gangsched._require_operator('archive history');
    PERFORM gangsched._check_cutoff(before, 'archive_history', false);
    IF discard IS NULL THEN
        RAISE EXCEPTION 'discard must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass discard => false to keep the rows in the archive tables, true to delete them.';
    END IF;
    differ := gangsched._archive_columns_differ();
    IF differ IS NOT NULL THEN
        RAISE EXCEPTION 'the archive tables do not match the live tables: %', differ
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Rows are moved column by column; an archive table needs its live table''s columns in the same order.',
                  HINT = 'Add the missing columns to the archive table (ALTER TABLE … ADD COLUMN, as the extension''s owner).';
    END IF;
    -- one run at a time (a self-conflicting lock only the owner may take)
    LOCK TABLE gangsched.gangs_archive IN SHARE ROW EXCLUSIVE MODE;

    -- the jobs that go: ended before the cutoff, every allocation closed
    -- before it, every event older, no live job pointing at it
    SELECT COALESCE(array_agg(s.id ORDER BY s.id), '{}') INTO ids
      FROM (SELECT g.id FROM gangsched.gangs g
             WHERE g.state IN ('finished', 'failed', 'cancelled', 'expired') AND g.finished_at < before
               AND NOT EXISTS (SELECT FROM gangsched.allocations a
                                WHERE a.job = g.id AND NOT COALESCE(upper(a.during) < before, false))
               AND NOT EXISTS (SELECT FROM gangsched.events e WHERE e.job = g.id AND e.at >= before)
               -- a live victim still names its preemptor (invariant 5); NOT IN
               -- over the few live jobs, hashed once (an anti-join may probe
               -- the live jobs once per finished job)
               AND g.id NOT IN (SELECT v.preempted_for FROM gangsched.gangs v
                                 WHERE v.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
                                   AND v.preempted_for IS NOT NULL)
               FOR UPDATE OF g) s;

    -- rows an invariant still needs stay: if an allocation that would go
    -- overlaps another on a slot (invariant 1; compared with everything
    -- that began before the cutoff) or lies outside its job's interval
    -- (invariant 4), nothing moves
    SELECT o.* INTO bad FROM (
        SELECT h.job, h.prev_job, h.node_id, h.slot, h.lo, h.prev_hi, NULL::text AS what
          FROM (SELECT x.job, x.node_id, x.slot, lower(x.during) AS lo,
                       lag(x.job) OVER w AS prev_job, lag(upper(x.during)) OVER w AS prev_hi
                  FROM (SELECT a.job, a.node_id, d.device * 8 + s.slice AS slot, a.during
                          FROM gangsched.allocations a, unnest(a.devices) d(device),
                               generate_series(a.first_slice, a.first_slice + a.slices - 1) s(slice)
                         WHERE lower(a.during) < before) x
                WINDOW w AS (PARTITION BY x.node_id, x.slot ORDER BY lower(x.during), upper(x.during))) h
         WHERE h.prev_hi > h.lo AND (h.job IN (SELECT unnest(ids)) OR h.prev_job IN (SELECT unnest(ids)))
        UNION ALL
        SELECT a.job, NULL, a.node_id, NULL, lower(a.during), upper(a.during), 'outside'
          FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
         WHERE a.job IN (SELECT unnest(ids)) AND (lower(a.during) < g.submitted_at OR upper(a.during) > g.finished_at)
         LIMIT 1) o;
    IF FOUND THEN
        RAISE EXCEPTION 'history before % is not archived: allocations of job % break an invariant', before, bad.job
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN bad.what IS NULL
                                THEN format('Jobs %s and %s held slot %s of node #%s at overlapping times (until %s, from %s).',
                                            bad.prev_job, bad.job, bad.slot, bad.node_id, bad.prev_hi, bad.lo)
                                ELSE format('An allocation [%s, %s) lies outside the job''s submitted-to-finished interval.', bad.lo, bad.prev_hi) END,
                  HINT = 'See SELECT * FROM gangsched.check_invariants(); history an invariant still needs is not moved.';
    END IF;

    PERFORM gangsched._archive_begin(before);
    n_jobs := cardinality(ids);
    IF discard THEN
        DELETE FROM gangsched.allocations a WHERE a.job IN (SELECT unnest(ids));
        GET DIAGNOSTICS n_alloc = ROW_COUNT;
    ELSE
        WITH d AS (DELETE FROM gangsched.allocations a WHERE a.job IN (SELECT unnest(ids)) RETURNING a.*)
        INSERT INTO gangsched.allocations_archive SELECT * FROM d;
        GET DIAGNOSTICS n_alloc = ROW_COUNT;
    END IF;

    -- events: the jobs' own, then those older than the cutoff that belong
    -- to no job left, except the last quota change of each team and pool
    -- and the last state change of each node before the cutoff (still in
    -- force: usage() and utilization() read them)
    IF discard THEN
        DELETE FROM gangsched.events e WHERE e.job IN (SELECT unnest(ids));
    ELSE
        WITH d AS (DELETE FROM gangsched.events e WHERE e.job IN (SELECT unnest(ids)) RETURNING e.*)
        INSERT INTO gangsched.events_archive SELECT * FROM d;
    END IF;
    GET DIAGNOSTICS n_ev = ROW_COUNT;
    WITH d AS (
        DELETE FROM gangsched.events e
         WHERE e.at < before
           AND (e.job IS NULL OR NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id = e.job))
           AND e.id NOT IN (SELECT DISTINCT ON (q.team_id, q.detail->>'pool') q.id FROM gangsched.events q
                             WHERE q.kind = 'quota' AND q.at < before
                             ORDER BY q.team_id, q.detail->>'pool', q.at DESC, q.id DESC)
           AND e.id NOT IN (SELECT DISTINCT ON (q.node_id) q.id FROM gangsched.events q
                             WHERE q.kind = 'node_state' AND q.at < before
                             ORDER BY q.node_id, q.at DESC, q.id DESC)
        RETURNING e.*),
    kept AS (INSERT INTO gangsched.events_archive SELECT * FROM d WHERE NOT discard RETURNING 1)
    SELECT n_ev + count(*) INTO n_ev FROM d;

    IF discard THEN
        DELETE FROM gangsched.gangs g WHERE g.id IN (SELECT unnest(ids));
    ELSE
        WITH d AS (DELETE FROM gangsched.gangs g WHERE g.id IN (SELECT unnest(ids)) RETURNING g.*)
        INSERT INTO gangsched.gangs_archive SELECT * FROM d;
    END IF;
    PERFORM gangsched._archive_end();

    PERFORM gangsched._event('history_archived', NULL, NULL, NULL,
                             format('history before %s %s', before, CASE WHEN discard THEN 'discarded' ELSE 'archived' END),
                             pg_catalog.jsonb_build_object('before', before, 'jobs', n_jobs, 'allocations', n_alloc,
                                                           'events', n_ev, 'discarded', discard));
    RETURN QUERY SELECT n_jobs, n_alloc, n_ev;
END $$;

-- Operators: delete from the archive the jobs that ended before `before`
-- (with their allocations and events) and the job-less events older than
-- it, once they are exported. Records an event 'archive_purged'.
CREATE FUNCTION gangsched.purge_archive(before timestamptz)
RETURNS TABLE (jobs bigint, allocations bigint, events bigint)
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    ids     bigint[];
    n_alloc bigint;
    n_ev    bigint;
BEGIN
    PERFORM gangsched._require_operator('purge archived history');
    PERFORM gangsched._check_cutoff(before, 'purge_archive', true);
    LOCK TABLE gangsched.gangs_archive IN SHARE ROW EXCLUSIVE MODE;
    WITH d AS (DELETE FROM gangsched.gangs_archive g WHERE g.finished_at < before RETURNING g.id)
    SELECT COALESCE(array_agg(d.id), '{}') INTO ids FROM d;
    DELETE FROM gangsched.allocations_archive a WHERE a.job IN (SELECT unnest(ids));
    GET DIAGNOSTICS n_alloc = ROW_COUNT;
    DELETE FROM gangsched.events_archive e
     WHERE e.job IN (SELECT unnest(ids))
        OR (e.at < before AND (e.job IS NULL OR NOT EXISTS (SELECT FROM gangsched.gangs_archive g WHERE g.id = e.job)));
    GET DIAGNOSTICS n_ev = ROW_COUNT;
    PERFORM gangsched._event('archive_purged', NULL, NULL, NULL, format('archived history before %s purged', before),
                             pg_catalog.jsonb_build_object('before', before, 'jobs', cardinality(ids),
                                                           'allocations', n_alloc, 'events', n_ev));
    RETURN QUERY SELECT cardinality(ids)::bigint, n_alloc, n_ev;
END $$;

-- Analysts and operators: the cutoff of the latest archive run, NULL when
-- the history was never archived. The history tables and every analyst
-- function are complete for windows that begin at or after it.
CREATE FUNCTION gangsched.history_horizon() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT max((e.detail->>'before')::timestamptz) FROM gangsched.events e WHERE e.kind = 'history_archived'
$$;

-- 10_schema.sql: the statement guards let a DELETE through while an
-- archive run is open.
CREATE OR REPLACE FUNCTION gangsched._append_only() RETURNS trigger
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

-- 70_invariants.sql: invariant 4 also reports the archive guards missing
-- or disabled.
-- check_invariants(): replaced once, in its merged form, in the last section below


/* ---------------- end of issue 11, bounded history ---------------- */

/* ------------------------------------------------------------------ */
/* Functions that more than one section above replaces, as the merged  */
/* sql/src has them (the last definition is the one that stays)        */
/* ------------------------------------------------------------------ */
CREATE OR REPLACE FUNCTION gangsched.check_invariants()
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
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job
--    (victims still draining excepted: its own, or those of an earlier
--    preemptor of the same round whose rest it waits for, as its
--    'nominated' event records them in waits_for)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL unnest(h.devices) d(device)
 CROSS JOIN LATERAL generate_series(h.first_slice, h.first_slice + h.slices - 1) s(slice)
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = d.device * 8 + s.slice
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting'
            AND (v.preempted_for = h.job
                 OR EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(v.id))))
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2
                                      WHERE h2.node_id = c.node_id
                                        AND (h2.job = v.preempted_for
                                             OR EXISTS (SELECT FROM gangsched.events e
                                                         WHERE e.job = h2.job AND e.kind = 'nominated'
                                                           AND e.detail->'waits_for' @> to_jsonb(v.id)))))
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


/* ================================================================== */
/* Issue 13, least attained service within teams: teams.team_order,   */
/* set_team_order() (sql/src/63_team_order.sql) and the queue's LAS   */
/* columns (66_fairness.sql: _queue, _queue_visible and the view get  */
/* las_queue and attained_gpu_seconds, so they are dropped and made   */
/* again; 98_privileges.sql grants them again)                        */
/* ================================================================== */

-- A team's own order of its pending jobs; NULL follows the setting
-- gangsched.team_order. las: priority, then the LAS queue its attained
-- service (GPU-seconds held so far) falls in, then submit order; a pending
-- job may preempt its team's jobs of the same priority in later queues
-- (docs/fairness.md). The order across teams is not affected.
ALTER TABLE gangsched.teams
    ADD COLUMN team_order text CHECK (team_order IN ('fifo', 'las'));

-- Operator: set a team's order; NULL returns it to gangsched.team_order.
CREATE FUNCTION gangsched.set_team_order(team text, team_order text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    IF team_order IS NOT NULL AND team_order NOT IN ('fifo', 'las') THEN
        RAISE EXCEPTION 'invalid team order "%"', team_order
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A team orders its jobs by priority, then submit order (fifo), or by priority, then least attained service, then submit order (las).',
                  HINT = 'Use ''fifo'', ''las'', or NULL for the setting gangsched.team_order.';
    END IF;
    UPDATE gangsched.teams t SET team_order = set_team_order.team_order WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team order set',
                             jsonb_build_object('team', team, 'team_order', team_order));
END $$;

DROP VIEW gangsched.queue;
DROP FUNCTION gangsched._queue_visible();
DROP FUNCTION gangsched._queue();

-- The pending queue as the next round would try it (a dry run of the round:
-- nothing is written). Internal; read the `queue` view.
CREATE FUNCTION gangsched._queue(OUT "position" int, OUT job bigint, OUT dominant_share float8,
                                 OUT would_borrow bool, OUT fits_now bool, OUT reason text,
                                 OUT las_queue int, OUT attained_gpu_seconds float8)
RETURNS SETOF record LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_queue';

-- Pending jobs in the order the next round would try them, with the
-- weighted dominant share of the job's team when it is tried and whether it
-- would run on borrowed capacity (beyond its team's nominal quota); for the
-- jobs of a team whose order is las, its LAS queue and the GPU-seconds it
-- has held so far (NULL for other teams' jobs).
-- The rows of _queue() the caller may see (see the jobs view).
CREATE FUNCTION gangsched._queue_visible(OUT "position" int, OUT job bigint, OUT dominant_share float8,
                                         OUT would_borrow bool, OUT fits_now bool, OUT reason text,
                                         OUT las_queue int, OUT attained_gpu_seconds float8)
RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v record := gangsched._visibility();
BEGIN
    RETURN QUERY
    SELECT q.position, q.job, q.dominant_share, q.would_borrow, q.fits_now, q.reason,
           q.las_queue, q.attained_gpu_seconds
      FROM gangsched._queue() q
     WHERE v.all_rows OR (SELECT g.team_id FROM gangsched.gangs g WHERE g.id = q.job) = ANY (v.teams);
END $$;

CREATE VIEW gangsched.queue AS
SELECT q.position, q.job, t.name AS team, j.name, j.priority, j.workers, j.gpus, j.preemptible,
       round(q.dominant_share::numeric, 4) AS dominant_share, q.would_borrow, q.fits_now, q.reason,
       j.submitted_at, q.las_queue, q.attained_gpu_seconds
  FROM gangsched._queue_visible() q
  JOIN gangsched.gangs j ON j.id = q.job
  JOIN gangsched.teams t ON t.id = j.team_id
 ORDER BY q.position;

/* ---------- end of issue 13, least attained service ---------- */

/* ------------------------------------------------------------------ */
/* The metrics' cost (branch mperf): the round counts its placements  */
/* in C and no longer folds the deltas (the worker folds them after   */
/* each round, src/round.c and src/worker.c: no SQL); gangsched.      */
/* metrics sums the current allocations per (team, pool) once and     */
/* ages the heartbeats per group (sql/src/75_metrics.sql)             */
/* ------------------------------------------------------------------ */

CREATE OR REPLACE VIEW gangsched.metrics AS
WITH clock AS (SELECT gangsched.now() AS now),
-- the oldest heartbeat's age is the largest age (one date_part per group,
-- not per node)
node_pool AS (
    SELECT p.id AS pool_id, p.name AS pool, n.state, count(n.id) AS nodes, COALESCE(sum(n.gpus), 0) AS gpus,
           date_part('epoch', c.now - min(n.heartbeat_at) FILTER (WHERE n.state <> 'down')) AS heartbeat_age
      FROM gangsched.pools p CROSS JOIN clock c
      LEFT JOIN gangsched.nodes n ON n.pool_id = p.id
     GROUP BY p.id, p.name, n.state, c.now),
-- the current allocations joined to their nodes' pools and summed once
-- per (team, pool): numeric sums, cast once per group (a cast of every
-- allocation's numeric gpus to float8 costs more than the numeric sum)
held AS (
    SELECT a.team_id, n.pool_id, sum(a.gpus)::float8 AS gpus,
           (sum(a.gpus) FILTER (WHERE a.borrowed))::float8 AS borrowed
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)
     GROUP BY a.team_id, n.pool_id),
live AS (
    SELECT g.team_id, g.state, count(*) AS jobs, sum(g.workers * g.f_gpus) AS gpus, min(g.queued_at) AS oldest
      FROM gangsched.gangs g
     WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
     GROUP BY g.team_id, g.state),
counted AS (
    SELECT s.name, s.team_id, s.label, sum(s.value) AS value
      FROM (SELECT name, team_id, label, value FROM gangsched.metric_counters
            UNION ALL
            SELECT name, team_id, label, value FROM gangsched.metric_deltas) s
     GROUP BY 1, 2, 3),
team AS (SELECT 0 AS id, '' AS name UNION ALL SELECT t.id, t.name FROM gangsched.teams t),
rounds AS (SELECT r.*, w.pid, w.wakeups, w.rounds AS worker_rounds
             FROM gangsched.round_stats() r, gangsched.worker_status() w)
-- pools
SELECT 'gangsched_pool_gpus'::text AS name, 'gauge'::text AS type,
       'GPUs on the registered nodes of the pool, whatever their state.'::text AS help,
       jsonb_build_object('pool', np.pool) AS labels, sum(np.gpus)::float8 AS value
  FROM node_pool np GROUP BY np.pool
UNION ALL
SELECT 'gangsched_pool_gpus_unavailable', 'gauge',
       'GPUs on nodes of the pool that are draining or down.',
       jsonb_build_object('pool', np.pool), COALESCE(sum(np.gpus) FILTER (WHERE np.state <> 'up'), 0)::float8
  FROM node_pool np GROUP BY np.pool
UNION ALL
SELECT 'gangsched_pool_gpus_allocated', 'gauge',
       'GPUs held now by the workers of placed, running and preempting jobs.',
       jsonb_build_object('pool', p.name), COALESCE((SELECT sum(h.gpus) FROM held h WHERE h.pool_id = p.id), 0)::float8
  FROM gangsched.pools p
UNION ALL
SELECT 'gangsched_pool_gpus_borrowed', 'gauge',
       'GPUs held now as borrowed capacity (beyond the teams'' nominal quotas).',
       jsonb_build_object('pool', p.name), COALESCE((SELECT sum(h.borrowed) FROM held h WHERE h.pool_id = p.id), 0)::float8
  FROM gangsched.pools p
UNION ALL
SELECT 'gangsched_pool_gpus_held', 'gauge',
       'GPUs kept for nominated jobs while their preemption victims drain.',
       jsonb_build_object('pool', p.name),
       COALESCE((SELECT sum(g.gpus) FROM gangsched.holds x JOIN gangsched.gangs g ON g.id = x.job
                   JOIN gangsched.nodes n ON n.id = x.node_id WHERE n.pool_id = p.id), 0)::float8
  FROM gangsched.pools p
UNION ALL
SELECT 'gangsched_pool_heartbeat_age_max_seconds', 'gauge',
       'Seconds since the least recent agent heartbeat among the pool''s nodes that are not down (absent when none has sent one).',
       jsonb_build_object('pool', np.pool), max(np.heartbeat_age)::float8
  FROM node_pool np GROUP BY np.pool HAVING max(np.heartbeat_age) IS NOT NULL
UNION ALL
SELECT 'gangsched_nodes', 'gauge', 'Nodes of the pool by state (up, draining, down).',
       jsonb_build_object('pool', np.pool, 'state', s.state),
       COALESCE((SELECT x.nodes FROM node_pool x WHERE x.pool_id = np.pool_id AND x.state = s.state), 0)::float8
  FROM (SELECT DISTINCT pool_id, pool FROM node_pool) np CROSS JOIN (VALUES ('up'), ('draining'), ('down')) s(state)
-- jobs and teams
UNION ALL
SELECT 'gangsched_jobs_live', 'gauge', 'Jobs by team and live state (pending, nominated, placed, running, preempting).',
       jsonb_build_object('team', t.name, 'state', s.state),
       COALESCE((SELECT l.jobs FROM live l WHERE l.team_id = t.id AND l.state = s.state), 0)::float8
  FROM gangsched.teams t
 CROSS JOIN (VALUES ('pending'), ('nominated'), ('placed'), ('running'), ('preempting')) s(state)
UNION ALL
SELECT 'gangsched_jobs_ended_total', 'counter', 'Jobs that ended, by team and final state (finished, failed, cancelled, expired).',
       jsonb_build_object('team', t.name, 'state', s.state),
       COALESCE((SELECT c.value FROM counted c WHERE c.name = 'jobs_ended' AND c.team_id = t.id AND c.label = s.state), 0)
  FROM gangsched.teams t
 CROSS JOIN (VALUES ('finished'), ('failed'), ('cancelled'), ('expired')) s(state)
UNION ALL
SELECT 'gangsched_team_pending_jobs', 'gauge', 'Jobs of the team waiting in the queue (state pending).',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT l.jobs FROM live l WHERE l.team_id = t.id AND l.state = 'pending'), 0)::float8
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_team_pending_gpus', 'gauge', 'GPUs the team''s pending jobs ask for (workers times GPUs per worker).',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT l.gpus FROM live l WHERE l.team_id = t.id AND l.state = 'pending'), 0)::float8
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_team_oldest_pending_age_seconds', 'gauge',
       'Seconds the team''s longest-waiting pending job has been in the queue since it last entered it (0 when none waits).',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT date_part('epoch', c.now - l.oldest) FROM live l WHERE l.team_id = t.id AND l.state = 'pending'), 0)::float8
  FROM gangsched.teams t CROSS JOIN clock c
UNION ALL
SELECT 'gangsched_team_gpus_allocated', 'gauge', 'GPUs the team''s jobs hold now, in every pool.',
       jsonb_build_object('team', t.name), COALESCE((SELECT sum(h.gpus) FROM held h WHERE h.team_id = t.id), 0)::float8
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_team_gpus_borrowed', 'gauge', 'GPUs the team''s jobs hold now as borrowed capacity.',
       jsonb_build_object('team', t.name), COALESCE((SELECT sum(h.borrowed) FROM held h WHERE h.team_id = t.id), 0)::float8
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_team_' || m.name || '_total', 'counter', m.help, jsonb_build_object('team', t.name),
       COALESCE((SELECT c.value FROM counted c WHERE c.name = m.name AND c.team_id = t.id AND c.label = ''), 0)
  FROM gangsched.teams t
 CROSS JOIN (VALUES
    ('jobs_submitted', 'Jobs the team submitted (admitted).'),
    ('jobs_placed', 'Placements of the team''s jobs (a requeued job placed again counts again).'),
    ('preemptions', 'Times the team''s jobs were told to stop for a preemptor.'),
    ('kills', 'Preempted jobs of the team killed at their grace deadline.'),
    ('requeues', 'Times the team''s jobs went back to the queue (preempted, killed, not started in time, node down).'),
    ('lost_gpu_seconds', 'GPU-seconds of work the team''s requeued jobs lost since their last checkpoint.')) m(name, help)
-- queue wait: a histogram of the waits of placements (since the job last
-- entered the queue); histogram_quantile() over rate() gives a window's p95
UNION ALL
SELECT 'gangsched_queue_wait_seconds_bucket', 'histogram',
       'Placements of the team''s jobs that had waited at most `le` seconds in the queue.',
       jsonb_build_object('team', t.name, 'le', b.le),
       (SELECT COALESCE(sum(c.value), 0) FROM counted c
         WHERE c.name = 'queue_wait_bucket' AND c.team_id = t.id
           AND (b.le = '+Inf' OR (c.label <> '+Inf' AND c.label::float8 <= b.le::float8)))
  FROM gangsched.teams t
 CROSS JOIN (SELECT x::text FROM unnest(gangsched.queue_wait_buckets()) x UNION ALL SELECT '+Inf') b(le)
UNION ALL
SELECT 'gangsched_queue_wait_seconds_sum', 'histogram', 'Summed queue waits of the team''s placements, seconds.',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT c.value FROM counted c WHERE c.name = 'queue_wait_seconds' AND c.team_id = t.id AND c.label = ''), 0)
  FROM gangsched.teams t
UNION ALL
SELECT 'gangsched_queue_wait_seconds_count', 'histogram', 'Placements of the team''s jobs.',
       jsonb_build_object('team', t.name),
       COALESCE((SELECT c.value FROM counted c WHERE c.name = 'jobs_placed' AND c.team_id = t.id AND c.label = ''), 0)
  FROM gangsched.teams t
-- rounds and the worker
UNION ALL
SELECT 'gangsched_round_duration_seconds_count', 'counter', 'Rounds that ran since the server started (worker, pg_cron or by hand).',
       '{}'::jsonb, r.rounds::float8 FROM rounds r WHERE r.rounds IS NOT NULL
UNION ALL
SELECT 'gangsched_round_duration_seconds_sum', 'counter', 'Summed duration of those rounds, seconds.',
       '{}'::jsonb, r.seconds FROM rounds r WHERE r.seconds IS NOT NULL
UNION ALL
SELECT 'gangsched_round_last_duration_seconds', 'gauge', 'Duration of the last round, seconds.',
       '{}'::jsonb, r.last_seconds FROM rounds r WHERE r.last_end IS NOT NULL
UNION ALL
SELECT 'gangsched_round_last_age_seconds', 'gauge', 'Seconds since the last round ended (on the scheduler''s clock).',
       '{}'::jsonb, date_part('epoch', c.now - r.last_end) FROM rounds r CROSS JOIN clock c WHERE r.last_end IS NOT NULL
UNION ALL
SELECT 'gangsched_worker_up', 'gauge', '1 when the background worker runs, 0 when not.',
       '{}'::jsonb, (r.pid IS NOT NULL)::int::float8 FROM rounds r
UNION ALL
SELECT 'gangsched_worker_rounds_total', 'counter', 'Rounds the background worker ran since the server started.',
       '{}'::jsonb, r.worker_rounds::float8 FROM rounds r WHERE r.worker_rounds IS NOT NULL
UNION ALL
SELECT 'gangsched_worker_wakeups_total', 'counter', 'Commits that asked the worker for a round since the server started.',
       '{}'::jsonb, r.wakeups::float8 FROM rounds r WHERE r.wakeups IS NOT NULL;

-- ---------------------------------------------------------------------
-- team_shares' dominant share counts what rounds count (issue 14): gangs
-- told to stop leave it, capacity held for nominated jobs joins it
-- ---------------------------------------------------------------------
CREATE OR REPLACE VIEW gangsched._team_shares_rows AS
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
-- what the share counts, as the round does (src/loader.c): current
-- allocations except those of gangs told to stop (leaving), and the
-- capacity held for nominated jobs (arriving)
team_held AS (
    SELECT x.team_id, sum(x.gpus) AS gpus, sum(x.cpus) AS cpus, sum(x.mem) AS mem, sum(x.net) AS net
      FROM (SELECT a.team_id, a.gpus, a.cpus, a.mem_gb AS mem, a.net_gbps AS net
              FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
             WHERE upper_inf(a.during) AND g.state <> 'preempting'
            UNION ALL
            SELECT g.team_id, g.gpus, h.cpus, h.mem_gb, h.net_gbps
              FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job) x
     GROUP BY x.team_id),
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

/* ================================================================== */
/* Issue 18, the metrics' read cost (branch metrics): the view is     */
/* computed in C, one pass over each table it reads                   */
/* (gangsched.metric_series, src/metrics.c; sql/src/75_metrics.sql)   */
/* ================================================================== */

-- Every metric, one row per series, in Prometheus terms: name, type
-- (gauge, counter, histogram), help text, labels (a JSON object of text
-- values) and value, computed in C (src/metrics.c): one pass over each
-- table it reads (teams, pools, nodes, the live jobs, the open
-- allocations, the counters and their deltas, the holds), in the
-- statement's snapshot. docs/monitoring.md describes each metric;
-- test/sql/70_metrics holds the values' definition in SQL (the view as it
-- was written before) and checks the two agree.
-- GPU amounts are summed exactly (as numeric) and converted to float8 once.
-- `at` is the scheduler's clock, the worker_* arguments are
-- gangsched.worker_status()'s columns. SECURITY DEFINER: analysts and
-- operators may call it (98_privileges.sql), and it reads the tables as
-- their owner.
CREATE FUNCTION gangsched.metric_series(at timestamptz, worker_pid int, worker_wakeups bigint, worker_rounds bigint,
                                        OUT name text, OUT type text, OUT help text, OUT labels jsonb,
                                        OUT value float8)
RETURNS SETOF record LANGUAGE C VOLATILE SECURITY DEFINER ROWS 400
SET search_path = pg_catalog, gangsched, pg_temp
AS 'MODULE_PATHNAME', 'gs_metric_series';

-- The metrics view: analysts and operators read it (98_privileges.sql);
-- the exporter's queries (contrib/prometheus/queries.yaml) select families
-- by name. Reading it whole costs a few milliseconds on a large cluster
-- (docs/monitoring.md#cost), each family query as much.
CREATE OR REPLACE VIEW gangsched.metrics AS
SELECT m.name, m.type, m.help, m.labels, m.value
  FROM gangsched.worker_status() w,
       gangsched.metric_series(gangsched.now(), w.pid, w.wakeups, w.rounds) m;

/* ================================================================== */
/* Issue 14, rules written once: the slot encoding (_slots), the      */
/* clock (gangsched.now() is the rounds' C clock), the "borrowed"     */
/* rule (_beyond_nominal), one requeue (_requeue goes), btree_gist no */
/* longer required (the control file; ALTER EXTENSION UPDATE records  */
/* the new requirements and leaves btree_gist installed). Functions   */
/* replaced by earlier sections are re-synced here.                   */
/* ================================================================== */

-- The scheduler's clock: the time of the call, pg_catalog.clock_timestamp(),
-- unless gangsched.clock_override is set (tests and trace replays run in
-- virtual time). Not the transaction's start (pg_catalog.now()): under READ
-- COMMITTED each statement reads rows committed after BEGIN, and a decision
-- stamped with BEGIN's time would be recorded before the submission, the
-- release or the placement it acted on (the clock rule, docs/concepts.md).
-- Callers take it once per decision, after the statement that read what
-- the decision acts on. STABLE, so that a statement may use it in index
-- conditions; successive calls may return later times. The rounds' clock
-- is the same C function, gs_now() in src/guc.c: one implementation.
CREATE OR REPLACE FUNCTION gangsched.now() RETURNS timestamptz
LANGUAGE C STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'gs_now_sql';

-- The device slices of an allocation or a hold, one row each: the device
-- and its slot, slot = device * 8 + slice, the numbering of
-- gangsched.held_slots. The one home of that encoding in SQL; the C side's
-- is GS_SLOTS_PER_DEVICE (src/model.h). A set-returning SQL function that
-- is neither STRICT nor VOLATILE nor SECURITY DEFINER, with no SET clause
-- (internal: 99_search_path.sql gives it none): the planner inlines it into
-- the calling query, so `FROM t, gangsched._slots(t.devices, t.first_slice,
-- t.slices) s` plans as the unnest and generate_series it stands for.
CREATE FUNCTION gangsched._slots(devices int[], first_slice int, slices int)
RETURNS TABLE (device int, slot int)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT d.d, d.d * 8 + s.s
      FROM pg_catalog.unnest(devices) d(d), pg_catalog.generate_series(first_slice, first_slice + slices - 1) s(s)
$$;

-- The "borrowed" rule: work of a team in a pool is borrowed (beyond its
-- nominal quota) unless the team has a quota there and, for every resource
-- the quota governs, what the team uses there plus the work's demand stays
-- within the nominal amount. demand and used are [GPUs, CPUs, GB of memory,
-- Gbit/s]. The rounds apply the same rule in C (within_nominal() and
-- gs_beyond_nominal() in src/fair.c, over the quotas of this view, with the
-- team's allocations and held capacity as its use);
-- test/sql/53_borrowed_agree.sql proves that the two agree.
CREATE FUNCTION gangsched._beyond_nominal(team_id int, pool_id int, demand numeric[], used numeric[]) RETURNS bool
LANGUAGE sql STABLE AS $$
    SELECT NOT COALESCE((
        SELECT q.gpus >= used[1] + demand[1]
               AND (q.cpus IS NULL OR q.cpus >= used[2] + demand[2])
               AND (q.mem_gb IS NULL OR q.mem_gb >= used[3] + demand[3])
               AND (q.net_gbps IS NULL OR q.net_gbps >= used[4] + demand[4])
          FROM gangsched._effective_quotas q
         WHERE q.team_id = _beyond_nominal.team_id AND q.pool_id = _beyond_nominal.pool_id), false)
$$;

-- Put live jobs back in the queue at their old positions, set-based: end
-- their allocations (history kept), drop capacity held for them, count the
-- work lost since their last checkpoint. Returns how many were requeued.
-- The one requeue: rounds (start timeouts, src/round.c), kills at the grace
-- deadline, releases and a node going down all call it; each 'requeued'
-- event says the state the job left and the work it lost.
CREATE OR REPLACE FUNCTION gangsched._requeue_many(jobs bigint[], why text, agent_event text DEFAULT 'kill',
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

CREATE OR REPLACE FUNCTION gangsched.set_node_state(name text, state text) RETURNS void
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

-- set_node_state requeues through _requeue_many; nothing else called it
DROP FUNCTION gangsched._requeue(bigint, text, text);

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
CREATE OR REPLACE FUNCTION gangsched._place_ready_nominated(only_job bigint DEFAULT NULL) RETURNS int
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
    PERFORM pg_notify('gangsched_node_' || x.node_id, json_build_object('event', 'start', 'job', x.job)::text)
       FROM (SELECT DISTINCT h.job, h.node_id FROM gangsched.holds h WHERE h.job = ANY (ready) ORDER BY 1, 2) x;
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

-- An agent reports that a preempted job let its capacity go (its workers
-- exited). With checkpointed = true the job wrote a checkpoint as it
-- stopped, so nothing is lost. The job goes back to pending at its old queue
-- position; if it was the last victim its preemptor is placed at once.
CREATE OR REPLACE FUNCTION gangsched.job_released(job bigint, checkpointed bool DEFAULT true) RETURNS void
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

-- One row per violation; none when healthy. Numbers as in docs/invariants.md.
-- jit is off: the unnest/generate_series estimates make the plan look costly
-- enough to JIT-compile (seconds) although the rows are few.
CREATE OR REPLACE FUNCTION gangsched.check_invariants()
RETURNS TABLE (invariant int, job bigint, node text, detail text)
LANGUAGE sql STABLE SET jit = off AS $$
WITH cur AS (
    SELECT a.*, n.name AS node_name, n.topology
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)),
cur_slots AS (
    SELECT c.job, c.worker, c.node_id, s.device, s.slot
      FROM cur c, gangsched._slots(c.devices, c.first_slice, c.slices) s),
hist_slots AS (
    SELECT a.id, a.job, a.node_id, s.slot, a.during
      FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s),
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
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job
--    (victims still draining excepted: its own, or those of an earlier
--    preemptor of the same round whose rest it waits for, as its
--    'nominated' event records them in waits_for)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting'
            AND (v.preempted_for = h.job
                 OR EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(v.id))))
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2
                                      WHERE h2.node_id = c.node_id
                                        AND (h2.job = v.preempted_for
                                             OR EXISTS (SELECT FROM gangsched.events e
                                                         WHERE e.job = h2.job AND e.kind = 'nominated'
                                                           AND e.detail->'waits_for' @> to_jsonb(v.id)))))
              GROUP BY c.node_id) o ON o.node_id = h.node_id
 WHERE h.cpus + COALESCE(o.cpus, 0) > n.cpus OR h.mem + COALESCE(o.mem, 0) > n.mem_gb OR h.net + COALESCE(o.net, 0) > n.net_gbps
UNION ALL
SELECT 5, h.job, NULL, format('job holds capacity but is %s', j.state)
  FROM (SELECT DISTINCT job FROM gangsched.holds) h JOIN gangsched.gangs j ON j.id = h.job
 WHERE j.state <> 'nominated'
UNION ALL
SELECT 5, h.job, n.name, format('two nominated jobs hold slot %s', s.slot)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id,
       gangsched._slots(h.devices, h.first_slice, h.slices) s
 WHERE EXISTS (SELECT FROM gangsched.holds h2, gangsched._slots(h2.devices, h2.first_slice, h2.slices) s2
                WHERE h2.node_id = h.node_id AND h2.job < h.job AND s2.slot = s.slot)
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

-- Operators: move (or, with discard, delete) the finished jobs that ended
-- before `before`, with their allocations and events, and the job-less
-- events older than `before` that no longer describe the present. Returns
-- what it moved; records an event 'history_archived' with the cutoff, the
-- counts and (events.actor) who ran it. One run at a time; rounds, submits
-- and releases go on meanwhile (it locks only the finished jobs it moves).
-- jit is off: the slot expansion's estimates look costly enough to compile
-- (0.7 s a statement, measured on a run that moved six jobs).
CREATE OR REPLACE FUNCTION gangsched.archive_history(before timestamptz, discard bool DEFAULT false)
RETURNS TABLE (jobs bigint, allocations bigint, events bigint)
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    ids     bigint[];
    n_jobs  bigint;
    n_alloc bigint;
    n_ev    bigint;
    differ  text;
    bad     record;
BEGIN
    PERFORM gangsched._require_operator('archive history');
    PERFORM gangsched._check_cutoff(before, 'archive_history', false);
    IF discard IS NULL THEN
        RAISE EXCEPTION 'discard must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass discard => false to keep the rows in the archive tables, true to delete them.';
    END IF;
    differ := gangsched._archive_columns_differ();
    IF differ IS NOT NULL THEN
        RAISE EXCEPTION 'the archive tables do not match the live tables: %', differ
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Rows are moved column by column; an archive table needs its live table''s columns in the same order.',
                  HINT = 'Add the missing columns to the archive table (ALTER TABLE … ADD COLUMN, as the extension''s owner).';
    END IF;
    -- one run at a time (a self-conflicting lock only the owner may take)
    LOCK TABLE gangsched.gangs_archive IN SHARE ROW EXCLUSIVE MODE;

    -- the jobs that go: ended before the cutoff, every allocation closed
    -- before it, every event older, no live job pointing at it
    SELECT COALESCE(array_agg(s.id ORDER BY s.id), '{}') INTO ids
      FROM (SELECT g.id FROM gangsched.gangs g
             WHERE g.state IN ('finished', 'failed', 'cancelled', 'expired') AND g.finished_at < before
               AND NOT EXISTS (SELECT FROM gangsched.allocations a
                                WHERE a.job = g.id AND NOT COALESCE(upper(a.during) < before, false))
               AND NOT EXISTS (SELECT FROM gangsched.events e WHERE e.job = g.id AND e.at >= before)
               -- a live victim still names its preemptor (invariant 5); NOT IN
               -- over the few live jobs, hashed once (an anti-join may probe
               -- the live jobs once per finished job)
               AND g.id NOT IN (SELECT v.preempted_for FROM gangsched.gangs v
                                 WHERE v.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
                                   AND v.preempted_for IS NOT NULL)
               FOR UPDATE OF g) s;

    -- rows an invariant still needs stay: if an allocation that would go
    -- overlaps another on a slot (invariant 1; compared with everything
    -- that began before the cutoff) or lies outside its job's interval
    -- (invariant 4), nothing moves
    SELECT o.* INTO bad FROM (
        SELECT h.job, h.prev_job, h.node_id, h.slot, h.lo, h.prev_hi, NULL::text AS what
          FROM (SELECT x.job, x.node_id, x.slot, lower(x.during) AS lo,
                       lag(x.job) OVER w AS prev_job, lag(upper(x.during)) OVER w AS prev_hi
                  FROM (SELECT a.job, a.node_id, s.slot, a.during
                          FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s
                         WHERE lower(a.during) < before) x
                WINDOW w AS (PARTITION BY x.node_id, x.slot ORDER BY lower(x.during), upper(x.during))) h
         WHERE h.prev_hi > h.lo AND (h.job IN (SELECT unnest(ids)) OR h.prev_job IN (SELECT unnest(ids)))
        UNION ALL
        SELECT a.job, NULL, a.node_id, NULL, lower(a.during), upper(a.during), 'outside'
          FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
         WHERE a.job IN (SELECT unnest(ids)) AND (lower(a.during) < g.submitted_at OR upper(a.during) > g.finished_at)
         LIMIT 1) o;
    IF FOUND THEN
        RAISE EXCEPTION 'history before % is not archived: allocations of job % break an invariant', before, bad.job
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN bad.what IS NULL
                                THEN format('Jobs %s and %s held slot %s of node #%s at overlapping times (until %s, from %s).',
                                            bad.prev_job, bad.job, bad.slot, bad.node_id, bad.prev_hi, bad.lo)
                                ELSE format('An allocation [%s, %s) lies outside the job''s submitted-to-finished interval.', bad.lo, bad.prev_hi) END,
                  HINT = 'See SELECT * FROM gangsched.check_invariants(); history an invariant still needs is not moved.';
    END IF;

    PERFORM gangsched._archive_begin(before);
    n_jobs := cardinality(ids);
    IF discard THEN
        DELETE FROM gangsched.allocations a WHERE a.job IN (SELECT unnest(ids));
        GET DIAGNOSTICS n_alloc = ROW_COUNT;
    ELSE
        WITH d AS (DELETE FROM gangsched.allocations a WHERE a.job IN (SELECT unnest(ids)) RETURNING a.*)
        INSERT INTO gangsched.allocations_archive SELECT * FROM d;
        GET DIAGNOSTICS n_alloc = ROW_COUNT;
    END IF;

    -- events: the jobs' own, then those older than the cutoff that belong
    -- to no job left, except the last quota change of each team and pool
    -- and the last state change of each node before the cutoff (still in
    -- force: usage() and utilization() read them)
    IF discard THEN
        DELETE FROM gangsched.events e WHERE e.job IN (SELECT unnest(ids));
    ELSE
        WITH d AS (DELETE FROM gangsched.events e WHERE e.job IN (SELECT unnest(ids)) RETURNING e.*)
        INSERT INTO gangsched.events_archive SELECT * FROM d;
    END IF;
    GET DIAGNOSTICS n_ev = ROW_COUNT;
    WITH d AS (
        DELETE FROM gangsched.events e
         WHERE e.at < before
           AND (e.job IS NULL OR NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id = e.job))
           AND e.id NOT IN (SELECT DISTINCT ON (q.team_id, q.detail->>'pool') q.id FROM gangsched.events q
                             WHERE q.kind = 'quota' AND q.at < before
                             ORDER BY q.team_id, q.detail->>'pool', q.at DESC, q.id DESC)
           AND e.id NOT IN (SELECT DISTINCT ON (q.node_id) q.id FROM gangsched.events q
                             WHERE q.kind = 'node_state' AND q.at < before
                             ORDER BY q.node_id, q.at DESC, q.id DESC)
        RETURNING e.*),
    kept AS (INSERT INTO gangsched.events_archive SELECT * FROM d WHERE NOT discard RETURNING 1)
    SELECT n_ev + count(*) INTO n_ev FROM d;

    IF discard THEN
        DELETE FROM gangsched.gangs g WHERE g.id IN (SELECT unnest(ids));
    ELSE
        WITH d AS (DELETE FROM gangsched.gangs g WHERE g.id IN (SELECT unnest(ids)) RETURNING g.*)
        INSERT INTO gangsched.gangs_archive SELECT * FROM d;
    END IF;
    PERFORM gangsched._archive_end();

    PERFORM gangsched._event('history_archived', NULL, NULL, NULL,
                             format('history before %s %s', before, CASE WHEN discard THEN 'discarded' ELSE 'archived' END),
                             pg_catalog.jsonb_build_object('before', before, 'jobs', n_jobs, 'allocations', n_alloc,
                                                           'events', n_ev, 'discarded', discard));
    RETURN QUERY SELECT n_jobs, n_alloc, n_ev;
END $$;
-- ---------------------------------------------------------------------
-- Round and agent-call speed (issue 12: the contended replay's rounds)
-- ---------------------------------------------------------------------
CREATE INDEX events_preempting_idx ON gangsched.events (job, id) WHERE kind = 'preempting';
-- Team administration (issue 15): set_team_weight, remove_team,
-- remove_quota, close_team / open_team
-- ---------------------------------------------------------------------
ALTER TABLE gangsched.teams
    ADD COLUMN closed_at     timestamptz,
    ADD COLUMN closed_reason text;

-- Teams form a tree (docs/fairness.md, "Team trees"): NULL is a top-level
-- team. Jobs go to leaf teams; a parent's children share what it gets.
ALTER TABLE gangsched.teams
    ADD COLUMN parent_id int REFERENCES gangsched.teams,
    ADD CONSTRAINT teams_parent_not_self CHECK (parent_id <> id);
CREATE INDEX teams_parent_idx ON gangsched.teams (parent_id) WHERE parent_id IS NOT NULL;

-- The weight rule of add_team() and set_team_weight().
CREATE FUNCTION gangsched._check_weight(weight numeric) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
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
END $$;

-- The next round orders teams by the new weight; nothing is preempted
-- for the change itself (a fair-share preemption may follow, by the usual
-- rule, if the new split leaves a team below its share).
CREATE FUNCTION gangsched.set_team_weight(team text, weight numeric) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
    old numeric;
BEGIN
    PERFORM gangsched._check_weight(weight);
    SELECT t.weight INTO old FROM gangsched.teams t WHERE t.id = tid FOR UPDATE;
    UPDATE gangsched.teams t SET weight = set_team_weight.weight WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team weight set',
                             jsonb_build_object('team', team, 'weight', weight, 'was', old));
    PERFORM gangsched._wake();
END $$;

-- Remove a team that has no jobs at all: live ones must end first, and
-- finished ones stay (the history refers to the team) until
-- archive_history() has moved them. Its quotas and portal bindings go
-- with it; its events stay.
CREATE FUNCTION gangsched.remove_team(team text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid  int := gangsched._team_id(team);
    live bigint;
    hist bigint;
BEGIN
    PERFORM FROM gangsched.teams t WHERE t.id = tid FOR UPDATE;
    SELECT count(*) FILTER (WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')),
           count(*)
      INTO live, hist
      FROM gangsched.gangs g WHERE g.team_id = tid;
    IF live > 0 THEN
        RAISE EXCEPTION 'team "%" has % live jobs', team, live
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'A team is removed only when none of its jobs is pending, nominated, placed, running or preempting.',
                  HINT = format('Close it with gangsched.close_team(%L) so it takes no new work, cancel or wait for its jobs, then remove it.', team);
    END IF;
    IF hist > 0 THEN
        RAISE EXCEPTION 'team "%" still has % ended jobs in the history', team, hist
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'The allocation history and the analysts'' views name the team of every job they keep.',
                  HINT = 'Move them to the archive first with gangsched.archive_history(before); a closed team takes no new work meanwhile.';
    END IF;
    DELETE FROM gangsched.quotas q WHERE q.team_id = tid;
    DELETE FROM gangsched.team_pending c WHERE c.team_id = tid;
    DELETE FROM gangsched.teams t WHERE t.id = tid;     -- members go by ON DELETE CASCADE
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team removed', jsonb_build_object('team', team));
END $$;

-- Remove a team's quota in a pool. Its jobs running there keep running;
-- from the next round they count as borrowed (beyond a nominal quota of 0)
-- and may be reclaimed like any borrowed work.
CREATE FUNCTION gangsched.remove_quota(team text, pool text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
    pid int := gangsched._pool_id(pool);
BEGIN
    DELETE FROM gangsched.quotas q WHERE q.team_id = tid AND q.pool_id = pid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'team "%" has no quota in pool "%"', team, pool
            USING ERRCODE = 'no_data_found',
                  HINT = 'See gangsched.team_shares for the quotas that exist.';
    END IF;
    PERFORM gangsched._event('quota', NULL, NULL, tid, 'quota removed', jsonb_build_object('team', team, 'pool', pool));
    PERFORM gangsched._wake();
END $$;

-- Close a team to new work; reason (optional) is shown to its portal.
CREATE FUNCTION gangsched.close_team(team text, reason text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    PERFORM gangsched._check_text(reason, 'reason', 1024);
    UPDATE gangsched.teams t SET closed_at = COALESCE(t.closed_at, gangsched.now()), closed_reason = close_team.reason
     WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team closed',
                             jsonb_build_object('team', team, 'reason', reason));
END $$;

CREATE FUNCTION gangsched.open_team(team text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    UPDATE gangsched.teams t SET closed_at = NULL, closed_reason = NULL WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team opened', jsonb_build_object('team', team));
    PERFORM gangsched._wake();
END $$;
CREATE OR REPLACE FUNCTION gangsched.add_team(name text, weight numeric DEFAULT 1) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    id int;
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'team name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the team, for example ''vision''.';
    END IF;
    PERFORM gangsched._check_name(name, 'team name');
    PERFORM gangsched._check_weight(weight);
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
CREATE OR REPLACE FUNCTION gangsched._check_team_limits(tid int, workers int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r       record;
    lim     int;
    wlim    int;
    seq     bigint;
    n       int;
BEGIN
    SELECT t.name, t.max_pending, t.max_workers_per_gang, c.pending, c.upto, c.counted_at,
           (SELECT s.last_value FROM gangsched.queue_position_seq s) AS seq, t.closed_at, t.closed_reason
      INTO r
      FROM gangsched.teams t LEFT JOIN gangsched.team_pending c ON c.team_id = t.id
     WHERE t.id = tid;
    IF r.closed_at IS NOT NULL THEN
        RAISE EXCEPTION 'team "%" is closed to new work', r.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Closed at %s%s. Its queued jobs stay queued and are not placed; its running jobs run on.',
                                  r.closed_at, COALESCE(': ' || r.closed_reason, '')),
                  HINT = format('Ask the operator to reopen it with gangsched.open_team(%L).', r.name);
    END IF;
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

/* ------------------------------------------------------------------ */
-- ==== deps: job dependencies (issue 16; sql/src/58_dependencies.sql) ====
/* ------------------------------------------------------------------ */
ALTER TABLE gangsched.gangs
    ADD COLUMN after_jobs  bigint[],
    ADD COLUMN after_mode  text CHECK (after_mode IN ('ok', 'any')),
    ADD COLUMN waiting_for bigint[];
ALTER TABLE gangsched.gangs_archive
    ADD COLUMN after_jobs  bigint[],
    ADD COLUMN after_mode  text,
    ADD COLUMN waiting_for bigint[];
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

DROP FUNCTION gangsched.submit(text, int, numeric, numeric, numeric, numeric, text, int, bool, text, int, text, int,
                               text, text, text, numeric, text, text, interval, interval, interval, text);
CREATE FUNCTION gangsched.submit(team text, workers int, gpus numeric, cpus numeric DEFAULT 0,
                                 mem_gb numeric DEFAULT 0, net_gbps numeric DEFAULT 0, name text DEFAULT NULL,
                                 priority int DEFAULT 0, preemptible bool DEFAULT true, pool text DEFAULT NULL,
                                 group_size int DEFAULT 1, group_span text DEFAULT 'node', stages int DEFAULT 1,
                                 stage_span text DEFAULT NULL, span text DEFAULT NULL, gpu_model text DEFAULT NULL,
                                 gpu_mem_gb numeric DEFAULT NULL, dataset text DEFAULT NULL, locality text DEFAULT 'none',
                                 checkpoint_interval interval DEFAULT NULL, grace interval DEFAULT NULL,
                                 queue_timeout interval DEFAULT NULL, command text DEFAULT NULL,
                                 after bigint[] DEFAULT NULL, after_mode text DEFAULT 'ok')
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

    -- last, so the listed jobs are locked for the shortest time (58_dependencies.sql)
    IF after IS NOT NULL THEN
        SELECT c.after_jobs, c.waiting_for INTO j.after_jobs, j.waiting_for
          FROM gangsched._check_after(j.team_id, after, after_mode) c;
        j.after_mode := CASE WHEN j.after_jobs IS NOT NULL THEN after_mode END;
    END IF;
    INSERT INTO gangsched.gangs (team_id, name, workers, gpus, cpus, mem_gb, net_gbps, gpu_model, gpu_mem_gb,
                                priority, preemptible, pool_id, group_size, group_span, stages, stage_span, span,
                                dataset, locality, checkpoint_interval, grace, queue_timeout, command,
                                queue_pos, submitted_at, queued_at, after_jobs, after_mode, waiting_for, reason)
    VALUES (j.team_id, name, workers, gpus, cpus, mem_gb, net_gbps, j.gpu_model, j.gpu_mem_gb,
            priority, preemptible, j.pool_id, group_size, j.group_span, stages, j.stage_span, j.span,
            dataset, locality, checkpoint_interval, grace, queue_timeout, command,
            nextval('gangsched.queue_position_seq'), gangsched.now(), gangsched.now(),
            j.after_jobs, j.after_mode, j.waiting_for,
            CASE WHEN j.waiting_for IS NOT NULL THEN gangsched._waiting_reason(j.waiting_for, j.after_mode) END)
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

CREATE OR REPLACE FUNCTION gangsched.cancel(job bigint) RETURNS void
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

-- The portal's view of jobs (the table underneath is gangsched.gangs:
-- every job is a gang). Each role sees what docs/security.md says: a
-- portal its teams' jobs, an analyst and an operator every job; the command
-- only of its own teams' jobs (an operator: every command).
CREATE OR REPLACE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds, j.reason, j.message, j.queue_pos,
       CASE WHEN v.all_commands OR j.team_id = ANY (v.teams) THEN j.command END AS command,
       j.checkpoint_interval, j.grace, j.queue_timeout,
       j.after_jobs, j.after_mode, j.waiting_for
  FROM gangsched._visibility() v
  JOIN gangsched.gangs j ON v.all_rows OR j.team_id = ANY (v.teams)
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id;

-- Pending jobs in the order the next round would try them, with the
-- weighted dominant share of the job's team when it is tried and whether it
-- would run on borrowed capacity (beyond its team's nominal quota); for the
-- jobs of a team whose order is las, its LAS queue and the GPU-seconds it
-- has held so far (NULL for other teams' jobs).
-- The rows of _queue() the caller may see (see the jobs view).
CREATE OR REPLACE FUNCTION gangsched._queue_visible(OUT "position" int, OUT job bigint, OUT dominant_share float8,
                                         OUT would_borrow bool, OUT fits_now bool, OUT reason text,
                                         OUT las_queue int, OUT attained_gpu_seconds float8)
RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v record := gangsched._visibility();
BEGIN
    RETURN QUERY
    SELECT q.position, q.job, q.dominant_share, q.would_borrow, q.fits_now, q.reason,
           q.las_queue, q.attained_gpu_seconds
      FROM gangsched._queue() q
     WHERE v.all_rows OR (SELECT g.team_id FROM gangsched.gangs g WHERE g.id = q.job) = ANY (v.teams);
    -- jobs waiting for other jobs (58_dependencies.sql) are not in the
    -- queue yet: after it, without a position
    RETURN QUERY
    SELECT NULL::int, g.id, NULL::float8, NULL::bool, false, g.reason, NULL::int, NULL::float8
      FROM gangsched.gangs g
     WHERE g.waiting_for IS NOT NULL AND g.state = 'pending'
       AND (v.all_rows OR g.team_id = ANY (v.teams))
     ORDER BY g.id;
END $$;

CREATE OR REPLACE VIEW gangsched.queue AS
SELECT q.position, q.job, t.name AS team, j.name, j.priority, j.workers, j.gpus, j.preemptible,
       round(q.dominant_share::numeric, 4) AS dominant_share, q.would_borrow, q.fits_now, q.reason,
       j.submitted_at, q.las_queue, q.attained_gpu_seconds
  FROM gangsched._queue_visible() q
  JOIN gangsched.gangs j ON j.id = q.job
  JOIN gangsched.teams t ON t.id = j.team_id
 ORDER BY q.position NULLS LAST, q.job;

-- One row per violation; none when healthy. Numbers as in docs/invariants.md.
-- jit is off: the unnest/generate_series estimates make the plan look costly
-- enough to JIT-compile (seconds) although the rows are few.
CREATE OR REPLACE FUNCTION gangsched.check_invariants()
RETURNS TABLE (invariant int, job bigint, node text, detail text)
LANGUAGE sql STABLE SET jit = off AS $$
WITH cur AS (
    SELECT a.*, n.name AS node_name, n.topology
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)),
cur_slots AS (
    SELECT c.job, c.worker, c.node_id, s.device, s.slot
      FROM cur c, gangsched._slots(c.devices, c.first_slice, c.slices) s),
hist_slots AS (
    SELECT a.id, a.job, a.node_id, s.slot, a.during
      FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s),
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
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job
--    (victims still draining excepted: its own, or those of an earlier
--    preemptor of the same round whose rest it waits for, as its
--    'nominated' event records them in waits_for)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting'
            AND (v.preempted_for = h.job
                 OR EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(v.id))))
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2
                                      WHERE h2.node_id = c.node_id
                                        AND (h2.job = v.preempted_for
                                             OR EXISTS (SELECT FROM gangsched.events e
                                                         WHERE e.job = h2.job AND e.kind = 'nominated'
                                                           AND e.detail->'waits_for' @> to_jsonb(v.id)))))
              GROUP BY c.node_id) o ON o.node_id = h.node_id
 WHERE h.cpus + COALESCE(o.cpus, 0) > n.cpus OR h.mem + COALESCE(o.mem, 0) > n.mem_gb OR h.net + COALESCE(o.net, 0) > n.net_gbps
UNION ALL
SELECT 5, h.job, NULL, format('job holds capacity but is %s', j.state)
  FROM (SELECT DISTINCT job FROM gangsched.holds) h JOIN gangsched.gangs j ON j.id = h.job
 WHERE j.state <> 'nominated'
UNION ALL
SELECT 5, h.job, n.name, format('two nominated jobs hold slot %s', s.slot)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id,
       gangsched._slots(h.devices, h.first_slice, h.slices) s
 WHERE EXISTS (SELECT FROM gangsched.holds h2, gangsched._slots(h2.devices, h2.first_slice, h2.slices) s2
                WHERE h2.node_id = h.node_id AND h2.job < h.job AND s2.slot = s.slot)
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
UNION ALL
-- 8. dependencies: only pending jobs wait, and only for jobs of their own
--    team that they listed and that have not ended (58_dependencies.sql)
SELECT 8, g.id, NULL,
       CASE WHEN g.state <> 'pending' THEN format('job is %s but still waits for jobs %s', g.state, g.waiting_for)
            WHEN NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) THEN
                 format('job waits for jobs %s but listed only %s', g.waiting_for, COALESCE(g.after_jobs, '{}'))
            ELSE format('job waits for job %s, which %s', x.id,
                        CASE WHEN x.state IS NULL THEN 'does not exist'
                             WHEN x.team_id <> g.team_id THEN 'belongs to another team'
                             ELSE 'has ended (' || x.state || ')' END) END
  FROM gangsched.gangs g
  LEFT JOIN LATERAL (SELECT w.id, d.state, d.team_id FROM unnest(g.waiting_for) w(id)
                       LEFT JOIN gangsched.gangs d ON d.id = w.id
                      WHERE d.id IS NULL OR d.team_id <> g.team_id
                         OR d.state IN ('finished', 'failed', 'cancelled', 'expired')
                      ORDER BY w.id LIMIT 1) x ON true
 WHERE g.waiting_for IS NOT NULL
   AND (g.state <> 'pending' OR NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) OR x.id IS NOT NULL)
$$;


/* ------------------------------------------------------------------ */
-- ==== resize: resizing a pending job (issue 17; sql/src/59_resize.sql) ====
/* ------------------------------------------------------------------ */
-- The gang-size limit of a team (gangsched.max_workers_per_gang or the
-- team's own): 53S08. Shared by submit (_check_team_limits) and resize.
CREATE FUNCTION gangsched._check_gang_limit(team text, team_limit int, workers int) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    wlim int := COALESCE(team_limit, pg_catalog.current_setting('gangsched.max_workers_per_gang', true)::int, 4096);
BEGIN
    IF workers > wlim THEN
        RAISE EXCEPTION 'the gang of % workers is larger than team "%" may submit', workers, team
            USING ERRCODE = '53S08',
                  DETAIL = format('Team "%s" may submit gangs of at most %s workers (%s).', team, wlim,
                                  CASE WHEN team_limit IS NOT NULL THEN 'its own limit'
                                       ELSE 'gangsched.max_workers_per_gang' END),
                  HINT = 'Ask for fewer workers, or ask the operator to raise the limit with gangsched.set_team_limits().';
    END IF;
END $$;

-- submit()'s per-team limits: 53S08 for a gang above the team's worker
-- limit, 53S07 when the team already has as many pending jobs as it may.
-- O(1) while the team is far from its pending limit (one index lookup and
-- a read of the sequence); near it, a count of the team's pending jobs on
-- gangs_team_idx, stopped at the limit.
CREATE OR REPLACE FUNCTION gangsched._check_team_limits(tid int, workers int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r       record;
    lim     int;
    seq     bigint;
    n       int;
BEGIN
    SELECT t.name, t.max_pending, t.max_workers_per_gang, c.pending, c.upto, c.counted_at,
           (SELECT s.last_value FROM gangsched.queue_position_seq s) AS seq, t.closed_at, t.closed_reason
      INTO r
      FROM gangsched.teams t LEFT JOIN gangsched.team_pending c ON c.team_id = t.id
     WHERE t.id = tid;
    IF r.closed_at IS NOT NULL THEN
        RAISE EXCEPTION 'team "%" is closed to new work', r.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Closed at %s%s. Its queued jobs stay queued and are not placed; its running jobs run on.',
                                  r.closed_at, COALESCE(': ' || r.closed_reason, '')),
                  HINT = format('Ask the operator to reopen it with gangsched.open_team(%L).', r.name);
    END IF;
    PERFORM gangsched._check_gang_limit(r.name, r.max_workers_per_gang, workers);
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

-- A pending job asks for another number of workers, or other GPUs per
-- worker: it keeps its id, queue position and submit time, the request is
-- checked as submit checks it (same SQLSTATEs; nothing changes when a check
-- fails), and a 'resized' event records both shapes. Only a pending job
-- can be resized: a round that read the old shape places or nominates the
-- job only if its shape is still the one it chose for (src/round.c), so a
-- resize racing a round never leaves a job holding the wrong number of
-- workers.
CREATE FUNCTION gangsched.resize(job bigint, workers int DEFAULT NULL, gpus numeric DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j    gangsched.gangs;
    t    record;
    nw   int;
    ng   numeric;
    ow   int;
    og   numeric;
BEGIN
    -- the role check comes before the row lock: a refused caller locks nothing
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job;
    IF j.id IS NULL THEN
        RAISE EXCEPTION 'job % does not exist', job
            USING ERRCODE = 'foreign_key_violation', HINT = 'See gangsched.jobs for the job ids.';
    END IF;
    PERFORM gangsched._require_team(j.team_id, format('resize job %s', job));
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job FOR UPDATE;
    IF j.state <> 'pending' THEN
        RAISE EXCEPTION 'job % is %, and only a pending job can be resized', job, j.state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN j.state = 'nominated' THEN 'Its victims are already releasing capacity for its present shape.'
                                WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'It has ended.'
                                ELSE 'It holds capacity for its present shape.' END,
                  HINT = CASE WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'Submit a new job with the shape you need.'
                              ELSE 'Cancel it and submit it again with the shape you need.' END;
    END IF;
    ow := j.workers;
    og := j.gpus;
    nw := COALESCE(workers, ow);
    ng := COALESCE(gpus, og);
    IF nw = ow AND ng = og THEN
        RETURN;
    END IF;
    -- the request, checked as submit checks it (sql/src/50_jobs.sql)
    IF nw < 1 THEN
        RAISE EXCEPTION 'workers must be at least 1, not %', nw
            USING ERRCODE = 'invalid_parameter_value', HINT = 'A gang has one or more workers.';
    END IF;
    PERFORM gangsched._check_amount(ng, 'gpus', false, 64);
    IF ng > 1 AND ng <> trunc(ng) THEN
        RAISE EXCEPTION 'gpus must be a whole number or a fraction of one device, not %', ng
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A worker takes whole devices, or whole slices of one device.',
                  HINT = format('Ask for %s or %s GPUs per worker.', trunc(ng), trunc(ng) + 1);
    END IF;
    IF ng = 0 AND j.cpus = 0 AND j.mem_gb = 0 AND j.net_gbps = 0 THEN
        RAISE EXCEPTION 'worker asks for no resources'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Keep some gpus: the job asks for no cpus, memory or network.';
    END IF;
    IF nw % (j.group_size::bigint * j.stages) <> 0 THEN
        RAISE EXCEPTION 'workers (%) is not divisible by group_size × stages (% × %)', nw, j.group_size, j.stages
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Data-parallel replicas are workers / (group_size × stages) and must be whole.',
                  HINT = format('Use a multiple of %s workers, for example %s.', j.group_size::bigint * j.stages,
                                greatest(1, round(nw::numeric / (j.group_size::bigint * j.stages))) * j.group_size::bigint * j.stages);
    END IF;
    SELECT tm.name, tm.max_workers_per_gang INTO t FROM gangsched.teams tm WHERE tm.id = j.team_id;
    PERFORM gangsched._check_gang_limit(t.name, t.max_workers_per_gang, nw);
    j.workers := nw;
    j.gpus := ng;
    j.gpu_model := CASE WHEN ng > 0 THEN j.gpu_model END;
    j.gpu_mem_gb := CASE WHEN ng > 0 THEN j.gpu_mem_gb END;
    IF NOT gangsched._admit_fast(j) THEN
        PERFORM gangsched._admit(j);
    END IF;
    UPDATE gangsched.gangs g
       SET workers = nw, gpus = ng, gpu_model = j.gpu_model, gpu_mem_gb = j.gpu_mem_gb,
           reason = CASE WHEN g.waiting_for IS NULL THEN NULL ELSE g.reason END
     WHERE g.id = resize.job;
    PERFORM gangsched._event('resized', job, NULL, j.team_id,
                             format('%s workers × %s GPUs, was %s × %s', nw, ng, ow, og),
                             jsonb_build_object('workers', nw, 'gpus', ng, 'was_workers', ow, 'was_gpus', og));
    PERFORM gangsched._wake();
END $$;

-- ==== mfast: metrics family filter ====
-- Issue 18, the metrics read in a few milliseconds: metric_series() takes
-- the families wanted (the exporter's queries ask for theirs), so the view
-- and the function are made again (98_privileges.sql grants them again);
-- gangs_live_idx and allocations_current_idx hold the columns the live
-- jobs and the open allocations are counted by.

-- The round reads the live jobs only; history stays out of its way. The
-- INCLUDE columns let gangsched.metrics count the live jobs from the index
-- alone (src/metrics.c): none of them changes but with the state, so they
-- make no update less HOT.
DROP INDEX gangsched.gangs_live_idx;
CREATE INDEX gangs_live_idx ON gangsched.gangs (state, priority DESC, queue_pos)
    INCLUDE (team_id, workers, gpus, queued_at)
    WHERE state IN ('pending', 'nominated', 'placed', 'running', 'preempting');
-- (INCLUDE: gangsched.metrics sums the open allocations from the index
-- alone, src/metrics.c; only closing an allocation updates it, and that
-- leaves the index's condition, so they make no update less HOT)
DROP INDEX gangsched.allocations_current_idx;
CREATE INDEX allocations_current_idx ON gangsched.allocations (node_id)
    INCLUDE (team_id, gpus, borrowed)
    WHERE upper_inf(during);

DROP VIEW gangsched.metrics;
DROP FUNCTION gangsched.metric_series(timestamptz, int, bigint, bigint);

-- Every metric, one row per series, in Prometheus terms: name, type
-- (gauge, counter, histogram), help text, labels (a JSON object of text
-- values) and value, computed in C (src/metrics.c): one pass over each
-- table it reads (teams, pools, nodes, the live jobs, the open
-- allocations, the counters and their deltas, the holds), in the
-- statement's snapshot. docs/monitoring.md describes each metric;
-- test/sql/70_metrics holds the values' definition in SQL (the view as it
-- was written before) and checks the two agree.
-- GPU amounts are summed exactly (as numeric) and converted to float8 once.
-- `at` is the scheduler's clock, the worker_* arguments are
-- gangsched.worker_status()'s columns. `families`: the families wanted by
-- name (NULL: all; an unknown name is an error, 22023); only the tables
-- they are made of are read (the exporter's queries ask for theirs,
-- contrib/prometheus/queries.yaml). SECURITY DEFINER: analysts and
-- operators may call it (98_privileges.sql), and it reads the tables as
-- their owner. jit off: the one statement it runs (the holds) is never
-- worth compiling, whatever the planner estimates on a large history.
CREATE FUNCTION gangsched.metric_series(at timestamptz, worker_pid int, worker_wakeups bigint, worker_rounds bigint,
                                        families text[] DEFAULT NULL,
                                        OUT name text, OUT type text, OUT help text, OUT labels jsonb,
                                        OUT value float8)
RETURNS SETOF record LANGUAGE C VOLATILE SECURITY DEFINER ROWS 400
SET search_path = pg_catalog, gangsched, pg_temp
SET jit = off
AS 'MODULE_PATHNAME', 'gs_metric_series';

-- The metrics view: analysts and operators read it (98_privileges.sql).
-- Reading it whole costs a few milliseconds on a large cluster
-- (docs/monitoring.md#cost); a query for some families costs less through
-- metric_series(..., families) than through the view.
CREATE VIEW gangsched.metrics AS
SELECT m.name, m.type, m.help, m.labels, m.value
  FROM gangsched.worker_status() w,
       gangsched.metric_series(gangsched.now(), w.pid, w.wakeups, w.rounds) m;
-- ==== tree: hierarchical fair share ====
-- Team trees (issue 15): admission (_admit hands trees to _admit_tree) and
-- the borrowed rule (_beyond_nominal hands teams with a parent to
-- _beyond_nominal_tree).
-- Team trees: what subtree `team` holds back of its quota in the pool from
-- teams outside it, per resource [GPUs, CPUs, GB, Gbit/s]: the larger of
-- its own nominal less lending limit and the sum of its children's
-- (admission counts an empty cluster; src/fair.c gs_tree_held_back()).
CREATE OR REPLACE FUNCTION gangsched._held_back(team int, pool int) RETURNS numeric[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    own  numeric[];
    sub  numeric[] := ARRAY[0, 0, 0, 0];
    h    numeric[];
    c    int;
    i    int;
BEGIN
    SELECT ARRAY[GREATEST(COALESCE(q.gpus - q.lend_gpus, 0), 0), GREATEST(COALESCE(q.cpus - q.lend_cpus, 0), 0),
                 GREATEST(COALESCE(q.mem_gb - q.lend_mem_gb, 0), 0), GREATEST(COALESCE(q.net_gbps - q.lend_net_gbps, 0), 0)]
      INTO own
      FROM gangsched._effective_quotas q WHERE q.team_id = team AND q.pool_id = pool;
    own := COALESCE(own, ARRAY[0, 0, 0, 0]::numeric[]);
    FOR c IN SELECT t.id FROM gangsched.teams t WHERE t.parent_id = team LOOP
        h := gangsched._held_back(c, pool);
        FOR i IN 1 .. 4 LOOP
            sub[i] := sub[i] + h[i];
        END LOOP;
    END LOOP;
    RETURN ARRAY[GREATEST(own[1], sub[1]), GREATEST(own[2], sub[2]), GREATEST(own[3], sub[3]), GREATEST(own[4], sub[4])];
END $$;

-- Team trees: more than the team and every ancestor could ever hold, in
-- some eligible pool (raises 53S05 naming the level that limits it). The
-- leaf's ceiling is the flat one, with the quota the subtrees off its path
-- hold back as what others do not lend; each ancestor with a quota row
-- caps non-preemptible work at its nominal quota less its other children's
-- nominal quota (carved out of it), and preemptible work at
-- nominal + borrowing limit when one is set. A leaf without a quota row
-- may hold non-preemptible work when some ancestor has one. The admission
-- fast path (src/admission.c, within_ceiling_tree) applies the same rule.
CREATE OR REPLACE FUNCTION gangsched._admit_tree(j gangsched.gangs, pools int[], demand numeric[]) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r        record;
    a        record;
    res      text[] := ARRAY['GPUs', 'CPUs', 'GB of memory', 'Gbit/s of network'];
    ceiling  numeric;
    locked   numeric[];
    h        numeric[];
    off      int;
    i        int;
    ok       bool := false;
    any_q    bool;
    why      text;
    who      text;
    leaf     text := (SELECT name FROM gangsched.teams WHERE id = j.team_id);
BEGIN
    FOR r IN
        SELECT p.id, p.name,
               ARRAY[sum(c.nodes * c.gpus), sum(c.nodes * c.cpus), sum(c.nodes * c.mem_gb), sum(c.nodes * c.net_gbps)] AS cap,
               q.team_id IS NOT NULL AS has_quota,
               ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps] AS nominal,
               ARRAY[q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps] AS borrow
          FROM gangsched.pools p
          JOIN gangsched.node_classes c ON c.pool_id = p.id
          LEFT JOIN gangsched._effective_quotas q ON q.pool_id = p.id AND q.team_id = j.team_id
         WHERE p.id = ANY (pools)
         GROUP BY p.id, p.name, q.team_id, q.gpus, q.cpus, q.mem_gb, q.net_gbps,
                  q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps
         ORDER BY p.id
    LOOP
        ok := true;
        -- the subtrees off the leaf's path: siblings of the leaf and of each ancestor
        locked := ARRAY[0, 0, 0, 0];
        FOR off IN
            WITH RECURSIVE path AS (
                SELECT t.id, t.parent_id, 0 AS n FROM gangsched.teams t WHERE t.id = j.team_id
                UNION ALL
                SELECT t.id, t.parent_id, path.n + 1 FROM gangsched.teams t JOIN path ON t.id = path.parent_id
                 WHERE path.n < 64)
            SELECT o.id FROM gangsched.teams o JOIN path ON o.parent_id IS NOT DISTINCT FROM path.parent_id AND o.id <> path.id
        LOOP
            h := gangsched._held_back(off, r.id);
            FOR i IN 1 .. 4 LOOP
                locked[i] := locked[i] + h[i];
            END LOOP;
        END LOOP;
        any_q := r.has_quota OR EXISTS (
            WITH RECURSIVE up AS (
                SELECT t.parent_id AS id, 0 AS n FROM gangsched.teams t WHERE t.id = j.team_id
                UNION ALL
                SELECT t.parent_id, up.n + 1 FROM gangsched.teams t JOIN up ON t.id = up.id WHERE up.n < 64)
            SELECT FROM up JOIN gangsched._effective_quotas q ON q.team_id = up.id AND q.pool_id = r.id);
        FOR i IN 1 .. 4 LOOP
            IF NOT j.preemptible THEN
                ceiling := CASE WHEN NOT any_q THEN 0
                                WHEN NOT r.has_quota THEN r.cap[i]
                                WHEN r.nominal[i] IS NULL AND i > 1 THEN r.cap[i]
                                ELSE r.nominal[i] END;
            ELSIF r.has_quota AND r.nominal[i] IS NOT NULL AND r.borrow[i] IS NOT NULL THEN
                ceiling := LEAST(r.nominal[i] + r.borrow[i], r.cap[i] - locked[i]);
            ELSE
                ceiling := GREATEST(r.cap[i] - locked[i], COALESCE(r.nominal[i], 0));
            END IF;
            IF demand[i] > ceiling THEN
                ok := false;
                IF why IS NULL THEN
                    who := format('team "%s"', leaf);
                    why := format('needs %s %s in pool %s but team may hold at most %s there (%s)',
                            trim_scale(demand[i]), res[i], r.name, trim_scale(ceiling),
                            CASE WHEN NOT j.preemptible AND NOT any_q THEN 'no quota in its team or above it: non-preemptible work runs only within nominal quota'
                                 WHEN NOT j.preemptible THEN 'nominal quota; non-preemptible work may not borrow'
                                 WHEN r.has_quota AND r.borrow[i] IS NOT NULL THEN format('nominal %s + borrowing limit %s', trim_scale(r.nominal[i]), trim_scale(r.borrow[i]))
                                 ELSE format('pool capacity %s less %s that teams outside its path may not lend', trim_scale(r.cap[i]), trim_scale(locked[i])) END);
                END IF;
            END IF;
            -- every ancestor with a quota row in the pool, from the leaf up
            FOR a IN
                WITH RECURSIVE up AS (
                    SELECT t.parent_id AS id, t.id AS child, 1 AS n FROM gangsched.teams t WHERE t.id = j.team_id
                    UNION ALL
                    SELECT t.parent_id, t.id, up.n + 1 FROM gangsched.teams t JOIN up ON t.id = up.id WHERE up.n < 64)
                SELECT up.n, t.name, (ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps])[i] AS nominal,
                       (ARRAY[q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps])[i] AS borrow,
                       (SELECT COALESCE(sum((ARRAY[k.gpus, k.cpus, k.mem_gb, k.net_gbps])[i]), 0)
                          FROM gangsched.teams o JOIN gangsched._effective_quotas k ON k.team_id = o.id AND k.pool_id = r.id
                         WHERE o.parent_id = up.id AND o.id <> up.child) AS kept
                  FROM up JOIN gangsched.teams t ON t.id = up.id
                  JOIN gangsched._effective_quotas q ON q.team_id = up.id AND q.pool_id = r.id
                 ORDER BY up.n
            LOOP
                EXIT WHEN NOT ok;
                CONTINUE WHEN a.nominal IS NULL OR (j.preemptible AND a.borrow IS NULL);
                ceiling := CASE WHEN j.preemptible THEN a.nominal + a.borrow ELSE a.nominal - a.kept END;
                IF demand[i] > ceiling THEN
                    ok := false;
                    IF why IS NULL THEN
                        who := format('team "%s" (%s of "%s")', a.name, CASE WHEN a.n = 1 THEN 'parent' ELSE 'ancestor' END, leaf);
                        why := format('needs %s %s in pool %s but team %s may hold at most %s there (%s)',
                                trim_scale(demand[i]), res[i], r.name, a.name, trim_scale(ceiling),
                                CASE WHEN j.preemptible THEN format('its nominal %s + borrowing limit %s', trim_scale(a.nominal), trim_scale(a.borrow))
                                     WHEN a.kept > 0 THEN format('its nominal %s less %s of its other teams'' nominal quota; non-preemptible work may not borrow',
                                                                 trim_scale(a.nominal), trim_scale(a.kept))
                                     ELSE 'its nominal quota; non-preemptible work may not borrow' END);
                    END IF;
                END IF;
            END LOOP;
        END LOOP;
        EXIT WHEN ok;
    END LOOP;
    IF NOT ok THEN
        RAISE EXCEPTION 'job is larger than % could ever hold', who
            USING ERRCODE = '53S05',
                  DETAIL = 'The job ' || why || '.',
                  HINT = CASE WHEN j.preemptible THEN 'Ask for fewer workers, or ask the operator to raise the quota or borrowing limit at that level.'
                              ELSE 'Ask for fewer workers, submit it as preemptible, or ask the operator to raise the nominal quota at that level.' END;
    END IF;
END $$;

-- Raises the first reason a job could never run; returns nothing otherwise.
-- Reasons over node classes and per-domain class counts, not nodes.
CREATE OR REPLACE FUNCTION gangsched._admit(j gangsched.gangs) RETURNS void
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
    IF EXISTS (SELECT FROM gangsched.teams WHERE parent_id IS NOT NULL) THEN
        PERFORM gangsched._admit_tree(j, pools, demand);
        RETURN;
    END IF;
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

-- Team trees: does the team have a parent? (PL/pgSQL: teams.parent_id is
-- added by 64_team_admin.sql, after this file.)
CREATE OR REPLACE FUNCTION gangsched._has_parent(team int) RETURNS bool
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT FROM gangsched.teams t WHERE t.id = team AND t.parent_id IS NOT NULL);
END $$;

-- Team trees: the guaranteed use of team's subtree in the pool, per
-- resource [GPUs, CPUs, GB, Gbit/s]: its own open allocations plus each
-- child's guaranteed use, capped at the child's nominal amount where the
-- child has one (src/fair.c, GsQuota.gused).
CREATE OR REPLACE FUNCTION gangsched._tree_gused(team int, pool int) RETURNS numeric[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    g  numeric[];
    c  record;
    h  numeric[];
    i  int;
BEGIN
    SELECT ARRAY[COALESCE(sum(a.gpus), 0), COALESCE(sum(a.cpus), 0), COALESCE(sum(a.mem_gb), 0), COALESCE(sum(a.net_gbps), 0)]
      INTO g
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE pg_catalog.upper_inf(a.during) AND a.team_id = team AND n.pool_id = pool;
    FOR c IN SELECT t.id, q.team_id IS NOT NULL AS has, ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps] AS nominal
               FROM gangsched.teams t
               LEFT JOIN gangsched._effective_quotas q ON q.team_id = t.id AND q.pool_id = pool
              WHERE t.parent_id = team LOOP
        h := gangsched._tree_gused(c.id, pool);
        FOR i IN 1 .. 4 LOOP
            g[i] := g[i] + CASE WHEN c.has AND c.nominal[i] IS NOT NULL THEN LEAST(h[i], c.nominal[i]) ELSE h[i] END;
        END LOOP;
    END LOOP;
    RETURN g;
END $$;

-- Team trees: the "borrowed" rule for a team with a parent. Guaranteed
-- (not borrowed) when the work stays within the nominal quota of the team
-- and of every ancestor with a quota row in the pool (at least one on the
-- path has one); an ancestor counts its subtree's guaranteed use, plus the
-- unused nominal quota of its other children, kept for them (src/fair.c,
-- tree_within_nominal). used is the team's own use in the pool.
CREATE OR REPLACE FUNCTION gangsched._beyond_nominal_tree(team_id int, pool_id int, demand numeric[], used numeric[]) RETURNS bool
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t       int := team_id;
    child   int;
    up      int;
    delta   numeric[] := demand;
    nd      numeric[] := ARRAY[0, 0, 0, 0];
    g       numeric[];
    nominal numeric[];
    has     bool;
    any_q   bool := false;
    kept    numeric;
    i       int;
    n       int := 0;
BEGIN
    LOOP
        SELECT ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps] INTO nominal
          FROM gangsched._effective_quotas q WHERE q.team_id = t AND q.pool_id = _beyond_nominal_tree.pool_id;
        has := FOUND;
        g := CASE WHEN t = _beyond_nominal_tree.team_id THEN used ELSE gangsched._tree_gused(t, _beyond_nominal_tree.pool_id) END;
        IF has THEN
            any_q := true;
            FOR i IN 1 .. 4 LOOP
                CONTINUE WHEN nominal[i] IS NULL;
                kept := CASE WHEN child IS NULL THEN 0 ELSE (
                    SELECT COALESCE(sum(GREATEST(0, (ARRAY[k.gpus, k.cpus, k.mem_gb, k.net_gbps])[i]
                                                     - (gangsched._tree_gused(o.id, _beyond_nominal_tree.pool_id))[i])), 0)
                      FROM gangsched.teams o
                      JOIN gangsched._effective_quotas k ON k.team_id = o.id AND k.pool_id = _beyond_nominal_tree.pool_id
                     WHERE o.parent_id = t AND o.id <> child
                       AND (ARRAY[k.gpus, k.cpus, k.mem_gb, k.net_gbps])[i] IS NOT NULL) END;
                IF g[i] + delta[i] + kept > nominal[i] THEN
                    RETURN true;
                END IF;
            END LOOP;
        END IF;
        SELECT x.parent_id INTO up FROM gangsched.teams x WHERE x.id = t;
        n := n + 1;
        EXIT WHEN up IS NULL OR n > 64;
        FOR i IN 1 .. 4 LOOP
            nd[i] := CASE WHEN has AND nominal[i] IS NOT NULL
                          THEN LEAST(g[i] + delta[i], nominal[i]) - LEAST(g[i], nominal[i]) ELSE delta[i] END;
        END LOOP;
        delta := nd;
        child := t;
        t := up;
    END LOOP;
    RETURN NOT any_q;
END $$;

-- The "borrowed" rule: work of a team in a pool is borrowed (beyond its
-- nominal quota) unless the team has a quota there and, for every resource
-- the quota governs, what the team uses there plus the work's demand stays
-- within the nominal amount. demand and used are [GPUs, CPUs, GB of memory,
-- Gbit/s]. The rounds apply the same rule in C (within_nominal() and
-- gs_beyond_nominal() in src/fair.c, over the quotas of this view, with the
-- team's allocations and held capacity as its use);
-- test/sql/53_borrowed_agree.sql proves that the two agree. A team with a
-- parent (a team tree) follows _beyond_nominal_tree, as the rounds do.
CREATE OR REPLACE FUNCTION gangsched._beyond_nominal(team_id int, pool_id int, demand numeric[], used numeric[]) RETURNS bool
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN gangsched._has_parent(team_id)
                THEN gangsched._beyond_nominal_tree(team_id, pool_id, demand, used)
                ELSE NOT COALESCE((
        SELECT q.gpus >= used[1] + demand[1]
               AND (q.cpus IS NULL OR q.cpus >= used[2] + demand[2])
               AND (q.mem_gb IS NULL OR q.mem_gb >= used[3] + demand[3])
               AND (q.net_gbps IS NULL OR q.net_gbps >= used[4] + demand[4])
          FROM gangsched._effective_quotas q
         WHERE q.team_id = _beyond_nominal.team_id AND q.pool_id = _beyond_nominal.pool_id), false) END
$$;

-- ==== treesql: team tree administration and views ====
-- Team trees (issue 15): add_team(name, weight, parent), set_team_parent,
-- remove_team refused with children, submit refused to a team with
-- children (55S01), a portal bound to a team acts for its subtree, the
-- quota carve-out rule in set_quota, path / depth / parent / fair_share in
-- queue and team_shares, usage / queue_waits / preemption_summary by subtree.
-- ---------------------------------------------------------------------
-- teams.parent_id: a constraint trigger instead of the foreign key
-- (pg_dump warns on every dump of an extension table that references itself)
ALTER TABLE gangsched.teams DROP CONSTRAINT teams_parent_id_fkey;

-- teams.parent_id names an existing team, and a team with children is not
-- deleted: what a foreign key would check (64_team_admin.sql says why it is
-- not one), checked at the end of each statement as a foreign key is, so
-- a restore may load the rows in any order. The API refuses both earlier,
-- with the reasons (add_team, set_team_parent, remove_team); this catches
-- writes that bypass it.
CREATE FUNCTION gangsched._teams_parent_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = OLD.id) THEN
            RAISE EXCEPTION 'team "%" is the parent of other teams', OLD.name
                USING ERRCODE = 'foreign_key_violation',
                      HINT = 'Remove its subteams first, or move them with gangsched.set_team_parent(team, parent).';
        END IF;
    ELSIF NEW.parent_id IS NOT NULL AND NOT EXISTS (SELECT FROM gangsched.teams p WHERE p.id = NEW.parent_id) THEN
        RAISE EXCEPTION 'team "%" names parent team id %, which does not exist', NEW.name, NEW.parent_id
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Set a team''s parent with gangsched.add_team(name, weight, parent) or gangsched.set_team_parent(team, parent).';
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER teams_parent_exists AFTER INSERT OR UPDATE OF parent_id OR DELETE ON gangsched.teams
    FOR EACH ROW EXECUTE FUNCTION gangsched._teams_parent_check();

-- Every team with its place in the tree: the parent's name, the path of
-- names from the top ('research/vision'), the depth (1 at the top), the
-- ids from the top-level team down to the team itself, and whether it is
-- a leaf (has no children). set_team_parent() keeps the tree acyclic, so
-- every team is reached from a top-level team. Internal: the queue and
-- team_shares views and the analyst functions read it.
CREATE VIEW gangsched._team_tree AS
WITH RECURSIVE tr AS (
    SELECT t.id, t.name AS path, 1 AS depth, ARRAY[t.id] AS ancestors
      FROM gangsched.teams t WHERE t.parent_id IS NULL
    UNION ALL
    SELECT c.id, tr.path || '/' || c.name, tr.depth + 1, tr.ancestors || c.id
      FROM tr JOIN gangsched.teams c ON c.parent_id = tr.id)
SELECT tr.id AS team_id, t.name, t.parent_id, p.name AS parent, tr.path, tr.depth, tr.ancestors,
       NOT EXISTS (SELECT FROM gangsched.teams k WHERE k.parent_id = tr.id) AS leaf
  FROM tr JOIN gangsched.teams t ON t.id = tr.id
  LEFT JOIN gangsched.teams p ON p.id = t.parent_id;

-- A team about to become a parent (add_team(parent => ...),
-- set_team_parent()) must have no live job: jobs go to leaf teams. The
-- row lock (FOR UPDATE) waits for a submit to it that is still open (its
-- foreign key holds the row FOR KEY SHARE) and makes a later one wait, and
-- then see the child (_check_team_limits).
CREATE FUNCTION gangsched._check_new_parent(pid int, parent text, action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    live bigint;
BEGIN
    PERFORM FROM gangsched.teams t WHERE t.id = pid FOR UPDATE;
    SELECT count(*) INTO live FROM gangsched.gangs g
     WHERE g.team_id = pid AND g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting');
    IF live > 0 THEN
        RAISE EXCEPTION 'team "%" has % live jobs and cannot become a parent', parent, live
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('Jobs go to leaf teams only; %s would put a team under "%s".', action, parent),
                  HINT = format('Let the jobs of team "%s" end (or cancel them) first, or put the new team elsewhere; '
                                'close_team(%L) stops new submits meanwhile.', parent, parent);
    END IF;
END $$;

-- The nearest proper ancestor of team `tid` with a quota in pool `pid`
-- (NULL: none): the team whose nominal quota tid's is carved out of.
CREATE FUNCTION gangsched._quota_parent(tid int, pid int) RETURNS int
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE up(id, parent_id, n) AS (
        SELECT t.id, t.parent_id, 0 FROM gangsched.teams t WHERE t.id = $1
        UNION
        SELECT t.id, t.parent_id, up.n + 1 FROM up JOIN gangsched.teams t ON t.id = up.parent_id)
    SELECT up.id FROM up
     WHERE up.n > 0 AND EXISTS (SELECT FROM gangsched.quotas q WHERE q.team_id = up.id AND q.pool_id = $2)
     ORDER BY up.n LIMIT 1
$$;

-- The carve-out rule: if team `tid` has a quota in pool `pid`, the nominal
-- quotas of its nearest descendants with a quota there (children, or
-- grandchildren under a child without one, ...) must fit inside it, for
-- every resource its quota governs. 22023 otherwise, naming the pool and
-- the amounts. `action` says what was being done.
CREATE FUNCTION gangsched._check_carve(tid int, pid int, action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    q    record;
    s    record;
    tn   text;
    pn   text;
    res  text;
    own  numeric;
    sub  numeric;
    who  text;
BEGIN
    IF tid IS NULL THEN
        RETURN;
    END IF;
    SELECT e.gpus, e.cpus, e.mem_gb, e.net_gbps INTO q
      FROM gangsched._effective_quotas e WHERE e.team_id = tid AND e.pool_id = pid;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    WITH RECURSIVE d(id, has) AS (
        SELECT c.id, EXISTS (SELECT FROM gangsched.quotas x WHERE x.team_id = c.id AND x.pool_id = pid)
          FROM gangsched.teams c WHERE c.parent_id = tid
        UNION
        SELECT c.id, EXISTS (SELECT FROM gangsched.quotas x WHERE x.team_id = c.id AND x.pool_id = pid)
          FROM d JOIN gangsched.teams c ON c.parent_id = d.id
         WHERE NOT d.has)
    SELECT COALESCE(sum(e.gpus), 0) AS gpus, COALESCE(sum(e.cpus), 0) AS cpus,
           COALESCE(sum(e.mem_gb), 0) AS mem_gb, COALESCE(sum(e.net_gbps), 0) AS net_gbps,
           string_agg(format('%s %s', t.name, trim_scale(e.gpus)), ', ' ORDER BY t.name) AS who_gpus,
           string_agg(format('%s %s', t.name, trim_scale(e.cpus)), ', ' ORDER BY t.name) AS who_cpus,
           string_agg(format('%s %s', t.name, trim_scale(e.mem_gb)), ', ' ORDER BY t.name) AS who_mem_gb,
           string_agg(format('%s %s', t.name, trim_scale(e.net_gbps)), ', ' ORDER BY t.name) AS who_net_gbps
      INTO s
      FROM d JOIN gangsched._effective_quotas e ON e.team_id = d.id AND e.pool_id = pid
      JOIN gangsched.teams t ON t.id = d.id
     WHERE d.has;
    IF q.gpus < s.gpus THEN
        res := 'GPUs'; own := q.gpus; sub := s.gpus; who := s.who_gpus;
    ELSIF q.cpus < s.cpus THEN
        res := 'CPUs'; own := q.cpus; sub := s.cpus; who := s.who_cpus;
    ELSIF q.mem_gb < s.mem_gb THEN
        res := 'GB of memory'; own := q.mem_gb; sub := s.mem_gb; who := s.who_mem_gb;
    ELSIF q.net_gbps < s.net_gbps THEN
        res := 'Gbit/s of network'; own := q.net_gbps; sub := s.net_gbps; who := s.who_net_gbps;
    ELSE
        RETURN;
    END IF;
    SELECT t.name INTO tn FROM gangsched.teams t WHERE t.id = tid;
    SELECT p.name INTO pn FROM gangsched.pools p WHERE p.id = pid;
    RAISE EXCEPTION 'the nominal quotas under team "%" in pool "%" would be % %, more than its own %',
                    tn, pn, trim_scale(sub), res, trim_scale(own)
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = format('A subteam''s nominal quota is carved out of its parent''s; %s would leave team "%s" '
                              'with %s %s in pool "%s" and the quotas below it at %s %s (%s).',
                              action, tn, trim_scale(own), res, pn, trim_scale(sub), res, who),
              HINT = format('Raise the quota of team "%s" in pool "%s" first (gangsched.set_quota), '
                            'or lower the quotas below it.', tn, pn);
END $$;

-- Move team `team` (with its subtree) under `parent`, or to the top level
-- (parent NULL). Its quotas, weights, members and history stay; from the
-- next round its subtree shares what the new parent gets.
CREATE FUNCTION gangsched.set_team_parent(team text, parent text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid  int := gangsched._team_id(team);
    pid  int := CASE WHEN parent IS NOT NULL THEN gangsched._team_id(parent) END;
    old  int;
    p    record;
BEGIN
    -- one tree change at a time, so two moves cannot close a cycle between
    -- them (submits and rounds do not take this lock)
    LOCK TABLE gangsched.teams IN SHARE ROW EXCLUSIVE MODE;
    SELECT t.parent_id INTO old FROM gangsched.teams t WHERE t.id = tid;
    IF old IS NOT DISTINCT FROM pid THEN
        RETURN;
    END IF;
    IF pid IS NOT NULL THEN
        IF pid = tid OR EXISTS (SELECT FROM gangsched._team_tree x WHERE x.team_id = pid AND tid = ANY (x.ancestors)) THEN
            RAISE EXCEPTION 'team "%" cannot move under "%", which is %', team, parent,
                            CASE WHEN pid = tid THEN 'itself' ELSE 'in its own subtree' END
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('Team "%s" is at %s; teams form a tree, without cycles.', parent,
                                      (SELECT x.path FROM gangsched._team_tree x WHERE x.team_id = pid)),
                      HINT = format('Move "%s" out of the subtree of "%s" first, or choose a parent outside it.', parent, team);
        END IF;
        PERFORM gangsched._check_new_parent(pid, parent, format('set_team_parent(%L, %L)', team, parent));
    END IF;
    UPDATE gangsched.teams t SET parent_id = pid WHERE t.id = tid;
    -- the subtree's nominal quotas must fit under its new quota parents
    FOR p IN SELECT DISTINCT q.pool_id FROM gangsched.quotas q
              WHERE q.team_id IN (SELECT x.team_id FROM gangsched._team_tree x WHERE tid = ANY (x.ancestors)) LOOP
        PERFORM gangsched._check_carve(gangsched._quota_parent(tid, p.pool_id), p.pool_id,
                                       format('moving team "%s" under "%s"', team, COALESCE(parent, 'the top level')));
    END LOOP;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team parent set',
                             jsonb_build_object('team', team, 'parent', parent,
                                                'was', (SELECT t.name FROM gangsched.teams t WHERE t.id = old)));
    PERFORM gangsched._wake();
END $$;

-- Weighted max-min fair split of a capacity among siblings, by dominant
-- share (progressive filling, as DRF defines it): every sibling's share
-- grows in proportion to its weight, along the direction of its demand,
-- until its demand is met or a resource it needs runs out. cap is
-- [GPUs, CPUs, GB, Gbit/s]; demand holds 4 numbers per sibling, in the
-- order of weight. Returns each sibling's dominant share of cap (a
-- resource of capacity 0 is left out).
CREATE FUNCTION gangsched._drf_split(cap float8[], demand float8[], weight float8[]) RETURNS float8[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n      int := COALESCE(array_length(weight, 1), 0);
    u      float8[] := array_fill(0::float8, ARRAY[4 * GREATEST(n, 1)]);
    d      float8[] := array_fill(0::float8, ARRAY[GREATEST(n, 1)]);
    s      float8[] := array_fill(0::float8, ARRAY[GREATEST(n, 1)]);
    active bool[] := array_fill(false, ARRAY[GREATEST(n, 1)]);
    used   float8[] := ARRAY[0, 0, 0, 0]::float8[];
    i      int;
    r      int;
    t      float8;
    rate   float8;
    x      float8;
    nleft  int := n;
BEGIN
    FOR i IN 1 .. n LOOP
        FOR r IN 1 .. 4 LOOP
            x := CASE WHEN cap[r] > 0 THEN COALESCE(demand[4 * (i - 1) + r], 0) / cap[r] ELSE 0 END;
            u[4 * (i - 1) + r] := x;
            d[i] := GREATEST(d[i], x);
        END LOOP;
        IF d[i] > 0 THEN
            active[i] := true;
            FOR r IN 1 .. 4 LOOP
                u[4 * (i - 1) + r] := u[4 * (i - 1) + r] / d[i];
            END LOOP;
        ELSE
            nleft := nleft - 1;
        END IF;
    END LOOP;
    WHILE nleft > 0 LOOP
        -- the next event: a sibling's demand met, or a resource used up
        t := 'Infinity';
        FOR i IN 1 .. n LOOP
            IF active[i] THEN
                t := LEAST(t, (d[i] - s[i]) / weight[i]);
            END IF;
        END LOOP;
        FOR r IN 1 .. 4 LOOP
            rate := 0;
            FOR i IN 1 .. n LOOP
                IF active[i] THEN
                    rate := rate + weight[i] * u[4 * (i - 1) + r];
                END IF;
            END LOOP;
            IF rate > 0 THEN
                t := LEAST(t, GREATEST(1 - used[r], 0) / rate);
            END IF;
        END LOOP;
        FOR i IN 1 .. n LOOP
            IF active[i] THEN
                s[i] := s[i] + weight[i] * t;
            END IF;
        END LOOP;
        FOR r IN 1 .. 4 LOOP
            used[r] := 0;
            FOR i IN 1 .. n LOOP
                used[r] := used[r] + s[i] * u[4 * (i - 1) + r];
            END LOOP;
        END LOOP;
        FOR i IN 1 .. n LOOP
            IF active[i] AND s[i] >= d[i] * (1 - 1e-12) THEN
                s[i] := d[i]; active[i] := false; nleft := nleft - 1;
            END IF;
        END LOOP;
        FOR r IN 1 .. 4 LOOP
            IF used[r] >= 1 - 1e-12 THEN
                FOR i IN 1 .. n LOOP
                    IF active[i] AND u[4 * (i - 1) + r] > 0 THEN
                        active[i] := false; nleft := nleft - 1;
                    END IF;
                END LOOP;
            END IF;
        END LOOP;
    END LOOP;
    RETURN s[1:n];
END $$;

-- Each team's fair share (the fair_share column of team_shares): the
-- dominant share of the cluster (up nodes, all pools, as dominant_share)
-- that hierarchical weighted DRF gives its subtree, over what the
-- subtree's teams hold now plus what their pending jobs ask for. Top-level
-- teams split the cluster; the children of a team split what it gets.
-- Computed in memory (no temporary table: it runs on standbys too).
CREATE FUNCTION gangsched._fair_shares(OUT team_id int, OUT fair_share float8)
RETURNS SETOF record LANGUAGE plpgsql STABLE AS $$
DECLARE
    cap    float8[];
    ids    int[];
    par    int[];
    w      float8[];
    d      float8[];
    n      int;
    pos    int[] := '{}';
    alloc  float8[];
    kids   int[];
    dem    float8[];
    ww     float8[];
    sh     float8[];
    pc     float8[];
    g      int;
    i      int;
    j      int;
    r      int;
    dom    float8;
    k      float8;
BEGIN
    SELECT ARRAY[COALESCE(sum(x.gpus), 0), COALESCE(sum(x.cpus), 0), COALESCE(sum(x.mem_gb), 0),
                 COALESCE(sum(x.net_gbps), 0)]::float8[]
      INTO cap FROM gangsched.nodes x WHERE x.state = 'up';
    -- what each team holds (as team_shares counts it) and asks for,
    -- parents before their children (by depth)
    WITH own AS (
        -- float8 throughout (the gangs' f_ copies of the request), each
        -- part summed per team first: a share needs no exact sums, and
        -- numeric arithmetic over the queue's rows was most of the time
        SELECT x.team_id, sum(x.gpus) AS gpus, sum(x.cpus) AS cpus, sum(x.mem) AS mem, sum(x.net) AS net
          FROM (SELECT a.team_id, sum(a.gpus::float8) AS gpus, sum(a.cpus::float8) AS cpus,
                       sum(a.mem_gb::float8) AS mem, sum(a.net_gbps::float8) AS net
                  FROM gangsched.allocations a
                 WHERE upper_inf(a.during)
                   AND NOT EXISTS (SELECT FROM gangsched.gangs j WHERE j.id = a.job AND j.state = 'preempting')
                 GROUP BY a.team_id
                UNION ALL
                SELECT j.team_id, sum(j.f_gpus), sum(h.cpus::float8), sum(h.mem_gb::float8), sum(h.net_gbps::float8)
                  FROM gangsched.holds h JOIN gangsched.gangs j ON j.id = h.job
                 GROUP BY j.team_id
                UNION ALL
                SELECT j.team_id, sum(j.workers * j.f_gpus), sum(j.workers * j.f_cpus), sum(j.workers * j.f_mem_gb),
                       sum(j.workers * j.f_net_gbps)
                  FROM gangsched.gangs j WHERE j.state = 'pending'
                 GROUP BY j.team_id) x
         GROUP BY x.team_id),
    tm AS (
        SELECT tr.team_id, tr.parent_id, tr.depth, t.weight::float8 AS weight,
               COALESCE(o.gpus, 0) AS gpus, COALESCE(o.cpus, 0) AS cpus, COALESCE(o.mem, 0) AS mem,
               COALESCE(o.net, 0) AS net
          FROM gangsched._team_tree tr JOIN gangsched.teams t ON t.id = tr.team_id
          LEFT JOIN own o ON o.team_id = tr.team_id)
    SELECT array_agg(s.team_id ORDER BY s.depth, s.team_id), array_agg(s.parent_id ORDER BY s.depth, s.team_id),
           array_agg(s.weight ORDER BY s.depth, s.team_id),
           (SELECT array_agg(x.v ORDER BY s2.depth, s2.team_id, x.o)
              FROM tm s2 CROSS JOIN LATERAL unnest(ARRAY[s2.gpus, s2.cpus, s2.mem, s2.net]) WITH ORDINALITY x(v, o))
      INTO ids, par, w, d
      FROM tm s;
    n := COALESCE(array_length(ids, 1), 0);
    IF n = 0 THEN
        RETURN;
    END IF;
    FOR i IN 1 .. n LOOP
        pos[ids[i]] := i;
    END LOOP;
    -- a subtree's demand: its teams' own, summed bottom up (a child comes
    -- after its parent in this order)
    FOR i IN REVERSE n .. 1 LOOP
        IF par[i] IS NOT NULL THEN
            j := pos[par[i]];
            FOR r IN 1 .. 4 LOOP
                d[4 * (j - 1) + r] := d[4 * (j - 1) + r] + d[4 * (i - 1) + r];
            END LOOP;
        END IF;
    END LOOP;
    alloc := array_fill(0::float8, ARRAY[4 * n]);
    -- top down: the siblings under each parent (0: the top level) split
    -- the parent's allocation
    FOR g IN 0 .. n LOOP
        IF g = 0 THEN
            pc := cap;
        ELSIF ids[g] = ANY (par) THEN
            pc := alloc[4 * g - 3 : 4 * g];
        ELSE
            CONTINUE;
        END IF;
        kids := '{}'; dem := '{}'; ww := '{}';
        FOR i IN 1 .. n LOOP
            IF (g = 0 AND par[i] IS NULL) OR (g > 0 AND par[i] = ids[g]) THEN
                kids := kids || i; dem := dem || d[4 * i - 3 : 4 * i]; ww := ww || w[i];
            END IF;
        END LOOP;
        sh := gangsched._drf_split(pc, dem, ww);
        FOR j IN 1 .. COALESCE(array_length(kids, 1), 0) LOOP
            i := kids[j];
            -- the sibling's allocation: its demand scaled to its share
            dom := 0;
            FOR r IN 1 .. 4 LOOP
                IF pc[r] > 0 THEN
                    dom := GREATEST(dom, d[4 * (i - 1) + r] / pc[r]);
                END IF;
            END LOOP;
            k := CASE WHEN dom > 0 THEN sh[j] / dom ELSE 0 END;
            team_id := ids[i];
            fair_share := 0;
            FOR r IN 1 .. 4 LOOP
                alloc[4 * (i - 1) + r] := CASE WHEN pc[r] > 0 THEN k * d[4 * (i - 1) + r] ELSE 0 END;
                IF cap[r] > 0 THEN
                    fair_share := GREATEST(fair_share, alloc[4 * (i - 1) + r] / cap[r]);
                END IF;
            END LOOP;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END $$;

DROP FUNCTION gangsched.add_team(text, numeric);

-- A new team, at the top level or under `parent` (docs/fairness.md, "Team
-- trees"); a parent must not have live jobs (jobs go to leaf teams).
CREATE FUNCTION gangsched.add_team(name text, weight numeric DEFAULT 1, parent text DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    id  int;
    pid int;
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'team name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the team, for example ''vision''.';
    END IF;
    PERFORM gangsched._check_name(name, 'team name');
    PERFORM gangsched._check_weight(weight);
    IF EXISTS (SELECT FROM gangsched.teams t WHERE t.name = add_team.name) THEN
        RAISE EXCEPTION 'team "%" already exists', name
            USING ERRCODE = 'unique_violation', HINT = 'Choose another name or use the existing team.';
    END IF;
    IF parent IS NOT NULL THEN
        pid := gangsched._team_id(parent);
        PERFORM gangsched._check_new_parent(pid, parent, format('add_team(%L, parent => %L)', name, parent));
    END IF;
    INSERT INTO gangsched.teams (name, weight, parent_id) VALUES (name, weight, pid) RETURNING teams.id INTO id;
    -- the pending-count cache of submit(): a new team has no jobs
    INSERT INTO gangsched.team_pending (team_id, pending, upto, counted_at)
    SELECT id, 0, s.last_value, pg_catalog.now() FROM gangsched.queue_position_seq s;
    PERFORM gangsched._event('team', NULL, NULL, id, 'team added',
                             jsonb_build_object('team', name, 'weight', weight)
                             || CASE WHEN parent IS NOT NULL THEN jsonb_build_object('parent', parent) ELSE '{}' END);
    RETURN id;
END $$;

CREATE OR REPLACE FUNCTION gangsched.set_quota(team text, pool text, gpus numeric, cpus numeric DEFAULT NULL,
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
    -- team trees: the quotas below the team fit inside its new one, and
    -- its new one inside its quota parent's (the carve-out rule)
    PERFORM gangsched._check_carve(tid, pid, format('set_quota(%L, %L, %s)', team, pool, gpus));
    PERFORM gangsched._check_carve(gangsched._quota_parent(tid, pid), pid, format('set_quota(%L, %L, %s)', team, pool, gpus));
    PERFORM gangsched._event('quota', NULL, NULL, tid, 'quota set',
                             jsonb_build_object('team', team, 'pool', pool, 'gpus', gpus, 'cpus', cpus,
                                                'mem_gb', mem_gb, 'net_gbps', net_gbps,
                                                'borrowing_limit_gpus', borrowing_limit_gpus,
                                                'lending_limit_gpus', lending_limit_gpus));
END $$;

-- submit()'s per-team limits: 53S08 for a gang above the team's worker
-- limit, 53S07 when the team already has as many pending jobs as it may.
-- O(1) while the team is far from its pending limit (one index lookup and
-- a read of the sequence); near it, a count of the team's pending jobs on
-- gangs_team_idx, stopped at the limit.
CREATE OR REPLACE FUNCTION gangsched._check_team_limits(tid int, workers int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r       record;
    lim     int;
    wlim    int;
    seq     bigint;
    n       int;
BEGIN
    SELECT t.name, t.max_pending, t.max_workers_per_gang, c.pending, c.upto, c.counted_at,
           (SELECT s.last_value FROM gangsched.queue_position_seq s) AS seq, t.closed_at, t.closed_reason
      INTO r
      FROM gangsched.teams t LEFT JOIN gangsched.team_pending c ON c.team_id = t.id
     WHERE t.id = tid FOR KEY SHARE OF t;
    IF r.closed_at IS NOT NULL THEN
        RAISE EXCEPTION 'team "%" is closed to new work', r.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Closed at %s%s. Its queued jobs stay queued and are not placed; its running jobs run on.',
                                  r.closed_at, COALESCE(': ' || r.closed_reason, '')),
                  HINT = format('Ask the operator to reopen it with gangsched.open_team(%L).', r.name);
    END IF;
    -- jobs go to leaf teams (the row lock above orders this against
    -- add_team / set_team_parent making the team a parent)
    IF EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = tid) THEN
        RAISE EXCEPTION 'team "%" has subteams and takes no jobs of its own', r.name
            USING ERRCODE = '55S01',
                  DETAIL = format('Jobs go to leaf teams; the leaves under "%s" are: %s.', r.name,
                                  (SELECT string_agg(x.path, ', ' ORDER BY x.path) FROM gangsched._team_tree x
                                    WHERE x.leaf AND tid = ANY (x.ancestors))),
                  HINT = 'Submit to one of its leaf teams.';
    END IF;
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

-- Whether the caller acts for team `tid` (operators act for every team):
-- a role bound to a team acts for every team of its subtree (team trees,
-- docs/security.md).
CREATE OR REPLACE FUNCTION gangsched._acts_for_team(tid int) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    c oid;
BEGIN
    IF gangsched._is_operator() THEN
        RETURN true;
    END IF;
    c := gangsched._caller();
    RETURN EXISTS (WITH RECURSIVE up(id) AS (
                       SELECT tid
                       UNION
                       SELECT t.parent_id FROM up JOIN gangsched.teams t ON t.id = up.id WHERE t.parent_id IS NOT NULL)
                   SELECT FROM gangsched.members m JOIN up ON m.team_id = up.id
                    WHERE pg_catalog.pg_has_role(c, m.role, 'MEMBER'));
END $$;

-- What the caller may see in the jobs, queue and placements views: every
-- row (operators, analysts) or its teams' rows (portals: the teams it is
-- bound to and their subtrees); commands only of its own teams
-- (operators: all).
CREATE OR REPLACE FUNCTION gangsched._visibility(OUT all_rows bool, OUT all_commands bool, OUT teams int[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    c oid := gangsched._caller();
BEGIN
    all_commands := gangsched._is_operator();
    all_rows := all_commands OR pg_catalog.pg_has_role(c, 'gangsched_analyst', 'MEMBER');
    -- the teams it is bound to and their subtrees
    WITH RECURSIVE b(id) AS (
        SELECT m.team_id FROM gangsched.members m WHERE pg_catalog.pg_has_role(c, m.role, 'MEMBER')
        UNION
        SELECT t.id FROM b JOIN gangsched.teams t ON t.parent_id = b.id)
    SELECT COALESCE(pg_catalog.array_agg(b.id ORDER BY b.id), '{}') INTO teams FROM b;
END $$;

-- Remove a team that has no subteams and no jobs at all: live ones must end first, and
-- finished ones stay (the history refers to the team) until
-- archive_history() has moved them. Its quotas and portal bindings go
-- with it; its events stay.
CREATE OR REPLACE FUNCTION gangsched.remove_team(team text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid  int := gangsched._team_id(team);
    live bigint;
    hist bigint;
BEGIN
    PERFORM FROM gangsched.teams t WHERE t.id = tid FOR UPDATE;
    SELECT count(*) FILTER (WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')),
           count(*)
      INTO live, hist
      FROM gangsched.gangs g WHERE g.team_id = tid;
    IF live > 0 THEN
        RAISE EXCEPTION 'team "%" has % live jobs', team, live
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'A team is removed only when none of its jobs is pending, nominated, placed, running or preempting.',
                  HINT = format('Close it with gangsched.close_team(%L) so it takes no new work, cancel or wait for its jobs, then remove it.', team);
    END IF;
    IF hist > 0 THEN
        RAISE EXCEPTION 'team "%" still has % ended jobs in the history', team, hist
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'The allocation history and the analysts'' views name the team of every job they keep.',
                  HINT = 'Move them to the archive first with gangsched.archive_history(before); a closed team takes no new work meanwhile.';
    END IF;
    IF EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = tid) THEN
        RAISE EXCEPTION 'team "%" has subteams', team
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('Its children are: %s.', (SELECT string_agg(c.name, ', ' ORDER BY c.name)
                                                             FROM gangsched.teams c WHERE c.parent_id = tid)),
                  HINT = 'Remove its subteams first, or move them with gangsched.set_team_parent(team, parent) '
                         '(parent NULL: to the top level).';
    END IF;
    DELETE FROM gangsched.quotas q WHERE q.team_id = tid;
    DELETE FROM gangsched.team_pending c WHERE c.team_id = tid;
    DELETE FROM gangsched.teams t WHERE t.id = tid;     -- members go by ON DELETE CASCADE
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team removed', jsonb_build_object('team', team));
END $$;

CREATE OR REPLACE VIEW gangsched.queue AS
SELECT q.position, q.job, t.name AS team, j.name, j.priority, j.workers, j.gpus, j.preemptible,
       round(q.dominant_share::numeric, 4) AS dominant_share, q.would_borrow, q.fits_now, q.reason,
       j.submitted_at, q.las_queue, q.attained_gpu_seconds,
       tt.path, tt.depth, tt.parent
  FROM gangsched._queue_visible() q
  JOIN gangsched.gangs j ON j.id = q.job
  JOIN gangsched.teams t ON t.id = j.team_id
  JOIN gangsched._team_tree tt ON tt.team_id = j.team_id
 ORDER BY q.position;

CREATE OR REPLACE VIEW gangsched._team_shares_rows AS
WITH cap AS (
    SELECT sum(n.gpus) AS gpus, sum(n.cpus) AS cpus, sum(n.mem_gb) AS mem, sum(n.net_gbps) AS net
      FROM gangsched.nodes n WHERE n.state = 'up'),
pool_cap AS (
    SELECT n.pool_id, sum(n.gpus) AS gpus FROM gangsched.nodes n WHERE n.state = 'up' GROUP BY n.pool_id),
tree AS MATERIALIZED (SELECT * FROM gangsched._team_tree),
held AS (
    SELECT a.team_id, n.pool_id, sum(a.gpus) AS gpus, sum(a.cpus) AS cpus, sum(a.mem_gb) AS mem,
           sum(a.net_gbps) AS net, COALESCE(sum(a.gpus) FILTER (WHERE a.borrowed), 0) AS borrowed_gpus
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)
     GROUP BY a.team_id, n.pool_id),
-- what the share counts, as the round does (src/loader.c): current
-- allocations except those of gangs told to stop (leaving), and the
-- capacity held for nominated jobs (arriving)
team_held AS (
    SELECT x.team_id, sum(x.gpus) AS gpus, sum(x.cpus) AS cpus, sum(x.mem) AS mem, sum(x.net) AS net
      FROM (SELECT a.team_id, a.gpus, a.cpus, a.mem_gb AS mem, a.net_gbps AS net
              FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
             WHERE upper_inf(a.during) AND g.state <> 'preempting'
            UNION ALL
            SELECT g.team_id, g.gpus, h.cpus, h.mem_gb, h.net_gbps
              FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job) x
     GROUP BY x.team_id),
-- each team's own rows, as without trees
rows AS (
    SELECT t.id AS team_id, p.id AS pool_id,
           q.gpus AS nominal_gpus,
           COALESCE(h.gpus, 0) AS used_gpus, COALESCE(h.cpus, 0) AS used_cpus,
           COALESCE(h.mem, 0) AS used_mem_gb, COALESCE(h.net, 0) AS used_net_gbps,
           COALESCE(h.borrowed_gpus, 0) AS borrowed_gpus,
           CASE WHEN tr.leaf THEN LEAST(GREATEST(COALESCE(q.gpus, 0) - COALESCE(h.gpus, 0), 0),
                                        COALESCE(q.lend_gpus, 'Infinity'::numeric)) ELSE 0 END AS lendable_gpus,
           -- a topmost quota: no quota above it in the tree
           q.team_id IS NOT NULL AND NOT EXISTS (
               SELECT FROM gangsched.quotas x
                WHERE x.pool_id = p.id AND x.team_id = ANY (tr.ancestors) AND x.team_id <> t.id) AS topmost
      FROM gangsched.teams t JOIN tree tr ON tr.team_id = t.id CROSS JOIN gangsched.pools p
      LEFT JOIN gangsched._effective_quotas q ON q.team_id = t.id AND q.pool_id = p.id
      LEFT JOIN held h ON h.team_id = t.id AND h.pool_id = p.id
     WHERE q.team_id IS NOT NULL OR h.team_id IS NOT NULL),
pool_lent AS (
    -- borrowed GPUs of the pool that its unassigned capacity does not cover
    SELECT r.pool_id,
           LEAST(sum(r.borrowed_gpus),
                 GREATEST(sum(r.borrowed_gpus) - (COALESCE(max(pc.gpus), 0)
                                                  - COALESCE(sum(r.nominal_gpus) FILTER (WHERE r.topmost), 0)), 0)) AS gpus,
           sum(r.lendable_gpus) AS lendable
      FROM rows r LEFT JOIN pool_cap pc ON pc.pool_id = r.pool_id
     GROUP BY r.pool_id),
lent AS (
    SELECT r.*, CASE WHEN pl.lendable > 0 THEN r.lendable_gpus * LEAST(1, pl.gpus / pl.lendable) ELSE 0 END AS lent_gpus
      FROM rows r JOIN pool_lent pl ON pl.pool_id = r.pool_id),
-- a team's rows: the sums over its subtree's own rows
sub AS (
    SELECT a.id AS team_id, l.pool_id, sum(l.used_gpus) AS used_gpus, sum(l.used_cpus) AS used_cpus,
           sum(l.used_mem_gb) AS used_mem_gb, sum(l.used_net_gbps) AS used_net_gbps,
           sum(l.borrowed_gpus) AS borrowed_gpus, sum(l.lent_gpus) AS lent_gpus
      FROM lent l JOIN tree tr ON tr.team_id = l.team_id CROSS JOIN LATERAL unnest(tr.ancestors) a(id)
     GROUP BY 1, 2),
sub_held AS (
    SELECT a.id AS team_id, sum(th.gpus) AS gpus, sum(th.cpus) AS cpus, sum(th.mem) AS mem, sum(th.net) AS net
      FROM team_held th JOIN tree tr ON tr.team_id = th.team_id CROSS JOIN LATERAL unnest(tr.ancestors) a(id)
     GROUP BY 1)
SELECT t.name AS team, p.name AS pool, t.weight, q.gpus AS nominal_gpus, q.cpus AS nominal_cpus,
       q.mem_gb AS nominal_mem_gb, q.net_gbps AS nominal_net_gbps,
       q.borrow_gpus AS borrowing_limit_gpus, q.lend_gpus AS lending_limit_gpus,
       s.used_gpus, s.used_cpus, s.used_mem_gb, s.used_net_gbps, s.borrowed_gpus,
       round(s.lent_gpus, 3) AS lent_gpus,
       round((GREATEST(COALESCE(th.gpus / NULLIF(cap.gpus, 0), 0), COALESCE(th.cpus / NULLIF(cap.cpus, 0), 0),
                       COALESCE(th.mem / NULLIF(cap.mem, 0), 0), COALESCE(th.net / NULLIF(cap.net, 0), 0))
              / t.weight)::numeric, 4) AS dominant_share,
       tr.path, tr.depth, tr.parent,
       round(COALESCE(f.fair_share, 0)::numeric, 4) AS fair_share
  FROM sub s CROSS JOIN cap
  JOIN gangsched.teams t ON t.id = s.team_id
  JOIN gangsched.pools p ON p.id = s.pool_id
  JOIN tree tr ON tr.team_id = s.team_id
  LEFT JOIN gangsched._effective_quotas q ON q.team_id = s.team_id AND q.pool_id = s.pool_id
  LEFT JOIN sub_held th ON th.team_id = s.team_id
  LEFT JOIN gangsched._fair_shares() f ON f.team_id = s.team_id
 ORDER BY p.name, t.name;

CREATE OR REPLACE VIEW gangsched.team_shares AS
SELECT s.* FROM gangsched._team_shares() s ORDER BY s.pool, s.team;

-- The `by` argument of usage(), queue_waits() and preemption_summary():
-- 'team' (each team's own figures) or 'subtree' (each team's figures
-- summed over its subtree in the tree as it is now). 22023 otherwise.
CREATE FUNCTION gangsched._check_by(by text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF by IS NULL OR by NOT IN ('team', 'subtree') THEN
        RAISE EXCEPTION 'invalid by "%"', COALESCE(by, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use by => ''team'' for each team''s own figures or by => ''subtree'' to roll them up by subtree.';
    END IF;
END $$;

-- Which teams' figures each team's row sums: itself (by 'team'), or every
-- team of its subtree (by 'subtree'): (team_id, member).
CREATE FUNCTION gangsched._rollup(by text) RETURNS TABLE (team_id int, member int)
LANGUAGE sql STABLE AS $$
    SELECT a.id, tr.team_id
      FROM gangsched._team_tree tr
     CROSS JOIN LATERAL unnest(CASE WHEN $1 = 'subtree' THEN tr.ancestors ELSE ARRAY[tr.team_id] END) a(id)
$$;

DROP FUNCTION gangsched.usage(timestamptz, timestamptz, interval);

-- Per bucket and team: GPU-hours held, their share of the cluster's
-- capacity in that bucket, the team's nominal GPU quota (all pools) in
-- force at the bucket's end, and the GPU-hours held as borrowed capacity.
-- Every team has a row in every bucket, with its path and depth in the
-- tree. by => 'subtree': a team's figures are those of its whole subtree
-- (the tree as it is now); its quota, per pool, the sum of the topmost
-- quotas in force inside the subtree (a quota below another is carved out
-- of it and not counted again).
CREATE FUNCTION gangsched.usage("from" timestamptz, "to" timestamptz, bucket interval DEFAULT '1 hour',
                                by text DEFAULT 'team')
RETURNS TABLE (bucket_start timestamptz, bucket_end timestamptz, team text, gpu_hours float8,
               share_of_capacity float8, quota_gpus numeric, borrowed_gpu_hours float8,
               capacity_gpu_hours float8, path text, depth int)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._check_by($4);
WITH p AS (SELECT gangsched._bucket_seconds($1, $2, $3) AS bs),
b AS (SELECT x.* FROM p, gangsched._buckets($1, $2, p.bs) x),
tr AS MATERIALIZED (SELECT * FROM gangsched._team_tree),
roll AS MATERIALIZED (SELECT * FROM gangsched._rollup($4)),
al AS (
    SELECT x.k, x.team_id, sum(x.gpu_seconds) AS gs, sum(x.gpu_seconds) FILTER (WHERE x.borrowed) AS bgs
      FROM p, gangsched._allocated($1, $2, p.bs) x GROUP BY 1, 2),
alr AS (
    SELECT al.k, roll.team_id, sum(al.gs) AS gs, sum(al.bgs) AS bgs
      FROM al JOIN roll ON roll.member = al.team_id GROUP BY 1, 2),
cap AS (SELECT x.* FROM p, gangsched._capacity($1, $2, p.bs) x),
quota AS (
    -- each set_quota() is in force from its event until the next one for the same team and pool
    SELECT e.team_id, e.detail->>'pool' AS pool, (e.detail->>'gpus')::numeric AS gpus, e.at AS since,
           COALESCE(lead(e.at) OVER (PARTITION BY e.team_id, e.detail->>'pool' ORDER BY e.at, e.id), 'infinity') AS until
      FROM gangsched.events e
     WHERE e.kind = 'quota'),
qp AS MATERIALIZED (
    SELECT b.k, q.team_id, q.pool, q.gpus
      FROM b JOIN quota q ON q.since < b.bucket_end AND b.bucket_end <= q.until
     WHERE q.gpus IS NOT NULL),
qb AS (
    SELECT qp.k, roll.team_id, sum(qp.gpus) AS gpus
      FROM qp JOIN roll ON roll.member = qp.team_id
      JOIN tr m ON m.team_id = qp.team_id
      JOIN tr t ON t.team_id = roll.team_id
     WHERE m.depth = t.depth
        OR NOT EXISTS (SELECT FROM qp x WHERE x.k = qp.k AND x.pool = qp.pool
                                          AND x.team_id = ANY (m.ancestors[t.depth : m.depth - 1]))
     GROUP BY 1, 2)
SELECT b.bucket_start, b.bucket_end, t.name,
       COALESCE(al.gs, 0) / 3600,
       CASE WHEN cap.gpu_seconds > 0 THEN COALESCE(al.gs, 0) / cap.gpu_seconds END,
       COALESCE(qb.gpus, 0),
       COALESCE(al.bgs, 0) / 3600,
       COALESCE(cap.gpu_seconds, 0) / 3600,
       tr.path, tr.depth
  FROM b CROSS JOIN gangsched.teams t
  JOIN tr ON tr.team_id = t.id
  LEFT JOIN alr al ON al.k = b.k AND al.team_id = t.id
  LEFT JOIN cap ON cap.k = b.k
  LEFT JOIN qb ON qb.k = b.k AND qb.team_id = t.id
 WHERE b.bucket_end > b.bucket_start
 ORDER BY b.bucket_start, t.name
$$;

DROP FUNCTION gangsched.queue_waits(timestamptz, timestamptz);

-- Queue waits of the jobs submitted in [from, to), per team and for all
-- teams (team NULL): the wait of a job is from its submit to its first
-- placement ('submitted' and first 'placed' event), wherever that falls.
-- Jobs not placed yet (still waiting) and jobs that never were (expired,
-- cancelled) are counted apart and have no wait. by => 'subtree': a team's
-- row counts the jobs of its whole subtree. path: the team's path in the
-- tree (NULL on the all-teams row).
CREATE FUNCTION gangsched.queue_waits("from" timestamptz, "to" timestamptz, by text DEFAULT 'team')
RETURNS TABLE (team text, submitted bigint, placed bigint, still_waiting bigint, never_placed bigint,
               mean_s float8, p50_s float8, p95_s float8, max_s float8, path text)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._bucket_seconds($1, $2, $2 - $1);   -- refuses a bad window
SELECT gangsched._check_by($3);
WITH s AS (
    SELECT e.job, e.team_id, e.at
      FROM gangsched.events e
     WHERE e.kind = 'submitted' AND e.at >= $1 AND e.at < $2 AND e.job IS NOT NULL),
w AS MATERIALIZED (
    SELECT s.team_id, g.state,
           date_part('epoch', (SELECT min(e.at) FROM gangsched.events e WHERE e.job = s.job AND e.kind = 'placed') - s.at) AS wait
      FROM s JOIN gangsched.gangs g ON g.id = s.job)
SELECT * FROM (
    SELECT t.name, count(*), count(w.wait),
           count(*) FILTER (WHERE w.wait IS NULL AND w.state IN ('pending', 'nominated')),
           count(*) FILTER (WHERE w.wait IS NULL AND w.state NOT IN ('pending', 'nominated')),
           avg(w.wait), percentile_cont(0.5) WITHIN GROUP (ORDER BY w.wait),
           percentile_cont(0.95) WITHIN GROUP (ORDER BY w.wait), max(w.wait), tr.path
      FROM w JOIN gangsched._rollup($3) r ON r.member = w.team_id
      JOIN gangsched.teams t ON t.id = r.team_id
      JOIN gangsched._team_tree tr ON tr.team_id = r.team_id
     GROUP BY t.name, tr.path
    UNION ALL
    SELECT NULL, count(*), count(w.wait),
           count(*) FILTER (WHERE w.wait IS NULL AND w.state IN ('pending', 'nominated')),
           count(*) FILTER (WHERE w.wait IS NULL AND w.state NOT IN ('pending', 'nominated')),
           avg(w.wait), percentile_cont(0.5) WITHIN GROUP (ORDER BY w.wait),
           percentile_cont(0.95) WITHIN GROUP (ORDER BY w.wait), max(w.wait), NULL
      FROM w) x
 ORDER BY 1 NULLS LAST
$$;

DROP FUNCTION gangsched.preemption_summary(timestamptz, timestamptz);

-- Preemptions in [from, to), per team of the victims and for all teams
-- (team NULL): victims told to stop ('preempting' events), how they went
-- ('requeued' events: released by their agent, or killed at their grace
-- deadline), the work they lost (GPU-hours since their last checkpoint,
-- as recorded by the requeue), how many jobs of the team preempted
-- others ('nominated'), and the other requeues (node down, start timeout)
-- with their own lost work. by => 'subtree': a team's row sums its whole
-- subtree. path: the team's path in the tree (NULL on the all-teams row).
CREATE FUNCTION gangsched.preemption_summary("from" timestamptz, "to" timestamptz, by text DEFAULT 'team')
RETURNS TABLE (team text, preemptions bigint, released bigint, killed bigint, lost_gpu_hours float8,
               preemptors bigint, other_requeues bigint, other_lost_gpu_hours float8, path text)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._bucket_seconds($1, $2, $2 - $1);   -- refuses a bad window
SELECT gangsched._check_by($3);
WITH e AS MATERIALIZED (
    SELECT e.team_id, e.kind,
           CASE WHEN e.kind <> 'requeued' THEN NULL
                WHEN e.reason LIKE 'preempted for job %' THEN 'released'
                WHEN e.reason LIKE 'killed at its grace deadline%' THEN 'killed'
                ELSE 'other' END AS how,
           COALESCE((e.detail->>'lost_gpu_seconds')::float8, 0) AS lost
      FROM gangsched.events e
     WHERE e.at >= $1 AND e.at < $2 AND e.kind IN ('preempting', 'requeued', 'nominated')),
-- the events of teams that exist (as the join to teams always kept them)
et AS (SELECT e.* FROM e WHERE EXISTS (SELECT FROM gangsched.teams t WHERE t.id = e.team_id))
SELECT * FROM (
    SELECT t.name,
           count(*) FILTER (WHERE et.kind = 'preempting'),
           count(*) FILTER (WHERE et.how = 'released'),
           count(*) FILTER (WHERE et.how = 'killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how IN ('released', 'killed')), 0) / 3600,
           count(*) FILTER (WHERE et.kind = 'nominated'),
           count(*) FILTER (WHERE et.how = 'other'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how = 'other'), 0) / 3600,
           tr.path
      FROM et JOIN gangsched._rollup($3) r ON r.member = et.team_id
      JOIN gangsched.teams t ON t.id = r.team_id
      JOIN gangsched._team_tree tr ON tr.team_id = r.team_id
     GROUP BY t.name, tr.path
    UNION ALL
    SELECT NULL,
           count(*) FILTER (WHERE et.kind = 'preempting'),
           count(*) FILTER (WHERE et.how = 'released'),
           count(*) FILTER (WHERE et.how = 'killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how IN ('released', 'killed')), 0) / 3600,
           count(*) FILTER (WHERE et.kind = 'nominated'),
           count(*) FILTER (WHERE et.how = 'other'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how = 'other'), 0) / 3600,
           NULL
      FROM et) x
 ORDER BY 1 NULLS LAST
$$;

-- ==== pre12: cheaper agents' reports (issue 12: the replay's wall time) ====
-- a job's open allocations (ending them plans generically, 99_search_path.sql)
CREATE INDEX allocations_open_job_idx ON gangsched.allocations (job)
    WHERE upper_inf(during);
-- PL/pgSQL rather than SQL: its INSERT is planned once per session
CREATE OR REPLACE FUNCTION gangsched._event(kind text, job bigint, node_id int, team_id int, reason text, detail jsonb DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gangsched.events (at, kind, job, node_id, team_id, reason, detail)
    VALUES (gangsched.now(), _event.kind, _event.job, _event.node_id, _event.team_id, _event.reason, _event.detail);
END $$;

-- ==== time: time limits and backfill ====
-- Time limits (submit's time_limit, the teams' default and maximum,
-- gangsched.default_time_limit and gangsched.max_time_limit), the round's
-- time rule that stops and fails jobs past their limit, node_work's limit
-- columns, the queue's expected_start (backfill with time, in C), and the
-- jobs view's time_limit (docs/time.md).

-- A job's time limit: how long it may hold its capacity, counted from its
-- placement (placed_at). NULL: no limit. submit() stores the limit in
-- force (its own, else its team's default, else gangsched.default_time_limit),
-- so a later change of a default does not move a submitted job's limit.
ALTER TABLE gangsched.gangs ADD COLUMN time_limit interval
    CHECK (time_limit > '0'::interval AND time_limit <= '100 years'::interval);
-- the round's time rule reads the jobs that hold capacity under a limit
CREATE INDEX gangs_time_limit_idx ON gangsched.gangs (placed_at)
    WHERE state IN ('placed', 'running') AND time_limit IS NOT NULL;
ALTER TABLE gangsched.gangs_archive ADD COLUMN time_limit interval;

-- Per-team default and maximum; NULL takes gangsched.default_time_limit and
-- gangsched.max_time_limit.
ALTER TABLE gangsched.teams
    ADD COLUMN default_time_limit interval CHECK (default_time_limit > '0'::interval AND default_time_limit <= '100 years'::interval),
    ADD COLUMN max_time_limit interval CHECK (max_time_limit > '0'::interval AND max_time_limit <= '100 years'::interval);

-- A setting in seconds (GUC_UNIT_S) as an interval; NULL when 0 or unset.
CREATE FUNCTION gangsched._setting_interval(name text) RETURNS interval
LANGUAGE sql STABLE AS $$
    SELECT NULLIF(pg_catalog.current_setting(name, true), '')::interval
     WHERE COALESCE(NULLIF(pg_catalog.current_setting(name, true), '')::interval, '0'::interval) > '0'::interval
$$;

-- submit()'s time limit: the one asked for, else the team's default, else
-- gangsched.default_time_limit; 53S09 when the one asked for is above the
-- maximum (the team's, else gangsched.max_time_limit). A default above the
-- maximum is cut to it.
CREATE FUNCTION gangsched._resolve_time_limit(tid int, asked interval) RETURNS interval
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t   record;
    mx  interval;
    dflt interval;
BEGIN
    PERFORM gangsched._check_interval(asked, 'time_limit', false);
    SELECT name, default_time_limit, max_time_limit INTO t FROM gangsched.teams WHERE id = tid;
    mx := COALESCE(t.max_time_limit, gangsched._setting_interval('gangsched.max_time_limit'));
    IF asked IS NOT NULL THEN
        IF asked > mx THEN
            RAISE EXCEPTION 'time limit % is longer than team "%" may ask for', asked, t.name
                USING ERRCODE = '53S09',
                      DETAIL = format('Jobs of team "%s" may run for at most %s (%s).', t.name, mx,
                                      CASE WHEN t.max_time_limit IS NOT NULL THEN 'its own maximum'
                                           ELSE 'gangsched.max_time_limit' END),
                      HINT = format('Ask for at most %s, or ask the operator to raise the maximum with gangsched.set_team_time_limits().', mx);
        END IF;
        RETURN asked;
    END IF;
    dflt := COALESCE(t.default_time_limit, gangsched._setting_interval('gangsched.default_time_limit'));
    RETURN CASE WHEN dflt > mx THEN mx ELSE dflt END;
END $$;

-- Operator: a team's default and maximum time limit; NULL takes the
-- settings gangsched.default_time_limit and gangsched.max_time_limit.
CREATE FUNCTION gangsched.set_team_time_limits(team text, default_time_limit interval DEFAULT NULL,
                                               max_time_limit interval DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    PERFORM gangsched._require_operator('set a team''s time limits');
    PERFORM gangsched._check_interval(default_time_limit, 'default_time_limit', false);
    PERFORM gangsched._check_interval(max_time_limit, 'max_time_limit', false);
    IF default_time_limit > max_time_limit THEN
        RAISE EXCEPTION 'default time limit % is longer than the maximum %', default_time_limit, max_time_limit
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give a default no longer than the maximum, or NULL for the setting.';
    END IF;
    UPDATE gangsched.teams t SET default_time_limit = set_team_time_limits.default_time_limit,
                                 max_time_limit = set_team_time_limits.max_time_limit
     WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team time limits set',
                             jsonb_build_object('team', team, 'default_time_limit', default_time_limit,
                                                'max_time_limit', max_time_limit));
END $$;

-- End jobs stopped for their time limit (state 'preempting' with no
-- preemptor): allocations end, agents are told to kill, and the job fails
-- with reason 'time limit'; the work since its last checkpoint is lost.
CREATE FUNCTION gangsched._end_time_limited(jobs bigint[], how text, at timestamptz DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := COALESCE(at, gangsched.now());
    n int;
BEGIN
    IF jobs IS NULL OR cardinality(jobs) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM gangsched._end_allocations(jobs, 'time limit', 'kill', t);
    DELETE FROM gangsched.holds WHERE job = ANY (jobs);
    WITH o AS (
        SELECT g.id, gangsched._lost_gpu_seconds(g, t) AS lost FROM gangsched.gangs g
         WHERE g.id = ANY (jobs) AND g.state = 'preempting' AND g.preempted_for IS NULL),
    f AS (
        UPDATE gangsched.gangs g
           SET state = 'failed', finished_at = t, preempt_deadline = NULL, reason = 'time limit',
               message = how, lost_gpu_seconds = g.lost_gpu_seconds + o.lost
          FROM o
         WHERE g.id = o.id
        RETURNING g.id, g.team_id, g.time_limit, o.lost),
    e AS (
        INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
        SELECT t, 'failed', f.id, f.team_id, 'time limit',
               jsonb_build_object('time_limit', f.time_limit, 'how', how, 'lost_gpu_seconds', round(f.lost, 3))
          FROM f
        RETURNING job)
    SELECT count(pg_notify('gangsched_events', json_build_object('event', 'failed', 'job', e.job)::text))
      INTO n FROM e;
    RETURN n;
END $$;

-- The round's time rule for limits: jobs whose limit has passed get the
-- preemption signal with their grace (they checkpoint and release; a
-- 'time limit' event, not counted as a preemption by the metrics), and
-- those still holding capacity at that deadline are killed and fail with
-- reason 'time limit'. Returns how many were killed.
CREATE FUNCTION gangsched._enforce_time_limits() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t      timestamptz := gangsched.now();
    told   int;
    overdue bigint[];
BEGIN
    WITH s AS (
        UPDATE gangsched.gangs g
           SET state = 'preempting', preempted_for = NULL,
               preempt_deadline = t + LEAST(COALESCE(g.grace, pg_catalog.current_setting('gangsched.default_grace')::interval),
                                            pg_catalog.current_setting('gangsched.max_grace')::interval),
               reason = 'time limit'
         WHERE g.id IN (SELECT x.id FROM gangsched.gangs x
                         WHERE x.state IN ('placed', 'running') AND x.time_limit IS NOT NULL
                           AND x.placed_at + x.time_limit <= t
                         ORDER BY x.id FOR UPDATE SKIP LOCKED)
           AND g.state IN ('placed', 'running')
        RETURNING g.id, g.team_id, g.preempt_deadline, g.time_limit),
    ev AS (
        INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
        SELECT t, 'time limit', s.id, s.team_id, 'stopped at its time limit',
               jsonb_build_object('time_limit', s.time_limit, 'deadline', s.preempt_deadline)
          FROM s RETURNING 1)
    SELECT count(pg_notify('gangsched_node_' || a.node_id,
                           json_build_object('event', 'preempt', 'job', s.id, 'deadline', s.preempt_deadline,
                                             'reason', 'time limit')::text))
      INTO told
      FROM s JOIN (SELECT DISTINCT x.job, x.node_id FROM gangsched.allocations x
                    WHERE upper_inf(x.during) AND x.job IN (SELECT s.id FROM s)) a ON a.job = s.id;
    SELECT array_agg(l.id ORDER BY l.id) INTO overdue
      FROM (SELECT g.id FROM gangsched.gangs g
             WHERE g.state = 'preempting' AND g.preempted_for IS NULL AND g.preempt_deadline <= t
             ORDER BY g.id FOR UPDATE SKIP LOCKED) l;
    RETURN gangsched._end_time_limited(overdue, 'killed at the grace deadline after its time limit', t);
END $$;

DROP FUNCTION gangsched.submit(text, int, numeric, numeric, numeric, numeric, text, int, bool, text, int, text, int,
                               text, text, text, numeric, text, text, interval, interval, interval, text, bigint[], text);
CREATE FUNCTION gangsched.submit(team text, workers int, gpus numeric, cpus numeric DEFAULT 0,
                                 mem_gb numeric DEFAULT 0, net_gbps numeric DEFAULT 0, name text DEFAULT NULL,
                                 priority int DEFAULT 0, preemptible bool DEFAULT true, pool text DEFAULT NULL,
                                 group_size int DEFAULT 1, group_span text DEFAULT 'node', stages int DEFAULT 1,
                                 stage_span text DEFAULT NULL, span text DEFAULT NULL, gpu_model text DEFAULT NULL,
                                 gpu_mem_gb numeric DEFAULT NULL, dataset text DEFAULT NULL, locality text DEFAULT 'none',
                                 checkpoint_interval interval DEFAULT NULL, grace interval DEFAULT NULL,
                                 queue_timeout interval DEFAULT NULL, command text DEFAULT NULL,
                                 time_limit interval DEFAULT NULL,
                                 after bigint[] DEFAULT NULL, after_mode text DEFAULT 'ok')
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
    -- its own limit, else the team's or the global default; never above the maximum
    j.time_limit := gangsched._resolve_time_limit(j.team_id, time_limit);
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

    -- last, so the listed jobs are locked for the shortest time (58_dependencies.sql)
    IF after IS NOT NULL THEN
        SELECT c.after_jobs, c.waiting_for INTO j.after_jobs, j.waiting_for
          FROM gangsched._check_after(j.team_id, after, after_mode) c;
        j.after_mode := CASE WHEN j.after_jobs IS NOT NULL THEN after_mode END;
    END IF;
    INSERT INTO gangsched.gangs (team_id, name, workers, gpus, cpus, mem_gb, net_gbps, gpu_model, gpu_mem_gb,
                                priority, preemptible, pool_id, group_size, group_span, stages, stage_span, span,
                                dataset, locality, checkpoint_interval, grace, queue_timeout, command,
                                queue_pos, submitted_at, queued_at, time_limit, after_jobs, after_mode, waiting_for, reason)
    VALUES (j.team_id, name, workers, gpus, cpus, mem_gb, net_gbps, j.gpu_model, j.gpu_mem_gb,
            priority, preemptible, j.pool_id, group_size, j.group_span, stages, j.stage_span, j.span,
            dataset, locality, checkpoint_interval, grace, queue_timeout, command,
            nextval('gangsched.queue_position_seq'), gangsched.now(), gangsched.now(), j.time_limit,
            j.after_jobs, j.after_mode, j.waiting_for,
            CASE WHEN j.waiting_for IS NOT NULL THEN gangsched._waiting_reason(j.waiting_for, j.after_mode) END)
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



CREATE OR REPLACE FUNCTION gangsched._kill_overdue() RETURNS int
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
    PERFORM gangsched._place_ready_nominated();
    RETURN n;
END $$;

CREATE OR REPLACE FUNCTION gangsched.job_released(job bigint, checkpointed bool DEFAULT true) RETURNS void
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

DROP FUNCTION gangsched.node_work(text);

CREATE FUNCTION gangsched.node_work(node text)
RETURNS TABLE (job bigint, action text, state text, worker int, local_rank int, local_world_size int,
               world_size int, devices int[], first_slice int, slices int, cpus numeric, mem_gb numeric,
               net_gbps numeric, command text, rank0_node text, deadline timestamptz, placed_at timestamptz,
               gpus numeric, seconds_left float8, time_limit interval, limit_at timestamptz,
               limit_seconds_left float8)
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
           extract(epoch FROM g.preempt_deadline - gangsched.now())::float8,
           g.time_limit, g.placed_at + g.time_limit,
           extract(epoch FROM g.placed_at + g.time_limit - gangsched.now())::float8
      FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
     WHERE a.node_id = n.id AND upper_inf(a.during) AND g.state IN ('placed', 'running', 'preempting')
     ORDER BY a.job, a.worker;
END $$;

DROP VIEW gangsched.queue;
DROP FUNCTION gangsched._queue_visible();
DROP FUNCTION gangsched._queue();

CREATE FUNCTION gangsched._queue(OUT "position" int, OUT job bigint, OUT dominant_share float8,
                                 OUT would_borrow bool, OUT fits_now bool, OUT reason text,
                                 OUT las_queue int, OUT attained_gpu_seconds float8, OUT expected_start timestamptz)
RETURNS SETOF record LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_queue';

-- Pending jobs in the order the next round would try them, with the
-- weighted dominant share of the job's team when it is tried and whether it
-- would run on borrowed capacity (beyond its team's nominal quota); for the
-- jobs of a team whose order is las, its LAS queue and the GPU-seconds it
-- has held so far (NULL for other teams' jobs); for the job the
-- starvation guard keeps capacity for, when it is expected to start (from
-- the time limits of the jobs holding that capacity; NULL when unknown).
-- The rows of _queue() the caller may see (see the jobs view).
CREATE FUNCTION gangsched._queue_visible(OUT "position" int, OUT job bigint, OUT dominant_share float8,
                                         OUT would_borrow bool, OUT fits_now bool, OUT reason text,
                                         OUT las_queue int, OUT attained_gpu_seconds float8,
                                         OUT expected_start timestamptz)
RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v record := gangsched._visibility();
BEGIN
    RETURN QUERY
    SELECT q.position, q.job, q.dominant_share, q.would_borrow, q.fits_now, q.reason,
           q.las_queue, q.attained_gpu_seconds, q.expected_start
      FROM gangsched._queue() q
     WHERE v.all_rows OR (SELECT g.team_id FROM gangsched.gangs g WHERE g.id = q.job) = ANY (v.teams);
    -- jobs waiting for other jobs (58_dependencies.sql) are not in the
    -- queue yet: after it, without a position
    RETURN QUERY
    SELECT NULL::int, g.id, NULL::float8, NULL::bool, false, g.reason, NULL::int, NULL::float8, NULL::timestamptz
      FROM gangsched.gangs g
     WHERE g.waiting_for IS NOT NULL AND g.state = 'pending'
       AND (v.all_rows OR g.team_id = ANY (v.teams))
     ORDER BY g.id;
END $$;

CREATE VIEW gangsched.queue AS
SELECT q.position, q.job, t.name AS team, j.name, j.priority, j.workers, j.gpus, j.preemptible,
       round(q.dominant_share::numeric, 4) AS dominant_share, q.would_borrow, q.fits_now, q.reason,
       j.submitted_at, q.las_queue, q.attained_gpu_seconds,
       tt.path, tt.depth, tt.parent, q.expected_start
  FROM gangsched._queue_visible() q
  JOIN gangsched.gangs j ON j.id = q.job
  JOIN gangsched.teams t ON t.id = j.team_id
  JOIN gangsched._team_tree tt ON tt.team_id = j.team_id
 ORDER BY q.position NULLS LAST, q.job;

CREATE OR REPLACE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds, j.reason, j.message, j.queue_pos,
       CASE WHEN v.all_commands OR j.team_id = ANY (v.teams) THEN j.command END AS command,
       j.checkpoint_interval, j.grace, j.queue_timeout,
       j.after_jobs, j.after_mode, j.waiting_for, j.time_limit
  FROM gangsched._visibility() v
  JOIN gangsched.gangs j ON v.all_rows OR j.team_id = ANY (v.teams)
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id;

-- Analysts: requested against used time, per team (and a total row), of
-- the jobs with a time limit that ended in [from, to): the limit as
-- requested (its GPU-hours: limit × workers × gpus) against the time its
-- last placement held its capacity (placed_at to finished_at), and how many
-- were stopped at their limit. Jobs moved by archive_history() are not in
-- it.
CREATE FUNCTION gangsched.time_limit_use("from" timestamptz, "to" timestamptz)
RETURNS TABLE (team text, jobs bigint, stopped_at_limit bigint, requested_gpu_hours float8,
               used_gpu_hours float8, used_fraction float8, p50_used_fraction float8)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._bucket_seconds($1, $2, $2 - $1);   -- refuses a bad window
WITH j AS (
    SELECT g.team_id, g.reason = 'time limit' AND g.state = 'failed' AS stopped,
           date_part('epoch', g.time_limit) / 3600 * g.workers * g.gpus AS req,
           date_part('epoch', g.finished_at - g.placed_at) / 3600 * g.workers * g.gpus AS used,
           date_part('epoch', g.finished_at - g.placed_at) / date_part('epoch', g.time_limit) AS frac
      FROM gangsched.gangs g
     WHERE g.time_limit IS NOT NULL AND g.placed_at IS NOT NULL
       AND g.finished_at >= $1 AND g.finished_at < $2)
SELECT t.name, count(*), count(*) FILTER (WHERE j.stopped),
       sum(j.req), sum(j.used), sum(j.used) / NULLIF(sum(j.req), 0),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY j.frac)
  FROM j JOIN gangsched.teams t ON t.id = j.team_id
 GROUP BY GROUPING SETS ((t.name), ())
 ORDER BY t.name NULLS LAST
$$;

/* ------------------------------------------------------------------ */
-- ==== merge: objects more than one section above changed, as sql/src has them ====
/* ------------------------------------------------------------------ */
-- submit()'s per-team limits: 53S08 for a gang above the team's worker
-- limit, 53S07 when the team already has as many pending jobs as it may.
-- O(1) while the team is far from its pending limit (one index lookup and
-- a read of the sequence); near it, a count of the team's pending jobs on
-- gangs_team_idx, stopped at the limit.
CREATE OR REPLACE FUNCTION gangsched._check_team_limits(tid int, workers int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r       record;
    lim     int;
    seq     bigint;
    n       int;
BEGIN
    SELECT t.name, t.max_pending, t.max_workers_per_gang, c.pending, c.upto, c.counted_at,
           (SELECT s.last_value FROM gangsched.queue_position_seq s) AS seq, t.closed_at, t.closed_reason
      INTO r
      FROM gangsched.teams t LEFT JOIN gangsched.team_pending c ON c.team_id = t.id
     WHERE t.id = tid FOR KEY SHARE OF t;
    IF r.closed_at IS NOT NULL THEN
        RAISE EXCEPTION 'team "%" is closed to new work', r.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Closed at %s%s. Its queued jobs stay queued and are not placed; its running jobs run on.',
                                  r.closed_at, COALESCE(': ' || r.closed_reason, '')),
                  HINT = format('Ask the operator to reopen it with gangsched.open_team(%L).', r.name);
    END IF;
    -- jobs go to leaf teams (the row lock above orders this against
    -- add_team / set_team_parent making the team a parent)
    IF EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = tid) THEN
        RAISE EXCEPTION 'team "%" has subteams and takes no jobs of its own', r.name
            USING ERRCODE = '55S01',
                  DETAIL = format('Jobs go to leaf teams; the leaves under "%s" are: %s.', r.name,
                                  (SELECT string_agg(x.path, ', ' ORDER BY x.path) FROM gangsched._team_tree x
                                    WHERE x.leaf AND tid = ANY (x.ancestors))),
                  HINT = 'Submit to one of its leaf teams.';
    END IF;
    PERFORM gangsched._check_gang_limit(r.name, r.max_workers_per_gang, workers);
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

CREATE OR REPLACE VIEW gangsched.queue AS
SELECT q.position, q.job, t.name AS team, j.name, j.priority, j.workers, j.gpus, j.preemptible,
       round(q.dominant_share::numeric, 4) AS dominant_share, q.would_borrow, q.fits_now, q.reason,
       j.submitted_at, q.las_queue, q.attained_gpu_seconds,
       tt.path, tt.depth, tt.parent, q.expected_start
  FROM gangsched._queue_visible() q
  JOIN gangsched.gangs j ON j.id = q.job
  JOIN gangsched.teams t ON t.id = j.team_id
  JOIN gangsched._team_tree tt ON tt.team_id = j.team_id
 ORDER BY q.position NULLS LAST, q.job;
-- One row per violation; none when healthy. Numbers as in docs/invariants.md.
-- jit is off: the unnest/generate_series estimates make the plan look costly
-- enough to JIT-compile (seconds) although the rows are few.
CREATE OR REPLACE FUNCTION gangsched.check_invariants()
RETURNS TABLE (invariant int, job bigint, node text, detail text)
LANGUAGE sql STABLE SET jit = off AS $$
WITH cur AS (
    SELECT a.*, n.name AS node_name, n.topology
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)),
cur_slots AS (
    SELECT c.job, c.worker, c.node_id, s.device, s.slot
      FROM cur c, gangsched._slots(c.devices, c.first_slice, c.slices) s),
hist_slots AS (
    SELECT a.id, a.job, a.node_id, s.slot, a.during
      FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s),
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
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job
--    (victims still draining excepted: its own, or those of an earlier
--    preemptor of the same round whose rest it waits for, as its
--    'nominated' event records them in waits_for)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting'
            AND (v.preempted_for = h.job
                 OR EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(v.id))))
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2
                                      WHERE h2.node_id = c.node_id
                                        AND (h2.job = v.preempted_for
                                             OR EXISTS (SELECT FROM gangsched.events e
                                                         WHERE e.job = h2.job AND e.kind = 'nominated'
                                                           AND e.detail->'waits_for' @> to_jsonb(v.id)))))
              GROUP BY c.node_id) o ON o.node_id = h.node_id
 WHERE h.cpus + COALESCE(o.cpus, 0) > n.cpus OR h.mem + COALESCE(o.mem, 0) > n.mem_gb OR h.net + COALESCE(o.net, 0) > n.net_gbps
UNION ALL
SELECT 5, h.job, NULL, format('job holds capacity but is %s', j.state)
  FROM (SELECT DISTINCT job FROM gangsched.holds) h JOIN gangsched.gangs j ON j.id = h.job
 WHERE j.state <> 'nominated'
UNION ALL
SELECT 5, h.job, n.name, format('two nominated jobs hold slot %s', s.slot)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id,
       gangsched._slots(h.devices, h.first_slice, h.slices) s
 WHERE EXISTS (SELECT FROM gangsched.holds h2, gangsched._slots(h2.devices, h2.first_slice, h2.slices) s2
                WHERE h2.node_id = h.node_id AND h2.job < h.job AND s2.slot = s.slot)
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
UNION ALL
-- 8. dependencies: only pending jobs wait, and only for jobs of their own
--    team that they listed and that have not ended (58_dependencies.sql)
SELECT 8, g.id, NULL,
       CASE WHEN g.state <> 'pending' THEN format('job is %s but still waits for jobs %s', g.state, g.waiting_for)
            WHEN NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) THEN
                 format('job waits for jobs %s but listed only %s', g.waiting_for, COALESCE(g.after_jobs, '{}'))
            ELSE format('job waits for job %s, which %s', x.id,
                        CASE WHEN x.state IS NULL THEN 'does not exist'
                             WHEN x.team_id <> g.team_id THEN 'belongs to another team'
                             ELSE 'has ended (' || x.state || ')' END) END
  FROM gangsched.gangs g
  LEFT JOIN LATERAL (SELECT w.id, d.state, d.team_id FROM unnest(g.waiting_for) w(id)
                       LEFT JOIN gangsched.gangs d ON d.id = w.id
                      WHERE d.id IS NULL OR d.team_id <> g.team_id
                         OR d.state IN ('finished', 'failed', 'cancelled', 'expired')
                      ORDER BY w.id LIMIT 1) x ON true
 WHERE g.waiting_for IS NOT NULL
   AND (g.state <> 'pending' OR NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) OR x.id IS NOT NULL)
UNION ALL
-- 9. the team tree (docs/fairness.md, "Team trees"): every team is reached
--    from a top-level team (no cycle), only leaf teams have live jobs, and
--    the GPUs of the nearest quotas below a team's quota in a pool fit in it
SELECT 9, NULL, NULL, format('team %s is not reached from a top-level team (its parents form a cycle)', t.name)
  FROM gangsched.teams t
 WHERE NOT EXISTS (SELECT FROM gangsched._team_tree x WHERE x.team_id = t.id)
UNION ALL
SELECT 9, g.id, NULL, format('job of team %s, which has subteams, is %s', t.name, g.state)
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
   AND EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = g.team_id)
UNION ALL
SELECT 9, NULL, NULL, format('the teams below %s hold %s GPUs of nominal quota in pool %s, more than its %s',
                             pt.name, k.below, pl.name, pq.gpus)
  FROM (SELECT gangsched._quota_parent(q.team_id, q.pool_id) AS parent, q.pool_id, sum(q.gpus) AS below
          FROM gangsched.quotas q
          -- teams reached from the top only: a cycle is reported above,
          -- and walking up one would not end
          JOIN gangsched._team_tree t ON t.team_id = q.team_id
         WHERE t.parent_id IS NOT NULL
         GROUP BY 1, 2) k
  JOIN gangsched.quotas pq ON pq.team_id = k.parent AND pq.pool_id = k.pool_id
  JOIN gangsched.teams pt ON pt.id = k.parent
  JOIN gangsched.pools pl ON pl.id = k.pool_id
 WHERE k.below > pq.gpus
$$;


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

CREATE OR REPLACE FUNCTION gangsched.submit(team text, workers int, gpus numeric, cpus numeric DEFAULT 0,
                                 mem_gb numeric DEFAULT 0, net_gbps numeric DEFAULT 0, name text DEFAULT NULL,
                                 priority int DEFAULT 0, preemptible bool DEFAULT true, pool text DEFAULT NULL,
                                 group_size int DEFAULT 1, group_span text DEFAULT 'node', stages int DEFAULT 1,
                                 stage_span text DEFAULT NULL, span text DEFAULT NULL, gpu_model text DEFAULT NULL,
                                 gpu_mem_gb numeric DEFAULT NULL, dataset text DEFAULT NULL, locality text DEFAULT 'none',
                                 checkpoint_interval interval DEFAULT NULL, grace interval DEFAULT NULL,
                                 queue_timeout interval DEFAULT NULL, command text DEFAULT NULL,
                                 time_limit interval DEFAULT NULL,
                                 after bigint[] DEFAULT NULL, after_mode text DEFAULT 'ok')
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
    PERFORM gangsched._check_worker_shape(workers, gpus, cpus, mem_gb, net_gbps, group_size, stages);
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

    -- last, so the listed jobs are locked for the shortest time (58_dependencies.sql)
    IF after IS NOT NULL THEN
        SELECT c.after_jobs, c.waiting_for INTO j.after_jobs, j.waiting_for
          FROM gangsched._check_after(j.team_id, after, after_mode) c;
        j.after_mode := CASE WHEN j.after_jobs IS NOT NULL THEN after_mode END;
    END IF;
    INSERT INTO gangsched.gangs (team_id, name, workers, gpus, cpus, mem_gb, net_gbps, gpu_model, gpu_mem_gb,
                                priority, preemptible, pool_id, group_size, group_span, stages, stage_span, span,
                                dataset, locality, checkpoint_interval, grace, queue_timeout, command,
                                queue_pos, submitted_at, queued_at, time_limit, after_jobs, after_mode, waiting_for, reason)
    VALUES (j.team_id, name, workers, gpus, cpus, mem_gb, net_gbps, j.gpu_model, j.gpu_mem_gb,
            priority, preemptible, j.pool_id, group_size, j.group_span, stages, j.stage_span, j.span,
            dataset, locality, checkpoint_interval, grace, queue_timeout, command,
            nextval('gangsched.queue_position_seq'), gangsched.now(), gangsched.now(), j.time_limit,
            j.after_jobs, j.after_mode, j.waiting_for,
            CASE WHEN j.waiting_for IS NOT NULL THEN gangsched._waiting_reason(j.waiting_for, j.after_mode) END)
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

-- A pending job asks for another number of workers, or other GPUs per
-- worker: it keeps its id, queue position and submit time, the request is
-- checked as submit checks it (same SQLSTATEs; nothing changes when a check
-- fails), and a 'resized' event records both shapes. Only a pending job
-- can be resized: a round that read the old shape places or nominates the
-- job only if its shape is still the one it chose for (src/round.c), so a
-- resize racing a round never leaves a job holding the wrong number of
-- workers.
CREATE OR REPLACE FUNCTION gangsched.resize(job bigint, workers int DEFAULT NULL, gpus numeric DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j    gangsched.gangs;
    t    record;
    nw   int;
    ng   numeric;
    ow   int;
    og   numeric;
BEGIN
    -- the role check comes before the row lock: a refused caller locks nothing
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job;
    IF j.id IS NULL THEN
        RAISE EXCEPTION 'job % does not exist', job
            USING ERRCODE = 'foreign_key_violation', HINT = 'See gangsched.jobs for the job ids.';
    END IF;
    PERFORM gangsched._require_team(j.team_id, format('resize job %s', job));
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job FOR UPDATE;
    IF j.state <> 'pending' THEN
        RAISE EXCEPTION 'job % is %, and only a pending job can be resized', job, j.state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN j.state = 'nominated' THEN 'Its victims are already releasing capacity for its present shape.'
                                WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'It has ended.'
                                ELSE 'It holds capacity for its present shape.' END,
                  HINT = CASE WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'Submit a new job with the shape you need.'
                              ELSE 'Cancel it and submit it again with the shape you need.' END;
    END IF;
    ow := j.workers;
    og := j.gpus;
    nw := COALESCE(workers, ow);
    ng := COALESCE(gpus, og);
    IF nw = ow AND ng = og THEN
        RETURN;
    END IF;
    -- the request, checked as submit checks it (sql/src/50_jobs.sql)
    IF nw < 1 THEN
        RAISE EXCEPTION 'workers must be at least 1, not %', nw
            USING ERRCODE = 'invalid_parameter_value', HINT = 'A gang has one or more workers.';
    END IF;
    PERFORM gangsched._check_amount(ng, 'gpus', false, 64);
    PERFORM gangsched._check_worker_shape(nw, ng, j.cpus, j.mem_gb, j.net_gbps, j.group_size, j.stages);
    SELECT tm.name, tm.max_workers_per_gang INTO t FROM gangsched.teams tm WHERE tm.id = j.team_id;
    PERFORM gangsched._check_gang_limit(t.name, t.max_workers_per_gang, nw);
    j.workers := nw;
    j.gpus := ng;
    j.gpu_model := CASE WHEN ng > 0 THEN j.gpu_model END;
    j.gpu_mem_gb := CASE WHEN ng > 0 THEN j.gpu_mem_gb END;
    IF NOT gangsched._admit_fast(j) THEN
        PERFORM gangsched._admit(j);
    END IF;
    UPDATE gangsched.gangs g
       SET workers = nw, gpus = ng, gpu_model = j.gpu_model, gpu_mem_gb = j.gpu_mem_gb,
           reason = CASE WHEN g.waiting_for IS NULL THEN NULL ELSE g.reason END
     WHERE g.id = resize.job;
    PERFORM gangsched._event('resized', job, NULL, j.team_id,
                             format('%s workers × %s GPUs, was %s × %s', nw, ng, ow, og),
                             jsonb_build_object('workers', nw, 'gpus', ng, 'was_workers', ow, 'was_gpus', og));
    PERFORM gangsched._wake();
END $$;


-- ==== metrics: a cheaper read of gangsched.metrics (issue 18) ====
-- No SQL object changes: gangsched.metric_series() reads gangs_live_idx's and
-- allocations_current_idx's leaf pages itself (src/metrics.c), whose
-- definitions (sql/src/10_schema.sql) stay as the mfast section left them.
-- ==== resv: advance reservations and maintenance windows (issue 16; sql/src/17_reservations_schema.sql, 73_reservations.sql) ====
-- The bookings table, jobs' reservation_id (and the archive's), the
-- booking functions, the round's rule, the reservations view and
-- reservation_usage(); submit() gains reservation; invariant 10.
/* ------------------------------------------------------------------ */
/* Advance reservations and maintenance windows: the tables           */
/* (docs/time.md#advance-reservations; the rest in 73_reservations.sql) */
/* ------------------------------------------------------------------ */

-- Capacity booked ahead: whole nodes, chosen at creation, from `starts`
-- until `ends`. A reservation (team_id set) gives them to its team's jobs
-- and to jobs that name it; a maintenance window (team_id NULL) to no job.
-- Two rows never share a node at overlapping times (add_reservation and
-- add_maintenance refuse it, 23P01). `started` and `ended` record that a
-- round applied the start and the end (events, and a maintenance window's
-- node states); a dropped reservation that had started keeps its row with
-- `ends` cut to the drop, so its use stays in the history.
CREATE TABLE gangsched.bookings (
    id          int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    team_id     int REFERENCES gangsched.teams,
    target      text NOT NULL,
    node_ids    int[] NOT NULL CHECK (cardinality(node_ids) > 0),
    gpus        int NOT NULL CHECK (gpus >= 0),
    starts      timestamptz NOT NULL,
    ends        timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    started     bool NOT NULL DEFAULT false,
    ended       bool NOT NULL DEFAULT false,
    -- maintenance: each node's state when the window started, by node id,
    -- restored at its end when the node is still down
    restore     jsonb,
    CHECK (ends > starts)
);
-- rounds probe for a reservation not yet ended (one probe, an empty index
-- when there is none)
CREATE INDEX bookings_live_idx ON gangsched.bookings (starts) WHERE NOT ended;

-- A job may name a reservation (submit(..., reservation)): it runs only on
-- the reservation's nodes while it is active. No foreign key: a dropped
-- reservation's jobs become ordinary jobs of their team.
ALTER TABLE gangsched.gangs ADD COLUMN reservation_id int;
ALTER TABLE gangsched.gangs_archive ADD COLUMN reservation_id int;
/* ------------------------------------------------------------------ */
/* Advance reservations and maintenance windows (docs/time.md)         */
/* ------------------------------------------------------------------ */

-- The table is gangsched.bookings (17_reservations_schema.sql); the round
-- honours it in C (src/schedule.c: gs_reservation_masks) and applies its
-- starts and ends with _reservation_rules() below.

-- The nodes a booking asks for, in topology order: a node list, or a pool,
-- a topology domain (a topology prefix such as 'z1.r2') or both. Refuses
-- anything else; every listed node must exist.
CREATE FUNCTION gangsched._booking_target(pool text, nodes text[], domain text,
                                          OUT target text, OUT node_ids int[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    pid  int;
    k    int;
    nm   text;
BEGIN
    IF nodes IS NOT NULL AND (pool IS NOT NULL OR domain IS NOT NULL) THEN
        RAISE EXCEPTION 'give a node list or a pool and domain, not both'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A node list names the nodes; a pool or a topology domain names the nodes inside it.',
                  HINT = 'Pass nodes => ARRAY[...] alone, or pool => and/or domain =>.';
    END IF;
    IF nodes IS NULL AND pool IS NULL AND domain IS NULL THEN
        RAISE EXCEPTION 'no capacity named'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name a pool (pool =>), a topology domain (domain =>, e.g. ''z1.r2'') or the nodes (nodes => ARRAY[...]).';
    END IF;
    IF nodes IS NOT NULL THEN
        IF cardinality(nodes) = 0 OR cardinality(nodes) > 10000 THEN
            RAISE EXCEPTION 'a node list has 1 to 10000 nodes, not %', cardinality(nodes)
                USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the nodes to book, or book a pool or a domain.';
        END IF;
        FOREACH nm IN ARRAY nodes LOOP
            PERFORM gangsched._node(nm);    -- 23503 for an unknown node
        END LOOP;
        SELECT array_agg(n.id ORDER BY n.pool_id, n.topology, n.name) INTO node_ids
          FROM gangsched.nodes n WHERE n.name = ANY (nodes);
        target := 'nodes ' || array_to_string(ARRAY(SELECT DISTINCT x FROM unnest(nodes) x ORDER BY 1), ',');
        RETURN;
    END IF;
    IF pool IS NOT NULL THEN
        pid := gangsched._pool_id(pool);
    END IF;
    IF domain IS NOT NULL THEN
        IF domain !~ '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$' OR length(domain) > 1000 THEN
            RAISE EXCEPTION 'invalid topology domain %', gangsched._shown(domain)
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'A domain is a topology prefix: labels separated by dots, outermost first.',
                      HINT = 'Use a prefix of the nodes'' topology, such as ''z1'' or ''z1.r2''.';
        END IF;
        k := cardinality(string_to_array(domain, '.'));
    END IF;
    SELECT array_agg(n.id ORDER BY n.pool_id, n.topology, n.name) INTO node_ids
      FROM gangsched.nodes n
     WHERE (pid IS NULL OR n.pool_id = pid)
       AND (k IS NULL OR (gangsched._nlevel(n.topology) >= k
                          AND gangsched._subpath(n.topology, 0, k)::text = domain));
    IF node_ids IS NULL THEN
        RAISE EXCEPTION 'no node in %', concat_ws(' ', 'pool ' || quote_literal(pool), 'domain ' || quote_literal(domain))
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'See gangsched.nodes for the pools and topologies.';
    END IF;
    target := concat_ws(' ', 'pool ' || pool, 'domain ' || domain);
END $$;

-- Book capacity: a reservation (tid set) or a maintenance window (tid
-- NULL). Whole nodes: all of the target's, or (gpus given) the first of
-- its nodes in topology order that no other booking holds at an
-- overlapping time, until they have `gpus` GPUs. Refuses a window that
-- overlaps another booking of one of those nodes (23P01).
CREATE FUNCTION gangsched._add_booking(kind text, name text, tid int, pool text, nodes text[], domain text,
                                       gpus int, starts timestamptz, ends timestamptz) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t      timestamptz := gangsched.now();
    tg     record;
    busy   record;
    chosen int[];
    got    int;
    total  int;
    id     int;
BEGIN
    PERFORM gangsched._check_name(name, kind || ' name');
    IF starts IS NULL OR ends IS NULL THEN
        RAISE EXCEPTION 'a % needs starts and ends', kind
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Give starts => and ends => as timestamps.';
    END IF;
    IF starts = '-infinity' OR ends = 'infinity' OR ends <= starts THEN
        RAISE EXCEPTION '% window [%, %) is empty or unbounded', kind, starts, ends
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give finite times with ends after starts.';
    END IF;
    IF ends <= t THEN
        RAISE EXCEPTION '% window ends at %, before now (%)', kind, ends, t
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A booking for the past holds nothing.',
                  HINT = 'Give an end after gangsched.now().';
    END IF;
    IF gpus IS NOT NULL AND (gpus < 1 OR gpus > 1000000) THEN
        RAISE EXCEPTION 'gpus must be 1 to 1000000, not %', gpus
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = 'Leave gpus out to book every node of the target.';
    END IF;
    -- one booking at a time, and no round in progress: a round that read
    -- the bookings before this commits could place work it forbids
    LOCK TABLE gangsched.round_lock IN EXCLUSIVE MODE;
    LOCK TABLE gangsched.bookings IN SHARE ROW EXCLUSIVE MODE;
    IF EXISTS (SELECT FROM gangsched.bookings b WHERE b.name = _add_booking.name) THEN
        RAISE EXCEPTION 'a reservation or maintenance window named "%" already exists', name
            USING ERRCODE = 'unique_violation',
                  HINT = 'Choose another name, or drop the old one with gangsched.drop_reservation().';
    END IF;
    IF (SELECT count(*) FROM gangsched.bookings b WHERE NOT b.ended AND b.ends > t) >= 64 THEN
        RAISE EXCEPTION 'too many reservations and maintenance windows'
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = 'A round honours at most 64 current or future reservations and maintenance windows.',
                  HINT = 'Drop one with gangsched.drop_reservation(), or book wider ones.';
    END IF;
    -- a window that began in the past begins now: nothing placed before
    -- this booking is counted against it
    starts := GREATEST(starts, t);
    tg := gangsched._booking_target(pool, nodes, domain);
    IF _add_booking.gpus IS NULL THEN
        SELECT b.name, b.starts, b.ends, n.name AS node INTO busy
          FROM gangsched.bookings b JOIN gangsched.nodes n ON n.id = ANY (b.node_ids)
         WHERE n.id = ANY (tg.node_ids) AND b.starts < _add_booking.ends AND b.ends > _add_booking.starts
         ORDER BY b.starts, n.name LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION '% "%" overlaps "%" on node %', kind, name, busy.name, busy.node
                USING ERRCODE = 'exclusion_violation',
                      DETAIL = format('"%s" books node %s from %s to %s; a node belongs to one booking at a time.',
                                      busy.name, busy.node, busy.starts, busy.ends),
                      HINT = 'Book other nodes, another time, fewer GPUs (gpus =>), or drop the other booking first.';
        END IF;
        chosen := tg.node_ids;
    ELSE
        WITH c AS (
            SELECT n.id, n.gpus, ord.i,
                   sum(n.gpus) OVER (ORDER BY ord.i) - n.gpus AS before
              FROM unnest(tg.node_ids) WITH ORDINALITY ord(nid, i)
              JOIN gangsched.nodes n ON n.id = ord.nid
             WHERE n.gpus > 0
               AND NOT EXISTS (SELECT FROM gangsched.bookings b
                                WHERE n.id = ANY (b.node_ids)
                                  AND b.starts < _add_booking.ends AND b.ends > _add_booking.starts))
        SELECT array_agg(c.id ORDER BY c.i) FILTER (WHERE c.before < _add_booking.gpus),
               COALESCE(sum(c.gpus), 0)
          INTO chosen, got
          FROM c;
        IF got < _add_booking.gpus THEN
            SELECT COALESCE(sum(n.gpus), 0) INTO total FROM gangsched.nodes n WHERE n.id = ANY (tg.node_ids);
            IF total < _add_booking.gpus THEN
                RAISE EXCEPTION '% "%" asks for % GPUs; % has %', kind, name, gpus, tg.target, total
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Ask for fewer GPUs, or name a larger target.';
            END IF;
            SELECT string_agg(DISTINCT b.name, ', ' ORDER BY b.name) AS names INTO busy
              FROM gangsched.bookings b
             WHERE b.node_ids && tg.node_ids AND b.starts < _add_booking.ends AND b.ends > _add_booking.starts;
            RAISE EXCEPTION '% "%" cannot have % GPUs of % from % to %', kind, name, gpus, tg.target, starts, ends
                USING ERRCODE = 'exclusion_violation',
                      DETAIL = format('%s of its %s GPUs are on nodes that %s book%s at an overlapping time; %s are left.',
                                      total - got, total, busy.names, CASE WHEN busy.names LIKE '%,%' THEN '' ELSE 's' END, got),
                      HINT = 'Ask for fewer GPUs, book another time or target, or drop the other booking first.';
        END IF;
    END IF;
    INSERT INTO gangsched.bookings (name, team_id, target, node_ids, gpus, starts, ends, created_at)
    VALUES (name, tid, tg.target, chosen,
            (SELECT COALESCE(sum(n.gpus), 0) FROM gangsched.nodes n WHERE n.id = ANY (chosen)),
            starts, ends, t)
    RETURNING bookings.id INTO id;
    PERFORM gangsched._event(kind, NULL, NULL, tid, 'created',
                             gangsched._booking_detail(id));
    RETURN id;
END $$;

-- A booking as an event's detail: its name, team, nodes, GPUs and window.
CREATE FUNCTION gangsched._booking_detail(bid int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('name', b.name, 'team', t.name, 'target', b.target,
                              'nodes', ARRAY(SELECT n.name FROM gangsched.nodes n
                                              WHERE n.id = ANY (b.node_ids) ORDER BY n.name),
                              'gpus', b.gpus, 'starts', b.starts, 'ends', b.ends)
      FROM gangsched.bookings b LEFT JOIN gangsched.teams t ON t.id = b.team_id
     WHERE b.id = bid
$$;

-- Operator: from `starts` until `ends` the capacity belongs to the team's
-- jobs (its subtree's, for an inner team) and to jobs that name the
-- reservation; before `starts` other jobs use it only when their time
-- limit ends by then. Returns the reservation's id.
CREATE FUNCTION gangsched.add_reservation(name text, team text, pool text DEFAULT NULL, nodes text[] DEFAULT NULL,
                                          domain text DEFAULT NULL, gpus int DEFAULT NULL,
                                          starts timestamptz DEFAULT NULL, ends timestamptz DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gangsched._require_operator('add a reservation');
    RETURN gangsched._add_booking('reservation', name, gangsched._team_id(team), pool, nodes, domain, gpus, starts, ends);
END $$;

-- Operator: a maintenance window: no job may use the nodes from `starts`
-- until `ends`; they go down at the start and back to their state at the
-- end. Returns its id.
CREATE FUNCTION gangsched.add_maintenance(name text, pool text DEFAULT NULL, nodes text[] DEFAULT NULL,
                                          domain text DEFAULT NULL,
                                          starts timestamptz DEFAULT NULL, ends timestamptz DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gangsched._require_operator('add a maintenance window');
    RETURN gangsched._add_booking('maintenance', name, NULL, pool, nodes, domain, NULL, starts, ends);
END $$;

-- A booking's end: its event and, for a maintenance window, its nodes back
-- to the state they had at its start when they are still down.
CREATE FUNCTION gangsched._booking_end(bid int, t timestamptz, why text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    b  gangsched.bookings;
    n  record;
BEGIN
    UPDATE gangsched.bookings x SET ended = true WHERE x.id = bid AND NOT x.ended RETURNING * INTO b;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF b.team_id IS NULL AND b.started THEN
        FOR n IN SELECT nd.id, nd.name, nd.state, b.restore ->> nd.id::text AS before
                   FROM gangsched.nodes nd
                  WHERE nd.id = ANY (b.node_ids) AND nd.state = 'down'
                    AND b.restore ->> nd.id::text IN ('up', 'draining')
                  ORDER BY nd.id FOR UPDATE OF nd LOOP
            UPDATE gangsched.nodes SET state = n.before, state_since = t, down_by_timeout = false WHERE id = n.id;
            INSERT INTO gangsched.events (at, kind, node_id, reason, detail)
            VALUES (t, 'node_state', n.id, format('down -> %s', n.before),
                    jsonb_build_object('node', n.name, 'maintenance', b.name));
        END LOOP;
    END IF;
    INSERT INTO gangsched.events (at, kind, team_id, reason, detail)
    VALUES (t, CASE WHEN b.team_id IS NULL THEN 'maintenance' ELSE 'reservation' END, b.team_id, why,
            gangsched._booking_detail(bid));
END $$;

-- Operator: drop a reservation or maintenance window. One that has not
-- started is removed; one in progress ends now (a maintenance window's
-- nodes go back to their state) and stays in the history; one that has
-- ended is removed from the view and from reservation_usage().
CREATE FUNCTION gangsched.drop_reservation(name text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t  timestamptz := gangsched.now();
    b  gangsched.bookings;
    kind text;
BEGIN
    PERFORM gangsched._require_operator('drop a reservation');
    LOCK TABLE gangsched.round_lock IN EXCLUSIVE MODE;
    SELECT * INTO b FROM gangsched.bookings x WHERE x.name = drop_reservation.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reservation "%" does not exist', name
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'See gangsched.reservations for the reservations and maintenance windows.';
    END IF;
    kind := CASE WHEN b.team_id IS NULL THEN 'maintenance' ELSE 'reservation' END;
    IF b.started AND NOT b.ended AND b.ends > t AND t > b.starts THEN
        UPDATE gangsched.bookings x SET ends = t WHERE x.id = b.id;
        PERFORM gangsched._booking_end(b.id, t, 'dropped');
        RETURN;
    END IF;
    IF b.started AND NOT b.ended THEN
        PERFORM gangsched._booking_end(b.id, t, 'dropped');
    ELSIF NOT b.ended THEN
        PERFORM gangsched._event(kind, NULL, NULL, b.team_id, 'dropped', gangsched._booking_detail(b.id));
    END IF;
    DELETE FROM gangsched.bookings x WHERE x.id = b.id;
    PERFORM gangsched._wake();
END $$;

-- The round's time rule for bookings (src/round.c calls it only when some
-- booking has not ended): starts and ends are recorded once, with their
-- events; a maintenance window's nodes go draining when jobs without a
-- limit are no longer placed there (gangsched.maintenance_guard before
-- the start: only an event, the node stays up for jobs that end in time),
-- draining then down at the start (their jobs requeued, as
-- set_node_state(..., 'down') does) and back at the end. Returns how many
-- starts and ends it applied.
CREATE FUNCTION gangsched._reservation_rules() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t      timestamptz := gangsched.now();
    guard  interval := COALESCE(gangsched._setting_interval('gangsched.maintenance_guard'), '0'::interval);
    b      gangsched.bookings;
    n      record;
    jobs   bigint[];
    k      int := 0;
BEGIN
    FOR b IN SELECT * FROM gangsched.bookings x
              WHERE NOT x.ended AND (x.starts <= t OR x.ends <= t
                                     OR (x.team_id IS NULL AND x.restore IS NULL AND x.starts - guard <= t))
              ORDER BY x.starts, x.id FOR UPDATE LOOP
        IF b.team_id IS NULL AND b.restore IS NULL THEN
            -- the drain: from now jobs without a limit are kept off its nodes
            UPDATE gangsched.bookings x SET restore = '{}' WHERE x.id = b.id;
            INSERT INTO gangsched.events (at, kind, reason, detail)
            VALUES (t, 'maintenance', 'draining', gangsched._booking_detail(b.id));
        END IF;
        IF NOT b.started AND b.starts <= t THEN
            k := k + 1;
            IF b.team_id IS NULL THEN
                -- the nodes' states now, restored at the end; up -> draining -> down
                UPDATE gangsched.bookings x
                   SET restore = (SELECT jsonb_object_agg(nd.id::text, nd.state) FROM gangsched.nodes nd
                                   WHERE nd.id = ANY (b.node_ids))
                 WHERE x.id = b.id;
                FOR n IN SELECT nd.id, nd.name, nd.state FROM gangsched.nodes nd
                          WHERE nd.id = ANY (b.node_ids) AND nd.state <> 'down'
                          ORDER BY nd.id FOR UPDATE LOOP
                    UPDATE gangsched.nodes SET state = 'down', state_since = t, down_by_timeout = false WHERE id = n.id;
                    INSERT INTO gangsched.events (at, kind, node_id, reason, detail)
                    SELECT t, 'node_state', n.id, s.reason, jsonb_build_object('node', n.name, 'maintenance', b.name)
                      FROM (VALUES (1, 'up -> draining'), (2, 'draining -> down')) s(i, reason)
                     WHERE n.state = 'draining' AND s.i = 2 OR n.state = 'up'
                     ORDER BY s.i;
                    SELECT array_agg(l.id ORDER BY l.id) INTO jobs
                      FROM (SELECT g.id FROM gangsched.gangs g
                             WHERE g.id IN (SELECT a.job FROM gangsched.allocations a
                                             WHERE a.node_id = n.id AND upper_inf(a.during)
                                            UNION
                                            SELECT h.job FROM gangsched.holds h WHERE h.node_id = n.id)
                             ORDER BY g.id FOR UPDATE) l;
                    PERFORM gangsched._requeue_many(jobs, format('node %s went down for maintenance %s', n.name, b.name));
                END LOOP;
            END IF;
            UPDATE gangsched.bookings x SET started = true WHERE x.id = b.id;
            INSERT INTO gangsched.events (at, kind, team_id, reason, detail)
            VALUES (t, CASE WHEN b.team_id IS NULL THEN 'maintenance' ELSE 'reservation' END, b.team_id,
                    'started', gangsched._booking_detail(b.id));
        END IF;
        IF b.ends <= t THEN
            k := k + 1;
            UPDATE gangsched.bookings x SET started = true WHERE x.id = b.id;
            PERFORM gangsched._booking_end(b.id, t, 'ended');
        END IF;
    END LOOP;
    RETURN k;
END $$;

-- Every reservation and maintenance window not dropped: state future
-- (before its start), active, or ended, by the scheduler's clock.
CREATE VIEW gangsched.reservations AS
SELECT b.name,
       CASE WHEN b.team_id IS NULL THEN 'maintenance' ELSE 'reservation' END AS kind,
       t.name AS team,
       b.target,
       ARRAY(SELECT n.name FROM gangsched.nodes n WHERE n.id = ANY (b.node_ids) ORDER BY n.name) AS nodes,
       b.gpus,
       b.starts,
       b.ends,
       CASE WHEN gangsched.now() < b.starts THEN 'future'
            WHEN gangsched.now() < b.ends THEN 'active'
            ELSE 'ended' END AS state,
       b.created_at
  FROM gangsched.bookings b LEFT JOIN gangsched.teams t ON t.id = b.team_id;

-- submit()'s reservation: its id. The reservation must exist, not be a
-- maintenance window, not have ended, and a portal may name only one of a
-- team it acts for.
CREATE FUNCTION gangsched._submit_reservation(reservation text) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    b gangsched.bookings;
BEGIN
    SELECT * INTO b FROM gangsched.bookings x WHERE x.name = reservation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reservation "%" does not exist', reservation
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'See gangsched.reservations for the reservations.';
    END IF;
    IF b.team_id IS NULL THEN
        RAISE EXCEPTION '"%" is a maintenance window, not a reservation', reservation
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'No job may use the nodes of a maintenance window while it lasts.',
                  HINT = 'Submit without a reservation, or name a reservation.';
    END IF;
    IF b.ends <= gangsched.now() THEN
        RAISE EXCEPTION 'reservation "%" ended at %', reservation, b.ends
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Submit without a reservation, or name one that has not ended.';
    END IF;
    PERFORM gangsched._require_team(b.team_id, format('submit into reservation "%s"', reservation));
    RETURN b.id;
END $$;

-- Analysts: each reservation's booked GPU-hours against those its team's
-- jobs (and jobs that named it) used on its nodes inside its window, up to
-- now for an active one; other_gpu_hours are other jobs' allocations there
-- (jobs placed before it was created, which it does not stop). Maintenance
-- windows are not listed. Allocations moved by archive_history() are not
-- counted.
CREATE FUNCTION gangsched.reservation_usage()
RETURNS TABLE (name text, team text, state text, starts timestamptz, ends timestamptz, booked_gpu_hours float8,
               used_gpu_hours float8, used_fraction float8, other_gpu_hours float8)
LANGUAGE sql STABLE SET jit = off AS $$
WITH RECURSIVE b AS (
    SELECT x.*, LEAST(x.ends, GREATEST(x.starts, gangsched.now())) AS upto
      FROM gangsched.bookings x WHERE x.team_id IS NOT NULL),
sub(bid, tid) AS (
    SELECT b.id, b.team_id FROM b
    UNION
    SELECT sub.bid, t.id FROM sub JOIN gangsched.teams t ON t.parent_id = sub.tid),
u AS (
    SELECT b.id,
           sum(a.gpus::float8 * date_part('epoch', LEAST(COALESCE(upper(a.during), b.upto), b.upto)
                                                 - GREATEST(lower(a.during), b.starts)) / 3600)
               FILTER (WHERE g.reservation_id = b.id OR EXISTS (SELECT FROM sub WHERE sub.bid = b.id AND sub.tid = g.team_id))
               AS own,
           sum(a.gpus::float8 * date_part('epoch', LEAST(COALESCE(upper(a.during), b.upto), b.upto)
                                                 - GREATEST(lower(a.during), b.starts)) / 3600)
               FILTER (WHERE NOT (g.reservation_id IS NOT DISTINCT FROM b.id
                                  OR EXISTS (SELECT FROM sub WHERE sub.bid = b.id AND sub.tid = g.team_id)))
               AS other
      FROM b
      JOIN gangsched.allocations a ON a.node_id = ANY (b.node_ids)
                                  AND lower(a.during) < b.upto AND COALESCE(upper(a.during), 'infinity') > b.starts
      JOIN gangsched.gangs g ON g.id = a.job
     GROUP BY b.id)
SELECT b.name, t.name,
       CASE WHEN gangsched.now() < b.starts THEN 'future' WHEN gangsched.now() < b.ends THEN 'active' ELSE 'ended' END,
       b.starts, b.ends,
       b.gpus::float8 * date_part('epoch', b.ends - b.starts) / 3600,
       COALESCE(u.own, 0),
       COALESCE(u.own, 0) / NULLIF(b.gpus::float8 * date_part('epoch', b.ends - b.starts) / 3600, 0),
       COALESCE(u.other, 0)
  FROM b JOIN gangsched.teams t ON t.id = b.team_id LEFT JOIN u ON u.id = b.id
 ORDER BY b.starts, b.name
$$;

DROP FUNCTION gangsched.submit(text, int, numeric, numeric, numeric, numeric, text, int, bool, text, int, text, int,
                               text, text, text, numeric, text, text, interval, interval, interval, text, interval,
                               bigint[], text);
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
                                 reservation text DEFAULT NULL)
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
    PERFORM gangsched._check_worker_shape(workers, gpus, cpus, mem_gb, net_gbps, group_size, stages);
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
    -- goes through the SQL checks, which raise the precise error
    IF NOT gangsched._admit_fast(j) THEN
        PERFORM gangsched._admit(j);
    END IF;

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
                                reservation_id)
    VALUES (j.team_id, name, workers, gpus, cpus, mem_gb, net_gbps, j.gpu_model, j.gpu_mem_gb,
            priority, preemptible, j.pool_id, group_size, j.group_span, stages, j.stage_span, j.span,
            dataset, locality, checkpoint_interval, grace, queue_timeout, command,
            nextval('gangsched.queue_position_seq'), gangsched.now(), gangsched.now(), j.time_limit,
            j.after_jobs, j.after_mode, j.waiting_for,
            CASE WHEN j.waiting_for IS NOT NULL THEN gangsched._waiting_reason(j.waiting_for, j.after_mode) END,
            j.reservation_id)
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


CREATE OR REPLACE FUNCTION gangsched.remove_team(team text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid  int := gangsched._team_id(team);
    live bigint;
    hist bigint;
BEGIN
    PERFORM FROM gangsched.teams t WHERE t.id = tid FOR UPDATE;
    SELECT count(*) FILTER (WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')),
           count(*)
      INTO live, hist
      FROM gangsched.gangs g WHERE g.team_id = tid;
    IF live > 0 THEN
        RAISE EXCEPTION 'team "%" has % live jobs', team, live
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'A team is removed only when none of its jobs is pending, nominated, placed, running or preempting.',
                  HINT = format('Close it with gangsched.close_team(%L) so it takes no new work, cancel or wait for its jobs, then remove it.', team);
    END IF;
    IF hist > 0 THEN
        RAISE EXCEPTION 'team "%" still has % ended jobs in the history', team, hist
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'The allocation history and the analysts'' views name the team of every job they keep.',
                  HINT = 'Move them to the archive first with gangsched.archive_history(before); a closed team takes no new work meanwhile.';
    END IF;
    IF EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = tid) THEN
        RAISE EXCEPTION 'team "%" has subteams', team
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('Its children are: %s.', (SELECT string_agg(c.name, ', ' ORDER BY c.name)
                                                             FROM gangsched.teams c WHERE c.parent_id = tid)),
                  HINT = 'Remove its subteams first, or move them with gangsched.set_team_parent(team, parent) '
                         '(parent NULL: to the top level).';
    END IF;
    IF EXISTS (SELECT FROM gangsched.bookings b WHERE b.team_id = tid) THEN
        RAISE EXCEPTION 'team "%" has reservations', team
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('Its reservations are: %s.', (SELECT string_agg(b.name, ', ' ORDER BY b.name)
                                                                FROM gangsched.bookings b WHERE b.team_id = tid)),
                  HINT = 'Drop them first with gangsched.drop_reservation(name) (an ended one is removed, one in progress ends).';
    END IF;
    DELETE FROM gangsched.quotas q WHERE q.team_id = tid;
    DELETE FROM gangsched.team_pending c WHERE c.team_id = tid;
    DELETE FROM gangsched.teams t WHERE t.id = tid;     -- members go by ON DELETE CASCADE
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team removed', jsonb_build_object('team', team));
END $$;


CREATE OR REPLACE FUNCTION gangsched.check_invariants()
RETURNS TABLE (invariant int, job bigint, node text, detail text)
LANGUAGE sql STABLE SET jit = off AS $$
WITH cur AS (
    SELECT a.*, n.name AS node_name, n.topology
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)),
cur_slots AS (
    SELECT c.job, c.worker, c.node_id, s.device, s.slot
      FROM cur c, gangsched._slots(c.devices, c.first_slice, c.slices) s),
hist_slots AS (
    SELECT a.id, a.job, a.node_id, s.slot, a.during
      FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s),
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
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job
--    (victims still draining excepted: its own, or those of an earlier
--    preemptor of the same round whose rest it waits for, as its
--    'nominated' event records them in waits_for)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting'
            AND (v.preempted_for = h.job
                 OR EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(v.id))))
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2
                                      WHERE h2.node_id = c.node_id
                                        AND (h2.job = v.preempted_for
                                             OR EXISTS (SELECT FROM gangsched.events e
                                                         WHERE e.job = h2.job AND e.kind = 'nominated'
                                                           AND e.detail->'waits_for' @> to_jsonb(v.id)))))
              GROUP BY c.node_id) o ON o.node_id = h.node_id
 WHERE h.cpus + COALESCE(o.cpus, 0) > n.cpus OR h.mem + COALESCE(o.mem, 0) > n.mem_gb OR h.net + COALESCE(o.net, 0) > n.net_gbps
UNION ALL
SELECT 5, h.job, NULL, format('job holds capacity but is %s', j.state)
  FROM (SELECT DISTINCT job FROM gangsched.holds) h JOIN gangsched.gangs j ON j.id = h.job
 WHERE j.state <> 'nominated'
UNION ALL
SELECT 5, h.job, n.name, format('two nominated jobs hold slot %s', s.slot)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id,
       gangsched._slots(h.devices, h.first_slice, h.slices) s
 WHERE EXISTS (SELECT FROM gangsched.holds h2, gangsched._slots(h2.devices, h2.first_slice, h2.slices) s2
                WHERE h2.node_id = h.node_id AND h2.job < h.job AND s2.slot = s.slot)
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
UNION ALL
-- 8. dependencies: only pending jobs wait, and only for jobs of their own
--    team that they listed and that have not ended (58_dependencies.sql)
SELECT 8, g.id, NULL,
       CASE WHEN g.state <> 'pending' THEN format('job is %s but still waits for jobs %s', g.state, g.waiting_for)
            WHEN NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) THEN
                 format('job waits for jobs %s but listed only %s', g.waiting_for, COALESCE(g.after_jobs, '{}'))
            ELSE format('job waits for job %s, which %s', x.id,
                        CASE WHEN x.state IS NULL THEN 'does not exist'
                             WHEN x.team_id <> g.team_id THEN 'belongs to another team'
                             ELSE 'has ended (' || x.state || ')' END) END
  FROM gangsched.gangs g
  LEFT JOIN LATERAL (SELECT w.id, d.state, d.team_id FROM unnest(g.waiting_for) w(id)
                       LEFT JOIN gangsched.gangs d ON d.id = w.id
                      WHERE d.id IS NULL OR d.team_id <> g.team_id
                         OR d.state IN ('finished', 'failed', 'cancelled', 'expired')
                      ORDER BY w.id LIMIT 1) x ON true
 WHERE g.waiting_for IS NOT NULL
   AND (g.state <> 'pending' OR NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) OR x.id IS NOT NULL)
UNION ALL
-- 9. the team tree (docs/fairness.md, "Team trees"): every team is reached
--    from a top-level team (no cycle), only leaf teams have live jobs, and
--    the GPUs of the nearest quotas below a team's quota in a pool fit in it
SELECT 9, NULL, NULL, format('team %s is not reached from a top-level team (its parents form a cycle)', t.name)
  FROM gangsched.teams t
 WHERE NOT EXISTS (SELECT FROM gangsched._team_tree x WHERE x.team_id = t.id)
UNION ALL
SELECT 9, g.id, NULL, format('job of team %s, which has subteams, is %s', t.name, g.state)
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
   AND EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = g.team_id)
UNION ALL
SELECT 9, NULL, NULL, format('the teams below %s hold %s GPUs of nominal quota in pool %s, more than its %s',
                             pt.name, k.below, pl.name, pq.gpus)
  FROM (SELECT gangsched._quota_parent(q.team_id, q.pool_id) AS parent, q.pool_id, sum(q.gpus) AS below
          FROM gangsched.quotas q
          -- teams reached from the top only: a cycle is reported above,
          -- and walking up one would not end
          JOIN gangsched._team_tree t ON t.team_id = q.team_id
         WHERE t.parent_id IS NOT NULL
         GROUP BY 1, 2) k
  JOIN gangsched.quotas pq ON pq.team_id = k.parent AND pq.pool_id = k.pool_id
  JOIN gangsched.teams pt ON pt.id = k.parent
  JOIN gangsched.pools pl ON pl.id = k.pool_id
 WHERE k.below > pq.gpus
UNION ALL
-- 10. reservations and maintenance windows (docs/time.md): no allocation
--     begins on a booked node inside the window for a job the booking does
--     not permit (a maintenance window permits none; a reservation its
--     team's subtree and the jobs that name it), and no node is in two
--     bookings at overlapping times
SELECT 10, a.job, n.name,
       format('allocation begun at %s lies inside %s %s (%s to %s)', lower(a.during),
              CASE WHEN b.team_id IS NULL THEN 'maintenance window' ELSE 'reservation' END, b.name, b.starts, b.ends)
  FROM gangsched.bookings b
  JOIN gangsched.allocations a ON a.node_id = ANY (b.node_ids) AND lower(a.during) >= b.starts AND lower(a.during) < b.ends
  JOIN gangsched.gangs g ON g.id = a.job
  JOIN gangsched.nodes n ON n.id = a.node_id
 WHERE b.team_id IS NULL
    OR NOT (g.reservation_id IS NOT DISTINCT FROM b.id
            OR g.team_id IN (WITH RECURSIVE s(id) AS (SELECT b.team_id
                                                      UNION
                                                      SELECT t.id FROM s JOIN gangsched.teams t ON t.parent_id = s.id)
                             SELECT s.id FROM s))
UNION ALL
SELECT 10, NULL, n.name, format('the node is in %s and %s at overlapping times', b1.name, b2.name)
  FROM gangsched.bookings b1
  JOIN gangsched.bookings b2 ON b1.id < b2.id AND b1.node_ids && b2.node_ids AND b1.starts < b2.ends AND b2.starts < b1.ends
  JOIN gangsched.nodes n ON n.id = ANY (b1.node_ids) AND n.id = ANY (b2.node_ids)
$$;


-- ==== elastic: elastic gangs (issue 17; docs/elastic.md) ====
-- An elastic job runs on any whole number of data-parallel replicas
-- between min_replicas and the number it was submitted with (a replica is
-- group_size × stages workers). max_workers is the submitted gang; workers
-- is what the job asks for while it waits (= max_workers) and what it
-- holds while it holds capacity (the size a round placed or nominated it
-- at). Both are NULL for a rigid job, whose workers never change.
ALTER TABLE gangsched.gangs
    ADD COLUMN min_replicas int CHECK (min_replicas >= 1),
    ADD COLUMN max_workers  int,
    ADD CONSTRAINT gangs_elastic_check CHECK (
        (min_replicas IS NULL) = (max_workers IS NULL)
        AND max_workers % (group_size * stages) = 0
        AND workers <= max_workers
        AND min_replicas::bigint * group_size * stages <= workers);
-- gangs_archive takes the same columns, in the same order (LIKE gangs in a fresh install: no constraints)
ALTER TABLE gangsched.gangs_archive ADD COLUMN min_replicas int, ADD COLUMN max_workers int;

-- The round reads the elastic gangs that hold capacity (to grow them,
-- src/loader.c): none in the index when no elastic job runs.
CREATE INDEX gangs_elastic_held_idx ON gangsched.gangs (id)
    WHERE min_replicas IS NOT NULL AND state IN ('placed', 'running');

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

DROP FUNCTION gangsched.submit(text, int, numeric, numeric, numeric, numeric, text, int, bool, text, int, text, int,
                               text, text, text, numeric, text, text, interval, interval, interval, text, interval,
                               bigint[], text, text);
CREATE OR REPLACE FUNCTION gangsched.submit(team text, workers int, gpus numeric, cpus numeric DEFAULT 0,
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

DROP FUNCTION gangsched.resize(bigint, int, numeric);
-- A pending job asks for another number of workers, other GPUs per
-- worker or (elastic gangs, docs/elastic.md) another minimum of replicas
-- (min_replicas; a rigid job given one becomes elastic): it keeps its id, queue position and submit time, the request is
-- checked as submit checks it (same SQLSTATEs; nothing changes when a check
-- fails), and a 'resized' event records both shapes. Only a pending job
-- can be resized: a round that read the old shape places or nominates the
-- job only if its shape is still the one it chose for (src/round.c), so a
-- resize racing a round never leaves a job holding the wrong number of
-- workers.
CREATE FUNCTION gangsched.resize(job bigint, workers int DEFAULT NULL, gpus numeric DEFAULT NULL,
                                 min_replicas int DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j    gangsched.gangs;
    t    record;
    nw   int;
    ng   numeric;
    ow   int;
    og   numeric;
    nm   int;
    om   int;
    minw int;
BEGIN
    -- the role check comes before the row lock: a refused caller locks nothing
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job;
    IF j.id IS NULL THEN
        RAISE EXCEPTION 'job % does not exist', job
            USING ERRCODE = 'foreign_key_violation', HINT = 'See gangsched.jobs for the job ids.';
    END IF;
    PERFORM gangsched._require_team(j.team_id, format('resize job %s', job));
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job FOR UPDATE;
    IF j.state <> 'pending' THEN
        RAISE EXCEPTION 'job % is %, and only a pending job can be resized', job, j.state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN j.state = 'nominated' THEN 'Its victims are already releasing capacity for its present shape.'
                                WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'It has ended.'
                                ELSE 'It holds capacity for its present shape.' END,
                  HINT = CASE WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'Submit a new job with the shape you need.'
                              ELSE 'Cancel it and submit it again with the shape you need.' END;
    END IF;
    ow := j.workers;
    og := j.gpus;
    om := j.min_replicas;
    nw := COALESCE(workers, ow);
    ng := COALESCE(gpus, og);
    nm := COALESCE(min_replicas, om);
    IF nw = ow AND ng = og AND nm IS NOT DISTINCT FROM om THEN
        RETURN;
    END IF;
    -- the request, checked as submit checks it (sql/src/50_jobs.sql)
    IF nw < 1 THEN
        RAISE EXCEPTION 'workers must be at least 1, not %', nw
            USING ERRCODE = 'invalid_parameter_value', HINT = 'A gang has one or more workers.';
    END IF;
    PERFORM gangsched._check_amount(ng, 'gpus', false, 64);
    PERFORM gangsched._check_worker_shape(nw, ng, j.cpus, j.mem_gb, j.net_gbps, j.group_size, j.stages);
    minw := gangsched._check_min_replicas(nw, j.group_size, j.stages, nm);
    SELECT tm.name, tm.max_workers_per_gang INTO t FROM gangsched.teams tm WHERE tm.id = j.team_id;
    PERFORM gangsched._check_gang_limit(t.name, t.max_workers_per_gang, nw);
    j.workers := nw;
    j.gpus := ng;
    j.gpu_model := CASE WHEN ng > 0 THEN j.gpu_model END;
    j.gpu_mem_gb := CASE WHEN ng > 0 THEN j.gpu_mem_gb END;
    -- admitted when its minimum could ever run, as submit admits it
    j.workers := minw;
    IF NOT gangsched._admit_fast(j) THEN
        PERFORM gangsched._admit(j);
    END IF;
    UPDATE gangsched.gangs g
       SET workers = nw, gpus = ng, gpu_model = j.gpu_model, gpu_mem_gb = j.gpu_mem_gb,
           min_replicas = nm, max_workers = CASE WHEN nm IS NOT NULL THEN nw END,
           reason = CASE WHEN g.waiting_for IS NULL THEN NULL ELSE g.reason END
     WHERE g.id = resize.job;
    PERFORM gangsched._event('resized', job, NULL, j.team_id,
                             format('%s workers × %s GPUs, was %s × %s', nw, ng, ow, og)
                             || CASE WHEN nm IS NOT NULL OR om IS NOT NULL
                                     THEN format('; min_replicas %s, was %s', COALESCE(nm::text, 'none'), COALESCE(om::text, 'none'))
                                     ELSE '' END,
                             jsonb_build_object('workers', nw, 'gpus', ng, 'was_workers', ow, 'was_gpus', og)
                             || CASE WHEN nm IS NOT NULL OR om IS NOT NULL
                                     THEN jsonb_build_object('min_replicas', nm, 'was_min_replicas', om)
                                     ELSE '{}'::jsonb END);
    PERFORM gangsched._wake();
END $$;

-- Put live jobs back in the queue at their old positions, set-based: end
-- their allocations (history kept), drop capacity held for them, count the
-- work lost since their last checkpoint. Returns how many were requeued.
-- The one requeue: rounds (start timeouts, src/round.c), kills at the grace
-- deadline, releases and a node going down all call it; each 'requeued'
-- event says the state the job left and the work it lost.
CREATE OR REPLACE FUNCTION gangsched._requeue_many(jobs bigint[], why text, agent_event text DEFAULT 'kill',
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
CREATE OR REPLACE FUNCTION gangsched._place_ready_nominated(only_job bigint DEFAULT NULL) RETURNS int
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

-- The replicas each job held over time (elastic gangs, docs/elastic.md;
-- a rigid job holds all of its replicas whenever it holds anything): one
-- row per job and interval of [from, to) in which the number of its
-- allocations stayed the same, from the allocation history. `until` is
-- NULL while still held. Jobs archived (archive_history()) are not shown:
-- their allocations went with them.
CREATE FUNCTION gangsched.replica_history("from" timestamptz, "to" timestamptz)
RETURNS TABLE (job bigint, name text, team text, since timestamptz, until timestamptz, workers int,
               replicas int, min_replicas int, max_replicas int)
LANGUAGE sql STABLE SET jit = off AS $$
WITH a AS (
    SELECT x.job, x.team_id, x.during FROM gangsched.allocations x
     WHERE x.during && tstzrange($1, $2)),
pts AS (
    SELECT a.job, lower(a.during) AS t FROM a
    UNION
    SELECT a.job, upper(a.during) FROM a WHERE NOT upper_inf(a.during)),
seg AS (
    SELECT p.job, p.t AS since, lead(p.t) OVER (PARTITION BY p.job ORDER BY p.t) AS until FROM pts p),
held AS (
    SELECT s.job, s.since, s.until,
           -- after a job's last change point only what is still held counts
           (SELECT count(*) FROM a WHERE a.job = s.job AND a.during @> s.since
                                     AND (s.until IS NOT NULL OR upper_inf(a.during)))::int AS n
      FROM seg s),
shape AS (
    SELECT g.id, g.name, g.team_id, g.group_size * g.stages AS unit, g.min_replicas,
           COALESCE(g.max_workers, g.workers) AS max_workers FROM gangsched.gangs g)
SELECT h.job, s.name, t.name, h.since, h.until, h.n, h.n / s.unit, s.min_replicas, s.max_workers / s.unit
  FROM held h JOIN shape s ON s.id = h.job JOIN gangsched.teams t ON t.id = s.team_id
 WHERE h.n > 0 AND h.since < $2
 ORDER BY h.job, h.since
$$;

-- One row per violation; none when healthy. Numbers as in docs/invariants.md.
-- jit is off: the unnest/generate_series estimates make the plan look costly
-- enough to JIT-compile (seconds) although the rows are few.
CREATE OR REPLACE FUNCTION gangsched.check_invariants()
RETURNS TABLE (invariant int, job bigint, node text, detail text)
LANGUAGE sql STABLE SET jit = off AS $$
WITH cur AS (
    SELECT a.*, n.name AS node_name, n.topology
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)),
cur_slots AS (
    SELECT c.job, c.worker, c.node_id, s.device, s.slot
      FROM cur c, gangsched._slots(c.devices, c.first_slice, c.slices) s),
hist_slots AS (
    SELECT a.id, a.job, a.node_id, s.slot, a.during
      FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s),
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
    -- a current allocation began with the placement; an elastic gang's
    -- grown workers later (docs/elastic.md), never before it
    OR (upper_inf(a.during) AND lower(a.during) IS DISTINCT FROM j.placed_at
        AND NOT (j.min_replicas IS NOT NULL AND lower(a.during) > j.placed_at))
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
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job
--    (victims still draining excepted: its own, or those of an earlier
--    preemptor of the same round whose rest it waits for, as its
--    'nominated' event records them in waits_for)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting'
            AND (v.preempted_for = h.job
                 OR EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(v.id))))
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2
                                      WHERE h2.node_id = c.node_id
                                        AND (h2.job = v.preempted_for
                                             OR EXISTS (SELECT FROM gangsched.events e
                                                         WHERE e.job = h2.job AND e.kind = 'nominated'
                                                           AND e.detail->'waits_for' @> to_jsonb(v.id)))))
              GROUP BY c.node_id) o ON o.node_id = h.node_id
 WHERE h.cpus + COALESCE(o.cpus, 0) > n.cpus OR h.mem + COALESCE(o.mem, 0) > n.mem_gb OR h.net + COALESCE(o.net, 0) > n.net_gbps
UNION ALL
SELECT 5, h.job, NULL, format('job holds capacity but is %s', j.state)
  FROM (SELECT DISTINCT job FROM gangsched.holds) h JOIN gangsched.gangs j ON j.id = h.job
 WHERE j.state <> 'nominated'
UNION ALL
SELECT 5, h.job, n.name, format('two nominated jobs hold slot %s', s.slot)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id,
       gangsched._slots(h.devices, h.first_slice, h.slices) s
 WHERE EXISTS (SELECT FROM gangsched.holds h2, gangsched._slots(h2.devices, h2.first_slice, h2.slices) s2
                WHERE h2.node_id = h.node_id AND h2.job < h.job AND s2.slot = s.slot)
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
UNION ALL
-- 8. dependencies: only pending jobs wait, and only for jobs of their own
--    team that they listed and that have not ended (58_dependencies.sql)
SELECT 8, g.id, NULL,
       CASE WHEN g.state <> 'pending' THEN format('job is %s but still waits for jobs %s', g.state, g.waiting_for)
            WHEN NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) THEN
                 format('job waits for jobs %s but listed only %s', g.waiting_for, COALESCE(g.after_jobs, '{}'))
            ELSE format('job waits for job %s, which %s', x.id,
                        CASE WHEN x.state IS NULL THEN 'does not exist'
                             WHEN x.team_id <> g.team_id THEN 'belongs to another team'
                             ELSE 'has ended (' || x.state || ')' END) END
  FROM gangsched.gangs g
  LEFT JOIN LATERAL (SELECT w.id, d.state, d.team_id FROM unnest(g.waiting_for) w(id)
                       LEFT JOIN gangsched.gangs d ON d.id = w.id
                      WHERE d.id IS NULL OR d.team_id <> g.team_id
                         OR d.state IN ('finished', 'failed', 'cancelled', 'expired')
                      ORDER BY w.id LIMIT 1) x ON true
 WHERE g.waiting_for IS NOT NULL
   AND (g.state <> 'pending' OR NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) OR x.id IS NOT NULL)
UNION ALL
-- 9. the team tree (docs/fairness.md, "Team trees"): every team is reached
--    from a top-level team (no cycle), only leaf teams have live jobs, and
--    the GPUs of the nearest quotas below a team's quota in a pool fit in it
SELECT 9, NULL, NULL, format('team %s is not reached from a top-level team (its parents form a cycle)', t.name)
  FROM gangsched.teams t
 WHERE NOT EXISTS (SELECT FROM gangsched._team_tree x WHERE x.team_id = t.id)
UNION ALL
SELECT 9, g.id, NULL, format('job of team %s, which has subteams, is %s', t.name, g.state)
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
   AND EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = g.team_id)
UNION ALL
SELECT 9, NULL, NULL, format('the teams below %s hold %s GPUs of nominal quota in pool %s, more than its %s',
                             pt.name, k.below, pl.name, pq.gpus)
  FROM (SELECT gangsched._quota_parent(q.team_id, q.pool_id) AS parent, q.pool_id, sum(q.gpus) AS below
          FROM gangsched.quotas q
          -- teams reached from the top only: a cycle is reported above,
          -- and walking up one would not end
          JOIN gangsched._team_tree t ON t.team_id = q.team_id
         WHERE t.parent_id IS NOT NULL
         GROUP BY 1, 2) k
  JOIN gangsched.quotas pq ON pq.team_id = k.parent AND pq.pool_id = k.pool_id
  JOIN gangsched.teams pt ON pt.id = k.parent
  JOIN gangsched.pools pl ON pl.id = k.pool_id
 WHERE k.below > pq.gpus
UNION ALL
-- 10. elastic gangs (docs/elastic.md): a job holds (or, nominated, is held
--     capacity for) a whole number of replicas between its minimum and its
--     maximum, and asks for its maximum while it waits; each replica's
--     groups are whole (invariant 3 checks their ranks and domains)
SELECT 10, g.id, NULL, format('elastic job is %s with %s workers; replicas of %s workers from %s to %s are allowed%s',
                              g.state, g.workers, g.group_size * g.stages, g.min_replicas,
                              g.max_workers / (g.group_size * g.stages),
                              CASE WHEN g.state = 'pending' THEN format(', and a waiting job asks for all %s', g.max_workers) ELSE '' END)
  FROM gangsched.gangs g
 WHERE g.min_replicas IS NOT NULL
   AND (g.max_workers IS NULL OR g.workers % (g.group_size * g.stages) <> 0
        OR g.workers < g.min_replicas * g.group_size * g.stages OR g.workers > g.max_workers
        OR (g.state = 'pending' AND g.workers <> g.max_workers))
UNION ALL
SELECT 10, g.id, NULL, format('rigid job has max_workers %s', g.max_workers)
  FROM gangsched.gangs g
 WHERE g.min_replicas IS NULL AND g.max_workers IS NOT NULL
$$;

-- The portal's view of jobs (the table underneath is gangsched.gangs:
-- every job is a gang). Each role sees what docs/security.md says: a
-- portal its teams' jobs, an analyst and an operator every job; the command
-- only of its own teams' jobs (an operator: every command).
CREATE OR REPLACE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds, j.reason, j.message, j.queue_pos,
       CASE WHEN v.all_commands OR j.team_id = ANY (v.teams) THEN j.command END AS command,
       j.checkpoint_interval, j.grace, j.queue_timeout,
       j.after_jobs, j.after_mode, j.waiting_for, j.time_limit,
       -- elastic gangs (docs/elastic.md): the replicas it holds (asks for while it waits), its range
       j.workers / (j.group_size * j.stages) AS replicas, j.min_replicas,
       COALESCE(j.max_workers, j.workers) / (j.group_size * j.stages) AS max_replicas
  FROM gangsched._visibility() v
  JOIN gangsched.gangs j ON v.all_rows OR j.team_id = ANY (v.teams)
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id;

-- ==== merge (elastic after resv): the functions both changed, as in sql/src ====

CREATE OR REPLACE FUNCTION gangsched.check_invariants()
RETURNS TABLE (invariant int, job bigint, node text, detail text)
LANGUAGE sql STABLE SET jit = off AS $$
WITH cur AS (
    SELECT a.*, n.name AS node_name, n.topology
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)),
cur_slots AS (
    SELECT c.job, c.worker, c.node_id, s.device, s.slot
      FROM cur c, gangsched._slots(c.devices, c.first_slice, c.slices) s),
hist_slots AS (
    SELECT a.id, a.job, a.node_id, s.slot, a.during
      FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s),
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
    -- a current allocation began with the placement; an elastic gang's
    -- grown workers later (docs/elastic.md), never before it
    OR (upper_inf(a.during) AND lower(a.during) IS DISTINCT FROM j.placed_at
        AND NOT (j.min_replicas IS NOT NULL AND lower(a.during) > j.placed_at))
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
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job
--    (victims still draining excepted: its own, or those of an earlier
--    preemptor of the same round whose rest it waits for, as its
--    'nominated' event records them in waits_for)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting'
            AND (v.preempted_for = h.job
                 OR EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(v.id))))
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2
                                      WHERE h2.node_id = c.node_id
                                        AND (h2.job = v.preempted_for
                                             OR EXISTS (SELECT FROM gangsched.events e
                                                         WHERE e.job = h2.job AND e.kind = 'nominated'
                                                           AND e.detail->'waits_for' @> to_jsonb(v.id)))))
              GROUP BY c.node_id) o ON o.node_id = h.node_id
 WHERE h.cpus + COALESCE(o.cpus, 0) > n.cpus OR h.mem + COALESCE(o.mem, 0) > n.mem_gb OR h.net + COALESCE(o.net, 0) > n.net_gbps
UNION ALL
SELECT 5, h.job, NULL, format('job holds capacity but is %s', j.state)
  FROM (SELECT DISTINCT job FROM gangsched.holds) h JOIN gangsched.gangs j ON j.id = h.job
 WHERE j.state <> 'nominated'
UNION ALL
SELECT 5, h.job, n.name, format('two nominated jobs hold slot %s', s.slot)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id,
       gangsched._slots(h.devices, h.first_slice, h.slices) s
 WHERE EXISTS (SELECT FROM gangsched.holds h2, gangsched._slots(h2.devices, h2.first_slice, h2.slices) s2
                WHERE h2.node_id = h.node_id AND h2.job < h.job AND s2.slot = s.slot)
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
UNION ALL
-- 8. dependencies: only pending jobs wait, and only for jobs of their own
--    team that they listed and that have not ended (58_dependencies.sql)
SELECT 8, g.id, NULL,
       CASE WHEN g.state <> 'pending' THEN format('job is %s but still waits for jobs %s', g.state, g.waiting_for)
            WHEN NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) THEN
                 format('job waits for jobs %s but listed only %s', g.waiting_for, COALESCE(g.after_jobs, '{}'))
            ELSE format('job waits for job %s, which %s', x.id,
                        CASE WHEN x.state IS NULL THEN 'does not exist'
                             WHEN x.team_id <> g.team_id THEN 'belongs to another team'
                             ELSE 'has ended (' || x.state || ')' END) END
  FROM gangsched.gangs g
  LEFT JOIN LATERAL (SELECT w.id, d.state, d.team_id FROM unnest(g.waiting_for) w(id)
                       LEFT JOIN gangsched.gangs d ON d.id = w.id
                      WHERE d.id IS NULL OR d.team_id <> g.team_id
                         OR d.state IN ('finished', 'failed', 'cancelled', 'expired')
                      ORDER BY w.id LIMIT 1) x ON true
 WHERE g.waiting_for IS NOT NULL
   AND (g.state <> 'pending' OR NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) OR x.id IS NOT NULL)
UNION ALL
-- 9. the team tree (docs/fairness.md, "Team trees"): every team is reached
--    from a top-level team (no cycle), only leaf teams have live jobs, and
--    the GPUs of the nearest quotas below a team's quota in a pool fit in it
SELECT 9, NULL, NULL, format('team %s is not reached from a top-level team (its parents form a cycle)', t.name)
  FROM gangsched.teams t
 WHERE NOT EXISTS (SELECT FROM gangsched._team_tree x WHERE x.team_id = t.id)
UNION ALL
SELECT 9, g.id, NULL, format('job of team %s, which has subteams, is %s', t.name, g.state)
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
   AND EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = g.team_id)
UNION ALL
SELECT 9, NULL, NULL, format('the teams below %s hold %s GPUs of nominal quota in pool %s, more than its %s',
                             pt.name, k.below, pl.name, pq.gpus)
  FROM (SELECT gangsched._quota_parent(q.team_id, q.pool_id) AS parent, q.pool_id, sum(q.gpus) AS below
          FROM gangsched.quotas q
          -- teams reached from the top only: a cycle is reported above,
          -- and walking up one would not end
          JOIN gangsched._team_tree t ON t.team_id = q.team_id
         WHERE t.parent_id IS NOT NULL
         GROUP BY 1, 2) k
  JOIN gangsched.quotas pq ON pq.team_id = k.parent AND pq.pool_id = k.pool_id
  JOIN gangsched.teams pt ON pt.id = k.parent
  JOIN gangsched.pools pl ON pl.id = k.pool_id
 WHERE k.below > pq.gpus
UNION ALL
-- 10. reservations and maintenance windows (docs/time.md): no allocation
--     begins on a booked node inside the window for a job the booking does
--     not permit (a maintenance window permits none; a reservation its
--     team's subtree and the jobs that name it), and no node is in two
--     bookings at overlapping times
SELECT 10, a.job, n.name,
       format('allocation begun at %s lies inside %s %s (%s to %s)', lower(a.during),
              CASE WHEN b.team_id IS NULL THEN 'maintenance window' ELSE 'reservation' END, b.name, b.starts, b.ends)
  FROM gangsched.bookings b
  JOIN gangsched.allocations a ON a.node_id = ANY (b.node_ids) AND lower(a.during) >= b.starts AND lower(a.during) < b.ends
  JOIN gangsched.gangs g ON g.id = a.job
  JOIN gangsched.nodes n ON n.id = a.node_id
 WHERE b.team_id IS NULL
    OR NOT (g.reservation_id IS NOT DISTINCT FROM b.id
            OR g.team_id IN (WITH RECURSIVE s(id) AS (SELECT b.team_id
                                                      UNION
                                                      SELECT t.id FROM s JOIN gangsched.teams t ON t.parent_id = s.id)
                             SELECT s.id FROM s))
UNION ALL
SELECT 10, NULL, n.name, format('the node is in %s and %s at overlapping times', b1.name, b2.name)
  FROM gangsched.bookings b1
  JOIN gangsched.bookings b2 ON b1.id < b2.id AND b1.node_ids && b2.node_ids AND b1.starts < b2.ends AND b2.starts < b1.ends
  JOIN gangsched.nodes n ON n.id = ANY (b1.node_ids) AND n.id = ANY (b2.node_ids)
UNION ALL
-- 11. elastic gangs (docs/elastic.md): a job holds (or, nominated, is held
--     capacity for) a whole number of replicas between its minimum and its
--     maximum, and asks for its maximum while it waits; each replica's
--     groups are whole (invariant 3 checks their ranks and domains)
SELECT 11, g.id, NULL, format('elastic job is %s with %s workers; replicas of %s workers from %s to %s are allowed%s',
                              g.state, g.workers, g.group_size * g.stages, g.min_replicas,
                              g.max_workers / (g.group_size * g.stages),
                              CASE WHEN g.state = 'pending' THEN format(', and a waiting job asks for all %s', g.max_workers) ELSE '' END)
  FROM gangsched.gangs g
 WHERE g.min_replicas IS NOT NULL
   AND (g.max_workers IS NULL OR g.workers % (g.group_size * g.stages) <> 0
        OR g.workers < g.min_replicas * g.group_size * g.stages OR g.workers > g.max_workers
        OR (g.state = 'pending' AND g.workers <> g.max_workers))
UNION ALL
SELECT 11, g.id, NULL, format('rigid job has max_workers %s', g.max_workers)
  FROM gangsched.gangs g
 WHERE g.min_replicas IS NULL AND g.max_workers IS NOT NULL
$$;

CREATE OR REPLACE FUNCTION gangsched._requeue_many(jobs bigint[], why text, agent_event text DEFAULT 'kill',
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

CREATE OR REPLACE FUNCTION gangsched._place_ready_nominated(only_job bigint DEFAULT NULL) RETURNS int
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

CREATE OR REPLACE FUNCTION gangsched.resize(job bigint, workers int DEFAULT NULL, gpus numeric DEFAULT NULL,
                                 min_replicas int DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j    gangsched.gangs;
    t    record;
    nw   int;
    ng   numeric;
    ow   int;
    og   numeric;
    nm   int;
    om   int;
    minw int;
BEGIN
    -- the role check comes before the row lock: a refused caller locks nothing
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job;
    IF j.id IS NULL THEN
        RAISE EXCEPTION 'job % does not exist', job
            USING ERRCODE = 'foreign_key_violation', HINT = 'See gangsched.jobs for the job ids.';
    END IF;
    PERFORM gangsched._require_team(j.team_id, format('resize job %s', job));
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job FOR UPDATE;
    IF j.state <> 'pending' THEN
        RAISE EXCEPTION 'job % is %, and only a pending job can be resized', job, j.state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN j.state = 'nominated' THEN 'Its victims are already releasing capacity for its present shape.'
                                WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'It has ended.'
                                ELSE 'It holds capacity for its present shape.' END,
                  HINT = CASE WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'Submit a new job with the shape you need.'
                              ELSE 'Cancel it and submit it again with the shape you need.' END;
    END IF;
    ow := j.workers;
    og := j.gpus;
    om := j.min_replicas;
    nw := COALESCE(workers, ow);
    ng := COALESCE(gpus, og);
    nm := COALESCE(min_replicas, om);
    IF nw = ow AND ng = og AND nm IS NOT DISTINCT FROM om THEN
        RETURN;
    END IF;
    -- the request, checked as submit checks it (sql/src/50_jobs.sql)
    IF nw < 1 THEN
        RAISE EXCEPTION 'workers must be at least 1, not %', nw
            USING ERRCODE = 'invalid_parameter_value', HINT = 'A gang has one or more workers.';
    END IF;
    PERFORM gangsched._check_amount(ng, 'gpus', false, 64);
    PERFORM gangsched._check_worker_shape(nw, ng, j.cpus, j.mem_gb, j.net_gbps, j.group_size, j.stages);
    minw := gangsched._check_min_replicas(nw, j.group_size, j.stages, nm);
    SELECT tm.name, tm.max_workers_per_gang INTO t FROM gangsched.teams tm WHERE tm.id = j.team_id;
    PERFORM gangsched._check_gang_limit(t.name, t.max_workers_per_gang, nw);
    j.workers := nw;
    j.gpus := ng;
    j.gpu_model := CASE WHEN ng > 0 THEN j.gpu_model END;
    j.gpu_mem_gb := CASE WHEN ng > 0 THEN j.gpu_mem_gb END;
    -- admitted when its minimum could ever run, as submit admits it
    j.workers := minw;
    IF NOT gangsched._admit_fast(j) THEN
        PERFORM gangsched._admit(j);
    END IF;
    UPDATE gangsched.gangs g
       SET workers = nw, gpus = ng, gpu_model = j.gpu_model, gpu_mem_gb = j.gpu_mem_gb,
           min_replicas = nm, max_workers = CASE WHEN nm IS NOT NULL THEN nw END,
           reason = CASE WHEN g.waiting_for IS NULL THEN NULL ELSE g.reason END
     WHERE g.id = resize.job;
    PERFORM gangsched._event('resized', job, NULL, j.team_id,
                             format('%s workers × %s GPUs, was %s × %s', nw, ng, ow, og)
                             || CASE WHEN nm IS NOT NULL OR om IS NOT NULL
                                     THEN format('; min_replicas %s, was %s', COALESCE(nm::text, 'none'), COALESCE(om::text, 'none'))
                                     ELSE '' END,
                             jsonb_build_object('workers', nw, 'gpus', ng, 'was_workers', ow, 'was_gpus', og)
                             || CASE WHEN nm IS NOT NULL OR om IS NOT NULL
                                     THEN jsonb_build_object('min_replicas', nm, 'was_min_replicas', om)
                                     ELSE '{}'::jsonb END);
    PERFORM gangsched._wake();
END $$;

CREATE OR REPLACE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds, j.reason, j.message, j.queue_pos,
       CASE WHEN v.all_commands OR j.team_id = ANY (v.teams) THEN j.command END AS command,
       j.checkpoint_interval, j.grace, j.queue_timeout,
       j.after_jobs, j.after_mode, j.waiting_for, j.time_limit,
       -- elastic gangs (docs/elastic.md): the replicas it holds (asks for while it waits), its range
       j.workers / (j.group_size * j.stages) AS replicas, j.min_replicas,
       COALESCE(j.max_workers, j.workers) / (j.group_size * j.stages) AS max_replicas
  FROM gangsched._visibility() v
  JOIN gangsched.gangs j ON v.all_rows OR j.team_id = ANY (v.teams)
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id;

/* ------------------------------------------------------------------ */
-- ==== hdrf: H-DRF fair shares in C (issue 15) ====
/* ------------------------------------------------------------------ */
-- _fair_shares becomes a C function with per-resource columns (the same
-- H-DRF code as the rounds, src/fair.c); _drf_split goes. team_shares and
-- the rows behind it are re-created unchanged around it.
DROP VIEW gangsched.team_shares;
DROP FUNCTION gangsched._team_shares();
DROP VIEW gangsched._team_shares_rows;
DROP FUNCTION gangsched._fair_shares();
DROP FUNCTION gangsched._drf_split(float8[], float8[], float8[]);

-- Each team's fair share (the fair_share column of team_shares):
-- hierarchical weighted DRF (H-DRF) over what the subtree's teams hold now
-- plus what their pending jobs ask for, by the rounds' own code
-- (gs_tree_fair_shares in src/fair.c, read by src/loader.c): per team, the
-- subtree's allocation of each resource and its dominant share of the
-- cluster (up nodes, all pools, as dominant_share). Top-level teams split
-- the cluster; the children of a team split what it gets; a subtree
-- blocked on a resource that is used up stops counting against the others
-- (docs/fairness.md). Borrowing limits cap what a subtree may be given.
CREATE FUNCTION gangsched._fair_shares(OUT team_id int, OUT fair_share float8, OUT gpus float8, OUT cpus float8,
                                       OUT mem_gb float8, OUT net_gbps float8)
RETURNS SETOF record LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_fair_shares_sql';

-- What _fair_shares sums of the pending jobs, per team, without reading the
-- gangs' wide rows (an index-only scan; a heap scan of 20,000 pending jobs
-- was most of team_shares' time on the benchmark state).
CREATE INDEX gangs_pending_demand_idx ON gangsched.gangs (team_id)
    INCLUDE (workers, f_gpus, f_cpus, f_mem_gb, f_net_gbps)
    WHERE state = 'pending' AND waiting_for IS NULL;
REVOKE ALL ON FUNCTION gangsched._fair_shares() FROM PUBLIC;

CREATE VIEW gangsched._team_shares_rows AS
WITH cap AS (
    SELECT sum(n.gpus) AS gpus, sum(n.cpus) AS cpus, sum(n.mem_gb) AS mem, sum(n.net_gbps) AS net
      FROM gangsched.nodes n WHERE n.state = 'up'),
pool_cap AS (
    SELECT n.pool_id, sum(n.gpus) AS gpus FROM gangsched.nodes n WHERE n.state = 'up' GROUP BY n.pool_id),
tree AS MATERIALIZED (SELECT * FROM gangsched._team_tree),
held AS (
    SELECT a.team_id, n.pool_id, sum(a.gpus) AS gpus, sum(a.cpus) AS cpus, sum(a.mem_gb) AS mem,
           sum(a.net_gbps) AS net, COALESCE(sum(a.gpus) FILTER (WHERE a.borrowed), 0) AS borrowed_gpus
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)
     GROUP BY a.team_id, n.pool_id),
-- what the share counts, as the round does (src/loader.c): current
-- allocations except those of gangs told to stop (leaving), and the
-- capacity held for nominated jobs (arriving)
team_held AS (
    SELECT x.team_id, sum(x.gpus) AS gpus, sum(x.cpus) AS cpus, sum(x.mem) AS mem, sum(x.net) AS net
      FROM (SELECT a.team_id, a.gpus, a.cpus, a.mem_gb AS mem, a.net_gbps AS net
              FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
             WHERE upper_inf(a.during) AND g.state <> 'preempting'
            UNION ALL
            SELECT g.team_id, g.gpus, h.cpus, h.mem_gb, h.net_gbps
              FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job) x
     GROUP BY x.team_id),
-- each team's own rows, as without trees
rows AS (
    SELECT t.id AS team_id, p.id AS pool_id,
           q.gpus AS nominal_gpus,
           COALESCE(h.gpus, 0) AS used_gpus, COALESCE(h.cpus, 0) AS used_cpus,
           COALESCE(h.mem, 0) AS used_mem_gb, COALESCE(h.net, 0) AS used_net_gbps,
           COALESCE(h.borrowed_gpus, 0) AS borrowed_gpus,
           CASE WHEN tr.leaf THEN LEAST(GREATEST(COALESCE(q.gpus, 0) - COALESCE(h.gpus, 0), 0),
                                        COALESCE(q.lend_gpus, 'Infinity'::numeric)) ELSE 0 END AS lendable_gpus,
           -- a topmost quota: no quota above it in the tree
           q.team_id IS NOT NULL AND NOT EXISTS (
               SELECT FROM gangsched.quotas x
                WHERE x.pool_id = p.id AND x.team_id = ANY (tr.ancestors) AND x.team_id <> t.id) AS topmost
      FROM gangsched.teams t JOIN tree tr ON tr.team_id = t.id CROSS JOIN gangsched.pools p
      LEFT JOIN gangsched._effective_quotas q ON q.team_id = t.id AND q.pool_id = p.id
      LEFT JOIN held h ON h.team_id = t.id AND h.pool_id = p.id
     WHERE q.team_id IS NOT NULL OR h.team_id IS NOT NULL),
pool_lent AS (
    -- borrowed GPUs of the pool that its unassigned capacity does not cover
    SELECT r.pool_id,
           LEAST(sum(r.borrowed_gpus),
                 GREATEST(sum(r.borrowed_gpus) - (COALESCE(max(pc.gpus), 0)
                                                  - COALESCE(sum(r.nominal_gpus) FILTER (WHERE r.topmost), 0)), 0)) AS gpus,
           sum(r.lendable_gpus) AS lendable
      FROM rows r LEFT JOIN pool_cap pc ON pc.pool_id = r.pool_id
     GROUP BY r.pool_id),
lent AS (
    SELECT r.*, CASE WHEN pl.lendable > 0 THEN r.lendable_gpus * LEAST(1, pl.gpus / pl.lendable) ELSE 0 END AS lent_gpus
      FROM rows r JOIN pool_lent pl ON pl.pool_id = r.pool_id),
-- a team's rows: the sums over its subtree's own rows
sub AS (
    SELECT a.id AS team_id, l.pool_id, sum(l.used_gpus) AS used_gpus, sum(l.used_cpus) AS used_cpus,
           sum(l.used_mem_gb) AS used_mem_gb, sum(l.used_net_gbps) AS used_net_gbps,
           sum(l.borrowed_gpus) AS borrowed_gpus, sum(l.lent_gpus) AS lent_gpus
      FROM lent l JOIN tree tr ON tr.team_id = l.team_id CROSS JOIN LATERAL unnest(tr.ancestors) a(id)
     GROUP BY 1, 2),
sub_held AS (
    SELECT a.id AS team_id, sum(th.gpus) AS gpus, sum(th.cpus) AS cpus, sum(th.mem) AS mem, sum(th.net) AS net
      FROM team_held th JOIN tree tr ON tr.team_id = th.team_id CROSS JOIN LATERAL unnest(tr.ancestors) a(id)
     GROUP BY 1)
SELECT t.name AS team, p.name AS pool, t.weight, q.gpus AS nominal_gpus, q.cpus AS nominal_cpus,
       q.mem_gb AS nominal_mem_gb, q.net_gbps AS nominal_net_gbps,
       q.borrow_gpus AS borrowing_limit_gpus, q.lend_gpus AS lending_limit_gpus,
       s.used_gpus, s.used_cpus, s.used_mem_gb, s.used_net_gbps, s.borrowed_gpus,
       round(s.lent_gpus, 3) AS lent_gpus,
       round((GREATEST(COALESCE(th.gpus / NULLIF(cap.gpus, 0), 0), COALESCE(th.cpus / NULLIF(cap.cpus, 0), 0),
                       COALESCE(th.mem / NULLIF(cap.mem, 0), 0), COALESCE(th.net / NULLIF(cap.net, 0), 0))
              / t.weight)::numeric, 4) AS dominant_share,
       tr.path, tr.depth, tr.parent,
       round(COALESCE(f.fair_share, 0)::numeric, 4) AS fair_share
  FROM sub s CROSS JOIN cap
  JOIN gangsched.teams t ON t.id = s.team_id
  JOIN gangsched.pools p ON p.id = s.pool_id
  JOIN tree tr ON tr.team_id = s.team_id
  LEFT JOIN gangsched._effective_quotas q ON q.team_id = s.team_id AND q.pool_id = s.pool_id
  LEFT JOIN sub_held th ON th.team_id = s.team_id
  LEFT JOIN gangsched._fair_shares() f ON f.team_id = s.team_id
 ORDER BY p.name, t.name;

-- Readers get the rows above through a function that runs without JIT: the
-- view's plan is estimated above jit_above_cost on a large cluster and
-- compiling it took 0.9-2.6 s for a query that runs in milliseconds (views
-- cannot carry SET). Every reader sees every row, so the function runs as
-- the owner (SECURITY DEFINER, see 99_search_path.sql).
CREATE FUNCTION gangsched._team_shares() RETURNS SETOF gangsched._team_shares_rows
LANGUAGE sql STABLE SET jit = off AS $$ SELECT * FROM gangsched._team_shares_rows $$;

CREATE VIEW gangsched.team_shares AS
SELECT s.* FROM gangsched._team_shares() s ORDER BY s.pool, s.team;

ALTER FUNCTION gangsched._team_shares() SECURITY DEFINER SET search_path = pg_catalog, gangsched, pg_temp;
REVOKE ALL ON FUNCTION gangsched._team_shares() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gangsched._team_shares() TO gangsched_operator, gangsched_portal, gangsched_analyst;
GRANT SELECT ON gangsched.team_shares, gangsched._team_shares_rows TO gangsched_operator;
REVOKE ALL ON gangsched.team_shares, gangsched._team_shares_rows FROM PUBLIC;
GRANT SELECT ON gangsched.team_shares TO gangsched_portal, gangsched_analyst;

-- ==== lead: submit refuses a job that could never run in the reservation it names ====
CREATE FUNCTION gangsched._check_reservation_fits(booking int, reservation text, workers int, gpus numeric)
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
    total numeric;
    largest int;
BEGIN
    SELECT coalesce(sum(n.gpus), 0), coalesce(max(n.gpus), 0) INTO total, largest
      FROM gangsched.bookings b JOIN gangsched.nodes n ON n.id = ANY (b.node_ids)
     WHERE b.id = booking;
    IF gpus > largest THEN
        RAISE EXCEPTION 'a worker of % GPUs is larger than every node of reservation "%"', gpus, reservation
            USING ERRCODE = '53S01',
                  DETAIL = format('The largest node of the reservation has %s GPUs.', largest),
                  HINT = 'Ask for fewer GPUs per worker, or name a reservation with larger nodes.';
    END IF;
    IF workers * gpus > total THEN
        RAISE EXCEPTION 'the job needs % GPUs, more than reservation "%" holds', workers * gpus, reservation
            USING ERRCODE = '53S04',
                  DETAIL = format('The nodes of the reservation have %s GPUs in all.', total),
                  HINT = 'Ask for fewer workers (or a lower min_replicas), or name a larger reservation.';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION gangsched.submit(team text, workers int, gpus numeric, cpus numeric DEFAULT 0,
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

-- 0.2.0: the jobs view names the reservation a job asked for (docs/sql-api.md#jobs)
CREATE OR REPLACE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds, j.reason, j.message, j.queue_pos,
       CASE WHEN v.all_commands OR j.team_id = ANY (v.teams) THEN j.command END AS command,
       j.checkpoint_interval, j.grace, j.queue_timeout,
       j.after_jobs, j.after_mode, j.waiting_for, j.time_limit,
       -- elastic gangs (docs/elastic.md): the replicas it holds (asks for while it waits), its range
       j.workers / (j.group_size * j.stages) AS replicas, j.min_replicas,
       COALESCE(j.max_workers, j.workers) / (j.group_size * j.stages) AS max_replicas,
       -- the reservation the job named at submit (docs/time.md), NULL for none
       b.name AS reservation
  FROM gangsched._visibility() v
  JOIN gangsched.gangs j ON v.all_rows OR j.team_id = ANY (v.teams)
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id
  LEFT JOIN gangsched.bookings b ON b.id = j.reservation_id;


-- ==== floors2: closing an inner team closes its subtree (issue 15) ====
-- submit()'s per-team limits: 53S08 for a gang above the team's worker
-- limit, 53S07 when the team already has as many pending jobs as it may.
-- O(1) while the team is far from its pending limit (one index lookup and
-- a read of the sequence); near it, a count of the team's pending jobs on
-- gangs_team_idx, stopped at the limit.
CREATE OR REPLACE FUNCTION gangsched._check_team_limits(tid int, workers int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r       record;
    up      record;
    lim     int;
    seq     bigint;
    n       int;
BEGIN
    SELECT t.name, t.max_pending, t.max_workers_per_gang, c.pending, c.upto, c.counted_at,
           (SELECT s.last_value FROM gangsched.queue_position_seq s) AS seq, t.closed_at, t.closed_reason,
           t.parent_id
      INTO r
      FROM gangsched.teams t LEFT JOIN gangsched.team_pending c ON c.team_id = t.id
     WHERE t.id = tid FOR KEY SHARE OF t;
    IF r.closed_at IS NULL AND r.parent_id IS NOT NULL THEN
        -- closing a team closes its subtree: the nearest closed ancestor
        SELECT a.name, a.closed_at, a.closed_reason INTO up
          FROM (WITH RECURSIVE anc(id, parent_id, d) AS (
                    SELECT x.id, x.parent_id, 1 FROM gangsched.teams x WHERE x.id = r.parent_id
                    UNION ALL
                    SELECT x.id, x.parent_id, anc.d + 1 FROM gangsched.teams x JOIN anc ON x.id = anc.parent_id)
                SELECT anc.id, anc.d FROM anc) s
          JOIN gangsched.teams a ON a.id = s.id
         WHERE a.closed_at IS NOT NULL ORDER BY s.d LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'team "%" is closed to new work: team "%" above it is closed', r.name, up.name
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('Team "%s" was closed at %s%s, and with it its subtree. Its queued jobs stay queued and are not placed; its running jobs run on.',
                                      up.name, up.closed_at, COALESCE(': ' || up.closed_reason, '')),
                      HINT = format('Ask the operator to reopen it with gangsched.open_team(%L).', up.name);
        END IF;
    END IF;
    IF r.closed_at IS NOT NULL THEN
        RAISE EXCEPTION 'team "%" is closed to new work', r.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Closed at %s%s. Its queued jobs stay queued and are not placed; its running jobs run on.',
                                  r.closed_at, COALESCE(': ' || r.closed_reason, '')),
                  HINT = format('Ask the operator to reopen it with gangsched.open_team(%L).', r.name);
    END IF;
    -- jobs go to leaf teams (the row lock above orders this against
    -- add_team / set_team_parent making the team a parent)
    IF EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = tid) THEN
        RAISE EXCEPTION 'team "%" has subteams and takes no jobs of its own', r.name
            USING ERRCODE = '55S01',
                  DETAIL = format('Jobs go to leaf teams; the leaves under "%s" are: %s.', r.name,
                                  (SELECT string_agg(x.path, ', ' ORDER BY x.path) FROM gangsched._team_tree x
                                    WHERE x.leaf AND tid = ANY (x.ancestors))),
                  HINT = 'Submit to one of its leaf teams.';
    END IF;
    PERFORM gangsched._check_gang_limit(r.name, r.max_workers_per_gang, workers);
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

-- ==== pre12c: victim selection in job order, victims counted by the round (issue 12) ====
-- The gangs holding capacity in job order (src/loader.c loads them ORDER BY id).
CREATE INDEX gangs_held_idx ON gangsched.gangs (id) WHERE state IN ('placed', 'running');
-- 'preempting' events are counted by the round's victims statement (src/round.c).
DROP TRIGGER events_counted ON gangsched.events;
CREATE TRIGGER events_counted
    AFTER INSERT ON gangsched.events
    FOR EACH ROW WHEN (NEW.kind IN ('finished', 'failed', 'cancelled', 'expired', 'requeued'))
    EXECUTE FUNCTION gangsched._count_event();

-- ==== shrink: shrinking an elastic victim instead of preempting it (issue 17 stage 4; docs/elastic.md#shrinking) ====

-- A running elastic gang chosen as a victim for only some of its replicas
-- keeps running and gives back its highest-numbered workers (worker >=
-- shrink_to, whole replicas at the end) to the preemptor shrink_for by
-- shrink_deadline (docs/elastic.md#shrinking). All three are set together,
-- only while the gang runs, and cleared when the shrink completes or the
-- gang stops running (the trigger below).
ALTER TABLE gangsched.gangs
    ADD COLUMN shrink_to       int,
    ADD COLUMN shrink_for      bigint,
    ADD COLUMN shrink_deadline timestamptz,
    ADD CONSTRAINT gangs_shrink_check CHECK (
        ((shrink_to IS NULL) = (shrink_for IS NULL) AND (shrink_to IS NULL) = (shrink_deadline IS NULL))
        AND shrink_to >= 1 AND shrink_to < workers);
-- preemptors waiting for a shrink (_place_ready_nominated), overdue shrinks (_kill_overdue)
CREATE INDEX gangs_shrink_for_idx ON gangsched.gangs (shrink_for) WHERE shrink_for IS NOT NULL;

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
-- shrinking already, to a valid size. An event 'shrinking' each and a
-- notice to each node holding released workers. Returns the gangs shrunk.
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
-- deadline; 0 after a release, whose workers checkpointed as they stopped).
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
ALTER TABLE gangsched.gangs_archive ADD COLUMN shrink_to int, ADD COLUMN shrink_for bigint, ADD COLUMN shrink_deadline timestamptz;

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
CREATE OR REPLACE FUNCTION gangsched._place_ready_nominated(only_job bigint DEFAULT NULL) RETURNS int
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
CREATE OR REPLACE FUNCTION gangsched._kill_overdue() RETURNS int
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
-- has the world size after the shrink.
CREATE OR REPLACE FUNCTION gangsched.node_work(node text)
RETURNS TABLE (job bigint, action text, state text, worker int, local_rank int, local_world_size int,
               world_size int, devices int[], first_slice int, slices int, cpus numeric, mem_gb numeric,
               net_gbps numeric, command text, rank0_node text, deadline timestamptz, placed_at timestamptz,
               gpus numeric, seconds_left float8, time_limit interval, limit_at timestamptz,
               limit_seconds_left float8)
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
           extract(epoch FROM g.placed_at + g.time_limit - gangsched.now())::float8
      FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
     WHERE a.node_id = n.id AND upper_inf(a.during) AND g.state IN ('placed', 'running', 'preempting')
     ORDER BY a.job, a.worker;
END $$;

-- One row per violation; none when healthy. Numbers as in docs/invariants.md.
-- jit is off: the unnest/generate_series estimates make the plan look costly
-- enough to JIT-compile (seconds) although the rows are few.
CREATE OR REPLACE FUNCTION gangsched.check_invariants()
RETURNS TABLE (invariant int, job bigint, node text, detail text)
LANGUAGE sql STABLE SET jit = off AS $$
WITH cur AS (
    SELECT a.*, n.name AS node_name, n.topology
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)),
cur_slots AS (
    SELECT c.job, c.worker, c.node_id, s.device, s.slot
      FROM cur c, gangsched._slots(c.devices, c.first_slice, c.slices) s),
hist_slots AS (
    SELECT a.id, a.job, a.node_id, s.slot, a.during
      FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s),
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
    -- a current allocation began with the placement; an elastic gang's
    -- grown workers later (docs/elastic.md), never before it
    OR (upper_inf(a.during) AND lower(a.during) IS DISTINCT FROM j.placed_at
        AND NOT (j.min_replicas IS NOT NULL AND lower(a.during) > j.placed_at))
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
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job
--    (victims still draining excepted: its own, or those of an earlier
--    preemptor of the same round whose rest it waits for, as its
--    'nominated' event records them in waits_for)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting'
            AND (v.preempted_for = h.job
                 OR EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(v.id))))
   -- a shrinking gang's released workers, until they go (docs/elastic.md#shrinking)
   AND NOT COALESCE(hs.worker >= v.shrink_to
                    AND (v.shrink_for = h.job
                         OR EXISTS (SELECT FROM gangsched.events e
                                     WHERE e.job = h.job AND e.kind = 'nominated'
                                       AND e.detail->'waits_for' @> to_jsonb(v.id))), false)
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2
                                      WHERE h2.node_id = c.node_id
                                        AND (h2.job = v.preempted_for
                                             OR EXISTS (SELECT FROM gangsched.events e
                                                         WHERE e.job = h2.job AND e.kind = 'nominated'
                                                           AND e.detail->'waits_for' @> to_jsonb(v.id)))))
                AND NOT COALESCE(c.worker >= v.shrink_to
                                 AND EXISTS (SELECT FROM gangsched.holds h2
                                              WHERE h2.node_id = c.node_id
                                                AND (h2.job = v.shrink_for
                                                     OR EXISTS (SELECT FROM gangsched.events e
                                                                 WHERE e.job = h2.job AND e.kind = 'nominated'
                                                                   AND e.detail->'waits_for' @> to_jsonb(v.id)))), false)
              GROUP BY c.node_id) o ON o.node_id = h.node_id
 WHERE h.cpus + COALESCE(o.cpus, 0) > n.cpus OR h.mem + COALESCE(o.mem, 0) > n.mem_gb OR h.net + COALESCE(o.net, 0) > n.net_gbps
UNION ALL
SELECT 5, h.job, NULL, format('job holds capacity but is %s', j.state)
  FROM (SELECT DISTINCT job FROM gangsched.holds) h JOIN gangsched.gangs j ON j.id = h.job
 WHERE j.state <> 'nominated'
UNION ALL
SELECT 5, h.job, n.name, format('two nominated jobs hold slot %s', s.slot)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id,
       gangsched._slots(h.devices, h.first_slice, h.slices) s
 WHERE EXISTS (SELECT FROM gangsched.holds h2, gangsched._slots(h2.devices, h2.first_slice, h2.slices) s2
                WHERE h2.node_id = h.node_id AND h2.job < h.job AND s2.slot = s.slot)
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
UNION ALL
-- 8. dependencies: only pending jobs wait, and only for jobs of their own
--    team that they listed and that have not ended (58_dependencies.sql)
SELECT 8, g.id, NULL,
       CASE WHEN g.state <> 'pending' THEN format('job is %s but still waits for jobs %s', g.state, g.waiting_for)
            WHEN NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) THEN
                 format('job waits for jobs %s but listed only %s', g.waiting_for, COALESCE(g.after_jobs, '{}'))
            ELSE format('job waits for job %s, which %s', x.id,
                        CASE WHEN x.state IS NULL THEN 'does not exist'
                             WHEN x.team_id <> g.team_id THEN 'belongs to another team'
                             ELSE 'has ended (' || x.state || ')' END) END
  FROM gangsched.gangs g
  LEFT JOIN LATERAL (SELECT w.id, d.state, d.team_id FROM unnest(g.waiting_for) w(id)
                       LEFT JOIN gangsched.gangs d ON d.id = w.id
                      WHERE d.id IS NULL OR d.team_id <> g.team_id
                         OR d.state IN ('finished', 'failed', 'cancelled', 'expired')
                      ORDER BY w.id LIMIT 1) x ON true
 WHERE g.waiting_for IS NOT NULL
   AND (g.state <> 'pending' OR NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) OR x.id IS NOT NULL)
UNION ALL
-- 9. the team tree (docs/fairness.md, "Team trees"): every team is reached
--    from a top-level team (no cycle), only leaf teams have live jobs, and
--    the GPUs of the nearest quotas below a team's quota in a pool fit in it
SELECT 9, NULL, NULL, format('team %s is not reached from a top-level team (its parents form a cycle)', t.name)
  FROM gangsched.teams t
 WHERE NOT EXISTS (SELECT FROM gangsched._team_tree x WHERE x.team_id = t.id)
UNION ALL
SELECT 9, g.id, NULL, format('job of team %s, which has subteams, is %s', t.name, g.state)
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
   AND EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = g.team_id)
UNION ALL
SELECT 9, NULL, NULL, format('the teams below %s hold %s GPUs of nominal quota in pool %s, more than its %s',
                             pt.name, k.below, pl.name, pq.gpus)
  FROM (SELECT gangsched._quota_parent(q.team_id, q.pool_id) AS parent, q.pool_id, sum(q.gpus) AS below
          FROM gangsched.quotas q
          -- teams reached from the top only: a cycle is reported above,
          -- and walking up one would not end
          JOIN gangsched._team_tree t ON t.team_id = q.team_id
         WHERE t.parent_id IS NOT NULL
         GROUP BY 1, 2) k
  JOIN gangsched.quotas pq ON pq.team_id = k.parent AND pq.pool_id = k.pool_id
  JOIN gangsched.teams pt ON pt.id = k.parent
  JOIN gangsched.pools pl ON pl.id = k.pool_id
 WHERE k.below > pq.gpus
UNION ALL
-- 10. reservations and maintenance windows (docs/time.md): no allocation
--     begins on a booked node inside the window for a job the booking does
--     not permit (a maintenance window permits none; a reservation its
--     team's subtree and the jobs that name it), and no node is in two
--     bookings at overlapping times
SELECT 10, a.job, n.name,
       format('allocation begun at %s lies inside %s %s (%s to %s)', lower(a.during),
              CASE WHEN b.team_id IS NULL THEN 'maintenance window' ELSE 'reservation' END, b.name, b.starts, b.ends)
  FROM gangsched.bookings b
  JOIN gangsched.allocations a ON a.node_id = ANY (b.node_ids) AND lower(a.during) >= b.starts AND lower(a.during) < b.ends
  JOIN gangsched.gangs g ON g.id = a.job
  JOIN gangsched.nodes n ON n.id = a.node_id
 WHERE b.team_id IS NULL
    OR NOT (g.reservation_id IS NOT DISTINCT FROM b.id
            OR g.team_id IN (WITH RECURSIVE s(id) AS (SELECT b.team_id
                                                      UNION
                                                      SELECT t.id FROM s JOIN gangsched.teams t ON t.parent_id = s.id)
                             SELECT s.id FROM s))
UNION ALL
SELECT 10, NULL, n.name, format('the node is in %s and %s at overlapping times', b1.name, b2.name)
  FROM gangsched.bookings b1
  JOIN gangsched.bookings b2 ON b1.id < b2.id AND b1.node_ids && b2.node_ids AND b1.starts < b2.ends AND b2.starts < b1.ends
  JOIN gangsched.nodes n ON n.id = ANY (b1.node_ids) AND n.id = ANY (b2.node_ids)
UNION ALL
-- 11. elastic gangs (docs/elastic.md): a job holds (or, nominated, is held
--     capacity for) a whole number of replicas between its minimum and its
--     maximum, and asks for its maximum while it waits; each replica's
--     groups are whole (invariant 3 checks their ranks and domains)
SELECT 11, g.id, NULL, format('elastic job is %s with %s workers; replicas of %s workers from %s to %s are allowed%s',
                              g.state, g.workers, g.group_size * g.stages, g.min_replicas,
                              g.max_workers / (g.group_size * g.stages),
                              CASE WHEN g.state = 'pending' THEN format(', and a waiting job asks for all %s', g.max_workers) ELSE '' END)
  FROM gangsched.gangs g
 WHERE g.min_replicas IS NOT NULL
   AND (g.max_workers IS NULL OR g.workers % (g.group_size * g.stages) <> 0
        OR g.workers < g.min_replicas * g.group_size * g.stages OR g.workers > g.max_workers
        OR (g.state = 'pending' AND g.workers <> g.max_workers))
UNION ALL
SELECT 11, g.id, NULL, format('rigid job has max_workers %s', g.max_workers)
  FROM gangsched.gangs g
 WHERE g.min_replicas IS NULL AND g.max_workers IS NOT NULL
UNION ALL
-- a shrink pending: a running elastic gang gives back whole replicas at its
-- end, keeping at least its minimum (docs/elastic.md#shrinking)
SELECT 11, g.id, NULL, format('job is %s with %s workers and shrinks to %s; replicas of %s workers, at least %s',
                              g.state, g.workers, g.shrink_to, g.group_size * g.stages, g.min_replicas)
  FROM gangsched.gangs g
 WHERE g.shrink_to IS NOT NULL
   AND (g.state <> 'running' OR g.min_replicas IS NULL OR g.shrink_to >= g.workers
        OR g.shrink_to % (g.group_size * g.stages) <> 0
        OR g.shrink_to < g.min_replicas * g.group_size * g.stages)
$$;


-- ==== lead: node_work returns the job's grace (the agent's restart grace; docs/agent.md) ====
DROP FUNCTION gangsched.node_work(text);
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

-- ==== shrinkops: shrinks in the jobs view, the metrics and preemption_summary (issue 17; docs/elastic.md#shrinking) ====

-- The portal's view of jobs (the table underneath is gangsched.gangs:
-- every job is a gang). Each role sees what docs/security.md says: a
-- portal its teams' jobs, an analyst and an operator every job; the command
-- only of its own teams' jobs (an operator: every command).
CREATE OR REPLACE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds, j.reason, j.message, j.queue_pos,
       CASE WHEN v.all_commands OR j.team_id = ANY (v.teams) THEN j.command END AS command,
       j.checkpoint_interval, j.grace, j.queue_timeout,
       j.after_jobs, j.after_mode, j.waiting_for, j.time_limit,
       -- elastic gangs (docs/elastic.md): the replicas it holds (asks for while it waits), its range
       j.workers / (j.group_size * j.stages) AS replicas, j.min_replicas,
       COALESCE(j.max_workers, j.workers) / (j.group_size * j.stages) AS max_replicas,
       -- the reservation the job named at submit (docs/time.md), NULL for none
       b.name AS reservation,
       -- a shrink pending (docs/elastic.md#shrinking): the workers and replicas
       -- the gang keeps, the deadline of the rest, and the job they go to, shown
       -- only to a role that may see that job (a portal learns nothing of other
       -- teams' jobs; the subquery runs for shrinking gangs only)
       j.shrink_to, j.shrink_to / (j.group_size * j.stages) AS shrink_replicas, j.shrink_deadline,
       CASE WHEN j.shrink_for IS NULL THEN NULL
            WHEN v.all_rows OR (SELECT s.team_id FROM gangsched.gangs s WHERE s.id = j.shrink_for) = ANY (v.teams)
            THEN j.shrink_for END AS shrink_for
  FROM gangsched._visibility() v
  JOIN gangsched.gangs j ON v.all_rows OR j.team_id = ANY (v.teams)
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id
  LEFT JOIN gangsched.bookings b ON b.id = j.reservation_id;

-- The round's shrink decisions (src/round.c): jobs[k] gives back its
-- workers from tos[k] on to the nominated job fors[k], by t + its grace
-- (as for preempt_deadline). Only a gang still running, elastic and not
-- shrinking already, to a valid size. An event 'shrinking' each, a notice
-- to each node holding released workers, and the counters
-- gangsched_team_shrinks_total and _shrink_replicas_total (one delta row
-- per team and counter, as the round's victims statement counts its
-- preemptions: 75_metrics.sql). Returns the gangs shrunk.
CREATE OR REPLACE FUNCTION gangsched._shrink_start(jobs bigint[], tos int[], fors bigint[], t timestamptz,
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

-- Complete the shrink of gang `job` once none of its released workers
-- holds an allocation: it runs on shrink_to workers, an event 'shrunk', a
-- resize notice to every node still running it, and its preemptor placed
-- if it waits for nothing else. `lost`: GPU-seconds lost (killed at the
-- deadline; 0 after a release, whose workers checkpointed as they stopped),
-- counted in gangsched_team_lost_gpu_seconds_total as a requeue's are.
CREATE OR REPLACE FUNCTION gangsched._shrink_complete(job bigint, how text, lost numeric, t timestamptz) RETURNS bool
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

DROP FUNCTION gangsched.preemption_summary(timestamptz, timestamptz, text);

-- Preemptions in [from, to), per team of the victims and for all teams
-- (team NULL): victims told to stop ('preempting' events), how they went
-- ('requeued' events: released by their agent, or killed at their grace
-- deadline), the work they lost (GPU-hours since their last checkpoint,
-- as recorded by the requeue), how many jobs of the team preempted
-- others ('nominated'), and the other requeues (node down, start timeout)
-- with their own lost work. by => 'subtree': a team's row sums its whole
-- subtree. path: the team's path in the tree (NULL on the all-teams row).
-- Then the team's elastic gangs shrunk instead of preempted
-- (docs/elastic.md#shrinking): shrinks decided ('shrinking' events), the
-- replicas they gave back, the shrinks whose released workers were killed
-- at the deadline ('shrunk' events) and the work those lost.
CREATE FUNCTION gangsched.preemption_summary("from" timestamptz, "to" timestamptz, by text DEFAULT 'team')
RETURNS TABLE (team text, preemptions bigint, released bigint, killed bigint, lost_gpu_hours float8,
               preemptors bigint, other_requeues bigint, other_lost_gpu_hours float8, path text,
               shrinks bigint, shrink_replicas bigint, shrinks_killed bigint, shrink_lost_gpu_hours float8)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._bucket_seconds($1, $2, $2 - $1);   -- refuses a bad window
SELECT gangsched._check_by($3);
WITH e AS MATERIALIZED (
    SELECT e.team_id, e.kind,
           CASE WHEN e.kind = 'shrunk' THEN CASE WHEN e.reason LIKE '%; killed at its deadline' THEN 'shrink killed' END
                WHEN e.kind <> 'requeued' THEN NULL
                WHEN e.reason LIKE 'preempted for job %' THEN 'released'
                WHEN e.reason LIKE 'killed at its grace deadline%' THEN 'killed'
                ELSE 'other' END AS how,
           COALESCE((e.detail->>'lost_gpu_seconds')::float8, 0) AS lost,
           CASE WHEN e.kind = 'shrinking'
                THEN (e.detail->>'was_replicas')::int - (e.detail->>'replicas')::int END AS replicas
      FROM gangsched.events e
     WHERE e.at >= $1 AND e.at < $2 AND e.kind IN ('preempting', 'requeued', 'nominated', 'shrinking', 'shrunk')),
-- the events of teams that exist (as the join to teams always kept them)
et AS (SELECT e.* FROM e WHERE EXISTS (SELECT FROM gangsched.teams t WHERE t.id = e.team_id))
SELECT * FROM (
    SELECT t.name,
           count(*) FILTER (WHERE et.kind = 'preempting'),
           count(*) FILTER (WHERE et.how = 'released'),
           count(*) FILTER (WHERE et.how = 'killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how IN ('released', 'killed')), 0) / 3600,
           count(*) FILTER (WHERE et.kind = 'nominated'),
           count(*) FILTER (WHERE et.how = 'other'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how = 'other'), 0) / 3600,
           tr.path,
           count(*) FILTER (WHERE et.kind = 'shrinking'),
           COALESCE(sum(et.replicas), 0),
           count(*) FILTER (WHERE et.how = 'shrink killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.kind = 'shrunk'), 0) / 3600
      FROM et JOIN gangsched._rollup($3) r ON r.member = et.team_id
      JOIN gangsched.teams t ON t.id = r.team_id
      JOIN gangsched._team_tree tr ON tr.team_id = r.team_id
     GROUP BY t.name, tr.path
    UNION ALL
    SELECT NULL,
           count(*) FILTER (WHERE et.kind = 'preempting'),
           count(*) FILTER (WHERE et.how = 'released'),
           count(*) FILTER (WHERE et.how = 'killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how IN ('released', 'killed')), 0) / 3600,
           count(*) FILTER (WHERE et.kind = 'nominated'),
           count(*) FILTER (WHERE et.how = 'other'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how = 'other'), 0) / 3600,
           NULL,
           count(*) FILTER (WHERE et.kind = 'shrinking'),
           COALESCE(sum(et.replicas), 0),
           count(*) FILTER (WHERE et.how = 'shrink killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.kind = 'shrunk'), 0) / 3600
      FROM et) x
 ORDER BY 1 NULLS LAST
$$;

-- The replicas each job held over time (elastic gangs, docs/elastic.md;
-- a rigid job holds all of its replicas whenever it holds anything): one
-- row per job and interval of [from, to) in which the number of its
-- allocations stayed the same, from the allocation history. `until` is
-- NULL while still held. Jobs archived (archive_history()) are not shown:
-- their allocations went with them. The intervals are cut from the whole
-- allocation history of the jobs that held something in the window (an
-- interval that began before `from` keeps its real `since`, and counts
-- only what was held then: a worker a shrink released before `from` ended
-- the interval before it).
CREATE OR REPLACE FUNCTION gangsched.replica_history("from" timestamptz, "to" timestamptz)
RETURNS TABLE (job bigint, name text, team text, since timestamptz, until timestamptz, workers int,
               replicas int, min_replicas int, max_replicas int)
LANGUAGE sql STABLE SET jit = off AS $$
WITH j AS (
    SELECT DISTINCT x.job FROM gangsched.allocations x WHERE x.during && tstzrange($1, $2)),
a AS (
    SELECT x.job, x.team_id, x.during FROM gangsched.allocations x WHERE x.job IN (SELECT j.job FROM j)),
pts AS (
    SELECT a.job, lower(a.during) AS t FROM a
    UNION
    SELECT a.job, upper(a.during) FROM a WHERE NOT upper_inf(a.during)),
seg AS (
    SELECT p.job, p.t AS since, lead(p.t) OVER (PARTITION BY p.job ORDER BY p.t) AS until FROM pts p),
held AS (
    SELECT s.job, s.since, s.until,
           -- after a job's last change point only what is still held counts
           (SELECT count(*) FROM a WHERE a.job = s.job AND a.during @> s.since
                                     AND (s.until IS NOT NULL OR upper_inf(a.during)))::int AS n
      FROM seg s),
shape AS (
    SELECT g.id, g.name, g.team_id, g.group_size * g.stages AS unit, g.min_replicas,
           COALESCE(g.max_workers, g.workers) AS max_workers FROM gangsched.gangs g)
SELECT h.job, s.name, t.name, h.since, h.until, h.n, h.n / s.unit, s.min_replicas, s.max_workers / s.unit
  FROM held h JOIN shape s ON s.id = h.job JOIN gangsched.teams t ON t.id = s.team_id
 WHERE h.n > 0 AND h.since < $2 AND (h.until IS NULL OR h.until > $1)
 ORDER BY h.job, h.since
$$;

-- ==== lead: _enforce_time_limits locks the jobs past their limit in one scan (a stale estimate made the semi-join rescan it per running job) ====
-- The round's time rule for limits: jobs whose limit has passed get the
-- preemption signal with their grace (they checkpoint and release; a
-- 'time limit' event, not counted as a preemption by the metrics), and
-- those still holding capacity at that deadline are killed and fail with
-- reason 'time limit'. Returns how many were killed.
CREATE OR REPLACE FUNCTION gangsched._enforce_time_limits() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t      timestamptz := gangsched.now();
    told   int;
    due    bigint[];
    overdue bigint[];
BEGIN
    -- the jobs past their limit, locked in one scan first: as a semi-join
    -- of the UPDATE, a stale row estimate (1 right after a big round)
    -- made the planner rescan the locking subquery for every running job
    SELECT array_agg(l.id ORDER BY l.id) INTO due
      FROM (SELECT x.id FROM gangsched.gangs x
             WHERE x.state IN ('placed', 'running') AND x.time_limit IS NOT NULL
               AND x.placed_at + x.time_limit <= t
             ORDER BY x.id FOR UPDATE SKIP LOCKED) l;
    WITH s AS (
        UPDATE gangsched.gangs g
           SET state = 'preempting', preempted_for = NULL,
               preempt_deadline = t + LEAST(COALESCE(g.grace, pg_catalog.current_setting('gangsched.default_grace')::interval),
                                            pg_catalog.current_setting('gangsched.max_grace')::interval),
               reason = 'time limit'
         WHERE g.id = ANY (due)
           AND g.state IN ('placed', 'running')
        RETURNING g.id, g.team_id, g.preempt_deadline, g.time_limit),
    ev AS (
        INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
        SELECT t, 'time limit', s.id, s.team_id, 'stopped at its time limit',
               jsonb_build_object('time_limit', s.time_limit, 'deadline', s.preempt_deadline)
          FROM s RETURNING 1)
    SELECT count(pg_notify('gangsched_node_' || a.node_id,
                           json_build_object('event', 'preempt', 'job', s.id, 'deadline', s.preempt_deadline,
                                             'reason', 'time limit')::text))
      INTO told
      FROM s JOIN (SELECT DISTINCT x.job, x.node_id FROM gangsched.allocations x
                    WHERE upper_inf(x.during) AND x.job IN (SELECT s.id FROM s)) a ON a.job = s.id;
    SELECT array_agg(l.id ORDER BY l.id) INTO overdue
      FROM (SELECT g.id FROM gangsched.gangs g
             WHERE g.state = 'preempting' AND g.preempted_for IS NULL AND g.preempt_deadline <= t
             ORDER BY g.id FOR UPDATE SKIP LOCKED) l;
    RETURN gangsched._end_time_limited(overdue, 'killed at the grace deadline after its time limit', t);
END $$;

-- ==== lead: the jobs view masks the job a reason names for a portal that may not see it (docs/security.md) ====
CREATE OR REPLACE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds,
       -- the job a reason names ("preempted for job N", "shrinking … for job N")
       -- is masked as shrink_for is: "a job of another team" for a portal
       -- that may not see it (the subquery runs for such reasons only)
       CASE WHEN v.all_rows OR strpos(j.reason, 'for job ') = 0 THEN j.reason
            WHEN (SELECT s.team_id FROM gangsched.gangs s
                   WHERE s.id = substring(j.reason FROM 'for job ([0-9]{1,18})')::bigint) = ANY (v.teams)
            THEN j.reason
            ELSE regexp_replace(j.reason, 'for job [0-9]+', 'for a job of another team', 'g') END AS reason,
       j.message, j.queue_pos,
       CASE WHEN v.all_commands OR j.team_id = ANY (v.teams) THEN j.command END AS command,
       j.checkpoint_interval, j.grace, j.queue_timeout,
       j.after_jobs, j.after_mode, j.waiting_for, j.time_limit,
       -- elastic gangs (docs/elastic.md): the replicas it holds (asks for while it waits), its range
       j.workers / (j.group_size * j.stages) AS replicas, j.min_replicas,
       COALESCE(j.max_workers, j.workers) / (j.group_size * j.stages) AS max_replicas,
       -- the reservation the job named at submit (docs/time.md), NULL for none
       b.name AS reservation,
       -- a shrink pending (docs/elastic.md#shrinking): the workers and replicas
       -- the gang keeps, the deadline of the rest, and the job they go to, shown
       -- only to a role that may see that job (a portal learns nothing of other
       -- teams' jobs; the subquery runs for shrinking gangs only)
       j.shrink_to, j.shrink_to / (j.group_size * j.stages) AS shrink_replicas, j.shrink_deadline,
       CASE WHEN j.shrink_for IS NULL THEN NULL
            WHEN v.all_rows OR (SELECT s.team_id FROM gangsched.gangs s WHERE s.id = j.shrink_for) = ANY (v.teams)
            THEN j.shrink_for END AS shrink_for
  FROM gangsched._visibility() v
  JOIN gangsched.gangs j ON v.all_rows OR j.team_id = ANY (v.teams)
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id
  LEFT JOIN gangsched.bookings b ON b.id = j.reservation_id;

/* ------------------------------------------------------------------ */
/* why_pending: a portal reads "a job of another team" for a job it     */
/* may not see (the job first in line, capacity kept for a job)       */
/* ------------------------------------------------------------------ */
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

CREATE OR REPLACE FUNCTION gangsched.why_pending(job bigint)
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
