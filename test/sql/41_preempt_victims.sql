-- Which victims a preemption chooses: whole gangs whose capacity, with what
-- is free, really makes a valid placement for the preemptor; the cheapest
-- such set: lowest priority first, then least lost work (GPU-seconds since
-- the last checkpoint plus gangsched.restart_cost per GPU), then newest;
-- never more victims than needed; topology-aware (a one-rack gang gets
-- victims in one rack, not the cheapest GPUs scattered over racks); host
-- resources count, not only GPUs; device slices (a whole device, not half of
-- two).
-- Lost work is made to differ with job_checkpointed. Each choice is shown
-- from the plan recorded in the 'nominated' event (trigger, victims, lost
-- GPU-seconds); alternatives are tried inside transactions rolled back.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';
SET gangsched.restart_cost = '1min';

-- A round's summary without its duration.
CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, requeued int, note text)
LANGUAGE sql AS $$ SELECT considered, placed, preempted, requeued, note FROM gangsched.run_round() $$;

-- The agent of every node of every placed job confirms it.
CREATE FUNCTION pg_temp.start_all() RETURNS TABLE (started text)
LANGUAGE sql AS $$
    SELECT string_agg(DISTINCT x.name, ',' ORDER BY x.name)
      FROM (SELECT j.name, gangsched.job_started(p.job, p.node)
              FROM (SELECT DISTINCT job, node FROM gangsched.placements ORDER BY job, node) p
              JOIN gangsched.jobs j ON j.job = p.job
             WHERE j.state = 'placed') x $$;

-- The agents of a job report a checkpoint written at `at`.
CREATE FUNCTION pg_temp.ckpt(job_name text, at timestamptz) RETURNS void
LANGUAGE sql AS $$ SELECT gangsched.job_checkpointed(job, at) FROM gangsched.jobs WHERE name = job_name $$;

-- Which jobs hold each node now (holds of nominated jobs in brackets).
CREATE FUNCTION pg_temp.map() RETURNS TABLE (node text, rack text, jobs text)
LANGUAGE sql AS $$
    SELECT n.name, subpath(n.topology, -1)::text,
           COALESCE((SELECT string_agg(DISTINCT g.name || CASE WHEN g.state = 'preempting' THEN '*' ELSE '' END, ',')
                       FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
                      WHERE a.node_id = n.id AND upper_inf(a.during)), '')
        || COALESCE((SELECT ' [' || string_agg(DISTINCT g.name, ',') || ']' FROM gangsched.holds h JOIN gangsched.gangs g ON g.id = h.job
                      WHERE h.node_id = n.id), '')
      FROM gangsched.nodes n ORDER BY n.id $$;

-- The plan recorded with each nomination: trigger, victims by name, and
-- the lost work they cost.
CREATE FUNCTION pg_temp.plans() RETURNS TABLE (preemptor text, trigger text, victims text, lost_gpu_seconds numeric)
LANGUAGE sql AS $$
    SELECT g.name, e.detail->>'trigger',
           (SELECT string_agg(v.name, ',' ORDER BY v.name) FROM jsonb_array_elements_text(e.detail->'victims') x(id)
              JOIN gangsched.gangs v ON v.id = x.id::bigint),
           (e.detail->>'lost_gpu_seconds')::numeric
      FROM gangsched.events e JOIN gangsched.gangs g ON g.id = e.job
     WHERE e.kind = 'nominated' ORDER BY e.id $$;

-- What each candidate would lose if preempted now: GPUs × seconds since
-- its last checkpoint (or start) + GPUs × restart_cost.
CREATE FUNCTION pg_temp.costs() RETURNS TABLE (name text, priority int, gpus numeric, since_checkpoint interval, lost_gpu_seconds numeric)
LANGUAGE sql AS $$
    SELECT name, priority, workers * gpus, gangsched.now() - COALESCE(last_checkpoint_at, started_at),
           round(workers * gpus * (extract(epoch FROM gangsched.now() - COALESCE(last_checkpoint_at, started_at))
                                   + extract(epoch FROM current_setting('gangsched.restart_cost')::interval)), 1)
      FROM gangsched.jobs WHERE state = 'running' ORDER BY job $$;

/* ================================================================== */
/* 1. one large victim rather than three small ones, and the reverse  */
/* ================================================================== */
-- Two 8-GPU nodes. Team a has a nominal quota of 8 GPUs; team b none, so
-- all of b's work is borrowed: large (8 GPUs) on one node, small1..3 (2
-- GPUs each) on the other, 2 GPUs free there. a1 (4 workers × 2 GPUs,
-- within a's quota) needs 6 more GPUs: either large alone, or the three
-- small ones with the 2 free GPUs.
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8);
SELECT gangsched.submit('b', 1, 8, name => 'large');
SELECT gangsched.submit('b', 1, 2, name => 'small' || i) FROM generate_series(1, 3) i;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SELECT * FROM pg_temp.map();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.submit('a', 4, 2, name => 'a1');

