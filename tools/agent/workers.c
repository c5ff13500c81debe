/*
 * workers.c — gangsched-agent's local processes and their state files.
 *
 * Each worker runs under a small supervisor process, forked from the agent:
 * the supervisor starts a new session, forks the worker into a process group
 * of its own (`sh -c command`), waits for it and writes its wait status to
 * an exit file. The agent signals the worker's process group (SIGTERM on a
 * preemption, SIGKILL at the deadline or on kill/cancel) and learns of exits
 * from the exit files. Because the supervisors outlive the agent, an agent
 * that is killed and restarted finds its workers again: every job's record
 * is kept in <workdir>/.agent-<node>/job-<id>-<placement>.state, and exits that happened
 * while no agent ran are waiting in the exit files.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"

/* Directories are kept well under PATH_MAX, so file names built from them fit. */
#define DIR_MAX 2048
char		work_dir[DIR_MAX];
char		state_dir[DIR_MAX];
Job		   *jobs = NULL;

/* The wait status of a worker that could not be launched: exit 127, as sh. */
#define LAUNCH_FAILED (127 << 8)

/* ---- files ---- */

static int
mkdir_p(const char *path)
{
	char		tmp[PATH_MAX];
	char	   *p;

	if (strlen(path) >= sizeof(tmp))
		return -1;
	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int) sizeof(tmp))
		return -1;
	for (p = tmp + 1; *p; p++)
		if (*p == '/')
		{
			*p = '\0';
			if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

bool
workers_init_dirs(const char *workdir, const char *node)
{
	if (snprintf(work_dir, sizeof(work_dir), "%s", workdir) >= (int) sizeof(work_dir) ||
		snprintf(state_dir, sizeof(state_dir), "%s/.agent-%s", workdir, node) >= (int) sizeof(state_dir))
	{
		agent_log(LOG_ERROR, "work directory path is too long");
		return false;
	}
	if (mkdir_p(state_dir) != 0)
	{
		agent_log(LOG_ERROR, "could not create directory \"%s\": %s", state_dir, strerror(errno));
		return false;
	}
	return true;
}

static void
exit_file(char *buf, size_t len, int64_t job, int64_t placed_us, int rank)
{
	snprintf(buf, len, "%s/job-%" PRId64 "-%" PRId64 "-%d.exit", state_dir, job, placed_us, rank);
}

static void
state_file(char *buf, size_t len, int64_t job, int64_t placed_us)
{
	snprintf(buf, len, "%s/job-%" PRId64 "-%" PRId64 ".state", state_dir, job, placed_us);
}

/* Write a small file atomically (temporary file, then rename). */
static int
write_file_atomic(const char *path, const char *text)
{
	char		tmp[PATH_MAX + 8];
	int			fd;
	size_t		len = strlen(text);
	ssize_t		n;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	n = write(fd, text, len);
	if (close(fd) != 0 || n != (ssize_t) len)
	{
		unlink(tmp);
		return -1;
	}
	return rename(tmp, path);
}

/* ---- processes ---- */

/*
 * A process's start time (clock ticks after boot, field 22 of
 * /proc/<pid>/stat), so a recorded pid is not mistaken for a reused one.
 * 0 when it cannot be read; *zombie tells an exited, unreaped process.
 */
static unsigned long long
proc_starttime(pid_t pid, bool *zombie)
{
	char		path[64];
	char		buf[1024];
	FILE	   *f;
	char	   *p;
	unsigned long long start = 0;
	char		state = '?';
	size_t		n;

	if (zombie)
		*zombie = false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
	f = fopen(path, "re");
	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');		/* the command name may hold spaces */
	if (p == NULL)
		return 0;
	/* after ") ": field 3 is the state, field 22 the start time */
	if (sscanf(p + 2, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
			   &state, &start) != 2)
		return 0;
	if (zombie)
		*zombie = (state == 'Z' || state == 'X');
	return start;
}

/* Is the process with this pid (and start time, if known) still there? */
static bool
proc_alive(pid_t pid, unsigned long long start)
{
	bool		zombie;
	unsigned long long now_start;

	if (pid <= 0)
		return false;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	now_start = proc_starttime(pid, &zombie);
	if (zombie)
		return false;
	if (start != 0 && now_start != 0 && now_start != start)
		return false;			/* the pid was reused */
	return true;
}

static bool
group_alive(pid_t pgid)
{
	if (pgid <= 1)
		return false;
	return !(kill(-pgid, 0) != 0 && errno == ESRCH);
}

/* Seconds the rest of a worker's process group may outlive its head. */
#define STRAGGLER_GRACE 10

static pid_t straggler_pgid = 0;

static void
kill_stragglers(int sig)
{
	(void) sig;
	if (straggler_pgid > 1)
		kill(-straggler_pgid, SIGKILL);
}

/* The supervisor: runs in the child of a fork of the agent, never returns. */
static void
supervise(const Job *j, const WorkerSpec *s, const char *command, const char *node,
		  const char *master_addr, const char *ckpt_dir, int report_fd)
{
	sigset_t	all;
	pid_t		pid;
	int			sig,
				status = 0,
				fd;
	bool		head_done = false;
	char		path[PATH_MAX];
	char		text[64];

	setsid();
	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* nothing of the agent's (its server connection above all) stays open */
	for (fd = 3; fd < 1024; fd++)
		if (fd != report_fd)
			close(fd);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	prctl(PR_SET_NAME, "gangsched-sup");	/* as ps shows it */

	pid = fork();
	if (pid == 0)
	{
		char		v[64];

		setpgid(0, 0);
		snprintf(v, sizeof(v), "%" PRId64, j->id);
		setenv("GANGSCHED_JOB", v, 1);
		setenv("GANGSCHED_NODE", node, 1);
		snprintf(v, sizeof(v), "%d", s->rank);
		setenv("RANK", v, 1);
		setenv("GANGSCHED_RANK", v, 1);
		snprintf(v, sizeof(v), "%d", s->world_size);
		setenv("WORLD_SIZE", v, 1);
		/* an elastic gang's size held now (docs/elastic.md): the same number */
		setenv("GANGSCHED_WORLD_SIZE", v, 1);
		snprintf(v, sizeof(v), "%d", s->local_rank);
		setenv("LOCAL_RANK", v, 1);
		snprintf(v, sizeof(v), "%d", s->local_world_size);
		setenv("LOCAL_WORLD_SIZE", v, 1);
		setenv("MASTER_ADDR", master_addr, 1);
		snprintf(v, sizeof(v), "%d", (int) (29500 + j->id % 1000));
		setenv("MASTER_PORT", v, 1);
		setenv("CUDA_VISIBLE_DEVICES", s->devices, 1);
		if (s->slices > 0)
		{
			snprintf(v, sizeof(v), "%d", s->first_slice);
			setenv("GANGSCHED_FIRST_SLICE", v, 1);
			snprintf(v, sizeof(v), "%d", s->slices);
			setenv("GANGSCHED_SLICES", v, 1);
		}
		else
		{
			unsetenv("GANGSCHED_FIRST_SLICE");
			unsetenv("GANGSCHED_SLICES");
		}
		setenv("GANGSCHED_CHECKPOINT_DIR", ckpt_dir, 1);
		/* the job's time limit: stopped with its grace when it ends (docs/agent.md) */
		if (s->time_left >= 0)
		{
			snprintf(v, sizeof(v), "%.0f", s->time_left);
			setenv("GANGSCHED_TIME_LEFT", v, 1);
		}
		else
			unsetenv("GANGSCHED_TIME_LEFT");

		close(report_fd);
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0 && fd != 0)
		{
			dup2(fd, 0);
			close(fd);
		}
		snprintf(path, sizeof(path), "%s/worker-%d.log", ckpt_dir, s->rank);
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0)
		{
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		execl("/bin/sh", "sh", "-c", command, (char *) NULL);
		fprintf(stderr, "gangsched-agent: could not run /bin/sh: %s\n", strerror(errno));
		_exit(127);
	}
	if (pid < 0)
		_exit(1);				/* the agent reads no pid: launch failed */
	setpgid(pid, pid);			/* both sides, so the group exists now */
	if (write(report_fd, &pid, sizeof(pid)) != (ssize_t) sizeof(pid))
		_exit(1);
	close(report_fd);

	/* only the worker's group is signalled; the supervisor stays to record */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);

	/*
	 * The worker is over when no process of its group is left, not when the
	 * shell at its head exits: after a SIGTERM the shell may die at once
	 * while the program it started still writes its checkpoint. As a child
	 * subreaper the supervisor inherits the group's orphans and waits for
	 * them too. What is left STRAGGLER_GRACE seconds after the head exited
	 * is killed, so a forgotten background process cannot hold the job.
	 */
	straggler_pgid = pid;
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sigemptyset(&sa.sa_mask);
		sa.sa_handler = kill_stragglers;
		sigaction(SIGALRM, &sa, NULL);
	}
	for (;;)
	{
		int			st;
		pid_t		got = waitpid(-1, &st, 0);

		if (got < 0 && errno != EINTR)
			break;				/* ECHILD: no process left to wait for */
		if (got == pid)
		{
			status = st;
			head_done = true;
			alarm(STRAGGLER_GRACE);
		}
		if (head_done && kill(-pid, 0) != 0 && errno == ESRCH)
			break;				/* nothing of the group is left */
	}
	if (!head_done)
		_exit(1);
	exit_file(path, sizeof(path), j->id, j->placed_us, s->rank);
	snprintf(text, sizeof(text), "%d\n", status);
	_exit(write_file_atomic(path, text) == 0 ? 0 : 1);
}

