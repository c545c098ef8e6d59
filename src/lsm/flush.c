/*-------------------------------------------------------------------------
 *
 * flush.c
 *		Turn a shard's WAL tail into one sorted, deduplicated generation and
 *		commit the shard manifest that lists it (DESIGN.md §6.4).
 *
 * What may be sealed: the WAL entries after replay_after up to the first
 * hole.  A listing can miss an entry that is being created while it runs,
 * but never one that existed before it began; and a writer acknowledges p
 * only once every position up to p exists (with pipelined writes, p+1 may
 * land before p: a hole, docs/WRITER.md).  So the contiguous run that a
 * listing shows is durable and holds every commit acknowledged before it
 * began, and an entry landing later lands after it.  Entries of the run
 * written under an epoch older than one before them are dead (row_source.c)
 * and read as empty; sealed_epoch carries the running epoch on.
 *
 * No off-by-one: replay_after becomes the position of the last entry the
 * generation contains, taken from the entries that were actually read, not
 * from a separate counter.  last_stamp becomes that entry's effective stamp,
 * so the running maximum of stamps continues exactly where the generation
 * stopped.
 *
 * Concurrency: flushes of one store on this cluster take an advisory lock
 * (appends never take it).  A flush on another cluster sharing the shard id
 * would lose the manifest race and retry from the new manifest; its
 * generation object is deleted at once, since no manifest names it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "rollout/fault.h"
#include "rollout/flush.h"
#include "rollout/grace.h"
#include "rollout/json_doc.h"
#include "rollout/manifest.h"
#include "rollout/manifest_view.h"
#include "rollout/memtable.h"
#include "rollout/merge_read.h"
#include "rollout/rewrite.h"
#include "rollout/scratch.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_definition.h"
#include "rollout/store_keys.h"
#include "rollout/store_sources.h"
#include "rollout/store_stats.h"
#include "rollout/wal.h"

#define FLUSH_MAX_ATTEMPTS			5

/*
 * A flush from the WAL tail seals at most this many bytes of WAL entries per
 * generation, and commits before it reads more (flush_wal_tail).
 */
#define FLUSH_WAL_MAX_BYTES			((int64) 512 * 1024 * 1024)

/* rollout_fdw.flush_max_wal_entries */
static int	flush_max_wal_entries = 10000;

/* Define rollout_fdw.flush_max_wal_entries; _PG_init calls this. */
void
flush_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.flush_max_wal_entries",
							"WAL entries a flush from the WAL tail seals into one generation, at most.",
							"A longer tail (a cluster without the shared-memory writer that nobody flushed for a while) is flushed as several generations, each committed before the next is read: a shard manifest read longer ago than half of rollout_fdw.min_gc_grace can no longer be committed, so one flush of the whole tail could never finish.",
							&flush_max_wal_entries,
							10000, 1, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
}

/*
 * The lock that serialises flushes of one store within this database: an
 * advisory lock of kind 0x524f, "RO" (rollout_store_lock_tag).  It is held
 * for the flush only, not to the end of the transaction, so a merge that
 * flushes first does not keep other flushes waiting through its own upload.
 */
static void
flush_lock_tag(RolloutStore *store, LOCKTAG *tag)
{
	rollout_store_lock_tag(store, 0x524f, tag);
}

/*
 * The footer metadata of a generation segment: its kind, shard and the WAL
 * positions it covers, recorded in the object itself as well as in the shard
 * manifest entry.
 */
