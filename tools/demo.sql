-- tools/demo.sql — the gangsched demonstration.
--
-- Run by `bash tools/gs demo` (psql -X -q -v ON_ERROR_STOP=0) on the
-- throwaway cluster it starts. It can be run again on that cluster at any
-- time; it drops and recreates the extension in the current database:
--
--   PGHOST=/tmp/gangsched-demo PGPORT=54330 psql -X -q -U postgres \
--       -f tools/demo.sql contrib_regression
--
-- The story: an operator registers a small GPU cluster, teams get quotas,
-- a job portal submits gangs of different shapes, and submit refuses the
-- jobs that could never run, each with its own SQLSTATE; then a
-- scheduling round shows where the gangs landed.

\set ON_ERROR_STOP 0
\pset null '-'
\pset footer off
SET client_min_messages = warning;

\echo
\echo '================================================================'
\echo ' gangsched demonstration'
\echo '================================================================'

DROP EXTENSION IF EXISTS gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;

-- ---------------------------------------------------------------------
\echo
\echo '== 1. The operator describes the cluster'
\echo
\echo 'Topology levels, outermost first (the node is the innermost level),'
\echo 'two pools, eight 8-GPU A100 nodes in two zones, two MIG-capable A30'
\echo 'nodes (4 slices per device) and one CPU-only node:'
\echo
\echo '  SELECT gangsched.set_topology_levels(ARRAY[''zone'', ''spine'', ''rack'']);'
\echo '  SELECT gangsched.add_pool(''main'', ''reserved'');'
\echo '  SELECT gangsched.add_pool(''spot'', ''opportunistic'');'
\echo '  SELECT gangsched.add_node(''a100-01'', ''main'', ''zone1.spine1.rack1'','
\echo '                            cpus => 96, mem_gb => 1024, net_gbps => 200,'
\echo '                            gpus => 8, gpu_model => ''A100-80GB'', gpu_mem_gb => 80);'
\echo '  ...'

