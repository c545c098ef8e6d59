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
 * round trip.  Positions are handed out in order under the slot's lock, by
 * this cluster's writer, which knows the tip (no listing).  Once durable,
 * the requests become a memtable batch (memtable.c) without a copy.
 *
 * Pipelining (docs/WRITER.md, "Pipelined WAL writes").  Up to
 * rollout_fdw.wal_pipeline_depth leaders write consecutive positions at
 * once, each in its cell of the slot's pipeline.  Entries are settled in
 * position order, by whichever leader finishes: a landed entry is published
 * (acknowledged) only once every position before it is settled, so no
 * acknowledged entry ever sits behind a hole.  A failed PUT with entries
 * after it fills its position with an empty entry; one that cannot be
 * settled, or a fence, fails it and everything after it, and the writer
 * claims the shard again, which makes the leftovers dead.
 *
 * Credentials.  A leader takes only the requests that came through its own
 * credentials (the access fingerprint of the store handle) and were written
 * with its column types (the schema digest, store.h: it decodes their rows
 * with its own row descriptor); the others wait for a leader of theirs, in
 * the same queue.
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

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pg_sema.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "rollout/fault.h"
#include "rollout/flush.h"
#include "rollout/grace.h"
#include "rollout/group_commit.h"
#include "rollout/memtable.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_keys.h"
#include "rollout/wal.h"
#include "rollout/writer_epoch.h"

/* One WAL entry carries at most this many bytes of rows. */
#define LEADER_MAX_BATCH_BYTES	(64 * 1024 * 1024)

/*
 * The shortest spacing between pipelined leaders.  Overlapping PUTs pays
 * off when they wait on a network; a local store's PUT is a couple of
 * fsyncs on the same device, which do not overlap, and more of them only
 * split the groups (measured: 8 clients on file://, 10 % fewer commits with
 * leaders spaced a quarter of a 2 ms PUT apart).  With this floor a local
 * store pipelines only past a PUT that stalls.
 */
#define PIPELINE_MIN_SPACING_US	5000

/*
 * A store that no transaction committed to for this long may lose its
 * memtable batches to a committer that waits for room (group_commit_reserve).
 * Long enough that a store committing now and then keeps its tail; a store
 * that is flushed is not evicted anyway, since the flush empties it.
 */
#define MEMTABLE_EVICT_IDLE_S	10

/* the longest automatic commit delay (rollout_fdw.commit_delay = -1) */
#define COMMIT_DELAY_AUTO_MAX_US	5000

/* rollout_fdw.commit_delay (microseconds; -1 automatic) */
static int	commit_delay_us = -1;

/* rollout_fdw.wal_pipeline_depth */
static int	wal_pipeline_depth = 4;

/* rollout_fdw.memtable_wait_timeout (milliseconds; 0 waits for good) */
static int	memtable_wait_timeout_ms = 120000;

