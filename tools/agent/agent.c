/*
 * agent.c — gangsched-agent: the reference node agent (see docs/agent.md).
 *
 * One agent runs on each node. It LISTENs on gangsched_node_<node id>, and
 * whenever a notification arrives, after every (re)connection and at every
 * heartbeat it resyncs: SELECT … FROM gangsched.node_work(node) says what
 * this node must be running, and the agent makes it so — it launches the
 * workers of jobs placed here and confirms them (job_started), sends SIGTERM
 * to the workers of preempted jobs and SIGKILL at their deadline, kills the
 * workers of jobs that are no longer here (killed, cancelled, requeued), and
 * reports when a job's local workers have all exited (job_released after a
 * preemption, job_finished otherwise). NOTIFY is only a wake-up: every
 * decision is taken from node_work, so missed messages do no harm.
 *
 * The agent never kills workers because the server went away: it keeps
 * them, reconnects with exponential backoff and resyncs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "agent.h"

/* the extension's version, from gangsched.control (the Makefile passes it) */
#ifndef GS_VERSION
#error "GS_VERSION must be defined by the Makefile"
#endif
#define AGENT_VERSION GS_VERSION
#define TICK_MS 200				/* exits of adopted workers, deadlines */
#define BACKOFF_FIRST 0.5
#define BACKOFF_MAX 10.0
#define KILL_MARGIN 0.5			/* SIGKILL this long before the server's deadline */

int			log_level = LOG_INFO;

static const char *node_name = NULL;
static const char *conninfo = NULL;
static double heartbeat_s = 10.0;

static PGconn *conn = NULL;
static int	node_id = -1;
static bool ever_connected = false;
static bool need_resync = true;
static double next_connect = 0;
static double backoff = BACKOFF_FIRST;
static double next_heartbeat = 0;

static int	selfpipe[2] = {-1, -1};
static volatile sig_atomic_t got_stop = 0;
static volatile sig_atomic_t got_hup = 0;

/* ---- logging and time ---- */

