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

#include "access/amapi.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/nbtree.h"
#include "access/transam.h"
#include "access/relscan.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
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
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/predicate.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
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
 * The live jobs and open allocations are read from their partial indexes'
 * entries, leaf page by leaf page (GsLeafRead).
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
	uint64		key;			/* the bytes and their length, when at most 7 (else 0) */
	int			len;
	const char *bytes;			/* the datum's data bytes (no header) */
	Numeric		num;
	bool		exact;			/* fixed holds it exactly */
	int128		fixed;
	int64		max_times;		/* times * fixed stays within GS_FIX_ADD_MAX */
} GsNum;

#define GS_NUM_CACHE 64

#define GS_NUM_SLOTS 256			/* a power of two, over 2 * GS_NUM_CACHE */

typedef struct GsNumCache
{
	int			n;
	int			last;			/* the last hit */
	int16		slot[GS_NUM_SLOTS];	/* keyed entries by their key's hash: 1 + index, 0 empty */
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

static inline bool
gs_bytes_eq(const GsNum *e, const char *p, int len)
{
	int			i;

	if (e->len != len)
		return false;
	for (i = 0; i < len; i++)
		if (e->bytes[i] != p[i])
			return false;
	return true;
}

/* a numeric's data bytes as a key: 0 when longer than 7 */
static inline uint64
gs_num_key(const char *p, int len)
{
	uint64		k = 0;
	int			i;

	if (len > 7)
		return 0;
	for (i = 0; i < len; i++)
		k = (k << 8) | (uint8) p[i];
	return k | (uint64) (len + 1) << 56;
}

static GsNum *
gs_num(GsNumCache *c, Datum d)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);
	const char *p;
	int			len,
				i;
	uint64		key;
	GsNum	   *e;

	if (VARATT_IS_EXTENDED(v) && !VARATT_IS_SHORT(v))
		v = pg_detoast_datum_packed(v);
	p = VARDATA_ANY(v);
	len = VARSIZE_ANY_EXHDR(v);
	/* (a numeric's few bytes compared as one word: this runs for every row) */
	key = gs_num_key(p, len);
	e = &c->e[c->last];
	if (key != 0)
	{
		uint32		h;

		if (c->n > 0 && e->key == key)
			return e;
		for (h = (uint32) ((key * UINT64CONST(0x9E3779B97F4A7C15)) >> 56);; h = (h + 1) & (GS_NUM_SLOTS - 1))
		{
			if (c->slot[h] == 0)
			{
				if (c->n < GS_NUM_CACHE)
					c->slot[h] = (int16) (c->n + 1);
				break;
			}
			if (c->e[c->slot[h] - 1].key == key)
			{
				c->last = c->slot[h] - 1;
				return &c->e[c->last];
			}
		}
	}
	else
	{
		if (c->n > 0 && gs_bytes_eq(e, p, len))
			return e;
		for (i = 0; i < c->n; i++)
			if (gs_bytes_eq(&c->e[i], p, len))
			{
				c->last = i;
				return &c->e[i];
			}
	}
	e = c->n < GS_NUM_CACHE ? &c->e[c->n++] : &c->scratch;
	e->key = key;
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

/*
 * A scan hands out heap tuples (not slots), and each pass reads the few
 * columns it needs with a GsWalk: the row's attributes are stepped over in
 * order, as heap deforming does, but none is stored but those asked for
 * (a slot's deform stores every attribute up to the last one read, and
 * gangs' queued_at is its 31st). Dropped columns are stepped over like any
 * other; a tuple written before a column was added has none of its own
 * (the column's default then, as heap_getattr gives it).
 */
/* rows ahead of the one read, and the bytes of each row, that a sequential scan prefetches */
#define GS_PREFETCH_AHEAD 4
#define GS_PREFETCH_BYTES 320

/* an attribute's storage, for GsWalk */
typedef struct GsAtt
{
	int16		len;			/* attlen */
	uint8		amask;			/* alignment - 1 */
	bool		byval;
} GsAtt;

typedef struct GsScan
{
	Relation	heap;
	Relation	index;			/* NULL: sequential */
	TableScanDesc ts;
	IndexScanDesc is;
	TupleTableSlot *slot;		/* the index scan's */
	int			prefetch;		/* bytes of each row to prefetch (sequential) */
	int			natts;
	GsAtt	   *att;			/* the relation's attributes */
} GsScan;

typedef struct GsWalk
{
	const GsAtt *att;
	TupleDesc	desc;			/* for attributes the row does not have */
	char	   *tp;				/* the data */
	bits8	   *bp;				/* the null bitmap, NULL when none */
	int			tupnatts;
	int			next;			/* 0-based attribute at off */
	uint32		off;
} GsWalk;

static inline void
gs_walk_start(GsWalk *w, const GsScan *s, HeapTuple tuple)
{
	HeapTupleHeader th = tuple->t_data;

	w->att = s->att;
	w->desc = RelationGetDescr(s->heap);
	w->tp = (char *) th + th->t_hoff;
	w->bp = HeapTupleHasNulls(tuple) ? th->t_bits : NULL;
	w->tupnatts = Min(HeapTupleHeaderGetNatts(th), s->natts);
	w->next = 0;
	w->off = 0;
}

/* a walk over an index tuple's columns (att: the index's) */
static inline void
gs_walk_index_start(GsWalk *w, const GsAtt *att, TupleDesc desc, IndexTuple itup)
{
	w->att = att;
	w->desc = desc;
	w->tp = (char *) itup + IndexInfoFindDataOffset(itup->t_info);
	w->bp = IndexTupleHasNulls(itup) ? (bits8 *) ((char *) itup + sizeof(IndexTupleData)) : NULL;
	w->tupnatts = desc->natts;
	w->next = 0;
	w->off = 0;
}

/* the offset of attribute `to` (0-based) from `from` at off: its start if present */
static uint32
gs_walk_skip(const GsAtt *att, const char *tp, const bits8 *bp, int from, int to, uint32 off)
{
	int			i;

	for (i = from; i < to; i++)
	{
		int			len;

		if (bp != NULL && (bp[i >> 3] & (1 << (i & 7))) == 0)
			continue;			/* null */
		len = att[i].len;
		if (len > 0)
			off = ((off + att[i].amask) & ~(uint32) att[i].amask) + len;
		else if (len == -1)
		{
			/* a 1-byte header is never padded (att_align_pointer) */
			if (tp[off] == 0)
				off = (off + att[i].amask) & ~(uint32) att[i].amask;
			off += VARSIZE_ANY(tp + off);
		}
		else
		{
			off = (off + att[i].amask) & ~(uint32) att[i].amask;
			off += strlen(tp + off) + 1;
		}
	}
	return off;
}

/* attribute attnum of the tuple (attnums asked for in ascending order are stepped to once) */
static inline Datum
gs_walk_get(GsWalk *w, AttrNumber attnum, bool *isnull)
{
	const GsAtt *att = w->att;
	int			a = attnum - 1;
	uint32		off;
	Datum		d;

	if (a >= w->tupnatts)
		return getmissingattr(w->desc, attnum, isnull);
	if (a < w->next)
		w->next = 0, w->off = 0;
	off = gs_walk_skip(att, w->tp, w->bp, w->next, a, w->off);
	w->next = a + 1;
	if (w->bp != NULL && (w->bp[a >> 3] & (1 << (a & 7))) == 0)
	{
		w->off = off;
		*isnull = true;
		return (Datum) 0;
	}
	if (att[a].len != -1 || w->tp[off] == 0)
		off = (off + att[a].amask) & ~(uint32) att[a].amask;
	d = fetch_att(w->tp + off, att[a].byval, att[a].len);
	w->off = att_addlength_pointer(off, att[a].len, w->tp + off);
	*isnull = false;
	return d;
}