/* Define rollout_fdw.commit_delay and wal_pipeline_depth; _PG_init calls this. */
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
	DefineCustomIntVariable("rollout_fdw.wal_pipeline_depth",
							"WAL entries of one shard that group commit may write at once.",
							"1 writes one entry at a time; more lets the next group start while earlier ones are still being written. A commit is acknowledged only once its entry and every earlier position are settled.",
							&wal_pipeline_depth,
							4, 1, WAL_PIPELINE_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.memtable_wait_timeout",
							"How long a commit waits for room in the memtable before it fails.",
							"The commit fails with SQLSTATE 53400 and writes nothing. 0 waits for as long as it takes. statement_timeout does not reach a commit.",
							&memtable_wait_timeout_ms,
							120000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/*
 * Ingest references, serialised after a request's rows: rows, when the
 * upload began (the leader checks it right before its PUT, as a direct
 * commit does before each of its own) and the object's key.
 */
static void
request_append_ingest(StringInfo buf, List *ingest)
{
	ListCell   *lc;

	foreach(lc, ingest)
	{
		WalIngestRef *ref = lfirst(lc);

		appendStringInfo(buf, INT64_FORMAT " " INT64_FORMAT " %s", ref->rows,
						 (int64) ref->staged_at, ref->file);
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

/* The entry a leader writes: its cell of the pipeline, and what only it needs. */
typedef struct LeaderBatch
{
	PipelineEntry entry;		/* a copy of its cell, taken under the lock */
	bool		assigned;		/* it got a position (else it fails at once) */
	bool		own_taken;		/* the leader's own request is in it */
	bool		writer_ready;	/* the writer as the claim left it */
	WriterState writer_state;
	TimestampTz tip_observed_at;	/* when the tip was known to be it */
	char		put_id[64];		/* of its PUT, to recognise it landed */
} LeaderBatch;

/* The pipeline cell of position (slot lock held). */
static inline PipelineEntry *
pipeline_entry(SharedStoreSlot *slot, int64 position)
{
	return &slot->pipeline[position % WAL_PIPELINE_MAX];
}

/*
 * Whether a committer whose request is still queued leads now (slot lock
 * held exclusively; leadership is then counted).  With no leader writing,
 * it does.  With some, it does only while fewer than the depth write, a
 * cell is free for the next position, the pipeline is not draining after a
 * broken entry, and the last leader started at least a depth-th of the
 * mean PUT time ago (and PIPELINE_MIN_SPACING_US): leaders spread evenly
 * over a round trip each take what queued meanwhile, instead of one leader
 * per commit (which would be no group commit at all).  Otherwise *wait_ms says how long until the spacing
 * allows a leader (0: until an entry settles).
 */
static bool
pipeline_may_lead(SharedStoreSlot *slot, long *wait_ms)
{
	TimestampTz now;
	int64		spacing_us;
	int64		since_us;

	*wait_ms = 0;

	/* leaders admitted but without a position yet need cells too */
	if (slot->pipeline_broken ||
		slot->next_position - slot->tip + slot->leaders_active >= WAL_PIPELINE_MAX)
		return false;
	if (slot->leaders_active > 0)
	{
		if (slot->leaders_active >= wal_pipeline_depth || slot->wal_puts == 0)
			return false;
		now = GetCurrentTimestamp();
		spacing_us = Max(slot->put_time_total_us / slot->wal_puts / wal_pipeline_depth,
						 PIPELINE_MIN_SPACING_US);
		since_us = (int64) (now - slot->last_lead_at);
		if (since_us < spacing_us)
		{
			*wait_ms = Max((spacing_us - since_us + 999) / 1000, 1);
			return false;
		}
	}
	else
		now = GetCurrentTimestamp();
	slot->leaders_active++;
	slot->last_lead_at = now;
	return true;
}

static void pipeline_settle(SharedStoreSlot *slot, dsa_area *area);

/*
 * Give up leadership without an entry (slot lock held): the last leader of a
 * broken pipeline to go resets it (pipeline_settle), and committers waiting
 * for a leader or for the pipeline to drain are woken (after the lock is
 * released: leader_release_and_wake).
 */
static void
leader_give_up(SharedStoreSlot *slot, dsa_area *area)
{
	slot->leaders_active--;
	if (slot->pipeline_broken)
		pipeline_settle(slot, area);
}

/*
 * How committers wait for their outcome, or for leadership.  Most sleep on
 * their own PGPROC semaphore, as PostgreSQL's group clearing of XIDs does
 * (ProcArrayGroupClearXid), with their pgprocno in the slot's sleepers: a
 * condition variable wakes each through its latch, a signal (kill) on the
 * waker's side and epoll plus a read of the signal on the sleeper's, where a
 * semaphore is a futex (docs/PERFORMANCE.md has the cost).  A semaphore wait
 * has no timeout, so the one committer that waits for pipeline_may_lead's
 * spacing to pass (the slot's timer_holder) sleeps on commit_cv with one;
 * the others sleep until an entry settles, when leader_release_and_wake wakes them all,
 * and look again.  Committers that find the sleepers full use commit_cv.
 *
 * Every registration is taken by exactly one leader_release_and_wake, which posts once,
 * and is followed by exactly one wait: posts and waits pair up.  A sleeper
 * woken by a post that was not ours (PostgreSQL's lightweight locks, which
 * share the semaphore, pass such posts on) finds itself still registered,
 * and takes itself out before it looks again.
 */
typedef enum CommitSleep
{
	COMMIT_SLEEP_NONE,
	COMMIT_SLEEP_SEMAPHORE,
	COMMIT_SLEEP_TIMER,			/* the slot's timer_holder, on commit_cv */
	COMMIT_SLEEP_CV				/* on commit_cv, with wait_ms if positive */
} CommitSleep;

/*
 * Choose how to sleep (slot lock held) and register for it; wait_ms is how
 * long pipeline_may_lead said until this committer may lead, 0 for "until an
 * entry settles".  A sleep on commit_cv is prepared here, under the lock, so
 * that a wake-up after the look at the request cannot be missed.
 */
static CommitSleep
commit_sleep_register(SharedStoreSlot *slot, long wait_ms)
{
	if (wait_ms > 0 && slot->timer_holder == 0)
	{
		slot->timer_holder = MyProc->pgprocno + 1;
		ConditionVariablePrepareToSleep(&slot->commit_cv);
		return COMMIT_SLEEP_TIMER;
	}
	if (slot->sleeper_count < SLOT_SLEEPERS_MAX)
	{
		slot->sleeper_awaits_turn[slot->sleeper_count] = wait_ms > 0;
		slot->sleepers[slot->sleeper_count++] = MyProc->pgprocno;
		return COMMIT_SLEEP_SEMAPHORE;
	}
	ConditionVariablePrepareToSleep(&slot->commit_cv);
	return COMMIT_SLEEP_CV;
}

/* Take the i-th sleeper out of the slot's sleepers (slot lock held). */
static void
sleeper_remove(SharedStoreSlot *slot, int i)
{
	slot->sleeper_count--;
	slot->sleepers[i] = slot->sleepers[slot->sleeper_count];
	slot->sleeper_awaits_turn[i] = slot->sleeper_awaits_turn[slot->sleeper_count];
}

/* Undo what commit_sleep_register left registered, after the sleep (slot lock held). */
static void
commit_sleep_forget(SharedStoreSlot *slot, CommitSleep sleep)
{
	if (sleep == COMMIT_SLEEP_TIMER && slot->timer_holder == MyProc->pgprocno + 1)
		slot->timer_holder = 0;
	if (sleep != COMMIT_SLEEP_SEMAPHORE)
		return;
	for (int i = 0; i < slot->sleeper_count; i++)
	{
		if (slot->sleepers[i] == MyProc->pgprocno)
		{
			sleeper_remove(slot, i);
			return;
		}
	}
}

/*
 * Pass the timer on (slot lock held): when nobody holds it while a leader
 * writes and requests are still queued, wake a sleeper that waits for its
 * turn to lead, so that it takes the timer and the pipeline goes on
 * overlapping PUTs.  Without it such a sleeper would lead only once an
 * entry settles.  Returns the pgprocno to post once the lock is released,
 * or -1.
 */
static int
commit_sleep_pass_timer(SharedStoreSlot *slot)
{
	if (slot->timer_holder != 0 || slot->leaders_active == 0 ||
		!DsaPointerIsValid(slot->queue_head))
		return -1;
	for (int i = 0; i < slot->sleeper_count; i++)
	{
		if (slot->sleeper_awaits_turn[i])
		{
			int			pgprocno = slot->sleepers[i];

			sleeper_remove(slot, i);
			return pgprocno;
		}
	}
	return -1;
}

/* Post a sleeper that commit_sleep_pass_timer took (the slot lock not held). */
static void
commit_sleep_post(int pgprocno)
{
	if (pgprocno >= 0)
		PGSemaphoreUnlock(GetPGProcByNumber(pgprocno)->sem);
}

/* Sleep as commit_sleep_register chose (the slot lock not held). */
static void
commit_sleep(SharedStoreSlot *slot, CommitSleep sleep, long wait_ms)
{
	if (sleep == COMMIT_SLEEP_SEMAPHORE)
	{
		pgstat_report_wait_start(PG_WAIT_EXTENSION);
		PGSemaphoreLock(MyProc->sem);
		pgstat_report_wait_end();
	}
	else if (wait_ms > 0)
		(void) ConditionVariableTimedSleep(&slot->commit_cv, wait_ms,
										   PG_WAIT_EXTENSION);
	else
		ConditionVariableSleep(&slot->commit_cv, PG_WAIT_EXTENSION);

	/*
	 * Left prepared, a sleep on commit_cv would keep this backend in its
	 * wake-up list while it sleeps on its semaphore next: a broadcast would
	 * then cost a signal for nothing.
	 */
	ConditionVariableCancelSleep();
}

/*
 * Release the slot's lock, held exclusively, and wake every committer
 * waiting on the slot: each looks at its request again, and one whose
 * request is still queued may lead.  The sleepers are taken under the lock
 * the caller changed the slot under, so that none registered after that
 * change is missed, and without taking it again.
 */
static void
leader_release_and_wake(SharedStoreSlot *slot)
{
	int			sleepers[SLOT_SLEEPERS_MAX];
	int			count;

	count = slot->sleeper_count;
	memcpy(sleepers, slot->sleepers, count * sizeof(int));
	slot->sleeper_count = 0;
	LWLockRelease(&slot->lock);
	for (int i = 0; i < count; i++)
		commit_sleep_post(sleepers[i]);
	ConditionVariableBroadcast(&slot->commit_cv);
	ConditionVariableBroadcast(&slot->state_cv);
}

/*
 * Take the queued requests that came through the leader's credentials (the
 * others wait for a leader of theirs, see the file header), in queue order
 * and up to a bounded entry size, but always up to and including the
 * leader's own request (own), unless a TRUNCATE or a transaction staged as
 * an ingest segment comes before it: an entry ends before any TRUNCATE but
 * its first, and holds such a transaction alone, and own then waits for the
 * next.  The rest stay queued in their order.  With
 * the writer ready and a batch header (batch_pointer) at hand, the entry
 * gets the next position and stamp, and its cell in the pipeline.  Nothing
 * is taken, and leadership is given up here, when another leader took own
 * already, or when no cell is free for the next position or the pipeline is
 * draining (checked again here: between admission and now other leaders
 * may have taken positions).
 */
static void
leader_take_requests(SharedStoreSlot *slot, dsa_area *area, dsa_pointer own,
					 dsa_pointer batch_pointer, LeaderBatch *batch)
{
	const char *fingerprint = ((CommitRequest *) dsa_get_address(area, own))->fingerprint;
	uint64		schema_digest = ((CommitRequest *) dsa_get_address(area, own))->schema_digest;
	PipelineEntry *entry = &batch->entry;
	dsa_pointer taken_tail = InvalidDsaPointer;
	dsa_pointer kept_head = InvalidDsaPointer;
	dsa_pointer kept_tail = InvalidDsaPointer;
	bool		own_taken = false;
	bool		ingest_taken = false;
	bool		full = false;
	int			pass_to;

	memset(batch, 0, sizeof(LeaderBatch));
	entry->requests = InvalidDsaPointer;
	entry->batch = batch_pointer;
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (((CommitRequest *) dsa_get_address(area, own))->taken ||
		slot->pipeline_broken ||
		slot->next_position - slot->tip >= WAL_PIPELINE_MAX ||
		pipeline_entry(slot, slot->next_position + 1)->state != PIPELINE_FREE)
	{
		leader_give_up(slot, area);
		leader_release_and_wake(slot);
		return;
	}
	for (dsa_pointer p = slot->queue_head; DsaPointerIsValid(p);)
	{
		CommitRequest *request = dsa_get_address(area, p);
		dsa_pointer next = request->next;

		if (own_taken && entry->bytes + request->rows_len > LEADER_MAX_BATCH_BYTES)
			full = true;

		/*
		 * A TRUNCATE's cut is its entry's stamp, which hides what earlier
		 * entries hold and nothing of its own entry: it must be the first
		 * transaction of its entry, or the requests queued before it in the
		 * same entry would survive it.  So the entry ends before it; its
		 * committer, this leader too if it is its own, leads the next one.
		 */
		if (request->truncate && entry->transactions > 0 &&
			strcmp(request->fingerprint, fingerprint) == 0)
			full = true;

		/*
		 * A transaction staged as an ingest segment gets an entry of its own.
		 * Its rows carry the entry's stamp, shard and position, as the other
		 * transactions' rows of the entry do, and a reader orders the
		 * versions of a key by those alone: the inline rows and the segment
		 * (or two segments) would tie, and which of two transactions of one
		 * entry won a key would depend on the read, and change with a flush
		 * (which files them as two generations) and a merge.
		 */
		if (strcmp(request->fingerprint, fingerprint) == 0 &&
			((request->ingest_len > 0 && entry->transactions > 0) ||
			 ingest_taken))
			full = true;
		request->next = InvalidDsaPointer;
		if (!full && strcmp(request->fingerprint, fingerprint) == 0 &&
			request->schema_digest == schema_digest)
		{
			if (p == own)
				own_taken = true;
			request->taken = true;
			entry->bytes += request->rows_len;
			entry->reserved += request->size;
			entry->rows += request->row_count;
			entry->tombstones += request->tombstone_count;
			entry->truncate |= request->truncate;
			ingest_taken |= request->ingest_len > 0;
			entry->transactions++;
			if (DsaPointerIsValid(taken_tail))
				((CommitRequest *) dsa_get_address(area, taken_tail))->next = p;
			else
				entry->requests = p;
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
	batch->own_taken = own_taken;

	/*
	 * A waiter that becomes leader did not go through writer_ensure_ready,
	 * and the writer may have been fenced since its request was queued.
	 */
	batch->writer_state = slot->writer_state;
	batch->writer_ready = slot->writer_state == WRITER_READY;
	batch->tip_observed_at = slot->tip_observed_at;
	if (batch->writer_ready && DsaPointerIsValid(batch_pointer))
	{
		batch->assigned = true;
		if (slot->next_position > slot->tip)
			slot->wal_puts_pipelined++;
		entry->state = PIPELINE_WRITING;
		entry->epoch = slot->epoch;
		entry->position = ++slot->next_position;
		entry->stamp = slot->next_stamp = Max(wal_next_stamp(), slot->next_stamp + 1);
		entry->started = GetCurrentTimestamp();
		*pipeline_entry(slot, entry->position) = *entry;
	}

	/* the requests left queued wait for another leader */
	pass_to = commit_sleep_pass_timer(slot);
	LWLockRelease(&slot->lock);
	commit_sleep_post(pass_to);
}

/*
 * Fail every request of a chain with one SQLSTATE and message, counting
 * them as failed transactions (slot lock held).
 */
static void
pipeline_fail_requests(SharedStoreSlot *slot, dsa_area *area, dsa_pointer head,
					   int64 transactions, int error_code, const char *message)
{
	requests_finish(area, head, REQUEST_FAILED, 0, error_code, message);
	slot->transactions_failed += transactions;
	slot->errors++;
	strlcpy(slot->last_error, message, SLOT_ERROR_LEN);
	slot->last_error_at = GetCurrentTimestamp();
}

/*
 * A durable entry whose turn has come (every position before it is
 * settled): its requests become the memtable batch, the counters move, and
 * the committers learn the outcome (slot lock held).
 */
static void
pipeline_publish(SharedStoreSlot *slot, dsa_area *area, PipelineEntry *entry)
{
	CommitRequest *first = dsa_get_address(area, entry->requests);

	slot->tip = entry->position;
	slot->last_stamp = entry->stamp;
	slot->tip_observed_at = entry->started;
	/* before the committers can see REQUEST_DONE (manifest_view.c) */
	shared_store_note_wal_change(slot->store, slot->shard);
	memtable_add_batch(slot, entry->batch, entry->requests, entry->position,
					   entry->stamp, entry->truncate, first->fingerprint,
					   first->schema_digest);
	slot->queued_bytes -= entry->reserved;
	slot->rows_appended += entry->rows;
	slot->rows_deleted += entry->tombstones;
	slot->bytes_appended += entry->bytes;
	slot->transactions_committed += entry->transactions;
	slot->last_group_transactions = entry->transactions;
	slot->wal_puts++;
	slot->put_time_total_us += entry->elapsed_us;
	slot->put_time_max_us = Max(slot->put_time_max_us, entry->elapsed_us);
	requests_finish(area, entry->requests, REQUEST_DONE, entry->position, 0, NULL);
}

/*
 * Settle the pipeline in position order (slot lock held): publish each
 * landed entry whose turn has come, fail each failed one (its position holds
 * no rows of it, so the entries after it go on), and stop at an entry still
 * being written.  A broken entry stops the pipeline: it and every entry
 * after it fail as they finish, since what lies at its position is unknown
 * (or a newer writer's) and so the entries after it must never be
 * acknowledged.  Once the last of them finished, the pipeline is empty
 * again, and a writer that was not fenced claims the shard again at the next
 * commit: the claim's fence makes the leftovers after the broken position
 * dead for every reader (docs/WRITER.md, "Pipelined WAL writes").
 */
static void
pipeline_settle(SharedStoreSlot *slot, dsa_area *area)
{
	while (!slot->pipeline_broken && slot->tip < slot->next_position)
	{
		PipelineEntry *entry = pipeline_entry(slot, slot->tip + 1);

		if (entry->state == PIPELINE_WRITING)
			return;
		if (entry->state == PIPELINE_BROKEN)
		{
			slot->pipeline_broken = true;
			slot->pipeline_error_code = entry->error_code;
			strlcpy(slot->pipeline_error, entry->error, sizeof(slot->pipeline_error));
			break;
		}
		if (entry->state == PIPELINE_LANDED)
			pipeline_publish(slot, area, entry);
		else
		{
			pipeline_fail_requests(slot, area, entry->requests, entry->transactions,
								   entry->error_code, entry->error);
			dsa_free(area, entry->batch);
			slot->tip = entry->position;
			shared_store_note_wal_change(slot->store, slot->shard);
		}
		entry->state = PIPELINE_FREE;
	}
	if (!slot->pipeline_broken)
		return;

	for (int64 position = slot->tip + 1; position <= slot->next_position; position++)
	{
		PipelineEntry *entry = pipeline_entry(slot, position);

		if (entry->state == PIPELINE_WRITING || entry->state == PIPELINE_FREE)
			continue;
		pipeline_fail_requests(slot, area, entry->requests, entry->transactions,
							   slot->pipeline_error_code, slot->pipeline_error);
		dsa_free(area, entry->batch);
		entry->state = PIPELINE_FREE;
	}
	if (slot->leaders_active > 0)
		return;
	slot->pipeline_broken = false;
	slot->next_position = slot->tip;
	if (slot->writer_state == WRITER_READY)
		slot->writer_state = WRITER_NONE;
}

/*
 * A leader is done with its entry, which now stands at state (LANDED,
 * FAILED or BROKEN, with error_code and error for the last two): record it,
 * settle what can be settled, give up leadership and wake the committers.
 */
static void
leader_finish(SharedStoreSlot *slot, dsa_area *area, LeaderBatch *batch,
			  PipelineState state, int error_code, const char *error)
{
	PipelineEntry *entry;

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	entry = pipeline_entry(slot, batch->entry.position);
	entry->state = state;
	entry->elapsed_us = (int64) (GetCurrentTimestamp() - entry->started);
	entry->error_code = error_code;
	if (error != NULL)
		strlcpy(entry->error, error, sizeof(entry->error));
	slot->leaders_active--;
	pipeline_settle(slot, area);
	leader_release_and_wake(slot);
}

/*
 * Give up leadership after an ERROR before anything was taken (the slot
 * lock not held).  Unless another leader took own meanwhile, own leaves the
 * queue failed with that error, for its committer to report: left queued,
 * the next leader would write the rows of a transaction that reported
 * failure.  The requests behind it wait for another leader.  Returns
 * whether own was failed here.
 */
static bool
leader_abandon(SharedStoreSlot *slot, dsa_area *area, dsa_pointer own,
			   int error_code, const char *error)
{
	CommitRequest *request = dsa_get_address(area, own);
	bool		failed = false;

	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (!request->taken)
	{
		dsa_pointer previous = InvalidDsaPointer;

		for (dsa_pointer p = slot->queue_head; DsaPointerIsValid(p);)
		{
			dsa_pointer next = ((CommitRequest *) dsa_get_address(area, p))->next;

			if (p == own)
			{
				if (DsaPointerIsValid(previous))
					((CommitRequest *) dsa_get_address(area, previous))->next = next;
				else
					slot->queue_head = next;
				if (slot->queue_tail == own)
					slot->queue_tail = previous;
				break;
			}
			previous = p;
			p = next;
		}
		request->next = InvalidDsaPointer;
		pipeline_fail_requests(slot, area, own, 1, error_code, error);
		failed = true;
	}
	leader_give_up(slot, area);
	leader_release_and_wake(slot);
	return failed;
}

/*
 * Fail the requests of a batch that got no position (the writer is not
 * ready, or no batch header could be allocated) and give up leadership.
 */
static void
leader_fail_unassigned(SharedStoreSlot *slot, dsa_area *area, LeaderBatch *batch,
					   int error_code, const char *message)
{
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	requests_finish(area, batch->entry.requests, REQUEST_FAILED, 0, error_code, message);
	leader_give_up(slot, area);
	leader_release_and_wake(slot);
}

/*
 * Write the batch as the WAL entry at its position, encoded in image: every
 * request's rows in queue (commit) order, with their ingest references.
 * Returns WAL_PUT_CREATED, or WAL_PUT_TAKEN when a previous writer's entry
 * of an older epoch holds the position (dead: see leader_write).  ERROR for anything else, with *fenced set when the
 * position holds a newer writer's entry; nothing is overwritten.
 */
static WalPutResult
leader_write_entry(RolloutStore *store, SharedStoreSlot *slot, dsa_area *area,
				   LeaderBatch *batch, WalEntryImage *image, volatile bool *fenced)
{
	PipelineEntry *entry = &batch->entry;
	WalEntryMetadata metadata = {0};
	List	   *blobs = NIL;
	int64		owner_epoch;
	WalPutResult put;

	for (dsa_pointer p = entry->requests; DsaPointerIsValid(p);)
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
	metadata.epoch = entry->epoch;
	metadata.stamp = entry->stamp;
	metadata.put_id = objstore_new_put_id();
	metadata.transactions = entry->transactions;
	metadata.truncate = entry->truncate;
	strlcpy(batch->put_id, metadata.put_id, sizeof(batch->put_id));

	/*
	 * A tip learnt longer ago than half the minimum gc grace (an idle writer)
	 * is checked against the shard manifest first (grace.h).
	 */
	if (rollout_output_too_old(batch->tip_observed_at))
		writer_check_still_owner(store, slot, entry->epoch, entry->position);
	rollout_fault_point("group_commit.before_put");
	wal_write_entry(store, blobs, &metadata, image);

	/*
	 * An ingest segment that waited in the queue, or for the entries before
	 * it, longer than half the minimum gc grace may be an orphan to a gc
	 * running now: its transaction fails (retryable), as a direct commit's
	 * does (wal.c), rather than name a segment that may be gone.  Raised
	 * before the PUT, it is settled as a failed one (leader_settle_failure).
	 */
	wal_check_ingest_fresh(store, metadata.ingest);
	rollout_fault_point("group_commit.instead_of_put");
	put = wal_put_rows_entry(store, entry->position, image, metadata.put_id,
							 entry->epoch, &owner_epoch);
	if (put == WAL_PUT_FENCED)
	{
		*fenced = true;
		writer_note_fenced(slot, entry->epoch);
		shard_raise_taken_over(store, entry->position, owner_epoch, entry->epoch);
	}
	if (put == WAL_PUT_TAKEN && owner_epoch == entry->epoch)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("WAL position %lld of shard \"%s\" in store \"%s\" is taken by an unexpected entry",
						(long long) entry->position, store->shard, store->name),
				 errdetail("Nothing was overwritten.")));
	return put;
}

/*
 * What a fill found at a position it could not create, when that proves the
 * batch's PUT is not there and never will be (create-if-absent: an occupied
 * position takes no later write), and that the entries after it are dead
 * once claimed.  Another entry of our own epoch proves the first but not the
 * second (nothing after it is dead, and the claim's flush would replay
 * them), so it is no such occupant: the outcome stays unknown.
 */
typedef enum FillOccupant
{
	OCCUPANT_NONE,				/* created, ours, a dead entry, no answer, or
								 * another entry of our epoch */
	OCCUPANT_NEWER_WRITER,		/* a newer epoch's entry: fenced */
	OCCUPANT_NOT_AN_ENTRY		/* unreadable, or another shard's entry */
} FillOccupant;

/*
 * Settle the position of an entry whose PUT failed while entries after it
 * are in flight (they may land, and must never be acknowledged over a hole
 * that could still be filled), or whose PUT the store may still carry out
 * (outcome_unknown: it would land later where the next leader writes).  So
 * the position is filled here, with an empty entry of our epoch
 * (create-if-absent).  Created: the position holds none of the batch's
 * rows, for good, and the pipeline goes on (FAILED).  Taken by our own PUT
 * after all (its put id): LANDED.  Taken by anything else, or no answer:
 * BROKEN, and the pipeline drains; *occupant says what took it when that
 * is known, *owner_epoch its epoch for a newer writer.
 */
static PipelineState
leader_fill_position(RolloutStore *store, SharedStoreSlot *slot,
					 LeaderBatch *batch, WalEntryImage *image,
					 bool outcome_unknown, FillOccupant *occupant,
					 int64 *owner_epoch)
{
	PipelineEntry *entry = &batch->entry;
	WalEntryMetadata filler = {0};
	volatile PipelineState state = PIPELINE_BROKEN;
	volatile FillOccupant found = OCCUPANT_NONE;
	volatile bool reading_owner = false;
	MemoryContext caller_context = CurrentMemoryContext;
	int			holdoff = InterruptHoldoffCount;

	filler.kind = "wal";
	filler.shard = store->shard;
	filler.epoch = entry->epoch;
	filler.stamp = entry->stamp;
	filler.put_id = objstore_new_put_id();
	filler.transactions = 0;
	PG_TRY();
	{
		WalEntryMetadata *owner;

		wal_write_entry(store, NIL, &filler, image);
		switch (wal_put_entry(store, entry->position, image, filler.put_id,
							  entry->epoch, owner_epoch, &reading_owner))
		{
			case WAL_PUT_CREATED:
				state = PIPELINE_FAILED;
				LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
				slot->wal_fillers++;
				LWLockRelease(&slot->lock);
				break;
			case WAL_PUT_FENCED:
				writer_note_fenced(slot, entry->epoch);
				found = OCCUPANT_NEWER_WRITER;
				break;
			case WAL_PUT_TAKEN:
				owner = wal_read_metadata(store,
										  rollout_key_wal(store, store->shard, entry->position),
										  entry->position);
				if (strcmp(owner->put_id, batch->put_id) == 0)
					state = PIPELINE_LANDED;
				else if (owner->epoch < entry->epoch)
					state = PIPELINE_FAILED;	/* a previous writer's dead
												 * entry */
				break;
		}
	}
	PG_CATCH();
	{
		/*
		 * wal_read_metadata's verdict on the object at the position, that it
		 * is no entry of this shard, as opposed to a store that did not
		 * answer or a create that failed
		 */
		if (reading_owner && geterrcode() == ERRCODE_DATA_CORRUPTED)
			found = OCCUPANT_NOT_AN_ENTRY;
		/* an ERROR reset the holdoff count this commit relies on */
		MemoryContextSwitchTo(caller_context);
		FlushErrorState();
		LWLockReleaseAll();
		InterruptHoldoffCount = holdoff;
	}
	PG_END_TRY();
	wal_entry_image_discard(image);
	*occupant = found;
	ereport(LOG,
			(errmsg("rollout_fdw: WAL position %lld of shard \"%s\" in store \"%s\" %s after its write failed",
					(long long) entry->position, store->shard, store->name,
					state == PIPELINE_FAILED ? "was filled with an empty entry" :
					state == PIPELINE_LANDED ? "was found written" :
					found != OCCUPANT_NONE ? "was found taken by another writer or object" :
					"could not be settled"),
			 outcome_unknown ?
			 errdetail("The store may have carried out that write without answering.") :
			 errdetail("Entries after it were in flight.")));
	return state;
}

/*
 * Whether the entry's PUT, which raised an error, landed after all: the
 * object at its position carries its put id.  Any error of this look (the
 * store still not answering) counts as no.
 */
static bool
leader_put_landed(RolloutStore *store, LeaderBatch *batch)
{
	MemoryContext caller_context = CurrentMemoryContext;
	int			holdoff = InterruptHoldoffCount;
	volatile bool landed = false;

	PG_TRY();
	{
		char	   *put_id = NULL;

		if (objstore_get_put_id(store->objstore,
								rollout_key_wal(store, store->shard, batch->entry.position),
								&put_id) &&
			put_id != NULL && strcmp(put_id, batch->put_id) == 0)
			landed = true;
	}
	PG_CATCH();
	{
		/* an ERROR reset the holdoff count this commit relies on */
		MemoryContextSwitchTo(caller_context);
		FlushErrorState();
		LWLockReleaseAll();
		InterruptHoldoffCount = holdoff;
	}
	PG_END_TRY();
	return landed;
}

/*
 * The entry's PUT failed with error (its SQLSTATE error_code).  If it
 * landed after all (leader_put_landed), it is acknowledged.  Otherwise, with
 * nothing after it in the pipeline and a PUT the store cannot have carried
 * out, its position is given back, as a writer without a pipeline does: the
 * next leader writes there again.  A PUT the store may still carry out
 * (transaction_resolution_unknown, wal_put_rows_entry) must not meet the next
 * leader's entry there later, and the read-back may have found nothing only
 * because the store did not answer: that position, like one with entries
 * after it, is settled first (leader_fill_position).  A fill that finds the
 * position taken by something else (a newer writer's entry, an object that
 * is no entry of this shard) proves that the PUT is not there and never lands
 * (create-if-absent): the committers fail with what took it, as without a
 * pipeline, not as unknown, and so do those of the entries after it, which
 * the next claim's fence or the newer writer's makes dead.  Returns whether
 * the committers fail with error itself (not when the entry was found
 * written, nor when the outcome stays unknown or was settled by the fill).
 */
static bool
leader_settle_failure(RolloutStore *store, SharedStoreSlot *slot,
					  dsa_area *area, LeaderBatch *batch, WalEntryImage *image,
					  bool fenced, int error_code, const char *error)
{
	PipelineEntry *entry = &batch->entry;
	PipelineState state;
	bool		outcome_unknown = error_code == ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN;
	FillOccupant occupant = OCCUPANT_NONE;
	int64		owner_epoch = 0;

	if (!fenced)
	{
		/* a PUT that timed out may have landed after all: its put id says */
		if (leader_put_landed(store, batch))
		{
			leader_finish(slot, area, batch, PIPELINE_LANDED, 0, NULL);
			return false;
		}
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		if (slot->next_position == entry->position && !outcome_unknown)
		{
			slot->next_position--;
			pipeline_entry(slot, entry->position)->state = PIPELINE_FREE;
			pipeline_fail_requests(slot, area, entry->requests, entry->transactions,
								   error_code, error);
			dsa_free(area, entry->batch);
			leader_give_up(slot, area);
			leader_release_and_wake(slot);
			return true;
		}
		LWLockRelease(&slot->lock);
	}
	state = fenced ? PIPELINE_BROKEN :
		leader_fill_position(store, slot, batch, image, outcome_unknown,
							 &occupant, &owner_epoch);
	if (state == PIPELINE_BROKEN && !fenced)
	{
		char		message[SLOT_ERROR_LEN * 2];
		int			code;

		/* no allocation: an ERROR here would leave the entry unsettled */
		if (occupant == OCCUPANT_NONE)
		{
			code = ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN;
			snprintf(message, sizeof(message), "the outcome of WAL position %lld is unknown: %s",
					 (long long) entry->position, error);
		}
		else if (occupant == OCCUPANT_NEWER_WRITER)
		{
			code = ERRCODE_T_R_SERIALIZATION_FAILURE;
			snprintf(message, sizeof(message),
					 "shard \"%s\" of store \"%s\" was taken over by another writer: WAL position %lld holds an entry of writer epoch %lld, this writer has epoch %lld; nothing was written",
					 store->shard, store->name, (long long) entry->position,
					 (long long) owner_epoch, (long long) entry->epoch);
		}
		else if (occupant == OCCUPANT_NOT_AN_ENTRY && error_code == ERRCODE_DATA_CORRUPTED)
		{
			/* the write's own error already names what is there */
			code = error_code;
			strlcpy(message, error, sizeof(message));
		}
		else
		{
			code = ERRCODE_DATA_CORRUPTED;
			snprintf(message, sizeof(message),
					 "WAL position %lld of shard \"%s\" in store \"%s\" is taken by an object that is not a WAL entry of this shard; nothing was overwritten",
					 (long long) entry->position, store->shard, store->name);
		}
		leader_finish(slot, area, batch, state, code, message);
		return false;
	}
	if (state == PIPELINE_FAILED && outcome_unknown)
	{
		/* the filler settled it: that PUT can no longer land anywhere */
		leader_finish(slot, area, batch, state, ERRCODE_CONNECTION_FAILURE, error);
		return false;
	}
	leader_finish(slot, area, batch, state, error_code, error);
	return state != PIPELINE_LANDED;
}

/*
 * In a leader's PG_CATCH: the error being handled, copied into
 * caller_context, and the interrupt holdoff count the commit needs restored
 * (the ERROR reset it).  No abort follows to release an LWLock the error
 * left held (the leader holds none across its I/O, but what it calls may, a
 * cache say), so that is done here.  The leader settles its entry with the
 * error instead of raising.
 */
static ErrorData *
leader_catch_error(MemoryContext caller_context, int holdoff)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(caller_context);
	edata = CopyErrorData();
	FlushErrorState();
	LWLockReleaseAll();
	InterruptHoldoffCount = holdoff;
	return edata;
}

/*
 * Lead: write the queued requests (own among them, unless a TRUNCATE, an
 * ingest entry or the size cap ends the entry before it) as one WAL entry at
 * the next position, while up to rollout_fdw.wal_pipeline_depth - 1 other
 * leaders write the positions before or after it.  Called with interrupts
 * held and leadership counted; gives up leadership before returning.
 * Whatever happens, the entry ends settled (leader_finish): every committer
 * learns its outcome from its request, this leader included, and nothing
 * is raised here.  Returns the error its write raised, if any, when own was
 * in the entry that failed.
 */
static ErrorData *
group_commit_lead(RolloutStore *store, SharedStoreSlot *slot, dsa_pointer own,
				  WalEntryImage *image)
{
	dsa_area   *area = memtable_dsa();
	MemoryContext caller_context = CurrentMemoryContext;
	int			holdoff = InterruptHoldoffCount;
	LeaderBatch batch;
	dsa_pointer batch_pointer;
	volatile bool fenced = false;
	volatile WalPutResult put = WAL_PUT_CREATED;
	ErrorData  *volatile edata = NULL;
	char	   *volatile fenced_message = NULL;
	char	   *volatile reopened_message = NULL;

	/*
	 * Whatever may raise before the requests are taken raises here, and gives
	 * leadership up: a leader that left without it would stop the pipeline
	 * for good.  (The messages of an unassigned batch are made now for that
	 * reason.)
	 */
	PG_TRY();
	{
		long		delay_us = leader_commit_delay_us(slot);

		if (delay_us > 0)
			pg_usleep(delay_us);
		rollout_fault_point("group_commit.before_take");
		fenced_message = psprintf("shard \"%s\" is owned by another writer, and this cluster does not claim it again",
								  store->shard);
		reopened_message = psprintf("the writer of shard \"%s\" is being reopened; retry the transaction",
									store->shard);
	}
	PG_CATCH();
	{
		edata = leader_catch_error(caller_context, holdoff);
	}
	PG_END_TRY();
	if (edata != NULL)
		return leader_abandon(slot, area, own, edata->sqlerrcode, edata->message)
			? edata : NULL;

	/* the batch header first: once the PUT landed nothing may fail */
	batch_pointer = dsa_allocate_extended(area, sizeof(MemBatch), DSA_ALLOC_NO_OOM);
	leader_take_requests(slot, area, own, batch_pointer, &batch);
	if (batch.entry.transactions == 0)
	{
		/* nothing taken: leadership was given up */
		if (DsaPointerIsValid(batch_pointer))
			dsa_free(area, batch_pointer);
		return NULL;
	}
	if (!batch.assigned)
	{
		if (DsaPointerIsValid(batch_pointer))
			dsa_free(area, batch_pointer);
		leader_fail_unassigned(slot, area, &batch,
							   batch.writer_ready ? ERRCODE_OUT_OF_MEMORY : ERRCODE_T_R_SERIALIZATION_FAILURE,
							   batch.writer_ready
							   ? "the rollout_fdw memtable has no room for a batch header"
							   : batch.writer_state == WRITER_FENCED
							   ? fenced_message : reopened_message);
		return NULL;
	}

	PG_TRY();
	{
		put = leader_write_entry(store, slot, area, &batch, image, &fenced);
	}
	PG_CATCH();
	{
		/* settled below */
		edata = leader_catch_error(caller_context, holdoff);
	}
	PG_END_TRY();
	wal_entry_image_discard(image);

	if (edata != NULL)
	{
		char		message[SLOT_ERROR_LEN * 2];

		/*
		 * Followers get the same SQLSTATE, message and context (formatted
		 * without allocating: the entry must be settled whatever happens).
		 * The error is the leader's own outcome only if its request is in the
		 * entry: one left queued (behind a TRUNCATE, an ingest entry or the
		 * size cap) is settled by a later entry, whose outcome may differ (an
		 * unknown one, say, which this error would misreport as a failure).
		 */
		if (edata->context)
			snprintf(message, sizeof(message), "%s (%s)", edata->message, edata->context);
		else
			strlcpy(message, edata->message, sizeof(message));
		if (!leader_settle_failure(store, slot, area, &batch, image, fenced,
								   edata->sqlerrcode, message) ||
			!batch.own_taken)
			edata = NULL;
	}
	else if (put == WAL_PUT_TAKEN)
	{
		char		message[SLOT_ERROR_LEN * 2];

		snprintf(message, sizeof(message),
				 "WAL position %lld of shard \"%s\" holds an entry a previous writer left behind; retry the transaction",
				 (long long) batch.entry.position, store->shard);
		leader_finish(slot, area, &batch, PIPELINE_FAILED,
					  ERRCODE_T_R_SERIALIZATION_FAILURE, message);
	}
	else
		leader_finish(slot, area, &batch, PIPELINE_LANDED, 0, NULL);
	return edata;
}

/*
 * Whether the sweeper serves this database: it is named in
 * rollout_fdw.worker_databases, read by name (the setting belongs to the
 * worker layer above this one) and split as the sweeper splits it.
 */
static bool
group_commit_database_has_sweeper(const char *database)
{
	const char *setting = GetConfigOption("rollout_fdw.worker_databases", true, false);
	char	   *names;
	List	   *databases;
	ListCell   *lc;

	if (setting == NULL || database == NULL)
		return false;
	names = pstrdup(setting);
	if (!SplitIdentifierString(names, ',', &databases))
		return false;
	foreach(lc, databases)
	{
		if (strcmp(lfirst(lc), database) == 0)
			return true;
	}
	return false;
}

/*
 * Say, once per backend, that a commit flushes its store itself: the
 * memtable filled faster than the sweeper emptied it.  A burst larger than
 * the memtable does that; so does, for good, a store whose database the
 * sweeper does not serve, and then every commit that finds the memtable full
 * pays for a flush.  The hint says which of the two it is.
 */
static void
group_commit_note_flushing_itself(RolloutStore *store)
{
	static bool noted = false;
	char	   *database;

	if (noted)
		return;
	noted = true;
	database = get_database_name(MyDatabaseId);
	ereport(LOG,
			(errmsg("rollout_fdw: the memtable is full, so a commit flushes store \"%s\" itself",
					store->name),
			 errdetail("Commits wait while they do; this is logged once per session."),
			 group_commit_database_has_sweeper(database)
			 ? errhint("The sweeper did not flush it in time: a larger rollout_fdw.memtable_size absorbs longer bursts.")
			 : errhint("No sweeper flushes the stores of database \"%s\": add it to rollout_fdw.worker_databases.",
					   database ? database : "?")));
}

/*
 * ERROR: a commit waited rollout_fdw.memtable_wait_timeout for room.  It
 * names the store holding the most of the memtable, which is what kept it
 * full (shared_store_largest).
 */
static void
pg_attribute_noreturn()
group_commit_raise_no_room(Size size, long waited_ms)
{
	char		store[SLOT_STORE_LEN];
	int64		bytes;
	bool		flushing;

	if (shared_store_largest(store, sizeof(store), &bytes, &flushing))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("the rollout_fdw memtable had no room for a transaction of %zu bytes for %ld ms", size, waited_ms),
				 errdetail("Store \"%s\" holds %lld bytes of it%s. Nothing of this transaction was written.",
						   store, (long long) bytes,
						   flushing ? " and its flush has not finished" : ""),
				 errhint("rollout_stat_stores shows each store's share and last error. A store whose object store does not answer keeps its rows until a flush succeeds; rollout_fdw.memtable_wait_timeout sets how long a commit waits.")));
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("the rollout_fdw memtable had no room for a transaction of %zu bytes for %ld ms", size, waited_ms),
			 errdetail("Nothing of this transaction was written."),
			 errhint("rollout_fdw.memtable_wait_timeout sets how long a commit waits.")));
}

