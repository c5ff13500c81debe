/* ------------------------------------------------------------------ */
/* Advance reservations and maintenance windows: the tables           */
/* (docs/time.md#advance-reservations; the rest in 73_reservations.sql) */
/* ------------------------------------------------------------------ */

-- Capacity booked ahead: whole nodes, chosen at creation, from `starts`
-- until `ends`. A reservation (team_id set) gives them to its team's jobs
-- and to jobs that name it; a maintenance window (team_id NULL) to no job.
-- Two rows never share a node at overlapping times (add_reservation and
-- add_maintenance refuse it, 23P01). `started` and `ended` record that a
-- round applied the start and the end (events, and a maintenance window's
-- node states); a dropped reservation that had started keeps its row with
-- `ends` cut to the drop, so its use stays in the history.
CREATE TABLE gangsched.bookings (
    id          int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    team_id     int REFERENCES gangsched.teams,
    target      text NOT NULL,
    node_ids    int[] NOT NULL CHECK (cardinality(node_ids) > 0),
    gpus        int NOT NULL CHECK (gpus >= 0),
    starts      timestamptz NOT NULL,
    ends        timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    started     bool NOT NULL DEFAULT false,
    ended       bool NOT NULL DEFAULT false,
    -- maintenance: each node's state when the window started, by node id,
    -- restored at its end when the node is still down
    restore     jsonb,
    CHECK (ends > starts)
);
-- rounds probe for a reservation not yet ended (one probe, an empty index
-- when there is none)
CREATE INDEX bookings_live_idx ON gangsched.bookings (starts) WHERE NOT ended;

-- A job may name a reservation (submit(..., reservation)): it runs only on
-- the reservation's nodes while it is active. No foreign key: a dropped
-- reservation's jobs become ordinary jobs of their team.
ALTER TABLE gangsched.gangs ADD COLUMN reservation_id int;
