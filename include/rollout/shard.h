/*-------------------------------------------------------------------------
 *
 * shard.h
 *		This cluster's shard of a store: id, registration, and whether this
 *		server may write it (core/shard.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SHARD_H
#define ROLLOUT_SHARD_H

#include "rollout/store.h"

/* Define rollout_fdw.shard_id (from _PG_init). */
extern void shard_define_settings(void);

/* This cluster's shard id: rollout_fdw.shard_id, else the system identifier. */
extern char *rollout_current_shard_id(void);
extern bool rollout_shard_id_is_valid(const char *shard);
extern int64 rollout_shard_hash(const char *shard);

/* The PostgreSQL timeline this cluster writes on (not during recovery). */
extern int64 rollout_writer_timeline(void);

/*
 * ERROR if a promoted standby (a higher writer_timeline) took this
 * cluster's shard over.
 */
extern void rollout_check_not_superseded(RolloutStore *store,
										 int64 writer_timeline);

/*
 * ERROR: this writer (of epoch) was fenced by an entry of owner_epoch at WAL
 * position (position < 0: by the shard manifest).
 */
extern void shard_raise_taken_over(RolloutStore *store, int64 position,
								   int64 owner_epoch, int64 epoch)
			pg_attribute_noreturn();

/* ERROR during recovery: operation ("flush"...) would write the store. */
extern void rollout_check_writable(RolloutStore *store, const char *operation);

/* Register this cluster's shard in the store (once; create-if-absent). */
extern void rollout_store_register_shard(RolloutStore *store);

/* List the shards that ever wrote to the store. */
extern List *rollout_store_list_shards(RolloutStore *store);

#endif							/* ROLLOUT_SHARD_H */
