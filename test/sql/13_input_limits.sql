-- Input that can never be valid is refused (issue 10): names outside the
-- safe set, amounts outside float8 range and the documented bounds, intervals
-- that would overflow, oversized text, and the per-team limits on pending jobs
-- (53S07) and gang size (53S08). Every refusal with its SQLSTATE, message,
-- detail and hint, and nothing changed by it.
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

-- Run a statement that must be refused; report its SQLSTATE, message, detail
-- and hint as a NOTICE, and whether anything changed.
CREATE PROCEDURE pg_temp.refused(cmd text) LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.fingerprint();
    st     text;
    msg    text;
    det    text;
    hnt    text;
BEGIN
    BEGIN
        EXECUTE cmd;
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
    IF pg_temp.fingerprint() IS DISTINCT FROM before THEN
        RAISE NOTICE 'STATE CHANGED by a refused call';
    END IF;
END $$;

/* ---------------- a small cluster ---------------- */

SELECT gangsched.set_topology_levels(ARRAY['zone', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('n1', 'main', 'z1.r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_node('n2', 'main', 'z1.r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team('vision'), gangsched.add_team('nlp');
SELECT gangsched.set_quota('vision', 'main', 8);
SELECT gangsched.cache_dataset('n1', 'imagenet.v2');

/* ---------------- names ---------------- */

-- quotes, backslashes, control characters, spaces, non-ASCII, a leading
-- punctuation mark, 64 characters, a megabyte
CALL pg_temp.refused($$SELECT gangsched.add_pool('spot"a', 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool(E'spot\\b', 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool(E'spot\nb', 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool('spot b', 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool('spöt', 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool('-spot', 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool(repeat('p', 64), 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_pool(repeat('p', 1000000), 'reserved')$$);
CALL pg_temp.refused($$SELECT gangsched.add_team('vi"sion')$$);
CALL pg_temp.refused($$SELECT gangsched.add_team(E'vi\\sion')$$);
CALL pg_temp.refused($$SELECT gangsched.add_team(E'vision\t')$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n"3', 'main', 'z1.r1', 64, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node(E'n3\\', 'main', 'z1.r1', 64, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n3', 'main', 'z1.r1', 64, 512, 100, 8, 'a100"', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n3', 'main', ('z1.' || repeat('r', 64))::ltree, 64, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.cache_dataset('n1', 'image"net')$$);
CALL pg_temp.refused($$SELECT gangsched.cache_dataset('n1', E'imagenet\\v2')$$);
-- a level name of 64 characters (before any node, in a transaction)
BEGIN;
CALL pg_temp.refused($$SELECT gangsched.set_topology_levels(ARRAY['zone', repeat('r', 64)])$$);
ROLLBACK;
-- the longest and the most varied names that are accepted
SELECT gangsched.add_pool(repeat('p', 63), 'reserved') > 0 AS accepted;
SELECT gangsched.add_team('Vision_2.team-b') > 0 AS accepted;

-- a job's name is printable text of at most 200 characters; its command at
-- most 64 KiB; its dataset and GPU model follow the name rule
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, name => E'train\nresnet')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, name => E'train\u001b[31m')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, name => repeat('j', 201))$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, command => repeat('x', 65537))$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, command => repeat('é', 32769))$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, dataset => 'image"net')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, gpu_model => E'a100\\')$$);
BEGIN;
SELECT gangsched.submit('vision', 1, 1, name => repeat('j', 200), command => repeat('x', 65536)) > 0 AS accepted;
SELECT gangsched.submit('vision', 1, 1, name => 'resnet "50" \ v2', command => E'python train.py \\\n  --lr 0.1') > 0 AS accepted;
SELECT name FROM gangsched.gangs WHERE name LIKE 'resnet%';
ROLLBACK;

/* ---------------- amounts ---------------- */

-- numbers numeric holds but float8 does not (underflow, overflow), and
-- amounts beyond the documented bounds
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'main', 8, cpus => 1e-400)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'main', 8, cpus => 1e400)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'main', 1e309)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'main', 8, borrowing_limit_gpus => 1e-400)$$);
CALL pg_temp.refused($$SELECT gangsched.set_quota('vision', 'main', 8, mem_gb => 2e9)$$);
CALL pg_temp.refused($$SELECT gangsched.add_team('tiny', 1e-400)$$);
CALL pg_temp.refused($$SELECT gangsched.add_team('huge', 1e400)$$);
CALL pg_temp.refused($$SELECT gangsched.add_team('huge', 1e7)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n3', 'main', 'z1.r1', 1e309, 512, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n3', 'main', 'z1.r1', 64, 1e309, 100, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n3', 'main', 'z1.r1', 64, 512, 1e-400, 8, 'a100', 80)$$);
CALL pg_temp.refused($$SELECT gangsched.add_node('n3', 'main', 'z1.r1', 64, 512, 100, 8, 'a100', 1e309)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, cpus => 1e-400)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1e400)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 65)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, mem_gb => 1e309)$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, gpu_mem_gb => 1e-400)$$);
-- the bounds themselves are accepted
BEGIN;
SELECT gangsched.add_team('light', 0.000001) > 0 AND gangsched.add_team('heavy', 1000000) > 0 AS accepted;
SELECT gangsched.set_quota('vision', 'main', 1e9, cpus => 0.000001, mem_gb => 1e9);
SELECT gpus, cpus, mem_gb FROM gangsched.quotas;
ROLLBACK;

