/* ------------------------------------------------------------------ */
/* Clock and small helpers                                             */
/* ------------------------------------------------------------------ */

-- The scheduler's clock: pg_catalog.now() unless gangsched.clock_override
-- is set (tests and trace replays run in virtual time).
CREATE FUNCTION gangsched.now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(NULLIF(pg_catalog.current_setting('gangsched.clock_override', true), '')::timestamptz,
                    pg_catalog.now())
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

-- Refuse NULL, negative, NaN and infinite amounts.
CREATE FUNCTION gangsched._check_amount(val numeric, what text, allow_null bool DEFAULT false) RETURNS void
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
END $$;

CREATE FUNCTION gangsched._event(kind text, job bigint, node_id int, team_id int, reason text, detail jsonb DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO gangsched.events (at, kind, job, node_id, team_id, reason, detail)
    VALUES (gangsched.now(), kind, job, node_id, team_id, reason, detail)
$$;

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
