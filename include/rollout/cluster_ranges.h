/*-------------------------------------------------------------------------
 *
 * cluster_ranges.h
 *		The ranges of a column a compaction spreads its outputs over, so
 *		that a filter on that column reads few fragments whatever the key
 *		order (lsm/cluster_ranges.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_CLUSTER_RANGES_H
#define ROLLOUT_CLUSTER_RANGES_H

#include "rollout/rewrite.h"

/* At most this many ranges (the NULLs' range not counted) */
#define CLUSTER_MAX_RANGES	16

/*
 * Ranges of column (an index in the store's schema) holding about as many
 * of the rows a rewrite of snapshot would write as each other, from a
 * sample of them: read with the same options as the rewrite, only the key,
 * the stamp and the column decoded.  No more ranges than give every range
 * two row groups' worth of rows.  NULL when one range is all there is.
 */
extern RewriteClusters *cluster_ranges_choose(RolloutStore *store,
											  RolloutSnapshot *snapshot,
											  int column,
											  int64 drop_tombstones_before);

#endif							/* ROLLOUT_CLUSTER_RANGES_H */