/* ---------------- intervals ---------------- */

CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, grace => '1000 years')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, checkpoint_interval => '101 years')$$);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, queue_timeout => '178000000 years')$$);

/* ---------------- per-team limits ---------------- */

SELECT name, setting, context, min_val, max_val FROM pg_settings
 WHERE name IN ('gangsched.max_pending_per_team', 'gangsched.max_workers_per_gang') ORDER BY name;

-- a gang larger than the setting, then than the team's own limit
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 4097, 0, cpus => 0.001)$$);
SELECT gangsched.set_team_limits('vision', max_pending => 3, max_workers_per_gang => 4);
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 8, 1)$$);
SELECT name, max_pending, max_workers_per_gang FROM gangsched.teams ORDER BY id;

-- three pending jobs, then the fourth is refused
SELECT count(gangsched.submit('vision', 1, 1, name => 'p' || i)) AS submitted FROM generate_series(1, 3) i;
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, name => 'p4')$$);
-- a cancelled job leaves room for one more
SELECT gangsched.cancel((SELECT min(id) FROM gangsched.gangs WHERE team_id = gangsched._team_id('vision')));
SELECT gangsched.submit('vision', 1, 1, name => 'p4') > 0 AS accepted;
CALL pg_temp.refused($$SELECT gangsched.submit('vision', 1, 1, name => 'p5')$$);

-- back to the settings: nlp takes gangsched.max_pending_per_team
SELECT gangsched.set_team_limits('vision');
SELECT name, max_pending, max_workers_per_gang FROM gangsched.teams ORDER BY id;
SET gangsched.max_pending_per_team = 2;
SELECT gangsched.submit('nlp', 1, 1, preemptible => true) > 0 AS accepted;
SELECT gangsched.submit('nlp', 1, 1) > 0 AS accepted;
CALL pg_temp.refused($$SELECT gangsched.submit('nlp', 1, 1)$$);
RESET gangsched.max_pending_per_team;
SELECT gangsched.submit('nlp', 1, 1) > 0 AS accepted;

-- bad limits
CALL pg_temp.refused($$SELECT gangsched.set_team_limits('vision', max_pending => 0)$$);
CALL pg_temp.refused($$SELECT gangsched.set_team_limits('vision', max_workers_per_gang => -1)$$);
CALL pg_temp.refused($$SELECT gangsched.set_team_limits('nobody', 10)$$);

-- at most 64 pools (a round handles 64): the 65th is refused, and rounds go on
SELECT count(gangsched.add_pool('extra' || i, 'opportunistic')) AS added
  FROM generate_series(1, 64 - (SELECT count(*) FROM gangsched.pools)::int) i;
CALL pg_temp.refused($$SELECT gangsched.add_pool('one-too-many', 'opportunistic')$$);
SELECT ran, note FROM gangsched.run_round();

-- the tables refuse what the functions refuse (23514)
\set VERBOSITY terse
INSERT INTO gangsched.pools (name, kind) VALUES ('a"b', 'reserved');
UPDATE gangsched.nodes SET name = E'n1\\' WHERE name = 'n1';
\set VERBOSITY default

SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
