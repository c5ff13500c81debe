#!/usr/bin/env bash
# bench/tiresias.sh — the Tiresias simulator (SymbioticLab/Tiresias,
# simulator/, Python 2.7) on the same Philly week and cluster sizes as
# gangsched-replay, for docs/replay.md's side by side.
#
#   bash bench/tiresias.sh --src DIR [--work DIR] [--scales "0.125 0.25"] [--schedules "fifo dlas-gpu"]
#
# DIR is a checkout of github.com/SymbioticLab/Tiresias (not part of this
# repository; nothing of it is copied here). Its simulator/ is copied to the
# work directory and made to run under Python 3 with mechanical fixes only:
# lib2to3 (print, dict views, imports), sys.maxint -> sys.maxsize, and
# numpy.mean (its one numpy call) -> statistics.mean. The trace and the
# cluster come from bench/tiresias_trace.py (one switch of 8-GPU nodes with
# the GPUs gangsched-replay --scale keeps; --scheme=count, one-GPU workers
# without span constraints, as gangsched-replay's Philly jobs are). stdout:
# one JSON line per run with the mean, p50 and p95 JCT, the mean pending
# time, the preemptions and the wall time.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TRACES=${TRACES:-$HERE/../../shared/data/traces}
SRC="" WORK=/tmp/gs-tiresias SCALES="0.125 0.25" SCHEDULES="fifo dlas-gpu"
while [ $# -gt 0 ]; do
  case "$1" in
    --src) SRC=$2; shift ;;
    --work) WORK=$2; shift ;;
    --scales) SCALES=$2; shift ;;
    --schedules) SCHEDULES=$2; shift ;;
    --traces) TRACES=$2; shift ;;
    -h|--help) sed -n 2,18p "$0" >&2; exit 0 ;;
    *) echo "bench/tiresias.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$SRC" ] && [ -f "$SRC/simulator/run_sim.py" ] ||
  { echo "bench/tiresias.sh: --src must name a Tiresias checkout (with simulator/run_sim.py)" >&2; exit 2; }
python3 -c 'import lib2to3' 2>/dev/null || { echo "bench/tiresias.sh: python3 with lib2to3 needed" >&2; exit 2; }
rm -rf "$WORK"; mkdir -p "$WORK"
cp -a "$SRC/simulator" "$WORK/simulator"
(cd "$WORK/simulator" && python3 -W ignore -m lib2to3 -w -n . >/dev/null 2>&1)
sed -i 's/sys\.maxint/sys.maxsize/g' "$WORK"/simulator/*.py
sed -i 's/^import numpy$/import statistics as numpy/' "$WORK/simulator/jobs.py"
for sc in $SCALES; do
  python3 "$HERE/tiresias_trace.py" "$TRACES/philly_dev_week.csv" "$TRACES/philly_nodes.csv" "$sc" "$WORK/in_$sc" >&2
  for s in $SCHEDULES; do
    t0=$(date +%s.%N)
    (cd "$WORK/simulator" && python3 run_sim.py --cluster_spec="$WORK/in_$sc/cluster.csv" --scheme=count \
        --trace_file="$WORK/in_$sc/jobs.csv" --schedule="$s" --log_path="$WORK/out_${sc}_$s" > "$WORK/log_${sc}_$s.txt" 2>&1)
    t1=$(date +%s.%N)
    python3 - "$WORK/out_${sc}_$s/job.csv" "$sc" "$s" "$(echo "$t1 - $t0" | bc)" "$(head -2 "$WORK/in_$sc/cluster.csv" | tail -1 | cut -d, -f2)" <<'PY'
import csv, json, statistics, sys
path, scale, sched, wall, nodes = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
jct = sorted(float(r['JCT']) for r in rows)
def pct(p):
    k = (len(jct) - 1) * p; f = int(k); c = min(f + 1, len(jct) - 1)
    return jct[f] + (jct[c] - jct[f]) * (k - f)
print(json.dumps({'simulator': 'tiresias', 'scale': float(scale), 'schedule': sched, 'gpus': int(nodes) * 8,
                  'jobs': len(rows), 'jct_mean_s': round(statistics.mean(jct), 1), 'jct_p50_s': round(pct(0.5), 1),
                  'jct_p95_s': round(pct(0.95), 1),
                  'pending_mean_s': round(statistics.mean(float(r['pending_time']) for r in rows), 1),
                  'preemptions': sum(int(r['preempt']) for r in rows), 'wall_s': round(float(wall), 1)}))
PY
  done
done
