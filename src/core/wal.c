/*-------------------------------------------------------------------------
 *
 * wal.c
 *		Append entries to a shard's WAL on the object store, and list them.
 *
 * The rules that keep positions never reused, and every acknowledged entry
 * out of any hole (DESIGN.md §6.2; the shared writer's pipeline bends the
 * first rule, docs/WRITER.md), and how this file keeps them for the direct
 * path, which writes one entry at a time:
 *
 *	- A writer creates position p+1 only once p is known to exist: the
 *	  starting tip is the highest position a listing returned (listed objects
 *	  exist), or the shard manifest's replay_after, whichever is higher.
 *	- It never attempts a position <= replay_after: the tip starts there.
 *	- A backend's knowledge of the tip may be stale (others commit too), so
 *	  every append refreshes it from the shard manifest and a listing that
 *	  starts after the highest position this backend has seen.
 *	- "Already exists" is resolved by reading who wrote the entry: the same
 *	  epoch means a concurrent committer of this shard was first, and we try
 *	  the next position; a newer epoch means this writer has been fenced,
 *	  and the transaction fails naming the shard.  Nothing is overwritten and
 *	  no position is skipped.
 *
 * Stamps.  Each entry carries the writer's wall-clock stamp.  Clocks of
 * different backends are not ordered with positions, so readers that apply
 * entries in position order make the stamps non-decreasing with a running
 * maximum (snapshot.c and flush.c); a backend also never goes below its own
 * previous stamp.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "rollout/fault.h"
#include "rollout/grace.h"
#include "rollout/json_doc.h"
#include "rollout/manifest.h"
#include "rollout/row_blob.h"
#include "rollout/scratch.h"
#include "rollout/shard.h"
#include "rollout/store_definition.h"
#include "rollout/store_keys.h"
#include "rollout/store_sources.h"
#include "rollout/wal.h"

/* rollout_fdw.max_wal_append_attempts */
static int	wal_max_append_attempts = 1000;

/* Define rollout_fdw.max_wal_append_attempts; _PG_init calls it. */
void
wal_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.max_wal_append_attempts",
							"WAL positions a commit tries before it gives up.",
							"Each attempt that finds its position taken by a concurrent commit of the same shard moves to the next.",
							&wal_max_append_attempts,
							1000, 1, 1000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
}

/* The newest stamp this backend handed out. */
static int64 last_stamp_issued = 0;

int64
wal_next_stamp(void)
{
	int64		now = (int64) GetCurrentTimestamp();

	last_stamp_issued = Max(now, last_stamp_issued + 1);
	return last_stamp_issued;
}

/*
 * The footer metadata of a WAL entry's segment, which wal_metadata_from_json
 * reads back.  A NULL kind is written as "wal"; the ingest array is always
 * written, empty when the entry names no ingest segment.
 */
