/*-------------------------------------------------------------------------
 *
 * store_stats.c
 *		The counters of rollout_stat_stores: what this cluster's writer and
 *		maintenance did to each store, and the last error.
 *
 * The counters live in the store's shared slot (shared_store.h), so every
 * backend and the sweeper add to the same ones; the view copies them
 * (sql/stat_view.c).  Without preloading there are no slots and nothing is
 * counted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "rollout/store_stats.h"

/*
 * Count one flush, merge, compaction or garbage collection of the store
 * and keep its duration as the last one, for rollout_stat_stores (see
 * store_stats.h).  Without preloading, or without a slot, nothing counts.
 */
void
shared_store_note_event(RolloutStore *store, SharedStoreEvent event,
						int64 duration_us)
{
	SharedStoreSlot *slot = shared_store_lookup(store);

	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (store_slot_is_current(store, slot))
	{
		slot->events[event]++;
		slot->event_last_us[event] = duration_us;
	}
	LWLockRelease(&slot->lock);
}

/* The error's count, message and time, under the slot's lock. */
static void
slot_note_error(SharedStoreSlot *slot, const char *message)
{
	slot->errors++;
	strlcpy(slot->last_error, message, SLOT_ERROR_LEN);
	slot->last_error_at = GetCurrentTimestamp();
}

/*
 * Count an error of the slot's store and keep its message, cut to
 * SLOT_ERROR_LEN bytes, and its time as the last error, for
 * rollout_stat_stores.  A NULL slot records nothing.
 */
void
shared_store_note_error(SharedStoreSlot *slot, const char *message)
{
	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	slot_note_error(slot, message);
	LWLockRelease(&slot->lock);
}

void
shared_store_note_cache_reads(RolloutStore *store,
							  const ReadCacheCounters *before,
							  const ReadCacheCounters *after)
{
	SharedStoreSlot *slot;

	/* the slot is looked up only when there is something to add to it */
	if (after->hits == before->hits && after->misses == before->misses)
		return;
	slot = shared_store_lookup(store);
	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (store_slot_is_current(store, slot))
	{
		slot->cache_hits += after->hits - before->hits;
		slot->cache_misses += after->misses - before->misses;
		slot->cache_hit_bytes += after->hit_bytes - before->hit_bytes;
		slot->cache_miss_bytes += after->miss_bytes - before->miss_bytes;
	}
	LWLockRelease(&slot->lock);
}

/*
 * An error about a store that was opened, recorded in its slot alone, if the
 * slot has stood for that store since its namespace generation was
 * `generation` (a slot may be given to another store meanwhile; the error
 * then goes nowhere but the log).  Other stores of the same location string
 * (another endpoint, other credentials) keep their own counts.
 */
void
shared_store_note_error_if_same(SharedStoreSlot *slot, uint64 generation,
								const char *message)
{
	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (shared_store_slot_generation(slot) == generation)
		slot_note_error(slot, message);
	LWLockRelease(&slot->lock);
}

/*
 * Copy the counters of every slot in use into a palloc'd array, in slot order,
 * and return how many; without preloading *stats_out is NULL and 0 is
 * returned.  Each slot is copied under its own lock: a row is consistent in
 * itself, but the rows are not taken at one instant.
 */
int
shared_store_stats(SharedStoreStats **stats_out)
{
	SharedStoreStats *stats;
	int			count = 0;

	SharedStoreSlot *slots;
	int			nslots = shared_store_slots(&slots);

	*stats_out = NULL;
	if (nslots == 0)
		return 0;
	stats = palloc0(sizeof(SharedStoreStats) * nslots);
	for (int i = 0; i < nslots; i++)
	{
		SharedStoreSlot *slot = &slots[i];
		SharedStoreStats *s = &stats[count];

		LWLockAcquire(&slot->lock, LW_SHARED);
		if (slot->in_use)
		{
			strlcpy(s->location, slot->location, sizeof(s->location));
			strlcpy(s->store, slot->store, sizeof(s->store));
			strlcpy(s->shard, slot->shard, sizeof(s->shard));
			s->writer_epoch = slot->epoch;
			s->wal_tip = slot->tip;
			s->rows_appended = slot->rows_appended;
			s->rows_deleted = slot->rows_deleted;
			s->bytes_appended = slot->bytes_appended;
			s->transactions_committed = slot->transactions_committed;
			s->transactions_failed = slot->transactions_failed;
			s->wal_puts = slot->wal_puts;
			s->wal_puts_pipelined = slot->wal_puts_pipelined;
			s->wal_fillers = slot->wal_fillers;
			s->put_time_total_us = slot->put_time_total_us;
			s->put_time_max_us = slot->put_time_max_us;
			s->memtable_rows = slot->mem_rows;
			s->memtable_bytes = slot->mem_bytes;
			s->memtable_batches = slot->mem_batches;
			s->backpressure_waits = slot->backpressure_waits;
			s->flushes = slot->events[SHARED_EVENT_FLUSH];
			s->merges = slot->events[SHARED_EVENT_MERGE];
			s->compactions = slot->events[SHARED_EVENT_COMPACTION];
			s->gc_runs = slot->events[SHARED_EVENT_GC];
			s->last_flush_us = slot->event_last_us[SHARED_EVENT_FLUSH];
			s->last_merge_us = slot->event_last_us[SHARED_EVENT_MERGE];
			s->last_compaction_us = slot->event_last_us[SHARED_EVENT_COMPACTION];
			s->last_gc_us = slot->event_last_us[SHARED_EVENT_GC];
			s->errors = slot->errors;
			strlcpy(s->last_error, slot->last_error, sizeof(s->last_error));
			s->last_error_at = slot->last_error_at;
			s->cache_hits = slot->cache_hits;
			s->cache_misses = slot->cache_misses;
			s->cache_hit_bytes = slot->cache_hit_bytes;
			s->cache_miss_bytes = slot->cache_miss_bytes;
			count++;
		}
		LWLockRelease(&slot->lock);
	}
	*stats_out = stats;
	return count;
}
