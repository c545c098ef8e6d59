/*-------------------------------------------------------------------------
 *
 * shared_store.h
 *		Finding and creating the slots of shared memory, one per shard of a
 *		store this cluster touches (core/shared_store.c).
 *
 * Only with rollout_fdw in shared_preload_libraries.  Slots are found by the
 * object store's identity (ObjectStore.identity), the store's name and the
 * shard; a store keeps its slot while it is used, and an idle one may go to
 * another store when every slot is taken.  Without preloading
 * rollout_shared_available() is false and every caller takes the direct
 * path.  What a slot holds is in store_slot.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SHARED_STORE_H
#define ROLLOUT_SHARED_STORE_H

#include "rollout/store.h"
#include "rollout/store_slot.h"

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
 * WARNING says so once, and the direct path is used); when every slot is
 * taken, one that has been idle a while may go to a committer's store
 * (shared_store.c, slot_recycle).  Only the slots of
 * the store the handle's credentials reach (shared_store.c); to_commit (a
 * committer, which then claims it) also takes over a slot of the same names
 * that no claim tied to a store yet and another's credentials made, and
 * otherwise gets NULL while there is one.
 */
extern SharedStoreSlot *shared_store_slot(RolloutStore *store, bool to_commit);
extern uint64 shared_store_slot_generation(SharedStoreSlot *slot);

/* The same without creating a slot; NULL if there is none. */
extern SharedStoreSlot *shared_store_lookup(RolloutStore *store);

/*
 * The same, creating the slot but without the WARNING when every slot is
 * taken (for what only reads can lose).
 */
extern SharedStoreSlot *shared_store_slot_for_reading(RolloutStore *store);

/*
 * Whether this cluster has a slot of store that its handle may write
 * through (created, claimed or being claimed).  Never waits for a slot, so
 * that it may be called while claims are held off (writer_epoch.h); may
 * read and write the store (a write proof) once per slot of its names.
 */
extern bool shared_store_writable_slot_exists(RolloutStore *store);

/*
 * ERROR (retryable) unless store's handle may still use slot, which it
 * found before, to action ("commit to", "flush"): a committer with room in the memtable, or a flush, checks
 * so before it writes through the slot (the room and the flush keep the
 * slot from changing hands after).  May read the store once.
 */
extern void shared_store_require_member(RolloutStore *store,
										SharedStoreSlot *slot,
										const char *action);

/*
 * ERROR (retryable) when another slot of store's names holds a claim that
 * store's credentials reach: a writer about to claim slot checks so, under
 * the lock that serialises claims (writer_epoch.c), or two slots of one
 * store would fence each other.
 */
extern void shared_store_check_siblings(RolloutStore *store,
										SharedStoreSlot *slot);

/*
 * Forget what the slot holds about an older creation of the store
 * (deleted and created again under the same name); see shared_store.c.
 */
extern void shared_store_adopt_incarnation(SharedStoreSlot *slot,
										   RolloutStore *store);

/*
 * Make room in the memtable: drop the batches of every shard that holds
 * some and has nothing in flight, and either has had no commit since
 * idle_since (then its writer is unclaimed; never except's) or whose writer
 * lost its claim (nobody reads them then).  Returns the bytes freed.  For a
 * committer that waits for room while the memtable is full of stores nobody
 * flushes (their tables dropped or moved, or their flushes failing).
 */
extern int64 shared_store_evict_idle(TimestampTz idle_since,
									 SharedStoreSlot *except);

/*
 * The store whose slot holds the most of the memtable (its batches and the
 * room its committers took), into store (size bytes), with *bytes and
 * whether a flush of it is running; false when no slot holds any.  For an
 * error that says what keeps the memtable full.
 */
extern bool shared_store_largest(char *store, size_t size, int64 *bytes,
								 bool *flushing);

/* Has this cluster claimed the shard (so the memtable holds its tail)? */
extern bool shared_writer_is_ready(SharedStoreSlot *slot);

/* Serialise flushes of a shard across all backends and databases. */
extern void shared_flush_begin(SharedStoreSlot *slot);
extern void shared_flush_end(SharedStoreSlot *slot);

/*
 * shared_flush_end as a PG_ENSURE_ERROR_CLEANUP callback (arg: the slot),
 * which also runs when the backend exits in the middle of a flush.
 */
extern void shared_flush_end_callback(int code, Datum arg);

/*
 * An entry of store_name's shard may have become durable and is about to be
 * acknowledged, or the shard's writer was claimed: called after the entry
 * landed and before any committer can learn so (a group commit's publish,
 * a claim, a direct commit).  A read that began listing the shard's WAL
 * before this call cannot vouch for an empty tail any more, and one that
 * began after it sees the entry (core/manifest_view.c).
 */
extern void shared_store_note_wal_change(const char *store_name, const char *shard);

/* How often that happened so far (or a count that shares its counter). */
extern uint64 shared_store_wal_changes(const char *store_name, const char *shard);

/* The slots in use, for the statistics view: count and the array. */
extern int	shared_store_slots(SharedStoreSlot **slots);

#endif							/* ROLLOUT_SHARED_STORE_H */
