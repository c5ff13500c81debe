/*
 * schedule.h — one round's decisions, in memory: order, placement and the
 * starvation guard. No SPI.
 */
#ifndef GANGSCHED_SCHEDULE_H
#define GANGSCHED_SCHEDULE_H

#include "model.h"
#include "order.h"
#include "placement.h"
#include "preempt.h"

typedef struct GsDecision
{
	int			considered;
	int			placed;
	int			workers_placed;
	int			expiring;		/* pending jobs whose queue timeout passed */
	GsJob	   *reserved;		/* the starvation guard's job, or NULL */
	int			nominated;		/* jobs waiting for victims chosen this round */
	int			preempted;		/* victims chosen this round */
	int			grown;			/* elastic gangs that took more replicas (GsState.grow) */
	int			workers_grown;	/* the workers they took */
	GsPlacer   *placer;
	struct GsOrder *order;
	GsWhy	   *why;			/* per job, parallel to GsState.jobs */
} GsDecision;

/*
 * The settings one round's decisions follow. The algorithm reads no GUC:
 * gs_schedule_settings() (guc.c, the edge) fills this from gangsched.*.
 */
typedef struct GsScheduleSettings
{
	GsOrderSettings order;
	bool		preemption;		/* gangsched.preemption */
	bool		backfill;		/* gangsched.backfill */
	bool		backfill_time;	/* gangsched.backfill_with_time */
	int			maintenance_guard_s;	/* gangsched.maintenance_guard */
	GsPreemptSettings preempt;
} GsScheduleSettings;

extern GsScheduleSettings gs_schedule_settings(void);

/* Mark the pending jobs whose queue timeout has passed at `now`. */
extern void gs_mark_expiring(GsState *st, int64_t now, int default_timeout_s);
/*
 * Which bookings (reservations, maintenance windows) keep each pending job
 * off their nodes at `now`, and which it is confined to (docs/time.md).
 */
extern void gs_booking_masks(GsState *st, int64_t now, int maintenance_guard_s);
extern bool gs_booking_permits(const GsState *st, const GsJob *j, int b);
extern void gs_decide(GsState *st, GsScheduleSettings set, GsDecision *out);

#endif							/* GANGSCHED_SCHEDULE_H */
