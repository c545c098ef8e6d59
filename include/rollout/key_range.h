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
	FmgrInfo	compare_proc;
	Oid			collation;
} KeyBound;

typedef struct KeyRange
{
	bool		empty;			/* contradictory bounds: nothing matches */
	KeyBound	lower;
	KeyBound	upper;
} KeyRange;

/* Is key inside range? */
extern bool key_range_contains(const KeyRange *range, Datum key);

/* Can [min, max] hold a key of range? */
extern bool key_range_overlaps(const KeyRange *range, Datum min, Datum max);

/* Is key above the range's upper bound? */
extern bool key_range_past_upper(const KeyRange *range, Datum key);

#endif							/* ROLLOUT_KEY_RANGE_H */
