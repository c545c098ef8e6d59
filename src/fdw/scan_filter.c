/*-------------------------------------------------------------------------
 *
 * scan_filter.c
 *		Pushing a query's simple conditions on any column down into the
 *		merge read (read/row_filter.h): which clauses qualify at planning,
 *		how they travel in the plan, and their values at execution.
 *
 * A clause qualifies when the read can evaluate it exactly as the executor
 * would, on the stored value, before the rest of the row is decoded:
 *
 *	- "column op value" or "value op column", "column op ANY/ALL (array)",
 *	  "column IS [NOT] NULL", where column is a column of the scanned table
 *	  (perhaps under a binary-compatible relabeling) stored as its own type
 *	  (not one of the text-encoded types of portable_values.h), op's function
 *	  is strict and not volatile (the executor evaluates the clause again),
 *	  and value depends on no column of the row and calls nothing volatile (a
 *	  constant, a parameter, an expression of them);
 *	- and evaluating it before the other clauses leaks nothing: its security
 *	  level is the lowest of the relation's clauses, or it is leakproof
 *	  (security barrier views and row-level security order their clauses).
 *
 * Every clause still stays in the plan's qual, so the executor checks it
 * again: pushing down only spares decoding rows that cannot match.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/guc.h"
#include "utils/pg_locale.h"
#include "utils/rel.h"

#include "rollout/portable_values.h"

#include "scan_internal.h"

/* rollout_fdw.push_down_conditions */
static bool push_down_conditions = true;