char *
wal_metadata_to_json(const WalEntryMetadata *metadata)
{
	StringInfoData buf;
	bool		first = true;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_append_member_text(&buf, &first, "kind", metadata->kind ? metadata->kind : "wal");
	json_append_member_text(&buf, &first, "shard", metadata->shard);
	json_append_member_int64(&buf, &first, "epoch", metadata->epoch);
	json_append_member_int64(&buf, &first, "stamp", metadata->stamp);
	json_append_member_text(&buf, &first, "put_id", metadata->put_id);
	json_append_member_int64(&buf, &first, "transactions", metadata->transactions);
	if (metadata->truncate)
		json_append_member_raw(&buf, &first, "truncate", "true");
	json_append_member_raw(&buf, &first, "ingest", "[");
	foreach(lc, metadata->ingest)
	{
		WalIngestRef *ref = lfirst(lc);
		bool		ifirst = true;

		if (foreach_current_index(lc) > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoChar(&buf, '{');
		json_append_member_text(&buf, &ifirst, "file", ref->file);
		json_append_member_int64(&buf, &ifirst, "rows", ref->rows);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoString(&buf, "]}");
	return buf.data;
}


/*
 * Whether file, an ingest segment a WAL entry at key names, is in the
 * ingest folder of the entry's own store (key's first part): the name comes
 * from the store, and reading or adopting it must not reach outside.
 */
static bool
wal_names_own_ingest_segment(const char *key, const char *file)
{
	const char *slash = strchr(key, '/');
	size_t		store_len = slash ? (size_t) (slash - key) : 0;

	return rollout_key_is_segment_of(key, store_len, file) &&
		strncmp(file + store_len + 1, "ingest/", 7) == 0;
}

/*
 * Besides the member checks of json_doc.c, only the kinds "wal" and "fence"
 * are accepted, so that another kind of segment found at a WAL key is reported
 * as corrupt instead of being read as an entry.  json is NULL for a segment
 * without footer metadata, which is corrupt too.  transactions defaults to 1
 * and ingest to none.
 */
WalEntryMetadata *
wal_metadata_from_json(const char *json, const char *key)
{
	WalEntryMetadata *metadata = palloc0(sizeof(WalEntryMetadata));
	JsonDoc    *doc;
	JsonbContainer *ingest;

	if (json == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("object \"%s\" is corrupt", key),
				 errdetail("The segment has no WAL entry metadata.")));
	doc = json_doc_parse(json, strlen(json), key);
	metadata->kind = json_doc_text(doc, doc->root, "kind", true);
	if (strcmp(metadata->kind, "wal") != 0 && strcmp(metadata->kind, "fence") != 0)
		json_doc_corrupt(doc, psprintf("It is a \"%s\" segment, not a WAL entry.",
									   metadata->kind));
	metadata->shard = json_doc_text(doc, doc->root, "shard", true);
	metadata->epoch = json_doc_int64(doc, doc->root, "epoch", true, 0);
	metadata->stamp = json_doc_int64(doc, doc->root, "stamp", true, 0);
	metadata->put_id = json_doc_text(doc, doc->root, "put_id", true);
	metadata->transactions = json_doc_int64(doc, doc->root, "transactions", false, 1);
	metadata->truncate = json_doc_bool(doc, doc->root, "truncate", false, false);

	/* readers and flushes add to them (manifest.c has the same bounds) */
	if (metadata->epoch < 0 || metadata->epoch >= PG_INT64_MAX / 2 ||
		metadata->stamp < 0 || metadata->stamp >= PG_INT64_MAX / 2 ||
		metadata->transactions < 0 || metadata->transactions >= PG_INT64_MAX / 2)
		json_doc_corrupt(doc, "Its epoch, stamp or transaction count is out of range.");
	ingest = json_doc_container(doc, doc->root, "ingest", false, true);
	if (ingest != NULL)
	{
		for (int i = 0; i < json_doc_array_length(ingest); i++)
		{
			JsonbContainer *item = json_doc_array_object(doc, ingest, i);
			WalIngestRef *ref = palloc0(sizeof(WalIngestRef));

			ref->file = json_doc_text(doc, item, "file", true);
			ref->rows = json_doc_int64(doc, item, "rows", true, 0);
			if (!wal_names_own_ingest_segment(key, ref->file) ||
				ref->rows < 0 || ref->rows >= PG_INT64_MAX / 2)
				json_doc_corrupt(doc, psprintf("Its ingest segment %d is not one of the store's, or its row count is out of range.",
											   i + 1));
			metadata->ingest = lappend(metadata->ingest, ref);
		}
	}
	return metadata;
}

/* See wal.h. */
void
wal_entry_count_rows(SegmentReader *reader, int index, void *arg)
{
	int64	   *rows = arg;
	ListCell   *lc;

	if (reader == NULL)
		return;
	*rows += reader->row_count;
	foreach(lc, wal_metadata_from_json(reader->metadata, reader->source->name)->ingest)
	{
		*rows += ((WalIngestRef *) lfirst(lc))->rows;
	}
}

/* See wal.h. */
void
wal_entry_count_live_rows(SegmentReader *reader, int index, void *arg)
{
	WalLiveRows *live = arg;
	WalEntryMetadata *metadata;

	if (live->epoch_floors[index] >= 0)
		live->running_epoch = live->epoch_floors[index];
	if (reader == NULL)
		return;
	metadata = wal_metadata_from_json(reader->metadata, reader->source->name);
	if (metadata->epoch < live->running_epoch)
		return;					/* dead */
	live->running_epoch = metadata->epoch;
	wal_entry_count_rows(reader, index, &live->rows);
}

/*
 * Entries whose rows take up to this many bytes are encoded in memory: their
 * PUT then costs no scratch file to write, read back and remove.  That is
 * every entry of single-row commits, and a group of a few hundred 1 kB rows;
 * the bound keeps a large transaction's entry (whose rows are in memory
 * already, as blobs) from being held a second time.
 */
#define WAL_ENTRY_IN_MEMORY_MAX		(4 * 1024 * 1024)

/* See wal.h. */
void
wal_entry_image_init(WalEntryImage *image)
{
	memset(image, 0, sizeof(WalEntryImage));
}

/* See wal.h. */
void
wal_entry_image_discard(WalEntryImage *image)
{
	if (image->spill_path != NULL && rollout_scratch_file_remove(image->spill_path) != 0 &&
		errno != ENOENT)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m", image->spill_path)));
	if (image->bytes.data != NULL)
		pfree(image->bytes.data);
	if (image->spill_path != NULL)
		pfree(image->spill_path);
	memset(image, 0, sizeof(WalEntryImage));
}

/*
 * Begin the segment of an entry whose rows take rows_bytes: in the image's
 * memory if they are few, else in its scratch file (named on first use).
 *
 * A WAL entry is written for its writer, not its readers: it gets no
 * compression dictionaries (rollout_fdw.dictionary_size is for the segments
 * that stay), and its pages are compressed once (the caller's
 * segment_writer_compress_once).  Training a dictionary cost the leader of a
 * group of a few hundred 1 kB rows more than compressing them (a quarter of
 * all the cluster's CPU time with 8 clients committing 100 rows each), on
 * the commit path, for an object that the next flush rewrites, with
 * dictionaries and pages chosen for reads, into a generation.
 */
static SegmentWriter *
wal_entry_writer_begin(RolloutStore *store, WalEntryImage *image,
					   Size rows_bytes)
{
	image->in_memory = rows_bytes <= WAL_ENTRY_IN_MEMORY_MAX;
	if (image->in_memory)
	{
		if (image->bytes.data == NULL)
			initStringInfo(&image->bytes);
		return segment_writer_begin_in_memory(&store->schema, &image->bytes,
											  "WAL entry", false,
											  store_rows_per_group,
											  store_key_filter_bits,
											  store_page_size * 1024, 0);
	}
	if (image->spill_path == NULL)
		image->spill_path = rollout_scratch_file_path("wal");
	elog(DEBUG1, "rollout_fdw: a WAL entry of %zu bytes of rows is encoded in scratch file \"%s\"",
		 rows_bytes, image->spill_path);
	return segment_writer_begin(&store->schema, image->spill_path, false,
								store_rows_per_group, store_key_filter_bits,
								store_page_size * 1024, 0);
}

/*
 * Rows are decoded one at a time into a memory context reset after each, so
 * that memory stays flat however many rows the entry holds; the hidden columns
 * _ts and _shard, the same for every row, are set once, and each row's _op
 * comes from its blob (where it follows the user columns).  The segment is
 * marked unsorted: its rows are in the order they were committed, not in key
 * order.
 */
void
wal_write_entry(RolloutStore *store, List *blobs,
				const WalEntryMetadata *metadata, WalEntryImage *image)
{
	int			ncolumns = store->schema.ncolumns;
	Datum	   *values = palloc0(sizeof(Datum) * ncolumns);
	bool	   *isnull = palloc0(sizeof(bool) * ncolumns);
	MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext,
													  "rollout WAL entry row",
													  ALLOCSET_DEFAULT_SIZES);
	Size		rows_bytes = 0;
	SegmentWriter *writer;
	SegmentWriteSummary summary;
	ListCell   *lc;

	foreach(lc, blobs)
		rows_bytes += ((StringInfo) lfirst(lc))->len;
	writer = wal_entry_writer_begin(store, image, rows_bytes);
	segment_writer_compress_once(writer);

	/* hidden columns: the same for every row of the entry */
	values[store->ts_column] = Int64GetDatum(metadata->stamp);
	values[store->shard_column] = Int64GetDatum(store->shard_hash);
	isnull[store->ts_column] = isnull[store->shard_column] = isnull[store->op_column] = false;

	foreach(lc, blobs)
	{
		StringInfo	blob = lfirst(lc);
		int64		offset = 0;

		for (;;)
		{
			MemoryContext oldcontext = MemoryContextSwitchTo(row_context);
			bool		more;

			CHECK_FOR_INTERRUPTS();
			more = row_blob_next(store->row_desc, blob->data, blob->len, &offset, values, isnull);
			if (more)
			{
				/* the blob's _op landed where _ts belongs */
				values[store->op_column] = values[store->ts_column];
				values[store->ts_column] = Int64GetDatum(metadata->stamp);
				isnull[store->ts_column] = false;
				segment_writer_add_row(writer, values, isnull);
			}
			MemoryContextSwitchTo(oldcontext);
			MemoryContextReset(row_context);
			if (!more)
				break;
		}
	}
	segment_writer_finish(writer, wal_metadata_to_json(metadata), &summary);
	MemoryContextDelete(row_context);
	pfree(values);
	pfree(isnull);
}

