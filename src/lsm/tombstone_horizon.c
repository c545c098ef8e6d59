/*-------------------------------------------------------------------------
 *
 * tombstone_horizon.c
 *		Which tombstones a compaction may drop for good.
 *
 * A tombstone exists to hide older versions of its key.  Among a
 * compaction's inputs it already hides them (they are shadowed, and the
 * rewrite drops them), so it is only needed for older versions outside the
 * inputs: in other base fragments, in generations not yet merged, in WAL
 * entries not yet flushed.  The horizon is a stamp that no version outside
 * the inputs is older than; a tombstone below it hides nothing that exists,
 * and dropping it (and with it every trace of its key among the inputs)
 * cannot change what any read returns.  docs/MAINTENANCE.md gives the
 * argument in full; in short, the horizon is the minimum of
 *
 *	 - min_ts of every base fragment that is not an input;
 *	 - for every registered shard, the smallest stamp of its generations not
 *	   yet merged (a generation adopted from an ingest segment has one stamp
 *	   for all its rows);
 *	 - for every registered shard with WAL entries after its replay_after,
 *	   last_stamp + 1: readers never give such an entry less;
 *	 - the time the compaction began, less rollout_fdw.min_gc_grace: a WAL
 *	   entry still in flight, which no listing shows yet, was stamped at most
 *	   half of that before it lands (the shared writer stamps a group right
 *	   before its PUT; a direct commit stamps each attempt anew and gives up
 *	   an attempt after half of min_gc_grace).
 *
 * The caller reads the shard manifests before the base (DESIGN.md §5), so a
 * merge racing with it moves generations into fragments it sees.  Stamps of
 * other clusters come from their clocks (docs/MAINTENANCE.md says what a
 * lagging clock means).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "rollout/grace.h"
#include "rollout/tombstone_horizon.h"
#include "rollout/wal.h"

/*
 * A stamp no version in manifest's shard's WAL after replay_after is older
 * than: PG_INT64_MAX when there is no such entry, else last_stamp + 1 (readers
 * never give an entry after replay_after less, whatever its own stamp; a
 * fence marker or a listing with a hole in it is treated the same).  An empty
 * listing counts only if the manifest is still the newest afterwards: a flush
 * in between may have sealed entries into a generation this caller does not
 * know, and a short grace may have let gc remove them already.
 */
static int64
horizon_of_wal_tail(RolloutStore *store, const ShardManifest *manifest)
{
	ShardManifest *latest;

	if (wal_list_after(store, manifest->shard, manifest->replay_after) != NIL)
		return manifest->last_stamp + 1;
	CHECK_FOR_INTERRUPTS();
	latest = shard_manifest_read_latest(store, manifest->shard);
	if (latest->version != manifest->version)
		return manifest->last_stamp + 1;
	return PG_INT64_MAX;
}

/* The horizon of one shard: its unmerged generations and its WAL tail. */
static int64
horizon_of_shard(RolloutStore *store, const ShardManifest *manifest,
				 const BaseManifest *base)
{
	int64		merged = base_manifest_merged_generation(base, manifest->shard);
	int64		horizon = horizon_of_wal_tail(store, manifest);
	ListCell   *lc;

	foreach(lc, manifest->generations)
	{
		GenerationEntry *generation = lfirst(lc);

		if (generation->number <= merged)
			continue;
		horizon = Min(horizon, generation->stamp > 0 ? generation->stamp : generation->min_ts);
	}
	return horizon;
}

/* The horizon (tombstone_horizon.h); see the file header. */
int64
rollout_tombstone_horizon(RolloutStore *store, List *manifests,
						  const BaseManifest *base, List *inputs,
						  TimestampTz started)
{
	int64		horizon = started - (int64) gc_min_grace_seconds() * USECS_PER_SEC;
	ListCell   *lc;

	foreach(lc, base->fragments)
	{
		FragmentEntry *fragment = lfirst(lc);

		if (!fragment_entry_listed(inputs, fragment->file))
			horizon = Min(horizon, fragment->min_ts);
	}
	foreach(lc, manifests)
		horizon = Min(horizon, horizon_of_shard(store, lfirst(lc), base));
	return horizon;
}
