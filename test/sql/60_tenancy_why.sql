-- Tenancy: why_pending names no job a portal may not see. The job first in
-- line (capacity kept for it) and the job whose kept capacity a smaller
-- one would fit in read "a job of another team" to a portal of another
-- team, as the jobs view reads "for a job of another team"; the operator,
-- an analyst and the job's own team's portal see the id.
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.preemption = off;
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'gs60w\_%' ORDER BY rolname DESC LOOP
        EXECUTE format('DROP OWNED BY %I', r);
        EXECUTE format('DROP ROLE %I', r);
    END LOOP;
END $$;
CREATE ROLE gs60w_pv;
CREATE ROLE gs60w_pn;
CREATE ROLE gs60w_an;
GRANT gangsched_analyst TO gs60w_an;

SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('gpu', 'reserved');
SELECT gangsched.add_node('n1', 'gpu', 'r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team('vision');
SELECT gangsched.add_team('nlp');
SELECT gangsched.add_member('gs60w_pv', 'vision');
SELECT gangsched.add_member('gs60w_pn', 'nlp');

-- nlp runs 4 of the 8 GPUs; vision's 8-GPU job is first in line and the
-- free 4 are kept for it; nlp's next 4-GPU job waits behind it.
SELECT gangsched.submit('nlp', 1, 4, name => 'nlp-running') AS nlp_running \gset
SELECT placed FROM gangsched.run_round();
SELECT gangsched.job_started(:nlp_running, 'n1');
SELECT gangsched.submit('vision', 1, 8, name => 'vision-big') AS vision_big \gset
SELECT gangsched.submit('nlp', 1, 4, name => 'nlp-waits') AS nlp_waits \gset
SELECT placed FROM gangsched.run_round();

-- the ids as the operator (superuser) reads them, made stable
CREATE FUNCTION pg_temp.ids(t text) RETURNS text LANGUAGE sql AS $$
    SELECT replace(replace(t, 'job ' || current_setting('x.vb'), 'job <vision-big>'),
                   'job ' || current_setting('x.nw'), 'job <nlp-waits>') $$;
SELECT set_config('x.vb', :'vision_big', false) IS NOT NULL AS ok, set_config('x.nw', :'nlp_waits', false) IS NOT NULL AS ok2;
SELECT reason, pg_temp.ids(detail) AS detail FROM gangsched.why_pending(:nlp_waits);
-- nlp's portal: vision's job is not named
SET ROLE gs60w_pn;
SELECT reason, detail FROM gangsched.why_pending(:nlp_waits);
SELECT count(*) AS details_naming_a_job_id
  FROM gangsched.why_pending(:nlp_waits) w WHERE w.detail ~ '\mjob [0-9]' OR w.reason ~ '\mjob [0-9]';
RESET ROLE;
-- why_pending is for operators and portals: an analyst may not call it
SELECT has_function_privilege('gs60w_an', 'gangsched.why_pending(bigint)', 'EXECUTE') AS analyst_may_call;
-- the masking keeps the ids of the teams given and masks the others and
-- ids of no job, each id whole (job N's own id stays inside "job N2"'s mask)
SELECT gangsched._mask_jobs(format('job %s, job %s, job 999999, jobs', :nlp_running, :vision_big),
                            ARRAY[(SELECT id FROM gangsched.teams WHERE name = 'nlp')])
       = format('job %s, a job of another team, a job of another team, jobs', :nlp_running) AS masked;
SELECT gangsched._mask_jobs(format('job %s2 before job %s', :nlp_running, :nlp_running),
                            ARRAY[(SELECT id FROM gangsched.teams WHERE name = 'nlp')])
       = format('a job of another team before job %s', :nlp_running) AS masked_whole_ids;
-- vision's portal explains its own job: its own id stays
SET ROLE gs60w_pv;
SELECT reason, pg_temp.ids(detail) AS detail FROM gangsched.why_pending(:vision_big);
RESET ROLE;
SELECT * FROM gangsched.check_invariants();

SET client_min_messages = warning;
DROP EXTENSION gangsched;
DROP ROLE gs60w_pv, gs60w_pn, gs60w_an;
