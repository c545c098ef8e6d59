/*-------------------------------------------------------------------------
 *
 * flush.h
 *		Seal a shard's durable WAL tail into a generation (DESIGN.md §6.4).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_FLUSH_H
#define ROLLOUT_FLUSH_H

#include "rollout/store.h"

/* Define rollout_fdw.flush_max_wal_entries; _PG_init calls this. */
extern void flush_define_settings(void);

typedef struct FlushResult
{
	int64		rows_flushed;	/* rows in the new generations (0: nothing) */
	int64		generation;		/* the newest one's number, or 0 */
	int64		first_position; /* WAL positions they cover */
	int64		last_position;
} FlushResult;

/*
 * Flush this cluster's shard of store: every WAL entry after replay_after up
 * to the first hole becomes a sorted, deduplicated generation (one, or from
 * the WAL tail without the shared-memory writer one per
 * rollout_fdw.flush_max_wal_entries entries), and the shard manifest commits
 * with replay_after = the last position it contains.
 */
extern FlushResult rollout_flush_shard(RolloutStore *store);

#endif							/* ROLLOUT_FLUSH_H */
