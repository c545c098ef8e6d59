/*-------------------------------------------------------------------------
 *
 * group_commit.c
 *		Group commit: many transactions' rows in one WAL entry, written by
 *		one of their committers (DESIGN.md §6.2).
 *
 * A committing backend puts its rows (a row blob) in a commit request in the
 * memtable's DSA area and appends it to its store slot's queue.  If no
 * leader is active it becomes the leader: it takes the queued requests,
 * writes them as ONE WAL entry at the next position with create-if-absent,
 * and wakes the others with the outcome.  Under load one PUT carries many
 * transactions, so throughput is no longer one transaction per object-store
 * round trip.  Positions stay strictly sequential because only the leader
 * writes, and the leader knows the tip (no listing).  Once durable, the
 * requests become a memtable batch (memtable.c) without a copy.
 *
 * Credentials.  A leader takes only the requests that came through its own
 * credentials (the access fingerprint of the store handle); the others wait
 * for a leader of theirs, in the same queue.
 *
 * Nothing here holds a lock during I/O: the slot's LWLock guards only
 * pointer updates (microseconds).  From the moment a request is queued until
 * its outcome is known, the committer holds off interrupts: once its rows
 * may be in a PUT, a cancel must not report failure for a write that lands.
 * When the memtable is full, a committer flushes (waiting for a flush in
 * progress) instead of failing: back-pressure.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "rollout/flush.h"
#include "rollout/grace.h"
#include "rollout/group_commit.h"
#include "rollout/memtable.h"
#include "rollout/scratch.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/wal.h"
#include "rollout/writer_epoch.h"

/* One WAL entry carries at most this many bytes of rows. */
#define LEADER_MAX_BATCH_BYTES	(64 * 1024 * 1024)

/* the longest automatic commit delay (rollout_fdw.commit_delay = -1) */
#define COMMIT_DELAY_AUTO_MAX_US	5000

/* rollout_fdw.commit_delay (microseconds; -1 automatic) */
static int	commit_delay_us = -1;

/* Define rollout_fdw.commit_delay; _PG_init calls this. */
void
group_commit_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.commit_delay",
							"Microseconds a group-commit leader waits for more transactions before it writes.",
							"-1 (default): automatic, a tenth of the store's mean WAL PUT time (at most 5 ms) while transactions commit concurrently; 0: never wait.",
							&commit_delay_us,
							-1, -1, 100000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
}

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

	if (commit_delay_us >= 0)
		return commit_delay_us;
	LWLockAcquire(&slot->lock, LW_SHARED);
	group = slot->last_group_transactions;
	puts = slot->wal_puts;
	put_time_us = slot->put_time_total_us;
	LWLockRelease(&slot->lock);
	if (group <= 1 || puts == 0)
		return 0;
	return (long) Min(put_time_us / puts / 10, COMMIT_DELAY_AUTO_MAX_US);
}

/* The requests a leader took from the queue, and what it writes them under. */
typedef struct LeaderBatch
{
	dsa_pointer head;			/* the taken requests, in queue order */
	int64		rows;
	int64		tombstones;		/* of the rows and ingest segments */
	int64		bytes;			/* of their row blobs */
	Size		reserved;		/* of their allocations: the memtable budget */
	int64		transactions;
	bool		truncate;		/* one of them ran TRUNCATE: so does the entry */

	/* the writer as the claim left it, when the requests were taken */
	bool		writer_ready;
	int64		epoch;
	int64		position;		/* the tip + 1 */
	int64		previous_stamp; /* effective stamp at the tip */
	TimestampTz tip_observed_at;	/* when the tip was known to be it */

	int64		stamp;			/* the entry's, once written */
} LeaderBatch;

/*
 * Take the queued requests that came through the leader's credentials (the
 * others wait for a leader of theirs, see the file header), in queue order
 * and up to a bounded entry size, but always up to and including the
 * leader's own request (own).  The rest stay queued in their order.
 */
