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
} GsState;

/* Load everything a round needs with a handful of set-based queries (SPI connected). */
extern GsState *gs_load_state(void);

#endif							/* GANGSCHED_LOADER_H */
