/*
 * schedule.c — the in-memory half of a round.
 *
 * Candidates come from the order step (fair by default), each with the
 * pools it may use for that try; each is placed whole or not at all. The
 * first candidate that does not fit for want of free capacity (not for want
 * of any node at all) gets the starvation guard: its future placement is
 * chosen now and that capacity is kept from the later candidates of this
 * round, who may only backfill around it. Jobs whose queue timeout passed
 * are not candidates; they get the reason they would wait for now.
 *
 * A candidate that does not fit may get victims (preempt.c). Once it is
 * nominated its victims leave their team's use and it joins its own, so
 * every later decision of the round (the fair order, the next victim
 * search and its fair-share rule) sees the swap as done.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/timestamp.h"
#include "portability/instr_time.h"
#include "utils/hsearch.h"

#include "fair.h"
#include "order.h"
#include "preempt.h"
#include "schedule.h"

/*
 * Victim searches that found nothing a round tolerates before it stops
 * searching (each search is bounded too; searches that nominate a job do
 * not count).
 */
#define GS_MAX_FAILED_SEARCHES 16

/* A shape and team whose victim search failed this round, and from how many workers. */
typedef struct SearchKey
{
	GsShapeKey	shape;
	uint64_t	pool_mask;
	int32_t		tix;
	int16_t		flags;
} SearchKey;

typedef struct SearchMemo
{
	SearchKey	key;
	int32_t		min_workers;
} SearchMemo;

static void
search_key(const GsJob *j, SearchKey *k)
{
	memset(k, 0, sizeof(*k));
	gs_shape_key(j, &k->shape);
	k->pool_mask = j->pool_mask;
	k->tix = j->tix;
	k->flags = (int16_t) ((j->try_borrowing ? 1 : 0) | (j->quota_blocked ? 2 : 0) | (j->held_back ? 4 : 0));
}

/* A nominated job's waiting reason. */
static char *
nomination_reason(const GsJob *j)
{
	StringInfoData s;

	initStringInfo(&s);
	if (j->nvictims > 0)
		appendStringInfo(&s, "waiting for %d job%s to release capacity (%s)",
						 j->nvictim_gangs, j->nvictim_gangs == 1 ? "" : "s", j->trigger);
	else
		appendStringInfo(&s, "waiting for %d job%s preempted for other jobs to release capacity (%s)",
						 j->nwaits, j->nwaits == 1 ? "" : "s", j->trigger);
	return s.data;
}

/* One round's decisions in progress. */
typedef struct Round
{
	GsState    *st;
	GsDecision *out;
	GsScheduleSettings set;
	HTAB	   *memo;			/* SearchMemo: shapes whose victim search failed */
	bool	   *held_turned;	/* [njobs]: had its held-back search at its place in the order */
	int			failed;			/* victim searches that found nothing */
	bool		guard_done;		/* the starvation guard has its job */
	double		search_ms;		/* time in victim searches (DEBUG1) */
	int			search_n;
	GsPreemptRound preempt;		/* the fair level; the searches' placement probes */
} Round;

/* The candidate was placed: count it in the decision and the order. */
static void
placed(Round *rd, GsJob *j)
{
	rd->out->placed++;
	rd->out->workers_placed += j->workers;
	gs_order_placed(rd->out->order, j);
}

/*
 * Victim search with the round's bounds and failure memo. When it nominates
 * the job, its victims leave their team's use and the job joins its own:
 * later decisions of the round see the swap as done.
 */
static bool
nominate(Round *rd, GsJob *j)
{
	GsState    *st = rd->st;
	SearchKey	key;
	SearchMemo *m;
	bool		found;
	instr_time	t0,
				t1;
	bool		ok;
	int			k;

	if (rd->failed >= GS_MAX_FAILED_SEARCHES)
		return false;
	search_key(j, &key);
	m = hash_search(rd->memo, &key, HASH_FIND, &found);
	if (found && j->workers >= m->min_workers)
		return false;
	if (!st->running_loaded && st->load_running)
		st->load_running(st);
	INSTR_TIME_SET_CURRENT(t0);
	ok = gs_preempt(rd->out->placer, st, j, &rd->set.preempt, &rd->preempt);
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	rd->search_ms += INSTR_TIME_GET_MILLISEC(t1);
	rd->search_n++;
	if (!ok)
	{
		rd->failed++;
		m = hash_search(rd->memo, &key, HASH_ENTER, &found);
		if (!found || j->workers < m->min_workers)
			m->min_workers = j->workers;
		return false;
	}
	for (k = 0; k < j->nvictims; k++)
		gs_unaccount_running(st->cluster, j->victims[k]);
	rd->out->nominated++;
	rd->out->preempted += j->nvictim_gangs;	/* gangs preempted or shrunk */
	j->reason = nomination_reason(j);
	gs_order_placed(rd->out->order, j);
	return true;
}

