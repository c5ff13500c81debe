/*
 * model.h — the in-memory cluster model the scheduler decides on.
 *
 * Plain C structs, no SPI: loader.c fills them from the tables, placement.c
 * and the round work on them, and writer code turns decisions back into
 * rows. Nodes are kept sorted by (pool, topology, name), so every topology
 * domain is a contiguous run of nodes and its children a contiguous run of
 * domains one level deeper.
 *
 * Depths: 0 is the pool, 1..L are the named levels (zone, spine, rack...),
 * L+1 is the node itself.
 */
#ifndef GANGSCHED_MODEL_H
#define GANGSCHED_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define GS_MAX_LEVELS	8
#define GS_MAX_DEPTH	(GS_MAX_LEVELS + 2)		/* pool + levels + node */
#define GS_MAX_GPUS		64
#define GS_MAX_POOLS	64		/* a gang's eligible pools are a uint64 bit mask */

/*
 * Tolerances: GS_EPS for amounts (GPUs, CPUs, memory, quota) summed from
 * numeric columns in double precision; GS_SHARE_EPS for dominant shares
 * (fractions of the cluster divided by a weight), compared for order and
 * for the fair-share rule; GS_COST_EPS for lost work in GPU-seconds.
 */
#define GS_EPS			1e-9
#define GS_SHARE_EPS	1e-12
#define GS_TREE_SLACK_DEPTH 8	/* path levels gs_tree_guaranteed_pools reports slack for */
#define GS_COST_EPS		1e-6
/*
 * A device slice's slot in gangsched.held_slots: device * 8 + slice. The SQL
 * side's one home of the encoding is gangsched._slots() (sql/src/20_helpers.sql).
 */
#define GS_SLOTS_PER_DEVICE 8

/* Resources, in this order, wherever a [GS_NRES] array appears. */
#define GS_NRES 4
#define GS_GPU 0
#define GS_CPU 1
#define GS_MEM 2
#define GS_NET 3

typedef enum GsNodeState
{
	GS_NODE_UP = 0,
	GS_NODE_DRAINING,
	GS_NODE_DOWN
} GsNodeState;

typedef enum GsLocality
{
	GS_LOC_NONE = 0,
	GS_LOC_PREFERRED,
	GS_LOC_REQUIRED
} GsLocality;

typedef struct GsPool
{
	int32_t		id;				/* pools.id */
	bool		reserved;		/* kind = 'reserved' */
	const char *name;
	double		capacity[GS_NRES];	/* of its up nodes */
	double		used[GS_NRES];	/* held now by all teams */
} GsPool;

/* A team's quota in one pool; amounts < 0 mean "not set" (see below). */
typedef struct GsQuota
{
	bool		has;			/* a quota row exists */
	double		nominal[GS_NRES];	/* < 0: resource not governed by quota */
	double		borrow[GS_NRES];	/* < 0: no borrowing limit */
	double		lend[GS_NRES];	/* < 0: all of the idle nominal quota lendable */
	double		used[GS_NRES];	/* held now (allocations and holds); a subtree's for an inner team */
	/*
	 * Team trees only: the subtree's use as its parent's nominal quota
	 * counts it, each child's use capped at the child's nominal amount
	 * where the child has one (what a child borrows beyond its own nominal
	 * is reclaimable, not part of the parent's guaranteed use). A leaf's
	 * equals used.
	 */
	double		gused[GS_NRES];
} GsQuota;

typedef struct GsTeam
{
	int32_t		id;				/* teams.id */
	double		weight;
	const char *name;
	double		used[GS_NRES];	/* over all pools */
	bool		las;			/* its jobs in least-attained-service order (las.h) */
	bool		closed;			/* close_team(): its pending jobs are not tried */
	const char *closed_reason;	/* NULL when none was given */
	/* team trees (teams.parent_id); a flat cluster has parent -1 and no children everywhere */
	int32_t		parent;			/* index of the parent team, -1 at the top */
	int16_t		depth;			/* 0 at the top */
	int32_t		nchildren;
	int32_t    *children;		/* team indexes, by id */
} GsTeam;

