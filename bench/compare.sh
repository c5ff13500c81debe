#!/usr/bin/env bash
# bench/compare.sh — two builds of gangsched measured side by side in one run.
#
#   bash bench/compare.sh [--base REV] [--new REV] [--reps N] [--quick]
#
# Leaves the machine's PostgreSQL installation alone: /usr/lib/postgresql/15
# and /usr/share/postgresql/15 (and the server headers) are copied into two
# private prefixes that keep Debian's relative layout,
#   $GS_CMP_DIR/A/usr/{lib,share,include}/postgresql/…   (A = --base)
#   $GS_CMP_DIR/B/usr/{lib,share,include}/postgresql/…   (B = --new)
# PostgreSQL is relocatable (pg_config, postgres and initdb find share/ and
# lib/ relative to their bin/), so each revision is built with that copy's
# pg_config and `make install`ed into it. Two throwaway clusters (ports
# $GS_CMP_PORT_A / $GS_CMP_PORT_B) run as postgres with fsync off,
# synchronous_commit off and full_page_writes off (--durable: all three on,
# as a production server runs), gangsched preloaded and its worker switched off
# (gangsched.enabled = off: no round of the worker races the benchmark).
#
# Then bench/run.sh from B's tree (the newer one, a superset) runs against A
# and B alternately, repetition by repetition (A B A B …), for the cases
# cold (with the COPY floor), steady and submit; each run.sh invocation is
# one repetition. stdout: JSON lines, the settings first, then per metric
# the median over repetitions of A and of B and the ratio B/A, then the
# issue-10 summary. ratio_b_a is the ratio of the two medians;
# ratio_b_a_paired the median over repetitions of B's value over A's in the
# same repetition (A and B ran back to back), which cancels slow drift in
# the machine's load. The COPY floor runs no gangsched code, so its ratio
# shows how far the machine alone moved the two sides apart. a_best/b_best:
# the least value over repetitions (for *_min metrics, the fastest round of
# the whole run), the least disturbed by other work on the machine. Progress and run.sh's stderr go to stderr; every
# repetition's raw output stays in $GS_CMP_DIR/out/.
#
# Runs as root (runuser -u postgres, as tools/gs does). Stops its own two
# clusters on exit and no other.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BASE=3981bc7 NEW=HEAD REPS=6 QUICK=0 BENCH_DIR="" DURABLE=off
ROOT=${GS_CMP_DIR:-/tmp/gs-cmp}
PORT_A=${GS_CMP_PORT_A:-54391} PORT_B=${GS_CMP_PORT_B:-54392}
PG_LIB=/usr/lib/postgresql/15 PG_SHARE=/usr/share/postgresql/15 PG_INC=/usr/include/postgresql
# one repetition = one bench/run.sh invocation at the benchmark scale of docs/performance.md (2,048 nodes,
# 20,000 pending), with modest inner repetitions
RUN_ARGS=(--cases cold,steady,submit --reps 5 --rounds 20 --submit-n 10000 --submit-reps 3 --pgbench-t 2000)
RUN_ARGS_QUICK=(--cases cold,steady,submit --reps 3 --rounds 10 --submit-n 3000 --submit-reps 2 --pgbench-t 1000)
EXTRA_ARGS=()
SIDE_ARGS_A=() SIDE_ARGS_B=()

