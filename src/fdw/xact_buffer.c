/*-------------------------------------------------------------------------
 *
 * xact_buffer.c
 *		Rows inserted by the current transaction, kept until commit and then
 *		made durable as one WAL entry (DESIGN.md §6.1).
 *
 * Rows are stored as length-prefixed minimal tuples in a byte stream that
 * lives in memory up to rollout_fdw.transaction_buffer_size and then moves
 * to a temporary file.  The stream only ever grows at the end, which makes
 * subtransactions cheap: every row appended after a subtransaction started
 * belongs to it or to its children, so rolling it back truncates the stream
 * to where it stood at the subtransaction's first write.
 *
 * At XACT_EVENT_PRE_COMMIT the rows become part of one WAL entry: written
 * by a group-commit leader together with other transactions' rows when the
 * shared-memory writer runs (shared_writer.c), else by this backend (wal.c).  An error there aborts the transaction: nothing
 * of it becomes visible.  PREPARE TRANSACTION is refused, because the rows
 * could not be made durable at PREPARE and visible only at COMMIT PREPARED.
 * On abort the buffer simply disappears with TopTransactionContext (the
 * temporary file with the top transaction's resource owner).
 *
 * A transaction writes to one rollout table: one WAL entry is atomic, two
 * entries in two stores are not.
 *
 * The transaction's own scans of the table see its buffered rows, as they
 * would a heap table's (xact_buffer_scan_source): the rows inserted by
 * commands before the scan's, as the newest versions of their keys.  Each
 * row remembers the command that inserted it; command ids only grow along
 * the stream, so what a scan sees is always a prefix of it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/buffile.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"

#include "rollout/commit.h"
#include "rollout/ingest.h"
#include "rollout/objstore.h"
#include "rollout/rollout_fdw.h"
#include "rollout/row_blob.h"
#include "rollout/shared_writer.h"
#include "rollout/wal.h"
#include "rollout/xact_buffer.h"

/* Where the stream stood when a subtransaction wrote its first row. */
typedef struct SubxactMark
{
	int			nest_level;
	int64		offset;
	int64		rows;
} SubxactMark;

/* The first row a command inserted: rows before it came from older ones. */
typedef struct CommandMark
{
	CommandId	cid;
	int64		rows;			/* rows in the stream before it */
} CommandMark;

typedef struct XactBuffer
{
	Oid			relid;
	char	   *relname;
	RolloutStore *store;
	TupleDesc	tupdesc;		/* the table's, copied */
	int		   *attr_to_column; /* per attno-1: segment column, or -1 */

	/* the row stream */
	StringInfoData memory;		/* while it fits */
	BufFile    *file;			/* once it does not */
	int64		length;			/* logical length of the stream */
	int64		rows;

	MemoryContext row_context;	/* reset after each buffered row */

	/* subtransaction marks, innermost last */
	SubxactMark *marks;
	int			mark_count;
	int			mark_capacity;

	/* command marks, in stream order */
	CommandMark *commands;
	int			command_count;
	int			command_capacity;
} XactBuffer;

/* The current transaction's buffer, in TopTransactionContext; or NULL. */
static XactBuffer *current_buffer = NULL;

static void xact_buffer_commit(XactBuffer *buffer);
static void xact_buffer_release(XactBuffer *buffer);

/* ----------------------------------------------------------------
 * The row stream
 * ----------------------------------------------------------------
 */

