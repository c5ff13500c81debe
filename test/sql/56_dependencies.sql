-- Job dependencies (issue 16): submit(after, after_mode). A waiting job is
-- pending outside the queue; it enters the queue when every listed job has
-- finished successfully (ok) or ended (any), with its wait and queue
-- timeout counted from then; it fails at once, with the reason, when a job
-- it waits for under ok fails, is cancelled or expires — and so do the
-- jobs that wait for it. Refusals at submit; a portal; invariant 8 fires
-- on a corrupted row. Virtual time; ends with check_invariants() empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
CREATE FUNCTION pg_temp.advance(minutes int) RETURNS text
LANGUAGE sql AS $$ SELECT set_config('gangsched.clock_override', (gangsched.now() + make_interval(mins => minutes))::text, false) $$;
-- start every placed job on its node
CREATE FUNCTION pg_temp.start_placed() RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(gangsched.job_started(p.job, p.node))
      FROM (SELECT DISTINCT j.job, pl.node FROM gangsched.jobs j JOIN gangsched.placements pl ON pl.job = j.job
             WHERE j.state = 'placed') p $$;

SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');

/* ------------------------------------------------------------------ */
/* 1. a chain: train -> (evaluate, export after any end, report)       */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('a', 1, 8, name => 'train') AS train \gset
SELECT gangsched.submit('a', 1, 1, name => 'evaluate', after => ARRAY[:train]) AS eval \gset
SELECT gangsched.submit('a', 1, 1, name => 'export', after => ARRAY[:eval], queue_timeout => '30min') AS export \gset
SELECT gangsched.submit('a', 1, 1, name => 'cleanup', after => ARRAY[:eval], after_mode => 'any') AS cleanup \gset
-- duplicates are dropped, the list is sorted
SELECT gangsched.submit('a', 1, 1, name => 'report', after => ARRAY[:eval, :train, :eval]) AS report \gset
SELECT j.name, j.state, j.reason, g.after_jobs = ARRAY[:train, :eval]::bigint[] AS sorted, g.after_mode
  FROM gangsched.jobs j JOIN gangsched.gangs g ON g.id = j.job WHERE j.name = 'report';
SELECT j.name, j.state, j.reason FROM gangsched.jobs j ORDER BY j.job;
-- waiting jobs follow the queue, without a position
SELECT position, name, fits_now, reason FROM gangsched.queue;
SELECT * FROM gangsched.why_pending(:export);
-- a round never places or expires a waiting job
SELECT placed, expired FROM gangsched.run_round();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT pg_temp.start_placed();

-- train finishes: evaluate enters the queue, its wait counted from now;
-- report still waits for evaluate
SELECT pg_temp.advance(60);
SELECT gangsched.job_finished(:train, true);
SELECT j.name, j.state, j.reason, extract(epoch FROM g.queued_at - g.submitted_at) / 60 AS minutes_waiting_for_deps
  FROM gangsched.jobs j JOIN gangsched.gangs g ON g.id = j.job ORDER BY j.job;
SELECT kind, job = :eval AS is_eval, reason FROM gangsched.events WHERE kind = 'queued' ORDER BY id;
SELECT position, name FROM gangsched.queue;
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start_placed();

-- export's 30-minute queue timeout did not run while it waited
SELECT pg_temp.advance(45);
SELECT expired FROM gangsched.run_round();
SELECT name, state FROM gangsched.jobs WHERE name = 'export';

-- evaluate fails: export and report (ok) fail at once, with the reason;
-- cleanup (any) enters the queue
SELECT gangsched.job_finished(:eval, false, 'exit code 3');
SELECT name, state, reason FROM gangsched.jobs ORDER BY job;
SELECT kind, name, e.reason FROM gangsched.events e JOIN gangsched.jobs j ON j.job = e.job
 WHERE e.kind IN ('failed', 'queued') ORDER BY e.id;

/* ------------------------------------------------------------------ */
/* 2. a chain of 50 fails in one statement; cancel of a waiting job    */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('a', 1, 8, name => 'head') AS head \gset
DO $$
DECLARE
    prev bigint := (SELECT max(id) FROM gangsched.gangs);
BEGIN
    FOR i IN 1..50 LOOP
        prev := gangsched.submit('a', 1, 1, name => 'link' || i, after => ARRAY[prev]);
    END LOOP;
END $$;
SELECT count(*) AS waiting FROM gangsched.gangs WHERE waiting_for IS NOT NULL;
SELECT gangsched.cancel(:head);
SELECT state, count(*) FROM gangsched.jobs WHERE name LIKE 'link%' GROUP BY state;
SELECT reason FROM gangsched.jobs WHERE name = 'link1';
SELECT reason FROM gangsched.jobs WHERE name = 'link50';
SELECT count(*) AS still_waiting FROM gangsched.gangs WHERE waiting_for IS NOT NULL;