static char *
flush_generation_metadata(RolloutStore *store, int64 first, int64 last)
{
	StringInfoData buf;
	bool		first_member = true;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_append_member_text(&buf, &first_member, "kind", "generation");
	json_append_member_text(&buf, &first_member, "shard", store->shard);
	json_append_member_int64(&buf, &first_member, "first_position", first);
	json_append_member_int64(&buf, &first_member, "last_position", last);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* The sealed WAL entries as the sources of a rewrite. */
static RolloutSnapshot *
flush_sources(RolloutStore *store, List *sealed, int64 stamp_floor,
			  int64 epoch_floor)
{
	RolloutSnapshot *snapshot = palloc0(sizeof(RolloutSnapshot));
	ListCell   *lc;

	foreach(lc, sealed)
	{
		WalEntryRef *entry = lfirst(lc);
		SnapshotSource *source = snapshot_source_new(SNAPSHOT_WAL_ENTRY);

		source->key = entry->key;
		source->shard = store->shard;
		source->shard_hash = store->shard_hash;
		source->position = entry->position;
		source->rows = -1;
		source->stamp_floor = foreach_current_index(lc) == 0 ? stamp_floor : -1;
		source->epoch_floor = foreach_current_index(lc) == 0 ? epoch_floor : -1;
		snapshot->sources = lappend(snapshot->sources, source);
		snapshot->wal_entry_count++;
		snapshot->wal_object_count++;
	}
	return snapshot;
}

/*
 * Write the sealed entries as one generation into a scratch file and upload
 * it as generation manifest->next_generation, under a key of its own.
 * Returns the object key and sets *number.
 */
static char *
flush_write_and_upload(RolloutStore *store, ShardManifest *manifest,
					   RolloutSnapshot *sources, GenerationEntry *generation,
					   RewriteResult *rewrite, int64 *number)
{
	RewriteOutput *output;
	char	   *key;

	rewrite_sources(store, sources, 0, NULL,
					flush_generation_metadata(store, generation->first_position,
											  generation->last_position),
					false, 0, rewrite);
	if (rewrite->outputs == NIL)
		return NULL;			/* only fence markers and ingest references */
	output = linitial(rewrite->outputs);

	/*
	 * A fresh key, never the number alone: this attempt's number is the one a
	 * failed attempt may have uploaded under, and a gc run that listed that
	 * upload as an orphan may still be about to delete it.
	 */
	*number = manifest->next_generation;
	key = rollout_key_new_generation(store, store->shard, *number);
	rewrite->upload_started_at = GetCurrentTimestamp();
	if (objstore_create_from_file_if_absent(store->objstore, key, output->path,
											objstore_new_put_id()) != OBJSTORE_CREATED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("generation object \"%s\" of store \"%s\" already exists",
						key, store->name)));
	return key;
}

/* The same, removing the scratch file whatever happens. */
static char *
flush_write_generation(RolloutStore *store, ShardManifest *manifest,
					   RolloutSnapshot *sources, GenerationEntry *generation,
					   RewriteResult *rewrite, int64 *number)
{
	char	   *volatile key = NULL;

	PG_TRY();
	{
		key = flush_write_and_upload(store, manifest, sources, generation,
									 rewrite, number);
	}
	PG_CATCH();
	{
		rewrite_cleanup(rewrite);
		PG_RE_THROW();
	}
	PG_END_TRY();
	rewrite_cleanup(rewrite);
	return key;
}

/*
 * May a generation whose upload started at uploaded_at (a store may date
 * the object from then) still be committed?  Garbage
 * collection deletes an object no manifest names once it is older than the
 * grace period, so a generation that waited too long between its upload and
 * the manifest commit (a stalled store, a long pause) may already be gone:
 * committing a manifest naming it would lose the rows it sealed, since the
 * WAL entries it replaces are collected next.  Like merge and compaction, a
 * flush then abandons the generation (deletes it) and starts over; the WAL
 * entries are still there.  key is NULL when no generation was written.
 */
static bool
flush_generation_still_safe(RolloutStore *store, const char *key,
							TimestampTz uploaded_at)
{
	if (key == NULL || !rollout_output_too_old(uploaded_at))
		return true;
	ereport(LOG,
			(errmsg("rollout_fdw: flush of shard \"%s\" of store \"%s\" abandons generation \"%s\": it waited longer than half of rollout_fdw.min_gc_grace before its commit",
					store->shard, store->name, key)));
	return false;
}

/* ERROR: every attempt of a flush lost a manifest race or was abandoned. */
static void
flush_give_up(RolloutStore *store, bool abandoned)
{
	if (abandoned)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not flush shard \"%s\" of store \"%s\": its generations waited too long before their commit",
						store->shard, store->name),
				 errdetail("A generation not committed within half of rollout_fdw.min_gc_grace may be removed by garbage collection, so each was abandoned; the WAL entries are unchanged."),
				 errhint("Check how long requests to the store take.")));
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not flush shard \"%s\" of store \"%s\": the shard manifest kept changing",
					store->shard, store->name),
			 errhint("Another flush of the same shard is running; retry.")));
}

/*
 * A large transaction's ingest segment, adopted as a generation: its rows
 * keep their object and get the effective stamp of the WAL entry that
 * committed them.  One footer read for its statistics.
 */
