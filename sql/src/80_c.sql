/* ------------------------------------------------------------------ */
/* C functions                                                         */
/* ------------------------------------------------------------------ */

-- Ask for a round when this transaction commits (the background worker's
-- latch is set after commit; nothing happens on abort).
CREATE FUNCTION gangsched._wake() RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'gs_wake';
