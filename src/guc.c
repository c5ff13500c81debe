/*
 * guc.c — the gangsched.* settings and the scheduler's clock.
 *
 * Every setting carries a description an operator can read in pg_settings;
 * check hooks explain a bad value.
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "gangsched.h"
#include "guc.h"
#include "las.h"
#include "preempt.h"
#include "schedule.h"

char	   *gs_clock_override = NULL;
int			gs_start_timeout_s = 300;
int			gs_default_queue_timeout_s = 0;
int			gs_min_runtime_s = 300;
int			gs_default_grace_s = 60;
int			gs_max_grace_s = 600;
int			gs_restart_cost_s = 60;
int			gs_node_timeout_s = 60;
int			gs_round_interval_ms = 1000;
bool		gs_enabled = true;
int			gs_queue_order = 0;
bool		gs_preemption = true;
int			gs_fair_preemption = 0;
int			gs_fair_preemption_delay_s = 0;
int			gs_reclaim_delay_s = 0;
bool		gs_fair_preemption_hysteresis = true;
bool		gs_backfill = true;
bool		gs_backfill_with_time = true;
int			gs_max_pending_per_team = 10000;
int			gs_max_workers_per_gang = 4096;
int			gs_default_time_limit_s = 0;
int			gs_max_time_limit_s = 0;
int			gs_maintenance_guard_s = 3600;
int			gs_round_lock_timeout_ms = 10000;
int			gs_team_order = GS_TEAM_FIFO;
char	   *gs_las_thresholds = NULL;
double		gs_las_promote_factor = 0;
bool		gs_las_preemption = true;

static const struct config_enum_entry queue_order_options[] = {
	{"fair", 0, false},
	{"priority", 1, false},
	{NULL, 0, false}
};
static const struct config_enum_entry team_order_options[] = {
	{"fifo", GS_TEAM_FIFO, false},
	{"las", GS_TEAM_LAS, false},
	{NULL, 0, false}
};
static const struct config_enum_entry fair_preemption_options[] = {
	{"final_share", GS_FAIR_FINAL_SHARE, false},
	{"initial_share", GS_FAIR_INITIAL_SHARE, false},
	{NULL, 0, false}
};

char	   *gs_database = NULL;

/* The settings one round's decisions follow, read here at the edge (schedule.h). */
GsScheduleSettings
gs_schedule_settings(void)
{
	GsScheduleSettings s;

	memset(&s, 0, sizeof(s));
	s.order.policy = (GsOrderPolicy) gs_queue_order;
	s.order.las_promote_factor = gs_las_promote_factor;
	s.order.las_preemption = gs_las_preemption;
	s.preemption = gs_preemption;
	s.backfill = gs_backfill;
	s.backfill_time = gs_backfill_with_time;
	s.maintenance_guard_s = gs_maintenance_guard_s;
	s.preempt.restart_cost_s = gs_restart_cost_s;
	s.preempt.min_runtime_s = gs_min_runtime_s;
	s.preempt.rule = (GsFairRule) gs_fair_preemption;
	s.preempt.fair_delay_s = gs_fair_preemption_delay_s;
	s.preempt.reclaim_delay_s = gs_reclaim_delay_s;
	s.preempt.hysteresis = gs_fair_preemption_hysteresis;
	return s;
}

/* Parse a timestamptz the way the input function does, without throwing. */
static bool
parse_timestamptz(const char *str, TimestampTz *result)
{
	fsec_t		fsec;
	struct pg_tm tt,
			   *tm = &tt;
	int			tz;
	int			dtype;
	int			nf;
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];

	if (ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype, MAXDATEFIELDS, &nf) != 0)
		return false;
	if (DecodeDateTime(field, ftype, nf, &dtype, tm, &fsec, &tz) != 0)
		return false;
	if (dtype != DTK_DATE)
		return false;
	return tm2timestamp(tm, fsec, &tz, result) == 0;
}

static bool
check_clock_override(char **newval, void **extra, GucSource source)
{
	TimestampTz ts;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!parse_timestamptz(*newval, &ts))
	{
		GUC_check_errdetail("\"%s\" is not a timestamp with time zone.", *newval);
		GUC_check_errhint("Use a value such as '2026-01-01 00:00:00+00', or an empty string for the real clock.");
		return false;
	}
	return true;
}

TimestampTz
gs_now(void)
{
	TimestampTz ts;

	if (gs_clock_override != NULL && gs_clock_override[0] != '\0' &&
		parse_timestamptz(gs_clock_override, &ts))
		return ts;
	/* the clock rule (docs/concepts.md): the time of reading, not of BEGIN */
	return GetCurrentTimestamp();
}

/*
 * gangsched.now(): the same clock for SQL (sql/src/20_helpers.sql), so that
 * the rounds and every SQL function read one implementation of it.
 */
PG_FUNCTION_INFO_V1(gs_now_sql);
Datum
gs_now_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_TIMESTAMPTZ(gs_now());
}

/* gangsched.las_thresholds: parsed once here, used by every round */
typedef struct LasExtra
{
	int			n;
	double		v[GS_LAS_MAX_THRESHOLDS];
} LasExtra;

