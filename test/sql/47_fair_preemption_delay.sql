-- gangsched.fair_preemption_delay (issue 12): a borrowing job may preempt
-- for fair share only once it has waited the delay; until then why_pending,
-- the stored reason and the events say so; reclaim (a job within its team's
-- nominal quota) is never delayed. Virtual time; ends with check_invariants()
-- empty.
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

-- a's fifth job borrows: a would hold 5, b keeps 19 without a victim, so the
-- fair-share rule allows a preemption; the delay holds it back for 10 minutes.
SET gangsched.fair_preemption_delay = '10min';
SELECT gangsched.submit('a', 1, 1, name => 'a5') AS a5 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT state, reason FROM gangsched.jobs WHERE job = :a5;
SELECT kind, reason FROM gangsched.events WHERE job = :a5 AND kind = 'preemption refused';
SELECT w.reason, w.detail FROM gangsched.why_pending(:a5) w;

SET gangsched.clock_override = '2030-01-01 01:09:59+00';
SELECT placed, preempted FROM gangsched.run_round();
SELECT state FROM gangsched.jobs WHERE job = :a5;
-- the refusal is logged once, not every round
SELECT count(*) FROM gangsched.events WHERE job = :a5 AND kind = 'preemption refused';

SET gangsched.clock_override = '2030-01-01 01:10:00+00';
SELECT placed, preempted FROM gangsched.run_round();
SELECT j.state, j.reason FROM gangsched.jobs j WHERE j.job = :a5;
SELECT count(*) AS b_preempting FROM gangsched.jobs WHERE team = 'b' AND state = 'preempting';

-- c reclaims at once, whatever the delay: its job is within its nominal quota.
SELECT gangsched.submit('c', 1, 1, name => 'c1') AS c1 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT j.state, j.reason FROM gangsched.jobs j WHERE j.job = :c1;

-- 0 (the default) preempts at the first round that finds the job blocked.
RESET gangsched.fair_preemption_delay;
SHOW gangsched.fair_preemption_delay;
SELECT gangsched.submit('a', 1, 1, name => 'a6') AS a6 \gset
SELECT placed, preempted FROM gangsched.run_round();
SELECT j.state FROM gangsched.jobs j WHERE j.job = :a6;

-- a bad value is refused by the server
SET gangsched.fair_preemption_delay = '-1s';

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
