-- Team trees (issue 15): hierarchical weighted DRF, nested quotas, borrowing
-- and lending inside a subtree first, reclaim in the reverse order, and
-- admission naming the level that limits a job. Parents are set with an
-- UPDATE of teams.parent_id (superuser), as set_team_parent would. Each
-- scenario starts on a fresh extension and ends with no invariant violated.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
\set SHOW_CONTEXT never
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;

CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int)
LANGUAGE sql AS $$ SELECT r.considered, r.placed, r.preempted FROM gangsched.run_round() r $$;
-- GPUs each team holds (placed or running), and how many of its jobs wait.
CREATE FUNCTION pg_temp.held() RETURNS TABLE (team text, gpus numeric, borrowed numeric, pending bigint)
LANGUAGE sql AS $$
    SELECT t.name, COALESCE(sum(g.gpus * g.workers) FILTER (WHERE g.state IN ('placed', 'running')), 0),
           COALESCE(sum(g.gpus * g.workers) FILTER (WHERE g.state IN ('placed', 'running') AND g.borrowed), 0),
           count(*) FILTER (WHERE g.state = 'pending')
      FROM gangsched.teams t LEFT JOIN gangsched.gangs g ON g.team_id = t.id
     GROUP BY t.name ORDER BY t.name $$;
CREATE FUNCTION pg_temp.parent(child text, parent text) RETURNS void
LANGUAGE sql AS $$
    UPDATE gangsched.teams SET parent_id = (SELECT id FROM gangsched.teams WHERE name = parent) WHERE name = child $$;
-- n nodes of 4 GPUs in pool main
CREATE FUNCTION pg_temp.nodes(n int) RETURNS void
LANGUAGE sql AS $$
    SELECT gangsched.set_topology_levels(ARRAY['rack']);
    SELECT gangsched.add_pool('main', 'reserved');
    SELECT count(gangsched.add_node('n' || i, 'main', ('r' || (i / 16))::ltree, 64, 512, 100, 4, NULL, NULL))
      FROM generate_series(1, n) i $$;

/* ================================================================== */
/* 1. Weights per level, one leaf idle                                 */
/* ================================================================== */

-- 300 GPUs (75 nodes x 4). research (weight 3) has vision (1) and
-- language (2); production (weight 2) is a leaf: research 60%, split 1:2,
-- production 40%. Every job takes one node (4 GPUs), preemptible, no
-- quotas: the order alone decides. vision is idle.
--
-- The hierarchy: research's share goes to its only busy child, language:
-- language 180, production 120. A flat emulation (vision 20, language 40,
-- production 40) would give language and production 150 each.
SELECT pg_temp.nodes(75);
SELECT gangsched.add_team('research', 3), gangsched.add_team('production', 2),
       gangsched.add_team('vision', 1), gangsched.add_team('language', 2);
SELECT pg_temp.parent('vision', 'research'), pg_temp.parent('language', 'research');
SELECT count(gangsched.submit('language', 1, 4)) FROM generate_series(1, 60);
SELECT count(gangsched.submit('production', 1, 4)) FROM generate_series(1, 60);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM gangsched.check_invariants();

-- Every leaf busy: vision and language share research's 180 1:2.
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.nodes(75);
SELECT gangsched.add_team('research', 3), gangsched.add_team('production', 2),
       gangsched.add_team('vision', 1), gangsched.add_team('language', 2);
SELECT pg_temp.parent('vision', 'research'), pg_temp.parent('language', 'research');
SELECT count(gangsched.submit(t, 1, 4)) FROM unnest(ARRAY['vision', 'language', 'production']) t, generate_series(1, 60);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. Two levels with idle siblings (H-DRF)                            */
/* ================================================================== */

