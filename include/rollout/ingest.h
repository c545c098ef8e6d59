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
 * Sort the rows by key (keeping the last version of each key), write them as
 * a segment stamped with stamp, and upload it as ingest/<shard>.<uuid>.seg.
 * Memory stays bounded (work_mem; the sort spills to temporary files).
 */
extern WalIngestRef *ingest_stage_rows(RolloutStore *store, StoreRowReader next,
									   void *arg, int64 stamp);

/*
 * The same without the upload: sort and deduplicate the rows into a segment
 * in the local file path (created).  Returns the rows written.
 */
extern int64 ingest_write_sorted(RolloutStore *store, StoreRowReader next,
								 void *arg, int64 stamp, const char *path);

/* The key prefix of this shard's ingest segments, for garbage collection. */
extern char *ingest_key_prefix(RolloutStore *store);

#endif							/* ROLLOUT_INGEST_H */
