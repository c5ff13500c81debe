/*
 * metrics.h — round statistics for gangsched.metrics (docs/monitoring.md).
 */
#ifndef GANGSCHED_METRICS_H
#define GANGSCHED_METRICS_H

#include "datatype/timestamp.h"

/*
 * Rows of gangsched.metric_deltas past which a round folds them itself
 * (src/round.c): the worker folds them after every round it runs.
 */
#define GS_FOLD_BACKSTOP 50000

extern void gs_metrics_init(void);
extern void gs_metrics_note_round(double ms, TimestampTz end);

#endif							/* GANGSCHED_METRICS_H */