-- (a) large checkpointed just now: it would lose only its restart cost,
-- 8 GPUs × 60 s = 480 GPU-seconds; the small ones two minutes ago: 2 ×
-- 120 + 2 × 60 = 360 each. Each small one is cheaper than large, but the
-- three together (1080) are not: large goes.
BEGIN;
SELECT pg_temp.ckpt('large', '2030-01-01 01:00:00+00');
SELECT pg_temp.ckpt('small' || i, '2030-01-01 00:58:00+00') FROM generate_series(1, 3) i;
SELECT * FROM pg_temp.costs();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();
ROLLBACK;

-- (b) large checkpointed ten minutes ago (8 × 600 + 480 = 5280), the small
-- ones as before (1080 together): the three small ones go.
BEGIN;
SELECT pg_temp.ckpt('large', '2030-01-01 00:50:00+00');
SELECT pg_temp.ckpt('small' || i, '2030-01-01 00:58:00+00') FROM generate_series(1, 3) i;
SELECT * FROM pg_temp.costs();
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();
ROLLBACK;

-- (c) the restart cost counts per GPU: all checkpointed just now, only the
-- restart cost is lost: large 8 × 600 = 4800, the small ones 3 × 2 × 600 =
-- 3600: the small ones go.
BEGIN;
SET LOCAL gangsched.restart_cost = '10min';
SELECT pg_temp.ckpt(name, '2030-01-01 01:00:00+00') FROM gangsched.jobs WHERE team = 'b';
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
ROLLBACK;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. lower priority first, whatever the lost work                     */
/* ================================================================== */
-- One team, two 8-GPU nodes: old (priority 1, an hour without a
-- checkpoint) and fresh (priority 5, checkpointed just now). A priority-9
-- job takes old's place although fresh would lose far less work.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('t');
SELECT gangsched.submit('t', 1, 8, name => 'old', priority => 1),
       gangsched.submit('t', 1, 8, name => 'fresh', priority => 5);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT pg_temp.ckpt('fresh', '2030-01-01 01:00:00+00');
SELECT * FROM pg_temp.costs();
SELECT gangsched.submit('t', 1, 8, name => 'urgent', priority => 9);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. equal priority and equal lost work: the newest goes              */
/* ================================================================== */
-- elder started at 00:00, younger at 00:30; both checkpointed at 00:59, so
-- both would lose 8 × 60 + 480 = 960 GPU-seconds. The younger goes.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('t');
SELECT gangsched.submit('t', 1, 8, name => 'elder');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 00:30:00+00';
SELECT gangsched.submit('t', 1, 8, name => 'younger');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT pg_temp.ckpt(n, '2030-01-01 00:59:00+00') FROM unnest(ARRAY['elder', 'younger']) n;
SELECT * FROM pg_temp.costs();
SELECT gangsched.submit('t', 1, 8, name => 'urgent', priority => 9);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 4. never more victims than needed                                   */
/* ================================================================== */
-- n1: keep (6 GPUs, priority 10: not a candidate for a priority-9 job) and
-- c1 (2 GPUs, the cheapest candidate); n2: c2 and c3 (4 GPUs each, c2
-- cheaper). urgent needs 4 GPUs on one node. In cost order c1 comes first
-- but frees too little where it is; c2 alone is enough. c1 must not be
-- preempted along with it.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('t');
SELECT gangsched.submit('t', 1, 6, name => 'keep', priority => 10),
       gangsched.submit('t', 1, 2, name => 'c1'),
       gangsched.submit('t', 1, 4, name => 'c2'),
       gangsched.submit('t', 1, 4, name => 'c3');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SELECT * FROM pg_temp.map();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT pg_temp.ckpt('c1', '2030-01-01 01:00:00+00');
SELECT pg_temp.ckpt('c2', '2030-01-01 00:59:00+00');
SELECT * FROM pg_temp.costs();
SELECT gangsched.submit('t', 1, 4, name => 'urgent', priority => 9);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM pg_temp.map();
SELECT name, state FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5. topology: a one-rack gang gets victims in one rack               */
/* ================================================================== */
-- Racks r1 (n1, n2) and r2 (n3, n4), 8 GPUs per node, all borrowed by b.
-- Lost work if preempted: A (n1) 560, B (n2) 5280, C (n3) 640, D (n4) 960.
-- a1 needs two whole nodes inside one rack (span => 'rack'). The two
-- cheapest victims, A and C, are in different racks and would not do;
-- C and D (1600) free rack r2, cheaper than A and B (5840) in r1.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', r::ltree, 32, 256, 100, 8, 'a100', 80))
  FROM (VALUES ('n1', 'r1'), ('n2', 'r1'), ('n3', 'r2'), ('n4', 'r2')) v(n, r);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 16);
