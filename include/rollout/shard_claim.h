/*-------------------------------------------------------------------------
 *
 * shard_claim.h
 *		Claiming this cluster's shard of a store: writer epoch, timeline and
 *		fence marker (DESIGN.md §8).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SHARD_CLAIM_H
#define ROLLOUT_SHARD_CLAIM_H

#include "rollout/store.h"

/* What a successful claim established. */
typedef struct ShardClaim
{
	int64		epoch;			/* the new writer epoch */
	int64		fence_position; /* the fence marker's WAL position: the tip */
	int64		stamp;			/* the fence's effective stamp */
} ShardClaim;

/*
 * Claim the shard: flush the durable WAL tail, commit the shard manifest
 * with the next epoch and this cluster's timeline, write the fence marker.
 * With only_for_new_timeline (the direct path after a promotion) nothing is
 * done once the shard's last claim is of this cluster's timeline already
 * (another backend claimed first), and the returned fence position is 0.
 * ERROR when the shard was taken over by a promoted standby (a higher
 * timeline; then *superseded, if not NULL, is set first: that is for good),
 * for a stale copy of a store in the embedded default location after a
 * promotion, when another cluster claims at the same time, and during
 * recovery.
 */
extern ShardClaim shard_claim(RolloutStore *store, bool only_for_new_timeline,
							  volatile bool *superseded);

#endif							/* ROLLOUT_SHARD_CLAIM_H */
