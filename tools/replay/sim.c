/*
 * sim.c — one policy's replay: the event loop in virtual time and the
 * simulated node agents.
 *
 * Time jumps from event to event: the next submit, the next job to finish,
 * the next release of a preempted job, the next scheduling round. Rounds
 * run on a grid of --tick seconds, like a background worker with that
 * round interval: the first grid point at or after anything that changes
 * the queue (a submit, a finish, a release, a kill), while some job waits.
 * With nothing changing, a waiting queue still gets a round when a time
 * rule may decide differently: a running job becomes old enough to be a
 * preemption victim (gangsched.min_runtime), a grace deadline passes, a
 * queue timeout passes; and every --idle-round seconds in any case.
 *
 * The server sees every call at its own virtual time, but in few round
 * trips: each instant's calls are queued with the clock
 * (gangsched.clock_override), the agents' finishes and releases as one
 * statement each over arrays, the submits as one statement; the queue goes
 * out with the next round (the agents' checkpoint reports, run_round(),
 * job_started for every node of every job the round placed, and the new
 * rows of gangsched.events, which say what was placed, preempted, killed
 * and expired), or at once after a release, whose preemptor must start.
 *
 * The agents: a placed job starts at once on every node, runs for its
 * remaining work, checkpoints every --checkpoint-interval seconds (reported
 * with job_checkpointed before the rounds that may use it), and when told
 * to stop (state preempting) writes a checkpoint and releases after
 * --release-delay seconds, job_released(checkpointed => true); its
 * remaining work is what it had left when told. With
 * --no-preempt-checkpoint it cannot checkpoint on demand: it stops and
 * releases with checkpointed => false and redoes the work since its last
 * periodic checkpoint. An agent whose release delay exceeds the grace is
 * killed by the round at the deadline and loses the work since its last
 * periodic checkpoint. An elastic job told to shrink (event 'shrinking',
 * docs/elastic.md#shrinking) checkpoints and stops like a preempted one,
 * its released workers go after --release-delay (workers_released for
 * each of their nodes), and at the shrink's completion ('shrunk') the
 * rest restarts at the smaller size from that checkpoint.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay.h"

typedef enum
{
	J_FUTURE,
	J_REJECTED,
	J_PENDING,					/* pending or nominated in the database */
	J_RUNNING,					/* placed (and started at once) */
	J_PREEMPTING,
	J_FINISHED,
	J_EXPIRED
} JState;

typedef struct SimJob
{
	int64_t		db_id;
	JState		st;
	int64_t		work_left;		/* seconds of work left when the current run began */
	int64_t		run_start;
	int64_t		first_placed;	/* -1 until placed */
	int64_t		end_t;
	int64_t		ckpt_reported;	/* last checkpoint reported for this run; -1 */
	int64_t		preempt_t;		/* when it was told to stop */
	uint32_t	ver;			/* bumps invalidate scheduled events */
	bool		stopped;		/* told to stop and obeying: training is over */
	bool		blocked;		/* pending and passed over by a round */
	double		gpus;			/* workers x GPUs per worker */
	/*
	 * Elastic gangs: the workers it holds while placed, and the GPUs. Its
	 * work is counted at its full size (work_left: seconds at all its
	 * workers); at `held` of `workers` it progresses at held / workers of
	 * that speed (work-conserving: remaining GPU-seconds over held GPUs).
	 */
	int			held;
	double		held_gpus;
	int			run_ix;			/* position in Sim.running, -1 */
	bool		first_borrowed; /* its first placement was on borrowed capacity */
	bool		entitled;		/* at submit, its team's held and waiting GPUs with it fit the nominal quota */
	int			npreempt;		/* times it was told to stop */
	bool		shrinking;		/* told to give back replicas (shrink_to), not done yet */
	bool		shrink_stopped; /* and obeying: stopped at a checkpoint until the shrink completes */
} SimJob;

typedef enum
{
	EV_FINISH,
	EV_RELEASE,
	EV_SHRINK,					/* a shrinking job's released workers have stopped */
	EV_WAKE
} EvType;

/* What the statements of a batch return, in order. */
typedef enum
{
	R_IGNORE,
	R_SUBMIT,
	R_ROUND,
	R_STARTS,
	R_FEED
} RKind;

typedef struct Expect
{
	RKind		kind;
	int		   *jobs;			/* R_SUBMIT: trace indexes, in order */
	int			n;
} Expect;

typedef struct Ev
{
	int64_t		t;
	int			type;
	int			job;
	uint32_t	ver;
} Ev;

typedef struct Sim
{
	const Options *o;
	const Cluster *c;
	const Trace *tr;
	Result	   *r;
	PGconn	   *conn;
	SimJob	   *j;
	int			n;
	int		   *by_db;			/* database job id -> trace index */
	int64_t		by_db_cap;
	Ev		   *heap;
	int			nheap,
				capheap;
	int			next_sub;
	int64_t		now;
	int64_t		clock_sent;
	int64_t		base;			/* Unix time of second 0 */
	bool		preemption;
	bool		one_team;		/* policy las: every job in one team */
	int64_t		min_runtime;
	int64_t		wait_wake[2];	/* gangsched.reclaim_delay, fair_preemption_delay: a pending job may preempt after (0: at once) */
	int64_t		last_event_id;
	int		   *running;		/* jobs holding capacity */
	int			nrunning;
	int64_t		next_round;
	bool		progress;		/* the last round placed, nominated or expired */
	/* accounting */
	int			pending;
	int			blocked;		/* pending jobs a round has passed over */
	int		   *fresh;			/* pending jobs no round has seen yet */
	int			nfresh;
	double		alloc;
	double	   *team_alloc;
	double	   *team_wait;
	double	   *team_weight;
	double	   *team_ent;
	double	   *team_alloc_c;
	double	   *team_ent_c;
	int64_t		last_t;
	double		alloc_c,
				cap_c;
	/* the outbox */
	Buf			sql;
	Expect	   *exp;
	int			nexp,
				capexp;
	Buf			a1,
				a2;
	int			nfinish,
				nrelease,
				nshrink,
				nsubmit;
	int		   *finish_list,
			   *release_list,
			   *shrink_list,
			   *submit_list;
} Sim;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- event heap --------------------------------------------------------------- */

static void
push(Sim *s, int64_t t, EvType type, int job)
{
	int			i;

	if (s->nheap == s->capheap)
	{
		s->capheap = s->capheap ? s->capheap * 2 : 1024;
		s->heap = xrealloc(s->heap, sizeof(Ev) * s->capheap);
	}
	i = s->nheap++;
	while (i > 0)
	{
		int			p = (i - 1) / 2;

		if (s->heap[p].t <= t)
			break;
		s->heap[i] = s->heap[p];
		i = p;
	}
	s->heap[i].t = t;
	s->heap[i].type = type;
	s->heap[i].job = job;
	s->heap[i].ver = job >= 0 ? s->j[job].ver : 0;
}

static Ev
pop(Sim *s)
{
	Ev			top = s->heap[0];
	Ev			last = s->heap[--s->nheap];
	int			i = 0;

	for (;;)
	{
		int			l = 2 * i + 1,
					m = l;

		if (l >= s->nheap)
			break;
		if (l + 1 < s->nheap && s->heap[l + 1].t < s->heap[l].t)
			m = l + 1;
		if (s->heap[m].t >= last.t)
			break;
		s->heap[i] = s->heap[m];
		i = m;
	}
	if (s->nheap > 0)
		s->heap[i] = last;
	return top;
}

