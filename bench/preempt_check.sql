/*
 * bench/preempt_check.sql — correctness of a preemption round's result, as
 * "KV name value…" lines (bench/preempt.sh turns them into JSON). Run in the
 * session (and transaction) of the round, with the same scheduler clock.
 * Every count named bad_* / *_violations must be 0.
 *
 *  invariants       rows of check_invariants()
 *  victims          jobs in 'preempting', with how many of them are
 *                   non-preemptible, another team's guaranteed (non-borrowed)
 *                   work, of the preemptor's own team without a lower
 *                   priority, younger than gangsched.min_runtime, without a
 *                   preemptor, or with no deadline in the future
 *  nominated        jobs in 'nominated', with how many lack a victim, whose
 *                   holds do not cover workers 0 … workers-1 exactly once,
 *                   whose holds ask for other per-worker resources than the
 *                   job (cpus, mem, net, whole devices), whose tensor groups
 *                   or pipeline replicas leave their group_span / stage_span
 *                   domain
 *  conflicts        held device slots held twice; held slots now used by a
 *                   job that is not one of that preemptor's own victims;
 *                   nodes whose cpus/mem/net would be over-committed when a
 *                   preemptor is placed (its own victims gone; every other
 *                   preemptor on the node counted with the larger of its
 *                   victims' and its holds' use there)
 *  unneeded         victims none of whose device slots the preemptor's holds
 *                   use (a victim the placement does not need; host
 *                   resources scale with GPUs in this benchmark, so a victim
 *                   cannot be needed for its CPUs alone unless the model
 *                   over-counts them)
 *  idle_gpus        GPUs the victims free that no hold uses (idle once the
 *                   victims release, until a later round fills them)
 */
SELECT setting::int AS min_runtime_s FROM pg_catalog.pg_settings WHERE name = 'gangsched.min_runtime' \gset

SELECT count(*) AS n FROM gangsched.check_invariants() \gset
\echo KV invariants :n
SELECT COALESCE(string_agg(DISTINCT invariant::text, '; '), '-') AS which FROM gangsched.check_invariants() \gset
\echo KV invariants_which :which

SELECT count(*) AS victims,
       count(*) FILTER (WHERE NOT v.preemptible) AS non_preemptible,
       count(*) FILTER (WHERE p.id IS NOT NULL AND v.team_id <> p.team_id
                          AND (NOT v.borrowed OR EXISTS (SELECT FROM gangsched.allocations a
                                                          WHERE a.job = v.id AND upper_inf(a.during) AND NOT a.borrowed)))
         AS guaranteed_of_other_team,
       count(*) FILTER (WHERE v.team_id = p.team_id AND v.priority >= p.priority) AS same_team_not_lower,
       count(*) FILTER (WHERE COALESCE(v.started_at, v.placed_at) > gangsched.now() - make_interval(secs => :min_runtime_s))
         AS too_young,
       count(*) FILTER (WHERE p.id IS NULL OR p.state <> 'nominated') AS no_preemptor,
       count(*) FILTER (WHERE v.preempt_deadline IS NULL OR v.preempt_deadline <= gangsched.now()) AS bad_deadline,
       COALESCE(sum(v.gpus * v.workers), 0) AS victim_gpus,
       count(*) FILTER (WHERE v.team_id <> p.team_id) AS other_team
  FROM gangsched.gangs v LEFT JOIN gangsched.gangs p ON p.id = v.preempted_for
 WHERE v.state = 'preempting' \gset
\echo KV victims :victims :non_preemptible :guaranteed_of_other_team :same_team_not_lower :too_young :no_preemptor :bad_deadline :victim_gpus :other_team

CREATE TEMP TABLE chk_hslots AS
SELECT h.job, h.worker, h.node_id, d * 8 + s AS slot
  FROM gangsched.holds h, unnest(h.devices) AS d, generate_series(h.first_slice, h.first_slice + h.slices - 1) AS s;

SELECT count(*) AS nominated,
       COALESCE(sum(g.gpus * g.workers), 0) AS nominated_gpus,
       count(*) FILTER (WHERE NOT EXISTS (SELECT FROM gangsched.gangs v WHERE v.preempted_for = g.id AND v.state = 'preempting'))
         AS without_victims,
       count(*) FILTER (WHERE NOT (SELECT count(*) = g.workers AND count(DISTINCT h.worker) = g.workers
                                          AND min(h.worker) = 0 AND max(h.worker) = g.workers - 1
                                     FROM gangsched.holds h WHERE h.job = g.id)) AS bad_cover,
       count(*) FILTER (WHERE EXISTS (SELECT FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
                                       WHERE h.job = g.id
                                         AND (h.cpus <> g.cpus OR h.mem_gb <> g.mem_gb OR h.net_gbps <> g.net_gbps
                                              OR (g.gpus >= 1 AND (cardinality(h.devices) <> g.gpus
                                                                   OR h.first_slice <> 0 OR h.slices <> n.gpu_slices)))))
         AS bad_resources,
       count(*) FILTER (WHERE EXISTS (SELECT FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
                                       WHERE h.job = g.id
                                       GROUP BY h.worker / g.group_size
                                      HAVING count(DISTINCT CASE WHEN g.group_span > nlevel(n.topology) THEN n.id::text
                                                                 ELSE subpath(n.topology, 0, g.group_span)::text END) > 1))
         AS bad_groups,
       count(*) FILTER (WHERE g.stage_span IS NOT NULL
                          AND EXISTS (SELECT FROM gangsched.holds h JOIN gangsched.nodes n ON n.id = h.node_id
                                       WHERE h.job = g.id
                                       GROUP BY h.worker / (g.group_size * g.stages)
                                      HAVING count(DISTINCT subpath(n.topology, 0, g.stage_span)) > 1))
         AS bad_replicas
  FROM gangsched.gangs g WHERE g.state = 'nominated' \gset
