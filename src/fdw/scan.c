/*-------------------------------------------------------------------------
 *
 * scan.c
 *		Planning, executing and explaining a scan of a rollout table.
 *
 * A scan takes a snapshot of the store and runs the deduplicating merge
 * read over it (src/read/).  What the planner can push down:
 *
 *	- projection: only the columns the query uses are decoded (plus the key
 *	  and the hidden version columns the merge needs);
 *	- key conditions: "key op value" where op belongs to the key type's
 *	  default btree family and value does not depend on the scanned row.
 *	  They become a key range that skips objects and row groups.  Because the
 *	  store is sorted in a collation-independent order (byte order for
 *	  text), a range condition is used only when its collation is "C" (or
 *	  the type has none), and an equality only under a deterministic
 *	  collation, where equal means byte-equal.  Every condition is still
 *	  rechecked by the executor, so skipping never decides what matches.
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
#include "access/table.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_coerce.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_locale.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "rollout/fault.h"
#include "rollout/fdw.h"
#include "rollout/merge_read.h"
#include "rollout/scan_snapshot.h"
#include "rollout/snapshot.h"
#include "rollout/xact_buffer.h"

/* Fresh snapshots a scan takes when objects vanish under it. */
#define SCAN_MAX_SNAPSHOT_ATTEMPTS	5

/* Index of items in a ForeignScan's fdw_private list. */
enum RolloutScanPrivate
{
	ScanPrivateRetrievedAttrs,	/* Integer list of attnos the query uses */
	ScanPrivateKeyQuals			/* list of KeyQual descriptions, see below */
};

/*
 * A key condition as the plan carries it: (strategy, opfamily, lefttype,
 * righttype) as four Integers; its value expression is the same-numbered
 * member of fdw_exprs.
 */
typedef struct KeyQual
{
	int			strategy;		/* BTLessStrategyNumber ... */
	Oid			opfamily;
	Oid			lefttype;
	Oid			righttype;
	Expr	   *value;
} KeyQual;

/* Planner state of one rollout relation. */
typedef struct RolloutPlanState
{
	RolloutTableOptions *options;
	AttrNumber	key_attno;
	List	   *key_quals;		/* KeyQual * */
} RolloutPlanState;

/* Executor state of one scan. */
typedef struct RolloutScanState
{
	Relation	rel;
	RolloutStore *store;
	RolloutTableOptions *options;
	int			natts;
	int		   *attr_to_column; /* per attno-1: segment column, or -1 */
	bool	   *want;			/* per segment column */
	List	   *key_quals;		/* KeyQual * (value unused) */
	List	   *key_value_states;	/* ExprState * */
	MemoryContext scan_context;	/* lives across rescans */
	MemoryContext rescan_context;	/* key range and read: reset per rescan */
	MemoryContext row_context;	/* decoded values of the current row */
	EState	   *estate;
	RolloutSnapshot *snapshot;	/* what the read reads: the statement's or
								 * transaction's snapshot, plus own rows */
	bool		own_rows_taken; /* own_rows was looked for */
	SnapshotSource *own_rows;	/* the transaction's own rows, or NULL */
	MergeRead  *read;
	Datum	   *values;
	bool	   *isnull;
	MergeReadStats totals;		/* summed over rescans */

	/*
	 * Requests to a remote store while this node read (snapshot and merge),
	 * and the sequential rounds they took; counted from counters_mark.
	 */
	ObjectStoreCounters counters_mark;
	int64		remote_requests;
	int64		remote_rounds;
} RolloutScanState;

/* ----------------------------------------------------------------
 * Planning
 * ----------------------------------------------------------------
 */

