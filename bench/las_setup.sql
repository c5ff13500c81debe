-- bench/las.sh: teams created after this (by bench/cluster.sql) order their
-- jobs by least attained service (gangsched.team_order = 'las' for each of
-- them; a database setting would not survive the template copies run.sh makes).
ALTER TABLE gangsched.teams ALTER COLUMN team_order SET DEFAULT 'las';