static void
stream_write(XactBuffer *buffer, const void *data, size_t len)
{
	if (buffer->file == NULL &&
		buffer->memory.len + len > (size_t) rollout_transaction_buffer_kb * 1024)
	{
		/*
		 * Spill.  The file belongs to the top transaction's resource owner:
		 * a subtransaction's owner would close it when that subtransaction
		 * ends, taking the parent's rows with it.  Likewise its memory
		 * belongs to the transaction, not to the statement that spilled.
		 */
		ResourceOwner saved_owner = CurrentResourceOwner;
		MemoryContext saved_context = MemoryContextSwitchTo(TopTransactionContext);

		CurrentResourceOwner = TopTransactionResourceOwner;
		buffer->file = BufFileCreateTemp(false);
		CurrentResourceOwner = saved_owner;
		MemoryContextSwitchTo(saved_context);
		BufFileWrite(buffer->file, buffer->memory.data, buffer->memory.len);
		pfree(buffer->memory.data);
		buffer->memory.data = NULL;
	}

	if (buffer->file == NULL)
		appendBinaryStringInfo(&buffer->memory, data, len);
	else
	{
		/* after a truncation the logical end is before the physical one */
		if (BufFileSeek(buffer->file, 0, buffer->length, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not seek in the transaction buffer of rollout table \"%s\": %m",
							buffer->relname)));
		BufFileWrite(buffer->file, (void *) data, len);
	}
	buffer->length += len;
}

static void
stream_truncate(XactBuffer *buffer, int64 offset, int64 rows)
{
	buffer->length = offset;
	buffer->rows = rows;
	if (buffer->file == NULL)
		buffer->memory.len = offset;
	/* the commands whose first row went with the truncation */
	while (buffer->command_count > 0 &&
		   buffer->commands[buffer->command_count - 1].rows >= rows)
		buffer->command_count--;
}

static void
stream_read_exact(XactBuffer *buffer, void *data, size_t len)
{
	if (BufFileRead(buffer->file, data, len) != len)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read the transaction buffer of rollout table \"%s\"",
						buffer->relname)));
}

/* ----------------------------------------------------------------
 * Buffering rows
 * ----------------------------------------------------------------
 */

static XactBuffer *
xact_buffer_get(Relation rel, RolloutStore *store)
{
	MemoryContext oldcontext;
	XactBuffer *buffer;
	TupleDesc	tupdesc;

	if (current_buffer != NULL)
	{
		if (current_buffer->relid != RelationGetRelid(rel))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a transaction can write to only one rollout table"),
					 errdetail("This transaction already wrote to \"%s\"; its rows become one atomic WAL entry of that table's store.",
							   current_buffer->relname),
					 errhint("Commit before writing to \"%s\".",
							 RelationGetRelationName(rel))));
		return current_buffer;
	}

	oldcontext = MemoryContextSwitchTo(TopTransactionContext);
	buffer = palloc0(sizeof(XactBuffer));
	buffer->relid = RelationGetRelid(rel);
	buffer->relname = pstrdup(RelationGetRelationName(rel));
	buffer->store = store;
	tupdesc = RelationGetDescr(rel);
	buffer->tupdesc = CreateTupleDescCopy(tupdesc);
	buffer->attr_to_column = palloc(sizeof(int) * Max(tupdesc->natts, 1));
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		buffer->attr_to_column[i] = attr->attisdropped ? -1 :
			rollout_store_column_index(store, NameStr(attr->attname));
	}
	initStringInfo(&buffer->memory);
	buffer->row_context = AllocSetContextCreate(TopTransactionContext,
												"rollout buffered row",
												ALLOCSET_DEFAULT_SIZES);
	buffer->mark_capacity = 8;
	buffer->marks = palloc(sizeof(SubxactMark) * buffer->mark_capacity);
	buffer->command_capacity = 8;
	buffer->commands = palloc(sizeof(CommandMark) * buffer->command_capacity);
	MemoryContextSwitchTo(oldcontext);

	current_buffer = buffer;
	return buffer;
}

/*
 * Remember where the stream stands before the first row of the current
 * subtransaction level.
 */
static void
xact_buffer_mark_level(XactBuffer *buffer)
{
	int			level = GetCurrentTransactionNestLevel();

	if (level <= 1)
		return;
	if (buffer->mark_count > 0 &&
		buffer->marks[buffer->mark_count - 1].nest_level >= level)
		return;
	if (buffer->mark_count == buffer->mark_capacity)
	{
		buffer->mark_capacity *= 2;
		buffer->marks = repalloc(buffer->marks,
								 sizeof(SubxactMark) * buffer->mark_capacity);
	}
	buffer->marks[buffer->mark_count].nest_level = level;
	buffer->marks[buffer->mark_count].offset = buffer->length;
	buffer->marks[buffer->mark_count].rows = buffer->rows;
	buffer->mark_count++;
}

