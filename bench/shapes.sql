/*
 * bench/shapes.sql — the synthetic queue's job shapes, in temp table bench_jobs.
 *
 * psql variables (bench/run.sh sets them):
 *   seed     setseed() argument, in [-1, 1]
 *   first    first job number to keep (1 for a fresh queue)
 *   last     last job number to keep
 *   teams    number of teams (team1 … teamN, from cluster.sql)
 *
 * Job i always gets the same shape for a given seed, whatever first and
 * last are: the parameters of jobs 1 … last are drawn in order with a fixed
 * number of random() calls each, and only first … last are kept. So a
 * queue of 5,000 jobs is the queue of 2,500 plus jobs 2,501 … 5,000, and the
 * scaling series can grow one database into the next.
 *
 * Shape mix (by r1):
 *   10 %  fractional: 0.25 or 0.5 of a device (1 or 2 slices of the 4-slice
 *         racks), 1, 2 or 4 workers
 *   45 %  data parallel: workers of 1, 2, 4 or 8 GPUs, 1–64 GPUs in all
 *   20 %  tensor parallel: group_size 8 (one node), 1 GPU a worker,
 *         8–64 workers
 *   15 %  pipelines of 4 stages, group_size 1 or 2, 1–4 replicas,
 *         half of them with stage_span 'rack'
 *   10 %  CPU-heavy: 32 CPUs a worker (3 fit on a 96-CPU node), 1 or 2
 *         GPUs, 1–8 workers
 * Priorities: 70 % 0, 20 % 10, 10 % 100. 20 % non-preemptible.
 * Teams uniform.
 */
DROP TABLE IF EXISTS pg_temp.bench_draws, pg_temp.bench_jobs;
SELECT setseed(:seed) AS bench_seeded \gset

CREATE TEMP TABLE bench_draws AS
SELECT i, random() AS r1, random() AS r2, random() AS r3, random() AS r4,
          random() AS r5, random() AS r6, random() AS r7
  FROM generate_series(1, :last) AS i;

CREATE TEMP TABLE bench_jobs AS
SELECT i, team, workers, gpus, group_size, stages, stage_span, priority, preemptible, kind,
       CASE WHEN kind = 'cpu_heavy' THEN 32 WHEN gpus < 1 THEN 2 ELSE 10 * gpus END AS cpus,
       CASE WHEN kind = 'cpu_heavy' THEN 128 WHEN gpus < 1 THEN 16 ELSE 64 * gpus END AS mem_gb,
       CASE WHEN gpus < 1 THEN 5 ELSE 25 * gpus END AS net_gbps
  FROM (
    SELECT i,
           format('team%s', 1 + floor(r5 * :teams)::int) AS team,
           kind,
           CASE kind
             WHEN 'fractional' THEN (ARRAY[1, 2, 4])[1 + floor(r3 * 3)::int]
             WHEN 'data'       THEN greatest(dp_total, dp_w) / dp_w
             WHEN 'tensor'     THEN 8 * (ARRAY[1, 2, 4, 8])[1 + floor(r2 * 4)::int]
             WHEN 'pipeline'   THEN 4 * pp_g * (ARRAY[1, 2, 4])[1 + floor(r3 * 3)::int]
             ELSE                   (ARRAY[1, 2, 4, 8])[1 + floor(r3 * 4)::int]
           END AS workers,
           CASE kind
             WHEN 'fractional' THEN CASE WHEN r2 < 0.5 THEN 0.25 ELSE 0.5 END
             WHEN 'data'       THEN dp_w
             WHEN 'cpu_heavy'  THEN CASE WHEN r2 < 0.5 THEN 1 ELSE 2 END
             ELSE 1
           END::numeric AS gpus,
           CASE kind WHEN 'tensor' THEN 8 WHEN 'pipeline' THEN pp_g ELSE 1 END AS group_size,
           CASE kind WHEN 'pipeline' THEN 4 ELSE 1 END AS stages,
           CASE WHEN kind = 'pipeline' AND r4 < 0.5 THEN 'rack' END AS stage_span,
           CASE WHEN r6 < 0.7 THEN 0 WHEN r6 < 0.9 THEN 10 ELSE 100 END AS priority,
           r7 >= 0.2 AS preemptible
      FROM (
        SELECT d.*,
               CASE WHEN r1 < 0.10 THEN 'fractional' WHEN r1 < 0.55 THEN 'data'
                    WHEN r1 < 0.75 THEN 'tensor' WHEN r1 < 0.90 THEN 'pipeline' ELSE 'cpu_heavy' END AS kind,
               (ARRAY[1, 2, 4, 8])[1 + floor(r2 * 4)::int] AS dp_w,
               (ARRAY[1, 2, 4, 8, 16, 32, 64])[1 + floor(r3 * 7)::int] AS dp_total,
               CASE WHEN r2 < 0.5 THEN 1 ELSE 2 END AS pp_g
          FROM bench_draws d
         WHERE i >= :first) d) s;

