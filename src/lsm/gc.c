/*-------------------------------------------------------------------------
 *
 * gc.c
 *		Garbage collection: delete what no manifest a reader may still use
 *		references (DESIGN.md §7.3).
 *
 * The grace period protects readers and writers, and it has to be measured
 * from the right moment.  An object becomes garbage when a manifest version
 * that no longer names it becomes current, not when the object was written:
 * a generation flushed two hours ago and merged a minute ago is still read
 * by every scan whose snapshot is older than that minute.  So gc keeps every
 * manifest version that was current at some time within the grace period
 * (the newest one, and each one whose successor was created after
 * now - grace), and protects everything those versions reference.  A scan
 * shorter than the grace period therefore never loses an object.
 *
 * Writers are protected by age: an object younger than the grace period is
 * never deleted, which covers uploaded outputs a merge, compaction or flush
 * is about to commit; such a writer abandons its commit when its outputs
 * have waited longer than half the grace period (rollout_output_too_old).
 *
 * Named snapshots (core/named_snapshot.c) that a retention keeps are kept
 * the same way: the manifest versions a retained token names are kept with
 * everything they reference, whatever their age, until the retention
 * expires; expired retentions are deleted.
 *
 * What is deleted, each only when older than the grace period:
 *	- base fragments no kept base version references (any cluster);
 *	- this shard's generations no kept shard version references, and WAL
 *	  entries at or below the smallest replay_after of the kept shard
 *	  versions, but never a fence marker (only a shard's own writer collects
 *	  its WAL and generations);
 *	- this shard's ingest segments that neither a kept shard version (as an
 *	  adopted generation) nor a WAL entry after replay_after names, unless
 *	  the manifests may have changed in a way the WAL listing cannot show
 *	  (gc_ingest_view_current);
 *	- manifest versions that are no longer kept (after the fragments,
 *	  generations and segments they name; a shard's sealed WAL entries come
 *	  last, as the kept versions seal them too);
 *	- what uploads interrupted by a crash left outside the key space (the
 *	  file backend's temporary files; objstore_remove_abandoned_uploads).
 * gc deletes only what committed manifests unlink, so a crash at any point
 * leaves nothing the next run cannot remove.  Deletions go out in batches of
 * concurrent requests (GcDeletions).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "rollout/fault.h"
#include "rollout/gc.h"
#include "rollout/grace.h"
#include "rollout/ingest.h"
#include "rollout/maintenance_cost.h"
#include "rollout/manifest.h"
#include "rollout/named_snapshot.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_definition.h"
#include "rollout/store_keys.h"
#include "rollout/store_sources.h"
#include "rollout/store_stats.h"
#include "rollout/wal.h"

/* The manifest versions of one _manifest/ folder, oldest first. */
typedef struct GcVersions
{
	List	   *entries;		/* ObjectStoreEntry * of versions */
	int			first_kept;		/* index of the oldest kept version */
	int64	   *retained;		/* version numbers retentions keep */
	int			retained_count;
	bool		keep_all;		/* a retention's token could not be read */
} GcVersions;

/*
 * List a manifest folder and decide which versions readers may still use:
 * the newest, and every version whose successor was created after cutoff.
 */
static GcVersions
gc_manifest_versions(RolloutStore *store, const char *prefix, TimestampTz cutoff)
{
	GcVersions	versions = {NIL, 0, NULL, 0, false};
	List	   *objects = objstore_list_all(store->objstore, prefix, NULL);
	ListCell   *lc;
	int			n;

	foreach(lc, objects)
	{
		ObjectStoreEntry *entry = lfirst(lc);

		if (rollout_key_number(entry->key) > 0)
			versions.entries = lappend(versions.entries, entry);
	}
	n = list_length(versions.entries);
	versions.first_kept = Max(n - 1, 0);
	for (int i = n - 2; i >= 0; i--)
	{
		ObjectStoreEntry *successor = list_nth(versions.entries, i + 1);

		if (successor->modified > cutoff)
			versions.first_kept = i;
		else
			break;
	}
	return versions;
}

