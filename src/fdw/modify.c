/*-------------------------------------------------------------------------
 *
 * modify.c
 *		INSERT, batch insert and COPY FROM into a rollout table.
 *
 * Every path ends in xact_buffer_add_row(): rows are buffered per
 * transaction and become durable at commit (xact_buffer.c).  Inserting a
 * key that exists makes a newer version of that record, so INSERT has
 * upsert semantics by itself.  UPDATE and DELETE are not offered; the
 * executor reports them as unsupported for this foreign table.
 *
 * INSERT ... ON CONFLICT DO NOTHING promises to keep an existing row: with
 * upsert semantics it would silently replace it instead, so it is refused
 * (DO UPDATE is refused by PostgreSQL itself for foreign tables).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "executor/executor.h"
#include "nodes/execnodes.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/rel.h"

#include "rollout/fdw.h"
#include "rollout/xact_buffer.h"

/* Per result relation state. */
typedef struct RolloutModifyState
{
	RolloutStore *store;
	int			batch_size;
} RolloutModifyState;

static int
rollout_is_foreign_rel_updatable(Relation rel)
{
	return (1 << CMD_INSERT);
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
 * PlanForeignModify: there is nothing to plan, since rows go to the
 * transaction buffer as they are, so this only refuses INSERT ... ON CONFLICT,
 * at plan time and before any row is written.  The planner already holds a
 * lock on the result relation, hence NoLock.
 */
static List *
rollout_plan_foreign_modify(PlannerInfo *root, ModifyTable *plan,
							Index resultRelation, int subplan_index)
{
	Relation	rel = table_open(planner_rt_fetch(resultRelation, root)->relid,
								 NoLock);

	rollout_refuse_on_conflict(plan, rel);
	table_close(rel, NoLock);
	return NIL;
}

/*
 * Build the per-result-relation state that BeginForeignModify and
 * BeginForeignInsert share: the table's store, opened with the user mapping of
 * the role its range table entry names (the current user when the relation has
 * no entry of its own, as for a partition a routed INSERT or COPY reaches),
 * and the table's batch_size.
 */
static RolloutModifyState *
rollout_modify_state_create(EState *estate, ResultRelInfo *rinfo)
{
	Relation	rel = rinfo->ri_RelationDesc;
	RolloutModifyState *state = palloc0(sizeof(RolloutModifyState));

	/* opening the store checks the table against _store.json up front */
	state->store = rollout_store_for_relation_as(rel,
												 rollout_user_for_range_table_entry(estate,
																					rinfo->ri_RangeTableIndex));
	state->batch_size = rollout_table_options(RelationGetRelid(rel))->batch_size;
	return state;
}

static void
rollout_begin_foreign_modify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
							 List *fdw_private, int subplan_index, int eflags)
{
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	rinfo->ri_FdwState = rollout_modify_state_create(mtstate->ps.state, rinfo);
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
						estate->es_output_cid);
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
							estate->es_output_cid);
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
	rinfo->ri_FdwState = rollout_modify_state_create(mtstate->ps.state, rinfo);
}

static void
rollout_end_foreign_insert(EState *estate, ResultRelInfo *rinfo)
{
}

/*
 * Set the INSERT callbacks of the FdwRoutine (for rollout_fdw_handler).
 * UPDATE and DELETE are not offered (see the file header): their callbacks
 * stay NULL and IsForeignRelUpdatable reports INSERT only.
 */
void
rollout_modify_routines(FdwRoutine *routine)
{
	routine->IsForeignRelUpdatable = rollout_is_foreign_rel_updatable;
	routine->PlanForeignModify = rollout_plan_foreign_modify;
	routine->BeginForeignModify = rollout_begin_foreign_modify;
	routine->ExecForeignInsert = rollout_exec_foreign_insert;
	routine->ExecForeignBatchInsert = rollout_exec_foreign_batch_insert;
	routine->GetForeignModifyBatchSize = rollout_get_foreign_modify_batch_size;
	routine->EndForeignModify = rollout_end_foreign_modify;
	routine->BeginForeignInsert = rollout_begin_foreign_insert;
	routine->EndForeignInsert = rollout_end_foreign_insert;
}
