/*
 * bench/preempt_fill.sql — issue 5's benchmark state: team B (the borrower)
 * fills the whole cluster, half of it on borrowed capacity, every job running
 * for longer than gangsched.min_runtime, most with a checkpoint.
 *
 * Run after bench/cluster.sql with teams = 2 (team1 = A, team2 = B, each with
 * a nominal quota of half the cluster in every resource).
 *
 * psql variables:
 *   seed      setseed() argument in [-1, 1]
 *   t0        scheduler clock (gangsched.clock_override) while filling
 *   t1        scheduler clock at the end (checkpoints are drawn in [t0, t1])
 *   np_gpus   GPUs of B's non-preemptible jobs (placed first, guaranteed)
 *   elastic   fraction of B's preemptible gangs of 2 or more replicas that
 *             are elastic (min_replicas half their replicas, by job number;
 *             docs/elastic.md), so the reclaim may shrink them [0]
 *
 * B's jobs (10 CPUs, 64 GB and 25 Gbit/s per GPU, so GPUs run out first):
 *   35 %  one whole node: 1 worker × 8 GPUs
 *   20 %  tensor parallel over 2, 4 or 8 nodes: group_size 8, 1 GPU a worker
 *   25 %  data parallel: workers of 1, 2 or 4 GPUs, 4–32 GPUs in all
 *   20 %  small: 1 worker of 1, 2 or 4 GPUs
 * Priorities 0 / 10 / 100 (60 / 30 / 10 %).
 *
 * Steps: (1) non-preemptible jobs worth np_gpus, a round; (2) preemptible
 * jobs worth the rest of the cluster, a round, leftovers that did not fit
 * (fragmentation) cancelled; (3) one-GPU fillers for every GPU still free, a
 * round; every placed job started at t0; (4) the clock moves to t1 and 70 %
 * of B's jobs (drawn in job order) report a checkpoint at a random time in
 * [t0, t1].
 * Prints "KV name values" lines for bench/preempt.sh.
 */
SET gangsched.clock_override = :'t0';
SELECT setseed(:seed) AS seeded \gset
\if :{?elastic}
\else
\set elastic 0
\endif
SELECT :elastic::float8 > 0 AS elastic_on \gset

CREATE TEMP VIEW pre_to_start AS
SELECT a.job, n.name AS node
  FROM (SELECT DISTINCT a.job, a.node_id
          FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
         WHERE g.state = 'placed' AND upper_inf(a.during)) a
  JOIN gangsched.nodes n ON n.id = a.node_id;

CREATE TEMP TABLE pre_shapes AS
SELECT i, kind, workers, gpus, group_size, priority, workers * gpus AS total
  FROM (SELECT i, kind, r4,
               CASE kind WHEN 'node8' THEN 1
                         WHEN 'tensor' THEN 8 * (ARRAY[2, 4, 8])[1 + floor(r2 * 3)::int]
                         WHEN 'data' THEN (ARRAY[4, 8, 16, 32])[1 + floor(r3 * 4)::int] / (ARRAY[1, 2, 4])[1 + floor(r2 * 3)::int]
                         ELSE 1 END AS workers,
               CASE kind WHEN 'node8' THEN 8
                         WHEN 'tensor' THEN 1
                         ELSE (ARRAY[1, 2, 4])[1 + floor(r2 * 3)::int] END AS gpus,
               CASE kind WHEN 'tensor' THEN 8 ELSE 1 END AS group_size,
               CASE WHEN r4 < 0.6 THEN 0 WHEN r4 < 0.9 THEN 10 ELSE 100 END AS priority
          FROM (SELECT i, r2, r3, r4,
                       CASE WHEN r1 < 0.35 THEN 'node8' WHEN r1 < 0.55 THEN 'tensor'
                            WHEN r1 < 0.80 THEN 'data' ELSE 'small' END AS kind
                  FROM (SELECT i, random() AS r1, random() AS r2, random() AS r3, random() AS r4
                          FROM generate_series(1, 20000) AS i) r) d) s;

SELECT sum(gpus)::int AS cap FROM gangsched.nodes \gset

-- (1) non-preemptible, within B's nominal quota
CREATE TEMP TABLE pre_stage1 AS
SELECT * FROM (SELECT s.*, sum(total) OVER (ORDER BY i) AS cum FROM pre_shapes s) c WHERE cum <= :np_gpus;
SELECT count(gangsched.submit(team => 'team2', workers => workers, gpus => gpus, cpus => 10 * gpus,
                              mem_gb => 64 * gpus, net_gbps => 25 * gpus, name => format('b-np-%s-%s', kind, i),
                              priority => priority, preemptible => false, group_size => group_size))
         AS submitted FROM (SELECT * FROM pre_stage1 ORDER BY i) j \gset
\echo KV stage1_submitted :submitted
SELECT * FROM gangsched.run_round() \gset r_
\echo KV stage1_round :r_placed :r_ms
SELECT count(gangsched.job_started(job, node)) AS started FROM pre_to_start \gset

