/*-------------------------------------------------------------------------
 *
 * manifest_view.h
 *		The newest manifest versions of a store as this cluster knows them,
 *		in shared memory (core/manifest_view.c).
 *
 * Preloaded, a snapshot need not list a store's manifests at every
 * statement: this cluster's own flushes, merges, compactions and claims
 * record each version they commit here at once (lsm/), and a read of the store
 * refreshes the rest (other clusters' commits) when it is older than
 * rollout_fdw.manifest_refresh_interval.  Only version numbers are shared;
 * the parsed manifests come from manifest_cache.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_MANIFEST_VIEW_H
#define ROLLOUT_MANIFEST_VIEW_H

#include "datatype/timestamp.h"

#include "rollout/store.h"

/* The newest version of the base and of each shard's manifest. */
typedef struct ManifestVersions
{
	int64		base_version;
	List	   *shards;			/* shard ids (char *), sorted */
	int64	   *shard_versions; /* in the order of shards */
} ManifestVersions;

/* Define rollout_fdw.manifest_refresh_interval. */
extern void manifest_view_define_settings(void);

/*
 * The versions a snapshot of store may read without listing the store:
 * false when there are none (not preloaded, the store never read since the
 * server started, too many shards, or the last read from the store older
 * than rollout_fdw.manifest_refresh_interval).
 */
extern bool manifest_view_lookup(RolloutStore *store, ManifestVersions *out);

/*
 * Record what a read of store's manifests begun at started_at found: every
 * shard it listed and the versions it read, shard manifests before the
 * base (DESIGN.md §5).  Versions only ever grow here.
 */
extern void manifest_view_publish(RolloutStore *store, TimestampTz started_at,
								  const ManifestVersions *found);

/*
 * Record a version this cluster committed (shard NULL: the base manifest),
 * right after its commit: every commit of a manifest calls it (flush, merge,
 * compaction, claim), so that this cluster's reads see its own changes at
 * once.  What correctness needs of the memtable, memtable_trim does itself.
 */
extern void manifest_view_note_commit(RolloutStore *store, const char *shard,
									  int64 version);

/* Distrust the view: the next snapshot reads the store (an object vanished). */
extern void manifest_view_forget(RolloutStore *store);

#endif							/* ROLLOUT_MANIFEST_VIEW_H */
