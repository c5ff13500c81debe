#!/usr/bin/env bash
# bench/replay.sh — docs/replay.md's numbers and plot in one command: the
# Philly development week replayed by gangsched-replay at each scale (0.125
# is the contended one: demand far above capacity), the four policies side
# by side, then the analyst functions over the kept databases
# (gangsched.utilization and gangsched.queue_depth, hourly) plotted with
# gnuplot.
#
# Runs against the server named by PGHOST/PGPORT/PGUSER, which must have the
# extension installed (make install) and a role that may CREATE DATABASE
# (a superuser). It creates databases replay_s<scale>_<policy> and drops
# them at the end (--keep keeps them).
#
# With --history N instead: a generated history of about N allocation rows
# (docs/analytics.md) in database replay_history, the analyst functions
# timed on it and their plans shown.
#
# Usage: bash bench/replay.sh [options]; --help lists them.
# Output (bench/out/replay by default): replay_s<scale>.jsonl (one line per
# policy), table.md (the table of docs/replay.md), replay-philly.png, and
# hourly.csv (the data behind the plot).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TRACES=${TRACES:-$ROOT/../shared/data/traces}
SCALES="0.125 0.25 0.5"
POLICIES="fifo,fifo-backfill,drf,drf-nopreempt,drf-las,las"
OUT=$ROOT/bench/out/replay
KEEP=0 DOCS=0 EXTRA=() HISTORY=0
MAINT_DB=${REPLAY_MAINTENANCE_DB:-postgres}
START='2017-10-02 00:00:00+00'
PLOT_DAYS=8

usage() {
  cat >&2 <<USAGE
usage: bash bench/replay.sh [options] [-- gangsched-replay options]
  --scales "..."     cluster scales to replay [$SCALES]
  --quick            only scale 0.25
  --contended        only scales 0.125 and 0.25 (demand far above capacity; issue 12's targets)
  --policies LIST    [$POLICIES]
  --traces DIR       where philly_*.csv are [$TRACES]
  --out DIR          output directory [$OUT]
  --plot-days N      days shown in the plot, from the trace's start [$PLOT_DAYS]
  --docs             also copy the plot to docs/replay-philly.png
  --keep             keep the replay databases
  --history N        instead of replays: generate about N allocation rows of
                     history in database replay_history and time the analyst
                     functions on it (docs/analytics.md)
Anything after -- goes to gangsched-replay (e.g. -- --checkpoint-interval 600).
USAGE
}

while [ $# -gt 0 ]; do
  case "$1" in
    --scales) SCALES=$2; shift ;;
    --quick) SCALES="0.25" ;;
    --contended) SCALES="0.125 0.25" ;;
    --policies) POLICIES=$2; shift ;;
    --traces) TRACES=$2; shift ;;
    --out) OUT=$2; shift ;;
    --plot-days) PLOT_DAYS=$2; shift ;;
    --docs) DOCS=1 ;;
    --keep) KEEP=1 ;;
    --history) HISTORY=$2; shift ;;
    --help|-h) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "bench/replay.sh: unknown option $1" >&2; usage; exit 2 ;;
  esac
  shift
done

log() { printf '== %s\n' "$*" >&2; }
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

