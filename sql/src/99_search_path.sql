/* ------------------------------------------------------------------ */
/* Name resolution and the caller's privileges                         */
/* ------------------------------------------------------------------ */

-- Every SQL and PL/pgSQL function of the API (and the functions views and
-- triggers call) runs as the extension's owner (SECURITY DEFINER) with a
-- search_path that holds no schema a tenant can write: pg_catalog first,
-- then gangsched, then pg_temp (searched for tables only, never for
-- functions or operators). ltree's functions are reached through wrappers
-- that name ltree's schema (sql/src/15_ltree.sql), so the schema ltree
-- lives in (often public) is never searched. C functions fix the same
-- search_path in C (src/tenancy.c) around their queries.
--
-- The internal functions (names starting with an underscore) are executable
-- by the owner only (sql/src/98_privileges.sql) and called only from
-- those, so they already run as the owner under that search_path: they get
-- neither clause, which keeps them cheap (a SET clause costs a GUC save and
-- restore per call and stops a SQL function from being inlined; a submit
-- calls about twenty of them). Their bodies qualify what is not in
-- pg_catalog or gangsched.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'gangsched'::regnamespace
           AND p.prolang IN (SELECT oid FROM pg_catalog.pg_language WHERE lanname IN ('plpgsql', 'sql'))
           AND p.proname <> 'now'
           AND (p.proname !~ '^_'
                OR p.proname IN ('_visibility', '_level_name', '_queue_visible', '_team_shares')   -- called by views, as the reader
                OR p.prorettype = 'trigger'::regtype)
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, gangsched, pg_temp', f);
    END LOOP;
END $$;
-- run_round writes as the owner too (it refuses non-operators itself).
ALTER FUNCTION gangsched.run_round() SECURITY DEFINER;

-- check_invariants() is one large query over small data: its plan's cost
-- estimate reaches the JIT threshold and compiling it costs seconds. Off.
ALTER FUNCTION gangsched.check_invariants() SET jit = off;
-- What portals and analysts call runs without JIT too: short queries whose
-- estimates on a large cluster can reach jit_above_cost (team_shares took
-- 0.9-2.6 s with JIT, 2.5 ms without). The analyst functions (69) and
-- _team_shares (66) carry SET jit = off themselves.
ALTER FUNCTION gangsched.why_pending(bigint) SET jit = off;
ALTER FUNCTION gangsched._queue_visible() SET jit = off;
-- Its hash joins over expanded device slices are estimated low and spill at
-- the default work_mem (0.5-1.2 s with ~600 running workers, 50 ms with this).
ALTER FUNCTION gangsched.check_invariants() SET work_mem = '64MB';
-- Ending a job's allocations (job_finished, cancel, a release, a requeue)
-- filters on an array of job ids. The plan cache keeps a custom plan for
-- such a statement for ever (the generic plan's estimate for = ANY over a
-- parameter is ten ids, the custom plan's one), so every call planned the
-- statements again: about 0.3 ms of an agent's 1-2 ms job_finished. Generic
-- plans probe allocations_open_job_idx and holds by job instead.
ALTER FUNCTION gangsched._end_allocations(bigint[], text, text, timestamptz) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION gangsched._requeue_many(bigint[], text, text, timestamptz) SET plan_cache_mode = force_generic_plan;
