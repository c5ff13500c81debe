/*
 * trace.c — reading the normalised trace files (their format: docs/replay.md)
 * and turning them into a cluster, teams with quotas, and gangs.
 *
 * Mapping (docs/replay.md):
 * - a job of n >= 1 GPUs is a data-parallel gang of n workers of 1 GPU each
 *   (placement packs it into the smallest domain that holds it);
 * - a job with gpu_milli < 1000 is one worker asking for that fraction of a
 *   device, rounded up to whole slices;
 * - a job of 0 GPUs is one CPU-only worker;
 * - cpus and mem_gb of the trace are the job's totals, split evenly over its
 *   workers; empty means 0 (1 cpu for a CPU-only job).
 * The cluster keeps round(n * scale) nodes of each kind, evenly spread over
 * the kind's list (every k-th node), and puts each kind's nodes into racks
 * of rack_size nodes.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

/* ---- CSV -------------------------------------------------------------------- */

typedef struct Csv
{
	FILE	   *f;
	const char *path;
	char	   *line;
	size_t		cap;
	char	  **fields;
	int			nfields;
	int			maxfields;
	char	  **header;
	int			nheader;
	long		lineno;
} Csv;

/* Split the current line in place; quoted fields may hold commas and "". */
static int
csv_split(Csv *c)
{
	char	   *p = c->line;
	int			n = 0;

	for (;;)
	{
		char	   *start,
				   *out;

		if (n == c->maxfields)
		{
			c->maxfields = c->maxfields ? c->maxfields * 2 : 16;
			c->fields = xrealloc(c->fields, sizeof(char *) * c->maxfields);
		}
		if (*p == '"')
		{
			start = out = ++p;
			while (*p)
			{
				if (*p == '"' && p[1] == '"')
				{
					*out++ = '"';
					p += 2;
				}
				else if (*p == '"')
				{
					p++;
					break;
				}
				else
					*out++ = *p++;
			}
			while (*p && *p != ',')
				p++;
			*out = '\0';
		}
		else
		{
			start = p;
			while (*p && *p != ',')
				p++;
		}
		c->fields[n++] = start;
		if (*p == ',')
		{
			*p++ = '\0';
			continue;
		}
		*p = '\0';
		break;
	}
	c->nfields = n;
	return n;
}

static bool
csv_next(Csv *c)
{
	ssize_t		len;

	for (;;)
	{
		len = getline(&c->line, &c->cap, c->f);
		if (len < 0)
			return false;
		c->lineno++;
		while (len > 0 && (c->line[len - 1] == '\n' || c->line[len - 1] == '\r'))
			c->line[--len] = '\0';
		if (len == 0)
			continue;
		csv_split(c);
		return true;
	}
}

static void
csv_open(Csv *c, const char *path)
{
	int			i;

	memset(c, 0, sizeof(*c));
	c->path = path;
	c->f = fopen(path, "r");
	if (c->f == NULL)
		die("cannot open %s: %m", path);
	if (!csv_next(c))
		die("%s is empty: a header line is expected", path);
	c->nheader = c->nfields;
	c->header = xmalloc(sizeof(char *) * c->nheader);
	for (i = 0; i < c->nheader; i++)
	{
		char	   *h = c->fields[i];

		while (isspace((unsigned char) *h))
			h++;
		c->header[i] = xstrdup(h);
	}
}

static void
csv_close(Csv *c)
{
	int			i;

	fclose(c->f);
	for (i = 0; i < c->nheader; i++)
		free(c->header[i]);
	free(c->header);
	free(c->fields);
	free(c->line);
}

static int
csv_col(Csv *c, const char *name, bool required)
{
	int			i;

	for (i = 0; i < c->nheader; i++)
		if (strcmp(c->header[i], name) == 0)
			return i;
	if (required)
		die("%s has no column \"%s\"", c->path, name);
	return -1;
}

/* The field of column col, "" when the column or the cell is missing. */
static const char *
csv_get(Csv *c, int col)
{
	if (col < 0 || col >= c->nfields)
		return "";
	return c->fields[col];
}

