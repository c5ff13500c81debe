BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS gangsched CASCADE;
SELECT plan(2);
SELECT has_schema('gangsched');
SELECT is_empty('SELECT * FROM gangsched.check_invariants()', 'no invariant violated on an empty cluster');
SELECT * FROM finish();
ROLLBACK;
