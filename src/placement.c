/*
 * placement.c — all-or-nothing, topology-aware gang placement.
 *
 * A gang of W workers has R data-parallel replicas, each a chain of S
 * pipeline stages, each stage a tensor group of G consecutive ranks. Hard
 * limits: a group inside one domain of its group_span depth, a replica inside
 * one domain of its stage_span depth, the gang inside one domain of its span
 * depth and inside one pool; per-worker cpus/mem/net/devices on the node.
 *
 * The search counts, for every domain at every depth, how many "units" of
 * the job fit there now: workers below the group depth, groups between the
 * group and stage depths, replicas above the stage depth. Counts are built
 * bottom-up in one pass over the domains (nodes are sorted so every domain
 * is a contiguous run), so a job costs O(nodes + domains) however large it
 * is. The gang goes to the deepest domain that holds it (smallest topology
 * domain), best fit among those; inside it, units go to the child that holds
 * all that remain (best fit) or else to the largest children first (fewest
 * domains spanned), recursively, with ranks given out in order so groups
 * and consecutive stages stay together. On a node, whole devices are taken
 * from fully free ones and a fraction from the device with the fewest free
 * slices that still holds it, so whole devices and nodes stay whole.
 *
 * Within a round capacity only shrinks, so a shape that failed with w
 * workers fails with w or more for the rest of the round: a memo skips them.
 */
#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"
#include "port/pg_bitutils.h"
#include "utils/hsearch.h"

#include "placement.h"

#define BIG_CAP 1000000

typedef enum UnitKind
{
	UNIT_WORKER = 0,
	UNIT_GROUP,
	UNIT_REPLICA
} UnitKind;

typedef enum CountMode
{
	MODE_FREE,					/* free capacity less reservations */
	MODE_EMPTY					/* the node's whole capacity (for reservations) */
} CountMode;

/* Memo of shapes that failed this round: key is everything but workers. */
typedef struct ShapeKey
{
	GsShapeKey	shape;
	uint64_t	pool_mask;
	int32_t		dataset;
	int16_t		locality;
	int16_t		pad;
} ShapeKey;

typedef struct ShapeMemo
{
	ShapeKey	key;
	int32_t		min_failing_workers;
	GsWhy		why;
} ShapeMemo;

/*
 * Per-shape counts kept across the jobs of a round: a shape's counts are
 * built once (O(nodes + domains)) and then brought up to date by replaying
 * only the nodes whose capacity changed since, each with its ancestors
 * (O(changed nodes × depth × fan-out)). So a round costs linear time in
 * nodes and in jobs, however many gangs it places.
 */
typedef struct ShapeCounts
{
	ShapeKey	key;			/* with only_cached | ignore_reserved << 1 in key.pad */
	int64_t		synced;			/* position in the dirty log */
	int32_t    *cnt[GS_MAX_DEPTH];
	int32_t    *wsum[GS_MAX_DEPTH];
	int32_t		maxcnt[GS_MAX_DEPTH];	/* per depth: at least the largest cnt */
} ShapeCounts;

#define GS_MAX_SHAPE_COUNTS 512

struct GsPlacer
{
	GsCluster  *c;
	int			L1;				/* depth of the node level, L+1 */
	int32_t    *cnt[GS_MAX_DEPTH];	/* units per domain, in use now */
	int32_t    *wsum[GS_MAX_DEPTH];	/* workers per domain, in use now */
	int32_t    *scnt[GS_MAX_DEPTH];	/* scratch counts (EMPTY mode, overflow) */
	int32_t    *swsum[GS_MAX_DEPTH];
	/*
	 * per depth, at least the largest of cnt[d] (exact after count_units,
	 * raised as counts grow, not lowered as they fall): a depth where it
	 * is below the gang's need holds no domain for it
	 */
	int32_t    *maxcnt;
	int32_t		smaxcnt[GS_MAX_DEPTH];
	int32_t    *freecnt[GS_MAX_DEPTH];	/* saved FREE counts (reservations) */
	HTAB	   *memo;
	HTAB	   *counts;			/* ShapeCounts by shape */
	int			ncounts;
	/* nodes whose free capacity changed, in order; caches replay it */
	int32_t    *dirty;
	int64_t		ndirty,
				dirty_cap;
	int64_t    *replayed;		/* per node: the replay that last recounted it */
	int64_t    *dom_seen[GS_MAX_DEPTH];	/* per domain: the replay that last recounted it (bookings) */
	int64_t		replay_id;
	int32_t    *touched;		/* replay_dirty's nodes, each once */
	/* the job being placed */
	GsJob	   *job;
	UnitKind	kind[GS_MAX_DEPTH];
	int			unit[3];		/* workers per unit kind */
	int			kneed[9];		/* slices needed per device slice count */
	bool		whole;
	int			g_whole;
	bool		pool_ok[64];
	bool		pool_ok_any;
	bool		only_cached;	/* locality filter in force */
	CountMode	mode;
	bool		ignore_memo;	/* capacity may grow (victim search) */
	bool		ignore_reserved;	/* FREE counts the starvation guard's capacity as free (backfill with time) */
	int			last_d,			/* the gang domain of the last placement or probe that succeeded */
				last_i;
	int			next_rank;
	bool		commit;			/* assign: take capacity (FREE) or reserve (EMPTY) */
};

