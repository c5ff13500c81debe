-- Admission control in submit(): every rejection with its SQLSTATE, message,
-- detail and hint; a refused call changes nothing (no job, no event, no
-- sequence value); accepted shapes appear in the jobs view as submitted;
-- cancel() and the agents' calls refuse unknown jobs and wrong states.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;

-- Fingerprint of everything the extension stores: each table's rows and each
-- sequence's position.
CREATE FUNCTION pg_temp.fingerprint() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r   record;
    h   text;
    acc text := '';
BEGIN
    FOR r IN SELECT c.oid::regclass AS rel, c.relkind FROM pg_class c
              WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relkind IN ('r', 'S')
              ORDER BY c.relname
    LOOP
        IF r.relkind = 'S' THEN
            EXECUTE format('SELECT last_value || '':'' || is_called FROM %s', r.rel) INTO h;
        ELSE
            EXECUTE format('SELECT count(*) || '':'' || COALESCE(md5(string_agg(t::text, ''|'' ORDER BY t::text)), '''') FROM %s t', r.rel) INTO h;
        END IF;
        acc := acc || r.rel || '=' || h || ';';
    END LOOP;
    RETURN acc;
END $$;

-- Run a statement that must be refused; report its SQLSTATE, message, detail
-- and hint as a NOTICE, and whether anything changed.
CREATE PROCEDURE pg_temp.refused(cmd text) LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.fingerprint();
    st     text;
    msg    text;
    det    text;
    hnt    text;
BEGIN
    BEGIN
        EXECUTE cmd;
        RAISE NOTICE 'ACCEPTED, but it should have been refused';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        IF det <> '' AND hnt <> '' THEN
            RAISE NOTICE '%: %', st, msg USING DETAIL = det, HINT = hnt;
        ELSIF det <> '' THEN
            RAISE NOTICE '%: %', st, msg USING DETAIL = det;
        ELSIF hnt <> '' THEN
            RAISE NOTICE '%: %', st, msg USING HINT = hnt;
        ELSE
            RAISE NOTICE '%: %', st, msg;
        END IF;
    END;
    IF pg_temp.fingerprint() IS DISTINCT FROM before THEN
        RAISE NOTICE 'STATE CHANGED by a refused call';
    END IF;
END $$;

/* ---------------- the cluster ---------------- */

-- pool main (reserved):  z1.s1.r1: n1 n2, z1.s1.r2: n3 n4 — 8 × a100 80 GB, whole devices,
--                        64 cpus, 512 GB, 100 Gbit/s;
--                        z1.s2.r3: m1 m2 — 4 × a30 24 GB in 4 slices, 32 cpus, 256 GB, 50 Gbit/s
-- pool spot (opportunistic): z2.s3.r4: s1..s4 — 8 × h100 80 GB in 7 slices, 96 cpus, 768 GB, 200 Gbit/s
-- pool cpu (reserved):   z1.s2.r5: c1 c2 — no devices, 128 cpus, 1024 GB, 25 Gbit/s
-- pool empty (reserved): no nodes
SELECT gangsched.set_topology_levels(ARRAY['zone', 'spine', 'rack']);
SELECT gangsched.add_pool('main', 'reserved'), gangsched.add_pool('spot', 'opportunistic'),
       gangsched.add_pool('cpu', 'reserved'), gangsched.add_pool('empty', 'reserved');
SELECT count(*) AS nodes FROM (
    SELECT gangsched.add_node(n, 'main', t::ltree, 64, 512, 100, 8, 'a100', 80)
      FROM (VALUES ('n1', 'z1.s1.r1'), ('n2', 'z1.s1.r1'), ('n3', 'z1.s1.r2'), ('n4', 'z1.s1.r2')) v(n, t)
    UNION ALL
    SELECT gangsched.add_node(n, 'main', 'z1.s2.r3', 32, 256, 50, 4, 'a30', 24, 4) FROM unnest(ARRAY['m1', 'm2']) n
    UNION ALL
    SELECT gangsched.add_node('s' || i, 'spot', 'z2.s3.r4', 96, 768, 200, 8, 'h100', 80, 7) FROM generate_series(1, 4) i
    UNION ALL
    SELECT gangsched.add_node(n, 'cpu', 'z1.s2.r5', 128, 1024, 25, 0, NULL, NULL) FROM unnest(ARRAY['c1', 'c2']) n) s;
SELECT gangsched.cache_dataset(n, 'imagenet') FROM unnest(ARRAY['n1', 'n2']) n;
SELECT gangsched.cache_dataset('s1', 'c4');
-- vision: 16 GPUs in main, may borrow 8 more; nlp: 16 GPUs and 128 cpus in
-- main, lends at most 4 GPUs (12 are not lendable); free: no quota at all
SELECT gangsched.add_team('vision'), gangsched.add_team('nlp'), gangsched.add_team('free');
SELECT gangsched.set_quota('vision', 'main', 16, borrowing_limit_gpus => 8);
SELECT gangsched.set_quota('nlp', 'main', 16, cpus => 128, lending_limit_gpus => 4);

-- Everything below runs in one transaction, so no scheduling round (a
-- background worker, pg_cron) ever sees these jobs.
BEGIN;

/* ---------------- malformed values ---------------- */

-- unknown team
CALL pg_temp.refused($$SELECT gangsched.submit('nobody', 1, 1)$$);
-- workers
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 0, 1)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', -4, 1)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', NULL, 1)$$);
-- amounts: negative, NaN, infinite, NULL
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, -1)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 'NaN')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 'Infinity')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, cpus => -2)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, cpus => NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, mem_gb => 'NaN')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, mem_gb => -0.001)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, net_gbps => 'Infinity')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, net_gbps => '-Infinity')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, gpu_mem_gb => -1)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, gpu_mem_gb => 'NaN')$$);
-- more than one GPU must be a whole number
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1.5)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 2.25)$$);
-- a worker that asks for nothing
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0, 0, 0, 0)$$);
-- shape: group_size and stages at least 1, workers divisible by their product
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 4, 1, group_size => 0)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 4, 1, group_size => NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 4, 1, stages => -1)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 4, 1, stages => NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 6, 1, group_size => 4)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 8, 1, group_size => 2, stages => 3)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 2, 1, group_size => 100000, stages => 100000)$$);
-- dataset locality
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, dataset => 'imagenet', locality => 'always')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, dataset => 'imagenet', locality => NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, locality => 'required')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, locality => 'preferred')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, dataset => 'laion', locality => 'required')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, dataset => 'laion', locality => 'preferred')$$);
-- priority and preemptible
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, priority => NULL)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, preemptible => NULL)$$);
-- intervals: negative (and zero where zero means nothing)
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, checkpoint_interval => '-5 minutes')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, checkpoint_interval => '0')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, grace => '-1 second')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, queue_timeout => '-1 day')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, queue_timeout => '0')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, queue_timeout => '1 month -40 days')$$);
-- pools
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, pool => 'gpu')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, pool => 'spot', preemptible => false)$$);
-- levels
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, group_span => 'row')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, stage_span => 'aisle')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, span => 'region')$$);
-- spans that do not nest
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 2, 1, group_size => 2, group_span => 'rack', stage_span => 'node')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 2, 1, stage_span => 'rack', span => 'node')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 2, 1, group_span => 'spine', span => 'rack')$$);
-- model
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, gpu_model => 'tpu')$$);

/* ---------------- 53S01: a worker bigger than every eligible node ---------------- */

-- GPUs per worker
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 9)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 5, gpu_model => 'a30')$$);
-- device memory
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, gpu_mem_gb => 96)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0.25, gpu_model => 'a30', gpu_mem_gb => 30)$$);
-- host resources, against the largest eligible node of each
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0, cpus => 129)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0, cpus => 1, mem_gb => 1025)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0, cpus => 1, net_gbps => 201)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, net_gbps => 101, pool => 'main')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, cpus => 65, pool => 'main')$$);
-- each amount fits some node, but no node has all of them together
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, cpus => 100)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 8, gpu_mem_gb => 80, net_gbps => 150, mem_gb => 800)$$);
-- a model only found in a pool the job may not use
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, gpu_model => 'h100', preemptible => false)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, gpu_model => 'a100', pool => 'spot')$$);
-- GPUs asked of a pool without devices
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, pool => 'cpu')$$);

/* ---------------- 53S02: a fraction the devices cannot slice ---------------- */

CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0.3, pool => 'main')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0.5, gpu_model => 'h100')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0.125, gpu_model => 'a30')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0.5, pool => 'cpu')$$);

/* ---------------- 53S03: a group, replica or gang that no domain of its level holds ---------------- */

-- a tensor group bigger than any node
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 16, 1, group_size => 16)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 3, 2, group_size => 3, gpu_model => 'a30')$$);
-- a tensor group bigger than any rack
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 24, 1, group_size => 24, group_span => 'rack', pool => 'main')$$);
-- a pipeline replica bigger than any rack, or than a node
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 24, 1, group_size => 8, stages => 3, stage_span => 'rack', pool => 'main')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 16, 1, group_size => 2, stages => 8, stage_span => 'node')$$);
-- a gang bigger than its span
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 24, 1, span => 'rack', pool => 'main')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 9, 1, span => 'node')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 36, 1, span => 'spine', pool => 'main')$$);

/* ---------------- 53S04: a gang larger than every eligible pool ---------------- */

CALL pg_temp.refused($$SELECT gangsched.submit('vision', 41, 1, pool => 'main')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 41, 1)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 3, 0, cpus => 100)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, pool => 'empty')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 0, cpus => 1, pool => 'empty')$$);
-- tensor groups of 3 on 8-GPU nodes: two groups per node, so 24 workers at
-- most in main's four a100 nodes, though they have 32 GPUs
CALL pg_temp.refused($$SELECT gangsched.submit('nlp', 27, 1, group_size => 3, gpu_model => 'a100', pool => 'main')$$);
-- replicas of 2 × 3 inside a rack of 16 a100 GPUs: two per rack, 24 workers
-- in main at most
CALL pg_temp.refused($$SELECT gangsched.submit('nlp', 30, 1, group_size => 2, stages => 3, stage_span => 'rack', gpu_model => 'a100', pool => 'main')$$);

/* ---------------- 53S05: more than the team could ever hold ---------------- */

-- non-preemptible: only within nominal quota
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 17, 1, preemptible => false)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 17, 1, preemptible => false, pool => 'main')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('free', 1, 1, preemptible => false)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('free', 1, 0, cpus => 1, preemptible => false)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('nlp', 4, 1, cpus => 40, preemptible => false)$$);
-- preemptible: within nominal quota plus the borrowing limit
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 25, 1, pool => 'main')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 13, 2, pool => 'main')$$);
-- preemptible without a borrowing limit: never into other teams' non-lendable quota
CALL pg_temp.refused($$SELECT gangsched.submit('free', 29, 1, pool => 'main')$$);

/* ---------------- 53S06: required locality with too few caching nodes ---------------- */

CALL pg_temp.refused($$SELECT gangsched.submit('vision', 17, 1, dataset => 'imagenet', locality => 'required')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 3, 8, dataset => 'imagenet', locality => 'required')$$);
-- cached only in a pool the job may not use
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, dataset => 'c4', locality => 'required', preemptible => false)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, dataset => 'imagenet', locality => 'required', pool => 'spot')$$);

-- Not one of the refused calls above left a trace.
SELECT (SELECT count(*) FROM gangsched.gangs) AS jobs,
       (SELECT count(*) FROM gangsched.events WHERE job IS NOT NULL) AS job_events,
       (SELECT last_value FROM gangsched.queue_position_seq) AS queue_seq,
       (SELECT is_called FROM gangsched.queue_position_seq) AS queue_seq_used;

/* ---------------- accepted shapes ---------------- */

SET LOCAL gangsched.clock_override = '2030-06-01 08:00:00+00';
-- at the limits refused above
SELECT gangsched.submit('vision', 16, 1, preemptible => false, name => 'nominal');
SELECT gangsched.submit('vision', 24, 1, pool => 'main', name => 'borrow-limit');
SELECT gangsched.submit('free', 28, 1, pool => 'main', name => 'lendable');
SELECT gangsched.submit('vision', 16, 1, dataset => 'imagenet', locality => 'required', name => 'local');
SELECT gangsched.submit('vision', 20, 1, dataset => 'imagenet', locality => 'preferred', name => 'preferred');
SELECT gangsched.submit('vision', 8, 1, span => 'node', name => 'one-node');
SELECT gangsched.submit('nlp', 24, 1, group_size => 3, gpu_model => 'a100', pool => 'main', name => 'groups-of-3');
SELECT gangsched.submit('nlp', 24, 1, group_size => 2, stages => 3, stage_span => 'rack', gpu_model => 'a100',
                        pool => 'main', name => 'replicas-of-6');
-- over vision's quota in main, but spot (no quotas) can hold it
SELECT gangsched.submit('vision', 30, 1, name => 'spills');
-- fractions: a quarter, a half and three quarters of a 4-slice a30, one
-- seventh of a 7-slice h100
SELECT gangsched.submit('vision', 4, 0.25, pool => 'main', name => 'quarter');
SELECT gangsched.submit('vision', 2, 0.5, gpu_model => 'a30', name => 'half');
SELECT gangsched.submit('vision', 2, 0.75, gpu_model => 'a30', name => 'three-quarters');
SELECT gangsched.submit('vision', 7, 1.0 / 7, pool => 'spot', name => 'seventh');
-- CPU-only (a model asked of a worker without GPUs is dropped)
SELECT gangsched.submit('vision', 2, 0, cpus => 16, mem_gb => 64, gpu_model => 'a100', gpu_mem_gb => 40, name => 'cpu-only');
-- 3-D: tensor groups of 4 in a node, 2 pipeline stages in a rack, 3
-- replicas in a spine
SELECT gangsched.submit('vision', 24, 1, group_size => 4, stages => 2, stage_span => 'rack', span => 'spine',
                        pool => 'main', name => '3d');
-- every optional argument, by name
SELECT gangsched.submit(team => 'nlp', workers => 2, gpus => 2, cpus => 8, mem_gb => 64, net_gbps => 25,
                        name => 'everything', priority => 7, preemptible => false, pool => 'main',
                        group_size => 2, group_span => 'node', stages => 1, stage_span => 'spine', span => 'zone',
                        gpu_model => 'a100', gpu_mem_gb => 40, dataset => 'imagenet', locality => 'preferred',
                        checkpoint_interval => '30 minutes', grace => '0', queue_timeout => '2 hours',
                        command => 'torchrun train.py');

SELECT job, team, name, state, workers, gpus, cpus, mem_gb, net_gbps, priority, preemptible, borrowed, pool,
       group_size, group_span, stages, stage_span, span, gpu_model, gpu_mem_gb, dataset, locality
  FROM gangsched.jobs ORDER BY job;
SELECT job, submitted_at = '2030-06-01 08:00:00+00' AS submitted_now, placed_at, started_at, finished_at,
       preempt_deadline, last_checkpoint_at, preemptions, requeues, lost_gpu_seconds, reason, message,
       queue_pos, command, checkpoint_interval, grace, queue_timeout
  FROM gangsched.jobs ORDER BY job;
-- ids and queue positions are dense: refusals burnt none
SELECT count(*) AS jobs, max(job) AS last_job, max(queue_pos) AS last_queue_pos,
       count(*) FILTER (WHERE state = 'pending') AS pending FROM gangsched.jobs;
SELECT kind, reason, count(*) FROM gangsched.events WHERE job IS NOT NULL GROUP BY 1, 2;

/* ---------------- cancel ---------------- */

CALL pg_temp.refused($$SELECT gangsched.cancel(9999)$$);
CALL pg_temp.refused($$SELECT gangsched.cancel(NULL)$$);
SET LOCAL gangsched.clock_override = '2030-06-01 09:00:00+00';
SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE name = 'quarter';
SELECT name, state, finished_at = '2030-06-01 09:00:00+00' AS finished_now, reason
  FROM gangsched.jobs WHERE name = 'quarter';
SELECT e.kind, e.reason FROM gangsched.events e JOIN gangsched.jobs j ON j.job = e.job WHERE j.name = 'quarter' ORDER BY e.id;
-- a job in a final state cannot be cancelled again, nor reported on by agents
SELECT job AS quarter FROM gangsched.jobs WHERE name = 'quarter' \gset
CALL pg_temp.refused(format('SELECT gangsched.cancel(%s)', :quarter));
CALL pg_temp.refused(format('SELECT gangsched.job_finished(%s, true)', :quarter));
-- agents cannot report on a job that is only pending, or that does not exist
SELECT job AS spills FROM gangsched.jobs WHERE name = 'spills' \gset
CALL pg_temp.refused(format('SELECT gangsched.job_started(%s, %L)', :spills, 's1'));
CALL pg_temp.refused(format('SELECT gangsched.job_checkpointed(%s)', :spills));
CALL pg_temp.refused(format('SELECT gangsched.job_finished(%s, false)', :spills));
CALL pg_temp.refused($$SELECT gangsched.job_started(9999, 'n1')$$);
CALL pg_temp.refused($$SELECT gangsched.job_finished(9999, true)$$);

SELECT * FROM gangsched.check_invariants();
ROLLBACK;

/* ---------------- capacity sums on a large pool ---------------- */

-- 2,200 identical CPU-only nodes: a tiny worker fits a million times on
-- each, so the pool holds more workers than a 32-bit integer counts.
SELECT gangsched.add_pool('large', 'reserved');
SELECT count(gangsched.add_node('l' || i, 'large', 'z3.s9.r9', 64, 256, 10, 0, NULL, NULL))
  FROM generate_series(1, 2200) i;
BEGIN;
-- (gangs beyond gangsched.max_workers_per_gang are refused with 53S08; lift
-- the limit for this team so the capacity arithmetic is what is tested)
SELECT gangsched.set_team_limits('free', max_workers_per_gang => 2147483647);
SELECT gangsched.submit('free', 1, 0, cpus => 0.00001, pool => 'large', name => 'tiny') > 0 AS accepted;
SELECT gangsched.submit('free', 2000000000, 0, cpus => 0.00001, pool => 'large', name => 'swarm') > 0 AS accepted;
SELECT gangsched.submit('free', 1200, 0, cpus => 64, group_size => 600, group_span => 'rack', pool => 'large') > 0 AS accepted;
CALL pg_temp.refused($$SELECT gangsched.submit('free', 2147483647, 0, cpus => 0.001, pool => 'large')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('free', 2201, 0, cpus => 64, span => 'rack', pool => 'large')$$);
SELECT * FROM gangsched.check_invariants();
ROLLBACK;

DROP EXTENSION gangsched;
