/*
 * placement.h — all-or-nothing, topology-aware gang placement.
 *
 * Pure algorithm over the structs of model.h: no SPI, no catalog access.
 * A GsPlacer holds one round's scratch space; gs_place() either places a
 * whole gang (and takes its capacity out of the model) or leaves the model
 * untouched and says why.
 */
#ifndef GANGSCHED_PLACEMENT_H
#define GANGSCHED_PLACEMENT_H

#include "model.h"

typedef struct GsPlacer GsPlacer;

/* Why a gang does not fit now: the constraint that fails and the best domain. */
typedef enum GsWhyKind
{
	GS_WHY_NONE = 0,
	GS_WHY_NO_NODE,				/* no eligible up node can hold one worker */
	GS_WHY_CAPACITY,			/* not enough free capacity in any eligible pool */
	GS_WHY_TOPOLOGY				/* enough in total, but not inside one domain */
} GsWhyKind;

typedef struct GsWhy
{
	GsWhyKind	kind;
	int			depth;			/* the level whose domains are too small */
	const char *unit;			/* "worker", "tensor group", "pipeline replica", "gang" */
	int			unit_workers;	/* workers per unit */
	int			need;			/* units needed inside one domain of depth */
	int			best;			/* most units any such domain holds now */
	int			best_workers;	/* workers that fit in that domain now */
	const char *best_label;		/* that domain */
	int			total_workers;	/* workers that fit in all eligible pools now */
} GsWhy;

extern GsPlacer *gs_placer_create(GsCluster *cluster);

/* Place the whole gang on free capacity, or nothing. */
extern bool gs_place(GsPlacer *p, GsJob *job, GsWhy *why);

/* Would the gang fit now? Changes nothing; says why not (why may be NULL: yes/no only). */
extern bool gs_probe(GsPlacer *p, GsJob *job, GsWhy *why);

/* The gang domain (depth, index) of the last gs_place or gs_probe that succeeded. */
extern void gs_placer_last_domain(const GsPlacer *p, int *d, int *i);

/*
 * Starvation guard: choose where a blocked gang will go once capacity frees
 * and keep that capacity from later jobs of this round. False when the gang
 * could not fit even on an empty cluster as it is now (nodes down/draining).
 */
extern bool gs_reserve(GsPlacer *p, GsJob *job);

/*
 * Backfill with time: reserve where the gang fits the capacity free now
 * (the caller has released, in the model, the jobs whose time limits end
 * before the gang's expected start). False when it does not fit there.
 */
extern bool gs_reserve_free(GsPlacer *p, GsJob *job);

/* Count the starvation guard's capacity as free (jobs that end before its expected start). */
extern void gs_placer_ignore_reserved(GsPlacer *p, bool on);

/* While capacity may grow (victim searches), do not trust earlier failures. */
extern void gs_placer_ignore_memo(GsPlacer *p, bool on);

/* Victim searches: give a running job's capacity back in the model, or take it again. */
extern void gs_model_release(GsPlacer *p, GsRunning *r, bool release);

/* Give host resources back to a node (counted twice after a nomination). */
extern void gs_model_credit(GsPlacer *p, int ni, double cpus, double mem, double net);

/* Readable text for a GsWhy. */
extern char *gs_why_text(GsCluster *c, const GsJob *job, const GsWhy *why, bool with_numbers);

/* Load-time helpers for the model. */
extern void gs_node_recount(GsNode *n);

#endif							/* GANGSCHED_PLACEMENT_H */
