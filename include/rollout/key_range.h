/*-------------------------------------------------------------------------
 *
 * key_range.h
 *		The range of keys a read is limited to (read/key_range.c): what the
 *		planner derived from a query's key conditions, tested against keys,
 *		zone maps and manifest key ranges.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_KEY_RANGE_H
#define ROLLOUT_KEY_RANGE_H

#include "fmgr.h"

/*
 * One end of a key range.  The bound's value may be of another type than
 * the key (a cross-type operator of the key's btree family, such as
 * int8 = int4); compare_proc compares (key, value) in the key's
 * collation-independent order.
 */
typedef struct KeyBound
{
	bool		present;
	bool		inclusive;
	Datum		value;
	Oid			value_type;		/* the type of value */
	FmgrInfo	compare_proc;
	Oid			collation;
} KeyBound;

typedef struct KeyRange
{
	bool		empty;			/* contradictory bounds: nothing matches */
	bool		single_key;		/* both bounds are one key = condition */
	KeyBound	lower;
	KeyBound	upper;

	/*
	 * A parallel scan's part of the key space (fdw/scan_parallel.c), on top
	 * of the bounds above: keys >= slice_lower and < slice_upper, either
	 * possibly absent, both of the key's own type.  Parts are disjoint, so
	 * that every key is merged by exactly one participant.
	 */
	KeyBound	slice_lower;
	KeyBound	slice_upper;
} KeyRange;

/* Is key inside range? */
extern bool key_range_contains(const KeyRange *range, Datum key);

/* Can [min, max] hold a key of range? */
extern bool key_range_overlaps(const KeyRange *range, Datum min, Datum max);

/* Is key below the range's lower bound (so every earlier key is too)? */
extern bool key_range_below_lower(const KeyRange *range, Datum key);

/* Is key above the range's upper bound? */
extern bool key_range_past_upper(const KeyRange *range, Datum key);

/* Does the range have a lower bound at all (so that seeking it helps)? */
extern bool key_range_has_lower(const KeyRange *range);

/*
 * The one key a range of a key = condition stands for, when key filters may
 * be asked about it: its value has the key column's type (key_type) and the
 * type's equality is byte equality.  False otherwise.
 */
extern bool key_range_filter_key(const KeyRange *range, Oid key_type, Datum *key);

#endif							/* ROLLOUT_KEY_RANGE_H */
