/*-------------------------------------------------------------------------
 *
 * shared_writer.c
 *		The per-shard writer in shared memory: group commit, the memtable,
 *		the epoch claim with its fence marker, and the counters of
 *		rollout_stat_stores.
 *
 * Shared memory holds one slot per (location, store, shard) this cluster
 * touches, and a DSA area of rollout_fdw.memtable_size for the rows.  The
 * location is the object store's identity (ObjectStore.identity: directory,
 * or endpoint, bucket and prefix), not the location string, which two
 * servers with different endpoints may share.
 *
 * Credentials.  Backends of every role and database share a slot, but none
 * may read or write through another's credentials: each commit request and
 * each memtable batch carries the access fingerprint of the store handle it
 * came through (a hash of identity and credentials).  A leader writes only
 * the requests of its own fingerprint; the others wait for a leader of
 * theirs.  A scan takes from memory only the batches of its own fingerprint
 * and reads the WAL entries of the others from the store, with its own
 * credentials.  Without that, a role holding no valid credentials could see
 * another role's unflushed rows, or get its rows written with another's.
 *
 * Group commit (DESIGN.md §6.2).  A committing backend puts its rows (a row
 * blob) in a commit request in the DSA area and appends it to the slot's
 * queue.  If no leader is active it becomes the leader: it takes every
 * queued request, writes them as ONE WAL entry at the next position with
 * create-if-absent, and wakes the others with the outcome.  Under load one
 * PUT carries many transactions, so throughput is no longer one transaction
 * per object-store round trip.  Positions stay strictly sequential because
 * only the leader writes, and the leader knows the tip (no listing).
 *
 * Nothing here holds a lock during I/O: the slot's LWLock guards only
 * pointer updates (microseconds).  From the moment a request is queued until
 * its outcome is known, the committer holds off interrupts: once its rows
 * may be in a PUT, a cancel must not report failure for a write that lands.
 *
 * Memtable (§6.4).  After the PUT the requests become a memtable batch (no
 * copy).  Scans on this cluster copy the batches, so committed rows are
 * visible at once without reading the WAL back.  Flush writes a generation
 * from the batches and then drops them.  When the memtable is full, a
 * committer flushes (waiting for a flush in progress) instead of failing.
 *
 * Epochs and fencing (§8).  The first commit after startup claims the shard:
 * it first flushes whatever is durable in the WAL (the replay), then commits
 * the shard manifest with writer_epoch + 1 and epoch_start_position = tip + 1,
 * then creates a fence marker (a WAL entry without rows) at that position.
 * A previous writer's next PUT can only target that position (positions are
 * sequential), finds the fence of a newer epoch, and stops.  A writer that
 * finds itself fenced reopens once; fenced again, it refuses commits until
 * the server restarts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/dsa.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "rollout/flush.h"
#include "rollout/manifest.h"
#include "rollout/rollout_fdw.h"
#include "rollout/shard_claim.h"
#include "rollout/shared_writer.h"

#define SLOT_LOCATION_LEN	1024
#define SLOT_STORE_LEN		256
#define SLOT_SHARD_LEN		72
#define SLOT_ERROR_LEN		256

/* One WAL entry carries at most this many bytes of rows. */
#define LEADER_MAX_BATCH_BYTES	(64 * 1024 * 1024)


int			rollout_memtable_size_kb = 256 * 1024;
int			rollout_max_stores = 64;
int			rollout_commit_delay_us = -1;

/* the longest automatic commit delay (rollout_fdw.commit_delay = -1) */
#define COMMIT_DELAY_AUTO_MAX_US	5000

typedef enum WriterState
{
	WRITER_NONE,				/* not claimed since startup (or reopening) */
	WRITER_INITIALIZING,		/* a backend is claiming the shard */
	WRITER_READY,
	WRITER_FENCED,				/* fenced twice: refuses commits */
	WRITER_SUPERSEDED			/* a promoted standby took the shard over */
} WriterState;

typedef enum RequestStatus
{
	REQUEST_PENDING,
	REQUEST_DONE,
	REQUEST_FAILED
} RequestStatus;

/*
 * One transaction's rows, in the DSA area.  Queued, then (once durable) part
 * of a memtable batch through the same next link.
 */
typedef struct CommitRequest
{
	dsa_pointer next;
	RequestStatus status;
	int64		position;
	int64		row_count;
	int64		rows_len;		/* bytes of the row blob at data */
	int64		ingest_len;		/* bytes of ingest references after it */
	Size		size;			/* of this allocation, for accounting */
	int			error_code;		/* the failed entry's SQLSTATE */
	char		error[SLOT_ERROR_LEN * 2];	/* its message and context */
	char		fingerprint[OBJSTORE_FINGERPRINT_LEN];	/* whose credentials */
	char		data[FLEXIBLE_ARRAY_MEMBER];
} CommitRequest;

/* A durable WAL entry's rows: the chain of its requests. */
typedef struct MemBatch
{
	dsa_pointer next;
	int64		position;
	int64		stamp;			/* the entry's effective stamp */
	int64		row_count;
	int64		ingest_rows;	/* rows of the ingest segments it names */
	int64		bytes;
	TimestampTz durable_at;
	dsa_pointer requests;
	char		fingerprint[OBJSTORE_FINGERPRINT_LEN];	/* who wrote the entry */
} MemBatch;

struct SharedStoreSlot
{
	bool		in_use;
	char		identity[SLOT_LOCATION_LEN];	/* ObjectStore.identity: the key */
	char		location[SLOT_LOCATION_LEN];	/* as configured, for the view */
	char		store[SLOT_STORE_LEN];
	char		shard[SLOT_SHARD_LEN];
	char		incarnation[SLOT_SHARD_LEN];	/* of the store the state is about */