/* Launch every worker of j; false if any could not be launched. */
bool
job_launch(Job *j, const WorkerSpec *specs, const char *command, const char *node, const char *master_addr)
{
	char		ckpt_dir[DIR_MAX + 32];
	int			i;
	bool		ok = true;

	if (snprintf(ckpt_dir, sizeof(ckpt_dir), "%s/%" PRId64, work_dir, j->id) >= (int) sizeof(ckpt_dir) ||
		mkdir_p(ckpt_dir) != 0)
	{
		agent_log(LOG_ERROR, "job %" PRId64 ": could not create \"%s\": %s", j->id, ckpt_dir, strerror(errno));
		ckpt_dir[0] = '\0';
	}
	if (j->nworkers > 0)
		j->world_size = specs[0].world_size;
	/*
	 * The record is written before the first worker starts and after each
	 * one: an agent killed halfway leaves a record that says so, and the
	 * next one kills what was launched and starts the workers again
	 * (workers_load_state), instead of starting a second copy of them.
	 */
	for (i = 0; i < j->nworkers; i++)
	{
		j->w[i].rank = specs[i].rank;
		j->w[i].local_rank = specs[i].local_rank;
		j->w[i].sup_pid = 0;
		j->w[i].sup_start = 0;
		j->w[i].pgid = 0;
	}
	j->launching = true;
	job_save(j);
	for (i = 0; i < j->nworkers; i++)
	{
		Worker	   *w = &j->w[i];
		const WorkerSpec *s = &specs[i];
		char		path[PATH_MAX];
		int			pfd[2];
		pid_t		sup,
					wpid = 0;
		ssize_t		n;

		w->rank = s->rank;
		w->local_rank = s->local_rank;
		w->exited = false;
		w->status = -1;
		exit_file(path, sizeof(path), j->id, j->placed_us, s->rank);
		unlink(path);
		if (ckpt_dir[0] == '\0' || pipe2(pfd, O_CLOEXEC) != 0)
		{
			w->exited = true;
			w->status = LAUNCH_FAILED;
			ok = false;
			continue;
		}
		fflush(stderr);
		sup = fork();
		if (sup == 0)
		{
			close(pfd[0]);
			supervise(j, s, command, node, master_addr, ckpt_dir, pfd[1]);
			_exit(1);			/* not reached */
		}
		close(pfd[1]);
		if (sup < 0)
		{
			agent_log(LOG_ERROR, "job %" PRId64 " rank %d: fork failed: %s", j->id, s->rank, strerror(errno));
			close(pfd[0]);
			w->exited = true;
			w->status = LAUNCH_FAILED;
			ok = false;
			continue;
		}
		do
			n = read(pfd[0], &wpid, sizeof(wpid));
		while (n < 0 && errno == EINTR);
		close(pfd[0]);
		w->sup_pid = sup;
		w->sup_start = proc_starttime(sup, NULL);
		if (n != (ssize_t) sizeof(wpid))
		{
			agent_log(LOG_ERROR, "job %" PRId64 " rank %d: the worker could not be started", j->id, s->rank);
			w->pgid = 0;
			w->exited = true;
			w->status = LAUNCH_FAILED;
			ok = false;
			continue;
		}
		w->pgid = wpid;
		agent_log(LOG_INFO, "job %" PRId64 ": started rank %d (local rank %d/%d, devices [%s]) as process group %d",
				  j->id, s->rank, s->local_rank, s->local_world_size, s->devices, (int) wpid);
		if (i + 1 < j->nworkers)
			job_save(j);
	}
	j->launching = false;
	job_save(j);
	return ok;
}

