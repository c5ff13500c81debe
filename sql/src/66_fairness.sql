/* ------------------------------------------------------------------ */
/* Fairness views                                                      */
/* ------------------------------------------------------------------ */

-- The pending queue as the next round would try it (a dry run of the round:
-- nothing is written). Internal; read the `queue` view.
CREATE FUNCTION gangsched._queue(OUT "position" int, OUT job bigint, OUT dominant_share float8,
                                 OUT would_borrow bool, OUT fits_now bool, OUT reason text,
                                 OUT las_queue int, OUT attained_gpu_seconds float8, OUT expected_start timestamptz)
RETURNS SETOF record LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_queue';

-- Pending jobs in the order the next round would try them, with the
-- weighted dominant share of the job's team when it is tried and whether it
-- would run on borrowed capacity (beyond its team's nominal quota); for the
-- jobs of a team whose order is las, its LAS queue and the GPU-seconds it
-- has held so far (NULL for other teams' jobs); the team's place in the
-- tree (path, depth, parent); for the job the starvation guard keeps
-- capacity for, when it is expected to start (from the time limits of the
-- jobs holding that capacity; NULL when unknown).
-- The rows of _queue() the caller may see (see the jobs view).
CREATE FUNCTION gangsched._queue_visible(OUT "position" int, OUT job bigint, OUT dominant_share float8,
                                         OUT would_borrow bool, OUT fits_now bool, OUT reason text,
                                         OUT las_queue int, OUT attained_gpu_seconds float8,
                                         OUT expected_start timestamptz)
RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v record := gangsched._visibility();
BEGIN
    RETURN QUERY
    SELECT q.position, q.job, q.dominant_share, q.would_borrow, q.fits_now, q.reason,
           q.las_queue, q.attained_gpu_seconds, q.expected_start
      FROM gangsched._queue() q
     WHERE v.all_rows OR (SELECT g.team_id FROM gangsched.gangs g WHERE g.id = q.job) = ANY (v.teams);
    -- jobs waiting for other jobs (58_dependencies.sql) are not in the
    -- queue yet: after it, without a position
    RETURN QUERY
    SELECT NULL::int, g.id, NULL::float8, NULL::bool, false, g.reason, NULL::int, NULL::float8, NULL::timestamptz
      FROM gangsched.gangs g
     WHERE g.waiting_for IS NOT NULL AND g.state = 'pending'
       AND (v.all_rows OR g.team_id = ANY (v.teams))
     ORDER BY g.id;
END $$;

CREATE VIEW gangsched.queue AS
SELECT q.position, q.job, t.name AS team, j.name, j.priority, j.workers, j.gpus, j.preemptible,
       round(q.dominant_share::numeric, 4) AS dominant_share, q.would_borrow, q.fits_now, q.reason,
       j.submitted_at, q.las_queue, q.attained_gpu_seconds,
       tt.path, tt.depth, tt.parent, q.expected_start
  FROM gangsched._queue_visible() q
  JOIN gangsched.gangs j ON j.id = q.job
  JOIN gangsched.teams t ON t.id = j.team_id
  JOIN gangsched._team_tree tt ON tt.team_id = j.team_id
 ORDER BY q.position NULLS LAST, q.job;

-- Per team and pool: nominal quota, what the team holds, what it borrows,
-- what of its idle nominal quota others use (lent), its weighted dominant
-- share over the whole cluster (up nodes), and its weight. The share is the
-- one rounds use: gangs told to stop no longer count, capacity held for the
-- team's nominated jobs does (the used_ and borrowed_ columns are what the
-- team's allocations hold now).
--
-- Lent: borrowers first use the pool's capacity that is nobody's quota (up
-- nodes' GPUs minus the pool's nominal quotas); only the pool's borrowed
-- GPUs beyond that come out of idle quotas, and they are charged to the
-- teams pro rata to what each may lend (its idle quota, capped by its
-- lending limit).
--
-- Team trees: every team has rows, inner teams too; a team's used,
-- borrowed and lent amounts and its dominant share are those of its whole
-- subtree (for a leaf: its own), its nominal quota and limits its own row
-- of gangsched.quotas. Only leaves lend (an inner team's quota is carved
-- into its children's), and the pool's unassigned capacity is what the
-- topmost quotas (those with no quota above them in the tree) leave.
-- fair_share: the subtree's hierarchical weighted DRF share of the cluster
-- over use plus pending demand (_fair_shares, 64_team_tree.sql), nominal
-- quotas as floors, lending limits keeping idle quota from others and
-- borrowing limits capping (docs/fairness.md, "Quotas in the fair share").
-- With a one-level tree every row is what it was without trees.
CREATE VIEW gangsched._team_shares_rows AS
WITH cap AS (
    SELECT sum(n.gpus) AS gpus, sum(n.cpus) AS cpus, sum(n.mem_gb) AS mem, sum(n.net_gbps) AS net
      FROM gangsched.nodes n WHERE n.state = 'up'),
pool_cap AS (
    SELECT n.pool_id, sum(n.gpus) AS gpus FROM gangsched.nodes n WHERE n.state = 'up' GROUP BY n.pool_id),
tree AS MATERIALIZED (SELECT * FROM gangsched._team_tree),
held AS (
    SELECT a.team_id, n.pool_id, sum(a.gpus) AS gpus, sum(a.cpus) AS cpus, sum(a.mem_gb) AS mem,
           sum(a.net_gbps) AS net, COALESCE(sum(a.gpus) FILTER (WHERE a.borrowed), 0) AS borrowed_gpus
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE upper_inf(a.during)
     GROUP BY a.team_id, n.pool_id),
-- what the share counts, as the round does (src/loader.c): current
-- allocations except those of gangs told to stop (leaving), and the
-- capacity held for nominated jobs (arriving)
team_held AS (
    SELECT x.team_id, sum(x.gpus) AS gpus, sum(x.cpus) AS cpus, sum(x.mem) AS mem, sum(x.net) AS net
      FROM (SELECT a.team_id, a.gpus, a.cpus, a.mem_gb AS mem, a.net_gbps AS net
              FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
             WHERE upper_inf(a.during) AND g.state <> 'preempting'
            UNION ALL
            SELECT g.team_id, g.gpus, h.cpus, h.mem_gb, h.net_gbps
              FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job) x
     GROUP BY x.team_id),
-- each team's own rows, as without trees
rows AS (
    SELECT t.id AS team_id, p.id AS pool_id,
           q.gpus AS nominal_gpus,
           COALESCE(h.gpus, 0) AS used_gpus, COALESCE(h.cpus, 0) AS used_cpus,
           COALESCE(h.mem, 0) AS used_mem_gb, COALESCE(h.net, 0) AS used_net_gbps,
           COALESCE(h.borrowed_gpus, 0) AS borrowed_gpus,
           CASE WHEN tr.leaf THEN LEAST(GREATEST(COALESCE(q.gpus, 0) - COALESCE(h.gpus, 0), 0),
                                        COALESCE(q.lend_gpus, 'Infinity'::numeric)) ELSE 0 END AS lendable_gpus,
           -- a topmost quota: no quota above it in the tree
           q.team_id IS NOT NULL AND NOT EXISTS (
               SELECT FROM gangsched.quotas x
                WHERE x.pool_id = p.id AND x.team_id = ANY (tr.ancestors) AND x.team_id <> t.id) AS topmost
      FROM gangsched.teams t JOIN tree tr ON tr.team_id = t.id CROSS JOIN gangsched.pools p
      LEFT JOIN gangsched._effective_quotas q ON q.team_id = t.id AND q.pool_id = p.id
      LEFT JOIN held h ON h.team_id = t.id AND h.pool_id = p.id
     WHERE q.team_id IS NOT NULL OR h.team_id IS NOT NULL),
pool_lent AS (
    -- borrowed GPUs of the pool that its unassigned capacity does not cover
    SELECT r.pool_id,
           LEAST(sum(r.borrowed_gpus),
                 GREATEST(sum(r.borrowed_gpus) - (COALESCE(max(pc.gpus), 0)
                                                  - COALESCE(sum(r.nominal_gpus) FILTER (WHERE r.topmost), 0)), 0)) AS gpus,
           sum(r.lendable_gpus) AS lendable
      FROM rows r LEFT JOIN pool_cap pc ON pc.pool_id = r.pool_id
     GROUP BY r.pool_id),
lent AS (
    SELECT r.*, CASE WHEN pl.lendable > 0 THEN r.lendable_gpus * LEAST(1, pl.gpus / pl.lendable) ELSE 0 END AS lent_gpus
      FROM rows r JOIN pool_lent pl ON pl.pool_id = r.pool_id),
-- a team's rows: the sums over its subtree's own rows
sub AS (
    SELECT a.id AS team_id, l.pool_id, sum(l.used_gpus) AS used_gpus, sum(l.used_cpus) AS used_cpus,
           sum(l.used_mem_gb) AS used_mem_gb, sum(l.used_net_gbps) AS used_net_gbps,
           sum(l.borrowed_gpus) AS borrowed_gpus, sum(l.lent_gpus) AS lent_gpus
      FROM lent l JOIN tree tr ON tr.team_id = l.team_id CROSS JOIN LATERAL unnest(tr.ancestors) a(id)
     GROUP BY 1, 2),
sub_held AS (
    SELECT a.id AS team_id, sum(th.gpus) AS gpus, sum(th.cpus) AS cpus, sum(th.mem) AS mem, sum(th.net) AS net
      FROM team_held th JOIN tree tr ON tr.team_id = th.team_id CROSS JOIN LATERAL unnest(tr.ancestors) a(id)
     GROUP BY 1)
SELECT t.name AS team, p.name AS pool, t.weight, q.gpus AS nominal_gpus, q.cpus AS nominal_cpus,
       q.mem_gb AS nominal_mem_gb, q.net_gbps AS nominal_net_gbps,
       q.borrow_gpus AS borrowing_limit_gpus, q.lend_gpus AS lending_limit_gpus,
       s.used_gpus, s.used_cpus, s.used_mem_gb, s.used_net_gbps, s.borrowed_gpus,
       round(s.lent_gpus, 3) AS lent_gpus,
       round((GREATEST(COALESCE(th.gpus / NULLIF(cap.gpus, 0), 0), COALESCE(th.cpus / NULLIF(cap.cpus, 0), 0),
                       COALESCE(th.mem / NULLIF(cap.mem, 0), 0), COALESCE(th.net / NULLIF(cap.net, 0), 0))
              / t.weight)::numeric, 4) AS dominant_share,
       tr.path, tr.depth, tr.parent,
       round(COALESCE(f.fair_share, 0)::numeric, 4) AS fair_share
  FROM sub s CROSS JOIN cap
  JOIN gangsched.teams t ON t.id = s.team_id
  JOIN gangsched.pools p ON p.id = s.pool_id
  JOIN tree tr ON tr.team_id = s.team_id
  LEFT JOIN gangsched._effective_quotas q ON q.team_id = s.team_id AND q.pool_id = s.pool_id
  LEFT JOIN sub_held th ON th.team_id = s.team_id
  LEFT JOIN gangsched._fair_shares() f ON f.team_id = s.team_id
 ORDER BY p.name, t.name;

-- Readers get the rows above through a function that runs without JIT: the
-- view's plan is estimated above jit_above_cost on a large cluster and
-- compiling it took 0.9-2.6 s for a query that runs in milliseconds (views
-- cannot carry SET). Every reader sees every row, so the function runs as
-- the owner (SECURITY DEFINER, see 99_search_path.sql).
CREATE FUNCTION gangsched._team_shares() RETURNS SETOF gangsched._team_shares_rows
LANGUAGE sql STABLE SET jit = off AS $$ SELECT * FROM gangsched._team_shares_rows $$;

CREATE VIEW gangsched.team_shares AS
SELECT s.* FROM gangsched._team_shares() s ORDER BY s.pool, s.team;
