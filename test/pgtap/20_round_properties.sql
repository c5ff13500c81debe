-- Properties of scheduling rounds under a random workload (fixed seed, so
-- a failure replays): a mixed cluster (two racks of whole-GPU nodes in a
-- reserved pool, one rack of 4-slice nodes, an opportunistic rack), random
-- gangs of every shape, and between rounds random agent confirmations,
-- finishes, failures, cancels, nodes going down, draining and coming back.
-- After every round:
--   1. check_invariants() is empty;
--   2. the jobs why_pending() called 'fits now' just before are exactly the
--      jobs the round placed (the simulation and the round agree);
--   3. nothing the round placed is on a node that is not up, in a pool the
--      job may not use, or on another GPU model than it asked for;
--   4. a second round at once places nothing and changes no allocation.
-- Preemption is off: this is about placement. Runs in one transaction,
-- rolled back.
BEGIN;
SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gangsched CASCADE;
SET LOCAL gangsched.preemption = off;
SET LOCAL gangsched.start_timeout = '20min';
SET LOCAL gangsched.clock_override = '2030-01-01 00:00:00+00';

SELECT plan(4 * 40 + 3);

SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT gangsched.add_pool('res', 'reserved');
SELECT gangsched.add_pool('opp', 'opportunistic');
SELECT count(gangsched.add_node(n, p, t::ltree, c, m, net, g, model, gm, sl)) FROM (VALUES
    ('a1', 'res', 'z1.r1', 64, 512, 100, 8, 'a100', 80, 1), ('a2', 'res', 'z1.r1', 64, 512, 100, 8, 'a100', 80, 1),
    ('a3', 'res', 'z1.r1', 64, 512, 100, 8, 'a100', 80, 1), ('a4', 'res', 'z1.r1', 64, 512, 100, 8, 'a100', 80, 1),
    ('b1', 'res', 'z1.r2', 32, 256, 50, 8, 'a100', 40, 1), ('b2', 'res', 'z1.r2', 32, 256, 50, 8, 'a100', 40, 1),
    ('b3', 'res', 'z1.r2', 32, 256, 50, 8, 'a100', 40, 1), ('b4', 'res', 'z1.r2', 32, 256, 50, 8, 'a100', 40, 1),
    ('s1', 'res', 'z2.r3', 32, 256, 50, 4, 'h100', 80, 4), ('s2', 'res', 'z2.r3', 32, 256, 50, 4, 'h100', 80, 4),
    ('o1', 'opp', 'z2.r4', 32, 256, 50, 8, 'a100', 80, 1), ('o2', 'opp', 'z2.r4', 32, 256, 50, 8, 'a100', 80, 1))
    v(n, p, t, c, m, net, g, model, gm, sl);
SELECT gangsched.add_team('t');
SELECT gangsched.set_quota('t', 'res', 40);
SELECT gangsched.cache_dataset(n, 'web') FROM unnest(ARRAY['a2', 'a3', 'b1', 's1']) n;
SELECT setseed(0.3);

-- Submit one random gang; admission may refuse a shape (then nothing).
CREATE FUNCTION pg_temp.random_submit() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    k int := floor(random() * 12)::int;
BEGIN
    CASE k
        WHEN 0 THEN PERFORM gangsched.submit('t', 1 + floor(random() * 4)::int, 1);
        WHEN 1 THEN PERFORM gangsched.submit('t', 1 + floor(random() * 3)::int, 8);
        WHEN 2 THEN PERFORM gangsched.submit('t', 4 * (1 + floor(random() * 3)::int), 1, group_size => 4);
        WHEN 3 THEN PERFORM gangsched.submit('t', 8, 1, group_size => 2, stages => 4, stage_span => 'rack');
        WHEN 4 THEN PERFORM gangsched.submit('t', 1 + floor(random() * 6)::int, 0.25);
        WHEN 5 THEN PERFORM gangsched.submit('t', 2, 0.5, gpu_model => 'h100');
        WHEN 6 THEN PERFORM gangsched.submit('t', 2, 2, cpus => 24, mem_gb => 100);
        WHEN 7 THEN PERFORM gangsched.submit('t', 6, 2, span => 'rack');
        WHEN 8 THEN PERFORM gangsched.submit('t', 2, 4, dataset => 'web',
                                             locality => (ARRAY['required', 'preferred'])[1 + floor(random() * 2)::int]);
        WHEN 9 THEN PERFORM gangsched.submit('t', 1 + floor(random() * 2)::int, 4, preemptible => false);
        WHEN 10 THEN PERFORM gangsched.submit('t', 2, 4, pool => 'opp', gpu_mem_gb => 80);
        ELSE PERFORM gangsched.submit('t', 1, 0, cpus => 8, mem_gb => 32, net_gbps => 10,
                                      priority => floor(random() * 3)::int);
    END CASE;
