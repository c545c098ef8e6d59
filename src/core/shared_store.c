/*-------------------------------------------------------------------------
 *
 * shared_store.c
 *		The slots of shared memory, one per (store, shard) this cluster
 *		touches: finding them, creating them, and keeping them about the
 *		right creation of the store.
 *
 * Shared memory holds rollout_fdw.max_stores slots (shared_store.h has the
 * layout).  A slot is found by the object store's identity
 * (ObjectStore.identity: the directory, or endpoint, bucket and prefix),
 * not the location string, which two servers with different endpoints may
 * share, and by the store's name and this cluster's shard.  Slots are never
 * freed: a store this cluster wrote keeps its slot until restart.
 *
 * Credentials.  Backends of every role and database share a slot, but none
 * reads or writes through another's credentials: commit requests and
 * memtable batches carry the access fingerprint of the store handle they
 * came through (group_commit.c, memtable.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/wait_event.h"
#include "utils/guc.h"

#include "rollout/memtable.h"
#include "rollout/shared_store.h"

/* rollout_fdw.max_stores */
static int	max_stores_setting = 64;

/* Counters of what adds entries to a shard's WAL: shared_store_note_wal_change */
#define WAL_CHANGE_COUNTERS	64

typedef struct SharedStoreState
{
	int			max_stores;
	int			tranche_id;
	LWLock		registry_lock;	/* slot allocation */
	pg_atomic_uint64 wal_changes[WAL_CHANGE_COUNTERS];
	SharedStoreSlot slots[FLEXIBLE_ARRAY_MEMBER];
} SharedStoreState;

static SharedStoreState *shared_state = NULL;

static int	shared_store_free_slots(void);

/* Define rollout_fdw.max_stores; _PG_init calls it only while preloading. */
void
shared_store_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.max_stores",
							"Stores (per shard) this cluster can write with group commit and memtable.",
							NULL,
							&max_stores_setting,
							64, 1, 10000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
}

Size
shared_store_shmem_size(void)
{
	return add_size(offsetof(SharedStoreState, slots),
					mul_size(max_stores_setting, sizeof(SharedStoreSlot)));
}

/* Create or attach the slots (shmem startup hook, AddinShmemInitLock held). */
void
shared_store_shmem_init(void)
{
	bool		found;

	shared_state = ShmemInitStruct("rollout_fdw shared stores",
								   shared_store_shmem_size(), &found);
	if (!found)
	{
		memset(shared_state, 0, shared_store_shmem_size());
		shared_state->max_stores = max_stores_setting;
		shared_state->tranche_id = LWLockNewTrancheId();
		LWLockInitialize(&shared_state->registry_lock, shared_state->tranche_id);
		for (int i = 0; i < WAL_CHANGE_COUNTERS; i++)
			pg_atomic_init_u64(&shared_state->wal_changes[i], 0);
		for (int i = 0; i < shared_state->max_stores; i++)
		{
			SharedStoreSlot *slot = &shared_state->slots[i];

			LWLockInitialize(&slot->lock, shared_state->tranche_id);
			ConditionVariableInit(&slot->commit_cv);
			ConditionVariableInit(&slot->state_cv);
			slot->queue_head = slot->queue_tail = InvalidDsaPointer;
			slot->mem_head = slot->mem_tail = InvalidDsaPointer;
		}
	}
	LWLockRegisterTranche(shared_state->tranche_id, "rollout_fdw");
}

bool
rollout_shared_available(void)
{
	return shared_state != NULL;
}

/*
 * Whether slot is in use for exactly (identity, store_name, shard).  A slot's
 * names never change once it is in use and slots are never freed, so a slot
 * already found may be checked again without the registry lock.
 */
static bool
slot_matches_names(SharedStoreSlot *slot, const char *identity,
				   const char *store_name, const char *shard)
{
	return slot->in_use &&
		strcmp(slot->identity, identity) == 0 &&
		strcmp(slot->store, store_name) == 0 &&
		strcmp(slot->shard, shard) == 0;
}

static bool
slot_matches(SharedStoreSlot *slot, RolloutStore *store)
{
	return slot_matches_names(slot, store->objstore->identity, store->name,
							  store->shard);
}

/*
 * Find (and, if location is not NULL, make) the slot of (identity, store,
 * shard); location is what the view shows for a new slot.
 */
