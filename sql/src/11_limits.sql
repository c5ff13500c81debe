/* ------------------------------------------------------------------ */
/* Per-team limits and name rules (issue 10)                           */
/* ------------------------------------------------------------------ */

-- Per-team overrides of gangsched.max_pending_per_team and
-- gangsched.max_workers_per_gang; NULL takes the setting.
ALTER TABLE gangsched.teams
    ADD COLUMN max_pending int CHECK (max_pending >= 1),
    ADD COLUMN max_workers_per_gang int CHECK (max_workers_per_gang >= 1);

-- The names the API accepts (gangsched._check_name), enforced by the tables
-- too, so nothing else can store a name the rounds would print unescaped.
ALTER TABLE gangsched.pools
    ADD CONSTRAINT pools_name_rule CHECK (length(name) <= 63 AND name ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$');
ALTER TABLE gangsched.nodes
    ADD CONSTRAINT nodes_name_rule CHECK (length(name) <= 63 AND name ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$');
ALTER TABLE gangsched.teams
    ADD CONSTRAINT teams_name_rule CHECK (length(name) <= 63 AND name ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$');
ALTER TABLE gangsched.datasets
    ADD CONSTRAINT datasets_name_rule CHECK (length(dataset) <= 63 AND dataset ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$');

-- submit()'s pending-count cache, one row per team (written by add_team).
-- pending was the team's exact count of pending jobs when queue_position_seq
-- stood at upto; every job submitted since took a queue position, so
-- pending + (last_value - upto) bounds the team's pending jobs from above
-- (jobs requeued since are not in it; counted_at limits how old the count
-- may be). submit() counts again only when that bound reaches the limit or
-- the count is older than 10 seconds; see _check_team_limits.
CREATE TABLE gangsched.team_pending (
    team_id     int PRIMARY KEY REFERENCES gangsched.teams,
    pending     int NOT NULL,
    upto        bigint NOT NULL,
    counted_at  timestamptz NOT NULL
);

-- The gang-size limit of a team (gangsched.max_workers_per_gang or the
-- team's own): 53S08. Shared by submit (_check_team_limits) and resize.
CREATE FUNCTION gangsched._check_gang_limit(team text, team_limit int, workers int) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
    wlim int := COALESCE(team_limit, pg_catalog.current_setting('gangsched.max_workers_per_gang', true)::int, 4096);
BEGIN
    IF workers > wlim THEN
        RAISE EXCEPTION 'the gang of % workers is larger than team "%" may submit', workers, team
            USING ERRCODE = '53S08',
                  DETAIL = format('Team "%s" may submit gangs of at most %s workers (%s).', team, wlim,
                                  CASE WHEN team_limit IS NOT NULL THEN 'its own limit'
                                       ELSE 'gangsched.max_workers_per_gang' END),
                  HINT = 'Ask for fewer workers, or ask the operator to raise the limit with gangsched.set_team_limits().';
    END IF;
END $$;

-- submit()'s per-team limits: 53S08 for a gang above the team's worker
-- limit, 53S07 when the team already has as many pending jobs as it may.
-- O(1) while the team is far from its pending limit (one index lookup and
-- a read of the sequence); near it, a count of the team's pending jobs on
-- gangs_team_idx, stopped at the limit.
CREATE FUNCTION gangsched._check_team_limits(tid int, workers int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r       record;
    up      record;
    lim     int;
    seq     bigint;
    n       int;
BEGIN
    SELECT t.name, t.max_pending, t.max_workers_per_gang, c.pending, c.upto, c.counted_at,
           (SELECT s.last_value FROM gangsched.queue_position_seq s) AS seq, t.closed_at, t.closed_reason,
           t.parent_id
      INTO r
      FROM gangsched.teams t LEFT JOIN gangsched.team_pending c ON c.team_id = t.id
     WHERE t.id = tid FOR KEY SHARE OF t;
    IF r.closed_at IS NULL AND r.parent_id IS NOT NULL THEN
        -- closing a team closes its subtree: the nearest closed ancestor
        SELECT a.name, a.closed_at, a.closed_reason INTO up
          FROM (WITH RECURSIVE anc(id, parent_id, d) AS (
                    SELECT x.id, x.parent_id, 1 FROM gangsched.teams x WHERE x.id = r.parent_id
                    UNION ALL
                    SELECT x.id, x.parent_id, anc.d + 1 FROM gangsched.teams x JOIN anc ON x.id = anc.parent_id)
                SELECT anc.id, anc.d FROM anc) s
          JOIN gangsched.teams a ON a.id = s.id
         WHERE a.closed_at IS NOT NULL ORDER BY s.d LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'team "%" is closed to new work: team "%" above it is closed', r.name, up.name
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('Team "%s" was closed at %s%s, and with it its subtree. Its queued jobs stay queued and are not placed; its running jobs run on.',
                                      up.name, up.closed_at, COALESCE(': ' || up.closed_reason, '')),
                      HINT = format('Ask the operator to reopen it with gangsched.open_team(%L).', up.name);
        END IF;
    END IF;
    IF r.closed_at IS NOT NULL THEN
        RAISE EXCEPTION 'team "%" is closed to new work', r.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Closed at %s%s. Its queued jobs stay queued and are not placed; its running jobs run on.',
                                  r.closed_at, COALESCE(': ' || r.closed_reason, '')),
                  HINT = format('Ask the operator to reopen it with gangsched.open_team(%L).', r.name);
    END IF;
    -- jobs go to leaf teams (the row lock above orders this against
    -- add_team / set_team_parent making the team a parent)
    IF EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = tid) THEN
        RAISE EXCEPTION 'team "%" has subteams and takes no jobs of its own', r.name
            USING ERRCODE = '55S01',
                  DETAIL = format('Jobs go to leaf teams; the leaves under "%s" are: %s.', r.name,
                                  (SELECT string_agg(x.path, ', ' ORDER BY x.path) FROM gangsched._team_tree x
                                    WHERE x.leaf AND tid = ANY (x.ancestors))),
                  HINT = 'Submit to one of its leaf teams.';
    END IF;
    PERFORM gangsched._check_gang_limit(r.name, r.max_workers_per_gang, workers);
    lim := COALESCE(r.max_pending,
                    pg_catalog.current_setting('gangsched.max_pending_per_team', true)::int, 10000);
    IF r.pending IS NOT NULL AND r.pending + (r.seq - r.upto) < lim
       AND r.counted_at > pg_catalog.now() - interval '10 seconds' THEN
        RETURN;
    END IF;
    -- count again: the sequence first, so jobs submitted meanwhile are in
    -- the next bound
    seq := r.seq;
    SELECT count(*)::int INTO n
      FROM (SELECT FROM gangsched.gangs g WHERE g.team_id = tid AND g.state = 'pending' LIMIT lim) s;
    IF n >= lim THEN
        RAISE EXCEPTION 'team "%" has % pending jobs, as many as it may have', r.name, n
            USING ERRCODE = '53S07',
                  DETAIL = format('Team "%s" may have at most %s pending jobs (%s).', r.name, lim,
                                  CASE WHEN r.max_pending IS NOT NULL THEN 'its own limit'
                                       ELSE 'gangsched.max_pending_per_team' END),
                  HINT = 'Submit again when some of its jobs have started or ended, cancel jobs it no longer needs, '
                         'or ask the operator to raise the limit with gangsched.set_team_limits().';
    END IF;
    -- remember the count unless another submit is remembering one (never wait)
    PERFORM FROM gangsched.team_pending c WHERE c.team_id = tid FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        UPDATE gangsched.team_pending c SET pending = n, upto = seq, counted_at = pg_catalog.now()
         WHERE c.team_id = tid;
    END IF;
END $$;

-- Operator: a team's own limits; NULL takes the settings
-- gangsched.max_pending_per_team and gangsched.max_workers_per_gang.
CREATE FUNCTION gangsched.set_team_limits(team text, max_pending int DEFAULT NULL,
                                          max_workers_per_gang int DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    IF max_pending < 1 OR max_workers_per_gang < 1 THEN
        RAISE EXCEPTION 'team limits must be at least 1, not %',
              CASE WHEN max_pending < 1 THEN max_pending ELSE max_workers_per_gang END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give a positive limit, or NULL for the default setting.';
    END IF;
    UPDATE gangsched.teams t SET max_pending = set_team_limits.max_pending,
                                 max_workers_per_gang = set_team_limits.max_workers_per_gang
     WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team limits set',
                             jsonb_build_object('team', team, 'max_pending', max_pending,
                                                'max_workers_per_gang', max_workers_per_gang));
END $$;
