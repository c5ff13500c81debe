/* ------------------------------------------------------------------ */
/* Invariants                                                          */
/* ------------------------------------------------------------------ */

-- One row per violation; none when healthy. Numbers as in docs/invariants.md.
-- jit is off: the unnest/generate_series estimates make the plan look costly
-- enough to JIT-compile (seconds) although the rows are few.
CREATE FUNCTION gangsched.check_invariants()
RETURNS TABLE (invariant int, job bigint, node text, detail text)
LANGUAGE sql STABLE SET jit = off AS $$
WITH cur AS (
    SELECT a.*, n.name AS node_name, n.topology
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)),
cur_slots AS (
    SELECT c.job, c.worker, c.node_id, s.device, s.slot
      FROM cur c, gangsched._slots(c.devices, c.first_slice, c.slices) s),
hist_slots AS (
    SELECT a.id, a.job, a.node_id, s.slot, a.during
      FROM gangsched.allocations a, gangsched._slots(a.devices, a.first_slice, a.slices) s),
hist_ordered AS (
    SELECT h.*, lag(upper(h.during)) OVER w AS prev_upper, lag(h.job) OVER w AS prev_job
      FROM hist_slots h WINDOW w AS (PARTITION BY h.node_id, h.slot ORDER BY lower(h.during), upper(h.during)))
-- 1. slices: held rows match current allocations; no overlap in history;
--    slices stay within their device.
SELECT 1, cs.job, n.name, format('slot %s (device %s) of a current allocation is not in held_slots', cs.slot, cs.device)
  FROM cur_slots cs JOIN gangsched.nodes n ON n.id = cs.node_id
 WHERE NOT EXISTS (SELECT FROM gangsched.held_slots h WHERE h.node_id = cs.node_id AND h.slot = cs.slot AND h.job = cs.job AND h.worker = cs.worker)
UNION ALL
SELECT 1, h.job, COALESCE(n.name, '#' || h.node_id), format('held slot %s belongs to no current allocation of job %s', h.slot, h.job)
  FROM gangsched.held_slots h LEFT JOIN gangsched.nodes n ON n.id = h.node_id
 WHERE NOT EXISTS (SELECT FROM cur_slots cs WHERE cs.node_id = h.node_id AND cs.slot = h.slot AND cs.job = h.job AND cs.worker = h.worker)
UNION ALL
SELECT 1, o.job, n.name, format('device slot %s held by jobs %s and %s at overlapping times: job %s until %s, job %s from %s',
                                o.slot, o.prev_job, o.job, o.prev_job, o.prev_upper, o.job, lower(o.during))
  FROM hist_ordered o JOIN gangsched.nodes n ON n.id = o.node_id
 WHERE o.prev_upper > lower(o.during)
UNION ALL
SELECT 1, c.job, c.node_name, CASE WHEN d.device >= n.gpus OR d.device < 0
                                   THEN format('allocation %s uses device %s but the node has %s', c.id, d.device,
                                               CASE WHEN n.gpus = 0 THEN 'no devices' ELSE format('devices 0..%s', n.gpus - 1) END)
                                   ELSE format('allocation %s uses slices %s..%s of device %s, which has slices 0..%s',
                                               c.id, c.first_slice, c.first_slice + c.slices - 1, d.device, n.gpu_slices - 1) END
  FROM cur c JOIN gangsched.nodes n ON n.id = c.node_id, unnest(c.devices) d(device)
 WHERE d.device >= n.gpus OR d.device < 0 OR c.first_slice < 0 OR c.first_slice + c.slices > n.gpu_slices
UNION ALL
-- 2. host resources not over-committed
SELECT 2, NULL, n.name, format('node over-committed: cpus %s/%s, mem_gb %s/%s, net_gbps %s/%s',
                               s.cpus, n.cpus, s.mem, n.mem_gb, s.net, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM cur GROUP BY node_id) s
  JOIN gangsched.nodes n ON n.id = s.node_id
 WHERE s.cpus > n.cpus OR s.mem > n.mem_gb OR s.net > n.net_gbps
