/*-------------------------------------------------------------------------
 *
 * modify.c
 *		INSERT, batch insert, COPY FROM, UPDATE, DELETE and TRUNCATE on a
 *		rollout table.
 *
 * Every path ends in xact_buffer_add_row(): rows are buffered per
 * transaction and become durable at commit (xact_buffer.c).  Inserting a
 * key that exists makes a newer version of that record, so INSERT has
 * upsert semantics by itself.
 *
 * The key is a row's identity: UPDATE and DELETE ask the scan below them for
 * it as a junk column (rollout_key_junk_name).  DELETE buffers a tombstone of
 * the key,
 * a version that hides every older one.  UPDATE buffers the new row as the
 * key's newest version; when the statement changes the key, a tombstone of
 * the old key comes first, in the same transaction and so in the same WAL
 * entry.  In a statement that swaps or shifts keys, a row may already have
 * moved to the old key whose tombstone comes next: the buffer writes no
 * tombstone of a key the same command wrote a version of (xact_buffer.c),
 * since the statement's scan never saw that version.  Keys are the same
 * when the store's order says so (numeric 2 and 2.0 are one key).  Every
 * row is buffered at once, so triggers
 * and later commands see the statement's rows as they would a heap's.  There
 * is no row lock: as with INSERT, the newest commit of a key wins.
 *
 * INSERT ... ON CONFLICT DO NOTHING promises to keep an existing row: with
 * upsert semantics it would silently replace it instead, so it is refused
 * (DO UPDATE is refused by PostgreSQL itself for foreign tables).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "mb/pg_wchar.h"
#include "nodes/execnodes.h"
#include "nodes/makefuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "rollout/fdw.h"
#include "rollout/key_set.h"
#include "rollout/store_definition.h"
#include "rollout/xact_buffer.h"

/* Per result relation state. */
typedef struct RolloutModifyState
{
	RolloutStore *store;
	int			batch_size;

	/* UPDATE and DELETE: where the plan's rows carry the old key */
	AttrNumber	key_attno;		/* the table's key attribute */
	AttrNumber	key_junk_attno; /* "rollout_key" in the subplan's rows */
	AttrNumber	wholerow_attno; /* "wholerow" (DELETE ... RETURNING) */
	TupleTableSlot *tombstone;	/* a tombstone row, in the table's shape */
	bool		rows_may_repeat;	/* a join, or other writes in the
									 * statement */
	KeySet	  **modified_keys;	/* then the old keys the statement wrote */
} RolloutModifyState;

static TupleTableSlot *rollout_exec_foreign_update(EState *estate,
												   ResultRelInfo *rinfo,
												   TupleTableSlot *slot,
												   TupleTableSlot *planSlot);

static int
rollout_is_foreign_rel_updatable(Relation rel)
{
	return (1 << CMD_INSERT) | (1 << CMD_UPDATE) | (1 << CMD_DELETE);
}

/* The table's key attribute, or an ERROR naming what is missing. */
static AttrNumber
rollout_key_attno(Relation rel)
{
	const char *key_column = rollout_table_options(RelationGetRelid(rel))->key_column;
	AttrNumber	attno = get_attnum(RelationGetRelid(rel), key_column);

	if (attno == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot update or delete rows of rollout table \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("The table has no column for the store's key \"%s\", which identifies its rows.",
						   key_column)));
	return attno;
}

/*
 * The name of the junk column that carries the old key.  It names the key's
 * attribute number and type, because the planner wants one name for one
 * expression across the partitions of an UPDATE or DELETE, and rollout
 * partitions may have their keys at other positions or of other types.
 */
static char *
rollout_key_junk_name(Relation rel, AttrNumber attno)
{
	Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), attno - 1);

	return psprintf("rollout_key_%d_%u_%d_%u", attno, attr->atttypid,
					attr->atttypmod, attr->attcollation);
}

/*
 * AddForeignUpdateTargets: the key identifies the row to update or delete.
 * DELETE ... RETURNING also needs the deleted row itself (UPDATE gets it
 * from PostgreSQL, which asks for the whole row of every foreign UPDATE).
 */
