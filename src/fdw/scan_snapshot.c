/*-------------------------------------------------------------------------
 *
 * scan_snapshot.c
 *		Which snapshot of a store a scan reads: the one PostgreSQL's
 *		isolation level promises.
 *
 * A store snapshot (lsm/snapshot.c) fixes the objects a read sees and
 * copies this cluster's memtable, so it is a consistent cut of the store at
 * one moment.  PostgreSQL promises one such moment per statement in READ
 * COMMITTED and one per transaction in REPEATABLE READ and SERIALIZABLE;
 * pg_dump relies on the latter for a consistent dump.  So:
 *	- in REPEATABLE READ and SERIALIZABLE every scan of a store in the
 *	  transaction reads the snapshot taken at the transaction's first read
 *	  of that store (kept in TopTransactionContext);
 *	- in READ COMMITTED every scan of a store in one query (a self-join, a
 *	  subquery) reads the same snapshot, taken at the query's first read of
 *	  it (kept in the query's memory, es_query_cxt), and the next statement
 *	  takes a new one.
 * The rows the transaction wrote itself are not part of the snapshot: each
 * scan adds those it may see (xact_buffer.c).
 *
 * A snapshot is identified by the store handle's access fingerprint (the
 * location and the credentials it reads with), the store's name, this
 * cluster's shard and whether it reads other shards' WAL tails, so that a
 * snapshot is never shared across credentials (after SET ROLE) or shards.
 *
 * Garbage collection keeps what a snapshot needs for its grace period
 * (DESIGN.md §7.3).  A statement that finds an object gone takes a fresh
 * snapshot; a transaction-wide snapshot cannot be retaken without breaking
 * its promise, so the scan fails with a serialization error the client can
 * retry (rollout_scan_snapshot_vanished).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "lib/ilist.h"
#include "utils/memutils.h"

#include "rollout/fdw.h"
#include "rollout/scan_snapshot.h"
#include "rollout/store_snapshot.h"

/* One snapshot shared by the scans of one scope. */
typedef struct ScopedSnapshot
{
	dlist_node	node;			/* in scoped_snapshots */
	MemoryContextCallback forget;	/* unlinks the node with its memory */
	MemoryContext scope;		/* TopTransactionContext or es_query_cxt */
	char		fingerprint[OBJSTORE_FINGERPRINT_LEN];
	uint64		read_digest;	/* the snapshot holds rows decoded with it */
	char	   *store_name;
	char	   *shard;
	bool		all_wal_tails;
	RolloutSnapshot *snapshot;
} ScopedSnapshot;

/* Every live scoped snapshot; each lives in (and dies with) its scope. */
static dlist_head scoped_snapshots = DLIST_STATIC_INIT(scoped_snapshots);

static void
scoped_snapshot_forget(void *arg)
{
	ScopedSnapshot *entry = arg;

	dlist_delete(&entry->node);
}

/* The scope a scan's snapshot belongs to under the current isolation level. */
static MemoryContext
scan_snapshot_scope(EState *estate)
{
	return IsolationUsesXactSnapshot() ? TopTransactionContext
		: estate->es_query_cxt;
}

/*
 * The live entry of scope for store, matched on everything that identifies a
 * snapshot (see the file header), or NULL.  The list holds one entry per store
 * read in each live scope, so a linear search serves.
 */
static ScopedSnapshot *
scan_snapshot_find(RolloutStore *store, bool all_wal_tails, MemoryContext scope)
{
	dlist_iter	iter;

	dlist_foreach(iter, &scoped_snapshots)
	{
		ScopedSnapshot *entry = dlist_container(ScopedSnapshot, node, iter.cur);

		if (entry->scope == scope && entry->all_wal_tails == all_wal_tails &&
			strcmp(entry->fingerprint, store->objstore->access_fingerprint) == 0 &&
			entry->read_digest == store->read_digest &&
			strcmp(entry->store_name, store->name) == 0 &&
			strcmp(entry->shard, store->shard) == 0)
			return entry;
	}
	return NULL;
}

/*
 * See scan_snapshot.h.  The entry is made once per scope, in the scope's
 * memory, and unlinked by a reset callback when that memory goes; after
 * rollout_scan_snapshot_vanished cleared its snapshot, the same entry gets a
 * fresh one.
 */
RolloutSnapshot *
rollout_scan_snapshot(RolloutStore *store, bool all_wal_tails, EState *estate)
{
	MemoryContext scope = scan_snapshot_scope(estate);
	ScopedSnapshot *entry = scan_snapshot_find(store, all_wal_tails, scope);
	MemoryContext oldcontext;

	if (entry != NULL && entry->snapshot != NULL)
		return entry->snapshot;

	oldcontext = MemoryContextSwitchTo(scope);
	if (entry == NULL)
	{
		entry = palloc0(sizeof(ScopedSnapshot));
		entry->scope = scope;
		strlcpy(entry->fingerprint, store->objstore->access_fingerprint,
				OBJSTORE_FINGERPRINT_LEN);
		entry->read_digest = store->read_digest;
		entry->store_name = pstrdup(store->name);
		entry->shard = pstrdup(store->shard);
		entry->all_wal_tails = all_wal_tails;
		entry->forget.func = scoped_snapshot_forget;
		entry->forget.arg = entry;
		MemoryContextRegisterResetCallback(scope, &entry->forget);
		dlist_push_tail(&scoped_snapshots, &entry->node);
	}
	entry->snapshot = rollout_snapshot_take(store, all_wal_tails);
	MemoryContextSwitchTo(oldcontext);
	/* the planner's count of the store, renewed for free */
	scan_estimate_note_snapshot(store, all_wal_tails, entry->snapshot);
	return entry->snapshot;
}

/*
 * See scan_snapshot.h.  The transaction-wide case is recognized by its scope,
 * TopTransactionContext.  In READ COMMITTED only the entry forgets the
 * snapshot; scans of the query that already hold it keep it until they find an
 * object gone themselves.
 */
void
rollout_scan_snapshot_vanished(RolloutStore *store, bool all_wal_tails,
							   EState *estate)
{
	MemoryContext scope = scan_snapshot_scope(estate);
	ScopedSnapshot *entry = scan_snapshot_find(store, all_wal_tails, scope);

	if (scope == TopTransactionContext)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access to store \"%s\": an object of the transaction's snapshot was removed",
						store->name),
				 errdetail("Garbage collection removed it after the transaction's first read of the store; the snapshot cannot be read any more."),
				 errhint("Retry the transaction. Transactions that read a store should be shorter than its garbage collection grace period.")));
	/* the statement's snapshot is stale: its next scan takes a fresh one */
	if (entry != NULL)
		entry->snapshot = NULL;
}
