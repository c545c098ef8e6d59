/*-------------------------------------------------------------------------
 *
 * footer_cache.h
 *		Footers of segments read by this backend, by object identity
 *		(core/footer_cache.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_FOOTER_CACHE_H
#define ROLLOUT_FOOTER_CACHE_H

#include "lib/stringinfo.h"

typedef struct FooterCacheCounters
{
	int64		hits;
	int64		misses;
} FooterCacheCounters;

extern void footer_cache_define_settings(void);
extern bool footer_cache_enabled(void);

/* A known footer appended to out, with its object's size; false on a miss. */
extern bool footer_cache_lookup(const char *identity, StringInfo out,
								int64 *object_size);

/* Is a footer known for identity (no counting)? */
extern bool footer_cache_contains(const char *identity);

/* Keep a footer read and checked for identity. */
extern void footer_cache_remember(const char *identity, const char *footer,
								  int64 footer_length, int64 object_size);

extern void footer_cache_get_counters(FooterCacheCounters *counters);

#endif							/* ROLLOUT_FOOTER_CACHE_H */