typedef struct GsNode
{
	int32_t		id;				/* nodes.id */
	int32_t		pool;			/* index into GsCluster.pools */
	int32_t		dom[GS_MAX_DEPTH];	/* domain index at each depth 0..L+1 */
	GsNodeState state;
	int16_t		ngpus;
	int16_t		slices;			/* partitions per device, 1..8 */
	int32_t		model;			/* index into GsCluster.models, -1 none */
	double		gpu_mem;
	double		cap_cpus, cap_mem, cap_net;
	double		free_cpus, free_mem, free_net;
	uint8_t		used[GS_MAX_GPUS];	/* slices in use per device (bit = slice) */
	int16_t		free_whole;		/* devices with no slice in use */
	int32_t		free_slices;	/* slices free over all devices */
	/* kept for the starvation guard's reserved job (this round only) */
	int16_t		res_whole;
	int32_t		res_slices;
	double		res_cpus, res_mem, res_net;
	uint64_t	bookings;		/* bit b: in the round's booking b (GsState.bookings), 0 none */
	const char *name;
	const char *topology;
} GsNode;

typedef struct GsDomain
{
	int32_t		first_child;	/* first domain one level deeper */
	int32_t		nchildren;
	int32_t		first_node;		/* nodes of this domain: [first_node, +nnodes) */
	int32_t		nnodes;
	const char *label;			/* topology prefix, pool name or node name */
} GsDomain;

typedef struct GsCluster
{
	int			nlevels;		/* L */
	int			nteams;
	GsTeam	   *teams;
	bool		tree;			/* some team has a parent: the hierarchical rules apply */
	int			nroots;
	int32_t    *roots;			/* the top-level teams, by id */
	/* team trees: caches of fair.c, filled on first need (NULL until then) */
	uint64_t	use_version;	/* bumped by every change of a team's use */
	double	   *use_growth;		/* [team][GS_NRES]: every increase of its subtree's use (tree_add) */
	uint64_t	use_drops;		/* bumped by every decrease of a team's use */
	double	   *held_cache;		/* [pool][team][GS_NRES]: what each subtree holds back */
	uint64_t   *held_version;	/* [pool]: use_version held_cache[pool] was computed at */
	int8_t	   *pool_lends;		/* [pool]: 1 when some team has a lending limit there, -1 unknown */
	double	   *kept_cache;		/* [pool][team][GS_NRES]: unused nominal of its children (gs_tree_kept) */
	uint64_t   *kept_version;	/* [pool] */
	int32_t   **off_path;		/* [team]: the subtrees off its path to the top */
	int32_t    *noff_path;
	GsQuota    *quotas;			/* [team * npools + pool] */
	double		capacity[GS_NRES];	/* of up nodes, all pools */
	const char *level_names[GS_MAX_DEPTH];	/* by depth; [0] "pool", [L+1] "node" */
	int			npools;
	GsPool	   *pools;
	int			nnodes;
	GsNode	   *nodes;
	int			ndom[GS_MAX_DEPTH];
	GsDomain   *dom[GS_MAX_DEPTH];	/* depth 0..L+1 */
	int			nmodels;
	const char **models;
	int			ndatasets;
	const char **datasets;
	uint8_t   **dataset_nodes;	/* [dataset][node] = 1 when cached there */
} GsCluster;

/* One worker's placement. */
typedef struct GsAssign
{
	int32_t		node;			/* index into GsCluster.nodes */
	uint64_t	devmask;		/* devices used */
	int16_t		first_slice;	/* on each device of devmask */
	int16_t		nslices;
} GsAssign;

/* One worker's current allocation, for preemption. */
typedef struct GsAlloc
{
	int32_t		node;			/* index into GsCluster.nodes */
	int32_t		worker;			/* its rank */
	uint64_t	devmask;
	int16_t		first_slice;
	int16_t		nslices;
	double		cpus,
				mem,
				net;
} GsAlloc;

