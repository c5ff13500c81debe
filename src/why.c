/*
 * why.c — gangsched._why_pending(job): why a job waits, in rows of
 * (reason, detail), for gangsched.why_pending().
 *
 * A job that is not pending says what it is; a nominated one, which
 * victims it waits for. A pending job is explained by simulating the next
 * round (the same load, order and placements as run_round, no writes):
 * what stops it (no node, capacity, topology, quota, a refused preemption),
 * then the constraints that narrow where it may go and the jobs and teams
 * that go first.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "fair.h"
#include "guc.h"
#include "las.h"
#include "loader.h"
#include "order.h"
#include "placement.h"
#include "schedule.h"
#include "spi.h"
#include "tenancy.h"
#include "version.h"

/* What the job's row says, with what it waits for when nominated (text, in per_query). */
typedef struct WhyRow
{
	char	   *state;
	char	   *stored_reason;
	char	   *nvictims;
	char	   *deadline;
	bool		waiting;		/* pending, waiting for other jobs to end (after) */
} WhyRow;

/* One (reason, detail) row more, both formatted in the current memory context. */
static List *
add_row(List *rows, const char *reason, const char *fmt,...) pg_attribute_printf(3, 4);

static List *
add_row(List *rows, const char *reason, const char *fmt,...)
{
	StringInfoData detail;

	initStringInfo(&detail);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&detail, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&detail, needed);
	}
	return lappend(rows, list_make2(pstrdup(reason), detail.data));
}

/* The job's state and stored reason; its own victims, and earlier victims whose rest it holds. */
static void
read_job(int64 job_id, MemoryContext per_query, WhyRow *row)
{
	Oid			types[1] = {INT8OID};
	Datum		vals[1] = {Int64GetDatum(job_id)};
	MemoryContext oldcxt;

	(void) gs_spi_exec("round",
					   "WITH w AS ("
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
					   "       (SELECT pg_catalog.max(w.preempt_deadline) FROM w),"
					   "       g.waiting_for IS NOT NULL"
					   "  FROM gangsched.gangs g WHERE g.id OPERATOR(pg_catalog.=) $1",
					   1, types, vals, NULL, true, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ereport(ERROR, (errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
						errmsg("job " INT64_FORMAT " does not exist", job_id),
						errhint("See gangsched.jobs for the job ids.")));
	oldcxt = MemoryContextSwitchTo(per_query);
	row->state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	row->stored_reason = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	row->nvictims = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
	row->deadline = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);
	row->waiting = strcmp(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5), "t") == 0;
	MemoryContextSwitchTo(oldcxt);
}

/* A job that is not pending: nominated (waiting for its victims) or any other state. */
static List *
not_pending_rows(const WhyRow *row)
{
	if (strcmp(row->state, "nominated") != 0)
		return add_row(NIL, "not pending", "the job is %s%s%s", row->state,
					   row->stored_reason ? ": " : "", row->stored_reason ? row->stored_reason : "");
	if (row->deadline != NULL)
		return add_row(NIL, "waiting for victims",
					   "waiting for %s job%s to release capacity; the last grace deadline is %s",
					   row->nvictims, strcmp(row->nvictims, "1") == 0 ? "" : "s", row->deadline);
	return add_row(NIL, "waiting for victims",
				   "its victims have let go; the next round or release places it on the capacity held for it");
}

/* What stops it in the simulated round: no node, capacity or topology; a refused preemption. */
static List *
blocked_rows(List *rows, GsState *st, GsDecision *dec, GsJob *target)
{
	GsWhy	   *w = &dec->why[target - st->jobs];
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
	rows = add_row(rows, reason, "%s", text);
	if (target->preempt_refused != NULL)
		rows = add_row(rows, "preemption refused", "%s", target->preempt_refused);
	return rows;
}

