#!/usr/bin/env python3
"""bench/tiresias_trace.py — a gangsched-replay trace and cluster in the
input format of the Tiresias simulator (SymbioticLab/Tiresias, simulator/),
for the side-by-side runs of docs/replay.md.

    python3 bench/tiresias_trace.py TRACE.csv NODES.csv SCALE OUTDIR

writes OUTDIR/jobs.csv (job_id,num_gpu,submit_time,iterations,model_name,
duration,interval; one row per trace job in submit order, num_gpu =
ceil(gpus), duration as gangsched-replay rounds it, at least 1 s; the model
name only sizes memory there, so every job is 'resnet50') and
OUTDIR/cluster.csv (one switch of 8-GPU nodes holding the GPUs that
gangsched-replay --scale SCALE keeps of NODES.csv: with the simulator's
`count` placement only the GPU count matters). No code of the simulator is
used or copied here.
"""
import csv
import math
import os
import sys


def scaled_gpus(nodes_csv, scale):
    """GPUs kept by gangsched-replay's scale_cluster (tools/replay/trace.c):
    of each kind of node, node number `seen` is kept when
    floor(seen*scale + 0.5) > floor((seen-1)*scale + 0.5)."""
    kinds = {}
    total = 0
    for row in csv.DictReader(open(nodes_csv)):
        key = (row.get('gpu_model', ''), row['gpus'], row.get('cpus', ''), row.get('mem_gb', ''),
               row.get('gpu_mem_gb', ''))
        seen = kinds.get(key, 0) + 1
        kinds[key] = seen
        if math.floor(seen * scale + 0.5) > math.floor((seen - 1) * scale + 0.5):
            total += int(row['gpus'])
    return total


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    trace, nodes, scale, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    os.makedirs(out, exist_ok=True)
    rows = list(csv.DictReader(open(trace)))
    jobs = []
    for r in rows:
        gpus = float(r['gpus'] or 0)
        jobs.append((int(round(float(r['submit_s'] or 0))), max(1, int(round(float(r['duration_s'] or 1)))),
                     max(1, int(math.ceil(gpus)))))
    jobs.sort(key=lambda j: j[0])   # stable: trace order within a second
    with open(os.path.join(out, 'jobs.csv'), 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['job_id', 'num_gpu', 'submit_time', 'iterations', 'model_name', 'duration', 'interval'])
        for i, (sub, dur, g) in enumerate(jobs):
            nxt = jobs[i + 1][0] if i + 1 < len(jobs) else sub
            w.writerow([i, g, sub, dur, 'resnet50', dur, nxt - sub])
    gpus = scaled_gpus(nodes, scale)
    with open(os.path.join(out, 'cluster.csv'), 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['num_switch', 'num_node_p_switch', 'num_gpu_p_node', 'num_cpu_p_node', 'mem_p_node'])
        w.writerow([1, gpus // 8, 8, 64, 1024])
    print('%d jobs, %d GPUs (%d nodes of 8)%s' % (len(jobs), gpus, gpus // 8,
                                                   '' if gpus % 8 == 0 else '; %d GPUs left out' % (gpus % 8)))


if __name__ == '__main__':
    main()
