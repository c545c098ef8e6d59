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
 * new shard manifest would lose the merged rows.  One interleaving is taken
 * again: a flush and a merge of the same shard, both between steps 1 and 2,
 * leave a base that folded in a generation the shard manifest read does not
 * know, while that manifest's WAL tail still holds the generation's rows;
 * a compaction may have dropped them from the base with the tombstone that
 * hid them, so they would come back (rollout_manifests_form_a_cut).
 *
 * Steps 1 and 2 need no request when this cluster's view of the store's
 * manifest versions (manifest_view.c) is recent enough and the parsed
 * versions are in this backend's cache (manifest_cache.c): the view holds
 * versions that are consistent in exactly the sense above, only possibly
 * older than the store's (by at most rollout_fdw.manifest_refresh_interval
 * for other clusters' commits; this cluster's own it knows at once).  A
 * snapshot that also reads other shards' WAL tails (read_wal_tail) always
 * lists, since it promises to see other clusters' commits as they land.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/datum.h"
#include "utils/timestamp.h"

#include "rollout/fault.h"
#include "rollout/manifest_cache.h"
#include "rollout/manifest_view.h"
#include "rollout/memtable.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_definition.h"
#include "rollout/store_snapshot.h"
#include "rollout/wal.h"

/* A copy of a key value of store, for a source that outlives a manifest. */
static Datum
snapshot_copy_key(RolloutStore *store, Datum value)
{
	const SegmentColumn *column = &store->schema.columns[store->key_column];

	return datumCopy(value, column->typbyval, column->typlen);
}

/*
 * Do these manifests form a cut a read may take (store_snapshot.h)?  Every
 * generation the base folded in must be one its shard's manifest knows: a
 * flush and a merge that both commit between the listing of the shard
 * manifests and that of the base would otherwise leave the reader the WAL
 * entries the flush sealed (after the old replay_after) beside a base that
 * holds their rows already.  Read twice, those versions would only be
 * deduplicated, but a compaction may since have dropped them with the
 * tombstone that shadowed them (lsm/tombstone_horizon.c counts only WAL
 * entries after the manifests it read): the deleted row would come back.
 * Only the shards whose WAL tail is read matter (wal_shard, or every shard
 * when it is NULL): of the others a read takes the generations after the
 * base's mark, and an older manifest beside a newer base only lists fewer.
 */
bool
rollout_manifests_form_a_cut(const ShardManifest **manifests, int count,
							 const BaseManifest *base, const char *wal_shard)
{
	for (int i = 0; i < count; i++)
	{
		if (wal_shard != NULL && strcmp(manifests[i]->shard, wal_shard) != 0)
			continue;
		if (base_manifest_merged_generation(base, manifests[i]->shard) >=
			manifests[i]->next_generation)
			return false;
	}
	return true;
}

/* See store_snapshot.h. */
bool
rollout_manifests_name_merged_shards(const ShardManifest **manifests, int count,
									 const BaseManifest *base)
{
	ListCell   *lc;

	foreach(lc, base->merged)
	{
		MergedMark *mark = lfirst(lc);
		bool		listed = false;

		for (int i = 0; i < count && !listed; i++)
			listed = strcmp(manifests[i]->shard, mark->shard) == 0;
		if (!listed && mark->generation > 0)
			return false;
	}
	return true;
}

/*
 * Steps 1 and 2 from the view: the shard ids, their manifests and the base
 * manifest at the versions this cluster knows, when the view is recent
 * enough and every version can still be read; false otherwise.
 */
static bool
snapshot_manifests_from_view(RolloutStore *store, List **shards,
							 const ShardManifest ***manifests,
							 const BaseManifest **base, const char *wal_shard)
{
	ManifestVersions versions;

	if (!manifest_view_lookup(store, &versions))
		return false;
	if (!manifest_cache_read(store, &versions, manifests, base) ||
		!rollout_manifests_form_a_cut(*manifests, list_length(versions.shards), *base,
									  wal_shard))
		return false;
	*shards = versions.shards;
	return true;
}

/*
 * Steps 1 and 2 from the store: list the shards and the newest version of
 * each shard manifest, then the newest base version, then read them (from
 * the cache where it has them), and tell the view what was found.  Listing
 * the base after the shard manifests is what the order above asks: the
 * versions are fixed by the listings, and a version's contents never
 * change.  A version that vanished between listing and reading (garbage
 * collection never removes the newest, so a newer one exists), or listings
 * that are no cut for the WAL tails of wal_shard (every shard when NULL;
 * rollout_manifests_form_a_cut), make it list again.
 */
