/*-------------------------------------------------------------------------
 *
 * memtable.c
 *		The memtable: rows of durable WAL entries this cluster wrote and
 *		has not flushed, in shared memory (DESIGN.md §6.4).
 *
 * The rows live in one DSA area of rollout_fdw.memtable_size, placed in the
 * main shared memory segment and never growing past it, shared by every
 * store: a full memtable means back-pressure (group_commit.c), not more
 * memory.  A committer reserves its bytes from one budget first
 * (memtable_budget_take), then allocates its commit request; once the
 * request's WAL entry is durable, the requests of that entry become one
 * batch of its store's slot (memtable_add_batch).  Scans copy the batches
 * (memtable_sources), flush writes them into a generation and then drops
 * them (memtable_trim).
 *
 * Credentials.  A scan takes from memory only the batches written through
 * its own store handle's credentials (the access fingerprint); for any
 * other it gets the batch's WAL entry, to read from the store with its own.
 * Without that, a role whose server merely repeated another store's
 * location could read that store's unflushed rows.  The same for a batch
 * written through a table whose columns had other types (the schema digest,
 * store.h): its rows are read from the WAL entry, with their values checked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "rollout/memtable.h"
#include "rollout/store_keys.h"
#include "rollout/wal.h"

/* rollout_fdw.memtable_size (kB) */
static int	memtable_size_kb = 256 * 1024;

typedef struct MemtableState
{
	int			tranche_id;
	slock_t		usage_lock;		/* used */
	int64		used;			/* reserved bytes of every slot together */
} MemtableState;

static MemtableState *memtable_state = NULL;
static void *memtable_place = NULL;
static dsa_area *memtable_area = NULL;

/* Define rollout_fdw.memtable_size; _PG_init calls it while preloading. */
void
memtable_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.memtable_size",
							"Shared memory for the memtable: committed rows not yet flushed.",
							"When it is full, committers wait for a flush.",
							&memtable_size_kb,
							256 * 1024, 1024, MAX_KILOBYTES,
							PGC_POSTMASTER,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

static Size
memtable_area_size(void)
{
	return (Size) memtable_size_kb * 1024;
}

Size
memtable_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(MemtableState)), memtable_area_size());
}

/* Create or attach the memtable (shmem startup hook, AddinShmemInitLock held). */
void
memtable_shmem_init(void)
{
	bool		found_state;
	bool		found_area;

	memtable_state = ShmemInitStruct("rollout_fdw memtable state",
									 sizeof(MemtableState), &found_state);
	memtable_place = ShmemInitStruct("rollout_fdw memtable", memtable_area_size(),
									 &found_area);
	if (!found_state)
	{
		dsa_area   *area;

		memset(memtable_state, 0, sizeof(MemtableState));
		memtable_state->tranche_id = LWLockNewTrancheId();
		SpinLockInit(&memtable_state->usage_lock);

		/*
		 * Backends attach to the area on first use (memtable_dsa); the size
		 * limit keeps it inside the segment.
		 */
		area = dsa_create_in_place(memtable_place, memtable_area_size(),
								   memtable_state->tranche_id, NULL);
		dsa_set_size_limit(area, memtable_area_size());
	}
	LWLockRegisterTranche(memtable_state->tranche_id, "rollout_fdw memtable");
}

/*
 * This backend's handle on the memtable's DSA area, attached on first use.
 * The area was created in place in the main shared memory segment
 * (memtable_shmem_init), which every backend maps, so attaching needs no DSM
 * handle; the dsa_area is allocated in TopMemoryContext so that it lasts as
 * long as the backend.
 */
dsa_area *
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
int64
memtable_usable_bytes(void)
{
	return (int64) (memtable_area_size() / 10 * 7);
}

/* Take size bytes of the whole memtable's budget; false if they do not fit. */
bool
memtable_budget_take(int64 size)
{
	bool		fits;

	SpinLockAcquire(&memtable_state->usage_lock);
	fits = memtable_state->used + size <= memtable_usable_bytes();
	if (fits)
		memtable_state->used += size;
	SpinLockRelease(&memtable_state->usage_lock);
	return fits;
}

void
memtable_budget_return(int64 size)
{
	SpinLockAcquire(&memtable_state->usage_lock);
	memtable_state->used -= size;
	SpinLockRelease(&memtable_state->usage_lock);
}

