/*
 * round.c — gangsched.run_round() and gangsched.queue(): the SPI edges
 * around the in-memory scheduler (why_pending() is in why.c).
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

/* An array of cap elements of elem bytes: p grown, or a new one. */
static void *
grow(void *p, Size elem, int cap)
{
	return p ? repalloc(p, elem * cap) : palloc(elem * cap);
}

/* One row per worker of placed or nominated gangs: allocations, holds. */
typedef struct Cols
{
	int			n,
				cap;
	int64	   *job;
	int32	   *worker;
	int32	   *node;			/* nodes.id */
	uint64	   *devmask;		/* devices used (bit = device) */
	int32	   *first_slice;
	int32	   *slices;
} Cols;

/* The rows of gang j's workers, as its assignment says. */
static void
cols_add_gang(Cols *c, const GsCluster *cl, const GsJob *j)
{
	int			w;

	for (w = 0; w < j->workers; w++)
	{
		const GsAssign *a = &j->assign[w];

		if (c->n == c->cap)
		{
			c->cap = Max(64, c->cap * 2);
			c->job = grow(c->job, sizeof(int64), c->cap);
			c->worker = grow(c->worker, sizeof(int32), c->cap);
			c->node = grow(c->node, sizeof(int32), c->cap);
			c->devmask = grow(c->devmask, sizeof(uint64), c->cap);
			c->first_slice = grow(c->first_slice, sizeof(int32), c->cap);
			c->slices = grow(c->slices, sizeof(int32), c->cap);
		}
		c->job[c->n] = j->id;
		c->worker[c->n] = w;
		c->node[c->n] = cl->nodes[a->node].id;
		c->devmask[c->n] = a->devmask;
		c->first_slice[c->n] = a->first_slice;
		c->slices[c->n] = a->nslices;
		c->n++;
	}
}

/* Job ids with a text each (a reason, a refusal), at most cap of them. */
typedef struct JobTexts
{
	int			n;
	int64	   *job;
	char	  **text;
} JobTexts;

static void
job_texts_init(JobTexts *t, int cap)
{
	t->n = 0;
	t->job = palloc(sizeof(int64) * Max(cap, 1));
	t->text = palloc(sizeof(char *) * Max(cap, 1));
}

static void
job_texts_add(JobTexts *t, int64 job, const char *text)
{
	t->job[t->n] = job;
	t->text[t->n++] = (char *) text;
}

/*
 * int8_array(), int4_array(), bool_array(), float8_array(): a C array as an
 * array datum of its element type, for the statements' array parameters.
 */
#define GS_ARRAY_BUILDER(fn, ctype, to_datum, elemtype, elemlen, elembyval, elemalign) \
static Datum \
fn(ctype *v, int n) \
{ \
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1)); \
 \
	for (int i = 0; i < n; i++) \
		d[i] = to_datum(v[i]); \
	return PointerGetDatum(construct_array(d, n, elemtype, elemlen, elembyval, elemalign)); \
}

GS_ARRAY_BUILDER(int8_array, int64, Int64GetDatum, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)
GS_ARRAY_BUILDER(int4_array, int32, Int32GetDatum, INT4OID, 4, true, TYPALIGN_INT)
GS_ARRAY_BUILDER(bool_array, bool, BoolGetDatum, BOOLOID, 1, true, TYPALIGN_CHAR)
GS_ARRAY_BUILDER(float8_array, float8, Float8GetDatum, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)

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

/* The second column of the statement just run: a booking is not over. */
static bool
booking_live(void)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);

	return !isnull && DatumGetBool(d);
}

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


/*
 * Jobs past their time limit get the preemption signal with their grace;
 * those past that deadline are killed and fail (sql/src/72_time.sql).
 * Returns how many were killed.
 */
