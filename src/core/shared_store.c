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
 * share, and by the store's name and this cluster's shard.  A store keeps
 * its slot while it is used; when every slot is taken, a store that needs
 * one to commit gets the least recently used slot that has been idle for
 * SLOT_RECYCLE_IDLE_S, with nothing in flight and nothing of it only in
 * memory that is not durable (slot_recycle): a cluster that writes store
 * after store over months keeps group commit for the ones it writes now.
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
#include "utils/timestamp.h"

#include "rollout/memtable.h"
#include "rollout/shared_store.h"
#include "rollout/wal.h"

/*
 * How long a slot must have gone unused before another store may take it
 * (slot_recycle): as long as the memtable keeps an idle store's batches
 * (MEMTABLE_EVICT_IDLE_S, group_commit.c), which it loses with the slot.
 */
#define SLOT_RECYCLE_IDLE_S		10

/* rollout_fdw.max_stores */
static int	max_stores_setting = 256;

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
							256, 1, 10000,
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
			pg_atomic_init_u64(&slot->namespace_generation, 0);
			pg_atomic_init_u64(&slot->last_used_at, 0);
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
 * Whether slot is in use for exactly (identity, store_name, shard).  Names
 * change only under the registry lock, after the slot's generation moved
 * (slot_recycle): a slot already found may be checked again without the
 * lock if its generation is read after the names, and is the one the handle
 * found it at (slot_cached).
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

/* Whether fingerprint is one of the first count of ring (slot lock held). */
static bool
slot_ring_holds(char ring[][OBJSTORE_FINGERPRINT_LEN], int count,
				const char *fingerprint)
{
	for (int i = 0; i < count; i++)
		if (strcmp(ring[i], fingerprint) == 0)
			return true;
	return false;
}

/* Add fingerprint to a ring of credentials unless it holds it (lock held). */
static void
slot_ring_add(char ring[][OBJSTORE_FINGERPRINT_LEN], int *count, int *next,
			  const char *fingerprint)
{
	if (slot_ring_holds(ring, *count, fingerprint))
		return;
	strlcpy(ring[*next], fingerprint, OBJSTORE_FINGERPRINT_LEN);
	*next = (*next + 1) % SLOT_ADMITTED_MAX;
	*count = Min(*count + 1, SLOT_ADMITTED_MAX);
}

/* Forget every credentials admitted to slot but its owner (lock held). */
static void
slot_forget_admitted_locked(SharedStoreSlot *slot)
{
	slot->admitted_count = slot->admitted_next = 0;
	slot->writers_count = slot->writers_next = 0;
}

/*
 * Whether credentials fingerprint may use slot (slot lock held): to read
 * through it, or also to write through it (to_write).
 */
static bool
slot_member_locked(SharedStoreSlot *slot, const char *fingerprint, bool to_write)
{
	if (strcmp(slot->owner, fingerprint) == 0 ||
		slot_ring_holds(slot->writers, slot->writers_count, fingerprint))
		return true;
	return !to_write &&
		slot_ring_holds(slot->admitted, slot->admitted_count, fingerprint);
}

/* What a handle is to a slot of its names (slot_standing). */
typedef enum SlotStanding
{
	SLOT_MEMBER,				/* it may use the slot */
	SLOT_UNCLAIMED,				/* another's, with no claim to check against */
	SLOT_FOREIGN,				/* its credentials reach another store */
	SLOT_STALE					/* to write: the credentials of the slot's
								 * claim are refused now, so nobody can show
								 * that they write its store */
} SlotStanding;

/* The claim a SLOT_STALE verdict was about (slot_forget_stale_claim). */
typedef struct StaleClaim
{
	uint64		generation;
	int64		position;
	char		put_id[SLOT_PUT_ID_LEN];
} StaleClaim;

/*
 * write_proof_confirm against a claim at position whose access was copied
 * into access (WRITE_PROOF_ACCESS_LEN bytes on the caller's stack), which is
 * wiped whatever happens.
 */
static WriteProof
slot_prove_write(RolloutStore *store, char *access, Size access_len,
				 int64 position)
{
	volatile WriteProof proof = WRITE_PROOF_REFUTED;

	PG_TRY();
	{
		proof = write_proof_confirm(store, access, access_len, position);
	}
	PG_FINALLY();
	{
		explicit_bzero(access, WRITE_PROOF_ACCESS_LEN);
	}
	PG_END_TRY();
	return proof;
}

/*
 * What store's handle is to slot, to read through it or also to write
 * (to_write).  A handle whose credentials are neither the owner's nor
 * admitted reads the WAL position of the slot's last claim with its own:
 * the fence there, with the put id only the claim knew, means that it reads
 * the store the slot is about, and its credentials are admitted to read;
 * anything else (nothing there, or another entry: its own store's WAL)
 * means they reach another.  The put id is never shown, so credentials that
 * reach another store cannot learn it by this; but whoever can read the
 * store can copy the fence.  So to write, credentials not yet known to
 * write also pass write_proof_confirm against the claim's access; when the
 * store refuses that access (its keys were rotated since), the slot is
 * SLOT_STALE, and *stale (which callers to write pass) says which claim.  Reads
 * and writes the store without the slot's lock; asks again if the slot
 * changed meanwhile.
 */
