/* ------------------------------------------------------------------ */
/* Team trees: administration and shares (docs/fairness.md,            */
/* "Team trees")                                                       */
/* ------------------------------------------------------------------ */

-- teams.parent_id names an existing team, and a team with children is not
-- deleted: what a foreign key would check (64_team_admin.sql says why it is
-- not one), checked at the end of each statement as a foreign key is, so
-- a restore may load the rows in any order. The API refuses both earlier,
-- with the reasons (add_team, set_team_parent, remove_team); this catches
-- writes that bypass it.
CREATE FUNCTION gangsched._teams_parent_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = OLD.id) THEN
            RAISE EXCEPTION 'team "%" is the parent of other teams', OLD.name
                USING ERRCODE = 'foreign_key_violation',
                      HINT = 'Remove its subteams first, or move them with gangsched.set_team_parent(team, parent).';
        END IF;
    ELSIF NEW.parent_id IS NOT NULL AND NOT EXISTS (SELECT FROM gangsched.teams p WHERE p.id = NEW.parent_id) THEN
        RAISE EXCEPTION 'team "%" names parent team id %, which does not exist', NEW.name, NEW.parent_id
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Set a team''s parent with gangsched.add_team(name, weight, parent) or gangsched.set_team_parent(team, parent).';
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER teams_parent_exists AFTER INSERT OR UPDATE OF parent_id OR DELETE ON gangsched.teams
    FOR EACH ROW EXECUTE FUNCTION gangsched._teams_parent_check();

-- Every team with its place in the tree: the parent's name, the path of
-- names from the top ('research/vision'), the depth (1 at the top), the
-- ids from the top-level team down to the team itself, and whether it is
-- a leaf (has no children). set_team_parent() keeps the tree acyclic, so
-- every team is reached from a top-level team. Internal: the queue and
-- team_shares views and the analyst functions read it.
CREATE VIEW gangsched._team_tree AS
WITH RECURSIVE tr AS (
    SELECT t.id, t.name AS path, 1 AS depth, ARRAY[t.id] AS ancestors
      FROM gangsched.teams t WHERE t.parent_id IS NULL
    UNION ALL
    SELECT c.id, tr.path || '/' || c.name, tr.depth + 1, tr.ancestors || c.id
      FROM tr JOIN gangsched.teams c ON c.parent_id = tr.id)
SELECT tr.id AS team_id, t.name, t.parent_id, p.name AS parent, tr.path, tr.depth, tr.ancestors,
       NOT EXISTS (SELECT FROM gangsched.teams k WHERE k.parent_id = tr.id) AS leaf
  FROM tr JOIN gangsched.teams t ON t.id = tr.id
  LEFT JOIN gangsched.teams p ON p.id = t.parent_id;

