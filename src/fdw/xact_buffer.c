/*-------------------------------------------------------------------------
 *
 * xact_buffer.c
 *		Rows inserted by the current transaction, kept until commit and then
 *		made durable as one WAL entry (DESIGN.md §6.1).
 *
 * Rows are stored as minimal tuples in a byte stream, each after a header
 * with its length and operation (a new version or a tombstone), that
 * lives in memory up to rollout_fdw.transaction_buffer_size and then moves
 * to a temporary file.  The stream only ever grows at the end, which makes
 * subtransactions cheap: every row appended after a subtransaction started
 * belongs to it or to its children, so rolling it back truncates the stream
 * to where it stood at the subtransaction's first write.
 *
 * At XACT_EVENT_PRE_COMMIT the buffer hands its rows to the lsm layer's one
 * commit entry point (rollout_commit_rows, lsm/commit.c), which makes them
 * one WAL entry.  An error there aborts the transaction: nothing of it
 * becomes visible.  PREPARE TRANSACTION is refused, because the rows
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
 * A command never sees the rows it writes itself, so a tombstone it writes
 * deletes the version its scan saw, never one it wrote: a statement that
 * inserts a key and, in a data-modifying WITH, deletes the row of that key
 * it read, keeps its new row, as a heap table without a unique key would;
 * an UPDATE that moves one row to a key and then another row away from it
 * keeps the moved row.  Since the later of two rows of one key in an entry
 * wins, a tombstone of a key its own command already wrote a version of is
 * not buffered at all (xact_buffer_command_wrote_key).
 *
 * TRUNCATE is an entry of the stream too (op ROLLOUT_OP_TRUNCATE, no tuple),
 * so that a savepoint rolled back takes it away like any row.  The rows
 * before the last one are dead: the commit skips them and makes its WAL
 * entry a truncating one, and a scan that sees a TRUNCATE sees nothing
 * committed, only the rows after it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/buffile.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"

#include "rollout/commit.h"
#include "rollout/fdw.h"
#include "rollout/key_set.h"
#include "rollout/store_definition.h"
#include "rollout/xact_buffer.h"

/* rollout_fdw.transaction_buffer_size (kB) */
static int	transaction_buffer_kb = 16 * 1024;

/* Where the stream stood when a subtransaction wrote its first row. */
typedef struct SubxactMark
{
	int			nest_level;
	int64		offset;
	int64		rows;
} SubxactMark;

/* A TRUNCATE in the stream: its row number, and where the row after it starts. */
typedef struct TruncateMark
{
	int64		row;
	int64		offset_after;
} TruncateMark;

/* The first row a command inserted: rows before it came from older ones. */
typedef struct CommandMark
{
	CommandId	cid;
	int64		rows;			/* rows in the stream before it */
	int64		offset;			/* where it starts */
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
	ResourceOwner file_owner;	/* the file's own (stream_spill) */
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

	/* the stream's TRUNCATE entries, in stream order */
	TruncateMark *truncations;
	int			truncation_count;
	int			truncation_capacity;

	/*
	 * The keys command command_keys_cid, the newest, wrote new versions of:
	 * made when a tombstone of that command first needs them, in
	 * command_keys_context, and dropped when the stream is cut.
	 */
	KeySet	   *command_keys;
	CommandId	command_keys_cid;
	MemoryContext command_keys_context;
} XactBuffer;

/* What precedes each row's minimal tuple in the stream. */
typedef struct BufferedRowHeader
{
	uint32		len;			/* of the minimal tuple */
	int16		op;				/* ROLLOUT_OP_INSERT, _DELETE or _TRUNCATE (no
								 * tuple follows) */
} BufferedRowHeader;

/* The current transaction's buffer, in TopTransactionContext; or NULL. */
static XactBuffer *current_buffer = NULL;

/* PRE_COMMIT made the rows durable and holds cancels until COMMIT */
static bool interrupts_held_to_commit = false;

static void xact_buffer_commit(XactBuffer *buffer);
static void xact_buffer_release(XactBuffer *buffer);
static bool xact_buffer_command_wrote_key(XactBuffer *buffer, CommandId cid,
										  Datum key);