static SharedStoreSlot *
slot_by_names(const char *identity, const char *store_name, const char *shard,
			  const char *location)
{
	SharedStoreSlot *found = NULL;
	bool		create = location != NULL;

	if (!rollout_shared_available() ||
		strlen(identity) >= SLOT_LOCATION_LEN ||
		(location != NULL && strlen(location) >= SLOT_LOCATION_LEN) ||
		strlen(store_name) >= SLOT_STORE_LEN || strlen(shard) >= SLOT_SHARD_LEN)
		return NULL;

	LWLockAcquire(&shared_state->registry_lock, create ? LW_EXCLUSIVE : LW_SHARED);
	for (int i = 0; i < shared_state->max_stores && found == NULL; i++)
		if (slot_matches_names(&shared_state->slots[i], identity, store_name, shard))
			found = &shared_state->slots[i];
	for (int i = 0; create && i < shared_state->max_stores && found == NULL; i++)
	{
		SharedStoreSlot *slot = &shared_state->slots[i];

		if (slot->in_use)
			continue;
		strlcpy(slot->identity, identity, SLOT_LOCATION_LEN);
		strlcpy(slot->location, location, SLOT_LOCATION_LEN);
		strlcpy(slot->store, store_name, SLOT_STORE_LEN);
		strlcpy(slot->shard, shard, SLOT_SHARD_LEN);
		slot->writer_state = WRITER_NONE;
		slot->in_use = true;
		found = slot;
	}
	LWLockRelease(&shared_state->registry_lock);
	return found;
}

/*
 * A slot keeps state about one creation of a store.  When a backend meets
 * the store under another incarnation (deleted and created again under the
 * same name), the slot's memtable and claim belong to files that are gone:
 * forget them, so that the next commit claims the new store afresh and no
 * row of the old store leaks into it.  Waits for a group commit in flight.
 */
void
shared_store_adopt_incarnation(SharedStoreSlot *slot, RolloutStore *store)
{
	/* a store not created yet has no incarnation to speak of */
	if (store->pending_definition != NULL ||
		strncmp(slot->incarnation, store->incarnation, SLOT_SHARD_LEN - 1) == 0)
		return;
	for (;;)
	{
		bool		busy;

		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		busy = slot->leaders_active > 0 || DsaPointerIsValid(slot->queue_head) ||
			slot->flushing || slot->writer_state == WRITER_INITIALIZING;
		if (!busy)
		{
			if (strncmp(slot->incarnation, store->incarnation, SLOT_SHARD_LEN - 1) != 0)
			{
				memtable_clear(slot);
				slot->view_refreshed_at = 0;
				slot->view_distrusted_at = 0;
				slot->view_overflow = false;
				slot->view_base_version = 0;
				slot->view_shard_count = 0;
				slot->tail_empty_listed_at = 0;
				slot->writer_state = WRITER_NONE;
				slot->times_fenced = 0;
				slot->epoch = slot->tip = slot->last_stamp = 0;
				slot->next_position = slot->next_stamp = 0;
				strlcpy(slot->incarnation, store->incarnation, SLOT_SHARD_LEN);
			}
			LWLockRelease(&slot->lock);
			return;
		}
		LWLockRelease(&slot->lock);
		CHECK_FOR_INTERRUPTS();
		pg_usleep(10 * 1000L);
	}
}

/*
 * See shared_store.h.  A slot qualifies when its writer is claimed, it holds
 * batches, and nothing is in flight: no leader, no queued commit, no
 * committer holding room for a request it has yet to queue (it checked the
 * writer's claim after taking the room, and would find it gone: a spurious
 * "being reopened; retry"), no flush (which copies the batches and trims
 * them after its commit), no claim.  Idle means that no leader started and
 * no batch was published since idle_since.  (A request whose committer has
 * not read its outcome yet is left to it when its batch goes:
 * memtable_drop_oldest.)  Its writer goes back to unclaimed, as after a
 * restart: readers then read the shard's WAL tail from the store, and the
 * next flush, or the claim of the next commit, seals that tail into a
 * generation.  Nothing is lost, since every batch is a durable WAL entry.
 */