static void
snapshot_manifests_from_store(RolloutStore *store, List **shards,
							  const ShardManifest ***manifests,
							  const BaseManifest **base,
							  ManifestVersions *listed, const char *wal_shard)
{
	for (int attempt = 1;; attempt++)
	{
		TimestampTz started_at = GetCurrentTimestamp();
		ManifestVersions versions;
		ListCell   *lc;
		bool		read;

		versions.shards = rollout_store_list_shards(store);
		versions.shard_versions = palloc(sizeof(int64) *
										 Max(list_length(versions.shards), 1));
		foreach(lc, versions.shards)
			versions.shard_versions[foreach_current_index(lc)] =
			shard_manifest_newest_version(store, lfirst(lc));

		rollout_fault_point("snapshot.after_shard_manifests");

		versions.base_version = base_manifest_newest_version(store);
		read = manifest_cache_read(store, &versions, manifests, base);
		if (read && rollout_manifests_form_a_cut(*manifests, list_length(versions.shards),
												 *base, wal_shard))
		{
			manifest_view_publish(store, started_at, &versions);
			*shards = versions.shards;
			if (listed != NULL)
				*listed = versions;
			return;
		}
		if (attempt < 5)
			continue;
		/* versions vanishing because the store was deleted: say that instead */
		rollout_store_check_current(store, 0);
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not read a stable set of manifests of store \"%s\"",
						store->name),
				 read ?
				 errdetail("Flushes and merges committed between the reads of the shard and base manifests %d times in a row.",
						   attempt) :
				 errdetail("Manifest versions kept vanishing between their listing and their reading."),
				 errhint("Retry.")));
	}
}

/* See store_snapshot.h. */
SnapshotSource *
rollout_snapshot_generation_source(RolloutStore *store, const char *shard,
								   const GenerationEntry *generation)
{
	SnapshotSource *source = snapshot_source_new(SNAPSHOT_GENERATION);

	source->key = pstrdup(generation->file);
	source->shard = pstrdup(shard);
	source->shard_hash = rollout_shard_hash(shard);
	source->position = generation->last_position;
	source->rows = generation->rows;
	source->bytes = generation->bytes > 0 ? generation->bytes : -1;
	source->has_key_range = generation->has_key_range;
	if (generation->has_key_range)
	{
		source->min_key = snapshot_copy_key(store, generation->min_key);
		source->max_key = snapshot_copy_key(store, generation->max_key);
	}
	source->stamp_fixed = generation->stamp > 0 ? generation->stamp : -1;
	source->max_ts = generation_newest_stamp(generation);
	source->min_ts = generation->stamp > 0 ? generation->stamp : generation->min_ts;
	return source;
}

/* See store_snapshot.h. */
SnapshotSource *
rollout_snapshot_wal_source(const char *shard, const WalEntryRef *entry,
							int64 stamp_floor, int64 epoch_floor)
{
	SnapshotSource *source = snapshot_source_new(SNAPSHOT_WAL_ENTRY);

	source->key = entry->key;
	source->shard = pstrdup(shard);
	source->shard_hash = rollout_shard_hash(shard);
	source->position = entry->position;
	source->rows = -1;
	source->bytes = entry->size > 0 ? entry->size : -1;
	source->stamp_floor = stamp_floor;
	source->epoch_floor = epoch_floor;
	return source;
}

/*
 * Step 3 of snapshot_take: each shard's generations that base has not
 * folded in yet, as sources (copied out of the manifests, which belong to
 * the manifest cache).
 */
static void
snapshot_add_generations(RolloutStore *store, RolloutSnapshot *snapshot,
						 const ShardManifest **manifests, int count,
						 const BaseManifest *base)
{
	for (int i = 0; i < count; i++)
	{
		const ShardManifest *manifest = manifests[i];
		int64		merged = base_manifest_merged_generation(base, manifest->shard);
		const char *shard = manifest->shard;
		ListCell   *gc;

		foreach(gc, manifest->generations)
		{
			GenerationEntry *generation = lfirst(gc);
			SnapshotSource *source;

			if (generation->number <= merged)
				continue;
			source = rollout_snapshot_generation_source(store, shard, generation);
			snapshot->sources = lappend(snapshot->sources, source);
			snapshot->generation_count++;
		}
	}
}

/*
 * Steps 2 and 3 of snapshot_take once the manifests are read: the truncate
 * cut they know, the base's fragments and the generations it has not folded
 * in yet, as sources copied out of the manifests (which belong to the
 * manifest cache).
 */
static void
snapshot_add_manifests(RolloutStore *store, RolloutSnapshot *snapshot,
					   List *shards, const ShardManifest **manifests,
					   const BaseManifest *base)
{
	ListCell   *lc;

	snapshot->shard_count = list_length(shards);
	for (int i = 0; i < snapshot->shard_count; i++)
		snapshot->truncate_stamp = Max(snapshot->truncate_stamp,
									   manifests[i]->truncate_stamp);

	snapshot->base_version = base->version;
	snapshot->truncate_stamp = Max(snapshot->truncate_stamp, base->truncate_stamp);
	foreach(lc, base->fragments)
	{
		FragmentEntry *fragment = lfirst(lc);
		SnapshotSource *source = snapshot_source_new(SNAPSHOT_FRAGMENT);

		source->key = pstrdup(fragment->file);
		source->rows = fragment->rows;
		source->bytes = fragment->bytes > 0 ? fragment->bytes : -1;
		source->has_key_range = fragment->has_key_range;
		if (fragment->has_key_range)
		{
			source->min_key = snapshot_copy_key(store, fragment->min_key);
			source->max_key = snapshot_copy_key(store, fragment->max_key);
		}
		source->stamp_floor = -1;
		source->max_ts = fragment->max_ts;
		source->min_ts = fragment->min_ts;
		source->disjoint_set = fragment->disjoint_set == NULL ? NULL
			: pstrdup(fragment->disjoint_set);
		snapshot->sources = lappend(snapshot->sources, source);
		snapshot->fragment_count++;
	}

	/* generations not yet folded into the base */
	snapshot_add_generations(store, snapshot, manifests, snapshot->shard_count,
							 base);
}