/* The constraints that narrow where it may go: dataset locality, GPU model, nodes not up. */
static List *
constraint_rows(List *rows, GsCluster *c, GsJob *target)
{
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
		rows = add_row(rows, "locality",
					   "%s locality: only the %d eligible node%s caching dataset %s may take it (%d up)%s",
					   target->locality == GS_LOC_REQUIRED ? "required" : "preferred",
					   cached, cached == 1 ? "" : "s", c->datasets[target->dataset], cached_up,
					   target->locality == GS_LOC_REQUIRED ? "; submit with locality => 'preferred' to allow other nodes" : "");
	if (target->model >= 0 && target->gpus > 0)
		rows = add_row(rows, "gpu model",
					   "only the %d eligible node%s with %s devices may take it; leave gpu_model unset to allow any",
					   model_nodes, model_nodes == 1 ? "" : "s", c->models[target->model]);
	if (not_up > 0)
		rows = add_row(rows, "nodes not up",
					   "%d node%s it could use %s down or draining; they take no new work until an operator sets them up",
					   not_up, not_up == 1 ? "" : "s", not_up == 1 ? "is" : "are");
	return rows;
}

/* A time as the scheduler's texts give it, in the current memory context. */
static char *
time_text(int64_t t)
{
	return pstrdup(timestamptz_to_str((TimestampTz) t));
}

/* When a job placed now lets go at the latest (its time limit and grace), as text. */
static char *
ends_text(const GsState *st, const GsJob *j)
{
	return time_text(st->now + (int64_t) (j->hold_s * 1000000.0));
}

/*
 * Backfill with time (docs/time.md): a job that does not fit beside the
 * capacity kept for the reserved job, but would fit in it, waits because
 * its time limit ends after the reserved job's expected start (or it has
 * none).
 */
static List *
backfill_rows(List *rows, GsState *st, GsDecision *dec, GsJob *target)
{
	GsJob	   *res = dec->reserved;
	bool		fits;

	if (res == NULL || res == target || res->expected_start <= 0)
		return rows;
	gs_placer_ignore_reserved(dec->placer, true);
	fits = gs_probe(dec->placer, target, NULL);
	gs_placer_ignore_reserved(dec->placer, false);
	if (!fits)
		return rows;
	if (target->hold_s < 0)
		return add_row(rows, "backfill",
					   "it would fit in the capacity kept for job " INT64_FORMAT ", which is expected to start at %s, "
					   "but it has no time limit: only jobs whose limit ends before then may use that capacity",
					   res->id, time_text(res->expected_start));
	return add_row(rows, "backfill",
				   "it would fit in the capacity kept for job " INT64_FORMAT ", which is expected to start at %s, "
				   "but its time limit (with its grace) ends at %s, after that; a limit ending before then would let it backfill",
				   res->id, time_text(res->expected_start), ends_text(st, target));
}

/*
 * Reservations and maintenance windows (docs/time.md): the bookings that
 * keep the job off their nodes, and the reservation it is confined to;
 * first whether it would fit now without them.
 */
static List *
booking_rows(List *rows, GsState *st, GsDecision *dec, GsJob *target)
{
	uint64_t	block = target->res_block,
				only = target->res_only;
	bool		fits;
	int			b;

	if ((block | only) == 0)
		return rows;
	target->res_block = 0;
	target->res_only = 0;
	fits = gs_probe(dec->placer, target, NULL);
	target->res_block = block;
	target->res_only = only;
	if (fits)
		rows = add_row(rows, "booked capacity",
					   "it would fit now on nodes that reservations or maintenance windows keep it off (below)");
	for (b = 0; b < st->nbookings; b++)
	{
		const GsBooking *k = &st->bookings[b];
		uint64_t	bit = UINT64_C(1) << b;
		const char *kind = k->maintenance ? "maintenance" : "reservation";
		char	   *what;

		if (((block | only) & bit) == 0)
			continue;
		what = k->maintenance ?
			psprintf("maintenance window %s (%d node%s, from %s to %s)", k->name, k->nnodes,
					 k->nnodes == 1 ? "" : "s", time_text(k->starts), time_text(k->ends)) :
			psprintf("reservation %s (%d node%s for team %s, from %s to %s)", k->name, k->nnodes,
					 k->nnodes == 1 ? "" : "s", k->team ? k->team : "?", time_text(k->starts), time_text(k->ends));
		if (only & bit)
			rows = add_row(rows, kind, "it names %s: it runs only on those nodes%s", what,
						   (block & bit) ? ", from the start" : "");
		else if (k->maintenance && k->starts <= st->now)
			rows = add_row(rows, kind, "%s is in progress: no job may use those nodes until its end", what);
		else if (k->starts <= st->now)
			rows = add_row(rows, kind, "%s is in progress: until its end only jobs of team %s (or of a team below it) "
						   "and jobs that name it may use those nodes", what, k->team ? k->team : "?");
		else if (target->hold_s < 0)
			rows = add_row(rows, kind, "%s: it has no time limit, so %s", what,
						   k->maintenance ? "it is not placed on those nodes within gangsched.maintenance_guard of the start" :
						   "it may not use those nodes before the start (only jobs whose limit ends by then may)");
		else
			rows = add_row(rows, kind, "%s: its time limit (with its grace) ends at %s, after the start; "
						   "only jobs whose limit ends by then may use those nodes before it", what, ends_text(st, target));
	}
	return rows;
}

