/* ------------------------------------------------------------------ */
/* Inventory API (operator)                                            */
/* ------------------------------------------------------------------ */

CREATE FUNCTION gangsched.set_topology_levels(levels text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    i int;
BEGIN
    IF levels IS NULL OR cardinality(levels) = 0 THEN
        RAISE EXCEPTION 'levels must name at least one topology level'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name the levels outermost first, for example ARRAY[''zone'', ''spine'', ''rack''].';
    END IF;
    IF array_ndims(levels) <> 1 THEN
        RAISE EXCEPTION 'levels must be a one-dimensional array, not % dimensions', array_ndims(levels)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name the levels outermost first, for example ARRAY[''zone'', ''spine'', ''rack''].';
    END IF;
    IF cardinality(levels) > 8 THEN
        RAISE EXCEPTION 'too many topology levels: %', cardinality(levels)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'At most 8 levels above the node are supported.',
                  HINT = 'Merge levels that do not matter for placement.';
    END IF;
    FOR i IN 1 .. cardinality(levels) LOOP
        IF length(levels[i]) > 63 THEN
            RAISE EXCEPTION 'invalid topology level name %', gangsched._shown(levels[i])
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('The name has %s characters; at most 63 are allowed.', length(levels[i])),
                      HINT = 'Use names such as zone, spine, rack.';
        END IF;
        IF levels[i] IS NULL OR levels[i] !~ '^[a-z][a-z0-9_]*$' OR levels[i] = 'node' THEN
            RAISE EXCEPTION 'invalid topology level name "%"', levels[i]
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'Level names are lower-case identifiers; "node" is reserved for the innermost level.',
                      HINT = 'Use names such as zone, spine, rack.';
        END IF;
        IF levels[i] = ANY (levels[1 : i - 1]) THEN
            RAISE EXCEPTION 'topology level "%" is named twice', levels[i]
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Give each level its own name.';
        END IF;
    END LOOP;
    IF EXISTS (SELECT FROM gangsched.nodes) THEN
        IF levels = (SELECT array_agg(name ORDER BY depth) FROM gangsched.topology_levels) THEN
            RETURN;
        END IF;
        RAISE EXCEPTION 'topology levels cannot change once nodes are registered'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('%s nodes use the levels %s.', (SELECT count(*) FROM gangsched.nodes),
                                  (SELECT string_agg(name, '.' ORDER BY depth) FROM gangsched.topology_levels)),
                  HINT = 'Set the levels once, before the first gangsched.add_node().';
    END IF;
    DELETE FROM gangsched.topology_levels;
    INSERT INTO gangsched.topology_levels (depth, name)
    SELECT o, l FROM unnest(levels) WITH ORDINALITY AS u(l, o);
    PERFORM gangsched._event('topology', NULL, NULL, NULL, 'levels set', to_jsonb(levels));
END $$;

CREATE FUNCTION gangsched.add_pool(name text, kind text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    id int;
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'pool name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the pool, for example ''reserved-a100''.';
    END IF;
    PERFORM gangsched._check_name(name, 'pool name');
    IF kind IS NULL OR kind NOT IN ('reserved', 'opportunistic') THEN
        RAISE EXCEPTION 'invalid pool kind "%"', kind
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A pool is reserved (committed capacity, may host non-preemptible work) or opportunistic (everything there is preemptible).',
                  HINT = 'Use kind ''reserved'' or ''opportunistic''.';
    END IF;
    IF EXISTS (SELECT FROM gangsched.pools p WHERE p.name = add_pool.name) THEN
        RAISE EXCEPTION 'pool "%" already exists', name
            USING ERRCODE = 'unique_violation', HINT = 'Choose another name or use the existing pool.';
    END IF;
    -- a round handles at most 64 pools (src/loader.c): a 65th would stop
    -- every round, so it is refused here
    IF (SELECT count(*) FROM gangsched.pools) >= 64 THEN
        RAISE EXCEPTION 'too many pools: a cluster has at most 64'
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = 'Scheduling rounds handle at most 64 pools.',
                  HINT = 'Merge pools that share a kind: nodes of different GPU models can share a pool (jobs ask for a model).';
    END IF;
    INSERT INTO gangsched.pools (name, kind) VALUES (name, kind) RETURNING pools.id INTO id;
    PERFORM gangsched._event('pool', NULL, NULL, NULL, 'pool added', jsonb_build_object('pool', name, 'kind', kind));
    RETURN id;
END $$;

CREATE FUNCTION gangsched.add_node(name text, pool text, topology ltree, cpus numeric, mem_gb numeric,
                                   net_gbps numeric, gpus int, gpu_model text, gpu_mem_gb numeric,
                                   gpu_slices int DEFAULT 1)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    pid     int;
    nlev    int := gangsched._levels();
    cid     int;
    nid     int;
    d       int;
    t       timestamptz := gangsched.now();
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'node name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use the host name, for example ''gpu-0042''.';
    END IF;
    PERFORM gangsched._check_name(name, 'node name');
    pid := gangsched._pool_id(pool);
    IF nlev = 0 THEN
        RAISE EXCEPTION 'topology levels are not set'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call gangsched.set_topology_levels(ARRAY[''zone'', ''spine'', ''rack'']) before adding nodes.';
    END IF;
    IF topology IS NULL THEN
        RAISE EXCEPTION 'topology must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Give the path of domains that contain the node, outermost first, one label per level.';
    END IF;
    IF gangsched._nlevel(topology) <> nlev THEN
        RAISE EXCEPTION 'topology "%" has % levels, the cluster has %', topology, gangsched._nlevel(topology), nlev
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The levels are %s.', (SELECT string_agg(l.name, '.' ORDER BY l.depth) FROM gangsched.topology_levels l)),
                  HINT = 'Give the path of domains that contain the node, outermost first, one label per level.';
    END IF;
    IF topology::text !~ '^[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*$' THEN
        RAISE EXCEPTION 'invalid topology %', gangsched._shown(topology::text)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Each topology label is 1 to 63 ASCII letters, digits, "_" or "-".',
                  HINT = 'Use labels such as z1.s2.r17.';
    END IF;
    PERFORM gangsched._check_amount(cpus, 'cpus', false, 1e6);
    PERFORM gangsched._check_amount(mem_gb, 'mem_gb', false, 1e9);
    PERFORM gangsched._check_amount(net_gbps, 'net_gbps', false, 1e9);
    PERFORM gangsched._check_amount(gpu_mem_gb, 'gpu_mem_gb', true, 1e6);
    IF gpus > 0 AND gpu_model IS NOT NULL THEN
        PERFORM gangsched._check_name(gpu_model, 'gpu model');
    END IF;
    IF gpus IS NULL OR gpus < 0 OR gpus > 64 THEN
        RAISE EXCEPTION 'gpus must be between 0 and 64, not %', gpus
            USING ERRCODE = 'numeric_value_out_of_range', HINT = 'Give the number of accelerators on the node, 0 for a CPU-only node.';
    END IF;
    IF gpu_slices IS NULL OR gpu_slices < 1 OR gpu_slices > 8 THEN
        RAISE EXCEPTION 'gpu_slices must be between 1 and 8, not %', gpu_slices
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = 'Use 1 for whole devices only, or the partition count the hardware offers (2, 4, 7).';
    END IF;
    IF gpus = 0 THEN
        gpu_model := NULL; gpu_mem_gb := NULL; gpu_slices := 1;
    END IF;
    IF EXISTS (SELECT FROM gangsched.nodes n WHERE n.name = add_node.name) THEN
        RAISE EXCEPTION 'node "%" already exists', name
            USING ERRCODE = 'unique_violation', HINT = 'Node names are unique; change its state with gangsched.set_node_state().';
    END IF;

    INSERT INTO gangsched.node_classes AS c (pool_id, cpus, mem_gb, net_gbps, gpus, gpu_model, gpu_mem_gb, gpu_slices, nodes)
    VALUES (pid, cpus, mem_gb, net_gbps, gpus, gpu_model, gpu_mem_gb, gpu_slices, 1)
    ON CONFLICT ON CONSTRAINT node_classes_shape_key DO UPDATE SET nodes = c.nodes + 1
    RETURNING c.id INTO cid;

    INSERT INTO gangsched.nodes (name, pool_id, topology, cpus, mem_gb, net_gbps, gpus, gpu_model,
                                 gpu_mem_gb, gpu_slices, class_id, added_at, state_since)
    VALUES (name, pid, topology, cpus, mem_gb, net_gbps, gpus, gpu_model, gpu_mem_gb, gpu_slices, cid, t, t)
    RETURNING nodes.id INTO nid;

    INSERT INTO gangsched.devices (node_id, idx, model, mem_gb, slices)
    SELECT nid, i, gpu_model, gpu_mem_gb, gpu_slices FROM generate_series(0, gpus - 1) i;

    FOR d IN 1 .. nlev LOOP
        INSERT INTO gangsched.domain_classes AS dc (depth, domain, class_id, nodes)
        VALUES (d, gangsched._subpath(topology, 0, d), cid, 1)
        ON CONFLICT (depth, domain, class_id) DO UPDATE SET nodes = dc.nodes + 1;
    END LOOP;
    PERFORM gangsched._event('node', NULL, nid, NULL, 'node added',
                             jsonb_build_object('node', name, 'pool', pool, 'topology', topology::text, 'gpus', gpus));
    RETURN nid;
END $$;

CREATE FUNCTION gangsched.cache_dataset(node text, dataset text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n gangsched.nodes := gangsched._node(node);
BEGIN
    IF dataset IS NULL OR btrim(dataset) = '' THEN
        RAISE EXCEPTION 'dataset name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the dataset as jobs name it in submit(dataset => ...).';
    END IF;
    PERFORM gangsched._check_name(dataset, 'dataset name');
    INSERT INTO gangsched.datasets (node_id, dataset, cached_at) VALUES (n.id, dataset, gangsched.now())
    ON CONFLICT ON CONSTRAINT datasets_pkey DO NOTHING;
END $$;

-- Returns whether the dataset was cached there.
CREATE FUNCTION gangsched.evict_dataset(node text, dataset text) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    n gangsched.nodes := gangsched._node(node);
BEGIN
    DELETE FROM gangsched.datasets d WHERE d.node_id = n.id AND d.dataset = evict_dataset.dataset;
    RETURN FOUND;
END $$;

-- A new team, at the top level or under `parent` (docs/fairness.md, "Team
-- trees"); a parent must not have live jobs (jobs go to leaf teams).
CREATE FUNCTION gangsched.add_team(name text, weight numeric DEFAULT 1, parent text DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    id  int;
    pid int;
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'team name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the team, for example ''vision''.';
    END IF;
    PERFORM gangsched._check_name(name, 'team name');
    PERFORM gangsched._check_weight(weight);
    IF EXISTS (SELECT FROM gangsched.teams t WHERE t.name = add_team.name) THEN
        RAISE EXCEPTION 'team "%" already exists', name
            USING ERRCODE = 'unique_violation', HINT = 'Choose another name or use the existing team.';
    END IF;
    IF parent IS NOT NULL THEN
        pid := gangsched._team_id(parent);
        PERFORM gangsched._check_new_parent(pid, parent, format('add_team(%L, parent => %L)', name, parent));
    END IF;
    INSERT INTO gangsched.teams (name, weight, parent_id) VALUES (name, weight, pid) RETURNING teams.id INTO id;
    -- the pending-count cache of submit(): a new team has no jobs
    INSERT INTO gangsched.team_pending (team_id, pending, upto, counted_at)
    SELECT id, 0, s.last_value, pg_catalog.now() FROM gangsched.queue_position_seq s;
    PERFORM gangsched._event('team', NULL, NULL, id, 'team added',
                             jsonb_build_object('team', name, 'weight', weight)
                             || CASE WHEN parent IS NOT NULL THEN jsonb_build_object('parent', parent) ELSE '{}' END);
    RETURN id;
END $$;

CREATE FUNCTION gangsched.set_quota(team text, pool text, gpus numeric, cpus numeric DEFAULT NULL,
                                    mem_gb numeric DEFAULT NULL, net_gbps numeric DEFAULT NULL,
                                    borrowing_limit_gpus numeric DEFAULT NULL, lending_limit_gpus numeric DEFAULT NULL,
                                    borrowing_limit_cpus numeric DEFAULT NULL, lending_limit_cpus numeric DEFAULT NULL,
                                    borrowing_limit_mem_gb numeric DEFAULT NULL, lending_limit_mem_gb numeric DEFAULT NULL,
                                    borrowing_limit_net_gbps numeric DEFAULT NULL, lending_limit_net_gbps numeric DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
    pid int := gangsched._pool_id(pool);
    eff record;
BEGIN
    PERFORM gangsched._check_amount(gpus, 'gpus');
    -- cpus and mem_gb: NULL is proportional to the team's GPU share of the
    -- pool, 'Infinity' not governed (sql/src/62_quotas.sql)
    PERFORM gangsched._check_amount(NULLIF(cpus, 'Infinity'::numeric), 'cpus', true);
    PERFORM gangsched._check_amount(NULLIF(mem_gb, 'Infinity'::numeric), 'mem_gb', true);
    PERFORM gangsched._check_amount(net_gbps, 'net_gbps', true);
    PERFORM gangsched._check_amount(borrowing_limit_gpus, 'borrowing_limit_gpus', true);
    PERFORM gangsched._check_amount(borrowing_limit_cpus, 'borrowing_limit_cpus', true);
    PERFORM gangsched._check_amount(borrowing_limit_mem_gb, 'borrowing_limit_mem_gb', true);
    PERFORM gangsched._check_amount(borrowing_limit_net_gbps, 'borrowing_limit_net_gbps', true);
    PERFORM gangsched._check_amount(lending_limit_gpus, 'lending_limit_gpus', true);
    PERFORM gangsched._check_amount(lending_limit_cpus, 'lending_limit_cpus', true);
    PERFORM gangsched._check_amount(lending_limit_mem_gb, 'lending_limit_mem_gb', true);
    PERFORM gangsched._check_amount(lending_limit_net_gbps, 'lending_limit_net_gbps', true);
    IF lending_limit_gpus > gpus OR lending_limit_cpus > cpus OR lending_limit_mem_gb > mem_gb
       OR lending_limit_net_gbps > net_gbps THEN
        RAISE EXCEPTION 'lending limit exceeds the nominal quota'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A lending limit caps how much of the team''s own idle nominal quota others may borrow.',
                  HINT = 'Give a lending limit no larger than the nominal amount, or NULL to lend all of it.';
    END IF;
    INSERT INTO gangsched.quotas AS q (team_id, pool_id, gpus, cpus, mem_gb, net_gbps,
                                       borrow_gpus, borrow_cpus, borrow_mem_gb, borrow_net_gbps,
                                       lend_gpus, lend_cpus, lend_mem_gb, lend_net_gbps)
    VALUES (tid, pid, gpus, cpus, mem_gb, net_gbps,
            borrowing_limit_gpus, borrowing_limit_cpus, borrowing_limit_mem_gb, borrowing_limit_net_gbps,
            lending_limit_gpus, lending_limit_cpus, lending_limit_mem_gb, lending_limit_net_gbps)
    ON CONFLICT (team_id, pool_id) DO UPDATE
       SET gpus = EXCLUDED.gpus, cpus = EXCLUDED.cpus, mem_gb = EXCLUDED.mem_gb, net_gbps = EXCLUDED.net_gbps,
           borrow_gpus = EXCLUDED.borrow_gpus, borrow_cpus = EXCLUDED.borrow_cpus,
           borrow_mem_gb = EXCLUDED.borrow_mem_gb, borrow_net_gbps = EXCLUDED.borrow_net_gbps,
           lend_gpus = EXCLUDED.lend_gpus, lend_cpus = EXCLUDED.lend_cpus,
           lend_mem_gb = EXCLUDED.lend_mem_gb, lend_net_gbps = EXCLUDED.lend_net_gbps;
    -- a lending limit above the proportional amount of a NULL cpus / mem_gb,
    -- against the pool's nodes as they are now (later the view caps it)
    IF (cpus IS NULL AND lending_limit_cpus IS NOT NULL) OR (mem_gb IS NULL AND lending_limit_mem_gb IS NOT NULL) THEN
        SELECT e.cpus, e.mem_gb INTO eff FROM gangsched._effective_quotas e WHERE e.team_id = tid AND e.pool_id = pid;
        IF (cpus IS NULL AND lending_limit_cpus > eff.cpus) OR (mem_gb IS NULL AND lending_limit_mem_gb > eff.mem_gb) THEN
            RAISE EXCEPTION 'lending limit exceeds the nominal quota'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = CASE WHEN cpus IS NULL AND lending_limit_cpus > eff.cpus
                                    THEN format('cpus left NULL is proportional to the team''s GPU share of pool %s: %s CPUs.', pool, eff.cpus)
                                    ELSE format('mem_gb left NULL is proportional to the team''s GPU share of pool %s: %s GB.', pool, eff.mem_gb) END,
                      HINT = 'Give a lending limit no larger than the nominal amount, or NULL to lend all of it.';
        END IF;
    END IF;
    -- team trees: the quotas below the team fit inside its new one, and
    -- its new one inside its quota parent's (the carve-out rule)
    PERFORM gangsched._check_carve(tid, pid, format('set_quota(%L, %L, %s)', team, pool, gpus));
    PERFORM gangsched._check_carve(gangsched._quota_parent(tid, pid), pid, format('set_quota(%L, %L, %s)', team, pool, gpus));
    PERFORM gangsched._event('quota', NULL, NULL, tid, 'quota set',
                             jsonb_build_object('team', team, 'pool', pool, 'gpus', gpus, 'cpus', cpus,
                                                'mem_gb', mem_gb, 'net_gbps', net_gbps,
                                                'borrowing_limit_gpus', borrowing_limit_gpus,
                                                'lending_limit_gpus', lending_limit_gpus));
END $$;
