-- Time limits (docs/time.md): submit's time_limit, the team's default and
-- maximum, gangsched.default_time_limit and gangsched.max_time_limit, and
-- their errors; a running job past its limit gets the preemption signal
-- with its grace, checkpoints and releases, and fails with reason 'time
-- limit'; one that does not release is killed at the deadline and fails
-- too (its work since the last checkpoint lost); a job that finishes on its
-- own while stopping ends as it says; jobs without a limit run on.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.default_grace = '1min';
SET gangsched.max_grace = '10min';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';

CREATE FUNCTION pg_temp.at(t text) RETURNS void
LANGUAGE sql AS $$ SELECT set_config('gangsched.clock_override', t, false) $$;

-- A round's summary without its duration.
CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, requeued int)
LANGUAGE sql AS $$ SELECT considered, placed, preempted, requeued FROM gangsched.run_round() $$;

-- The agent of every node of every placed job confirms it.
CREATE FUNCTION pg_temp.start_all() RETURNS TABLE (started text)
LANGUAGE sql AS $$
    SELECT string_agg(DISTINCT x.name, ',' ORDER BY x.name)
      FROM (SELECT j.name, gangsched.job_started(p.job, p.node)
              FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p
              JOIN gangsched.jobs j ON j.job = p.job
             WHERE j.state = 'placed') x $$;

