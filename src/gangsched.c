/*
 * gangsched.c — module magic and _PG_init.
 *
 * _PG_init stays thin: each module registers its own settings, hooks and
 * workers.
 */
#include "postgres.h"

#include "fmgr.h"

#include "gangsched.h"
#include "metrics.h"
#include "retention.h"
#include "tenancy.h"
#include "worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	gs_guc_init();
	gs_tenancy_init();
	gs_wake_init();
	gs_retention_init();
	gs_worker_init();
	gs_metrics_init();
}