static int
enforce_time_limits(void)
{
	bool		isnull;
	Datum		d;

	exec_args("SELECT gangsched._enforce_time_limits()", 0, NULL, NULL, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt32(d);
}

/* ---- the placements' counts for the metrics -------------------------- */

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

/* ---- writing decisions ------------------------------------------------ */

/* hashtext() of a C string, to compare with the stored reason's hash. */
static int32
reason_hash(const char *s)
{
	return DatumGetInt32(hash_any((const unsigned char *) s, (int) strlen(s)));
}

/* The devices of devmask as an int4[] datum, ascending. */
static Datum
devices_array(uint64 devmask)
{
	Datum		devs[GS_MAX_GPUS];
	int			dv,
				nd = 0;

	for (dv = 0; dv < GS_MAX_GPUS; dv++)
		if (devmask & (UINT64_C(1) << dv))
			devs[nd++] = Int32GetDatum(dv);
	return PointerGetDatum(construct_array(devs, nd, INT4OID, 4, true, TYPALIGN_INT));
}

/* The devices of devmask as int4[] text, '{0,1,...}' (a holds row's, cast in SQL). */
static char *
devices_text(uint64 devmask)
{
	StringInfoData s;
	int			dv;
	bool		first = true;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (dv = 0; dv < GS_MAX_GPUS; dv++)
		if (devmask & (UINT64_C(1) << dv))
		{
			appendStringInfo(&s, first ? "%d" : ",%d", dv);
			first = false;
		}
	appendStringInfoChar(&s, '}');
	return s.data;
}

/* The index of id in the ascending array v[0 .. n - 1], -1 when absent. */
static int
int8_find_sorted(const int64 *v, int n, int64 id)
{
	int			lo = 0,
				hi = n - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (v[mid] == id)
			return mid;
		if (v[mid] < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/* Column col (int8) of the last statement's rows, in their order. */
static int64 *
spi_int8_column(int col, int *n)
{
	int64	   *v;
	int			k;

	*n = (int) SPI_processed;
	v = palloc(sizeof(int64) * Max(*n, 1));
	for (k = 0; k < *n; k++)
	{
		bool		isnull;

		v[k] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, col, &isnull));
	}
	return v;
}

/*
 * The nodes of gang j (indexes into c->nodes), each once, in the order of
 * its workers; seen[] (one flag per node, all false) is left all false.
 */
static int
gang_nodes(const GsJob *j, bool *seen, int32 *out)
{
	int			w,
				n = 0;

	for (w = 0; w < j->workers; w++)
		if (!seen[j->assign[w].node])
		{
			seen[j->assign[w].node] = true;
			out[n++] = j->assign[w].node;
		}
	for (w = 0; w < n; w++)
		seen[out[w]] = false;
	return n;
}

/* ",\"replicas\":…" for elastic gangs, in placed and nominated events (docs/elastic.md). */
static void
append_elastic_detail(StringInfo det, const GsJob *j)
{
	int			unit = j->group_size * j->stages;

	if (gs_job_elastic(j))
		appendStringInfo(det, ",\"replicas\":%d,\"min_replicas\":%d,\"max_replicas\":%d",
						 j->workers / unit, j->min_workers / unit, j->max_workers / unit);
}

/* ",\"las_queue\":…" for las teams' jobs, in placed and nominated events. */
static void
append_las_detail(StringInfo det, const GsJob *j)
{
	if (j->las_queue >= 0)
		appendStringInfo(det, ",\"las_queue\":%d,\"attained_gpu_seconds\":%.1f",
						 j->las_queue, j->attained);
}

/* ---- nominations ------------------------------------------------------ */

/*
 * One entry per victim gang among a nomination's victim entries
 * (docs/elastic.md#shrinking): a gang preempted whole is its own entry (its
 * replicas' entries are skipped); a gang shrunk is the last of its replicas
 * taken, whose part_from is the size it shrinks to.
 */
static bool
victim_last_entry(const GsRunning *v)
{
	if (v->gang == NULL)
		return true;			/* a whole gang, or a split gang's own entry (taken last) */
	if (v->gang->taken)
		return false;			/* preempted whole: its own entry stands for it */
	return v->chain_next == NULL || !v->chain_next->taken;
}

/* The 'nominated' event's detail: trigger, cost, victims, the rest it waits for. */
static char *
nomination_detail(GsCluster *c, const GsJob *j)
{
	StringInfoData det;
	double		stranded = 0;
	int			k,
				n;

	initStringInfo(&det);
	appendStringInfoString(&det, "{\"trigger\":");
	escape_json(&det, j->trigger);
	appendStringInfo(&det, ",\"lost_gpu_seconds\":%.1f,\"victims\":[", j->victim_cost);
	for (k = 0, n = 0; k < j->nvictims; k++)
		if (victim_last_entry(j->victims[k]))
			appendStringInfo(&det, "%s" INT64_FORMAT, n++ ? "," : "", j->victims[k]->id);
	appendStringInfoString(&det, "]");
	/* the elastic victims shrunk rather than preempted: the workers each keeps */
	for (k = 0, n = 0; k < j->nvictims; k++)
		if (victim_last_entry(j->victims[k]) && j->victims[k]->gang != NULL)
			appendStringInfo(&det, "%s{\"job\":" INT64_FORMAT ",\"workers\":%d}",
							 n++ ? "," : ",\"shrinks\":[", j->victims[k]->id, j->victims[k]->part_from);
	if (n > 0)
		appendStringInfoChar(&det, ']');
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
	append_las_detail(&det, j);
	append_elastic_detail(&det, j);
	appendStringInfoChar(&det, '}');
	return det.data;
}

/*
 * The nominated jobs' rows and events, "AND g.state = 'pending'" and the
 * shape the victims were chosen for (see update_placed); the ids of the
 * jobs nominated indeed, ascending.
 */
static int64 *
update_nominated(GsState *st, GsDecision *dec, TimestampTz now, int *nconfirmed)
{
	int			cap = Max(dec->nominated, 1);
	int64	   *n_job = palloc(sizeof(int64) * cap);
	bool	   *n_borrowed = palloc(sizeof(bool) * cap);
	char	  **n_reason = palloc(sizeof(char *) * cap);
	char	  **n_detail = palloc(sizeof(char *) * cap);
	int32	   *n_workers = palloc(sizeof(int32) * cap);
	float8	   *n_gpus = palloc(sizeof(float8) * cap);
	Oid			types[7] = {INT8ARRAYOID, BOOLARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID,
	INT4ARRAYOID, FLOAT8ARRAYOID};
	Datum		values[7];
	int			nn = 0,
				i;

	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];

		if (!j->nominated)
			continue;
		n_job[nn] = j->id;
		n_borrowed[nn] = j->borrowed;
		n_reason[nn] = (char *) j->reason;
		n_workers[nn] = j->workers;
		n_gpus[nn] = j->gpus;
		n_detail[nn++] = nomination_detail(st->cluster, j);
	}
	values[0] = int8_array(n_job, nn);
	values[1] = bool_array(n_borrowed, nn);
	values[2] = text_array(n_reason, nn);
	values[3] = text_array(n_detail, nn);
	values[4] = TimestampTzGetDatum(now);
	values[5] = int4_array(n_workers, nn);
	values[6] = float8_array(n_gpus, nn);
	exec_args("WITH n AS ("
			  "  UPDATE gangsched.gangs g SET state = 'nominated', borrowed = u.borrowed, reason = u.reason,"
			  "         workers = u.workers"
			  "    FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2),"
			  "                    pg_catalog.unnest($3), pg_catalog.unnest($4),"
			  "                    pg_catalog.unnest($6), pg_catalog.unnest($7))"
			  "         AS u(job, borrowed, reason, detail, workers, gpus)"
			  "   WHERE g.id OPERATOR(pg_catalog.=) u.job AND g.state OPERATOR(pg_catalog.=) 'pending'"
			  "     AND u.workers OPERATOR(pg_catalog.<=) g.workers AND g.f_gpus OPERATOR(pg_catalog.=) u.gpus"
			  "     AND u.workers OPERATOR(pg_catalog.>=) COALESCE(g.min_replicas OPERATOR(pg_catalog.*) g.group_size"
			  "                                           OPERATOR(pg_catalog.*) g.stages, g.workers)"
			  "  RETURNING g.id, g.team_id, u.reason, u.detail),"
			  " e AS ("
			  "  INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)"
			  "  SELECT $5, 'nominated', n.id, n.team_id, n.reason, n.detail::pg_catalog.jsonb FROM n"
			  "   ORDER BY n.id"
			  "  RETURNING job)"
			  "SELECT job FROM e ORDER BY job",
			  7, types, values, SPI_OK_SELECT);
	return spi_int8_column(1, nconfirmed);
}

