/*
 * tenancy.c — the caller's identity and the fixed search_path.
 *
 * gangsched's API is SECURITY DEFINER functions owned by the extension's
 * owner, so inside them current_user is that owner. The role checks need
 * the role that called them. PostgreSQL keeps it only in
 * fmgr_security_definer's stack frame, so an fmgr_hook (called at the start
 * and end of every security-definer function, after its user switch) keeps
 * a stack of the effective user of each such frame and whether the function
 * is gangsched's. The caller is the effective user of the innermost frame
 * that is not gangsched's, or, with none, the session's current role at top
 * level (GetOuterUserId: SET ROLE and SET SESSION AUTHORIZATION count). A
 * tenant's own SECURITY DEFINER function calling gangsched is therefore
 * seen as its owner, as PostgreSQL itself would see it.
 *
 * The stack is complete only if the hook was installed before any function
 * ran, i.e. when gangsched is in shared_preload_libraries; otherwise only
 * superusers are recognised (and told why others are refused).
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "tenancy.h"

#define GS_MAX_FRAMES 256

typedef struct GsFrame
{
	Oid			userid;			/* effective user inside the frame */
	bool		ours;			/* a function of the gangsched schema */
} GsFrame;

static GsFrame frames[GS_MAX_FRAMES];
static int	nframes = 0;
static int	overflow = 0;		/* frames beyond GS_MAX_FRAMES */
static bool tracking_complete = false;
static Oid	gs_namespace = InvalidOid;

static fmgr_hook_type prev_fmgr_hook = NULL;

static bool
is_gangsched_function(Oid fn)
{
	Oid			nsp = get_func_namespace(fn);

	if (!OidIsValid(gs_namespace) || nsp != gs_namespace)
		gs_namespace = get_namespace_oid("gangsched", true);
	return OidIsValid(nsp) && nsp == gs_namespace;
}

static void
gs_fmgr_hook(FmgrHookEventType event, FmgrInfo *flinfo, Datum *arg)
{
	switch (event)
	{
		case FHET_START:
			if (nframes < GS_MAX_FRAMES)
			{
				frames[nframes].userid = GetUserId();
				frames[nframes].ours = is_gangsched_function(flinfo->fn_oid);
				nframes++;
			}
			else
				overflow++;
			break;
		case FHET_END:
		case FHET_ABORT:
			if (overflow > 0)
				overflow--;
			else if (nframes > 0)
				nframes--;
			break;
	}
	if (prev_fmgr_hook)
		prev_fmgr_hook(event, flinfo, arg);
}

/* A transaction that ends by error may skip FHET_ABORT on FATAL paths only; reset anyway. */
static void
gs_tenancy_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PARALLEL_COMMIT)
	{
		nframes = 0;
		overflow = 0;
	}
}

void
gs_tenancy_init(void)
{
	tracking_complete = process_shared_preload_libraries_in_progress;
	/* security-definer functions always go through fmgr_hook */
	prev_fmgr_hook = fmgr_hook;
	fmgr_hook = gs_fmgr_hook;
	RegisterXactCallback(gs_tenancy_xact_callback, NULL);
}

Oid
gs_caller(void)
{
	Oid			caller = InvalidOid;

	if (InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("gangsched functions cannot run inside a security-restricted operation"),
				 errdetail("Index expressions, materialized view refreshes and maintenance commands run as another role."),
				 errhint("Call gangsched's functions directly.")));
	if (overflow > 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("security-definer functions are nested too deeply to tell who is calling"),
				 errhint("Call gangsched's functions with fewer than %d security-definer functions around them.",
						 GS_MAX_FRAMES)));
	for (int i = nframes - 1; i >= 0; i--)
	{
		if (!frames[i].ours)
		{
			caller = frames[i].userid;
			break;
		}
	}
	if (!OidIsValid(caller))
		caller = GetOuterUserId();
	if (!tracking_complete && !superuser_arg(caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("gangsched cannot check the roles of non-superusers in this server"),
				 errdetail("gangsched is not in shared_preload_libraries, so it cannot tell which role calls it."),
				 errhint("Add gangsched to shared_preload_libraries and restart the server.")));
	return caller;
}

bool
gs_caller_is_operator(void)
{
	Oid			caller = gs_caller();
	Oid			op;

	if (superuser_arg(caller))
		return true;
	op = get_role_oid("gangsched_operator", true);
	return OidIsValid(op) && is_member_of_role(caller, op);
}

void
gs_require_operator(const char *action)
{
	if (!gs_caller_is_operator())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s", action),
				 errdetail("Role \"%s\" is not a gangsched operator.", GetUserNameFromId(gs_caller(), false)),
				 errhint("An operator is a superuser or a member of gangsched_operator: GRANT gangsched_operator TO role.")));
}

int
gs_fix_search_path(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", GS_SAFE_SEARCH_PATH, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

void
gs_restore_search_path(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
}

/* SQL: gangsched._caller() — the calling role's oid (see above). */
PG_FUNCTION_INFO_V1(gs_caller_sql);
Datum
gs_caller_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(gs_caller());
}

/* SQL: gangsched._caller_name() — the calling role's name. */
PG_FUNCTION_INFO_V1(gs_caller_name_sql);
Datum
gs_caller_name_sql(PG_FUNCTION_ARGS)
{
	Name		result = (Name) palloc0(NAMEDATALEN);

	namestrcpy(result, GetUserNameFromId(gs_caller(), false));
	PG_RETURN_NAME(result);
}

/* SQL: gangsched._require_operator(action) — ERROR 42501 unless an operator. */
PG_FUNCTION_INFO_V1(gs_require_operator_sql);
Datum
gs_require_operator_sql(PG_FUNCTION_ARGS)
{
	gs_require_operator(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_VOID();
}

/* SQL: gangsched._is_operator() — whether the caller may act as an operator. */
PG_FUNCTION_INFO_V1(gs_is_operator_sql);
Datum
gs_is_operator_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(gs_caller_is_operator());
}
