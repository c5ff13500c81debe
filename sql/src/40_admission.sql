/* ------------------------------------------------------------------ */
/* Admission control                                                   */
/* ------------------------------------------------------------------ */

-- Slices of one device a fractional request takes on devices with `slices`
-- partitions; 0 when the fraction is not a whole number of slices.
-- This and _fit() stay inlinable (no SET search_path): only gangsched's own
-- functions, which run under its fixed search_path, may call them (PUBLIC
-- has no EXECUTE), so their operators resolve in pg_catalog; their
-- functions are qualified all the same.
CREATE FUNCTION gangsched._slices_needed(gpus numeric, slices int) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN pg_catalog.abs(gpus * slices - pg_catalog.round(gpus * slices)) <= 0.001
                     AND pg_catalog.round(gpus * slices) >= 1
                THEN pg_catalog.round(gpus * slices)::pg_catalog.int4 ELSE 0 END
$$;

-- How many workers of one request fit on an empty node of the given shape.
CREATE FUNCTION gangsched._fit(n_cpus numeric, n_mem numeric, n_net numeric, n_gpus int, n_model text,
                               n_gpu_mem numeric, n_slices int,
                               w_gpus numeric, w_cpus numeric, w_mem numeric, w_net numeric,
                               w_model text, w_gpu_mem numeric) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT LEAST(
        CASE WHEN w_cpus > 0 THEN pg_catalog.floor(n_cpus / w_cpus) ELSE 1000000 END,
        CASE WHEN w_mem > 0 THEN pg_catalog.floor(n_mem / w_mem) ELSE 1000000 END,
        CASE WHEN w_net > 0 THEN pg_catalog.floor(n_net / w_net) ELSE 1000000 END,
        CASE WHEN w_gpus = 0 THEN 1000000
             WHEN n_gpus = 0 THEN 0
             WHEN w_model IS NOT NULL AND n_model IS DISTINCT FROM w_model THEN 0
             WHEN w_gpu_mem IS NOT NULL AND COALESCE(n_gpu_mem, 0) < w_gpu_mem THEN 0
             WHEN w_gpus >= 1 THEN pg_catalog.floor(n_gpus / w_gpus)
             WHEN gangsched._slices_needed(w_gpus, n_slices) = 0 THEN 0
             ELSE n_gpus * (n_slices / gangsched._slices_needed(w_gpus, n_slices))
        END)::int
$$;

