/*-------------------------------------------------------------------------
 *
 * scan.c
 *		Executing a scan of a rollout table.
 *
 * A scan takes a snapshot of the store and runs the deduplicating merge
 * read over it (src/read/), limited to the key range its key conditions
 * (scan_plan.c) evaluate to.
 *
 * What a scan reads: the store snapshot of its statement or transaction
 * (scan_snapshot.c, as the isolation level promises), plus the rows its own
 * transaction inserted into the table by earlier commands, the newest
 * versions of all (xact_buffer.c).  Columns stored as text because their
 * values would otherwise depend on the database's OIDs are decoded here,
 * for the columns the query uses (portable_values.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/parallel.h"
#include "access/sysattr.h"
#include "catalog/pg_collation.h"
#include "executor/executor.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "rollout/fault.h"
#include "rollout/named_snapshot.h"
#include "rollout/scan_snapshot.h"
#include "rollout/store_definition.h"
#include "rollout/xact_buffer.h"

#include "scan_internal.h"

/* Fresh snapshots a scan takes when objects vanish under it. */
#define SCAN_MAX_SNAPSHOT_ATTEMPTS	5

/*
 * The user columns (attnos) a scan's query selects from its table, as
 * PostgreSQL's permission check sees them: every column for a whole-row
 * reference, none for system columns.
 */
static Bitmapset *
scan_selected_columns(Relation rel, RangeTblEntry *rte)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	Bitmapset  *attnos = NULL;
	int			member = -1;

	while ((member = bms_next_member(rte->selectedCols, member)) >= 0)
	{
		AttrNumber	attno = member + FirstLowInvalidHeapAttributeNumber;

		if (attno == InvalidAttrNumber)
		{
			for (int i = 1; i <= tupdesc->natts; i++)
				if (!TupleDescAttr(tupdesc, i - 1)->attisdropped)
					attnos = bms_add_member(attnos, i);
		}
		else if (attno > 0)
			attnos = bms_add_member(attnos, attno);
	}
	return attnos;
}

/*
 * rollout_fdw.as_of may be read only by a role that may read the table
 * itself (rollout_check_as_of_privilege).  A table read through a parent
 * (partitioned or inherited) was not checked by PostgreSQL itself: its range
 * table entry requires nothing, since the parent's was checked.  The
 * privileges of the parents count there.
 */
static void
scan_check_as_of_privilege(Relation rel, EState *estate, Index scanrelid)
{
	RangeTblEntry *rte = exec_rt_fetch(scanrelid, estate);

	rollout_check_as_of_privilege(RelationGetRelid(rel),
								  scan_selected_columns(rel, rte),
								  rte->requiredPerms == 0);
}

/*
 * BeginForeignScan: set up the scan's state.  The options and key conditions
 * are kept even for plain EXPLAIN, which shows them but reads nothing here
 * (its planning may have read metadata for the estimate, scan_estimate.c).
 * Otherwise the store is opened with the user mapping of the role
 * the range table entry names, the table's columns are mapped to the store's
 * by name, and the columns the plan retrieves are marked wanted, so that the
 * read decodes only those.  The snapshot is not taken here but at the first
 * IterateForeignScan.
 */
