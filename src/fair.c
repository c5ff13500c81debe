/*
 * fair.c — quota and fairness arithmetic.
 *
 * Guaranteed work fits inside the team's nominal quota in the pool, for
 * every resource the quota governs (cpus, mem and net may be left
 * ungoverned). Borrowed work goes beyond it: only preemptible gangs, only
 * within the team's borrowing limit, and never into the idle part of
 * another team's quota that it does not lend (nominal minus lending limit).
 * A team's dominant share is the largest fraction of the cluster's capacity
 * (up nodes) it holds in any resource, divided by its weight.
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "fair.h"


static const char *res_name[GS_NRES] = {"GPUs", "CPUs", "GB of memory", "Gbit/s of network"};

/* What the quota rules check a job at: quota_workers when set (elastic gangs). */
static inline void
quota_demand_of(const GsJob *j, double d[GS_NRES])
{
	int32_t		w = j->quota_workers > 0 ? j->quota_workers : j->workers;

	d[GS_GPU] = j->gpus * w;
	d[GS_CPU] = j->cpus * w;
	d[GS_MEM] = j->mem * w;
	d[GS_NET] = j->net * w;
}

static inline void
demand_of(const GsJob *j, double d[GS_NRES])
{
	d[GS_GPU] = j->gpus * j->workers;
	d[GS_CPU] = j->cpus * j->workers;
	d[GS_MEM] = j->mem * j->workers;
	d[GS_NET] = j->net * j->workers;
}

uint64_t
gs_eligible_pools(const GsCluster *c, const GsJob *j)
{
	uint64_t	m = 0;
	int			i;

	for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
	{
		if (j->pool >= 0 ? i != j->pool : j->pool == -2)
			continue;
		if (!j->preemptible && !c->pools[i].reserved)
			continue;
		m |= UINT64_C(1) << i;
	}
	return m;
}

static bool
within_nominal(const GsQuota *q, const double d[GS_NRES])
{
	int			r;

	if (!q->has)
		return false;
	for (r = 0; r < GS_NRES; r++)
		if (q->nominal[r] >= 0 && q->used[r] + d[r] > q->nominal[r] + GS_EPS)
			return false;
	return true;
}

/* ---- team trees ------------------------------------------------------- */

#define QUOTA(c, t, p) (&(c)->quotas[(t) * (c)->npools + (p)])

/* What a child's use counts in its parent's guaranteed use: capped at its nominal amount. */
static inline double
capped(const GsQuota *q, int r, double g)
{
	return (q->has && q->nominal[r] >= 0) ? Min(g, q->nominal[r]) : g;
}

void
gs_tree_rollup(GsCluster *c)
{
	int			maxd = 0,
				d,
				t,
				p,
				r;

	if (!c->tree)
		return;
	for (t = 0; t < c->nteams; t++)
	{
		maxd = Max(maxd, c->teams[t].depth);
		for (p = 0; p < c->npools; p++)
			memcpy(QUOTA(c, t, p)->gused, QUOTA(c, t, p)->used, sizeof(double) * GS_NRES);
	}
	/* deepest first: a team's totals are complete before its parent adds them */
	for (d = maxd; d >= 1; d--)
		for (t = 0; t < c->nteams; t++)
		{
			int			pa = c->teams[t].parent;

			if (c->teams[t].depth != d || pa < 0)
				continue;
			for (r = 0; r < GS_NRES; r++)
				c->teams[pa].used[r] += c->teams[t].used[r];
			for (p = 0; p < c->npools; p++)
			{
				GsQuota    *q = QUOTA(c, t, p),
						   *pq = QUOTA(c, pa, p);

				for (r = 0; r < GS_NRES; r++)
				{
					pq->used[r] += q->used[r];
					pq->gused[r] += capped(q, r, q->gused[r]);
				}
			}
		}
}

/* Every increase of each subtree's use so far (c->use_growth, allocated on first need). */
double *
gs_tree_growth(GsCluster *c)
{
	if (c->use_growth == NULL)
		c->use_growth = palloc0(sizeof(double) * GS_NRES * Max(c->nteams, 1));
	return c->use_growth;
}

/* Add sign × d to team tix's use in the pool, and to every ancestor's. */
static void
tree_add(GsCluster *c, int tix, int pool, const double d[GS_NRES], double sign)
{
	double		raw[GS_NRES],
				delta[GS_NRES];
	int			t,
				r;

	c->use_version++;
	if (sign > 0)
	{
		double	   *g = gs_tree_growth(c);

		for (t = tix; t >= 0; t = c->teams[t].parent)
			for (r = 0; r < GS_NRES; r++)
				g[t * GS_NRES + r] += Max(d[r], 0);
	}
	else
		c->use_drops++;
	for (r = 0; r < GS_NRES; r++)
		raw[r] = delta[r] = sign * d[r];
	for (t = tix; t >= 0; t = c->teams[t].parent)
	{
		GsQuota    *q = QUOTA(c, t, pool);

		for (r = 0; r < GS_NRES; r++)
		{
			double		old = q->gused[r];

			c->teams[t].used[r] += raw[r];
			q->used[r] += raw[r];
			q->gused[r] += delta[r];
			delta[r] = capped(q, r, q->gused[r]) - capped(q, r, old);
		}
	}
}

/*
 * What team a keeps of resource r in the pool for its children other than
 * `except` (-1: none excepted): the unused part of each one's nominal
 * quota. A child's nominal is carved out of its parent's, so work of a
 * child without a quota row of its own never runs as guaranteed in a
 * sibling's unused nominal.
 */
double
gs_tree_kept(const GsCluster *c, int pool, int a, int except, int r)
{
	double		kept = 0;
	int			k;

	for (k = 0; k < c->teams[a].nchildren; k++)
	{
		int			ch = c->teams[a].children[k];
		const GsQuota *q = QUOTA(c, ch, pool);

		if (ch != except && q->has && q->nominal[r] >= 0)
			kept += Max(0, q->nominal[r] - q->gused[r]);
	}
	return kept;
}

/* A child's unused nominal quota of resource r, 0 without a quota row or ungoverned. */
static inline double
unused_nominal(const GsCluster *c, int pool, int ch, int r)
{
	const GsQuota *q = QUOTA(c, ch, pool);

	return (q->has && q->nominal[r] >= 0) ? Max(0, q->nominal[r] - q->gused[r]) : 0;
}

/* gs_tree_kept for the rounds: every team's sum over its children, once per change of use. */
static double
kept_cached(GsCluster *c, int pool, int a, int except, int r)
{
	int			n = c->nteams,
				t,
				k;
	double	   *h;

	if (c->kept_cache == NULL)
	{
		c->kept_version = palloc(sizeof(uint64_t) * Max(c->npools, 1));
		c->kept_cache = palloc0(sizeof(double) * GS_NRES * Max(n, 1) * Max(c->npools, 1));
		for (t = 0; t < c->npools; t++)
			c->kept_version[t] = UINT64_MAX;
	}
	h = &c->kept_cache[(size_t) pool * n * GS_NRES];
	if (c->kept_version[pool] != c->use_version)
	{
		for (t = 0; t < n; t++)
			for (k = 0; k < GS_NRES; k++)
				h[t * GS_NRES + k] = 0;
		for (t = 0; t < n; t++)
			if (c->teams[t].parent >= 0)
				for (k = 0; k < GS_NRES; k++)
					h[c->teams[t].parent * GS_NRES + k] += unused_nominal(c, pool, t, k);
		c->kept_version[pool] = c->use_version;
	}
	return h[a * GS_NRES + r] - (except >= 0 ? unused_nominal(c, pool, except, r) : 0);
}

/*
 * Guaranteed in a tree: the gang stays within the nominal quota of its
 * team and of every ancestor that has a quota row in the pool (at least
 * one on the path must have one). An ancestor counts its subtree's
 * guaranteed use (gused). When not, *at is the first team (from the leaf
 * up) whose nominal it would exceed, in resource *res; -1 when no team on
 * the path has a quota there.
 */
static bool
tree_within_nominal(const GsCluster *c, int tix, int pool, const double d[GS_NRES], int *at, int *res,
					double *slack)
{
	double		delta[GS_NRES];
	bool		any = false;
	int			t = tix,
				from = -1,
				lvl = 0,
				r;

	*at = -1;
	*res = GS_GPU;
	memcpy(delta, d, sizeof(delta));
	for (;; lvl++)
	{
		const GsQuota *q = QUOTA(c, t, pool);

		if (q->has)
		{
			any = true;
			for (r = 0; r < GS_NRES; r++)
			{
				double		need;

				if (q->nominal[r] < 0)
					continue;
				need = q->gused[r] + delta[r] + (from >= 0 ? kept_cached(unconstify(GsCluster *, c), pool, t, from, r) : 0);
				if (need > q->nominal[r] + GS_EPS)
				{
					*at = t;
					*res = r;
					return false;
				}
				if (slack != NULL && lvl < GS_TREE_SLACK_DEPTH)
					slack[lvl * GS_NRES + r] = Min(slack[lvl * GS_NRES + r], q->nominal[r] + GS_EPS - need);
			}
		}
		if (c->teams[t].parent < 0)
			break;
		for (r = 0; r < GS_NRES; r++)
			delta[r] = capped(q, r, q->gused[r] + delta[r]) - capped(q, r, q->gused[r]);
		from = t;
		t = c->teams[t].parent;
	}
	return any;
}

