/*-------------------------------------------------------------------------
 *
 * commit.c
 *		Make a transaction's rows durable as one WAL entry: the one way a
 *		commit reaches a store (DESIGN.md §6.1 to §6.3).
 *
 * The fdw layer buffers a transaction's rows and, at PRE_COMMIT, hands them
 * here as a row reader.  What happens to them is decided here, in one place:
 *	- the values of text-encoded columns become their text form
 *	  (portable_values.c), under the settings that make that form exact;
 *	- small transactions put their rows into the WAL entry itself (a row
 *	  blob); a transaction past rollout_fdw.ingest_threshold, or whose
 *	  buffer spilled to disk, stages them as one sorted ingest segment first
 *	  (ingest.c), and its entry only names the segment;
 *	- with the shared-memory writer the entry is written by a group-commit
 *	  leader together with other transactions' (group_commit.c); without
 *	  it, by this backend (wal.c), claiming the shard first when this cluster
 *	  was promoted since the shard's last claim (writer_epoch.c).
 * The same rows, not committed yet, are also what the transaction's own
 * scans read (rollout_uncommitted_rows_source).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "rollout/commit.h"
#include "rollout/fault.h"
#include "rollout/group_commit.h"
#include "rollout/ingest.h"
#include "rollout/memtable.h"
#include "rollout/row_blob.h"
#include "rollout/scratch.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_definition.h"
#include "rollout/writer_epoch.h"

/* rollout_fdw.ingest_threshold (kB) */
static int	ingest_threshold_kb = 16 * 1024;

/* Define rollout_fdw.ingest_threshold; _PG_init calls this. */
void
commit_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.ingest_threshold",
							"Size past which a transaction's rows are staged as a sorted ingest segment.",
							"Its WAL entry then only names the segment, so large COPYs need neither memory nor shared memory in proportion to their size. A transaction whose buffer spilled to disk always uses an ingest segment.",
							&ingest_threshold_kb,
							16 * 1024, 64, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/*
 * A row reader over another that turns the values of text-encoded columns
 * into their stored text form.  The caller has portable_encode_begin'd.
 */
typedef struct EncodingReader
{
	RolloutStore *store;
	StoreRowReader next;
	void	   *arg;
	int64		tombstones;		/* rows read with ROLLOUT_OP_DELETE */
} EncodingReader;

/*
 * The StoreRowReader of an EncodingReader: take the next row from the wrapped
 * reader and replace, in place, each non-null value of a text-encoded column
 * by its stored text form.  Commits and the transaction's own scans both read
 * rows through it, so a transaction sees its uncommitted rows in the same
 * stored form as the rows it commits.
 */
static bool
encoding_reader_next(void *arg, Datum *values, bool *isnull)
{
	EncodingReader *reader = arg;
	RolloutStore *store = reader->store;

	if (!reader->next(reader->arg, values, isnull))
		return false;
	if (DatumGetInt16(values[store->user_column_count]) == ROLLOUT_OP_DELETE)
		reader->tombstones++;
	for (int c = 0; c < store->user_column_count; c++)
		if (!isnull[c] && store->codecs[c].encoding == PORTABLE_TEXT)
			values[c] = portable_encode(&store->codecs[c], values[c]);
	return true;
}

/*
 * Read every row of reader (already encoding) into one row blob, each with
 * its operation after the user columns; *rows receives how many.  Each row's work memory is freed with the row.
 */
static StringInfo
commit_rows_as_blob(RolloutStore *store, StoreRowReader next, void *arg,
					int64 *rows)
{
	MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext,
													  "rollout commit row",
													  ALLOCSET_DEFAULT_SIZES);
	Datum	   *values = palloc0(sizeof(Datum) * (store->user_column_count + 1));
	bool	   *isnull = palloc0(sizeof(bool) * (store->user_column_count + 1));
	StringInfo	blob = makeStringInfo();

	*rows = 0;
	for (;;)
	{
		MemoryContext oldcontext = MemoryContextSwitchTo(row_context);
		bool		more = next(arg, values, isnull);

		MemoryContextSwitchTo(oldcontext);
		if (!more)
			break;
		CHECK_FOR_INTERRUPTS();
		row_blob_append(store->row_desc, blob, values, isnull);
		(*rows)++;
		MemoryContextReset(row_context);
	}
	MemoryContextDelete(row_context);
	return blob;
}

/* What a direct-path commit came to (commit_direct). */
typedef enum DirectOutcome
{
	DIRECT_COMMITTED,
	DIRECT_SLOT_FOUND,			/* commit through this cluster's slot instead */
	DIRECT_CLAIM_FIRST,			/* the shard is to be claimed for this
								 * timeline */
	DIRECT_FENCE_HOLE			/* a claim is to fence a hole that entries lie
								 * past (wal.h) */
} DirectOutcome;

