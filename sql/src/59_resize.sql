/* ------------------------------------------------------------------ */
/* Resizing a pending job (docs/sql-api.md, resize)                    */
/* ------------------------------------------------------------------ */

-- A pending job asks for another number of workers, other GPUs per
-- worker or (elastic gangs, docs/elastic.md) another minimum of replicas
-- (min_replicas; a rigid job given one becomes elastic): it keeps its id, queue position and submit time, the request is
-- checked as submit checks it (same SQLSTATEs; nothing changes when a check
-- fails), and a 'resized' event records both shapes. Only a pending job
-- can be resized: a round that read the old shape places or nominates the
-- job only if its shape is still the one it chose for (src/round.c), so a
-- resize racing a round never leaves a job holding the wrong number of
-- workers.
CREATE FUNCTION gangsched.resize(job bigint, workers int DEFAULT NULL, gpus numeric DEFAULT NULL,
                                 min_replicas int DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    j    gangsched.gangs;
    t    record;
    nw   int;
    ng   numeric;
    ow   int;
    og   numeric;
    nm   int;
    om   int;
    minw int;
BEGIN
    -- the role check comes before the row lock: a refused caller locks nothing
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job;
    IF j.id IS NULL THEN
        RAISE EXCEPTION 'job % does not exist', job
            USING ERRCODE = 'foreign_key_violation', HINT = 'See gangsched.jobs for the job ids.';
    END IF;
    PERFORM gangsched._require_team(j.team_id, format('resize job %s', job));
    SELECT * INTO j FROM gangsched.gangs g WHERE g.id = resize.job FOR UPDATE;
    IF j.state <> 'pending' THEN
        RAISE EXCEPTION 'job % is %, and only a pending job can be resized', job, j.state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN j.state = 'nominated' THEN 'Its victims are already releasing capacity for its present shape.'
                                WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'It has ended.'
                                ELSE 'It holds capacity for its present shape.' END,
                  HINT = CASE WHEN j.state IN ('finished', 'failed', 'cancelled', 'expired') THEN 'Submit a new job with the shape you need.'
                              ELSE 'Cancel it and submit it again with the shape you need.' END;
    END IF;
    ow := j.workers;
    og := j.gpus;
    om := j.min_replicas;
    nw := COALESCE(workers, ow);
    ng := COALESCE(gpus, og);
    nm := COALESCE(min_replicas, om);
    IF nw = ow AND ng = og AND nm IS NOT DISTINCT FROM om THEN
        RETURN;
    END IF;
    -- the request, checked as submit checks it (sql/src/50_jobs.sql)
    IF nw < 1 THEN
        RAISE EXCEPTION 'workers must be at least 1, not %', nw
            USING ERRCODE = 'invalid_parameter_value', HINT = 'A gang has one or more workers.';
    END IF;
    PERFORM gangsched._check_amount(ng, 'gpus', false, 64);
    PERFORM gangsched._check_worker_shape(nw, ng, j.cpus, j.mem_gb, j.net_gbps, j.group_size, j.stages);
    minw := gangsched._check_min_replicas(nw, j.group_size, j.stages, nm);
    SELECT tm.name, tm.max_workers_per_gang INTO t FROM gangsched.teams tm WHERE tm.id = j.team_id;
    PERFORM gangsched._check_gang_limit(t.name, t.max_workers_per_gang, nw);
    j.workers := nw;
    j.gpus := ng;
    j.gpu_model := CASE WHEN ng > 0 THEN j.gpu_model END;
    j.gpu_mem_gb := CASE WHEN ng > 0 THEN j.gpu_mem_gb END;
    -- admitted when its minimum could ever run, as submit admits it
    j.workers := minw;
    IF NOT gangsched._admit_fast(j) THEN
        PERFORM gangsched._admit(j);
    END IF;
    UPDATE gangsched.gangs g
       SET workers = nw, gpus = ng, gpu_model = j.gpu_model, gpu_mem_gb = j.gpu_mem_gb,
           min_replicas = nm, max_workers = CASE WHEN nm IS NOT NULL THEN nw END,
           reason = CASE WHEN g.waiting_for IS NULL THEN NULL ELSE g.reason END
     WHERE g.id = resize.job;
    PERFORM gangsched._event('resized', job, NULL, j.team_id,
                             format('%s workers × %s GPUs, was %s × %s', nw, ng, ow, og)
                             || CASE WHEN nm IS NOT NULL OR om IS NOT NULL
                                     THEN format('; min_replicas %s, was %s', COALESCE(nm::text, 'none'), COALESCE(om::text, 'none'))
                                     ELSE '' END,
                             jsonb_build_object('workers', nw, 'gpus', ng, 'was_workers', ow, 'was_gpus', og)
                             || CASE WHEN nm IS NOT NULL OR om IS NOT NULL
                                     THEN jsonb_build_object('min_replicas', nm, 'was_min_replicas', om)
                                     ELSE '{}'::jsonb END);
    PERFORM gangsched._wake();
END $$;