static double
csv_num(Csv *c, int col, double dflt)
{
	const char *s = csv_get(c, col);
	char	   *end;
	double		v;

	if (*s == '\0')
		return dflt;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || !isfinite(v))
		die("%s line %ld: \"%s\" is not a number", c->path, c->lineno, s);
	return v;
}

/* ---- cluster ------------------------------------------------------------------ */

void
read_cluster(const char *path, Cluster *cl)
{
	Csv			c;
	int			cname,
				cmodel,
				cgpus,
				ccpus,
				cmem,
				cgmem;
	int			capn = 0;

	memset(cl, 0, sizeof(*cl));
	csv_open(&c, path);
	cname = csv_col(&c, "node_id", true);
	cgpus = csv_col(&c, "gpus", true);
	cmodel = csv_col(&c, "gpu_model", false);
	ccpus = csv_col(&c, "cpus", false);
	cmem = csv_col(&c, "mem_gb", false);
	cgmem = csv_col(&c, "gpu_mem_gb", false);
	while (csv_next(&c))
	{
		NodeKind	k;
		int			i;
		const char *model = csv_get(&c, cmodel);

		k.gpus = (int) csv_num(&c, cgpus, 0);
		if (k.gpus < 0 || k.gpus > 64)
			die("%s line %ld: gpus must be between 0 and 64", path, c.lineno);
		/* hosts without cpus/mem in the file: 8 cores and 64 GB per GPU */
		k.cpus = csv_num(&c, ccpus, k.gpus > 0 ? 8.0 * k.gpus : 8);
		k.mem_gb = csv_num(&c, cmem, k.gpus > 0 ? 64.0 * k.gpus : 64);
		k.gpu_mem_gb = csv_num(&c, cgmem, -1);
		k.gpu_model = *model ? (char *) model : NULL;
		for (i = 0; i < cl->nkinds; i++)
		{
			NodeKind   *o = &cl->kinds[i];

			if (o->gpus == k.gpus && o->cpus == k.cpus && o->mem_gb == k.mem_gb &&
				o->gpu_mem_gb == k.gpu_mem_gb &&
				((o->gpu_model == NULL && k.gpu_model == NULL) ||
				 (o->gpu_model && k.gpu_model && strcmp(o->gpu_model, k.gpu_model) == 0)))
				break;
		}
		if (i == cl->nkinds)
		{
			cl->kinds = xrealloc(cl->kinds, sizeof(NodeKind) * (cl->nkinds + 1));
			k.gpu_model = k.gpu_model ? xstrdup(k.gpu_model) : NULL;
			cl->kinds[cl->nkinds++] = k;
		}
		if (cl->nnodes == capn)
		{
			capn = capn ? capn * 2 : 256;
			cl->nodes = xrealloc(cl->nodes, sizeof(Node) * capn);
		}
		cl->nodes[cl->nnodes].name = xstrdup(csv_get(&c, cname));
		cl->nodes[cl->nnodes].kind = i;
		cl->nodes[cl->nnodes].rack = NULL;
		if (cl->nodes[cl->nnodes].name[0] == '\0')
			die("%s line %ld: empty node_id", path, c.lineno);
		cl->nnodes++;
	}
	csv_close(&c);
	if (cl->nnodes == 0)
		die("%s lists no nodes", path);
}

/*
 * Keep round(n * scale) nodes of each kind, spread evenly over its list;
 * racks of rack_size nodes of one kind each, kinds one after another.
 */
