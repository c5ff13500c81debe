#!/usr/bin/env bash
# bench/tree_pools.sh — what the fair share of a team tree costs the reads
# with two pools and lending limits at several levels (issue 15: quotas and
# lending limits count per pool, src/fair.c gs_tree_fair_shares):
# `team_shares` and `_fair_shares()` alone.
#
# State: pools a and b of NODES nodes × 8 GPUs each; 4 top-level teams
# (nominal 2,000 GPUs in a, lending limit 1,000) > 20 (nominal 240 in b,
# lending limit 0) > 100 leaves (40 in a, every third with lending limit 0
# there, and 40 in b); PENDING 1-job submits of 1-8 GPUs (a third for a,
# a third for b, the rest for any pool) spread over the leaves, every
# seventh leaf left idle (so that some quota is kept back); one round, the
# placed jobs started. Then REPS timed runs of each read in one session
# after a warm-up; one JSON line each: median and min in ms, with the load.
#
# Runs against the server named by PGHOST/PGPORT/PGUSER (superuser; the
# extension installed); creates database gtp<pid> and drops it at exit.
# Usage: bash bench/tree_pools.sh [--nodes N] [--pending N] [--reps N]
set -euo pipefail

NODES=1024 PENDING=20000 REPS=15
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --pending) PENDING=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    *) sed -n '2,19p' "$0" >&2; exit 2 ;;
  esac
done
DB=gtp$$
MAINT_DB=${BENCH_MAINTENANCE_DB:-postgres}
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
log() { echo "bench/tree_pools: $*" >&2; }
stats() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "0 0"; exit }
                               m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f\n", m, v[1] }'; }
cleanup() { psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true; }
trap cleanup EXIT

log "state: 2 pools of $NODES nodes, 4 / 20 / 100 teams, $PENDING pending jobs (database $DB)"
psql_ -d "$MAINT_DB" -c "CREATE DATABASE $DB" >/dev/null
psql_ -d "$DB" -v nodes="$NODES" -v pending="$PENDING" >/dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
SELECT gangsched.set_topology_levels(ARRAY['rack']);
SELECT gangsched.add_pool('a', 'reserved'), gangsched.add_pool('b', 'reserved');
SELECT count(gangsched.add_node(p || i, p, ('r' || p || (i / 16))::ltree, 96, 1024, 400, 8, NULL, NULL))
  FROM generate_series(1, :nodes) i, (VALUES ('a'), ('b')) v(p);
SELECT count(gangsched.add_team('top' || i)) FROM generate_series(1, 4) i;
SELECT count(gangsched.add_team('mid' || i, 1, 'top' || ((i - 1) % 4 + 1))) FROM generate_series(1, 20) i;
SELECT count(gangsched.add_team('team' || i, 1 + i % 3, 'mid' || ((i - 1) % 20 + 1))) FROM generate_series(1, 100) i;
SELECT count(gangsched.set_quota('top' || i, 'a', 2000, lending_limit_gpus => 1000)) FROM generate_series(1, 4) i;
SELECT count(gangsched.set_quota('mid' || i, 'b', 240, lending_limit_gpus => 0)) FROM generate_series(1, 20) i;
SELECT count(gangsched.set_quota('team' || i, 'a', 40, lending_limit_gpus => CASE WHEN i % 3 = 0 THEN 0 END))
  FROM generate_series(1, 100) i;
SELECT count(gangsched.set_quota('team' || i, 'b', 40)) FROM generate_series(1, 100) i;
SELECT count(gangsched.submit('team' || (1 + (i * 37) % 100), 1, 1 + i % 8,
                              pool => CASE i % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' END))
  FROM generate_series(1, :pending) i
 WHERE (1 + (i * 37) % 100) % 7 <> 0;
SQL
psql_ -d "$DB" -At -c "SELECT considered, placed, ms FROM gangsched.run_round()" | sed 's/^/bench\/tree_pools: round considered|placed|ms: /' >&2
psql_ -d "$DB" -At -c "SELECT count(gangsched.job_started(job, node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) s" >/dev/null
psql_ -d "$DB" -c "VACUUM ANALYZE" >/dev/null
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

while IFS='|' read -r name stmt; do
  script="$stmt;"$'\n'"\\timing on"$'\n'
  for i in $(seq 1 "$REPS"); do script+="$stmt;"$'\n'; done
  s=$(psql_ -d "$DB" -At <<<"$script" 2>&1 | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | stats)
  echo "{\"bench\":\"tree_pools\",\"entry\":\"$name\",\"nodes_per_pool\":$NODES,\"pending\":$PENDING,\"reps\":$REPS,\"median_ms\":${s% *},\"min_ms\":${s#* },\"load\":\"$LOAD\"}"
done <<'SQL'
team_shares|SELECT * FROM gangsched.team_shares
fair_shares|SELECT * FROM gangsched._fair_shares()
SQL
