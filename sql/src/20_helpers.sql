/* ------------------------------------------------------------------ */
/* Clock and small helpers                                             */
/* ------------------------------------------------------------------ */

-- The scheduler's clock: the time of the call, pg_catalog.clock_timestamp(),
-- unless gangsched.clock_override is set (tests and trace replays run in
-- virtual time). Not the transaction's start (pg_catalog.now()): under READ
-- COMMITTED each statement reads rows committed after BEGIN, and a decision
-- stamped with BEGIN's time would be recorded before the submission, the
-- release or the placement it acted on (the clock rule, docs/concepts.md).
-- Callers take it once per decision, after the statement that read what
-- the decision acts on. STABLE, so that a statement may use it in index
-- conditions; successive calls may return later times. The rounds' clock
-- is the same C function, gs_now() in src/guc.c: one implementation.
CREATE FUNCTION gangsched.now() RETURNS timestamptz
LANGUAGE C STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'gs_now_sql';

-- The device slices of an allocation or a hold, one row each: the device
-- and its slot, slot = device * 8 + slice, the numbering of
-- gangsched.held_slots. The one home of that encoding in SQL; the C side's
-- is GS_SLOTS_PER_DEVICE (src/model.h). A set-returning SQL function that
-- is neither STRICT nor VOLATILE nor SECURITY DEFINER, with no SET clause
-- (internal: 99_search_path.sql gives it none): the planner inlines it into
-- the calling query, so `FROM t, gangsched._slots(t.devices, t.first_slice,
-- t.slices) s` plans as the unnest and generate_series it stands for.
CREATE FUNCTION gangsched._slots(devices int[], first_slice int, slices int)
RETURNS TABLE (device int, slot int)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT d.d, d.d * 8 + s.s
      FROM pg_catalog.unnest(devices) d(d), pg_catalog.generate_series(first_slice, first_slice + slices - 1) s(s)
$$;

-- Number of named topology levels (the node is one deeper).
CREATE FUNCTION gangsched._levels() RETURNS int
LANGUAGE sql STABLE AS $$ SELECT count(*)::int FROM gangsched.topology_levels $$;

-- Depth of a level name: 1 = outermost, levels+1 = 'node'. NULL stays NULL.
CREATE FUNCTION gangsched._level_depth(level text, what text) RETURNS smallint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    d smallint;
BEGIN
    IF level IS NULL THEN
        RETURN NULL;
    END IF;
    IF level = 'node' THEN
        RETURN gangsched._levels() + 1;
    END IF;
    SELECT depth INTO d FROM gangsched.topology_levels WHERE name = level;
    IF d IS NULL THEN
        RAISE EXCEPTION 'unknown topology level "%" for %', level, what
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('The levels are %s.',
                                  (SELECT string_agg(name, ', ' ORDER BY depth) || ', node'
                                     FROM gangsched.topology_levels)),
                  HINT = 'Name one of the levels set with gangsched.set_topology_levels(), or node.';
    END IF;
    RETURN d;
END $$;

CREATE FUNCTION gangsched._level_name(depth int) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT name FROM gangsched.topology_levels l WHERE l.depth = _level_name.depth),
                    CASE WHEN depth IS NOT NULL THEN 'node' END)
$$;

