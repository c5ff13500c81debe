/*
 * gangsched 0.1 -> 0.2 — upgrade script (ALTER EXTENSION gangsched UPDATE).
 *
 * The hand-written changes since 0.1, in the order the install script
 * (the files of sql/src/) makes them; the build appends sql/src/97_dump.sql,
 * 98_privileges.sql and 99_search_path.sql, which re-register the state
 * tables for pg_dump and re-apply grants, SECURITY DEFINER and search_path
 * to every function (CREATE OR REPLACE resets the latter two).
 *
 * test/t/050_upgrade.pl installs 0.1, updates to 0.2 and compares the
 * catalog with a fresh 0.2 install: anything changed in sql/src/ and not
 * here fails it. docs/upgrade.md.
 */
\echo Use "ALTER EXTENSION gangsched UPDATE TO '0.2'" to load this file. \quit

