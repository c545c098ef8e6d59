/*-------------------------------------------------------------------------
 *
 * s3_store.c
 *		The S3 backend (s3://bucket/prefix).
 *
 * Not built yet: locations of this scheme are refused by
 * objstore_check_location() with "the s3 backend is not available in this
 * build".  See the S3/Azure issue.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "objstore_backend.h"

bool
s3_store_available(void)
{
	return false;
}

void
s3_store_open(ObjectStore *store, const char *bucket, const char *prefix,
			  List *options)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("the s3 backend is not available in this build")));
}
