/*
 * round.c — gangsched.run_round() and gangsched.why_pending(): the SPI edges
 * around the in-memory scheduler.
 *
 * A round is one transaction: take the round's lock (or return at once),
 * apply the time rules (queue timeouts, start timeouts) set-based, load the
 * state with a handful of queries, decide in memory, and write every
 * decision in bulk: allocations and held slots as COPY writes them
 * (bulk.c), jobs, events and reasons with one statement per relation
 * (array parameters); no statement per allocation. Agents are told through
 * NOTIFY, which is delivered at commit.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/rangetypes.h"
#include "utils/typcache.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "fair.h"
#include "guard.h"
#include "version.h"
#include "bulk.h"
#include "guc.h"
#include "las.h"
#include "loader.h"
#include "order.h"
#include "metrics.h"
#include "preempt.h"
#include "round.h"
#include "schedule.h"
#include "spi.h"
#include "tenancy.h"

/* The first pending jobs in line whose stored waiting reason a round refreshes. */
#define GS_REASONS_PER_ROUND 256

/*
 * One round at a time: an EXCLUSIVE lock on gangsched.round_lock, held to
 * the end of the round's transaction. Not an advisory lock: any role can
 * take those (pg_advisory_lock is PUBLIC), and one held by a tenant's
 * session would stop every round. Only the owner can lock this table: no
 * role has privileges on it and no view reads it.
 */
bool
gs_try_round_lock(void)
{
	Oid			nsp = get_namespace_oid("gangsched", false);
	Oid			relid = get_relname_relid("round_lock", nsp);

	if (!OidIsValid(relid))
		elog(ERROR, "gangsched.round_lock is missing");
	return ConditionalLockRelationOid(relid, ExclusiveLock);
}

/* ---- small array builders -------------------------------------------- */

typedef struct Cols
{
	int			n,
				cap;
	int64	   *job;
	int32	   *worker;
	int32	   *node;
	char	  **devices;
	int32	   *first_slice;
	int32	   *slices;
} Cols;

static void
cols_add(Cols *c, int64 job, int32 worker, int32 node, char *devices, int32 fs, int32 ns)
{
	if (c->n == c->cap)
	{
		c->cap = Max(64, c->cap * 2);
		c->job = c->job ? repalloc(c->job, sizeof(int64) * c->cap) : palloc(sizeof(int64) * c->cap);
		c->worker = c->worker ? repalloc(c->worker, sizeof(int32) * c->cap) : palloc(sizeof(int32) * c->cap);
		c->node = c->node ? repalloc(c->node, sizeof(int32) * c->cap) : palloc(sizeof(int32) * c->cap);
		c->devices = c->devices ? repalloc(c->devices, sizeof(char *) * c->cap) : palloc(sizeof(char *) * c->cap);
		c->first_slice = c->first_slice ? repalloc(c->first_slice, sizeof(int32) * c->cap) : palloc(sizeof(int32) * c->cap);
		c->slices = c->slices ? repalloc(c->slices, sizeof(int32) * c->cap) : palloc(sizeof(int32) * c->cap);
	}
	c->job[c->n] = job;
	c->worker[c->n] = worker;
	c->node[c->n] = node;
	c->devices[c->n] = devices;
	c->first_slice[c->n] = fs;
	c->slices[c->n] = ns;
	c->n++;
}

static Datum
int8_array(int64 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		d[i] = Int64GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

static Datum
int4_array(int32 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		d[i] = Int32GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, INT4OID, 4, true, TYPALIGN_INT));
}

static Datum
bool_array(bool *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		d[i] = BoolGetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, BOOLOID, 1, true, TYPALIGN_CHAR));
}

