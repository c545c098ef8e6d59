/*-------------------------------------------------------------------------
 *
 * rewrite.h
 *		Merge a set of sorted sources into new sorted, deduplicated segments:
 *		the common core of flush, merge and compaction.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_REWRITE_H
#define ROLLOUT_REWRITE_H

#include "rollout/manifest.h"
#include "rollout/merge_read.h"

/* One output segment, written to a local scratch file. */
typedef struct RewriteOutput
{
	char	   *path;			/* local scratch file */
	SegmentWriteSummary summary;
	int64		min_ts;
	int64		max_ts;
} RewriteOutput;

/*
 * Ranges of one column to spread a rewrite's rows over (cluster_ranges.h):
 * a row whose value v has i boundaries <= v goes to range i, a NULL to
 * range boundary_count + 1.  Each range has outputs of its own, every one
 * sorted by key.
 *
 * Each open output buffers a row group, so a rewrite writes at most
 * REWRITE_MAX_OPEN_OUTPUTS ranges at once.  With more ranges it reads its
 * sources once per group of that many, with a condition that only the
 * group's rows pass (so the others' wide columns are never decoded), and
 * once more for the NULLs.  Those passes cannot count what the rewrite
 * reads and drops; the pass that chose the ranges, which reads with the
 * rewrite's options, counted it, and the passes must together write
 * exactly the rows it saw.
 */
#define REWRITE_MAX_OPEN_OUTPUTS	16

typedef struct RewriteClusters
{
	int			column;			/* index in the store's schema */
	int			boundary_count;
	Datum	   *boundaries;		/* ascending, distinct */
	int64		rows;			/* the rewrite's rows, NULLs included */
	int64		null_rows;		/* of which NULL in the column */
	int64		versions_read;	/* of the sources, by the choosing pass */
	int64		tombstones_dropped; /* below the tombstone horizon */
} RewriteClusters;

typedef struct RewriteResult
{
	List	   *outputs;		/* RewriteOutput * */
	int64		rows_written;
	int64		versions_read;	/* rows read from all sources */
	int64		tombstones_dropped; /* below drop_tombstones_before */
	int64		last_wal_stamp; /* effective stamp of the last WAL entry read */
	int64		last_wal_epoch; /* the running epoch after it */
	int64		truncate_stamp; /* the newest truncate cut of the WAL entries
								 * read (0: none) */
	List	   *ingest_seen;	/* IngestSeen *, when not following ingest */
	TimestampTz upload_started_at;	/* set by the caller as it starts the
									 * upload of an output: a store may date
									 * the object from then */
} RewriteResult;

/*
 * Merge the sources of snapshot by key (newest version wins, tombstones
 * kept, except those with _ts < drop_tombstones_before; 0 keeps all; keys
 * below the snapshot's or the WAL entries' truncate cut left out) into
 * segments of at most rows_per_output rows each (0: one segment); with
 * clusters, the rows of each of its ranges into segments of their own.
 * Each output carries metadata as its footer metadata.  Unless follow_ingest, the
 * ingest segments named by WAL entries are not read but reported in
 * result->ingest_seen.  The caller provides a zeroed *result before its
 * PG_TRY, uploads the files, and must call rewrite_cleanup(result) on every
 * path.
 */
extern void rewrite_sources(RolloutStore *store, RolloutSnapshot *snapshot,
							int64 rows_per_output,
							const RewriteClusters *clusters,
							const char *metadata,
							bool follow_ingest, int64 drop_tombstones_before,
							RewriteResult *result);

/* Remove the scratch files of a rewrite (safe to call more than once). */
extern void rewrite_cleanup(RewriteResult *result);

/* The base-manifest entry of an uploaded output, stored at key. */
extern FragmentEntry *rollout_fragment_entry(const char *key,
											 const RewriteOutput *output);

#endif							/* ROLLOUT_REWRITE_H */
