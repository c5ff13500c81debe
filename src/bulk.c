/*
 * bulk.c — inserting a round's rows the way COPY does.
 *
 * A cold round writes tens of thousands of allocation and held-slot rows.
 * Going through INSERT … SELECT FROM unnest(…) costs the executor's
 * per-row work on top of the heap and index work; this module does what
 * COPY FROM does instead: buffered slots, table_multi_insert(), then each
 * row's CHECK / NOT NULL constraints and index entries (unique indexes
 * still refuse duplicates: held_slots' primary key is invariant 1). The
 * tables written this way have no INSERT triggers, no generated columns and
 * no partitions; gs_bulk_begin() refuses any that does, and checks what the
 * executor would: the INSERT privilege and that no row-level security
 * policy applies to the current user.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/rls.h"
#include "utils/rel.h"

#include "bulk.h"

#define GS_BULK_BATCH 1000

struct GsBulk
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	BulkInsertState bis;
	CommandId	cid;
	TupleTableSlot *slots[GS_BULK_BATCH];
	int			nslots;			/* created */
	int			nused;			/* filled, not yet inserted */
	Oid			identity_seq;
	AttrNumber	identity_att;
};

GsBulk *
gs_bulk_begin(const char *relname)
{
	GsBulk	   *b = palloc0(sizeof(GsBulk));
	RangeTblEntry *rte;

	b->rel = table_openrv(makeRangeVar("gangsched", pstrdup(relname), -1), RowExclusiveLock);

	/*
	 * table_multi_insert() bypasses the executor's permission check of the
	 * range table below: check INSERT here, as COPY FROM does.
	 */
	if (pg_class_aclcheck(RelationGetRelid(b->rel), GetUserId(), ACL_INSERT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to write the round's rows into gangsched.%s", relname),
				 errdetail("Role \"%s\" may not insert into gangsched.%s.",
						   GetUserNameFromId(GetUserId(), false), relname),
				 errhint("gangsched.run_round() writes as the extension's owner; run rounds through it.")));
	if (b->rel->trigdesc != NULL && (b->rel->trigdesc->trig_insert_before_row ||
									 b->rel->trigdesc->trig_insert_after_row ||
									 b->rel->trigdesc->trig_insert_instead_row ||
									 b->rel->trigdesc->trig_insert_after_statement ||
									 b->rel->trigdesc->trig_insert_before_statement))
		elog(ERROR, "gangsched bulk insert: gangsched.%s has INSERT triggers", relname);
	/* nor row security: refuse rather than skip a policy */
	if (check_enable_rls(RelationGetRelid(b->rel), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot write the round's rows into gangsched.%s under row-level security", relname),
				 errdetail("The round writes gangsched.%s in bulk, past the executor that applies row-level security policies.",
						   relname),
				 errhint("Run rounds as the table's owner or a role with BYPASSRLS, through gangsched.run_round().")));
	if (b->rel->rd_rel->relkind != RELKIND_RELATION ||
		(b->rel->rd_att->constr && b->rel->rd_att->constr->has_generated_stored))
		elog(ERROR, "gangsched bulk insert: gangsched.%s is not a plain table", relname);

	b->estate = CreateExecutorState();
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(b->rel);
	rte->relkind = b->rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	rte->requiredPerms = ACL_INSERT;
	ExecInitRangeTable(b->estate, list_make1(rte));
	b->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(b->rri, b->rel, 1, NULL, 0);
	ExecOpenIndices(b->rri, false);
	b->bis = GetBulkInsertState();
	b->cid = GetCurrentCommandId(true);
	return b;
}

static void
flush(GsBulk *b)
{
	int			i;
	ExprContext *econtext = GetPerTupleExprContext(b->estate);

	if (b->nused == 0)
		return;
	for (i = 0; i < b->nused; i++)
		ExecStoreVirtualTuple(b->slots[i]);
	if (b->rel->rd_att->constr)
		for (i = 0; i < b->nused; i++)
			ExecConstraints(b->rri, b->slots[i], b->estate);
	table_multi_insert(b->rel, b->slots, b->nused, b->cid, 0, b->bis);
	for (i = 0; i < b->nused; i++)
	{
		if (b->rri->ri_NumIndices > 0)
		{
			List	   *recheck;

			econtext->ecxt_scantuple = b->slots[i];
			recheck = ExecInsertIndexTuples(b->rri, b->slots[i], b->estate, false, false, NULL, NIL);
			list_free(recheck);
		}
		ResetPerTupleExprContext(b->estate);
	}
	b->nused = 0;
}

TupleTableSlot *
gs_bulk_next(GsBulk *b)
{
	TupleTableSlot *slot;

	if (b->nused == GS_BULK_BATCH)
		flush(b);
	if (b->nused == b->nslots)
		b->slots[b->nslots++] = table_slot_create(b->rel, NULL);
	slot = b->slots[b->nused++];
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * slot->tts_tupleDescriptor->natts);
	return slot;
}

AttrNumber
gs_bulk_attnum(GsBulk *b, const char *name)
{
	TupleDesc	td = RelationGetDescr(b->rel);
	int			i;

	for (i = 0; i < td->natts; i++)
		if (!TupleDescAttr(td, i)->attisdropped && strcmp(NameStr(TupleDescAttr(td, i)->attname), name) == 0)
			return i + 1;
	elog(ERROR, "gangsched bulk insert: gangsched.%s has no column %s", RelationGetRelationName(b->rel), name);
	return InvalidAttrNumber;
}

Datum
gs_bulk_identity(GsBulk *b, AttrNumber attnum)
{
	if (b->identity_att != attnum)
	{
		b->identity_seq = getIdentitySequence(RelationGetRelid(b->rel), attnum, false);
		b->identity_att = attnum;
	}
	return Int64GetDatum(nextval_internal(b->identity_seq, false));
}

void
gs_bulk_end(GsBulk *b)
{
	int			i;

	flush(b);
	for (i = 0; i < b->nslots; i++)
		ExecDropSingleTupleTableSlot(b->slots[i]);
	ExecCloseIndices(b->rri);
	FreeBulkInsertState(b->bis);
	FreeExecutorState(b->estate);
	table_close(b->rel, NoLock);
	CommandCounterIncrement();
}