/*
 * List a shard's WAL entries with position > after, in position order.
 * Objects that do not look like WAL entries are ignored.
 */
List *
wal_list_after(RolloutStore *store, const char *shard, int64 after)
{
	char	   *prefix = rollout_key_wal_prefix(store, shard);
	char	   *start_after = after > 0 ? rollout_key_wal(store, shard, after) : NULL;
	List	   *objects = objstore_list_all(store->objstore, prefix, start_after);
	List	   *entries = NIL;
	ListCell   *lc;

	foreach(lc, objects)
	{
		ObjectStoreEntry *object = lfirst(lc);
		int64		position = rollout_key_number(object->key);
		size_t		keylen = strlen(object->key);
		WalEntryRef *ref;

		if (position <= after || keylen < 4 ||
			strcmp(object->key + keylen - 4, ".wal") != 0)
			continue;
		ref = palloc(sizeof(WalEntryRef));
		ref->position = position;
		ref->key = object->key;
		ref->size = object->size;
		entries = lappend(entries, ref);
	}
	return entries;
}

/*
 * Stop at the first hole: a listing racing with commits can show p+2 before
 * p+1, and neither a reader nor a flush may take a later entry without the
 * earlier one.  entries must be ascending, as wal_list_after returns them; the
 * result shares their WalEntryRefs.
 */