/* "team vision", "team research (parent of vision)", "team org (ancestor of vision)" */
static char *
tree_label(const GsCluster *c, int t, int leaf)
{
	if (t == leaf || leaf < 0)
		return psprintf("team %s", c->teams[t].name);
	return psprintf("team %s (%s of %s)", c->teams[t].name,
					c->teams[leaf].parent == t ? "parent" : "ancestor", c->teams[leaf].name);
}

/*
 * What subtree t holds back of resource r in the pool from teams outside
 * it: the larger of its own non-lendable idle quota (nominal less lending
 * limit, less what it uses) and what its children hold back.
 */
double
gs_tree_held_back(const GsCluster *c, int pool, int t, int r)
{
	const GsQuota *q = QUOTA(c, t, pool);
	double		own = 0,
				sum = 0;
	int			k;

	if (q->has && q->nominal[r] >= 0 && q->lend[r] >= 0)
		own = Max(0, (q->nominal[r] - q->lend[r]) - q->used[r]);
	for (k = 0; k < c->teams[t].nchildren; k++)
		sum += gs_tree_held_back(c, pool, c->teams[t].children[k], r);
	return Max(own, sum);
}

/*
 * The subtrees off team tix's path to the top: the siblings of tix and of
 * each of its ancestors, and the other top-level teams, into out; returns how many.
 */
int
gs_tree_off_path(const GsCluster *c, int tix, int *out)
{
	int			n = 0,
				t,
				k;

	for (t = tix; t >= 0; t = c->teams[t].parent)
	{
		int			pa = c->teams[t].parent;
		const int32_t *sib = pa >= 0 ? c->teams[pa].children : c->roots;
		int			nsib = pa >= 0 ? c->teams[pa].nchildren : c->nroots;

		for (k = 0; k < nsib; k++)
			if (sib[k] != t)
				out[n++] = sib[k];
	}
	return n;
}

/*
 * What every subtree holds back in the pool, computed once per change of
 * use (deepest teams first), and whether any team lends with a limit there
 * at all (when none, nothing is held back and nothing is computed).
 */
static const double *
held_back_all(GsCluster *c, int pool)
{
	int			n = c->nteams,
				t,
				r,
				d,
				maxd = 0;
	double	   *h;

	if (c->pool_lends == NULL)
	{
		c->pool_lends = palloc(sizeof(int8_t) * Max(c->npools, 1));
		c->held_version = palloc(sizeof(uint64_t) * Max(c->npools, 1));
		c->held_cache = palloc0(sizeof(double) * GS_NRES * Max(n, 1) * Max(c->npools, 1));
		for (t = 0; t < c->npools; t++)
		{
			c->pool_lends[t] = -1;
			c->held_version[t] = UINT64_MAX;
		}
	}
	if (c->pool_lends[pool] < 0)
	{
		c->pool_lends[pool] = 0;
		for (t = 0; t < n; t++)
			for (r = 0; r < GS_NRES; r++)
				if (QUOTA(c, t, pool)->has && QUOTA(c, t, pool)->nominal[r] >= 0 && QUOTA(c, t, pool)->lend[r] >= 0)
					c->pool_lends[pool] = 1;
	}
	if (c->pool_lends[pool] == 0)
		return NULL;
	h = &c->held_cache[(size_t) pool * n * GS_NRES];
	if (c->held_version[pool] == c->use_version)
		return h;
	for (t = 0; t < n; t++)
	{
		maxd = Max(maxd, c->teams[t].depth);
		for (r = 0; r < GS_NRES; r++)
			h[t * GS_NRES + r] = 0;
	}
	/* a subtree's own part and its children's, deepest first */
	for (d = maxd; d >= 0; d--)
		for (t = 0; t < n; t++)
		{
			const GsQuota *q = QUOTA(c, t, pool);

			if (c->teams[t].depth != d)
				continue;
			for (r = 0; r < GS_NRES; r++)
			{
				double		own = 0;

				if (q->has && q->nominal[r] >= 0 && q->lend[r] >= 0)
					own = Max(0, (q->nominal[r] - q->lend[r]) - q->used[r]);
				/* h holds the children's sum so far */
				h[t * GS_NRES + r] = Max(own, h[t * GS_NRES + r]);
				if (c->teams[t].parent >= 0)
					h[c->teams[t].parent * GS_NRES + r] += h[t * GS_NRES + r];
			}
		}
	c->held_version[pool] = c->use_version;
	return h;
}

/* Idle quota off tix's path that its subtrees do not lend out, per resource. */
static void
tree_protected(GsCluster *c, int pool, int tix, double out[GS_NRES], const int *off, int noff)
{
	const double *h = held_back_all(c, pool);
	int			k,
				r;

	for (r = 0; r < GS_NRES; r++)
	{
		out[r] = 0;
		if (h != NULL)
			for (k = 0; k < noff; k++)
				out[r] += h[off[k] * GS_NRES + r];
	}
}

/* The subtrees off team tix's path, computed once per team. */
static const int32_t *
off_path_of(GsCluster *c, int tix, int *noff)
{
	if (c->off_path == NULL)
	{
		c->off_path = palloc0(sizeof(int32_t *) * Max(c->nteams, 1));
		c->noff_path = palloc0(sizeof(int32_t) * Max(c->nteams, 1));
	}
	if (c->off_path[tix] == NULL)
	{
		int		   *tmp = palloc(sizeof(int) * Max(c->nteams, 1));
		int			k;

		c->noff_path[tix] = gs_tree_off_path(c, tix, tmp);
		c->off_path[tix] = palloc(sizeof(int32_t) * Max(c->noff_path[tix], 1));
		for (k = 0; k < c->noff_path[tix]; k++)
			c->off_path[tix][k] = tmp[k];
		pfree(tmp);
	}
	*noff = c->noff_path[tix];
	return c->off_path[tix];
}

static void
tree_append_non_lenders(StringInfo s, const GsCluster *c, int pool, int r, const int32_t *off, int noff)
{
	int			k,
				n = 0,
				shown = 0;

	for (k = 0; k < noff; k++)
		if (gs_tree_held_back(c, pool, off[k], r) > GS_EPS)
			n++;
	appendStringInfoString(s, n == 1 ? "team " : "teams ");
	for (k = 0; k < noff && shown < 3; k++)
	{
		if (gs_tree_held_back(c, pool, off[k], r) <= GS_EPS)
			continue;
		if (shown > 0)
			appendStringInfoString(s, (shown == n - 1) ? " and " : ", ");
		appendStringInfoString(s, c->teams[off[k]].name);
		if (c->teams[off[k]].nchildren > 0)
			appendStringInfoString(s, " (with its subtree)");
		shown++;
	}
	if (n > shown)
		appendStringInfo(s, " and %d more", n - shown);
	appendStringInfoString(s, n == 1 ? " does" : " do");
}

/* gs_borrow_pools for a tree: every level's borrowing limit, every off-path subtree's lending limit. */
static uint64_t
tree_borrow_pools(GsCluster *c, const GsJob *j, uint64_t elig, const double d[GS_NRES], char **why,
				  uint64_t *held)
{
	uint64_t	m = 0;
	int			i,
				r,
				t,
				noff;
	const int32_t *off;
	StringInfoData s;

	if (!j->preemptible)
	{
		for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
		{
			int			at,
						res;

			if (!(elig & (UINT64_C(1) << i)))
				continue;
			if (tree_within_nominal(c, j->tix, i, d, &at, &res, NULL))
				at = j->tix;	/* it is within: said in GPUs, as when it fits nowhere now */
			if (at < 0)
				*why = psprintf("team %s has no quota in pool %s, nor has any team above it, and non-preemptible work runs only within nominal quota",
								c->teams[j->tix].name, c->pools[i].name);
			else
			{
				const GsQuota *q = QUOTA(c, at, i);

				double		kept = 0;
				int			from;

				for (from = j->tix; from >= 0 && c->teams[from].parent != at; from = c->teams[from].parent)
					;
				if (at != j->tix)
					kept = gs_tree_kept(c, i, at, from, res);
				*why = kept > GS_EPS
					? psprintf("%s holds %g of its %g %s in pool %s and keeps %g for its other teams' nominal quota; the job needs %g more and, not being preemptible, may not borrow",
							   tree_label(c, at, j->tix), q->gused[res], q->nominal[res], res_name[res],
							   c->pools[i].name, kept, d[res])
					: psprintf("%s holds %g of its %g %s in pool %s; the job needs %g more and, not being preemptible, may not borrow",
							   tree_label(c, at, j->tix), q->gused[res], q->nominal[res], res_name[res],
							   c->pools[i].name, d[res]);
			}
			break;
		}
		return 0;
	}
	off = off_path_of(c, j->tix, &noff);
	for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
	{
		const GsPool *pl = &c->pools[i];
		double		prot[GS_NRES];
		bool		ok = true;

		if (!(elig & (UINT64_C(1) << i)))
			continue;
		for (t = j->tix; t >= 0 && ok; t = c->teams[t].parent)
		{
			const GsQuota *q = QUOTA(c, t, i);

			for (r = 0; r < GS_NRES && ok; r++)
				if (q->has && q->nominal[r] >= 0 && q->borrow[r] >= 0 &&
					q->used[r] + d[r] > q->nominal[r] + q->borrow[r] + GS_EPS)
				{
					ok = false;
					if (*why == NULL)
						*why = psprintf("%s holds %g %s in pool %s and may not borrow %g more: nominal quota %g, borrowing limit %g",
										tree_label(c, t, j->tix), q->used[r], res_name[r], pl->name, d[r],
										q->nominal[r], q->borrow[r]);
				}
		}
		if (!ok)
			continue;
		tree_protected(c, i, j->tix, prot, off, noff);
		for (r = 0; r < GS_NRES && ok; r++)
		{
			double		left = pl->capacity[r] - pl->used[r] - d[r];

			if (d[r] > 0 && prot[r] > GS_EPS && left < prot[r] - GS_EPS)
			{
				ok = false;
				*held |= UINT64_C(1) << i;
				if (*why == NULL)
				{
					initStringInfo(&s);
					appendStringInfo(&s, "borrowing %g %s in pool %s would use idle quota that ",
									 d[r], res_name[r], pl->name);
					tree_append_non_lenders(&s, c, i, r, off, noff);
					appendStringInfo(&s, " not lend (%g held back, %g free)",
									 prot[r], Max(0, pl->capacity[r] - pl->used[r]));
					*why = s.data;
				}
			}
		}
		if (ok)
			m |= UINT64_C(1) << i;
	}
	if (m != 0)
		*why = NULL;
	return m;
}

