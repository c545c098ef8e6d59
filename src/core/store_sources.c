/*-------------------------------------------------------------------------
 *
 * store_sources.c
 *		Segments of a store as the segment reader reads them: one object,
 *		reads made ahead in batches, footers of many objects, and segments
 *		in local files.
 *
 * The segment reader (format/) reads through a SegmentSource, two
 * callbacks for a byte range and a tail.  Here they read store objects,
 * and serve what rollout_segment_sources_prefetch fetched ahead in one batch
 * of concurrent requests, so a remote store costs a few round trips where
 * reading one object after another would cost one per object.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#include "rollout/footer_cache.h"
#include "rollout/read_cache.h"
#include "rollout/store_definition.h"
#include "rollout/store_keys.h"
#include "rollout/store_sources.h"

/* ----------------------------------------------------------------
 * Segment sources over store objects
 * ----------------------------------------------------------------
 */

/*
 * A segment source over one object.  Bytes fetched ahead of time by
 * rollout_segment_sources_prefetch() wait in prefetched until the reader asks
 * for exactly that range (or that tail); each is served once and then freed,
 * so what a source holds is bounded by what was prefetched for it.  A read
 * nothing was prefetched for goes to the object store as before.
 */
typedef struct StoreObjectSource
{
	RolloutStore *store;		/* the handle the object was named through */
	ObjectStore *objstore;
	char	   *key;
	int64		size_hint;		/* the object's size if known, else -1 */
	char	   *cache_identity; /* names the object for good, or NULL */
	char	   *footer_identity;	/* names its footer, or NULL */
	bool		footer_cached;	/* its footer goes to the footer cache */
	FooterLoan *loan;			/* the footer the cache lent last, or NULL */
	bool		disk_cached;	/* its bytes go through the disk cache */
	List	   *prefetched;		/* PrefetchedRead * */
	MemoryContext context;		/* where the source and its reads live */
} StoreObjectSource;

/* One read made ahead of time: its request and its result. */
typedef struct PrefetchedRead
{
	bool		tail;
	int64		offset;
	int64		length;
	bool		found;
	int64		object_size;
	StringInfoData data;
} PrefetchedRead;

/*
 * The prefetched read matching a request, taken out of the source's list,
 * or NULL.
 */
static PrefetchedRead *
store_object_take_prefetched(StoreObjectSource *source, bool tail,
							 int64 offset, int64 length)
{
	ListCell   *lc;

	foreach(lc, source->prefetched)
	{
		PrefetchedRead *read = lfirst(lc);

		if (read->tail == tail && read->length == length &&
			(tail || read->offset == offset))
		{
			source->prefetched = foreach_delete_current(source->prefetched, lc);
			return read;
		}
	}
	return NULL;
}

/* Hand a prefetched read's result to the reader, and free it. */
static bool
store_object_serve_prefetched(PrefetchedRead *read, StringInfo out,
							  int64 *object_size)
{
	bool		found = read->found;

	if (found)
	{
		appendBinaryStringInfo(out, read->data.data, read->data.len);
		if (object_size)
			*object_size = read->object_size;
	}
	pfree(read->data.data);
	pfree(read);
	return found;
}

/*
 * One read of source's object from the store, through the disk cache when
 * the object may be kept there.
 */
static bool
store_object_read(StoreObjectSource *source, bool tail, int64 offset,
				  int64 length, StringInfo out, int64 *object_size)
{
	ObjectStoreRead read = {0};
	const char *cache_id = source->cache_identity;

	read.key = source->key;
	read.offset = tail ? 0 : offset;
	read.length = length;
	read.tail = tail;
	read.size_hint = source->size_hint;
	read.immutable = cache_id != NULL;
	read.out = out;
	if (source->disk_cached)
		read_cache_get_many(source->objstore, &read, &cache_id, 1);
	else
		objstore_read(source->objstore, &read);
	if (read.found && object_size != NULL)
		*object_size = read.object_size;
	return read.found;
}

/*
 * read_range callback of rollout_segment_source: served from a prefetched read
 * of exactly this range when there is one, else read from the object store.
 */
static bool
store_object_read_range(void *arg, int64 offset, int64 length, StringInfo out)
{
	StoreObjectSource *source = arg;
	PrefetchedRead *read = store_object_take_prefetched(source, false,
														offset, length);
	bool		found;

	if (read != NULL)
		found = store_object_serve_prefetched(read, out, NULL);
	else
		found = store_object_read(source, false, offset, length, out, NULL);

	/* gone because the store was deleted under the handle: say that instead */
	if (!found)
		rollout_store_check_current(source->store, 0);
	return found;
}

