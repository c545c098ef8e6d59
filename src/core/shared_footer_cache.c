/*-------------------------------------------------------------------------
 *
 * shared_footer_cache.c
 *		Footers of segments in shared memory, so that a new backend (a new
 *		connection, a parallel worker, the sweeper) finds the footers others
 *		read instead of fetching and checking them again.
 *
 * The same rule as the backend-local cache (footer_cache.c) makes this
 * safe without invalidation: only objects whose names are never reused are
 * kept, under the caller's identity (access fingerprint, incarnation, key),
 * so an identity names one sequence of bytes for good.
 *
 * Layout.  One fixed region of rollout_fdw.shared_footer_cache_size: a
 * ring of records (identity and footer bytes, written one after the other)
 * and an index of entries pointing into it by logical position (a byte
 * count that only grows).  A record never wraps around the ring's end; the
 * writer skips to the start instead.  The ring is a FIFO: writing a record
 * overwrites the oldest, and an entry whose position is more than a ring
 * behind the head is stale.  The index is open addressing over a short
 * probe window; a full window gives up its oldest entry.  FIFO rather than
 * LRU keeps a hit a pure read under a shared lock; the backend-local cache
 * in front of it keeps what each backend uses most.
 *
 * Locking.  One LWLock: a lookup copies the footer out under it in shared
 * mode (a footer is at most an eighth of the ring), a store writes in
 * exclusive mode.  Nothing is ever pointed to outside the lock, so there
 * are no pins to release when a backend errors or dies.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "rollout/shared_footer_cache.h"

/* rollout_fdw.shared_footer_cache_size (kB; 0: no shared cache) */
static int	shared_footer_cache_kb = 64 * 1024;

#define PROBE_WINDOW		8
#define BYTES_PER_ENTRY		4096	/* ring bytes per index entry */

typedef struct SharedFooterEntry
{
	uint64		hash;			/* of the identity; 0 with position 0: empty */
	uint64		position;		/* logical position of its record */
	uint64		length;			/* of its record */
} SharedFooterEntry;

/* A record in the ring; the identity (no NUL) and the footer follow. */
typedef struct SharedFooterRecord
{
	uint64		hash;
	int64		footer_length;
	int64		object_size;
	uint32		identity_length;
	uint32		padding;
} SharedFooterRecord;

typedef struct SharedFooterCache
{
	LWLock		lock;
	int			tranche_id;
	uint64		head;			/* logical position of the next record */
	uint64		ring_size;
	uint64		entry_count;	/* a power of two */
	Size		entries_offset; /* from the start of this struct */
	Size		ring_offset;
} SharedFooterCache;

static SharedFooterCache *cache = NULL;

void
shared_footer_cache_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.shared_footer_cache_size",
							"Shared memory for the footers of segments any backend read, so that other backends need no request for them.",
							"Only objects whose names are never reused are kept. 0 turns the shared cache off; each backend still has its own (rollout_fdw.footer_cache_size), and a session whose own is 0 uses neither.",
							&shared_footer_cache_kb,
							64 * 1024, 0, MAX_KILOBYTES,
							PGC_POSTMASTER,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/* Index entries for a ring of ring_size bytes: a power of two. */
static uint64
entries_for(uint64 ring_size)
{
	uint64		count = 256;

	while (count * BYTES_PER_ENTRY < ring_size)
		count *= 2;
	return count;
}

Size
shared_footer_cache_shmem_size(void)
{
	uint64		ring_size = (uint64) shared_footer_cache_kb * 1024;

	if (ring_size == 0)
		return 0;
	return add_size(add_size(MAXALIGN(sizeof(SharedFooterCache)),
							 mul_size(entries_for(ring_size), sizeof(SharedFooterEntry))),
					ring_size);
}

void
shared_footer_cache_shmem_init(void)
{
	bool		found;
	uint64		ring_size = (uint64) shared_footer_cache_kb * 1024;

	if (ring_size == 0)
		return;
	cache = ShmemInitStruct("rollout_fdw shared footer cache",
							shared_footer_cache_shmem_size(), &found);
	if (!found)
	{
		cache->tranche_id = LWLockNewTrancheId();
		LWLockInitialize(&cache->lock, cache->tranche_id);
		cache->head = 0;
		cache->ring_size = ring_size;
		cache->entry_count = entries_for(ring_size);
		cache->entries_offset = MAXALIGN(sizeof(SharedFooterCache));
		cache->ring_offset = cache->entries_offset +
			cache->entry_count * sizeof(SharedFooterEntry);
		memset((char *) cache + cache->entries_offset, 0,
			   cache->entry_count * sizeof(SharedFooterEntry));
	}
	LWLockRegisterTranche(cache->tranche_id, "rollout_fdw footer cache");
}