static void
leader_take_requests(SharedStoreSlot *slot, dsa_area *area, dsa_pointer own,
					 LeaderBatch *batch)
{
	const char *fingerprint = ((CommitRequest *) dsa_get_address(area, own))->fingerprint;
	dsa_pointer taken_tail = InvalidDsaPointer;
	dsa_pointer kept_head = InvalidDsaPointer;
	dsa_pointer kept_tail = InvalidDsaPointer;
	bool		own_taken = false;
	bool		full = false;

	memset(batch, 0, sizeof(LeaderBatch));
	batch->head = InvalidDsaPointer;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	for (dsa_pointer p = slot->queue_head; DsaPointerIsValid(p);)
	{
		CommitRequest *request = dsa_get_address(area, p);
		dsa_pointer next = request->next;

		if (own_taken && batch->bytes + request->rows_len > LEADER_MAX_BATCH_BYTES)
			full = true;
		request->next = InvalidDsaPointer;
		if (!full && strcmp(request->fingerprint, fingerprint) == 0)
		{
			if (p == own)
				own_taken = true;
			batch->bytes += request->rows_len;
			batch->reserved += request->size;
			batch->rows += request->row_count;
			batch->tombstones += request->tombstone_count;
			batch->truncate |= request->truncate;
			batch->transactions++;
			if (DsaPointerIsValid(taken_tail))
				((CommitRequest *) dsa_get_address(area, taken_tail))->next = p;
			else
				batch->head = p;
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
	 * A waiter that becomes leader did not go through writer_ensure_ready,
	 * and the writer may have been fenced since its request was queued.
	 */
	batch->writer_ready = slot->writer_state == WRITER_READY;
	batch->epoch = slot->epoch;
	batch->position = slot->tip + 1;
	batch->previous_stamp = slot->last_stamp;
	batch->tip_observed_at = slot->tip_observed_at;
	LWLockRelease(&slot->lock);
}

/*
 * Fail every request of the batch with one SQLSTATE and message, and give
 * up leadership.  stats_error, if not NULL, is counted as the store's
 * latest error.
 */
static void
leader_fail(SharedStoreSlot *slot, dsa_area *area, LeaderBatch *batch,
			int error_code, const char *message, const char *stats_error)
{
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	requests_finish(area, batch->head, REQUEST_FAILED, 0, error_code, message);
	slot->leader_active = false;
	if (stats_error != NULL)
	{
		slot->transactions_failed += batch->transactions;
		slot->errors++;
		strlcpy(slot->last_error, stats_error, SLOT_ERROR_LEN);
		slot->last_error_at = GetCurrentTimestamp();
	}
	LWLockRelease(&slot->lock);
	ConditionVariableBroadcast(&slot->commit_cv);
}

/*
 * Write the batch as the WAL entry at its position, through the local file
 * path: every request's rows in queue (commit) order, with their ingest
 * references.  ERROR unless the entry is ours; nothing is overwritten.
 */
static void
leader_write_entry(RolloutStore *store, SharedStoreSlot *slot, dsa_area *area,
				   LeaderBatch *batch, const char *path)
{
	WalEntryMetadata metadata = {0};
	List	   *blobs = NIL;
	int64		owner_epoch;

	for (dsa_pointer p = batch->head; DsaPointerIsValid(p);)
	{
		CommitRequest *request = dsa_get_address(area, p);
		StringInfo	blob = palloc0(sizeof(StringInfoData));

		blob->data = request->data;
		blob->len = request->rows_len;
		blob->maxlen = request->rows_len + 1;
		blobs = lappend(blobs, blob);
		metadata.ingest = list_concat(metadata.ingest, memtable_request_ingest(request));
		p = request->next;
	}
	metadata.kind = "wal";
	metadata.shard = store->shard;
	metadata.epoch = batch->epoch;
	metadata.stamp = Max(wal_next_stamp(), batch->previous_stamp + 1);
	metadata.put_id = objstore_new_put_id();
	metadata.transactions = batch->transactions;
	metadata.truncate = batch->truncate;

	/*
	 * A tip learnt longer ago than half the minimum gc grace (an idle writer)
	 * is checked against the shard manifest first (grace.h).
	 */
	if (rollout_output_too_old(batch->tip_observed_at))
		writer_check_still_owner(store, slot, batch->epoch, batch->position);
	wal_write_entry_file(store, blobs, &metadata, path);
	switch (wal_put_entry(store, batch->position, path, metadata.put_id,
						  batch->epoch, &owner_epoch))
	{
		case WAL_PUT_CREATED:
			break;
		case WAL_PUT_FENCED:
			writer_note_fenced(slot, batch->epoch);
			shard_raise_taken_over(store, batch->position, owner_epoch, batch->epoch);
			break;
		case WAL_PUT_TAKEN:
			/* an entry we did not know of: never skip it */
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("WAL position %lld of shard \"%s\" in store \"%s\" is taken by an unexpected entry",
							(long long) batch->position, store->shard, store->name),
					 errdetail("Nothing was overwritten.")));
	}
	batch->stamp = metadata.stamp;
}

