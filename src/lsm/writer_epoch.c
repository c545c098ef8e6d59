/*-------------------------------------------------------------------------
 *
 * writer_epoch.c
 *		The shard's writer on this cluster: claiming the shard (epoch,
 *		timeline, fence marker), and, with the shared-memory writer, the
 *		state every committer of the cluster shares about that claim
 *		(DESIGN.md §8).
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
 * share a shard id by mistake still fence each other.
 *
 * Who claims: with the shared-memory writer, the first commit after startup
 * and a writer reopening after a fence (writer_ensure_ready); without it, a
 * commit of a cluster that was promoted since the shard's last claim
 * (commit.c).  Otherwise plain writers of one cluster share the manifest's
 * epoch.  A writer that finds itself fenced reopens once; fenced again, it
 * refuses commits until the server restarts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "utils/timestamp.h"

#include "rollout/fault.h"
#include "rollout/flush.h"
#include "rollout/manifest.h"
#include "rollout/manifest_view.h"
#include "rollout/memtable.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_definition.h"
#include "rollout/store_keys.h"
#include "rollout/wal.h"
#include "rollout/write_proof.h"
#include "rollout/writer_epoch.h"

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

/* Write the fence marker (a WAL entry without rows) at position. */
static WalPutResult
shard_write_fence(RolloutStore *store, const WalEntryMetadata *fence,
				  int64 position, int64 *owner_epoch)
{
	WalEntryImage image;
	WalPutResult put;

	/*
	 * An entry without rows is encoded in memory, never in a scratch file, so
	 * an ERROR leaves nothing behind that the memory context would not free:
	 * no PG_FINALLY is needed.
	 */
	wal_entry_image_init(&image);
	wal_write_entry(store, NIL, fence, &image);
	Assert(image.in_memory);
	put = wal_put_entry(store, position, &image, fence->put_id, fence->epoch,
						owner_epoch, NULL);
	wal_entry_image_discard(&image);
	return put;
}

/*
 * The position after which the writer of a fresh claim writes: its fence's,
 * or past the entries right after the fence that a previous writer's
 * pipeline still landed.  Those are dead (an older epoch after a newer one,
 * never acknowledged; readers skip them, docs/WRITER.md), and passing them
 * here spares the first commits a position that is taken.  A newer epoch
 * there means another cluster claimed after us; an entry of our own epoch
 * is left for the next PUT to meet, as any unexpected entry.
 */
static int64
shard_claim_pass_dead_entries(RolloutStore *store, int64 epoch,
							  int64 fence_position)
{
	int64		tip = fence_position;
	ListCell   *lc;

	foreach(lc, wal_contiguous_prefix(wal_list_after(store, store->shard,
													 fence_position),
									  fence_position))
	{
		WalEntryRef *entry = lfirst(lc);
		WalEntryMetadata *owner = wal_read_metadata(store, entry->key,
													entry->position);

		if (owner->epoch > epoch)
			shard_raise_taken_over(store, entry->position, owner->epoch, epoch);
		if (owner->epoch == epoch)
			break;
		tip = entry->position;
	}
	return tip;
}

/*
 * Claim the shard (writer_epoch.h).  Each round first refuses a cluster
 * superseded by a promoted standby and a stale copy in the default location,
 * then flushes the durable WAL tail, commits the next epoch with
 * epoch_start_position = replay_after + 1, and writes the fence there.  A
 * round starts over when an entry landed after the flush, when the manifest
 * commit loses a race, or when a previous writer's last entry took the fence
 * position (the next round's flush seals it); a newer epoch at the fence
 * position means another cluster claimed after us, an ERROR.
 */
