-- Fairness, quotas and pools (issue 4): the queue and team_shares views and
-- their columns, the queue_order setting, and a tiny scenario: the DRF
-- paper's example in the queue's order and after a round, then a quota
-- with a borrowing limit. Runs in one transaction, rolled back.
BEGIN;
SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gangsched CASCADE;
SELECT plan(28);

SET LOCAL TimeZone = 'UTC';
SET LOCAL gangsched.clock_override = '2030-01-01 00:00:00+00';
SET LOCAL gangsched.start_timeout = '1d';
SET LOCAL gangsched.preemption = off;

/* ---------------- the views ---------------- */

SELECT has_view('gangsched', 'queue', 'view gangsched.queue exists');
SELECT columns_are('gangsched', 'queue',
                   ARRAY['position', 'job', 'team', 'name', 'priority', 'workers', 'gpus', 'preemptible',
                         'dominant_share', 'would_borrow', 'fits_now', 'reason', 'submitted_at', 'las_queue',
                         'attained_gpu_seconds', 'path', 'depth', 'parent', 'expected_start'],
                   'queue has its columns');
SELECT col_type_is('gangsched', 'queue', 'expected_start', 'timestamp with time zone', 'queue.expected_start is timestamptz');
SELECT has_view('gangsched', 'team_shares', 'view gangsched.team_shares exists');
SELECT columns_are('gangsched', 'team_shares',
                   ARRAY['team', 'pool', 'weight', 'nominal_gpus', 'nominal_cpus', 'nominal_mem_gb', 'nominal_net_gbps',
                         'borrowing_limit_gpus', 'lending_limit_gpus', 'used_gpus', 'used_cpus', 'used_mem_gb',
                         'used_net_gbps', 'borrowed_gpus', 'lent_gpus', 'dominant_share', 'path', 'depth', 'parent',
                         'fair_share'],
                   'team_shares has its columns');
SELECT col_type_is('gangsched', 'queue', 'would_borrow', 'boolean', 'queue.would_borrow is boolean');
SELECT col_type_is('gangsched', 'queue', 'dominant_share', 'numeric', 'queue.dominant_share is numeric');
SELECT col_type_is('gangsched', 'queue', 'las_queue', 'integer', 'queue.las_queue is integer');
SELECT col_type_is('gangsched', 'queue', 'attained_gpu_seconds', 'double precision', 'queue.attained_gpu_seconds is float8');
SELECT is(current_setting('gangsched.team_order'), 'fifo', 'the team order is fifo by default');

/* ---------------- gangsched.queue_order ---------------- */

SELECT is(current_setting('gangsched.queue_order'), 'fair', 'the queue order is fair by default');
SELECT throws_ok($$SET LOCAL gangsched.queue_order = 'random'$$, '22023', NULL, 'an unknown queue order is refused');

/* ---------------- the DRF paper's example ---------------- */

-- One node of 9 CPUs and 18 GB, no GPUs, no quotas; A's tasks <1 CPU, 4 GB>,
-- B's <3 CPUs, 1 GB>, ten each (jobs 1-10 A, 11-20 B).
SELECT lives_ok($$SELECT gangsched.set_topology_levels(ARRAY['rack']);
                  SELECT gangsched.add_pool('main', 'reserved');
                  SELECT gangsched.add_node('cpu1', 'main', 'r1', 9, 18, 0, 0, NULL, NULL);
                  SELECT gangsched.add_team('A');
                  SELECT gangsched.add_team('B');
                  SELECT gangsched.submit('A', 1, 0, cpus => 1, mem_gb => 4) FROM generate_series(1, 10);
                  SELECT gangsched.submit('B', 1, 0, cpus => 3, mem_gb => 1) FROM generate_series(1, 10)$$,
                'the DRF example is set up');
SELECT results_eq(
    $$SELECT position, job, team, dominant_share, fits_now FROM gangsched.queue WHERE position <= 6 ORDER BY position$$,
    $$VALUES (1, 1::bigint, 'A', 0.0000::numeric, true), (2, 11, 'B', 0.0000, true), (3, 2, 'A', 0.2222, true),
             (4, 12, 'B', 0.3333, true), (5, 3, 'A', 0.4444, true), (6, 4, 'A', 0.6667, false)$$,
    'the queue alternates by dominant share');