	LWLock		lock;			/* everything below; never held across I/O */
	ConditionVariable commit_cv;	/* request outcomes, leadership */
	ConditionVariable state_cv; /* writer state, flush in progress */

	WriterState writer_state;
	int			times_fenced;
	int64		epoch;
	int64		tip;			/* highest durable position */
	int64		last_stamp;		/* effective stamp at tip */
	bool		leader_active;
	bool		flushing;
	int64		last_group_transactions;	/* in the last entry written */

	dsa_pointer queue_head;
	dsa_pointer queue_tail;
	int64		queued_bytes;

	dsa_pointer mem_head;
	dsa_pointer mem_tail;
	int64		mem_bytes;
	int64		mem_rows;
	int64		mem_ingest_rows;	/* rows in ingest segments batches name */
	int64		mem_batches;

	/* counters (rollout_stat_stores) */
	int64		rows_appended;
	int64		bytes_appended;
	int64		transactions_committed;
	int64		transactions_failed;
	int64		wal_puts;
	int64		put_time_total_us;
	int64		put_time_max_us;
	int64		backpressure_waits;
	int64		events[4];
	int64		event_last_us[4];
	int64		errors;
	char		last_error[SLOT_ERROR_LEN];
	TimestampTz last_error_at;
};

typedef struct RolloutSharedState
{
	int			max_stores;
	int			tranche_id;
	Size		memtable_size;
	LWLock		registry_lock;	/* slot allocation */
	slock_t		usage_lock;		/* memtable_used */
	int64		memtable_used;	/* reserved bytes of every slot together */
	SharedStoreSlot slots[FLEXIBLE_ARRAY_MEMBER];
} RolloutSharedState;

static RolloutSharedState *shared_state = NULL;
static void *memtable_place = NULL;
static dsa_area *memtable_area = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* ----------------------------------------------------------------
 * Shared memory set-up
 * ----------------------------------------------------------------
 */

static Size
shared_state_size(void)
{
	return add_size(offsetof(RolloutSharedState, slots),
					mul_size(rollout_max_stores, sizeof(SharedStoreSlot)));
}

static Size
memtable_area_size(void)
{
	return (Size) rollout_memtable_size_kb * 1024;
}

static void
rollout_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(shared_state_size());
	RequestAddinShmemSpace(memtable_area_size());
}

static void
rollout_shmem_startup(void)
{
	bool		found_state;
	bool		found_memtable;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared_state = ShmemInitStruct("rollout_fdw shared state", shared_state_size(),
								   &found_state);
	memtable_place = ShmemInitStruct("rollout_fdw memtable", memtable_area_size(),
									 &found_memtable);
	if (!found_state)
	{
		dsa_area   *area;

		memset(shared_state, 0, shared_state_size());
		shared_state->max_stores = rollout_max_stores;
		shared_state->tranche_id = LWLockNewTrancheId();
		shared_state->memtable_size = memtable_area_size();
		LWLockInitialize(&shared_state->registry_lock, shared_state->tranche_id);
		SpinLockInit(&shared_state->usage_lock);
		for (int i = 0; i < shared_state->max_stores; i++)
		{
			SharedStoreSlot *slot = &shared_state->slots[i];

			LWLockInitialize(&slot->lock, shared_state->tranche_id);
			ConditionVariableInit(&slot->commit_cv);
			ConditionVariableInit(&slot->state_cv);
			slot->queue_head = slot->queue_tail = InvalidDsaPointer;
			slot->mem_head = slot->mem_tail = InvalidDsaPointer;
		}

		/*
		 * The memtable's rows live in a DSA area placed in this segment and
		 * never growing past it: a full memtable means back-pressure, not
		 * more memory.  Backends attach to it on first use.
		 */
		area = dsa_create_in_place(memtable_place, memtable_area_size(),
								   shared_state->tranche_id, NULL);
		dsa_set_size_limit(area, memtable_area_size());
	}
	LWLockRelease(AddinShmemInitLock);
	LWLockRegisterTranche(shared_state->tranche_id, "rollout_fdw");
}

void
rollout_shared_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = rollout_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = rollout_shmem_startup;
}

bool
rollout_shared_available(void)
{
	return shared_state != NULL;
}

static dsa_area *
memtable_dsa(void)
{
	if (memtable_area == NULL)
	{
		MemoryContext oldcontext = MemoryContextSwitchTo(TopMemoryContext);

		memtable_area = dsa_attach_in_place(memtable_place, NULL);
		MemoryContextSwitchTo(oldcontext);
	}
	return memtable_area;
}

/*
 * What the DSA area really holds: its allocator keeps superblocks and size
 * classes, so it runs out well before its nominal size (at about 80% in our
 * measurements).  Reserving against 70% makes back-pressure a wait for a
 * flush rather than a failed allocation.
 */
static int64
memtable_usable_bytes(void)
{
	return (int64) (memtable_area_size() / 10 * 7);
}

/* Take size bytes of the whole memtable's budget; false if they do not fit. */
static bool
memtable_budget_take(int64 size)
{
	bool		fits;

	SpinLockAcquire(&shared_state->usage_lock);
	fits = shared_state->memtable_used + size <= memtable_usable_bytes();
	if (fits)
		shared_state->memtable_used += size;
	SpinLockRelease(&shared_state->usage_lock);
	return fits;
}

static void
memtable_budget_return(int64 size)
{
	SpinLockAcquire(&shared_state->usage_lock);
	shared_state->memtable_used -= size;
	SpinLockRelease(&shared_state->usage_lock);
}

