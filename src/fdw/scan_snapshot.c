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
 *	- in READ COMMITTED every scan of a store in one statement (a self-join,
 *	  a subquery) reads the same snapshot, taken at the statement's first
 *	  read of it, and the next statement takes a new one.  So do the queries
 *	  of the STABLE functions the statement calls, as with heap tables:
 *	  PostgreSQL runs them under the very Snapshot the statement's EState
 *	  registered, so an entry is found by that Snapshot (es_snapshot), not
 *	  by the EState, which every call of a function that is not inlined
 *	  makes anew.  A VOLATILE function's queries run under new Snapshots,
 *	  and so read new store snapshots.
 * The rows the transaction wrote itself are not part of the snapshot: each
 * scan adds those it may see (xact_buffer.c).
 *
 * A snapshot is identified by the store handle's access fingerprint (the
 * location and the credentials it reads with), the store's name, this
 * cluster's shard and whether it reads other shards' WAL tails, so that a
 * snapshot is never shared across credentials (after SET ROLE) or shards.
 *
 * Whose memory a READ COMMITTED entry lives in is the hard part: a
 * function's EState may take the entry first and end long before the
 * statement does, and the statement may retake the snapshot inside a
 * function.  So each entry has a memory context of its own, under
 * TopTransactionContext, which holds every snapshot it ever took, and it
 * pins its Snapshot (a registration on TopTransactionResourceOwner): the
 * pointer cannot name another Snapshot while the entry lives.  An entry is
 * freed once nobody but its entries holds the Snapshot any more: checked
 * when a query ends (ExecutorEnd: the statement's own, or a function's query
 * the planner ran), when a scan takes a snapshot, and at the latest when the
 * transaction ends.  So a session idle in its transaction holds no Snapshot
 * back, as PostgreSQL's own READ COMMITTED statements do not.  An EState
 * without a copied Snapshot (none is known to reach a scan) keeps a snapshot
 * of its own, in its memory, as all of them did before.
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
#include "executor/executor.h"
#include "lib/ilist.h"
#include "tcop/pquery.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "rollout/fdw.h"
#include "rollout/scan_snapshot.h"
#include "rollout/store_snapshot.h"

/* What the scans sharing one snapshot have in common. */
typedef enum SnapshotScope
{
	SCOPE_TRANSACTION,			/* REPEATABLE READ, SERIALIZABLE */
	SCOPE_STATEMENT,			/* READ COMMITTED: one pinned Snapshot */
	SCOPE_QUERY					/* READ COMMITTED, Snapshot not pinnable: one
								 * EState */
} SnapshotScope;

/* One snapshot shared by the scans of one scope. */
typedef struct ScopedSnapshot
{
	dlist_node	node;			/* in scoped_snapshots while linked */
	bool		linked;
	MemoryContextCallback forget;	/* unlinks the node with its memory */
	SnapshotScope scope;
	MemoryContext memory;		/* holds the entry and its snapshots */
	const void *owner;			/* statement: its Snapshot (pinned); query:
								 * its es_query_cxt; transaction: NULL */
	char		fingerprint[OBJSTORE_FINGERPRINT_LEN];
	uint64		read_digest;	/* the snapshot holds rows decoded with it */
	char	   *store_name;
	char	   *shard;
	bool		all_wal_tails;
	RolloutSnapshot *snapshot;
} ScopedSnapshot;

/* Every live scoped snapshot; each lives in (and dies with) its memory. */
static dlist_head scoped_snapshots = DLIST_STATIC_INIT(scoped_snapshots);

static ExecutorEnd_hook_type prev_executor_end = NULL;

static void
scoped_snapshot_unlink(ScopedSnapshot *entry)
{
	if (entry->linked)
		dlist_delete(&entry->node);
	entry->linked = false;
}

static void
scoped_snapshot_forget(void *arg)
{
	scoped_snapshot_unlink((ScopedSnapshot *) arg);
}

/*
 * How many statement entries pin snapshot: each holds one registration of
 * it, so the Snapshot is otherwise unused when its registrations are just
 * these and nobody has it active.
 */
static int
statement_snapshot_pins(const void *snapshot)
{
	dlist_iter	iter;
	int			pins = 0;

	dlist_foreach(iter, &scoped_snapshots)
	{
		ScopedSnapshot *entry = dlist_container(ScopedSnapshot, node, iter.cur);

		if (entry->scope == SCOPE_STATEMENT && entry->owner == snapshot)
			pins++;
	}
	return pins;
}

