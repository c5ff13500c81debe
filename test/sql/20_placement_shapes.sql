-- Placement shapes: all-or-nothing gangs, tensor groups inside their
-- group_span, gangs packed into the smallest topology domain, span as a hard
-- limit, pipeline replicas with consecutive stages close together and
-- stage_span as a hard limit. Each scenario starts on a fresh extension and
-- shows the placements themselves (node, devices, ranks), not only counts.
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

-- Three 4-GPU nodes. A one-node job takes n1, then a gang of three 4-GPU
-- workers fits only two thirds of the way: it must not be placed at all.
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', 'r1', 32, 256, 100, 4, 'a100', 80))
  FROM (VALUES ('n1'), ('n2'), ('n3')) v(n);
SELECT gangsched.add_team('t');
SELECT gangsched.submit('t', 1, 4, name => 'first');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(1);
SELECT gangsched.submit('t', 3, 4, name => 'gang3');
SELECT * FROM pg_temp.round();
-- nothing of job 2: no allocation (not even a closed one), no held slot,
-- no 'placed' event; it is pending with the reason it waits
SELECT * FROM pg_temp.traces(2);
SELECT job, state, placed_at, reason FROM gangsched.jobs ORDER BY job;
-- the free nodes are untouched: only job 1's four slots are held
SELECT n.name, h.slot, h.job, h.worker FROM gangsched.held_slots h JOIN gangsched.nodes n ON n.id = h.node_id ORDER BY 1, 2;
SELECT * FROM gangsched.check_invariants();

-- Once job 1 finishes, the gang is placed whole, one worker per node, ranks
-- in node order.
SELECT gangsched.job_finished(1, true);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(2);
SELECT kind, job, detail FROM gangsched.events WHERE kind = 'placed' ORDER BY id;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 2. Tensor groups never split across nodes                           */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', t::ltree, 32, 256, 100, 8, 'a100', 80))
  FROM (VALUES ('a1', 'z1.r1'), ('a2', 'z1.r1'), ('b1', 'z1.r2')) v(n, t);
SELECT gangsched.add_team('t');
-- a filler of one 2-GPU worker per node (cpus 20 of 32 keeps them apart):
-- every node is left with 6 free GPUs, 18 in all
SELECT gangsched.submit('t', 3, 2, cpus => 20, name => 'filler');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(1);

-- 16 workers in tensor groups of 4: 16 GPUs are free, but each node holds
-- only one group of 4 in its 6 free GPUs, so 3 groups fit, not 4. Pending.
SELECT gangsched.submit('t', 16, 1, group_size => 4, name => 'tp16');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.traces(2);
SELECT job, state, reason FROM gangsched.jobs WHERE job = 2;
SELECT * FROM gangsched.check_invariants();
-- the same 16 workers without groups fit (6 + 6 + 4)
SELECT gangsched.cancel(2);
SELECT gangsched.submit('t', 16, 1, name => 'dp16');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.per_node(3);
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(3);

-- 12 workers in groups of 4: exactly one group per node (a splitter would
-- have put 6 + 6 on two nodes). Ranks 0-3, 4-7, 8-11 each on one node.
SELECT gangsched.submit('t', 12, 1, group_size => 4, name => 'tp12');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.per_node(4);
SELECT * FROM pg_temp.w(4);
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(4);

-- 8 workers in groups of 4 fit in one rack (a1 + a2): the gang stays in
-- rack r1, one group per node.
SELECT gangsched.submit('t', 8, 1, group_size => 4, name => 'tp8');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.per_node(5);
SELECT detail FROM gangsched.events WHERE kind = 'placed' AND job = 5;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 3. group_span 'rack': a group may spread over a rack, not beyond    */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', t::ltree, 32, 256, 100, 4, 'a100', 80))
  FROM (VALUES ('a1', 'z1.r1'), ('a2', 'z1.r1'), ('b1', 'z1.r2'), ('b2', 'z1.r2')) v(n, t);
SELECT gangsched.add_team('t');
-- fillers: 2 GPUs on a1 (job 1) and 2 on b1 (job 2); each rack keeps 6 free
SELECT gangsched.submit('t', 1, 2, name => 'fill-a');
SELECT pg_temp.round_on('a1');
SELECT gangsched.submit('t', 1, 2, name => 'fill-b');
SELECT pg_temp.round_on('b1');
SELECT job, node, count(*) AS gpus FROM gangsched.placements GROUP BY job, node ORDER BY job;

