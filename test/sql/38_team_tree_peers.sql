-- Team trees against the peers' published hierarchical examples (issue 15):
-- the worked examples of Kueue's fair-sharing design (KEP "Fair Sharing",
-- user stories 2 and 3), Kueue's hierarchical cohorts design (KEP
-- "Hierarchical Cohorts", user stories 1 and 2) and Volcano's hierarchical
-- DRF design (design note "Hierarchical Dominant Resource Fairness
-- (HDRF)", its two examples: children with complementary dominant
-- resources, and a saturated node). Their resources become GPUs and CPUs,
-- their workloads/pods 1-GPU or 1-CPU single-worker jobs (so that a split
-- can be exact; gangsched places whole gangs, so with bigger jobs a
-- split is only exact to one job). Where gangsched's answer differs from
-- the published one, the scenario says so and why. Each scenario starts
-- on a fresh extension and ends with no invariant violated.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;

CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int)
LANGUAGE sql AS $$ SELECT r.considered, r.placed, r.preempted FROM gangsched.run_round() r $$;
-- GPUs and CPUs each leaf team holds (placed or running), jobs waiting
CREATE FUNCTION pg_temp.held() RETURNS TABLE (team text, gpus numeric, cpus numeric, borrowed_gpus numeric, pending bigint)
LANGUAGE sql AS $$
    SELECT t.name, COALESCE(sum(g.gpus * g.workers) FILTER (WHERE g.state IN ('placed', 'running')), 0),
           COALESCE(sum(g.cpus * g.workers) FILTER (WHERE g.state IN ('placed', 'running')), 0),
           COALESCE(sum(g.gpus * g.workers) FILTER (WHERE g.state IN ('placed', 'running') AND g.borrowed), 0),
           count(*) FILTER (WHERE g.state = 'pending')
      FROM gangsched.teams t JOIN gangsched.gangs g ON g.team_id = t.id
     GROUP BY t.name ORDER BY t.name $$;
-- the tree's rows of team_shares: subtree use and the H-DRF fair share
CREATE FUNCTION pg_temp.shares() RETURNS TABLE (path text, used_gpus numeric, used_cpus numeric, dominant_share numeric, fair_share numeric)
LANGUAGE sql AS $$
    SELECT s.path::text, s.used_gpus, s.used_cpus, s.dominant_share, s.fair_share
      FROM gangsched.team_shares s ORDER BY s.path::text $$;
-- n nodes of g GPUs and c CPUs in pool main
CREATE FUNCTION pg_temp.nodes(n int, g int, c int) RETURNS void
LANGUAGE sql AS $$
    SELECT gangsched.set_topology_levels(ARRAY['rack']);
    SELECT gangsched.add_pool('main', 'reserved');
    SELECT count(gangsched.add_node('n' || i, 'main', ('r' || (i / 16))::ltree, c, 512, 100, g, NULL, NULL))
      FROM generate_series(1, n) i $$;
CREATE FUNCTION pg_temp.fresh() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL client_min_messages = warning;
    DROP EXTENSION gangsched CASCADE;
    CREATE EXTENSION gangsched CASCADE;
END $$;

/* ================================================================== */
/* 1. Kueue, KEP "Fair Sharing", user story 3                         */
/* ================================================================== */

-- Three cohorts under a top cohort: CS holds one queue with the whole
-- 300-GPU nominal quota and no work; C1 holds 1A, 1B, 1C, 1C three times
-- as important; C2 holds only 2A. Every queue of C1 and C2 has a long
-- backlog. Published split: C1 150 and C2 150; inside C1 30/30/90; 2A
-- all of C2's 150. Here: cs is a leaf with the 300-GPU quota (idle, so
-- it lends it all); c1 and c2 weight 1; 1a, 1b weight 1, 1c weight 3.
SELECT pg_temp.nodes(75, 4, 64);
SELECT gangsched.add_team('cs', 1), gangsched.add_team('c1', 1), gangsched.add_team('c2', 1);
SELECT gangsched.add_team('1a', 1, 'c1'), gangsched.add_team('1b', 1, 'c1'), gangsched.add_team('1c', 3, 'c1'),
       gangsched.add_team('2a', 1, 'c2');
SELECT gangsched.set_quota('cs', 'main', 300);
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['1a', '1b', '1c', '2a']) t, generate_series(1, 200);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM pg_temp.shares();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. Kueue, KEP "Fair Sharing", user story 2                         */
/* ================================================================== */

-- Two departments D1 and D2 of three teams each (1A..2C), every team
-- with a guaranteed quota, free quota lent first inside the department.
-- (a) 1A is idle while 1B and 1C need more: 1A's free quota goes to 1B
-- and 1C, none to D2. 240 GPUs, 40 per team, departments 120 each; all
-- others want 80: 1b 60, 1c 60, 2a/2b/2c 40 each.
SELECT pg_temp.fresh();
SELECT pg_temp.nodes(60, 4, 64);
SELECT gangsched.add_team('d1', 1), gangsched.add_team('d2', 1);
SELECT gangsched.add_team(d || x, 1, 'd' || d) FROM unnest(ARRAY['1', '2']) d, unnest(ARRAY['a', 'b', 'c']) x;
SELECT gangsched.set_quota('d1', 'main', 120), gangsched.set_quota('d2', 'main', 120);
SELECT gangsched.set_quota(d || x, 'main', 40) FROM unnest(ARRAY['1', '2']) d, unnest(ARRAY['a', 'b', 'c']) x;
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['1b', '1c', '2a', '2b', '2c']) t, generate_series(1, 80);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM gangsched.check_invariants();

