-- Heartbeats: a node whose agent falls silent for longer than
-- gangsched.node_timeout (60 s here) goes down at the next round and its
-- jobs are requeued; its next heartbeat brings it back up. A node an
-- operator took down stays down whatever its agent sends.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SELECT current_setting('gangsched.node_timeout') AS node_timeout;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node(n, 'main', 'r1', 32, 256, 100, 8, 'a100', 80) FROM unnest(ARRAY['n1', 'n2']) n;
SELECT gangsched.add_team('t');
SELECT gangsched.node_heartbeat('n1');
SELECT gangsched.submit('t', 1, 8, name => 'on-n1');
SELECT placed FROM gangsched.run_round();
SELECT node FROM gangsched.placements;
-- n1 falls silent; n2 never sent a heartbeat and is left alone. The job
-- on n1 is requeued (an event; the round's requeued column counts start
-- timeouts and deadline kills) and placed again on n2 in the same round.
SET gangsched.clock_override = '2030-01-01 00:05:00+00';
SELECT requeued FROM gangsched.run_round();
SELECT name, state, down_by_timeout FROM gangsched.nodes ORDER BY name;
SELECT name, state, requeues FROM gangsched.jobs;
-- heartbeats resume: back up
SELECT gangsched.node_heartbeat('n1');
SELECT name, state, down_by_timeout FROM gangsched.nodes ORDER BY name;
-- silent again (and the job on n2, never started, passes its start
-- timeout: requeued 1); then an operator takes n1 down for maintenance: a
-- late heartbeat does not bring it back
SET gangsched.clock_override = '2030-01-01 00:10:00+00';
SELECT requeued FROM gangsched.run_round();
SELECT gangsched.set_node_state('n1', 'up');
SELECT gangsched.set_node_state('n1', 'down');
SELECT gangsched.node_heartbeat('n1');
SELECT name, state, down_by_timeout FROM gangsched.nodes ORDER BY name;
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
