/*-------------------------------------------------------------------------
 *
 * shared_writer.h
 *		The per-shard writer in shared memory: group commit, the memtable,
 *		epochs and fencing, and the counters of rollout_stat_stores
 *		(DESIGN.md §6.2, §6.4, §8, §9).
 *
 * Only with rollout_fdw in shared_preload_libraries.  Without it every
 * function here reports "not available" (rollout_shared_available() is
 * false) and the callers use the direct path: each committing backend
 * writes its own WAL entry, scans read the WAL tail from the store.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SHARED_WRITER_H
#define ROLLOUT_SHARED_WRITER_H

#include "rollout/merge_read.h"
#include "rollout/wal.h"

/* Settings (PGC_POSTMASTER ones are defined only when preloading). */
extern int	rollout_memtable_size_kb;
extern int	rollout_max_stores;
extern int	rollout_commit_delay_us;

typedef struct SharedStoreSlot SharedStoreSlot;

/* _PG_init, when preloading: ask for shared memory and set up the hooks. */
extern void rollout_shared_init(void);

/* Is the shared-memory writer available in this server? */
extern bool rollout_shared_available(void);

/*
 * The shared slot of this cluster's shard of store (found or created), or
 * NULL when shared memory is not available or every slot is taken (then a
 * WARNING says so once, and the direct path is used).
 */
extern SharedStoreSlot *shared_store_slot(RolloutStore *store);

/* The same without creating a slot (readers); NULL if there is none. */
extern SharedStoreSlot *shared_store_lookup(RolloutStore *store);

/*
 * Group commit: make one transaction's rows (a row blob, possibly empty) and
 * ingest references durable as part of the shard's next WAL entry, written
 * by whichever committing backend is the leader.  Returns the position.
 * Waits when the memtable is full (back-pressure).  ERROR if the entry
 * could not be written; then nothing of the transaction is visible.
 */
extern int64 shared_store_commit(RolloutStore *store, SharedStoreSlot *slot,
								 StringInfo rows, int64 row_count,
								 List *ingest);

/* Has this cluster claimed the shard (so the memtable holds its tail)? */
extern bool shared_writer_is_ready(SharedStoreSlot *slot);

/* The largest transaction (row bytes) the memtable takes without ingest. */
extern int64 shared_store_max_transaction_bytes(void);

/*
 * The memtable as snapshot sources (SNAPSHOT_MEMTABLE and, for ingest
 * references, SNAPSHOT_INGEST), copied into local memory, for batches with
 * position > after.  Returns false (and nothing) when the shard's writer is
 * not ready, i.e. the WAL tail must be read from the store.
 */
extern bool shared_memtable_sources(RolloutStore *store, SharedStoreSlot *slot,
									List **sources);

/*
 * For flush: every memtable batch as sources (memtable rows only) plus the
 * ingest references to adopt; *last_position and *last_stamp of the newest
 * batch.  Returns false when the writer is not ready or the memtable empty.
 */
extern bool shared_memtable_for_flush(RolloutStore *store, SharedStoreSlot *slot,
									  List **sources, List **ingest_seen,
									  int64 *last_position, int64 *last_stamp);

/* Drop batches up to position (after their flush committed). */
extern void shared_memtable_trim(SharedStoreSlot *slot, int64 upto_position);

/* Serialise flushes of a shard across all backends and databases. */
extern void shared_flush_begin(SharedStoreSlot *slot);
extern void shared_flush_end(SharedStoreSlot *slot);

/* Counters for rollout_stat_stores. */
typedef enum SharedStoreEvent
{
	SHARED_EVENT_FLUSH,
	SHARED_EVENT_MERGE,
	SHARED_EVENT_COMPACTION,
	SHARED_EVENT_GC
} SharedStoreEvent;

extern void shared_store_note_event(SharedStoreSlot *slot, SharedStoreEvent event,
									int64 duration_us);
extern void shared_store_note_error(SharedStoreSlot *slot, const char *message);

/* The same for a store that could not even be opened. */
extern void shared_store_note_error_by_name(const char *location,
											const char *store_name,
											const char *shard,
											const char *message);

/*
 * The rows in the memtable, those of the ingest segments it names included;
 * false when the writer is not ready (the WAL tail is then only on the
 * store).
 */
extern bool shared_memtable_rows(SharedStoreSlot *slot, int64 *rows);

/* The memtable's age: when its oldest batch became durable (0 if empty). */
extern TimestampTz shared_memtable_oldest(SharedStoreSlot *slot, int64 *bytes);

/* One row of rollout_stat_stores per slot in use. */
typedef struct SharedStoreStats
{
	char		location[1024];
	char		store[256];
	char		shard[72];
	int64		writer_epoch;
	int64		wal_tip;
	int64		rows_appended;
	int64		bytes_appended;
	int64		transactions_committed;
	int64		transactions_failed;
	int64		wal_puts;
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
} SharedStoreStats;

/* Copy the stats of every slot in use; returns the count. */
extern int	shared_store_stats(SharedStoreStats **stats);

#endif							/* ROLLOUT_SHARED_WRITER_H */