/*
 * Free the entries of statements that have ended: no query runs under their
 * Snapshot any more, so no scan can hold what they took.  ending, when not
 * NULL, is the Snapshot of a query that is ending: its QueryDesc still holds
 * ending_registrations of it (its own, and the running portal's hold of it
 * for a utility statement such as EXECUTE or EXPLAIN), and the portal or
 * function running it may still have it active (to run a next query under
 * it, which then takes a store snapshot of its own).  Every other query
 * under it holds an EState registration, so none is running.  The pin is
 * given back last, so that the Snapshot pointer stays unique while an entry
 * names it.
 */
static void
scan_snapshot_release_ended(Snapshot ending, uint32 ending_registrations)
{
	dlist_mutable_iter iter;

	dlist_foreach_modify(iter, &scoped_snapshots)
	{
		ScopedSnapshot *entry = dlist_container(ScopedSnapshot, node, iter.cur);
		Snapshot	snapshot = (Snapshot) entry->owner;
		bool		is_ending = (snapshot == ending);

		if (entry->scope != SCOPE_STATEMENT ||
			snapshot->active_count > (is_ending ? 1 : 0) ||
			snapshot->regd_count > (uint32) statement_snapshot_pins(snapshot) +
			(is_ending ? ending_registrations : 0))
			continue;
		scoped_snapshot_unlink(entry);
		MemoryContextDelete(entry->memory);
		UnregisterSnapshotFromOwner(snapshot, TopTransactionResourceOwner);
	}
}

/*
 * ExecutorEnd: a query ends.  Its statement's entries go now unless another
 * query still runs under the Snapshot (the caller of a STABLE function, an
 * open cursor); so does any entry of a Snapshot nobody holds any more (one a
 * function took while the planner ran it).  The pins so never outlive the
 * statement, and are gone before a portal or function that runs several
 * queries under one Snapshot changes its command id for the next (which
 * PostgreSQL allows only while nobody has it registered).
 */
static void
scan_snapshot_executor_end(QueryDesc *query)
{
	Snapshot	snapshot = query->snapshot;
	uint32		registrations = 1;	/* the QueryDesc's */

	if (prev_executor_end)
		prev_executor_end(query);
	else
		standard_ExecutorEnd(query);
	if (dlist_is_empty(&scoped_snapshots))
		return;
	if (ActivePortal != NULL && ActivePortal->holdSnapshot == snapshot)
		registrations++;
	scan_snapshot_release_ended(snapshot, registrations);
}

/*
 * At the end of the transaction every statement entry lets go of its
 * Snapshot (at commit by giving the pin back, before the resource owner
 * would warn of a leak; at abort the resource owner releases it) and leaves
 * the list, so that nothing looks at a Snapshot the transaction freed.  The
 * memory goes with TopTransactionContext.
 */
static void
scan_snapshot_xact_callback(XactEvent event, void *arg)
{
	dlist_mutable_iter iter;
	bool		unpin;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			unpin = true;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			unpin = false;
			break;
		default:
			return;
	}
	dlist_foreach_modify(iter, &scoped_snapshots)
	{
		ScopedSnapshot *entry = dlist_container(ScopedSnapshot, node, iter.cur);

		if (entry->scope != SCOPE_STATEMENT)
			continue;
		scoped_snapshot_unlink(entry);
		if (unpin)
			UnregisterSnapshotFromOwner((Snapshot) entry->owner,
										TopTransactionResourceOwner);
	}
}

/* See scan_snapshot.h. */
void
rollout_scan_snapshot_init(void)
{
	RegisterXactCallback(scan_snapshot_xact_callback, NULL);
	prev_executor_end = ExecutorEnd_hook;
	ExecutorEnd_hook = scan_snapshot_executor_end;
}

/*
 * The scope of a scan's snapshot under the current isolation level, and its
 * owner (see ScopedSnapshot).
 */
static SnapshotScope
scan_snapshot_scope(EState *estate, const void **owner)
{
	if (IsolationUsesXactSnapshot())
	{
		*owner = NULL;
		return SCOPE_TRANSACTION;
	}
	if (estate->es_snapshot != InvalidSnapshot && estate->es_snapshot->copied)
	{
		*owner = estate->es_snapshot;
		return SCOPE_STATEMENT;
	}
	*owner = estate->es_query_cxt;
	return SCOPE_QUERY;
}

