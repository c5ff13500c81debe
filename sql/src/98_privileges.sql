/* ------------------------------------------------------------------ */
/* Privileges (docs/security.md)                                       */
/* ------------------------------------------------------------------ */

-- Nobody but the extension's owner has any privilege on the tables and
-- sequences: every change goes through the API, SECURITY DEFINER functions
-- that check the caller's role (sql/src/12_tenancy.sql). Operators may read
-- the tables; the other roles read only the views below, which show each
-- role its part.
REVOKE ALL ON SCHEMA gangsched FROM PUBLIC;
GRANT USAGE ON SCHEMA gangsched TO gangsched_operator, gangsched_portal, gangsched_agent, gangsched_analyst;
REVOKE ALL ON ALL TABLES IN SCHEMA gangsched FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA gangsched FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA gangsched FROM PUBLIC;

GRANT SELECT ON ALL TABLES IN SCHEMA gangsched TO gangsched_operator;
-- nobody but the owner may lock the round's lock table (src/round.c)
REVOKE ALL ON gangsched.round_lock FROM gangsched_operator;
GRANT SELECT ON gangsched.jobs, gangsched.queue, gangsched.placements, gangsched.team_shares TO gangsched_portal;
GRANT SELECT ON gangsched.jobs, gangsched.queue, gangsched.placements, gangsched.team_shares,
                gangsched.allocation_history, gangsched.event_log TO gangsched_analyst;
-- the metrics (75_metrics.sql): every team's queue and usage, so not portals
GRANT SELECT ON gangsched.metrics TO gangsched_analyst;
-- reservations and maintenance windows (docs/time.md): operators book, analysts read
GRANT SELECT ON gangsched.reservations TO gangsched_analyst;

-- EXECUTE by function name, every overload.
DO $$
DECLARE
    g record;
    f regprocedure;
BEGIN
    FOR g IN
        SELECT * FROM (VALUES
            -- the views call these with the reader's privileges
            ('_visibility', 'gangsched_operator, gangsched_portal, gangsched_analyst'),
            ('_level_name', 'gangsched_operator, gangsched_portal, gangsched_analyst'),
            ('_queue_visible', 'gangsched_operator, gangsched_portal, gangsched_analyst'),
            ('_team_shares', 'gangsched_operator, gangsched_portal, gangsched_analyst'),
            -- the scheduler's clock (virtual under gangsched.clock_override):
            -- everyone who reads times relative to it
            ('now', 'gangsched_operator, gangsched_portal, gangsched_agent, gangsched_analyst'),
            -- portals act for their teams
            ('submit', 'gangsched_operator, gangsched_portal'),
            ('resize', 'gangsched_operator, gangsched_portal'),
            ('cancel', 'gangsched_operator, gangsched_portal'),
            ('why_pending', 'gangsched_operator, gangsched_portal'),
            -- agents act for their nodes
            ('node_channel', 'gangsched_operator, gangsched_agent'),
            ('node_work', 'gangsched_operator, gangsched_agent'),
            ('node_heartbeat', 'gangsched_operator, gangsched_agent'),
            ('job_started', 'gangsched_operator, gangsched_agent'),
            ('job_checkpointed', 'gangsched_operator, gangsched_agent'),
            ('job_finished', 'gangsched_operator, gangsched_agent'),
            ('job_released', 'gangsched_operator, gangsched_agent'),
            ('workers_released', 'gangsched_operator, gangsched_agent'),
            -- analysts read the history
            ('usage', 'gangsched_operator, gangsched_analyst'),
            ('utilization', 'gangsched_operator, gangsched_analyst'),
            ('snapshot', 'gangsched_operator, gangsched_analyst'),
            ('replica_history', 'gangsched_operator, gangsched_analyst'),
            ('queue_waits', 'gangsched_operator, gangsched_analyst'),
            ('preemption_summary', 'gangsched_operator, gangsched_analyst'),
            ('queue_depth', 'gangsched_operator, gangsched_analyst'),
            ('time_limit_use', 'gangsched_operator, gangsched_analyst'),
            ('reservation_usage', 'gangsched_operator, gangsched_analyst'),
            -- the metrics view calls these with the reader's privileges;
            -- the exporter's invariant check (75_metrics.sql)
            ('round_stats', 'gangsched_operator, gangsched_analyst'),
            ('metric_series', 'gangsched_operator, gangsched_analyst'),
            ('queue_wait_buckets', 'gangsched_operator, gangsched_analyst'),
            ('worker_status', 'gangsched_operator, gangsched_analyst'),
            ('invariant_violations', 'gangsched_operator, gangsched_analyst'),
            ('history_horizon', 'gangsched_operator, gangsched_analyst')) AS v(fn, roles)
        UNION ALL
        -- operators: every other API function
        SELECT p.proname, 'gangsched_operator' FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'gangsched'::regnamespace AND p.proname !~ '^_' AND p.prorettype <> 'trigger'::regtype
    LOOP
        FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
                  WHERE p.pronamespace = 'gangsched'::regnamespace AND p.proname = g.fn
        LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f, g.roles);
        END LOOP;
    END LOOP;
END $$;

-- The settings that shape rounds and the clock are superuser-only
-- (PGC_SUSET); operators may set them too.
DO $$
DECLARE
    s text;
BEGIN
    FOREACH s IN ARRAY ARRAY['clock_override', 'start_timeout', 'default_queue_timeout', 'min_runtime',
                             'default_grace', 'max_grace', 'restart_cost', 'queue_order', 'team_order', 'las_thresholds',
                             'las_promote_factor', 'las_preemption', 'preemption', 'fair_preemption', 'backfill',
                             'max_pending_per_team', 'max_workers_per_gang', 'default_time_limit', 'max_time_limit',
                             'maintenance_guard'] LOOP
        EXECUTE pg_catalog.format('GRANT SET ON PARAMETER %I TO gangsched_operator', 'gangsched.' || s);
    END LOOP;
END $$;
