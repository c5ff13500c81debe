/*
 * order.c — which pending job a round tries next.
 *
 * Fair order (the default): first every candidate that fits within its
 * team's nominal quota (guaranteed), then the borrowing ones; in each phase
 * the team with the lowest weighted dominant share goes next, recomputed
 * after every placement (progressive filling), and within a team higher
 * priority first, then older. A guaranteed candidate that does not fit may
 * be tried again in the second phase as borrowed work elsewhere.
 *
 * Priority order: priority, then submit order, across teams; quota rules
 * still decide where each job may go and whether it borrows, and a
 * guaranteed candidate that does not fit is tried again at once as
 * borrowed work elsewhere.
 *
 * A preemptible job that quota allows nowhere only because the free
 * capacity is idle quota other teams do not lend (lending limits) is still
 * handed out where its borrowing try would come (the fair order's second
 * phase at its team's turn, or its place in the priority order), for its
 * fair-share victim search alone (schedule.c); other quota-blocked jobs
 * are passed over.
 *
 * Within a team whose order is las (gangsched.team_order, or the team's
 * own), the LAS queue comes between priority and submit order: jobs that
 * have attained less service go first (las.h). Only the team's own jobs
 * change places: under the priority order each keeps the slots its team's
 * jobs had (so the interleaving of teams is the fifo one), under the fair
 * order the team's queue is sorted so.
 *
 * Each job's per-team queue is scanned once per phase, so the order costs
 * O(jobs × teams) at most.
 */
#include "postgres.h"

#include "fair.h"
#include "las.h"
#include "order.h"

typedef struct TeamQ
{
	GsJob	  **jobs;			/* this team's pending jobs, in team order */
	int			n;
	int			cur;			/* phase 1 cursor */
	GsJob	  **later;			/* phase 2 candidates, in team order */
	int			nlater;
	int			curlater;
} TeamQ;

struct GsOrder
{
	GsState    *st;
	GsOrderPolicy policy;
	bool		held_back_turns;	/* GsOrderSettings.held_back_turns */
	int			phase;			/* 1 guaranteed, 2 borrowed */
	TeamQ	   *tq;				/* [nteams + 1]; the last holds unknown teams */
	int			nq;
	GsJob	  **global;			/* priority policy: all jobs in order */
	int			gcur;
	GsJob	  **seq;			/* tried, in order; then never tried */
	int			nseq;
	int			nseq_tried;
	bool		finalized;
	GsJob	   *current;		/* handed out, not yet reported */
	uint8	   *team_phases;
	/* next_fair's per-team cache, valid while version and phase are unchanged */
	uint64	   *cache_version;
	int		   *cache_phase;
	GsJob	  **cache_job;
	double	   *cache_share;
	/* trees, phase 1: what the cached candidate's pools survive (gs_tree_guaranteed_pools) */
	double	   *cache_slack;	/* [nq][GS_TREE_SLACK_DEPTH][GS_NRES], by level of its path */
	double	   *cache_growth;	/* the same: each level's use_growth then */
	uint64_t   *cache_drops;	/* [nq]: the cluster's use_drops then */
	uint64		version;		/* bumped by every placement */
	/* team shares for the 'ahead' count, by version */
	uint64	   *share_version;
	double	   *share;	/* [nq]: bit p-1 set once a team had a try in phase p */
	int		   *ahead;			/* [njobs]: teams ahead with a lower share, at the last try */
	GsJob	   *retry;			/* priority policy: a guaranteed try that failed, to borrow */
	/* per team: pools where its guaranteed work waits, by version (anti-thrash) */
	uint64	   *gwait_version;
	uint64_t   *gwait_mask;
	/* trees: each inner team's pick (set_pick over its children), by version and phase */
	uint64	   *pick_version;
	int		   *pick_phase;
	GsJob	  **pick_job;
	int		   *pick_leaf;
	/*
	 * Trees, phase 1: what an inner team's pick survives without a look
	 * below it (subtree_pick). touched: the version of the last placement
	 * in a team's subtree; pick_drops: the cluster's use_drops when the
	 * pick was made; pick_thr[t][d][r]: the least use_growth of t's
	 * ancestor at depth d (< t's depth) at which a cached candidate below t
	 * has to be looked at again (its snapshot plus its slack at that level).
	 */
	uint64	   *touched;
	uint64_t   *pick_drops;
	double	   *pick_thr;
	bool	   *pick_thr_ok;	/* pick_thr[t] taken since t's pick was made */
	uint64	   *share_stamp;	/* trees: version + 1 when share[t] was taken */
	uint64_t   *share_drops;	/* trees: the cluster's use_drops then */
	uint8	   *pick_mask;		/* resources its subtree's active candidates ask for */
	uint8	   *pick_usedup;	/* tree_used_up when the pick was made */
	/* trees: resources used up (tree_used_up), by version */
	double		min_gang[GS_NRES];	/* the smallest pending gang asking for each, at its minimum size */
	double		free0[GS_NRES];	/* free on up nodes at the start */
	double		used0[GS_NRES];	/* the pools' use then */
	uint64		usedup_version;
	uint8		usedup;
	bool		min_gang_ok;
	uint8	   *jbits;			/* [njobs]: the resources each job asks for */
	bool		one_kind;		/* every candidate asks for the same resources and no team holds others */
	uint64	   *ms_version;		/* member_share's cache, by version and mask */
	uint8	   *ms_mask;
	double	   *ms;
};

static int
cmp_priority_fifo(const void *a, const void *b)
{
	const GsJob *x = *(GsJob *const *) a;
	const GsJob *y = *(GsJob *const *) b;

	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->queue_pos != y->queue_pos)
		return x->queue_pos < y->queue_pos ? -1 : 1;
	return x->id < y->id ? -1 : (x->id > y->id);
}