-- Workers of one request that each domain at `depth` (0: each pool) could
-- hold on empty nodes. pack 0 sums what fits node by node; pack 1 counts
-- whole tensor groups only, each inside one node or group_span domain; pack 2
-- also whole pipeline replicas, each inside one node or stage_span domain.
-- Works on node classes and per-domain class counts, never on nodes, and
-- reads domain counts only at the deepest level where packing needs them.
CREATE FUNCTION gangsched._capacity(j gangsched.gangs, pools int[], depth int, pack int)
RETURNS TABLE (pool_id int, domain text, workers bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    d_node  int := gangsched._levels() + 1;
    rsize   int := j.group_size * j.stages;
    g_dom   bool := pack >= 1 AND j.group_span < d_node;
    s_dom   bool := pack >= 2 AND j.stage_span < d_node;
    base    int := CASE WHEN g_dom THEN j.group_span WHEN s_dom THEN j.stage_span ELSE depth END;
BEGIN
    RETURN QUERY
    WITH fits AS (  -- workers on one node of each eligible class, whole groups or replicas per node
        SELECT c.id, c.pool_id, c.nodes::bigint AS nodes, CASE
                   WHEN pack >= 2 AND j.stage_span = d_node THEN f.per / rsize * rsize
                   WHEN pack >= 1 AND NOT g_dom THEN f.per / j.group_size * j.group_size
                   ELSE f.per END AS per
          FROM gangsched.node_classes c,
               LATERAL (SELECT gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                                              j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)::bigint AS per) f
         WHERE c.pool_id = ANY (pools) AND c.nodes > 0),
    at_base AS (    -- per pool and domain at the base depth, with the enclosing
                    -- stage_span and output domains (text keys hash quickly)
        SELECT f.pool_id, NULL::text AS dom, NULL::text AS sdom, NULL::text AS odom, sum(f.nodes * f.per)::bigint AS cap
          FROM fits f WHERE base = 0 GROUP BY 1
        UNION ALL
        SELECT f.pool_id, dc.domain::text, CASE WHEN s_dom THEN gangsched._subpath(dc.domain, 0, j.stage_span)::text END,
               CASE WHEN _capacity.depth > 0 THEN gangsched._subpath(dc.domain, 0, _capacity.depth)::text END, sum(dc.nodes * f.per)::bigint
          FROM gangsched.domain_classes dc JOIN fits f ON f.id = dc.class_id
         WHERE base > 0 AND dc.depth = base GROUP BY 1, 2, 3, 4),
    grouped AS (    -- whole tensor groups per group_span domain
        SELECT b.pool_id, b.dom, b.sdom, b.odom,
               CASE WHEN g_dom THEN b.cap / j.group_size * j.group_size ELSE b.cap END AS cap
          FROM at_base b),
    replicas AS (   -- whole pipeline replicas per stage_span domain
        SELECT g.pool_id, g.odom,
               CASE WHEN s_dom THEN sum(g.cap)::bigint / rsize * rsize ELSE sum(g.cap)::bigint END AS cap
          FROM grouped g GROUP BY g.pool_id, CASE WHEN s_dom THEN g.sdom ELSE g.dom END, g.odom)
    SELECT r.pool_id, CASE WHEN depth = 0 THEN p.name ELSE r.odom END, sum(r.cap)::bigint
      FROM replicas r JOIN gangsched.pools p ON p.id = r.pool_id
     GROUP BY 1, 2;
END $$;

-- Raises the first reason a job could never run; returns nothing otherwise.
-- Reasons over node classes and per-domain class counts, not nodes.
CREATE FUNCTION gangsched._admit(j gangsched.gangs) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    pools      int[];
    best       bigint;
    r          record;
    lvl        record;
    d_node     int := gangsched._levels() + 1;
    dom        text;
    what       text;
    demand     numeric[];
    ceiling    numeric[];
    res        text[] := ARRAY['GPUs', 'CPUs', 'GB of memory', 'Gbit/s of network'];
    i          int;
    ok         bool := false;
    why        text;
