-- Team trees, the administration and SQL side (issue 15): add_team with a
-- parent, set_team_parent and its refusals (cycle, a parent with jobs, a
-- subtree whose quotas do not fit), remove_team with children, submit to an
-- inner team, the quota carve-out rule, the queue and team_shares views and
-- the analyst roll-ups over a 3-level tree, and portal / analyst roles
-- (non-superusers) in a tree. Virtual time; ends with check_invariants()
-- empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
\set VERBOSITY default
-- no CONTEXT lines: they name function signatures and line numbers that
-- change with unrelated work
\set SHOW_CONTEXT never

-- 4 nodes of 8 GPUs (32 GPUs, 128 CPUs, 1 TB, 400 Gbit/s).
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 4) i;

-- A 3-level tree: org > research > {vision, language}, org > infra;
-- prod at the top. add_team returns the id; the parent is named.
SELECT gangsched.add_team('org', 1) > 0 AS org, gangsched.add_team('prod', 1) > 0 AS prod;
SELECT gangsched.add_team('research', 3, 'org') > 0 AS research, gangsched.add_team('infra', 1, parent => 'org') > 0 AS infra;
SELECT gangsched.add_team('vision', 1, 'research') > 0 AS vision, gangsched.add_team('language', 2, 'research') > 0 AS language;
SELECT name, parent, path, depth, leaf FROM gangsched._team_tree ORDER BY path;
SELECT detail FROM gangsched.events WHERE kind = 'team' AND reason = 'team added' ORDER BY id;
-- an unknown parent; a name taken; a weight out of range: nothing is added
SELECT gangsched.add_team('x', 1, 'nobody');
SELECT gangsched.add_team('vision', 1, 'org');
SELECT gangsched.add_team('x', 0, 'org');
SELECT count(*) AS teams FROM gangsched.teams;

-- The carve-out rule: org 24 GPUs; research 16 and infra 8 fit in it,
-- research's children 8 + 8 in research's 16.
SELECT gangsched.set_quota('org', 'main', 24);
SELECT gangsched.set_quota('research', 'main', 16), gangsched.set_quota('infra', 'main', 8);
SELECT gangsched.set_quota('vision', 'main', 8), gangsched.set_quota('language', 'main', 8);
-- a child above what is left of its parent's, and a parent lowered below
-- its children's sum, are refused (22023), naming the pool and amounts
SELECT gangsched.set_quota('language', 'main', 9);
SELECT gangsched.set_quota('research', 'main', 15);
SELECT gangsched.set_quota('org', 'main', 23);
-- CPUs too, where the parent's quota governs them (org: 24 x 32 / 8 = 96)
SELECT gangsched.set_quota('infra', 'main', 8, cpus => 80);
SELECT team, nominal_gpus, nominal_cpus FROM gangsched.team_shares ORDER BY team;
-- a grandchild under a child without a quota in the pool is carved out of
-- the nearest quota above it: prod gets a child p1 and p2 under p1
SELECT gangsched.add_team('p1', 1, 'prod') > 0 AS p1, gangsched.add_team('p2', 1, 'p1') > 0 AS p2;
SELECT gangsched.set_quota('prod', 'main', 8);
SELECT gangsched.set_quota('p2', 'main', 9);
SELECT gangsched.set_quota('p2', 'main', 8);
-- raising it there is refused against prod, two levels up
SELECT gangsched.set_quota('p1', 'main', 9);
-- without a quota on the parent, the children's are not capped
SELECT gangsched.remove_quota('prod', 'main');
SELECT gangsched.set_quota('p2', 'main', 12);
SELECT gangsched.set_quota('p2', 'main', 0);

