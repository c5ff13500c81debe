-- Regression test (the bug is fixed; it was in src/schedule.c): a preemptible job within its
-- team's nominal quota in a full reserved pool is the first candidate that
-- does not fit, so the starvation guard reserves capacity for it there, and
-- it is never tried again as borrowed work elsewhere: it waits while an
-- opportunistic pool that could run it now stays empty. Work conservation
-- wants it to run on the idle capacity (a job that is not first in line
-- does: see 31_quotas, scenario 5, job 'pre').
--
-- Before the fix, in gs_decide (src/schedule.c) the guard's branch ended with 'continue'
-- before gs_order_failed(), so the order step never queued the job for its
-- borrowing try (fair order: phase 2; priority order: the retry). Expected
-- below: the job runs in spot, borrowed, and the guard is left to whatever
-- still waits.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';

CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, note text)
LANGUAGE sql AS $$ SELECT r.considered, r.placed, r.preempted, r.note FROM gangsched.run_round() r $$;

-- Reserved pool p: 8 GPUs, all of them beta's guaranteed work (beta's
-- nominal quota is 8: nothing to reclaim, so preemption cannot help).
-- Opportunistic pool spot: 8 GPUs, empty. alpha: nominal quota 4 in p.
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT gangsched.add_pool('spot', 'opportunistic');
SELECT gangsched.add_node('p1', 'p', 'r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_node('s1', 'spot', 'r2', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team('alpha');
SELECT gangsched.add_team('beta');
SELECT gangsched.set_quota('alpha', 'p', 4);
SELECT gangsched.set_quota('beta', 'p', 8);
SELECT count(gangsched.submit('beta', 1, 1, pool => 'p')) FROM generate_series(1, 8);
SELECT * FROM pg_temp.round();
SELECT gangsched.submit('alpha', 1, 1, name => 'a1');

-- fair order (preemption on: it finds no victim)
SELECT position, name, would_borrow, fits_now FROM gangsched.queue;
SELECT * FROM pg_temp.round();
SELECT j.name, j.state, j.borrowed, p.node FROM gangsched.jobs j LEFT JOIN gangsched.placements p ON p.job = j.job
 WHERE j.team = 'alpha';
SELECT * FROM gangsched.check_invariants();

-- priority order: the same
SELECT gangsched.cancel((SELECT job FROM gangsched.jobs WHERE name = 'a1'));
SELECT gangsched.submit('alpha', 1, 1, name => 'a2');
SET gangsched.queue_order = 'priority';
SELECT * FROM pg_temp.round();
SELECT j.name, j.state, j.borrowed, p.node FROM gangsched.jobs j LEFT JOIN gangsched.placements p ON p.job = j.job
 WHERE j.team = 'alpha' AND j.state <> 'cancelled';
SELECT * FROM gangsched.check_invariants();
RESET gangsched.queue_order;

DROP EXTENSION gangsched;
