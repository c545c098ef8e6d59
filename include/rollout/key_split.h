/*-------------------------------------------------------------------------
 *
 * key_split.h
 *		Splitting a snapshot's key space into parts of about equal rows
 *		(read/key_split.c), for a parallel scan's participants.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_KEY_SPLIT_H
#define ROLLOUT_KEY_SPLIT_H

#include "rollout/key_range.h"
#include "rollout/snapshot.h"
#include "rollout/store.h"

/*
 * Split the key space into at most max_parts parts: returns the number of
 * boundaries, ascending distinct keys of the key column's type in
 * *boundaries (CurrentMemoryContext), one fewer than the parts.  Part 0
 * holds the keys below boundary 0, part i the keys from boundary i - 1 up
 * to boundary i, the last part the keys from the last boundary on.  With
 * no sorted object to learn keys from, it is 0 (one part).
 */
extern int	key_space_split(RolloutStore *store, const RolloutSnapshot *snapshot,
							int max_parts, Datum **boundaries);

/* Limit range to part `part` of count + 1 parts split at boundaries. */
extern void key_range_set_slice(KeyRange *range, RolloutStore *store,
								const Datum *boundaries, int count, int part);

#endif							/* ROLLOUT_KEY_SPLIT_H */
