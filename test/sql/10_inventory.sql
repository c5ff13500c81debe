-- Inventory and policy API: set_topology_levels, add_pool, add_node,
-- set_node_state, cache_dataset / evict_dataset, add_team, set_quota.
-- Every refusal shows its SQLSTATE, message, detail and hint, and proves
-- that the refused call changed nothing (no row, no event, no sequence value).
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;

-- Fingerprint of everything the extension stores: each table's rows and each
-- sequence's position.
CREATE FUNCTION pg_temp.fingerprint() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r   record;
    h   text;
    acc text := '';
BEGIN
    FOR r IN SELECT c.oid::regclass AS rel, c.relkind FROM pg_class c
              WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relkind IN ('r', 'S')
              ORDER BY c.relname
    LOOP
        IF r.relkind = 'S' THEN
            EXECUTE format('SELECT last_value || '':'' || is_called FROM %s', r.rel) INTO h;
        ELSE
            EXECUTE format('SELECT count(*) || '':'' || COALESCE(md5(string_agg(t::text, ''|'' ORDER BY t::text)), '''') FROM %s t', r.rel) INTO h;
        END IF;
        acc := acc || r.rel || '=' || h || ';';
    END LOOP;
    RETURN acc;
END $$;

-- Run a statement that must be refused; report its SQLSTATE, message, detail
-- and hint as a NOTICE, and whether anything changed.
CREATE PROCEDURE pg_temp.refused(cmd text) LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.fingerprint();
    st     text;
    msg    text;
    det    text;
    hnt    text;
BEGIN
    BEGIN
        EXECUTE cmd;
        RAISE NOTICE 'ACCEPTED, but it should have been refused';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        IF det <> '' AND hnt <> '' THEN
            RAISE NOTICE '%: %', st, msg USING DETAIL = det, HINT = hnt;
        ELSIF det <> '' THEN
            RAISE NOTICE '%: %', st, msg USING DETAIL = det;
        ELSIF hnt <> '' THEN
            RAISE NOTICE '%: %', st, msg USING HINT = hnt;
        ELSE
            RAISE NOTICE '%: %', st, msg;
        END IF;
    END;
    IF pg_temp.fingerprint() IS DISTINCT FROM before THEN
        RAISE NOTICE 'STATE CHANGED by a refused call';
    END IF;
END $$;

/* ---------------- topology levels ---------------- */

-- No levels yet: nodes cannot be added (a pool is needed to get that far).
SELECT gangsched.add_pool('gpu', 'reserved');
CALL pg_temp.refused($$SELECT gangsched.add_node('n0', 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80)$$);

CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY[]::text[])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['a','b','c','d','e','f','g','h','i'])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY[['zone','spine'],['rack','row']])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['Zone'])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['zone', 'my rack'])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['1zone'])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['zone', NULL])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['zone', 'node'])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack', 'zone'])$$);
SELECT count(*) AS levels FROM gangsched.topology_levels;

-- Eight levels is the limit and is accepted; before any node exists the
-- levels may be replaced freely.
SELECT gangsched.set_topology_levels(ARRAY['a','b','c','d','e','f','g','h']);
SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT * FROM gangsched.topology_levels ORDER BY depth;
SELECT gangsched.set_topology_levels(ARRAY['zone', 'spine', 'rack']);
SELECT * FROM gangsched.topology_levels ORDER BY depth;

/* ---------------- pools ---------------- */

SELECT gangsched.add_pool('spot', 'opportunistic');
CALL pg_temp.refused($$SELECT gangsched.add_pool('p2', 'spot')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool('p2', 'Reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool('p2', NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool('', 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool('  ', 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool(NULL, 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool('gpu', 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool('gpu', 'opportunistic')$$);
SELECT id, name, kind FROM gangsched.pools ORDER BY id;

/* ---------------- nodes ---------------- */

-- unknown pool (the detail lists the pools there are)
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpus', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', NULL, 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80)$$);
-- empty name
CALL pg_temp.refused($$SELECT gangsched.add_node('', 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node(NULL, 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80)$$);
-- topology of the wrong depth
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1', 64, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1.n1', 64, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', NULL, 64, 512, 100, 8, 'a100', 80)$$);
-- host amounts: negative, NaN, infinite, NULL
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', -1, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 'NaN', 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', NULL, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, -0.5, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 'Infinity', 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, NULL, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, '-Infinity', 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 'NaN', 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, NULL, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', -80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 'NaN')$$);
-- device count and slices out of range
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 100, -1, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 100, 65, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 100, NULL, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80, 0)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80, 9)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80, NULL)$$);
SELECT count(*) AS nodes FROM gangsched.nodes;

-- Accepted nodes. n1 and n2 are identical (one class); n3 has MIG-style
-- 4-slice devices; c1 is CPU-only (its model and memory are dropped); the
-- extremes 0 and 64 devices, 1 and 8 slices, and 0 amounts are accepted.
SELECT gangsched.add_node('n1', 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_node('n2', 'gpu', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_node(name => 'n3', pool => 'gpu', topology => 'z1.s1.r2', cpus => 32, mem_gb => 256,
                          net_gbps => 50, gpus => 4, gpu_model => 'a30', gpu_mem_gb => 24, gpu_slices => 4);
SELECT gangsched.add_node('c1', 'gpu', 'z1.s2.r3', 128, 1024, 25, 0, 'ignored', 99, 7);
SELECT gangsched.add_node('big', 'spot', 'z2.s3.r4', 0, 0, 0, 64, NULL, NULL, 8);
-- duplicate name, even in another pool
CALL pg_temp.refused($$SELECT gangsched.add_node('n1', 'spot', 'z2.s3.r4', 64, 512, 100, 8, 'a100', 80)$$);

SELECT n.name, p.name AS pool, n.topology, n.cpus, n.mem_gb, n.net_gbps, n.gpus, n.gpu_model, n.gpu_mem_gb,
       n.gpu_slices, n.state, n.heartbeat_at, n.added_at = n.state_since AS same_times
  FROM gangsched.nodes n JOIN gangsched.pools p ON p.id = n.pool_id ORDER BY n.id;

-- one device row per accelerator, indexes 0..gpus-1, with the node's model,
-- memory and slices
SELECT n.name, count(d.idx) AS devices, min(d.idx) AS first, max(d.idx) AS last,
       string_agg(DISTINCT d.model, ',') AS model, max(d.mem_gb) AS mem_gb, max(d.slices) AS slices,
       count(d.idx) = n.gpus AS matches_gpus
  FROM gangsched.nodes n LEFT JOIN gangsched.devices d ON d.node_id = n.id
 GROUP BY n.id, n.name, n.gpus ORDER BY n.id;

-- node classes: identical nodes share one class and are counted
SELECT p.name AS pool, c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices, c.nodes
  FROM gangsched.node_classes c JOIN gangsched.pools p ON p.id = c.pool_id ORDER BY c.gpus, c.cpus, c.gpu_slices;
SELECT (SELECT sum(nodes) FROM gangsched.node_classes) AS class_nodes, count(*) AS nodes FROM gangsched.nodes;
-- every node's class describes it
SELECT count(*) AS nodes_not_matching_their_class
  FROM gangsched.nodes n JOIN gangsched.node_classes c ON c.id = n.class_id
 WHERE (n.pool_id, n.cpus, n.mem_gb, n.net_gbps, n.gpus, n.gpu_model, n.gpu_mem_gb, n.gpu_slices)
       IS DISTINCT FROM (c.pool_id, c.cpus, c.mem_gb, c.net_gbps, c.gpus, c.gpu_model, c.gpu_mem_gb, c.gpu_slices);

-- domain classes: node counts per domain and class at every named level
SELECT dc.depth, dc.domain, c.gpus, c.gpu_model, dc.nodes
  FROM gangsched.domain_classes dc JOIN gangsched.node_classes c ON c.id = dc.class_id
 ORDER BY dc.depth, dc.domain, c.gpus;
-- at each depth the counts add up to the number of nodes
SELECT depth, sum(nodes) AS nodes FROM gangsched.domain_classes GROUP BY depth ORDER BY depth;

-- Once nodes exist the same levels may be set again (a no-op, no event);
-- other levels are refused.
SELECT count(*) AS topology_events FROM gangsched.events WHERE kind = 'topology';
SELECT gangsched.set_topology_levels(ARRAY['zone', 'spine', 'rack']);
SELECT count(*) AS topology_events FROM gangsched.events WHERE kind = 'topology';
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack'])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['zone', 'spine', 'row'])$$);
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['zone', 'spine', 'rack', 'shelf'])$$);
SELECT string_agg(name, '.' ORDER BY depth) AS levels FROM gangsched.topology_levels;

/* ---------------- node state ---------------- */

CALL pg_temp.refused($$SELECT gangsched.set_node_state('n1', 'offline')$$);
CALL pg_temp.refused($$SELECT gangsched.set_node_state('n1', 'UP')$$);
CALL pg_temp.refused($$SELECT gangsched.set_node_state('n1', NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.set_node_state('n9', 'down')$$);
CALL pg_temp.refused($$SELECT gangsched.set_node_state(NULL, 'down')$$);

SET gangsched.clock_override = '2030-01-01 12:00:00+00';
SELECT gangsched.set_node_state('n1', 'draining');
SELECT name, state, state_since = '2030-01-01 12:00:00+00' AS since_now FROM gangsched.nodes WHERE name = 'n1';
-- the same state again changes nothing and logs nothing
SET gangsched.clock_override = '2030-01-01 13:00:00+00';
SELECT gangsched.set_node_state('n1', 'draining');
SELECT name, state, state_since = '2030-01-01 12:00:00+00' AS since_unchanged FROM gangsched.nodes WHERE name = 'n1';
SELECT gangsched.set_node_state('n1', 'down');
SELECT gangsched.set_node_state(name => 'n1', state => 'up');
SELECT name, state, state_since = '2030-01-01 13:00:00+00' AS since_now FROM gangsched.nodes WHERE name = 'n1';
SELECT reason, detail FROM gangsched.events WHERE kind = 'node_state' ORDER BY id;

-- heartbeats
CALL pg_temp.refused($$SELECT gangsched.node_heartbeat('n9')$$);
SELECT gangsched.node_heartbeat('n2');
SELECT name, heartbeat_at = '2030-01-01 13:00:00+00' AS beat_now FROM gangsched.nodes WHERE heartbeat_at IS NOT NULL;
RESET gangsched.clock_override;

/* ---------------- dataset caches ---------------- */

CALL pg_temp.refused($$SELECT gangsched.cache_dataset('n9', 'imagenet')$$);
CALL pg_temp.refused($$SELECT gangsched.cache_dataset('n1', '')$$);
CALL pg_temp.refused($$SELECT gangsched.cache_dataset('n1', NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.evict_dataset('n9', 'imagenet')$$);
SELECT gangsched.cache_dataset('n1', 'imagenet');
SELECT gangsched.cache_dataset('n1', 'imagenet');    -- again: still one row
SELECT gangsched.cache_dataset(node => 'n2', dataset => 'imagenet');
SELECT gangsched.cache_dataset('n2', 'c4');
SELECT n.name, d.dataset FROM gangsched.datasets d JOIN gangsched.nodes n ON n.id = d.node_id ORDER BY 1, 2;
SELECT gangsched.evict_dataset('n1', 'imagenet') AS was_cached;
SELECT gangsched.evict_dataset('n1', 'imagenet') AS was_cached;
SELECT gangsched.evict_dataset('n1', 'never-cached') AS was_cached;
SELECT n.name, d.dataset FROM gangsched.datasets d JOIN gangsched.nodes n ON n.id = d.node_id ORDER BY 1, 2;

/* ---------------- teams ---------------- */

CALL pg_temp.refused($$SELECT gangsched.add_team('t', 0)$$);
CALL pg_temp.refused($$SELECT gangsched.add_team('t', -1)$$);
CALL pg_temp.refused($$SELECT gangsched.add_team('t', 'NaN')$$);
CALL pg_temp.refused($$SELECT gangsched.add_team('t', 'Infinity')$$);
CALL pg_temp.refused($$SELECT gangsched.add_team('t', NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.add_team('', 1)$$);
CALL pg_temp.refused($$SELECT gangsched.add_team(NULL)$$);
SELECT gangsched.add_team('vision');
SELECT gangsched.add_team(name => 'nlp', weight => 2.5);
SELECT gangsched.add_team('tiny', 0.001);
CALL pg_temp.refused($$SELECT gangsched.add_team('vision', 3)$$);
SELECT id, name, weight FROM gangsched.teams ORDER BY id;

/* ---------------- quotas ---------------- */

CALL pg_temp.refused($$SELECT gangsched.set_quota('nobody', 'gpu', 8)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota(NULL, 'gpu', 8)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'nowhere', 8)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', -8)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 'NaN')$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, cpus => -1)$$);
-- 'Infinity' is accepted for cpus and mem_gb only (not governed: 36_default_quotas)
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, mem_gb => '-Infinity')$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, net_gbps => 'Infinity')$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, net_gbps => 'NaN')$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, borrowing_limit_gpus => -1)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, lending_limit_gpus => -1)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, borrowing_limit_cpus => 'NaN')$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, lending_limit_mem_gb => -5)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, borrowing_limit_net_gbps => 'Infinity')$$);
-- a lending limit above the nominal amount, per resource
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, lending_limit_gpus => 9)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, cpus => 64, lending_limit_cpus => 65)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, mem_gb => 100, lending_limit_mem_gb => 100.5)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, net_gbps => 10, lending_limit_net_gbps => 11)$$);
-- cpus left NULL: above the amount proportional to the team's GPU share of the pool
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 8, lending_limit_cpus => 1000)$$);
SELECT count(*) AS quotas FROM gangsched.quotas;

SELECT gangsched.set_quota('vision', 'gpu', 8, cpus => 64, borrowing_limit_gpus => 4, lending_limit_gpus => 8);
SELECT gangsched.set_quota(team => 'nlp', pool => 'gpu', gpus => 4, cpus => 32, mem_gb => 256, net_gbps => 50,
                           borrowing_limit_gpus => 0, lending_limit_gpus => 0,
                           borrowing_limit_cpus => 1, lending_limit_cpus => 2,
                           borrowing_limit_mem_gb => 3, lending_limit_mem_gb => 4,
                           borrowing_limit_net_gbps => 5, lending_limit_net_gbps => 6);
SELECT gangsched.set_quota('nlp', 'spot', 0);
SELECT t.name AS team, p.name AS pool, q.gpus, q.cpus, q.mem_gb, q.net_gbps,
       q.borrow_gpus, q.borrow_cpus, q.borrow_mem_gb, q.borrow_net_gbps,
       q.lend_gpus, q.lend_cpus, q.lend_mem_gb, q.lend_net_gbps
  FROM gangsched.quotas q JOIN gangsched.teams t ON t.id = q.team_id JOIN gangsched.pools p ON p.id = q.pool_id
 ORDER BY 1, 2;
-- setting a quota again replaces it whole (limits left out go back to NULL)
SELECT gangsched.set_quota('vision', 'gpu', 16);
SELECT t.name AS team, p.name AS pool, q.gpus, q.cpus, q.borrow_gpus, q.lend_gpus
  FROM gangsched.quotas q JOIN gangsched.teams t ON t.id = q.team_id JOIN gangsched.pools p ON p.id = q.pool_id
 WHERE t.name = 'vision';
-- a refused update keeps the old quota
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'gpu', 2, lending_limit_gpus => 3)$$);
SELECT q.gpus FROM gangsched.quotas q JOIN gangsched.teams t ON t.id = q.team_id WHERE t.name = 'vision';

/* ---------------- the events log and the invariants ---------------- */

SELECT kind, reason, count(*) FROM gangsched.events GROUP BY kind, reason ORDER BY kind, reason;
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