void
gs_mark_expiring(GsState *st, int64_t now, int default_timeout_s)
{
	int			i;

	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];
		double		t = j->queue_timeout_s > 0 ? j->queue_timeout_s : default_timeout_s;

		j->expiring = (t > 0 && j->queued_at + (int64_t) (t * 1000000.0) <= now);
	}
}

/*
 * Elastic gangs (docs/elastic.md): place the job whole at the largest size
 * from its maximum down to its minimum, in whole replicas, that fits now
 * and that the quota rules of this try allow at that size (the try's
 * pools, chosen at the minimum by the order step, narrowed to those that
 * allow the size). `why` says why the maximum does not fit. The job keeps
 * the size it was placed at; when no size fits it is left asking for its
 * maximum. A rigid job is tried as it is, once.
 */
static bool
place_sized(GsPlacer *p, GsCluster *c, GsJob *j, GsWhy *why)
{
	uint64_t	mask = j->pool_mask;
	int			unit = j->group_size * j->stages;
	int			w,
				top;
	bool		probed = false;

	if (!gs_job_elastic(j))
		return gs_place(p, j, why);
	top = j->max_workers;
	for (w = top; w >= j->min_workers; w -= unit)
	{
		uint64_t	m;
		char	   *qwhy;

		j->workers = w;
		j->quota_workers = w;
		m = mask & (j->try_borrowing ? gs_borrow_pools(c, j, &qwhy) : gs_guaranteed_pools(c, j));
		if (m == 0)
			continue;
		j->pool_mask = m;
		if (gs_place(p, j, probed ? NULL : why))
		{
			j->quota_workers = j->min_workers;
			return true;
		}
		if (!probed)
		{
			probed = true;
			/* no size above what fits in any eligible pool now can fit */
			if (why != NULL && why->kind != GS_WHY_NONE && why->total_workers < w - unit)
				w = why->total_workers / unit * unit + unit;
		}
	}
	j->workers = j->max_workers;
	j->quota_workers = j->min_workers;
	j->pool_mask = mask;
	if (!probed && why != NULL)
		(void) gs_probe(p, j, why);		/* quota allowed no size: say why the whole gang waits */
	return false;
}

/*
 * Work conservation before anything else: a preemptible job that did not
 * fit within its quota runs at once on idle capacity it may borrow
 * elsewhere (another pool), rather than preempting or being held by the
 * starvation guard. Returns the pools it was tried on as borrowed work (0
 * when it was not); *ok says whether it was placed there.
 */
static uint64_t
borrow_elsewhere(Round *rd, GsJob *j, bool *ok)
{
	GsDecision *out = rd->out;
	char	   *qwhy = NULL;
	uint64_t	guaranteed = j->pool_mask;
	uint64_t	elsewhere;
	GsWhy		bwhy;

	*ok = false;
	if (j->try_borrowing || !j->preemptible || j->quota_blocked)
		return 0;
	elsewhere = gs_borrow_pools(rd->st->cluster, j, &qwhy) & ~guaranteed &
		~gs_order_thrash_mask(out->order, j, NULL);
	if (elsewhere == 0)
		return 0;
	j->pool_mask = elsewhere;
	j->try_borrowing = true;
	out->considered++;			/* a second try, as borrowed work */
	if (place_sized(out->placer, rd->st->cluster, j, &bwhy))
	{
		*ok = true;
		return elsewhere;
	}
	j->pool_mask = guaranteed;
	j->try_borrowing = false;
	return elsewhere;
}

