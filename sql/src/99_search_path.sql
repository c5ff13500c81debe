/* ------------------------------------------------------------------ */
/* Name resolution and the caller's privileges                         */
/* ------------------------------------------------------------------ */

-- Every SQL and PL/pgSQL function runs as the extension's owner (SECURITY
-- DEFINER) with a search_path that holds no schema a tenant can write:
-- pg_catalog first, then gangsched, then pg_temp (searched for tables only,
-- never for functions or operators). ltree's functions are reached through
-- wrappers that name ltree's schema (sql/src/15_ltree.sql), so the schema
-- ltree lives in (often public) is never searched. Exceptions: the small
-- SQL functions the planner inlines (a SET clause would stop that); their
-- bodies are fully qualified. C functions fix the same search_path in C
-- (src/tenancy.c) around their queries.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'gangsched'::regnamespace
           AND p.prolang IN (SELECT oid FROM pg_catalog.pg_language WHERE lanname IN ('plpgsql', 'sql'))
           AND p.proname NOT IN ('now', '_fit', '_slices_needed')
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, gangsched, pg_temp', f);
    END LOOP;
END $$;
-- run_round writes as the owner too (it refuses non-operators itself).
ALTER FUNCTION gangsched.run_round() SECURITY DEFINER;

-- check_invariants() is one large query over small data: its plan's cost
-- estimate reaches the JIT threshold and compiling it costs seconds. Off.
ALTER FUNCTION gangsched.check_invariants() SET jit = off;
-- Its hash joins over expanded device slices are estimated low and spill at
-- the default work_mem (0.5-1.2 s with ~600 running workers, 50 ms with this).
ALTER FUNCTION gangsched.check_invariants() SET work_mem = '64MB';
