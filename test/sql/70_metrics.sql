-- gangsched.metrics in virtual time (docs/monitoring.md): a scenario with
-- jobs placed, running, preempted (one released, one killed at its
-- deadline), finished, cancelled and pending, a node down; every family's
-- series checked against what the tables hold; the counters counted where
-- the events are written and folded by the round; who may read it, who not.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';

SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved'), gangsched.add_pool('spot', 'opportunistic');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 3) i;
SELECT gangsched.add_node('s1', 'spot', 'r2', 32, 256, 100, 4, 'a100', 80);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 16);
SELECT gangsched.set_quota('b', 'main', 8);

-- before any job: capacity, zeros
SELECT name, type, labels, value FROM gangsched.metrics
 WHERE name IN ('gangsched_pool_gpus', 'gangsched_pool_gpus_allocated', 'gangsched_nodes', 'gangsched_team_pending_jobs')
 ORDER BY name, labels::text;

-- b fills main at 00:00 (v1, v2 borrowed beyond its quota of 8), a waits
SELECT gangsched.submit('b', 1, 8, name => 'v1'), gangsched.submit('b', 1, 8, name => 'v2'),
       gangsched.submit('b', 1, 8, name => 'v3');
SET gangsched.clock_override = '2030-01-01 00:00:40+00';
SELECT placed FROM gangsched.run_round();
SELECT count(gangsched.job_started(job, node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) p;
SET gangsched.clock_override = '2030-01-01 00:30:00+00';
-- a's job needs two nodes: preempts two of b's
SELECT gangsched.submit('a', 2, 8, name => 'p');
SELECT gangsched.submit('a', 1, 4, pool => 'spot', name => 'spotjob');
SELECT gangsched.submit('b', 2, 8, name => 'waiting');
SELECT preempted, placed FROM gangsched.run_round();
SELECT name, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT name, labels, value FROM gangsched.metrics
 WHERE name LIKE 'gangsched_pool_%' OR name = 'gangsched_nodes' ORDER BY name, labels::text;
SELECT name, labels, value FROM gangsched.metrics WHERE name = 'gangsched_jobs_live' AND value > 0 ORDER BY labels::text;
SELECT name, labels, value FROM gangsched.metrics WHERE name LIKE 'gangsched_team_%' ORDER BY name, labels::text;

-- one victim releases without a checkpoint at 00:30:30; the other is killed
-- at its deadline (00:31); the preemptor is placed
SET gangsched.clock_override = '2030-01-01 00:30:30+00';
SELECT gangsched.job_released(job, checkpointed => false) FROM gangsched.jobs
 WHERE state = 'preempting' ORDER BY job LIMIT 1;
SET gangsched.clock_override = '2030-01-01 00:31:00+00';
SELECT requeued FROM gangsched.run_round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
-- v1 finishes, a job of a's is cancelled; the node s1 goes down (spotjob
-- goes back to the queue); v2, v3 and waiting wait
SELECT gangsched.job_finished(job, true) FROM gangsched.jobs WHERE name = 'v1';
SELECT gangsched.cancel(gangsched.submit('a', 1, 8, name => 'c1'));
SELECT gangsched.set_node_state('s1', 'down');
SET gangsched.clock_override = '2030-01-01 00:31:10+00';
SELECT placed FROM gangsched.run_round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT name, labels, value FROM gangsched.metrics
 WHERE name IN ('gangsched_team_pending_jobs', 'gangsched_team_pending_gpus', 'gangsched_team_oldest_pending_age_seconds',
                'gangsched_pool_gpus_unavailable', 'gangsched_pool_gpus_allocated', 'gangsched_pool_heartbeat_age_max_seconds')
    OR (name = 'gangsched_nodes' AND value > 0)
 ORDER BY name, labels::text;

