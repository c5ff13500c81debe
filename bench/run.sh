#!/usr/bin/env bash
# bench/run.sh — gangsched's benchmarks (targets in docs/performance.md). Prints one JSON object per line on stdout and nothing else;
# progress goes to stderr.
#
# Runs against the server named by PGHOST/PGPORT/PGUSER, which must have the
# extension installed (make install) and a role that may CREATE DATABASE and
# CREATE EXTENSION gangsched (superuser). It creates its own databases, named
# gsb<pid>_*, and drops them when it exits.
#
# Cases (bench/README.md says more):
#   cold      (a) one round filling the empty cluster, timed from the client
#                 as an autocommit statement (so with its commit), on a fresh
#                 database each repetition
#   copy      (d) in the same databases: COPY of exactly the rows that round
#                 inserted, into empty tables LIKE the originals, the floor
#   steady    (b) rounds with 1% of the running jobs finishing between them
#   scale_*   (c) cold rounds over nodes and over pending jobs
#   submit_*  (e) submit() against a plain INSERT of the same row; with
#                 tenancy (gangsched.add_member), submit_stmt also submits as
#                 a LOGIN role bound to team3 ("caller":"portal"; the role,
#                 gs_bench_portal or $BENCH_PORTAL_ROLE, is created when
#                 missing and then dropped at exit)
#   metrics   (f) reading gangsched.metrics on the main case's state after
#                 one round (the placed jobs started) and a VACUUM: the
#                 whole view, its planning alone (EXPLAIN), the families
#                 through the view, with the counters' deltas as the round
#                 left them and after the fold the worker runs after each
#                 round; each query of contrib/prometheus/queries.yaml as
#                 the exporter sends it (x_*); the whole view right after
#                 a round, before a VACUUM (after_round_view); not in the
#                 default cases
#
# Usage: bash bench/run.sh [--quick] [options]; --help lists them.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)

# --- parameters -------------------------------------------------------------
NODES=2048 GPN=8 RACK_NODES=8 SPINE_RACKS=16 ZONE_SPINES=4 FRAC_EVERY=8
TEAMS=10 TREE=0 PENDING=20000 SEED=0.42
REPS=5 SERIES_REPS=3 ROUNDS=20 CHURN=0.01
SERIES_NODES="512 1024 2048 4096 8192"
SERIES_PENDING="2500 5000 10000 20000 40000 80000"
SERIES_AT_PENDING=20000 SERIES_AT_NODES=2048
SUBMIT_N=10000 SUBMIT_REPS=3 PGBENCH_T=2000 METRICS_REPS=15
CASES="cold,steady,scale,submit"
KEEP=0 SETUP="" TIME_LIMITS=0 RESERVATIONS=0 ELASTIC=0
PORTAL_ROLE=${BENCH_PORTAL_ROLE:-gs_bench_portal} PORTAL_CREATED=0
MAINT_DB=${BENCH_MAINTENANCE_DB:-postgres}

usage() {
  cat >&2 <<USAGE
usage: bash bench/run.sh [options]
  --quick              fewer repetitions and a trimmed scaling series
  --cases LIST         comma-separated subset of: cold,steady,scale,submit,metrics
                       (cold includes the COPY floor) [$CASES]
  --nodes N            nodes of the main case [$NODES]
  --pending N          pending jobs of the main case [$PENDING]
  --gpus-per-node N    [$GPN]
  --teams N            [$TEAMS]
  --tree F             team tree (issue 15): the --teams teams become leaves of a
                       three-level tree, F leaves per inner team, inner teams
                       under two top-level teams (bench/tree.sql); 0 = flat [$TREE]
  --seed S             setseed() argument in [-1, 1] [$SEED]
  --reps N             cold-round repetitions of the main case [$REPS]
  --series-reps N      cold-round repetitions per scaling point [$SERIES_REPS]
  --rounds N           steady-state rounds [$ROUNDS]
  --churn F            fraction of running jobs finishing between rounds [$CHURN]
  --series-nodes "..." node counts of the scaling series [$SERIES_NODES]
  --series-pending "..." pending counts of the scaling series [$SERIES_PENDING]
  --submit-n N         rows per submit/INSERT measurement [$SUBMIT_N]
  --submit-reps N      repetitions of each submit/INSERT measurement [$SUBMIT_REPS]
  --pgbench-t N        transactions per pgbench run (0 = skip pgbench) [$PGBENCH_T]
  --setup FILE         psql script run right after CREATE EXTENSION, in the
                       database every template is copied from
  --time-limits        every queued job gets a time limit (1 to 24 hours, by job
                       number; docs/time.md), where the build's submit() takes one
                       (a build without time limits runs its queue as always)
  --elastic F          fraction F of the queued jobs of 2 or more replicas become
                       elastic gangs with a minimum of half their replicas (by job
                       id; docs/elastic.md), where the build has min_replicas
  --reservations N     N advance reservations of 16 nodes each, starting a day
                       ahead (bench/reservations.sql; docs/time.md), where the
                       build has add_reservation [$RESERVATIONS]
  --keep               keep the databases (names on stderr)
USAGE
}

while [ $# -gt 0 ]; do
  case "$1" in
    --) ;;
    --quick) REPS=3 SERIES_REPS=1 SUBMIT_REPS=2 PGBENCH_T=1000
             SERIES_NODES="1024 2048 4096" SERIES_PENDING="5000 20000" ;;
    --cases) CASES=$2; shift ;;
    --nodes) NODES=$2; shift ;;
    --pending) PENDING=$2; shift ;;
    --gpus-per-node) GPN=$2; shift ;;
    --teams) TEAMS=$2; shift ;;
    --tree) TREE=$2; shift ;;
    --seed) SEED=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --series-reps) SERIES_REPS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --churn) CHURN=$2; shift ;;
    --series-nodes) SERIES_NODES=$2; shift ;;
    --series-pending) SERIES_PENDING=$2; shift ;;
    --submit-n) SUBMIT_N=$2; shift ;;
    --pgbench-t) PGBENCH_T=$2; shift ;;
    --submit-reps) SUBMIT_REPS=$2; shift ;;
    --setup) SETUP=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift ;;
    --keep) KEEP=1 ;;
    --time-limits) TIME_LIMITS=1 ;;
    --elastic) ELASTIC=$2; shift ;;
    --reservations) RESERVATIONS=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/run.sh: unknown option $1" >&2; usage; exit 2 ;;
  esac
  shift
