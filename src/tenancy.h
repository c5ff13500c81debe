/*
 * tenancy.h — who is calling: the role on whose behalf a gangsched
 * function runs, and the fixed search_path every gangsched query runs under.
 */
#ifndef GANGSCHED_TENANCY_H
#define GANGSCHED_TENANCY_H

/* The search_path every gangsched query runs under (no tenant-writable schema). */
#define GS_SAFE_SEARCH_PATH "pg_catalog, gangsched, pg_temp"

extern void gs_tenancy_init(void);

/*
 * The role that called the outermost gangsched function now running: the
 * current user outside gangsched's own SECURITY DEFINER frames.
 */
extern Oid	gs_caller(void);

/* Superuser or member of gangsched_operator. */
extern bool gs_caller_is_operator(void);

/* ERROR 42501 unless the caller may act as an operator; `action` names what was refused. */
extern void gs_require_operator(const char *action);

/*
 * Run the following SPI work under GS_SAFE_SEARCH_PATH; returns the GUC
 * nest level to hand to gs_restore_search_path() (AtEOXact_GUC).
 */
extern int	gs_fix_search_path(void);
extern void gs_restore_search_path(int nestlevel);

#endif							/* GANGSCHED_TENANCY_H */
