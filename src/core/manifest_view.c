/*-------------------------------------------------------------------------
 *
 * manifest_view.c
 *		Keep, in shared memory, the newest manifest versions of each store
 *		this cluster touches, so that a snapshot need not list them.
 *
 * A snapshot (store_snapshot.c) must see every shard manifest, and then a
 * base manifest at least as new as anything those depend on (DESIGN.md §5).
 * Listing them costs three requests or more per statement: on S3 or Azure
 * that is most of a key lookup.  But a store's manifests change only when
 * somebody commits a new version, and this cluster knows of its own commits
 * as it makes them.  So each store's slot keeps the versions:
 *	- every version this cluster commits is recorded right after its commit
 *	  (manifest_view_note_*_commit, called by flush, merge, compaction and
 *	  the claim in lsm/), and the memtable drops the batches a flush sealed
 *	  only together with recording its shard manifest (memtable_trim);
 *	- a snapshot that reads the store's manifests publishes what it found,
 *	  with the time it began: the view's refreshed_at;
 *	- a snapshot uses the view instead of listing while refreshed_at is
 *	  younger than rollout_fdw.manifest_refresh_interval (and never longer
 *	  than half the shortest gc grace, rollout_fdw.min_gc_grace, so that the
 *	  objects its versions name are still there).
 * Other clusters' commits therefore reach this cluster's reads at most that
 * interval after they were made; this cluster's own, at once.
 *
 * Why the versions of the view make a correct snapshot.  A set of versions is
 * consistent when the base version holds every generation any of its shard
 * versions dropped (or any version that one was built on): then no merged
 * row is in neither.  Versions only grow here (every update takes the
 * maximum, per shard and for the base), and a base manifest's merged marks
 * only grow with its version.
 *	- A complete read publishes shard versions S and a base version B listed
 *	  after them: consistent, since whatever S dropped was in a base
 *	  committed before S, which B is at least.
 *	- Taking the maximum of two consistent states is consistent: a shard
 *	  version taken from one state is covered by that state's base, and the
 *	  maximum base is at least as new.
 *	- A shard version this cluster commits says which base holds what it
 *	  and its predecessors dropped (drops_covered_by_base, manifest.h: set
 *	  by merges, kept by every later version); recording it raises the
 *	  view's base to that.  A version that does not say (written by a build
 *	  that did not record it) distrusts the view instead: the next snapshot
 *	  lists the store.  A base version this cluster commits only makes the
 *	  base newer.
 * So the view can only be older than the store, never inconsistent: a row
 * may be seen late, never lost.  Distrusting (also when a snapshot finds an
 * object of the view's versions gone) marks the time: a read of the store
 * begun before it may still publish its versions, but refreshes nothing.
 *
 * The memtable.  A snapshot copies this cluster's memtable before it reads
 * the view, and the memtable drops batches only together with recording the
 * shard manifest version that sealed them, under one hold of the slot's lock.
 * A snapshot that misses a dropped batch therefore sees the manifest whose
 * generation holds its rows (or, if that version does not say what covers
 * its drops, lists the store, which holds it too).
 *
 * This shard's WAL tail.  While this cluster's writer holds the shard, its
 * unflushed entries are the memtable.  Until it does (after a restart, in a
 * cluster that only reads) a snapshot would list the shard's WAL at every
 * statement: on S3 or Azure a round trip per key lookup, on file:// a tenth
 * of one.  Entries are only added there by this cluster's writer or by
 * another cluster that writes the same shard (the old primary of a promoted
 * standby).  This cluster's writer counts (shared_store_note_wal_change, in
 * shared memory by store name and shard) after an entry landed and before
 * any committer can learn so: at a group commit's publish (and at a failed
 * position's settle), when a claim makes the writer ready, after a direct
 * commit.  So a read that found no entry after replay_after R, and had read
 * the count as c before it listed, vouches for "R + 1 is empty" while the
 * count is still c: a commit acknowledged since counted after its entry
 * landed, either before that read of c (and then the listing saw the entry:
 * a listing shows every object whose creation returned before it began, on
 * the file store as on S3 and Azure, which list consistently after writes,
 * and as every reader of the WAL tail already relies on) or after it (and
 * then the count moved).  An acknowledged entry never sits behind a hole
 * (fillers and fences see to that, docs/WRITER.md), so its listing starts
 * at R + 1.  Other clusters'
 * entries are seen at most an interval late, as their manifests are; so are
 * entries that landed without being acknowledged (a broken pipeline's).  A
 * fact is about one replay_after and one count; the newest look replaces
 * it.  Only the empty tail is kept: a tail with entries is replayed by the
 * writer's first claim anyway.  A standby lists at every statement, its
 * primary writing the shard all along.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "storage/lwlock.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "rollout/grace.h"
#include "rollout/manifest_view.h"
#include "rollout/shared_store.h"

/* rollout_fdw.manifest_refresh_interval, in milliseconds */
static int	manifest_refresh_interval_ms = 1000;

