/*-------------------------------------------------------------------------
 *
 * store_snapshot.h
 *		Taking a store's snapshot, in the order DESIGN.md §5 fixes
 *		(core/store_snapshot.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_STORE_SNAPSHOT_H
#define ROLLOUT_STORE_SNAPSHOT_H

#include "rollout/snapshot.h"

/*
 * Take a snapshot: every shard manifest first, then the base manifest, then
 * the WAL tails (this cluster's always; other shards' only when
 * all_wal_tails, the table option read_wal_tail).
 */
extern RolloutSnapshot *rollout_snapshot_take(RolloutStore *store,
											  bool all_wal_tails);

/*
 * The same sources for counting only (the planner's estimate): this
 * cluster's memtable is one SNAPSHOT_MEMTABLE source that knows its row
 * count but holds no rows, so nothing is copied out of shared memory.  Not
 * for reading.
 */
extern RolloutSnapshot *rollout_snapshot_take_for_counting(RolloutStore *store,
														   bool all_wal_tails);

#endif							/* ROLLOUT_STORE_SNAPSHOT_H */