/*
 * Hierarchical weighted DRF (H-DRF, Bhattacharya et al., SoCC 2013) by
 * progressive filling, exact between events. Amounts are fractions of the
 * cluster's capacity (a resource of capacity 0 is left out). A leaf's
 * allocation grows along its demand's direction, x × v (x its dominant
 * share, v its demand scaled to a dominant component of 1), up to its
 * demand (x = X). A leaf is blocked when it is satisfied, when a resource
 * it needs is used up, or when it or an ancestor reached its limit of a
 * resource it needs; a node is active while some leaf below it is.
 *
 * What siblings compare: a leaf's share is x; an inner node's is the
 * largest fraction its subtree holds of a resource that one of its active
 * leaves still asks for. A resource that is used up (or that no active
 * leaf below wants) stops counting, so a subtree whose GPUs are gone is
 * compared on what it can still grow into and its siblings are re-levelled
 * (the paper's "ignoring blocked nodes"): a sibling wanting only CPUs can
 * take the CPUs a GPU-saturated sibling cannot use. At every sibling set
 * only the active children at the smallest share / weight grow, their
 * shares in proportion to their weights. Events: a leaf satisfied, a
 * resource used up, a limit reached, a lower sibling catching up with a
 * higher one, another resource becoming a node's largest. When growing the
 * lowest children does not raise their parent's share (they grow in a
 * resource below its largest), they grow first, alone ("free"), until it
 * does.
 */
#define HDRF_TOL 1e-10

static inline bool
at_min(double val, double mn)
{
	return val <= mn * (1 + 1e-9) + 1e-12;
}

/*
 * One progressive filling (gs_hdrf). xio (may be NULL: from 0) holds each
 * leaf's dominant share x at the start and gets it at the end, so that
 * fillings can follow one another (quota floors, gs_tree_fair_shares);
 * frozen (may be NULL) leaves do not grow this time; avail (may be NULL:
 * 1) is, per leaf and resource, the fraction of the cluster's capacity the
 * leaf may see used before the resource counts as used up for it (what
 * subtrees off its path keep back, lending limits). With xio, frozen and
 * avail NULL this is H-DRF from zero, bit for bit what it always was.
 */
