/*
 * preempt.c — victim selection.
 *
 * Triggers, for a job J that did not fit:
 *  - reclaim: J was tried within its team's nominal quota; victims are other
 *    teams' borrowed gangs;
 *  - fair share: J would borrow; victims are other teams' borrowed gangs
 *    whose team would still hold a higher weighted dominant share than J's
 *    team after the swap (checked per candidate, then for each plan with
 *    all of a team's victims released);
 *  - priority: victims are gangs of J's own team with lower priority.
 * Never a non-preemptible gang, never another team's guaranteed work, never
 * a gang that started less than gangsched.min_runtime ago, never one outside
 * the pools J may use.
 *
 * Victims are whole gangs. A plan is a set of victims such that their
 * capacity plus what is free is a valid placement for J (checked by placing
 * J on the model with the victims virtually released: shape, spans,
 * locality, slices and host resources all count). Plans are built greedily
 * in cost order (lowest priority, then least lost work — GPU-seconds since
 * the last checkpoint plus the restart cost — then newest) over all
 * candidates and over the candidates of each promising topology domain, and
 * from single victims; each plan is then pruned of victims it does not need.
 * The cheapest plan wins: lowest highest-priority, then least lost work,
 * then fewest victims.
 */
#include "postgres.h"

#include "fair.h"
#include "preempt.h"

#define MAX_DOMAINS_PER_DEPTH 4
#define MAX_SINGLES 16
#define MAX_CANDIDATES 4096

typedef struct Cand
{
	GsRunning  *r;
	double		lost;			/* GPU-seconds lost if preempted now */
} Cand;

typedef struct Plan
{
	int			n;
	GsRunning **v;
	int			max_prio;
	double		lost;
} Plan;

static int
cmp_cand(const void *a, const void *b)
{
	const Cand *x = a;
	const Cand *y = b;

	if (x->r->priority != y->r->priority)
		return x->r->priority < y->r->priority ? -1 : 1;
	if (x->lost != y->lost)
		return x->lost < y->lost ? -1 : 1;
	if (x->r->since != y->r->since)
		return x->r->since > y->r->since ? -1 : 1;	/* newest first */
	return x->r->id < y->r->id ? -1 : 1;
}

static int
cmp_larger(const void *a, const void *b)
{
	const Cand *x = a;
	const Cand *y = b;

	if (x->r->gpus_total != y->r->gpus_total)
		return x->r->gpus_total > y->r->gpus_total ? -1 : 1;
	return cmp_cand(a, b);
}

static bool
plan_better(const Plan *a, const Plan *b)
{
	if (b->n == 0)
		return a->n > 0;
	if (a->max_prio != b->max_prio)
		return a->max_prio < b->max_prio;
	if (a->lost != b->lost)
		return a->lost < b->lost - 1e-6;
	return a->n < b->n;
}

/* The search in progress (a job blocked by its own team's quota). */
static GsState *search_state = NULL;

/*
 * Placement probes one search may make. A search that has not found room
 * within them gives up: a round bounds its time, the job waits for the
 * next round (and the starvation guard).
 */
#define MAX_PROBES_PER_SEARCH 48
static int	probes_left = 0;

/*
 * For a job its own team's quota blocks: with the victims now released,
 * would the team be within its limit (nominal, plus the borrowing limit
 * for preemptible work) in some pool the job may use?
 */
static bool
quota_after_swap(GsState *st, GsJob *j)
{
	GsCluster  *c = st->cluster;
	double		jd[GS_NRES] = {j->gpus * j->workers, j->cpus * j->workers, j->mem * j->workers, j->net * j->workers};
	int			pl,
				r,
				i;

	for (pl = 0; pl < c->npools && pl < 64; pl++)
	{
		GsQuota    *q = &c->quotas[j->tix * c->npools + pl];
		double		freed[GS_NRES] = {0, 0, 0, 0};
		bool		ok = true;

		if (!(j->pool_mask & (UINT64_C(1) << pl)))
			continue;
		for (i = 0; i < st->nrunning; i++)
			if (st->running[i].released && st->running[i].tix == j->tix && st->running[i].pool == pl)
				for (r = 0; r < GS_NRES; r++)
					freed[r] += st->running[i].demand[r];
		for (r = 0; r < GS_NRES && ok; r++)
		{
			double		limit;

			if (q->nominal[r] < 0 && r > 0)
				continue;		/* not governed */
			limit = q->has ? Max(q->nominal[r], 0) : 0;
			if (j->preemptible)
				limit = (q->has && q->borrow[r] >= 0) ? limit + q->borrow[r] : 1e300;
			if (q->used[r] - freed[r] + jd[r] > limit + 1e-9)
				ok = false;
		}
		if (ok)
			return true;
	}
	return false;
}

