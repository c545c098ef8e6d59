/*-------------------------------------------------------------------------
 *
 * named_snapshot.h
 *		Snapshots with a name: a token for a store as it is now, reads as of
 *		such a token, and retentions that keep what a token needs from
 *		garbage collection (core/named_snapshot.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_NAMED_SNAPSHOT_H
#define ROLLOUT_NAMED_SNAPSHOT_H

#include "datatype/timestamp.h"

#include "rollout/manifest_view.h"
#include "rollout/objstore.h"
#include "rollout/snapshot.h"

/* What a token names. */
typedef struct NamedSnapshot
{
	char	   *incarnation;	/* of the store it was taken of */
	ManifestVersions versions;
} NamedSnapshot;

/* A retention of a token, as gc and rollout_retained see it. */
typedef struct RetainedSnapshot
{
	ObjectStoreEntry *entry;	/* the retention object */
	TimestampTz until;
	char	   *token;			/* NULL when not read (expired) */
	NamedSnapshot *snapshot;	/* NULL when not read, or not a valid token
								 * (then gc keeps every version) */
} RetainedSnapshot;

/* rollout_fdw.as_of: the token every scan of its store reads ("" none) */
extern char *named_snapshot_as_of;

/* Define rollout_fdw.as_of; _PG_init calls it. */
extern void named_snapshot_define_settings(void);

/*
 * A token for the newest manifest versions of store, which must exist.
 * The caller flushes first what the token should hold (rollout_snapshot).
 */
extern char *named_snapshot_take(RolloutStore *store);

/*
 * The parsed token, or NULL when text is not one (then *problem, when not
 * NULL, says why).
 */
extern NamedSnapshot *named_snapshot_parse(const char *text,
										   const char **problem);

/* Was token (valid) taken of store (this creation of it)? */
extern bool named_snapshot_of_store(RolloutStore *store,
									const NamedSnapshot *snapshot);

/* The snapshot token names; ERROR when text is not a valid token. */
extern NamedSnapshot *named_snapshot_parse_or_raise(const char *token);

/*
 * ERROR unless named, parsed from token, was taken of store; outcome ends the
 * detail ("" or, say, "; nothing was released").  When the store's handle is
 * stale (the store was re-created under it), the error says that instead.
 */
extern void named_snapshot_check_of_store(RolloutStore *store,
										  const NamedSnapshot *named,
										  const char *token,
										  const char *outcome);

/*
 * The snapshot token names, for a scan: ERROR when the token is not one of
 * store, or when its manifests are gone (expired).
 */
extern RolloutSnapshot *named_snapshot_read(RolloutStore *store,
											const char *token);

/*
 * The same, or NULL where named_snapshot_read raises (not a valid token,
 * not one of store, expired): for callers that skip, not fail.
 */
extern RolloutSnapshot *named_snapshot_try_read(RolloutStore *store,
												const char *token);

/* ERROR: an object the snapshot of token needs is gone. */
extern void named_snapshot_raise_expired(RolloutStore *store,
										 const char *token)
			pg_attribute_noreturn();

/*
 * Keep what token needs from gc until until: a retention object, then,
 * unless the token was just_taken (its versions the newest), a check that
 * its manifests and objects all still exist (else the retention is removed
 * again and it is an ERROR).
 */
extern void named_snapshot_retain(RolloutStore *store, const char *token,
								  TimestampTz until, bool just_taken);

/* Remove every retention of token; returns how many there were. */
extern int	named_snapshot_release(RolloutStore *store, const char *token);

/*
 * The retentions of store (RetainedSnapshot *), oldest key first; those
 * that expire after now are read, the others only listed.
 */
extern List *named_snapshot_retentions(RolloutStore *store, TimestampTz now);

#endif							/* ROLLOUT_NAMED_SNAPSHOT_H */
