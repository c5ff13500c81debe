-- Team trees: children without quotas of their own share their parent's
-- nominal quota by fair share. A gang placed within quota only by an
-- ancestor's quota that the preemptor's team shares (no quota row from the
-- gang's team up to the child of the two teams' common ancestor) is
-- guaranteed against teams outside that ancestor, not against the
-- ancestor's other children: the fair-share trigger may take it as it
-- takes a borrowed gang, under the same fair-share rule and hysteresis. A
-- quota row of the child's own still guarantees its floor.
-- (Found by test/t/041_team_tree_live.pl: before, the first child to fill
-- its parent's quota kept all of it from a later sibling for ever.)
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.min_runtime = 0;
SET gangsched.fair_preemption_delay = 0;
SET gangsched.start_timeout = '1d';
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;

-- 16 GPUs in one pool; prod (nominal 16) with serve/serve_a and
-- vision/vis_a below it, no quotas there; research outside with no quota.
CREATE FUNCTION pg_temp.setup(vision_weight int, serve_nominal int DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('gpu', 'reserved');
    PERFORM gangsched.add_node('n' || i, 'gpu', 'r1', 32, 256, 10, 8, NULL, NULL) FROM generate_series(1, 2) i;
    PERFORM gangsched.add_team('research', 3);
    PERFORM gangsched.add_team('prod', 1);
    PERFORM gangsched.add_team('serve', 1, 'prod');
    PERFORM gangsched.add_team('serve_a', 1, 'serve');
    PERFORM gangsched.add_team('vision', vision_weight, 'prod');
    PERFORM gangsched.add_team('vis_a', 1, 'vision');
    PERFORM gangsched.set_quota('prod', 'gpu', 16);
    IF serve_nominal IS NOT NULL THEN
        PERFORM gangsched.set_quota('serve', 'gpu', serve_nominal);
    END IF;
END $$;

-- n rounds, each followed by what the agents would do: placed jobs start,
-- preempted ones release after a checkpoint.
CREATE FUNCTION pg_temp.settle(n int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    i int;
BEGIN
    FOR i IN 1 .. n LOOP
        PERFORM gangsched.run_round();
        PERFORM gangsched.job_started(p.job, p.node)
           FROM (SELECT DISTINCT p.job, p.node FROM gangsched.placements p
                   JOIN gangsched.gangs g ON g.id = p.job WHERE g.state = 'placed') p;
        PERFORM gangsched.job_released(g.id, true) FROM gangsched.gangs g WHERE g.state = 'preempting';
    END LOOP;
    RETURN n;
END $$;

-- What each leaf runs and what team_shares says it is entitled to.
CREATE FUNCTION pg_temp.split()
RETURNS TABLE (team text, running bigint, pending bigint, used_gpus numeric, fair_gpus numeric)
LANGUAGE sql AS $$
    SELECT t.name,
           (SELECT count(*) FROM gangsched.gangs g WHERE g.team_id = t.id AND g.state = 'running'),
           (SELECT count(*) FROM gangsched.gangs g WHERE g.team_id = t.id AND g.state = 'pending'),
           s.used_gpus, round(s.fair_share * 16, 2)
      FROM gangsched.teams t JOIN gangsched.team_shares s ON s.team = t.name
     WHERE t.name IN ('serve', 'vision', 'serve_a', 'vis_a')
     ORDER BY t.name $$;

-- 1. Weights 1:1. serve_a fills prod's 16 GPUs (within prod's quota: not
-- borrowed); then vis_a asks for 12. It takes back its half, 8 GPUs, by
-- fair share; serve keeps 8.
SELECT pg_temp.setup(1);
SELECT count(gangsched.submit('serve_a', 1, 4)) AS serve_a_jobs FROM generate_series(1, 5);
SELECT pg_temp.settle(3) AS rounds;
SELECT count(*) FILTER (WHERE borrowed) AS borrowed, count(*) FILTER (WHERE NOT borrowed) AS within_quota
  FROM gangsched.jobs WHERE team = 'serve_a' AND state = 'running';
SELECT count(gangsched.submit('vis_a', 1, 4)) AS vis_a_jobs FROM generate_series(1, 3);
SELECT pg_temp.settle(6) AS rounds;
SELECT * FROM pg_temp.split();
SELECT count(*) AS preempted FROM gangsched.events WHERE kind = 'preempting';
-- the victims' reason, as the operator reads it
SELECT DISTINCT regexp_replace(reason, 'job [0-9]+', 'job N') AS victim_reason
  FROM gangsched.jobs WHERE team = 'serve_a' AND state = 'pending';
SELECT * FROM gangsched.check_invariants();
-- stable: more rounds move nothing
SELECT pg_temp.settle(4) AS rounds;
SELECT count(*) AS preempted FROM gangsched.events WHERE kind = 'preempting';
SELECT * FROM gangsched.check_invariants();

-- 2. Weights 1:3 under prod: vision's fair share is 12 of prod's 16.
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.setup(3);
SELECT count(gangsched.submit('serve_a', 1, 4)) AS serve_a_jobs FROM generate_series(1, 5);
SELECT pg_temp.settle(3) AS rounds;
SELECT count(gangsched.submit('vis_a', 1, 4)) AS vis_a_jobs FROM generate_series(1, 4);
SELECT pg_temp.settle(8) AS rounds;
SELECT * FROM pg_temp.split();
SELECT * FROM gangsched.check_invariants();

-- 3. serve has a nominal quota of its own, 12 of prod's 16: its 12 are
-- guaranteed against vis_a as well; only the rest of prod's quota is
-- shared. Weights 1:1 would give 8 each, but serve's floor is 12, so vis_a
-- gets 4 (the fair share says the same).
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.setup(1, 12);
SELECT count(gangsched.submit('serve_a', 1, 4)) AS serve_a_jobs FROM generate_series(1, 5);
SELECT pg_temp.settle(3) AS rounds;
SELECT count(gangsched.submit('vis_a', 1, 4)) AS vis_a_jobs FROM generate_series(1, 3);
SELECT pg_temp.settle(8) AS rounds;
SELECT * FROM pg_temp.split();
SELECT * FROM gangsched.check_invariants();

-- 4. Outside prod, the quota still guarantees: research (no quota) asks
-- for the whole cluster while serve_a holds prod's 16 within quota;
-- nothing of serve_a's is taken.
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.setup(1);
SELECT count(gangsched.submit('serve_a', 1, 4)) AS serve_a_jobs FROM generate_series(1, 4);
SELECT pg_temp.settle(3) AS rounds;
SELECT count(gangsched.submit('research', 1, 4)) AS research_jobs FROM generate_series(1, 4);
SELECT pg_temp.settle(6) AS rounds;
SELECT team, state, count(*) FROM gangsched.jobs GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS preempted FROM gangsched.events WHERE kind = 'preempting';
SELECT * FROM gangsched.check_invariants();

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
