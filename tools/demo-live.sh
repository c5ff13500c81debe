#!/usr/bin/env bash
# tools/demo-live.sh — the live part of the demonstration, run by
# `bash tools/gs demo` after tools/demo.sql, as the postgres user, against
# the throwaway cluster (PGHOST/PGPORT/PGUSER/PGDATABASE set by tools/gs).
#
# Nobody calls run_round() here: the background worker runs the rounds, woken
# by each commit. Three nodes get a real gangsched-agent each; jobs run
# tools/agent/trainer.sh, a stand-in trainer that checkpoints on SIGTERM and
# resumes from its checkpoint. Team "research" borrows the whole cluster;
# team "prod" submits within its quota; research is preempted, checkpoints
# and is released, prod starts at once, and research later resumes from its
# checkpoint. Then an elastic prod job starts on 2 of its 4 replicas, grows to
# 4 when capacity frees and shrinks back to 2 for a higher-priority job; each
# time the agent restarts its workers at the new world size and they resume
# from their checkpoint.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=${GS_LIVE_WORK:-$PGHOST/live}
AGENT=$(command -v gangsched-agent || echo "$(pg_config --bindir 2>/dev/null)/gangsched-agent")
[ -x "$AGENT" ] || AGENT=/usr/lib/postgresql/15/bin/gangsched-agent
TRAINER="$WORK/trainer.sh"
pids=()

say() { printf '\n\033[1m-- %s\033[0m\n' "$*"; }
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# Wait until a query returns t (at most $2 seconds).
wait_for() {
  local sql=$1 limit=${2:-30} i
  for ((i = 0; i < limit * 10; i++)); do
    [ "$(psql -X -At -c "$sql")" = t ] && return 0
    sleep 0.1
  done
  echo "(still waiting after ${limit}s for: $sql)"
  return 1
}

rm -rf "$WORK" && mkdir -p "$WORK"
cp "$SRC/tools/agent/trainer.sh" "$TRAINER"

say "live: a fresh inventory of three 8-GPU nodes, each with a real node agent"
q <<'SQL'
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS gangsched CASCADE;
CREATE EXTENSION gangsched CASCADE;
-- quick preemption for the demonstration (reloaded by the worker)
ALTER SYSTEM SET gangsched.min_runtime = '2s';
ALTER SYSTEM SET gangsched.default_grace = '20s';
ALTER SYSTEM SET gangsched.round_interval = '500ms';
SELECT pg_reload_conf();
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('node' || i, 'main', 'rack1', 32, 256, 100, 8, 'a100', 80) FROM generate_series(1, 3) i;
SELECT gangsched.add_team('prod');
SELECT gangsched.add_team('research');
SELECT gangsched.set_quota('prod', 'main', 16);
SELECT gangsched.set_quota('research', 'main', 8);
SQL
for n in node1 node2 node3; do
  # one checkpoint directory for all (shared storage, as a real cluster has)
  "$AGENT" --node "$n" --workdir "$WORK/ckpt" --heartbeat 1 >> "$WORK/agent-$n.log" 2>&1 &
  pids+=($!)
done
sleep 1
echo "agents: $(ls "$WORK"/agent-*.log | xargs -n1 basename | tr '\n' ' ')(logs in $WORK)"

say "research borrows the whole cluster: 3 workers x 8 GPUs (its quota is 8)"
q -c "SELECT gangsched.submit('research', 3, 8, cpus => 8, name => 'research-llm', grace => '20 seconds',
        command => 'exec sh $TRAINER 400 0.1') AS job"
wait_for "SELECT state = 'running' FROM gangsched.jobs WHERE name = 'research-llm'" 20 || true
q -c "SELECT job, name, team, state, borrowed FROM gangsched.jobs ORDER BY job"
sleep 3

say "prod submits 2 workers x 8 GPUs, within its quota: the worker's round reclaims"
q -c "SELECT gangsched.submit('prod', 2, 8, cpus => 8, name => 'prod-finetune', command => 'exec sh $TRAINER 30 0.1') AS job"
wait_for "SELECT state IN ('nominated', 'placed', 'running') FROM gangsched.jobs WHERE name = 'prod-finetune'" 10 || true
q -c "SELECT job, name, state, preempt_deadline IS NOT NULL AS has_deadline, reason FROM gangsched.jobs ORDER BY job"
q -c "SELECT * FROM gangsched.why_pending((SELECT job FROM gangsched.jobs WHERE name = 'research-llm'))"
wait_for "SELECT state = 'running' FROM gangsched.jobs WHERE name = 'prod-finetune'" 30 || true

say "what happened, from the events log (no one called run_round)"
q <<'SQL'
SELECT to_char(e.at, 'HH24:MI:SS.MS') AS at, e.kind, j.name, e.reason
  FROM gangsched.events e JOIN gangsched.jobs j ON j.job = e.job
 WHERE e.kind IN ('placed', 'nominated', 'preempting', 'requeued', 'running')
 ORDER BY e.id;
