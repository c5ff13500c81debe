#!/usr/bin/env bash
# bench/history.sh — what a long history costs, before and after
# gangsched.archive_history() (docs/operations.md#retention). Prints one JSON
# object per line on stdout and nothing else; progress goes to stderr. A
# benchmark, not a test: nothing fails on a slow figure.
#
# Against the server named by PGHOST/PGPORT/PGUSER (a superuser; the
# extension installed there). It creates database gsh<pid> and drops it at
# the end (--keep keeps it).
#
#   1. the synthetic cluster (bench/cluster.sql: --nodes × 8 GPUs) and queue
#      (bench/jobs.sql: --pending jobs), a cold round filling it, every
#      placed job started: a busy cluster, at scheduler time T0
#   2. --history closed allocation rows (default 20,000,000) of finished
#      jobs before T0, written directly (INSERT … SELECT generate_series, as
#      the owner; the guards refuse only UPDATE and DELETE): jobs of 8
#      one-GPU workers, one job an hour on each node (8 allocations, 2
#      events each), ending a day before T0; VACUUM ANALYZE
#   3. "before": check_invariants() --reps times; --rounds steady rounds
#      (--churn of the running jobs finish through job_finished, a round,
#      what it placed is started), each part timed; one submit() statement
#      of --submit-n jobs
#   4. archive_history(T0 - 1 hour): everything generated in 2 moves; then
#      VACUUM ANALYZE (what autovacuum would do)
#   5. "after": the same as 3, then archive_history once more with nothing
#      left to move
#   6. VACUUM FULL of the live history tables (the space the first large run
#      freed goes back; a daily run keeps them at the window's size), then
#      "after_vacuum_full": the same as 3, and a run with nothing to move
#   7. a daily run: one more day of history (24 jobs on each node), then the
#      archive_history that moves it
#
# Timings are the client's (psql \timing, the statement in autocommit, so
# with its commit). Medians with _min and _max.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
NODES=2048 GPN=8 RACK_NODES=8 SPINE_RACKS=16 ZONE_SPINES=4 FRAC_EVERY=8 TEAMS=10
PENDING=20000 SEED=0.42 HISTORY=20000000 REPS=3 ROUNDS=5 CHURN=0.01 SUBMIT_N=1000 KEEP=0 SKIP_BEFORE=0
T0='2031-01-01 00:00:00+00'

usage() {
  cat >&2 <<USAGE
usage: bash bench/history.sh [options]
  --nodes N        [$NODES]
  --pending N      jobs in the queue [$PENDING]
  --history N      closed allocation rows generated (a multiple of 8) [$HISTORY]
  --reps N         check_invariants() calls per phase [$REPS]
  --rounds N       steady rounds per phase [$ROUNDS]
  --churn F        fraction of running jobs finishing before each round [$CHURN]
  --submit-n N     jobs in the timed submit() statement [$SUBMIT_N]
  --quick          --history 2000000 --reps 2 --rounds 3
  --skip-before    no measurements before the archive run
  --keep           keep the database
USAGE
}
while [ $# -gt 0 ]; do
  case "$1" in
    --) ;;
    --nodes) NODES=$2; shift ;;
    --pending) PENDING=$2; shift ;;
    --history) HISTORY=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --churn) CHURN=$2; shift ;;
    --submit-n) SUBMIT_N=$2; shift ;;
    --quick) HISTORY=2000000 REPS=2 ROUNDS=3 ;;
    --keep) KEEP=1 ;;
    --skip-before) SKIP_BEFORE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/history.sh: unknown option $1" >&2; usage; exit 2 ;;
  esac
  shift
done

