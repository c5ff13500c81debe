/*
 * loader.c — the SPI edge that reads the cluster and the queue.
 *
 * One query per relation, each set-based: levels, pools, nodes (sorted by
 * pool and topology so domains are contiguous runs), current usage per node,
 * held slots per node, capacity held for nominated jobs, the datasets that
 * pending jobs ask for, and the pending jobs. No query per node or per job.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "tcop/dest.h"
#include "portability/instr_time.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "fair.h"
#include "guc.h"
#include "las.h"
#include "loader.h"
#include "placement.h"
#include "preempt.h"
#include "spi.h"
#include "tenancy.h"

static bool
col_null(int row, int col)
{
	bool		isnull;

	(void) SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);
	return isnull;
}

static Datum
col(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

static int32_t
col_int(int row, int c, int32_t dflt)
{
	bool		isnull;
	Datum		d = col(row, c, &isnull);

	return isnull ? dflt : DatumGetInt32(d);
}

static double
col_float(int row, int c, double dflt)
{
	bool		isnull;
	Datum		d = col(row, c, &isnull);

	return isnull ? dflt : DatumGetFloat8(d);
}

static bool
col_bool(int row, int c)
{
	bool		isnull;
	Datum		d = col(row, c, &isnull);

	return !isnull && DatumGetBool(d);
}

/* A copy of a text column in the caller's memory context, or NULL. */
static char *
col_text(int row, int c)
{
	char	   *v = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, c);

	return v;
}

/*
 * A job's grace in seconds, as a preemption or its time limit gives it:
 * its own (isnull: none) else gangsched.default_grace, at most
 * gangsched.max_grace.
 */
static double
gs_grace_s(bool isnull, double own)
{
	return Min(isnull ? (double) gs_default_grace_s : own, (double) gs_max_grace_s);
}

/* A statement of the load whose text is the same every round (its plan is kept). */
static void
run(const char *sql, int expect)
{
	(void) gs_spi_exec("load", sql, 0, NULL, NULL, NULL, true, expect);
}

static int
intern(const char ***names, int *n, int *cap, const char *s)
{
	int			i;

	for (i = 0; i < *n; i++)
		if (strcmp((*names)[i], s) == 0)
			return i;
	if (*n == *cap)
	{
		*cap = Max(8, *cap * 2);
		*names = *names ? repalloc(*names, sizeof(char *) * *cap) : palloc(sizeof(char *) * *cap);
	}
	(*names)[*n] = pstrdup(s);
	return (*n)++;
}

static int
model_index(GsCluster *c, const char *m)
{
	int			i;

	for (i = 0; i < c->nmodels; i++)
		if (strcmp(c->models[i], m) == 0)
			return i;
	return -2;
}

/*
 * Build the domain tree from the nodes, sorted by (pool, topology, name): a
 * node opens new domains from the first depth where it differs from the
 * node before it down to the node level, and extends the shallower ones.
 */
static void
build_domains(GsCluster *c, char ***labels)
{
	int			L1 = c->nlevels + 1;
	int			d,
				i;

	for (d = 0; d <= L1; d++)
	{
		c->dom[d] = palloc0(sizeof(GsDomain) * Max(c->nnodes, 1));
		c->ndom[d] = 0;
	}
	for (i = 0; i < c->nnodes; i++)
	{
		GsNode	   *n = &c->nodes[i];
		int			first_new = 0;

		if (i > 0)
		{
			if (c->nodes[i - 1].pool != n->pool)
				first_new = 0;
			else
			{
				first_new = L1;
				for (d = 1; d < L1; d++)
					if (strcmp(labels[i - 1][d - 1], labels[i][d - 1]) != 0)
					{
						first_new = d;
						break;
					}
			}
		}
		for (d = 0; d <= L1; d++)
		{
			if (d >= first_new)
			{
				GsDomain   *dm = &c->dom[d][c->ndom[d]++];

				dm->first_node = i;
				dm->nnodes = 0;
				dm->first_child = (d < L1) ? c->ndom[d + 1] : 0;
				dm->nchildren = 0;
				if (d == 0)
					dm->label = c->pools[n->pool].name;
				else if (d == L1)
					dm->label = n->name;
				else
				{
					StringInfoData s;
					int			k;

					initStringInfo(&s);
					for (k = 0; k < d; k++)
						appendStringInfo(&s, "%s%s", k ? "." : "", labels[i][k]);
					dm->label = s.data;
				}
				if (d > 0)
					c->dom[d - 1][c->ndom[d - 1] - 1].nchildren++;
			}
			n->dom[d] = c->ndom[d] - 1;
			c->dom[d][c->ndom[d] - 1].nnodes++;
		}
	}
}

/* Streams pending-job rows into GsJob structs as the executor makes them. */
/*
 * Table ids to indexes into the model's arrays: at[id] for 0 <= id <= max,
 * -1 where no row has that id (ids are serials: small, dense, >= 0).
 */
typedef struct IdIndex
{
	int			max;
	int		   *at;
} IdIndex;

static int
id_lookup(const IdIndex *x, int id)
{
	return (id >= 0 && id <= x->max) ? x->at[id] : -1;
}

static IdIndex
id_index(const int32_t *ids, size_t stride, int n)
{
	IdIndex		x = {0, NULL};
	int			i;

#define ID_AT(i) (*(const int32_t *) ((const char *) ids + (size_t) (i) * stride))
	for (i = 0; i < n; i++)
		x.max = Max(x.max, ID_AT(i));
	x.at = palloc(sizeof(int) * (x.max + 1));
	for (i = 0; i <= x.max; i++)
		x.at[i] = -1;
	for (i = 0; i < n; i++)
		x.at[ID_AT(i)] = i;
#undef ID_AT
	return x;
}

static IdIndex
node_index(const GsCluster *c)
{
	return id_index(&c->nodes[0].id, sizeof(GsNode), c->nnodes);
}

static IdIndex
team_index(const GsCluster *c)
{
	return id_index(&c->teams[0].id, sizeof(GsTeam), c->nteams);
}

/* The index of pools.id pid, dflt when no pool has it. */
static int
pool_index(const GsCluster *c, int32_t pid, int dflt)
{
	int			k,
				at = dflt;

	for (k = 0; k < c->npools; k++)
		if (c->pools[k].id == pid)
			at = k;
	return at;
}

/*
 * A hash table of jobs by id (int64), in the current memory context: its
 * entries are of entrysize bytes, the id first.
 */
