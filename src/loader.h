/*
 * loader.h — reading the cluster and the queue into the in-memory model.
 */
#ifndef GANGSCHED_LOADER_H
#define GANGSCHED_LOADER_H

#include "model.h"

/* Load the jobs holding capacity with their allocations (SPI connected). */
extern void gs_load_running(GsState *st);

/* Load everything a round needs with a handful of set-based queries (SPI connected). */
extern GsState *gs_load_state(void);
/* Inventory only (levels, pools, nodes, teams, quotas) when !queue. */
extern GsState *gs_load_state_ex(bool queue);

#endif							/* GANGSCHED_LOADER_H */
