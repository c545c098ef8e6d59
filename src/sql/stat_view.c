/*-------------------------------------------------------------------------
 *
 * stat_view.c
 *		rollout_stat_stores: one row per store (and shard) this cluster has
 *		touched since startup, from the shared-memory writer's counters.
 *
 * Without shared_preload_libraries there is no shared state and the view
 * is empty.  Locations are shown as given (they never hold credentials:
 * those live in user mappings).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "rollout/store_stats.h"

PG_FUNCTION_INFO_V1(rollout_stat_stores);

/*
 * Version 0.6 of the SQL definitions has all of them; 0.5 lacks the last
 * two (the pipeline's), 0.3 and 0.4 the last three (rows_deleted), 0.2 the
 * last seven (and the disk cache's).  A database still at an older version
 * gets the columns it declares.
 */
#define STAT_STORES_COLUMNS 35

/*
 * The set-returning function behind the rollout_stat_stores view: one row per
 * shared store slot in use, from a copy of the counters taken under each
 * slot's lock.  Microsecond timings are shown in milliseconds; the mean PUT
 * latency is NULL before the first PUT, and the last error and its time are
 * NULL when there was none.  The columns must match the function's OUT
 * parameters in the extension's SQL script, in order.
 */
Datum
rollout_stat_stores(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SharedStoreStats *stats;
	int			count;

	InitMaterializedSRF(fcinfo, 0);
	count = shared_store_stats(&stats);
	for (int i = 0; i < count; i++)
	{
		SharedStoreStats *s = &stats[i];
		Datum		values[STAT_STORES_COLUMNS];
		bool		nulls[STAT_STORES_COLUMNS] = {0};
		int			c = 0;

		values[c++] = CStringGetTextDatum(s->location);
		values[c++] = CStringGetTextDatum(s->store);
		values[c++] = CStringGetTextDatum(s->shard);
		values[c++] = Int64GetDatum(s->writer_epoch);
		values[c++] = Int64GetDatum(s->wal_tip);
		values[c++] = Int64GetDatum(s->rows_appended);
		values[c++] = Int64GetDatum(s->bytes_appended);
		values[c++] = Int64GetDatum(s->transactions_committed);
		values[c++] = Int64GetDatum(s->transactions_failed);
		values[c++] = Int64GetDatum(s->wal_puts);
		if (s->wal_puts > 0)
			values[c++] = Float8GetDatum((double) s->put_time_total_us / s->wal_puts / 1000.0);
		else
			nulls[c++] = true;
		values[c++] = Float8GetDatum((double) s->put_time_max_us / 1000.0);
		values[c++] = Int64GetDatum(s->memtable_rows);
		values[c++] = Int64GetDatum(s->memtable_bytes);
		values[c++] = Int64GetDatum(s->memtable_batches);
		values[c++] = Int64GetDatum(s->backpressure_waits);
		values[c++] = Int64GetDatum(s->flushes);
		values[c++] = Float8GetDatum((double) s->last_flush_us / 1000.0);
		values[c++] = Int64GetDatum(s->merges);
		values[c++] = Float8GetDatum((double) s->last_merge_us / 1000.0);
		values[c++] = Int64GetDatum(s->compactions);
		values[c++] = Float8GetDatum((double) s->last_compaction_us / 1000.0);
		values[c++] = Int64GetDatum(s->gc_runs);
		values[c++] = Float8GetDatum((double) s->last_gc_us / 1000.0);
		if (s->last_error[0] != '\0')
		{
			values[c++] = CStringGetTextDatum(s->last_error);
			values[c++] = TimestampTzGetDatum(s->last_error_at);
		}
		else
		{
			nulls[c++] = true;
			nulls[c++] = true;
		}
		values[c++] = BoolGetDatum(rollout_shared_available());
		values[c++] = Int64GetDatum(s->errors);
		values[c++] = Int64GetDatum(s->cache_hits);
		values[c++] = Int64GetDatum(s->cache_misses);
		values[c++] = Int64GetDatum(s->cache_hit_bytes);
		values[c++] = Int64GetDatum(s->cache_miss_bytes);
		values[c++] = Int64GetDatum(s->rows_deleted);
		values[c++] = Int64GetDatum(s->wal_puts_pipelined);
		values[c++] = Int64GetDatum(s->wal_fillers);
		Assert(c == STAT_STORES_COLUMNS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
