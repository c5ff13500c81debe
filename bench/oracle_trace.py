#!/usr/bin/env python3
"""bench/oracle_trace.py — a copy of a gangsched-replay trace whose priority
column gives shorter jobs higher priority: an oracle that knows every job's
duration, for the lower bound of docs/replay.md ("what any order within
teams can reach").

    python3 bench/oracle_trace.py TRACE.csv OUT.csv [srtf|classes]

srtf (the default): priority = 20000 - the job's rank by duration (ties
share a rank), so within a team the shortest job always goes first and,
under the drf policy, a pending job preempts a longer one of its team
(gangsched's priority preemption): shortest-job-first with preemption,
by the job's whole duration. classes: priority = 40 - ceil(log2(duration)),
one class per doubling of the duration. Across teams gangsched orders by
weighted DRF whatever the priorities, so the replay of OUT.csv with drf
shows the best mean JCT an order within teams gives while the split
between teams stays DRF's.
"""
import csv
import math
import sys


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] not in ('srtf', 'classes')):
        sys.exit(__doc__)
    mode = sys.argv[3] if len(sys.argv) == 4 else 'srtf'
    with open(sys.argv[1], newline='') as f:
        rows = list(csv.DictReader(f))
    if not rows or 'duration_s' not in rows[0]:
        sys.exit('bench/oracle_trace.py: %s has no duration_s column' % sys.argv[1])
    fields = [k for k in rows[0].keys() if k != 'priority'] + ['priority']
    rank = {}
    if mode == 'srtf':
        order = sorted(range(len(rows)), key=lambda i: float(rows[i]['duration_s']))
        prev, r = None, 0
        for k, i in enumerate(order):
            d = float(rows[i]['duration_s'])
            if d != prev:
                r, prev = k, d
            rank[i] = r
    with open(sys.argv[2], 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction='ignore')
        w.writeheader()
        for i, row in enumerate(rows):
            if mode == 'srtf':
                row['priority'] = str(20000 - rank[i])
            else:
                row['priority'] = str(40 - int(math.ceil(math.log2(max(1.0, float(row['duration_s']))))))
            w.writerow(row)


if __name__ == '__main__':
    main()
