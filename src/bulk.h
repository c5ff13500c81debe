/*
 * bulk.h — inserting a round's rows the way COPY does.
 */
#ifndef GANGSCHED_BULK_H
#define GANGSCHED_BULK_H

#include "postgres.h"

#include "executor/tuptable.h"

typedef struct GsBulk GsBulk;

/* Open gangsched.<relname> for bulk insertion in this transaction. */
extern GsBulk *gs_bulk_begin(const char *relname);
/* A cleared slot to fill (tts_values / tts_isnull for every column). */
extern TupleTableSlot *gs_bulk_next(GsBulk *b);
/* Column number by name (1-based). */
extern AttrNumber gs_bulk_attnum(GsBulk *b, const char *name);
/* The next value of the column's identity sequence. */
extern Datum gs_bulk_identity(GsBulk *b, AttrNumber attnum);
/* Insert what is buffered, check constraints, insert index entries; close. */
extern void gs_bulk_end(GsBulk *b);

#endif							/* GANGSCHED_BULK_H */
