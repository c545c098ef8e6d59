/*-------------------------------------------------------------------------
 *
 * grace.h
 *		The grace period: how long garbage collection leaves an object it
 *		may delete, and so how long any writer may act on what it saw
 *		(core/grace.c, DESIGN.md §7.3).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_GRACE_H
#define ROLLOUT_GRACE_H

#include "datatype/timestamp.h"

/* Define rollout_fdw.min_gc_grace (from _PG_init). */
extern void grace_define_settings(void);

/* rollout_fdw.min_gc_grace: the shortest grace rollout_gc accepts, seconds */
extern int	gc_min_grace_seconds(void);

/*
 * Has something a writer saw or made at `since` (an uploaded output not yet
 * committed, or the WAL tip it is about to write after) waited so long, half
 * the minimum grace, that garbage collection may since have deleted objects
 * it relies on?  The writer then abandons its output, or looks again before
 * it writes.  Always false with rollout_fdw.min_gc_grace = 0.
 */
extern bool rollout_output_too_old(TimestampTz since);

#endif							/* ROLLOUT_GRACE_H */