/* Within a las team: priority, then LAS queue, then submit order. */
static int
cmp_priority_las(const void *a, const void *b)
{
	const GsJob *x = *(GsJob *const *) a;
	const GsJob *y = *(GsJob *const *) b;

	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->las_queue != y->las_queue)
		return x->las_queue < y->las_queue ? -1 : 1;
	return cmp_priority_fifo(a, b);
}

/*
 * LAS queues of the las teams' jobs, then those teams' jobs re-sorted in
 * the slots they hold in `global` (sorted by priority, then submit order):
 * a job moves only within its team and its priority.
 */
static void
las_reslot(GsState *st, const GsOrderSettings *set, GsJob **global, int n)
{
	GsCluster  *c = st->cluster;
	int		   *cnt,
			   *cur;
	GsJob	 ***byteam;
	int			i,
				t;
	bool		any = false;

	for (i = 0; i < n; i++)
	{
		GsJob	   *j = global[i];

		if (j->tix >= 0 && c->teams[j->tix].las)
		{
			double		waited = (double) Max(st->now - j->queued_at, 0) / 1000000.0;

			j->las_queue = (int16_t) gs_las_pending_queue(j->attained, waited, set->las_promote_factor,
														  &j->las_promoted);
			j->las_preempts = set->las_preemption;
			any = true;
		}
		else
			j->las_queue = -1;
	}
	if (!any)
		return;
	cnt = palloc0(sizeof(int) * c->nteams);
	cur = palloc0(sizeof(int) * c->nteams);
	byteam = palloc0(sizeof(GsJob **) * c->nteams);
	for (i = 0; i < n; i++)
		if (global[i]->las_queue >= 0)
			cnt[global[i]->tix]++;
	for (t = 0; t < c->nteams; t++)
		if (cnt[t] > 0)
			byteam[t] = palloc(sizeof(GsJob *) * cnt[t]);
	for (i = 0; i < n; i++)
		if (global[i]->las_queue >= 0)
		{
			t = global[i]->tix;
			byteam[t][cur[t]++] = global[i];
		}
	for (t = 0; t < c->nteams; t++)
	{
		if (cnt[t] > 1)
			qsort(byteam[t], cnt[t], sizeof(GsJob *), cmp_priority_las);
		cur[t] = 0;
	}
	for (i = 0; i < n; i++)
		if (global[i]->las_queue >= 0)
		{
			t = global[i]->tix;
			global[i] = byteam[t][cur[t]++];
		}
}

/*
 * A closed team's pending jobs (close_team()) are never tried, so they
 * neither run nor preempt: they keep their place after the tried ones, with
 * a reason that says why. Their queue timeout still applies.
 */
static bool
set_closed_reason(GsCluster *c, GsJob *j)
{
	const GsTeam *t;

	if (gs_team_inner(c, j))
	{
		j->reason = psprintf("team %s has child teams: only jobs of leaf teams are scheduled", c->teams[j->tix].name);
		return true;
	}
	if (!gs_team_closed(c, j))
		return false;
	t = &c->teams[gs_team_closed_by(c, j)];
	if (t == &c->teams[j->tix])
		j->reason = t->closed_reason != NULL
			? psprintf("team %s is closed to new work: %s", t->name, t->closed_reason)
			: psprintf("team %s is closed to new work", t->name);
	else
		j->reason = t->closed_reason != NULL
			? psprintf("team %s (above %s) is closed to new work: %s", t->name, c->teams[j->tix].name, t->closed_reason)
			: psprintf("team %s (above %s) is closed to new work", t->name, c->teams[j->tix].name);
	return true;
}

/* What one worker of j asks for, per resource. */
static inline void
job_amounts(const GsJob *j, double amt[GS_NRES])
{
	amt[GS_GPU] = j->gpus;
	amt[GS_CPU] = j->cpus;
	amt[GS_MEM] = j->mem;
	amt[GS_NET] = j->net;
}

/*
 * Trees: every job that may be a candidate asks for the same resources
 * (kind, not mixed), and no team holds any other (placements this round
 * add only those, victims only take away). Then member_share is
 * gs_dominant_share: an inner team's active candidates ask for all it
 * holds, or all are blocked.
 */
static bool
one_kind(GsOrder *o, int kind, bool mixed)
{
	GsCluster  *c = o->st->cluster;
	int			t,
				r;

	if (mixed)
		return false;
	for (t = 0; t < c->nteams && kind >= 0; t++)
		for (r = 0; r < GS_NRES; r++)
			if (!(kind & (1 << r)) && c->teams[t].used[r] > GS_EPS)
				return false;
	return true;
}

/*
 * The smallest gang of the round's possible candidates that asks for each
 * resource, at its minimum size (tree_used_up; taken on first need).
 */
static void
min_gangs(GsOrder *o)
{
	int			t,
				i,
				r;

	for (r = 0; r < GS_NRES; r++)
		o->min_gang[r] = -1;
	for (t = 0; t < o->nq; t++)
		for (i = 0; i < o->tq[t].n; i++)
		{
			const GsJob *j = o->tq[t].jobs[i];
			int32_t		w = j->min_workers > 0 ? Min(j->min_workers, j->workers) : j->workers;
			double		amt[GS_NRES];

			if (j->expiring)
				continue;
			job_amounts(j, amt);
			for (r = 0; r < GS_NRES; r++)
				if (amt[r] > 0 && (o->min_gang[r] < 0 || amt[r] * w < o->min_gang[r]))
					o->min_gang[r] = amt[r] * w;
		}
	o->min_gang_ok = true;
}