/* Who goes first: the starvation guard's reservation, fairer teams, its LAS queue, jobs ahead. */
static List *
order_rows(List *rows, GsState *st, GsDecision *dec, GsJob *target, int pos)
{
	if (dec->reserved == target && target->expected_start > 0)
		rows = add_row(rows, "first in line",
					   "expected to start at %s on %s %s, when the time limits of the jobs holding that capacity have ended; "
					   "the starvation guard keeps it: later jobs use it only if their time limit ends before then",
					   time_text(target->expected_start), st->cluster->level_names[target->dom_depth],
					   st->cluster->dom[target->dom_depth][target->dom_index].label);
	else if (dec->reserved == target)
		rows = add_row(rows, "first in line",
					   "the starvation guard keeps the capacity it waits for: later jobs only backfill around it");
	else if (dec->reserved != NULL && dec->reserved->expected_start > 0)
		rows = add_row(rows, "capacity held for another job",
					   "job " INT64_FORMAT " is first in line, expected to start at %s; capacity is being kept for it",
					   dec->reserved->id, time_text(dec->reserved->expected_start));
	else if (dec->reserved != NULL)
		rows = add_row(rows, "capacity held for another job",
					   "job " INT64_FORMAT " is first in line and capacity is being kept for it",
					   dec->reserved->id);
	if (gs_queue_order == GS_ORDER_FAIR)
	{
		int			ahead = gs_order_teams_ahead(dec->order, target);

		if (ahead > 0)
			rows = add_row(rows, "fair share",
						   "%d team%s with a lower dominant share %s tried first; team %s holds a dominant share of %.3f (weight %g)%s",
						   ahead, ahead == 1 ? "" : "s", ahead == 1 ? "is" : "are",
						   st->cluster->teams[target->tix].name,
						   gs_dominant_share(st->cluster, target->tix),
						   st->cluster->teams[target->tix].weight,
						   target->try_borrowing ? "; it would borrow, so guaranteed work of every team goes first" : "");
	}
	if (target->las_queue >= 0)
		rows = add_row(rows, "las queue",
					   "team %s orders its jobs by least attained service: this job has held %.0f GPU-seconds, queue %d of %d%s",
					   st->cluster->teams[target->tix].name, target->attained,
					   target->las_queue, gs_las_nthresholds + 1,
					   target->las_promoted ? " (promoted to queue 0: it waited longer than gangsched.las_promote_factor times its attained service)" :
					   target->las_queue > 0 ? " (later queues go after earlier ones of the same priority)" : "");
	if (pos > 0)
		rows = add_row(rows, "queue order",
					   "%d job%s before it (priority %d, then %s)",
					   pos, pos == 1 ? " comes" : "s come", target->priority,
					   target->las_queue >= 0 ? "LAS queue, then submit order" : "submit order");
	return rows;
}

