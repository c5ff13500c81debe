-- Regression test (once a pending reproducer; the bug is fixed): a round that changes nothing writes nothing.
--
-- The bug, fixed (src/round.c, write_decisions): while a job is first in line and
-- does not fit, every round inserts a 'reserved' event for it, even when
-- the reservation is the same as in the round before. With the background
-- worker running a round every gangsched.round_interval (1 s by default), a
-- large gang waiting for an hour writes 3,600 identical events; two rounds
-- in a row do not leave the state unchanged.
-- Expected: a 'reserved' event when a job becomes the reserved one (or its
-- reason changes), none for a repeated identical reservation.
-- Before the fix: one 'reserved' event per round (4 after the four rounds below,
-- instead of 1; the second round changes the events table).
-- Fix: write the event only when the reserved job or its reason differs
-- from the job's last 'reserved' event (e.g. compare with gangs.reason, as
-- the round already does for waiting reasons). Then move this file to
-- test/sql/ and its expected output (25_reserved_event_once.out next to it)
-- to test/expected/.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', 'r1', 32, 256, 100, 4, 'a100', 80)) FROM (VALUES ('n1'), ('n2')) v(n);
SELECT gangsched.add_team('t');
-- job 1 takes n1; job 2 needs both nodes and is first in line
SELECT gangsched.submit('t', 1, 4, name => 'small');
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('t', 2, 4, name => 'big');
SELECT placed, note FROM gangsched.run_round();
SELECT count(*) AS events_before FROM gangsched.events \gset
-- three more rounds, a minute apart, nothing changes
SET gangsched.clock_override = '2030-01-01 00:01:00+00';
SELECT placed, note FROM gangsched.run_round();
SET gangsched.clock_override = '2030-01-01 00:02:00+00';
SELECT placed, note FROM gangsched.run_round();
SELECT placed, note FROM gangsched.run_round();
SELECT count(*) - :events_before AS new_events FROM gangsched.events;
SELECT kind, count(*) FROM gangsched.events WHERE job = 2 GROUP BY kind ORDER BY kind;
-- when the reservation does change (the big gang is placed), it is logged
SELECT gangsched.job_finished(1, true);
SELECT placed, note FROM gangsched.run_round();
SELECT kind, count(*) FROM gangsched.events WHERE job = 2 GROUP BY kind ORDER BY kind;
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
