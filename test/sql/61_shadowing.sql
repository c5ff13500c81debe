-- Nothing a tenant types can run code inside gangsched: a schema every role
-- may create objects in, first in the caller's search_path, holds
-- look-alikes of the functions, aggregates and operators gangsched's
-- queries use (exact argument types, so each would beat pg_catalog's
-- polymorphic or implicitly cast candidate). Each records its call in
-- evil.calls. A whole scenario then runs under that search_path: inventory,
-- teams, quotas, submit, rounds,
-- why_pending, the queue, agents' calls, a preemption, cancel, the
-- analysts' functions and check_invariants. evil.calls stays empty: the
-- C code runs its queries under a fixed search_path and qualifies every
-- function, operator and type; the SQL functions fix their search_path.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.default_grace = '1min';
SET gangsched.restart_cost = '1min';

CREATE SCHEMA evil;
GRANT USAGE, CREATE ON SCHEMA evil TO PUBLIC;
CREATE TABLE evil.calls (id serial, fn text NOT NULL);
GRANT INSERT, SELECT ON evil.calls TO PUBLIC;
GRANT USAGE ON SEQUENCE evil.calls_id_seq TO PUBLIC;
CREATE FUNCTION evil.note(fn text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    INSERT INTO evil.calls (fn) VALUES (fn);
END $$;

-- functions
CREATE FUNCTION evil.upper_inf(r tstzrange) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('upper_inf(tstzrange)'); RETURN pg_catalog.upper_inf(r); END $$;
CREATE FUNCTION evil.lower(r tstzrange) RETURNS timestamptz
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('lower(tstzrange)'); RETURN pg_catalog.lower(r); END $$;
CREATE FUNCTION evil.upper(r tstzrange) RETURNS timestamptz
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('upper(tstzrange)'); RETURN pg_catalog.upper(r); END $$;
CREATE FUNCTION evil.pg_notify(channel text, payload text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('pg_notify(text,text)'); PERFORM pg_catalog.pg_notify(channel, payload); END $$;
CREATE FUNCTION evil.json_build_object(text, text, text, bigint, text, timestamptz) RETURNS json
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('json_build_object'); RETURN pg_catalog.json_build_object($1, $2, $3, $4, $5, $6); END $$;
CREATE FUNCTION evil.json_build_object(text, text, text, bigint) RETURNS json
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('json_build_object'); RETURN pg_catalog.json_build_object($1, $2, $3, $4); END $$;
CREATE FUNCTION evil.jsonb_build_object(text, bigint, text, timestamptz) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('jsonb_build_object'); RETURN pg_catalog.jsonb_build_object($1, $2, $3, $4); END $$;
CREATE FUNCTION evil.format(text, bigint, text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('format(text,bigint,text)'); RETURN pg_catalog.format($1, $2, $3); END $$;
CREATE FUNCTION evil.make_interval(secs integer) RETURNS interval
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('make_interval(int)'); RETURN pg_catalog.make_interval(secs => secs); END $$;
CREATE FUNCTION evil.make_interval(secs numeric) RETURNS interval
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('make_interval(numeric)'); RETURN pg_catalog.make_interval(secs => secs); END $$;
CREATE FUNCTION evil.generate_series(a integer, b integer) RETURNS SETOF integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('generate_series(int,int)'); RETURN QUERY SELECT pg_catalog.generate_series(a, b); END $$;
CREATE FUNCTION evil.unnest(a integer[]) RETURNS SETOF integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('unnest(int[])'); RETURN QUERY SELECT pg_catalog.unnest(a); END $$;
CREATE FUNCTION evil.unnest(a bigint[]) RETURNS SETOF bigint
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('unnest(bigint[])'); RETURN QUERY SELECT pg_catalog.unnest(a); END $$;
CREATE FUNCTION evil.unnest(a text[]) RETURNS SETOF text
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('unnest(text[])'); RETURN QUERY SELECT pg_catalog.unnest(a); END $$;
CREATE FUNCTION evil.unnest(a boolean[]) RETURNS SETOF boolean
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('unnest(bool[])'); RETURN QUERY SELECT pg_catalog.unnest(a); END $$;
CREATE FUNCTION evil.hashtext(t text) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('hashtext(text)'); RETURN pg_catalog.hashtext(t); END $$;
CREATE FUNCTION evil.now() RETURNS timestamptz
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION evil.cardinality(a bigint[]) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('cardinality(bigint[])'); RETURN pg_catalog.cardinality(a); END $$;

-- aggregates: the final functions record the call
CREATE FUNCTION evil.count_final(n bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog AS $$ BEGIN PERFORM evil.note('count(*)'); RETURN n; END $$;
CREATE AGGREGATE evil.count(*) (sfunc = int8inc, stype = int8, initcond = '0', finalfunc = evil.count_final);
CREATE FUNCTION evil.array_agg_final(a bigint[]) RETURNS bigint[]
LANGUAGE plpgsql SET search_path = pg_catalog AS $$ BEGIN PERFORM evil.note('array_agg(bigint)'); RETURN a; END $$;
CREATE AGGREGATE evil.array_agg(bigint) (sfunc = array_append, stype = bigint[], finalfunc = evil.array_agg_final);
CREATE FUNCTION evil.sum_final(n numeric) RETURNS numeric
LANGUAGE plpgsql SET search_path = pg_catalog AS $$ BEGIN PERFORM evil.note('sum(numeric)'); RETURN n; END $$;
CREATE AGGREGATE evil.sum(numeric) (sfunc = numeric_add, stype = numeric, finalfunc = evil.sum_final);
CREATE FUNCTION evil.sum_final(n float8) RETURNS float8
LANGUAGE plpgsql SET search_path = pg_catalog AS $$ BEGIN PERFORM evil.note('sum(float8)'); RETURN n; END $$;
CREATE AGGREGATE evil.sum(float8) (sfunc = float8pl, stype = float8, finalfunc = evil.sum_final);
CREATE FUNCTION evil.max_final(t timestamptz) RETURNS timestamptz
LANGUAGE plpgsql SET search_path = pg_catalog AS $$ BEGIN PERFORM evil.note('max(timestamptz)'); RETURN t; END $$;
CREATE AGGREGATE evil.max(timestamptz) (sfunc = timestamptz_larger, stype = timestamptz, finalfunc = evil.max_final);

-- operators
CREATE FUNCTION evil.eq(a bigint, b bigint) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('=(bigint,bigint)'); RETURN a OPERATOR(pg_catalog.=) b; END $$;
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.eq);
CREATE FUNCTION evil.eq(a integer, b integer) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('=(int,int)'); RETURN a OPERATOR(pg_catalog.=) b; END $$;
CREATE OPERATOR evil.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.eq);
CREATE FUNCTION evil.eq(a text, b text) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('=(text,text)'); RETURN a OPERATOR(pg_catalog.=) b; END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq);
CREATE FUNCTION evil.cat(a text, b text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('||(text,text)'); RETURN a OPERATOR(pg_catalog.||) b; END $$;
CREATE OPERATOR evil.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.cat);
CREATE FUNCTION evil.cat(a text, b integer) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('||(text,int)'); RETURN a OPERATOR(pg_catalog.||) b; END $$;
CREATE OPERATOR evil.|| (LEFTARG = text, RIGHTARG = integer, FUNCTION = evil.cat);
CREATE FUNCTION evil.mul(a float8, b integer) RETURNS float8
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('*(float8,int)'); RETURN a OPERATOR(pg_catalog.*) b; END $$;
CREATE OPERATOR evil.* (LEFTARG = float8, RIGHTARG = integer, FUNCTION = evil.mul);
CREATE FUNCTION evil.mul(a integer, b numeric) RETURNS numeric
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('*(int,numeric)'); RETURN a OPERATOR(pg_catalog.*) b; END $$;
CREATE OPERATOR evil.* (LEFTARG = integer, RIGHTARG = numeric, FUNCTION = evil.mul);
CREATE FUNCTION evil.mul(a integer, b integer) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('*(int,int)'); RETURN a OPERATOR(pg_catalog.*) b; END $$;
CREATE OPERATOR evil.* (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.mul);
CREATE FUNCTION evil.add(a integer, b integer) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('+(int,int)'); RETURN a OPERATOR(pg_catalog.+) b; END $$;
CREATE OPERATOR evil.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.add);
CREATE FUNCTION evil.sub(a integer, b integer) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('-(int,int)'); RETURN a OPERATOR(pg_catalog.-) b; END $$;
CREATE OPERATOR evil.- (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.sub);
CREATE FUNCTION evil.add(a timestamptz, b interval) RETURNS timestamptz
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('+(timestamptz,interval)'); RETURN a OPERATOR(pg_catalog.+) b; END $$;
CREATE OPERATOR evil.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = evil.add);
CREATE FUNCTION evil.le(a timestamptz, b timestamptz) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN PERFORM evil.note('<=(timestamptz,timestamptz)'); RETURN a OPERATOR(pg_catalog.<=) b; END $$;
CREATE OPERATOR evil.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.le);

