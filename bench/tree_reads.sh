#!/usr/bin/env bash
# bench/tree_reads.sh — what the team-tree columns and roll-ups cost the
# reads (issue 15): team_shares (with fair_share, one row per team including
# inner teams), the queue view, usage() by team and by subtree, queue_waits()
# by subtree, submit() by a portal bound to an inner team, on the benchmark's
# state with the same 100 leaf teams twice: flat, then wrapped in a 3-level
# tree (4 top-level teams, 20 in the middle, the 100 leaves under them).
#
# State: bench/cluster.sql (2,048 nodes × 8 GPUs, TEAMS leaf teams, each an
# equal quota), bench/jobs.sql (20,000 pending jobs), one round, the placed
# jobs started. Then for each entry, REPS timed runs in one session after a
# warm-up; one JSON line per entry and shape: median and min in ms.
#
# Runs against the server named by PGHOST/PGPORT/PGUSER (superuser; the
# extension installed); creates database gst<pid> and drops it at exit.
# Usage: bash bench/tree_reads.sh [--nodes N] [--pending N] [--teams N] [--reps N]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
NODES=2048 PENDING=20000 REPS=7 TEAMS=100 SEED=0.42
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --pending) PENDING=$2; shift 2 ;;
    --teams) TEAMS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    *) sed -n '2,17p' "$0" >&2; exit 2 ;;
  esac
done
DB=gst$$
MAINT_DB=${BENCH_MAINTENANCE_DB:-postgres}
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
log() { echo "bench/tree_reads: $*" >&2; }
stats() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "0 0"; exit }
                               m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f\n", m, v[1] }'; }
cleanup() {
  psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS $DB" -c "DROP ROLE IF EXISTS bench_tree_portal" >/dev/null 2>&1 || true
}
trap cleanup EXIT

log "state: $NODES nodes, $TEAMS leaf teams, $PENDING pending jobs (database $DB)"
psql_ -d "$MAINT_DB" -c "CREATE DATABASE $DB" >/dev/null
psql_ -d "$DB" -c "CREATE EXTENSION gangsched CASCADE" >/dev/null
psql_ -d "$DB" -v nodes="$NODES" -v gpn=8 -v rack_nodes=8 -v spine_racks=16 -v zone_spines=4 \
      -v frac_every=8 -v teams="$TEAMS" -f "$HERE/cluster.sql" >/dev/null
psql_ -d "$DB" -c "VACUUM ANALYZE" >/dev/null
psql_ -d "$DB" -v seed="$SEED" -v first=1 -v last="$PENDING" -v teams="$TEAMS" -v time_limits=0 -f "$HERE/jobs.sql" >/dev/null
psql_ -d "$DB" -At -c "SELECT considered, placed, ms FROM gangsched.run_round()" | sed 's/^/bench\/tree_reads: round considered|placed|ms: /' >&2
psql_ -d "$DB" -At -c "SELECT count(gangsched.job_started(job, node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) s" >/dev/null
psql_ -d "$DB" -c "VACUUM ANALYZE" >/dev/null
psql_ -d "$DB" >/dev/null <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_tree_portal') THEN CREATE ROLE bench_tree_portal; END IF;
END $$;
SQL
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

ENTRIES=$(cat <<'SQL'
team_shares|SELECT count(*) FROM gangsched.team_shares
team_shares_fair|SELECT count(*) FROM gangsched._fair_shares()
queue|SELECT count(*) FROM gangsched.queue
usage_team|SELECT count(*) FROM gangsched.usage(gangsched.now() - interval '1 day', gangsched.now() + interval '1 hour')
usage_subtree|SELECT count(*) FROM gangsched.usage(gangsched.now() - interval '1 day', gangsched.now() + interval '1 hour', by => 'subtree')
queue_waits_subtree|SELECT count(*) FROM gangsched.queue_waits(gangsched.now() - interval '1 day', gangsched.now() + interval '1 hour', by => 'subtree')
SQL
)

measure() {   # shape name setup stmt [awk filter of the Time: lines]
  local shape=$1 name=$2 setup=$3 stmt=$4 pick=${5:-1} script times s
  script="$setup"$'\n'"$stmt;"$'\n'"\\timing on"$'\n'
  for i in $(seq 1 "$REPS"); do script+="$stmt;"$'\n'; done
  times=$(psql_ -d "$DB" -At <<<"$script" 2>&1 | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | awk "$pick")
  s=$(stats <<<"$times")
  echo "{\"bench\":\"tree_reads\",\"shape\":\"$shape\",\"entry\":\"$name\",\"nodes\":$NODES,\"teams\":$TEAMS,\"pending\":$PENDING,\"reps\":$REPS,\"median_ms\":${s% *},\"min_ms\":${s#* },\"load\":\"$LOAD\"}"
}

run_all() {   # shape portal_team leaf_team
  local shape=$1 pteam=$2 leaf=$3
  while IFS='|' read -r name stmt; do
    measure "$shape" "$name" "SELECT 1;" "$stmt"
  done <<<"$ENTRIES"
  psql_ -d "$DB" -c "SELECT gangsched.add_member('bench_tree_portal', '$pteam')" >/dev/null
  # a submit as the portal, rolled back each time (the queue stays as it is)
  measure "$shape" submit_portal "SET ROLE bench_tree_portal;" \
    "BEGIN; SELECT gangsched.submit('$leaf', 1, 1); ROLLBACK" 'NR % 3 == 2'
  psql_ -d "$DB" -c "SELECT gangsched.remove_member('bench_tree_portal', '$pteam')" >/dev/null
}

run_all flat team7 team7
# the same leaves in a 3-level tree: top1..top4 > mid1..mid20 > team1..teamN
psql_ -d "$DB" >/dev/null <<SQL
SELECT count(gangsched.add_team('top' || i)) FROM generate_series(1, 4) i;
SELECT count(gangsched.add_team('mid' || i, 1, 'top' || ((i - 1) % 4 + 1))) FROM generate_series(1, 20) i;
SELECT count(gangsched.set_team_parent('team' || i, 'mid' || ((i - 1) % 20 + 1))) FROM generate_series(1, $TEAMS) i;
SQL
run_all tree top3 team7
