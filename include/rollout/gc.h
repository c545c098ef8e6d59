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

#include "datatype/timestamp.h"
#include "rollout/store.h"

typedef struct GcResult
{
	int64		objects_deleted;
	int64		bytes_freed;
	bool		stopped;		/* stop_at came first: more may be due */
} GcResult;

/* A longer grace is taken as this one (a thousand years): it keeps everything. */
#define GC_MAX_GRACE_SECONDS	((int64) 1000 * 366 * 24 * 3600)

/*
 * Delete what committed manifests no longer reference and what crashed
 * writers left, if older than grace_seconds (>= gc_min_grace_seconds()).
 * With stop_at (0: none), gathers nothing more to delete once that time has
 * come after its first batch of deletions (what it gathered still goes), and
 * returns with stopped set; what it deleted stays deleted, and the next run
 * goes on from there.
 */
extern GcResult rollout_gc_store(RolloutStore *store, int64 grace_seconds,
								 TimestampTz stop_at);

/*
 * How many batches of deletions gc has sent in this process: whether a gc
 * that ended in an ERROR (a cancel) deleted anything.
 */
extern int64 rollout_gc_batches_sent(void);

#endif							/* ROLLOUT_GC_H */