/* ----------------------------------------------------------------
 * The row stream
 * ----------------------------------------------------------------
 */

/* Close what a spill file's resource owner holds, as an abort does. */
static void
spill_owner_release(ResourceOwner owner)
{
	ResourceOwnerRelease(owner, RESOURCE_RELEASE_BEFORE_LOCKS, false, false);
	ResourceOwnerRelease(owner, RESOURCE_RELEASE_LOCKS, false, false);
	ResourceOwnerRelease(owner, RESOURCE_RELEASE_AFTER_LOCKS, false, false);
	ResourceOwnerDelete(owner);
}

/*
 * A spill file holding everything the stream has in memory.  It belongs to a
 * resource owner of its own under the top transaction's: a subtransaction's
 * owner would close it when that subtransaction ends, taking the parent's
 * rows with it.  Likewise its memory belongs to the transaction, not to the
 * statement that spilled.  A copy that fails (temp_file_limit, a full disk),
 * inside a subtransaction the caller may then roll back, closes and removes
 * the file (its own owner, released, forgets the buffer the write could not
 * flush) and leaves the stream in memory where it was: the parent's rows
 * stay, and no half-written file counts against temp_file_limit or draws a
 * leak warning at commit.
 */
static void
stream_spill(XactBuffer *buffer)
{
	ResourceOwner saved_owner = CurrentResourceOwner;
	MemoryContext saved_context = MemoryContextSwitchTo(TopTransactionContext);
	ResourceOwner spill_owner = ResourceOwnerCreate(TopTransactionResourceOwner,
													"rollout transaction buffer");
	BufFile    *file;

	CurrentResourceOwner = spill_owner;
	PG_TRY();
	{
		file = BufFileCreateTemp(false);
		BufFileWrite(file, buffer->memory.data, buffer->memory.len);
	}
	PG_CATCH();
	{
		CurrentResourceOwner = saved_owner;
		spill_owner_release(spill_owner);
		PG_RE_THROW();
	}
	PG_END_TRY();
	CurrentResourceOwner = saved_owner;
	MemoryContextSwitchTo(saved_context);
	buffer->file = file;
	buffer->file_owner = spill_owner;
}

/*
 * Close and remove the spill file without writing what its last buffer still
 * holds: nothing reads it again.  BufFileClose would write that buffer first,
 * and when the error being handled is that very write failing (temp_file_limit
 * reached, a full disk), failing again inside a subtransaction's abort makes
 * PostgreSQL retry the abort until it PANICs.  Releasing the file's own
 * resource owner closes its segments as a transaction's abort does: without
 * writing, and without a leak warning.  (The BufFile's few bytes of memory go
 * with TopTransactionContext.)
 */
static void
stream_drop_file(XactBuffer *buffer)
{
	if (buffer->file == NULL)
		return;
	spill_owner_release(buffer->file_owner);
	buffer->file = NULL;
	buffer->file_owner = NULL;
}

/*
 * Append len bytes at the stream's logical end.  The stream stays in memory
 * until it would exceed rollout_fdw.transaction_buffer_size and then moves to
 * a temporary file for the rest of the transaction.  A write to the file seeks
 * to the logical end first: a truncation leaves stale bytes past it, and
 * reading rows back moves the file's position.
 */