static HTAB *
job_hash(const char *name, int nrows, Size entrysize)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int64);
	ctl.entrysize = entrysize;
	ctl.hcxt = CurrentMemoryContext;
	return hash_create(name, Max(nrows, 16), &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

typedef struct JobReceiver
{
	DestReceiver pub;
	GsState    *st;
	GsCluster  *c;
	int		   *dcap;
	int			cap;
	MemoryContext cxt;			/* the loader's: rows outlive the query */
	const IdIndex *teams;
	bool		grow;			/* elastic gangs holding capacity: three more columns */
} JobReceiver;

static bool
job_receive(TupleTableSlot *slot, DestReceiver *self)
{
	JobReceiver *r = (JobReceiver *) self;
	GsState    *st = r->st;
	GsCluster  *c = r->c;
	GsJob	   *j;
	Datum	   *v;
	bool	   *nl;

	MemoryContext old = MemoryContextSwitchTo(r->cxt);

	slot_getallattrs(slot);
	v = slot->tts_values;
	nl = slot->tts_isnull;
	if (st->njobs == r->cap)
	{
		r->cap *= 2;
		st->jobs = repalloc(st->jobs, sizeof(GsJob) * r->cap);
	}
	j = &st->jobs[st->njobs++];
	memset(j, 0, sizeof(*j));
	j->id = DatumGetInt64(v[0]);
	j->team = DatumGetInt32(v[1]);
	j->tix = id_lookup(r->teams, j->team);
	j->tried_at = -1;
	j->priority = DatumGetInt32(v[2]);
	j->queue_pos = DatumGetInt64(v[3]);
	j->workers = DatumGetInt32(v[4]);
	j->gpus = DatumGetFloat8(v[5]);
	j->cpus = DatumGetFloat8(v[6]);
	j->mem = DatumGetFloat8(v[7]);
	j->net = DatumGetFloat8(v[8]);
	j->model = nl[9] ? -1 : model_index(c, TextDatumGetCString(v[9]));
	j->gpu_mem = nl[10] ? -1 : DatumGetFloat8(v[10]);
	j->pool = nl[11] ? -1 : pool_index(c, DatumGetInt32(v[11]), -2);
	j->preemptible = DatumGetBool(v[12]);
	j->group_size = DatumGetInt32(v[13]);
	j->group_depth = DatumGetInt16(v[14]);
	j->stages = DatumGetInt32(v[15]);
	j->stage_depth = nl[16] ? -1 : DatumGetInt16(v[16]);
	j->span_depth = nl[17] ? -1 : DatumGetInt16(v[17]);
	j->dataset = nl[18] ? -1 : intern(&c->datasets, &c->ndatasets, r->dcap, TextDatumGetCString(v[18]));
	j->locality = (GsLocality) DatumGetInt32(v[19]);
	j->has_old_reason = !nl[20];
	j->old_reason_hash = nl[20] ? 0 : DatumGetInt32(v[20]);
	j->queued_at = DatumGetTimestampTz(v[21]);
	j->queue_timeout_s = nl[22] ? -1 : DatumGetFloat8(v[22]);
	j->old_reason_refused = !nl[23] && DatumGetBool(v[23]);
	j->hold_s = nl[24] ? -1 : DatumGetFloat8(v[24]) + gs_grace_s(nl[25], nl[25] ? 0 : DatumGetFloat8(v[25]));
	j->max_workers = j->workers;
	j->min_workers = nl[26] ? j->workers : Max(1, Min(j->workers, DatumGetInt32(v[26])));
	j->quota_workers = gs_job_elastic(j) ? j->min_workers : 0;
	j->reservation_id = nl[27] ? 0 : DatumGetInt32(v[27]);
	j->reclaimed_by = nl[28] ? -1 : id_lookup(r->teams, DatumGetInt32(v[28]));
	j->attained = (st->las_teams && !nl[29]) ? DatumGetFloat8(v[29]) : 0;
	if (r->grow)
	{
		/* what it may grow to, the pool it runs in, its flag */
		j->max_workers = DatumGetInt32(v[29]);
		j->pool = nl[30] ? -2 : pool_index(c, DatumGetInt32(v[30]), -2);
		j->borrowed = DatumGetBool(v[31]);
		/* with a span: the id of a node it runs on (load_growable makes it a domain) */
		j->span_in = nl[32] ? 0 : DatumGetInt32(v[32]);
	}
	j->las_queue = -1;			/* set by the order step, which knows the clock */
	/* clamp depths the model cannot have */
	if (j->group_depth > c->nlevels + 1 || j->group_depth < 0)
		j->group_depth = c->nlevels + 1;
	if (j->stage_depth > c->nlevels + 1)
		j->stage_depth = c->nlevels + 1;
	if (j->span_depth > c->nlevels + 1)
		j->span_depth = c->nlevels + 1;
	MemoryContextSwitchTo(old);
	return true;
}

static void
job_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
job_shutdown(DestReceiver *self)
{
}

static void
job_destroy(DestReceiver *self)
{
}


/* ---- the inventory: levels, pools, nodes, teams, quotas ---------------- */

static void
load_levels(GsCluster *c)
{
	int			i;

	run("SELECT name FROM gangsched.topology_levels ORDER BY depth", SPI_OK_SELECT);
	c->nlevels = (int) SPI_processed;
	if (c->nlevels > GS_MAX_LEVELS)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("too many topology levels: %d", c->nlevels),
						errdetail("A round handles at most %d levels above the node.", GS_MAX_LEVELS),
						errhint("Merge levels that do not matter for placement (gangsched.set_topology_levels).")));
	c->level_names[0] = "pool";
	for (i = 0; i < c->nlevels; i++)
		c->level_names[i + 1] = col_text(i, 1);
	c->level_names[c->nlevels + 1] = "node";
}

static void
load_pools(GsCluster *c)
{
	int			i;

	run("SELECT id, kind OPERATOR(pg_catalog.=) 'reserved', name FROM gangsched.pools ORDER BY id", SPI_OK_SELECT);
	c->npools = (int) SPI_processed;
	if (c->npools > GS_MAX_POOLS)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("too many pools: %d", c->npools),
						errdetail("A round handles at most 64 pools."),
						errhint("Merge pools that share a kind.")));
	c->pools = palloc0(sizeof(GsPool) * Max(c->npools, 1));
	for (i = 0; i < c->npools; i++)
	{
		c->pools[i].id = col_int(i, 1, 0);
		c->pools[i].reserved = col_bool(i, 2);
		c->pools[i].name = col_text(i, 3);
	}
}

/* Nodes, sorted so every domain is a contiguous run, and the domain tree over them. */
static void
load_nodes(GsCluster *c)
{
	char	 ***labels;
	int			i,
				k,
				mcap = 0;

	run("SELECT n.id, n.pool_id, n.topology::pg_catalog.text, n.state,"
		"       n.cpus::pg_catalog.float8, n.mem_gb::pg_catalog.float8, n.net_gbps::pg_catalog.float8,"
		"       n.gpus, n.gpu_model, n.gpu_mem_gb::pg_catalog.float8, n.gpu_slices, n.name"
		"  FROM gangsched.nodes n ORDER BY n.pool_id, n.topology, n.name", SPI_OK_SELECT);
	c->nnodes = (int) SPI_processed;
	c->nodes = palloc0(sizeof(GsNode) * Max(c->nnodes, 1));
	labels = palloc(sizeof(char **) * Max(c->nnodes, 1));
	for (i = 0; i < c->nnodes; i++)
	{
		GsNode	   *n = &c->nodes[i];
		char	   *topo = col_text(i, 3);
		char	   *state = col_text(i, 4);
		char	   *tok,
				   *save;

		n->id = col_int(i, 1, 0);
		n->pool = pool_index(c, col_int(i, 2, 0), 0);
		n->topology = topo;
		n->state = strcmp(state, "up") == 0 ? GS_NODE_UP :
			strcmp(state, "draining") == 0 ? GS_NODE_DRAINING : GS_NODE_DOWN;
		n->cap_cpus = n->free_cpus = col_float(i, 5, 0);
		n->cap_mem = n->free_mem = col_float(i, 6, 0);
		n->cap_net = n->free_net = col_float(i, 7, 0);
		n->ngpus = (int16_t) col_int(i, 8, 0);
		n->model = col_null(i, 9) ? -1 : intern(&c->models, &c->nmodels, &mcap, col_text(i, 9));
		n->gpu_mem = col_float(i, 10, 0);
		n->slices = (int16_t) col_int(i, 11, 1);
		n->name = col_text(i, 12);
		gs_node_recount(n);

		labels[i] = palloc(sizeof(char *) * Max(c->nlevels, 1));
		tok = strtok_r(pstrdup(topo), ".", &save);
		for (k = 0; k < c->nlevels; k++)
		{
			labels[i][k] = tok ? tok : "";
			tok = strtok_r(NULL, ".", &save);
		}
	}
	build_domains(c, labels);
}

/*
 * Teams, and the ids of las teams in st->las_teams. A team's order matters
 * to rounds only; admission (!queue) also runs on a 0.1 catalog before its
 * update, which has no teams.team_order.
 */
