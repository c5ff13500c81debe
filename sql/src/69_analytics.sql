/* ------------------------------------------------------------------ */
/* Analysts: usage, snapshots, waits, preemption losses, utilization    */
/* ------------------------------------------------------------------ */

-- Read-only functions over the history (gangsched.allocations, one row per
-- worker with the time range it held its capacity, and the gangsched.events
-- log). docs/analytics.md defines every column and shows example queries
-- and plans.
--
-- Time windows are half-open, [from, to), cut off at gangsched.now(): what
-- is still held counts until now, nothing counts in the future. Buckets
-- start at `from` and are bucket long (the last one ends at the window's
-- end); a bucket is a fixed length, so it may not contain months. JIT is
-- off in these functions: the plans over a long history look costly enough
-- to compile (100-300 ms a call) and run in well under a second without.

-- Finding the allocations that overlap a window on a long history without
-- slowing down the writes (docs/analytics.md has the measurements):
-- - open allocations (still held) are few and indexed by
--   allocations_current_idx;
-- - a closed allocation that overlaps [from, to) and lasted at most a day
--   began in [from - 1 day, to): a btree over the start of closed rows;
-- - the few that lasted longer than a day: a GiST over their time ranges.
-- Both are partial, so a round's inserts (open rows) never touch them;
-- they are written when an allocation ends, which rewrites the row anyway
-- (a new row version, with or without these indexes).
CREATE INDEX allocations_closed_start_idx ON gangsched.allocations (lower(during))
    WHERE NOT upper_inf(during);
CREATE INDEX allocations_long_during_idx ON gangsched.allocations USING gist (during)
    WHERE NOT upper_inf(during) AND upper(during) - lower(during) > interval '1 day';

-- Quota and node-state history (few rows) without scanning the events log.
CREATE INDEX events_inventory_idx ON gangsched.events (kind, at)
    WHERE kind IN ('quota', 'node_state');

-- Checks an analyst's window and bucket; returns the bucket in seconds.
CREATE FUNCTION gangsched._bucket_seconds("from" timestamptz, "to" timestamptz, bucket interval) RETURNS float8
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    s float8;
BEGIN
    IF "from" IS NULL OR "to" IS NULL OR bucket IS NULL THEN
        RAISE EXCEPTION 'from, to and bucket must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Give a window such as now() - interval ''1 day'', now() and a bucket such as ''1 hour''.';
    END IF;
    IF NOT isfinite("from") OR NOT isfinite("to") THEN
        RAISE EXCEPTION 'the window must have finite ends, not [%, %)', "from", "to"
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give real timestamps; the window is cut off at gangsched.now() anyway.';
    END IF;
    IF "to" <= "from" THEN
        RAISE EXCEPTION 'the window is empty: to (%) is not after from (%)', "to", "from"
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give the earlier timestamp first.';
    END IF;
    IF extract(month FROM bucket) <> 0 OR extract(year FROM bucket) <> 0 THEN
        RAISE EXCEPTION 'bucket % is not a fixed length', bucket
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Months and years have no fixed number of seconds.',
                  HINT = 'Use days, hours or minutes, for example ''30 days''.';
    END IF;
    s := extract(epoch FROM bucket);
    IF s <= 0 THEN
        RAISE EXCEPTION 'bucket must be positive, not %', bucket
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use an interval such as ''1 hour''.';
    END IF;
    IF extract(epoch FROM "to" - "from") / s > 1000000 THEN
        RAISE EXCEPTION 'too many buckets: % of % in [%, %)', ceil(extract(epoch FROM "to" - "from") / s), bucket, "from", "to"
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = 'At most 1,000,000 buckets are returned.',
                  HINT = 'Use a longer bucket or a shorter window.';
    END IF;
    RETURN s;
END $$;