-- (b) 1A is idle and 1B, 1C need no more than their quota: 1A's free
-- quota goes out of D1, and 2A, 2B, 2C get equal parts of it: 40 + 40/3
-- each (13 or 14 with 1-GPU jobs; which one gets the odd GPU is the
-- order's tie-break).
SELECT pg_temp.fresh();
SELECT pg_temp.nodes(60, 4, 64);
SELECT gangsched.add_team('d1', 1), gangsched.add_team('d2', 1);
SELECT gangsched.add_team(d || x, 1, 'd' || d) FROM unnest(ARRAY['1', '2']) d, unnest(ARRAY['a', 'b', 'c']) x;
SELECT gangsched.set_quota('d1', 'main', 120), gangsched.set_quota('d2', 'main', 120);
SELECT gangsched.set_quota(d || x, 'main', 40) FROM unnest(ARRAY['1', '2']) d, unnest(ARRAY['a', 'b', 'c']) x;
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['1b', '1c']) t, generate_series(1, 40);
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['2a', '2b', '2c']) t, generate_series(1, 80);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. Kueue, KEP "Hierarchical Cohorts", user story 1                 */
/* ================================================================== */

-- Research and production organisations, each with a quota split among
-- its subteams; production may borrow research's quota, not the other way
-- round (research's top cohort has a borrowing limit of 0). 160 GPUs:
-- research 80 (r1, r2 40 each, borrowing limit 0 at research), production
-- 80 (p1, p2 40 each). (a) research idle, production wants 160: it gets
-- all 160, 80 of it borrowed.
SELECT pg_temp.fresh();
SELECT pg_temp.nodes(40, 4, 64);
SELECT gangsched.add_team('research', 1), gangsched.add_team('production', 1);
SELECT gangsched.add_team('r1', 1, 'research'), gangsched.add_team('r2', 1, 'research'),
       gangsched.add_team('p1', 1, 'production'), gangsched.add_team('p2', 1, 'production');
SELECT gangsched.set_quota('research', 'main', 80, borrowing_limit_gpus => 0),
       gangsched.set_quota('production', 'main', 80);
SELECT gangsched.set_quota(t, 'main', 40) FROM unnest(ARRAY['r1', 'r2', 'p1', 'p2']) t;
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['p1', 'p2']) t, generate_series(1, 80);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM gangsched.check_invariants();

-- (b) production idle, research wants 160: it stops at its 80 (r1 40,
-- r2 40, nothing borrowed), 80 GPUs stay idle.
SELECT pg_temp.fresh();
SELECT pg_temp.nodes(40, 4, 64);
SELECT gangsched.add_team('research', 1), gangsched.add_team('production', 1);
SELECT gangsched.add_team('r1', 1, 'research'), gangsched.add_team('r2', 1, 'research'),
       gangsched.add_team('p1', 1, 'production'), gangsched.add_team('p2', 1, 'production');
SELECT gangsched.set_quota('research', 'main', 80, borrowing_limit_gpus => 0),
       gangsched.set_quota('production', 'main', 80);
SELECT gangsched.set_quota(t, 'main', 40) FROM unnest(ARRAY['r1', 'r2', 'p1', 'p2']) t;
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['r1', 'r2']) t, generate_series(1, 80);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 4. Kueue, KEP "Hierarchical Cohorts", user story 2                 */
/* ================================================================== */

-- Organisations with dedicated resources that must not borrow from each
-- other (borrowing limit 0 each), and one special queue at the top with
-- no quota and no borrowing limit that may use any organisation's unused
-- capacity. 160 GPUs: org1 80 (o1a, o1b 40 each), org2 80 (o2a, o2b);
-- special has no quota. org1 and special want 160 each, org2 is idle:
-- org1 keeps to its 80, special takes org2's idle 80.
SELECT pg_temp.fresh();
SELECT pg_temp.nodes(40, 4, 64);
SELECT gangsched.add_team('org1', 1), gangsched.add_team('org2', 1), gangsched.add_team('special', 1);
SELECT gangsched.add_team('o1a', 1, 'org1'), gangsched.add_team('o1b', 1, 'org1'),
       gangsched.add_team('o2a', 1, 'org2'), gangsched.add_team('o2b', 1, 'org2');
SELECT gangsched.set_quota('org1', 'main', 80, borrowing_limit_gpus => 0),
       gangsched.set_quota('org2', 'main', 80, borrowing_limit_gpus => 0);