static bool
stale(Sim *s, const Ev *e)
{
	return e->job >= 0 && e->type != EV_WAKE && s->j[e->job].ver != e->ver;
}

static int
cmp_int(const void *a, const void *b)
{
	int			x = *(const int *) a,
				y = *(const int *) b;

	return (x > y) - (x < y);
}

static int64_t
heap_next(Sim *s)
{
	while (s->nheap > 0 && stale(s, &s->heap[0]))
		(void) pop(s);
	return s->nheap > 0 ? s->heap[0].t : NEVER;
}

/* ---- bookkeeping -------------------------------------------------------------- */

static int
sim_job(Sim *s, int64_t db_id)
{
	if (db_id <= 0 || db_id >= s->by_db_cap || s->by_db[db_id] < 0)
		die("the database reports job %lld, which the replay did not submit", (long long) db_id);
	return s->by_db[db_id];
}

static void
map_db(Sim *s, int64_t db_id, int ix)
{
	if (db_id >= s->by_db_cap)
	{
		int64_t		cap = s->by_db_cap ? s->by_db_cap : 1024;
		int64_t		i;

		while (cap <= db_id)
			cap *= 2;
		s->by_db = xrealloc(s->by_db, sizeof(int) * cap);
		for (i = s->by_db_cap; i < cap; i++)
			s->by_db[i] = -1;
		s->by_db_cap = cap;
	}
	s->by_db[db_id] = ix;
}

static void
run_add(Sim *s, int ix)
{
	s->j[ix].run_ix = s->nrunning;
	s->running[s->nrunning++] = ix;
}

static void
run_remove(Sim *s, int ix)
{
	int			p = s->j[ix].run_ix;
	int			last = s->running[--s->nrunning];

	s->running[p] = last;
	s->j[last].run_ix = p;
	s->j[ix].run_ix = -1;
}

/* A job enters the queue: it waits for capacity once a round passes it over. */
static void
queue_enter(Sim *s, int ix)
{
	s->j[ix].blocked = false;
	s->fresh[s->nfresh++] = ix;
	s->pending++;
}

static void
queue_leave(Sim *s, int ix)
{
	if (s->j[ix].blocked)
		s->blocked--;
	s->j[ix].blocked = false;
	s->pending--;
}

/* After a round: whoever it left pending is waiting for capacity. */
static void
queue_passed_over(Sim *s)
{
	int			i;

	for (i = 0; i < s->nfresh; i++)
	{
		SimJob	   *j = &s->j[s->fresh[i]];

		if (j->st == J_PENDING && !j->blocked)
		{
			j->blocked = true;
			s->blocked++;
		}
	}
	s->nfresh = 0;
}

/* The first grid point at or after t. */
static int64_t
on_grid(Sim *s, int64_t t)
{
	int64_t		k = s->o->tick;

	return ((t + k - 1) / k) * k;
}

static void
want_round(Sim *s, int64_t t)
{
	int64_t		g = on_grid(s, t);

	if (g < s->next_round)
		s->next_round = g;
}

/* Last periodic checkpoint of a running job at time t (run_start if none). */
static int64_t
last_checkpoint(Sim *s, int ix, int64_t t)
{
	int64_t		c = s->o->checkpoint_interval;
	SimJob	   *j = &s->j[ix];

	if (c <= 0 || t <= j->run_start)
		return j->run_start;
	return j->run_start + ((t - j->run_start) / c) * c;
}

/*
 * Integrate the accounting up to time t (before anything changes at t):
 * over contended time (some job waiting for capacity: pending and passed
 * over by a round, not merely submitted since the last round), allocated
 * and capacity GPU-time
 * and, per team, allocation and entitlement (the capacity water-filled
 * over the teams' demands, held plus waiting, in proportion to their
 * nominal quotas).
 */
static void
advance(Sim *s, int64_t t)
{
	int64_t		dt = t - s->last_t;
	int			i,
				nt = s->tr->nteams;

	if (dt <= 0)
		return;
	if (s->blocked > 0)
	{
		double	   *demand = s->team_ent;	/* reused as scratch, then as output */
		double		d[nt > 0 ? nt : 1];

		s->r->contended_s += dt;
		s->alloc_c += s->alloc * dt;
		s->r->idle_gpu_hours_waiting += ((double) s->c->gpus - s->alloc) * dt / 3600.0;
		s->cap_c += (double) s->c->gpus * dt;
		for (i = 0; i < nt; i++)
			d[i] = s->team_alloc[i] + s->team_wait[i];
		waterfill(d, s->team_weight, nt, (double) s->c->gpus, demand);
		for (i = 0; i < nt; i++)
		{
			s->team_alloc_c[i] += s->team_alloc[i] * dt;
			s->team_ent_c[i] += demand[i] * dt;
		}
	}
	s->last_t = t;
}

/* ---- the outbox: statements of one round trip ------------------------------------ */

/*
 * The agents' calls are queued here with the clock of their instant and go
 * to the server together with the next round (or a release, which needs
 * its answer at once): one round trip, one implicit transaction, every
 * statement executed in order at its own virtual time. Nothing else writes
 * to the replay's database, so this is the same as sending them one by one.
 */
static void
expect(Sim *s, RKind kind, const int *jobs, int n)
{
	Expect	   *e;

	if (s->nexp == s->capexp)
	{
		s->capexp = s->capexp ? s->capexp * 2 : 64;
		s->exp = xrealloc(s->exp, sizeof(Expect) * s->capexp);
	}
	e = &s->exp[s->nexp++];
	e->kind = kind;
	e->n = n;
	e->jobs = NULL;
	if (n > 0)
	{
		e->jobs = xmalloc(sizeof(int) * n);
		memcpy(e->jobs, jobs, sizeof(int) * n);
	}
}

/* Set the session's clock to now if the statements queued so far leave it elsewhere. */
static void
out_clock(Sim *s)
{
	char		ts[40];

	if (s->clock_sent == s->now)
		return;
	format_ts(ts, sizeof(ts), s->base + s->now);
	buf_printf(&s->sql, "SET gangsched.clock_override = '%s';\n", ts);
	expect(s, R_IGNORE, NULL, 0);
	s->clock_sent = s->now;
}

static void apply_submits(Sim *s, PGresult *res, const int *jobs, int n);
static void apply_feed(Sim *s, PGresult *starts, PGresult *feed);
static void apply_round(Sim *s, PGresult *res);

static void
flush(Sim *s)
{
	PGresult  **res;
	PGresult   *starts = NULL;
	int			n,
				i;
	double		t0;

	if (s->nexp == 0)
		return;
	t0 = now_s();
	res = xmalloc(sizeof(PGresult *) * s->nexp);
	n = db_exec_many(s->conn, s->sql.data, res, s->nexp);
	s->r->statements++;
	if (n != s->nexp)
		die("a batch returned %d results, %d expected", n, s->nexp);
	for (i = 0; i < n; i++)
	{
		Expect	   *e = &s->exp[i];

		switch (e->kind)
		{
			case R_IGNORE:
				break;
			case R_SUBMIT:
				apply_submits(s, res[i], e->jobs, e->n);
				break;
			case R_ROUND:
				apply_round(s, res[i]);
				break;
			case R_STARTS:
				starts = res[i];
				break;
			case R_FEED:
				apply_feed(s, starts, res[i]);
				break;
		}
		free(e->jobs);
	}
	db_clear_many(res, n);
	free(res);
	s->nexp = 0;
	buf_reset(&s->sql);
	s->r->wall_db_s += now_s() - t0;
}