static SlotStanding
slot_standing(SharedStoreSlot *slot, RolloutStore *store, bool to_write,
			  uint64 *member_since, StaleClaim *stale)
{
	const char *fingerprint = store->objstore->access_fingerprint;
	char		access[WRITE_PROOF_ACCESS_LEN];

	for (;;)
	{
		char		put_id[SLOT_PUT_ID_LEN];
		int64		position;
		uint64		generation;
		Size		access_len = 0;
		bool		reads;
		bool		admitted;

		LWLockAcquire(&slot->lock, LW_SHARED);
		generation = pg_atomic_read_u64(&slot->namespace_generation);

		/* it went to another store's names since it was found */
		if (!slot_matches(slot, store))
		{
			LWLockRelease(&slot->lock);
			return SLOT_FOREIGN;
		}
		if (slot_member_locked(slot, fingerprint, to_write))
		{
			LWLockRelease(&slot->lock);
			*member_since = generation;
			return SLOT_MEMBER;
		}
		reads = slot_member_locked(slot, fingerprint, false);
		strlcpy(put_id, slot->claim_put_id, sizeof(put_id));
		position = slot->claim_position;
		if (to_write)
		{
			access_len = slot->claim_access_len;
			memcpy(access, slot->claim_access, access_len);
		}
		LWLockRelease(&slot->lock);
		if (put_id[0] == '\0')
			return SLOT_UNCLAIMED;

		if (!reads)
		{
			char	   *found = wal_entry_put_id(store, position);

			if (found == NULL || strcmp(found, put_id) != 0)
			{
				explicit_bzero(access, access_len);
				return SLOT_FOREIGN;
			}
		}
		if (to_write)
		{
			WriteProof	proof = slot_prove_write(store, access, access_len, position);

			if (proof == WRITE_PROOF_STALE)
			{
				stale->generation = generation;
				stale->position = position;
				strlcpy(stale->put_id, put_id, sizeof(stale->put_id));
				return SLOT_STALE;
			}
			if (proof == WRITE_PROOF_REFUTED)
				return SLOT_FOREIGN;
		}

		/*
		 * A claim of the same store may have come meanwhile (its fence is
		 * elsewhere, but the store is the same one); a slot that may stand
		 * for another store now has another generation.  The admitted
		 * credentials are rings: ones pushed out prove themselves again when
		 * a handle of theirs next looks.
		 */
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		admitted = pg_atomic_read_u64(&slot->namespace_generation) == generation;
		if (admitted)
		{
			slot_ring_add(slot->admitted, &slot->admitted_count,
						  &slot->admitted_next, fingerprint);
			if (to_write)
				slot_ring_add(slot->writers, &slot->writers_count,
							  &slot->writers_next, fingerprint);
		}
		LWLockRelease(&slot->lock);
		if (admitted)
		{
			*member_since = generation;
			return SLOT_MEMBER;
		}
	}
}

/*
 * Forget the slot's claim: its fence's put id and position, and the access
 * it was made with, wiped (slot lock held exclusively).
 */
static void
slot_forget_claim_locked(SharedStoreSlot *slot)
{
	slot->claim_put_id[0] = '\0';
	slot->claim_position = 0;
	slot->claim_access_len = 0;
	explicit_bzero(slot->claim_access, sizeof(slot->claim_access));
}

/*
 * Forget everything a slot holds about the store it stood for: its
 * memtable, its view of the manifests, its writer's claim (slot lock held
 * exclusively, nothing in flight).
 */
static void
slot_forget_store_locked(SharedStoreSlot *slot)
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
	slot_forget_claim_locked(slot);
	pg_atomic_fetch_add_u64(&slot->namespace_generation, 1);
}

/* Whether anything is in flight in slot (slot lock held). */
static bool
slot_busy_locked(SharedStoreSlot *slot)
{
	return slot->leaders_active > 0 || DsaPointerIsValid(slot->queue_head) ||
		slot->queued_bytes > 0 || slot->flushing ||
		slot->writer_state == WRITER_INITIALIZING;
}

/*
 * Forget the claim of slot that a SLOT_STALE verdict was about: nobody can
 * write through it any more (its claim's credentials are refused), and
 * nobody else could prove that they write its store.  Its memtable goes
 * with it, as after an eviction: every batch is a durable WAL entry, which
 * the next claim of the store seals.  The slot then stands for no store,
 * and a committer may take it over (slot_take_over).  Returns true when
 * that claim is gone (forgotten here, or replaced meanwhile: a new claim
 * keeps the generation, so its put id tells), false when something is in
 * flight in the slot, or its writer refuses commits for good (fenced twice,
 * superseded by a promoted standby), which a forget would undo.  Never
 * waits: a caller may hold the lock claims take (shared_store_check_siblings),
 * which a committer holding room in the slot waits for.
 */
