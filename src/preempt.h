/*
 * preempt.h — choosing victims for a job that cannot be placed.
 *
 * Pure algorithm over the model: which running gangs may be preempted for
 * a job (reclaim, fair share, priority), and the cheapest set of them whose
 * capacity, with what is free, really makes a valid placement for the job.
 */
#ifndef GANGSCHED_PREEMPT_H
#define GANGSCHED_PREEMPT_H

#include "loader.h"
#include "placement.h"

/*
 * Try to nominate `j` (which just failed to fit): on success the job has
 * its planned placement in j->assign, its victims in j->victims (marked
 * taken), j->nominated set, and the model holds its capacity.
 */
extern bool gs_preempt(GsPlacer *p, GsState *st, GsJob *j, int restart_cost_s, int min_runtime_s);

#endif							/* GANGSCHED_PREEMPT_H */