static Datum
text_array(char **v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(n, 1));
	int			i,
				dims[1] = {n},
				lbs[1] = {1};

	for (i = 0; i < n; i++)
	{
		nulls[i] = (v[i] == NULL);
		d[i] = nulls[i] ? (Datum) 0 : CStringGetTextDatum(v[i]);
	}
	return PointerGetDatum(construct_md_array(d, nulls, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
}

/* A statement of the round with parameters; its text is the same every round (its plan is kept). */
static void
exec_args(const char *sql, int nargs, Oid *types, Datum *values, int expect)
{
	(void) gs_spi_exec("round", sql, nargs, types, values, NULL, true, expect);
}

/* ---- time rules ------------------------------------------------------- */

static int
requeue_unstarted(TimestampTz now)
{
	Oid			types[2] = {TIMESTAMPTZOID, INT4OID};
	Datum		values[2] = {TimestampTzGetDatum(now), Int32GetDatum(gs_start_timeout_s)};
	bool		isnull;
	Datum		d;

	exec_args("SELECT gangsched._requeue_many(pg_catalog.array_agg(g.id ORDER BY g.id),"
			  "        'not started by every agent within gangsched.start_timeout ('"
			  "          OPERATOR(pg_catalog.||) pg_catalog.make_interval(secs => $2)::pg_catalog.text"
			  "          OPERATOR(pg_catalog.||) ')',"
			  "        'kill')"
			  "  FROM gangsched.gangs g"
			  " WHERE g.state OPERATOR(pg_catalog.=) 'placed'"
			  "   AND g.placed_at OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $2)"
			  "       OPERATOR(pg_catalog.<=) $1",
			  2, types, values, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt32(d);
}

/* Victims past their grace deadline are killed; ready preemptors placed. */
static int
kill_overdue(void)
{
	bool		isnull;
	Datum		d;

	exec_args("SELECT gangsched._kill_overdue()", 0, NULL, NULL, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt32(d);
}

/* ---- writing decisions ------------------------------------------------ */

/* hashtext() of a C string, to compare with the stored reason's hash. */
static int32
reason_hash(const char *s)
{
	return DatumGetInt32(hash_any((const unsigned char *) s, (int) strlen(s)));
}

static char *
devices_text(const GsAssign *a)
{
	StringInfoData s;
	int			dv;
	bool		first = true;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (dv = 0; dv < GS_MAX_GPUS; dv++)
		if (a->devmask & (UINT64_C(1) << dv))
		{
			appendStringInfo(&s, first ? "%d" : ",%d", dv);
			first = false;
		}
	appendStringInfoChar(&s, '}');
	return s.data;
}

/* Is id in the ascending array v[0 .. n - 1]? */
static bool
int8_in_sorted(const int64 *v, int n, int64 id)
{
	int			lo = 0,
				hi = n - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (v[mid] == id)
			return true;
		if (v[mid] < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return false;
}

/*
 * Nominations: the preemptor's planned placement goes to gangsched.holds and
 * it becomes 'nominated'; its victims become 'preempting' with their grace
 * deadline, and their nodes' agents are told.
 *
 * The jobs' rows first, "AND g.state = 'pending'": a job cancelled after the
 * round read it (under READ COMMITTED the UPDATE waits for that transaction
 * and re-checks the row) is not nominated, and its holds and its victims'
 * preemptions are written only for the nominations that UPDATE returns, as
 * placements are (a hold of a cancelled job would keep its capacity from
 * every other job: invariant 5).
 */
static void
write_nominations(GsState *st, GsDecision *dec, TimestampTz now)
{
	GsCluster  *c = st->cluster;
	Cols		h = {0};
	int			cap = Max(dec->nominated, 1),
				vcap = Max(dec->preempted, 1);
	int64	   *n_job = palloc(sizeof(int64) * cap);
	bool	   *n_borrowed = palloc(sizeof(bool) * cap);
	char	  **n_reason = palloc(sizeof(char *) * cap);
	char	  **n_detail = palloc(sizeof(char *) * cap);
	int64	   *v_job = palloc(sizeof(int64) * vcap);
	int64	   *v_for = palloc(sizeof(int64) * vcap);
	char	  **v_trigger = palloc(sizeof(char *) * vcap);
	int64	   *confirmed;
	int			nconfirmed;
	int			nn = 0,
				nv = 0,
				i,
				w,
				k;

	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];
		StringInfoData det;
		double		stranded = 0;

		if (!j->nominated)
			continue;
		initStringInfo(&det);
		appendStringInfoString(&det, "{\"trigger\":");
		escape_json(&det, j->trigger);
		appendStringInfo(&det, ",\"lost_gpu_seconds\":%.1f,\"victims\":[", j->victim_cost);
		for (k = 0; k < j->nvictims; k++)
			appendStringInfo(&det, "%s" INT64_FORMAT, k ? "," : "", j->victims[k]->id);
		appendStringInfoString(&det, "]");
		/* earlier victims of the round whose rest it waits for */
		if (j->nwaits > 0)
		{
			appendStringInfoString(&det, ",\"waits_for\":[");
			for (k = 0; k < j->nwaits; k++)
				appendStringInfo(&det, "%s" INT64_FORMAT, k ? "," : "", j->waits[k]->id);
			appendStringInfoChar(&det, ']');
		}
		/* its victims' GPUs no nomination of this round uses: idle until they go */
		for (k = 0; k < j->nvictims; k++)
			stranded += gs_victim_rest_gpus(c, j->victims[k]);
		appendStringInfo(&det, ",\"stranded_gpus\":%g", stranded);
		if (j->las_queue >= 0)
			appendStringInfo(&det, ",\"las_queue\":%d,\"attained_gpu_seconds\":%.1f",
							 j->las_queue, j->attained);
		appendStringInfoChar(&det, '}');
		n_job[nn] = j->id;
		n_borrowed[nn] = j->borrowed;
		n_reason[nn] = (char *) j->reason;
		n_detail[nn++] = det.data;
	}
	{
		Oid			types[5] = {INT8ARRAYOID, BOOLARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID};
		Datum		values[5];

		values[0] = int8_array(n_job, nn);
		values[1] = bool_array(n_borrowed, nn);
		values[2] = text_array(n_reason, nn);
		values[3] = text_array(n_detail, nn);
		values[4] = TimestampTzGetDatum(now);
		exec_args("WITH n AS ("
				  "  UPDATE gangsched.gangs g SET state = 'nominated', borrowed = u.borrowed, reason = u.reason"
				  "    FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2),"
				  "                    pg_catalog.unnest($3), pg_catalog.unnest($4))"
				  "         AS u(job, borrowed, reason, detail)"
				  "   WHERE g.id OPERATOR(pg_catalog.=) u.job AND g.state OPERATOR(pg_catalog.=) 'pending'"
				  "  RETURNING g.id, g.team_id, u.reason, u.detail),"
				  " e AS ("
				  "  INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)"
				  "  SELECT $5, 'nominated', n.id, n.team_id, n.reason, n.detail::pg_catalog.jsonb FROM n"
				  "  RETURNING job)"
				  "SELECT job FROM e ORDER BY job",
				  5, types, values, SPI_OK_SELECT);
		nconfirmed = (int) SPI_processed;
		confirmed = palloc(sizeof(int64) * Max(nconfirmed, 1));
		for (k = 0; k < nconfirmed; k++)
		{
			bool		isnull;

			confirmed[k] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 1, &isnull));
		}
	}
	/* holds and victims of the confirmed nominations only */
	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];

		if (!j->nominated)
			continue;
		if (!int8_in_sorted(confirmed, nconfirmed, j->id))
		{
			j->nominated = false;
			dec->nominated--;
			dec->preempted -= j->nvictims;
			continue;
		}
		for (w = 0; w < j->workers; w++)
		{
			GsAssign   *a = &j->assign[w];

			cols_add(&h, j->id, w, c->nodes[a->node].id, devices_text(a), a->first_slice, a->nslices);
		}
		for (k = 0; k < j->nvictims && nv < vcap; k++)
		{
			v_job[nv] = j->victims[k]->id;
			v_for[nv] = j->id;
			v_trigger[nv++] = (char *) j->trigger;
		}
	}
	{
		Oid			types[6] = {INT8ARRAYOID, INT4ARRAYOID, INT4ARRAYOID, TEXTARRAYOID,
		INT4ARRAYOID, INT4ARRAYOID};
		Datum		values[6];

		values[0] = int8_array(h.job, h.n);
		values[1] = int4_array(h.worker, h.n);
		values[2] = int4_array(h.node, h.n);
		values[3] = text_array(h.devices, h.n);
		values[4] = int4_array(h.first_slice, h.n);
		values[5] = int4_array(h.slices, h.n);
		exec_args("INSERT INTO gangsched.holds (job, worker, node_id, devices, first_slice, slices, cpus, mem_gb, net_gbps)"
				  "SELECT u.job, u.worker, u.node, u.devices::pg_catalog.int4[], u.first_slice, u.slices,"
				  "       g.cpus, g.mem_gb, g.net_gbps"
				  "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3),"
				  "                  pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6))"
				  "       AS u(job, worker, node, devices, first_slice, slices)"
				  "  JOIN gangsched.gangs g ON g.id OPERATOR(pg_catalog.=) u.job",
				  6, types, values, SPI_OK_INSERT);
	}
	{
		Oid			types[6] = {INT8ARRAYOID, INT8ARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, INT4OID, INT4OID};
		Datum		values[6];

		values[0] = int8_array(v_job, nv);
		values[1] = int8_array(v_for, nv);
		values[2] = text_array(v_trigger, nv);
		values[3] = TimestampTzGetDatum(now);
		values[4] = Int32GetDatum(gs_default_grace_s);
		values[5] = Int32GetDatum(gs_max_grace_s);
		exec_args("WITH v AS ("
				  "  UPDATE gangsched.gangs g"
				  "     SET state = 'preempting', preempted_for = u.pfor,"
				  "         preempt_deadline = $4 OPERATOR(pg_catalog.+)"
				  "             pg_catalog.make_interval(secs => LEAST(COALESCE(EXTRACT(epoch FROM g.grace), $5), $6)),"
				  "         reason = pg_catalog.format('preempted for job %s (%s)', u.pfor, u.trig)"
				  "    FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3))"
				  "         AS u(job, pfor, trig)"
				  "   WHERE g.id OPERATOR(pg_catalog.=) u.job"
				  "     AND g.state OPERATOR(pg_catalog.=) ANY ('{placed,running}'::pg_catalog.text[])"
				  "  RETURNING g.id, g.team_id, g.preempt_deadline, g.reason, u.pfor),"
				  " ev AS ("
				  "  INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)"
				  "  SELECT $4, 'preempting', v.id, v.team_id, v.reason,"
				  "         pg_catalog.jsonb_build_object('for', v.pfor, 'deadline', v.preempt_deadline)"
				  "    FROM v RETURNING 1)"
				  "SELECT pg_catalog.count(pg_catalog.pg_notify("
				  "           'gangsched_node_' OPERATOR(pg_catalog.||) a.node_id,"
				  "           pg_catalog.json_build_object('event', 'preempt', 'job', v.id,"
				  "                                        'deadline', v.preempt_deadline)::pg_catalog.text))"
				  "  FROM v JOIN (SELECT DISTINCT x.job, x.node_id FROM gangsched.allocations x"
				  "               WHERE pg_catalog.upper_inf(x.during)"
				  "                 AND x.job OPERATOR(pg_catalog.=) ANY ($1)) a"
				  "    ON a.job OPERATOR(pg_catalog.=) v.id",
				  6, types, values, SPI_OK_SELECT);
	}
}