static GenerationEntry *
flush_adopt_ingest(RolloutStore *store, IngestSeen *seen, int64 number)
{
	GenerationEntry *generation = palloc0(sizeof(GenerationEntry));
	SegmentReader *reader = segment_reader_open(rollout_segment_source(store, seen->file, -1, -1));

	if (reader == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("ingest segment \"%s\" named by WAL position %lld of shard \"%s\" is missing",
						seen->file, (long long) seen->position, store->shard)));
	generation->number = number;
	generation->file = seen->file;
	generation->first_position = seen->position;
	generation->last_position = seen->position;
	generation->rows = reader->row_count;
	generation->bytes = reader->object_size;
	generation->min_ts = generation->max_ts = seen->stamp;
	generation->stamp = seen->stamp;
	generation->has_key_range = reader->has_key_range;
	if (reader->has_key_range)
	{
		const SegmentColumn *key = &store->schema.columns[store->key_column];

		generation->min_key = datumCopy(reader->key_min, key->typbyval, key->typlen);
		generation->max_key = datumCopy(reader->key_max, key->typbyval, key->typlen);
	}
	segment_reader_close(reader);
	return generation;
}

/*
 * Put the new generation (key, when there were rows) and the adopted ingest
 * segments into the manifest.  Returns the manifest's next_generation.
 */
static int64
flush_add_generations(RolloutStore *store, ShardManifest *manifest, char *key,
					  int64 number, GenerationEntry *generation,
					  RewriteResult *rewrite, List *ingest_seen,
					  FlushResult *result)
{
	ListCell   *lc;

	if (key != NULL)
	{
		RewriteOutput *output = linitial(rewrite->outputs);

		generation->number = number;
		generation->file = key;
		generation->rows = output->summary.row_count;
		generation->bytes = output->summary.bytes;
		generation->min_ts = output->min_ts;
		generation->max_ts = output->max_ts;
		generation->has_key_range = output->summary.has_key_range;
		generation->min_key = output->summary.key_min;
		generation->max_key = output->summary.key_max;
		manifest->generations = lappend(manifest->generations, generation);
		result->rows_flushed += generation->rows;
		number++;
	}
	else
		number = manifest->next_generation;

	/* large transactions' segments become generations as they are */
	foreach(lc, ingest_seen)
	{
		GenerationEntry *adopted = flush_adopt_ingest(store, lfirst(lc), number++);

		manifest->generations = lappend(manifest->generations, adopted);
		result->rows_flushed += adopted->rows;
	}
	return number;
}

static FlushResult flush_wal_tail(RolloutStore *store);
static FlushResult flush_wal_tail_chunk(RolloutStore *store, int64 *until,
										bool *more);

/*
 * Flush this shard from the memtable: the batches are its durable WAL tail
 * after the claim's fence, so nothing is read back from the store.  Each
 * attempt re-reads the shard manifest and seals only what lies above its
 * replay_after (a flush that finished first may have sealed some or all of
 * it), up to the last position the memtable reported, whose effective stamp
 * becomes last_stamp.  The sealed batches are dropped only after the manifest
 * commit, so a scan that copied them first finds their rows in the memtable or
 * in the new generation.  The caller serialises the flushes of the slot
 * (flush_memtable_serialized).
 */
static FlushResult
flush_memtable(RolloutStore *store, SharedStoreSlot *slot)
{
	FlushResult result = {0};
	bool		abandoned = false;
	List	   *sources;
	List	   *ingest_seen;
	int64		last_position;
	int64		last_stamp;
	int64		truncate_stamp;
	int64		writer_epoch;

	if (!memtable_for_flush(store, slot, &sources, &ingest_seen,
							&last_position, &last_stamp, &truncate_stamp))
		return result;			/* empty */

	/* the memtable holds entries of this cluster's current epoch only */
	LWLockAcquire(&slot->lock, LW_SHARED);
	writer_epoch = slot->epoch;
	LWLockRelease(&slot->lock);

	for (int attempt = 0; attempt < FLUSH_MAX_ATTEMPTS; attempt++)
	{
		ShardManifest *manifest = shard_manifest_read_for_update(store);
		RolloutSnapshot *snapshot = palloc0(sizeof(RolloutSnapshot));
		List	   *adopt = NIL;
		GenerationEntry *generation = palloc0(sizeof(GenerationEntry));
		RewriteResult *rewrite = palloc0(sizeof(RewriteResult));
		int64		manifest_next_before = manifest->next_generation;
		int64		number = manifest->next_generation;
		char	   *key;
		TimestampTz uploaded_at;
		ListCell   *lc;

		rollout_fault_point("flush.after_manifest_read");
		if (manifest->replay_after >= last_position)
		{
			/* sealed already (a flush of another database finished first) */
			memtable_trim(slot, manifest->replay_after, manifest->version,
						  manifest->drops_covered_by_base);
			return result;
		}
		foreach(lc, sources)
		{
			if (((SnapshotSource *) lfirst(lc))->position > manifest->replay_after)
				snapshot->sources = lappend(snapshot->sources, lfirst(lc));
		}
		foreach(lc, ingest_seen)
		{
			if (((IngestSeen *) lfirst(lc))->position > manifest->replay_after)
				adopt = lappend(adopt, lfirst(lc));
		}

		/* as the WAL path does: what the cut hides need not be written */
		snapshot->truncate_stamp = truncate_stamp;
		generation->first_position = manifest->replay_after + 1;
		generation->last_position = last_position;
		key = snapshot->sources != NIL
			? flush_write_generation(store, manifest, snapshot, generation, rewrite, &number)
			: NULL;
		uploaded_at = key != NULL ? rewrite->upload_started_at : GetCurrentTimestamp();
		rollout_fault_point("flush.after_generation_put");
		number = flush_add_generations(store, manifest, key, number, generation,
									   rewrite, adopt, &result);
		manifest->replay_after = last_position;
		manifest->last_stamp = last_stamp;
		manifest->sealed_epoch = Max(manifest->sealed_epoch, writer_epoch);
		manifest->truncate_stamp = Max(manifest->truncate_stamp, truncate_stamp);
		manifest->next_generation = number;

		abandoned = !flush_generation_still_safe(store, key, uploaded_at);
		if (!abandoned &&
			shard_manifest_commit(store, manifest) == MANIFEST_COMMITTED)
		{
			rollout_fault_point("flush.after_manifest_commit");
			memtable_trim(slot, last_position, manifest->version,
						  manifest->drops_covered_by_base);
			result.generation = number > manifest_next_before ? number - 1 : 0;
			result.first_position = generation->first_position;
			result.last_position = last_position;
			return result;
		}
		if (key != NULL)
			(void) objstore_delete(store->objstore, key);
		result.rows_flushed = 0;
	}
	flush_give_up(store, abandoned);
	return result;				/* keep compiler quiet */
}