# --- a generated history for the analyst functions ---------------------------
# 2,048 nodes x 8 GPUs (bench/cluster.sql); jobs of 1, 2, 4 or 8 one-GPU
# workers, 90 % running 5 min - 2 h and 10 % 1 - 5 days, submitted evenly
# at about 10,200 a day so that about 13,000 GPUs are held at any time; each
# waits 0 - 17 min; one in 40 is preempted once (events only). The history
# ends at 2030-01-01; what runs past it is still held. Rows go in in time
# order, as a live cluster writes them, the analyst indexes are built after.
history() {
  local rows=$1 db=replay_history
  local jobs=$((rows * 4 / 15)) per_day=10177
  log "history: about $rows allocation rows ($jobs jobs, $((jobs / per_day)) days) in database $db"
  psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db TEMPLATE template0"
  DBS+=("$db")
  psql_ -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION gangsched CASCADE"
  (echo "SET gangsched.clock_override = '2020-01-01';"; echo "\\i $HERE/cluster.sql") |
    psql_ -d "$db" -v nodes=2048 -v gpn=8 -v rack_nodes=8 -v spine_racks=16 -v zone_spines=4 \
          -v frac_every=0 -v teams=10 >/dev/null
  psql_ -d "$db" -v jobs="$jobs" -v per_day="$per_day" <<'SQL'
\timing on
DROP INDEX gangsched.allocations_closed_start_idx, gangsched.allocations_long_during_idx;
CREATE TEMP TABLE j AS
SELECT j + 1 AS id, 1 + j % 10 AS team, 1 << (hashint4(j) & 3) AS workers,
       s AS submitted, s + make_interval(secs => hashint4(j + 1) & 1023) AS placed,
       s + make_interval(secs => (hashint4(j + 1) & 1023)
                                 + CASE WHEN abs(hashint4(j + 2)) % 10 = 0
                                        THEN 86400 + (hashint4(j + 3) & 1048575)::float8 / 1048575 * 4 * 86400
                                        ELSE 300 + (hashint4(j + 3) & 1048575)::float8 / 1048575 * 7200 END) AS ended,
       hashint4(j + 4) & 7 = 0 AS borrowed, j % 40 = 7 AS preempted
  FROM (SELECT j, timestamptz '2030-01-01' - make_interval(secs => (:jobs - j)::float8 * 86400 / :per_day) AS s
          FROM generate_series(0, :jobs - 1) j) x;
INSERT INTO gangsched.gangs (id, team_id, name, state, workers, gpus, group_span, queue_pos, submitted_at, queued_at,
                             placed_at, started_at, finished_at, borrowed)
OVERRIDING SYSTEM VALUE
SELECT id, team, 'job' || id, CASE WHEN ended > '2030-01-01' THEN 'running' ELSE 'finished' END, workers, 1, 4, id,
       submitted, submitted, placed, placed, CASE WHEN ended <= '2030-01-01' THEN ended END, borrowed
  FROM j ORDER BY id;
INSERT INTO gangsched.allocations (job, worker, node_id, team_id, devices, first_slice, slices, gpus, cpus, mem_gb,
                                   net_gbps, borrowed, during, end_reason)
SELECT j.id, w, 1 + (j.id * 7 + w) % 2048, j.team, ARRAY[w % 8], 0, 1, 1, 0, 0, 0, j.borrowed,
       tstzrange(j.placed, CASE WHEN j.ended > '2030-01-01' THEN NULL ELSE j.ended END),
       CASE WHEN j.ended <= '2030-01-01' THEN 'finished' END
  FROM j, generate_series(0, j.workers - 1) w
 ORDER BY j.placed, j.id, w;
INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)
SELECT at, kind, job, team, reason, detail FROM (
    SELECT submitted AS at, 'submitted' AS kind, id AS job, team, 'admitted' AS reason, NULL::jsonb AS detail, 1 AS o FROM j
    UNION ALL SELECT placed, 'placed', id, team, 'placed whole in its smallest domain', NULL, 2 FROM j
    UNION ALL SELECT ended, 'finished', id, team, 'finished', NULL, 5 FROM j WHERE ended <= '2030-01-01'
    UNION ALL SELECT placed + (ended - placed) / 2, 'preempting', id, team, 'preempted for job 1 (reclaim)', NULL, 3
      FROM j WHERE preempted AND ended <= '2030-01-01'
    UNION ALL SELECT placed + (ended - placed) / 2 + interval '30 s', 'requeued', id, team,
                     'preempted for job 1; released after a checkpoint', jsonb_build_object('lost_gpu_seconds', 0), 4
      FROM j WHERE preempted AND ended <= '2030-01-01') e
 ORDER BY at, o, job;