/*
 * The live entry of scope and owner for store, matched on everything that
 * identifies a snapshot (see the file header), or NULL.  The list holds one
 * entry per store read in each live scope, so a linear search serves.
 */
static ScopedSnapshot *
scan_snapshot_find(RolloutStore *store, bool all_wal_tails,
				   SnapshotScope scope, const void *owner)
{
	dlist_iter	iter;

	dlist_foreach(iter, &scoped_snapshots)
	{
		ScopedSnapshot *entry = dlist_container(ScopedSnapshot, node, iter.cur);

		if (entry->scope == scope && entry->owner == owner &&
			entry->all_wal_tails == all_wal_tails &&
			strcmp(entry->fingerprint, store->objstore->access_fingerprint) == 0 &&
			entry->read_digest == store->read_digest &&
			strcmp(entry->store_name, store->name) == 0 &&
			strcmp(entry->shard, store->shard) == 0)
			return entry;
	}
	return NULL;
}

/*
 * A new entry of scope and owner for store, in memory that lives as long as
 * the scope: TopTransactionContext, the query's es_query_cxt, or for a
 * statement a context of its own (with the Snapshot pinned).
 */
static ScopedSnapshot *
scan_snapshot_new_entry(RolloutStore *store, bool all_wal_tails,
						SnapshotScope scope, const void *owner, EState *estate)
{
	MemoryContext memory;
	ScopedSnapshot *entry;

	if (scope == SCOPE_TRANSACTION)
		memory = TopTransactionContext;
	else if (scope == SCOPE_QUERY)
		memory = estate->es_query_cxt;
	else
		memory = AllocSetContextCreate(TopTransactionContext,
									   "rollout statement snapshot",
									   ALLOCSET_SMALL_SIZES);
	entry = MemoryContextAllocZero(memory, sizeof(ScopedSnapshot));
	entry->scope = scope;
	entry->memory = memory;
	entry->owner = owner;
	strlcpy(entry->fingerprint, store->objstore->access_fingerprint,
			OBJSTORE_FINGERPRINT_LEN);
	entry->read_digest = store->read_digest;
	entry->store_name = MemoryContextStrdup(memory, store->name);
	entry->shard = MemoryContextStrdup(memory, store->shard);
	entry->all_wal_tails = all_wal_tails;
	entry->forget.func = scoped_snapshot_forget;
	entry->forget.arg = entry;
	MemoryContextRegisterResetCallback(memory, &entry->forget);
	if (scope == SCOPE_STATEMENT)
		RegisterSnapshotOnOwner((Snapshot) owner, TopTransactionResourceOwner);
	dlist_push_tail(&scoped_snapshots, &entry->node);
	entry->linked = true;
	return entry;
}

/*
 * See scan_snapshot.h.  After rollout_scan_snapshot_vanished cleared an
 * entry's snapshot, the same entry gets a fresh one, in the entry's memory:
 * the scans that still read the old one keep it.
 */
RolloutSnapshot *
rollout_scan_snapshot(RolloutStore *store, bool all_wal_tails, EState *estate)
{
	const void *owner;
	SnapshotScope scope = scan_snapshot_scope(estate, &owner);
	ScopedSnapshot *entry;
	MemoryContext oldcontext;

	if (scope == SCOPE_STATEMENT)
		scan_snapshot_release_ended(NULL, 0);
	entry = scan_snapshot_find(store, all_wal_tails, scope, owner);
	if (entry != NULL && entry->snapshot != NULL)
		return entry->snapshot;
	if (entry == NULL)
		entry = scan_snapshot_new_entry(store, all_wal_tails, scope, owner,
										estate);
	oldcontext = MemoryContextSwitchTo(entry->memory);
	entry->snapshot = rollout_snapshot_take(store, all_wal_tails);
	MemoryContextSwitchTo(oldcontext);
	/* the planner's count of the store, renewed for free */
	scan_estimate_note_snapshot(store, all_wal_tails, entry->snapshot);
	return entry->snapshot;
}

/*
 * See scan_snapshot.h.  In READ COMMITTED only the entry forgets the
 * snapshot; scans of the statement that already hold it keep it until they
 * find an object gone themselves.
 */
void
rollout_scan_snapshot_vanished(RolloutStore *store, bool all_wal_tails,
							   EState *estate)
{
	const void *owner;
	SnapshotScope scope = scan_snapshot_scope(estate, &owner);
	ScopedSnapshot *entry = scan_snapshot_find(store, all_wal_tails, scope,
											   owner);

	if (scope == SCOPE_TRANSACTION)
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
