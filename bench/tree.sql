/*
 * bench/tree.sql — turn cluster.sql's flat teams into a three-level team
 * tree (issue 15): the :teams leaf teams team1 … teamN, in groups of
 * :fanout under inner teams org1 … orgM, the orgs alternately under two
 * top-level teams div1 and div2. Every inner team gets a quota row equal to
 * the sum of its children's (a child's nominal carved out of its
 * parent's), so the hierarchical rules check every level. Leaves keep
 * cluster.sql's equal quotas and weight 1; orgs and divs weight 1.
 * psql variables: teams, fanout.
 */
SELECT count(gangsched.add_team(format('org%s', o))) AS orgs_added
  FROM generate_series(1, (:teams + :fanout - 1) / :fanout) AS o;
SELECT count(gangsched.add_team(format('div%s', d))) AS divs_added
  FROM generate_series(1, 2) AS d;
UPDATE gangsched.teams l SET parent_id = o.id
  FROM gangsched.teams o
 WHERE l.name ~ '^team[0-9]+$'
   AND o.name = format('org%s', (substr(l.name, 5)::int - 1) / :fanout + 1);
UPDATE gangsched.teams o SET parent_id = d.id
  FROM gangsched.teams d
 WHERE o.name ~ '^org[0-9]+$'
   AND d.name = format('div%s', (substr(o.name, 4)::int - 1) % 2 + 1);
-- inner quotas: the sum of the children's, orgs first, then divs
SELECT count(gangsched.set_quota(team => s.name, pool => 'main', gpus => s.gpus, cpus => s.cpus,
                                 mem_gb => s.mem_gb, net_gbps => s.net_gbps)) AS org_quotas
  FROM (SELECT p.name, sum(q.gpus) AS gpus, sum(q.cpus) AS cpus, sum(q.mem_gb) AS mem_gb, sum(q.net_gbps) AS net_gbps
          FROM gangsched.teams p JOIN gangsched.teams c ON c.parent_id = p.id
          JOIN gangsched.quotas q ON q.team_id = c.id
         WHERE p.name ~ '^org' GROUP BY p.name) s;
SELECT count(gangsched.set_quota(team => s.name, pool => 'main', gpus => s.gpus, cpus => s.cpus,
                                 mem_gb => s.mem_gb, net_gbps => s.net_gbps)) AS div_quotas
  FROM (SELECT p.name, sum(q.gpus) AS gpus, sum(q.cpus) AS cpus, sum(q.mem_gb) AS mem_gb, sum(q.net_gbps) AS net_gbps
          FROM gangsched.teams p JOIN gangsched.teams c ON c.parent_id = p.id
          JOIN gangsched.quotas q ON q.team_id = c.id
         WHERE p.name ~ '^div' GROUP BY p.name) s;
SELECT count(*) FILTER (WHERE parent_id IS NULL) AS top, count(*) AS teams FROM gangsched.teams;