/* The memtable flush, serialised across every backend of this cluster. */
static FlushResult
flush_memtable_serialized(RolloutStore *store, SharedStoreSlot *slot)
{
	FlushResult result;
	TimestampTz started = GetCurrentTimestamp();

	shared_flush_begin(slot);

	/*
	 * Ended also when the backend exits in the middle (pg_terminate_backend):
	 * a flag left set would hold off every later flush of the store.
	 */
	PG_ENSURE_ERROR_CLEANUP(shared_flush_end_callback, PointerGetDatum(slot));
	{
		/* the flush holds the slot with the store it stands for now */
		shared_store_require_member(store, slot, "flush");
		result = flush_memtable(store, slot);
	}
	PG_END_ENSURE_ERROR_CLEANUP(shared_flush_end_callback, PointerGetDatum(slot));
	shared_flush_end(slot);
	if (result.last_position > 0)
		shared_store_note_event(store, SHARED_EVENT_FLUSH,
								(int64) (GetCurrentTimestamp() - started));
	return result;
}

/*
 * Flush this cluster's shard (flush.h).  When this cluster's shared-memory
 * writer has claimed the shard, its memtable is the WAL tail and is flushed
 * from memory, serialised across the cluster by the slot; otherwise the tail
 * is read back from the store under a session advisory lock, released as soon
 * as the flush ends rather than at the end of the transaction.
 */
FlushResult
rollout_flush_shard(RolloutStore *store)
{
	SharedStoreSlot *slot;
	FlushResult result;
	LOCKTAG		tag;
	TimestampTz started = GetCurrentTimestamp();

	rollout_check_writable(store, "flush");
	slot = shared_store_slot(store, false);

	/* with this cluster's writer claimed, the WAL tail is the memtable */
	if (slot != NULL && shared_writer_is_ready(slot))
		return flush_memtable_serialized(store, slot);

	/* a session lock, released as soon as the flush is done */
	flush_lock_tag(store, &tag);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	PG_TRY();
	{
		result = flush_wal_tail(store);
	}
	PG_FINALLY();
	{
		LockRelease(&tag, ExclusiveLock, true);
	}
	PG_END_TRY();
	/* the slot may have gone to another store meanwhile: look again */
	if (result.last_position > 0)
		shared_store_note_event(store, SHARED_EVENT_FLUSH,
								(int64) (GetCurrentTimestamp() - started));
	return result;
}

/*
 * The first entries of sealed, up to rollout_fdw.flush_max_wal_entries of
 * them and FLUSH_WAL_MAX_BYTES (at least one); *more says whether any were
 * left for the next generation.
 */