-- every counter against the events and the jobs (the same numbers two ways)
SELECT m.name, m.labels ->> 'team' AS team, m.value,
       CASE m.name
         WHEN 'gangsched_team_jobs_submitted_total' THEN (SELECT count(*) FROM gangsched.event_log e WHERE e.team = m.labels ->> 'team' AND e.kind = 'submitted')
         WHEN 'gangsched_team_jobs_placed_total' THEN (SELECT count(*) FROM gangsched.event_log e WHERE e.team = m.labels ->> 'team' AND e.kind = 'placed')
         WHEN 'gangsched_team_preemptions_total' THEN (SELECT sum(preemptions) FROM gangsched.jobs j WHERE j.team = m.labels ->> 'team')
         WHEN 'gangsched_team_requeues_total' THEN (SELECT sum(requeues) FROM gangsched.jobs j WHERE j.team = m.labels ->> 'team')
         WHEN 'gangsched_team_kills_total' THEN (SELECT count(*) FROM gangsched.event_log e WHERE e.team = m.labels ->> 'team' AND e.kind = 'requeued' AND e.reason LIKE 'killed%')
         WHEN 'gangsched_team_lost_gpu_seconds_total' THEN (SELECT sum(lost_gpu_seconds) FROM gangsched.jobs j WHERE j.team = m.labels ->> 'team')
         WHEN 'gangsched_team_shrinks_total' THEN (SELECT count(*) FROM gangsched.event_log e WHERE e.team = m.labels ->> 'team' AND e.kind = 'shrinking')
         WHEN 'gangsched_team_shrink_replicas_total' THEN (SELECT COALESCE(sum((e.detail ->> 'was_replicas')::int - (e.detail ->> 'replicas')::int), 0) FROM gangsched.event_log e WHERE e.team = m.labels ->> 'team' AND e.kind = 'shrinking')
       END AS expected
  FROM gangsched.metrics m WHERE m.name LIKE 'gangsched_team_%_total' ORDER BY 1, 2;
SELECT name, labels, value FROM gangsched.metrics WHERE name = 'gangsched_jobs_ended_total' AND value > 0 ORDER BY labels::text;
-- the queue-wait histogram: v1-v3 waited 40 s, p 60 s (00:30 to 00:31),
-- the requeued victims' placements (if any) from their requeue
SELECT j.name, e.at - g.queued_at AS wait_if_still_placed
  FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job JOIN gangsched.jobs j ON j.job = e.job
 WHERE e.kind = 'placed' ORDER BY e.id;
SELECT name, labels ->> 'team' AS team, labels ->> 'le' AS le, value FROM gangsched.metrics
 WHERE name LIKE 'gangsched_queue_wait_seconds%' AND labels ->> 'team' = 'a'
   AND (labels ->> 'le' IS NULL OR labels ->> 'le' IN ('30', '60', '120', '+Inf'))
 ORDER BY name, (labels ->> 'le' = '+Inf'), NULLIF(labels ->> 'le', '+Inf')::float8;
-- buckets are cumulative and end with the count
SELECT t.team, bool_and(b.value >= b.prev) AS cumulative,
       max(b.value) FILTER (WHERE b.le = '+Inf') = max(c.value) AS inf_is_count
  FROM (SELECT labels ->> 'team' AS team, labels ->> 'le' AS le, value,
               lag(value, 1, 0::float8) OVER (PARTITION BY labels ->> 'team'
                                              ORDER BY (labels ->> 'le' = '+Inf'), NULLIF(labels ->> 'le', '+Inf')::float8) AS prev
          FROM gangsched.metrics WHERE name = 'gangsched_queue_wait_seconds_bucket') b
  JOIN (SELECT labels ->> 'team' AS team, value FROM gangsched.metrics WHERE name = 'gangsched_queue_wait_seconds_count') c USING (team)
  JOIN (SELECT DISTINCT labels ->> 'team' AS team FROM gangsched.metrics WHERE name = 'gangsched_queue_wait_seconds_count') t USING (team)
 GROUP BY t.team ORDER BY 1;

-- the rounds left the deltas (the worker folds them after a round, in a
-- transaction of its own); the fold moves them into the counters, nothing
-- is left over, and no value of the view changes
SELECT count(*) > 0 AS deltas_before_the_fold FROM gangsched.metric_deltas;
CREATE TEMP TABLE metrics_before_fold AS
SELECT name, labels, value FROM gangsched.metrics
 WHERE name NOT LIKE 'gangsched\_round\_%' AND name NOT LIKE 'gangsched\_worker\_%';
SELECT gangsched._metrics_fold();
SELECT count(*) AS deltas_left FROM gangsched.metric_deltas;
SELECT count(*) > 0 AS counters_rows FROM gangsched.metric_counters;
SELECT count(*) AS values_changed_by_the_fold
  FROM metrics_before_fold b
  FULL JOIN (SELECT name, labels, value FROM gangsched.metrics
              WHERE name NOT LIKE 'gangsched\_round\_%' AND name NOT LIKE 'gangsched\_worker\_%') a
       USING (name, labels)
 WHERE a.value IS DISTINCT FROM b.value;
