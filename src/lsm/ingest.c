/*-------------------------------------------------------------------------
 *
 * ingest.c
 *		Stage a large transaction's rows as a sorted segment (DESIGN.md §6.3).
 *
 * A COPY of a gigabyte must not need a gigabyte of memory, neither in the
 * backend nor in the shared memtable.  Past rollout_fdw.ingest_threshold a
 * transaction's rows are sorted by key with PostgreSQL's tuplesort (which
 * spills to temporary files past work_mem), reduced to the newest version of
 * each key, and uploaded as one segment under ingest/.  The commit is still
 * one WAL entry: it names the segment, and until that entry exists the
 * segment is an orphan that garbage collection removes.  Flush later adopts
 * the segment as a generation without rewriting it.
 *
 * The segment's rows carry the committer's stamp; readers give them the
 * effective stamp of the WAL entry that names them, like every row of a WAL
 * entry, so version order stays commit order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

#include "rollout/fault.h"
#include "rollout/ingest.h"
#include "rollout/json_doc.h"
#include "rollout/scratch.h"
#include "rollout/store_definition.h"

char *
ingest_key_prefix(RolloutStore *store)
{
	return psprintf("%s/ingest/%s.", store->name, store->shard);
}

/*
 * The rows of the sort: the store's user columns, the row's operation and a
 * sequence number.
 */
static TupleDesc
ingest_sort_desc(RolloutStore *store)
{
	int			ncolumns = store->user_column_count;
	TupleDesc	desc = CreateTemplateTupleDesc(ncolumns + 2);

	for (int c = 0; c < ncolumns + 1; c++)
		TupleDescCopyEntry(desc, c + 1, store->row_desc, c + 1);
	TupleDescInitEntry(desc, ncolumns + 2, "_seq", INT8OID, -1, 0);
	return desc;
}

/* Sort, deduplicate and write the rows into a local segment file. */
int64
ingest_write_sorted(RolloutStore *store, StoreRowReader next, void *arg,
					int64 stamp, const char *path)
{
	int			nuser = store->user_column_count;
	int			ncolumns = store->schema.ncolumns;
	const SegmentColumn *key_column = &store->schema.columns[store->key_column];
	TupleDesc	desc = ingest_sort_desc(store);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	AttrNumber	attnums[2] = {store->key_column + 1, nuser + 2};
	Oid			operators[2];
	Oid			collations[2] = {InvalidOid, InvalidOid};
	bool		nulls_first[2] = {false, false};
	Tuplesortstate *sort;
	Datum	   *values = palloc0(sizeof(Datum) * (nuser + 2));
	bool	   *isnull = palloc0(sizeof(bool) * (nuser + 2));
	Datum	   *out_values = palloc0(sizeof(Datum) * ncolumns);
	bool	   *out_isnull = palloc0(sizeof(bool) * ncolumns);
	MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext,
													  "rollout ingest row",
													  ALLOCSET_DEFAULT_SIZES);
	SegmentWriter *writer;
	SegmentWriteSummary summary;
	Datum		previous_key = (Datum) 0;
	bool		have_previous = false;
	int64		seq = 0;

	/* key ascending in the store's order, newest version of a key first */
	operators[0] = lookup_type_cache(key_column->typid, TYPECACHE_LT_OPR)->lt_opr;
	operators[1] = lookup_type_cache(INT8OID, TYPECACHE_GT_OPR)->gt_opr;
	if (type_is_collatable(key_column->typid))
		collations[0] = C_COLLATION_OID;
	sort = tuplesort_begin_heap(desc, 2, attnums, operators, collations,
								nulls_first, work_mem, NULL, TUPLESORT_NONE);

	for (;;)
	{
		MemoryContext oldcontext = MemoryContextSwitchTo(row_context);
		bool		more = next(arg, values, isnull);

		if (more)
		{
			CHECK_FOR_INTERRUPTS();
			values[nuser + 1] = Int64GetDatum(seq++);
			isnull[nuser + 1] = false;
			ExecClearTuple(slot);
			memcpy(slot->tts_values, values, sizeof(Datum) * (nuser + 2));
			memcpy(slot->tts_isnull, isnull, sizeof(bool) * (nuser + 2));
			ExecStoreVirtualTuple(slot);
			tuplesort_puttupleslot(sort, slot);
		}
		MemoryContextSwitchTo(oldcontext);
		MemoryContextReset(row_context);
		if (!more)
			break;
	}
	tuplesort_performsort(sort);

	writer = segment_writer_begin(&store->schema, path, true, store_rows_per_group,
								  store_key_filter_bits, store_page_size * 1024,
								  store_dictionary_size * 1024);
	out_values[store->ts_column] = Int64GetDatum(stamp);
	out_values[store->shard_column] = Int64GetDatum(store->shard_hash);
	out_isnull[store->ts_column] = out_isnull[store->shard_column] =
		out_isnull[store->op_column] = false;
	while (tuplesort_gettupleslot(sort, true, true, slot, NULL))
	{
		Datum		key;

		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(slot);
		key = slot->tts_values[store->key_column];
		/* the first row of each key is its newest version */
		if (have_previous &&
			segment_column_compare(key_column, previous_key, key) == 0)
			continue;
		for (int c = 0; c < nuser; c++)
		{
			out_values[c] = slot->tts_values[c];
			out_isnull[c] = slot->tts_isnull[c];
		}
		out_values[store->op_column] = slot->tts_values[nuser];
		segment_writer_add_row(writer, out_values, out_isnull);
		if (have_previous && !key_column->typbyval)
			pfree(DatumGetPointer(previous_key));
		previous_key = datumCopy(key, key_column->typbyval, key_column->typlen);
		have_previous = true;
	}
	tuplesort_end(sort);
	ExecDropSingleTupleTableSlot(slot);
	segment_writer_finish(writer, "{\"kind\": \"ingest\"}", &summary);
	MemoryContextDelete(row_context);
	return summary.row_count;
}

/*
 * Stage a large transaction's rows (ingest.h).  The object is named after the
 * shard, so this shard's garbage collection finds it, and a fresh UUID, so
 * create-if-absent finds it taken only in a damaged store; the local scratch
 * file is removed whatever happens.  Until the WAL entry that names it is
 * durable, the uploaded segment is an orphan that garbage collection removes
 * if that entry never comes.
 */
WalIngestRef *
ingest_stage_rows(RolloutStore *store, StoreRowReader next, void *arg,
				  int64 stamp)
{
	WalIngestRef *ref = palloc0(sizeof(WalIngestRef));
	char	   *path = rollout_scratch_file_path("ingest");

	ref->file = psprintf("%s%s.seg", ingest_key_prefix(store), objstore_new_put_id());
	PG_TRY();
	{
		ref->rows = ingest_write_sorted(store, next, arg, stamp, path);
		rollout_fault_point("ingest.after_sort");
		ref->staged_at = GetCurrentTimestamp();
		if (objstore_create_from_file_if_absent(store->objstore, ref->file, path,
												objstore_new_put_id()) != OBJSTORE_CREATED)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("ingest segment \"%s\" of store \"%s\" already exists",
							ref->file, store->name)));
	}
	PG_FINALLY();
	{
		(void) rollout_scratch_file_remove(path);
	}
	PG_END_TRY();
	return ref;
}