-- (2) preemptible, the rest of the cluster
SELECT count(*) AS np_pending FROM gangsched.gangs WHERE state = 'pending' \gset
\echo KV stage1_pending :np_pending
SELECT count(gangsched.cancel(id)) AS cancelled FROM gangsched.gangs WHERE state = 'pending' \gset
SELECT :cap - COALESCE(sum(gpus), 0) AS left FROM gangsched.allocations WHERE upper_inf(during) \gset
CREATE TEMP TABLE pre_stage2 AS
SELECT * FROM (SELECT s.*, sum(total) OVER (ORDER BY i) AS cum FROM pre_shapes s
                WHERE i > (SELECT COALESCE(max(i), 0) FROM pre_stage1)) c WHERE cum <= :left;
\if :elastic_on
-- a fraction of the gangs of 2 or more replicas elastic, by job number (no
-- random() draw: the other jobs' shapes and checkpoints stay those of the
-- rigid state), with a minimum of half their replicas
SELECT count(gangsched.submit(team => 'team2', workers => workers, gpus => gpus, cpus => 10 * gpus,
                              mem_gb => 64 * gpus, net_gbps => 25 * gpus, name => format('b-%s-%s', kind, i),
                              priority => priority, preemptible => true, group_size => group_size,
                              min_replicas => CASE WHEN workers / group_size >= 2
                                                    AND (i * 7919) % 1000 < 1000 * :elastic
                                                   THEN (workers / group_size + 1) / 2 END))
         AS submitted FROM (SELECT * FROM pre_stage2 ORDER BY i) j \gset
\else
SELECT count(gangsched.submit(team => 'team2', workers => workers, gpus => gpus, cpus => 10 * gpus,
                              mem_gb => 64 * gpus, net_gbps => 25 * gpus, name => format('b-%s-%s', kind, i),
                              priority => priority, preemptible => true, group_size => group_size))
         AS submitted FROM (SELECT * FROM pre_stage2 ORDER BY i) j \gset
\endif
\echo KV stage2_submitted :submitted
SELECT * FROM gangsched.run_round() \gset r_
\echo KV stage2_round :r_placed :r_ms
SELECT count(gangsched.cancel(id)) AS cancelled FROM gangsched.gangs WHERE state = 'pending' \gset
\echo KV stage2_cancelled :cancelled

-- (3) one-GPU fillers for what is still free
SELECT :cap - COALESCE(sum(gpus), 0) AS left FROM gangsched.allocations WHERE upper_inf(during) \gset
SELECT count(gangsched.submit(team => 'team2', workers => 1, gpus => 1, cpus => 10, mem_gb => 64, net_gbps => 25,
                              name => format('b-fill-%s', k), priority => 0, preemptible => true))
         AS submitted FROM generate_series(1, :left) AS k \gset
\echo KV fillers :submitted
SELECT * FROM gangsched.run_round() \gset r_
\echo KV stage3_round :r_placed :r_ms
SELECT count(gangsched.cancel(id)) AS cancelled FROM gangsched.gangs WHERE state = 'pending' \gset
\echo KV stage3_cancelled :cancelled
SELECT count(gangsched.job_started(job, node)) AS started FROM pre_to_start \gset

-- (4) time passes; checkpoints. The draws go to the jobs in job order: in
-- the table's physical order (which autovacuum's timing moves) the same
-- seed gave other jobs their checkpoints from run to run, hence another
-- state (274 or 297 victims in some runs, 298 in most).
SET gangsched.clock_override = :'t1';
SELECT count(gangsched.job_checkpointed(g.id, :'t0'::timestamptz + g.t * (:'t1'::timestamptz - :'t0'::timestamptz)))
         AS checkpointed
  FROM (SELECT o.id, random() AS r, random() AS t
          FROM (SELECT id FROM gangsched.gangs WHERE state = 'running' ORDER BY id) o) g
 WHERE g.r < 0.7 \gset
\echo KV checkpointed :checkpointed

SELECT count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'running' AND borrowed) AS running_borrowed,
       count(*) FILTER (WHERE state = 'running' AND NOT preemptible) AS running_np,
       count(*) FILTER (WHERE state NOT IN ('running', 'cancelled')) AS other
  FROM gangsched.gangs \gset
\echo KV jobs :running :running_borrowed :running_np :other
SELECT count(*) AS el_running, COALESCE(sum(workers / (group_size * stages) - (to_jsonb(gangs) ->> 'min_replicas')::int), 0) AS el_spare
  FROM gangsched.gangs WHERE state = 'running' AND (to_jsonb(gangs) ->> 'min_replicas') IS NOT NULL \gset
\echo KV elastic :el_running :el_spare
SELECT COALESCE(sum(a.gpus), 0) AS busy, COALESCE(sum(a.gpus) FILTER (WHERE a.borrowed), 0) AS borrowed
  FROM gangsched.allocations a WHERE upper_inf(a.during) \gset
\echo KV gpus :cap :busy :borrowed
SELECT count(*) AS viol FROM gangsched.check_invariants() \gset
\echo KV fill_violations :viol