static void
hdrf_fill(int n, const int32_t *parent, const double *weight, const double *demand,
		  const double *limit, const double capacity[GS_NRES], double *alloc,
		  double *xio, const bool *frozen, const double *avail)
{
	int			N = Max(n, 1);
	int		   *nk = palloc0(sizeof(int) * (n + 1)),
			   *first = palloc0(sizeof(int) * (n + 2)),
			   *kids = palloc(sizeof(int) * N),
			   *order = palloc(sizeof(int) * N),
			   *fill = palloc0(sizeof(int) * (n + 1)),
			   *top = palloc(sizeof(int) * N);
	double	   *x = palloc0(sizeof(double) * N),
			   *X = palloc0(sizeof(double) * N),
			   *v = palloc0(sizeof(double) * GS_NRES * N),
			   *g = palloc0(sizeof(double) * GS_NRES * N),
			   *sub = palloc0(sizeof(double) * GS_NRES * N),
			   *srate = palloc0(sizeof(double) * GS_NRES * N),
			   *S = palloc0(sizeof(double) * N),
			   *den = palloc0(sizeof(double) * N),
			   *m = palloc0(sizeof(double) * N),
			   *rho = palloc0(sizeof(double) * N);
	uint8	   *capd = palloc0(sizeof(uint8) * N),
			   *mask = palloc0(sizeof(uint8) * N);
	bool	   *act = palloc0(sizeof(bool) * N),
			   *grow = palloc0(sizeof(bool) * N);
	int			norder = 0,
				head = 0,
				i,
				k,
				r,
				it,
				maxit;

	/* children (CSR; n stands for the top) and parents before children */
	for (i = 0; i < n; i++)
		nk[parent[i] >= 0 ? parent[i] : n]++;
	for (i = 0; i <= n; i++)
		first[i + 1] = first[i] + nk[i];
	for (i = 0; i < n; i++)
	{
		int			p = parent[i] >= 0 ? parent[i] : n;

		kids[first[p] + fill[p]++] = i;
	}
	for (k = first[n]; k < first[n + 1]; k++)
		order[norder++] = kids[k];
	while (head < norder)
	{
		int			t = order[head++];

		for (k = first[t]; k < first[t + 1]; k++)
			order[norder++] = kids[k];
	}
	/* leaves' demand directions */
	if (xio != NULL)
		for (i = 0; i < n; i++)
			x[i] = xio[i];
	for (i = 0; i < n; i++)
	{
		if (nk[i] > 0)
			continue;
		for (r = 0; r < GS_NRES; r++)
			if (capacity[r] > 0)
				X[i] = Max(X[i], demand[i * GS_NRES + r] / capacity[r]);
		if (X[i] > 0)
			for (r = 0; r < GS_NRES; r++)
				if (capacity[r] > 0)
					v[i * GS_NRES + r] = demand[i * GS_NRES + r] / capacity[r] / X[i];
	}
	maxit = 8 * (n + GS_NRES) * (n + GS_NRES) + 64;
	for (it = 0; it < maxit; it++)
	{
		double		used[GS_NRES] = {0, 0, 0, 0},
					rate[GS_NRES] = {0, 0, 0, 0},
					delta = 1e300,
					mtop = 1e300;
		bool		sat[GS_NRES];
		bool		any = false,
					free_mode = false;
		int			ntop = 0;

		/* subtree use, bottom up; the cluster's */
		for (k = norder - 1; k >= 0; k--)
		{
			int			t = order[k],
						q;

			for (r = 0; r < GS_NRES; r++)
				sub[t * GS_NRES + r] = nk[t] == 0 ? x[t] * v[t * GS_NRES + r] : 0;
			for (q = first[t]; q < first[t + 1]; q++)
				for (r = 0; r < GS_NRES; r++)
					sub[t * GS_NRES + r] += sub[kids[q] * GS_NRES + r];
		}
		for (k = first[n]; k < first[n + 1]; k++)
			for (r = 0; r < GS_NRES; r++)
				used[r] += sub[kids[k] * GS_NRES + r];
		for (r = 0; r < GS_NRES; r++)
			sat[r] = capacity[r] > 0 && used[r] >= 1 - HDRF_TOL;
		/* limits reached, top down (a team's or an ancestor's) */
		for (k = 0; k < norder; k++)
		{
			int			t = order[k];

			capd[t] = parent[t] >= 0 ? capd[parent[t]] : 0;
			for (r = 0; r < GS_NRES; r++)
				if (limit != NULL && limit[t * GS_NRES + r] >= 0 && capacity[r] > 0 &&
					sub[t * GS_NRES + r] >= limit[t * GS_NRES + r] / capacity[r] - HDRF_TOL)
					capd[t] |= (uint8) (1 << r);
		}
		/* active nodes, the resources their active leaves want, their shares */
		for (k = norder - 1; k >= 0; k--)
		{
			int			t = order[k],
						q;

			if (nk[t] == 0)
			{
				act[t] = X[t] > 0 && x[t] < X[t] * (1 - HDRF_TOL) &&
					(frozen == NULL || !frozen[t]);
				mask[t] = 0;
				for (r = 0; r < GS_NRES; r++)
					if (v[t * GS_NRES + r] > 0)
					{
						mask[t] |= (uint8) (1 << r);
						if (sat[r] || (capd[t] & (1 << r)) ||
							(avail != NULL && used[r] >= avail[t * GS_NRES + r] - HDRF_TOL))
							act[t] = false;
					}
				if (!act[t])
					mask[t] = 0;
				S[t] = x[t];
				continue;
			}
			act[t] = false;
			mask[t] = 0;
			S[t] = 0;
			for (q = first[t]; q < first[t + 1]; q++)
				if (act[kids[q]])
				{
					act[t] = true;
					mask[t] |= mask[kids[q]];
				}
			for (r = 0; r < GS_NRES; r++)
				if (mask[t] & (1 << r))
					S[t] = Max(S[t], sub[t * GS_NRES + r]);
		}
		/* who grows: the active children at their set's smallest share / weight */
		for (k = first[n]; k < first[n + 1]; k++)
			if (act[kids[k]])
				mtop = Min(mtop, S[kids[k]] / weight[kids[k]]);
		for (i = 0; i < n; i++)
			grow[i] = false;
		for (k = first[n]; k < first[n + 1]; k++)
			if (act[kids[k]] && at_min(S[kids[k]] / weight[kids[k]], mtop))
				grow[kids[k]] = true;
		for (k = 0; k < norder; k++)
		{
			int			t = order[k],
						q;

			if (nk[t] == 0 || !act[t])
				continue;
			m[t] = 1e300;
			for (q = first[t]; q < first[t + 1]; q++)
				if (act[kids[q]])
					m[t] = Min(m[t], S[kids[q]] / weight[kids[q]]);
			if (!grow[t])
				continue;
			for (q = first[t]; q < first[t + 1]; q++)
				if (act[kids[q]] && at_min(S[kids[q]] / weight[kids[q]], m[t]))
					grow[kids[q]] = true;
		}
		/*
		 * growth per unit of a node's share, bottom up: g (per resource),
		 * den (what its growing children's unit raises its largest
		 * resource; 0: they grow "free")
		 */
		for (k = norder - 1; k >= 0; k--)
		{
			int			t = order[k],
						q,
						best = -1;
			double		sum[GS_NRES] = {0, 0, 0, 0};

			if (!grow[t])
				continue;
			if (nk[t] == 0)
			{
				for (r = 0; r < GS_NRES; r++)
					g[t * GS_NRES + r] = v[t * GS_NRES + r];
				den[t] = 1;
				continue;
			}
			for (q = first[t]; q < first[t + 1]; q++)
				if (grow[kids[q]])
					for (r = 0; r < GS_NRES; r++)
						sum[r] += weight[kids[q]] * g[kids[q] * GS_NRES + r];
			/* the largest resource counted; of equal ones, the one growing fastest */
			for (r = 0; r < GS_NRES; r++)
				if ((mask[t] & (1 << r)) &&
					(best < 0 || sub[t * GS_NRES + r] > sub[t * GS_NRES + best] * (1 + 1e-9) + 1e-12 ||
					 (at_min(sub[t * GS_NRES + best], sub[t * GS_NRES + r]) && sum[r] > sum[best])))
					best = r;
			den[t] = best >= 0 ? sum[best] : 0;
			for (r = 0; r < GS_NRES; r++)
				g[t * GS_NRES + r] = den[t] > 0 ? sum[r] / den[t] : 0;
			if (den[t] <= 1e-15)
			{
				den[t] = 0;
				free_mode = true;
			}
		}
		/* rates, top down: per unit of the top level, or of a free node's children */
		for (i = 0; i < n; i++)
			rho[i] = 0;
		if (!free_mode)
			for (k = first[n]; k < first[n + 1]; k++)
				if (grow[kids[k]])
					rho[kids[k]] = weight[kids[k]];
		for (k = 0; k < norder; k++)
		{
			int			t = order[k],
						q;
			double		dm;

			if (nk[t] == 0 || !grow[t])
				continue;
			if (den[t] == 0)
				dm = 1;			/* a free node: its children grow alone */
			else if (rho[t] > 0)
				dm = rho[t] / den[t];
			else
				continue;
			for (q = first[t]; q < first[t + 1]; q++)
				if (grow[kids[q]])
					rho[kids[q]] = weight[kids[q]] * dm;
		}
		/* physical growth per resource, bottom up; leaves satisfied; limits */
		for (k = norder - 1; k >= 0; k--)
		{
			int			t = order[k],
						q;

			for (r = 0; r < GS_NRES; r++)
				srate[t * GS_NRES + r] = 0;
			if (nk[t] == 0)
			{
				if (rho[t] <= 0)
					continue;
				any = true;
				delta = Min(delta, (X[t] - x[t]) / rho[t]);
				for (r = 0; r < GS_NRES; r++)
					srate[t * GS_NRES + r] = rho[t] * v[t * GS_NRES + r];
			}
			for (q = first[t]; q < first[t + 1]; q++)
				for (r = 0; r < GS_NRES; r++)
					srate[t * GS_NRES + r] += srate[kids[q] * GS_NRES + r];
			if (limit != NULL)
				for (r = 0; r < GS_NRES; r++)
					if (srate[t * GS_NRES + r] > 0 && limit[t * GS_NRES + r] >= 0 && capacity[r] > 0)
						delta = Min(delta, (limit[t * GS_NRES + r] / capacity[r] - sub[t * GS_NRES + r]) /
									srate[t * GS_NRES + r]);
		}
		if (!any)
			break;
		/* another resource becoming an inner node's largest */
		for (k = 0; k < norder; k++)
		{
			int			t = order[k],
						best = -1;

			if (nk[t] == 0 || !act[t])
				continue;
			for (r = 0; r < GS_NRES; r++)
				if ((mask[t] & (1 << r)) && (best < 0 || sub[t * GS_NRES + r] > sub[t * GS_NRES + best]))
					best = r;
			for (r = 0; r < GS_NRES && best >= 0; r++)
				if ((mask[t] & (1 << r)) && srate[t * GS_NRES + r] > srate[t * GS_NRES + best] * (1 + 1e-9) &&
					sub[t * GS_NRES + r] < sub[t * GS_NRES + best] * (1 - 1e-9) - 1e-12)
					delta = Min(delta, (sub[t * GS_NRES + best] - sub[t * GS_NRES + r]) /
								(srate[t * GS_NRES + r] - srate[t * GS_NRES + best]));
		}
		/* a lower sibling catching up with a higher one, in every sibling set */
		for (i = -1; i < n; i++)
		{
			int			set = i < 0 ? n : i;
			double		mn = 1e300,
						lo = 1e300;

			if (i >= 0 && (nk[i] == 0 || !act[i]))
				continue;
			ntop = 0;
			for (k = first[set]; k < first[set + 1]; k++)
				if (act[kids[k]])
				{
					top[ntop++] = kids[k];
					mn = Min(mn, S[kids[k]] / weight[kids[k]]);
				}
			/* the lowest line's rise: the slowest of those at the minimum */
			for (k = 0; k < ntop; k++)
			{
				int			c = top[k];
				double		sr = 0;

				if (!at_min(S[c] / weight[c], mn))
					continue;
				for (r = 0; r < GS_NRES; r++)
					if ((mask[c] & (1 << r)) && sub[c * GS_NRES + r] >= S[c] * (1 - 1e-9) - 1e-12)
						sr = Max(sr, srate[c * GS_NRES + r]);
				lo = Min(lo, sr / weight[c]);
			}
			if (lo <= 0 || lo >= 1e300)
				continue;
			for (k = 0; k < ntop; k++)
			{
				int			c = top[k];

				if (!at_min(S[c] / weight[c], mn))
					delta = Min(delta, (S[c] / weight[c] - mn) / lo);
			}
		}
		for (r = 0; r < GS_NRES; r++)
			rate[r] = 0;
		for (k = first[n]; k < first[n + 1]; k++)
			for (r = 0; r < GS_NRES; r++)
				rate[r] += srate[kids[k] * GS_NRES + r];
		for (r = 0; r < GS_NRES; r++)
			if (rate[r] > 0)
				delta = Min(delta, (1 - used[r]) / rate[r]);
		/* a resource used up for a growing leaf, as far as it may see */
		if (avail != NULL)
			for (i = 0; i < n; i++)
				if (nk[i] == 0 && rho[i] > 0)
					for (r = 0; r < GS_NRES; r++)
						if (v[i * GS_NRES + r] > 0 && rate[r] > 0)
							delta = Min(delta, (avail[i * GS_NRES + r] - used[r]) / rate[r]);
		delta = Max(delta, 0);
		if (delta >= 1e300)
			break;
		for (i = 0; i < n; i++)
			if (nk[i] == 0 && rho[i] > 0)
			{
				x[i] += rho[i] * delta;
				if (x[i] >= X[i] * (1 - HDRF_TOL))
					x[i] = X[i];
			}
	}
	elog(DEBUG2, "gangsched: H-DRF over %d teams in %d steps", n, it);
	if (xio != NULL)
		for (i = 0; i < n; i++)
			xio[i] = x[i];
	/* the subtrees' allocations, in amounts */
	for (k = norder - 1; k >= 0; k--)
	{
		int			t = order[k],
					q;

		for (r = 0; r < GS_NRES; r++)
		{
			double		s = 0;

			if (nk[t] == 0 && capacity[r] > 0)
				s = x[t] * v[t * GS_NRES + r] * capacity[r];
			for (q = first[t]; q < first[t + 1]; q++)
				s += alloc[kids[q] * GS_NRES + r];
			alloc[t * GS_NRES + r] = s;
		}
	}
	pfree(nk);
	pfree(first);
	pfree(kids);
	pfree(order);
	pfree(fill);
	pfree(top);
	pfree(x);
	pfree(X);
	pfree(v);
	pfree(g);
	pfree(sub);
	pfree(srate);
	pfree(S);
	pfree(den);
	pfree(m);
	pfree(rho);
	pfree(capd);
	pfree(mask);
	pfree(act);
	pfree(grow);
}

void
gs_hdrf(int n, const int32_t *parent, const double *weight, const double *demand,
		const double *limit, const double capacity[GS_NRES], double *alloc)
{
	hdrf_fill(n, parent, weight, demand, limit, capacity, alloc, NULL, NULL, NULL);
}

/*
 * What a subtree may hold of each resource as its quotas say (the rounds'
 * borrowing limits, per level): the sum over the pools with capacity of
 * nominal plus borrowing limit, where every such pool has one; -1 when some
 * pool sets no limit (or the limits reach the cluster's capacity).
 */
