/*
 * order.h — the order in which a round tries pending jobs.
 *
 * One replaceable step: the round asks for the next candidate and reports
 * what became of it, so an order that depends on what was placed (weighted
 * dominant resource fairness, recomputed after every placement) fits the
 * same loop. The candidate comes with the pools it may use for this try
 * (guaranteed or borrowed).
 */
#ifndef GANGSCHED_ORDER_H
#define GANGSCHED_ORDER_H

#include "model.h"

typedef enum GsOrderPolicy
{
	GS_ORDER_FAIR = 0,			/* guaranteed first, then lowest weighted dominant share */
	GS_ORDER_PRIORITY			/* priority, then submit order; quotas still apply */
} GsOrderPolicy;

/* The settings the order follows (filled from gangsched.* at the SPI edge). */
typedef struct GsOrderSettings
{
	GsOrderPolicy policy;		/* gangsched.queue_order */
	double		las_promote_factor; /* gangsched.las_promote_factor */
	bool		las_preemption; /* gangsched.las_preemption */
	bool		held_back_turns;	/* hand out held-back jobs for their victim search (gs_decide: with preemption) */
} GsOrderSettings;

typedef struct GsOrder GsOrder;

extern GsOrder *gs_order_begin(GsState *st, const GsOrderSettings *set);
/* Next candidate with job->pool_mask set for this try; NULL when done. */
extern GsJob *gs_order_next(GsOrder *o);
/* The candidate was placed: count it (and mark it borrowed or not). */
extern void gs_order_placed(GsOrder *o, GsJob *job);
/* The candidate did not fit: it may be tried again later as borrowed work. */
extern void gs_order_failed(GsOrder *o, GsJob *job);

/*
 * Anti-thrash: pools where a job preempted for a reclaim may not borrow now
 * (where the reclaiming team's guaranteed work still waits); *why says so
 * when not 0 (why may be NULL).
 */
extern uint64_t gs_order_thrash_mask(GsOrder *o, GsJob *job, char **why);

/* Jobs in the order they were tried, then those never tried; for writers. */
extern int	gs_order_count(GsOrder *o);
extern GsJob *gs_order_at(GsOrder *o, int k);
/* Position (0-based) of a job in that sequence, -1 if absent. */
extern int	gs_order_position(GsOrder *o, int64_t job_id);
/* Teams whose dominant share was lower than this job's team's when it was tried. */
extern int	gs_order_teams_ahead(GsOrder *o, GsJob *job);

#endif							/* GANGSCHED_ORDER_H */