-- 300 GPUs. A (weight 1) has A1, A2, A3 (weight 1 each); B (weight 1) is
-- a leaf. A3 is idle. H-DRF gives A 150 (A1 75, A2 75) and B 150; a flat
-- split over the four leaves with B weighted 3 would give 60/60/180.
-- Jobs of 1 GPU, so that the split is exact.
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.nodes(75);
SELECT gangsched.add_team(n) FROM unnest(ARRAY['A', 'B', 'A1', 'A2', 'A3']) n;
-- a job A had before it got children (submit refuses new ones then)
SELECT gangsched.submit('A', 1, 1) > 0 AS submitted;
SELECT pg_temp.parent(c, 'A') FROM unnest(ARRAY['A1', 'A2', 'A3']) c;
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['A1', 'A2', 'B']) t, generate_series(1, 200);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
-- the inner team A's job is never tried: only leaves' jobs are scheduled
SELECT team, state, reason FROM gangsched.jobs WHERE team = 'A';
-- invariant 9 reports the state the API refuses to make (a team with a
-- live job becoming a parent); cancelling the job ends it
SELECT invariant, detail FROM gangsched.check_invariants();
SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE team = 'A';
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. Nested quotas: borrowing and lending inside a subtree            */
/* ================================================================== */

-- 96 GPUs (24 nodes). research nominal 48 (vision 16, language 32),
-- production nominal 48. language lends at most 8 of its 32: vision may
-- borrow only 8 from its sibling, and production's 48 (it lends nothing)
-- are not vision's either. vision ends with 16 + 8 = 24 GPUs.
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.nodes(24);
SELECT gangsched.add_team(n) FROM unnest(ARRAY['research', 'production', 'vision', 'language']) n;
SELECT pg_temp.parent('vision', 'research'), pg_temp.parent('language', 'research');
SELECT gangsched.set_quota('research', 'main', 48);
SELECT gangsched.set_quota('vision', 'main', 16);
SELECT gangsched.set_quota('language', 'main', 32, lending_limit_gpus => 8);
SELECT gangsched.set_quota('production', 'main', 48, lending_limit_gpus => 0);
SELECT count(gangsched.submit('vision', 1, 4)) FROM generate_series(1, 10);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT DISTINCT reason FROM gangsched.jobs WHERE team = 'vision' AND state = 'pending';
SELECT * FROM gangsched.check_invariants();

-- A lending limit on the parent caps what its subtree lends outside it:
-- research lends at most 16 of its 48 (its children set none), so
-- production borrows 16: 48 + 16 = 64 GPUs.
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.nodes(24);
SELECT gangsched.add_team(n) FROM unnest(ARRAY['research', 'production', 'vision', 'language']) n;
SELECT pg_temp.parent('vision', 'research'), pg_temp.parent('language', 'research');
SELECT gangsched.set_quota('research', 'main', 48, lending_limit_gpus => 16);
SELECT gangsched.set_quota('vision', 'main', 16);
SELECT gangsched.set_quota('language', 'main', 32);
SELECT gangsched.set_quota('production', 'main', 48);
SELECT count(gangsched.submit('production', 1, 4)) FROM generate_series(1, 20);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT DISTINCT reason FROM gangsched.jobs WHERE team = 'production' AND state = 'pending';
-- inside research the limit does not apply: vision borrows language's idle
-- quota (16 + 16 = 32 of the 32 free GPUs)
SELECT count(gangsched.submit('vision', 1, 4)) FROM generate_series(1, 10);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 4. Reclaim order: from outside the parent's subtree first           */
/* ================================================================== */

