/*-------------------------------------------------------------------------
 *
 * writer_epoch.h
 *		Claiming this cluster's shard of a store: writer epoch, timeline and
 *		fence marker, and the shared writer's state about the claim
 *		(lsm/writer_epoch.c, DESIGN.md §8).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_WRITER_EPOCH_H
#define ROLLOUT_WRITER_EPOCH_H

#include "rollout/store.h"
#include "rollout/store_slot.h"

/* What a successful claim established. */
typedef struct ShardClaim
{
	int64		epoch;			/* the new writer epoch */
	int64		manifest_version;	/* of the shard manifest it committed */
	int64		drops_covered_by_base;	/* that manifest's */
	int64		fence_position; /* the fence marker's WAL position */
	char	   *fence_put_id;	/* and its put id */
	int64		tip;			/* where the writer goes on from: the fence,
								 * or past the dead entries a previous
								 * writer's pipeline landed right after it */
	int64		stamp;			/* the fence's effective stamp */
	TimestampTz observed_at;	/* when the manifest it built on was read */
} ShardClaim;

/* Why a shard is claimed (shard_claim). */
typedef enum ShardClaimReason
{
	SHARD_CLAIM_FOR_WRITER,		/* this cluster's shared writer starts */
	SHARD_CLAIM_NEW_TIMELINE,	/* a direct commit after a promotion */
	SHARD_CLAIM_FENCE_HOLE		/* a direct commit found entries past a hole */
} ShardClaimReason;

/*
 * Claim the shard: flush the durable WAL tail, commit the shard manifest
 * with the next epoch and this cluster's timeline, write the fence marker.
 * The direct path's claims do nothing once another backend did what they
 * are for: SHARD_CLAIM_NEW_TIMELINE once the shard's last claim is of this
 * cluster's timeline, SHARD_CLAIM_FENCE_HOLE once the shard's epoch is no
 * longer seen_epoch (the one the hole was found under; the other reasons
 * ignore it); the returned fence position is 0 then.
 * ERROR when the shard was taken over by a promoted standby (a higher
 * timeline; then *superseded, if not NULL, is set first: that is for good),
 * for a stale copy of a store in the embedded default location after a
 * promotion, when another cluster claims at the same time, and during
 * recovery.  The store exists and the shard is registered
 * (rollout_commit_rows sees to both before it commits).
 */
extern ShardClaim shard_claim(RolloutStore *store, ShardClaimReason reason,
							  int64 seen_epoch, volatile bool *superseded);

/*
 * Make sure this cluster's shared writer of the shard is ready: claim it
 * once (the first commit after startup, or after a fence), or wait for the
 * backend claiming it.  ERROR when fenced twice or superseded.
 */
extern void writer_ensure_ready(RolloutStore *store, SharedStoreSlot *slot);

/*
 * Hold off this cluster's claims of store's shard (a share of the lock each
 * claim takes exclusively), and let them go on again.  A direct-path commit
 * holds them off while it looks for a slot of the store and appends
 * (commit.c): a claim then either came first, and the commit finds its slot,
 * or comes after, and its tip includes the entry.
 */
extern void writer_claims_hold_off(RolloutStore *store);
extern void writer_claims_resume(RolloutStore *store);

/* A leader of epoch met a newer writer's entry: count the fence once. */
extern void writer_note_fenced(SharedStoreSlot *slot, int64 epoch);

/*
 * Before a leader of epoch writes at position on a tip it learnt too long
 * ago (rollout_output_too_old): ERROR, the fence counted, unless the shard
 * manifest still says this writer owns the shard and has not sealed
 * position.  Garbage collection may have deleted the entry a successor put
 * there; only the manifest still tells.
 */
extern void writer_check_still_owner(RolloutStore *store, SharedStoreSlot *slot,
									 int64 epoch, int64 position);

#endif							/* ROLLOUT_WRITER_EPOCH_H */
