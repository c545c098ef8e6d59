/*-------------------------------------------------------------------------
 *
 * row_source_internal.h
 *		A row source's state, shared by row_source.c (reading) and
 *		prefetch.c (fetching ahead); private to the read layer.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_ROW_SOURCE_INTERNAL_H
#define ROLLOUT_ROW_SOURCE_INTERNAL_H

#include "rollout/read_cache.h"
#include "rollout/row_source.h"

typedef struct RowRef
{
	int			group;
	int64		row;
} RowRef;

/*
 * Bytes fetched ahead for other sources and not yet read, at most: row
 * groups of compressed column chunks, a few MB each at most (the writer cuts
 * groups at 16 MB raw), so many sources fit.
 */
#define PREFETCH_BUDGET		((int64) 64 * 1024 * 1024)

/* prefetched_group of a WAL entry whose row groups were all fetched */
#define PREFETCHED_ALL_GROUPS	(-2)

struct RowSourcePrefetcher
{
	RolloutStore *store;
	List	   *sources;		/* RowSource *, open and not yet exhausted */
	int64		outstanding;	/* bytes fetched ahead, not yet read */
	MergeReadStats *stats;
};

struct RowSource
{
	RolloutStore *store;
	SnapshotSource *meta;
	SegmentReader *reader;
	RowSourcePrefetcher *prefetcher;	/* or NULL */
	int			prefetched_group;	/* fetched ahead: a group, ALL or -1 */
	int64		prefetched_bytes;
	const KeyRange *range;
	bool	   *want;			/* requested + key + hidden columns */
	bool	   *defer;			/* wanted columns decoded late */
	bool		one_row_decode; /* late columns: only the row asked for (a
								 * sorted source of a one-key lookup) */
	MergeReadStats *stats;
	MemoryContext context;		/* lives as long as the source */
	MemoryContext group_context;	/* reset per row group (sorted mode) */

	bool		sorted;
	bool		exhausted;

	/* sorted mode: the current row group and row */
	int			group;
	SegmentRowGroup rows;
	int64		row;
	bool		group_in_range; /* its zone map lies inside the key range: no
								 * row needs the range checked */

	/* unsorted mode: every row group, and the surviving rows in key order */
	bool		loaded;			/* loaded at the first row_source_next */
	SegmentRowGroup *groups;
	int			group_count;
	RowRef	   *order;
	int64		order_count;
	int64		cursor;

	/* WAL entries: the effective stamp replaces the stored _ts */
	bool		has_stamp;
	bool		dead;			/* a dead WAL entry
								 * (row_source_wal_entry_dead) */
	int64		stamp;

	bool		has_previous_key;
	Datum		previous_key;	/* in the current group, or previous_key_copy */
	void	   *previous_key_copy;

	/*
	 * Sorted mode: the row groups the merge's zone maps rule out
	 * (merge_iterator.c), or NULL for none.
	 */
	bool	   *zone_skipped;
};

/*
 * The row group a sorted source reads after `after`: the next one whose key
 * zone map overlaps the range, or -1 when none is left (row_source.c).
 */
extern int	row_source_upcoming_group(RowSource *source, int after);

/*
 * A source is about to read `group` (or, with PREFETCHED_ALL_GROUPS, all its
 * groups): account for what was fetched for it, or fetch it now together
 * with what the other sources need next (prefetch.c).
 */
extern void row_source_take_prefetched(RowSource *source, int group);

/* rollout_fdw.use_zone_maps (row_source.c) */
extern bool row_source_zone_maps_enabled(void);

/*
 * Add what the disk cache served and fetched since *before to the store's
 * rollout_stat_stores row (row_source.c).
 */
extern void row_source_count_cache_reads(RolloutStore *store,
										 const ReadCacheCounters *before);

#endif							/* ROLLOUT_ROW_SOURCE_INTERNAL_H */
