/*-------------------------------------------------------------------------
 *
 * change_feed.h
 *		A store's change feed: the versions committed after a position, read
 *		by WAL position from generations and WAL entries (lsm/change_feed.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_CHANGE_FEED_H
#define ROLLOUT_CHANGE_FEED_H

#include "rollout/store.h"

/* Where a consumer stands in one shard. */
typedef struct ChangeFeedShard
{
	char	   *shard;
	int64		position;		/* every WAL position <= this is delivered */

	/*
	 * The effective stamp of position (0: none), where a WAL reader after
	 * position starts from it: at or after the shard manifest's replay_after.
	 * Below that no read uses it, and a read cut short by max_rows leaves the
	 * newest stamp it delivered whole there.
	 */
	int64		position_stamp;
	int64		epoch;			/* the running writer epoch at position */

	/*
	 * Every version of the shard stamped <= this is delivered too: equal to
	 * position_stamp, or higher when max_rows cut a read after position.
	 */
	int64		delivered_stamp;
} ChangeFeedShard;

/* A consumer's position: the "cf1:" text rollout_changes hands out. */
typedef struct ChangeFeedPosition
{
	char	   *incarnation;	/* of the store */
	int64		truncate_stamp; /* the newest TRUNCATE cut delivered (0: none) */
	List	   *shards;			/* ChangeFeedShard *, sorted by shard id */
} ChangeFeedPosition;

/* One change, handed to the caller of change_feed_read. */
typedef struct ChangeFeedRow
{
	const char *shard;			/* NULL for a TRUNCATE */
	int64		stamp;			/* the commit's effective stamp */
	int16		op;				/* ROLLOUT_OP_INSERT, _DELETE or _TRUNCATE */
	Datum	   *values;			/* by segment schema column, as stored */
	bool	   *isnull;
} ChangeFeedRow;

typedef void (*ChangeFeedEmit) (void *arg, const ChangeFeedRow *row);

/*
 * The position since names: NULL for the start of every shard, a "cf1:"
 * position, or an "rs1:" named snapshot token (the position just after the
 * snapshot).  ERROR when since is neither, or belongs to another store, or
 * names a snapshot whose manifests are gone.
 */
extern ChangeFeedPosition *change_feed_position_parse(RolloutStore *store,
													  const char *since);

/* The text of a position. */
extern char *change_feed_position_text(const ChangeFeedPosition *position);

/*
 * Emit the changes committed after since, at most max_rows of them unless
 * the first WAL entry alone holds more (an entry is never split), and
 * return the position after them.  want[i] says whether segment schema
 * column i is needed besides the key.  A key written several times after
 * since comes once, as its newest version; a deleted key as a
 * ROLLOUT_OP_DELETE row; a TRUNCATE as one ROLLOUT_OP_TRUNCATE row, before
 * which every older version is gone.  Rows come per shard in key order, not
 * in stamp order.  ERROR (SQLSTATE 72000) when since is older than what
 * garbage collection kept.
 */
extern ChangeFeedPosition *change_feed_read(RolloutStore *store,
											const ChangeFeedPosition *since,
											int64 max_rows, const bool *want,
											ChangeFeedEmit emit, void *arg);

#endif							/* ROLLOUT_CHANGE_FEED_H */