DB=gsh$$
log() { printf '[history %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
emit() { echo "$1"; }
cleanup() {
  local rc=$?
  if [ "$KEEP" -eq 0 ]; then psql_ -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
  else log "kept database $DB"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The scheduler's clock for a psql call: the current virtual time.
CLOCK=$T0
q() { psql_ -d "$DB" -c "SET gangsched.clock_override = '$CLOCK'" "$@"; }
# ms of the last statement of a psql call (its output is discarded)
timed() { q -c '\timing on' "$@" | awk '/^Time: / { t = $2 } END { print t }'; }
# median min max of the arguments
stats() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.1f %.1f %.1f\n", m, a[1], a[NR] }'; }
advance() { CLOCK=$(psql_ -d "$DB" -Atc "SELECT ('$CLOCK'::timestamptz + interval '$1')::text"); }

# --- 1. a busy cluster --------------------------------------------------------
log "database $DB: $NODES nodes x $GPN GPUs, $PENDING pending"
psql_ -d postgres -c "CREATE DATABASE $DB" >/dev/null
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION gangsched CASCADE" >/dev/null
q -v nodes="$NODES" -v gpn="$GPN" -v rack_nodes="$RACK_NODES" -v spine_racks="$SPINE_RACKS" \
  -v zone_spines="$ZONE_SPINES" -v frac_every="$FRAC_EVERY" -v teams="$TEAMS" -f "$HERE/cluster.sql" >/dev/null
q -c "VACUUM ANALYZE" >/dev/null
q -v seed="$SEED" -v first=1 -v last="$PENDING" -v teams="$TEAMS" -f "$HERE/jobs.sql" >/dev/null
q -c "VACUUM ANALYZE" >/dev/null
cold=$(timed -c "SELECT * FROM gangsched.run_round()")
START_PLACED="SELECT count(gangsched.job_started(x.job, n.name)) FROM (SELECT DISTINCT a.job, a.node_id FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id = a.job WHERE g.state = 'placed' AND upper_inf(a.during)) x JOIN gangsched.nodes n ON n.id = x.node_id"
q -c "$START_PLACED" >/dev/null
running=$(q -Atc "SELECT count(*) FROM gangsched.gangs WHERE state = 'running'")
workers=$(q -Atc "SELECT count(*) FROM gangsched.allocations WHERE upper_inf(during)")
log "cold round $cold ms: $running jobs running ($workers workers)"
emit "{\"bench\":\"history_cluster\",\"nodes\":$NODES,\"gpus\":$((NODES * GPN)),\"pending\":$PENDING,\"cold_round_ms\":$cold,\"running_jobs\":$running,\"running_workers\":$workers}"

# --- 2. the history -------------------------------------------------------------
# gen JOBS GAP: JOBS finished jobs of 8 allocations and 2 events each, one an
# hour on each node, the last ending GAP hours before T0; VACUUM ANALYZE.
# Sets GEN_MS and VAC_MS.
gen() {
  local t0 t1 t2
  t0=$(date +%s%N)
  q -v jobs="$1" -v nodes="$NODES" -v t0="$T0" -v teams="$TEAMS" -v gap="$2" -f - <<'SQL' >/dev/null
-- job j: node j % nodes, hour j / nodes of the history, 50 minutes long;
-- the history ends `gap` hours before T0
CREATE TEMP TABLE hn AS SELECT row_number() OVER (ORDER BY id) - 1 AS k, id, gpu_slices FROM gangsched.nodes;
CREATE TEMP TABLE hp AS
SELECT (SELECT COALESCE(max(id), 0) FROM gangsched.gangs) + 1000000 AS base,
       :'t0'::timestamptz - make_interval(hours => (:jobs / :nodes + 1) + :gap) AS h0;
INSERT INTO gangsched.gangs (id, team_id, name, state, workers, gpus, cpus, mem_gb, net_gbps, group_span,
                             queue_pos, submitted_at, queued_at, placed_at, started_at, finished_at, reason)
OVERRIDING SYSTEM VALUE
SELECT hp.base + j, (j % :teams) + 1, 'hist-' || j, 'finished', 8, 1, 8, 64, 0, 4,
       nextval('gangsched.queue_position_seq'),
       hp.h0 + make_interval(hours => (j / :nodes)::int) - interval '5 minutes',
       hp.h0 + make_interval(hours => (j / :nodes)::int) - interval '5 minutes',
       hp.h0 + make_interval(hours => (j / :nodes)::int), hp.h0 + make_interval(hours => (j / :nodes)::int),
       hp.h0 + make_interval(hours => (j / :nodes)::int) + interval '50 minutes', 'finished'
  FROM hp, generate_series(0, :jobs - 1) j;
SELECT setval(pg_get_serial_sequence('gangsched.gangs', 'id'), (SELECT max(id) FROM gangsched.gangs));
INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus, mem_gb,
                                   net_gbps, borrowed, during, end_reason)
SELECT hp.base + j, w, hn.id, (j % :teams) + 1, ARRAY[w], 0, hn.gpu_slices, 1, 1, 8, 0, false,
       tstzrange(hp.h0 + make_interval(hours => (j / :nodes)::int),
                 hp.h0 + make_interval(hours => (j / :nodes)::int) + interval '50 minutes'), 'finished'
  FROM hp, generate_series(0, :jobs - 1) j JOIN hn ON hn.k = j % :nodes, generate_series(0, 7) w;
INSERT INTO gangsched.events (at, kind, job, team_id, reason, actor)
SELECT CASE WHEN e = 0 THEN hp.h0 + make_interval(hours => (j / :nodes)::int) - interval '5 minutes'
            ELSE hp.h0 + make_interval(hours => (j / :nodes)::int) + interval '50 minutes' END,
       CASE WHEN e = 0 THEN 'submitted' ELSE 'finished' END, hp.base + j, (j % :teams) + 1,
       CASE WHEN e = 0 THEN 'admitted' ELSE 'finished' END, 'postgres'
  FROM hp, generate_series(0, :jobs - 1) j, generate_series(0, 1) e;
SQL
  t1=$(date +%s%N)
  q -c "VACUUM ANALYZE gangsched.gangs" -c "VACUUM ANALYZE gangsched.allocations" -c "VACUUM ANALYZE gangsched.events" >/dev/null
  t2=$(date +%s%N)
  GEN_MS=$(((t1 - t0) / 1000000)) VAC_MS=$(((t2 - t1) / 1000000))
}
JOBS=$((HISTORY / 8))
log "generating $HISTORY closed allocations ($JOBS jobs) before $T0"
gen "$JOBS" 24
sizes() {
  q -Atc "SELECT format('\"allocations_rows\":%s,\"events_rows\":%s,\"gangs_rows\":%s,\"allocations_mb\":%s,\"events_mb\":%s,\"gangs_mb\":%s,\"archive_mb\":%s',
                 (SELECT count(*) FROM gangsched.allocations), (SELECT count(*) FROM gangsched.events), (SELECT count(*) FROM gangsched.gangs),
                 pg_total_relation_size('gangsched.allocations') / 1048576, pg_total_relation_size('gangsched.events') / 1048576,
                 pg_total_relation_size('gangsched.gangs') / 1048576,
                 (pg_total_relation_size('gangsched.allocations_archive') + pg_total_relation_size('gangsched.events_archive')
                  + pg_total_relation_size('gangsched.gangs_archive')) / 1048576)"
}
emit "{\"bench\":\"history_generate\",\"history_rows\":$HISTORY,\"jobs\":$JOBS,\"insert_ms\":$GEN_MS,\"vacuum_ms\":$VAC_MS,$(sizes)}"

