-- Placement fit: fractional GPUs in whole slices, per-worker cpus/mem/net
-- bound on the node, best fit that keeps whole nodes whole, GPU model and
-- memory, dataset locality, node states and pool kinds. Each scenario
-- starts on a fresh extension and shows the placements themselves.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
-- agents confirm nothing here; placed jobs must not be requeued meanwhile
SET gangsched.start_timeout = '1d';

-- Virtual time: move the scheduler's clock on by some minutes.
CREATE FUNCTION pg_temp.tick(minutes int DEFAULT 1) RETURNS void
LANGUAGE sql AS $$ SELECT set_config('gangsched.clock_override', (gangsched.now() + make_interval(mins => minutes))::text, false) $$;

-- A round's summary without its duration; a minute of virtual time passes
-- after each round (agents finish and users cancel later than placement).
CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, workers_placed int, note text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT r.considered, r.placed, r.workers_placed, r.note FROM gangsched.run_round() r;
    PERFORM pg_temp.tick();
END $$;

-- One row per worker of a job: rank, node, its rack (last topology label)
-- and its devices ('2' = whole device 2; '1[0+2]' = slices 0..1 of device 1).
CREATE FUNCTION pg_temp.w(j bigint) RETURNS TABLE (worker int, node text, rack text, devices text)
LANGUAGE sql AS $$
    SELECT p.worker, p.node, subpath(p.topology, -1)::text,
           string_agg(p.device::text || CASE WHEN p.slices < n.gpu_slices
                                             THEN '[' || p.first_slice || '+' || p.slices || ']' ELSE '' END,
                      ',' ORDER BY p.device)
      FROM gangsched.placements p JOIN gangsched.nodes n ON n.name = p.node
     WHERE p.job = j GROUP BY p.worker, p.node, p.topology ORDER BY p.worker $$;

-- A round in which only the named nodes take work (the others drain for
-- its duration): lays out fillers exactly where a scenario needs them.
CREATE FUNCTION pg_temp.round_on(VARIADIC nodes text[]) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    others text[];
    n      text;
    placed int;
BEGIN
    SELECT array_agg(name ORDER BY name) INTO others FROM gangsched.nodes WHERE name <> ALL (round_on.nodes) AND state = 'up';
    FOREACH n IN ARRAY COALESCE(others, '{}') LOOP
        PERFORM gangsched.set_node_state(n, 'draining');
    END LOOP;
    SELECT r.placed INTO placed FROM gangsched.run_round() r;
    FOREACH n IN ARRAY COALESCE(others, '{}') LOOP
        PERFORM gangsched.set_node_state(n, 'up');
    END LOOP;
    PERFORM pg_temp.tick();
    RETURN placed;
END $$;

-- Workers of a job per node: which ranks sit on each node.
CREATE FUNCTION pg_temp.per_node(j bigint) RETURNS TABLE (node text, ranks int[])
LANGUAGE sql AS $$
    SELECT node, array_agg(DISTINCT worker ORDER BY worker) FROM gangsched.placements
     WHERE job = j GROUP BY node ORDER BY min(worker) $$;

-- Everything a job holds or left behind: allocations (current and past),
-- held slots, and 'placed' events.
CREATE FUNCTION pg_temp.traces(j bigint) RETURNS TABLE (allocations bigint, held_slots bigint, placed_events bigint)
LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM gangsched.allocations a WHERE a.job = j),
           (SELECT count(*) FROM gangsched.held_slots h WHERE h.job = j),
           (SELECT count(*) FROM gangsched.events e WHERE e.job = j AND e.kind = 'placed') $$;

/* ================================================================== */
/* 1. All or nothing                                                   */
/* ================================================================== */
/* ================================================================== */
/* 1. Fractional GPUs take whole slices of one device                  */
/* ================================================================== */

SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
-- m0-whole comes first in node order but has whole-only devices; m1 has
-- four devices of 4 slices each
SELECT gangsched.add_node('m0-whole', 'main', 'r1', 32, 256, 100, 4, 'a100', 80, 1);
SELECT gangsched.add_node('m1', 'main', 'r1', 32, 256, 100, 4, 'a100', 80, 4);
SELECT gangsched.add_team('t');

-- five quarter-GPU workers: four share device 0 of m1 (one slice each), the
-- fifth takes a slice of device 1; nothing on the whole-only node
SELECT gangsched.submit('t', 5, 0.25, name => 'quarters');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(1);
SELECT * FROM gangsched.check_invariants();

-- a half GPU takes 2 slices, on the partly used device 1 (best fit), not on
-- a whole device
SELECT gangsched.submit('t', 1, 0.5, name => 'half');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(2);
-- device 1 now has one free slice left; devices 2 and 3 are whole
SELECT n.name, h.slot / 8 AS device, array_agg(h.slot % 8 ORDER BY h.slot) AS slices, array_agg(DISTINCT h.job) AS jobs
  FROM gangsched.held_slots h JOIN gangsched.nodes n ON n.id = h.node_id GROUP BY 1, 2 ORDER BY 1, 2;
SELECT * FROM gangsched.check_invariants();

-- Whole-GPU workers never take a partly used device. m1 has devices 2 and 3
-- whole and device 1 with a free slice; the whole-only node is full after
-- 'fill-w'. Three whole-GPU workers on m1 would need device 1: they wait.
SELECT gangsched.submit('t', 1, 4, name => 'fill-w');
SELECT pg_temp.round_on('m0-whole');
SELECT gangsched.submit('t', 3, 1, name => 'three-whole');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.traces(4);
SELECT job, state FROM gangsched.jobs WHERE job = 4;
SELECT gangsched.cancel(4);
-- two whole-GPU workers fit, on devices 2 and 3
SELECT gangsched.submit('t', 2, 1, name => 'two-whole');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(5);
SELECT * FROM gangsched.check_invariants();
-- the last free slice (device 1, slice 3) still takes a quarter worker
SELECT gangsched.submit('t', 1, 0.25, name => 'last-quarter');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(6);
SELECT gangsched.submit('t', 1, 0.25, name => 'no-more');
SELECT * FROM pg_temp.round();
SELECT job, state FROM gangsched.jobs WHERE job = 7;
SELECT count(*) AS held, count(DISTINCT (node_id, slot)) AS distinct_slots FROM gangsched.held_slots;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. cpus, mem and net are bound per worker on the node               */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', 'r1', 32, 256, 100, 8, 'a100', 80))
  FROM (VALUES ('c1'), ('c2'), ('c3'), ('c4')) v(n);
SELECT gangsched.add_team('t');
-- three hogs, each with 4 GPUs and all of one host resource of its node:
-- c1 has free GPUs but no free cpus, c2 no free mem, c3 no free net
SELECT gangsched.submit('t', 1, 4, cpus => 32, name => 'cpu-hog');
SELECT pg_temp.round_on('c1');
SELECT gangsched.submit('t', 1, 4, mem_gb => 256, name => 'mem-hog');
SELECT pg_temp.round_on('c2');
SELECT gangsched.submit('t', 1, 4, net_gbps => 100, name => 'net-hog');
SELECT pg_temp.round_on('c3');
SELECT job, node, count(*) AS gpus, min(cpus) AS cpus, min(mem_gb) AS mem_gb, min(net_gbps) AS net_gbps
  FROM gangsched.placements GROUP BY job, node ORDER BY job;