int64
shared_store_evict_idle(TimestampTz idle_since, SharedStoreSlot *except)
{
	int64		freed = 0;

	if (!rollout_shared_available())
		return 0;
	LWLockAcquire(&shared_state->registry_lock, LW_SHARED);
	for (int i = 0; i < shared_state->max_stores; i++)
	{
		SharedStoreSlot *slot = &shared_state->slots[i];
		int64		bytes = 0;

		if (!slot->in_use || slot == except)
			continue;
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		if (slot->writer_state == WRITER_READY && slot->mem_bytes > 0 &&
			slot->leaders_active == 0 && !DsaPointerIsValid(slot->queue_head) &&
			slot->queued_bytes == 0 &&
			!slot->flushing && slot->last_lead_at < idle_since &&
			memtable_newest_durable_at(slot) < idle_since)
		{
			bytes = slot->mem_bytes;
			memtable_clear(slot);
			slot->tail_empty_listed_at = 0;
			slot->writer_state = WRITER_NONE;
		}
		LWLockRelease(&slot->lock);
		if (bytes > 0)
		{
			freed += bytes;
			ereport(LOG,
					(errmsg("rollout_fdw: evicted %lld bytes of shard \"%s\" of store \"%s\" from the memtable to make room",
							(long long) bytes, slot->shard, slot->store),
					 errdetail("No transaction committed to it for a while and no flush took its rows; they stay durable in its WAL, and are read from there.")));
		}
	}
	LWLockRelease(&shared_state->registry_lock);
	return freed;
}

/*
 * The slot cached in store->shared_slot is reused while it still matches; a
 * slot found anew first forgets any older incarnation of the store
 * (shared_store_adopt_incarnation, which may wait for a commit or flush in
 * flight).  A missing slot is not remembered, so one created later is found by
 * the next call.
 */
SharedStoreSlot *
shared_store_lookup(RolloutStore *store)
{
	SharedStoreSlot *found;

	if (!rollout_shared_available())
		return NULL;
	if (store->shared_slot != NULL && slot_matches(store->shared_slot, store))
		return store->shared_slot;
	found = slot_by_names(store->objstore->identity, store->name, store->shard,
						  NULL);
	if (found != NULL)
	{
		shared_store_adopt_incarnation(found, store);
		store->shared_slot = found;
	}
	return found;
}

/*
 * Like shared_store_lookup, but creating the slot when there is none.  When
 * every slot is taken the store falls back to the direct path, and the WARNING
 * saying so is given once per backend (warned_full is per process), not once
 * per store or server.
 */
SharedStoreSlot *
shared_store_slot(RolloutStore *store)
{
	static bool warned_full = false;
	SharedStoreSlot *found;

	if (!rollout_shared_available())
		return NULL;
	if (store->shared_slot != NULL && slot_matches(store->shared_slot, store))
		return store->shared_slot;
	found = slot_by_names(store->objstore->identity, store->name, store->shard,
						  store->location);
	if (found != NULL)
		shared_store_adopt_incarnation(found, store);
	if (found == NULL && !warned_full)
	{
		ereport(WARNING,
				(errmsg("all %d rollout_fdw shared store slots are in use",
						shared_state->max_stores),
				 errdetail("Store \"%s\" is written without group commit and memtable.",
						   store->name),
				 errhint("Raise rollout_fdw.max_stores (needs a restart).")));
		warned_full = true;
	}
	store->shared_slot = found;
	return found;
}

/*
 * Like shared_store_slot, for a backend that only reads the store (to keep
 * its manifest versions, manifest_view.c).  Slots are never freed, so
 * readers take one only while more than a quarter of them are free: the
 * rest stays for stores this cluster writes, which would otherwise lose
 * group commit and memtable.  Without a slot a read loses nothing but a
 * cache, so there is no warning.
 */
SharedStoreSlot *
shared_store_slot_for_reading(RolloutStore *store)
{
	SharedStoreSlot *found;

	if (!rollout_shared_available())
		return NULL;
	if (store->shared_slot != NULL && slot_matches(store->shared_slot, store))
		return store->shared_slot;
	found = shared_store_lookup(store);
	if (found != NULL)
		return found;
	if (shared_store_free_slots() <= shared_state->max_stores / 4)
		return NULL;
	found = slot_by_names(store->objstore->identity, store->name, store->shard,
						  store->location);
	if (found != NULL)
	{
		shared_store_adopt_incarnation(found, store);
		store->shared_slot = found;
	}
	return found;
}

/* How many slots are not in use yet (read without the registry lock). */
static int
shared_store_free_slots(void)
{
	int			free_slots = 0;

	for (int i = 0; i < shared_state->max_stores; i++)
		if (!shared_state->slots[i].in_use)
			free_slots++;
	return free_slots;
}

/*
 * Whether this cluster has claimed the shard (WRITER_READY), so that its
 * memtable holds the shard's whole WAL tail: a flush then flushes the memtable
 * instead of reading the WAL back from the store.  Read under the slot's
 * shared lock.
 */
