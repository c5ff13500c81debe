-- Least-attained-service order within a team (gangsched.team_order = 'las',
-- set_team_order): a short job overtakes its team's jobs that have attained
-- more service; thresholds and starvation promotion; LAS preemption inside
-- a team with grace and min_runtime; no effect across teams; the queue
-- view's attained service is the sum over the allocation history.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';
SET gangsched.las_thresholds = '3600,36000';

CREATE FUNCTION pg_temp.start_all() RETURNS void
LANGUAGE sql AS $$
    SELECT gangsched.job_started(p.job, p.node)
      FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p
      JOIN gangsched.jobs j ON j.job = p.job WHERE j.state = 'placed' $$;
CREATE FUNCTION pg_temp.id(n text) RETURNS bigint
LANGUAGE sql AS $$ SELECT job FROM gangsched.jobs WHERE name = n $$;
-- GPU-seconds held so far, from the allocation history (open rows up to now)
CREATE FUNCTION pg_temp.held(j bigint) RETURNS float8
LANGUAGE sql AS $$
    SELECT COALESCE(sum(a.gpus::float8 * extract(epoch FROM COALESCE(upper(a.during), gangsched.now()) - lower(a.during))::float8), 0)
      FROM gangsched.allocations a WHERE a.job = j $$;
CREATE FUNCTION pg_temp.queue() RETURNS TABLE (pos int, name text, team text, las_queue int, attained float8, reason text)
LANGUAGE sql AS $$ SELECT position, name, team, las_queue, attained_gpu_seconds, reason FROM gangsched.queue ORDER BY position $$;

-- settings and the operator call refuse bad values
SET gangsched.las_thresholds = '7200,3600';
SET gangsched.las_thresholds = 'x';
SET gangsched.team_order = 'lottery';
SET gangsched.las_promote_factor = -1;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 1) i;
SELECT gangsched.add_team('t');
SELECT gangsched.set_quota('t', 'main', 8);
SELECT gangsched.set_team_order('t', 'lottery');
SELECT gangsched.set_team_order('nobody', 'las');
SELECT gangsched.set_team_order('t', 'las');
SELECT name, team_order FROM gangsched.teams;
SELECT reason, detail FROM gangsched.events WHERE kind = 'team' AND reason = 'team order set';

-- 1. two long jobs run for an hour: 4 GPUs x 3600 s = 14400 GPU-seconds, queue 1
SELECT gangsched.submit('t', 1, 4, name => 'long1'), gangsched.submit('t', 1, 4, name => 'long2');
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start_all();
SELECT detail->>'las_queue' AS las_queue, detail->>'attained_gpu_seconds' AS attained
  FROM gangsched.events WHERE kind = 'placed' ORDER BY id;

-- a short job arrives: queue 0, it preempts the long job of its team (las trigger)
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('t', 1, 4, name => 'short1');
SELECT * FROM pg_temp.queue();
-- with gangsched.las_preemption off it keeps its place but preempts nothing
SET gangsched.las_preemption = off;
SELECT pos, name, las_queue, reason FROM pg_temp.queue();
RESET gangsched.las_preemption;
SELECT preempted FROM gangsched.run_round();
SELECT name, state, preempt_deadline FROM gangsched.jobs ORDER BY job;
SELECT detail->>'trigger' AS trigger, detail->>'las_queue' AS las_queue, reason
  FROM gangsched.events WHERE kind = 'nominated';
SELECT reason FROM gangsched.events WHERE kind = 'preempting';
-- the victim lets go after a checkpoint; the short job takes its place
SET gangsched.clock_override = '2030-01-01 01:00:30+00';
SELECT gangsched.job_released(job, checkpointed => true) FROM gangsched.jobs WHERE state = 'preempting';
SELECT pg_temp.start_all();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.check_invariants();

