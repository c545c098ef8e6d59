/*-------------------------------------------------------------------------
 *
 * store_snapshot.c
 *		Take the set of objects a read sees, in the order DESIGN.md §5 fixes.
 *
 * The order is what makes a read safe against a concurrent merge:
 *	1. every shard's newest manifest;
 *	2. the base manifest;
 *	3. per shard, the generations newer than base.merged[shard];
 *	4. the WAL entries after each shard's replay_after, up to the first hole
 *	   (this cluster's shard always, the others only when the table asks for
 *	   read_wal_tail); for this cluster's shard the memtable instead, when
 *	   the shared-memory writer holds it (copied first, see below).
 * A merge commits the base manifest (adding its fragment and raising
 * merged[shard] to G) before the shard manifest that drops generations <= G.
 * Because the shard manifests are read first, seeing a shard manifest without
 * those generations implies the base we read afterwards already has the
 * fragment.  The other interleavings see the generations (skipped by
 * merged[shard] when the new base is seen) or both the generations and the
 * fragment (the same versions twice, removed by deduplication).  A row can
 * appear twice, never vanish.  Read in the opposite order, an old base and a
 * new shard manifest would lose the merged rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "rollout/fault.h"
#include "rollout/memtable.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_snapshot.h"
#include "rollout/wal.h"

/*
 * Step 3 of snapshot_take: each shard's generations that base has not
 * folded in yet, as sources.
 */
static void
snapshot_add_generations(RolloutSnapshot *snapshot, List *manifests,
						 const BaseManifest *base)
{
	ListCell   *lc;

	foreach(lc, manifests)
	{
		ShardManifest *manifest = lfirst(lc);
		int64		merged = base_manifest_merged_generation(base, manifest->shard);
		ListCell   *gc;

		foreach(gc, manifest->generations)
		{
			GenerationEntry *generation = lfirst(gc);
			SnapshotSource *source;

			if (generation->number <= merged)
				continue;
			source = snapshot_source_new(SNAPSHOT_GENERATION);
			source->key = generation->file;
			source->shard = manifest->shard;
			source->shard_hash = rollout_shard_hash(manifest->shard);
			source->position = generation->last_position;
			source->rows = generation->rows;
			source->bytes = generation->bytes > 0 ? generation->bytes : -1;
			source->has_key_range = generation->has_key_range;
			source->min_key = generation->min_key;
			source->max_key = generation->max_key;
			source->stamp_fixed = generation->stamp > 0 ? generation->stamp : -1;
			source->max_ts = generation->stamp > 0 ? generation->stamp : generation->max_ts;
			snapshot->sources = lappend(snapshot->sources, source);
			snapshot->generation_count++;
		}
	}
}

/*
 * Take store's snapshot in the order the file header explains.  Besides that
 * order: this cluster's memtable is copied before anything else and stands in
 * for its own shard's WAL tail when the writer is ready; every WAL tail read
 * from the store is cut at its first hole; and each shard's first WAL entry
 * gets the manifest's last_stamp as its stamp floor, so that the readers'
 * running maximum of stamps goes on from where the last flush left it.
 * With count_only the memtable is only counted (store_snapshot.h).
 * Everything is allocated in CurrentMemoryContext.
 */
