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

#include "rollout/manifest_view.h"
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

/*
 * The newest manifest versions of store, listed from the store in the order
 * a snapshot takes them (every shard manifest, then the base manifest), so
 * that together they are a consistent cut; each was read once, so each
 * existed.
 */
extern void rollout_snapshot_newest_versions(RolloutStore *store,
											 ManifestVersions *versions);

/*
 * A snapshot of exactly the given manifest versions (a named snapshot,
 * core/named_snapshot.c): the base's fragments and the shards' generations,
 * no WAL entry and no memtable.  NULL when a version no longer exists.
 */
extern RolloutSnapshot *rollout_snapshot_at_versions(RolloutStore *store,
													 const ManifestVersions *versions);

#endif							/* ROLLOUT_STORE_SNAPSHOT_H */
