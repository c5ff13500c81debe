-- Shrinking instead of preempting (issue 17 stage 4, docs/elastic.md#shrinking):
-- a running elastic gang above its minimum may give back replicas (its
-- highest-numbered workers) to a preemptor instead of being preempted
-- whole, when that is the cheaper plan; never below its minimum; the
-- agents see action 'shrink' in node_work and report with
-- workers_released(node, job); the shrink completes when the last released
-- worker has gone (or at its deadline, killed) and the preemptor is placed.
-- The notices are checked in test/specs/shrink-release.spec. Virtual time;
-- the agents' calls run as agent roles; each scenario ends with
-- check_invariants() empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.default_grace = '1min';
SET gangsched.restart_cost = '60s';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
\set SHOW_CONTEXT never

-- 4 nodes of 8 GPUs in one rack
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 4) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
DO $$ BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'gs59s_n2') THEN DROP ROLE gs59s_n2; END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'gs59s_n4') THEN DROP ROLE gs59s_n4; END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'gs59s_pa') THEN DROP ROLE gs59s_pa; END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'gs59s_an') THEN DROP ROLE gs59s_an; END IF;
END $$;
CREATE ROLE gs59s_n2;
CREATE ROLE gs59s_n4;
SELECT gangsched.add_agent('gs59s_n2', 'n2'), gangsched.add_agent('gs59s_n4', 'n4');
-- team a's portal and an analyst (what the jobs view shows of a shrink)
CREATE ROLE gs59s_pa;
SELECT gangsched.add_member('gs59s_pa', 'a');
CREATE ROLE gs59s_an IN ROLE gangsched_analyst;

-- start every node's workers of a job (as the operator)
CREATE FUNCTION pg_temp.start(j bigint) RETURNS void LANGUAGE sql AS $$
    SELECT gangsched.job_started(j, node) FROM (SELECT DISTINCT node FROM gangsched.placements WHERE job = j) n
$$;
CREATE FUNCTION pg_temp.shrinks() RETURNS TABLE (name text, state text, workers int, shrink_to int,
                                                 shrink_for text, shrink_deadline timestamptz)
LANGUAGE sql AS $$
    SELECT g.name, g.state, g.workers, g.shrink_to, p.name, g.shrink_deadline
      FROM gangsched.gangs g LEFT JOIN gangsched.gangs p ON p.id = g.shrink_for
     WHERE g.state NOT IN ('finished', 'cancelled', 'failed') ORDER BY g.id
$$;
-- end every job left (keeps the scenarios apart)
CREATE FUNCTION pg_temp.clear() RETURNS void LANGUAGE sql AS $$
    SELECT gangsched.cancel(id) FROM gangsched.gangs
     WHERE state NOT IN ('finished', 'cancelled', 'failed', 'expired') ORDER BY id
$$;

/* ------------------------------------------------------------------ */
/* 1. shrink chosen over a whole-gang preemption when it is cheaper     */
/* ------------------------------------------------------------------ */
-- team a: a rigid gang running since 00:00 and an elastic one (3 replicas
-- of one 8-GPU worker, at least 1) since 00:30; b's job of 8 GPUs preempts
-- for fair share at 01:00. Preempting the rigid gang loses 8 GPU-hours,
-- one replica of the elastic gang half that: the elastic gang shrinks.
SELECT gangsched.submit('a', 1, 8, name => 'rigid') AS rigid \gset
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start(:rigid);
SET gangsched.clock_override = '2030-01-01 00:30:00+00';
SELECT gangsched.submit('a', 3, 8, min_replicas => 1, name => 'el') AS el \gset
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start(:el);
SELECT worker, node FROM gangsched.placements WHERE job = :el AND device = 0 ORDER BY worker;
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('b', 1, 8, name => 'pre') AS pre \gset
SELECT placed, preempted, note FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
-- the decision: the nomination names the shrink and counts one replica's lost work
SELECT kind, j.name, e.reason, detail - 'deadline' AS detail
  FROM gangsched.events e JOIN gangsched.gangs j ON j.id = e.job
 WHERE kind IN ('nominated', 'shrinking', 'preempting') ORDER BY e.id;