-- the analyst indexes, as 69_analytics.sql creates them
CREATE INDEX allocations_closed_start_idx ON gangsched.allocations (lower(during)) WHERE NOT upper_inf(during);
CREATE INDEX allocations_long_during_idx ON gangsched.allocations USING gist (during)
    WHERE NOT upper_inf(during) AND upper(during) - lower(during) > interval '1 day';
\timing off
VACUUM (FREEZE, ANALYZE);
SELECT (SELECT count(*) FROM gangsched.allocations) AS allocations, (SELECT count(*) FROM gangsched.gangs) AS jobs,
       (SELECT count(*) FROM gangsched.events) AS events,
       pg_size_pretty(pg_total_relation_size('gangsched.allocations')) AS allocations_size,
       (SELECT min(lower(during)) FROM gangsched.allocations) AS first, timestamptz '2030-01-01' AS last;
SELECT c.relname, pg_size_pretty(pg_relation_size(c.oid)) FROM pg_class c
 WHERE c.relnamespace = 'gangsched'::regnamespace AND c.relkind = 'i' AND c.relname LIKE 'allocations%' ORDER BY 1;
SQL
  log "analyst functions on the history (second run of each, warm)"
  psql_ -d "$db" <<'SQL'
SET gangsched.clock_override = '2030-01-01 00:00+00';
\o /dev/null
SELECT * FROM gangsched.usage('2029-10-01', '2029-10-02', '1 hour');
SELECT * FROM gangsched.snapshot('2029-10-01 12:00');
\o
\timing on
\echo one day, hourly, in the middle of the history (2029-10-01)
SELECT count(*) AS rows, round(sum(gpu_hours)) AS gpu_hours FROM gangsched.usage('2029-10-01', '2029-10-02', '1 hour');
SELECT round(avg(allocated_gpus)) AS allocated_gpus, round(avg(utilization)::numeric, 3) AS utilization
  FROM gangsched.utilization('2029-10-01', '2029-10-02', '1 hour');
SELECT count(*) AS workers_held FROM gangsched.snapshot('2029-10-01 12:00');
SELECT submitted, placed, round(mean_s) AS mean_s, p95_s FROM gangsched.queue_waits('2029-10-01', '2029-10-02') WHERE team IS NULL;
SELECT preemptions, released, killed FROM gangsched.preemption_summary('2029-10-01', '2029-10-02') WHERE team IS NULL;
\echo a day near the start of the history, and the last day
SELECT count(*) AS rows, round(sum(gpu_hours)) AS gpu_hours FROM gangsched.usage('2028-09-01', '2028-09-02', '1 hour');
SELECT count(*) AS rows, round(sum(gpu_hours)) AS gpu_hours FROM gangsched.usage('2029-12-31', '2030-01-01', '1 hour');
SELECT round(avg(waiting_jobs)::numeric, 1) AS waiting_jobs, max(max_waiting_jobs) AS peak
  FROM gangsched.queue_depth('2029-12-31', '2030-01-01', '1 hour');
SELECT round(avg(waiting_jobs)::numeric, 1) AS waiting_jobs, max(max_waiting_jobs) AS peak
  FROM gangsched.queue_depth('2029-10-01', '2029-10-02', '1 hour');
\echo a week, daily; a month, daily
SELECT count(*) AS rows, round(sum(gpu_hours)) AS gpu_hours FROM gangsched.usage('2029-10-01', '2029-10-08', '1 day');
SELECT round(avg(utilization)::numeric, 3) AS utilization FROM gangsched.utilization('2029-10-01', '2029-11-01', '1 day');
\timing off
\echo the plans of a one-day usage() (auto_explain of the statements inside)
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_analyze = on;
SET auto_explain.log_buffers = on;
SET auto_explain.log_nested_statements = on;
SET client_min_messages = log;
\o /dev/null
SELECT * FROM gangsched.usage('2029-10-01', '2029-10-02', '1 hour');
SQL
}

