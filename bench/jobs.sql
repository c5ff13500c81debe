/*
 * bench/jobs.sql — submit jobs first … last of the synthetic queue
 * (bench/shapes.sql describes them) through gangsched.submit(), in one
 * statement. psql variables: seed, first, last, teams.
 */
\ir shapes.sql

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