-- cancelling a waiting job: it stops waiting; its own dependents fail
SELECT gangsched.submit('a', 1, 8, name => 'long') AS long \gset
SELECT gangsched.submit('a', 1, 1, name => 'w1', after => ARRAY[:long]) AS w1 \gset
SELECT gangsched.submit('a', 1, 1, name => 'w2', after => ARRAY[:w1]) AS w2 \gset
SELECT gangsched.cancel(:w1);
SELECT j.name, j.state, j.reason, g.waiting_for FROM gangsched.jobs j JOIN gangsched.gangs g ON g.id = j.job
 WHERE j.name IN ('w1', 'w2') ORDER BY j.job;

/* ------------------------------------------------------------------ */
/* 3. an expired dependency, and one that had ended before the submit  */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('b', 1, 8, name => 'b-big', queue_timeout => '1min') AS bbig \gset
SELECT gangsched.submit('b', 2, 8, name => 'b-huge', queue_timeout => '1min') AS bhuge \gset
SELECT gangsched.submit('b', 1, 1, name => 'b-after', after => ARRAY[:bhuge]) AS bafter \gset
SELECT pg_temp.advance(2);
SELECT expired FROM gangsched.run_round();
SELECT name, state, reason FROM gangsched.jobs WHERE team = 'b' ORDER BY job;
-- ended before the submit: finished counts at once, failed refuses under ok
SELECT gangsched.submit('a', 1, 1, name => 'after-done', after => ARRAY[:train]) AS afterdone \gset
SELECT name, state, reason FROM gangsched.jobs WHERE job = :afterdone;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT gangsched.submit('a', 1, 1, after => ARRAY[:eval]);
SELECT gangsched.submit('a', 1, 1, after => ARRAY[:head]);
-- after_mode any accepts ended jobs of any kind: nothing to wait for
SELECT gangsched.submit('a', 1, 1, name => 'any-ended', after => ARRAY[:eval, :head], after_mode => 'any') AS anyended \gset
SELECT name, state, reason FROM gangsched.jobs WHERE job = :anyended;

/* ------------------------------------------------------------------ */
/* 4. refusals at submit: nothing is created                           */
/* ------------------------------------------------------------------ */
SELECT count(*) AS jobs_before FROM gangsched.gangs \gset
-- another team's job reads exactly as an unknown one
SELECT gangsched.submit('b', 1, 1, after => ARRAY[:long]);
SELECT gangsched.submit('b', 1, 1, after => ARRAY[987654]);
-- a job that does not exist yet (so no cycle can form)
SELECT gangsched.submit('a', 1, 1, after => ARRAY[(SELECT last_value + 1 FROM gangsched.gangs_id_seq)]);
SELECT gangsched.submit('a', 1, 1, after => ARRAY[:long], after_mode => 'afterok');
SELECT gangsched.submit('a', 1, 1, after => ARRAY[:long], after_mode => NULL);
SELECT gangsched.submit('a', 1, 1, after => ARRAY[:long, NULL]);
SELECT gangsched.submit('a', 1, 1, after => ARRAY(SELECT generate_series(1, 101))::bigint[]);
SELECT count(*) - :jobs_before AS created FROM gangsched.gangs;
-- an empty list is no dependency
SELECT gangsched.submit('a', 1, 1, name => 'empty-after', after => '{}') AS emptyafter \gset
SELECT j.name, j.state, j.reason FROM gangsched.jobs j JOIN gangsched.gangs g ON g.id = j.job
 WHERE j.job = :emptyafter AND g.after_jobs IS NULL AND g.after_mode IS NULL;
\set VERBOSITY terse

/* ------------------------------------------------------------------ */
/* 5. a portal of team a                                               */
/* ------------------------------------------------------------------ */
CREATE ROLE gs56_portal LOGIN;
SELECT gangsched.add_member('gs56_portal', 'a');
SET ROLE gs56_portal;
SELECT gangsched.submit('a', 1, 1, name => 'portal-after', after => ARRAY[:long]) > 0 AS submitted;
SELECT name, state, reason FROM gangsched.jobs WHERE name = 'portal-after';
SELECT position IS NULL AS unqueued, name, reason FROM gangsched.queue WHERE name = 'portal-after';
SELECT reason FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'portal-after'));
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT gangsched.submit('a', 1, 1, after => ARRAY[:bafter]);
\set VERBOSITY terse
RESET ROLE;
DROP OWNED BY gs56_portal;
DROP ROLE gs56_portal;

/* ------------------------------------------------------------------ */
/* 6. invariant 8 sees a job left waiting for an ended job             */
/* ------------------------------------------------------------------ */
UPDATE gangsched.gangs SET waiting_for = ARRAY[:train]::bigint[] WHERE id = :emptyafter;
SELECT invariant, job = :emptyafter AS that_job, detail FROM gangsched.check_invariants();
UPDATE gangsched.gangs SET after_jobs = ARRAY[:train]::bigint[], after_mode = 'ok' WHERE id = :emptyafter;
SELECT invariant, job = :emptyafter AS that_job, detail FROM gangsched.check_invariants();
UPDATE gangsched.gangs SET after_jobs = NULL, after_mode = NULL, waiting_for = NULL WHERE id = :emptyafter;

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
