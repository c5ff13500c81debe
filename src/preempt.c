/*
 * preempt.c — victim selection.
 *
 * Triggers, for a job J that did not fit:
 *  - reclaim: J was tried within its team's nominal quota; victims are other
 *    teams' borrowed gangs;
 *  - fair share: J would borrow; victims are other teams' borrowed gangs,
 *    under the rule gangsched.fair_preemption chooses (GsFairRule): with
 *    final_share J's team, with J, must end at or below the weighted
 *    dominant share the victim's team keeps without its victims; with
 *    initial_share below the share that team holds before the swap;
 *    also for a job that may not borrow the free capacity only because
 *    other teams do not lend that idle quota (J->held_back, schedule.c):
 *    its plan must leave the held-back amount idle (held_back_after_swap);
 *  - priority: victims are gangs of J's own team with lower priority;
 *  - las: in a team whose order is las (las.h), victims are gangs of J's
 *    own team with J's priority in a later LAS queue than J's (they have
 *    attained more service).
 * Never a non-preemptible gang, never another team's guaranteed work, never
 * a gang that started less than gangsched.min_runtime ago, never one outside
 * the pools J may use. Shares are the round's: victims chosen earlier in the
 * round (or told to stop in earlier rounds) are already out of their team's
 * use, earlier preemptors already in theirs (schedule.c, loader.c).
 *
 * Victims are whole gangs, or replicas of a running elastic gang above its
 * minimum (shrinking instead of preempting, docs/elastic.md#shrinking):
 * gs_split_elastic makes each such gang a chain of entries, one per replica
 * above its minimum, highest-numbered first, then the gang's own entry with
 * its minimum; an entry is taken only after the one before it, so a plan
 * takes a prefix of the chain (a shrink, whose lost work is that of the
 * replicas taken) or all of it (the gang preempted whole). A plan is a set
 * of victims such that their capacity plus what is free is a valid
 * placement for J (checked by placing J on the model with the victims
 * virtually released: shape, spans, locality, slices and host resources
 * all count). What an earlier
 * preemptor of the round left of its victims (whole devices and host
 * resources it does not take over) counts as free for J, which then waits
 * for those victims too: a round chooses no victim it does not need.
 * Plans are built greedily in victim order — the team with the highest
 * weighted dominant share first (recomputed as its victims are counted out),
 * then lowest priority, then least lost work (GPU-seconds since the last
 * checkpoint plus the restart cost), then newest, then job id (a total
 * order; the running gangs are read in job order, so nothing depends on
 * the physical order of rows) — over all candidates and over the
 * candidates of each promising topology domain, and from single victims;
 * each plan is then pruned of victims it does not need. The best
 * plan: victims from the teams furthest above their share, then the lowest
 * highest priority, then the fewest GPUs freed beyond J's need (stranded),
 * then least lost work, then fewest victims. A search that finds nothing
 * says why in J->preempt_refused.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "port/pg_bitutils.h"

#include "fair.h"
#include "preempt.h"

/*
 * Bounds that keep one search's time proportional to the job, not to the
 * cluster (bench/preempt.sh: 2,000 nodes, 1,104 running gangs):
 *  - MAX_DOMAINS_PER_DEPTH: per topology depth, plans are built over the
 *    candidates of this many domains, those whose candidates (wholly inside
 *    the domain) free the most GPUs;
 *  - MAX_SINGLES: this many of the largest candidates are tried as the only
 *    victim (one large gang rather than many small ones);
 *  - MAX_CANDIDATES: candidates a search builds plans from: the first this
 *    many in victim order (cmp_cand, a total order ending in job id), not
 *    the first read, so the choice does not depend on the running list's
 *    order (a cluster has fewer gangs than this many in the benchmarks; a
 *    larger one still gets a plan from them).
 */
#define MAX_DOMAINS_PER_DEPTH 4
#define MAX_SINGLES 16
#define MAX_CANDIDATES 4096

typedef struct Cand
{
	GsRunning  *r;
	double		lost;			/* GPU-seconds lost if preempted now */
	double		share;			/* its team's weighted dominant share at the search's start */
	int			lcad;			/* trees: depth of its team's lowest common ancestor with J's, -1 none (flat: -1) */
} Cand;

typedef struct Plan
{
	int			n;
	GsRunning **v;
	int			max_prio;
	double		lost;
	double		gpus;			/* the victims' GPUs */
	double		team_key;		/* the lowest share among the victims' teams */
} Plan;

/* Within one team: lowest priority, then least lost work, then newest. */
static int
cmp_in_team(const Cand *x, const Cand *y)
{
	if (x->r->priority != y->r->priority)
		return x->r->priority < y->r->priority ? -1 : 1;
	if (x->r->las_queue != y->r->las_queue)
		return x->r->las_queue > y->r->las_queue ? -1 : 1;	/* most attained first */
	if (x->lost != y->lost)
		return x->lost < y->lost ? -1 : 1;
	if (x->r->since != y->r->since)
		return x->r->since > y->r->since ? -1 : 1;	/* newest first */
	if (x->r->id != y->r->id)
		return x->r->id < y->r->id ? -1 : 1;
	return x->r->chain_pos < y->r->chain_pos ? -1 : 1;	/* one gang's chain in its order */
}

/* Victim order: the team furthest above its share first, then as in a team. */
static int
cmp_cand(const void *a, const void *b)
{
	const Cand *x = a;
	const Cand *y = b;

	if (x->lcad != y->lcad)
		return x->lcad < y->lcad ? -1 : 1;	/* trees: furthest from J's team first */
	if (x->share > y->share + GS_SHARE_EPS)
		return -1;
	if (x->share < y->share - GS_SHARE_EPS)
		return 1;
	if (x->r->tix != y->r->tix)
		return x->r->tix < y->r->tix ? -1 : 1;
	return cmp_in_team(x, y);
}

/* A gang's GPUs from this entry to the end of its chain (a gang not split: its own). */
static double
chain_gpus(const GsRunning *r)
{
	double		g = 0;

	for (; r != NULL; r = r->chain_next)
		g += r->gpus_total;
	return g;
}

static int
cmp_larger(const void *a, const void *b)
{
	const Cand *x = a;
	const Cand *y = b;
	double		gx = chain_gpus(x->r),
				gy = chain_gpus(y->r);

	if (gx != gy)
		return gx > gy ? -1 : 1;
	return cmp_cand(a, b);
}

/*
 * May an entry of a split gang be released in a plan now? Only after the
 * one before it in its chain (a gang not split: always).
 */
static inline bool
chain_ready(const GsRunning *r)
{
	return r->chain_prev == NULL || r->chain_prev->released;
}

/* May it leave a plan? Not while the next entry of its chain is in it. */
static inline bool
chain_removable(const GsRunning *r)
{
	return r->chain_next == NULL || !r->chain_next->released;
}

/* GPUs a plan frees beyond the job's need: left idle unless a later preemptor uses them. */
static double
overshoot(const Plan *pl, double need)
{
	return Max(pl->gpus - need, 0);
}

static bool
plan_better(const Plan *a, const Plan *b, double need)
{
	if (b->n == 0)
		return a->n > 0;
	if (a->team_key > b->team_key + GS_SHARE_EPS)
		return true;
	if (a->team_key < b->team_key - GS_SHARE_EPS)
		return false;
	if (a->max_prio != b->max_prio)
		return a->max_prio < b->max_prio;
	if (overshoot(a, need) != overshoot(b, need))
		return overshoot(a, need) < overshoot(b, need);
	if (a->lost != b->lost)
		return a->lost < b->lost - GS_COST_EPS;
	return a->n < b->n;
}

/*
 * Placement probes one search may make. A search that has not found room
 * within them gives up: a round bounds its time, the job waits for the
 * next round (and the starvation guard).
 */
#define MAX_PROBES_PER_SEARCH 48

