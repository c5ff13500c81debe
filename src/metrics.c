/*
 * metrics.c — what the rounds record for monitoring (docs/monitoring.md).
 *
 * Every round that ran (gangsched.run_round(), from the worker, pg_cron or
 * by hand) adds itself to a few counters in shared memory: how many rounds,
 * their total duration, and the end and duration of the last one. Shared
 * memory, not a table: an idle scheduler runs a round every
 * gangsched.round_interval, and a table row per round would write WAL on a
 * cluster that does nothing (and change the state a dump is compared with).
 * The counters start at zero when the server starts, which Prometheus reads
 * as a counter reset. Without shared_preload_libraries there is no shared
 * memory and gangsched.round_stats() returns NULLs.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/rangetypes.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "metrics.h"

typedef struct GsRoundStats
{
	pg_atomic_uint64 rounds;	/* rounds that ran */
	pg_atomic_uint64 us_total;	/* their summed duration, microseconds */
	pg_atomic_uint64 last_end;	/* TimestampTz + 1 of the last round's end
								 * (gangsched.now()), 0 none yet */
	pg_atomic_uint64 last_us;	/* the last round's duration */
} GsRoundStats;

static GsRoundStats *gs_round_stats = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
gs_metrics_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(GsRoundStats)));
}

static void
gs_metrics_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	gs_round_stats = ShmemInitStruct("gangsched round stats", sizeof(GsRoundStats), &found);
	if (!found)
	{
		pg_atomic_init_u64(&gs_round_stats->rounds, 0);
		pg_atomic_init_u64(&gs_round_stats->us_total, 0);
		pg_atomic_init_u64(&gs_round_stats->last_end, 0);
		pg_atomic_init_u64(&gs_round_stats->last_us, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
gs_metrics_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = gs_metrics_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = gs_metrics_shmem_startup;
}

/*
 * Called by gs_run_round when a round ran. Rounds take turns on the round's
 * lock, so the last_* pair is written by one round at a time.
 */
void
gs_metrics_note_round(double ms, TimestampTz end)
{
	uint64		us = (uint64) Max(ms * 1000.0, 0.0);

	if (gs_round_stats == NULL)
		return;
	pg_atomic_fetch_add_u64(&gs_round_stats->rounds, 1);
	pg_atomic_fetch_add_u64(&gs_round_stats->us_total, us);
	pg_atomic_write_u64(&gs_round_stats->last_us, us);
	pg_atomic_write_u64(&gs_round_stats->last_end, (uint64) end + 1);
}

/*
 * gangsched.round_stats(): rounds since the server started, their summed
 * duration in seconds, the last round's end and duration in seconds.
 */
PG_FUNCTION_INFO_V1(gs_round_stats_sql);
Datum
gs_round_stats_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	uint64		last_end;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (gs_round_stats == NULL)
	{
		nulls[0] = nulls[1] = nulls[2] = nulls[3] = true;
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
	}
	values[0] = Int64GetDatum((int64) pg_atomic_read_u64(&gs_round_stats->rounds));
	values[1] = Float8GetDatum((double) pg_atomic_read_u64(&gs_round_stats->us_total) / 1e6);
	last_end = pg_atomic_read_u64(&gs_round_stats->last_end);
	if (last_end > 0)
	{
		values[2] = TimestampTzGetDatum((TimestampTz) (last_end - 1));
		values[3] = Float8GetDatum((double) pg_atomic_read_u64(&gs_round_stats->last_us) / 1e6);
	}
	else
		nulls[2] = nulls[3] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* ------------------------------------------------------------------ */
/* gangsched.metric_series(): every series of gangsched.metrics        */
/* ------------------------------------------------------------------ */

/*
 * The view gangsched.metrics is this function: one pass over each table it
 * reads (teams, pools, nodes, the live jobs, the open allocations, the
 * counters and their deltas, the holds), aggregated in C, every series
 * written with its name, type, help text and labels. As a view of 25 SQL
 * branches it cost about 18 ms on the benchmark's state (2,048 nodes,
 * 20,000 pending): the live jobs' rows deformed to their 42nd column and
 * hashed, the open allocations joined to the nodes, the branches planned
 * at each read, and a correlated subquery per series (docs/monitoring.md).
 *
 * The values are those of the SQL definitions (docs/monitoring.md), read in
 * the statement's snapshot. GPU amounts are numeric: their sums are exact
 * (kept in 128-bit fixed point with 18 decimals, numeric beyond) and
 * converted to float8 once, as sum(numeric)::float8 does. The counters are
 * float8 sums in the tables' order, as sum(float8) over their UNION ALL.
 * The live jobs and open allocations are read through their partial
 * indexes when history dominates the table, sequentially otherwise.
 */

#ifndef HAVE_INT128
#error "gangsched's metrics need a 128-bit integer type"
#endif

/* ---- exact sums of numerics --------------------------------------- */

#define GS_FIX_DIGITS 18
/* an addend's bound and the sum's, past which it moves to numeric */
#define GS_E18 ((int128) 1000000000000000000LL)
#define GS_FIX_ADD_MAX (GS_E18 * GS_E18 / 10)	/* 1e35 */
#define GS_FIX_FLUSH (GS_E18 * GS_E18 * 10)	/* 1e37 */

typedef struct GsExact
{
	int128		fixed;			/* the sum in units of 1e-18 */
	Numeric		slow;			/* what did not fit, or NULL */
} GsExact;

/* one distinct numeric value seen in a pass */
typedef struct GsNum
{
	int			len;
	const char *bytes;			/* the datum's data bytes (no header) */
	Numeric		num;
	bool		exact;			/* fixed holds it exactly */
	int128		fixed;
	int64		max_times;		/* times * fixed stays within GS_FIX_ADD_MAX */
} GsNum;

#define GS_NUM_CACHE 64

typedef struct GsNumCache
{
	int			n;
	int			last;			/* the last hit */
	GsNum		e[GS_NUM_CACHE];
	GsNum		scratch;		/* a value past the cache's capacity */
} GsNumCache;

static char *
gs_fixed_text(int128 v)
{
	char		digits[64];
	char	   *out = palloc(72);
	int			n = 0,
				o = 0;
	bool		neg = v < 0;

	if (neg)
		v = -v;
	while (v > 0 || n <= GS_FIX_DIGITS)
	{
		digits[n++] = '0' + (int) (v % 10);
		v /= 10;
	}
	if (neg)
		out[o++] = '-';
	while (n > GS_FIX_DIGITS)
		out[o++] = digits[--n];
	out[o++] = '.';
	while (n > 0)
		out[o++] = digits[--n];
	out[o] = '\0';
	return out;
}

/* numeric_out's text (no exponent) as a fixed-point value, when exact */
static bool
gs_text_fixed(const char *s, int128 *out)
{
	int128		v = 0;
	int			intdigits = 0,
				frac = 0;
	bool		neg = false;

	if (*s == '-')
		neg = true, s++;
	if (*s < '0' || *s > '9')
		return false;			/* NaN, Infinity */
	for (; *s >= '0' && *s <= '9'; s++)
	{
		v = v * 10 + (*s - '0');
		if (++intdigits > 19)
			return false;
	}
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++)
		{
			if (frac < GS_FIX_DIGITS)
				v = v * 10 + (*s - '0'), frac++;
			else if (*s != '0')
				return false;
		}
	if (*s != '\0')
		return false;
	for (; frac < GS_FIX_DIGITS; frac++)
		v *= 10;
	*out = neg ? -v : v;
	return true;
}

