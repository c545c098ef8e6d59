/*-------------------------------------------------------------------------
 *
 * scan_snapshot.h
 *		The store snapshot a scan reads, per statement or per transaction
 *		as the isolation level promises (fdw/scan_snapshot.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SCAN_SNAPSHOT_H
#define ROLLOUT_SCAN_SNAPSHOT_H

#include "nodes/execnodes.h"

#include "rollout/snapshot.h"

/* Register the transaction-end callback, once from _PG_init. */
extern void rollout_scan_snapshot_init(void);

/*
 * The snapshot of store for a scan of the query estate: the transaction's
 * (REPEATABLE READ, SERIALIZABLE) or the statement's (READ COMMITTED: of
 * every query that runs under estate's Snapshot), taken now if this is the
 * first read of the store in that scope.
 */
extern RolloutSnapshot *rollout_scan_snapshot(RolloutStore *store,
											  bool all_wal_tails,
											  EState *estate);

/*
 * A scan found an object of its snapshot gone.  In READ COMMITTED the
 * snapshot is dropped so that the next rollout_scan_snapshot takes a fresh
 * one; a transaction-wide snapshot cannot be retaken: ERROR (a
 * serialization failure).
 */
extern void rollout_scan_snapshot_vanished(RolloutStore *store,
										   bool all_wal_tails,
										   EState *estate);

#endif							/* ROLLOUT_SCAN_SNAPSHOT_H */
