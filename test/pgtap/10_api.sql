-- The SQL API contract of docs/sql-api.md: every public function with
-- its argument types, names and result; the views and their columns; the
-- database guards; the clock; a sample of refusals with their SQLSTATEs; the
-- jobs view; no invariant violated. Runs in one transaction, rolled back.
BEGIN;
SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gangsched CASCADE;
SELECT plan(128);

/* ---------------- the extension ---------------- */

SELECT has_schema('gangsched');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'gangsched'), false, 'gangsched is not relocatable');
SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'gangsched'), 'gangsched',
          'gangsched lives in schema gangsched');
SELECT set_eq($$SELECT e2.extname::text FROM pg_depend d JOIN pg_extension e1 ON e1.oid = d.objid
                   JOIN pg_extension e2 ON e2.oid = d.refobjid
                  WHERE e1.extname = 'gangsched' AND d.classid = 'pg_extension'::regclass$$,
              ARRAY['ltree'], 'gangsched requires ltree and nothing else');

/* ---------------- public functions: argument types and results ---------------- */

SELECT has_function('gangsched', 'now', ARRAY[]::text[]);
SELECT function_returns('gangsched', 'now', ARRAY[]::text[], 'timestamp with time zone');
SELECT has_function('gangsched', 'set_topology_levels', ARRAY['text[]']);
SELECT function_returns('gangsched', 'set_topology_levels', ARRAY['text[]'], 'void');
SELECT has_function('gangsched', 'add_pool', ARRAY['text', 'text']);
SELECT function_returns('gangsched', 'add_pool', ARRAY['text', 'text'], 'integer');
SELECT has_function('gangsched', 'add_node', ARRAY['text', 'text', 'ltree', 'numeric', 'numeric', 'numeric',
                                                   'integer', 'text', 'numeric', 'integer']);
SELECT function_returns('gangsched', 'add_node', ARRAY['text', 'text', 'ltree', 'numeric', 'numeric', 'numeric',
                                                       'integer', 'text', 'numeric', 'integer'], 'integer');
SELECT has_function('gangsched', 'set_node_state', ARRAY['text', 'text']);
SELECT has_function('gangsched', 'cache_dataset', ARRAY['text', 'text']);
SELECT has_function('gangsched', 'evict_dataset', ARRAY['text', 'text']);
SELECT function_returns('gangsched', 'evict_dataset', ARRAY['text', 'text'], 'boolean');
SELECT has_function('gangsched', 'add_team', ARRAY['text', 'numeric', 'text']);
SELECT function_returns('gangsched', 'add_team', ARRAY['text', 'numeric', 'text'], 'integer');
SELECT has_function('gangsched', 'set_quota', ARRAY['text', 'text', 'numeric', 'numeric', 'numeric', 'numeric',
                                                    'numeric', 'numeric', 'numeric', 'numeric', 'numeric', 'numeric',
                                                    'numeric', 'numeric']);
SELECT has_function('gangsched', 'submit', ARRAY['text', 'integer', 'numeric', 'numeric', 'numeric', 'numeric', 'text',
                                                 'integer', 'boolean', 'text', 'integer', 'text', 'integer', 'text',
                                                 'text', 'text', 'numeric', 'text', 'text', 'interval', 'interval',
                                                 'interval', 'text', 'interval', 'bigint[]', 'text', 'text', 'integer']);
SELECT function_returns('gangsched', 'submit', ARRAY['text', 'integer', 'numeric', 'numeric', 'numeric', 'numeric', 'text',
                                                     'integer', 'boolean', 'text', 'integer', 'text', 'integer', 'text',
                                                     'text', 'text', 'numeric', 'text', 'text', 'interval', 'interval',
                                                     'interval', 'text', 'interval', 'bigint[]', 'text', 'text', 'integer'], 'bigint');
SELECT has_function('gangsched', 'cancel', ARRAY['bigint']);
SELECT has_function('gangsched', 'job_started', ARRAY['bigint', 'text']);
SELECT has_function('gangsched', 'job_checkpointed', ARRAY['bigint', 'timestamp with time zone']);
SELECT has_function('gangsched', 'job_finished', ARRAY['bigint', 'boolean', 'text']);
SELECT has_function('gangsched', 'node_heartbeat', ARRAY['text']);
SELECT has_function('gangsched', 'check_invariants', ARRAY[]::text[]);
-- reservations and maintenance windows (docs/time.md)
SELECT has_function('gangsched', 'add_reservation', ARRAY['text', 'text', 'text', 'text[]', 'text', 'integer',
                                                          'timestamp with time zone', 'timestamp with time zone']);