static GsNum *
gs_num(GsNumCache *c, Datum d)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);
	const char *p;
	int			len,
				i;
	GsNum	   *e;

	if (VARATT_IS_EXTENDED(v) && !VARATT_IS_SHORT(v))
		v = pg_detoast_datum_packed(v);
	p = VARDATA_ANY(v);
	len = VARSIZE_ANY_EXHDR(v);
	e = &c->e[c->last];
	if (c->n > 0 && e->len == len && memcmp(e->bytes, p, len) == 0)
		return e;
	for (i = 0; i < c->n; i++)
		if (c->e[i].len == len && memcmp(c->e[i].bytes, p, len) == 0)
		{
			c->last = i;
			return &c->e[i];
		}
	e = c->n < GS_NUM_CACHE ? &c->e[c->n++] : &c->scratch;
	e->len = len;
	e->bytes = memcpy(palloc(Max(len, 1)), p, len);
	e->num = DatumGetNumericCopy(PointerGetDatum(v));
	e->exact = gs_text_fixed(DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(e->num))),
							 &e->fixed) &&
		e->fixed <= GS_FIX_ADD_MAX && e->fixed >= -GS_FIX_ADD_MAX;
	if (!e->exact)
		e->max_times = -1;
	else if (e->fixed == 0)
		e->max_times = PG_INT64_MAX;
	else
	{
		int128		m = GS_FIX_ADD_MAX / (e->fixed < 0 ? -e->fixed : e->fixed);

		e->max_times = m > PG_INT64_MAX ? PG_INT64_MAX : (int64) m;
	}
	return e;
}

static void
gs_exact_flush(GsExact *a)
{
	Numeric		n;

	if (a->fixed == 0)
		return;
	n = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(gs_fixed_text(a->fixed)),
											ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
	a->slow = a->slow ? numeric_add_opt_error(a->slow, n, NULL) : n;
	a->fixed = 0;
}

/* add times * value */
static inline void
gs_exact_add(GsExact *a, GsNum *v, int64 times)
{
	if (times >= 0 && times <= v->max_times)
	{
		if (a->fixed > GS_FIX_FLUSH || a->fixed < -GS_FIX_FLUSH)
			gs_exact_flush(a);
		a->fixed += v->fixed * times;
	}
	else
	{
		Numeric		n = times == 1 ? v->num : numeric_mul_opt_error(int64_to_numeric(times), v->num, NULL);

		a->slow = a->slow ? numeric_add_opt_error(a->slow, n, NULL) : n;
	}
}

/* the sum as sum(numeric)::float8 gives it (numeric_float8 reads numeric_out's text) */
static double
gs_exact_float8(GsExact *a)
{
	if (a->slow == NULL)
		return DatumGetFloat8(DirectFunctionCall1(float8in, CStringGetDatum(gs_fixed_text(a->fixed))));
	gs_exact_flush(a);
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(a->slow)));
}

/* ---- scans -------------------------------------------------------- */

typedef struct GsScan
{
	Relation	heap;
	Relation	index;			/* NULL: sequential */
	TableScanDesc ts;
	IndexScanDesc is;
	TupleTableSlot *slot;
} GsScan;

static Oid
gs_relid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid("gangsched", false));

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation gangsched.%s does not exist", name),
				 errhint("Reinstall the extension: ALTER EXTENSION gangsched UPDATE, or DROP and CREATE it.")));
	return relid;
}

static AttrNumber
gs_attnum(Relation rel, const char *column)
{
	AttrNumber	a = get_attnum(RelationGetRelid(rel), column);

	if (a == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column %s of gangsched.%s does not exist", column, RelationGetRelationName(rel)),
				 errhint("Reinstall the extension: ALTER EXTENSION gangsched UPDATE, or DROP and CREATE it.")));
	return a;
}

/*
 * Open a scan of gangsched.name in the statement's snapshot: through the
 * partial index live_index (which holds the rows wanted) when the table's
 * statistics say it holds under a quarter of the rows, else sequential.
 * Callers test the index's condition on every row either way.
 */