SELECT reason FROM gangsched.jobs WHERE job = :pre;
-- the jobs view: the workers and replicas el keeps and by when it gives the
-- rest back; the job they go to only for a role that may see that job: a's
-- portal sees el's shrink but not b's job (shrink_for NULL), an analyst sees it
SELECT name, state, workers, replicas, shrink_to, shrink_replicas, shrink_deadline, shrink_for = :pre AS for_pre
  FROM gangsched.jobs WHERE job IN (:el, :pre) ORDER BY job;
SET ROLE gs59s_pa;
SELECT name, workers, shrink_to, shrink_replicas, shrink_deadline, shrink_for FROM gangsched.jobs ORDER BY job;
RESET ROLE;
SET ROLE gs59s_an;
SELECT name, shrink_to, shrink_for = :pre AS for_pre FROM gangsched.jobs WHERE shrink_to IS NOT NULL;
RESET ROLE;
SELECT * FROM gangsched.check_invariants();
-- what the agents see: the released worker's row says 'shrink' with the
-- deadline; every row of the gang has the world size after the shrink
SET ROLE gs59s_n4;
SELECT w.job = :el AS el, action, worker, world_size, deadline, seconds_left FROM gangsched.node_work('n4') w;
RESET ROLE;
SET ROLE gs59s_n2;
SELECT w.job = :el AS el, action, worker, world_size, deadline, seconds_left FROM gangsched.node_work('n2') w;
-- workers_released for a node not its own: 42501
SELECT gangsched.workers_released('n4', :el);
-- a node without released workers while the shrink is pending: nothing to end
SELECT gangsched.workers_released('n2', :el);
RESET ROLE;
SELECT * FROM pg_temp.shrinks();
-- the released node's agent reports: the shrink completes, the preemptor is placed
SET gangsched.clock_override = '2030-01-01 01:00:20+00';
SET ROLE gs59s_n4;
SELECT gangsched.workers_released('n4', :el);
-- again: idempotent
SELECT gangsched.workers_released('n4', :el);
RESET ROLE;
SELECT * FROM pg_temp.shrinks();
SELECT kind, j.name, e.reason, detail FROM gangsched.events e JOIN gangsched.gangs j ON j.id = e.job
 WHERE kind IN ('shrunk', 'placed') AND e.at = '2030-01-01 01:00:20+00' ORDER BY e.id;
SELECT job = :pre AS pre, worker, node FROM gangsched.placements WHERE job IN (:el, :pre) AND device = 0
 ORDER BY job, worker;
SELECT workers, replicas, since, until FROM gangsched.replica_history('2030-01-01', '2030-01-02') WHERE job = :el
 ORDER BY since;
-- the shrink done, the jobs view shows none
SELECT name, workers, replicas, shrink_to, shrink_replicas, shrink_deadline, shrink_for FROM gangsched.jobs WHERE job = :el;
-- the agent of the node sees the new world size; the preemptor's node starts it
SET ROLE gs59s_n2;
SELECT action, worker, world_size FROM gangsched.node_work('n2') w WHERE w.job = :el;
RESET ROLE;
SET ROLE gs59s_n4;
SELECT w.job = :pre AS pre, action, worker, world_size FROM gangsched.node_work('n4') w;
RESET ROLE;
SELECT * FROM gangsched.check_invariants();
SELECT pg_temp.clear();

