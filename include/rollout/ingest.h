/*-------------------------------------------------------------------------
 *
 * ingest.h
 *		Large transactions: rows staged as one sorted segment under ingest/,
 *		committed by a WAL entry that names it (DESIGN.md §6.3).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_INGEST_H
#define ROLLOUT_INGEST_H

#include "rollout/wal.h"

/*
 * A callback producing the transaction's rows one by one, values in the
 * store's user-column order; false at the end.  Rows come in commit order:
 * a later row of the same key is the newer version.
 */
typedef bool (*IngestRowReader) (void *arg, Datum *values, bool *isnull);

/*
 * Sort the rows by key (keeping the last version of each key), write them as
 * a segment stamped with stamp, and upload it as ingest/<shard>.<uuid>.seg.
 * Memory stays bounded (work_mem; the sort spills to temporary files).
 */
extern WalIngestRef *ingest_stage_rows(RolloutStore *store, IngestRowReader next,
									   void *arg, int64 stamp);

/*
 * The same without the upload: sort and deduplicate the rows into a segment
 * in the local file path (created).  Returns the rows written.
 */
extern int64 ingest_write_sorted(RolloutStore *store, IngestRowReader next,
								 void *arg, int64 stamp, const char *path);

/* The key prefix of this shard's ingest segments, for garbage collection. */
extern char *ingest_key_prefix(RolloutStore *store);

#endif							/* ROLLOUT_INGEST_H */