usage() {
  cat >&2 <<USAGE
usage: bash bench/compare.sh [options] [-- bench/run.sh options]
  --base REV     revision A [$BASE]
  --new REV      revision B [$NEW]
  --reps N       repetitions, each one bench/run.sh per build, alternating [$REPS]
  --durable      fsync, synchronous_commit and full_page_writes on (default: off)
  --quick        3 repetitions of a smaller run.sh (about 2 minutes instead of 9)
  --bench DIR    take run.sh from DIR instead of B's tree
  --args-a "..." run.sh options for A only (e.g. --teams 10), after the common ones
  --args-b "..." run.sh options for B only (e.g. --teams 100 --tree 10): one build
                 compared with itself on two workloads when --base = --new
environment: GS_CMP_DIR [$ROOT], GS_CMP_PORT_A [$PORT_A], GS_CMP_PORT_B [$PORT_B]
USAGE
}
reps_set=0
while [ $# -gt 0 ]; do
  case "$1" in
    --base) BASE=$2; shift ;;
    --new) NEW=$2; shift ;;
    --reps) REPS=$2; reps_set=1; shift ;;
    --quick) QUICK=1 ;;
    --durable) DURABLE=on ;;
    --bench) BENCH_DIR=$(cd "$2" && pwd); shift ;;
    --args-a) read -r -a SIDE_ARGS_A <<<"$2"; shift ;;
    --args-b) read -r -a SIDE_ARGS_B <<<"$2"; shift ;;
    --) shift; EXTRA_ARGS=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/compare.sh: unknown option $1" >&2; usage; exit 2 ;;
  esac
  shift
done
if [ "$QUICK" -eq 1 ]; then RUN_ARGS=("${RUN_ARGS_QUICK[@]}"); [ "$reps_set" -eq 1 ] || REPS=3; fi
RUN_ARGS+=("${EXTRA_ARGS[@]}")

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/compare.sh must run as root (the servers run as postgres via runuser)" >&2; exit 2
fi
for t in jq git runuser; do command -v $t >/dev/null || { echo "bench/compare.sh: $t not found" >&2; exit 2; }; done
[ -x "$PG_LIB/bin/pg_config" ] || { echo "bench/compare.sh: no PostgreSQL 15 at $PG_LIB" >&2; exit 2; }
[ -d "$PG_INC/15/server" ] || { echo "bench/compare.sh: server headers missing ($PG_INC/15/server; postgresql-server-dev-15)" >&2; exit 2; }