/* ================================================================== */
/* The shadows work: unqualified calls under this search_path hit them */
/* ================================================================== */
SET search_path = evil, pg_catalog, public;
SELECT 1::bigint = 1::bigint AS eq, 'a'::text || 'b'::text AS cat, upper_inf(tstzrange('2030-01-01', NULL)) AS inf,
       (SELECT count(*) FROM unnest(ARRAY[1, 2]::int[])) AS n, make_interval(secs => 3) AS iv;
SELECT fn FROM evil.calls ORDER BY fn;
TRUNCATE evil.calls;

/* ================================================================== */
/* A scenario under that search_path                                   */
/* ================================================================== */
-- The inventory (names reach the events' JSON escaped, see round.c).
SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('n-1', 'main', 'z1.r1', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_node('n.2', 'main', 'z1.r1', 32, 256, 100, 8, 'a100', 80);
SELECT gangsched.add_node('n3', 'main', 'z1.r2', 32, 256, 100, 8, 'a100', 80, 4);
SELECT gangsched.cache_dataset('n3', 'imagenet');
SELECT gangsched.add_team('vision'), gangsched.add_team('lang');
SELECT gangsched.set_quota('vision', 'main', 9), gangsched.set_quota('lang', 'main', 8);

-- lang fills n-1 and n.2 (one within quota, one borrowed); vision runs a
-- fractional job on n3.
SELECT gangsched.submit('lang', 1, 8, name => 'b1');
SELECT gangsched.submit('lang', 1, 8, name => 'b2');
SELECT gangsched.submit('vision', 2, 0.5, name => 'frac', dataset => 'imagenet', locality => 'preferred');
SELECT considered, placed, workers_placed, preempted, expired, requeued FROM gangsched.run_round();
SELECT job, name, team, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT job, node, worker, device FROM gangsched.placements ORDER BY job, worker, device;
SELECT * FROM gangsched.node_work('n-1');
SELECT gangsched.job_started(1, 'n-1'), gangsched.job_started(2, 'n.2'), gangsched.job_started(3, 'n3');

-- vision waits with a job that needs three whole nodes, then cancels it
SELECT gangsched.submit('vision', 3, 8, name => 'toobig', queue_timeout => '1h');
SELECT considered, placed, workers_placed, preempted, expired, requeued FROM gangsched.run_round();
SELECT * FROM gangsched.why_pending(4);
SELECT "position", job, team, name, would_borrow, fits_now, reason FROM gangsched.queue;
SELECT gangsched.cancel(4);

-- an hour later vision wants its quota back: lang's borrowed job is
-- preempted for v1
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT gangsched.job_checkpointed(2);
SELECT gangsched.submit('vision', 1, 8, name => 'v1');
SELECT considered, placed, workers_placed, preempted, expired, requeued FROM gangsched.run_round();
SELECT job, name, state, borrowed, reason FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.why_pending(5);
SELECT * FROM gangsched.node_work('n.2');
SELECT gangsched.job_released(2, true);
SELECT job, name, state FROM gangsched.jobs ORDER BY job;
SELECT gangsched.job_started(5, 'n.2');
-- b2 waits again; a round with nothing to place
SELECT considered, placed, workers_placed, preempted, expired, requeued FROM gangsched.run_round();
SELECT * FROM gangsched.why_pending(2);
SELECT "position", job, team, name, would_borrow, fits_now, reason FROM gangsched.queue;
SELECT kind, job, reason, detail FROM gangsched.events ORDER BY id;

-- jobs end
SET gangsched.clock_override = '2030-01-01 02:00:00+00';
SELECT gangsched.job_finished(1, true, E'done "ok" \\');
SELECT gangsched.job_finished(3, false, 'oom');
SELECT considered, placed, workers_placed, preempted, expired, requeued FROM gangsched.run_round();
SELECT gangsched.job_started(2, 'n-1');
SET gangsched.clock_override = '2030-01-01 03:00:00+00';
SELECT gangsched.job_finished(2, true), gangsched.job_finished(5, true);
SELECT gangsched.set_node_state('n3', 'draining');
SELECT gangsched.evict_dataset('n3', 'imagenet');
SELECT job, name, state FROM gangsched.jobs ORDER BY job;

-- the analysts' functions over that history
SELECT * FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-01 04:00+00', '1 hour') ORDER BY 1, 2, 3;
SELECT * FROM gangsched.utilization('2030-01-01 00:00+00', '2030-01-01 04:00+00', '2 hours') ORDER BY 1, 2;
SELECT * FROM gangsched.snapshot('2030-01-01 01:30+00') ORDER BY 1, 2, 3;
SELECT * FROM gangsched.queue_waits('2030-01-01 00:00+00', '2030-01-01 04:00+00') ORDER BY 1;
SELECT * FROM gangsched.preemption_summary('2030-01-01 00:00+00', '2030-01-01 04:00+00') ORDER BY 1;
SELECT * FROM gangsched.queue_depth('2030-01-01 00:00+00', '2030-01-01 04:00+00', '2 hours') ORDER BY 1, 2;
SELECT * FROM gangsched.team_shares ORDER BY 1, 2;
SELECT * FROM gangsched.check_invariants();

-- Names from before the name rules (written past the API, the rules
-- dropped) with quotes, backslashes and a tab: the round's events still
-- get valid JSON.
SELECT gangsched.set_node_state('n3', 'up');
SELECT gangsched.node_heartbeat('n3');
SET client_min_messages = warning;
ALTER TABLE gangsched.nodes DROP CONSTRAINT IF EXISTS nodes_name_rule;
ALTER TABLE gangsched.pools DROP CONSTRAINT IF EXISTS pools_name_rule;
RESET client_min_messages;
UPDATE gangsched.nodes SET name = E'q"\\\t' OPERATOR(pg_catalog.||) name;
UPDATE gangsched.pools SET name = E'ma"in\\';
SELECT gangsched.submit('vision', 2, 8, name => 'wide');
SELECT gangsched.submit('vision', 1, 4, name => 'narrow');
SELECT considered, placed, workers_placed, preempted, expired, requeued FROM gangsched.run_round();
SELECT kind, job, detail, detail->'nodes'->>0 AS first_node FROM gangsched.events ORDER BY id DESC LIMIT 2;
SELECT * FROM gangsched.why_pending(6);
SELECT job, name, state FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.check_invariants();

-- not one call reached the look-alikes
RESET search_path;
SELECT fn, count(*) FROM evil.calls GROUP BY fn ORDER BY fn;
SET client_min_messages = warning;
DROP SCHEMA evil CASCADE;
RESET client_min_messages;
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
