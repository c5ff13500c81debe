#!/usr/bin/env bash
# bench/preempt.sh — issue 5's benchmark: victim selection under reclaim.
#
# State (bench/cluster.sql with 2 teams, bench/preempt_fill.sql): 2,000 nodes
# × 8 GPUs = 16,000 GPUs, team1 (A) and team2 (B) each with a nominal quota of
# half the cluster. B fills the whole cluster (non-preemptible jobs first,
# within its quota; then preemptible gangs of 1–64 GPUs; then one-GPU
# fillers), so half of what runs is borrowed. Every job is started at t0; the
# scheduler's clock (gangsched.clock_override) moves to t1 = t0 + 2 h, past
# gangsched.min_runtime; 70 % of B's jobs report a checkpoint in [t0, t1].
# Then A submits 100 gangs of 8–64 GPUs, all within its nominal quota
# (bench/preempt_reclaim.sql).
#
# Measured, in one session, on that same state each time (BEGIN; SET LOCAL …;
# run_round(); count; ROLLBACK; VACUUM of the touched tables):
#   - the round with gangsched.preemption = on and = off, alternating (the
#     first pair is a discarded warm-up), timed from the client (no commit);
#   - the round's DEBUG1 line "gangsched round: time rules … load … decide …
#     write …" for each;
#   - victim selection = round(on) − round(off), per pair and of the
#     medians; decisions/s = nominations / that time; the same from the
#     decide phases alone (decide(on) − decide(off));
#   - one more round with preemption on at DEBUG2 (the per-statement lines:
#     loading the running jobs, writing holds, nominations, victims).
# Then the round runs for real (BEGIN; run_round(); bench/preempt_check.sql;
# COMMIT), and the victims release (job_released, checkpointed): every
# preemptor must be placed at once on exactly its holds, and
# check_invariants() stays empty.
#
# Prints JSON lines on stdout (progress on stderr). Runs against the server
# named by PGHOST/PGPORT/PGUSER (superuser; the extension installed);
# creates databases gsp<pid>_* and drops them at exit.
#
# Usage: bash bench/preempt.sh [options]; --help lists them.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)

NODES=2000 GPN=8 RACK_NODES=8 SPINE_RACKS=16 ZONE_SPINES=4 FRAC_EVERY=8
NJOBS=100 NP_GPUS="" SEED=0.17 REPS=7 KEEP=0 KEEP_STATE=0 PERF=0 ELASTIC=0
T0="2030-01-01 00:00:00+00" T1="2030-01-01 02:00:00+00" T2="2030-01-01 02:00:30+00"
MAINT_DB=${BENCH_MAINTENANCE_DB:-postgres}
EXT_TPL=${GS_EXT_TEMPLATE:-}

usage() {
  cat >&2 <<USAGE
usage: bash bench/preempt.sh [options]
  --nodes N        nodes of 8 GPUs [$NODES]
  --jobs N         reclaiming jobs of team A [$NJOBS]
  --np-gpus N      GPUs of B's non-preemptible (guaranteed) jobs [10 % of the cluster]
  --seed S         setseed() argument [$SEED]
  --elastic F      fraction F of B's preemptible gangs of 2 or more replicas
                   elastic (min_replicas half their replicas, by job number;
                   bench/preempt_fill.sql), so that victim selection may
                   shrink them (docs/elastic.md#shrinking) [$ELASTIC]
  --reps N         measured (on, off) pairs after the warm-up [$REPS]
  --quick          --reps 3
  --perf           also profile one preemption round with perf (root, perf);
                   GS_SO=path/to/gangsched.so resolves the extension's symbols
                   when the installed file was replaced after the server started
  --ext-template DB  clone DB (a database where CREATE EXTENSION gangsched
                    CASCADE was done) instead of creating the extension; also
                    \$GS_EXT_TEMPLATE. Useful when the machine's one
                    PostgreSQL install is shared and its extension files may
                    no longer match the library this server preloaded
  --keep           keep the database
  --keep-state     stop after the measured (rolled-back) rounds and keep the
                   database in its state before the reclaim round, to time
                   rounds on it from outside (e.g. two states side by side)
USAGE
}
while [ $# -gt 0 ]; do
  case "$1" in
    --) ;;
    --nodes) NODES=$2; shift ;;
    --jobs) NJOBS=$2; shift ;;
    --np-gpus) NP_GPUS=$2; shift ;;
    --seed) SEED=$2; shift ;;
    --elastic) ELASTIC=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --quick) REPS=3 ;;
    --perf) PERF=1 ;;
    --ext-template) EXT_TPL=$2; shift ;;
    --keep) KEEP=1 ;;
    --keep-state) KEEP=1 KEEP_STATE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/preempt.sh: unknown option $1" >&2; usage; exit 2 ;;
  esac
  shift