# --- what it needs ----------------------------------------------------------
for f in philly_nodes.csv philly_dev_week.csv philly_vc_quota.csv; do
  [ -r "$TRACES/$f" ] || { echo "bench/replay.sh: $TRACES/$f is missing (--traces DIR)" >&2; exit 2; }
done
if ! command -v gnuplot >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    log "installing gnuplot-nox"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gnuplot-nox >/dev/null
  else
    echo "bench/replay.sh: gnuplot is missing: apt-get install gnuplot-nox (as root)" >&2
    exit 2
  fi
fi
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)}
REPLAY=$(command -v gangsched-replay || true)
[ -n "$REPLAY" ] || REPLAY="$("$PG_CONFIG" --bindir)/gangsched-replay"
if [ ! -x "$REPLAY" ]; then
  log "building tools/replay/gangsched-replay"
  make -s -C "$ROOT" tools/replay/gangsched-replay >&2
  REPLAY=$ROOT/tools/replay/gangsched-replay
fi
psql_ -d "$MAINT_DB" -c 'SELECT 1' >/dev/null ||
  { echo "bench/replay.sh: no server at PGHOST=${PGHOST:-} PGPORT=${PGPORT:-}" >&2; exit 2; }
mkdir -p "$OUT"

DBS=()
cleanup() {
  if [ "$KEEP" -eq 0 ]; then
    for db in "${DBS[@]}"; do psql_ -d "$MAINT_DB" -c "DROP DATABASE IF EXISTS \"$db\"" 2>/dev/null || true; done
  else
    [ ${#DBS[@]} -gt 0 ] && log "kept databases: ${DBS[*]}"
  fi
}
trap cleanup EXIT

if [ "$HISTORY" -gt 0 ]; then
  history "$HISTORY"
  exit 0
fi

# --- the replays --------------------------------------------------------------
echo "scale,policy,hour,capacity_gpus,allocated_gpus,waiting_gpus,waiting_jobs" > "$OUT/hourly.csv"
echo "scale,policy,team,quota_gpus,gpu_hours,jobs,wait_mean_h,wait_p95_h,preempted,preempting" > "$OUT/teams.csv"
for scale in $SCALES; do
  tag=s$(echo "$scale" | tr -d '.')
  log "replaying the Philly development week at scale $scale ($POLICIES)"
  "$REPLAY" --nodes "$TRACES/philly_nodes.csv" --trace "$TRACES/philly_dev_week.csv" \
            --quotas "$TRACES/philly_vc_quota.csv" --scale "$scale" --policies "$POLICIES" \
            --json --keep --db-prefix "replay_$tag" "${EXTRA[@]}" > "$OUT/replay_$tag.jsonl"
  for p in ${POLICIES//,/ }; do
    db="replay_${tag}_${p//-/_}"
    DBS+=("$db")
    # hourly allocated and waiting GPUs, from the analyst functions
    psql_ -d "$db" -At -F, <<SQL >> "$OUT/hourly.csv"
SELECT '$scale', '$p', round(date_part('epoch', u.bucket_start - timestamptz '$START') / 3600),
       round(u.capacity_gpus::numeric, 2), round(u.allocated_gpus::numeric, 2),
       round(q.waiting_gpus::numeric, 2), round(q.waiting_jobs::numeric, 2)
  FROM gangsched.utilization('$START', timestamptz '$START' + interval '$PLOT_DAYS days', '1 hour') u
  JOIN gangsched.queue_depth('$START', timestamptz '$START' + interval '$PLOT_DAYS days', '1 hour') q
       USING (bucket_start)
 ORDER BY u.bucket_start;
SQL
    # per team: what it held, how long its jobs waited, preemptions suffered and caused
    psql_ -d "$db" -At -F, <<SQL >> "$OUT/teams.csv"
SELECT '$scale', '$p', u.team, u.quota_gpus, round(u.gpu_hours::numeric), w.submitted,
       round((w.mean_s / 3600)::numeric, 2), round((w.p95_s / 3600)::numeric, 2),
       COALESCE(ps.preemptions, 0), COALESCE(ps.preemptors, 0)
  FROM gangsched.usage('$START', timestamptz '$START' + interval '$PLOT_DAYS days', '$PLOT_DAYS days') u
  JOIN gangsched.queue_waits('$START', timestamptz '$START' + interval '$PLOT_DAYS days') w USING (team)
  LEFT JOIN gangsched.preemption_summary('$START', timestamptz '$START' + interval '$PLOT_DAYS days') ps USING (team)
 ORDER BY w.submitted DESC;
SQL
  done
done

# --- the table ----------------------------------------------------------------
python3 - "$OUT" $SCALES > "$OUT/table.md" <<'PY'
import json, sys, os
out, scales = sys.argv[1], sys.argv[2:]
rows = []
for sc in scales:
    tag = 's' + sc.replace('.', '')
    for line in open(os.path.join(out, 'replay_%s.jsonl' % tag)):
        r = json.loads(line); r['scale'] = sc; rows.append(r)
def h(s): return '%.1f h' % (s / 3600.0)
cols = [('scale', lambda r: r['scale']), ('policy', lambda r: r['policy']),
        ('GPUs', lambda r: r['gpus']), ('jobs', lambda r: r['jobs']),
        ('finished', lambda r: r['finished']), ('makespan', lambda r: '%.1f d' % (r['makespan_s'] / 86400.0)),
        ('JCT mean', lambda r: h(r['jct_mean_s'])), ('JCT p50', lambda r: h(r['jct_p50_s'])),
        ('JCT p95', lambda r: h(r['jct_p95_s'])), ('wait mean', lambda r: h(r['wait_mean_s'])),
        ('wait p95', lambda r: h(r['wait_p95_s'])), ('GPU alloc ratio', lambda r: '%.3f' % r['gpu_alloc_ratio'] if r['gpu_alloc_ratio'] is not None else '-'),
        ('contended', lambda r: h(r['contended_s'])),
        ('wait guaranteed', lambda r: h(r['wait_guaranteed_mean_s']) if r.get('wait_guaranteed_mean_s') is not None else '-'),
        ('wait borrowing', lambda r: h(r['wait_borrowed_mean_s']) if r.get('wait_borrowed_mean_s') is not None else '-'),
        ('idle GPU-h while waiting', lambda r: '%.0f' % r['idle_gpu_hours_waiting']),
        ('preemptions', lambda r: r['preemptions']),
        ('per job', lambda r: '%.3f' % r['preemptions_per_job']), ('most of one job', lambda r: r['max_preemptions_job']),
        ('stranded GPUs', lambda r: '%.0f' % r['stranded_gpus']), ('kills', lambda r: r['kills']),
        ('lost GPU-h', lambda r: '%.1f' % r['lost_gpu_hours']),
        ('partial', lambda r: r['partial_placements']), ('invariant viol.', lambda r: r['invariant_violations']),
        ('Jain', lambda r: '%.3f' % r['jain_fairness'] if r['jain_fairness'] is not None else '-'),
        ('rounds', lambda r: r['rounds']), ('round ms', lambda r: '%.1f' % r['round_ms_mean']),
        ('wall s', lambda r: '%.0f' % r['wall_s'])]
print('| ' + ' | '.join(c for c, _ in cols) + ' |')
print('|' + '|'.join(' --- ' for _ in cols) + '|')
for r in rows:
    print('| ' + ' | '.join(str(f(r)) for _, f in cols) + ' |')
# per team, from the analyst functions: waits under each policy
import csv
teams = list(csv.DictReader(open(os.path.join(out, 'teams.csv'))))
pols = []
for t in teams:
    if t['policy'] not in pols: pols.append(t['policy'])
for sc in scales:
    sel = [t for t in teams if t['scale'] == sc]
    if not sel: continue
    names = []
    for t in sel:
        if t['team'] not in names: names.append(t['team'])
    print()
    print('Scale %s, per team (gangsched.usage, queue_waits, preemption_summary over the plotted days):' % sc)
    print()
    hdr = ['team', 'quota GPUs', 'jobs'] + ['%s GPU-h' % p for p in pols] + ['%s wait mean h' % p for p in pols] \
          + ['%s wait p95 h' % p for p in pols] + ['%s preempted / preempting' % p for p in pols if p.startswith('drf')]
    print('| ' + ' | '.join(hdr) + ' |')
    print('|' + '|'.join(' --- ' for _ in hdr) + '|')
    for n in names:
        by = {t['policy']: t for t in sel if t['team'] == n}
        any_ = next(iter(by.values()))
        row = [n, any_['quota_gpus'], any_['jobs']] + [by[p]['gpu_hours'] if p in by else '' for p in pols] \
              + [by[p]['wait_mean_h'] if p in by else '' for p in pols] + [by[p]['wait_p95_h'] if p in by else '' for p in pols] \
              + ['%s / %s' % (by[p]['preempted'], by[p]['preempting']) if p in by else '' for p in pols if p.startswith('drf')]
        print('| ' + ' | '.join(row) + ' |')
PY
cat "$OUT/table.md"

# --- the plot -------------------------------------------------------------------
nsc=$(echo $SCALES | wc -w)
{
  echo "set terminal pngcairo size 1200,$((360 * nsc + 80)) font 'DejaVu Sans,10' noenhanced"
  echo "set output '$OUT/replay-philly.png'"
  echo "set datafile separator ','"
  echo "set multiplot layout $nsc,2 title 'Philly development week: hourly means from gangsched.utilization() and gangsched.queue_depth()'"
  echo "set xlabel 'hours from 2017-10-02 00:00 UTC'; set xrange [0:$((PLOT_DAYS * 24))]; set xtics 24; set grid"
  echo "set key top left"
  for scale in $SCALES; do
    echo "set ylabel 'GPUs'; set title 'scale $scale: allocated GPUs'"
    echo "plot '$OUT/hourly.csv' using 3:(\$1==$scale && strcol(2) eq 'drf' ? \$4 : 1/0) with lines lw 1 dt 2 lc rgb '#555555' title 'capacity', \\"
    echo "     '' using 3:(\$1==$scale && strcol(2) eq 'fifo' ? \$5 : 1/0) with lines lw 1.5 lc rgb '#d95f02' title 'fifo', \\"
    echo "     '' using 3:(\$1==$scale && strcol(2) eq 'drf' ? \$5 : 1/0) with lines lw 1.5 lc rgb '#1b9e77' title 'drf'"
    echo "set title 'scale $scale: GPUs asked for by waiting jobs'"
    echo "plot '$OUT/hourly.csv' using 3:(\$1==$scale && strcol(2) eq 'fifo' ? \$6 : 1/0) with lines lw 1.5 lc rgb '#d95f02' title 'fifo', \\"
    echo "     '' using 3:(\$1==$scale && strcol(2) eq 'drf' ? \$6 : 1/0) with lines lw 1.5 lc rgb '#1b9e77' title 'drf'"
  done
  echo "unset multiplot"
} > "$OUT/plot.gp"
gnuplot "$OUT/plot.gp"
log "plot: $OUT/replay-philly.png"
if [ "$DOCS" -eq 1 ]; then
  cp "$OUT/replay-philly.png" "$ROOT/docs/replay-philly.png"
  log "copied to docs/replay-philly.png"
fi