-- an event written outside a round (a submit) counts at once, before any fold
SELECT value AS before FROM gangsched.metrics WHERE name = 'gangsched_team_jobs_submitted_total' AND labels ->> 'team' = 'a';
SELECT gangsched.submit('a', 1, 8, name => 'late') > 0 AS submitted;
SELECT value AS after FROM gangsched.metrics WHERE name = 'gangsched_team_jobs_submitted_total' AND labels ->> 'team' = 'a';
SELECT count(*) AS deltas_before_the_next_fold FROM gangsched.metric_deltas;

-- rounds: counted in shared memory (this server ran the rounds above);
-- the last round's age on the scheduler's clock
SET gangsched.clock_override = '2030-01-01 00:32:00+00';
SELECT name, value > 0 AS positive FROM gangsched.metrics
 WHERE name IN ('gangsched_round_duration_seconds_count', 'gangsched_round_duration_seconds_sum') ORDER BY 1;
SELECT value AS last_round_age_s FROM gangsched.metrics WHERE name = 'gangsched_round_last_age_seconds';
SELECT m.value = (w.pid IS NOT NULL)::int AS worker_up_is_pid_known
  FROM gangsched.metrics m, gangsched.worker_status() w WHERE m.name = 'gangsched_worker_up';
-- every row has a type and a help text, names are Prometheus names, and
-- counters end in _total (histograms in _bucket, _sum, _count)
SELECT count(*) AS bad_rows FROM gangsched.metrics
 WHERE type NOT IN ('gauge', 'counter', 'histogram') OR help IS NULL OR help = '' OR value IS NULL
    OR name !~ '^gangsched_[a-z0-9_]+$' OR (type = 'counter' AND name !~ '(_total|_count|_sum)$')
    OR (type = 'histogram' AND name !~ '_(bucket|sum|count)$');
SELECT count(DISTINCT name) AS families FROM gangsched.metrics;

-- invariants for the exporter: the total (row 0) and one row per invariant
SELECT * FROM gangsched.invariant_violations() WHERE invariant = 0 OR violations > 0;

-- who may read: an analyst yes, a portal and an agent no (42501)
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_metrics_analyst, regress_metrics_portal, regress_metrics_agent;
RESET client_min_messages;
CREATE ROLE regress_metrics_analyst IN ROLE gangsched_analyst;
CREATE ROLE regress_metrics_portal;
CREATE ROLE regress_metrics_agent;
SELECT gangsched.add_member('regress_metrics_portal', 'a');
SELECT gangsched.add_agent('regress_metrics_agent', 'n1');
SET ROLE regress_metrics_analyst;
SELECT count(*) > 0 AS analyst_reads FROM gangsched.metrics;
SELECT violations AS analyst_invariants FROM gangsched.invariant_violations() WHERE invariant = 0;
RESET ROLE;
SET ROLE regress_metrics_portal;
\set VERBOSITY sqlstate
SELECT count(*) FROM gangsched.metrics;
SELECT * FROM gangsched.invariant_violations();
RESET ROLE;
SET ROLE regress_metrics_agent;
SELECT count(*) FROM gangsched.metrics;
RESET ROLE;
\set VERBOSITY default

-- a tenant cannot hide its submits from the counters: a COPY of a query
-- that submits is counted like any other statement (only a restore's
-- COPY gangsched.events is not)
SELECT value AS before_copy FROM gangsched.metrics
 WHERE name = 'gangsched_team_jobs_submitted_total' AND labels ->> 'team' = 'a' \gset
SET ROLE regress_metrics_portal;
COPY (SELECT gangsched.submit('a', 1, 1, name => 'copied') > 0) TO STDOUT;
RESET ROLE;
SELECT value - :before_copy AS counted_from_copy FROM gangsched.metrics
 WHERE name = 'gangsched_team_jobs_submitted_total' AND labels ->> 'team' = 'a';