int64
shared_store_max_transaction_bytes(void)
{
	/* a quarter of what the memtable holds: a few of them always fit */
	return memtable_usable_bytes() / 4;
}

/* ----------------------------------------------------------------
 * Slots
 * ----------------------------------------------------------------
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
 * Unlink the oldest memtable batch and free it with its requests, giving
 * their bytes back to the budget (slot lock held exclusively).
 */
static void
memtable_drop_oldest(SharedStoreSlot *slot, dsa_area *area)
{
	dsa_pointer batch_pointer = slot->mem_head;
	MemBatch   *batch = dsa_get_address(area, batch_pointer);

	slot->mem_head = batch->next;
	if (!DsaPointerIsValid(slot->mem_head))
		slot->mem_tail = InvalidDsaPointer;
	slot->mem_bytes -= batch->bytes;
	slot->mem_rows -= batch->row_count;
	slot->mem_ingest_rows -= batch->ingest_rows;
	slot->mem_batches--;
	for (dsa_pointer p = batch->requests; DsaPointerIsValid(p);)
	{
		dsa_pointer next = ((CommitRequest *) dsa_get_address(area, p))->next;

		dsa_free(area, p);
		p = next;
	}
	memtable_budget_return(batch->bytes - sizeof(MemBatch));
	dsa_free(area, batch_pointer);
}

/*
 * A slot keeps state about one creation of a store.  When a backend meets
 * the store under another incarnation (deleted and created again under the
 * same name), the slot's memtable and claim belong to files that are gone:
 * forget them, so that the next commit claims the new store afresh and no
 * row of the old store leaks into it.  Waits for a group commit in flight.
 */
static void
slot_adopt_incarnation(SharedStoreSlot *slot, RolloutStore *store)
{
	dsa_area   *area;

	/* a store not created yet has no incarnation to speak of */
	if (store->pending_definition != NULL ||
		strncmp(slot->incarnation, store->incarnation, SLOT_SHARD_LEN - 1) == 0)
		return;
	area = memtable_dsa();
	for (;;)
	{
		bool		busy;

		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		busy = slot->leader_active || DsaPointerIsValid(slot->queue_head) ||
			slot->flushing || slot->writer_state == WRITER_INITIALIZING;
		if (!busy)
		{
			if (strncmp(slot->incarnation, store->incarnation, SLOT_SHARD_LEN - 1) != 0)
			{
				while (DsaPointerIsValid(slot->mem_head))
					memtable_drop_oldest(slot, area);
				slot->writer_state = WRITER_NONE;
				slot->times_fenced = 0;
				slot->epoch = slot->tip = slot->last_stamp = 0;
				slot->mem_ingest_rows = 0;
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
		slot_adopt_incarnation(found, store);
		store->shared_slot = found;
	}
	return found;
}

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
		slot_adopt_incarnation(found, store);
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
 * An error about a store that could not even be opened: recorded in the
 * slots of that location string and store (the store is not open, so its
 * identity is not known).  A store that never opened has none and only gets
 * the log line: allocating slots for it would let any role that can create
 * tables fill the slots with stores that do not work.
 */
void
shared_store_note_error_by_name(const char *location, const char *store_name,
								const char *shard, const char *message)
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
			shared_store_note_error(slot, message);
	}
}

/* ----------------------------------------------------------------
 * Claiming the shard
 * ----------------------------------------------------------------
 */

/*
 * Claim the shard for this cluster (shard_claim.c) and set the slot's
 * epoch, tip and last_stamp (the caller publishes them).  A writer
 * reopening after a fence may still hold batches of its old epoch: they are
 * durable entries, sealed by the claim's replay, so they go.
 */
static void
shared_writer_claim(RolloutStore *store, SharedStoreSlot *slot,
					volatile bool *superseded)
{
	ShardClaim	claim = shard_claim(store, false, superseded);

	shared_memtable_trim(slot, claim.fence_position - 1);
	slot->epoch = claim.epoch;
	slot->tip = claim.fence_position;
	slot->last_stamp = claim.stamp;
}

/* Make sure this cluster's writer of the shard is ready (claim it once). */
static void
shared_writer_ensure_ready(RolloutStore *store, SharedStoreSlot *slot)
{
	volatile bool superseded = false;

	ConditionVariablePrepareToSleep(&slot->state_cv);
	for (;;)
	{
		WriterState state;

		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		state = slot->writer_state;
		if (state == WRITER_NONE)
			slot->writer_state = WRITER_INITIALIZING;
		LWLockRelease(&slot->lock);

		if (state == WRITER_READY)
		{
			ConditionVariableCancelSleep();
			return;
		}
		if (state == WRITER_FENCED)
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("shard \"%s\" of store \"%s\" is owned by another writer",
							store->shard, store->name),
					 errdetail("This cluster was fenced twice and does not claim the shard again."),
					 errhint("Give each cluster its own rollout_fdw.shard_id, then restart.")));
		}
		if (state == WRITER_SUPERSEDED)
		{
			ShardManifest *manifest;

			ConditionVariableCancelSleep();
			manifest = shard_manifest_read_latest(store, store->shard);
			rollout_check_not_superseded(store, manifest->writer_timeline);
			/* the manifest no longer says so (a store created anew): claim */
			LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
			if (slot->writer_state == WRITER_SUPERSEDED)
				slot->writer_state = WRITER_NONE;
			LWLockRelease(&slot->lock);
			ConditionVariablePrepareToSleep(&slot->state_cv);
			continue;
		}
		if (state == WRITER_NONE)
			break;				/* we claim it */
		ConditionVariableSleep(&slot->state_cv, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();

	PG_TRY();
	{
		shared_writer_claim(store, slot, &superseded);
	}
	PG_CATCH();
	{
		/* taken over by a promoted standby: refuse commits for good */
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		slot->writer_state = superseded ? WRITER_SUPERSEDED : WRITER_NONE;
		LWLockRelease(&slot->lock);
		ConditionVariableBroadcast(&slot->state_cv);
		PG_RE_THROW();
	}
	PG_END_TRY();

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	slot->writer_state = WRITER_READY;
	LWLockRelease(&slot->lock);
	ConditionVariableBroadcast(&slot->state_cv);
}

