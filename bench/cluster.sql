/*
 * bench/cluster.sql — the synthetic cluster, built through the real API.
 *
 * psql variables (all required; bench/run.sh sets them):
 *   nodes         number of nodes
 *   gpn           GPUs per node
 *   rack_nodes    nodes per rack
 *   spine_racks   racks per spine
 *   zone_spines   spines per zone
 *   frac_every    every frac_every-th rack has 4-slice devices (MIG-style),
 *                 the others whole devices only; 0 = no sliced racks
 *   teams         number of teams, each with an equal nominal quota in the
 *                 one reserved pool (the last team takes the remainder), so
 *                 the quotas sum to the cluster
 *
 * Every node: 96 CPUs, 1,024 GB, 400 Gbit/s, gpn × H100 80 GB.
 * Topology zoneZ.spineS.rackR (spine and rack numbers are global).
 */
SELECT gangsched.set_topology_levels(ARRAY['zone', 'spine', 'rack']);
SELECT gangsched.add_pool('main', 'reserved');

SELECT count(gangsched.add_node(
           name       => format('n%s', lpad(i::text, 5, '0')),
           pool       => 'main',
           topology   => format('zone%s.spine%s.rack%s',
                                i / (:rack_nodes * :spine_racks * :zone_spines) + 1,
                                i / (:rack_nodes * :spine_racks) + 1,
                                i / :rack_nodes + 1)::ltree,
           cpus       => 96,
           mem_gb     => 1024,
           net_gbps   => 400,
           gpus       => :gpn,
           gpu_model  => 'H100',
           gpu_mem_gb => 80,
           gpu_slices => CASE WHEN :frac_every > 0 AND (i / :rack_nodes) % :frac_every = :frac_every - 1
                              THEN 4 ELSE 1 END)) AS nodes_added
  FROM generate_series(0, :nodes - 1) AS i;

SELECT count(gangsched.add_team(format('team%s', t))) AS teams_added
  FROM generate_series(1, :teams) AS t;

-- Equal quotas summing to the cluster's capacity in every resource.
WITH cap AS (
    SELECT sum(gpus)::numeric AS gpus, sum(cpus) AS cpus, sum(mem_gb) AS mem, sum(net_gbps) AS net
      FROM gangsched.nodes),
share AS (
    SELECT t,
           CASE WHEN t < :teams THEN 1 ELSE 0 END AS normal,
           cap.*
      FROM cap, generate_series(1, :teams) AS t)
SELECT count(*) AS quotas_set
  FROM share,
       LATERAL gangsched.set_quota(
           team     => format('team%s', t),
           pool     => 'main',
           gpus     => CASE WHEN normal = 1 THEN floor(gpus / :teams) ELSE gpus - (:teams - 1) * floor(gpus / :teams) END,
           cpus     => CASE WHEN normal = 1 THEN floor(cpus / :teams) ELSE cpus - (:teams - 1) * floor(cpus / :teams) END,
           mem_gb   => CASE WHEN normal = 1 THEN floor(mem / :teams) ELSE mem - (:teams - 1) * floor(mem / :teams) END,
           net_gbps => CASE WHEN normal = 1 THEN floor(net / :teams) ELSE net - (:teams - 1) * floor(net / :teams) END);