static bool
is_key_var(Node *node, RelOptInfo *baserel, AttrNumber key_attno)
{
	while (node && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return node && IsA(node, Var) &&
		(Index) ((Var *) node)->varno == baserel->relid &&
		((Var *) node)->varattno == key_attno &&
		((Var *) node)->varlevelsup == 0;
}

/*
 * Recognise "key op value" (or "value op key") as a key condition the scan
 * may use to skip data, under the collation rules in the file header.
 */
static KeyQual *
classify_key_qual(Expr *clause, RelOptInfo *baserel, AttrNumber key_attno,
				  Oid key_type, Oid key_opfamily)
{
	OpExpr	   *op;
	Node	   *left;
	Node	   *right;
	Node	   *value;
	bool		commuted;
	int			strategy;
	Oid			lefttype;
	Oid			righttype;
	KeyQual    *qual;

	if (!IsA(clause, OpExpr))
		return NULL;
	op = (OpExpr *) clause;
	if (list_length(op->args) != 2)
		return NULL;
	left = linitial(op->args);
	right = lsecond(op->args);
	if (is_key_var(left, baserel, key_attno))
	{
		value = right;
		commuted = false;
	}
	else if (is_key_var(right, baserel, key_attno))
	{
		value = left;
		commuted = true;
	}
	else
		return NULL;

	/* the value must be fixed for the whole scan */
	if (contain_var_clause(value) || contain_volatile_functions(value))
		return NULL;
	if (!op_in_opfamily(op->opno, key_opfamily))
		return NULL;
	get_op_opfamily_properties(op->opno, key_opfamily, false,
							   &strategy, &lefttype, &righttype);
	if (commuted)
	{
		Oid			tmp = lefttype;

		lefttype = righttype;
		righttype = tmp;
		strategy = BTCommuteStrategyNumber(strategy);
	}
	if (lefttype != key_type && !IsBinaryCoercible(key_type, lefttype))
		return NULL;
	if (!OidIsValid(get_opfamily_proc(key_opfamily, lefttype, righttype,
									  BTORDER_PROC)))
		return NULL;

	if (type_is_collatable(key_type))
	{
		Oid			collation = op->inputcollid;

		if (!OidIsValid(collation))
			return NULL;
		if (strategy == BTEqualStrategyNumber)
		{
			if (!get_collation_isdeterministic(collation))
				return NULL;
		}
		else if (!lc_collate_is_c(collation))
			return NULL;
	}

	qual = palloc0(sizeof(KeyQual));
	qual->strategy = strategy;
	qual->opfamily = key_opfamily;
	qual->lefttype = lefttype;
	qual->righttype = righttype;
	qual->value = (Expr *) value;
	return qual;
}

static void
rollout_get_foreign_rel_size(PlannerInfo *root, RelOptInfo *baserel,
							 Oid foreigntableid)
{
	RolloutPlanState *state = palloc0(sizeof(RolloutPlanState));
	Oid			key_type;
	Oid			key_opfamily;
	ListCell   *lc;
	bool		has_equality = false;

	state->options = rollout_table_options(foreigntableid);
	state->key_attno = get_attnum(foreigntableid, state->options->key_column);
	baserel->fdw_private = state;

	if (state->key_attno != InvalidAttrNumber)
	{
		key_type = get_atttype(foreigntableid, state->key_attno);
		key_opfamily = lookup_type_cache(key_type, TYPECACHE_BTREE_OPFAMILY)->btree_opf;
		if (OidIsValid(key_opfamily))
		{
			foreach(lc, baserel->baserestrictinfo)
			{
				RestrictInfo *rinfo = lfirst(lc);
				KeyQual    *qual = classify_key_qual(rinfo->clause, baserel,
													 state->key_attno, key_type,
													 key_opfamily);

				if (qual == NULL)
					continue;
				state->key_quals = lappend(state->key_quals, qual);
				if (qual->strategy == BTEqualStrategyNumber)
					has_equality = true;
			}
		}
	}

	/*
	 * Without statistics the planner gets a modest default; a key equality
	 * returns at most one row, since the scan deduplicates by key.
	 */
	baserel->tuples = 1000;
	baserel->rows = has_equality ? 1 :
		clamp_row_est(baserel->tuples *
					  clauselist_selectivity(root, baserel->baserestrictinfo,
											 0, JOIN_INNER, NULL));
}

static void
rollout_get_foreign_paths(PlannerInfo *root, RelOptInfo *baserel,
						  Oid foreigntableid)
{
	RolloutPlanState *state = baserel->fdw_private;
	Cost		startup_cost = 10;
	Cost		run_cost;

	/* objects are read whole per row group: key ranges make it much cheaper */
	run_cost = baserel->tuples * cpu_tuple_cost * 4;
	if (state->key_quals != NIL)
		run_cost /= 10;
	run_cost += baserel->rows * cpu_tuple_cost;

	add_path(baserel, (Path *)
			 create_foreignscan_path(root, baserel, NULL, baserel->rows,
									 startup_cost, startup_cost + run_cost,
									 NIL, baserel->lateral_relids, NULL, NIL));
}

static ForeignScan *
rollout_get_foreign_plan(PlannerInfo *root, RelOptInfo *baserel,
						 Oid foreigntableid, ForeignPath *best_path,
						 List *tlist, List *scan_clauses, Plan *outer_plan)
{
	RolloutPlanState *state = baserel->fdw_private;
	Bitmapset  *attrs = NULL;
	List	   *retrieved_attrs = NIL;
	List	   *key_qual_info = NIL;
	List	   *fdw_exprs = NIL;
	ListCell   *lc;
	bool		whole_row;

	/* the columns the query needs: its target list and all conditions */
	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid, &attrs);
	foreach(lc, baserel->baserestrictinfo)
		pull_varattnos((Node *) ((RestrictInfo *) lfirst(lc))->clause,
					   baserel->relid, &attrs);
	whole_row = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs);
	{
		Relation	rel = table_open(foreigntableid, NoLock);
		TupleDesc	tupdesc = RelationGetDescr(rel);

		for (int i = 1; i <= tupdesc->natts; i++)
		{
			if (TupleDescAttr(tupdesc, i - 1)->attisdropped)
				continue;
			if (whole_row ||
				bms_is_member(i - FirstLowInvalidHeapAttributeNumber, attrs))
				retrieved_attrs = lappend_int(retrieved_attrs, i);
		}
		table_close(rel, NoLock);
	}

	foreach(lc, state->key_quals)
	{
		KeyQual    *qual = lfirst(lc);

		key_qual_info = lappend(key_qual_info,
								list_make4(makeInteger(qual->strategy),
										   makeInteger(qual->opfamily),
										   makeInteger(qual->lefttype),
										   makeInteger(qual->righttype)));
		fdw_exprs = lappend(fdw_exprs, qual->value);
	}

	/* every condition stays a local filter: skipping only saves reading */
	scan_clauses = extract_actual_clauses(scan_clauses, false);

	return make_foreignscan(tlist, scan_clauses, baserel->relid, fdw_exprs,
							list_make2(retrieved_attrs, key_qual_info),
							NIL, NIL, outer_plan);
}