void
scale_cluster(Cluster *cl, double scale, int rack_size)
{
	Node	   *kept = xmalloc(sizeof(Node) * cl->nnodes);
	int			nkept = 0;
	int			k,
				i,
				rack = 0;

	cl->gpus = 0;
	for (k = 0; k < cl->nkinds; k++)
	{
		long		seen = 0;
		int			in_rack = 0;

		for (i = 0; i < cl->nnodes; i++)
		{
			char		label[32];

			if (cl->nodes[i].kind != k)
				continue;
			seen++;
			if (floor(seen * scale + 0.5) <= floor((seen - 1) * scale + 0.5))
				continue;
			if (in_rack == 0)
				rack++;
			snprintf(label, sizeof(label), "r%03d", rack);
			kept[nkept] = cl->nodes[i];
			kept[nkept].rack = xstrdup(label);
			cl->gpus += cl->kinds[k].gpus;
			nkept++;
			if (++in_rack == rack_size)
				in_rack = 0;
		}
	}
	free(cl->nodes);
	cl->nodes = kept;
	cl->nnodes = nkept;
	if (nkept == 0)
		die("--scale %g keeps no node", scale);
}

/* ---- teams and jobs ------------------------------------------------------------- */

static int
team_index(Trace *t, const char *name, bool add)
{
	int			i;

	for (i = 0; i < t->nteams; i++)
		if (strcmp(t->teams[i].name, name) == 0)
			return i;
	if (!add)
		return -1;
	t->teams = xrealloc(t->teams, sizeof(Team) * (t->nteams + 1));
	t->teams[t->nteams].name = xstrdup(name);
	t->teams[t->nteams].file_gpus = -1;
	t->teams[t->nteams].quota = 0;
	return t->nteams++;
}

static int
cmp_submit(const void *a, const void *b)
{
	const TraceJob *x = a,
			   *y = b;

	if (x->submit != y->submit)
		return x->submit < y->submit ? -1 : 1;
	return 0;
}

void
read_trace(const char *path, Trace *t, const Options *o)
{
	Csv			c;
	int			cid,
				csub,
				cdur,
				cgpus,
				ccpus,
				cmem,
				cteam,
				cmilli,
				cqt,
				cprio;
	int			cap = 0;
	int			i;
	int			slices = o->slices > 0 ? o->slices : 1;

	csv_open(&c, path);
	cid = csv_col(&c, "job_id", true);
	csub = csv_col(&c, "submit_s", true);
	cdur = csv_col(&c, "duration_s", true);
	cgpus = csv_col(&c, "gpus", true);
	ccpus = csv_col(&c, "cpus", false);
	cmem = csv_col(&c, "mem_gb", false);
	cteam = csv_col(&c, "team", false);
	cmilli = csv_col(&c, "gpu_milli", false);
	cqt = csv_col(&c, "queue_timeout_s", false);
	cprio = csv_col(&c, "priority", false);

	/* first pass decides the slice count when not given: 4 if fractions */
	while (csv_next(&c))
	{
		double		milli = csv_num(&c, cmilli, 1000);
		TraceJob	j;
		double		gpus = csv_num(&c, cgpus, 0);
		double		cpus = csv_num(&c, ccpus, -1);
		double		mem = csv_num(&c, cmem, -1);
		const char *team = csv_get(&c, cteam);

		memset(&j, 0, sizeof(j));
		j.name = xstrdup(csv_get(&c, cid));
		j.submit = (int64_t) llround(csv_num(&c, csub, 0));
		j.duration = (int64_t) llround(csv_num(&c, cdur, 1));
		if (j.duration < 1)
			j.duration = 1;
		if (j.submit < 0)
			die("%s line %ld: negative submit_s", path, c.lineno);
		j.team = team_index(t, *team ? team : "default", true);
		j.queue_timeout = (int64_t) llround(csv_num(&c, cqt, 0));
		if (j.queue_timeout <= 0)
			j.queue_timeout = o->queue_timeout;
		j.priority = (int) csv_num(&c, cprio, 0);
		if (gpus > 0 && milli > 0 && milli < 1000)
		{
			/* a fraction of one device; the slice count is settled below */
			j.workers = 1;
			j.gpw = -milli / 1000.0;
			t->fractional = true;
		}
		else if (gpus >= 1)
		{
			j.workers = (int) ceil(gpus);
			j.gpw = 1;
		}
		else if (gpus > 0)
		{
			j.workers = 1;
			j.gpw = -gpus;
			t->fractional = true;
		}
		else
		{
			j.workers = 1;
			j.gpw = 0;
			if (cpus <= 0)
				cpus = 1;
		}
		j.cpw = cpus > 0 ? cpus / j.workers : 0;
		j.mpw = mem > 0 ? mem / j.workers : 0;
		if (t->njobs == cap)
		{
			cap = cap ? cap * 2 : 4096;
			t->jobs = xrealloc(t->jobs, sizeof(TraceJob) * cap);
		}
		t->jobs[t->njobs++] = j;
	}
	csv_close(&c);
	if (o->slices == 0 && t->fractional)
		slices = 4;
	for (i = 0; i < t->njobs; i++)
	{
		TraceJob   *j = &t->jobs[i];

		if (j->gpw < 0)
		{
			int			k = (int) ceil(-j->gpw * slices - 1e-9);

			if (k < 1)
				k = 1;
			j->gpw = k >= slices ? 1 : (double) k / slices;
		}
	}
	qsort(t->jobs, t->njobs, sizeof(TraceJob), cmp_submit);
	if (o->limit > 0 && o->limit < t->njobs)
		t->njobs = o->limit;
	if (t->njobs == 0)
		die("%s has no jobs", path);
}

