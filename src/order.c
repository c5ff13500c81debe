/*
 * order.c — queue order: priority (higher first), then queue position
 * (older first). Queue position is the original submit order and survives
 * requeues.
 */
#include "postgres.h"

#include "order.h"

struct GsOrder
{
	GsState    *st;
	GsJob	  **seq;
	int			n;
	int			next;
};

static int
cmp_priority_fifo(const void *a, const void *b)
{
	const GsJob *x = *(GsJob *const *) a;
	const GsJob *y = *(GsJob *const *) b;

	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->queue_pos != y->queue_pos)
		return x->queue_pos < y->queue_pos ? -1 : 1;
	return x->id < y->id ? -1 : (x->id > y->id);
}

GsOrder *
gs_order_begin(GsState *st)
{
	GsOrder    *o = palloc0(sizeof(GsOrder));
	int			i;

	o->st = st;
	o->n = st->njobs;
	o->seq = palloc(sizeof(GsJob *) * Max(o->n, 1));
	for (i = 0; i < o->n; i++)
		o->seq[i] = &st->jobs[i];
	qsort(o->seq, o->n, sizeof(GsJob *), cmp_priority_fifo);
	return o;
}

GsJob *
gs_order_next(GsOrder *o)
{
	return o->next < o->n ? o->seq[o->next++] : NULL;
}

void
gs_order_placed(GsOrder *o, GsJob *job)
{
	/* a static order needs no feedback */
}

int
gs_order_position(GsOrder *o, int64_t job_id)
{
	int			i;

	for (i = 0; i < o->n; i++)
		if (o->seq[i]->id == job_id)
			return i;
	return -1;
}

int
gs_order_count(GsOrder *o)
{
	return o->n;
}

GsJob *
gs_order_at(GsOrder *o, int k)
{
	return (k >= 0 && k < o->n) ? o->seq[k] : NULL;
}