/* One victim search: the job, its rule, its team's share with it, and its budget. */
typedef struct Search
{
	GsPlacer   *p;
	GsState    *st;
	GsCluster  *c;
	GsJob	   *j;
	GsFairRule	rule;
	double		my_after;		/* J's team's weighted share with J */
	double	   *rem;			/* [nteams][GS_NRES]: what the plan being built takes from each team */
	int			fair_skips;		/* candidates a greedy plan left out for the rule */
	int			probes_left;	/* of MAX_PROBES_PER_SEARCH */
	int64	   *probes;			/* the caller's count of probes made */
	bool		hysteresis;		/* gangsched.fair_preemption_hysteresis */
	double		level;			/* the round's fair level (gs_fair_level) */
	double		my_before;		/* J's team's weighted share without J */
	int			floor_skips;	/* candidates a greedy plan left out for the entitlement floor */
	/* team trees only (NULL otherwise), per team t: */
	int		   *side;			/* the child of LCA(J's team, t) on t's side (t's top-level team when none) */
	int		   *jside;			/* the child of that LCA on J's side */
	int		   *lcad;			/* the LCA's depth, -1 when none */
	const double *levels;		/* [team][GS_NRES]: each subtree's fair allocation (gs_tree_fair_shares) */
	const int32 *dom_of;		/* GsPreemptRound.dom_of */
} Search;

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

	for (pl = 0; pl < c->npools && pl < GS_MAX_POOLS; pl++)
	{
		GsQuota    *q = &c->quotas[j->tix * c->npools + pl];
		double		freed[GS_NRES] = {0, 0, 0, 0};
		bool		ok = true,
					any;

		if (!(j->pool_mask & (UINT64_C(1) << pl)))
			continue;
		for (i = 0; i < st->nrunning; i++)
			if (st->running[i].released && !st->running[i].taken &&
				st->running[i].tix == j->tix && st->running[i].pool == pl)
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
			else if (c->tree && !q->has)
				limit = 1e300;	/* trees: an ancestor's nominal quota may hold it (below) */
			if (q->used[r] - freed[r] + jd[r] > limit + GS_EPS)
				ok = false;
		}
		/* trees: every ancestor with a quota row, its subtree's use less the same victims */
		any = q->has;
		for (i = c->teams[j->tix].parent; c->tree && i >= 0 && ok; i = c->teams[i].parent)
		{
			GsQuota    *a = &c->quotas[i * c->npools + pl];

			if (!a->has)
				continue;
			any = true;
			for (r = 0; r < GS_NRES && ok; r++)
			{
				double		limit;

				if (a->nominal[r] < 0)
					continue;
				if (j->preemptible && a->borrow[r] < 0)
					continue;	/* no borrowing limit there */
				limit = a->nominal[r] + (j->preemptible ? a->borrow[r] : 0);
				if (a->used[r] - freed[r] + jd[r] > limit + GS_EPS)
					ok = false;
			}
		}
		if (c->tree && !j->preemptible && !any)
			ok = false;			/* no quota on its path: non-preemptible work has none to run in */
		if (ok)
			return true;
	}
	return false;
}

/*
 * For a job other teams' unlent idle quota blocks (J->held_back): the
 * pools of J's where, with the victims now released, J would leave that
 * held-back amount idle (the pool's free capacity after the swap, less
 * J's demand, at least what the teams off its path hold back then).
 */
static uint64_t
held_back_after_swap(GsState *st, GsJob *j)
{
	GsCluster  *c = st->cluster;
	double		jd[GS_NRES] = {j->gpus * j->workers, j->cpus * j->workers, j->mem * j->workers, j->net * j->workers};
	double	   *freed = palloc(sizeof(double) * GS_NRES * Max(c->nteams, 1));
	uint64_t	m = 0;
	int			pl,
				r,
				i;

	for (pl = 0; pl < c->npools && pl < GS_MAX_POOLS; pl++)
	{
		double		fp[GS_NRES] = {0, 0, 0, 0};
		bool		ok = true;

		if (!(j->pool_mask & (UINT64_C(1) << pl)))
			continue;
		memset(freed, 0, sizeof(double) * GS_NRES * Max(c->nteams, 1));
		for (i = 0; i < st->nrunning; i++)
		{
			const GsRunning *v = &st->running[i];

			if (!v->released || v->taken || v->pool != pl)
				continue;
			for (r = 0; r < GS_NRES; r++)
			{
				fp[r] += v->demand[r];
				if (v->tix >= 0)
					freed[v->tix * GS_NRES + r] += v->demand[r];
			}
		}
		for (r = 0; r < GS_NRES && ok; r++)
		{
			double		held;

			if (jd[r] <= 0)
				continue;
			held = gs_held_back(c, j->tix, pl, r, freed);
			if (held > GS_EPS &&
				c->pools[pl].capacity[r] - (c->pools[pl].used[r] - fp[r]) - jd[r] < held - GS_EPS)
				ok = false;
		}
		if (ok)
			m |= UINT64_C(1) << pl;
	}
	pfree(freed);
	return m;
}

/*
 * Does J fit the model as it is now (victims virtually released)? Looking
 * for room spends the search's probe budget; pruning a plan that works does
 * not (cut short, victims would stay that are not needed).
 */
static bool
fits_any(Search *s, bool budgeted)
{
	uint64_t	mask = s->j->pool_mask;
	bool		ok;

	if (s->j->quota_blocked && !quota_after_swap(s->st, s->j))
		return false;
	if (budgeted && s->probes_left <= 0)
		return false;
	if (s->j->held_back)
	{
		uint64_t	m = held_back_after_swap(s->st, s->j);

		if (m == 0)
			return false;
		s->j->pool_mask = m;	/* only where the swap leaves the held-back amount idle */
	}
	if (budgeted)
		s->probes_left--;
	(*s->probes)++;
	ok = gs_probe(s->p, s->j, NULL);
	s->j->pool_mask = mask;
	return ok;
}

static bool
fits(Search *s)
{
	return fits_any(s, true);
}

