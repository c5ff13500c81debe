#!/usr/bin/env bash
# bench/fairness.sh — issue 4's benchmark: the cost of the fair queue order.
#
# The issue-3 synthetic case (bench/cluster.sql, bench/jobs.sql: 2,048 nodes ×
# 8 GPUs, zone.spine.rack, 10 teams whose equal quotas sum to the cluster,
# 20,000 pending mixed gangs), scheduled with
#   SET gangsched.queue_order = 'fair'      (the default)
#   SET gangsched.queue_order = 'priority'  (the plain order)
# side by side, on the same database state each time:
#
#   cold    one round filling the empty cluster, each repetition on a fresh
#           CREATE DATABASE … TEMPLATE copy, as an autocommit statement timed
#           from the client (so with its commit); the two policies alternate
#           (ABBA) so drift on the shared machine hits both alike.
#   steady  two chains of states, one advanced by fair rounds and one by
#           priority rounds (each from its own committed cold round, every
#           placed job started). Each step: 1 % of the running jobs finish,
#           then the round is measured under BOTH policies on that same state
#           (BEGIN; SET LOCAL gangsched.queue_order; run_round(); ROLLBACK —
#           the statement is timed, so without commit), then the chain's own
#           policy runs the round for real (committed, also timed) and what it
#           placed is started. Each chain's database is ANALYZEd once its
#           cold round's jobs are started, as autovacuum would within a
#           minute (--no-analyze skips it; bench/preempt_repro_stale_stats.sql
#           shows what stale statistics cost).
#
# Prints one JSON object per line on stdout (progress on stderr). Runs against
# the server named by PGHOST/PGPORT/PGUSER (superuser; the extension
# installed); creates databases gsf<pid>_* and drops them at exit.
#
# Usage: bash bench/fairness.sh [--quick] [options]; --help lists them.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)

NODES=2048 GPN=8 RACK_NODES=8 SPINE_RACKS=16 ZONE_SPINES=4 FRAC_EVERY=8
TEAMS=10 PENDING=20000 SEED=0.42
REPS=5 ROUNDS=20 CHURN=0.01 CASES="cold,steady" KEEP=0 PERF=0 ANALYZE=1
MAINT_DB=${BENCH_MAINTENANCE_DB:-postgres}
EXT_TPL=${GS_EXT_TEMPLATE:-}

usage() {
  cat >&2 <<USAGE
usage: bash bench/fairness.sh [options]
  --quick           3 cold repetitions per policy, 8 steady steps per chain
  --cases LIST      cold,steady or a subset [$CASES]
  --nodes N         [$NODES]
  --pending N       [$PENDING]
  --teams N         [$TEAMS]
  --seed S          setseed() argument of the queue [$SEED]
  --reps N          cold rounds per policy [$REPS]
  --rounds N        steady steps per chain [$ROUNDS]
  --churn F         fraction of running jobs finishing between steps [$CHURN]
  --no-analyze      do not ANALYZE a chain's database after its cold round
                    (rounds then run on statistics that say nothing runs,
                    until autovacuum comes by: see
                    bench/preempt_repro_stale_stats.sql)
  --perf            also profile 5 steady rounds per policy with perf (root,
                    perf; GS_SO=path/to/gangsched.so resolves the extension's
                    symbols when the installed file was replaced after the
                    server started)
  --ext-template DB  clone DB (a database where CREATE EXTENSION gangsched
                    CASCADE was done) instead of creating the extension; also
                    \$GS_EXT_TEMPLATE. Useful when the machine's one
                    PostgreSQL install is shared and its extension files may
                    no longer match the library this server preloaded
  --keep            keep the databases
USAGE
}
while [ $# -gt 0 ]; do
  case "$1" in
    --) ;;
    --quick) REPS=3 ROUNDS=8 ;;
    --cases) CASES=$2; shift ;;
    --nodes) NODES=$2; shift ;;
    --pending) PENDING=$2; shift ;;
    --teams) TEAMS=$2; shift ;;
    --seed) SEED=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --churn) CHURN=$2; shift ;;
    --ext-template) EXT_TPL=$2; shift ;;
    --keep) KEEP=1 ;;
    --perf) PERF=1 ;;
    --no-analyze) ANALYZE=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/fairness.sh: unknown option $1" >&2; usage; exit 2 ;;
  esac
  shift
