/*-------------------------------------------------------------------------
 *
 * store_slot.h
 *		The layout of a store's slot in shared memory: what this cluster's
 *		backends share about one shard of one store.
 *
 * A slot holds the shard's writer (its claim, lsm/writer_epoch.c), its
 * group-commit queue (lsm/group_commit.c), its memtable (core/memtable.c),
 * the store's manifest versions as this cluster knows them
 * (core/manifest_view.c) and its counters (core/store_stats.c); core/shared_store.c finds and
 * creates slots.  The layout is here because those modules share it,
 * as PostgreSQL's proc.h shares PGPROC; each module changes only its own
 * fields, under the slot's lock, never held across I/O.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_STORE_SLOT_H
#define ROLLOUT_STORE_SLOT_H

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "utils/dsa.h"

#include "rollout/objstore.h"
#include "rollout/store.h"
#include "rollout/write_proof.h"

#define SLOT_LOCATION_LEN	1024
#define SLOT_STORE_LEN		256
#define SLOT_SHARD_LEN		72
#define SLOT_ERROR_LEN		256
#define SLOT_PUT_ID_LEN		64
#define SLOT_ADMITTED_MAX	8	/* credentials besides the owner's */
#define SLOT_SLEEPERS_MAX	64	/* committers asleep on their semaphores */

/* Shards of a store whose manifest versions a slot's view can hold. */
#define MANIFEST_VIEW_SHARDS	32

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
	bool		taken;			/* by a leader: no longer queued */

	/*
	 * A done request is also a row source of its memtable batch, which a
	 * flush or an eviction may drop before the committer, asleep or
	 * descheduled, has read its outcome here.  The committer sets
	 * outcome_read once it has; a batch dropped before that leaves the
	 * request to it (orphaned), and it frees the request itself.
	 */
	bool		outcome_read;
	bool		orphaned;
	int64		position;
	int64		row_count;
	int64		tombstone_count;	/* of its rows and ingest segments */
	bool		truncate;		/* the transaction ran TRUNCATE */
	int64		rows_len;		/* bytes of the row blob at data */
	int64		ingest_len;		/* bytes of ingest references after it */
	Size		size;			/* of this allocation, for accounting */
	int			error_code;		/* the failed entry's SQLSTATE */
	char		error[SLOT_ERROR_LEN * 2];	/* its message and context */
	char		fingerprint[OBJSTORE_FINGERPRINT_LEN];	/* whose credentials */
	uint64		schema_digest;	/* of the rows' columns (RolloutStore) */

	/*
	 * The row blob, then the ingest references.  Aligned, so that the leader
	 * decodes the blob's tuples where they lie (format/row_blob.c).
	 */
#ifdef pg_attribute_aligned
	char		data[FLEXIBLE_ARRAY_MEMBER] pg_attribute_aligned(MAXIMUM_ALIGNOF);
#else
	char		data[FLEXIBLE_ARRAY_MEMBER];
#endif
} CommitRequest;

/*
 * The most WAL entries one shard's group commit may have in flight
 * (rollout_fdw.wal_pipeline_depth is at most this).
 */
#define WAL_PIPELINE_MAX	8

/* Where an entry of the pipeline stands (group_commit.c). */
typedef enum PipelineState
{
	PIPELINE_FREE = 0,
	PIPELINE_WRITING,			/* its leader is writing it */
	PIPELINE_LANDED,			/* durable: acknowledged once all before are */
	PIPELINE_FAILED,			/* its position holds no rows of its requests,
								 * for good (an empty entry, or a previous
								 * writer's dead one): they fail, the pipeline
								 * goes on */
	PIPELINE_BROKEN				/* its position is not known to be settled: it
								 * and every entry after it fail */
} PipelineState;

/*
 * One WAL entry of the shard's group-commit pipeline: the requests a leader
 * took and what it writes them as.  In the slot, so that whichever leader
 * settles the lowest position publishes every entry whose turn has come.
 */
typedef struct PipelineEntry
{
	PipelineState state;
	int64		position;
	int64		epoch;
	int64		stamp;
	dsa_pointer requests;		/* the taken requests, in queue order */
	dsa_pointer batch;			/* the MemBatch header they become */
	int64		rows;
	int64		tombstones;		/* of the rows and ingest segments */
	int64		bytes;			/* of their row blobs */
	Size		reserved;		/* of their allocations: the memtable budget */
	int64		transactions;
	bool		truncate;		/* one of them ran TRUNCATE: so does the entry */
	TimestampTz started;		/* when its PUT began */
	int64		elapsed_us;		/* how long the PUT took */
	int			error_code;		/* FAILED, BROKEN: the SQLSTATE and message */
	char		error[SLOT_ERROR_LEN * 2];
} PipelineEntry;