/*
 * read_tail callback of rollout_segment_source: the last length bytes and the
 * object's size, from a prefetched tail read of that length when there is one,
 * else from the object store.
 */
static bool
store_object_read_tail(void *arg, int64 length, StringInfo out,
					   int64 *object_size)
{
	StoreObjectSource *source = arg;
	PrefetchedRead *read = store_object_take_prefetched(source, true, 0, length);

	if (read != NULL)
		return store_object_serve_prefetched(read, out, object_size);
	return store_object_read(source, true, 0, length, out, object_size);
}

/*
 * known_footer callback: the footer cache's, lent, if it has one of an
 * object of the size the manifest gives (when it gives one).
 */
static bool
store_object_known_footer(void *arg, const char **footer, int64 *footer_length,
						  int64 *object_size, const SegmentReader **decoded)
{
	StoreObjectSource *source = arg;

	source->loan = NULL;
	if (!footer_cache_borrow(source->footer_identity, source->size_hint,
							 footer, footer_length, object_size, &source->loan))
		return false;
	*decoded = footer_cache_loan_decoded(source->loan);
	return true;
}

/* footer_decoded callback: keep it with the footer it was decoded from. */
static void
store_object_footer_decoded(void *arg, SegmentReader *decoded,
							MemoryContext context)
{
	StoreObjectSource *source = arg;

	Assert(source->loan != NULL);
	footer_cache_loan_keep_decoded(source->loan, decoded, context);
}

/* footer_read callback: keep what the reader read and checked. */
static void
store_object_footer_read(void *arg, const char *footer, int64 footer_length,
						 int64 object_size)
{
	StoreObjectSource *source = arg;

	footer_cache_remember(source->footer_identity, footer, footer_length,
						  object_size);
}

/*
 * The cache identity of key's bytes, for the disk cache: the store's access
 * fingerprint (the location and the credentials, so that one role never
 * reads what only another's credentials fetched), its incarnation and the
 * key.  NULL when no cache may keep the object: the store has no
 * incarnation yet, or the name may be reused (rollout_key_is_unique).
 */
static char *
store_object_cache_identity(RolloutStore *store, const char *key)
{
	if (store->incarnation == NULL || !rollout_key_is_unique(store, key))
		return NULL;
	return psprintf("%s/%s/%s", store->objstore->access_fingerprint,
					store->incarnation, key);
}

/*
 * The footer cache's identity of key: the cache identity with the store's
 * read digest (a kept footer's statistics were decoded with the handle's
 * column types and checks, store.h), or, for a generation whose newest
 * stamp the manifest gives, the same with that stamp.  A lookup in a store
 * with unmerged generations would otherwise read the footer of each of them
 * again at every statement.  A generation's number names one object for
 * good within one creation of the store (rollout_key_is_generation); the
 * stamp also tells apart the generations of the same number of two
 * creations, which a backend still holding a handle on a deleted creation
 * could otherwise mix up (a footer's key filter and zone maps could then
 * skip the other object's rows).  Generations stay out of the disk cache
 * and are not kept open, whose bytes would be the old object's own.
 */
static char *
store_object_footer_identity(RolloutStore *store, const char *key,
							 int64 manifest_stamp, char *cache_identity)
{
	if (cache_identity != NULL)
		return psprintf("%s#%016llx", cache_identity,
						(unsigned long long) store->read_digest);
	if (store->incarnation == NULL || manifest_stamp <= 0 ||
		!rollout_key_is_generation(store, key))
		return NULL;
	return psprintf("%s/%s/%s@%lld#%016llx", store->objstore->access_fingerprint,
					store->incarnation, key, (long long) manifest_stamp,
					(unsigned long long) store->read_digest);
}

/*
 * The source remembers CurrentMemoryContext, where
 * rollout_segment_sources_prefetch later puts the bytes it fetches for it,
 * whatever context is current then.  size_hint reaches the object store only
 * through prefetched reads: the callbacks' own reads do not pass it.
 */
