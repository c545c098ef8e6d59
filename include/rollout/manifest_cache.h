/*-------------------------------------------------------------------------
 *
 * manifest_cache.h
 *		The newest manifests this backend parsed, kept by store, shard and
 *		version (core/manifest_cache.c).
 *
 * A manifest version is written once and never changes, so a parsed
 * version can be kept without any invalidation: a snapshot that finds the
 * same version again neither reads nor parses it.  One version of each
 * manifest is kept: the one read last.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_MANIFEST_CACHE_H
#define ROLLOUT_MANIFEST_CACHE_H

#include "rollout/manifest.h"
#include "rollout/manifest_view.h"

/*
 * The parsed manifests of versions: *shard_manifests in the order of
 * versions->shards, and *base.  The cached ones cost no request; the others
 * are read (the shard manifests in one batch).  Returns false when a version
 * does not exist (any more; its entry is then NULL).  The manifests belong
 * to the cache and stay valid until the next call: callers copy what they
 * keep beyond that.
 */
extern bool manifest_cache_read(RolloutStore *store,
								const ManifestVersions *versions,
								const ShardManifest ***shard_manifests,
								const BaseManifest **base);

#endif							/* ROLLOUT_MANIFEST_CACHE_H */
