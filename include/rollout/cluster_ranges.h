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

/*
 * The ranges of a compaction (the NULLs' range not counted): at most the
 * table option cluster_ranges, by default CLUSTER_DEFAULT_RANGES.  The
 * narrower a range, the more of the rows a window of the column reads are
 * its own (the payload pages it decodes hold fewer rows of other windows);
 * the more ranges, the more fragments a full scan merges and a lookup
 * asks.  A rewrite writes more ranges than REWRITE_MAX_OPEN_OUTPUTS in
 * passes.
 */
#define CLUSTER_DEFAULT_RANGES	64
#define CLUSTER_MAX_RANGES		256

/*
 * Ranges of column (an index in the store's schema) holding about as many
 * of the rows a rewrite of snapshot would write as each other, from a
 * sample of them: read with the same options as the rewrite, only the key,
 * the stamp and the column decoded.  At most max_ranges, and no more than
 * give every range two row groups' worth of rows.  NULL when one range is all there is.
 * The result also counts what the pass read (RewriteClusters).
 */
extern RewriteClusters *cluster_ranges_choose(RolloutStore *store,
											  RolloutSnapshot *snapshot,
											  int column, int max_ranges,
											  int64 drop_tombstones_before);

#endif							/* ROLLOUT_CLUSTER_RANGES_H */