/*
 * Room for size more bytes in the memtable, waiting for a flush when there
 * is none (back-pressure).  The budget is the whole memtable's, shared by
 * every store: a committer flushes its own store when that frees something,
 * and otherwise waits for other stores to be flushed (the sweeper flushes a
 * store that holds more than a quarter of the memtable at once).  Nothing is
 * queued yet, so the wait can be cancelled.
 *
 * Other stores may never be flushed: a store whose tables were dropped or
 * moved to another location is reached by no sweeper, and one whose flushes
 * fail keeps its batches; so does a writer that lost its claim (its pipeline
 * broke, or it was fenced), whose batches no flush takes.  So a committer
 * that has waited a second evicts, once a second, the batches of stores that
 * no transaction committed to for MEMTABLE_EVICT_IDLE_S, and those of writers
 * that lost their claim, its own included (shared_store_evict_idle): their
 * rows are durable WAL entries, read from the store until a flush or their
 * next commit's claim seals them.  Without it, any role that may create a server could fill the
 * memtable and drop its tables, and every commit of the cluster would wait
 * until a restart.  A store that stays busy cannot be evicted, though: one
 * whose flush or WAL PUT an endpoint holds for as long as its server's
 * request_timeout says (and its owner, who may be any role with USAGE on the
 * wrapper, says how long).  So the wait ends after
 * rollout_fdw.memtable_wait_timeout with an error naming the store that
 * holds the memtable: statement_timeout does not reach a commit, and the
 * commits of every other role and store would wait as long as that endpoint
 * pleases.
 */
