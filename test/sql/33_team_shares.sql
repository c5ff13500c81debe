-- The team_shares view on a small cluster, every number derived by hand in
-- the comments: nominal quota and limits, what each team holds per pool,
-- what of it is borrowed, what of its idle quota others use (lent), the
-- weighted dominant share over the cluster's up nodes, and the weight.
-- The queue view's dominant share agrees with it. Preemption is off.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
-- agents confirm nothing here; placed jobs must not be requeued meanwhile
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;

-- A round's summary without its duration.
CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, note text)
LANGUAGE sql AS $$ SELECT r.considered, r.placed, r.preempted, r.note FROM gangsched.run_round() r $$;

-- Pool p (reserved): p1, p2 up, each 4 GPUs, 32 CPUs, 128 GB, 100 Gbit/s;
-- p3 the same but down. Pool spot (opportunistic): s1 with 8 GPUs, 64
-- CPUs, 256 GB, 100 Gbit/s. Capacity of the up nodes: 16 GPUs, 128 CPUs,
-- 512 GB, 300 Gbit/s; pool p: 8 GPUs.
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT gangsched.add_pool('spot', 'opportunistic');
SELECT count(gangsched.add_node('p' || i, 'p', 'r1', 32, 128, 100, 4, 'a100', 80)) FROM generate_series(1, 3) i;
SELECT gangsched.set_node_state('p3', 'down');
SELECT gangsched.add_node('s1', 'spot', 'r2', 64, 256, 100, 8, 'a100', 80);
-- vision (weight 2): 4 GPUs in p, lends at most 1 of its idle quota.
-- nlp (weight 1): 2 GPUs and 16 CPUs in p, may borrow 1 GPU more.
-- speech (weight 1): no quota anywhere.
SELECT gangsched.add_team('vision', 2);
SELECT gangsched.add_team('nlp');
SELECT gangsched.add_team('speech');
SELECT gangsched.set_quota('vision', 'p', 4, lending_limit_gpus => 1);
SELECT gangsched.set_quota('nlp', 'p', 2, cpus => 16, borrowing_limit_gpus => 1);

-- Before anything runs: quota rows only, nothing held, nothing lent.
-- cpus / mem_gb left NULL are proportional to the GPU share of pool p's
-- registered nodes (p3 counts though down: 12 GPUs, 96 CPUs, 384 GB):
-- vision 4 x 96 / 12 = 32 CPUs and 4 x 384 / 12 = 128 GB; nlp its 16
-- CPUs as given and 2 x 384 / 12 = 64 GB.
SELECT * FROM gangsched.team_shares;

-- Round 1: v1 (vision, 2 workers x <1 GPU, 4 CPUs, 16 GB>): guaranteed.
-- n1 (nlp, 1 x <2 GPUs, 8 CPUs, 32 GB>): guaranteed (2 <= 2 GPUs, 8 <= 16
-- CPUs). n2 (nlp, 1 x <1 GPU, 8 CPUs, 32 GB>): borrowed (3 > 2 GPUs; within
-- nominal + limit 3; CPUs 16 <= 16).
SELECT gangsched.submit('vision', 2, 1, cpus => 4, mem_gb => 16, pool => 'p', name => 'v1');
SELECT gangsched.submit('nlp', 1, 2, cpus => 8, mem_gb => 32, pool => 'p', name => 'n1');
SELECT gangsched.submit('nlp', 1, 1, cpus => 8, mem_gb => 32, pool => 'p', name => 'n2');
SELECT * FROM pg_temp.round();
-- Round 2: speech, with no quota, borrows. s1..s3 (1 x <1 GPU, 2 CPUs,
-- 8 GB> in p): p has 8 - 5 = 3 GPUs free, but vision's idle quota is 4 - 2
-- = 2 of which it lends only 1, so 1 GPU is held back: s1 and s2 run, s3
-- waits. s4 (4 x <1 GPU, 8 CPUs, 32 GB, 10 Gbit/s> in spot) runs.
SELECT gangsched.submit('speech', 1, 1, cpus => 2, mem_gb => 8, pool => 'p', name => 's' || i) FROM generate_series(1, 3) i;
SELECT gangsched.submit('speech', 4, 1, cpus => 8, mem_gb => 32, net_gbps => 10, pool => 'spot', name => 's4');
SELECT * FROM pg_temp.round();
SELECT name, team, state, borrowed FROM gangsched.jobs ORDER BY job;
SELECT * FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 's3'));

-- By hand:
--   vision/p: used 2 GPUs, 8 CPUs, 32 GB, 0 net; borrowed 0.
--     dominant share max(2/16, 8/128, 32/512, 0) / 2 = 0.125 / 2 = 0.0625.
--   nlp/p: used 3 GPUs, 16 CPUs, 64 GB; borrowed 1 (n2).
--     dominant share max(3/16, 16/128, 64/512) = 0.1875.
--   speech/p: used 2 GPUs, 4 CPUs, 16 GB; borrowed 2. speech/spot: 4 GPUs,
--     32 CPUs, 128 GB, 40 Gbit/s; borrowed 4. Over both pools 6 GPUs,
--     36 CPUs, 144 GB, 40 Gbit/s: max(6/16, 36/128, 144/512, 40/300) =
--     0.375 (the share is the team's over the cluster, the same on each of
--     its rows).
--   lent in p: borrowed 1 + 2 = 3 GPUs; p's up capacity 8 minus nominal
--     quotas 4 + 2 = 2 GPUs are nobody's, so 1 GPU comes out of idle
--     quotas. Lendable: vision min(idle 2, limit 1) = 1, nlp idle 0:
--     vision lends 1, nlp 0. speech has no quota: lends nothing.
--   spot: no quota at all; speech's 4 borrowed GPUs lend nobody's quota.
SELECT * FROM gangsched.team_shares;
-- The queue shows the same share for speech's waiting job.
SELECT name, team, dominant_share, would_borrow, fits_now FROM gangsched.queue;
SELECT * FROM gangsched.check_invariants();

-- p3 comes back up: p has 12 GPUs, the cluster 20 GPUs, 160 CPUs, 640 GB,
-- 400 Gbit/s. p's unassigned capacity is 12 - 6 = 6 GPUs, more than the 3
-- borrowed: nobody's idle quota is lent any more. Shares shrink: vision
-- max(2/20, 8/160, 32/640) / 2 = 0.05; nlp max(3/20, 16/160, 64/640) =
-- 0.15; speech max(6/20, 36/160, 144/640, 40/400) = 0.3.
SELECT gangsched.set_node_state('p3', 'up');
SELECT team, pool, used_gpus, borrowed_gpus, lent_gpus, dominant_share FROM gangsched.team_shares;
-- and s3 now fits: speech then holds 7 of 20 GPUs (0.35), p's borrowed
-- 4 GPUs are still within its 6 unassigned.
SELECT name, dominant_share, would_borrow, fits_now FROM gangsched.queue;
SELECT * FROM pg_temp.round();
SELECT team, pool, used_gpus, borrowed_gpus, lent_gpus, dominant_share FROM gangsched.team_shares;
SELECT * FROM gangsched.check_invariants();

-- A job that ends no longer counts: v1 finishes; vision holds nothing in
-- p (share 0) and its whole idle quota of 4 is lendable up to its limit 1;
-- p's borrowed 4 (n2, s1..s3) against 12 - 6 = 6 unassigned: nothing lent.
SELECT gangsched.job_finished((SELECT job FROM gangsched.jobs WHERE name = 'v1'), true);
SELECT team, pool, used_gpus, used_cpus, borrowed_gpus, lent_gpus, dominant_share FROM gangsched.team_shares;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