/* ----------------------------------------------------------------
 * Group commit
 * ----------------------------------------------------------------
 */

/* Ingest references, serialised after a request's rows. */
static void
request_append_ingest(StringInfo buf, List *ingest)
{
	ListCell   *lc;

	foreach(lc, ingest)
	{
		WalIngestRef *ref = lfirst(lc);

		appendStringInfo(buf, INT64_FORMAT " %s", ref->rows, ref->file);
		appendStringInfoChar(buf, '\0');
	}
}

static List *
request_ingest(CommitRequest *request)
{
	List	   *ingest = NIL;
	const char *p = request->data + request->rows_len;
	const char *end = p + request->ingest_len;

	while (p < end)
	{
		WalIngestRef *ref = palloc0(sizeof(WalIngestRef));
		char	   *space = strchr(p, ' ');

		ref->rows = strtoll(p, NULL, 10);
		ref->file = pstrdup(space + 1);
		ingest = lappend(ingest, ref);
		p += strlen(p) + 1;
	}
	return ingest;
}

/* Mark every request of a chain with an outcome (slot lock held). */
static void
requests_finish(dsa_area *area, dsa_pointer head, RequestStatus status,
				int64 position, int error_code, const char *error)
{
	for (dsa_pointer p = head; DsaPointerIsValid(p);)
	{
		CommitRequest *request = dsa_get_address(area, p);

		request->status = status;
		request->position = position;
		request->error_code = error_code;
		if (error != NULL)
			strlcpy(request->error, error, sizeof(request->error));
		p = request->next;
	}
}

/*
 * How long a leader waits for more transactions before it takes the queue
 * (rollout_fdw.commit_delay).
 *
 * Why wait at all: committers that go on committing (a pool of clients, a
 * loop of single-row transactions) come back together when a group's PUT
 * lands.  The first of them becomes leader at once and writes a group of
 * one or two while the rest queue behind that PUT: most commits then cost
 * two round trips to the store instead of one.  A short wait lets the whole
 * crowd into one entry.  The automatic setting (-1, the default) waits a
 * tenth of this store's mean PUT time, at most 5 ms (noise on a local disk,
 * a small fraction of a round trip to an object store), and, like
 * PostgreSQL's commit_delay with commit_siblings, only while transactions
 * commit concurrently (the last entry carried more than one), so a lone
 * committer never pays for it.  A positive setting is a fixed wait, always;
 * 0 never waits.
 */
static long
leader_commit_delay_us(SharedStoreSlot *slot)
{
	int64		group;
	int64		puts;
	int64		put_time_us;

	if (rollout_commit_delay_us >= 0)
		return rollout_commit_delay_us;
	LWLockAcquire(&slot->lock, LW_SHARED);
	group = slot->last_group_transactions;
	puts = slot->wal_puts;
	put_time_us = slot->put_time_total_us;
	LWLockRelease(&slot->lock);
	if (group <= 1 || puts == 0)
		return 0;
	return (long) Min(put_time_us / puts / 10, COMMIT_DELAY_AUTO_MAX_US);
}

/*
 * Write the queued requests as one WAL entry.  Called by the leader, with
 * interrupts held; releases leadership before returning.
 */
