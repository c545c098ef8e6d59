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

#include "rollout/key_range.h"
#include "rollout/row_filter.h"
#include "rollout/row_source.h"
#include "rollout/snapshot.h"

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
	 * With keep_tombstones, still drop a tombstone winner whose _ts is below
	 * this (0: none): compaction's tombstone horizon, below which no version
	 * outside the read can exist (lsm/tombstone_horizon.c).  The key is then
	 * gone from the output altogether.
	 */
	int64		drop_tombstones_before;

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

	/*
	 * A query's pushed-down conditions, or NULL: a winning version that fails
	 * them is not returned (row_filter.h).
	 */
	const RowFilter *filter;

	/*
	 * A sample of the rows (ANALYZE), or NULL for all of them: a live winner
	 * is returned only when sample(sample_arg, cluster) says so, asked before
	 * any column but its key and version columns is decoded.  A cluster
	 * identifies a run of MERGE_READ_SAMPLE_CLUSTER_ROWS rows of one row
	 * group of one source, which share their pages, so a sample of clusters
	 * decodes few of them.  Every live winner is offered, so the callback
	 * also learns how many rows the read saw.
	 */
	bool		(*sample) (void *sample_arg, uint64 cluster);
	void	   *sample_arg;
} MergeReadOptions;

#define MERGE_READ_SAMPLE_CLUSTER_ROWS	64

/*
 * Begin a read.  want[i] says whether segment schema column i is needed;
 * key and hidden columns are always read.  range may be NULL (everything).
 * A key whose newest version is older than the truncate cut (the newest of
 * snapshot->truncate_stamp and of the WAL entries the read opens) is not
 * returned, tombstones kept or not.
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

/*
 * How many versions the sources the read opened hold (a dead WAL entry
 * none): a bound on the rows it can return, known before the first one.
 */
extern int64 merge_read_versions_held(MergeRead *read);
extern void merge_read_end(MergeRead *read);

#endif							/* ROLLOUT_MERGE_READ_H */