List *
wal_contiguous_prefix(List *entries, int64 after)
{
	List	   *prefix = NIL;
	ListCell   *lc;
	int64		expected = after + 1;

	foreach(lc, entries)
	{
		WalEntryRef *ref = lfirst(lc);

		if (ref->position != expected)
			break;
		prefix = lappend(prefix, ref);
		expected++;
	}
	return prefix;
}

/* Context for errors met while looking at a taken WAL position. */
typedef struct WalPositionContext
{
	RolloutStore *store;
	int64		position;
} WalPositionContext;

/*
 * Error context callback of wal_read_metadata: whatever goes wrong while
 * reading the entry at a taken position names the position, shard and store,
 * and says that nothing was overwritten, so the user knows the store was left
 * intact.
 */
static void
wal_position_error_context(void *arg)
{
	WalPositionContext *context = arg;

	errcontext("while checking who holds WAL position %lld of shard \"%s\" in store \"%s\"; nothing was overwritten",
			   (long long) context->position, context->store->shard,
			   context->store->name);
}

/*
 * Read the metadata of the WAL entry that holds a position we could not
 * create.  An object there that is not a WAL entry of this shard (corrupt,
 * foreign, another shard's) is an ERROR that names the shard: the position
 * is neither overwritten nor skipped.
 */