-- The view is computed in C (gangsched.metric_series, src/metrics.c). Its
-- definition in SQL (docs/monitoring.md, the view as it was before: one
-- branch per family) must give the same rows on any state: here a random
-- one (whole and fractional GPUs, 0.2 not a binary fraction, placed,
-- running, finished, cancelled, requeued jobs, a node down, heartbeats),
-- then the same with history dominating the tables, where the C pass
-- reads the live jobs and the open allocations through their partial
-- indexes. GPU sums are exact (numeric) in both. The round and worker
-- families read shared memory and are compared above.
\set ECHO none
CREATE TEMP VIEW metrics_sql AS
WITH clock AS (SELECT gangsched.now() AS now),
node_pool AS (
    SELECT p.id AS pool_id, p.name AS pool, n.state, count(n.id) AS nodes, COALESCE(sum(n.gpus), 0) AS gpus,
           date_part('epoch', c.now - min(n.heartbeat_at) FILTER (WHERE n.state <> 'down')) AS heartbeat_age
      FROM gangsched.pools p CROSS JOIN clock c
      LEFT JOIN gangsched.nodes n ON n.pool_id = p.id
     GROUP BY p.id, p.name, n.state, c.now),
held AS (
    SELECT a.team_id, n.pool_id, sum(a.gpus) AS gpus, sum(a.gpus) FILTER (WHERE a.borrowed) AS borrowed
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)
     GROUP BY a.team_id, n.pool_id),
live AS (
    SELECT g.team_id, g.state, count(*) AS jobs, sum(g.workers * g.gpus) AS gpus, min(g.queued_at) AS oldest
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
    ('lost_gpu_seconds', 'GPU-seconds of work the team''s jobs lost since their last checkpoint (requeued jobs, and workers killed at a shrink''s deadline).'),
    ('shrinks', 'Times the team''s elastic jobs were told to give back replicas for a preemptor instead of stopping whole.'),
    ('shrink_replicas', 'Replicas the team''s elastic jobs were told to give back in those shrinks.')) m(name, help)
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

\set ECHO all
CREATE FUNCTION pg_temp.metrics_differ() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM (
        (SELECT * FROM metrics_sql EXCEPT ALL SELECT * FROM gangsched.metrics)
        UNION ALL
        (SELECT * FROM gangsched.metrics EXCEPT ALL SELECT * FROM metrics_sql)) d
     WHERE d.name !~ '^gangsched_(round|worker)_'
$$;
-- metric_series(..., families) gives each family's rows of the view, alone
-- and in the groups the exporter asks for (contrib/prometheus/queries.yaml),
-- reading only the tables those are made of
CREATE FUNCTION pg_temp.families_differ() RETURNS bigint LANGUAGE sql AS $$
    WITH v AS (SELECT * FROM gangsched.metrics),
    groups(families) AS (
        SELECT ARRAY[f.name] FROM (SELECT DISTINCT name FROM v) f
        UNION ALL
        VALUES ('{gangsched_pool_gpus,gangsched_pool_gpus_allocated,gangsched_pool_gpus_borrowed,gangsched_pool_gpus_held,gangsched_pool_gpus_unavailable}'::text[]),
               ('{gangsched_team_pending_jobs,gangsched_team_pending_gpus,gangsched_team_oldest_pending_age_seconds}'),
               ('{gangsched_jobs_live,gangsched_team_gpus_borrowed,gangsched_queue_wait_seconds_bucket}'),
               ('{gangsched_round_last_age_seconds,gangsched_worker_up}'),
               ('{}')),
    asked AS (
        SELECT g.families, m.name, m.type, m.help, m.labels, m.value
          FROM groups g, gangsched.worker_status() w,
               gangsched.metric_series(gangsched.now(), w.pid, w.wakeups, w.rounds, g.families) m),
    expected AS (SELECT g.families, v.* FROM groups g JOIN v ON v.name = ANY (g.families))
    SELECT count(*) FROM (
        (SELECT * FROM expected EXCEPT ALL SELECT * FROM asked)
        UNION ALL
        (SELECT * FROM asked EXCEPT ALL SELECT * FROM expected)) d
     WHERE d.name !~ '^gangsched_(round_last_age|round_duration)'
$$;
SELECT pg_temp.metrics_differ() AS differ_on_the_scenario, pg_temp.families_differ() AS families_differ;
-- the labels objects are written in jsonb's binary form directly
-- (src/metrics.c): each is the object its text parses to, of the same
-- size once stored, and answers jsonb's operators and hashes as that
-- object does
CREATE TEMP TABLE labels_check AS SELECT labels AS l, labels::text::jsonb AS p FROM gangsched.metrics;
SELECT count(*) > 0 AS some, count(*) FILTER (WHERE NOT (
           l = p AND pg_column_size(l) = pg_column_size(p) AND l @> p AND p @> l
           AND jsonb_hash(l) = jsonb_hash(p) AND jsonb_hash_extended(l, 7) = jsonb_hash_extended(p, 7)
           AND l::text = p::text
           AND COALESCE((SELECT bool_and(l ? k AND l ->> k = p ->> k) FROM jsonb_object_keys(p) k), true))) AS differ
  FROM labels_check;