static bool
slot_forget_stale_claim(SharedStoreSlot *slot, const StaleClaim *stale)
{
	bool		gone = true;
	bool		forgotten = false;
	char		store_name[SLOT_STORE_LEN];
	char		shard[SLOT_SHARD_LEN];

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	strlcpy(store_name, slot->store, sizeof(store_name));
	strlcpy(shard, slot->shard, sizeof(shard));
	if (pg_atomic_read_u64(&slot->namespace_generation) == stale->generation &&
		slot->claim_position == stale->position &&
		strcmp(slot->claim_put_id, stale->put_id) == 0)
	{
		if (slot_busy_locked(slot) || slot->writer_state == WRITER_FENCED ||
			slot->writer_state == WRITER_SUPERSEDED)
			gone = false;
		else
		{
			slot_forget_store_locked(slot);
			forgotten = true;
		}
	}
	LWLockRelease(&slot->lock);
	if (forgotten)
		ereport(LOG,
				(errmsg("rollout_fdw: forgot the claim of shard \"%s\" of store \"%s\" in shared memory: its credentials are refused now",
						shard, store_name),
				 errdetail("Other credentials could not prove that they write the store through it. The store's unflushed rows stay in its WAL; the next commit claims the shard again.")));
	return gone;
}

/*
 * Make store's handle the owner of slot, which no claim has tied to a store
 * yet (its owner may have reached another store by the same names): what it
 * holds goes, and the handles of its earlier owner ask again.  Waits for
 * anything in flight.  Returns false when a claim came first, or the slot
 * went to another store's names meanwhile (slot_recycle).
 */
static bool
slot_take_over(SharedStoreSlot *slot, RolloutStore *store)
{
	const char *fingerprint = store->objstore->access_fingerprint;

	for (;;)
	{
		bool		done = false;
		bool		claimed;

		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);

		/* gone to another store's names since it was judged: look again */
		claimed = slot->claim_put_id[0] != '\0' || !slot_matches(slot, store);
		if (!claimed && slot_member_locked(slot, fingerprint, true))
			done = true;
		else if (!claimed && !slot_busy_locked(slot))
		{
			slot_forget_store_locked(slot);
			strlcpy(slot->owner, fingerprint, OBJSTORE_FINGERPRINT_LEN);
			slot_forget_admitted_locked(slot);
			done = true;
		}
		LWLockRelease(&slot->lock);
		if (claimed || done)
			return done;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(10 * 1000L);
	}
}

/* The slots of store's names (identity, store, shard), into slots. */
static int
slot_candidates(RolloutStore *store, SharedStoreSlot **slots)
{
	int			count = 0;

	for (int i = 0; i < shared_state->max_stores; i++)
		if (slot_matches(&shared_state->slots[i], store))
			slots[count++] = &shared_state->slots[i];
	return count;
}

/*
 * The slots of store's names as they are now, in a new array (*count of
 * them), read under the registry lock.
 */
static SharedStoreSlot **
slot_candidates_now(RolloutStore *store, int *count)
{
	SharedStoreSlot **slots = palloc(sizeof(SharedStoreSlot *) * shared_state->max_stores);

	LWLockAcquire(&shared_state->registry_lock, LW_SHARED);
	*count = slot_candidates(store, slots);
	LWLockRelease(&shared_state->registry_lock);
	return slots;
}

/*
 * Give slot to store's names, owned by its handle, as a slot that nothing
 * claimed yet (registry lock held exclusively, and the slot's lock too when
 * it stood for another store).  Its counters start again: the statistics
 * view shows a store's own.
 */
static void
slot_assign(SharedStoreSlot *slot, RolloutStore *store)
{
	strlcpy(slot->identity, store->objstore->identity, SLOT_LOCATION_LEN);
	strlcpy(slot->location, store->location, SLOT_LOCATION_LEN);
	strlcpy(slot->store, store->name, SLOT_STORE_LEN);
	strlcpy(slot->shard, store->shard, SLOT_SHARD_LEN);
	slot->incarnation[0] = '\0';
	strlcpy(slot->owner, store->objstore->access_fingerprint,
			OBJSTORE_FINGERPRINT_LEN);
	slot_forget_admitted_locked(slot);
	slot_forget_claim_locked(slot);
	pg_atomic_fetch_add_u64(&slot->namespace_generation, 1);
	pg_atomic_write_u64(&slot->last_used_at, (uint64) GetCurrentTimestamp());
	slot->writer_state = WRITER_NONE;
	slot->tip_observed_at = 0;
	slot->last_lead_at = 0;
	slot->last_group_transactions = 0;
	memset(&slot->rows_appended, 0,
		   sizeof(SharedStoreSlot) - offsetof(SharedStoreSlot, rows_appended));
	slot->in_use = true;
}

/*
 * Whether another store may take slot (its lock held): nobody used it since
 * idle_before, nothing is in flight in it or waits for it, every position
 * its writer began is settled, and its memtable holds only batches older
 * than idle_before (durable WAL entries, read from the store once the slot
 * forgets them, as after an eviction).  A writer that was ever fenced keeps
 * its slot: the count of fences is what makes a cluster refuse the shard for
 * good after the second (two clusters given one shard id), and a slot that
 * changed hands would start it again; so does one superseded by a promoted
 * standby.
 */
static bool
slot_recyclable_locked(SharedStoreSlot *slot, TimestampTz idle_before)
{
	return slot->in_use && !slot_busy_locked(slot) &&
		slot->sleeper_count == 0 && slot->timer_holder == 0 &&
		!slot->pipeline_broken && slot->tip == slot->next_position &&
		slot->writer_state != WRITER_FENCED &&
		slot->writer_state != WRITER_SUPERSEDED && slot->times_fenced == 0 &&
		(TimestampTz) pg_atomic_read_u64(&slot->last_used_at) < idle_before &&
		slot->last_lead_at < idle_before &&
		memtable_newest_durable_at(slot) < idle_before;
}