static void
stream_write(XactBuffer *buffer, const void *data, size_t len)
{
	if (buffer->file == NULL &&
		buffer->memory.len + len > (size_t) transaction_buffer_kb * 1024)
	{
		stream_spill(buffer);
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

/*
 * Cut the stream back to offset bytes and rows rows, where it stood when a
 * rolled-back subtransaction wrote its first row.  A spill file keeps its
 * physical length; later writes overwrite it from the new logical end.  The
 * command marks whose first row was cut go too, so that what a scan sees stays
 * a prefix of the stream.
 */
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
	/* and the keys a command wrote, which the next tombstone reads again */
	if (buffer->command_keys != NULL)
	{
		MemoryContextReset(buffer->command_keys_context);
		buffer->command_keys = NULL;
	}
	/* and the TRUNCATEs among the rows cut */
	while (buffer->truncation_count > 0 &&
		   buffer->truncations[buffer->truncation_count - 1].row >= rows)
		buffer->truncation_count--;
}

/*
 * The last TRUNCATE among the stream's first rows rows, or NULL: the rows
 * before it are dead, and readers start right after it.
 */
static const TruncateMark *
stream_last_truncation(XactBuffer *buffer, int64 rows)
{
	for (int i = buffer->truncation_count - 1; i >= 0; i--)
	{
		if (buffer->truncations[i].row < rows)
			return &buffer->truncations[i];
	}
	return NULL;
}

/*
 * Read exactly len bytes at the spill file's current position, or ERROR.  The
 * file is read sequentially from where buffered_row_reader_init rewound it,
 * and the row count, not the end of the file, says where the rows end, so a
 * short read is always an error.
 */
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

/*
 * The table must still have the columns its buffered rows were written
 * with, and its store handle the same column types: an ALTER FOREIGN TABLE
 * later in the transaction (a column's type changed, a domain made again, a
 * column dropped or added) would otherwise have rows formed, read back and
 * committed with another descriptor than theirs, which reads a value of one
 * type as another (an integer as a pointer).
 */
static void
xact_buffer_check_unchanged(XactBuffer *buffer, Relation rel,
							RolloutStore *store)
{
	TupleDesc	then = buffer->tupdesc;
	TupleDesc	now = RelationGetDescr(rel);
	bool		same = then->natts == now->natts &&
	buffer->store->schema_digest == store->schema_digest;

	/* what forming and deforming the rows depends on, not constraints */
	for (int i = 0; same && i < now->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(then, i);
		Form_pg_attribute b = TupleDescAttr(now, i);

		same = a->atttypid == b->atttypid && a->attisdropped == b->attisdropped &&
			a->attlen == b->attlen && a->attbyval == b->attbyval &&
			a->attalign == b->attalign;
	}
	if (!same)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("rollout table \"%s\" changed after this transaction wrote to it",
						RelationGetRelationName(rel)),
				 errdetail("The transaction's rows are buffered with the columns the table had then."),
				 errhint("Commit or roll back before altering the table.")));
}

/*
 * A write must go to the store, at the location and with the credentials,
 * that the transaction's earlier writes go to at commit: the buffer holds
 * that store's handle.  The table's option store, or its server's location,
 * changed since (an ALTER in this transaction, or one another session
 * committed meanwhile, which takes no lock this transaction waits for), or
 * another role's user mapping (SET ROLE, a view's owner, a SECURITY DEFINER
 * function) would otherwise send this write's rows, deletes and TRUNCATE to
 * the first store, with the first role's credentials, while the
 * transaction's own reads go to the new one.
 */
static void
xact_buffer_check_same_store(XactBuffer *buffer, Relation rel,
							 RolloutStore *store)
{
	if (strcmp(buffer->store->objstore->identity, store->objstore->identity) != 0 ||
		strcmp(buffer->store->name, store->name) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the store of rollout table \"%s\" changed after this transaction wrote to it",
						RelationGetRelationName(rel)),
				 errdetail("The transaction's rows go to store \"%s\" at %s at commit; the table now names store \"%s\" at %s.",
						   buffer->store->name, buffer->store->location,
						   store->name, store->location),
				 errhint("Commit or roll back before changing the table's store or its server's location.")));
	if (strcmp(buffer->store->objstore->access_fingerprint,
			   store->objstore->access_fingerprint) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a transaction can write to rollout table \"%s\" with only one user mapping's credentials",
						RelationGetRelationName(rel)),
				 errdetail("Its earlier writes were made with other credentials (another role's user mapping, a view owner's, or a mapping changed since), and its rows become one WAL entry written with them."),
				 errhint("Commit before writing to \"%s\" as another role.",
						 RelationGetRelationName(rel))));
}

