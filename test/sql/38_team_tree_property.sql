-- Team trees, a seeded property test: random trees (two or three levels,
-- random weights per level, some idle leaves) and random demands of
-- 1-GPU jobs on 320 GPUs, no quotas, one round. Every sibling set must end
-- within one job of its weighted DRF split: of two siblings whose
-- subtrees still have jobs waiting, neither holds more than one job's
-- share above the other (used / weight), and the cluster is full.
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;

-- A random tree and its demands; returns the leaves' total demand.
CREATE FUNCTION pg_temp.build(seed float8) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    nroots int;
    i int; k int; m int;
    total bigint := 0;
    d int;
    name text;
    kids int;
    grandkids int;
BEGIN
    PERFORM setseed(seed);
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('main', 'reserved');
    PERFORM gangsched.add_node('n' || x, 'main', ('r' || (x / 10))::ltree, 64, 512, 100, 8, NULL, NULL)
       FROM generate_series(1, 40) x;
    nroots := 2 + floor(random() * 2)::int;
    FOR i IN 1 .. nroots LOOP
        PERFORM gangsched.add_team('t' || i, 1 + floor(random() * 4)::int);
        kids := floor(random() * 4)::int;     -- 0: a leaf at the top
        FOR k IN 1 .. kids LOOP
            PERFORM gangsched.add_team('t' || i || '.' || k, 1 + floor(random() * 4)::int);
            UPDATE gangsched.teams SET parent_id = (SELECT id FROM gangsched.teams WHERE teams.name = 't' || i)
             WHERE teams.name = 't' || i || '.' || k;
            grandkids := CASE WHEN random() < 0.4 THEN 2 + floor(random() * 2)::int ELSE 0 END;
            FOR m IN 1 .. grandkids LOOP
                PERFORM gangsched.add_team('t' || i || '.' || k || '.' || m, 1 + floor(random() * 4)::int);
                UPDATE gangsched.teams SET parent_id = (SELECT id FROM gangsched.teams WHERE teams.name = 't' || i || '.' || k)
                 WHERE teams.name = 't' || i || '.' || k || '.' || m;
            END LOOP;
        END LOOP;
    END LOOP;
    -- demands: a leaf is idle one time in five, else wants 20..220 GPUs
    FOR name IN SELECT t.name FROM gangsched.teams t
                 WHERE NOT EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = t.id) ORDER BY t.id LOOP
        d := CASE WHEN random() < 0.2 THEN 0 ELSE 20 + floor(random() * 200)::int END;
        PERFORM gangsched.submit(name, 1, 1) FROM generate_series(1, d);
        total := total + d;
    END LOOP;
    RETURN total;
END $$;

-- What the round left: teams, leaves, sibling pairs compared, pairs off by
-- more than one job, GPUs held, and whether the cluster is full or all
-- demand placed.
CREATE FUNCTION pg_temp.check(demand bigint)
RETURNS TABLE (teams bigint, leaves bigint, inner_sets bigint, pairs bigint, violations bigint, held numeric, full_or_done bool)
LANGUAGE sql AS $$
    WITH RECURSIVE anc AS (
        SELECT id AS leaf, id AS node FROM gangsched.teams
        UNION ALL
        SELECT anc.leaf, t.parent_id FROM anc JOIN gangsched.teams t ON t.id = anc.node WHERE t.parent_id IS NOT NULL),
    leafuse AS (
        SELECT g.team_id, sum(g.gpus * g.workers) FILTER (WHERE g.state IN ('placed', 'running')) AS used,
               count(*) FILTER (WHERE g.state = 'pending') AS pend
          FROM gangsched.gangs g GROUP BY g.team_id),
    sub AS (
        SELECT a.node, COALESCE(sum(l.used), 0) AS used, COALESCE(sum(l.pend), 0) AS pend
          FROM anc a LEFT JOIN leafuse l ON l.team_id = a.leaf GROUP BY a.node),
    pair AS (
        SELECT x.name AS a, y.name AS b, sx.used / x.weight AS sa, sy.used / y.weight AS sb, 1.0 / x.weight AS one
          FROM sub sx JOIN gangsched.teams x ON x.id = sx.node
          JOIN sub sy ON sy.node <> sx.node
          JOIN gangsched.teams y ON y.id = sy.node AND y.parent_id IS NOT DISTINCT FROM x.parent_id
         WHERE sx.pend > 0 AND sy.pend > 0)
    SELECT (SELECT count(*) FROM gangsched.teams),
           (SELECT count(*) FROM gangsched.teams t WHERE NOT EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = t.id)),
           (SELECT count(DISTINCT parent_id) FROM gangsched.teams WHERE parent_id IS NOT NULL),
           (SELECT count(*) FROM pair),
           (SELECT count(*) FROM pair WHERE sa > sb + one + 1e-9),
           (SELECT sum(used) FROM leafuse),
           (SELECT COALESCE(sum(used), 0) FROM leafuse) IN (320, demand)
$$;

-- Three seeds, each on a fresh extension.
SELECT pg_temp.build(0.15) AS demand \gset
SELECT considered > 0 AS ran FROM gangsched.run_round();
SELECT * FROM pg_temp.check(:demand);
SELECT * FROM gangsched.check_invariants();

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.build(-0.3) AS demand \gset
SELECT considered > 0 AS ran FROM gangsched.run_round();
SELECT * FROM pg_temp.check(:demand);
SELECT * FROM gangsched.check_invariants();

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.build(0.77) AS demand \gset
SELECT considered > 0 AS ran FROM gangsched.run_round();
SELECT * FROM pg_temp.check(:demand);
SELECT * FROM gangsched.check_invariants();

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