# --- 3. / 5. the measurements of one phase -----------------------------------
phase() {
  local ph=$1 i ms=() rnd=() fin=() per=() n v out
  log "$ph: check_invariants() x $REPS"
  for ((i = 0; i < REPS; i++)); do
    out=$(q -Atc '\timing on' -c "SELECT count(*) FROM gangsched.check_invariants()")
    ms+=("$(awk '/^Time: / { print $2 }' <<<"$out")") v=$(grep -E '^[0-9]+$' <<<"$out")
  done
  read -r med mn mx <<<"$(stats "${ms[@]}")"
  log "  check_invariants: ${ms[*]} ms, $v violations"
  emit "{\"bench\":\"history_check_invariants\",\"phase\":\"$ph\",$(sizes),\"reps\":$REPS,\"ms\":$med,\"ms_min\":$mn,\"ms_max\":$mx,\"violations\":$v}"

  log "$ph: $ROUNDS steady rounds"
  for ((i = 0; i < ROUNDS; i++)); do
    advance '10 minutes'
    n=$(q -Atc "SELECT greatest(1, round($CHURN * count(*)))::int FROM gangsched.gangs WHERE state = 'running'")
    fin+=("$(timed -c "SELECT count(gangsched.job_finished(id, true)) FROM (SELECT id FROM gangsched.gangs WHERE state = 'running' ORDER BY id LIMIT $n) f")")
    per+=("$(awk -v t="${fin[-1]}" -v n="$n" 'BEGIN { printf "%.3f", t / n }')")
    rnd+=("$(timed -c "SELECT * FROM gangsched.run_round()")")
    q -c "$START_PLACED" >/dev/null
    log "  round $((i + 1)): finish $n jobs ${fin[-1]} ms, round ${rnd[-1]} ms"
  done
  read -r rmed rmn rmx <<<"$(stats "${rnd[@]}")"
  read -r fmed fmn fmx <<<"$(stats "${per[@]}")"
  emit "{\"bench\":\"history_round\",\"phase\":\"$ph\",\"rounds\":$ROUNDS,\"churn\":$CHURN,\"round_ms\":$rmed,\"round_ms_min\":$rmn,\"round_ms_max\":$rmx,\"finish_ms_per_job\":$fmed,\"finish_ms_per_job_min\":$fmn,\"finish_ms_per_job_max\":$fmx}"

  local first=$((PENDING + 1 + SUBMIT_OFFSET)) last=$((PENDING + SUBMIT_OFFSET + SUBMIT_N)) s
  SUBMIT_OFFSET=$((SUBMIT_OFFSET + SUBMIT_N))
  s=$(q -c '\timing on' -v seed="$SEED" -v first="$first" -v last="$last" -v teams="$TEAMS" -f "$HERE/jobs.sql" |
      awk '/^Time: / { t = $2 } END { print t }')
  log "  submit of $SUBMIT_N jobs: $s ms"
  emit "{\"bench\":\"history_submit\",\"phase\":\"$ph\",\"jobs\":$SUBMIT_N,\"ms\":$s,\"us_per_job\":$(awk -v t="$s" -v n="$SUBMIT_N" 'BEGIN { printf "%.1f", t * 1000 / n }')}"
}
SUBMIT_OFFSET=0