/*
 * Remember where command cid's rows start, at its first row.  cid is the
 * statement's output command id, the one heap rows it inserts would carry,
 * so a scan sees what it would see of a heap table: the rows of commands
 * before its snapshot's.
 */
static void
xact_buffer_mark_command(XactBuffer *buffer, CommandId cid)
{
	if (buffer->command_count > 0 &&
		buffer->commands[buffer->command_count - 1].cid == cid)
		return;
	if (buffer->command_count == buffer->command_capacity)
	{
		buffer->command_capacity *= 2;
		buffer->commands = repalloc(buffer->commands,
									sizeof(CommandMark) * buffer->command_capacity);
	}
	buffer->commands[buffer->command_count].cid = cid;
	buffer->commands[buffer->command_count].rows = buffer->rows;
	buffer->command_count++;
}

void
xact_buffer_add_row(Relation rel, RolloutStore *store, TupleTableSlot *slot,
					CommandId cid)
{
	XactBuffer *buffer;
	TupleDesc	tupdesc;
	MemoryContext oldcontext;
	Datum	   *values;
	bool	   *isnull;
	MinimalTuple tuple;
	uint32		len;
	int			key_column = store->key_column;

	/*
	 * The rows become durable at PRE_COMMIT, the last hook before the commit
	 * record.  Under SERIALIZABLE, PostgreSQL may still fail the commit
	 * after that hook (a serialization failure found at commit), which would
	 * leave an aborted transaction's rows durable and visible.
	 */
	if (IsolationIsSerializable())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot write to rollout table \"%s\" in a SERIALIZABLE transaction",
						RelationGetRelationName(rel)),
				 errdetail("A serializable transaction can still fail after its rows were made durable."),
				 errhint("Use READ COMMITTED or REPEATABLE READ for transactions that write rollout tables.")));

	buffer = xact_buffer_get(rel, store);
	tupdesc = buffer->tupdesc;
	slot_getallattrs(slot);

	/* per-row work (detoasted copies) is freed with the row context */
	oldcontext = MemoryContextSwitchTo(buffer->row_context);
	values = palloc(sizeof(Datum) * Max(tupdesc->natts, 1));
	isnull = palloc(sizeof(bool) * Max(tupdesc->natts, 1));
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		values[i] = slot->tts_values[i];
		isnull[i] = slot->tts_isnull[i];
		if (buffer->attr_to_column[i] == key_column && isnull[i])
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("null value in key column \"%s\" of rollout table \"%s\"",
							NameStr(attr->attname), buffer->relname),
					 errdetail("Every row of a rollout store needs a key.")));

		/*
		 * A toast pointer refers to another table's storage; the buffer must
		 * hold the value itself.
		 */
		if (!isnull[i] && attr->attlen == -1 &&
			VARATT_IS_EXTERNAL(DatumGetPointer(values[i])))
			values[i] = PointerGetDatum(detoast_external_attr((struct varlena *)
															  DatumGetPointer(values[i])));
	}
	tuple = heap_form_minimal_tuple(tupdesc, values, isnull);
	MemoryContextSwitchTo(oldcontext);

	xact_buffer_mark_level(buffer);
	xact_buffer_mark_command(buffer, cid);
	len = tuple->t_len;
	stream_write(buffer, &len, sizeof(len));
	stream_write(buffer, tuple, len);
	buffer->rows++;
	MemoryContextReset(buffer->row_context);
}

/* ----------------------------------------------------------------
 * Commit
 * ----------------------------------------------------------------
 */

/* Reads the buffered rows back, in store column order (an IngestRowReader). */
typedef struct BufferedRowReader
{
	XactBuffer *buffer;
	int64		row_limit;		/* read the first row_limit rows */
	int64		row;
	int64		offset;
	Datum	   *table_values;
	bool	   *table_isnull;
} BufferedRowReader;

