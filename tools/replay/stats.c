/*
 * stats.c — the summary of a replay: percentiles, the teams' entitlement
 * (weighted max-min water-filling capped by demand), Jain's index, and the
 * output as JSON lines or a table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* Linear interpolation between closest ranks; 0 for no values. Sorts v. */
double
percentile(double *v, int n, double p)
{
	double		pos;
	int			lo;

	if (n <= 0)
		return 0;
	qsort(v, n, sizeof(double), cmp_double);
	pos = p * (n - 1);
	lo = (int) floor(pos);
	if (lo >= n - 1)
		return v[n - 1];
	return v[lo] + (pos - lo) * (v[lo + 1] - v[lo]);
}

/*
 * Weighted max-min fair shares of capacity among n teams, none above its
 * demand: raise a common level; a team gets min(demand, level x weight);
 * the level rises until the capacity is used or every demand is met.
 */
void
waterfill(const double *demand, const double *weight, int n, double capacity, double *out)
{
	bool		done[n > 0 ? n : 1];
	double		left = capacity;
	int			i;

	for (i = 0; i < n; i++)
	{
		out[i] = 0;
		done[i] = demand[i] <= 0 || weight[i] <= 0;
	}
	for (;;)
	{
		double		w = 0,
					level;
		bool		saturated = false;

		for (i = 0; i < n; i++)
			if (!done[i])
				w += weight[i];
		if (w <= 0 || left <= 1e-12)
			break;
		level = left / w;
		for (i = 0; i < n; i++)
			if (!done[i] && demand[i] <= level * weight[i])
			{
				out[i] = demand[i];
				left -= demand[i];
				done[i] = true;
				saturated = true;
			}
		if (!saturated)
		{
			for (i = 0; i < n; i++)
				if (!done[i])
					out[i] = level * weight[i];
			break;
		}
	}
}

/* Jain's index (sum x)^2 / (n sum x^2); -1 when there is nothing to rate. */
double
jain_index(const double *x, int n)
{
	double		s = 0,
				s2 = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		s += x[i];
		s2 += x[i] * x[i];
	}
	if (n == 0 || s2 <= 0)
		return -1;
	return s * s / (n * s2);
}

static void
json_num(const char *key, double v, int digits, bool last)
{
	if (!isfinite(v))
		printf("\"%s\":null%s", key, last ? "" : ",");
	else
		printf("\"%s\":%.*f%s", key, digits, v, last ? "" : ",");
}

void
print_json(const Result *r)
{
	int			i;

	printf("{\"policy\":\"%s\",", r->policy);
	json_num("time_limit_factor", r->time_limit_factor > 0 ? r->time_limit_factor : NAN, 2, false);
	json_num("elastic_fraction", r->elastic_fraction, 3, false);
	printf("\"elastic_jobs\":%d,\"placed_smaller\":%d,\"grows\":%d,\"shrinks\":%d,\"shrink_kills\":%d,",
		   r->elastic_jobs, r->placed_smaller, r->grows, r->shrinks, r->shrink_kills);
	printf("\"jobs\":%d,\"submitted\":%d,\"rejected\":%d,\"finished\":%d,\"expired\":%d,\"unfinished\":%d,",
		   r->jobs, r->submitted, r->rejected, r->finished, r->expired, r->unfinished);
	printf("\"makespan_s\":%lld,", (long long) r->makespan);
	json_num("jct_mean_s", r->jct_mean, 1, false);
	json_num("jct_p50_s", r->jct_p50, 1, false);
	json_num("jct_p95_s", r->jct_p95, 1, false);
	json_num("wait_mean_s", r->wait_mean, 1, false);
	json_num("wait_p50_s", r->wait_p50, 1, false);
	json_num("wait_p95_s", r->wait_p95, 1, false);
	json_num("gpu_alloc_ratio", r->gpu_alloc_ratio, 4, false);
	json_num("contended_s", r->contended_s, 0, false);
	json_num("wait_guaranteed_mean_s", r->wait_guaranteed_mean, 1, false);
	json_num("wait_borrowed_mean_s", r->wait_borrowed_mean, 1, false);
	printf("\"placed_guaranteed\":%d,\"placed_borrowed\":%d,", r->placed_guaranteed, r->placed_borrowed);
	json_num("wait_entitled_mean_s", r->wait_entitled_mean, 1, false);
	printf("\"placed_entitled\":%d,", r->placed_entitled);
	printf("\"preemptions\":%d,\"kills\":%d,", r->preemptions, r->kills);
	json_num("preemptions_per_job", r->submitted ? (double) r->preemptions / r->submitted : 0, 4, false);
	printf("\"preempted_jobs\":%d,\"max_preemptions_job\":%d,", r->preempted_jobs, r->max_preemptions_job);
	json_num("idle_gpu_hours_waiting", r->idle_gpu_hours_waiting, 2, false);
	printf("\"nominations\":%d,", r->nominations);
	json_num("stranded_gpus", r->stranded_gpus, 1, false);
	json_num("lost_gpu_hours", r->lost_gpu_hours, 2, false);
	printf("\"partial_placements\":%d,\"invariant_violations\":%d,\"invariant_checks\":%d,",
		   r->partial_placements, r->invariant_violations, r->invariant_checks);
	json_num("jain_fairness", r->jain < 0 ? NAN : r->jain, 4, false);
	json_num("wall_s", r->wall_s, 1, false);
	printf("\"rounds\":%d,", r->rounds);
	json_num("round_ms_mean", r->rounds ? r->round_ms_total / r->rounds : 0, 2, false);
	json_num("round_ms_max", r->round_ms_max, 1, false);
	json_num("wall_db_s", r->wall_db_s, 1, false);
	json_num("wall_checks_s", r->wall_checks_s, 1, false);
	printf("\"team_jct_mean_s\":{");
	for (i = 0; i < r->nteams; i++)
	{
		printf("\"");
		for (const char *c = r->team_names[i]; *c; c++)
			printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
		if (isfinite(r->team_jct_mean[i]))
			printf("\":%.1f", r->team_jct_mean[i]);
		else
			printf("\":null");
		if (i + 1 < r->nteams)
			printf(",");
	}
	printf("},");
	printf("\"round_trips\":%d,\"nodes\":%d,\"gpus\":%ld,\"database\":\"%s\"}\n",
		   r->statements, r->nodes, r->gpus, r->database);
	fflush(stdout);
}