\o /dev/null
SELECT gangsched.set_topology_levels(ARRAY['zone', 'spine', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_pool('spot', 'opportunistic');

-- 2 zones x 2 racks x 2 nodes of 8 x A100-80GB in the reserved pool:
-- zone1.spine1.rack1/rack2 and zone2.spine2.rack3/rack4.
SELECT gangsched.add_node(name => format('a100-%s', lpad(i::text, 2, '0')),
                          pool => 'main',
                          topology => format('zone%s.spine%s.rack%s', (i + 3) / 4, (i + 3) / 4, (i + 1) / 2)::ltree,
                          cpus => 96, mem_gb => 1024, net_gbps => 200,
                          gpus => 8, gpu_model => 'A100-80GB', gpu_mem_gb => 80)
  FROM generate_series(1, 8) AS i;

-- The opportunistic pool: two nodes of 4 x A30 partitioned into 4 slices
-- each, and one CPU-only node, all in rack5.
SELECT gangsched.add_node('a30-01', 'spot', 'zone2.spine2.rack5', 32, 256, 50, 4, 'A30', 24, gpu_slices => 4);
SELECT gangsched.add_node('a30-02', 'spot', 'zone2.spine2.rack5', 32, 256, 50, 4, 'A30', 24, gpu_slices => 4);
SELECT gangsched.add_node('cpu-01', 'spot', 'zone2.spine2.rack5', 128, 512, 100, 0, NULL, NULL);

-- The ImageNet shards are cached on the four nodes of zone1.
SELECT gangsched.cache_dataset(name, 'imagenet')
  FROM gangsched.nodes WHERE topology <@ 'zone1' ORDER BY name;
\o

\echo 'The inventory, by pool and rack:'
SELECT p.name AS pool, p.kind, n.topology AS rack, count(*) AS nodes,
       string_agg(n.name, ', ' ORDER BY n.name) AS node_names,
       sum(n.gpus) AS gpus, max(n.gpu_model) AS model, max(n.gpu_slices) AS slices,
       sum(n.cpus) AS cpus, sum(n.mem_gb) AS mem_gb,
       string_agg(DISTINCT d.dataset, ', ') AS cached
  FROM gangsched.nodes n
  JOIN gangsched.pools p ON p.id = n.pool_id
  LEFT JOIN gangsched.datasets d ON d.node_id = n.id
 GROUP BY p.id, p.name, p.kind, n.topology
 ORDER BY p.id, n.topology;

-- ---------------------------------------------------------------------
\echo
\echo '== 2. Teams, weights and quotas'
\echo
\echo 'Quotas are per team and pool. Beyond its nominal quota a team may'
\echo 'borrow idle capacity up to its borrowing limit (NULL = any), and it'
\echo 'lends at most its lending limit of idle quota (NULL = all of it).'
\echo 'cpus and mem_gb left NULL are in proportion to the team''s GPU share'
\echo 'of the pool (''Infinity'' = not governed); net_gbps NULL is not governed.'
\echo

\o /dev/null
SELECT gangsched.add_team('vision', weight => 2);
SELECT gangsched.add_team('nlp');
SELECT gangsched.add_team('research');

SELECT gangsched.set_quota('vision', 'main', gpus => 32, lending_limit_gpus => 16);
SELECT gangsched.set_quota('nlp', 'main', gpus => 24, borrowing_limit_gpus => 16);
SELECT gangsched.set_quota('research', 'main', gpus => 8, borrowing_limit_gpus => 8);
SELECT gangsched.set_quota('research', 'spot', gpus => 8, cpus => 128, mem_gb => 512);
\o

SELECT team, weight, pool, nominal_gpus AS gpus, nominal_cpus AS cpus, nominal_mem_gb AS mem_gb,
       borrowing_limit_gpus, lending_limit_gpus
  FROM gangsched.team_shares
 ORDER BY team, pool;

-- ---------------------------------------------------------------------
\echo
\echo '== 3. The portal submits gangs of different shapes'
\echo
\echo 'Each submit checks at once that the job could ever run, and returns'
\echo 'its id. The workers of a gang all ask for the same resources.'
\echo

\o /dev/null
-- Plain data parallel: 16 workers of 1 GPU, prefers nodes caching ImageNet.
SELECT gangsched.submit('vision', workers => 16, gpus => 1, cpus => 8, mem_gb => 64,
                        name => 'resnet-dp', dataset => 'imagenet', locality => 'preferred');
-- Tensor parallel: 2 groups of 8, each group inside one node (one NVLink
-- domain); the whole gang inside one zone; may not be preempted.
SELECT gangsched.submit('nlp', workers => 16, gpus => 1, cpus => 10, mem_gb => 100, net_gbps => 20,
                        name => 'llm-tp8', group_size => 8, span => 'zone',
                        preemptible => false, pool => 'main', priority => 10);
-- 3-D: tensor groups of 8, 2 pipeline stages, each replica inside one rack,
-- 2 data-parallel replicas (32 workers).
SELECT gangsched.submit('nlp', workers => 32, gpus => 1, cpus => 8, mem_gb => 96, net_gbps => 20,
                        name => 'llm-pipe', group_size => 8, stages => 2, stage_span => 'rack',
                        checkpoint_interval => '30 minutes', grace => '2 minutes');
-- Fractional: 8 workers of a quarter of an A30, in the opportunistic pool.
SELECT gangsched.submit('research', workers => 8, gpus => 0.25, cpus => 4, mem_gb => 32,
                        name => 'sweep-quarter', pool => 'spot', gpu_model => 'A30');
-- CPU-only workers.
SELECT gangsched.submit('research', workers => 4, gpus => 0, cpus => 16, mem_gb => 64,
                        name => 'etl-cpu', queue_timeout => '1 hour');
-- Required locality: only nodes that cache ImageNet will do.
SELECT gangsched.submit('vision', workers => 4, gpus => 8, cpus => 64, mem_gb => 512,
                        name => 'vit-finetune', dataset => 'imagenet', locality => 'required');
-- A job that is then cancelled.
SELECT gangsched.submit('research', workers => 2, gpus => 1, name => 'typo');
SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE name = 'typo';
\o

-- The shape column reads data-parallel replicas x pipeline stages x tensor
-- group size; spans are the hard topology limits.
SELECT job, team, name, state, workers, gpus, cpus, mem_gb,
       format('%s x %s x %s', workers / (group_size * stages), stages, group_size) AS "dp x pp x tp",
       NULLIF(concat_ws(', ', CASE WHEN group_size > 1 THEN 'group in ' || group_span END,
                        'replica in ' || stage_span, 'gang in ' || span), '') AS spans,
       pool, preemptible AS preempt, priority AS prio,
       CASE WHEN dataset IS NOT NULL THEN dataset || ' (' || locality || ')' END AS dataset,
       reason
  FROM gangsched.jobs
 ORDER BY job;

-- ---------------------------------------------------------------------
\echo
\echo '== 4. Jobs that could never run are refused at submit'
\echo
\echo 'Each refusal has its own SQLSTATE, a message that names the limit, and'
\echo 'a detail and hint saying what would fit. A refused call changes nothing.'
\echo '(pg_temp.refusal() runs a statement, catches its error and shows it.)'

CREATE FUNCTION pg_temp.refusal(what text, stmt text)
RETURNS TABLE (asked text, code text, message text, detail text, hint text)
LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    asked := what;
    BEGIN
        EXECUTE stmt INTO result;
        -- Not refused: undo it, so the story stays the same, and say so.
        RAISE EXCEPTION USING ERRCODE = 'GSDEM', MESSAGE = result;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                                detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
        IF code = 'GSDEM' THEN
            code := '-';
            message := format('ACCEPTED (result %s), then rolled back: this should have been refused', message);
            detail := NULL; hint := NULL;
        END IF;
    END;
    RETURN NEXT;
END $$;

SELECT count(*) AS jobs_before_refusals FROM gangsched.jobs \gset

\echo
\echo '-- Infeasible shapes: class 53 (insufficient resources), one subclass per rule'
\x on
SELECT r.asked, r.code AS sqlstate, r.message, NULLIF(r.detail, '') AS detail, NULLIF(r.hint, '') AS hint FROM (VALUES
  (1, '1 worker of 16 GPUs (nodes have 8)',
      $$SELECT gangsched.submit('vision', workers => 1, gpus => 16)$$),
  (2, 'a worker with 200 CPUs (nodes have at most 128)',
      $$SELECT gangsched.submit('vision', workers => 2, gpus => 1, cpus => 200)$$),
  (3, 'half an A100 (A100s here are not partitioned)',
      $$SELECT gangsched.submit('research', workers => 4, gpus => 0.5, gpu_model => 'A100-80GB')$$),
  (4, 'a tensor group of 16 inside one node',
      $$SELECT gangsched.submit('nlp', workers => 32, gpus => 1, group_size => 16)$$),
  (5, '4 pipeline stages of 8 inside one rack',
      $$SELECT gangsched.submit('nlp', workers => 64, gpus => 1, group_size => 8, stages => 4, stage_span => 'rack')$$),
  (6, '80 single-GPU workers (the largest pool has 64 GPUs)',
      $$SELECT gangsched.submit('vision', workers => 80, gpus => 1)$$),
  (7, 'research: 32 GPUs in main (nominal 8 + borrowing 8)',
      $$SELECT gangsched.submit('research', workers => 4, gpus => 8, pool => 'main')$$),
  (8, 'nlp: 32 non-preemptible GPUs (nominal quota 24)',
      $$SELECT gangsched.submit('nlp', workers => 4, gpus => 8, preemptible => false)$$),
  (9, '6 full nodes that must cache imagenet (4 do)',
      $$SELECT gangsched.submit('vision', workers => 6, gpus => 8, dataset => 'imagenet', locality => 'required')$$)
  ) AS c(n, what, stmt),
  LATERAL pg_temp.refusal(c.what, c.stmt) AS r
 ORDER BY c.n;
\x off

\echo
\echo '-- Malformed requests, unknown names, wrong states'
\x on
SELECT r.asked, r.code AS sqlstate, r.message, NULLIF(r.detail, '') AS detail, NULLIF(r.hint, '') AS hint FROM (VALUES
  (1, '12 workers in tensor groups of 8',
      $$SELECT gangsched.submit('nlp', workers => 12, gpus => 1, group_size => 8)$$),
  (2, 'a negative amount',
      $$SELECT gangsched.submit('nlp', workers => 1, gpus => 1, mem_gb => -4)$$),
  (3, 'NaN GPUs',
      $$SELECT gangsched.submit('nlp', workers => 1, gpus => 'NaN')$$),
  (4, 'no GPU count at all',
      $$SELECT gangsched.submit('nlp', workers => 1, gpus => NULL)$$),
  (5, 'an unknown team',
      $$SELECT gangsched.submit('robotics', workers => 1, gpus => 1)$$),
  (6, 'an unknown GPU model',
      $$SELECT gangsched.submit('vision', workers => 1, gpus => 1, gpu_model => 'H100')$$),
  (7, 'an unknown topology level',
      $$SELECT gangsched.submit('vision', workers => 8, gpus => 1, span => 'row')$$),
  (8, 'non-preemptible work in the opportunistic pool',
      $$SELECT gangsched.submit('research', workers => 1, gpus => 0.25, pool => 'spot', preemptible => false)$$),
  (9, 'a pool name that is taken',
      $$SELECT gangsched.add_pool('main', 'reserved')$$),
  (10, 'cancelling a job that is already cancelled',
      $$SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE name = 'typo'$$),
  (11, 'new topology levels once nodes exist',
      $$SELECT gangsched.set_topology_levels(ARRAY['region', 'rack'])$$)
  ) AS c(n, what, stmt),
  LATERAL pg_temp.refusal(c.what, c.stmt) AS r
 ORDER BY c.n;
\x off

\echo
\echo 'Nothing was added by the refused calls:'
SELECT :jobs_before_refusals AS jobs_before, count(*) AS jobs_after FROM gangsched.jobs;

-- ---------------------------------------------------------------------
\echo
\echo '== 5. Invariants'
\echo
\echo 'check_invariants() returns one row per violated invariant; none here:'
\pset footer on
SELECT * FROM gangsched.check_invariants();
\pset footer off

-- ---------------------------------------------------------------------
-- SCHEDULING ROUNDS.
-- ---------------------------------------------------------------------
\echo
\echo '== 6. A scheduling round'
\echo
\echo 'SELECT * FROM gangsched.run_round();'
\x on
SELECT * FROM gangsched.run_round();
\x off

\echo 'Where the gangs landed (the placements view has one row per worker and'
\echo 'device; here one line per job and node):'
SELECT p.job, j.name, p.node, p.topology,
       count(DISTINCT p.worker) AS workers,
       string_agg(DISTINCT p.device::text, ',') AS devices,
       sum(p.slices) FILTER (WHERE p.device IS NOT NULL) AS slices_held,
       count(DISTINCT p.worker) * max(p.cpus) AS cpus,
       count(DISTINCT p.worker) * max(p.mem_gb) AS mem_gb,
       bool_or(p.borrowed) AS borrowed
  FROM gangsched.placements p
  JOIN gangsched.jobs j ON j.job = p.job
 GROUP BY p.job, j.name, p.node, p.topology
 ORDER BY p.job, p.node;

\echo 'The jobs after the round:'
SELECT job, team, name, state, workers, gpus, borrowed, reason
  FROM gangsched.jobs
 ORDER BY job;

\echo 'Why the jobs still pending wait (gangsched.why_pending):'
SELECT j.job, j.name, w.*
  FROM gangsched.jobs j, LATERAL gangsched.why_pending(j.job) AS w
 WHERE j.state = 'pending'
 ORDER BY j.job;

\echo
\echo '== 7. Node agents report back'
\echo
\echo 'The agents of llm-tp8 confirm its start on both of its nodes, so it is'
\echo 'running; then resnet-dp and llm-tp8 finish. Their allocations are'
\echo 'closed (history is kept) and the next round finds room in zone1 for'
\echo 'vit-finetune, which must run on nodes that cache imagenet.'
\echo
\o /dev/null
SELECT gangsched.job_started(p.job, p.node)
  FROM (SELECT DISTINCT job, node FROM gangsched.placements) p
  JOIN gangsched.jobs j ON j.job = p.job
 WHERE j.name = 'llm-tp8';
SELECT gangsched.job_checkpointed(job) FROM gangsched.jobs WHERE name = 'llm-tp8';
SELECT gangsched.job_finished(job, success => true, message => 'converged')
  FROM gangsched.jobs WHERE name IN ('resnet-dp', 'llm-tp8') ORDER BY job;
\o
\x on
SELECT * FROM gangsched.run_round();
\x off

SELECT job, team, name, state, workers, gpus, message, reason
  FROM gangsched.jobs
 ORDER BY job;

\echo 'vit-finetune landed on the four nodes that cache imagenet:'
SELECT p.node, p.topology, count(DISTINCT p.worker) AS workers,
       count(DISTINCT p.device) AS devices
  FROM gangsched.placements p
  JOIN gangsched.jobs j ON j.job = p.job
 WHERE j.name = 'vit-finetune'
 GROUP BY p.node, p.topology
 ORDER BY p.node;

\echo 'The allocation history of the finished jobs (one row per worker; closed'
\echo 'time ranges), summarised per job and node:'
SELECT a.job, j.name, n.name AS node, count(*) AS workers,
       bool_and(NOT upper_inf(a.during)) AS all_closed,
       min(a.end_reason) AS end_reason
  FROM gangsched.allocations a
  JOIN gangsched.jobs j ON j.job = a.job
  JOIN gangsched.nodes n ON n.id = a.node_id
 WHERE j.state IN ('finished', 'failed')
 GROUP BY a.job, j.name, n.name
 ORDER BY a.job, n.name;

\echo 'check_invariants() after the round (no rows):'
\pset footer on
SELECT * FROM gangsched.check_invariants();
\pset footer off

\echo
\echo '== The end. The cluster is still running; look around with psql:'
\echo '   SELECT * FROM gangsched.jobs;  SELECT * FROM gangsched.events ORDER BY id;'
\echo
