-- The analyst functions over a small history made through the real API in
-- virtual time, with every number checked by hand (the comments give the
-- arithmetic): usage, utilization, snapshot, queue_waits,
-- preemption_summary and queue_depth; then their refusals.
--
-- The cluster: two nodes of 4 GPUs (capacity 8 GPUs); teams a and b with a
-- nominal quota of 4 GPUs each. The story, one round at each time shown:
--   00:00  a1 (a, 2 workers x 1 GPU) and b1 (b, 1 x 4) placed
--   00:10  b2 (b, 1 x 2) placed on the 2 free GPUs, borrowed (b at 6 > 4)
--   00:20  b2 reports a checkpoint
--   00:30  a2 (a, 1 x 2) is within a's quota and does not fit: reclaim,
--          b2 must stop by 00:31
--   00:30:30 b2 released without a checkpoint (lost 2 GPUs x 630 s); a2
--          placed in that transaction
--   01:00  a1 finishes; b2 placed again, borrowed
--   01:30  b1 finishes
--   01:40  a3 (a, 2 x 4: the whole cluster, queue timeout 10 min) waits
--   01:50  a3 expires
--   02:00  a2 and b2 finish; b3 (b, 2 x 4) placed, borrowed
--   02:10  b3 reports a checkpoint
--   02:20  a4 (a, 1 x 4) reclaims: b3 must stop by 02:21
--   02:21  b3 never released: killed (lost 8 GPUs x 660 s); a4 placed
--   02:30  b3 (pending again) cancelled
--   03:00  a4 finishes
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET extra_float_digits = 0;
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '5min';
SET gangsched.default_grace = '1min';
SET gangsched.max_grace = '10min';

-- Set the virtual clock to that time on 2030-01-01; shows it.
CREATE FUNCTION pg_temp.at(t text) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT set_config('gangsched.clock_override', '2030-01-01 ' || t || '+00', false)::timestamptz $$;

CREATE FUNCTION pg_temp.id(job_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT job FROM gangsched.jobs WHERE name = job_name $$;

-- A round, then every node of every placed job confirms it (the agents).
CREATE FUNCTION pg_temp.round() RETURNS TABLE (placed int, preempted int, expired int, requeued int)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT r.placed, r.preempted, r.expired, r.requeued FROM gangsched.run_round() r;
    PERFORM gangsched.job_started(p.job, p.node)
       FROM (SELECT DISTINCT pl.job, pl.node FROM gangsched.placements pl
               JOIN gangsched.gangs g ON g.id = pl.job WHERE g.state = 'placed') p;
END $$;

-- Run a statement that must be refused; report its SQLSTATE and message.
CREATE PROCEDURE pg_temp.refused(cmd text) LANGUAGE plpgsql AS $$
DECLARE
    st  text;
    msg text;
    hnt text;
BEGIN
    EXECUTE cmd;
    RAISE NOTICE 'ACCEPTED, but it should have been refused';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hnt = PG_EXCEPTION_HINT;
    RAISE NOTICE '%: %', st, msg USING HINT = hnt;
END $$;

SELECT pg_temp.at('00:00:00');
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 4, 'a100', 80) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 4), gangsched.set_quota('b', 'main', 4);

