/*-------------------------------------------------------------------------
 *
 * scan_plan.c
 *		Planning a scan of a rollout table: the columns it reads, the key
 *		conditions it may skip data with, its estimates.
 *
 * A scan runs the deduplicating merge read over a snapshot of the store
 * (scan.c).  What the planner can push down:
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
 *	  rechecked by the executor, so skipping never decides what matches;
 *	- other simple conditions, on any column (scan_filter.c): the merge read
 *	  checks them on each key's winning version before decoding the rest of
 *	  its row.  They too stay in the executor's qual.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/table.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_coerce.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "scan_internal.h"

/* Index of items in a ForeignScan's fdw_private list. */
enum RolloutScanPrivate
{
	ScanPrivateRetrievedAttrs,	/* Integer list of attnos the query uses */
	ScanPrivateKeyQuals,		/* list of KeyQual descriptions, see below */
	ScanPrivatePushedConditions /* list of serialized PushedConditions */
};

/* Planner state of one rollout relation. */
typedef struct RolloutPlanState
{
	RolloutTableOptions *options;
	AttrNumber	key_attno;
	List	   *key_quals;		/* KeyQual * */
	List	   *pushed_conditions;	/* PushedCondition *, none a key qual */
} RolloutPlanState;

/*
 * Is node baserel's key column itself (not a Var of an outer query level),
 * possibly under binary-compatible relabelings, as when a varchar key is
 * compared with a text operator?
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

/*
 * GetForeignRelSize: find the key conditions among the restriction clauses and
 * estimate the rows.  The plan state (options, key column, key conditions) is
 * kept in baserel->fdw_private for GetForeignPaths and GetForeignPlan.  A key
 * column that is missing or whose type has no default btree family just gives
 * no key conditions.
 */
static void
rollout_get_foreign_rel_size(PlannerInfo *root, RelOptInfo *baserel,
							 Oid foreigntableid)
{
	RolloutPlanState *state = palloc0(sizeof(RolloutPlanState));
	Oid			key_type = InvalidOid;
	Oid			key_opfamily;
	ListCell   *lc;
	bool		has_equality = false;

	state->options = rollout_table_options(foreigntableid);
	state->key_attno = get_attnum(foreigntableid, state->options->key_column);
	baserel->fdw_private = state;

	key_opfamily = InvalidOid;
	if (state->key_attno != InvalidAttrNumber)
	{
		key_type = get_atttype(foreigntableid, state->key_attno);
		key_opfamily = lookup_type_cache(key_type, TYPECACHE_BTREE_OPFAMILY)->btree_opf;
	}
	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *rinfo = lfirst(lc);
		KeyQual    *qual = NULL;
		PushedCondition *condition;

		if (OidIsValid(key_opfamily))
			qual = classify_key_qual(rinfo->clause, baserel, state->key_attno,
									 key_type, key_opfamily);
		if (qual != NULL)
		{
			state->key_quals = lappend(state->key_quals, qual);
			if (qual->strategy == BTEqualStrategyNumber)
				has_equality = true;
			continue;
		}
		condition = scan_filter_classify(rinfo, baserel, foreigntableid);
		if (condition != NULL)
			state->pushed_conditions = lappend(state->pushed_conditions,
											   condition);
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

/*
 * GetForeignPaths: offer the one access path, a merge read of the store.  Its
 * cost charges every stored row several times over, a tenth of that when key
 * conditions let the read skip objects and row groups, plus the rows returned.
 * Like postgres_fdw's, the path is parameterized only by the relation's
 * lateral references.
 */
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

/*
 * GetForeignPlan: make the ForeignScan.  fdw_private holds the attribute
 * numbers the query uses (those of its target list and of every condition, or
 * all columns for a whole-row reference), the key conditions and the pushed
 * conditions flattened to integer lists, since it must survive copyObject;
 * their value expressions go into fdw_exprs (the key conditions' first), so
 * that setrefs.c fixes them up and the executor can evaluate them.  Every
 * clause stays a local qual: the key range and the pushed conditions only
 * spare reading and decoding, they never decide what matches.
 */
static ForeignScan *
rollout_get_foreign_plan(PlannerInfo *root, RelOptInfo *baserel,
						 Oid foreigntableid, ForeignPath *best_path,
						 List *tlist, List *scan_clauses, Plan *outer_plan)
{
	RolloutPlanState *state = baserel->fdw_private;
	Bitmapset  *attrs = NULL;
	List	   *retrieved_attrs = NIL;
	List	   *key_qual_info = NIL;
	List	   *pushed_info = NIL;
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
	/* after the key conditions' values, which must come first */
	foreach(lc, state->pushed_conditions)
		pushed_info = lappend(pushed_info,
							  scan_filter_serialize(lfirst(lc), &fdw_exprs));

	/* every condition stays a local filter: skipping only saves reading */
	scan_clauses = extract_actual_clauses(scan_clauses, false);

	return make_foreignscan(tlist, scan_clauses, baserel->relid, fdw_exprs,
							list_make3(retrieved_attrs, key_qual_info, pushed_info),
							NIL, NIL, outer_plan);
}

List *
scan_plan_retrieved_attrs(ForeignScan *plan)
{
	return list_nth(plan->fdw_private, ScanPrivateRetrievedAttrs);
}

/*
 * Rebuild the plan's key conditions from the integer lists in fdw_private (see
 * rollout_get_foreign_plan).  Their value stays NULL: the values are the
 * plan's fdw_exprs, in the same order.
 */
List *
scan_plan_key_quals(ForeignScan *plan)
{
	List	   *quals = NIL;
	ListCell   *lc;

	foreach(lc, (List *) list_nth(plan->fdw_private, ScanPrivateKeyQuals))
	{
		List	   *info = lfirst(lc);
		KeyQual    *qual = palloc0(sizeof(KeyQual));

		qual->strategy = intVal(linitial(info));
		qual->opfamily = intVal(lsecond(info));
		qual->lefttype = intVal(lthird(info));
		qual->righttype = intVal(lfourth(info));
		quals = lappend(quals, qual);
	}
	return quals;
}

List *
scan_plan_pushed_conditions(ForeignScan *plan)
{
	return list_nth(plan->fdw_private, ScanPrivatePushedConditions);
}

void
rollout_plan_routines(FdwRoutine *routine)
{
	routine->GetForeignRelSize = rollout_get_foreign_rel_size;
	routine->GetForeignPaths = rollout_get_foreign_paths;
	routine->GetForeignPlan = rollout_get_foreign_plan;
}