-- A team about to become a parent (add_team(parent => ...),
-- set_team_parent()) must have no live job: jobs go to leaf teams. The
-- row lock (FOR UPDATE) waits for a submit to it that is still open (its
-- foreign key holds the row FOR KEY SHARE) and makes a later one wait, and
-- then see the child (_check_team_limits).
CREATE FUNCTION gangsched._check_new_parent(pid int, parent text, action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    live bigint;
BEGIN
    PERFORM FROM gangsched.teams t WHERE t.id = pid FOR UPDATE;
    SELECT count(*) INTO live FROM gangsched.gangs g
     WHERE g.team_id = pid AND g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting');
    IF live > 0 THEN
        RAISE EXCEPTION 'team "%" has % live jobs and cannot become a parent', parent, live
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('Jobs go to leaf teams only; %s would put a team under "%s".', action, parent),
                  HINT = format('Let the jobs of team "%s" end (or cancel them) first, or put the new team elsewhere; '
                                'close_team(%L) stops new submits meanwhile.', parent, parent);
    END IF;
END $$;

-- The nearest proper ancestor of team `tid` with a quota in pool `pid`
-- (NULL: none): the team whose nominal quota tid's is carved out of.
CREATE FUNCTION gangsched._quota_parent(tid int, pid int) RETURNS int
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE up(id, parent_id, n) AS (
        SELECT t.id, t.parent_id, 0 FROM gangsched.teams t WHERE t.id = $1
        UNION
        SELECT t.id, t.parent_id, up.n + 1 FROM up JOIN gangsched.teams t ON t.id = up.parent_id)
    SELECT up.id FROM up
     WHERE up.n > 0 AND EXISTS (SELECT FROM gangsched.quotas q WHERE q.team_id = up.id AND q.pool_id = $2)
     ORDER BY up.n LIMIT 1
$$;

-- The carve-out rule: if team `tid` has a quota in pool `pid`, the nominal
-- quotas of its nearest descendants with a quota there (children, or
-- grandchildren under a child without one, ...) must fit inside it, for
-- every resource its quota governs. 22023 otherwise, naming the pool and
-- the amounts. `action` says what was being done.
CREATE FUNCTION gangsched._check_carve(tid int, pid int, action text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    q    record;
    s    record;
    tn   text;
    pn   text;
    res  text;
    own  numeric;
    sub  numeric;
    who  text;
BEGIN
    IF tid IS NULL THEN
        RETURN;
    END IF;
    SELECT e.gpus, e.cpus, e.mem_gb, e.net_gbps INTO q
      FROM gangsched._effective_quotas e WHERE e.team_id = tid AND e.pool_id = pid;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    WITH RECURSIVE d(id, has) AS (
        SELECT c.id, EXISTS (SELECT FROM gangsched.quotas x WHERE x.team_id = c.id AND x.pool_id = pid)
          FROM gangsched.teams c WHERE c.parent_id = tid
        UNION
        SELECT c.id, EXISTS (SELECT FROM gangsched.quotas x WHERE x.team_id = c.id AND x.pool_id = pid)
          FROM d JOIN gangsched.teams c ON c.parent_id = d.id
         WHERE NOT d.has)
    SELECT COALESCE(sum(e.gpus), 0) AS gpus, COALESCE(sum(e.cpus), 0) AS cpus,
           COALESCE(sum(e.mem_gb), 0) AS mem_gb, COALESCE(sum(e.net_gbps), 0) AS net_gbps,
           string_agg(format('%s %s', t.name, trim_scale(e.gpus)), ', ' ORDER BY t.name) AS who_gpus,
           string_agg(format('%s %s', t.name, trim_scale(e.cpus)), ', ' ORDER BY t.name) AS who_cpus,
           string_agg(format('%s %s', t.name, trim_scale(e.mem_gb)), ', ' ORDER BY t.name) AS who_mem_gb,
           string_agg(format('%s %s', t.name, trim_scale(e.net_gbps)), ', ' ORDER BY t.name) AS who_net_gbps
      INTO s
      FROM d JOIN gangsched._effective_quotas e ON e.team_id = d.id AND e.pool_id = pid
      JOIN gangsched.teams t ON t.id = d.id
     WHERE d.has;
    IF q.gpus < s.gpus THEN
        res := 'GPUs'; own := q.gpus; sub := s.gpus; who := s.who_gpus;
    ELSIF q.cpus < s.cpus THEN
        res := 'CPUs'; own := q.cpus; sub := s.cpus; who := s.who_cpus;
    ELSIF q.mem_gb < s.mem_gb THEN
        res := 'GB of memory'; own := q.mem_gb; sub := s.mem_gb; who := s.who_mem_gb;
    ELSIF q.net_gbps < s.net_gbps THEN
        res := 'Gbit/s of network'; own := q.net_gbps; sub := s.net_gbps; who := s.who_net_gbps;
    ELSE
        RETURN;
    END IF;
    SELECT t.name INTO tn FROM gangsched.teams t WHERE t.id = tid;
    SELECT p.name INTO pn FROM gangsched.pools p WHERE p.id = pid;
    RAISE EXCEPTION 'the nominal quotas under team "%" in pool "%" would be % %, more than its own %',
                    tn, pn, trim_scale(sub), res, trim_scale(own)
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = format('A subteam''s nominal quota is carved out of its parent''s; %s would leave team "%s" '
                              'with %s %s in pool "%s" and the quotas below it at %s %s (%s).',
                              action, tn, trim_scale(own), res, pn, trim_scale(sub), res, who),
              HINT = format('Raise the quota of team "%s" in pool "%s" first (gangsched.set_quota), '
                            'or lower the quotas below it.', tn, pn);
END $$;

-- Move team `team` (with its subtree) under `parent`, or to the top level
-- (parent NULL). Its quotas, weights, members and history stay; from the
-- next round its subtree shares what the new parent gets.
CREATE FUNCTION gangsched.set_team_parent(team text, parent text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid  int := gangsched._team_id(team);
    pid  int := CASE WHEN parent IS NOT NULL THEN gangsched._team_id(parent) END;
    old  int;
    p    record;
BEGIN
    -- one tree change at a time, so two moves cannot close a cycle between
    -- them (submits and rounds do not take this lock)
    LOCK TABLE gangsched.teams IN SHARE ROW EXCLUSIVE MODE;
    SELECT t.parent_id INTO old FROM gangsched.teams t WHERE t.id = tid;
    IF old IS NOT DISTINCT FROM pid THEN
        RETURN;
    END IF;
    IF pid IS NOT NULL THEN
        IF pid = tid OR EXISTS (SELECT FROM gangsched._team_tree x WHERE x.team_id = pid AND tid = ANY (x.ancestors)) THEN
            RAISE EXCEPTION 'team "%" cannot move under "%", which is %', team, parent,
                            CASE WHEN pid = tid THEN 'itself' ELSE 'in its own subtree' END
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('Team "%s" is at %s; teams form a tree, without cycles.', parent,
                                      (SELECT x.path FROM gangsched._team_tree x WHERE x.team_id = pid)),
                      HINT = format('Move "%s" out of the subtree of "%s" first, or choose a parent outside it.', parent, team);
        END IF;
        PERFORM gangsched._check_new_parent(pid, parent, format('set_team_parent(%L, %L)', team, parent));
    END IF;
    UPDATE gangsched.teams t SET parent_id = pid WHERE t.id = tid;
    -- the subtree's nominal quotas must fit under its new quota parents
    FOR p IN SELECT DISTINCT q.pool_id FROM gangsched.quotas q
              WHERE q.team_id IN (SELECT x.team_id FROM gangsched._team_tree x WHERE tid = ANY (x.ancestors)) LOOP
        PERFORM gangsched._check_carve(gangsched._quota_parent(tid, p.pool_id), p.pool_id,
                                       format('moving team "%s" under "%s"', team, COALESCE(parent, 'the top level')));
    END LOOP;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team parent set',
                             jsonb_build_object('team', team, 'parent', parent,
                                                'was', (SELECT t.name FROM gangsched.teams t WHERE t.id = old)));
    PERFORM gangsched._wake();
END $$;

-- Weighted max-min fair split of a capacity among siblings, by dominant
-- share (progressive filling, as DRF defines it): every sibling's share
-- grows in proportion to its weight, along the direction of its demand,
-- until its demand is met or a resource it needs runs out. cap is
-- [GPUs, CPUs, GB, Gbit/s]; demand holds 4 numbers per sibling, in the
-- order of weight. Returns each sibling's dominant share of cap (a
-- resource of capacity 0 is left out).
CREATE FUNCTION gangsched._drf_split(cap float8[], demand float8[], weight float8[]) RETURNS float8[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n      int := COALESCE(array_length(weight, 1), 0);
    u      float8[] := array_fill(0::float8, ARRAY[4 * GREATEST(n, 1)]);
    d      float8[] := array_fill(0::float8, ARRAY[GREATEST(n, 1)]);
    s      float8[] := array_fill(0::float8, ARRAY[GREATEST(n, 1)]);
    active bool[] := array_fill(false, ARRAY[GREATEST(n, 1)]);
    used   float8[] := ARRAY[0, 0, 0, 0]::float8[];
    i      int;
    r      int;
    t      float8;
    rate   float8;
    x      float8;
    nleft  int := n;
BEGIN
    FOR i IN 1 .. n LOOP
        FOR r IN 1 .. 4 LOOP
            x := CASE WHEN cap[r] > 0 THEN COALESCE(demand[4 * (i - 1) + r], 0) / cap[r] ELSE 0 END;
            u[4 * (i - 1) + r] := x;
            d[i] := GREATEST(d[i], x);
        END LOOP;
        IF d[i] > 0 THEN
            active[i] := true;
            FOR r IN 1 .. 4 LOOP
                u[4 * (i - 1) + r] := u[4 * (i - 1) + r] / d[i];
            END LOOP;
        ELSE
            nleft := nleft - 1;
        END IF;
    END LOOP;
    WHILE nleft > 0 LOOP
        -- the next event: a sibling's demand met, or a resource used up
        t := 'Infinity';
        FOR i IN 1 .. n LOOP
            IF active[i] THEN
                t := LEAST(t, (d[i] - s[i]) / weight[i]);
            END IF;
        END LOOP;
        FOR r IN 1 .. 4 LOOP
            rate := 0;
            FOR i IN 1 .. n LOOP
                IF active[i] THEN
                    rate := rate + weight[i] * u[4 * (i - 1) + r];
                END IF;
            END LOOP;
            IF rate > 0 THEN
                t := LEAST(t, GREATEST(1 - used[r], 0) / rate);
            END IF;
        END LOOP;
        FOR i IN 1 .. n LOOP
            IF active[i] THEN
                s[i] := s[i] + weight[i] * t;
            END IF;
        END LOOP;
        FOR r IN 1 .. 4 LOOP
            used[r] := 0;
            FOR i IN 1 .. n LOOP
                used[r] := used[r] + s[i] * u[4 * (i - 1) + r];
            END LOOP;
        END LOOP;
        FOR i IN 1 .. n LOOP
            IF active[i] AND s[i] >= d[i] * (1 - 1e-12) THEN
                s[i] := d[i]; active[i] := false; nleft := nleft - 1;
            END IF;
        END LOOP;
        FOR r IN 1 .. 4 LOOP
            IF used[r] >= 1 - 1e-12 THEN
                FOR i IN 1 .. n LOOP
                    IF active[i] AND u[4 * (i - 1) + r] > 0 THEN
                        active[i] := false; nleft := nleft - 1;
                    END IF;
                END LOOP;
            END IF;
        END LOOP;
    END LOOP;
    RETURN s[1:n];
END $$;

-- Each team's fair share (the fair_share column of team_shares): the
-- dominant share of the cluster (up nodes, all pools, as dominant_share)
-- that hierarchical weighted DRF gives its subtree, over what the
-- subtree's teams hold now plus what their pending jobs ask for. Top-level
-- teams split the cluster; the children of a team split what it gets.
-- Computed in memory (no temporary table: it runs on standbys too).
CREATE FUNCTION gangsched._fair_shares(OUT team_id int, OUT fair_share float8)
RETURNS SETOF record LANGUAGE plpgsql STABLE AS $$
DECLARE
    cap    float8[];
    ids    int[];
    par    int[];
    w      float8[];
    d      float8[];
    n      int;
    pos    int[] := '{}';
    alloc  float8[];
    kids   int[];
    dem    float8[];
    ww     float8[];
    sh     float8[];
    pc     float8[];
    g      int;
    i      int;
    j      int;
    r      int;
    dom    float8;
    k      float8;
BEGIN
    SELECT ARRAY[COALESCE(sum(x.gpus), 0), COALESCE(sum(x.cpus), 0), COALESCE(sum(x.mem_gb), 0),
                 COALESCE(sum(x.net_gbps), 0)]::float8[]
      INTO cap FROM gangsched.nodes x WHERE x.state = 'up';
    -- what each team holds (as team_shares counts it) and asks for,
    -- parents before their children (by depth)
    WITH own AS (
        -- float8 throughout (the gangs' f_ copies of the request), each
        -- part summed per team first: a share needs no exact sums, and
        -- numeric arithmetic over the queue's rows was most of the time
        SELECT x.team_id, sum(x.gpus) AS gpus, sum(x.cpus) AS cpus, sum(x.mem) AS mem, sum(x.net) AS net
          FROM (SELECT a.team_id, sum(a.gpus::float8) AS gpus, sum(a.cpus::float8) AS cpus,
                       sum(a.mem_gb::float8) AS mem, sum(a.net_gbps::float8) AS net
                  FROM gangsched.allocations a
                 WHERE upper_inf(a.during)
                   AND NOT EXISTS (SELECT FROM gangsched.gangs j WHERE j.id = a.job AND j.state = 'preempting')
                 GROUP BY a.team_id
                UNION ALL
                SELECT j.team_id, sum(j.f_gpus), sum(h.cpus::float8), sum(h.mem_gb::float8), sum(h.net_gbps::float8)
                  FROM gangsched.holds h JOIN gangsched.gangs j ON j.id = h.job
                 GROUP BY j.team_id
                UNION ALL
                SELECT j.team_id, sum(j.workers * j.f_gpus), sum(j.workers * j.f_cpus), sum(j.workers * j.f_mem_gb),
                       sum(j.workers * j.f_net_gbps)
                  FROM gangsched.gangs j WHERE j.state = 'pending'
                 GROUP BY j.team_id) x
         GROUP BY x.team_id),
    tm AS (
        SELECT tr.team_id, tr.parent_id, tr.depth, t.weight::float8 AS weight,
               COALESCE(o.gpus, 0) AS gpus, COALESCE(o.cpus, 0) AS cpus, COALESCE(o.mem, 0) AS mem,
               COALESCE(o.net, 0) AS net
          FROM gangsched._team_tree tr JOIN gangsched.teams t ON t.id = tr.team_id
          LEFT JOIN own o ON o.team_id = tr.team_id)
    SELECT array_agg(s.team_id ORDER BY s.depth, s.team_id), array_agg(s.parent_id ORDER BY s.depth, s.team_id),
           array_agg(s.weight ORDER BY s.depth, s.team_id),
           (SELECT array_agg(x.v ORDER BY s2.depth, s2.team_id, x.o)
              FROM tm s2 CROSS JOIN LATERAL unnest(ARRAY[s2.gpus, s2.cpus, s2.mem, s2.net]) WITH ORDINALITY x(v, o))
      INTO ids, par, w, d
      FROM tm s;
    n := COALESCE(array_length(ids, 1), 0);
    IF n = 0 THEN
        RETURN;
    END IF;
    FOR i IN 1 .. n LOOP
        pos[ids[i]] := i;
    END LOOP;
    -- a subtree's demand: its teams' own, summed bottom up (a child comes
    -- after its parent in this order)
    FOR i IN REVERSE n .. 1 LOOP
        IF par[i] IS NOT NULL THEN
            j := pos[par[i]];
            FOR r IN 1 .. 4 LOOP
                d[4 * (j - 1) + r] := d[4 * (j - 1) + r] + d[4 * (i - 1) + r];
            END LOOP;
        END IF;
    END LOOP;
    alloc := array_fill(0::float8, ARRAY[4 * n]);
    -- top down: the siblings under each parent (0: the top level) split
    -- the parent's allocation
    FOR g IN 0 .. n LOOP
        IF g = 0 THEN
            pc := cap;
        ELSIF ids[g] = ANY (par) THEN
            pc := alloc[4 * g - 3 : 4 * g];
        ELSE
            CONTINUE;
        END IF;
        kids := '{}'; dem := '{}'; ww := '{}';
        FOR i IN 1 .. n LOOP
            IF (g = 0 AND par[i] IS NULL) OR (g > 0 AND par[i] = ids[g]) THEN
                kids := kids || i; dem := dem || d[4 * i - 3 : 4 * i]; ww := ww || w[i];
            END IF;
        END LOOP;
        sh := gangsched._drf_split(pc, dem, ww);
        FOR j IN 1 .. COALESCE(array_length(kids, 1), 0) LOOP
            i := kids[j];
            -- the sibling's allocation: its demand scaled to its share
            dom := 0;
            FOR r IN 1 .. 4 LOOP
                IF pc[r] > 0 THEN
                    dom := GREATEST(dom, d[4 * (i - 1) + r] / pc[r]);
                END IF;
            END LOOP;
            k := CASE WHEN dom > 0 THEN sh[j] / dom ELSE 0 END;
            team_id := ids[i];
            fair_share := 0;
            FOR r IN 1 .. 4 LOOP
                alloc[4 * (i - 1) + r] := CASE WHEN pc[r] > 0 THEN k * d[4 * (i - 1) + r] ELSE 0 END;
                IF cap[r] > 0 THEN
                    fair_share := GREATEST(fair_share, alloc[4 * (i - 1) + r] / cap[r]);
                END IF;
            END LOOP;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END $$;
