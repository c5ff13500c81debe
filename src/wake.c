/*
 * wake.c — commit-time wake-ups.
 *
 * Functions that change what a round would decide (submit, cancel, finish,
 * release, node state) call gangsched._wake(). That only sets a flag; the
 * transaction callback acts on it after a successful commit, and forgets it
 * on abort, so nothing wakes for work that was rolled back.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"

#include "gangsched.h"
#include "wake.h"

gs_wake_hook_type gs_wake_hook = NULL;

static bool wake_requested = false;

void
gs_request_wake(void)
{
	wake_requested = true;
}

static void
wake_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (wake_requested && gs_wake_hook != NULL)
				gs_wake_hook();
			wake_requested = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			wake_requested = false;
			break;
		default:
			break;
	}
}

void
gs_wake_init(void)
{
	RegisterXactCallback(wake_xact_callback, NULL);
}

PG_FUNCTION_INFO_V1(gs_wake);
Datum
gs_wake(PG_FUNCTION_ARGS)
{
	gs_request_wake();
	PG_RETURN_VOID();
}
