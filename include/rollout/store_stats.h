/*-------------------------------------------------------------------------
 *
 * store_stats.h
 *		The counters of rollout_stat_stores, kept in the stores' shared
 *		slots (core/store_stats.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_STORE_STATS_H
#define ROLLOUT_STORE_STATS_H

#include "rollout/read_cache.h"
#include "rollout/shared_store.h"

/* Counters for rollout_stat_stores. */
typedef enum SharedStoreEvent
{
	SHARED_EVENT_FLUSH,
	SHARED_EVENT_MERGE,
	SHARED_EVENT_COMPACTION,
	SHARED_EVENT_GC
} SharedStoreEvent;

/*
 * Count an event of store and keep its duration as the last one, in the
 * store's slot if it has one and the slot still stands for the store when
 * its lock is taken.
 */
extern void shared_store_note_event(RolloutStore *store, SharedStoreEvent event,
									int64 duration_us);
extern void shared_store_note_error(SharedStoreSlot *slot, const char *message);
extern void shared_store_note_error_if_same(SharedStoreSlot *slot,
											uint64 generation,
											const char *message);

/*
 * Count what a scan of store found in the disk cache (the difference of two
 * ReadCacheCounters) in the store's slot, if it has one and the slot still
 * stands for the store when its lock is taken (it may have gone to another
 * store since the handle found it).
 */
extern void shared_store_note_cache_reads(RolloutStore *store,
										  const ReadCacheCounters *before,
										  const ReadCacheCounters *after);

/* One row of rollout_stat_stores per slot in use. */
typedef struct SharedStoreStats
{
	char		location[1024];
	char		store[256];
	char		shard[72];
	int64		writer_epoch;
	int64		wal_tip;
	int64		rows_appended;
	int64		rows_deleted;
	int64		bytes_appended;
	int64		transactions_committed;
	int64		transactions_failed;
	int64		wal_puts;
	int64		wal_puts_pipelined;
	int64		wal_fillers;
	int64		put_time_total_us;
	int64		put_time_max_us;
	int64		memtable_rows;
	int64		memtable_bytes;
	int64		memtable_batches;
	int64		backpressure_waits;
	int64		flushes;
	int64		merges;
	int64		compactions;
	int64		gc_runs;
	int64		last_flush_us;
	int64		last_merge_us;
	int64		last_compaction_us;
	int64		last_gc_us;
	int64		errors;
	char		last_error[256];
	TimestampTz last_error_at;
	int64		cache_hits;
	int64		cache_misses;
	int64		cache_hit_bytes;
	int64		cache_miss_bytes;
} SharedStoreStats;

/* Copy the stats of every slot in use; returns the count. */
extern int	shared_store_stats(SharedStoreStats **stats);

#endif							/* ROLLOUT_STORE_STATS_H */
