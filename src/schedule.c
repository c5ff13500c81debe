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
#include "portability/instr_time.h"
#include "utils/hsearch.h"

#include "fair.h"
#include "guc.h"
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
	double		gpus,
				cpus,
				mem,
				net;
	uint64_t	pool_mask;
	int32_t		tix,
				group_size,
				stages;
	int16_t		group_depth,
				stage_depth,
				span_depth,
				flags;
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
	k->gpus = j->gpus;
	k->cpus = j->cpus;
	k->mem = j->mem;
	k->net = j->net;
	k->pool_mask = j->pool_mask;
	k->tix = j->tix;
	k->group_size = j->group_size;
	k->stages = j->stages;
	k->group_depth = j->group_depth;
	k->stage_depth = j->stage_depth;
	k->span_depth = j->span_depth;
	k->flags = (int16_t) ((j->try_borrowing ? 1 : 0) | (j->quota_blocked ? 2 : 0) | (j->preemptible ? 4 : 0));
}

/* A nominated job's waiting reason. */
static char *
nomination_reason(const GsJob *j)
{
	StringInfoData s;

	initStringInfo(&s);
	if (j->nvictims > 0)
		appendStringInfo(&s, "waiting for %d job%s to release capacity (%s)",
						 j->nvictims, j->nvictims == 1 ? "" : "s", j->trigger);
	else
		appendStringInfo(&s, "waiting for %d job%s preempted for other jobs to release capacity (%s)",
						 j->nwaits, j->nwaits == 1 ? "" : "s", j->trigger);
	return s.data;
}

/* Victim search with the round's bounds and failure memo. */
static double search_ms = 0;
static int	search_n = 0;

