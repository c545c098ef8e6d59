/*-------------------------------------------------------------------------
 *
 * shared_footer_cache.h
 *		Footers of segments any backend of the cluster read, in shared
 *		memory when preloaded (core/shared_footer_cache.c): the second level
 *		below each backend's footer cache (footer_cache.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SHARED_FOOTER_CACHE_H
#define ROLLOUT_SHARED_FOOTER_CACHE_H

/* Define rollout_fdw.shared_footer_cache_size (from _PG_init, preloading). */
extern void shared_footer_cache_define_settings(void);

extern Size shared_footer_cache_shmem_size(void);

/* Create or attach the cache (shmem startup hook, AddinShmemInitLock held). */
extern void shared_footer_cache_shmem_init(void);

/*
 * A copy, palloc'd in CurrentMemoryContext, of the footer kept for identity
 * (of an object of object_size_hint bytes, when >= 0), if it is at most
 * max_length bytes.  False when there is none, or no shared cache.
 */
extern bool shared_footer_cache_copy(const char *identity, int64 object_size_hint,
									 int64 max_length, char **footer,
									 int64 *footer_length, int64 *object_size);

/* Keep a footer read and checked for identity. */
extern void shared_footer_cache_put(const char *identity, const char *footer,
									int64 footer_length, int64 object_size);

#endif							/* ROLLOUT_SHARED_FOOTER_CACHE_H */
