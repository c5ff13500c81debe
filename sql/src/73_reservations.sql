/* ------------------------------------------------------------------ */
/* Advance reservations and maintenance windows (docs/time.md)         */
/* ------------------------------------------------------------------ */

-- The table is gangsched.bookings (17_reservations_schema.sql); the round
-- honours it in C (src/schedule.c: gs_reservation_masks) and applies its
-- starts and ends with _reservation_rules() below.

-- The nodes a booking asks for, in topology order: a node list, or a pool,
-- a topology domain (a topology prefix such as 'z1.r2') or both. Refuses
-- anything else; every listed node must exist.
CREATE FUNCTION gangsched._booking_target(pool text, nodes text[], domain text,
                                          OUT target text, OUT node_ids int[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    pid  int;
    k    int;
    nm   text;
BEGIN
    IF nodes IS NOT NULL AND (pool IS NOT NULL OR domain IS NOT NULL) THEN
        RAISE EXCEPTION 'give a node list or a pool and domain, not both'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A node list names the nodes; a pool or a topology domain names the nodes inside it.',
                  HINT = 'Pass nodes => ARRAY[...] alone, or pool => and/or domain =>.';
    END IF;
    IF nodes IS NULL AND pool IS NULL AND domain IS NULL THEN
        RAISE EXCEPTION 'no capacity named'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name a pool (pool =>), a topology domain (domain =>, e.g. ''z1.r2'') or the nodes (nodes => ARRAY[...]).';
    END IF;
    IF nodes IS NOT NULL THEN
        IF cardinality(nodes) = 0 OR cardinality(nodes) > 10000 THEN
            RAISE EXCEPTION 'a node list has 1 to 10000 nodes, not %', cardinality(nodes)
                USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the nodes to book, or book a pool or a domain.';
        END IF;
        FOREACH nm IN ARRAY nodes LOOP
            PERFORM gangsched._node(nm);    -- 23503 for an unknown node
        END LOOP;
        SELECT array_agg(n.id ORDER BY n.pool_id, n.topology, n.name) INTO node_ids
          FROM gangsched.nodes n WHERE n.name = ANY (nodes);
        target := 'nodes ' || array_to_string(ARRAY(SELECT DISTINCT x FROM unnest(nodes) x ORDER BY 1), ',');
        RETURN;
    END IF;
    IF pool IS NOT NULL THEN
        pid := gangsched._pool_id(pool);
    END IF;
    IF domain IS NOT NULL THEN
        IF domain !~ '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$' OR length(domain) > 1000 THEN
            RAISE EXCEPTION 'invalid topology domain %', gangsched._shown(domain)
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'A domain is a topology prefix: labels separated by dots, outermost first.',
                      HINT = 'Use a prefix of the nodes'' topology, such as ''z1'' or ''z1.r2''.';
        END IF;
        k := cardinality(string_to_array(domain, '.'));
    END IF;
    SELECT array_agg(n.id ORDER BY n.pool_id, n.topology, n.name) INTO node_ids
      FROM gangsched.nodes n
     WHERE (pid IS NULL OR n.pool_id = pid)
       AND (k IS NULL OR (gangsched._nlevel(n.topology) >= k
                          AND gangsched._subpath(n.topology, 0, k)::text = domain));
    IF node_ids IS NULL THEN
        RAISE EXCEPTION 'no node in %', concat_ws(' ', 'pool ' || quote_literal(pool), 'domain ' || quote_literal(domain))
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'See gangsched.nodes for the pools and topologies.';
    END IF;
    target := concat_ws(' ', 'pool ' || pool, 'domain ' || domain);
END $$;

-- Book capacity: a reservation (tid set) or a maintenance window (tid
-- NULL). Whole nodes: all of the target's, or (gpus given) the first of
-- its nodes in topology order that no other booking holds at an
-- overlapping time, until they have `gpus` GPUs. Refuses a window that
-- overlaps another booking of one of those nodes (23P01).
CREATE FUNCTION gangsched._add_booking(kind text, name text, tid int, pool text, nodes text[], domain text,
                                       gpus int, starts timestamptz, ends timestamptz) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t      timestamptz := gangsched.now();
    tg     record;
    busy   record;
    chosen int[];
    got    int;
    total  int;
    id     int;
BEGIN
    PERFORM gangsched._check_name(name, kind || ' name');
    IF starts IS NULL OR ends IS NULL THEN
        RAISE EXCEPTION 'a % needs starts and ends', kind
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Give starts => and ends => as timestamps.';
    END IF;
    IF starts = '-infinity' OR ends = 'infinity' OR ends <= starts THEN
        RAISE EXCEPTION '% window [%, %) is empty or unbounded', kind, starts, ends
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give finite times with ends after starts.';
    END IF;
    IF ends <= t THEN
        RAISE EXCEPTION '% window ends at %, before now (%)', kind, ends, t
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A booking for the past holds nothing.',
                  HINT = 'Give an end after gangsched.now().';
    END IF;
    IF gpus IS NOT NULL AND (gpus < 1 OR gpus > 1000000) THEN
        RAISE EXCEPTION 'gpus must be 1 to 1000000, not %', gpus
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = 'Leave gpus out to book every node of the target.';
    END IF;
    -- one booking at a time, and no round in progress: a round that read
    -- the bookings before this commits could place work it forbids
    LOCK TABLE gangsched.round_lock IN EXCLUSIVE MODE;
    LOCK TABLE gangsched.bookings IN SHARE ROW EXCLUSIVE MODE;
    IF EXISTS (SELECT FROM gangsched.bookings b WHERE b.name = _add_booking.name) THEN
        RAISE EXCEPTION 'a reservation or maintenance window named "%" already exists', name
            USING ERRCODE = 'unique_violation',
                  HINT = 'Choose another name, or drop the old one with gangsched.drop_reservation().';
    END IF;
    IF (SELECT count(*) FROM gangsched.bookings b WHERE NOT b.ended AND b.ends > t) >= 64 THEN
        RAISE EXCEPTION 'too many reservations and maintenance windows'
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = 'A round honours at most 64 current or future reservations and maintenance windows.',
                  HINT = 'Drop one with gangsched.drop_reservation(), or book wider ones.';
    END IF;
    -- a window that began in the past begins now: nothing placed before
    -- this booking is counted against it
    starts := GREATEST(starts, t);
    tg := gangsched._booking_target(pool, nodes, domain);
    IF _add_booking.gpus IS NULL THEN
        SELECT b.name, b.starts, b.ends, n.name AS node INTO busy
          FROM gangsched.bookings b JOIN gangsched.nodes n ON n.id = ANY (b.node_ids)
         WHERE n.id = ANY (tg.node_ids) AND b.starts < _add_booking.ends AND b.ends > _add_booking.starts
         ORDER BY b.starts, n.name LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION '% "%" overlaps "%" on node %', kind, name, busy.name, busy.node
                USING ERRCODE = 'exclusion_violation',
                      DETAIL = format('"%s" books node %s from %s to %s; a node belongs to one booking at a time.',
                                      busy.name, busy.node, busy.starts, busy.ends),
                      HINT = 'Book other nodes, another time, fewer GPUs (gpus =>), or drop the other booking first.';
        END IF;
        chosen := tg.node_ids;
    ELSE
        WITH c AS (
            SELECT n.id, n.gpus, ord.i,
                   sum(n.gpus) OVER (ORDER BY ord.i) - n.gpus AS before
              FROM unnest(tg.node_ids) WITH ORDINALITY ord(nid, i)
              JOIN gangsched.nodes n ON n.id = ord.nid
             WHERE n.gpus > 0
               AND NOT EXISTS (SELECT FROM gangsched.bookings b
                                WHERE n.id = ANY (b.node_ids)
                                  AND b.starts < _add_booking.ends AND b.ends > _add_booking.starts))
        SELECT array_agg(c.id ORDER BY c.i) FILTER (WHERE c.before < _add_booking.gpus),
               COALESCE(sum(c.gpus), 0)
          INTO chosen, got
          FROM c;
        IF got < _add_booking.gpus THEN
            SELECT COALESCE(sum(n.gpus), 0) INTO total FROM gangsched.nodes n WHERE n.id = ANY (tg.node_ids);
            IF total < _add_booking.gpus THEN
                RAISE EXCEPTION '% "%" asks for % GPUs; % has %', kind, name, gpus, tg.target, total
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Ask for fewer GPUs, or name a larger target.';
            END IF;
            SELECT string_agg(DISTINCT b.name, ', ' ORDER BY b.name) AS names INTO busy
              FROM gangsched.bookings b
             WHERE b.node_ids && tg.node_ids AND b.starts < _add_booking.ends AND b.ends > _add_booking.starts;
            RAISE EXCEPTION '% "%" cannot have % GPUs of % from % to %', kind, name, gpus, tg.target, starts, ends
                USING ERRCODE = 'exclusion_violation',
                      DETAIL = format('%s of its %s GPUs are on nodes that %s book%s at an overlapping time; %s are left.',
                                      total - got, total, busy.names, CASE WHEN busy.names LIKE '%,%' THEN '' ELSE 's' END, got),
                      HINT = 'Ask for fewer GPUs, book another time or target, or drop the other booking first.';
        END IF;
    END IF;
    INSERT INTO gangsched.bookings (name, team_id, target, node_ids, gpus, starts, ends, created_at)
    VALUES (name, tid, tg.target, chosen,
            (SELECT COALESCE(sum(n.gpus), 0) FROM gangsched.nodes n WHERE n.id = ANY (chosen)),
            starts, ends, t)
    RETURNING bookings.id INTO id;
    PERFORM gangsched._event(kind, NULL, NULL, tid, 'created',
                             gangsched._booking_detail(id));
    RETURN id;
END $$;

-- A booking as an event's detail: its name, team, nodes, GPUs and window.
CREATE FUNCTION gangsched._booking_detail(bid int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('name', b.name, 'team', t.name, 'target', b.target,
                              'nodes', ARRAY(SELECT n.name FROM gangsched.nodes n
                                              WHERE n.id = ANY (b.node_ids) ORDER BY n.name),
                              'gpus', b.gpus, 'starts', b.starts, 'ends', b.ends)
      FROM gangsched.bookings b LEFT JOIN gangsched.teams t ON t.id = b.team_id
     WHERE b.id = bid
$$;

-- Operator: from `starts` until `ends` the capacity belongs to the team's
-- jobs (its subtree's, for an inner team) and to jobs that name the
-- reservation; before `starts` other jobs use it only when their time
-- limit ends by then. Returns the reservation's id.
CREATE FUNCTION gangsched.add_reservation(name text, team text, pool text DEFAULT NULL, nodes text[] DEFAULT NULL,
                                          domain text DEFAULT NULL, gpus int DEFAULT NULL,
                                          starts timestamptz DEFAULT NULL, ends timestamptz DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gangsched._require_operator('add a reservation');
    RETURN gangsched._add_booking('reservation', name, gangsched._team_id(team), pool, nodes, domain, gpus, starts, ends);
END $$;

-- Operator: a maintenance window: no job may use the nodes from `starts`
-- until `ends`; they go down at the start and back to their state at the
-- end. Returns its id.
CREATE FUNCTION gangsched.add_maintenance(name text, pool text DEFAULT NULL, nodes text[] DEFAULT NULL,
                                          domain text DEFAULT NULL,
                                          starts timestamptz DEFAULT NULL, ends timestamptz DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM gangsched._require_operator('add a maintenance window');
    RETURN gangsched._add_booking('maintenance', name, NULL, pool, nodes, domain, NULL, starts, ends);
END $$;

-- A booking's end: its event and, for a maintenance window, its nodes back
-- to the state they had at its start when they are still down.
CREATE FUNCTION gangsched._booking_end(bid int, t timestamptz, why text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    b  gangsched.bookings;
    n  record;
BEGIN
    UPDATE gangsched.bookings x SET ended = true WHERE x.id = bid AND NOT x.ended RETURNING * INTO b;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF b.team_id IS NULL AND b.started THEN
        FOR n IN SELECT nd.id, nd.name, nd.state, b.restore ->> nd.id::text AS before
                   FROM gangsched.nodes nd
                  WHERE nd.id = ANY (b.node_ids) AND nd.state = 'down'
                    AND b.restore ->> nd.id::text IN ('up', 'draining')
                  ORDER BY nd.id FOR UPDATE OF nd LOOP
            UPDATE gangsched.nodes SET state = n.before, state_since = t, down_by_timeout = false WHERE id = n.id;
            INSERT INTO gangsched.events (at, kind, node_id, reason, detail)
            VALUES (t, 'node_state', n.id, format('down -> %s', n.before),
                    jsonb_build_object('node', n.name, 'maintenance', b.name));
        END LOOP;
    END IF;
    INSERT INTO gangsched.events (at, kind, team_id, reason, detail)
    VALUES (t, CASE WHEN b.team_id IS NULL THEN 'maintenance' ELSE 'reservation' END, b.team_id, why,
            gangsched._booking_detail(bid));
END $$;

-- Operator: drop a reservation or maintenance window. One that has not
-- started is removed; one in progress ends now (a maintenance window's
-- nodes go back to their state) and stays in the history; one that has
-- ended is removed from the view and from reservation_usage().
CREATE FUNCTION gangsched.drop_reservation(name text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t  timestamptz := gangsched.now();
    b  gangsched.bookings;
    kind text;
BEGIN
    PERFORM gangsched._require_operator('drop a reservation');
    LOCK TABLE gangsched.round_lock IN EXCLUSIVE MODE;
    SELECT * INTO b FROM gangsched.bookings x WHERE x.name = drop_reservation.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reservation "%" does not exist', name
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'See gangsched.reservations for the reservations and maintenance windows.';
    END IF;
    kind := CASE WHEN b.team_id IS NULL THEN 'maintenance' ELSE 'reservation' END;
    IF b.started AND NOT b.ended AND b.ends > t AND t > b.starts THEN
        UPDATE gangsched.bookings x SET ends = t WHERE x.id = b.id;
        PERFORM gangsched._booking_end(b.id, t, 'dropped');
        RETURN;
    END IF;
    IF b.started AND NOT b.ended THEN
        PERFORM gangsched._booking_end(b.id, t, 'dropped');
    ELSIF NOT b.ended THEN
        PERFORM gangsched._event(kind, NULL, NULL, b.team_id, 'dropped', gangsched._booking_detail(b.id));
    END IF;
    DELETE FROM gangsched.bookings x WHERE x.id = b.id;
    PERFORM gangsched._wake();
END $$;

-- The round's time rule for bookings (src/round.c calls it only when some
-- booking has not ended): starts and ends are recorded once, with their
-- events; a maintenance window's nodes go draining when jobs without a
-- limit are no longer placed there (gangsched.maintenance_guard before
-- the start: only an event, the node stays up for jobs that end in time),
-- draining then down at the start (their jobs requeued, as
-- set_node_state(..., 'down') does) and back at the end. Returns how many
-- starts and ends it applied.
CREATE FUNCTION gangsched._reservation_rules() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t      timestamptz := gangsched.now();
    guard  interval := COALESCE(gangsched._setting_interval('gangsched.maintenance_guard'), '0'::interval);
    b      gangsched.bookings;
    n      record;
    jobs   bigint[];
    k      int := 0;
BEGIN
    FOR b IN SELECT * FROM gangsched.bookings x
              WHERE NOT x.ended AND (x.starts <= t OR x.ends <= t
                                     OR (x.team_id IS NULL AND x.restore IS NULL AND x.starts - guard <= t))
              ORDER BY x.starts, x.id FOR UPDATE LOOP
        IF b.team_id IS NULL AND b.restore IS NULL THEN
            -- the drain: from now jobs without a limit are kept off its nodes
            UPDATE gangsched.bookings x SET restore = '{}' WHERE x.id = b.id;
            INSERT INTO gangsched.events (at, kind, reason, detail)
            VALUES (t, 'maintenance', 'draining', gangsched._booking_detail(b.id));
        END IF;
        IF NOT b.started AND b.starts <= t THEN
            k := k + 1;
            IF b.team_id IS NULL THEN
                -- the nodes' states now, restored at the end; up -> draining -> down
                UPDATE gangsched.bookings x
                   SET restore = (SELECT jsonb_object_agg(nd.id::text, nd.state) FROM gangsched.nodes nd
                                   WHERE nd.id = ANY (b.node_ids))
                 WHERE x.id = b.id;
                FOR n IN SELECT nd.id, nd.name, nd.state FROM gangsched.nodes nd
                          WHERE nd.id = ANY (b.node_ids) AND nd.state <> 'down'
                          ORDER BY nd.id FOR UPDATE LOOP
                    UPDATE gangsched.nodes SET state = 'down', state_since = t, down_by_timeout = false WHERE id = n.id;
                    INSERT INTO gangsched.events (at, kind, node_id, reason, detail)
                    SELECT t, 'node_state', n.id, s.reason, jsonb_build_object('node', n.name, 'maintenance', b.name)
                      FROM (VALUES (1, 'up -> draining'), (2, 'draining -> down')) s(i, reason)
                     WHERE n.state = 'draining' AND s.i = 2 OR n.state = 'up'
                     ORDER BY s.i;
                    SELECT array_agg(l.id ORDER BY l.id) INTO jobs
                      FROM (SELECT g.id FROM gangsched.gangs g
                             WHERE g.id IN (SELECT a.job FROM gangsched.allocations a
                                             WHERE a.node_id = n.id AND upper_inf(a.during)
                                            UNION
                                            SELECT h.job FROM gangsched.holds h WHERE h.node_id = n.id)
                             ORDER BY g.id FOR UPDATE) l;
                    PERFORM gangsched._requeue_many(jobs, format('node %s went down for maintenance %s', n.name, b.name));
                END LOOP;
            END IF;
            UPDATE gangsched.bookings x SET started = true WHERE x.id = b.id;
            INSERT INTO gangsched.events (at, kind, team_id, reason, detail)
            VALUES (t, CASE WHEN b.team_id IS NULL THEN 'maintenance' ELSE 'reservation' END, b.team_id,
                    'started', gangsched._booking_detail(b.id));
        END IF;
        IF b.ends <= t THEN
            k := k + 1;
            UPDATE gangsched.bookings x SET started = true WHERE x.id = b.id;
            PERFORM gangsched._booking_end(b.id, t, 'ended');
        END IF;
    END LOOP;
    RETURN k;
END $$;

-- Every reservation and maintenance window not dropped: state future
-- (before its start), active, or ended, by the scheduler's clock.
CREATE VIEW gangsched.reservations AS
SELECT b.name,
       CASE WHEN b.team_id IS NULL THEN 'maintenance' ELSE 'reservation' END AS kind,
       t.name AS team,
       b.target,
       ARRAY(SELECT n.name FROM gangsched.nodes n WHERE n.id = ANY (b.node_ids) ORDER BY n.name) AS nodes,
       b.gpus,
       b.starts,
       b.ends,
       CASE WHEN gangsched.now() < b.starts THEN 'future'
            WHEN gangsched.now() < b.ends THEN 'active'
            ELSE 'ended' END AS state,
       b.created_at
  FROM gangsched.bookings b LEFT JOIN gangsched.teams t ON t.id = b.team_id;

-- submit()'s reservation: its id. The reservation must exist, not be a
-- maintenance window, not have ended, and a portal may name only one of a
-- team it acts for.
CREATE FUNCTION gangsched._submit_reservation(reservation text) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    b gangsched.bookings;
BEGIN
    SELECT * INTO b FROM gangsched.bookings x WHERE x.name = reservation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reservation "%" does not exist', reservation
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'See gangsched.reservations for the reservations.';
    END IF;
    IF b.team_id IS NULL THEN
        RAISE EXCEPTION '"%" is a maintenance window, not a reservation', reservation
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'No job may use the nodes of a maintenance window while it lasts.',
                  HINT = 'Submit without a reservation, or name a reservation.';
    END IF;
    IF b.ends <= gangsched.now() THEN
        RAISE EXCEPTION 'reservation "%" ended at %', reservation, b.ends
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Submit without a reservation, or name one that has not ended.';
    END IF;
    PERFORM gangsched._require_team(b.team_id, format('submit into reservation "%s"', reservation));
    RETURN b.id;
END $$;

-- A job that names a reservation runs only on its nodes (submit): refused
-- when a worker needs more GPUs than the reservation's largest node has
-- (53S01), or when even the job's minimum (the whole gang when rigid)
-- needs more GPUs than all its nodes (53S04), as for a gang larger than
-- every eligible pool (40_admission.sql).
CREATE FUNCTION gangsched._check_reservation_fits(booking int, reservation text, workers int, gpus numeric)
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
    total numeric;
    largest int;
BEGIN
    SELECT coalesce(sum(n.gpus), 0), coalesce(max(n.gpus), 0) INTO total, largest
      FROM gangsched.bookings b JOIN gangsched.nodes n ON n.id = ANY (b.node_ids)
     WHERE b.id = booking;
    IF gpus > largest THEN
        RAISE EXCEPTION 'a worker of % GPUs is larger than every node of reservation "%"', gpus, reservation
            USING ERRCODE = '53S01',
                  DETAIL = format('The largest node of the reservation has %s GPUs.', largest),
                  HINT = 'Ask for fewer GPUs per worker, or name a reservation with larger nodes.';
    END IF;
    IF workers * gpus > total THEN
        RAISE EXCEPTION 'the job needs % GPUs, more than reservation "%" holds', workers * gpus, reservation
            USING ERRCODE = '53S04',
                  DETAIL = format('The nodes of the reservation have %s GPUs in all.', total),
                  HINT = 'Ask for fewer workers (or a lower min_replicas), or name a larger reservation.';
    END IF;
END $$;

-- Analysts: each reservation's booked GPU-hours against those its team's
-- jobs (and jobs that named it) used on its nodes inside its window, up to
-- now for an active one; other_gpu_hours are other jobs' allocations there
-- (jobs placed before it was created, which it does not stop). Maintenance
-- windows are not listed. Allocations moved by archive_history() are not
-- counted.
CREATE FUNCTION gangsched.reservation_usage()
RETURNS TABLE (name text, team text, state text, starts timestamptz, ends timestamptz, booked_gpu_hours float8,
               used_gpu_hours float8, used_fraction float8, other_gpu_hours float8)
LANGUAGE sql STABLE SET jit = off AS $$
WITH RECURSIVE b AS (
    SELECT x.*, LEAST(x.ends, GREATEST(x.starts, gangsched.now())) AS upto
      FROM gangsched.bookings x WHERE x.team_id IS NOT NULL),
sub(bid, tid) AS (
    SELECT b.id, b.team_id FROM b
    UNION
    SELECT sub.bid, t.id FROM sub JOIN gangsched.teams t ON t.parent_id = sub.tid),
u AS (
    SELECT b.id,
           sum(a.gpus::float8 * date_part('epoch', LEAST(COALESCE(upper(a.during), b.upto), b.upto)
                                                 - GREATEST(lower(a.during), b.starts)) / 3600)
               FILTER (WHERE g.reservation_id = b.id OR EXISTS (SELECT FROM sub WHERE sub.bid = b.id AND sub.tid = g.team_id))
               AS own,
           sum(a.gpus::float8 * date_part('epoch', LEAST(COALESCE(upper(a.during), b.upto), b.upto)
                                                 - GREATEST(lower(a.during), b.starts)) / 3600)
               FILTER (WHERE NOT (g.reservation_id IS NOT DISTINCT FROM b.id
                                  OR EXISTS (SELECT FROM sub WHERE sub.bid = b.id AND sub.tid = g.team_id)))
               AS other
      FROM b
      JOIN gangsched.allocations a ON a.node_id = ANY (b.node_ids)
                                  AND lower(a.during) < b.upto AND COALESCE(upper(a.during), 'infinity') > b.starts
      JOIN gangsched.gangs g ON g.id = a.job
     GROUP BY b.id)
SELECT b.name, t.name,
       CASE WHEN gangsched.now() < b.starts THEN 'future' WHEN gangsched.now() < b.ends THEN 'active' ELSE 'ended' END,
       b.starts, b.ends,
       b.gpus::float8 * date_part('epoch', b.ends - b.starts) / 3600,
       COALESCE(u.own, 0),
       COALESCE(u.own, 0) / NULLIF(b.gpus::float8 * date_part('epoch', b.ends - b.starts) / 3600, 0),
       COALESCE(u.other, 0)
  FROM b JOIN gangsched.teams t ON t.id = b.team_id LEFT JOIN u ON u.id = b.id
 ORDER BY b.starts, b.name
$$;