/* runs[mask][k]: disjoint runs of k free slices in an 8-bit free mask. */
static uint8_t runs_table[256][9];
static bool runs_ready = false;

static void
init_runs(void)
{
	int			m,
				k;

	for (m = 0; m < 256; m++)
		for (k = 1; k <= 8; k++)
		{
			int			i = 0,
						n = 0;

			while (i + k <= 8)
			{
				int			run = ((1 << k) - 1) << i;

				if ((m & run) == run)
				{
					n++;
					i += k;
				}
				else
					i++;
			}
			runs_table[m][k] = (uint8_t) n;
		}
	runs_ready = true;
}

static inline uint8_t
free_mask(const GsNode *n, int dev)
{
	return (uint8_t) (~n->used[dev] & ((1 << n->slices) - 1));
}

void
gs_node_recount(GsNode *n)
{
	int			d;

	n->free_whole = 0;
	n->free_slices = 0;
	for (d = 0; d < n->ngpus; d++)
	{
		uint8_t		f = free_mask(n, d);

		if (n->used[d] == 0)
			n->free_whole++;
		n->free_slices += pg_number_of_ones[f];
	}
}

GsPlacer *
gs_placer_create(GsCluster *c)
{
	GsPlacer   *p = palloc0(sizeof(GsPlacer));
	HASHCTL		ctl;
	int			d;

	if (!runs_ready)
		init_runs();
	p->c = c;
	p->L1 = c->nlevels + 1;
	for (d = 0; d <= p->L1; d++)
	{
		int			n = Max(c->ndom[d], 1);

		p->scnt[d] = palloc0(sizeof(int32_t) * n);
		p->swsum[d] = palloc0(sizeof(int32_t) * n);
		p->freecnt[d] = palloc0(sizeof(int32_t) * n);
		p->cnt[d] = p->scnt[d];
		p->wsum[d] = p->swsum[d];
	}
	p->maxcnt = p->smaxcnt;
	p->dirty_cap = 1024;
	p->dirty = palloc(sizeof(int32_t) * p->dirty_cap);
	p->replayed = palloc0(sizeof(int64_t) * Max(c->nnodes, 1));
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(ShapeKey);
	ctl.entrysize = sizeof(ShapeMemo);
	ctl.hcxt = CurrentMemoryContext;
	p->memo = hash_create("gangsched shape memo", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.entrysize = sizeof(ShapeCounts);
	p->counts = hash_create("gangsched shape counts", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	return p;
}

/* Set up the per-job fields of the placer. */
static void
prepare(GsPlacer *p, GsJob *j)
{
	GsCluster  *c = p->c;
	int			d,
				s,
				i;

	p->job = j;
	p->unit[UNIT_WORKER] = 1;
	p->unit[UNIT_GROUP] = j->group_size;
	p->unit[UNIT_REPLICA] = j->group_size * j->stages;
	for (d = 0; d <= p->L1; d++)
	{
		if (j->stage_depth >= 0 && d <= j->stage_depth)
			p->kind[d] = UNIT_REPLICA;
		else if (d <= j->group_depth)
			p->kind[d] = UNIT_GROUP;
		else
			p->kind[d] = UNIT_WORKER;
	}
	p->whole = (j->gpus >= 1.0 - GS_EPS);
	p->g_whole = p->whole ? (int) floor(j->gpus + GS_EPS) : 0;
	for (s = 1; s <= 8; s++)
	{
		double		k = j->gpus * s;
		double		r = floor(k + 0.5);

		p->kneed[s] = (!p->whole && j->gpus > 0 && fabs(k - r) <= 0.001 && r >= 1) ? (int) r : 0;
	}
	p->pool_ok_any = false;
	for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
	{
		bool		ok = (j->pool_mask & (UINT64_C(1) << i)) != 0;

		p->pool_ok[i] = ok;
		p->pool_ok_any |= ok;
	}
	p->only_cached = (j->locality == GS_LOC_REQUIRED);
}

/* Workers of the current job that fit on node n in the current mode. */
static int
node_cap(GsPlacer *p, const GsNode *n)
{
	const GsJob *j = p->job;
	bool		empty = (p->mode == MODE_EMPTY);
	int			cap = BIG_CAP;
	double		fc,
				fm,
				fn;

	if (n->state != GS_NODE_UP || !p->pool_ok[n->pool])
		return 0;
	/* reservations and maintenance windows (docs/time.md): 0 without any */
	if ((j->res_block | j->res_only) != 0 &&
		((n->bookings & j->res_block) != 0 ||
		 (j->res_only != 0 && (n->bookings & j->res_only) == 0)))
		return 0;
	if (p->only_cached &&
		(j->dataset < 0 || !p->c->dataset_nodes[j->dataset][n - p->c->nodes]))
		return 0;
	fc = empty ? n->cap_cpus : n->free_cpus - (p->ignore_reserved ? 0 : n->res_cpus);
	fm = empty ? n->cap_mem : n->free_mem - (p->ignore_reserved ? 0 : n->res_mem);
	fn = empty ? n->cap_net : n->free_net - (p->ignore_reserved ? 0 : n->res_net);
	if (j->cpus > 0)
		cap = Min(cap, (int) floor(fc / j->cpus + GS_EPS));
	if (j->mem > 0)
		cap = Min(cap, (int) floor(fm / j->mem + GS_EPS));
	if (j->net > 0)
		cap = Min(cap, (int) floor(fn / j->net + GS_EPS));
	if (cap <= 0)
		return 0;
	if (j->gpus > 0)
	{
		if (n->ngpus == 0 || j->model == -2 ||
			(j->model >= 0 && n->model != j->model) ||
			(j->gpu_mem >= 0 && n->gpu_mem + GS_EPS < j->gpu_mem))
			return 0;
		if (p->whole)
		{
			int			avail;

			if (empty)
				avail = n->ngpus;
			else if (p->ignore_reserved)
				avail = n->free_whole;
			else
			{
				avail = n->free_whole - n->res_whole;
				if (n->res_slices > 0)
					avail -= (n->res_slices + n->slices - 1) / n->slices;
			}
			cap = Min(cap, avail / p->g_whole);
		}
		else
		{
			int			k = p->kneed[n->slices];
			int			avail = 0,
						dv;

			if (k == 0)
				return 0;
			if (empty)
				avail = n->ngpus * (n->slices / k);
			else
			{
				for (dv = 0; dv < n->ngpus; dv++)
					avail += runs_table[free_mask(n, dv)][k];
				if (!p->ignore_reserved)
				{
					avail -= n->res_whole * (n->slices / k);
					avail -= (n->res_slices + k - 1) / k;
				}
			}
			cap = Min(cap, avail);
		}
	}
	return Max(cap, 0);
}

/* Fill cnt[][] and wsum[][] for the current job and mode. */
static void
count_units(GsPlacer *p)
{
	GsCluster  *c = p->c;
	int			L1 = p->L1;
	int			d,
				i;
	int			u_node = p->unit[p->kind[L1]];
	int32_t		mx = 0;

	for (i = 0; i < c->nnodes; i++)
	{
		int			w = node_cap(p, &c->nodes[i]);

		p->wsum[L1][i] = w;
		p->cnt[L1][i] = w / u_node;
		mx = Max(mx, p->cnt[L1][i]);
	}
	p->maxcnt[L1] = mx;
	for (d = L1 - 1; d >= 0; d--)
	{
		int			uc = p->unit[p->kind[d + 1]];
		int			ud = p->unit[p->kind[d]];
		GsDomain   *dom = c->dom[d];

		mx = 0;
		for (i = 0; i < c->ndom[d]; i++)
		{
			int64_t		s = 0,
						w = 0;
			int			k;

			for (k = dom[i].first_child; k < dom[i].first_child + dom[i].nchildren; k++)
			{
				s += p->cnt[d + 1][k];
				w += p->wsum[d + 1][k];
			}
			p->cnt[d][i] = (int32_t) Min(s * uc / ud, INT32_MAX);
			p->wsum[d][i] = (int32_t) Min(w, INT32_MAX);
			mx = Max(mx, p->cnt[d][i]);
		}
		p->maxcnt[d] = mx;
	}
}

static void
mark_dirty(GsPlacer *p, int ni)
{
	if (p->ndirty == p->dirty_cap)
	{
		p->dirty_cap *= 2;
		p->dirty = repalloc(p->dirty, sizeof(int32_t) * p->dirty_cap);
	}
	p->dirty[p->ndirty++] = ni;
}

/* Recompute one domain's counts from its children's. */
static void
recount_domain(GsPlacer *p, int d, int i)
{
	GsDomain   *dom = &p->c->dom[d][i];
	int64_t		sum = 0,
				ws = 0;
	int			k;

	for (k = dom->first_child; k < dom->first_child + dom->nchildren; k++)
	{
		sum += p->cnt[d + 1][k];
		ws += p->wsum[d + 1][k];
	}
	p->cnt[d][i] = (int32_t) Min(sum * p->unit[p->kind[d + 1]] / p->unit[p->kind[d]], INT32_MAX);
	p->wsum[d][i] = (int32_t) Min(ws, INT32_MAX);
	p->maxcnt[d] = Max(p->maxcnt[d], p->cnt[d][i]);
}

static void shape_key(const GsJob *j, ShapeKey *k);

/*
 * Bring a shape's cached counts up to date: each node changed since, once,
 * then each of their domains once, bottom-up (a rack of eight changed
 * nodes is recounted once, not once per node).
 */
static void
replay_dirty(GsPlacer *p, ShapeCounts *sc)
{
	GsCluster  *c = p->c;
	int			L1 = p->L1;
	int			nu = 0,
				d,
				k;
	int64		x;

	if (sc->synced >= p->ndirty)
		return;
	p->replay_id++;
	if (p->touched == NULL)
		p->touched = palloc(sizeof(int32_t) * Max(c->nnodes, 1));
	for (x = sc->synced; x < p->ndirty; x++)
	{
		int			ni = p->dirty[x];
		int			w;

		if (p->replayed[ni] == p->replay_id)
			continue;
		p->replayed[ni] = p->replay_id;
		p->touched[nu++] = ni;
		w = node_cap(p, &c->nodes[ni]);
		p->wsum[L1][ni] = w;
		p->cnt[L1][ni] = w / p->unit[p->kind[L1]];
		p->maxcnt[L1] = Max(p->maxcnt[L1], p->cnt[L1][ni]);
	}
	for (d = L1 - 1; d >= 0; d--)
	{
		if (p->dom_seen[d] == NULL)
			p->dom_seen[d] = palloc0(sizeof(int64_t) * Max(c->ndom[d], 1));
		for (k = 0; k < nu; k++)
		{
			int			di = c->nodes[p->touched[k]].dom[d];

			if (p->dom_seen[d][di] == p->replay_id)
				continue;
			p->dom_seen[d][di] = p->replay_id;
			recount_domain(p, d, di);
		}
	}
	sc->synced = p->ndirty;
}

/* Allocate a new cache entry's arrays and point cnt/wsum at them. */
static void
counts_alloc(GsPlacer *p, ShapeCounts *sc)
{
	int			d;

	for (d = 0; d <= p->L1; d++)
	{
		int			n = Max(p->c->ndom[d], 1);

		sc->cnt[d] = palloc(sizeof(int32_t) * n);
		sc->wsum[d] = palloc(sizeof(int32_t) * n);
		p->cnt[d] = sc->cnt[d];
		p->wsum[d] = sc->wsum[d];
	}
	p->maxcnt = sc->maxcnt;
	p->ncounts++;
}

static void
counts_point(GsPlacer *p, ShapeCounts *sc)
{
	int			d;

	for (d = 0; d <= p->L1; d++)
	{
		p->cnt[d] = sc->cnt[d];
		p->wsum[d] = sc->wsum[d];
	}
	p->maxcnt = sc->maxcnt;
}

/*
 * Reservations (docs/time.md): new counts for a job that bookings keep off
 * some nodes, from the same shape's counts without bookings (built, or
 * brought up to date, first): a copy, with only the booked nodes it may not
 * use counted again. Jobs of many teams then share one full count per
 * shape. False when the cache has no room for the shape without bookings.
 */
static bool
counts_from_unbooked(GsPlacer *p, const ShapeKey *key, ShapeCounts *sc)
{
	GsJob	   *j = p->job;
	uint64_t	block = j->res_block;
	ShapeKey	bkey = *key;
	ShapeCounts *base;
	bool		found;
	int			d,
				i;

	bkey.shape.res_block = 0;
	bkey.shape.res_only = 0;
	base = hash_search(p->counts, &bkey, HASH_FIND, &found);
	if (!found && p->ncounts >= GS_MAX_SHAPE_COUNTS)
		return false;
	j->res_block = 0;
	if (!found)
	{
		base = hash_search(p->counts, &bkey, HASH_ENTER, &found);
		counts_alloc(p, base);
		count_units(p);
		base->synced = p->ndirty;
	}
	else
	{
		counts_point(p, base);
		replay_dirty(p, base);
	}
	j->res_block = block;
	for (d = 0; d <= p->L1; d++)
	{
		memcpy(sc->cnt[d], base->cnt[d], sizeof(int32_t) * p->c->ndom[d]);
		memcpy(sc->wsum[d], base->wsum[d], sizeof(int32_t) * p->c->ndom[d]);
	}
	memcpy(sc->maxcnt, base->maxcnt, sizeof(sc->maxcnt));
	counts_point(p, sc);
	/* the booked nodes it may not use, then each of their domains once, bottom-up */
	p->replay_id++;
	for (i = 0; i < p->c->nnodes; i++)
		if (p->c->nodes[i].bookings & block)
		{
			int			w = node_cap(p, &p->c->nodes[i]);

			p->wsum[p->L1][i] = w;
			p->cnt[p->L1][i] = w / p->unit[p->kind[p->L1]];
			p->maxcnt[p->L1] = Max(p->maxcnt[p->L1], p->cnt[p->L1][i]);
		}
	for (d = p->L1 - 1; d >= 0; d--)
	{
		if (p->dom_seen[d] == NULL)
			p->dom_seen[d] = palloc0(sizeof(int64_t) * Max(p->c->ndom[d], 1));
		for (i = 0; i < p->c->nnodes; i++)
		{
			int			di = p->c->nodes[i].dom[d];

			if ((p->c->nodes[i].bookings & block) == 0 || p->dom_seen[d][di] == p->replay_id)
				continue;
			p->dom_seen[d][di] = p->replay_id;
			recount_domain(p, d, di);
		}
	}
	sc->synced = p->ndirty;
	return true;
}

/*
 * Point cnt/wsum at counts for the current job and mode: the shape's cached
 * counts brought up to date (FREE), or freshly computed scratch (EMPTY, or
 * when too many shapes are cached).
 */
static void
counts_for_job(GsPlacer *p)
{
	ShapeKey	key;
	ShapeCounts *sc;
	bool		found;
	int			d;

	if (p->mode == MODE_FREE)
	{
		shape_key(p->job, &key);
		key.pad = (int16_t) (p->only_cached | (p->ignore_reserved << 1));
		sc = hash_search(p->counts, &key, HASH_FIND, &found);
		if (!found && p->ncounts < GS_MAX_SHAPE_COUNTS)
		{
			sc = hash_search(p->counts, &key, HASH_ENTER, &found);
			counts_alloc(p, sc);
			if (p->job->res_block != 0 && p->job->res_only == 0 &&
				counts_from_unbooked(p, &key, sc))
				return;
			count_units(p);
			sc->synced = p->ndirty;
			return;
		}
		if (found)
		{
			counts_point(p, sc);
			replay_dirty(p, sc);
			return;
		}
	}
	for (d = 0; d <= p->L1; d++)
	{
		p->cnt[d] = p->scnt[d];
		p->wsum[d] = p->swsum[d];
	}
	p->maxcnt = p->smaxcnt;
	count_units(p);
}

/* Units of the whole gang in the unit kind of depth d. */
static inline int
gang_need(GsPlacer *p, int d)
{
	return p->job->workers / p->unit[p->kind[d]];
}

/* Sum of free whole devices in a domain: tie-break for best fit. */
static int
domain_free_gpus(GsPlacer *p, int d, int i)
{
	GsDomain   *dom = &p->c->dom[d][i];
	int			k,
				s = 0;

	for (k = dom->first_node; k < dom->first_node + dom->nnodes; k++)
		s += p->c->nodes[k].free_whole;
	return s;
}

/*
 * Choose the gang's domain: the deepest depth (no shallower than span) where
 * some domain holds the whole gang; among those the best fit (fewest units,
 * then fewest free devices). In EMPTY mode, prefer the domain where the most
 * is already free, so a reservation collects capacity that is freeing up.
 */
static bool
choose_gang_domain(GsPlacer *p, int *out_d, int *out_i)
{
	int			mind = Max(p->job->span_depth, 0);
	int			d,
				i;
	bool		any = false;
	const GsDomain *within = NULL;

	if (p->job->span_in > 0 && p->job->span_depth >= 0 && p->job->span_depth <= p->L1 &&
		p->job->span_in <= p->c->ndom[p->job->span_depth])
		within = &p->c->dom[p->job->span_depth][p->job->span_in - 1];

	/* no pool holds the gang: no domain inside one does either */
	if (p->maxcnt[0] < gang_need(p, 0))
		return false;
	for (i = 0; i < p->c->ndom[0] && !any; i++)
		any = p->cnt[0][i] >= gang_need(p, 0);
	if (!any)
		return false;

	for (d = p->L1; d >= mind; d--)
	{
		int			need = gang_need(p, d);
		int			best = -1;
		int64_t		bestkey1 = 0,
					bestkey2 = 0;

		if (p->maxcnt[d] < need)
			continue;			/* no domain of this depth holds it */
		for (i = 0; i < p->c->ndom[d]; i++)
		{
			int64_t		k1,
						k2;

			if (p->cnt[d][i] < need)
				continue;
			if (within != NULL &&
				(p->c->dom[d][i].first_node < within->first_node ||
				 p->c->dom[d][i].first_node >= within->first_node + within->nnodes))
				continue;		/* a grow stays in its gang's span domain */
			if (p->mode == MODE_EMPTY)
			{
				k1 = -(int64_t) p->freecnt[d][i];
				k2 = p->cnt[d][i];
			}
			else
			{
				k1 = p->cnt[d][i];
				k2 = domain_free_gpus(p, d, i);
			}
			if (best < 0 || k1 < bestkey1 || (k1 == bestkey1 && k2 < bestkey2))
			{
				best = i;
				bestkey1 = k1;
				bestkey2 = k2;
			}
		}
		if (best >= 0)
		{
			*out_d = d;
			*out_i = best;
			return true;
		}
	}
	return false;
}

/* Place `n` workers of the job on node `ni` (FREE: take; EMPTY: reserve). */
static void
take_on_node(GsPlacer *p, int ni, int n)
{
	GsNode	   *node = &p->c->nodes[ni];
	GsJob	   *j = p->job;
	int			w;

	mark_dirty(p, ni);
	if (p->mode == MODE_EMPTY)
	{
		node->res_cpus += n * j->cpus;
		node->res_mem += n * j->mem;
		node->res_net += n * j->net;
		if (j->gpus > 0 && p->whole)
			node->res_whole += n * p->g_whole;
		else if (j->gpus > 0)
			node->res_slices += n * p->kneed[node->slices];
		return;
	}

	for (w = 0; w < n; w++)
	{
		GsAssign   *a = &j->assign[p->next_rank++];

		a->node = ni;
		a->devmask = 0;
		a->first_slice = 0;
		a->nslices = 0;
		if (j->gpus > 0 && p->whole)
		{
			int			dv,
						got = 0;

			for (dv = 0; dv < node->ngpus && got < p->g_whole; dv++)
				if (node->used[dv] == 0)
				{
					node->used[dv] = (uint8_t) ((1 << node->slices) - 1);
					a->devmask |= UINT64_C(1) << dv;
					got++;
				}
			Assert(got == p->g_whole);
			a->nslices = node->slices;
		}
		else if (j->gpus > 0)
		{
			int			k = p->kneed[node->slices];
			int			dv,
						best = -1,
						bestfree = 99;

			/* the device with the fewest free slices that still holds k */
			for (dv = 0; dv < node->ngpus; dv++)
			{
				uint8_t		f = free_mask(node, dv);
				int			nf = pg_number_of_ones[f];

				if (runs_table[f][k] > 0 && nf < bestfree)
				{
					best = dv;
					bestfree = nf;
				}
			}
			Assert(best >= 0);
			if (best >= 0)
			{
				uint8_t		f = free_mask(node, best);
				int			s;

				for (s = 0; s + k <= node->slices; s++)
				{
					uint8_t		run = (uint8_t) (((1 << k) - 1) << s);

					if ((f & run) == run)
					{
						node->used[best] |= run;
						a->devmask = UINT64_C(1) << best;
						a->first_slice = s;
						a->nslices = k;
						break;
					}
				}
			}
		}
		node->free_cpus -= j->cpus;
		node->free_mem -= j->mem;
		node->free_net -= j->net;
	}
	gs_node_recount(node);
}

/*
 * Put `need` units (of the kind of depth d) into domain i of depth d:
 * to the child that holds all that remain (best fit), else to the largest
 * child first. Ranks are given out in order.
 */
static void
assign_units(GsPlacer *p, int d, int i, int need)
{
	GsDomain   *dom;
	int			cd,
				first,
				nch;
	int			conv;

	if (need <= 0)
		return;
	if (d == p->L1)
	{
		take_on_node(p, i, need * p->unit[p->kind[d]]);
		return;
	}
	dom = &p->c->dom[d][i];
	cd = d + 1;
	first = dom->first_child;
	nch = dom->nchildren;
	/* units of this depth become units of the children's kind */
	conv = p->unit[p->kind[d]] / p->unit[p->kind[cd]];
	need *= conv;

	{
		int32_t    *left = palloc(sizeof(int32_t) * nch);
		int			k;

		for (k = 0; k < nch; k++)
			left[k] = p->cnt[cd][first + k];

		while (need > 0)
		{
			int			pick = -1;
			int64_t		pk1 = 0,
						pk2 = 0;

			/* best fit: a child that holds all that remains */
			for (k = 0; k < nch; k++)
			{
				int64_t		k1,
							k2;

				if (left[k] < need)
					continue;
				if (p->mode == MODE_EMPTY)
				{
					k1 = -(int64_t) p->freecnt[cd][first + k];
					k2 = left[k];
				}
				else
				{
					k1 = left[k];
					k2 = (cd == p->L1) ? p->c->nodes[first + k].free_whole : 0;
				}
				if (pick < 0 || k1 < pk1 || (k1 == pk1 && k2 < pk2))
				{
					pick = k;
					pk1 = k1;
					pk2 = k2;
				}
			}
			if (pick >= 0)
			{
				assign_units(p, cd, first + pick, need);
				left[pick] -= need;
				need = 0;
				break;
			}
			/* otherwise the largest child (fewest domains spanned) */
			for (k = 0; k < nch; k++)
			{
				int64_t		k1;

				if (left[k] <= 0)
					continue;
				k1 = (p->mode == MODE_EMPTY)
					? (int64_t) left[k] * 1000000 + p->freecnt[cd][first + k]
					: left[k];
				if (pick < 0 || k1 > pk1)
				{
					pick = k;
					pk1 = k1;
				}
			}
			if (pick < 0)
				elog(ERROR, "gangsched placement: domain counts do not cover the gang");
			{
				int			t = Min(left[pick], need);

				assign_units(p, cd, first + pick, t);
				left[pick] -= t;
				need -= t;
			}
		}
		pfree(left);
	}
}

static void
shape_key(const GsJob *j, ShapeKey *k)
{
	memset(k, 0, sizeof(*k));
	gs_shape_key(j, &k->shape);
	k->pool_mask = j->pool_mask;
	k->dataset = (j->locality != GS_LOC_NONE) ? j->dataset : -1;
	k->locality = (int16_t) j->locality;
}

/* Explain a failure from the FREE counts now in the placer. */
static void
explain(GsPlacer *p, GsWhy *why)
{
	GsJob	   *j = p->job;
	GsCluster  *c = p->c;
	int			i,
				total = 0,
				bestnode = 0;
	int			checks[3][2];
	int			nchecks = 0,
				k;

	memset(why, 0, sizeof(*why));
	for (i = 0; i < c->ndom[0]; i++)
		total = Max(total, p->wsum[0][i]);
	for (i = 0; i < c->nnodes; i++)
		bestnode = Max(bestnode, p->wsum[p->L1][i]);
	why->total_workers = total;
	if (bestnode == 0)
	{
		why->kind = GS_WHY_NO_NODE;
		why->depth = p->L1;
		why->unit = "worker";
		why->unit_workers = 1;
		why->need = 1;
		return;
	}
	if (total < j->workers)
	{
		why->kind = GS_WHY_CAPACITY;
		why->depth = 0;
		why->unit = "worker";
		why->unit_workers = 1;
		why->need = j->workers;
		why->best = total;
		why->best_workers = total;
		for (i = 0; i < c->ndom[0]; i++)
			if (p->wsum[0][i] == total)
			{
				why->best_label = c->dom[0][i].label;
				break;
			}
		return;
	}
	/* enough workers in a pool: which domain level is too small? */
	if (j->span_depth >= 0)
	{
		checks[nchecks][0] = j->span_depth;
		checks[nchecks++][1] = 3;
	}
	if (j->stage_depth >= 0)
	{
		checks[nchecks][0] = j->stage_depth;
		checks[nchecks++][1] = 2;
	}
	checks[nchecks][0] = j->group_depth;
	checks[nchecks++][1] = 1;
	why->kind = GS_WHY_TOPOLOGY;
	for (k = 0; k < nchecks; k++)
	{
		int			d = checks[k][0];
		int			what = checks[k][1];
		int			uw = (what == 3) ? j->workers : (what == 2) ? j->group_size * j->stages : j->group_size;
		int			units_needed = j->workers / uw;
		int			have = 0,
					bi = -1;

		/* units of this size that fit, summed over domains of depth d */
		for (i = 0; i < c->ndom[d]; i++)
		{
			int			u = p->wsum[d][i] / uw;

			have += u;
			if (bi < 0 || p->wsum[d][i] > p->wsum[d][bi])
				bi = i;
		}
		if (what == 3 ? (bi < 0 || p->wsum[d][bi] < j->workers) : have < units_needed)
		{
			why->depth = d;
			why->unit = (what == 3) ? "gang" : (what == 2) ? "pipeline replica" : "tensor group";
			why->unit_workers = uw;
			why->need = (what == 3) ? 1 : units_needed;
			why->best = (what == 3) ? (bi >= 0 ? p->wsum[d][bi] / uw : 0) : have;
			why->best_workers = bi >= 0 ? p->wsum[d][bi] : 0;
			why->best_label = bi >= 0 ? c->dom[d][bi].label : NULL;
			return;
		}
	}
	/* each level alone would do, together they do not */
	why->depth = 0;
	why->unit = "gang";
	why->unit_workers = j->workers;
	why->need = 1;
	why->best = 0;
}

static bool place_internal(GsPlacer *p, GsJob *j, GsWhy *why, bool commit);

bool
gs_place(GsPlacer *p, GsJob *j, GsWhy *why)
{
	return place_internal(p, j, why, true);
}

bool
gs_probe(GsPlacer *p, GsJob *j, GsWhy *why)
{
	return place_internal(p, j, why, false);
}

static bool
place_internal(GsPlacer *p, GsJob *j, GsWhy *why, bool commit)
{
	ShapeKey	key;
	ShapeMemo  *m;
	bool		found;
	int			d,
				i;

	if (why != NULL)
		memset(why, 0, sizeof(*why));
	shape_key(j, &key);
	m = (p->ignore_memo || p->ignore_reserved) ? NULL : hash_search(p->memo, &key, HASH_FIND, &found);
	if (m != NULL && found && j->workers >= m->min_failing_workers)
	{
		if (why != NULL)
			*why = m->why;
		return false;
	}
	prepare(p, j);
	p->mode = MODE_FREE;
	if (!p->pool_ok_any)
	{
		if (why != NULL)
			why->kind = GS_WHY_NO_NODE;
		return false;
	}
	counts_for_job(p);

	/* preferred locality: the cached nodes, if they hold the gang as tightly */
	if (j->locality == GS_LOC_PREFERRED && j->dataset >= 0)
	{
		int			d_any,
					i_any;

		if (choose_gang_domain(p, &d_any, &i_any))
		{
			p->only_cached = true;
			counts_for_job(p);
			if (!choose_gang_domain(p, &d, &i) || d < d_any)
			{
				p->only_cached = false;
				counts_for_job(p);
				d = d_any;
				i = i_any;
			}
			goto place;
		}
	}
	if (!choose_gang_domain(p, &d, &i))
	{
		if (why == NULL)
			return false;		/* a yes/no probe: no explanation, no memo */
		explain(p, why);
		if (j->span_in > 0)
			return false;		/* confined to one domain: not the shape's failure */
		m = hash_search(p->memo, &key, HASH_ENTER, &found);
		if (!found || j->workers < m->min_failing_workers)
		{
			m->min_failing_workers = j->workers;
			m->why = *why;
		}
		return false;
	}

place:
	p->last_d = d;
	p->last_i = i;
	if (!commit)
		return true;
	j->assign = palloc0(sizeof(GsAssign) * j->workers);
	j->dom_depth = (int16_t) d;
	j->dom_index = i;
	p->next_rank = 0;
	assign_units(p, d, i, gang_need(p, d));
	if (p->next_rank != j->workers)
		elog(ERROR, "gangsched placement: placed %d of %d workers of job " INT64_FORMAT,
			 p->next_rank, j->workers, j->id);
	j->placed = true;
	return true;
}

void
gs_placer_last_domain(const GsPlacer *p, int *d, int *i)
{
	*d = p->last_d;
	*i = p->last_i;
}

bool
gs_reserve(GsPlacer *p, GsJob *j)
{
	int			d,
				i;

	prepare(p, j);
	p->mode = MODE_FREE;
	counts_for_job(p);
	for (d = 0; d <= p->L1; d++)
		memcpy(p->freecnt[d], p->cnt[d], sizeof(int32_t) * p->c->ndom[d]);
	p->mode = MODE_EMPTY;
	counts_for_job(p);
	if (!choose_gang_domain(p, &d, &i))
	{
		p->mode = MODE_FREE;
		return false;
	}
	assign_units(p, d, i, gang_need(p, d));
	p->mode = MODE_FREE;
	j->reserved = true;
	/* capacity changed: earlier failures stay failures, nothing else to do */
	return true;
}

bool
gs_reserve_free(GsPlacer *p, GsJob *j)
{
	int			d,
				i,
				k;

	prepare(p, j);
	p->mode = MODE_FREE;
	if (!p->pool_ok_any)
		return false;
	counts_for_job(p);
	if (!choose_gang_domain(p, &d, &i))
		return false;
	/* reserve (EMPTY mode records res_*) along the FREE counts */
	for (k = 0; k <= p->L1; k++)
		memcpy(p->freecnt[k], p->cnt[k], sizeof(int32_t) * p->c->ndom[k]);
	p->mode = MODE_EMPTY;
	assign_units(p, d, i, gang_need(p, d));
	p->mode = MODE_FREE;
	j->reserved = true;
	j->dom_depth = (int16_t) d;
	j->dom_index = i;
	return true;
}

void
gs_placer_ignore_reserved(GsPlacer *p, bool on)
{
	p->ignore_reserved = on;
}

char *
gs_why_text(GsCluster *c, const GsJob *j, const GsWhy *w, bool with_numbers)
{
	StringInfoData s;
	double		g = j->gpus;
	const char *lvl = c->level_names[w->depth];

	initStringInfo(&s);
	switch (w->kind)
	{
		case GS_WHY_NONE:
			appendStringInfoString(&s, "fits now");
			break;
		case GS_WHY_NO_NODE:
			appendStringInfoString(&s, "no eligible node has room for one worker now");
			if (with_numbers)
				appendStringInfoString(&s, " (the nodes that could hold one are busy, reserved, draining or down)");
			break;
		case GS_WHY_CAPACITY:
			if (g > 0)
				appendStringInfo(&s, "needs %d workers (%g GPUs) in one pool", j->workers, g * j->workers);
			else
				appendStringInfo(&s, "needs %d CPU-only workers in one pool", j->workers);
			if (with_numbers)
			{
				if (g > 0)
					appendStringInfo(&s, "; the most free in any eligible pool is room for %d (%g GPUs)",
									 w->best, g * w->best);
				else
					appendStringInfo(&s, "; the most free in any eligible pool is room for %d", w->best);
				if (w->best_label)
					appendStringInfo(&s, ", in %s", w->best_label);
			}
			break;
		case GS_WHY_TOPOLOGY:
			if (strcmp(w->unit, "gang") == 0)
				appendStringInfo(&s, "needs %d workers (%g GPUs) inside one %s",
								 j->workers, g * j->workers, lvl);
			else
				appendStringInfo(&s, "needs %d %ss of %d workers (%g GPUs each) inside one %s each",
								 w->need, w->unit, w->unit_workers, g * w->unit_workers, lvl);
			if (with_numbers)
			{
				if (strcmp(w->unit, "gang") == 0)
					appendStringInfo(&s, "; the most free in any %s is room for %d workers (%g GPUs)",
									 lvl, w->best_workers, g * w->best_workers);
				else
					appendStringInfo(&s, "; free capacity holds %d such %ss, the largest %s has room for %d workers",
									 w->best, w->unit, lvl, w->best_workers);
				if (w->best_label)
					appendStringInfo(&s, ", in %s", w->best_label);
			}
			break;
	}
	/* elastic gangs (docs/elastic.md): no size down to the minimum fits either */
	if (w->kind != GS_WHY_NONE && j->min_workers > 0 && j->min_workers < j->max_workers)
		appendStringInfo(&s, "; elastic, it would start on %d workers (min_replicas %d) but that does not fit either",
						 j->min_workers, j->min_workers / Max(1, j->group_size * j->stages));
	return s.data;
}

/*
 * Virtually give back (or take again) a running job's capacity in the
 * model, for victim searches. Changed nodes go to the dirty log so cached
 * counts stay right.
 */
void
gs_model_release(GsPlacer *p, GsRunning *r, bool release)
{
	int			k;

	for (k = 0; k < r->nalloc; k++)
	{
		GsAlloc    *a = &r->allocs[k];
		GsNode	   *n;
		uint64_t	m;
		double		sign = release ? 1.0 : -1.0;

		if (a->node < 0)
			continue;
		n = &p->c->nodes[a->node];
		/* the node's free counts (gs_node_recount) kept device by device */
		for (m = a->devmask & ((n->ngpus >= 64) ? ~UINT64_C(0) : ((UINT64_C(1) << n->ngpus) - 1)); m != 0; m &= m - 1)
		{
			int			dv = pg_rightmost_one_pos64(m);
			uint8_t		bits = (uint8_t) (((1 << a->nslices) - 1) << a->first_slice);
			uint8_t		was = n->used[dv];

			if (release)
				n->used[dv] &= (uint8_t) ~bits;
			else
				n->used[dv] |= bits;
			n->free_whole += (n->used[dv] == 0) - (was == 0);
			n->free_slices += pg_number_of_ones[free_mask(n, dv)] -
				pg_number_of_ones[(uint8_t) (~was & ((1 << n->slices) - 1))];
		}
		n->free_cpus += sign * a->cpus;
		n->free_mem += sign * a->mem;
		n->free_net += sign * a->net;
		mark_dirty(p, a->node);
	}
	r->released = release;
}

void
gs_placer_ignore_memo(GsPlacer *p, bool on)
{
	p->ignore_memo = on;
}

/* Give host resources back to a node (capacity counted twice). */
void
gs_model_credit(GsPlacer *p, int ni, double cpus, double mem, double net)
{
	GsNode	   *n = &p->c->nodes[ni];

	n->free_cpus += cpus;
	n->free_mem += mem;
	n->free_net += net;
	mark_dirty(p, ni);
}