-- Jobs go to leaf teams: a submit to an inner team is refused (55S01)
-- naming its leaves; nothing is queued.
SELECT gangsched.submit('research', 1, 1);
SELECT gangsched.submit('org', 1, 1);
SELECT count(*) AS jobs FROM gangsched.gangs;
-- vision runs 2 x 4 GPUs; then language asks for 4 x 8 and prod's leaf p2
-- for 1 x 8 (both wait: no round runs meanwhile)
SELECT gangsched.submit('vision', 2, 4, name => 'v1') > 0 AS v1;
SELECT placed FROM gangsched.run_round();
SELECT count(gangsched.job_started(p.job, p.node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) p;
SELECT gangsched.submit('language', 4, 8, name => 'l1') > 0 AS l1;
SELECT gangsched.submit('p2', 1, 8, name => 'p') > 0 AS p;

-- A team with live jobs cannot become a parent (55006): not by add_team,
-- not by set_team_parent.
SELECT gangsched.add_team('v-sub', 1, 'vision');
SELECT gangsched.set_team_parent('infra', 'vision');
SELECT count(*) AS teams FROM gangsched.teams;

-- The views show the tree. queue: each waiting job's team path, depth and
-- parent (new columns at the end).
SELECT position, team, name, path, depth, parent FROM gangsched.queue ORDER BY position;
-- team_shares: one row per team and pool, inner teams too; an inner
-- team's use is its subtree's; fair_share is the hierarchical weighted DRF
-- split of use plus pending demand (as a share of the cluster). Top
-- level, weights 1:1: prod asks for 8 GPUs of 32 (0.25) and gets them, org
-- (40) the other 24 (0.75). Inside org: research (40) and infra (0) ->
-- research all 24; inside research vision (8, weight 1) and language (32,
-- weight 2) grow at 1:2 until the GPUs run out: 8 (0.25) and 16 (0.5).
SELECT path, depth, parent, weight, nominal_gpus, used_gpus, borrowed_gpus, lent_gpus, dominant_share, fair_share
  FROM gangsched.team_shares ORDER BY path;
-- the siblings' fair shares add up to their parent's
SELECT p.path, p.fair_share, sum(c.fair_share) AS children
  FROM gangsched.team_shares p JOIN gangsched.team_shares c ON c.parent = p.team
 GROUP BY p.path, p.fair_share ORDER BY p.path;

-- set_team_parent: refusals first. A team under itself or its own
-- subtree (22023); an unknown team or parent (23503).
SELECT gangsched.set_team_parent('research', 'research');
SELECT gangsched.set_team_parent('org', 'language');
SELECT gangsched.set_team_parent('research', 'nobody');
SELECT gangsched.set_team_parent('nobody', 'org');
-- a subtree whose quotas do not fit under the new parent's quota:
-- research (16) under prod (quota 4)
SELECT gangsched.set_quota('prod', 'main', 4);
SELECT gangsched.set_team_parent('research', 'prod');
SELECT path FROM gangsched._team_tree WHERE name = 'research';
SELECT gangsched.remove_quota('prod', 'main');
-- Moves: infra to the top level, then back under org; research under prod
-- (no quota there now) carries vision and language with it, jobs and all.
SELECT gangsched.set_team_parent('infra', NULL);
SELECT gangsched.set_team_parent('infra', 'org');
SELECT gangsched.set_team_parent('research', 'prod');
SELECT name, path, depth FROM gangsched._team_tree ORDER BY path;
SELECT detail->>'team' AS team, detail->>'parent' AS parent, detail->>'was' AS was
  FROM gangsched.events WHERE kind = 'team' AND reason = 'team parent set' ORDER BY id;
-- the same parent again changes nothing and logs nothing
SELECT gangsched.set_team_parent('research', 'prod');
SELECT count(*) FROM gangsched.events WHERE kind = 'team' AND reason = 'team parent set';
SELECT position, team, path, depth, parent FROM gangsched.queue ORDER BY position;
SELECT gangsched.set_team_parent('research', 'org');

-- remove_team is refused while the team has children (55006), after the
-- job checks; a childless, jobless leaf goes.
SELECT gangsched.remove_team('prod');
SELECT gangsched.remove_team('org');
SELECT gangsched.add_team('tmp', 1, 'infra') > 0 AS tmp;
SELECT gangsched.remove_team('infra');
SELECT gangsched.remove_team('tmp');
SELECT gangsched.submit('infra', 1, 1, name => 'infra-ok') > 0 AS infra_is_a_leaf_again;

-- The analyst functions roll up by subtree (by => 'subtree'); by 'team'
-- (the default) each team's own figures, as without trees. An hour later:
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT team, path, depth, gpu_hours, quota_gpus
  FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-01 01:00+00', '1 hour') ORDER BY path;
SELECT team, path, depth, gpu_hours, quota_gpus
  FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-01 01:00+00', '1 hour', by => 'subtree') ORDER BY path;
SELECT team, path, submitted, placed, still_waiting
  FROM gangsched.queue_waits('2030-01-01 00:00+00', '2030-01-01 01:00+00', by => 'subtree');
SELECT team, path, preemptions FROM gangsched.preemption_summary('2030-01-01 00:00+00', '2030-01-01 01:00+00', 'subtree');
SELECT count(*) FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-01 01:00+00', by => 'week');

-- Roles. A portal bound to research acts for every team of its subtree:
-- it submits to vision and language, sees their jobs and queue rows, not
-- prod's; it cannot submit to research itself (an inner team), nor to
-- prod's leaf. A portal bound to a leaf acts for that leaf only. An
-- analyst reads the roll-ups; a portal may not.
CREATE ROLE gs39_research;
CREATE ROLE gs39_vision;
CREATE ROLE gs39_analyst;
SELECT gangsched.add_member('gs39_research', 'research'), gangsched.add_member('gs39_vision', 'vision');
GRANT gangsched_analyst TO gs39_analyst;
SET ROLE gs39_research;
SELECT gangsched.submit('vision', 1, 1, name => 'by-research') > 0 AS vision_ok;
SELECT gangsched.submit('language', 1, 1, name => 'by-research') > 0 AS language_ok;
SELECT gangsched.submit('research', 1, 1);
SELECT gangsched.submit('p2', 1, 1);
SELECT DISTINCT team FROM gangsched.jobs ORDER BY team;
SELECT DISTINCT team, path FROM gangsched.queue ORDER BY team;
SELECT path, fair_share IS NOT NULL AS has_fair_share FROM gangsched.team_shares ORDER BY path;
SELECT count(*) FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-01 01:00+00', by => 'subtree');
RESET ROLE;
SET ROLE gs39_vision;
SELECT gangsched.submit('vision', 1, 1, name => 'by-vision') > 0 AS vision_ok;
SELECT gangsched.submit('language', 1, 1);
SELECT gangsched.cancel((SELECT min(job) FROM gangsched.jobs WHERE team = 'vision' AND name = 'by-research'));
SELECT DISTINCT team FROM gangsched.jobs ORDER BY team;
RESET ROLE;
SET ROLE gs39_analyst;
SELECT team, path, gpu_hours FROM gangsched.usage('2030-01-01 00:00+00', '2030-01-01 01:00+00', by => 'subtree')
 WHERE depth = 1 ORDER BY path;
SELECT gangsched.set_team_parent('infra', NULL);
RESET ROLE;

-- Invariant 9 sees a tree broken behind the API's back (as the owner):
-- a cycle, a live job in a team with subteams, and children's quotas above
-- their parent's; each put back at once.
UPDATE gangsched.teams SET parent_id = (SELECT id FROM gangsched.teams WHERE name = 'vision') WHERE name = 'org';
SELECT invariant, detail FROM gangsched.check_invariants() ORDER BY detail;
UPDATE gangsched.teams SET parent_id = NULL WHERE name = 'org';
UPDATE gangsched.gangs SET team_id = (SELECT id FROM gangsched.teams WHERE name = 'research')
 WHERE id = (SELECT min(job) FROM gangsched.jobs WHERE team = 'vision' AND state = 'pending');
SELECT invariant, job IS NOT NULL AS names_job, detail FROM gangsched.check_invariants();
UPDATE gangsched.gangs SET team_id = (SELECT id FROM gangsched.teams WHERE name = 'vision')
 WHERE team_id = (SELECT id FROM gangsched.teams WHERE name = 'research');
UPDATE gangsched.quotas SET gpus = 20 WHERE team_id = (SELECT id FROM gangsched.teams WHERE name = 'vision');
SELECT invariant, detail FROM gangsched.check_invariants();
UPDATE gangsched.quotas SET gpus = 8 WHERE team_id = (SELECT id FROM gangsched.teams WHERE name = 'vision');

-- Closing an inner team closes its subtree: dept > grp. A job queued in
-- grp before the close stays queued and is not placed (its reason names
-- dept); a new submit to grp is refused (55000, naming dept, with the
-- hint to reopen dept); open_team(dept) lets both through again.
SELECT gangsched.add_team('dept', 1) > 0 AS dept, gangsched.add_team('grp', 1, 'dept') > 0 AS grp;
SELECT gangsched.submit('grp', 1, 1, name => 'grp-before') > 0 AS queued;
SELECT gangsched.close_team('dept', 'moving to cluster B');
SELECT gangsched.submit('grp', 1, 1, name => 'grp-after');
DO $$ BEGIN PERFORM gangsched.submit('grp', 1, 1);
EXCEPTION WHEN object_not_in_prerequisite_state THEN RAISE NOTICE 'refused with SQLSTATE %', SQLSTATE; END $$;
SELECT count(*) AS placed_in_grp FROM gangsched.run_round() r, gangsched.jobs j
 WHERE j.team = 'grp' AND j.state IN ('placed', 'running');
SELECT name, state, reason FROM gangsched.jobs WHERE team = 'grp' ORDER BY job;
SELECT w.reason, w.detail FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'grp-before')) w
 WHERE w.reason = 'team closed';
SELECT gangsched.open_team('dept');
SELECT gangsched.submit('grp', 1, 1, name => 'grp-after') > 0 AS accepted;
SELECT considered > 0 AS tried FROM gangsched.run_round();
SELECT name, state, reason IS NULL OR reason NOT LIKE '%closed%' AS not_closed FROM gangsched.jobs WHERE team = 'grp' ORDER BY job;

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
DROP OWNED BY gs39_research, gs39_vision, gs39_analyst;
DROP ROLE gs39_research, gs39_vision, gs39_analyst;
