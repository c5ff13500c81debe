/*
 * admission.c — the fast path of submit's admission control.
 *
 * gangsched._admit_fast(job) answers "could this gang ever run?" from an
 * in-memory model of the whole registered inventory (every node as if up
 * and empty), cached per backend: the placement engine itself decides
 * whether the gang fits (shape, spans, slices, host resources, pools), and
 * the team's quota ceiling is checked in C. It returns true only when the
 * job is admissible; otherwise submit falls back to the SQL checks
 * (gangsched._admit), which raise the precise error. So the common case
 * costs microseconds and every rejection keeps its exact message.
 *
 * The cache is dropped when the inventory changes: statement triggers on the
 * inventory tables call gangsched._inventory_changed(), which sends a
 * relcache invalidation for gangsched.node_classes; every backend's callback
 * then forgets its model at its next transaction.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "fair.h"
#include "loader.h"
#include "placement.h"
#include "tenancy.h"

typedef struct VerdictKey
{
	GsShapeKey	shape;
	int32		team,
				workers,
				pool;
} VerdictKey;

typedef struct Verdict
{
	VerdictKey	key;
	bool		ok;
} Verdict;

static MemoryContext adm_cxt = NULL;
static GsCluster *adm_cluster = NULL;
static GsPlacer *adm_placer = NULL;
static HTAB *adm_verdicts = NULL;
static double adm_pool_cap[64][GS_NRES];
static bool adm_callback_registered = false;
static Oid	adm_watch_relid = InvalidOid;

/*
 * Invalidations only count up; the cache is dropped at the start of the
 * next call, never while in use (invalidation messages are processed
 * whenever a lock is taken, including while the cache is being loaded).
 */
static uint64 adm_inval_gen = 0;
static uint64 adm_loaded_gen = 0;

static void
adm_reset(void)
{
	if (adm_cxt != NULL)
		MemoryContextDelete(adm_cxt);
	adm_cxt = NULL;
	adm_cluster = NULL;
	adm_placer = NULL;
	adm_verdicts = NULL;
}

static void
adm_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == adm_watch_relid)
		adm_inval_gen++;
}

static Oid
node_classes_relid(void)
{
	Oid			nsp = get_namespace_oid("gangsched", true);

	return OidIsValid(nsp) ? get_relname_relid("node_classes", nsp) : InvalidOid;
}