SELECT is((SELECT count(*) FROM gangsched.queue), 20::bigint, 'every pending job is in the queue once');
SELECT results_eq($$SELECT placed FROM gangsched.run_round()$$, ARRAY[5], 'the round places five jobs');
SELECT results_eq(
    $$SELECT team, count(*) FROM gangsched.jobs WHERE state = 'placed' GROUP BY team ORDER BY team$$,
    $$VALUES ('A', 3::bigint), ('B', 2::bigint)$$,
    'A runs 3 and B runs 2');
SELECT results_eq(
    $$SELECT team, used_cpus, used_mem_gb, dominant_share FROM gangsched.team_shares ORDER BY team$$,
    $$VALUES ('A', 3::numeric, 12::numeric, 0.6667::numeric), ('B', 6, 2, 0.6667)$$,
    'team_shares: equal dominant shares of 2/3');
SELECT is_empty('SELECT * FROM gangsched.check_invariants()', 'no invariant violated after the DRF round');

/* ---------------- a quota with a borrowing limit ---------------- */

-- Pool gpu: 8 GPUs. Team C: nominal 2, borrowing limit 1. Four 1-GPU jobs
-- (21-24): 21, 22 guaranteed, 23 borrowed, 24 refused by the limit. The
-- DRF example's waiting jobs are cancelled first (they would fit there).
SELECT lives_ok($$SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE state = 'pending';
                  SELECT gangsched.add_pool('gpu', 'reserved');
                  SELECT gangsched.add_node('g1', 'gpu', 'r2', 64, 512, 100, 8, 'a100', 80);
                  SELECT gangsched.add_team('C');
                  SELECT gangsched.set_quota('C', 'gpu', 2, borrowing_limit_gpus => 1);
                  SELECT gangsched.submit('C', 1, 1, pool => 'gpu') FROM generate_series(1, 4)$$,
                'team C and its quota are set up');
SELECT results_eq(
    $$SELECT job, would_borrow FROM gangsched.queue WHERE team = 'C' ORDER BY position$$,
    $$VALUES (21::bigint, false), (22, false), (23, true), (24, true)$$,
    'guaranteed jobs come before borrowing ones');
SELECT results_eq($$SELECT placed FROM gangsched.run_round()$$, ARRAY[3], 'the round places three of them');
SELECT results_eq(
    $$SELECT job, state, borrowed FROM gangsched.jobs WHERE team = 'C' ORDER BY job$$,
    $$VALUES (21::bigint, 'placed', false), (22, 'placed', false), (23, 'placed', true), (24, 'pending', false)$$,
    'two guaranteed, one borrowed, one held back by the borrowing limit');
SELECT results_eq(
    $$SELECT p.borrowed, count(*) FROM gangsched.placements p JOIN gangsched.jobs j USING (job) WHERE j.team = 'C' GROUP BY p.borrowed ORDER BY p.borrowed$$,
    $$VALUES (false, 2::bigint), (true, 1::bigint)$$,
    'placements record which workers are borrowed');
SELECT results_eq(
    $$SELECT * FROM gangsched.why_pending(24)$$,
    $$VALUES ('quota'::text, 'team C holds 3 GPUs in pool gpu and may not borrow 1 more: nominal quota 2, borrowing limit 1'::text)$$,
    'why_pending names the borrowing limit');
SELECT results_eq(
    $$SELECT nominal_gpus, borrowing_limit_gpus, used_gpus, borrowed_gpus, lent_gpus FROM gangsched.team_shares WHERE team = 'C'$$,
    $$VALUES (2::numeric, 1::numeric, 3::numeric, 1::numeric, 0.000::numeric)$$,
    'team_shares shows C''s quota, use and borrowing');
SELECT throws_ok($$SELECT gangsched.submit('C', 1, 4, pool => 'gpu')$$, '53S05', NULL,
                 'a job beyond nominal + borrowing limit is refused at submit');
SELECT is_empty('SELECT * FROM gangsched.check_invariants()', 'no invariant violated');

SELECT * FROM finish();
ROLLBACK;