-- 96 GPUs. research 48 (vision 16, language 32), production 48. vision
-- runs 32 (16 borrowed from idle language, inside research), production
-- 64 (16 borrowed from research's idle quota, from outside). language
-- reclaims 16 of its 32: the borrowers outside research lose theirs first
-- (production's 16); reclaiming 16 more, production is back within its
-- quota, so vision's borrowed gangs go.
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET gangsched.preemption = on;
SET gangsched.min_runtime = 0;
SELECT pg_temp.nodes(24);
SELECT gangsched.add_team(n) FROM unnest(ARRAY['research', 'production', 'vision', 'language']) n;
SELECT pg_temp.parent('vision', 'research'), pg_temp.parent('language', 'research');
SELECT gangsched.set_quota('research', 'main', 48);
SELECT gangsched.set_quota('vision', 'main', 16);
SELECT gangsched.set_quota('language', 'main', 32);
SELECT gangsched.set_quota('production', 'main', 48);
SELECT count(gangsched.submit('vision', 1, 4)) FROM generate_series(1, 8);
SELECT * FROM pg_temp.round();
SELECT count(gangsched.submit('production', 1, 4)) FROM generate_series(1, 16);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT count(gangsched.submit('language', 1, 4)) FROM generate_series(1, 4);
SELECT * FROM pg_temp.round();
SELECT t.name AS victim_team, count(*) AS victims
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state = 'preempting' GROUP BY t.name ORDER BY t.name;
SELECT DISTINCT reason FROM gangsched.jobs WHERE team = 'language' AND state = 'pending';
-- the victims go (their agents confirm), language's jobs are placed
SELECT count(*) AS released FROM (SELECT gangsched.job_released(g.id) FROM gangsched.gangs g WHERE g.state = 'preempting') s;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT count(gangsched.submit('language', 1, 4)) FROM generate_series(1, 4);
SELECT * FROM pg_temp.round();
SELECT t.name AS victim_team, count(*) AS victims
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state = 'preempting' GROUP BY t.name ORDER BY t.name;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5. Fair-share preemption compares sibling subtrees                  */
/* ================================================================== */

-- 96 GPUs, no quotas (everything borrowed), research (1) has vision and
-- language (1 each), production (1) is a leaf. production fills the
-- cluster; vision's jobs take from it until research and production hold
-- 48 each (the two sides under the top). Then language's jobs compare
-- language with vision (their LCA is research): production, at research's
-- share, is no victim for them (research with the job would end above
-- it); vision gives up 24, language ends with 24.
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET gangsched.preemption = on;
SET gangsched.min_runtime = 0;
SET gangsched.fair_preemption_delay = 0;
SELECT pg_temp.nodes(24);
SELECT gangsched.add_team(n) FROM unnest(ARRAY['research', 'production', 'vision', 'language']) n;
SELECT pg_temp.parent('vision', 'research'), pg_temp.parent('language', 'research');
SELECT count(gangsched.submit('production', 1, 4)) FROM generate_series(1, 24);
SELECT * FROM pg_temp.round();
SELECT count(gangsched.submit('vision', 1, 4)) FROM generate_series(1, 24);
SELECT * FROM pg_temp.round();
SELECT t.name AS victim_team, count(*) AS victims
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state = 'preempting' GROUP BY t.name ORDER BY t.name;
SELECT count(*) AS released FROM (SELECT gangsched.job_released(g.id) FROM gangsched.gangs g WHERE g.state = 'preempting') s;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
-- the waiting jobs of production and vision go (else the starvation guard
-- would keep a node for the first of them, and language's jobs would need
-- a second victim where one would do)
SELECT count(*) AS cancelled FROM (SELECT gangsched.cancel(id) FROM gangsched.gangs WHERE state = 'pending') s;
SELECT count(gangsched.submit('language', 1, 4)) FROM generate_series(1, 24);
SELECT * FROM pg_temp.round();
SELECT t.name AS victim_team, count(*) AS victims
  FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id
 WHERE g.state = 'preempting' GROUP BY t.name ORDER BY t.name;
SELECT count(*) AS released FROM (SELECT gangsched.job_released(g.id) FROM gangsched.gangs g WHERE g.state = 'preempting') s;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
-- a further round moves nothing
SELECT * FROM pg_temp.round();
SELECT team, reason, count(*) FROM gangsched.jobs WHERE state = 'pending' GROUP BY 1, 2 ORDER BY 1, 2;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 6. Admission and why_pending name the level                         */
/* ================================================================== */

SET gangsched.preemption = off;
RESET gangsched.fair_preemption_delay;
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.nodes(24);
SELECT gangsched.add_team(n) FROM unnest(ARRAY['research', 'production', 'vision', 'language']) n;
SELECT pg_temp.parent('vision', 'research'), pg_temp.parent('language', 'research');
SELECT gangsched.set_quota('research', 'main', 48, borrowing_limit_gpus => 8);
SELECT gangsched.set_quota('language', 'main', 32);
-- preemptible: research may hold 48 + 8; 14 nodes (56 GPUs) pass, 15 do not
SELECT gangsched.submit('vision', 14, 4) > 0 AS admitted;
\set VERBOSITY default
SELECT gangsched.submit('vision', 15, 4);
-- non-preemptible: vision has no quota of its own but research has: within
-- research's 48 less language's 32 carved out of it
SELECT gangsched.submit('vision', 4, 4, preemptible => false) > 0 AS admitted;
SELECT gangsched.submit('vision', 5, 4, preemptible => false);
-- without any quota on the path, non-preemptible work is refused at the leaf
SELECT gangsched.submit('production', 1, 4, preemptible => false);
\set VERBOSITY terse
-- the fast path (C) agrees with the SQL checks: every team, 1..20
-- workers of 4 GPUs, preemptible or not, with and without a lending limit
CREATE FUNCTION pg_temp.agree() RETURNS TABLE (tried bigint, admitted bigint, fast_only bigint, sql_only bigint)
LANGUAGE plpgsql AS $$
DECLARE
    g gangsched.gangs;
    x record;
    ok_sql bool;
    ok_fast bool;
BEGIN
    tried := 0; admitted := 0; fast_only := 0; sql_only := 0;
    SELECT * INTO g FROM gangsched.gangs ORDER BY id LIMIT 1;
    FOR x IN SELECT t.id, w, p FROM gangsched.teams t, generate_series(1, 20) w, (VALUES (true), (false)) v(p) LOOP
        g := jsonb_populate_record(g, jsonb_build_object('team_id', x.id, 'workers', x.w, 'preemptible', x.p));
        BEGIN
            PERFORM gangsched._admit(g);
            ok_sql := true;
        EXCEPTION WHEN SQLSTATE '53S05' THEN
            ok_sql := false;
        END;
        ok_fast := gangsched._admit_fast(g);
        tried := tried + 1;
        admitted := admitted + ok_sql::int;
        fast_only := fast_only + (ok_fast AND NOT ok_sql)::int;
        sql_only := sql_only + (ok_sql AND NOT ok_fast)::int;
    END LOOP;
    RETURN NEXT;
END $$;
SELECT * FROM pg_temp.agree();
SELECT gangsched.set_quota('language', 'main', 32, lending_limit_gpus => 8);
SELECT gangsched.set_quota('production', 'main', 16, borrowing_limit_gpus => 20);
SELECT * FROM pg_temp.agree();
SELECT gangsched.set_quota('language', 'main', 32);
SELECT gangsched.remove_quota('production', 'main');
SELECT count(*) AS cancelled FROM (SELECT gangsched.cancel(id) FROM gangsched.gangs) s;
-- why_pending: research's nominal blocks vision's non-preemptible jobs
-- beyond 16 (language's unused 32 is kept for it); language's own stay
-- within its 32
SELECT count(gangsched.submit('vision', 1, 4, preemptible => false)) FROM generate_series(1, 5);
SELECT count(gangsched.submit('language', 1, 4, preemptible => false)) FROM generate_series(1, 2);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT t.name AS team, r.reason, r.detail FROM gangsched.gangs g JOIN gangsched.teams t ON t.id = g.team_id,
       LATERAL gangsched.why_pending(g.id) r
 WHERE g.state = 'pending';
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 7. Priority preemption under an ancestor's borrowing limit         */
/* ================================================================== */

-- 96 GPUs. research may hold 16 (nominal 16, borrowing limit 0); vision
-- has no quota of its own and runs four low-priority 4-GPU jobs: research
-- is at its limit although 80 GPUs are free. A high-priority vision job of
-- 8 GPUs may take its own team's work: with research's limit counted, it
-- needs two victims, not one.
SET gangsched.preemption = on;
SET gangsched.min_runtime = 0;
SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT pg_temp.nodes(24);
SELECT gangsched.add_team(n) FROM unnest(ARRAY['research', 'vision', 'language']) n;
SELECT pg_temp.parent('vision', 'research'), pg_temp.parent('language', 'research');
SELECT gangsched.set_quota('research', 'main', 16, borrowing_limit_gpus => 0);
SELECT count(gangsched.submit('vision', 1, 4, priority => 0)) FROM generate_series(1, 6);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT DISTINCT reason FROM gangsched.jobs WHERE state = 'pending';
SELECT gangsched.submit('vision', 2, 4, priority => 5) > 0 AS submitted;
SELECT * FROM pg_temp.round();
SELECT count(*) FILTER (WHERE state = 'preempting') AS victims,
       count(*) FILTER (WHERE state = 'nominated') AS nominated
  FROM gangsched.gangs;
SELECT * FROM gangsched.check_invariants();
SET gangsched.preemption = off;

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