/* Send sig to the process group of every live worker of j. */
void
job_signal(Job *j, int sig)
{
	int			i;

	for (i = 0; i < j->nworkers; i++)
	{
		Worker	   *w = &j->w[i];

		if (w->exited || w->pgid <= 1)
			continue;
		if (kill(-w->pgid, sig) != 0 && errno != ESRCH)
			agent_log(LOG_WARNING, "job %" PRId64 " rank %d: kill(-%d, %s): %s",
					  j->id, w->rank, (int) w->pgid, strsignal(sig), strerror(errno));
	}
}

int
job_live_workers(const Job *j)
{
	int			i,
				n = 0;

	for (i = 0; i < j->nworkers; i++)
		if (!j->w[i].exited)
			n++;
	return n;
}

bool
job_all_exited(const Job *j)
{
	return job_live_workers(j) == 0;
}

/* "rank 0: exit 0, rank 1: signal 9"; *all_ok when every exit status is 0. */
void
job_status_text(const Job *j, char *buf, size_t len, bool *all_ok)
{
	size_t		off = 0;
	int			i;

	*all_ok = true;
	buf[0] = '\0';
	for (i = 0; i < j->nworkers && off < len; i++)
	{
		const Worker *w = &j->w[i];
		char		one[64];

		if (w->status < 0)
		{
			snprintf(one, sizeof(one), "unknown (vanished)");
			*all_ok = false;
		}
		else if (WIFEXITED(w->status))
		{
			snprintf(one, sizeof(one), "exit %d", WEXITSTATUS(w->status));
			if (WEXITSTATUS(w->status) != 0)
				*all_ok = false;
		}
		else if (WIFSIGNALED(w->status))
		{
			snprintf(one, sizeof(one), "signal %d", WTERMSIG(w->status));
			*all_ok = false;
		}
		else
		{
			snprintf(one, sizeof(one), "status %d", w->status);
			*all_ok = false;
		}
		off += snprintf(buf + off, len - off, "%srank %d: %s", i ? ", " : "", w->rank, one);
	}
}