/* Look for a slot this often when one keeps turning up beside a direct commit. */
#define COMMIT_SLOT_ATTEMPTS	3

/*
 * This backend's own WAL entry (the path without the shared-memory writer),
 * unless this cluster has a slot of the store after all.  With shared
 * memory, claims of the shard are held off meanwhile (writer_epoch.h):
 * without that, a slot given to the store between this backend's look for
 * one and its append (an idle one, shared_store.c) could claim a tip that
 * misses the entry, hide the row from every read through its memtable, and
 * find its next position taken by its own epoch.  A cluster promoted since
 * the shard's last claim must claim it first (DIRECT_CLAIM_FIRST), and so
 * must a commit that finds entries past a hole (DIRECT_FENCE_HOLE), which
 * the caller does once claims are no longer held off, since a claim may look
 * for, and wait for, this cluster's slot of the store.
 */
static DirectOutcome
commit_direct(RolloutStore *store, List *blobs, WalEntryMetadata *metadata)
{
	volatile DirectOutcome outcome = DIRECT_SLOT_FOUND;
	bool		shared = rollout_shared_available();

	if (shared)
		writer_claims_hold_off(store);
	PG_TRY();
	{
		if (!shared || !shared_store_writable_slot_exists(store))
		{
			int64		position = wal_append_rows(store, blobs, metadata);

			if (position == WAL_APPEND_CLAIM_FIRST)
				outcome = DIRECT_CLAIM_FIRST;
			else if (position == WAL_APPEND_FENCE_HOLE)
				outcome = DIRECT_FENCE_HOLE;
			else
			{
				/*
				 * before it is acknowledged: a slot of the store under
				 * another location may know its WAL tail empty
				 * (manifest_view.c)
				 */
				shared_store_note_wal_change(store->name, store->shard);
				outcome = DIRECT_COMMITTED;
			}
		}
	}
	PG_FINALLY();
	{
		if (shared)
			writer_claims_resume(store);
	}
	PG_END_TRY();
	return outcome;
}

/*
 * A direct commit met, after its claim, what the claim was to settle: a
 * claim for this timeline that another cluster keeps taking, or holes that
 * keep appearing (a writer of this cluster's slot racing it).
 */
static void
commit_raise_claim_again(RolloutStore *store, DirectOutcome outcome)
{
	if (outcome == DIRECT_CLAIM_FIRST)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not claim shard \"%s\" of store \"%s\" for this server's timeline",
						store->shard, store->name)));
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not fence the hole in the WAL of shard \"%s\" of store \"%s\"",
					store->shard, store->name),
			 errdetail("Entries past a missing position were still there after a claim."),
			 errhint("Retry the transaction.")));
}

/*
 * The one commit path (commit.h).  Nothing of the transaction is written
 * before the writability check has passed and the store and this shard's
 * registration exist.  The rows are encoded once, into a row blob or, past the
 * threshold (with the shared writer at most what one transaction may hold of
 * the memtable) or after a spill, into an uploaded ingest segment; if the WAL
 * entry then fails, that segment is an orphan for garbage collection.  The
 * entry is written by a group-commit leader when the store has a shared-memory
 * slot, else by this backend.
 */