/* The store and shard a slot stood for before it changed hands. */
typedef struct SlotPrevious
{
	char		store[SLOT_STORE_LEN];
	char		shard[SLOT_SHARD_LEN];
} SlotPrevious;

/*
 * Every slot is taken: give the least recently used one that may change
 * hands (slot_recyclable_locked) to store's names (registry lock held
 * exclusively), and say in *previous what it stood for.  Its memtable, view
 * and claim are forgotten and its generation moves, so that every handle of
 * the store it stood for looks again and, finding none, reads that store's
 * WAL tail from the store until it gets a slot again.  NULL when no slot may
 * change hands.
 */
static SharedStoreSlot *
slot_recycle(RolloutStore *store, SlotPrevious *previous)
{
	TimestampTz idle_before;
	SharedStoreSlot *victim = NULL;
	TimestampTz victim_used = 0;
	bool		recycled = false;

	idle_before = GetCurrentTimestamp() - SLOT_RECYCLE_IDLE_S * USECS_PER_SEC;
	for (int i = 0; i < shared_state->max_stores; i++)
	{
		SharedStoreSlot *slot = &shared_state->slots[i];
		TimestampTz used = (TimestampTz) pg_atomic_read_u64(&slot->last_used_at);
		bool		recyclable;

		if (used >= idle_before || (victim != NULL && used >= victim_used))
			continue;
		LWLockAcquire(&slot->lock, LW_SHARED);
		recyclable = slot_recyclable_locked(slot, idle_before);
		LWLockRelease(&slot->lock);
		if (recyclable)
		{
			victim = slot;
			victim_used = used;
		}
	}
	if (victim == NULL)
		return NULL;

	/* look again under the exclusive lock: a commit may have come meanwhile */
	LWLockAcquire(&victim->lock, LW_EXCLUSIVE);
	if (slot_recyclable_locked(victim, idle_before))
	{
		strlcpy(previous->store, victim->store, SLOT_STORE_LEN);
		strlcpy(previous->shard, victim->shard, SLOT_SHARD_LEN);
		slot_forget_store_locked(victim);
		slot_assign(victim, store);
		recycled = true;
	}
	LWLockRelease(&victim->lock);
	return recycled ? victim : NULL;
}

/*
 * Make a slot of store's names owned by its handle, unless the slots of its
 * names are no longer the judged ones its caller found (*changed: look
 * again); NULL then, or when every slot is taken and none may change hands
 * (or may_recycle is false).
 */
static SharedStoreSlot *
slot_create(RolloutStore *store, int judged, bool may_recycle, bool *changed)
{
	SharedStoreSlot *found = NULL;
	SharedStoreSlot **current;
	SlotPrevious previous;
	bool		recycled = false;

	*changed = false;
	if (strlen(store->location) >= SLOT_LOCATION_LEN)
		return NULL;
	current = palloc(sizeof(SharedStoreSlot *) * shared_state->max_stores);
	LWLockAcquire(&shared_state->registry_lock, LW_EXCLUSIVE);
	*changed = slot_candidates(store, current) != judged;
	for (int i = 0; i < shared_state->max_stores && found == NULL && !*changed; i++)
	{
		SharedStoreSlot *slot = &shared_state->slots[i];

		if (slot->in_use)
			continue;
		slot_assign(slot, store);
		found = slot;
	}
	if (found == NULL && !*changed && may_recycle)
		recycled = (found = slot_recycle(store, &previous)) != NULL;
	LWLockRelease(&shared_state->registry_lock);
	pfree(current);
	if (recycled)
		ereport(LOG,
				(errmsg("rollout_fdw: the shared-memory slot of shard \"%s\" of store \"%s\" goes to store \"%s\"",
						previous.shard, previous.store, store->name),
				 errdetail("All %d slots were in use (rollout_fdw.max_stores); this one was the least recently used, idle for at least %d s. Its unflushed rows stay durable in its WAL.",
						   shared_state->max_stores, SLOT_RECYCLE_IDLE_S)));
	return found;
}

/* How a handle looks for its slot (slot_find). */
typedef enum SlotSearch
{
	SLOT_SEARCH_LOOKUP,			/* find one it belongs to */
	SLOT_SEARCH_READ,			/* the same, or make one while slots are many */
	SLOT_SEARCH_MAINTAIN,		/* the same, or make one */
	SLOT_SEARCH_COMMIT			/* the same, taking over one no claim tied to
								 * a store yet */
} SlotSearch;

/* Look again at most this often when slots of the names come and go. */
#define SLOT_FIND_ATTEMPTS	8

/*
 * A claimed slot among candidates that store's handle is known to write
 * through (its owner, or admitted to write), with the generation since
 * then; NULL when none.  No I/O: a reader whose credentials also read
 * another store of the names (a copy of its fence) reads through the slot
 * it writes through, so that it sees its own unflushed rows.
 */