/* Running jobs by the time they let go at the latest, earliest first (then by id). */
static int
cmp_ends(const void *a, const void *b)
{
	const GsRunning *x = *(GsRunning *const *) a;
	const GsRunning *y = *(GsRunning *const *) b;

	if (x->ends != y->ends)
		return x->ends < y->ends ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* Release (in the model) exactly the first k of ends[], from the first *cur. */
static void
release_first(GsPlacer *p, GsRunning **ends, int *cur, int k)
{
	while (*cur < k)
		gs_model_release(p, ends[(*cur)++], true);
	while (*cur > k)
		gs_model_release(p, ends[--(*cur)], false);
}

/*
 * Backfill with time (EASY backfill, docs/time.md): from the time limits
 * of the jobs holding capacity, the earliest time the reserved job fits
 * (the end of the k-th of them to let go, the fewest k that make room:
 * room only grows with k, so a binary search finds it) and where; that
 * capacity is kept for it. False when no such time is known (the jobs it
 * waits for have no limit): the guard then keeps capacity as without
 * limits.
 */
static bool
reserve_with_time(Round *rd, GsJob *j)
{
	GsState    *st = rd->st;
	GsPlacer   *p = rd->out->placer;
	GsRunning **ends;
	int			m = 0,
				cur = 0,
				lo,
				hi,
				i;
	bool		ok = false;

	if (!st->limits_held)
		return false;
	if (!st->running_loaded && st->load_running)
		st->load_running(st);
	ends = palloc(sizeof(GsRunning *) * Max(st->nrunning, 1));
	for (i = 0; i < st->nrunning; i++)
	{
		GsRunning  *r = &st->running[i];

		if (r->ends > 0 && !r->taken && !r->released)
			ends[m++] = r;
	}
	if (m == 0)
	{
		pfree(ends);
		return false;
	}
	qsort(ends, m, sizeof(GsRunning *), cmp_ends);
	gs_placer_ignore_memo(p, true);
	release_first(p, ends, &cur, m);
	if (gs_probe(p, j, NULL))
	{
		/* the fewest in [1, m] that make room */
		lo = 1;
		hi = m;
		while (lo < hi)
		{
			int			mid = lo + (hi - lo) / 2;

			release_first(p, ends, &cur, mid);
			if (gs_probe(p, j, NULL))
				hi = mid;
			else
				lo = mid + 1;
		}
		release_first(p, ends, &cur, lo);
		ok = gs_reserve_free(p, j);
		if (ok)
			j->expected_start = Max(st->now, ends[lo - 1]->ends);
	}
	release_first(p, ends, &cur, 0);
	gs_placer_ignore_memo(p, false);
	pfree(ends);
	return ok;
}

/* "rack r1", "node n3", "pool a": the domain the reserved job is expected to start in. */
static const char *
domain_text(GsCluster *c, const GsJob *j)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfo(&s, "%s %s", c->level_names[j->dom_depth], c->dom[j->dom_depth][j->dom_index].label);
	return s.data;
}

/*
 * Backfill with time: a candidate that does not fit beside the capacity
 * kept for the reserved job may use that capacity too when its time limit
 * (with its grace) ends before the reserved job's expected start.
 */
static bool
backfill_held(Round *rd, GsJob *j)
{
	GsJob	   *res = rd->out->reserved;
	bool		ok;

	if (res == NULL || res->expected_start <= 0 || j->hold_s < 0 ||
		rd->st->now + (int64_t) (j->hold_s * 1000000.0) > res->expected_start)
		return false;
	gs_placer_ignore_reserved(rd->out->placer, true);
	ok = gs_place(rd->out->placer, j, NULL);
	gs_placer_ignore_reserved(rd->out->placer, false);
	if (ok)
		j->backfilled = true;
	return ok;
}

/*
 * The starvation guard, for the first candidate that does not fit, if it
 * would fit the cluster as it is when empty: within its quota, or else
 * where it may borrow (`elsewhere`, when it was tried there). True when the
 * job got the guard.
 */