SELECT gangsched.set_quota(t, 'main', 40) FROM unnest(ARRAY['o1a', 'o1b', 'o2a', 'o2b']) t;
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['o1a', 'o1b']) t, generate_series(1, 80);
SELECT count(gangsched.submit('special', 1, 1)) FROM generate_series(1, 160);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5. Volcano, HDRF design, children with complementary dominant       */
/*    resources                                                        */
/* ================================================================== */

-- n1 and n2 weight 1 (50% each); n2's children n2,1 and n2,2 weight 1.
-- n1 and n2,2 want GPUs only, n2,1 CPUs only. Published H-DRF answer:
-- n2,1's CPU share is rescaled to its sibling's, so n2 counts 50% and the
-- GPUs split between n1 and n2,2 half and half; n2,1 gets the CPUs nobody
-- else wants. 20 nodes of 4 GPUs and 16 CPUs (80 GPUs, 320 CPUs); jobs of
-- 1 GPU (no CPU) or 4 CPUs (no GPU); everyone wants more than all.
-- The rounds give the published answer: n1 40 GPUs, n2,2 40, n2,1 all
-- 320 CPUs, and so does team_shares' fair_share (H-DRF, the rounds' code):
-- once the GPUs are used up, n2,2 is blocked and n2 is compared on the
-- CPUs n2,1 still asks for, so n2,1's fair share is 1.0 (all 320 CPUs)
-- and n2's too (40 GPUs and 320 CPUs).
SELECT pg_temp.fresh();
SELECT pg_temp.nodes(20, 4, 16);
SELECT gangsched.add_team('n1', 1), gangsched.add_team('n2', 1);
SELECT gangsched.add_team('n2.1', 1, 'n2'), gangsched.add_team('n2.2', 1, 'n2');
SELECT count(gangsched.submit('n1', 1, 1)) FROM generate_series(1, 100);
SELECT count(gangsched.submit('n2.2', 1, 1)) FROM generate_series(1, 100);
SELECT count(gangsched.submit('n2.1', 1, 0, 4)) FROM generate_series(1, 100);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM pg_temp.shares();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 6. Volcano, HDRF design, a saturated node                          */
/* ================================================================== */

-- Four siblings n1..n4, weight 1: n1 and n2 want CPUs, n4 GPUs; n3 has
-- n3,1 (CPUs) and n3,2 (GPUs). Published H-DRF answer: the CPUs split
-- in thirds between n1, n2 and n3,1, the GPUs in halves between n3,2 and
-- n4 (naive DRF gives n3,2 two thirds of the GPUs and n4 one third). 20
-- nodes of 4 GPUs and 15 CPUs (80 GPUs, 300 CPUs); 1-GPU or 1-CPU jobs.
-- The rounds split the GPUs in halves as published, the CPUs 101/101/98
-- (n3,1 two jobs short of its third: job granularity, as H-DRF also
-- counts both resources until the CPUs run out, but a GPU job is 3.75
-- CPU jobs' worth of share, so after each of n3,2's n3 stands above n1
-- and n2 and n3,1 waits for them to catch up). fair_share is
-- the published H-DRF answer: 1/3 of the CPUs each for n1, n2 and n3,1;
-- once the CPUs are used up n3 is compared on its GPUs only, so n3,2 and
-- n4 get 0.5 each (40 GPUs), not the naive 25 / 55.
SELECT pg_temp.fresh();
SELECT pg_temp.nodes(20, 4, 15);
SELECT gangsched.add_team(t, 1) FROM unnest(ARRAY['n1', 'n2', 'n3', 'n4']) t;
SELECT gangsched.add_team('n3.1', 1, 'n3'), gangsched.add_team('n3.2', 1, 'n3');
SELECT count(gangsched.submit(t, 1, 0, 1)) FROM unnest(ARRAY['n1', 'n2', 'n3.1']) t, generate_series(1, 400);
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['n3.2', 'n4']) t, generate_series(1, 100);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM pg_temp.shares();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 7. Not from a peer: a borrowing limit caps the fair share          */
/* ================================================================== */

-- 80 GPUs; a (weight 3, children a1 and a2) and b (weight 1), everyone
-- wanting more than all. By weight a would get 60 and b 20, but a's quota
-- (nominal 20, borrowing limit 20) lets its subtree hold 40 at most: the
-- rounds give a 40 and b 40, and fair_share (H-DRF, limits per level)
-- says so: a 0.5 (a1 and a2 0.25 each), b 0.5.
SELECT pg_temp.fresh();
SELECT pg_temp.nodes(20, 4, 16);
SELECT gangsched.add_team('a', 3), gangsched.add_team('b', 1);
SELECT gangsched.add_team('a1', 1, 'a'), gangsched.add_team('a2', 1, 'a');
SELECT gangsched.set_quota('a', 'main', 20, borrowing_limit_gpus => 20);
SELECT count(gangsched.submit(t, 1, 1)) FROM unnest(ARRAY['a1', 'a2', 'b']) t, generate_series(1, 100);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.held();
SELECT * FROM pg_temp.shares();
SELECT * FROM gangsched.check_invariants();

SET client_min_messages = warning;
DROP EXTENSION gangsched CASCADE;