/*
 * Note in versions the version numbers that the unexpired retentions' tokens
 * of this creation of the store name: of the base manifest (shard NULL) or
 * of shard's manifest.  An unexpired retention whose token is not a valid
 * one keeps every version: what it was meant to keep cannot be known, and
 * gc must not delete what a snapshot someone retained reads
 * (gc_warn_unreadable_retentions says so).
 */
static void
gc_note_retained(RolloutStore *store, List *retentions, const char *shard,
				 GcVersions *versions)
{
	ListCell   *lc;
	int			room = 1;

	/* a version per token and shard (tokens list each shard once) */
	foreach(lc, retentions)
	{
		NamedSnapshot *named = ((RetainedSnapshot *) lfirst(lc))->snapshot;

		room += named != NULL ? list_length(named->versions.shards) + 1 : 0;
	}
	versions->retained = palloc(sizeof(int64) * room);
	foreach(lc, retentions)
	{
		RetainedSnapshot *retained = lfirst(lc);
		NamedSnapshot *named = retained->snapshot;
		ListCell   *sc;

		if (named == NULL && retained->token != NULL)
			versions->keep_all = true;
		if (named == NULL || !named_snapshot_of_store(store, named))
			continue;
		if (shard == NULL)
		{
			versions->retained[versions->retained_count++] =
				named->versions.base_version;
			continue;
		}
		foreach(sc, named->versions.shards)
		{
			if (strcmp(lfirst(sc), shard) == 0)
				versions->retained[versions->retained_count++] =
					named->versions.shard_versions[foreach_current_index(sc)];
		}
	}

	/*
	 * A retention skipped as another store's because the store was found
	 * deleted under this handle meanwhile (named_snapshot_of_store) must not
	 * let gc go on as if nothing retained it.
	 */
	if (store->stale)
		rollout_store_check_current(store, 0);
}

/* Is version number a retention keeps? */
static bool
gc_version_retained(const GcVersions *versions, int64 number)
{
	if (versions->keep_all)
		return true;
	for (int i = 0; i < versions->retained_count; i++)
	{
		if (versions->retained[i] == number)
			return true;
	}
	return false;
}

/*
 * The versions gc reads the references of: the kept ones, and the older
 * ones a retention keeps.
 */
static bool
gc_version_referenced(const GcVersions *versions, int index)
{
	ObjectStoreEntry *entry = list_nth(versions->entries, index);

	return index >= versions->first_kept ||
		gc_version_retained(versions, rollout_key_number(entry->key));
}

/*
 * The deletions of a gc run.  Objects to delete are gathered and sent
 * GC_DELETE_BATCH at a time as concurrent requests (objstore_delete_many):
 * one after the other, a remote store 20 ms away deletes about 25 objects a
 * second, fewer than a busy shard writes WAL entries.  What is gathered is
 * sent before any manifest version goes (gc_delete_old_versions), so the
 * order of DESIGN.md §7.3 holds, and at the end of the run.
 */
#define GC_DELETE_BATCH		128


/* WAL entries whose footers gc reads before it looks at stop_at again */
#define GC_FOOTER_CHUNK		1024

typedef struct GcDeletions
{
	GcResult	result;			/* what was deleted so far; stopped */
	TimestampTz stop_at;		/* gather nothing once it came (0: never) */
	int64		batches_sent;
	int			count;			/* entries gathered, not sent yet */
	ObjectStoreEntry *pending[GC_DELETE_BATCH];
} GcDeletions;

/* batches sent by every gc of this process (rollout_gc_batches_sent) */
static int64 gc_batches_sent_total = 0;

/*
 * Has the run's stop_at come?  Then it gathers no more (result.stopped).  A
 * run stops only once it has sent a batch: one whose listings and reads
 * alone take its time would otherwise stop before every first deletion,
 * again and again, and never collect anything.
 */
static bool
gc_stopped(GcDeletions *deletions)
{
	if (!deletions->result.stopped && deletions->stop_at != 0 &&
		deletions->batches_sent > 0 &&
		GetCurrentTimestamp() >= deletions->stop_at)
		deletions->result.stopped = true;
	return deletions->result.stopped;
}