static bool
guard(Round *rd, GsJob *j, GsWhy *why, uint64_t elsewhere)
{
	GsDecision *out = rd->out;
	StringInfoData s;

	if (rd->guard_done)
		return false;
	if (rd->set.backfill_time && reserve_with_time(rd, j))
	{
		rd->guard_done = true;
		out->reserved = j;
		initStringInfo(&s);
		appendStringInfo(&s, "first in line: expected to start at %s on %s; capacity is being kept for it; %s",
						 timestamptz_to_str((TimestampTz) j->expected_start),
						 domain_text(rd->st->cluster, j), gs_why_text(rd->st->cluster, j, why, false));
		j->reason = s.data;
		return true;
	}
	if (!gs_reserve(out->placer, j) && elsewhere != 0)
	{
		uint64_t	guaranteed = j->pool_mask;

		j->pool_mask = elsewhere;
		j->try_borrowing = true;
		if (!gs_reserve(out->placer, j))
		{
			j->pool_mask = guaranteed;
			j->try_borrowing = false;
		}
	}
	if (!j->reserved)
		return false;
	rd->guard_done = true;
	out->reserved = j;
	initStringInfo(&s);
	appendStringInfo(&s, "first in line: capacity is being kept for it; %s",
					 gs_why_text(rd->st->cluster, j, why, false));
	j->reason = s.data;
	return true;
}

/*
 * A preemptible job that may not borrow the free capacity only because
 * other teams do not lend that idle quota (lending limits) still gets the
 * fair-share trigger (and the priority trigger) in those pools, as any
 * borrowing job: victims from teams above their fair share, and the plan
 * leaves the held-back amount idle (preempt.c). True when nominated.
 * The search comes at the job's place in the order (held_back_turn).
 */
static bool
nominate_held_back(Round *rd, GsJob *j)
{
	uint64_t	held;
	uint64_t	mask = j->pool_mask;
	bool		borrowing = j->try_borrowing,
				blocked = j->quota_blocked;

	if (!j->preemptible)
		return false;
	held = gs_held_back_pools(rd->st->cluster, j) & ~gs_order_thrash_mask(rd->out->order, j, NULL);
	if (held == 0)
		return false;
	j->pool_mask = held;
	j->quota_blocked = false;
	j->try_borrowing = true;
	j->held_back = true;
	if (gs_job_elastic(j))
		j->workers = j->min_workers;	/* an elastic job: for its minimum */
	if (nominate(rd, j))
	{
		j->held_back = false;
		return true;
	}
	if (gs_job_elastic(j))
		j->workers = j->max_workers;
	j->held_back = false;
	j->quota_blocked = blocked;
	j->try_borrowing = borrowing;
	j->pool_mask = mask;
	return false;
}

/*
 * A held-back job at its place in the order (order.c: the fair order's
 * second phase at its team's turn, by its dominant share then, or its
 * place in the priority order): no placement try (quota allows it
 * nowhere), only its victim search (nominate_held_back), before the later
 * candidates may take those victims or that capacity. A job quota blocks
 * does not stop the round, with or without backfill.
 */
static bool
held_back_turn(Round *rd, GsJob *j)
{
	j->held_back_turn = false;
	rd->held_turned[j - rd->st->jobs] = true;
	(void) nominate_held_back(rd, j);
	return true;
}

/*
 * One candidate of the order: placed, placed elsewhere as borrowed work,
 * nominated with victims, given the starvation guard, or left to wait.
 * False when the round tries no further candidate (no backfill).
 */
static bool
decide_one(Round *rd, GsJob *j)
{
	GsDecision *out = rd->out;
	GsWhy	   *why = &out->why[j - rd->st->jobs];
	uint64_t	elsewhere;
	bool		ok;

	if (j->held_back_turn)
		return held_back_turn(rd, j);
	out->considered++;
	if (place_sized(out->placer, rd->st->cluster, j, why) || backfill_held(rd, j))
	{
		placed(rd, j);
		return true;
	}
	/* (the text of why is built only where it is stored or shown) */
	elsewhere = borrow_elsewhere(rd, j, &ok);
	if (ok)
	{
		placed(rd, j);
		return true;
	}
	/*
	 * An elastic job that fits at no size now is nominated, and gets the
	 * starvation guard, for its minimum: the least capacity that lets it
	 * run (docs/elastic.md).
	 */
	if (gs_job_elastic(j))
		j->workers = j->min_workers;
	/* preemption: victims whose capacity makes a valid placement */
	if (rd->set.preemption && nominate(rd, j))
		return true;
	/* without backfill, nothing after the first that does not fit */
	if (!rd->set.backfill)
	{
		if (gs_job_elastic(j))
			j->workers = j->max_workers;
		return false;
	}
	if (guard(rd, j, why, elsewhere))
		return true;
	if (gs_job_elastic(j))
		j->workers = j->max_workers;
	/* (tried as borrowed work already: no second borrowing try later) */
	if (elsewhere == 0)
		gs_order_failed(out->order, j);
	return true;
}