/* The capacity held for nominated jobs: one gangsched.holds row per worker. */
static void
write_holds(const Cols *h)
{
	Oid			types[6] = {INT8ARRAYOID, INT4ARRAYOID, INT4ARRAYOID, TEXTARRAYOID,
	INT4ARRAYOID, INT4ARRAYOID};
	Datum		values[6];
	char	  **devices = palloc(sizeof(char *) * Max(h->n, 1));
	int			k;

	for (k = 0; k < h->n; k++)
		devices[k] = devices_text(h->devmask[k]);
	values[0] = int8_array(h->job, h->n);
	values[1] = int4_array(h->worker, h->n);
	values[2] = int4_array(h->node, h->n);
	values[3] = text_array(devices, h->n);
	values[4] = int4_array(h->first_slice, h->n);
	values[5] = int4_array(h->slices, h->n);
	exec_args("INSERT INTO gangsched.holds (job, worker, node_id, devices, first_slice, slices, cpus, mem_gb, net_gbps)"
			  "SELECT u.job, u.worker, u.node, u.devices::pg_catalog.int4[], u.first_slice, u.slices,"
			  "       g.cpus, g.mem_gb, g.net_gbps"
			  "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3),"
			  "                  pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6))"
			  "       AS u(job, worker, node, devices, first_slice, slices)"
			  "  JOIN gangsched.gangs g ON g.id OPERATOR(pg_catalog.=) u.job",
			  6, types, values, SPI_OK_INSERT);
}

/*
 * The victims: 'preempting' with their grace deadline, their events, and
 * their nodes' agents told. v_job[k] is preempted for v_for[k]. The
 * events, like every event a round writes, in job order (here by
 * preemptor, then victim), not in the order the join's plan returns rows:
 * agents act on them in id order.
 */
static void
write_victims(int64 *v_job, int64 *v_for, char **v_trigger, int nv, TimestampTz now)
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
			  "    FROM v ORDER BY v.pfor, v.id RETURNING 1),"
	/*
	 * gangsched_preemptions_total counted here, one row per team, not by
	 * the events' row trigger (75_metrics.sql: 'preempting' events are
	 * written only by this statement)
	 */
			  " m AS ("
			  "  INSERT INTO gangsched.metric_deltas (name, team_id, label, value)"
			  "  SELECT 'preemptions', COALESCE(v.team_id, 0), '', pg_catalog.count(*)::pg_catalog.float8"
			  "    FROM v GROUP BY v.team_id RETURNING 1)"
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

/*
 * The elastic victims shrunk instead of preempted (docs/elastic.md#shrinking):
 * s_job[k] gives back its workers from s_to[k] on to s_for[k] by its grace
 * deadline (gangsched._shrink_start: the columns, the 'shrinking' events,
 * the agents' notices).
 */
static void
write_shrinks(int64 *s_job, int32 *s_to, int64 *s_for, int ns, TimestampTz now)
{
	Oid			types[6] = {INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID, INT4OID, INT4OID};
	Datum		values[6];

	if (ns == 0)
		return;
	values[0] = int8_array(s_job, ns);
	values[1] = int4_array(s_to, ns);
	values[2] = int8_array(s_for, ns);
	values[3] = TimestampTzGetDatum(now);
	values[4] = Int32GetDatum(gs_default_grace_s);
	values[5] = Int32GetDatum(gs_max_grace_s);
	exec_args("SELECT gangsched._shrink_start($1, $2, $3, $4, $5, $6)", 6, types, values, SPI_OK_SELECT);
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
	Cols		h = {0};
	int			vcap = Max(dec->preempted, 1);
	int64	   *v_job = palloc(sizeof(int64) * vcap);
	int64	   *v_for = palloc(sizeof(int64) * vcap);
	char	  **v_trigger = palloc(sizeof(char *) * vcap);
	int64	   *s_job = palloc(sizeof(int64) * vcap);
	int32	   *s_to = palloc(sizeof(int32) * vcap);
	int64	   *s_for = palloc(sizeof(int64) * vcap);
	int64	   *confirmed;
	int			nconfirmed,
				ns = 0,
				nv = 0,
				i,
				k;

	confirmed = update_nominated(st, dec, now, &nconfirmed);
	/* holds and victims of the confirmed nominations only */
	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];

		if (!j->nominated)
			continue;
		if (int8_find_sorted(confirmed, nconfirmed, j->id) < 0)
		{
			j->nominated = false;
			dec->nominated--;
			dec->preempted -= j->nvictim_gangs;
			continue;
		}
		cols_add_gang(&h, st->cluster, j);
		for (k = 0; k < j->nvictims; k++)
		{
			GsRunning  *v = j->victims[k];

			if (!victim_last_entry(v))
				continue;
			if (v->gang != NULL && ns < vcap)
			{
				/* shrunk to the first worker of the last replica taken */
				s_job[ns] = v->id;
				s_to[ns] = v->part_from;
				s_for[ns++] = j->id;
			}
			else if (v->gang == NULL && nv < vcap)
			{
				v_job[nv] = v->id;
				v_for[nv] = j->id;
				v_trigger[nv++] = (char *) j->trigger;
			}
		}
	}
	write_holds(&h);
	write_victims(v_job, v_for, v_trigger, nv, now);
	write_shrinks(s_job, s_to, s_for, ns, now);
}

/* ---- placements ------------------------------------------------------- */

