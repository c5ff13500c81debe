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

-- Each team's fair share (the fair_share column of team_shares):
-- hierarchical weighted DRF (H-DRF) over what the subtree's teams hold now
-- plus what their pending jobs ask for, by the rounds' own code
-- (gs_tree_fair_shares in src/fair.c, read by src/loader.c): per team, the
-- subtree's allocation of each resource and its dominant share of the
-- cluster (up nodes, all pools, as dominant_share). Top-level teams split
-- the cluster; the children of a team split what it gets; a subtree
-- blocked on a resource that is used up stops counting against the others
-- (docs/fairness.md). Borrowing limits cap what a subtree may be given.
CREATE FUNCTION gangsched._fair_shares(OUT team_id int, OUT fair_share float8, OUT gpus float8, OUT cpus float8,
                                       OUT mem_gb float8, OUT net_gbps float8)
RETURNS SETOF record LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_fair_shares_sql';

-- What _fair_shares sums of the pending jobs, per team, without reading the
-- gangs' wide rows (an index-only scan; a heap scan of 20,000 pending jobs
-- was most of team_shares' time on the benchmark state).
CREATE INDEX gangs_pending_demand_idx ON gangsched.gangs (team_id)
    INCLUDE (workers, f_gpus, f_cpus, f_mem_gb, f_net_gbps)
    WHERE state = 'pending' AND waiting_for IS NULL;
