/* ------------------------------------------------------------------ */
/* Views                                                               */
/* ------------------------------------------------------------------ */

-- The portal's view of jobs (the table underneath is gangsched.gangs:
-- every job is a gang).
CREATE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds, j.reason, j.message, j.queue_pos, j.command,
       j.checkpoint_interval, j.grace, j.queue_timeout
  FROM gangsched.gangs j
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id;

-- What is held now: one row per worker and device (one row with a NULL
-- device for a CPU-only worker).
CREATE VIEW gangsched.placements AS
SELECT a.job, a.worker, n.name AS node, n.topology, d.device, a.first_slice, a.slices,
       a.cpus, a.mem_gb, a.net_gbps, a.borrowed, lower(a.during) AS since
  FROM gangsched.allocations a
  JOIN gangsched.nodes n ON n.id = a.node_id
  LEFT JOIN LATERAL unnest(CASE WHEN cardinality(a.devices) = 0 THEN ARRAY[NULL::int] ELSE a.devices END) AS d(device) ON true
 WHERE upper_inf(a.during);
