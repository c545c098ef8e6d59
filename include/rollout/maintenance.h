/*-------------------------------------------------------------------------
 *
 * maintenance.h
 *		Merge, compaction, garbage collection and observation of a store
 *		(DESIGN.md §7).  The protocols and their crash-safety argument are in
 *		docs/MAINTENANCE.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_MAINTENANCE_H
#define ROLLOUT_MAINTENANCE_H

#include "rollout/manifest.h"

/* ---- merge.c ---- */
typedef struct MergeResult
{
	int			generations_merged;
	int64		rows_merged;
	int			fragments_added;
} MergeResult;

/*
 * Fold this cluster's oldest pending generations (at most max_generations,
 * 0 = no count limit, and rollout_fdw.merge_max_bytes) into one base
 * fragment.  flush_first seals the WAL tail before reading the manifest.
 */
extern MergeResult rollout_merge_shard(RolloutStore *store, int max_generations,
									   bool flush_first);

/* ---- compact.c ---- */
typedef struct CompactResult
{
	int			fragments_before;
	int			fragments_after;
	int64		rows_written;
	int64		versions_dropped;
	char	   *skipped_reason;	/* NULL when it compacted */
} CompactResult;

extern CompactResult rollout_compact_store(RolloutStore *store, int min_fragments,
										   int64 target_rows_per_fragment,
										   int max_source_fragments);

/* Record a failed compaction in the base manifest (best effort). */
extern void rollout_compaction_record_error(RolloutStore *store, const char *message);

/* ---- gc.c ---- */
typedef struct GcResult
{
	int64		objects_deleted;
	int64		bytes_freed;
} GcResult;

extern GcResult rollout_gc_store(RolloutStore *store, int64 grace_seconds);

/* ---- observe.c ---- */
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
	int			wal_entries;	/* this cluster's unflushed WAL entries */
	int64		bytes;
	int64		base_version;
	int64		writer_epoch;
} ObserveResult;

extern ObserveResult rollout_observe_store(RolloutStore *store, bool exact,
										   bool all_wal_tails);

/* ---- shared by the maintenance protocols (merge.c) ---- */

/* Key of a new base fragment: base/data/<uuid>.seg */
extern char *rollout_key_new_fragment(RolloutStore *store);

/*
 * Has an uploaded but uncommitted output waited so long that garbage
 * collection may already consider it an orphan?  (DESIGN.md §7.3)
 */
extern bool rollout_output_too_old(TimestampTz uploaded_at);

/* The fragment entry for an uploaded rewrite output. */
struct RewriteOutput;
extern FragmentEntry *rollout_fragment_entry(const char *key,
											 const struct RewriteOutput *output);

#endif							/* ROLLOUT_MAINTENANCE_H */
