/*
 * schedule.h — one round's decisions, in memory: order, placement and the
 * starvation guard. No SPI.
 */
#ifndef GANGSCHED_SCHEDULE_H
#define GANGSCHED_SCHEDULE_H

#include "model.h"
#include "placement.h"

typedef struct GsDecision
{
	int			considered;
	int			placed;
	int			workers_placed;
	int			expiring;		/* pending jobs whose queue timeout passed */
	GsJob	   *reserved;		/* the starvation guard's job, or NULL */
	int			nominated;		/* jobs waiting for victims chosen this round */
	int			preempted;		/* victims chosen this round */
	GsPlacer   *placer;
	struct GsOrder *order;
	GsWhy	   *why;			/* per job, parallel to GsState.jobs */
} GsDecision;

/* Mark the pending jobs whose queue timeout has passed at `now`. */
extern void gs_mark_expiring(GsState *st, int64_t now, int default_timeout_s);
extern void gs_decide(GsState *st, GsDecision *out);

#endif							/* GANGSCHED_SCHEDULE_H */