static void
buffered_row_reader_init(BufferedRowReader *reader, XactBuffer *buffer)
{
	reader->buffer = buffer;
	reader->row_limit = buffer->rows;
	reader->row = 0;
	reader->offset = 0;
	reader->table_values = palloc0(sizeof(Datum) * Max(buffer->tupdesc->natts, 1));
	reader->table_isnull = palloc0(sizeof(bool) * Max(buffer->tupdesc->natts, 1));
	if (buffer->file != NULL && BufFileSeek(buffer->file, 0, 0, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not seek in the transaction buffer of rollout table \"%s\": %m",
						buffer->relname)));
}

/*
 * The next buffered row as values in the store's user-column order, as the
 * store keeps them: text-encoded columns as text (portable_values.h; the
 * caller has portable_encode_begin'd).  The values point into memory of
 * CurrentMemoryContext.
 */
static bool
buffered_row_reader_next(void *arg, Datum *values, bool *isnull)
{
	BufferedRowReader *reader = arg;
	XactBuffer *buffer = reader->buffer;
	RolloutStore *store = buffer->store;
	HeapTupleData htup;
	MinimalTuple tuple;
	uint32		len;

	if (reader->row >= reader->row_limit)
		return false;
	if (buffer->file == NULL)
	{
		memcpy(&len, buffer->memory.data + reader->offset, sizeof(len));
		tuple = palloc(len);	/* aligned copy */
		memcpy(tuple, buffer->memory.data + reader->offset + sizeof(len), len);
	}
	else
	{
		stream_read_exact(buffer, &len, sizeof(len));
		tuple = palloc(len);
		stream_read_exact(buffer, tuple, len);
	}
	reader->offset += sizeof(len) + len;
	reader->row++;

	htup.t_len = tuple->t_len + MINIMAL_TUPLE_OFFSET;
	htup.t_data = (HeapTupleHeader) ((char *) tuple - MINIMAL_TUPLE_OFFSET);
	ItemPointerSetInvalid(&htup.t_self);
	htup.t_tableOid = InvalidOid;
	heap_deform_tuple(&htup, buffer->tupdesc, reader->table_values, reader->table_isnull);

	for (int i = 0; i < store->user_column_count; i++)
		isnull[i] = true;
	for (int i = 0; i < buffer->tupdesc->natts; i++)
	{
		int			column = buffer->attr_to_column[i];

		if (column < 0)
			continue;
		values[column] = reader->table_values[i];
		isnull[column] = reader->table_isnull[i];
		if (!isnull[column] && store->codecs[column].encoding == PORTABLE_TEXT)
			values[column] = portable_encode(&store->codecs[column], values[column]);
	}
	return true;
}

/*
 * Make the buffered rows durable as one WAL entry.  Small transactions put
 * their rows in the entry itself (as one row blob); a transaction that spilled
 * to disk or passed rollout_fdw.ingest_threshold stages them as a sorted
 * ingest segment first, and its WAL entry only names that segment.
 */