static bool
try_preempt(GsState *st, GsDecision *out, GsJob *j, HTAB *memo, int *failed)
{
	SearchKey	key;
	SearchMemo *m;
	bool		found;
	instr_time	t0,
				t1;
	bool		ok;

	if (*failed >= GS_MAX_FAILED_SEARCHES)
		return false;
	search_key(j, &key);
	m = hash_search(memo, &key, HASH_FIND, &found);
	if (found && j->workers >= m->min_workers)
		return false;
	if (!st->running_loaded && st->load_running)
		st->load_running(st);
	INSTR_TIME_SET_CURRENT(t0);
	ok = gs_preempt(out->placer, st, j, gs_restart_cost_s, gs_min_runtime_s, (GsFairRule) gs_fair_preemption,
					 gs_fair_preemption_delay_s);
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	search_ms += INSTR_TIME_GET_MILLISEC(t1);
	search_n++;
	if (ok)
	{
		int			k;

		/* its victims are leaving: later decisions of the round see them gone */
		for (k = 0; k < j->nvictims; k++)
			gs_unaccount_running(st->cluster, j->victims[k]);
		out->nominated++;
		out->preempted += j->nvictims;
		j->reason = nomination_reason(j);
		return true;
	}
	(*failed)++;
	m = hash_search(memo, &key, HASH_ENTER, &found);
	if (!found || j->workers < m->min_workers)
		m->min_workers = j->workers;
	return false;
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

void
gs_decide(GsState *st, GsDecision *out)
{
	GsCluster  *c = st->cluster;
	GsJob	   *j;
	bool		guard_done = false;
	int			i;
	int			failed = 0;
	bool		borrow_tried;
	uint64_t	elsewhere;
	HTAB	   *memo;
	HASHCTL		ctl;

	memset(out, 0, sizeof(*out));
	out->placer = gs_placer_create(c);
	out->order = gs_order_begin(st, (GsOrderPolicy) gs_queue_order);
	out->why = palloc0(sizeof(GsWhy) * Max(st->njobs, 1));
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(SearchKey);
	ctl.entrysize = sizeof(SearchMemo);
	ctl.hcxt = CurrentMemoryContext;
	memo = hash_create("gangsched victim searches", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	search_ms = 0;
	search_n = 0;
	(void) gs_preempt_probes();

	while ((j = gs_order_next(out->order)) != NULL)
	{
		GsWhy	   *why = &out->why[j - st->jobs];

		out->considered++;
		if (gs_place(out->placer, j, why))
		{
			out->placed++;
			out->workers_placed += j->workers;
			gs_order_placed(out->order, j);
			continue;
		}
		/* (the text of why is built only where it is stored or shown) */
		/*
		 * Work conservation before anything else: a preemptible job that did
		 * not fit within its quota runs at once on idle capacity it may
		 * borrow elsewhere (another pool), rather than preempting or being
		 * held by the starvation guard.
		 */
		borrow_tried = false;
		elsewhere = 0;
		if (!j->try_borrowing && j->preemptible && !j->quota_blocked)
		{
			char	   *qwhy = NULL;
			uint64_t	guaranteed = j->pool_mask;

			elsewhere = gs_borrow_pools(c, j, &qwhy) & ~guaranteed & ~gs_order_thrash_mask(out->order, j, NULL);

			if (elsewhere != 0)
			{
				GsWhy		bwhy;

				j->pool_mask = elsewhere;
				j->try_borrowing = true;
				out->considered++;	/* a second try, as borrowed work */
				borrow_tried = true;
				if (gs_place(out->placer, j, &bwhy))
				{
					out->placed++;
					out->workers_placed += j->workers;
					gs_order_placed(out->order, j);
					continue;
				}
				j->pool_mask = guaranteed;
				j->try_borrowing = false;
			}
		}
		/* preemption: victims whose capacity makes a valid placement */
		if (gs_preemption)
		{
			if (try_preempt(st, out, j, memo, &failed))
			{
				gs_order_placed(out->order, j);
				continue;
			}
		}
		/* without backfill, nothing after the first that does not fit */
		if (!gs_backfill)
			break;
		/*
		 * The first that does not fit, if it would fit the cluster as it is
		 * when empty: within its quota, or else where it may borrow.
		 */
		if (!guard_done && !gs_reserve(out->placer, j) && borrow_tried)
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
		if (!guard_done && j->reserved)
		{
			StringInfoData s;

			guard_done = true;
			out->reserved = j;
			initStringInfo(&s);
			appendStringInfo(&s, "first in line: capacity is being kept for it; %s",
							 gs_why_text(c, j, why, false));
			j->reason = s.data;
			continue;
		}
		/* (tried as borrowed work already: no second borrowing try later) */
		if (!borrow_tried)
			gs_order_failed(out->order, j);
	}

	/*
	 * Jobs their own team's quota blocks may still take the place of the
	 * team's lower-priority work (the priority trigger): the quota is
	 * checked with those victims gone.
	 */
	if (gs_preemption)
	{
		int			n = gs_order_count(out->order);

		for (i = 0; i < n && failed < GS_MAX_FAILED_SEARCHES; i++)
		{
			j = gs_order_at(out->order, i);
			if (!j->quota_blocked || j->nominated || j->placed || j->expiring)
				continue;
			j->pool_mask = gs_eligible_pools(c, j);
			if (try_preempt(st, out, j, memo, &failed))
			{
				j->quota_blocked = false;
				gs_order_placed(out->order, j);
			}
		}
	}

	elog(DEBUG1, "gangsched decide: %d candidates tried, %d victim searches (%d found nothing, " INT64_FORMAT " placement probes) in %.1f ms",
		 out->considered, search_n, failed, gs_preempt_probes(), search_ms);

	/* expiring jobs: what they would wait for now becomes their last reason */
	for (i = 0; i < st->njobs; i++)
	{
		j = &st->jobs[i];
		if (!j->expiring)
			continue;
		out->expiring++;
		j->pool_mask = gs_eligible_pools(c, j);
		if (!gs_probe(out->placer, j, &out->why[i]))
			j->reason = gs_why_text(c, j, &out->why[i], false);
	}
}