/*
 * Allocation rows of the placed gangs, written like COPY (src/bulk.c). The
 * exact numeric amounts and the team come from the jobs' rows, read in one
 * query.
 */
static void
bulk_allocations(Cols *al, int64 *jobs, int njobs, TimestampTz now)
{
	Oid			types[1] = {INT8ARRAYOID};
	Datum		values[1];
	SPITupleTable *tt;
	int			nrows,
				k;
	int64	   *ids;
	TypeCacheEntry *rtc = lookup_type_cache(TSTZRANGEOID, TYPECACHE_RANGE_INFO);
	RangeBound	lower = {0},
				upper = {0};
	Datum		during;
	GsBulk	   *b;
	AttrNumber	a_id,
				a_job,
				a_worker,
				a_node,
				a_team,
				a_devices,
				a_first,
				a_slices,
				a_gpus,
				a_cpus,
				a_mem,
				a_net,
				a_borrowed,
				a_during;

	values[0] = int8_array(jobs, njobs);
	exec_args("SELECT g.id, g.team_id, g.gpus, g.cpus, g.mem_gb, g.net_gbps, g.borrowed"
			  "  FROM gangsched.gangs g WHERE g.id OPERATOR(pg_catalog.=) ANY ($1) ORDER BY g.id",
			  1, types, values, SPI_OK_SELECT);
	tt = SPI_tuptable;
	nrows = (int) SPI_processed;
	ids = palloc(sizeof(int64) * Max(nrows, 1));
	for (k = 0; k < nrows; k++)
	{
		bool		isnull;

		ids[k] = DatumGetInt64(SPI_getbinval(tt->vals[k], tt->tupdesc, 1, &isnull));
	}

	lower.val = TimestampTzGetDatum(now);
	lower.inclusive = true;
	lower.lower = true;
	upper.infinite = true;
	upper.lower = false;
	during = RangeTypePGetDatum(make_range(rtc, &lower, &upper, false));

	b = gs_bulk_begin("allocations");
	a_id = gs_bulk_attnum(b, "id");
	a_job = gs_bulk_attnum(b, "job");
	a_worker = gs_bulk_attnum(b, "worker");
	a_node = gs_bulk_attnum(b, "node_id");
	a_team = gs_bulk_attnum(b, "team_id");
	a_devices = gs_bulk_attnum(b, "devices");
	a_first = gs_bulk_attnum(b, "first_slice");
	a_slices = gs_bulk_attnum(b, "slices");
	a_gpus = gs_bulk_attnum(b, "gpus");
	a_cpus = gs_bulk_attnum(b, "cpus");
	a_mem = gs_bulk_attnum(b, "mem_gb");
	a_net = gs_bulk_attnum(b, "net_gbps");
	a_borrowed = gs_bulk_attnum(b, "borrowed");
	a_during = gs_bulk_attnum(b, "during");
	for (k = 0; k < al->n; k++)
	{
		TupleTableSlot *ts;
		int			lo = 0,
					hi = nrows - 1,
					row = -1;
		HeapTuple	jt;
		bool		isnull;
		Datum		devs[GS_MAX_GPUS];
		int			nd = 0;
		char	   *c;

		while (lo <= hi)
		{
			int			mid = (lo + hi) / 2;

			if (ids[mid] == al->job[k])
			{
				row = mid;
				break;
			}
			if (ids[mid] < al->job[k])
				lo = mid + 1;
			else
				hi = mid - 1;
		}
		if (row < 0)
			elog(ERROR, "gangsched round: placed job " INT64_FORMAT " vanished", al->job[k]);
		jt = tt->vals[row];
		/* devices text '{0,1,...}' back to integers */
		for (c = al->devices[k]; *c; c++)
			if (*c >= '0' && *c <= '9')
			{
				int			v = 0;

				while (*c >= '0' && *c <= '9')
					v = v * 10 + (*c++ - '0');
				devs[nd++] = Int32GetDatum(v);
				if (*c == '\0')
					break;
			}

		ts = gs_bulk_next(b);
		ts->tts_values[a_id - 1] = gs_bulk_identity(b, a_id);
		ts->tts_isnull[a_id - 1] = false;
		ts->tts_values[a_job - 1] = Int64GetDatum(al->job[k]);
		ts->tts_isnull[a_job - 1] = false;
		ts->tts_values[a_worker - 1] = Int32GetDatum(al->worker[k]);
		ts->tts_isnull[a_worker - 1] = false;
		ts->tts_values[a_node - 1] = Int32GetDatum(al->node[k]);
		ts->tts_isnull[a_node - 1] = false;
		ts->tts_values[a_team - 1] = SPI_getbinval(jt, tt->tupdesc, 2, &isnull);
		ts->tts_isnull[a_team - 1] = false;
		ts->tts_values[a_devices - 1] =
			PointerGetDatum(construct_array(devs, nd, INT4OID, 4, true, TYPALIGN_INT));
		ts->tts_isnull[a_devices - 1] = false;
		ts->tts_values[a_first - 1] = Int32GetDatum(al->first_slice[k]);
		ts->tts_isnull[a_first - 1] = false;
		ts->tts_values[a_slices - 1] = Int32GetDatum(al->slices[k]);
		ts->tts_isnull[a_slices - 1] = false;
		ts->tts_values[a_gpus - 1] = SPI_getbinval(jt, tt->tupdesc, 3, &isnull);
		ts->tts_isnull[a_gpus - 1] = false;
		ts->tts_values[a_cpus - 1] = SPI_getbinval(jt, tt->tupdesc, 4, &isnull);
		ts->tts_isnull[a_cpus - 1] = false;
		ts->tts_values[a_mem - 1] = SPI_getbinval(jt, tt->tupdesc, 5, &isnull);
		ts->tts_isnull[a_mem - 1] = false;
		ts->tts_values[a_net - 1] = SPI_getbinval(jt, tt->tupdesc, 6, &isnull);
		ts->tts_isnull[a_net - 1] = false;
		ts->tts_values[a_borrowed - 1] = SPI_getbinval(jt, tt->tupdesc, 7, &isnull);
		ts->tts_isnull[a_borrowed - 1] = false;
		ts->tts_values[a_during - 1] = during;
		ts->tts_isnull[a_during - 1] = false;
	}
	gs_bulk_end(b);
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

static Datum
float8_array(float8 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		d[i] = Float8GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * The counts of the round's placements for gangsched.metrics
 * (sql/src/75_metrics.sql), added up here from the rows the placement
 * statement returned and written as one row per team and counter: what
 * gangsched._event_counts() gives a 'placed' event (jobs_placed 1,
 * queue_wait_seconds the wait or 0, one queue_wait_bucket at the smallest
 * bound the wait does not exceed, '+Inf' above the last), summed per team,
 * counter and label in the order of the rows, as the SQL sum did. The
 * bounds and their text come from gangsched._wait_buckets().
 */
typedef struct PlacedCount
{
	int32		team;
	float8		placed;
	float8		wait_sum;
	float8	   *bucket;			/* [nb + 1]: the bounds, then +Inf */
} PlacedCount;

static void
count_placed(const int32 *team, const float8 *wait, int n)
{
	int			nb,
				nt = 0,
				nrow = 0,
				i,
				b;
	float8	   *le;
	char	  **le_text;
	PlacedCount *pc;
	char	  **r_name,
			  **r_label;
	int32	   *r_team;
	float8	   *r_value;

	if (n == 0)
		return;
	exec_args("SELECT b, b::pg_catalog.text FROM pg_catalog.unnest(gangsched._wait_buckets()) b",
			  0, NULL, NULL, SPI_OK_SELECT);
	nb = (int) SPI_processed;
	le = palloc(sizeof(float8) * Max(nb, 1));
	le_text = palloc(sizeof(char *) * (nb + 1));
	for (b = 0; b < nb; b++)
	{
		bool		isnull;

		le[b] = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[b], SPI_tuptable->tupdesc, 1, &isnull));
		le_text[b] = SPI_getvalue(SPI_tuptable->vals[b], SPI_tuptable->tupdesc, 2);
	}
	le_text[nb] = "+Inf";

	pc = palloc0(sizeof(PlacedCount) * n);
	for (i = 0; i < n; i++)
	{
		PlacedCount *t = NULL;
		int			k,
					best = nb;

		for (k = 0; k < nt; k++)
			if (pc[k].team == team[i])
			{
				t = &pc[k];
				break;
			}
		if (t == NULL)
		{
			t = &pc[nt++];
			t->team = team[i];
			t->bucket = palloc0(sizeof(float8) * (nb + 1));
		}
		t->placed += 1;
		/* GREATEST(wait, 0), NaN the greater as in SQL */
		t->wait_sum += (isnan(wait[i]) || wait[i] > 0) ? wait[i] : 0;
		for (k = 0; k < nb; k++)
			if (wait[i] <= le[k] && (best == nb || le[k] < le[best]))
				best = k;
		t->bucket[best] += 1;
	}

	r_name = palloc(sizeof(char *) * nt * (nb + 3));
	r_label = palloc(sizeof(char *) * nt * (nb + 3));
	r_team = palloc(sizeof(int32) * nt * (nb + 3));
	r_value = palloc(sizeof(float8) * nt * (nb + 3));
	for (i = 0; i < nt; i++)
	{
		r_name[nrow] = "jobs_placed", r_label[nrow] = "", r_team[nrow] = pc[i].team, r_value[nrow++] = pc[i].placed;
		r_name[nrow] = "queue_wait_seconds", r_label[nrow] = "", r_team[nrow] = pc[i].team, r_value[nrow++] = pc[i].wait_sum;
		for (b = 0; b <= nb; b++)
			if (pc[i].bucket[b] > 0)
			{
				r_name[nrow] = "queue_wait_bucket", r_label[nrow] = le_text[b];
				r_team[nrow] = pc[i].team, r_value[nrow++] = pc[i].bucket[b];
			}
	}
	{
		Oid			types[4] = {TEXTARRAYOID, INT4ARRAYOID, TEXTARRAYOID, FLOAT8ARRAYOID};
		Datum		values[4];

		values[0] = text_array(r_name, nrow);
		values[1] = int4_array(r_team, nrow);
		values[2] = text_array(r_label, nrow);
		values[3] = float8_array(r_value, nrow);
		exec_args("INSERT INTO gangsched.metric_deltas (name, team_id, label, value)"
				  " SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2),"
				  "                          pg_catalog.unnest($3), pg_catalog.unnest($4))",
				  4, types, values, SPI_OK_INSERT);
	}
}

