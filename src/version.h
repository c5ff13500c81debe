/*
 * version.h — the library's version against the catalog installed in the
 * current database (docs/upgrade.md).
 */
#ifndef GANGSCHED_VERSION_H
#define GANGSCHED_VERSION_H

/* The version this library was built for (gangsched.control's default_version). */
extern const char *gs_library_version(void);

/* The version of gangsched installed in this database (palloc'd), NULL if none. */
extern char *gs_installed_version(void);

/*
 * ERROR (55000, with the hint to run ALTER EXTENSION gangsched UPDATE)
 * unless the installed catalog is the library's version: the C code reads
 * and writes the tables of its own version only.
 */
extern void gs_require_catalog_version(const char *action);

#endif							/* GANGSCHED_VERSION_H */