static void
rollout_begin_foreign_scan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	RolloutScanState *state = palloc0(sizeof(RolloutScanState));
	List	   *retrieved_attrs = scan_plan_retrieved_attrs(plan);
	TupleDesc	tupdesc;
	ListCell   *lc;
	Oid			userid;

	node->fdw_state = state;
	state->rel = node->ss.ss_currentRelation;
	state->options = rollout_table_options(RelationGetRelid(state->rel));
	state->key_quals = scan_plan_key_quals(plan);
	state->pushed_conditions = scan_plan_pushed_conditions(plan);

	/* plain EXPLAIN executes nothing */
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	userid = rollout_user_for_range_table_entry(node->ss.ps.state,
												plan->scan.scanrelid);
	state->store = rollout_store_for_reading(state->rel, userid);
	state->as_of = rollout_table_as_of(state->options, state->store);
	/* a token of another creation made the handle look again: it was stale */
	if (state->store->stale)
	{
		state->store = rollout_store_for_relation_as(state->rel, userid);
		state->as_of = rollout_table_as_of(state->options, state->store);
	}
	/* a copy: the setting's value may change before the scan reads it */
	if (state->as_of != NULL)
		state->as_of = pstrdup(state->as_of);
	if (state->as_of != NULL && state->options->as_of == NULL)
		scan_check_as_of_privilege(state->rel, node->ss.ps.state,
								   plan->scan.scanrelid);
	state->scan_context = AllocSetContextCreate(CurrentMemoryContext,
												"rollout scan",
												ALLOCSET_DEFAULT_SIZES);
	state->rescan_context = AllocSetContextCreate(state->scan_context,
												  "rollout rescan",
												  ALLOCSET_DEFAULT_SIZES);
	state->row_context = AllocSetContextCreate(state->scan_context,
											   "rollout scan row",
											   ALLOCSET_SMALL_SIZES);
	state->estate = node->ss.ps.state;
	tupdesc = RelationGetDescr(state->rel);
	state->natts = tupdesc->natts;
	state->attr_to_column = palloc(sizeof(int) * Max(state->natts, 1));
	state->want = palloc0(sizeof(bool) * state->store->schema.ncolumns);
	for (int i = 0; i < state->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		state->attr_to_column[i] = attr->attisdropped ? -1 :
			rollout_store_column_index(state->store, NameStr(attr->attname));
	}
	foreach(lc, retrieved_attrs)
	{
		int			column = state->attr_to_column[lfirst_int(lc) - 1];

		if (column >= 0)
			state->want[column] = true;
	}
	state->values = palloc0(sizeof(Datum) * state->store->schema.ncolumns);
	state->isnull = palloc0(sizeof(bool) * state->store->schema.ncolumns);
	state->value_states = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
}

/*
 * Evaluate the key conditions into a key range.  Only the first lower and
 * the first upper bound are kept: combining bounds of different types would
 * need cross-type comparisons, and fewer bounds only means less skipping.
 */
static void
rollout_build_key_range(ForeignScanState *node, RolloutScanState *state,
						KeyRange *range)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	ListCell   *lc_qual;
	ListCell   *lc_value;

	memset(range, 0, sizeof(KeyRange));
	/* the key conditions' values come first in fdw_exprs */
	forboth(lc_qual, state->key_quals, lc_value, state->value_states)
	{
		KeyQual    *qual = lfirst(lc_qual);
		ExprState  *value_state = lfirst(lc_value);
		bool		isnull;
		Datum		value;
		KeyBound	bound = {0};
		Form_pg_attribute attr;

		value = ExecEvalExpr(value_state, econtext, &isnull);
		if (isnull)
		{
			/* a strict comparison with NULL matches nothing */
			range->empty = true;
			return;
		}
		bound.present = true;
		bound.value = datumCopy(value, get_typbyval(qual->righttype),
								get_typlen(qual->righttype));
		bound.value_type = qual->righttype;
		fmgr_info_cxt(get_opfamily_proc(qual->opfamily, qual->lefttype,
										qual->righttype, BTORDER_PROC),
					  &bound.compare_proc, CurrentMemoryContext);
		attr = TupleDescAttr(RelationGetDescr(state->rel),
							 get_attnum(RelationGetRelid(state->rel),
										state->options->key_column) - 1);
		bound.collation = type_is_collatable(attr->atttypid) ? C_COLLATION_OID : InvalidOid;

		switch (qual->strategy)
		{
			case BTEqualStrategyNumber:
				/* one key, which key filters can be asked about */
				if (!range->lower.present && !range->upper.present)
					range->single_key = true;
				if (!range->lower.present)
				{
					range->lower = bound;
					range->lower.inclusive = true;
				}
				if (!range->upper.present)
				{
					range->upper = bound;
					range->upper.inclusive = true;
				}
				break;
			case BTLessStrategyNumber:
			case BTLessEqualStrategyNumber:
				if (!range->upper.present)
				{
					range->upper = bound;
					range->upper.inclusive = qual->strategy == BTLessEqualStrategyNumber;
				}
				break;
			case BTGreaterStrategyNumber:
			case BTGreaterEqualStrategyNumber:
				if (!range->lower.present)
				{
					range->lower = bound;
					range->lower.inclusive = qual->strategy == BTGreaterEqualStrategyNumber;
				}
				break;
		}
	}
}