/* A job holding capacity now (placed or running): a possible victim. */
typedef struct GsRunning
{
	int64_t		id;
	int32_t		tix;			/* team index */
	int32_t		priority;
	bool		preemptible;
	bool		borrowed;
	int32_t		pool;			/* pool index of its nodes */
	int64_t		since;			/* started_at, else placed_at (TimestampTz) */
	int64_t		checkpoint;		/* last checkpoint, else since */
	double		gpus_total;		/* gpus × workers */
	double		demand[GS_NRES];
	double		attained;		/* GPU-seconds held so far, all allocations (las teams only) */
	int16_t		las_queue;		/* its LAS queue, -1 when its team is not las */
	int			nalloc;
	int			nalloc_cap;
	GsAlloc    *allocs;
	bool		taken;			/* chosen as a victim this round */
	bool		released;		/* virtually released (during a search) */
	/*
	 * A victim chosen this round: its allocs then hold only what its
	 * preemptor does not take over (whole devices and host resources), so
	 * that a later preemptor of the round may wait for that rest instead of
	 * choosing victims of its own. false when a device is shared with the
	 * preemptor at slice level (the rest is then not offered).
	 */
	bool		shareable;
	/*
	 * When it lets its capacity go at the latest: placed_at + its time
	 * limit + its grace (TimestampTz); 0 when it has no time limit.
	 */
	int64_t		ends;
	/*
	 * Shrinking instead of preempting (docs/elastic.md#shrinking). A
	 * running elastic gang above its minimum is split for victim searches
	 * (gs_split_elastic, preempt.c) into a chain of entries: its replicas
	 * above the minimum one entry each, the highest-numbered first, and the
	 * gang's own entry holding the rest (its minimum) last. An entry may be
	 * a victim only after the one before it in the chain: taking a prefix
	 * of the chain shrinks the gang, taking all of it preempts it whole.
	 */
	int32_t		workers;		/* the workers the gang holds */
	int32_t		min_workers;	/* elastic: its minimum; 0 rigid */
	int32_t		unit;			/* workers of one replica (group_size × stages) */
	bool		running;		/* state 'running' (a placed gang is not shrunk) */
	bool		shrinking;		/* a shrink is pending already: no victim */
	struct GsRunning *gang;		/* a replica entry: the gang's own entry; NULL otherwise */
	struct GsRunning *chain_prev;	/* the entry to be taken before this one, NULL none */
	struct GsRunning *chain_next;
	int16_t		chain_pos;		/* 0 for a gang not split; 1.. along the chain */
	int32_t		part_from;		/* a replica entry: its first worker (the size the gang shrinks to) */
	bool		gang_taken;		/* the gang's own entry: some entry of its chain is a victim this round */
} GsRunning;

