/*
 * bench/preempt_reclaim.sql — issue 5's reclaiming jobs: team A (team1,
 * nothing running, nominal quota half the cluster) submits :njobs gangs of
 * 8–64 GPUs, all within its nominal quota, at scheduler time :t1.
 *
 * psql variables: seed, t1, njobs.
 *
 *   40 %  tensor parallel: group_size 8 (one node a group), 1 GPU a worker,
 *         8, 16, 32 or 64 workers
 *   30 %  data parallel on whole nodes: 1–8 workers of 8 GPUs
 *   20 %  data parallel, 1 GPU a worker, no topology constraint: 8–64 workers
 *   10 %  pipelines: 4 stages of groups of 2, 1, 2 or 4 replicas (8–32
 *         GPUs), each replica inside one rack (stage_span 'rack')
 * Per GPU 10 CPUs, 64 GB, 25 Gbit/s, like team B's jobs. Priorities 0 / 10 /
 * 100 (60 / 30 / 10 %).
 */
SET gangsched.clock_override = :'t1';
SELECT setseed(:seed) AS seeded \gset

CREATE TEMP TABLE pre_reclaim AS
SELECT i, kind, workers, gpus, group_size, stages, stage_span, priority
  FROM (SELECT i, kind,
               CASE kind WHEN 'tensor' THEN 8 * (ARRAY[1, 2, 4, 8])[1 + floor(r2 * 4)::int]
                         WHEN 'node8' THEN 1 + floor(r2 * 8)::int
                         WHEN 'data1' THEN (ARRAY[8, 16, 24, 32, 48, 64])[1 + floor(r2 * 6)::int]
                         ELSE 8 * (ARRAY[1, 2, 4])[1 + floor(r2 * 3)::int] END AS workers,
               CASE kind WHEN 'node8' THEN 8 ELSE 1 END AS gpus,
               CASE kind WHEN 'tensor' THEN 8 WHEN 'pipeline' THEN 2 ELSE 1 END AS group_size,
               CASE kind WHEN 'pipeline' THEN 4 ELSE 1 END AS stages,
               CASE kind WHEN 'pipeline' THEN 'rack' END AS stage_span,
               CASE WHEN r3 < 0.6 THEN 0 WHEN r3 < 0.9 THEN 10 ELSE 100 END AS priority
          FROM (SELECT i, r2, r3,
                       CASE WHEN r1 < 0.4 THEN 'tensor' WHEN r1 < 0.7 THEN 'node8'
                            WHEN r1 < 0.9 THEN 'data1' ELSE 'pipeline' END AS kind
                  FROM (SELECT i, random() AS r1, random() AS r2, random() AS r3
                          FROM generate_series(1, :njobs) AS i) r) d) s;

SELECT count(gangsched.submit(team => 'team1', workers => workers, gpus => gpus, cpus => 10 * gpus,
                              mem_gb => 64 * gpus, net_gbps => 25 * gpus, name => format('a-%s-%s', kind, i),
                              priority => priority, preemptible => true, group_size => group_size,
                              stages => stages, stage_span => stage_span)) AS submitted,
       sum(workers * gpus) AS gpus, min(workers * gpus) AS min_gpus, max(workers * gpus) AS max_gpus
  FROM (SELECT * FROM pre_reclaim ORDER BY i) j \gset
\echo KV reclaim :submitted :gpus :min_gpus :max_gpus
SELECT string_agg(format('%s:%s', kind, n), ',' ORDER BY kind) AS mix
  FROM (SELECT kind, count(*) AS n FROM pre_reclaim GROUP BY kind) k \gset
\echo KV reclaim_mix :mix
