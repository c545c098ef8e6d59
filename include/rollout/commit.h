/*-------------------------------------------------------------------------
 *
 * commit.h
 *		Committing a transaction's rows without the shared-memory writer.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_COMMIT_H
#define ROLLOUT_COMMIT_H

#include "rollout/wal.h"

/*
 * Write the rows (row blobs) and the ingest segments metadata names as this
 * backend's own WAL entry, claiming the shard first when this cluster was
 * promoted since its last claim.  Returns the position.  ERROR if nothing
 * could be written; then nothing of the transaction is visible.
 */
extern int64 rollout_commit_direct(RolloutStore *store, List *blobs,
								   WalEntryMetadata *metadata);

#endif							/* ROLLOUT_COMMIT_H */