-- one tensor group of 8 across nodes of one rack: 12 GPUs are free, but at
-- most 6 in any rack, so it waits
SELECT gangsched.submit('t', 8, 1, group_size => 8, group_span => 'rack', name => 'g8rack');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.traces(3);
SELECT job, state, reason FROM gangsched.jobs WHERE job = 3;
SELECT * FROM gangsched.check_invariants();

-- when the filler on b1 finishes, r2 has 8 free and the group spreads over
-- both of its nodes, never into r1
SELECT gangsched.job_finished(2, true);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(3);
SELECT * FROM gangsched.check_invariants();

-- two groups of 8 with group_span 'rack' on the empty cluster: one group in
-- each rack, never one group over two racks
SELECT gangsched.cancel(3);
SELECT gangsched.job_finished(1, true);
SELECT gangsched.submit('t', 16, 1, group_size => 8, group_span => 'rack', name => 'two-g8');
SELECT * FROM pg_temp.round();
SELECT worker / 8 AS tgroup, string_agg(DISTINCT node, ',') AS nodes, string_agg(DISTINCT subpath(topology, -1)::text, ',') AS racks
  FROM gangsched.placements WHERE job = 4 GROUP BY 1 ORDER BY 1;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 4. Gangs go to the smallest domain that holds them; span is hard    */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', t::ltree, 32, 256, 100, 8, 'a100', 80))
  FROM (VALUES ('a1', 'z1.r1'), ('a2', 'z1.r1'), ('b1', 'z1.r2'), ('b2', 'z1.r2')) v(n, t);
SELECT gangsched.add_team('t');
-- 4 GPUs used on a1 (ties go to the first node): rack r1 has 12 free
-- (a1 4 + a2 8), rack r2 has 16
SELECT gangsched.submit('t', 4, 1, group_size => 4, name => 'fill');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.per_node(1);

-- 16 one-GPU workers fit in rack r2 alone: first fit in node order would
-- have taken a1 + a2 + part of b1 and straddled both racks
SELECT gangsched.submit('t', 16, 1, name => 'dp16');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.per_node(2);
SELECT detail FROM gangsched.events WHERE kind = 'placed' AND job = 2;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(2);

-- 10 workers fit in either rack: best fit takes the fuller rack r1 (12 free)
-- and keeps r2 (16 free) whole
SELECT gangsched.submit('t', 10, 1, name => 'dp10');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.per_node(3);
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(3);

-- Now 10 GPUs used in each rack, 6 free in each.
SELECT gangsched.submit('t', 10, 1, span => 'rack', name => 'fill-r1');
SELECT * FROM pg_temp.round();
SELECT gangsched.submit('t', 10, 1, span => 'rack', name => 'fill-r2');
SELECT * FROM pg_temp.round();
SELECT job, string_agg(DISTINCT subpath(topology, -1)::text, ',') AS racks, count(*) AS workers
  FROM gangsched.placements GROUP BY job ORDER BY job;
-- span => 'rack': 8 workers would have to straddle; they wait, with a
-- reason that names the limit
SELECT gangsched.submit('t', 8, 1, span => 'rack', name => 'span8');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.traces(6);
SELECT job, state, reason FROM gangsched.jobs WHERE job = 6;
SELECT * FROM gangsched.check_invariants();
-- without span the same gang straddles the two racks (zone-level domain)
SELECT gangsched.cancel(6);
SELECT gangsched.submit('t', 8, 1, name => 'free8');
SELECT * FROM pg_temp.round();
SELECT subpath(topology, -1)::text AS rack, count(*) AS workers FROM gangsched.placements WHERE job = 7 GROUP BY 1 ORDER BY 1;
SELECT detail->>'level' AS level, detail->>'domain' AS domain FROM gangsched.events WHERE kind = 'placed' AND job = 7;
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* 5. Pipelines: consecutive stages close together; stage_span         */
/* ================================================================== */

DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', t::ltree, 32, 256, 100, 4, 'a100', 80))
  FROM (VALUES ('a1', 'z1.r1'), ('a2', 'z1.r1'), ('b1', 'z1.r2'), ('b2', 'z1.r2'), ('c1', 'z1.r3'), ('c2', 'z1.r3')) v(n, t);
SELECT gangsched.add_team('t');

-- Stage s of a job, its nodes and racks (ranks s*G .. s*G+G-1).
CREATE FUNCTION pg_temp.stages(j bigint, g int) RETURNS TABLE (stage int, nodes text, racks text)
LANGUAGE sql AS $$
    SELECT worker / g, string_agg(DISTINCT node, ','), string_agg(DISTINCT subpath(topology, -1)::text, ',')
      FROM gangsched.placements WHERE job = j GROUP BY 1 ORDER BY 1 $$;

-- One replica of 4 stages × groups of 2 (8 one-GPU workers) fits in one
-- rack: all its stages share rack r1, consecutive stages share a node.
SELECT gangsched.submit('t', 8, 1, group_size => 2, stages => 4, name => 'pipe1');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.stages(1, 2);
SELECT * FROM gangsched.check_invariants();

-- Fillers: 2 GPUs on b1 (r2 keeps 6 free), all of c1 and 2 of c2 (r3
-- keeps 2 free). r1 is full with pipe1.
SELECT gangsched.submit('t', 1, 2, name => 'fill-b1');
SELECT pg_temp.round_on('b1');
SELECT gangsched.submit('t', 1, 4, name => 'fill-c1');
SELECT pg_temp.round_on('c1');
SELECT gangsched.submit('t', 1, 2, name => 'fill-c2');
SELECT pg_temp.round_on('c2');
SELECT subpath(topology, -1)::text AS rack, count(*) AS used FROM gangsched.placements GROUP BY 1 ORDER BY 1;

-- A replica of 4 stages × 2 no longer fits in one rack (6 free in r2, 2 in
-- r3). It spans both, with consecutive stages together: stages 0-2 in r2,
-- stage 3 in r3. One rack boundary between consecutive stages, not the
-- three an interleaving placement would make.
SELECT gangsched.submit('t', 8, 1, group_size => 2, stages => 4, name => 'pipe2');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.stages(5, 2);
SELECT count(*) AS rack_changes FROM (
    SELECT racks, lag(racks) OVER (ORDER BY stage) AS prev FROM pg_temp.stages(5, 2)) x
 WHERE prev <> racks;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(5);

-- stage_span 'rack': the replica must sit inside one rack; no rack has 8
-- free, so it waits and says so.
SELECT gangsched.submit('t', 8, 1, group_size => 2, stages => 4, stage_span => 'rack', name => 'pipe-rack');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.traces(6);
SELECT job, state, reason FROM gangsched.jobs WHERE job = 6;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(6);

-- Two replicas of 2 stages × 2 (8 workers) with stage_span 'rack': r2
-- holds one replica of 4 (6 free), r3 none (2 free). 8 GPUs are free, but
-- not 4 + 4 inside racks: it waits.
SELECT gangsched.submit('t', 8, 1, group_size => 2, stages => 2, stage_span => 'rack', name => 'two-rack');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.traces(7);
SELECT job, state, reason FROM gangsched.jobs WHERE job = 7;
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(7);
-- without stage_span the same gang is placed across r2 and r3
SELECT gangsched.submit('t', 8, 1, group_size => 2, stages => 2, name => 'two-free');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.stages(8, 2);
SELECT * FROM gangsched.check_invariants();
SELECT gangsched.cancel(8);

-- pipe1 finishes: r1 has 8 free, r2 6, r3 2. Three replicas of 2 stages ×
-- 2 (12 workers) with stage_span 'rack': two replicas in r1, one in r2,
-- each replica inside one rack.
SELECT gangsched.job_finished(1, true);
SELECT gangsched.submit('t', 12, 1, group_size => 2, stages => 2, stage_span => 'rack', name => 'three-rack');
SELECT * FROM pg_temp.round();
SELECT worker / 4 AS replica, string_agg(DISTINCT node, ',') AS nodes, string_agg(DISTINCT subpath(topology, -1)::text, ',') AS racks
  FROM gangsched.placements WHERE job = 9 GROUP BY 1 ORDER BY 1;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