static void
load_teams(GsState *st, GsCluster *c, bool queue)
{
	int			i;

	if (queue)
		run("SELECT id, weight::pg_catalog.float8, name,"
			"       COALESCE(team_order, pg_catalog.current_setting('gangsched.team_order')) OPERATOR(pg_catalog.=) 'las',"
			"       closed_at IS NOT NULL, closed_reason, parent_id"
			"  FROM gangsched.teams ORDER BY id", SPI_OK_SELECT);
	else
		run("SELECT t.id, t.weight::pg_catalog.float8, t.name, false, false, NULL::pg_catalog.text,"
			"       (pg_catalog.to_jsonb(t.*) OPERATOR(pg_catalog.->>) 'parent_id')::pg_catalog.int4"
			"  FROM gangsched.teams t ORDER BY t.id",
			SPI_OK_SELECT);
	c->nteams = (int) SPI_processed;
	c->teams = palloc0(sizeof(GsTeam) * Max(c->nteams, 1));
	for (i = 0; i < c->nteams; i++)
	{
		c->teams[i].id = col_int(i, 1, 0);
		c->teams[i].weight = col_float(i, 2, 1);
		c->teams[i].name = col_text(i, 3);
		c->teams[i].las = col_bool(i, 4);
		c->teams[i].closed = col_bool(i, 5);
		c->teams[i].closed_reason = c->teams[i].closed ? col_text(i, 6) : NULL;
		c->teams[i].parent = col_int(i, 7, -1);	/* an id until build_tree() */
		if (c->teams[i].las)
		{
			if (st->las_teams == NULL)
				initStringInfo(st->las_teams = palloc(sizeof(StringInfoData)));
			appendStringInfo(st->las_teams, "%s%d", st->las_teams->len ? "," : "", c->teams[i].id);
		}
	}
}

/*
 * Team trees: parent ids to indexes, depths, children and roots (both by
 * id). A parent that is unknown, or a cycle (set_team_parent refuses one),
 * makes a team top-level. c->tree is set when some team has a parent: the
 * flat case keeps every rule of a cluster without trees.
 */
static void
build_tree(GsCluster *c, const IdIndex *teams)
{
	int			i,
				k;

	c->tree = false;
	for (i = 0; i < c->nteams; i++)
	{
		int32_t		pid = c->teams[i].parent;

		c->teams[i].parent = (pid >= 0 && pid <= teams->max) ? teams->at[pid] : -1;
		if (c->teams[i].parent == i)
			c->teams[i].parent = -1;
		if (c->teams[i].parent >= 0)
			c->tree = true;
	}
	for (i = 0; i < c->nteams; i++)
	{
		int			a = c->teams[i].parent,
					d = 0;

		while (a >= 0 && d <= c->nteams)
		{
			a = c->teams[a].parent;
			d++;
		}
		if (d > c->nteams)
			c->teams[i].parent = -1;	/* a cycle */
	}
	c->roots = palloc(sizeof(int32_t) * Max(c->nteams, 1));
	c->nroots = 0;
	for (i = 0; i < c->nteams; i++)
	{
		int			a = c->teams[i].parent;

		c->teams[i].depth = 0;
		for (; a >= 0; a = c->teams[a].parent)
			c->teams[i].depth++;
		if (c->teams[i].parent >= 0)
			c->teams[c->teams[i].parent].nchildren++;
		else
			c->roots[c->nroots++] = i;
	}
	for (i = 0; i < c->nteams; i++)
	{
		c->teams[i].children = palloc(sizeof(int32_t) * Max(c->teams[i].nchildren, 1));
		c->teams[i].nchildren = 0;
	}
	for (i = 0; i < c->nteams; i++)
		if ((k = c->teams[i].parent) >= 0)
			c->teams[k].children[c->teams[k].nchildren++] = i;
}

/*
 * The effective quotas (sql/src/62_quotas.sql): NULL cpus / mem_gb there
 * are already proportional amounts; a NULL left is not governed (-1).
 * Without a quota row a team has no nominal GPUs in the pool.
 */
static void
load_quotas(GsCluster *c, const IdIndex *teams)
{
	int			i,
				k;

	c->quotas = palloc0(sizeof(GsQuota) * Max(c->nteams * c->npools, 1));
	for (i = 0; i < c->nteams * c->npools; i++)
		for (k = 0; k < GS_NRES; k++)
		{
			c->quotas[i].nominal[k] = (k == GS_GPU) ? 0 : -1;
			c->quotas[i].borrow[k] = -1;
			c->quotas[i].lend[k] = -1;
		}
	run("SELECT q.team_id, q.pool_id,"
		"       q.gpus::pg_catalog.float8, q.cpus::pg_catalog.float8,"
		"       q.mem_gb::pg_catalog.float8, q.net_gbps::pg_catalog.float8,"
		"       q.borrow_gpus::pg_catalog.float8, q.borrow_cpus::pg_catalog.float8,"
		"       q.borrow_mem_gb::pg_catalog.float8, q.borrow_net_gbps::pg_catalog.float8,"
		"       q.lend_gpus::pg_catalog.float8, q.lend_cpus::pg_catalog.float8,"
		"       q.lend_mem_gb::pg_catalog.float8, q.lend_net_gbps::pg_catalog.float8"
		"  FROM gangsched._effective_quotas q", SPI_OK_SELECT);
	for (i = 0; i < (int) SPI_processed; i++)
	{
		int			ti = id_lookup(teams, col_int(i, 1, 0));
		int			pi = pool_index(c, col_int(i, 2, 0), -1);
		GsQuota    *q;

		if (ti < 0 || pi < 0)
			continue;
		q = &c->quotas[ti * c->npools + pi];
		q->has = true;
		for (k = 0; k < GS_NRES; k++)
		{
			q->nominal[k] = col_float(i, 3 + k, -1);
			q->borrow[k] = col_float(i, 7 + k, -1);
			q->lend[k] = col_float(i, 11 + k, -1);
		}
	}
}

/* Capacity of up nodes, per pool and in all. */
static void
sum_capacity(GsCluster *c)
{
	int			i,
				k;

	for (i = 0; i < c->nnodes; i++)
	{
		GsNode	   *n = &c->nodes[i];
		double		cap[GS_NRES] = {n->ngpus, n->cap_cpus, n->cap_mem, n->cap_net};

		if (n->state != GS_NODE_UP)
			continue;
		for (k = 0; k < GS_NRES; k++)
		{
			c->pools[n->pool].capacity[k] += cap[k];
			c->capacity[k] += cap[k];
		}
	}
}

/* ---- what is held now: usage, leaving victims, held slots ------------- */

/*
 * Add sign × the amounts of columns 3..6 of the result's row i to the use of
 * the node's pool, and of team ti (>= 0) over all pools and in the pool.
 */
static void
add_use(GsCluster *c, int ni, int ti, int i, double sign)
{
	int			k;

	for (k = 0; k < GS_NRES; k++)
	{
		double		amt = col_float(i, 3 + k, 0);

		c->pools[c->nodes[ni].pool].used[k] += sign * amt;
		if (ti >= 0)
		{
			c->teams[ti].used[k] += sign * amt;
			c->quotas[ti * c->npools + c->nodes[ni].pool].used[k] += sign * amt;
		}
	}
}

/*
 * Resources held now, per node and team: current allocations and the
 * capacity held for nominated jobs. They leave the node's free host
 * resources and count in the team's and pool's use.
 */
static void
load_usage(GsCluster *c, const IdIndex *nodes, const IdIndex *teams)
{
	int			i;

	run("SELECT x.node_id, x.team_id,"
		"       pg_catalog.sum(x.gpus)::pg_catalog.float8, pg_catalog.sum(x.cpus)::pg_catalog.float8,"
		"       pg_catalog.sum(x.mem_gb)::pg_catalog.float8, pg_catalog.sum(x.net_gbps)::pg_catalog.float8"
		"  FROM (SELECT a.node_id, a.team_id, a.gpus, a.cpus, a.mem_gb, a.net_gbps"
		"          FROM gangsched.allocations a WHERE pg_catalog.upper_inf(a.during)"
		"        UNION ALL"
		"        SELECT h.node_id, g.team_id, g.gpus, h.cpus, h.mem_gb, h.net_gbps"
		"          FROM gangsched.holds h"
		"          JOIN gangsched.gangs g ON g.id OPERATOR(pg_catalog.=) h.job) x"
		" GROUP BY x.node_id, x.team_id", SPI_OK_SELECT);
	for (i = 0; i < (int) SPI_processed; i++)
	{
		int			ni = id_lookup(nodes, col_int(i, 1, 0));
		int			ti = id_lookup(teams, col_int(i, 2, 0));

		if (ni < 0)
			continue;
		c->nodes[ni].free_cpus -= col_float(i, 3 + GS_CPU, 0);
		c->nodes[ni].free_mem -= col_float(i, 3 + GS_MEM, 0);
		c->nodes[ni].free_net -= col_float(i, 3 + GS_NET, 0);
		add_use(c, ni, ti, i, 1);
	}
}