/*
 * The current transaction's buffer, made in TopTransactionContext at its first
 * write and bound to the table and store of that write: a transaction may
 * write to only one rollout table, since its rows become one WAL entry and
 * only one entry is atomic.  The table's tuple descriptor and the mapping of
 * its attributes to store columns are copied once, here.
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
		xact_buffer_check_same_store(current_buffer, rel, store);
		xact_buffer_check_unchanged(current_buffer, rel, store);
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
	buffer->truncation_capacity = 4;
	buffer->truncations = palloc(sizeof(TruncateMark) * buffer->truncation_capacity);
	buffer->command_keys_context = AllocSetContextCreate(TopTransactionContext,
														 "rollout command keys",
														 ALLOCSET_DEFAULT_SIZES);
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
	buffer->commands[buffer->command_count].offset = buffer->length;
	buffer->command_count++;
}

/*
 * The rows become durable at PRE_COMMIT, the last hook before the commit
 * record.  Under SERIALIZABLE, PostgreSQL may still fail the commit after that
 * hook (a serialization failure found at commit), which would leave an
 * aborted transaction's rows durable and visible: refuse every write there.
 */
static void
xact_buffer_refuse_serializable(Relation rel)
{
	if (IsolationIsSerializable())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot write to rollout table \"%s\" in a SERIALIZABLE transaction",
						RelationGetRelationName(rel)),
				 errdetail("A serializable transaction can still fail after its rows were made durable."),
				 errhint("Use READ COMMITTED or REPEATABLE READ for transactions that write rollout tables.")));
}

/*
 * See xact_buffer.h.  The row is refused in a SERIALIZABLE transaction and
 * when its key is null; out-of-line (toasted) values are fetched, since the
 * buffer must hold the values themselves.  It is appended as a minimal tuple
 * after its header (length and operation), after noting where its subtransaction's and its command's
 * rows begin.
 */
void
xact_buffer_add_row(Relation rel, RolloutStore *store, TupleTableSlot *slot,
					CommandId cid, int16 op)
{
	XactBuffer *buffer;
	TupleDesc	tupdesc;
	MemoryContext oldcontext;
	Datum	   *values;
	bool	   *isnull;
	MinimalTuple tuple;
	BufferedRowHeader header = {0};
	int			key_column = store->key_column;
	Datum		key = (Datum) 0;

	xact_buffer_refuse_serializable(rel);
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
		if (buffer->attr_to_column[i] == key_column)
			key = values[i];
	}

	/* a command's tombstone never hides the command's own row (header) */
	if (op == ROLLOUT_OP_DELETE && xact_buffer_command_wrote_key(buffer, cid, key))
	{
		MemoryContextSwitchTo(oldcontext);
		MemoryContextReset(buffer->row_context);
		return;
	}
	tuple = heap_form_minimal_tuple(tupdesc, values, isnull);
	MemoryContextSwitchTo(oldcontext);

	xact_buffer_mark_level(buffer);
	xact_buffer_mark_command(buffer, cid);
	header.len = tuple->t_len;
	header.op = op;
	stream_write(buffer, &header, sizeof(header));
	stream_write(buffer, tuple, header.len);
	buffer->rows++;
	if (op == ROLLOUT_OP_INSERT && buffer->command_keys != NULL &&
		buffer->command_keys_cid == cid)
		key_set_add(buffer->command_keys, key);
	MemoryContextReset(buffer->row_context);
}

/*
 * See xact_buffer.h.  The TRUNCATE is a stream entry without a tuple, after
 * the same marks as a row, so that rolling back its savepoint or reading
 * before its command works as for rows.
 */
void
xact_buffer_add_truncate(Relation rel, RolloutStore *store, CommandId cid)
{
	XactBuffer *buffer;
	BufferedRowHeader header = {0};

	xact_buffer_refuse_serializable(rel);
	buffer = xact_buffer_get(rel, store);
	xact_buffer_mark_level(buffer);
	xact_buffer_mark_command(buffer, cid);
	if (buffer->truncation_count == buffer->truncation_capacity)
	{
		buffer->truncation_capacity *= 2;
		buffer->truncations = repalloc(buffer->truncations,
									   sizeof(TruncateMark) * buffer->truncation_capacity);
	}
	header.len = 0;
	header.op = ROLLOUT_OP_TRUNCATE;
	stream_write(buffer, &header, sizeof(header));
	buffer->truncations[buffer->truncation_count].row = buffer->rows;
	buffer->truncations[buffer->truncation_count].offset_after = buffer->length;
	buffer->truncation_count++;
	buffer->rows++;
}

