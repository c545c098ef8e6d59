/*-------------------------------------------------------------------------
 *
 * gc.h
 *		Garbage collection of objects no committed manifest references,
 *		and the grace period every writer of such objects respects
 *		(lsm/gc.c, DESIGN.md §7.3).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_GC_H
#define ROLLOUT_GC_H

#include "datatype/timestamp.h"

#include "rollout/store.h"

typedef struct GcResult
{
	int64		objects_deleted;
	int64		bytes_freed;
} GcResult;

/* Define rollout_fdw.min_gc_grace (from _PG_init). */
extern void gc_define_settings(void);

/* rollout_fdw.min_gc_grace: the shortest grace rollout_gc accepts, seconds */
extern int	gc_min_grace_seconds(void);

/*
 * Delete what committed manifests no longer reference and what crashed
 * writers left, if older than grace_seconds (>= gc_min_grace_seconds()).
 */
extern GcResult rollout_gc_store(RolloutStore *store, int64 grace_seconds);

/*
 * Has an uploaded but uncommitted output waited so long (half the minimum
 * grace) that garbage collection may already consider it an orphan?  Its
 * writer then abandons it instead of committing it (DESIGN.md §7.3).
 */
extern bool rollout_output_too_old(TimestampTz uploaded_at);

#endif							/* ROLLOUT_GC_H */
