/*
 * worker.h — the scheduler background worker.
 */
#ifndef GANGSCHED_WORKER_H
#define GANGSCHED_WORKER_H

#include "fmgr.h"

extern void gs_worker_init(void);
extern PGDLLEXPORT void gs_worker_main(Datum arg);

#endif							/* GANGSCHED_WORKER_H */
