/*-------------------------------------------------------------------------
 *
 * observe.h
 *		What a store holds, cheaply from metadata or exactly by reading it
 *		(lsm/observe.c, rollout_observe).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_OBSERVE_H
#define ROLLOUT_OBSERVE_H

#include "rollout/store.h"

typedef struct ObserveResult
{
	int64		row_count;		/* cheap: from metadata only */
	bool		exact_known;
	int64		exact_row_count;
	int64		base_rows;
	int			fragments;
	int			generations;	/* pending (not yet merged), all shards */
	int64		generation_rows;
	bool		unflushed_known;
	int64		unflushed_rows;
	int			wal_entries;	/* unflushed WAL entries: this cluster's, or
								 * every shard's with all_wal_tails */
	int64		bytes;
	int64		base_version;
	int64		writer_epoch;
} ObserveResult;

/*
 * Observe store: counts from manifests and footers, and with exact the
 * deduplicated row count of a full read.  all_wal_tails counts every
 * shard's unflushed WAL entries, not only this cluster's.
 */
extern ObserveResult rollout_observe_store(RolloutStore *store, bool exact,
										   bool all_wal_tails);

#endif							/* ROLLOUT_OBSERVE_H */