UNION ALL
-- 3. live jobs hold exactly their workers, in shape; other jobs hold nothing
SELECT 3, j.id, NULL, format('job is %s and holds %s allocations (ranks %s distinct) for %s workers',
                             j.state, COALESCE(s.n, 0), COALESCE(s.ranks, 0), j.workers)
  FROM gangsched.gangs j
  LEFT JOIN (SELECT c.job, count(*) n, count(DISTINCT c.worker) FILTER (WHERE c.worker < g.workers) ranks
               FROM cur c JOIN gangsched.gangs g ON g.id = c.job GROUP BY c.job) s ON s.job = j.id
 WHERE (j.state IN ('placed', 'running', 'preempting') AND (s.n IS DISTINCT FROM j.workers OR s.ranks IS DISTINCT FROM j.workers::bigint))
    OR (j.state NOT IN ('placed', 'running', 'preempting') AND s.n > 0)
UNION ALL
SELECT 3, a.job, CASE WHEN n.id IS NULL THEN '#' || a.node_id ELSE n.name END,
       format('current allocation %s belongs to %s', a.id,
              CASE WHEN n.id IS NULL THEN 'a node that does not exist' ELSE 'a job that does not exist' END)
  FROM gangsched.allocations a LEFT JOIN gangsched.nodes n ON n.id = a.node_id
 WHERE upper_inf(a.during)
   AND (n.id IS NULL OR NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id = a.job))
UNION ALL
SELECT 3, c.job, c.node_name, format('worker %s holds %s GPUs (%s devices × %s slices), %s cpus, %s mem_gb, %s net_gbps; the job asks for %s, %s, %s, %s',
                                     c.worker, c.gpus, cardinality(c.devices), c.slices, c.cpus, c.mem_gb, c.net_gbps, j.gpus, j.cpus, j.mem_gb, j.net_gbps)
       || CASE WHEN j.gpus > 0 AND j.gpu_model IS NOT NULL AND n.gpu_model IS DISTINCT FROM j.gpu_model
               THEN format('; the node''s devices are %s, the job asks for %s', COALESCE(n.gpu_model, 'of no model'), j.gpu_model) ELSE '' END
       || CASE WHEN j.gpus > 0 AND j.gpu_mem_gb IS NOT NULL AND COALESCE(n.gpu_mem_gb, 0) < j.gpu_mem_gb
               THEN format('; the node''s devices have %s GB, the job asks for %s', COALESCE(n.gpu_mem_gb, 0), j.gpu_mem_gb) ELSE '' END
       || CASE WHEN j.pool_id IS NOT NULL AND n.pool_id <> j.pool_id THEN '; the node is outside the job''s pool' ELSE '' END
  FROM cur c JOIN gangsched.gangs j ON j.id = c.job JOIN gangsched.nodes n ON n.id = c.node_id
 WHERE c.cpus <> j.cpus OR c.mem_gb <> j.mem_gb OR c.net_gbps <> j.net_gbps OR c.gpus <> j.gpus
    OR (j.gpus >= 1 AND (cardinality(c.devices) <> j.gpus OR c.first_slice <> 0 OR c.slices <> n.gpu_slices))
    OR (j.gpus > 0 AND j.gpus < 1 AND (cardinality(c.devices) <> 1 OR c.slices <> gangsched._slices_needed(j.gpus, n.gpu_slices)))
    OR (j.gpus = 0 AND cardinality(c.devices) <> 0)
    OR (j.gpus > 0 AND j.gpu_model IS NOT NULL AND n.gpu_model IS DISTINCT FROM j.gpu_model)
    OR (j.gpus > 0 AND j.gpu_mem_gb IS NOT NULL AND COALESCE(n.gpu_mem_gb, 0) < j.gpu_mem_gb)
    OR (j.pool_id IS NOT NULL AND n.pool_id <> j.pool_id)
UNION ALL
SELECT 3, s.job, NULL, format('%s %s spans %s %s domains', s.what, s.k, s.domains, COALESCE(gangsched._level_name(s.depth), 'pool'))
  FROM (SELECT c.job, 'tensor group' what, c.worker / j.group_size k, j.group_span depth,
               count(DISTINCT gangsched._domain(c.topology, c.node_name, j.group_span)) domains
          FROM cur c JOIN gangsched.gangs j ON j.id = c.job GROUP BY 1, 2, 3, 4
        UNION ALL
        SELECT c.job, 'pipeline replica', c.worker / (j.group_size * j.stages), j.stage_span,
               count(DISTINCT gangsched._domain(c.topology, c.node_name, j.stage_span))
          FROM cur c JOIN gangsched.gangs j ON j.id = c.job WHERE j.stage_span IS NOT NULL GROUP BY 1, 2, 3, 4
        UNION ALL
        SELECT c.job, 'gang', 0, j.span, count(DISTINCT gangsched._domain(c.topology, c.node_name, j.span))
          FROM cur c JOIN gangsched.gangs j ON j.id = c.job WHERE j.span IS NOT NULL GROUP BY 1, 2, 3, 4
        UNION ALL
        SELECT c.job, 'gang', 0, NULL::smallint, count(DISTINCT n.pool_id)
          FROM cur c JOIN gangsched.nodes n ON n.id = c.node_id GROUP BY 1, 2, 3, 4) s
 WHERE s.domains > 1