WalEntryMetadata *
wal_read_metadata(RolloutStore *store, const char *key, int64 position)
{
	SegmentReader *reader;
	WalEntryMetadata *metadata;
	ErrorContextCallback callback;
	WalPositionContext context = {store, position};

	callback.callback = wal_position_error_context;
	callback.arg = &context;
	callback.previous = error_context_stack;
	error_context_stack = &callback;

	reader = segment_reader_open(rollout_segment_source(store, key, -1, -1));
	if (reader == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("WAL entry \"%s\" vanished right after it was found to exist",
						key)));
	metadata = wal_metadata_from_json(reader->metadata, key);
	if (strcmp(metadata->shard, store->shard) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("WAL position %lld of shard \"%s\" in store \"%s\" holds an entry of shard \"%s\"",
						(long long) position, store->shard, store->name,
						metadata->shard)));
	segment_reader_close(reader);

	error_context_stack = callback.previous;
	return metadata;
}

/*
 * wal_entry_put_id
 *		The put id of the WAL entry at position of this handle's shard, or
 *		NULL when there is none (wal.h).
 */
char *
wal_entry_put_id(RolloutStore *store, int64 position)
{
	char	   *key = rollout_key_wal(store, store->shard, position);
	SegmentReader *reader;
	WalEntryMetadata *metadata;

	reader = segment_reader_open(rollout_segment_source(store, key, -1, -1));
	if (reader == NULL)
		return NULL;
	metadata = wal_metadata_from_json(reader->metadata, key);
	segment_reader_close(reader);
	return strcmp(metadata->shard, store->shard) == 0 ? metadata->put_id : NULL;
}

/*
 * Check that the entry at the tip a writer is about to build on is a WAL
 * entry of this shard written under an epoch not newer than ours.
 */
static void
wal_check_tip_owner(RolloutStore *store, const char *key, int64 position,
					int64 epoch)
{
	WalEntryMetadata *owner = wal_read_metadata(store, key, position);

	if (owner->epoch > epoch)
		shard_raise_taken_over(store, position, owner->epoch, epoch);
}

/*
 * The create of WAL position failed, but the store may have carried it out
 * (an attempt went unanswered after it was sent, or was answered 5xx): raise
 * the error being handled again with SQLSTATE transaction_resolution_unknown,
 * its message kept.  Whoever reports it must not say that nothing was
 * written: DESIGN.md §6.2, no failure reported for a write that landed.
 * (The counters say what this backend's requests did; the error being
 * handled came from the create in between.)
 */
static void
wal_raise_outcome_unknown(RolloutStore *store, int64 position)
{
	ErrorData  *edata = CopyErrorData();

	FlushErrorState();
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
			 errmsg_internal("%s", edata->message),
			 errdetail("Whether WAL position %lld of shard \"%s\" in store \"%s\" was written is unknown: the store may have carried out the request without answering.%s%s",
					   (long long) position, store->shard, store->name,
					   edata->detail ? " " : "", edata->detail ? edata->detail : ""),
			 errhint("If it was, the transaction is committed and its rows are visible; check for them before retrying it."),
			 edata->context ? errcontext("%s", edata->context) : 0));
}

/*
 * wal_check_ingest_fresh
 *		Refuse ingest segments staged too long ago for a commit (wal.h).
 */
void
wal_check_ingest_fresh(RolloutStore *store, List *ingest)
{
	ListCell   *lc;

	foreach(lc, ingest)
	{
		WalIngestRef *ref = lfirst(lc);

		if (ref->staged_at != 0 && rollout_output_too_old(ref->staged_at))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not commit to store \"%s\": the transaction's ingest segment waited too long for its WAL entry",
							store->name),
					 errdetail("Segment \"%s\" was uploaded more than half of rollout_fdw.min_gc_grace ago, so garbage collection may take it for an orphan. The transaction is not committed.",
							   ref->file),
					 errhint("Retry the transaction.")));
	}
}

