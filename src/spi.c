/*
 * spi.c — the round's and the loader's statements: executed through SPI
 * with their plans kept for the backend's life, timed at DEBUG2.
 *
 * A round runs the same twenty-odd statements every time; parsing,
 * analysing and planning them was a third of a small cluster's round
 * (perf, 69 nodes, 588 waiting: pg_plan_queries 23 %, parse and analysis
 * 10 %). Each statement's plan is prepared once per backend (SPI_prepare,
 * SPI_keepplan) and reused, as PL/pgSQL does for its statements: the plan
 * cache replans after invalidations (DDL, ANALYZE of a table it reads, a
 * dropped and re-created extension) and when the search_path differs, and
 * chooses between custom and generic plans for statements with parameters.
 *
 * Statements are keyed by their text. Texts that change from round to
 * round (a literal of the clock) must not be kept: callers pass
 * cache = false, and the cache keeps at most GS_SPI_MAX_PLANS texts in any
 * case (beyond that a statement is planned each time, as before).
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "executor/spi.h"
#include "portability/instr_time.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "spi.h"

#define GS_SPI_MAX_PLANS 128

typedef struct PlanKey
{
	uint64		hash;
	int			len;
	int			nargs;
} PlanKey;

typedef struct PlanEntry
{
	PlanKey		key;
	char	   *text;			/* in TopMemoryContext, to check the hash's match */
	SPIPlanPtr	plan;			/* kept (SPI_keepplan); NULL until prepared */
} PlanEntry;

static HTAB *plans = NULL;
static int	nplans = 0;

static SPIPlanPtr
kept_plan(const char *sql, int nargs, Oid *types)
{
	PlanKey		key;
	PlanEntry  *e;
	bool		found;
	SPIPlanPtr	plan;

	if (plans == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(PlanKey);
		ctl.entrysize = sizeof(PlanEntry);
		ctl.hcxt = TopMemoryContext;
		plans = hash_create("gangsched statements", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	memset(&key, 0, sizeof(key));
	key.len = (int) strlen(sql);
	key.hash = hash_bytes_extended((const unsigned char *) sql, key.len, 0);
	key.nargs = nargs;
	e = hash_search(plans, &key, HASH_FIND, &found);
	if (found)
		return strcmp(e->text, sql) == 0 ? e->plan : NULL;
	if (nplans >= GS_SPI_MAX_PLANS)
		return NULL;
	plan = SPI_prepare(sql, nargs, types);
	if (plan == NULL)
		elog(ERROR, "gangsched: preparing a statement failed (%d): %s", SPI_result, sql);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "gangsched: keeping a statement's plan failed: %s", sql);
	e = hash_search(plans, &key, HASH_ENTER, &found);
	e->text = MemoryContextStrdup(TopMemoryContext, sql);
	e->plan = plan;
	nplans++;
	return plan;
}

int
gs_spi_exec(const char *who, const char *sql, int nargs, Oid *types, Datum *values,
			DestReceiver *dest, bool cache, int expect)
{
	MemoryContext cxt = CurrentMemoryContext;
	instr_time	t0,
				t1;
	SPIPlanPtr	plan;
	int			rc;

	INSTR_TIME_SET_CURRENT(t0);
	plan = cache ? kept_plan(sql, nargs, types) : NULL;
	/* not read-only: each statement sees what the round changed before it */
	if (plan != NULL && dest == NULL)
		rc = SPI_execute_plan(plan, values, NULL, false, 0);
	else
	{
		SPIExecuteOptions opts;
		int			i;

		memset(&opts, 0, sizeof(opts));
		if (nargs > 0)
		{
			opts.params = makeParamList(nargs);
			for (i = 0; i < nargs; i++)
			{
				opts.params->params[i].value = values[i];
				opts.params->params[i].isnull = false;
				opts.params->params[i].pflags = PARAM_FLAG_CONST;
				opts.params->params[i].ptype = types[i];
			}
		}
		opts.read_only = false;
		opts.dest = dest;
		rc = plan != NULL ? SPI_execute_plan_extended(plan, &opts) : SPI_execute_extended(sql, &opts);
	}
	/* SPI leaves its procedure context current: keep the caller's */
	MemoryContextSwitchTo(cxt);
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	elog(DEBUG2, "gangsched %s: %.2f ms, %lu rows: %.60s", who, INSTR_TIME_GET_MILLISEC(t1),
		 (unsigned long) SPI_processed, sql);
	/* with a receiver of its own, SPI reports a SELECT as a utility */
	if (rc != expect && !(dest != NULL && expect == SPI_OK_SELECT && rc == SPI_OK_UTILITY))
		elog(ERROR, "gangsched %s: statement failed (%d): %s", who, rc, sql);
	return rc;
}
