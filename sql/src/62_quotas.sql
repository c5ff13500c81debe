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

-- Team trees: does the team have a parent? (PL/pgSQL: teams.parent_id is
-- added by 64_team_admin.sql, after this file.)
CREATE FUNCTION gangsched._has_parent(team int) RETURNS bool
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT FROM gangsched.teams t WHERE t.id = team AND t.parent_id IS NOT NULL);
END $$;

-- Team trees: the guaranteed use of team's subtree in the pool, per
-- resource [GPUs, CPUs, GB, Gbit/s]: its own open allocations plus each
-- child's guaranteed use, capped at the child's nominal amount where the
-- child has one (src/fair.c, GsQuota.gused).
CREATE FUNCTION gangsched._tree_gused(team int, pool int) RETURNS numeric[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    g  numeric[];
    c  record;
    h  numeric[];
    i  int;
BEGIN
    SELECT ARRAY[COALESCE(sum(a.gpus), 0), COALESCE(sum(a.cpus), 0), COALESCE(sum(a.mem_gb), 0), COALESCE(sum(a.net_gbps), 0)]
      INTO g
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
     WHERE pg_catalog.upper_inf(a.during) AND a.team_id = team AND n.pool_id = pool;
    FOR c IN SELECT t.id, q.team_id IS NOT NULL AS has, ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps] AS nominal
               FROM gangsched.teams t
               LEFT JOIN gangsched._effective_quotas q ON q.team_id = t.id AND q.pool_id = pool
              WHERE t.parent_id = team LOOP
        h := gangsched._tree_gused(c.id, pool);
        FOR i IN 1 .. 4 LOOP
            g[i] := g[i] + CASE WHEN c.has AND c.nominal[i] IS NOT NULL THEN LEAST(h[i], c.nominal[i]) ELSE h[i] END;
        END LOOP;
    END LOOP;
    RETURN g;
END $$;

-- Team trees: the "borrowed" rule for a team with a parent. Guaranteed
-- (not borrowed) when the work stays within the nominal quota of the team
-- and of every ancestor with a quota row in the pool (at least one on the
-- path has one); an ancestor counts its subtree's guaranteed use, plus the
-- unused nominal quota of its other children, kept for them (src/fair.c,
-- tree_within_nominal). used is the team's own use in the pool.
CREATE FUNCTION gangsched._beyond_nominal_tree(team_id int, pool_id int, demand numeric[], used numeric[]) RETURNS bool
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t       int := team_id;
    child   int;
    up      int;
    delta   numeric[] := demand;
    nd      numeric[] := ARRAY[0, 0, 0, 0];
    g       numeric[];
    nominal numeric[];
    has     bool;
    any_q   bool := false;
    kept    numeric;
    i       int;
    n       int := 0;
BEGIN
    LOOP
        SELECT ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps] INTO nominal
          FROM gangsched._effective_quotas q WHERE q.team_id = t AND q.pool_id = _beyond_nominal_tree.pool_id;
        has := FOUND;
        g := CASE WHEN t = _beyond_nominal_tree.team_id THEN used ELSE gangsched._tree_gused(t, _beyond_nominal_tree.pool_id) END;
        IF has THEN
            any_q := true;
            FOR i IN 1 .. 4 LOOP
                CONTINUE WHEN nominal[i] IS NULL;
                kept := CASE WHEN child IS NULL THEN 0 ELSE (
                    SELECT COALESCE(sum(GREATEST(0, (ARRAY[k.gpus, k.cpus, k.mem_gb, k.net_gbps])[i]
                                                     - (gangsched._tree_gused(o.id, _beyond_nominal_tree.pool_id))[i])), 0)
                      FROM gangsched.teams o
                      JOIN gangsched._effective_quotas k ON k.team_id = o.id AND k.pool_id = _beyond_nominal_tree.pool_id
                     WHERE o.parent_id = t AND o.id <> child
                       AND (ARRAY[k.gpus, k.cpus, k.mem_gb, k.net_gbps])[i] IS NOT NULL) END;
                IF g[i] + delta[i] + kept > nominal[i] THEN
                    RETURN true;
                END IF;
            END LOOP;
        END IF;
        SELECT x.parent_id INTO up FROM gangsched.teams x WHERE x.id = t;
        n := n + 1;
        EXIT WHEN up IS NULL OR n > 64;
        FOR i IN 1 .. 4 LOOP
            nd[i] := CASE WHEN has AND nominal[i] IS NOT NULL
                          THEN LEAST(g[i] + delta[i], nominal[i]) - LEAST(g[i], nominal[i]) ELSE delta[i] END;
        END LOOP;
        delta := nd;
        child := t;
        t := up;
    END LOOP;
    RETURN NOT any_q;
END $$;

-- The "borrowed" rule: work of a team in a pool is borrowed (beyond its
-- nominal quota) unless the team has a quota there and, for every resource
-- the quota governs, what the team uses there plus the work's demand stays
-- within the nominal amount. demand and used are [GPUs, CPUs, GB of memory,
-- Gbit/s]. The rounds apply the same rule in C (within_nominal() and
-- gs_beyond_nominal() in src/fair.c, over the quotas of this view, with the
-- team's allocations and held capacity as its use);
-- test/sql/53_borrowed_agree.sql proves that the two agree. A team with a
-- parent (a team tree) follows _beyond_nominal_tree, as the rounds do.
CREATE FUNCTION gangsched._beyond_nominal(team_id int, pool_id int, demand numeric[], used numeric[]) RETURNS bool
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN gangsched._has_parent(team_id)
                THEN gangsched._beyond_nominal_tree(team_id, pool_id, demand, used)
                ELSE NOT COALESCE((
        SELECT q.gpus >= used[1] + demand[1]
               AND (q.cpus IS NULL OR q.cpus >= used[2] + demand[2])
               AND (q.mem_gb IS NULL OR q.mem_gb >= used[3] + demand[3])
               AND (q.net_gbps IS NULL OR q.net_gbps >= used[4] + demand[4])
          FROM gangsched._effective_quotas q
         WHERE q.team_id = _beyond_nominal.team_id AND q.pool_id = _beyond_nominal.pool_id), false) END
$$;