static void
group_commit_reserve(RolloutStore *store, SharedStoreSlot *slot, Size size)
{
	TimestampTz started = GetCurrentTimestamp();
	TimestampTz last_eviction = started;

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
		if (memtable_wait_timeout_ms > 0 &&
			TimestampDifferenceExceeds(started, GetCurrentTimestamp(),
									   memtable_wait_timeout_ms))
			group_commit_raise_no_room(size, memtable_wait_timeout_ms);
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		slot->backpressure_waits++;
		/* a flush frees nothing of a writer that lost its claim */
		own_bytes = slot->writer_state == WRITER_READY ? slot->mem_bytes : 0;
		LWLockRelease(&slot->lock);

		if (own_bytes > 0)
		{
			group_commit_note_flushing_itself(store);
			(void) rollout_flush_shard(store);
		}
		else if (TimestampDifferenceExceeds(last_eviction, GetCurrentTimestamp(), 1000))
		{
			last_eviction = GetCurrentTimestamp();
			(void) shared_store_evict_idle(last_eviction -
										   MEMTABLE_EVICT_IDLE_S * USECS_PER_SEC,
										   slot);
		}
		else
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 50, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* ERROR: a commit request of size does not fit into the memtable. */
static void
pg_attribute_noreturn()
commit_request_too_large(Size size)
{
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("the rollout_fdw memtable has no room for a transaction of %zu bytes", size),
			 errhint("Raise rollout_fdw.memtable_size or lower rollout_fdw.ingest_threshold.")));
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

	/* no flush or eviction makes room for it: waiting would never end */
	if ((int64) size > memtable_usable_bytes())
		commit_request_too_large(size);
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
			commit_request_too_large(size);
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
	request->schema_digest = store->schema_digest;
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