GsOrder *
gs_order_begin(GsState *st, const GsOrderSettings *set)
{
	GsOrder    *o = palloc0(sizeof(GsOrder));
	GsCluster  *c = st->cluster;
	int			i,
				n = st->njobs,
				kind = -1;
	bool		mixed = false;

	o->st = st;
	o->policy = set->policy;
	o->held_back_turns = set->held_back_turns;
	o->phase = 1;
	o->seq = palloc(sizeof(GsJob *) * Max(n, 1));
	o->global = palloc(sizeof(GsJob *) * Max(n, 1));
	for (i = 0; i < n; i++)
		o->global[i] = &st->jobs[i];
	qsort(o->global, n, sizeof(GsJob *), cmp_priority_fifo);
	las_reslot(st, set, o->global, n);

	o->nq = c->nteams + 1;
	o->tq = palloc0(sizeof(TeamQ) * o->nq);
	o->team_phases = palloc0(sizeof(uint8) * o->nq);
	o->cache_version = palloc(sizeof(uint64) * o->nq);
	o->cache_phase = palloc0(sizeof(int) * o->nq);
	o->cache_job = palloc0(sizeof(GsJob *) * o->nq);
	o->cache_share = palloc0(sizeof(double) * o->nq);
	o->cache_slack = palloc0(sizeof(double) * GS_TREE_SLACK_DEPTH * GS_NRES * o->nq);
	o->cache_growth = palloc0(sizeof(double) * GS_TREE_SLACK_DEPTH * GS_NRES * o->nq);
	o->cache_drops = palloc0(sizeof(uint64_t) * o->nq);
	o->share_version = palloc(sizeof(uint64) * o->nq);
	o->share = palloc0(sizeof(double) * o->nq);
	for (i = 0; i < o->nq; i++)
	{
		o->cache_version[i] = UINT64_MAX;
		o->share_version[i] = UINT64_MAX;
	}
	o->ahead = palloc0(sizeof(int) * Max(n, 1));
	o->gwait_version = palloc(sizeof(uint64) * o->nq);
	o->gwait_mask = palloc0(sizeof(uint64_t) * o->nq);
	for (i = 0; i < o->nq; i++)
		o->gwait_version[i] = UINT64_MAX;
	if (c->tree)
	{
		o->pick_version = palloc(sizeof(uint64) * o->nq);
		o->pick_phase = palloc0(sizeof(int) * o->nq);
		o->pick_job = palloc0(sizeof(GsJob *) * o->nq);
		o->pick_leaf = palloc0(sizeof(int) * o->nq);
		for (i = 0; i < o->nq; i++)
			o->pick_version[i] = UINT64_MAX;
		o->touched = palloc0(sizeof(uint64) * o->nq);
		o->pick_drops = palloc0(sizeof(uint64_t) * o->nq);
		o->pick_thr = palloc(sizeof(double) * GS_TREE_SLACK_DEPTH * GS_NRES * o->nq);
		o->pick_thr_ok = palloc0(sizeof(bool) * o->nq);
		o->share_stamp = palloc0(sizeof(uint64) * o->nq);
		o->share_drops = palloc0(sizeof(uint64_t) * o->nq);
		o->pick_mask = palloc0(sizeof(uint8) * o->nq);
		o->pick_usedup = palloc0(sizeof(uint8) * o->nq);
		o->usedup_version = UINT64_MAX;
		o->jbits = palloc0(sizeof(uint8) * Max(n, 1));
		o->ms_version = palloc(sizeof(uint64) * o->nq);
		o->ms_mask = palloc0(sizeof(uint8) * o->nq);
		o->ms = palloc0(sizeof(double) * o->nq);
		for (i = 0; i < o->nq; i++)
			o->ms_version[i] = UINT64_MAX;
	}
	for (i = 0; i < n; i++)
	{
		GsJob	   *j = o->global[i];
		int			t = (j->tix >= 0) ? j->tix : c->nteams;

		if (set_closed_reason(c, j))
			continue;
		o->tq[t].n++;
	}
	for (i = 0; i < o->nq; i++)
	{
		o->tq[i].jobs = palloc(sizeof(GsJob *) * Max(o->tq[i].n, 1));
		o->tq[i].later = palloc(sizeof(GsJob *) * Max(o->tq[i].n, 1));
		o->tq[i].n = 0;
	}
	for (i = 0; i < n; i++)
	{
		GsJob	   *j = o->global[i];
		int			t = (j->tix >= 0) ? j->tix : c->nteams;

		if (gs_team_closed(c, j) || gs_team_inner(c, j))
			continue;
		o->tq[t].jobs[o->tq[t].n++] = j;
		if (c->tree && !j->expiring)
		{
			uint8		b = (uint8) ((j->gpus > 0) << GS_GPU | (j->cpus > 0) << GS_CPU |
									 (j->mem > 0) << GS_MEM | (j->net > 0) << GS_NET);

			o->jbits[j - st->jobs] = b;
			if (kind < 0)
				kind = b;
			else if (b != kind)
				mixed = true;
		}
	}
	if (c->tree)
		o->one_kind = one_kind(o, kind, mixed);
	if (c->tree && !o->one_kind)
	{
		/* what is free now (tree_used_up) */
		for (i = 0; i < c->nnodes; i++)
		{
			const GsNode *nd = &c->nodes[i];

			if (nd->state != GS_NODE_UP)
				continue;
			o->free0[GS_GPU] += (double) nd->free_slices / Max(nd->slices, 1);
			o->free0[GS_CPU] += nd->free_cpus;
			o->free0[GS_MEM] += nd->free_mem;
			o->free0[GS_NET] += nd->free_net;
		}
		for (i = 0; i < c->npools; i++)
		{
			int			r;

			for (r = 0; r < GS_NRES; r++)
				o->used0[r] += c->pools[i].used[r];
		}
	}
	return o;
}

