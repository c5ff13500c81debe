#!/usr/bin/env bash
# bench/agents.sh — the node agents' per-job calls: job_started and
# job_finished, each called once per job in one statement (as
# gangsched-replay's agents call them), on a cluster of --nodes 8-GPU nodes
# filled with one-GPU jobs by one round. Prints one JSON line per repetition
# and one with the medians; progress on stderr.
#
# Runs against the server named by PGHOST/PGPORT/PGUSER (a superuser; the
# extension installed). Side by side: run it against two servers with the
# two builds, alternating (bench/README.md). With pg_stat_statements loaded
# in that server, --statements adds the statements inside job_finished
# (calls, plans, plan and execution time) of the last repetition.
#
# Usage: bash bench/agents.sh [--nodes N] [--reps N] [--statements] [--db NAME]
set -euo pipefail
NODES=128 REPS=5 STMTS=0 DB=gsb_agents_$$
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --statements) STMTS=1 ;;
    --db) DB=$2; shift ;;
    *) echo "usage: bash bench/agents.sh [--nodes N] [--reps N] [--statements] [--db NAME]" >&2; exit 1 ;;
  esac
  shift
done
JOBS=$((NODES * 8))
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
trap 'psql_ -d postgres -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || true' EXIT

ST=() FN=()
for ((r = 1; r <= REPS; r++)); do
  psql_ -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" -c "CREATE DATABASE \"$DB\"" >/dev/null
  out=$(psql_ -d "$DB" -At <<SQL
SET client_min_messages = warning;
CREATE EXTENSION gangsched CASCADE;
$([ "$STMTS" -eq 1 ] && echo "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;")
SET gangsched.clock_override = '2026-01-01 00:00+00';
SELECT gangsched.set_topology_levels(ARRAY['rack']) \\gset
SELECT gangsched.add_pool('main', 'reserved') \\gset
SELECT count(gangsched.add_node(format('n%s', i), 'main', format('r%s', i / 12)::ltree, 96, 1024, 100, 8, 'V100', 16)) AS n
  FROM generate_series(1, $NODES) i \\gset
SELECT count(gangsched.add_team(format('t%s', i))) AS n FROM generate_series(1, 4) i \\gset
SELECT count(gangsched.submit(format('t%s', 1 + i % 4), workers => 1, gpus => 1)) AS n FROM generate_series(1, $JOBS) i \\gset
SELECT placed FROM gangsched.run_round() \\gset
ANALYZE;
SELECT clock_timestamp() AS t0 \\gset
SELECT count(gangsched.job_started(x.job, n.name)) AS started
  FROM (SELECT DISTINCT a.job, a.node_id FROM gangsched.allocations a WHERE upper_inf(a.during)) x
  JOIN gangsched.nodes n ON n.id = x.node_id \\gset
SELECT round(1e6 * extract(epoch FROM clock_timestamp() - :'t0') / :started) AS st_us \\gset
SET gangsched.clock_override = '2026-01-01 01:00+00';
SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_stat_statements') AS pss \\gset
\\if :pss
SELECT pg_stat_statements_reset() \\gset
\\endif
SELECT clock_timestamp() AS t0 \\gset
SELECT count(gangsched.job_finished(id, true)) AS finished
  FROM (SELECT id FROM gangsched.gangs WHERE state = 'running' ORDER BY id) f \\gset
SELECT round(1e6 * extract(epoch FROM clock_timestamp() - :'t0') / :finished) AS fn_us \\gset
SELECT count(*) AS viol FROM gangsched.check_invariants() \\gset
\\echo :placed :st_us :finished :fn_us :viol
SQL
)
  read -r placed st_us finished fn_us viol <<<"$(tail -1 <<<"$out")"
  ST+=("$st_us") FN+=("$fn_us")
  printf '{"bench":"agents","rep":%s,"nodes":%s,"jobs_placed":%s,"job_started_us":%s,"jobs_finished":%s,"job_finished_us":%s,"invariant_violations":%s}\n' \
    "$r" "$NODES" "$placed" "$st_us" "$finished" "$fn_us" "$viol"
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
printf '{"bench":"agents_median","nodes":%s,"reps":%s,"job_started_us":%s,"job_finished_us":%s}\n' \
  "$NODES" "$REPS" "$(med "${ST[@]}")" "$(med "${FN[@]}")"
if [ "$STMTS" -eq 1 ]; then
  psql_ -d "$DB" -At -c "SELECT json_build_object('bench', 'agents_statement', 'calls', calls, 'plans', plans,
                                 'plan_ms', round(total_plan_time::numeric, 1), 'exec_ms', round(total_exec_time::numeric, 1),
                                 'query', left(regexp_replace(query, '\s+', ' ', 'g'), 80))
                            FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                             AND query !~ 'pg_stat_statements' ORDER BY total_plan_time + total_exec_time DESC LIMIT 12"
fi
