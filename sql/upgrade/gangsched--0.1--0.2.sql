/*
 * gangsched 0.1 -> 0.2 — upgrade script (ALTER EXTENSION gangsched UPDATE).
 *
 * The hand-written changes since 0.1, in the order the install script
 * (the files in sql/src) makes them; the build appends sql/src/97_dump.sql,
 * 98_privileges.sql and 99_search_path.sql, which re-register the state
 * tables for pg_dump and re-apply grants, SECURITY DEFINER and search_path
 * to every function (CREATE OR REPLACE resets the latter two).
 *
 * test/t/050_upgrade.pl installs 0.1, updates to 0.2 and compares the
 * catalog with a fresh 0.2 install: anything changed in sql/src/ and not
 * here fails it. docs/upgrade.md.
 */
\echo Use "ALTER EXTENSION gangsched UPDATE TO '0.2'" to load this file. \quit


/* ------------------------------------------------------------------ */
/* Inventory: the 65th pool is refused (rounds handle 64)              */
/* ------------------------------------------------------------------ */
CREATE OR REPLACE FUNCTION gangsched.add_pool(name text, kind text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    id int;
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION 'pool name must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the pool, for example ''reserved-a100''.';
    END IF;
    PERFORM gangsched._check_name(name, 'pool name');
    IF kind IS NULL OR kind NOT IN ('reserved', 'opportunistic') THEN
        RAISE EXCEPTION 'invalid pool kind "%"', kind
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A pool is reserved (committed capacity, may host non-preemptible work) or opportunistic (everything there is preemptible).',
                  HINT = 'Use kind ''reserved'' or ''opportunistic''.';
    END IF;
    IF EXISTS (SELECT FROM gangsched.pools p WHERE p.name = add_pool.name) THEN
        RAISE EXCEPTION 'pool "%" already exists', name
            USING ERRCODE = 'unique_violation', HINT = 'Choose another name or use the existing pool.';
    END IF;
    -- a round handles at most 64 pools (src/loader.c): a 65th would stop
    -- every round, so it is refused here
    IF (SELECT count(*) FROM gangsched.pools) >= 64 THEN
        RAISE EXCEPTION 'too many pools: a cluster has at most 64'
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = 'Scheduling rounds handle at most 64 pools.',
                  HINT = 'Merge pools that share a kind: nodes of different GPU models can share a pool (jobs ask for a model).';
    END IF;
    INSERT INTO gangsched.pools (name, kind) VALUES (name, kind) RETURNING pools.id INTO id;
    PERFORM gangsched._event('pool', NULL, NULL, NULL, 'pool added', jsonb_build_object('pool', name, 'kind', kind));
    RETURN id;
END $$;