/* One shard's newest manifest version, as the view knows it. */
typedef struct ManifestViewShard
{
	char		shard[SLOT_SHARD_LEN];
	int64		version;
} ManifestViewShard;

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
	bool		truncates;		/* its entry holds a TRUNCATE (its cut: stamp) */
	dsa_pointer requests;
	char		fingerprint[OBJSTORE_FINGERPRINT_LEN];	/* who wrote the entry */
	uint64		schema_digest;	/* of its rows' columns (RolloutStore) */
} MemBatch;

typedef struct SharedStoreSlot
{
	bool		in_use;
	char		identity[SLOT_LOCATION_LEN];	/* ObjectStore.identity: key */
	char		location[SLOT_LOCATION_LEN];	/* as configured, for the view */
	char		store[SLOT_STORE_LEN];
	char		shard[SLOT_SHARD_LEN];
	char		incarnation[SLOT_SHARD_LEN];	/* of the store it is about */

	/*
	 * Whose slot it is (shared_store.c).  Credentials that reach one location
	 * may reach different stores there (a tenant's own bucket of the same
	 * name), so a slot serves only handles known to reach the store its
	 * writer claimed: its owner, which created or took over the slot before
	 * its first claim, and the credentials admitted by reading the claim's
	 * fence marker with their own and finding its put id.  Those admitted
	 * only read through it; to write through it (commit, flush, claim) they
	 * also prove that they write the store (write_proof.c), with the claim's
	 * access kept here.  Others get a slot of their own. namespace_generation
	 * changes whenever the slot may come to stand for another store; handles
	 * then ask again.  Under lock but the generation, which handles read
	 * without it.
	 */
	pg_atomic_uint64 namespace_generation;

	/*
	 * When a handle last found the slot (a TimestampTz, kept to the second
	 * and written without a lock): the least recently used idle slot goes to
	 * a store that finds none free (shared_store.c, slot_recycle).
	 */
	pg_atomic_uint64 last_used_at;
	char		owner[OBJSTORE_FINGERPRINT_LEN];
	int			admitted_count;
	int			admitted_next;	/* where the next one goes: a ring */
	char		admitted[SLOT_ADMITTED_MAX][OBJSTORE_FINGERPRINT_LEN];
	int			writers_count;	/* admitted ones that proved they write */
	int			writers_next;
	char		writers[SLOT_ADMITTED_MAX][OBJSTORE_FINGERPRINT_LEN];
	char		claim_put_id[SLOT_PUT_ID_LEN];	/* of the last claim's fence;
												 * "": not claimed since the
												 * owner took the slot */
	int64		claim_position; /* where that fence is */
	Size		claim_access_len;	/* 0: too long to keep */
	char		claim_access[WRITE_PROOF_ACCESS_LEN];	/* what the claim's
														 * handle was opened
														 * with: secrets, never
														 * shown */

	LWLock		lock;			/* everything below; never held across I/O */
	ConditionVariable commit_cv;	/* request outcomes, leadership */
	ConditionVariable state_cv; /* writer state, flush in progress */

	/* the writer (writer_epoch.c) */
	WriterState writer_state;
	int			times_fenced;
	int64		epoch;
	int64		tip;			/* highest position settled in order:
								 * acknowledged (or failed for good) */
	int64		last_stamp;		/* effective stamp at tip */
	TimestampTz tip_observed_at;	/* when tip was last known to be the tip:
									 * the claim's manifest read, or the start
									 * of the last PUT */
	bool		flushing;		/* a flush of the memtable runs */

	/* group commit (group_commit.c) */
	int			leaders_active; /* leaders writing an entry (at most the
								 * pipeline depth) */
	int64		next_position;	/* the highest position given to a leader */
	int64		next_stamp;		/* the stamp of the entry there */
	TimestampTz last_lead_at;	/* when the last leader started */
	bool		pipeline_broken;	/* an entry's outcome is unsettled: the
									 * pipeline drains, then the writer claims
									 * again */
	int			pipeline_error_code;	/* why: the broken entry's SQLSTATE */
	char		pipeline_error[SLOT_ERROR_LEN * 2]; /* and message */
	PipelineEntry pipeline[WAL_PIPELINE_MAX];
	int64		last_group_transactions;	/* in the last entry written */

	/*
	 * Committers asleep on their PGPROC semaphores until a leader wakes them
	 * (group_commit.c): their pgprocno.  The one waiting with a timeout for
	 * its turn to lead sleeps on commit_cv (timer_holder: its pgprocno + 1, 0
	 * for none), and so do those that find the sleepers full.
	 */
	int			sleeper_count;
	int			sleepers[SLOT_SLEEPERS_MAX];
	bool		sleeper_awaits_turn[SLOT_SLEEPERS_MAX]; /* to lead, when the
														 * timer passes */
	int			timer_holder;
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

	/*
	 * The newest manifest versions this cluster knows (manifest_view.c), of
	 * the store creation named by incarnation; reset with it.
	 */
	TimestampTz view_refreshed_at;	/* start of the newest complete read of
									 * them from the store (0: none) */
	TimestampTz view_distrusted_at; /* when the view was last distrusted: a
									 * read begun before it refreshes nothing */
	bool		view_overflow;	/* more shards than view_shards holds */
	int64		view_base_version;
	int			view_shard_count;
	ManifestViewShard view_shards[MANIFEST_VIEW_SHARDS];

	/*
	 * This shard's WAL tail while this cluster's writer holds no memtable of
	 * it (manifest_view.c): a read that found no entry after replay_after
	 * tail_empty_after, begun at tail_empty_listed_at while the shard's count
	 * of changes (shared_store_note_wal_change) was tail_empty_changes,
	 * spares later reads the listing.
	 */
	int64		tail_empty_after;
	uint64		tail_empty_changes;
	TimestampTz tail_empty_listed_at;	/* 0: nothing known */

	/* counters (store_stats.c, rollout_stat_stores) */
	int64		rows_appended;
	int64		rows_deleted;	/* tombstones committed */
	int64		bytes_appended;
	int64		transactions_committed;
	int64		transactions_failed;
	int64		wal_puts;
	int64		wal_puts_pipelined; /* begun while an earlier position was
									 * still being written */
	int64		wal_fillers;	/* positions filled after a failed PUT */
	int64		put_time_total_us;
	int64		put_time_max_us;
	int64		backpressure_waits;
	int64		events[4];
	int64		event_last_us[4];
	int64		errors;
	char		last_error[SLOT_ERROR_LEN];
	TimestampTz last_error_at;
	int64		cache_hits;		/* disk cache blocks scans read and fetched */
	int64		cache_misses;
	int64		cache_hit_bytes;
	int64		cache_miss_bytes;
} SharedStoreSlot;

