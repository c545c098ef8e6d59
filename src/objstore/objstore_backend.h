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

/*
 * Set store->access_fingerprint from store->identity and the backend's
 * credential material (nparts strings; NULL entries count as empty).
 */
extern void objstore_set_access_fingerprint(ObjectStore *store,
											const char *const *parts,
											int nparts);

/*
 * Clip a read of an object of size bytes to the object: [*offset, *offset +
 * *length), or with tail its last *length bytes (*offset is set), where a
 * negative *length means to the end (with tail: all of it).
 */
extern void objstore_clip_range(int64 size, bool tail, int64 *offset,
								int64 *length);

/*
 * Count a write to a local store that failed after it may have happened (a
 * record appended or a file linked, then a failed sync): objstore.h's
 * maybe_applied, as the HTTP backends count theirs.
 */
extern void objstore_note_maybe_applied(void);

/* file_store.c */
extern void file_store_define_settings(void);
extern void file_store_open(ObjectStore *store, const char *root_path,
							bool create_root);

/* s3_store.c: s3://bucket[/prefix] */
extern bool s3_store_available(void);
extern void s3_store_open(ObjectStore *store, const char *bucket,
						  const char *prefix, List *options,
						  bool allow_environment_credentials);

/* azure_store.c: az://account/container[/prefix] */
extern bool azure_store_available(void);
extern void azure_store_open(ObjectStore *store, const char *account,
							 const char *container, const char *prefix,
							 List *options,
							 bool allow_environment_credentials);

#endif							/* ROLLOUT_OBJSTORE_BACKEND_H */
