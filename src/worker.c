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

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_database.h"
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
#include "version.h"

typedef struct GsWorkerShared
{
	pg_atomic_uint32 procno;	/* worker's PGPROC number + 1, 0 when none */
	pg_atomic_uint32 dboid;		/* the worker's database */
	pg_atomic_uint64 wakeups;	/* commits that asked for a round */
	pg_atomic_uint64 rounds;	/* rounds the worker ran */
	pg_atomic_uint64 heard_since;	/* TimestampTz + 1: when this server began
									 * to accept writes (heartbeats), 0 not yet */
	pg_atomic_uint32 db_missing;	/* the last connection attempt found no
									 * gangsched.database */
} GsWorkerShared;

/* heard_since in this session only, for tests in virtual time */
static TimestampTz gs_heard_since_test = 0;
static bool gs_heard_since_test_set = false;

static GsWorkerShared *gs_shared = NULL;

/*
 * How often a worker whose database does not exist looks for it, and how
 * often a connected worker looks for the extension while it is missing
 * (at most; a shorter gangsched.round_interval wins). Each look is one
 * catalog lookup; together with the 1 s restart between the two, the first
 * round runs within about 1.5 s of CREATE DATABASE (0.2 s of CREATE
 * EXTENSION in a database the worker is connected to).
 */
#define GS_DATABASE_POLL_MS 100
#define GS_EXTENSION_POLL_MS 200
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
		pg_atomic_init_u64(&gs_shared->heard_since, 0);
		pg_atomic_init_u32(&gs_shared->db_missing, 0);
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
	/* 1 s: the worker exits to connect once a missing database appears */
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "gangsched");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "gs_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "gangsched scheduler");
	snprintf(worker.bgw_type, BGW_MAXLEN, "gangsched scheduler");
	RegisterBackgroundWorker(&worker);
}

/*
 * Record, once per start of the server (shared memory is made anew at every
 * start and crash restart), the moment it began to accept writes: the
 * worker starts right after start-up or promotion ends
 * (BgWorkerStart_RecoveryFinished). Agents' heartbeats could not land
 * before; node liveness counts silence from here at the earliest.
 */
static void
gs_note_heard_since(void)
{
	uint64		expected = 0;

	if (gs_shared == NULL || RecoveryInProgress())
		return;
	(void) pg_atomic_compare_exchange_u64(&gs_shared->heard_since, &expected,
										  (uint64) GetCurrentTimestamp() + 1);
}

static void
gs_worker_detach(int code, Datum arg)
{
	if (gs_shared)
		pg_atomic_write_u32(&gs_shared->procno, 0);
}

/* What gs_worker_round found. */
typedef enum GsWorkerRound
{
	GS_ROUND_RAN,
	GS_ROUND_NO_EXTENSION,		/* gangsched is not installed in the database */
	GS_ROUND_OLD_CATALOG		/* installed, but not this library's version */
} GsWorkerRound;

/*
 * One round in its own transaction, when the extension is installed at the
 * library's version; *installed gets the installed version otherwise (NULL
 * when not installed), in the caller's memory context.
 */
