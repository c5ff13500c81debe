/*
 * worker.c — the scheduler background worker.
 *
 * Registered from _PG_init when gangsched is in shared_preload_libraries.
 * It connects to gangsched.database and runs a round every
 * gangsched.round_interval, and at once when a transaction that changed the
 * queue commits: such transactions call gangsched._wake(), whose commit
 * callback sets the worker's latch (kept in a small piece of shared memory).
 * Each round is its own short transaction; an error in a round is logged
 * and the loop goes on. It never runs rounds during recovery (a standby),
 * does nothing while the extension does not exist in its database or while
 * gangsched.enabled is off, reloads settings on SIGHUP and exits on SIGTERM.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "funcapi.h"
#include "utils/timestamp.h"

#include "gangsched.h"
#include "guard.h"
#include "guc.h"
#include "tenancy.h"
#include "wake.h"
#include "worker.h"

typedef struct GsWorkerShared
{
	pg_atomic_uint32 procno;	/* worker's PGPROC number + 1, 0 when none */
	pg_atomic_uint32 dboid;		/* the worker's database */
	pg_atomic_uint64 wakeups;	/* commits that asked for a round */
	pg_atomic_uint64 rounds;	/* rounds the worker ran */
} GsWorkerShared;

static GsWorkerShared *gs_shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
gs_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(GsWorkerShared)));
}

static void
gs_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	gs_shared = ShmemInitStruct("gangsched worker", sizeof(GsWorkerShared), &found);
	if (!found)
	{
		pg_atomic_init_u32(&gs_shared->procno, 0);
		pg_atomic_init_u32(&gs_shared->dboid, InvalidOid);
		pg_atomic_init_u64(&gs_shared->wakeups, 0);
		pg_atomic_init_u64(&gs_shared->rounds, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* After a commit that asked for a round: set the worker's latch. */
static void
gs_wake_worker(void)
{
	uint32		procno;

	if (gs_shared == NULL)
		return;
	/* only commits in the worker's own database change what its rounds see */
	if (pg_atomic_read_u32(&gs_shared->dboid) != MyDatabaseId)
		return;
	pg_atomic_fetch_add_u64(&gs_shared->wakeups, 1);
	procno = pg_atomic_read_u32(&gs_shared->procno);
	if (procno > 0 && procno <= ProcGlobal->allProcCount)
		SetLatch(&ProcGlobal->allProcs[procno - 1].procLatch);
}

void
gs_worker_init(void)
{
	BackgroundWorker worker;

	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = gs_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = gs_shmem_startup;
	gs_wake_hook = gs_wake_worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "gangsched");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "gs_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "gangsched scheduler");
	snprintf(worker.bgw_type, BGW_MAXLEN, "gangsched scheduler");
	RegisterBackgroundWorker(&worker);
}

static void
gs_worker_detach(int code, Datum arg)
{
	if (gs_shared)
		pg_atomic_write_u32(&gs_shared->procno, 0);
}

/* One round in its own transaction; false if the extension is not there. */
static bool
gs_worker_round(void)
{
	bool		ran = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (OidIsValid(get_extension_oid("gangsched", true)))
	{
		/* the round's statement too runs under the fixed search_path */
		int			save_nestlevel = gs_fix_search_path();

		pgstat_report_activity(STATE_RUNNING, "SELECT * FROM gangsched.run_round()");
		SPI_connect();
		if (SPI_execute("SELECT * FROM gangsched.run_round()", false, 0) != SPI_OK_SELECT)
			elog(ERROR, "gangsched worker: run_round() failed");
		SPI_finish();
		gs_restore_search_path(save_nestlevel);
		ran = true;
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	if (ran)
		pg_atomic_fetch_add_u64(&gs_shared->rounds, 1);
	return ran;
}

/* gs_end_blocking_tenants(), an error in it logged and survived like a round's. */
static void
end_blocking_tenants(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		(void) gs_end_blocking_tenants();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ereport(LOG, (errmsg("gangsched could not end the sessions that block rounds: %s", edata->message)));
		FreeErrorData(edata);
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_END_TRY();
}

void
gs_worker_main(Datum arg)
{
	MemoryContext loopcxt;
	volatile bool warned_missing = false;
	volatile bool lock_timed_out = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	if (gs_database == NULL || gs_database[0] == '\0')
	{
		ereport(LOG,
				(errmsg("gangsched scheduler worker is not started: gangsched.database is not set"),
				 errhint("Set gangsched.database to the database where gangsched is installed, or drive rounds with pg_cron.")));
		proc_exit(0);			/* exit code 0: not restarted */
	}
	BackgroundWorkerInitializeConnection(gs_database, NULL, 0);

	pg_atomic_write_u32(&gs_shared->dboid, MyDatabaseId);
	pg_atomic_write_u32(&gs_shared->procno, MyProc->pgprocno + 1);
	before_shmem_exit(gs_worker_detach, (Datum) 0);
	ereport(LOG, (errmsg("gangsched scheduler worker started in database \"%s\"", gs_database)));

	loopcxt = AllocSetContextCreate(TopMemoryContext, "gangsched worker loop", ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		int			rc;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		if (gs_enabled && !RecoveryInProgress())
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(loopcxt);

			PG_TRY();
			{
				bool		ran = gs_worker_round();

				if (!ran && !warned_missing)
				{
					ereport(LOG, (errmsg("gangsched scheduler worker waits: extension gangsched is not installed in database \"%s\"",
										 gs_database)));
					warned_missing = true;
				}
				else if (ran)
					warned_missing = false;
			}
			PG_CATCH();
			{
				ErrorData  *edata;

				MemoryContextSwitchTo(loopcxt);
				edata = CopyErrorData();
				FlushErrorState();
				AbortCurrentTransaction();
				if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
				{
					ereport(LOG,
							(errmsg("gangsched scheduler round gave up waiting for a lock: %s", edata->message),
							 errdetail("A transaction held a lock the round needs for longer than gangsched.round_lock_timeout (%d ms).",
									   gs_round_lock_timeout_ms),
							 errhint("The worker ends tenant sessions that hold such locks; the next round retries.")));
					lock_timed_out = true;
				}
				else
					ereport(LOG,
							(errmsg("gangsched scheduler round failed: %s", edata->message),
							 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
							 errhint("The worker goes on; the next round runs after gangsched.round_interval.")));
				FreeErrorData(edata);
				pgstat_report_activity(STATE_IDLE, NULL);
			}
			PG_END_TRY();
			if (lock_timed_out)
			{
				lock_timed_out = false;
				end_blocking_tenants();
			}
			MemoryContextSwitchTo(oldcxt);
			MemoryContextReset(loopcxt);
		}

		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   gs_round_interval_ms, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
	}
}

PG_FUNCTION_INFO_V1(gs_worker_stats);
Datum
gs_worker_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	uint32		procno;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (gs_shared == NULL)
	{
		nulls[0] = nulls[1] = nulls[2] = true;
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
	}
	procno = pg_atomic_read_u32(&gs_shared->procno);
	if (procno > 0)
		values[0] = Int32GetDatum(ProcGlobal->allProcs[procno - 1].pid);
	else
		nulls[0] = true;
	values[1] = Int64GetDatum((int64) pg_atomic_read_u64(&gs_shared->wakeups));
	values[2] = Int64GetDatum((int64) pg_atomic_read_u64(&gs_shared->rounds));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