/*
 * Send the gathered deletions, counting each object deleted and the size the
 * listing reported for it; one already gone (a concurrent gc) counts
 * nothing.  The fault point gc.after_delete follows each batch.
 */
static void
gc_send_deletions(RolloutStore *store, GcDeletions *deletions)
{
	const char *keys[GC_DELETE_BATCH] = {0};
	bool		deleted[GC_DELETE_BATCH];
	int			count = deletions->count;
	MemoryContext batch_context;
	MemoryContext oldcontext;

	if (count == 0)
		return;
	for (int i = 0; i < count; i++)
		keys[i] = deletions->pending[i]->key;
	deletions->count = 0;
	deletions->batches_sent++;
	gc_batches_sent_total++;

	/* the requests' URLs and answers, a few kB per object, go with the batch */
	batch_context = AllocSetContextCreate(CurrentMemoryContext,
										  "rollout gc deletions",
										  ALLOCSET_DEFAULT_SIZES);
	oldcontext = MemoryContextSwitchTo(batch_context);
	objstore_delete_many(store->objstore, keys, count, deleted);
	MemoryContextSwitchTo(oldcontext);
	MemoryContextDelete(batch_context);
	for (int i = 0; i < count; i++)
	{
		if (!deleted[i])
			continue;
		deletions->result.objects_deleted++;
		deletions->result.bytes_freed += deletions->pending[i]->size;
	}
	rollout_fault_point("gc.after_delete");
	maintenance_cost_delay_point();
}

/* Delete one listed object, with the next batch (unless the run stopped). */
static void
gc_delete(RolloutStore *store, ObjectStoreEntry *entry, GcDeletions *deletions)
{
	CHECK_FOR_INTERRUPTS();
	if (gc_stopped(deletions))
		return;
	deletions->pending[deletions->count++] = entry;
	if (deletions->count == GC_DELETE_BATCH)
		gc_send_deletions(store, deletions);
}

/* Delete the manifest versions older than the kept ones. */
static void
gc_delete_old_versions(RolloutStore *store, GcVersions *versions,
					   TimestampTz cutoff, GcDeletions *deletions)
{
	/* the objects they unlink go first */
	gc_send_deletions(store, deletions);
	for (int i = 0; i < versions->first_kept; i++)
	{
		ObjectStoreEntry *entry = list_nth(versions->entries, i);

		if (entry->modified <= cutoff &&
			!gc_version_retained(versions, rollout_key_number(entry->key)))
			gc_delete(store, entry, deletions);
	}
	gc_send_deletions(store, deletions);
}

/*
 * Is key in a list of key strings?  A linear search, run for each listed
 * object against the keys the kept manifest versions reference.
 */
static bool
gc_key_in(List *keys, const char *key)
{
	ListCell   *lc;

	foreach(lc, keys)
	{
		if (strcmp(lfirst(lc), key) == 0)
			return true;
	}
	return false;
}

/* Base fragments and base manifest versions. */
static void
gc_base(RolloutStore *store, List *retentions, TimestampTz cutoff,
		GcDeletions *deletions)
{
	GcVersions	versions;
	List	   *referenced = NIL;
	List	   *objects;
	ListCell   *lc;

	versions = gc_manifest_versions(store, rollout_key_base_manifest_prefix(store),
									cutoff);
	gc_note_retained(store, retentions, NULL, &versions);
	for (int i = 0; i < list_length(versions.entries); i++)
	{
		ObjectStoreEntry *entry = list_nth(versions.entries, i);
		BaseManifest *base;

		if (!gc_version_referenced(&versions, i))
			continue;
		base = base_manifest_read_version(store, rollout_key_number(entry->key));
		if (base == NULL)
			continue;			/* removed by a concurrent gc */
		foreach(lc, base->fragments)
			referenced = lappend(referenced, ((FragmentEntry *) lfirst(lc))->file);
	}

	objects = objstore_list_all(store->objstore,
								psprintf("%s/base/data/", store->name), NULL);
	foreach(lc, objects)
	{
		ObjectStoreEntry *entry = lfirst(lc);

		if (entry->modified <= cutoff && !gc_key_in(referenced, entry->key))
			gc_delete(store, entry, deletions);
	}
	gc_delete_old_versions(store, &versions, cutoff, deletions);
}