static const char *start_and_feed =
"SELECT x.job, x.workers, x.n,\n"
"       (SELECT count(gangsched.job_started(x.job, nn)) FROM unnest(x.nodes) nn)\n"
"  FROM (SELECT g.id AS job, g.workers, count(a.id) AS n,\n"
"               array_agg(DISTINCT nd.name) FILTER (WHERE nd.name IS NOT NULL) AS nodes\n"
"          FROM gangsched.gangs g\n"
"          LEFT JOIN gangsched.allocations a ON a.job = g.id AND upper_inf(a.during)\n"
"          LEFT JOIN gangsched.nodes nd ON nd.id = a.node_id\n"
"         WHERE g.state = 'placed'\n"
"         GROUP BY g.id, g.workers) x\n"
" ORDER BY x.job;\n"
"SELECT e.id, e.kind, e.job, extract(epoch FROM e.at)::bigint,\n"
"       COALESCE(extract(epoch FROM (e.detail->>'deadline')::timestamptz)::bigint, 0), e.reason,\n"
"       COALESCE((e.detail->>'stranded_gpus')::float8, 0),\n"
"       CASE WHEN e.kind = 'placed' THEN (SELECT g.workers FROM gangsched.gangs g WHERE g.id = e.job)\n"
"            WHEN e.kind IN ('grown', 'shrinking', 'shrunk') THEN (e.detail->>'workers')::int ELSE 0 END\n"
"  FROM gangsched.events e\n"
" WHERE e.id > %lld AND e.kind IN ('placed', 'preempting', 'requeued', 'expired', 'nominated', 'grown',\n"
"                                 'shrinking', 'shrunk')\n"
" ORDER BY e.id;\n";

/* Agents report the periodic checkpoints written since their last report. */
static void
add_checkpoints(Sim *s)
{
	int			i,
				n = 0;

	if (!s->preemption || s->o->checkpoint_interval <= 0)
		return;
	buf_reset(&s->a1);
	buf_reset(&s->a2);
	for (i = 0; i < s->nrunning; i++)
	{
		int			ix = s->running[i];
		SimJob	   *j = &s->j[ix];
		int64_t		c;
		char		ts[40];

		if (j->st != J_RUNNING)
			continue;
		c = last_checkpoint(s, ix, s->now);
		if (c <= j->run_start || c <= j->ckpt_reported)
			continue;
		j->ckpt_reported = c;
		format_ts(ts, sizeof(ts), s->base + c);
		buf_printf(&s->a1, "%s%lld", n ? "," : "", (long long) j->db_id);
		buf_printf(&s->a2, "%s\"%s\"", n ? "," : "", ts);
		n++;
	}
	if (n > 0)
	{
		buf_printf(&s->sql,
				   "SELECT count(gangsched.job_checkpointed(u.j, u.at))"
				   "  FROM unnest('{%s}'::bigint[], '{%s}'::timestamptz[]) u(j, at);\n",
				   s->a1.data, s->a2.data);
		expect(s, R_IGNORE, NULL, 0);
	}
}

/* Work (seconds at full size) a run of `wall` seconds at its held size does. */
static int64_t
work_done(const Sim *s, int ix, int64_t wall)
{
	const SimJob *j = &s->j[ix];
	int			w = s->tr->jobs[ix].workers;

	if (j->held <= 0 || j->held >= w)
		return wall;
	return (int64_t) floor((double) wall * j->held / w);
}

/* Wall seconds a run at its held size takes for `work` seconds of full-size work. */
static int64_t
wall_for(const Sim *s, int ix, int64_t work)
{
	const SimJob *j = &s->j[ix];
	int			w = s->tr->jobs[ix].workers;

	if (j->held <= 0 || j->held >= w)
		return work;
	return (int64_t) ceil((double) work * w / j->held);
}

/* ---- reacting to the scheduler's decisions -------------------------------------- */

static void
on_placed(Sim *s, int ix, const char *reason, int held)
{
	SimJob	   *j = &s->j[ix];
	int			team = s->tr->jobs[ix].team;
	const TraceJob *tj = &s->tr->jobs[ix];

	if (j->st != J_PENDING)
		die("job %s (%lld) placed while the replay has it in state %d",
			s->tr->jobs[ix].name, (long long) j->db_id, j->st);
	j->st = J_RUNNING;
	j->run_start = s->now;
	j->ckpt_reported = -1;
	j->stopped = false;
	if (j->first_placed < 0)
	{
		j->first_placed = s->now;
		/* the events' reasons end "as borrowed capacity" or "within nominal quota" */
		j->first_borrowed = reason != NULL && strstr(reason, "borrowed capacity") != NULL;
	}
	queue_leave(s, ix);
	j->held = (held > 0 && held <= tj->workers) ? held : tj->workers;
	j->held_gpus = j->held * tj->gpw;
	if (j->held < tj->workers)
		s->r->placed_smaller++;
	s->alloc += j->held_gpus;
	s->team_alloc[team] += j->held_gpus;
	s->team_wait[team] -= j->gpus;
	j->ver++;
	push(s, s->now + wall_for(s, ix, j->work_left > 0 ? j->work_left : 1), EV_FINISH, ix);
	run_add(s, ix);
	if (s->preemption && s->min_runtime > 0)
		push(s, s->now + s->min_runtime, EV_WAKE, -1);
}

/*
 * A round grew the running elastic gang to `held` workers: its workers
 * restart at the new size from a checkpoint written then (the run so far
 * is settled at the old size, nothing is lost), and the rest of its work
 * goes at the new speed.
 */
static void
on_grown(Sim *s, int ix, int held)
{
	SimJob	   *j = &s->j[ix];
	const TraceJob *tj = &s->tr->jobs[ix];

	if (j->st != J_RUNNING || held <= j->held || held > tj->workers)
		die("job %s (%lld) grown to %d workers while the replay has it in state %d with %d",
			tj->name, (long long) j->db_id, held, j->st, j->held);
	j->work_left -= work_done(s, ix, s->now - j->run_start);
	if (j->work_left < 1)
		j->work_left = 1;
	j->run_start = s->now;
	j->ckpt_reported = -1;
	s->alloc -= j->held_gpus;
	s->team_alloc[tj->team] -= j->held_gpus;
	j->held = held;
	j->held_gpus = held * tj->gpw;
	s->alloc += j->held_gpus;
	s->team_alloc[tj->team] += j->held_gpus;
	j->ver++;
	push(s, s->now + wall_for(s, ix, j->work_left), EV_FINISH, ix);
	s->r->grows++;
}

/*
 * Job ix obeys a stop (a preemption or a shrink): it keeps the work up to
 * its checkpoint (on demand: up to now), and its planned finish no longer
 * holds.
 */
static void
stop_at_checkpoint(Sim *s, int ix)
{
	SimJob	   *j = &s->j[ix];
	int64_t		done = work_done(s, ix, s->o->checkpoint_on_preempt ? s->now - j->run_start
								 : last_checkpoint(s, ix, s->now) - j->run_start);

	j->work_left -= done;
	if (j->work_left < 1)
		j->work_left = 1;
	j->ver++;
}