static void
rollout_add_foreign_update_targets(PlannerInfo *root, Index rtindex,
								   RangeTblEntry *target_rte,
								   Relation target_relation)
{
	AttrNumber	attno = rollout_key_attno(target_relation);
	Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(target_relation), attno - 1);

	add_row_identity_var(root,
						 makeVar(rtindex, attno, attr->atttypid, attr->atttypmod,
								 attr->attcollation, 0),
						 rtindex, rollout_key_junk_name(target_relation, attno));
	if (root->parse->commandType == CMD_DELETE && root->parse->returningList != NIL)
		add_row_identity_var(root,
							 makeVar(rtindex, InvalidAttrNumber, RECORDOID, -1,
									 InvalidOid, 0),
							 rtindex, "wholerow");
}

/* ERROR for INSERT ... ON CONFLICT, whose promise a rollout table breaks. */
static void
rollout_refuse_on_conflict(ModifyTable *plan, Relation rel)
{
	if (plan != NULL && plan->onConflictAction != ONCONFLICT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT with ON CONFLICT is not supported on rollout table \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("Inserting an existing key makes a newer version of that record, which replaces the older one; ON CONFLICT DO NOTHING would not keep the existing row."),
				 errhint("Insert without ON CONFLICT to replace existing rows, or leave out the rows whose keys exist (INSERT ... SELECT ... WHERE NOT EXISTS).")));
}

/*
 * PlanForeignModify: rows go to the transaction buffer as they are, so this
 * refuses INSERT ... ON CONFLICT, at plan time and before any row is
 * written, and tells the executor whether the plan joins the table to other
 * relations (UPDATE ... FROM, DELETE ... USING, a semi-join): only then can
 * one row of the table come back more than once (rollout_row_seen_before).
 * The planner already holds a lock on the result relation, hence NoLock.
 */
static List *
rollout_plan_foreign_modify(PlannerInfo *root, ModifyTable *plan,
							Index resultRelation, int subplan_index)
{
	Relation	rel = table_open(planner_rt_fetch(resultRelation, root)->relid,
								 NoLock);

	rollout_refuse_on_conflict(plan, rel);
	table_close(rel, NoLock);
	return list_make1(makeBoolean(bms_membership(root->all_baserels) == BMS_MULTIPLE));
}

/*
 * ERROR when rel is read as of a named snapshot (its option as_of, or
 * rollout_fdw.as_of naming a snapshot of its store): a write would change
 * the store as it is now, which the session does not read, and an UPDATE
 * or DELETE would pick its rows from the past.
 */
static void
rollout_refuse_write_as_of(Relation rel, RolloutStore *store)
{
	const char *as_of = rollout_table_as_of(rollout_table_options(RelationGetRelid(rel)),
											store);

	/* the store deleted under the handle: no reading of the setting holds */
	if (store->stale)
		rollout_store_check_current(store, 0);
	if (as_of != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot modify foreign table \"%s\" while it is read as of a named snapshot",
						RelationGetRelationName(rel)),
				 errhint("Reset rollout_fdw.as_of, or drop the table option as_of, to write.")));
}

/*
 * Refuse to write rows into a store created by a database of another
 * encoding.  Text is stored as the bytes of the writing database's encoding
 * and read back as they are: a database whose encoding is the store's
 * recorded one reads it unchecked where the store is trusted, so rows
 * written from, say, a SQL_ASCII database could give it text that is not
 * valid in its encoding.  (TRUNCATE writes no value and is allowed.)
 */
static void
rollout_refuse_write_other_encoding(Relation rel, RolloutStore *store)
{
	if (store->database_encoding != NULL &&
		strcmp(store->database_encoding, GetDatabaseEncodingName()) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot write to foreign table \"%s\" from a database with encoding %s",
						RelationGetRelationName(rel), GetDatabaseEncodingName()),
				 errdetail("Store \"%s\" was created by a database with encoding %s, and its text is in that encoding.",
						   store->name, store->database_encoding),
				 errhint("Write to it from a database with encoding %s.",
						 store->database_encoding)));
}