/* ----------------------------------------------------------------
 * Execution
 * ----------------------------------------------------------------
 */

static void
rollout_begin_foreign_scan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	RolloutScanState *state = palloc0(sizeof(RolloutScanState));
	List	   *retrieved_attrs = list_nth(plan->fdw_private, ScanPrivateRetrievedAttrs);
	List	   *key_qual_info = list_nth(plan->fdw_private, ScanPrivateKeyQuals);
	TupleDesc	tupdesc;
	ListCell   *lc;

	node->fdw_state = state;
	state->rel = node->ss.ss_currentRelation;
	state->options = rollout_table_options(RelationGetRelid(state->rel));
	foreach(lc, key_qual_info)
	{
		List	   *info = lfirst(lc);
		KeyQual    *qual = palloc0(sizeof(KeyQual));

		qual->strategy = intVal(linitial(info));
		qual->opfamily = intVal(lsecond(info));
		qual->lefttype = intVal(lthird(info));
		qual->righttype = intVal(lfourth(info));
		state->key_quals = lappend(state->key_quals, qual);
	}

	/* plain EXPLAIN touches no storage */
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	state->store = rollout_store_for_relation_as(state->rel,
												 rollout_user_for_range_table_entry(node->ss.ps.state,
																					plan->scan.scanrelid));
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
	state->key_value_states = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
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
	forboth(lc_qual, state->key_quals, lc_value, state->key_value_states)
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