static SharedStoreSlot *
slot_written_through(RolloutStore *store, SharedStoreSlot **candidates,
					 int count, uint64 *member_since)
{
	for (int i = 0; i < count; i++)
	{
		SharedStoreSlot *slot = candidates[i];
		bool		writes;

		LWLockAcquire(&slot->lock, LW_SHARED);
		writes = slot->claim_put_id[0] != '\0' &&
			slot_member_locked(slot, store->objstore->access_fingerprint, true);
		*member_since = pg_atomic_read_u64(&slot->namespace_generation);
		LWLockRelease(&slot->lock);
		if (writes)
			return slot;
	}
	return NULL;
}

/*
 * The slot of store's handle, and the generation since which it belongs to
 * it, among the slots of its names (one per store that credentials reach by
 * them, usually one): one whose claim its credentials reach, else one of its
 * own that nothing claimed yet.  A slot that nothing claimed yet and that is
 * another's may be the same store: only a committer takes it over (it then
 * claims it, and the other credentials prove themselves against that
 * claim); the others go without a slot meanwhile.  A slot is made only
 * while every slot of the names stands, by its claim, for another store, so
 * that one store does not get two slots whose writers would fence each
 * other.  (A claim of an earlier creation of the store, not yet forgotten,
 * looks like another store's; claims one at a time and the check of the
 * other slots before each keep two such slots from both claiming,
 * writer_epoch.c.)  Committers and flushes (SLOT_SEARCH_COMMIT and
 * _MAINTAIN) need a slot they may write through; readers one they may read
 * through, preferring one they write through.  *writes tells which the
 * handle was found to be.  *full is set when a slot should have been made
 * and none was free.
 */
static SharedStoreSlot *
slot_find(RolloutStore *store, SlotSearch search, uint64 *member_since,
		  bool *writes, bool *full)
{
	SharedStoreSlot **candidates;
	SharedStoreSlot *found = NULL;
	bool		to_write = search == SLOT_SEARCH_COMMIT ||
	search == SLOT_SEARCH_MAINTAIN;

	*full = false;
	*writes = to_write;
	if (strlen(store->objstore->identity) >= SLOT_LOCATION_LEN ||
		strlen(store->name) >= SLOT_STORE_LEN ||
		strlen(store->shard) >= SLOT_SHARD_LEN)
		return NULL;
	candidates = palloc(sizeof(SharedStoreSlot *) * shared_state->max_stores);
	for (int attempt = 0; attempt < SLOT_FIND_ATTEMPTS && found == NULL; attempt++)
	{
		SharedStoreSlot *own_unclaimed = NULL;
		SharedStoreSlot *other_unclaimed = NULL;
		SharedStoreSlot *stale = NULL;
		StaleClaim	stale_claim;
		uint64		own_since = 0;
		int			count;
		bool		changed;

		LWLockAcquire(&shared_state->registry_lock, LW_SHARED);
		count = slot_candidates(store, candidates);
		LWLockRelease(&shared_state->registry_lock);

		if (!to_write &&
			(found = slot_written_through(store, candidates, count, member_since)) != NULL)
		{
			*writes = true;
			break;
		}
		for (int i = 0; i < count && found == NULL; i++)
		{
			uint64		since;
			bool		claimed;

			StaleClaim	judged;

			switch (slot_standing(candidates[i], store, to_write, &since, &judged))
			{
				case SLOT_MEMBER:
					LWLockAcquire(&candidates[i]->lock, LW_SHARED);
					claimed = candidates[i]->claim_put_id[0] != '\0';
					LWLockRelease(&candidates[i]->lock);
					if (claimed)
					{
						found = candidates[i];
						*member_since = since;
					}
					else if (own_unclaimed == NULL)
					{
						own_unclaimed = candidates[i];
						own_since = since;
					}
					break;
				case SLOT_UNCLAIMED:
					if (other_unclaimed == NULL)
						other_unclaimed = candidates[i];
					break;
				case SLOT_FOREIGN:
					break;
				case SLOT_STALE:
					if (stale == NULL)
					{
						stale = candidates[i];
						stale_claim = judged;
					}
					break;
			}
		}
		if (found != NULL)
			break;
		if (own_unclaimed != NULL)
		{
			found = own_unclaimed;
			*member_since = own_since;
			break;
		}
		if (stale != NULL)
		{
			/*
			 * Only searches to write judge it (slot_standing).  Look again,
			 * after a moment while something is in flight in it; a writer
			 * that refuses commits for good is left alone, and the search
			 * ends as "kept changing hands".
			 */
			if (!slot_forget_stale_claim(stale, &stale_claim))
				pg_usleep(10 * 1000L);
			continue;
		}
		if (other_unclaimed != NULL)
		{
			/* taken over, or claimed meanwhile: look again */
			if (search != SLOT_SEARCH_COMMIT)
				break;
			(void) slot_take_over(other_unclaimed, store);
			continue;
		}
		if (search == SLOT_SEARCH_LOOKUP ||
			(search == SLOT_SEARCH_READ &&
			 shared_store_free_slots() <= shared_state->max_stores / 4))
			break;
		found = slot_create(store, count, search == SLOT_SEARCH_COMMIT, &changed);
		if (found != NULL)
			*member_since = pg_atomic_read_u64(&found->namespace_generation);
		else if (!changed)
		{
			*full = true;
			break;
		}
	}
	pfree(candidates);

	/* a reader found through the fence may still be known to write */
	if (found != NULL && !*writes)
	{
		LWLockAcquire(&found->lock, LW_SHARED);
		*writes = slot_member_locked(found, store->objstore->access_fingerprint, true);
		LWLockRelease(&found->lock);
	}

	/*
	 * A committer never goes the direct path beside a slot of its store (its
	 * entries would take the positions the slot's writer counts on): slots
	 * that kept changing hands under it make it retry instead.
	 */
	if (found == NULL && !*full && search == SLOT_SEARCH_COMMIT)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not commit to store \"%s\": its shared-memory slot kept changing hands",
						store->name),
				 errhint("Retry the transaction.")));
	return found;
}