static void
tried(GsOrder *o, GsJob *j)
{
	if (j->tried_at < 0)
	{
		j->tried_at = o->nseq;
		o->seq[o->nseq++] = j;
	}
	o->current = j;
}

/*
 * Team t's next phase-1 candidate, deferring those beyond nominal quota.
 * Trees: the candidate's slack goes to the cache (leaf_candidate).
 */
static GsJob *
peek_guaranteed(GsOrder *o, int t)
{
	TeamQ	   *q = &o->tq[t];
	GsCluster  *c = o->st->cluster;

	while (q->cur < q->n)
	{
		GsJob	   *j = q->jobs[q->cur];
		uint64_t	m;

		if (j->expiring || j->placed || j->reserved)
		{
			q->cur++;
			continue;
		}
		if (c->tree && t < c->nteams)
		{
			const double *g = gs_tree_growth(c);
			double	   *snap = &o->cache_growth[(size_t) t * GS_TREE_SLACK_DEPTH * GS_NRES];
			int			a,
						k;

			m = gs_tree_guaranteed_pools(c, j, &o->cache_slack[(size_t) t * GS_TREE_SLACK_DEPTH * GS_NRES]);
			for (a = t, k = 0; a >= 0 && k < GS_TREE_SLACK_DEPTH; a = c->teams[a].parent, k++)
				memcpy(&snap[k * GS_NRES], &g[a * GS_NRES], sizeof(double) * GS_NRES);
			o->cache_drops[t] = c->use_drops;
		}
		else
			m = gs_guaranteed_pools(c, j);
		if (m != 0)
		{
			j->pool_mask = m;
			j->try_borrowing = false;
			return j;
		}
		q->later[q->nlater++] = j;
		q->cur++;
	}
	return NULL;
}

/*
 * Anti-thrash: pools where team t has guaranteed work still waiting this
 * round (pending, not placed or nominated, within its nominal quota there).
 */
static uint64_t
guaranteed_waiting(GsOrder *o, int t)
{
	TeamQ	   *q;
	uint64_t	m = 0;
	int			i;

	if (t < 0 || t >= o->nq - 1)
		return 0;
	if (o->gwait_version[t] == o->version)
		return o->gwait_mask[t];
	q = &o->tq[t];
	for (i = 0; i < q->n; i++)
	{
		GsJob	   *j = q->jobs[i];

		if (j->placed || j->nominated || j->expiring)
			continue;
		m |= gs_guaranteed_pools(o->st->cluster, j);
	}
	o->gwait_version[t] = o->version;
	o->gwait_mask[t] = m;
	return m;
}

uint64_t
gs_order_thrash_mask(GsOrder *o, GsJob *j, char **why)
{
	uint64_t	m;
	GsCluster  *c = o->st->cluster;

	if (j->reclaimed_by < 0 || j->reclaimed_by == j->tix)
		return 0;
	m = guaranteed_waiting(o, j->reclaimed_by);
	if (m != 0 && why != NULL)
		*why = psprintf("preempted to give team %s its quota back, it does not borrow where %s's guaranteed work still waits",
						c->teams[j->reclaimed_by].name, c->teams[j->reclaimed_by].name);
	return m;
}

/*
 * A job quota allows nowhere, but only because the free capacity is idle
 * quota other teams do not lend (gs_held_back_pools, less the anti-thrash
 * pools): with preemption on it is still handed out at its place in the
 * order, for its victim search alone (J->held_back_turn, schedule.c).
 */
static bool
held_back_turn(GsOrder *o, GsJob *j)
{
	if (!o->held_back_turns || !j->preemptible || j->nominated || j->tix < 0)
		return false;
	return (gs_held_back_pools(o->st->cluster, j) & ~gs_order_thrash_mask(o, j, NULL)) != 0;
}

/*
 * Team t's next phase-2 candidate; those quota forbids are marked blocked
 * and passed over, but for a held-back one's turn (held_back_turn).
 */
static GsJob *
peek_borrowing(GsOrder *o, int t)
{
	TeamQ	   *q = &o->tq[t];
	GsCluster  *c = o->st->cluster;

	while (q->curlater < q->nlater)
	{
		GsJob	   *j = q->later[q->curlater];
		uint64_t	m;
		char	   *why;

		if (j->placed || j->reserved)
		{
			q->curlater++;
			continue;
		}
		m = gs_borrow_pools(c, j, &why);
		if (m != 0)
		{
			char	   *twhy = NULL;

			m &= ~gs_order_thrash_mask(o, j, &twhy);
			if (m == 0)
				why = twhy;
		}
		if (m != 0)
		{
			j->pool_mask = m;
			j->quota_blocked = false;
			j->held_back_turn = false;
			j->try_borrowing = true;
			return j;
		}
		j->quota_blocked = true;
		if (why != NULL)
			j->reason = why;
		j->held_back_turn = held_back_turn(o, j);
		if (j->held_back_turn)
			return j;
		q->curlater++;
	}
	return NULL;
}

static double
team_share(GsOrder *o, int t)
{
	if (o->share_version[t] != o->version)
	{
		o->share[t] = gs_dominant_share(o->st->cluster, t);
		o->share_version[t] = o->version;
	}
	return o->share[t];
}

/*
 * A subtree's share (trees): its use changes only with a placement inside
 * it (touched) or a victim's release (use_drops), so a share taken since
 * stays right.
 */
