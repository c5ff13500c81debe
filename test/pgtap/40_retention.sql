-- Retention's contract (docs/sql-api.md, docs/storage.md#retention): the
-- functions with their arguments and results, who may call them, the guard
-- triggers, the archive tables' columns, the refusals. Runs in one
-- transaction, rolled back; test/sql/51_retention.sql has the scenarios.
BEGIN;
SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gangsched CASCADE;
SELECT plan(27);

SELECT has_function('gangsched', 'archive_history', ARRAY['timestamp with time zone', 'boolean']);
SELECT is(pg_get_function_result('gangsched.archive_history(timestamptz, bool)'::regprocedure),
          'TABLE(jobs bigint, allocations bigint, events bigint)', 'archive_history returns (jobs, allocations, events)');
SELECT is((SELECT proargnames::text[] FROM pg_proc WHERE oid = 'gangsched.archive_history'::regproc),
          ARRAY['before', 'discard', 'jobs', 'allocations', 'events'], 'archive_history(before, discard)');
SELECT is((SELECT pronargdefaults FROM pg_proc WHERE oid = 'gangsched.archive_history'::regproc), 1::smallint,
          'discard defaults (to false)');
SELECT has_function('gangsched', 'purge_archive', ARRAY['timestamp with time zone']);
SELECT has_function('gangsched', 'history_horizon', ARRAY[]::text[]);
SELECT function_returns('gangsched', 'history_horizon', ARRAY[]::text[], 'timestamp with time zone');

-- who may call them
SELECT ok(has_function_privilege('gangsched_operator', 'gangsched.archive_history(timestamptz, bool)', 'EXECUTE'),
          'operators may archive');
SELECT ok(NOT has_function_privilege('gangsched_analyst', 'gangsched.archive_history(timestamptz, bool)', 'EXECUTE'),
          'analysts may not archive');
SELECT ok(NOT has_function_privilege('gangsched_portal', 'gangsched.purge_archive(timestamptz)', 'EXECUTE'),
          'portals may not purge');
SELECT ok(has_function_privilege('gangsched_analyst', 'gangsched.history_horizon()', 'EXECUTE'),
          'analysts read the horizon');
SELECT ok(NOT has_function_privilege('gangsched_operator', 'gangsched._archive_begin(timestamptz)', 'EXECUTE'),
          'nobody but the owner opens the archive door');

-- the guards
SELECT has_trigger('gangsched', 'allocations', 'allocations_archive_guard', 'allocations has its row guard');
SELECT has_trigger('gangsched', 'events', 'events_archive_guard', 'events has its row guard');
SELECT has_trigger('gangsched', 'gangs', 'gangs_archive_guard', 'gangs has its row guard');
SELECT has_trigger('gangsched', 'gangs', 'gangs_truncate_guard', 'gangs refuses TRUNCATE');
SELECT throws_ok($$DELETE FROM gangsched.allocations$$, '55000', 'gangsched.allocations is append-only',
                 'DELETE outside archive_history is refused');
SELECT throws_ok($$TRUNCATE gangsched.gangs$$, '55000', 'TRUNCATE on gangsched.gangs is refused', 'TRUNCATE of gangs is refused');
SELECT is(gangsched._archive_cutoff(), NULL, 'the archive door is closed outside a run');

-- the archive tables have the live tables' columns, in order
SELECT is(gangsched._archive_columns_differ(), NULL, 'the archive tables match the live tables');
SELECT columns_are('gangsched', 'allocations_archive',
                   ARRAY(SELECT attname::text FROM pg_attribute WHERE attrelid = 'gangsched.allocations'::regclass
                          AND attnum > 0 AND NOT attisdropped), 'allocations_archive has the columns of allocations');

-- refusals
SELECT throws_ok($$SELECT * FROM gangsched.archive_history(NULL)$$, '22004',
                 'the cutoff of archive_history must not be null', 'a NULL cutoff');
SELECT throws_ok($$SELECT * FROM gangsched.archive_history(gangsched.now() + interval '1 day')$$, '22023', NULL,
                 'a cutoff in the future');
SELECT throws_ok($$SELECT * FROM gangsched.archive_history('-infinity')$$, '22023',
                 'the cutoff of archive_history must be a finite timestamp, not -infinity', 'an infinite cutoff');

-- a run on an empty scheduler moves nothing and is recorded
SELECT results_eq($$SELECT * FROM gangsched.archive_history(gangsched.now() - interval '1 day')$$,
                  $$VALUES (0::bigint, 0::bigint, 0::bigint)$$, 'nothing to move');
SELECT is((SELECT count(*) FROM gangsched.events WHERE kind = 'history_archived'), 1::bigint, 'the run is an event');
SELECT is_empty($$SELECT * FROM gangsched.check_invariants()$$, 'no invariant violated');

SELECT * FROM finish();
ROLLBACK;
