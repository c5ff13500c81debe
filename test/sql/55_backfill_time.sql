-- Backfill with time (docs/time.md): from the time limits of the running
-- jobs the round computes when and where the starvation guard's job can
-- start; a later job may use the capacity kept for it only if its own
-- limit (with its grace) ends before that expected start. A short job is
-- backfilled into the kept capacity, a longer one and one without a limit
-- are refused; why_pending and the queue view say so; the reserved job
-- starts no later than expected. When a job it waits for has no limit the
-- expected start is unknown and the guard keeps capacity as before.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.default_grace = '1min';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';

CREATE FUNCTION pg_temp.at(t text) RETURNS void
LANGUAGE sql AS $$ SELECT set_config('gangsched.clock_override', t, false) $$;

CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, requeued int, note text)
LANGUAGE sql AS $$ SELECT considered, placed, preempted, requeued, note FROM gangsched.run_round() $$;

CREATE FUNCTION pg_temp.start_all() RETURNS TABLE (started text)
LANGUAGE sql AS $$
    SELECT string_agg(DISTINCT x.name, ',' ORDER BY x.name)
      FROM (SELECT j.name, gangsched.job_started(p.job, p.node)
              FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p
              JOIN gangsched.jobs j ON j.job = p.job
             WHERE j.state = 'placed') x $$;

CREATE FUNCTION pg_temp.id(job_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT job FROM gangsched.jobs WHERE name = job_name $$;

-- Which job holds each node, '-' for an idle node.
CREATE FUNCTION pg_temp.nodes() RETURNS TABLE (node text, jobs text)
LANGUAGE sql AS $$
    SELECT n.name, COALESCE((SELECT string_agg(DISTINCT g.name, ',' ORDER BY g.name)
                               FROM gangsched.placements p JOIN gangsched.gangs g ON g.id = p.job
                              WHERE p.node = n.name), '-')
      FROM gangsched.nodes n ORDER BY n.name $$;

CREATE FUNCTION pg_temp.live() RETURNS TABLE (name text, state text, time_limit interval, placed_at timestamptz, reason text)
LANGUAGE sql AS $$
    SELECT name, state, time_limit, placed_at, reason FROM gangsched.jobs
     WHERE state NOT IN ('finished', 'failed', 'cancelled', 'expired') ORDER BY job $$;

CREATE FUNCTION pg_temp.queue() RETURNS TABLE ("position" int, name text, fits_now bool, expected_start timestamptz)
LANGUAGE sql AS $$ SELECT "position", name, fits_now, expected_start FROM gangsched.queue ORDER BY "position" $$;

SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 5) i;
SELECT gangsched.add_team('t');

/* ================================================================== */
/* 1. the reserved job's expected start, and backfill into its capacity */
/* ================================================================== */
-- long (2 nodes, limit 2 hours) and short (1 node, limit 1 hour) run;
-- n4 and n5 are idle.
SELECT gangsched.submit('t', 2, 8, name => 'long', time_limit => '2h'),
       gangsched.submit('t', 1, 8, name => 'short', time_limit => '1h');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
-- big needs all five nodes: when short lets go (01:01, its limit and
-- grace) three are free, when long does (02:01) all five: it is expected
-- to start at 02:01
SELECT pg_temp.at('2030-01-01 00:10:00+00');
SELECT gangsched.submit('t', 5, 8, name => 'big');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.live();
SELECT * FROM pg_temp.queue();
SELECT * FROM gangsched.why_pending(pg_temp.id('big'));
SELECT kind, reason FROM gangsched.events WHERE job = pg_temp.id('big') AND kind = 'reserved' ORDER BY id;
SELECT * FROM gangsched.check_invariants();

-- fit (limit 1 hour: ends at 01:11 with its grace) may use n4; late
-- (limit 3 hours) and open (no limit) would delay big
SELECT gangsched.submit('t', 1, 8, name => 'fit', time_limit => '1h'),
       gangsched.submit('t', 1, 8, name => 'late', time_limit => '3h'),
       gangsched.submit('t', 1, 8, name => 'open');
SELECT * FROM gangsched.why_pending(pg_temp.id('fit'));
SELECT * FROM gangsched.why_pending(pg_temp.id('late'));
SELECT * FROM gangsched.why_pending(pg_temp.id('open'));
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM pg_temp.queue();
SELECT * FROM gangsched.why_pending(pg_temp.id('late'));
SELECT * FROM gangsched.check_invariants();

-- 01:00: short is stopped for its limit and releases; n3 is kept for big.
-- fit finishes. A second short job (30 minutes) backfills at 01:05.
SELECT pg_temp.at('2030-01-01 01:00:00+00');
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('2030-01-01 01:00:30+00');
SELECT gangsched.job_released(pg_temp.id('short'), true);
SELECT pg_temp.at('2030-01-01 01:04:00+00');
SELECT gangsched.job_finished(pg_temp.id('fit'), true);
SELECT gangsched.submit('t', 1, 8, name => 'fit2', time_limit => '30min');
SELECT pg_temp.at('2030-01-01 01:05:00+00');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.queue();
SELECT * FROM gangsched.check_invariants();

-- fit2 finishes at 01:35; long is stopped at 02:00 and releases at 02:00:10:
-- big starts then, before its expected start
SELECT pg_temp.at('2030-01-01 01:35:00+00');
SELECT gangsched.job_finished(pg_temp.id('fit2'), true);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT pg_temp.at('2030-01-01 02:00:00+00');
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('2030-01-01 02:00:10+00');
SELECT gangsched.job_released(pg_temp.id('long'), false);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. the jobs it waits for have no limit: no expected start           */
/* ================================================================== */
-- big has no limit: late, first in line now, gets the guard as without
-- limits (no expected start)
SELECT pg_temp.at('2030-01-01 02:10:00+00');
SELECT * FROM pg_temp.start_all();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.queue();
SELECT * FROM gangsched.why_pending(pg_temp.id('late'));
SELECT * FROM gangsched.why_pending(pg_temp.id('open'));
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. gangsched.backfill_with_time = off: the guard ignores the limits  */
/* ================================================================== */
-- big finishes at 02:20, late and open start, open finishes: late
-- (limit 3 hours) runs alone. wide
-- needs all five nodes: with the limits it is expected to start when late
-- lets go (05:21), and quick (30 minutes) may use the kept capacity.
-- With the setting off the guard keeps the four free nodes as it does
-- without limits: quick waits, and nothing says when wide starts
SELECT pg_temp.at('2030-01-01 02:20:00+00');
SELECT gangsched.job_finished(pg_temp.id('big'), true);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SELECT gangsched.job_finished(pg_temp.id('open'), true);
SELECT * FROM pg_temp.live();
SELECT gangsched.submit('t', 5, 8, name => 'wide'),
       gangsched.submit('t', 1, 8, name => 'quick', time_limit => '30min');
SET gangsched.backfill_with_time = off;
SELECT * FROM gangsched.why_pending(pg_temp.id('quick'));
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM pg_temp.queue();
SELECT * FROM gangsched.check_invariants();
-- on again (the default): quick is backfilled into the kept capacity
RESET gangsched.backfill_with_time;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM pg_temp.queue();
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