/*
 * Jobs their own team's quota blocks may still take the place of the
 * team's lower-priority work (the priority trigger): the quota is checked
 * with those victims gone. A held-back job the order never reached (the
 * round stopped early without backfill) gets its held-back search here.
 */
static void
nominate_quota_blocked(Round *rd)
{
	GsDecision *out = rd->out;
	int			n = gs_order_count(out->order),
				i;

	for (i = 0; i < n && rd->failed < GS_MAX_FAILED_SEARCHES; i++)
	{
		GsJob	   *j = gs_order_at(out->order, i);

		if (!j->quota_blocked || j->nominated || j->placed || j->expiring)
			continue;
		if (rd->set.preemption && !rd->held_turned[j - rd->st->jobs] && nominate_held_back(rd, j))
			continue;
		j->pool_mask = gs_eligible_pools(rd->st->cluster, j);
		if (gs_job_elastic(j))
			j->workers = j->min_workers;	/* an elastic job: for its minimum */
		if (nominate(rd, j))
			j->quota_blocked = false;
		else if (gs_job_elastic(j))
			j->workers = j->max_workers;
	}
}

/* Expiring jobs: what they would wait for now becomes their last reason. */
static void
expiring_reasons(Round *rd)
{
	GsState    *st = rd->st;
	GsDecision *out = rd->out;
	int			i;

	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];

		if (!j->expiring)
			continue;
		out->expiring++;
		j->pool_mask = gs_eligible_pools(st->cluster, j);
		if (!gs_probe(out->placer, j, &out->why[i]))
			j->reason = gs_why_text(st->cluster, j, &out->why[i], false);
	}
}

/*
 * Growing (docs/elastic.md): one more replica for running elastic gang g,
 * on capacity free now in its pool, within its team's nominal quota (a
 * gang placed as borrowed capacity may also grow as borrowed capacity,
 * within the borrowing rules). True when it took one.
 */
static bool
grow_one(Round *rd, GsJob *g)
{
	GsCluster  *c = rd->st->cluster;
	GsJob		t = *g;
	int			unit = g->group_size * g->stages;
	char	   *qwhy = NULL;
	uint64_t	m;

	if (g->pool < 0 || g->pool >= GS_MAX_POOLS)
		return false;
	/* a replica of it, alone */
	t.workers = t.min_workers = t.max_workers = unit;
	t.quota_workers = 0;
	t.assign = NULL;
	t.placed = false;
	t.grown = 0;
	t.grow_assign = NULL;
	m = gs_guaranteed_pools(c, &t);
	if (m == 0 && g->borrowed && g->preemptible)
		m = gs_borrow_pools(c, &t, &qwhy);
	m &= UINT64_C(1) << g->pool;
	if (m == 0)
		return false;
	t.pool_mask = m;
	if (!gs_place(rd->out->placer, &t, NULL))
		return false;
	gs_account(c, &t, g->pool);
	if (g->grow_assign == NULL)
		g->grow_assign = palloc(sizeof(GsAssign) * (g->max_workers - g->workers));
	memcpy(&g->grow_assign[g->grown], t.assign, sizeof(GsAssign) * unit);
	pfree(t.assign);
	if (g->grown == 0)
		rd->out->grown++;
	g->grown += unit;
	rd->out->workers_grown += unit;
	return true;
}

/*
 * After every candidate of the round had its try, the running elastic
 * gangs below their maximum take the capacity still free (not kept by
 * the starvation guard, not held for a nominated job), one replica at a
 * time, each to the gang whose team has the lowest dominant share now
 * (then higher priority, then older, then job id): the fair order,
 * recomputed after each replica. Without backfill, only when no job is
 * left waiting (the queue's order is strict then).
 */
