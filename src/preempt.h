/*
 * preempt.h — choosing victims for a job that cannot be placed.
 *
 * Pure algorithm over the model: which running gangs may be preempted for
 * a job (reclaim, fair share, priority), and the cheapest set of them whose
 * capacity, with what is free, really makes a valid placement for the job.
 */
#ifndef GANGSCHED_PREEMPT_H
#define GANGSCHED_PREEMPT_H

#include "model.h"
#include "placement.h"

/* gangsched.fair_preemption */
typedef enum GsFairRule
{
	GS_FAIR_FINAL_SHARE = 0,	/* with J, its team ends at or below the victim team's share after the swap */
	GS_FAIR_INITIAL_SHARE		/* with J, its team ends below the victim team's share before the swap */
} GsFairRule;

/* The settings a victim search follows (filled from gangsched.* at the SPI edge). */
typedef struct GsPreemptSettings
{
	int			restart_cost_s; /* gangsched.restart_cost: lost work per GPU of a restart */
	int			min_runtime_s;	/* gangsched.min_runtime: younger gangs are no victims */
	GsFairRule	rule;			/* gangsched.fair_preemption */
	int			fair_delay_s;	/* gangsched.fair_preemption_delay */
	int			reclaim_delay_s;	/* gangsched.reclaim_delay */
	bool		hysteresis;		/* gangsched.fair_preemption_hysteresis */
} GsPreemptSettings;

/* What the round tells every search, and what searches report back. */
typedef struct GsPreemptRound
{
	double		fair_level;		/* gs_fair_level() at the round's start */
	double	   *levels;			/* team trees: [team][GS_NRES] fair allocations (gs_tree_fair_shares) at the round's start, else NULL */
	int64		probes;			/* placement probes made (for the round's DEBUG1 line) */
} GsPreemptRound;

/*
 * Try to nominate `j` (which just failed to fit): on success the job has
 * its planned placement in j->assign, its victims in j->victims (marked
 * taken), the earlier victims of the round whose rest it uses in j->waits,
 * j->nominated set, and the model holds its capacity. On failure
 * j->preempt_refused may say why. The placement probes it makes are added
 * to rd->probes.
 */
extern bool gs_preempt(GsPlacer *p, GsState *st, GsJob *j, const GsPreemptSettings *set, GsPreemptRound *rd);

/*
 * Shrinking instead of preempting (docs/elastic.md#shrinking): split each
 * running elastic gang above its minimum in st->running into a chain of
 * entries, one per replica above the minimum (highest-numbered workers
 * first) and the gang's own entry with the rest last. Called once, when
 * the jobs holding capacity are loaded.
 */
extern void gs_split_elastic(GsState *st);

/* GPUs a victim chosen this round still holds beyond what preemptors took over. */
extern double gs_victim_rest_gpus(const GsCluster *c, const GsRunning *r);

#endif							/* GANGSCHED_PREEMPT_H */