/*
 * wal_put_entry
 *		Create the encoded WAL entry image at position, and when the
 *		position is taken, say by whom.
 *
 * This is every writer's step (a direct commit, a group-commit leader, a
 * claim's fence marker): create-if-absent, and on "already exists" read the
 * entry there.  An entry of an epoch newer than ours means this writer is
 * fenced (WAL_PUT_FENCED); any other (a committer of this cluster that was
 * first, or a previous writer's last entry) is WAL_PUT_TAKEN, and the
 * caller decides what that means for it.  Something there that is no WAL
 * entry of this shard is an ERROR (wal_read_metadata): nothing is
 * overwritten or skipped.  No cancel between the create and knowing its
 * outcome: a write that landed must never be reported as failed.
 */
WalPutResult
wal_put_entry(RolloutStore *store, int64 position, const WalEntryImage *image,
			  const char *put_id, int64 epoch, int64 *owner_epoch,
			  volatile bool *reading_owner)
{
	char	   *key = rollout_key_wal(store, store->shard, position);
	ObjectStoreCreateResult created;
	WalEntryMetadata *owner;

	HOLD_INTERRUPTS();
	if (image->in_memory)
		created = objstore_create_if_absent(store->objstore, key,
											image->bytes.data, image->bytes.len,
											put_id);
	else
		created = objstore_create_from_file_if_absent(store->objstore, key,
													  image->spill_path, put_id);
	RESUME_INTERRUPTS();
	if (created == OBJSTORE_CREATED)
		return WAL_PUT_CREATED;
	if (reading_owner != NULL)
		*reading_owner = true;
	owner = wal_read_metadata(store, key, position);
	if (owner_epoch != NULL)
		*owner_epoch = owner->epoch;
	return owner->epoch > epoch ? WAL_PUT_FENCED : WAL_PUT_TAKEN;
}

/*
 * wal_put_rows_entry
 *		wal_put_entry for an entry that carries a commit's rows: a create
 *		that failed after the store may have carried it out is raised as
 *		transaction_resolution_unknown (wal_raise_outcome_unknown).
 */
WalPutResult
wal_put_rows_entry(RolloutStore *store, int64 position, const WalEntryImage *image,
				   const char *put_id, int64 epoch, int64 *owner_epoch)
{
	volatile WalPutResult put = WAL_PUT_TAKEN;
	ObjectStoreCounters before;
	MemoryContext caller_context = CurrentMemoryContext;

	objstore_get_counters(&before);
	PG_TRY();
	{
		put = wal_put_entry(store, position, image, put_id, epoch, owner_epoch,
							NULL);
	}
	PG_CATCH();
	{
		ObjectStoreCounters after;

		objstore_get_counters(&after);
		if (after.maybe_applied == before.maybe_applied)
			PG_RE_THROW();
		MemoryContextSwitchTo(caller_context);
		wal_raise_outcome_unknown(store, position);
	}
	PG_END_TRY();
	return put;
}

/* wal_append_file's answer when what it saw of the WAL has grown too old */
#define WAL_APPEND_LOOK_AGAIN	(-1)

/*
 * The entries of this shard's WAL after position after, up to the first
 * hole (wal_contiguous_prefix).  *past_hole says whether the WAL holds, past
 * that hole, entries that an entry written into it under epoch would bring
 * to life.  Direct writers never leave a hole (each attempts p + 1 only once
 * p exists), so such entries are a pipelined writer's (docs/WRITER.md,
 * "Pipelined WAL writes"): p + 1 landed while p was still being written, and
 * the writer died or broke off before p was settled.  They were never
 * acknowledged, and only a claim's fence may take the hole.  Two looks keep
 * this from claiming for nothing: a listing racing with commits can show a
 * gap that is none (the missing entry is asked for by itself), and entries
 * past a hole whose epoch is older than epoch are dead already (another
 * backend's claim fenced before them) and stay dead whatever is written
 * into it; but a live one may lie beyond a dead one, so every entry past
 * the hole is looked at.
 */