static void
write_decisions(GsState *st, GsDecision *dec, TimestampTz now)
{
	GsCluster  *c = st->cluster;
	Cols		al = {0};
	int			nslot = 0,
				slotcap = 1024;
	int32	   *s_node = palloc(sizeof(int32) * slotcap);
	int32	   *s_slot = palloc(sizeof(int32) * slotcap);
	int64	   *s_job = palloc(sizeof(int64) * slotcap);
	int32	   *s_worker = palloc(sizeof(int32) * slotcap);
	int64	   *p_job = palloc(sizeof(int64) * Max(dec->placed, 1));
	char	  **p_detail = palloc(sizeof(char *) * Max(dec->placed, 1));
	bool	   *p_borrowed = palloc(sizeof(bool) * Max(dec->placed, 1));
	int			np = 0;
	int64	   *w_job = palloc(sizeof(int64) * Max(st->njobs, 1));
	int64	   *x_job = palloc(sizeof(int64) * Max(st->njobs, 1));
	char	  **x_reason = palloc(sizeof(char *) * Max(st->njobs, 1));
	int			nx = 0;
	char	  **w_reason = palloc(sizeof(char *) * Max(st->njobs, 1));
	int			nw = 0;
	int64	   *r_job = palloc(sizeof(int64) * Max(st->njobs, 1));
	char	  **r_text = palloc(sizeof(char *) * Max(st->njobs, 1));
	int			nr = 0;
	int			i,
				w;
	bool	   *seen = palloc0(sizeof(bool) * Max(c->nnodes, 1));

	/*
	 * Waiting reasons are refreshed for the first GS_REASONS_PER_ROUND jobs
	 * in line (and written only when changed), so a round over a long queue
	 * neither builds nor writes a reason for every pending job;
	 * why_pending() always computes it live.
	 */
	for (i = 0; i < gs_order_count(dec->order); i++)
	{
		GsJob	   *j = gs_order_at(dec->order, i);

		if (j->placed)
			continue;
		/* the text of a plain "does not fit" reason, for the first in line only */
		if (j->reason == NULL && !j->expiring && i < GS_REASONS_PER_ROUND &&
			dec->why[j - st->jobs].kind != GS_WHY_NONE)
			j->reason = gs_why_text(c, j, &dec->why[j - st->jobs], false);
		/* a victim search that refused it says so (and the events log, below) */
		if (j->preempt_refused != NULL && !j->nominated && !j->expiring && i < GS_REASONS_PER_ROUND)
			j->reason = psprintf("%s%spreemption refused: %s", j->reason ? j->reason : "",
								 j->reason ? "; " : "", j->preempt_refused);
		if (j->expiring)
		{
			x_job[nx] = j->id;
			x_reason[nx++] = (char *) j->reason;
			continue;
		}
		if (j->reason != NULL && nw < GS_REASONS_PER_ROUND &&
			(!j->has_old_reason || j->old_reason_hash != reason_hash(j->reason)))
		{
			w_job[nw] = j->id;
			w_reason[nw++] = (char *) j->reason;
			/* once per refusal: not again while its reason keeps saying so */
			if (j->preempt_refused != NULL && !j->nominated && !j->old_reason_refused)
			{
				r_job[nr] = j->id;
				r_text[nr++] = (char *) j->preempt_refused;
			}
		}
	}
	/* the placed jobs' rows and events first: only jobs still pending count */
	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];
		StringInfoData det;
		int			nnodes = 0;

		if (!j->placed)
			continue;
		initStringInfo(&det);
		appendStringInfoString(&det, "{\"nodes\":[");
		for (w = 0; w < j->workers; w++)
		{
			GsAssign   *a = &j->assign[w];

			if (!seen[a->node])
			{
				seen[a->node] = true;
				if (nnodes)
					appendStringInfoChar(&det, ',');
				escape_json(&det, c->nodes[a->node].name);
				nnodes++;
			}
		}
		for (w = 0; w < j->workers; w++)
			seen[j->assign[w].node] = false;
		/* names are the operator's: escaped, so no name can make the event's jsonb fail */
		appendStringInfoString(&det, "],\"domain\":");
		escape_json(&det, c->dom[j->dom_depth][j->dom_index].label);
		appendStringInfoString(&det, ",\"level\":");
		escape_json(&det, c->level_names[j->dom_depth]);
		if (j->las_queue >= 0)
			appendStringInfo(&det, ",\"las_queue\":%d,\"attained_gpu_seconds\":%.1f",
							 j->las_queue, j->attained);
		appendStringInfoChar(&det, '}');
		p_job[np] = j->id;
		p_borrowed[np] = j->borrowed;
		p_detail[np++] = det.data;
	}

	if (np > 0)
	{
		Oid			types[4] = {INT8ARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, BOOLARRAYOID};
		Datum		values[4];
		int64	   *confirmed;
		int			nconfirmed,
					k;

		values[0] = int8_array(p_job, np);
		values[1] = text_array(p_detail, np);
		values[2] = TimestampTzGetDatum(now);
		values[3] = bool_array(p_borrowed, np);

		/*
		 * "AND g.state = 'pending'": a job cancelled (or otherwise changed)
		 * after the round read it is not placed; under READ COMMITTED the
		 * UPDATE waits for that transaction and re-checks the row.
		 */
		exec_args("WITH p AS ("
				  "  UPDATE gangsched.gangs g"
				  "     SET state = 'placed', placed_at = $3, started_at = NULL, started_nodes = '{}', reason = NULL,"
				  "         borrowed = u.borrowed"
				  "    FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($4))"
				  "         AS u(job, detail, borrowed)"
				  "   WHERE g.id OPERATOR(pg_catalog.=) u.job AND g.state OPERATOR(pg_catalog.=) 'pending'"
				  "  RETURNING g.id, g.team_id, u.detail, g.borrowed, g.queued_at),"
				  " e AS ("
				  "  INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)"
				  "  SELECT $3, 'placed', p.id, p.team_id,"
				  "         CASE WHEN p.borrowed THEN 'placed whole in its smallest domain, as borrowed capacity'"
				  "              ELSE 'placed whole in its smallest domain, within nominal quota' END,"
				  "         p.detail::pg_catalog.jsonb FROM p)"
				  /* every row of p has its event: e runs to completion unread */
				  "SELECT p.id, p.team_id,"
				  "       pg_catalog.date_part('epoch', $3 OPERATOR(pg_catalog.-) p.queued_at) FROM p",
				  4, types, values, SPI_OK_SELECT);
		nconfirmed = (int) SPI_processed;
		confirmed = palloc(sizeof(int64) * Max(nconfirmed, 1));
		{
			int32	   *team = palloc(sizeof(int32) * Max(nconfirmed, 1));
			float8	   *wait = palloc(sizeof(float8) * Max(nconfirmed, 1));

			for (k = 0; k < nconfirmed; k++)
			{
				HeapTuple	tup = SPI_tuptable->vals[k];
				TupleDesc	td = SPI_tuptable->tupdesc;
				bool		isnull;

				confirmed[k] = DatumGetInt64(SPI_getbinval(tup, td, 1, &isnull));
				team[k] = DatumGetInt32(SPI_getbinval(tup, td, 2, &isnull));
				wait[k] = DatumGetFloat8(SPI_getbinval(tup, td, 3, &isnull));
			}
			/* in the order the statement returned them, as an SQL sum adds */
			count_placed(team, wait, nconfirmed);
		}
		qsort(confirmed, nconfirmed, sizeof(int64), cmp_int64);

		/* allocations, held slots and agents' notices for those only */
		for (i = 0; i < st->njobs; i++)
		{
			GsJob	   *j = &st->jobs[i];

			if (!j->placed)
				continue;
			if (!int8_in_sorted(confirmed, nconfirmed, j->id))
			{
				j->placed = false;
				dec->placed--;
				dec->workers_placed -= j->workers;
				continue;
			}
			for (w = 0; w < j->workers; w++)
			{
				GsAssign   *a = &j->assign[w];
				GsNode	   *n = &c->nodes[a->node];
				int			dv;

				cols_add(&al, j->id, w, n->id, devices_text(a), a->first_slice, a->nslices);
				for (dv = 0; dv < GS_MAX_GPUS; dv++)
					if (a->devmask & (UINT64_C(1) << dv))
					{
						int			sl;

						for (sl = a->first_slice; sl < a->first_slice + a->nslices; sl++)
						{
							if (nslot == slotcap)
							{
								slotcap *= 2;
								s_node = repalloc(s_node, sizeof(int32) * slotcap);
								s_slot = repalloc(s_slot, sizeof(int32) * slotcap);
								s_job = repalloc(s_job, sizeof(int64) * slotcap);
								s_worker = repalloc(s_worker, sizeof(int32) * slotcap);
							}
							s_node[nslot] = n->id;
							s_slot[nslot] = dv * GS_SLOTS_PER_DEVICE + sl;
							s_job[nslot] = j->id;
							s_worker[nslot++] = w;
						}
					}
				if (!seen[a->node])
				{
					char		chan[64];
					char		payload[128];

					seen[a->node] = true;
					snprintf(chan, sizeof(chan), "gangsched_node_%d", n->id);
					snprintf(payload, sizeof(payload), "{\"event\":\"start\",\"job\":" INT64_FORMAT "}", j->id);
					Async_Notify(chan, payload);
				}
			}
			for (w = 0; w < j->workers; w++)
				seen[j->assign[w].node] = false;
		}
	}
	if (al.n > 0)
		bulk_allocations(&al, p_job, np, now);
	if (nslot > 0)
	{
		GsBulk	   *b = gs_bulk_begin("held_slots");
		AttrNumber	a_node = gs_bulk_attnum(b, "node_id"),
					a_slot = gs_bulk_attnum(b, "slot"),
					a_job = gs_bulk_attnum(b, "job"),
					a_worker = gs_bulk_attnum(b, "worker");
		int			k;

		for (k = 0; k < nslot; k++)
		{
			TupleTableSlot *ts = gs_bulk_next(b);

			ts->tts_values[a_node - 1] = Int32GetDatum(s_node[k]);
			ts->tts_isnull[a_node - 1] = false;
			ts->tts_values[a_slot - 1] = Int32GetDatum(s_slot[k]);
			ts->tts_isnull[a_slot - 1] = false;
			ts->tts_values[a_job - 1] = Int64GetDatum(s_job[k]);
			ts->tts_isnull[a_job - 1] = false;
			ts->tts_values[a_worker - 1] = Int32GetDatum(s_worker[k]);
			ts->tts_isnull[a_worker - 1] = false;
		}
		gs_bulk_end(b);
	}
	if (nw > 0)
	{
		Oid			types[2] = {INT8ARRAYOID, TEXTARRAYOID};
		Datum		values[2];

		values[0] = int8_array(w_job, nw);
		values[1] = text_array(w_reason, nw);
		exec_args("UPDATE gangsched.gangs g SET reason = u.reason"
				  "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(job, reason)"
				  " WHERE g.id OPERATOR(pg_catalog.=) u.job",
				  2, types, values, SPI_OK_UPDATE);
	}
	/*
	 * A refused preemption is logged when a job's reason first says so, not
	 * every round and not each time the numbers in it change.
	 */
	if (nr > 0)
	{
		Oid			types[4] = {INT8ARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, TEXTOID};
		Datum		values[4];

		values[0] = int8_array(r_job, nr);
		values[1] = text_array(r_text, nr);
		values[2] = TimestampTzGetDatum(now);
		values[3] = CStringGetTextDatum(gs_fair_preemption == GS_FAIR_INITIAL_SHARE ? "initial_share" : "final_share");
		exec_args("INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)"
				  "SELECT $3, 'preemption refused', g.id, g.team_id, u.reason,"
				  "       pg_catalog.jsonb_build_object('fair_preemption', $4)"
				  "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(job, reason)"
				  "  JOIN gangsched.gangs g ON g.id OPERATOR(pg_catalog.=) u.job",
				  4, types, values, SPI_OK_INSERT);
	}
	if (nx > 0)
	{
		Oid			types[4] = {INT8ARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, INT4OID};
		Datum		values[4];

		values[0] = int8_array(x_job, nx);
		values[1] = text_array(x_reason, nx);
		values[2] = TimestampTzGetDatum(now);
		values[3] = Int32GetDatum(gs_default_queue_timeout_s);
		exec_args("WITH e AS ("
				  "  UPDATE gangsched.gangs g"
				  "     SET state = 'expired', finished_at = $3,"
				  "         reason = 'queue timeout of '"
				  "                  OPERATOR(pg_catalog.||)"
				  "                  COALESCE(g.queue_timeout, pg_catalog.make_interval(secs => $4))::pg_catalog.text"
				  "                  OPERATOR(pg_catalog.||) ' passed while waiting: '"
				  "                  OPERATOR(pg_catalog.||) COALESCE(u.reason, g.reason, 'not yet considered by a round')"
				  "    FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(job, reason)"
				  "   WHERE g.id OPERATOR(pg_catalog.=) u.job AND g.state OPERATOR(pg_catalog.=) 'pending'"
				  "  RETURNING g.id, g.team_id, g.reason)"
				  "INSERT INTO gangsched.events (at, kind, job, team_id, reason)"
				  "SELECT $3, 'expired', e.id, e.team_id, e.reason FROM e",
				  4, types, values, SPI_OK_INSERT);
	}
	if (dec->nominated > 0)
		write_nominations(st, dec, now);
	/* a 'reserved' event when the reservation is new or its reason changed */
	if (dec->reserved != NULL &&
		(!dec->reserved->has_old_reason ||
		 dec->reserved->old_reason_hash != reason_hash(dec->reserved->reason)))
	{
		Oid			types[4] = {INT8OID, INT4OID, TEXTOID, TIMESTAMPTZOID};
		Datum		values[4];

		values[0] = Int64GetDatum(dec->reserved->id);
		values[1] = Int32GetDatum(dec->reserved->team);
		values[2] = CStringGetTextDatum(dec->reserved->reason);
		values[3] = TimestampTzGetDatum(now);
		exec_args("INSERT INTO gangsched.events (at, kind, job, team_id, reason)"
				  " VALUES ($4, 'reserved', $1, $2, $3)", 4, types, values, SPI_OK_INSERT);
	}
}

