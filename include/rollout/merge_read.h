/*-------------------------------------------------------------------------
 *
 * merge_read.h
 *		The deduplicating LSM read: a k-way merge by key over the sources of
 *		a snapshot, emitting the newest version of each key.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_MERGE_READ_H
#define ROLLOUT_MERGE_READ_H

#include "rollout/snapshot.h"

/*
 * One end of a key range.  The bound's value may be of another type than
 * the key (a cross-type operator of the key's btree family, such as
 * int8 = int4); compare_proc compares (key, value) in the key's
 * collation-independent order.
 */
typedef struct KeyBound
{
	bool		present;
	bool		inclusive;
	Datum		value;
	FmgrInfo	compare_proc;
	Oid			collation;
} KeyBound;

typedef struct KeyRange
{
	bool		empty;			/* contradictory bounds: nothing matches */
	KeyBound	lower;
	KeyBound	upper;
} KeyRange;

/* Is key inside range? */
extern bool key_range_contains(const KeyRange *range, Datum key);
/* Can [min, max] hold a key of range? */
extern bool key_range_overlaps(const KeyRange *range, Datum min, Datum max);
/* Is key above the range's upper bound? */
extern bool key_range_past_upper(const KeyRange *range, Datum key);

/* What a read did, for EXPLAIN ANALYZE. */
typedef struct MergeReadStats
{
	int			fragments_read;
	int			fragments_skipped;
	int			generations_read;
	int			generations_skipped;
	int			wal_entries_read;
	int			wal_entries_skipped;
	int64		row_groups_read;
	int64		row_groups_skipped;
	int64		versions_read;	/* rows read from all sources */
	int64		transaction_rows_read;	/* of the reading transaction's own */
	int64		prefetch_batches;	/* batches of reads made ahead */
	int64		rows_returned;
	int64		last_wal_stamp; /* effective stamp of the last WAL entry read */
	List	   *ingest_seen;	/* IngestSeen *, when not following them */
} MergeReadStats;

typedef struct MergeRead MergeRead;

/* How a read treats what it meets. */
typedef struct MergeReadOptions
{
	/*
	 * A query drops keys whose newest version is a tombstone; flush and merge
	 * keep them, since they must still hide older versions.
	 */
	bool		keep_tombstones;

	/*
	 * Read the segments that WAL entries of large transactions reference
	 * (ingest/).  A query does; a flush does not (it adopts them as
	 * generations without rewriting, and collects them in ingest_seen).
	 */
	bool		follow_ingest;

	/*
	 * An object of the snapshot may have been removed by garbage collection
	 * since the snapshot was taken.  With vanished == NULL that is an ERROR;
	 * otherwise merge_read_begin returns NULL and sets *vanished, and the
	 * caller takes a fresh snapshot and tries again.
	 */
	bool	   *vanished;
} MergeReadOptions;

/*
 * Begin a read.  want[i] says whether segment schema column i is needed;
 * key and hidden columns are always read.  range may be NULL (everything).
 */
extern MergeRead *merge_read_begin(RolloutStore *store, RolloutSnapshot *snapshot,
								   const bool *want, const KeyRange *range,
								   const MergeReadOptions *options);

/*
 * The next row: values/isnull indexed by segment schema column (only wanted
 * columns are set).  Values stay valid until the next call.  Returns false
 * at the end.
 */
extern bool merge_read_next(MergeRead *read, Datum *values, bool *isnull);

extern const MergeReadStats *merge_read_stats(MergeRead *read);
extern void merge_read_end(MergeRead *read);

/* ---------------------------------------------------------------------
 * Row sources (segment_source.c): one sorted, key-unique stream per object.
 * ---------------------------------------------------------------------
 */
typedef struct RowSource RowSource;

/*
 * The sources of one merge share a prefetcher: a source that needs a row
 * group it does not have fetches it in one batch of concurrent requests with
 * the row group each other source will read next (segment_source.c).
 */
typedef struct RowSourcePrefetcher RowSourcePrefetcher;

extern RowSourcePrefetcher *row_source_prefetcher_create(RolloutStore *store,
														 MergeReadStats *stats);

/* Forget the sources, before they are all closed at the end of a merge. */
extern void row_source_prefetcher_release(RowSourcePrefetcher *prefetcher);

/*
 * Fetch in one batch what the prefetcher's sources read next (and, when
 * needing is not NULL, its row group `group`), within a memory budget.
 */
extern void row_source_prefetch(RowSourcePrefetcher *prefetcher,
								RowSource *needing, int group);

/* Does opening this source read an object (its footer)? */
extern bool row_source_reads_object(const SnapshotSource *meta,
									const KeyRange *range);

/*
 * Open a source; returns NULL when the key range excludes the object (after
 * reading its footer), or when the object does not exist and vanished is
 * not NULL (then *vanished is set; with vanished NULL that is an ERROR).
 * segment is the object's segment source, perhaps with its footer fetched
 * ahead (rollout_segment_sources_prefetch), or NULL to make one.  Nothing
 * but the footer is read: row groups are read by row_source_next, through
 * the prefetcher when it is not NULL.  running_stamp carries the WAL running
 * maximum from one entry of a shard to the next.  For a WAL entry, *ingest
 * receives the ingest references of its metadata (IngestSeen *, with the
 * entry's effective stamp), whether or not the entry itself has rows.
 */
extern RowSource *row_source_open(RolloutStore *store, SnapshotSource *meta,
								  SegmentSource *segment,
								  const bool *want, const KeyRange *range,
								  int64 *running_stamp, MergeReadStats *stats,
								  RowSourcePrefetcher *prefetcher,
								  bool *vanished, List **ingest);
/* Advance to the next row; false at the end. */
extern bool row_source_next(RowSource *source);
/* The current row. */
extern Datum row_source_key(RowSource *source);
extern int64 row_source_ts(RowSource *source);
extern int16 row_source_op(RowSource *source);
extern int64 row_source_shard(RowSource *source);
extern const SnapshotSource *row_source_meta(RowSource *source);
extern void row_source_values(RowSource *source, const bool *want,
							  Datum *values, bool *isnull);
extern void row_source_close(RowSource *source);

#endif							/* ROLLOUT_MERGE_READ_H */