static bool
fits_any(GsPlacer *p, GsJob *j, bool budgeted)
{
	if (j->quota_blocked && search_state != NULL && !quota_after_swap(search_state, j))
		return false;
	if (budgeted)
	{
		if (probes_left <= 0)
			return false;
		probes_left--;
	}
	return gs_probe(p, j, NULL);
}

/* Looking for room: within the search's probe budget. */
static bool
fits(GsPlacer *p, GsJob *j)
{
	return fits_any(p, j, true);
}

/* Pruning a plan that works: never cut short, or victims stay that are not needed. */
static bool
fits_pruning(GsPlacer *p, GsJob *j)
{
	return fits_any(p, j, false);
}

/* DS of team t with `delta` added to its use (resource-wise). */
static double
share_with(const GsCluster *c, int t, const double delta[GS_NRES], double sign)
{
	double		ds = 0;
	int			r;

	for (r = 0; r < GS_NRES; r++)
		if (c->capacity[r] > 0)
			ds = Max(ds, (c->teams[t].used[r] + sign * delta[r]) / c->capacity[r]);
	return ds / c->teams[t].weight;
}

/*
 * The fair-share test holds for the whole plan, not only for each victim
 * alone: with all of a team's victims in the plan released, J's team (with
 * J) must still hold a lower weighted dominant share than that team. Only
 * for a borrowing J; victims of J's own team are priority victims.
 */
static bool
plan_fair(const GsCluster *c, const GsJob *j, const Plan *pl, double my_after)
{
	int			k,
				m,
				r;

	if (!j->try_borrowing)
		return true;
	for (k = 0; k < pl->n; k++)
	{
		int			t = pl->v[k]->tix;
		double		d[GS_NRES] = {0};
		bool		first = true;

		if (t < 0 || t == j->tix)
			continue;
		for (m = 0; m < k; m++)
			if (pl->v[m]->tix == t)
				first = false;
		if (!first)
			continue;			/* each team once, at its first victim */
		for (m = k; m < pl->n; m++)
			if (pl->v[m]->tix == t)
				for (r = 0; r < GS_NRES; r++)
					d[r] += pl->v[m]->demand[r];
		if (!(my_after < share_with(c, t, d, -1.0) - 1e-12))
			return false;
	}
	return true;
}

/*
 * Greedy plan over cands[0..n) (already in cost order): release victims
 * until J fits, then restore those it does not need. Leaves the model as it
 * found it. Returns false if even all of them are not enough.
 */
static bool
greedy_plan(GsPlacer *p, GsJob *j, Cand *cands, int n, double free_gpus, Plan *out)
{
	int			k,
				used = 0;
	bool		ok = false;
	GsRunning **chosen = palloc(sizeof(GsRunning *) * Max(n, 1));
	double		need = j->gpus * j->workers;
	double		have = free_gpus;
	double		next_try = need;

	for (k = 0; k < n; k++)
	{
		if (cands[k].r->taken || cands[k].r->released)
			continue;
		gs_model_release(p, cands[k].r, true);
		chosen[used++] = cands[k].r;
		have += cands[k].r->gpus_total;
		/*
		 * Placing is only worth trying once enough GPUs could be free, and
		 * after a try that failed only once a fifth more is: the probes grow
		 * with the log of the victims released, not with their number.
		 */
		if (have + 1e-9 >= next_try)
		{
			if (fits(p, j))
			{
				ok = true;
				break;
			}
			next_try = have * 1.2;
		}
	}
	/* the last releases may have made room without a try */
	if (!ok && used > 0 && have + 1e-9 >= need && fits(p, j))
		ok = true;
	if (ok)
	{
		/* prune: most expensive first, keep out what is not needed */
		for (k = used - 1; k >= 0; k--)
		{
			if (used == 1)
				break;
			gs_model_release(p, chosen[k], false);
			if (fits_pruning(p, j))
			{
				chosen[k] = NULL;
				continue;
			}
			gs_model_release(p, chosen[k], true);
		}
	}
	out->n = 0;
	out->max_prio = INT32_MIN;
	out->lost = 0;
	out->v = palloc(sizeof(GsRunning *) * Max(used, 1));
	for (k = 0; k < used; k++)
	{
		if (chosen[k] == NULL)
			continue;
		if (ok)
		{
			int			c;

			out->v[out->n++] = chosen[k];
			out->max_prio = Max(out->max_prio, chosen[k]->priority);
			for (c = 0; c < n; c++)
				if (cands[c].r == chosen[k])
					out->lost += cands[c].lost;
		}
		gs_model_release(p, chosen[k], false);
	}
	pfree(chosen);
	return ok && out->n > 0;
}