-- Best fit alone would take c1 (4 free GPUs, the fewest, and first): a
-- CPU-heavy worker must not land there. It goes to c2, the next best.
SELECT gangsched.submit('t', 1, 1, cpus => 8, name => 'cpu-heavy');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(4);
-- a mem-heavy worker skips c2 (no mem): c1 has the fewest free GPUs
SELECT gangsched.submit('t', 1, 1, mem_gb => 64, name => 'mem-heavy');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(5);
-- a net-heavy worker skips c3 (no net)
SELECT gangsched.submit('t', 1, 1, net_gbps => 10, name => 'net-heavy');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(6);
-- one worker asking for a bit of all three only fits on c4
SELECT gangsched.submit('t', 1, 1, cpus => 1, mem_gb => 1, net_gbps => 1, name => 'all-three');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(7);
-- a gang of 2 CPU-heavy workers of 16 cpus: c1 has no cpus left, c2 24
-- (room for one), c4 31 (one), c3 32 (two): the gang goes to one node, c3,
-- never to c1's free GPUs.
SELECT gangsched.submit('t', 2, 1, cpus => 16, name => 'cpu-gang');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(8);
SELECT n.name, n.cpus, sum(a.cpus) AS cpus_used, n.mem_gb, sum(a.mem_gb) AS mem_used, n.net_gbps, sum(a.net_gbps) AS net_used
  FROM gangsched.nodes n JOIN gangsched.allocations a ON a.node_id = n.id AND upper_inf(a.during)
 GROUP BY n.name, n.cpus, n.mem_gb, n.net_gbps ORDER BY 1;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. Best fit keeps whole nodes whole for later large gangs           */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', 'r1', 32, 256, 100, 8, 'a100', 80))
  FROM (VALUES ('n1'), ('n2')) v(n);
SELECT gangsched.add_team('t');
-- n2 (second in node order) is half used; n1 is empty
SELECT gangsched.submit('t', 1, 4, name => 'half-n2');
SELECT pg_temp.round_on('n2');
-- In one round: a 4-GPU job, then a full-node 8-GPU job. First fit would put
-- the small one on n1 and leave no node with 8 free; best fit puts it on the
-- partly used n2 and the full-node job gets n1 whole.
SELECT gangsched.submit('t', 1, 4, name => 'small');
SELECT gangsched.submit('t', 1, 8, name => 'full-node');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(2);
SELECT * FROM pg_temp.w(3);
SELECT * FROM gangsched.check_invariants();

