/* ------------------------------------------------------------------ */
/* Metrics for monitoring (docs/monitoring.md)                         */
/* ------------------------------------------------------------------ */

-- The counters (`_total`): how many jobs were submitted, placed, ended,
-- preempted, killed and requeued, the GPU-seconds lost, and the queue-wait
-- histogram. They are counted where events are written, not derived from
-- the events table: old history may be archived (its rows leave
-- gangsched.events), and a counter must never go down.
--
-- Every event of a counted kind adds its counts to metric_deltas (a
-- trigger on gangsched.events; 'submitted' and 'placed' by their writers)
-- (insert-only: concurrent writers never wait for each other there); the
-- worker folds the deltas into metric_counters after each round, in a
-- transaction of its own (src/worker.c), so neither the round nor a tenant
-- waits for a fold, and a round folds them itself only when more than
-- 50,000 have piled up (rounds driven by pg_cron or by hand, src/round.c).
-- gangsched.metrics reads the sum of both, so a count is visible as soon
-- as its event commits, folded or not, and a fold moves counts from one
-- table to the other in one transaction: a count is never lost nor
-- counted twice, and moves only with the transaction that wrote its event.
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
-- 'placed' in the round (src/round.c adds up the rows its placement
-- statement returns and writes one row per team and counter) and in
-- _place_ready_nominated (67_preemption.sql; this trigger cost a round
-- about 40 us per job placed).
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

-- Fold the deltas into the counters: the worker after each round, in its
-- own transaction (src/worker.c). Folds may overlap (the worker's, a
-- round's past the backstop, the owner's by hand): a delta row another
-- fold deletes is waited for and then skipped, so each is added once.
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
