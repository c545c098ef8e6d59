/*-------------------------------------------------------------------------
 *
 * compact.h
 *		Rewrite the base table's fragments into fewer, without the versions
 *		newer ones hide (lsm/compact.c, DESIGN.md §7.2).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_COMPACT_H
#define ROLLOUT_COMPACT_H

#include "rollout/store.h"

typedef struct CompactResult
{
	int			fragments_before;
	int			fragments_after;
	int64		rows_written;
	int64		versions_dropped;	/* dropped tombstones included */
	char	   *skipped_reason; /* NULL when it compacted */
} CompactResult;

/* The column a compaction spreads its rows over ranges of (cluster_by) */
typedef struct CompactClustering
{
	int			column;			/* an index in the store's schema */
	int			max_ranges;		/* cluster_ranges */
} CompactClustering;

/*
 * Compact the base table when it has at least min_fragments fragments (the
 * outputs of one compaction counting as one, fragment_run_count),
 * reading at most max_source_fragments of them, into fragments of about
 * target_rows_per_fragment rows; with clustering (else NULL), one set of
 * them per range of its column.
 */
extern CompactResult rollout_compact_store(RolloutStore *store, int min_fragments,
										   int64 target_rows_per_fragment,
										   int max_source_fragments,
										   const CompactClustering *clustering);

/* Record a failed compaction in the base manifest (best effort). */
extern void rollout_compaction_record_error(RolloutStore *store, const char *message);

#endif							/* ROLLOUT_COMPACT_H */