/*
 * The batch's entry is durable: its requests become the memtable batch at
 * batch_pointer, the counters move, and the committers learn the outcome.
 */
static void
leader_publish(RolloutStore *store, SharedStoreSlot *slot, dsa_area *area,
			   dsa_pointer batch_pointer, LeaderBatch *batch, TimestampTz started)
{
	int64		elapsed_us = (int64) (GetCurrentTimestamp() - started);

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);

	/*
	 * A claim that ran meanwhile (the writer was fenced by someone else's
	 * entry and reopened) sealed this entry with its replay and owns the tip
	 * now; the batch is then at or below its replay_after, which scans and
	 * the next flush skip.
	 */
	if (slot->epoch == batch->epoch)
	{
		slot->tip = batch->position;
		slot->last_stamp = batch->stamp;
		slot->tip_observed_at = started;
	}
	memtable_add_batch(slot, batch_pointer, batch->head, batch->position,
					   batch->stamp, batch->truncate,
					   store->objstore->access_fingerprint);
	slot->queued_bytes -= batch->reserved;
	slot->rows_appended += batch->rows;
	slot->rows_deleted += batch->tombstones;
	slot->bytes_appended += batch->bytes;
	slot->transactions_committed += batch->transactions;
	slot->last_group_transactions = batch->transactions;
	slot->wal_puts++;
	slot->put_time_total_us += elapsed_us;
	slot->put_time_max_us = Max(slot->put_time_max_us, elapsed_us);
	requests_finish(area, batch->head, REQUEST_DONE, batch->position, 0, NULL);
	slot->leader_active = false;
	LWLockRelease(&slot->lock);
	ConditionVariableBroadcast(&slot->commit_cv);
}

/*
 * Lead: write the queued requests (own among them) as one WAL entry.  Called
 * with interrupts held; gives up leadership before returning, and on every
 * failure fails exactly the requests it took, since none may stay pending
 * while their committers wait.
 */