static void
gs_scan_begin(GsScan *s, const char *name, const char *live_index)
{
	Snapshot	snap = GetActiveSnapshot();

	memset(s, 0, sizeof(*s));
	s->heap = table_open(gs_relid(name), AccessShareLock);
	s->slot = table_slot_create(s->heap, NULL);
	if (live_index != NULL)
	{
		Oid			ix = get_relname_relid(live_index, RelationGetNamespace(s->heap));

		if (OidIsValid(ix))
		{
			Relation	irel = index_open(ix, AccessShareLock);

			if (irel->rd_index->indisvalid && irel->rd_index->indrelid == RelationGetRelid(s->heap) &&
				irel->rd_rel->reltuples >= 0 && s->heap->rd_rel->reltuples > 256 &&
				irel->rd_rel->reltuples * 4 < s->heap->rd_rel->reltuples)
				s->index = irel;
			else
				index_close(irel, AccessShareLock);
		}
	}
	elog(DEBUG2, "gangsched: metrics read gangsched.%s %s", name,
		 s->index != NULL ? "through its partial index" : "sequentially");
	if (s->index != NULL)
	{
		s->is = index_beginscan(s->heap, s->index, snap, 0, 0);
		index_rescan(s->is, NULL, 0, NULL, 0);
	}
	else
		s->ts = table_beginscan(s->heap, snap, 0, NULL);
}

static bool
gs_scan_next(GsScan *s)
{
	if (s->is != NULL)
		return index_getnext_slot(s->is, ForwardScanDirection, s->slot);
	return table_scan_getnextslot(s->ts, ForwardScanDirection, s->slot);
}

static void
gs_scan_end(GsScan *s)
{
	if (s->is != NULL)
	{
		index_endscan(s->is);
		index_close(s->index, AccessShareLock);
	}
	else
		table_endscan(s->ts);
	ExecDropSingleTupleTableSlot(s->slot);
	table_close(s->heap, AccessShareLock);
}

/* a text datum equal to word */
static inline bool
gs_text_is(Datum d, const char *word, int len)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);

	if (VARATT_IS_EXTENDED(v) && !VARATT_IS_SHORT(v))
		v = pg_detoast_datum_packed(v);
	return VARSIZE_ANY_EXHDR(v) == len && memcmp(VARDATA_ANY(v), word, len) == 0;
}

/* the index of d among words (-1: none) */
static int
gs_text_index(Datum d, const char *const *words, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (gs_text_is(d, words[i], (int) strlen(words[i])))
			return i;
	return -1;
}

/* ---- what the series are made of ---------------------------------- */

static const char *const gs_live_states[] = {"pending", "nominated", "placed", "running", "preempting"};
static const char *const gs_ended_states[] = {"finished", "failed", "cancelled", "expired"};
static const char *const gs_node_states[] = {"up", "draining", "down"};
#define GS_NLIVE 5

/* the index of a job's state among gs_live_states (-1: ended) */
static inline int
gs_live_state(Datum d)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);
	const char *p;

	if (VARATT_IS_EXTENDED(v) && !VARATT_IS_SHORT(v))
		v = pg_detoast_datum_packed(v);
	p = VARDATA_ANY(v);
	switch (VARSIZE_ANY_EXHDR(v))
	{
		case 7:
			return memcmp(p, "pending", 7) == 0 ? 0 : memcmp(p, "running", 7) == 0 ? 3 : -1;
		case 9:
			return memcmp(p, "nominated", 9) == 0 ? 1 : -1;
		case 6:
			return memcmp(p, "placed", 6) == 0 ? 2 : -1;
		case 10:
			return memcmp(p, "preempting", 10) == 0 ? 4 : -1;
		default:
			return -1;
	}
}
#define GS_NENDED 4
#define GS_NNODE 3

/* the per-team counters of metric_counters (label ''), in output order */
static const char *const gs_team_counters[] = {"jobs_submitted", "jobs_placed", "preemptions", "kills", "requeues",
"lost_gpu_seconds", "queue_wait_seconds"};
#define GS_NCOUNTERS 7
#define GS_C_PLACED 1
#define GS_C_WAIT_SECONDS 6

typedef struct GsBucketSum
{
	double		le;				/* the label as float8; +Inf for '+Inf' */
	bool		inf;
	double		value;
} GsBucketSum;

typedef struct GsTeam
{
	int32		id;
	char	   *name;
	int64		jobs[GS_NLIVE];
	GsExact		pending_gpus;
	bool		has_oldest;
	TimestampTz oldest;			/* of pending jobs, when has_oldest */
	GsExact		gpus,
				borrowed;
	double		counters[GS_NCOUNTERS];
	double		ended[GS_NENDED];
	int			nbuckets,
				maxbuckets;
	GsBucketSum *buckets;
} GsTeam;

typedef struct GsPool
{
	int32		id;
	char	   *name;
	int64		gpus,
				unavailable;
	int64		nodes[GS_NNODE];
	bool		has_heartbeat;
	TimestampTz heartbeat_min;	/* among nodes not down */
	GsExact		allocated,
				borrowed;
	bool		has_held;
	double		held;
} GsPool;

typedef struct GsNodePool
{
	int32		node_id;
	int			pool;			/* index into pools */
} GsNodePool;

static int
gs_cmp_int32_first(const void *a, const void *b)
{
	int32		x = *(const int32 *) a,
				y = *(const int32 *) b;

	return x < y ? -1 : x > y;
}