/* A pending job: the next round, simulated (same order, same placements, no writes). */
static List *
pending_rows(int64 job_id, MemoryContext per_query)
{
	GsState    *st = gs_load_state();
	GsDecision	dec;
	GsJob	   *target = NULL;
	List	   *rows = NIL;
	MemoryContext oldcxt;
	int			i,
				pos;

	st->now = gs_now();
	st->load_running = gs_load_running;
	gs_mark_expiring(st, gs_now(), gs_default_queue_timeout_s);
	gs_decide(st, gs_schedule_settings(), &dec);
	for (i = 0; i < st->njobs; i++)
		if (st->jobs[i].id == job_id)
			target = &st->jobs[i];
	pos = gs_order_position(dec.order, job_id);
	oldcxt = MemoryContextSwitchTo(per_query);
	if (target == NULL)
		rows = add_row(rows, "not pending", "the job changed state");
	else if (target->expiring)
		rows = add_row(rows, "queue timeout",
					   "its queue timeout has passed: the next round expires it (%s)",
					   target->reason ? target->reason : "it fits now");
	else if (gs_team_closed(st->cluster, target))
		rows = add_row(rows, "team closed", "%s; gangsched.open_team() lets rounds place it again", target->reason);
	else if (target->quota_blocked)
		rows = add_row(rows, "quota", "%s", target->reason);
	else if (target->nominated)
		rows = add_row(rows, "preemption",
					   "the next round preempts %d job%s for it (%s) and holds their capacity for it",
					   target->nvictims, target->nvictims == 1 ? "" : "s", target->trigger);
	else if (target->placed && target->backfilled)
		rows = add_row(rows, "fits now",
					   "the next round places it (%d of %d in queue order) on capacity kept for job " INT64_FORMAT
					   ": its time limit (with its grace) ends at %s, before that job's expected start at %s",
					   pos + 1, st->njobs, dec.reserved->id, ends_text(st, target),
					   time_text(dec.reserved->expected_start));
	else if (target->placed)
		rows = add_row(rows, "fits now",
					   "the next round places it (%d of %d in queue order)", pos + 1, st->njobs);
	else
	{
		rows = blocked_rows(rows, st, &dec, target);
		rows = booking_rows(rows, st, &dec, target);
		rows = backfill_rows(rows, st, &dec, target);
		rows = constraint_rows(rows, st->cluster, target);
		rows = order_rows(rows, st, &dec, target, pos);
	}
	MemoryContextSwitchTo(oldcxt);
	return rows;
}

PG_FUNCTION_INFO_V1(gs_why_pending);
Datum
gs_why_pending(PG_FUNCTION_ARGS)
{
	int64		job_id = PG_GETARG_INT64(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext per_query,
				oldcxt;
	WhyRow		row;
	List	   *rows;
	ListCell   *lc;
	int			save_nestlevel;

	gs_require_catalog_version("explain a pending job");
	InitMaterializedSRF(fcinfo, 0);
	per_query = rsinfo->econtext->ecxt_per_query_memory;

	/* one call (materialized): the fixed search_path from here to SPI_finish */
	save_nestlevel = gs_fix_search_path();
	SPI_connect();
	read_job(job_id, per_query, &row);
	if (strcmp(row.state, "pending") != 0)
	{
		oldcxt = MemoryContextSwitchTo(per_query);
		rows = not_pending_rows(&row);
		MemoryContextSwitchTo(oldcxt);
	}
	else if (row.waiting)
	{
		/* not in the queue yet: rounds do not read it (58_dependencies.sql) */
		oldcxt = MemoryContextSwitchTo(per_query);
		rows = add_row(NIL, "dependencies",
					   "%s; then it enters the queue, and its queue timeout counts from then",
					   row.stored_reason ? row.stored_reason : "waiting for other jobs");
		MemoryContextSwitchTo(oldcxt);
	}
	else
		rows = pending_rows(job_id, per_query);
	SPI_finish();
	gs_restore_search_path(save_nestlevel);

	foreach(lc, rows)
	{
		List	   *r = lfirst(lc);
		Datum		v[2];
		bool		n[2] = {false, false};

		v[0] = CStringGetTextDatum(linitial(r));
		v[1] = CStringGetTextDatum(lsecond(r));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	return (Datum) 0;
}
