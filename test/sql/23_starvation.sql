-- Starvation guard: the first job in order that does not fit gets a
-- reservation of the capacity it waits for. A stream of smaller jobs
-- arriving behind it, with running jobs finishing between rounds, cannot
-- take that capacity, so the large gang is placed as soon as enough is
-- free; smaller jobs still backfill into capacity outside the reservation.
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
-- Which job holds each node (GPU jobs), '-' for an idle node.
CREATE FUNCTION pg_temp.nodes() RETURNS TABLE (node text, gpus int, jobs text)
LANGUAGE sql AS $$
    SELECT n.name, n.gpus, COALESCE((SELECT string_agg(DISTINCT g.name, ',' ORDER BY g.name)
                                       FROM gangsched.placements p JOIN gangsched.gangs g ON g.id = p.job
                                      WHERE p.node = n.name), '-')
      FROM gangsched.nodes n ORDER BY n.name $$;

-- The jobs that are not final, with their state and waiting reason.
CREATE FUNCTION pg_temp.live() RETURNS TABLE (job bigint, name text, state text, reason text)
LANGUAGE sql AS $$
    SELECT job, name, state, reason FROM gangsched.jobs
     WHERE state NOT IN ('finished', 'failed', 'cancelled', 'expired') ORDER BY job $$;

-- An agent's view: start every placed job on all its nodes.
CREATE FUNCTION pg_temp.start_all() RETURNS int
LANGUAGE sql AS $$
    SELECT count(gangsched.job_started(p.job, p.node))::int
      FROM (SELECT DISTINCT p.job, p.node FROM gangsched.placements p
              JOIN gangsched.gangs g ON g.id = p.job WHERE g.state = 'placed' ORDER BY 1, 2) p $$;

SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
-- five 4-GPU nodes; s6 has only 2 GPUs, too small for a worker of the gang
SELECT count(gangsched.add_node(n, 'main', 'r1', 32, 256, 100, g, 'a100', 80))
  FROM (VALUES ('n1', 4), ('n2', 4), ('n3', 4), ('n4', 4), ('n5', 4), ('s6', 2)) v(n, g);
SELECT gangsched.add_team('t');

-- The cluster is busy: five one-node jobs run on n1..n5 (jobs 1-5).
SELECT gangsched.submit('t', 1, 4, name => 'small-' || i) FROM generate_series(1, 5) i;
SELECT * FROM pg_temp.round();
SELECT pg_temp.start_all();
SELECT * FROM pg_temp.nodes();

-- The big gang (job 6): three 4-GPU workers, first in line, does not fit.
SELECT gangsched.submit('t', 3, 4, name => 'big');
SELECT * FROM pg_temp.round();
SELECT job, state, reason FROM gangsched.jobs WHERE job = 6;
SELECT kind, reason FROM gangsched.events WHERE job = 6 AND kind = 'reserved' ORDER BY id DESC LIMIT 1;

-- Now a stream: each step one running job finishes, a new one-node job
-- arrives behind the big gang, and a round runs. The node that frees is
-- kept for the big gang; the newcomer waits.

-- step 1: small-1 (n1) finishes, more-1 arrives
SELECT gangsched.job_finished(1, true);
SELECT gangsched.submit('t', 1, 4, name => 'more-1');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.check_invariants();

-- step 2: small-2 (n2) finishes, more-2 arrives
SELECT gangsched.job_finished(2, true);
SELECT gangsched.submit('t', 1, 4, name => 'more-2');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.check_invariants();

-- meanwhile small jobs that fit outside the kept capacity still run: two
-- one-GPU jobs on s6, which the big gang cannot use (a 2-GPU node cannot
-- hold a 4-GPU worker); a third has no room left and waits
SELECT gangsched.submit('t', 1, 1, name => 'side-' || i) FROM generate_series(1, 3) i;
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.check_invariants();

-- step 3: small-4 (n4) finishes, more-3 arrives: three nodes are free, the
-- big gang is placed on them, the newcomers still wait behind it
SELECT gangsched.job_finished(4, true);
SELECT gangsched.submit('t', 1, 4, name => 'more-3');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.w(6);
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.check_invariants();

-- Its events tell the story: capacity was kept for it from its first round
-- on, and it was placed in the round after the third node freed.
SELECT kind, min(at) AS first FROM gangsched.events
 WHERE job = 6 AND kind IN ('reserved', 'placed') GROUP BY kind ORDER BY first;

-- After it, the stream goes in queue order as capacity frees: small-3 and
-- small-5 finish, more-1 and more-2 (the oldest waiting) get n3 and n5.
SELECT pg_temp.start_all();
SELECT gangsched.job_finished(3, true);
SELECT gangsched.job_finished(5, true);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.check_invariants();

/* ================================================================== */
/* Without a first-in-line job that cannot fit, nothing is kept        */
/* ================================================================== */

-- A gang that could not fit even on the empty cluster as it is (a node is
-- down) keeps nothing: later jobs take the free capacity.
DROP EXTENSION gangsched;
CREATE EXTENSION gangsched;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node(n, 'main', 'r1', 32, 256, 100, 4, 'a100', 80))
  FROM (VALUES ('n1'), ('n2'), ('n3')) v(n);
SELECT gangsched.add_team('t');
SELECT gangsched.set_node_state('n3', 'down');
SELECT gangsched.submit('t', 3, 4, name => 'needs-n3');
SELECT gangsched.submit('t', 1, 4, name => 'small');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT count(*) AS reserved_events FROM gangsched.events WHERE kind = 'reserved';
SELECT * FROM gangsched.check_invariants();

-- n3 is back: needs-n3 would fit the empty cluster now and is guarded;
-- second-big behind it is not (one guarded job per round). When small
-- finishes, needs-n3 is placed first and second-big becomes the guarded one.
SELECT gangsched.set_node_state('n3', 'up');
SELECT gangsched.submit('t', 2, 4, name => 'second-big');
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.live();
SELECT job, reason FROM gangsched.jobs WHERE job IN (1, 3) ORDER BY job;
SELECT gangsched.job_finished(2, true);
SELECT * FROM pg_temp.round();
SELECT * FROM pg_temp.nodes();
SELECT * FROM pg_temp.live();
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