-- The same at the device level with fractions: a quarter worker goes to
-- the partly sliced device, and devices stay whole for whole-GPU work.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('s1', 'main', 'r1', 32, 256, 100, 2, 'a100', 80, 4);
SELECT gangsched.add_node('s2', 'main', 'r1', 32, 256, 100, 2, 'a100', 80, 4);
SELECT gangsched.add_team('t');
-- a half GPU on s2 (device 0, slices 0-1)
SELECT gangsched.submit('t', 1, 0.5, name => 'half');
SELECT pg_temp.round_on('s2');
SELECT * FROM pg_temp.w(1);
-- three quarters and then a 2-GPU worker in one round: the quarters go to
-- the device with the fewest free slices that holds them (s2's device 0,
-- then s2's device 1), and the 2-GPU worker still finds s1 whole
SELECT gangsched.submit('t', 3, 0.25, name => 'quarters');
SELECT gangsched.submit('t', 1, 2, name => 'two-gpus');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(2);
SELECT * FROM pg_temp.w(3);
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 4. GPU model and memory                                             */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
-- node order: a40 (a100 40 GB), a80 (a100 80 GB), h80 (h100 80 GB)
SELECT gangsched.add_node('a40', 'main', 'r1', 32, 256, 100, 4, 'a100', 40);
SELECT gangsched.add_node('a80', 'main', 'r1', 32, 256, 100, 4, 'a100', 80);
SELECT gangsched.add_node('h80', 'main', 'r1', 32, 256, 100, 4, 'h100', 80);
SELECT gangsched.add_team('t');
SELECT gangsched.submit('t', 1, 1, gpu_model => 'h100', name => 'h100');
SELECT gangsched.submit('t', 1, 1, gpu_mem_gb => 80, name => 'mem80');
SELECT gangsched.submit('t', 1, 1, gpu_model => 'a100', gpu_mem_gb => 60, name => 'a100-60');
SELECT gangsched.submit('t', 1, 1, name => 'any');
SELECT * FROM pg_temp.round();
SELECT j.job, j.name, p.node FROM gangsched.jobs j JOIN gangsched.placements p ON p.job = j.job ORDER BY j.job;
-- one more h100 worker fills h80; the next h100 job waits although a40 and
-- a80 have free GPUs
SELECT gangsched.submit('t', 1, 1, gpu_model => 'h100', name => 'h100-last');
SELECT gangsched.submit('t', 1, 1, gpu_model => 'h100', name => 'h100-more');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.per_node(5);
SELECT node, count(*) AS gpus_used FROM gangsched.placements GROUP BY node ORDER BY node;
SELECT job, state FROM gangsched.jobs WHERE job = 6;
SELECT * FROM pg_temp.traces(6);
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5. Dataset locality                                                 */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', t::ltree, 32, 256, 100, 8, 'a100', 80))
  FROM (VALUES ('n1', 'z1.r1'), ('n2', 'z1.r1'), ('n3', 'z1.r2'), ('n4', 'z1.r2')) v(n, t);
SELECT gangsched.add_team('t');
SELECT gangsched.cache_dataset('n2', 'imagenet');
SELECT gangsched.cache_dataset('n3', 'imagenet');

-- required: only on caching nodes (n1 comes first and best fit ties)
SELECT gangsched.submit('t', 1, 8, dataset => 'imagenet', locality => 'required', name => 'req1');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.per_node(1);
-- preferred: also a caching node, the other one (n3)
SELECT gangsched.submit('t', 1, 8, dataset => 'imagenet', locality => 'preferred', name => 'pref1');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.per_node(2);
-- both caching nodes are full: a required job waits with free nodes around,
-- a preferred one runs elsewhere
SELECT gangsched.submit('t', 1, 8, dataset => 'imagenet', locality => 'required', name => 'req2');
SELECT gangsched.submit('t', 1, 8, dataset => 'imagenet', locality => 'preferred', name => 'pref2');
SELECT * FROM pg_temp.round();
SELECT job, name, state FROM gangsched.jobs WHERE job IN (3, 4) ORDER BY job;
SELECT * FROM pg_temp.traces(3);
SELECT * FROM pg_temp.per_node(4);
SELECT * FROM gangsched.check_invariants();
-- clear the cluster
SELECT gangsched.job_finished(job, true) FROM gangsched.jobs WHERE state = 'placed' ORDER BY job;
SELECT gangsched.cancel(3);
-- A preferred gang of two full nodes: the caching nodes n2 and n3 are in
-- different racks, while rack r1 (n1, n2) holds the gang alone. Tightness
-- comes first: it goes to one rack, not to the two caching nodes.
SELECT gangsched.submit('t', 2, 8, dataset => 'imagenet', locality => 'preferred', name => 'pref-gang');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(5);
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.job_finished(5, true);
-- A preferred single-node job when the caching node is the worse fit: n3
-- caches it and is empty, n4 is half used. The preferred job still goes to
-- the caching node, as tightly held (one node either way).
SELECT gangsched.evict_dataset('n2', 'imagenet');
SELECT gangsched.submit('t', 1, 4, name => 'half-n4');
SELECT pg_temp.round_on('n4');
SELECT gangsched.submit('t', 1, 4, dataset => 'imagenet', locality => 'preferred', name => 'pref-small');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(7);
-- without locality the same job takes the best fit, n4
SELECT gangsched.cancel(7);
SELECT gangsched.submit('t', 1, 4, name => 'plain-small');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(8);
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 6. Draining and down nodes get nothing                              */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', 'r1', 32, 256, 100, 4, 'a100', 80))
  FROM (VALUES ('n1'), ('n2'), ('n3')) v(n);
SELECT gangsched.add_team('t');
-- a job on n1 keeps running while n1 drains
SELECT gangsched.submit('t', 1, 2, name => 'on-n1');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(1);
SELECT gangsched.set_node_state('n1', 'draining');
SELECT gangsched.set_node_state('n2', 'down');
-- three one-GPU workers: n1 (2 free, best fit) drains, n2 is down: n3 only
SELECT gangsched.submit('t', 3, 1, name => 'three');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(2);
-- a gang of two 4-GPU workers needs two nodes: only n3 is up; it waits
SELECT gangsched.submit('t', 2, 4, name => 'two-nodes');
SELECT * FROM pg_temp.round();
SELECT job, state FROM gangsched.jobs ORDER BY job;
SELECT * FROM pg_temp.traces(3);
-- the draining node kept its job; nothing new went to n1 or n2
SELECT node, array_agg(DISTINCT job ORDER BY job) AS jobs FROM gangsched.placements GROUP BY node ORDER BY node;
SELECT * FROM gangsched.check_invariants();
-- back up: the gang is placed (job 2 has 1 GPU left on n3, so n1 and n2)
SELECT gangsched.set_node_state('n1', 'up');
SELECT gangsched.set_node_state('n2', 'up');
SELECT gangsched.job_finished(1, true);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(3);
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 7. Pools: kinds and pool => X                                       */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('res', 'reserved');
SELECT gangsched.add_pool('opp', 'opportunistic');
-- two opportunistic nodes (o1, o2) and one reserved node (r1)
SELECT gangsched.add_node('o1', 'opp', 'r1', 32, 256, 100, 4, 'a100', 80);
SELECT gangsched.add_node('o2', 'opp', 'r1', 32, 256, 100, 4, 'a100', 80);
SELECT gangsched.add_node('r1', 'res', 'r2', 32, 256, 100, 4, 'a100', 80);
SELECT gangsched.add_team('t');
SELECT gangsched.set_quota('t', 'res', 8);
-- non-preemptible: only in the reserved pool
SELECT gangsched.submit('t', 1, 2, preemptible => false, name => 'np1');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(1);
-- a second one that does not fit what is left of r1 waits, although the
-- opportunistic nodes are empty
SELECT gangsched.submit('t', 1, 4, preemptible => false, name => 'np2');
SELECT * FROM pg_temp.round();
SELECT job, state FROM gangsched.jobs WHERE job = 2;
SELECT * FROM pg_temp.traces(2);
SELECT gangsched.cancel(2);
-- pool => 'res' only in res; pool => 'opp' only in opp
SELECT gangsched.submit('t', 1, 2, pool => 'res', name => 'in-res');
SELECT gangsched.submit('t', 1, 1, pool => 'opp', name => 'in-opp');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(3);
SELECT * FROM pg_temp.w(4);
-- res is full now; a pool => 'res' job waits with opp nodes free
SELECT gangsched.submit('t', 1, 1, pool => 'res', name => 'res-full');
SELECT * FROM pg_temp.round();
SELECT job, state FROM gangsched.jobs WHERE job = 5;
SELECT gangsched.cancel(5);
-- A gang never spans pools. Free r1 (jobs 1 and 3 end) and fill o1: one
-- free node in each pool, o2 and r1. Two 4-GPU workers wait.
SELECT gangsched.job_finished(1, true);
SELECT gangsched.job_finished(3, true);
SELECT gangsched.submit('t', 1, 3, pool => 'opp', name => 'fill-o1');
SELECT pg_temp.round_on('o1');
SELECT node, array_agg(DISTINCT job ORDER BY job) AS jobs, count(*) AS gpus_used FROM gangsched.placements GROUP BY node ORDER BY node;
SELECT gangsched.submit('t', 2, 4, name => 'two-pools');
SELECT * FROM pg_temp.round();
SELECT job, state FROM gangsched.jobs WHERE job = 7;
SELECT * FROM pg_temp.traces(7);
SELECT * FROM gangsched.check_invariants();
-- with o1 free again both workers fit in opp
SELECT gangsched.job_finished(4, true);
SELECT gangsched.job_finished(6, true);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(7);
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