void
gs_tree_limits(const GsCluster *c, double *limit)
{
	int			t,
				p,
				r;

	for (t = 0; t < c->nteams; t++)
		for (r = 0; r < GS_NRES; r++)
		{
			double		total = 0;
			bool		unlimited = false;

			for (p = 0; p < c->npools && !unlimited; p++)
			{
				const GsQuota *q = QUOTA(c, t, p);
				double		pcap = c->pools[p].capacity[r];

				if (pcap <= 0)
					continue;
				if (q->has && q->nominal[r] >= 0 && q->borrow[r] >= 0)
					total += Min(q->nominal[r] + q->borrow[r], pcap);
				else
					unlimited = true;
			}
			limit[t * GS_NRES + r] = (unlimited || total >= c->capacity[r] - GS_EPS) ? -1 : total;
		}
}

/*
 * The quota model over the tree, summed over the pools with capacity: a
 * team's nominal amount of a resource (each pool's capped at its up
 * capacity; -1 when no quota row governs it: no row, or 'Infinity' in one)
 * and the part of it it may lend (a pool's lending limit, all of it when
 * none).
 *
 * With the demand per pool (pdsub[team][pool][GS_NRES], each subtree's:
 * what it holds in the pool plus its pending work eligible for it; NULL
 * when not known, one pool), quotas count per pool, as the rounds enforce
 * them: a pool's nominal amount is guaranteed only to the demand that may
 * use that pool. Where the sum over the pools of min(nominal, capacity,
 * pool demand) falls short of min(nominal, demand) (dsub, the subtree's
 * demand), that sum is the team's nominal amount; otherwise the floors come
 * out the same and the nominal amount is left as it is (with one pool, or
 * every pool's demand covering its nominal, always), so the arithmetic is
 * today's. own[team][GS_NRES] gets what the team's own quotas keep back
 * from teams outside its subtree: its idle nominal beyond what it lends,
 * over all its pools (nominal less demand less lending limit, as without
 * pools) or, when larger, pool by pool (the sum over its pools of nominal
 * less lending limit less pool demand: idle quota in a pool its demand may
 * not use stays idle). Both are lower bounds of what stays idle wherever
 * the demand runs. extra[team][GS_NRES] gets how much the pool-by-pool
 * amount exceeds the other: idle quota the subtree's own demand may not use
 * either.
 */
static bool
tree_nominals(const GsCluster *c, const double *dsub, const double *pdsub,
			  double *nom, double *lend, double *own, double *extra, bool *hasq)
{
	bool		any = false;
	int			t,
				p,
				r;

	for (t = 0; t < c->nteams; t++)
	{
		hasq[t] = false;
		for (p = 0; p < c->npools; p++)
			if (QUOTA(c, t, p)->has)
				hasq[t] = any = true;
		for (r = 0; r < GS_NRES; r++)
		{
			double		tot = 0,
						ln = 0,
						use = 0,
						kept = 0;
			bool		gov = hasq[t];

			for (p = 0; p < c->npools && gov; p++)
			{
				const GsQuota *q = QUOTA(c, t, p);
				double		nm;

				if (!q->has)
					continue;
				if (q->nominal[r] < 0)
				{
					gov = false;
					break;
				}
				nm = Min(q->nominal[r], Max(c->pools[p].capacity[r], 0));
				tot += nm;
				ln += q->lend[r] >= 0 ? Min(q->lend[r], nm) : nm;
				if (pdsub != NULL)
				{
					double		pd = pdsub[(t * c->npools + p) * GS_NRES + r];

					use += Min(nm, pd);
					if (q->lend[r] >= 0)
						kept += Max(0, nm - Min(q->lend[r], nm) - pd);
				}
			}
			own[t * GS_NRES + r] = gov ? Max(tot - dsub[t * GS_NRES + r] - ln, kept) : 0;
			extra[t * GS_NRES + r] = gov ? Max(kept - Max(tot - dsub[t * GS_NRES + r] - ln, 0), 0) : 0;
			if (gov && pdsub != NULL && use < Min(tot, dsub[t * GS_NRES + r]) - GS_EPS)
				tot = use;
			nom[t * GS_NRES + r] = gov ? tot : -1;
			lend[t * GS_NRES + r] = gov ? ln : -1;
		}
	}
	return any;
}

/*
 * What t's own quota keeps back of resource r in pool p when idle: its
 * nominal there (capped at the pool's up capacity) less its lending limit;
 * 0 with no limit (all of it is lent) or no row.
 */
static double
pool_kept(const GsCluster *c, int t, int p, int r)
{
	const GsQuota *q = QUOTA(c, t, p);
	double		nm;

	if (!q->has || q->nominal[r] < 0 || q->lend[r] < 0)
		return 0;
	nm = Min(q->nominal[r], Max(c->pools[p].capacity[r], 0));
	return nm - Min(q->lend[r], nm);
}

/*
 * Lending limits pool by pool (gs_tree_fair_shares, step 2; children
 * first). The rounds keep back, in each pool p, H_p(t) = max(own_p(t),
 * sum of H_p(c) over t's children), own_p(t) = max(0, kept_p(t) - use_p(t))
 * (held_back_all; kept_p: pool_kept), and a subtree outside t loses
 * sum_p H_p(t). Lower bounds of sum_p H_p(t) wherever t's demand runs:
 *  - sum_p hp_p(t), hp_p(t) = max(kept_p(t) - pd_p(t), sum of hp_p(c), 0):
 *    a pool demand pd_p bounds use_p, and H_p only falls as use grows;
 *  - sum_p K_p(t) - D(t), K_p(t) = max(kept_p(t), sum of K_p(c)) (H_p with
 *    nothing used): a GPU used by a leaf of t in pool p lowers H_p(t) by
 *    at most one and no other pool's, and t's demand D(t) is used at most
 *    once, in one pool.
 * The least sum_p H_p(t) can be once t's demand runs is: the first when
 * every job of t's leaves may use one pool only (what runs always does:
 * each use_p then is pd_p); the larger of the two for a leaf t (each GPU
 * it uses lowers one pool's figure by one while that is above 0, so the
 * least is sum_p kept_p less min(D, sum_p min(pd_p, kept_p))). Otherwise
 * (nested teams, jobs free to choose among pools) the larger is a lower
 * bound. hp[t][p][r] and kk[t][p][r] (K_p) get
 * t's figures; *held (what t keeps back over all the pools, the aggregate
 * rule's figure: its own total, pool by pool beyond its pool demand, or
 * its children's, whichever is larger) is raised to the larger bound only
 * where that exceeds it: where quota is kept back in different pools at
 * different levels (with one pool, or every level keeping back in the
 * same pool, the aggregate rule's figure is no smaller, and is kept).
 */
static void
pool_held(const GsCluster *c, int t, int r, bool gov, const double *dsub, const double *pdsub,
		  double *kk, double *hp, double *held)
{
	int			P = c->npools,
				p,
				k;
	double		s2 = 0,
				s3 = 0;

	for (p = 0; p < P; p++)
	{
		size_t		i = ((size_t) t * P + p) * GS_NRES + r;
		double		ch = 0,
					ck = 0,
					own = gov ? pool_kept(c, t, p, r) : 0;

		for (k = 0; k < c->teams[t].nchildren; k++)
		{
			size_t		j = ((size_t) c->teams[t].children[k] * P + p) * GS_NRES + r;

			ch += hp[j];
			ck += kk[j];
		}
		hp[i] = Max(ch, Max(0, own - pdsub[i]));
		kk[i] = Max(ck, own);
		s2 += hp[i];
		s3 += kk[i];
	}
	s3 -= dsub[t * GS_NRES + r];
	s2 = Max(s2, s3);
	if (s2 > *held + GS_EPS)
		*held = s2;
}

/*
 * out[t][r]: what of resource r is kept back from team t (used for
 * leaves), pool by pool, summed over the pools: in each pool, what the
 * subtrees off its path keep back there (hp), except that where a team a
 * on its path has no demand at all in the pool (nor has t, then), all a
 * keeps back there (kk: nothing of it is used) stays idle for t too, and
 * counts instead of what a's subtree keeps back off t's path; the highest
 * such a counts (pool demands only grow up the path, and a's kk is at
 * least its children's). The same figures summed over the pools first and
 * then compared (gs_tree_fair_shares) are never more. Top down, as off.
 */
static void
pool_off(const GsCluster *c, int maxdepth, const double *pdsub, const double *kk, const double *hp,
		 double *out)
{
	int			n = c->nteams,
				P = c->npools,
				t,
				p,
				r,
				d;
	size_t		sz = sizeof(double) * GS_NRES * Max(n, 1) * P;
	double	   *kids = palloc0(sz),
			   *w = palloc(sz),
			   *z = palloc(sz),
				top[GS_NRES];

	/* w: what the subtrees off t's path keep back in the pool (top down) */
	for (p = 0; p < P; p++)
	{
		for (r = 0; r < GS_NRES; r++)
			top[r] = 0;
		for (t = 0; t < n; t++)
			for (r = 0; r < GS_NRES; r++)
			{
				double		h = hp[((size_t) t * P + p) * GS_NRES + r];

				if (c->teams[t].parent < 0)
					top[r] += h;
				else
					kids[((size_t) c->teams[t].parent * P + p) * GS_NRES + r] += h;
			}
		for (d = 0; d <= maxdepth; d++)
			for (t = 0; t < n; t++)
			{
				int			pa = c->teams[t].parent;

				if (c->teams[t].depth != d)
					continue;
				for (r = 0; r < GS_NRES; r++)
				{
					size_t		i = ((size_t) t * P + p) * GS_NRES + r,
								j = ((size_t) pa * P + p) * GS_NRES + r;

					w[i] = (pa < 0 ? top[r] : w[j] + kids[j]) - hp[i];
					/* the highest team on the path with no demand in the pool */
					if (pdsub[i] >= GS_EPS)
						z[i] = w[i];
					else if (pa >= 0 && pdsub[j] < GS_EPS)
						z[i] = z[j];
					else
						z[i] = kk[i] + w[i];
				}
			}
	}
	for (t = 0; t < n; t++)
		for (r = 0; r < GS_NRES; r++)
		{
			out[t * GS_NRES + r] = 0;
			for (p = 0; p < P; p++)
				out[t * GS_NRES + r] += z[((size_t) t * P + p) * GS_NRES + r];
		}
	pfree(kids);
	pfree(w);
	pfree(z);
}