DROP TABLE labels_check;
-- a family's name must be one of the view's (22023), and not null (22004)
\set VERBOSITY sqlstate
SELECT count(*) FROM gangsched.metric_series(gangsched.now(), NULL, NULL, NULL, '{gangsched_team}');
SELECT count(*) FROM gangsched.metric_series(gangsched.now(), NULL, NULL, NULL, '{gangsched_nodes,NULL}');
\set VERBOSITY default
SET gangsched.clock_override = '2030-01-02 00:00:00+00';
SELECT setseed(0.18);
SELECT gangsched.add_pool('frac', 'opportunistic');
SELECT count(gangsched.add_node('f' || i, 'frac', 'r3', 64, 512, 100, 4, 'a100', 80, 4 + i % 2)) FROM generate_series(1, 4) i;
SELECT count(gangsched.add_node('m' || i, 'main', 'r4', 64, 512, 100, 8, 'a100', 80)) FROM generate_series(1, 10) i;
SELECT count(gangsched.add_team('t' || i)) FROM generate_series(1, 4) i;
SELECT count(gangsched.set_quota('t' || i, 'main', 8 * i)) FROM generate_series(1, 4) i;
CREATE FUNCTION pg_temp.random_jobs(n int) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(gangsched.submit('t' || (1 + floor(random() * 4))::int, x.workers, x.gpus,
                                  pool => CASE WHEN x.gpus < 1 THEN 'frac' ELSE 'main' END))
      FROM (SELECT CASE WHEN r < 0.4 THEN (ARRAY[0.2, 0.4, 0.6, 0.25, 0.5, 0.75])[1 + floor(random() * 6)::int]
                        ELSE (ARRAY[1, 2, 4, 8])[1 + floor(random() * 4)::int] END AS gpus,
                   (ARRAY[1, 1, 2, 3])[1 + floor(random() * 4)::int] AS workers
              FROM (SELECT random() AS r FROM generate_series(1, n)) s) x
