/* ------------------------------------------------------------------ */
/* Team administration (docs/fairness.md, "Administering teams")      */
/* ------------------------------------------------------------------ */

-- A closed team keeps its queue but takes no new work: submit() refuses
-- its jobs (55000), rounds place none of its pending jobs (their reason
-- says so), its running jobs run on. NULL: open.
ALTER TABLE gangsched.teams
    ADD COLUMN closed_at     timestamptz,
    ADD COLUMN closed_reason text;

-- Teams form a tree (docs/fairness.md, "Team trees"): NULL is a top-level
-- team. Jobs go to leaf teams; a parent's children share what it gets.
-- That parent_id names a team is checked by the constraint trigger
-- teams_parent_exists (64_team_tree.sql), not a foreign key: pg_dump warns
-- of "circular foreign-key constraints" on every dump of an extension
-- table that references itself.
ALTER TABLE gangsched.teams
    ADD COLUMN parent_id int,
    ADD CONSTRAINT teams_parent_not_self CHECK (parent_id <> id);
CREATE INDEX teams_parent_idx ON gangsched.teams (parent_id) WHERE parent_id IS NOT NULL;

-- The weight rule of add_team() and set_team_weight().
CREATE FUNCTION gangsched._check_weight(weight numeric) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF weight IS NULL OR weight = 'NaN'::numeric OR weight <= 0 OR weight = 'Infinity'::numeric THEN
        RAISE EXCEPTION 'team weight must be a finite number > 0, not %', weight
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = 'Use 1 for an equal share; a team of weight 2 gets twice the dominant share.';
    END IF;
    IF weight < 0.000001 OR weight > 1000000 THEN
        RAISE EXCEPTION 'team weight must be between 0.000001 and 1000000, not %', btrim(to_char(weight, '9.999EEEE'))
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = 'Weights are compared as ratios; they need not be large or small.',
                  HINT = 'Use 1 for an equal share; a team of weight 2 gets twice the dominant share.';
    END IF;
END $$;

-- The next round orders teams by the new weight; nothing is preempted
-- for the change itself (a fair-share preemption may follow, by the usual
-- rule, if the new split leaves a team below its share).
CREATE FUNCTION gangsched.set_team_weight(team text, weight numeric) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
    old numeric;
BEGIN
    PERFORM gangsched._check_weight(weight);
    SELECT t.weight INTO old FROM gangsched.teams t WHERE t.id = tid FOR UPDATE;
    UPDATE gangsched.teams t SET weight = set_team_weight.weight WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team weight set',
                             jsonb_build_object('team', team, 'weight', weight, 'was', old));
    PERFORM gangsched._wake();
END $$;

-- Remove a team that has no subteams and no jobs at all: live ones must end first, and
-- finished ones stay (the history refers to the team) until
-- archive_history() has moved them. Its quotas and portal bindings go
-- with it; its events stay.
CREATE FUNCTION gangsched.remove_team(team text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid  int := gangsched._team_id(team);
    live bigint;
    hist bigint;
BEGIN
    PERFORM FROM gangsched.teams t WHERE t.id = tid FOR UPDATE;
    SELECT count(*) FILTER (WHERE g.state IN ('pending', 'nominated', 'placed', 'running', 'preempting')),
           count(*)
      INTO live, hist
      FROM gangsched.gangs g WHERE g.team_id = tid;
    IF live > 0 THEN
        RAISE EXCEPTION 'team "%" has % live jobs', team, live
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'A team is removed only when none of its jobs is pending, nominated, placed, running or preempting.',
                  HINT = format('Close it with gangsched.close_team(%L) so it takes no new work, cancel or wait for its jobs, then remove it.', team);
    END IF;
    IF hist > 0 THEN
        RAISE EXCEPTION 'team "%" still has % ended jobs in the history', team, hist
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'The allocation history and the analysts'' views name the team of every job they keep.',
                  HINT = 'Move them to the archive first with gangsched.archive_history(before); a closed team takes no new work meanwhile.';
    END IF;
    IF EXISTS (SELECT FROM gangsched.teams c WHERE c.parent_id = tid) THEN
        RAISE EXCEPTION 'team "%" has subteams', team
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('Its children are: %s.', (SELECT string_agg(c.name, ', ' ORDER BY c.name)
                                                             FROM gangsched.teams c WHERE c.parent_id = tid)),
                  HINT = 'Remove its subteams first, or move them with gangsched.set_team_parent(team, parent) '
                         '(parent NULL: to the top level).';
    END IF;
    IF EXISTS (SELECT FROM gangsched.bookings b WHERE b.team_id = tid) THEN
        RAISE EXCEPTION 'team "%" has reservations', team
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('Its reservations are: %s.', (SELECT string_agg(b.name, ', ' ORDER BY b.name)
                                                                FROM gangsched.bookings b WHERE b.team_id = tid)),
                  HINT = 'Drop them first with gangsched.drop_reservation(name) (an ended one is removed, one in progress ends).';
    END IF;
    DELETE FROM gangsched.quotas q WHERE q.team_id = tid;
    DELETE FROM gangsched.team_pending c WHERE c.team_id = tid;
    DELETE FROM gangsched.teams t WHERE t.id = tid;     -- members go by ON DELETE CASCADE
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team removed', jsonb_build_object('team', team));
END $$;

-- Remove a team's quota in a pool. Its jobs running there keep running;
-- from the next round they count as borrowed (beyond a nominal quota of 0)
-- and may be reclaimed like any borrowed work.
CREATE FUNCTION gangsched.remove_quota(team text, pool text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
    pid int := gangsched._pool_id(pool);
BEGIN
    DELETE FROM gangsched.quotas q WHERE q.team_id = tid AND q.pool_id = pid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'team "%" has no quota in pool "%"', team, pool
            USING ERRCODE = 'no_data_found',
                  HINT = 'See gangsched.team_shares for the quotas that exist.';
    END IF;
    PERFORM gangsched._event('quota', NULL, NULL, tid, 'quota removed', jsonb_build_object('team', team, 'pool', pool));
    PERFORM gangsched._wake();
END $$;

-- Close a team to new work; reason (optional) is shown to its portal.
CREATE FUNCTION gangsched.close_team(team text, reason text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    PERFORM gangsched._check_text(reason, 'reason', 1024);
    UPDATE gangsched.teams t SET closed_at = COALESCE(t.closed_at, gangsched.now()), closed_reason = close_team.reason
     WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team closed',
                             jsonb_build_object('team', team, 'reason', reason));
END $$;

CREATE FUNCTION gangsched.open_team(team text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    UPDATE gangsched.teams t SET closed_at = NULL, closed_reason = NULL WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team opened', jsonb_build_object('team', team));
    PERFORM gangsched._wake();
END $$;
