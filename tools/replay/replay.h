/*
 * replay.h — gangsched-replay: a GPU-cluster trace replayed in virtual time
 * through the real extension (docs/replay.md).
 *
 * The pieces: trace.c reads the CSV files and scales the cluster, db.c is
 * the libpq edge, sim.c is the event loop with its simulated node agents,
 * stats.c turns what the loop saw into the summary, main.c parses options
 * and runs one fresh database per policy.
 */
#ifndef GS_REPLAY_H
#define GS_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#define NEVER INT64_MAX

/* ---- growable text buffer ------------------------------------------------ */

typedef struct Buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} Buf;

void		buf_init(Buf *b);
void		buf_reset(Buf *b);
void		buf_free(Buf *b);
void		buf_printf(Buf *b, const char *fmt,...) __attribute__((format(printf, 2, 3)));
void		buf_sql_literal(Buf *b, const char *s);		/* 'text' with quotes doubled */
void		buf_array_elem(Buf *b, const char *s);	/* "elem" for an array literal */

void		die(const char *fmt,...) __attribute__((format(printf, 1, 2), noreturn));
void	   *xmalloc(size_t n);
void	   *xcalloc(size_t n, size_t sz);
void	   *xrealloc(void *p, size_t n);
char	   *xstrdup(const char *s);

/* ---- inputs (trace.c) ------------------------------------------------------ */

typedef struct NodeKind
{
	int			gpus;
	char	   *gpu_model;		/* NULL when the file leaves it empty */
	double		gpu_mem_gb;		/* < 0: unknown */
	double		cpus;
	double		mem_gb;
} NodeKind;

typedef struct Node
{
	char	   *name;
	int			kind;
	char	   *rack;			/* topology label, filled by scale_cluster */
} Node;

typedef struct Cluster
{
	NodeKind   *kinds;
	int			nkinds;
	Node	   *nodes;
	int			nnodes;
	long		gpus;			/* total GPUs */
	int			slices;			/* slices per device */
} Cluster;

typedef struct Team
{
	char	   *name;
	double		file_gpus;		/* from the quota file; < 0 when absent */
	long		quota;			/* nominal GPUs on the scaled cluster */
} Team;

typedef struct TraceJob
{
	char	   *name;
	int64_t		submit;			/* seconds from the window's start */
	int64_t		duration;		/* seconds of work */
	int			team;			/* index into teams */
	int			workers;
	double		gpw;			/* GPUs per worker (fraction k/slices or whole) */
	double		cpw;			/* cpus per worker */
	double		mpw;			/* mem_gb per worker */
	int64_t		queue_timeout;	/* seconds; 0 = none */
	int			priority;
	int			min_replicas;	/* elastic (--elastic-fraction): its minimum; 0 = rigid */
} TraceJob;

typedef struct Trace
{
	TraceJob   *jobs;
	int			njobs;
	Team	   *teams;
	int			nteams;
	bool		fractional;		/* some job asks for part of one device */
} Trace;

typedef struct Options
{
	const char *nodes_file;
	const char *trace_file;
	const char *quotas_file;
	double		scale;
	char	  **policies;
	int			npolicies;
	int64_t		checkpoint_interval;
	int64_t		tick;
	int64_t		idle_round;
	int64_t		release_delay;
	bool		checkpoint_on_preempt;
	int64_t		queue_timeout;
	double		time_limit_factor;	/* each job's time limit: this × its duration; 0 = none */
	double		elastic_fraction;	/* of the multi-GPU jobs made elastic (docs/replay.md) */
	unsigned	seed;			/* which of them: deterministic by seed */
	int			rack_size;
	bool		equal_weights;	/* teams of weight 1, not weighted by their quotas */
	int			slices;			/* 0: 1, or 4 when the trace has fractions */
	int			limit;
	int64_t		until;			/* stop at this virtual second; 0 = run to the end */
	bool		json;
	bool		keep;
	bool		quiet;
	int			check_every;
	const char *db_prefix;
	const char *maintenance_db;
	const char *start;			/* timestamptz of second 0 */
	char	  **sets;			/* extra name=value settings */
	int			nsets;
} Options;