export LANG=C.UTF-8 LC_ALL=C.UTF-8
log() { printf '[compare %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
T0=$(date +%s)
SHA_A=$(git -C "$SRC" rev-parse --verify "$BASE^{commit}")
SHA_B=$(git -C "$SRC" rev-parse --verify "$NEW^{commit}")

prefix() { echo "$ROOT/$1/usr/lib/postgresql/15"; }     # bindir's parent
as_pg() { local side=$1; shift
  runuser -u postgres -- env PATH="$(prefix "$side")/bin:/usr/bin:/bin" LANG="$LANG" LC_ALL="$LC_ALL" \
    PGHOST="$ROOT/$side" PGPORT="$(port "$side")" PGUSER=postgres PGDATABASE=postgres "$@"; }
port() { if [ "$1" = A ]; then echo "$PORT_A"; else echo "$PORT_B"; fi; }

stop_side() {
  local d="$ROOT/$1/data"
  if [ -f "$d/postmaster.pid" ]; then
    as_pg "$1" pg_ctl -D "$d" -m fast -w -t 60 stop >/dev/null 2>&1 ||
      as_pg "$1" pg_ctl -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
  fi
}
STARTED=()
cleanup() {
  local rc=$? s
  for s in "${STARTED[@]}"; do stop_side "$s"; done
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Our clusters only: refuse a directory whose server still runs (another
# compare.sh with the same GS_CMP_DIR). The servers listen on Unix sockets
# in their own directories only, so the ports cannot clash with others'.
for s in A B; do
  if [ -f "$ROOT/$s/data/postmaster.pid" ] && kill -0 "$(head -1 "$ROOT/$s/data/postmaster.pid")" 2>/dev/null; then
    echo "bench/compare.sh: a server is running in $ROOT/$s/data (another compare.sh?); set GS_CMP_DIR" >&2; exit 2
  fi
done

# --- private PostgreSQL copies and builds ------------------------------------
build_side() {  # side sha
  local s=$1 sha=$2 p d="$ROOT/$1"
  rm -rf "$d"; mkdir -p "$d/usr/lib/postgresql" "$d/usr/share/postgresql" "$d/usr/include" "$d/src"
  cp -a "$PG_LIB" "$d/usr/lib/postgresql/"
  cp -a "$PG_SHARE" "$d/usr/share/postgresql/"
  cp -a "$PG_INC" "$d/usr/include/"
  p=$(prefix "$s")
  # relocated: the copy's pg_config must name the copy, never /usr
  local share lib pgxs
  share=$("$p/bin/pg_config" --sharedir) lib=$("$p/bin/pg_config" --pkglibdir) pgxs=$("$p/bin/pg_config" --pgxs)
  if [ "$share" != "$d/usr/share/postgresql/15" ] || [ "$lib" != "$p/lib" ] || [ "${pgxs#"$d"/}" = "$pgxs" ]; then
    echo "bench/compare.sh: the copy in $d is not relocatable (sharedir $share, pkglibdir $lib)" >&2; exit 1
  fi
  git -C "$SRC" archive --format=tar "$sha" | tar -x -C "$d/src"
  log "$s: building $(git -C "$SRC" log -1 --format='%h %s' "$sha" | cut -c1-70) into $d"
  make -C "$d/src" -s -j2 PG_CONFIG="$p/bin/pg_config" >"$d/build.log" 2>&1 ||
    { tail -30 "$d/build.log" >&2; exit 1; }
  make -C "$d/src" -s install PG_CONFIG="$p/bin/pg_config" >>"$d/build.log" 2>&1 ||
    { tail -30 "$d/build.log" >&2; exit 1; }
  [ -f "$p/lib/gangsched.so" ] && [ -f "$d/usr/share/postgresql/15/extension/gangsched.control" ] ||
    { echo "bench/compare.sh: make install did not land in $d" >&2; exit 1; }
  chown -R postgres: "$d"
}

start_side() {
  local s=$1 d="$ROOT/$1" pre=gangsched
  as_pg "$s" initdb -D "$d/data" -A trust --no-locale -E UTF8 >/dev/null
  # pg_cron is not needed (the worker is off, run.sh calls run_round itself)
  cat >> "$d/data/postgresql.conf" <<CONF
# bench/compare.sh ($s = $(git -C "$SRC" rev-parse --short "$( [ "$s" = A ] && echo "$SHA_A" || echo "$SHA_B")"))
listen_addresses = ''
unix_socket_directories = '$d'
port = $(port "$s")
fsync = $DURABLE
synchronous_commit = $DURABLE
full_page_writes = $DURABLE
max_locks_per_transaction = 256
shared_preload_libraries = '$pre'
gangsched.database = 'postgres'
gangsched.enabled = off
CONF
  STARTED+=("$s")
  as_pg "$s" pg_ctl -D "$d/data" -l "$d/server.log" -w start >/dev/null
}

mkdir -p "$ROOT"
for s in A B; do
  if [ "$s" = A ]; then build_side A "$SHA_A"; else build_side B "$SHA_B"; fi
done
for s in A B; do start_side "$s"; done
log "servers: A $(git -C "$SRC" rev-parse --short "$SHA_A") on $ROOT/A:$PORT_A, B $(git -C "$SRC" rev-parse --short "$SHA_B") on $ROOT/B:$PORT_B"

BENCH=${BENCH_DIR:-$ROOT/B/src/bench}
if [ -n "$BENCH_DIR" ]; then rm -rf "$ROOT/bench"; cp -a "$BENCH_DIR" "$ROOT/bench"; chown -R postgres: "$ROOT/bench"; BENCH=$ROOT/bench; fi
[ -f "$BENCH/run.sh" ] || { echo "bench/compare.sh: no run.sh in $BENCH" >&2; exit 1; }

# --- settings -----------------------------------------------------------------
OUT="$ROOT/out"; rm -rf "$OUT"; mkdir -p "$OUT"; chown postgres: "$OUT"
settings_json() {
  as_pg "$1" psql -X -At -d postgres -c "SELECT pg_catalog.json_object_agg(name, setting ORDER BY name) FROM pg_catalog.pg_settings
     WHERE name IN ('server_version','fsync','synchronous_commit','full_page_writes','shared_buffers','work_mem','maintenance_work_mem',
                    'max_wal_size','max_locks_per_transaction','shared_preload_libraries','jit','gangsched.enabled','gangsched.database')"
}
CPU=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
jq -cn --arg a "$SHA_A" --arg b "$SHA_B" --arg cpu "${CPU:-unknown}" --argjson cores "$(nproc)" \
   --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --argjson sa "$(settings_json A)" --argjson sb "$(settings_json B)" \
   --arg args "${RUN_ARGS[*]}" --arg args_a "${SIDE_ARGS_A[*]}" --arg args_b "${SIDE_ARGS_B[*]}" \
   --argjson reps "$REPS" --arg bench "$BENCH/run.sh" \
   '{compare:"settings", a:$a, b:$b, cpu:$cpu, cores:$cores, loadavg_start:$load, reps:$reps, order:"A B alternating",
     run_sh:$bench, run_args:$args, run_args_a:$args_a, run_args_b:$args_b, server_a:$sa, server_b:$sb}'

# --- the repetitions, A B A B … ------------------------------------------------
for ((r = 1; r <= REPS; r++)); do
  for s in A B; do
    log "rep $r/$REPS: $s (load $(cut -d' ' -f1 /proc/loadavg))"
    t=$(date +%s)
    if [ "$s" = A ]; then side=("${SIDE_ARGS_A[@]}"); else side=("${SIDE_ARGS_B[@]}"); fi
    if ! as_pg "$s" bash "$BENCH/run.sh" "${RUN_ARGS[@]}" "${side[@]}" >"$OUT/$s.$r.jsonl" 2>"$OUT/$s.$r.log"; then
      tail -20 "$OUT/$s.$r.log" >&2; echo "bench/compare.sh: run.sh failed against $s (rep $r)" >&2; exit 1
    fi
    log "rep $r/$REPS: $s done in $(( $(date +%s) - t )) s"
  done
done

# --- medians and ratios ---------------------------------------------------------
# Each run.sh line becomes (key, metric, value): key is the bench plus what
# tells its lines apart (shape, protocol, caller); metrics are the timing and
# throughput fields and the phase medians.
for f in "$OUT"/[AB].*.jsonl; do
  b=$(basename "$f" .jsonl); jq -c --arg side "${b%%.*}" --argjson rep "${b#*.}" '. + {_side:$side, _rep:$rep}' "$f"
done | jq -sc --argjson reps "$REPS" '
  def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                     else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def r3: if . == null then null else (. * 1000 | round) / 1000 end;
  def key: [.bench, .shape, .protocol, .caller] | map(select(. != null)) | join("/");
  def metrics: ({cold: ["round_ms", "round_ms_min", "fn_ms", "cpu_ms", "cpu_ms_min"], copy_floor: ["copy_ms", "copy_ms_min", "ratio"],
                steady: ["round_ms", "round_ms_min", "round_ms_p90", "fn_ms", "cpu_ms", "cpu_ms_min"],
                submit_set: ["submit_rows_s", "insert_rows_s", "ratio"],
                submit_stmt: ["submit_rows_s", "insert_rows_s", "ratio"],
                metrics_read: ["view_ms", "view_ms_min", "view_unfolded_ms", "plan_ms", "pool_ms", "nodes_ms",
                               "jobs_live_ms", "team_ms", "queue_wait_ms", "worker_ms",
                               "view_cpu_ms", "view_unfolded_cpu_ms", "plan_cpu_ms", "pool_cpu_ms", "nodes_cpu_ms",
                               "jobs_live_cpu_ms", "team_cpu_ms", "queue_wait_cpu_ms", "worker_cpu_ms"]}[.bench] // [])
               # the exporter queries (x_*) and the read right after a round, as run.sh names them
               + (if .bench == "metrics_read" then [keys[] | select(test("^(x_|after_round_)") and test("_ms(_min)?$"))]
                  else [] end);
  [ .[] | select(.skipped == null) | . as $l
    | ((metrics[] | {key: ($l | key), metric: ., side: $l._side, rep: $l._rep, v: $l[.]}),
       (if $l.bench == "copy_floor" then empty else ($l.phase_ms // {} | to_entries[]) end | {key: ($l | key), metric: ("phase_" + .key + "_ms"), side: $l._side, rep: $l._rep, v: .value}))
    | select(.v != null) ]
  | group_by([.key, .metric])[]
  | (map(select(.side == "A")) | sort_by(.rep) | map(.v)) as $a
  | (map(select(.side == "B")) | sort_by(.rep) | map(.v)) as $b
  | ($a | median) as $ma | ($b | median) as $mb
  | (. as $g | [range(1; $reps + 1) as $r
                | ($g | map(select(.rep == $r and .side == "A")) | .[0].v) as $x
                | ($g | map(select(.rep == $r and .side == "B")) | .[0].v) as $y
                | select($x != null and $y != null and $x != 0) | $y / $x]) as $pairs
  | {compare: .[0].key, metric: .[0].metric, a: ($ma | r3), b: ($mb | r3),
     ratio_b_a: (if $ma == null or $mb == null or $ma == 0 then null else ($mb / $ma | r3) end),
     ratio_b_a_paired: ($pairs | median | r3),
     a_best: ($a | min), b_best: ($b | min),
     a_reps: $a, b_reps: $b}' | tee "$OUT/compare.jsonl"

# issue 10: submit through the SECURITY DEFINER path >= 0.5 x INSERT (B, as a
# portal role), round time within 5 % of A's
jq -sc '
  def pick($k; $m): map(select(.compare == $k and .metric == $m)) | .[0];
  . as $all
  | {compare: "summary",
     cold_round_ms: ($all | pick("cold"; "round_ms") | {a, b, ratio_b_a, ratio_b_a_paired}),
     steady_round_ms: ($all | pick("steady"; "round_ms") | {a, b, ratio_b_a, ratio_b_a_paired}),
     cold_round_cpu_ms: ($all | pick("cold"; "cpu_ms") | {a, b, ratio_b_a, ratio_b_a_paired}),
     steady_round_cpu_ms: ($all | pick("steady"; "cpu_ms") | {a, b, ratio_b_a, ratio_b_a_paired}),
     copy_floor_ms: ($all | pick("copy_floor"; "copy_ms") | {a, b, ratio_b_a, ratio_b_a_paired}),
     best_of_all: {cold_round_ms: ($all | pick("cold"; "round_ms_min") | {a: .a_best, b: .b_best}),
                   steady_round_ms: ($all | pick("steady"; "round_ms_min") | {a: .a_best, b: .b_best}),
                   copy_floor_ms: ($all | pick("copy_floor"; "copy_ms_min") | {a: .a_best, b: .b_best})}
                  | map_values(. + {ratio_b_a: (if .a == null or .b == null or .a == 0 then null else (.b / .a * 1000 | round) / 1000 end)}),
     round_within_5pct: ([($all | pick("cold"; "round_ms").ratio_b_a), ($all | pick("steady"; "round_ms").ratio_b_a)]
                         | map(select(. != null)) | if length == 0 then null else all(. >= 0.95 and . <= 1.05) end),
     submit_stmt: [ $all[] | select(.compare | startswith("submit_stmt/")) | select(.metric == "ratio")
                    | {case: (.compare | ltrimstr("submit_stmt/")), ratio_to_insert_a: .a, ratio_to_insert_b: .b} ],
     portal_ratio_b_min: ([ $all[] | select(.compare | test("^submit_stmt/.*/portal$")) | select(.metric == "ratio") | .b ]
                          | if length == 0 then null else min end)}
  | . + {portal_at_least_half: (if .portal_ratio_b_min == null then null else .portal_ratio_b_min >= 0.5 end)}' "$OUT/compare.jsonl"

jq -cn --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --argjson s "$(( $(date +%s) - T0 ))" --arg out "$OUT" \
  '{compare:"done", seconds:$s, loadavg_end:$load, raw:$out}'
log "done in $(( $(date +%s) - T0 )) s; raw output in $OUT"