\echo KV nominated :nominated :nominated_gpus :without_victims :bad_cover :bad_resources :bad_groups :bad_replicas

SELECT count(*) AS n FROM (SELECT node_id, slot FROM chk_hslots GROUP BY 1, 2 HAVING count(DISTINCT job) > 1) d \gset
\echo KV slots_held_twice :n
SELECT count(*) AS n
  FROM chk_hslots h JOIN gangsched.held_slots s USING (node_id, slot) JOIN gangsched.gangs v ON v.id = s.job
 WHERE NOT (v.state = 'preempting' AND v.preempted_for = h.job) \gset
\echo KV slots_used_by_others :n
-- When preemptor N is placed (its own victims gone), every other preemptor M
-- on the node holds either its victims or, once placed, its holds: at most
-- max(victims_M, holds_M) of each resource.
WITH per AS (
    SELECT node_id, pfor AS m, sum(cpus) AS vc, sum(mem_gb) AS vm, sum(net_gbps) AS vn, 0 AS hc, 0 AS hm, 0 AS hn
      FROM (SELECT a.node_id, v.preempted_for AS pfor, a.cpus, a.mem_gb, a.net_gbps
              FROM gangsched.allocations a JOIN gangsched.gangs v ON v.id = a.job
             WHERE upper_inf(a.during) AND v.state = 'preempting') x GROUP BY 1, 2
    UNION ALL
    SELECT node_id, job, 0, 0, 0, sum(cpus), sum(mem_gb), sum(net_gbps) FROM gangsched.holds GROUP BY 1, 2),
pm AS (
    SELECT node_id, m, sum(vc) AS vc, sum(vm) AS vm, sum(vn) AS vn, sum(hc) AS hc, sum(hm) AS hm, sum(hn) AS hn
      FROM per GROUP BY 1, 2),
base AS (
    SELECT a.node_id, sum(a.cpus) AS c, sum(a.mem_gb) AS m, sum(a.net_gbps) AS n
      FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
     WHERE upper_inf(a.during) AND g.state <> 'preempting' GROUP BY 1)
SELECT count(*) AS n
  FROM pm nn
  JOIN gangsched.nodes nd ON nd.id = nn.node_id
  LEFT JOIN base b ON b.node_id = nn.node_id
 WHERE nn.hc > 0
   AND (COALESCE(b.c, 0) + nn.hc + (SELECT COALESCE(sum(greatest(o.vc, o.hc)), 0) FROM pm o WHERE o.node_id = nn.node_id AND o.m <> nn.m) > nd.cpus
     OR COALESCE(b.m, 0) + nn.hm + (SELECT COALESCE(sum(greatest(o.vm, o.hm)), 0) FROM pm o WHERE o.node_id = nn.node_id AND o.m <> nn.m) > nd.mem_gb
     OR COALESCE(b.n, 0) + nn.hn + (SELECT COALESCE(sum(greatest(o.vn, o.hn)), 0) FROM pm o WHERE o.node_id = nn.node_id AND o.m <> nn.m) > nd.net_gbps) \gset
\echo KV host_overcommit_after_release :n

SELECT count(*) AS n
  FROM gangsched.gangs v
 WHERE v.state = 'preempting'
   AND NOT EXISTS (SELECT FROM gangsched.held_slots s JOIN chk_hslots h USING (node_id, slot)
                    WHERE s.job = v.id AND h.job = v.preempted_for) \gset
\echo KV unneeded_victims :n

SELECT count(*) AS n
  FROM (SELECT DISTINCT a.node_id, d
          FROM gangsched.allocations a JOIN gangsched.gangs v ON v.id = a.job, unnest(a.devices) AS d
         WHERE upper_inf(a.during) AND v.state = 'preempting') x
 WHERE NOT EXISTS (SELECT FROM gangsched.holds h WHERE h.node_id = x.node_id AND x.d = ANY (h.devices)) \gset
\echo KV idle_gpus :n

SELECT COALESCE(round(avg(c), 2), 0) AS avg, COALESCE(max(c), 0) AS max, COALESCE(min(c), 0) AS min
  FROM (SELECT preempted_for, count(*) AS c FROM gangsched.gangs WHERE state = 'preempting' GROUP BY 1) x \gset
\echo KV victims_per_nomination :avg :min :max
SELECT COALESCE(string_agg(format('%s:%s', t, n), ',' ORDER BY t), '-') AS triggers
  FROM (SELECT detail->>'trigger' AS t, count(*) AS n FROM gangsched.events
         WHERE kind = 'nominated' AND at = gangsched.now() GROUP BY 1) e \gset
\echo KV triggers :triggers
DROP TABLE chk_hslots;
