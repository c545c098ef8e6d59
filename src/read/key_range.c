/*-------------------------------------------------------------------------
 *
 * key_range.c
 *		Tests of keys and key intervals against a read's key range.
 *
 * A bound compares through the key type's btree comparison support
 * (compare_proc), which may be cross-type; a NULL range is everything.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"

#include "rollout/key_range.h"

/* <0, 0, >0 as key sorts before, with or after the bound's value. */
static int
key_bound_compare(const KeyBound *bound, Datum key)
{
	return DatumGetInt32(FunctionCall2Coll((FmgrInfo *) &bound->compare_proc,
										   bound->collation, key, bound->value));
}

/* Is key above an upper bound (so every later key is too)? */
static bool
key_above_bound(const KeyBound *bound, Datum key)
{
	int			cmp;

	if (!bound->present)
		return false;
	cmp = key_bound_compare(bound, key);
	return cmp > 0 || (cmp == 0 && !bound->inclusive);
}

/* Is key below a lower bound? */
static bool
key_below_bound(const KeyBound *bound, Datum key)
{
	int			cmp;

	if (!bound->present)
		return false;
	cmp = key_bound_compare(bound, key);
	return cmp < 0 || (cmp == 0 && !bound->inclusive);
}

/* Is key above the range's upper bound or its slice's? */
bool
key_range_past_upper(const KeyRange *range, Datum key)
{
	if (range == NULL)
		return false;
	return key_above_bound(&range->upper, key) ||
		key_above_bound(&range->slice_upper, key);
}

/* Is key below the range's lower bound or its slice's? */
bool
key_range_below_lower(const KeyRange *range, Datum key)
{
	if (range == NULL)
		return false;
	return key_below_bound(&range->lower, key) ||
		key_below_bound(&range->slice_lower, key);
}

bool
key_range_has_lower(const KeyRange *range)
{
	return range != NULL &&
		(range->lower.present || range->slice_lower.present);
}

/* Is key inside the range? */
bool
key_range_contains(const KeyRange *range, Datum key)
{
	if (range == NULL)
		return true;
	if (range->empty)
		return false;
	return !key_range_below_lower(range, key) && !key_range_past_upper(range, key);
}

/* Can an object whose keys lie in [min, max] hold a key of the range? */
bool
key_range_overlaps(const KeyRange *range, Datum min, Datum max)
{
	if (range == NULL)
		return true;
	if (range->empty)
		return false;
	/* the object ends before the range starts, or starts after it ends */
	return !key_range_below_lower(range, max) && !key_range_past_upper(range, min);
}

/*
 * Types whose btree equality is byte equality of their values, so that a
 * key filter built from the stored bytes answers for every equal value.
 * numeric (1.0 = 1.00), bpchar (trailing spaces), floats (0 = -0) and
 * collations other than "C" (which the key range never uses) would not.
 */
static bool
key_type_equality_is_bytewise(Oid type)
{
	switch (type)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case TEXTOID:
		case VARCHAROID:
		case BYTEAOID:
		case UUIDOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return true;
		default:
			return false;
	}
}

/* The key of a single-key range, for key filters (key_range.h). */
bool
key_range_filter_key(const KeyRange *range, Oid key_type, Datum *key)
{
	Oid			value_type = range->lower.value_type;

	if (range->empty || !range->single_key || !key_type_equality_is_bytewise(key_type))
		return false;
	/* text and varchar values are the same bytes */
	if (value_type != key_type &&
		!((value_type == TEXTOID || value_type == VARCHAROID) &&
		  (key_type == TEXTOID || key_type == VARCHAROID)))
		return false;
	*key = range->lower.value;
	return true;
}
