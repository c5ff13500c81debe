/*
 * fair.h — quotas and dominant resource fairness, as plain arithmetic over
 * the model: which pools a job may use as guaranteed or borrowed work, a
 * team's weighted dominant share, and the accounting when a gang is placed.
 */
#ifndef GANGSCHED_FAIR_H
#define GANGSCHED_FAIR_H

#include "model.h"

/* Pools the job may use at all (its pool argument and the pool kinds). */
extern uint64_t gs_eligible_pools(const GsCluster *c, const GsJob *j);

/* Pools where the whole gang stays within its team's nominal quota. */
extern uint64_t gs_guaranteed_pools(const GsCluster *c, const GsJob *j);
extern uint64_t gs_tree_guaranteed_pools(const GsCluster *c, const GsJob *j, double *slack);
extern double *gs_tree_growth(GsCluster *c);

/*
 * Pools where the gang may run as borrowed work: preemptible, within the
 * team's borrowing limit, leaving other teams' non-lendable idle quota
 * alone. When none, *why says what stops it (palloc'd).
 */
extern uint64_t gs_borrow_pools(const GsCluster *c, const GsJob *j, char **why);

extern uint64_t gs_held_back_pools(const GsCluster *c, const GsJob *j);
extern double gs_held_back(const GsCluster *c, int tix, int pool, int r, const double *freed);

/* max over resources of used / capacity, divided by the team's weight. */
extern double gs_dominant_share(const GsCluster *c, int tix);

/*
 * The weighted max-min fair level over demand[nteams][GS_NRES] (each team's
 * use plus its pending work): a team is entitled to a weighted dominant
 * share of min(level, its demand's). Huge when all demand fits.
 */
extern double gs_fair_level(const GsCluster *c, const double *demand);

/* Would the gang in pool `pool` take its team beyond nominal quota? */
extern bool gs_beyond_nominal(const GsCluster *c, const GsJob *j, int pool);

/* Count a placed gang in its team's and pool's use. */
extern void gs_account(GsCluster *c, const GsJob *j, int pool);

/* A victim chosen this round is leaving: take it out of its team's and pool's use. */
extern void gs_unaccount_running(GsCluster *c, const GsRunning *r);

/*
 * Team trees (c->tree): after the leaves' use is loaded, add every team's
 * use into its ancestors' (teams and quotas) and compute the guaranteed
 * use (GsQuota.gused). gs_account and gs_unaccount_running keep both.
 */
extern void gs_tree_rollup(GsCluster *c);

/*
 * What subtree t holds back of resource r in the pool from teams outside
 * it (the larger of its own idle nominal less lending limit and its
 * children's), and the subtrees off team tix's path to the top (siblings
 * of tix and of its ancestors, other top-level teams) into out[nteams].
 */
extern double gs_tree_held_back(const GsCluster *c, int pool, int t, int r);
extern double gs_tree_kept(const GsCluster *c, int pool, int a, int except, int r);
extern int	gs_tree_off_path(const GsCluster *c, int tix, int *out);

/*
 * Hierarchical weighted DRF (H-DRF) over n teams on plain arrays: parent[t]
 * (-1 at the top), weight[t] (> 0), demand[t][GS_NRES] (a leaf's use plus
 * pending work; inner teams' own is not counted), limit[t][GS_NRES] (what
 * the subtree may hold, < 0 none; limit may be NULL), capacity[GS_NRES].
 * alloc[t][GS_NRES]: what each subtree is entitled to, in amounts.
 */
extern void gs_hdrf(int n, const int32_t *parent, const double *weight, const double *demand,
					const double *limit, const double capacity[GS_NRES], double *alloc);

/* Each team's limit per resource from its quotas (borrowing limits), < 0 none (gs_hdrf's limit). */
extern void gs_tree_limits(const GsCluster *c, double *limit);

/*
 * gs_hdrf over the cluster's tree, weights and quotas: alloc[t][GS_NRES].
 * pdemand[t][pool][GS_NRES], when not NULL, is each leaf's demand per pool
 * (what it holds there plus its pending work eligible for it, a job
 * eligible for several pools counted in each): quotas then count per pool,
 * a pool's nominal amount only as far as that demand reaches. The view and
 * the rounds pass it alike (NULL with one pool).
 */
extern void gs_tree_fair_shares(const GsCluster *c, const double *demand, const double *pdemand,
								double *alloc);

/* An allocation's dominant share of the cluster (max over resources of amount / capacity). */
extern double gs_alloc_share(const GsCluster *c, const double *a);


#endif							/* GANGSCHED_FAIR_H */
