/*-------------------------------------------------------------------------
 *
 * xact_buffer.h
 *		Rows written by the current transaction, made durable at commit.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_XACT_BUFFER_H
#define ROLLOUT_XACT_BUFFER_H

#include "executor/tuptable.h"
#include "utils/relcache.h"

#include "rollout/snapshot.h"
#include "rollout/store.h"

/* Define rollout_fdw.transaction_buffer_size (from _PG_init). */
extern void xact_buffer_define_settings(void);

/* Register the transaction callbacks (from _PG_init). */
extern void xact_buffer_init(void);

/*
 * Buffer one row written to rel (a rollout table backed by store) by the
 * command cid (the statement's es_output_cid): a new version (op
 * ROLLOUT_OP_INSERT) or a tombstone of the slot's key (ROLLOUT_OP_DELETE,
 * the other columns null).
 */
extern void xact_buffer_add_row(Relation rel, RolloutStore *store,
								TupleTableSlot *slot, CommandId cid, int16 op);

/*
 * Buffer a TRUNCATE of rel by the command cid: the rows buffered before it
 * are dead, and the commit's WAL entry will hide every version committed
 * before it (its truncate cut).
 */
extern void xact_buffer_add_truncate(Relation rel, RolloutStore *store,
									 CommandId cid);

/*
 * The rows this transaction inserted into rel before command curcid (after
 * the last TRUNCATE among those commands, if any), as a scan source newer
 * than anything committed; NULL when there are none.  *truncated: such a
 * TRUNCATE exists, and the scan must see nothing committed.
 */
extern SnapshotSource *xact_buffer_scan_source(Relation rel, RolloutStore *store,
											   CommandId curcid, bool *truncated);

#endif							/* ROLLOUT_XACT_BUFFER_H */
