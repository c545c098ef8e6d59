/*-------------------------------------------------------------------------
 *
 * observe.c
 *		Counts and sizes of a store: cheap from metadata, exact on request.
 *
 * The cheap count reads no data, only metadata: base rows (fragments), the
 * rows of generations not yet merged, and the rows of durable WAL entries
 * not yet flushed.  Those are in no manifest: the memtable knows them when
 * this cluster's shared-memory writer holds the tail, and otherwise each WAL
 * entry's footer says how many rows it (and the ingest segments it names)
 * holds, read for all entries in batches of concurrent requests.  It counts
 * versions, so it is an upper bound of the distinct keys that becomes exact
 * once merges and a full compaction have removed shadowed versions, and it
 * never falls below the rows a scan would return.
 *
 * The exact count is what SELECT count(*) returns: the deduplicating read
 * over the same snapshot, decoding only the key and version columns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "rollout/manifest.h"
#include "rollout/memtable.h"
#include "rollout/merge_read.h"
#include "rollout/observe.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/snapshot.h"
#include "rollout/store_snapshot.h"
#include "rollout/store_sources.h"
#include "rollout/wal.h"

/*
 * WAL entries whose footers say how many rows they hold, in position order
 * per shard, each with the running epoch its shard's run starts from (the
 * first entry of a run; -1 for the others): see wal_entry_count_live_rows.
 */
typedef struct WalFooters
{
	int			count;
	int			capacity;
	char	  **keys;
	int64	   *sizes;
	int64	   *epoch_floors;
} WalFooters;

static void
wal_footers_add(WalFooters *footers, char *key, int64 size, int64 epoch_floor)
{
	if (footers->count == footers->capacity)
	{
		footers->capacity = Max(16, footers->capacity * 2);
		footers->keys = footers->keys
			? repalloc(footers->keys, sizeof(char *) * footers->capacity)
			: palloc(sizeof(char *) * footers->capacity);
		footers->sizes = footers->sizes
			? repalloc(footers->sizes, sizeof(int64) * footers->capacity)
			: palloc(sizeof(int64) * footers->capacity);
		footers->epoch_floors = footers->epoch_floors
			? repalloc(footers->epoch_floors, sizeof(int64) * footers->capacity)
			: palloc(sizeof(int64) * footers->capacity);
	}
	footers->keys[footers->count] = key;
	footers->sizes[footers->count] = size;
	footers->epoch_floors[footers->count++] = epoch_floor;
}

/*
 * The rows of the live entries among footers (dead ones hold none a read
 * returns), their footers fetched in batches of concurrent requests.
 */
static int64
wal_footers_count_rows(RolloutStore *store, WalFooters *footers)
{
	WalLiveRows live = {0};

	live.epoch_floors = footers->epoch_floors;
	rollout_segment_footers(store, footers->keys, footers->sizes, footers->count,
							wal_entry_count_live_rows, &live);
	return live.rows;
}

/*
 * Observe store (observe.h).  The cheap count reads in a snapshot's order, the
 * memtable first, then the shard manifests, then the base, so that a
 * concurrent flush or merge can make rows count twice but never vanish.  The
 * exact count is a deduplicating read of a fresh snapshot that decodes no user
 * column; the unflushed rows are then recounted from that snapshot's sources,
 * while the base and generation rows still come from the manifests read first.
 */