void
manifest_view_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.manifest_refresh_interval",
							"How long reads may use the store's manifest versions this cluster knows before reading them from the store again.",
							"This cluster's own flushes, merges and compactions are known at once; other clusters' reach reads here at most this long after they commit (and never later than half rollout_fdw.min_gc_grace).  0 reads them at every statement.  Only with shared_preload_libraries.",
							&manifest_refresh_interval_ms,
							1000, 0, 60 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/*
 * How old the view may be for a snapshot: the setting, but never more than
 * half the shortest grace garbage collection keeps unlinked objects for, so
 * that the objects the view's versions name are still there (as merges and
 * compactions abandon outputs older than half of it).
 */
static int64
manifest_view_max_age_ms(void)
{
	return Min((int64) manifest_refresh_interval_ms,
			   (int64) gc_min_grace_seconds() * 1000 / 2);
}

/*
 * The slot of store whose view may be read, or changed (to_change), or
 * NULL.  A store not created yet has no manifests worth keeping; a slot
 * about another creation of the store is not touched
 * (shared_store_adopt_incarnation resets the view with everything else when
 * a backend brings the slot to a new one).  Only handles known to write the
 * store change what the cluster believes of it: one admitted only to read
 * may have found the slot's fence in a copy of the store, whose versions
 * and empty WAL tail would hide the store's newer rows from others.
 */
static SharedStoreSlot *
manifest_view_slot(RolloutStore *store, bool create, bool to_change)
{
	SharedStoreSlot *slot;

	if (store->pending_definition != NULL || store->incarnation == NULL)
		return NULL;
	slot = create ? shared_store_slot_for_reading(store) : shared_store_lookup(store);
	if (slot != NULL && to_change && !store->shared_slot_writes)
		return NULL;
	return slot;
}

static bool
view_is_of(SharedStoreSlot *slot, RolloutStore *store)
{
	return store_slot_is_current(store, slot) &&
		strncmp(slot->incarnation, store->incarnation, SLOT_SHARD_LEN - 1) == 0;
}

static int
shard_name_compare(const ListCell *a, const ListCell *b)
{
	return strcmp(lfirst(a), lfirst(b));
}

/*
 * See manifest_view.h.  The copy is taken under one hold of the lock.  A
 * refresh time in the future (the clock was set back since) counts as
 * expired, so that no clock step can keep the view trusted for longer.
 */
bool
manifest_view_lookup(RolloutStore *store, ManifestVersions *out)
{
	SharedStoreSlot *slot = manifest_view_slot(store, false, false);
	ManifestViewShard shards[MANIFEST_VIEW_SHARDS];
	int			count = 0;
	bool		usable;
	int64		max_age_ms = manifest_view_max_age_ms();
	TimestampTz now = GetCurrentTimestamp();

	if (slot == NULL || max_age_ms <= 0)
		return false;
	LWLockAcquire(&slot->lock, LW_SHARED);
	usable = view_is_of(slot, store) && !slot->view_overflow &&
		slot->view_refreshed_at != 0 && slot->view_refreshed_at <= now &&
		!TimestampDifferenceExceeds(slot->view_refreshed_at, now, (int) max_age_ms);
	if (usable)
	{
		count = slot->view_shard_count;
		memcpy(shards, slot->view_shards, sizeof(ManifestViewShard) * count);
		out->base_version = slot->view_base_version;
	}
	LWLockRelease(&slot->lock);
	if (!usable)
		return false;

	out->shards = NIL;
	for (int i = 0; i < count; i++)
		out->shards = lappend(out->shards, pstrdup(shards[i].shard));
	list_sort(out->shards, shard_name_compare);
	out->shard_versions = palloc(sizeof(int64) * Max(count, 1));
	for (int i = 0; i < count; i++)
	{
		const char *shard = list_nth(out->shards, i);

		for (int j = 0; j < count; j++)
			if (strcmp(shards[j].shard, shard) == 0)
				out->shard_versions[i] = shards[j].version;
	}
	return true;
}

/*
 * See manifest_view.h.  The versions are merged in whenever the read ended;
 * the refresh time moves only for a read begun after the view was last
 * distrusted.  Reading a store whose slots are all taken keeps no view.
 */
