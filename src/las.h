/*
 * las.h — least-attained-service queues within a team (two-dimensional LAS).
 *
 * A job's attained service is the GPU-seconds it has held so far, over all
 * its allocations (across requeues and preemptions). The thresholds of
 * gangsched.las_thresholds cut attained service into queues: queue 0 holds
 * jobs below the first threshold, queue k those at or above the k-th. A job
 * that has waited longer than gangsched.las_promote_factor times its
 * attained service goes back to queue 0 (starvation promotion). Pure code:
 * no SPI.
 */
#ifndef GANGSCHED_LAS_H
#define GANGSCHED_LAS_H

#include <stdbool.h>

#define GS_LAS_MAX_THRESHOLDS 16

/* gangsched.team_order */
typedef enum GsTeamOrder
{
	GS_TEAM_FIFO = 0,			/* priority, then submit order */
	GS_TEAM_LAS					/* priority, then LAS queue, then submit order */
} GsTeamOrder;

/* The parsed gangsched.las_thresholds (ascending GPU-seconds). */
extern int	gs_las_nthresholds;
extern double gs_las_thresholds_v[GS_LAS_MAX_THRESHOLDS];

/*
 * Parse a thresholds list ("3250,7200"); false with *why set when it is not
 * a list of at most GS_LAS_MAX_THRESHOLDS ascending positive numbers.
 */
extern bool gs_las_parse(const char *s, double *out, int *n, const char **why);

/* The queue of a job that attained `attained` GPU-seconds (no promotion). */
extern int	gs_las_queue_of(double attained);

/*
 * The queue of a pending job: queue_of(attained), or 0 when it has waited
 * `waited_s` seconds, more than promote_factor x attained (factor > 0 and
 * attained > 0); *promoted says which.
 */
extern int	gs_las_pending_queue(double attained, double waited_s, double promote_factor, bool *promoted);

#endif							/* GANGSCHED_LAS_H */