/*
 * Build the per-result-relation state that BeginForeignModify and
 * BeginForeignInsert share: the table's store, opened with the user mapping of
 * the role its range table entry names, and the table's batch_size.  A
 * partition that a routed INSERT or COPY reaches has no entry of its own: the
 * root table's names the role, as postgres_fdw chooses, so that an INSERT
 * through a view over a partitioned table writes with the view owner's
 * mapping, as it would into a rollout table the view names directly.
 */
static RolloutModifyState *
rollout_modify_state_create(EState *estate, ResultRelInfo *rinfo)
{
	Relation	rel = rinfo->ri_RelationDesc;
	RolloutModifyState *state = palloc0(sizeof(RolloutModifyState));
	Index		rtindex = rinfo->ri_RangeTableIndex;

	if (rtindex == 0 && rinfo->ri_RootResultRelInfo != NULL)
		rtindex = rinfo->ri_RootResultRelInfo->ri_RangeTableIndex;
	/* opening the store checks the table against _store.json up front */
	state->store = rollout_store_for_relation_as(rel,
												 rollout_user_for_range_table_entry(estate,
																					rtindex));
	rollout_refuse_write_as_of(rel, state->store);
	rollout_refuse_write_other_encoding(rel, state->store);
	state->batch_size = rollout_table_options(RelationGetRelid(rel))->batch_size;
	return state;
}

/*
 * The set of old keys the statement's UPDATEs and DELETEs of store wrote,
 * shared by every result relation of the store in the statement (the first
 * one begun makes it).  A writable CTE is a ModifyTable of its own, whose
 * scan, like the main one's, sees no row the statement wrote: with a set per
 * ModifyTable, WITH d AS (DELETE FROM t WHERE id = 2 RETURNING id) UPDATE t
 * ... WHERE id IN (SELECT id FROM d) wrote the row back after its tombstone,
 * and two key-changing UPDATEs of one row left a copy under each new key,
 * where a heap table finds the row already modified by this command.
 */
static KeySet **
rollout_statement_key_set(EState *estate, RolloutStore *store)
{
	ListCell   *lc;

	foreach(lc, estate->es_opened_result_relations)
	{
		ResultRelInfo *other = lfirst(lc);
		RolloutModifyState *other_state = other->ri_FdwState;

		if (other->ri_FdwRoutine == NULL ||
			other->ri_FdwRoutine->ExecForeignUpdate != rollout_exec_foreign_update ||
			other_state == NULL || other_state->modified_keys == NULL)
			continue;
		if (strcmp(other_state->store->name, store->name) == 0 &&
			strcmp(other_state->store->objstore->identity,
				   store->objstore->identity) == 0)
			return other_state->modified_keys;
	}
	return MemoryContextAllocZero(estate->es_query_cxt, sizeof(KeySet *));
}

/* Does plan, the top of a statement or of a CTE, UPDATE or DELETE a rollout table? */
static bool
rollout_plan_updates_or_deletes(Plan *plan, List *rtable)
{
	ModifyTable *modify = (ModifyTable *) plan;
	ListCell   *lc;

	if (plan == NULL || !IsA(plan, ModifyTable) ||
		(modify->operation != CMD_UPDATE && modify->operation != CMD_DELETE))
		return false;
	foreach(lc, modify->resultRelations)
	{
		Oid			relid = rt_fetch(lfirst_int(lc), rtable)->relid;

		if (get_rel_relkind(relid) == RELKIND_FOREIGN_TABLE &&
			GetFdwRoutineByRelId(relid)->ExecForeignUpdate == rollout_exec_foreign_update)
			return true;
	}
	return false;
}

/*
 * May two ModifyTables of the statement UPDATE or DELETE the same rollout
 * row?  Only writable CTEs make several, and a transaction writes one rollout
 * table, so it takes two of them that update or delete rollout tables: the
 * common WITH d AS (DELETE FROM t ... RETURNING *) INSERT INTO archive
 * SELECT * FROM d keeps no set of the keys it deletes.
 */