EXCEPTION WHEN SQLSTATE '53000' OR SQLSTATE '53S01' OR SQLSTATE '53S02' OR SQLSTATE '53S03'
               OR SQLSTATE '53S04' OR SQLSTATE '53S05' OR SQLSTATE '53S06' THEN
    NULL;
END $$;

-- What agents, users and operators do between two rounds.
CREATE FUNCTION pg_temp.churn() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r record;
    i int;
BEGIN
    FOR i IN 1 .. floor(random() * 6)::int LOOP
        PERFORM pg_temp.random_submit();
    END LOOP;
    -- agents confirm most placed jobs on all their nodes
    FOR r IN SELECT DISTINCT p.job, p.node FROM gangsched.placements p JOIN gangsched.gangs g ON g.id = p.job
              WHERE g.state = 'placed' ORDER BY 1, 2 LOOP
        IF random() < 0.8 THEN
            PERFORM gangsched.job_started(r.job, r.node);
        END IF;
    END LOOP;
    -- some running jobs end, well or badly; some jobs are cancelled
    FOR r IN SELECT id, state FROM gangsched.gangs WHERE state IN ('pending', 'placed', 'running') ORDER BY id LOOP
        IF r.state = 'running' AND random() < 0.15 THEN
            PERFORM gangsched.job_finished(r.id, random() < 0.8);
        ELSIF random() < 0.04 THEN
            PERFORM gangsched.cancel(r.id);
        END IF;
    END LOOP;
    -- nodes fail, drain and come back
    FOR r IN SELECT name, state FROM gangsched.nodes ORDER BY id LOOP
        IF r.state = 'up' AND random() < 0.03 THEN
            PERFORM gangsched.set_node_state(r.name, (ARRAY['down', 'draining'])[1 + floor(random() * 2)::int]);
        ELSIF r.state <> 'up' AND random() < 0.3 THEN
            PERFORM gangsched.set_node_state(r.name, 'up');
        END IF;
    END LOOP;
    PERFORM set_config('gangsched.clock_override', (gangsched.now() + interval '1 minute')::text, true);
END $$;

-- One round with its four checks, as TAP lines.
CREATE FUNCTION pg_temp.checked_round(k int) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    fits     bigint[];
    placed   bigint[];
    bad      text;
    before   text;
    again    int;
    t        timestamptz;
BEGIN
    PERFORM pg_temp.churn();
    t := gangsched.now();
    SELECT COALESCE(array_agg(g.id ORDER BY g.id), '{}') INTO fits FROM gangsched.gangs g
     WHERE g.state = 'pending'
       AND EXISTS (SELECT FROM gangsched.why_pending(g.id) w WHERE w.reason = 'fits now');
    PERFORM gangsched.run_round();
    RETURN NEXT is_empty('SELECT * FROM gangsched.check_invariants()', format('round %s: no invariant violated', k));
    SELECT COALESCE(array_agg(g.id ORDER BY g.id), '{}') INTO placed FROM gangsched.gangs g
     WHERE g.state = 'placed' AND g.placed_at = t;
    RETURN NEXT is(placed, fits, format('round %s: it placed exactly the jobs why_pending said fit now', k));
    SELECT string_agg(format('job %s on %s (%s, pool %s, model %s)', a.job, n.name, n.state, n.pool_id, n.gpu_model), '; ')
      INTO bad
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id JOIN gangsched.gangs g ON g.id = a.job
      JOIN gangsched.pools p ON p.id = n.pool_id
     WHERE lower(a.during) = t AND upper_inf(a.during)
       AND (n.state <> 'up'
            OR (g.pool_id IS NOT NULL AND n.pool_id <> g.pool_id)
            OR (NOT g.preemptible AND p.kind <> 'reserved')
            OR (g.gpus > 0 AND g.gpu_model IS NOT NULL AND n.gpu_model IS DISTINCT FROM g.gpu_model));
    RETURN NEXT is(bad, NULL, format('round %s: new work only on up nodes of allowed pools and models', k));
    SELECT md5(COALESCE(string_agg(a::text, '|' ORDER BY a.id), '')) INTO before FROM gangsched.allocations a;
    SELECT r.placed INTO again FROM gangsched.run_round() r;
    RETURN NEXT ok(again = 0 AND before = (SELECT md5(COALESCE(string_agg(a::text, '|' ORDER BY a.id), ''))
                                             FROM gangsched.allocations a),
                   format('round %s: a second round at once places nothing and changes no allocation', k));
END $$;

SELECT pg_temp.checked_round(k) FROM generate_series(1, 40) k;

-- the workload did exercise the scheduler
SELECT cmp_ok((SELECT count(*) FROM gangsched.events WHERE kind = 'placed')::int, '>=', 40,
              'at least 40 placements over the run');
SELECT cmp_ok((SELECT count(DISTINCT state) FROM gangsched.gangs)::int, '>=', 5,
              'jobs ended in at least five different states');
SELECT is_empty('SELECT * FROM gangsched.check_invariants()', 'no invariant violated at the end');

SELECT * FROM finish();
ROLLBACK;