/* the attributes' storage, for GsWalk */
static GsAtt *
gs_atts(TupleDesc desc)
{
	GsAtt	   *a = palloc(Max(desc->natts, 1) * sizeof(GsAtt));
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		a[i].len = att->attlen;
		a[i].amask = (uint8) (att_align_nominal(1, att->attalign) - 1);
		a[i].byval = att->attbyval;
	}
	return a;
}

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

	TupleDesc	desc;

	memset(s, 0, sizeof(*s));
	s->heap = table_open(gs_relid(name), AccessShareLock);
	if (s->heap->rd_rel->relam != HEAP_TABLE_AM_OID)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gangsched.%s is not a heap table", name),
				 errhint("Reinstall the extension: gangsched's tables use the heap access method.")));
	desc = RelationGetDescr(s->heap);
	s->prefetch = GS_PREFETCH_BYTES;
	s->natts = desc->natts;
	s->att = gs_atts(desc);
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
		s->slot = table_slot_create(s->heap, NULL);
		s->is = index_beginscan(s->heap, s->index, snap, 0, 0);
		index_rescan(s->is, NULL, 0, NULL, 0);
	}
	else
		s->ts = table_beginscan(s->heap, snap, 0, NULL);
}


/* the next row, as a walk over its attributes; false at the end */
static inline bool
gs_scan_next(GsScan *s, GsWalk *w)
{
	HeapTuple	tuple;

	if (s->is != NULL)
	{
		if (!index_getnext_slot(s->is, ForwardScanDirection, s->slot))
			return false;
		tuple = ExecFetchSlotHeapTuple(s->slot, false, NULL);
	}
	else
	{
		HeapScanDesc hs = (HeapScanDesc) s->ts;

		if ((tuple = heap_getnext(s->ts, ForwardScanDirection)) == NULL)
			return false;
		/*
		 * The rows are read where they lie in shared buffers, and on a busy
		 * machine nearly every row's first touch misses the CPU's caches:
		 * ask for a row a few ahead on the page while this one is read (the
		 * visible rows' offsets are the page-at-a-time scan's).
		 */
		if (s->prefetch > 0 && (hs->rs_base.rs_flags & SO_ALLOW_PAGEMODE) &&
			hs->rs_cindex + GS_PREFETCH_AHEAD < hs->rs_ntuples)
		{
			Page		page = BufferGetPage(hs->rs_cbuf);
			ItemId		lp = PageGetItemId(page, hs->rs_vistuples[hs->rs_cindex + GS_PREFETCH_AHEAD]);
			const char *t = (const char *) PageGetItem(page, lp);
			int			b;

			for (b = 0; b < s->prefetch && b < (int) ItemIdGetLength(lp); b += 64)
				__builtin_prefetch(t + b);
		}
	}
	gs_walk_start(w, s, tuple);
	return true;
}

static void
gs_scan_end(GsScan *s)
{
	if (s->is != NULL)
	{
		index_endscan(s->is);
		index_close(s->index, AccessShareLock);
		ExecDropSingleTupleTableSlot(s->slot);
	}
	else
		table_endscan(s->ts);
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
"lost_gpu_seconds", "shrinks", "shrink_replicas", "queue_wait_seconds"};
#define GS_NCOUNTERS 9
#define GS_C_PLACED 1
#define GS_C_WAIT_SECONDS 8

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
	Datum		labels;			/* {"team": name} */
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
	Datum		labels;			/* {"pool": name} */
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
	{"gangsched_team_lost_gpu_seconds_total", "counter",
	"GPU-seconds of work the team's jobs lost since their last checkpoint (requeued jobs, and workers killed at a shrink's deadline)."},
	{"gangsched_team_shrinks_total", "counter",
	"Times the team's elastic jobs were told to give back replicas for a preemptor instead of stopping whole."},
	{"gangsched_team_shrink_replicas_total", "counter", "Replicas the team's elastic jobs were told to give back in those shrinks."},
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
	F_TEAM_GPUS, F_TEAM_BORROWED, F_TEAM_COUNTERS, F_WAIT_BUCKET = F_TEAM_COUNTERS + GS_NCOUNTERS - 1, F_WAIT_SUM, F_WAIT_COUNT,
	F_ROUND_COUNT, F_ROUND_SUM, F_ROUND_LAST, F_ROUND_AGE, F_WORKER_UP, F_WORKER_ROUNDS, F_WORKER_WAKEUPS
};

StaticAssertDecl(lengthof(gs_families) == F_WORKER_WAKEUPS + 1, "one family per enum value");

typedef struct GsOut
{
	Tuplestorestate *store;
	TupleDesc	desc;
	Datum		fam_text[lengthof(gs_families)][3];
	const bool *want;			/* the families asked for */
	Datum		no_labels;		/* {} */
} GsOut;

/* a labels object: key, value pairs (a NULL key ends them), through the jsonb builder */
static Datum
gs_labels_built(const char *k1, const char *v1, const char *k2, const char *v2)
{
	JsonbParseState *st = NULL;
	JsonbValue	k,
				v,
			   *res;
	const char *keys[2] = {k1, k2};
	const char *vals[2] = {v1, v2};
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
	return JsonbPGetDatum(JsonbValueToJsonb(res));
}

/*
 * The same object written as jsonb's binary form directly (a few hundred
 * series per read: the builder's parse state and copies cost about a
 * microsecond a series). An object of string values: its header, one
 * JEntry per key then per value (the first key's holds its end offset,
 * the others their lengths, JB_OFFSET_STRIDE being above four), then the
 * keys' bytes and the values' bytes; keys in jsonb's order (shorter first,
 * then bytewise). Assert-enabled builds check it against the builder.
 */
static Datum
gs_labels(const char *k1, const char *v1, const char *k2, const char *v2)
{
	const char *k[2],
			   *v[2];
	Size		kl[2],
				vl[2],
				total = 0,
				size;
	int			n = 0,
				i;
	Jsonb	   *jb;
	char	   *data;

	if (k1 != NULL)
	{
		k[n] = k1, v[n] = v1, n++;
		if (k2 != NULL)
			k[n] = k2, v[n] = v2, n++;
	}
	for (i = 0; i < n; i++)
	{
		kl[i] = strlen(k[i]);
		vl[i] = strlen(v[i]);
		total += kl[i] + vl[i];
	}
	if (total >= JENTRY_OFFLENMASK || (n == 2 && kl[0] == kl[1] && memcmp(k[0], k[1], kl[0]) == 0))
		return gs_labels_built(k1, v1, k2, v2);
	if (n == 2 && (kl[1] < kl[0] || (kl[1] == kl[0] && memcmp(k[1], k[0], kl[0]) < 0)))
	{
		const char *t;
		Size		l;

		t = k[0], k[0] = k[1], k[1] = t;
		t = v[0], v[0] = v[1], v[1] = t;
		l = kl[0], kl[0] = kl[1], kl[1] = l;
		l = vl[0], vl[0] = vl[1], vl[1] = l;
	}
	size = offsetof(Jsonb, root) + offsetof(JsonbContainer, children) + 2 * n * sizeof(JEntry) + total;
	jb = palloc(size);
	SET_VARSIZE(jb, size);
	jb->root.header = (uint32) n | JB_FOBJECT;
	for (i = 0; i < n; i++)
	{
		jb->root.children[i] = JENTRY_ISSTRING | (i == 0 ? JENTRY_HAS_OFF | (uint32) kl[0] : (uint32) kl[i]);
		jb->root.children[n + i] = JENTRY_ISSTRING | (uint32) vl[i];
	}
	data = (char *) &jb->root.children[2 * n];
	for (i = 0; i < n; i++)
	{
		memcpy(data, k[i], kl[i]);
		data += kl[i];
	}
	for (i = 0; i < n; i++)
	{
		memcpy(data, v[i], vl[i]);
		data += vl[i];
	}
#ifdef USE_ASSERT_CHECKING
	{
		Jsonb	   *b = DatumGetJsonbP(gs_labels_built(k1, v1, k2, v2));

		Assert(VARSIZE(b) == size && memcmp(b, jb, size) == 0);
	}
#endif
	return JsonbPGetDatum(jb);
}