static inline double
tree_share(GsOrder *o, int t)
{
	if (o->share_stamp[t] <= o->touched[t] || o->share_drops[t] != o->st->cluster->use_drops)
	{
		o->share[t] = gs_dominant_share(o->st->cluster, t);
		o->share_stamp[t] = o->version + 1;
		o->share_drops[t] = o->st->cluster->use_drops;
	}
	return o->share[t];
}

/* ---- team trees: hierarchical weighted DRF ----------------------------- */

/*
 * Resources used up in this round, as H-DRF stops counting them (fair.c,
 * hdrf_fill): bit r is set when what is left of r on all up nodes together
 * is below the smallest gang of the round's pending jobs that asks for r,
 * at its minimum size. No candidate asking for r can then be placed
 * anywhere (it may still nominate victims), however the nodes are filled;
 * a resource left in pieces too small for the gangs, or only in pools or
 * on nodes they may not use, is not counted as used up, and the order
 * compares as without the rule. What is left: the up nodes' free amounts
 * at the start (whole devices and free slices), less what the pools' use
 * grew by since (placements and nominations add their gang, a
 * nomination's victims leave; a victim on a node that is not up makes it
 * count more than is left, never less). Kept by version (every placement
 * or nomination bumps it): O(pools) each.
 */
static uint8
tree_used_up(GsOrder *o)
{
	GsCluster  *c = o->st->cluster;
	int			p,
				r;

	if (o->usedup_version == o->version)
		return o->usedup;
	if (!o->min_gang_ok)
		min_gangs(o);
	o->usedup = 0;
	for (r = 0; r < GS_NRES; r++)
	{
		double		left = o->free0[r] + o->used0[r];

		if (o->min_gang[r] <= 0 || c->capacity[r] <= 0)
			continue;
		for (p = 0; p < c->npools; p++)
			left -= c->pools[p].used[r];
		if (left < o->min_gang[r] - GS_EPS)
			o->usedup |= (uint8) (1 << r);
	}
	o->usedup_version = o->version;
	return o->usedup;
}

/*
 * The resources a leaf's candidate asks for, none when some of them is
 * used up: in H-DRF such a leaf is blocked, and what it asks for no longer
 * makes its ancestors count a resource.
 */
static inline uint8
candidate_mask(GsOrder *o, const GsJob *j)
{
	uint8		m;

	if (j == NULL || o->one_kind)
		return 0;
	m = o->jbits[j - o->st->jobs];
	return (m & tree_used_up(o)) ? 0 : m;
}

/*
 * What a sibling set compares a member t at (H-DRF's "ignoring blocked
 * nodes"): a leaf, its weighted dominant share (all it holds, as H-DRF's
 * leaf share x); an inner team, the largest fraction of the cluster its
 * subtree holds of a resource that one of its active candidates (mask:
 * those that ask for no used-up resource) asks for, over its weight. With
 * no active candidate below (all blocked on a used-up resource) it is the
 * whole dominant share, as without the rule. When every candidate asks
 * for the resources its subtree holds and none is used up, this is
 * gs_dominant_share.
 */
static double
masked_share(GsOrder *o, int t, uint8 mask)
{
	const GsCluster *c = o->st->cluster;
	const GsTeam *tm = &c->teams[t];
	double		ds = 0;
	int			r;

	if (o->ms_version[t] == o->version && o->ms_mask[t] == mask)
		return o->ms[t];
	for (r = 0; r < GS_NRES; r++)
		if ((mask & (1 << r)) && c->capacity[r] > 0)
			ds = Max(ds, tm->used[r] / c->capacity[r]);
	o->ms[t] = ds / tm->weight;
	o->ms_version[t] = o->version;
	o->ms_mask[t] = mask;
	return o->ms[t];
}

static inline double
member_share(GsOrder *o, int t, uint8 mask)
{
	if (mask == 0 || o->st->cluster->teams[t].nchildren == 0)
		return tree_share(o, t);
	return masked_share(o, t, mask);
}

/* Leaf (or unknown-team queue) t's candidate in this phase, cached as next_fair does. */
static GsJob *
leaf_candidate(GsOrder *o, int t)
{
	GsJob	   *j;

	if (o->cache_version[t] == o->version && o->cache_phase[t] == o->phase)
		return o->cache_job[t];
	/*
	 * Phase 1: placements since (use only grew) left the candidate's pools
	 * as they were while each level of its path grew by less than that
	 * level's slack (fair.c, gs_tree_guaranteed_pools); no candidate stays
	 * none. Otherwise, or once it was taken (cache_version UINT64_MAX),
	 * look again.
	 */
	if (o->phase == 1 && o->cache_phase[t] == 1 && o->cache_version[t] != UINT64_MAX &&
		t < o->st->cluster->nteams)
	{
		GsCluster  *c = o->st->cluster;
		bool		same = true;
		int			r;

		if (o->cache_job[t] != NULL)
		{
			const double *g = gs_tree_growth(c);
			const double *snap = &o->cache_growth[(size_t) t * GS_TREE_SLACK_DEPTH * GS_NRES],
					   *sl = &o->cache_slack[(size_t) t * GS_TREE_SLACK_DEPTH * GS_NRES];
			int			a,
						k;

			/* a path deeper than the slack kept: always look again */
			same = o->cache_drops[t] == c->use_drops && c->teams[t].depth < GS_TREE_SLACK_DEPTH;
			for (a = t, k = 0; a >= 0 && same; a = c->teams[a].parent, k++)
				for (r = 0; r < GS_NRES && same; r++)
					same = g[a * GS_NRES + r] - snap[k * GS_NRES + r] < sl[k * GS_NRES + r] - 1e-6;
		}
		if (same)
		{
			o->cache_version[t] = o->version;
			return o->cache_job[t];
		}
	}
	j = (o->phase == 1) ? peek_guaranteed(o, t) : peek_borrowing(o, t);
	o->cache_job[t] = j;
	o->cache_version[t] = o->version;
	o->cache_phase[t] = o->phase;
	return j;
}

