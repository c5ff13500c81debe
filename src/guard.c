/*
 * guard.c — rounds that a tenant's open transaction cannot stall.
 *
 * A portal's cancel() or an agent's job_released() locks job rows until its
 * transaction ends, and a round that places, preempts or expires that job
 * waits for it. Tenants may turn their sessions' timeouts off, so the round
 * does not trust them: it waits at most gangsched.round_lock_timeout for a
 * lock (then fails; the worker says so and the next round retries), and the
 * worker then ends the sessions of tenant roles (members of
 * gangsched_portal, gangsched_agent or gangsched_analyst that are neither
 * superusers nor operators) whose writing transaction (one holding a
 * transaction id, which is what row locks wait on) has been open longer
 * than that. Agents reconnect; a portal's transaction is rolled back.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "guard.h"
#include "guc.h"
#include "tenancy.h"

void
gs_round_lock_timeout(void)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "%dms", gs_round_lock_timeout_ms);
	(void) set_config_option("lock_timeout", buf, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

static const char *blocking_sql =
"SELECT a.pid, a.usename::pg_catalog.text,"
"       pg_catalog.pg_terminate_backend(a.pid)"
"  FROM pg_catalog.pg_stat_activity a"
" WHERE a.datid OPERATOR(pg_catalog.=) $1"
"   AND a.backend_type OPERATOR(pg_catalog.=) 'client backend'"
"   AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()"
"   AND a.xact_start OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $2)"
"   AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) a.usesysid)"
"   AND NOT pg_catalog.pg_has_role(a.usesysid, 'gangsched_operator', 'MEMBER')"
"   AND (pg_catalog.pg_has_role(a.usesysid, 'gangsched_portal', 'MEMBER')"
"        OR pg_catalog.pg_has_role(a.usesysid, 'gangsched_agent', 'MEMBER')"
"        OR pg_catalog.pg_has_role(a.usesysid, 'gangsched_analyst', 'MEMBER'))"
"   AND EXISTS (SELECT FROM pg_catalog.pg_locks l"
"                WHERE l.pid OPERATOR(pg_catalog.=) a.pid AND l.granted"
"                  AND l.locktype OPERATOR(pg_catalog.=) 'transactionid')";

int
gs_end_blocking_tenants(void)
{
	int			ended = 0;
	int			lvl;
	Oid			types[2] = {OIDOID, INTERVALOID};
	Datum		values[2];
	char		buf[32];

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "gangsched: ending tenant sessions that block rounds");
	lvl = gs_fix_search_path();
	SPI_connect();
	snprintf(buf, sizeof(buf), "%d milliseconds", gs_round_lock_timeout_ms);
	values[0] = ObjectIdGetDatum(MyDatabaseId);
	values[1] = DirectFunctionCall3(interval_in, CStringGetDatum(buf), ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	if (SPI_execute_with_args(blocking_sql, 2, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "gangsched: looking for blocking sessions failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *pid = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *role = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);

		ereport(WARNING,
				(errmsg("gangsched ended the session of role \"%s\" (pid %s): its transaction held locks rounds need for longer than gangsched.round_lock_timeout",
						role ? role : "?", pid ? pid : "?"),
				 errhint("Tenant sessions must not leave transactions open; the round retries now.")));
		ended++;
	}
	SPI_finish();
	gs_restore_search_path(lvl);
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return ended;
}
