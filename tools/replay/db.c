/*
 * db.c — the libpq edge of gangsched-replay, and small helpers (buffers,
 * allocation, timestamps).
 *
 * Connections take everything but the database name from the standard
 * libpq environment (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGSERVICE...).
 * Any SQL error ends the replay: a replay that went on after one would
 * measure something else than the scheduler.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay.h"

void
die(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "gangsched-replay: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

void *
xmalloc(size_t n)
{
	void	   *p = malloc(n ? n : 1);

	if (p == NULL)
		die("out of memory");
	return p;
}

void *
xcalloc(size_t n, size_t sz)
{
	void	   *p = calloc(n ? n : 1, sz ? sz : 1);

	if (p == NULL)
		die("out of memory");
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (p == NULL)
		die("out of memory");
	return p;
}

char *
xstrdup(const char *s)
{
	char	   *p = strdup(s);

	if (p == NULL)
		die("out of memory");
	return p;
}

/* ---- buffers ---------------------------------------------------------------- */

void
buf_init(Buf *b)
{
	b->cap = 1024;
	b->len = 0;
	b->data = xmalloc(b->cap);
	b->data[0] = '\0';
}

void
buf_reset(Buf *b)
{
	b->len = 0;
	b->data[0] = '\0';
}

void
buf_free(Buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static void
buf_reserve(Buf *b, size_t more)
{
	if (b->len + more + 1 > b->cap)
	{
		while (b->len + more + 1 > b->cap)
			b->cap *= 2;
		b->data = xrealloc(b->data, b->cap);
	}
}

void
buf_printf(Buf *b, const char *fmt,...)
{
	va_list		ap;
	int			n;

	for (;;)
	{
		va_start(ap, fmt);
		n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			die("formatting failed");
		if (b->len + (size_t) n < b->cap)
		{
			b->len += n;
			return;
		}
		buf_reserve(b, n);
	}
}

void
buf_sql_literal(Buf *b, const char *s)
{
	buf_reserve(b, strlen(s) * 2 + 2);
	b->data[b->len++] = '\'';
	for (; *s; s++)
	{
		if (*s == '\'')
			b->data[b->len++] = '\'';
		b->data[b->len++] = *s;
	}
	b->data[b->len++] = '\'';
	b->data[b->len] = '\0';
}

/* An element of an array literal, double-quoted; the literal itself is then
 * quoted with buf_sql_literal rules, so no single quotes may appear here. */
void
buf_array_elem(Buf *b, const char *s)
{
	buf_reserve(b, strlen(s) * 2 + 2);
	b->data[b->len++] = '"';
	for (; *s; s++)
	{
		if (*s == '"' || *s == '\\')
			b->data[b->len++] = '\\';
		if (*s == '\'')
			b->data[b->len++] = '\'';
		b->data[b->len++] = *s;
	}
	b->data[b->len++] = '"';
	b->data[b->len] = '\0';
}

/* ---- libpq ------------------------------------------------------------------ */

PGconn *
db_connect(const char *dbname)
{
	const char *keys[] = {"dbname", "fallback_application_name", "options", NULL};
	const char *vals[] = {dbname, "gangsched-replay", "-c client_min_messages=warning", NULL};
	PGconn	   *conn = PQconnectdbParams(keys, vals, 0);

	if (PQstatus(conn) != CONNECTION_OK)
		die("cannot connect to database \"%s\": %s(the server is named by PGHOST, PGPORT and PGUSER)",
			dbname, PQerrorMessage(conn));
	return conn;
}

static void
report_error(PGresult *res, const char *sql)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);

	fprintf(stderr, "gangsched-replay: SQL error %s: %s", state ? state : "?",
			PQresultErrorMessage(res));
	if (detail)
		fprintf(stderr, "  detail: %s\n", detail);
	if (hint)
		fprintf(stderr, "  hint: %s\n", hint);
	fprintf(stderr, "  statement: %.600s%s\n", sql, strlen(sql) > 600 ? " ..." : "");
	exit(2);
}

/* One statement (or several, returning the last result); dies on error. */
PGresult *
db_exec(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		report_error(res, sql);
	return res;
}

void
db_command(PGconn *conn, const char *sql)
{
	PQclear(db_exec(conn, sql));
}

/*
 * Several statements in one round trip (one implicit transaction); every
 * statement's result is kept, in order, up to max. Returns how many.
 */
int
db_exec_many(PGconn *conn, const char *sql, PGresult **results, int max)
{
	PGresult   *res;
	int			n = 0;
	PGresult   *failed = NULL;

	if (!PQsendQuery(conn, sql))
		die("cannot send a query: %s", PQerrorMessage(conn));
	while ((res = PQgetResult(conn)) != NULL)
	{
		ExecStatusType st = PQresultStatus(res);

		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		{
			if (failed == NULL)
				failed = res;
			else
				PQclear(res);
			continue;
		}
		if (n < max)
			results[n++] = res;
		else
			PQclear(res);
	}
	if (failed)
		report_error(failed, sql);
	return n;
}

void
db_clear_many(PGresult **results, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		PQclear(results[i]);
}

/* ---- timestamps --------------------------------------------------------------- */

void
format_ts(char *out, size_t len, int64_t epoch_s)
{
	time_t		t = (time_t) epoch_s;
	struct tm	tm;

	gmtime_r(&t, &tm);
	strftime(out, len, "%Y-%m-%d %H:%M:%S+00", &tm);
}

/* Seconds since the Unix epoch of "YYYY-MM-DD[ HH:MM[:SS]]" in UTC. */
int64_t
parse_epoch(const char *s)
{
	int			y,
				mo,
				d,
				h = 0,
				mi = 0,
				se = 0;
	int64_t		days;
	int			n = sscanf(s, "%d-%d-%d%*[ T]%d:%d:%d", &y, &mo, &d, &h, &mi, &se);

	if (n < 3 || mo < 1 || mo > 12 || d < 1 || d > 31)
		die("invalid --start \"%s\": use YYYY-MM-DD or YYYY-MM-DD HH:MM:SS (UTC)", s);
	/* days from civil, proleptic Gregorian */
	y -= mo <= 2;
	{
		int64_t		era = (y >= 0 ? y : y - 399) / 400;
		int64_t		yoe = y - era * 400;
		int64_t		doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
		int64_t		doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

		days = era * 146097 + doe - 719468;
	}
	return days * 86400 + h * 3600 + mi * 60 + se;
}