done
has_case() { case ",$CASES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# --- plumbing ---------------------------------------------------------------
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
PFX="gsf$$"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gsfair.XXXXXX")
log() { printf '[fair %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
sql1() { local db=$1; shift; psql_ -At -d "$db" -c "$*"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

cleanup() {
  local rc=$?
  if [ "$KEEP" -eq 0 ]; then
    for db in $(psql_ -At -d "$MAINT_DB" -c "SELECT datname FROM pg_database WHERE datname LIKE '${PFX}\_%'" 2>/dev/null); do
      psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
    done
  else
    log "kept databases: $(psql_ -At -d "$MAINT_DB" -c "SELECT string_agg(datname, ' ') FROM pg_database WHERE datname LIKE '${PFX}\_%'" 2>/dev/null)"
  fi
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_script() {  # db script: stdout → script.out, stderr → script.err
  if ! psql_ -At -d "$1" -f "$2" > "$2.out" 2> "$2.err"; then
    cat "$2.err" >&2; return 1
  fi
  grep -v 'DEBUG: ' "$2.err" >&2 || true
}
times_of() { awk '/^Time: /{ print $2 }' "$1.out"; }
kv() { awk -v k="$2" '$1 == "KV" && $2 == k { $1 = ""; $2 = ""; sub(/^  /, ""); print; exit }' "$1.out"; }
kv_all() { awk -v k="$2" '$1 == "KV" && $2 == k { $1 = ""; $2 = ""; sub(/^  /, ""); print }' "$1.out"; }
# the round's DEBUG1 line, one "time_rules load decide write" per round, in order
phases() {
  grep -o 'time rules [0-9.]* ms, load [0-9.]* ms, decide [0-9.]* ms, write [0-9.]* ms' "$1.err" |
    awk '{ print $3, $6, $9, $12 }' || true
}
# stats v… → "median min max"
stats() {
  printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
    END { n = NR; if (n == 0) { print "null null null"; exit }
          med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
          printf "%.3f %.3f %.3f\n", med, a[1], a[n] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0 || a == "null" || b == "null") print "null"; else printf "%.3f\n", a / b }'; }
# phase_json "tr load decide write"… → "phase_ms":{…} (medians per phase)
phase_json() {
  local i k v out=""
  if [ $# -eq 0 ]; then printf '"phase_ms":null'; return; fi
  for i in 1 2 3 4; do
    k=$(echo "time_rules load decide write" | cut -d' ' -f$i)
    v=$(stats $(printf '%s\n' "$@" | awk -v i=$i '{ print $i }') | cut -d' ' -f1)
    out="$out${out:+,}\"$k\":$v"
  done
  printf '"phase_ms":{%s}' "$out"
}
# md5 (12 hex) of the gangsched.so the server actually runs (preloaded by the
# postmaster; read through /proc, needs the same host and root or the
# server's user), else of the installed file; "+replaced" when the installed
# file is no longer the one the server loaded.
# create_ext_db DB: a new database with the extension, cloned from
# EXT_TPL when given.
create_ext_db() {
  if [ -n "$EXT_TPL" ]; then
    psql_ -d "$MAINT_DB" -c "CREATE DATABASE \"$1\" TEMPLATE \"$EXT_TPL\""
  else
    psql_ -d "$MAINT_DB" -c "CREATE DATABASE \"$1\""
    if ! psql_ -d "$1" -c "CREATE EXTENSION gangsched CASCADE"; then
      echo "CREATE EXTENSION failed: the installed extension files may belong to another build than the library this server preloaded (gangsched.so $(loaded_so)); restart the server after installing, or pass --ext-template" >&2
      return 1
    fi
  fi
}
loaded_so() {
  local dd pid range f sig inst
  inst=$(md5sum "$(pg_config --pkglibdir 2>/dev/null)/gangsched.so" 2>/dev/null | cut -c1-12)
  dd=$(psql -X -At -d "$MAINT_DB" -c 'SHOW data_directory' 2>/dev/null) || true
  pid=$(head -1 "$dd/postmaster.pid" 2>/dev/null) || true
  range=$(grep -m1 'gangsched\.so' "/proc/$pid/maps" 2>/dev/null | cut -d' ' -f1) || true
  f="/proc/$pid/map_files/$range"
  if [ -n "$range" ] && sig=$(md5sum "$f" 2>/dev/null | cut -c1-12) && [ -n "$sig" ]; then
    if [ "$sig" != "$inst" ]; then echo "$sig+replaced"; else echo "$sig"; fi
  else
    echo "${inst:-unknown}?"
  fi
}

# --- the template: cluster + queue, generated once ---------------------------
TPL="${PFX}_tpl"
SO0=$(loaded_so)
log "server $(psql_ -At -d "$MAINT_DB" -c 'SHOW server_version') at ${PGHOST:-default}:${PGPORT:-5432}; gangsched.so $SO0; databases ${PFX}_*"
t0=$(now_ms)
create_ext_db "$TPL"
psql_ -d "$TPL" -v nodes="$NODES" -v gpn="$GPN" -v rack_nodes="$RACK_NODES" -v spine_racks="$SPINE_RACKS" \
      -v zone_spines="$ZONE_SPINES" -v frac_every="$FRAC_EVERY" -v teams="$TEAMS" -f "$HERE/cluster.sql" >/dev/null
psql_ -d "$TPL" -c "VACUUM ANALYZE"
t1=$(now_ms)
psql_ -d "$TPL" -v seed="$SEED" -v first=1 -v last="$PENDING" -v teams="$TEAMS" -f "$HERE/jobs.sql" >/dev/null
psql_ -d "$TPL" -c "VACUUM (FREEZE, ANALYZE)"
t2=$(now_ms)
read -r Q_TEAMS Q_SUM CAP_GPUS <<<"$(sql1 "$TPL" "SELECT (SELECT count(*) FROM gangsched.teams), (SELECT sum(gpus) FROM gangsched.quotas), (SELECT sum(gpus) FROM gangsched.nodes)" | tr '|' ' ')"
log "template $TPL: $NODES nodes ($CAP_GPUS GPUs), $Q_TEAMS teams with quotas summing to $Q_SUM GPUs, $PENDING pending; cluster $((t1 - t0)) ms, queue $((t2 - t1)) ms"
printf '{"bench":"fair_generate","nodes":%s,"gpus":%s,"pending":%s,"teams":%s,"quota_gpus_sum":%s,"cluster_ms":%s,"submit_ms":%s,"so":"%s"}\n' \
  "$NODES" "$CAP_GPUS" "$PENDING" "$Q_TEAMS" "$Q_SUM" $((t1 - t0)) $((t2 - t1)) "$SO0"

# Warm the new backend's catalog caches and the clone's pages; the state
# (empty cluster, full queue) is unchanged.
WARM=$(cat <<'SQL'
\timing off
SELECT count(*) FROM gangsched.nodes \gset
SELECT count(*) FROM gangsched.devices \gset
SELECT count(*) FROM gangsched.node_classes, gangsched.domain_classes, gangsched.quotas, gangsched.teams, gangsched.pools \gset
SELECT count(*) FROM gangsched.gangs WHERE state = 'pending' \gset
SELECT count(*) FROM gangsched.allocations, gangsched.held_slots, gangsched.holds \gset
SQL
)

# --- cold rounds ------------------------------------------------------------
# cold_round POLICY DB: clone the template into DB, one autocommit round
# under POLICY; sets C_MS (client, with commit) C_FN C_PLACED C_GPUS C_PHASE.
cold_round() {
  local pol=$1 db=$2 s="$TMP/cold_$1.sql"
  psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\" TEMPLATE \"$TPL\""
  {
    echo "$WARM"
    cat <<SQL
SET gangsched.queue_order = '$pol';
SET client_min_messages = debug1;
\\timing on
SELECT * FROM gangsched.run_round() \\gset r_
\\timing off
RESET client_min_messages;
\\echo KV res :r_ran :r_considered :r_placed :r_workers_placed :r_preempted :r_ms
SELECT COALESCE(sum(gpus), 0) AS gpus FROM gangsched.allocations WHERE upper_inf(during) \\gset a_
\\echo KV gpus :a_gpus
SQL
  } > "$s"
  run_script "$db" "$s"
  local ran cons pl wk pre fn
  read -r ran cons pl wk pre fn <<<"$(kv "$s" res)"
  [ "$ran" = t ] || { echo "bench/fairness.sh: run_round() did not run" >&2; exit 1; }
  C_MS=$(times_of "$s" | head -1) C_FN=$fn C_PLACED=$pl C_CONS=$cons C_GPUS=$(kv "$s" gpus) C_PHASE=$(phases "$s" | head -1)
  log "  cold $pol: ${C_MS} ms (inside ${C_FN} ms; time rules, load, decide, write: ${C_PHASE} ms); considered $cons, placed $pl jobs, $C_GPUS GPUs"
}

declare -A CHAIN_DB=()
if has_case cold || has_case steady; then
  declare -A CMS=() CFN=() CPH=() CPL=() CGP=() CCO=()
  pair_ratios=()
  for ((i = 1; i <= REPS; i++)); do
    if [ $((i % 2)) -eq 1 ]; then order="priority fair"; else order="fair priority"; fi
    declare -A this=()
    for pol in $order; do
      log "cold round $i/$REPS, $pol"
      # the last repetition's databases start the steady chains
      if [ "$i" -eq "$REPS" ]; then db="${PFX}_chain_$pol"; else db="${PFX}_cold"; fi
      cold_round "$pol" "$db"
      CMS[$pol]="${CMS[$pol]:-} $C_MS" CFN[$pol]="${CFN[$pol]:-} $C_FN"
      CPH[$pol]="${CPH[$pol]:-}${C_PHASE:+$C_PHASE;}"
      CPL[$pol]=$C_PLACED CGP[$pol]=$C_GPUS CCO[$pol]=$C_CONS
      this[$pol]=$C_MS
      if [ "$i" -eq "$REPS" ]; then CHAIN_DB[$pol]=$db; fi
    done
    pair_ratios+=("$(ratio "${this[fair]}" "${this[priority]}")")
    unset this
  done
  psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"${PFX}_cold\" WITH (FORCE)"
  if has_case cold; then
    for pol in priority fair; do
      read -r med mn mx <<<"$(stats ${CMS[$pol]})"
      read -r fmed _ _ <<<"$(stats ${CFN[$pol]})"
      IFS=';' read -r -a ph <<<"${CPH[$pol]%;}"
      printf '{"bench":"fair_cold","policy":"%s","nodes":%s,"gpus":%s,"pending":%s,"considered":%s,"placed_jobs":%s,"placed_gpus":%s,"round_ms":%s,"round_ms_min":%s,"round_ms_max":%s,"fn_ms":%s,%s,"reps":%s,"with_commit":true}\n' \
        "$pol" "$NODES" "$CAP_GPUS" "$PENDING" "${CCO[$pol]}" "${CPL[$pol]}" "${CGP[$pol]}" "$med" "$mn" "$mx" "$fmed" "$(phase_json "${ph[@]}")" "$REPS"
      eval "MED_$pol=$med"
    done
    read -r pr prmin prmax <<<"$(stats "${pair_ratios[@]}")"
    printf '{"bench":"fair_cold_ratio","nodes":%s,"pending":%s,"fair_over_priority":%s,"paired_ratio_median":%s,"paired_ratio_min":%s,"paired_ratio_max":%s,"reps":%s,"target_max":1.2}\n' \
      "$NODES" "$PENDING" "$(ratio "$MED_fair" "$MED_priority")" "$pr" "$prmin" "$prmax" "$REPS"
  fi
fi

# --- steady state ------------------------------------------------------------
steady_chain() {  # POLICY (the chain's own) DB
  local own=$1 db=$2 s="$TMP/steady_$1.sql" i a b
  {
    echo "$WARM"
    cat <<'SQL'
SELECT setseed(0.5) AS seeded \gset
CREATE TEMP VIEW bench_to_start AS
SELECT a.job, n.name AS node
  FROM (SELECT DISTINCT a.job, a.node_id
          FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
         WHERE g.state = 'placed' AND upper_inf(a.during)) a
  JOIN gangsched.nodes n ON n.id = a.node_id;
SELECT count(gangsched.job_started(job, node)) AS started FROM bench_to_start \gset
SELECT count(*) AS running FROM gangsched.gangs WHERE state = 'running' \gset
\echo KV running0 :running
SQL
    if [ "$ANALYZE" -eq 1 ]; then echo "ANALYZE;"; fi
    for ((i = 1; i <= ROUNDS; i++)); do
      if [ $((i % 2)) -eq 1 ]; then a=priority b=fair; else a=fair b=priority; fi
      cat <<SQL
SELECT count(gangsched.job_finished(id, true)) AS finished
  FROM (SELECT id FROM gangsched.gangs WHERE state = 'running' ORDER BY random()
         LIMIT greatest(1, round($CHURN * (SELECT count(*) FROM gangsched.gangs WHERE state = 'running')))) f \\gset
SELECT count(*) AS pending FROM gangsched.gangs WHERE state = 'pending' \\gset
SQL
      for pol in $a $b; do
        cat <<SQL
BEGIN;
SET LOCAL gangsched.queue_order = '$pol';
SET LOCAL client_min_messages = debug1;
\\echo PH $pol
\\timing on
SELECT * FROM gangsched.run_round() \\gset r_
\\timing off
ROLLBACK;
\\echo KV m$i$pol :r_placed :r_ms
SQL
      done
      cat <<SQL
SET gangsched.queue_order = '$own';
SET client_min_messages = debug1;
\\timing on
SELECT * FROM gangsched.run_round() \\gset r_
\\timing off
RESET client_min_messages;
SELECT count(gangsched.job_started(job, node)) AS started FROM bench_to_start \\gset
\\echo KV step$i :finished :pending :r_placed :r_ms $a $b
SQL
    done
    echo "SELECT count(*) AS viol FROM gangsched.check_invariants() \\gset"
    echo "\\echo KV viol :viol"
  } > "$s"
  log "steady chain '$own': $ROUNDS steps, ${CHURN} of running jobs finishing before each"
  run_script "$db" "$s"
  # Every step prints three times (a, b, own) and three DEBUG1 lines, in order.
  local tms=() phs=() line f p pl m
  mapfile -t tms < <(times_of "$s")
  mapfile -t phs < <(phases "$s")
  for ((i = 1; i <= ROUNDS; i++)); do
    read -r f p pl m a b <<<"$(kv "$s" "step$i")"
    local k=$(( (i - 1) * 3 ))
    ST_MS[$a:$own]="${ST_MS[$a:$own]:-} ${tms[$k]}"
    ST_MS[$b:$own]="${ST_MS[$b:$own]:-} ${tms[$((k + 1))]}"
    ST_PH[$a:$own]="${ST_PH[$a:$own]:-}${phs[$k]:-};"
    ST_PH[$b:$own]="${ST_PH[$b:$own]:-}${phs[$((k + 1))]:-};"
    ST_PL[$a:$own]=$(( ${ST_PL[$a:$own]:-0} + $(kv "$s" "m$i$a" | awk '{ print $1 }') ))
    ST_PL[$b:$own]=$(( ${ST_PL[$b:$own]:-0} + $(kv "$s" "m$i$b" | awk '{ print $1 }') ))
    ST_PAIR[$own]="${ST_PAIR[$own]:-} $(ratio "$([ $a = fair ] && echo "${tms[$k]}" || echo "${tms[$((k + 1))]}")" "$([ $a = priority ] && echo "${tms[$k]}" || echo "${tms[$((k + 1))]}")")"
    ST_COMMIT[$own]="${ST_COMMIT[$own]:-} ${tms[$((k + 2))]}"
    ST_PEND[$own]=$p ST_FIN[$own]=$(( ${ST_FIN[$own]:-0} + f ))
    log "  step $i ($own chain): $f finished, $p pending; $a ${tms[$k]} ms, $b ${tms[$((k + 1))]} ms (rolled back); committed $own round ${tms[$((k + 2))]} ms placed $pl [phases $a: ${phs[$k]:-?} | $b: ${phs[$((k + 1))]:-?}]"
  done
  ST_RUN0[$own]=$(kv "$s" running0) ST_VIOL[$own]=$(kv "$s" viol)
}

if has_case steady; then
  declare -A ST_MS=() ST_PH=() ST_PL=() ST_PAIR=() ST_COMMIT=() ST_PEND=() ST_FIN=() ST_RUN0=() ST_VIOL=()
  for own in fair priority; do
    steady_chain "$own" "${CHAIN_DB[$own]}"
  done
  for own in fair priority; do
    for pol in priority fair; do
      read -r med mn mx <<<"$(stats ${ST_MS[$pol:$own]})"
      IFS=';' read -r -a ph <<<"${ST_PH[$pol:$own]%;}"
      printf '{"bench":"fair_steady","policy":"%s","states_from":"%s","nodes":%s,"gpus":%s,"pending":%s,"running":%s,"churn":%s,"placed_jobs":%s,"round_ms":%s,"round_ms_min":%s,"round_ms_max":%s,%s,"reps":%s,"with_commit":false}\n' \
        "$pol" "$own" "$NODES" "$CAP_GPUS" "${ST_PEND[$own]}" "${ST_RUN0[$own]}" "$CHURN" "${ST_PL[$pol:$own]}" "$med" "$mn" "$mx" \
        "$(phase_json "${ph[@]}")" "$ROUNDS"
      eval "SMED_${pol}_$own=$med"
    done
    read -r cmed cmn cmx <<<"$(stats ${ST_COMMIT[$own]})"
    read -r pr prmin prmax <<<"$(stats ${ST_PAIR[$own]})"
    eval "fm=\$SMED_fair_$own pm=\$SMED_priority_$own"
    printf '{"bench":"fair_steady_ratio","states_from":"%s","nodes":%s,"fair_over_priority":%s,"paired_ratio_median":%s,"paired_ratio_min":%s,"paired_ratio_max":%s,"committed_%s_round_ms":%s,"committed_round_ms_min":%s,"committed_round_ms_max":%s,"finished_jobs":%s,"invariant_violations":%s,"reps":%s,"target_max":1.2}\n' \
      "$own" "$NODES" "$(ratio "$fm" "$pm")" "$pr" "$prmin" "$prmax" "$own" "$cmed" "$cmn" "$cmx" "${ST_FIN[$own]}" "${ST_VIOL[$own]}" "$ROUNDS"
  done
fi

# --- optional: where the time goes, per policy (perf) -------------------------
perf_top() {  # perf.data → top symbols on stderr, extension addresses resolved with GS_SO
  local data=$1 txt="$1.txt"
  perf report -q -i "$data" --no-children -g none --sort dso,symbol --stdio 2>/dev/null | grep '%' > "$txt" || true
  if [ -n "${GS_SO:-}" ] && [ -f "$GS_SO" ]; then
    {
      awk '$2 ~ /gangsched/ && $0 ~ /0x[0-9a-f]+/ { for (i = 1; i <= NF; i++) if ($i ~ /^0x[0-9a-f]+$/) print $1, $i }' "$txt" |
        while read -r pct addr; do printf '%s %s\n' "${pct%\%}" "$(addr2line -f -e "$GS_SO" "$addr" | head -1)"; done |
        awk '{ s[$2] += $1 } END { for (f in s) printf "%6.2f%%  gangsched.so  %s\n", s[f], f }'
      awk '!($2 ~ /gangsched/ && $0 ~ /0x[0-9a-f]+/) { printf "%6.2f%%  %s  %s\n", $1 + 0, $2, $NF == "-" ? $(NF-2) : $NF }' "$txt"
    } | sort -g -r | head -20 | sed "s/^/    /" >&2 || true
  else
    head -20 "$txt" | sed "s/^/    /" >&2 || true
  fi
}
if [ "$PERF" -eq 1 ] && has_case steady; then
  if command -v perf >/dev/null && [ "$(id -u)" -eq 0 ]; then
    chmod 755 "$TMP"
    for pol in priority fair; do
      s="$TMP/perf_$pol.sql"
      {
        echo "$WARM"
        echo "SELECT pg_backend_pid() AS pid \\gset"
        echo "\\setenv GS_BENCH_PID :pid"
        echo "\\! perf record -q -F 4999 -g -p \$GS_BENCH_PID -o $TMP/perf_$pol.data >/dev/null 2>&1 & echo \$! > $TMP/perf.pid; sleep 1"
        for i in 1 2 3 4 5; do
          echo "BEGIN; SET LOCAL gangsched.queue_order = '$pol'; SELECT * FROM gangsched.run_round() \\gset"
          echo "ROLLBACK;"
        done
        echo "\\! kill -INT \$(cat $TMP/perf.pid); sleep 2"
      } > "$s"
      run_script "${CHAIN_DB[fair]}" "$s"
      log "perf, 5 steady rounds under '$pol' (states of the fair chain), self time:"
      perf_top "$TMP/perf_$pol.data"
    done
  else
    log "perf: skipped (needs root and perf)"
  fi
fi

SO1=$(loaded_so)
if [ "${SO1%%+*}" != "${SO0%%+*}" ]; then
  log "WARNING: the server's gangsched.so changed during the run ($SO0 -> $SO1); numbers may mix builds"
  printf '{"bench":"fair_warning","so_before":"%s","so_after":"%s"}\n' "$SO0" "$SO1"
fi
printf '{"bench":"fair_env","date":"%s","nproc":%s,"loadavg_start":"%s","loadavg_end":"%s","server":"%s","so":"%s"}\n' \
  "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(psql_ -At -d "$MAINT_DB" -c 'SHOW server_version' | cut -d' ' -f1)" "$SO0"
log "done"