typedef struct GsJob
{
	int64_t		id;
	int32_t		team;			/* teams.id */
	int32_t		tix;			/* index into GsCluster.teams */
	int32_t		priority;
	int64_t		queue_pos;
	int32_t		workers;		/* the size tried or decided (elastic: min_workers..max_workers) */
	/*
	 * Elastic gangs (docs/elastic.md): the gang may be placed at any whole
	 * number of replicas from min_workers to max_workers; a rigid job has
	 * min_workers = max_workers = workers. quota_workers > 0: the size the
	 * quota rules are checked at (the order step checks an elastic job at
	 * its minimum; the round narrows the pools for each size it tries);
	 * 0 checks them at workers.
	 */
	int32_t		min_workers;
	int32_t		max_workers;
	int32_t		quota_workers;
	double		gpus;			/* per worker: 0, whole, or a fraction */
	double		cpus, mem, net;
	int32_t		model;			/* -1: any; -2: a model the cluster lacks */
	double		gpu_mem;		/* < 0: any */
	int32_t		pool;			/* index into pools, -1 any */
	bool		preemptible;
	int32_t		group_size;
	int32_t		stages;
	int16_t		group_depth;	/* 1..L+1 */
	int16_t		stage_depth;	/* -1 none */
	int16_t		span_depth;		/* -1 none */
	int32_t		span_in;		/* a growing gang with a span: 1 + the index of the domain at
								 * span_depth that holds it, where its new replicas must go;
								 * 0 none (docs/elastic.md) */
	int32_t		dataset;		/* index into datasets, -1 none/unknown */
	GsLocality	locality;
	bool		has_old_reason; /* a reason was stored before this round */
	int32_t		old_reason_hash;	/* hashtext() of it */
	bool		old_reason_refused; /* it said that a preemption was refused */
	int32_t		reclaimed_by;	/* team index whose reclaim last preempted it, -1 none */
	int64_t		queued_at;		/* TimestampTz of its last entry into pending */
	double		queue_timeout_s;	/* its own queue timeout, < 0 none */
	bool		expiring;		/* its queue timeout has passed: not a candidate */
	double		attained;		/* GPU-seconds held so far, all allocations (las teams only) */
	int16_t		las_queue;		/* its LAS queue, -1 when its team is not las */
	bool		las_promoted;	/* in queue 0 by starvation promotion */
	bool		las_preempts;	/* may preempt its team's gangs of later queues (gangsched.las_preemption) */
	/* this attempt, set by the order step */
	uint64_t	pool_mask;		/* pools the gang may go to now */
	bool		quota_blocked;	/* quota rules allow it nowhere now */
	bool		try_borrowing;	/* tried as borrowed work (beyond nominal quota) */
	bool		held_back;		/* a fair-share search where only other teams' unlent idle quota blocks it: that stays idle */
	bool		held_back_turn; /* handed out by the order for that search only, at its place (schedule.c) */
	double		share_at_try;	/* its team's dominant share when tried */
	int32_t		tried_at;		/* position in the round's order, -1 not tried */
	/* decision */
	bool		placed;
	bool		borrowed;
	bool		nominated;		/* victims chosen; capacity held for it */
	int			nvictims;
	GsRunning **victims;		/* entries (a shrunk gang's replicas, docs/elastic.md#shrinking) */
	int			nvictim_gangs;	/* distinct gangs among them */
	double		victim_cost;	/* lost GPU-seconds of the plan */
	const char *trigger;		/* reclaim | fair share | priority | las */
	int			nwaits;			/* earlier victims of this round whose rest it uses */
	GsRunning **waits;
	double		stranded_gpus;	/* victims' GPUs it does not use */
	const char *preempt_refused;	/* a victim search refused it: why */
	bool		reserved;		/* the starvation guard's reservation */
	/* time (docs/time.md) */
	double		hold_s;			/* time limit + grace, seconds: the longest it holds capacity; < 0 no limit */
	int64_t		expected_start; /* the reserved job: when it is expected to fit (TimestampTz), 0 unknown */
	bool		backfilled;		/* placed on capacity kept for the reserved job (ends before its expected start) */
	/* advance reservations and maintenance windows (docs/time.md) */
	int32_t		reservation_id;	/* the reservation it names (bookings.id), 0 none */
	uint64_t	res_block;		/* bookings whose nodes it may not use now (gs_booking_masks) */
	uint64_t	res_only;		/* when set: it may use only the nodes of these bookings */
	GsAssign   *assign;			/* [workers] when placed */
	/* growing a running elastic gang (GsState.grow): the workers added this round, and where */
	int32_t		grown;
	GsAssign   *grow_assign;	/* [grown] */
	int16_t		dom_depth;		/* the domain the gang went to */
	int32_t		dom_index;
	const char *reason;			/* why it waits (stable text), when not placed */
} GsJob;

/*
 * A job's shape: what every memo keyed by shape compares (admission's
 * verdicts, the placer's shapes, the round's victim searches), each key
 * adding the fields of its own question. Keys are hashed as bytes
 * (HASH_BLOBS): gs_shape_key() zeroes the padding, and a key embedding it
 * must be zeroed whole before its own fields are set.
 */
typedef struct GsShapeKey
{
	uint64_t	res_block,		/* the bookings that keep it off nodes (0 without any) */
				res_only;
	double		gpus,
				cpus,
				mem,
				net,
				gpu_mem;
	int32_t		model,
				group_size,
				stages;
	int16_t		group_depth,
				stage_depth,
				span_depth,
				preemptible;
} GsShapeKey;