static GsWorkerRound
gs_worker_round(char **installed)
{
	GsWorkerRound result = GS_ROUND_NO_EXTENSION;
	MemoryContext callercxt = CurrentMemoryContext;
	char	   *version;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	version = gs_installed_version();
	*installed = version ? MemoryContextStrdup(callercxt, version) : NULL;
	if (version != NULL && strcmp(version, gs_library_version()) != 0)
		result = GS_ROUND_OLD_CATALOG;
	else if (version != NULL)
	{
		/* the round's statement too runs under the fixed search_path */
		int			save_nestlevel = gs_fix_search_path();

		pgstat_report_activity(STATE_RUNNING, "SELECT * FROM gangsched.run_round()");
		SPI_connect();
		if (SPI_execute("SELECT * FROM gangsched.run_round()", false, 0) != SPI_OK_SELECT)
			elog(ERROR, "gangsched worker: run_round() failed");
		SPI_finish();
		gs_restore_search_path(save_nestlevel);
		result = GS_ROUND_RAN;
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	if (result == GS_ROUND_RAN)
		pg_atomic_fetch_add_u64(&gs_shared->rounds, 1);
	return result;
}

/*
 * Fold the events' counts into the metrics' counters (sql/src/75_metrics.sql)
 * in a transaction of its own, after a round: outside the round, so the
 * round's transaction neither pays for the submissions since the last one
 * nor holds its locks longer. The fold takes no lock a tenant can hold
 * (tenants only insert deltas, through the API; an uncommitted delta is
 * invisible to the fold, not waited for). An error is logged and survived:
 * the deltas stay, gangsched.metrics counts them all the same, and the
 * next fold takes them.
 */
static void
metrics_fold(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		int			save_nestlevel;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		save_nestlevel = gs_fix_search_path();
		pgstat_report_activity(STATE_RUNNING, "SELECT gangsched._metrics_fold()");
		SPI_connect();
		if (SPI_execute("SELECT gangsched._metrics_fold()", false, 0) != SPI_OK_SELECT)
			elog(ERROR, "gangsched worker: _metrics_fold() failed");
		SPI_finish();
		gs_restore_search_path(save_nestlevel);
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_stat(false);
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ereport(LOG,
				(errmsg("gangsched could not fold the metrics' counts: %s (SQLSTATE %s)", edata->message,
						unpack_sql_state(edata->sqlerrcode)),
				 errhint("gangsched.metrics still counts them; the worker tries again after its next round.")));
		FreeErrorData(edata);
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_END_TRY();
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

/*
 * Does database `name` exist? For a process connected to no database: a
 * plain scan of pg_database, as the autovacuum launcher reads it. An index
 * scan (get_database_oid) needs the relcache entry of pg_database's index,
 * which such a process can only load from the shared relcache init file:
 * right after start-up or a crash restart, before any backend has
 * connected to a database and written that file, it fails with "cannot
 * read pg_class without having selected a database".
 */
static bool
gs_database_exists(const char *name)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (!found && HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		found = strcmp(NameStr(db->datname), name) == 0;
#ifdef DATCONNLIMIT_INVALID_DB
		/* one a DROP DATABASE left half-dropped (15.4 on) takes no connection */
		if (found && database_is_invalid_form(db))
			found = false;
#endif
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return found;
}

/*
 * Wait, connected to no database, until gangsched.database exists; then
 * exit (code 1) to be restarted after bgw_restart_time and connect to it.
 * A process cannot connect to a database after start-up.
 */
static void
gs_wait_for_database(void)
{
	bool		logged = false;

	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (gs_database_exists(gs_database))
		{
			pg_atomic_write_u32(&gs_shared->db_missing, 0);
			ereport(LOG, (errmsg("gangsched scheduler worker restarts to connect: database \"%s\" exists now",
								 gs_database)));
			proc_exit(1);		/* restarted after bgw_restart_time */
		}
		if (!logged)
		{
			ereport(LOG,
					(errmsg("gangsched scheduler worker waits: database \"%s\" does not exist", gs_database),
					 errdetail("It checks every %d ms and connects once the database is created.",
							   GS_DATABASE_POLL_MS),
					 errhint("Create the database, or set gangsched.database to the database where gangsched is installed and restart the server.")));
			logged = true;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 GS_DATABASE_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * Log what stopped a round (edata, copied out of the error): a lock the
 * round waited for too long, or any other error with its SQLSTATE, detail
 * and context. True for the lock: the caller then ends the sessions that
 * block rounds.
 */
static bool
log_failed_round(ErrorData *edata)
{
	if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
	{
		ereport(LOG,
				(errmsg("gangsched scheduler round gave up waiting for a lock: %s", edata->message),
				 errdetail("A transaction held a lock the round needs for longer than gangsched.round_lock_timeout (%d ms).",
						   gs_round_lock_timeout_ms),
				 errhint("The worker ends tenant sessions that hold such locks; the next round retries.")));
		return true;
	}
	ereport(LOG,
			(errmsg("gangsched scheduler round failed: %s (SQLSTATE %s)", edata->message,
					unpack_sql_state(edata->sqlerrcode)),
			 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
			 edata->context ? errcontext("%s", edata->context) : 0,
			 errhint("The worker goes on; the next round runs after gangsched.round_interval.")));
	return false;
}

/*
 * Say once why rounds wait (no extension, or one at another version); true
 * when the round ran. *warned_missing is set while rounds wait.
 */
static bool
note_round(GsWorkerRound r, const char *installed, volatile bool *warned_missing)
{
	if (r == GS_ROUND_NO_EXTENSION && !*warned_missing)
	{
		ereport(LOG, (errmsg("gangsched scheduler worker waits: extension gangsched is not installed in database \"%s\"",
							 gs_database)));
		*warned_missing = true;
	}
	else if (r == GS_ROUND_OLD_CATALOG && !*warned_missing)
	{
		ereport(LOG,
				(errmsg("gangsched scheduler worker waits: gangsched in database \"%s\" is version %s, its library is version %s",
						gs_database, installed, gs_library_version()),
				 errhint("Run ALTER EXTENSION gangsched UPDATE in that database (docs/upgrade.md); rounds resume at once.")));
		*warned_missing = true;
	}
	else if (r == GS_ROUND_RAN)
	{
		*warned_missing = false;
		return true;
	}
	return false;
}

/*
 * One turn of the loop: a round (an error in it logged and survived), then
 * the metrics' fold after a round that ran, or the end of the sessions that
 * blocked it; everything allocated in loopcxt, reset after.
 */
static void
worker_turn(MemoryContext loopcxt, volatile bool *warned_missing)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(loopcxt);
	volatile bool lock_timed_out = false;
	volatile bool round_ran = false;

	PG_TRY();
	{
		char	   *installed = NULL;
		GsWorkerRound r = gs_worker_round(&installed);

		round_ran = note_round(r, installed, warned_missing);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(loopcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		lock_timed_out = log_failed_round(edata);
		FreeErrorData(edata);
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_END_TRY();
	if (lock_timed_out)
		end_blocking_tenants();
	else if (round_ran)
		metrics_fold();
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(loopcxt);
}

/*
 * Connect to gangsched.database (after waiting for it, if the last attempt
 * found none) and make the worker known in shared memory.
 */
static void
worker_connect(void)
{
	/*
	 * The last attempt found no such database: wait for it connected to no
	 * database (shared catalogs only, nothing a DROP DATABASE would wait
	 * for), then exit to be restarted 1 s later and connect.
	 */
	if (pg_atomic_read_u32(&gs_shared->db_missing) != 0)
		gs_wait_for_database();

	/*
	 * If the connection fails (FATAL: no such database), the flag stays set
	 * and the restarted worker waits as above.
	 */
	pg_atomic_write_u32(&gs_shared->db_missing, 1);
	BackgroundWorkerInitializeConnection(gs_database, NULL, 0);
	pg_atomic_write_u32(&gs_shared->db_missing, 0);

	pg_atomic_write_u32(&gs_shared->dboid, MyDatabaseId);
	pg_atomic_write_u32(&gs_shared->procno, MyProc->pgprocno + 1);
	before_shmem_exit(gs_worker_detach, (Datum) 0);
	ereport(LOG, (errmsg("gangsched scheduler worker started in database \"%s\"", gs_database)));
}

void
gs_worker_main(Datum arg)
{
	MemoryContext loopcxt;
	volatile bool warned_missing = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	gs_note_heard_since();
	if (gs_database == NULL || gs_database[0] == '\0')
	{
		ereport(LOG,
				(errmsg("gangsched scheduler worker is not started: gangsched.database is not set"),
				 errhint("Set gangsched.database to the database where gangsched is installed, or drive rounds with pg_cron.")));
		proc_exit(0);			/* exit code 0: not restarted */
	}
	worker_connect();
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
			worker_turn(loopcxt, &warned_missing);

		/* while the extension is missing, look for it every 200 ms */
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   warned_missing ? Min(gs_round_interval_ms, GS_EXTENSION_POLL_MS) : gs_round_interval_ms,
					   PG_WAIT_EXTENSION);
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

/*
 * gangsched.heard_since(): the moment this server began to hear agents
 * (start-up or promotion, see gs_note_heard_since), NULL on a standby.
 * Node liveness counts silence from greatest(heartbeat_at, this).
 * Without shared_preload_libraries: the postmaster's start time (a
 * promotion is not seen). In virtual time (gangsched.clock_override) NULL:
 * the real server start has no place on the virtual clock; tests set a
 * virtual one with gangsched._test_heard_since().
 */
PG_FUNCTION_INFO_V1(gs_heard_since);
Datum
gs_heard_since(PG_FUNCTION_ARGS)
{
	uint64		v;

	if (gs_heard_since_test_set)
		PG_RETURN_TIMESTAMPTZ(gs_heard_since_test);
	if (gs_clock_override != NULL && gs_clock_override[0] != '\0')
		PG_RETURN_NULL();
	if (RecoveryInProgress())
		PG_RETURN_NULL();
	if (gs_shared == NULL)
		PG_RETURN_TIMESTAMPTZ(PgStartTime);
	/* no worker started since the server started (none configured): now */
	gs_note_heard_since();
	v = pg_atomic_read_u64(&gs_shared->heard_since);
	if (v == 0)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ((TimestampTz) (v - 1));
}

/*
 * gangsched._test_heard_since(at): what heard_since() returns in this
 * session (NULL: the real rule again), to test node liveness across a
 * simulated restart in virtual time. Owner only, like every internal
 * function; nothing outside this session changes.
 */
PG_FUNCTION_INFO_V1(gs_test_heard_since);
Datum
gs_test_heard_since(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		gs_heard_since_test_set = false;
	else
	{
		gs_heard_since_test = PG_GETARG_TIMESTAMPTZ(0);
		gs_heard_since_test_set = true;
	}
	PG_RETURN_VOID();
}
