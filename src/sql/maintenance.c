/*-------------------------------------------------------------------------
 *
 * maintenance.c
 *		SQL-callable maintenance: rollout_flush, rollout_merge,
 *		rollout_compact, rollout_gc.
 *
 * Each function checks its arguments and that the caller owns the table
 * (or is a member of the owning role) before it touches the store, then
 * calls one lsm operation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "rollout/compact.h"
#include "rollout/fdw.h"
#include "rollout/flush.h"
#include "rollout/gc.h"
#include "rollout/grace.h"
#include "rollout/merge.h"
#include "rollout/observe.h"
#include "rollout/sql_common.h"
#include "rollout/store_definition.h"
#include "rollout/subtransaction.h"

/*
 * The store of a maintenance function's table, opened with the owner's user
 * mapping; the table is closed, and its lock released, before the work
 * begins.  A flush, merge, compaction or gc acts on the store, which the
 * table only names (a DROP or ALTER of the table meanwhile changes nothing
 * the handle holds, kept to the end of the transaction: fdw/store_cache.c).
 * Holding the table's lock through minutes of work made an ALTER or TRUNCATE
 * of it wait, and every INSERT queue behind that one: a merge stalling
 * appends after all.
 */
static RolloutStore *
maintenance_store(Relation rel)
{
	RolloutStore *store = rollout_store_for_relation_as_owner(rel);

	table_close(rel, AccessShareLock);
	return store;
}

PG_FUNCTION_INFO_V1(rollout_flush);
PG_FUNCTION_INFO_V1(rollout_merge);
PG_FUNCTION_INFO_V1(rollout_compact);
PG_FUNCTION_INFO_V1(rollout_gc);

/*
 * rollout_flush(tbl regclass) returns (rows_flushed bigint, generation bigint)
 *
 * Seal this cluster's durable WAL tail of the table's store into one
 * generation.  generation is NULL when there was nothing to flush.
 */
Datum
rollout_flush(PG_FUNCTION_ARGS)
{
	Relation	rel = rollout_open_table_argument(fcinfo, "rollout_flush",
												  ROLLOUT_ACCESS_MAINTAIN);
	FlushResult result = rollout_flush_shard(maintenance_store(rel));
	Datum		values[2];
	bool		nulls[2] = {false, false};

	values[0] = Int64GetDatum(result.rows_flushed);
	values[1] = Int64GetDatum(result.generation);
	nulls[1] = result.generation == 0;
	PG_RETURN_DATUM(rollout_sql_result_row(fcinfo, values, nulls));
}

/*
 * rollout_merge(tbl regclass, max_generations int DEFAULT NULL,
 *				 flush_first boolean DEFAULT true)
 * returns (generations_merged int, rows_merged bigint, fragments_added int)
 */
Datum
rollout_merge(PG_FUNCTION_ARGS)
{
	Relation	rel;
	int			max_generations = 0;
	bool		flush_first = true;
	MergeResult result;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (!PG_ARGISNULL(1))
	{
		max_generations = PG_GETARG_INT32(1);
		if (max_generations < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_generations must be at least 1"),
					 errhint("Pass NULL for no limit.")));
	}
	rollout_require_argument(fcinfo, 2, "rollout_merge", "flush_first");
	flush_first = PG_GETARG_BOOL(2);
	rel = rollout_open_table_argument(fcinfo, "rollout_merge", ROLLOUT_ACCESS_MAINTAIN);

	result = rollout_merge_shard(maintenance_store(rel), max_generations,
								 flush_first);
	values[0] = Int32GetDatum(result.generations_merged);
	values[1] = Int64GetDatum(result.rows_merged);
	values[2] = Int32GetDatum(result.fragments_added);
	PG_RETURN_DATUM(rollout_sql_result_row(fcinfo, values, nulls));
}

/* rollout_compact_recording_errors's step and its result */
typedef struct CompactCall
{
	RolloutStore *store;
	int			min_fragments;
	int64		target_rows;
	int			max_source_fragments;
	const CompactClustering *clustering;
	CompactResult result;
} CompactCall;

static void
compact_step(void *arg)
{
	CompactCall *call = arg;

	call->result = rollout_compact_store(call->store, call->min_fragments,
										 call->target_rows,
										 call->max_source_fragments,
										 call->clustering);
}

/*
 * Run a compaction in a subtransaction, so that a failure can be recorded in
 * the base manifest (rollout_compaction_stats().last_error, which every
 * cluster sees) before it is re-raised.  A cancel is not a compaction error
 * worth keeping.
 */
static CompactResult
rollout_compact_recording_errors(RolloutStore *store, int min_fragments,
								 int64 target_rows, int max_source_fragments,
								 const CompactClustering *clustering)
{
	CompactCall call = {0};
	ErrorData  *error;

	call.store = store;
	call.min_fragments = min_fragments;
	call.target_rows = target_rows;
	call.max_source_fragments = max_source_fragments;
	call.clustering = clustering;
	error = rollout_try_in_subtransaction(compact_step, &call);

	if (error != NULL)
	{
		if (error->sqlerrcode != ERRCODE_QUERY_CANCELED)
			rollout_compaction_record_error(store, error->message);
		ReThrowError(error);
	}
	return call.result;
}

