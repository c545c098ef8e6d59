/*-------------------------------------------------------------------------
 *
 * row_filter.h
 *		Conditions on a row's columns that a merge read checks on the version
 *		that wins, before it decodes the rest of the row (read/row_filter.c).
 *
 * The planner (fdw/scan_plan.c) pushes down simple conditions of a query:
 * "column op value", "column op ANY/ALL (array)", "column IS [NOT] NULL",
 * with value fixed for the scan.  The read evaluates each with the query's
 * own operator function and collation, so a row it drops is one the query's
 * WHERE clause drops too; PostgreSQL still checks every condition on the
 * rows that pass.  Conditions are checked only on the newest version of a
 * key, never to skip an older one: an old version that matches must not
 * reappear because the new one does not.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_ROW_FILTER_H
#define ROLLOUT_ROW_FILTER_H

#include "fmgr.h"

#include "rollout/row_source.h"

typedef enum RowConditionKind
{
	ROW_CONDITION_COMPARE,		/* column op value, or value op column */
	ROW_CONDITION_ARRAY,		/* column op ANY/ALL (elements) */
	ROW_CONDITION_IS_NULL,
	ROW_CONDITION_IS_NOT_NULL,
	ROW_CONDITION_SEGMENT_RANGE /* low <= column < high in the segments' order
								 * (no query makes it: compaction's passes
								 * over cluster ranges, rewrite.c) */
} RowConditionKind;

typedef struct RowCondition
{
	RowConditionKind kind;
	int			column;			/* segment schema column */
	FmgrInfo	proc;			/* the operator's (strict) function */
	Oid			collation;		/* the operator's input collation */
	bool		column_on_left; /* COMPARE: argument order */
	bool		value_isnull;	/* COMPARE: the value (ARRAY: the array) */
	Datum		value;
	bool		use_or;			/* ARRAY: ANY (true) or ALL */

	/*
	 * COMPARE, ARRAY: the operator's btree strategy (BTLessStrategyNumber ...
	 * BTGreaterStrategyNumber) with the column on the left, when it orders
	 * values as the segments' statistics do (segment.h: the type's default
	 * btree order, "C" for text), so that a chunk's min and max can rule the
	 * condition out; 0 when it does not.
	 */
	int			zone_strategy;
	int			element_count;	/* ARRAY: the elements */
	Datum	   *elements;
	bool	   *element_nulls;

	/*
	 * SEGMENT_RANGE: the bounds, compared by segment_column_compare on the
	 * column's definition, each absent when its has_ flag is false.  A NULL
	 * column is in no range.
	 */
	const SegmentColumn *definition;
	bool		has_low;
	Datum		low;
	bool		has_high;
	Datum		high;
} RowCondition;

/* Conditions that must all hold (AND). */
typedef struct RowFilter
{
	int			count;
	RowCondition *conditions;
} RowFilter;

/*
 * Do all conditions hold for the source's current row?  A condition whose
 * result is NULL (a NULL column or value, under a strict operator) does not
 * hold, as in a WHERE clause.
 */
extern bool row_filter_matches(const RowFilter *filter, RowSource *row);

/*
 * Do the statistics of a row group's chunks (one per schema column, of
 * row_count rows) prove that no row of it meets all conditions?  Checks
 * min/max against the conditions with a zone_strategy, and null counts
 * against all.  Whether a row group may then be skipped is the caller's to
 * decide: only when no other source holds an older version of its keys
 * (merge_iterator.c, merge_read_plan_zone_maps).
 */
extern bool row_filter_excludes_group(const RowFilter *filter,
									  const SegmentSchema *schema,
									  const SegmentChunkInfo *chunks,
									  int64 row_count);

#endif							/* ROLLOUT_ROW_FILTER_H */
