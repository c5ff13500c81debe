-- Maintenance windows (docs/time.md): add_maintenance books nodes for no
-- job. Ahead of the window no job whose time limit (with its grace) runs
-- past its start is placed there, and jobs without a limit are not placed
-- there within gangsched.maintenance_guard of the start ('draining'
-- event); at the start the nodes go draining then down (their jobs
-- requeued, as set_node_state(..., 'down') does) and at the end back to
-- the state they had at the start. why_pending says so at each step.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.default_grace = '1min';
SET gangsched.maintenance_guard = '1h';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';

CREATE FUNCTION pg_temp.at(t text) RETURNS void
LANGUAGE sql AS $$ SELECT set_config('gangsched.clock_override', t, false) $$;

CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, requeued int)
LANGUAGE sql AS $$ SELECT considered, placed, requeued FROM gangsched.run_round() $$;

CREATE FUNCTION pg_temp.id(job_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT job FROM gangsched.jobs WHERE name = job_name $$;

CREATE FUNCTION pg_temp.nodes() RETURNS TABLE (node text, state text, jobs text)
LANGUAGE sql AS $$
    SELECT n.name, n.state, COALESCE((SELECT string_agg(DISTINCT g.name, ',' ORDER BY g.name)
                                        FROM gangsched.placements p JOIN gangsched.gangs g ON g.id = p.job
                                       WHERE p.node = n.name), '-')
      FROM gangsched.nodes n ORDER BY n.name $$;

CREATE FUNCTION pg_temp.live() RETURNS TABLE (name text, state text, reason text)
LANGUAGE sql AS $$
    SELECT name, state, reason FROM gangsched.jobs
     WHERE state NOT IN ('finished', 'failed', 'cancelled', 'expired') ORDER BY job $$;

CREATE FUNCTION pg_temp.try(q text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- the window's events and the nodes' state changes, from event id `since`
CREATE FUNCTION pg_temp.events(since bigint DEFAULT 0) RETURNS TABLE (at timestamptz, kind text, reason text, what text)
LANGUAGE sql AS $$
    SELECT at, kind, reason, COALESCE(detail ->> 'node', detail ->> 'name') FROM gangsched.events
     WHERE kind IN ('reservation', 'maintenance', 'node_state') AND id > since ORDER BY id $$;

SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 3) i;
SELECT gangsched.add_team('t');
-- n2 is down before the window (and stays down after it)
SELECT gangsched.set_node_state('n2', 'down');

/* ================================================================== */
/* 1. the window; what overlaps it is refused                          */
/* ================================================================== */
SELECT gangsched.add_maintenance('mw', domain => 'r1',
                                 starts => '2030-01-01 03:00+00', ends => '2030-01-01 04:00+00') > 0 AS mw;
SELECT name, kind, team, target, nodes, gpus, starts, ends, state FROM gangsched.reservations;
SELECT pg_temp.try($$SELECT gangsched.add_reservation('r', 't', nodes => ARRAY['n3'],
                     starts => '2030-01-01 03:59+00', ends => '2030-01-01 05:00+00')$$) AS overlapping_reservation,
       pg_temp.try($$SELECT gangsched.add_maintenance('mw2', nodes => ARRAY['n1'],
                     starts => '2030-01-01 02:00+00', ends => '2030-01-01 03:00:01+00')$$) AS overlapping_window;
SELECT pg_temp.try($$SELECT gangsched.submit('t', 1, 8, reservation => 'mw')$$) AS naming_it;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. ahead of the window: limits that run past it; no limit near it   */
/* ================================================================== */
-- 00:00: j_long (3 hours, ends 03:01 with its grace) may not go there;
-- j_open (no limit) may: the guard begins at 02:00
SELECT gangsched.submit('t', 1, 8, name => 'j_long', time_limit => '3h'),
       gangsched.submit('t', 1, 8, name => 'j_open');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM gangsched.why_pending(pg_temp.id('j_long'));
SELECT * FROM gangsched.check_invariants();
-- 02:00: the drain begins (an event; the nodes stay up for jobs that end
-- in time)
SELECT pg_temp.at('2030-01-01 02:00:00+00');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.events();
-- 02:10: j_open2 (no limit) is inside the guard; j_fit (30 minutes, ends
-- 02:41) is placed
SELECT pg_temp.at('2030-01-01 02:10:00+00');
SELECT gangsched.submit('t', 1, 8, name => 'j_open2'),
       gangsched.submit('t', 1, 8, name => 'j_fit', time_limit => '30min');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM gangsched.why_pending(pg_temp.id('j_open2'));
SELECT * FROM gangsched.why_pending(pg_temp.id('j_long'));
SELECT * FROM gangsched.check_invariants();
-- with a guard of 30 minutes (from 02:30) the window does not keep
-- j_open2 off now: it is first in line for n3 (why_pending simulates the
-- next round under the session's settings)
SET gangsched.maintenance_guard = '30min';
SELECT * FROM gangsched.why_pending(pg_temp.id('j_open2'));
SET gangsched.maintenance_guard = '1h';

/* ================================================================== */
/* 3. the start: draining, then down; the end: back as they were        */
/* ================================================================== */
SELECT pg_temp.at('2030-01-01 02:45:00+00');
SELECT gangsched.job_finished(pg_temp.id('j_fit'), true);
SELECT max(id) AS since FROM gangsched.events \gset
SELECT pg_temp.at('2030-01-01 03:00:00+00');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.events(:since);
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.why_pending(pg_temp.id('j_open'));
SELECT name, state FROM gangsched.reservations;
SELECT * FROM gangsched.check_invariants();
SELECT max(id) AS since FROM gangsched.events \gset
SELECT pg_temp.at('2030-01-01 04:00:00+00');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.events(:since);
SELECT name, state FROM gangsched.reservations;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 4. dropped while it lasts: the nodes come back at once              */
/* ================================================================== */
-- j_open, placed on n3 before mw2 was booked, is requeued at its start
SELECT gangsched.add_maintenance('mw2', nodes => ARRAY['n3'],
                                 starts => '2030-01-01 04:30+00', ends => '2030-01-01 06:00+00') > 0 AS mw2;
SELECT max(id) AS since FROM gangsched.events \gset
SELECT pg_temp.at('2030-01-01 04:30:00+00');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT pg_temp.at('2030-01-01 04:45:00+00');
SELECT gangsched.drop_reservation('mw2');
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.events(:since);
SELECT name, ends, state FROM gangsched.reservations ORDER BY name;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5. invariant 10 sees an allocation inside a maintenance window      */
/* ================================================================== */
-- behind the API: a window over n1, begun before its allocation
INSERT INTO gangsched.bookings (name, team_id, target, node_ids, gpus, starts, ends, created_at, started)
SELECT 'bad', NULL, 'nodes n1', ARRAY[n.id], 8, '2030-01-01 03:30+00', '2030-01-02', '2030-01-01 03:30+00', true
  FROM gangsched.nodes n WHERE n.name = 'n1';
SELECT invariant, node, detail FROM gangsched.check_invariants();
DELETE FROM gangsched.bookings WHERE name = 'bad';
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
