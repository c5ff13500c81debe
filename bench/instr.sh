#!/usr/bin/env bash
# bench/instr.sh — the instructions one scheduling round executes, for two
# workloads side by side: a measure that other work on the machine does not
# move (wall-clock rounds on a shared 2-core machine drift by 30 % and more
# between repetitions; see docs/performance.md).
#
#   bash bench/instr.sh [--args-a "run.sh options"] [--args-b "..."] [--reps N]
#
# Default: A = the flat 10-team queue, B = issue 15's team tree (100 leaves,
# --teams 100 --tree 10), both at 2,048 nodes and 20,000 pending jobs.
#
# How: a throwaway cluster (scratch $GS_INSTR_DIR, port $GS_INSTR_PORT,
# fsync off, the extension preloaded, its worker off) built from the
# PostgreSQL binaries of $PG_CONFIG with gangsched installed there (run
# `bash tools/gs start` or `make install` first). bench/run.sh generates
# each side's template database there (--cases cold --reps 1 --keep); the
# same template then gets a steady state: one cold round, every placed job
# started, the clock past gangsched.min_runtime. The server is stopped, and
# each measured round runs in a single-user backend (postgres --single) on a
# fresh copy, under valgrind's callgrind with collection switched on only
# inside gs_run_round: no other process, no timing. cold: the round that
# fills the empty cluster; steady: after 1 % of the running jobs finished
# (the same jobs every time: setseed), the next round.
#
# stdout: JSON lines, per side and case the instructions of the round and of
# its parts (gs_decide, the order's gs_order_next, gs_load_state, the
# writes' flush), then per case the ratio B/A. Repetitions of one binary on
# one template give the same count to within 0.01 %. Needs valgrind
# (apt-get install valgrind). Runs as root (the server runs as postgres).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
ROOT=${GS_INSTR_DIR:-/tmp/gs-instr}
PORT=${GS_INSTR_PORT:-54393}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
ARGS_A="--teams 10" ARGS_B="--teams 100 --tree 10" REPS=1 COMMON=""

usage() {
  cat >&2 <<USAGE
usage: bash bench/instr.sh [options]
  --args-a "..."   bench/run.sh options of workload A [$ARGS_A]
  --args-b "..."   bench/run.sh options of workload B [$ARGS_B]
  --common "..."   bench/run.sh options of both (e.g. --nodes 1024 --pending 5000)
  --reps N         measured rounds per side and case [$REPS]
environment: PG_CONFIG [$PG_CONFIG], GS_INSTR_DIR [$ROOT], GS_INSTR_PORT [$PORT]
USAGE
}
while [ $# -gt 0 ]; do
  case "$1" in
    --args-a) ARGS_A=$2; shift ;;
    --args-b) ARGS_B=$2; shift ;;
    --common) COMMON=$2; shift ;;
    --reps) REPS=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/instr.sh: unknown option $1" >&2; usage; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "bench/instr.sh: run as root (the server runs as postgres)" >&2; exit 2; }
command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
  { echo "bench/instr.sh: valgrind is missing (apt-get install valgrind)" >&2; exit 2; }
BIN=$("$PG_CONFIG" --bindir)
[ -f "$("$PG_CONFIG" --pkglibdir)/gangsched.so" ] ||
  { echo "bench/instr.sh: gangsched is not installed for $PG_CONFIG (bash tools/gs start, or make install)" >&2; exit 2; }

