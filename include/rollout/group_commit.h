/*-------------------------------------------------------------------------
 *
 * group_commit.h
 *		Many transactions' rows in one WAL entry (lsm/group_commit.c,
 *		DESIGN.md §6.2).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_GROUP_COMMIT_H
#define ROLLOUT_GROUP_COMMIT_H

#include "rollout/store.h"
#include "rollout/store_slot.h"

/* Define rollout_fdw.commit_delay (from _PG_init). */
extern void group_commit_define_settings(void);

/*
 * Make one transaction's rows (a row blob, possibly empty) and ingest
 * references durable as part of the shard's next WAL entry (with the
 * truncate flag when the transaction ran TRUNCATE), written by
 * whichever committing backend is the leader.  Returns the position.
 * Waits when the memtable is full (back-pressure).  ERROR if the entry
 * could not be written; then nothing of the transaction is visible.
 */
extern int64 group_commit(RolloutStore *store, SharedStoreSlot *slot,
						  StringInfo rows, int64 row_count,
						  int64 tombstone_count, bool truncate, List *ingest);

#endif							/* ROLLOUT_GROUP_COMMIT_H */
