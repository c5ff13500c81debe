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

SELECT * FROM gangsched.check_invariants();

SELECT gangsched.remove_member('regress_metrics_portal', 'a');
SELECT gangsched.remove_agent('regress_metrics_agent', 'n1');
DROP EXTENSION gangsched;
DROP ROLE regress_metrics_analyst, regress_metrics_portal, regress_metrics_agent;
