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
 * rollout_fdw.manifest_refresh_interval (at most half
 * rollout_fdw.min_gc_grace).  Only version numbers are shared; the parsed
 * manifests come from manifest_cache.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_MANIFEST_VIEW_H
#define ROLLOUT_MANIFEST_VIEW_H

#include "datatype/timestamp.h"

#include "rollout/manifest.h"
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
 * server started, too many shards, the view distrusted, or the last read
 * from the store older than rollout_fdw.manifest_refresh_interval).
 */
extern bool manifest_view_lookup(RolloutStore *store, ManifestVersions *out);

/*
 * Record what a read of store's manifests begun at started_at found: every
 * shard it listed and the versions it read, shard manifests before the
 * base (DESIGN.md §5).  Versions only ever grow here.  The view is kept in
 * the store's slot, made for it when slots are left (shared_store.h).
 */
extern void manifest_view_publish(RolloutStore *store, TimestampTz started_at,
								  const ManifestVersions *found);

/*
 * Record a manifest version this cluster committed, right after its commit:
 * every commit of a manifest calls one (flush, merge, compaction, claim), so
 * that this cluster's reads see its own changes at once.  A shard manifest
 * raises the view's base to what covers its drops (or, when it does not
 * say, distrusts the view).  What correctness needs of the memtable,
 * memtable_trim does itself.
 */
extern void manifest_view_note_shard_commit(RolloutStore *store,
											const ShardManifest *manifest);
extern void manifest_view_note_base_commit(RolloutStore *store, int64 version);

/*
 * Distrust the view: the next snapshot reads the store, and a read of it
 * begun before now refreshes nothing (an object of a snapshot vanished).
 */
extern void manifest_view_forget(RolloutStore *store);

/*
 * This cluster's own shard's WAL tail, known empty while its writer holds no
 * memtable of it (the proof is in manifest_view.c).  A snapshot that must
 * list the tail first asks manifest_view_wal_tail_empty whether the tail
 * after the manifest's replay_after is known empty; if not, it takes a look
 * (manifest_view_wal_tail_look) before it lists, and when the listing shows
 * no entry at replay_after + 1 it records so with that look
 * (manifest_view_wal_tail_found_empty).  Known facts expire with the view's
 * interval, so that another cluster writing the shard is seen as late as
 * its manifests are.
 */
typedef struct WalTailLook
{
	bool		recordable;		/* preloaded, not a standby, a view kept */
	uint64		changes;		/* the shard's count of changes before the
								 * listing (shared_store_note_wal_change) */
	TimestampTz started_at;
} WalTailLook;

extern bool manifest_view_wal_tail_empty(RolloutStore *store, int64 replay_after);
extern void manifest_view_wal_tail_look(RolloutStore *store, WalTailLook *look);
extern void manifest_view_wal_tail_found_empty(RolloutStore *store,
											   const WalTailLook *look,
											   int64 replay_after);

#endif							/* ROLLOUT_MANIFEST_VIEW_H */
