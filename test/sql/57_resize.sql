-- resize() of a pending job (issue 17): another number of workers or GPUs
-- per worker, same id, queue position and submit time; checked as submit
-- checks it, with submit's SQLSTATEs and nothing changed on a refusal;
-- refused for jobs in other states; a portal resizes its own team's jobs
-- only. Virtual time; ends with check_invariants() empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';

-- 2 nodes of 8 GPUs in one rack
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');

SELECT gangsched.submit('a', 1, 8, name => 'running') AS running \gset
SELECT gangsched.submit('a', 2, 8, name => 'big') AS big \gset
SELECT gangsched.submit('a', 1, 4, name => 'small') AS small \gset
SELECT gangsched.submit('a', 4, 1, group_size => 2, name => 'grouped') AS grouped \gset
SELECT placed FROM gangsched.run_round();
SELECT position, name, workers, gpus, fits_now FROM gangsched.queue;

-- the 16-GPU job cannot start while 8 GPUs are busy; asking for one worker
-- keeps its place (first) and its submit time, and it fits now
SELECT queue_pos AS big_pos, submitted_at AS big_submitted FROM gangsched.gangs WHERE id = :big \gset
SELECT gangsched.resize(:big, workers => 1);
SELECT position, name, workers, gpus, fits_now FROM gangsched.queue;
SELECT queue_pos = :big_pos AS same_position, submitted_at = :'big_submitted' AS same_submit_time,
       workers, gpus, f_gpus FROM gangsched.gangs WHERE id = :big;
SELECT kind, reason, detail FROM gangsched.events WHERE kind = 'resized' ORDER BY id;
-- the same shape again changes nothing and logs nothing
SELECT gangsched.resize(:big, workers => 1, gpus => 8);
SELECT gangsched.resize(:big);
SELECT count(*) AS resized_events FROM gangsched.events WHERE kind = 'resized';
-- fewer GPUs per worker
SELECT gangsched.resize(:small, gpus => 2);
SELECT name, workers, gpus FROM gangsched.jobs WHERE job = :small;

/* ------------------------------------------------------------------ */
/* refusals: submit's SQLSTATEs, and nothing changes                   */
/* ------------------------------------------------------------------ */
CREATE TEMP TABLE before AS SELECT id, workers, gpus, queue_pos, reason FROM gangsched.gangs;
SELECT count(*) AS events_before FROM gangsched.events WHERE kind = 'resized' \gset
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT gangsched.resize(:running, workers => 1, gpus => 4);
SELECT gangsched.resize(987654, workers => 1);
SELECT gangsched.resize(:big, workers => 0);
SELECT gangsched.resize(:big, gpus => 1.5);
SELECT gangsched.resize(:big, gpus => 'NaN');
SELECT gangsched.resize(:big, gpus => 65);
SELECT gangsched.resize(:grouped, workers => 3);
-- could never run: larger than the pool, a worker larger than a node
SELECT gangsched.resize(:big, workers => 3);
SELECT gangsched.resize(:small, gpus => 16);
SELECT gangsched.set_team_limits('a', max_workers_per_gang => 2);
SELECT gangsched.resize(:grouped, workers => 6);
SELECT gangsched.set_team_limits('a', max_workers_per_gang => NULL);
SELECT count(*) AS changed FROM gangsched.gangs g JOIN before b USING (id)
 WHERE (g.workers, g.gpus, g.queue_pos, g.reason) IS DISTINCT FROM (b.workers, b.gpus, b.queue_pos, b.reason);
SELECT count(*) - :events_before AS new_resized_events FROM gangsched.events WHERE kind = 'resized';
\set VERBOSITY terse

/* ------------------------------------------------------------------ */
/* a portal resizes its own team's pending jobs only                   */
/* ------------------------------------------------------------------ */
SELECT gangsched.submit('b', 1, 2, name => 'b-job') AS bjob \gset
CREATE ROLE gs57_portal LOGIN;
SELECT gangsched.add_member('gs57_portal', 'a');
SET ROLE gs57_portal;
SELECT gangsched.resize(:grouped, workers => 2);
SELECT name, workers FROM gangsched.jobs WHERE job = :grouped;
\set VERBOSITY default
SELECT gangsched.resize(:bjob, workers => 2);
\set VERBOSITY terse
RESET ROLE;
DROP OWNED BY gs57_portal;
DROP ROLE gs57_portal;

-- the next round, in the shapes asked for last: b (the lower share) first,
-- then what fits beside the capacity the starvation guard keeps for big
SELECT placed FROM gangsched.run_round();
SELECT j.name, j.state, j.workers, j.gpus, count(p.*) AS worker_rows
  FROM gangsched.jobs j LEFT JOIN gangsched.placements p ON p.job = j.job
 GROUP BY j.job, j.name, j.state, j.workers, j.gpus ORDER BY j.job;
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
