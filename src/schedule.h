/*
 * schedule.h — one round's decisions, in memory: order, placement and the
 * starvation guard. No SPI.
 */
#ifndef GANGSCHED_SCHEDULE_H
#define GANGSCHED_SCHEDULE_H

#include "loader.h"
#include "placement.h"

typedef struct GsDecision
{
	int			considered;
	int			placed;
	int			workers_placed;
	GsJob	   *reserved;		/* the starvation guard's job, or NULL */
	GsPlacer   *placer;
	struct GsOrder *order;
	GsWhy	   *why;			/* per job, parallel to GsState.jobs */
} GsDecision;

extern void gs_decide(GsState *st, GsDecision *out);

#endif							/* GANGSCHED_SCHEDULE_H */
