/*
 * main.c — gangsched-replay's command line: read the inputs once, then for
 * each policy create a fresh database, replay the trace there, summarise,
 * and drop it (unless --keep).
 *
 * Exit status: 0; 1 for a bad command line; 2 for an error (SQL, files);
 * 3 when a replay saw an invariant violation or a partial placement.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay.h"

#ifndef GS_VERSION
#define GS_VERSION "unknown"
#endif

static void
usage(FILE *f)
{
	fprintf(f,
			"gangsched-replay replays a GPU-cluster job trace in virtual time through the\n"
			"gangsched extension, one fresh database per policy, and summarises each policy.\n\n"
			"Usage: gangsched-replay --nodes NODES.csv --trace JOBS.csv [options]\n\n"
			"Inputs:\n"
			"  --nodes FILE              cluster: node_id,gpu_model,gpus,cpus,mem_gb[,gpu_mem_gb]\n"
			"  --trace FILE              jobs: job_id,submit_s,duration_s,gpus,cpus,mem_gb,team[,...]\n"
			"                            (optional columns gpu_milli, queue_timeout_s, priority)\n"
			"  --quotas FILE             team,gpus nominal quotas, scaled to the cluster in\n"
			"                            proportion (default: equal shares of the scaled cluster)\n"
			"  --scale F                 keep fraction F of each kind of node (default 1)\n"
			"  --limit N                 only the first N jobs by submit time\n"
			"  --until S                 stop at virtual second S (what runs or waits then is unfinished)\n"
			"  --rack-size N             nodes per rack (default 12)\n"
			"  --team-weights W          quota: each team's weight (add_team) is its nominal\n"
			"                            quota, as in the fairness measure (default); equal: 1\n"
			"  --gpu-slices N            slices per device (default 1, or 4 when the trace has fractions)\n"
			"  --start TIMESTAMP         virtual time of second 0, UTC (default 2017-10-02 00:00:00)\n"
			"Policies:\n"
			"  --policies LIST           comma-separated, run in order (default fifo,drf):\n"
			"                            fifo           priority then submit order, no backfill, no preemption\n"
			"                            fifo-backfill  the same with backfill\n"
			"                            drf            fair order, quotas and borrowing, preemption, backfill\n"
			"                            drf-nopreempt  drf without preemption\n"
			"                            drf-las        drf with gangsched.team_order = las: least attained\n"
			"                                           service first within each team, LAS preemption\n"
			"                            las            one team for every job, team_order = las, preemption:\n"
			"                                           pure two-dimensional LAS (as Tiresias)\n"
			"  --set NAME=VALUE          a setting for the replay's session (repeatable),\n"
			"                            e.g. --set gangsched.min_runtime=600\n"
			"Agents and rounds:\n"
			"  --checkpoint-interval S   seconds between a job's checkpoints (default 1800; 0 = never)\n"
			"  --release-delay S         seconds a preempted job takes to stop (default 30); longer\n"
			"                            than the grace and it is killed at its deadline\n"
			"  --no-preempt-checkpoint   preempted jobs cannot checkpoint on demand: they release\n"
			"                            with checkpointed => false and redo the work since their\n"
			"                            last periodic checkpoint\n"
			"  --queue-timeout S         queue timeout for jobs without their own (default none)\n"
			"  --time-limit-factor F     each job gets a time limit of F × its duration (F >= 1;\n"
			"                            default none): backfill with time uses them\n"
			"  --elastic-fraction F      make fraction F of the multi-GPU jobs elastic, with a\n"
			"                            minimum of half their replicas (default 0)\n"
			"  --seed N                  which jobs --elastic-fraction picks (default 1)\n"
			"  --tick S                  round interval in virtual seconds (default 30)\n"
			"  --idle-round S            a round at least this often while jobs wait (default 300; 0 = off)\n"
			"  --check-every N           check_invariants() every N rounds (default 100; 0 = never)\n"
			"Output and databases:\n"
			"  --json                    one JSON object per policy per line\n"
			"  --keep                    keep the databases (named PREFIX_POLICY)\n"
			"  --db-prefix NAME          database name prefix (default gsreplay_PID)\n"
			"  --maintenance-db NAME     database to connect to for CREATE/DROP DATABASE (default postgres)\n"
			"  --quiet                   no progress on stderr\n"
			"  --help, --version\n\n"
			"The server is named by the libpq environment: PGHOST, PGPORT, PGUSER...\n");
}

static int64_t
arg_seconds(const char *opt, const char *v, bool allow_zero)
{
	char	   *end;
	long long	n = strtoll(v, &end, 10);

	if (end == v || *end != '\0' || n < 0 || (!allow_zero && n == 0))
	{
		fprintf(stderr, "gangsched-replay: --%s needs %s whole number of seconds, not \"%s\"\n",
				opt, allow_zero ? "a" : "a positive", v);
		exit(1);
	}
	return n;
}

static void
split_policies(Options *o, const char *list)
{
	char	   *copy = xstrdup(list);
	char	   *tok,
			   *save = NULL;

	o->npolicies = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
	{
		if (strcmp(tok, "fifo") && strcmp(tok, "drf") && strcmp(tok, "fifo-backfill") && strcmp(tok, "drf-nopreempt") &&
			strcmp(tok, "drf-las") && strcmp(tok, "las"))
		{
			fprintf(stderr, "gangsched-replay: unknown policy \"%s\": use fifo, fifo-backfill, drf, drf-nopreempt, drf-las or las\n", tok);
			exit(1);
		}
		o->policies = xrealloc(o->policies, sizeof(char *) * (o->npolicies + 1));
		o->policies[o->npolicies++] = xstrdup(tok);
	}
	free(copy);
	if (o->npolicies == 0)
	{
		fprintf(stderr, "gangsched-replay: --policies names no policy\n");
		exit(1);
	}
}

static void
create_database(const Options *o, const char *name)
{
	PGconn	   *conn = db_connect(o->maintenance_db);
	char		sql[256];

	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS \"%s\"", name);
	db_command(conn, sql);
	snprintf(sql, sizeof(sql), "CREATE DATABASE \"%s\" TEMPLATE template0", name);
	db_command(conn, sql);
	PQfinish(conn);
}

static void
drop_database(const Options *o, const char *name)
{
	PGconn	   *conn = db_connect(o->maintenance_db);
	char		sql[256];

	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS \"%s\"", name);
	db_command(conn, sql);
	PQfinish(conn);
}

int
main(int argc, char **argv)
{
	static struct option longopts[] = {
		{"nodes", required_argument, NULL, 'n'},
		{"trace", required_argument, NULL, 't'},
		{"quotas", required_argument, NULL, 'q'},
		{"scale", required_argument, NULL, 's'},
		{"policies", required_argument, NULL, 'p'},
		{"checkpoint-interval", required_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{"limit", required_argument, NULL, 'l'},
		{"keep", no_argument, NULL, 'k'},
		{"tick", required_argument, NULL, 1},
		{"idle-round", required_argument, NULL, 2},
		{"release-delay", required_argument, NULL, 3},
		{"no-preempt-checkpoint", no_argument, NULL, 4},
		{"queue-timeout", required_argument, NULL, 5},
		{"rack-size", required_argument, NULL, 6},
		{"gpu-slices", required_argument, NULL, 7},
		{"check-every", required_argument, NULL, 8},
		{"db-prefix", required_argument, NULL, 9},
		{"maintenance-db", required_argument, NULL, 10},
		{"start", required_argument, NULL, 11},
		{"set", required_argument, NULL, 12},
		{"quiet", no_argument, NULL, 13},
		{"until", required_argument, NULL, 14},
		{"team-weights", required_argument, NULL, 15},
		{"time-limit-factor", required_argument, NULL, 16},
		{"elastic-fraction", required_argument, NULL, 17},
		{"seed", required_argument, NULL, 18},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0}
	};
	Options		o;
	Cluster		cl;
	Trace		tr;
	Result	   *res;
	int			ch,
				i;
	int			status = 0;
	char		prefix[64];

	memset(&o, 0, sizeof(o));
	memset(&tr, 0, sizeof(tr));
	o.scale = 1.0;
	o.checkpoint_interval = 1800;
	o.tick = 30;
	o.idle_round = 300;
	o.release_delay = 30;
	o.checkpoint_on_preempt = true;
	o.rack_size = 12;
	o.check_every = 100;
	o.seed = 1;
	o.maintenance_db = "postgres";
	o.start = "2017-10-02 00:00:00";
	split_policies(&o, "fifo,drf");

	while ((ch = getopt_long(argc, argv, "n:t:q:s:p:c:jl:kh", longopts, NULL)) != -1)
	{
		switch (ch)
		{
			case 'n':
				o.nodes_file = optarg;
				break;
			case 't':
				o.trace_file = optarg;
				break;
			case 'q':
				o.quotas_file = optarg;
				break;
			case 's':
				{
					char	   *end;

					o.scale = strtod(optarg, &end);
					if (end == optarg || *end || !(o.scale > 0 && o.scale <= 1))
					{
						fprintf(stderr, "gangsched-replay: --scale must be in (0, 1], not \"%s\"\n", optarg);
						return 1;
					}
				}
				break;
			case 'p':
				split_policies(&o, optarg);
				break;
			case 'c':
				o.checkpoint_interval = arg_seconds("checkpoint-interval", optarg, true);
				break;
			case 'j':
				o.json = true;
				break;
			case 'l':
				o.limit = (int) arg_seconds("limit", optarg, false);
				break;
			case 'k':
				o.keep = true;
				break;
			case 1:
				o.tick = arg_seconds("tick", optarg, false);
				break;
			case 2:
				o.idle_round = arg_seconds("idle-round", optarg, true);
				break;
			case 3:
				o.release_delay = arg_seconds("release-delay", optarg, true);
				break;
			case 4:
				o.checkpoint_on_preempt = false;
				break;
			case 5:
				o.queue_timeout = arg_seconds("queue-timeout", optarg, true);
				break;
			case 6:
				o.rack_size = (int) arg_seconds("rack-size", optarg, false);
				break;
			case 7:
				o.slices = (int) arg_seconds("gpu-slices", optarg, false);
				if (o.slices > 8)
				{
					fprintf(stderr, "gangsched-replay: --gpu-slices is at most 8\n");
					return 1;
				}
				break;
			case 8:
				o.check_every = (int) arg_seconds("check-every", optarg, true);
				break;
			case 9:
				o.db_prefix = optarg;
				break;
			case 10:
				o.maintenance_db = optarg;
				break;
			case 11:
				o.start = optarg;
				(void) parse_epoch(optarg);
				break;
			case 12:
				if (strchr(optarg, '=') == NULL || optarg[0] == '=')
				{
					fprintf(stderr, "gangsched-replay: --set needs NAME=VALUE, not \"%s\"\n", optarg);
					return 1;
				}
				o.sets = xrealloc(o.sets, sizeof(char *) * (o.nsets + 1));
				o.sets[o.nsets++] = optarg;
				break;
			case 13:
				o.quiet = true;
				break;
			case 14:
				o.until = arg_seconds("until", optarg, false);
				break;
			case 16:
				{
					char	   *end;

					o.time_limit_factor = strtod(optarg, &end);
					if (end == optarg || *end || !(o.time_limit_factor >= 1 && o.time_limit_factor <= 1000))
					{
						fprintf(stderr, "gangsched-replay: --time-limit-factor must be in [1, 1000], not \"%s\"\n", optarg);
						return 1;
					}
				}
				break;
			case 17:
				{
					char	   *end;

					o.elastic_fraction = strtod(optarg, &end);
					if (end == optarg || *end || !(o.elastic_fraction >= 0 && o.elastic_fraction <= 1))
					{
						fprintf(stderr, "gangsched-replay: --elastic-fraction must be in [0, 1], not \"%s\"\n", optarg);
						return 1;
					}
				}
				break;
			case 18:
				o.seed = (unsigned) arg_seconds("seed", optarg, true);
				break;
			case 15:
				if (strcmp(optarg, "quota") == 0)
					o.equal_weights = false;
				else if (strcmp(optarg, "equal") == 0)
					o.equal_weights = true;
				else
				{
					fprintf(stderr, "gangsched-replay: --team-weights is quota or equal, not \"%s\"\n", optarg);
					return 1;
				}
				break;
			case 'h':
				usage(stdout);
				return 0;
			case 'V':
				printf("gangsched-replay (gangsched) %s\n", GS_VERSION);
				return 0;
			default:
				usage(stderr);
				return 1;
		}
	}
	if (optind < argc || o.nodes_file == NULL || o.trace_file == NULL)
	{
		if (optind < argc)
			fprintf(stderr, "gangsched-replay: unexpected argument \"%s\"\n", argv[optind]);
		else
			fprintf(stderr, "gangsched-replay: --nodes and --trace are required\n");
		usage(stderr);
		return 1;
	}
	if (o.db_prefix == NULL)
	{
		snprintf(prefix, sizeof(prefix), "gsreplay_%d", (int) getpid());
		o.db_prefix = prefix;
	}
	if (strlen(o.db_prefix) > 40 || strspn(o.db_prefix, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(o.db_prefix))
	{
		fprintf(stderr, "gangsched-replay: --db-prefix must be at most 40 lower-case letters, digits or _\n");
		return 1;
	}

	read_cluster(o.nodes_file, &cl);
	read_trace(o.trace_file, &tr, &o);
	cl.slices = o.slices > 0 ? o.slices : (tr.fractional ? 4 : 1);
	scale_cluster(&cl, o.scale, o.rack_size);
	if (o.quotas_file)
		read_quotas(o.quotas_file, &tr);
	assign_quotas(&tr, cl.gpus, o.quotas_file != NULL);
	{
		int			nel = mark_elastic(&tr, o.elastic_fraction, o.seed);

		if (!o.quiet && nel > 0)
			fprintf(stderr, "gangsched-replay: %d elastic jobs (--elastic-fraction %g, --seed %u)\n",
					nel, o.elastic_fraction, o.seed);
	}
	if (!o.quiet)
	{
		fprintf(stderr, "gangsched-replay: %d jobs, %d teams; cluster at scale %g: %d nodes, %ld GPUs\n",
				tr.njobs, tr.nteams, o.scale, cl.nnodes, cl.gpus);
		for (i = 0; i < tr.nteams; i++)
			fprintf(stderr, "  team %-12s nominal quota %ld GPUs\n", tr.teams[i].name, tr.teams[i].quota);
	}

	res = xcalloc(o.npolicies, sizeof(Result));
	for (i = 0; i < o.npolicies; i++)
	{
		char	   *db = xmalloc(strlen(o.db_prefix) + 32);
		char	   *p;

		sprintf(db, "%s_%s", o.db_prefix, o.policies[i]);
		for (p = db; *p; p++)
			if (*p == '-')
				*p = '_';
		create_database(&o, db);
		if (!o.quiet)
			fprintf(stderr, "gangsched-replay: policy %s in database %s\n", o.policies[i], db);
		run_policy(&o, &cl, &tr, o.policies[i], db, &res[i]);
		if (!o.keep)
			drop_database(&o, db);
		if (o.json)
			print_json(&res[i]);
		else if (!o.quiet)
			fprintf(stderr, "gangsched-replay: policy %s done in %.1f s\n", o.policies[i], res[i].wall_s);
		if (res[i].invariant_violations > 0 || res[i].partial_placements > 0)
		{
			fprintf(stderr, "gangsched-replay: policy %s: %d invariant violations, %d partial placements%s%s\n",
					o.policies[i], res[i].invariant_violations, res[i].partial_placements,
					res[i].first_violation ? "; first: " : "", res[i].first_violation ? res[i].first_violation : "");
			status = 3;
		}
	}
	if (!o.json)
		print_table(res, o.npolicies);
	return status;
}
