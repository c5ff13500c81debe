/* ------------------------------------------------------------------ */
/* Effective quotas                                                    */
/* ------------------------------------------------------------------ */

-- The quotas as every reader applies them (issue 10). Internal: the loader
-- (src/loader.c, and through it the rounds, the queue view and the
-- admission fast path), _admit, team_shares and _place_ready_nominated read
-- quotas only through this view.
--
-- cpus and mem_gb as stored in gangsched.quotas:
--   a number    that amount;
--   NULL        proportional to the team's GPU share of the pool:
--               gpus × pool CPUs / pool GPUs (memory the same), the pool's
--               totals taken from its registered nodes (node_classes), so
--               the amount does not move when a node goes down or comes
--               back; in a pool without GPUs: not governed;
--   'Infinity'  not governed (set explicitly by the operator).
-- Here a resource that is not governed is NULL, as the readers expect.
-- net_gbps stays as stored: NULL is not governed (docs/fairness.md).
--
-- Lending limits are capped at the effective nominal amount (set_quota
-- refuses larger ones against the pool as it is then, but the pool may
-- change later); borrowing limits keep their meaning above it.
CREATE VIEW gangsched._effective_quotas AS
SELECT q.team_id, q.pool_id, q.gpus, e.cpus, e.mem_gb, q.net_gbps,
       q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps,
       q.lend_gpus,
       CASE WHEN q.lend_cpus IS NOT NULL THEN LEAST(q.lend_cpus, e.cpus) END AS lend_cpus,
       CASE WHEN q.lend_mem_gb IS NOT NULL THEN LEAST(q.lend_mem_gb, e.mem_gb) END AS lend_mem_gb,
       q.lend_net_gbps
  FROM gangsched.quotas q
  LEFT JOIN (SELECT c.pool_id, sum(c.nodes::numeric * c.gpus) AS gpus, sum(c.nodes * c.cpus) AS cpus,
                    sum(c.nodes * c.mem_gb) AS mem_gb
               FROM gangsched.node_classes c GROUP BY c.pool_id) pt ON pt.pool_id = q.pool_id
 CROSS JOIN LATERAL (
       SELECT CASE WHEN q.cpus = 'Infinity'::numeric THEN NULL
                   WHEN q.cpus IS NOT NULL THEN q.cpus
                   WHEN pt.gpus > 0 THEN pg_catalog.trim_scale(q.gpus * pt.cpus / pt.gpus) END AS cpus,
              CASE WHEN q.mem_gb = 'Infinity'::numeric THEN NULL
                   WHEN q.mem_gb IS NOT NULL THEN q.mem_gb
                   WHEN pt.gpus > 0 THEN pg_catalog.trim_scale(q.gpus * pt.mem_gb / pt.gpus) END AS mem_gb) e;

-- The "borrowed" rule: work of a team in a pool is borrowed (beyond its
-- nominal quota) unless the team has a quota there and, for every resource
-- the quota governs, what the team uses there plus the work's demand stays
-- within the nominal amount. demand and used are [GPUs, CPUs, GB of memory,
-- Gbit/s]. The rounds apply the same rule in C (within_nominal() and
-- gs_beyond_nominal() in src/fair.c, over the quotas of this view, with the
-- team's allocations and held capacity as its use);
-- test/sql/53_borrowed_agree.sql proves that the two agree.
CREATE FUNCTION gangsched._beyond_nominal(team_id int, pool_id int, demand numeric[], used numeric[]) RETURNS bool
LANGUAGE sql STABLE AS $$
    SELECT NOT COALESCE((
        SELECT q.gpus >= used[1] + demand[1]
               AND (q.cpus IS NULL OR q.cpus >= used[2] + demand[2])
               AND (q.mem_gb IS NULL OR q.mem_gb >= used[3] + demand[3])
               AND (q.net_gbps IS NULL OR q.net_gbps >= used[4] + demand[4])
          FROM gangsched._effective_quotas q
         WHERE q.team_id = _beyond_nominal.team_id AND q.pool_id = _beyond_nominal.pool_id), false)
$$;