static void
xact_buffer_commit(XactBuffer *buffer)
{
	RolloutStore *store = buffer->store;
	WalEntryMetadata metadata = {0};
	BufferedRowReader reader;
	StringInfo	blob = NULL;
	int64		row_count = 0;
	int64		ingest_threshold;
	SharedStoreSlot *slot;
	int			encode_nest_level = -1;

	metadata.kind = "wal";
	metadata.shard = store->shard;
	metadata.stamp = wal_next_stamp();
	metadata.put_id = objstore_new_put_id();
	metadata.transactions = 1;

	slot = shared_store_slot(store);
	ingest_threshold = (int64) rollout_ingest_threshold_kb * 1024;
	if (slot != NULL)
		ingest_threshold = Min(ingest_threshold, shared_store_max_transaction_bytes());

	buffered_row_reader_init(&reader, buffer);
	if (store->has_text_columns)
		encode_nest_level = portable_encode_begin();
	if (buffer->file != NULL || buffer->length > ingest_threshold)
	{
		rollout_store_ensure_created(store);
		metadata.ingest = list_make1(ingest_stage_rows(store, buffered_row_reader_next,
													   &reader, metadata.stamp));
	}
	else
	{
		MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext,
														  "rollout commit row",
														  ALLOCSET_DEFAULT_SIZES);
		Datum	   *values = palloc0(sizeof(Datum) * store->user_column_count);
		bool	   *isnull = palloc0(sizeof(bool) * store->user_column_count);

		blob = makeStringInfo();
		for (;;)
		{
			MemoryContext oldcontext = MemoryContextSwitchTo(row_context);
			bool		more = buffered_row_reader_next(&reader, values, isnull);

			MemoryContextSwitchTo(oldcontext);
			if (!more)
				break;
			CHECK_FOR_INTERRUPTS();
			row_blob_append(store, blob, values, isnull);
			row_count++;
			MemoryContextReset(row_context);
		}
		MemoryContextDelete(row_context);
	}
	if (encode_nest_level >= 0)
		portable_encode_end(encode_nest_level);

	/*
	 * With the shared-memory writer, a group-commit leader writes our rows
	 * together with other transactions'; without it, we write our own entry.
	 */
	if (slot != NULL)
		(void) shared_store_commit(store, slot, blob, row_count, metadata.ingest);
	else
		(void) rollout_commit_direct(store, blob ? list_make1(blob) : NIL, &metadata);
}

/* Remove a scan's scratch segment when its memory goes. */
static void
xact_buffer_remove_scratch(void *arg)
{
	(void) unlink((const char *) arg);
}

/*
 * xact_buffer_scan_source
 *		The rows this transaction inserted into rel with commands before
 *		curcid (the scan's snapshot's command id: a statement does not see
 *		its own inserts), as the newest source of a scan; NULL when there
 *		are none.
 *
 * Rows rolled back with a savepoint are gone from the stream already.  A
 * buffer held in memory becomes a row blob, deduplicated by the reader
 * like a memtable batch; one that spilled to disk is sorted (tuplesort,
 * bounded by work_mem) into a segment in a scratch file, removed with
 * CurrentMemoryContext.  Either way the values are encoded as the store
 * keeps them, so the scan decodes them like any others.
 */
SnapshotSource *
xact_buffer_scan_source(Relation rel, RolloutStore *store, CommandId curcid)
{
	XactBuffer *buffer = current_buffer;
	BufferedRowReader reader;
	SnapshotSource *source;
	int64		visible;
	int			encode_nest_level = -1;

	/* the rows go to the buffer's store at commit: only that one sees them */
	if (buffer == NULL || buffer->relid != RelationGetRelid(rel) ||
		strcmp(buffer->store->objstore->identity, store->objstore->identity) != 0 ||
		strcmp(buffer->store->name, store->name) != 0)
		return NULL;
	visible = buffer->rows;
	for (int i = 0; i < buffer->command_count; i++)
	{
		if (buffer->commands[i].cid >= curcid)
		{
			visible = buffer->commands[i].rows;
			break;
		}
	}
	if (visible == 0)
		return NULL;

	buffered_row_reader_init(&reader, buffer);
	reader.row_limit = visible;
	if (store->has_text_columns)
		encode_nest_level = portable_encode_begin();
	if (buffer->file == NULL)
	{
		MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext,
														  "rollout own row",
														  ALLOCSET_DEFAULT_SIZES);
		Datum	   *values = palloc0(sizeof(Datum) * store->user_column_count);
		bool	   *isnull = palloc0(sizeof(bool) * store->user_column_count);
		StringInfo	blob = makeStringInfo();

		for (;;)
		{
			MemoryContext oldcontext = MemoryContextSwitchTo(row_context);
			bool		more = buffered_row_reader_next(&reader, values, isnull);

			MemoryContextSwitchTo(oldcontext);
			if (!more)
				break;
			CHECK_FOR_INTERRUPTS();
			row_blob_append(store, blob, values, isnull);
			MemoryContextReset(row_context);
		}
		MemoryContextDelete(row_context);
		source = snapshot_source_new(SNAPSHOT_TRANSACTION);
		source->key = "(this transaction's rows)";
		source->rows_data = blob->data;
		source->rows_len = blob->len;
	}
	else
	{
		char	   *path = rollout_scratch_file_path("own");
		MemoryContextCallback *cleanup = palloc0(sizeof(MemoryContextCallback));

		cleanup->func = xact_buffer_remove_scratch;
		cleanup->arg = path;
		MemoryContextRegisterResetCallback(CurrentMemoryContext, cleanup);
		(void) ingest_write_sorted(store, buffered_row_reader_next, &reader,
								   PG_INT64_MAX, path);
		source = snapshot_source_new(SNAPSHOT_TRANSACTION_SEGMENT);
		source->key = path;
	}
	if (encode_nest_level >= 0)
		portable_encode_end(encode_nest_level);

	source->shard = store->shard;
	source->shard_hash = store->shard_hash;
	source->position = PG_INT64_MAX;
	source->rows = visible;
	source->stamp_fixed = PG_INT64_MAX;
	return source;
}