/* Sets a column of a bulk-inserted row (src/bulk.c). */
static inline void
put(TupleTableSlot *ts, AttrNumber att, Datum v)
{
	ts->tts_values[att - 1] = v;
	ts->tts_isnull[att - 1] = false;
}

/* The columns of gangsched.allocations the round writes, in the order below. */
enum
{
	AL_ID, AL_JOB, AL_WORKER, AL_NODE, AL_TEAM, AL_DEVICES, AL_FIRST, AL_SLICES,
	AL_GPUS, AL_CPUS, AL_MEM, AL_NET, AL_BORROWED, AL_DURING, AL_NCOLS
};
static const char *const alloc_columns[AL_NCOLS] = {
	"id", "job", "worker", "node_id", "team_id", "devices", "first_slice", "slices",
	"gpus", "cpus", "mem_gb", "net_gbps", "borrowed", "during"
};

/* [now, infinity) as a tstzrange datum: the open allocations' "during". */
static Datum
open_range(TimestampTz now)
{
	TypeCacheEntry *rtc = lookup_type_cache(TSTZRANGEOID, TYPECACHE_RANGE_INFO);
	RangeBound	lower = {0},
				upper = {0};

	lower.val = TimestampTzGetDatum(now);
	lower.inclusive = true;
	lower.lower = true;
	upper.infinite = true;
	upper.lower = false;
	return RangeTypePGetDatum(make_range(rtc, &lower, &upper, false));
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
	Datum		during;
	GsBulk	   *b;
	AttrNumber	att[AL_NCOLS];

	values[0] = int8_array(jobs, njobs);
	exec_args("SELECT g.id, g.team_id, g.gpus, g.cpus, g.mem_gb, g.net_gbps, g.borrowed"
			  "  FROM gangsched.gangs g WHERE g.id OPERATOR(pg_catalog.=) ANY ($1) ORDER BY g.id",
			  1, types, values, SPI_OK_SELECT);
	tt = SPI_tuptable;
	ids = spi_int8_column(1, &nrows);
	during = open_range(now);

	b = gs_bulk_begin("allocations");
	for (k = 0; k < AL_NCOLS; k++)
		att[k] = gs_bulk_attnum(b, alloc_columns[k]);
	for (k = 0; k < al->n; k++)
	{
		TupleTableSlot *ts;
		int			row = int8_find_sorted(ids, nrows, al->job[k]);
		HeapTuple	jt;
		bool		isnull;

		if (row < 0)
			elog(ERROR, "gangsched round: placed job " INT64_FORMAT " vanished", al->job[k]);
		jt = tt->vals[row];
		ts = gs_bulk_next(b);
		put(ts, att[AL_ID], gs_bulk_identity(b, att[AL_ID]));
		put(ts, att[AL_JOB], Int64GetDatum(al->job[k]));
		put(ts, att[AL_WORKER], Int32GetDatum(al->worker[k]));
		put(ts, att[AL_NODE], Int32GetDatum(al->node[k]));
		put(ts, att[AL_TEAM], SPI_getbinval(jt, tt->tupdesc, 2, &isnull));
		put(ts, att[AL_DEVICES], devices_array(al->devmask[k]));
		put(ts, att[AL_FIRST], Int32GetDatum(al->first_slice[k]));
		put(ts, att[AL_SLICES], Int32GetDatum(al->slices[k]));
		put(ts, att[AL_GPUS], SPI_getbinval(jt, tt->tupdesc, 3, &isnull));
		put(ts, att[AL_CPUS], SPI_getbinval(jt, tt->tupdesc, 4, &isnull));
		put(ts, att[AL_MEM], SPI_getbinval(jt, tt->tupdesc, 5, &isnull));
		put(ts, att[AL_NET], SPI_getbinval(jt, tt->tupdesc, 6, &isnull));
		put(ts, att[AL_BORROWED], SPI_getbinval(jt, tt->tupdesc, 7, &isnull));
		put(ts, att[AL_DURING], during);
	}
	gs_bulk_end(b);
}

/*
 * The device slices of the placed gangs' workers, written like COPY: one
 * row per slice (slot = device * 8 + slice), straight from each worker's
 * devices bitmask. Nothing is written (nor the table opened) when no
 * worker holds a device.
 */
static void
bulk_held_slots(const Cols *al)
{
	GsBulk	   *b = NULL;
	AttrNumber	a_node = 0,
				a_slot = 0,
				a_job = 0,
				a_worker = 0;
	int			k,
				dv,
				sl;

	for (k = 0; k < al->n; k++)
		for (dv = 0; dv < GS_MAX_GPUS; dv++)
			if (al->devmask[k] & (UINT64_C(1) << dv))
				for (sl = al->first_slice[k]; sl < al->first_slice[k] + al->slices[k]; sl++)
				{
					TupleTableSlot *ts;

					if (b == NULL)
					{
						b = gs_bulk_begin("held_slots");
						a_node = gs_bulk_attnum(b, "node_id");
						a_slot = gs_bulk_attnum(b, "slot");
						a_job = gs_bulk_attnum(b, "job");
						a_worker = gs_bulk_attnum(b, "worker");
					}
					ts = gs_bulk_next(b);
					put(ts, a_node, Int32GetDatum(al->node[k]));
					put(ts, a_slot, Int32GetDatum(dv * GS_SLOTS_PER_DEVICE + sl));
					put(ts, a_job, Int64GetDatum(al->job[k]));
					put(ts, a_worker, Int32GetDatum(al->worker[k]));
				}
	if (b != NULL)
		gs_bulk_end(b);
}

/* The 'placed' event's detail: the gang's nodes, its domain and level. */
static char *
placement_detail(GsCluster *c, const GsJob *j, bool *seen, int32 *nodes)
{
	StringInfoData det;
	int			n = gang_nodes(j, seen, nodes),
				k;

	initStringInfo(&det);
	appendStringInfoString(&det, "{\"nodes\":[");
	for (k = 0; k < n; k++)
	{
		if (k)
			appendStringInfoChar(&det, ',');
		escape_json(&det, c->nodes[nodes[k]].name);
	}
	/* names are the operator's: escaped, so no name can make the event's jsonb fail */
	appendStringInfoString(&det, "],\"domain\":");
	escape_json(&det, c->dom[j->dom_depth][j->dom_index].label);
	appendStringInfoString(&det, ",\"level\":");
	escape_json(&det, c->level_names[j->dom_depth]);
	append_las_detail(&det, j);
	append_elastic_detail(&det, j);
	appendStringInfoChar(&det, '}');
	return det.data;
}