static bool
rollout_statement_modifies_twice(EState *estate)
{
	PlannedStmt *stmt = estate->es_plannedstmt;
	int			modifying = 0;
	ListCell   *lc;

	if (!stmt->hasModifyingCTE)
		return false;
	if (rollout_plan_updates_or_deletes(stmt->planTree, stmt->rtable))
		modifying++;
	foreach(lc, stmt->subplans)
	{
		if (rollout_plan_updates_or_deletes(lfirst(lc), stmt->rtable))
			modifying++;
	}
	return modifying >= 2;
}

static void
rollout_begin_foreign_modify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
							 List *fdw_private, int subplan_index, int eflags)
{
	RolloutModifyState *state;
	Relation	rel = rinfo->ri_RelationDesc;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	state = rollout_modify_state_create(mtstate->ps.state, rinfo);
	if (mtstate->operation == CMD_UPDATE || mtstate->operation == CMD_DELETE)
	{
		List	   *subplan_tlist = outerPlanState(mtstate)->plan->targetlist;
		AttrNumber	key_attno = rollout_key_attno(rel);
		char	   *junk_name = rollout_key_junk_name(rel, key_attno);

		state->key_attno = key_attno;
		state->key_junk_attno = ExecFindJunkAttributeInTlist(subplan_tlist, junk_name);
		if (!AttributeNumberIsValid(state->key_junk_attno))
			elog(ERROR, "could not find junk %s column", junk_name);
		state->wholerow_attno = ExecFindJunkAttributeInTlist(subplan_tlist, "wholerow");
		state->tombstone = ExecInitExtraTupleSlot(mtstate->ps.state,
												  RelationGetDescr(rel),
												  &TTSOpsVirtual);
		state->rows_may_repeat =
			(fdw_private != NIL && boolVal(linitial(fdw_private))) ||
			rollout_statement_modifies_twice(mtstate->ps.state);
		if (state->rows_may_repeat)
			state->modified_keys = rollout_statement_key_set(mtstate->ps.state,
															 state->store);
	}
	rinfo->ri_FdwState = state;
}

/* The old key of the row the plan's current row updates or deletes. */
static Datum
rollout_old_key(RolloutModifyState *state, TupleTableSlot *planSlot)
{
	bool		isnull;
	Datum		key = ExecGetJunkAttribute(planSlot, state->key_junk_attno, &isnull);

	/* a stored row always has its key */
	if (isnull)
		elog(ERROR, "rollout_key is NULL");
	return key;
}

/*
 * Whether this command updated or deleted the row of old_key already.  A
 * join can bring one row of the table back several times (UPDATE t ... FROM
 * m where two rows of m match it), and so can the ModifyTables of writable
 * CTEs of one statement: a heap table acts on it once, the later matches
 * finding it modified by this command, and so does a rollout table (the
 * executor counts a NULL from ExecForeignUpdate or ExecForeignDelete as no
 * row).  Writing it again would leave a copy under each new key of an
 * UPDATE, or an UPDATE's row after a DELETE's tombstone.  The scans see no
 * row this command wrote, so a key they bring twice is the same row twice.
 * Kept only for plans that join and statements with writable CTEs
 * (rows_may_repeat): a plain UPDATE or DELETE of millions of rows needs no
 * set of their keys.
 */
static bool
rollout_row_seen_before(EState *estate, RolloutModifyState *state,
						Datum old_key)
{
	RolloutStore *store = state->store;

	if (!state->rows_may_repeat)
		return false;
	if (*state->modified_keys == NULL)
		*state->modified_keys = key_set_create(&store->schema.columns[store->key_column],
											   estate->es_query_cxt);
	if (key_set_contains(*state->modified_keys, old_key))
		return true;
	key_set_add(*state->modified_keys, old_key);
	return false;
}

