-- Regression test (once a pending reproducer; the bug is fixed): why_pending names the constraint that holds
-- the job back, as docs/placement.md says ("which constraint holds the job back now,
-- in words a user can act on (quota, fairness order, no topology domain
-- with room, locality, ...)").
--
-- The bug, fixed (src/placement.c explain() / gs_why_text(), src/round.c why_pending):
-- a job that can only use some nodes (required dataset locality, a GPU
-- model) and finds them busy while other nodes are free is told "no node:
-- no eligible node has room for one worker now (the nodes that could hold
-- one are busy, reserved, draining or down)": neither the dataset nor the
-- model is named, so the user cannot tell that relaxing locality or the
-- model would let it run. A job that cannot fit while nodes are down or
-- draining is told "capacity: ... the most free in any eligible pool is
-- room for 1", as if waiting for running jobs would help, when it cannot
-- fit until those nodes are back.
-- Expected: a detail that names the dataset ('web') and how many nodes
-- cache it; one that names the model ('h100'); one that says nodes are
-- down or draining. The checks below test only that the words are there.
-- Then move this file to test/sql/ and its expected output
-- (26_why_pending_constraints.out next to it) to test/expected/.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', 'r1', 32, 256, 100, 4, m, 80))
  FROM (VALUES ('a1', 'a100'), ('a2', 'a100'), ('a3', 'a100'), ('h1', 'h100')) v(n, m);
SELECT gangsched.add_team('t');
SELECT gangsched.cache_dataset('a3', 'web');
-- a3 (the only node caching 'web') and h1 (the only h100) are busy
SELECT gangsched.submit('t', 1, 4, gpu_model => 'a100', name => 'on-a3');
SELECT gangsched.set_node_state(n, 'draining') FROM unnest(ARRAY['a1', 'a2', 'h1']) n;
SELECT placed FROM gangsched.run_round();
SELECT gangsched.set_node_state(n, 'up') FROM unnest(ARRAY['a1', 'a2', 'h1']) n;
SELECT gangsched.submit('t', 1, 4, gpu_model => 'h100', name => 'on-h1');
SELECT placed FROM gangsched.run_round();
SELECT j.name, p.node FROM gangsched.placements p JOIN gangsched.jobs j ON j.job = p.job GROUP BY 1, 2 ORDER BY 1;
-- a1 and a2 are free
SELECT gangsched.submit('t', 1, 4, dataset => 'web', locality => 'required', name => 'needs-web');
SELECT gangsched.submit('t', 1, 4, gpu_model => 'h100', name => 'needs-h100');
SELECT bool_or(detail ~ 'web') AS names_the_dataset FROM gangsched.why_pending(3);
SELECT bool_or(detail ~ 'h100') AS names_the_model FROM gangsched.why_pending(4);
-- a gang of three 4-GPU a100 workers while a1 is down: a2 and a3 (busy)
-- are all that is up; no amount of finishing work lets it fit
SELECT gangsched.cancel(3);
SELECT gangsched.cancel(4);
SELECT gangsched.set_node_state('a1', 'down');
SELECT gangsched.submit('t', 3, 4, gpu_model => 'a100', name => 'needs-a1');
SELECT bool_or(detail ~ '(down|draining)') AS names_the_nodes FROM gangsched.why_pending(5);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