$$;
-- a round places, agents start most placed jobs and finish some running
-- ones, tenants cancel some pending ones
CREATE FUNCTION pg_temp.churn(at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('gangsched.clock_override', at::text, false);
    PERFORM gangsched.run_round();
    -- (rows in a fixed order, so the random draws fall on the same rows whatever the plans)
    PERFORM gangsched.job_started(p.job, p.node)
       FROM (SELECT DISTINCT p.job, p.node FROM gangsched.placements p JOIN gangsched.jobs j USING (job)
              WHERE j.state = 'placed' ORDER BY 1, 2) p
      WHERE random() < 0.8;
    PERFORM gangsched.job_finished(j.job, random() < 0.8)
       FROM (SELECT job FROM gangsched.jobs WHERE state = 'running' ORDER BY 1) j WHERE random() < 0.3;
    PERFORM gangsched.cancel(j.job)
       FROM (SELECT job FROM gangsched.jobs WHERE state = 'pending' ORDER BY 1) j WHERE random() < 0.05;
END $$;
SELECT pg_temp.random_jobs(150);
SELECT pg_temp.churn('2030-01-02 00:01:00+00');
SELECT pg_temp.random_jobs(60);
SELECT pg_temp.churn('2030-01-02 00:05:00+00');
SELECT gangsched.node_heartbeat('m' || i) FROM generate_series(1, 6) i;
SELECT gangsched.set_node_state('m7', 'down'), gangsched.set_node_state('f2', 'draining');
SET gangsched.clock_override = '2030-01-02 00:09:00+00';
SELECT gangsched.node_heartbeat('f1');
SET gangsched.clock_override = '2030-01-02 00:10:00+00';
SELECT state, count(*) > 0 AS some FROM gangsched.jobs GROUP BY 1 ORDER BY 1;
SELECT count(*) FILTER (WHERE upper_inf(during)) > 0 AS open, count(*) FILTER (WHERE NOT upper_inf(during)) > 0 AS closed,
       count(*) FILTER (WHERE upper_inf(during) AND gpus < 1) > 0 AS fractional
  FROM gangsched.allocations;
SELECT pg_temp.metrics_differ() AS differ_on_a_random_state, pg_temp.families_differ() AS families_differ;
-- most pages all-visible: the live jobs and the open allocations are
-- counted from gangs_live_idx and allocations_current_idx alone
-- (src/metrics.c), rows of pages not all-visible checked in the heap
VACUUM gangsched.gangs, gangsched.allocations;
-- (relallvisible read right after the VACUUM: an autoanalyze after the
-- writes below would count the pages they cleared; the tables are a few
-- pages, whose last one may stay not all-visible, so any all-visible page
-- is what puts entries on the index-only path)
SELECT c.relname, c.relallvisible > 0 AS some_all_visible
  FROM pg_class c WHERE c.oid IN ('gangsched.gangs'::regclass, 'gangsched.allocations'::regclass) ORDER BY 1;
SELECT pg_temp.random_jobs(10) > 0 AS some_on_a_page_not_all_visible;
SELECT pg_temp.metrics_differ() AS differ_from_the_index, pg_temp.families_differ() AS families_differ;
-- the same read by an analyst
CREATE TEMP TABLE metrics_superuser AS SELECT * FROM gangsched.metrics;
GRANT SELECT ON metrics_superuser TO regress_metrics_analyst;
SET ROLE regress_metrics_analyst;
SELECT count(*) AS differ_for_an_analyst FROM (
    (SELECT * FROM metrics_superuser EXCEPT ALL SELECT * FROM gangsched.metrics)
    UNION ALL
    (SELECT * FROM gangsched.metrics EXCEPT ALL SELECT * FROM metrics_superuser)) d
 WHERE d.name !~ '^gangsched_(round|worker)_';
RESET ROLE;
-- a portal may not call the function behind the view either (42501)
SET ROLE regress_metrics_portal;
\set VERBOSITY sqlstate
SELECT count(*) FROM gangsched.metric_series(gangsched.now(), NULL, NULL, NULL);
\set VERBOSITY default
RESET ROLE;
-- history dominates: many jobs come and go (the statistics then send the C
-- pass through gangs_live_idx and allocations_current_idx)
CREATE FUNCTION pg_temp.cycle(at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('gangsched.clock_override', at::text, false);
    PERFORM gangsched.submit('t' || (1 + floor(random() * 4))::int, 1, 1) FROM generate_series(1, 100);
    PERFORM gangsched.run_round();
    PERFORM gangsched.job_started(p.job, p.node)
       FROM (SELECT DISTINCT p.job, p.node FROM gangsched.placements p JOIN gangsched.jobs j USING (job)
              WHERE j.state = 'placed') p;
    PERFORM gangsched.job_finished(j.job, true) FROM gangsched.jobs j WHERE j.state = 'running';
END $$;
SELECT count(gangsched.cancel(j.job)) > 0 AS cancelled FROM gangsched.jobs j WHERE j.state = 'pending';
SELECT count(pg_temp.cycle(timestamptz '2030-01-02 00:10:00+00' + i * interval '1 min')) FROM generate_series(1, 8) i;
SELECT count(gangsched.cancel(j.job)) > 0 AS cancelled
  FROM (SELECT job FROM gangsched.jobs WHERE state = 'pending' ORDER BY 1) j WHERE random() < 0.9;
SELECT pg_temp.random_jobs(20);
SELECT pg_temp.churn('2030-01-02 01:00:00+00');
ANALYZE gangsched.gangs, gangsched.allocations;
SELECT c.reltuples > 256 AND i.reltuples * 4 < c.reltuples AS history_dominates
  FROM pg_class c, pg_class i
 WHERE (c.relname, i.relname) IN (('gangs', 'gangs_live_idx'), ('allocations', 'allocations_current_idx'))
   AND c.relnamespace = 'gangsched'::regnamespace AND i.relnamespace = 'gangsched'::regnamespace
 ORDER BY c.relname;
SELECT pg_temp.metrics_differ() AS differ_with_history, pg_temp.families_differ() AS families_differ;
VACUUM gangsched.gangs, gangsched.allocations;
SELECT pg_temp.metrics_differ() AS differ_with_history_from_the_index, pg_temp.families_differ() AS families_differ;
SELECT * FROM gangsched.check_invariants();
DROP VIEW metrics_sql;
DROP TABLE metrics_superuser;

SELECT * FROM gangsched.check_invariants();

SELECT gangsched.remove_member('regress_metrics_portal', 'a');
SELECT gangsched.remove_agent('regress_metrics_agent', 'n1');
DROP EXTENSION gangsched;
DROP ROLE regress_metrics_analyst, regress_metrics_portal, regress_metrics_agent;