/* ------------------------------------------------------------------ */
/* 1b. the whole rigid gang when that is cheaper                       */
/* ------------------------------------------------------------------ */
-- the same cluster, but the rigid gang checkpointed just now: preempting it
-- loses only its restart, less than a replica of the elastic gang
SET gangsched.clock_override = '2030-01-01 02:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'rigid2') AS rigid2 \gset
SELECT gangsched.submit('a', 3, 8, min_replicas => 1, name => 'el2') AS el2 \gset
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start(:rigid2), pg_temp.start(:el2);
SET gangsched.clock_override = '2030-01-01 03:00:00+00';
SELECT gangsched.job_checkpointed(:rigid2);
SELECT gangsched.submit('b', 1, 8, name => 'pre2') AS pre2 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SELECT * FROM gangsched.check_invariants();
SELECT pg_temp.clear();

/* ------------------------------------------------------------------ */
/* 2. the whole gang when shrinking cannot free enough                 */
/* ------------------------------------------------------------------ */
-- an elastic gang of 4 replicas, at least 2, on every node; a job of its
-- own team with a higher priority needs 3 nodes: 2 replicas are all it may
-- give, so it is preempted whole
SET gangsched.clock_override = '2030-01-01 04:00:00+00';
SELECT gangsched.submit('a', 4, 8, min_replicas => 2, name => 'el3') AS el3 \gset
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start(:el3);
SET gangsched.clock_override = '2030-01-01 05:00:00+00';
SELECT gangsched.submit('a', 3, 8, priority => 5, name => 'big') AS big \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SELECT kind, j.name, detail - 'deadline' AS detail FROM gangsched.events e JOIN gangsched.gangs j ON j.id = e.job
 WHERE kind IN ('nominated', 'shrinking', 'preempting') AND e.at = '2030-01-01 05:00:00+00' ORDER BY e.id;
-- a preempted gang has no shrink: nothing to end (its agent reports with job_released)
SET ROLE gs59s_n4;
SELECT gangsched.workers_released('n4', :el3);
RESET ROLE;
SELECT * FROM gangsched.check_invariants();
SELECT pg_temp.clear();

/* ------------------------------------------------------------------ */
/* 3. never below the minimum                                          */
/* ------------------------------------------------------------------ */
-- an elastic gang of 3 replicas, at least 2, and an older rigid gang; a
-- higher-priority job of 2 nodes: the elastic gang gives its one replica
-- above the minimum (not two), and the rigid gang goes whole
SET gangsched.clock_override = '2030-01-01 06:00:00+00';
SELECT gangsched.submit('a', 1, 8, name => 'old') AS old \gset
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start(:old);
SET gangsched.clock_override = '2030-01-01 06:30:00+00';
SELECT gangsched.submit('a', 3, 8, min_replicas => 2, name => 'el4') AS el4 \gset
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start(:el4);
SET gangsched.clock_override = '2030-01-01 07:00:00+00';
SELECT gangsched.submit('a', 2, 8, priority => 5, name => 'two') AS two \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SELECT detail - 'deadline' AS detail FROM gangsched.events WHERE kind = 'nominated' AND job = :two;
-- the preemptor is a's own job: a's portal sees which
SET ROLE gs59s_pa;
SELECT name, shrink_to, shrink_replicas, shrink_for = :two AS for_two FROM gangsched.jobs WHERE shrink_to IS NOT NULL;
RESET ROLE;
SELECT * FROM gangsched.check_invariants();

/* ------------------------------------------------------------------ */
/* 4. the deadline: a round kills the released workers still running   */
/* ------------------------------------------------------------------ */
-- old releases; el4's agent never reports. At the deadline (07:01) a
-- round's _kill_overdue kills its released worker (lost work counted), the
-- shrink completes and the preemptor is placed
SELECT gangsched.job_released(:old, true);
SELECT * FROM pg_temp.shrinks();
SET gangsched.clock_override = '2030-01-01 07:00:59+00';
SELECT placed FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SET gangsched.clock_override = '2030-01-01 07:01:00+00';
SELECT placed FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SELECT kind, j.name, e.reason, detail FROM gangsched.events e JOIN gangsched.gangs j ON j.id = e.job
 WHERE kind IN ('shrunk', 'placed') AND e.at = '2030-01-01 07:01:00+00' ORDER BY e.id;
