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
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "fair.h"
#include "guc.h"
#include "order.h"
#include "preempt.h"
#include "schedule.h"

/* Victim searches a round makes at most (each is bounded too). */
#define GS_MAX_PREEMPT_SEARCHES 256

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
	int			searches = 0;

	memset(out, 0, sizeof(*out));
	out->placer = gs_placer_create(c);
	out->order = gs_order_begin(st, (GsOrderPolicy) gs_queue_order);
	out->why = palloc0(sizeof(GsWhy) * Max(st->njobs, 1));

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
		j->reason = gs_why_text(c, j, why, false);
		/* preemption: victims whose capacity makes a valid placement */
		if (gs_preemption && searches < GS_MAX_PREEMPT_SEARCHES)
		{
			if (!st->running_loaded && st->load_running)
				st->load_running(st);
			searches++;
			if (gs_preempt(out->placer, st, j, gs_restart_cost_s, gs_min_runtime_s))
			{
				StringInfoData s;

				initStringInfo(&s);
				appendStringInfo(&s, "waiting for %d job%s to release capacity (%s)",
								 j->nvictims, j->nvictims == 1 ? "" : "s", j->trigger);
				j->reason = s.data;
				out->nominated++;
				out->preempted += j->nvictims;
				gs_order_placed(out->order, j);
				continue;
			}
		}
		/* without backfill, nothing after the first that does not fit */
		if (!gs_backfill)
			break;
		/* the first that does not fit, if it would fit the cluster as it is when empty */
		if (!guard_done && gs_reserve(out->placer, j))
		{
			StringInfoData s;

			guard_done = true;
			out->reserved = j;
			initStringInfo(&s);
			appendStringInfo(&s, "first in line: capacity is being kept for it; %s", j->reason);
			j->reason = s.data;
			continue;
		}
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

		for (i = 0; i < n && searches < GS_MAX_PREEMPT_SEARCHES; i++)
		{
			j = gs_order_at(out->order, i);
			if (!j->quota_blocked || j->nominated || j->placed || j->expiring)
				continue;
			if (!st->running_loaded && st->load_running)
				st->load_running(st);
			searches++;
			j->pool_mask = gs_eligible_pools(c, j);
			if (gs_preempt(out->placer, st, j, gs_restart_cost_s, gs_min_runtime_s))
			{
				StringInfoData s;

				initStringInfo(&s);
				appendStringInfo(&s, "waiting for %d job%s to release capacity (%s)",
								 j->nvictims, j->nvictims == 1 ? "" : "s", j->trigger);
				j->reason = s.data;
				j->quota_blocked = false;
				out->nominated++;
				out->preempted += j->nvictims;
				gs_order_placed(out->order, j);
			}
		}
	}

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