static List *
wal_run_after(RolloutStore *store, int64 after, int64 epoch, bool *past_hole)
{
	List	   *entries = wal_list_after(store, store->shard, after);
	List	   *run = wal_contiguous_prefix(entries, after);
	int64		missing;

	*past_hole = false;
	if (list_length(run) == list_length(entries))
		return run;
	missing = after + list_length(run) + 1;
	if (wal_entry_put_id(store, missing) != NULL)
		return run;				/* no hole: the listing raced a commit */
	/* every entry past the hole: a dead one may stand before a live one */
	for (int i = list_length(run); i < list_length(entries) && !*past_hole; i++)
	{
		WalEntryRef *beyond = list_nth(entries, i);

		*past_hole = wal_read_metadata(store, beyond->key,
									   beyond->position)->epoch >= epoch;
	}
	return run;
}

/*
 * Create a finished WAL entry file at this shard's next position (see
 * wal_append_rows).  manifest is the shard manifest read at observed_at.
 * Returns WAL_APPEND_LOOK_AGAIN, nothing written, once that is longer ago
 * than half the minimum gc grace (grace.h): a position found free could by
 * then have held an entry that was sealed and collected since, and an entry
 * written there would sit below replay_after, never read.  Returns
 * WAL_APPEND_FENCE_HOLE, nothing written, when entries lie past a hole
 * (wal_run_after).  first_look says whether this is the commit's first try,
 * the one the test fault point wal.before_put stops.
 */
static int64
wal_append_file(RolloutStore *store, const WalEntryImage *image,
				const WalEntryMetadata *metadata, ShardManifest *manifest,
				TimestampTz observed_at, bool first_look)
{
	List	   *entries;
	int64		start;
	int64		tip;
	bool		past_hole;

	if (metadata->epoch < manifest->writer_epoch)
		shard_raise_taken_over(store, -1, manifest->writer_epoch, metadata->epoch);

	/*
	 * Find the tip: the end of the run of positions without holes after
	 * replay_after.  A hint above replay_after saves listing the whole tail,
	 * but only once the listing confirms that the hinted entry still exists
	 * (a store dropped and created again, or entries collected, would make it
	 * a hole).
	 */
	start = manifest->replay_after;
	entries = NIL;
	if (store->wal_tip_hint > start)
	{
		entries = wal_run_after(store, store->wal_tip_hint - 1,
								metadata->epoch, &past_hole);
		if (entries != NIL)
			start = store->wal_tip_hint - 1;
		else
			store->wal_tip_hint = 0;
	}
	if (entries == NIL)
		entries = wal_run_after(store, start, metadata->epoch, &past_hole);
	if (past_hole)
		return WAL_APPEND_FENCE_HOLE;
	tip = start;
	if (entries != NIL)
	{
		WalEntryRef *last = llast(entries);

		/*
		 * Build only on an entry known to be ours: the listing shows that
		 * something exists at the tip, not that it is a WAL entry of this
		 * shard.  Positions this backend created or already checked need no
		 * second look; anything newer costs one footer read.
		 */
		if (last->position > store->wal_tip_hint)
		{
			wal_check_tip_owner(store, last->key, last->position, metadata->epoch);
			store->wal_tip_hint = last->position;
		}
		tip = last->position;
	}

	if (first_look)
		rollout_fault_point("wal.before_put");
	for (int attempt = 0; attempt < wal_max_append_attempts; attempt++)
	{
		int64		position = tip + 1;
		int64		owner_epoch;

		CHECK_FOR_INTERRUPTS();
		wal_check_ingest_fresh(store, metadata->ingest);
		if (rollout_output_too_old(observed_at))
		{
			ereport(LOG,
					(errmsg("rollout_fdw: looking at the WAL of shard \"%s\" of store \"%s\" again before writing",
							store->shard, store->name),
					 errdetail("What this commit read of it is older than half of rollout_fdw.min_gc_grace.")));
			return WAL_APPEND_LOOK_AGAIN;
		}
		switch (wal_put_rows_entry(store, position, image, metadata->put_id,
								   metadata->epoch, &owner_epoch))
		{
			case WAL_PUT_CREATED:
				store->wal_tip_hint = position;
				return position;
			case WAL_PUT_FENCED:
				shard_raise_taken_over(store, position, owner_epoch,
									   metadata->epoch);
				break;
			case WAL_PUT_TAKEN:
				break;			/* a committer of our epoch was first */
		}

		/*
		 * A concurrent committer of this shard was first.  Under contention
		 * many were: jump to the current tip instead of probing one position
		 * (and one copy of our entry) at a time, which could leave this
		 * backend behind for good.
		 */
		tip = position;
		entries = wal_run_after(store, tip, metadata->epoch, &past_hole);
		if (past_hole)
			return WAL_APPEND_FENCE_HOLE;
		if (entries != NIL)
		{
			WalEntryRef *last = llast(entries);

			wal_check_tip_owner(store, last->key, last->position, metadata->epoch);
			tip = last->position;
		}
		store->wal_tip_hint = tip;
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not append to the WAL of shard \"%s\" in store \"%s\" after %d attempts",
					store->shard, store->name, wal_max_append_attempts),
			 errdetail("Every position tried was taken by a concurrent commit."),
			 errhint("Retry the transaction.")));
	return 0;					/* keep compiler quiet */
}