/* Add the ingest segments an unsealed WAL entry names to *(List **) arg. */
static void
gc_note_ingest_references(SegmentReader *reader, int index, void *arg)
{
	List	  **live = arg;
	ListCell   *ic;

	if (reader == NULL)
		return;
	foreach(ic, wal_metadata_from_json(reader->metadata, reader->source->name)->ingest)
		* live = lappend(*live, ((WalIngestRef *) lfirst(ic))->file);
}

/*
 * Can the WAL entries listed just now stand in for the shard manifest
 * versions read at manifests_read_at?  A segment is live through a WAL entry
 * until a flush adopts it into a manifest version this gc did not read; a
 * concurrent gc collects that entry once the adopting version is sealed by
 * every version it keeps.  When the shard had a manifest, the version this
 * gc read stays kept by any gc for a grace period after its successor came,
 * and so does the entry: it suffices that the read is recent (half the
 * minimum grace, as for every writer).  When the shard had none, nothing
 * keeps the entry once the first version appears, so the shard must still
 * have none.
 */
static bool
gc_ingest_view_current(RolloutStore *store, TimestampTz manifests_read_at,
					   bool shard_had_manifest)
{
	if (rollout_output_too_old(manifests_read_at))
		return false;
	if (shard_had_manifest)
		return true;
	return objstore_list_all(store->objstore,
							 rollout_key_shard_manifest_prefix(store, store->shard),
							 NULL) == NIL;
}

/*
 * This shard's ingest segments: a segment is live while a kept shard
 * manifest lists it as an adopted generation (in referenced) or a WAL entry
 * not yet sealed names it; anything else is the leftover of a transaction
 * that failed after staging, or of a generation merged away.  The manifests
 * were read at manifests_read_at (none when !shard_had_manifest); if the WAL
 * listed after them may miss an entry that named an adopted segment, the
 * segments are left to the next run.
 */
static void
gc_own_ingest(RolloutStore *store, List *referenced, int64 replay_after,
			  TimestampTz manifests_read_at, bool shard_had_manifest,
			  TimestampTz cutoff, GcDeletions *deletions)
{
	List	   *objects = objstore_list_all(store->objstore, ingest_key_prefix(store), NULL);
	List	   *live = list_copy(referenced);
	ListCell   *lc;
	List	   *wal;
	char	  **keys;
	int64	   *sizes;

	if (objects == NIL)
		return;
	rollout_fault_point("gc.before_ingest_wal");
	wal = wal_list_after(store, store->shard, Max(replay_after, 0));
	keys = palloc(sizeof(char *) * Max(list_length(wal), 1));
	sizes = palloc(sizeof(int64) * Max(list_length(wal), 1));
	foreach(lc, wal)
	{
		WalEntryRef *entry = lfirst(lc);

		keys[foreach_current_index(lc)] = entry->key;
		sizes[foreach_current_index(lc)] = entry->size;
	}
	rollout_segment_footers(store, keys, sizes, list_length(wal),
							gc_note_ingest_references, &live);
	if (!gc_ingest_view_current(store, manifests_read_at, shard_had_manifest))
	{
		ereport(LOG,
				(errmsg("garbage collection of store \"%s\" leaves its ingest segments to its next run",
						store->name),
				 errdetail("The shard manifest changed, or was read more than half of rollout_fdw.min_gc_grace ago, before the WAL entries that name segments were listed.")));
		return;
	}
	foreach(lc, objects)
	{
		ObjectStoreEntry *entry = lfirst(lc);

		if (entry->modified <= cutoff && !gc_key_in(live, entry->key))
			gc_delete(store, entry, deletions);
	}
}

/* What gc_wal_footer needs: the candidates, and whom to tell. */
typedef struct SealedEntries
{
	RolloutStore *store;
	ObjectStoreEntry **entries;
	GcDeletions *deletions;
} SealedEntries;

