/* ------------------------------------------------------------------ */
/* Tenancy: roles, bindings, who is calling (docs/security.md)         */
/* ------------------------------------------------------------------ */

-- The four group roles, created when absent (roles are cluster-wide: a
-- second database with gangsched shares them). NOLOGIN: login roles are
-- bound to teams and nodes by the operator functions below, which grant
-- the group role they need.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['gangsched_operator', 'gangsched_portal', 'gangsched_agent', 'gangsched_analyst'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END $$;

-- Which roles may act as the portal of which team. A role that is a member
-- of a bound role (a login role in a bound group) is bound too. regrole:
-- stored as the role's oid, dumped and restored by its name.
CREATE TABLE gangsched.members (
    role     regrole NOT NULL,
    team_id  int NOT NULL REFERENCES gangsched.teams ON DELETE CASCADE,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (role, team_id)
);
CREATE INDEX members_team_idx ON gangsched.members (team_id);

-- Which roles may act as the agent of which node.
CREATE TABLE gangsched.agents (
    role     regrole NOT NULL,
    node_id  int NOT NULL REFERENCES gangsched.nodes ON DELETE CASCADE,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (role, node_id)
);
CREATE INDEX agents_node_idx ON gangsched.agents (node_id);

-- The role that called the outermost gangsched function (src/tenancy.c):
-- the current user outside gangsched's SECURITY DEFINER frames.
CREATE FUNCTION gangsched._caller() RETURNS oid
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_caller_sql';

-- Superuser or member of gangsched_operator.
CREATE FUNCTION gangsched._is_operator() RETURNS bool
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_is_operator_sql';

-- Its name: the default of events.actor, evaluated for every event row.
CREATE FUNCTION gangsched._caller_name() RETURNS name
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_caller_name_sql';

-- Every event records the role that acted (the worker's rounds: its role).
ALTER TABLE gangsched.events ADD COLUMN actor name NOT NULL DEFAULT gangsched._caller_name();

-- ERROR 42501 unless the caller is an operator (src/tenancy.c, the same
-- check the round makes).
CREATE FUNCTION gangsched._require_operator(action text) RETURNS void
LANGUAGE C VOLATILE STRICT AS 'MODULE_PATHNAME', 'gs_require_operator_sql';

-- Whether the caller acts for team `tid` (operators act for every team):
-- a role bound to a team acts for every team of its subtree (team trees,
-- docs/security.md).
CREATE FUNCTION gangsched._acts_for_team(tid int) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    c oid;
BEGIN
    IF gangsched._is_operator() THEN
        RETURN true;
    END IF;
    c := gangsched._caller();
    RETURN EXISTS (WITH RECURSIVE up(id) AS (
                       SELECT tid
                       UNION
                       SELECT t.parent_id FROM up JOIN gangsched.teams t ON t.id = up.id WHERE t.parent_id IS NOT NULL)
                   SELECT FROM gangsched.members m JOIN up ON m.team_id = up.id
                    WHERE pg_catalog.pg_has_role(c, m.role, 'MEMBER'));
END $$;

-- Refuse unless the caller acts for team `tid`. `action` says what, e.g.
-- 'submit to team "vision"' or 'cancel job 12'.
CREATE FUNCTION gangsched._require_team(tid int, action text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT gangsched._acts_for_team(tid) THEN
        RAISE EXCEPTION 'permission denied to %', action
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('Role "%s" is not bound to the team%s.', gangsched._caller_name(),
                                             CASE WHEN action LIKE '%job%' THEN ' of that job' ELSE '' END),
                  HINT = 'An operator binds a portal role to a team with gangsched.add_member(role, team).';
    END IF;
END $$;

-- Refuse unless the caller is the agent of node `nid` (or an operator).
CREATE FUNCTION gangsched._require_node(nid int, node text, action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c oid;
BEGIN
    IF gangsched._is_operator() THEN
        RETURN;
    END IF;
    c := gangsched._caller();
    IF NOT EXISTS (SELECT FROM gangsched.agents a
                    WHERE a.node_id = nid AND pg_catalog.pg_has_role(c, a.role, 'MEMBER')) THEN
        RAISE EXCEPTION 'permission denied to % for node "%"', action, node
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('Role "%s" is not bound to node "%s".', gangsched._caller_name(), node),
                  HINT = 'An operator binds an agent role to a node with gangsched.add_agent(role, node).';
    END IF;
END $$;

-- Refuse unless the caller is the agent of a node where job `job` holds
-- workers now (or an operator).
CREATE FUNCTION gangsched._require_job_agent(job bigint, action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c oid;
BEGIN
    IF gangsched._is_operator() THEN
        RETURN;
    END IF;
    c := gangsched._caller();
    IF NOT EXISTS (SELECT FROM gangsched.allocations x JOIN gangsched.agents a ON a.node_id = x.node_id
                    WHERE x.job = _require_job_agent.job AND pg_catalog.upper_inf(x.during)
                      AND pg_catalog.pg_has_role(c, a.role, 'MEMBER')) THEN
        RAISE EXCEPTION 'permission denied to % job %', action, job
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('Role "%s" is not bound to any node where job %s holds workers.',
                                             gangsched._caller_name(), job),
                  HINT = 'Only the agents of the nodes a job runs on report on it; an operator binds them with gangsched.add_agent(role, node).';
    END IF;
END $$;

-- What the caller may see in the jobs, queue and placements views: every
-- row (operators, analysts) or its teams' rows (portals: the teams it is
-- bound to and their subtrees); commands only of its own teams
-- (operators: all).
CREATE FUNCTION gangsched._visibility(OUT all_rows bool, OUT all_commands bool, OUT teams int[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    c oid := gangsched._caller();
BEGIN
    all_commands := gangsched._is_operator();
    all_rows := all_commands OR pg_catalog.pg_has_role(c, 'gangsched_analyst', 'MEMBER');
    -- the teams it is bound to and their subtrees
    WITH RECURSIVE b(id) AS (
        SELECT m.team_id FROM gangsched.members m WHERE pg_catalog.pg_has_role(c, m.role, 'MEMBER')
        UNION
        SELECT t.id FROM b JOIN gangsched.teams t ON t.parent_id = b.id)
    SELECT COALESCE(pg_catalog.array_agg(b.id ORDER BY b.id), '{}') INTO teams FROM b;
END $$;

CREATE FUNCTION gangsched._role_oid(role name, what text) RETURNS oid
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r oid;
BEGIN
    SELECT oid INTO r FROM pg_catalog.pg_roles WHERE rolname = role;
    IF r IS NULL THEN
        RAISE EXCEPTION 'role "%" does not exist', role
            USING ERRCODE = 'undefined_object',
                  HINT = pg_catalog.format('Create the login role first (CREATE ROLE ... LOGIN), then bind it as %s.', what);
    END IF;
    IF role IN ('gangsched_operator', 'gangsched_portal', 'gangsched_agent', 'gangsched_analyst')
       OR (SELECT rolsuper FROM pg_catalog.pg_roles WHERE oid = r) THEN
        RAISE EXCEPTION 'role "%" cannot be bound as %', role, what
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'gangsched''s own group roles and superusers are not bound to teams or nodes.',
                  HINT = 'Bind the login role (or a group role of your own) that the portal or agent connects as.';
    END IF;
    RETURN r;
END $$;

-- Default timeouts for a newly bound role, so a portal or agent that leaves
-- a transaction open cannot hold locks the round needs for long. Settings
-- the operator gave the role already are kept.
CREATE FUNCTION gangsched._tenant_timeouts(r oid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s text[];
    k text;
    v text;
BEGIN
    SELECT setconfig INTO s FROM pg_catalog.pg_db_role_setting WHERE setrole = r AND setdatabase = 0;
    FOR k, v IN VALUES ('lock_timeout', '5s'), ('statement_timeout', '60s'), ('idle_in_transaction_session_timeout', '60s') LOOP
        IF s IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.unnest(s) x WHERE x LIKE k || '=%') THEN
            EXECUTE pg_catalog.format('ALTER ROLE %I SET %s = %L', pg_catalog.pg_get_userbyid(r), k, v);
        END IF;
    END LOOP;
END $$;

CREATE FUNCTION gangsched.add_member(role name, team text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r   oid;
    tid int;
BEGIN
    PERFORM gangsched._require_operator('bind roles to teams');
    r := gangsched._role_oid(role, 'a team''s portal');
    tid := gangsched._team_id(team);
    INSERT INTO gangsched.members (role, team_id) VALUES (r, tid) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    EXECUTE pg_catalog.format('GRANT gangsched_portal TO %I', role);
    PERFORM gangsched._tenant_timeouts(r);
    PERFORM gangsched._event('member', NULL, NULL, tid, 'role bound to team',
                             pg_catalog.jsonb_build_object('role', role, 'team', team));
END $$;

CREATE FUNCTION gangsched.remove_member(role name, team text) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    r   oid;
    tid int;
BEGIN
    PERFORM gangsched._require_operator('unbind roles from teams');
    r := gangsched._role_oid(role, 'a team''s portal');
    tid := gangsched._team_id(team);
    DELETE FROM gangsched.members m WHERE m.role = r AND m.team_id = tid;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT FROM gangsched.members m WHERE m.role = r) THEN
        EXECUTE pg_catalog.format('REVOKE gangsched_portal FROM %I', role);
    END IF;
    PERFORM gangsched._event('member', NULL, NULL, tid, 'role unbound from team',
                             pg_catalog.jsonb_build_object('role', role, 'team', team));
    RETURN true;
END $$;

CREATE FUNCTION gangsched.add_agent(role name, node text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r oid;
    n gangsched.nodes;
BEGIN
    PERFORM gangsched._require_operator('bind agents to nodes');
    r := gangsched._role_oid(role, 'a node''s agent');
    n := gangsched._node(node);
    INSERT INTO gangsched.agents (role, node_id) VALUES (r, n.id) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    EXECUTE pg_catalog.format('GRANT gangsched_agent TO %I', role);
    PERFORM gangsched._tenant_timeouts(r);
    PERFORM gangsched._event('agent', NULL, n.id, NULL, 'role bound to node',
                             pg_catalog.jsonb_build_object('role', role, 'node', node));
END $$;

CREATE FUNCTION gangsched.remove_agent(role name, node text) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    r oid;
    n gangsched.nodes;
BEGIN
    PERFORM gangsched._require_operator('unbind agents from nodes');
    r := gangsched._role_oid(role, 'a node''s agent');
    n := gangsched._node(node);
    DELETE FROM gangsched.agents a WHERE a.role = r AND a.node_id = n.id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT FROM gangsched.agents a WHERE a.role = r) THEN
        EXECUTE pg_catalog.format('REVOKE gangsched_agent FROM %I', role);
    END IF;
    PERFORM gangsched._event('agent', NULL, n.id, NULL, 'role unbound from node',
                             pg_catalog.jsonb_build_object('role', role, 'node', node));
    RETURN true;
END $$;