bool
shared_writer_is_ready(SharedStoreSlot *slot)
{
	bool		ready;

	LWLockAcquire(&slot->lock, LW_SHARED);
	ready = slot->writer_state == WRITER_READY;
	LWLockRelease(&slot->lock);
	return ready;
}

/*
 * Wait until no other backend of this cluster flushes the shard's memtable,
 * then mark the slot as flushing.  The flag is in shared memory, so it also
 * serialises flushes started from different databases.  The caller must call
 * shared_flush_end even on error (flush.c does so in PG_FINALLY), or every
 * later flush of the shard waits forever.
 */
void
shared_flush_begin(SharedStoreSlot *slot)
{
	ConditionVariablePrepareToSleep(&slot->state_cv);
	for (;;)
	{
		bool		mine;

		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		mine = !slot->flushing;
		if (mine)
			slot->flushing = true;
		LWLockRelease(&slot->lock);
		if (mine)
			break;
		ConditionVariableSleep(&slot->state_cv, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
}

void
shared_flush_end(SharedStoreSlot *slot)
{
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	slot->flushing = false;
	LWLockRelease(&slot->lock);
	ConditionVariableBroadcast(&slot->state_cv);
}

/* See shared_store.h. */
void
shared_flush_end_callback(int code, Datum arg)
{
	SharedStoreSlot *slot = (SharedStoreSlot *) DatumGetPointer(arg);

	/*
	 * An ERROR may have come with LWLocks held, and reset the interrupt
	 * holdoff count their acquisition raised: release them the way the abort
	 * will (each release holding interrupts off anew).
	 */
	LWLockReleaseAll();
	shared_flush_end(slot);
}

/*
 * Every slot of a location string, store name and shard: an error about a
 * store that could not even be opened (its identity unknown) is recorded in
 * them (store_stats.c).
 */
void
shared_store_foreach_by_name(const char *location, const char *store_name,
							 const char *shard,
							 void (*callback) (SharedStoreSlot *slot, void *arg),
							 void *arg)
{
	if (!rollout_shared_available())
		return;
	for (int i = 0; i < shared_state->max_stores; i++)
	{
		SharedStoreSlot *slot = &shared_state->slots[i];
		bool		matches;

		LWLockAcquire(&shared_state->registry_lock, LW_SHARED);
		matches = slot->in_use && strcmp(slot->location, location) == 0 &&
			strcmp(slot->store, store_name) == 0 && strcmp(slot->shard, shard) == 0;
		LWLockRelease(&shared_state->registry_lock);
		if (matches)
			callback(slot, arg);
	}
}

/* The slot array and its length (slots not in use included). */
int
shared_store_slots(SharedStoreSlot **slots)
{
	if (!rollout_shared_available())
	{
		*slots = NULL;
		return 0;
	}
	*slots = shared_state->slots;
	return shared_state->max_stores;
}

/*
 * The counter of a store's shard.  Keyed by the store's name and the shard,
 * as far as a slot keeps them (so that a name from a slot and one from a
 * RolloutStore find the same), not by slot: one store reached through two
 * locations that name it differently (an endpoint by address and by host
 * name) has a slot per location, and a commit through either must count
 * for both.  Stores that share a counter only list more often.
 */
static pg_atomic_uint64 *
wal_change_counter(const char *store_name, const char *shard)
{
	uint32		hash;

	hash = hash_bytes((const unsigned char *) store_name,
					  strnlen(store_name, SLOT_STORE_LEN - 1));
	hash = hash_combine(hash,
						hash_bytes((const unsigned char *) shard,
								   strnlen(shard, SLOT_SHARD_LEN - 1)));
	return &shared_state->wal_changes[hash % WAL_CHANGE_COUNTERS];
}

/* See shared_store.h.  A full barrier, before whatever follows. */
void
shared_store_note_wal_change(const char *store_name, const char *shard)
{
	if (shared_state != NULL)
		(void) pg_atomic_fetch_add_u64(wal_change_counter(store_name, shard), 1);
}

/* See shared_store.h.  Read before whatever follows (a listing). */
uint64
shared_store_wal_changes(const char *store_name, const char *shard)
{
	uint64		changes;

	if (shared_state == NULL)
		return 0;
	changes = pg_atomic_read_u64(wal_change_counter(store_name, shard));
	pg_memory_barrier();
	return changes;
}