static void
hms(char *out, size_t len, double s)
{
	if (!isfinite(s))
		snprintf(out, len, "-");
	else if (s < 120)
		snprintf(out, len, "%.0fs", s);
	else if (s < 7200)
		snprintf(out, len, "%.1fm", s / 60);
	else if (s < 172800)
		snprintf(out, len, "%.1fh", s / 3600);
	else
		snprintf(out, len, "%.1fd", s / 86400);
}

void
print_table(const Result *r, int n)
{
	int			i;
	char		a[32];

#define ROW(label, fmt, expr) \
	do { printf("%-22s", label); for (i = 0; i < n; i++) { printf(" %14" fmt, expr); } printf("\n"); } while (0)
#define ROWN(label, expr) \
	do { printf("%-22s", label); for (i = 0; i < n; i++) { double v_ = (expr); if (isfinite(v_)) printf(" %14.3f", v_); else printf(" %14s", "-"); } printf("\n"); } while (0)
#define ROWT(label, expr) \
	do { printf("%-22s", label); for (i = 0; i < n; i++) { hms(a, sizeof(a), expr); printf(" %14s", a); } printf("\n"); } while (0)

	ROW("policy", "s", r[i].policy);
	ROW("jobs", "d", r[i].jobs);
	ROW("  rejected at submit", "d", r[i].rejected);
	ROW("  finished", "d", r[i].finished);
	ROW("  expired", "d", r[i].expired);
	ROW("  unfinished", "d", r[i].unfinished);
	ROWT("makespan", (double) r[i].makespan);
	ROWT("JCT mean", r[i].jct_mean);
	ROWT("JCT p50", r[i].jct_p50);
	ROWT("JCT p95", r[i].jct_p95);
	ROWT("wait mean", r[i].wait_mean);
	ROWT("wait p50", r[i].wait_p50);
	ROWT("wait p95", r[i].wait_p95);
	ROWN("GPU alloc ratio", r[i].gpu_alloc_ratio);
	ROWT("  contended time", r[i].contended_s);
	ROWT("  wait guaranteed", r[i].wait_guaranteed_mean);
	ROWT("  wait borrowing", r[i].wait_borrowed_mean);
	ROWT("  wait entitled at submit", r[i].wait_entitled_mean);
	ROW("preemptions", "d", r[i].preemptions);
	ROWN("  per job", r[i].submitted ? (double) r[i].preemptions / r[i].submitted : 0);
	ROW("  most of one job", "d", r[i].max_preemptions_job);
	ROW("  stranded GPUs", ".1f", r[i].stranded_gpus);
	ROW("idle GPU-h, waiting", ".1f", r[i].idle_gpu_hours_waiting);
	ROW("kills", "d", r[i].kills);
	ROW("shrinks (elastic victims)", "d", r[i].shrinks);
	ROW("lost GPU-hours", ".1f", r[i].lost_gpu_hours);
	ROW("partial placements", "d", r[i].partial_placements);
	ROW("invariant violations", "d", r[i].invariant_violations);
	ROWN("Jain fairness", r[i].jain < 0 ? NAN : r[i].jain);
	if (n > 0)
	{
		int			k;

		for (k = 0; k < r[0].nteams; k++)
		{
			char		label[64];

			snprintf(label, sizeof(label), "  JCT mean %.12s", r[0].team_names[k]);
			ROWT(label, r[i].team_jct_mean[k]);
		}
	}
	ROW("rounds", "d", r[i].rounds);
	ROW("round ms mean", ".2f", r[i].rounds ? r[i].round_ms_total / r[i].rounds : 0);
	ROW("wall s", ".1f", r[i].wall_s);
#undef ROW
#undef ROWN
#undef ROWT
}