/* ----------------------------------------------------------------
 * Commit
 * ----------------------------------------------------------------
 */

/* Reads the buffered rows back, in store column order (a StoreRowReader). */
typedef struct BufferedRowReader
{
	XactBuffer *buffer;
	int64		row_limit;		/* read up to row row_limit */
	int64		row;
	int64		offset;
	Datum	   *table_values;
	bool	   *table_isnull;
} BufferedRowReader;

static void buffered_row_reader_init_range(BufferedRowReader *reader,
										   XactBuffer *buffer, int64 from_row,
										   int64 from_offset, int64 rows);

/*
 * Prepare reader to read the live rows among buffer's first rows rows: those
 * after the last TRUNCATE among them (from the start when there is none),
 * which it jumps to, never reading the dead ones.  A spilled stream is read
 * sequentially from the file, positioned here, so a reader must be used up
 * before the stream is written or read again: the commit and the scan source
 * both consume theirs at once.
 */
static void
buffered_row_reader_init(BufferedRowReader *reader, XactBuffer *buffer,
						 int64 rows)
{
	buffered_row_reader_init_range(reader, buffer, 0, 0, rows);
}

/*
 * The same for the live rows from row from_row (starting at from_offset) up
 * to row rows.
 */
static void
buffered_row_reader_init_range(BufferedRowReader *reader, XactBuffer *buffer,
							   int64 from_row, int64 from_offset, int64 rows)
{
	const TruncateMark *truncation = stream_last_truncation(buffer, rows);

	reader->buffer = buffer;
	reader->row_limit = rows;
	reader->row = from_row;
	reader->offset = from_offset;
	if (truncation != NULL && truncation->row >= from_row)
	{
		reader->row = truncation->row + 1;
		reader->offset = truncation->offset_after;
	}
	reader->table_values = palloc0(sizeof(Datum) * Max(buffer->tupdesc->natts, 1));
	reader->table_isnull = palloc0(sizeof(bool) * Max(buffer->tupdesc->natts, 1));
	if (buffer->file != NULL &&
		BufFileSeek(buffer->file, 0, reader->offset, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not seek in the transaction buffer of rollout table \"%s\": %m",
						buffer->relname)));
}

/*
 * The next buffered row as values in the store's user-column order (a
 * column the table lacks is null), followed by its operation.  The values point into memory of
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
	BufferedRowHeader header;

	if (reader->row >= reader->row_limit)
		return false;
	if (buffer->file == NULL)
	{
		memcpy(&header, buffer->memory.data + reader->offset, sizeof(header));
		tuple = palloc(header.len); /* aligned copy */
		memcpy(tuple, buffer->memory.data + reader->offset + sizeof(header), header.len);
	}
	else
	{
		stream_read_exact(buffer, &header, sizeof(header));
		tuple = palloc(header.len);
		stream_read_exact(buffer, tuple, header.len);
	}
	reader->offset += sizeof(header) + header.len;
	reader->row++;
	/* readers start after the last TRUNCATE: every one they read is dead */
	Assert(header.op != ROLLOUT_OP_TRUNCATE);

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
	}
	values[store->user_column_count] = Int16GetDatum(header.op);
	isnull[store->user_column_count] = false;
	return true;
}

/*
 * Make buffer->command_keys the keys command cid wrote new versions of,
 * read from the stream: the rows of each stretch of the stream cid wrote.
 */