SELECT gangsched.submit('b', 1, 8, name => n) FROM unnest(ARRAY['A', 'B', 'C', 'D']) n;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SELECT * FROM pg_temp.map();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT pg_temp.ckpt('A', '2030-01-01 00:59:50+00'), pg_temp.ckpt('B', '2030-01-01 00:50:00+00'),
       pg_temp.ckpt('C', '2030-01-01 00:59:40+00'), pg_temp.ckpt('D', '2030-01-01 00:59:00+00');
SELECT * FROM pg_temp.costs();
-- without a span the two cheapest do (scattered over both racks)
BEGIN;
SELECT gangsched.submit('a', 2, 8, name => 'anywhere');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();
ROLLBACK;
-- inside one rack: C and D, rack r2
SELECT gangsched.submit('a', 2, 8, name => 'onerack', span => 'rack');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();
-- both release; onerack is placed inside rack r2
SELECT gangsched.job_released(job) FROM gangsched.jobs WHERE name IN ('C', 'D') ORDER BY job;
SELECT * FROM pg_temp.map();
SELECT job, worker, node, topology FROM gangsched.placements
 WHERE job = (SELECT job FROM gangsched.jobs WHERE name = 'onerack') AND device = 0 ORDER BY worker;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 6. host resources count, not only GPUs                              */
/* ================================================================== */
-- n1: hog (CPU-only, 28 of 32 cpus, priority 10: not a candidate) and
-- small (4 GPUs, 2 cpus, cheapest); n2: big (8 GPUs, 2 cpus). urgent needs
-- 8 GPUs and 16 cpus on one node. Preempting small would free 8 GPUs on n1
-- but only 4 cpus: not a placement. big goes, although it costs more.
-- (n2 is drained while hog and small are placed, to put them on n1.)
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('t');
SELECT gangsched.set_node_state('n2', 'draining');
SELECT gangsched.submit('t', 1, 0, cpus => 28, name => 'hog', priority => 10),
       gangsched.submit('t', 1, 4, cpus => 2, name => 'small');
SELECT * FROM pg_temp.round();
SELECT gangsched.set_node_state('n2', 'up');
SELECT gangsched.submit('t', 1, 8, cpus => 2, name => 'big');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SELECT * FROM pg_temp.map();
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT pg_temp.ckpt('small', '2030-01-01 01:00:00+00');
SELECT * FROM pg_temp.costs();
SELECT gangsched.submit('t', 1, 8, cpus => 16, name => 'urgent', priority => 9);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT * FROM pg_temp.map();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 7. device slices: a whole device, not half of two                   */
/* ================================================================== */
-- One node with two devices cut in 4 slices each; four half-GPU jobs of b
-- (borrowed): ha and hb on device 0, hc and hd on device 1. Lost work: ha
-- 60, hb 1830, hc 90, hd 120 (half a GPU each). a1 (a, one whole GPU,
-- within quota) needs a whole device: ha and hc, the two cheapest, free
-- half of each device and would not do; hc and hd (210) free device 1.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('m1', 'main', 'r1', 32, 256, 100, 2, 'a100', 80, gpu_slices => 4);
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 1);
SELECT gangsched.submit('b', 1, 0.5, name => n) FROM unnest(ARRAY['ha', 'hb', 'hc', 'hd']) n;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.start_all();
SELECT j.name, p.device, p.first_slice, p.slices FROM gangsched.placements p JOIN gangsched.jobs j ON j.job = p.job
 ORDER BY p.device, p.first_slice;
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT pg_temp.ckpt('ha', '2030-01-01 00:59:00+00'), pg_temp.ckpt('hb', '2030-01-01 00:00:00+00'),
       pg_temp.ckpt('hc', '2030-01-01 00:58:00+00'), pg_temp.ckpt('hd', '2030-01-01 00:57:00+00');
SELECT * FROM pg_temp.costs();
SELECT gangsched.submit('a', 1, 1, name => 'a1');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.plans();
SELECT h.devices, h.first_slice, h.slices FROM gangsched.holds h;
SELECT gangsched.job_released(job) FROM gangsched.jobs WHERE name IN ('hc', 'hd') ORDER BY job;
SELECT j.name, j.state, p.device, p.first_slice, p.slices FROM gangsched.placements p JOIN gangsched.jobs j ON j.job = p.job
 ORDER BY p.device, p.first_slice;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