/* Buffer a tombstone of key: a row of nulls but for its key. */
static void
rollout_buffer_tombstone(EState *estate, ResultRelInfo *rinfo, Datum key)
{
	RolloutModifyState *state = rinfo->ri_FdwState;
	TupleTableSlot *tombstone = state->tombstone;
	int			natts = tombstone->tts_tupleDescriptor->natts;

	ExecClearTuple(tombstone);
	for (int i = 0; i < natts; i++)
	{
		tombstone->tts_values[i] = (Datum) 0;
		tombstone->tts_isnull[i] = true;
	}
	tombstone->tts_values[state->key_attno - 1] = key;
	tombstone->tts_isnull[state->key_attno - 1] = false;
	ExecStoreVirtualTuple(tombstone);
	xact_buffer_add_row(rinfo->ri_RelationDesc, state->store, tombstone,
						estate->es_output_cid, ROLLOUT_OP_DELETE);
}

/*
 * ExecForeignDelete: a tombstone of the row's key.  For RETURNING, slot gets
 * the deleted row, which the scan delivered as "wholerow".
 */
static TupleTableSlot *
rollout_exec_foreign_delete(EState *estate, ResultRelInfo *rinfo,
							TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	RolloutModifyState *state = rinfo->ri_FdwState;
	Datum		old_key = rollout_old_key(state, planSlot);

	if (rollout_row_seen_before(estate, state, old_key))
		return NULL;
	rollout_buffer_tombstone(estate, rinfo, old_key);
	if (AttributeNumberIsValid(state->wholerow_attno))
	{
		bool		isnull;
		Datum		row = ExecGetJunkAttribute(planSlot, state->wholerow_attno, &isnull);

		if (!isnull)
		{
			HeapTupleHeader header = DatumGetHeapTupleHeader(row);
			HeapTupleData tuple;

			tuple.t_len = HeapTupleHeaderGetDatumLength(header);
			ItemPointerSetInvalid(&tuple.t_self);
			tuple.t_tableOid = RelationGetRelid(rinfo->ri_RelationDesc);
			tuple.t_data = header;
			/* a copy the slot owns: tuple itself lives on this stack */
			ExecForceStoreHeapTuple(heap_copytuple(&tuple), slot, true);
		}
	}
	return slot;
}

/*
 * ExecForeignUpdate: slot holds the whole new row, which becomes the newest
 * version of its key.  A changed key first gets the old key's tombstone, so
 * that the row moves instead of being copied.
 */
static TupleTableSlot *
rollout_exec_foreign_update(EState *estate, ResultRelInfo *rinfo,
							TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	RolloutModifyState *state = rinfo->ri_FdwState;
	RolloutStore *store = state->store;
	Datum		old_key = rollout_old_key(state, planSlot);
	bool		new_key_null;
	Datum		new_key;

	if (rollout_row_seen_before(estate, state, old_key))
		return NULL;
	slot_getallattrs(slot);
	new_key = slot_getattr(slot, state->key_attno, &new_key_null);

	/* (a null new key is refused by the buffer) */
	if (!new_key_null &&
		segment_column_compare(&store->schema.columns[store->key_column],
							   old_key, new_key) != 0)
		rollout_buffer_tombstone(estate, rinfo, old_key);
	xact_buffer_add_row(rinfo->ri_RelationDesc, state->store, slot,
						estate->es_output_cid, ROLLOUT_OP_INSERT);
	return slot;
}

/*
 * ExecForeignInsert: add the row to the transaction's buffer, where it waits
 * for commit.  Nothing is computed on the store's side, so the slot is
 * returned as it came and RETURNING sees the values inserted.
 */
static TupleTableSlot *
rollout_exec_foreign_insert(EState *estate, ResultRelInfo *rinfo,
							TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	RolloutModifyState *state = rinfo->ri_FdwState;

	xact_buffer_add_row(rinfo->ri_RelationDesc, state->store, slot,
						estate->es_output_cid, ROLLOUT_OP_INSERT);
	return slot;
}

/*
 * ExecForeignBatchInsert: buffer each of the *numSlots rows in turn, as
 * ExecForeignInsert does.  Every row is accepted, so *numSlots is left as it
 * is.
 */