static bool
check_las_thresholds(char **newval, void **extra, GucSource source)
{
	LasExtra   *e = malloc(sizeof(LasExtra));
	const char *why = NULL;

	if (e == NULL)
		return false;
	if (!gs_las_parse(*newval ? *newval : "", e->v, &e->n, &why))
	{
		free(e);
		GUC_check_errdetail("\"%s\" is not a list of GPU-second thresholds: %s", *newval, why);
		GUC_check_errhint("Use ascending positive numbers separated by commas, such as '3250,7200', or '' for one queue.");
		return false;
	}
	*extra = e;
	return true;
}

static void
assign_las_thresholds(const char *newval, void *extra)
{
	LasExtra   *e = extra;

	if (e == NULL)
		return;
	gs_las_nthresholds = e->n;
	memcpy(gs_las_thresholds_v, e->v, sizeof(double) * e->n);
}

static bool
check_database(char **newval, void **extra, GucSource source)
{
	if (*newval != NULL && strlen(*newval) >= NAMEDATALEN)
	{
		GUC_check_errdetail("Database names are shorter than %d bytes.", NAMEDATALEN);
		return false;
	}
	return true;
}

void
gs_guc_init(void)
{
	DefineCustomStringVariable("gangsched.clock_override",
							   "Fixes the scheduler's clock at this timestamp (virtual time for tests and trace replays).",
							   "Empty means the real clock, pg_catalog.now(). Every time rule reads gangsched.now().",
							   &gs_clock_override, "", PGC_SUSET, 0,
							   check_clock_override, NULL, NULL);

	DefineCustomIntVariable("gangsched.start_timeout",
							"Requeues a placed job whose agents have not all confirmed it within this time.",
							"The gang never became ready; its allocations are ended and it goes back to pending.",
							&gs_start_timeout_s, 300, 1, INT_MAX / 1000, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.default_queue_timeout",
							"Expires a pending job after waiting this long, unless it gave its own queue_timeout.",
							"0 means jobs wait without limit.",
							&gs_default_queue_timeout_s, 0, 0, INT_MAX / 1000, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.min_runtime",
							"A job that started less than this long ago is not chosen as a preemption victim.",
							"Guards against thrashing.",
							&gs_min_runtime_s, 300, 0, INT_MAX / 1000, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.default_grace",
							"Grace a preempted job gets to checkpoint when it gave no grace of its own.",
							NULL,
							&gs_default_grace_s, 60, 0, INT_MAX / 1000, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.max_grace",
							"Upper bound on any preempted job's grace before it is killed.",
							NULL,
							&gs_max_grace_s, 600, 0, INT_MAX / 1000, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.restart_cost",
							"Work a preempted job loses to restarting, added to its work since the last checkpoint when choosing victims.",
							"In seconds of the job's GPUs.",
							&gs_restart_cost_s, 60, 0, INT_MAX / 1000, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.node_timeout",
							"Marks a node down when its agent has sent no heartbeat for this long.",
							"0 disables the check.",
							&gs_node_timeout_s, 60, 0, INT_MAX / 1000, PGC_SIGHUP,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.round_interval",
							"Time between the background worker's scheduling rounds.",
							"The worker is also woken at once by commits that change the queue.",
							&gs_round_interval_ms, 1000, 10, 3600 * 1000, PGC_SIGHUP,
							GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomEnumVariable("gangsched.queue_order",
							 "Order in which a round tries pending jobs.",
							 "fair: guaranteed (within nominal quota) first, then borrowing; among teams the lowest "
							 "weighted dominant share first, recomputed after every placement; within a team priority, "
							 "then submit order. priority: priority, then submit order, across teams. Quota rules "
							 "apply under both.",
							 &gs_queue_order, 0, queue_order_options, PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomEnumVariable("gangsched.team_order",
							 "Order of a team's own pending jobs (the default for teams without their own, gangsched.set_team_order).",
							 "fifo: priority, then submit order. las: priority, then least attained service (GPU-seconds "
							 "held so far, discretized by gangsched.las_thresholds), then submit order; a pending job of a "
							 "higher queue may preempt its team's jobs of lower queues. The order across teams is unchanged.",
							 &gs_team_order, GS_TEAM_FIFO, team_order_options, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("gangsched.las_thresholds",
							   "Attained-service thresholds, in GPU-seconds, that cut a las team's jobs into queues.",
							   "Ascending, comma-separated: a job below the first is in queue 0 (first), one at or "
							   "above the k-th in queue k. Empty: one queue.",
							   &gs_las_thresholds, "3250,7200", PGC_SUSET, 0,
							   check_las_thresholds, assign_las_thresholds, NULL);
	DefineCustomRealVariable("gangsched.las_promote_factor",
							 "A pending job of a las team that has waited longer than this times its attained service "
							 "(seconds per GPU-second) goes back to queue 0.",
							 "0 turns starvation promotion off.",
							 &gs_las_promote_factor, 0, 0, 1e6, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("gangsched.las_preemption",
							 "Lets a pending job of a las team preempt its team's gangs of the same priority in later LAS queues.",
							 "Off: las teams keep their order but preempt only as fifo teams do (priority, reclaim, fair share).",
							 &gs_las_preemption, true, PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("gangsched.preemption",
							 "Lets rounds preempt running gangs (reclaim, fair share, priority).",
							 "Off: a job that does not fit waits; nothing is preempted.",
							 &gs_preemption, true, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("gangsched.fair_preemption",
							 "When a borrowing job may preempt another team's borrowed gang (the fair-share trigger).",
							 "final_share: when its team, with the job, would hold at most the weighted dominant share "
							 "the victim's team holds without its victims (cannot swing past the fair split). "
							 "initial_share: when its team, with the job, would hold less than the victim's team holds "
							 "now (allows more preemptions; may overshoot with large victims).",
							 &gs_fair_preemption, GS_FAIR_FINAL_SHARE, fair_preemption_options, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("gangsched.fair_preemption_delay",
							"How long a borrowing job waits before it may preempt for fair share.",
							"Imbalances that jobs finishing would end anyway cost no preemption. "
							"Reclaim (a job within its team's nominal quota; see gangsched.reclaim_delay) and priority preemption are not delayed by it. "
							"0 preempts at the first round that finds the job blocked.",
							&gs_fair_preemption_delay_s, 0, 0, INT_MAX / 1000, PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gangsched.reclaim_delay",
							"How long a job within its team's nominal quota waits before it may reclaim borrowed capacity.",
							"Capacity that jobs finishing free in the meantime goes to the job first (guaranteed work is "
							"ordered first), so a reclaim is made only when none has freed. Fair-share and priority preemption "
							"are not delayed by it. 0 reclaims at the first round that finds the job blocked.",
							&gs_reclaim_delay_s, 0, 0, INT_MAX / 1000, PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("gangsched.fair_preemption_hysteresis",
							 "Fair-share preemption moves capacity only from a team that keeps its entitled share to a team below it.",
							 "The entitled share is the weighted max-min fair share of the round (progressive filling of every "
							 "team's use plus pending work). On, a split within one gang of the fair split costs no more preemptions; "
							 "off, only gangsched.fair_preemption decides.",
							 &gs_fair_preemption_hysteresis, true, PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("gangsched.backfill",
							 "Lets later jobs be placed when an earlier one in the round's order does not fit.",
							 "Off: a round stops at the first job that does not fit (strict order, no backfill; "
							 "the starvation guard is then not needed). For baselines such as trace replays.",
							 &gs_backfill, true, PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("gangsched.backfill_with_time",
							 "Lets the starvation guard use running jobs' time limits (backfill with time).",
							 "On: the first blocked gang gets an expected start from the limits, and later jobs "
							 "that end before it may use the capacity kept for it. Off: the guard keeps capacity "
							 "as without limits (limits are still enforced).",
							 &gs_backfill_with_time, true, PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.max_pending_per_team",
							"submit() refuses a team's job (53S07) while the team has this many pending jobs.",
							"A team's own limit (gangsched.set_team_limits) takes precedence. Bounds the queue a round reads.",
							&gs_max_pending_per_team, 10000, 1, INT_MAX, PGC_SUSET,
							0, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.max_workers_per_gang",
							"submit() refuses a gang of more workers than this (53S08).",
							"A team's own limit (gangsched.set_team_limits) takes precedence.",
							&gs_max_workers_per_gang, 4096, 1, INT_MAX, PGC_SUSET,
							0, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.default_time_limit",
							"Time limit of a job that gave none of its own and whose team has no default.",
							"0 means no limit. A job past its limit is stopped with its grace and fails (docs/time.md).",
							&gs_default_time_limit_s, 0, 0, INT_MAX, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.max_time_limit",
							"submit() refuses a time limit longer than this (53S09).",
							"0 means no maximum. A team's own maximum (gangsched.set_team_time_limits) takes precedence.",
							&gs_max_time_limit_s, 0, 0, INT_MAX, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.maintenance_guard",
							"How long before a maintenance window jobs without a time limit are no longer placed on its nodes.",
							"Jobs with a limit are kept off them when their limit runs past the window's start (docs/time.md).",
							&gs_maintenance_guard_s, 3600, 0, INT_MAX, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("gangsched.round_lock_timeout",
							"Longest a round waits for any lock before it gives up (the next round retries).",
							"When the background worker's round gives up, the worker ends the sessions of tenant roles "
							"whose writing transaction has been open longer than this (they hold the locks).",
							&gs_round_lock_timeout_ms, 10000, 100, 3600 * 1000, PGC_SIGHUP,
							GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomBoolVariable("gangsched.enabled",
							 "Lets the background worker run scheduling rounds.",
							 "Off pauses the worker; run_round() and pg_cron still work.",
							 &gs_enabled, true, PGC_SIGHUP, 0, NULL, NULL, NULL);

	if (process_shared_preload_libraries_in_progress)
		DefineCustomStringVariable("gangsched.database",
								   "Database in which the background worker runs scheduling rounds.",
								   "Empty disables the worker.",
								   &gs_database, "", PGC_POSTMASTER, 0,
								   check_database, NULL, NULL);

	MarkGUCPrefixReserved("gangsched");
}
