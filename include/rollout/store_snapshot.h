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

#include "rollout/manifest.h"
#include "rollout/manifest_view.h"
#include "rollout/snapshot.h"
#include "rollout/wal.h"

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
 * True when no generation base folded in is unknown to the shard manifests
 * read before it (count of them), of wal_shard or, when NULL, of every shard:
 * a cut a read of those shards' WAL tails may take.  Listings that raced
 * with a flush and a merge of such a shard are not, and are taken again.
 */
extern bool rollout_manifests_form_a_cut(const ShardManifest **manifests,
										 int count, const BaseManifest *base,
										 const char *wal_shard);

/*
 * True when every shard base merged generations of is among the shard
 * manifests (count of them) read before it.  A named snapshot needs it as
 * well: a shard it does not name is read from its start by a change feed
 * started from it, which would deliver again what the base holds of it.
 */
extern bool rollout_manifests_name_merged_shards(const ShardManifest **manifests,
												 int count,
												 const BaseManifest *base);

/*
 * A snapshot of exactly the given manifest versions (a named snapshot,
 * core/named_snapshot.c): the base's fragments and the shards' generations,
 * no WAL entry and no memtable.  NULL when a version no longer exists.
 */
extern RolloutSnapshot *rollout_snapshot_at_versions(RolloutStore *store,
													 const ManifestVersions *versions);

/* A generation of shard as a snapshot's source (copied out of its manifest). */
extern SnapshotSource *rollout_snapshot_generation_source(RolloutStore *store,
														  const char *shard,
														  const GenerationEntry *generation);

/*
 * A WAL entry of shard as a snapshot's source; the first entry of a run
 * after replay_after gets the stamp and epoch its readers start from (the
 * manifest's last_stamp and sealed_epoch), the others -1.
 */
extern SnapshotSource *rollout_snapshot_wal_source(const char *shard,
												   const WalEntryRef *entry,
												   int64 stamp_floor,
												   int64 epoch_floor);

#endif							/* ROLLOUT_STORE_SNAPSHOT_H */
