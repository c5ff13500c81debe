/* ------------------------------------------------------------------ */
/* Shrinking elastic gangs: the jobs' columns (docs/elastic.md)        */
/* ------------------------------------------------------------------ */

-- A running elastic gang chosen as a victim for only some of its replicas
-- keeps running and gives back its highest-numbered workers (worker >=
-- shrink_to, whole replicas at the end) to the preemptor shrink_for by
-- shrink_deadline (docs/elastic.md#shrinking). All three are set together,
-- only while the gang runs, and cleared when the shrink completes or the
-- gang stops running (the trigger in 67_shrink.sql).
ALTER TABLE gangsched.gangs
    ADD COLUMN shrink_to       int,
    ADD COLUMN shrink_for      bigint,
    ADD COLUMN shrink_deadline timestamptz,
    ADD CONSTRAINT gangs_shrink_check CHECK (
        ((shrink_to IS NULL) = (shrink_for IS NULL) AND (shrink_to IS NULL) = (shrink_deadline IS NULL))
        AND shrink_to >= 1 AND shrink_to < workers);
-- preemptors waiting for a shrink (_place_ready_nominated), overdue shrinks (_kill_overdue)
CREATE INDEX gangs_shrink_for_idx ON gangsched.gangs (shrink_for) WHERE shrink_for IS NOT NULL;