SELECT has_function('gangsched', 'add_maintenance', ARRAY['text', 'text', 'text[]', 'text',
                                                          'timestamp with time zone', 'timestamp with time zone']);
SELECT has_function('gangsched', 'drop_reservation', ARRAY['text']);
SELECT has_function('gangsched', 'reservation_usage', ARRAY[]::text[]);
SELECT has_view('gangsched', 'reservations', 'the reservations view exists');
SELECT function_returns('gangsched', 'check_invariants', ARRAY[]::text[], 'setof record');
SELECT is(pg_get_function_result('gangsched.check_invariants()'::regprocedure),
          'TABLE(invariant integer, job bigint, node text, detail text)', 'check_invariants() returns (invariant, job, node, detail)');

/* ---------------- argument names (every argument may be passed by name) ---------------- */

SELECT results_eq(
    $$SELECT p.proname::text COLLATE "default", p.proargnames::text[] COLLATE "default" FROM pg_proc p
       WHERE p.pronamespace = 'gangsched'::regnamespace
         AND p.proname IN ('set_topology_levels', 'add_pool', 'add_node', 'set_node_state', 'cache_dataset',
                           'evict_dataset', 'add_team', 'cancel', 'job_started', 'job_checkpointed', 'job_finished',
                           'node_heartbeat')
       ORDER BY 1$$,
    $$VALUES ('add_node', ARRAY['name', 'pool', 'topology', 'cpus', 'mem_gb', 'net_gbps', 'gpus', 'gpu_model', 'gpu_mem_gb', 'gpu_slices']),
             ('add_pool', ARRAY['name', 'kind']),
             ('add_team', ARRAY['name', 'weight', 'parent']),
             ('cache_dataset', ARRAY['node', 'dataset']),
             ('cancel', ARRAY['job']),
             ('evict_dataset', ARRAY['node', 'dataset']),
             ('job_checkpointed', ARRAY['job', 'at']),
             ('job_finished', ARRAY['job', 'success', 'message']),
             ('job_started', ARRAY['job', 'node']),
             ('node_heartbeat', ARRAY['node']),
             ('set_node_state', ARRAY['name', 'state']),
             ('set_topology_levels', ARRAY['levels'])$$,
    'inventory and agent functions take the argument names of docs/sql-api.md');
SELECT is((SELECT proargnames::text[] FROM pg_proc WHERE oid = 'gangsched.submit'::regproc),
          ARRAY['team', 'workers', 'gpus', 'cpus', 'mem_gb', 'net_gbps', 'name', 'priority', 'preemptible', 'pool',
                'group_size', 'group_span', 'stages', 'stage_span', 'span', 'gpu_model', 'gpu_mem_gb', 'dataset',
                'locality', 'checkpoint_interval', 'grace', 'queue_timeout', 'command', 'time_limit', 'after', 'after_mode',
                'reservation', 'min_replicas'],
          'submit() takes the argument names of docs/sql-api.md, in order');
SELECT is((SELECT proargnames[1:8]::text[] FROM pg_proc WHERE oid = 'gangsched.set_quota'::regproc),
          ARRAY['team', 'pool', 'gpus', 'cpus', 'mem_gb', 'net_gbps', 'borrowing_limit_gpus', 'lending_limit_gpus'],
          'set_quota() takes the argument names of docs/sql-api.md, in order');
SELECT is((SELECT pronargdefaults FROM pg_proc WHERE oid = 'gangsched.submit'::regproc), 25::smallint,
          'submit() needs only team, workers and gpus');
SELECT is((SELECT pronargdefaults FROM pg_proc WHERE oid = 'gangsched.add_node'::regproc), 1::smallint,
          'add_node() defaults gpu_slices only');

/* ---------------- name resolution and planning ---------------- */

SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
       WHERE p.pronamespace = 'gangsched'::regnamespace AND l.lanname IN ('sql', 'plpgsql')
         AND (p.proname !~ '^_' OR p.proname IN ('_visibility', '_level_name', '_queue_visible', '_team_shares')
              OR p.prorettype = 'trigger'::regtype)
         AND p.proname <> 'now'
         AND NOT (p.prosecdef AND EXISTS (SELECT FROM unnest(p.proconfig) c
                                           WHERE c = 'search_path=pg_catalog, gangsched, pg_temp'))$$,
    'every SQL and PL/pgSQL function of the API (and those views and triggers call) is SECURITY DEFINER with search_path pg_catalog, gangsched, pg_temp');
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_proc p
       WHERE p.pronamespace = 'gangsched'::regnamespace AND p.proname ~ '^_'
         AND p.proname NOT IN ('_visibility', '_level_name', '_queue_visible', '_team_shares')
         AND p.prorettype <> 'trigger'::regtype
         AND (p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) a
                                           WHERE a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE'))$$,
    'the internal functions (which run under their caller''s search_path) may be executed by their owner only');
SELECT ok((SELECT 'jit=off' = ANY (proconfig) FROM pg_proc WHERE oid = 'gangsched.check_invariants'::regproc),
          'check_invariants() runs without JIT (its row estimates would otherwise cost seconds of compilation per call)');

/* ---------------- views and their columns ---------------- */

SELECT has_view('gangsched', 'jobs', 'view gangsched.jobs exists');
SELECT has_column('gangsched', 'jobs', c, 'jobs has column ' || c)
  FROM unnest(ARRAY['job', 'team', 'name', 'state', 'workers', 'gpus', 'priority', 'preemptible', 'borrowed',
                    'submitted_at', 'placed_at', 'finished_at', 'preempt_deadline', 'preemptions',
                    'lost_gpu_seconds', 'reason', 'after_jobs', 'after_mode', 'waiting_for']) c;
SELECT has_view('gangsched', 'placements', 'view gangsched.placements exists');
SELECT has_column('gangsched', 'placements', c, 'placements has column ' || c)
  FROM unnest(ARRAY['job', 'worker', 'node', 'topology', 'device', 'first_slice', 'slices', 'cpus', 'mem_gb',
                    'net_gbps', 'borrowed']) c;

/* ---------------- database guards ---------------- */

SELECT col_is_pk('gangsched', 'held_slots', ARRAY['node_id', 'slot'],
                 'held_slots is keyed by (node, slot): the database refuses a slice to two holders');
SELECT has_trigger('gangsched', 'allocations', 'allocations_update_guard', 'allocations has trigger allocations_update_guard');
SELECT has_trigger('gangsched', 'allocations', 'allocations_delete_guard', 'allocations has trigger allocations_delete_guard');
SELECT has_trigger('gangsched', 'events', 'events_append_only', 'events has trigger events_append_only');

/* ---------------- the clock ---------------- */

SELECT ok(gangsched.now() >= pg_catalog.statement_timestamp() AND gangsched.now() <= pg_catalog.clock_timestamp(),
          'without an override, now() is the clock at the call (the clock rule), not the transaction''s start');
SET LOCAL gangsched.clock_override = '2031-02-03 04:05:06+00';
SELECT is(gangsched.now(), '2031-02-03 04:05:06+00'::timestamptz, 'gangsched.clock_override sets now()');
SET LOCAL gangsched.clock_override = '';
SELECT ok(gangsched.now() >= pg_catalog.statement_timestamp() AND gangsched.now() <= pg_catalog.clock_timestamp(),
          'an empty override is the real clock again');
SELECT throws_ok($$SET LOCAL gangsched.clock_override = 'soon'$$, '22023',
                 'invalid value for parameter "gangsched.clock_override": "soon"',
                 'a clock override that is not a timestamp is refused');

/* ---------------- a small cluster ---------------- */

