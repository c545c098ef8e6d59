/*-------------------------------------------------------------------------
 *
 * objstore_backend.h
 *		What objstore.c needs from each backend (private to src/objstore).
 *
 * objstore.c parses a location and hands its parts to the backend's open
 * function, which fills in store->ops and store->backend.  A backend that is
 * not built in answers false to its *_available() function, and locations of
 * its scheme are refused with a clear message.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_OBJSTORE_BACKEND_H
#define ROLLOUT_OBJSTORE_BACKEND_H

#include "rollout/objstore.h"

/* file_store.c */
extern void file_store_open(ObjectStore *store, const char *root_path,
							bool create_root);

/* s3_store.c: s3://bucket[/prefix] */
extern bool s3_store_available(void);
extern void s3_store_open(ObjectStore *store, const char *bucket,
						  const char *prefix, List *options);

/* azure_store.c: az://account/container[/prefix] */
extern bool azure_store_available(void);
extern void azure_store_open(ObjectStore *store, const char *account,
							 const char *container, const char *prefix,
							 List *options);

#endif							/* ROLLOUT_OBJSTORE_BACKEND_H */