UNION ALL
SELECT 3, c.job, c.node_name, format('worker %s of a %s job is on a node that does not cache %s', c.worker, j.locality, j.dataset)
  FROM cur c JOIN gangsched.gangs j ON j.id = c.job
 WHERE j.locality = 'required'
   AND NOT EXISTS (SELECT FROM gangsched.datasets d WHERE d.node_id = c.node_id AND d.dataset = j.dataset)
UNION ALL
-- 4. allocation time ranges inside the job's placed interval; history guards on
SELECT 4, a.job, NULL, format('allocation %s (%s) lies outside job''s placed interval [%s, %s)', a.id, a.during,
                              COALESCE(j.placed_at, j.submitted_at), j.finished_at)
  FROM gangsched.allocations a JOIN gangsched.gangs j ON j.id = a.job
 WHERE lower(a.during) < j.submitted_at
    -- a current allocation began with the placement; an elastic gang's
    -- grown workers later (docs/elastic.md), never before it
    OR (upper_inf(a.during) AND lower(a.during) IS DISTINCT FROM j.placed_at
        AND NOT (j.min_replicas IS NOT NULL AND lower(a.during) > j.placed_at))
    OR (j.finished_at IS NOT NULL AND upper(a.during) > j.finished_at)
UNION ALL
SELECT 4, j.id, NULL, 'job''s times are out of order: ' || concat_ws('; ',
           CASE WHEN j.queued_at < j.submitted_at THEN format('queued at %s, before it was submitted at %s', j.queued_at, j.submitted_at) END,
           CASE WHEN j.placed_at < j.queued_at THEN format('placed at %s, before it was queued at %s', j.placed_at, j.queued_at) END,
           CASE WHEN j.started_at < j.placed_at THEN format('started at %s, before it was placed at %s', j.started_at, j.placed_at) END,
           CASE WHEN j.finished_at < COALESCE(j.placed_at, j.queued_at)
                THEN format('finished at %s, before it was %s at %s', j.finished_at,
                            CASE WHEN j.placed_at IS NOT NULL THEN 'placed' ELSE 'queued' END, COALESCE(j.placed_at, j.queued_at)) END)
  FROM gangsched.gangs j
 WHERE j.queued_at < j.submitted_at OR j.placed_at < j.queued_at OR j.started_at < j.placed_at
    OR j.finished_at < COALESCE(j.placed_at, j.queued_at)
UNION ALL
SELECT 4, a.job, NULL, format('allocation %s (%s) belongs to a job that does not exist', a.id, a.during)
  FROM gangsched.allocations a
 WHERE NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id = a.job)
UNION ALL
SELECT 4, NULL, NULL, format('history guard trigger %s on %s is missing or disabled', g.tgname, g.rel)
  FROM (VALUES ('allocations_update_guard', 'gangsched.allocations'), ('allocations_delete_guard', 'gangsched.allocations'),
               ('events_append_only', 'gangsched.events'), ('allocations_archive_guard', 'gangsched.allocations'),
               ('events_archive_guard', 'gangsched.events'), ('gangs_archive_guard', 'gangsched.gangs'),
               ('gangs_truncate_guard', 'gangsched.gangs')) g(tgname, rel)
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid = g.rel::regclass AND t.tgname = g.tgname AND t.tgenabled IN ('O', 'A'))
UNION ALL
-- 5. a nominated job's held capacity is not allocated to another job
--    (victims still draining excepted: its own, or those of an earlier
--    preemptor of the same round whose rest it waits for, as its
--    'nominated' event records them in waits_for)
SELECT 5, h.job, n.name, format('slot %s held for nominated job %s is allocated to job %s (%s)', hs.slot, h.job, hs.job, v.state)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
 CROSS JOIN LATERAL gangsched._slots(h.devices, h.first_slice, h.slices) s
  JOIN gangsched.held_slots hs ON hs.node_id = h.node_id AND hs.slot = s.slot
  JOIN gangsched.gangs v ON v.id = hs.job
 WHERE hs.job <> h.job
   AND NOT (v.state = 'preempting'
            AND (v.preempted_for = h.job
                 OR EXISTS (SELECT FROM gangsched.events e
                             WHERE e.job = h.job AND e.kind = 'nominated'
                               AND e.detail->'waits_for' @> to_jsonb(v.id))))
   -- a shrinking gang's released workers, until they go (docs/elastic.md#shrinking)
   AND NOT COALESCE(hs.worker >= v.shrink_to
                    AND (v.shrink_for = h.job
                         OR EXISTS (SELECT FROM gangsched.events e
                                     WHERE e.job = h.job AND e.kind = 'nominated'
                                       AND e.detail->'waits_for' @> to_jsonb(v.id))), false)