/* A leaf's amounts at dominant share x (of its demand's direction). */
static void
leaf_amounts(const double *demand, double X, double x, double *out)
{
	int			r;

	for (r = 0; r < GS_NRES; r++)
		out[r] = X > 0 ? demand[r] * Min(x / X, 1) : 0;
}

/*
 * Fair allocations over the tree with the quota model the rounds enforce
 * (docs/fairness.md, "Quotas in the fair share"):
 *
 * 1. Floors. A leaf with a quota row starts at the largest part of its
 *    demand (along its direction) within its nominal amount of every
 *    governed resource. Then, deepest level first, every inner team with a
 *    quota row fills its subtree up to its nominal amount: first its free
 *    leaves (those with no quota row on their way up to it: they run as
 *    guaranteed work what its nominal leaves over after the quotas carved
 *    out below it), then the whole subtree, less what its children keep
 *    back (2.), by H-DRF among its members still asking, from where they
 *    stand. With pdemand (leaves' demand per pool, [team][pool][GS_NRES]:
 *    what each holds in the pool plus its pending work eligible for it;
 *    NULL: not per pool), a nominal amount counts only as far as the
 *    demand that may use its pool reaches (tree_nominals).
 * 2. Lending limits. What a subtree keeps back from teams outside it (its
 *    idle nominal, nominal less demand, beyond what it lends, or pool by
 *    pool when larger; the larger of that and what its children keep
 *    back; with pdemand, in each pool the larger of its own and its
 *    children's there, summed over the pools, when that is more:
 *    pool_held) is not there for the leaves off its path (computed first:
 *    it depends on demands alone); a leaf counts it pool by pool too
 *    (pool_off).
 * 3. H-DRF from the floors over the whole cluster, borrowing limits
 *    capping as before: a team above the level keeps its floor, the level
 *    rises among the others until it reaches it.
 *
 * Without any quota row this is gs_hdrf, bit for bit.
 */
void
gs_tree_fair_shares(const GsCluster *c, const double *demand, const double *pdemand, double *alloc)
{
	int			n = c->nteams,
				N = Max(n, 1);
	int32_t    *parent = palloc(sizeof(int32_t) * N);
	double	   *weight = palloc(sizeof(double) * N),
			   *limit = palloc(sizeof(double) * GS_NRES * N),
			   *nom,
			   *lend,
			   *ownheld,
			   *extra,
			   *dsub,
			   *pdsub = NULL,
			   *X,
			   *x,
			   *lim2,
			   *sub,
			   *held,
			   *off,
			   *avail = NULL,
			   *kk = NULL,
			   *hp = NULL,
			   *poff = NULL;
	bool	   *hasq = palloc(sizeof(bool) * N),
			   *frozen;
	int		   *qa;
	int			t,
				r,
				d,
				maxdepth = 0;

	for (t = 0; t < n; t++)
	{
		parent[t] = c->teams[t].parent;
		weight[t] = c->teams[t].weight > 0 ? c->teams[t].weight : 1;
	}
	gs_tree_limits(c, limit);

	/* subtree demand, in all and (with pdemand) per pool */
	dsub = palloc0(sizeof(double) * GS_NRES * N);
	if (pdemand != NULL)
		pdsub = palloc0(sizeof(double) * GS_NRES * N * Max(c->npools, 1));
	for (t = 0; t < n; t++)
	{
		int			a,
					p;

		if (c->teams[t].nchildren > 0)
			continue;
		for (a = t; a >= 0; a = parent[a])
		{
			for (r = 0; r < GS_NRES; r++)
				dsub[a * GS_NRES + r] += demand[t * GS_NRES + r];
			if (pdsub != NULL)
				for (p = 0; p < c->npools; p++)
					for (r = 0; r < GS_NRES; r++)
						pdsub[(a * c->npools + p) * GS_NRES + r] += pdemand[(t * c->npools + p) * GS_NRES + r];
		}
	}
	nom = palloc(sizeof(double) * GS_NRES * N);
	lend = palloc(sizeof(double) * GS_NRES * N);
	ownheld = palloc(sizeof(double) * GS_NRES * N);
	extra = palloc(sizeof(double) * GS_NRES * N);
	if (!tree_nominals(c, dsub, pdsub, nom, lend, ownheld, extra, hasq))
	{
		gs_hdrf(n, parent, weight, demand, limit, c->capacity, alloc);
		goto done;
	}

	/* each leaf's dominant demand X; nearest quota row up */
	X = palloc0(sizeof(double) * N);
	x = palloc0(sizeof(double) * N);
	qa = palloc(sizeof(int) * N);
	for (t = 0; t < n; t++)
	{
		int			a;

		maxdepth = Max(maxdepth, c->teams[t].depth);
		if (c->teams[t].nchildren > 0)
			continue;
		for (r = 0; r < GS_NRES; r++)
			if (c->capacity[r] > 0)
				X[t] = Max(X[t], demand[t * GS_NRES + r] / c->capacity[r]);
		qa[t] = -1;
		for (a = t; a >= 0 && qa[t] < 0; a = parent[a])
			if (hasq[a])
				qa[t] = a;
	}

	/* 2. lending limits: what each subtree keeps back, and off each leaf's path */
	held = palloc0(sizeof(double) * GS_NRES * N);
	off = palloc0(sizeof(double) * GS_NRES * N);
	{
		bool		anyheld = false;
		int			k;

		/*
		 * per pool (with pdsub): what subtree t keeps back there at
		 * least (hp) and with nothing used (kk), as the rounds count it
		 * pool by pool (pool_held)
		 */
		if (pdsub != NULL)
		{
			kk = palloc0(sizeof(double) * GS_NRES * N * c->npools);
			hp = palloc0(sizeof(double) * GS_NRES * N * c->npools);
		}
		for (k = maxdepth; k >= 0; k--)
			for (t = 0; t < n; t++)
			{
				if (c->teams[t].depth != k)
					continue;
				for (r = 0; r < GS_NRES; r++)
				{
					if (hasq[t] && nom[t * GS_NRES + r] >= 0)
						held[t * GS_NRES + r] = Max(held[t * GS_NRES + r], ownheld[t * GS_NRES + r]);
					if (hp != NULL)
						pool_held(c, t, r, hasq[t] && nom[t * GS_NRES + r] >= 0, dsub, pdsub, kk, hp,
								  &held[t * GS_NRES + r]);
					if (held[t * GS_NRES + r] > 0)
					{
						anyheld = true;
						if (parent[t] >= 0)
							off[parent[t] * GS_NRES + r] += held[t * GS_NRES + r];
					}
				}
				/* a parent keeps the larger of its own and its children's */
				if (parent[t] >= 0)
					for (r = 0; r < GS_NRES; r++)
						held[parent[t] * GS_NRES + r] = Max(held[parent[t] * GS_NRES + r],
															off[parent[t] * GS_NRES + r]);
			}
		if (anyheld)
		{
			/* off[t]: what the subtrees off t's path keep back (top down) */
			double		top[GS_NRES] = {0, 0, 0, 0};
			double	   *kids = palloc0(sizeof(double) * GS_NRES * N);

			for (t = 0; t < n; t++)
				for (r = 0; r < GS_NRES; r++)
				{
					if (parent[t] < 0)
						top[r] += held[t * GS_NRES + r];
					else
						kids[parent[t] * GS_NRES + r] += held[t * GS_NRES + r];
				}
			for (k = 0; k <= maxdepth; k++)
				for (t = 0; t < n; t++)
				{
					if (c->teams[t].depth != k)
						continue;
					for (r = 0; r < GS_NRES; r++)
						off[t * GS_NRES + r] = (parent[t] < 0 ? top[r] : off[parent[t] * GS_NRES + r] +
												kids[parent[t] * GS_NRES + r]) - held[t * GS_NRES + r];
				}
			avail = palloc(sizeof(double) * GS_NRES * N);
			if (hp != NULL)
			{
				poff = palloc(sizeof(double) * GS_NRES * N);
				pool_off(c, maxdepth, pdsub, kk, hp, poff);
			}
			for (t = 0; t < n; t++)
				for (r = 0; r < GS_NRES; r++)
				{
					double		o = off[t * GS_NRES + r],
								mine = 0;
					int			a;

					/*
					 * idle quota on t's own path kept back in a pool its
					 * demand may not use: not there for t either (the
					 * larger of that and off, a lower bound of both)
					 */
					for (a = t; a >= 0; a = parent[a])
						mine = Max(mine, extra[a * GS_NRES + r]);
					if (mine > 0 && mine > o)
						o = mine;
					/* pool by pool when that is more (pool_off) */
					if (poff != NULL && c->teams[t].nchildren == 0 && poff[t * GS_NRES + r] > o + GS_EPS)
						o = poff[t * GS_NRES + r];
					avail[t * GS_NRES + r] = c->capacity[r] > 0 ? 1 - o / c->capacity[r] : 1;
				}
			pfree(kids);
		}
	}

	/* 1. floors: leaves' own */
	for (t = 0; t < n; t++)
	{
		double		f = 1;

		if (c->teams[t].nchildren > 0 || !hasq[t] || X[t] <= 0)
			continue;
		for (r = 0; r < GS_NRES; r++)
			if (c->capacity[r] > 0 && nom[t * GS_NRES + r] >= 0 && demand[t * GS_NRES + r] > 0)
				f = Min(f, nom[t * GS_NRES + r] / demand[t * GS_NRES + r]);
		x[t] = X[t] * Max(f, 0);
	}
	/* inner teams' nominal quotas, deepest first, two fillings per level */
	frozen = palloc(sizeof(bool) * N);
	lim2 = palloc(sizeof(double) * GS_NRES * N);
	sub = palloc(sizeof(double) * GS_NRES * N);
	for (d = maxdepth - 1; d >= 0; d--)
	{
		int			pass;
		bool		some = false;

		for (t = 0; t < n; t++)
			if (c->teams[t].depth == d && c->teams[t].nchildren > 0 && hasq[t])
				some = true;
		if (!some)
			continue;
		for (pass = 0; pass < 2; pass++)
		{
			int			l;

			/* what each subtree holds now */
			memset(sub, 0, sizeof(double) * GS_NRES * N);
			for (l = 0; l < n; l++)
			{
				double		amt[GS_NRES];
				int			a;

				if (c->teams[l].nchildren > 0)
					continue;
				leaf_amounts(&demand[l * GS_NRES], X[l], x[l], amt);
				for (a = l; a >= 0; a = parent[a])
					for (r = 0; r < GS_NRES; r++)
						sub[a * GS_NRES + r] += amt[r];
			}
			memcpy(lim2, limit, sizeof(double) * GS_NRES * N);
			for (t = 0; t < n; t++)
			{
				if (c->teams[t].depth != d || c->teams[t].nchildren == 0 || !hasq[t])
					continue;
				for (r = 0; r < GS_NRES; r++)
				{
					double		cap = nom[t * GS_NRES + r];

					if (cap < 0)
						continue;
					if (pass == 0)
					{
						/* its nominal less the quotas carved out below it */
						double		carved = 0;

						for (l = 0; l < n; l++)
							if (l != t && hasq[l] && nom[l * GS_NRES + r] > 0 && parent[l] >= 0 &&
								gs_team_within(c, l, t))
							{
								int			a = parent[l];

								while (a != t && !hasq[a])
									a = parent[a];
								if (a == t)
									carved += nom[l * GS_NRES + r];
							}
						cap = sub[t * GS_NRES + r] + Max(cap - carved, 0);
					}
					else
					{
						/* less what its children keep back (from each other too) */
						for (l = 0; l < n; l++)
							if (parent[l] == t)
								cap -= held[l * GS_NRES + r];
						cap = Max(cap, sub[t * GS_NRES + r]);
					}
					if (lim2[t * GS_NRES + r] < 0 || cap < lim2[t * GS_NRES + r])
						lim2[t * GS_NRES + r] = cap;
				}
			}
			/* who grows: the free leaves (pass 0) or every leaf (pass 1) of those teams */
			for (l = 0; l < n; l++)
			{
				int			a = l;

				frozen[l] = true;
				if (c->teams[l].nchildren > 0)
					continue;
				while (a >= 0 && c->teams[a].depth > d)
					a = parent[a];
				if (a < 0 || c->teams[a].depth != d || !hasq[a] || a == l)
					continue;
				frozen[l] = pass == 0 ? qa[l] != a : false;
			}
			hdrf_fill(n, parent, weight, demand, lim2, c->capacity, alloc, x, frozen, NULL);
		}
	}

	/* 3. H-DRF from the floors */
	hdrf_fill(n, parent, weight, demand, limit, c->capacity, alloc, x, NULL, avail);

done:
	pfree(parent);
	pfree(weight);
	pfree(limit);
}