/* How much of the budget is taken, from 0 to 1. */
double
memtable_budget_used_fraction(void)
{
	int64		used;

	SpinLockAcquire(&memtable_state->usage_lock);
	used = memtable_state->used;
	SpinLockRelease(&memtable_state->usage_lock);
	return (double) used / (double) Max(memtable_usable_bytes(), 1);
}

int64
memtable_max_transaction_bytes(void)
{
	/* a quarter of what the memtable holds: a few of them always fit */
	return memtable_usable_bytes() / 4;
}

/*
 * Unlink the oldest memtable batch and free it with its requests, giving
 * their bytes back to the budget (slot lock held exclusively).  A request
 * whose committer has not read its outcome yet is left to the committer
 * (CommitRequest.orphaned): freeing it would let another commit's request
 * take its place, whose outcome the committer would then read as its own.
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
		CommitRequest *request = dsa_get_address(area, p);
		dsa_pointer next = request->next;

		if (request->outcome_read)
			dsa_free(area, p);
		else
			request->orphaned = true;
		p = next;
	}
	memtable_budget_return(batch->bytes - sizeof(MemBatch));
	dsa_free(area, batch_pointer);
}

/* When the newest batch of a slot became durable, or 0 (slot lock held). */
TimestampTz
memtable_newest_durable_at(SharedStoreSlot *slot)
{
	if (!DsaPointerIsValid(slot->mem_tail))
		return 0;
	return ((MemBatch *) dsa_get_address(memtable_dsa(), slot->mem_tail))->durable_at;
}

/* Drop every batch of a slot (slot lock held exclusively). */
void
memtable_clear(SharedStoreSlot *slot)
{
	dsa_area   *area = memtable_dsa();

	while (DsaPointerIsValid(slot->mem_head))
		memtable_drop_oldest(slot, area);
}

/* The ingest references serialised after a commit request's rows. */
List *
memtable_request_ingest(CommitRequest *request)
{
	List	   *ingest = NIL;
	const char *p = request->data + request->rows_len;
	const char *end = p + request->ingest_len;

	while (p < end)
	{
		WalIngestRef *ref = palloc0(sizeof(WalIngestRef));
		char	   *cursor;

		/* "rows staged_at key" (group_commit.c, request_append_ingest) */
		ref->rows = strtoll(p, &cursor, 10);
		ref->staged_at = (TimestampTz) strtoll(cursor + 1, &cursor, 10);
		ref->file = pstrdup(cursor + 1);
		ingest = lappend(ingest, ref);
		p += strlen(p) + 1;
	}
	return ingest;
}

/*
 * Make the requests chained from head, whose WAL entry at position (with
 * effective stamp) is durable, the slot's newest batch; batch_pointer is
 * its header, allocated before the entry was written (so that nothing can
 * fail once it is).  The caller holds the slot's lock exclusively.
 */
