-- The 'requeued' event records the work the job lost, as gangs.lost_gpu_seconds
-- adds it: a victim released without a checkpoint, a victim killed at its
-- deadline (gangsched._requeue_many, sql/src/65_round.sql, computes it from
-- the row before the requeue). The analysts' preemption-loss summary is
-- built from these events.
--
-- Expected: the event's lost_gpu_seconds equals what was added to the
-- job's lost_gpu_seconds (v1: 8 GPUs × 1800 s = 14400; v2: 8 × 1860 s = 14880).
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';

SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 16);
SELECT gangsched.submit('b', 1, 8, name => 'v1'), gangsched.submit('b', 1, 8, name => 'v2');
SELECT placed FROM gangsched.run_round();
SELECT gangsched.job_started(job, 'n1') FROM gangsched.jobs WHERE name = 'v1';
SELECT gangsched.job_started(job, 'n2') FROM gangsched.jobs WHERE name = 'v2';
SET gangsched.clock_override = '2030-01-01 00:30:00+00';
SELECT gangsched.submit('a', 2, 8, name => 'p');
SELECT preempted FROM gangsched.run_round();
-- v1 releases without a checkpoint; v2 is killed at its deadline (00:31)
SELECT gangsched.job_released(job, checkpointed => false) FROM gangsched.jobs WHERE name = 'v1';
SET gangsched.clock_override = '2030-01-01 00:31:00+00';
SELECT requeued FROM gangsched.run_round();
SELECT name, state, lost_gpu_seconds FROM gangsched.jobs ORDER BY job;
SELECT g.name, e.reason, e.detail->'lost_gpu_seconds' AS event_lost
  FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job WHERE e.kind = 'requeued' ORDER BY e.id;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