/* A request allocated but not queued yet, and its slot. */
typedef struct UnqueuedRequest
{
	SharedStoreSlot *slot;
	dsa_pointer pointer;
} UnqueuedRequest;

/*
 * PG_ENSURE_ERROR_CLEANUP callback: release an unqueued request when an
 * ERROR, or the backend's exit (pg_terminate_backend while it waits for a
 * claim), comes before it is queued.  Its room held, the store would count
 * as busy, never to be evicted, and the budget would shrink for good.
 */
static void
commit_request_release_callback(int code, Datum arg)
{
	UnqueuedRequest *unqueued = (UnqueuedRequest *) DatumGetPointer(arg);

	LWLockReleaseAll();			/* as shared_flush_end_callback */
	commit_request_release(unqueued->slot, unqueued->pointer);
}

/*
 * Queue the request and wait for its outcome, leading whenever the
 * pipeline takes another leader (pipeline_may_lead).  Interrupts are held
 * throughout: once our rows may be in a PUT, a cancel must not report
 * failure for a write that lands; the wait is bounded by the leaders' PUTs.
 * Returns the request's final status and, when done, its entry's
 * *position: read under the lock, since a done request belongs to the
 * memtable, which a flush may trim at any moment.  When this backend led
 * the entry that failed, *own_error is the error its write raised (NULL
 * otherwise), so that its committer reports it whole.  image is where a
 * leader encodes its entry.
 */
