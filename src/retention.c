/*
 * retention.c — the one door through which history rows leave the live
 * tables.
 *
 * The history (gangsched.allocations, events and the finished jobs in
 * gangs) is guarded by triggers that refuse DELETE and TRUNCATE
 * (sql/src/10_schema.sql, 71_retention.sql). gangsched.archive_history()
 * opens the door for the rest of its own run: _archive_begin(cutoff) sets a
 * backend-local cutoff that the guards read through _archive_cutoff(), and
 * _archive_end() clears it. While it is set the statement guards let a
 * DELETE through and the row guards (trigger WHEN clauses, so a row that
 * passes costs no function call) still refuse any row that is not closed
 * history older than the cutoff. Nothing in SQL can set the cutoff but the
 * two internal functions, which only the extension's owner may execute;
 * it is cleared when the (sub)transaction that set it ends, whatever way.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "utils/timestamp.h"

#include "retention.h"

static bool archive_open = false;
static TimestampTz archive_cutoff = 0;
static int	archive_level = 0;

static void
retention_xact_callback(XactEvent event, void *arg)
{
	archive_open = false;
}

static void
retention_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	/* a subtransaction that set the cutoff and aborts takes it along */
	if (event == SUBXACT_EVENT_ABORT_SUB && archive_open &&
		GetCurrentTransactionNestLevel() <= archive_level)
		archive_open = false;
}

void
gs_retention_init(void)
{
	RegisterXactCallback(retention_xact_callback, NULL);
	RegisterSubXactCallback(retention_subxact_callback, NULL);
}

/* SQL: gangsched._archive_begin(cutoff timestamptz) — open the door. */
PG_FUNCTION_INFO_V1(gs_archive_begin);
Datum
gs_archive_begin(PG_FUNCTION_ARGS)
{
	TimestampTz cutoff = PG_GETARG_TIMESTAMPTZ(0);

	if (TIMESTAMP_NOT_FINITE(cutoff))
		elog(ERROR, "archive cutoff must be finite");
	archive_cutoff = cutoff;
	archive_level = GetCurrentTransactionNestLevel();
	archive_open = true;
	PG_RETURN_VOID();
}

/* SQL: gangsched._archive_end() — close it. */
PG_FUNCTION_INFO_V1(gs_archive_end);
Datum
gs_archive_end(PG_FUNCTION_ARGS)
{
	archive_open = false;
	PG_RETURN_VOID();
}

/* SQL: gangsched._archive_cutoff() — the open run's cutoff, NULL when none. */
PG_FUNCTION_INFO_V1(gs_archive_cutoff);
Datum
gs_archive_cutoff(PG_FUNCTION_ARGS)
{
	if (!archive_open)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(archive_cutoff);
}