BEGIN
    -- eligible pools
    IF j.pool_id IS NOT NULL THEN
        pools := ARRAY[j.pool_id];
    ELSE
        SELECT array_agg(id) INTO pools FROM gangsched.pools WHERE j.preemptible OR kind = 'reserved';
    END IF;
    IF pools IS NULL OR NOT EXISTS (SELECT FROM gangsched.node_classes WHERE pool_id = ANY (pools) AND nodes > 0) THEN
        RAISE EXCEPTION 'no eligible pool has any node'
            USING ERRCODE = '53S04',
                  DETAIL = CASE WHEN j.preemptible THEN 'No nodes are registered in the pools this job may use.'
                                ELSE 'A non-preemptible job runs only in reserved pools, and none has nodes.' END,
                  HINT = 'Register nodes with gangsched.add_node() first, or submit to another pool.';
    END IF;

    -- unknown model
    IF j.gpus > 0 AND j.gpu_model IS NOT NULL
       AND NOT EXISTS (SELECT FROM gangsched.node_classes WHERE gpu_model = j.gpu_model AND gpus > 0) THEN
        RAISE EXCEPTION 'unknown gpu model "%"', j.gpu_model
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('The cluster has %s.', COALESCE((SELECT string_agg(DISTINCT gpu_model, ', ') FROM gangsched.node_classes WHERE gpus > 0), 'no GPU models')),
                  HINT = 'Name one of the models the cluster has, or leave gpu_model NULL for any.';
    END IF;

    -- a fraction the devices cannot slice
    IF j.gpus > 0 AND j.gpus < 1 AND EXISTS (
           SELECT FROM gangsched.node_classes c
            WHERE c.pool_id = ANY (pools) AND c.gpus > 0 AND (j.gpu_model IS NULL OR c.gpu_model = j.gpu_model))
       AND NOT EXISTS (
           SELECT FROM gangsched.node_classes c
            WHERE c.pool_id = ANY (pools) AND c.gpus > 0
              AND (j.gpu_model IS NULL OR c.gpu_model = j.gpu_model)
              AND gangsched._slices_needed(j.gpus, c.gpu_slices) > 0) THEN
        RAISE EXCEPTION 'no device can be sliced into % of a GPU', trim_scale(j.gpus)
            USING ERRCODE = '53S02',
                  DETAIL = format('Eligible devices offer slices of %s of a device.',
                                  (SELECT string_agg(DISTINCT '1/' || gpu_slices, ', ') FROM gangsched.node_classes
                                    WHERE pool_id = ANY (pools) AND gpus > 0 AND (j.gpu_model IS NULL OR gpu_model = j.gpu_model))),
                  HINT = 'Ask for a whole number of slices of one device, for example 0.25 on 4-slice devices, or a whole GPU.';
    END IF;

    -- a worker bigger than every eligible node
    SELECT max(gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                              j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)) AS fit,
           max(c.cpus) AS cpus, max(c.mem_gb) AS mem, max(c.net_gbps) AS net,
           max(c.gpus) FILTER (WHERE j.gpu_model IS NULL OR c.gpu_model = j.gpu_model) AS gpus,
           max(c.gpu_mem_gb) FILTER (WHERE j.gpu_model IS NULL OR c.gpu_model = j.gpu_model) AS gpu_mem
      INTO r
      FROM gangsched.node_classes c WHERE c.pool_id = ANY (pools) AND c.nodes > 0;
    IF r.fit < 1 THEN
        IF j.gpus > 0 AND COALESCE(r.gpus, 0) = 0 THEN
            RAISE EXCEPTION 'no eligible node has GPUs%', COALESCE(' of model ' || j.gpu_model, '')
                USING ERRCODE = '53S01',
                      DETAIL = format('The pools this job may use (%s) have no such devices.%s',
                                      (SELECT string_agg(p.name, ', ' ORDER BY p.name) FROM gangsched.pools p WHERE p.id = ANY (pools)),
                                      CASE WHEN NOT j.preemptible AND j.pool_id IS NULL THEN ' A non-preemptible job runs only in reserved pools.' ELSE '' END),
                      HINT = 'Choose another pool or GPU model, or ask for gpus => 0 for a CPU-only worker.';
        ELSIF j.gpus >= 1 AND j.gpus > COALESCE(r.gpus, 0) THEN
            RAISE EXCEPTION 'worker asks for % GPUs but each eligible node has at most %', trim_scale(j.gpus), COALESCE(r.gpus, 0)
                USING ERRCODE = '53S01', DETAIL = format('Each eligible node has at most %s GPUs%s.', COALESCE(r.gpus, 0),
                                                         CASE WHEN j.gpu_model IS NOT NULL THEN ' of model ' || j.gpu_model ELSE '' END),
                      HINT = format('Ask for at most %s GPUs per worker, and more workers.', COALESCE(r.gpus, 0));
        ELSIF j.gpus > 0 AND j.gpu_mem_gb > COALESCE(r.gpu_mem, 0) THEN
            RAISE EXCEPTION 'worker asks for devices with % GB but the largest eligible device has % GB', trim_scale(j.gpu_mem_gb), COALESCE(trim_scale(r.gpu_mem), 0)
                USING ERRCODE = '53S01', DETAIL = 'No eligible node has devices with that much memory.',
                      HINT = format('Ask for gpu_mem_gb of at most %s.', COALESCE(trim_scale(r.gpu_mem), 0));
        ELSIF j.cpus > r.cpus THEN
            RAISE EXCEPTION 'worker asks for % CPUs but each eligible node has at most %', trim_scale(j.cpus), trim_scale(r.cpus)
                USING ERRCODE = '53S01', DETAIL = format('Each eligible node has at most %s CPUs.', trim_scale(r.cpus)),
                      HINT = format('Ask for at most %s CPUs per worker.', trim_scale(r.cpus));
        ELSIF j.mem_gb > r.mem THEN
            RAISE EXCEPTION 'worker asks for % GB of memory but each eligible node has at most %', trim_scale(j.mem_gb), trim_scale(r.mem)
                USING ERRCODE = '53S01', DETAIL = format('Each eligible node has at most %s GB of memory.', trim_scale(r.mem)),
                      HINT = format('Ask for at most %s GB per worker.', trim_scale(r.mem));
        ELSIF j.net_gbps > r.net THEN
            RAISE EXCEPTION 'worker asks for % Gbit/s of network but each eligible node has at most %', trim_scale(j.net_gbps), trim_scale(r.net)
                USING ERRCODE = '53S01', DETAIL = format('Each eligible node has at most %s Gbit/s.', trim_scale(r.net)),
                      HINT = format('Ask for at most %s Gbit/s per worker.', trim_scale(r.net));
        ELSE
            RAISE EXCEPTION 'no eligible node can hold one worker'
                USING ERRCODE = '53S01',
                      DETAIL = format('The worker asks for %s GPUs, %s CPUs, %s GB and %s Gbit/s together; no single eligible node has all of these.',
                                      trim_scale(j.gpus), trim_scale(j.cpus), trim_scale(j.mem_gb), trim_scale(j.net_gbps)),
                      HINT = 'Lower one of the per-worker amounts, or choose a GPU model whose nodes have more host resources.';
        END IF;
    END IF;

    -- groups, pipeline replicas and the whole gang inside their domains
    FOR lvl IN
        SELECT * FROM (VALUES (1, j.group_size, j.group_span, 'a tensor group of ' || j.group_size || ' workers', 'group_span'),
                              (2, j.group_size * j.stages, j.stage_span, 'a pipeline replica of ' || (j.group_size * j.stages) || ' workers', 'stage_span'),
                              (3, j.workers, j.span, 'the gang of ' || j.workers || ' workers', 'span')) v(k, n, depth, what, arg)
         WHERE depth IS NOT NULL
    LOOP
        IF lvl.depth = d_node THEN
            SELECT max(gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                                      j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)), NULL
              INTO best, dom
              FROM gangsched.node_classes c WHERE c.pool_id = ANY (pools) AND c.nodes > 0;
        ELSIF lvl.k = 1 OR j.group_size * j.stages = 1 THEN
            SELECT s.cap, s.domain INTO best, dom FROM (
                SELECT dc.domain::text AS domain, c.pool_id,
                       sum(dc.nodes::bigint * gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                                                             j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)) AS cap
                  FROM gangsched.domain_classes dc JOIN gangsched.node_classes c ON c.id = dc.class_id
                 WHERE dc.depth = lvl.depth AND c.pool_id = ANY (pools)
                 GROUP BY 1, 2) s
             ORDER BY s.cap DESC, s.domain LIMIT 1;
        ELSE
            -- a replica counts whole tensor groups only; the gang whole
            -- groups and whole replicas
            SELECT c.workers, c.domain INTO best, dom
              FROM gangsched._capacity(j, pools, lvl.depth, lvl.k - 1) c
             ORDER BY c.workers DESC, c.domain LIMIT 1;
        END IF;
        IF COALESCE(best, 0) < lvl.n THEN
            RAISE EXCEPTION '% does not fit inside one %', lvl.what, gangsched._level_name(lvl.depth)
                USING ERRCODE = '53S03',
                      DETAIL = format('The largest eligible %s%s holds at most %s such workers.',
                                      gangsched._level_name(lvl.depth), COALESCE(' (' || dom || ')', ''), COALESCE(best, 0)),
                      HINT = format('Make it at most %s workers, or widen %s to a larger level.', COALESCE(best, 0), lvl.arg);
        END IF;
    END LOOP;

    -- the whole gang inside one eligible pool
    IF j.group_size * j.stages = 1 THEN
        SELECT s.cap, s.name INTO best, dom FROM (
            SELECT p.name, sum(c.nodes::bigint * gangsched._fit(c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices,
                                                                 j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)) AS cap
              FROM gangsched.node_classes c JOIN gangsched.pools p ON p.id = c.pool_id
             WHERE c.pool_id = ANY (pools) GROUP BY p.name) s
         ORDER BY s.cap DESC, s.name LIMIT 1;
    ELSE
        SELECT c.workers, c.domain INTO best, dom
          FROM gangsched._capacity(j, pools, 0, 2) c
         ORDER BY c.workers DESC, c.domain LIMIT 1;
    END IF;
    IF best < j.workers THEN
        RAISE EXCEPTION 'the gang of % workers is larger than every eligible pool', j.workers
            USING ERRCODE = '53S04',
                  DETAIL = format('The largest eligible pool, %s, holds at most %s such workers.', dom, best),
                  HINT = format('Ask for at most %s workers.', best);
    END IF;

    -- required locality
    IF j.locality = 'required' THEN
        SELECT COALESCE(max(s.cap), 0) INTO best FROM (
            SELECT n.pool_id, sum(gangsched._fit(n.cpus, n.mem_gb, n.net_gbps, n.gpus, n.gpu_model, n.gpu_mem_gb, n.gpu_slices,
                                                 j.gpus, j.cpus, j.mem_gb, j.net_gbps, j.gpu_model, j.gpu_mem_gb)) AS cap
              FROM gangsched.datasets ds JOIN gangsched.nodes n ON n.id = ds.node_id
             WHERE ds.dataset = j.dataset AND n.pool_id = ANY (pools)
             GROUP BY n.pool_id) s;
        IF best < j.workers THEN
            RAISE EXCEPTION 'too few nodes cache dataset "%" for % workers', j.dataset, j.workers
                USING ERRCODE = '53S06',
                      DETAIL = format('Eligible nodes that cache it hold at most %s such workers.', best),
                      HINT = 'Cache the dataset on more nodes with gangsched.cache_dataset(), or submit with locality => ''preferred''.';
        END IF;
    END IF;

    -- more than the team could ever hold, in some eligible pool
    demand := ARRAY[j.gpus * j.workers, j.cpus * j.workers, j.mem_gb * j.workers, j.net_gbps * j.workers];
    IF EXISTS (SELECT FROM gangsched.teams WHERE parent_id IS NOT NULL) THEN
        PERFORM gangsched._admit_tree(j, pools, demand);
        RETURN;
    END IF;
    FOR r IN
        SELECT p.id, p.name,
               ARRAY[sum(c.nodes * c.gpus), sum(c.nodes * c.cpus), sum(c.nodes * c.mem_gb), sum(c.nodes * c.net_gbps)] AS cap,
               q.team_id IS NOT NULL AS has_quota,
               ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps] AS nominal,
               ARRAY[q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps] AS borrow,
               (SELECT ARRAY[COALESCE(sum(o.gpus - o.lend_gpus), 0), COALESCE(sum(o.cpus - o.lend_cpus), 0),
                             COALESCE(sum(o.mem_gb - o.lend_mem_gb), 0), COALESCE(sum(o.net_gbps - o.lend_net_gbps), 0)]
                  FROM gangsched._effective_quotas o WHERE o.pool_id = p.id AND o.team_id <> j.team_id) AS locked
          FROM gangsched.pools p
          JOIN gangsched.node_classes c ON c.pool_id = p.id
          LEFT JOIN gangsched._effective_quotas q ON q.pool_id = p.id AND q.team_id = j.team_id
         WHERE p.id = ANY (pools)
         GROUP BY p.id, p.name, q.team_id, q.gpus, q.cpus, q.mem_gb, q.net_gbps,
                  q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps
         ORDER BY p.id
    LOOP
        ok := true;
        FOR i IN 1 .. 4 LOOP
            IF NOT j.preemptible THEN
                ceiling[i] := CASE WHEN NOT r.has_quota THEN 0
                                   WHEN r.nominal[i] IS NULL AND i > 1 THEN r.cap[i]
                                   ELSE r.nominal[i] END;
            ELSIF r.has_quota AND r.nominal[i] IS NOT NULL AND r.borrow[i] IS NOT NULL THEN
                ceiling[i] := LEAST(r.nominal[i] + r.borrow[i], r.cap[i] - r.locked[i]);
            ELSE
                ceiling[i] := GREATEST(r.cap[i] - r.locked[i], COALESCE(r.nominal[i], 0));
            END IF;
            IF demand[i] > ceiling[i] THEN
                ok := false;
                why := COALESCE(why, format('needs %s %s in pool %s but team may hold at most %s there (%s)',
                            trim_scale(demand[i]), res[i], r.name, trim_scale(ceiling[i]),
                            CASE WHEN NOT j.preemptible AND NOT r.has_quota THEN 'no quota: non-preemptible work runs only within nominal quota'
                                 WHEN NOT j.preemptible THEN 'nominal quota; non-preemptible work may not borrow'
                                 WHEN r.borrow[i] IS NOT NULL THEN format('nominal %s + borrowing limit %s', trim_scale(r.nominal[i]), trim_scale(r.borrow[i]))
                                 ELSE format('pool capacity %s less %s other teams may not lend', trim_scale(r.cap[i]), trim_scale(r.locked[i])) END));
            END IF;
        END LOOP;
        EXIT WHEN ok;
    END LOOP;
    IF NOT ok THEN
        RAISE EXCEPTION 'job is larger than team "%" could ever hold', (SELECT name FROM gangsched.teams WHERE id = j.team_id)
            USING ERRCODE = '53S05',
                  DETAIL = 'The job ' || why || '.',
                  HINT = CASE WHEN j.preemptible THEN 'Ask for fewer workers, or ask the operator to raise the quota or borrowing limit.'
                              ELSE 'Ask for fewer workers, submit it as preemptible, or ask the operator to raise the nominal quota.' END;
    END IF;
