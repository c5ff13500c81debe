#!/usr/bin/env bash
# bench/las.sh — the round with every team in least-attained-service order
# (gangsched.team_order = 'las', issue 13) against fifo order, side by side
# on one server and one build: bench/run.sh alternately with the sessions'
# gangsched.team_order (PGOPTIONS) fifo and las (fifo las fifo las …), REPS
# times each. --no-preemption runs both sides with gangsched.preemption =
# off: the order's own cost, without the LAS preemptions las order adds
# (with preemption on, fifo makes none in run.sh's steady state, las some).
#
#   bash bench/las.sh [--reps N] [--no-preemption] [-- bench/run.sh options]
#
# Runs against the server named by PGHOST/PGPORT/PGUSER (as run.sh). stdout:
# JSON lines, per metric (cold and steady round_ms) the median of fifo and
# of las over the repetitions, their ratio, and the median of the paired
# ratios (las over fifo in the same repetition, which cancels slow drift in
# the machine's load), with the load average at the start and the end.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPS=3 EXTRA_OPTS=""
RUN_ARGS=(--cases cold,steady --reps 3 --rounds 10)
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift ;;
    --no-preemption) EXTRA_OPTS="-c gangsched.preemption=off" ;;
    --) shift; RUN_ARGS+=("$@"); break ;;
    -h|--help) sed -n 2,17p "$0" >&2; exit 0 ;;
    *) echo "bench/las.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
command -v jq >/dev/null || { echo "bench/las.sh: jq not found" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
L0=$(load)
for ((r = 1; r <= REPS; r++)); do
  for side in fifo las; do
    echo "[las.sh] repetition $r: $side" >&2
    PGOPTIONS="${PGOPTIONS:-} -c gangsched.team_order=$side $EXTRA_OPTS" \
      bash "$HERE/run.sh" "${RUN_ARGS[@]}" > "$OUT/$side.$r.jsonl"
  done
done
L1=$(load)
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "null"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for bench in cold steady; do
  for metric in round_ms; do
    f=() l=() p=()
    for ((r = 1; r <= REPS; r++)); do
      a=$(jq -r "select(.bench == \"$bench\") | .$metric" "$OUT/fifo.$r.jsonl")
      b=$(jq -r "select(.bench == \"$bench\") | .$metric" "$OUT/las.$r.jsonl")
      f+=("$a") l+=("$b") p+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", b / a }')")
    done
    mf=$(printf '%s\n' "${f[@]}" | median) ml=$(printf '%s\n' "${l[@]}" | median)
    mp=$(printf '%s\n' "${p[@]}" | median)
    printf '{"bench":"%s","metric":"%s","reps":%s,"fifo":%s,"las":%s,"ratio_las_fifo":%s,"ratio_las_fifo_paired":%s,"fifo_all":[%s],"las_all":[%s],"load_start":"%s","load_end":"%s","run_args":"%s","options":"%s"}\n' \
      "$bench" "$metric" "$REPS" "$mf" "$ml" "$(awk -v a="$mf" -v b="$ml" 'BEGIN { printf "%.4f", b / a }')" "$mp" \
      "$(IFS=,; echo "${f[*]}")" "$(IFS=,; echo "${l[*]}")" "$L0" "$L1" "${RUN_ARGS[*]}" "$EXTRA_OPTS"
  done
done
# the las runs' steady case, for the preemptions it caused
for ((r = 1; r <= REPS; r++)); do
  jq -c "select(.bench == \"steady\") | {side: \"las\", rep: $r, preempted_jobs, placed_jobs, round_ms}" "$OUT/las.$r.jsonl"
  jq -c "select(.bench == \"steady\") | {side: \"fifo\", rep: $r, preempted_jobs, placed_jobs, round_ms}" "$OUT/fifo.$r.jsonl"
done
