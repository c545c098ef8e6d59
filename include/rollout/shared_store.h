/*-------------------------------------------------------------------------
 *
 * shared_store.h
 *		A store's slot in shared memory: the state this cluster's backends
 *		share about one shard of one store (core/shared_store.c).
 *
 * Only with rollout_fdw in shared_preload_libraries.  A slot holds the
 * shard's writer (its claim, lsm/writer_epoch.c), its group-commit queue
 * (lsm/group_commit.c), its memtable (core/memtable.c) and its counters
 * (core/store_stats.c).  The layout is here because those modules share it,
 * as PostgreSQL's proc.h shares PGPROC; each module changes only its own
 * fields, under the slot's lock, never held across I/O.
 *
 * Slots are found by the object store's identity (ObjectStore.identity),
 * the store's name and the shard; never freed, they live as long as the
 * server.  Without preloading rollout_shared_available() is false and every
 * caller takes the direct path.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SHARED_STORE_H
#define ROLLOUT_SHARED_STORE_H

#include "datatype/timestamp.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "utils/dsa.h"

#include "rollout/store.h"

#define SLOT_LOCATION_LEN	1024
#define SLOT_STORE_LEN		256
#define SLOT_SHARD_LEN		72
#define SLOT_ERROR_LEN		256

/* The shard's writer on this cluster (lsm/writer_epoch.c). */
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
 * One transaction's rows, in the memtable's DSA area.  Queued for group
 * commit, then (once durable) part of a memtable batch through the same next
 * link.
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

typedef struct SharedStoreSlot
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

	/* the writer (writer_epoch.c) */
	WriterState writer_state;
	int			times_fenced;
	int64		epoch;
	int64		tip;			/* highest durable position */
	int64		last_stamp;		/* effective stamp at tip */
	bool		flushing;		/* a flush of the memtable runs */

	/* group commit (group_commit.c) */
	bool		leader_active;
	int64		last_group_transactions;	/* in the last entry written */
	dsa_pointer queue_head;
	dsa_pointer queue_tail;
	int64		queued_bytes;

	/* the memtable (memtable.c) */
	dsa_pointer mem_head;
	dsa_pointer mem_tail;
	int64		mem_bytes;
	int64		mem_rows;
	int64		mem_ingest_rows;	/* rows in ingest segments batches name */
	int64		mem_batches;

	/* counters (store_stats.c, rollout_stat_stores) */
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
} SharedStoreSlot;

/* Define rollout_fdw.max_stores (only while preloading: it sizes memory). */
extern void shared_store_define_settings(void);

/* Shared memory of the slots, for the shmem hooks (worker/shmem.c). */
extern Size shared_store_shmem_size(void);
extern void shared_store_shmem_init(void);

/* Is the shared-memory writer available in this server? */
extern bool rollout_shared_available(void);

/*
 * The slot of this cluster's shard of store (found or created), or NULL
 * when shared memory is not available or every slot is taken (then a
 * WARNING says so once, and the direct path is used).
 */
extern SharedStoreSlot *shared_store_slot(RolloutStore *store);

/* The same without creating a slot (readers); NULL if there is none. */
extern SharedStoreSlot *shared_store_lookup(RolloutStore *store);

/*
 * Every slot of that location string, store name and shard (for errors
 * about a store that did not open, whose identity is unknown): calls
 * callback(slot, arg) for each.
 */
extern void shared_store_foreach_by_name(const char *location,
										 const char *store_name,
										 const char *shard,
										 void (*callback) (SharedStoreSlot *slot,
														   void *arg),
										 void *arg);

/*
 * Forget what the slot holds about an older creation of the store
 * (deleted and created again under the same name); see shared_store.c.
 */
extern void shared_store_adopt_incarnation(SharedStoreSlot *slot,
										   RolloutStore *store);

/* Has this cluster claimed the shard (so the memtable holds its tail)? */
extern bool shared_writer_is_ready(SharedStoreSlot *slot);

/* Serialise flushes of a shard across all backends and databases. */
extern void shared_flush_begin(SharedStoreSlot *slot);
extern void shared_flush_end(SharedStoreSlot *slot);

/* The slots in use, for the statistics view: count and the array. */
extern int	shared_store_slots(SharedStoreSlot **slots);

#endif							/* ROLLOUT_SHARED_STORE_H */
