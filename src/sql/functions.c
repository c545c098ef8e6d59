/*-------------------------------------------------------------------------
 *
 * functions.c
 *		SQL-callable maintenance functions: rollout_flush().
 *
 * Each function checks that its argument is a rollout table the caller
 * owns before it touches the store.
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
#include "utils/rel.h"

#include "rollout/fdw.h"
#include "rollout/flush.h"

PG_FUNCTION_INFO_V1(rollout_flush);

/*
 * Open a rollout table for maintenance: it must be one of ours, and the
 * caller must own it (or be a member of the owning role).
 */
static Relation
rollout_open_for_maintenance(FunctionCallInfo fcinfo, const char *function)
{
	Oid			relid;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: the table must not be NULL", function)));
	relid = PG_GETARG_OID(0);
	rollout_check_is_rollout_table(relid);
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_FOREIGN_TABLE, get_rel_name(relid));
	return table_open(relid, AccessShareLock);
}

/*
 * rollout_flush(tbl regclass) returns (rows_flushed bigint, generation bigint)
 *
 * Seal this cluster's durable WAL tail of the table's store into one
 * generation.  generation is NULL when there was nothing to flush.
 */
Datum
rollout_flush(PG_FUNCTION_ARGS)
{
	Relation	rel = rollout_open_for_maintenance(fcinfo, "rollout_flush");
	RolloutStore *store = rollout_store_for_relation(rel);
	FlushResult result;
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	result = rollout_flush_shard(store);
	table_close(rel, AccessShareLock);

	values[0] = Int64GetDatum(result.rows_flushed);
	values[1] = Int64GetDatum(result.generation);
	nulls[1] = result.generation == 0;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