static void
on_preempting(Sim *s, int ix, int64_t deadline)
{
	SimJob	   *j = &s->j[ix];
	int64_t		delay = s->o->release_delay;

	if (j->st != J_RUNNING)
		die("job %lld told to stop while the replay has it in state %d", (long long) j->db_id, j->st);
	j->st = J_PREEMPTING;
	j->preempt_t = s->now;
	s->r->preemptions++;
	if (j->npreempt++ == 0)
		s->r->preempted_jobs++;
	if (j->npreempt > s->r->max_preemptions_job)
		s->r->max_preemptions_job = j->npreempt;
	if (s->now + delay <= deadline)
	{
		/* obeys: training stops now, the release follows after the delay */
		stop_at_checkpoint(s, ix);
		j->stopped = true;
		push(s, s->now + delay, EV_RELEASE, ix);
	}
	else
	{
		/* too slow: keeps running until it finishes or is killed */
		push(s, deadline, EV_WAKE, -1);
	}
}

/*
 * A round chose replicas of the running elastic job as victims: it shrinks
 * to `to` workers. Like a preempted job, it obeys when its release delay
 * is within the grace: it checkpoints and stops now, its released workers
 * go after the delay; else it keeps running and the round kills the
 * released workers at the deadline.
 */
static void
on_shrinking(Sim *s, int ix, int to, int64_t deadline)
{
	SimJob	   *j = &s->j[ix];
	int64_t		delay = s->o->release_delay;

	if (j->st != J_RUNNING || j->shrinking || to >= j->held || to <= 0)
		die("job %lld told to shrink to %d workers while the replay has it in state %d with %d",
			(long long) j->db_id, to, j->st, j->held);
	j->shrinking = true;
	s->r->shrinks++;
	if (s->now + delay <= deadline)
	{
		stop_at_checkpoint(s, ix);
		j->shrink_stopped = true;
		push(s, s->now + delay, EV_SHRINK, ix);
	}
	else
		push(s, deadline, EV_WAKE, -1);
}

/*
 * The shrink completed (our release, or the round's kill at the deadline):
 * the job restarts at `held` workers from its checkpoint (a killed one
 * from its last periodic checkpoint).
 */
static void
on_shrunk(Sim *s, int ix, int held)
{
	SimJob	   *j = &s->j[ix];
	const TraceJob *tj = &s->tr->jobs[ix];

	if (j->st != J_RUNNING || !j->shrinking || held <= 0 || held >= j->held)
		die("job %lld shrunk to %d workers while the replay has it in state %d with %d",
			(long long) j->db_id, held, j->st, j->held);
	if (!j->shrink_stopped)
	{
		j->work_left -= work_done(s, ix, last_checkpoint(s, ix, s->now) - j->run_start);
		if (j->work_left < 1)
			j->work_left = 1;
		s->r->shrink_kills++;
	}
	s->alloc -= j->held_gpus;
	s->team_alloc[tj->team] -= j->held_gpus;
	j->held = held;
	j->held_gpus = held * tj->gpw;
	s->alloc += j->held_gpus;
	s->team_alloc[tj->team] += j->held_gpus;
	j->run_start = s->now;
	j->ckpt_reported = -1;
	j->shrinking = j->shrink_stopped = false;
	j->ver++;
	push(s, s->now + wall_for(s, ix, j->work_left), EV_FINISH, ix);
}

/* Jobs entered the queue now: a round when they may first preempt after a delay. */
static void
wake_after_delays(Sim *s)
{
	int			k;

	for (k = 0; k < 2; k++)
		if (s->wait_wake[k] > 0)
			push(s, s->now + s->wait_wake[k], EV_WAKE, -1);
}

/* Back to pending: released by its agent (work_left already settled) or
 * requeued by the server (killed at its deadline, node down...). */
static void
on_requeued(Sim *s, int ix, bool by_server)
{
	SimJob	   *j = &s->j[ix];
	int			team = s->tr->jobs[ix].team;
	const TraceJob *tj = &s->tr->jobs[ix];

	if (by_server && !j->stopped)
	{
		/* the work since the last periodic checkpoint is lost */
		j->work_left -= work_done(s, ix, last_checkpoint(s, ix, s->now) - j->run_start);
		if (j->work_left < 1)
			j->work_left = 1;
	}
	if (by_server && j->st == J_PREEMPTING)
		s->r->kills++;
	j->st = J_PENDING;
	j->stopped = false;
	j->shrinking = j->shrink_stopped = false;
	j->ver++;
	queue_enter(s, ix);
	s->alloc -= j->held_gpus;
	s->team_alloc[team] -= j->held_gpus;
	s->team_wait[team] += j->gpus;
	run_remove(s, ix);
	if (tj->queue_timeout > 0)
		push(s, s->now + tj->queue_timeout, EV_WAKE, -1);
	wake_after_delays(s);
}

static void
on_done(Sim *s, int ix, JState final)
{
	SimJob	   *j = &s->j[ix];
	int			team = s->tr->jobs[ix].team;

	if (j->st == J_PENDING)
	{
		queue_leave(s, ix);
		s->team_wait[team] -= j->gpus;
	}
	else
	{
		s->alloc -= j->held_gpus;
		s->team_alloc[team] -= j->held_gpus;
		run_remove(s, ix);
	}
	j->st = final;
	j->end_t = s->now;
	j->ver++;
}

/* The results of start_and_feed: what was placed, preempted, killed and
 * expired, and how many allocations each started job holds. */
static void
apply_feed(Sim *s, PGresult *starts, PGresult *feed)
{
	int			i;

	for (i = 0; i < PQntuples(feed); i++)
	{
		int64_t		id = atoll(PQgetvalue(feed, i, 0));
		const char *kind = PQgetvalue(feed, i, 1);
		int			ix = sim_job(s, atoll(PQgetvalue(feed, i, 2)));
		int64_t		at = atoll(PQgetvalue(feed, i, 3)) - s->base;
		int64_t		deadline = atoll(PQgetvalue(feed, i, 4)) - s->base;

		if (at != s->now)
			die("event %lld at second %lld while the replay is at %lld", (long long) id,
				(long long) at, (long long) s->now);
		if (strcmp(kind, "placed") == 0)
		{
			on_placed(s, ix, PQgetvalue(feed, i, 5), atoi(PQgetvalue(feed, i, 7)));
			s->progress = true;
		}
		else if (strcmp(kind, "grown") == 0)
		{
			on_grown(s, ix, atoi(PQgetvalue(feed, i, 7)));
			s->progress = true;
		}
		else if (strcmp(kind, "nominated") == 0)
		{
			/* the victims' GPUs no nomination of that round uses (0 before issue 12) */
			s->r->nominations++;
			s->r->stranded_gpus += atof(PQgetvalue(feed, i, 6));
		}
		else if (strcmp(kind, "preempting") == 0)
		{
			on_preempting(s, ix, deadline);
			s->progress = true;
		}
		else if (strcmp(kind, "shrinking") == 0)
		{
			on_shrinking(s, ix, atoi(PQgetvalue(feed, i, 7)), deadline);
			s->progress = true;
		}
		else if (strcmp(kind, "shrunk") == 0)
		{
			if (s->j[ix].st == J_RUNNING && s->j[ix].shrinking)
				on_shrunk(s, ix, atoi(PQgetvalue(feed, i, 7)));
			s->progress = true;
		}
		else if (strcmp(kind, "requeued") == 0)
		{
			/* our own releases are settled already */
			if (s->j[ix].st == J_RUNNING || s->j[ix].st == J_PREEMPTING)
				on_requeued(s, ix, true);
		}
		else if (strcmp(kind, "expired") == 0)
		{
			on_done(s, ix, J_EXPIRED);
			s->r->expired++;
			s->progress = true;
		}
		s->last_event_id = id;
	}
	for (i = 0; i < PQntuples(starts); i++)
	{
		int			workers = atoi(PQgetvalue(starts, i, 1));
		int			held = atoi(PQgetvalue(starts, i, 2));

		if (held != workers)
		{
			s->r->partial_placements++;
			fprintf(stderr, "gangsched-replay: job %s holds %d allocations for %d workers\n",
					PQgetvalue(starts, i, 0), held, workers);
		}
	}
}