/*
 * The placed jobs' rows and events, and the placement counts for the
 * metrics; the ids of the jobs placed indeed, ascending.
 *
 * "AND g.state = 'pending'" and the shape the round placed: a job cancelled
 * or resized (resize()) after the round read it is not placed; under READ
 * COMMITTED the UPDATE waits for that transaction and re-checks the row.
 * The shape is still the one placed when the workers placed lie between
 * the job's minimum and what it asks for (a rigid job: exactly those;
 * elastic gangs, docs/elastic.md); workers becomes the size placed.
 */
static int64 *
update_placed(int64 *p_job, char **p_detail, bool *p_borrowed, int32 *p_workers, float8 *p_gpus, int np,
			  TimestampTz now, int *nconfirmed)
{
	Oid			types[6] = {INT8ARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, BOOLARRAYOID, INT4ARRAYOID, FLOAT8ARRAYOID};
	Datum		values[6];
	int64	   *confirmed;
	int32	   *team;
	float8	   *wait;
	int			k;

	values[0] = int8_array(p_job, np);
	values[1] = text_array(p_detail, np);
	values[2] = TimestampTzGetDatum(now);
	values[3] = bool_array(p_borrowed, np);
	values[4] = int4_array(p_workers, np);
	values[5] = float8_array(p_gpus, np);
	exec_args("WITH p AS ("
			  "  UPDATE gangsched.gangs g"
			  "     SET state = 'placed', placed_at = $3, started_at = NULL, started_nodes = '{}', reason = NULL,"
			  "         borrowed = u.borrowed, workers = u.workers"
			  "    FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($4),"
			  "                    pg_catalog.unnest($5), pg_catalog.unnest($6))"
			  "         AS u(job, detail, borrowed, workers, gpus)"
			  "   WHERE g.id OPERATOR(pg_catalog.=) u.job AND g.state OPERATOR(pg_catalog.=) 'pending'"
			  "     AND u.workers OPERATOR(pg_catalog.<=) g.workers AND g.f_gpus OPERATOR(pg_catalog.=) u.gpus"
			  "     AND u.workers OPERATOR(pg_catalog.>=) COALESCE(g.min_replicas OPERATOR(pg_catalog.*) g.group_size"
			  "                                           OPERATOR(pg_catalog.*) g.stages, g.workers)"
			  "  RETURNING g.id, g.team_id, u.detail, g.borrowed, g.queued_at),"
			  " e AS ("
			  "  INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)"
			  "  SELECT $3, 'placed', p.id, p.team_id,"
			  "         CASE WHEN p.borrowed THEN 'placed whole in its smallest domain, as borrowed capacity'"
			  "              ELSE 'placed whole in its smallest domain, within nominal quota' END,"
			  "         p.detail::pg_catalog.jsonb FROM p ORDER BY p.id)"
			  /* every row of p has its event: e runs to completion unread */
			  "SELECT p.id, p.team_id,"
			  "       pg_catalog.date_part('epoch', $3 OPERATOR(pg_catalog.-) p.queued_at) FROM p",
			  6, types, values, SPI_OK_SELECT);
	confirmed = spi_int8_column(1, nconfirmed);
	team = palloc(sizeof(int32) * Max(*nconfirmed, 1));
	wait = palloc(sizeof(float8) * Max(*nconfirmed, 1));
	for (k = 0; k < *nconfirmed; k++)
	{
		HeapTuple	tup = SPI_tuptable->vals[k];
		TupleDesc	td = SPI_tuptable->tupdesc;
		bool		isnull;

		team[k] = DatumGetInt32(SPI_getbinval(tup, td, 2, &isnull));
		wait[k] = DatumGetFloat8(SPI_getbinval(tup, td, 3, &isnull));
	}
	/* in the order the statement returned them, as an SQL sum adds */
	count_placed(team, wait, *nconfirmed);
	qsort(confirmed, *nconfirmed, sizeof(int64), cmp_int64);
	return confirmed;
}

/* Tell the agents of gang j's nodes to start it (delivered at commit). */
static void
notify_start(GsCluster *c, const GsJob *j, bool *seen, int32 *nodes)
{
	int			n = gang_nodes(j, seen, nodes),
				k;

	for (k = 0; k < n; k++)
	{
		char		chan[64];
		char		payload[128];

		snprintf(chan, sizeof(chan), "gangsched_node_%d", c->nodes[nodes[k]].id);
		if (gs_job_elastic(j))	/* elastic gangs: the size it starts at */
			snprintf(payload, sizeof(payload),
					 "{\"event\":\"start\",\"job\":" INT64_FORMAT ",\"world_size\":%d,\"replicas\":%d}",
					 j->id, j->workers, j->workers / (j->group_size * j->stages));
		else
			snprintf(payload, sizeof(payload), "{\"event\":\"start\",\"job\":" INT64_FORMAT "}", j->id);
		Async_Notify(chan, payload);
	}
}

/*
 * Placements: the jobs' rows and events first (only jobs still pending
 * count), then for those only the allocations and held slots, and the
 * agents' notices.
 */