/*
 * The cached slot of store's handle, or NULL when it must look again: the
 * slot may stand for another store since the handle found it.  A committer
 * or a flush also looks again while its slot is not claimed, since another
 * slot of the same store may have been claimed meanwhile, whose memtable
 * then holds the tail.  A claim is only ever undone with a new generation
 * (slot_forget_store_locked), so the handle remembers one it saw.  Both
 * (to_write) also look again when the handle was found only to read
 * through the slot.
 */
static SharedStoreSlot *
slot_cached(RolloutStore *store, bool to_write)
{
	SharedStoreSlot *slot = store->shared_slot;
	bool		claiming;

	if (slot == NULL || !slot_matches(slot, store))
		return NULL;
	pg_read_barrier();			/* the names above, then the generation */
	if (pg_atomic_read_u64(&slot->namespace_generation) != store->shared_slot_generation ||
		(to_write && !store->shared_slot_writes))
		return NULL;
	if (!to_write || store->shared_slot_claimed)
		return slot;
	LWLockAcquire(&slot->lock, LW_SHARED);
	store->shared_slot_claimed = slot->claim_put_id[0] != '\0' &&
		pg_atomic_read_u64(&slot->namespace_generation) == store->shared_slot_generation;
	claiming = slot->writer_state == WRITER_INITIALIZING;
	LWLockRelease(&slot->lock);

	/*
	 * A slot being claimed is kept too: the claim may be this backend's own,
	 * whose flush of the WAL tail comes here (and a flush of a slot not ready
	 * reads the tail from the store anyway).
	 */
	return store->shared_slot_claimed || claiming ? slot : NULL;
}

/*
 * Remember slot as store's handle's, a member since generation member_since
 * (slot_standing), allowed to write through it or only to read; returns it.
 */
