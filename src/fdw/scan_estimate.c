/*-------------------------------------------------------------------------
 *
 * scan_estimate.c
 *		The planner's count of a store's rows, from metadata only.
 *
 * A store snapshot already names every source a scan would read and, for
 * all but WAL entries, how many rows each holds (fragment and generation
 * rows are in the manifests, memtable batches count their own).  WAL
 * entries say it only in their footers; a sample of at most
 * ESTIMATE_WAL_FOOTERS of them is read (footers are small, immutable and
 * go through the footer caches), and their mean, ingest segments included,
 * stands for every entry.  No row group is read.
 *
 * The count is of versions, like rollout_observe's cheap count: an upper
 * bound of the rows a scan returns that is exact once merges and a full
 * compaction removed the shadowed versions.  Stores of agent traces and
 * rollouts are mostly appended to, where the two are close.
 *
 * Each backend keeps the last count per store: every scan's snapshot
 * renews it for free (its WAL entries counted at the mean the last sample
 * found, so a scan reads no footer for it), the backend's own commits to a
 * store drop it, and one older than ESTIMATE_MAX_AGE_MS is counted again
 * from a fresh snapshot at the next planning.  So a query planned over and over (a lookup) costs no
 * extra metadata reads, and another session's load shows in the estimates
 * within seconds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "rollout/fdw.h"
#include "rollout/named_snapshot.h"
#include "rollout/store_snapshot.h"
#include "rollout/store_sources.h"
#include "rollout/wal.h"

/* WAL entry footers read for one count, at most */
#define ESTIMATE_WAL_FOOTERS	16

/* how long a count serves the planner before it is taken again */
#define ESTIMATE_MAX_AGE_MS		10000

/* stores remembered per backend, at most (the oldest is forgotten) */
#define ESTIMATE_MAX_STORES		64

/* The last count of one store, identified as scan_snapshot.c does. */
typedef struct StoreEstimateEntry
{
	char		fingerprint[OBJSTORE_FINGERPRINT_LEN];
	char	   *location;
	char	   *store_name;
	char	   *shard;
	bool		all_wal_tails;
	StoreEstimate estimate;
} StoreEstimateEntry;

static List *estimates = NIL;	/* StoreEstimateEntry *, in TopMemoryContext */

static StoreEstimateEntry *
estimate_find(RolloutStore *store, bool all_wal_tails)
{
	ListCell   *lc;

	foreach(lc, estimates)
	{
		StoreEstimateEntry *entry = lfirst(lc);

		if (entry->all_wal_tails == all_wal_tails &&
			strcmp(entry->fingerprint, store->objstore->access_fingerprint) == 0 &&
			strcmp(entry->store_name, store->name) == 0 &&
			strcmp(entry->shard, store->shard) == 0)
			return entry;
	}
	return NULL;
}

/*
 * Count snapshot's rows (see the file header).  WAL entries count
 * wal_entry_rows each when that is >= 0; otherwise a sample of their footers
 * is read.
 */
static StoreEstimate
estimate_from_snapshot(RolloutStore *store, const RolloutSnapshot *snapshot,
					   double wal_entry_rows)
{
	StoreEstimate estimate = {0};
	char	   *keys[ESTIMATE_WAL_FOOTERS];
	int64		sizes[ESTIMATE_WAL_FOOTERS];
	int			wal_entries = 0;
	int			sampled = 0;
	ListCell   *lc;

	foreach(lc, snapshot->sources)
	{
		SnapshotSource *source = lfirst(lc);

		estimate.sources++;
		if (source->kind == SNAPSHOT_WAL_ENTRY)
			wal_entries++;
		else
			estimate.rows += Max(source->rows, 0);
	}

	estimate.wal_entry_rows = wal_entry_rows;
	if (wal_entries > 0 && wal_entry_rows < 0)
	{
		/* every k-th WAL entry, spread over the whole tail */
		int			step = (wal_entries + ESTIMATE_WAL_FOOTERS - 1) / ESTIMATE_WAL_FOOTERS;
		int			index = 0;
		int64		sampled_rows = 0;

		foreach(lc, snapshot->sources)
		{
			SnapshotSource *source = lfirst(lc);

			if (source->kind != SNAPSHOT_WAL_ENTRY)
				continue;
			if (index++ % step == 0 && sampled < ESTIMATE_WAL_FOOTERS)
			{
				keys[sampled] = source->key;
				sizes[sampled++] = source->bytes;
			}
		}
		rollout_segment_footers(store, keys, sizes, sampled,
								wal_entry_count_rows, &sampled_rows);
		estimate.wal_entry_rows = (double) sampled_rows / sampled;
		estimate.wal_sampled_at = GetCurrentTimestamp();
	}
	if (wal_entries > 0)
		estimate.rows += (int64) (estimate.wal_entry_rows * wal_entries + 0.5);
	estimate.counted_at = GetCurrentTimestamp();
	if (wal_entries == 0 && wal_entry_rows < 0)
		estimate.wal_sampled_at = estimate.counted_at;	/* nothing to sample */
	return estimate;
}