static void
grow_elastic(Round *rd)
{
	GsState    *st = rd->st;
	GsCluster  *c = st->cluster;
	bool	   *done;
	int			i;

	if (st->ngrow == 0)
		return;
	if (!rd->set.backfill)
		for (i = 0; i < st->njobs; i++)
			if (!st->jobs[i].placed && !st->jobs[i].nominated)
				return;
	done = palloc0(sizeof(bool) * st->ngrow);
	for (;;)
	{
		int			best = -1;
		double		bestds = 0;

		for (i = 0; i < st->ngrow; i++)
		{
			GsJob	   *g = &st->grow[i];
			double		ds;

			if (done[i] || g->tix < 0 ||
				g->workers + g->grown + g->group_size * g->stages > g->max_workers)
			{
				done[i] = true;
				continue;
			}
			ds = gs_dominant_share(c, g->tix);
			if (best < 0 || ds < bestds - GS_SHARE_EPS ||
				(ds <= bestds + GS_SHARE_EPS &&
				 (g->priority > st->grow[best].priority ||
				  (g->priority == st->grow[best].priority &&
				   (g->queue_pos < st->grow[best].queue_pos ||
					(g->queue_pos == st->grow[best].queue_pos && g->id < st->grow[best].id))))))
			{
				best = i;
				bestds = ds;
			}
		}
		if (best < 0)
			break;
		if (!grow_one(rd, &st->grow[best]))
			done[best] = true;
	}
	pfree(done);
}

/*
 * The round's fair level (fair.h): every team's use plus its pending work
 * (jobs whose queue timeout passed do not count) is its demand.
 */
static double
fair_level(GsState *st, double **levels)
{
	GsCluster  *c = st->cluster;
	double	   *demand = palloc0(sizeof(double) * GS_NRES * Max(c->nteams, 1)),
			   *pdemand = NULL;
	double		level;
	int			t,
				i;

	for (t = 0; t < c->nteams; t++)
		memcpy(&demand[t * GS_NRES], c->teams[t].used, sizeof(double) * GS_NRES);
	if (c->tree)
	{
		/*
		 * trees: a team's use is its subtree's (gs_tree_rollup), and
		 * gs_tree_fair_shares counts the leaves' demands: keep each
		 * team's own use only, or an inner team's would count twice
		 */
		for (t = 0; t < c->nteams; t++)
			if (c->teams[t].parent >= 0)
				for (i = 0; i < GS_NRES; i++)
					demand[c->teams[t].parent * GS_NRES + i] -= c->teams[t].used[i];

		/*
		 * with several pools, each leaf's demand per pool too: its use
		 * there (a leaf's quota use is its own) and its pending work
		 * eligible for it (the view's, src/loader.c, alike)
		 */
		if (c->npools > 1)
		{
			pdemand = palloc0(sizeof(double) * GS_NRES * Max(c->nteams, 1) * c->npools);
			for (t = 0; t < c->nteams; t++)
				if (c->teams[t].nchildren == 0)
				{
					int			p;

					for (p = 0; p < c->npools; p++)
						memcpy(&pdemand[(t * c->npools + p) * GS_NRES],
							   c->quotas[t * c->npools + p].used, sizeof(double) * GS_NRES);
				}
		}
	}
	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];

		if (j->tix < 0 || j->expiring)
			continue;
		demand[j->tix * GS_NRES + GS_GPU] += j->gpus * j->workers;
		demand[j->tix * GS_NRES + GS_CPU] += j->cpus * j->workers;
		demand[j->tix * GS_NRES + GS_MEM] += j->mem * j->workers;
		demand[j->tix * GS_NRES + GS_NET] += j->net * j->workers;
		if (pdemand != NULL)
		{
			uint64_t	elig = gs_eligible_pools(c, j);
			int			p;

			for (p = 0; p < c->npools && p < GS_MAX_POOLS; p++)
				if (elig & (UINT64_C(1) << p))
				{
					double	   *pd = &pdemand[(j->tix * c->npools + p) * GS_NRES];

					pd[GS_GPU] += j->gpus * j->workers;
					pd[GS_CPU] += j->cpus * j->workers;
					pd[GS_MEM] += j->mem * j->workers;
					pd[GS_NET] += j->net * j->workers;
				}
		}
	}
	if (c->tree)
	{
		/*
		 * trees: each team's fair allocation per resource, H-DRF
		 * (fair.h); the flat level is not used
		 */
		*levels = palloc0(sizeof(double) * GS_NRES * Max(c->nteams, 1));
		gs_tree_fair_shares(c, demand, pdemand, *levels);
		level = 1e300;
	}
	else
		level = gs_fair_level(c, demand);
	pfree(demand);
	if (pdemand != NULL)
		pfree(pdemand);
	return level;
}