static GsJob *set_pick(GsOrder *o, const int32_t *mem, int n, bool unknown, int *leaf, uint8 *mask);

/*
 * Phase 1, inner team t's pick unchanged since it was made (so are the
 * caches below it: only a new pick of t looks at them): for each ancestor
 * depth d, the least growth of that ancestor at which some cached
 * candidate below t is to be looked at again (leaf_candidate: its growth snapshot at that
 * level plus its slack there). A leaf without a candidate constrains
 * nothing (none stays none while use only grows); a leaf too deep for its
 * slack to be kept forbids reuse (-1e300).
 */
static void
pick_thresholds(GsOrder *o, int t)
{
	GsCluster  *c = o->st->cluster;
	const GsTeam *tm = &c->teams[t];
	double	   *thr = &o->pick_thr[(size_t) t * GS_TREE_SLACK_DEPTH * GS_NRES];
	int			k,
				d,
				r,
				dt = tm->depth;

	o->pick_thr_ok[t] = true;
	if (dt >= GS_TREE_SLACK_DEPTH)
		return;
	for (d = 0; d < dt; d++)
		for (r = 0; r < GS_NRES; r++)
			thr[d * GS_NRES + r] = 1e300;
	for (k = 0; k < tm->nchildren; k++)
	{
		int			ch = tm->children[k];
		const GsTeam *cm = &c->teams[ch];

		if (cm->depth >= GS_TREE_SLACK_DEPTH && (cm->nchildren > 0 || o->cache_job[ch] != NULL))
		{
			for (d = 0; d < dt * GS_NRES; d++)
				thr[d] = -1e300;
			return;
		}
		if (cm->nchildren > 0)
		{
			const double *cthr = &o->pick_thr[(size_t) ch * GS_TREE_SLACK_DEPTH * GS_NRES];

			if (!o->pick_thr_ok[ch])
				pick_thresholds(o, ch);
			for (d = 0; d < dt * GS_NRES; d++)
				thr[d] = Min(thr[d], cthr[d]);
		}
		else if (o->cache_job[ch] != NULL)
		{
			const double *snap = &o->cache_growth[(size_t) ch * GS_TREE_SLACK_DEPTH * GS_NRES],
					   *sl = &o->cache_slack[(size_t) ch * GS_TREE_SLACK_DEPTH * GS_NRES];

			for (d = 0; d < dt; d++)
			{
				int			lv = cm->depth - d; /* the ancestor's level on the leaf's path */

				for (r = 0; r < GS_NRES; r++)
					thr[d * GS_NRES + r] = Min(thr[d * GS_NRES + r],
											   snap[lv * GS_NRES + r] + sl[lv * GS_NRES + r]);
			}
		}
	}
}

/*
 * Subtree t's candidate: a leaf's own, else the pick among its children;
 * *mask: what its active candidates ask for (candidate_mask, the union
 * over its leaves).
 */
static GsJob *
subtree_pick(GsOrder *o, int t, int *leaf, uint8 *mask)
{
	const GsTeam *tm = &o->st->cluster->teams[t];

	if (tm->nchildren == 0)
	{
		GsJob	   *j = leaf_candidate(o, t);

		*leaf = t;
		*mask = candidate_mask(o, j);
		return j;
	}
	/*
	 * An inner team's pick changes only when a gang is placed (version) or
	 * a candidate of its subtree is taken (next_fair_tree forgets the picks
	 * along that leaf's path). In phase 1 a placement outside the subtree
	 * leaves it as it was while no use was released and every ancestor's
	 * use grew by less than what each cached candidate below survives
	 * there (pick_thr, kept 1e-6 on the safe side of leaf_candidate's own
	 * test): the children's shares and candidates are then unchanged, and
	 * so is the pick, as long as the same resources are used up (with
	 * several kinds of job, member_share).
	 */
	if (o->pick_version[t] != o->version || o->pick_phase[t] != o->phase)
	{
		if (o->phase == 1 && o->pick_phase[t] == 1 && o->pick_version[t] != UINT64_MAX &&
			o->pick_version[t] >= o->touched[t] && o->pick_drops[t] == o->st->cluster->use_drops &&
			tm->depth < GS_TREE_SLACK_DEPTH && (o->one_kind || o->pick_usedup[t] == tree_used_up(o)))
		{
			const double *g = gs_tree_growth(o->st->cluster);
			const double *thr = &o->pick_thr[(size_t) t * GS_TREE_SLACK_DEPTH * GS_NRES];
			bool		same = true;
			int			a,
						r;

			if (!o->pick_thr_ok[t])
				pick_thresholds(o, t);	/* taken when first needed */

			for (a = tm->parent; a >= 0 && same; a = o->st->cluster->teams[a].parent)
			{
				int			d = o->st->cluster->teams[a].depth;

				for (r = 0; r < GS_NRES && same; r++)
					same = g[a * GS_NRES + r] < thr[d * GS_NRES + r] - 2e-6;
			}
			if (same)
			{
				o->pick_version[t] = o->version;
				*leaf = o->pick_leaf[t];
				*mask = o->pick_mask[t];
				return o->pick_job[t];
			}
		}
		o->pick_job[t] = set_pick(o, tm->children, tm->nchildren, false, &o->pick_leaf[t], &o->pick_mask[t]);
		o->pick_version[t] = o->version;
		o->pick_phase[t] = o->phase;
		o->pick_drops[t] = o->st->cluster->use_drops;
		o->pick_thr_ok[t] = false;
		if (!o->one_kind)
			o->pick_usedup[t] = tree_used_up(o);
	}
	*leaf = o->pick_leaf[t];
	*mask = o->pick_mask[t];
	return o->pick_job[t];
}