SELECT lives_ok($$SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack'])$$, 'levels set');
SELECT lives_ok($$SELECT gangsched.add_pool('main', 'reserved'), gangsched.add_pool('spot', 'opportunistic')$$, 'pools added');
SELECT lives_ok($$SELECT gangsched.add_node('n' || i, 'main', ('z1.r' || (i + 1) / 2)::ltree, 64, 512, 100, 8, 'a100', 80)
                    FROM generate_series(1, 4) i$$, 'four 8-GPU nodes in two racks');
SELECT lives_ok($$SELECT gangsched.add_node('m1', 'main', 'z1.r3', 32, 256, 50, 4, 'a30', 24, 4)$$, 'a node with 4-slice devices');
SELECT lives_ok($$SELECT gangsched.add_node('s1', 'spot', 'z2.r9', 64, 512, 100, 8, 'h100', 80)$$, 'an opportunistic node');
SELECT lives_ok($$SELECT gangsched.cache_dataset('n1', 'imagenet')$$, 'a cached dataset');
SELECT lives_ok($$SELECT gangsched.add_team('vision'), gangsched.add_team('nlp', 2)$$, 'teams');
SELECT lives_ok($$SELECT gangsched.set_quota('vision', 'main', 16, borrowing_limit_gpus => 4)$$, 'a quota');

/* ---------------- refusals, by SQLSTATE ---------------- */

SELECT throws_ok($$SELECT gangsched.set_topology_levels(ARRAY['zone'])$$, '55000',
                 'topology levels cannot change once nodes are registered', 'levels are fixed once nodes exist');
SELECT throws_ok($$SELECT gangsched.add_pool('main', 'reserved')$$, '23505', 'pool "main" already exists', 'duplicate pool');
SELECT throws_ok($$SELECT gangsched.add_pool('x', 'shared')$$, '22023', 'invalid pool kind "shared"', 'bad pool kind');
SELECT throws_ok($$SELECT gangsched.add_node('n1', 'main', 'z1.r1', 64, 512, 100, 8, 'a100', 80)$$, '23505', NULL, 'duplicate node');
SELECT throws_ok($$SELECT gangsched.add_node('x', 'main', 'z1', 64, 512, 100, 8, 'a100', 80)$$, '22023', NULL, 'topology of the wrong depth');
SELECT throws_ok($$SELECT gangsched.add_node('x', 'main', 'z1.r1', -64, 512, 100, 8, 'a100', 80)$$, '22003', NULL, 'negative cpus');
SELECT throws_ok($$SELECT gangsched.set_node_state('n1', 'broken')$$, '22023', NULL, 'bad node state');
SELECT throws_ok($$SELECT gangsched.set_node_state('zz', 'down')$$, '23503', NULL, 'unknown node');
SELECT throws_ok($$SELECT gangsched.set_quota('vision', 'main', 8, lending_limit_gpus => 9)$$, '22023',
                 'lending limit exceeds the nominal quota', 'lending more than the nominal quota');
SELECT throws_ok($$SELECT gangsched.add_team('t', 0)$$, '22003', NULL, 'zero weight');
SELECT throws_ok($$SELECT gangsched.submit('nobody', 1, 1)$$, '23503', 'team "nobody" does not exist', 'unknown team');
SELECT throws_ok($$SELECT gangsched.submit('vision', 0, 1)$$, '22023', 'workers must be at least 1, not 0', 'no workers');
SELECT throws_ok($$SELECT gangsched.submit('vision', 1, 'NaN')$$, '22003', 'gpus must be a finite number >= 0, not NaN', 'NaN gpus');
SELECT throws_ok($$SELECT gangsched.submit('vision', 1, NULL)$$, '22004', 'gpus must not be null', 'NULL gpus');
SELECT throws_ok($$SELECT gangsched.submit('vision', 3, 1, group_size => 2)$$, '22023', NULL, 'workers not divisible by the group');
SELECT throws_ok($$SELECT gangsched.submit('vision', 1, 1, span => 'row')$$, '23503', NULL, 'unknown level');
SELECT throws_ok($$SELECT gangsched.submit('vision', 1, 1, gpu_model => 'tpu')$$, '23503', 'unknown gpu model "tpu"', 'unknown model');
SELECT throws_ok($$SELECT gangsched.submit('vision', 1, 1, grace => '-1 minute')$$, '22023', NULL, 'negative interval');
SELECT throws_ok($$SELECT gangsched.submit('vision', 1, 16)$$, '53S01',
                 'worker asks for 16 GPUs but each eligible node has at most 8', 'worker bigger than every node');
SELECT throws_ok($$SELECT gangsched.submit('vision', 1, 0.3)$$, '53S02', 'no device can be sliced into 0.3 of a GPU', 'unsliceable fraction');
SELECT throws_ok($$SELECT gangsched.submit('vision', 24, 1, span => 'rack', pool => 'main')$$, '53S03',
                 'the gang of 24 workers does not fit inside one rack', 'gang bigger than its span');
SELECT throws_ok($$SELECT gangsched.submit('vision', 41, 1, pool => 'main')$$, '53S04',
                 'the gang of 41 workers is larger than every eligible pool', 'gang bigger than every pool');
SELECT throws_ok($$SELECT gangsched.submit('vision', 17, 1, preemptible => false)$$, '53S05',
                 'job is larger than team "vision" could ever hold', 'non-preemptible beyond nominal quota');
SELECT throws_ok($$SELECT gangsched.submit('vision', 9, 1, dataset => 'imagenet', locality => 'required')$$, '53S06',
                 'too few nodes cache dataset "imagenet" for 9 workers', 'required locality with too few caching nodes');
SELECT is((SELECT count(*) FROM gangsched.gangs), 0::bigint, 'refused submissions left no job');
SELECT is((SELECT count(*) FROM gangsched.events WHERE job IS NOT NULL), 0::bigint, 'refused submissions left no event');

/* ---------------- accepted jobs in the jobs view ---------------- */

SET LOCAL gangsched.clock_override = '2031-01-01 00:00:00+00';
SELECT is(gangsched.submit('vision', 16, 1, preemptible => false, pool => 'main', name => 'guaranteed'), 1::bigint,
          'the first job is job 1');
SELECT is(gangsched.submit('vision', 4, 0.25, gpu_model => 'a30', name => 'quarter'), 2::bigint, 'a quarter GPU is accepted');
SELECT is(gangsched.submit(team => 'nlp', workers => 16, gpus => 1, group_size => 4, stages => 2, stage_span => 'rack',
                           span => 'zone', priority => 3, name => '3d'), 3::bigint, 'a 3-D shape is accepted');
SELECT is(gangsched.submit('nlp', 2, 0, cpus => 8, mem_gb => 16, name => 'cpu'), 4::bigint, 'a CPU-only job is accepted');
SELECT results_eq(
    $$SELECT job, team, name, state, workers, gpus, priority, preemptible, borrowed, pool, group_size, group_span,
             stages, stage_span, span, gpu_model, submitted_at, placed_at, finished_at, preempt_deadline, preemptions,
             lost_gpu_seconds, reason
        FROM gangsched.jobs ORDER BY job$$,
    $$VALUES (1::bigint, 'vision', 'guaranteed', 'pending', 16, 1::numeric, 0, false, false, 'main', 1, 'node', 1, NULL::text, NULL::text, NULL::text, '2031-01-01 00:00:00+00'::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, 0, 0::numeric, NULL::text),
             (2, 'vision', 'quarter', 'pending', 4, 0.25, 0, true, false, NULL, 1, 'node', 1, NULL, NULL, 'a30', '2031-01-01 00:00:00+00', NULL, NULL, NULL, 0, 0, NULL),
             (3, 'nlp', '3d', 'pending', 16, 1, 3, true, false, NULL, 4, 'node', 2, 'rack', 'zone', NULL, '2031-01-01 00:00:00+00', NULL, NULL, NULL, 0, 0, NULL),
             (4, 'nlp', 'cpu', 'pending', 2, 0, 0, true, false, NULL, 1, 'node', 1, NULL, NULL, NULL, '2031-01-01 00:00:00+00', NULL, NULL, NULL, 0, 0, NULL)$$,
    'the jobs view shows each job as submitted');
SELECT is((SELECT count(*) FROM gangsched.events WHERE kind = 'submitted'), 4::bigint, 'one submitted event per job');

/* ---------------- cancel ---------------- */

SELECT throws_ok($$SELECT gangsched.cancel(999)$$, '23503', 'job 999 does not exist', 'cancelling an unknown job');
SELECT lives_ok($$SELECT gangsched.cancel(2)$$, 'cancelling a pending job');
SELECT is((SELECT state FROM gangsched.jobs WHERE job = 2), 'cancelled', 'the job is cancelled');
SELECT throws_ok($$SELECT gangsched.cancel(2)$$, '55000', 'job 2 is already cancelled', 'cancelling twice');
SELECT throws_ok($$SELECT gangsched.job_finished(1, true)$$, '55000', 'job 1 is pending, cannot finish', 'finishing a pending job');

SELECT is_empty('SELECT * FROM gangsched.check_invariants()', 'no invariant violated');
SELECT * FROM finish();
ROLLBACK;
