/*-------------------------------------------------------------------------
 *
 * tombstone_horizon.h
 *		Which tombstones a compaction may drop for good
 *		(lsm/tombstone_horizon.c, docs/MAINTENANCE.md).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_TOMBSTONE_HORIZON_H
#define ROLLOUT_TOMBSTONE_HORIZON_H

#include "datatype/timestamp.h"

#include "rollout/manifest.h"

/*
 * A stamp that no version outside inputs (FragmentEntry * of base) is older
 * than: a tombstone of the inputs below it hides nothing outside them and
 * may be dropped.  manifests are every registered shard's newest manifest,
 * read before base and after started (when the compaction began); the WAL
 * tails after their replay_after are listed here.
 */
extern int64 rollout_tombstone_horizon(RolloutStore *store, List *manifests,
									   const BaseManifest *base, List *inputs,
									   TimestampTz started);

#endif							/* ROLLOUT_TOMBSTONE_HORIZON_H */
