/*-------------------------------------------------------------------------
 *
 * azure_store.c
 *		The Azure Blob Storage backend (az://account/container/prefix).
 *
 * Not built yet: locations of this scheme are refused by
 * objstore_check_location() with "the az backend is not available in this
 * build".  See the S3/Azure issue.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "objstore_backend.h"

bool
azure_store_available(void)
{
	return false;
}

void
azure_store_open(ObjectStore *store, const char *account, const char *container,
				 const char *prefix, List *options)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("the az (Azure Blob Storage) backend is not available in this build")));
}