/*
 * Delete one sealed WAL entry unless it is a fence marker.  A fence holds no
 * rows, so only an entry without rows needs its metadata read; one that
 * vanished meanwhile is left alone.
 */
static void
gc_wal_footer(SegmentReader *reader, int index, void *arg)
{
	SealedEntries *sealed = arg;
	ObjectStoreEntry *entry = sealed->entries[index];

	if (reader == NULL)
		return;
	if (reader->row_count == 0 &&
		strcmp(wal_metadata_from_json(reader->metadata, entry->key)->kind,
			   "fence") == 0)
		return;
	gc_delete(sealed->store, entry, sealed->deletions);
}

/*
 * Delete the sealed WAL entries of one listing page (gc_own_wal); true when
 * the page reached past replay_after, so no later page holds any.
 */
static bool
gc_sealed_wal_page(RolloutStore *store, ObjectStoreListing *page,
				   int64 replay_after, TimestampTz cutoff,
				   GcDeletions *deletions)
{
	SealedEntries sealed = {store, NULL, deletions};
	ObjectStoreEntry **entries = palloc(sizeof(ObjectStoreEntry *) * Max(page->count, 1));
	char	  **keys = palloc(sizeof(char *) * Max(page->count, 1));
	int64	   *sizes = palloc(sizeof(int64) * Max(page->count, 1));
	bool		past_sealed = false;
	int			count = 0;

	for (int i = 0; i < page->count; i++)
	{
		ObjectStoreEntry *entry = &page->entries[i];
		int64		position = rollout_key_number(entry->key);

		if (position <= 0 || position > replay_after)
		{
			past_sealed = true; /* listed in position order */
			break;
		}
		if (entry->modified > cutoff)
			continue;
		entries[count] = entry;
		keys[count] = entry->key;
		sizes[count] = entry->size;
		count++;
	}

	/* in chunks: a run that stopped reads no more footers */
	for (int start = 0; start < count && !gc_stopped(deletions);
		 start += GC_FOOTER_CHUNK)
	{
		sealed.entries = entries + start;
		rollout_segment_footers(store, keys + start, sizes + start,
								Min(GC_FOOTER_CHUNK, count - start),
								gc_wal_footer, &sealed);
	}
	return past_sealed;
}

/*
 * This shard's WAL entries that every kept shard version has sealed into a
 * generation (positions up to replay_after), when older than cutoff, except
 * the fence markers: they are never collected (DESIGN.md §8).  A writer the
 * shard was taken from knows no newer position than the one its successor's
 * fence took; while the fence is there, that writer's next entry meets it
 * and is refused as fenced, whereas in a collected position it would land
 * below replay_after, acknowledged and never read.  Fences are small, one
 * per claim.
 *
 * The WAL is listed a page at a time (S3: 1,000 keys, Azure 5,000,
 * file:// 10,000), each page's candidates deleted before the next page is
 * asked for: a backlog of millions of entries then costs one page's memory,
 * and a run that stops lists no further than it deleted, so the next run
 * starts where this one ended.  The candidates' footers are read with
 * concurrent requests, in chunks between which the run looks at its
 * stop_at.
 */
