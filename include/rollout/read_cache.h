/*-------------------------------------------------------------------------
 *
 * read_cache.h
 *		A local disk cache of reads from remote stores, for objects whose
 *		bytes never change (objstore/read_cache.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_READ_CACHE_H
#define ROLLOUT_READ_CACHE_H

#include "rollout/objstore.h"

/* Bytes are cached in blocks of this size, aligned in the object. */
#define READ_CACHE_BLOCK_SIZE	(256 * 1024)

/* What this process's reads found in the cache; only ever grows. */
typedef struct ReadCacheCounters
{
	int64		hits;			/* blocks read from the cache */
	int64		misses;			/* blocks fetched from the store */
	int64		hit_bytes;
	int64		miss_bytes;
	int64		discarded;		/* cache files found torn or wrong */
	int64		evicted;		/* cache files removed to respect the bound */
} ReadCacheCounters;

/*
 * Define rollout_fdw.cache_dir, rollout_fdw.cache_size and
 * rollout_fdw.disk_cache (from _PG_init).
 */
extern void read_cache_define_settings(void);

/* Are the settings on, so that this session's reads may use the cache? */
extern bool read_cache_enabled(void);

/*
 * objstore_get_many, with a cache.  cache_ids[i] names the object of
 * reads[i] for good: no other object, in any store or under any
 * credentials, will ever be read under it, and the object's bytes never
 * change.  NULL (or cache_ids NULL) reads the object from the store as
 * objstore_get_many does.  Each result is what objstore_get_many would
 * give, except that an object read from the cache is found even if it has
 * been deleted since.  The cache never makes a read fail.
 */
extern void read_cache_get_many(ObjectStore *store, ObjectStoreRead *reads,
								const char *const *cache_ids, int nreads);

extern void read_cache_get_counters(ReadCacheCounters *counters);

#endif							/* ROLLOUT_READ_CACHE_H */