static List *
flush_wal_chunk(List *sealed, int64 *until, bool *more)
{
	int64		bytes = 0;
	int			count = 0;
	ListCell   *lc;

	if (*until == 0)
		*until = ((WalEntryRef *) llast(sealed))->position;
	foreach(lc, sealed)
	{
		WalEntryRef *entry = lfirst(lc);

		bytes += entry->size;
		if (count > 0 &&
			(count >= flush_max_wal_entries || bytes > FLUSH_WAL_MAX_BYTES ||
			 entry->position > *until))
			break;
		count++;
	}
	sealed = list_truncate(sealed, count);
	*more = ((WalEntryRef *) llast(sealed))->position < *until;
	return sealed;
}

/*
 * Flush from the WAL tail on the store (no shared-memory writer): one
 * generation per flush_wal_chunk of the tail, each committed before the next
 * is read, until the tail as the first look found it (up to its first hole)
 * is sealed; what was appended meanwhile is the next flush's, so that a
 * flush ends however fast others append.  The result counts the rows of them
 * all, names the newest generation, and spans the positions from the first
 * chunk's first to the last one's last.
 */
static FlushResult
flush_wal_tail(RolloutStore *store)
{
	FlushResult total = {0};
	int64		until = 0;

	for (;;)
	{
		bool		more = false;
		FlushResult chunk = flush_wal_tail_chunk(store, &until, &more);

		if (chunk.last_position == 0)
			break;
		CHECK_FOR_INTERRUPTS();
		total.rows_flushed += chunk.rows_flushed;
		if (chunk.generation != 0)
			total.generation = chunk.generation;
		if (total.first_position == 0)
			total.first_position = chunk.first_position;
		total.last_position = chunk.last_position;
		if (!more)
			break;
	}
	return total;
}

/*
 * Flush the first flush_wal_chunk of the WAL tail, up to *until (0: the tail
 * this look finds, which *until then names); see flush_wal_tail.
 */
static FlushResult
flush_wal_tail_chunk(RolloutStore *store, int64 *until, bool *more)
{
	FlushResult result = {0};
	bool		abandoned = false;

	for (int attempt = 0; attempt < FLUSH_MAX_ATTEMPTS; attempt++)
	{
		ShardManifest *manifest = shard_manifest_read_for_update(store);
		List	   *sealed;
		GenerationEntry *generation;
		RewriteResult *rewrite = palloc0(sizeof(RewriteResult));
		int64		number;
		int64		last_position;
		int64		manifest_next_before;
		char	   *key;
		TimestampTz uploaded_at;

		rollout_fault_point("flush.after_manifest_read");
		sealed = wal_contiguous_prefix(wal_list_after(store, store->shard,
													  manifest->replay_after),
									   manifest->replay_after);
		if (sealed == NIL)
			return result;		/* nothing durable to seal */
		sealed = flush_wal_chunk(sealed, until, more);

		generation = palloc0(sizeof(GenerationEntry));
		generation->first_position = ((WalEntryRef *) linitial(sealed))->position;
		generation->last_position = ((WalEntryRef *) llast(sealed))->position;
		last_position = generation->last_position;

		manifest_next_before = manifest->next_generation;
		key = flush_write_generation(store, manifest,
									 flush_sources(store, sealed, manifest->last_stamp,
												   manifest->sealed_epoch),
									 generation, rewrite, &number);
		uploaded_at = key != NULL ? rewrite->upload_started_at : GetCurrentTimestamp();
		rollout_fault_point("flush.after_generation_put");
		number = flush_add_generations(store, manifest, key, number, generation,
									   rewrite, rewrite->ingest_seen, &result);
		manifest->replay_after = last_position;
		manifest->last_stamp = rewrite->last_wal_stamp;
		manifest->sealed_epoch = Max(manifest->sealed_epoch, rewrite->last_wal_epoch);
		manifest->truncate_stamp = Max(manifest->truncate_stamp,
									   rewrite->truncate_stamp);
		manifest->next_generation = number;

		abandoned = !flush_generation_still_safe(store, key, uploaded_at);
		if (!abandoned &&
			shard_manifest_commit(store, manifest) == MANIFEST_COMMITTED)
		{
			manifest_view_note_shard_commit(store, manifest);
			rollout_fault_point("flush.after_manifest_commit");
			/* the newest generation added; 0 when only fences were sealed */
			result.generation = number > manifest_next_before ? number - 1 : 0;
			result.first_position = generation->first_position;
			result.last_position = last_position;
			return result;
		}

		/* lost a race with another flusher of this shard: nobody names ours */
		if (key != NULL)
			(void) objstore_delete(store->objstore, key);
		result.rows_flushed = 0;
	}
	flush_give_up(store, abandoned);
	return result;				/* keep compiler quiet */
}
