/* ------------------------------------------------------------------ */
/* Elastic gangs: the jobs' columns (docs/elastic.md)                  */
/* ------------------------------------------------------------------ */

-- An elastic job runs on any whole number of data-parallel replicas
-- between min_replicas and the number it was submitted with (a replica is
-- group_size × stages workers). max_workers is the submitted gang; workers
-- is what the job asks for while it waits (= max_workers) and what it
-- holds while it holds capacity (the size a round placed or nominated it
-- at). Both are NULL for a rigid job, whose workers never change.
ALTER TABLE gangsched.gangs
    ADD COLUMN min_replicas int CHECK (min_replicas >= 1),
    ADD COLUMN max_workers  int,
    ADD CONSTRAINT gangs_elastic_check CHECK (
        (min_replicas IS NULL) = (max_workers IS NULL)
        AND max_workers % (group_size * stages) = 0
        AND workers <= max_workers
        AND min_replicas::bigint * group_size * stages <= workers);
-- The round reads the elastic gangs that hold capacity (to grow them,
-- src/loader.c): none in the index when no elastic job runs.
CREATE INDEX gangs_elastic_held_idx ON gangsched.gangs (id)
    WHERE min_replicas IS NOT NULL AND state IN ('placed', 'running');