static void
write_placements(GsState *st, GsDecision *dec, TimestampTz now)
{
	GsCluster  *c = st->cluster;
	Cols		al = {0};
	int64	   *p_job = palloc(sizeof(int64) * Max(dec->placed, 1));
	char	  **p_detail = palloc(sizeof(char *) * Max(dec->placed, 1));
	bool	   *p_borrowed = palloc(sizeof(bool) * Max(dec->placed, 1));
	int32	   *p_workers = palloc(sizeof(int32) * Max(dec->placed, 1));
	float8	   *p_gpus = palloc(sizeof(float8) * Max(dec->placed, 1));
	bool	   *seen = palloc0(sizeof(bool) * Max(c->nnodes, 1));
	int32	   *nodes = palloc(sizeof(int32) * Max(c->nnodes, 1));
	int64	   *confirmed;
	int			np = 0,
				nconfirmed,
				i;

	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];

		if (!j->placed)
			continue;
		p_job[np] = j->id;
		p_borrowed[np] = j->borrowed;
		p_workers[np] = j->workers;
		p_gpus[np] = j->gpus;
		p_detail[np++] = placement_detail(c, j, seen, nodes);
	}
	if (np == 0)
		return;
	confirmed = update_placed(p_job, p_detail, p_borrowed, p_workers, p_gpus, np, now, &nconfirmed);
	for (i = 0; i < st->njobs; i++)
	{
		GsJob	   *j = &st->jobs[i];

		if (!j->placed)
			continue;
		if (int8_find_sorted(confirmed, nconfirmed, j->id) < 0)
		{
			j->placed = false;
			dec->placed--;
			dec->workers_placed -= j->workers;
			continue;
		}
		cols_add_gang(&al, c, j);
		notify_start(c, j, seen, nodes);
	}
	if (al.n > 0)
		bulk_allocations(&al, p_job, np, now);
	bulk_held_slots(&al);
}

/* ---- growing elastic gangs (docs/elastic.md) --------------------------- */

/*
 * The gangs that took more replicas: their rows first ("still placed or
 * running, still holding the workers the round read": a gang that ended,
 * was preempted or grew in another transaction meanwhile is not grown;
 * READ COMMITTED re-checks the row after waiting for it), with a 'grown'
 * event each; then for those only the new workers' allocations (ranks
 * after the ones held) and held slots, and a resize notice to every node
 * of the gang, delivered at commit.
 */
static void
write_grows(GsState *st, GsDecision *dec, TimestampTz now)
{
	GsCluster  *c = st->cluster;
	int			cap = Max(dec->grown, 1);
	int64	   *g_job = palloc(sizeof(int64) * cap);
	int32	   *g_old = palloc(sizeof(int32) * cap);
	int32	   *g_added = palloc(sizeof(int32) * cap);
	int32	   *g_unit = palloc(sizeof(int32) * cap);
	Oid			types[5] = {INT8ARRAYOID, INT4ARRAYOID, INT4ARRAYOID, INT4ARRAYOID, TIMESTAMPTZOID};
	Datum		values[5];
	int64	   *confirmed;
	int			nconfirmed,
				ng = 0,
				i,
				w;
	Cols		al = {0};

	for (i = 0; i < st->ngrow; i++)
	{
		GsJob	   *g = &st->grow[i];

		if (g->grown == 0)
			continue;
		g_job[ng] = g->id;
		g_old[ng] = g->workers;
		g_added[ng] = g->grown;
		g_unit[ng++] = g->group_size * g->stages;
	}
	if (ng == 0)
		return;
	values[0] = int8_array(g_job, ng);
	values[1] = int4_array(g_old, ng);
	values[2] = int4_array(g_added, ng);
	values[3] = int4_array(g_unit, ng);
	values[4] = TimestampTzGetDatum(now);
	exec_args("WITH u AS ("
			  "  UPDATE gangsched.gangs g SET workers = g.workers OPERATOR(pg_catalog.+) u.added"
			  "    FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3),"
			  "                    pg_catalog.unnest($4)) AS u(job, old, added, unit)"
			  "   WHERE g.id OPERATOR(pg_catalog.=) u.job"
			  "     AND g.state OPERATOR(pg_catalog.=) ANY ('{placed,running}'::pg_catalog.text[])"
			  "     AND g.workers OPERATOR(pg_catalog.=) u.old AND g.shrink_to IS NULL"
			  "     AND g.workers OPERATOR(pg_catalog.+) u.added OPERATOR(pg_catalog.<=) g.max_workers"
			  "  RETURNING g.id, g.team_id, u.old, u.added, u.unit, g.workers),"
			  " e AS ("
			  "  INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)"
			  "  SELECT $5, 'grown', u.id, u.team_id,"
			  "         pg_catalog.format('grew from %s to %s replicas on capacity no waiting job can use now',"
			  "                           u.old OPERATOR(pg_catalog./) u.unit, u.workers OPERATOR(pg_catalog./) u.unit),"
			  "         pg_catalog.jsonb_build_object('replicas', u.workers OPERATOR(pg_catalog./) u.unit,"
			  "                                       'was_replicas', u.old OPERATOR(pg_catalog./) u.unit,"
			  "                                       'workers', u.workers, 'was_workers', u.old)"
			  "    FROM u ORDER BY u.id)"
			  "SELECT u.id FROM u ORDER BY u.id",
			  5, types, values, SPI_OK_SELECT);
	confirmed = spi_int8_column(1, &nconfirmed);
	for (i = 0; i < st->ngrow; i++)
	{
		GsJob	   *g = &st->grow[i];

		if (g->grown == 0)
			continue;
		if (int8_find_sorted(confirmed, nconfirmed, g->id) < 0)
		{
			dec->grown--;
			dec->workers_grown -= g->grown;
			g->grown = 0;
			continue;
		}
		/* the new workers' rows: ranks workers .. workers + grown - 1 */
		for (w = 0; w < g->grown; w++)
		{
			const GsAssign *a = &g->grow_assign[w];

			if (al.n == al.cap)
			{
				al.cap = Max(64, al.cap * 2);
				al.job = grow(al.job, sizeof(int64), al.cap);
				al.worker = grow(al.worker, sizeof(int32), al.cap);
				al.node = grow(al.node, sizeof(int32), al.cap);
				al.devmask = grow(al.devmask, sizeof(uint64), al.cap);
				al.first_slice = grow(al.first_slice, sizeof(int32), al.cap);
				al.slices = grow(al.slices, sizeof(int32), al.cap);
			}
			al.job[al.n] = g->id;
			al.worker[al.n] = g->workers + w;
			al.node[al.n] = c->nodes[a->node].id;
			al.devmask[al.n] = a->devmask;
			al.first_slice[al.n] = a->first_slice;
			al.slices[al.n] = a->nslices;
			al.n++;
		}
	}
	if (al.n == 0)
		return;
	bulk_allocations(&al, confirmed, nconfirmed, now);
	bulk_held_slots(&al);
	/* every node of a grown gang: its world size changed */
	values[0] = int8_array(confirmed, nconfirmed);
	exec_args("SELECT pg_catalog.count(pg_catalog.pg_notify('gangsched_node_' OPERATOR(pg_catalog.||) x.node_id,"
			  "           pg_catalog.json_build_object('event', 'resize', 'job', x.job,"
			  "                                        'replicas', x.workers OPERATOR(pg_catalog./) x.unit,"
			  "                                        'world_size', x.workers)::pg_catalog.text))"
			  "  FROM (SELECT DISTINCT a.job, a.node_id, g.workers, g.group_size OPERATOR(pg_catalog.*) g.stages AS unit"
			  "          FROM gangsched.allocations a JOIN gangsched.gangs g ON g.id OPERATOR(pg_catalog.=) a.job"
			  "         WHERE a.job OPERATOR(pg_catalog.=) ANY ($1) AND pg_catalog.upper_inf(a.during)"
			  "         ORDER BY 1, 2) x",
			  1, types, values, SPI_OK_SELECT);
}