static void
shared_lead(RolloutStore *store, SharedStoreSlot *slot, dsa_pointer own)
{
	dsa_area   *area = memtable_dsa();
	dsa_pointer head;
	dsa_pointer batch_pointer;
	MemBatch   *batch;
	List	   *blobs = NIL;
	WalEntryMetadata metadata = {0};
	int64		rows = 0;
	int64		bytes = 0;
	int64		transactions = 0;
	char	   *path;
	volatile int64 position;
	bool		ready;
	int64		epoch;
	int64		previous_stamp;
	TimestampTz started;
	int64		elapsed_us;
	MemoryContext caller_context;
	ListCell   *lc;

	{
		long		delay_us = leader_commit_delay_us(slot);

		if (delay_us > 0)
			pg_usleep(delay_us);
	}

	/* the batch header first: once the PUT landed nothing may fail */
	batch_pointer = dsa_allocate_extended(area, sizeof(MemBatch), DSA_ALLOC_NO_OOM);

	/*
	 * Take the queued requests that came through our credentials (the
	 * others wait for a leader of theirs, see the file header), in queue
	 * order and up to a bounded entry size, but always up to and including
	 * the leader's own request.  The rest stay queued in their order.
	 */
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	head = InvalidDsaPointer;
	{
		const char *fingerprint = ((CommitRequest *) dsa_get_address(area, own))->fingerprint;
		dsa_pointer taken_tail = InvalidDsaPointer;
		dsa_pointer kept_head = InvalidDsaPointer;
		dsa_pointer kept_tail = InvalidDsaPointer;
		dsa_pointer p = slot->queue_head;
		bool		own_taken = false;
		bool		full = false;

		while (DsaPointerIsValid(p))
		{
			CommitRequest *request = dsa_get_address(area, p);
			dsa_pointer next = request->next;
			bool		take;

			if (own_taken && bytes + request->rows_len > LEADER_MAX_BATCH_BYTES)
				full = true;
			take = !full && strcmp(request->fingerprint, fingerprint) == 0;
			request->next = InvalidDsaPointer;
			if (take)
			{
				if (p == own)
					own_taken = true;
				bytes += request->rows_len;
				rows += request->row_count;
				transactions++;
				if (DsaPointerIsValid(taken_tail))
					((CommitRequest *) dsa_get_address(area, taken_tail))->next = p;
				else
					head = p;
				taken_tail = p;
			}
			else
			{
				if (DsaPointerIsValid(kept_tail))
					((CommitRequest *) dsa_get_address(area, kept_tail))->next = p;
				else
					kept_head = p;
				kept_tail = p;
			}
			p = next;
		}
		slot->queue_head = kept_head;
		slot->queue_tail = kept_tail;

		/*
		 * What this entry is written under, as the claim left it: a waiter
		 * that becomes leader did not go through shared_writer_ensure_ready,
		 * and the writer may have been fenced since its request was queued.
		 */
		ready = slot->writer_state == WRITER_READY;
		epoch = slot->epoch;
		position = slot->tip + 1;
		previous_stamp = slot->last_stamp;
	}
	LWLockRelease(&slot->lock);

	if (!DsaPointerIsValid(batch_pointer) || !ready)
	{
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		if (!ready)
			requests_finish(area, head, REQUEST_FAILED, 0, ERRCODE_T_R_SERIALIZATION_FAILURE,
							psprintf("the writer of shard \"%s\" is being reopened after it was fenced; retry the transaction",
									 store->shard));
		else
			requests_finish(area, head, REQUEST_FAILED, 0, ERRCODE_OUT_OF_MEMORY,
							"the rollout_fdw memtable has no room for a batch header");
		slot->leader_active = false;
		LWLockRelease(&slot->lock);
		ConditionVariableBroadcast(&slot->commit_cv);
		if (DsaPointerIsValid(batch_pointer))
			dsa_free(area, batch_pointer);
		return;
	}

	/*
	 * From here every failure fails exactly the requests taken: none may
	 * stay pending, their committers wait with interrupts held.
	 */
	path = rollout_scratch_file_path("wal");
	started = GetCurrentTimestamp();
	caller_context = CurrentMemoryContext;
	PG_TRY();
	{
		/* the entry: every request's rows, in queue (commit) order */
		for (dsa_pointer p = head; DsaPointerIsValid(p);)
		{
			CommitRequest *request = dsa_get_address(area, p);
			StringInfo	blob = palloc0(sizeof(StringInfoData));

			blob->data = request->data;
			blob->len = request->rows_len;
			blob->maxlen = request->rows_len + 1;
			blobs = lappend(blobs, blob);
			metadata.ingest = list_concat(metadata.ingest, request_ingest(request));
			p = request->next;
		}
		metadata.kind = "wal";
		metadata.shard = store->shard;
		metadata.epoch = epoch;
		metadata.stamp = Max(wal_next_stamp(), previous_stamp + 1);
		metadata.put_id = objstore_new_put_id();
		metadata.transactions = transactions;

		wal_write_entry_file(store, blobs, &metadata, path);
		for (;;)
		{
			char	   *key = rollout_key_wal(store, store->shard, position);
			WalEntryMetadata *owner;

			if (objstore_create_from_file_if_absent(store->objstore, key, path,
													metadata.put_id) == OBJSTORE_CREATED)
				break;
			owner = wal_read_metadata(store, key, position);
			if (owner->epoch > epoch)
			{
				/*
				 * Fenced.  Only the first leader to meet this fence counts
				 * it: the state may already say so, or a claim may be
				 * reopening the writer.
				 */
				LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
				if (slot->writer_state == WRITER_READY && slot->epoch == epoch)
					slot->writer_state = ++slot->times_fenced >= 2 ? WRITER_FENCED : WRITER_NONE;
				LWLockRelease(&slot->lock);
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("shard \"%s\" of store \"%s\" was taken over by another writer",
								store->shard, store->name),
						 errdetail("WAL position %lld holds an entry of writer epoch %lld; this writer has epoch %lld. Nothing was written.",
								   (long long) position, (long long) owner->epoch,
								   (long long) epoch),
						 errhint("Give each cluster its own rollout_fdw.shard_id.")));
			}
			/* an entry of our own epoch we did not know of: never skip it */
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("WAL position %lld of shard \"%s\" in store \"%s\" is taken by an unexpected entry",
							(long long) position, store->shard, store->name),
					 errdetail("Nothing was overwritten.")));
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(caller_context);
		edata = CopyErrorData();
		(void) unlink(path);
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		/* followers get the same SQLSTATE, message and context */
		requests_finish(area, head, REQUEST_FAILED, 0, edata->sqlerrcode,
						edata->context
						? psprintf("%s (%s)", edata->message, edata->context)
						: edata->message);
		slot->leader_active = false;
		slot->transactions_failed += transactions;
		slot->errors++;
		strlcpy(slot->last_error, edata->message, SLOT_ERROR_LEN);
		slot->last_error_at = GetCurrentTimestamp();
		LWLockRelease(&slot->lock);
		ConditionVariableBroadcast(&slot->commit_cv);
		dsa_free(area, batch_pointer);
		PG_RE_THROW();
	}
	PG_END_TRY();
	(void) unlink(path);
	elapsed_us = (int64) (GetCurrentTimestamp() - started);

	/* durable: the requests become a memtable batch */
	batch = dsa_get_address(area, batch_pointer);
	batch->next = InvalidDsaPointer;
	strlcpy(batch->fingerprint, store->objstore->access_fingerprint,
			OBJSTORE_FINGERPRINT_LEN);
	batch->position = position;
	batch->stamp = metadata.stamp;
	batch->row_count = rows;
	batch->ingest_rows = 0;
	foreach(lc, metadata.ingest)
		batch->ingest_rows += ((WalIngestRef *) lfirst(lc))->rows;
	batch->durable_at = GetCurrentTimestamp();
	batch->requests = head;
	batch->bytes = sizeof(MemBatch);
	for (dsa_pointer p = head; DsaPointerIsValid(p);)
	{
		CommitRequest *request = dsa_get_address(area, p);

		batch->bytes += request->size;
		p = request->next;
	}

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);

	/*
	 * A claim that ran meanwhile (the writer was fenced by someone else's
	 * entry and reopened) sealed this entry with its replay and owns the tip
	 * now; the batch is then at or below its replay_after, which scans and
	 * the next flush skip.
	 */
	if (slot->epoch == epoch)
	{
		slot->tip = position;
		slot->last_stamp = metadata.stamp;
	}
	if (DsaPointerIsValid(slot->mem_tail))
		((MemBatch *) dsa_get_address(area, slot->mem_tail))->next = batch_pointer;
	else
		slot->mem_head = batch_pointer;
	slot->mem_tail = batch_pointer;
	slot->mem_bytes += batch->bytes;
	slot->queued_bytes -= batch->bytes - sizeof(MemBatch);
	slot->mem_rows += rows;
	slot->mem_ingest_rows += batch->ingest_rows;
	slot->mem_batches++;
	slot->rows_appended += rows;
	slot->bytes_appended += bytes;
	slot->transactions_committed += transactions;
	slot->last_group_transactions = transactions;
	slot->wal_puts++;
	slot->put_time_total_us += elapsed_us;
	slot->put_time_max_us = Max(slot->put_time_max_us, elapsed_us);
	requests_finish(area, head, REQUEST_DONE, position, 0, NULL);
	slot->leader_active = false;
	LWLockRelease(&slot->lock);
	ConditionVariableBroadcast(&slot->commit_cv);
}

