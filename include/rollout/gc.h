/*-------------------------------------------------------------------------
 *
 * gc.h
 *		Garbage collection of objects no committed manifest references
 *		(lsm/gc.c, DESIGN.md §7.3; the grace period is in grace.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_GC_H
#define ROLLOUT_GC_H

#include "rollout/store.h"

typedef struct GcResult
{
	int64		objects_deleted;
	int64		bytes_freed;
} GcResult;

/* A longer grace is taken as this one (a thousand years): it keeps everything. */
#define GC_MAX_GRACE_SECONDS	((int64) 1000 * 366 * 24 * 3600)

/*
 * Delete what committed manifests no longer reference and what crashed
 * writers left, if older than grace_seconds (>= gc_min_grace_seconds()).
 */
extern GcResult rollout_gc_store(RolloutStore *store, int64 grace_seconds);

#endif							/* ROLLOUT_GC_H */