SegmentSource *
rollout_segment_source(RolloutStore *store, const char *key, int64 size_hint,
					   int64 manifest_stamp)
{
	SegmentSource *source = palloc0(sizeof(SegmentSource));
	StoreObjectSource *arg = palloc0(sizeof(StoreObjectSource));

	arg->store = store;
	arg->objstore = store->objstore;
	arg->key = pstrdup(key);
	arg->size_hint = size_hint;
	arg->cache_identity = store_object_cache_identity(store, key);
	arg->footer_identity = store_object_footer_identity(store, key,
														manifest_stamp,
														arg->cache_identity);
	arg->context = CurrentMemoryContext;
	source->name = arg->key;
	source->arg = arg;
	source->read_range = store_object_read_range;
	source->read_tail = store_object_read_tail;
	source->cheap_reads = store->location_is_default ||
		objstore_location_is_local(store->location);
	source->expected_schema = &store->schema;
	arg->footer_cached = arg->footer_identity != NULL && footer_cache_enabled();
	arg->disk_cached = arg->cache_identity != NULL && !source->cheap_reads &&
		read_cache_enabled();
	if (arg->footer_cached)
	{
		source->known_footer = store_object_known_footer;
		source->footer_decoded = store_object_footer_decoded;
		source->footer_read = store_object_footer_read;
	}
	return source;
}

/*
 * Did a read made ahead for source find its object gone?  Only a source of
 * rollout_segment_source can tell; others answer false.  A reader that took
 * its footer from the footer cache learns here, from the first batch of row
 * groups, what opening the object would have told it.
 */
bool
rollout_segment_source_missing(SegmentSource *source)
{
	StoreObjectSource *arg;
	ListCell   *lc;

	if (source->read_range != store_object_read_range)
		return false;
	arg = source->arg;
	foreach(lc, arg->prefetched)
	{
		if (!((PrefetchedRead *) lfirst(lc))->found)
			return true;
	}
	return false;
}

/*
 * A segment in a local file (the sorted rows of a transaction whose buffer
 * spilled to disk, read by its own scans): every read opens, reads and
 * closes the file, so nothing stays open across an ERROR.
 */