/* Can the job run on fewer workers than it asks for (an elastic gang)? */
static inline bool
gs_job_elastic(const GsJob *j)
{
	return j->min_workers < j->max_workers;
}

/*
 * The team closed to new work (close_team()) that closes the job's team:
 * the team itself or, in a tree, the nearest closed ancestor (closing a
 * team closes its subtree); -1 when none.
 */
static inline int
gs_team_closed_by(const GsCluster *c, const GsJob *j)
{
	int			t;

	for (t = j->tix; t >= 0; t = c->teams[t].parent)
		if (c->teams[t].closed)
			return t;
	return -1;
}

/* Is the job's team closed to new work (close_team())? Rounds do not try its jobs. */
static inline bool
gs_team_closed(const GsCluster *c, const GsJob *j)
{
	return gs_team_closed_by(c, j) >= 0;
}

/* Is team a the team d or one of its ancestors? */
static inline bool
gs_team_within(const GsCluster *c, int d, int a)
{
	for (; d >= 0; d = c->teams[d].parent)
		if (d == a)
			return true;
	return false;
}

/* Is the job's team an inner team of a tree (it has children)? Rounds do not try its jobs. */
static inline bool
gs_team_inner(const GsCluster *c, const GsJob *j)
{
	return j->tix >= 0 && c->teams[j->tix].nchildren > 0;
}

static inline void
gs_shape_key(const GsJob *j, GsShapeKey *k)
{
	memset(k, 0, sizeof(*k));
	k->res_block = j->res_block;
	k->res_only = j->res_only;
	k->gpus = j->gpus;
	k->cpus = j->cpus;
	k->mem = j->mem;
	k->net = j->net;
	k->gpu_mem = j->gpu_mem;
	k->model = j->model;
	k->group_size = j->group_size;
	k->stages = j->stages;
	k->group_depth = j->group_depth;
	k->stage_depth = j->stage_depth;
	k->span_depth = j->span_depth;
	k->preemptible = j->preemptible;
}

/*
 * An advance reservation or a maintenance window that has not ended
 * (gangsched.bookings), loaded only when there is one: its nodes carry its
 * bit (GsNode.bookings). At most GS_MAX_BOOKINGS (the SQL refuses more).
 */
#define GS_MAX_BOOKINGS 64
typedef struct GsBooking
{
	int32_t		id;				/* bookings.id */
	int32_t		tix;			/* the owner team's index; -1: a maintenance window */
	bool		maintenance;
	int64_t		starts,			/* TimestampTz */
				ends;
	const char *name;
	const char *team;			/* NULL for a maintenance window */
	int32_t		nnodes;
} GsBooking;

/*
 * Everything a round decides on: the cluster, the pending jobs and, loaded
 * on first need, the jobs holding capacity. Filled by the SPI edge
 * (loader.c); the algorithm files decide on it, and call load_running
 * when a victim search needs the jobs holding capacity.
 */
typedef struct GsState
{
	GsCluster  *cluster;
	int			njobs;
	GsJob	   *jobs;			/* pending jobs, in the order loaded */
	/*
	 * Elastic gangs holding capacity below their maximum (placed or
	 * running; docs/elastic.md): workers is what each holds, max_workers
	 * what it may grow to, pool the pool it runs in, borrowed its flag.
	 */
	int			ngrow;
	GsJob	   *grow;
	/* jobs holding capacity, loaded on first need (preemption) */
	bool		running_loaded;
	int			nrunning;
	GsRunning  *running;
	int64_t		now;			/* the scheduler's clock for this round */
	bool		limits_held;	/* some job holding capacity has a time limit */
	int			nbookings;		/* reservations and maintenance windows not ended (docs/time.md) */
	GsBooking  *bookings;
	struct StringInfoData *las_teams;	/* ids of las teams ("1,4"), NULL when none */
	void		(*load_running) (struct GsState *st);	/* SPI edge, set by the caller */
} GsState;

#endif							/* GANGSCHED_MODEL_H */
