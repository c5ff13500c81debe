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

uint64_t
gs_guaranteed_pools(const GsCluster *c, const GsJob *j)
{
	uint64_t	elig = gs_eligible_pools(c, j);
	uint64_t	m = 0;
	double		d[GS_NRES];
	int			i;

	if (j->tix < 0)
		return 0;
	demand_of(j, d);
	for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
		if ((elig & (UINT64_C(1) << i)) &&
			within_nominal(&c->quotas[j->tix * c->npools + i], d))
			m |= UINT64_C(1) << i;
	return m;
}

bool
gs_beyond_nominal(const GsCluster *c, const GsJob *j, int pool)
{
	double		d[GS_NRES];

	demand_of(j, d);
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

uint64_t
gs_borrow_pools(const GsCluster *c, const GsJob *j, char **why)
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
	demand_of(j, d);
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