void
manifest_view_publish(RolloutStore *store, TimestampTz started_at,
					  const ManifestVersions *found)
{
	SharedStoreSlot *slot = manifest_view_slot(store, true, true);
	ListCell   *lc;

	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (view_is_of(slot, store))
	{
		foreach(lc, found->shards)
			store_slot_view_raise_shard(slot, lfirst(lc),
										found->shard_versions[foreach_current_index(lc)]);
		slot->view_base_version = Max(slot->view_base_version, found->base_version);
		if (started_at > slot->view_distrusted_at)
			slot->view_refreshed_at = Max(slot->view_refreshed_at, started_at);
	}
	LWLockRelease(&slot->lock);
}

/*
 * See manifest_view.h.  Recorded whatever the view's age, in a slot of the
 * store if it has one: a read of the store that began before this commit may
 * publish its older versions later, and the maximum keeps this one.
 */
void
manifest_view_note_shard_commit(RolloutStore *store, const ShardManifest *manifest)
{
	SharedStoreSlot *slot = manifest_view_slot(store, false, true);
	TimestampTz now = GetCurrentTimestamp();

	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (view_is_of(slot, store))
		store_slot_view_record_shard(slot, manifest->shard, manifest->version,
									 manifest->drops_covered_by_base, now);
	LWLockRelease(&slot->lock);
}

/* See manifest_view.h. */
void
manifest_view_note_base_commit(RolloutStore *store, int64 version)
{
	SharedStoreSlot *slot = manifest_view_slot(store, false, true);

	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (view_is_of(slot, store))
		slot->view_base_version = Max(slot->view_base_version, version);
	LWLockRelease(&slot->lock);
}

/* See manifest_view.h. */
void
manifest_view_forget(RolloutStore *store)
{
	SharedStoreSlot *slot = manifest_view_slot(store, false, false);
	TimestampTz now = GetCurrentTimestamp();

	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (view_is_of(slot, store))
		store_slot_view_distrust(slot, now);
	LWLockRelease(&slot->lock);
}

/*
 * See manifest_view.h.  Nothing is vouched for on a standby, or while the
 * view would not be trusted either; whether the slot is still about this
 * creation of the store, manifest_view_wal_tail_found_empty checks.
 */
void
manifest_view_wal_tail_look(RolloutStore *store, WalTailLook *look)
{
	SharedStoreSlot *slot = manifest_view_slot(store, false, true);

	look->started_at = GetCurrentTimestamp();
	look->recordable = slot != NULL && manifest_view_max_age_ms() > 0 &&
		!RecoveryInProgress();
	if (look->recordable)
		look->changes = shared_store_wal_changes(store->name, store->shard);
}

/* See manifest_view.h.  The newest look replaces what an older one found. */
void
manifest_view_wal_tail_found_empty(RolloutStore *store, const WalTailLook *look,
								   int64 replay_after)
{
	SharedStoreSlot *slot = manifest_view_slot(store, false, true);

	if (slot == NULL || !look->recordable ||
		shared_store_wal_changes(store->name, store->shard) != look->changes)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (view_is_of(slot, store) &&
		look->started_at > slot->view_distrusted_at &&
		look->started_at >= slot->tail_empty_listed_at)
	{
		slot->tail_empty_after = replay_after;
		slot->tail_empty_changes = look->changes;
		slot->tail_empty_listed_at = look->started_at;
	}
	LWLockRelease(&slot->lock);
}

/*
 * See manifest_view.h.  As for the manifest versions, a listing time in the
 * future (the clock was set back since) counts as expired.
 */
bool
manifest_view_wal_tail_empty(RolloutStore *store, int64 replay_after)
{
	SharedStoreSlot *slot = manifest_view_slot(store, false, false);
	int64		max_age_ms = manifest_view_max_age_ms();
	TimestampTz now = GetCurrentTimestamp();
	uint64		changes;
	bool		empty;

	if (slot == NULL || max_age_ms <= 0 || RecoveryInProgress())
		return false;
	changes = shared_store_wal_changes(store->name, store->shard);
	LWLockAcquire(&slot->lock, LW_SHARED);
	empty = view_is_of(slot, store) && slot->tail_empty_listed_at != 0 &&
		slot->tail_empty_after == replay_after &&
		slot->tail_empty_changes == changes &&
		slot->tail_empty_listed_at <= now &&
		!TimestampDifferenceExceeds(slot->tail_empty_listed_at, now, (int) max_age_ms);
	LWLockRelease(&slot->lock);
	return empty;
}