double
gs_alloc_share(const GsCluster *c, const double *a)
{
	double		ds = 0;
	int			r;

	for (r = 0; r < GS_NRES; r++)
		if (c->capacity[r] > 0)
			ds = Max(ds, a[r] / c->capacity[r]);
	return ds;
}


uint64_t
gs_guaranteed_pools(const GsCluster *c, const GsJob *j)
{
	uint64_t	elig = gs_eligible_pools(c, j);
	uint64_t	m = 0;
	double		d[GS_NRES];
	int			i;

	if (j->tix < 0)
		return 0;
	quota_demand_of(j, d);
	if (c->tree)
	{
		int			at,
					res;

		for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
			if ((elig & (UINT64_C(1) << i)) && tree_within_nominal(c, j->tix, i, d, &at, &res, NULL))
				m |= UINT64_C(1) << i;
		return m;
	}
	for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
		if ((elig & (UINT64_C(1) << i)) &&
			within_nominal(&c->quotas[j->tix * c->npools + i], d))
			m |= UINT64_C(1) << i;
	return m;
}

/*
 * gs_guaranteed_pools for a tree, with the slack of each level of the
 * job's path (slack[level * GS_NRES + r], level 0 its team, up to
 * GS_TREE_SLACK_DEPTH levels): how much more use of its subtree the answer
 * survives. A term of the nominal check at team t (its guaranteed use, plus
 * the gang, plus what it keeps for its other children) changes only with
 * use inside t's subtree, and rises by at most what is added there: a
 * child's use counts in its parent's at most up to the child's nominal, and
 * what it adds below that the parent no longer keeps for it. So while use
 * only grows (no c->use_drops) and every level's subtree grew by less than
 * that level's slack (c->use_growth), the pools stay the same; a pool
 * refused stays refused.
 */
uint64_t
gs_tree_guaranteed_pools(const GsCluster *c, const GsJob *j, double *slack)
{
	uint64_t	elig = gs_eligible_pools(c, j);
	uint64_t	m = 0;
	double		d[GS_NRES];
	double		s[GS_TREE_SLACK_DEPTH * GS_NRES];
	int			i,
				k;

	for (k = 0; k < GS_TREE_SLACK_DEPTH * GS_NRES; k++)
		slack[k] = 1e300;
	if (j->tix < 0)
		return 0;
	quota_demand_of(j, d);
	for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
	{
		int			at,
					res;

		if (!(elig & (UINT64_C(1) << i)))
			continue;
		for (k = 0; k < GS_TREE_SLACK_DEPTH * GS_NRES; k++)
			s[k] = 1e300;
		if (tree_within_nominal(c, j->tix, i, d, &at, &res, s))
		{
			m |= UINT64_C(1) << i;
			for (k = 0; k < GS_TREE_SLACK_DEPTH * GS_NRES; k++)
				slack[k] = Min(slack[k], s[k]);
		}
	}
	return m;
}

bool
gs_beyond_nominal(const GsCluster *c, const GsJob *j, int pool)
{
	double		d[GS_NRES];

	demand_of(j, d);
	if (c->tree)
	{
		int			at,
					res;

		return !tree_within_nominal(c, j->tix, pool, d, &at, &res, NULL);
	}
	return !within_nominal(&c->quotas[j->tix * c->npools + pool], d);
}

/* Idle quota of other teams in the pool that they do not lend. */
static void
protected_idle(const GsCluster *c, int pool, int except_tix, double out[GS_NRES])
{
	int			t,
				r;

	for (r = 0; r < GS_NRES; r++)
		out[r] = 0;
	for (t = 0; t < c->nteams; t++)
	{
		const GsQuota *q = &c->quotas[t * c->npools + pool];

		if (t == except_tix || !q->has)
			continue;
		for (r = 0; r < GS_NRES; r++)
			if (q->nominal[r] >= 0 && q->lend[r] >= 0)
				out[r] += Max(0, (q->nominal[r] - q->lend[r]) - q->used[r]);
	}
}

/*
 * Name the teams whose non-lendable idle quota of resource r in the pool
 * is held back: "team nlp does not lend", "teams nlp and speech do not
 * lend", "teams a, b, c and 2 more do not lend".
 */
static void
append_non_lenders(StringInfo s, const GsCluster *c, int pool, int except_tix, int r)
{
	int			t,
				n = 0,
				shown = 0;

	for (t = 0; t < c->nteams; t++)
	{
		const GsQuota *q = &c->quotas[t * c->npools + pool];

		if (t != except_tix && q->has && q->nominal[r] >= 0 && q->lend[r] >= 0 &&
			(q->nominal[r] - q->lend[r]) - q->used[r] > GS_EPS)
			n++;
	}
	appendStringInfoString(s, n == 1 ? "team " : "teams ");
	for (t = 0; t < c->nteams && shown < 3; t++)
	{
		const GsQuota *q = &c->quotas[t * c->npools + pool];

		if (t == except_tix || !q->has || q->nominal[r] < 0 || q->lend[r] < 0 ||
			(q->nominal[r] - q->lend[r]) - q->used[r] <= GS_EPS)
			continue;
		if (shown > 0)
			appendStringInfoString(s, (shown == n - 1) ? " and " : ", ");
		appendStringInfoString(s, c->teams[t].name);
		shown++;
	}
	if (n > shown)
		appendStringInfo(s, " and %d more", n - shown);
	appendStringInfoString(s, n == 1 ? " does" : " do");
}