static bool
fits_pruning(Search *s)
{
	return fits_any(s, false);
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
 * Team trees: the fair-share and reclaim tests compare the two sibling
 * subtrees under the lowest common ancestor of J's team and the victim's.
 */
static void
tree_sides(Search *s)
{
	GsCluster  *c = s->c;
	int			n = c->nteams,
				t;
	int		   *onpath = palloc(sizeof(int) * Max(n, 1));	/* J's ancestor at each team, -1 */

	s->side = palloc(sizeof(int) * Max(n, 1));
	s->jside = palloc(sizeof(int) * Max(n, 1));
	s->lcad = palloc(sizeof(int) * Max(n, 1));
	for (t = 0; t < n; t++)
		onpath[t] = -1;
	/* onpath[a] = the child of a on J's path (J's team itself for J's team) */
	for (t = s->j->tix; t >= 0; t = c->teams[t].parent)
		onpath[t] = t;
	{
		int			prev = s->j->tix;

		for (t = c->teams[s->j->tix].parent; t >= 0; t = c->teams[t].parent)
		{
			onpath[t] = prev;
			prev = t;
		}
	}
	for (t = 0; t < n; t++)
	{
		int			a = t,
					prev = t;

		while (a >= 0 && onpath[a] < 0)
		{
			prev = a;
			a = c->teams[a].parent;
		}
		if (a < 0)
		{
			int			jr = s->j->tix;

			while (c->teams[jr].parent >= 0)
				jr = c->teams[jr].parent;
			s->side[t] = prev;
			s->jside[t] = jr;
			s->lcad[t] = -1;
		}
		else if (a == t)
		{
			/* t is J's team or one of its ancestors */
			s->side[t] = t;
			s->jside[t] = t;
			s->lcad[t] = c->teams[t].depth;
		}
		else
		{
			s->side[t] = prev;
			s->jside[t] = onpath[a];
			s->lcad[t] = c->teams[a].depth;
		}
	}
	pfree(onpath);
}

/*
 * Team trees: a side's weighted share counted over the resources the job
 * asks for only (`on`), with sign × delta added. Under H-DRF a subtree is
 * not compared on a resource the contest is not about (a sibling holding
 * all the CPUs does not hold a GPU job off).
 */
static double
share_on(const GsCluster *c, int t, const double delta[GS_NRES], double sign, const double on[GS_NRES])
{
	double		ds = 0;
	int			r;

	for (r = 0; r < GS_NRES; r++)
		if (c->capacity[r] > 0 && on[r] > 0)
			ds = Max(ds, (c->teams[t].used[r] + (delta ? sign * delta[r] : 0)) / c->capacity[r]);
	return ds / c->teams[t].weight;
}

/* Add (sign) a victim's demand to the plan's take from its team and every ancestor. */
static void
rem_add(Search *s, const GsRunning *r, double sign)
{
	int			t,
				q;

	if (r->tix < 0)
		return;
	for (t = r->tix; t >= 0; t = s->side ? s->c->teams[t].parent : -1)
		for (q = 0; q < GS_NRES; q++)
			s->rem[t * GS_NRES + q] += sign * r->demand[q];
}

/* What the fair-share test says of a candidate (or of a plan's victims of one team). */
typedef enum FairVerdict
{
	FAIR_YES = 0,
	FAIR_RULE,					/* gangsched.fair_preemption refuses it */
	FAIR_FLOOR,					/* hysteresis: it would take its team below its entitlement */
	FAIR_HELD					/* hysteresis: J's team holds its entitlement already */
} FairVerdict;

/*
 * The fair-share test for taking `extra` more from team t, whose victims
 * `rem` are already in the plan. Only for a borrowing J and another team.
 * With hysteresis, capacity moves only from a team that keeps at least its
 * entitlement (the round's fair level) to a team below it; then the rule
 * (final_share or initial_share) decides. In a tree, with hysteresis, the
 * two sides under the LCA are compared on the resources the job asks for,
 * each against its H-DRF allocation (what team_shares.fair_share shows),
 * and that decides; without it the rule compares their shares of those
 * resources.
 */
static FairVerdict
fair_test(const Search *s, int t, const double *rem, const double extra[GS_NRES])
{
	double		d[GS_NRES];
	int			r;

	if (!s->j->try_borrowing || t < 0 || t == s->j->tix)
		return FAIR_YES;
	if (s->side != NULL)
	{
		/* trees: J's side subtree against the victim's, under their LCA; rem is the side's */
		int			vs = s->side[t],
					js = s->jside[t];
		double		jd[GS_NRES] = {s->j->gpus * s->j->workers, s->j->cpus * s->j->workers,
		s->j->mem * s->j->workers, s->j->net * s->j->workers};
		double		mine;

		if (vs == js)
			return FAIR_YES;	/* t is an ancestor of J's team: no sibling to compare */
		for (r = 0; r < GS_NRES; r++)
			d[r] = s->rem[vs * GS_NRES + r] + (extra ? extra[r] : 0);
		mine = share_on(s->c, js, jd, 1.0, jd);
		if (s->hysteresis && s->levels != NULL)
		{
			/*
			 * per resource the job asks for, against the sides' H-DRF
			 * allocations: J's side holds its fair amount of each already,
			 * or the victims' side would fall below its own in one
			 */
			const double *fj = &s->levels[js * GS_NRES],
					   *fv = &s->levels[vs * GS_NRES];
			bool		held = true;

			for (r = 0; r < GS_NRES; r++)
				if (jd[r] > 0 && s->c->capacity[r] > 0 && s->c->teams[js].used[r] < fj[r] - GS_EPS)
					held = false;
			if (held)
				return FAIR_HELD;
			for (r = 0; r < GS_NRES; r++)
				if (jd[r] > 0 && d[r] > 0 && s->c->teams[vs].used[r] - d[r] < fv[r] - GS_EPS)
					return FAIR_FLOOR;

			/*
			 * the allocations decide: H-DRF's split is not where the
			 * sides' shares are equal once a resource ran out (a side
			 * holding all the CPUs is entitled to fewer GPUs than its
			 * sibling holding none), so the rule's share comparison
			 * would keep it from ever being reached; moving only from a
			 * side above its allocation to one below cannot swing back
			 */
			return FAIR_YES;
		}
		if (s->rule == GS_FAIR_INITIAL_SHARE)
			return mine < share_on(s->c, vs, NULL, 0, jd) - GS_SHARE_EPS ? FAIR_YES : FAIR_RULE;
		return mine <= share_on(s->c, vs, d, -1.0, jd) + GS_SHARE_EPS ? FAIR_YES : FAIR_RULE;
	}
	for (r = 0; r < GS_NRES; r++)
		d[r] = (rem ? rem[r] : 0) + (extra ? extra[r] : 0);
	if (s->hysteresis)
	{
		/* (the level is a bisection's: compared within GS_EPS, far below one GPU's share) */
		if (s->my_before >= s->level - GS_EPS)
			return FAIR_HELD;
		if (share_with(s->c, t, d, -1.0) < s->level - GS_EPS)
			return FAIR_FLOOR;
	}
	if (s->rule == GS_FAIR_INITIAL_SHARE)
		return s->my_after < gs_dominant_share(s->c, t) - GS_SHARE_EPS ? FAIR_YES : FAIR_RULE;
	return s->my_after <= share_with(s->c, t, d, -1.0) + GS_SHARE_EPS ? FAIR_YES : FAIR_RULE;
}

static bool
fair_ok(const Search *s, int t, const double *rem, const double extra[GS_NRES])
{
	return fair_test(s, t, rem, extra) == FAIR_YES;
}

/*
 * Is team t still beyond its nominal quota in the pool, with `rem` (the
 * plan's victims of that team) taken out? Only a team that borrows there
 * loses borrowed gangs to reclaim or fair share: a gang placed as borrowed
 * stays marked so after its team's other work finished, but once the team
 * is back within its quota it is not taken.
 */
static bool
team_borrows(const GsCluster *c, int t, int pool, const double *rem)
{
	const GsQuota *q;
	int			r;

	if (t < 0 || pool < 0)
		return false;
	q = &c->quotas[t * c->npools + pool];
	for (r = 0; r < GS_NRES; r++)
	{
		double		nominal = q->has ? q->nominal[r] : (r == GS_GPU ? 0 : -1);

		if (nominal < 0)
			continue;			/* not governed */
		if (q->used[r] - (rem ? rem[r] : 0) > nominal + GS_EPS)
			return true;
	}
	return false;
}

/*
 * Trees: does team t's gang in the pool borrow from outside its side
 * subtree (the child of its LCA with J's team)? The first team from that
 * side down to t with a quota row in the pool decides (its subtree's use,
 * the plan's victims out, beyond its nominal amount); with none, t's own
 * rule as above (no quota: nominal 0 GPUs). So a subtree within its
 * nominal quota keeps its gangs, whatever its children borrow from one
 * another: only a sibling inside it reclaims those.
 */
static bool
tree_team_borrows(const Search *s, int t, int pool)
{
	const GsCluster *c = s->c;
	int			path[64],
				n = 0,
				a,
				k,
				r;

	if (t < 0 || pool < 0)
		return false;
	if (s->side[t] == s->jside[t])
		return team_borrows(c, t, pool, &s->rem[t * GS_NRES]);	/* an ancestor of J's team */
	for (a = t; a >= 0 && n < 64; a = c->teams[a].parent)
	{
		path[n++] = a;
		if (a == s->side[t])
			break;
	}
	for (k = n - 1; k >= 0; k--)
	{
		const GsQuota *q = &c->quotas[path[k] * c->npools + pool];

		if (!q->has)
			continue;
		for (r = 0; r < GS_NRES; r++)
			if (q->nominal[r] >= 0 && q->used[r] - s->rem[path[k] * GS_NRES + r] > q->nominal[r] + GS_EPS)
				return true;
		return false;
	}
	return team_borrows(c, t, pool, &s->rem[t * GS_NRES]);
}

static bool
search_team_borrows(const Search *s, int t, int pool, const double *rem)
{
	return s->side ? tree_team_borrows(s, t, pool) : team_borrows(s->c, t, pool, rem);
}

/*
 * Trees: was team t's gang, placed within quota (not borrowed), guaranteed
 * only by a quota that J's team shares? That is when no team from t up to
 * its side subtree (the child of its LCA with J's team) has a quota row in
 * the pool: its guarantee came from a quota at or above the LCA, which J's
 * work inside that ancestor may claim as much. Inside such a subtree the
 * siblings split the ancestor's quota by fair share (as its fair_share
 * does), so the gang is a candidate there like a borrowed one, and the
 * usual rules decide (tree_team_borrows, the fair-share test). Without
 * this, the first sibling to fill a quota'd parent kept all of it from a
 * later sibling with no quota of its own, whatever their weights.
 */
static bool
tree_guarantee_shared(const Search *s, int t, int pool)
{
	const GsCluster *c = s->c;
	int			a;

	if (s->side == NULL || t < 0 || pool < 0 || s->side[t] == s->jside[t])
		return false;
	for (a = t; a >= 0; a = c->teams[a].parent)
	{
		if (c->quotas[a * c->npools + pool].has)
			return false;
		if (a == s->side[t])
			return true;
	}
	return false;
}

/*
 * The fair-share rule holds for the whole plan, not only for each victim
 * alone: with all of a team's victims in the plan released (final_share).
 */
static bool
plan_fair(const Search *s, const Plan *pl)
{
	int			k,
				m,
				r;

	if (s->side != NULL)
	{
		/* trees: each victim side subtree once, with all of its victims released */
		bool		ok = true;
		double	   *save = palloc(sizeof(double) * GS_NRES * Max(s->c->nteams, 1));

		memcpy(save, s->rem, sizeof(double) * GS_NRES * s->c->nteams);
		memset(s->rem, 0, sizeof(double) * GS_NRES * s->c->nteams);
		for (k = 0; k < pl->n; k++)
			rem_add((Search *) s, pl->v[k], 1.0);
		for (k = 0; k < pl->n && ok; k++)
			if (pl->v[k]->tix >= 0)
				ok = fair_ok(s, pl->v[k]->tix, NULL, NULL);
		memcpy(s->rem, save, sizeof(double) * GS_NRES * s->c->nteams);
		pfree(save);
		return ok;
	}
	for (k = 0; k < pl->n; k++)
	{
		int			t = pl->v[k]->tix;
		double		d[GS_NRES] = {0};
		bool		first = true;

		for (m = 0; m < k; m++)
			if (pl->v[m]->tix == t)
				first = false;
		if (!first)
			continue;			/* each team once, at its first victim */
		for (m = k; m < pl->n; m++)
			if (pl->v[m]->tix == t)
				for (r = 0; r < GS_NRES; r++)
					d[r] += pl->v[m]->demand[r];
		if (!fair_ok(s, t, NULL, d))
			return false;
	}
	return true;
}

/* A greedy plan being built: the victims released so far, in the order chosen. */
typedef struct Greedy
{
	Cand	   *cands;			/* in victim order, grouped by team */
	int			n;
	int		   *g_cur;			/* per team group: next candidate */
	int		   *g_end;
	int			ng;
	GsRunning **chosen;			/* NULL once pruned */
	double	   *lost_of;
	int			used;
	double		need;			/* J's GPUs */
	double		have;			/* free GPUs plus the chosen victims' */
} Greedy;

/* Candidates come grouped by team, each group in the team's order. */
static void
greedy_groups(Greedy *g)
{
	int			k;

	g->ng = 0;
	for (k = 0; k < g->n; k++)
	{
		if (k == 0 || g->cands[k].r->tix != g->cands[k - 1].r->tix)
		{
			g->g_cur[g->ng] = k;
			g->g_end[g->ng++] = k;
		}
		g->g_end[g->ng - 1] = k + 1;
	}
}

/*
 * The next candidate of the team with the highest share now (its victims
 * in the plan counted out): its index in cands, -1 when none is left.
 */
static int
greedy_next(Search *s, Greedy *g)
{
	int			bg = -1,
				k,
				blcad = 0;
	double		bshare = 0;

	for (k = 0; k < g->ng; k++)
	{
		GsRunning  *r;
		double		sh;

		while (g->g_cur[k] < g->g_end[k] &&
			   (g->cands[g->g_cur[k]].r->taken || g->cands[g->g_cur[k]].r->released))
			g->g_cur[k]++;
		if (g->g_cur[k] >= g->g_end[k])
			continue;
		r = g->cands[g->g_cur[k]].r;
		if (s->side != NULL && r->tix >= 0)
		{
			/* trees: the victims' side furthest from J's team first, then the highest share */
			int			vs = s->side[r->tix],
						ld = s->lcad[r->tix];

			sh = share_with(s->c, vs, &s->rem[vs * GS_NRES], -1.0);
			if (bg < 0 || ld < blcad || (ld == blcad && sh > bshare + GS_SHARE_EPS))
			{
				bg = k;
				bshare = sh;
				blcad = ld;
			}
			continue;
		}
		sh = (r->tix >= 0) ? share_with(s->c, r->tix, &s->rem[r->tix * GS_NRES], -1.0) : 0;
		if (bg < 0 || sh > bshare + GS_SHARE_EPS)
		{
			bg = k;
			bshare = sh;
		}
	}
	return bg < 0 ? -1 : g->g_cur[bg]++;
}

/*
 * Release victims in victim order until J fits. A victim whose team is back
 * within its quota, or that the fair-share rule refuses with its team's
 * earlier victims gone, is skipped. True when J fits.
 */
static bool
greedy_grow(Search *s, Greedy *g)
{
	double		next_try = g->need;
	int			t;

	memset(s->rem, 0, sizeof(double) * GS_NRES * Max(s->c->nteams, 1));
	while ((t = greedy_next(s, g)) >= 0)
	{
		GsRunning  *r = g->cands[t].r;

		if (!chain_ready(r))
			continue;			/* a gang's replicas go highest-numbered first, its minimum last */
		if (r->tix >= 0 && r->tix != s->j->tix &&
			!search_team_borrows(s, r->tix, r->pool, &s->rem[r->tix * GS_NRES]))
			continue;			/* its team is back within its quota */
		if (r->tix >= 0)
		{
			FairVerdict v = fair_test(s, r->tix, &s->rem[r->tix * GS_NRES], r->demand);

			if (v == FAIR_FLOOR)
				s->floor_skips++;
			else if (v != FAIR_YES)
				s->fair_skips++;
			if (v != FAIR_YES)
				continue;		/* refused with the team's earlier victims gone */
		}
		gs_model_release(s->p, r, true);
		rem_add(s, r, 1.0);
		g->lost_of[g->used] = g->cands[t].lost;
		g->chosen[g->used++] = r;
		g->have += r->gpus_total;
		/*
		 * Placing is only worth trying once enough GPUs could be free, and
		 * after a try that failed only once a fifth more is: the probes grow
		 * with the log of the victims released, not with their number.
		 */
		if (g->have + GS_EPS >= next_try)
		{
			if (fits(s))
				return true;
			next_try = g->have * 1.2;
		}
	}
	/* the last releases may have made room without a try */
	return g->used > 0 && g->have + GS_EPS >= g->need && fits(s);
}

/*
 * The fit found lies inside one gang domain: victims with no node in it are
 * not needed for that fit, which stays valid without them, so they go back
 * at once, without a probe each. (Not for a job its team's quota blocks,
 * nor one other teams' unlent idle quota blocks: its victims also free
 * quota, or the capacity that keeps the held-back amount idle, wherever
 * they run.)
 */
static void
greedy_drop_outside(Search *s, Greedy *g)
{
	int			dd,
				di,
				k;

	if (s->j->quota_blocked || s->j->held_back)
		return;
	gs_placer_last_domain(s->p, &dd, &di);
	/* last chosen first: a split gang's later entries go before the earlier ones */
	for (k = g->used - 1; k >= 0; k--)
	{
		GsRunning  *r = g->chosen[k];
		bool		inside = false;
		int			a;

		if (r == NULL || dd <= 0 || !chain_removable(r))
			continue;
		for (a = 0; a < r->nalloc && !inside; a++)
			inside = s->c->nodes[r->allocs[a].node].dom[dd] == di;
		if (!inside)
		{
			gs_model_release(s->p, r, false);
			g->chosen[k] = NULL;
			g->have -= r->gpus_total;
		}
	}
}

/* Prune: most expensive first, keep out what is not needed. */
static void
greedy_prune(Search *s, Greedy *g)
{
	int			left = 0,
				k;

	for (k = 0; k < g->used; k++)
		left += g->chosen[k] != NULL;
	for (k = g->used - 1; k >= 0; k--)
	{
		if (g->chosen[k] == NULL)
			continue;
		if (left == 1)
			break;
		if (g->have - g->chosen[k]->gpus_total + GS_EPS < g->need)
			continue;			/* too few GPUs without it: needed, no probe */
		if (!chain_removable(g->chosen[k]))
			continue;			/* a later replica of its gang stays in the plan */
		gs_model_release(s->p, g->chosen[k], false);
		if (fits_pruning(s))
		{
			g->have -= g->chosen[k]->gpus_total;
			g->chosen[k] = NULL;
			left--;
			continue;
		}
		gs_model_release(s->p, g->chosen[k], true);
	}
}

/* The plan from what is left chosen (when ok), and the model back as it was. */
static void
greedy_finish(Search *s, Greedy *g, bool ok, Plan *out)
{
	int			k;

	out->n = 0;
	out->max_prio = INT32_MIN;
	out->lost = 0;
	out->gpus = 0;
	out->team_key = 1e300;
	out->v = palloc(sizeof(GsRunning *) * Max(g->used, 1));
	for (k = 0; k < g->used; k++)
	{
		GsRunning  *r = g->chosen[k];

		if (r == NULL)
			continue;
		if (ok)
		{
			out->v[out->n++] = r;
			out->max_prio = Max(out->max_prio, r->priority);
			out->lost += g->lost_of[k];
			out->gpus += r->gpus_total;
			out->team_key = Min(out->team_key, r->tix < 0 ? 0 :
								gs_dominant_share(s->c, s->side ? s->side[r->tix] : r->tix));
		}
		gs_model_release(s->p, r, false);
	}
}

/*
 * Greedy plan over cands[0..n) (in victim order): release victims until J
 * fits, then restore those it does not need. The next victim comes from the
 * team with the highest share once the victims already taken from it are
 * counted out; a victim the fair-share rule refuses at that point is
 * skipped. Leaves the model as it found it. Returns false if even all of
 * them are not enough.
 */
static bool
greedy_plan(Search *s, Cand *cands, int n, double free_gpus, Plan *out)
{
	Greedy		g;
	bool		ok;

	g.cands = cands;
	g.n = n;
	g.chosen = palloc(sizeof(GsRunning *) * Max(n, 1));
	g.lost_of = palloc(sizeof(double) * Max(n, 1));
	g.g_cur = palloc(sizeof(int) * Max(n, 1));
	g.g_end = palloc(sizeof(int) * Max(n, 1));
	g.used = 0;
	g.need = s->j->gpus * s->j->workers;
	g.have = free_gpus;
	greedy_groups(&g);
	ok = greedy_grow(s, &g);
	if (ok)
	{
		greedy_drop_outside(s, &g);
		greedy_prune(s, &g);
	}
	greedy_finish(s, &g, ok, out);
	pfree(g.chosen);
	pfree(g.lost_of);
	pfree(g.g_cur);
	pfree(g.g_end);
	return ok && out->n > 0;
}

/* GPUs of one allocation's devices. */
static double
alloc_gpus(const GsCluster *c, const GsAlloc *a)
{
	int			slices = Max(c->nodes[a->node].slices, 1);

	return (double) pg_popcount64(a->devmask) * a->nslices / slices;
}

/*
 * J was placed on the model with `rs` (its victims and the rest of earlier
 * victims it may use) released. J takes over what it uses of them: whole
 * devices leave their allocs, and on each node the host resources J and
 * they both use count once (the larger). uses[k] says whether J needs
 * rs[k] to go at all. The trimmed victims are then back in the model, their
 * rest being whole devices only.
 */
static void
take_over(GsPlacer *p, GsCluster *c, GsJob *j, GsRunning **rs, int nr, bool *uses)
{
	int			w,
				k,
				m;

	for (k = 0; k < nr; k++)
		uses[k] = false;
	for (w = 0; w < j->workers; w++)
	{
		int			ni = j->assign[w].node;
		double		jc = 0,
					jm = 0,
					jn = 0;
		uint8_t		jbits[GS_MAX_GPUS];
		uint64_t	jdev = 0;
		bool		first = true;
		int			dv;

		for (k = 0; k < w; k++)
			if (j->assign[k].node == ni)
				first = false;
		if (!first)
			continue;			/* each node once */
		memset(jbits, 0, sizeof(jbits));
		for (k = 0; k < j->workers; k++)
			if (j->assign[k].node == ni)
			{
				GsAssign   *a = &j->assign[k];

				jc += j->cpus;
				jm += j->mem;
				jn += j->net;
				jdev |= a->devmask;
				for (dv = 0; dv < GS_MAX_GPUS; dv++)
					if (a->devmask & (UINT64_C(1) << dv))
						jbits[dv] |= (uint8_t) (((1 << a->nslices) - 1) << a->first_slice);
			}
		for (k = 0; k < nr; k++)
			for (m = 0; m < rs[k]->nalloc; m++)
			{
				GsAlloc    *a = &rs[k]->allocs[m];
				double		g;

				if (a->node != ni)
					continue;
				if (a->devmask & jdev)
				{
					uses[k] = true;
					for (dv = 0; dv < GS_MAX_GPUS; dv++)
						if (a->devmask & jdev & (UINT64_C(1) << dv))
						{
							uint8_t		vb = (uint8_t) (((1 << a->nslices) - 1) << a->first_slice);

							if ((vb & ~jbits[dv]) == 0)
								a->devmask &= ~(UINT64_C(1) << dv);
							else
								rs[k]->shareable = false;	/* a device shared at slice level */
						}
				}
				g = Min(jc, a->cpus);
				a->cpus -= g;
				jc -= g;
				if (g > 0)
					uses[k] = true;
				g = Min(jm, a->mem);
				a->mem -= g;
				jm -= g;
				if (g > 0)
					uses[k] = true;
				g = Min(jn, a->net);
				a->net -= g;
				jn -= g;
				if (g > 0)
					uses[k] = true;
			}
	}
	for (k = 0; k < nr; k++)
	{
		gs_model_release(p, rs[k], false);
		/*
		 * What host resources it keeps stay taken until it goes: a later
		 * preemptor of the round may wait for its devices only (a job is
		 * placed once no slot it holds is allocated, which says nothing of
		 * cpus, memory or network).
		 */
		for (m = 0; m < rs[k]->nalloc; m++)
			rs[k]->allocs[m].cpus = rs[k]->allocs[m].mem = rs[k]->allocs[m].net = 0;
	}
}

/* What a victim chosen this round still holds that its preemptor did not take. */
double
gs_victim_rest_gpus(const GsCluster *c, const GsRunning *r)
{
	double		g = 0;
	int			m;

	for (m = 0; m < r->nalloc; m++)
		if (r->allocs[m].node >= 0)
			g += alloc_gpus(c, &r->allocs[m]);
	return g;
}

/* Does a victim chosen this round still hold a device its preemptor does not take? */
static bool
has_rest(const GsRunning *r)
{
	int			m;

	for (m = 0; m < r->nalloc; m++)
		if (r->allocs[m].node >= 0 && r->allocs[m].devmask != 0)
			return true;
	return false;
}

static void
add_part(StringInfo s, int n, const char *one, const char *many)
{
	if (n <= 0)
		return;
	appendStringInfo(s, "%s%d %s", s->len > 0 ? ", " : "", n, n == 1 ? one : many);
}

/* Gangs that could have been victims but for a rule, by rule. */
typedef struct Refusals
{
	int			young;
	int			fixed;
	int			guaranteed;
	int			fair;
	int			floor;
	int			held;
	int			early;
	int			reclaim_early;
} Refusals;

/* search_team_borrows with no victims counted out, once per team and pool (cache: -1 not asked yet) */
static bool
borrows_cached(const Search *s, int8 *cache, int t, int pool)
{
	int8	   *b = &cache[t * s->c->npools + pool];

	if (*b < 0)
		*b = (int8) search_team_borrows(s, t, pool, NULL);
	return *b != 0;
}

/*
 * Candidates for J (cands, nc returned) and the rests of earlier victims of
 * the round J may use (rest, *nrest); what a rule kept out is counted in *n.
 */
static int
collect_candidates(Search *s, const GsPreemptSettings *set, Cand *cands, GsRunning **rest, int *nrest,
				   Refusals *n)
{
	GsState    *st = s->st;
	GsJob	   *j = s->j;
	int			nc = 0,
				i;
	FairVerdict verdict;
	bool		too_early = j->try_borrowing && set->fair_delay_s > 0 &&
		st->now - j->queued_at < (int64_t) set->fair_delay_s * 1000000;
	bool		reclaim_early = !j->try_borrowing && set->reclaim_delay_s > 0 &&
		st->now - j->queued_at < (int64_t) set->reclaim_delay_s * 1000000;
	int8	   *borrows;

	memset(n, 0, sizeof(*n));
	*nrest = 0;
	/* whether a team borrows in a pool: asked once per team and pool, not per gang */
	borrows = palloc(sizeof(int8) * Max(s->c->nteams * s->c->npools, 1));
	memset(borrows, -1, sizeof(int8) * Max(s->c->nteams * s->c->npools, 1));
	for (i = 0; i < st->nrunning; i++)
	{
		GsRunning  *r = &st->running[i];

		if (r->pool < 0 || r->nalloc == 0 || !(j->pool_mask & (UINT64_C(1) << r->pool)))
			continue;
		if (r->taken)
		{
			/* the rest of an earlier victim of this round: free for J, once it goes */
			if (r->shareable && !j->quota_blocked && !j->held_back && has_rest(r))
				rest[(*nrest)++] = r;
			continue;
		}
		if (r->shrinking || (r->gang ? r->gang : r)->gang_taken)
			continue;			/* a shrink pending, or one of this round: the gang gives no more */
		if (r->tix == j->tix)
		{
			/* priority: only lower; las: same priority, a later queue */
			if (!(r->priority < j->priority) &&
				!(r->priority == j->priority && j->las_preempts && j->las_queue >= 0 && r->las_queue > j->las_queue))
				continue;
		}
		else if (j->quota_blocked)
			continue;			/* its own quota blocks it: only its team's work */
		else if ((!r->borrowed && !tree_guarantee_shared(s, r->tix, r->pool)) || r->tix < 0 ||
				 !borrows_cached(s, borrows, r->tix, r->pool))
		{
			n->guaranteed++;
			continue;
		}
		else if (too_early)
		{
			n->early++;			/* fair share waits gangsched.fair_preemption_delay */
			continue;
		}
		else if (reclaim_early)
		{
			n->reclaim_early++; /* reclaim waits gangsched.reclaim_delay */
			continue;
		}
		else if (j->try_borrowing && (verdict = fair_test(s, r->tix, NULL, r->demand)) != FAIR_YES)
		{
			/* fair share refused (a reclaim needs no test) */
			switch (verdict)
			{
				case FAIR_HELD:
					n->held++;
					break;
				case FAIR_FLOOR:
					n->floor++;
					break;
				default:
					n->fair++;
			}
			continue;
		}
		if (!r->preemptible)
		{
			n->fixed++;
			continue;
		}
		if (r->since + (int64_t) set->min_runtime_s * 1000000 > st->now)
		{
			n->young++;
			continue;
		}
		cands[nc].r = r;
		cands[nc].lost = r->gpus_total * ((double) Max(st->now - r->checkpoint, 0) / 1000000.0) +
			(double) set->restart_cost_s * r->gpus_total;
		cands[nc].share = (r->tix >= 0) ? gs_dominant_share(s->c, s->side ? s->side[r->tix] : r->tix) : 0;
		cands[nc].lcad = (r->tix >= 0 && s->side) ? s->lcad[r->tix] : -1;
		nc++;
	}
	pfree(borrows);
	return nc;
}

/*
 * Why no gang may be a victim, or NULL: said only when some gang could have
 * been one but for a rule (fair share, min_runtime, non-preemptible); a job
 * with nothing to preempt at all is not told that preemption was considered.
 */
static char *
refusal_text(const Search *s, const Refusals *n)
{
	StringInfoData w;
	bool		final = s->rule == GS_FAIR_FINAL_SHARE;

	if (n->fair + n->floor + n->held + n->young + n->fixed + n->early + n->reclaim_early == 0)
		return NULL;
	initStringInfo(&w);
	add_part(&w, n->held, "borrowed gang may not be preempted for fair share: this job's team holds its entitled share already (gangsched.fair_preemption_hysteresis)",
			 "borrowed gangs may not be preempted for fair share: this job's team holds its entitled share already (gangsched.fair_preemption_hysteresis)");
	add_part(&w, n->floor, "borrowed gang would take its team below its entitled share (fair share, gangsched.fair_preemption_hysteresis)",
			 "borrowed gangs would take their team below its entitled share (fair share, gangsched.fair_preemption_hysteresis)");
	add_part(&w, n->early, "borrowed gang may be preempted for fair share once this job has waited gangsched.fair_preemption_delay",
			 "borrowed gangs may be preempted for fair share once this job has waited gangsched.fair_preemption_delay");
	add_part(&w, n->reclaim_early, "borrowed gang may be reclaimed once this job has waited gangsched.reclaim_delay",
			 "borrowed gangs may be reclaimed once this job has waited gangsched.reclaim_delay");
	add_part(&w, n->fair, final ?
			 "borrowed gang would leave its team below this job's team (fair share, final_share)" :
			 "borrowed gang is of a team not above this job's team (fair share, initial_share)",
			 final ?
			 "borrowed gangs would leave their team below this job's team (fair share, final_share)" :
			 "borrowed gangs are of teams not above this job's team (fair share, initial_share)");
	add_part(&w, n->young, "gang started less than gangsched.min_runtime ago",
			 "gangs started less than gangsched.min_runtime ago");
	add_part(&w, n->fixed, "gang is not preemptible", "gangs are not preemptible");
	add_part(&w, n->guaranteed, "gang of another team runs within its quota",
			 "gangs of other teams run within their quota");
	return w.data;
}

static const char *
rule_name(const Search *s)
{
	return s->rule == GS_FAIR_FINAL_SHARE ? "final_share" : "initial_share";
}

/* Keep plan as the best if it keeps the rule and beats it. */
static void
consider(Search *s, Cand *cands, int n, double free_gpus, Plan *best)
{
	Plan		plan;

	if (greedy_plan(s, cands, n, free_gpus, &plan) && plan_fair(s, &plan) &&
		plan_better(&plan, best, s->j->gpus * s->j->workers))
		*best = plan;
}

/*
 * The candidates of the chain a split gang's first entry starts, in chain
 * order (those that are candidates: the chain may end early), into out.
 */
static int
chain_cands(const GsRunning *head, const Cand *cands, int nc, Cand *out)
{
	const GsRunning *r;
	int			n = 0,
				i;

	for (r = head; r != NULL; r = r->chain_next)
	{
		for (i = 0; i < nc && cands[i].r != r; i++)
			;
		if (i == nc)
			break;
		out[n++] = cands[i];
	}
	return n;
}

/*
 * Single victims that make room alone (one large rather than many small):
 * the MAX_SINGLES first in cmp_larger's order (a total order), kept in
 * order as the candidates are read, no sort of them all. A split elastic
 * gang is one victim: its chain (read from its first entry), of which the
 * greedy plan takes the replicas it needs (or the whole gang).
 */
static void
consider_singles(Search *s, const Cand *cands, int nc, double free_gpus, Plan *best)
{
	Cand		big[MAX_SINGLES];
	Cand	   *chain = NULL;
	int			nb = 0,
				i,
				k;

	for (i = 0; i < nc; i++)
	{
		if (cands[i].r->chain_prev != NULL)
			continue;			/* a split gang counts from its chain's first entry */
		if (nb == MAX_SINGLES && cmp_larger(&cands[i], &big[nb - 1]) >= 0)
			continue;
		k = (nb < MAX_SINGLES) ? nb++ : MAX_SINGLES - 1;
		for (; k > 0 && cmp_larger(&cands[i], &big[k - 1]) < 0; k--)
			big[k] = big[k - 1];
		big[k] = cands[i];
	}
	for (i = 0; i < nb; i++)
	{
		if (big[i].r->chain_next == NULL)
			consider(s, &big[i], 1, free_gpus, best);
		else
		{
			if (chain == NULL)
				chain = palloc(sizeof(Cand) * nc);
			consider(s, chain, chain_cands(big[i].r, cands, nc, chain), free_gpus, best);
		}
	}
	if (chain != NULL)
		pfree(chain);
}

/*
 * The round's running gangs: at each depth 1..L, the domain that holds the
 * gang's every allocation, -1 when none does. Victims keep their nodes
 * through the round, so once per round.
 */
static int32 *
domains_of_running(const GsState *st)
{
	const GsCluster *c = st->cluster;
	int			nd = c->nlevels + 1,
				i,
				d,
				k;
	int32	   *out = palloc(sizeof(int32) * nd * Max(st->nrunning, 1));

	for (i = 0; i < st->nrunning; i++)
	{
		const GsRunning *r = &st->running[i];
		int32	   *o = &out[i * nd];

		for (d = 1; d < nd; d++)
			o[d] = (r->nalloc > 0 && r->allocs[0].node >= 0) ? c->nodes[r->allocs[0].node].dom[d] : -1;
		for (k = 1; k < r->nalloc; k++)
		{
			const GsNode *n = r->allocs[k].node >= 0 ? &c->nodes[r->allocs[k].node] : NULL;

			for (d = 1; d < nd; d++)
				if (n == NULL || n->dom[d] != o[d])
					o[d] = -1;
		}
		o[0] = -1;
	}
	return out;
}

/*
 * The candidates of one topology domain at a time, at each depth the
 * MAX_DOMAINS_PER_DEPTH domains whose candidates free the most GPUs first.
 */
static void
consider_domains(Search *s, const Cand *cands, int nc, double free_gpus, Plan *best)
{
	GsCluster  *c = s->c;
	int		   *domof = palloc(sizeof(int) * Max(nc, 1));	/* the domain of depth d holding candidate i, -1 */
	Cand	   *sub = palloc(sizeof(Cand) * Max(nc, 1));
	int			d,
				i;

	for (d = c->nlevels; d >= 1; d--)
	{
		int			ndom = c->ndom[d];
		double	   *gain = palloc0(sizeof(double) * Max(ndom, 1));
		int			pick;

		for (i = 0; i < nc; i++)
		{
			GsRunning  *r = cands[i].r;

			domof[i] = s->dom_of[(r - s->st->running) * (c->nlevels + 1) + d];
			if (domof[i] >= 0)
				gain[domof[i]] += r->gpus_total + 1.0;
		}
		for (pick = 0; pick < MAX_DOMAINS_PER_DEPTH; pick++)
		{
			int			bi = -1,
						k,
						m = 0;

			for (k = 0; k < ndom; k++)
				if (gain[k] > 0 && (bi < 0 || gain[k] > gain[bi]))
					bi = k;
			if (bi < 0)
				break;
			gain[bi] = 0;
			for (i = 0; i < nc; i++)
				if (domof[i] == bi)
					sub[m++] = cands[i];
			if (m > 0)
				consider(s, sub, m, free_gpus, best);
		}
		pfree(gain);
	}
	pfree(domof);
	pfree(sub);
}

/*
 * The best plan over the candidates (the rests of earlier victims released
 * in the model): true with *best set (best->n == 0 when those rests alone
 * make room), false with J->preempt_refused set.
 */
static bool
best_plan(Search *s, Cand *cands, int nc, int nrest, double free_gpus, Plan *best)
{
	memset(best, 0, sizeof(*best));
	/* what earlier victims of the round leave may be enough alone */
	if (nrest > 0 && fits(s))
		return true;			/* nothing more to preempt: it waits for those rests */
	if (nc == 0 || !greedy_plan(s, cands, nc, free_gpus, best))
	{
		if (s->fair_skips == 0 && s->floor_skips > 0)
			s->j->preempt_refused = pstrdup("the victims that would make room would take their team below its entitled share (fair share, gangsched.fair_preemption_hysteresis)");
		else if (s->fair_skips > 0)
			s->j->preempt_refused = psprintf("the victims that would make room would leave their team below this job's team (fair share, %s)",
											 rule_name(s));
		else
			s->j->preempt_refused = psprintf("no set of the %d gang%s it may preempt makes room for its shape", nc,
											 nc == 1 ? "" : "s");
		return false;			/* even all of them would not make room */
	}
	if (!plan_fair(s, best))
		best->n = 0;			/* look for a plan that keeps the rule */
	consider_singles(s, cands, nc, free_gpus, best);
	consider_domains(s, cands, nc, free_gpus, best);
	if (best->n == 0)
	{
		s->j->preempt_refused = psprintf("every set of victims that makes room would leave a team below this job's team (fair share, %s)",
										 rule_name(s));
		return false;			/* no plan keeps the fair-share rule */
	}
	return true;
}

/*
 * Carry out the best plan in the model: release its victims, place J, and
 * let J take over what it uses of them and of the rests it waits for.
 */
static bool
carry_out(Search *s, Plan *best, GsRunning **rest, int nrest)
{
	GsJob	   *j = s->j;
	GsWhy		why;
	int			nall = best->n + nrest,
				i;
	GsRunning **all;
	bool	   *uses;

	for (i = 0; i < best->n; i++)
		gs_model_release(s->p, best->v[i], true);
	if (j->held_back)
		j->pool_mask = held_back_after_swap(s->st, j);	/* where the plan leaves the held-back amount idle */
	if ((j->held_back && j->pool_mask == 0) || !gs_place(s->p, j, &why))
	{
		for (i = 0; i < best->n; i++)
			gs_model_release(s->p, best->v[i], false);
		return false;
	}
	j->placed = false;			/* it is nominated, not placed */
	all = palloc(sizeof(GsRunning *) * Max(nall, 1));
	uses = palloc(sizeof(bool) * Max(nall, 1));
	j->nvictim_gangs = 0;
	for (i = 0; i < best->n; i++)
	{
		GsRunning  *g = best->v[i]->gang ? best->v[i]->gang : best->v[i];

		all[i] = best->v[i];
		best->v[i]->taken = true;
		best->v[i]->shareable = true;
		if (!g->gang_taken)
			j->nvictim_gangs++;
		g->gang_taken = true;	/* no other preemptor of the round shrinks it further */
	}
	for (i = 0; i < nrest; i++)
		all[best->n + i] = rest[i];
	take_over(s->p, s->c, j, all, nall, uses);
	j->nwaits = 0;
	j->waits = palloc(sizeof(GsRunning *) * Max(nrest, 1));
	for (i = 0; i < nrest; i++)
		if (uses[best->n + i])
			j->waits[j->nwaits++] = rest[i];
	j->nominated = true;
	j->nvictims = best->n;
	j->victims = best->v;
	j->victim_cost = best->n > 0 ? best->lost : 0;
	if (best->n > 0 && best->v[0]->tix == j->tix)
	{
		j->trigger = "priority";
		for (i = 0; i < best->n; i++)
			if (best->v[i]->priority == j->priority)
				j->trigger = "las";
	}
	else
		j->trigger = j->try_borrowing ? "fair share" : "reclaim";
	return true;
}

bool
gs_preempt(GsPlacer *p, GsState *st, GsJob *j, const GsPreemptSettings *set, GsPreemptRound *rd)
{
	GsCluster  *c = st->cluster;
	Cand	   *cands;
	int			nc,
				i;
	double		jd[GS_NRES] = {j->gpus * j->workers, j->cpus * j->workers, j->mem * j->workers, j->net * j->workers};
	double		free_gpus = 0,
				sum;
	Plan		best;
	Search		s;
	Refusals	refused;
	GsRunning **rest;
	int			nrest;
	bool		ok;

	j->preempt_refused = NULL;
	if (j->tix < 0)
		return false;
	if (!st->running_loaded)
		return false;
	s.p = p;
	s.st = st;
	s.c = c;
	s.j = j;
	s.rule = set->rule;
	s.my_after = share_with(c, j->tix, jd, 1.0);
	s.rem = palloc0(sizeof(double) * GS_NRES * Max(c->nteams, 1));
	s.fair_skips = 0;
	s.probes_left = MAX_PROBES_PER_SEARCH;
	s.probes = &rd->probes;
	s.hysteresis = set->hysteresis;
	s.level = rd->fair_level;
	s.my_before = gs_dominant_share(c, j->tix);
	s.floor_skips = 0;
	s.side = s.jside = s.lcad = NULL;
	s.levels = rd->levels;
	if (rd->dom_of == NULL)
		rd->dom_of = domains_of_running(st);
	s.dom_of = rd->dom_of;
	if (c->tree)
		tree_sides(&s);
	for (i = 0; i < c->npools && i < GS_MAX_POOLS; i++)
		if (j->pool_mask & (UINT64_C(1) << i))
			free_gpus += Max(c->pools[i].capacity[GS_GPU] - c->pools[i].used[GS_GPU] -
							 (j->held_back ? gs_held_back(c, j->tix, i, GS_GPU, NULL) : 0), 0);

	cands = palloc(sizeof(Cand) * Max(st->nrunning, 1));
	rest = palloc(sizeof(GsRunning *) * Max(st->nrunning, 1));
	nc = collect_candidates(&s, set, cands, rest, &nrest, &refused);
	if (nc == 0 && nrest == 0)
	{
		j->preempt_refused = refusal_text(&s, &refused);
		return false;
	}
	/* the first MAX_CANDIDATES in victim order, whatever order they were read in */
	qsort(cands, nc, sizeof(Cand), cmp_cand);
	nc = Min(nc, MAX_CANDIDATES);
	/* not enough GPUs even if every candidate left: no search */
	sum = free_gpus;
	for (i = 0; i < nc; i++)
		sum += cands[i].r->gpus_total;
	if (sum + GS_EPS < jd[GS_GPU])
	{
		j->preempt_refused = psprintf("the %d gang%s it may preempt and the free GPUs hold %g GPUs, it needs %g",
									  nc, nc == 1 ? "" : "s", sum, jd[GS_GPU]);
		return false;
	}

	gs_placer_ignore_memo(p, true);
	for (i = 0; i < nrest; i++)
		gs_model_release(p, rest[i], true);
	ok = best_plan(&s, cands, nc, nrest, free_gpus, &best) && carry_out(&s, &best, rest, nrest);
	if (!ok)
		for (i = 0; i < nrest; i++)
			gs_model_release(p, rest[i], false);
	gs_placer_ignore_memo(p, false);
	return ok;
}

/* Replicas of running elastic gang r that a victim search may take alone: 0 for the rest. */
static int
shrinkable_replicas(const GsRunning *r)
{
	if (!r->running || r->shrinking || !r->preemptible || r->min_workers <= 0 ||
		r->workers <= r->min_workers || r->nalloc != r->workers || r->unit <= 0 ||
		(r->workers - r->min_workers) % r->unit != 0)
		return 0;
	return (r->workers - r->min_workers) / r->unit;
}

/* Scale an entry's size to `workers` of the gang's `of`. */
static void
scale_entry(GsRunning *e, const GsRunning *g, int workers, int of)
{
	double		f = (double) workers / of;
	int			k;

	e->gpus_total = g->gpus_total * f;
	for (k = 0; k < GS_NRES; k++)
		e->demand[k] = g->demand[k] * f;
	e->attained = g->attained * f;
}

void
gs_split_elastic(GsState *st)
{
	int			n = st->nrunning,
				extra = 0,
				m,
				i,
				k,
				a;
	GsRunning  *all;

	for (i = 0; i < n; i++)
		extra += shrinkable_replicas(&st->running[i]);
	if (extra == 0)
		return;
	all = repalloc(st->running, sizeof(GsRunning) * (n + extra));
	m = n;
	for (i = 0; i < n; i++)
	{
		GsRunning  *g = &all[i];
		GsRunning  *prev = NULL;
		GsRunning	whole = *g;
		int			K = shrinkable_replicas(g),
					keep = 0;

		if (K == 0)
			continue;
		for (k = 1; k <= K; k++)
		{
			GsRunning  *e = &all[m++];

			*e = whole;
			e->part_from = whole.workers - k * whole.unit;
			e->allocs = palloc(sizeof(GsAlloc) * whole.unit);
			e->nalloc = 0;
			e->nalloc_cap = whole.unit;
			for (a = 0; a < whole.nalloc; a++)
				if (whole.allocs[a].worker >= e->part_from &&
					whole.allocs[a].worker < e->part_from + whole.unit && e->nalloc < e->nalloc_cap)
					e->allocs[e->nalloc++] = whole.allocs[a];
			scale_entry(e, &whole, whole.unit, whole.workers);
			e->gang = g;
			e->chain_prev = prev;
			e->chain_next = NULL;
			e->chain_pos = (int16_t) k;
			if (prev != NULL)
				prev->chain_next = e;
			prev = e;
		}
		/* the gang's own entry keeps its minimum, last in the chain */
		for (a = 0; a < whole.nalloc; a++)
			if (whole.allocs[a].worker < whole.workers - K * whole.unit)
				g->allocs[keep++] = whole.allocs[a];
		g->nalloc = keep;
		scale_entry(g, &whole, whole.workers - K * whole.unit, whole.workers);
		g->gang = NULL;
		g->chain_prev = prev;
		g->chain_next = NULL;
		g->chain_pos = (int16_t) (K + 1);
		prev->chain_next = g;
	}
	st->running = all;
	st->nrunning = m;
}