SELECT gangsched.submit('a', 2, 1, name => 'a1'), gangsched.submit('b', 1, 4, name => 'b1');
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('00:10:00');
SELECT gangsched.submit('b', 1, 2, name => 'b2');
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('00:20:00');
SELECT gangsched.job_checkpointed(pg_temp.id('b2'));
SELECT pg_temp.at('00:30:00');
SELECT gangsched.submit('a', 1, 2, name => 'a2');
SELECT * FROM pg_temp.round();
SELECT name, state, borrowed, preempt_deadline FROM gangsched.jobs ORDER BY job;
SELECT pg_temp.at('00:30:30');
SELECT gangsched.job_released(pg_temp.id('b2'), checkpointed => false);
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('01:00:00');
SELECT gangsched.job_finished(pg_temp.id('a1'), true);
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('01:30:00');
SELECT gangsched.job_finished(pg_temp.id('b1'), true);
SELECT pg_temp.at('01:40:00');
SELECT gangsched.submit('a', 2, 4, name => 'a3', queue_timeout => '10 min');
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('01:50:00');
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('02:00:00');
SELECT gangsched.job_finished(pg_temp.id('a2'), true), gangsched.job_finished(pg_temp.id('b2'), true);
SELECT gangsched.submit('b', 2, 4, name => 'b3');
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('02:10:00');
SELECT gangsched.job_checkpointed(pg_temp.id('b3'));
SELECT pg_temp.at('02:20:00');
SELECT gangsched.submit('a', 1, 4, name => 'a4');
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('02:21:00');
SELECT * FROM pg_temp.round();
SELECT pg_temp.at('02:30:00');
SELECT gangsched.cancel(pg_temp.id('b3'));
SELECT pg_temp.at('03:00:00');
SELECT gangsched.job_finished(pg_temp.id('a4'), true);
SELECT pg_temp.at('04:00:00');

-- The story as the jobs view tells it.
SELECT name, team, state, borrowed, preemptions, lost_gpu_seconds, submitted_at, finished_at FROM gangsched.jobs ORDER BY job;
SELECT g.name, a.worker, lower(a.during) AS since, upper(a.during) AS until, a.gpus, a.borrowed
  FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job ORDER BY a.id;

-- usage, hourly, 00:00-03:00 (8 GPU-hours of capacity an hour):
--  hour 0: a: a1 2 x 1 h + a2 2 x 29.5 min = 2.98333; b: b1 4 x 1 h + b2 2 x 20.5 min
--          (borrowed) = 4.68333, of which 0.68333 borrowed
--  hour 1: a: a2 2; b: b1 4 x 0.5 h + b2 2 x 1 h (borrowed) = 4, 2 borrowed
--  hour 2: a: a4 4 x 39 min = 2.6; b: b3 8 x 21 min (borrowed) = 2.8
SELECT bucket_start, team, round(gpu_hours::numeric, 5) AS gpu_hours, round(share_of_capacity::numeric, 5) AS share,
       quota_gpus, round(borrowed_gpu_hours::numeric, 5) AS borrowed, capacity_gpu_hours
  FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-01 03:00+00', '1 hour');
-- the same three hours in one bucket, and a window that starts mid-allocation
-- (00:45-01:15: a1 2 x 15 min + a2 2 x 30 min = 1.5; b1 4 x 30 min + b2 2 x 15 min = 2.5)
SELECT team, round(gpu_hours::numeric, 5) AS gpu_hours, round(borrowed_gpu_hours::numeric, 5) AS borrowed, capacity_gpu_hours
  FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-01 03:00+00', '3 hours');
SELECT team, round(gpu_hours::numeric, 5) AS gpu_hours, capacity_gpu_hours
  FROM gangsched.usage('2030-01-01 00:45+00', '2030-01-01 01:15+00', '1 hour');

-- utilization: 7.66667, 6 and 5.4 of 8 GPUs on average
SELECT bucket_start, bucket_end, capacity_gpus, round(allocated_gpus::numeric, 5) AS allocated,
       round(utilization::numeric, 5) AS utilization, round(borrowed_gpus::numeric, 5) AS borrowed
  FROM gangsched.utilization('2030-01-01 00:00+00', '2030-01-01 03:00+00', '1 hour');
-- a window past the clock (04:00) stops at the clock: the last bucket is 03:00-04:00
SELECT bucket_start, bucket_end, capacity_gpus, allocated_gpus
  FROM gangsched.utilization('2030-01-01 02:00+00', '2030-01-02 00:00+00', '1 hour');

-- snapshot: at 00:20 a1 (2 workers), b1, b2; at 00:30:30 b2 has just gone
-- and a2 holds; at 02:25 only a4.
SELECT name, team, worker, node IS NOT NULL AS on_node, cardinality(devices) AS devices, gpus, borrowed, since, until
  FROM gangsched.snapshot('2030-01-01 00:20+00');