static void
rollout_scan_accumulate_stats(RolloutScanState *state)
{
	const MergeReadStats *stats = merge_read_stats(state->read);
	ObjectStoreCounters now;

	objstore_get_counters(&now);
	state->remote_requests += now.requests - state->counters_mark.requests;
	state->remote_rounds += now.rounds - state->counters_mark.rounds;
	state->counters_mark = now;

	state->totals.fragments_read += stats->fragments_read;
	state->totals.fragments_skipped += stats->fragments_skipped;
	state->totals.generations_read += stats->generations_read;
	state->totals.generations_skipped += stats->generations_skipped;
	state->totals.wal_entries_read += stats->wal_entries_read;
	state->totals.wal_entries_skipped += stats->wal_entries_skipped;
	state->totals.row_groups_read += stats->row_groups_read;
	state->totals.row_groups_skipped += stats->row_groups_skipped;
	state->totals.versions_read += stats->versions_read;
	state->totals.transaction_rows_read += stats->transaction_rows_read;
	state->totals.rows_returned += stats->rows_returned;
	state->totals.prefetch_batches += stats->prefetch_batches;
}

/*
 * The snapshot the scan reads, in scan_context: its statement's or
 * transaction's store snapshot, with the transaction's own rows as the
 * newest source when it inserted into the table before this command.
 */
static RolloutSnapshot *
rollout_scan_take_snapshot(RolloutScanState *state)
{
	RolloutSnapshot *shared = rollout_scan_snapshot(state->store,
													state->options->read_wal_tail,
													state->estate);
	RolloutSnapshot *snapshot;

	rollout_fault_point("scan.after_snapshot");
	if (!state->own_rows_taken)
	{
		state->own_rows = xact_buffer_scan_source(state->rel, state->store,
												  state->estate->es_snapshot->curcid);
		state->own_rows_taken = true;
	}
	if (state->own_rows == NULL)
		return shared;
	snapshot = palloc(sizeof(RolloutSnapshot));
	*snapshot = *shared;
	snapshot->sources = lappend(list_copy(shared->sources), state->own_rows);
	return snapshot;
}