/* Reap exited supervisors (our children); their workers' status is in files. */
void
workers_reap(void)
{
	int			status;

	while (waitpid(-1, &status, WNOHANG) > 0)
		;
}

/* Read an exit file: true with *status when it is there. */
static bool
read_exit_file(const char *path, int *status)
{
	FILE	   *f = fopen(path, "re");
	bool		ok;

	if (f == NULL)
		return false;
	ok = fscanf(f, "%d", status) == 1;
	fclose(f);
	return ok;
}

static void
log_exit(const Job *j, const Worker *w)
{
	if (w->status < 0)
		agent_log(LOG_WARNING, "job %" PRId64 ": rank %d vanished (no exit status recorded)", j->id, w->rank);
	else if (WIFEXITED(w->status))
		agent_log(LOG_INFO, "job %" PRId64 ": rank %d exited with status %d", j->id, w->rank, WEXITSTATUS(w->status));
	else if (WIFSIGNALED(w->status))
		agent_log(LOG_INFO, "job %" PRId64 ": rank %d was terminated by signal %d (%s)", j->id, w->rank,
				  WTERMSIG(w->status), strsignal(WTERMSIG(w->status)));
}

/* Collect the exits of all workers (ours or adopted). */
void
workers_poll(void)
{
	Job		   *j;

	for (j = jobs; j; j = j->next)
	{
		int			i;

		for (i = 0; i < j->nworkers; i++)
		{
			Worker	   *w = &j->w[i];
			char		path[PATH_MAX];
			int			status;

			if (w->exited)
				continue;
			exit_file(path, sizeof(path), j->id, j->placed_us, w->rank);
			if (read_exit_file(path, &status))
			{
				w->exited = true;
				w->status = status;
				log_exit(j, w);
				continue;
			}
			if (!proc_alive(w->sup_pid, w->sup_start) && !group_alive(w->pgid))
			{
				/* the supervisor may have written the file just now */
				w->exited = true;
				w->status = read_exit_file(path, &status) ? status : -1;
				log_exit(j, w);
			}
		}
	}
}