/*
 * May job j use booking b's nodes while it is active: b is a reservation
 * and j is of its team (or a team below it) or names it.
 */
bool
gs_booking_permits(const GsState *st, const GsJob *j, int b)
{
	const GsBooking *k = &st->bookings[b];

	if (k->maintenance)
		return false;
	if (j->reservation_id == k->id)
		return true;
	return j->tix >= 0 && k->tix >= 0 && gs_team_within(st->cluster, j->tix, k->tix);
}

/*
 * Advance reservations and maintenance windows (docs/time.md), per job:
 * an active booking keeps every job it does not permit off its nodes; a
 * future one keeps off those whose time limit (with its grace) runs past
 * its start, and jobs without a limit (a maintenance window: only within
 * maintenance_guard_s of its start). A job naming a reservation is
 * confined to its nodes, and placed nowhere before it starts. Without
 * bookings every mask stays 0 and placement is as without this feature.
 */
static void
booking_masks_of(GsState *st, GsJob *jobs, int njobs, int64_t now, int maintenance_guard_s)
{
	int			i,
				b;

	for (i = 0; i < njobs; i++)
	{
		GsJob	   *j = &jobs[i];

		j->res_block = 0;
		j->res_only = 0;
		for (b = 0; b < st->nbookings; b++)
		{
			const GsBooking *k = &st->bookings[b];
			uint64_t	bit = UINT64_C(1) << b;
			bool		ok = gs_booking_permits(st, j, b);

			if (k->ends <= now)
				continue;
			if (j->reservation_id == k->id)
			{
				j->res_only |= bit;
				if (k->starts > now)
					j->res_block |= bit;
				continue;
			}
			if (ok)
				continue;
			if (k->starts <= now)
				j->res_block |= bit;
			else if (j->hold_s < 0)
			{
				if (!k->maintenance ||
					now >= k->starts - (int64_t) maintenance_guard_s * 1000000)
					j->res_block |= bit;
			}
			else if (now + (int64_t) (j->hold_s * 1000000.0) > k->starts)
				j->res_block |= bit;
		}
	}
}

/*
 * The masks of the pending jobs and of the running elastic gangs a round
 * may grow (docs/elastic.md): a grow's new workers obey the bookings as a
 * placement does. A growable job's limit is not loaded (hold_s < 0), so a
 * future booking keeps its grows off at once.
 */
void
gs_booking_masks(GsState *st, int64_t now, int maintenance_guard_s)
{
	booking_masks_of(st, st->jobs, st->njobs, now, maintenance_guard_s);
	booking_masks_of(st, st->grow, st->ngrow, now, maintenance_guard_s);
}

void
gs_decide(GsState *st, GsScheduleSettings set, GsDecision *out)
{
	Round		rd;
	GsJob	   *j;
	HASHCTL		ctl;

	memset(out, 0, sizeof(*out));
	memset(&rd, 0, sizeof(rd));
	set.order.held_back_turns = set.preemption;	/* held-back jobs: their search at their place */
	rd.st = st;
	rd.out = out;
	rd.set = set;
	if (st->nbookings > 0)
		gs_booking_masks(st, st->now, set.maintenance_guard_s);
	rd.held_turned = palloc0(sizeof(bool) * Max(st->njobs, 1));
	out->placer = gs_placer_create(st->cluster);
	out->order = gs_order_begin(st, &set.order);
	out->why = palloc0(sizeof(GsWhy) * Max(st->njobs, 1));
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(SearchKey);
	ctl.entrysize = sizeof(SearchMemo);
	ctl.hcxt = CurrentMemoryContext;
	rd.memo = hash_create("gangsched victim searches", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	rd.preempt.levels = NULL;
	rd.preempt.fair_level = (set.preemption && set.preempt.hysteresis) ? fair_level(st, &rd.preempt.levels) : 1e300;

	while ((j = gs_order_next(out->order)) != NULL)
		if (!decide_one(&rd, j))
			break;
	if (set.preemption)
		nominate_quota_blocked(&rd);
	grow_elastic(&rd);

	elog(DEBUG1, "gangsched decide: %d candidates tried, %d victim searches (%d found nothing, " INT64_FORMAT " placement probes) in %.1f ms",
		 out->considered, rd.search_n, rd.failed, rd.preempt.probes, rd.search_ms);
	expiring_reasons(&rd);
}