log() { printf '[instr %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
as_pg() { runuser -u postgres -- env PATH="$BIN:$PATH" PGHOST="$ROOT" PGPORT="$PORT" PGUSER=postgres "$@"; }
single() { as_pg "$BIN/postgres" --single -D "$ROOT/data" "$@"; }
stop() { [ -f "$ROOT/data/postmaster.pid" ] && as_pg pg_ctl -D "$ROOT/data" -m fast -w stop >/dev/null 2>&1 || true; }
trap stop EXIT

rm -rf "$ROOT"; mkdir -p "$ROOT"; chown postgres: "$ROOT"
as_pg initdb -D "$ROOT/data" -A trust --no-locale -E UTF8 >/dev/null
cat >> "$ROOT/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$ROOT'
port = $PORT
fsync = off
synchronous_commit = off
full_page_writes = off
max_locks_per_transaction = 256
shared_preload_libraries = 'gangsched'
gangsched.database = 'postgres'
gangsched.enabled = off
log_min_messages = warning
CONF
as_pg pg_ctl -D "$ROOT/data" -l "$ROOT/server.log" -w start >/dev/null
cp -a "$SRC/bench" "$ROOT/bench"; chown -R postgres: "$ROOT/bench"

# Each side's template (run.sh --keep), then its steady state.
declare -A TPL STEADY_AT
for s in a b; do
  args=$([ $s = a ] && echo "$ARGS_A" || echo "$ARGS_B")
  log "side $s: bench/run.sh --cases cold --reps 1 --keep $COMMON $args"
  # shellcheck disable=SC2086
  as_pg bash "$ROOT/bench/run.sh" --cases cold --reps 1 --keep $COMMON $args >"$ROOT/run_$s.jsonl" 2>"$ROOT/run_$s.err" ||
    { tail -20 "$ROOT/run_$s.err" >&2; exit 1; }
  TPL[$s]=$(grep -o 'gsb[0-9]*_n[0-9]*_p[0-9]*' "$ROOT/run_$s.err" | tail -1)
  [ -n "${TPL[$s]}" ] || { echo "bench/instr.sh: no template database kept by run.sh" >&2; exit 1; }
  as_pg psql -X -q -d postgres -c "CREATE DATABASE ${TPL[$s]}_steady TEMPLATE ${TPL[$s]}"
  as_pg psql -X -q -At -d "${TPL[$s]}_steady" >/dev/null <<'SQL'
SELECT (gangsched.run_round()).placed;
SELECT count(gangsched.job_started(a.job, n.name))
  FROM (SELECT DISTINCT job, node_id FROM gangsched.allocations WHERE upper_inf(during)) a
  JOIN gangsched.nodes n ON n.id = a.node_id
  JOIN gangsched.gangs g ON g.id = a.job AND g.state = 'placed';
VACUUM ANALYZE;
SQL
  # the scheduler's clock of the steady round: past min_runtime, as run.sh's steady case
  STEADY_AT[$s]=$(as_pg psql -X -At -d "${TPL[$s]}_steady" -c \
    "SELECT (now() + COALESCE(current_setting('gangsched.min_runtime', true), '300')::interval + interval '70 s')::text")
done
stop

# One measured round: $1 side, $2 case, $3 rep.
measure() {
  local s=$1 c=$2 k=$3 db="gsi_$1_$2" out="$ROOT/cg.$1.$2.$3" src
  src=$([ "$c" = cold ] && echo "${TPL[$s]}" || echo "${TPL[$s]}_steady")
  echo "DROP DATABASE IF EXISTS $db" | single postgres >/dev/null 2>&1
  echo "CREATE DATABASE $db TEMPLATE $src" | single postgres >/dev/null 2>&1
  if [ "$c" = cold ]; then
    echo "SELECT placed FROM gangsched.run_round()"
  else
    # single-user mode: one statement a line
    echo "SELECT setseed(0.5), set_config('gangsched.clock_override', '${STEADY_AT[$s]}', false)"
    echo "SELECT count(gangsched.job_finished(id, true)) FROM (SELECT id FROM gangsched.gangs WHERE state = 'running' ORDER BY id LIMIT greatest(1, (SELECT count(*) FROM gangsched.gangs WHERE state = 'running') / 100)) f"
    echo "SELECT placed FROM gangsched.run_round()"
  fi | (cd "$ROOT" && as_pg valgrind --tool=callgrind --toggle-collect=gs_run_round \
          --callgrind-out-file="$out" "$BIN/postgres" --single -D "$ROOT/data" "$db") >"$out.log" 2>&1 || true
  local total placed part
  total=$(grep -o 'Collected : [0-9]*' "$out.log" | grep -o '[0-9]*$' || echo 0)
  placed=$(grep -o 'placed = "[0-9]*"' "$out.log" | tail -1 | grep -o '[0-9]*' || echo 0)
  [ "$total" -gt 0 ] || { tail -20 "$out.log" >&2; echo "bench/instr.sh: the measured round did not run" >&2; exit 1; }
  part() { callgrind_annotate --inclusive=yes "$out" 2>/dev/null | grep -E "[:]$1 \[" | head -1 | awk '{gsub(",", "", $1); print $1 + 0}'; }
  printf '{"bench":"instr","side":"%s","case":"%s","rep":%s,"args":"%s","placed_jobs":%s,"round":%s,"decide":%s,"order":%s,"load":%s,"write_flush":%s}\n' \
    "$s" "$c" "$k" "$([ $s = a ] && echo "$ARGS_A" || echo "$ARGS_B") $COMMON" "$placed" "$total" \
    "$(part gs_decide)" "$(part gs_order_next)" "$(part gs_load_state_ex)" "$(part flush)"
}

for c in cold steady; do
  for ((k = 1; k <= REPS; k++)); do
    for s in a b; do
      log "measuring $c, side $s, repetition $k"
      measure "$s" "$c" "$k" | tee -a "$ROOT/instr.jsonl"
    done
  done
done
python3 - "$ROOT/instr.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for c in ("cold", "steady"):
    med = {s: {k: statistics.median(r[k] for r in rows if r["side"] == s and r["case"] == c)
               for k in ("round", "decide", "order", "load", "write_flush")} for s in ("a", "b")}
    print(json.dumps({"bench": "instr_ratio", "case": c,
                      **{f"{k}_b_a": round(med["b"][k] / med["a"][k], 3) if med["a"][k] else None
                         for k in ("round", "decide", "order", "load", "write_flush")}}))
PY
