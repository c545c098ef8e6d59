/*-------------------------------------------------------------------------
 *
 * memtable.h
 *		Rows of durable WAL entries not yet flushed, in shared memory
 *		(core/memtable.c, DESIGN.md §6.4).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_MEMTABLE_H
#define ROLLOUT_MEMTABLE_H

#include "rollout/store.h"
#include "rollout/store_slot.h"
#include "rollout/snapshot.h"

/* Define rollout_fdw.memtable_size (only while preloading: it sizes memory). */
extern void memtable_define_settings(void);

/* Shared memory of the memtable, for the shmem hooks (worker/shmem.c). */
extern Size memtable_shmem_size(void);
extern void memtable_shmem_init(void);

/* The memtable's DSA area, attached on first use. */
extern dsa_area *memtable_dsa(void);

/*
 * Take size bytes of the whole memtable's budget (false if they do not fit),
 * and give them back.
 */
extern bool memtable_budget_take(int64 size);
extern void memtable_budget_return(int64 size);

/* How much of the budget is taken now, from 0 to 1. */
extern double memtable_budget_used_fraction(void);

/* The largest transaction (row bytes) the memtable takes without ingest. */
extern int64 memtable_max_transaction_bytes(void);

/* What the memtable's budget holds in all (memtable_budget_take). */
extern int64 memtable_usable_bytes(void);

/* The ingest references a commit request carries after its rows. */
extern List *memtable_request_ingest(CommitRequest *request);

/*
 * Make the requests chained from head, whose WAL entry is durable at
 * position with stamp, the slot's newest batch (slot lock held).
 */
extern void memtable_add_batch(SharedStoreSlot *slot, dsa_pointer batch_pointer,
							   dsa_pointer head, int64 position, int64 stamp,
							   bool truncates, const char *fingerprint,
							   uint64 schema_digest);

/* Drop every batch of the slot (slot lock held). */
extern void memtable_clear(SharedStoreSlot *slot);

/* When the newest batch of a slot became durable, or 0 (slot lock held). */
extern TimestampTz memtable_newest_durable_at(SharedStoreSlot *slot);

/*
 * How much of the memtable a change feed poll copies: it returns about
 * max_rows versions, and a consumer far behind must not have the whole
 * backlog copied for every poll (memtable_sources).
 */
typedef struct MemtableBudget
{
	int64		delivered_stamp;	/* batches stamped up to here are not
									 * counted: the consumer has them (nor are
									 * those below a truncate cut among the
									 * batches) */
	int64		rows;			/* stop after this many rows counted */
	int64		next_stamp;		/* out: the stamp of the first batch not
								 * copied */
	int64		fence_position; /* out: where the writer's claim put its
								 * fence, which holds no rows and so has no
								 * batch (0: unknown) */
} MemtableBudget;

/*
 * The memtable's batches after after_position as snapshot sources
 * (SNAPSHOT_MEMTABLE and, for ingest references, SNAPSHOT_INGEST; batches of
 * other credentials as their WAL entries), copied into local memory; a
 * change feed consumer has every batch up to its position already.  Returns
 * false (and nothing) when the shard's writer is not ready, i.e. the WAL
 * tail must be read from the store.  *truncate_stamp: the newest truncate
 * cut among all the batches (0: none), read with them under one hold of the
 * lock, so that a snapshot never has a TRUNCATE's rows without its cut.
 * *epoch (unless epoch is NULL): the writer epoch every batch was written
 * under.  With a budget (else NULL), the copy stops in front of the first
 * batch after the batches stamped after budget->delivered_stamp already
 * hold budget->rows rows, and budget->next_stamp is that batch's stamp
 * (PG_INT64_MAX: none was left).
 */
extern bool memtable_sources(RolloutStore *store, SharedStoreSlot *slot,
							 int64 after_position, MemtableBudget *budget,
							 List **sources, int64 *truncate_stamp,
							 int64 *epoch);

/*
 * For flush: every batch as sources (rows only) plus the ingest references
 * to adopt; *last_position and *last_stamp of the newest batch, and the
 * newest truncate cut among them (0: none).  Returns false when the writer is
 * not ready or the memtable empty.
 */
extern bool memtable_for_flush(RolloutStore *store, SharedStoreSlot *slot,
							   List **sources, List **ingest_seen,
							   int64 *last_position, int64 *last_stamp,
							   int64 *truncate_stamp);

/*
 * Drop batches up to position (after their flush committed shard manifest
 * manifest_version, with drops_covered_by_base, which the slot's view of the
 * store then knows).
 */
extern void memtable_trim(SharedStoreSlot *slot, int64 upto_position,
						  int64 manifest_version, int64 drops_covered_by_base);

/*
 * The rows in the memtable, those of the ingest segments it names included;
 * false when the writer is not ready (the WAL tail is then only on the
 * store).
 */
extern bool memtable_rows(RolloutStore *store, SharedStoreSlot *slot,
						  int64 *rows);

/* The memtable's age: when its oldest batch became durable (0 if empty). */
extern TimestampTz memtable_oldest(SharedStoreSlot *slot, int64 *bytes);

#endif							/* ROLLOUT_MEMTABLE_H */