SELECT round(extract(epoch FROM (SELECT min(at) FROM gangsched.events e JOIN gangsched.jobs j ON j.job = e.job
                                   WHERE j.name = 'prod-finetune' AND e.kind = 'placed')
                           - (SELECT max(at) FROM gangsched.events e JOIN gangsched.jobs j ON j.job = e.job
                               WHERE j.name = 'research-llm' AND e.kind = 'requeued')) * 1000) AS ms_from_release_to_start;
SQL

say "prod finishes; research is placed again and resumes from its checkpoint"
wait_for "SELECT state = 'finished' FROM gangsched.jobs WHERE name = 'prod-finetune'" 30 || true
wait_for "SELECT state = 'running' FROM gangsched.jobs WHERE name = 'research-llm'" 20 || true
sleep 1
q -c "SELECT job, name, state, preemptions, lost_gpu_seconds FROM gangsched.jobs ORDER BY job"
rjob=$(psql -X -At -c "SELECT job FROM gangsched.jobs WHERE name = 'research-llm'")
grep -h "job=$rjob rank=0" "$WORK/ckpt/$rjob/trainer.log" 2>/dev/null | grep -E "start|checkpoint" | sed 's/^/  trainer: /' || true

say "an elastic prod job: 4 workers x 4 GPUs that can run on 2 or more (min_replicas => 2)"
q -c "SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE name = 'research-llm'" >/dev/null
# capacity held with no process: research within its quota, a prod batch job
q -c "SELECT gangsched.submit('research', 1, 8, cpus => 8, name => 'research-eval')" >/dev/null
q -c "SELECT gangsched.submit('prod', 1, 8, cpus => 8, name => 'prod-batch')" >/dev/null
wait_for "SELECT count(*) = 2 FROM gangsched.jobs WHERE name IN ('research-eval', 'prod-batch') AND state = 'running'" 20 || true
q -c "SELECT gangsched.submit('prod', 4, 4, cpus => 4, name => 'prod-elastic', min_replicas => 2,
        command => 'exec sh $TRAINER 100000 0.1') AS job"
ejob=$(psql -X -At -c "SELECT job FROM gangsched.jobs WHERE name = 'prod-elastic'")
elog="$WORK/ckpt/$ejob/trainer.log"
# Wait until the trainer log has at least $1 lines matching $2 (at most $3 seconds).
wait_log() {
  local n=$1 re=$2 limit=${3:-20} i
  for ((i = 0; i < limit * 10; i++)); do
    [ "$(grep -cE "$re" "$elog" 2>/dev/null || true)" -ge "$n" ] && return 0
    sleep 0.1
  done
  echo "(still waiting after ${limit}s for $n trainer lines like: $re)"
  return 1
}
trainer_lines() { grep -hE " (start|checkpoint) " "$elog" 2>/dev/null | tail -n "$1" | cut -d" " -f1,3,4,6- | sed 's/^/  trainer: /' || true; }
wait_log 2 " start step=[0-9]+ world=2 " 20 || true
q -c "SELECT job, name, state, workers, replicas, min_replicas, max_replicas FROM gangsched.jobs WHERE job = $ejob"
trainer_lines 2
sleep 2

say "prod-batch ends: the round grows prod-elastic to 4 replicas; the agent restarts its workers at world size 4, from their checkpoint"
q -c "SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE name = 'prod-batch'" >/dev/null
wait_log 4 " start step=[0-9]+ world=4 " 30 || true
q -c "SELECT job, name, state, workers, replicas FROM gangsched.jobs WHERE job = $ejob"
trainer_lines 6
sleep 2

say "prod-urgent (priority 10) needs 8 GPUs: the round shrinks prod-elastic back to 2 replicas instead of preempting it whole"
q -c "SELECT gangsched.submit('prod', 2, 4, cpus => 4, name => 'prod-urgent', priority => 10,
        command => 'exec sh $TRAINER 20 0.1') AS job"
wait_for "SELECT state IN ('running', 'finished') FROM gangsched.jobs WHERE name = 'prod-urgent'" 30 || true
wait_log 4 " start step=[0-9]+ world=2 " 30 || true
q -c "SELECT job, name, state, workers, replicas, preemptions FROM gangsched.jobs WHERE job = $ejob"
trainer_lines 6
q <<SQL
SELECT to_char(e.at, 'HH24:MI:SS.MS') AS at, e.kind, e.reason
  FROM gangsched.events e
 WHERE e.job = $ejob
 ORDER BY e.id;
SQL

say "check_invariants() (no rows when healthy)"
q -c "SELECT * FROM gangsched.check_invariants()"
q -c "SELECT gangsched.cancel(job) FROM gangsched.jobs WHERE state NOT IN ('finished', 'failed', 'cancelled', 'expired')" >/dev/null
sleep 1