-- 2. ordering: with preemption off, a new short job overtakes the requeued
-- long one (long1: 4 GPUs x 3630 s = 14520 GPU-seconds, queue 1)
SET gangsched.preemption = off;
SET gangsched.clock_override = '2030-01-01 01:01:00+00';
SELECT gangsched.submit('t', 1, 4, name => 'short2');
SELECT * FROM pg_temp.queue();
SELECT * FROM gangsched.why_pending(pg_temp.id('long1')) WHERE reason IN ('las queue', 'queue order');
-- the same queue in fifo order: submit order
SELECT gangsched.set_team_order('t', 'fifo');
SELECT * FROM pg_temp.queue();
SELECT gangsched.set_team_order('t', NULL);
SET gangsched.team_order = 'las';
SELECT pos, name, las_queue FROM pg_temp.queue();
RESET gangsched.team_order;
SELECT pos, name, las_queue FROM pg_temp.queue();
SELECT gangsched.set_team_order('t', 'las');
-- priority still comes first: a high-priority job with more service goes first
SELECT gangsched.submit('t', 1, 4, name => 'urgent', priority => 5);
SELECT pos, name, las_queue FROM pg_temp.queue();
SELECT gangsched.cancel(pg_temp.id('urgent'));

-- thresholds: with one at 20000 GPU-seconds long1 (14520) is in queue 0 again, FIFO there
SET gangsched.las_thresholds = '20000';
SELECT pos, name, las_queue FROM pg_temp.queue();
SET gangsched.las_thresholds = '';
SELECT pos, name, las_queue FROM pg_temp.queue();
SET gangsched.las_thresholds = '3600,36000';

-- promotion: long1 (14520 GPU-seconds) has waited since 01:00:30; with a
-- factor of 1 it is promoted after 14520 s of waiting (05:02:30), not before
SET gangsched.las_promote_factor = 1;
SET gangsched.clock_override = '2030-01-01 05:02:29+00';
SELECT pos, name, las_queue FROM pg_temp.queue();
SET gangsched.clock_override = '2030-01-01 05:02:31+00';
SELECT pos, name, las_queue FROM pg_temp.queue();
SELECT detail FROM gangsched.why_pending(pg_temp.id('long1')) WHERE reason = 'las queue';
RESET gangsched.las_promote_factor;
SELECT * FROM gangsched.check_invariants();

-- 3. LAS preemption: at 06:00 long2 (4 GPUs x 6 h) and short1 (x 5 h) are
-- in queue 2 and run; short2 (queue 0) and long1 (queue 1) wait; each
-- preempts one of them (the one with the least lost work first)
SET gangsched.preemption = on;
SET gangsched.clock_override = '2030-01-01 06:00:00+00';
SELECT name, state, las_queue, round(attained::numeric) FROM pg_temp.queue() q JOIN gangsched.jobs USING (name);
SELECT preempted FROM gangsched.run_round();
SELECT name, state FROM gangsched.jobs WHERE state <> 'cancelled' ORDER BY job;
SELECT detail->>'trigger', (SELECT name FROM gangsched.jobs WHERE job = (detail->'victims'->>0)::bigint) AS victim
  FROM gangsched.events WHERE kind = 'nominated' ORDER BY id DESC LIMIT 1;
-- grace: the victims do not let go; after a minute the round requeues them
SELECT name, preempt_deadline FROM gangsched.jobs WHERE state = 'preempting' ORDER BY job;
SET gangsched.clock_override = '2030-01-01 06:00:59+00';
SELECT requeued FROM gangsched.run_round();
SET gangsched.clock_override = '2030-01-01 06:01:01+00';
SELECT requeued FROM gangsched.run_round();
SELECT pg_temp.start_all();
SELECT name, state, preemptions FROM gangsched.jobs WHERE state <> 'cancelled' ORDER BY job;
-- min_runtime: long1 (queue 1) has run 4 min, less than gangsched.min_runtime:
-- a new queue-0 job may not take its place (short2 is in queue 0: no victim)
SET gangsched.clock_override = '2030-01-01 06:05:00+00';
SELECT gangsched.submit('t', 1, 4, name => 'short3');
SELECT name, las_queue FROM pg_temp.queue() WHERE name = 'short3';
SELECT preempted FROM gangsched.run_round();
SELECT reason FROM gangsched.jobs WHERE name = 'short3';
SELECT * FROM gangsched.check_invariants();