/* Remember estimate as store's count. */
static void
estimate_remember(RolloutStore *store, bool all_wal_tails, StoreEstimate estimate)
{
	StoreEstimateEntry *entry = estimate_find(store, all_wal_tails);

	if (entry == NULL)
	{
		MemoryContext oldcontext = MemoryContextSwitchTo(TopMemoryContext);

		if (list_length(estimates) >= ESTIMATE_MAX_STORES)
		{
			StoreEstimateEntry *oldest = linitial(estimates);

			estimates = list_delete_first(estimates);
			pfree(oldest->location);
			pfree(oldest->store_name);
			pfree(oldest->shard);
			pfree(oldest);
		}
		entry = palloc0(sizeof(StoreEstimateEntry));
		strlcpy(entry->fingerprint, store->objstore->access_fingerprint,
				OBJSTORE_FINGERPRINT_LEN);
		entry->location = pstrdup(store->location);
		entry->store_name = pstrdup(store->name);
		entry->shard = pstrdup(store->shard);
		entry->all_wal_tails = all_wal_tails;
		estimates = lappend(estimates, entry);
		MemoryContextSwitchTo(oldcontext);
	}
	entry->estimate = estimate;
}

/*
 * Renew store's count from the snapshot a scan took (fdw.h): only where that
 * reads no footer, that is once a sample gave the rows per WAL entry or when
 * there are no WAL entries.
 */
void
scan_estimate_note_snapshot(RolloutStore *store, bool all_wal_tails,
							const RolloutSnapshot *snapshot)
{
	StoreEstimateEntry *entry = estimate_find(store, all_wal_tails);
	double		wal_entry_rows = entry ? entry->estimate.wal_entry_rows : -1;
	StoreEstimate estimate;
	ListCell   *lc;

	/* a mean sampled too long ago is not carried on: the planner samples anew */
	if (wal_entry_rows >= 0 &&
		TimestampDifferenceExceeds(entry->estimate.wal_sampled_at,
								   GetCurrentTimestamp(), ESTIMATE_MAX_AGE_MS))
		wal_entry_rows = -1;
	if (wal_entry_rows < 0)
	{
		foreach(lc, snapshot->sources)
		{
			if (((SnapshotSource *) lfirst(lc))->kind == SNAPSHOT_WAL_ENTRY)
				return;
		}
	}
	estimate = estimate_from_snapshot(store, snapshot, wal_entry_rows);
	if (entry != NULL)
		estimate.wal_sampled_at = entry->estimate.wal_sampled_at;
	estimate_remember(store, all_wal_tails, estimate);
}

/*
 * The count of store's rows for the planner (fdw.h): the remembered one
 * while it is young enough, else one from a fresh snapshot, taken in a
 * memory context of its own.
 */
StoreEstimate
scan_estimate_get(RolloutStore *store, bool all_wal_tails)
{
	StoreEstimateEntry *entry = estimate_find(store, all_wal_tails);
	MemoryContext context;
	MemoryContext oldcontext;

	if (entry != NULL &&
		!TimestampDifferenceExceeds(entry->estimate.counted_at,
									GetCurrentTimestamp(), ESTIMATE_MAX_AGE_MS))
		return entry->estimate;

	context = AllocSetContextCreate(CurrentMemoryContext, "rollout estimate",
									ALLOCSET_DEFAULT_SIZES);
	oldcontext = MemoryContextSwitchTo(context);
	estimate_remember(store, all_wal_tails,
					  estimate_from_snapshot(store,
											 rollout_snapshot_take_for_counting(store, all_wal_tails),
											 -1));
	MemoryContextSwitchTo(oldcontext);
	MemoryContextDelete(context);
	return estimate_find(store, all_wal_tails)->estimate;
}

/*
 * The count of the rows scans of a table read (fdw.h): those of the named
 * snapshot as_of when it is set, else the store's (scan_estimate_get).  A
 * table pinned to a snapshot may be what a role was granted instead of the
 * live store, so nothing of the live store may show in its plans.  A
 * snapshot is never renewed, so its count is taken whenever asked (its
 * manifests come from the manifest cache); a token that is not valid, not
 * of this store or expired gives an unknown count, and the scan, not the
 * planner, says what is wrong with it.
 */
StoreEstimate
scan_estimate_get_as_of(RolloutStore *store, bool all_wal_tails,
						const char *as_of)
{
	StoreEstimate estimate = {ROLLOUT_UNKNOWN_ROWS, 1, -1, 0, 0};
	RolloutSnapshot *snapshot;
	MemoryContext context;
	MemoryContext oldcontext;

	if (as_of == NULL)
		return scan_estimate_get(store, all_wal_tails);
	context = AllocSetContextCreate(CurrentMemoryContext, "rollout estimate",
									ALLOCSET_DEFAULT_SIZES);
	oldcontext = MemoryContextSwitchTo(context);
	snapshot = named_snapshot_try_read(store, as_of);
	if (snapshot != NULL)
		estimate = estimate_from_snapshot(store, snapshot, -1);
	MemoryContextSwitchTo(oldcontext);
	MemoryContextDelete(context);
	return estimate;
}

/*
 * The count of the rows of a named snapshot the caller has read already
 * (fdw.h), for ANALYZE, which reads the snapshot it samples anyway.  What
 * counting it allocates goes into the caller's memory context.
 */
StoreEstimate
scan_estimate_of_named_snapshot(RolloutStore *store,
								const RolloutSnapshot *snapshot)
{
	return estimate_from_snapshot(store, snapshot, -1);
}

/*
 * Forget what was counted of store (fdw.h): this backend just committed
 * rows to it, and its next plan should see them, whatever credentials it
 * plans with.
 */
void
scan_estimate_forget(RolloutStore *store)
{
	ListCell   *lc;

	foreach(lc, estimates)
	{
		StoreEstimateEntry *entry = lfirst(lc);

		if (strcmp(entry->location, store->location) == 0 &&
			strcmp(entry->store_name, store->name) == 0 &&
			strcmp(entry->shard, store->shard) == 0)
			entry->estimate.counted_at = 0;
	}
}