/*
 * The open allocations that are leaving, with the job they leave for
 * (pfor): those of victims told to stop (preempting, not for a time limit)
 * and the released workers of shrinking elastic gangs (docs/elastic.md).
 */
#define LEAVING_ALLOCS \
	"SELECT g.preempted_for AS pfor, a.node_id, a.team_id, a.gpus, a.cpus, a.mem_gb, a.net_gbps" \
	"  FROM gangsched.gangs g" \
	"  JOIN gangsched.allocations a" \
	"    ON a.job OPERATOR(pg_catalog.=) g.id AND pg_catalog.upper_inf(a.during)" \
	" WHERE g.state OPERATOR(pg_catalog.=) 'preempting' AND g.preempted_for IS NOT NULL" \
	" UNION ALL" \
	" SELECT g.shrink_for, a.node_id, a.team_id, a.gpus, a.cpus, a.mem_gb, a.net_gbps" \
	"  FROM gangsched.gangs g" \
	"  JOIN gangsched.allocations a" \
	"    ON a.job OPERATOR(pg_catalog.=) g.id AND pg_catalog.upper_inf(a.during)" \
	"   AND a.worker OPERATOR(pg_catalog.>=) g.shrink_to" \
	" WHERE g.shrink_for IS NOT NULL"

/*
 * Victims told to stop are leaving: their capacity is held for their
 * preemptors already (holds, counted above), so they no longer count in
 * their team's, quota's or pool's use. Every round thus sees the same
 * shares whether a victim has released yet or not (docs/preemption.md).
 * Their nodes' free host resources still count them until they go. Jobs
 * stopped for their time limit (no preemptor, 72_time.sql) still count.
 * A shrinking gang's released workers leave the same way (their capacity
 * is held for its preemptor too).
 */
static void
load_leaving(GsCluster *c, const IdIndex *nodes, const IdIndex *teams)
{
	int			i;

	run("SELECT a.node_id, a.team_id,"
		"       pg_catalog.sum(a.gpus)::pg_catalog.float8, pg_catalog.sum(a.cpus)::pg_catalog.float8,"
		"       pg_catalog.sum(a.mem_gb)::pg_catalog.float8, pg_catalog.sum(a.net_gbps)::pg_catalog.float8"
		"  FROM (" LEAVING_ALLOCS ") a"
		" GROUP BY a.node_id, a.team_id", SPI_OK_SELECT);
	for (i = 0; i < (int) SPI_processed; i++)
	{
		int			ni = id_lookup(nodes, col_int(i, 1, 0));
		int			ti = id_lookup(teams, col_int(i, 2, 0));

		if (ni < 0)
			continue;
		add_use(c, ni, ti, i, -1);
	}
}

/*
 * Capacity held for a nominated job replaces its victims' on the same
 * node: the host resources both hold there count once (the larger).
 */
static void
load_hold_overlap(GsCluster *c, const IdIndex *nodes)
{
	int			i;

	run("SELECT h.node_id,"
		"       pg_catalog.sum(LEAST(h.cpus, v.cpus))::pg_catalog.float8,"
		"       pg_catalog.sum(LEAST(h.mem, v.mem))::pg_catalog.float8,"
		"       pg_catalog.sum(LEAST(h.net, v.net))::pg_catalog.float8"
		"  FROM (SELECT job, node_id, pg_catalog.sum(cpus) AS cpus, pg_catalog.sum(mem_gb) AS mem,"
		"               pg_catalog.sum(net_gbps) AS net"
		"          FROM gangsched.holds GROUP BY job, node_id) h"
		"  JOIN (SELECT a.pfor AS job, a.node_id, pg_catalog.sum(a.cpus) AS cpus,"
		"               pg_catalog.sum(a.mem_gb) AS mem, pg_catalog.sum(a.net_gbps) AS net"
		"          FROM (" LEAVING_ALLOCS ") a"
		"         GROUP BY 1, a.node_id) v"
		"    ON v.job OPERATOR(pg_catalog.=) h.job AND v.node_id OPERATOR(pg_catalog.=) h.node_id"
		" GROUP BY h.node_id", SPI_OK_SELECT);
	for (i = 0; i < (int) SPI_processed; i++)
	{
		int			ni = id_lookup(nodes, col_int(i, 1, 0));

		if (ni < 0)
			continue;
		c->nodes[ni].free_cpus += col_float(i, 2, 0);
		c->nodes[ni].free_mem += col_float(i, 3, 0);
		c->nodes[ni].free_net += col_float(i, 4, 0);
	}
}

/* Device slices in use, and capacity held for nominated jobs. */
static void
load_slots(GsCluster *c, const IdIndex *nodes)
{
	int			i;

	run("SELECT h.node_id, h.slot FROM gangsched.held_slots h"
		" UNION ALL"
		" SELECT h.node_id, d OPERATOR(pg_catalog.*) 8 OPERATOR(pg_catalog.+) s"
		"   FROM gangsched.holds h, pg_catalog.unnest(h.devices) d,"
		"        pg_catalog.generate_series(h.first_slice,"
		"                                   h.first_slice OPERATOR(pg_catalog.+) h.slices OPERATOR(pg_catalog.-) 1) s",
		SPI_OK_SELECT);
	for (i = 0; i < (int) SPI_processed; i++)
	{
		int			ni = id_lookup(nodes, col_int(i, 1, 0));
		int			slot = col_int(i, 2, 0);
		int			dev = slot / GS_SLOTS_PER_DEVICE;

		if (ni >= 0 && dev >= 0 && dev < c->nodes[ni].ngpus)
			c->nodes[ni].used[dev] |= (uint8_t) (1 << (slot % GS_SLOTS_PER_DEVICE));
	}
	for (i = 0; i < c->nnodes; i++)
		gs_node_recount(&c->nodes[i]);
}

/* ---- the queue: pending jobs, their datasets, reclaims ---------------- */

/*
 * Pending jobs, in no particular order (the order step sorts), streamed
 * straight from the executor into GsJob structs: no tuplestore copy.
 * The stored reason is read as its hash (compared with the new one's).
 */
static void load_growable(GsState *st, GsCluster *c, const IdIndex *teams, int *dcap);

/*
 * A receiver that streams job rows into st->jobs (room for cap to start
 * with); grow: the rows are running elastic gangs (load_growable).
 */
static void
job_receiver_init(JobReceiver *r, GsState *st, GsCluster *c, const IdIndex *teams, int *dcap,
				  int cap, bool grow)
{
	memset(r, 0, sizeof(*r));
	r->pub.receiveSlot = job_receive;
	r->pub.rStartup = job_startup;
	r->pub.rShutdown = job_shutdown;
	r->pub.rDestroy = job_destroy;
	r->pub.mydest = DestNone;
	r->st = st;
	r->c = c;
	r->dcap = dcap;
	r->cxt = CurrentMemoryContext;
	r->teams = teams;
	r->cap = cap;
	r->grow = grow;
	st->jobs = palloc0(sizeof(GsJob) * cap);
}