/* index of the element whose leading int32 is id, -1 if none */
static int
gs_find(const void *base, int n, size_t size, int32 id)
{
	int			lo = 0,
				hi = n - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		int32		v = *(const int32 *) ((const char *) base + mid * size);

		if (v == id)
			return mid;
		if (v < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* ids to indexes of an array sorted by a leading int32 id: dense when compact */
typedef struct GsIdMap
{
	const void *base;
	int			n;
	size_t		size;
	int32		lo;
	int64		span;
	int		   *dense;			/* NULL: binary search */
} GsIdMap;

static void
gs_idmap_build(GsIdMap *m, const void *base, int n, size_t size)
{
	m->base = base;
	m->n = n;
	m->size = size;
	m->dense = NULL;
	if (n > 0)
	{
		int32		lo = *(const int32 *) base;
		int32		hi = *(const int32 *) ((const char *) base + (n - 1) * size);
		int64		span = (int64) hi - lo + 1;
		int			i;

		if (span <= 4 * (int64) n + 1024)
		{
			m->lo = lo;
			m->span = span;
			m->dense = palloc(span * sizeof(int));
			memset(m->dense, -1, span * sizeof(int));
			for (i = 0; i < n; i++)
				m->dense[*(const int32 *) ((const char *) base + i * size) - (int64) lo] = i;
		}
	}
}

static inline int
gs_idmap_find(const GsIdMap *m, int32 id)
{
	if (m->dense != NULL)
	{
		int64		k = (int64) id - m->lo;

		return k >= 0 && k < m->span ? m->dense[k] : -1;
	}
	return gs_find(m->base, m->n, m->size, id);
}

/* date_part('epoch', now - t), as the view computed ages */
static double
gs_age(TimestampTz now, TimestampTz t)
{
	Datum		iv = DirectFunctionCall2(timestamp_mi, TimestampTzGetDatum(now), TimestampTzGetDatum(t));

	return DatumGetFloat8(DirectFunctionCall2(interval_part, CStringGetTextDatum("epoch"), iv));
}

/* ---- the families: name, type, help -------------------------------- */

typedef struct GsFamily
{
	const char *name;
	const char *type;
	const char *help;
} GsFamily;

static const GsFamily gs_families[] = {
	{"gangsched_pool_gpus", "gauge", "GPUs on the registered nodes of the pool, whatever their state."},
	{"gangsched_pool_gpus_unavailable", "gauge", "GPUs on nodes of the pool that are draining or down."},
	{"gangsched_pool_gpus_allocated", "gauge", "GPUs held now by the workers of placed, running and preempting jobs."},
	{"gangsched_pool_gpus_borrowed", "gauge", "GPUs held now as borrowed capacity (beyond the teams' nominal quotas)."},
	{"gangsched_pool_gpus_held", "gauge", "GPUs kept for nominated jobs while their preemption victims drain."},
	{"gangsched_pool_heartbeat_age_max_seconds", "gauge",
	"Seconds since the least recent agent heartbeat among the pool's nodes that are not down (absent when none has sent one)."},
	{"gangsched_nodes", "gauge", "Nodes of the pool by state (up, draining, down)."},
	{"gangsched_jobs_live", "gauge", "Jobs by team and live state (pending, nominated, placed, running, preempting)."},
	{"gangsched_jobs_ended_total", "counter", "Jobs that ended, by team and final state (finished, failed, cancelled, expired)."},
	{"gangsched_team_pending_jobs", "gauge", "Jobs of the team waiting in the queue (state pending)."},
	{"gangsched_team_pending_gpus", "gauge", "GPUs the team's pending jobs ask for (workers times GPUs per worker)."},
	{"gangsched_team_oldest_pending_age_seconds", "gauge",
	"Seconds the team's longest-waiting pending job has been in the queue since it last entered it (0 when none waits)."},
	{"gangsched_team_gpus_allocated", "gauge", "GPUs the team's jobs hold now, in every pool."},
	{"gangsched_team_gpus_borrowed", "gauge", "GPUs the team's jobs hold now as borrowed capacity."},
	/* the team counters, in gs_team_counters' order (but queue_wait_seconds) */
	{"gangsched_team_jobs_submitted_total", "counter", "Jobs the team submitted (admitted)."},
	{"gangsched_team_jobs_placed_total", "counter", "Placements of the team's jobs (a requeued job placed again counts again)."},
	{"gangsched_team_preemptions_total", "counter", "Times the team's jobs were told to stop for a preemptor."},
	{"gangsched_team_kills_total", "counter", "Preempted jobs of the team killed at their grace deadline."},
	{"gangsched_team_requeues_total", "counter",
	"Times the team's jobs went back to the queue (preempted, killed, not started in time, node down)."},
	{"gangsched_team_lost_gpu_seconds_total", "counter", "GPU-seconds of work the team's requeued jobs lost since their last checkpoint."},
	{"gangsched_queue_wait_seconds_bucket", "histogram",
	"Placements of the team's jobs that had waited at most `le` seconds in the queue."},
	{"gangsched_queue_wait_seconds_sum", "histogram", "Summed queue waits of the team's placements, seconds."},
	{"gangsched_queue_wait_seconds_count", "histogram", "Placements of the team's jobs."},
	{"gangsched_round_duration_seconds_count", "counter", "Rounds that ran since the server started (worker, pg_cron or by hand)."},
	{"gangsched_round_duration_seconds_sum", "counter", "Summed duration of those rounds, seconds."},
	{"gangsched_round_last_duration_seconds", "gauge", "Duration of the last round, seconds."},
	{"gangsched_round_last_age_seconds", "gauge", "Seconds since the last round ended (on the scheduler's clock)."},
	{"gangsched_worker_up", "gauge", "1 when the background worker runs, 0 when not."},
	{"gangsched_worker_rounds_total", "counter", "Rounds the background worker ran since the server started."},
	{"gangsched_worker_wakeups_total", "counter", "Commits that asked the worker for a round since the server started."},
};

enum
{
	F_POOL_GPUS, F_POOL_UNAVAILABLE, F_POOL_ALLOCATED, F_POOL_BORROWED, F_POOL_HELD, F_POOL_HEARTBEAT,
	F_NODES, F_JOBS_LIVE, F_JOBS_ENDED, F_TEAM_PENDING_JOBS, F_TEAM_PENDING_GPUS, F_TEAM_OLDEST,
	F_TEAM_GPUS, F_TEAM_BORROWED, F_TEAM_COUNTERS, F_WAIT_BUCKET = F_TEAM_COUNTERS + 6, F_WAIT_SUM, F_WAIT_COUNT,
	F_ROUND_COUNT, F_ROUND_SUM, F_ROUND_LAST, F_ROUND_AGE, F_WORKER_UP, F_WORKER_ROUNDS, F_WORKER_WAKEUPS
};

StaticAssertDecl(lengthof(gs_families) == F_WORKER_WAKEUPS + 1, "one family per enum value");

typedef struct GsOut
{
	Tuplestorestate *store;
	TupleDesc	desc;
	Datum		fam_text[lengthof(gs_families)][3];
} GsOut;

/* one series: labels as key, value pairs (NULL key ends them) */
static void
gs_emit(GsOut *o, int family, double value, const char *k1, const char *v1, const char *k2, const char *v2)
{
	JsonbParseState *st = NULL;
	JsonbValue	k,
				v,
			   *res;
	const char *keys[2] = {k1, k2};
	const char *vals[2] = {v1, v2};
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	int			i;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (i = 0; i < 2 && keys[i] != NULL; i++)
	{
		k.type = jbvString;
		k.val.string.val = (char *) keys[i];
		k.val.string.len = (int) strlen(keys[i]);
		v.type = jbvString;
		v.val.string.val = (char *) vals[i];
		v.val.string.len = (int) strlen(vals[i]);
		pushJsonbValue(&st, WJB_KEY, &k);
		pushJsonbValue(&st, WJB_VALUE, &v);
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	values[0] = o->fam_text[family][0];
	values[1] = o->fam_text[family][1];
	values[2] = o->fam_text[family][2];
	values[3] = JsonbPGetDatum(JsonbValueToJsonb(res));
	values[4] = Float8GetDatum(value);
	tuplestore_putvalues(o->store, o->desc, values, nulls);
}

/* ---- the passes ---------------------------------------------------- */

static int
gs_read_teams(GsTeam **out)
{
	GsScan		s;
	int			n = 0,
				cap = 16;
	GsTeam	   *t = palloc(cap * sizeof(GsTeam));
	AttrNumber	a_id,
				a_name;
	bool		isnull;

	gs_scan_begin(&s, "teams", NULL);
	a_id = gs_attnum(s.heap, "id");
	a_name = gs_attnum(s.heap, "name");
	while (gs_scan_next(&s))
	{
		if (n == cap)
			t = repalloc(t, (cap *= 2) * sizeof(GsTeam));
		memset(&t[n], 0, sizeof(GsTeam));
		t[n].id = DatumGetInt32(slot_getattr(s.slot, a_id, &isnull));
		t[n].name = TextDatumGetCString(slot_getattr(s.slot, a_name, &isnull));
		n++;
	}
	gs_scan_end(&s);
	qsort(t, n, sizeof(GsTeam), gs_cmp_int32_first);
	*out = t;
	return n;
}

static int
gs_read_pools(GsPool **out)
{
	GsScan		s;
	int			n = 0,
				cap = 8;
	GsPool	   *p = palloc(cap * sizeof(GsPool));
	AttrNumber	a_id,
				a_name;
	bool		isnull;

	gs_scan_begin(&s, "pools", NULL);
	a_id = gs_attnum(s.heap, "id");
	a_name = gs_attnum(s.heap, "name");
	while (gs_scan_next(&s))
	{
		if (n == cap)
			p = repalloc(p, (cap *= 2) * sizeof(GsPool));
		memset(&p[n], 0, sizeof(GsPool));
		p[n].id = DatumGetInt32(slot_getattr(s.slot, a_id, &isnull));
		p[n].name = TextDatumGetCString(slot_getattr(s.slot, a_name, &isnull));
		n++;
	}
	gs_scan_end(&s);
	qsort(p, n, sizeof(GsPool), gs_cmp_int32_first);
	*out = p;
	return n;
}

/* nodes by pool and state; returns node id -> pool index, sorted by id */
static int
gs_read_nodes(GsPool *pools, int npools, GsNodePool **out)
{
	GsScan		s;
	int			n = 0,
				cap = 256;
	GsNodePool *np = palloc(cap * sizeof(GsNodePool));
	AttrNumber	a_id,
				a_pool,
				a_gpus,
				a_state,
				a_heartbeat;
	bool		isnull;

	gs_scan_begin(&s, "nodes", NULL);
	a_id = gs_attnum(s.heap, "id");
	a_pool = gs_attnum(s.heap, "pool_id");
	a_gpus = gs_attnum(s.heap, "gpus");
	a_state = gs_attnum(s.heap, "state");
	a_heartbeat = gs_attnum(s.heap, "heartbeat_at");
	while (gs_scan_next(&s))
	{
		int			pi = gs_find(pools, npools, sizeof(GsPool), DatumGetInt32(slot_getattr(s.slot, a_pool, &isnull)));
		int32		gpus;
		int			st;
		Datum		hb;
		GsPool	   *p;

		if (pi < 0)
			continue;
		p = &pools[pi];
		gpus = DatumGetInt32(slot_getattr(s.slot, a_gpus, &isnull));
		st = gs_text_index(slot_getattr(s.slot, a_state, &isnull), gs_node_states, GS_NNODE);
		p->gpus += gpus;
		if (st != 0)
			p->unavailable += gpus;
		if (st >= 0)
			p->nodes[st]++;
		hb = slot_getattr(s.slot, a_heartbeat, &isnull);
		if (!isnull && st != 2 &&
			(!p->has_heartbeat || DatumGetTimestampTz(hb) < p->heartbeat_min))
		{
			p->has_heartbeat = true;
			p->heartbeat_min = DatumGetTimestampTz(hb);
		}
		if (n == cap)
			np = repalloc(np, (cap *= 2) * sizeof(GsNodePool));
		np[n].node_id = DatumGetInt32(slot_getattr(s.slot, a_id, &isnull));
		np[n].pool = pi;
		n++;
	}
	gs_scan_end(&s);
	qsort(np, n, sizeof(GsNodePool), gs_cmp_int32_first);
	*out = np;
	return n;
}

/*
 * The live jobs: counts by team and state, the pending ones' GPUs and
 * their oldest entry into the queue. queued_at is the row's 31st column,
 * so reading it is about a fifth of the whole read; an index on (team_id,
 * queued_at) of the pending jobs would spare that, but the round's updates
 * of pending jobs' reasons (not HOT when their page is full) then cost the
 * cold round 5-10 % more (docs/monitoring.md#cost).
 */
static void
gs_read_live_jobs(GsTeam *teams, const GsIdMap *team_ix)
{
	GsScan		s;
	GsNumCache *cache = palloc0(sizeof(GsNumCache));
	AttrNumber	a_team,
				a_state,
				a_workers,
				a_gpus,
				a_queued;
	bool		isnull;

	gs_scan_begin(&s, "gangs", "gangs_live_idx");
	a_team = gs_attnum(s.heap, "team_id");
	a_state = gs_attnum(s.heap, "state");
	a_workers = gs_attnum(s.heap, "workers");
	a_gpus = gs_attnum(s.heap, "gpus");
	a_queued = gs_attnum(s.heap, "queued_at");
	while (gs_scan_next(&s))
	{
		int			st = gs_live_state(slot_getattr(s.slot, a_state, &isnull));
		int			ti;
		GsTeam	   *t;
		TimestampTz q;

		if (st < 0)
			continue;
		ti = gs_idmap_find(team_ix, DatumGetInt32(slot_getattr(s.slot, a_team, &isnull)));
		if (ti < 0)
			continue;
		t = &teams[ti];
		t->jobs[st]++;
		if (st != 0)
			continue;
		gs_exact_add(&t->pending_gpus, gs_num(cache, slot_getattr(s.slot, a_gpus, &isnull)),
					 DatumGetInt32(slot_getattr(s.slot, a_workers, &isnull)));
		q = DatumGetTimestampTz(slot_getattr(s.slot, a_queued, &isnull));
		if (!t->has_oldest || q < t->oldest)
			t->oldest = q;
		t->has_oldest = true;
	}
	gs_scan_end(&s);
}

/* upper_inf of a range datum: the flags byte ends the range's varlena */
static inline bool
gs_upper_inf(Datum d)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);

	if (VARATT_IS_EXTENDED(v) && !VARATT_IS_SHORT(v))
		return (range_get_flags(DatumGetRangeTypeP(d)) & RANGE_UB_INF) != 0;
	return (((const char *) v)[VARSIZE_ANY(v) - 1] & RANGE_UB_INF) != 0;
}

/* the open allocations by team and by their nodes' pools */
static void
gs_read_allocations(GsTeam *teams, const GsIdMap *team_ix, GsPool *pools, GsNodePool *np, const GsIdMap *node_ix)
{
	GsScan		s;
	GsNumCache *cache = palloc0(sizeof(GsNumCache));
	AttrNumber	a_team,
				a_node,
				a_gpus,
				a_borrowed,
				a_during;
	bool		isnull;

	gs_scan_begin(&s, "allocations", "allocations_current_idx");
	a_team = gs_attnum(s.heap, "team_id");
	a_node = gs_attnum(s.heap, "node_id");
	a_gpus = gs_attnum(s.heap, "gpus");
	a_borrowed = gs_attnum(s.heap, "borrowed");
	a_during = gs_attnum(s.heap, "during");
	while (gs_scan_next(&s))
	{
		int			ni,
					ti;
		GsNum	   *g;
		bool		borrowed;
		GsPool	   *p;

		if (!gs_upper_inf(slot_getattr(s.slot, a_during, &isnull)))
			continue;
		ni = gs_idmap_find(node_ix, DatumGetInt32(slot_getattr(s.slot, a_node, &isnull)));
		if (ni < 0)
			continue;
		p = &pools[np[ni].pool];
		g = gs_num(cache, slot_getattr(s.slot, a_gpus, &isnull));
		borrowed = DatumGetBool(slot_getattr(s.slot, a_borrowed, &isnull));
		gs_exact_add(&p->allocated, g, 1);
		if (borrowed)
			gs_exact_add(&p->borrowed, g, 1);
		ti = gs_idmap_find(team_ix, DatumGetInt32(slot_getattr(s.slot, a_team, &isnull)));
		if (ti < 0)
			continue;
		gs_exact_add(&teams[ti].gpus, g, 1);
		if (borrowed)
			gs_exact_add(&teams[ti].borrowed, g, 1);
	}
	gs_scan_end(&s);
}

/*
 * The counters: metric_counters, then metric_deltas, each value added to
 * its team's slot in that order (sum(value) over their UNION ALL, grouped).
 */
static void
gs_read_counters(GsTeam *teams, const GsIdMap *team_ix)
{
	static const char *const tables[] = {"metric_counters", "metric_deltas"};
	int			k;

	for (k = 0; k < 2; k++)
	{
		GsScan		s;
		AttrNumber	a_name,
					a_team,
					a_label,
					a_value;
		bool		isnull;

		gs_scan_begin(&s, tables[k], NULL);
		a_name = gs_attnum(s.heap, "name");
		a_team = gs_attnum(s.heap, "team_id");
		a_label = gs_attnum(s.heap, "label");
		a_value = gs_attnum(s.heap, "value");
		while (gs_scan_next(&s))
		{
			int			ti = gs_idmap_find(team_ix, DatumGetInt32(slot_getattr(s.slot, a_team, &isnull)));
			Datum		name,
						label;
			double		value;
			GsTeam	   *t;
			int			c;

			if (ti < 0)
				continue;
			t = &teams[ti];
			name = slot_getattr(s.slot, a_name, &isnull);
			label = slot_getattr(s.slot, a_label, &isnull);
			value = DatumGetFloat8(slot_getattr(s.slot, a_value, &isnull));
			if (gs_text_is(name, "queue_wait_bucket", 17))
			{
				bool		inf = gs_text_is(label, "+Inf", 4);
				double		le = inf ? 0 : DatumGetFloat8(DirectFunctionCall1(float8in,
																			  CStringGetDatum(TextDatumGetCString(label))));
				int			i;

				for (i = 0; i < t->nbuckets; i++)
					if (t->buckets[i].inf == inf && (inf || t->buckets[i].le == le))
						break;
				if (i == t->nbuckets)
				{
					if (t->nbuckets == t->maxbuckets)
					{
						t->maxbuckets = Max(16, t->maxbuckets * 2);
						t->buckets = t->buckets ? repalloc(t->buckets, t->maxbuckets * sizeof(GsBucketSum))
							: palloc(t->maxbuckets * sizeof(GsBucketSum));
					}
					t->buckets[i].inf = inf;
					t->buckets[i].le = le;
					t->buckets[i].value = 0;
					t->nbuckets++;
				}
				t->buckets[i].value += value;
			}
			else if (gs_text_is(name, "jobs_ended", 10))
			{
				if ((c = gs_text_index(label, gs_ended_states, GS_NENDED)) >= 0)
					t->ended[c] += value;
			}
			else if (gs_text_is(label, "", 0) &&
					 (c = gs_text_index(name, gs_team_counters, GS_NCOUNTERS)) >= 0)
				t->counters[c] += value;
		}
		gs_scan_end(&s);
	}
}

/* GPUs held for nominated jobs by pool (a few rows: SQL) */
static void
gs_read_holds(GsPool *pools, int npools)
{
	static SPIPlanPtr plan = NULL;
	uint64		i;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "gangsched: SPI_connect failed");
	if (plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare("SELECT n.pool_id, pg_catalog.sum(g.gpus)::pg_catalog.float8"
									"  FROM gangsched.holds x JOIN gangsched.gangs g ON g.id = x.job"
									"  JOIN gangsched.nodes n ON n.id = x.node_id GROUP BY n.pool_id",
									0, NULL);

		if (p == NULL || SPI_keepplan(p) != 0)
			elog(ERROR, "gangsched: preparing the holds' statement failed");
		plan = p;
	}
	/* read-only: the statement's snapshot, as the scans */
	if (SPI_execute_plan(plan, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "gangsched: reading the holds failed");
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int			pi = gs_find(pools, npools, sizeof(GsPool),
								 DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull)));
		Datum		v = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);

		if (pi >= 0 && !isnull)
		{
			pools[pi].has_held = true;
			pools[pi].held = DatumGetFloat8(v);
		}
	}
	SPI_finish();
}

