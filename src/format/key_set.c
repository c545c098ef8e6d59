/*-------------------------------------------------------------------------
 *
 * key_set.c
 *		A hash set of key values, equal by the store's key order.
 *
 * Equality is segment_column_compare() == 0, the comparison every merge and
 * scan uses to tell versions of one key apart.  The hash must give equal
 * keys equal hashes: a type's default hash function does so for its default
 * equality (hash_numeric ignores a numeric's scale, hashfloat8 maps -0 to
 * 0), and the types segment_column_compare compares inline are equal
 * exactly when their images are.  A type without a hash function puts every
 * key in one bucket: correct, and linear.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/typcache.h"

#include "rollout/key_set.h"

struct KeySet
{
	const SegmentColumn *column;
	MemoryContext context;
	HTAB	   *buckets;		/* KeySetBucket by hash */
	FmgrInfo   *hash_proc;		/* the type's hash function, or NULL */
	bool		hash_image;		/* hash the image (inline-compared types) */
};

/* The keys whose hashes are hash. */
typedef struct KeySetBucket
{
	uint32		hash;
	List	   *keys;			/* Datum copies */
} KeySetBucket;

KeySet *
key_set_create(const SegmentColumn *column, MemoryContext context)
{
	KeySet	   *set = MemoryContextAllocZero(context, sizeof(KeySet));
	HASHCTL		ctl = {0};

	if (!column->has_order)
		elog(ERROR, "column \"%s\" of type %s has no order",
			 column->name, column->type_name);
	set->column = column;
	set->context = context;
	set->hash_image = column->compare_inline != SEGMENT_COMPARE_CALL;
	if (!set->hash_image && OidIsValid(column->typid))
	{
		TypeCacheEntry *type = lookup_type_cache(column->typid,
												 TYPECACHE_HASH_PROC_FINFO);

		if (OidIsValid(type->hash_proc_finfo.fn_oid))
			set->hash_proc = &type->hash_proc_finfo;
	}
	ctl.keysize = sizeof(uint32);
	ctl.entrysize = sizeof(KeySetBucket);
	ctl.hcxt = context;
	set->buckets = hash_create("rollout key set", 64, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	return set;
}

static uint32
key_set_hash(KeySet *set, Datum key)
{
	if (set->hash_image)
		return datum_image_hash(key, set->column->typbyval, set->column->typlen);
	if (set->hash_proc != NULL)
		return DatumGetUInt32(FunctionCall1Coll(set->hash_proc,
												set->column->compare_collation,
												key));
	return 0;
}

/* The bucket of key's hash (made when create), or NULL. */
static KeySetBucket *
key_set_bucket(KeySet *set, Datum key, bool create)
{
	uint32		hash = key_set_hash(set, key);
	bool		found;
	KeySetBucket *bucket = hash_search(set->buckets, &hash,
									   create ? HASH_ENTER : HASH_FIND, &found);

	if (bucket != NULL && !found)
		bucket->keys = NIL;
	return bucket;
}

static bool
key_set_bucket_contains(KeySet *set, KeySetBucket *bucket, Datum key)
{
	ListCell   *lc;

	foreach(lc, bucket->keys)
	{
		if (segment_column_compare(set->column, key, (Datum) lfirst(lc)) == 0)
			return true;
	}
	return false;
}

bool
key_set_contains(KeySet *set, Datum key)
{
	KeySetBucket *bucket = key_set_bucket(set, key, false);

	return bucket != NULL && key_set_bucket_contains(set, bucket, key);
}

void
key_set_add(KeySet *set, Datum key)
{
	KeySetBucket *bucket = key_set_bucket(set, key, true);
	MemoryContext oldcontext;

	if (key_set_bucket_contains(set, bucket, key))
		return;
	oldcontext = MemoryContextSwitchTo(set->context);
	bucket->keys = lappend(bucket->keys,
						   (void *) datumCopy(key, set->column->typbyval,
											  set->column->typlen));
	MemoryContextSwitchTo(oldcontext);
}
