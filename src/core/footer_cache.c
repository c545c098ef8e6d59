/*-------------------------------------------------------------------------
 *
 * footer_cache.c
 *		Footers of segments this backend has read, kept so that the next
 *		scan of the same object needs no request for it.
 *
 * A segment never changes once written, so its footer can be kept under
 * the object's identity without invalidation; an object garbage collection
 * deleted is simply never asked for again and ages out.  The identity is
 * the caller's (store_sources.c): it must name one object for good, which
 * is why only objects with unique names are cached there.
 *
 * The cache is per backend, bounded by rollout_fdw.footer_cache_size and
 * emptied least recently used first.  Entries live in a memory context of
 * their own under TopMemoryContext.  A footer is lent, not copied (a
 * million-row fragment's footer, key filter included, is over a megabyte,
 * and a lookup reads it every time): the borrower's memory context holds a
 * pin on it, released by a reset callback when that context goes, on error
 * as on success.  Evicting a pinned footer takes it out of the cache at
 * once; its bytes are freed when the last pin goes.
 *
 * A footer may also be kept decoded (segment.h, SegmentSource): its first
 * borrower decodes it into a context the cache then adopts, next to the
 * bytes it points into, and later borrowers copy that instead of decoding
 * (a lookup in a million-row fragment spent a fifth of its time decoding
 * the footer).  The decoded form is lent, counted and freed with the bytes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "common/hashfn.h"
#include "lib/ilist.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "rollout/footer_cache.h"
#include "rollout/shared_footer_cache.h"

/* rollout_fdw.footer_cache_size (kB; 0 turns the cache off) */
static int	footer_cache_kb = 16 * 1024;

/*
 * One footer's bytes may take this share of the limit, and its decoded form
 * as much again: a compacted fragment of a million rows has a footer of 2 to
 * 3 MB (1.25 MB of it the key filter, the rest the row-group and page
 * directories), and lookups over such a store are the case the cache is
 * for.  A smaller share would turn them into a read and decode of the whole
 * footer per lookup.
 */
#define FOOTER_CACHE_LARGEST_SHARE	4

/* A cached footer's bytes, which may outlive their entry while lent. */
typedef struct FooterBytes
{
	char	   *footer;
	int			pins;			/* borrowers' contexts holding it */
	bool		evicted;		/* no entry points to it any more */
	struct FooterCacheEntry *entry; /* the one that does, unless evicted */
	void	   *decoded;		/* the footer decoded, or NULL */
	MemoryContext decoded_context;	/* holds it */
	Size		decoded_charge; /* what it held when last counted */
} FooterBytes;

typedef struct FooterCacheEntry
{
	uint64		hash;			/* hash key: of identity */
	char	   *identity;
	FooterBytes *bytes;
	int64		footer_length;
	int64		object_size;
	Size		charge;			/* what the entry counts against the limit */
	bool		from_shared;	/* copied from the shared cache, not yet lent */
	dlist_node	lru;			/* most recently used at the head */
} FooterCacheEntry;

static HTAB *footer_cache = NULL;
static MemoryContext footer_cache_context = NULL;
static dlist_head footer_cache_lru = DLIST_STATIC_INIT(footer_cache_lru);
static Size footer_cache_bytes = 0;
static FooterCacheCounters footer_cache_counters;

static void footer_cache_recharge_decoded(FooterBytes *bytes);
static bool footer_cache_fetch_shared(const char *identity,
									  int64 object_size_hint);

/* Define rollout_fdw.footer_cache_size; _PG_init calls this. */
void
footer_cache_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.footer_cache_size",
							"Memory per backend for the footers of segments read, so that reading them again needs no request.",
							"Base fragments, ingest segments and generations are kept, whose names stand for one object for good within a creation of the store. 0 turns the cache off.",
							&footer_cache_kb,
							16 * 1024, 0, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/* Is the cache on? */
bool
footer_cache_enabled(void)
{
	return footer_cache_kb > 0;
}

/* The limit in bytes. */
static Size
footer_cache_limit(void)
{
	return (Size) footer_cache_kb * 1024;
}