-- The buckets of [from, least(to, now())): number k (from 0), start, end.
CREATE FUNCTION gangsched._buckets("from" timestamptz, "to" timestamptz, bs float8)
RETURNS TABLE (k int, bucket_start timestamptz, bucket_end timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT k, $1 + make_interval(secs => k * $3),
           LEAST($1 + make_interval(secs => (k + 1) * $3), LEAST($2, gangsched.now()))
      FROM generate_series(0, ceil(extract(epoch FROM LEAST($2, gangsched.now()) - $1) / $3)::int - 1) k
$$;

-- Buckets of bs seconds from spans grouped by (key, first bucket ks, last
-- bucket ke): first_part and last_part are the weighted seconds the group's
-- spans have in buckets ks and ke (ke > ks), w their summed weight, held
-- over every whole bucket in between. Returns sum(weight x seconds) per key
-- and bucket. The whole buckets go in as a difference (+w at ks + 1, -w at
-- ke) summed over the buckets at the end, so a week-long span costs no more
-- than an hour-long one. Callers group their spans with
--   floor(s / bs) AS ks, ceil(e / bs) - 1 AS ke,
--   sum(w * (LEAST(e, (ks + 1) * bs) - s)), sum(w * (e - ke * bs)), sum(w)
-- (s, e in seconds from the window's start).
CREATE FUNCTION gangsched._bucketize(key int[], ks int[], ke int[], first_part float8[], last_part float8[],
                                     w float8[], bs float8)
RETURNS TABLE (key int, k int, weighted float8)
LANGUAGE sql IMMUTABLE AS $$
WITH g AS (
    SELECT * FROM unnest($1, $2, $3, $4, $5, $6) u(key, ks, ke, first_part, last_part, w)),
per AS (
    SELECT g.key, x.k, sum(x.piece) AS piece, sum(x.diff) AS diff
      FROM g,
           LATERAL (VALUES (1, g.ks, g.first_part, 0::float8),
                           (2, g.ke, g.last_part, 0),
                           (3, g.ks + 1, 0, g.w * $7),
                           (4, g.ke, 0, -g.w * $7)) x(part, k, piece, diff)
     WHERE x.part = 1 OR (x.part = 2 AND g.ke > g.ks) OR (x.part > 2 AND g.ke > g.ks + 1)
     GROUP BY 1, 2),
grid AS (
    -- every bucket of every key, so that the differences carry over empty buckets
    SELECT kk.key, gs.k
      FROM (SELECT DISTINCT per.key FROM per) kk, generate_series(0, (SELECT max(per.k) FROM per)) gs(k))
SELECT grid.key, grid.k,
       COALESCE(per.piece, 0) + sum(COALESCE(per.diff, 0)) OVER (PARTITION BY grid.key ORDER BY grid.k)
  FROM grid LEFT JOIN per ON per.key = grid.key AND per.k = grid.k
$$;

-- Allocated GPU-seconds per bucket, team and borrowed flag over [from,
-- least(to, now())). The allocations overlapping the window come through
-- the three indexes above: closed ones that began at most a day before the
-- window, closed ones longer than a day that began earlier, and open ones.
CREATE FUNCTION gangsched._allocated("from" timestamptz, "to" timestamptz, bs float8)
RETURNS TABLE (k int, team_id int, borrowed bool, gpu_seconds float8)
LANGUAGE sql STABLE AS $$
WITH w AS MATERIALIZED (SELECT $1 AS t0, LEAST($2, gangsched.now()) AS t1),
-- (the bounds are written out, not taken from w, so that they are index conditions)
held AS (
    SELECT a.team_id, a.borrowed, a.gpus, lower(a.during) AS lo, upper(a.during) AS hi
      FROM gangsched.allocations a
     WHERE NOT upper_inf(a.during)
       AND lower(a.during) >= $1 - interval '1 day' AND lower(a.during) < LEAST($2, gangsched.now())
       AND upper(a.during) > $1
    UNION ALL
    SELECT a.team_id, a.borrowed, a.gpus, lower(a.during), upper(a.during)
      FROM gangsched.allocations a
     WHERE NOT upper_inf(a.during) AND upper(a.during) - lower(a.during) > interval '1 day'
       AND a.during && tstzrange($1, LEAST($2, gangsched.now())) AND lower(a.during) < $1 - interval '1 day'
    UNION ALL
    SELECT a.team_id, a.borrowed, a.gpus, lower(a.during), 'infinity'
      FROM gangsched.allocations a
     WHERE upper_inf(a.during) AND lower(a.during) < LEAST($2, gangsched.now())),
spans AS (
    SELECT h.team_id * 2 + h.borrowed::int AS key, h.gpus::float8 AS w,
           date_part('epoch', GREATEST(h.lo, w.t0) - w.t0) AS s,
           date_part('epoch', LEAST(h.hi, w.t1) - w.t0) AS e
      FROM held h, w),
groups AS (
    SELECT sp.key, floor(sp.s / $3)::int AS ks, ceil(sp.e / $3)::int - 1 AS ke,
           sum(sp.w * (LEAST(sp.e, (floor(sp.s / $3) + 1) * $3) - sp.s)) AS first_part,
           sum(sp.w * (sp.e - (ceil(sp.e / $3) - 1) * $3)) AS last_part, sum(sp.w) AS w
      FROM spans sp WHERE sp.e > sp.s AND sp.w > 0 GROUP BY 1, 2, 3),
arr AS (
    SELECT array_agg(key) AS key, array_agg(ks) AS ks, array_agg(ke) AS ke, array_agg(first_part) AS fp,
           array_agg(last_part) AS lp, array_agg(w) AS w
      FROM groups)
SELECT b.k, b.key / 2, b.key % 2 = 1, b.weighted
  FROM arr, gangsched._bucketize(arr.key, arr.ks, arr.ke, arr.fp, arr.lp, arr.w, $3) b
$$;

-- Capacity GPU-seconds per bucket: the GPUs of every node from its
-- registration on, except while it is down (node_state events; a draining
-- node still counts, its jobs still hold it).
CREATE FUNCTION gangsched._capacity("from" timestamptz, "to" timestamptz, bs float8)
RETURNS TABLE (k int, gpu_seconds float8)
LANGUAGE sql STABLE AS $$
WITH w AS MATERIALIZED (SELECT $1 AS t0, LEAST($2, gangsched.now()) AS t1),
changes AS (
    SELECT n.id, n.gpus, n.added_at AS at, 0::bigint AS ord, true AS up
      FROM gangsched.nodes n WHERE n.gpus > 0
    UNION ALL
    SELECT n.id, n.gpus, e.at, e.id, substring(e.reason FROM '-> *([a-z]+)') IS DISTINCT FROM 'down'
      FROM gangsched.events e JOIN gangsched.nodes n ON n.id = e.node_id
     WHERE e.kind = 'node_state' AND n.gpus > 0),
segments AS (
    SELECT c.gpus, c.up, c.at AS s0,
           COALESCE(lead(c.at) OVER (PARTITION BY c.id ORDER BY c.at, c.ord), 'infinity') AS e0
      FROM changes c),
spans AS (
    SELECT sg.gpus::float8 AS w,
           date_part('epoch', GREATEST(sg.s0, w.t0) - w.t0) AS s,
           date_part('epoch', LEAST(sg.e0, w.t1) - w.t0) AS e
      FROM segments sg, w
     WHERE sg.up AND sg.s0 < w.t1 AND sg.e0 > w.t0),
groups AS (
    SELECT floor(sp.s / $3)::int AS ks, ceil(sp.e / $3)::int - 1 AS ke,
           sum(sp.w * (LEAST(sp.e, (floor(sp.s / $3) + 1) * $3) - sp.s)) AS first_part,
           sum(sp.w * (sp.e - (ceil(sp.e / $3) - 1) * $3)) AS last_part, sum(sp.w) AS w
      FROM spans sp WHERE sp.e > sp.s GROUP BY 1, 2),
arr AS (
    SELECT array_agg(0) AS key, array_agg(ks) AS ks, array_agg(ke) AS ke, array_agg(first_part) AS fp,
           array_agg(last_part) AS lp, array_agg(w) AS w
      FROM groups)
SELECT b.k, b.weighted
  FROM arr, gangsched._bucketize(arr.key, arr.ks, arr.ke, arr.fp, arr.lp, arr.w, $3) b
$$;

-- The `by` argument of usage(), queue_waits() and preemption_summary():
-- 'team' (each team's own figures) or 'subtree' (each team's figures
-- summed over its subtree in the tree as it is now). 22023 otherwise.
CREATE FUNCTION gangsched._check_by(by text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF by IS NULL OR by NOT IN ('team', 'subtree') THEN
        RAISE EXCEPTION 'invalid by "%"', COALESCE(by, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use by => ''team'' for each team''s own figures or by => ''subtree'' to roll them up by subtree.';
    END IF;
END $$;

-- Which teams' figures each team's row sums: itself (by 'team'), or every
-- team of its subtree (by 'subtree'): (team_id, member).
CREATE FUNCTION gangsched._rollup(by text) RETURNS TABLE (team_id int, member int)
LANGUAGE sql STABLE AS $$
    SELECT a.id, tr.team_id
      FROM gangsched._team_tree tr
     CROSS JOIN LATERAL unnest(CASE WHEN $1 = 'subtree' THEN tr.ancestors ELSE ARRAY[tr.team_id] END) a(id)
$$;

-- Per bucket and team: GPU-hours held, their share of the cluster's
-- capacity in that bucket, the team's nominal GPU quota (all pools) in
-- force at the bucket's end, and the GPU-hours held as borrowed capacity.
-- Every team has a row in every bucket, with its path and depth in the
-- tree. by => 'subtree': a team's figures are those of its whole subtree
-- (the tree as it is now); its quota, per pool, the sum of the topmost
-- quotas in force inside the subtree (a quota below another is carved out
-- of it and not counted again).
CREATE FUNCTION gangsched.usage("from" timestamptz, "to" timestamptz, bucket interval DEFAULT '1 hour',
                                by text DEFAULT 'team')
RETURNS TABLE (bucket_start timestamptz, bucket_end timestamptz, team text, gpu_hours float8,
               share_of_capacity float8, quota_gpus numeric, borrowed_gpu_hours float8,
               capacity_gpu_hours float8, path text, depth int)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._check_by($4);
WITH p AS (SELECT gangsched._bucket_seconds($1, $2, $3) AS bs),
b AS (SELECT x.* FROM p, gangsched._buckets($1, $2, p.bs) x),
tr AS MATERIALIZED (SELECT * FROM gangsched._team_tree),
roll AS MATERIALIZED (SELECT * FROM gangsched._rollup($4)),
al AS (
    SELECT x.k, x.team_id, sum(x.gpu_seconds) AS gs, sum(x.gpu_seconds) FILTER (WHERE x.borrowed) AS bgs
      FROM p, gangsched._allocated($1, $2, p.bs) x GROUP BY 1, 2),
alr AS (
    SELECT al.k, roll.team_id, sum(al.gs) AS gs, sum(al.bgs) AS bgs
      FROM al JOIN roll ON roll.member = al.team_id GROUP BY 1, 2),
cap AS (SELECT x.* FROM p, gangsched._capacity($1, $2, p.bs) x),
quota AS (
    -- each set_quota() is in force from its event until the next one for the same team and pool
    SELECT e.team_id, e.detail->>'pool' AS pool, (e.detail->>'gpus')::numeric AS gpus, e.at AS since,
           COALESCE(lead(e.at) OVER (PARTITION BY e.team_id, e.detail->>'pool' ORDER BY e.at, e.id), 'infinity') AS until
      FROM gangsched.events e
     WHERE e.kind = 'quota'),
qp AS MATERIALIZED (
    SELECT b.k, q.team_id, q.pool, q.gpus
      FROM b JOIN quota q ON q.since < b.bucket_end AND b.bucket_end <= q.until
     WHERE q.gpus IS NOT NULL),
qb AS (
    SELECT qp.k, roll.team_id, sum(qp.gpus) AS gpus
      FROM qp JOIN roll ON roll.member = qp.team_id
      JOIN tr m ON m.team_id = qp.team_id
      JOIN tr t ON t.team_id = roll.team_id
     WHERE m.depth = t.depth
        OR NOT EXISTS (SELECT FROM qp x WHERE x.k = qp.k AND x.pool = qp.pool
                                          AND x.team_id = ANY (m.ancestors[t.depth : m.depth - 1]))
     GROUP BY 1, 2)
SELECT b.bucket_start, b.bucket_end, t.name,
       COALESCE(al.gs, 0) / 3600,
       CASE WHEN cap.gpu_seconds > 0 THEN COALESCE(al.gs, 0) / cap.gpu_seconds END,
       COALESCE(qb.gpus, 0),
       COALESCE(al.bgs, 0) / 3600,
       COALESCE(cap.gpu_seconds, 0) / 3600,
       tr.path, tr.depth
  FROM b CROSS JOIN gangsched.teams t
  JOIN tr ON tr.team_id = t.id
  LEFT JOIN alr al ON al.k = b.k AND al.team_id = t.id
  LEFT JOIN cap ON cap.k = b.k
  LEFT JOIN qb ON qb.k = b.k AND qb.team_id = t.id
 WHERE b.bucket_end > b.bucket_start
 ORDER BY b.bucket_start, t.name
$$;

-- Per bucket: the cluster's mean capacity and allocated GPUs, their ratio,
-- and the mean GPUs held as borrowed capacity.
CREATE FUNCTION gangsched.utilization("from" timestamptz, "to" timestamptz, bucket interval DEFAULT '1 hour')
RETURNS TABLE (bucket_start timestamptz, bucket_end timestamptz, capacity_gpus float8, allocated_gpus float8,
               utilization float8, borrowed_gpus float8)
LANGUAGE sql STABLE SET jit = off AS $$
WITH p AS (SELECT gangsched._bucket_seconds($1, $2, $3) AS bs),
b AS (SELECT x.* FROM p, gangsched._buckets($1, $2, p.bs) x),
al AS (
    SELECT x.k, sum(x.gpu_seconds) AS gs, sum(x.gpu_seconds) FILTER (WHERE x.borrowed) AS bgs
      FROM p, gangsched._allocated($1, $2, p.bs) x GROUP BY 1),
cap AS (SELECT x.* FROM p, gangsched._capacity($1, $2, p.bs) x),
len AS (SELECT b.*, date_part('epoch', b.bucket_end - b.bucket_start) AS secs FROM b)
SELECT len.bucket_start, len.bucket_end,
       COALESCE(cap.gpu_seconds, 0) / len.secs,
       COALESCE(al.gs, 0) / len.secs,
       CASE WHEN cap.gpu_seconds > 0 THEN COALESCE(al.gs, 0) / cap.gpu_seconds END,
       COALESCE(al.bgs, 0) / len.secs
  FROM len
  LEFT JOIN al ON al.k = len.k
  LEFT JOIN cap ON cap.k = len.k
 WHERE len.secs > 0
 ORDER BY len.bucket_start
$$;

-- Who held what at one instant: one row per worker holding capacity then
-- (an allocation [s, e) holds at s and not at e), with its devices and
-- whether it was borrowed capacity. `until` is NULL while still held.
CREATE FUNCTION gangsched.snapshot("at" timestamptz)
RETURNS TABLE (job bigint, name text, team text, worker int, node text, devices int[], first_slice int,
               slices int, gpus numeric, cpus numeric, mem_gb numeric, net_gbps numeric, borrowed bool,
               since timestamptz, until timestamptz)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT a.job, (SELECT g.name FROM gangsched.gangs g WHERE g.id = a.job),
       (SELECT t.name FROM gangsched.teams t WHERE t.id = a.team_id), a.worker,
       (SELECT n.name FROM gangsched.nodes n WHERE n.id = a.node_id), a.devices, a.first_slice, a.slices, a.gpus, a.cpus,
       a.mem_gb, a.net_gbps, a.borrowed, lower(a.during), upper(a.during)
  FROM (SELECT * FROM gangsched.allocations x
         WHERE NOT upper_inf(x.during)
           AND lower(x.during) >= $1 - interval '1 day' AND lower(x.during) <= $1 AND x.during @> $1
        UNION ALL
        SELECT * FROM gangsched.allocations x
         WHERE NOT upper_inf(x.during) AND upper(x.during) - lower(x.during) > interval '1 day'
           AND x.during @> $1 AND lower(x.during) < $1 - interval '1 day'
        UNION ALL
        SELECT * FROM gangsched.allocations x
         WHERE upper_inf(x.during) AND lower(x.during) <= $1 AND $1 <= gangsched.now()) a
 ORDER BY a.job, a.worker
$$;

-- Queue waits of the jobs submitted in [from, to), per team and for all
-- teams (team NULL): the wait of a job is from its submit to its first
-- placement ('submitted' and first 'placed' event), wherever that falls.
-- Jobs not placed yet (still waiting) and jobs that never were (expired,
-- cancelled) are counted apart and have no wait. by => 'subtree': a team's
-- row counts the jobs of its whole subtree. path: the team's path in the
-- tree (NULL on the all-teams row).
CREATE FUNCTION gangsched.queue_waits("from" timestamptz, "to" timestamptz, by text DEFAULT 'team')
RETURNS TABLE (team text, submitted bigint, placed bigint, still_waiting bigint, never_placed bigint,
               mean_s float8, p50_s float8, p95_s float8, max_s float8, path text)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._bucket_seconds($1, $2, $2 - $1);   -- refuses a bad window
SELECT gangsched._check_by($3);
WITH s AS (
    SELECT e.job, e.team_id, e.at
      FROM gangsched.events e
     WHERE e.kind = 'submitted' AND e.at >= $1 AND e.at < $2 AND e.job IS NOT NULL),
w AS MATERIALIZED (
    SELECT s.team_id, g.state,
           date_part('epoch', (SELECT min(e.at) FROM gangsched.events e WHERE e.job = s.job AND e.kind = 'placed') - s.at) AS wait
      FROM s JOIN gangsched.gangs g ON g.id = s.job)
SELECT * FROM (
    SELECT t.name, count(*), count(w.wait),
           count(*) FILTER (WHERE w.wait IS NULL AND w.state IN ('pending', 'nominated')),
           count(*) FILTER (WHERE w.wait IS NULL AND w.state NOT IN ('pending', 'nominated')),
           avg(w.wait), percentile_cont(0.5) WITHIN GROUP (ORDER BY w.wait),
           percentile_cont(0.95) WITHIN GROUP (ORDER BY w.wait), max(w.wait), tr.path
      FROM w JOIN gangsched._rollup($3) r ON r.member = w.team_id
      JOIN gangsched.teams t ON t.id = r.team_id
      JOIN gangsched._team_tree tr ON tr.team_id = r.team_id
     GROUP BY t.name, tr.path
    UNION ALL
    SELECT NULL, count(*), count(w.wait),
           count(*) FILTER (WHERE w.wait IS NULL AND w.state IN ('pending', 'nominated')),
           count(*) FILTER (WHERE w.wait IS NULL AND w.state NOT IN ('pending', 'nominated')),
           avg(w.wait), percentile_cont(0.5) WITHIN GROUP (ORDER BY w.wait),
           percentile_cont(0.95) WITHIN GROUP (ORDER BY w.wait), max(w.wait), NULL
      FROM w) x
 ORDER BY 1 NULLS LAST
$$;

-- Preemptions in [from, to), per team of the victims and for all teams
-- (team NULL): victims told to stop ('preempting' events), how they went
-- ('requeued' events: released by their agent, or killed at their grace
-- deadline), the work they lost (GPU-hours since their last checkpoint,
-- as recorded by the requeue), how many jobs of the team preempted
-- others ('nominated'), and the other requeues (node down, start timeout)
-- with their own lost work. by => 'subtree': a team's row sums its whole
-- subtree. path: the team's path in the tree (NULL on the all-teams row).
-- Then the team's elastic gangs shrunk instead of preempted
-- (docs/elastic.md#shrinking): shrinks decided ('shrinking' events), the
-- replicas they gave back, the shrinks whose released workers were killed
-- at the deadline ('shrunk' events) and the work those lost.
CREATE FUNCTION gangsched.preemption_summary("from" timestamptz, "to" timestamptz, by text DEFAULT 'team')
RETURNS TABLE (team text, preemptions bigint, released bigint, killed bigint, lost_gpu_hours float8,
               preemptors bigint, other_requeues bigint, other_lost_gpu_hours float8, path text,
               shrinks bigint, shrink_replicas bigint, shrinks_killed bigint, shrink_lost_gpu_hours float8)
LANGUAGE sql STABLE SET jit = off AS $$
SELECT gangsched._bucket_seconds($1, $2, $2 - $1);   -- refuses a bad window
SELECT gangsched._check_by($3);
WITH e AS MATERIALIZED (
    SELECT e.team_id, e.kind,
           CASE WHEN e.kind = 'shrunk' THEN CASE WHEN e.reason LIKE '%; killed at its deadline' THEN 'shrink killed' END
                WHEN e.kind <> 'requeued' THEN NULL
                WHEN e.reason LIKE 'preempted for job %' THEN 'released'
                WHEN e.reason LIKE 'killed at its grace deadline%' THEN 'killed'
                ELSE 'other' END AS how,
           COALESCE((e.detail->>'lost_gpu_seconds')::float8, 0) AS lost,
           CASE WHEN e.kind = 'shrinking'
                THEN (e.detail->>'was_replicas')::int - (e.detail->>'replicas')::int END AS replicas
      FROM gangsched.events e
     WHERE e.at >= $1 AND e.at < $2 AND e.kind IN ('preempting', 'requeued', 'nominated', 'shrinking', 'shrunk')),
-- the events of teams that exist (as the join to teams always kept them)
et AS (SELECT e.* FROM e WHERE EXISTS (SELECT FROM gangsched.teams t WHERE t.id = e.team_id))
SELECT * FROM (
    SELECT t.name,
           count(*) FILTER (WHERE et.kind = 'preempting'),
           count(*) FILTER (WHERE et.how = 'released'),
           count(*) FILTER (WHERE et.how = 'killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how IN ('released', 'killed')), 0) / 3600,
           count(*) FILTER (WHERE et.kind = 'nominated'),
           count(*) FILTER (WHERE et.how = 'other'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how = 'other'), 0) / 3600,
           tr.path,
           count(*) FILTER (WHERE et.kind = 'shrinking'),
           COALESCE(sum(et.replicas), 0),
           count(*) FILTER (WHERE et.how = 'shrink killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.kind = 'shrunk'), 0) / 3600
      FROM et JOIN gangsched._rollup($3) r ON r.member = et.team_id
      JOIN gangsched.teams t ON t.id = r.team_id
      JOIN gangsched._team_tree tr ON tr.team_id = r.team_id
     GROUP BY t.name, tr.path
    UNION ALL
    SELECT NULL,
           count(*) FILTER (WHERE et.kind = 'preempting'),
           count(*) FILTER (WHERE et.how = 'released'),
           count(*) FILTER (WHERE et.how = 'killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how IN ('released', 'killed')), 0) / 3600,
           count(*) FILTER (WHERE et.kind = 'nominated'),
           count(*) FILTER (WHERE et.how = 'other'),
           COALESCE(sum(et.lost) FILTER (WHERE et.how = 'other'), 0) / 3600,
           NULL,
           count(*) FILTER (WHERE et.kind = 'shrinking'),
           COALESCE(sum(et.replicas), 0),
           count(*) FILTER (WHERE et.how = 'shrink killed'),
           COALESCE(sum(et.lost) FILTER (WHERE et.kind = 'shrunk'), 0) / 3600
      FROM et) x
 ORDER BY 1 NULLS LAST
$$;

-- Per bucket: mean jobs and GPUs waiting (pending or nominated: submitted
-- or requeued and not placed yet), and the most jobs waiting at once.
-- A job waits from its 'submitted' or 'requeued' event to its next
-- 'placed', 'expired' or 'cancelled' event. Cost: it reads the events log
-- from `from` on (to find the jobs that were waiting at `from`), so it is
-- cheap for recent windows and grows with the history after `from`.
CREATE FUNCTION gangsched.queue_depth("from" timestamptz, "to" timestamptz, bucket interval DEFAULT '1 hour')
RETURNS TABLE (bucket_start timestamptz, bucket_end timestamptz, waiting_jobs float8, waiting_gpus float8,
               max_waiting_jobs int)
LANGUAGE sql STABLE SET jit = off AS $$
WITH p AS (SELECT gangsched._bucket_seconds($1, $2, $3) AS bs),
w AS MATERIALIZED (SELECT $1 AS t0, LEAST($2, gangsched.now()) AS t1),
jobs AS (
    SELECT e.job FROM w, gangsched.events e
     WHERE e.at >= w.t0 AND e.kind IN ('submitted', 'requeued', 'placed', 'expired', 'cancelled') AND e.job IS NOT NULL
    UNION
    SELECT g.id FROM gangsched.gangs g WHERE g.state IN ('pending', 'nominated')),
ev AS (
    -- each job's own events, through events_job_idx (OFFSET 0 keeps the
    -- planner from merging the whole index with the job list)
    SELECT j.job, e.at, e.id, e.kind IN ('submitted', 'requeued') AS starts
      FROM jobs j,
           LATERAL (SELECT e.at, e.id, e.kind FROM gangsched.events e
                     WHERE e.job = j.job AND e.kind IN ('submitted', 'requeued', 'placed', 'expired', 'cancelled')
                    OFFSET 0) e),
marked AS (
    SELECT ev.*, lag(ev.starts) OVER o AS was_waiting,
           min(ev.at) FILTER (WHERE NOT ev.starts) OVER (PARTITION BY ev.job ORDER BY ev.at, ev.id
                                                         ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS next_end
      FROM ev WINDOW o AS (PARTITION BY ev.job ORDER BY ev.at, ev.id)),
spans AS (
    SELECT m.job, (SELECT (g.workers * g.gpus)::float8 FROM gangsched.gangs g WHERE g.id = m.job) AS gpus,
           date_part('epoch', GREATEST(m.at, w.t0) - w.t0) AS s,
           date_part('epoch', LEAST(COALESCE(m.next_end, 'infinity'), w.t1) - w.t0) AS e
      FROM marked m, w
     WHERE m.starts AND m.was_waiting IS DISTINCT FROM true
       AND m.at < w.t1 AND COALESCE(m.next_end, 'infinity') > w.t0),
groups AS (
    -- key 0: one per waiting job; key 1: its GPUs
    SELECT x.key, floor(sp.s / p.bs)::int AS ks, ceil(sp.e / p.bs)::int - 1 AS ke,
           sum(x.w * (LEAST(sp.e, (floor(sp.s / p.bs) + 1) * p.bs) - sp.s)) AS first_part,
           sum(x.w * (sp.e - (ceil(sp.e / p.bs) - 1) * p.bs)) AS last_part, sum(x.w) AS w
      FROM spans sp, p, LATERAL (VALUES (0, 1::float8), (1, sp.gpus)) x(key, w)
     WHERE sp.e > sp.s
     GROUP BY 1, 2, 3),
arr AS (
    SELECT array_agg(key) AS key, array_agg(ks) AS ks, array_agg(ke) AS ke, array_agg(first_part) AS fp,
           array_agg(last_part) AS lp, array_agg(w) AS w
      FROM groups),
per AS (
    SELECT bz.k, sum(bz.weighted) FILTER (WHERE bz.key = 0) AS job_secs, sum(bz.weighted) FILTER (WHERE bz.key = 1) AS gpu_secs
      FROM arr, p, gangsched._bucketize(arr.key, arr.ks, arr.ke, arr.fp, arr.lp, arr.w, p.bs) bz
     GROUP BY bz.k),
b AS (SELECT x.*, date_part('epoch', x.bucket_end - x.bucket_start) AS secs FROM p, gangsched._buckets($1, $2, p.bs) x),
peak AS (
    -- the most jobs waiting at once in each bucket: a sweep over the spans'
    -- starts (+1) and ends (-1, first at a tie) and the buckets' starts (the
    -- count carried in)
    SELECT floor(pt.x / p.bs)::int AS k, max(pt.n)::int AS n
      FROM p, (SELECT x, sum(d) OVER (ORDER BY x, d ROWS UNBOUNDED PRECEDING) AS n
                 FROM (SELECT sp.s AS x, 1 AS d FROM spans sp
                       UNION ALL SELECT sp.e, -1 FROM spans sp
                       UNION ALL SELECT b.k * p.bs, 0 FROM b, p) pts) pt
     GROUP BY 1)
SELECT b.bucket_start, b.bucket_end, COALESCE(per.job_secs, 0) / b.secs, COALESCE(per.gpu_secs, 0) / b.secs,
       COALESCE(peak.n, 0)
  FROM b LEFT JOIN per ON per.k = b.k LEFT JOIN peak ON peak.k = b.k
 WHERE b.secs > 0
 ORDER BY b.bucket_start
$$;

-- The replicas each job held over time (elastic gangs, docs/elastic.md;
-- a rigid job holds all of its replicas whenever it holds anything): one
-- row per job and interval of [from, to) in which the number of its
-- allocations stayed the same, from the allocation history. `until` is
-- NULL while still held. Jobs archived (archive_history()) are not shown:
-- their allocations went with them. The intervals are cut from the whole
-- allocation history of the jobs that held something in the window (an
-- interval that began before `from` keeps its real `since`, and counts
-- only what was held then: a worker a shrink released before `from` ended
-- the interval before it).
CREATE FUNCTION gangsched.replica_history("from" timestamptz, "to" timestamptz)
RETURNS TABLE (job bigint, name text, team text, since timestamptz, until timestamptz, workers int,
               replicas int, min_replicas int, max_replicas int)
LANGUAGE sql STABLE SET jit = off AS $$
WITH j AS (
    SELECT DISTINCT x.job FROM gangsched.allocations x WHERE x.during && tstzrange($1, $2)),
a AS (
    SELECT x.job, x.team_id, x.during FROM gangsched.allocations x WHERE x.job IN (SELECT j.job FROM j)),
pts AS (
    SELECT a.job, lower(a.during) AS t FROM a
    UNION
    SELECT a.job, upper(a.during) FROM a WHERE NOT upper_inf(a.during)),
seg AS (
    SELECT p.job, p.t AS since, lead(p.t) OVER (PARTITION BY p.job ORDER BY p.t) AS until FROM pts p),
held AS (
    SELECT s.job, s.since, s.until,
           -- after a job's last change point only what is still held counts
           (SELECT count(*) FROM a WHERE a.job = s.job AND a.during @> s.since
                                     AND (s.until IS NOT NULL OR upper_inf(a.during)))::int AS n
      FROM seg s),
shape AS (
    SELECT g.id, g.name, g.team_id, g.group_size * g.stages AS unit, g.min_replicas,
           COALESCE(g.max_workers, g.workers) AS max_workers FROM gangsched.gangs g)
SELECT h.job, s.name, t.name, h.since, h.until, h.n, h.n / s.unit, s.min_replicas, s.max_workers / s.unit
  FROM held h JOIN shape s ON s.id = h.job JOIN gangsched.teams t ON t.id = s.team_id
 WHERE h.n > 0 AND h.since < $2 AND (h.until IS NULL OR h.until > $1)
 ORDER BY h.job, h.since
$$;