/* See scan_internal.h. */
void
scan_counters_add(ScanCounters *into, const ScanCounters *add)
{
	MergeReadStats *t = &into->reads;
	const MergeReadStats *s = &add->reads;

	t->fragments_read += s->fragments_read;
	t->fragments_skipped += s->fragments_skipped;
	t->generations_read += s->generations_read;
	t->generations_skipped += s->generations_skipped;
	t->wal_entries_read += s->wal_entries_read;
	t->wal_entries_skipped += s->wal_entries_skipped;
	t->row_groups_read += s->row_groups_read;
	t->row_groups_skipped += s->row_groups_skipped;
	t->key_filter_skipped += s->key_filter_skipped;
	t->zone_map_skipped += s->zone_map_skipped;
	t->versions_read += s->versions_read;
	t->chunks_deferred += s->chunks_deferred;
	t->chunks_decoded_late += s->chunks_decoded_late;
	t->pages_decoded_late += s->pages_decoded_late;
	t->rows_filtered += s->rows_filtered;
	t->transaction_rows_read += s->transaction_rows_read;
	t->rows_returned += s->rows_returned;
	t->prefetch_batches += s->prefetch_batches;
	into->remote_requests += add->remote_requests;
	into->remote_rounds += add->remote_rounds;
	into->remote_retries += add->remote_retries;
	into->footer_cache_hits += add->footer_cache_hits;
	into->footer_cache_misses += add->footer_cache_misses;
	into->footer_cache_shared_hits += add->footer_cache_shared_hits;
	into->disk_cache_hits += add->disk_cache_hits;
	into->disk_cache_misses += add->disk_cache_misses;
}

/*
 * Add the statistics of the read about to end, and the object-store requests
 * made and footers and blocks looked up in the footer and disk caches since
 * the marks, to the node's counters for EXPLAIN ANALYZE; the marks move on,
 * so that the next read counts only its own.
 */
static void
rollout_scan_accumulate_stats(RolloutScanState *state)
{
	ScanCounters read = {0};
	ObjectStoreCounters now;
	FooterCacheCounters footers;
	ReadCacheCounters disk;

	read.reads = *merge_read_stats(state->read);
	objstore_get_counters(&now);
	read.remote_requests = now.requests - state->counters_mark.requests;
	read.remote_rounds = now.rounds - state->counters_mark.rounds;
	read.remote_retries = now.retries - state->counters_mark.retries;
	state->counters_mark = now;
	footer_cache_get_counters(&footers);
	read.footer_cache_hits = footers.hits - state->footer_mark.hits;
	read.footer_cache_misses = footers.misses - state->footer_mark.misses;
	read.footer_cache_shared_hits =
		footers.shared_hits - state->footer_mark.shared_hits;
	state->footer_mark = footers;
	read_cache_get_counters(&disk);
	read.disk_cache_hits = disk.hits - state->disk_cache_mark.hits;
	read.disk_cache_misses = disk.misses - state->disk_cache_mark.misses;
	state->disk_cache_mark = disk;
	scan_counters_add(&state->counters, &read);
}

/*
 * The snapshot the scan reads, in scan_context: its statement's or
 * transaction's store snapshot, with the transaction's own rows as the
 * newest source when it inserted into the table before this command; or the
 * named snapshot of as_of, alone.
 */