ShardClaim
shard_claim(RolloutStore *store, ShardClaimReason reason, int64 seen_epoch,
			volatile bool *superseded)
{
	ShardClaim	claim = {0};
	bool		epoch_committed = false;

	if (superseded != NULL)
		*superseded = false;

	rollout_check_writable(store, "claim a shard of");
	Assert(store->pending_definition == NULL && store->shard_registered);

	for (int attempt = 0; attempt < SHARD_CLAIM_ATTEMPTS; attempt++)
	{
		ShardManifest *manifest;
		WalEntryMetadata fence = {0};
		int64		position;
		int64		owner_epoch;
		WalPutResult put;

		/* a cluster superseded by a promoted standby flushes nothing either */
		manifest = shard_manifest_read_latest(store, store->shard);
		if (superseded != NULL)
			*superseded = manifest->writer_timeline > rollout_writer_timeline();
		rollout_check_not_superseded(store, manifest->writer_timeline);

		/*
		 * A backend of this cluster claimed for our timeline since (several
		 * commit at once after a promotion; the manifest commit below lets
		 * only one of them through), or fenced the hole another found too:
		 * its epoch is ours, claiming again would fence its writes.  Not once
		 * this claim committed its own epoch, though: a round that lost its
		 * fence position to a previous writer's entry (an older epoch: our
		 * own is handled below) still has to fence, else that writer goes on
		 * appending under the old epoch.
		 */
		if (!epoch_committed &&
			((reason == SHARD_CLAIM_NEW_TIMELINE &&
			  manifest->writer_timeline == rollout_writer_timeline()) ||
			 (reason == SHARD_CLAIM_FENCE_HOLE &&
			  manifest->writer_epoch != seen_epoch)))
		{
			claim.epoch = manifest->writer_epoch;
			return claim;
		}
		shard_check_default_location_copy(store, manifest);

		(void) rollout_flush_shard(store);
		claim.observed_at = GetCurrentTimestamp();
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
		manifest_view_note_shard_commit(store, manifest);
		epoch_committed = true;

		fence.kind = "fence";
		fence.shard = store->shard;
		fence.epoch = manifest->writer_epoch;
		fence.stamp = Max(wal_next_stamp(), manifest->last_stamp + 1);
		fence.put_id = objstore_new_put_id();
		fence.transactions = 0;
		position = manifest->replay_after + 1;
		rollout_fault_point("claim.before_fence");
		put = shard_write_fence(store, &fence, position, &owner_epoch);

		if (put == WAL_PUT_CREATED)
		{
			claim.epoch = fence.epoch;
			claim.manifest_version = manifest->version;
			claim.drops_covered_by_base = manifest->drops_covered_by_base;
			claim.fence_position = position;
			claim.fence_put_id = fence.put_id;
			claim.tip = shard_claim_pass_dead_entries(store, fence.epoch, position);
			claim.stamp = fence.stamp;
			store->wal_tip_hint = claim.tip;
			return claim;
		}

		/*
		 * The previous writer's last entry landed at the fence position just
		 * before our fence: a committed entry, to flush on the next round. A
		 * newer epoch there means another cluster claimed after us.  Our own
		 * epoch there, for a direct commit's claim, is a backend of this
		 * cluster that found the epoch committed and wrote under it: its
		 * entry fences as ours would have, and claiming again would fence it.
		 */
		if (put == WAL_PUT_FENCED)
			shard_raise_taken_over(store, position, owner_epoch, fence.epoch);
		if (reason != SHARD_CLAIM_FOR_WRITER && owner_epoch == fence.epoch)
		{
			claim.epoch = fence.epoch;
			return claim;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not claim shard \"%s\" of store \"%s\": its WAL kept changing",
					store->shard, store->name),
			 errhint("Another cluster is writing this shard. Give each cluster its own rollout_fdw.shard_id.")));
	return claim;				/* keep compiler quiet */
}

/*
 * Claim the shard for this cluster (shard_claim above) and set the slot's
 * epoch, tip and last_stamp (the caller publishes them).  A writer
 * reopening after a fence may still hold batches of its old epoch: they are
 * durable entries, sealed by the claim's replay, so they go.
 */
static void
writer_claim(RolloutStore *store, SharedStoreSlot *slot,
			 volatile bool *superseded)
{
	ShardClaim	claim = shard_claim(store, SHARD_CLAIM_FOR_WRITER, 0, superseded);
	char		access[WRITE_PROOF_ACCESS_LEN];
	Size		access_len;

	memtable_trim(slot, claim.fence_position - 1, claim.manifest_version,
				  claim.drops_covered_by_base);

	/*
	 * What other credentials prove they reach this store by: they read the
	 * fence, and to write they write a probe that this claim's access reads
	 * back (shared_store.c, write_proof.c).
	 */
	access_len = write_proof_keep_access(store, access, sizeof(access));

	/*
	 * Under the lock, as committers read these while they decide whether to
	 * lead (no leader takes a position before the writer is ready, but a
	 * committer must not see half of a claim).
	 */
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	slot->epoch = claim.epoch;
	/* the pipeline drained before the claim (writer_wait_for_pipeline) */
	for (int i = 0; i < WAL_PIPELINE_MAX; i++)
		Assert(slot->pipeline[i].state == PIPELINE_FREE);
	slot->pipeline_broken = false;
	slot->tip = slot->next_position = claim.tip;
	slot->last_stamp = slot->next_stamp = claim.stamp;
	slot->tip_observed_at = claim.observed_at;
	strlcpy(slot->claim_put_id, claim.fence_put_id ? claim.fence_put_id : "",
			SLOT_PUT_ID_LEN);
	slot->claim_position = claim.fence_position;
	explicit_bzero(slot->claim_access, sizeof(slot->claim_access));
	memcpy(slot->claim_access, access, access_len);
	slot->claim_access_len = access_len;
	LWLockRelease(&slot->lock);
	explicit_bzero(access, sizeof(access));
}

