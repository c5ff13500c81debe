/*
 * bench/jobs.sql — submit jobs first … last of the synthetic queue
 * (bench/shapes.sql describes them) through gangsched.submit(), in one
 * statement. psql variables: seed, first, last, teams.
 */
\ir shapes.sql

-- time_limits = 1 (run.sh --time-limits): every job gets a time limit of 1
-- to 24 hours by its number, where this build's submit() takes one
SELECT :'time_limits' = '1' AND EXISTS (SELECT FROM pg_catalog.pg_proc p
                                          WHERE p.pronamespace = 'gangsched'::regnamespace AND p.proname = 'submit'
                                            AND 'time_limit' = ANY (p.proargnames)) AS with_limits \gset
\if :with_limits
SELECT count(gangsched.submit(
           team        => team,
           workers     => workers,
           gpus        => gpus,
           cpus        => cpus,
           mem_gb      => mem_gb,
           net_gbps    => net_gbps,
           name        => format('%s-%s', kind, i),
           priority    => priority,
           preemptible => preemptible,
           group_size  => group_size,
           stages      => stages,
           stage_span  => stage_span,
           time_limit  => make_interval(hours => 1 + (i * 7919) % 24))) AS jobs_submitted
  FROM (SELECT * FROM bench_jobs ORDER BY i) j;
\else
SELECT count(gangsched.submit(
           team        => team,
           workers     => workers,
           gpus        => gpus,
           cpus        => cpus,
           mem_gb      => mem_gb,
           net_gbps    => net_gbps,
           name        => format('%s-%s', kind, i),
           priority    => priority,
           preemptible => preemptible,
           group_size  => group_size,
           stages      => stages,
           stage_span  => stage_span)) AS jobs_submitted
  FROM (SELECT * FROM bench_jobs ORDER BY i) j;
\endif