RolloutSnapshot *
rollout_scan_take_snapshot(RolloutScanState *state)
{
	RolloutSnapshot *shared;
	RolloutSnapshot *snapshot;

	/* a named snapshot is the past: not the transaction's own rows */
	if (state->as_of != NULL)
		return named_snapshot_read(state->store, state->as_of);
	shared = rollout_scan_snapshot(state->store, state->options->read_wal_tail,
								   state->estate);

	rollout_fault_point("scan.after_snapshot");
	if (!state->own_rows_taken)
	{
		state->own_rows = xact_buffer_scan_source(state->rel, state->store,
												  state->estate->es_snapshot->curcid,
												  &state->own_truncate);
		state->own_rows_taken = true;
	}
	if (state->own_rows == NULL && !state->own_truncate)
		return shared;
	snapshot = palloc(sizeof(RolloutSnapshot));
	*snapshot = *shared;
	if (state->own_truncate)
	{
		/*
		 * After its own TRUNCATE the transaction sees nothing committed: its
		 * rows alone are the snapshot, and the cut PG_INT64_MAX (which only
		 * their stamp passes) says so to anything that looks.
		 */
		snapshot->sources = state->own_rows ? list_make1(state->own_rows) : NIL;
		snapshot->fragment_count = snapshot->generation_count = 0;
		snapshot->wal_entry_count = snapshot->wal_object_count = 0;
		snapshot->truncate_stamp = PG_INT64_MAX;
	}
	else
		snapshot->sources = lappend(list_copy(shared->sources), state->own_rows);
	return snapshot;
}

/*
 * Begin the merge read of the node's key range: after BeginForeignScan or a
 * rescan, and in a parallel scan for each part of the key space this
 * participant claims (false when none is left).  The snapshot is taken at
 * the node's first read and kept, so that rescans read the same data; only
 * when garbage collection removed an object of it is a fresh one taken, up
 * to SCAN_MAX_SNAPSHOT_ATTEMPTS times (the last attempt reports a vanished
 * object as an error), and a transaction-wide snapshot fails the scan at
 * once.  A parallel scan's participants read the leader's snapshot, which
 * none of them may retake alone: there, a vanished object is an error.
 */
static bool
rollout_scan_open_read(ForeignScanState *node, RolloutScanState *state)
{
	KeyRange	range;
	RowFilter  *filter;
	MemoryContext oldcontext;

	if (state->parts_done)
		return false;

	/*
	 * Only a parallel-aware scan may run in a worker (scan_parallel.c); a
	 * plain one could get there inside a function wrongly marked PARALLEL
	 * SAFE, and would read its own snapshot without the transaction's rows.
	 */
	if (IsParallelWorker() && state->parallel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("rollout table \"%s\" cannot be scanned by a parallel worker outside a parallel scan",
						RelationGetRelationName(state->rel)),
				 errhint("Mark the function that reads it PARALLEL RESTRICTED.")));
	oldcontext = MemoryContextSwitchTo(state->rescan_context);
	objstore_get_counters(&state->counters_mark);
	footer_cache_get_counters(&state->footer_mark);
	read_cache_get_counters(&state->disk_cache_mark);
	rollout_build_key_range(node, state, &range);
	if (state->parallel != NULL && !scan_parallel_next_part(state, &range))
	{
		state->parts_done = true;
		MemoryContextSwitchTo(oldcontext);
		return false;
	}
	filter = scan_filter_build(state, node->ss.ps.ps_ExprContext);

	/*
	 * Rescans read the same snapshot.  If garbage collection removed an
	 * object of it before we opened that, the snapshot is stale: a statement
	 * takes a fresh one (DESIGN.md §5), a transaction-wide snapshot fails
	 * the scan (scan_snapshot.c).
	 */
	for (int attempt = 0;; attempt++)
	{
		bool		vanished = false;

		/*
		 * A named snapshot is never retaken, in a parallel scan neither: an
		 * object of it found gone means it expired, which is said so.
		 */
		bool		may_retake = state->as_of != NULL ||
		(state->parallel == NULL && attempt < SCAN_MAX_SNAPSHOT_ATTEMPTS - 1);
		MergeReadOptions options = {0};

		if (state->snapshot == NULL)
		{
			MemoryContextSwitchTo(state->scan_context);
			state->snapshot = rollout_scan_take_snapshot(state);
			MemoryContextSwitchTo(state->rescan_context);
		}
		options.keep_tombstones = false;
		options.follow_ingest = true;
		options.filter = filter;
		options.vanished = may_retake ? &vanished : NULL;
		state->read = merge_read_begin(state->store, state->snapshot,
									   state->want, &range, &options);
		if (state->read != NULL)
			break;
		/* the store deleted under the handle: no retry can find the objects */
		rollout_store_check_current(state->store, 0);
		if (state->as_of != NULL)	/* a named snapshot is never retaken */
			named_snapshot_raise_expired(state->store, state->as_of);
		rollout_scan_snapshot_vanished(state->store,
									   state->options->read_wal_tail,
									   state->estate);
		state->snapshot = NULL;
	}
	MemoryContextSwitchTo(oldcontext);
	return true;
}