SELECT lost_gpu_seconds FROM gangsched.jobs WHERE job = :el4;
SELECT end_reason, count(*) FROM gangsched.allocations WHERE job = :el4 AND NOT upper_inf(during) GROUP BY 1;
-- its node's agent reports late: the workers are gone already, nothing to end
SET ROLE gs59s_n4;
SELECT count(*) FROM gangsched.node_work('n4') w WHERE w.job = :el4;
RESET ROLE;
SELECT * FROM gangsched.check_invariants();
SELECT pg_temp.clear();

/* ------------------------------------------------------------------ */
/* 5. a shrinking gang that ends or is cancelled has no shrink left    */
/* ------------------------------------------------------------------ */
SET gangsched.clock_override = '2030-01-01 08:00:00+00';
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'el5') AS el5 \gset
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start(:el5);
SET gangsched.clock_override = '2030-01-01 09:00:00+00';
SELECT gangsched.submit('a', 1, 8, priority => 5, name => 'p5') AS p5 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SELECT gangsched.job_finished(:el5, true);
SELECT * FROM pg_temp.shrinks();
-- its node now free, the preemptor is placed by the next round
SELECT placed FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
-- a job without a shrink pending, on a node it never ran on: 22023
SELECT node FROM gangsched.placements WHERE job = :p5;
SET ROLE gs59s_n2;
SELECT gangsched.workers_released('n2', :p5);
RESET ROLE;
SELECT * FROM gangsched.check_invariants();
SELECT pg_temp.clear();

/* ------------------------------------------------------------------ */
/* 6. one shrink at a time                                             */
/* ------------------------------------------------------------------ */
-- two higher-priority jobs of one node each in one round: the first takes a
-- replica of el6; the second may not shrink it further in that round, nor
-- while the shrink is pending; once it completed, the next round shrinks it
-- again
SET gangsched.clock_override = '2030-01-01 10:00:00+00';
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'el6') AS el6 \gset
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start(:el6);
SET gangsched.clock_override = '2030-01-01 11:00:00+00';
SELECT gangsched.submit('a', 1, 8, priority => 5, name => 'q1') AS q1 \gset
SELECT gangsched.submit('a', 1, 8, priority => 5, name => 'q2') AS q2 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SELECT placed, preempted FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SET ROLE gs59s_n4;
SELECT gangsched.workers_released('n4', :el6);
RESET ROLE;
SELECT placed, preempted FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SELECT * FROM gangsched.check_invariants();
SELECT pg_temp.clear();

/* ------------------------------------------------------------------ */
/* 7. a shrink released node by node: the history shows each step     */
/* ------------------------------------------------------------------ */
-- el7: 4 replicas of one 8-GPU worker, at least 2, on every node; a job of
-- 2 nodes with a higher priority takes its two replicas above the minimum.
-- The two released workers' nodes report 10 s apart (as the operator):
-- replica_history shows 4, 3 then 2 replicas
SET gangsched.clock_override = '2030-01-01 12:00:00+00';
SELECT gangsched.submit('a', 4, 8, min_replicas => 2, name => 'el7') AS el7 \gset
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start(:el7);
SET gangsched.clock_override = '2030-01-01 13:00:00+00';
SELECT gangsched.submit('a', 2, 8, priority => 5, name => 'q7') AS q7 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT * FROM pg_temp.shrinks();
SELECT name, workers, replicas, shrink_to, shrink_replicas FROM gangsched.jobs WHERE job = :el7;
SELECT worker, node FROM gangsched.placements WHERE job = :el7 AND device = 0 ORDER BY worker;
SET gangsched.clock_override = '2030-01-01 13:00:10+00';
SELECT gangsched.workers_released(node, :el7) FROM gangsched.placements WHERE job = :el7 AND worker = 3 AND device = 0;
SELECT * FROM pg_temp.shrinks();
SET gangsched.clock_override = '2030-01-01 13:00:20+00';
SELECT gangsched.workers_released(node, :el7) FROM gangsched.placements WHERE job = :el7 AND worker = 2 AND device = 0;
SELECT * FROM pg_temp.shrinks();
SELECT workers, replicas, min_replicas, max_replicas, since, until
  FROM gangsched.replica_history('2030-01-01', '2030-01-02') WHERE job = :el7 ORDER BY since;
