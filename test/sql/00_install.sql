-- Installing pulls in ltree and nothing else (btree_gist, which 0.1 required
-- and never used, is not required since 0.2.0).
CREATE EXTENSION gangsched CASCADE;
SELECT extname FROM pg_extension WHERE extname IN ('ltree', 'btree_gist', 'gangsched') ORDER BY 1;
SELECT extrelocatable, extversion FROM pg_extension WHERE extname = 'gangsched';
SELECT gangsched.set_topology_levels(ARRAY['zone', 'spine', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');
SELECT gangsched.add_node('n1', 'main', 'z1.s1.r1', 64, 512, 100, 8, 'a100', 80);
SELECT gangsched.add_team('vision');
SELECT gangsched.submit('vision', 2, 4);
SELECT job, team, state, workers, gpus FROM gangsched.jobs;
SELECT * FROM gangsched.check_invariants();
DROP EXTENSION gangsched;