/*
 * IterateForeignScan: return the next row, or an empty slot at the end.  A
 * parallel scan's participant moves on to its next part of the key space
 * when one ends, freeing what the finished one used.  Columns the query
 * does not use are returned as nulls, and text-encoded ones are decoded in
 * row_context, which is reset for every row.
 */
static TupleTableSlot *
rollout_iterate_foreign_scan(ForeignScanState *node)
{
	RolloutScanState *state = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	MemoryContext oldcontext;

	ExecClearTuple(slot);
	MemoryContextReset(state->row_context);
	for (;;)
	{
		if (state->read == NULL && !rollout_scan_open_read(node, state))
			return slot;
		if (merge_read_next(state->read, state->values, state->isnull))
			break;
		if (state->parallel == NULL)
			return slot;
		rollout_scan_close_read(state);
		MemoryContextReset(state->rescan_context);
	}

	oldcontext = MemoryContextSwitchTo(state->row_context);
	for (int i = 0; i < state->natts; i++)
	{
		int			column = state->attr_to_column[i];

		if (column < 0 || !state->want[column])
		{
			slot->tts_values[i] = (Datum) 0;
			slot->tts_isnull[i] = true;
		}
		else
		{
			slot->tts_values[i] = state->values[column];
			slot->tts_isnull[i] = state->isnull[column];
			if (!slot->tts_isnull[i] &&
				state->store->codecs[column].encoding == PORTABLE_TEXT)
				slot->tts_values[i] = portable_decode(&state->store->codecs[column],
													  slot->tts_values[i]);
		}
	}
	MemoryContextSwitchTo(oldcontext);
	ExecStoreVirtualTuple(slot);
	return slot;
}

/*
 * Fold the open read's statistics into the totals and end it (see
 * scan_internal.h).  Without an open read this does nothing, so that EXPLAIN
 * ANALYZE, which runs before EndForeignScan, and EndForeignScan may both call
 * it.
 */
void
rollout_scan_close_read(RolloutScanState *state)
{
	if (state->read == NULL)
		return;
	rollout_scan_accumulate_stats(state);
	merge_read_end(state->read);
	state->read = NULL;
}

/*
 * ReScanForeignScan: end the current read and free what it and its key range
 * used.  The next IterateForeignScan evaluates the key range again, since its
 * parameters may have changed, but reads the same snapshot and the same own
 * rows.  rescan_context is NULL only under plain EXPLAIN, where
 * BeginForeignScan stopped early.
 */
static void
rollout_rescan_foreign_scan(ForeignScanState *node)
{
	RolloutScanState *state = node->fdw_state;

	rollout_scan_close_read(state);
	if (state->rescan_context != NULL)
		MemoryContextReset(state->rescan_context);
	state->parts_done = false;
}

static void
rollout_end_foreign_scan(ForeignScanState *node)
{
	RolloutScanState *state = node->fdw_state;

	if (state != NULL)
		rollout_scan_close_read(state);
	if (state != NULL && state->is_worker)
		scan_parallel_report(state);
}

/*
 * Set the scan execution callbacks of the FdwRoutine (for
 * rollout_fdw_handler); ExplainForeignScan is in scan_explain.c.
 */
void
rollout_scan_routines(FdwRoutine *routine)
{
	routine->BeginForeignScan = rollout_begin_foreign_scan;
	routine->IterateForeignScan = rollout_iterate_foreign_scan;
	routine->ReScanForeignScan = rollout_rescan_foreign_scan;
	routine->EndForeignScan = rollout_end_foreign_scan;
	routine->ExplainForeignScan = rollout_explain_foreign_scan;
	rollout_parallel_routines(routine);
}