done
has_case() { case ",$CASES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# --- plumbing ---------------------------------------------------------------
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
PFX="gsb$$"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gsbench.XXXXXX")
log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
sql1() { local db=$1; shift; psql_ -At -d "$db" -c "$*"; }   # one value
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
emit() { printf '%s\n' "$1"; }                               # a JSON line

cleanup() {
  local rc=$?
  if [ "$KEEP" -eq 0 ]; then
    for db in $(psql_ -At -d "$MAINT_DB" -c "SELECT datname FROM pg_database WHERE datname LIKE '${PFX}\_%'" 2>/dev/null); do
      psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
    done
  else
    log "kept databases: $(psql_ -At -d "$MAINT_DB" -c "SELECT string_agg(datname, ' ') FROM pg_database WHERE datname LIKE '${PFX}\_%'" 2>/dev/null)"
  fi
  # the portal role is the cluster's: dropped when this run created it and
  # no database of this run is left holding its bindings
  if [ "$PORTAL_CREATED" -eq 1 ] && [ "$KEEP" -eq 0 ]; then
    psql_ -d "$MAINT_DB" -c "DROP ROLE IF EXISTS \"$PORTAL_ROLE\"" >/dev/null 2>&1 || true
  fi
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Run a psql script file against a database; its stdout goes to $2.out,
# its stderr to $2.err (DEBUG lines stay there, the rest is shown).
# Lines "Time: X ms" come from \timing, lines "KV key value" from \echo.
run_script() {  # db script
  if ! psql_ -At -d "$1" -f "$2" > "$2.out" 2> "$2.err"; then
    cat "$2.err" >&2; return 1
  fi
  grep -v 'DEBUG: ' "$2.err" >&2 || true
}
# The round's own phase timings, when it reports them at DEBUG2 (src/round.c):
# one line "time_rules load decide write" (ms) per round, in order.
phases() {
  grep -o 'time rules [0-9.]* ms, load [0-9.]* ms, decide [0-9.]* ms, write [0-9.]* ms' "$1.err" |
    awk '{ print $3, $6, $9, $12 }' || true
}
# phase_json "tr load decide write" lines… → ,"phase_ms":{…} of the medians, or nothing
phase_json() {
  [ $# -gt 0 ] || return 0
  local k i out="" v
  for i in 1 2 3 4; do
    k=$(echo "time_rules load decide write" | cut -d' ' -f$i)
    v=$(stats $(printf '%s\n' "$@" | awk -v i=$i '{ print $i }') | cut -d' ' -f1)
    out="$out${out:+,}\"$k\":$v"
  done
  printf ',"phase_ms":{%s}' "$out"
}
times_of() { awk '/^Time: /{ print $2 }' "$1.out"; }
kv() { awk -v k="$2" '$1 == "KV" && $2 == k { $1 = ""; $2 = ""; sub(/^  /, ""); print; exit }' "$1.out"; }

# stats v1 v2 … → "median min max p90" (nearest-rank p90), 3 decimals
stats() {
  printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
    END { n = NR; if (n == 0) { print "null null null null"; exit }
          med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
          p = int(0.9 * n); if (p < 0.9 * n) p++; if (p < 1) p = 1
          printf "%.3f %.3f %.3f %.3f\n", med, a[1], a[n], a[p] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "null"; else printf "%.3f\n", a / b }'; }
jstr() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

# --- templates: cluster + queue, generated once, cloned per measurement -----
declare -A TPL_DB=()   # "nodes:pending" → database
declare -A TPL_N=()    # database → nodes
declare -A TPL_P=()    # database → pending

# template NODES PENDING: sets TEMPLATE to a database holding that cluster
# and queue. Grows from the largest template of the same cluster with fewer
# jobs (jobs 1 … p are the same whatever p is, see shapes.sql).
template() {
  local n=$1 p=$2 key="$1:$2" base="" bp=0 db t0 t1 t2 first=1 k
  if [ -n "${TPL_DB[$key]:-}" ]; then TEMPLATE=${TPL_DB[$key]}; return; fi
  for k in "${!TPL_DB[@]}"; do
    if [ "${k%%:*}" = "$n" ] && [ "${k##*:}" -le "$p" ] && [ "${k##*:}" -gt "$bp" ]; then
      base=${TPL_DB[$k]} bp=${k##*:}
    fi
  done
  db="${PFX}_n${n}_p${p}"
  t0=$(now_ms)
  if [ -n "$base" ]; then
    log "template $db: cloning $base and submitting jobs $((bp + 1))…$p"
    psql_ -d "$MAINT_DB" -c "CREATE DATABASE \"$db\" TEMPLATE \"$base\""
    first=$((bp + 1))
  else
    log "template $db: $n nodes × $GPN GPUs, $p pending jobs"
    psql_ -d "$MAINT_DB" -c "CREATE DATABASE \"$db\" TEMPLATE \"$EXT_DB\""
    psql_ -d "$db" -v nodes="$n" -v gpn="$GPN" -v rack_nodes="$RACK_NODES" -v spine_racks="$SPINE_RACKS" \
          -v zone_spines="$ZONE_SPINES" -v frac_every="$FRAC_EVERY" -v teams="$TEAMS" \
          -f "$HERE/cluster.sql" >/dev/null
    if [ "$TREE" -gt 0 ]; then
      psql_ -d "$db" -v teams="$TEAMS" -v fanout="$TREE" -f "$HERE/tree.sql" >/dev/null
    fi
    if [ "$RESERVATIONS" -gt 0 ]; then
      psql_ -d "$db" -v teams="$TEAMS" -v reservations="$RESERVATIONS" -f "$HERE/reservations.sql" >/dev/null
    fi
    # add_node's per-class and per-domain counters leave thousands of dead
    # row versions that submit()'s admission checks would scan until
    # autovacuum came by; vacuum as an operator would after a bulk import.
    psql_ -d "$db" -c "VACUUM ANALYZE"
  fi
  t1=$(now_ms)
  if [ "$p" -ge "$first" ]; then
    psql_ -d "$db" -v seed="$SEED" -v first="$first" -v last="$p" -v teams="$TEAMS" \
          -v time_limits="$TIME_LIMITS" -f "$HERE/jobs.sql" >/dev/null
  fi
  if [ "$ELASTIC" != 0 ] && [ "$(sql1 "$db" "SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute WHERE attrelid = 'gangsched.gangs'::regclass AND attname = 'min_replicas')")" = t ]; then
    # the queue's jobs of 2 or more replicas, a fraction of them by id, made
    # elastic as submit(..., min_replicas) would store them (half their replicas)
    psql_ -d "$db" -c "UPDATE gangsched.gangs g SET max_workers = g.workers,
                              min_replicas = (g.workers / (g.group_size * g.stages) + 1) / 2
                        WHERE g.state = 'pending' AND g.min_replicas IS NULL
                          AND g.workers / (g.group_size * g.stages) >= 2
                          AND (g.id * 7919) % 1000 < 1000 * $ELASTIC" >/dev/null
  fi
  t2=$(now_ms)
  psql_ -d "$db" -c "VACUUM (FREEZE, ANALYZE)"
  TPL_DB[$key]=$db TPL_N[$db]=$n TPL_P[$db]=$p
  TEMPLATE=$db
  local subm=$((p - first + 1)) limited
  local elastic
  limited=$(sql1 "$db" "SELECT count(*) FILTER (WHERE (to_jsonb(g) ->> 'time_limit') IS NOT NULL) FROM gangsched.gangs g")
  elastic=$(sql1 "$db" "SELECT count(*) FILTER (WHERE (to_jsonb(g) ->> 'min_replicas') IS NOT NULL) FROM gangsched.gangs g")
  emit "{\"bench\":\"generate\",\"ext\":\"$EXT_SIG\",\"time_limited_jobs\":$limited,\"elastic_jobs\":$elastic,\"nodes\":$n,\"gpus\":$((n * GPN)),\"pending\":$p,\"teams\":$TEAMS,\"tree\":$TREE,\"from\":$(jstr "${base:-empty}"),\"cluster_ms\":$((t1 - t0)),\"submitted\":$subm,\"submit_ms\":$((t2 - t1)),\"submit_us_per_job\":$(ratio $(( (t2 - t1) * 1000 )) $subm)}"
}

# A short fingerprint of the extension's functions and columns, logged and
# put on every "generate" line, so runs can be told apart.
EXT_SIG=""
ext_check() {
  local sig
  sig=$(sql1 "$1" "SELECT left(md5(string_agg(x, ',' ORDER BY x)), 12) FROM (
      SELECT p.oid::regprocedure::text || ':' || md5(p.prosrc) FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'gangsched'::regnamespace
      UNION ALL
      SELECT a.attrelid::regclass::text || '.' || a.attname || ':' || a.atttypid::regtype::text
        FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
       WHERE c.relnamespace = 'gangsched'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped) s(x)")
  if [ -z "$EXT_SIG" ]; then
    EXT_SIG=$sig
    log "extension gangsched $(sql1 "$1" "SELECT extversion FROM pg_extension WHERE extname = 'gangsched'"), signature $sig"
  fi
}

HAVE_ROUND=""
have_round() {  # db → 0 if gangsched.run_round() exists there
  if [ -z "$HAVE_ROUND" ]; then
    HAVE_ROUND=$(sql1 "$1" "SELECT to_regprocedure('gangsched.run_round()') IS NOT NULL")
  fi
  [ "$HAVE_ROUND" = t ]
}

# --- one cold round on a fresh clone ----------------------------------------
# cold_round TEMPLATE DB [copy] [check]: clones TEMPLATE into DB (dropping an
# old DB), runs one round and sets R_* (client ms, function ms, counts). With
# "copy", also measures the COPY floor (C_*); with "check", counts invariant
# violations afterwards.
cold_round() {
  local tpl=$1 db=$2 do_copy=${3:-} do_check=${4:-} s="$TMP/cold.sql"
  psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\" TEMPLATE \"$tpl\""
  cat > "$s" <<'SQL'
\timing off
-- warm this backend's caches; the cluster state stays cold (empty)
SELECT count(*) FROM gangsched.nodes \gset
SELECT count(*) FROM gangsched.devices \gset
SELECT count(*) FROM gangsched.node_classes, gangsched.domain_classes, gangsched.quotas, gangsched.teams, gangsched.pools \gset
SELECT count(*) FROM gangsched.gangs WHERE state = 'pending' \gset
SELECT count(*) FROM gangsched.allocations, gangsched.held_slots, gangsched.holds \gset
SELECT COALESCE(max(id), 0) AS ev0, (SELECT COALESCE(max(id), 0) FROM gangsched.allocations) AS al0,
       (SELECT count(*) FROM gangsched.gangs WHERE state = 'pending') AS pend0
  FROM gangsched.events \gset
SELECT pg_catalog.split_part(pg_catalog.pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint AS cpu0 \gset
SET client_min_messages = debug2;
\timing on
SELECT * FROM gangsched.run_round() \gset r_
\timing off
SELECT round((pg_catalog.split_part(pg_catalog.pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint - :cpu0) / 1e6, 3) AS cpu_ms \gset
RESET client_min_messages;
\echo KV cpu_ms :cpu_ms
\echo KV ran :r_ran
\echo KV considered :r_considered
\echo KV placed :r_placed
\echo KV workers :r_workers_placed
\echo KV fn_ms :r_ms
\echo KV note :r_note
\echo KV ev0 :ev0
\echo KV al0 :al0
\echo KV pend0 :pend0
SELECT count(DISTINCT job) AS jobs, count(*) AS allocs, COALESCE(sum(gpus), 0) AS gpus_used
  FROM gangsched.allocations WHERE upper_inf(during) \gset a_
\echo KV alloc_jobs :a_jobs
\echo KV allocs :a_allocs
\echo KV gpus_used :a_gpus_used
SQL
  run_script "$db" "$s"
  R_MS=$(times_of "$s" | head -1)
  R_FN=$(kv "$s" fn_ms) R_CPU=$(kv "$s" cpu_ms) R_RAN=$(kv "$s" ran) R_CONS=$(kv "$s" considered)
  R_PLACED=$(kv "$s" placed) R_WORKERS=$(kv "$s" workers) R_NOTE=$(kv "$s" note)
  R_PEND=$(kv "$s" pend0) R_ALLOCS=$(kv "$s" allocs) R_AJOBS=$(kv "$s" alloc_jobs)
  R_GPUS=$(kv "$s" gpus_used) R_PHASES=$(phases "$s")
  local ev0 al0; ev0=$(kv "$s" ev0) al0=$(kv "$s" al0)
  log "  round: ${R_MS} ms from the client, ${R_FN} ms inside${R_PHASES:+ (time rules, load, decide, write: $R_PHASES ms)}; ran=$R_RAN considered=$R_CONS placed=$R_PLACED workers=$R_WORKERS note=$R_NOTE"
  if [ "$R_RAN" != t ]; then
    echo "bench/run.sh: run_round() did not run (ran=$R_RAN, note=$R_NOTE)" >&2
    exit 1
  fi
  if [ "$do_copy" = copy ]; then copy_floor "$db" "$ev0" "$al0"; fi
  R_VIOL=null
  if [ "$do_check" = check ]; then
    R_VIOL=$(sql1 "$db" "SELECT count(*) FROM gangsched.check_invariants()")
    if [ "$R_VIOL" != 0 ]; then
      log "  check_invariants(): $R_VIOL violations, for instance:"
      psql_ -d "$db" -c "SELECT invariant, count(*), min(detail) FROM gangsched.check_invariants() GROUP BY 1 ORDER BY 1" >&2
    fi
  fi
}

# --- (d) the COPY floor -----------------------------------------------------
# COPY out exactly the rows the round inserted (allocations, held_slots,
# events) and the gangs rows it updated, then COPY them into empty tables
# created LIKE the originals INCLUDING ALL, in one transaction, timed from the
# client (BEGIN … COMMIT). copy_ms covers the three inserted tables;
# copy_gangs_ms the updated gangs rows on their own.
copy_floor() {
  local db=$1 ev0=$2 al0=$3 s="$TMP/copy.sql" t
  # Generated columns are computed on the way in, as in the round's own
  # writes, so they are neither copied out nor named in COPY FROM.
  psql_ -d "$db" <<SQL
CREATE TABLE public.bench_allocations (LIKE gangsched.allocations INCLUDING ALL);
CREATE TABLE public.bench_held_slots (LIKE gangsched.held_slots INCLUDING ALL);
CREATE TABLE public.bench_events (LIKE gangsched.events INCLUDING ALL);
CREATE TABLE public.bench_gangs (LIKE gangsched.gangs INCLUDING ALL);
SQL
  local cols_of; cols_of=$(psql_ -At -d "$db" -c "
    SELECT c.relname || ' ' || string_agg(quote_ident(attname), ',' ORDER BY attnum)
      FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
     WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relname IN ('allocations', 'held_slots', 'events', 'gangs')
       AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
     GROUP BY c.relname")
  local ca ch ce cg
  ca=$(awk '$1 == "allocations" { print $2 }' <<<"$cols_of") ch=$(awk '$1 == "held_slots" { print $2 }' <<<"$cols_of")
  ce=$(awk '$1 == "events" { print $2 }' <<<"$cols_of") cg=$(awk '$1 == "gangs" { print $2 }' <<<"$cols_of")
  # The rows the round wrote are exactly those whose xmin is its transaction.
  local rx; rx=$(sql1 "$db" "SELECT xmin FROM gangsched.allocations WHERE id > $al0 LIMIT 1")
  psql_ -d "$db" <<SQL
\copy (SELECT $ca FROM gangsched.allocations WHERE xmin = '$rx' ORDER BY id) TO '$TMP/allocations.copy'
\copy (SELECT $ch FROM gangsched.held_slots WHERE xmin = '$rx' ORDER BY node_id, slot) TO '$TMP/held_slots.copy'
\copy (SELECT $ce FROM gangsched.events WHERE xmin = '$rx' ORDER BY id) TO '$TMP/events.copy'
\copy (SELECT $cg FROM gangsched.gangs WHERE xmin = '$rx' ORDER BY id) TO '$TMP/gangs.copy'
SQL
  {
    echo '\timing on'
    echo 'BEGIN;'
    echo "COPY public.bench_allocations ($ca) FROM STDIN;"; cat "$TMP/allocations.copy"; echo '\.'
    echo "COPY public.bench_held_slots ($ch) FROM STDIN;"; cat "$TMP/held_slots.copy"; echo '\.'
    echo "COPY public.bench_events ($ce) FROM STDIN;"; cat "$TMP/events.copy"; echo '\.'
    echo 'COMMIT;'
    echo 'BEGIN;'
    echo "COPY public.bench_gangs ($cg) FROM STDIN;"; cat "$TMP/gangs.copy"; echo '\.'
    echo 'COMMIT;'
  } > "$s"
  run_script "$db" "$s"
  local tl; tl=$(times_of "$s")
  C_MS=$(echo "$tl" | head -5 | awk '{ s += $1 } END { printf "%.3f\n", s }')
  C_GANGS_MS=$(echo "$tl" | tail -3 | awk '{ s += $1 } END { printf "%.3f\n", s }')
  C_ALLOC=$(wc -l < "$TMP/allocations.copy") C_SLOTS=$(wc -l < "$TMP/held_slots.copy")
  C_EVENTS=$(wc -l < "$TMP/events.copy") C_GANGS=$(wc -l < "$TMP/gangs.copy")
  log "  COPY floor: $C_MS ms for $C_ALLOC allocations + $C_SLOTS held slots + $C_EVENTS events ($(echo $tl | awk '{ printf "BEGIN %s, %s + %s + %s ms, COMMIT %s", $1, $2, $3, $4, $5 }')); gangs rows ($C_GANGS): $C_GANGS_MS ms"
  psql_ -d "$db" -c "DROP TABLE public.bench_allocations, public.bench_held_slots, public.bench_events, public.bench_gangs"
}

# measure_cold NODES PENDING REPS [copy] → sets M_* (medians and spreads)
measure_cold() {
  local n=$1 p=$2 reps=$3 do_copy=${4:-} i
  local ms=() fn=() cpu=() cms=() cgms=() rat=() wrat=() ph=()
  template "$n" "$p"
  local tpl=$TEMPLATE
  for ((i = 1; i <= reps; i++)); do
    log "cold round $i/$reps: $n nodes, $p pending"
    cold_round "$tpl" "${PFX}_run" "$do_copy" "$([ "$i" -eq 1 ] && [ "$do_copy" = copy ] && echo check)"
    ms+=("$R_MS") fn+=("$R_FN") cpu+=("$R_CPU")
    if [ -n "$R_PHASES" ]; then ph+=("$R_PHASES"); fi
    if [ "$do_copy" = copy ]; then
      cms+=("$C_MS") cgms+=("$C_GANGS_MS") rat+=("$(ratio "$R_MS" "$C_MS")")
      if [ -n "$R_PHASES" ]; then wrat+=("$(ratio "$(echo "$R_PHASES" | awk '{ print $4 }')" "$C_MS")"); fi
    fi
    if [ "$i" -eq 1 ]; then M_VIOL=$R_VIOL; fi
  done
  read -r M_MS M_MS_MIN M_MS_MAX _ <<<"$(stats "${ms[@]}")"
  read -r M_FN M_FN_MIN M_FN_MAX _ <<<"$(stats "${fn[@]}")"
  read -r M_CPU M_CPU_MIN _ _ <<<"$(stats "${cpu[@]}")"
  if [ "$do_copy" = copy ]; then
    read -r M_CMS M_CMS_MIN M_CMS_MAX _ <<<"$(stats "${cms[@]}")"
    read -r M_CGMS _ _ _ <<<"$(stats "${cgms[@]}")"
    read -r M_RATIO M_RATIO_MIN M_RATIO_MAX _ <<<"$(stats "${rat[@]}")"
    M_WRATIO=""
    if [ ${#wrat[@]} -gt 0 ]; then
      read -r M_WRATIO _ _ _ <<<"$(stats "${wrat[@]}")"
      M_WRATIO=",\"write_phase_ratio\":$M_WRATIO"
    fi
  fi
  M_PHASES=$(phase_json "${ph[@]}")
  M_N=$n M_P=$p M_REPS=$reps
}

cold_json() {  # bench-name extra-json
  printf '{"bench":"%s","nodes":%s,"gpus":%s,"pending":%s,"considered":%s,"placed_jobs":%s,"placed_workers":%s,"placed_gpus":%s,"gpu_util":%s,"round_ms":%s,"round_ms_min":%s,"round_ms_max":%s,"fn_ms":%s,"fn_ms_min":%s,"fn_ms_max":%s,"cpu_ms":%s,"cpu_ms_min":%s%s,"reps":%s%s}' \
    "$1" "$M_N" $((M_N * GPN)) "$R_PEND" "$R_CONS" "$R_PLACED" "$R_WORKERS" "$R_GPUS" \
    "$(ratio "$R_GPUS" $((M_N * GPN)))" "$M_MS" "$M_MS_MIN" "$M_MS_MAX" "$M_FN" "$M_FN_MIN" "$M_FN_MAX" "$M_CPU" "$M_CPU_MIN" \
    "$M_PHASES" "$M_REPS" "${2:-}"
}

skip_json() { emit "{\"bench\":\"$1\",\"nodes\":$2,\"gpus\":$(($2 * GPN)),\"pending\":$3,\"skipped\":\"run_round missing\"}"; }

# --- (b) steady state --------------------------------------------------------
# steady DB: continues in the database of the last cold round. The
# scheduler's clock (gangsched.clock_override) is set past
# gangsched.min_runtime, so running jobs count as preemption candidates as
# they would in a long-running cluster; every placed job is started
# (job_started for each of its nodes); then ROUNDS times, 10 s of scheduler
# time apart: CHURN of the running jobs finish (job_finished), a round runs
# (timed), the agents of preempted jobs release them (job_released, when it
# exists), and what was placed is started.
steady() {
  local db=$1 s="$TMP/steady.sql" i
  {
    cat <<'SQL'
\timing off
SELECT setseed(0.5) AS seeded \gset
SELECT pg_catalog.now() AS t0,
       extract(epoch FROM COALESCE(pg_catalog.current_setting('gangsched.min_runtime', true), '300')::interval)::int
           AS min_runtime,
       pg_catalog.to_regprocedure('gangsched.job_released(bigint,boolean)') IS NOT NULL AS has_release \gset
CREATE TEMP VIEW bench_to_start AS
SELECT a.job, n.name AS node
  FROM (SELECT DISTINCT a.job, a.node_id
          FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
         WHERE g.state = 'placed' AND upper_inf(a.during)) a
  JOIN gangsched.nodes n ON n.id = a.node_id;
SQL
    echo "SELECT pg_catalog.set_config('gangsched.clock_override', :'t0', false) AS clock \\gset"
    cat <<'SQL'
SELECT count(gangsched.job_started(job, node)) AS started FROM bench_to_start \gset
SELECT count(*) AS running FROM gangsched.gangs WHERE state = 'running' \gset
\echo KV running0 :running
SQL
    for ((i = 1; i <= ROUNDS; i++)); do
      echo "SELECT pg_catalog.set_config('gangsched.clock_override', (:'t0'::timestamptz + make_interval(secs => :min_runtime + 60 + 10 * $i))::text, false) AS clock \\gset"
      cat <<SQL
SELECT count(gangsched.job_finished(id, true)) AS finished
  FROM (SELECT id FROM gangsched.gangs WHERE state = 'running' ORDER BY random()
         LIMIT greatest(1, round($CHURN * (SELECT count(*) FROM gangsched.gangs WHERE state = 'running')))) f \\gset
SELECT pg_catalog.split_part(pg_catalog.pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint AS cpu0 \\gset
SET client_min_messages = debug2;
\\timing on
SELECT * FROM gangsched.run_round() \\gset r_
\\timing off
SELECT round((pg_catalog.split_part(pg_catalog.pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint - :cpu0) / 1e6, 3) AS cpu_ms \\gset
RESET client_min_messages;
SELECT 0 AS released \\gset
\\if :has_release
SELECT count(gangsched.job_released(id, true)) AS released FROM gangsched.gangs WHERE state = 'preempting' \\gset
\\endif
SELECT count(gangsched.job_started(job, node)) AS started FROM bench_to_start \\gset
\\echo KV round$i :finished :r_placed :r_workers_placed :r_ms :r_ran :r_considered :r_preempted :released :cpu_ms
SQL
    done
    cat <<'SQL'
SELECT count(*) FILTER (WHERE state = 'pending') AS pending, count(*) FILTER (WHERE state = 'running') AS running
  FROM gangsched.gangs \gset
\echo KV pending :pending
\echo KV running :running
SQL
  } > "$s"
  log "steady state: $ROUNDS rounds, ${CHURN} of running jobs finishing between rounds"
  run_script "$db" "$s"
  local ms=() fn=() cpu=() ph=() fin=0 pl=0 wk=0 pre=0 rel=0 line f p w m ran c pr rl cp cmed cmin
  mapfile -t ms < <(times_of "$s")
  mapfile -t ph < <(phases "$s")
  for ((i = 1; i <= ROUNDS; i++)); do
    line=$(kv "$s" "round$i"); read -r f p w m ran c pr rl cp <<<"$line"
    fn+=("$m") cpu+=("$cp"); fin=$((fin + f)) pl=$((pl + p)) wk=$((wk + w)) pre=$((pre + ${pr:-0})) rel=$((rel + ${rl:-0}))
    log "  round $i: ${ms[$((i - 1))]} ms (inside $m ms${ph[$((i - 1))]:+; phases ${ph[$((i - 1))]}}): $f finished, $p placed ($w workers), ${pr:-0} preempted, ${rl:-0} released, considered $c, ran=$ran"
  done
  local med mn mx p90 fmed
  read -r med mn mx p90 <<<"$(stats "${ms[@]}")"
  read -r fmed _ _ _ <<<"$(stats "${fn[@]}")"
  read -r cmed cmin _ _ <<<"$(stats "${cpu[@]}")"
  emit "$(printf '{"bench":"steady","nodes":%s,"gpus":%s,"pending":%s,"running":%s,"rounds":%s,"churn":%s,"finished_jobs":%s,"placed_jobs":%s,"placed_workers":%s,"preempted_jobs":%s,"round_ms":%s,"round_ms_p90":%s,"round_ms_min":%s,"round_ms_max":%s,"fn_ms":%s,"cpu_ms":%s,"cpu_ms_min":%s%s,"target_ms":50}' \
    "$M_N" $((M_N * GPN)) "$(kv "$s" pending)" "$(kv "$s" running0)" "$ROUNDS" "$CHURN" \
    "$fin" "$pl" "$wk" "$pre" "$med" "$p90" "$mn" "$mx" "$fmed" "$cmed" "$cmin" "$(phase_json "${ph[@]}")")"
}

# --- (e) submit throughput ---------------------------------------------------
# submit() against a plain INSERT of the same row into a scratch table LIKE
# gangsched.gangs INCLUDING ALL: "the same row" is literally the row submit()
# wrote (every column but the identity), so the comparison follows the schema.
submit_bench() {
  local tpl=$1 db="${PFX}_submit" s="$TMP/submit.sql" i sub=() ins=() all=()
  psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\" TEMPLATE \"$tpl\""
  # the pgbench runs below queue ~25,000 jobs for team3, beyond the default
  # gangsched.max_pending_per_team (10,000): lift the teams' limits where
  # the version has them, so submit() is measured, not its 53S07 refusal
  psql_ -d "$db" -c "DO \$\$BEGIN IF to_regprocedure('gangsched.set_team_limits(text,int,int)') IS NOT NULL THEN
                       PERFORM gangsched.set_team_limits(name, max_pending => 1000000) FROM gangsched.teams; END IF; END\$\$" >/dev/null
  {
    cat <<'SQL'
CREATE TABLE public.bench_scratch (LIKE gangsched.gangs INCLUDING ALL);
SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) AS cols
  FROM pg_catalog.pg_attribute
 WHERE attrelid = 'gangsched.gangs'::regclass AND attnum > 0 AND NOT attisdropped AND attidentity = ''
   AND attgenerated = '' \gset
SQL
    echo "\\set seed $SEED"
    echo "\\set first 1"
    echo "\\set last $SUBMIT_N"
    echo "\\set teams $TEAMS"
    echo "\\ir $HERE/shapes.sql"
    echo "ANALYZE bench_jobs;"
    for ((i = 1; i <= SUBMIT_REPS; i++)); do
      cat <<'SQL'
SELECT COALESCE(max(id), 0) AS id0 FROM gangsched.gangs \gset
\timing on
SELECT count(gangsched.submit(team => team, workers => workers, gpus => gpus, cpus => cpus, mem_gb => mem_gb,
                              net_gbps => net_gbps, name => format('%s-%s', kind, i), priority => priority,
                              preemptible => preemptible, group_size => group_size, stages => stages,
                              stage_span => stage_span))
  FROM (SELECT * FROM bench_jobs ORDER BY i) j \gset
\timing off
DROP TABLE IF EXISTS bench_rows;
CREATE TEMP TABLE bench_rows AS SELECT * FROM gangsched.gangs WHERE id > :id0 ORDER BY id;
ANALYZE bench_rows;
\timing on
INSERT INTO public.bench_scratch (:cols) SELECT :cols FROM bench_rows ORDER BY id;
\timing off
SQL
    done
  } > "$s"
  log "submit throughput: $SUBMIT_REPS × ($SUBMIT_N submit() calls, $SUBMIT_N INSERTs) in one statement each"
  run_script "$db" "$s"
  mapfile -t all < <(times_of "$s")
  for ((i = 0; i < SUBMIT_REPS; i++)); do
    sub+=("$(awk -v n="$SUBMIT_N" -v t="${all[$((2 * i))]}" 'BEGIN { printf "%.1f\n", n / t * 1000 }')")
    ins+=("$(awk -v n="$SUBMIT_N" -v t="${all[$((2 * i + 1))]}" 'BEGIN { printf "%.1f\n", n / t * 1000 }')")
    log "  rep $((i + 1)): submit ${all[$((2 * i))]} ms, INSERT ${all[$((2 * i + 1))]} ms"
  done
  local smed smin smax imed imin imax
  read -r smed smin smax _ <<<"$(stats "${sub[@]}")"
  read -r imed imin imax _ <<<"$(stats "${ins[@]}")"
  emit "$(printf '{"bench":"submit_set","nodes":%s,"gpus":%s,"pending":%s,"rows":%s,"reps":%s,"submit_rows_s":%s,"submit_rows_s_min":%s,"submit_rows_s_max":%s,"insert_rows_s":%s,"insert_rows_s_min":%s,"insert_rows_s_max":%s,"submit_us_per_row":%s,"insert_us_per_row":%s,"ratio":%s,"target_ratio":0.5}' \
    "${TPL_N[$tpl]}" $((TPL_N[$tpl] * GPN)) "${TPL_P[$tpl]}" "$SUBMIT_N" "$SUBMIT_REPS" \
    "$smed" "$smin" "$smax" "$imed" "$imin" "$imax" \
    "$(ratio 1000000 "$smed")" "$(ratio 1000000 "$imed")" "$(ratio "$smed" "$imed")")"

  # Separate statements, one transaction each, one client, through pgbench.
  if [ "$PGBENCH_T" -le 0 ]; then return; fi
  if ! command -v pgbench >/dev/null; then
    emit '{"bench":"submit_stmt","skipped":"pgbench not found"}'; return
  fi
  local shape sargs mode stps itps ptps jid portal=""
  # The portal variant: with tenancy (gangsched.add_member exists), the same
  # submit also runs as a LOGIN role bound to team3, the path a real portal
  # takes through the SECURITY DEFINER functions and their role checks.
  if [ "$(sql1 "$db" "SELECT pg_catalog.to_regprocedure('gangsched.add_member(name,text)') IS NOT NULL")" = t ]; then
    portal=$PORTAL_ROLE
    if [ "$(sql1 "$MAINT_DB" "SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = '$portal'")" = 0 ]; then
      psql_ -d "$MAINT_DB" -c "CREATE ROLE \"$portal\" LOGIN" && PORTAL_CREATED=1
    fi
    sql1 "$db" "SELECT gangsched.add_member('$portal', 'team3')" >/dev/null
  fi
  for shape in data_parallel pipeline_rack; do
    case $shape in
      data_parallel) sargs="workers => 8, gpus => 1, cpus => 10, mem_gb => 64, net_gbps => 25" ;;
      pipeline_rack) sargs="workers => 16, gpus => 1, cpus => 10, mem_gb => 64, net_gbps => 25, group_size => 2, stages => 4, stage_span => 'rack'" ;;
    esac
    echo "SELECT gangsched.submit(team => 'team3', $sargs, name => 'pgbench', priority => 10);" > "$TMP/submit.pgb"
    # the INSERT: the row one such submit() wrote, as literals
    jid=$(sql1 "$db" "SELECT gangsched.submit(team => 'team3', $sargs, name => 'pgbench', priority => 10)")
    psql_ -At -d "$db" -v jid="$jid" > "$TMP/insert.pgb" <<'SQL'
SELECT format('SELECT format(%L, %s) FROM gangsched.gangs WHERE id = %s',
              'INSERT INTO public.bench_scratch (' || string_agg(quote_ident(attname), ', ' ORDER BY attnum) || ') VALUES (%s);',
              'concat_ws('', '', ' || string_agg(format('quote_nullable(%I::text)', attname), ', ' ORDER BY attnum) || ')',
              :jid)
  FROM pg_catalog.pg_attribute
 WHERE attrelid = 'gangsched.gangs'::regclass AND attnum > 0 AND NOT attisdropped AND attidentity = ''
   AND attgenerated = '' \gexec
SQL
    for mode in simple prepared; do
      # submit (superuser), submit (portal, when there is one) and INSERT
      # (superuser) alternate, SUBMIT_REPS times each; medians
      local sl=() pl=() il=() r
      for ((r = 1; r <= SUBMIT_REPS; r++)); do
        sl+=("$(pgbench -n -M "$mode" -t "$PGBENCH_T" -f "$TMP/submit.pgb" "$db" 2>&1 | awk '/^tps = /{ printf "%.1f\n", $3; exit }')")
        if [ -n "$portal" ]; then
          pl+=("$(pgbench -n -M "$mode" -t "$PGBENCH_T" -U "$portal" -f "$TMP/submit.pgb" "$db" 2>&1 | awk '/^tps = /{ printf "%.1f\n", $3; exit }')")
        fi
        il+=("$(pgbench -n -M "$mode" -t "$PGBENCH_T" -f "$TMP/insert.pgb" "$db" 2>&1 | awk '/^tps = /{ printf "%.1f\n", $3; exit }')")
      done
      log "  pgbench $shape ($mode): submit ${sl[*]}/s${portal:+, as $portal ${pl[*]}/s}, INSERT ${il[*]}/s"
      read -r stps _ _ _ <<<"$(stats "${sl[@]}")"
      read -r itps _ _ _ <<<"$(stats "${il[@]}")"
      emit "$(printf '{"bench":"submit_stmt","nodes":%s,"gpus":%s,"pending":%s,"shape":"%s","protocol":"%s","clients":1,"transactions":%s,"reps":%s,"submit_rows_s":%s,"insert_rows_s":%s,"ratio":%s,"target_ratio":0.5,"caller":"superuser"}' \
        "${TPL_N[$tpl]}" $((TPL_N[$tpl] * GPN)) "${TPL_P[$tpl]}" "$shape" "$mode" "$PGBENCH_T" "$SUBMIT_REPS" \
        "${stps:-null}" "${itps:-null}" "$(ratio "${stps:-0}" "${itps:-0}")")"
      if [ -n "$portal" ]; then
        ptps=""
        if [ -n "$(printf '%s' "${pl[*]}" | tr -d ' ')" ]; then read -r ptps _ _ _ <<<"$(stats ${pl[@]})"; fi
        emit "$(printf '{"bench":"submit_stmt","nodes":%s,"gpus":%s,"pending":%s,"shape":"%s","protocol":"%s","clients":1,"transactions":%s,"reps":%s,"submit_rows_s":%s,"insert_rows_s":%s,"ratio":%s,"target_ratio":0.5,"caller":"portal","role":%s,"team":"team3"}' \
          "${TPL_N[$tpl]}" $((TPL_N[$tpl] * GPN)) "${TPL_P[$tpl]}" "$shape" "$mode" "$PGBENCH_T" "$SUBMIT_REPS" \
          "${ptps:-null}" "${itps:-null}" "$(ratio "${ptps:-0}" "${itps:-0}")" "$(jstr "$portal")")"
      fi
    done
  done
}

# log-log slope of "x ms" pairs: round time ∝ x^slope (1 = linear)
slope() {
  printf '%s\n' "$@" | awk 'NF == 2 && $1 > 0 && $2 > 0 { x = log($1); y = log($2); n++; sx += x; sy += y; sxx += x * x; sxy += x * y }
    END { if (n < 2 || n * sxx - sx * sx == 0) print "null"; else printf "%.3f\n", (n * sxy - sx * sy) / (n * sxx - sx * sx) }'
}

# --- main -------------------------------------------------------------------
log "server: $(psql_ -At -d "$MAINT_DB" -c 'SHOW server_version') at ${PGHOST:-default}:${PGPORT:-5432}; databases ${PFX}_*; cases $CASES"
# The extension is created once, in a database every template is copied
# from, so one run measures one version of its SQL even if another build is
# installed meanwhile.
EXT_DB="${PFX}_ext"
psql_ -d "$MAINT_DB" -c "CREATE DATABASE \"$EXT_DB\""
psql_ -d "$EXT_DB" -c "CREATE EXTENSION gangsched CASCADE"
if [ -n "$SETUP" ]; then psql_ -d "$EXT_DB" -f "$SETUP" >/dev/null; fi
ext_check "$EXT_DB"
template "$NODES" "$PENDING"
MAIN_TPL=$TEMPLATE
MAIN_KEY="" MAIN_JSON="" MAIN_MS=""

if has_case cold || has_case steady; then
  if have_round "$MAIN_TPL"; then
    measure_cold "$NODES" "$PENDING" "$REPS" copy
    if has_case cold; then
      emit "$(cold_json cold ",\"invariant_violations\":$M_VIOL,\"target_ms\":1000")"
      emit "$(printf '{"bench":"copy_floor","nodes":%s,"gpus":%s,"pending":%s,"placed_jobs":%s,"placed_workers":%s,"round_ms":%s,"copy_ms":%s,"copy_ms_min":%s,"copy_ms_max":%s,"ratio":%s,"ratio_min":%s,"ratio_max":%s,"target_ratio":2,"allocations":%s,"held_slots":%s,"events":%s,"copy_gangs_ms":%s,"gangs_rows":%s,"ratio_with_gangs":%s%s%s,"reps":%s}' \
        "$M_N" $((M_N * GPN)) "$R_PEND" "$R_PLACED" "$R_WORKERS" "$M_MS" "$M_CMS" "$M_CMS_MIN" "$M_CMS_MAX" \
        "$M_RATIO" "$M_RATIO_MIN" "$M_RATIO_MAX" "$C_ALLOC" "$C_SLOTS" "$C_EVENTS" "$M_CGMS" "$C_GANGS" \
        "$(ratio "$M_MS" "$(awk -v a="$M_CMS" -v b="$M_CGMS" 'BEGIN { print a + b }')")" "$M_WRATIO" "$M_PHASES" "$M_REPS")"
    fi
    # the scaling series reuses this point rather than measuring it again
    MAIN_KEY="$NODES:$PENDING" MAIN_JSON=$(cold_json __BENCH__) MAIN_MS=$M_MS
    if has_case steady; then steady "${PFX}_run"; fi
  else
    if has_case cold; then skip_json cold "$NODES" "$PENDING"; skip_json copy_floor "$NODES" "$PENDING"; fi
    if has_case steady; then skip_json steady "$NODES" "$PENDING"; fi
  fi
fi

if has_case scale; then
  xs_n=() xs_p=()
  for axis in nodes pending; do
    if [ $axis = nodes ]; then list=$SERIES_NODES; else list=$SERIES_PENDING; fi
    for v in $list; do
      if [ $axis = nodes ]; then n=$v p=$SERIES_AT_PENDING; else n=$SERIES_AT_NODES p=$v; fi
      if ! have_round "$MAIN_TPL"; then
        template "$n" "$p"; skip_json "scale_$axis" "$n" "$p"; continue
      fi
      if [ "$n:$p" = "$MAIN_KEY" ]; then
        emit "${MAIN_JSON/__BENCH__/scale_$axis}"; ms=$MAIN_MS
      else
        measure_cold "$n" "$p" "$SERIES_REPS"
        emit "$(cold_json "scale_$axis")"; ms=$M_MS
      fi
      if [ $axis = nodes ]; then xs_n+=("$n $ms"); else xs_p+=("$p $ms"); fi
    done
  done
  if have_round "$MAIN_TPL"; then
    emit "{\"bench\":\"scale_fit\",\"axis\":\"nodes\",\"pending\":$SERIES_AT_PENDING,\"points\":${#xs_n[@]},\"exponent\":$(slope "${xs_n[@]}"),\"target_exponent\":1}"
    emit "{\"bench\":\"scale_fit\",\"axis\":\"pending\",\"nodes\":$SERIES_AT_NODES,\"points\":${#xs_p[@]},\"exponent\":$(slope "${xs_p[@]}"),\"target_exponent\":1}"
  fi
fi

if has_case submit; then
  submit_bench "$MAIN_TPL"
fi
# --- (f) reading the metrics view ---------------------------------------------
# On the main case's state after a round and its jobs' start, VACUUMed: the
# whole view (unfolded: the submits' deltas not folded yet), the families
# through the view, and each query of the exporter (x_*); then on a copy
# right after a round (after_round_view).
# metrics_measure DB KEY FILE: FILE's statement read METRICS_REPS times in one
# session; adds "KEY_ms" (wall-clock median, \timing), "KEY_ms_min" and
# "KEY_cpu_ms" (the backend's CPU time per read, /proc/self/schedstat) to json
metrics_measure() {
  local db=$1 key=$2 f=$3 s="$TMP/metrics.sql" stmt med mn i
  stmt=$(cat "$f")
  { echo '\o /dev/null'; echo "$stmt;"
    echo "SELECT pg_catalog.split_part(pg_catalog.pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint AS cpu0 \\gset"
    echo '\timing on'
    for ((i = 0; i < METRICS_REPS; i++)); do echo "$stmt;"; done
    echo '\timing off'
    echo "SELECT round((pg_catalog.split_part(pg_catalog.pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint - :cpu0) / 1e6 / $METRICS_REPS, 3) AS cpu \\gset"
    echo '\o'; echo '\echo KV cpu :cpu'; } > "$s"
  run_script "$db" "$s"
  read -r med mn _ _ <<<"$(stats $(times_of "$s"))"
  json+=",\"${key}_ms\":$med,\"${key}_ms_min\":$mn,\"${key}_cpu_ms\":$(kv "$s" cpu)"
}

metrics_read() {
  local tpl=$1 db="${PFX}_metrics" s="$TMP/metrics.sql" i e
  if [ "$(sql1 "$tpl" "SELECT to_regclass('gangsched.metrics') IS NOT NULL")" != t ]; then
    emit '{"bench":"metrics_read","skipped":"no gangsched.metrics"}'; return
  fi
  psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\" TEMPLATE \"$tpl\""
  sql1 "$db" "SELECT placed FROM gangsched.run_round()" >/dev/null
  sql1 "$db" "SELECT count(gangsched.job_started(job, node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) s" >/dev/null
  psql_ -d "$db" -c "VACUUM ANALYZE"
  # name|statement: the whole view, its plan alone, and the exporter's families
  local entries
  entries=$(cat <<'SQL'
view|SELECT * FROM gangsched.metrics
plan|EXPLAIN SELECT * FROM gangsched.metrics
pool|SELECT * FROM gangsched.metrics WHERE name LIKE 'gangsched\_pool\_%'
nodes|SELECT * FROM gangsched.metrics WHERE name = 'gangsched_nodes'
jobs_live|SELECT * FROM gangsched.metrics WHERE name = 'gangsched_jobs_live'
team|SELECT * FROM gangsched.metrics WHERE name LIKE 'gangsched\_team\_%'
queue_wait|SELECT * FROM gangsched.metrics WHERE name LIKE 'gangsched\_queue\_wait\_%'
worker|SELECT * FROM gangsched.metrics WHERE name LIKE 'gangsched\_round\_%' OR name LIKE 'gangsched\_worker\_%'
SQL
)
  local deltas0 deltas1 fold json="" key stmt q
  deltas0=$(sql1 "$db" "SELECT count(*) FROM gangsched.metric_deltas")
  for phase in unfolded folded; do
    if [ $phase = folded ]; then
      fold=$(sql1 "$db" "SELECT to_regprocedure('gangsched._metrics_fold()') IS NOT NULL")
      if [ "$fold" = t ]; then sql1 "$db" "SELECT gangsched._metrics_fold()" >/dev/null; fi
      psql_ -d "$db" -c "VACUUM ANALYZE gangsched.metric_deltas, gangsched.metric_counters"
    fi
    while IFS='|' read -r key stmt; do
      if [ $phase = unfolded ] && [ "$key" != view ]; then continue; fi
      if [ $phase = unfolded ]; then key=view_unfolded; fi
      printf '%s\n' "$stmt" > "$TMP/metrics_stmt.sql"
      metrics_measure "$db" "$key" "$TMP/metrics_stmt.sql"
    done <<<"$entries"
  done
  # the exporter's own queries (contrib/prometheus/queries.yaml, each asking
  # metric_series() for its families), but the invariants' (cached by the
  # exporter for 5 minutes: tens of milliseconds, docs/monitoring.md)
  q="$HERE/../contrib/prometheus/queries.yaml"
  if [ -f "$q" ]; then
    rm -f "$TMP"/xq_*.sql
    awk -v dir="$TMP" '
      /^[a-z_]+:$/ { key = substr($0, 1, length($0) - 1); inq = 0; next }
      /^  query: \|$/ { inq = 1; next }
      inq && /^    / { print substr($0, 5) > (dir "/xq_" key ".sql"); next }
      inq { inq = 0 }' "$q"
    rm -f "$TMP/xq_gangsched_invariants.sql"
    for f in "$TMP"/xq_*.sql; do
      [ -f "$f" ] || continue
      key=$(basename "$f" .sql); key=x_${key#xq_}
      metrics_measure "$db" "$key" "$f"
    done
  fi
  deltas1=$(sql1 "$db" "SELECT count(*) FROM gangsched.metric_deltas")
  # right after a round as the worker leaves it (the round's deltas folded),
  # before a VACUUM sets the pages it wrote all-visible (autovacuum off on
  # the copy's two tables): the live jobs and open allocations on those
  # pages are checked in the heap (docs/monitoring.md#cost)
  local ar="${PFX}_metrics_ar"
  psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"$ar\" WITH (FORCE)" -c "CREATE DATABASE \"$ar\" TEMPLATE \"$tpl\""
  psql_ -d "$ar" -c "ALTER TABLE gangsched.gangs SET (autovacuum_enabled = off)" \
        -c "ALTER TABLE gangsched.allocations SET (autovacuum_enabled = off)"
  sql1 "$ar" "SELECT placed FROM gangsched.run_round()" >/dev/null
  sql1 "$ar" "SELECT count(gangsched.job_started(job, node)) FROM (SELECT DISTINCT job, node FROM gangsched.placements) s" >/dev/null
  fold=$(sql1 "$ar" "SELECT to_regprocedure('gangsched._metrics_fold()') IS NOT NULL")
  if [ "$fold" = t ]; then sql1 "$ar" "SELECT gangsched._metrics_fold()" >/dev/null; fi
  printf '%s\n' "SELECT * FROM gangsched.metrics" > "$TMP/metrics_stmt.sql"
  metrics_measure "$ar" after_round_view "$TMP/metrics_stmt.sql"
  psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"$ar\" WITH (FORCE)"
  # how the live jobs were read: the SQL view's plan shows a scan of gangs;
  # the C pass (gangsched.metric_series, src/metrics.c) reads gangs itself
  local live_scan
  live_scan=$(psql_ -At -d "$db" -c "EXPLAIN SELECT * FROM gangsched.metrics WHERE name = 'gangsched_jobs_live'" \
              | grep -o -m1 -E '(Index Only Scan|Seq Scan|Bitmap Heap Scan|Index Scan) (using [a-z_]+ )?on gangs\b|Function Scan on metric_series' || echo unknown)
  json+=",\"live_jobs_scan\":$(jstr "$live_scan")"
  log "metrics: $(echo "$json" | tr ',' ' ')"
  emit "$(printf '{"bench":"metrics_read","nodes":%s,"gpus":%s,"pending":%s,"rows":%s,"deltas_unfolded":%s,"deltas_folded":%s,"reps":%s%s,"settings":%s}' \
    "$NODES" $((NODES * GPN)) "$(sql1 "$db" "SELECT count(*) FROM gangsched.gangs WHERE state = 'pending'")" \
    "$(sql1 "$db" "SELECT count(*) FROM gangsched.metrics")" "$deltas0" "$deltas1" "$METRICS_REPS" "$json" \
    "$(jstr "$(sql1 "$db" "SELECT string_agg(name || '=' || setting, ',' ORDER BY name) FROM pg_settings WHERE name IN ('jit', 'jit_above_cost', 'work_mem', 'shared_buffers')")")")"
}

if has_case metrics; then
  metrics_read "$MAIN_TPL"
fi
log "done"
