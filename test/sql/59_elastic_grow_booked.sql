-- Elastic gangs growing beside reservations and maintenance windows
-- (docs/elastic.md, docs/time.md): a grow's new workers obey the bookings
-- as a placement does: never onto the nodes of another team's active
-- reservation or of a maintenance window, nor onto nodes a booking will
-- soon take; onto its own team's reservation, yes. Then invariant 11 (an
-- elastic job holds whole replicas between its minimum and maximum) on a
-- row corrupted behind the API. Virtual time; ends with check_invariants()
-- empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
\set SHOW_CONTEXT never

-- 4 nodes of 8 GPUs in one rack
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 4) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SET gangsched.preemption = off;

-- b's reservation of n4 from 01:00, and a maintenance window on n3 from
-- 03:00 (within the default hour of guard from 02:00)
SELECT gangsched.add_reservation('rb', 'b', nodes => ARRAY['n4'],
                                 starts => '2030-01-01 01:00+00', ends => '2030-01-02 00:00+00') > 0 AS booked;
SELECT gangsched.add_maintenance('mw', nodes => ARRAY['n3'],
                                 starts => '2030-01-01 03:00+00', ends => '2030-01-01 04:00+00') > 0 AS booked;
-- a's elastic job of 4 one-node replicas, on n1 and n2 only (b holds n3
-- and n4 for now)
SELECT gangsched.submit('b', 2, 8, name => 'blocker') AS blocker \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'el') AS el \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.job_started(:el, node) FROM (SELECT DISTINCT node FROM gangsched.placements WHERE job = :el) n;
SELECT name, state, workers, replicas FROM gangsched.jobs WHERE job = :el;
SELECT DISTINCT node FROM gangsched.placements WHERE job IN (:blocker, :el) ORDER BY 1;

-- 01:00: the reservation is active; the blocker ends and frees n3 and n4.
-- el grows onto n3 (no booking admits it is active there yet, and el has
-- no limit: the window is more than the guard away), never onto n4
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.job_finished(:blocker, true);
SELECT placed FROM gangsched.run_round();
SELECT name, workers, replicas FROM gangsched.jobs WHERE job = :el;
SELECT DISTINCT node FROM gangsched.placements WHERE job = :el ORDER BY 1;
SELECT count(*) AS el_on_b_reservation FROM gangsched.placements WHERE job = :el AND node = 'n4';
SELECT * FROM gangsched.check_invariants();

-- a team's own reservation admits it: b's elastic job is placed on n4, the
-- one node left
SELECT gangsched.submit('b', 3, 8, min_replicas => 1, name => 'eb') AS eb \gset
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers FROM gangsched.jobs WHERE job = :eb;
SELECT DISTINCT node FROM gangsched.placements WHERE job = :eb ORDER BY 1;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:eb);
SELECT placed FROM gangsched.run_round();

-- 02:30, inside the maintenance guard of n3: el ends, b's 'hold' takes n1,
-- and a fresh elastic job of a runs on n2 and does not grow onto n3
-- although n3 is free
SET gangsched.clock_override = '2030-01-01 02:30:00+00';
SELECT gangsched.job_finished(:el, true);
SELECT gangsched.submit('b', 1, 8, name => 'hold') AS hold \gset
SELECT placed FROM gangsched.run_round();
SELECT DISTINCT node FROM gangsched.placements WHERE job = :hold;
SELECT gangsched.submit('a', 4, 8, min_replicas => 1, name => 'el2') AS el2 \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.job_started(:el2, node) FROM (SELECT DISTINCT node FROM gangsched.placements WHERE job = :el2) n;
SELECT placed FROM gangsched.run_round();
SELECT name, workers, replicas FROM gangsched.jobs WHERE job = :el2;
SELECT count(*) AS el2_on_maintenance_node FROM gangsched.placements WHERE job = :el2 AND node = 'n3';
SELECT * FROM gangsched.check_invariants();

-- invariant 11: a waiting elastic job asks for its whole gang; one that
-- asks for less, written behind the API (the check constraint allows it:
-- whole replicas, within the range), is reported. n3 and n4 are kept off
-- for it, n1 and n2 are held: it waits.
SELECT gangsched.submit('a', 4, 8, min_replicas => 2, name => 'waits') AS waits \gset
SELECT placed FROM gangsched.run_round();
SELECT name, state, workers, min_replicas, max_replicas FROM gangsched.jobs WHERE job = :waits;
UPDATE gangsched.gangs SET workers = 2 WHERE id = :waits;
SELECT invariant, job = :waits AS is_waits, detail FROM gangsched.check_invariants();
UPDATE gangsched.gangs SET workers = 4 WHERE id = :waits;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(:waits);

SELECT gangsched.job_finished(:el2, true);
SELECT gangsched.job_finished(:hold, true);
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
