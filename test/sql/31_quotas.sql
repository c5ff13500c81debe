-- Quotas: work conservation (a team alone borrows all idle capacity, its
-- work beyond nominal quota marked borrowed everywhere), lending limits
-- (non-lendable idle quota stays free for its owner), borrowing limits (a
-- team stops at nominal + limit, per resource), and non-preemptible work
-- (never borrows, never lands in an opportunistic pool). Preemption is off:
-- these scenarios are about quota rules only. Each scenario starts on a
-- fresh extension and ends with no invariant violated.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
-- agents confirm nothing here; placed jobs must not be requeued meanwhile
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;

-- A round's summary without its duration.
CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, note text)
LANGUAGE sql AS $$ SELECT r.considered, r.placed, r.preempted, r.note FROM gangsched.run_round() r $$;

-- Run a statement; show 'ok' or its SQLSTATE, message and detail.
CREATE FUNCTION pg_temp.try(cmd text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    d text;
BEGIN
    EXECUTE cmd;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || SQLERRM || COALESCE(' (' || NULLIF(d, '') || ')', '');
END $$;

-- GPUs held now per pool and whether borrowed, from the three places that
-- record it: jobs, placements (one row per worker and device) and the
-- current allocations (one row per worker).
CREATE FUNCTION pg_temp.held() RETURNS TABLE (pool text, borrowed bool, jobs bigint, placement_rows bigint, allocations bigint)
LANGUAGE sql AS $$
    SELECT p.name, a.borrowed,
           (SELECT count(*) FROM gangsched.jobs j
             WHERE j.state = 'placed' AND j.borrowed = a.borrowed
               AND EXISTS (SELECT FROM gangsched.allocations x JOIN gangsched.nodes y ON y.id = x.node_id
                            WHERE x.job = j.job AND upper_inf(x.during) AND y.pool_id = p.id)),
           (SELECT count(*) FROM gangsched.placements pl JOIN gangsched.nodes y ON y.name = pl.node
             WHERE y.pool_id = p.id AND pl.borrowed = a.borrowed),
           count(*)
      FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id = a.node_id JOIN gangsched.pools p ON p.id = n.pool_id
     WHERE upper_inf(a.during)
     GROUP BY p.id, p.name, a.borrowed ORDER BY p.name, a.borrowed $$;

-- Free whole GPUs per pool (devices with no slice held).
CREATE FUNCTION pg_temp.free_gpus() RETURNS TABLE (pool text, free_gpus bigint)
LANGUAGE sql AS $$
    SELECT p.name, count(*) FILTER (WHERE NOT EXISTS (SELECT FROM gangsched.held_slots h
                                                        WHERE h.node_id = d.node_id AND h.slot / 8 = d.idx))
      FROM gangsched.devices d JOIN gangsched.nodes n ON n.id = d.node_id JOIN gangsched.pools p ON p.id = n.pool_id
     GROUP BY p.name ORDER BY p.name $$;

/* ================================================================== */
/* 1. Work conservation: a team alone borrows all idle capacity        */
/* ================================================================== */

-- Reserved pool p: 16 GPUs (2 nodes x 8); opportunistic pool spot: 8 GPUs.
-- alpha has a nominal quota of 4 GPUs in p, beta 8 (idle, all lendable).
-- alpha alone submits 24 one-GPU preemptible jobs: all of them run. The
-- first 4 in queue order fit its nominal quota (guaranteed); the 20 others
-- are borrowed: 12 in p (beta's idle 8 and p's 4 that are nobody's quota)
-- and 8 in spot (alpha has no quota there: all of it borrowed).
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT gangsched.add_pool('spot', 'opportunistic');
SELECT count(gangsched.add_node('p' || i, 'p', 'r1', 64, 512, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_node('s1', 'spot', 'r2', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team('alpha');
SELECT gangsched.add_team('beta');
SELECT gangsched.set_quota('alpha', 'p', 4);
SELECT gangsched.set_quota('beta', 'p', 8);
SELECT count(gangsched.submit('alpha', 1, 1, cpus => 2, mem_gb => 8)) FROM generate_series(1, 24);

-- Guaranteed first (would_borrow false), then the borrowing ones.
SELECT would_borrow, count(*), min(job), max(job), bool_and(fits_now) AS all_fit
  FROM gangsched.queue GROUP BY would_borrow ORDER BY would_borrow;
SELECT * FROM pg_temp.round();
SELECT state, borrowed, count(*), min(job), max(job) FROM gangsched.jobs GROUP BY state, borrowed ORDER BY state, borrowed;
-- jobs, placements and allocations agree, per pool
SELECT * FROM pg_temp.held();
SELECT * FROM pg_temp.free_gpus();
-- beta lends its idle 8: p's 12 borrowed GPUs come first from the 4 that
-- are nobody's quota (16 - 4 - 8), then 8 from beta's idle quota.
SELECT team, pool, nominal_gpus, used_gpus, borrowed_gpus, lent_gpus FROM gangsched.team_shares ORDER BY pool, team;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. Lending limits                                                   */
/* ================================================================== */

-- Pool p: 16 GPUs. alpha nominal 4; beta nominal 8 but lends at most 2 of
-- its idle quota: 8 - 2 = 6 GPUs stay free for beta. alpha submits 16
-- one-GPU jobs: 4 guaranteed + 6 borrowed (p's 4 unassigned GPUs and 2 of
-- beta's), 6 wait with a reason naming the held-back quota.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT count(gangsched.add_node('p' || i, 'p', 'r1', 64, 512, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('alpha');
SELECT gangsched.add_team('beta');
SELECT gangsched.set_quota('alpha', 'p', 4);
SELECT gangsched.set_quota('beta', 'p', 8, lending_limit_gpus => 2);
SELECT count(gangsched.submit('alpha', 1, 1, name => 'a' || i)) FROM generate_series(1, 16) i;
SELECT * FROM pg_temp.round();
SELECT state, borrowed, count(*), string_agg(name, ' ' ORDER BY job) AS jobs FROM gangsched.jobs GROUP BY state, borrowed ORDER BY state, borrowed;
SELECT * FROM pg_temp.free_gpus();
SELECT * FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'a11'));
SELECT DISTINCT reason FROM gangsched.jobs WHERE state = 'pending';
-- 6 borrowed in p, 4 of them from capacity that is nobody's quota: beta
-- lends 2, exactly its lending limit.
SELECT team, nominal_gpus, lending_limit_gpus, used_gpus, borrowed_gpus, lent_gpus FROM gangsched.team_shares ORDER BY team;
-- A second round places nothing more.
SELECT * FROM pg_temp.round();
-- A job larger than p less what beta keeps (16 - 6 = 10 GPUs) could never
-- run: refused at submit.
SELECT pg_temp.try($$SELECT gangsched.submit('alpha', 11, 1)$$);
SELECT * FROM gangsched.check_invariants();

-- The held-back capacity is there for beta: six jobs of its own run at
-- once, within its nominal quota.
SELECT count(gangsched.submit('beta', 1, 1, name => 'b' || i)) FROM generate_series(1, 6) i;
SELECT * FROM pg_temp.round();
SELECT team, state, borrowed, count(*) FROM gangsched.jobs GROUP BY team, state, borrowed ORDER BY team, state, borrowed;
SELECT * FROM pg_temp.free_gpus();
-- beta holds 6: its idle 2 is what it lends (alpha's 6 borrowed = 4
-- unassigned + 2 of beta's).
SELECT team, used_gpus, borrowed_gpus, lent_gpus FROM gangsched.team_shares ORDER BY team;
SELECT * FROM gangsched.check_invariants();

-- beta's jobs finish and the lending limit is lifted: alpha's 6 waiting
-- jobs borrow beta's whole idle quota.
SELECT gangsched.job_finished(job, true) FROM gangsched.jobs WHERE team = 'beta' ORDER BY job;
SELECT gangsched.set_quota('beta', 'p', 8);
SELECT * FROM pg_temp.round();
SELECT team, state, borrowed, count(*) FROM gangsched.jobs WHERE state <> 'finished'
 GROUP BY team, state, borrowed ORDER BY team, state, borrowed;
SELECT * FROM pg_temp.free_gpus();
SELECT team, used_gpus, borrowed_gpus, lent_gpus FROM gangsched.team_shares ORDER BY team;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. Borrowing limits                                                 */
/* ================================================================== */

-- Pool p: 16 GPUs, nobody else. alpha: nominal 4, borrowing limit 2 (at
-- most 6 GPUs). Jobs a1..a5 (1 GPU), a6 (2 GPUs), a7 (1 GPU). a1..a4 are
-- guaranteed; a5 borrows (5); a6 would make 7 > 6: refused by the limit;
-- a7 borrows the 6th. 10 GPUs stay idle.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT count(gangsched.add_node('p' || i, 'p', 'r1', 64, 512, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('alpha');
SELECT gangsched.set_quota('alpha', 'p', 4, borrowing_limit_gpus => 2);
SELECT count(gangsched.submit('alpha', 1, 1, name => 'a' || i)) FROM generate_series(1, 5) i;
SELECT gangsched.submit('alpha', 1, 2, name => 'a6');
SELECT gangsched.submit('alpha', 1, 1, name => 'a7');
SELECT * FROM pg_temp.round();
SELECT job, name, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.why_pending(6);
SELECT * FROM pg_temp.free_gpus();
SELECT team, nominal_gpus, borrowing_limit_gpus, used_gpus, borrowed_gpus FROM gangsched.team_shares;
-- More than nominal + limit in one job can never run: refused at submit.
SELECT pg_temp.try($$SELECT gangsched.submit('alpha', 1, 7)$$);
SELECT * FROM gangsched.check_invariants();

-- One guaranteed job finishes: alpha holds 5 and a6 (5 + 2 = 7 > 6) still
-- waits. One borrowed job finishes too: alpha holds 4, and a6 runs as
-- borrowed work (4 + 2 = 6 > 4 nominal).
SELECT gangsched.job_finished(1, true);
SELECT * FROM pg_temp.round();
SELECT * FROM gangsched.why_pending(6);
SELECT gangsched.job_finished(5, true);
SELECT * FROM pg_temp.round();
SELECT job, name, state, borrowed FROM gangsched.jobs WHERE state <> 'finished' ORDER BY job;
SELECT team, used_gpus, borrowed_gpus FROM gangsched.team_shares;
SELECT * FROM gangsched.check_invariants();

-- Limits are per resource: gamma's quota governs CPUs (nominal 8,
-- borrowing limit 4: at most 12 CPUs). CPU-only jobs of 4 CPUs: two
-- guaranteed, one borrowed, the fourth refused by the CPU limit.
SELECT gangsched.add_team('gamma');
SELECT gangsched.set_quota('gamma', 'p', 0, cpus => 8, borrowing_limit_cpus => 4);
SELECT count(gangsched.submit('gamma', 1, 0, cpus => 4, name => 'g' || i)) FROM generate_series(1, 4) i;
SELECT * FROM pg_temp.round();
SELECT name, state, borrowed FROM gangsched.jobs WHERE team = 'gamma' ORDER BY job;
SELECT * FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'g4'));
SELECT team, nominal_cpus, used_gpus, used_cpus, borrowed_gpus FROM gangsched.team_shares WHERE team = 'gamma';
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 4. Non-preemptible work never borrows                               */
/* ================================================================== */

-- Reserved pool p: 16 GPUs; opportunistic pool spot: 8 GPUs, all idle.
-- alpha: nominal 4 in p. Four non-preemptible 1-GPU jobs fill its quota
-- (guaranteed); a fifth waits, with 12 GPUs idle in p and 8 in spot; a
-- preemptible job submitted after it runs (borrowed), so capacity is not
-- what stops the fifth.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT gangsched.add_pool('spot', 'opportunistic');
SELECT count(gangsched.add_node('p' || i, 'p', 'r1', 64, 512, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_node('s1', 'spot', 'r2', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team('alpha');
SELECT gangsched.add_team('beta');
SELECT gangsched.set_quota('alpha', 'p', 4);
SELECT count(gangsched.submit('alpha', 1, 1, preemptible => false, name => 'np' || i)) FROM generate_series(1, 5) i;
SELECT gangsched.submit('alpha', 1, 1, name => 'pre1', pool => 'p');
SELECT position, name, preemptible, would_borrow, fits_now, reason FROM gangsched.queue ORDER BY position;
SELECT * FROM pg_temp.round();
SELECT name, preemptible, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.why_pending(5);
SELECT reason FROM gangsched.jobs WHERE job = 5;
SELECT * FROM pg_temp.free_gpus();
SELECT * FROM gangsched.check_invariants();

-- It is refused at submit where it could never run: beyond its team's
-- nominal quota, for a team without quota, and in an opportunistic pool.
SELECT pg_temp.try($$SELECT gangsched.submit('alpha', 1, 5, preemptible => false)$$);
SELECT pg_temp.try($$SELECT gangsched.submit('beta', 1, 1, preemptible => false)$$);
SELECT pg_temp.try($$SELECT gangsched.submit('alpha', 1, 1, preemptible => false, pool => 'spot')$$);

/* ================================================================== */
/* 5. Non-preemptible work never lands in an opportunistic pool        */
/* ================================================================== */

-- Reserved pool p: 8 GPUs; opportunistic spot: 8 GPUs. beta (no quota)
-- fills p with borrowed work. alpha (nominal 4 in p, holding nothing)
-- submits a non-preemptible 1-GPU job: it is within quota, but p is full;
-- spot is empty and it must not go there. It waits (preemption is off). A
-- preemptible job of alpha's submitted after it goes to spot.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT gangsched.add_pool('spot', 'opportunistic');
SELECT gangsched.add_node('p1', 'p', 'r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_node('s1', 'spot', 'r2', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team('alpha');
SELECT gangsched.add_team('beta');
SELECT gangsched.set_quota('alpha', 'p', 4);
SELECT count(gangsched.submit('beta', 1, 1, pool => 'p', name => 'b' || i)) FROM generate_series(1, 8) i;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.free_gpus();
SELECT gangsched.submit('alpha', 1, 1, preemptible => false, name => 'np');
SELECT * FROM pg_temp.round();
SELECT name, state, reason FROM gangsched.jobs WHERE name = 'np';
SELECT * FROM gangsched.why_pending(9);
SELECT * FROM pg_temp.free_gpus();
SELECT gangsched.submit('alpha', 1, 1, name => 'pre');
SELECT * FROM pg_temp.round();
SELECT j.name, j.state, j.borrowed, p.node FROM gangsched.jobs j LEFT JOIN gangsched.placements p ON p.job = j.job
 WHERE j.team = 'alpha' ORDER BY j.job;
-- a second round changes nothing: np is still not in spot
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.free_gpus();
SELECT count(*) AS nonpreemptible_in_opportunistic
  FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
  JOIN gangsched.nodes n ON n.id = a.node_id JOIN gangsched.pools p ON p.id = n.pool_id
 WHERE NOT g.preemptible AND p.kind = 'opportunistic';
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