static void
load_jobs(GsState *st, GsCluster *c, const IdIndex *teams)
{
	JobReceiver r;
	StringInfoData sql;
	int			dcap = 0;

	job_receiver_init(&r, st, c, teams, &dcap, 1024, false);
	initStringInfo(&sql);
	appendStringInfoString(&sql,
		"SELECT g.id, g.team_id, g.priority, g.queue_pos, g.workers, g.f_gpus, g.f_cpus,"
		"       g.f_mem_gb, g.f_net_gbps, g.gpu_model, g.f_gpu_mem_gb, g.pool_id,"
		"       g.preemptible, g.group_size, g.group_span, g.stages, g.stage_span, g.span,"
		"       g.dataset,"
		"       CASE WHEN g.locality OPERATOR(pg_catalog.=) 'required' THEN 2"
		"            WHEN g.locality OPERATOR(pg_catalog.=) 'preferred' THEN 1 ELSE 0 END,"
		"       pg_catalog.hashtext(g.reason), g.queued_at,"
		"       EXTRACT(epoch FROM g.queue_timeout)::pg_catalog.float8,"
		"       pg_catalog.strpos(g.reason, 'preemption refused: ') OPERATOR(pg_catalog.>) 0,"
		"       pg_catalog.date_part('epoch', g.time_limit),"
		"       CASE WHEN g.time_limit IS NOT NULL THEN pg_catalog.date_part('epoch', g.grace) END,"
		"       g.min_replicas OPERATOR(pg_catalog.*) g.group_size OPERATOR(pg_catalog.*) g.stages,"
		"       g.reservation_id,"
	/*
	 * Anti-thrash (docs/preemption.md): for a job whose last preemption was
	 * a reclaim, the team that reclaimed (its preemptor's). One probe of
	 * events_preempting_idx per pending job that was ever preempted, in the
	 * queue's own scan (a query of its own read every pending row again).
	 */
		"       CASE WHEN g.preemptions OPERATOR(pg_catalog.>) 0 THEN"
		"         (SELECT p.team_id"
		"            FROM (SELECT e.detail, e.reason FROM gangsched.events e"
		"                   WHERE e.job OPERATOR(pg_catalog.=) g.id AND e.kind OPERATOR(pg_catalog.=) 'preempting'"
		"                   ORDER BY e.id DESC LIMIT 1) e"
		"            JOIN gangsched.gangs p"
		"              ON p.id OPERATOR(pg_catalog.=) (e.detail OPERATOR(pg_catalog.->>) 'for')::pg_catalog.int8"
		"           WHERE pg_catalog.strpos(e.reason, '(reclaim)') OPERATOR(pg_catalog.>) 0) END");
	/*
	 * The attained service of las teams' jobs that have held capacity
	 * before (requeued: only they have allocations), in the same query:
	 * one probe of the job's allocations each, closed ones only.
	 */
	if (st->las_teams != NULL)
		appendStringInfo(&sql,
						 ", CASE WHEN g.requeues OPERATOR(pg_catalog.>) 0"
						 "        AND g.team_id OPERATOR(pg_catalog.=) ANY ('{%s}'::pg_catalog.int4[])"
						 "   THEN (SELECT pg_catalog.sum(a.gpus::pg_catalog.float8 OPERATOR(pg_catalog.*)"
						 "                EXTRACT(epoch FROM pg_catalog.upper(a.during) OPERATOR(pg_catalog.-)"
						 "                                   pg_catalog.lower(a.during))::pg_catalog.float8)"
						 "           FROM gangsched.allocations a"
						 "          WHERE a.job OPERATOR(pg_catalog.=) g.id"
						 "            AND NOT pg_catalog.upper_inf(a.during)) END",
						 st->las_teams->data);
	/*
	 * In job order: the round writes its placements, nominations and
	 * victims in the order of this array, and the order of their events and
	 * of the rows they add must not follow the table's physical order
	 * (which autovacuum and HOT pruning change) or the plan.
	 */
	appendStringInfoString(&sql, "  FROM gangsched.gangs g WHERE g.state OPERATOR(pg_catalog.=) 'pending'"
						   "   AND g.waiting_for IS NULL"
						   " ORDER BY g.id");
	/* the text changes only with the set of las teams: its plan is kept */
	(void) gs_spi_exec("load", sql.data, 0, NULL, NULL, (DestReceiver *) &r, true, SPI_OK_SELECT);
	MemoryContextSwitchTo(r.cxt);
	load_growable(st, c, teams, &dcap);
}

/*
 * Elastic gangs holding capacity below their maximum, which a round may
 * grow (docs/elastic.md), as GsJobs in st->grow: the pending jobs' columns,
 * then max_workers, the pool of its nodes, its borrowed flag and, for a
 * job with a span (the whole gang in one domain), a node it runs on, so
 * that its new replicas stay in that node's domain of the span's depth
 * (span_in). A partial
 * index keeps this query free when no elastic job holds capacity.
 */
static void
load_growable(GsState *st, GsCluster *c, const IdIndex *teams, int *dcap)
{
	JobReceiver r;
	GsState		tmp;
	IdIndex		nodes;
	bool		have_nodes = false;
	int			i;

	memset(&tmp, 0, sizeof(tmp));
	tmp.cluster = c;
	job_receiver_init(&r, &tmp, c, teams, dcap, 16, true);
	(void) gs_spi_exec("load growable",
		"SELECT g.id, g.team_id, g.priority, g.queue_pos, g.workers, g.f_gpus, g.f_cpus,"
		"       g.f_mem_gb, g.f_net_gbps, g.gpu_model, g.f_gpu_mem_gb, g.pool_id,"
		"       g.preemptible, g.group_size, g.group_span, g.stages, g.stage_span, g.span,"
		"       g.dataset,"
		"       CASE WHEN g.locality OPERATOR(pg_catalog.=) 'required' THEN 2"
		"            WHEN g.locality OPERATOR(pg_catalog.=) 'preferred' THEN 1 ELSE 0 END,"
		"       NULL::pg_catalog.int4, g.queued_at, NULL::pg_catalog.float8, false,"
		"       NULL::pg_catalog.float8, NULL::pg_catalog.float8,"
		"       g.min_replicas OPERATOR(pg_catalog.*) g.group_size OPERATOR(pg_catalog.*) g.stages,"
		"       g.reservation_id, NULL::pg_catalog.int4, g.max_workers,"
		"       (SELECT n.pool_id FROM gangsched.allocations a JOIN gangsched.nodes n"
		"            ON n.id OPERATOR(pg_catalog.=) a.node_id"
		"         WHERE a.job OPERATOR(pg_catalog.=) g.id AND pg_catalog.upper_inf(a.during) LIMIT 1),"
		"       g.borrowed,"
		"       CASE WHEN g.span IS NOT NULL THEN"
		"       (SELECT a.node_id FROM gangsched.allocations a"
		"         WHERE a.job OPERATOR(pg_catalog.=) g.id AND pg_catalog.upper_inf(a.during)"
		"         ORDER BY a.worker LIMIT 1) END"
		"  FROM gangsched.gangs g"
		" WHERE g.min_replicas IS NOT NULL"
		"   AND g.state OPERATOR(pg_catalog.=) ANY ('{placed,running}'::pg_catalog.text[])"
		"   AND g.workers OPERATOR(pg_catalog.<) g.max_workers"
		"   AND g.shrink_to IS NULL"
		" ORDER BY g.id",
		0, NULL, NULL, (DestReceiver *) &r, true, SPI_OK_SELECT);
	MemoryContextSwitchTo(r.cxt);
	st->grow = tmp.jobs;
	st->ngrow = tmp.njobs;
	/* a gang with a span grows inside the domain of that depth that holds it */
	for (i = 0; i < st->ngrow; i++)
	{
		GsJob	   *g = &st->grow[i];
		int			n;

		if (g->span_depth < 0)
		{
			g->span_in = 0;
			continue;
		}
		if (!have_nodes)
		{
			nodes = node_index(c);
			have_nodes = true;
		}
		n = g->span_in != 0 ? id_lookup(&nodes, g->span_in) : -1;
		if (n < 0)
		{
			g->span_in = 0;
			g->max_workers = g->workers;	/* where it runs is unknown: no grow */
			continue;
		}
		g->span_in = c->nodes[n].dom[g->span_depth] + 1;
	}
}

