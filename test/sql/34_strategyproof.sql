-- Strategy-proofness (DRF): a team that declares more CPUs and memory per
-- worker than it needs (same GPUs) never gets more of its real work placed.
--
-- For each seed, a random cluster (1-3 nodes of 8 GPUs, 32 CPUs, 128 GB)
-- and a random queue (12-41 jobs of teams t1, t2 and liar, 1-2 workers of
-- 0-2 GPUs, 1-8 CPUs, 4-32 GB, submitted in random order) are built twice
-- on a fresh extension, and one round runs each time: once with every team
-- honest, once with liar declaring its CPUs and memory multiplied by a
-- random factor of 1.05-3.05 (at most 16 CPUs and 64 GB a worker, so its
-- gangs still fit a node). No quotas: plain weighted DRF.
--
-- Real work is what liar's placed jobs truly need (their honest demand),
-- measured as DRF measures it: the largest fraction of the cluster's GPUs,
-- CPUs or memory it amounts to. In DRF's divisible model lying never pays.
-- With whole jobs it can by at most a whole job: when liar's inflated job
-- leaves another team's big job without room, the leftover (less than that
-- job) may go to liar's smaller jobs. So per seed:
--
--   inflated real work <= honest real work + the largest single job's share
--
-- and over all seeds together lying must cost liar real work. Both are
-- shown as one boolean per seed (t) and one for the total (t).
-- Preemption is off: one round, no victims.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;

CREATE TEMP TABLE sp_nodes (seed int, k int, gpus int, cpus int, mem int);
CREATE TEMP TABLE sp_jobs (seed int, k int, team text, workers int, gpus int, cpus int, mem int, factor numeric);