/* ---- waiting jobs: reasons, refusals, expiries ------------------------ */

typedef struct Waiting
{
	JobTexts	reasons;		/* new or changed reasons to store */
	JobTexts	refusals;		/* refused preemptions to log */
	JobTexts	expiring;		/* queue timeouts passed, with their reasons */
} Waiting;

/*
 * Waiting reasons are refreshed for the first GS_REASONS_PER_ROUND jobs
 * in line (and written only when changed), so a round over a long queue
 * neither builds nor writes a reason for every pending job;
 * why_pending() always computes it live.
 */
static void
collect_waiting(GsState *st, GsDecision *dec, Waiting *out)
{
	GsCluster  *c = st->cluster;
	int			i;

	job_texts_init(&out->reasons, st->njobs);
	job_texts_init(&out->refusals, st->njobs);
	job_texts_init(&out->expiring, st->njobs);
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
			job_texts_add(&out->expiring, j->id, j->reason);
			continue;
		}
		if (j->reason != NULL && out->reasons.n < GS_REASONS_PER_ROUND &&
			(!j->has_old_reason || j->old_reason_hash != reason_hash(j->reason)))
		{
			job_texts_add(&out->reasons, j->id, j->reason);
			/* once per refusal: not again while its reason keeps saying so */
			if (j->preempt_refused != NULL && !j->nominated && !j->old_reason_refused)
				job_texts_add(&out->refusals, j->id, j->preempt_refused);
		}
	}
}

/*
 * Run sql with $1 the jobs of t and $2 their texts, and the further
 * parameters already in types[2..] / values[2..]; nothing when t is empty.
 */
static void
exec_job_texts(const char *sql, const JobTexts *t, int nargs, Oid *types, Datum *values, int expect)
{
	if (t->n == 0)
		return;
	values[0] = int8_array(t->job, t->n);
	values[1] = text_array(t->text, t->n);
	exec_args(sql, nargs, types, values, expect);
}

static void
write_reasons(const JobTexts *t)
{
	Oid			types[2] = {INT8ARRAYOID, TEXTARRAYOID};
	Datum		values[2];

	exec_job_texts("UPDATE gangsched.gangs g SET reason = u.reason"
				   "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(job, reason)"
				   " WHERE g.id OPERATOR(pg_catalog.=) u.job",
				   t, 2, types, values, SPI_OK_UPDATE);
}

/*
 * A refused preemption is logged when a job's reason first says so, not
 * every round and not each time the numbers in it change.
 */
static void
write_refusals(const JobTexts *t, TimestampTz now)
{
	Oid			types[4] = {INT8ARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, TEXTOID};
	Datum		values[4] = {0, 0, TimestampTzGetDatum(now),
	CStringGetTextDatum(gs_fair_preemption == GS_FAIR_INITIAL_SHARE ? "initial_share" : "final_share")};

	exec_job_texts("INSERT INTO gangsched.events (at, kind, job, team_id, reason, detail)"
				   "SELECT $3, 'preemption refused', g.id, g.team_id, u.reason,"
				   "       pg_catalog.jsonb_build_object('fair_preemption', $4)"
				   "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(job, reason)"
				   "  JOIN gangsched.gangs g ON g.id OPERATOR(pg_catalog.=) u.job"
				   " ORDER BY g.id",
				   t, 4, types, values, SPI_OK_INSERT);
}

/* Jobs whose queue timeout passed: 'expired', with their last reason, and an event. */
static void
write_expired(const JobTexts *t, TimestampTz now)
{
	Oid			types[4] = {INT8ARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, INT4OID};
	Datum		values[4] = {0, 0, TimestampTzGetDatum(now), Int32GetDatum(gs_default_queue_timeout_s)};

	exec_job_texts("WITH e AS ("
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
				   "SELECT $3, 'expired', e.id, e.team_id, e.reason FROM e ORDER BY e.id",
				   t, 4, types, values, SPI_OK_INSERT);
}