static void
add_start_and_feed(Sim *s)
{
	buf_printf(&s->sql, start_and_feed, (long long) s->last_event_id);
	expect(s, R_STARTS, NULL, 0);
	expect(s, R_FEED, NULL, 0);
}

/* ---- the agents' batches ----------------------------------------------------------- */

static void
send_finishes(Sim *s)
{
	int			i;

	buf_reset(&s->a1);
	for (i = 0; i < s->nfinish; i++)
		buf_printf(&s->a1, "%s%lld", i ? "," : "", (long long) s->j[s->finish_list[i]].db_id);
	buf_printf(&s->sql, "SELECT count(gangsched.job_finished(j, true)) FROM unnest('{%s}'::bigint[]) j;\n",
			   s->a1.data);
	expect(s, R_IGNORE, NULL, 0);
	for (i = 0; i < s->nfinish; i++)
	{
		on_done(s, s->finish_list[i], J_FINISHED);
		s->r->finished++;
	}
}

/*
 * Releases of preempted jobs that stopped. Without checkpoints on demand the
 * agents first report the last periodic checkpoint (so the server counts
 * the same lost work as the replay).
 */
static void
send_releases(Sim *s)
{
	int			i,
				nck = 0;
	Buf			ckj,
				ckt;

	buf_init(&ckj);
	buf_init(&ckt);
	buf_reset(&s->a1);
	buf_reset(&s->a2);
	for (i = 0; i < s->nrelease; i++)
	{
		int			ix = s->release_list[i];
		SimJob	   *j = &s->j[ix];

		buf_printf(&s->a1, "%s%lld", i ? "," : "", (long long) j->db_id);
		buf_printf(&s->a2, "%s%s", i ? "," : "", s->o->checkpoint_on_preempt ? "t" : "f");
		if (!s->o->checkpoint_on_preempt)
		{
			int64_t		c = last_checkpoint(s, ix, j->preempt_t);

			if (c > j->run_start && c > j->ckpt_reported)
			{
				char		ts[40];

				format_ts(ts, sizeof(ts), s->base + c);
				buf_printf(&ckj, "%s%lld", nck ? "," : "", (long long) j->db_id);
				buf_printf(&ckt, "%s\"%s\"", nck ? "," : "", ts);
				nck++;
			}
		}
		on_requeued(s, ix, false);
	}
	if (nck > 0)
	{
		buf_printf(&s->sql,
				   "SELECT count(gangsched.job_checkpointed(u.j, u.at))"
				   "  FROM unnest('{%s}'::bigint[], '{%s}'::timestamptz[]) u(j, at);\n",
				   ckj.data, ckt.data);
		expect(s, R_IGNORE, NULL, 0);
	}
	buf_printf(&s->sql,
			   "SELECT count(gangsched.job_released(u.j, u.c)) FROM unnest('{%s}'::bigint[], '{%s}'::bool[]) u(j, c);\n",
			   s->a1.data, s->a2.data);
	expect(s, R_IGNORE, NULL, 0);
	buf_free(&ckj);
	buf_free(&ckt);
}

/* Shrinking jobs' agents report their released workers gone, one call per node. */
static void
send_shrink_releases(Sim *s)
{
	int			i;

	buf_reset(&s->a1);
	for (i = 0; i < s->nshrink; i++)
		buf_printf(&s->a1, "%s%lld", i ? "," : "", (long long) s->j[s->shrink_list[i]].db_id);
	buf_printf(&s->sql,
			   "SELECT count(gangsched.workers_released(x.node, x.job))"
			   "  FROM (SELECT DISTINCT nd.name AS node, a.job FROM gangsched.allocations a"
			   "          JOIN gangsched.gangs g ON g.id = a.job JOIN gangsched.nodes nd ON nd.id = a.node_id"
			   "         WHERE a.job = ANY ('{%s}'::bigint[]) AND upper_inf(a.during) AND a.worker >= g.shrink_to"
			   "         ORDER BY 2, 1) x;\n", s->a1.data);
	expect(s, R_IGNORE, NULL, 0);
}

static void
send_submits(Sim *s)
{
	int			i;
	Buf			teams,
				workers,
				gpus,
				cpus,
				mem,
				names,
				prio,
				qt,
				tl,
				mr;

	buf_init(&teams);
	buf_init(&workers);
	buf_init(&gpus);
	buf_init(&cpus);
	buf_init(&mem);
	buf_init(&names);
	buf_init(&prio);
	buf_init(&qt);
	buf_init(&tl);
	buf_init(&mr);
	for (i = 0; i < s->nsubmit; i++)
	{
		const TraceJob *tj = &s->tr->jobs[s->submit_list[i]];
		const char *sep = i ? "," : "";

		buf_printf(&teams, "%s", sep);
		buf_array_elem(&teams, s->one_team ? "all" : s->tr->teams[tj->team].name);
		buf_printf(&names, "%s", sep);
		buf_array_elem(&names, tj->name);
		buf_printf(&workers, "%s%d", sep, tj->workers);
		buf_printf(&gpus, "%s%.6g", sep, tj->gpw);
		buf_printf(&cpus, "%s%.6g", sep, tj->cpw);
		buf_printf(&mem, "%s%.6g", sep, tj->mpw);
		buf_printf(&prio, "%s%d", sep, tj->priority);
		buf_printf(&qt, "%s%lld", sep, (long long) tj->queue_timeout);
		/* an elastic job's limit allows for its run at its minimum */
		buf_printf(&tl, "%s%lld", sep, s->o->time_limit_factor > 0 ?
				   (long long) ceil(s->o->time_limit_factor * (double) tj->duration *
									(tj->min_replicas > 0 ? (double) tj->workers / tj->min_replicas : 1.0)) : 0LL);
		buf_printf(&mr, "%s%d", sep, tj->min_replicas);
	}
	buf_printf(&s->sql,
			   "SELECT i, job, err FROM pg_temp.submit_many('{%s}', '{%s}', '{%s}', '{%s}', '{%s}', '{%s}', '{%s}', '{%s}', %lld, '{%s}', '{%s}');\n",
			   teams.data, workers.data, gpus.data, cpus.data, mem.data, names.data, prio.data, qt.data,
			   (long long) s->o->checkpoint_interval, tl.data, mr.data);
	expect(s, R_SUBMIT, s->submit_list, s->nsubmit);
	for (i = 0; i < s->nsubmit; i++)
	{
		int			ix = s->submit_list[i];
		const TraceJob *tj = &s->tr->jobs[ix];

		s->j[ix].st = J_PENDING;
		queue_enter(s, ix);
		s->j[ix].entitled = s->team_alloc[tj->team] + s->team_wait[tj->team] + s->j[ix].gpus <=
			(double) s->tr->teams[tj->team].quota + 1e-9;
		s->team_wait[tj->team] += s->j[ix].gpus;
		if (tj->queue_timeout > 0)
			push(s, s->now + tj->queue_timeout, EV_WAKE, -1);
	}
	if (s->nsubmit > 0)
		wake_after_delays(s);
	buf_free(&teams);
	buf_free(&workers);
	buf_free(&gpus);
	buf_free(&cpus);
	buf_free(&mem);
	buf_free(&names);
	buf_free(&prio);
	buf_free(&qt);
	buf_free(&tl);
	buf_free(&mr);
}

