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

#include "access/stratnum.h"

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

/* Is a non-null value within a SEGMENT_RANGE condition's bounds? */
static bool
row_condition_in_range(const RowCondition *condition, Datum value)
{
	const SegmentColumn *column = condition->definition;

	if (condition->has_low &&
		segment_column_compare(column, value, condition->low) < 0)
		return false;
	return !condition->has_high ||
		segment_column_compare(column, value, condition->high) < 0;
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
		case ROW_CONDITION_SEGMENT_RANGE:
			return !isnull && row_condition_in_range(condition, value);
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

/* ----------------------------------------------------------------
 * Zone maps
 * ----------------------------------------------------------------
 */

/*
 * Can a value in [min, max] (the segment's order) stand in relation
 * strategy to value?  False only when none can.
 */
static bool
zone_may_hold(const SegmentColumn *column, int strategy, Datum min, Datum max,
			  Datum value)
{
	switch (strategy)
	{
		case BTLessStrategyNumber:
			return segment_column_compare(column, min, value) < 0;
		case BTLessEqualStrategyNumber:
			return segment_column_compare(column, min, value) <= 0;
		case BTEqualStrategyNumber:
			return segment_column_compare(column, min, value) <= 0 &&
				segment_column_compare(column, max, value) >= 0;
		case BTGreaterEqualStrategyNumber:
			return segment_column_compare(column, max, value) >= 0;
		case BTGreaterStrategyNumber:
			return segment_column_compare(column, max, value) > 0;
	}
	return true;
}

/*
 * Does chunk (of row_count rows) prove that condition holds for none of its
 * rows?  Under a strict operator a NULL column or value never holds, so an
 * all-NULL chunk rules out every comparison; min/max rule one out only for
 * an operator with a zone_strategy.  column op ANY (elements) holds for
 * none when no element can, ALL when one element cannot (or is NULL);
 * ALL over no element holds for every row.
 */
static bool
row_condition_excludes(const RowCondition *condition, const SegmentColumn *column,
					   const SegmentChunkInfo *chunk, int64 row_count)
{
	bool		all_null = chunk->null_count >= row_count;

	switch (condition->kind)
	{
		case ROW_CONDITION_IS_NULL:
			return chunk->null_count == 0;
		case ROW_CONDITION_IS_NOT_NULL:
			return all_null;
		case ROW_CONDITION_COMPARE:
			if (condition->value_isnull || all_null)
				return true;
			return condition->zone_strategy != 0 && chunk->has_stats &&
				!zone_may_hold(column, condition->zone_strategy, chunk->min,
							   chunk->max, condition->value);
		case ROW_CONDITION_ARRAY:
			if (condition->value_isnull)
				return true;
			if (!condition->use_or && condition->element_count == 0)
				return false;
			if (all_null)
				return true;
			if (condition->zone_strategy == 0 || !chunk->has_stats)
				return false;
			for (int i = 0; i < condition->element_count; i++)
			{
				bool		may = !condition->element_nulls[i] &&
				zone_may_hold(column, condition->zone_strategy, chunk->min,
							  chunk->max, condition->elements[i]);

				if (condition->use_or && may)
					return false;
				if (!condition->use_or && !may)
					return true;
			}
			return condition->use_or;
		case ROW_CONDITION_SEGMENT_RANGE:
			if (all_null)
				return true;
			if (!chunk->has_stats)
				return false;
			return (condition->has_high &&
					segment_column_compare(column, chunk->min, condition->high) >= 0) ||
				(condition->has_low &&
				 segment_column_compare(column, chunk->max, condition->low) < 0);
	}
	return false;
}

bool
row_filter_excludes_group(const RowFilter *filter, const SegmentSchema *schema,
						  const SegmentChunkInfo *chunks, int64 row_count)
{
	for (int i = 0; i < filter->count; i++)
	{
		const RowCondition *condition = &filter->conditions[i];

		if (row_condition_excludes(condition, &schema->columns[condition->column],
								   &chunks[condition->column], row_count))
			return true;
	}
	return false;
}
