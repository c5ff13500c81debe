/*
 * gangsched 0.2.0 — install script (assembled from the files in sql/src).
 *
 * Owns the schema: inventory (levels, pools, nodes, devices, datasets),
 * tenancy (teams, quotas), the job queue, allocations (history + the held
 * slots that make double allocation impossible), holds for nominated jobs,
 * the events log, and the SQL-level API. The scheduling round and the
 * placement engine are C (src/); this file is the contract's SQL face.
 *
 * Storage choice for allocations (see docs/storage.md): one history row per
 * worker in `allocations` (time range, append-only, closed on release) and
 * one btree-unique row per held device slice in `held_slots`, deleted on
 * release. The unique key (node, slot) is what makes the database refuse a
 * slice to two jobs at once, at btree cost (a few µs a row) rather than GiST
 * exclusion cost (35–60 µs a row).
 */
\echo Use "CREATE EXTENSION gangsched CASCADE" to load this file. \quit
