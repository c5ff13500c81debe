-- Advance reservations (docs/time.md): add_reservation books whole nodes
-- of a pool, a topology domain or a node list for a team from `starts`
-- until `ends`; overlapping bookings of a node are refused (23P01). Before
-- the start other jobs use the nodes only when their time limit ends by
-- then; from the start only the team's jobs and jobs that name the
-- reservation; at the end the nodes return to everyone. why_pending says
-- which reservation keeps a job off; the view and reservation_usage()
-- show the bookings; operators book, portals submit into their own
-- team's reservations only, analysts read.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.default_grace = '1min';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';

CREATE FUNCTION pg_temp.at(t text) RETURNS void
LANGUAGE sql AS $$ SELECT set_config('gangsched.clock_override', t, false) $$;

CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, requeued int)
LANGUAGE sql AS $$ SELECT considered, placed, requeued FROM gangsched.run_round() $$;

CREATE FUNCTION pg_temp.id(job_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT job FROM gangsched.jobs WHERE name = job_name $$;

-- Which jobs hold each node, '-' for an idle node.
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

-- A statement's error as SQLSTATE: message, or 'ok'.
CREATE FUNCTION pg_temp.try(q text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

CREATE FUNCTION pg_temp.events() RETURNS TABLE (at timestamptz, kind text, reason text, name text)
LANGUAGE sql AS $$
    SELECT at, kind, reason, detail ->> 'name' FROM gangsched.events
     WHERE kind IN ('reservation', 'maintenance') ORDER BY id $$;

SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_pool('side', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT count(gangsched.add_node('n' || i, 'main', 'r2', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(3, 4) i;
SELECT gangsched.add_node('s1', 'side', 'r9', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_team('a'), gangsched.add_team('b');

/* ================================================================== */
/* 1. booking: targets, conflicts, refusals, the view, drop            */
/* ================================================================== */
-- ra: rack r1 (n1, n2) for team a from 02:00 to 04:00
SELECT gangsched.add_reservation('ra', 'a', domain => 'r1',
                                 starts => '2030-01-01 02:00+00', ends => '2030-01-01 04:00+00') > 0 AS ra;
-- a node list that overlaps ra in time and on n2: refused, with the detail
SELECT gangsched.add_reservation('rb', 'b', nodes => ARRAY['n2', 'n3'],
                                 starts => '2030-01-01 03:00+00', ends => '2030-01-01 05:00+00');
-- 16 GPUs of pool main: n1 and n2 are booked then, so n3 and n4
SELECT gangsched.add_reservation('rb', 'b', pool => 'main', gpus => 16,
                                 starts => '2030-01-01 03:00+00', ends => '2030-01-01 05:00+00') > 0 AS rb;
-- nothing of pool main is left from 03:30 to 04:30; after 05:00 n3 is
SELECT pg_temp.try($$SELECT gangsched.add_reservation('rc', 'b', pool => 'main', gpus => 8,
                     starts => '2030-01-01 03:30+00', ends => '2030-01-01 04:30+00')$$);
SELECT gangsched.add_reservation('rc', 'b', pool => 'main', gpus => 8,
                                 starts => '2030-01-01 05:00+00', ends => '2030-01-01 06:00+00') > 0 AS rc;
-- back to back is no overlap: n1 and n2 from 04:00
SELECT gangsched.add_reservation('rd', 'b', domain => 'r1',
                                 starts => '2030-01-01 04:00+00', ends => '2030-01-01 04:30+00') > 0 AS rd;
SELECT name, kind, team, target, nodes, gpus, starts, ends, state FROM gangsched.reservations ORDER BY starts, name;
-- refusals, nothing booked
SELECT pg_temp.try($$SELECT gangsched.add_reservation('rc', 'a', pool => 'side', starts => '2030-01-02', ends => '2030-01-03')$$) AS same_name,
       pg_temp.try($$SELECT gangsched.add_reservation('re', 'nobody', pool => 'side', starts => '2030-01-02', ends => '2030-01-03')$$) AS unknown_team,
       pg_temp.try($$SELECT gangsched.add_reservation('re', 'a', pool => 'side', starts => '2030-01-03', ends => '2030-01-02')$$) AS empty_window;
SELECT pg_temp.try($$SELECT gangsched.add_reservation('re', 'a', starts => '2030-01-02', ends => '2030-01-03')$$) AS no_target,
       pg_temp.try($$SELECT gangsched.add_reservation('re', 'a', pool => 'side', nodes => ARRAY['s1'], starts => '2030-01-02', ends => '2030-01-03')$$) AS both,
       pg_temp.try($$SELECT gangsched.add_reservation('re', 'a', pool => 'side', gpus => 9, starts => '2030-01-02', ends => '2030-01-03')$$) AS too_many_gpus;
SELECT pg_temp.try($$SELECT gangsched.add_reservation('re', 'a', nodes => ARRAY['s9'], starts => '2030-01-02', ends => '2030-01-03')$$) AS unknown_node,
       pg_temp.try($$SELECT gangsched.add_reservation('re', 'a', domain => 'r7', starts => '2030-01-02', ends => '2030-01-03')$$) AS empty_domain,
       pg_temp.try($$SELECT gangsched.add_reservation('re', 'a', pool => 'side', starts => '2029-01-02', ends => '2029-01-03')$$) AS past,
       pg_temp.try($$SELECT gangsched.add_reservation('re', 'a', pool => 'side', starts => NULL, ends => '2030-01-03')$$) AS no_start;
SELECT count(*) AS bookings FROM gangsched.bookings;
-- drop: a future one is removed; an unknown name is refused
SELECT gangsched.drop_reservation('rd');
SELECT gangsched.drop_reservation('rd');
SELECT gangsched.drop_reservation('rc');
SELECT name, state FROM gangsched.reservations ORDER BY name;
SELECT * FROM pg_temp.events();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. before the start: only jobs that end in time                     */
/* ================================================================== */
-- (s1, the other pool's node, takes no work until part 6)
SELECT gangsched.set_node_state('s1', 'draining');
-- fill (team b, no limit) takes n3 and n4 (n1 and n2 are booked for a from
-- 02:00, and it has no limit); rb (n3, n4 for b from 03:00) is b's own
SELECT gangsched.submit('b', 2, 8, name => 'fill');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
-- b_short (limit 1 hour: gone by 01:01) may use ra's nodes now; b_long
-- (3 hours) and b_open (no limit) may not; a_open (team a, no limit) may;
-- a_named names ra: it waits for the start
SELECT gangsched.submit('b', 1, 8, name => 'b_short', time_limit => '1h'),
       gangsched.submit('b', 1, 8, name => 'b_long', time_limit => '3h'),
       gangsched.submit('b', 1, 8, name => 'b_open'),
       gangsched.submit('a', 1, 8, name => 'a_open'),
       gangsched.submit('a', 1, 8, name => 'a_named', time_limit => '1h', reservation => 'ra');
SELECT * FROM gangsched.why_pending(pg_temp.id('b_long'));
SELECT * FROM gangsched.why_pending(pg_temp.id('b_open'));
SELECT * FROM gangsched.why_pending(pg_temp.id('a_named'));
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.why_pending(pg_temp.id('b_long'));
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. from the start: the team's jobs and jobs that name it            */
/* ================================================================== */
-- b_short finishes at 00:50. At 02:00 ra starts: a_named goes to the free
-- node of r1; b_tiny (10 minutes) may not use it now, nor b_long and
-- b_open (rb, n3 and n4 from 03:00, is team b's own, but fill holds them)
SELECT pg_temp.at('2030-01-01 00:50:00+00');
SELECT gangsched.job_finished(pg_temp.id('b_short'), true);
SELECT pg_temp.at('2030-01-01 02:00:00+00');
SELECT gangsched.submit('b', 1, 8, name => 'b_tiny', time_limit => '10min');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.why_pending(pg_temp.id('b_tiny'));
SELECT name, state FROM gangsched.reservations ORDER BY name;
SELECT * FROM gangsched.check_invariants();
-- a job of team b may name ra when an operator submits it (this session),
-- and then runs there: it waits for a_named's node
SELECT gangsched.submit('b', 1, 8, name => 'b_named', time_limit => '1h', reservation => 'ra');
-- the jobs view names the reservation a job asked for
SELECT name, reservation FROM gangsched.jobs WHERE name IN ('b_named', 'a_named', 'b_tiny') ORDER BY name;
SELECT pg_temp.at('2030-01-01 02:30:00+00');
SELECT gangsched.job_finished(pg_temp.id('a_named'), true);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM gangsched.check_invariants();
-- naming what cannot be named
SELECT pg_temp.try($$SELECT gangsched.submit('a', 1, 8, reservation => 'nothing')$$) AS unknown;
-- a job that could never run in the reservation it names (ra: n1 and n2,
-- 16 GPUs): refused at submit, with nothing created; its minimum decides
SELECT count(*) AS jobs_before FROM gangsched.jobs \gset
SELECT pg_temp.try($$SELECT gangsched.submit('a', 3, 8, reservation => 'ra')$$) AS larger_than_reservation;
SELECT pg_temp.try($$SELECT gangsched.submit('a', 1, 16, reservation => 'ra')$$) AS worker_larger_than_its_nodes;
SELECT count(*) = :jobs_before AS nothing_created FROM gangsched.jobs;
SELECT gangsched.submit('a', 4, 8, min_replicas => 2, name => 'a_elastic_in_ra', reservation => 'ra') > 0 AS minimum_fits;
SELECT gangsched.cancel(pg_temp.id('a_elastic_in_ra'));

/* ================================================================== */
/* 4. at the end: back to everyone; drop while active; usage           */
/* ================================================================== */
-- 04:00: ra ends and n1, n2 return to everyone: b_long and b_open, first
-- in line, take them
SELECT pg_temp.at('2030-01-01 03:30:00+00');
SELECT gangsched.job_finished(pg_temp.id('b_named'), true);
SELECT gangsched.cancel(pg_temp.id('a_open'));
SELECT pg_temp.at('2030-01-01 04:00:00+00');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT name, state FROM gangsched.reservations ORDER BY name;
-- rb is active (03:00 to 05:00): dropped now, it ends now and stays
SELECT gangsched.drop_reservation('rb');
SELECT name, ends, state FROM gangsched.reservations ORDER BY name;
SELECT * FROM pg_temp.events();
SELECT name, team, state, booked_gpu_hours, used_gpu_hours, round(used_fraction::numeric, 4) AS used_fraction,
       other_gpu_hours
  FROM gangsched.reservation_usage();
SELECT * FROM gangsched.check_invariants();
-- an ended reservation cannot be named; dropping it removes it
SELECT pg_temp.try($$SELECT gangsched.submit('a', 1, 8, reservation => 'ra')$$) AS ended;
SELECT gangsched.drop_reservation('ra');
SELECT count(*) AS bookings FROM gangsched.bookings;

/* ================================================================== */
/* 5. invariant 10 sees an allocation inside a reservation            */
/* ================================================================== */
-- behind the API: a booking of n3 (held by fill, team b) for team a, begun
-- before fill's allocation
INSERT INTO gangsched.bookings (name, team_id, target, node_ids, gpus, starts, ends, created_at, started)
SELECT 'bad', t.id, 'nodes n3', ARRAY[n.id], 8, '2029-12-31', '2030-01-02', '2029-12-31', true
  FROM gangsched.teams t, gangsched.nodes n WHERE t.name = 'a' AND n.name = 'n3';
SELECT invariant, node, detail FROM gangsched.check_invariants();
DELETE FROM gangsched.bookings WHERE name = 'bad';
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 6. roles: operators book, portals submit into their team's only     */
/* ================================================================== */
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'gs58\_%' ORDER BY rolname DESC LOOP
        EXECUTE format('DROP OWNED BY %I', r);
        EXECUTE format('DROP ROLE %I', r);
    END LOOP;
END $$;
CREATE ROLE gs58_op;
CREATE ROLE gs58_pa;
CREATE ROLE gs58_pb;
CREATE ROLE gs58_an;
GRANT gangsched_operator TO gs58_op;
GRANT gangsched_analyst TO gs58_an;
SELECT gangsched.add_member('gs58_pa', 'a'), gangsched.add_member('gs58_pb', 'b');
SELECT gangsched.set_node_state('s1', 'up');
SET ROLE gs58_op;
SELECT gangsched.add_reservation('rt', 'a', pool => 'side', starts => '2030-01-01 05:00+00',
                                 ends => '2030-01-01 06:00+00') > 0 AS rt;
RESET ROLE;
SET ROLE gs58_pa;
SELECT pg_temp.try($$SELECT gangsched.add_reservation('rp', 'a', pool => 'side', starts => '2030-01-02', ends => '2030-01-03')$$) AS portal_adds,
       pg_temp.try($$SELECT gangsched.drop_reservation('rt')$$) AS portal_drops;
SELECT gangsched.submit('a', 1, 8, name => 'pa_in_rt', time_limit => '30min', reservation => 'rt') > 0 AS own_team;
RESET ROLE;
SET ROLE gs58_pb;
SELECT pg_temp.try($$SELECT gangsched.submit('b', 1, 8, reservation => 'rt')$$) AS other_team;
SELECT pg_temp.try($$SELECT name FROM gangsched.reservations$$) AS portal_reads;
RESET ROLE;
SET ROLE gs58_an;
SELECT name, team, state FROM gangsched.reservations ORDER BY name;
SELECT name, booked_gpu_hours FROM gangsched.reservation_usage() ORDER BY name;
SELECT pg_temp.try($$SELECT gangsched.drop_reservation('rt')$$) AS analyst_drops;
RESET ROLE;
SET ROLE gs58_op;
SELECT gangsched.drop_reservation('rt');
RESET ROLE;
SELECT * FROM gangsched.check_invariants();
-- a team with a reservation is not removed until it is dropped
SELECT gangsched.add_team('c');
SELECT gangsched.add_reservation('rc2', 'c', pool => 'side', starts => '2030-01-02', ends => '2030-01-03') > 0 AS rc2;
SELECT gangsched.remove_team('c');
SELECT gangsched.drop_reservation('rc2');
SELECT gangsched.remove_team('c');

/* ================================================================== */
/* 7. an inner team's reservation is its subtree's                     */
/* ================================================================== */
-- (the live jobs are cancelled first; the clock is 04:00)
SELECT count(gangsched.cancel(job)) AS cancelled FROM gangsched.jobs
 WHERE state NOT IN ('finished', 'failed', 'cancelled', 'expired');
SELECT gangsched.add_team('p'), gangsched.add_team('p1', parent => 'p'), gangsched.add_team('q');
SELECT gangsched.add_reservation('rp', 'p', pool => 'side', starts => '2030-01-01 04:00+00',
                                 ends => '2030-01-01 05:00+00') > 0 AS rp;
SELECT gangsched.submit('q', 1, 8, name => 'q_job', pool => 'side', time_limit => '10min'),
       gangsched.submit('p1', 1, 8, name => 'p1_job', pool => 'side', time_limit => '10min');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM gangsched.why_pending(pg_temp.id('q_job'));
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'gs58\_%' ORDER BY rolname DESC LOOP
        EXECUTE format('DROP OWNED BY %I', r);
        EXECUTE format('DROP ROLE %I', r);
    END LOOP;
END $$;
