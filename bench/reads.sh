#!/usr/bin/env bash
# bench/reads.sh — what portals and analysts read, on the benchmark's state,
# with JIT at the server's settings and with JIT off (issue 11).
#
# State: bench/cluster.sql (2,048 nodes × 8 GPUs, 8 teams), bench/jobs.sql
# (20,000 pending jobs), one round (the cluster fills), the placed jobs
# started. Then, for each entry point (the views jobs, queue, placements,
# team_shares, allocation_history, event_log; why_pending; the analyst
# functions; the metrics view whole and two of the exporter's families,
# and invariant_violations(), contrib/prometheus/queries.yaml), REPS alternating pairs in one session: the statement with
# `SET jit = on` (jit_above_cost and the others at the server's values) and
# with `SET jit = off`. Prints one JSON line per entry: medians in ms, the
# ratio, and whether the plan of the outer statement used JIT (EXPLAIN
# ANALYZE, FORMAT JSON). Functions that carry `SET jit = off` themselves are
# expected to show no difference.
#
# Runs against the server named by PGHOST/PGPORT/PGUSER (superuser; the
# extension installed); creates database gsr<pid> and drops it at exit.
# Usage: bash bench/reads.sh [--nodes N] [--pending N] [--reps N] [--keep]
# (GS_EXT_TEMPLATE=DB clones DB, where the extension was created, instead.)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
NODES=2048 PENDING=20000 REPS=5 KEEP=0 TEAMS=8 SEED=0.42
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --pending) PENDING=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --quick) REPS=3; shift ;;
    --keep) KEEP=1; shift ;;
    *) sed -n '2,20p' "$0" >&2; exit 2 ;;
  esac