static uint64_t
borrow_pools(const GsCluster *c, const GsJob *j, char **why, uint64_t *held)
{
	uint64_t	elig = gs_eligible_pools(c, j);
	uint64_t	m = 0;
	double		d[GS_NRES];
	int			i,
				r;
	StringInfoData s;
	const char *team = (j->tix >= 0) ? c->teams[j->tix].name : "?";

	*why = NULL;
	if (j->tix < 0 || elig == 0)
		return 0;
	quota_demand_of(j, d);
	if (c->tree)
		return tree_borrow_pools(unconstify(GsCluster *, c), j, elig, d, why, held);
	if (!j->preemptible)
	{
		initStringInfo(&s);
		for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
		{
			const GsQuota *q = &c->quotas[j->tix * c->npools + i];

			if (!(elig & (UINT64_C(1) << i)))
				continue;
			if (!q->has)
				appendStringInfo(&s, "team %s has no quota in pool %s and non-preemptible work runs only within nominal quota",
								 team, c->pools[i].name);
			else
			{
				/* the first governed resource the job would overrun, GPUs if none */
				int			over = GS_GPU;

				for (r = 0; r < GS_NRES; r++)
					if (q->nominal[r] >= 0 && q->used[r] + d[r] > q->nominal[r] + GS_EPS)
					{
						over = r;
						break;
					}
				appendStringInfo(&s, "team %s uses %g of its %g %s in pool %s; the job needs %g more and, not being preemptible, may not borrow",
								 team, q->used[over], q->nominal[over], res_name[over], c->pools[i].name, d[over]);
			}
			break;
		}
		*why = s.data;
		return 0;
	}
	for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
	{
		const GsQuota *q = &c->quotas[j->tix * c->npools + i];
		const GsPool *pl = &c->pools[i];
		double		prot[GS_NRES];
		bool		ok = true;

		if (!(elig & (UINT64_C(1) << i)))
			continue;
		for (r = 0; r < GS_NRES && ok; r++)
		{
			if (q->has && q->nominal[r] >= 0 && q->borrow[r] >= 0 &&
				q->used[r] + d[r] > q->nominal[r] + q->borrow[r] + GS_EPS)
			{
				ok = false;
				if (*why == NULL)
				{
					initStringInfo(&s);
					appendStringInfo(&s, "team %s holds %g %s in pool %s and may not borrow %g more: nominal quota %g, borrowing limit %g",
									 team, q->used[r], res_name[r], pl->name, d[r], q->nominal[r], q->borrow[r]);
					*why = s.data;
				}
			}
		}
		if (!ok)
			continue;
		protected_idle(c, i, j->tix, prot);
		for (r = 0; r < GS_NRES && ok; r++)
		{
			double		left = pl->capacity[r] - pl->used[r] - d[r];

			if (d[r] > 0 && prot[r] > GS_EPS && left < prot[r] - GS_EPS)
			{
				ok = false;
				*held |= UINT64_C(1) << i;
				if (*why == NULL)
				{
					initStringInfo(&s);
					appendStringInfo(&s, "borrowing %g %s in pool %s would use idle quota that ",
									 d[r], res_name[r], pl->name);
					append_non_lenders(&s, c, i, j->tix, r);
					appendStringInfo(&s, " not lend (%g held back, %g free)",
									 prot[r], Max(0, pl->capacity[r] - pl->used[r]));
					*why = s.data;
				}
			}
		}
		if (ok)
			m |= UINT64_C(1) << i;
	}
	if (m != 0)
		*why = NULL;
	return m;
}

uint64_t
gs_borrow_pools(const GsCluster *c, const GsJob *j, char **why)
{
	uint64_t	held = 0;

	return borrow_pools(c, j, why, &held);
}

/*
 * Pools where the job's borrowing limits (at every level) allow it, but
 * borrowing the free capacity would use idle quota that another team (a
 * subtree off its path) does not lend: 0 when it may borrow somewhere, or
 * is not preemptible. There it may still preempt by fair share, as long
 * as the held-back amount stays idle (gs_held_back).
 */
uint64_t
gs_held_back_pools(const GsCluster *c, const GsJob *j)
{
	uint64_t	held = 0;
	char	   *why;

	if (borrow_pools(c, j, &why, &held) != 0)
		return 0;
	return held;
}

/* A subtree's held-back amount with `freed` (per team, or NULL) out of its teams' use; *sub: its freed total. */
static double
held_after(const GsCluster *c, int pool, int t, int r, const double *freed, double *sub)
{
	const GsQuota *q = QUOTA(c, t, pool);
	double		fr = freed ? freed[t * GS_NRES + r] : 0,
				sum = 0,
				own = 0,
				ch;
	int			k;

	for (k = 0; k < c->teams[t].nchildren; k++)
	{
		sum += held_after(c, pool, c->teams[t].children[k], r, freed, &ch);
		fr += ch;
	}
	*sub = fr;
	if (q->has && q->nominal[r] >= 0 && q->lend[r] >= 0)
		own = Max(0, (q->nominal[r] - q->lend[r]) - (q->used[r] - fr));
	return Max(own, sum);
}

/*
 * What other teams hold back of resource r in the pool from team tix's
 * work (the unlent idle part of their nominal quota; in a tree, of every
 * subtree off its path), with `freed` ([team][GS_NRES], the use a victim
 * search takes out; NULL for none) out of their use.
 */
double
gs_held_back(const GsCluster *c, int tix, int pool, int r, const double *freed)
{
	double		h = 0,
				sub;
	int			t,
				k,
				noff;

	if (!c->tree)
	{
		for (t = 0; t < c->nteams; t++)
		{
			const GsQuota *q = QUOTA(c, t, pool);

			if (t != tix && q->has && q->nominal[r] >= 0 && q->lend[r] >= 0)
				h += Max(0, (q->nominal[r] - q->lend[r]) - (q->used[r] - (freed ? freed[t * GS_NRES + r] : 0)));
		}
		return h;
	}
	{
		const int32_t *off = off_path_of(unconstify(GsCluster *, c), tix, &noff);

		for (k = 0; k < noff; k++)
			h += held_after(c, pool, off[k], r, freed, &sub);
	}
	return h;
}

double
gs_dominant_share(const GsCluster *c, int tix)
{
	double		ds = 0;
	int			r;

	if (tix < 0)
		return 0;
	for (r = 0; r < GS_NRES; r++)
		if (c->capacity[r] > 0)
			ds = Max(ds, c->teams[tix].used[r] / c->capacity[r]);
	return ds / c->teams[tix].weight;
}

/*
 * The weighted max-min fair level of dominant resource fairness (progressive
 * filling): the largest L such that every team t, given min(1, L / D_t) of
 * its demand (D_t its demand's weighted dominant share), fits the cluster's
 * capacity. A team is entitled to a weighted dominant share of min(L, D_t).
 * Returns a huge number when all demand fits.
 */
double
gs_fair_level(const GsCluster *c, const double *demand)
{
	double	   *dw = palloc0(sizeof(double) * Max(c->nteams, 1));
	double		lo = 0,
				hi = 0;
	int			t,
				r,
				it;

	for (t = 0; t < c->nteams; t++)
	{
		double		ds = 0;

		for (r = 0; r < GS_NRES; r++)
			if (c->capacity[r] > 0)
				ds = Max(ds, demand[t * GS_NRES + r] / c->capacity[r]);
		dw[t] = ds / c->teams[t].weight;
		hi = Max(hi, dw[t]);
	}
	for (it = 0; it <= 60; it++)
	{
		double		level = it == 0 ? hi : (lo + hi) / 2;
		bool		fit = true;

		for (r = 0; r < GS_NRES && fit; r++)
		{
			double		sum = 0;

			if (c->capacity[r] <= 0)
				continue;
			for (t = 0; t < c->nteams; t++)
				if (dw[t] > 0)
					sum += demand[t * GS_NRES + r] * Min(1.0, level / dw[t]);
			fit = sum <= c->capacity[r] * (1 + GS_SHARE_EPS);
		}
		if (it == 0 && fit)
		{
			pfree(dw);
			return 1e300;		/* no contention */
		}
		if (it == 0)
			continue;
		if (fit)
			lo = level;
		else
			hi = level;
	}
	pfree(dw);
	return lo;
}

void
gs_account(GsCluster *c, const GsJob *j, int pool)
{
	double		d[GS_NRES];
	int			r;

	demand_of(j, d);
	if (c->tree)
	{
		for (r = 0; r < GS_NRES; r++)
			c->pools[pool].used[r] += d[r];
		if (j->tix >= 0)
			tree_add(c, j->tix, pool, d, 1.0);
		return;
	}
	for (r = 0; r < GS_NRES; r++)
	{
		c->pools[pool].used[r] += d[r];
		if (j->tix >= 0)
		{
			c->teams[j->tix].used[r] += d[r];
			c->quotas[j->tix * c->npools + pool].used[r] += d[r];
		}
	}
}

void
gs_unaccount_running(GsCluster *c, const GsRunning *r)
{
	int			k;

	if (r->pool < 0)
		return;
	if (c->tree)
	{
		for (k = 0; k < GS_NRES; k++)
			c->pools[r->pool].used[k] -= r->demand[k];
		if (r->tix >= 0)
			tree_add(c, r->tix, r->pool, r->demand, -1.0);
		return;
	}
	for (k = 0; k < GS_NRES; k++)
	{
		c->pools[r->pool].used[k] -= r->demand[k];
		if (r->tix >= 0)
		{
			c->teams[r->tix].used[k] -= r->demand[k];
			c->quotas[r->tix * c->npools + r->pool].used[k] -= r->demand[k];
		}
	}
}