-- The domain a node belongs to at a depth: the topology prefix, or the node
-- itself at the innermost level.
CREATE FUNCTION gangsched._domain(topology ltree, node_name text, depth int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN depth > gangsched._nlevel(topology) THEN topology::text || '.' || node_name
                ELSE gangsched._subpath(topology, 0, depth)::text END
$$;

-- A value as error messages show it: JSON-quoted (quotes, backslashes and
-- control characters escaped) and cut after 64 characters.
CREATE FUNCTION gangsched._shown(val text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT pg_catalog.to_json(pg_catalog.left(val, 64))::text
           || CASE WHEN pg_catalog.length(val) > 64 THEN '...' ELSE '' END
$$;

-- Names of teams, pools, nodes, datasets and GPU models: 1 to 63 characters,
-- ASCII letters, digits, '.', '_' and '-', beginning with a letter or a
-- digit (docs/sql-api.md#names). Nothing else can be printed into JSON,
-- channels, logs or shell commands unquoted by mistake. 22023 otherwise.
CREATE FUNCTION gangsched._check_name(val text, what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF val IS NULL OR val = '' THEN
        RAISE EXCEPTION '% must not be empty', what
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('Give the %s as 1 to 63 letters, digits, ".", "_" or "-".', what);
    END IF;
    IF pg_catalog.length(val) > 63 OR val !~ '^[A-Za-z0-9][A-Za-z0-9._-]*$' THEN
        RAISE EXCEPTION 'invalid %: %', what, gangsched._shown(val)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = CASE WHEN pg_catalog.length(val) > 63
                                THEN format('The %s has %s characters; at most 63 are allowed.', what, pg_catalog.length(val))
                                ELSE format('A %s is 1 to 63 ASCII letters, digits, ".", "_" and "-", beginning with a letter or a digit.', what) END,
                  HINT = format('Use a %s such as ''gpu-0042'', ''vision'' or ''imagenet.v2''.', what);
    END IF;
END $$;

-- Free-text labels (a job's name): at most max_chars characters, no control
-- characters (newlines, tabs, escapes). 22023 otherwise.
CREATE FUNCTION gangsched._check_label(val text, what text, max_chars int) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF val IS NULL THEN
        RETURN;
    END IF;
    IF pg_catalog.length(val) > max_chars THEN
        RAISE EXCEPTION '% is too long: % characters', what, pg_catalog.length(val)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A %s has at most %s characters.', what, max_chars),
                  HINT = format('Shorten the %s.', what);
    END IF;
    IF val ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION '% contains a control character: %', what, gangsched._shown(val)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A %s is printable text on one line: no newlines, tabs or other control characters.', what),
                  HINT = format('Remove the control characters from the %s.', what);
    END IF;
END $$;

-- Long text (a job's command, an agent's message): at most max_bytes bytes
-- of UTF-8. 22001 (string_data_right_truncation) otherwise; nothing is cut.
CREATE FUNCTION gangsched._check_text(val text, what text, max_bytes int) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF pg_catalog.octet_length(val) > max_bytes THEN
        RAISE EXCEPTION '% is too long: % bytes', what, pg_catalog.octet_length(val)
            USING ERRCODE = 'string_data_right_truncation',
                  DETAIL = format('A %s has at most %s bytes.', what, max_bytes),
                  HINT = format('Keep the %s short and put the rest in a file the job reads.', what);
    END IF;
END $$;

-- Refuse NULL, negative, NaN and infinite amounts, and amounts outside
-- [0.000001, max] other than 0: every amount must survive the float8 copies
-- the rounds and the generated columns make (1e-400 underflows, 1e400
-- overflows) with room to multiply by workers and nodes. 22003 otherwise.
CREATE FUNCTION gangsched._check_amount(val numeric, what text, allow_null bool DEFAULT false,
                                        max numeric DEFAULT 1e9) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF val IS NULL THEN
        IF allow_null THEN RETURN; END IF;
        RAISE EXCEPTION '% must not be null', what
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = format('Pass 0 if the %s is not needed.', what);
    END IF;
    IF val = 'NaN'::numeric OR val < 0 OR val = 'Infinity'::numeric THEN
        RAISE EXCEPTION '% must be a finite number >= 0, not %', what, val
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = format('Give %s as a non-negative finite number.', what);
    END IF;
    IF val > max OR (val > 0 AND val < 0.000001) THEN
        RAISE EXCEPTION '% must be 0 or between 0.000001 and %, not %', what, max,
              pg_catalog.btrim(pg_catalog.to_char(val, '9.999EEEE'))
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = format('Amounts are 0 or between 0.000001 and %s (docs/sql-api.md#bounds).', max),
                  HINT = format('Give %s in its unit (CPUs, GB, Gbit/s, GPUs), within the bounds.', what);
    END IF;
END $$;

CREATE FUNCTION gangsched._check_interval(val interval, what text, allow_zero bool) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF val IS NOT NULL AND (val < '0'::interval OR (NOT allow_zero AND val = '0'::interval)) THEN
        RAISE EXCEPTION '% must be %, not %', what,
              CASE WHEN allow_zero THEN 'zero or positive' ELSE 'positive' END, val
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('Give %s as a positive interval such as ''10 minutes'', or leave it NULL for the default.', what);
    END IF;
    IF val > '100 years'::interval THEN
        RAISE EXCEPTION '% must be at most 100 years, not %', what, val
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Longer intervals overflow the timestamps they are added to.',
                  HINT = format('Give %s as at most ''100 years'', or leave it NULL for the default.', what);
    END IF;
END $$;

-- PL/pgSQL rather than SQL: a SQL function that is not inlined plans its
-- INSERT on every call, PL/pgSQL once per session (an agent's report or a
-- cancel writes one event; the plan cost about 60 us of it).
CREATE FUNCTION gangsched._event(kind text, job bigint, node_id int, team_id int, reason text, detail jsonb DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gangsched.events (at, kind, job, node_id, team_id, reason, detail)
    VALUES (gangsched.now(), _event.kind, _event.job, _event.node_id, _event.team_id, _event.reason, _event.detail);
END $$;

CREATE FUNCTION gangsched._pool_id(pool text) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    id int;
BEGIN
    SELECT p.id INTO id FROM gangsched.pools p WHERE p.name = pool;
    IF id IS NULL THEN
        RAISE EXCEPTION 'pool "%" does not exist', pool
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('The pools are: %s.', COALESCE((SELECT string_agg(name, ', ' ORDER BY name) FROM gangsched.pools), 'none yet')),
                  HINT = 'Create it with gangsched.add_pool(name, kind) or name an existing pool.';
    END IF;
    RETURN id;
END $$;

CREATE FUNCTION gangsched._team_id(team text) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    id int;
BEGIN
    SELECT t.id INTO id FROM gangsched.teams t WHERE t.name = team;
    IF id IS NULL THEN
        RAISE EXCEPTION 'team "%" does not exist', team
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Create it with gangsched.add_team(name) or name an existing team (see gangsched.teams).';
    END IF;
    RETURN id;
END $$;

CREATE FUNCTION gangsched._node(node text) RETURNS gangsched.nodes
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n gangsched.nodes;
BEGIN
    SELECT * INTO n FROM gangsched.nodes WHERE name = node;
    IF n.id IS NULL THEN
        RAISE EXCEPTION 'node "%" does not exist', node
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Register it with gangsched.add_node() or name an existing node (see gangsched.nodes).';
    END IF;
    RETURN n;
END $$;