/* ---- job records ---- */

/* The current record of a job (not one of an older placement being killed). */
Job *
job_find(int64_t id)
{
	Job		   *j;

	for (j = jobs; j; j = j->next)
		if (j->id == id && !j->orphan)
			return j;
	return NULL;
}

Job *
job_new(int64_t id, int64_t placed_us, bool rank0_here, int nworkers)
{
	Job		   *j = calloc(1, sizeof(Job));

	if (j == NULL || (nworkers > 0 && (j->w = calloc(nworkers, sizeof(Worker))) == NULL))
	{
		agent_log(LOG_ERROR, "out of memory");
		exit(1);
	}
	j->id = id;
	j->placed_us = placed_us;
	j->rank0_here = rank0_here;
	j->nworkers = nworkers;
	j->next = jobs;
	jobs = j;
	return j;
}

/*
 * Make room for nworkers new workers in j's record (for a restart at a new
 * size): the old workers must all have exited; their exit files go.
 */
void
job_reset_workers(Job *j, int nworkers)
{
	char		path[PATH_MAX];
	int			i;

	for (i = 0; i < j->nworkers; i++)
	{
		exit_file(path, sizeof(path), j->id, j->placed_us, j->w[i].rank);
		unlink(path);
	}
	free(j->w);
	j->w = NULL;
	j->nworkers = nworkers;
	if (nworkers > 0 && (j->w = calloc(nworkers, sizeof(Worker))) == NULL)
	{
		agent_log(LOG_ERROR, "out of memory");
		exit(1);
	}
}

/* Drop a job's record and its files (its workers must be gone). */
void
job_forget(Job *j)
{
	Job		  **pp;
	char		path[PATH_MAX];
	int			i;

	for (i = 0; i < j->nworkers; i++)
	{
		exit_file(path, sizeof(path), j->id, j->placed_us, j->w[i].rank);
		unlink(path);
	}
	state_file(path, sizeof(path), j->id, j->placed_us);
	unlink(path);
	for (pp = &jobs; *pp; pp = &(*pp)->next)
		if (*pp == j)
		{
			*pp = j->next;
			break;
		}
	free(j->w);
	free(j);
}

void
job_save(const Job *j)
{
	char		path[PATH_MAX];
	char		text[8192];
	size_t		off;
	int			i;

	state_file(path, sizeof(path), j->id, j->placed_us);
	off = snprintf(text, sizeof(text),
				   "job %" PRId64 "\nplaced %" PRId64 "\nrank0 %d\nstarted %d\nstopping %d\nkilled %d\nreported %d\n"
				   "deadline %.3f\nworld %d\nlaunching %d\nrestarting %d\nrestart_kill_at %.3f\nrestart_killed %d\nworkers %d\n",
				   j->id, j->placed_us, j->rank0_here, j->start_reported, j->stopping, j->killed,
				   j->reported, j->deadline, j->world_size, j->launching, j->restarting, j->restart_kill_at, j->restart_killed,
				   j->nworkers);
	for (i = 0; i < j->nworkers && off < sizeof(text); i++)
		off += snprintf(text + off, sizeof(text) - off, "worker %d %d %d %llu %d\n",
						j->w[i].rank, j->w[i].local_rank, (int) j->w[i].sup_pid,
						j->w[i].sup_start, (int) j->w[i].pgid);
	if (off >= sizeof(text) || write_file_atomic(path, text) != 0)
		agent_log(LOG_WARNING, "job %" PRId64 ": could not write \"%s\": %s", j->id, path, strerror(errno));
}