UNION ALL
SELECT 5, NULL, n.name, format('node over-committed with the capacity held on it: held cpus %s, mem_gb %s, net_gbps %s, allocated to others %s, %s, %s; the node has %s, %s, %s',
                               h.cpus, h.mem, h.net, COALESCE(o.cpus, 0), COALESCE(o.mem, 0), COALESCE(o.net, 0), n.cpus, n.mem_gb, n.net_gbps)
  FROM (SELECT node_id, sum(cpus) cpus, sum(mem_gb) mem, sum(net_gbps) net FROM gangsched.holds GROUP BY node_id) h
  JOIN gangsched.nodes n ON n.id = h.node_id
  LEFT JOIN (SELECT c.node_id, sum(c.cpus) cpus, sum(c.mem_gb) mem, sum(c.net_gbps) net
               FROM cur c JOIN gangsched.gangs v ON v.id = c.job
              WHERE NOT (v.state = 'preempting'
                         AND EXISTS (SELECT FROM gangsched.holds h2
                                      WHERE h2.node_id = c.node_id
                                        AND (h2.job = v.preempted_for
                                             OR EXISTS (SELECT FROM gangsched.events e
                                                         WHERE e.job = h2.job AND e.kind = 'nominated'
                                                           AND e.detail->'waits_for' @> to_jsonb(v.id)))))
                AND NOT COALESCE(c.worker >= v.shrink_to
                                 AND EXISTS (SELECT FROM gangsched.holds h2
                                              WHERE h2.node_id = c.node_id
                                                AND (h2.job = v.shrink_for
                                                     OR EXISTS (SELECT FROM gangsched.events e
                                                                 WHERE e.job = h2.job AND e.kind = 'nominated'
                                                                   AND e.detail->'waits_for' @> to_jsonb(v.id)))), false)
              GROUP BY c.node_id) o ON o.node_id = h.node_id
 WHERE h.cpus + COALESCE(o.cpus, 0) > n.cpus OR h.mem + COALESCE(o.mem, 0) > n.mem_gb OR h.net + COALESCE(o.net, 0) > n.net_gbps
UNION ALL
SELECT 5, h.job, NULL, format('job holds capacity but is %s', j.state)
  FROM (SELECT DISTINCT job FROM gangsched.holds) h JOIN gangsched.gangs j ON j.id = h.job
 WHERE j.state <> 'nominated'
UNION ALL
SELECT 5, h.job, n.name, format('two nominated jobs hold slot %s', s.slot)
  FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id,
       gangsched._slots(h.devices, h.first_slice, h.slices) s
 WHERE EXISTS (SELECT FROM gangsched.holds h2, gangsched._slots(h2.devices, h2.first_slice, h2.slices) s2
                WHERE h2.node_id = h.node_id AND h2.job < h.job AND s2.slot = s.slot)
UNION ALL
-- 6. inventory: each node's device rows are exactly its declared GPUs, and
--    its equivalence class has its shape (admission reasons over classes).
SELECT 6, NULL, n.name, format('node declares %s GPUs of %s slices but its device rows are %s', n.gpus, n.gpu_slices,
                               COALESCE(dv.list, 'none'))
  FROM gangsched.nodes n
  LEFT JOIN LATERAL (SELECT count(*) AS cnt, string_agg(d.idx || ':' || d.slices, ', ' ORDER BY d.idx) AS list,
                            bool_and(d.idx < n.gpus AND d.slices = n.gpu_slices) AS ok
                       FROM gangsched.devices d WHERE d.node_id = n.id) dv ON true
 WHERE dv.cnt <> n.gpus OR NOT COALESCE(dv.ok, true)