void
read_quotas(const char *path, Trace *t)
{
	Csv			c;
	int			cteam,
				cgpus;

	csv_open(&c, path);
	cteam = csv_col(&c, "team", true);
	cgpus = csv_col(&c, "gpus", true);
	while (csv_next(&c))
	{
		int			i = team_index(t, csv_get(&c, cteam), true);

		t->teams[i].file_gpus = csv_num(&c, cgpus, 0);
		if (t->teams[i].file_gpus < 0)
			die("%s line %ld: negative gpus", path, c.lineno);
	}
	csv_close(&c);
}

/*
 * Nominal quotas on the scaled cluster: the quota file's GPUs in proportion,
 * rounded down so that they never sum to more than the cluster (teams absent
 * from the file get 0); without a file, equal shares.
 */
void
assign_quotas(Trace *t, long capacity, bool from_file)
{
	double		total = 0;
	int			i;

	for (i = 0; i < t->nteams; i++)
		if (t->teams[i].file_gpus > 0)
			total += t->teams[i].file_gpus;
	for (i = 0; i < t->nteams; i++)
	{
		Team	   *tm = &t->teams[i];

		if (from_file)
			tm->quota = (total > 0 && tm->file_gpus > 0) ? (long) floor(capacity * tm->file_gpus / total + 1e-9) : 0;
		else
			tm->quota = capacity / t->nteams;
	}
}

/*
 * --elastic-fraction F: each job of more than one worker is made elastic
 * with probability F, with a minimum of half its replicas (rounded up; the
 * replay's gangs are one GPU per worker, so replicas are workers). The
 * choice hashes the job's index with the seed: the same jobs for every
 * policy and every run with that seed. Returns how many were made elastic.
 */
int
mark_elastic(Trace *t, double fraction, unsigned seed)
{
	int			i,
				n = 0;

	for (i = 0; i < t->njobs; i++)
	{
		TraceJob   *j = &t->jobs[i];
		uint64_t	h = (uint64_t) i * 0x9E3779B97F4A7C15ULL ^ ((uint64_t) seed * 0xBF58476D1CE4E5B9ULL);

		/* splitmix64's finalizer */
		h ^= h >> 30;
		h *= 0xBF58476D1CE4E5B9ULL;
		h ^= h >> 27;
		h *= 0x94D049BB133111EBULL;
		h ^= h >> 31;
		j->min_replicas = 0;
		if (j->workers < 2 || fraction <= 0)
			continue;
		if ((double) (h >> 11) / 9007199254740992.0 < fraction)
		{
			j->min_replicas = (j->workers + 1) / 2;
			n++;
		}
	}
	return n;
}