void
memtable_add_batch(SharedStoreSlot *slot, dsa_pointer batch_pointer,
				   dsa_pointer head, int64 position, int64 stamp,
				   bool truncates, const char *fingerprint, uint64 schema_digest)
{
	dsa_area   *area = memtable_dsa();
	MemBatch   *batch = dsa_get_address(area, batch_pointer);

	batch->next = InvalidDsaPointer;
	strlcpy(batch->fingerprint, fingerprint, OBJSTORE_FINGERPRINT_LEN);
	batch->schema_digest = schema_digest;
	batch->position = position;
	batch->stamp = stamp;
	batch->truncates = truncates;
	batch->row_count = 0;
	batch->ingest_rows = 0;
	batch->durable_at = GetCurrentTimestamp();
	batch->requests = head;
	batch->bytes = sizeof(MemBatch);
	for (dsa_pointer p = head; DsaPointerIsValid(p);)
	{
		CommitRequest *request = dsa_get_address(area, p);
		const char *ref = request->data + request->rows_len;
		const char *end = ref + request->ingest_len;

		batch->bytes += request->size;
		batch->row_count += request->row_count;
		/* each reference is "<rows> <staged_at> <file>" and a NUL */
		for (; ref < end; ref += strlen(ref) + 1)
			batch->ingest_rows += strtoll(ref, NULL, 10);
		p = request->next;
	}

	if (DsaPointerIsValid(slot->mem_tail))
		((MemBatch *) dsa_get_address(area, slot->mem_tail))->next = batch_pointer;
	else
		slot->mem_head = batch_pointer;
	slot->mem_tail = batch_pointer;
	slot->mem_bytes += batch->bytes;
	slot->mem_rows += batch->row_count;
	slot->mem_ingest_rows += batch->ingest_rows;
	slot->mem_batches++;
}

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

	/*
	 * Rows written through a table whose columns had other types than this
	 * handle's cannot be decoded with its row descriptor (store.h): a scan
	 * reads them from their WAL entry, whose values it checks, and a flush,
	 * which would write them with the wrong types, refuses.
	 */
	if (batch->schema_digest != store->schema_digest && rows_only)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("store \"%s\" has unflushed rows written with other column types than this table's",
						store->name),
				 errdetail("A table of this cluster whose columns had other types wrote them; they cannot be flushed with this table's types."),
				 errhint("Flush the store through a table with the column types its _store.json had then.")));
	if (!rows_only &&
		(strcmp(batch->fingerprint, store->objstore->access_fingerprint) != 0 ||
		 batch->schema_digest != store->schema_digest))
	{
		source = snapshot_source_new(SNAPSHOT_WAL_ENTRY);
		source->key = rollout_key_wal(store, store->shard, batch->position);
		source->shard = store->shard;
		source->shard_hash = store->shard_hash;
		source->position = batch->position;
		source->stamp_floor = batch->stamp - 1;
		source->epoch_floor = 0;	/* published in order: never dead */
		*sources = lappend(*sources, source);
		return;
	}

	source = snapshot_source_new(SNAPSHOT_MEMTABLE);
	initStringInfo(&rows);
	for (dsa_pointer p = batch->requests; DsaPointerIsValid(p);)
	{
		CommitRequest *request = dsa_get_address(area, p);
		List	   *ingest = memtable_request_ingest(request);

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

/*
 * The work of memtable_sources and memtable_for_flush: copy every batch
 * after after_position, oldest first, into local sources
 * (memtable_batch_sources), or, given a budget, those up to the first that
 * would pass it, and note the newest batch's position and stamp where asked,
 * and the newest truncate cut of all the batches.  The copy is
 * made under one shared hold of the slot's lock, so a concurrent add or trim
 * cannot tear it.  Nothing is copied when the writer is not ready, since
 * only a ready writer's memtable is the whole WAL tail.
 */
static bool
memtable_collect(RolloutStore *store, SharedStoreSlot *slot, bool rows_only,
				 int64 after_position, MemtableBudget *budget,
				 List **sources, List **ingest_seen,
				 int64 *last_position, int64 *last_stamp,
				 int64 *truncate_stamp, int64 *epoch)
{
	dsa_area   *area = memtable_dsa();
	int64		budget_rows = budget ? budget->rows : 0;
	int64		budget_floor = budget ? budget->delivered_stamp : 0;
	bool		ready;

	*sources = NIL;
	*truncate_stamp = 0;
	LWLockAcquire(&slot->lock, LW_SHARED);

	/* the slot may have gone to another store since the handle found it */
	ready = slot->writer_state == WRITER_READY &&
		store_slot_is_current(store, slot);

	/* a claim drops the batches of earlier epochs (writer_epoch.c) */
	if (epoch)
		*epoch = slot->epoch;
	if (budget)
		budget->fence_position = ready ? slot->claim_position : 0;

	/*
	 * Batches below the newest truncate cut hold nothing a consumer gets (but
	 * the TRUNCATE's own rows, at the cut): they do not count against the
	 * budget, or a consumer behind a TRUNCATE of a long unflushed tail would
	 * need a round of copies per max_rows of rows it never gets.
	 */
	for (dsa_pointer p = ready && budget ? slot->mem_head : InvalidDsaPointer;
		 DsaPointerIsValid(p);)
	{
		MemBatch   *batch = dsa_get_address(area, p);

		if (batch->truncates)
			budget_floor = Max(budget_floor, batch->stamp - 1);
		p = batch->next;
	}
	if (ready)
	{
		for (dsa_pointer p = slot->mem_head; DsaPointerIsValid(p);)
		{
			MemBatch   *batch = dsa_get_address(area, p);

			if (batch->position > after_position && budget && budget_rows <= 0)
				budget->next_stamp = Min(budget->next_stamp, batch->stamp);
			else if (batch->position > after_position)
			{
				memtable_batch_sources(store, area, batch, rows_only, sources,
									   ingest_seen);
				if (budget && batch->stamp > budget_floor)
					budget_rows -= batch->row_count + batch->ingest_rows;
			}
			if (last_position)
				*last_position = batch->position;
			if (last_stamp)
				*last_stamp = batch->stamp;
			if (batch->truncates)
				*truncate_stamp = Max(*truncate_stamp, batch->stamp);
			p = batch->next;
		}
	}
	LWLockRelease(&slot->lock);
	return ready;
}

bool
memtable_sources(RolloutStore *store, SharedStoreSlot *slot,
				 int64 after_position, MemtableBudget *budget,
				 List **sources, int64 *truncate_stamp, int64 *epoch)
{
	if (budget)
		budget->next_stamp = PG_INT64_MAX;
	return memtable_collect(store, slot, false, after_position, budget,
							sources, NULL, NULL, NULL, truncate_stamp, epoch);
}

/*
 * Unlike a scan, a flush takes every batch's rows from memory whatever
 * credentials wrote them (rows_only: every credentials a slot serves reach
 * its store, shared_store.c), and gets the ingest references to adopt
 * rather than sources to read them.  An empty memtable leaves *last_position 0
 * and returns false, like a writer that is not ready.
 */
bool
memtable_for_flush(RolloutStore *store, SharedStoreSlot *slot,
				   List **sources, List **ingest_seen,
				   int64 *last_position, int64 *last_stamp,
				   int64 *truncate_stamp)
{
	*ingest_seen = NIL;
	*last_position = 0;
	return memtable_collect(store, slot, true, 0, NULL, sources, ingest_seen,
							last_position, last_stamp, truncate_stamp, NULL) &&
		*last_position > 0;
}

/*
 * Drop the batches at positions up to upto_position, which shard manifest
 * version manifest_version seals (and whose drops_covered_by_base is given,
 * manifest.h), taking the slot's lock itself.  Callers
 * trim only positions already sealed in a committed shard manifest (a flush
 * after its commit, a claim below its fence), never before: a snapshot
 * copies the memtable before it reads the manifest, and relies on every row
 * being in one or the other.  The manifest may come from this cluster's view
 * of the store (manifest_view.c) instead of the store, so the view learns
 * the version under the same hold of the lock as the batches go.
 */
void
memtable_trim(SharedStoreSlot *slot, int64 upto_position, int64 manifest_version,
			  int64 drops_covered_by_base)
{
	dsa_area   *area = memtable_dsa();
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	store_slot_view_record_shard(slot, slot->shard, manifest_version,
								 drops_covered_by_base, now);
	while (DsaPointerIsValid(slot->mem_head) &&
		   ((MemBatch *) dsa_get_address(area, slot->mem_head))->position <= upto_position)
		memtable_drop_oldest(slot, area);
	LWLockRelease(&slot->lock);
}

/*
 * The rows the memtable holds, those of the ingest segments its batches name
 * included, read under the slot's shared lock.  Returns false when the writer
 * is not ready: *rows is set all the same, but is then not the whole WAL tail,
 * which is only on the store.
 */
bool
memtable_rows(RolloutStore *store, SharedStoreSlot *slot, int64 *rows)
{
	bool		ready;

	LWLockAcquire(&slot->lock, LW_SHARED);
	ready = slot->writer_state == WRITER_READY &&
		store_slot_is_current(store, slot);
	*rows = slot->mem_rows + slot->mem_ingest_rows;
	LWLockRelease(&slot->lock);
	return ready;
}

/*
 * When the oldest batch became durable (0 for an empty memtable), and in
 * *bytes what the slot's batches hold, their headers included.  The sweeper
 * uses the size to flush at once a store that holds too much of the shared
 * memtable.
 */
TimestampTz
memtable_oldest(SharedStoreSlot *slot, int64 *bytes)
{
	TimestampTz oldest = 0;

	LWLockAcquire(&slot->lock, LW_SHARED);
	if (DsaPointerIsValid(slot->mem_head))
		oldest = ((MemBatch *) dsa_get_address(memtable_dsa(), slot->mem_head))->durable_at;
	*bytes = slot->mem_bytes;
	LWLockRelease(&slot->lock);
	return oldest;
}
