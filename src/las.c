/*
 * las.c — least-attained-service queues (see las.h and docs/fairness.md).
 */
#include "postgres.h"

#include <math.h>

#include "las.h"

int			gs_las_nthresholds = 2;
double		gs_las_thresholds_v[GS_LAS_MAX_THRESHOLDS] = {3250, 7200};

bool
gs_las_parse(const char *s, double *out, int *n, const char **why)
{
	const char *p = s;
	int			k = 0;

	*n = 0;
	while (*p == ' ')
		p++;
	if (*p == '\0')
		return true;			/* no thresholds: one queue, LAS is FIFO */
	for (;;)
	{
		char	   *end;
		double		v;

		while (*p == ' ')
			p++;
		v = strtod(p, &end);
		if (end == p || !isfinite(v) || v <= 0)
		{
			*why = "Each threshold is a positive number of GPU-seconds.";
			return false;
		}
		if (k > 0 && v <= out[k - 1])
		{
			*why = "Thresholds must ascend.";
			return false;
		}
		if (k == GS_LAS_MAX_THRESHOLDS)
		{
			*why = "At most 16 thresholds (17 queues).";
			return false;
		}
		out[k++] = v;
		p = end;
		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		if (*p != ',')
		{
			*why = "Separate the thresholds with commas.";
			return false;
		}
		p++;
	}
	*n = k;
	return true;
}

int
gs_las_queue_of(double attained)
{
	int			q = 0;

	while (q < gs_las_nthresholds && attained >= gs_las_thresholds_v[q])
		q++;
	return q;
}

int
gs_las_pending_queue(double attained, double waited_s, double promote_factor, bool *promoted)
{
	int			q = gs_las_queue_of(attained);

	*promoted = false;
	if (q > 0 && promote_factor > 0 && attained > 0 && waited_s > promote_factor * attained)
	{
		*promoted = true;
		return 0;
	}
	return q;
}