done

NP_GPUS=${NP_GPUS:-$((NODES * GPN / 10))}
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
PFX="gsp$$"
DB="${PFX}_run"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gspreempt.XXXXXX")
chmod 755 "$TMP"
log() { printf '[preempt %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
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
    log "kept database $DB (scheduler clock: SET gangsched.clock_override = '$( [ "$KEEP_STATE" -eq 1 ] && echo "$T1" || echo "$T2")')"
  fi
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_script() {  # db script [psql args…]: stdout → script.out, stderr → script.err
  local db=$1 s=$2; shift 2
  if ! psql_ -At -d "$db" "$@" -f "$s" > "$s.out" 2> "$s.err"; then
    cat "$s.err" >&2; return 1
  fi
  grep -v 'DEBUG: ' "$s.err" >&2 || true
}
times_of() { awk '/^Time: /{ print $2 }' "$1.out"; }
kv() { awk -v k="$2" '$1 == "KV" && $2 == k { $1 = ""; $2 = ""; sub(/^  /, ""); print; exit }' "$1.out"; }
phases() {
  grep -o 'time rules [0-9.]* ms, load [0-9.]* ms, decide [0-9.]* ms, write [0-9.]* ms' "$1.err" |
    awk '{ print $3, $6, $9, $12 }' || true
}
stats() {
  printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
    END { n = NR; if (n == 0) { print "null null null"; exit }
          med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
          printf "%.3f %.3f %.3f\n", med, a[1], a[n] }'
}
calc() { awk "BEGIN { v = $1; if (v != v) print \"null\"; else printf \"%.3f\\n\", v }"; }
phase_json() {
  local i k v out=""
  if [ $# -eq 0 ]; then printf 'null'; return; fi
  for i in 1 2 3 4; do
    k=$(echo "time_rules load decide write" | cut -d' ' -f$i)
    v=$(stats $(printf '%s\n' "$@" | awk -v i=$i '{ print $i }') | cut -d' ' -f1)
    out="$out${out:+,}\"$k\":$v"
  done
  printf '{%s}' "$out"
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

# --- the state ---------------------------------------------------------------
SO0=$(loaded_so)
log "server $(psql_ -At -d "$MAINT_DB" -c 'SHOW server_version') at ${PGHOST:-default}:${PGPORT:-5432}; gangsched.so $SO0; database $DB"
t0=$(now_ms)
create_ext_db "$DB"
psql_ -d "$DB" -v nodes="$NODES" -v gpn="$GPN" -v rack_nodes="$RACK_NODES" -v spine_racks="$SPINE_RACKS" \
      -v zone_spines="$ZONE_SPINES" -v frac_every="$FRAC_EVERY" -v teams=2 -f "$HERE/cluster.sql" >/dev/null
psql_ -d "$DB" -c "VACUUM ANALYZE"
t1=$(now_ms)
S="$TMP/fill.sql"; cp "$HERE/preempt_fill.sql" "$S"
run_script "$DB" "$S" -v seed="$SEED" -v t0="$T0" -v t1="$T1" -v np_gpus="$NP_GPUS" -v elastic="$ELASTIC"
psql_ -d "$DB" -c "VACUUM (FREEZE, ANALYZE)"
t2=$(now_ms)
read -r CAP BUSY BORROWED <<<"$(kv "$S" gpus)"
read -r RUNNING RUN_BORROWED RUN_NP OTHER <<<"$(kv "$S" jobs)"
FILL_VIOL=$(kv "$S" fill_violations)
read -r EL_RUNNING EL_SPARE <<<"$(kv "$S" elastic)"
log "filled: $BUSY of $CAP GPUs busy, $BORROWED borrowed; $RUNNING jobs running ($RUN_BORROWED borrowed, $RUN_NP non-preemptible), $OTHER in other live states; $(kv "$S" checkpointed) checkpointed; invariant violations $FILL_VIOL; rounds placed (stage 1, 2, 3): $(kv "$S" stage1_round | cut -d' ' -f1), $(kv "$S" stage2_round | cut -d' ' -f1), $(kv "$S" stage3_round | cut -d' ' -f1) (fillers $(kv "$S" fillers)); $((t1 - t0)) + $((t2 - t1)) ms"
S2="$TMP/reclaim.sql"; cp "$HERE/preempt_reclaim.sql" "$S2"
run_script "$DB" "$S2" -v seed="$SEED" -v t1="$T1" -v njobs="$NJOBS"
psql_ -d "$DB" -c "VACUUM ANALYZE"
read -r A_N A_GPUS A_MIN A_MAX <<<"$(kv "$S2" reclaim)"
log "reclaiming: $A_N jobs of team1, $A_GPUS GPUs ($A_MIN–$A_MAX each; $(kv "$S2" reclaim_mix))"
printf '{"bench":"preempt_setup","nodes":%s,"gpus":%s,"busy_gpus":%s,"borrowed_gpus":%s,"running_jobs":%s,"borrowed_jobs":%s,"non_preemptible_jobs":%s,"reclaiming_jobs":%s,"reclaiming_gpus":%s,"reclaiming_min_gpus":%s,"reclaiming_max_gpus":%s,"invariant_violations":%s,"setup_ms":%s,"elastic":%s,"elastic_running_jobs":%s,"elastic_spare_replicas":%s}\n' \
  "$NODES" "$CAP" "$BUSY" "$BORROWED" "$RUNNING" "$RUN_BORROWED" "$RUN_NP" "$A_N" "$A_GPUS" "$A_MIN" "$A_MAX" "$FILL_VIOL" $((t2 - t0)) \
  "$ELASTIC" "${EL_RUNNING:-0}" "${EL_SPARE:-0}"
if [ "$BUSY" != "$CAP" ]; then log "WARNING: the cluster is not full ($BUSY of $CAP GPUs)"; fi

# --- measured rounds -------------------------------------------------------
VAC="VACUUM gangsched.gangs, gangsched.holds, gangsched.events, gangsched.allocations, gangsched.held_slots;"
one_round() {  # on|off label [debug level]
  cat <<SQL
BEGIN;
SET LOCAL gangsched.preemption = $1;
SET LOCAL client_min_messages = ${3:-debug1};
\\timing on
SELECT * FROM gangsched.run_round() \\gset r_
\\timing off
SET LOCAL client_min_messages = warning;
SELECT count(*) FILTER (WHERE state = 'nominated') AS nom, count(*) FILTER (WHERE state = 'preempting') AS vic,
       count(*) FILTER (WHERE state = 'placed') AS placed,
       count(*) FILTER (WHERE (to_jsonb(g) ->> 'shrink_to') IS NOT NULL) AS shr
  FROM gangsched.gangs g \\gset
ROLLBACK;
\\echo KV $2 :r_considered :r_placed :r_preempted :r_ms :nom :vic :placed :shr
$VAC
SQL
}
S3="$TMP/measure.sql"
{
  echo "SET gangsched.clock_override = '$T1';"
  echo "SELECT count(*) FROM gangsched.gangs \\gset"
  one_round on warm_on
  one_round off warm_off
  for ((i = 1; i <= REPS; i++)); do
    if [ $((i % 2)) -eq 1 ]; then one_round on "rep${i}_on"; one_round off "rep${i}_off"
    else one_round off "rep${i}_off"; one_round on "rep${i}_on"; fi
  done
} > "$S3"
log "measuring: warm-up pair, then $REPS pairs of rounds with preemption on and off (rolled back)"
run_script "$DB" "$S3"
mapfile -t TMS < <(times_of "$S3")
mapfile -t PHS < <(phases "$S3")
# order in the file: warm_on warm_off, then per rep the two in file order
declare -a ON_MS=() OFF_MS=() ON_PH=() OFF_PH=() DIFF=() DDIFF=() RATE=() DRATE=()
k=2
for ((i = 1; i <= REPS; i++)); do
  if [ $((i % 2)) -eq 1 ]; then a=on b=off; else a=off b=on; fi
  declare -A ms=() ph=()
  ms[$a]=${TMS[$k]} ph[$a]=${PHS[$k]:-}; ms[$b]=${TMS[$((k + 1))]} ph[$b]=${PHS[$((k + 1))]:-}
  k=$((k + 2))
  read -r cons pl pre fn nom vic plc shr <<<"$(kv "$S3" "rep${i}_on")"
  read -r cons_off pl_off pre_off fn_off nom_off vic_off _ <<<"$(kv "$S3" "rep${i}_off")"
  ON_MS+=("${ms[on]}") OFF_MS+=("${ms[off]}") ON_PH+=("${ph[on]}") OFF_PH+=("${ph[off]}")
  d=$(calc "${ms[on]} - ${ms[off]}")
  dd=$(calc "$(echo "${ph[on]}" | awk '{ print $3 }') - $(echo "${ph[off]}" | awk '{ print $3 }')")
  DIFF+=("$d") DDIFF+=("$dd")
  RATE+=("$(calc "$nom / ($d / 1000)")") DRATE+=("$(calc "$nom / ($dd / 1000)")")
  log "  pair $i: on ${ms[on]} ms [${ph[on]}] considered $cons, placed $pl, preempted $pre, nominated $nom, preempting $vic, shrinking $shr; off ${ms[off]} ms [${ph[off]}] considered $cons_off, placed $pl_off; selection $d ms (decide phases: $dd ms)"
  unset ms ph
done
read -r ON_MED ON_MIN ON_MAX <<<"$(stats "${ON_MS[@]}")"
read -r OFF_MED OFF_MIN OFF_MAX <<<"$(stats "${OFF_MS[@]}")"
read -r D_MED D_MIN D_MAX <<<"$(stats "${DIFF[@]}")"
read -r DD_MED DD_MIN DD_MAX <<<"$(stats "${DDIFF[@]}")"
read -r R_MED R_MIN R_MAX <<<"$(stats "${RATE[@]}")"
read -r DR_MED DR_MIN DR_MAX <<<"$(stats "${DRATE[@]}")"
read -r cons pl PREEMPTED fn NOMINATED VICTIMS plc SHRINKING <<<"$(kv "$S3" "rep1_on")"
SEL_MED=$(calc "$ON_MED - $OFF_MED")
printf '{"bench":"preempt_round","nodes":%s,"gpus":%s,"busy_gpus":%s,"borrowed_gpus":%s,"reclaiming_jobs":%s,"considered":%s,"placed_jobs":%s,"preempted":%s,"nominated":%s,"preempting_jobs":%s,"shrinking_jobs":%s,"round_ms":%s,"round_ms_min":%s,"round_ms_max":%s,"phase_ms":%s,"round_off_ms":%s,"round_off_ms_min":%s,"round_off_ms_max":%s,"phase_off_ms":%s,"reps":%s,"with_commit":false}\n' \
  "$NODES" "$CAP" "$BUSY" "$BORROWED" "$A_N" "$cons" "$pl" "$PREEMPTED" "$NOMINATED" "$VICTIMS" "${SHRINKING:-0}" \
  "$ON_MED" "$ON_MIN" "$ON_MAX" "$(phase_json "${ON_PH[@]}")" "$OFF_MED" "$OFF_MIN" "$OFF_MAX" "$(phase_json "${OFF_PH[@]}")" "$REPS"
printf '{"bench":"preempt_selection","nominations":%s,"victims":%s,"selection_ms":%s,"selection_ms_paired_median":%s,"selection_ms_min":%s,"selection_ms_max":%s,"decisions_per_s":%s,"decisions_per_s_paired_median":%s,"decisions_per_s_min":%s,"decisions_per_s_max":%s,"ms_per_decision":%s,"decide_phase_selection_ms":%s,"decide_phase_selection_ms_min":%s,"decide_phase_selection_ms_max":%s,"decide_phase_decisions_per_s":%s,"reps":%s,"target_decisions_per_s":1000,"target_ms_per_decision":1}\n' \
  "$NOMINATED" "$PREEMPTED" "$SEL_MED" "$D_MED" "$D_MIN" "$D_MAX" "$(calc "$NOMINATED / ($SEL_MED / 1000)")" "$R_MED" "$R_MIN" "$R_MAX" \
  "$(calc "$SEL_MED / $NOMINATED")" "$DD_MED" "$DD_MIN" "$DD_MAX" "$DR_MED" "$REPS"

# --- one round at DEBUG2: the statements behind the phases --------------------
S4="$TMP/debug2.sql"
{ echo "SET gangsched.clock_override = '$T1';"; one_round on dbg debug2; } > "$S4"
run_script "$DB" "$S4"
log "round with preemption on, DEBUG2 statement timings (ms, rows, statement):"
grep -o 'gangsched [a-z]*: [0-9.]* ms, [0-9]* rows: .*' "$S4.err" | sort -t: -k2 -g -r | head -12 | sed 's/^/    /' >&2 || true
LOAD_RUNNING=$(grep -o 'gangsched load: [0-9.]* ms, [0-9]* rows: SELECT g.id, g.team_id, g.priority' "$S4.err" | awk '{ print $3 }' | head -1)
LOAD_ALLOCS=$(grep -oE 'gangsched load: [0-9.]* ms, [0-9]* rows: SELECT a.job, a.node_id, a.(devices|first_slice)' "$S4.err" | awk '{ print $3 }' | head -1)
W_HOLDS=$(grep -o 'gangsched round: [0-9.]* ms, [0-9]* rows: INSERT INTO gangsched.holds' "$S4.err" | awk '{ print $3 }' | head -1)
W_NOM=$(grep -o 'gangsched round: [0-9.]* ms, [0-9]* rows: WITH n AS (' "$S4.err" | awk '{ print $3 }' | head -1)
W_VIC=$(grep -o 'gangsched round: [0-9.]* ms, [0-9]* rows: WITH v AS (' "$S4.err" | awk '{ print $3 }' | head -1)
printf '{"bench":"preempt_statements","load_running_ms":%s,"load_running_allocs_ms":%s,"write_holds_ms":%s,"write_nominated_ms":%s,"write_victims_ms":%s,"phase_ms":%s,"reps":1}\n' \
  "${LOAD_RUNNING:-null}" "${LOAD_ALLOCS:-null}" "${W_HOLDS:-null}" "${W_NOM:-null}" "${W_VIC:-null}" "$(phase_json "$(phases "$S4")")"

# --- optional: perf profile of one preemption round ------------------------------
if [ "$PERF" -eq 1 ]; then
  if command -v perf >/dev/null && [ "$(id -u)" -eq 0 ]; then
    S5="$TMP/perf.sql"
    {
      echo "SET gangsched.clock_override = '$T1';"
      echo "SELECT pg_backend_pid() AS pid \\gset"
      echo "\\setenv GS_BENCH_PID :pid"
      echo "\\! perf record -q -F 4999 -g -p \$GS_BENCH_PID -o $TMP/perf.data >/dev/null 2>&1 & echo \$! > $TMP/perf.pid; sleep 1"
      one_round on perf
      echo "\\! kill -INT \$(cat $TMP/perf.pid); sleep 2"
    } > "$S5"
    run_script "$DB" "$S5"
    log "perf: hottest symbols of the preemption round's backend (self time, incl. the rolled-back writes):"
    # A gangsched.so replaced on disk since the server loaded it shows as
    # "(deleted)" with raw addresses: resolve those with GS_SO (a build with
    # the same build-id, e.g. the scratch tree tools/gs built) when given.
    perf report -q -i "$TMP/perf.data" --no-children -g none --sort dso,symbol --stdio 2>/dev/null |
      grep '%' > "$TMP/perf.txt" || true
    if [ -n "${GS_SO:-}" ] && [ -f "$GS_SO" ]; then
      awk '$2 ~ /gangsched/ && $0 ~ /0x[0-9a-f]+/ { for (i = 1; i <= NF; i++) if ($i ~ /^0x[0-9a-f]+$/) print $1, $i }' "$TMP/perf.txt" |
        while read -r pct addr; do printf '%s %s\n' "${pct%\%}" "$(addr2line -f -e "$GS_SO" "$addr" | head -1)"; done |
        awk '{ s[$2] += $1 } END { for (f in s) printf "%6.2f%%  gangsched.so  %s\n", s[f], f }' > "$TMP/perf.so.txt"
      awk '!($2 ~ /gangsched/ && $0 ~ /0x[0-9a-f]+/) { printf "%6.2f%%  %s  %s\n", $1 + 0, $2, $NF == "-" ? $(NF-2) : $NF }' "$TMP/perf.txt" >> "$TMP/perf.so.txt"
      sort -g -r "$TMP/perf.so.txt" | head -25 | sed "s/^/    /" >&2 || true
    else
      head -25 "$TMP/perf.txt" | sed "s/^/    /" >&2 || true
    fi
  else
    log "perf: skipped (needs root and perf)"
  fi
fi

if [ "$KEEP_STATE" -eq 1 ]; then
  log "kept state before the reclaim round (--keep-state): no committed round"
  exit 0
fi

# --- the round for real, then correctness -------------------------------------------
S6="$TMP/final.sql"
{
  cat <<SQL
SET gangsched.clock_override = '$T1';
BEGIN;
SET LOCAL client_min_messages = debug1;
\\timing on
SELECT * FROM gangsched.run_round() \\gset r_
\\timing off
SET LOCAL client_min_messages = warning;
\\echo KV round :r_considered :r_placed :r_preempted :r_ms
SQL
  cat "$HERE/preempt_check.sql"
  cat <<'SQL'
\timing on
COMMIT;
\timing off
SQL
} > "$S6"
run_script "$DB" "$S6"
mapfile -t FT < <(times_of "$S6")
read -r f_cons f_pl f_pre f_ms <<<"$(kv "$S6" round)"
read -r v_n v_np v_guar v_same v_young v_nopre v_dead v_gpus v_other <<<"$(kv "$S6" victims)"
read -r n_n n_gpus n_novic n_cover n_res n_groups n_repl <<<"$(kv "$S6" nominated)"
read -r vpn_avg vpn_min vpn_max <<<"$(kv "$S6" victims_per_nomination)"
INV=$(kv "$S6" invariants)
log "committed round: ${FT[0]} ms + COMMIT ${FT[1]} ms [$(phases "$S6")]; preempted $f_pre, nominated $n_n ($n_gpus GPUs), victims $v_n ($v_gpus GPUs; per nomination $vpn_avg avg, $vpn_min–$vpn_max); triggers $(kv "$S6" triggers)"
log "checks: invariants $INV ($(kv "$S6" invariants_which)); victims non-preemptible $v_np, guaranteed of another team $v_guar, same team not lower $v_same, too young $v_young, no preemptor $v_nopre, bad deadline $v_dead; nominated without victims $n_novic, holds not covering workers $n_cover, wrong resources $n_res, groups split $n_groups, replicas split $n_repl; slots held twice $(kv "$S6" slots_held_twice), held slots used by others $(kv "$S6" slots_used_by_others), host over-commit after release $(kv "$S6" host_overcommit_after_release); unneeded victims $(kv "$S6" unneeded_victims), GPUs freed by victims that no hold uses $(kv "$S6" idle_gpus)"
printf '{"bench":"preempt_check","round_ms":%s,"commit_ms":%s,"preempted":%s,"nominated":%s,"nominated_gpus":%s,"victims":%s,"victim_gpus":%s,"victims_per_nomination_avg":%s,"victims_per_nomination_max":%s,"triggers":"%s","invariant_violations":%s,"victims_non_preemptible":%s,"victims_guaranteed_of_other_team":%s,"victims_same_team_not_lower_priority":%s,"victims_younger_than_min_runtime":%s,"victims_without_preemptor":%s,"victims_bad_deadline":%s,"nominated_without_victims":%s,"holds_not_covering_workers":%s,"holds_wrong_resources":%s,"holds_groups_split":%s,"holds_replicas_split":%s,"held_slots_twice":%s,"held_slots_used_by_others":%s,"host_overcommit_after_release":%s,"unneeded_victims":%s,"victim_gpus_not_held":%s}\n' \
  "${FT[0]}" "${FT[1]}" "$f_pre" "$n_n" "$n_gpus" "$v_n" "$v_gpus" "$vpn_avg" "$vpn_max" "$(kv "$S6" triggers)" "$INV" "$v_np" "$v_guar" "$v_same" "$v_young" "$v_nopre" "$v_dead" \
  "$n_novic" "$n_cover" "$n_res" "$n_groups" "$n_repl" "$(kv "$S6" slots_held_twice)" "$(kv "$S6" slots_used_by_others)" "$(kv "$S6" host_overcommit_after_release)" "$(kv "$S6" unneeded_victims)" "$(kv "$S6" idle_gpus)"

# --- victims release: preemptors placed at once on their holds ---------------------
S7="$TMP/release.sql"
cat > "$S7" <<SQL
SET gangsched.clock_override = '$T2';
CREATE TABLE public.pre_holds AS SELECT * FROM gangsched.holds;
SELECT count(*) AS n FROM gangsched.gangs WHERE state = 'preempting' \\gset
\\timing on
SELECT count(gangsched.job_released(id, true)) AS released
  FROM (SELECT id FROM gangsched.gangs WHERE state = 'preempting' ORDER BY id) v \\gset
\\timing off
-- shrinking elastic victims (--elastic): their agents report the released workers
SELECT EXISTS (SELECT FROM pg_catalog.pg_proc WHERE proname = 'workers_released') AS has_shrink \\gset
\\if :has_shrink
SELECT count(gangsched.workers_released(n.name, s.job)) AS shrinks_released
  FROM (SELECT DISTINCT a.job, a.node_id FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job
         WHERE g.shrink_to IS NOT NULL AND upper_inf(a.during) AND a.worker >= g.shrink_to ORDER BY 1, 2) s
  JOIN gangsched.nodes n ON n.id = s.node_id \\gset
\\else
\\set shrinks_released 0
\\endif
SELECT count(*) FILTER (WHERE state = 'nominated') AS still_nominated,
       count(*) FILTER (WHERE state = 'placed' AND id IN (SELECT job FROM public.pre_holds)) AS placed
  FROM gangsched.gangs \\gset
SELECT count(*) AS mismatch
  FROM public.pre_holds h
  LEFT JOIN gangsched.allocations a ON a.job = h.job AND a.worker = h.worker AND upper_inf(a.during)
 WHERE a.job IS NULL OR a.node_id <> h.node_id OR a.devices <> h.devices
    OR a.first_slice <> h.first_slice OR a.slices <> h.slices \\gset
SELECT count(*) AS holds_left FROM gangsched.holds \\gset
SELECT count(*) AS viol FROM gangsched.check_invariants() \\gset
\\echo KV release :released :still_nominated :placed :mismatch :holds_left :viol :shrinks_released
SQL
if [ "$KEEP" -eq 0 ]; then echo "DROP TABLE public.pre_holds;" >> "$S7"; fi
run_script "$DB" "$S7"
read -r rel_n rel_still rel_placed rel_mis rel_left rel_viol rel_shr <<<"$(kv "$S7" release)"
REL_MS=$(times_of "$S7" | head -1)
log "release: $rel_n victims released in $REL_MS ms (one statement); still nominated $rel_still, preemptors placed $rel_placed, allocations differing from holds $rel_mis, holds left $rel_left, invariant violations $rel_viol"
printf '{"bench":"preempt_release","released":%s,"workers_released":%s,"release_ms":%s,"ms_per_release":%s,"still_nominated":%s,"preemptors_placed":%s,"allocations_not_on_holds":%s,"holds_left":%s,"invariant_violations":%s}\n' \
  "$rel_n" "${rel_shr:-0}" "$REL_MS" "$(calc "$REL_MS / ($rel_n > 0 ? $rel_n : 1)")" "$rel_still" "$rel_placed" "$rel_mis" "$rel_left" "$rel_viol"
printf '{"bench":"preempt_env","date":"%s","nproc":%s,"loadavg_start":"%s","loadavg_end":"%s","server":"%s","so":"%s"}\n' \
  "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(psql_ -At -d "$MAINT_DB" -c 'SHOW server_version' | cut -d' ' -f1)" "$SO0"
log "done"
