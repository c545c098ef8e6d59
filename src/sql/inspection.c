/*-------------------------------------------------------------------------
 *
 * inspection.c
 *		SQL-callable read-only views of a store: rollout_observe,
 *		rollout_should_compact, rollout_compaction_stats.
 *
 * These need only SELECT on the table: they read manifests (and, for the
 * exact count, the key columns), never change anything.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "rollout/fdw.h"
#include "rollout/manifest.h"
#include "rollout/observe.h"
#include "rollout/sql_common.h"

PG_FUNCTION_INFO_V1(rollout_observe);
PG_FUNCTION_INFO_V1(rollout_should_compact);
PG_FUNCTION_INFO_V1(rollout_compaction_stats);

/*
 * rollout_observe(tbl regclass, exact boolean DEFAULT false)
 * returns (row_count bigint, exact_row_count bigint, base_rows bigint,
 *			fragments int, generations int, generation_rows bigint,
 *			unflushed_rows bigint, bytes bigint, base_version bigint,
 *			writer_epoch bigint, wal_entries int)
 */
Datum
rollout_observe(PG_FUNCTION_ARGS)
{
	Relation	rel;
	bool		exact;
	ObserveResult result;
	Datum		values[11];
	bool		nulls[11] = {0};

	rollout_require_argument(fcinfo, 1, "rollout_observe", "exact");
	exact = PG_GETARG_BOOL(1);
	rel = rollout_open_table_argument(fcinfo, "rollout_observe", ROLLOUT_ACCESS_READ);
	result = rollout_observe_store(rollout_store_for_reading(rel, GetUserId()), exact,
								   rollout_table_options(RelationGetRelid(rel))->read_wal_tail);
	table_close(rel, AccessShareLock);

	values[0] = Int64GetDatum(result.row_count);
	values[1] = Int64GetDatum(result.exact_row_count);
	nulls[1] = !result.exact_known;
	values[2] = Int64GetDatum(result.base_rows);
	values[3] = Int32GetDatum(result.fragments);
	values[4] = Int32GetDatum(result.generations);
	values[5] = Int64GetDatum(result.generation_rows);
	values[6] = Int64GetDatum(result.unflushed_rows);
	nulls[6] = !result.unflushed_known;
	values[7] = Int64GetDatum(result.bytes);
	values[8] = Int64GetDatum(result.base_version);
	values[9] = Int64GetDatum(result.writer_epoch);
	values[10] = Int32GetDatum(result.wal_entries);
	PG_RETURN_DATUM(rollout_sql_result_row(fcinfo, values, nulls));
}

/*
 * Parse quiet hours "HH-HH" (UTC, 0..23, the end exclusive; "22-06" wraps
 * past midnight).
 */
static void
parse_quiet_hours(const char *text, int *start, int *end)
{
	int			consumed = 0;

	if (sscanf(text, "%d-%d%n", start, end, &consumed) != 2 ||
		(size_t) consumed != strlen(text) ||
		*start < 0 || *start > 23 || *end < 0 || *end > 23 || *start == *end)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid quiet_hours \"%s\"", text),
				 errdetail("Quiet hours are two different UTC hours from 0 to 23 written as start-end, for example '22-06'; the end hour is not quiet.")));
}

static bool
hour_is_quiet(int hour, int start, int end)
{
	if (start < end)
		return hour >= start && hour < end;
	return hour >= start || hour < end;
}

/*
 * rollout_should_compact(tbl regclass, min_fragments int DEFAULT 5,
 *						  quiet_hours text DEFAULT NULL) returns boolean
 *
 * A gate for schedulers: true when the base has at least min_fragments
 * fragments (the outputs of one compaction counting as one, as for
 * rollout_compact) and the current UTC hour is outside the quiet hours.
 */
Datum
rollout_should_compact(PG_FUNCTION_ARGS)
{
	Relation	rel;
	int			min_fragments;
	BaseManifest *base;
	bool		quiet = false;

	rollout_require_argument(fcinfo, 1, "rollout_should_compact", "min_fragments");
	min_fragments = PG_GETARG_INT32(1);
	if (min_fragments < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_fragments must not be negative")));
	if (!PG_ARGISNULL(2))
	{
		int			start;
		int			end;
		struct pg_tm tm;
		fsec_t		fsec;

		parse_quiet_hours(text_to_cstring(PG_GETARG_TEXT_PP(2)), &start, &end);
		if (timestamp2tm(GetCurrentTimestamp(), NULL, &tm, &fsec, NULL, NULL) != 0)
			elog(ERROR, "could not convert the current time");
		quiet = hour_is_quiet(tm.tm_hour, start, end);
	}
	rel = rollout_open_table_argument(fcinfo, "rollout_should_compact", ROLLOUT_ACCESS_READ);
	base = base_manifest_read_latest(rollout_store_for_reading(rel, GetUserId()));
	table_close(rel, AccessShareLock);
	PG_RETURN_BOOL(!quiet && fragment_run_count(base->fragments) >= min_fragments);
}

/*
 * rollout_compaction_stats(tbl regclass)
 * returns (fragments int, total_compactions bigint,
 *			last_compaction timestamptz, last_error text)
 *
 * Kept in the base manifest, so every cluster sees the same history.
 */
Datum
rollout_compaction_stats(PG_FUNCTION_ARGS)
{
	Relation	rel = rollout_open_table_argument(fcinfo, "rollout_compaction_stats",
												  ROLLOUT_ACCESS_READ);
	BaseManifest *base = base_manifest_read_latest(rollout_store_for_reading(rel, GetUserId()));
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	table_close(rel, AccessShareLock);
	values[0] = Int32GetDatum(list_length(base->fragments));
	values[1] = Int64GetDatum(base->total_compactions);
	if (base->last_compaction != NULL)
		values[2] = DirectFunctionCall3(timestamptz_in,
										CStringGetDatum(base->last_compaction),
										ObjectIdGetDatum(InvalidOid),
										Int32GetDatum(-1));
	else
		nulls[2] = true;
	if (base->last_compaction_error != NULL)
		values[3] = CStringGetTextDatum(base->last_compaction_error);
	else
		nulls[3] = true;
	PG_RETURN_DATUM(rollout_sql_result_row(fcinfo, values, nulls));
}