/*
 * After a nomination the model holds both the victims (still running) and
 * the preemptor's planned placement; on each node the host resources they
 * both use count once, the larger of the two.
 */
static void
credit_replaced(GsPlacer *p, GsCluster *c, GsJob *j, Plan *plan)
{
	int			w,
				i,
				k;

	for (w = 0; w < j->workers; w++)
	{
		int			ni = j->assign[w].node;
		double		jc = 0,
					jm = 0,
					jn = 0,
					vc = 0,
					vm = 0,
					vn = 0;
		bool		first = true;

		for (k = 0; k < w; k++)
			if (j->assign[k].node == ni)
				first = false;
		if (!first)
			continue;			/* each node once */
		for (k = 0; k < j->workers; k++)
			if (j->assign[k].node == ni)
			{
				jc += j->cpus;
				jm += j->mem;
				jn += j->net;
			}
		for (i = 0; i < plan->n; i++)
			for (k = 0; k < plan->v[i]->nalloc; k++)
				if (plan->v[i]->allocs[k].node == ni)
				{
					vc += plan->v[i]->allocs[k].cpus;
					vm += plan->v[i]->allocs[k].mem;
					vn += plan->v[i]->allocs[k].net;
				}
		gs_model_credit(p, ni, Min(jc, vc), Min(jm, vm), Min(jn, vn));
	}
}