/* Which nodes cache the datasets pending jobs name. */
static void
load_datasets(GsCluster *c, const IdIndex *nodes)
{
	int			i,
				k;

	c->dataset_nodes = palloc0(sizeof(uint8_t *) * Max(c->ndatasets, 1));
	for (i = 0; i < c->ndatasets; i++)
		c->dataset_nodes[i] = palloc0(Max(c->nnodes, 1));
	if (c->ndatasets == 0)
		return;
	run("SELECT d.dataset, d.node_id FROM gangsched.datasets d"
		" WHERE d.dataset OPERATOR(pg_catalog.=) ANY"
		"       (SELECT g.dataset FROM gangsched.gangs g"
		"         WHERE g.state OPERATOR(pg_catalog.=) 'pending' AND g.dataset IS NOT NULL)", SPI_OK_SELECT);
	for (i = 0; i < (int) SPI_processed; i++)
	{
		char	   *ds = col_text(i, 1);
		int			ni = id_lookup(nodes, col_int(i, 2, 0));

		for (k = 0; k < c->ndatasets; k++)
			if (strcmp(c->datasets[k], ds) == 0 && ni >= 0)
				c->dataset_nodes[k][ni] = 1;
	}
}

/*
 * Reservations and maintenance windows that have not ended (docs/time.md),
 * at most GS_MAX_BOOKINGS, earliest first; their nodes get their bits. Run
 * only when some booking is not over (the round's probe).
 */
static void
load_bookings(GsState *st, GsCluster *c, const IdIndex *nodes, const IdIndex *teams)
{
	int			i,
				b = -1;
	int32_t		last = -1;

	run("SELECT b.id, b.team_id, b.starts, b.ends, b.name, t.name, x.node_id"
		"  FROM (SELECT * FROM gangsched.bookings y"
		"         WHERE NOT y.ended AND y.ends OPERATOR(pg_catalog.>) gangsched.now()"
		"         ORDER BY y.starts, y.id LIMIT " CppAsString2(GS_MAX_BOOKINGS) ") b"
		"  LEFT JOIN gangsched.teams t ON t.id OPERATOR(pg_catalog.=) b.team_id"
		" CROSS JOIN LATERAL pg_catalog.unnest(b.node_ids) x(node_id)"
		" ORDER BY b.starts, b.id", SPI_OK_SELECT);
	st->bookings = palloc0(sizeof(GsBooking) * GS_MAX_BOOKINGS);
	st->nbookings = 0;
	for (i = 0; i < (int) SPI_processed; i++)
	{
		bool		isnull;
		int32_t		id = col_int(i, 1, 0);
		int			ni;

		if (id != last)
		{
			GsBooking  *k;

			if (st->nbookings == GS_MAX_BOOKINGS)
				break;
			b = st->nbookings++;
			k = &st->bookings[b];
			k->id = id;
			k->maintenance = col_null(i, 2);
			k->tix = k->maintenance ? -1 : id_lookup(teams, col_int(i, 2, 0));
			k->starts = DatumGetTimestampTz(col(i, 3, &isnull));
			k->ends = DatumGetTimestampTz(col(i, 4, &isnull));
			k->name = col_text(i, 5);
			k->team = k->maintenance ? NULL : col_text(i, 6);
			last = id;
		}
		ni = id_lookup(nodes, col_int(i, 7, -1));
		if (ni >= 0)
		{
			c->nodes[ni].bookings |= UINT64_C(1) << b;
			st->bookings[b].nnodes++;
		}
	}
}

GsState *
gs_load_state(void)
{
	return gs_load_state_ex(true);
}

/*
 * The inventory (levels, pools, nodes, teams, quotas, capacity); with
 * queue, also what is held now and the pending jobs with what they ask for.
 */
GsState *
gs_load_state_ex(bool queue)
{
	GsState    *st = palloc0(sizeof(GsState));
	GsCluster  *c = palloc0(sizeof(GsCluster));
	IdIndex		nodes,
				teams;

	st->cluster = c;
	load_levels(c);
	load_pools(c);
	load_nodes(c);
	nodes = node_index(c);
	load_teams(st, c, queue);
	teams = team_index(c);
	build_tree(c, &teams);
	load_quotas(c, &teams);
	sum_capacity(c);
	if (!queue)
		return st;

	load_usage(c, &nodes, &teams);
	load_leaving(c, &nodes, &teams);
	gs_tree_rollup(c);
	load_hold_overlap(c, &nodes);
	load_slots(c, &nodes);
	load_jobs(st, c, &teams);
	load_datasets(c, &nodes);
	/* one statement: whether limits are held, and whether any booking is not over */
	run("SELECT EXISTS (SELECT FROM gangsched.gangs g"
		"                WHERE g.state OPERATOR(pg_catalog.=) ANY ('{placed,running}'::pg_catalog.text[])"
		"                  AND g.time_limit IS NOT NULL),"
		"       EXISTS (SELECT FROM gangsched.bookings b WHERE NOT b.ended)", SPI_OK_SELECT);
	st->limits_held = col_bool(0, 1);
	if (col_bool(0, 2))
		load_bookings(st, c, &nodes, &teams);
	return st;
}

/* ---- the jobs holding capacity, for preemption ------------------------ */

typedef struct RunningEntry
{
	int64		job;			/* the key */
	GsRunning  *r;
} RunningEntry;

/*
 * The jobs placed or running (one row each), into st->running in job order
 * (victim searches then read them in an order the table's physical layout
 * does not change); byjob finds them by id.
 */
static void
load_running_jobs(GsState *st, const IdIndex *teams, HTAB **byjob)
{
	GsCluster  *c = st->cluster;
	StringInfoData sql;
	int			i,
				k;

	initStringInfo(&sql);
	appendStringInfoString(&sql,
		"SELECT g.id, g.team_id, g.priority, g.preemptible, g.borrowed,"
		"       COALESCE(g.started_at, g.placed_at), COALESCE(g.last_checkpoint_at, g.started_at, g.placed_at),"
		"       g.f_gpus OPERATOR(pg_catalog.*) g.workers,"
		"       g.f_gpus OPERATOR(pg_catalog.*) g.workers, g.f_cpus OPERATOR(pg_catalog.*) g.workers,"
		"       g.f_mem_gb OPERATOR(pg_catalog.*) g.workers, g.f_net_gbps OPERATOR(pg_catalog.*) g.workers,"
		"       g.workers, pg_catalog.date_part('epoch', g.time_limit),"
		"       CASE WHEN g.time_limit IS NOT NULL THEN pg_catalog.date_part('epoch', g.grace) END, g.placed_at,"
		"       g.min_replicas OPERATOR(pg_catalog.*) g.group_size OPERATOR(pg_catalog.*) g.stages,"
		"       g.group_size OPERATOR(pg_catalog.*) g.stages, g.state OPERATOR(pg_catalog.=) 'running',"
		"       g.shrink_to IS NOT NULL");
	/* las teams' jobs: GPU-seconds held so far, the open allocations up to the round's clock */
	if (st->las_teams != NULL)
		appendStringInfo(&sql,
						 ", CASE WHEN g.team_id OPERATOR(pg_catalog.=) ANY ('{%s}'::pg_catalog.int4[])"
						 "   THEN (SELECT pg_catalog.sum(a.gpus::pg_catalog.float8 OPERATOR(pg_catalog.*)"
						 "                EXTRACT(epoch FROM COALESCE(pg_catalog.upper(a.during), pg_catalog.to_timestamp(%.6f))"
						 "                                   OPERATOR(pg_catalog.-) pg_catalog.lower(a.during))::pg_catalog.float8)"
						 "           FROM gangsched.allocations a WHERE a.job OPERATOR(pg_catalog.=) g.id) END",
						 st->las_teams->data,
						 (double) st->now / USECS_PER_SEC +
						 (double) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY);
	appendStringInfoString(&sql,
		"  FROM gangsched.gangs g"
		" WHERE g.state OPERATOR(pg_catalog.=) ANY ('{placed,running}'::pg_catalog.text[])"
		" ORDER BY g.id");
	/* with las teams the text holds the round's clock: planned each time */
	(void) gs_spi_exec("load", sql.data, 0, NULL, NULL, NULL, st->las_teams == NULL, SPI_OK_SELECT);
	st->nrunning = (int) SPI_processed;
	st->running = palloc0(sizeof(GsRunning) * Max(st->nrunning, 1));
	*byjob = job_hash("gangsched running jobs", st->nrunning, sizeof(RunningEntry));
	for (i = 0; i < st->nrunning; i++)
	{
		GsRunning  *r = &st->running[i];
		bool		found;
		RunningEntry *e;
		bool		isnull;

		r->id = DatumGetInt64(col(i, 1, &isnull));
		r->tix = id_lookup(teams, col_int(i, 2, 0));
		r->priority = col_int(i, 3, 0);
		r->preemptible = col_bool(i, 4);
		r->borrowed = col_bool(i, 5);
		r->since = DatumGetTimestampTz(col(i, 6, &isnull));
		r->checkpoint = DatumGetTimestampTz(col(i, 7, &isnull));
		r->gpus_total = col_float(i, 8, 0);
		for (k = 0; k < GS_NRES; k++)
			r->demand[k] = col_float(i, 9 + k, 0);
		r->nalloc_cap = Max(col_int(i, 13, 1), 1);
		r->ends = 0;
		if (!col_null(i, 14) && !col_null(i, 16))
			r->ends = DatumGetTimestampTz(col(i, 16, &isnull)) +
				(int64) ((col_float(i, 14, 0) + gs_grace_s(col_null(i, 15), col_float(i, 15, 0))) * USECS_PER_SEC);
		r->las_queue = -1;
		if (st->las_teams != NULL && r->tix >= 0 && c->teams[r->tix].las)
		{
			r->attained = Max(col_float(i, 21, 0), 0);
			r->las_queue = (int16_t) gs_las_queue_of(r->attained);
		}
		r->workers = col_int(i, 13, 1);
		r->min_workers = col_null(i, 17) ? 0 : col_int(i, 17, 0);
		r->unit = Max(col_int(i, 18, 1), 1);
		r->running = col_bool(i, 19);
		r->shrinking = col_bool(i, 20);
		r->allocs = palloc0(sizeof(GsAlloc) * r->nalloc_cap);
		r->pool = -1;
		e = hash_search(*byjob, &r->id, HASH_ENTER, &found);
		e->r = r;
	}
}

