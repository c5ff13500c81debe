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

/*
 * Pools where the gang may run as borrowed work: preemptible, within the
 * team's borrowing limit, leaving other teams' non-lendable idle quota
 * alone. When none, *why says what stops it (palloc'd).
 */
extern uint64_t gs_borrow_pools(const GsCluster *c, const GsJob *j, char **why);

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

#endif							/* GANGSCHED_FAIR_H */