static void
xact_buffer_read_command_keys(XactBuffer *buffer, CommandId cid)
{
	RolloutStore *store = buffer->store;
	MemoryContext scratch = AllocSetContextCreate(CurrentMemoryContext,
												  "rollout command keys scratch",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext row_scratch = AllocSetContextCreate(scratch,
													  "rollout command keys row",
													  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcontext = MemoryContextSwitchTo(scratch);
	Datum	   *values = palloc(sizeof(Datum) * (store->user_column_count + 1));
	bool	   *isnull = palloc(sizeof(bool) * (store->user_column_count + 1));

	MemoryContextReset(buffer->command_keys_context);
	buffer->command_keys = key_set_create(&store->schema.columns[store->key_column],
										  buffer->command_keys_context);
	buffer->command_keys_cid = cid;
	for (int i = 0; i < buffer->command_count; i++)
	{
		const CommandMark *mark = &buffer->commands[i];
		int64		end = buffer->rows;
		BufferedRowReader reader;

		if (mark->cid != cid)
			continue;
		if (i + 1 < buffer->command_count)
			end = buffer->commands[i + 1].rows;
		buffered_row_reader_init_range(&reader, buffer, mark->rows, mark->offset, end);
		MemoryContextSwitchTo(row_scratch);
		while (buffered_row_reader_next(&reader, values, isnull))
		{
			if (DatumGetInt16(values[store->user_column_count]) == ROLLOUT_OP_INSERT)
				key_set_add(buffer->command_keys, values[store->key_column]);
			MemoryContextReset(row_scratch);
		}
		MemoryContextSwitchTo(scratch);
	}
	MemoryContextSwitchTo(oldcontext);
	MemoryContextDelete(scratch);
}

/*
 * Has command cid buffered a new version of key already?  (See the file
 * header.)  The command's keys are read from the stream when a tombstone
 * first asks, then kept by xact_buffer_add_row as the command writes more,
 * so a statement that writes no tombstone never pays for them.
 */
static bool
xact_buffer_command_wrote_key(XactBuffer *buffer, CommandId cid, Datum key)
{
	if (buffer->command_keys == NULL || buffer->command_keys_cid != cid)
		xact_buffer_read_command_keys(buffer, cid);
	return key_set_contains(buffer->command_keys, key);
}

/*
 * Make the buffered rows durable: the lsm layer decides how (WAL entry or
 * ingest segment, group or direct commit) from their size and whether they
 * spilled.
 */
static void
xact_buffer_commit(XactBuffer *buffer)
{
	BufferedRowReader reader;
	bool		live_rows;

	/*
	 * After the WAL entry is durable nothing may fail: the spill file is then
	 * removed without writing its last buffer (stream_drop_file), where an
	 * error (a full disk, temp_file_limit) would report a committed
	 * transaction as aborted.
	 */

	/* only the live rows count for the size and the spill */
	buffered_row_reader_init(&reader, buffer, buffer->rows);
	live_rows = reader.row < buffer->rows;
	rollout_commit_rows(buffer->store, buffered_row_reader_next, &reader,
						buffer->length - reader.offset,
						live_rows && buffer->file != NULL,
						buffer->truncation_count > 0);
	/* the next plan of this backend counts them */
	scan_estimate_forget(buffer->store);
}

/*
 * xact_buffer_scan_source
 *		The rows this transaction inserted into rel with commands before
 *		curcid (the scan's snapshot's command id: a statement does not see
 *		its own inserts), as the newest source of a scan; NULL when there
 *		are none.
 *
 * Rows rolled back with a savepoint are gone from the stream already; what
 * is left is a prefix of it, which the lsm layer turns into a source like
 * any other (rollout_uncommitted_rows_source), without the rows before the
 * last TRUNCATE in it; *truncated says whether there is one.
 */
SnapshotSource *
xact_buffer_scan_source(Relation rel, RolloutStore *store, CommandId curcid,
						bool *truncated)
{
	XactBuffer *buffer = current_buffer;
	BufferedRowReader reader;
	int64		visible;

	*truncated = false;

	/*
	 * The rows go to the buffer's store at commit: a scan of that store sees
	 * them, through whichever table reads it (another table of the same
	 * store, one with read_wal_tail say, too; the rows are in the store's
	 * columns by then), and a scan of any other store does not.
	 */
	if (buffer == NULL ||
		strcmp(buffer->store->objstore->identity, store->objstore->identity) != 0 ||
		strcmp(buffer->store->name, store->name) != 0)
		return NULL;
	if (buffer->relid == RelationGetRelid(rel))
		xact_buffer_check_unchanged(buffer, rel, store);
	else if (buffer->store->schema_digest != store->schema_digest)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("rollout table \"%s\" reads store \"%s\" with other columns than table \"%s\", which this transaction wrote to",
						RelationGetRelationName(rel), store->name, buffer->relname),
				 errdetail("The transaction's own rows of the store cannot be read with them (their order or types differ)."),
				 errhint("Commit before reading the store through \"%s\".",
						 RelationGetRelationName(rel))));
	visible = buffer->rows;
	for (int i = 0; i < buffer->command_count; i++)
	{
		if (buffer->commands[i].cid >= curcid)
		{
			visible = buffer->commands[i].rows;
			break;
		}
	}
	*truncated = stream_last_truncation(buffer, visible) != NULL;
	buffered_row_reader_init(&reader, buffer, visible);
	if (reader.row == visible)
		return NULL;
	return rollout_uncommitted_rows_source(store, buffered_row_reader_next,
										   &reader, buffer->file != NULL,
										   visible - reader.row);
}

