/*
 * guc.h — gangsched.* settings.
 */
#ifndef GANGSCHED_GUC_H
#define GANGSCHED_GUC_H

#include "datatype/timestamp.h"

extern char *gs_clock_override;
extern int	gs_start_timeout_s;
extern int	gs_default_queue_timeout_s;
extern int	gs_min_runtime_s;
extern int	gs_fair_preemption_delay_s;
extern int	gs_reclaim_delay_s;
extern bool gs_fair_preemption_hysteresis;
extern int	gs_default_grace_s;
extern int	gs_max_grace_s;
extern int	gs_restart_cost_s;
extern int	gs_node_timeout_s;
extern int	gs_round_interval_ms;
extern bool gs_enabled;
extern int	gs_queue_order;		/* GsOrderPolicy */
extern bool gs_preemption;
extern int	gs_fair_preemption;	/* GsFairRule (preempt.h) */
extern bool gs_backfill;
extern bool gs_backfill_with_time;
extern int	gs_max_pending_per_team;	/* read by submit() in SQL */
extern int	gs_max_workers_per_gang;	/* read by submit() in SQL */
extern int	gs_maintenance_guard_s;	/* docs/time.md: maintenance windows */
extern int	gs_default_time_limit_s;	/* read by submit() in SQL */
extern int	gs_max_time_limit_s;	/* read by submit() in SQL */
extern char *gs_database;
extern int	gs_round_lock_timeout_ms;
extern int	gs_team_order;		/* GsTeamOrder (las.h) */
extern char *gs_las_thresholds;
extern double gs_las_promote_factor;
extern bool gs_las_preemption;

/* The scheduler's clock: the override when set, else now(). */
extern TimestampTz gs_now(void);

#endif							/* GANGSCHED_GUC_H */
