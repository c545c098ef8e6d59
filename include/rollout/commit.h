/*-------------------------------------------------------------------------
 *
 * commit.h
 *		A transaction's rows into a store: the one commit entry point, and
 *		the same rows as a source of the transaction's own scans
 *		(lsm/commit.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_COMMIT_H
#define ROLLOUT_COMMIT_H

#include "rollout/snapshot.h"
#include "rollout/store.h"

/* Define rollout_fdw.ingest_threshold (from _PG_init). */
extern void commit_define_settings(void);

/*
 * Make the rows next produces (table values in the store's user-column
 * order, in commit order: a later row of a key is its newer version) durable
 * as one WAL entry of the store.  size is the bytes they take buffered,
 * spilled whether the buffer spilled to disk: both choose between putting
 * the rows into the entry and staging an ingest segment.  With truncate the
 * entry also carries the transaction's TRUNCATE (it may then hold no row).
 * ERROR if they could not be made durable; then nothing of them is visible.
 */
extern void rollout_commit_rows(RolloutStore *store, StoreRowReader next,
								void *arg, int64 size, bool spilled,
								bool truncate);

/*
 * The rows next produces (rows of them), not committed yet, as a snapshot
 * source newer than anything committed: a row blob, or, when spilled, a
 * sorted segment in a scratch file removed with CurrentMemoryContext.
 */
extern SnapshotSource *rollout_uncommitted_rows_source(RolloutStore *store,
													   StoreRowReader next,
													   void *arg, bool spilled,
													   int64 rows);

#endif							/* ROLLOUT_COMMIT_H */