/*
 * Raise the view's version of shard's manifest to version, adding the shard
 * when the view did not know it (slot lock held exclusively).
 */
static inline void
store_slot_view_raise_shard(SharedStoreSlot *slot, const char *shard,
							int64 version)
{
	int			i;

	if (strlen(shard) >= SLOT_SHARD_LEN)
	{
		slot->view_overflow = true;
		return;
	}
	for (i = 0; i < slot->view_shard_count; i++)
		if (strcmp(slot->view_shards[i].shard, shard) == 0)
			break;
	if (i == slot->view_shard_count)
	{
		if (i == MANIFEST_VIEW_SHARDS)
		{
			slot->view_overflow = true;
			return;
		}
		strlcpy(slot->view_shards[i].shard, shard, SLOT_SHARD_LEN);
		slot->view_shards[i].version = 0;
		slot->view_shard_count++;
	}
	slot->view_shards[i].version = Max(slot->view_shards[i].version, version);
}

/*
 * Distrust the view as of now (slot lock held exclusively): the next
 * snapshot reads the store, and a read of it begun before now, whose
 * publication may come later, refreshes nothing.
 */
static inline void
store_slot_view_distrust(SharedStoreSlot *slot, TimestampTz now)
{
	slot->view_refreshed_at = 0;
	slot->view_distrusted_at = Max(slot->view_distrusted_at, now);
	slot->tail_empty_listed_at = 0;
}

/*
 * Record shard manifest version of shard, which holds drops_covered_by_base
 * (manifest.h), in the view (slot lock held exclusively).  The view's shard
 * versions must never have dropped generations its base version does not
 * hold: the base is raised to what the version says covers its drops, and
 * a version that does not say (written before manifests said, or never
 * merged) distrusts the view instead.  Shared by core/manifest_view.c, which
 * owns the view, and core/memtable.c, which must record the manifest that
 * sealed the batches it drops under the same hold of the lock.
 */
static inline void
store_slot_view_record_shard(SharedStoreSlot *slot, const char *shard,
							 int64 version, int64 drops_covered_by_base,
							 TimestampTz now)
{
	store_slot_view_raise_shard(slot, shard, version);
	if (drops_covered_by_base > 0)
		slot->view_base_version = Max(slot->view_base_version,
									  drops_covered_by_base);
	else
		store_slot_view_distrust(slot, now);
}

/*
 * Whether slot still stands for what store's handle found in it
 * (shared_store.c).  Call it with the slot's lock held, in either mode: a
 * slot changes hands only under it held exclusively.  What reads a slot's
 * memtable or view without keeping it busy checks so, since the slot may
 * have gone to another store since the handle found it.
 */
static inline bool
store_slot_is_current(const RolloutStore *store, SharedStoreSlot *slot)
{
	return store->shared_slot == slot &&
		pg_atomic_read_u64(&slot->namespace_generation) == store->shared_slot_generation;
}

#endif							/* ROLLOUT_STORE_SLOT_H */