static Job *
job_load(const char *path)
{
	FILE	   *f = fopen(path, "re");
	char		line[256];
	int64_t		id = -1,
				placed = 0;
	int			rank0 = 0,
				started = 0,
				stopping = 0,
				killed = 0,
				reported = 0,
				world = 0,
				restarting = 0,
				launching = 0,
				restart_killed = 0,
				n = -1,
				got = 0;
	double		restart_kill_at = 0,
				deadline = 0;
	Job		   *j = NULL;

	if (f == NULL)
		return NULL;
	while (fgets(line, sizeof(line), f))
	{
		int			r,
					lr,
					sp,
					pg;
		unsigned long long ss;

		if (sscanf(line, "job %" SCNd64, &id) == 1 ||
			sscanf(line, "placed %" SCNd64, &placed) == 1 ||
			sscanf(line, "rank0 %d", &rank0) == 1 ||
			sscanf(line, "started %d", &started) == 1 ||
			sscanf(line, "stopping %d", &stopping) == 1 ||
			sscanf(line, "killed %d", &killed) == 1 ||
			sscanf(line, "reported %d", &reported) == 1 ||
			sscanf(line, "deadline %lf", &deadline) == 1 ||
			sscanf(line, "world %d", &world) == 1 ||
			sscanf(line, "launching %d", &launching) == 1 ||
			sscanf(line, "restarting %d", &restarting) == 1 ||
			sscanf(line, "restart_kill_at %lf", &restart_kill_at) == 1 ||
			sscanf(line, "restart_killed %d", &restart_killed) == 1)
			continue;
		if (sscanf(line, "workers %d", &n) == 1)
		{
			if (id < 0 || n < 0 || n > 4096 || j != NULL)
				break;
			j = job_new(id, placed, rank0, n);
			continue;
		}
		if (j && got < n && sscanf(line, "worker %d %d %d %llu %d", &r, &lr, &sp, &ss, &pg) == 5)
		{
			Worker	   *w = &j->w[got++];

			w->rank = r;
			w->local_rank = lr;
			w->sup_pid = sp;
			w->sup_start = ss;
			w->pgid = pg;
			w->exited = false;
			w->status = -1;
		}
	}
	fclose(f);
	if (j == NULL)
		return NULL;
	if (got != n)
	{
		agent_log(LOG_WARNING, "state file \"%s\" is incomplete; its missing workers count as vanished", path);
		for (; got < n; got++)
		{
			j->w[got].exited = true;
			j->w[got].status = -1;
			j->w[got].rank = -1;
		}
	}
	j->start_reported = started;
	j->stopping = stopping;
	j->killed = killed;
	j->reported = reported;
	/*
	 * A stopping job's grace deadline, on the monotonic clock (the same for
	 * every process until the host reboots): an agent restarted while the
	 * server is out of reach does not SIGKILL workers that still checkpoint.
	 * A record without one (an older agent's) gets the default grace.
	 */
	j->deadline = deadline > 0 ? deadline : mono_now() + 60;
	j->world_size = world;
	j->launching = launching;
	j->restarting = restarting;
	j->restart_kill_at = restart_kill_at;
	j->restart_killed = restart_killed;
	return j;
}

/* At start: the jobs a previous agent left in the state directory. */
int
workers_load_state(void)
{
	DIR		   *d = opendir(state_dir);
	struct dirent *e;
	int			n = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
	{
		char		path[PATH_MAX];
		size_t		len = strlen(e->d_name);
		Job		   *j;

		if (strncmp(e->d_name, "job-", 4) != 0 || len < 6 || strcmp(e->d_name + len - 6, ".state") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", state_dir, e->d_name);
		j = job_load(path);
		if (j == NULL)
		{
			agent_log(LOG_WARNING, "ignoring unreadable state file \"%s\"", path);
			continue;
		}
		n++;
	}
	closedir(d);
	workers_poll();
	for (Job *j = jobs; j; j = j->next)
	{
		agent_log(LOG_INFO, "job %" PRId64 ": found %d of its %d local workers still running (left by a previous agent)",
				  j->id, job_live_workers(j), j->nworkers);
		if (j->launching)
		{
			/*
			 * The previous agent stopped while it launched them: kill the
			 * ones it launched; the first resync starts them all again, as
			 * after a restart at a new size (agent.c).
			 */
			agent_log(LOG_WARNING, "job %" PRId64 ": the previous agent stopped while launching its workers; "
					  "SIGKILL to the %d it launched, then all are started again", j->id, job_live_workers(j));
			job_signal(j, SIGKILL);
			j->launching = false;
			j->restarting = true;
			j->restart_killed = true;
			j->restart_kill_at = mono_now();
			job_save(j);
		}
	}
	return n;
}