CREATE FUNCTION pg_temp.id(job_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT job FROM gangsched.jobs WHERE name = job_name $$;

CREATE FUNCTION pg_temp.jobs() RETURNS TABLE (name text, state text, time_limit interval, placed_at timestamptz,
                                              preempt_deadline timestamptz, lost_gpu_seconds numeric,
                                              reason text, message text)
LANGUAGE sql AS $$
    SELECT name, state, time_limit, placed_at, preempt_deadline, lost_gpu_seconds, reason, message
      FROM gangsched.jobs ORDER BY job $$;

-- Run a statement; show 'ok' or its SQLSTATE, message and hint.
CREATE FUNCTION pg_temp.try(cmd text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    st  text;
    msg text;
    h   text;
BEGIN
    EXECUTE cmd;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, h = PG_EXCEPTION_HINT;
    RETURN st || ': ' || msg || ' (hint: ' || h || ')';
END $$;

SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80) FROM generate_series(1, 4) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');

/* ================================================================== */
/* 1. the limit in force, and its errors                               */
/* ================================================================== */
SELECT pg_temp.try($$SELECT gangsched.submit('a', 1, 8, time_limit => '-1 min')$$);
SELECT pg_temp.try($$SELECT gangsched.submit('a', 1, 8, time_limit => '0')$$);
SELECT pg_temp.try($$SELECT gangsched.submit('a', 1, 8, time_limit => '200 years')$$);
SET gangsched.max_time_limit = '2h';
SELECT pg_temp.try($$SELECT gangsched.submit('a', 1, 8, time_limit => '3h')$$);
SELECT pg_temp.try($$SELECT gangsched.set_team_time_limits('a', '5h', '4h')$$);
SELECT pg_temp.try($$SELECT gangsched.set_team_time_limits('a', '0', NULL)$$);
SELECT pg_temp.try($$SELECT gangsched.set_team_time_limits('nope', '1h', NULL)$$);
-- a's own maximum (4 hours) takes precedence over the setting; b has none
SELECT gangsched.set_team_time_limits('a', '30min', '4h');
SELECT name, default_time_limit, max_time_limit FROM gangsched.teams ORDER BY id;
SET gangsched.default_time_limit = '1h';
SELECT gangsched.submit('a', 1, 8, name => 'a_own', time_limit => '3h', priority => -1),
       gangsched.submit('a', 1, 8, name => 'a_default', priority => -1),
       gangsched.submit('b', 1, 8, name => 'b_default', priority => -1);
-- b: the setting's default is longer than the setting's maximum: cut to it
SET gangsched.default_time_limit = '3h';
SELECT gangsched.submit('b', 1, 8, name => 'b_cut', priority => -1);
RESET gangsched.default_time_limit;
RESET gangsched.max_time_limit;
SELECT gangsched.set_team_time_limits('a');
SELECT gangsched.submit('b', 1, 8, name => 'b_none', priority => -1);
SELECT name, time_limit FROM gangsched.jobs ORDER BY job;
SELECT kind, reason, detail FROM gangsched.events WHERE kind = 'team' ORDER BY id;
SELECT gangsched.cancel(job) FROM gangsched.jobs ORDER BY job;

/* ================================================================== */
/* 2. stopped at the limit: checkpoint and release                     */
/* ================================================================== */
-- ckpt: limit 10 minutes, grace 2 minutes; stubborn: limit 5 minutes, the
-- default grace (1 minute), never releases; free: no limit; quitter:
-- limit 5 minutes, finishes on its own while stopping.
SELECT gangsched.submit('a', 1, 8, name => 'ckpt', time_limit => '10min', grace => '2min'),
       gangsched.submit('a', 1, 8, name => 'stubborn', time_limit => '5min'),
       gangsched.submit('a', 1, 8, name => 'free'),
       gangsched.submit('b', 1, 8, name => 'quitter', time_limit => '5min');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
-- the agent's view: the limit and when it ends
SELECT w.job = pg_temp.id('ckpt') AS ckpt, w.action, w.time_limit, w.limit_at, w.limit_seconds_left
  FROM gangsched.node_work((SELECT node FROM gangsched.placements WHERE job = pg_temp.id('ckpt') LIMIT 1)) w;
SELECT pg_temp.at('2030-01-01 00:04:00+00');
SELECT gangsched.job_checkpointed(pg_temp.id('stubborn'));
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
-- five minutes in: stubborn and quitter are told to stop, with their grace
SELECT pg_temp.at('2030-01-01 00:05:00+00');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
SELECT w.action, w.deadline, w.seconds_left
  FROM gangsched.node_work((SELECT node FROM gangsched.placements WHERE job = pg_temp.id('stubborn') LIMIT 1)) w;
SELECT * FROM gangsched.check_invariants();
-- quitter finishes on its own before its deadline: it ends as it says
SELECT pg_temp.at('2030-01-01 00:05:30+00');
SELECT gangsched.job_finished(pg_temp.id('quitter'), true);
-- stubborn's deadline passes: killed, failed, with the work since its checkpoint lost
SELECT pg_temp.at('2030-01-01 00:06:00+00');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.jobs();
-- ckpt: told to stop at ten minutes; it checkpoints and releases
SELECT pg_temp.at('2030-01-01 00:10:00+00');
SELECT * FROM pg_temp.round();
SELECT name, state, preempt_deadline, reason FROM gangsched.jobs WHERE name = 'ckpt';
SELECT * FROM gangsched.check_invariants();
SELECT pg_temp.at('2030-01-01 00:11:00+00');
SELECT gangsched.job_checkpointed(pg_temp.id('ckpt'));
SELECT gangsched.job_released(pg_temp.id('ckpt'), true);
SELECT * FROM pg_temp.jobs();
SELECT * FROM gangsched.why_pending(pg_temp.id('ckpt'));
-- free runs on: a day later it is still running
SELECT pg_temp.at('2030-01-02 00:00:00+00');
SELECT * FROM pg_temp.round();
SELECT name, state FROM gangsched.jobs WHERE name = 'free';
-- the events of the stopped jobs
SELECT e.at, e.kind, g.name, e.reason, e.detail - 'deadline' AS detail
  FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job
 WHERE e.kind IN ('time limit', 'preempting', 'failed', 'finished', 'requeued') ORDER BY e.at, g.name, e.id;
-- the placed allocations end with reason 'time limit'
SELECT g.name, a.end_reason, upper(a.during) FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
 WHERE NOT upper_inf(a.during) ORDER BY a.id;
-- analysts: requested against used time (the three that ended, per team)
SELECT team, jobs, stopped_at_limit, round(requested_gpu_hours::numeric, 3) AS requested_gpu_hours,
       round(used_gpu_hours::numeric, 3) AS used_gpu_hours, round(used_fraction::numeric, 3) AS used_fraction,
       round(p50_used_fraction::numeric, 3) AS p50_used_fraction
  FROM gangsched.time_limit_use('2030-01-01 00:00+00', '2030-01-03 00:00+00');
SELECT pg_temp.try($$SELECT * FROM gangsched.time_limit_use('2030-01-03 00:00+00', '2030-01-01 00:00+00')$$) LIKE '22%' AS bad_window_refused;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
