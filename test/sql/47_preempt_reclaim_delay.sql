-- gangsched.reclaim_delay (issue 12): a job within its team's nominal quota
-- may reclaim borrowed capacity only once it has waited the delay; capacity
-- that a job finishing frees in the meantime places it with no preemption;
-- until then why_pending, the stored reason and the events say so.
-- Fair-share preemption is not delayed by it. Virtual time; ends with
-- check_invariants() empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';

-- 3 nodes of 8 GPUs; a and b have 4 GPUs of nominal quota each, c 16 (idle: it lends).
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 3) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b'), gangsched.add_team('c');
SELECT gangsched.set_quota('a', 'main', 4), gangsched.set_quota('b', 'main', 4), gangsched.set_quota('c', 'main', 16);

-- a holds its 4 GPUs, b its 4 and 16 borrowed: the cluster is full.
SELECT count(gangsched.submit('a', 1, 1, name => 'a' || i)) FROM generate_series(1, 4) i;
SELECT count(gangsched.submit('b', 1, 1, name => 'b' || i)) FROM generate_series(1, 20) i;
SELECT placed FROM gangsched.run_round();
SELECT count(gangsched.job_started(p.job, p.node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) p;
SET gangsched.clock_override = '2030-01-01 01:00:00+00';

-- c's job is within its quota: a reclaim, held back for 2 minutes.
SET gangsched.reclaim_delay = '2min';
SHOW gangsched.reclaim_delay;
SELECT gangsched.submit('c', 1, 1, name => 'c1') AS c1 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT state, reason FROM gangsched.jobs WHERE job = :c1;
SELECT kind, reason FROM gangsched.events WHERE job = :c1 AND kind = 'preemption refused';
SELECT w.reason, w.detail FROM gangsched.why_pending(:c1) w;

-- one of b's jobs finishes within the delay: c1 takes its GPU, nothing is preempted.
SET gangsched.clock_override = '2030-01-01 01:01:00+00';
SELECT gangsched.job_finished(job, true) FROM gangsched.jobs WHERE name = 'b20';
SELECT placed, preempted FROM gangsched.run_round();
SELECT j.state, j.reason FROM gangsched.jobs j WHERE j.job = :c1;
SELECT count(*) AS preempting FROM gangsched.jobs WHERE state = 'preempting';

-- c's next job finds nothing freed: it reclaims once it has waited 2 minutes.
SELECT gangsched.submit('c', 1, 1, name => 'c2') AS c2 \gset
SET gangsched.clock_override = '2030-01-01 01:02:59+00';
SELECT placed, preempted FROM gangsched.run_round();
SELECT state FROM gangsched.jobs WHERE job = :c2;
SET gangsched.clock_override = '2030-01-01 01:03:00+00';
SELECT placed, preempted FROM gangsched.run_round();
SELECT j.state, j.reason FROM gangsched.jobs j WHERE j.job = :c2;
SELECT count(*) AS b_preempting FROM gangsched.jobs WHERE team = 'b' AND state = 'preempting';

-- a's fifth job borrows: fair share is not delayed by gangsched.reclaim_delay.
SELECT gangsched.submit('a', 1, 1, name => 'a5') AS a5 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT j.state FROM gangsched.jobs j WHERE j.job = :a5;

-- 0 (the default) reclaims at the first round that finds the job blocked.
RESET gangsched.reclaim_delay;
SHOW gangsched.reclaim_delay;
SELECT gangsched.submit('c', 1, 1, name => 'c3') AS c3 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT j.state FROM gangsched.jobs j WHERE j.job = :c3;

-- a bad value is refused by the server
SET gangsched.reclaim_delay = '-1s';

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
