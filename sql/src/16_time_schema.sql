/* ------------------------------------------------------------------ */
/* Time limits: the jobs' column (docs/time.md; the rest in 72_time.sql) */
/* ------------------------------------------------------------------ */

-- A job's time limit: how long it may hold its capacity, counted from its
-- placement (placed_at). NULL: no limit. submit() stores the limit in
-- force (its own, else its team's default, else gangsched.default_time_limit),
-- so a later change of a default does not move a submitted job's limit.
ALTER TABLE gangsched.gangs ADD COLUMN time_limit interval
    CHECK (time_limit > '0'::interval AND time_limit <= '100 years'::interval);
-- the round's time rule reads the jobs that hold capacity under a limit
CREATE INDEX gangs_time_limit_idx ON gangsched.gangs (placed_at)
    WHERE state IN ('placed', 'running') AND time_limit IS NOT NULL;