/*
 * rollout_compact(tbl regclass, min_fragments int DEFAULT 5,
 *				   target_rows_per_fragment bigint DEFAULT 1048576,
 *				   max_source_fragments int DEFAULT NULL)
 * returns (fragments_before int, fragments_after int, rows_written bigint,
 *			versions_dropped bigint, skipped_reason text)
 */
Datum
rollout_compact(PG_FUNCTION_ARGS)
{
	Relation	rel;
	int			min_fragments;
	int64		target_rows;
	int			max_source_fragments = 0;
	RolloutStore *store;
	const RolloutTableOptions *options;
	char	   *cluster_by;
	int			cluster_column;
	CompactClustering clustering;
	CompactResult result;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	rollout_require_argument(fcinfo, 1, "rollout_compact", "min_fragments");
	rollout_require_argument(fcinfo, 2, "rollout_compact", "target_rows_per_fragment");
	min_fragments = PG_GETARG_INT32(1);
	target_rows = PG_GETARG_INT64(2);
	if (min_fragments < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_fragments must not be negative")));
	if (target_rows < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target_rows_per_fragment must be at least 1")));
	if (!PG_ARGISNULL(3))
	{
		max_source_fragments = PG_GETARG_INT32(3);
		if (max_source_fragments < 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_source_fragments must be at least 2"),
					 errhint("Pass NULL for no limit.")));
	}
	rel = rollout_open_table_argument(fcinfo, "rollout_compact", ROLLOUT_ACCESS_MAINTAIN);
	options = rollout_table_options(RelationGetRelid(rel));
	store = maintenance_store(rel);
	cluster_by = options->cluster_by;
	if (cluster_by != NULL)
	{
		/*
		 * The event trigger checked the table's column, but it may not have
		 * run (event triggers off); the sample holds plain values, ordered.
		 */
		cluster_column = rollout_store_column_index(store, cluster_by);
		if (cluster_column < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("cluster_by column \"%s\" is not a column of store \"%s\"",
							cluster_by, store->name)));
		if (cluster_column == store->key_column ||
			!store->schema.columns[cluster_column].typbyval ||
			!store->schema.columns[cluster_column].has_order)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("compaction cannot cluster store \"%s\" by column \"%s\"",
							store->name, cluster_by),
					 errhint("Cluster by a column other than the key, of a type such as timestamptz, date or bigint.")));
		clustering.column = cluster_column;
		clustering.max_ranges = options->cluster_ranges;
	}

	result = rollout_compact_recording_errors(store, min_fragments, target_rows,
											  max_source_fragments,
											  cluster_by != NULL ? &clustering : NULL);
	values[0] = Int32GetDatum(result.fragments_before);
	values[1] = Int32GetDatum(result.fragments_after);
	values[2] = Int64GetDatum(result.rows_written);
	values[3] = Int64GetDatum(result.versions_dropped);
	if (result.skipped_reason != NULL)
		values[4] = CStringGetTextDatum(result.skipped_reason);
	else
		nulls[4] = true;
	PG_RETURN_DATUM(rollout_sql_result_row(fcinfo, values, nulls));
}

/*
 * rollout_gc(tbl regclass, grace interval DEFAULT '1 hour')
 * returns (objects_deleted bigint, bytes_freed bigint)
 */
Datum
rollout_gc(PG_FUNCTION_ARGS)
{
	Relation	rel;
	Interval   *grace;
	int64		grace_seconds;
	GcResult	result;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	rollout_require_argument(fcinfo, 1, "rollout_gc", "grace");
	grace = PG_GETARG_INTERVAL_P(1);
	grace_seconds = (int64) (grace->time / USECS_PER_SEC) +
		(int64) grace->day * SECS_PER_DAY +
		(int64) grace->month * DAYS_PER_MONTH * SECS_PER_DAY;
	if (grace_seconds < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("grace must not be negative")));
	if (grace_seconds < gc_min_grace_seconds())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("grace of %lld seconds is shorter than rollout_fdw.min_gc_grace (%d seconds)",
						(long long) grace_seconds, gc_min_grace_seconds()),
				 errdetail("A shorter grace could delete objects a running scan or an uncommitted merge still needs."),
				 errhint("Use a longer grace, or lower rollout_fdw.min_gc_grace in the configuration of every cluster that writes the store.")));
	rel = rollout_open_table_argument(fcinfo, "rollout_gc", ROLLOUT_ACCESS_MAINTAIN);

	result = rollout_gc_store(maintenance_store(rel), grace_seconds, 0);
	values[0] = Int64GetDatum(result.objects_deleted);
	values[1] = Int64GetDatum(result.bytes_freed);
	PG_RETURN_DATUM(rollout_sql_result_row(fcinfo, values, nulls));
}