-- property: the queue's attained service is the sum over each job's
-- allocation history (long1 has two allocations once its node goes down)
SET gangsched.clock_override = '2030-01-01 06:06:00+00';
SELECT gangsched.set_node_state('n1', 'down');
SELECT gangsched.set_node_state('n1', 'up');
SELECT q.name, q.attained = pg_temp.held(pg_temp.id(q.name)) AS equal,
       (SELECT count(*) FROM gangsched.allocations a WHERE a.job = pg_temp.id(q.name)) AS allocations
  FROM pg_temp.queue() q ORDER BY q.pos;
SELECT * FROM gangsched.check_invariants();

-- 4. no effect across teams: three teams, one job each, with different
-- attained service; the order and shares are the same under fifo and las
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.preemption = off;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 4) i;
SELECT count(gangsched.add_team(t)) FROM unnest(ARRAY['a', 'b', 'c']) t;
SELECT count(gangsched.set_quota(t, 'main', 8)) FROM unnest(ARRAY['a', 'b', 'c']) t;
SELECT gangsched.submit('a', 1, 8, name => 'a1'), gangsched.submit('b', 1, 8, name => 'b1'),
       gangsched.submit('c', 1, 8, name => 'c1'), gangsched.submit('b', 1, 4, name => 'b2');
SELECT placed FROM gangsched.run_round();
SELECT pg_temp.start_all();
-- the nodes go down one by one: c1 holds 8 GPUs for 1 h, b1 2 h, a1 3 h
-- (so a least-attained-service order across teams would reverse them)
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.set_node_state(p.node, 'down') FROM (SELECT DISTINCT node FROM gangsched.placements WHERE job = pg_temp.id('c1')) p;
SET gangsched.clock_override = '2030-01-01 02:00:00+00';
SELECT gangsched.set_node_state(p.node, 'down') FROM (SELECT DISTINCT node FROM gangsched.placements WHERE job = pg_temp.id('b1')) p;
SET gangsched.clock_override = '2030-01-01 03:00:00+00';
SELECT gangsched.set_node_state(p.node, 'down') FROM (SELECT DISTINCT node FROM gangsched.placements WHERE job = pg_temp.id('a1')) p;
SELECT gangsched.set_node_state('n' || i, 'up') FROM generate_series(1, 4) i;
SELECT name, state FROM gangsched.jobs ORDER BY job;
-- b2 still runs, so team b's share differs from the others'
SET gangsched.clock_override = '2030-01-01 04:00:00+00';
SELECT pos, name, las_queue, attained FROM pg_temp.queue();
CREATE TEMP TABLE fifo AS SELECT position, job, dominant_share, would_borrow FROM gangsched.queue;
CREATE TEMP TABLE fifo_shares AS SELECT team, dominant_share FROM gangsched.team_shares;
SET gangsched.team_order = 'las';
SELECT pos, name, las_queue, attained FROM pg_temp.queue();
SELECT count(*) AS positions FROM fifo;
SELECT count(*) AS differences FROM
  ((SELECT position, job, dominant_share, would_borrow FROM gangsched.queue EXCEPT SELECT * FROM fifo)
   UNION ALL (SELECT * FROM fifo EXCEPT SELECT position, job, dominant_share, would_borrow FROM gangsched.queue)) d;
SELECT count(*) AS share_differences FROM
  ((SELECT team, dominant_share FROM gangsched.team_shares EXCEPT SELECT * FROM fifo_shares)
   UNION ALL (SELECT * FROM fifo_shares EXCEPT SELECT team, dominant_share FROM gangsched.team_shares)) d;
SET gangsched.queue_order = 'priority';
SELECT pos, name FROM pg_temp.queue();
RESET gangsched.team_order;
SELECT pos, name FROM pg_temp.queue();
RESET gangsched.queue_order;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
