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
 *  nominated        jobs in 'nominated', with how many lack a victim (of
 *                   their own, or an earlier victim of the round whose rest
 *                   of the capacity they hold and wait for), whose
 *                   holds do not cover workers 0 … workers-1 exactly once,
 *                   whose holds ask for other per-worker resources than the
 *                   job (cpus, mem, net, whole devices), whose tensor groups
 *                   or pipeline replicas leave their group_span / stage_span
 *                   domain
 *  conflicts        held device slots held twice; held slots now used by a
 *                   job that is not a victim draining (its own, or one whose
 *                   rest it waits for); nodes whose cpus/mem/net would be
 *                   over-committed when a preemptor is placed (the victims
 *                   it waits for gone; every other preemptor on the node
 *                   counted with the larger of its remaining victims' and
 *                   its holds' use there)
 *  unneeded         victims none of whose device slots any hold
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
-- the victims each nominated job waits for: its own, and those whose slots it holds
CREATE TEMP TABLE chk_waits AS
SELECT v.preempted_for AS job, v.id AS victim FROM gangsched.gangs v WHERE v.state = 'preempting'
UNION
SELECT h.job, s.job FROM chk_hslots h JOIN gangsched.held_slots s USING (node_id, slot)
  JOIN gangsched.gangs v ON v.id = s.job WHERE v.state = 'preempting';

SELECT count(*) AS nominated,
       COALESCE(sum(g.gpus * g.workers), 0) AS nominated_gpus,
       count(*) FILTER (WHERE NOT EXISTS (SELECT FROM chk_waits w WHERE w.job = g.id)) AS without_victims,
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
 WHERE v.state <> 'preempting' \gset
\echo KV slots_used_by_others :n
-- When preemptor N is placed (the victims it waits for gone), every other
-- preemptor M on the node holds either its remaining victims or, once
-- placed, its holds: at most max(victims_M, holds_M) of each resource.
WITH vic AS (
    SELECT a.node_id, v.preempted_for AS m, v.id AS victim, sum(a.cpus) AS vc, sum(a.mem_gb) AS vm, sum(a.net_gbps) AS vn
      FROM gangsched.allocations a JOIN gangsched.gangs v ON v.id = a.job
     WHERE upper_inf(a.during) AND v.state = 'preempting' GROUP BY 1, 2, 3),
hold AS (
    SELECT node_id, job AS m, sum(cpus) AS hc, sum(mem_gb) AS hm, sum(net_gbps) AS hn FROM gangsched.holds GROUP BY 1, 2),
base AS (
    SELECT a.node_id, sum(a.cpus) AS c, sum(a.mem_gb) AS m, sum(a.net_gbps) AS n
      FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
     WHERE upper_inf(a.during) AND g.state <> 'preempting' GROUP BY 1),
others AS (
    SELECT nn.node_id, nn.m AS n_job,
           sum(greatest(COALESCE(o.vc, 0), COALESCE(oh.hc, 0))) AS c,
           sum(greatest(COALESCE(o.vm, 0), COALESCE(oh.hm, 0))) AS m,
           sum(greatest(COALESCE(o.vn, 0), COALESCE(oh.hn, 0))) AS n
      FROM hold nn
      JOIN (SELECT node_id, m FROM vic UNION SELECT node_id, m FROM hold) om ON om.node_id = nn.node_id AND om.m <> nn.m
      LEFT JOIN LATERAL (SELECT sum(v.vc) AS vc, sum(v.vm) AS vm, sum(v.vn) AS vn FROM vic v
                          WHERE v.node_id = nn.node_id AND v.m = om.m
                            AND NOT EXISTS (SELECT FROM chk_waits w WHERE w.job = nn.m AND w.victim = v.victim)) o ON true
      LEFT JOIN hold oh ON oh.node_id = nn.node_id AND oh.m = om.m
     GROUP BY 1, 2)
SELECT count(*) AS n
  FROM hold nn
  JOIN gangsched.nodes nd ON nd.id = nn.node_id
  LEFT JOIN base b ON b.node_id = nn.node_id
  LEFT JOIN others o ON o.node_id = nn.node_id AND o.n_job = nn.m
 WHERE nn.hc > 0
   AND (COALESCE(b.c, 0) + nn.hc + COALESCE(o.c, 0) > nd.cpus
     OR COALESCE(b.m, 0) + nn.hm + COALESCE(o.m, 0) > nd.mem_gb
     OR COALESCE(b.n, 0) + nn.hn + COALESCE(o.n, 0) > nd.net_gbps) \gset
\echo KV host_overcommit_after_release :n

SELECT count(*) AS n
  FROM gangsched.gangs v
 WHERE v.state = 'preempting'
   AND NOT EXISTS (SELECT FROM gangsched.held_slots s JOIN chk_hslots h USING (node_id, slot)
                    WHERE s.job = v.id) \gset
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
DROP TABLE chk_waits;