bool
gs_preempt(GsPlacer *p, GsState *st, GsJob *j, int restart_cost_s, int min_runtime_s)
{
	GsCluster  *c = st->cluster;
	Cand	   *cands;
	int			nc = 0,
				i,
				d;
	double		jd[GS_NRES] = {j->gpus * j->workers, j->cpus * j->workers, j->mem * j->workers, j->net * j->workers};
	double		my_after;
	double		free_gpus = 0;
	Plan		best = {0},
				plan;
	GsWhy		why;

	if (j->tix < 0)
		return false;
	if (!st->running_loaded)
		return false;
	my_after = share_with(c, j->tix, jd, 1.0);
	for (i = 0; i < c->npools && i < 64; i++)
		if (j->pool_mask & (UINT64_C(1) << i))
			free_gpus += Max(c->pools[i].capacity[GS_GPU] - c->pools[i].used[GS_GPU], 0);

	cands = palloc(sizeof(Cand) * Max(st->nrunning, 1));
	for (i = 0; i < st->nrunning && nc < MAX_CANDIDATES; i++)
	{
		GsRunning  *r = &st->running[i];
		bool		ok = false;

		if (r->taken || !r->preemptible || r->pool < 0 || r->nalloc == 0)
			continue;
		if (!(j->pool_mask & (UINT64_C(1) << r->pool)))
			continue;
		if (r->since + (int64_t) min_runtime_s * 1000000 > st->now)
			continue;
		if (r->tix == j->tix)
			ok = (r->priority < j->priority);	/* priority */
		else if (j->quota_blocked)
			ok = false;			/* its own quota blocks it: only its team's work */
		else if (r->borrowed && r->tix >= 0)
		{
			if (!j->try_borrowing)
				ok = true;		/* reclaim */
			else
				ok = (my_after < share_with(c, r->tix, r->demand, -1.0) - 1e-12);	/* fair share */
		}
		if (!ok)
			continue;
		cands[nc].r = r;
		cands[nc].lost = r->gpus_total * ((double) Max(st->now - r->checkpoint, 0) / 1000000.0) +
			(double) restart_cost_s * r->gpus_total;
		nc++;
	}
	if (nc == 0)
		return false;
	/* not enough GPUs even if every candidate left: no search */
	{
		double		sum = free_gpus;

		for (i = 0; i < nc; i++)
			sum += cands[i].r->gpus_total;
		if (sum + 1e-9 < jd[GS_GPU])
			return false;
	}
	qsort(cands, nc, sizeof(Cand), cmp_cand);

	search_state = st;
	probes_left = MAX_PROBES_PER_SEARCH;
	gs_placer_ignore_memo(p, true);
	/* all candidates, in cost order */
	if (!greedy_plan(p, j, cands, nc, free_gpus, &best))
	{
		gs_placer_ignore_memo(p, false);
		return false;			/* even all of them would not make room */
	}
	if (!plan_fair(c, j, &best, my_after))
		best.n = 0;				/* look for a plan that keeps the order */

	/* single victims that make room alone (one large rather than many small) */
	{
		Cand	   *big = palloc(sizeof(Cand) * nc);

		memcpy(big, cands, sizeof(Cand) * nc);
		qsort(big, nc, sizeof(Cand), cmp_larger);
		for (i = 0; i < nc && i < MAX_SINGLES; i++)
			if (greedy_plan(p, j, &big[i], 1, free_gpus, &plan) && plan_fair(c, j, &plan, my_after) &&
				plan_better(&plan, &best))
				best = plan;
		pfree(big);
	}

	/* the candidates of one topology domain at a time, most promising first */
	for (d = c->nlevels; d >= 1; d--)
	{
		int			ndom = c->ndom[d];
		double	   *gain = palloc0(sizeof(double) * Max(ndom, 1));
		int			pick;

		for (i = 0; i < nc; i++)
		{
			GsRunning  *r = cands[i].r;
			int			dom = c->nodes[r->allocs[0].node].dom[d];
			int			k;
			bool		one = true;

			for (k = 1; k < r->nalloc; k++)
				if (c->nodes[r->allocs[k].node].dom[d] != dom)
					one = false;
			if (one)
				gain[dom] += r->gpus_total + 1.0;
		}
		for (pick = 0; pick < MAX_DOMAINS_PER_DEPTH; pick++)
		{
			int			bi = -1,
						k,
						m = 0;
			Cand	   *sub;

			for (k = 0; k < ndom; k++)
				if (gain[k] > 0 && (bi < 0 || gain[k] > gain[bi]))
					bi = k;
			if (bi < 0)
				break;
			gain[bi] = 0;
			sub = palloc(sizeof(Cand) * nc);
			for (i = 0; i < nc; i++)
			{
				GsRunning  *r = cands[i].r;
				bool		inside = true;

				for (k = 0; k < r->nalloc; k++)
					if (c->nodes[r->allocs[k].node].dom[d] != bi)
						inside = false;
				if (inside)
					sub[m++] = cands[i];
			}
			if (m > 0 && greedy_plan(p, j, sub, m, free_gpus, &plan) && plan_fair(c, j, &plan, my_after) &&
				plan_better(&plan, &best))
				best = plan;
			pfree(sub);
		}
		pfree(gain);
	}

	if (best.n == 0)
	{
		gs_placer_ignore_memo(p, false);
		return false;			/* no plan keeps the fair-share order */
	}

	/* carry out the best plan in the model: release, place, take back */
	for (i = 0; i < best.n; i++)
		gs_model_release(p, best.v[i], true);
	if (!gs_place(p, j, &why))
	{
		for (i = 0; i < best.n; i++)
			gs_model_release(p, best.v[i], false);
		gs_placer_ignore_memo(p, false);
		return false;
	}
	gs_placer_ignore_memo(p, false);
	j->placed = false;			/* it is nominated, not placed */
	for (i = 0; i < best.n; i++)
	{
		gs_model_release(p, best.v[i], false);
		best.v[i]->taken = true;
	}
	credit_replaced(p, c, j, &best);
	j->nominated = true;
	j->nvictims = best.n;
	j->victims = best.v;
	j->victim_cost = best.lost;
	j->trigger = (best.v[0]->tix == j->tix) ? "priority" : (j->try_borrowing ? "fair share" : "reclaim");
	return true;
}