if [ "$SKIP_BEFORE" -eq 0 ]; then phase before; fi

# --- 4. archive -------------------------------------------------------------------
log "archive_history($T0 - 1 hour)"
a=$(q -c '\timing on' -Atc "SELECT row_to_json(r) FROM gangsched.archive_history('$T0'::timestamptz - interval '1 hour') r")
ams=$(awk '/^Time: / { print $2 }' <<<"$a"); moved=$(grep '^{' <<<"$a")
t0=$(date +%s%N)
q -c "VACUUM ANALYZE gangsched.gangs" -c "VACUUM ANALYZE gangsched.allocations" -c "VACUUM ANALYZE gangsched.events" \
  -c "VACUUM ANALYZE gangsched.allocations_archive" -c "VACUUM ANALYZE gangsched.events_archive" -c "VACUUM ANALYZE gangsched.gangs_archive" >/dev/null
t1=$(date +%s%N)
log "  moved $moved in $ams ms; vacuum $(((t1 - t0) / 1000000)) ms"
emit "{\"bench\":\"history_archive\",\"cutoff\":\"$T0 - 1 hour\",\"moved\":$moved,\"ms\":$ams,\"vacuum_ms\":$(((t1 - t0) / 1000000)),$(sizes)}"

phase after

archive_run() {  # name cutoff-expression
  local a
  a=$(q -c '\timing on' -Atc "SELECT row_to_json(r) FROM gangsched.archive_history($2) r")
  emit "{\"bench\":\"$1\",\"moved\":$(grep '^{' <<<"$a"),\"ms\":$(awk '/^Time: / { print $2 }' <<<"$a"),$(sizes)}"
}
archive_run history_archive_again "gangsched.now() - interval '1 day'"

# --- 6. the space back: VACUUM FULL, as after a first large run ---------------
log "VACUUM FULL of the live history tables"
t0=$(date +%s%N)
q -c "VACUUM FULL ANALYZE gangsched.allocations" -c "VACUUM FULL ANALYZE gangsched.events" -c "VACUUM FULL ANALYZE gangsched.gangs" >/dev/null
t1=$(date +%s%N)
emit "{\"bench\":\"history_vacuum_full\",\"ms\":$(((t1 - t0) / 1000000)),$(sizes)}"
phase after_vacuum_full
archive_run history_archive_again_compacted "gangsched.now() - interval '1 day'"

# --- 7. a daily run: one more day of history (24 jobs a node), archived -------
log "a day of history ($((NODES * 24)) jobs), then its archive run"
gen $((NODES * 24)) 1
emit "{\"bench\":\"history_generate_day\",\"jobs\":$((NODES * 24)),\"insert_ms\":$GEN_MS,\"vacuum_ms\":$VAC_MS,$(sizes)}"
archive_run history_archive_daily "'$T0'::timestamptz - interval '10 minutes'"
settings=$(q -Atc "SELECT json_object_agg(name, current_setting(name)) FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', 'maintenance_work_mem', 'fsync', 'synchronous_commit', 'full_page_writes', 'max_wal_size', 'jit')")
emit "{\"bench\":\"history_settings\",\"server\":$settings,\"version\":\"$(q -Atc "SELECT extversion FROM pg_extension WHERE extname = 'gangsched'")\",\"cpus\":$(nproc)}"
log done