static SharedStoreSlot *
slot_remember(RolloutStore *store, SharedStoreSlot *slot, uint64 member_since,
			  bool writes)
{
	store->shared_slot = slot;
	store->shared_slot_generation = member_since;
	store->shared_slot_claimed = false;
	store->shared_slot_writes = writes;
	return slot;
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

		/*
		 * Only a handle that still belongs to the slot may reset it: one
		 * whose slot was taken over meanwhile (another generation) would
		 * reset another store's writer.  It looks again (slot_cached).
		 */
		if (store->shared_slot != slot ||
			store->shared_slot_generation != pg_atomic_read_u64(&slot->namespace_generation))
		{
			LWLockRelease(&slot->lock);
			return;
		}
		if (!busy)
		{
			if (strncmp(slot->incarnation, store->incarnation, SLOT_SHARD_LEN - 1) != 0)
			{
				/*
				 * Its owner and admitted credentials reach the new one too,
				 * this handle among them, which keeps the slot as of the new
				 * generation (set under the same hold of the lock, before any
				 * other handle could take the unclaimed slot over).
				 */
				slot_forget_store_locked(slot);
				store->shared_slot_generation =
					pg_atomic_read_u64(&slot->namespace_generation);
				store->shared_slot_claimed = false;
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
 * Whether shared_store_evict_idle may drop the batches of slot (its lock
 * held).  Never while anything is in flight: no leader, no queued commit, no
 * committer holding room for a request it has yet to queue (it checked the
 * writer's claim after taking the room, and would find it gone: a spurious
 * "being reopened; retry"), no flush (which copies the batches and trims
 * them after its commit).  A claimed writer's batches are its shard's WAL
 * tail, which readers take from the memtable: they go only when idle (no
 * leader started and no batch was published since idle_since), and never
 * except's, whose committer flushes its own store instead.  A writer that is
 * not claimed (its pipeline broke, it was fenced or superseded) keeps
 * batches that nobody reads any more (readers and flushes read its WAL tail
 * from the store, and its next claim drops them): they always go, since no
 * commit of that store may ever come to claim it again.  A claim in progress
 * drops them itself.
 */
static bool
slot_batches_evictable(SharedStoreSlot *slot, TimestampTz idle_since,
					   SharedStoreSlot *except)
{
	if (slot->mem_bytes == 0 || slot->leaders_active > 0 ||
		DsaPointerIsValid(slot->queue_head) || slot->queued_bytes > 0 ||
		slot->flushing)
		return false;
	switch (slot->writer_state)
	{
		case WRITER_READY:
			return slot != except && slot->last_lead_at < idle_since &&
				memtable_newest_durable_at(slot) < idle_since;
		case WRITER_INITIALIZING:
			return false;
		case WRITER_NONE:
		case WRITER_FENCED:
		case WRITER_SUPERSEDED:
			return true;
	}
	return false;
}

/*
 * See shared_store.h and slot_batches_evictable.  A claimed writer whose
 * batches go goes back to unclaimed, as after a restart: readers then read
 * the shard's WAL tail from the store, and the next flush, or the claim of
 * the next commit, seals that tail into a generation.  Nothing is lost,
 * since every batch is a durable WAL entry.  (A request whose committer has
 * not read its outcome yet is left to it when its batch goes:
 * memtable_drop_oldest.)
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

		if (!slot->in_use)
			continue;
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		if (slot_batches_evictable(slot, idle_since, except))
		{
			bytes = slot->mem_bytes;
			memtable_clear(slot);
			slot->tail_empty_listed_at = 0;
			if (slot->writer_state == WRITER_READY)
				slot->writer_state = WRITER_NONE;
		}
		LWLockRelease(&slot->lock);
		if (bytes > 0)
		{
			freed += bytes;
			ereport(LOG,
					(errmsg("rollout_fdw: evicted %lld bytes of shard \"%s\" of store \"%s\" from the memtable to make room",
							(long long) bytes, slot->shard, slot->store),
					 errdetail("No transaction committed to it for a while, or its writer lost its claim, and no flush took its rows; they stay durable in its WAL, and are read from there.")));
		}
	}
	LWLockRelease(&shared_state->registry_lock);
	return freed;
}

bool
shared_store_largest(char *store, size_t size, int64 *bytes, bool *flushing)
{
	int64		largest = 0;

	if (!rollout_shared_available())
		return false;
	LWLockAcquire(&shared_state->registry_lock, LW_SHARED);
	for (int i = 0; i < shared_state->max_stores; i++)
	{
		SharedStoreSlot *slot = &shared_state->slots[i];
		int64		held;

		if (!slot->in_use)
			continue;
		LWLockAcquire(&slot->lock, LW_SHARED);
		held = slot->mem_bytes + slot->queued_bytes;
		if (held > largest)
		{
			largest = held;
			strlcpy(store, slot->store, size);
			*flushing = slot->flushing;
		}
		LWLockRelease(&slot->lock);
	}
	LWLockRelease(&shared_state->registry_lock);
	*bytes = largest;
	return largest > 0;
}

/*
 * Note that a handle uses slot now, to the second (slot_recycle takes the
 * least recently used): written without a lock, and only when the second
 * changed, so that handles of one store do not contend for its cache line.
 * Background workers do not count: the sweeper visits every store of its
 * databases on a timer, and a parallel worker's leader counted already.
 */
static SharedStoreSlot *
slot_touch(SharedStoreSlot *slot)
{
	TimestampTz now;

	if (IsBackgroundWorker)
		return slot;
	now = GetCurrentTimestamp();

	if (now - (TimestampTz) pg_atomic_read_u64(&slot->last_used_at) >= USECS_PER_SEC)
	{
		pg_atomic_write_u64(&slot->last_used_at, (uint64) now);
		pg_memory_barrier();	/* seen by slot_recycle before any use */
	}
	return slot;
}

/*
 * Find store's handle's slot with search (slot_find) unless its cached one
 * still holds (slot_cached), and remember it; a slot found anew first
 * forgets any older incarnation of the store (shared_store_adopt_incarnation,
 * which may wait for a commit or flush in flight).  A missing slot is not
 * remembered, so one created later is found by the next call.
 */
static SharedStoreSlot *
slot_for_handle(RolloutStore *store, SlotSearch search, bool *full)
{
	SharedStoreSlot *found;
	uint64		member_since = 0;
	bool		writes;

	*full = false;
	if (!rollout_shared_available())
		return NULL;
	if ((found = slot_cached(store, search == SLOT_SEARCH_COMMIT ||
							 search == SLOT_SEARCH_MAINTAIN)) != NULL)
		return slot_touch(found);
	store->shared_slot = NULL;
	found = slot_find(store, search, &member_since, &writes, full);
	if (found == NULL)
		return NULL;
	slot_remember(store, found, member_since, writes);

	/*
	 * Credentials admitted only to read (by the fence, which whoever reads
	 * the store can copy, with the rest of the store, to where they write)
	 * must not reset a slot to another creation: they go without it.
	 */
	if (!writes && store->pending_definition == NULL &&
		strncmp(found->incarnation, store->incarnation, SLOT_SHARD_LEN - 1) != 0)
	{
		store->shared_slot = NULL;
		return NULL;
	}
	shared_store_adopt_incarnation(found, store);

	/*
	 * The slot may have changed hands meanwhile (adoption then leaves it
	 * alone): a reader goes without it; a committer, which must not go the
	 * direct path beside it, retries.
	 */
	if (slot_cached(store, false) == found)
		return slot_touch(found);
	store->shared_slot = NULL;
	if (search == SLOT_SEARCH_COMMIT)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not commit to store \"%s\": its shared-memory slot changed hands",
						store->name),
				 errhint("Retry the transaction.")));
	return NULL;
}

/* See shared_store.h. */
SharedStoreSlot *
shared_store_lookup(RolloutStore *store)
{
	bool		full;

	return slot_for_handle(store, SLOT_SEARCH_LOOKUP, &full);
}

