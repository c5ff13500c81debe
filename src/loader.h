/*
 * loader.h — reading the cluster and the queue into the in-memory model.
 */
#ifndef GANGSCHED_LOADER_H
#define GANGSCHED_LOADER_H

#include "model.h"

typedef struct GsState
{
	GsCluster  *cluster;
	int			njobs;
	GsJob	   *jobs;			/* pending jobs, in the order loaded */
	/* jobs holding capacity, loaded on first need (preemption) */
	bool		running_loaded;
	int			nrunning;
	GsRunning  *running;
	int64_t		now;			/* the scheduler's clock for this round */
	struct StringInfoData *las_teams;	/* ids of las teams ("1,4"), NULL when none */
	void		(*load_running) (struct GsState *st);	/* SPI edge, set by the caller */
} GsState;

/* Load the jobs holding capacity with their allocations (SPI connected). */
extern void gs_load_running(GsState *st);

/* Load everything a round needs with a handful of set-based queries (SPI connected). */
extern GsState *gs_load_state(void);
/* Inventory only (levels, pools, nodes, teams, quotas) when !queue. */
extern GsState *gs_load_state_ex(bool queue);

#endif							/* GANGSCHED_LOADER_H */
