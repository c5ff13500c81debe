-- The "borrowed" rule has one SQL home, gangsched._beyond_nominal()
-- (sql/src/62_quotas.sql: no quota, or some governed resource of the
-- team's use in the pool plus the work's demand above the nominal amount),
-- which places a nominated job once its victims have gone; the rounds
-- apply the same rule in C (src/fair.c) when they place a gang. This
-- proves that the two agree (issue 14), over random cluster states and
-- queues from a fixed seed (the same every run): each job is submitted
-- alone and a round runs; the gang the round places is marked borrowed
-- exactly when _beyond_nominal says so for its team's use in that pool
-- before it (allocations and held capacity of the team's other jobs).
--
-- Each state: 1-2 pools of 3-8 nodes (8 GPUs, 64 CPUs, 512 GB, 100 Gbit/s),
-- 3 teams with random quotas in each pool (none, GPUs only, explicit or
-- proportional or unbounded CPUs and memory, network), 25 jobs of 1-4
-- workers of 0-4 GPUs and some CPUs, memory and network, preemptible or
-- not, in a pool or anywhere. Preemption is off (nothing leaves), so the
-- only gang a round can place is the one just submitted.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;

CREATE TEMP TABLE bw_checks (state int, k int, team int, pool int, demand numeric[], used numeric[],
                             borrowed bool, rule bool);
CREATE TEMP TABLE bw_used (team_id int, pool_id int, used numeric[]);

CREATE FUNCTION pg_temp.pick(a anyarray) RETURNS anyelement
LANGUAGE sql VOLATILE AS $$ SELECT a[1 + floor(random() * cardinality(a))::int] $$;

CREATE FUNCTION pg_temp.bw_state(s int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    npools int := 1 + floor(random() * 2)::int;
    i      int;
    k      int;
    p      int;
    team   text;
    jid    bigint;
    placed bigint[];
    r      record;
BEGIN
    DROP EXTENSION gangsched;
    CREATE EXTENSION gangsched;
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    FOR p IN 1 .. npools LOOP
        PERFORM gangsched.add_pool('p' || p, pg_temp.pick(ARRAY['reserved', 'reserved', 'opportunistic']));
        FOR i IN 1 .. 3 + floor(random() * 6)::int LOOP
            PERFORM gangsched.add_node('p' || p || 'n' || i, 'p' || p, ('r' || (i % 2))::ltree, 64, 512, 100, 8, 'a100', 80);
        END LOOP;
    END LOOP;
    FOREACH team IN ARRAY ARRAY['ta', 'tb', 'tc'] LOOP
        PERFORM gangsched.add_team(team);
        FOR p IN 1 .. npools LOOP
            CONTINUE WHEN random() < 0.2;   -- no quota here
            PERFORM gangsched.set_quota(team, 'p' || p, pg_temp.pick(ARRAY[0, 2, 4, 8, 16]::numeric[]),
                        cpus => pg_temp.pick(ARRAY[NULL, NULL, 'Infinity', 4, 16, 64]::numeric[]),
                        mem_gb => pg_temp.pick(ARRAY[NULL, NULL, 'Infinity', 32, 256]::numeric[]),
                        net_gbps => pg_temp.pick(ARRAY[NULL, NULL, 10, 50]::numeric[]));
        END LOOP;
    END LOOP;

    FOR k IN 1 .. 25 LOOP
        team := pg_temp.pick(ARRAY['ta', 'tb', 'tc']);
        BEGIN
            jid := gangsched.submit(team, pg_temp.pick(ARRAY[1, 1, 2, 4]), pg_temp.pick(ARRAY[0, 1, 1, 2, 4]::numeric[]),
                                    cpus => pg_temp.pick(ARRAY[1, 2, 4, 8]::numeric[]),
                                    mem_gb => pg_temp.pick(ARRAY[4, 16, 64]::numeric[]),
                                    net_gbps => pg_temp.pick(ARRAY[0, 0, 5, 20]::numeric[]),
                                    preemptible => random() < 0.7,
                                    pool => pg_temp.pick(ARRAY[NULL, NULL, 'p1', 'p' || npools]));
        EXCEPTION WHEN SQLSTATE '53S05' OR SQLSTATE '53S04' OR invalid_parameter_value THEN
            CONTINUE;   -- not admissible (a team that could never hold it, or no reserved pool)
        END;
        -- the team's use in each pool before this round, as the round counts it
        TRUNCATE bw_used;
        INSERT INTO bw_used
        SELECT x.team_id, n.pool_id, ARRAY[sum(x.gpus), sum(x.cpus), sum(x.mem_gb), sum(x.net_gbps)]
          FROM (SELECT a.team_id, a.node_id, a.gpus, a.cpus, a.mem_gb, a.net_gbps
                  FROM gangsched.allocations a WHERE upper_inf(a.during)
                UNION ALL
                SELECT g.team_id, h.node_id, g.gpus, h.cpus, h.mem_gb, h.net_gbps
                  FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job) x
          JOIN gangsched.nodes n ON n.id = x.node_id
         GROUP BY 1, 2;
        PERFORM gangsched.run_round();
        SELECT array_agg(g.id) INTO placed FROM gangsched.gangs g
         WHERE g.state = 'placed' AND g.id NOT IN (SELECT c.k FROM bw_checks c WHERE c.state = s);
        IF cardinality(placed) > 1 THEN
            RAISE EXCEPTION 'state %: one round placed jobs % (preemption is off; only the new job can be placed)', s, placed;
        END IF;
        FOR r IN
            SELECT g.id, g.team_id, g.borrowed, a.pool_id,
                   ARRAY[g.workers * g.gpus, g.workers * g.cpus, g.workers * g.mem_gb, g.workers * g.net_gbps] AS demand
              FROM gangsched.gangs g
              JOIN LATERAL (SELECT n.pool_id FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id
                             WHERE a.job = g.id LIMIT 1) a ON true
             WHERE g.id = ANY (placed)
        LOOP
            INSERT INTO bw_checks
            SELECT s, r.id, r.team_id, r.pool_id, r.demand, u.used, r.borrowed,
                   gangsched._beyond_nominal(r.team_id, r.pool_id, r.demand, u.used)
              FROM (SELECT COALESCE((SELECT used FROM bw_used WHERE team_id = r.team_id AND pool_id = r.pool_id),
                                    ARRAY[0, 0, 0, 0]::numeric[]) AS used) u;
        END LOOP;
    END LOOP;
    IF EXISTS (SELECT FROM gangsched.check_invariants()) THEN
        RAISE EXCEPTION 'state %: invariant violated', s;
    END IF;
END $$;

SELECT setseed(0.53);
SELECT count(*) AS states FROM (SELECT pg_temp.bw_state(s) FROM generate_series(1, 16) s) x;

-- the round and _beyond_nominal disagree: no rows
SELECT state, k, team, pool, demand, used, borrowed, rule FROM bw_checks WHERE borrowed IS DISTINCT FROM rule
 ORDER BY state, k;
-- both outcomes occur, often
SELECT count(*) AS placed, count(*) FILTER (WHERE borrowed) AS borrowed,
       count(*) FILTER (WHERE NOT borrowed) AS guaranteed
  FROM bw_checks;

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