/*
 * Forget the current buffer before the transaction ends.  Its memory goes
 * with TopTransactionContext; the spill file is removed here, since a file
 * still open at commit draws a leak warning.  Nothing here may fail: it runs
 * in a subtransaction's abort too.
 */
static void
xact_buffer_release(XactBuffer *buffer)
{
	stream_drop_file(buffer);
	if (current_buffer == buffer)
		current_buffer = NULL;
}

/* ----------------------------------------------------------------
 * Transaction callbacks
 * ----------------------------------------------------------------
 */

/*
 * Transaction callback.  At PRE_COMMIT the buffered rows are made durable (an
 * error there aborts the transaction) and the spill file is closed, since one
 * still open at commit draws a leak warning.  PREPARE TRANSACTION is refused
 * when rows are buffered (see the file header).  When the transaction ends the
 * buffer is only forgotten: its memory goes with TopTransactionContext, and
 * after an abort its spill file with the top transaction's resource owner.
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
				{
					xact_buffer_commit(current_buffer);

					/*
					 * The rows are durable and visible now, so a cancel must
					 * not make the transaction report failure: one that
					 * arrived during the commit's wait is still pending, and
					 * the next CHECK_FOR_INTERRUPTS before PostgreSQL's own
					 * commit (closing the spill file below may log, and
					 * logging checks) would raise it.  Cancels stay held
					 * until COMMIT.  Only cancels: a terminate still ends a
					 * backend stuck in another extension's pre-commit work,
					 * whose client then loses the connection rather than
					 * hearing a wrong answer.  (An ERROR of a later
					 * pre-commit step, another wrapper's say, still aborts a
					 * transaction whose rows are durable: docs/WRITER.md,
					 * "Known limits".)
					 */
					HOLD_CANCEL_INTERRUPTS();
					interrupts_held_to_commit = true;
				}
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
			/* unless an ERROR caught in between reset the count already */
			if (interrupts_held_to_commit && QueryCancelHoldoffCount > 0)
				RESUME_CANCEL_INTERRUPTS();
			interrupts_held_to_commit = false;
			/* the memory went (or goes) with TopTransactionContext */
			current_buffer = NULL;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* an ERROR after PRE_COMMIT reset the holdoff count already */
			interrupts_held_to_commit = false;
			current_buffer = NULL;
			break;
	}
}

/*
 * Subtransaction callback.  On rollback, cut the stream back to where the
 * aborting subtransaction first wrote, dropping its rows, and forget the
 * buffer if nothing is left, so that the transaction may still write to
 * another rollout table.  On commit the subtransaction's rows pass to its
 * parent: its mark is dropped when the parent has a mark of its own or is the
 * top level, and otherwise becomes the parent's.
 */
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

/* Define rollout_fdw.transaction_buffer_size; _PG_init calls this. */
void
xact_buffer_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.transaction_buffer_size",
							"Memory for a transaction's buffered rows before they spill to a temporary file.",
							NULL,
							&transaction_buffer_kb,
							16 * 1024, 64, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/* Register the transaction callbacks; _PG_init calls this. */
void
xact_buffer_init(void)
{
	RegisterXactCallback(xact_buffer_xact_callback, NULL);
	RegisterSubXactCallback(xact_buffer_subxact_callback, NULL);
}