/* Allocation order within a gang: node, then devices, then slices. */
static bool
alloc_before(const GsAlloc *x, const GsAlloc *y)
{
	if (x->node != y->node)
		return x->node < y->node;
	if (x->devmask != y->devmask)
		return x->devmask < y->devmask;
	if (x->first_slice != y->first_slice)
		return x->first_slice < y->first_slice;
	return x->worker < y->worker;	/* CPU-only workers on one node */
}

/*
 * Every current allocation, matched to the jobs above in C: no join for
 * the planner to get wrong when statistics lag behind a big round.
 */
static void
load_running_allocs(GsCluster *c, const IdIndex *nodes, HTAB *byjob)
{
	int			i;

	/* the array last: the fixed-width columns before it are read at cached offsets */
	run("SELECT a.job, a.node_id, a.first_slice, a.slices,"
		"       a.cpus::pg_catalog.float8, a.mem_gb::pg_catalog.float8, a.net_gbps::pg_catalog.float8, a.worker,"
		"       a.devices"
		"  FROM gangsched.allocations a WHERE pg_catalog.upper_inf(a.during)", SPI_OK_SELECT);
	for (i = 0; i < (int) SPI_processed; i++)
	{
		bool		isnull,
					found;
		int64		jid = DatumGetInt64(col(i, 1, &isnull));
		RunningEntry *e = hash_search(byjob, &jid, HASH_FIND, &found);
		GsRunning  *r;
		GsAlloc    *a;
		ArrayType  *arr;
		int32	   *devs;
		int			nd,
					d;

		if (!found)
			continue;
		r = e->r;
		if (r->nalloc >= r->nalloc_cap)
			continue;			/* more allocations than workers: check_invariants reports it */
		a = &r->allocs[r->nalloc++];
		a->node = id_lookup(nodes, col_int(i, 2, 0));
		if (a->node >= 0)
			r->pool = c->nodes[a->node].pool;
		arr = DatumGetArrayTypeP(col(i, 9, &isnull));
		nd = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
		devs = (int32 *) ARR_DATA_PTR(arr);
		a->devmask = 0;
		for (d = 0; d < nd; d++)
			if (devs[d] >= 0 && devs[d] < GS_MAX_GPUS)
				a->devmask |= UINT64_C(1) << devs[d];
		a->first_slice = (int16_t) col_int(i, 3, 0);
		a->nslices = (int16_t) col_int(i, 4, 0);
		a->cpus = col_float(i, 5, 0);
		a->mem = col_float(i, 6, 0);
		a->net = col_float(i, 7, 0);
		a->worker = col_int(i, 8, 0);
		/* each gang's allocations by node, then devices, however the rows came */
		for (d = r->nalloc - 1; d > 0 && alloc_before(&r->allocs[d], &r->allocs[d - 1]); d--)
		{
			GsAlloc		t = r->allocs[d];

			r->allocs[d] = r->allocs[d - 1];
			r->allocs[d - 1] = t;
		}
	}
}

/*
 * Jobs that hold capacity now (placed or running) with their allocations:
 * the candidates for preemption. Two set-based queries, run only in a round
 * where some job could not be placed.
 */
void
gs_load_running(GsState *st)
{
	IdIndex		nodes,
				teams;
	HTAB	   *byjob;

	if (st->running_loaded)
		return;
	st->running_loaded = true;
	nodes = node_index(st->cluster);
	teams = team_index(st->cluster);
	load_running_jobs(st, &teams, &byjob);
	load_running_allocs(st->cluster, &nodes, byjob);
	/* elastic gangs above their minimum: their replicas may be victims alone */
	gs_split_elastic(st);
}

/* ---- team_shares.fair_share: H-DRF over the tree (SQL) ------------------ */

/*
 * gangsched._fair_shares(): every team's H-DRF allocation (its subtree's,
 * per resource) and its dominant share of the cluster, by the rounds' own
 * code (gs_tree_fair_shares, src/fair.c) over the teams, tree, weights and
 * quotas the loader reads, the pools' up capacity, and each team's demand as
 * the rounds count it: what it holds (open allocations except those of
 * victims told to stop for a preemptor, and capacity held for its nominated
 * jobs) plus its pending jobs outside a dependency wait. A round does not
 * count pending jobs whose queue timeout passed; the view does until they
 * expire. Inner teams' own demand is not counted (live jobs are only in
 * leaves, invariant 9). With several pools the same demand per pool goes
 * with it (quotas count per pool, fair.h), as a round's fair_level passes.
 */
