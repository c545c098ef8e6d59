/*-------------------------------------------------------------------------
 *
 * store_keys.h
 *		The names of a store's objects (core/store_keys.c, DESIGN.md §3).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_STORE_KEYS_H
#define ROLLOUT_STORE_KEYS_H

#include "rollout/store.h"

/* Object keys, all relative to the location root. */
extern char *rollout_key_store_json(RolloutStore *store);
extern char *rollout_key_shard_registry(RolloutStore *store, const char *shard);
extern char *rollout_key_wal(RolloutStore *store, const char *shard, int64 position);
extern char *rollout_key_wal_prefix(RolloutStore *store, const char *shard);

/* where write_proof.c leaves its probes, gone once it read them back */
extern char *rollout_key_write_probe_prefix(RolloutStore *store, const char *shard);

/*
 * Key of a new generation numbered number: gen/<number>-<uuid>.seg.  A key
 * is never made twice, so garbage collection can only ever delete the object
 * it listed (a flush that fails after its upload tries again under a new
 * key, which a gc run holding the old one in its queue cannot reach).
 */
extern char *rollout_key_new_generation(RolloutStore *store, const char *shard, int64 number);
extern char *rollout_key_shard_manifest_prefix(RolloutStore *store, const char *shard);
extern char *rollout_key_base_manifest_prefix(RolloutStore *store);

/* Parse the number out of a ".../00000000000000000042.ext" key; -1 if none. */
extern int64 rollout_key_number(const char *key);

/* Key of a new base fragment: base/data/<uuid>.seg */
extern char *rollout_key_new_fragment(RolloutStore *store);

/* Is key a UUID-named object (a base fragment or an ingest segment)? */
extern bool rollout_key_is_unique(RolloutStore *store, const char *key);

/* Is key a generation, one object for good within a creation of the store? */
extern bool rollout_key_is_generation(RolloutStore *store, const char *key);

/* Is key, read from the store, one of store's segments in its own folder? */
extern bool rollout_key_is_store_segment(RolloutStore *store, const char *key);
extern bool rollout_key_is_segment_of(const char *name, size_t name_len,
									  const char *key);

#endif							/* ROLLOUT_STORE_KEYS_H */
