/* ------------------------------------------------------------------ */
/* The order within a team: fifo or least attained service (las)      */
/* ------------------------------------------------------------------ */

-- A team's own order of its pending jobs; NULL follows the setting
-- gangsched.team_order. las: priority, then the LAS queue its attained
-- service (GPU-seconds held so far) falls in, then submit order; a pending
-- job may preempt its team's jobs of the same priority in later queues
-- (docs/fairness.md). The order across teams is not affected.
ALTER TABLE gangsched.teams
    ADD COLUMN team_order text CHECK (team_order IN ('fifo', 'las'));

-- Operator: set a team's order; NULL returns it to gangsched.team_order.
CREATE FUNCTION gangsched.set_team_order(team text, team_order text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tid int := gangsched._team_id(team);
BEGIN
    IF team_order IS NOT NULL AND team_order NOT IN ('fifo', 'las') THEN
        RAISE EXCEPTION 'invalid team order "%"', team_order
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A team orders its jobs by priority, then submit order (fifo), or by priority, then least attained service, then submit order (las).',
                  HINT = 'Use ''fifo'', ''las'', or NULL for the setting gangsched.team_order.';
    END IF;
    UPDATE gangsched.teams t SET team_order = set_team_order.team_order WHERE t.id = tid;
    PERFORM gangsched._event('team', NULL, NULL, tid, 'team order set',
                             jsonb_build_object('team', team, 'team_order', team_order));
END $$;