/*
 * gangsched.metric_series(at, worker_pid, worker_wakeups, worker_rounds):
 * the rows of gangsched.metrics; `at` is the scheduler's clock, the worker_*
 * arguments gangsched.worker_status()'s columns.
 */
PG_FUNCTION_INFO_V1(gs_metric_series);
Datum
gs_metric_series(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now;
	GsTeam	   *teams;
	GsPool	   *pools;
	GsNodePool *np;
	int			nteams,
				npools,
				nnodes,
				i,
				j,
				f;
	ArrayType  *bounds;
	Datum	   *bound_d;
	int			nbounds;
	char	  **bound_text;
	GsOut		o;
	GsIdMap		team_ix,
				node_ix;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the time of the metrics must not be null"),
				 errhint("Pass gangsched.now().")));
	now = PG_GETARG_TIMESTAMPTZ(0);
	InitMaterializedSRF(fcinfo, 0);
	o.store = rsinfo->setResult;
	o.desc = rsinfo->setDesc;
	for (f = 0; f < (int) lengthof(gs_families); f++)
	{
		o.fam_text[f][0] = CStringGetTextDatum(gs_families[f].name);
		o.fam_text[f][1] = CStringGetTextDatum(gs_families[f].type);
		o.fam_text[f][2] = CStringGetTextDatum(gs_families[f].help);
	}

	nteams = gs_read_teams(&teams);
	npools = gs_read_pools(&pools);
	nnodes = gs_read_nodes(pools, npools, &np);
	gs_idmap_build(&team_ix, teams, nteams, sizeof(GsTeam));
	gs_idmap_build(&node_ix, np, nnodes, sizeof(GsNodePool));
	gs_read_live_jobs(teams, &team_ix);
	gs_read_allocations(teams, &team_ix, pools, np, &node_ix);
	gs_read_counters(teams, &team_ix);
	gs_read_holds(pools, npools);

	/* the histogram's bounds, as the view's text labels (float8out) */
	bounds = DatumGetArrayTypeP(OidFunctionCall0(
		LookupFuncName(list_make2(makeString("gangsched"), makeString("queue_wait_buckets")), 0, NULL, false)));
	deconstruct_array(bounds, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &bound_d, NULL, &nbounds);
	bound_text = palloc(nbounds * sizeof(char *));
	for (i = 0; i < nbounds; i++)
		bound_text[i] = DatumGetCString(DirectFunctionCall1(float8out, bound_d[i]));

	/* pools */
	for (i = 0; i < npools; i++)
		gs_emit(&o, F_POOL_GPUS, (double) pools[i].gpus, "pool", pools[i].name, NULL, NULL);
	for (i = 0; i < npools; i++)
		gs_emit(&o, F_POOL_UNAVAILABLE, (double) pools[i].unavailable, "pool", pools[i].name, NULL, NULL);
	for (i = 0; i < npools; i++)
		gs_emit(&o, F_POOL_ALLOCATED, gs_exact_float8(&pools[i].allocated), "pool", pools[i].name, NULL, NULL);
	for (i = 0; i < npools; i++)
		gs_emit(&o, F_POOL_BORROWED, gs_exact_float8(&pools[i].borrowed), "pool", pools[i].name, NULL, NULL);
	for (i = 0; i < npools; i++)
		gs_emit(&o, F_POOL_HELD, pools[i].has_held ? pools[i].held : 0, "pool", pools[i].name, NULL, NULL);
	for (i = 0; i < npools; i++)
		if (pools[i].has_heartbeat)
			gs_emit(&o, F_POOL_HEARTBEAT, gs_age(now, pools[i].heartbeat_min), "pool", pools[i].name, NULL, NULL);
	for (i = 0; i < npools; i++)
		for (j = 0; j < GS_NNODE; j++)
			gs_emit(&o, F_NODES, (double) pools[i].nodes[j], "pool", pools[i].name, "state", gs_node_states[j]);
	/* jobs and teams */
	for (i = 0; i < nteams; i++)
		for (j = 0; j < GS_NLIVE; j++)
			gs_emit(&o, F_JOBS_LIVE, (double) teams[i].jobs[j], "team", teams[i].name, "state", gs_live_states[j]);
	for (i = 0; i < nteams; i++)
		for (j = 0; j < GS_NENDED; j++)
			gs_emit(&o, F_JOBS_ENDED, teams[i].ended[j], "team", teams[i].name, "state", gs_ended_states[j]);
	for (i = 0; i < nteams; i++)
	{
		GsTeam	   *t = &teams[i];

		gs_emit(&o, F_TEAM_PENDING_JOBS, (double) t->jobs[0], "team", t->name, NULL, NULL);
		gs_emit(&o, F_TEAM_PENDING_GPUS, gs_exact_float8(&t->pending_gpus), "team", t->name, NULL, NULL);
		gs_emit(&o, F_TEAM_OLDEST, t->has_oldest ? gs_age(now, t->oldest) : 0, "team", t->name, NULL, NULL);
		gs_emit(&o, F_TEAM_GPUS, gs_exact_float8(&t->gpus), "team", t->name, NULL, NULL);
		gs_emit(&o, F_TEAM_BORROWED, gs_exact_float8(&t->borrowed), "team", t->name, NULL, NULL);
		for (j = 0; j < 6; j++)
			gs_emit(&o, F_TEAM_COUNTERS + j, t->counters[j], "team", t->name, NULL, NULL);
	}
	/* queue wait: cumulative buckets, +Inf the count of all */
	for (i = 0; i < nteams; i++)
	{
		GsTeam	   *t = &teams[i];

		for (j = 0; j <= nbounds; j++)
		{
			double		sum = 0;
			double		b = j < nbounds ? DatumGetFloat8(bound_d[j]) : 0;
			int			k;

			for (k = 0; k < t->nbuckets; k++)
				if (j == nbounds || (!t->buckets[k].inf && t->buckets[k].le <= b))
					sum += t->buckets[k].value;
			gs_emit(&o, F_WAIT_BUCKET, sum, "team", t->name, "le", j < nbounds ? bound_text[j] : "+Inf");
		}
	}
	for (i = 0; i < nteams; i++)
		gs_emit(&o, F_WAIT_SUM, teams[i].counters[GS_C_WAIT_SECONDS], "team", teams[i].name, NULL, NULL);
	for (i = 0; i < nteams; i++)
		gs_emit(&o, F_WAIT_COUNT, teams[i].counters[GS_C_PLACED], "team", teams[i].name, NULL, NULL);
	/* rounds and the worker */
	if (gs_round_stats != NULL)
	{
		uint64		last_end = pg_atomic_read_u64(&gs_round_stats->last_end);

		gs_emit(&o, F_ROUND_COUNT, (double) (int64) pg_atomic_read_u64(&gs_round_stats->rounds), NULL, NULL, NULL, NULL);
		gs_emit(&o, F_ROUND_SUM, (double) pg_atomic_read_u64(&gs_round_stats->us_total) / 1e6, NULL, NULL, NULL, NULL);
		if (last_end > 0)
		{
			gs_emit(&o, F_ROUND_LAST, (double) pg_atomic_read_u64(&gs_round_stats->last_us) / 1e6, NULL, NULL, NULL, NULL);
			gs_emit(&o, F_ROUND_AGE, gs_age(now, (TimestampTz) (last_end - 1)), NULL, NULL, NULL, NULL);
		}
	}
	gs_emit(&o, F_WORKER_UP, PG_ARGISNULL(1) ? 0 : 1, NULL, NULL, NULL, NULL);
	if (!PG_ARGISNULL(3))
		gs_emit(&o, F_WORKER_ROUNDS, (double) PG_GETARG_INT64(3), NULL, NULL, NULL, NULL);
	if (!PG_ARGISNULL(2))
		gs_emit(&o, F_WORKER_WAKEUPS, (double) PG_GETARG_INT64(2), NULL, NULL, NULL, NULL);
	return (Datum) 0;
}
