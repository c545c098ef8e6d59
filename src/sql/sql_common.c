/*-------------------------------------------------------------------------
 *
 * sql_common.c
 *		Argument checks and result rows shared by the SQL-callable functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"

#include "rollout/fdw.h"
#include "rollout/sql_common.h"

/*
 * See sql_common.h.  The maintenance functions are not STRICT, because some of
 * their arguments may be NULL (meaning a default), so each checks those that
 * may not.
 */
void
rollout_require_argument(FunctionCallInfo fcinfo, int n, const char *function,
						 const char *name)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" of %s must not be NULL", name, function)));
}

/*
 * See sql_common.h.  The checks run before the lock is taken; the ownership
 * check of ROLLOUT_ACCESS_MAINTAIN also accepts superusers and members of the
 * owning role.  The caller closes the relation with AccessShareLock.
 */
Relation
rollout_open_table_argument(FunctionCallInfo fcinfo, const char *function,
							RolloutTableAccess access)
{
	Oid			relid;

	rollout_require_argument(fcinfo, 0, function, "tbl");
	relid = PG_GETARG_OID(0);
	rollout_check_is_rollout_table(relid);
	if (access == ROLLOUT_ACCESS_MAINTAIN)
	{
		if (!pg_class_ownercheck(relid, GetUserId()))
			aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_FOREIGN_TABLE, get_rel_name(relid));
	}
	else
	{
		AclResult	aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);

		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_FOREIGN_TABLE, get_rel_name(relid));
	}
	if (access == ROLLOUT_ACCESS_READ &&
		rollout_table_options(relid)->as_of != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s cannot read foreign table \"%s\": it reads the named snapshot of its option as_of",
						function, get_rel_name(relid)),
				 errdetail("%s shows the store as it is now, which the table does not.",
						   function),
				 errhint("Call it with a table of the same store without as_of.")));
	return table_open(relid, AccessShareLock);
}

/* Build the result row of a function returning a composite. */
Datum
rollout_sql_result_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}
