/*
 * order.h — the order in which a round considers pending jobs.
 *
 * One replaceable step: the round asks for the next candidate and reports
 * each placement back, so an order that depends on what was placed (fair
 * share recomputed after every placement) fits the same loop.
 */
#ifndef GANGSCHED_ORDER_H
#define GANGSCHED_ORDER_H

#include "loader.h"

typedef struct GsOrder GsOrder;

extern GsOrder *gs_order_begin(GsState *st);
extern GsJob *gs_order_next(GsOrder *o);
extern void gs_order_placed(GsOrder *o, GsJob *job);
/* The k-th job of the order (after gs_order_begin), for writers. */
extern int	gs_order_count(GsOrder *o);
extern GsJob *gs_order_at(GsOrder *o, int k);
/* Position (0-based) of a job in the order, -1 if absent; for why_pending. */
extern int	gs_order_position(GsOrder *o, int64_t job_id);

#endif							/* GANGSCHED_ORDER_H */