/*
 * See shared_store.h.  When every slot is taken the store falls back to the
 * direct path, and the WARNING saying so is given once per backend
 * (warned_full is per process), not once per store or server.
 */
SharedStoreSlot *
shared_store_slot(RolloutStore *store, bool to_commit)
{
	static bool warned_full = false;
	SharedStoreSlot *found;
	bool		full;

	found = slot_for_handle(store, to_commit ? SLOT_SEARCH_COMMIT : SLOT_SEARCH_MAINTAIN,
							&full);
	if (full && !warned_full)
	{
		ereport(WARNING,
				(errmsg("all %d rollout_fdw shared store slots are in use",
						shared_state->max_stores),
				 errdetail("Store \"%s\" is written without group commit and memtable.",
						   store->name),
				 errhint("Raise rollout_fdw.max_stores (needs a restart).")));
		warned_full = true;
	}
	return found;
}

/*
 * See shared_store.h.  Readers make a slot only while more than a quarter
 * of them are free, and never take one from another store: the rest stays
 * for stores this cluster writes, which would otherwise lose group commit
 * and memtable.  Without a slot a read loses nothing but a cache, so there is
 * no warning.
 */
SharedStoreSlot *
shared_store_slot_for_reading(RolloutStore *store)
{
	bool		full;

	return slot_for_handle(store, SLOT_SEARCH_READ, &full);
}

/*
 * See shared_store.h.  A handle found a member once may have lost the slot
 * since to credentials that reach another store (slot_take_over), which the
 * generation tells; then it asks again, which reads the store at most once.
 * One found only to read through the slot proves that it writes the store
 * (write_proof.c): a write and two requests, once per credentials.
 */
void
shared_store_require_member(RolloutStore *store, SharedStoreSlot *slot,
							const char *action)
{
	uint64		member_since;
	StaleClaim	stale;
	SlotStanding standing;

	if (slot_cached(store, false) == slot && store->shared_slot_writes)
		return;
	standing = slot_standing(slot, store, true, &member_since, &stale);
	if (standing == SLOT_MEMBER)
	{
		slot_remember(store, slot, member_since, true);
		return;
	}
	store->shared_slot = NULL;
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not %s store \"%s\": this cluster's writer of the store changed hands",
					action, store->name),
			 standing == SLOT_STALE ?
			 errdetail("The credentials its writer claimed the store with are refused now. Nothing was written.") :
			 errdetail("Another role's credentials took its shared-memory slot over before this cluster's writer claimed the store through it. Nothing was written."),
			 errhint("Retry.")));
}

/*
 * See shared_store.h.  The caller holds the lock that serialises claims of
 * the store (writer_epoch.c), so a claim made before is seen here.  A
 * second slot of one store arises when a claim of an earlier creation of
 * the store looked like another store's to slot_find; then the handle
 * forgets its slot, and finds the claimed one when the transaction is
 * retried (slot_find prefers a claimed slot).
 */
void
shared_store_check_siblings(RolloutStore *store, SharedStoreSlot *slot)
{
	SharedStoreSlot **siblings;
	int			count;
	bool		conflict = false;

	siblings = slot_candidates_now(store, &count);

	for (int i = 0; i < count && !conflict; i++)
	{
		bool		claimed;
		uint64		since;
		StaleClaim	stale;

		if (siblings[i] == slot)
			continue;
		LWLockAcquire(&siblings[i]->lock, LW_SHARED);
		claimed = siblings[i]->claim_put_id[0] != '\0';
		LWLockRelease(&siblings[i]->lock);
		if (!claimed)
			continue;
		switch (slot_standing(siblings[i], store, true, &since, &stale))
		{
			case SLOT_MEMBER:
				conflict = true;
				break;
			case SLOT_STALE:
				/* busy or refusing for good: retried without the claim lock */
				conflict = !slot_forget_stale_claim(siblings[i], &stale);
				break;
			default:
				break;
		}
	}
	pfree(siblings);
	if (conflict)
	{
		store->shared_slot = NULL;
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not commit to store \"%s\": another shared-memory slot of this cluster writes it",
						store->name),
				 errdetail("It was claimed meanwhile through credentials that reach the same store. The transaction is not committed."),
				 errhint("Retry the transaction.")));
	}
}

/*
 * See shared_store.h.  A slot whose claim's credentials are refused
 * (SLOT_STALE) counts: the commit goes to slot_find, which forgets it.
 */
bool
shared_store_writable_slot_exists(RolloutStore *store)
{
	SharedStoreSlot **candidates;
	int			count;
	bool		exists = false;

	if (!rollout_shared_available())
		return false;
	candidates = slot_candidates_now(store, &count);
	for (int i = 0; i < count && !exists; i++)
	{
		uint64		since;
		StaleClaim	stale;
		SlotStanding standing = slot_standing(candidates[i], store, true,
											  &since, &stale);

		exists = standing == SLOT_MEMBER || standing == SLOT_STALE;
	}
	pfree(candidates);
	return exists;
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
 * A slot's namespace generation: it changes whenever the slot may come to
 * stand for another store (shared_store_note_error_if_same).
 */
uint64
shared_store_slot_generation(SharedStoreSlot *slot)
{
	return pg_atomic_read_u64(&slot->namespace_generation);
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