/* Job ids of the submits; a job refused at submit stops waiting. */
static void
apply_submits(Sim *s, PGresult *res, const int *jobs, int n)
{
	int			i;

	if (PQntuples(res) != n)
		die("submit_many returned %d rows for %d jobs", PQntuples(res), n);
	for (i = 0; i < n; i++)
	{
		int			ix = jobs[atoi(PQgetvalue(res, i, 0)) - 1];
		SimJob	   *j = &s->j[ix];
		const TraceJob *tj = &s->tr->jobs[ix];

		if (PQgetisnull(res, i, 1))
		{
			if (j->st == J_PENDING)
			{
				queue_leave(s, ix);
				s->team_wait[tj->team] -= j->gpus;
			}
			j->st = J_REJECTED;
			s->r->rejected++;
			if (!s->o->quiet && s->r->rejected <= 5)
				fprintf(stderr, "gangsched-replay: %s: job %s refused: %s\n", s->r->policy, tj->name,
						PQgetvalue(res, i, 2));
			continue;
		}
		j->db_id = atoll(PQgetvalue(res, i, 1));
		map_db(s, j->db_id, ix);
		s->r->submitted++;
		if (tj->min_replicas > 0)
			s->r->elastic_jobs++;
	}
}

/* ---- invariants ------------------------------------------------------------------ */


static void
check_invariants(Sim *s)
{
	double		t0 = now_s();
	PGresult   *res = db_exec(s->conn, "SELECT invariant, job, node, detail FROM gangsched.check_invariants()");
	int			i;

	s->r->wall_checks_s += now_s() - t0;
	s->r->invariant_checks++;
	for (i = 0; i < PQntuples(res); i++)
	{
		if (s->r->invariant_violations < 10)
			fprintf(stderr, "gangsched-replay: %s: second %lld: invariant %s violated (job %s, node %s): %s\n",
					s->r->policy, (long long) s->now, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
					PQgetvalue(res, i, 2), PQgetvalue(res, i, 3));
		if (s->r->first_violation == NULL)
			s->r->first_violation = xstrdup(PQgetvalue(res, i, 3));
		s->r->invariant_violations++;
	}
	PQclear(res);
}

/* ---- set-up ---------------------------------------------------------------------- */

static const char *submit_many_sql =
"CREATE FUNCTION pg_temp.submit_many(p_team text[], p_workers int[], p_gpus numeric[], p_cpus numeric[],\n"
"                                    p_mem numeric[], p_name text[], p_prio int[], p_qt int[], p_ckpt int,\n"
"                                    p_tl bigint[], p_min int[])\n"
"RETURNS TABLE (i int, job bigint, err text) LANGUAGE plpgsql AS $$\n"
"DECLARE k int;\n"
"BEGIN\n"
"    FOR k IN 1 .. cardinality(p_team) LOOP\n"
"        i := k;\n"
"        BEGIN\n"
"            job := gangsched.submit(p_team[k], p_workers[k], p_gpus[k], cpus => p_cpus[k], mem_gb => p_mem[k],\n"
"                                    name => p_name[k], priority => p_prio[k],\n"
"                                    checkpoint_interval => CASE WHEN p_ckpt > 0 THEN make_interval(secs => p_ckpt) END,\n"
"                                    queue_timeout => CASE WHEN p_qt[k] > 0 THEN make_interval(secs => p_qt[k]) END,\n"
"                                    time_limit => CASE WHEN p_tl[k] > 0 THEN make_interval(secs => p_tl[k]) END,\n"
"                                    min_replicas => NULLIF(p_min[k], 0));\n"
"            err := NULL;\n"
"        EXCEPTION WHEN OTHERS THEN\n"
"            job := NULL;\n"
"            err := SQLSTATE || ' ' || SQLERRM;\n"
"        END;\n"
"        RETURN NEXT;\n"
"    END LOOP;\n"
"END $$;\n";

static void
load_cluster(Sim *s)
{
	const Cluster *c = s->c;
	const Trace *t = s->tr;
	Buf			b,
				names,
				racks,
				cpus,
				mem,
				gpus,
				models,
				gmem;
	int			i;
	char		ts[40];

	buf_init(&b);
	buf_init(&names);
	buf_init(&racks);
	buf_init(&cpus);
	buf_init(&mem);
	buf_init(&gpus);
	buf_init(&models);
	buf_init(&gmem);
	for (i = 0; i < c->nnodes; i++)
	{
		const NodeKind *k = &c->kinds[c->nodes[i].kind];
		const char *sep = i ? "," : "";

		buf_printf(&names, "%s", sep);
		buf_array_elem(&names, c->nodes[i].name);
		buf_printf(&racks, "%s%s", sep, c->nodes[i].rack);
		buf_printf(&cpus, "%s%.6g", sep, k->cpus);
		buf_printf(&mem, "%s%.6g", sep, k->mem_gb);
		buf_printf(&gpus, "%s%d", sep, k->gpus);
		buf_printf(&models, "%s", sep);
		if (k->gpu_model)
			buf_array_elem(&models, k->gpu_model);
		else
			buf_printf(&models, "NULL");
		if (k->gpu_mem_gb >= 0)
			buf_printf(&gmem, "%s%.6g", sep, k->gpu_mem_gb);
		else
			buf_printf(&gmem, "%sNULL", sep);
	}
	format_ts(ts, sizeof(ts), s->base);
	buf_printf(&b, "SET gangsched.clock_override = '%s';\n", ts);
	buf_printf(&b, "SELECT gangsched.set_topology_levels(ARRAY['rack']);\n");
	buf_printf(&b, "SELECT gangsched.add_pool('main', 'reserved');\n");
	buf_printf(&b,
			   "SELECT count(gangsched.add_node(u.name, 'main', u.rack::ltree, u.cpus, u.mem, 100, u.gpus, u.model, u.gmem, %d))\n"
			   "  FROM unnest('{%s}'::text[], '{%s}'::text[], '{%s}'::numeric[], '{%s}'::numeric[], '{%s}'::int[],\n"
			   "              '{%s}'::text[], '{%s}'::numeric[]) u(name, rack, cpus, mem, gpus, model, gmem);\n",
			   c->slices, names.data, racks.data, cpus.data, mem.data, gpus.data, models.data, gmem.data);
	if (s->one_team)
		buf_printf(&b, "SELECT gangsched.add_team('all');\nSELECT gangsched.set_quota('all', 'main', %ld);\n",
				   c->gpus);
	else
		for (i = 0; i < t->nteams; i++)
		{
			buf_printf(&b, "SELECT gangsched.add_team(");
			buf_sql_literal(&b, t->teams[i].name);
			/* the weight the fairness measure uses (a team of quota 0 gets the least) */
			buf_printf(&b, ", %.6g);\nSELECT gangsched.set_quota(", s->team_weight[i] > 0 ? s->team_weight[i] : 0.000001);
			buf_sql_literal(&b, t->teams[i].name);
			buf_printf(&b, ", 'main', %ld);\n", t->teams[i].quota);
		}
	buf_printf(&b, "%s", submit_many_sql);
	db_command(s->conn, b.data);
	s->clock_sent = 0;
	buf_free(&b);
	buf_free(&names);
	buf_free(&racks);
	buf_free(&cpus);
	buf_free(&mem);
	buf_free(&gpus);
	buf_free(&models);
	buf_free(&gmem);
}

