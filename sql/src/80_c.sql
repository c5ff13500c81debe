/* ------------------------------------------------------------------ */
/* C functions                                                         */
/* ------------------------------------------------------------------ */

-- Ask for a round when this transaction commits (the background worker's
-- latch is set after commit; nothing happens on abort).
CREATE FUNCTION gangsched._wake() RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_wake';

-- Admission's fast path: true when the job is certainly admissible (the
-- placement engine places it on the empty registered inventory and its team
-- could hold it); false sends submit to the SQL checks in _admit(), which
-- raise the precise error. Cached per backend, see src/admission.c.
CREATE FUNCTION gangsched._admit_fast(j gangsched.gangs) RETURNS bool
LANGUAGE C STABLE STRICT AS 'MODULE_PATHNAME', 'gs_admit_fast';

-- Any change to the inventory drops every backend's admission cache.
CREATE FUNCTION gangsched._inventory_changed() RETURNS trigger
LANGUAGE C AS 'MODULE_PATHNAME', 'gs_inventory_changed';
CREATE TRIGGER topology_levels_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.topology_levels
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
CREATE TRIGGER pools_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.pools
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
CREATE TRIGGER nodes_changed AFTER INSERT OR UPDATE OF pool_id, topology, cpus, mem_gb, net_gbps, gpus, gpu_model,
                                  gpu_mem_gb, gpu_slices OR DELETE OR TRUNCATE ON gangsched.nodes
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
CREATE TRIGGER teams_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.teams
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
CREATE TRIGGER quotas_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.quotas
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
-- the pools' registered totals, which NULL cpus / mem_gb quotas are
-- proportional to (gangsched._effective_quotas); add_node changes nodes in
-- the same statement, but nothing should depend on that
CREATE TRIGGER node_classes_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gangsched.node_classes
    FOR EACH STATEMENT EXECUTE FUNCTION gangsched._inventory_changed();
