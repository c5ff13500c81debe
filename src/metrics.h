/*
 * metrics.h — round statistics for gangsched.metrics (docs/monitoring.md).
 */
#ifndef GANGSCHED_METRICS_H
#define GANGSCHED_METRICS_H

#include "datatype/timestamp.h"

extern void gs_metrics_init(void);
extern void gs_metrics_note_round(double ms, TimestampTz end);

#endif							/* GANGSCHED_METRICS_H */