/* one series (none when its family was not asked for) */
static void
gs_emit(GsOut *o, int family, double value, Datum labels)
{
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	if (!o->want[family])
		return;
	values[0] = o->fam_text[family][0];
	values[1] = o->fam_text[family][1];
	values[2] = o->fam_text[family][2];
	values[3] = labels;
	values[4] = Float8GetDatum(value);
	tuplestore_putvalues(o->store, o->desc, values, nulls);
}

/* ---- the passes ---------------------------------------------------- */

static int
gs_read_teams(GsTeam **out)
{
	GsScan		s;
	GsWalk		w;
	int			n = 0,
				cap = 16;
	GsTeam	   *t = palloc(cap * sizeof(GsTeam));
	AttrNumber	a_id,
				a_name;
	bool		isnull;

	gs_scan_begin(&s, "teams", NULL);
	a_id = gs_attnum(s.heap, "id");
	a_name = gs_attnum(s.heap, "name");
	while (gs_scan_next(&s, &w))
	{
		if (n == cap)
			t = repalloc(t, (cap *= 2) * sizeof(GsTeam));
		memset(&t[n], 0, sizeof(GsTeam));
		t[n].id = DatumGetInt32(gs_walk_get(&w, a_id, &isnull));
		t[n].name = TextDatumGetCString(gs_walk_get(&w, a_name, &isnull));
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
	GsWalk		w;
	int			n = 0,
				cap = 8;
	GsPool	   *p = palloc(cap * sizeof(GsPool));
	AttrNumber	a_id,
				a_name;
	bool		isnull;

	gs_scan_begin(&s, "pools", NULL);
	a_id = gs_attnum(s.heap, "id");
	a_name = gs_attnum(s.heap, "name");
	while (gs_scan_next(&s, &w))
	{
		if (n == cap)
			p = repalloc(p, (cap *= 2) * sizeof(GsPool));
		memset(&p[n], 0, sizeof(GsPool));
		p[n].id = DatumGetInt32(gs_walk_get(&w, a_id, &isnull));
		p[n].name = TextDatumGetCString(gs_walk_get(&w, a_name, &isnull));
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
	GsWalk		w;
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
	while (gs_scan_next(&s, &w))
	{
		int32		id = DatumGetInt32(gs_walk_get(&w, a_id, &isnull));
		int			pi = gs_find(pools, npools, sizeof(GsPool), DatumGetInt32(gs_walk_get(&w, a_pool, &isnull)));
		int32		gpus;
		int			st;
		Datum		hb;
		GsPool	   *p;

		if (pi < 0)
			continue;
		p = &pools[pi];
		gpus = DatumGetInt32(gs_walk_get(&w, a_gpus, &isnull));
		st = gs_text_index(gs_walk_get(&w, a_state, &isnull), gs_node_states, GS_NNODE);
		p->gpus += gpus;
		if (st != 0)
			p->unavailable += gpus;
		if (st >= 0)
			p->nodes[st]++;
		hb = gs_walk_get(&w, a_heartbeat, &isnull);
		if (!isnull && st != 2 &&
			(!p->has_heartbeat || DatumGetTimestampTz(hb) < p->heartbeat_min))
		{
			p->has_heartbeat = true;
			p->heartbeat_min = DatumGetTimestampTz(hb);
		}
		if (n == cap)
			np = repalloc(np, (cap *= 2) * sizeof(GsNodePool));
		np[n].node_id = id;
		np[n].pool = pi;
		n++;
	}
	gs_scan_end(&s);
	qsort(np, n, sizeof(GsNodePool), gs_cmp_int32_first);
	*out = np;
	return n;
}

/* what one live job adds to its team */
static inline void
gs_count_live_job(GsTeam *teams, const GsIdMap *team_ix, GsNumCache *cache, int32 team, int st,
				  int32 workers, Datum gpus, TimestampTz queued, bool want_gpus, bool want_oldest)
{
	int			ti;
	GsTeam	   *t;

	if (st < 0 || (ti = gs_idmap_find(team_ix, team)) < 0)
		return;
	t = &teams[ti];
	t->jobs[st]++;
	if (st != 0)
		return;
	if (want_gpus)
		gs_exact_add(&t->pending_gpus, gs_num(cache, gpus), workers);
	if (want_oldest)
	{
		if (!t->has_oldest || queued < t->oldest)
			t->oldest = queued;
		t->has_oldest = true;
	}
}

/*
 * A read of a partial btree index's entries, leaf page by leaf page (as an
 * index-only scan reads them, without its per-entry overhead): used when
 * the index holds every column asked for (its INCLUDE columns,
 * sql/src/10_schema.sql). The values are always the index tuple's: an
 * entry is that of a row that met the index's condition, and a HOT chain
 * shares its indexed columns and those of the condition. Whether an
 * entry's row is visible to the statement's snapshot:
 *
 * - its heap page is all-visible (the visibility map, looked up once per
 *   page: the first entry that points there decides for all of them):
 *   visible;
 * - else the heap page is read once, the first time an entry points
 *   there, and the chains the snapshot sees a version of noted (a bit per
 *   line pointer, gs_leaf_page_chains): the entries that point there look
 *   their chain's bit up.
 *
 * A page split moves entries to the right of the page being read, so
 * following the right-links from the leftmost leaf meets each entry once
 * (a page read whole before it splits keeps the right-link it had). Right
 * after a round most pages of gangs are not all-visible: their rows'
 * headers are read in page order, but no row is deformed, and the pages no entry
 * points to (history) are never read.
 */
typedef void (*GsEntryFn) (void *arg, IndexTuple itup);

typedef struct GsChains
{
	uint64		bits[(MaxHeapTuplesPerPage + 63) / 64];
} GsChains;

typedef struct GsLeafRead
{
	Relation	heap;
	Relation	index;
	TupleDesc	itupdesc;
	GsAtt	   *att;			/* the index's columns */
	Snapshot	snap;
	BlockNumber nblocks;		/* the heap's, at the start */
	uint8	   *vis;			/* per heap page: 0 unknown, 1 all-visible, 2 not */
	Buffer		vmbuf;
	bool		serializable;	/* (then every chain through heap_hot_search_buffer) */
	uint32	   *chains_at;		/* per heap page: 1 + its GsChains, 0 none yet */
	GsChains   *chains;
	int			nchains,
				maxchains;
	int64		entries,		/* (for DEBUG2) */
				checked;
} GsLeafRead;

/*
 * Open the read of gangsched.index on gangsched.table for the columns
 * named; cols[i] gets column i's attnum in the index tuple. False, with
 * nothing open, when the index cannot serve (then the rows are read).
 */
static bool
gs_leaf_read_begin(GsLeafRead *x, const char *table, const char *index, const char *const *columns, int n,
				   AttrNumber *cols)
{
	Oid			ix;
	int			i,
				k;

	memset(x, 0, sizeof(*x));
	x->heap = table_open(gs_relid(table), AccessShareLock);
	ix = get_relname_relid(index, RelationGetNamespace(x->heap));
	if (!OidIsValid(ix))
	{
		table_close(x->heap, AccessShareLock);
		return false;
	}
	x->index = index_open(ix, AccessShareLock);
	for (i = 0; i < n; i++)
	{
		AttrNumber	a = gs_attnum(x->heap, columns[i]);

		cols[i] = InvalidAttrNumber;
		for (k = 0; k < x->index->rd_index->indnatts; k++)
			if (x->index->rd_index->indkey.values[k] == a)
				cols[i] = k + 1;
	}
	for (i = 0; i < n && cols[i] != InvalidAttrNumber; i++)
		;
	if (i < n || !x->index->rd_index->indisvalid || !x->index->rd_index->indisready ||
		x->index->rd_index->indrelid != RelationGetRelid(x->heap) ||
		x->index->rd_rel->relam != BTREE_AM_OID || x->heap->rd_rel->relam != HEAP_TABLE_AM_OID)
	{
		elog(DEBUG2, "gangsched: metrics cannot read gangsched.%s%s", index, i < n ? " (columns missing)" : "");
		index_close(x->index, AccessShareLock);
		table_close(x->heap, AccessShareLock);
		return false;
	}
	x->snap = GetActiveSnapshot();
	x->itupdesc = RelationGetDescr(x->index);
	x->att = gs_atts(x->itupdesc);
	/* (a row the snapshot sees was written before it was taken, on a page that existed then) */
	x->nblocks = RelationGetNumberOfBlocks(x->heap);
	x->vis = MemoryContextAllocExtended(CurrentMemoryContext, Max(x->nblocks, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	x->vmbuf = InvalidBuffer;
	/* serializable: the read depends on every row of the table (a sequential scan's lock) */
	x->serializable = IsolationIsSerializable();
	if (x->serializable)
		PredicateLockRelation(x->heap, x->snap);
	return true;
}

/* an entry's heap page all-visible (decided once per page) */
static inline bool
gs_leaf_visible(GsLeafRead *x, BlockNumber blk)
{
	if (blk >= x->nblocks)
		return false;
	if (x->vis[blk] == 0)
		x->vis[blk] = VM_ALL_VISIBLE(x->heap, blk, &x->vmbuf) ? 1 : 2;
	return x->vis[blk] == 1;
}

/* whether the snapshot sees a version of the row whose HOT chain starts at tid (its heap page locked) */
static inline bool
gs_chain_visible(GsLeafRead *x, Buffer buf, BlockNumber blk, OffsetNumber off)
{
	ItemPointerData t;
	HeapTupleData tuple;

	ItemPointerSet(&t, blk, off);
	return heap_hot_search_buffer(&t, x->heap, buf, x->snap, &tuple, NULL, true);
}

/*
 * The chains of a heap page not all-visible that the snapshot sees a
 * version of, by their first line pointer (a bit each): the page is locked
 * once and its rows looked at in their order, as a sequential scan does,
 * and the entries that point there look their bit up. A row the snapshot
 * sees stays on its page while it may see it (no pruning removes it), so
 * the bits hold for the whole read. The index's page stays locked the
 * while (the index's page first, then the heap's, as a unique index's
 * insertion checks them).
 */
static void
gs_leaf_page_chains(GsLeafRead *x, BlockNumber blk)
{
	Buffer		buf;
	Page		page;
	OffsetNumber off,
				maxoff;
	GsChains   *c;

	if (x->chains_at == NULL)
		x->chains_at = MemoryContextAllocExtended(CurrentMemoryContext, (Size) x->nblocks * sizeof(uint32),
												  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	if (x->nchains == x->maxchains)
	{
		x->maxchains = Max(16, x->maxchains * 2);
		x->chains = x->chains ? repalloc_huge(x->chains, (Size) x->maxchains * sizeof(GsChains))
			: palloc_extended(x->maxchains * sizeof(GsChains), MCXT_ALLOC_HUGE);
	}
	c = &x->chains[x->nchains];
	memset(c, 0, sizeof(GsChains));
	x->chains_at[blk] = ++x->nchains;
	CHECK_FOR_INTERRUPTS();
	buf = ReadBuffer(x->heap, blk);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	maxoff = Min(PageGetMaxOffsetNumber(page), MaxHeapTuplesPerPage);
	for (off = FirstOffsetNumber; off <= maxoff; off = OffsetNumberNext(off))
	{
		ItemId		lp = PageGetItemId(page, off);
		bool		visible;

		if (off + GS_PREFETCH_AHEAD <= maxoff)
			__builtin_prefetch(PageGetItem(page, PageGetItemId(page, off + GS_PREFETCH_AHEAD)));

		if (ItemIdIsNormal(lp))
		{
			HeapTupleHeader th = (HeapTupleHeader) PageGetItem(page, lp);

			if (HeapTupleHeaderIsHeapOnly(th))
				continue;		/* (not a chain's first) */
			if (!x->serializable && !HeapTupleHeaderIsHotUpdated(th))
			{
				/* a chain of one row: its visibility, as heap_hot_search_buffer tests it */
				HeapTupleData tuple;

				tuple.t_data = th;
				tuple.t_len = ItemIdGetLength(lp);
				tuple.t_tableOid = RelationGetRelid(x->heap);
				ItemPointerSet(&tuple.t_self, blk, off);
				visible = HeapTupleSatisfiesVisibility(&tuple, x->snap, buf);
			}
			else
				visible = gs_chain_visible(x, buf, blk, off);
		}
		else if (ItemIdIsRedirected(lp))
			visible = gs_chain_visible(x, buf, blk, off);
		else
			continue;
		x->checked++;
		if (visible)
			c->bits[(off - 1) / 64] |= UINT64CONST(1) << ((off - 1) % 64);
	}
	UnlockReleaseBuffer(buf);
}

/* whether the snapshot sees the row of an entry whose heap page is not all-visible */
static inline bool
gs_leaf_check(GsLeafRead *x, ItemPointer tid)
{
	BlockNumber blk = ItemPointerGetBlockNumber(tid);
	OffsetNumber off = ItemPointerGetOffsetNumber(tid);
	const GsChains *c;

	if (blk >= x->nblocks || off < FirstOffsetNumber || off > MaxHeapTuplesPerPage)
	{
		/* (a page past the start's end: no row there is visible, but look) */
		Buffer		buf = ReadBuffer(x->heap, blk);
		bool		found;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		found = gs_chain_visible(x, buf, blk, off);
		UnlockReleaseBuffer(buf);
		return found;
	}
	if (x->chains_at == NULL || x->chains_at[blk] == 0)
		gs_leaf_page_chains(x, blk);
	c = &x->chains[x->chains_at[blk] - 1];
	return (c->bits[(off - 1) / 64] >> ((off - 1) % 64)) & 1;
}

/* every entry whose row the snapshot sees, to fn */
static void
gs_leaf_read(GsLeafRead *x, GsEntryFn fn, void *arg)
{
	bool		ignore_killed = !TransactionStartedDuringRecovery();
	Buffer		buf;

	buf = _bt_get_endpoint(x->index, 0, false, x->snap);
	while (BufferIsValid(buf))
	{
		Page		page = BufferGetPage(buf);
		BTPageOpaque opaque = BTPageGetOpaque(page);
		BlockNumber next;

		TestForOldSnapshot(x->snap, x->index, page);
		if (!P_IGNORE(opaque))
		{
			OffsetNumber off,
						maxoff = PageGetMaxOffsetNumber(page);

			for (off = P_FIRSTDATAKEY(opaque); off <= maxoff; off = OffsetNumberNext(off))
			{
				ItemId		iid = PageGetItemId(page, off);
				IndexTuple	itup;

				/*
				 * (the entries lie anywhere on the page, and their first
				 * touch misses the CPU's caches: ask for one a few ahead)
				 */
				if (off + GS_PREFETCH_AHEAD <= maxoff)
				{
					ItemId		ahead = PageGetItemId(page, off + GS_PREFETCH_AHEAD);
					const char *t = (const char *) PageGetItem(page, ahead);

					/* (its first and last bytes: an entry may straddle two cache lines) */
					__builtin_prefetch(t);
					__builtin_prefetch(t + Max(ItemIdGetLength(ahead), 1) - 1);
				}
				if (ignore_killed && ItemIdIsDead(iid))
					continue;
				itup = (IndexTuple) PageGetItem(page, iid);
				if (!BTreeTupleIsPosting(itup))
				{
					x->entries++;
					if (gs_leaf_visible(x, ItemPointerGetBlockNumber(&itup->t_tid)) ||
						gs_leaf_check(x, &itup->t_tid))
					{
						fn(arg, itup);
					}
				}
				else
				{
					/* (an index with INCLUDE columns is never deduplicated: for completeness) */
					int			p;

					for (p = 0; p < BTreeTupleGetNPosting(itup); p++)
					{
						ItemPointer tid = BTreeTupleGetPostingN(itup, p);

						x->entries++;
						if (gs_leaf_visible(x, ItemPointerGetBlockNumber(tid)) || gs_leaf_check(x, tid))
						{
							fn(arg, itup);
						}
					}
				}
			}
		}
		if (P_RIGHTMOST(opaque))
		{
			_bt_relbuf(x->index, buf);
			break;
		}
		next = opaque->btpo_next;
		buf = _bt_relandgetbuf(x->index, buf, next, BT_READ);
	}
}

/*
 * The entries of gangs_live_idx and allocations_current_idx are decoded
 * in place when the index's columns are those 10_schema.sql declares, in
 * that order, and the entry has no nulls (its columns are NOT NULL): the
 * offsets follow from the two varlenas' lengths. Any other index (an
 * older or altered schema) is read column by column (GsWalk).
 */
static bool
gs_index_layout_is(TupleDesc desc, const Oid *types, int n)
{
	int			i;

	if (desc->natts != n)
		return false;
	for (i = 0; i < n; i++)
		if (TupleDescAttr(desc, i)->atttypid != types[i] || TupleDescAttr(desc, i)->attisdropped)
			return false;
	return true;
}

/*
 * The varlena at *off of an index tuple's data (a pad byte is 0: then it
 * starts at the int-aligned offset), *off moved past it; NULL when it is
 * compressed or external (the caller walks the tuple instead).
 */
static inline const char *
gs_inline_varlena(const char *tp, uint32 *off)
{
	uint32		o = *off;
	const char *p;

	if (tp[o] == 0)
		o = att_align_nominal(o, TYPALIGN_INT);
	p = tp + o;
	if (VARATT_IS_1B(p))
	{
		if (VARATT_IS_1B_E(p))
			return NULL;
		*off = o + VARSIZE_1B(p);
	}
	else
	{
		if (!VARATT_IS_4B_U(p))
			return NULL;
		*off = o + VARSIZE_4B(p);
	}
	return p;
}

static void
gs_leaf_read_end(GsLeafRead *x)
{
	elog(DEBUG2, "gangsched: metrics read gangsched.%s: %lld entries, %lld chains of %d pages not all-visible checked in the heap (%u pages)",
		 RelationGetRelationName(x->index), (long long) x->entries, (long long) x->checked, x->nchains, x->nblocks);
	if (BufferIsValid(x->vmbuf))
		ReleaseBuffer(x->vmbuf);
	index_close(x->index, AccessShareLock);
	table_close(x->heap, AccessShareLock);
}

/* one live job's index entry (GsLeafRead): columns state, team_id, workers, gpus, queued_at */
typedef struct GsLiveArg
{
	GsTeam	   *teams;
	const GsIdMap *team_ix;
	GsNumCache *cache;
	GsLeafRead *x;
	bool		inline_layout;	/* gs_live_types, columns 1, 4, 5, 6, 7 */
	AttrNumber	c[5];
	bool		want_gpus,
				want_oldest;
} GsLiveArg;

static const Oid gs_live_types[] = {TEXTOID, INT4OID, INT8OID, INT4OID, INT4OID, NUMERICOID, TIMESTAMPTZOID};

static void
gs_live_entry(void *varg, IndexTuple itup)
{
	GsLiveArg  *a = (GsLiveArg *) varg;
	bool		isnull;
	int			st;
	int32		team,
				workers = 0;
	Datum		gpus = (Datum) 0;
	TimestampTz queued = 0;
	GsWalk		w;

	if (a->inline_layout && !IndexTupleHasNulls(itup))
	{
		const char *tp = (const char *) itup + IndexInfoFindDataOffset(itup->t_info);
		uint32		off = 0;
		const char *state = gs_inline_varlena(tp, &off),
				   *g;

		if (state == NULL)
			goto walk;
		st = gs_live_state(PointerGetDatum(state));
		off = att_align_nominal(off, TYPALIGN_INT) + sizeof(int32);	/* priority */
		off = att_align_nominal(off, TYPALIGN_DOUBLE) + sizeof(int64);	/* queue_pos */
		team = *(const int32 *) (tp + off);
		if (st == 0 && (a->want_gpus || a->want_oldest))
		{
			workers = *(const int32 *) (tp + off + sizeof(int32));
			off += 2 * sizeof(int32);
			if ((g = gs_inline_varlena(tp, &off)) == NULL)
				goto walk;
			gpus = PointerGetDatum(g);
			queued = *(const TimestampTz *) (tp + att_align_nominal(off, TYPALIGN_DOUBLE));
		}
		gs_count_live_job(a->teams, a->team_ix, a->cache, team, st, workers, gpus, queued, a->want_gpus,
						  a->want_oldest);
		return;
	}
walk:
	/* (the columns are read in the index's order: key, then INCLUDE) */
	gs_walk_index_start(&w, a->x->att, a->x->itupdesc, itup);
	st = gs_live_state(gs_walk_get(&w, a->c[0], &isnull));
	team = DatumGetInt32(gs_walk_get(&w, a->c[1], &isnull));
	if (st == 0 && a->want_gpus)
	{
		workers = DatumGetInt32(gs_walk_get(&w, a->c[2], &isnull));
		gpus = gs_walk_get(&w, a->c[3], &isnull);
	}
	if (st == 0 && a->want_oldest)
		queued = DatumGetTimestampTz(gs_walk_get(&w, a->c[4], &isnull));
	gs_count_live_job(a->teams, a->team_ix, a->cache, team, st, workers, gpus, queued, a->want_gpus, a->want_oldest);
}

/*
 * The live jobs: counts by team and state, the pending ones' GPUs and
 * their oldest entry into the queue (each only when asked for). From
 * gangs_live_idx's entries (GsLeafRead), else, when that index cannot
 * serve, from the rows: the counts read the row's 2nd and 4th columns, the
 * GPUs its 5th and 6th, queued_at is its 28th.
 */
static void
gs_read_live_jobs(GsTeam *teams, const GsIdMap *team_ix, bool want_gpus, bool want_oldest)
{
	GsScan		s;
	GsWalk		w;
	GsNumCache *cache;
	AttrNumber	a_team,
				a_state,
				a_workers,
				a_gpus,
				a_queued;
	bool		isnull;

	static const char *const columns[] = {"state", "team_id", "workers", "gpus", "queued_at"};
	AttrNumber	c[lengthof(columns)];
	GsLeafRead	x;

	cache = palloc0(sizeof(GsNumCache));
	if (gs_leaf_read_begin(&x, "gangs", "gangs_live_idx", columns, lengthof(columns), c))
	{
		GsLiveArg	arg;

		arg.teams = teams;
		arg.team_ix = team_ix;
		arg.cache = cache;
		arg.x = &x;
		memcpy(arg.c, c, sizeof(c));
		arg.inline_layout = gs_index_layout_is(x.itupdesc, gs_live_types, lengthof(gs_live_types)) &&
			c[0] == 1 && c[1] == 4 && c[2] == 5 && c[3] == 6 && c[4] == 7;
		arg.want_gpus = want_gpus;
		arg.want_oldest = want_oldest;
		gs_leaf_read(&x, gs_live_entry, &arg);
		gs_leaf_read_end(&x);
		return;
	}
	gs_scan_begin(&s, "gangs", "gangs_live_idx");
	a_team = gs_attnum(s.heap, "team_id");
	a_state = gs_attnum(s.heap, "state");
	a_workers = gs_attnum(s.heap, "workers");
	a_gpus = gs_attnum(s.heap, "gpus");
	a_queued = gs_attnum(s.heap, "queued_at");
	while (gs_scan_next(&s, &w))
	{
		int32		team = DatumGetInt32(gs_walk_get(&w, a_team, &isnull));
		int			st = gs_live_state(gs_walk_get(&w, a_state, &isnull));
		int32		workers = 0;
		Datum		gpus = (Datum) 0;
		TimestampTz queued = 0;

		if (st == 0 && want_gpus)
		{
			workers = DatumGetInt32(gs_walk_get(&w, a_workers, &isnull));
			gpus = gs_walk_get(&w, a_gpus, &isnull);
		}
		if (st == 0 && want_oldest)
			queued = DatumGetTimestampTz(gs_walk_get(&w, a_queued, &isnull));
		gs_count_live_job(teams, team_ix, cache, team, st, workers, gpus, queued, want_gpus, want_oldest);
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

/* what one open allocation adds to its team and to its node's pool */
static inline void
gs_count_allocation(GsTeam *teams, const GsIdMap *team_ix, GsPool *pools, GsNodePool *np, const GsIdMap *node_ix,
					GsNumCache *cache, int32 node, int32 team, Datum gpus, bool borrowed)
{
	int			ni = gs_idmap_find(node_ix, node),
				ti;
	GsNum	   *g;

	if (ni < 0)
		return;
	g = gs_num(cache, gpus);
	if (pools != NULL)
	{
		GsPool	   *p = &pools[np[ni].pool];

		gs_exact_add(&p->allocated, g, 1);
		if (borrowed)
			gs_exact_add(&p->borrowed, g, 1);
	}
	if (teams == NULL || (ti = gs_idmap_find(team_ix, team)) < 0)
		return;
	gs_exact_add(&teams[ti].gpus, g, 1);
	if (borrowed)
		gs_exact_add(&teams[ti].borrowed, g, 1);
}

/* one open allocation's index entry (GsLeafRead): columns node_id, team_id, gpus, borrowed */
typedef struct GsAllocArg
{
	GsTeam	   *teams;
	const GsIdMap *team_ix;
	GsPool	   *pools;
	GsNodePool *np;
	const GsIdMap *node_ix;
	GsNumCache *cache;
	GsLeafRead *x;
	bool		inline_layout;	/* gs_alloc_types, columns 1, 2, 3, 4 */
	AttrNumber	c[4];
} GsAllocArg;

static const Oid gs_alloc_types[] = {INT4OID, INT4OID, NUMERICOID, BOOLOID};

static void
gs_alloc_entry(void *varg, IndexTuple itup)
{
	GsAllocArg *a = (GsAllocArg *) varg;
	bool		isnull;
	GsWalk		w;
	int32		node,
				team;
	Datum		gd;

	if (a->inline_layout && !IndexTupleHasNulls(itup))
	{
		const char *tp = (const char *) itup + IndexInfoFindDataOffset(itup->t_info);
		uint32		off = 2 * sizeof(int32);
		const char *g = gs_inline_varlena(tp, &off);

		if (g != NULL)
		{
			gs_count_allocation(a->teams, a->team_ix, a->pools, a->np, a->node_ix, a->cache,
								*(const int32 *) tp, *(const int32 *) (tp + sizeof(int32)), PointerGetDatum(g),
								*(const bool *) (tp + off));
			return;
		}
	}
	gs_walk_index_start(&w, a->x->att, a->x->itupdesc, itup);
	node = DatumGetInt32(gs_walk_get(&w, a->c[0], &isnull));
	team = DatumGetInt32(gs_walk_get(&w, a->c[1], &isnull));
	gd = gs_walk_get(&w, a->c[2], &isnull);
	gs_count_allocation(a->teams, a->team_ix, a->pools, a->np, a->node_ix, a->cache, node, team, gd,
						DatumGetBool(gs_walk_get(&w, a->c[3], &isnull)));
}

/*
 * The open allocations by team and by their nodes' pools: from
 * allocations_current_idx's entries (GsLeafRead; they are the open
 * allocations), else, when that index cannot serve, from the rows.
 */
static void
gs_read_allocations(GsTeam *teams, const GsIdMap *team_ix, GsPool *pools, GsNodePool *np, const GsIdMap *node_ix)
{
	static const char *const columns[] = {"node_id", "team_id", "gpus", "borrowed"};
	AttrNumber	c[lengthof(columns)];
	GsLeafRead	x;
	GsScan		s;
	GsWalk		w;
	GsNumCache *cache = palloc0(sizeof(GsNumCache));
	AttrNumber	a_team,
				a_node,
				a_gpus,
				a_borrowed,
				a_during;
	bool		isnull;

	if (gs_leaf_read_begin(&x, "allocations", "allocations_current_idx", columns, lengthof(columns), c))
	{
		GsAllocArg	arg;

		arg.teams = teams;
		arg.team_ix = team_ix;
		arg.pools = pools;
		arg.np = np;
		arg.node_ix = node_ix;
		arg.cache = cache;
		arg.x = &x;
		memcpy(arg.c, c, sizeof(c));
		arg.inline_layout = gs_index_layout_is(x.itupdesc, gs_alloc_types, lengthof(gs_alloc_types)) &&
			c[0] == 1 && c[1] == 2 && c[2] == 3 && c[3] == 4;
		gs_leaf_read(&x, gs_alloc_entry, &arg);
		gs_leaf_read_end(&x);
		return;
	}
	gs_scan_begin(&s, "allocations", "allocations_current_idx");
	a_team = gs_attnum(s.heap, "team_id");
	a_node = gs_attnum(s.heap, "node_id");
	a_gpus = gs_attnum(s.heap, "gpus");
	a_borrowed = gs_attnum(s.heap, "borrowed");
	a_during = gs_attnum(s.heap, "during");
	while (gs_scan_next(&s, &w))
	{
		int32		node = DatumGetInt32(gs_walk_get(&w, a_node, &isnull));
		int32		team = DatumGetInt32(gs_walk_get(&w, a_team, &isnull));
		Datum		gd = gs_walk_get(&w, a_gpus, &isnull);
		bool		borrowed = DatumGetBool(gs_walk_get(&w, a_borrowed, &isnull));

		if (gs_upper_inf(gs_walk_get(&w, a_during, &isnull)))
			gs_count_allocation(teams, team_ix, pools, np, node_ix, cache, node, team, gd, borrowed);
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
		GsWalk		w;
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
		while (gs_scan_next(&s, &w))
		{
			Datum		name = gs_walk_get(&w, a_name, &isnull);
			int			ti = gs_idmap_find(team_ix, DatumGetInt32(gs_walk_get(&w, a_team, &isnull)));
			Datum		label;
			double		value;
			GsTeam	   *t;
			int			c;

			if (ti < 0)
				continue;
			t = &teams[ti];
			label = gs_walk_get(&w, a_label, &isnull);
			value = DatumGetFloat8(gs_walk_get(&w, a_value, &isnull));
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

/* the pass's own memory (gs_metric_series) */
#define GS_METRICS_CXT_SIZE (1024 * 1024)
static MemoryContext gs_metrics_cxt = NULL;

/*
 * The queue-wait histogram's bounds (gangsched.queue_wait_buckets()) and
 * their text labels (float8out), kept by the backend until the function's
 * catalog row changes (an upgrade that moves the bounds).
 */
static double *gs_bounds = NULL;
static char **gs_bound_labels = NULL;
static int	gs_nbounds = -1;		/* -1: not read yet */
static int	gs_nbounds_allocated = 0;

static void
gs_bounds_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	gs_nbounds = -1;
}

static int
gs_wait_bounds(double **bounds, char ***labels)
{
	static bool registered = false;

	if (gs_nbounds < 0)
	{
		ArrayType  *arr;
		Datum	   *d;
		int			n,
					i;
		MemoryContext old;

		if (!registered)
		{
			CacheRegisterSyscacheCallback(PROCOID, gs_bounds_invalidate, (Datum) 0);
			registered = true;
		}
		arr = DatumGetArrayTypeP(OidFunctionCall0(
			LookupFuncName(list_make2(makeString("gangsched"), makeString("queue_wait_buckets")), 0, NULL, false)));
		deconstruct_array(arr, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &d, NULL, &n);
		old = MemoryContextSwitchTo(TopMemoryContext);
		if (gs_bounds != NULL)
		{
			for (i = 0; i < gs_nbounds_allocated; i++)
				pfree(gs_bound_labels[i]);
			pfree(gs_bounds);
			pfree(gs_bound_labels);
		}
		gs_bounds = palloc(Max(n, 1) * sizeof(double));
		gs_bound_labels = palloc(Max(n, 1) * sizeof(char *));
		for (i = 0; i < n; i++)
		{
			gs_bounds[i] = DatumGetFloat8(d[i]);
			gs_bound_labels[i] = DatumGetCString(DirectFunctionCall1(float8out, d[i]));
		}
		MemoryContextSwitchTo(old);
		gs_nbounds = gs_nbounds_allocated = n;
	}
	*bounds = gs_bounds;
	*labels = gs_bound_labels;
	return gs_nbounds;
}

/*
 * The families asked for: every one when the argument is NULL, else those
 * named in the array (an unknown name is an error, so a typo in an
 * exporter's query does not go unnoticed as a missing series).
 */
static void
gs_wanted_families(FunctionCallInfo fcinfo, int argno, bool *want)
{
	ArrayType  *arr;
	Datum	   *names;
	bool	   *nulls;
	int			n,
				i,
				f;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
	{
		for (f = 0; f < (int) lengthof(gs_families); f++)
			want[f] = true;
		return;
	}
	memset(want, 0, lengthof(gs_families) * sizeof(bool));
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &names, &nulls, &n);
	for (i = 0; i < n; i++)
	{
		char	   *name;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("a metric family's name must not be null"),
					 errhint("Name families as gangsched.metrics names them, or pass NULL instead of the array for every family.")));
		name = TextDatumGetCString(names[i]);
		for (f = 0; f < (int) lengthof(gs_families); f++)
			if (strcmp(gs_families[f].name, name) == 0)
				break;
		if (f == (int) lengthof(gs_families))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("there is no metric family named \"%s\"", name),
					 errhint("SELECT DISTINCT name FROM gangsched.metrics lists the families (docs/monitoring.md).")));
		want[f] = true;
	}
}

static inline bool
gs_any(const bool *want, int from, int to)
{
	int			f;

	for (f = from; f <= to; f++)
		if (want[f])
			return true;
	return false;
}

/*
 * gangsched.metric_series(at, worker_pid, worker_wakeups, worker_rounds,
 * families): the rows of gangsched.metrics, or of the families named (NULL:
 * all); `at` is the scheduler's clock, the worker_* arguments
 * gangsched.worker_status()'s columns. Only the tables the families asked
 * for are made of are read: a query for the node counts reads pools and
 * nodes, not the jobs.
 */
PG_FUNCTION_INFO_V1(gs_metric_series);
Datum
gs_metric_series(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now;
	GsTeam	   *teams = NULL;
	GsPool	   *pools = NULL;
	GsNodePool *np = NULL;
	int			nteams = 0,
				npools = 0,
				nnodes = 0,
				i,
				j,
				f;
	double	   *bound_d = NULL;
	int			nbounds = 0;
	char	  **bound_text = NULL;
	MemoryContext old;
	GsOut		o;
	GsIdMap		team_ix,
				node_ix;
	bool		want[lengthof(gs_families)];
	bool		need_pools,
				need_teams,
				need_nodes,
				need_live,
				need_alloc,
				need_counters;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the time of the metrics must not be null"),
				 errhint("Pass gangsched.now().")));
	now = PG_GETARG_TIMESTAMPTZ(0);
	gs_wanted_families(fcinfo, 4, want);
	InitMaterializedSRF(fcinfo, 0);
	o.store = rsinfo->setResult;
	o.desc = rsinfo->setDesc;
	/*
	 * The pass works in a context of its own that the backend keeps, reset
	 * after each read: a read's few hundred kilobytes then come from memory
	 * already mapped (a fresh context's blocks are malloc'ed, and the larger
	 * ones mapped and faulted in, at every read). The series are copied
	 * into the tuplestore.
	 */
	if (gs_metrics_cxt == NULL)
		gs_metrics_cxt = AllocSetContextCreate(TopMemoryContext, "gangsched metrics",
											   GS_METRICS_CXT_SIZE, GS_METRICS_CXT_SIZE,
											   ALLOCSET_DEFAULT_MAXSIZE);
	else
		MemoryContextReset(gs_metrics_cxt);
	old = MemoryContextSwitchTo(gs_metrics_cxt);
	for (f = 0; f < (int) lengthof(gs_families); f++)
		if (want[f])
		{
			o.fam_text[f][0] = CStringGetTextDatum(gs_families[f].name);
			o.fam_text[f][1] = CStringGetTextDatum(gs_families[f].type);
			o.fam_text[f][2] = CStringGetTextDatum(gs_families[f].help);
		}

	/* what the families wanted are made of */
	need_pools = gs_any(want, F_POOL_GPUS, F_NODES);
	need_teams = gs_any(want, F_JOBS_LIVE, F_WAIT_COUNT);
	need_live = want[F_JOBS_LIVE] || gs_any(want, F_TEAM_PENDING_JOBS, F_TEAM_OLDEST);
	need_alloc = want[F_POOL_ALLOCATED] || want[F_POOL_BORROWED] || want[F_TEAM_GPUS] || want[F_TEAM_BORROWED];
	need_nodes = need_alloc || want[F_POOL_GPUS] || want[F_POOL_UNAVAILABLE] || want[F_POOL_HEARTBEAT] ||
		want[F_NODES];
	need_counters = want[F_JOBS_ENDED] || gs_any(want, F_TEAM_COUNTERS, F_WAIT_COUNT);
	/* allocations are counted on known nodes only, whichever family asks */
	if (need_nodes && !need_pools)
		need_pools = true;

	if (need_teams)
	{
		nteams = gs_read_teams(&teams);
		gs_idmap_build(&team_ix, teams, nteams, sizeof(GsTeam));
	}
	if (need_pools)
		npools = gs_read_pools(&pools);
	if (need_nodes)
	{
		nnodes = gs_read_nodes(pools, npools, &np);
		gs_idmap_build(&node_ix, np, nnodes, sizeof(GsNodePool));
	}
	if (need_live)
		gs_read_live_jobs(teams, &team_ix, want[F_TEAM_PENDING_GPUS], want[F_TEAM_OLDEST]);
	if (need_alloc)
		gs_read_allocations(want[F_TEAM_GPUS] || want[F_TEAM_BORROWED] ? teams : NULL, &team_ix,
							want[F_POOL_ALLOCATED] || want[F_POOL_BORROWED] ? pools : NULL, np, &node_ix);
	if (need_counters)
		gs_read_counters(teams, &team_ix);
	if (want[F_POOL_HELD])
		gs_read_holds(pools, npools);

	if (want[F_WAIT_BUCKET])
		nbounds = gs_wait_bounds(&bound_d, &bound_text);
	/* the one-label objects, each shared by the families of its team or pool */
	for (i = 0; i < nteams; i++)
		teams[i].labels = gs_labels("team", teams[i].name, NULL, NULL);
	for (i = 0; i < npools; i++)
		pools[i].labels = gs_labels("pool", pools[i].name, NULL, NULL);
	o.want = want;
	o.no_labels = gs_labels(NULL, NULL, NULL, NULL);
	/* pools */
	for (i = 0; i < npools && want[F_POOL_GPUS]; i++)
		gs_emit(&o, F_POOL_GPUS, (double) pools[i].gpus, pools[i].labels);
	for (i = 0; i < npools && want[F_POOL_UNAVAILABLE]; i++)
		gs_emit(&o, F_POOL_UNAVAILABLE, (double) pools[i].unavailable, pools[i].labels);
	for (i = 0; i < npools && want[F_POOL_ALLOCATED]; i++)
		gs_emit(&o, F_POOL_ALLOCATED, gs_exact_float8(&pools[i].allocated), pools[i].labels);
	for (i = 0; i < npools && want[F_POOL_BORROWED]; i++)
		gs_emit(&o, F_POOL_BORROWED, gs_exact_float8(&pools[i].borrowed), pools[i].labels);
	for (i = 0; i < npools && want[F_POOL_HELD]; i++)
		gs_emit(&o, F_POOL_HELD, pools[i].has_held ? pools[i].held : 0, pools[i].labels);
	for (i = 0; i < npools && want[F_POOL_HEARTBEAT]; i++)
		if (pools[i].has_heartbeat)
			gs_emit(&o, F_POOL_HEARTBEAT, gs_age(now, pools[i].heartbeat_min), pools[i].labels);
	for (i = 0; i < npools && want[F_NODES]; i++)
		for (j = 0; j < GS_NNODE; j++)
			gs_emit(&o, F_NODES, (double) pools[i].nodes[j],
					gs_labels("pool", pools[i].name, "state", gs_node_states[j]));
	/* jobs and teams */
	for (i = 0; i < nteams && want[F_JOBS_LIVE]; i++)
		for (j = 0; j < GS_NLIVE; j++)
			gs_emit(&o, F_JOBS_LIVE, (double) teams[i].jobs[j],
					gs_labels("team", teams[i].name, "state", gs_live_states[j]));
	for (i = 0; i < nteams && want[F_JOBS_ENDED]; i++)
		for (j = 0; j < GS_NENDED; j++)
			gs_emit(&o, F_JOBS_ENDED, teams[i].ended[j],
					gs_labels("team", teams[i].name, "state", gs_ended_states[j]));
	for (i = 0; i < nteams; i++)
	{
		GsTeam	   *t = &teams[i];

		if (want[F_TEAM_PENDING_JOBS])
			gs_emit(&o, F_TEAM_PENDING_JOBS, (double) t->jobs[0], t->labels);
		if (want[F_TEAM_PENDING_GPUS])
			gs_emit(&o, F_TEAM_PENDING_GPUS, gs_exact_float8(&t->pending_gpus), t->labels);
		if (want[F_TEAM_OLDEST])
			gs_emit(&o, F_TEAM_OLDEST, t->has_oldest ? gs_age(now, t->oldest) : 0, t->labels);
		if (want[F_TEAM_GPUS])
			gs_emit(&o, F_TEAM_GPUS, gs_exact_float8(&t->gpus), t->labels);
		if (want[F_TEAM_BORROWED])
			gs_emit(&o, F_TEAM_BORROWED, gs_exact_float8(&t->borrowed), t->labels);
		for (j = 0; j < GS_NCOUNTERS - 1; j++)
			if (want[F_TEAM_COUNTERS + j])
				gs_emit(&o, F_TEAM_COUNTERS + j, t->counters[j], t->labels);
	}
	/* queue wait: cumulative buckets, +Inf the count of all */
	for (i = 0; i < nteams && want[F_WAIT_BUCKET]; i++)
	{
		GsTeam	   *t = &teams[i];

		for (j = 0; j <= nbounds; j++)
		{
			double		sum = 0;
			double		b = j < nbounds ? bound_d[j] : 0;
			int			k;

			for (k = 0; k < t->nbuckets; k++)
				if (j == nbounds || (!t->buckets[k].inf && t->buckets[k].le <= b))
					sum += t->buckets[k].value;
			gs_emit(&o, F_WAIT_BUCKET, sum, gs_labels("team", t->name, "le", j < nbounds ? bound_text[j] : "+Inf"));
		}
	}
	for (i = 0; i < nteams && want[F_WAIT_SUM]; i++)
		gs_emit(&o, F_WAIT_SUM, teams[i].counters[GS_C_WAIT_SECONDS], teams[i].labels);
	for (i = 0; i < nteams && want[F_WAIT_COUNT]; i++)
		gs_emit(&o, F_WAIT_COUNT, teams[i].counters[GS_C_PLACED], teams[i].labels);
	/* rounds and the worker */
	if (gs_round_stats != NULL)
	{
		uint64		last_end = pg_atomic_read_u64(&gs_round_stats->last_end);

		gs_emit(&o, F_ROUND_COUNT, (double) (int64) pg_atomic_read_u64(&gs_round_stats->rounds), o.no_labels);
		gs_emit(&o, F_ROUND_SUM, (double) pg_atomic_read_u64(&gs_round_stats->us_total) / 1e6, o.no_labels);
		if (last_end > 0)
		{
			gs_emit(&o, F_ROUND_LAST, (double) pg_atomic_read_u64(&gs_round_stats->last_us) / 1e6, o.no_labels);
			gs_emit(&o, F_ROUND_AGE, gs_age(now, (TimestampTz) (last_end - 1)), o.no_labels);
		}
	}
	gs_emit(&o, F_WORKER_UP, PG_ARGISNULL(1) ? 0 : 1, o.no_labels);
	if (!PG_ARGISNULL(3))
		gs_emit(&o, F_WORKER_ROUNDS, (double) PG_GETARG_INT64(3), o.no_labels);
	if (!PG_ARGISNULL(2))
		gs_emit(&o, F_WORKER_WAKEUPS, (double) PG_GETARG_INT64(2), o.no_labels);
	elog(DEBUG2, "gangsched: metrics read with %zu bytes of memory", MemoryContextMemAllocated(gs_metrics_cxt, true));
	MemoryContextSwitchTo(old);
	MemoryContextReset(gs_metrics_cxt);
	return (Datum) 0;
}
