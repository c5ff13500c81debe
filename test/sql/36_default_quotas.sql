-- Default quotas govern CPUs and memory (issue 10): set_quota's cpus and
-- mem_gb left NULL are proportional to the team's GPU share of the pool
-- (gpus x pool CPUs / pool GPUs, from the registered nodes), so a team
-- cannot block other teams' guaranteed GPU work with CPU-heavy guaranteed
-- work; 'Infinity' passed for cpus / mem_gb leaves them ungoverned (the
-- old behaviour). Preemption is off: this is about quota rules only.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
-- agents confirm nothing here; placed jobs must not be requeued meanwhile
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;

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

/* ================================================================== */
/* 1. Default: CPUs and memory in proportion to the GPU quota          */
/* ================================================================== */

-- Pool p: two nodes of 8 GPUs, 64 CPUs, 512 GB (16 GPUs, 128 CPUs,
-- 1024 GB). A and B: 8 GPUs each, cpus / mem_gb left NULL, so each is
-- entitled to 8 x 128 / 16 = 64 CPUs and 8 x 1024 / 16 = 512 GB.
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'p', 'r1', 64, 512, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('A');
SELECT gangsched.add_team('B');
SELECT gangsched.set_quota('A', 'p', 8);
SELECT gangsched.set_quota('B', 'p', 8);
SELECT team, pool, nominal_gpus, nominal_cpus, nominal_mem_gb, nominal_net_gbps FROM gangsched.team_shares;

-- Submit: a non-preemptible job asking for more CPUs (or memory) than A's
-- proportional 64 CPUs (512 GB) could never run as guaranteed work, and
-- non-preemptible work never borrows: refused (53S05). The same job
-- preemptible is admitted (it may borrow B's idle CPUs).
SELECT pg_temp.try($$SELECT gangsched.submit('A', 2, 0, cpus => 48, preemptible => false, name => 'too-big')$$);
SELECT pg_temp.try($$SELECT gangsched.submit('A', 2, 0, mem_gb => 300, preemptible => false, name => 'too-big')$$);
SELECT pg_temp.try($$SELECT gangsched.submit('A', 2, 0, cpus => 48, name => 'big-preemptible')$$);
SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE name = 'big-preemptible';

-- A submits CPU-heavy work: four non-preemptible CPU-only jobs of 32 CPUs
-- (128 CPUs, the whole pool) and one preemptible one.
SELECT count(gangsched.submit('A', 1, 0, cpus => 32, preemptible => false, name => 'a' || i)) FROM generate_series(1, 4) i;
SELECT gangsched.submit('A', 1, 0, cpus => 32, name => 'a5');
SELECT position, name, team, would_borrow, fits_now FROM gangsched.queue;
SELECT * FROM pg_temp.round();
-- a1, a2 run within A's 64 CPUs (guaranteed); a3, a4 would take A beyond
-- them and, not being preemptible, may not borrow: they wait. a5 is
-- preemptible and runs on borrowed CPUs (B's idle quota, lendable).
SELECT name, state, borrowed, reason FROM gangsched.jobs WHERE team = 'A' ORDER BY job;
-- (why_pending counts what A holds now, a5's borrowed 32 CPUs included)
SELECT reason, detail FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'a3'));

-- B's guaranteed GPU job: a whole node's 8 GPUs, 16 CPUs. A holds 96 of
-- the 128 CPUs, so one node keeps at least 32 CPUs and its 8 GPUs: placed.
SELECT gangsched.submit('B', 1, 8, cpus => 16, preemptible => false, name => 'b1');
SELECT * FROM pg_temp.round();
SELECT name, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT team, nominal_cpus, used_gpus, used_cpus, borrowed_gpus FROM gangsched.team_shares;
SELECT * FROM gangsched.check_invariants();

-- The proportional amounts come from the registered nodes, not the up
-- ones: a node going down does not move them.
SELECT gangsched.set_node_state('n2', 'draining');
SELECT team, nominal_gpus, nominal_cpus, nominal_mem_gb FROM gangsched.team_shares;
SELECT gangsched.set_node_state('n2', 'up');

-- An explicit amount is used as given; a lending limit above the
-- proportional amount is refused like one above an explicit amount.
SELECT gangsched.set_quota('B', 'p', 8, cpus => 96, mem_gb => 100);
SELECT team, nominal_cpus, nominal_mem_gb FROM gangsched.team_shares WHERE team = 'B';
SELECT pg_temp.try($$SELECT gangsched.set_quota('B', 'p', 8, lending_limit_cpus => 65)$$);
SELECT pg_temp.try($$SELECT gangsched.set_quota('B', 'p', 8, lending_limit_mem_gb => 513)$$);
SELECT gangsched.set_quota('B', 'p', 8, lending_limit_cpus => 64, lending_limit_mem_gb => 512);
-- only cpus and mem_gb take 'Infinity'
SELECT pg_temp.try($$SELECT gangsched.set_quota('B', 'p', 8, net_gbps => 'Infinity')$$);
SELECT pg_temp.try($$SELECT gangsched.set_quota('B', 'p', 'Infinity')$$);
SELECT pg_temp.try($$SELECT gangsched.set_quota('B', 'p', 8, cpus => '-Infinity')$$);
SELECT pg_temp.try($$SELECT gangsched.set_quota('B', 'p', 8, borrowing_limit_cpus => 'Infinity')$$);

-- A pool without GPUs: proportional to nothing, so CPUs and memory stay
-- ungoverned there.
SELECT gangsched.add_pool('cpu', 'reserved');
SELECT gangsched.add_node('c1', 'cpu', 'r2', 128, 1024, 100, 0, NULL, NULL);
SELECT gangsched.set_quota('A', 'cpu', 0);
SELECT team, pool, nominal_gpus, nominal_cpus, nominal_mem_gb FROM gangsched.team_shares WHERE pool = 'cpu';
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. cpus => 'Infinity': CPUs not governed, the old behaviour         */
/* ================================================================== */

-- The same scenario with A's quota cpus => 'Infinity': all four
-- non-preemptible CPU jobs run as guaranteed work and take every CPU of
-- the pool; B's guaranteed GPU job then finds no node with CPUs left.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'p', 'r1', 64, 512, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('A');
SELECT gangsched.add_team('B');
SELECT gangsched.set_quota('A', 'p', 8, cpus => 'Infinity');
SELECT gangsched.set_quota('B', 'p', 8);
SELECT team, pool, nominal_gpus, nominal_cpus, nominal_mem_gb FROM gangsched.team_shares;
SELECT detail->'cpus' AS cpus FROM gangsched.events WHERE kind = 'quota' ORDER BY id LIMIT 1;
SELECT pg_temp.try($$SELECT gangsched.submit('A', 2, 0, cpus => 48, preemptible => false, name => 'big')$$);
SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE name = 'big';
SELECT count(gangsched.submit('A', 1, 0, cpus => 32, preemptible => false, name => 'a' || i)) FROM generate_series(1, 4) i;
SELECT gangsched.submit('A', 1, 0, cpus => 32, name => 'a5');
SELECT * FROM pg_temp.round();
SELECT gangsched.submit('B', 1, 8, cpus => 16, preemptible => false, name => 'b1');
SELECT * FROM pg_temp.round();
SELECT name, state, borrowed FROM gangsched.jobs WHERE state <> 'cancelled' ORDER BY job;
SELECT reason, detail FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'b1'));
SELECT team, nominal_cpus, used_gpus, used_cpus, borrowed_gpus FROM gangsched.team_shares;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