-- The cluster and queue of a seed, from setseed(): the same every run.
CREATE FUNCTION pg_temp.sp_generate(s int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    i  int;
    nn int;
    nj int;
BEGIN
    PERFORM setseed(s / 1000.0);
    nn := 1 + floor(random() * 3)::int;
    FOR i IN 1 .. nn LOOP
        INSERT INTO sp_nodes VALUES (s, i, 8, 32, 128);
    END LOOP;
    nj := 12 + floor(random() * 30)::int;
    FOR i IN 1 .. nj LOOP
        INSERT INTO sp_jobs VALUES (s, i, (ARRAY['t1', 't2', 'liar'])[1 + floor(random() * 3)::int],
                                    1 + floor(random() * 2)::int, floor(random() * 3)::int,
                                    1 + floor(random() * 8)::int, 4 * (1 + floor(random() * 8)::int),
                                    round((1.05 + random() * 2)::numeric, 2));
    END LOOP;
END $$;

-- One trial on a fresh extension: liar's placed jobs, by job number.
CREATE FUNCTION pg_temp.sp_trial(s int, inflate bool) RETURNS int[]
LANGUAGE plpgsql AS $$
DECLARE
    r    record;
    jobs int[];
BEGIN
    DROP EXTENSION gangsched;
    CREATE EXTENSION gangsched;
    PERFORM gangsched.set_topology_levels(ARRAY['rack']);
    PERFORM gangsched.add_pool('main', 'reserved');
    PERFORM gangsched.add_node('n' || n.k, 'main', 'r1', n.cpus, n.mem, 100, n.gpus, 'a100', 80)
       FROM sp_nodes n WHERE n.seed = s ORDER BY n.k;
    PERFORM gangsched.add_team(t) FROM unnest(ARRAY['t1', 't2', 'liar']) t;
    FOR r IN SELECT * FROM sp_jobs j WHERE j.seed = s ORDER BY j.k LOOP
        PERFORM gangsched.submit(r.team, r.workers, r.gpus,
                                 cpus => CASE WHEN inflate AND r.team = 'liar' THEN least(16, r.cpus * r.factor) ELSE r.cpus END,
                                 mem_gb => CASE WHEN inflate AND r.team = 'liar' THEN least(64, r.mem * r.factor) ELSE r.mem END,
                                 name => r.k::text);
    END LOOP;
    PERFORM gangsched.run_round();
    IF EXISTS (SELECT FROM gangsched.check_invariants()) THEN
        RAISE EXCEPTION 'seed %: invariant violated: %', s, (SELECT string_agg(detail, '; ') FROM gangsched.check_invariants());
    END IF;
    SELECT array_agg(name::int ORDER BY name::int) INTO jobs
      FROM gangsched.jobs WHERE team = 'liar' AND state = 'placed';
    RETURN COALESCE(jobs, '{}');
END $$;

-- Real work of some of a seed's jobs: the largest fraction of the
-- cluster's GPUs, CPUs or memory that their honest demand amounts to.
CREATE FUNCTION pg_temp.sp_share(s int, ks int[]) RETURNS numeric
LANGUAGE sql AS $$
    SELECT GREATEST(COALESCE(sum(j.workers * j.gpus), 0) / c.gpus,
                    COALESCE(sum(j.workers * j.cpus), 0) / c.cpus,
                    COALESCE(sum(j.workers * j.mem), 0) / c.mem)
      FROM (SELECT sum(gpus)::numeric AS gpus, sum(cpus)::numeric AS cpus, sum(mem)::numeric AS mem
              FROM sp_nodes WHERE seed = s) c
      LEFT JOIN sp_jobs j ON j.seed = s AND j.k = ANY (ks)
     GROUP BY c.gpus, c.cpus, c.mem $$;

CREATE TEMP TABLE sp_results (seed int, honest numeric, inflated numeric, granularity numeric, liar_jobs int);

-- Both runs of a seed; true when lying gained liar no more than one job.
CREATE FUNCTION pg_temp.sp_check(s int) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
    honest   int[];
    inflated int[];
    g        numeric;
BEGIN
    PERFORM pg_temp.sp_generate(s);
    honest := pg_temp.sp_trial(s, false);
    inflated := pg_temp.sp_trial(s, true);
    SELECT max(pg_temp.sp_share(s, ARRAY[j.k])) INTO g FROM sp_jobs j WHERE j.seed = s;
    INSERT INTO sp_results
    SELECT s, pg_temp.sp_share(s, honest), pg_temp.sp_share(s, inflated), g,
           (SELECT count(*) FROM sp_jobs j WHERE j.seed = s AND j.team = 'liar');
    RETURN pg_temp.sp_share(s, inflated) <= pg_temp.sp_share(s, honest) + g;
END $$;

-- One statement per seed (each trial drops and recreates the extension).
SELECT 1 AS seed, pg_temp.sp_check(1) AS no_gain_beyond_one_job;
SELECT 2 AS seed, pg_temp.sp_check(2) AS no_gain_beyond_one_job;
SELECT 3 AS seed, pg_temp.sp_check(3) AS no_gain_beyond_one_job;
SELECT 4 AS seed, pg_temp.sp_check(4) AS no_gain_beyond_one_job;
SELECT 5 AS seed, pg_temp.sp_check(5) AS no_gain_beyond_one_job;
SELECT 6 AS seed, pg_temp.sp_check(6) AS no_gain_beyond_one_job;
SELECT 7 AS seed, pg_temp.sp_check(7) AS no_gain_beyond_one_job;
SELECT 8 AS seed, pg_temp.sp_check(8) AS no_gain_beyond_one_job;
SELECT 9 AS seed, pg_temp.sp_check(9) AS no_gain_beyond_one_job;
SELECT 10 AS seed, pg_temp.sp_check(10) AS no_gain_beyond_one_job;
SELECT 11 AS seed, pg_temp.sp_check(11) AS no_gain_beyond_one_job;
SELECT 12 AS seed, pg_temp.sp_check(12) AS no_gain_beyond_one_job;

-- Not vacuous: liar had jobs in every seed, and work placed when honest in
-- all but one (seed 5: the others' jobs fill the cluster first); over all
-- seeds together lying cost liar real work.
SELECT count(*) AS seeds, bool_and(liar_jobs > 0) AS liar_always_queued,
       count(*) FILTER (WHERE honest > 0) AS honest_work_placed,
       sum(inflated) < sum(honest) AS lying_costs_in_total
  FROM sp_results;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