/*
 * One sibling set: the member whose subtree holds the lowest weighted
 * share as H-DRF counts it (member_share) and has a candidate goes next
 * (ties: the candidates' priority, then submit order); at the top, jobs of
 * unknown teams count at share 0, as in the flat order. *mask: the union
 * of the members' masks.
 */
static GsJob *
set_pick(GsOrder *o, const int32_t *mem, int n, bool unknown, int *leaf, uint8 *mask)
{
	GsJob	   *bj = NULL;
	double		bestds = 0;
	int			k,
				bleaf = -1;

	*mask = 0;
	for (k = 0; k < n + (unknown ? 1 : 0); k++)
	{
		int			t = k < n ? mem[k] : o->nq - 1,
					l = t;
		uint8		m = 0;
		GsJob	   *j = k < n ? subtree_pick(o, t, &l, &m) : leaf_candidate(o, t);
		double		ds;

		if (j == NULL)
			continue;
		*mask |= m;
		ds = k < n ? member_share(o, t, m) : 0;
		if (bj == NULL || ds < bestds - GS_SHARE_EPS ||
			(ds <= bestds + GS_SHARE_EPS && cmp_priority_fifo(&j, &bj) < 0))
		{
			bj = j;
			bestds = ds;
			bleaf = l;
		}
	}
	*leaf = bleaf;
	return bj;
}

/*
 * Subtree t's mask as the pick that just ran saw it: every sibling along
 * the picked path was looked at in this version and phase, or sits below a
 * pick reused with nothing below it changed and the same resources used up
 * (a subtree whose pick was forgotten has its parent's forgotten too), so
 * the caches hold it.
 */
static uint8
node_mask(GsOrder *o, int t)
{
	if (o->one_kind)
		return 0;
	if (o->st->cluster->teams[t].nchildren > 0)
		return o->pick_mask[t];
	return candidate_mask(o, o->cache_job[t]);
}

/* A member's share as its sibling set compared it in the last pick (the 'teams ahead' count). */
static inline double
sibling_share(GsOrder *o, int t)
{
	return o->one_kind ? tree_share(o, t) : member_share(o, t, node_mask(o, t));
}

/*
 * The fair order over a team tree (H-DRF): from the top, at each level the
 * sibling whose subtree holds the lowest weighted share (member_share: its
 * dominant share over the resources its active candidates ask for) and has
 * a candidate is chosen, down to a leaf team, whose next job is tried.
 * Phases and progressive filling as in the flat order.
 */
static GsJob *
next_fair_tree(GsOrder *o)
{
	GsCluster  *c = o->st->cluster;

	for (;;)
	{
		int			leaf = -1;
		uint8		topmask;
		GsJob	   *bj = set_pick(o, c->roots, c->nroots, true, &leaf, &topmask);

		if (bj != NULL)
		{
			uint8		bit = (uint8) (1 << (o->phase - 1));
			int			ahead = 0,
						t,
						k;

			if (leaf < c->nteams)
			{
				/*
				 * Teams ahead of this try: along its path, siblings tried
				 * earlier in this phase holding a lower share now (as the
				 * set compared them: member_share, with the masks of this
				 * pick, cached).
				 */
				for (t = leaf; t >= 0; t = c->teams[t].parent)
				{
					int			pa = c->teams[t].parent;
					const int32_t *sib = pa >= 0 ? c->teams[pa].children : c->roots;
					int			nsib = pa >= 0 ? c->teams[pa].nchildren : c->nroots;
					double		mine = sibling_share(o, t);

					for (k = 0; k < nsib; k++)
						if (sib[k] != t && (o->team_phases[sib[k]] & bit) &&
							sibling_share(o, sib[k]) < mine - GS_SHARE_EPS)
							ahead++;
					o->team_phases[t] |= bit;
				}
				bj->share_at_try = tree_share(o, leaf);
			}
			else
				bj->share_at_try = 0;
			o->ahead[bj - o->st->jobs] = ahead;
			o->team_phases[leaf] |= bit;
			if (o->phase == 1)
				o->tq[leaf].cur++;
			else
				o->tq[leaf].curlater++;
			o->cache_version[leaf] = UINT64_MAX;	/* its candidate is taken */
			if (leaf < c->nteams)
				for (t = c->teams[leaf].parent; t >= 0; t = c->teams[t].parent)
					o->pick_version[t] = UINT64_MAX;	/* and so its ancestors' picks */
			tried(o, bj);
			return bj;
		}
		if (o->phase == 2)
			return NULL;
		o->phase = 2;
	}
}

