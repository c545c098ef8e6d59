/*-------------------------------------------------------------------------
 *
 * row_filter.c
 *		Checking pushed-down conditions on the version a merge read chose
 *		(row_filter.h).
 *
 * Each condition is evaluated the way the executor evaluates the clause it
 * came from: the same strict function, the same collation, SQL's three-
 * valued logic for NULLs and for ANY/ALL over arrays with NULL elements.
 * Only TRUE keeps a row.  The column values are asked for one condition at
 * a time, so a condition that fails on a small column spares decoding the
 * columns of the others (row_source.c decodes chunks late).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "rollout/row_filter.h"

/*
 * Call a strict boolean function on two non-null arguments: TRUE, FALSE, or
 * NULL (*isnull) when it returns NULL, which FunctionCall2Coll would treat as
 * an error although a WHERE clause only drops the row.
 */
static bool
row_condition_call(const RowCondition *condition, Datum left, Datum right,
				   bool *isnull)
{
	LOCAL_FCINFO(fcinfo, 2);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, (FmgrInfo *) &condition->proc, 2,
							 condition->collation, NULL, NULL);
	fcinfo->args[0].value = left;
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = right;
	fcinfo->args[1].isnull = false;
	result = FunctionCallInvoke(fcinfo);
	*isnull = fcinfo->isnull;
	return !fcinfo->isnull && DatumGetBool(result);
}

/*
 * column op ANY (elements) or column op ALL (elements), with a non-null
 * column: ANY is TRUE when one comparison is, ALL FALSE when one is; else a
 * NULL element makes the answer NULL, which does not hold.
 */
static bool
row_condition_array(const RowCondition *condition, Datum column_value)
{
	bool		saw_null = false;

	for (int i = 0; i < condition->element_count; i++)
	{
		bool		isnull = condition->element_nulls[i];
		bool		result = false;

		if (!isnull)
			result = row_condition_call(condition, column_value,
										condition->elements[i], &isnull);
		if (isnull)
			saw_null = true;
		else if (result == condition->use_or)
			return condition->use_or;
	}
	return saw_null ? false : !condition->use_or;
}

/* Does one condition hold for the current row? */
static bool
row_condition_holds(const RowCondition *condition, RowSource *row)
{
	bool		isnull;
	Datum		value;
	bool		result_isnull;
	bool		result;

	/* a row group's NULL count may answer without decoding the column */
	if (condition->kind == ROW_CONDITION_IS_NULL)
		return row_source_column_is_null(row, condition->column);
	if (condition->kind == ROW_CONDITION_IS_NOT_NULL)
		return !row_source_column_is_null(row, condition->column);

	value = row_source_column(row, condition->column, &isnull);
	switch (condition->kind)
	{
		case ROW_CONDITION_IS_NULL:
		case ROW_CONDITION_IS_NOT_NULL:
			break;				/* answered above */
		case ROW_CONDITION_COMPARE:
			if (isnull || condition->value_isnull)
				return false;
			if (condition->column_on_left)
				result = row_condition_call(condition, value, condition->value,
											&result_isnull);
			else
				result = row_condition_call(condition, condition->value, value,
											&result_isnull);
			return result;
		case ROW_CONDITION_ARRAY:
			if (condition->value_isnull)
				return false;
			/* as the executor: an empty array decides even a NULL column */
			if (condition->element_count == 0)
				return !condition->use_or;
			if (isnull)
				return false;
			return row_condition_array(condition, value);
	}
	return true;				/* unreachable: every kind is handled */
}

/* Do all conditions hold for the current row (row_filter.h)? */
bool
row_filter_matches(const RowFilter *filter, RowSource *row)
{
	for (int i = 0; i < filter->count; i++)
	{
		if (!row_condition_holds(&filter->conditions[i], row))
			return false;
	}
	return true;
}