/* Load the inventory as an empty cluster of up nodes (SPI connected). */
static void
adm_load(void)
{
	MemoryContext old;
	GsState    *st;
	HASHCTL		ctl;
	int			i,
				r;

	if (!adm_callback_registered)
	{
		CacheRegisterRelcacheCallback(adm_relcache_callback, (Datum) 0);
		adm_callback_registered = true;
	}
	adm_watch_relid = node_classes_relid();
	adm_loaded_gen = adm_inval_gen;
	adm_cxt = AllocSetContextCreate(CacheMemoryContext, "gangsched admission", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(adm_cxt);
	st = gs_load_state_ex(false);
	adm_cluster = st->cluster;
	memset(adm_pool_cap, 0, sizeof(adm_pool_cap));
	for (i = 0; i < adm_cluster->nnodes; i++)
	{
		GsNode	   *n = &adm_cluster->nodes[i];
		double		cap[GS_NRES] = {n->ngpus, n->cap_cpus, n->cap_mem, n->cap_net};

		n->state = GS_NODE_UP;	/* admission asks "ever", not "now" */
		if (n->pool < GS_MAX_POOLS)
			for (r = 0; r < GS_NRES; r++)
				adm_pool_cap[n->pool][r] += cap[r];
	}
	adm_placer = gs_placer_create(adm_cluster);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(VerdictKey);
	ctl.entrysize = sizeof(Verdict);
	ctl.hcxt = adm_cxt;
	adm_verdicts = hash_create("gangsched admission verdicts", 256, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	MemoryContextSwitchTo(old);
}

/*
 * The team's ceiling in some eligible pool holds the whole gang, as the SQL
 * admission computes it: non-preemptible within nominal quota; preemptible
 * within nominal + borrowing limit when one is set, and within the pool less
 * other teams' non-lendable quota.
 */
static bool
within_ceiling(GsCluster *c, GsJob *j, uint64_t pools)
{
	double		d[GS_NRES] = {j->gpus * j->workers, j->cpus * j->workers, j->mem * j->workers, j->net * j->workers};
	int			p,
				r,
				t;

	if (j->tix < 0)
		return false;
	for (p = 0; p < c->npools && p < GS_MAX_POOLS; p++)
	{
		GsQuota    *q = &c->quotas[j->tix * c->npools + p];
		bool		ok = true;

		if (!(pools & (UINT64_C(1) << p)))
			continue;
		for (r = 0; r < GS_NRES && ok; r++)
		{
			double		ceiling,
						locked = 0;

			for (t = 0; t < c->nteams; t++)
			{
				GsQuota    *o = &c->quotas[t * c->npools + p];

				if (t != j->tix && o->has && o->nominal[r] >= 0 && o->lend[r] >= 0)
					locked += o->nominal[r] - o->lend[r];
			}
			if (!j->preemptible)
				ceiling = !q->has ? 0 : (q->nominal[r] < 0 && r > 0) ? adm_pool_cap[p][r] : q->nominal[r];
			else if (q->has && q->nominal[r] >= 0 && q->borrow[r] >= 0)
				ceiling = Min(q->nominal[r] + q->borrow[r], adm_pool_cap[p][r] - locked);
			else
				ceiling = Max(adm_pool_cap[p][r] - locked, Max(q->nominal[r], 0));
			if (d[r] > ceiling + GS_EPS)
				ok = false;
		}
		if (ok)
			return true;
	}
	return false;
}

/*
 * Team trees: within the leaf's ceiling as above (other teams' locked
 * quota being what the subtrees off its path hold back) and within every
 * ancestor's that has a quota row: non-preemptible work within its nominal
 * quota less its other children's nominal quota (carved out), preemptible within nominal + borrowing limit when one is set. A
 * leaf without a quota row may hold non-preemptible work when some
 * ancestor has one. sql/src/40_admission.sql says the same.
 */
static bool
within_ceiling_tree(GsCluster *c, GsJob *j, uint64_t pools)
{
	double		d[GS_NRES] = {j->gpus * j->workers, j->cpus * j->workers, j->mem * j->workers, j->net * j->workers};
	int		   *off = palloc(sizeof(int) * Max(c->nteams, 1));
	int			noff = gs_tree_off_path(c, j->tix, off);
	int			p,
				r,
				t,
				k;

	for (p = 0; p < c->npools && p < GS_MAX_POOLS; p++)
	{
		GsQuota    *q = &c->quotas[j->tix * c->npools + p];
		bool		ok = true,
					any = q->has;

		if (!(pools & (UINT64_C(1) << p)))
			continue;
		for (t = c->teams[j->tix].parent; t >= 0; t = c->teams[t].parent)
			any = any || c->quotas[t * c->npools + p].has;
		for (r = 0; r < GS_NRES && ok; r++)
		{
			double		ceiling,
						locked = 0;

			for (k = 0; k < noff; k++)
				locked += gs_tree_held_back(c, p, off[k], r);
			if (!j->preemptible)
				ceiling = !any ? 0 : !q->has ? adm_pool_cap[p][r] :
					(q->nominal[r] < 0 && r > 0) ? adm_pool_cap[p][r] : q->nominal[r];
			else if (q->has && q->nominal[r] >= 0 && q->borrow[r] >= 0)
				ceiling = Min(q->nominal[r] + q->borrow[r], adm_pool_cap[p][r] - locked);
			else
				ceiling = Max(adm_pool_cap[p][r] - locked, Max(q->nominal[r], 0));
			if (d[r] > ceiling + GS_EPS)
				ok = false;
			for (t = c->teams[j->tix].parent, k = j->tix; t >= 0 && ok; k = t, t = c->teams[t].parent)
			{
				GsQuota    *a = &c->quotas[t * c->npools + p];

				if (!a->has || a->nominal[r] < 0)
					continue;
				if (!j->preemptible)
					ceiling = a->nominal[r] - gs_tree_kept(c, p, t, k, r);	/* others' nominal carved out */
				else if (a->borrow[r] >= 0)
					ceiling = a->nominal[r] + a->borrow[r];
				else
					continue;
				if (d[r] > ceiling + GS_EPS)
					ok = false;
			}
		}
		if (ok)
		{
			pfree(off);
			return true;
		}
	}
	pfree(off);
	return false;
}

static Datum
field(HeapTupleHeader row, const char *name, bool *isnull)
{
	return GetAttributeByName(row, name, isnull);
}

static double
field_float(HeapTupleHeader row, const char *name, double dflt)
{
	bool		isnull;
	Datum		d = field(row, name, &isnull);

	return isnull ? dflt : DatumGetFloat8(DirectFunctionCall1(numeric_float8, d));
}

static int32
field_int(HeapTupleHeader row, const char *name, int32 dflt)
{
	bool		isnull;
	Datum		d = field(row, name, &isnull);

	return isnull ? dflt : DatumGetInt32(d);
}

static int16
field_int2(HeapTupleHeader row, const char *name, int16 dflt)
{
	bool		isnull;
	Datum		d = field(row, name, &isnull);

	return isnull ? dflt : DatumGetInt16(d);
}

PG_FUNCTION_INFO_V1(gs_admit_fast);
Datum
gs_admit_fast(PG_FUNCTION_ARGS)
{
	HeapTupleHeader row = PG_GETARG_HEAPTUPLEHEADER(0);
	GsJob		j;
	VerdictKey	key;
	Verdict    *v;
	bool		found,
				isnull;
	Datum		d;
	int			i,
				team_id,
				pool_id;
	uint64_t	pools;
	MemoryContext old;

	/* required locality is left to the SQL checks (caching nodes change often) */
	d = field(row, "locality", &isnull);
	if (!isnull && strcmp(TextDatumGetCString(d), "required") == 0)
		PG_RETURN_BOOL(false);

	if (adm_cluster != NULL && adm_loaded_gen != adm_inval_gen)
		adm_reset();
	if (adm_cluster == NULL)
	{
		/* the loader's queries under the fixed search_path; an error undoes it */
		int			save_nestlevel = gs_fix_search_path();

		SPI_connect();
		PG_TRY();
		{
			adm_load();
		}
		PG_CATCH();
		{
			adm_reset();
			PG_RE_THROW();
		}
		PG_END_TRY();
		SPI_finish();
		gs_restore_search_path(save_nestlevel);
	}

	memset(&j, 0, sizeof(j));
	j.workers = field_int(row, "workers", 1);
	j.gpus = field_float(row, "gpus", 0);
	j.cpus = field_float(row, "cpus", 0);
	j.mem = field_float(row, "mem_gb", 0);
	j.net = field_float(row, "net_gbps", 0);
	j.gpu_mem = field_float(row, "gpu_mem_gb", -1);
	j.preemptible = DatumGetBool(field(row, "preemptible", &isnull));
	j.group_size = field_int(row, "group_size", 1);
	j.stages = field_int(row, "stages", 1);
	j.group_depth = field_int2(row, "group_span", adm_cluster->nlevels + 1);
	j.stage_depth = field_int2(row, "stage_span", -1);
	j.span_depth = field_int2(row, "span", -1);
	j.dataset = -1;
	j.locality = GS_LOC_NONE;
	j.model = -1;
	d = field(row, "gpu_model", &isnull);
	if (!isnull)
	{
		char	   *m = TextDatumGetCString(d);

		j.model = -2;
		for (i = 0; i < adm_cluster->nmodels; i++)
			if (strcmp(adm_cluster->models[i], m) == 0)
				j.model = i;
	}
	team_id = field_int(row, "team_id", -1);
	j.tix = -1;
	for (i = 0; i < adm_cluster->nteams; i++)
		if (adm_cluster->teams[i].id == team_id)
			j.tix = i;
	pool_id = field_int(row, "pool_id", -1);
	j.pool = -1;
	if (pool_id >= 0)
	{
		j.pool = -2;
		for (i = 0; i < adm_cluster->npools; i++)
			if (adm_cluster->pools[i].id == pool_id)
				j.pool = i;
	}
	if (j.tix < 0 || j.pool == -2 || j.model == -2 ||
		j.group_depth < 1 || j.group_depth > adm_cluster->nlevels + 1 ||
		j.stage_depth > adm_cluster->nlevels + 1 || j.span_depth > adm_cluster->nlevels + 1)
		PG_RETURN_BOOL(false);

	memset(&key, 0, sizeof(key));
	gs_shape_key(&j, &key.shape);
	key.team = j.tix;
	key.workers = j.workers;
	key.pool = j.pool;
	v = hash_search(adm_verdicts, &key, HASH_FIND, &found);
	if (found)
		PG_RETURN_BOOL(v->ok);

	old = MemoryContextSwitchTo(adm_cxt);
	pools = gs_eligible_pools(adm_cluster, &j);
	j.pool_mask = pools;
	v = hash_search(adm_verdicts, &key, HASH_ENTER, &found);
	v->ok = pools != 0 && gs_probe(adm_placer, &j, NULL) &&
		(adm_cluster->tree ? within_ceiling_tree(adm_cluster, &j, pools) : within_ceiling(adm_cluster, &j, pools));
	MemoryContextSwitchTo(old);
	PG_RETURN_BOOL(v->ok);
}

/* Statement trigger on the inventory tables: drop every backend's cache. */
PG_FUNCTION_INFO_V1(gs_inventory_changed);
Datum
gs_inventory_changed(PG_FUNCTION_ARGS)
{
	Oid			relid = node_classes_relid();

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "gangsched._inventory_changed() must be called as a trigger");
	if (OidIsValid(relid))
		CacheInvalidateRelcacheByRelid(relid);
	adm_inval_gen++;
	return PointerGetDatum(NULL);
}
