/*
 * version.c — the library's version against the installed catalog's.
 *
 * The server loads one gangsched library (shared_preload_libraries), the
 * newest installed; each database's catalog keeps the version it was
 * created or last updated to until ALTER EXTENSION gangsched UPDATE. Between
 * a server restart onto a new library and that update, the C functions that
 * read or write the scheduler's tables (a round, why_pending, the queue)
 * refuse with a clear error instead of failing on a column that is not
 * there yet, and the worker waits (src/worker.c). Submits, cancels and the
 * agents' calls are SQL of the installed version and carry on.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

#include "version.h"

#ifndef GS_EXTVERSION
#error "GS_EXTVERSION must be defined by the Makefile (gangsched.control's default_version)"
#endif

const char *
gs_library_version(void)
{
	return GS_EXTVERSION;
}

char *
gs_installed_version(void)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *version = NULL;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("gangsched"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_extension_extversion, RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = text_to_cstring(DatumGetTextPP(d));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

void
gs_require_catalog_version(const char *action)
{
	char	   *installed = gs_installed_version();

	if (installed != NULL && strcmp(installed, GS_EXTVERSION) == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot %s: gangsched in this database is version %s, its library is version %s",
					action, installed ? installed : "(not installed)", GS_EXTVERSION),
			 errdetail("The server loaded a newer library; the catalog keeps its version until it is updated."),
			 errhint("Run ALTER EXTENSION gangsched UPDATE in this database (docs/upgrade.md); rounds resume at once.")));
}