static RequestStatus
commit_request_await(RolloutStore *store, SharedStoreSlot *slot,
					 dsa_pointer pointer, WalEntryImage *image, int64 *position,
					 ErrorData **own_error)
{
	dsa_area   *area = memtable_dsa();
	CommitRequest *request = dsa_get_address(area, pointer);
	bool		leader = false;
	long		wait_ms = 0;
	RequestStatus status;
	bool		orphaned = false;
	CommitSleep sleep = COMMIT_SLEEP_NONE;
	int			pass_to;

	*own_error = NULL;
	HOLD_INTERRUPTS();
	LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
	if (DsaPointerIsValid(slot->queue_tail))
		((CommitRequest *) dsa_get_address(area, slot->queue_tail))->next = pointer;
	else
		slot->queue_head = pointer;
	slot->queue_tail = pointer;
	leader = pipeline_may_lead(slot, &wait_ms);
	LWLockRelease(&slot->lock);

	for (;;)
	{
		if (leader)
		{
			/* settles its entry whatever happens: never raises */
			*own_error = group_commit_lead(store, slot, pointer, image);
			leader = false;
		}
		LWLockAcquire(&slot->lock, LW_EXCLUSIVE);
		commit_sleep_forget(slot, sleep);
		sleep = COMMIT_SLEEP_NONE;
		status = request->status;
		*position = request->position;
		wait_ms = 0;
		if (status == REQUEST_PENDING && !request->taken)
			leader = pipeline_may_lead(slot, &wait_ms);
		if (status == REQUEST_DONE)
		{
			/* from here on a flush may free it (memtable_drop_oldest) */
			request->outcome_read = true;
			orphaned = request->orphaned;
		}
		if (status == REQUEST_PENDING && !leader)
			sleep = commit_sleep_register(slot, wait_ms);
		pass_to = leader ? -1 : commit_sleep_pass_timer(slot);
		LWLockRelease(&slot->lock);
		commit_sleep_post(pass_to);
		if (orphaned)
			dsa_free(area, pointer);	/* its batch is gone already */
		if (status != REQUEST_PENDING)
			break;
		if (sleep != COMMIT_SLEEP_NONE)
			commit_sleep(slot, sleep, wait_ms);
	}
	ConditionVariableCancelSleep();
	RESUME_INTERRUPTS();
	if (status != REQUEST_FAILED)
		*own_error = NULL;
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
	ErrorData  *own_error;
	WalEntryImage image;
	RequestStatus status;
	UnqueuedRequest unqueued;

	/*
	 * The handle must still belong to the slot (shared_store.c), before it
	 * touches the slot's state.  A slot still holding state of an older
	 * creation of the store (deleted and created again under the same name)
	 * is reset before anything is claimed or committed; then the shard's
	 * writer must be ready.
	 */
	shared_store_require_member(store, slot, "commit to");
	shared_store_adopt_incarnation(slot, store);
	writer_ensure_ready(store, slot);

	wal_entry_image_init(&image);
	initStringInfo(&refs);
	request_append_ingest(&refs, ingest);
	pointer = commit_request_allocate(store, slot, rows, row_count,
									  tombstone_count, &refs);

	/*
	 * Waiting for memtable room has no bound: the wait may have let another
	 * committer evict this store and unclaim its writer
	 * (group_commit_reserve), whose claim then flushes the tail; and ingest
	 * segments staged before both must still be young enough to name (wal.h).
	 * What follows waits only for the leaders' PUTs.
	 */
	unqueued.slot = slot;
	unqueued.pointer = pointer;
	PG_ENSURE_ERROR_CLEANUP(commit_request_release_callback,
							PointerGetDatum(&unqueued));
	{
		writer_ensure_ready(store, slot);
		/* the room held, the slot stays with the store it stands for now */
		shared_store_require_member(store, slot, "commit to");
		wal_check_ingest_fresh(store, ingest);
	}
	PG_END_ENSURE_ERROR_CLEANUP(commit_request_release_callback,
								PointerGetDatum(&unqueued));
	request = dsa_get_address(area, pointer);
	request->truncate = truncate;
	status = commit_request_await(store, slot, pointer, &image, &position,
								  &own_error);
	wal_entry_image_discard(&image);	/* each lead did; this costs nothing */
	if (status == REQUEST_FAILED)
	{
		char		error[SLOT_ERROR_LEN * 2];
		int			error_code = request->error_code;

		if (own_error != NULL)
		{
			/* this backend wrote the failed entry: its error, whole */
			commit_request_release(slot, pointer);
			ReThrowError(own_error);
		}
		strlcpy(error, request->error, sizeof(error));
		commit_request_release(slot, pointer);
		if (error_code == ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN)
			ereport(ERROR,
					(errcode(error_code),
					 errmsg("could not commit to store \"%s\": %s", store->name, error),
					 errdetail("The store did not say whether the group commit's WAL entry was written: its rows become visible if it was, when this cluster claims the shard again.")));
		ereport(ERROR,
				(errcode(error_code ? error_code : ERRCODE_IO_ERROR),
				 errmsg("could not commit to store \"%s\": %s", store->name, error),
				 errdetail("The transaction's rows were in a group commit whose WAL entry was not acknowledged; nothing of it is visible.")));
	}
	return position;
}
