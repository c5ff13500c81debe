-- Regression test (once a pending reproducer; the bug is fixed): priority preemption inside a team that is at
-- its nominal quota and may not borrow.
--
-- The bug, fixed: the order step (src/order.c, peek_guaranteed / peek_borrowing and
-- src/fair.c gs_borrow_pools) marks a job quota_blocked before any
-- preemption is tried. A team that uses all of its nominal quota and may
-- not borrow (borrowing_limit 0), or a non-preemptible job (which never
-- borrows), therefore cannot preempt the team's own lower-priority work:
-- the job is never handed to gs_preempt. Yet after the swap the team would
-- still be within its quota, which is exactly the priority trigger of docs/preemption.md
-- ("within one team, higher priority over lower").
--
-- Expected: in both cases below 'low' (priority 0) becomes preempting and
-- the priority-9 job nominated (trigger priority).
-- Before the fix: the priority-9 job stays pending with reason "team t holds 16
-- GPUs in pool main and may not borrow 8 more: nominal quota 16, borrowing
-- limit 0" (first case) / "...not being preemptible, may not borrow"
-- (second case); nothing is preempted.
--
-- A fix belongs in the order step: a job blocked by its own team's quota
-- should still be tried for priority preemption, with the quota check
-- counting the victims' resources as released (and only same-team,
-- lower-priority victims allowed). Then move this file to test/sql/ and
-- its expected output (43_preempt_priority_at_quota.out next to it) to
-- test/expected/.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';

CREATE FUNCTION pg_temp.start_all() RETURNS void
LANGUAGE sql AS $$
    SELECT gangsched.job_started(p.job, p.node)
      FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p
      JOIN gangsched.jobs j ON j.job = p.job WHERE j.state = 'placed' $$;

-- 1. team at its quota, borrowing limit 0
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('t');
SELECT gangsched.set_quota('t', 'main', 16, borrowing_limit_gpus => 0);
SELECT gangsched.submit('t', 1, 8, name => 'low', priority => 0),
       gangsched.submit('t', 1, 8, name => 'mid', priority => 5);
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('t', 1, 8, name => 'high', priority => 9);
SELECT preempted FROM gangsched.run_round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT e.detail->>'trigger' AS trigger FROM gangsched.events e WHERE e.kind = 'nominated';
SELECT * FROM gangsched.check_invariants();

-- 2. a non-preemptible high-priority job of a team at its quota
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('t');
SELECT gangsched.set_quota('t', 'main', 16);
SELECT gangsched.submit('t', 1, 8, name => 'low', priority => 0),
       gangsched.submit('t', 1, 8, name => 'mid', priority => 5);
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('t', 1, 8, name => 'high', priority => 9, preemptible => false);
SELECT preempted FROM gangsched.run_round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT e.detail->>'trigger' AS trigger FROM gangsched.events e WHERE e.kind = 'nominated';
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