/*
 * The WAL entries of manifest's shard after its replay_after, in position
 * order.  Only the run without holes: a listing racing with commits can show
 * p+2 before p+1, and a reader must not see a later commit without an
 * earlier one.  Every commit that returned before this listing began is
 * inside the run.  This cluster's own shard, read without its memtable, may
 * be known empty from the shared view instead (manifest_view.h), except for
 * a table that reads every WAL tail at once; *own_source says which it was.
 */
static List *
snapshot_wal_tail(RolloutStore *store, const ShardManifest *manifest,
				  bool all_wal_tails, const char **own_source)
{
	bool		own = strcmp(manifest->shard, store->shard) == 0;
	WalTailLook look = {0};
	List	   *entries;

	if (own && !all_wal_tails)
	{
		if (manifest_view_wal_tail_empty(store, manifest->replay_after))
		{
			*own_source = "shared view";
			return NIL;
		}
		manifest_view_wal_tail_look(store, &look);
	}
	if (own)
		*own_source = "listed";
	entries = wal_contiguous_prefix(wal_list_after(store, manifest->shard,
												   manifest->replay_after),
									manifest->replay_after);
	if (entries == NIL && look.recordable)
		manifest_view_wal_tail_found_empty(store, &look, manifest->replay_after);
	return entries;
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
	List	   *shards = NIL;
	const ShardManifest **manifests;
	const BaseManifest *base;
	SharedStoreSlot *slot = shared_store_lookup(store);
	List	   *memtable = NIL;
	bool		have_memtable = false;
	const char *wal_shard = all_wal_tails ? NULL : store->shard;

	/*
	 * 0. This cluster's memtable, before any manifest.  A flush commits the
	 * shard manifest (and records it in the view) and only then drops the
	 * batches it sealed, so batches copied now are either still unflushed or
	 * in a generation of the manifest read next (read twice at worst,
	 * deduplicated).  Copied after the manifest, a flush in between could
	 * hide them from both.
	 */
	rollout_fault_point("snapshot.before_memtable");
	if (slot != NULL && count_only)
	{
		SnapshotSource *rows = snapshot_source_new(SNAPSHOT_MEMTABLE);

		have_memtable = memtable_rows(store, slot, &rows->rows);
		rows->position = PG_INT64_MAX;	/* after any replay_after */
		memtable = list_make1(rows);
	}
	else if (slot != NULL)
		have_memtable = memtable_sources(store, slot, 0, NULL, &memtable,
										 &snapshot->truncate_stamp, NULL);

	/*
	 * 1 and 2. every shard manifest, then the base manifest; the own shard
	 * may not be registered yet, and then has nothing to read
	 */
	snapshot->manifests_from_view = !all_wal_tails &&
		snapshot_manifests_from_view(store, &shards, &manifests, &base, wal_shard);
	if (!snapshot->manifests_from_view)
		snapshot_manifests_from_store(store, &shards, &manifests, &base, NULL, wal_shard);
	snapshot_add_manifests(store, snapshot, shards, manifests, base);

	/* 4. WAL tails */
	for (int i = 0; i < snapshot->shard_count; i++)
	{
		const ShardManifest *manifest = manifests[i];
		List	   *entries;
		ListCell   *ec;

		if (have_memtable && strcmp(manifest->shard, store->shard) == 0)
		{
			/* everything after replay_after is in the memtable */
			snapshot->own_wal_tail = "memtable";
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
		entries = snapshot_wal_tail(store, manifest, all_wal_tails,
									&snapshot->own_wal_tail);
		foreach(ec, entries)
		{
			WalEntryRef *entry = lfirst(ec);
			bool		first = foreach_current_index(ec) == 0;
			SnapshotSource *source;

			source = rollout_snapshot_wal_source(manifest->shard, entry,
												 first ? manifest->last_stamp : -1,
												 first ? manifest->sealed_epoch : -1);
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

void
rollout_snapshot_newest_versions(RolloutStore *store, ManifestVersions *versions)
{
	List	   *shards;
	const ShardManifest **manifests;
	const BaseManifest *base;

	snapshot_manifests_from_store(store, &shards, &manifests, &base, versions, NULL);
}

RolloutSnapshot *
rollout_snapshot_at_versions(RolloutStore *store,
							 const ManifestVersions *versions)
{
	RolloutSnapshot *snapshot;
	const ShardManifest **manifests;
	const BaseManifest *base;

	if (!manifest_cache_read(store, versions, &manifests, &base))
		return NULL;
	snapshot = palloc0(sizeof(RolloutSnapshot));
	snapshot_add_manifests(store, snapshot, versions->shards, manifests, base);
	return snapshot;
}
