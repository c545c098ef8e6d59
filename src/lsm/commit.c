/*-------------------------------------------------------------------------
 *
 * commit.c
 *		Make a transaction's rows durable as a WAL entry without the
 *		shared-memory writer (DESIGN.md §6.2).
 *
 * Each committing backend writes its own entry at the next position
 * (wal.c).  The one thing above that is the shard's claim: a cluster that
 * was promoted from standby since the shard was last claimed takes the
 * shard over first (shard_claim.c), which fences the primary it replaced;
 * afterwards its backends share the new epoch like any plain writers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "rollout/commit.h"
#include "rollout/shard_claim.h"

int64
rollout_commit_direct(RolloutStore *store, List *blobs,
					  WalEntryMetadata *metadata)
{
	int64		position;

	rollout_check_writable(store, "commit to");
	position = wal_append_rows(store, blobs, metadata);
	if (position == 0)
	{
		(void) shard_claim(store, true, NULL);
		position = wal_append_rows(store, blobs, metadata);
		if (position == 0)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not claim shard \"%s\" of store \"%s\" for this server's timeline",
							store->shard, store->name)));
	}
	return position;
}