/*
 * Forget the current buffer before the transaction ends.  Its memory goes
 * with TopTransactionContext; the spill file is closed here, since a file
 * still open at commit draws a leak warning.
 */
static void
xact_buffer_release(XactBuffer *buffer)
{
	if (buffer->file != NULL)
	{
		BufFileClose(buffer->file);
		buffer->file = NULL;
	}
	if (current_buffer == buffer)
		current_buffer = NULL;
}

/* ----------------------------------------------------------------
 * Transaction callbacks
 * ----------------------------------------------------------------
 */

static void
xact_buffer_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			if (current_buffer != NULL)
			{
				if (current_buffer->rows > 0)
					xact_buffer_commit(current_buffer);
				xact_buffer_release(current_buffer);
			}
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (current_buffer != NULL && current_buffer->rows > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that wrote to rollout table \"%s\"",
								current_buffer->relname),
						 errdetail("Rollout tables do not support two-phase commit.")));
			if (current_buffer != NULL)
				xact_buffer_release(current_buffer);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* the memory went (or goes) with TopTransactionContext */
			current_buffer = NULL;
			break;
	}
}

static void
xact_buffer_subxact_callback(SubXactEvent event, SubTransactionId subid,
							 SubTransactionId parent_subid, void *arg)
{
	XactBuffer *buffer = current_buffer;
	int			level;

	if (buffer == NULL)
		return;
	level = GetCurrentTransactionNestLevel();

	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		/* drop the rows of this level and of any deeper one */
		while (buffer->mark_count > 0 &&
			   buffer->marks[buffer->mark_count - 1].nest_level >= level)
		{
			SubxactMark *mark = &buffer->marks[--buffer->mark_count];

			stream_truncate(buffer, mark->offset, mark->rows);
		}

		/*
		 * If the rolled-back rows were the only ones, the transaction has
		 * written nothing: let it write another rollout table after all.
		 */
		if (buffer->rows == 0 && buffer->mark_count == 0)
			xact_buffer_release(buffer);
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		/*
		 * The rows now belong to the parent.  If the parent has no mark yet,
		 * its rows start where this level's did, so the mark moves up.
		 */
		if (buffer->mark_count > 0 &&
			buffer->marks[buffer->mark_count - 1].nest_level >= level)
		{
			SubxactMark *mark = &buffer->marks[buffer->mark_count - 1];

			if (buffer->mark_count > 1 &&
				buffer->marks[buffer->mark_count - 2].nest_level >= level - 1)
				buffer->mark_count--;
			else if (level - 1 <= 1)
				buffer->mark_count--;	/* the top level needs no mark */
			else
				mark->nest_level = level - 1;
		}
	}
}

void
xact_buffer_init(void)
{
	RegisterXactCallback(xact_buffer_xact_callback, NULL);
	RegisterSubXactCallback(xact_buffer_subxact_callback, NULL);
}