END $$;

-- Team trees: what subtree `team` holds back of its quota in the pool from
-- teams outside it, per resource [GPUs, CPUs, GB, Gbit/s]: the larger of
-- its own nominal less lending limit and the sum of its children's
-- (admission counts an empty cluster; src/fair.c gs_tree_held_back()).
CREATE FUNCTION gangsched._held_back(team int, pool int) RETURNS numeric[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    own  numeric[];
    sub  numeric[] := ARRAY[0, 0, 0, 0];
    h    numeric[];
    c    int;
    i    int;
BEGIN
    SELECT ARRAY[GREATEST(COALESCE(q.gpus - q.lend_gpus, 0), 0), GREATEST(COALESCE(q.cpus - q.lend_cpus, 0), 0),
                 GREATEST(COALESCE(q.mem_gb - q.lend_mem_gb, 0), 0), GREATEST(COALESCE(q.net_gbps - q.lend_net_gbps, 0), 0)]
      INTO own
      FROM gangsched._effective_quotas q WHERE q.team_id = team AND q.pool_id = pool;
    own := COALESCE(own, ARRAY[0, 0, 0, 0]::numeric[]);
    FOR c IN SELECT t.id FROM gangsched.teams t WHERE t.parent_id = team LOOP
        h := gangsched._held_back(c, pool);
        FOR i IN 1 .. 4 LOOP
            sub[i] := sub[i] + h[i];
        END LOOP;
    END LOOP;
    RETURN ARRAY[GREATEST(own[1], sub[1]), GREATEST(own[2], sub[2]), GREATEST(own[3], sub[3]), GREATEST(own[4], sub[4])];
END $$;

-- Team trees: more than the team and every ancestor could ever hold, in
-- some eligible pool (raises 53S05 naming the level that limits it). The
-- leaf's ceiling is the flat one, with the quota the subtrees off its path
-- hold back as what others do not lend; each ancestor with a quota row
-- caps non-preemptible work at its nominal quota less its other children's
-- nominal quota (carved out of it), and preemptible work at
-- nominal + borrowing limit when one is set. A leaf without a quota row
-- may hold non-preemptible work when some ancestor has one. The admission
-- fast path (src/admission.c, within_ceiling_tree) applies the same rule.
CREATE FUNCTION gangsched._admit_tree(j gangsched.gangs, pools int[], demand numeric[]) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r        record;
    a        record;
    res      text[] := ARRAY['GPUs', 'CPUs', 'GB of memory', 'Gbit/s of network'];
    ceiling  numeric;
    locked   numeric[];
    h        numeric[];
    off      int;
    i        int;
    ok       bool := false;
    any_q    bool;
    why      text;
    who      text;
    leaf     text := (SELECT name FROM gangsched.teams WHERE id = j.team_id);
BEGIN
    FOR r IN
        SELECT p.id, p.name,
               ARRAY[sum(c.nodes * c.gpus), sum(c.nodes * c.cpus), sum(c.nodes * c.mem_gb), sum(c.nodes * c.net_gbps)] AS cap,
               q.team_id IS NOT NULL AS has_quota,
               ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps] AS nominal,
               ARRAY[q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps] AS borrow
          FROM gangsched.pools p
          JOIN gangsched.node_classes c ON c.pool_id = p.id
          LEFT JOIN gangsched._effective_quotas q ON q.pool_id = p.id AND q.team_id = j.team_id
         WHERE p.id = ANY (pools)
         GROUP BY p.id, p.name, q.team_id, q.gpus, q.cpus, q.mem_gb, q.net_gbps,
                  q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps
         ORDER BY p.id
    LOOP
        ok := true;
        -- the subtrees off the leaf's path: siblings of the leaf and of each ancestor
        locked := ARRAY[0, 0, 0, 0];
        FOR off IN
            WITH RECURSIVE path AS (
                SELECT t.id, t.parent_id, 0 AS n FROM gangsched.teams t WHERE t.id = j.team_id
                UNION ALL
                SELECT t.id, t.parent_id, path.n + 1 FROM gangsched.teams t JOIN path ON t.id = path.parent_id
                 WHERE path.n < 64)
            SELECT o.id FROM gangsched.teams o JOIN path ON o.parent_id IS NOT DISTINCT FROM path.parent_id AND o.id <> path.id
        LOOP
            h := gangsched._held_back(off, r.id);
            FOR i IN 1 .. 4 LOOP
                locked[i] := locked[i] + h[i];
            END LOOP;
        END LOOP;
        any_q := r.has_quota OR EXISTS (
            WITH RECURSIVE up AS (
                SELECT t.parent_id AS id, 0 AS n FROM gangsched.teams t WHERE t.id = j.team_id
                UNION ALL
                SELECT t.parent_id, up.n + 1 FROM gangsched.teams t JOIN up ON t.id = up.id WHERE up.n < 64)
            SELECT FROM up JOIN gangsched._effective_quotas q ON q.team_id = up.id AND q.pool_id = r.id);
        FOR i IN 1 .. 4 LOOP
            IF NOT j.preemptible THEN
                ceiling := CASE WHEN NOT any_q THEN 0
                                WHEN NOT r.has_quota THEN r.cap[i]
                                WHEN r.nominal[i] IS NULL AND i > 1 THEN r.cap[i]
                                ELSE r.nominal[i] END;
            ELSIF r.has_quota AND r.nominal[i] IS NOT NULL AND r.borrow[i] IS NOT NULL THEN
                ceiling := LEAST(r.nominal[i] + r.borrow[i], r.cap[i] - locked[i]);
            ELSE
                ceiling := GREATEST(r.cap[i] - locked[i], COALESCE(r.nominal[i], 0));
            END IF;
            IF demand[i] > ceiling THEN
                ok := false;
                IF why IS NULL THEN
                    who := format('team "%s"', leaf);
                    why := format('needs %s %s in pool %s but team may hold at most %s there (%s)',
                            trim_scale(demand[i]), res[i], r.name, trim_scale(ceiling),
                            CASE WHEN NOT j.preemptible AND NOT any_q THEN 'no quota in its team or above it: non-preemptible work runs only within nominal quota'
                                 WHEN NOT j.preemptible THEN 'nominal quota; non-preemptible work may not borrow'
                                 WHEN r.has_quota AND r.borrow[i] IS NOT NULL THEN format('nominal %s + borrowing limit %s', trim_scale(r.nominal[i]), trim_scale(r.borrow[i]))
                                 ELSE format('pool capacity %s less %s that teams outside its path may not lend', trim_scale(r.cap[i]), trim_scale(locked[i])) END);
                END IF;
            END IF;
            -- every ancestor with a quota row in the pool, from the leaf up
            FOR a IN
                WITH RECURSIVE up AS (
                    SELECT t.parent_id AS id, t.id AS child, 1 AS n FROM gangsched.teams t WHERE t.id = j.team_id
                    UNION ALL
                    SELECT t.parent_id, t.id, up.n + 1 FROM gangsched.teams t JOIN up ON t.id = up.id WHERE up.n < 64)
                SELECT up.n, t.name, (ARRAY[q.gpus, q.cpus, q.mem_gb, q.net_gbps])[i] AS nominal,
                       (ARRAY[q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps])[i] AS borrow,
                       (SELECT COALESCE(sum((ARRAY[k.gpus, k.cpus, k.mem_gb, k.net_gbps])[i]), 0)
                          FROM gangsched.teams o JOIN gangsched._effective_quotas k ON k.team_id = o.id AND k.pool_id = r.id
                         WHERE o.parent_id = up.id AND o.id <> up.child) AS kept
                  FROM up JOIN gangsched.teams t ON t.id = up.id
                  JOIN gangsched._effective_quotas q ON q.team_id = up.id AND q.pool_id = r.id
                 ORDER BY up.n
            LOOP
                EXIT WHEN NOT ok;
                CONTINUE WHEN a.nominal IS NULL OR (j.preemptible AND a.borrow IS NULL);
                ceiling := CASE WHEN j.preemptible THEN a.nominal + a.borrow ELSE a.nominal - a.kept END;
                IF demand[i] > ceiling THEN
                    ok := false;
                    IF why IS NULL THEN
                        who := format('team "%s" (%s of "%s")', a.name, CASE WHEN a.n = 1 THEN 'parent' ELSE 'ancestor' END, leaf);
                        why := format('needs %s %s in pool %s but team %s may hold at most %s there (%s)',
                                trim_scale(demand[i]), res[i], r.name, a.name, trim_scale(ceiling),
                                CASE WHEN j.preemptible THEN format('its nominal %s + borrowing limit %s', trim_scale(a.nominal), trim_scale(a.borrow))
                                     WHEN a.kept > 0 THEN format('its nominal %s less %s of its other teams'' nominal quota; non-preemptible work may not borrow',
                                                                 trim_scale(a.nominal), trim_scale(a.kept))
                                     ELSE 'its nominal quota; non-preemptible work may not borrow' END);
                    END IF;
                END IF;
            END LOOP;
        END LOOP;
        EXIT WHEN ok;
    END LOOP;
    IF NOT ok THEN
        RAISE EXCEPTION 'job is larger than % could ever hold', who
            USING ERRCODE = '53S05',
                  DETAIL = 'The job ' || why || '.',
                  HINT = CASE WHEN j.preemptible THEN 'Ask for fewer workers, or ask the operator to raise the quota or borrowing limit at that level.'
                              ELSE 'Ask for fewer workers, submit it as preemptible, or ask the operator to raise the nominal quota at that level.' END;
    END IF;
END $$;