void
rollout_commit_rows(RolloutStore *store, StoreRowReader next, void *arg,
					int64 size, bool spilled, bool truncate)
{
	WalEntryMetadata metadata = {0};
	SharedStoreSlot *slot;
	int64		ingest_threshold = (int64) ingest_threshold_kb * 1024;
	EncodingReader reader = {store, next, arg, 0};
	StringInfo	blob = NULL;
	int64		row_count = 0;
	int			encode_nest_level = -1;
	DirectOutcome outcome;
	DirectOutcome claimed_for = DIRECT_COMMITTED;	/* none yet */

	rollout_check_writable(store, "commit to");

	/*
	 * The store exists and knows this shard before anything of this commit is
	 * written; both are no-ops once done.
	 */
	rollout_store_ensure_created(store);
	rollout_store_register_shard(store);

	metadata.kind = "wal";
	metadata.shard = store->shard;
	metadata.stamp = wal_next_stamp();
	metadata.put_id = objstore_new_put_id();
	metadata.transactions = 1;
	metadata.truncate = truncate;

	/*
	 * With shared memory, rows the memtable could not take are staged even
	 * without a slot now: one may turn up before the commit (below).
	 */
	slot = shared_store_slot(store, true);
	if (rollout_shared_available())
		ingest_threshold = Min(ingest_threshold, memtable_max_transaction_bytes());

	if (store->has_text_columns)
		encode_nest_level = portable_encode_begin();
	if (spilled || size > ingest_threshold)
	{
		metadata.ingest = list_make1(ingest_stage_rows(store, encoding_reader_next,
													   &reader, metadata.stamp));
		rollout_fault_point("commit.after_ingest_staged");
	}
	else
		blob = commit_rows_as_blob(store, encoding_reader_next, &reader, &row_count);
	if (encode_nest_level >= 0)
		portable_encode_end(encode_nest_level);

	/*
	 * Staging a large transaction's rows takes a while, in which a slot idle
	 * meanwhile may have gone to another store (shared_store.c): look again
	 * then, and whenever a slot turns up beside a direct commit.
	 */
	for (int attempt = 0;; attempt++)
	{
		if (attempt > 0 || (slot != NULL && metadata.ingest != NIL))
			slot = shared_store_slot(store, true);
		if (slot != NULL)
		{
			(void) group_commit(store, slot, blob, row_count, reader.tombstones,
								truncate, metadata.ingest);
			break;
		}
		rollout_fault_point("commit.before_direct");
		outcome = commit_direct(store, blob ? list_make1(blob) : NIL, &metadata);
		if (outcome == DIRECT_COMMITTED)
			break;
		if (outcome == DIRECT_CLAIM_FIRST || outcome == DIRECT_FENCE_HOLE)
		{
			if (claimed_for == outcome)
				commit_raise_claim_again(store, outcome);
			(void) shard_claim(store,
							   outcome == DIRECT_CLAIM_FIRST ?
							   SHARD_CLAIM_NEW_TIMELINE : SHARD_CLAIM_FENCE_HOLE,
							   metadata.epoch, NULL);
			claimed_for = outcome;
		}
		else if (attempt >= COMMIT_SLOT_ATTEMPTS)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not commit to store \"%s\": its shared-memory slot kept changing hands",
							store->name),
					 errhint("Retry the transaction.")));
	}

	/*
	 * The caller's memory may outlive the transaction: a procedure's COMMIT
	 * runs in a context that lasts for the whole CALL, and a loop of commits
	 * would otherwise keep every transaction's rows.
	 */
	if (blob != NULL)
	{
		pfree(blob->data);
		pfree(blob);
	}
}

/* Remove a scan's scratch segment when its memory goes. */
static void
commit_remove_scratch(void *arg)
{
	(void) rollout_scratch_file_remove((const char *) arg);
}

/*
 * The reading transaction's own rows as a snapshot source (commit.h).  They
 * are encoded exactly as a commit would encode them, and get PG_INT64_MAX as
 * position and fixed stamp, so the merge ranks them above every committed
 * version of their keys.  The scratch segment of a spilled buffer is removed
 * by a reset callback on CurrentMemoryContext.
 */
SnapshotSource *
rollout_uncommitted_rows_source(RolloutStore *store, StoreRowReader next,
								void *arg, bool spilled, int64 rows)
{
	EncodingReader reader = {store, next, arg, 0};
	SnapshotSource *source;
	int			encode_nest_level = -1;

	if (store->has_text_columns)
		encode_nest_level = portable_encode_begin();
	if (!spilled)
	{
		int64		count;
		StringInfo	blob = commit_rows_as_blob(store, encoding_reader_next,
											   &reader, &count);

		source = snapshot_source_new(SNAPSHOT_TRANSACTION);
		source->key = "(this transaction's rows)";
		source->rows_data = blob->data;
		source->rows_len = blob->len;
	}
	else
	{
		/* sorted by tuplesort, bounded by work_mem, into a scratch file */
		char	   *path = rollout_scratch_file_path("own");
		MemoryContextCallback *cleanup = palloc0(sizeof(MemoryContextCallback));

		cleanup->func = commit_remove_scratch;
		cleanup->arg = path;
		MemoryContextRegisterResetCallback(CurrentMemoryContext, cleanup);
		(void) ingest_write_sorted(store, encoding_reader_next, &reader,
								   PG_INT64_MAX, path);
		source = snapshot_source_new(SNAPSHOT_TRANSACTION_SEGMENT);
		source->key = path;
	}
	if (encode_nest_level >= 0)
		portable_encode_end(encode_nest_level);

	source->shard = store->shard;
	source->shard_hash = store->shard_hash;
	source->position = PG_INT64_MAX;
	source->rows = rows;
	source->stamp_fixed = PG_INT64_MAX;
	return source;
}
