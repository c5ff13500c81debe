-- Admission's two implementations agree (issue 14). submit asks the C fast
-- path first (gangsched._admit_fast, src/admission.c: the placement engine
-- on the empty registered inventory, and the team's quota ceiling) and
-- falls back to the SQL checks (gangsched._admit, sql/src/40_admission.sql,
-- which raise the precise error) when it does not certify the job. Both
-- write the worker-fit rule and the ceiling formula, so this proves, over
-- random cluster states and random job shapes from a fixed seed (the same
-- every run), that
--   - the fast path never admits what the SQL checks refuse (that would
--     admit a job that can never run), and
--   - it refuses nothing they admit (that would only cost speed: submit
--     falls back to the SQL checks).
-- Required locality is left to the SQL checks by design (the fast path
-- answers false at once), so those jobs are counted apart.
--
-- Each state: 1-3 topology levels, 1-3 pools of either kind, 4-16 nodes
-- of 2-4 node types (host resources, 0/4/8 GPUs of two models, 40 or 80
-- GB, 1, 2, 4 or 7 slices), 3 teams with random quotas (none, GPUs only,
-- explicit or unbounded CPUs and memory, borrowing and lending limits),
-- and 120 job shapes (ordinary workers, or anything at all; workers from tensor groups, pipeline stages and
-- replicas; whole, sliceable and unsliceable GPU fractions; models, device
-- memory, pools, spans at every level, preemptible or not), so that both
-- verdicts occur and every refusal reason is reached.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';

CREATE TEMP TABLE adm_checks (
    state int, k int, locality text, fast bool, sql_ok bool, sqlstate text, message text, detail text, shape text);

CREATE FUNCTION pg_temp.pick(a anyarray) RETURNS anyelement
LANGUAGE sql VOLATILE AS $$ SELECT a[1 + floor(random() * cardinality(a))::int] $$;

-- One random cluster state on a fresh extension, then its job shapes.
CREATE FUNCTION pg_temp.adm_state(s int, tree bool DEFAULT false) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    nlev   int;
    levels text[];
    pools  text[] := '{}';
    kinds  text[] := '{}';
    types  jsonb[] := '{}';
    t      jsonb;
    i      int;
    k      int;
    topo   text;
    team   text;
    pool   text;
    q      numeric;
    j      jsonb;
    gs     int;
    stages int;
    gpus   numeric;
    cpus   numeric;
    mem    numeric;
    net    numeric;
    preemptible bool;
    tame   bool;
    group_span  int;
    stage_span  int;
    span   int;
    fast   bool;
    ok     bool;
    st     text;
    msg    text;
    det    text;
BEGIN
    DROP EXTENSION gangsched;
    CREATE EXTENSION gangsched;
    nlev := 1 + floor(random() * 3)::int;
    levels := (ARRAY['zone', 'spine', 'rack'])[1 : nlev];
    PERFORM gangsched.set_topology_levels(levels);
    FOR i IN 1 .. 1 + floor(random() * 3)::int LOOP
        pools := pools || ('p' || i);
        kinds := kinds || pg_temp.pick(ARRAY['reserved', 'reserved', 'opportunistic']);
        PERFORM gangsched.add_pool('p' || i, kinds[i]);
    END LOOP;
    FOR i IN 1 .. 2 + floor(random() * 3)::int LOOP
        types := types || jsonb_build_object(
            'cpus', pg_temp.pick(ARRAY[32, 64, 96, 128]), 'mem', pg_temp.pick(ARRAY[256, 512, 1024]),
            'net', pg_temp.pick(ARRAY[25, 100, 200]), 'gpus', pg_temp.pick(ARRAY[0, 4, 8, 8, 8]),
            'model', pg_temp.pick(ARRAY['a100', 'h100']), 'gpu_mem', pg_temp.pick(ARRAY[40, 80]),
            'slices', pg_temp.pick(ARRAY[1, 1, 2, 4, 7]));
    END LOOP;
    FOR i IN 1 .. 4 + floor(random() * 13)::int LOOP
        t := pg_temp.pick(types);
        topo := array_to_string((ARRAY['z' || (1 + floor(random() * 2)), 's' || (1 + floor(random() * 2)),
                                       'r' || (1 + floor(random() * 3))])[1 : nlev], '.');
        PERFORM gangsched.add_node('n' || i, pg_temp.pick(pools), topo::ltree, (t->>'cpus')::numeric,
                                   (t->>'mem')::numeric, (t->>'net')::numeric, (t->>'gpus')::int, t->>'model',
                                   (t->>'gpu_mem')::numeric, (t->>'slices')::int);
    END LOOP;
    FOREACH team IN ARRAY ARRAY['ta', 'tb', 'tc'] LOOP
        PERFORM gangsched.add_team(team);
        FOREACH pool IN ARRAY pools LOOP
            CONTINUE WHEN random() < 0.2;   -- no quota here
            q := pg_temp.pick(ARRAY[0, 8, 16, 32, 64, 128]);
            BEGIN
                PERFORM gangsched.set_quota(team, pool, q,
                            cpus => pg_temp.pick(ARRAY[NULL, NULL, 'Infinity', 16, 64, 256]::numeric[]),
                            mem_gb => pg_temp.pick(ARRAY[NULL, NULL, 'Infinity', 128, 1024]::numeric[]),
                            net_gbps => pg_temp.pick(ARRAY[NULL, NULL, 100, 400]::numeric[]),
                            borrowing_limit_gpus => pg_temp.pick(ARRAY[NULL, NULL, 0, 4, 16]::numeric[]),
                            lending_limit_gpus => CASE WHEN random() < 0.3 THEN floor(q * random()::numeric) END,
                            borrowing_limit_cpus => pg_temp.pick(ARRAY[NULL, NULL, NULL, 0, 32]::numeric[]),
                            lending_limit_cpus => pg_temp.pick(ARRAY[NULL, NULL, NULL, 0, 8]::numeric[]));
            EXCEPTION WHEN invalid_parameter_value THEN
                NULL;   -- a quota set_quota refuses (a lending limit above the nominal amount)
            END;
        END LOOP;
    END LOOP;
    IF tree THEN
        -- a team tree (issue 15): top has pa and tc, pa has ta and tb; pa
        -- and top get quota rows in some pools (their children's nominal
        -- carved out of theirs), with borrowing and lending limits
        PERFORM gangsched.add_team('pa'), gangsched.add_team('top');
        UPDATE gangsched.teams SET parent_id = (SELECT id FROM gangsched.teams WHERE name = 'pa') WHERE name IN ('ta', 'tb');
        UPDATE gangsched.teams SET parent_id = (SELECT id FROM gangsched.teams WHERE name = 'top') WHERE name IN ('pa', 'tc');
        FOREACH team IN ARRAY ARRAY['pa', 'top'] LOOP
            FOREACH pool IN ARRAY pools LOOP
                CONTINUE WHEN random() < 0.3;
                SELECT COALESCE(sum(x.gpus), 0) + pg_temp.pick(ARRAY[0, 0, 8, 32]) INTO q
                  FROM gangsched.quotas x JOIN gangsched.teams c ON c.id = x.team_id
                  JOIN gangsched.teams p ON p.id = c.parent_id
                  JOIN gangsched.pools o ON o.id = x.pool_id
                 WHERE p.name = team AND o.name = pool;
                BEGIN
                    PERFORM gangsched.set_quota(team, pool, q, cpus => 'Infinity', mem_gb => 'Infinity',
                                borrowing_limit_gpus => pg_temp.pick(ARRAY[NULL, NULL, 0, 8, 32]::numeric[]),
                                lending_limit_gpus => CASE WHEN random() < 0.4 THEN floor(q * random()::numeric) END);
                EXCEPTION WHEN OTHERS THEN
                    NULL;   -- a quota set_quota refuses
                END;
            END LOOP;
        END LOOP;
    END IF;

    FOR k IN 1 .. 120 LOOP
        gs := pg_temp.pick(ARRAY[1, 1, 1, 2, 4, 8]);
        stages := pg_temp.pick(ARRAY[1, 1, 1, 2, 4]);
        tame := random() < 0.6;   -- an ordinary worker, or anything at all
        IF tame THEN
            gpus := pg_temp.pick(ARRAY[0.5, 1, 1, 2, 4, 8]::numeric[]);
            cpus := pg_temp.pick(ARRAY[1, 2, 4, 8]::numeric[]);
            mem := pg_temp.pick(ARRAY[8, 16, 32, 64]::numeric[]);
            net := 0;
        ELSE
            gpus := pg_temp.pick(ARRAY[0, 0.25, 0.5, 0.3, 1, 1, 1, 2, 2, 3, 4, 8, 16]::numeric[]);
            cpus := pg_temp.pick(ARRAY[0, 1, 2, 4, 4, 8, 16, 33, 100]::numeric[]);
            mem := pg_temp.pick(ARRAY[0, 8, 16, 32, 64, 128, 300, 600]::numeric[]);
            net := pg_temp.pick(ARRAY[0, 0, 0, 10, 25, 150]::numeric[]);
        END IF;
        IF gpus = 0 AND cpus = 0 AND mem = 0 AND net = 0 THEN
            cpus := 1;
        END IF;
        preemptible := random() < 0.7;
        pool := pg_temp.pick(ARRAY[NULL, NULL] || pools);
        IF pool IS NOT NULL AND NOT preemptible AND kinds[array_position(pools, pool)] = 'opportunistic' THEN
            preemptible := true;   -- submit refuses this before admission
        END IF;
        -- spans nested as submit requires: span <= stage_span <= group_span
        group_span := CASE WHEN random() < 0.6 THEN nlev + 1 ELSE 1 + floor(random() * (nlev + 1))::int END;
        stage_span := CASE WHEN random() < 0.5 THEN NULL ELSE 1 + floor(random() * group_span)::int END;
        span := CASE WHEN random() < 0.6 THEN NULL ELSE 1 + floor(random() * COALESCE(stage_span, group_span))::int END;
        team := pg_temp.pick(ARRAY['ta', 'tb', 'tc']);   -- picked once, not per row
        j := jsonb_build_object(
            'team_id', (SELECT id FROM gangsched.teams WHERE name = team),
            'workers', gs * stages * pg_temp.pick(ARRAY[1, 1, 1, 2, 2, 3, 4, 8, 16]), 'group_size', gs, 'stages', stages,
            'gpus', gpus, 'cpus', cpus, 'mem_gb', mem, 'net_gbps', net,
            'gpu_model', CASE WHEN gpus > 0 AND NOT tame THEN pg_temp.pick(ARRAY[NULL, NULL, NULL, NULL, 'a100', 'h100', 'v100']) END,
            'gpu_mem_gb', CASE WHEN gpus > 0 AND NOT tame THEN pg_temp.pick(ARRAY[NULL, NULL, NULL, 40, 80, 100]::numeric[]) END,
            'preemptible', preemptible, 'pool_id', (SELECT id FROM gangsched.pools WHERE name = pool),
            'group_span', group_span, 'stage_span', stage_span, 'span', span, 'locality', 'none');
        IF random() < 0.04 THEN
            -- required locality, on a dataset one node caches
            PERFORM gangsched.cache_dataset('n1', 'ds');
            j := j || '{"dataset": "ds", "locality": "required"}';
        END IF;

        -- the row type is looked up each time: every state has a new extension
        EXECUTE 'SELECT gangsched._admit_fast(jsonb_populate_record(NULL::gangsched.gangs, $1))' INTO fast USING j;
        ok := true;
        st := NULL;
        msg := NULL;
        det := NULL;
        BEGIN
            EXECUTE 'SELECT gangsched._admit(jsonb_populate_record(NULL::gangsched.gangs, $1))' USING j;
        EXCEPTION WHEN OTHERS THEN
            ok := false;
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
        END;
        INSERT INTO adm_checks VALUES (s, k, j->>'locality', fast, ok, st, msg, det, format('levels %s, pools %s: %s', nlev, kinds, j));
    END LOOP;
    IF EXISTS (SELECT FROM gangsched.check_invariants()) THEN
        RAISE EXCEPTION 'state %: invariant violated', s;
    END IF;
END $$;

SELECT setseed(0.14);
SELECT count(*) AS states FROM (SELECT pg_temp.adm_state(s) FROM generate_series(1, 10) s) x;

-- 1. never admits what the SQL checks refuse: no rows
SELECT state, k, shape, sqlstate, message FROM adm_checks WHERE fast AND NOT sql_ok ORDER BY state, k;
-- 2. refuses nothing they admit (required locality apart): no rows
SELECT state, k, shape FROM adm_checks WHERE NOT fast AND sql_ok AND locality <> 'required' ORDER BY state, k;
-- required locality always goes to the SQL checks
SELECT count(*) AS required_locality, bool_and(NOT fast) AS all_to_sql FROM adm_checks WHERE locality = 'required';
-- both verdicts occur, and the refusals reach every reason
SELECT count(*) AS checks, count(*) FILTER (WHERE sql_ok) AS admitted, count(*) FILTER (WHERE NOT sql_ok) AS refused
  FROM adm_checks;
SELECT sqlstate, count(*) AS refused FROM adm_checks WHERE NOT sql_ok GROUP BY 1 ORDER BY 1;
-- and every branch of the team's ceiling (53S05)
SELECT substring(detail FROM '\(([a-z ]*)') AS ceiling, count(*) AS refused
  FROM adm_checks WHERE sqlstate = '53S05' GROUP BY 1 ORDER BY 1;

-- The same over team trees (issue 15): the leaves ta, tb and tc under
-- inner teams with quotas at every level (sql/src/40_admission.sql
-- _admit_tree, src/admission.c within_ceiling_tree).
TRUNCATE adm_checks;
SELECT setseed(0.61);
SELECT count(*) AS tree_states FROM (SELECT pg_temp.adm_state(s, true) FROM generate_series(11, 16) s) x;
-- 1. never admits what the SQL checks refuse: no rows
SELECT state, k, shape, sqlstate, message FROM adm_checks WHERE fast AND NOT sql_ok ORDER BY state, k;
-- 2. refuses nothing they admit (required locality apart): no rows
SELECT state, k, shape FROM adm_checks WHERE NOT fast AND sql_ok AND locality <> 'required' ORDER BY state, k;
SELECT count(*) AS checks, count(*) FILTER (WHERE sql_ok) AS admitted, count(*) FILTER (WHERE NOT sql_ok) AS refused
  FROM adm_checks;
-- refusals at the leaf and at an inner level (the message names it)
SELECT CASE WHEN message ~ '\((parent|ancestor) of' THEN 'inner level' ELSE 'leaf' END AS level, count(*) AS refused
  FROM adm_checks WHERE sqlstate = '53S05' GROUP BY 1 ORDER BY 1;

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