void		read_cluster(const char *path, Cluster *c);
void		scale_cluster(Cluster *c, double scale, int rack_size);
void		read_trace(const char *path, Trace *t, const Options *o);
void		read_quotas(const char *path, Trace *t);
void		assign_quotas(Trace *t, long capacity_gpus, bool from_file);
int			mark_elastic(Trace *t, double fraction, unsigned seed);

/* ---- database edge (db.c) -------------------------------------------------- */

PGconn	   *db_connect(const char *dbname);
PGresult   *db_exec(PGconn *conn, const char *sql);
void		db_command(PGconn *conn, const char *sql);
int			db_exec_many(PGconn *conn, const char *sql, PGresult **results, int max);
void		db_clear_many(PGresult **results, int n);
void		format_ts(char *out, size_t len, int64_t epoch_s);
int64_t		parse_epoch(const char *s);

/* ---- the replay (sim.c) ---------------------------------------------------- */

typedef struct Result
{
	double		time_limit_factor;	/* the run's --time-limit-factor, 0 = none */
	double		elastic_fraction;	/* the run's --elastic-fraction */
	int			elastic_jobs;	/* jobs submitted elastic */
	int			placed_smaller; /* placements of an elastic job below its maximum */
	int			grows;			/* rounds' grows of a running elastic job */
	int			shrinks;		/* elastic victims shrunk instead of preempted (docs/elastic.md#shrinking) */
	int			shrink_kills;	/* of them, released workers killed at the deadline */
	const char *policy;
	int			jobs;
	int			submitted;
	int			rejected;
	int			finished;
	int			expired;
	int			unfinished;
	int64_t		makespan;
	double		jct_mean,
				jct_p50,
				jct_p95;
	double		wait_mean,
				wait_p50,
				wait_p95;
	double		gpu_alloc_ratio;
	double		contended_s;
	int			preemptions;
	int			kills;
	int			preempted_jobs;	/* jobs preempted at least once */
	int			max_preemptions_job;	/* the most any one job was preempted */
	double		wait_guaranteed_mean;	/* of jobs first placed within nominal quota */
	double		wait_borrowed_mean; /* of jobs first placed on borrowed capacity */
	int			placed_guaranteed,
				placed_borrowed;
	double		wait_entitled_mean; /* of jobs whose team's held and waiting GPUs with them fit its
									 * nominal quota at submit */
	int			placed_entitled;
	double		idle_gpu_hours_waiting; /* capacity not allocated while some job waited */
	int			nominations;
	double		stranded_gpus;	/* victims' GPUs no preemptor of their round used */
	double		lost_gpu_hours;
	int			partial_placements;
	int			invariant_violations;
	int			invariant_checks;
	double		jain;
	double		wall_s;
	int			rounds;
	double		round_ms_total;
	double		round_ms_max;
	int			statements;
	double		wall_db_s;		/* client wall time waiting for the batches */
	double		wall_checks_s;	/* in check_invariants() */
	int			nodes;
	long		gpus;
	const char *database;
	const char *first_violation;
	/* per trace team (the trace's teams, also under policy las) */
	int			nteams;
	const char **team_names;
	double	   *team_jct_mean;	/* NAN when none of its jobs finished */
	int		   *team_finished;
} Result;

void		run_policy(const Options *o, const Cluster *c, const Trace *t, const char *policy,
					   const char *dbname, Result *r);

/* ---- summaries (stats.c) --------------------------------------------------- */

double		percentile(double *v, int n, double p);	/* sorts v */
void		waterfill(const double *demand, const double *weight, int n, double capacity, double *out);
double		jain_index(const double *x, int n);
void		print_json(const Result *r);
void		print_table(const Result *r, int n);

#endif
