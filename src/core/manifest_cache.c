/*-------------------------------------------------------------------------
 *
 * manifest_cache.c
 *		Keep the newest parsed version of each manifest a backend read.
 *
 * Every snapshot reads every shard manifest and the base manifest, but they
 * change only when a flush, merge, compaction or claim commits a new version:
 * most snapshots find exactly the versions the previous one read.  Versions
 * are immutable objects, so a parsed version can be kept by its number
 * without invalidation; this saves the GET and the JSON parse of each.
 *
 * Entries are found by the access fingerprint of the store handle (the
 * location and the credentials it reads with: a manifest read under one
 * role's credentials is never handed to another), the store's name, its
 * incarnation (a store deleted and created again numbers its versions from 1
 * again) and the shard ("" for the base).  Each keeps the version read
 * last.  The manifests of one batch read share a memory context, freed when
 * the last entry using it goes, but never before the next call of this
 * module: what a call returns stays valid until then, even when it could not
 * be kept.  At most CACHE_ENTRIES entries are kept, the least recently used
 * going first, but never one the current call returns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/ilist.h"
#include "utils/memutils.h"

#include "rollout/manifest_cache.h"

#define CACHE_ENTRIES	256

/* A memory context holding the manifests of one read, and its users. */
typedef struct ParsedBatch
{
	MemoryContext context;
	int			entries;		/* cache entries pointing into it */
} ParsedBatch;

typedef struct CachedManifest
{
	dlist_node	node;			/* in cache_entries, most recent first */
	char		fingerprint[OBJSTORE_FINGERPRINT_LEN];
	uint64		read_digest;	/* parsed key bounds depend on it (store.h) */
	char	   *store_name;
	char	   *incarnation;
	char	   *shard;			/* "" for the base manifest */
	int64		version;
	void	   *manifest;		/* ShardManifest or BaseManifest */
	ParsedBatch *batch;
	uint64		used_by_call;	/* the last call that returned it */
} CachedManifest;

static MemoryContext cache_context = NULL;
static dlist_head cache_entries = DLIST_STATIC_INIT(cache_entries);
static int	cache_entry_count = 0;

/* Calls so far, and the batches the last one read (held until the next). */
static uint64 cache_calls = 0;
static List *last_call_batches = NIL;

/* Can this store's manifests be cached at all? */
static bool
manifest_cache_usable(RolloutStore *store)
{
	/* a store not created yet has no incarnation to tell creations apart */
	return store->incarnation != NULL && store->incarnation[0] != '\0';
}

static CachedManifest *
manifest_cache_find(RolloutStore *store, const char *shard)
{
	dlist_iter	iter;

	dlist_foreach(iter, &cache_entries)
	{
		CachedManifest *entry = dlist_container(CachedManifest, node, iter.cur);

		if (strcmp(entry->shard, shard) == 0 &&
			strcmp(entry->store_name, store->name) == 0 &&
			strcmp(entry->fingerprint, store->objstore->access_fingerprint) == 0 &&
			entry->read_digest == store->read_digest &&
			strcmp(entry->incarnation, store->incarnation) == 0)
		{
			dlist_move_head(&cache_entries, &entry->node);
			entry->used_by_call = cache_calls;
			return entry;
		}
	}
	return NULL;
}

static void
parsed_batch_release(ParsedBatch *batch)
{
	if (batch != NULL && --batch->entries == 0)
		MemoryContextDelete(batch->context);
}

static void
manifest_cache_remove(CachedManifest *entry)
{
	dlist_delete(&entry->node);
	parsed_batch_release(entry->batch);
	pfree(entry->store_name);
	pfree(entry->incarnation);
	pfree(entry->shard);
	pfree(entry);
	cache_entry_count--;
}

/* Keep manifest (in batch) as the newest version of (store, shard). */
static void
manifest_cache_put(RolloutStore *store, const char *shard, int64 version,
				   void *manifest, ParsedBatch *batch)
{
	CachedManifest *entry = manifest_cache_find(store, shard);

	if (entry != NULL)
		parsed_batch_release(entry->batch);
	else
	{
		if (cache_entry_count >= CACHE_ENTRIES)
		{
			CachedManifest *oldest = dlist_container(CachedManifest, node,
													 dlist_tail_node(&cache_entries));

			if (oldest->used_by_call != cache_calls)
				manifest_cache_remove(oldest);
		}
		entry = MemoryContextAllocZero(cache_context, sizeof(CachedManifest));
		strlcpy(entry->fingerprint, store->objstore->access_fingerprint,
				OBJSTORE_FINGERPRINT_LEN);
		entry->read_digest = store->read_digest;
		entry->store_name = MemoryContextStrdup(cache_context, store->name);
		entry->incarnation = MemoryContextStrdup(cache_context, store->incarnation);
		entry->shard = MemoryContextStrdup(cache_context, shard);
		dlist_push_head(&cache_entries, &entry->node);
		cache_entry_count++;
	}
	entry->version = version;
	entry->manifest = manifest;
	entry->batch = batch;
	entry->used_by_call = cache_calls;
	batch->entries++;
}