/* A 'reserved' event when the starvation guard's reservation is new or its reason changed. */
static void
write_reserved(GsDecision *dec, TimestampTz now)
{
	Oid			types[4] = {INT8OID, INT4OID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[4];

	if (dec->reserved == NULL ||
		(dec->reserved->has_old_reason &&
		 dec->reserved->old_reason_hash == reason_hash(dec->reserved->reason)))
		return;
	values[0] = Int64GetDatum(dec->reserved->id);
	values[1] = Int32GetDatum(dec->reserved->team);
	values[2] = CStringGetTextDatum(dec->reserved->reason);
	values[3] = TimestampTzGetDatum(now);
	exec_args("INSERT INTO gangsched.events (at, kind, job, team_id, reason)"
			  " VALUES ($4, 'reserved', $1, $2, $3)", 4, types, values, SPI_OK_INSERT);
}

/* Every decision of the round, one writer per relation and kind, in this order. */
static void
write_decisions(GsState *st, GsDecision *dec, TimestampTz now)
{
	Waiting		waiting;

	collect_waiting(st, dec, &waiting);
	write_placements(st, dec, now);
	write_reasons(&waiting.reasons);
	write_refusals(&waiting.refusals, now);
	write_expired(&waiting.expiring, now);
	if (dec->nominated > 0)
		write_nominations(st, dec, now);
	if (dec->grown > 0)
		write_grows(st, dec, now);
	write_reserved(dec, now);
}

/* ---- run_round -------------------------------------------------------- */

/* What a round did, for run_round's row. */
typedef struct RoundResult
{
	GsDecision	dec;
	int			expired,
				requeued,
				killed;
	char		note[256];		/* the row's note, "" for none */
} RoundResult;

/* run_round's row when no round ran: why. */
static Datum
round_not_run(TupleDesc tupdesc, const char *why)
{
	Datum		values[9];
	bool		nulls[9] = {0};

	values[0] = BoolGetDatum(false);
	for (int i = 1; i < 7; i++)
		values[i] = Int32GetDatum(0);
	values[7] = Float8GetDatum(0);
	values[8] = CStringGetTextDatum(why);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * The round's steps, SPI connected: the time rules, the load, the decision
 * and its writes, the backstop fold of the metrics; each step's time at
 * DEBUG1.
 */
static void
round_steps(RoundResult *res)
{
	GsState    *st;
	TimestampTz now;
	instr_time	t0,
				t1,
				t2,
				t3,
				t4;

	INSTR_TIME_SET_CURRENT(t0);
	/* with it, whether a reservation or maintenance window is not over: only then its rule */
	exec_args("SELECT gangsched._mark_silent_nodes(),"
			  " EXISTS (SELECT FROM gangsched.bookings b WHERE NOT b.ended)", 0, NULL, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1 && booking_live())
		exec_args("SELECT gangsched._reservation_rules()", 0, NULL, NULL, SPI_OK_SELECT);
	res->requeued = requeue_unstarted(gs_now());
	(void) enforce_time_limits();	/* they fail: not requeued, not in the row */
	res->killed = kill_overdue();
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
	gs_decide(st, gs_schedule_settings(), &res->dec);
	res->expired = res->dec.expiring;
	INSTR_TIME_SET_CURRENT(t3);
	write_decisions(st, &res->dec, now);

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
	if (res->dec.placed > 0 || res->expired > 0 || res->requeued > 0)
	{
		char		payload[160];

		snprintf(payload, sizeof(payload),
				 "{\"event\":\"round\",\"placed\":%d,\"expired\":%d,\"requeued\":%d}",
				 res->dec.placed, res->expired, res->requeued);
		Async_Notify("gangsched_events", payload);
	}
	if (res->dec.reserved)
		snprintf(res->note, sizeof(res->note), "capacity kept for job " INT64_FORMAT " (first in line, does not fit yet)",
				 res->dec.reserved->id);
	else
		res->note[0] = '\0';
}

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
				spicxt;
	RoundResult res;
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
		PG_RETURN_DATUM(round_not_run(tupdesc, "the server is a standby (in recovery): rounds run on the primary"));
	gs_require_catalog_version("run a scheduling round");
	if (!gs_try_round_lock())
		PG_RETURN_DATUM(round_not_run(tupdesc, "another round holds the lock; this one did nothing"));

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

	/*
	 * The round's memory: every allocation of the load, the decision and
	 * the writes goes to roundcxt, a child of the caller's context, made
	 * current after SPI_connect (which would otherwise make its own
	 * procedure context current) and deleted once SPI has finished. SPI's
	 * results stay in SPI's memory until SPI_finish; nothing of the round
	 * is used after it but the counts in res. An error frees both with the
	 * transaction.
	 */
	memset(&res, 0, sizeof(res));
	roundcxt = AllocSetContextCreate(CurrentMemoryContext, "gangsched round", ALLOCSET_DEFAULT_SIZES);
	SPI_connect();
	spicxt = MemoryContextSwitchTo(roundcxt);
	round_steps(&res);
	MemoryContextSwitchTo(spicxt);
	SPI_finish();
	gs_restore_search_path(save_nestlevel);
	MemoryContextDelete(roundcxt);

	INSTR_TIME_SET_CURRENT(dur);
	INSTR_TIME_SUBTRACT(dur, start);
	values[0] = BoolGetDatum(true);
	values[1] = Int32GetDatum(res.dec.considered);
	values[2] = Int32GetDatum(res.dec.placed);
	values[3] = Int32GetDatum(res.dec.workers_placed);
	values[4] = Int32GetDatum(res.dec.preempted);
	values[5] = Int32GetDatum(res.expired);
	values[6] = Int32GetDatum(res.requeued + res.killed);
	values[7] = Float8GetDatum(INSTR_TIME_GET_MILLISEC(dur));
	gs_metrics_note_round(INSTR_TIME_GET_MILLISEC(dur), gs_now());
	if (res.note[0])
		values[8] = CStringGetTextDatum(res.note);
	else
		nulls[8] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
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
		Datum		v[9];
		bool		nl[9] = {false, false, false, false, false, false, false, false, false};

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
		/* the reserved job's expected start (backfill with time, docs/time.md) */
		if (j->reserved && j->expected_start > 0)
			v[8] = TimestampTzGetDatum((TimestampTz) j->expected_start);
		else
			nl[8] = true;
		tuplestore_putvalues(ts, tupdesc, v, nl);
	}
	SPI_finish();
	gs_restore_search_path(save_nestlevel);
	return (Datum) 0;
}