PG_FUNCTION_INFO_V1(gs_fair_shares_sql);
Datum
gs_fair_shares_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GsState    *st = palloc0(sizeof(GsState));
	GsCluster  *c = palloc0(sizeof(GsCluster));
	IdIndex		teams;
	double	   *demand,
			   *pdemand = NULL,
			   *alloc;
	int			save_nestlevel,
				i,
				k;

	InitMaterializedSRF(fcinfo, 0);
	save_nestlevel = gs_fix_search_path();
	SPI_connect();
	st->cluster = c;
	load_pools(c);
	run("SELECT n.pool_id, pg_catalog.sum(n.gpus)::pg_catalog.float8, pg_catalog.sum(n.cpus)::pg_catalog.float8,"
		"       pg_catalog.sum(n.mem_gb)::pg_catalog.float8, pg_catalog.sum(n.net_gbps)::pg_catalog.float8"
		"  FROM gangsched.nodes n WHERE n.state OPERATOR(pg_catalog.=) 'up' GROUP BY n.pool_id", SPI_OK_SELECT);
	for (i = 0; i < (int) SPI_processed; i++)
	{
		int			pi = pool_index(c, col_int(i, 1, 0), -1);

		for (k = 0; k < GS_NRES; k++)
		{
			double		amt = col_float(i, 2 + k, 0);

			if (pi >= 0)
				c->pools[pi].capacity[k] += amt;
			c->capacity[k] += amt;
		}
	}
	load_teams(st, c, true);
	teams = team_index(c);
	build_tree(c, &teams);
	load_quotas(c, &teams);
	demand = palloc0(sizeof(double) * GS_NRES * Max(c->nteams, 1));
	alloc = palloc0(sizeof(double) * GS_NRES * Max(c->nteams, 1));

	/*
	 * The pending jobs' demand is read from gangs_pending_demand_idx
	 * (index-only): the planner costs a scan of the gangs' wide rows below
	 * it, but deforming 20,000 of them to their last columns took 3-5 times
	 * as long. Until the end of this call (the search_path's nest level).
	 */
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	run("SELECT x.team_id, pg_catalog.sum(x.gpus), pg_catalog.sum(x.cpus), pg_catalog.sum(x.mem), pg_catalog.sum(x.net)"
		"  FROM (SELECT a.team_id, pg_catalog.sum(a.gpus)::pg_catalog.float8 AS gpus,"
		"               pg_catalog.sum(a.cpus)::pg_catalog.float8 AS cpus,"
		"               pg_catalog.sum(a.mem_gb)::pg_catalog.float8 AS mem,"
		"               pg_catalog.sum(a.net_gbps)::pg_catalog.float8 AS net"
		"          FROM gangsched.allocations a"
		"         WHERE pg_catalog.upper_inf(a.during)"
		"           AND NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id OPERATOR(pg_catalog.=) a.job"
		"                             AND g.state OPERATOR(pg_catalog.=) 'preempting' AND g.preempted_for IS NOT NULL)"
		"         GROUP BY a.team_id"
		"        UNION ALL"
		"        SELECT g.team_id, pg_catalog.sum(g.f_gpus), pg_catalog.sum(h.cpus)::pg_catalog.float8,"
		"               pg_catalog.sum(h.mem_gb)::pg_catalog.float8, pg_catalog.sum(h.net_gbps)::pg_catalog.float8"
		"          FROM gangsched.holds h JOIN gangsched.gangs g ON g.id OPERATOR(pg_catalog.=) h.job"
		"         GROUP BY g.team_id"
		"        UNION ALL"
		"        SELECT g.team_id, pg_catalog.sum(g.workers OPERATOR(pg_catalog.*) g.f_gpus),"
		"               pg_catalog.sum(g.workers OPERATOR(pg_catalog.*) g.f_cpus),"
		"               pg_catalog.sum(g.workers OPERATOR(pg_catalog.*) g.f_mem_gb),"
		"               pg_catalog.sum(g.workers OPERATOR(pg_catalog.*) g.f_net_gbps)"
		"          FROM gangsched.gangs g"
		"         WHERE g.state OPERATOR(pg_catalog.=) 'pending' AND g.waiting_for IS NULL"
		"         GROUP BY g.team_id) x"
		" GROUP BY x.team_id", SPI_OK_SELECT);
	for (i = 0; i < (int) SPI_processed; i++)
	{
		int			ti = id_lookup(&teams, col_int(i, 1, 0));

		if (ti < 0 || c->teams[ti].nchildren > 0)
			continue;
		for (k = 0; k < GS_NRES; k++)
			demand[ti * GS_NRES + k] += col_float(i, 2 + k, 0);
	}

	/*
	 * With several pools, the same demand per pool (fair.h): what each team
	 * holds in each pool, and its pending jobs in every pool they are
	 * eligible for (gs_eligible_pools, as a round counts them).
	 */
	if (c->npools > 1)
	{
		pdemand = palloc0(sizeof(double) * GS_NRES * Max(c->nteams, 1) * c->npools);
		run("SELECT a.team_id, n.pool_id, false, false, pg_catalog.sum(a.gpus)::pg_catalog.float8,"
			"       pg_catalog.sum(a.cpus)::pg_catalog.float8, pg_catalog.sum(a.mem_gb)::pg_catalog.float8,"
			"       pg_catalog.sum(a.net_gbps)::pg_catalog.float8"
			"  FROM gangsched.allocations a JOIN gangsched.nodes n ON n.id OPERATOR(pg_catalog.=) a.node_id"
			" WHERE pg_catalog.upper_inf(a.during)"
			"   AND NOT EXISTS (SELECT FROM gangsched.gangs g WHERE g.id OPERATOR(pg_catalog.=) a.job"
			"                     AND g.state OPERATOR(pg_catalog.=) 'preempting' AND g.preempted_for IS NOT NULL)"
			" GROUP BY a.team_id, n.pool_id"
			" UNION ALL"
			" SELECT g.team_id, n.pool_id, false, false, pg_catalog.sum(g.f_gpus), pg_catalog.sum(h.cpus)::pg_catalog.float8,"
			"        pg_catalog.sum(h.mem_gb)::pg_catalog.float8, pg_catalog.sum(h.net_gbps)::pg_catalog.float8"
			"   FROM gangsched.holds h JOIN gangsched.gangs g ON g.id OPERATOR(pg_catalog.=) h.job"
			"   JOIN gangsched.nodes n ON n.id OPERATOR(pg_catalog.=) h.node_id"
			"  GROUP BY g.team_id, n.pool_id"
			" UNION ALL"
			" SELECT g.team_id, g.pool_id, true, g.preemptible,"
			"        pg_catalog.sum(g.workers OPERATOR(pg_catalog.*) g.f_gpus),"
			"        pg_catalog.sum(g.workers OPERATOR(pg_catalog.*) g.f_cpus),"
			"        pg_catalog.sum(g.workers OPERATOR(pg_catalog.*) g.f_mem_gb),"
			"        pg_catalog.sum(g.workers OPERATOR(pg_catalog.*) g.f_net_gbps)"
			"   FROM gangsched.gangs g"
			"  WHERE g.state OPERATOR(pg_catalog.=) 'pending' AND g.waiting_for IS NULL"
			"  GROUP BY g.team_id, g.pool_id, g.preemptible", SPI_OK_SELECT);
		for (i = 0; i < (int) SPI_processed; i++)
		{
			int			ti = id_lookup(&teams, col_int(i, 1, 0));
			bool		isnull;
			Datum		pid = col(i, 2, &isnull);
			uint64_t	elig;
			int			p;

			if (ti < 0 || c->teams[ti].nchildren > 0)
				continue;
			if (col_bool(i, 3))
			{
				GsJob		j;

				memset(&j, 0, sizeof(j));
				j.pool = isnull ? -1 : pool_index(c, DatumGetInt32(pid), -2);
				j.preemptible = col_bool(i, 4);
				elig = gs_eligible_pools(c, &j);
			}
			else
			{
				p = isnull ? -1 : pool_index(c, DatumGetInt32(pid), -1);
				elig = (p >= 0 && p < GS_MAX_POOLS) ? UINT64_C(1) << p : 0;
			}
			for (p = 0; p < c->npools && p < GS_MAX_POOLS; p++)
				if (elig & (UINT64_C(1) << p))
					for (k = 0; k < GS_NRES; k++)
						pdemand[(ti * c->npools + p) * GS_NRES + k] += col_float(i, 5 + k, 0);
		}
	}
	gs_tree_fair_shares(c, demand, pdemand, alloc);
	for (i = 0; i < c->nteams; i++)
	{
		Datum		v[6];
		bool		nl[6] = {false, false, false, false, false, false};

		v[0] = Int32GetDatum(c->teams[i].id);
		v[1] = Float8GetDatum(gs_alloc_share(c, &alloc[i * GS_NRES]));
		for (k = 0; k < GS_NRES; k++)
			v[2 + k] = Float8GetDatum(alloc[i * GS_NRES + k]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nl);
	}
	SPI_finish();
	gs_restore_search_path(save_nestlevel);
	return (Datum) 0;
}
