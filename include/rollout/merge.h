/*-------------------------------------------------------------------------
 *
 * merge.h
 *		Fold a shard's pending generations into the base table
 *		(lsm/merge.c, DESIGN.md §7.1; protocol in docs/MAINTENANCE.md).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_MERGE_H
#define ROLLOUT_MERGE_H

#include "rollout/store.h"

typedef struct MergeResult
{
	int			generations_merged;
	int64		rows_merged;
	int			fragments_added;
} MergeResult;

/* Define rollout_fdw.merge_max_bytes (from _PG_init). */
extern void merge_define_settings(void);

/*
 * Fold this cluster's oldest pending generations (at most max_generations,
 * 0 = no count limit, and rollout_fdw.merge_max_bytes) into one base
 * fragment.  flush_first seals the WAL tail before reading the manifest.
 */
extern MergeResult rollout_merge_shard(RolloutStore *store, int max_generations,
									   bool flush_first);

#endif							/* ROLLOUT_MERGE_H */