UNION ALL
SELECT 6, NULL, n.name, format('node''s shape (pool %s, %s cpus, %s GB, %s Gb/s, %s GPUs) differs from its class %s',
                               n.pool_id, n.cpus, n.mem_gb, n.net_gbps, n.gpus, n.class_id)
  FROM gangsched.nodes n JOIN gangsched.node_classes c ON c.id = n.class_id
 WHERE (n.pool_id, n.cpus, n.mem_gb, n.net_gbps, n.gpus, n.gpu_model, n.gpu_mem_gb, n.gpu_slices)
       IS DISTINCT FROM (c.pool_id, c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices)
UNION ALL
-- 7. the privilege boundary: no role but the owner may write gangsched's
--    tables or sequences (operators may read them, the other roles only the
--    views), nobody else may create in its schema, PUBLIC executes nothing.
SELECT 7, NULL, NULL, format('%s has %s on %s', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END,
                             a.privilege_type, c.oid::regclass)
  FROM pg_catalog.pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
 WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relkind IN ('r', 'p', 'S', 'v', 'm')
   AND a.grantee <> c.relowner
   AND NOT (a.grantee <> 0 AND (SELECT rolsuper FROM pg_catalog.pg_roles WHERE oid = a.grantee))
   AND NOT (a.privilege_type = 'SELECT' AND a.grantee <> 0
            AND pg_get_userbyid(a.grantee) = 'gangsched_operator')
   AND NOT (a.privilege_type = 'SELECT' AND c.relkind = 'v' AND a.grantee <> 0
            AND pg_get_userbyid(a.grantee) IN ('gangsched_portal', 'gangsched_analyst'))
UNION ALL
SELECT 7, NULL, NULL, format('%s may %s in schema gangsched', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END,
                             a.privilege_type)
  FROM pg_catalog.pg_namespace s CROSS JOIN LATERAL aclexplode(s.nspacl) a
 WHERE s.nspname = 'gangsched' AND a.grantee <> s.nspowner
   AND NOT (a.privilege_type = 'USAGE' AND a.grantee <> 0
            AND pg_get_userbyid(a.grantee) IN ('gangsched_operator', 'gangsched_portal', 'gangsched_agent', 'gangsched_analyst'))
UNION ALL
SELECT 7, NULL, NULL, format('PUBLIC may execute %s', p.oid::regprocedure)
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'gangsched'::regnamespace
   AND (p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0))
UNION ALL
-- 8. dependencies: only pending jobs wait, and only for jobs of their own
--    team that they listed and that have not ended (58_dependencies.sql)
SELECT 8, g.id, NULL,
       CASE WHEN g.state <> 'pending' THEN format('job is %s but still waits for jobs %s', g.state, g.waiting_for)
            WHEN NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) THEN
                 format('job waits for jobs %s but listed only %s', g.waiting_for, COALESCE(g.after_jobs, '{}'))
            ELSE format('job waits for job %s, which %s', x.id,
                        CASE WHEN x.state IS NULL THEN 'does not exist'
                             WHEN x.team_id <> g.team_id THEN 'belongs to another team'
                             ELSE 'has ended (' || x.state || ')' END) END
  FROM gangsched.gangs g
  LEFT JOIN LATERAL (SELECT w.id, d.state, d.team_id FROM unnest(g.waiting_for) w(id)
                       LEFT JOIN gangsched.gangs d ON d.id = w.id
                      WHERE d.id IS NULL OR d.team_id <> g.team_id
                         OR d.state IN ('finished', 'failed', 'cancelled', 'expired')
                      ORDER BY w.id LIMIT 1) x ON true
 WHERE g.waiting_for IS NOT NULL
   AND (g.state <> 'pending' OR NOT (g.waiting_for <@ COALESCE(g.after_jobs, '{}')) OR x.id IS NOT NULL)
UNION ALL
-- 9. the team tree (docs/fairness.md, "Team trees"): every team is reached
--    from a top-level team (no cycle), only leaf teams have live jobs, and
--    the GPUs of the nearest quotas below a team's quota in a pool fit in it
SELECT 9, NULL, NULL, format('team %s is not reached from a top-level team (its parents form a cycle)', t.name)
  FROM gangsched.teams t
 WHERE NOT EXISTS (SELECT FROM gangsched._team_tree x WHERE x.team_id = t.id)
UNION ALL
SELECT 9, g.id, NULL, format('job of team %s, which has subteams, is %s', t.name, g.state)
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')
   AND EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = g.team_id)