static TupleTableSlot *
rollout_iterate_foreign_scan(ForeignScanState *node)
{
	RolloutScanState *state = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	MemoryContext oldcontext;

	if (state->read == NULL)
	{
		KeyRange	range;

		oldcontext = MemoryContextSwitchTo(state->rescan_context);
		objstore_get_counters(&state->counters_mark);
		rollout_build_key_range(node, state, &range);

		/*
		 * Rescans read the same snapshot.  If garbage collection removed an
		 * object of it before we opened that, the snapshot is stale: a
		 * statement takes a fresh one (DESIGN.md §5), a transaction-wide
		 * snapshot fails the scan (scan_snapshot.c).
		 */
		for (int attempt = 0;; attempt++)
		{
			bool		vanished = false;
			MergeReadOptions options = {0};

			if (state->snapshot == NULL)
			{
				MemoryContextSwitchTo(state->scan_context);
				state->snapshot = rollout_scan_take_snapshot(state);
				MemoryContextSwitchTo(state->rescan_context);
			}
			options.keep_tombstones = false;
			options.follow_ingest = true;
			options.vanished = attempt < SCAN_MAX_SNAPSHOT_ATTEMPTS - 1 ? &vanished : NULL;
			state->read = merge_read_begin(state->store, state->snapshot,
										   state->want, &range, &options);
			if (state->read != NULL)
				break;
			rollout_scan_snapshot_vanished(state->store,
										   state->options->read_wal_tail,
										   state->estate);
			state->snapshot = NULL;
		}
		MemoryContextSwitchTo(oldcontext);
	}

	ExecClearTuple(slot);
	MemoryContextReset(state->row_context);
	if (!merge_read_next(state->read, state->values, state->isnull))
		return slot;

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

static void
rollout_rescan_foreign_scan(ForeignScanState *node)
{
	RolloutScanState *state = node->fdw_state;

	if (state->read != NULL)
	{
		rollout_scan_accumulate_stats(state);
		merge_read_end(state->read);
		state->read = NULL;
	}
	if (state->rescan_context != NULL)
		MemoryContextReset(state->rescan_context);
}

static void
rollout_end_foreign_scan(ForeignScanState *node)
{
	RolloutScanState *state = node->fdw_state;

	if (state == NULL || state->read == NULL)
		return;
	rollout_scan_accumulate_stats(state);
	merge_read_end(state->read);
	state->read = NULL;
}

static void
rollout_explain_foreign_scan(ForeignScanState *node, ExplainState *es)
{
	RolloutScanState *state = node->fdw_state;

	ExplainPropertyText("Rollout Store", state->options->store_name, es);
	if (es->verbose)
		ExplainPropertyText("Location",
							state->options->location ? state->options->location
							: "(embedded default)", es);
	if (state->key_quals != NIL)
		ExplainPropertyInteger("Key Conditions", NULL,
							   list_length(state->key_quals), es);

	if (es->analyze && state->snapshot != NULL)
	{
		MergeReadStats *t;

		/* EXPLAIN runs before EndForeignScan: fold in the open read */
		if (state->read != NULL)
		{
			rollout_scan_accumulate_stats(state);
			merge_read_end(state->read);
			state->read = NULL;
		}
		t = &state->totals;

		if (es->format == EXPLAIN_FORMAT_TEXT)
		{
			ExplainPropertyText("Fragments",
								psprintf("read=%d skipped=%d",
										 t->fragments_read, t->fragments_skipped), es);
			ExplainPropertyText("Generations",
								psprintf("read=%d skipped=%d",
										 t->generations_read, t->generations_skipped), es);
			ExplainPropertyText("WAL Entries",
								psprintf("read=%d skipped=%d",
										 t->wal_entries_read, t->wal_entries_skipped), es);
			ExplainPropertyText("Row Groups",
								psprintf("read=%lld skipped=%lld",
										 (long long) t->row_groups_read,
										 (long long) t->row_groups_skipped), es);
		}
		else
		{
			ExplainPropertyInteger("Fragments Read", NULL, t->fragments_read, es);
			ExplainPropertyInteger("Fragments Skipped", NULL, t->fragments_skipped, es);
			ExplainPropertyInteger("Generations Read", NULL, t->generations_read, es);
			ExplainPropertyInteger("Generations Skipped", NULL, t->generations_skipped, es);
			ExplainPropertyInteger("WAL Entries Read", NULL, t->wal_entries_read, es);
			ExplainPropertyInteger("WAL Entries Skipped", NULL, t->wal_entries_skipped, es);
			ExplainPropertyInteger("Row Groups Read", NULL, t->row_groups_read, es);
			ExplainPropertyInteger("Row Groups Skipped", NULL, t->row_groups_skipped, es);
		}
		ExplainPropertyInteger("Versions Read", NULL, t->versions_read, es);
		if (t->transaction_rows_read > 0)
			ExplainPropertyInteger("Transaction Rows Read", NULL,
								   t->transaction_rows_read, es);

		/*
		 * How the reads went to the store: these vary with the location and
		 * with rollout_fdw.max_concurrent_requests, so only VERBOSE shows them.
		 */
		if (es->verbose)
		{
			ExplainPropertyInteger("Prefetch Batches", NULL, t->prefetch_batches, es);
			if (es->format == EXPLAIN_FORMAT_TEXT)
				ExplainPropertyText("Remote Requests",
									psprintf("%lld in %lld rounds",
											 (long long) state->remote_requests,
											 (long long) state->remote_rounds), es);
			else
			{
				ExplainPropertyInteger("Remote Requests", NULL,
									   state->remote_requests, es);
				ExplainPropertyInteger("Remote Request Rounds", NULL,
									   state->remote_rounds, es);
			}
		}
	}
}

void
rollout_scan_routines(FdwRoutine *routine)
{
	routine->GetForeignRelSize = rollout_get_foreign_rel_size;
	routine->GetForeignPaths = rollout_get_foreign_paths;
	routine->GetForeignPlan = rollout_get_foreign_plan;
	routine->BeginForeignScan = rollout_begin_foreign_scan;
	routine->IterateForeignScan = rollout_iterate_foreign_scan;
	routine->ReScanForeignScan = rollout_rescan_foreign_scan;
	routine->EndForeignScan = rollout_end_foreign_scan;
	routine->ExplainForeignScan = rollout_explain_foreign_scan;
}