static void
gc_own_wal(RolloutStore *store, int64 replay_after, TimestampTz cutoff,
		   GcDeletions *deletions)
{
	MemoryContext page_context = AllocSetContextCreate(CurrentMemoryContext,
													   "rollout gc WAL page",
													   ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcontext;
	ObjectStoreListScan scan;
	bool		past_sealed = false;

	/* the scan's own state lives in the caller's context, the pages in ours */
	objstore_list_begin(&scan, store->objstore,
						rollout_key_wal_prefix(store, store->shard), NULL,
						OBJSTORE_LIST_PAGE_SIZE);
	oldcontext = MemoryContextSwitchTo(page_context);
	while (!past_sealed && !gc_stopped(deletions))
	{
		ObjectStoreListing *page = objstore_list_next(&scan);

		if (page == NULL)
			break;
		rollout_fault_point("gc.after_wal_page");
		past_sealed = gc_sealed_wal_page(store, page, replay_after, cutoff,
										 deletions);

		/* the page's entries go with it: nothing may still point at them */
		gc_send_deletions(store, deletions);
		MemoryContextReset(page_context);
	}
	MemoryContextSwitchTo(oldcontext);
	MemoryContextDelete(page_context);
}

/*
 * This shard's generations that no kept shard manifest names (referenced)
 * and that are older than the cutoff: the uploads of flushes that failed
 * before their manifest commit, and generations merged away.  A flush never
 * commits a generation older than half the grace (flush.c), so one this
 * lists cannot be committed after the manifests were read.
 */
static void
gc_own_generations(RolloutStore *store, List *referenced, TimestampTz cutoff,
				   GcDeletions *deletions)
{
	List	   *objects;
	ListCell   *lc;

	objects = objstore_list_all(store->objstore,
								psprintf("%s/shards/%s/gen/", store->name, store->shard),
								NULL);
	foreach(lc, objects)
	{
		ObjectStoreEntry *entry = lfirst(lc);

		if (entry->modified <= cutoff && !gc_key_in(referenced, entry->key))
			gc_delete(store, entry, deletions);
	}
	rollout_fault_point("gc.after_generation_list");
}

/* This cluster's shard: generations, WAL entries and manifest versions. */
static void
gc_own_shard(RolloutStore *store, List *retentions, TimestampTz cutoff,
			 GcDeletions *deletions)
{
	GcVersions	versions;
	List	   *referenced = NIL;
	int64		replay_after = -1;
	ListCell   *lc;
	TimestampTz manifests_read_at = GetCurrentTimestamp();

	versions = gc_manifest_versions(store,
									rollout_key_shard_manifest_prefix(store, store->shard),
									cutoff);
	if (versions.entries == NIL)
	{
		/*
		 * The shard never flushed: no WAL entry is sealed and no generation
		 * listed, but a first flush that failed before its commit may have
		 * left its generation behind, and a large transaction that failed or
		 * waited too long its ingest segment.
		 */
		gc_own_generations(store, NIL, cutoff, deletions);
		gc_own_ingest(store, NIL, 0, manifests_read_at, false, cutoff, deletions);
		return;
	}
	gc_note_retained(store, retentions, store->shard, &versions);
	for (int i = 0; i < list_length(versions.entries); i++)
	{
		ObjectStoreEntry *entry = list_nth(versions.entries, i);
		ShardManifest *manifest;

		if (!gc_version_referenced(&versions, i))
			continue;
		manifest = shard_manifest_read_version(store, store->shard,
											   rollout_key_number(entry->key));
		if (manifest == NULL)
			continue;
		foreach(lc, manifest->generations)
			referenced = lappend(referenced, ((GenerationEntry *) lfirst(lc))->file);

		/* a named snapshot reads no WAL entry: only kept versions count */
		if (i < versions.first_kept)
			continue;
		if (replay_after < 0 || manifest->replay_after < replay_after)
			replay_after = manifest->replay_after;
	}

	gc_own_generations(store, referenced, cutoff, deletions);

	/*
	 * The WAL last: on a busy shard it is what a run that stops (stop_at)
	 * leaves for the next one, and it must not keep the segments and the
	 * manifest versions from ever being reached.  Deleting old versions
	 * before the entries they sealed is safe: the kept ones seal them too.
	 */
	if (!gc_stopped(deletions))
		gc_own_ingest(store, referenced, replay_after, manifests_read_at, true,
					  cutoff, deletions);
	gc_delete_old_versions(store, &versions, cutoff, deletions);
	if (!gc_stopped(deletions))
		gc_own_wal(store, replay_after, cutoff, deletions);
}

/*
 * Delete the probes of this shard that a proof of write access left behind
 * when its backend failed between writing and deleting one
 * (core/write_proof.c).  Nothing reads a probe after its proof.
 */
static void
gc_own_write_probes(RolloutStore *store, TimestampTz cutoff, GcDeletions *deletions)
{
	List	   *objects = objstore_list_all(store->objstore,
											rollout_key_write_probe_prefix(store, store->shard),
											NULL);
	ListCell   *lc;

	foreach(lc, objects)
	{
		ObjectStoreEntry *entry = lfirst(lc);

		if (entry->modified <= cutoff)
			gc_delete(store, entry, deletions);
	}
}

/*
 * Delete the retentions that had expired when this gc began (they kept
 * nothing in this run either).
 */
static void
gc_expired_retentions(RolloutStore *store, List *retentions, TimestampTz now,
					  GcDeletions *deletions)
{
	ListCell   *lc;

	foreach(lc, retentions)
	{
		RetainedSnapshot *retained = lfirst(lc);

		if (retained->until <= now)
			gc_delete(store, retained->entry, deletions);
	}
}

/*
 * WARN about each unexpired retention whose token is not a valid one (it
 * was written into the store directly, or damaged): while it lasts, gc keeps
 * every manifest version of the store (gc_note_retained).
 */
static void
gc_warn_unreadable_retentions(RolloutStore *store, List *retentions)
{
	ListCell   *lc;

	foreach(lc, retentions)
	{
		RetainedSnapshot *retained = lfirst(lc);

		if (retained->token != NULL && retained->snapshot == NULL)
			ereport(WARNING,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("retention \"%s\" of store \"%s\" does not hold a valid snapshot token",
							retained->entry->key, store->name),
					 errdetail("Until it expires at %s, garbage collection keeps every manifest version of the store and everything they reference, since what the retention keeps cannot be known.",
							   timestamptz_to_str(retained->until)),
					 errhint("Remove the object from the store if nobody needs the snapshot it was meant to keep.")));
	}
}

