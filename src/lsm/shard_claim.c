/*-------------------------------------------------------------------------
 *
 * shard_claim.c
 *		Claim this cluster's shard of a store for writing: a new writer
 *		epoch, the cluster's timeline, and a fence marker (DESIGN.md §8).
 *
 * A claim makes this cluster the shard's one live writer and stops any
 * previous one:
 *	1. replay: flush whatever is durable in the WAL, so the new epoch starts
 *	   right after the last entry and a claim that then fails has not fenced
 *	   a healthy writer for nothing;
 *	2. commit the shard manifest with writer_epoch + 1, this cluster's
 *	   timeline and epoch_start_position = replay_after + 1;
 *	3. create a fence marker (a WAL entry without rows) at that position.
 * WAL positions are written strictly one after the other, so a previous
 * writer's next entry can only go to the fence's position: it finds the
 * fence of a newer epoch there and stops.
 *
 * Timelines.  A standby has its primary's system identifier and so its
 * shard.  Promoted, it writes on a new, higher timeline; the claim records
 * it, and from then on a cluster on a lower timeline (the old primary, if it
 * still runs) is refused every write of the shard instead of reclaiming it
 * (rollout_check_not_superseded).  Two clusters on the same timeline that
 * share a shard id by mistake still fence each other, as before.
 *
 * Who claims: with the shared-memory writer, the first commit after startup
 * and a writer reopening after a fence (shared_writer.c); without it, a
 * commit of a cluster that was promoted since the shard's last claim
 * (commit.c).  Otherwise plain writers of one cluster share the manifest's
 * epoch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "rollout/flush.h"
#include "rollout/manifest.h"
#include "rollout/rollout_fdw.h"
#include "rollout/shard_claim.h"
#include "rollout/wal.h"

/* Rounds of flush + claim while the WAL keeps growing under the claim. */
#define SHARD_CLAIM_ATTEMPTS	5

/*
 * A claim from a higher timeline than the shard's last one means this
 * cluster was promoted (or restored from a backup) since.  For a store in
 * the embedded default location that means it is this data directory's copy
 * of the store, as old as the base backup: the rows the old primary
 * committed after it are not there, and writing on would fork the store's
 * history for good.  Refuse; an explicit file:// location naming the same
 * folder is the way to say that this copy is the store from now on.
 */
static void
shard_check_default_location_copy(RolloutStore *store, ShardManifest *manifest)
{
	if (!store->location_is_default ||
		manifest->writer_timeline >= rollout_writer_timeline())
		return;
	/* a shard that never wrote has nothing that could be stale */
	if (manifest->version == 0 && wal_list_after(store, store->shard, 0) == NIL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("store \"%s\" in the embedded default location was last written on timeline %lld, but this server is on timeline %lld",
					store->name, (long long) manifest->writer_timeline,
					(long long) rollout_writer_timeline()),
			 errdetail("The embedded default is a folder of the data directory. This server was promoted or restored since, so its copy of the store is as old as the base backup it came from, and rows committed after it are not in it."),
			 errhint("Keep stores that survive a failover at a shared location. To continue with this copy, give the server an explicit location naming the folder: ALTER SERVER ... OPTIONS (ADD location '%s').",
					 store->location)));
}

/* Create the fence marker (a WAL entry without rows) at key. */
static ObjectStoreCreateResult
shard_write_fence(RolloutStore *store, const WalEntryMetadata *fence,
				  const char *key)
{
	char	   *path = rollout_scratch_file_path("fence");
	ObjectStoreCreateResult created;

	PG_TRY();
	{
		wal_write_entry_file(store, NIL, fence, path);
		created = objstore_create_from_file_if_absent(store->objstore, key, path,
													  fence->put_id);
	}
	PG_FINALLY();
	{
		(void) unlink(path);
	}
	PG_END_TRY();
	return created;
}

ShardClaim
shard_claim(RolloutStore *store, bool only_for_new_timeline,
			volatile bool *superseded)
{
	ShardClaim	claim = {0};

	if (superseded != NULL)
		*superseded = false;

	rollout_check_writable(store, "claim a shard of");
	rollout_store_ensure_created(store);
	rollout_store_register_shard(store);

	for (int attempt = 0; attempt < SHARD_CLAIM_ATTEMPTS; attempt++)
	{
		ShardManifest *manifest;
		WalEntryMetadata fence = {0};
		char	   *key;
		int64		position;
		ObjectStoreCreateResult created;

		/* a cluster superseded by a promoted standby flushes nothing either */
		manifest = shard_manifest_read_latest(store, store->shard);
		if (superseded != NULL)
			*superseded = manifest->writer_timeline > rollout_writer_timeline();
		rollout_check_not_superseded(store, manifest->writer_timeline);

		/*
		 * A backend of this cluster claimed for our timeline since (several
		 * commit at once after a promotion; the manifest commit below lets
		 * only one of them through): its epoch is ours, claiming again
		 * would fence its writes.
		 */
		if (only_for_new_timeline &&
			manifest->writer_timeline == rollout_writer_timeline())
		{
			claim.epoch = manifest->writer_epoch;
			return claim;
		}
		shard_check_default_location_copy(store, manifest);

		(void) rollout_flush_shard(store);
		manifest = shard_manifest_read_for_update(store);
		if (wal_contiguous_prefix(wal_list_after(store, store->shard,
												 manifest->replay_after),
								  manifest->replay_after) != NIL)
			continue;			/* a write landed meanwhile: flush it too */

		manifest->writer_epoch++;
		manifest->writer_timeline = rollout_writer_timeline();
		manifest->epoch_start_position = manifest->replay_after + 1;
		if (shard_manifest_commit(store, manifest) != MANIFEST_COMMITTED)
			continue;

		fence.kind = "fence";
		fence.shard = store->shard;
		fence.epoch = manifest->writer_epoch;
		fence.stamp = Max(wal_next_stamp(), manifest->last_stamp + 1);
		fence.put_id = objstore_new_put_id();
		fence.transactions = 0;
		position = manifest->replay_after + 1;
		key = rollout_key_wal(store, store->shard, position);
		created = shard_write_fence(store, &fence, key);

		if (created == OBJSTORE_CREATED)
		{
			claim.epoch = fence.epoch;
			claim.fence_position = position;
			claim.stamp = fence.stamp;
			store->wal_tip_hint = position;
			return claim;
		}

		/*
		 * The previous writer's last entry landed at the fence position just
		 * before our fence: a committed entry, to flush on the next round.
		 * A newer epoch there means another cluster claimed after us.
		 */
		if (wal_read_metadata(store, key, position)->epoch > fence.epoch)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("shard \"%s\" of store \"%s\" was claimed by another writer while this cluster claimed it",
							store->shard, store->name),
					 errhint("Give each cluster its own rollout_fdw.shard_id.")));
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not claim shard \"%s\" of store \"%s\": its WAL kept changing",
					store->shard, store->name),
			 errhint("Another cluster is writing this shard. Give each cluster its own rollout_fdw.shard_id.")));
	return claim;				/* keep compiler quiet */
}
