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
	int64		hits;			/* in this backend's cache */
	int64		shared_hits;	/* not there, but in the shared cache */
	int64		misses;
} FooterCacheCounters;

extern void footer_cache_define_settings(void);
extern bool footer_cache_enabled(void);

/* What a borrow lent: the footer's bytes, and their decoded form. */
typedef struct FooterLoan FooterLoan;

/*
 * The footer known for identity, lent: *footer points into the cache until
 * CurrentMemoryContext is reset or deleted (the entry is pinned until then,
 * so that no eviction frees it), and *loan names what was lent.  False on a
 * miss, which a known footer of an object of another size than
 * object_size_hint (when >= 0) counts as.
 */
extern bool footer_cache_borrow(const char *identity, int64 object_size_hint,
								const char **footer, int64 *footer_length,
								int64 *object_size, FooterLoan **loan);

/*
 * The lent footer's decoded form (opaque here: the format layer's), lent
 * with it, or NULL; and keeping one, decoded from exactly those bytes, in
 * context, which the cache adopts (and frees with the bytes).
 */
extern const void *footer_cache_loan_decoded(FooterLoan *loan);
extern void footer_cache_loan_keep_decoded(FooterLoan *loan, void *decoded,
										   MemoryContext context);

/* Is a footer known for identity (no counting)? */
extern bool footer_cache_contains(const char *identity);

/* Keep a footer read and checked for identity. */
extern void footer_cache_remember(const char *identity, const char *footer,
								  int64 footer_length, int64 object_size);

extern void footer_cache_get_counters(FooterCacheCounters *counters);

#endif							/* ROLLOUT_FOOTER_CACHE_H */