-- a window that begins inside the shrink: the interval held then, with
-- its real start (13:00:10, when worker 3 went), and the next
SELECT workers, replicas, since, until
  FROM gangsched.replica_history('2030-01-01 13:00:15+00', '2030-01-02') WHERE job = :el7 ORDER BY since;
SELECT * FROM gangsched.check_invariants();
SELECT pg_temp.clear();

/* ------------------------------------------------------------------ */
/* 8. shrinks counted: the metrics and preemption_summary              */
/* ------------------------------------------------------------------ */
-- every shrink decided above, per team (all of them a's gangs): the
-- counters against the events, the lost work against the jobs (scenario
-- 4's shrink killed at its deadline lost 8 GPUs x 31 min, 4.13 GPU-hours)
SELECT m.name, m.labels ->> 'team' AS team, m.value,
       CASE m.name
         WHEN 'gangsched_team_shrinks_total'
           THEN (SELECT count(*) FROM gangsched.event_log e WHERE e.team = m.labels ->> 'team' AND e.kind = 'shrinking')
         WHEN 'gangsched_team_shrink_replicas_total'
           THEN (SELECT COALESCE(sum((e.detail ->> 'was_replicas')::int - (e.detail ->> 'replicas')::int), 0)
                   FROM gangsched.event_log e WHERE e.team = m.labels ->> 'team' AND e.kind = 'shrinking')
         WHEN 'gangsched_team_lost_gpu_seconds_total'
           THEN (SELECT sum(lost_gpu_seconds) FROM gangsched.jobs j WHERE j.team = m.labels ->> 'team')
       END AS expected
  FROM gangsched.metrics m
 WHERE m.name IN ('gangsched_team_shrinks_total', 'gangsched_team_shrink_replicas_total',
                  'gangsched_team_lost_gpu_seconds_total')
 ORDER BY 1, 2;
-- the same through the exporter's family filter, and after a fold
SELECT name, labels ->> 'team' AS team, value
  FROM gangsched.metric_series(gangsched.now(), NULL, NULL, NULL,
                               '{gangsched_team_shrinks_total,gangsched_team_shrink_replicas_total}')
 ORDER BY 1, 2;
SELECT gangsched._metrics_fold();
SELECT name, team_id, value FROM gangsched.metric_counters WHERE name IN ('shrinks', 'shrink_replicas') ORDER BY 1, 2;
-- preemption_summary: the shrinks of a's gangs, the replicas given back, the
-- one killed at its deadline and its lost work, beside the whole preemptions
SELECT team, preemptions, preemptors, shrinks, shrink_replicas, shrinks_killed,
       round(shrink_lost_gpu_hours::numeric, 5) AS shrink_lost_gpu_hours, round(lost_gpu_hours::numeric, 5) AS lost_gpu_hours
  FROM gangsched.preemption_summary('2030-01-01', '2030-01-02');
-- only scenario 7 (one shrink of 2 replicas); by subtree the same
SELECT team, shrinks, shrink_replicas, shrinks_killed
  FROM gangsched.preemption_summary('2030-01-01 12:00+00', '2030-01-01 14:00+00', 'subtree');
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched CASCADE;
DROP ROLE gs59s_n2, gs59s_n4, gs59s_pa, gs59s_an;