static TupleTableSlot **
rollout_exec_foreign_batch_insert(EState *estate, ResultRelInfo *rinfo,
								  TupleTableSlot **slots,
								  TupleTableSlot **planSlots, int *numSlots)
{
	RolloutModifyState *state = rinfo->ri_FdwState;

	for (int i = 0; i < *numSlots; i++)
		xact_buffer_add_row(rinfo->ri_RelationDesc, state->store, slots[i],
							estate->es_output_cid, ROLLOUT_OP_INSERT);
	return slots;
}

/*
 * Batching saves executor round trips; the executor only batches when no
 * RETURNING clause or row trigger needs each row back at once.
 */
static int
rollout_get_foreign_modify_batch_size(ResultRelInfo *rinfo)
{
	RolloutModifyState *state = rinfo->ri_FdwState;

	if (rinfo->ri_projectReturning != NULL ||
		(rinfo->ri_TrigDesc &&
		 (rinfo->ri_TrigDesc->trig_insert_before_row ||
		  rinfo->ri_TrigDesc->trig_insert_after_row)))
		return 1;
	if (state == NULL)
		return rollout_table_options(RelationGetRelid(rinfo->ri_RelationDesc))->batch_size;
	return state->batch_size;
}

static void
rollout_end_foreign_modify(EState *estate, ResultRelInfo *rinfo)
{
	/* nothing: the rows wait in the transaction buffer until commit */
}

/* COPY FROM and partition routing (where mtstate is the routing INSERT). */
static void
rollout_begin_foreign_insert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	/* COPY passes a ModifyTableState without a plan */
	rollout_refuse_on_conflict((ModifyTable *) mtstate->ps.plan,
							   rinfo->ri_RelationDesc);

	/*
	 * An UPDATE of a partitioned table that moves rows into a rollout
	 * partition which it also updates routes them through that partition's
	 * own result relation: keep the state BeginForeignModify made (inserting
	 * needs only its store).
	 */
	if (rinfo->ri_FdwState == NULL)
		rinfo->ri_FdwState = rollout_modify_state_create(mtstate->ps.state, rinfo);
}

static void
rollout_end_foreign_insert(EState *estate, ResultRelInfo *rinfo)
{
}

/*
 * TRUNCATE: buffered like a row (xact_buffer_add_truncate), so that it
 * commits, or rolls back with a savepoint, with the transaction.  At commit
 * its WAL entry carries the truncate cut, which hides every version of the
 * store committed before it on every shard; the store's objects are left to
 * compaction and garbage collection, so it is as cheap as any one-row
 * commit.  PostgreSQL has checked the TRUNCATE privilege and the
 * transaction's writability already.  Several rollout tables in one TRUNCATE
 * are refused like any second rollout table written in a transaction.
 */
static void
rollout_exec_foreign_truncate(List *rels, DropBehavior behavior, bool restart_seqs)
{
	ListCell   *lc;

	foreach(lc, rels)
	{
		Relation	rel = lfirst(lc);
		RolloutStore *store = rollout_store_for_relation(rel);

		rollout_refuse_write_as_of(rel, store);
		xact_buffer_add_truncate(rel, store, GetCurrentCommandId(true));
	}
}

/* Set the modification callbacks of the FdwRoutine (for rollout_fdw_handler). */
void
rollout_modify_routines(FdwRoutine *routine)
{
	routine->IsForeignRelUpdatable = rollout_is_foreign_rel_updatable;
	routine->PlanForeignModify = rollout_plan_foreign_modify;
	routine->BeginForeignModify = rollout_begin_foreign_modify;
	routine->ExecForeignInsert = rollout_exec_foreign_insert;
	routine->ExecForeignBatchInsert = rollout_exec_foreign_batch_insert;
	routine->AddForeignUpdateTargets = rollout_add_foreign_update_targets;
	routine->ExecForeignUpdate = rollout_exec_foreign_update;
	routine->ExecForeignDelete = rollout_exec_foreign_delete;
	routine->GetForeignModifyBatchSize = rollout_get_foreign_modify_batch_size;
	routine->EndForeignModify = rollout_end_foreign_modify;
	routine->BeginForeignInsert = rollout_begin_foreign_insert;
	routine->EndForeignInsert = rollout_end_foreign_insert;
	routine->ExecForeignTruncate = rollout_exec_foreign_truncate;
}