/*
 * Room for size more bytes in the memtable, waiting for a flush when there
 * is none (back-pressure).  The budget is the whole memtable's, shared by
 * every store: a committer flushes its own store when that frees something,
 * and otherwise waits for other stores to be flushed (the sweeper flushes a
 * store that holds more than a quarter of the memtable at once).  Nothing is
 * queued yet, so the wait can be cancelled.
 */
static void
shared_reserve(RolloutStore *store, SharedStoreSlot *slot, Size size)
{
	for (;;)
	{
		int64		own_bytes;

		CHECK_FOR_INTERRUPTS();
		if (memtable_budget_take(size))
		{
			LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
			slot->queued_bytes += size;
			LWLockRelease(&slot->lock);
			return;
		}
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		slot->backpressure_waits++;
		own_bytes = slot->mem_bytes;
		LWLockRelease(&slot->lock);

		if (own_bytes > 0)
			(void) rollout_flush_shard(store);
		else
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 50, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

int64
shared_store_commit(RolloutStore *store, SharedStoreSlot *slot, StringInfo rows,
					int64 row_count, List *ingest)
{
	dsa_area   *area = memtable_dsa();
	StringInfoData refs;
	Size		size;
	volatile dsa_pointer pointer = InvalidDsaPointer;
	CommitRequest *request;
	bool		leader = false;
	RequestStatus status;
	int64		position;

	/*
	 * Create the store first if it is new (a table created since, or a store
	 * deleted and created again under the same name): only then is its
	 * incarnation known, and a slot still holding state of an older one is
	 * reset before anything is claimed or committed.  Both are no-ops once
	 * done.
	 */
	rollout_check_writable(store, "commit to");
	rollout_store_ensure_created(store);
	slot_adopt_incarnation(slot, store);
	shared_writer_ensure_ready(store, slot);
	rollout_store_register_shard(store);

	initStringInfo(&refs);
	request_append_ingest(&refs, ingest);
	size = offsetof(CommitRequest, data) + (rows ? rows->len : 0) + refs.len;

	for (;;)
	{
		bool		memtable_empty;

		shared_reserve(store, slot, size);
		pointer = dsa_allocate_extended(area, size, DSA_ALLOC_NO_OOM);
		if (DsaPointerIsValid(pointer))
			break;

		/*
		 * The area is full or fragmented after all: give the reservation
		 * back and wait for room like any back-pressure.  Only a transaction
		 * that does not fit even into an empty memtable fails.
		 */
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		slot->queued_bytes -= size;
		slot->backpressure_waits++;
		memtable_empty = slot->mem_bytes == 0 && slot->queued_bytes == 0;
		LWLockRelease(&slot->lock);
		memtable_budget_return(size);
		if (memtable_empty)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("the rollout_fdw memtable has no room for a transaction of %zu bytes", size),
					 errhint("Raise rollout_fdw.memtable_size or lower rollout_fdw.ingest_threshold.")));
		(void) rollout_flush_shard(store);
		CHECK_FOR_INTERRUPTS();
	}
	request = dsa_get_address(area, pointer);
	memset(request, 0, offsetof(CommitRequest, data));
	request->next = InvalidDsaPointer;
	request->status = REQUEST_PENDING;
	request->row_count = row_count;
	request->rows_len = rows ? rows->len : 0;
	request->ingest_len = refs.len;
	request->size = size;
	strlcpy(request->fingerprint, store->objstore->access_fingerprint,
			OBJSTORE_FINGERPRINT_LEN);
	if (rows)
		memcpy(request->data, rows->data, rows->len);
	memcpy(request->data + request->rows_len, refs.data, refs.len);

	/*
	 * From here our rows may be in a PUT: no cancel until we know whether
	 * they landed.  The wait is bounded by the leader's PUT.
	 */
	HOLD_INTERRUPTS();
	ConditionVariablePrepareToSleep(&slot->commit_cv);
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (DsaPointerIsValid(slot->queue_tail))
		((CommitRequest *) dsa_get_address(area, slot->queue_tail))->next = pointer;
	else
		slot->queue_head = pointer;
	slot->queue_tail = pointer;
	if (!slot->leader_active)
		slot->leader_active = leader = true;
	LWLockRelease(&slot->lock);

	for (;;)
	{
		if (leader)
		{
			PG_TRY();
			{
				shared_lead(store, slot, pointer);
			}
			PG_CATCH();
			{
				/*
				 * Our own request was in the failed entry (marked FAILED):
				 * release it and fail this transaction.  The ERROR already
				 * reset the interrupt holdoff count.
				 */
				ConditionVariableCancelSleep();
				LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
				slot->queued_bytes -= size;
				LWLockRelease(&slot->lock);
				memtable_budget_return(size);
				dsa_free(area, pointer);
				PG_RE_THROW();
			}
			PG_END_TRY();
			leader = false;
		}
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		status = request->status;
		if (status == REQUEST_PENDING && !slot->leader_active)
			slot->leader_active = leader = true;
		LWLockRelease(&slot->lock);
		if (status != REQUEST_PENDING)
			break;
		if (!leader)
			ConditionVariableSleep(&slot->commit_cv, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	RESUME_INTERRUPTS();

	if (status == REQUEST_FAILED)
	{
		char		error[SLOT_ERROR_LEN * 2];
		int			error_code = request->error_code;

		strlcpy(error, request->error, sizeof(error));
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		slot->queued_bytes -= size;
		LWLockRelease(&slot->lock);
		memtable_budget_return(size);
		dsa_free(area, pointer);
		ereport(ERROR,
				(errcode(error_code ? error_code : ERRCODE_IO_ERROR),
				 errmsg("could not commit to store \"%s\": %s", store->name, error),
				 errdetail("The transaction's rows were in a group commit whose WAL entry was not written; nothing of it is visible.")));
	}
	position = request->position;	/* the request now belongs to the memtable */
	return position;
}

/* ----------------------------------------------------------------
 * The memtable, read
 * ----------------------------------------------------------------
 */

/*
 * Copy one batch into snapshot sources.  A scan (not rows_only) takes from
 * memory only a batch written through its own credentials; for any other it
 * gets the batch's WAL entry, to read from the store with its own (see the
 * file header).  The entry exists: it is unflushed, and garbage collection
 * removes only entries a flush sealed, after the grace period.
 */
static void
memtable_batch_sources(RolloutStore *store, dsa_area *area, MemBatch *batch,
					   bool rows_only, List **sources, List **ingest_seen)
{
	SnapshotSource *source;
	StringInfoData rows;
	ListCell   *lc;

	if (!rows_only &&
		strcmp(batch->fingerprint, store->objstore->access_fingerprint) != 0)
	{
		source = snapshot_source_new(SNAPSHOT_WAL_ENTRY);
		source->key = rollout_key_wal(store, store->shard, batch->position);
		source->shard = store->shard;
		source->shard_hash = store->shard_hash;
		source->position = batch->position;
		source->stamp_floor = batch->stamp - 1;
		*sources = lappend(*sources, source);
		return;
	}

	source = snapshot_source_new(SNAPSHOT_MEMTABLE);
	initStringInfo(&rows);
	for (dsa_pointer p = batch->requests; DsaPointerIsValid(p);)
	{
		CommitRequest *request = dsa_get_address(area, p);
		List	   *ingest = request_ingest(request);

		appendBinaryStringInfo(&rows, request->data, request->rows_len);
		foreach(lc, ingest)
		{
			WalIngestRef *ref = lfirst(lc);

			if (rows_only)
			{
				IngestSeen *seen = palloc0(sizeof(IngestSeen));

				seen->file = ref->file;
				seen->rows = ref->rows;
				seen->position = batch->position;
				seen->stamp = batch->stamp;
				*ingest_seen = lappend(*ingest_seen, seen);
			}
			else
			{
				SnapshotSource *ingest_source = snapshot_source_new(SNAPSHOT_INGEST);

				ingest_source->key = ref->file;
				ingest_source->shard = store->shard;
				ingest_source->shard_hash = store->shard_hash;
				ingest_source->position = batch->position;
				ingest_source->rows = ref->rows;
				ingest_source->stamp_fixed = batch->stamp;
				*sources = lappend(*sources, ingest_source);
			}
		}
		p = request->next;
	}
	source->key = psprintf("memtable position %lld", (long long) batch->position);
	source->shard = store->shard;
	source->shard_hash = store->shard_hash;
	source->position = batch->position;
	source->rows = batch->row_count;
	source->stamp_fixed = batch->stamp;
	source->rows_data = rows.data;
	source->rows_len = rows.len;
	if (rows.len > 0)
		*sources = lappend(*sources, source);
}

static bool
memtable_collect(RolloutStore *store, SharedStoreSlot *slot, bool rows_only,
				 List **sources, List **ingest_seen, int64 *last_position,
				 int64 *last_stamp)
{
	dsa_area   *area = memtable_dsa();
	bool		ready;

	*sources = NIL;
	LWLockAcquire(&slot->lock, LW_SHARED);
	ready = slot->writer_state == WRITER_READY;
	if (ready)
	{
		for (dsa_pointer p = slot->mem_head; DsaPointerIsValid(p);)
		{
			MemBatch   *batch = dsa_get_address(area, p);

			memtable_batch_sources(store, area, batch, rows_only, sources, ingest_seen);
			if (last_position)
				*last_position = batch->position;
			if (last_stamp)
				*last_stamp = batch->stamp;
			p = batch->next;
		}
	}
	LWLockRelease(&slot->lock);
	return ready;
}

bool
shared_memtable_sources(RolloutStore *store, SharedStoreSlot *slot, List **sources)
{
	return memtable_collect(store, slot, false, sources, NULL, NULL, NULL);
}

bool
shared_memtable_for_flush(RolloutStore *store, SharedStoreSlot *slot,
						  List **sources, List **ingest_seen,
						  int64 *last_position, int64 *last_stamp)
{
	*ingest_seen = NIL;
	*last_position = 0;
	return memtable_collect(store, slot, true, sources, ingest_seen,
							last_position, last_stamp) &&
		*last_position > 0;
}

bool
shared_writer_is_ready(SharedStoreSlot *slot)
{
	bool		ready;

	LWLockAcquire(&slot->lock, LW_SHARED);
	ready = slot->writer_state == WRITER_READY;
	LWLockRelease(&slot->lock);
	return ready;
}

void
shared_memtable_trim(SharedStoreSlot *slot, int64 upto_position)
{
	dsa_area   *area = memtable_dsa();

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	while (DsaPointerIsValid(slot->mem_head) &&
		   ((MemBatch *) dsa_get_address(area, slot->mem_head))->position <= upto_position)
		memtable_drop_oldest(slot, area);
	LWLockRelease(&slot->lock);
}

bool
shared_memtable_rows(SharedStoreSlot *slot, int64 *rows)
{
	bool		ready;

	LWLockAcquire(&slot->lock, LW_SHARED);
	ready = slot->writer_state == WRITER_READY;
	*rows = slot->mem_rows + slot->mem_ingest_rows;
	LWLockRelease(&slot->lock);
	return ready;
}

TimestampTz
shared_memtable_oldest(SharedStoreSlot *slot, int64 *bytes)
{
	TimestampTz oldest = 0;

	LWLockAcquire(&slot->lock, LW_SHARED);
	if (DsaPointerIsValid(slot->mem_head))
		oldest = ((MemBatch *) dsa_get_address(memtable_dsa(), slot->mem_head))->durable_at;
	*bytes = slot->mem_bytes;
	LWLockRelease(&slot->lock);
	return oldest;
}

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

/* ----------------------------------------------------------------
 * Counters
 * ----------------------------------------------------------------
 */

void
shared_store_note_event(SharedStoreSlot *slot, SharedStoreEvent event,
						int64 duration_us)
{
	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	slot->events[event]++;
	slot->event_last_us[event] = duration_us;
	LWLockRelease(&slot->lock);
}

void
shared_store_note_error(SharedStoreSlot *slot, const char *message)
{
	if (slot == NULL)
		return;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	slot->errors++;
	strlcpy(slot->last_error, message, SLOT_ERROR_LEN);
	slot->last_error_at = GetCurrentTimestamp();
	LWLockRelease(&slot->lock);
}

int
shared_store_stats(SharedStoreStats **stats_out)
{
	SharedStoreStats *stats;
	int			count = 0;

	if (!rollout_shared_available())
	{
		*stats_out = NULL;
		return 0;
	}
	stats = palloc0(sizeof(SharedStoreStats) * shared_state->max_stores);
	for (int i = 0; i < shared_state->max_stores; i++)
	{
		SharedStoreSlot *slot = &shared_state->slots[i];
		SharedStoreStats *s = &stats[count];

		LWLockAcquire(&slot->lock, LW_SHARED);
		if (slot->in_use)
		{
			strlcpy(s->location, slot->location, sizeof(s->location));
			strlcpy(s->store, slot->store, sizeof(s->store));
			strlcpy(s->shard, slot->shard, sizeof(s->shard));
			s->writer_epoch = slot->epoch;
			s->wal_tip = slot->tip;
			s->rows_appended = slot->rows_appended;
			s->bytes_appended = slot->bytes_appended;
			s->transactions_committed = slot->transactions_committed;
			s->transactions_failed = slot->transactions_failed;
			s->wal_puts = slot->wal_puts;
			s->put_time_total_us = slot->put_time_total_us;
			s->put_time_max_us = slot->put_time_max_us;
			s->memtable_rows = slot->mem_rows;
			s->memtable_bytes = slot->mem_bytes;
			s->memtable_batches = slot->mem_batches;
			s->backpressure_waits = slot->backpressure_waits;
			s->flushes = slot->events[SHARED_EVENT_FLUSH];
			s->merges = slot->events[SHARED_EVENT_MERGE];
			s->compactions = slot->events[SHARED_EVENT_COMPACTION];
			s->gc_runs = slot->events[SHARED_EVENT_GC];
			s->last_flush_us = slot->event_last_us[SHARED_EVENT_FLUSH];
			s->last_merge_us = slot->event_last_us[SHARED_EVENT_MERGE];
			s->last_compaction_us = slot->event_last_us[SHARED_EVENT_COMPACTION];
			s->last_gc_us = slot->event_last_us[SHARED_EVENT_GC];
			s->errors = slot->errors;
			strlcpy(s->last_error, slot->last_error, sizeof(s->last_error));
			s->last_error_at = slot->last_error_at;
			count++;
		}
		LWLockRelease(&slot->lock);
	}
	*stats_out = stats;
	return count;
}