/* ---- run_round -------------------------------------------------------- */

PG_FUNCTION_INFO_V1(gs_run_round);
Datum
gs_run_round(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[9];
	bool		nulls[9] = {0};
	instr_time	start,
				dur;
	MemoryContext roundcxt,
				oldcxt;
	TimestampTz now = gs_now();
	int			expired = 0,
				requeued = 0,
				killed = 0;
	GsDecision	dec = {0};
	char		note[256];
	int			save_nestlevel;

	/* a round changes every team's jobs: operators (and the worker) only */
	gs_require_operator("run a scheduling round");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	INSTR_TIME_SET_CURRENT(start);

	/*
	 * A standby cannot write (nor take the round's lock): say so instead of
	 * failing; the primary's worker runs the rounds.
	 */
	if (RecoveryInProgress())
	{
		values[0] = BoolGetDatum(false);
		for (int i = 1; i < 7; i++)
			values[i] = Int32GetDatum(0);
		values[7] = Float8GetDatum(0);
		values[8] = CStringGetTextDatum("the server is a standby (in recovery): rounds run on the primary");
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
	}

	gs_require_catalog_version("run a scheduling round");
	if (!gs_try_round_lock())
	{
		values[0] = BoolGetDatum(false);
		for (int i = 1; i < 7; i++)
			values[i] = Int32GetDatum(0);
		values[7] = Float8GetDatum(0);
		values[8] = CStringGetTextDatum("another round holds the lock; this one did nothing");
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
	}

	/*
	 * The round's queries run under the fixed search_path (no schema a
	 * tenant can create objects in) and without JIT (they are short; JIT
	 * would cost more than it saves), both in one GUC nest level undone
	 * below (an error undoes it with the transaction).
	 */
	save_nestlevel = gs_fix_search_path();
	gs_round_lock_timeout();
	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);

	roundcxt = AllocSetContextCreate(CurrentMemoryContext, "gangsched round", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(roundcxt);
	SPI_connect();
	{
		GsState    *st;
		instr_time	t0,
					t1,
					t2,
					t3,
					t4;

		INSTR_TIME_SET_CURRENT(t0);
		exec_args("SELECT gangsched._mark_silent_nodes()", 0, NULL, NULL, SPI_OK_SELECT);
		requeued = requeue_unstarted(gs_now());
		killed = kill_overdue();
		INSTR_TIME_SET_CURRENT(t1);
		st = gs_load_state();

		/*
		 * The clock rule: the round's decisions are stamped after every
		 * snapshot they were read from, so never earlier than a submission,
		 * a release or a finish they saw (gs_now() is the clock, not the
		 * transaction's start).
		 */
		now = gs_now();
		st->now = now;
		st->load_running = gs_load_running;
		INSTR_TIME_SET_CURRENT(t2);
		gs_mark_expiring(st, now, gs_default_queue_timeout_s);
		gs_decide(st, gs_schedule_settings(), &dec);
		expired = dec.expiring;
		INSTR_TIME_SET_CURRENT(t3);
		write_decisions(st, &dec, now);

		/*
		 * The events' counts (75_metrics.sql) are folded into the counters
		 * outside the round: the worker folds them in a transaction of its
		 * own after each round it ran. A round folds them only when they
		 * have piled up past GS_FOLD_BACKSTOP rows (by the statistics'
		 * count: rounds driven by pg_cron or by hand, with no worker
		 * folding after them), so they stay bounded.
		 */
		exec_args("SELECT gangsched._metrics_fold()"
				  " WHERE pg_catalog.pg_stat_get_live_tuples('gangsched.metric_deltas'::pg_catalog.regclass)"
				  " OPERATOR(pg_catalog.>) " CppAsString2(GS_FOLD_BACKSTOP),
				  0, NULL, NULL, SPI_OK_SELECT);
		INSTR_TIME_SET_CURRENT(t4);
		INSTR_TIME_SUBTRACT(t4, t3);
		INSTR_TIME_SUBTRACT(t3, t2);
		INSTR_TIME_SUBTRACT(t2, t1);
		INSTR_TIME_SUBTRACT(t1, t0);
		elog(DEBUG1, "gangsched round: time rules %.1f ms, load %.1f ms, decide %.1f ms, write %.1f ms",
			 INSTR_TIME_GET_MILLISEC(t1), INSTR_TIME_GET_MILLISEC(t2),
			 INSTR_TIME_GET_MILLISEC(t3), INSTR_TIME_GET_MILLISEC(t4));
		if (dec.placed > 0 || expired > 0 || requeued > 0)
		{
			char		payload[160];

			snprintf(payload, sizeof(payload),
					 "{\"event\":\"round\",\"placed\":%d,\"expired\":%d,\"requeued\":%d}",
					 dec.placed, expired, requeued);
			Async_Notify("gangsched_events", payload);
		}
		if (dec.reserved)
			snprintf(note, sizeof(note), "capacity kept for job " INT64_FORMAT " (first in line, does not fit yet)",
					 dec.reserved->id);
		else
			note[0] = '\0';
	}
	SPI_finish();
	gs_restore_search_path(save_nestlevel);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(roundcxt);

	INSTR_TIME_SET_CURRENT(dur);
	INSTR_TIME_SUBTRACT(dur, start);
	values[0] = BoolGetDatum(true);
	values[1] = Int32GetDatum(dec.considered);
	values[2] = Int32GetDatum(dec.placed);
	values[3] = Int32GetDatum(dec.workers_placed);
	values[4] = Int32GetDatum(dec.preempted);
	values[5] = Int32GetDatum(expired);
	values[6] = Int32GetDatum(requeued + killed);
	values[7] = Float8GetDatum(INSTR_TIME_GET_MILLISEC(dur));
	gs_metrics_note_round(INSTR_TIME_GET_MILLISEC(dur), gs_now());
	if (note[0])
		values[8] = CStringGetTextDatum(note);
	else
		nulls[8] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* ---- why_pending ------------------------------------------------------ */

PG_FUNCTION_INFO_V1(gs_why_pending);
Datum
gs_why_pending(PG_FUNCTION_ARGS)
{
	int64		job_id = PG_GETARG_INT64(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Tuplestorestate *ts;
	TupleDesc	tupdesc;
	MemoryContext per_query,
				oldcxt;
	char	   *state = NULL;
	char	   *stored_reason = NULL;
	char	   *nvictims = NULL;
	char	   *deadline = NULL;
	List	   *rows = NIL;
	ListCell   *lc;
	int			save_nestlevel;

	gs_require_catalog_version("explain a pending job");
	InitMaterializedSRF(fcinfo, 0);
	ts = rsinfo->setResult;
	tupdesc = rsinfo->setDesc;
	per_query = rsinfo->econtext->ecxt_per_query_memory;

	/* one call (materialized): the fixed search_path from here to SPI_finish */
	save_nestlevel = gs_fix_search_path();
	SPI_connect();
	{
		Oid			types[1] = {INT8OID};
		Datum		vals[1] = {Int64GetDatum(job_id)};

		/* its own victims, and earlier victims whose rest it holds */
		exec_args("WITH w AS ("
				  "  SELECT v.id, v.preempt_deadline FROM gangsched.gangs v"
				  "   WHERE v.state OPERATOR(pg_catalog.=) 'preempting'"
				  "     AND (v.preempted_for OPERATOR(pg_catalog.=) $1"
				  "          OR v.id OPERATOR(pg_catalog.=) ANY ("
				  "               SELECT hs.job FROM gangsched.holds h"
				  "                CROSS JOIN LATERAL pg_catalog.unnest(h.devices) d(device)"
				  "                CROSS JOIN LATERAL pg_catalog.generate_series(h.first_slice,"
				  "                     h.first_slice OPERATOR(pg_catalog.+) h.slices OPERATOR(pg_catalog.-) 1) x(slice)"
				  "                 JOIN gangsched.held_slots hs ON hs.node_id OPERATOR(pg_catalog.=) h.node_id"
				  "                  AND hs.slot OPERATOR(pg_catalog.=)"
				  "                      ((d.device OPERATOR(pg_catalog.*) 8) OPERATOR(pg_catalog.+) x.slice)"
				  "                WHERE h.job OPERATOR(pg_catalog.=) $1)))"
				  "SELECT g.state, g.reason,"
				  "       (SELECT pg_catalog.count(*) FROM w),"
				  "       (SELECT pg_catalog.max(w.preempt_deadline) FROM w)"
				  "  FROM gangsched.gangs g WHERE g.id OPERATOR(pg_catalog.=) $1", 1, types, vals, SPI_OK_SELECT);
		if (SPI_processed == 0)
			ereport(ERROR, (errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
							errmsg("job " INT64_FORMAT " does not exist", job_id),
							errhint("See gangsched.jobs for the job ids.")));
		oldcxt = MemoryContextSwitchTo(per_query);
		state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		stored_reason = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		nvictims = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
		deadline = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);
		MemoryContextSwitchTo(oldcxt);
	}

	if (strcmp(state, "nominated") == 0)
	{
		oldcxt = MemoryContextSwitchTo(per_query);
		if (deadline != NULL)
			rows = lappend(rows, list_make2(psprintf("waiting for victims"),
											psprintf("waiting for %s job%s to release capacity; the last grace deadline is %s",
													 nvictims, strcmp(nvictims, "1") == 0 ? "" : "s", deadline)));
		else
			rows = lappend(rows, list_make2(psprintf("waiting for victims"),
											psprintf("its victims have let go; the next round or release places it on the capacity held for it")));
		MemoryContextSwitchTo(oldcxt);
	}
	else if (strcmp(state, "pending") != 0)
	{
		oldcxt = MemoryContextSwitchTo(per_query);
		rows = lappend(rows, list_make2(psprintf("not pending"),
										psprintf("the job is %s%s%s", state,
												 stored_reason ? ": " : "", stored_reason ? stored_reason : "")));
		MemoryContextSwitchTo(oldcxt);
	}
	else
	{
		GsState    *st = gs_load_state();
		GsDecision	dec;
		GsJob	   *target = NULL;
		int			i,
					pos;

		st->now = gs_now();
		st->load_running = gs_load_running;

		/* the next round, simulated: same order, same placements, no writes */
		gs_mark_expiring(st, gs_now(), gs_default_queue_timeout_s);
		gs_decide(st, gs_schedule_settings(), &dec);
		for (i = 0; i < st->njobs; i++)
			if (st->jobs[i].id == job_id)
				target = &st->jobs[i];
		pos = gs_order_position(dec.order, job_id);
		oldcxt = MemoryContextSwitchTo(per_query);
		if (target == NULL)
			rows = lappend(rows, list_make2(psprintf("not pending"), psprintf("the job changed state")));
		else if (target->expiring)
			rows = lappend(rows, list_make2(psprintf("queue timeout"),
											psprintf("its queue timeout has passed: the next round expires it (%s)",
													 target->reason ? target->reason : "it fits now")));
		else if (target->quota_blocked)
			rows = lappend(rows, list_make2(psprintf("quota"), psprintf("%s", target->reason)));
		else if (target->nominated)
			rows = lappend(rows, list_make2(psprintf("preemption"),
											psprintf("the next round preempts %d job%s for it (%s) and holds their capacity for it",
													 target->nvictims, target->nvictims == 1 ? "" : "s", target->trigger)));
		else if (target->placed)
			rows = lappend(rows, list_make2(psprintf("fits now"),
											psprintf("the next round places it (%d of %d in queue order)",
													 pos + 1, st->njobs)));
		else
		{
			GsWhy	   *w = &dec.why[target - st->jobs];
			char	   *text = gs_why_text(st->cluster, target, w, true);
			const char *reason;

			switch (w->kind)
			{
				case GS_WHY_NO_NODE:
					reason = "no node";
					break;
				case GS_WHY_CAPACITY:
					reason = "capacity";
					break;
				case GS_WHY_TOPOLOGY:
				default:
					reason = "topology";
					break;
			}
			rows = lappend(rows, list_make2(psprintf("%s", reason), psprintf("%s", text)));
			if (target->preempt_refused != NULL)
				rows = lappend(rows, list_make2(psprintf("preemption refused"),
												psprintf("%s", target->preempt_refused)));
			/* the constraints that narrow where it may go */
			{
				GsCluster  *c = st->cluster;
				int			k,
							cached = 0,
							cached_up = 0,
							model_nodes = 0,
							not_up = 0;
				uint64_t	elig = gs_eligible_pools(c, target);

				for (k = 0; k < c->nnodes; k++)
				{
					GsNode	   *n = &c->nodes[k];
					bool		in_pool = n->pool < GS_MAX_POOLS && (elig & (UINT64_C(1) << n->pool));
					bool		model_ok = target->gpus <= 0 || target->model < 0 || n->model == target->model;

					if (!in_pool || !model_ok)
						continue;
					if (target->model >= 0 && target->gpus > 0)
						model_nodes++;
					if (n->state != GS_NODE_UP)
						not_up++;
					if (target->locality != GS_LOC_NONE && target->dataset >= 0 &&
						c->dataset_nodes[target->dataset][k])
					{
						cached++;
						if (n->state == GS_NODE_UP)
							cached_up++;
					}
				}
				if (target->locality != GS_LOC_NONE && target->dataset >= 0)
					rows = lappend(rows, list_make2(psprintf("locality"),
													psprintf("%s locality: only the %d eligible node%s caching dataset %s may take it (%d up)%s",
															 target->locality == GS_LOC_REQUIRED ? "required" : "preferred",
															 cached, cached == 1 ? "" : "s", c->datasets[target->dataset], cached_up,
															 target->locality == GS_LOC_REQUIRED ? "; submit with locality => 'preferred' to allow other nodes" : "")));
				if (target->model >= 0 && target->gpus > 0)
					rows = lappend(rows, list_make2(psprintf("gpu model"),
													psprintf("only the %d eligible node%s with %s devices may take it; leave gpu_model unset to allow any",
															 model_nodes, model_nodes == 1 ? "" : "s", c->models[target->model])));
				if (not_up > 0)
					rows = lappend(rows, list_make2(psprintf("nodes not up"),
													psprintf("%d node%s it could use %s down or draining; they take no new work until an operator sets them up",
															 not_up, not_up == 1 ? "" : "s", not_up == 1 ? "is" : "are")));
			}
			if (dec.reserved == target)
				rows = lappend(rows, list_make2(psprintf("first in line"),
												psprintf("the starvation guard keeps the capacity it waits for: later jobs only backfill around it")));
			else if (dec.reserved != NULL)
				rows = lappend(rows, list_make2(psprintf("capacity held for another job"),
												psprintf("job " INT64_FORMAT " is first in line and capacity is being kept for it",
														 dec.reserved->id)));
			if (gs_queue_order == GS_ORDER_FAIR)
			{
				int			ahead = gs_order_teams_ahead(dec.order, target);

				if (ahead > 0)
					rows = lappend(rows, list_make2(psprintf("fair share"),
													psprintf("%d team%s with a lower dominant share %s tried first; team %s holds a dominant share of %.3f (weight %g)%s",
															 ahead, ahead == 1 ? "" : "s", ahead == 1 ? "is" : "are",
															 st->cluster->teams[target->tix].name,
															 gs_dominant_share(st->cluster, target->tix),
															 st->cluster->teams[target->tix].weight,
															 target->try_borrowing ? "; it would borrow, so guaranteed work of every team goes first" : "")));
			}
			if (target->las_queue >= 0)
				rows = lappend(rows, list_make2(psprintf("las queue"),
												psprintf("team %s orders its jobs by least attained service: this job has held %.0f GPU-seconds, queue %d of %d%s",
														 st->cluster->teams[target->tix].name, target->attained,
														 target->las_queue, gs_las_nthresholds + 1,
														 target->las_promoted ? " (promoted to queue 0: it waited longer than gangsched.las_promote_factor times its attained service)" :
														 target->las_queue > 0 ? " (later queues go after earlier ones of the same priority)" : "")));
			if (pos > 0)
				rows = lappend(rows, list_make2(psprintf("queue order"),
												psprintf("%d job%s before it (priority %d, then %s)",
														 pos, pos == 1 ? " comes" : "s come", target->priority,
														 target->las_queue >= 0 ? "LAS queue, then submit order" : "submit order")));
		}
		MemoryContextSwitchTo(oldcxt);
	}
	SPI_finish();
	gs_restore_search_path(save_nestlevel);

	foreach(lc, rows)
	{
		List	   *r = lfirst(lc);
		Datum		v[2];
		bool		n[2] = {false, false};

		v[0] = CStringGetTextDatum(linitial(r));
		v[1] = CStringGetTextDatum(lsecond(r));
		tuplestore_putvalues(ts, tupdesc, v, n);
	}
	return (Datum) 0;
}

/* ---- the queue as the next round would try it ------------------------- */

PG_FUNCTION_INFO_V1(gs_queue);
Datum
gs_queue(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Tuplestorestate *ts;
	TupleDesc	tupdesc;
	GsState    *st;
	GsDecision	dec;
	int			k,
				n,
				save_nestlevel;

	gs_require_catalog_version("show the queue");
	InitMaterializedSRF(fcinfo, 0);
	ts = rsinfo->setResult;
	tupdesc = rsinfo->setDesc;
	/* one call (materialized): the fixed search_path from here to SPI_finish */
	save_nestlevel = gs_fix_search_path();
	SPI_connect();
	st = gs_load_state();
	st->now = gs_now();
	st->load_running = gs_load_running;
	gs_mark_expiring(st, gs_now(), gs_default_queue_timeout_s);
	gs_decide(st, gs_schedule_settings(), &dec);
	n = gs_order_count(dec.order);
	for (k = 0; k < n; k++)
	{
		GsJob	   *j = gs_order_at(dec.order, k);
		Datum		v[8];
		bool		nl[8] = {false, false, false, false, false, false, false, false};

		if (j->expiring)
			continue;
		v[0] = Int32GetDatum(k + 1);
		v[1] = Int64GetDatum(j->id);
		v[2] = Float8GetDatum(j->tried_at >= 0 ? j->share_at_try : gs_dominant_share(st->cluster, j->tix));
		v[3] = BoolGetDatum(j->try_borrowing || j->quota_blocked);
		v[4] = BoolGetDatum(j->placed);
		if (j->placed)
			v[5] = CStringGetTextDatum("fits now");
		else if (j->reason)
			v[5] = CStringGetTextDatum(j->reason);
		else
			nl[5] = true;
		/* las teams' jobs: their LAS queue and attained service (GPU-seconds) */
		if (j->las_queue >= 0)
		{
			v[6] = Int32GetDatum(j->las_queue);
			v[7] = Float8GetDatum(j->attained);
		}
		else
			nl[6] = nl[7] = true;
		tuplestore_putvalues(ts, tupdesc, v, nl);
	}
	SPI_finish();
	gs_restore_search_path(save_nestlevel);
	return (Datum) 0;
}