SELECT name, worker, gpus, borrowed FROM gangsched.snapshot('2030-01-01 00:30:30+00');
SELECT name, worker, gpus, borrowed, until FROM gangsched.snapshot('2030-01-01 02:25+00');
SELECT count(*) FROM gangsched.snapshot('2030-01-01 05:00+00');  -- after the clock: nothing known

-- queue waits of the jobs submitted 00:00-03:00: a1, b1, b2, b3 at once
-- (0 s), a2 30 s, a4 60 s; a3 never placed (expired)
SELECT * FROM gangsched.queue_waits('2030-01-01 00:00+00', '2030-01-01 03:00+00');
-- only what was submitted from 00:30: a2, a3, a4, b3
SELECT * FROM gangsched.queue_waits('2030-01-01 00:30+00', '2030-01-01 03:00+00');

-- preemptions: b2 released (2 GPUs x 630 s since its checkpoint = 0.35
-- GPU-h), b3 killed (8 GPUs x 660 s = 1.46667 GPU-h); a preempted twice
SELECT team, preemptions, released, killed, round(lost_gpu_hours::numeric, 5) AS lost_gpu_hours, preemptors,
       other_requeues, other_lost_gpu_hours
  FROM gangsched.preemption_summary('2030-01-01 00:00+00', '2030-01-01 03:00+00');
SELECT team, preemptions, released, killed FROM gangsched.preemption_summary('2030-01-01 02:00+00', '2030-01-01 03:00+00');

-- queue depth: hour 0: a2 30 s (2 GPUs) + b2 29.5 min (2 GPUs) = 0.5 jobs, 1 GPU;
-- hour 1: a3 10 min (8 GPUs); hour 2: a4 1 min (4 GPUs) + b3 9 min (8 GPUs)
SELECT bucket_start, round(waiting_jobs::numeric, 5) AS jobs, round(waiting_gpus::numeric, 5) AS gpus, max_waiting_jobs
  FROM gangsched.queue_depth('2030-01-01 00:00+00', '2030-01-01 03:00+00', '1 hour');
-- from 00:30:15 on: the spans open then (a2) are found too
SELECT bucket_start, round(waiting_jobs::numeric, 5) AS jobs, round(waiting_gpus::numeric, 5) AS gpus
  FROM gangsched.queue_depth('2030-01-01 00:30:15+00', '2030-01-01 00:31:15+00', '30 seconds');

-- The indexes behind the window queries are the ones the plans use.
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM gangsched.allocations a
 WHERE NOT upper_inf(a.during) AND lower(a.during) >= '2030-01-01'::timestamptz - interval '1 day'
   AND lower(a.during) < '2030-01-02' AND upper(a.during) > '2030-01-01';
EXPLAIN (COSTS OFF) SELECT * FROM gangsched.allocations a
 WHERE NOT upper_inf(a.during) AND upper(a.during) - lower(a.during) > interval '1 day'
   AND a.during && tstzrange('2030-01-01', '2030-01-02') AND lower(a.during) < '2030-01-01'::timestamptz - interval '1 day';
RESET enable_seqscan;

-- Refusals.
CALL pg_temp.refused($$SELECT * FROM gangsched.usage('2030-01-01 03:00+00', '2030-01-01 00:00+00', '1 hour')$$);
CALL pg_temp.refused($$SELECT * FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-01 03:00+00', '1 month')$$);
CALL pg_temp.refused($$SELECT * FROM gangsched.utilization('2030-01-01 00:00+00', '2030-01-01 03:00+00', '-1 hour')$$);
CALL pg_temp.refused($$SELECT * FROM gangsched.utilization(NULL, '2030-01-01 03:00+00')$$);
CALL pg_temp.refused($$SELECT * FROM gangsched.queue_depth('2030-01-01 00:00+00', 'infinity', '1 hour')$$);
CALL pg_temp.refused($$SELECT * FROM gangsched.usage('2000-01-01 00:00+00', '2030-01-01 00:00+00', '1 minute')$$);
CALL pg_temp.refused($$SELECT * FROM gangsched.queue_waits('2030-01-01 00:00+00', '2030-01-01 00:00+00')$$);

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