static SharedFooterEntry *
cache_entries(void)
{
	return (SharedFooterEntry *) ((char *) cache + cache->entries_offset);
}

static SharedFooterRecord *
cache_record(uint64 position)
{
	return (SharedFooterRecord *) ((char *) cache + cache->ring_offset +
								   position % cache->ring_size);
}

/* Does entry point to a record the ring still holds? */
static bool
entry_live(const SharedFooterEntry *entry)
{
	return entry->length > 0 && entry->position + cache->ring_size >= cache->head;
}

static uint64
identity_hash(const char *identity)
{
	uint64		hash = hash_bytes_extended((const unsigned char *) identity,
										   (int) strlen(identity), 1);

	return hash == 0 ? 1 : hash;
}

/* The live record of identity, or NULL; call with the lock held. */
static SharedFooterRecord *
cache_find(const char *identity, uint64 hash)
{
	SharedFooterEntry *entries = cache_entries();
	size_t		identity_length = strlen(identity);

	for (int i = 0; i < PROBE_WINDOW; i++)
	{
		SharedFooterEntry *entry = &entries[(hash + i) & (cache->entry_count - 1)];
		SharedFooterRecord *record;

		if (entry->hash != hash || !entry_live(entry))
			continue;
		record = cache_record(entry->position);
		if (record->hash == hash && record->identity_length == identity_length &&
			memcmp(record + 1, identity, identity_length) == 0)
			return record;
	}
	return NULL;
}

bool
shared_footer_cache_copy(const char *identity, int64 object_size_hint,
						 int64 max_length, char **footer, int64 *footer_length,
						 int64 *object_size)
{
	uint64		hash;
	SharedFooterRecord *record;
	bool		found = false;

	if (cache == NULL)
		return false;
	hash = identity_hash(identity);
	LWLockAcquire(&cache->lock, LW_SHARED);
	record = cache_find(identity, hash);
	if (record != NULL && record->footer_length <= max_length &&
		(object_size_hint < 0 || record->object_size == object_size_hint))
	{
		*footer_length = record->footer_length;
		*object_size = record->object_size;
		*footer = palloc_extended(record->footer_length, MCXT_ALLOC_HUGE);
		memcpy(*footer, (char *) (record + 1) + record->identity_length,
			   record->footer_length);
		found = true;
	}
	LWLockRelease(&cache->lock);
	return found;
}

void
shared_footer_cache_put(const char *identity, const char *footer,
						int64 footer_length, int64 object_size)
{
	size_t		identity_length = strlen(identity);
	uint64		length = MAXALIGN(sizeof(SharedFooterRecord) + identity_length +
								  footer_length);
	uint64		hash;
	SharedFooterEntry *entries;
	SharedFooterEntry *slot = NULL;
	SharedFooterRecord *record;
	uint64		position;

	if (cache == NULL || length > cache->ring_size / 8)
		return;
	hash = identity_hash(identity);
	LWLockAcquire(&cache->lock, LW_EXCLUSIVE);
	if (cache_find(identity, hash) != NULL)
	{
		LWLockRelease(&cache->lock);
		return;
	}

	/* a record never wraps: skip to the ring's start when it would */
	position = cache->head;
	if (position % cache->ring_size + length > cache->ring_size)
		position += cache->ring_size - position % cache->ring_size;
	cache->head = position + length;

	record = cache_record(position);
	record->hash = hash;
	record->footer_length = footer_length;
	record->object_size = object_size;
	record->identity_length = (uint32) identity_length;
	record->padding = 0;
	memcpy(record + 1, identity, identity_length);
	memcpy((char *) (record + 1) + identity_length, footer, footer_length);

	/* an empty or stale entry of the window, else its oldest */
	entries = cache_entries();
	for (int i = 0; i < PROBE_WINDOW; i++)
	{
		SharedFooterEntry *entry = &entries[(hash + i) & (cache->entry_count - 1)];

		if (!entry_live(entry))
		{
			slot = entry;
			break;
		}
		if (slot == NULL || entry->position < slot->position)
			slot = entry;
	}
	slot->hash = hash;
	slot->position = position;
	slot->length = length;
	LWLockRelease(&cache->lock);
}