/*
 * Wait until no group-commit leader of the previous claim is writing: a
 * claim sets the tip and the epoch that leaders build on, and its fence
 * must come after every entry they may still land.  Their PUTs are bounded.
 */
static void
writer_wait_for_pipeline(SharedStoreSlot *slot)
{
	ConditionVariablePrepareToSleep(&slot->state_cv);
	for (;;)
	{
		int			leaders;

		LWLockAcquire(&slot->lock, LW_SHARED);
		leaders = slot->leaders_active;
		LWLockRelease(&slot->lock);
		if (leaders == 0)
			break;
		ConditionVariableSleep(&slot->state_cv, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
}

/* What a claim that fails, or whose backend exits, leaves its slot in. */
typedef struct ClaimAbandon
{
	SharedStoreSlot *slot;
	volatile bool superseded;	/* taken over by a promoted standby */
} ClaimAbandon;

/*
 * PG_ENSURE_ERROR_CLEANUP callback of a claim: an ERROR, and also a backend
 * that exits in the middle (pg_terminate_backend), must not leave the
 * writer INITIALIZING, which every later commit of the store would wait on.
 * A superseded writer refuses commits for good; otherwise the next commit
 * claims again.
 */
static void
writer_claim_abandon(int code, Datum arg)
{
	ClaimAbandon *abandon = (ClaimAbandon *) DatumGetPointer(arg);
	SharedStoreSlot *slot = abandon->slot;

	/* as shared_flush_end_callback: an ERROR may have come with locks held */
	LWLockReleaseAll();
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	slot->writer_state = abandon->superseded ? WRITER_SUPERSEDED : WRITER_NONE;
	LWLockRelease(&slot->lock);
	ConditionVariableBroadcast(&slot->state_cv);
}

/*
 * The lock that serialises claims of a store's shard across the slots of its
 * names (shared_store.c) and every database of the cluster: an advisory lock
 * of kind 0x5257, "RW", of no database.  Two slots of one store that claimed
 * it both would fence each other; with claims one at a time, a claimer's
 * check of the other slots (shared_store_check_siblings) sees any claim that
 * came first.
 */
static void
writer_claim_lock_tag(RolloutStore *store, LOCKTAG *tag)
{
	rollout_store_shard_lock_tag(store, store->shard, 0x5257, tag);
}

/* See writer_epoch.h. */
void
writer_claims_hold_off(RolloutStore *store)
{
	LOCKTAG		tag;

	writer_claim_lock_tag(store, &tag);
	(void) LockAcquire(&tag, ShareLock, true, false);
}

void
writer_claims_resume(RolloutStore *store)
{
	LOCKTAG		tag;

	writer_claim_lock_tag(store, &tag);
	LockRelease(&tag, ShareLock, true);
}

/*
 * Claim the shard through slot, one claim of the store's shard at a time
 * (writer_claim_lock_tag).  Only credentials that reach the store the slot
 * stands for claim through it, and only when no other slot of this cluster
 * claimed the same store through other credentials (shared_store.c).
 */
static void
writer_claim_serialized(RolloutStore *store, SharedStoreSlot *slot,
						volatile bool *superseded)
{
	LOCKTAG		tag;

	writer_claim_lock_tag(store, &tag);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	PG_TRY();
	{
		shared_store_require_member(store, slot, "commit to");
		shared_store_check_siblings(store, slot);
		writer_wait_for_pipeline(slot);
		writer_claim(store, slot, superseded);
	}
	PG_FINALLY();
	{
		LockRelease(&tag, ExclusiveLock, true);
	}
	PG_END_TRY();
}

/* Make sure this cluster's writer of the shard is ready (claim it once). */
void
writer_ensure_ready(RolloutStore *store, SharedStoreSlot *slot)
{
	ClaimAbandon abandon = {slot, false};

	ConditionVariablePrepareToSleep(&slot->state_cv);
	for (;;)
	{
		WriterState state;
		bool		current;

		/*
		 * A committer that waited long for memtable room may find its slot
		 * gone to another store (shared_store.c), whose writer is not its to
		 * claim or judge.
		 */
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		current = store_slot_is_current(store, slot);
		state = slot->writer_state;
		if (current && state == WRITER_NONE)
			slot->writer_state = WRITER_INITIALIZING;
		LWLockRelease(&slot->lock);
		if (!current)
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not commit to store \"%s\": its shared-memory slot changed hands",
							store->name),
					 errhint("Retry the transaction.")));
		}

		if (state == WRITER_READY)
		{
			ConditionVariableCancelSleep();
			return;
		}
		if (state == WRITER_FENCED)
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("shard \"%s\" of store \"%s\" is owned by another writer",
							store->shard, store->name),
					 errdetail("This cluster was fenced twice and does not claim the shard again."),
					 errhint("Give each cluster its own rollout_fdw.shard_id, then restart.")));
		}
		if (state == WRITER_SUPERSEDED)
		{
			ShardManifest *manifest;

			ConditionVariableCancelSleep();
			manifest = shard_manifest_read_latest(store, store->shard);
			rollout_check_not_superseded(store, manifest->writer_timeline);
			/* the manifest no longer says so (a store created anew): claim */
			LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
			if (slot->writer_state == WRITER_SUPERSEDED)
				slot->writer_state = WRITER_NONE;
			LWLockRelease(&slot->lock);
			ConditionVariablePrepareToSleep(&slot->state_cv);
			continue;
		}
		if (state == WRITER_NONE)
			break;				/* we claim it */
		ConditionVariableSleep(&slot->state_cv, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();

	PG_ENSURE_ERROR_CLEANUP(writer_claim_abandon, PointerGetDatum(&abandon));
	{
		writer_claim_serialized(store, slot, &abandon.superseded);
	}
	PG_END_ENSURE_ERROR_CLEANUP(writer_claim_abandon, PointerGetDatum(&abandon));

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	slot->writer_state = WRITER_READY;
	/* the claim's fence, and entries it flushed (manifest_view.c) */
	shared_store_note_wal_change(slot->store, slot->shard);
	LWLockRelease(&slot->lock);
	ConditionVariableBroadcast(&slot->state_cv);
}