/*
 * Begin a call: the batch the previous call read may go now (the entries
 * that keep its manifests hold it).
 */
static void
manifest_cache_begin_call(void)
{
	ListCell   *lc;

	cache_calls++;
	foreach(lc, last_call_batches)
		parsed_batch_release(lfirst(lc));
	list_free(last_call_batches);
	last_call_batches = NIL;
}

/* A context for the manifests of one read, under the cache's context. */
static ParsedBatch *
parsed_batch_new(void)
{
	MemoryContext context;
	ParsedBatch *batch;

	if (cache_context == NULL)
		cache_context = AllocSetContextCreate(TopMemoryContext,
											  "rollout_fdw manifest cache",
											  ALLOCSET_SMALL_SIZES);
	context = AllocSetContextCreate(cache_context, "rollout_fdw parsed manifests",
									ALLOCSET_SMALL_SIZES);
	batch = MemoryContextAllocZero(context, sizeof(ParsedBatch));
	batch->context = context;
	return batch;
}

/* Keep batch until the next call: what this call returns points into it. */
static void
parsed_batch_hold(ParsedBatch *batch)
{
	MemoryContext oldcontext = MemoryContextSwitchTo(cache_context);

	batch->entries++;
	last_call_batches = lappend(last_call_batches, batch);
	MemoryContextSwitchTo(oldcontext);
}

/*
 * The manifests of versions (shard manifests in the order of shards), the
 * cached ones without a request and the others read in one batch; NULL where
 * a version does not exist (any more).
 */
static const ShardManifest **
manifest_cache_shards(RolloutStore *store, List *shards, const int64 *versions)
{
	int			count = list_length(shards);
	const ShardManifest **result = palloc0(sizeof(ShardManifest *) * Max(count, 1));
	List	   *missing = NIL;
	int64	   *missing_versions = palloc(sizeof(int64) * Max(count, 1));
	int		   *missing_index = palloc(sizeof(int) * Max(count, 1));
	ParsedBatch *batch;
	ShardManifest **read;
	MemoryContext oldcontext;
	ListCell   *lc;

	foreach(lc, shards)
	{
		int			i = foreach_current_index(lc);
		CachedManifest *entry = manifest_cache_find(store, lfirst(lc));

		if (entry != NULL && entry->version == versions[i])
			result[i] = entry->manifest;
		else
		{
			missing_versions[list_length(missing)] = versions[i];
			missing_index[list_length(missing)] = i;
			missing = lappend(missing, lfirst(lc));
		}
	}
	if (missing == NIL)
		return result;

	/* parse into a batch context; it is freed on error or when unused */
	batch = parsed_batch_new();
	oldcontext = MemoryContextSwitchTo(batch->context);
	PG_TRY();
	{
		read = shard_manifests_read_versions(store, missing, missing_versions);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcontext);
		MemoryContextDelete(batch->context);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcontext);
	parsed_batch_hold(batch);

	foreach(lc, missing)
	{
		int			m = foreach_current_index(lc);

		result[missing_index[m]] = read[m];
		if (read[m] != NULL)
			manifest_cache_put(store, lfirst(lc), missing_versions[m], read[m],
							   batch);
	}
	return result;
}

/* The same for one version of the base manifest (0: the empty one). */
static const BaseManifest *
manifest_cache_base(RolloutStore *store, int64 version)
{
	CachedManifest *entry;
	ParsedBatch *batch;
	BaseManifest *manifest;
	MemoryContext oldcontext;

	if (version == 0)
		return palloc0(sizeof(BaseManifest));
	entry = manifest_cache_find(store, "");
	if (entry != NULL && entry->version == version)
		return entry->manifest;

	batch = parsed_batch_new();
	oldcontext = MemoryContextSwitchTo(batch->context);
	PG_TRY();
	{
		manifest = base_manifest_read_version(store, version);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcontext);
		MemoryContextDelete(batch->context);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcontext);
	parsed_batch_hold(batch);

	if (manifest != NULL)
		manifest_cache_put(store, "", version, manifest, batch);
	return manifest;
}

/* See manifest_cache.h. */
bool
manifest_cache_read(RolloutStore *store, const ManifestVersions *versions,
					const ShardManifest ***shard_manifests,
					const BaseManifest **base)
{
	int			count = list_length(versions->shards);

	if (!manifest_cache_usable(store))
	{
		*shard_manifests = (const ShardManifest **)
			shard_manifests_read_versions(store, versions->shards,
										  versions->shard_versions);
		*base = versions->base_version == 0 ? palloc0(sizeof(BaseManifest)) :
			base_manifest_read_version(store, versions->base_version);
	}
	else
	{
		manifest_cache_begin_call();
		*shard_manifests = manifest_cache_shards(store, versions->shards,
												 versions->shard_versions);
		*base = manifest_cache_base(store, versions->base_version);
	}
	if (*base == NULL)
		return false;
	for (int i = 0; i < count; i++)
		if ((*shard_manifests)[i] == NULL)
			return false;
	return true;
}