/* Create the hash table on first use. */
static void
footer_cache_init(void)
{
	HASHCTL		ctl;

	footer_cache_context = AllocSetContextCreate(TopMemoryContext,
												 "rollout footer cache",
												 ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(FooterCacheEntry);
	ctl.hcxt = footer_cache_context;
	footer_cache = hash_create("rollout footer cache", 256, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* Free a footer's bytes, and its decoded form with them. */
static void
footer_bytes_free(FooterBytes *bytes)
{
	if (bytes->decoded_context != NULL)
		MemoryContextDelete(bytes->decoded_context);
	pfree(bytes->footer);
	pfree(bytes);
}

/*
 * A borrower's context goes: unpin its footer, and free it if it was
 * evicted meanwhile and nobody else holds it.
 */
static void
footer_bytes_unpin(void *arg)
{
	FooterBytes *bytes = arg;

	Assert(bytes->pins > 0);
	if (--bytes->pins == 0 && bytes->evicted)
		footer_bytes_free(bytes);
}

/*
 * Remove one entry; its bytes are freed now, or when the last borrower
 * unpins them.
 */
static void
footer_cache_remove(FooterCacheEntry *entry)
{
	uint64		hash = entry->hash;

	dlist_delete(&entry->lru);
	footer_cache_bytes -= entry->charge;
	pfree(entry->identity);
	entry->bytes->entry = NULL;
	if (entry->bytes->pins == 0)
		footer_bytes_free(entry->bytes);
	else
		entry->bytes->evicted = true;
	(void) hash_search(footer_cache, &hash, HASH_REMOVE, NULL);
}

/* Evict least recently used entries until the cache fits the limit. */
static void
footer_cache_shrink(void)
{
	while (footer_cache_bytes > footer_cache_limit() &&
		   !dlist_is_empty(&footer_cache_lru))
		footer_cache_remove(dlist_tail_element(FooterCacheEntry, lru,
											   &footer_cache_lru));
}

/* The entry of identity, or NULL; a hash collision counts as absent. */
static FooterCacheEntry *
footer_cache_find(const char *identity, uint64 hash)
{
	FooterCacheEntry *entry;

	if (footer_cache == NULL)
		return NULL;
	entry = hash_search(footer_cache, &hash, HASH_FIND, NULL);
	if (entry == NULL || strcmp(entry->identity, identity) != 0)
		return NULL;
	return entry;
}

/* The 64-bit hash of an identity. */
static uint64
footer_cache_hash(const char *identity)
{
	return hash_bytes_extended((const unsigned char *) identity,
							   (int) strlen(identity), 0);
}

/*
 * Lend the footer known for identity (footer_cache.h); false (a miss) when
 * it is not known, belongs to an object of another size than the hint, or
 * the cache is off.
 */
bool
footer_cache_borrow(const char *identity, int64 object_size_hint,
					const char **footer, int64 *footer_length,
					int64 *object_size, FooterLoan **loan)
{
	FooterCacheEntry *entry;
	MemoryContextCallback *pin;

	if (!footer_cache_enabled())
		return false;
	entry = footer_cache_find(identity, footer_cache_hash(identity));
	if (entry != NULL && object_size_hint >= 0 &&
		entry->object_size != object_size_hint)
		entry = NULL;
	if (entry == NULL && footer_cache_fetch_shared(identity, object_size_hint))
		entry = footer_cache_find(identity, footer_cache_hash(identity));
	if (entry == NULL)
	{
		footer_cache_counters.misses++;
		return false;
	}
	if (entry->from_shared)
		footer_cache_counters.shared_hits++;
	else
		footer_cache_counters.hits++;
	entry->from_shared = false;
	pin = palloc(sizeof(MemoryContextCallback));
	pin->func = footer_bytes_unpin;
	pin->arg = entry->bytes;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, pin);
	entry->bytes->pins++;

	dlist_move_head(&footer_cache_lru, &entry->lru);
	*footer = entry->bytes->footer;
	*footer_length = entry->footer_length;
	*object_size = entry->object_size;
	*loan = (FooterLoan *) entry->bytes;
	/* pinned: should this evict it, its bytes stay until the borrower goes */
	footer_cache_recharge_decoded(entry->bytes);
	footer_cache_shrink();
	return true;
}

/* The decoded form kept with a lent footer, or NULL (footer_cache.h). */
const void *
footer_cache_loan_decoded(FooterLoan *loan)
{
	return ((FooterBytes *) loan)->decoded;
}

/*
 * Count what a cached footer's decoded form holds now against the limit:
 * the page directories and comparison caches its readers decode into it
 * later make it grow.
 */
static void
footer_cache_recharge_decoded(FooterBytes *bytes)
{
	Size		now;

	if (bytes->decoded_context == NULL || bytes->entry == NULL)
		return;
	now = MemoryContextMemAllocated(bytes->decoded_context, true);
	if (now == bytes->decoded_charge)
		return;
	bytes->entry->charge += now - bytes->decoded_charge;
	footer_cache_bytes += now - bytes->decoded_charge;
	bytes->decoded_charge = now;
}

/*
 * Keep decoded, in context, with the lent footer it was decoded from
 * (footer_cache.h).  The cache adopts the context at once, so that it goes
 * with the bytes whatever happens to the borrower, and counts it against
 * the limit while the footer is cached.  It does not adopt it (the context
 * stays the borrower's, freed with it) when the footer is no longer cached,
 * one is kept already, or it is larger than the most one footer may take
 * (FOOTER_CACHE_LARGEST_SHARE).
 */
void
footer_cache_loan_keep_decoded(FooterLoan *loan, void *decoded,
							   MemoryContext context)
{
	FooterBytes *bytes = (FooterBytes *) loan;
	Size		charge = MemoryContextMemAllocated(context, true);

	if (bytes->decoded != NULL || bytes->entry == NULL ||
		charge > footer_cache_limit() / FOOTER_CACHE_LARGEST_SHARE)
		return;
	MemoryContextSetParent(context, footer_cache_context);
	bytes->decoded = decoded;
	bytes->decoded_context = context;
	bytes->decoded_charge = charge;
	bytes->entry->charge += charge;
	footer_cache_bytes += charge;
	footer_cache_shrink();
}

/*
 * Is a footer known for identity, here or in the shared cache (then brought
 * here, which may evict others)?  Counts nothing: the borrow that follows
 * does.
 */
bool
footer_cache_contains(const char *identity)
{
	return footer_cache_enabled() &&
		(footer_cache_find(identity, footer_cache_hash(identity)) != NULL ||
		 footer_cache_fetch_shared(identity, -1));
}

/*
 * The largest footer of identity this backend keeps: its bytes may take a
 * FOOTER_CACHE_LARGEST_SHARE of the limit (its decoded form as much again at
 * most when adopted, plus the page directories decoded into it later,
 * counted from the next borrow).
 */
static int64
footer_cache_max_footer(const char *identity)
{
	return (int64) (footer_cache_limit() / FOOTER_CACHE_LARGEST_SHARE) -
		(int64) (strlen(identity) + 1 + sizeof(FooterCacheEntry));
}

/*
 * Keep in this backend the footer of identity, whose bytes are in
 * footer_cache_context and now belong to the cache, unless it is larger than
 * footer_cache_max_footer (then they are freed).  Returns the entry, or NULL.
 */
static FooterCacheEntry *
footer_cache_adopt(const char *identity, char *footer, int64 footer_length,
				   int64 object_size)
{
	uint64		hash = footer_cache_hash(identity);
	FooterCacheEntry *entry;
	Size		charge;
	bool		found;

	charge = footer_length + strlen(identity) + 1 + sizeof(FooterCacheEntry);
	if (charge > footer_cache_limit() / FOOTER_CACHE_LARGEST_SHARE)
	{
		pfree(footer);
		return NULL;
	}

	entry = hash_search(footer_cache, &hash, HASH_FIND, NULL);
	if (entry != NULL)
		footer_cache_remove(entry); /* the same object, or a collision */

	entry = hash_search(footer_cache, &hash, HASH_ENTER, &found);
	Assert(!found);
	entry->hash = hash;
	entry->identity = MemoryContextStrdup(footer_cache_context, identity);
	entry->bytes = MemoryContextAllocZero(footer_cache_context, sizeof(FooterBytes));
	entry->bytes->entry = entry;
	entry->bytes->footer = footer;
	entry->footer_length = footer_length;
	entry->object_size = object_size;
	entry->charge = charge;
	entry->from_shared = false;
	dlist_push_head(&footer_cache_lru, &entry->lru);
	footer_cache_bytes += charge;
	footer_cache_shrink();
	return entry;
}

/*
 * Keep a copy of the footer of identity in this backend, unless it is larger
 * than footer_cache_max_footer.
 */
static void
footer_cache_keep(const char *identity, const char *footer,
				  int64 footer_length, int64 object_size)
{
	char	   *copy;

	if (!footer_cache_enabled() ||
		footer_length > footer_cache_max_footer(identity))
		return;
	if (footer_cache == NULL)
		footer_cache_init();
	copy = MemoryContextAllocExtended(footer_cache_context, footer_length,
									  MCXT_ALLOC_HUGE);
	memcpy(copy, footer, footer_length);
	(void) footer_cache_adopt(identity, copy, footer_length, object_size);
}

/* Keep a footer read and checked, here and in the shared cache. */
void
footer_cache_remember(const char *identity, const char *footer,
					  int64 footer_length, int64 object_size)
{
	if (!footer_cache_enabled() ||
		footer_length > footer_cache_max_footer(identity))
		return;					/* no backend with these settings would keep
								 * it */
	footer_cache_keep(identity, footer, footer_length, object_size);
	shared_footer_cache_put(identity, footer, footer_length, object_size);
}

/*
 * This backend does not know identity's footer: bring it from the shared
 * cache, if that knows it, into this backend's, and say whether it did.
 */
static bool
footer_cache_fetch_shared(const char *identity, int64 object_size_hint)
{
	char	   *footer;
	int64		footer_length;
	int64		object_size;
	FooterCacheEntry *entry;
	MemoryContext oldcontext;
	bool		found;

	if (footer_cache == NULL)
		footer_cache_init();

	/*
	 * Copied straight into the cache's memory: a large store's footers are
	 * megabytes, and in a new backend every page of a copy is a page fault.
	 */
	oldcontext = MemoryContextSwitchTo(footer_cache_context);
	found = shared_footer_cache_copy(identity, object_size_hint,
									 footer_cache_max_footer(identity),
									 &footer, &footer_length, &object_size);
	MemoryContextSwitchTo(oldcontext);
	if (!found)
		return false;
	entry = footer_cache_adopt(identity, footer, footer_length, object_size);
	if (entry == NULL)
		return false;			/* too large for this backend's cache */
	entry->from_shared = true;
	return true;
}

/* This backend's hits and misses so far. */
void
footer_cache_get_counters(FooterCacheCounters *counters)
{
	*counters = footer_cache_counters;
}
