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
-- about 40 us per job placed); 'preempting' is written only by the round's
-- victims statement (src/round.c), which counts its victims per team itself
-- (the trigger cost bench/preempt.sh's round of 298 victims about 9 ms).
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
    FOR EACH ROW WHEN (NEW.kind IN ('finished', 'failed', 'cancelled', 'expired', 'requeued'))
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