static GsJob *
next_fair(GsOrder *o)
{
	GsCluster  *c = o->st->cluster;

	if (c->tree)
		return next_fair_tree(o);
	for (;;)
	{
		int			t,
					best = -1;
		double		bestds = 0;
		GsJob	   *bj = NULL;

		for (t = 0; t < o->nq; t++)
		{
			GsJob	   *j;
			double		ds;

			/*
			 * A team's next candidate and its share change only when a gang
			 * is placed (o->version) or the team's own candidate is taken:
			 * most tries fail, so most picks reuse them.
			 */
			if (o->cache_version[t] == o->version && o->cache_phase[t] == o->phase)
			{
				j = o->cache_job[t];
				ds = o->cache_share[t];
			}
			else
			{
				j = (o->phase == 1) ? peek_guaranteed(o, t) : peek_borrowing(o, t);
				ds = j ? gs_dominant_share(c, j->tix) : 0;
				o->cache_job[t] = j;
				o->cache_share[t] = ds;
				o->cache_version[t] = o->version;
				o->cache_phase[t] = o->phase;
			}
			if (j == NULL)
				continue;
			if (best < 0 || ds < bestds - GS_SHARE_EPS ||
				(ds <= bestds + GS_SHARE_EPS && cmp_priority_fifo(&j, &bj) < 0))
			{
				best = t;
				bestds = ds;
				bj = j;
			}
		}
		if (bj != NULL)
		{
			uint8		bit = (uint8) (1 << (o->phase - 1));
			int			ahead = 0;

			/*
			 * Teams ahead of this try for fairness: tried earlier in this
			 * phase and holding a lower share now (they went first).
			 */
			for (t = 0; t < c->nteams; t++)
				if (t != bj->tix && (o->team_phases[t] & bit) &&
					team_share(o, t) < bestds - GS_SHARE_EPS)
					ahead++;
			o->ahead[bj - o->st->jobs] = ahead;
			o->team_phases[best] |= bit;
			bj->share_at_try = bestds;
			if (o->phase == 1)
				o->tq[best].cur++;
			else
				o->tq[best].curlater++;
			o->cache_version[best] = UINT64_MAX;	/* its candidate is taken */
			tried(o, bj);
			return bj;
		}
		if (o->phase == 2)
			return NULL;
		o->phase = 2;
	}
}

static GsJob *
next_priority(GsOrder *o)
{
	GsCluster  *c = o->st->cluster;

	/*
	 * A guaranteed try that did not fit is tried again at once as borrowed
	 * work elsewhere, as the fair order's second phase does; if quota
	 * allows it nowhere, it keeps the reason it did not fit for.
	 */
	if (o->retry != NULL)
	{
		GsJob	   *j = o->retry;
		char	   *why = NULL;

		o->retry = NULL;
		j->pool_mask = gs_borrow_pools(c, j, &why) & ~gs_order_thrash_mask(o, j, NULL);
		if (j->pool_mask != 0)
		{
			j->try_borrowing = true;
			j->share_at_try = gs_dominant_share(c, j->tix);
			tried(o, j);
			return j;
		}
	}
	while (o->gcur < o->st->njobs)
	{
		GsJob	   *j = o->global[o->gcur++];
		char	   *why;

		if (j->expiring || gs_team_closed(c, j) || gs_team_inner(c, j))
			continue;
		why = NULL;
		j->held_back_turn = false;
		j->pool_mask = gs_guaranteed_pools(c, j);
		j->try_borrowing = (j->pool_mask == 0);
		if (j->pool_mask == 0)
		{
			char	   *twhy = NULL;

			j->pool_mask = gs_borrow_pools(c, j, &why);
			if (j->pool_mask != 0)
			{
				j->pool_mask &= ~gs_order_thrash_mask(o, j, &twhy);
				if (j->pool_mask == 0)
					why = twhy;
			}
		}
		if (j->pool_mask == 0)
		{
			j->quota_blocked = true;
			if (why != NULL)
				j->reason = why;
			j->held_back_turn = held_back_turn(o, j);
			if (!j->held_back_turn)
				continue;
		}
		j->share_at_try = gs_dominant_share(c, j->tix);
		tried(o, j);
		return j;
	}
	return NULL;
}

GsJob *
gs_order_next(GsOrder *o)
{
	return (o->policy == GS_ORDER_PRIORITY) ? next_priority(o) : next_fair(o);
}

void
gs_order_placed(GsOrder *o, GsJob *j)
{
	GsCluster  *c = o->st->cluster;
	int			pool = c->nodes[j->assign[0].node].pool;

	j->borrowed = gs_beyond_nominal(c, j, pool);
	gs_account(c, j, pool);
	o->version++;
	if (o->touched != NULL && j->tix >= 0)
	{
		int			t;

		for (t = j->tix; t >= 0; t = c->teams[t].parent)
			o->touched[t] = o->version;
	}
	o->current = NULL;
}

void
gs_order_failed(GsOrder *o, GsJob *j)
{
	/* a guaranteed try that did not fit may borrow elsewhere later */
	if (o->policy == GS_ORDER_FAIR && o->phase == 1 && j->preemptible && j->tix >= 0)
	{
		TeamQ	   *q = &o->tq[j->tix];

		q->later[q->nlater++] = j;
	}
	else if (o->policy == GS_ORDER_PRIORITY && !j->try_borrowing && j->preemptible && j->tix >= 0)
		o->retry = j;
	o->current = NULL;
}

/* Append the never-tried jobs, in priority order, once. */
static void
finalize(GsOrder *o)
{
	int			i;

	if (o->finalized)
		return;
	o->nseq_tried = o->nseq;
	for (i = 0; i < o->st->njobs; i++)
		if (o->global[i]->tried_at < 0)
			o->seq[o->nseq++] = o->global[i];
	o->finalized = true;
}

int
gs_order_count(GsOrder *o)
{
	finalize(o);
	return o->nseq;
}

GsJob *
gs_order_at(GsOrder *o, int k)
{
	finalize(o);
	return (k >= 0 && k < o->nseq) ? o->seq[k] : NULL;
}

int
gs_order_position(GsOrder *o, int64_t job_id)
{
	int			i;

	finalize(o);
	for (i = 0; i < o->nseq; i++)
		if (o->seq[i]->id == job_id)
			return i;
	return -1;
}

int
gs_order_teams_ahead(GsOrder *o, GsJob *job)
{
	/* counted when the job was last tried (next_fair), in the phase of that try */
	if (o->policy != GS_ORDER_FAIR || job->tried_at < 0)
		return 0;
	return o->ahead[job - o->st->jobs];
}