done
DB=gsr$$
MAINT_DB=${BENCH_MAINTENANCE_DB:-postgres}
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
log() { echo "bench/reads: $*" >&2; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
cleanup() {
  [ "$KEEP" = 1 ] || psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS $DB" -c "DROP ROLE IF EXISTS bench_reads_portal, bench_reads_analyst" >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "state: $NODES nodes, $PENDING pending jobs (database $DB)"
if [ -n "${GS_EXT_TEMPLATE:-}" ]; then
  # a database where CREATE EXTENSION gangsched CASCADE was done (useful when
  # the machine's one PostgreSQL install is shared and its extension files
  # may have changed since the server started)
  psql_ -d "$MAINT_DB" -c "CREATE DATABASE $DB TEMPLATE \"$GS_EXT_TEMPLATE\"" >/dev/null
else
  psql_ -d "$MAINT_DB" -c "CREATE DATABASE $DB" >/dev/null
  psql_ -d "$DB" -c "CREATE EXTENSION gangsched CASCADE" >/dev/null
fi
psql_ -d "$DB" -v nodes="$NODES" -v gpn=8 -v rack_nodes=8 -v spine_racks=16 -v zone_spines=4 \
      -v frac_every=8 -v teams="$TEAMS" -f "$HERE/cluster.sql" >/dev/null
psql_ -d "$DB" -c "VACUUM ANALYZE" >/dev/null
psql_ -d "$DB" -v seed="$SEED" -v first=1 -v last="$PENDING" -v teams="$TEAMS" -f "$HERE/jobs.sql" >/dev/null
psql_ -d "$DB" -c "SELECT considered, placed, ms FROM gangsched.run_round()" -At | sed 's/^/bench\/reads: round considered|placed|ms: /' >&2
psql_ -d "$DB" -At -c "SELECT count(gangsched.job_started(job, node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) s" >/dev/null
# the metrics' counts folded as the worker folds them after each round (this
# database is not the worker's; bench/run.sh --cases metrics also reads the
# view before the fold)
if [ "$(psql_ -d "$DB" -At -c "SELECT to_regprocedure('gangsched._metrics_fold()') IS NOT NULL")" = t ]; then
  psql_ -d "$DB" -c "SELECT gangsched._metrics_fold()" >/dev/null
fi
psql_ -d "$DB" -c "VACUUM ANALYZE" >/dev/null
JOB=$(psql_ -d "$DB" -At -c "SELECT job FROM gangsched.jobs WHERE state = 'pending' AND team = 'team3' ORDER BY job LIMIT 1")
# the tenants' view of the same (their views filter by role): a portal of
# team3 and an analyst, reached with SET ROLE
psql_ -d "$DB" >/dev/null <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_reads_portal') THEN CREATE ROLE bench_reads_portal; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_reads_analyst') THEN CREATE ROLE bench_reads_analyst IN ROLE gangsched_analyst; END IF;
END \$\$;
SELECT gangsched.add_member('bench_reads_portal', 'team3');
SQL
SETTINGS=$(psql_ -d "$DB" -At -c "SELECT string_agg(name || '=' || setting, ',' ORDER BY name) FROM pg_settings WHERE name IN ('jit', 'jit_above_cost', 'jit_inline_above_cost', 'jit_optimize_above_cost', 'fsync', 'work_mem')")

# name|statement
ENTRIES=$(cat <<SQL
jobs|portal|SELECT count(*) FROM gangsched.jobs
jobs_pending_team|portal|SELECT count(*) FROM gangsched.jobs WHERE state = 'pending' AND team = 'team3'
queue|portal|SELECT count(*) FROM gangsched.queue
placements|portal|SELECT count(*) FROM gangsched.placements
team_shares|portal|SELECT count(*) FROM gangsched.team_shares
why_pending|portal|SELECT count(*) FROM gangsched.why_pending($JOB)
allocation_history|analyst|SELECT count(*) FROM gangsched.allocation_history
event_log|analyst|SELECT count(*) FROM gangsched.event_log
usage|analyst|SELECT count(*) FROM gangsched.usage(gangsched.now() - interval '1 day', gangsched.now() + interval '1 hour')
utilization|analyst|SELECT count(*) FROM gangsched.utilization(gangsched.now() - interval '1 day', gangsched.now() + interval '1 hour')
snapshot|analyst|SELECT count(*) FROM gangsched.snapshot(gangsched.now())
queue_waits|analyst|SELECT count(*) FROM gangsched.queue_waits(gangsched.now() - interval '1 day', gangsched.now() + interval '1 hour')
preemption_summary|analyst|SELECT count(*) FROM gangsched.preemption_summary(gangsched.now() - interval '1 day', gangsched.now() + interval '1 hour')
queue_depth|analyst|SELECT count(*) FROM gangsched.queue_depth(gangsched.now() - interval '1 day', gangsched.now() + interval '1 hour')
metrics|analyst|SELECT count(*) FROM gangsched.metrics
metrics_pool|analyst|SELECT count(*) FROM gangsched.metrics WHERE name LIKE 'gangsched\\_pool\\_%'
metrics_team|analyst|SELECT count(*) FROM gangsched.metrics WHERE name LIKE 'gangsched\\_team\\_%'
metrics_invariants|analyst|SELECT count(*) FROM gangsched.invariant_violations()
SQL
)

measure() {   # name role set_role stmt
  local name=$1 role=$2 setrole=$3 stmt=$4
  # one session per entry: REPS pairs (on, off) after one warm-up pair
  script="$setrole"$'\n'"\\timing on"$'\n'
  for i in $(seq 0 "$REPS"); do
    script+="SET jit = on;"$'\n'"$stmt;"$'\n'"SET jit = off;"$'\n'"$stmt;"$'\n'
  done
  times=$(psql_ -d "$DB" -At <<<"$script" 2>&1 | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
  # every statement prints a Time: line; SETs too, so keep the odd ones of each four
  # Time: lines come SET, statement, SET, statement per pair; pair 1 is the warm-up
  on_med=$(awk 'NR > 4 && NR % 4 == 2' <<<"$times" | median)
  off_med=$(awk 'NR > 4 && NR % 4 == 0' <<<"$times" | median)
  jit=$(psql_ -d "$DB" -At -c "$setrole" -c "SET jit = on" -c "EXPLAIN (ANALYZE, FORMAT JSON) $stmt" | grep -c '"JIT"' || true)
  ratio=$(awk -v a="$on_med" -v b="$off_med" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
  echo "{\"bench\":\"reads\",\"entry\":\"$name\",\"as\":\"$role\",\"nodes\":$NODES,\"pending\":$PENDING,\"reps\":$REPS,\"jit_on_ms\":$on_med,\"jit_off_ms\":$off_med,\"on_over_off\":$ratio,\"outer_plan_jit\":$([ "$jit" -gt 0 ] && echo true || echo false),\"settings\":\"$SETTINGS\"}"
}

while IFS='|' read -r name who stmt; do
  measure "$name" superuser "SELECT 1;" "$stmt"
  measure "$name" "$who" "SET ROLE bench_reads_$who;" "$stmt"
done <<<"$ENTRIES"
psql_ -d "$DB" -c "SELECT gangsched.remove_member('bench_reads_portal', 'team3')" >/dev/null