/*
 * A group-commit leader writing under epoch met the fence of a newer one:
 * the writer must claim again before the next commit, or, fenced twice,
 * never.  Only the first leader to meet this fence counts it: the state may
 * already say so, or a claim may be reopening the writer.
 */
void
writer_note_fenced(SharedStoreSlot *slot, int64 epoch)
{
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (slot->writer_state == WRITER_READY && slot->epoch == epoch)
		slot->writer_state = ++slot->times_fenced >= 2 ? WRITER_FENCED : WRITER_NONE;
	LWLockRelease(&slot->lock);
}

/*
 * The leader's tip is what its own last PUT (or the claim) left; nobody
 * else writes this shard while it owns it.  A successor writes a fence
 * there first, and gc keeps fences, so the leader's PUT would meet it; but
 * a fence may still have been collected (by a gc of an older release, or
 * by hand), and then the PUT would land below the successor's
 * replay_after, acknowledged and never read.  The successor's claim
 * committed its manifest before its fence, so the manifest is what tells.
 */
void
writer_check_still_owner(RolloutStore *store, SharedStoreSlot *slot,
						 int64 epoch, int64 position)
{
	ShardManifest *manifest = shard_manifest_read_latest(store, store->shard);

	ereport(LOG,
			(errmsg("rollout_fdw: checking that this cluster still owns shard \"%s\" of store \"%s\" before writing WAL position %lld",
					store->shard, store->name, (long long) position),
			 errdetail("Its last write is older than half of rollout_fdw.min_gc_grace.")));
	rollout_check_not_superseded(store, manifest->writer_timeline);
	if (manifest->writer_epoch > epoch)
	{
		writer_note_fenced(slot, epoch);
		shard_raise_taken_over(store, -1, manifest->writer_epoch, epoch);
	}
	if (manifest->replay_after >= position)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("WAL position %lld of shard \"%s\" in store \"%s\" is sealed already",
						(long long) position, store->shard, store->name),
				 errdetail("The shard manifest says replay_after %lld under this writer's epoch %lld. Nothing was written.",
						   (long long) manifest->replay_after, (long long) epoch)));
}