ObserveResult
rollout_observe_store(RolloutStore *store, bool exact, bool all_wal_tails)
{
	ObserveResult result = {0};
	List	   *shards = rollout_store_list_shards(store);
	List	   *manifests = NIL;
	BaseManifest *base;
	ListCell   *lc;
	SharedStoreSlot *slot = shared_store_lookup(store);
	WalFooters	footers = {0};

	/*
	 * The memtable first, as a snapshot does: a flush commits the shard
	 * manifest before it drops the batches it sealed, so rows counted here
	 * are either still unflushed or in a generation of the manifest read next
	 * (counted twice at worst, never missed).  Read after the manifests, a
	 * flush in between would hide them from both counts.
	 */
	if (slot != NULL && memtable_rows(store, slot, &result.unflushed_rows))
		result.unflushed_known = true;
	else
		result.unflushed_rows = 0;

	/* the same order as a snapshot: shard manifests, then the base */
	manifests = shard_manifests_read_latest(store, shards);
	base = base_manifest_read_latest(store);

	result.base_version = base->version;
	result.fragments = list_length(base->fragments);
	foreach(lc, base->fragments)
	{
		FragmentEntry *fragment = lfirst(lc);

		result.base_rows += fragment->rows;
		result.bytes += fragment->bytes;
	}

	foreach(lc, manifests)
	{
		ShardManifest *manifest = lfirst(lc);
		int64		merged = base_manifest_merged_generation(base, manifest->shard);
		bool		own = strcmp(manifest->shard, store->shard) == 0;
		ListCell   *gc;

		if (own)
			result.writer_epoch = manifest->writer_epoch;
		foreach(gc, manifest->generations)
		{
			GenerationEntry *generation = lfirst(gc);

			if (generation->number <= merged)
				continue;
			result.generations++;
			result.generation_rows += generation->rows;
			result.bytes += generation->bytes;
		}
		if (own || all_wal_tails)
		{
			List	   *entries = wal_list_after(store, manifest->shard,
												 manifest->replay_after);
			ListCell   *ec;

			result.wal_entries += list_length(entries);
			foreach(ec, entries)
				result.bytes += ((WalEntryRef *) lfirst(ec))->size;

			/*
			 * Durable rows no manifest counts: the WAL entries a scan reads
			 * (the run without holes), whose footers say how many rows they
			 * hold.  This cluster's are in the memtable when it knows them.
			 */
			if (own && result.unflushed_known)
				continue;
			foreach(ec, wal_contiguous_prefix(entries, manifest->replay_after))
				wal_footers_add(&footers, ((WalEntryRef *) lfirst(ec))->key,
								((WalEntryRef *) lfirst(ec))->size,
								foreach_current_index(ec) == 0 ? manifest->sealed_epoch : -1);
		}
	}

	/* (the exact count below counts the unflushed rows of its own snapshot) */
	if (!exact)
		result.unflushed_rows += wal_footers_count_rows(store, &footers);
	result.unflushed_known = true;

	if (exact)
	{
		RolloutSnapshot *snapshot = rollout_snapshot_take(store, all_wal_tails);
		bool	   *want = palloc0(sizeof(bool) * store->schema.ncolumns);
		Datum	   *values = palloc0(sizeof(Datum) * store->schema.ncolumns);
		bool	   *isnull = palloc0(sizeof(bool) * store->schema.ncolumns);
		MergeReadOptions options = {0};
		MergeRead  *read;

		options.keep_tombstones = false;
		options.follow_ingest = true;
		read = merge_read_begin(store, snapshot, want, NULL, &options);
		footers.count = 0;

		while (merge_read_next(read, values, isnull))
			result.exact_row_count++;
		merge_read_end(read);
		result.exact_known = true;

		/*
		 * unflushed rows: memtable batches and the ingest segments they name
		 * know theirs; WAL entries say it in their footers
		 */
		result.unflushed_rows = 0;
		foreach(lc, snapshot->sources)
		{
			SnapshotSource *source = lfirst(lc);

			if (source->kind == SNAPSHOT_MEMTABLE || source->kind == SNAPSHOT_INGEST)
				result.unflushed_rows += Max(source->rows, 0);
			else if (source->kind == SNAPSHOT_WAL_ENTRY)
				wal_footers_add(&footers, source->key, source->bytes,
								source->epoch_floor);
		}
		result.unflushed_rows += wal_footers_count_rows(store, &footers);
	}
	result.row_count = result.base_rows + result.generation_rows +
		result.unflushed_rows;
	return result;
}
