/* ------------------------------------------------------------------ */
/* pg_dump: the scheduler's state is dumped (docs/operations.md)        */
/* ------------------------------------------------------------------ */

-- The tables and sequences of an extension are its members: pg_dump writes
-- CREATE EXTENSION gangsched for all of them and none of their rows, unless
-- they are registered here as configuration tables. Every table whose rows
-- are state is registered with an empty filter (all rows: the install
-- script inserts none), so a dump holds the whole scheduler, and a restore
-- (CREATE EXTENSION, then the rows) resumes from the dumped state.
--
-- pg_dump orders the data of configuration tables by their foreign keys
-- (pools before nodes, node_classes before nodes and domain_classes, teams
-- before quotas, members, team_pending and gangs, nodes before devices,
-- datasets and agents), so a plain pg_restore needs no --disable-triggers.
-- The generated columns (gangs.f_*) are left out of the COPY and computed
-- again; the identity columns are copied as they are (COPY does not apply
-- GENERATED ALWAYS), and pg_dump writes each identity sequence's setval
-- along with its table's data, so they need no registration of their own
-- (test/t/030_backup.pl checks that new rows continue after the restored
-- ones). The triggers on these tables fire on UPDATE, DELETE or TRUNCATE
-- (the append-only guards) or only invalidate admission caches (the
-- statement triggers of 80_c.sql): none refuses the restore's COPY.
--
-- Not registered: round_lock (no rows ever, only its lock is used).
-- One call per statement (two calls in one statement would update the
-- extension's catalog row twice in one command).
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY[
        -- inventory
        'gangsched.topology_levels', 'gangsched.pools', 'gangsched.node_classes', 'gangsched.nodes',
        'gangsched.domain_classes', 'gangsched.devices', 'gangsched.datasets',
        -- tenancy: teams, quotas, the roles bound to teams and nodes (regrole:
        -- dumped as role names, restored by name; the roles are cluster-wide
        -- and must exist first, see pg_dumpall --roles-only)
        'gangsched.teams', 'gangsched.quotas', 'gangsched.members', 'gangsched.agents',
        -- submit()'s per-team pending counts: a cache, but consistent with the
        -- dumped jobs and queue_position_seq (a sequence read later than the
        -- dump's snapshot only raises its bound, which makes submit count again)
        'gangsched.team_pending',
        -- reservations and maintenance windows (73_reservations.sql)
        'gangsched.bookings',
        -- jobs, what they hold now and the capacity held for nominated jobs
        'gangsched.gangs', 'gangsched.held_slots', 'gangsched.holds',
        -- history, and what archive_history() moved out of it (71_retention.sql)
        'gangsched.allocations', 'gangsched.events',
        'gangsched.gangs_archive', 'gangsched.allocations_archive', 'gangsched.events_archive',
        -- the metrics' counters (75_metrics.sql): a restore loads the events
        -- with COPY, which they do not count again
        'gangsched.metric_counters', 'gangsched.metric_deltas'] LOOP
        PERFORM pg_catalog.pg_extension_config_dump(t::pg_catalog.regclass, '');
    END LOOP;
END $$;

-- Queue positions: a free-standing sequence (not owned by a column), so
-- pg_dump writes its setval only when it is registered; restored jobs keep
-- their positions and new ones come after them.
SELECT pg_catalog.pg_extension_config_dump('gangsched.queue_position_seq', '');

-- The identity sequences (pools, nodes, node_classes, teams, gangs,
-- allocations, events): owned by their columns, but pg_dump writes no
-- setval for them when the table is an extension's configuration table,
-- and a restored scheduler would hand out ids 1, 2, … again (a duplicate
-- key on the first add_team or submit). Registered too.
DO $$
DECLARE
    s pg_catalog.regclass;
BEGIN
    FOR s IN
        SELECT pg_catalog.pg_get_serial_sequence(pg_catalog.format('%I.%I', n.nspname, c.relname), a.attname)::pg_catalog.regclass
          FROM pg_catalog.pg_attribute a
          JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
          JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'gangsched' AND c.relkind = 'r' AND a.attidentity <> '' AND NOT a.attisdropped
         ORDER BY 1
    LOOP
        PERFORM pg_catalog.pg_extension_config_dump(s, '');
    END LOOP;
END $$;
