/* ------------------------------------------------------------------ */
/* Views                                                               */
/* ------------------------------------------------------------------ */

-- The portal's view of jobs (the table underneath is gangsched.gangs:
-- every job is a gang). Each role sees what docs/security.md says: a
-- portal its teams' jobs, an analyst and an operator every job; the command
-- only of its own teams' jobs (an operator: every command).
CREATE VIEW gangsched.jobs AS
SELECT j.id AS job, t.name AS team, j.name, j.state, j.workers, j.gpus, j.cpus, j.mem_gb, j.net_gbps,
       j.priority, j.preemptible, j.borrowed, p.name AS pool,
       j.group_size, gangsched._level_name(j.group_span) AS group_span, j.stages,
       gangsched._level_name(j.stage_span) AS stage_span, gangsched._level_name(j.span) AS span,
       j.gpu_model, j.gpu_mem_gb, j.dataset, j.locality,
       j.submitted_at, j.placed_at, j.started_at, j.finished_at, j.preempt_deadline, j.last_checkpoint_at,
       j.preemptions, j.requeues, j.lost_gpu_seconds,
       -- the job a reason names ("preempted for job N", "shrinking … for job N")
       -- is masked as shrink_for is: "a job of another team" for a portal
       -- that may not see it (the subquery runs for such reasons only)
       CASE WHEN v.all_rows OR strpos(j.reason, 'for job ') = 0 THEN j.reason
            WHEN (SELECT s.team_id FROM gangsched.gangs s
                   WHERE s.id = substring(j.reason FROM 'for job ([0-9]{1,18})')::bigint) = ANY (v.teams)
            THEN j.reason
            ELSE regexp_replace(j.reason, 'for job [0-9]+', 'for a job of another team', 'g') END AS reason,
       j.message, j.queue_pos,
       CASE WHEN v.all_commands OR j.team_id = ANY (v.teams) THEN j.command END AS command,
       j.checkpoint_interval, j.grace, j.queue_timeout,
       j.after_jobs, j.after_mode, j.waiting_for, j.time_limit,
       -- elastic gangs (docs/elastic.md): the replicas it holds (asks for while it waits), its range
       j.workers / (j.group_size * j.stages) AS replicas, j.min_replicas,
       COALESCE(j.max_workers, j.workers) / (j.group_size * j.stages) AS max_replicas,
       -- the reservation the job named at submit (docs/time.md), NULL for none
       b.name AS reservation,
       -- a shrink pending (docs/elastic.md#shrinking): the workers and replicas
       -- the gang keeps, the deadline of the rest, and the job they go to, shown
       -- only to a role that may see that job (a portal learns nothing of other
       -- teams' jobs; the subquery runs for shrinking gangs only)
       j.shrink_to, j.shrink_to / (j.group_size * j.stages) AS shrink_replicas, j.shrink_deadline,
       CASE WHEN j.shrink_for IS NULL THEN NULL
            WHEN v.all_rows OR (SELECT s.team_id FROM gangsched.gangs s WHERE s.id = j.shrink_for) = ANY (v.teams)
            THEN j.shrink_for END AS shrink_for
  FROM gangsched._visibility() v
  JOIN gangsched.gangs j ON v.all_rows OR j.team_id = ANY (v.teams)
  JOIN gangsched.teams t ON t.id = j.team_id
  LEFT JOIN gangsched.pools p ON p.id = j.pool_id
  LEFT JOIN gangsched.bookings b ON b.id = j.reservation_id;

-- What is held now: one row per worker and device (one row with a NULL
-- device for a CPU-only worker).
CREATE VIEW gangsched.placements AS
SELECT a.job, a.worker, n.name AS node, n.topology, d.device, a.first_slice, a.slices,
       a.cpus, a.mem_gb, a.net_gbps, a.borrowed, lower(a.during) AS since
  FROM gangsched._visibility() v
  JOIN gangsched.allocations a ON v.all_rows OR a.team_id = ANY (v.teams)
  JOIN gangsched.nodes n ON n.id = a.node_id
  LEFT JOIN LATERAL unnest(CASE WHEN cardinality(a.devices) = 0 THEN ARRAY[NULL::int] ELSE a.devices END) AS d(device) ON true
 WHERE upper_inf(a.during);

-- Who is bound to what (operators).
CREATE VIEW gangsched.bindings AS
SELECT pg_catalog.pg_get_userbyid(m.role) AS role, 'portal'::text AS kind, t.name AS team, NULL::text AS node, m.added_at
  FROM gangsched.members m JOIN gangsched.teams t ON t.id = m.team_id
UNION ALL
SELECT pg_catalog.pg_get_userbyid(a.role), 'agent', NULL, n.name, a.added_at
  FROM gangsched.agents a JOIN gangsched.nodes n ON n.id = a.node_id;

-- The allocation history for analysts: one row per worker and allocation,
-- with the names the ids stand for.
CREATE VIEW gangsched.allocation_history AS
SELECT a.id, a.job, a.worker, t.name AS team, n.name AS node, p.name AS pool, a.devices, a.first_slice, a.slices,
       a.gpus, a.cpus, a.mem_gb, a.net_gbps, a.borrowed, a.during, a.end_reason
  FROM gangsched.allocations a
  JOIN gangsched.teams t ON t.id = a.team_id
  JOIN gangsched.nodes n ON n.id = a.node_id
  JOIN gangsched.pools p ON p.id = n.pool_id;

-- Every decision with its reason and the role that acted.
CREATE VIEW gangsched.event_log AS
SELECT e.id, e.at, e.kind, e.job, n.name AS node, t.name AS team, e.reason, e.detail, e.actor
  FROM gangsched.events e
  LEFT JOIN gangsched.nodes n ON n.id = e.node_id
  LEFT JOIN gangsched.teams t ON t.id = e.team_id;
