/*
 * agent.h — gangsched-agent, the reference node agent: shared declarations.
 *
 * agent.c owns the options, the connection and the protocol with the
 * server (LISTEN, node_work resync, reports, heartbeats, reconnects);
 * workers.c owns the local processes (launching each worker under a small
 * supervisor, signalling process groups, collecting exit statuses) and the
 * state files that let a restarted agent adopt the workers it left running.
 */
#ifndef GANGSCHED_AGENT_H
#define GANGSCHED_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- logging (agent.c) ---- */
enum
{
	LOG_ERROR = 0,
	LOG_WARNING,
	LOG_INFO,
	LOG_DEBUG
};
extern int	log_level;
extern void agent_log(int level, const char *fmt,...) __attribute__((format(printf, 2, 3)));

/* Monotonic clock in seconds. */
extern double mono_now(void);

/* One worker (rank) of a job on this node. */
typedef struct Worker
{
	int			rank;			/* global rank, 0 … world_size - 1 */
	int			local_rank;
	pid_t		sup_pid;		/* its supervisor (waits, records the exit) */
	unsigned long long sup_start;	/* supervisor's start time, /proc (0: unknown) */
	pid_t		pgid;			/* the worker's own process group */
	bool		exited;
	int			status;			/* wait status once exited; -1: unknown */
} Worker;

/* What the server says about one worker of a job on this node. */
typedef struct WorkerSpec
{
	int			rank;
	int			local_rank;
	int			local_world_size;
	int			world_size;
	char		devices[256];	/* "0,1" */
	int			first_slice;
	int			slices;
	double		time_left;		/* seconds until its time limit at launch, < 0 none */
} WorkerSpec;

/* A job (one placement of it) with workers on this node. */
typedef struct Job
{
	int64_t		id;
	int64_t		placed_us;		/* jobs.placed_at: tells placements apart */
	bool		rank0_here;		/* this node holds rank 0: it reports */
	int			nworkers;
	Worker	   *w;
	bool		start_reported; /* job_started succeeded */
	int			world_size;		/* the world size its workers were started with (0: unknown) */
	bool		launching;		/* job_launch under way (its state file says so until it is done) */
	bool		restarting;		/* resized: SIGTERM sent, to start again at the new size */
	double		restart_kill_at;	/* mono_now() time to SIGKILL a restart's stragglers */
	bool		restart_killed; /* a restart's stragglers were SIGKILLed */
	bool		stopping;		/* preempted: SIGTERM sent */
	double		deadline;		/* mono_now() time of the grace deadline */
	bool		killed;			/* SIGKILLed (deadline, kill, cancel) */
	bool		reported;		/* job_finished / job_released done or left to rank 0 */
	bool		orphan;			/* no longer this node's: kill, then forget */
	bool		seen;			/* listed by the last node_work */
	double		retry_at;		/* after an unexpected error from a report */
	struct Job *next;
} Job;

/* ---- workers.c ---- */
extern char state_dir[];		/* <workdir>/.agent-<node> */
extern char work_dir[];

extern Job *jobs;

extern Job *job_find(int64_t id);
extern Job *job_new(int64_t id, int64_t placed_us, bool rank0_here, int nworkers);
extern void job_forget(Job *j);
extern void job_save(const Job *j);
extern int	job_live_workers(const Job *j);
extern bool job_all_exited(const Job *j);
extern void job_signal(Job *j, int sig);
extern void job_reset_workers(Job *j, int nworkers);
extern bool job_launch(Job *j, const WorkerSpec *specs, const char *command, const char *node,
					   const char *master_addr);
extern void job_status_text(const Job *j, char *buf, size_t len, bool *all_ok);
extern void workers_reap(void);
extern void workers_poll(void);
extern int	workers_load_state(void);
extern bool workers_init_dirs(const char *workdir, const char *node);

#endif							/* GANGSCHED_AGENT_H */
