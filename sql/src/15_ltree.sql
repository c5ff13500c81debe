/* ------------------------------------------------------------------ */
/* ltree, wherever it is installed                                     */
/* ------------------------------------------------------------------ */

-- gangsched's functions never search the schema ltree lives in (often
-- public, which tenants may be able to write in older databases). These
-- wrappers name it, as found while this script runs.
DO $$
DECLARE
    s name := (SELECT n.nspname FROM pg_catalog.pg_extension e
                 JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'ltree');
BEGIN
    EXECUTE pg_catalog.format(
        'CREATE FUNCTION gangsched._subpath(t %1$I.ltree, "offset" int, len int) RETURNS %1$I.ltree '
        'LANGUAGE sql IMMUTABLE STRICT AS $f$ SELECT %1$I.subpath(t, "offset", len) $f$', s);
    EXECUTE pg_catalog.format(
        'CREATE FUNCTION gangsched._nlevel(t %1$I.ltree) RETURNS int '
        'LANGUAGE sql IMMUTABLE STRICT AS $f$ SELECT %1$I.nlevel(t) $f$', s);
END $$;