/* See gc.h. */
int64
rollout_gc_batches_sent(void)
{
	return gc_batches_sent_total;
}

/*
 * Collect garbage in store (gc.h): what interrupted uploads left, leftover
 * probes of write access and expired retentions, then base fragments and
 * base manifests, then this shard's generations, ingest segments, manifests
 * and WAL entries.
 * cutoff (now minus the grace) bounds every deletion.  The callers have
 * checked grace_seconds against rollout_fdw.min_gc_grace: rollout_gc refuses
 * a shorter one, the sweeper raises it.  Once stop_at has come, nothing more
 * is gathered once a batch went out, and a step that would list or read
 * before deleting is skipped: the sweeper bounds its gc by the time of its
 * turn.
 */
GcResult
rollout_gc_store(RolloutStore *store, int64 grace_seconds, TimestampTz stop_at)
{
	GcDeletions deletions = {0};
	TimestampTz started = GetCurrentTimestamp();
	TimestampTz cutoff;
	bool		cost_was_active;
	List	   *retentions;

	/*
	 * A grace of centuries keeps everything, and one larger than that must
	 * not wrap around to a cutoff in the future: rollout_gc takes any
	 * interval its caller names, and min_gc_grace is its floor.
	 */
	grace_seconds = Min(grace_seconds, GC_MAX_GRACE_SECONDS);
	cutoff = started - grace_seconds * USECS_PER_SEC;
	deletions.stop_at = stop_at;

	rollout_check_writable(store, "collect garbage in");
	/* a handle older than the store's creation would ignore its retentions */
	rollout_store_check_current(store, 0);
	cost_was_active = maintenance_cost_begin();
	PG_TRY();
	{
		retentions = named_snapshot_retentions(store, started);
		gc_warn_unreadable_retentions(store, retentions);

		/* the small and bounded first, so that a run that stops gets to them */
		deletions.result.objects_deleted +=
			objstore_remove_abandoned_uploads(store->objstore, cutoff,
											  &deletions.result.bytes_freed);
		gc_own_write_probes(store, cutoff, &deletions);
		gc_expired_retentions(store, retentions, started, &deletions);
		gc_base(store, retentions, cutoff, &deletions);
		if (!gc_stopped(&deletions))
			gc_own_shard(store, retentions, cutoff, &deletions);
		gc_send_deletions(store, &deletions);
	}
	PG_FINALLY();
	{
		maintenance_cost_end(cost_was_active);
	}
	PG_END_TRY();
	shared_store_note_event(store, SHARED_EVENT_GC,
							(int64) (GetCurrentTimestamp() - started));
	return deletions.result;
}