static RolloutSnapshot *
snapshot_take(RolloutStore *store, bool all_wal_tails, bool count_only)
{
	RolloutSnapshot *snapshot = palloc0(sizeof(RolloutSnapshot));
	List	   *shards = rollout_store_list_shards(store);
	List	   *manifests = NIL;
	BaseManifest *base;
	ListCell   *lc;
	SharedStoreSlot *slot = shared_store_lookup(store);
	List	   *memtable = NIL;
	bool		have_memtable = false;

	/*
	 * 0. This cluster's memtable, before any manifest.  A flush commits the
	 * shard manifest and only then drops the batches it sealed, so batches
	 * copied now are either still unflushed or in a generation of the
	 * manifest read next (read twice at worst, deduplicated).  Copied after
	 * the manifest, a flush in between could hide them from both.
	 */
	if (slot != NULL && count_only)
	{
		SnapshotSource *rows = snapshot_source_new(SNAPSHOT_MEMTABLE);

		have_memtable = memtable_rows(slot, &rows->rows);
		rows->position = PG_INT64_MAX;	/* after any replay_after */
		memtable = list_make1(rows);
	}
	else if (slot != NULL)
		have_memtable = memtable_sources(store, slot, &memtable,
										 &snapshot->truncate_stamp);

	/* the own shard may not be registered yet; it then has nothing to read */

	/* 1. every shard manifest (their documents in one batch) */
	manifests = shard_manifests_read_latest(store, shards);
	snapshot->shard_count = list_length(shards);

	foreach(lc, manifests)
		snapshot->truncate_stamp = Max(snapshot->truncate_stamp,
									   ((ShardManifest *) lfirst(lc))->truncate_stamp);

	rollout_fault_point("snapshot.after_shard_manifests");

	/* 2. the base manifest */
	base = base_manifest_read_latest(store);
	snapshot->base_version = base->version;
	snapshot->truncate_stamp = Max(snapshot->truncate_stamp, base->truncate_stamp);
	foreach(lc, base->fragments)
	{
		FragmentEntry *fragment = lfirst(lc);
		SnapshotSource *source = snapshot_source_new(SNAPSHOT_FRAGMENT);

		source->key = fragment->file;
		source->rows = fragment->rows;
		source->bytes = fragment->bytes > 0 ? fragment->bytes : -1;
		source->has_key_range = fragment->has_key_range;
		source->min_key = fragment->min_key;
		source->max_key = fragment->max_key;
		source->stamp_floor = -1;
		source->max_ts = fragment->max_ts;
		snapshot->sources = lappend(snapshot->sources, source);
		snapshot->fragment_count++;
	}

	/* 3. generations not yet folded into the base */
	snapshot_add_generations(snapshot, manifests, base);

	/* 4. WAL tails */
	foreach(lc, manifests)
	{
		ShardManifest *manifest = lfirst(lc);
		List	   *entries;
		ListCell   *ec;

		if (have_memtable && strcmp(manifest->shard, store->shard) == 0)
		{
			/* everything after replay_after is in the memtable */
			foreach(ec, memtable)
			{
				SnapshotSource *source = lfirst(ec);

				if (source->position <= manifest->replay_after)
					continue;
				snapshot->sources = lappend(snapshot->sources, source);
				snapshot->wal_entry_count++;

				/*
				 * a batch committed under other credentials is read from the
				 * store
				 */
				if (source->kind == SNAPSHOT_WAL_ENTRY)
					snapshot->wal_object_count++;
			}
			continue;
		}
		if (!all_wal_tails && strcmp(manifest->shard, store->shard) != 0)
			continue;

		/*
		 * Only the run without holes: a listing racing with commits can show
		 * p+2 before p+1, and a reader must not see a later commit without an
		 * earlier one.  Every commit that returned before this listing began
		 * is inside the run.
		 */
		entries = wal_contiguous_prefix(wal_list_after(store, manifest->shard,
													   manifest->replay_after),
										manifest->replay_after);
		foreach(ec, entries)
		{
			WalEntryRef *entry = lfirst(ec);
			SnapshotSource *source = snapshot_source_new(SNAPSHOT_WAL_ENTRY);

			source->key = entry->key;
			source->shard = manifest->shard;
			source->shard_hash = rollout_shard_hash(manifest->shard);
			source->position = entry->position;
			source->rows = -1;
			source->bytes = entry->size > 0 ? entry->size : -1;
			source->stamp_floor = foreach_current_index(ec) == 0 ? manifest->last_stamp : -1;
			snapshot->sources = lappend(snapshot->sources, source);
			snapshot->wal_entry_count++;
			snapshot->wal_object_count++;
		}
	}
	return snapshot;
}

RolloutSnapshot *
rollout_snapshot_take(RolloutStore *store, bool all_wal_tails)
{
	return snapshot_take(store, all_wal_tails, false);
}

RolloutSnapshot *
rollout_snapshot_take_for_counting(RolloutStore *store, bool all_wal_tails)
{
	return snapshot_take(store, all_wal_tails, true);
}