/*
 * Without the shared-memory writer every committing backend writes its own
 * entry; they are one cluster, so they share the shard's current epoch.
 * That holds while the shard's last claim came from this cluster's
 * timeline: a cluster promoted since must claim the shard first
 * (WAL_APPEND_CLAIM_FIRST, nothing written), so must a commit that finds a
 * pipelined writer's entries past a hole (WAL_APPEND_FENCE_HOLE, nothing
 * written), and one superseded by a promoted standby writes nothing
 * (ERROR).  The caller (rollout_commit_rows) has created the
 * store and registered the shard.  A commit that took longer than half the
 * minimum gc grace between reading the manifest and writing reads it again
 * (wal_append_file).
 */
int64
wal_append_rows(RolloutStore *store, List *blobs, WalEntryMetadata *metadata)
{
	WalEntryImage *image;
	volatile int64 position = 0;

	Assert(store->pending_definition == NULL && store->shard_registered);

	/* not a local: PG_TRY's block changes it, and PG_FINALLY's reads it */
	image = palloc(sizeof(WalEntryImage));
	wal_entry_image_init(image);
	PG_TRY();
	{
		for (bool first_look = true;; first_look = false)
		{
			TimestampTz observed_at = GetCurrentTimestamp();
			ShardManifest *manifest;

			/* what the tip is: the manifest first, then a listing */
			manifest = shard_manifest_read_latest(store, store->shard);
			rollout_check_not_superseded(store, manifest->writer_timeline);
			if (manifest->writer_timeline < rollout_writer_timeline())
				break;			/* WAL_APPEND_CLAIM_FIRST */
			metadata->epoch = manifest->writer_epoch;

			/*
			 * Stamped in each pass, right before its PUTs, never when the
			 * commit began (a large transaction's upload may have taken
			 * long): an entry lands at most half of min_gc_grace after its
			 * stamp, which compaction's tombstone horizon relies on.
			 */
			metadata->stamp = Max(metadata->stamp, wal_next_stamp());
			wal_write_entry(store, blobs, metadata, image);
			position = wal_append_file(store, image, metadata, manifest,
									   observed_at, first_look);
			if (position != WAL_APPEND_LOOK_AGAIN)
				break;
			position = 0;
		}
	}
	PG_FINALLY();
	{
		wal_entry_image_discard(image);
	}
	PG_END_TRY();
	pfree(image);
	return position;
}