static void
group_commit_lead(RolloutStore *store, SharedStoreSlot *slot, dsa_pointer own)
{
	dsa_area   *area = memtable_dsa();
	long		delay_us = leader_commit_delay_us(slot);
	MemoryContext caller_context = CurrentMemoryContext;
	LeaderBatch batch;
	dsa_pointer batch_pointer;
	TimestampTz started;
	char	   *path;

	if (delay_us > 0)
		pg_usleep(delay_us);

	/* the batch header first: once the PUT landed nothing may fail */
	batch_pointer = dsa_allocate_extended(area, sizeof(MemBatch), DSA_ALLOC_NO_OOM);
	leader_take_requests(slot, area, own, &batch);
	if (!batch.writer_ready)
	{
		leader_fail(slot, area, &batch, ERRCODE_T_R_SERIALIZATION_FAILURE,
					psprintf("the writer of shard \"%s\" is being reopened after it was fenced; retry the transaction",
							 store->shard), NULL);
		if (DsaPointerIsValid(batch_pointer))
			dsa_free(area, batch_pointer);
		return;
	}
	if (!DsaPointerIsValid(batch_pointer))
	{
		leader_fail(slot, area, &batch, ERRCODE_OUT_OF_MEMORY,
					"the rollout_fdw memtable has no room for a batch header", NULL);
		return;
	}

	path = rollout_scratch_file_path("wal");
	started = GetCurrentTimestamp();
	PG_TRY();
	{
		leader_write_entry(store, slot, area, &batch, path);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(caller_context);
		edata = CopyErrorData();
		(void) unlink(path);
		/* followers get the same SQLSTATE, message and context */
		leader_fail(slot, area, &batch, edata->sqlerrcode,
					edata->context
					? psprintf("%s (%s)", edata->message, edata->context)
					: edata->message,
					edata->message);
		dsa_free(area, batch_pointer);
		PG_RE_THROW();
	}
	PG_END_TRY();
	(void) unlink(path);
	leader_publish(store, slot, area, batch_pointer, &batch, started);
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
group_commit_reserve(RolloutStore *store, SharedStoreSlot *slot, Size size)
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

/*
 * A commit request holding rows (may be NULL) and the serialised ingest
 * references refs, in the memtable's area, its size reserved from the
 * budget: waits for room like any back-pressure.  Only a transaction that
 * does not fit even into an empty memtable fails.
 */
static dsa_pointer
commit_request_allocate(RolloutStore *store, SharedStoreSlot *slot,
						StringInfo rows, int64 row_count, int64 tombstone_count,
						StringInfo refs)
{
	dsa_area   *area = memtable_dsa();
	Size		size = offsetof(CommitRequest, data) + (rows ? rows->len : 0) + refs->len;
	dsa_pointer pointer;
	CommitRequest *request;

	for (;;)
	{
		bool		memtable_empty;

		group_commit_reserve(store, slot, size);
		pointer = dsa_allocate_extended(area, size, DSA_ALLOC_NO_OOM);
		if (DsaPointerIsValid(pointer))
			break;

		/* the area is full or fragmented after all: give the reservation back */
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
	request->tombstone_count = tombstone_count;
	request->rows_len = rows ? rows->len : 0;
	request->ingest_len = refs->len;
	request->size = size;
	strlcpy(request->fingerprint, store->objstore->access_fingerprint,
			OBJSTORE_FINGERPRINT_LEN);
	if (rows)
		memcpy(request->data, rows->data, rows->len);
	memcpy(request->data + request->rows_len, refs->data, refs->len);
	return pointer;
}

/* Free a request that did not become part of the memtable, and its budget. */
static void
commit_request_release(SharedStoreSlot *slot, dsa_pointer pointer)
{
	dsa_area   *area = memtable_dsa();
	Size		size = ((CommitRequest *) dsa_get_address(area, pointer))->size;

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	slot->queued_bytes -= size;
	LWLockRelease(&slot->lock);
	memtable_budget_return(size);
	dsa_free(area, pointer);
}

/*
 * Queue the request and wait for its outcome, leading whenever no leader
 * is active.  Interrupts are held throughout: once our rows may be in a
 * PUT, a cancel must not report failure for a write that lands; the wait
 * is bounded by the leader's PUT.  Returns the request's final status and,
 * when done, its entry's *position: read under the lock, since a done
 * request belongs to the memtable, which a flush may trim at any moment.
 */
static RequestStatus
commit_request_await(RolloutStore *store, SharedStoreSlot *slot,
					 dsa_pointer pointer, int64 *position)
{
	dsa_area   *area = memtable_dsa();
	CommitRequest *request = dsa_get_address(area, pointer);
	bool		leader = false;
	RequestStatus status;

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
				group_commit_lead(store, slot, pointer);
			}
			PG_CATCH();
			{
				/*
				 * Our own request was in the failed entry (marked FAILED):
				 * release it and fail this transaction.  The ERROR already
				 * reset the interrupt holdoff count.
				 */
				ConditionVariableCancelSleep();
				commit_request_release(slot, pointer);
				PG_RE_THROW();
			}
			PG_END_TRY();
			leader = false;
		}
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		status = request->status;
		*position = request->position;
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
	return status;
}

/*
 * Commit one transaction through the shard's group-commit queue
 * (group_commit.h).  The slot is brought to the store's current incarnation
 * and the writer made ready before anything is reserved or queued; then the
 * request is allocated (waiting for memtable room) and queued, and this
 * backend waits for its outcome, leading whenever no leader is active.  A
 * failed request is freed here and raised with the leader's SQLSTATE and
 * message; a done one belongs to the memtable from then on.
 */
int64
group_commit(RolloutStore *store, SharedStoreSlot *slot, StringInfo rows,
			 int64 row_count, int64 tombstone_count, bool truncate, List *ingest)
{
	dsa_area   *area = memtable_dsa();
	StringInfoData refs;
	dsa_pointer pointer;
	CommitRequest *request;
	int64		position;

	/*
	 * A slot still holding state of an older creation of the store (deleted
	 * and created again under the same name) is reset before anything is
	 * claimed or committed; then the shard's writer must be ready.
	 */
	shared_store_adopt_incarnation(slot, store);
	writer_ensure_ready(store, slot);

	initStringInfo(&refs);
	request_append_ingest(&refs, ingest);
	pointer = commit_request_allocate(store, slot, rows, row_count,
									  tombstone_count, &refs);
	request = dsa_get_address(area, pointer);
	request->truncate = truncate;
	if (commit_request_await(store, slot, pointer, &position) == REQUEST_FAILED)
	{
		char		error[SLOT_ERROR_LEN * 2];
		int			error_code = request->error_code;

		strlcpy(error, request->error, sizeof(error));
		commit_request_release(slot, pointer);
		ereport(ERROR,
				(errcode(error_code ? error_code : ERRCODE_IO_ERROR),
				 errmsg("could not commit to store \"%s\": %s", store->name, error),
				 errdetail("The transaction's rows were in a group commit whose WAL entry was not written; nothing of it is visible.")));
	}
	return position;
}