/* Define rollout_fdw.push_down_conditions; _PG_init calls this. */
void
scan_filter_define_settings(void)
{
	DefineCustomBoolVariable("rollout_fdw.push_down_conditions",
							 "Lets a scan check simple conditions on any column before it decodes the rest of a row.",
							 "Off leaves every condition to the executor; results are the same either way.",
							 &push_down_conditions,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

/* Fields of one pushed condition in a plan's fdw_private (see below). */
enum PushedConditionField
{
	PushedKind,
	PushedAttno,
	PushedFunction,
	PushedCollation,
	PushedColumnOnLeft,
	PushedUseOr,
	PushedValueIndex,			/* into fdw_exprs, -1 for none */
	PushedValueType,
	PushedZoneStrategy
};

/*
 * The column a clause argument names: a Var of baserel, under relabelings,
 * stored as its own type.  Returns its attribute number, or
 * InvalidAttrNumber.
 */
static AttrNumber
pushable_column(Node *node, RelOptInfo *baserel, Oid relid)
{
	Var		   *var;

	while (node && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	if (node == NULL || !IsA(node, Var))
		return InvalidAttrNumber;
	var = (Var *) node;
	if ((Index) var->varno != baserel->relid || var->varlevelsup != 0 ||
		var->varattno <= 0)
		return InvalidAttrNumber;
	if (portable_type_encoding(get_atttype(relid, var->varattno), NULL) !=
		PORTABLE_IMAGE)
		return InvalidAttrNumber;
	return var->varattno;
}

/* Is a value fixed for the scan, computable before any row is read? */
static bool
pushable_value(Node *value)
{
	return !contain_var_clause(value) &&
		!contain_volatile_functions(value) &&
		!contain_subplans(value);
}

/*
 * Is a strict operator function, so that NULL in means NULL out, that can be
 * called without its expression?  A user's function declared with
 * polymorphic arguments (anyelement, anycompatible, "any") works out their
 * types from the call's expression (fn_expr), which the scan's calls lack:
 * it would fail where PostgreSQL's own evaluation returns rows.  (Built-in
 * ones, array and range comparisons, take the types from the values.)
 */
static bool
pushable_function(Oid funcid)
{
	Oid		   *argtypes;
	int			nargs;
	Oid			rettype;

	if (!OidIsValid(funcid) || !func_strict(funcid))
		return false;
	if (funcid < FirstNormalObjectId)
		return true;
	rettype = get_func_signature(funcid, &argtypes, &nargs);
	if (IsPolymorphicType(rettype) || rettype == ANYOID)
		return false;
	for (int i = 0; i < nargs; i++)
		if (IsPolymorphicType(argtypes[i]) || argtypes[i] == ANYOID)
			return false;
	return true;
}

/*
 * The btree strategy of opno (with the column on the left) when it compares
 * two values of the column's type in the order the segments' statistics
 * use: a member of the type's default btree operator family, and, for a
 * collatable type, under the "C" collation, or, for the built-in string
 * types, equality under a deterministic collation (which agrees with their
 * comparison under "C": text and name compare bytes, bpchar ignores
 * trailing spaces in both), and never for a type whose order depends on
 * the database (jsonb: portable_values.h).  0 otherwise: the condition is
 * still pushed down, but no min/max rules it out.
 */
static int
zone_strategy(Oid opno, Oid column_type, Oid collation, bool column_on_left)
{
	Oid			opclass = GetDefaultOpClass(column_type, BTREE_AM_OID);
	Oid			opfamily;
	Oid			lefttype;
	Oid			righttype;
	int			strategy;

	if (!OidIsValid(opclass))
		return 0;

	/*
	 * The segments' min/max of such a column were computed in the order of
	 * the database that wrote them, which may not be this one's.
	 */
	if (portable_type_order_is_local(column_type))
		return 0;
	opfamily = get_opclass_family(opclass);
	if (!op_in_opfamily(opno, opfamily))
		return 0;
	get_op_opfamily_properties(opno, opfamily, false, &strategy, &lefttype,
							   &righttype);
	if (lefttype != column_type || righttype != column_type)
		return 0;
	if (type_is_collatable(column_type) &&
		!(OidIsValid(collation) && lc_collate_is_c(collation)) &&
		!(strategy == BTEqualStrategyNumber && OidIsValid(collation) &&
		  (column_type == TEXTOID || column_type == BPCHAROID ||
		   column_type == NAMEOID) &&
		  get_collation_isdeterministic(collation)))
		return 0;
	return column_on_left ? strategy : BTCommuteStrategyNumber(strategy);
}

/* "column op value" or "value op column" */
static PushedCondition *
classify_comparison(OpExpr *op, RelOptInfo *baserel, Oid relid)
{
	PushedCondition *condition;
	Node	   *left;
	Node	   *right;
	AttrNumber	attno;
	bool		column_on_left;

	if (list_length(op->args) != 2)
		return NULL;
	left = linitial(op->args);
	right = lsecond(op->args);
	if ((attno = pushable_column(left, baserel, relid)) != InvalidAttrNumber &&
		pushable_value(right))
		column_on_left = true;
	else if ((attno = pushable_column(right, baserel, relid)) != InvalidAttrNumber &&
			 pushable_value(left))
		column_on_left = false;
	else
		return NULL;
	set_opfuncid(op);
	if (!pushable_function(op->opfuncid))
		return NULL;

	condition = palloc0(sizeof(PushedCondition));
	condition->kind = ROW_CONDITION_COMPARE;
	condition->attno = attno;
	condition->function = op->opfuncid;
	condition->collation = op->inputcollid;
	condition->column_on_left = column_on_left;
	condition->value = (Expr *) (column_on_left ? right : left);
	condition->zone_strategy = zone_strategy(op->opno, get_atttype(relid, attno),
											 op->inputcollid, column_on_left);
	return condition;
}

/* "column op ANY (array)" and "column op ALL (array)" */
static PushedCondition *
classify_array_comparison(ScalarArrayOpExpr *op, RelOptInfo *baserel, Oid relid)
{
	PushedCondition *condition;
	AttrNumber	attno;

	if (list_length(op->args) != 2)
		return NULL;
	attno = pushable_column(linitial(op->args), baserel, relid);
	if (attno == InvalidAttrNumber || !pushable_value(lsecond(op->args)))
		return NULL;
	set_sa_opfuncid(op);
	if (!pushable_function(op->opfuncid))
		return NULL;

	condition = palloc0(sizeof(PushedCondition));
	condition->kind = ROW_CONDITION_ARRAY;
	condition->attno = attno;
	condition->function = op->opfuncid;
	condition->collation = op->inputcollid;
	condition->column_on_left = true;
	condition->use_or = op->useOr;
	condition->value = (Expr *) lsecond(op->args);
	condition->zone_strategy = zone_strategy(op->opno, get_atttype(relid, attno),
											 op->inputcollid, true);
	return condition;
}

/*
 * The condition a restriction clause of baserel can be pushed down as, or
 * NULL (see the file header).
 */
PushedCondition *
scan_filter_classify(RestrictInfo *rinfo, RelOptInfo *baserel, Oid relid)
{
	Node	   *clause = (Node *) rinfo->clause;
	PushedCondition *condition = NULL;

	if (!push_down_conditions)
		return NULL;
	/* the executor evaluates it again: a volatile operator must run once */
	if (contain_volatile_functions(clause))
		return NULL;
	if (rinfo->security_level > baserel->baserestrict_min_security &&
		!rinfo->leakproof)
		return NULL;

	if (IsA(clause, OpExpr))
		condition = classify_comparison((OpExpr *) clause, baserel, relid);
	else if (IsA(clause, ScalarArrayOpExpr))
		condition = classify_array_comparison((ScalarArrayOpExpr *) clause,
											  baserel, relid);
	else if (IsA(clause, NullTest) && !((NullTest *) clause)->argisrow)
	{
		NullTest   *test = (NullTest *) clause;
		AttrNumber	attno = pushable_column((Node *) test->arg, baserel, relid);

		if (attno == InvalidAttrNumber)
			return NULL;
		condition = palloc0(sizeof(PushedCondition));
		condition->kind = test->nulltesttype == IS_NULL ?
			ROW_CONDITION_IS_NULL : ROW_CONDITION_IS_NOT_NULL;
		condition->attno = attno;
	}
	return condition;
}

/*
 * A condition as a plan's fdw_private carries it: an Integer list (it must
 * survive copyObject); its value expression, if any, is appended to
 * *fdw_exprs, where setrefs.c fixes it up for the executor.
 */
List *
scan_filter_serialize(PushedCondition *condition, List **fdw_exprs)
{
	int			value_index = -1;
	Oid			value_type = InvalidOid;

	if (condition->value != NULL)
	{
		value_index = list_length(*fdw_exprs);
		value_type = exprType((Node *) condition->value);
		*fdw_exprs = lappend(*fdw_exprs, condition->value);
	}
	/* in the order of enum PushedConditionField */
	return list_concat(list_make4(makeInteger(condition->kind),
								  makeInteger(condition->attno),
								  makeInteger(condition->function),
								  makeInteger(condition->collation)),
					   list_make5(makeInteger(condition->column_on_left),
								  makeInteger(condition->use_or),
								  makeInteger(value_index),
								  makeInteger(value_type),
								  makeInteger(condition->zone_strategy)));
}

/* Field `field` of a serialized condition. */
static int
pushed_field(List *info, enum PushedConditionField field)
{
	return intVal(list_nth(info, field));
}

/*
 * Evaluate a condition's value (or array) and copy it into
 * CurrentMemoryContext; an array is split into its elements.
 */
static void
scan_filter_evaluate_value(RowCondition *condition, List *info,
						   ExprState *value_state, ExprContext *econtext)
{
	Oid			value_type = (Oid) pushed_field(info, PushedValueType);
	Datum		value;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	ArrayType  *array;

	value = ExecEvalExpr(value_state, econtext, &condition->value_isnull);
	if (condition->value_isnull)
		return;
	get_typlenbyval(value_type, &typlen, &typbyval);
	condition->value = datumCopy(value, typbyval, typlen);
	if (condition->kind != ROW_CONDITION_ARRAY)
		return;

	array = DatumGetArrayTypeP(condition->value);
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
	deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
					  &condition->elements, &condition->element_nulls,
					  &condition->element_count);
}

/*
 * How much checking a condition may cost: nothing more to decode for the
 * key column (decoded anyway), a fixed-width column next, a variable-width
 * one (a payload, perhaps) last.
 */
static int
scan_filter_rank(const RowCondition *condition, const RolloutStore *store)
{
	if (condition->column == store->key_column)
		return 0;
	return store->schema.columns[condition->column].typlen > 0 ? 1 : 2;
}

/*
 * Order the conditions cheapest first (stably), so that a row failing a
 * condition on a small column never has its large ones decoded; the
 * executor's order of the clauses is its own, and AND does not depend on it.
 */
static void
scan_filter_order(RowFilter *filter, const RolloutStore *store)
{
	for (int i = 1; i < filter->count; i++)
	{
		RowCondition moving = filter->conditions[i];
		int			rank = scan_filter_rank(&moving, store);
		int			j = i;

		while (j > 0 && scan_filter_rank(&filter->conditions[j - 1], store) > rank)
		{
			filter->conditions[j] = filter->conditions[j - 1];
			j--;
		}
		filter->conditions[j] = moving;
	}
}

/*
 * The plan's pushed conditions with their values evaluated now, as the
 * merge read's filter, in CurrentMemoryContext (scan_internal.h).  A
 * condition on a column the store does not hold as the table's own type is
 * left out: the executor checks it anyway.
 */
RowFilter *
scan_filter_build(RolloutScanState *state, ExprContext *econtext)
{
	TupleDesc	tupdesc = RelationGetDescr(state->rel);
	RowFilter  *filter = palloc0(sizeof(RowFilter));
	ListCell   *lc;

	filter->conditions = palloc0(sizeof(RowCondition) *
								 Max(list_length(state->pushed_conditions), 1));
	foreach(lc, state->pushed_conditions)
	{
		List	   *info = lfirst(lc);
		AttrNumber	attno = pushed_field(info, PushedAttno);
		int			value_index = pushed_field(info, PushedValueIndex);
		RowCondition *condition = &filter->conditions[filter->count];
		int			column;

		if (attno < 1 || attno > state->natts)
			continue;
		column = state->attr_to_column[attno - 1];
		if (column < 0 ||
			state->store->codecs[column].encoding != PORTABLE_IMAGE ||
			state->store->schema.columns[column].typid !=
			TupleDescAttr(tupdesc, attno - 1)->atttypid)
			continue;

		condition->kind = pushed_field(info, PushedKind);
		condition->column = column;
		condition->collation = (Oid) pushed_field(info, PushedCollation);
		condition->column_on_left = pushed_field(info, PushedColumnOnLeft);
		condition->use_or = pushed_field(info, PushedUseOr);
		condition->zone_strategy = pushed_field(info, PushedZoneStrategy);
		if (condition->kind == ROW_CONDITION_COMPARE ||
			condition->kind == ROW_CONDITION_ARRAY)
			fmgr_info((Oid) pushed_field(info, PushedFunction), &condition->proc);
		if (value_index >= 0)
			scan_filter_evaluate_value(condition, info,
									   list_nth(state->value_states, value_index),
									   econtext);
		filter->count++;
	}
	scan_filter_order(filter, state->store);
	return filter;
}
