/*
 * metrics.c — what the rounds record for monitoring (docs/monitoring.md).
 *
 * Every round that ran (gangsched.run_round(), from the worker, pg_cron or
 * by hand) adds itself to a few counters in shared memory: how many rounds,
 * their total duration, and the end and duration of the last one. Shared
 * memory, not a table: an idle scheduler runs a round every
 * gangsched.round_interval, and a table row per round would write WAL on a
 * cluster that does nothing (and change the state a dump is compared with).
 * The counters start at zero when the server starts, which Prometheus reads
 * as a counter reset. Without shared_preload_libraries there is no shared
 * memory and gangsched.round_stats() returns NULLs.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "metrics.h"

typedef struct GsRoundStats
{
	pg_atomic_uint64 rounds;	/* rounds that ran */
	pg_atomic_uint64 us_total;	/* their summed duration, microseconds */
	pg_atomic_uint64 last_end;	/* TimestampTz + 1 of the last round's end
								 * (gangsched.now()), 0 none yet */
	pg_atomic_uint64 last_us;	/* the last round's duration */
} GsRoundStats;

static GsRoundStats *gs_round_stats = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
gs_metrics_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(GsRoundStats)));
}

static void
gs_metrics_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	gs_round_stats = ShmemInitStruct("gangsched round stats", sizeof(GsRoundStats), &found);
	if (!found)
	{
		pg_atomic_init_u64(&gs_round_stats->rounds, 0);
		pg_atomic_init_u64(&gs_round_stats->us_total, 0);
		pg_atomic_init_u64(&gs_round_stats->last_end, 0);
		pg_atomic_init_u64(&gs_round_stats->last_us, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
gs_metrics_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = gs_metrics_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = gs_metrics_shmem_startup;
}

/*
 * Called by gs_run_round when a round ran. Rounds take turns on the round's
 * lock, so the last_* pair is written by one round at a time.
 */
void
gs_metrics_note_round(double ms, TimestampTz end)
{
	uint64		us = (uint64) Max(ms * 1000.0, 0.0);

	if (gs_round_stats == NULL)
		return;
	pg_atomic_fetch_add_u64(&gs_round_stats->rounds, 1);
	pg_atomic_fetch_add_u64(&gs_round_stats->us_total, us);
	pg_atomic_write_u64(&gs_round_stats->last_us, us);
	pg_atomic_write_u64(&gs_round_stats->last_end, (uint64) end + 1);
}

/*
 * gangsched.round_stats(): rounds since the server started, their summed
 * duration in seconds, the last round's end and duration in seconds.
 */
PG_FUNCTION_INFO_V1(gs_round_stats_sql);
Datum
gs_round_stats_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	uint64		last_end;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (gs_round_stats == NULL)
	{
		nulls[0] = nulls[1] = nulls[2] = nulls[3] = true;
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
	}
	values[0] = Int64GetDatum((int64) pg_atomic_read_u64(&gs_round_stats->rounds));
	values[1] = Float8GetDatum((double) pg_atomic_read_u64(&gs_round_stats->us_total) / 1e6);
	last_end = pg_atomic_read_u64(&gs_round_stats->last_end);
	if (last_end > 0)
	{
		values[2] = TimestampTzGetDatum((TimestampTz) (last_end - 1));
		values[3] = Float8GetDatum((double) pg_atomic_read_u64(&gs_round_stats->last_us) / 1e6);
	}
	else
		nulls[2] = nulls[3] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