static bool
local_file_read(const char *path, int64 offset, int64 length, bool tail,
				StringInfo out, int64 *object_size)
{
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	struct stat st;
	int64		start;
	int64		count;

	if (fd < 0)
	{
		if (errno == ENOENT)
			return false;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	}
	if (fstat(fd, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (object_size != NULL)
		*object_size = (int64) st.st_size;
	if (tail)
	{
		count = Min(length, (int64) st.st_size);
		start = (int64) st.st_size - count;
	}
	else
	{
		start = Min(offset, (int64) st.st_size);
		count = length < 0 ? (int64) st.st_size - start
			: Min(length, (int64) st.st_size - start);
	}
	enlargeStringInfo(out, (int) count);
	if (count > 0 &&
		pg_pread(fd, out->data + out->len, count, start) != count)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", path)));
	out->len += (int) count;
	out->data[out->len] = '\0';
	CloseTransientFile(fd);
	return true;
}

static bool
local_file_read_range(void *arg, int64 offset, int64 length, StringInfo out)
{
	return local_file_read(arg, offset, length, false, out, NULL);
}

static bool
local_file_read_tail(void *arg, int64 length, StringInfo out, int64 *object_size)
{
	return local_file_read(arg, 0, length, true, out, object_size);
}

/*
 * The path, copied, is the argument of both callbacks; every read opens and
 * closes the file (local_file_read), so the source holds no descriptor and
 * needs no closing.  A file that does not exist reads as a missing object.
 */
SegmentSource *
rollout_local_segment_source(const char *path)
{
	SegmentSource *source = palloc0(sizeof(SegmentSource));
	char	   *copy = pstrdup(path);

	source->name = copy;
	source->arg = copy;
	source->read_range = local_file_read_range;
	source->read_tail = local_file_read_tail;
	source->cheap_reads = true;
	return source;
}

/*
 * rollout_segment_sources_prefetch
 *		Fetch reads of many store objects in one batch of concurrent requests
 *		and keep each result in its source, for the reader to find.
 *
 * The results (bytes, or "the object does not exist") are exactly what the
 * reads would have returned if made one by one now; the reader meets them
 * when it asks, as it would have met them from the store.  Each source must
 * come from rollout_segment_source(); the bytes live in its memory context.
 * A tail read of an object whose footer the footer cache holds is left out:
 * the reader will not ask for it.
 */
void
rollout_segment_sources_prefetch(RolloutStore *store,
								 SegmentPrefetch *prefetches, int count)
{
	ObjectStoreRead *reads;
	const char **cache_ids;
	PrefetchedRead **results;
	SegmentPrefetch *wanted = NULL;
	int			nwanted = 0;

	for (int i = 0; i < count; i++)
	{
		StoreObjectSource *source = prefetches[i].source->arg;

		if (prefetches[i].tail && source->footer_cached &&
			footer_cache_contains(source->footer_identity))
			continue;
		if (wanted == NULL)
			wanted = palloc(sizeof(SegmentPrefetch) * count);
		wanted[nwanted++] = prefetches[i];
	}
	prefetches = wanted;
	count = nwanted;
	if (count <= 0)
		return;
	reads = palloc0(sizeof(ObjectStoreRead) * count);
	cache_ids = palloc0(sizeof(char *) * count);
	results = palloc(sizeof(PrefetchedRead *) * count);
	for (int i = 0; i < count; i++)
	{
		StoreObjectSource *source = prefetches[i].source->arg;
		PrefetchedRead *result = MemoryContextAllocZero(source->context,
														sizeof(PrefetchedRead));

		Assert(prefetches[i].source->read_range == store_object_read_range);
		result->tail = prefetches[i].tail;
		result->offset = prefetches[i].tail ? 0 : prefetches[i].offset;
		result->length = prefetches[i].length;
		result->data.data = MemoryContextAlloc(source->context, 1024);
		result->data.maxlen = 1024;
		result->data.len = 0;
		result->data.data[0] = '\0';
		results[i] = result;

		reads[i].key = source->key;
		reads[i].offset = result->offset;
		reads[i].length = result->length;
		reads[i].tail = result->tail;
		reads[i].size_hint = source->size_hint;
		reads[i].immutable = source->cache_identity != NULL;
		reads[i].out = &result->data;
		if (source->disk_cached)
			cache_ids[i] = source->cache_identity;
	}

	read_cache_get_many(store->objstore, reads, cache_ids, count);

	for (int i = 0; i < count; i++)
	{
		StoreObjectSource *source = prefetches[i].source->arg;
		MemoryContext oldcontext = MemoryContextSwitchTo(source->context);

		results[i]->found = reads[i].found;
		results[i]->object_size = reads[i].object_size;
		source->prefetched = lappend(source->prefetched, results[i]);
		MemoryContextSwitchTo(oldcontext);
	}
	pfree(reads);
	pfree(cache_ids);
	pfree(results);
	pfree(wanted);
}

/*
 * rollout_segment_footers
 *		Open many objects' segment readers, their footers fetched with
 *		concurrent requests, and hand each to callback in order.
 *
 * The footers are fetched a window at a time (one batch each), so that a
 * remote store costs a few round trips per window rather than one per
 * object, while the bytes held at once stay bounded.  callback gets the
 * reader of keys[i], or NULL when the object does not exist; the reader is
 * closed when callback returns, so callback must not keep it.  sizes may be
 * NULL (unknown) or give each object's size (-1: unknown).
 */
void
rollout_segment_footers(RolloutStore *store, char *const *keys,
						const int64 *sizes, int count,
						SegmentFooterCallback callback, void *arg)
{
	int			window = Max(64, 4 * objstore_max_concurrent_requests);
	MemoryContext window_context;
	MemoryContext oldcontext = CurrentMemoryContext;

	if (count <= 0)
		return;
	window_context = AllocSetContextCreate(CurrentMemoryContext,
										   "rollout segment footers",
										   ALLOCSET_DEFAULT_SIZES);
	for (int start = 0; start < count; start += window)
	{
		int			end = Min(count, start + window);
		SegmentPrefetch *prefetches;

		MemoryContextSwitchTo(window_context);
		prefetches = palloc(sizeof(SegmentPrefetch) * (end - start));
		for (int i = start; i < end; i++)
		{
			prefetches[i - start].source =
				rollout_segment_source(store, keys[i], sizes ? sizes[i] : -1, -1);
			prefetches[i - start].tail = true;
			prefetches[i - start].offset = 0;
			prefetches[i - start].length = SEGMENT_TAIL_READ_SIZE;
		}
		rollout_segment_sources_prefetch(store, prefetches, end - start);

		for (int i = start; i < end; i++)
		{
			SegmentReader *reader;

			CHECK_FOR_INTERRUPTS();
			MemoryContextSwitchTo(window_context);
			reader = segment_reader_open(prefetches[i - start].source);
			MemoryContextSwitchTo(oldcontext);
			callback(reader, i, arg);
			if (reader != NULL)
				segment_reader_close(reader);
		}
		MemoryContextReset(window_context);
	}
	MemoryContextSwitchTo(oldcontext);
	MemoryContextDelete(window_context);
}
