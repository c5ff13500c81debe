-- Guaranteed before borrowing: a job within its team's nominal quota is
-- tried before any borrowing job, even one that is older and whose team
-- holds a lower dominant share. With preemption off only the order shows;
-- with preemption on the guaranteed job reclaims the borrowed capacity
-- (victim preempting, preemptor nominated, placed once the victim let go).
-- Preemption's own rules are tested in 4*_preempt_*; this stays light.
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET gangsched.clock_override = '2030-01-01 00:00:00+00';
-- agents confirm nothing here; placed jobs must not be requeued meanwhile
SET gangsched.start_timeout = '1d';
SET gangsched.preemption = off;

-- A round's summary without its duration.
CREATE FUNCTION pg_temp.round() RETURNS TABLE (considered int, placed int, preempted int, note text)
LANGUAGE sql AS $$ SELECT r.considered, r.placed, r.preempted, r.note FROM gangsched.run_round() r $$;

-- 8 GPUs (2 nodes x 4). alpha: nominal 2; beta: nominal 6. beta submits 5
-- one-GPU jobs (b1..b5), alpha 3 (a1..a3): beta's 5 and alpha's a1, a2 are
-- guaranteed, a3 borrows the 8th GPU (nobody's quota is protected: every
-- idle quota is lendable).
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('p', 'reserved');
SELECT count(gangsched.add_node('g' || i, 'p', 'r1', 64, 512, 100, 4, 'a100', 80)) FROM generate_series(1, 2) i;
SELECT gangsched.add_team('alpha');
SELECT gangsched.add_team('beta');
SELECT gangsched.set_quota('alpha', 'p', 2);
SELECT gangsched.set_quota('beta', 'p', 6);
SELECT count(gangsched.submit('beta', 1, 1, name => 'b' || i)) FROM generate_series(1, 5) i;
SELECT count(gangsched.submit('alpha', 1, 1, name => 'a' || i)) FROM generate_series(1, 3) i;
SELECT * FROM pg_temp.round();
SELECT job, name, team, state, borrowed FROM gangsched.jobs ORDER BY job;
-- alpha holds 3 of 8 GPUs (0.375), 1 of them borrowed; beta 5 (0.625)
-- within its quota of 6, which lends its idle 1 to alpha.
SELECT team, nominal_gpus, used_gpus, borrowed_gpus, lent_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;

-- Now alpha submits a4 (older), then beta b6. a4 would borrow (alpha is
-- beyond its nominal 2); b6 fits beta's quota (5 + 1 <= 6). b6 is tried
-- first, although a4 is older and alpha's dominant share is lower.
SELECT gangsched.submit('alpha', 1, 1, name => 'a4');
SELECT gangsched.submit('beta', 1, 1, name => 'b6');
SELECT position, name, team, dominant_share, would_borrow, fits_now FROM gangsched.queue ORDER BY position;
-- Neither fits the full cluster. b6 is first in line; no team with a lower
-- share went before it in its phase (alpha has no guaranteed work), so no
-- fair-share reason.
SELECT * FROM gangsched.why_pending(10);
SELECT * FROM gangsched.why_pending(9);
SELECT * FROM pg_temp.round();
SELECT name, state, borrowed FROM gangsched.jobs WHERE name IN ('a3', 'a4', 'b6') ORDER BY job;
SELECT * FROM gangsched.check_invariants();

-- With preemption on (an hour later: the running jobs are past
-- gangsched.min_runtime), b6 reclaims: the borrowed a3 is its victim and
-- goes to preempting with a grace deadline; b6 is nominated, the capacity
-- held for it. a4 still waits.
SET gangsched.clock_override = '2030-01-01 01:00:00+00';
SET gangsched.preemption = on;
SELECT position, name, team, would_borrow, reason FROM gangsched.queue ORDER BY position;
SELECT * FROM pg_temp.round();
SELECT j.name, j.state, j.borrowed, j.preempt_deadline, v.name AS preempted_for
  FROM gangsched.jobs j JOIN gangsched.gangs g ON g.id = j.job LEFT JOIN gangsched.gangs v ON v.id = g.preempted_for
 WHERE j.state NOT IN ('placed') ORDER BY j.job;
-- guaranteed work was never a victim
SELECT name FROM gangsched.jobs WHERE state = 'preempting' AND NOT borrowed;
SELECT * FROM gangsched.why_pending(10);
SELECT * FROM gangsched.check_invariants();

-- The victim lets go: b6 is placed at once on the capacity held for it,
-- within beta's quota; a3 is back in the queue (ahead of a4: older).
SELECT gangsched.job_released(8);
SELECT name, state, borrowed FROM gangsched.jobs WHERE name IN ('a3', 'a4', 'b6') ORDER BY job;
SELECT team, used_gpus, borrowed_gpus, dominant_share FROM gangsched.team_shares ORDER BY team;
SELECT position, name, would_borrow, fits_now FROM gangsched.queue ORDER BY position;
SELECT * FROM gangsched.check_invariants();

DROP EXTENSION gangsched;