void
agent_log(int level, const char *fmt,...)
{
	static const char *names[] = {"ERROR", "WARNING", "INFO", "DEBUG"};
	struct timeval tv;
	struct tm	tm;
	char		when[64],
				zone[16];
	va_list		ap;

	if (level > log_level)
		return;
	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);
	fprintf(stderr, "%s.%03d %s gangsched-agent[%s] %s: ", when, (int) (tv.tv_usec / 1000), zone,
			node_name ? node_name : "-", names[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

double
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- signals ---- */

static void
wake_self(void)
{
	int			save = errno;
	char		c = 0;

	if (selfpipe[1] >= 0 && write(selfpipe[1], &c, 1) < 0)
	{
		/* full pipe: a wake-up is pending anyway */
	}
	errno = save;
}

static void
on_stop(int sig)
{
	got_stop = sig;
	wake_self();
}

static void
on_hup(int sig)
{
	(void) sig;
	got_hup = 1;
	wake_self();
}

static void
on_child(int sig)
{
	(void) sig;
	wake_self();
}

static void
setup_signals(void)
{
	struct sigaction sa;

	if (pipe2(selfpipe, O_CLOEXEC | O_NONBLOCK) != 0)
	{
		agent_log(LOG_ERROR, "pipe: %s", strerror(errno));
		exit(1);
	}
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_hup;
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_child;
	sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* ---- the server ---- */

typedef enum
{
	Q_OK,						/* done */
	Q_STATE,					/* SQLSTATE 55000: the job is not in that state (any more) */
	Q_ERROR,					/* any other error, logged */
	Q_LOST						/* the connection is gone */
} QResult;

static void
connection_lost(const char *why)
{
	agent_log(LOG_WARNING, "connection to the server lost: %s; the local workers keep running, reconnecting",
			  why && *why ? why : "no detail");
	PQfinish(conn);
	conn = NULL;
	node_id = -1;
	next_connect = mono_now();	/* at once; then backoff until it works */
}

/* libpq's messages may run over several lines: keep one log line. */
static void
trim_newline(char *s)
{
	char	   *p;
	size_t		n;

	for (p = s; *p; p++)
		if (*p == '\n' || *p == '\t')
			*p = ' ';
	n = strlen(s);
	while (n > 0 && s[n - 1] == ' ')
		s[--n] = '\0';
}

/*
 * Run one statement. With out, a successful result is handed back (the
 * caller clears it). A 55000 error is Q_STATE and is left to the caller to
 * log: for a report it means the job moved on already.
 */
static QResult
query(const char *what, const char *sql, int nparams, const char *const *params, PGresult **out, char *err, size_t errlen)
{
	PGresult   *res;
	ExecStatusType st;

	if (out)
		*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (conn == NULL)
		return Q_LOST;
	res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
	{
		if (out)
			*out = res;
		else
			PQclear(res);
		return Q_OK;
	}
	if (PQstatus(conn) == CONNECTION_BAD)
	{
		char		msg[512];

		snprintf(msg, sizeof(msg), "%s", PQerrorMessage(conn));
		trim_newline(msg);
		PQclear(res);
		connection_lost(msg);
		return Q_LOST;
	}
	{
		const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
		const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
		QResult		r = (state && strcmp(state, "55000") == 0) ? Q_STATE : Q_ERROR;

		/*
		 * 42501 on a job: it holds no workers on this node any more (it was
		 * requeued and placed elsewhere); as final as a state refusal.
		 */
		if (state && strcmp(state, "42501") == 0 && strncmp(what, "job_", 4) == 0)
		{
			agent_log(LOG_WARNING, "%s refused: %s", what, msg ? msg : PQerrorMessage(conn));
			r = Q_STATE;
		}

		/* 22023 from workers_released: no shrink pending, nothing here (done already) */
		if (state && strcmp(state, "22023") == 0 && strcmp(what, "workers_released") == 0)
		{
			agent_log(LOG_INFO, "%s: nothing to release: %s", what, msg ? msg : PQerrorMessage(conn));
			r = Q_STATE;
		}

		if (err && errlen)
			snprintf(err, errlen, "%s", msg ? msg : PQerrorMessage(conn));
		if (r == Q_ERROR)
			agent_log(LOG_ERROR, "%s failed: %s%s%s%s", what, msg ? msg : PQerrorMessage(conn),
					  state ? " (SQLSTATE " : "", state ? state : "", state ? ")" : "");
		PQclear(res);
		return r;
	}
}

static void
heartbeat(void)
{
	const char *p[1] = {node_name};

	if (query("node_heartbeat", "SELECT gangsched.node_heartbeat($1)", 1, p, NULL, NULL, 0) == Q_OK)
		agent_log(LOG_DEBUG, "heartbeat sent");
}

/* Connect, find this node's id, LISTEN; false (and a retry later) on failure. */
static bool
try_connect(void)
{
	const char *kw[] = {"dbname", "fallback_application_name", NULL};
	const char *val[] = {conninfo, "gangsched-agent", NULL};
	const char *p[1] = {node_name};
	PGresult   *res;
	char		sql[128];
	char		err[512];
	QResult		r;

	conn = PQconnectdbParams(kw, val, 1);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		char		msg[512];

		snprintf(msg, sizeof(msg), "%s", PQerrorMessage(conn));
		trim_newline(msg);
		agent_log(ever_connected ? LOG_WARNING : LOG_ERROR, "could not connect to the server: %s (next try in %.1f s)",
				  msg, backoff);
		PQfinish(conn);
		conn = NULL;
		next_connect = mono_now() + backoff;
		backoff = backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
		return false;
	}
	/* this session's own queries never search a schema a tenant may write */
	if (query("search_path", "SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false)",
			  0, NULL, NULL, NULL, 0) != Q_OK)
	{
		if (conn)
		{
			PQfinish(conn);
			conn = NULL;
		}
		next_connect = mono_now() + backoff;
		backoff = backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
		return false;
	}
	r = query("looking up the node", "SELECT c.node_id, c.channel FROM gangsched.node_channel($1) c", 1, p, &res, err, sizeof(err));
	if (r == Q_LOST)
		return false;
	if (r != Q_OK || PQntuples(res) != 1)
	{
		if (r == Q_OK)
			agent_log(LOG_ERROR, "node \"%s\" is not registered (see gangsched.add_node)", node_name);
		if (res)
			PQclear(res);
		if (!ever_connected)
			exit(1);
		PQfinish(conn);
		conn = NULL;
		next_connect = mono_now() + backoff;
		backoff = backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
		return false;
	}
	node_id = atoi(PQgetvalue(res, 0, 0));
	{
		char	   *chan = PQescapeIdentifier(conn, PQgetvalue(res, 0, 1), strlen(PQgetvalue(res, 0, 1)));

		snprintf(sql, sizeof(sql), "LISTEN %s", chan ? chan : "gangsched_node_unknown");
		PQfreemem(chan);
	}
	PQclear(res);
	if (query("LISTEN", sql, 0, NULL, NULL, NULL, 0) != Q_OK)
	{
		if (conn)
		{
			PQfinish(conn);
			conn = NULL;
		}
		next_connect = mono_now() + backoff;
		backoff = backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
		return false;
	}
	agent_log(LOG_INFO, "%s database \"%s\" (%s%s%s); node \"%s\" is node %d; listening on gangsched_node_%d",
			  ever_connected ? "reconnected to" : "connected to", PQdb(conn),
			  PQhost(conn) ? PQhost(conn) : "", PQport(conn) ? ":" : "", PQport(conn) ? PQport(conn) : "",
			  node_name, node_id, node_id);
	ever_connected = true;
	backoff = BACKOFF_FIRST;
	need_resync = true;
	heartbeat();
	next_heartbeat = mono_now() + heartbeat_s;
	return conn != NULL;
}

/* ---- reports ---- */

static void
report_started(Job *j)
{
	char		id[32];
	const char *p[2] = {id, node_name};
	char		err[512];
	QResult		r;

	snprintf(id, sizeof(id), "%" PRId64, j->id);
	r = query("job_started", "SELECT gangsched.job_started($1, $2)", 2, p, NULL, err, sizeof(err));
	if (r == Q_OK)
	{
		if (!j->start_reported)
			agent_log(LOG_INFO, "job %" PRId64 ": reported started (job_started)", j->id);
		j->start_reported = true;
		job_save(j);
	}
	else if (r == Q_STATE)
		agent_log(LOG_INFO, "job %" PRId64 ": job_started refused, the job moved on: %s", j->id, err);
}

/* All local workers of j have exited: tell the server, if this node should. */
static void
report_exit(Job *j)
{
	char		status[2048];
	char		msg[2200];
	char		id[32];
	char		err[512];
	bool		all_ok;
	QResult		r;

	job_status_text(j, status, sizeof(status), &all_ok);
	snprintf(id, sizeof(id), "%" PRId64, j->id);
	if (j->stopping)
	{
		bool		ckpt = all_ok && !j->killed;
		const char *p[2] = {id, ckpt ? "true" : "false"};

		if (!j->rank0_here)
		{
			agent_log(LOG_INFO, "job %" PRId64 ": local workers stopped (%s); the node holding rank 0 reports the release",
					  j->id, j->nworkers ? status : "no process");
			j->reported = true;
			job_save(j);
			return;
		}
		r = query("job_released", "SELECT gangsched.job_released($1, checkpointed => $2::bool)", 2, p, NULL, err, sizeof(err));
		if (r == Q_LOST)
			return;
		if (r == Q_OK)
			agent_log(LOG_INFO, "job %" PRId64 ": released (checkpointed = %s; %s)", j->id, ckpt ? "true" : "false",
					  j->nworkers ? status : "no process");
		else if (r == Q_STATE)
			agent_log(LOG_INFO, "job %" PRId64 ": nothing to release, the server moved on (%s)", j->id, err);
		else
		{
			j->retry_at = mono_now() + heartbeat_s;
			return;
		}
	}
	else
	{
		const char *p[3] = {id, all_ok ? "true" : "false", msg};

		if (all_ok && !j->rank0_here)
		{
			agent_log(LOG_INFO, "job %" PRId64 ": local workers finished (%s); the node holding rank 0 reports the job finished",
					  j->id, status);
			j->reported = true;
			job_save(j);
			return;
		}
		snprintf(msg, sizeof(msg), "node %s: %s", node_name, status);
		r = query("job_finished", "SELECT gangsched.job_finished($1, success => $2::bool, message => $3)", 3, p, NULL,
				  err, sizeof(err));
		if (r == Q_LOST)
			return;
		if (r == Q_OK)
			agent_log(LOG_INFO, "job %" PRId64 ": reported %s (%s)", j->id, all_ok ? "finished" : "failed", status);
		else if (r == Q_STATE)
			agent_log(LOG_INFO, "job %" PRId64 ": job_finished refused, the job is over already (%s)", j->id, err);
		else
		{
			j->retry_at = mono_now() + heartbeat_s;
			return;
		}
	}
	j->reported = true;
	job_save(j);
}

/* A job of this node is listed as running but the agent has no record of it. */
static void
report_lost(int64_t job)
{
	char		id[32];
	char		msg[256];
	char		err[512];
	const char *p[2] = {id, msg};

	snprintf(id, sizeof(id), "%" PRId64, job);
	snprintf(msg, sizeof(msg), "node %s: the agent has no record of this job's workers (lost)", node_name);
	agent_log(LOG_WARNING, "job %" PRId64 ": confirmed on this node but no local record of its workers; reporting it failed",
			  job);
	query("job_finished", "SELECT gangsched.job_finished($1, success => false, message => $2)", 2, p, NULL, err,
		  sizeof(err));
}

/* A preempted job with nothing running on this node: give it back at once. */
static void
release_empty(int64_t job)
{
	char		id[32];
	char		err[512];
	const char *p[1] = {id};

	snprintf(id, sizeof(id), "%" PRId64, job);
	if (query("job_released", "SELECT gangsched.job_released($1, checkpointed => false)", 1, p, NULL, err,
			  sizeof(err)) == Q_OK)
		agent_log(LOG_INFO, "job %" PRId64 ": preempted with no workers running here; released", job);
}

static void
begin_stop(Job *j, double remaining)
{
	if (j->restarting)
	{
		/* preempted while restarting at a new size: the SIGTERM went out already */
		j->restarting = false;
		j->stopping = true;
		j->killed = j->restart_killed;
		j->deadline = mono_now() + remaining;
		agent_log(LOG_INFO, "job %" PRId64 ": preempted while restarting; %d local workers still stopping, %.1f s until the deadline",
				  j->id, job_live_workers(j), remaining);
		job_save(j);
		return;
	}
	if (j->nworkers > 0 && job_all_exited(j))
		return;					/* it ended by itself first: report that */
	j->stopping = true;
	j->deadline = mono_now() + remaining;
	agent_log(LOG_INFO, "job %" PRId64 ": preempted; SIGTERM to %d local workers, %.1f s until the deadline",
			  j->id, job_live_workers(j), remaining);
	job_signal(j, SIGTERM);
	job_save(j);
}

/* ---- resync ---- */

/*
 * node_work(), with each job's placed_at (which tells two placements of
 * the same job apart), whether its workers are fractional, and the grace
 * a restart at a new size gives the workers to checkpoint: node_work's
 * `grace` (the job's own, capped), or, from a server whose node_work has
 * no such column yet (a library newer than the catalog, docs/upgrade.md),
 * gangsched.default_grace at most gangsched.max_grace.
 */
static const char *resync_sql =
"SELECT w.job, w.action, w.worker, w.local_rank, w.local_world_size, w.world_size,"
"       pg_catalog.array_to_string(w.devices, ','), w.first_slice, w.slices, w.command,"
"       w.rank0_node, w.seconds_left,"
"       (extract(epoch FROM w.placed_at) * 1000000)::pg_catalog.int8,"
"       w.gpus > 0 AND w.gpus < 1,"
"       CASE WHEN w.limit_seconds_left IS NOT NULL THEN GREATEST(w.limit_seconds_left, 0) END,"
"       extract(epoch FROM COALESCE((pg_catalog.to_jsonb(w) OPERATOR(pg_catalog.->>) 'grace')::pg_catalog.interval,"
"         LEAST(COALESCE(pg_catalog.current_setting('gangsched.default_grace', true), '60s')::pg_catalog.interval,"
"               COALESCE(pg_catalog.current_setting('gangsched.max_grace', true), '600s')::pg_catalog.interval)))::pg_catalog.float8"
"  FROM gangsched.node_work($1) w"
" ORDER BY w.job, w.worker";

enum
{
	C_JOB, C_ACTION, C_WORKER, C_LOCAL_RANK, C_LOCAL_WORLD, C_WORLD, C_DEVICES, C_FIRST_SLICE, C_SLICES,
	C_COMMAND, C_RANK0, C_REMAINING, C_PLACED, C_FRACTIONAL, C_TIME_LEFT, C_GRACE
};

/* The workers of rows[0 .. n - 1] of res, as the agent launches them. */
static WorkerSpec *
row_specs(PGresult *res, const int *rows, int n)
{
	WorkerSpec *specs = calloc(n > 0 ? n : 1, sizeof(WorkerSpec));
	int			r;

	if (specs == NULL)
	{
		agent_log(LOG_ERROR, "out of memory");
		exit(1);
	}
	for (r = 0; r < n; r++)
	{
		WorkerSpec *s = &specs[r];
		int			i = rows[r];
		bool		frac = strcmp(PQgetvalue(res, i, C_FRACTIONAL), "t") == 0;

		s->rank = atoi(PQgetvalue(res, i, C_WORKER));
		s->local_rank = atoi(PQgetvalue(res, i, C_LOCAL_RANK));
		s->local_world_size = atoi(PQgetvalue(res, i, C_LOCAL_WORLD));
		s->world_size = atoi(PQgetvalue(res, i, C_WORLD));
		snprintf(s->devices, sizeof(s->devices), "%s", PQgetvalue(res, i, C_DEVICES));
		s->first_slice = frac ? atoi(PQgetvalue(res, i, C_FIRST_SLICE)) : 0;
		s->slices = frac ? atoi(PQgetvalue(res, i, C_SLICES)) : 0;
		s->time_left = PQgetisnull(res, i, C_TIME_LEFT) ? -1 : atof(PQgetvalue(res, i, C_TIME_LEFT));
	}
	return specs;
}

/*
 * Launch j's workers (its record sized for them already) and confirm them
 * if confirm; a gang with a missing rank cannot run: the others are killed
 * and the job is reported failed.
 */
static void
launch_workers(Job *j, const WorkerSpec *specs, const char *command, const char *rank0_node, bool confirm);

/* Released workers of a shrinking job have stopped here: tell the server. */
static QResult
report_workers_released(Job *j, int64_t job)
{
	char		id[32];
	char		err[512];
	const char *p[2] = {node_name, id};
	PGresult   *res;
	QResult		r;

	snprintf(id, sizeof(id), "%" PRId64, job);
	r = query("workers_released", "SELECT gangsched.workers_released($1, $2::pg_catalog.int8)", 2, p, &res, err,
			  sizeof(err));
	if (r == Q_OK)
	{
		agent_log(LOG_INFO, "job %" PRId64 ": shrunk; its released workers on this node stopped (workers_released: %s allocations ended)",
				  job, PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "?");
		PQclear(res);
	}
	else if (r == Q_ERROR && j)
		j->retry_at = mono_now() + heartbeat_s;
	return r;
}

/*
 * Stop j's workers to start them again at another size (a grow, a shrink,
 * new workers on this node): SIGTERM now, so they checkpoint; SIGKILL at
 * kill_in seconds. Once all have exited, a resync starts the node's workers
 * of the job as node_work then says.
 */
static void
begin_restart(Job *j, int new_world, int new_local, double kill_in, const char *why)
{
	j->restarting = true;
	j->restart_killed = false;
	j->restart_kill_at = mono_now() + kill_in;
	agent_log(LOG_INFO, "job %" PRId64 ": %s (world size %d -> %d, %d -> %d workers here); SIGTERM to %d local workers to %s, SIGKILL in %.1f s",
			  j->id, why, j->world_size, new_world, j->nworkers, new_local, job_live_workers(j),
			  new_local > 0 ? "restart them" : "stop them", kill_in);
	job_signal(j, SIGTERM);
	job_save(j);
}

/* Do j's workers match the node_work rows kept (rank, local rank, world size)? */
static bool
workers_match(const Job *j, const WorkerSpec *keep, int nkeep)
{
	int			r;

	if (j->nworkers != nkeep)
		return false;
	for (r = 0; r < nkeep; r++)
		if (j->w[r].rank != keep[r].rank || j->w[r].local_rank != keep[r].local_rank ||
			(j->world_size != 0 && j->world_size != keep[r].world_size))
			return false;
	return true;
}

/*
 * One job of node_work, rows i .. i + nrows - 1, of which this node has a
 * record j (of this placement). Rows 'start' and 'run' are the workers
 * this node must run, 'shrink' the ones a shrink releases (the highest
 * ranks: the others keep theirs).
 */
static void
resync_job(Job *j, PGresult *res, int i, int nrows)
{
	int64_t		id = j->id;
	const char *action = PQgetvalue(res, i, C_ACTION);
	const char *rank0_node = PQgetvalue(res, i, C_RANK0);
	bool		has_command = !PQgetisnull(res, i, C_COMMAND) && PQgetvalue(res, i, C_COMMAND)[0] != '\0';
	double		grace = PQgetisnull(res, i, C_GRACE) ? 60.0 : atof(PQgetvalue(res, i, C_GRACE));
	int		   *keep_rows = calloc(nrows, sizeof(int));
	int			nkeep = 0,
				nshrink = 0,
				r;
	bool		any_start = false;
	double		shrink_left = -1;
	WorkerSpec *keep;

	if (keep_rows == NULL)
	{
		agent_log(LOG_ERROR, "out of memory");
		exit(1);
	}
	j->seen = true;
	if (strcmp(action, "preempt") == 0)
	{
		double		remaining = PQgetisnull(res, i, C_REMAINING) ? 60.0 : atof(PQgetvalue(res, i, C_REMAINING));

		if (!j->stopping)
			begin_stop(j, remaining);
		else
		{
			j->deadline = mono_now() + remaining;
			job_save(j);
		}
		free(keep_rows);
		return;
	}
	for (r = i; r < i + nrows; r++)
	{
		const char *a = PQgetvalue(res, r, C_ACTION);

		if (strcmp(a, "shrink") == 0)
		{
			double		left = PQgetisnull(res, r, C_REMAINING) ? grace : atof(PQgetvalue(res, r, C_REMAINING));

			nshrink++;
			if (shrink_left < 0 || left < shrink_left)
				shrink_left = left;
		}
		else
		{
			keep_rows[nkeep++] = r;
			any_start |= strcmp(a, "start") == 0;
		}
	}
	keep = row_specs(res, keep_rows, nkeep);
	free(keep_rows);

	if (j->stopping || j->killed || j->reported)
	{
		/* stopping (preempted, killed) or over: only a shrink still needs its answer */
		if (nshrink > 0 && job_all_exited(j))
			report_workers_released(j, id);
		free(keep);
		return;
	}

	if (!has_command || j->nworkers == 0)
	{
		/* capacity held with no process: nothing to stop or start */
		if (nshrink > 0)
			report_workers_released(j, id);
		if (nkeep > 0 && any_start)
			report_started(j);
		free(keep);
		return;
	}

	if (j->restarting)
	{
		if (!job_all_exited(j))
		{
			/* a shrink's deadline may come before the restart's own */
			if (shrink_left >= 0 && mono_now() + shrink_left - KILL_MARGIN < j->restart_kill_at)
				j->restart_kill_at = mono_now() + shrink_left - KILL_MARGIN;
			free(keep);
			return;
		}
		if (mono_now() < j->retry_at)
		{
			free(keep);
			return;
		}
		if (nshrink > 0)
		{
			QResult		q = report_workers_released(j, id);

			if (q != Q_OK && q != Q_STATE)
			{
				/* not done: stay stopped, ask again at a later resync */
				free(keep);
				return;
			}
		}
		if (nkeep == 0)
		{
			agent_log(LOG_INFO, "job %" PRId64 ": no worker of it is left on this node", id);
			j->orphan = true;
			j->reported = true;
			free(keep);
			return;
		}
		agent_log(LOG_INFO, "job %" PRId64 ": local workers stopped%s; starting %d of its %d workers at world size %d",
				  id, j->restart_killed ? " (some killed at the restart's deadline)" : "", nkeep,
				  keep[0].world_size, keep[0].world_size);
		j->restarting = false;
		j->restart_killed = false;
		j->rank0_here = strcmp(rank0_node, node_name) == 0;
		job_reset_workers(j, nkeep);
		launch_workers(j, keep, PQgetvalue(res, i, C_COMMAND), rank0_node, any_start);
		free(keep);
		return;
	}

	if (nshrink == 0 && workers_match(j, keep, nkeep))
	{
		if (j->world_size == 0 && nkeep > 0)
		{
			/* a record of an older agent: the size it ran at is the one listed */
			j->world_size = keep[0].world_size;
			job_save(j);
		}
		if (any_start)
			report_started(j);
		free(keep);
		return;
	}
	if (job_all_exited(j))
	{
		/* they ended by themselves first: that is reported, not restarted */
		if (nshrink > 0)
			report_workers_released(j, id);
		free(keep);
		return;
	}
	begin_restart(j, atoi(PQgetvalue(res, i, C_WORLD)), nkeep,
				  shrink_left >= 0 ? (shrink_left > KILL_MARGIN ? shrink_left - KILL_MARGIN : 0) : grace,
				  nshrink > 0 ? "shrinking: workers released" : "resized");
	free(keep);
}

static void
launch_workers(Job *j, const WorkerSpec *specs, const char *command, const char *rank0_node, bool confirm)
{
	/* MASTER_ADDR: rank 0's node, by name */
	if (job_launch(j, specs, command, node_name, rank0_node))
	{
		if (confirm)
			report_started(j);
	}
	else
	{
		agent_log(LOG_ERROR, "job %" PRId64 ": not every worker could be launched; killing the others", j->id);
		j->killed = true;
		job_signal(j, SIGKILL);
		job_save(j);
	}
}

static void
resync(void)
{
	const char *p[1] = {node_name};
	PGresult   *res;
	int			n,
				i,
				k;
	Job		   *j;

	if (query("node_work", resync_sql, 1, p, &res, NULL, 0) != Q_OK)
		return;
	for (j = jobs; j; j = j->next)
		j->seen = false;
	n = PQntuples(res);
	agent_log(LOG_DEBUG, "resync: %d workers placed on this node", n);
	for (i = 0; i < n; i = k)
	{
		int64_t		id = strtoll(PQgetvalue(res, i, C_JOB), NULL, 10);
		const char *action = PQgetvalue(res, i, C_ACTION);
		int64_t		placed_us = strtoll(PQgetvalue(res, i, C_PLACED), NULL, 10);
		const char *rank0_node = PQgetvalue(res, i, C_RANK0);
		bool		rank0_here = strcmp(rank0_node, node_name) == 0;
		bool		has_command = !PQgetisnull(res, i, C_COMMAND) && PQgetvalue(res, i, C_COMMAND)[0] != '\0';
		int			nrows,
					nstart = 0,
					r;
		int		   *rows;

		for (k = i; k < n && strtoll(PQgetvalue(res, k, C_JOB), NULL, 10) == id; k++)
			;
		nrows = k - i;

		/* records of an earlier placement of this job: kill, then forget */
		while ((j = job_find(id)) != NULL && j->placed_us != placed_us)
		{
			agent_log(LOG_INFO, "job %" PRId64 ": placed anew; the %d workers of its previous placement are killed",
					  id, job_live_workers(j));
			j->orphan = true;
			j->killed = true;
			job_signal(j, SIGKILL);
		}

		if (j != NULL)
		{
			resync_job(j, res, i, nrows);
			continue;
		}

		/* no record: the rows to start (a shrink's released rows are not started) */
		rows = calloc(nrows, sizeof(int));
		if (rows == NULL)
		{
			agent_log(LOG_ERROR, "out of memory");
			exit(1);
		}
		for (r = i; r < k; r++)
			if (strcmp(PQgetvalue(res, r, C_ACTION), "start") == 0)
				rows[nstart++] = r;
		if (strcmp(action, "start") == 0 && nstart > 0)
		{
			WorkerSpec *specs = row_specs(res, rows, nstart);

			j = job_new(id, placed_us, rank0_here, has_command ? nstart : 0);
			j->seen = true;
			j->world_size = specs[0].world_size;
			if (!has_command)
			{
				agent_log(LOG_INFO, "job %" PRId64 ": placed here with no command; holding its %d workers' capacity",
						  id, nstart);
				job_save(j);
				report_started(j);
			}
			else
			{
				agent_log(LOG_INFO, "job %" PRId64 ": placed here; launching %d of its %d workers", id, nstart,
						  specs[0].world_size);
				launch_workers(j, specs, PQgetvalue(res, i, C_COMMAND), rank0_node, true);
			}
			free(specs);
			if (nstart < nrows)
				report_workers_released(j, id);	/* released rows: nothing of them runs here */
		}
		else if (strcmp(action, "run") == 0)
			report_lost(id);
		else if (strcmp(action, "preempt") == 0 && rank0_here)
			release_empty(id);
		else if (strcmp(action, "shrink") == 0)
		{
			/* released workers of which nothing runs here (any more) */
			bool		others = false;

			for (r = i; r < k; r++)
				others |= strcmp(PQgetvalue(res, r, C_ACTION), "shrink") != 0;
			if (!others)
				report_workers_released(NULL, id);
			else
				report_lost(id);
		}
		free(rows);
	}
	PQclear(res);

	for (j = jobs; j; j = j->next)
		if (!j->orphan && !j->seen)
		{
			int			live = job_live_workers(j);

			if (live > 0)
				agent_log(LOG_INFO, "job %" PRId64 ": no longer on this node (finished, cancelled, killed or requeued); "
						  "SIGKILL to %d local workers", j->id, live);
			j->orphan = true;
			j->killed = true;
			job_signal(j, SIGKILL);
		}
}

/* ---- local bookkeeping ---- */

static void
process_jobs(void)
{
	Job		   *j,
			   *next;
	double		now = mono_now();

	for (j = jobs; j; j = next)
	{
		next = j->next;
		if (j->orphan)
		{
			if (job_all_exited(j))
			{
				agent_log(LOG_DEBUG, "job %" PRId64 ": record dropped", j->id);
				job_forget(j);
			}
			continue;
		}
		if (j->restarting)
		{
			/* never reported: the workers start again at the new size */
			if (!j->restart_killed && job_live_workers(j) > 0 && now >= j->restart_kill_at)
			{
				agent_log(LOG_WARNING, "job %" PRId64 ": restart deadline reached with %d local workers running; SIGKILL",
						  j->id, job_live_workers(j));
				j->restart_killed = true;
				job_signal(j, SIGKILL);
				job_save(j);
			}
			if (conn && job_all_exited(j) && now >= j->retry_at)
				need_resync = true;	/* the resync starts them */
			continue;
		}
		if (j->stopping && !j->killed && job_live_workers(j) > 0 && now >= j->deadline - KILL_MARGIN)
		{
			agent_log(LOG_WARNING, "job %" PRId64 ": grace deadline reached with %d local workers running; SIGKILL",
					  j->id, job_live_workers(j));
			j->killed = true;
			job_signal(j, SIGKILL);
			job_save(j);
		}
		if (conn && !j->reported && job_all_exited(j) && (j->nworkers > 0 || j->stopping) && now >= j->retry_at)
			report_exit(j);
	}
}

static void
drain_notifications(void)
{
	PGnotify   *n;

	while (conn && (n = PQnotifies(conn)) != NULL)
	{
		agent_log(LOG_INFO, "notification on %s: %s", n->relname, n->extra);
		need_resync = true;
		PQfreemem(n);
	}
}

/* ---- options ---- */

static void
usage(FILE *f)
{
	fprintf(f,
			"gangsched-agent runs the workers that gangsched places on one node.\n"
			"\n"
			"Usage:\n"
			"  gangsched-agent --node NAME [OPTION]...\n"
			"\n"
			"Options:\n"
			"  -n, --node=NAME          this node's name in gangsched.nodes (required)\n"
			"  -d, --dbname=CONNSTR     database name or connection string; otherwise the\n"
			"                           standard libpq environment (PGHOST, PGPORT, PGDATABASE...)\n"
			"  -b, --heartbeat=SECONDS  send node_heartbeat and resync this often (default 10)\n"
			"  -w, --workdir=DIR        checkpoint directories (DIR/<job>) and the agent's state\n"
			"                           (DIR/.agent-<node>) (default /tmp/gangsched-agent)\n"
			"  -l, --log-level=LEVEL    error, warning, info or debug (default info)\n"
			"  -V, --version            print the version and exit\n"
			"  -h, --help               show this help and exit\n"
			"\n"
			"SIGTERM or SIGINT stops the agent and leaves its workers running: the next\n"
			"agent started on this node with the same --workdir adopts them. SIGHUP resyncs.\n"
			"See docs/agent.md.\n");
}

static int
parse_level(const char *s)
{
	if (strcmp(s, "error") == 0)
		return LOG_ERROR;
	if (strcmp(s, "warning") == 0)
		return LOG_WARNING;
	if (strcmp(s, "info") == 0)
		return LOG_INFO;
	if (strcmp(s, "debug") == 0)
		return LOG_DEBUG;
	return -1;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"node", required_argument, NULL, 'n'},
		{"dbname", required_argument, NULL, 'd'},
		{"heartbeat", required_argument, NULL, 'b'},
		{"workdir", required_argument, NULL, 'w'},
		{"log-level", required_argument, NULL, 'l'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	const char *workdir = "/tmp/gangsched-agent";
	int			c;

	while ((c = getopt_long(argc, argv, "n:d:b:w:l:Vh", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 'n':
				node_name = optarg;
				break;
			case 'd':
				conninfo = optarg;
				break;
			case 'b':
				{
					char	   *end;

					heartbeat_s = strtod(optarg, &end);
					if (*end != '\0' || !(heartbeat_s > 0) || heartbeat_s > 3600)
					{
						fprintf(stderr, "gangsched-agent: invalid --heartbeat \"%s\": give seconds, more than 0 and at most 3600\n",
								optarg);
						return 2;
					}
					break;
				}
			case 'w':
				workdir = optarg;
				break;
			case 'l':
				log_level = parse_level(optarg);
				if (log_level < 0)
				{
					fprintf(stderr, "gangsched-agent: invalid --log-level \"%s\": use error, warning, info or debug\n", optarg);
					return 2;
				}
				break;
			case 'V':
				printf("gangsched-agent %s\n", AGENT_VERSION);
				return 0;
			case 'h':
				usage(stdout);
				return 0;
			default:
				fprintf(stderr, "Try \"gangsched-agent --help\" for more information.\n");
				return 2;
		}
	}
	if (optind < argc)
	{
		fprintf(stderr, "gangsched-agent: unexpected argument \"%s\"\n"
				"Try \"gangsched-agent --help\" for more information.\n", argv[optind]);
		return 2;
	}
	if (node_name == NULL || node_name[0] == '\0')
	{
		fprintf(stderr, "gangsched-agent: --node is required\n"
				"Try \"gangsched-agent --help\" for more information.\n");
		return 2;
	}

	setup_signals();
	if (!workers_init_dirs(workdir, node_name))
		return 1;
	agent_log(LOG_INFO, "starting (version %s, pid %d, work directory \"%s\", heartbeat every %g s)",
			  AGENT_VERSION, (int) getpid(), work_dir, heartbeat_s);
	workers_load_state();

	for (;;)
	{
		struct pollfd fds[2];
		int			nfds = 0;
		double		now;

		if (got_stop)
			break;
		if (got_hup)
		{
			got_hup = 0;
			agent_log(LOG_INFO, "SIGHUP: resyncing");
			need_resync = true;
		}
		workers_reap();
		workers_poll();

		now = mono_now();
		if (conn == NULL && now >= next_connect)
			try_connect();
		if (conn && PQconsumeInput(conn) == 0)
		{
			char		msg[512];

			snprintf(msg, sizeof(msg), "%s", PQerrorMessage(conn));
			trim_newline(msg);
			connection_lost(msg);
		}
		drain_notifications();
		if (conn && mono_now() >= next_heartbeat)
		{
			heartbeat();
			next_heartbeat = mono_now() + heartbeat_s;
			need_resync = true;
		}
		if (conn && need_resync)
		{
			need_resync = false;
			resync();
			drain_notifications();
		}
		process_jobs();

		fds[nfds].fd = selfpipe[0];
		fds[nfds++].events = POLLIN;
		if (conn && PQsocket(conn) >= 0)
		{
			fds[nfds].fd = PQsocket(conn);
			fds[nfds++].events = POLLIN;
		}
		if (!need_resync && !got_stop && !got_hup)
		{
			if (poll(fds, nfds, TICK_MS) < 0 && errno != EINTR)
				agent_log(LOG_WARNING, "poll: %s", strerror(errno));
		}
		if (fds[0].revents & POLLIN)
		{
			char		buf[256];

			while (read(selfpipe[0], buf, sizeof(buf)) > 0)
				;
		}
	}

	{
		int			live = 0,
					njobs = 0;

		for (Job *j = jobs; j; j = j->next)
		{
			live += job_live_workers(j);
			njobs += job_live_workers(j) > 0;
		}
		agent_log(LOG_INFO, "stopping on %s; %d workers of %d jobs keep running (the next agent on this node adopts them)",
				  strsignal(got_stop), live, njobs);
	}
	if (conn)
		PQfinish(conn);
	return 0;
}
