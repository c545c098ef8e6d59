/*-------------------------------------------------------------------------
 *
 * row_source.h
 *		One object of a snapshot as a stream of rows sorted by key, each key
 *		at most once: the input of the k-way merge (read/row_source.c), and
 *		the prefetcher its sources share (read/prefetch.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_ROW_SOURCE_H
#define ROLLOUT_ROW_SOURCE_H

#include "rollout/key_range.h"
#include "rollout/snapshot.h"

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
	int			key_filter_skipped; /* objects, of those skipped, by their key
									 * filter */
	int64		zone_map_skipped;	/* row groups, of those skipped, by zone
									 * maps */
	int64		versions_read;	/* rows read from all sources */
	int64		chunks_deferred;	/* column chunks read, decoded late */
	int64		chunks_decoded_late;	/* of those, decoded after all */
	int64		pages_decoded_late; /* their pages decoded */
	int64		rows_filtered;	/* winners the pushed-down conditions dropped */
	int64		transaction_rows_read;	/* of the reading transaction's own */
	int64		prefetch_batches;	/* batches of reads made ahead */
	int64		rows_returned;
	int64		tombstones_dropped; /* below drop_tombstones_before */
	int64		last_wal_stamp; /* effective stamp of the last WAL entry read */
	int64		last_wal_epoch; /* the running epoch after the last one */
	int			wal_dead_skipped;	/* dead WAL entries read as empty */
	int64		wal_truncate_stamp; /* the newest truncate cut of the WAL
									 * entries opened (0: none) */
	int64		rows_truncated; /* winners below the read's truncate cut */
	List	   *ingest_seen;	/* IngestSeen *, when not following them */
} MergeReadStats;

typedef struct RowSource RowSource;

/*
 * What a read carries from one WAL entry of a shard to the next, in position
 * order: the running maximum of their stamps (DESIGN.md §6.2) and of their
 * epochs, and the shard they belong to.  An entry whose epoch is below the
 * running one is dead: the leftover of a writer fenced with entries in
 * flight, never acknowledged (docs/WRITER.md, "Pipelined WAL writes").
 */
typedef struct WalRunning
{
	int64		stamp;
	int64		epoch;
	const char *shard;			/* of the entries the epoch is about */
} WalRunning;

/* Define rollout_fdw.use_key_filters and decode_late (from _PG_init). */
extern void row_source_define_settings(void);

/*
 * The sources of one merge share a prefetcher: a source that needs a row
 * group it does not have fetches it in one batch of concurrent requests with
 * the row group each other source will read next (read/prefetch.c).
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
 * Did a read made ahead for the source's object find it gone (a footer from
 * the footer cache is not proof that the object still exists)?
 */
extern bool row_source_object_missing(RowSource *source);

/*
 * Open a source; returns NULL when the key range excludes the object (after
 * reading its footer), or when the object does not exist and vanished is
 * not NULL (then *vanished is set; with vanished NULL that is an ERROR).
 * segment is the object's segment source, perhaps with its footer fetched
 * ahead (rollout_segment_sources_prefetch), or NULL to make one.  Nothing
 * but the footer is read: row groups are read by row_source_next, through
 * the prefetcher when it is not NULL.  running carries the WAL running
 * maxima from one entry of a shard to the next.  For a WAL entry, *ingest
 * receives the ingest references of its metadata (IngestSeen *, with the
 * entry's effective stamp), whether or not the entry itself has rows; a dead
 * entry is skipped (NULL) and names none.
 */
extern RowSource *row_source_open(RolloutStore *store, SnapshotSource *meta,
								  SegmentSource *segment,
								  const bool *want, const KeyRange *range,
								  WalRunning *running, MergeReadStats *stats,
								  RowSourcePrefetcher *prefetcher,
								  bool *vanished, List **ingest);

/* Advance to the next row; false at the end. */
extern bool row_source_next(RowSource *source);

/*
 * Where the current row sits in its source: its row group in the high 32
 * bits, its row divided by rows_per_cluster in the low ones.
 */
extern uint64 row_source_cluster(RowSource *source, int rows_per_cluster);

/* The current row. */
extern Datum row_source_key(RowSource *source);
extern int64 row_source_ts(RowSource *source);
extern int16 row_source_op(RowSource *source);
extern int64 row_source_shard(RowSource *source);
extern const SnapshotSource *row_source_meta(RowSource *source);
extern Datum row_source_column(RowSource *source, int column, bool *isnull);
extern bool row_source_column_is_null(RowSource *source, int column);
extern void row_source_values(RowSource *source, const bool *want,
							  Datum *values, bool *isnull);
extern void row_source_close(RowSource *source);

#endif							/* ROLLOUT_ROW_SOURCE_H */
