/* ------------------------------------------------------------------ */
/* Name resolution                                                     */
/* ------------------------------------------------------------------ */

-- Table and function names above are schema-qualified; ltree's functions
-- (subpath, nlevel) are found through the search path fixed here to the
-- extension's schema and its prerequisites' schemas, as set while this
-- script runs, so a caller's search_path cannot change what they mean.
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
        EXECUTE format('ALTER FUNCTION %s SET search_path FROM CURRENT', f);
    END LOOP;
END $$;

-- check_invariants() is one large query over small data: its plan's cost
-- estimate reaches the JIT threshold and compiling it costs seconds. Off.
ALTER FUNCTION gangsched.check_invariants() SET jit = off;
-- Its hash joins over expanded device slices are estimated low and spill at
-- the default work_mem (0.5-1.2 s with ~600 running workers, 50 ms with this).
ALTER FUNCTION gangsched.check_invariants() SET work_mem = '64MB';