static int64_t
setting_s(PGconn *conn, const char *name)
{
	char		sql[200];
	PGresult   *res;
	int64_t		v;

	snprintf(sql, sizeof(sql), "SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = '%s'", name);
	res = db_exec(conn, sql);
	if (PQntuples(res) != 1)
		die("the server has no setting %s: is the gangsched extension loaded?", name);
	v = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

/* A setting in seconds, or dflt when the server has no such setting. */
static int64_t
setting_s_or(PGconn *conn, const char *name, int64_t dflt)
{
	char		sql[200];
	PGresult   *res;
	int64_t		v = dflt;

	snprintf(sql, sizeof(sql), "SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = '%s'", name);
	res = db_exec(conn, sql);
	if (PQntuples(res) == 1)
		v = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

static void
apply_policy(Sim *s, const char *policy)
{
	Buf			b;
	int			i;
	PGresult   *res;

	buf_init(&b);
	/*
	 * work_mem: check_invariants() expands device slices with unnest() and
	 * generate_series(), estimated at thousands of rows per allocation; at
	 * the default 4 MB its hash joins are planned in hundreds of batches and
	 * spill (0.5 s a check instead of 50 ms at 600 running workers).
	 */
	buf_printf(&b, "SET jit = off; SET work_mem = '64MB'; SET synchronous_commit = off; SET TimeZone = 'UTC';\n");
	if (strcmp(policy, "fifo") == 0)
		buf_printf(&b, "SET gangsched.queue_order = 'priority'; SET gangsched.preemption = off; SET gangsched.backfill = off;\n");
	else if (strcmp(policy, "fifo-backfill") == 0)
		buf_printf(&b, "SET gangsched.queue_order = 'priority'; SET gangsched.preemption = off; SET gangsched.backfill = on;\n");
	else if (strcmp(policy, "drf") == 0)
		buf_printf(&b, "SET gangsched.queue_order = 'fair'; SET gangsched.preemption = on; SET gangsched.backfill = on;\n");
	else if (strcmp(policy, "drf-nopreempt") == 0)
		buf_printf(&b, "SET gangsched.queue_order = 'fair'; SET gangsched.preemption = off; SET gangsched.backfill = on;\n");
	else if (strcmp(policy, "drf-las") == 0 || strcmp(policy, "las") == 0)
		buf_printf(&b, "SET gangsched.queue_order = 'fair'; SET gangsched.preemption = on; SET gangsched.backfill = on;"
				   " SET gangsched.team_order = 'las';\n");
	else
		die("unknown policy \"%s\": use fifo, fifo-backfill, drf, drf-nopreempt, drf-las or las", policy);
	for (i = 0; i < s->o->nsets; i++)
	{
		const char *eq = strchr(s->o->sets[i], '=');

		buf_printf(&b, "SELECT pg_catalog.set_config(");
		{
			char	   *name = xstrdup(s->o->sets[i]);

			name[eq - s->o->sets[i]] = '\0';
			buf_sql_literal(&b, name);
			free(name);
		}
		buf_printf(&b, ", ");
		buf_sql_literal(&b, eq + 1);
		buf_printf(&b, ", false);\n");
	}
	db_command(s->conn, b.data);
	buf_free(&b);
	res = db_exec(s->conn, "SELECT current_setting('gangsched.preemption')::bool");
	s->preemption = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	s->min_runtime = setting_s(s->conn, "gangsched.min_runtime");
	/*
	 * A pending job may preempt once it has waited a delay: a round then
	 * (a background worker's round interval would give it one).
	 */
	if (s->preemption)
	{
		s->wait_wake[0] = setting_s_or(s->conn, "gangsched.reclaim_delay", 0);
		s->wait_wake[1] = setting_s_or(s->conn, "gangsched.fair_preemption_delay", 0);
	}
}

/* ---- the loop ---------------------------------------------------------------------- */

static void
apply_round(Sim *s, PGresult *res)
{
	double		ms;

	if (PQgetvalue(res, 0, 0)[0] != 't')
		die("run_round() did not run: %s (is another session running rounds in this database?)",
			PQgetvalue(res, 0, 7));
	ms = atof(PQgetvalue(res, 0, 6));
	s->r->rounds++;
	s->r->round_ms_total += ms;
	if (ms > s->r->round_ms_max)
		s->r->round_ms_max = ms;
}

/* A round now, after the agents' queued calls; its decisions are read back at once. */
static void
run_round(Sim *s)
{
	out_clock(s);
	add_checkpoints(s);
	buf_printf(&s->sql, "SELECT ran, considered, placed, preempted, expired, requeued, ms, note FROM gangsched.run_round();\n");
	expect(s, R_ROUND, NULL, 0);
	add_start_and_feed(s);
	s->progress = false;
	flush(s);
	queue_passed_over(s);
	if (s->o->check_every > 0 && s->r->rounds % s->o->check_every == 0)
		check_invariants(s);
}

void
run_policy(const Options *o, const Cluster *c, const Trace *t, const char *policy,
		   const char *dbname, Result *r)
{
	Sim			s;
	int			i;
	double		t0 = now_s();
	double		sum;
	double	   *v;
	int			nv;
	PGresult   *res;

	memset(&s, 0, sizeof(s));
	memset(r, 0, sizeof(*r));
	r->policy = policy;
	r->time_limit_factor = o->time_limit_factor;
	r->elastic_fraction = o->elastic_fraction;
	r->database = dbname;
	r->jobs = t->njobs;
	r->nodes = c->nnodes;
	r->gpus = c->gpus;
	s.o = o;
	s.c = c;
	s.tr = t;
	s.r = r;
	s.n = t->njobs;
	s.j = xcalloc(s.n, sizeof(SimJob));
	s.running = xmalloc(sizeof(int) * s.n);
	s.fresh = xmalloc(sizeof(int) * (s.n + 1) * 2);
	s.finish_list = xmalloc(sizeof(int) * s.n);
	s.release_list = xmalloc(sizeof(int) * s.n);
	s.shrink_list = xmalloc(sizeof(int) * s.n);
	s.submit_list = xmalloc(sizeof(int) * s.n);
	s.team_alloc = xcalloc(t->nteams, sizeof(double));
	s.team_wait = xcalloc(t->nteams, sizeof(double));
	s.team_weight = xcalloc(t->nteams, sizeof(double));
	s.team_ent = xcalloc(t->nteams, sizeof(double));
	s.team_alloc_c = xcalloc(t->nteams, sizeof(double));
	s.team_ent_c = xcalloc(t->nteams, sizeof(double));
	buf_init(&s.sql);
	buf_init(&s.a1);
	buf_init(&s.a2);
	s.base = parse_epoch(o->start);
	s.clock_sent = -1;
	s.next_round = NEVER;
	{
		long		qsum = 0;

		for (i = 0; i < t->nteams; i++)
			qsum += t->teams[i].quota;
		for (i = 0; i < t->nteams; i++)
			s.team_weight[i] = (qsum > 0 && !o->equal_weights) ? (double) t->teams[i].quota : 1.0;
	}
	for (i = 0; i < s.n; i++)
	{
		s.j[i].st = J_FUTURE;
		s.j[i].work_left = t->jobs[i].duration;
		s.j[i].first_placed = -1;
		s.j[i].end_t = -1;
		s.j[i].run_ix = -1;
		s.j[i].gpus = t->jobs[i].workers * t->jobs[i].gpw;
	}

	s.one_team = strcmp(policy, "las") == 0;
	s.conn = db_connect(dbname);
	db_command(s.conn, "SET client_min_messages = warning; CREATE EXTENSION gangsched CASCADE;");
	apply_policy(&s, policy);
	load_cluster(&s);
	s.now = t->jobs[0].submit;
	s.last_t = s.now;

	for (;;)
	{
		int64_t		tn = heap_next(&s);
		int64_t		ts = s.next_sub < s.n ? t->jobs[s.next_sub].submit : NEVER;
		bool		changed = false;
		bool		wake = false;

		if (ts < tn)
			tn = ts;
		if (s.next_round < tn)
			tn = s.next_round;
		if (tn == NEVER || (o->until > 0 && tn > o->until))
			break;
		advance(&s, tn);
		s.now = tn;
		s.nfinish = s.nrelease = s.nsubmit = s.nshrink = 0;
		while (s.nheap > 0 && s.heap[0].t == tn)
		{
			Ev			e = pop(&s);

			if (stale(&s, &e))
				continue;
			if (e.type == EV_FINISH)
				s.finish_list[s.nfinish++] = e.job;
			else if (e.type == EV_RELEASE)
				s.release_list[s.nrelease++] = e.job;
			else if (e.type == EV_SHRINK)
				s.shrink_list[s.nshrink++] = e.job;
			else
				wake = true;
		}
		while (s.next_sub < s.n && t->jobs[s.next_sub].submit == tn)
			s.submit_list[s.nsubmit++] = s.next_sub++;
		/*
		 * The agents report an instant's finishes and releases in trace
		 * order, not in the order the heap gives events of one second
		 * (which follows the order they were pushed in): which preemptor a
		 * release places first, and so whether it counts as borrowed, must
		 * not depend on that.
		 */
		qsort(s.finish_list, s.nfinish, sizeof(int), cmp_int);
		qsort(s.release_list, s.nrelease, sizeof(int), cmp_int);
		qsort(s.shrink_list, s.nshrink, sizeof(int), cmp_int);

		if (s.nfinish + s.nrelease + s.nshrink + s.nsubmit > 0)
		{
			out_clock(&s);
			if (s.nfinish > 0)
				send_finishes(&s);
			if (s.nrelease > 0)
				send_releases(&s);
			if (s.nshrink > 0)
				send_shrink_releases(&s);
			if (s.nsubmit > 0)
				send_submits(&s);
			if (s.nrelease + s.nshrink > 0)
			{
				/* the last victim's release placed its preemptor: start it now */
				add_start_and_feed(&s);
				flush(&s);
			}
			else if (s.nexp > 2000 || s.sql.len > (4 << 20))
				flush(&s);
			changed = true;
		}
		if ((changed || wake) && s.pending > 0)
			want_round(&s, tn);
		if (s.next_round == tn)
		{
			s.next_round = NEVER;
			run_round(&s);
			if (s.pending > 0)
			{
				/* nothing can change any more: stuck jobs stay unfinished */
				if (!s.progress && s.nrunning == 0 && s.next_sub == s.n)
					break;
				if (o->idle_round > 0)
					want_round(&s, tn + o->idle_round);
			}
		}
	}

	flush(&s);
	if (o->check_every > 0)
		check_invariants(&s);
	res = db_exec(s.conn, "SELECT COALESCE(sum(lost_gpu_seconds), 0) / 3600.0 FROM gangsched.gangs");
	r->lost_gpu_hours = atof(PQgetvalue(res, 0, 0));
	PQclear(res);

	/* summaries */
	v = xmalloc(sizeof(double) * (s.n + 1));
	nv = 0;
	sum = 0;
	for (i = 0; i < s.n; i++)
	{
		if (s.j[i].st == J_FINISHED)
		{
			double		jct = (double) (s.j[i].end_t - t->jobs[i].submit);

			v[nv++] = jct;
			sum += jct;
			if (s.j[i].end_t - t->jobs[0].submit > r->makespan)
				r->makespan = s.j[i].end_t - t->jobs[0].submit;
		}
		else if (s.j[i].st != J_EXPIRED && s.j[i].st != J_REJECTED)
			r->unfinished++;
	}
	r->jct_mean = nv ? sum / nv : 0;
	/* per trace team */
	r->nteams = t->nteams;
	r->team_names = xcalloc(t->nteams + 1, sizeof(char *));
	r->team_jct_mean = xcalloc(t->nteams + 1, sizeof(double));
	r->team_finished = xcalloc(t->nteams + 1, sizeof(int));
	for (i = 0; i < s.n; i++)
		if (s.j[i].st == J_FINISHED)
		{
			r->team_jct_mean[t->jobs[i].team] += (double) (s.j[i].end_t - t->jobs[i].submit);
			r->team_finished[t->jobs[i].team]++;
		}
	for (i = 0; i < t->nteams; i++)
	{
		r->team_names[i] = t->teams[i].name;
		r->team_jct_mean[i] = r->team_finished[i] ? r->team_jct_mean[i] / r->team_finished[i] : NAN;
	}
	r->jct_p50 = percentile(v, nv, 0.50);
	r->jct_p95 = percentile(v, nv, 0.95);
	nv = 0;
	sum = 0;
	for (i = 0; i < s.n; i++)
		if (s.j[i].first_placed >= 0)
		{
			double		w = (double) (s.j[i].first_placed - t->jobs[i].submit);

			v[nv++] = w;
			sum += w;
		}
	r->wait_mean = nv ? sum / nv : 0;
	{
		double		sg = 0,
					sb = 0,
					se = 0;

		for (i = 0; i < s.n; i++)
			if (s.j[i].first_placed >= 0)
			{
				double		w = (double) (s.j[i].first_placed - t->jobs[i].submit);

				if (s.j[i].entitled)
				{
					se += w;
					r->placed_entitled++;
				}
				if (s.j[i].first_borrowed)
				{
					sb += w;
					r->placed_borrowed++;
				}
				else
				{
					sg += w;
					r->placed_guaranteed++;
				}
			}
		r->wait_guaranteed_mean = r->placed_guaranteed ? sg / r->placed_guaranteed : NAN;
		r->wait_borrowed_mean = r->placed_borrowed ? sb / r->placed_borrowed : NAN;
		r->wait_entitled_mean = r->placed_entitled ? se / r->placed_entitled : NAN;
	}
	r->wait_p50 = percentile(v, nv, 0.50);
	r->wait_p95 = percentile(v, nv, 0.95);
	r->gpu_alloc_ratio = s.cap_c > 0 ? s.alloc_c / s.cap_c : NAN;	/* no contention: undefined */
	nv = 0;
	for (i = 0; i < t->nteams; i++)
		if (s.team_ent_c[i] > 0)
			v[nv++] = s.team_alloc_c[i] / s.team_ent_c[i];
	r->jain = jain_index(v, nv);
	free(v);
	r->wall_s = now_s() - t0;
	PQfinish(s.conn);
	buf_free(&s.sql);
	buf_free(&s.a1);
	buf_free(&s.a2);
	free(s.exp);
	free(s.j);
	free(s.by_db);
	free(s.heap);
	free(s.running);
	free(s.fresh);
	free(s.finish_list);
	free(s.release_list);
	free(s.shrink_list);
	free(s.submit_list);
	free(s.team_alloc);
	free(s.team_wait);
	free(s.team_weight);
	free(s.team_ent);
	free(s.team_alloc_c);
	free(s.team_ent_c);
}