UNION ALL
SELECT 9, NULL, NULL, format('the teams below %s hold %s GPUs of nominal quota in pool %s, more than its %s',
                             pt.name, k.below, pl.name, pq.gpus)
  FROM (SELECT gangsched._quota_parent(q.team_id, q.pool_id) AS parent, q.pool_id, sum(q.gpus) AS below
          FROM gangsched.quotas q
          -- teams reached from the top only: a cycle is reported above,
          -- and walking up one would not end
          JOIN gangsched._team_tree t ON t.team_id = q.team_id
         WHERE t.parent_id IS NOT NULL
         GROUP BY 1, 2) k
  JOIN gangsched.quotas pq ON pq.team_id = k.parent AND pq.pool_id = k.pool_id
  JOIN gangsched.teams pt ON pt.id = k.parent
  JOIN gangsched.pools pl ON pl.id = k.pool_id
 WHERE k.below > pq.gpus
UNION ALL
-- 10. reservations and maintenance windows (docs/time.md): no allocation
--     begins on a booked node inside the window for a job the booking does
--     not permit (a maintenance window permits none; a reservation its
--     team's subtree and the jobs that name it), and no node is in two
--     bookings at overlapping times
SELECT 10, a.job, n.name,
       format('allocation begun at %s lies inside %s %s (%s to %s)', lower(a.during),
              CASE WHEN b.team_id IS NULL THEN 'maintenance window' ELSE 'reservation' END, b.name, b.starts, b.ends)
  FROM gangsched.bookings b
  JOIN gangsched.allocations a ON a.node_id = ANY (b.node_ids) AND lower(a.during) >= b.starts AND lower(a.during) < b.ends
  JOIN gangsched.gangs g ON g.id = a.job
  JOIN gangsched.nodes n ON n.id = a.node_id
 WHERE b.team_id IS NULL
    OR NOT (g.reservation_id IS NOT DISTINCT FROM b.id
            OR g.team_id IN (WITH RECURSIVE s(id) AS (SELECT b.team_id
                                                      UNION
                                                      SELECT t.id FROM s JOIN gangsched.teams t ON t.parent_id = s.id)
                             SELECT s.id FROM s))
UNION ALL
SELECT 10, NULL, n.name, format('the node is in %s and %s at overlapping times', b1.name, b2.name)
  FROM gangsched.bookings b1
  JOIN gangsched.bookings b2 ON b1.id < b2.id AND b1.node_ids && b2.node_ids AND b1.starts < b2.ends AND b2.starts < b1.ends
  JOIN gangsched.nodes n ON n.id = ANY (b1.node_ids) AND n.id = ANY (b2.node_ids)
UNION ALL
-- 11. elastic gangs (docs/elastic.md): a job holds (or, nominated, is held
--     capacity for) a whole number of replicas between its minimum and its
--     maximum, and asks for its maximum while it waits; each replica's
--     groups are whole (invariant 3 checks their ranks and domains)
SELECT 11, g.id, NULL, format('elastic job is %s with %s workers; replicas of %s workers from %s to %s are allowed%s',
                              g.state, g.workers, g.group_size * g.stages, g.min_replicas,
                              g.max_workers / (g.group_size * g.stages),
                              CASE WHEN g.state = 'pending' THEN format(', and a waiting job asks for all %s', g.max_workers) ELSE '' END)
  FROM gangsched.gangs g
 WHERE g.min_replicas IS NOT NULL
   AND (g.max_workers IS NULL OR g.workers % (g.group_size * g.stages) <> 0
        OR g.workers < g.min_replicas * g.group_size * g.stages OR g.workers > g.max_workers
        OR (g.state = 'pending' AND g.workers <> g.max_workers))
UNION ALL
SELECT 11, g.id, NULL, format('rigid job has max_workers %s', g.max_workers)
  FROM gangsched.gangs g
 WHERE g.min_replicas IS NULL AND g.max_workers IS NOT NULL
UNION ALL
-- a shrink pending: a running elastic gang gives back whole replicas at its
-- end, keeping at least its minimum (docs/elastic.md#shrinking)
SELECT 11, g.id, NULL, format('job is %s with %s workers and shrinks to %s; replicas of %s workers, at least %s',
                              g.state, g.workers, g.shrink_to, g.group_size * g.stages, g.min_replicas)
  FROM gangsched.gangs g
 WHERE g.shrink_to IS NOT NULL
   AND (g.state <> 'running' OR g.min_replicas IS NULL OR g.shrink_to >= g.workers
        OR g.shrink_to % (g.group_size * g.stages) <> 0
        OR g.shrink_to < g.min_replicas * g.group_size * g.stages)
$$;
