-- Team administration (issue 15): set_team_weight, close_team / open_team,
-- remove_quota, remove_team, each with its errors, events and effect on
-- rounds and shares; the same calls refused to a portal. Virtual time; ends
-- with check_invariants() empty.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET gangsched.start_timeout = '1d';
SET gangsched.min_runtime = '10min';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';

-- 2 nodes of 8 GPUs; a and b share them equally.
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT count(gangsched.add_node('n' || i, 'main', 'r1', 32, 256, 100, 8, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('a'), gangsched.add_team('b');
SELECT gangsched.set_quota('a', 'main', 8), gangsched.set_quota('b', 'main', 8);

-- set_team_weight: the next round's order follows the new weight.
SELECT gangsched.set_team_weight('a', 3);
SELECT team, weight FROM gangsched.team_shares ORDER BY team;
SELECT reason, detail->>'weight' AS weight, detail->>'was' AS was
  FROM gangsched.events WHERE kind = 'team' AND reason = 'team weight set';
-- bad weights keep add_team's rule and errcodes; an unknown team is named
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT gangsched.set_team_weight('a', 0);
SELECT gangsched.set_team_weight('a', 'NaN');
SELECT gangsched.set_team_weight('a', 10000000);
SELECT gangsched.set_team_weight('nobody', 1);
SELECT team, weight FROM gangsched.team_shares WHERE team = 'a';
-- each team's nominal quota comes first: 8 and 8, whatever the weights
SELECT count(gangsched.submit('a', 1, 1, name => 'a' || i)) FROM generate_series(1, 10) i;
SELECT count(gangsched.submit('b', 1, 1, name => 'b' || i)) FROM generate_series(1, 10) i;
SELECT placed FROM gangsched.run_round();
SELECT team, count(*) FILTER (WHERE state = 'placed') AS placed, count(*) FILTER (WHERE state = 'pending') AS pending
  FROM gangsched.jobs GROUP BY team ORDER BY team;
SELECT count(gangsched.job_started(p.job, p.node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) p;

-- close_team: b's new submits are refused with 55000 and a hint; its
-- queued jobs stay queued, are not placed, and say why; running ones run on.
SELECT gangsched.close_team('b', 'moving to the new cluster');
SELECT gangsched.submit('b', 1, 1, name => 'b-late');
SELECT count(*) AS b_jobs FROM gangsched.jobs WHERE team = 'b';
-- a's jobs finish: 8 GPUs free up; b's queued jobs may not take them
SELECT count(gangsched.job_finished(j.job, true)) FROM gangsched.jobs j WHERE j.team = 'a' AND j.state = 'running';
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SELECT placed, preempted FROM gangsched.run_round();
SELECT team, state, count(*) FROM gangsched.jobs WHERE state NOT IN ('finished') GROUP BY team, state ORDER BY team, state;
SELECT DISTINCT q.team, q.reason FROM gangsched.queue q WHERE q.team = 'b';
SELECT w.reason, w.detail FROM gangsched.why_pending((SELECT min(job) FROM gangsched.jobs WHERE team = 'b' AND state = 'pending')) w;
-- closing twice keeps the first time; the events log has both calls
SELECT gangsched.close_team('b');
SELECT closed_at, closed_reason FROM gangsched.teams WHERE name = 'b';
SELECT reason, detail->>'reason' AS why FROM gangsched.events WHERE kind = 'team' AND reason = 'team closed' ORDER BY id;
-- open_team: b's queued jobs run at the next round, new submits are accepted
SELECT gangsched.open_team('b');
SELECT placed FROM gangsched.run_round();
SELECT team, state, count(*) FROM gangsched.jobs WHERE state NOT IN ('finished') GROUP BY team, state ORDER BY team, state;
SELECT gangsched.submit('b', 1, 1, name => 'b-after') > 0 AS accepted;

-- remove_quota: a's quota goes; its running jobs keep running and count as
-- borrowed from the next round on; a second removal is refused (no quota).
SELECT count(gangsched.submit('a', 1, 1, name => 'a-q' || i)) FROM generate_series(1, 2) i;
SELECT gangsched.remove_quota('a', 'main');
SELECT gangsched.remove_quota('a', 'main');
SELECT gangsched.remove_quota('a', 'nopool');
SELECT team, pool, nominal_gpus FROM gangsched.team_shares ORDER BY team;
SELECT reason FROM gangsched.events WHERE kind = 'quota' AND reason = 'quota removed';

-- remove_team: refused while the team has live jobs, then while its
-- history remains; a team with no jobs at all goes with its quotas.
SELECT gangsched.remove_team('b');
SELECT gangsched.add_team('c', 2);
SELECT gangsched.set_quota('c', 'main', 0);
SELECT gangsched.remove_team('c');
SELECT count(*) AS c_rows FROM gangsched.teams WHERE name = 'c';
SELECT count(*) AS c_quotas FROM gangsched.quotas q WHERE NOT EXISTS (SELECT FROM gangsched.teams t WHERE t.id = q.team_id);
SELECT reason, detail->>'team' AS team FROM gangsched.events WHERE kind = 'team' AND reason = 'team removed';
SELECT gangsched.remove_team('c');
-- b's live jobs end (cancelled): its finished history still holds it
SELECT count(gangsched.cancel(j.job)) FROM gangsched.jobs j WHERE j.team = 'b' AND j.state IN ('pending', 'placed', 'running');
SELECT gangsched.remove_team('b');

-- a closed team's queued work does not preempt either: a borrows the whole
-- cluster, then e (8 GPUs of nominal quota) queues 8 jobs while closed
SELECT count(gangsched.submit('a', 1, 1, name => 'a-more' || i)) FROM generate_series(1, 12) i;
SELECT placed FROM gangsched.run_round();
SELECT count(gangsched.job_started(p.job, p.node)) FROM (SELECT DISTINCT pl.job, pl.node FROM gangsched.placements pl JOIN gangsched.jobs j ON j.job = pl.job WHERE j.state = 'placed') p;
SELECT gangsched.add_team('e');
SELECT gangsched.set_quota('e', 'main', 8);
SELECT gangsched.close_team('e');
SELECT gangsched.submit('e', 1, 1, name => 'e-closed');
SELECT gangsched.open_team('e');
SELECT count(gangsched.submit('e', 1, 1, name => 'e' || i)) FROM generate_series(1, 8) i;
SELECT gangsched.close_team('e', 'audit');
SET gangsched.clock_override = '2030-01-01 03:00:00+00';
SELECT placed, preempted FROM gangsched.run_round();
SELECT count(*) FILTER (WHERE state = 'preempting') AS a_preempting FROM gangsched.jobs WHERE team = 'a';
-- reopened, e reclaims its quota from a's borrowed work at the next round
SELECT gangsched.open_team('e');
SELECT placed, preempted FROM gangsched.run_round();
SELECT count(*) FILTER (WHERE state = 'preempting') AS a_preempting FROM gangsched.jobs WHERE team = 'a';

-- a portal may call none of these
CREATE ROLE gs37_portal LOGIN;
GRANT gangsched_portal TO gs37_portal;
SELECT gangsched.add_member('gs37_portal', 'a');
SET ROLE gs37_portal;
SELECT gangsched.close_team('b');
SELECT gangsched.set_team_weight('a', 100);
SELECT gangsched.remove_quota('b', 'main');
SELECT gangsched.remove_team('a');
RESET ROLE;
DROP OWNED BY gs37_portal;
DROP ROLE gs37_portal;

SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched CASCADE;
