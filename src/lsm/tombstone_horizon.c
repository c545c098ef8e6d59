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
 *	 - for every registered shard with WAL entries after its replay_after, the
 *	   effective stamp of the first of them that holds rows: stamps only grow
 *	   along positions, and readers never give an entry after replay_after a
 *	   stamp below last_stamp + 1.
 *
 * The caller reads the shard manifests before the base (DESIGN.md §5), so a
 * merge racing with it moves generations into fragments it sees.  A version
 * written after the WAL listing gets a stamp from its writer's clock at
 * commit time, later than the tombstone's on a clock in step with the
 * deleting cluster's (docs/MAINTENANCE.md says what a lagging clock means).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "rollout/tombstone_horizon.h"
#include "rollout/wal.h"

/* Is a fragment with this file name among the inputs? */
static bool
horizon_is_input(List *inputs, const char *file)
{
	ListCell   *lc;

	foreach(lc, inputs)
	{
		if (strcmp(((FragmentEntry *) lfirst(lc))->file, file) == 0)
			return true;
	}
	return false;
}

/*
 * The smallest effective stamp of manifest's shard's WAL entries after
 * replay_after that hold rows, or PG_INT64_MAX when there are none.  Fence
 * markers hold no rows and are skipped.  An entry that vanished between the
 * listing and its read was sealed meanwhile into a generation this caller
 * does not know: the bound then falls back to last_stamp + 1, which holds
 * for every entry after the replay_after read.
 */
static int64
horizon_of_wal_tail(RolloutStore *store, const ShardManifest *manifest)
{
	List	   *entries = wal_list_after(store, manifest->shard, manifest->replay_after);
	int64		floor = manifest->last_stamp + 1;
	ListCell   *lc;

	foreach(lc, entries)
	{
		WalEntryRef *entry = lfirst(lc);
		WalEntryMetadata *metadata;

		CHECK_FOR_INTERRUPTS();
		metadata = wal_read_entry_metadata(store, manifest->shard, entry->key);
		if (metadata == NULL)
			return floor;
		if (strcmp(metadata->kind, "fence") == 0)
			continue;
		return Max(metadata->stamp, floor);
	}
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
						  const BaseManifest *base, List *inputs)
{
	int64		horizon = PG_INT64_MAX;
	ListCell   *lc;

	foreach(lc, base->fragments)
	{
		FragmentEntry *fragment = lfirst(lc);

		if (!horizon_is_input(inputs, fragment->file))
			horizon = Min(horizon, fragment->min_ts);
	}
	foreach(lc, manifests)
		horizon = Min(horizon, horizon_of_shard(store, lfirst(lc), base));
	return horizon;
}
