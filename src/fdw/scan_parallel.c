/*-------------------------------------------------------------------------
 *
 * scan_parallel.c
 *		A scan of a rollout table shared by parallel workers.
 *
 * The deduplicating merge must see every version of a key at once, so the
 * participants (the leader and its workers) split the key space, not the
 * objects: the leader cuts it into parts of about equal rows at the row
 * groups' smallest keys (read/key_split.c), and each participant claims the
 * next unclaimed part, merges every source over that part's keys, and
 * claims again until none is left.  Each key lies in exactly one part, so
 * exactly one participant decides which of its versions wins, the memtable's
 * and the WAL tail's included.  Parts are claimed in ascending order, so
 * each participant's rows come out in key order and a Gather Merge may
 * keep the scan's pathkeys.
 *
 * Every participant must read the same snapshot, the one the leader's
 * isolation level promises (scan_snapshot.c): the leader takes it and
 * copies it into the dynamic shared memory of the query, memtable rows and
 * the transaction's own rows included, which workers could not see
 * otherwise.  A worker never takes a snapshot of its own, and since no
 * participant may retake the shared one alone, a snapshot object that
 * garbage collection removed fails the scan (the grace period makes that
 * rare).
 *
 * Only the parallel-aware path may run in a worker (scan_plan.c marks the
 * others parallel-unsafe): a plain scan in a worker would take a snapshot
 * of another moment and miss the transaction's own rows.
 *
 * The shared memory holds, after ParallelScanShared, the part boundaries
 * (snapshot_serialize_keys) and then the snapshot (core/snapshot_serial.c).
 * Its size is the snapshot's, memtable rows included (at most
 * rollout_fdw.memtable_size), as a serial scan copies them too.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "port/atomics.h"
#include "storage/spin.h"
#include "utils/datum.h"

#include "rollout/key_split.h"
#include "rollout/snapshot.h"

#include "scan_internal.h"

/*
 * Parts per participant: enough for a participant that finishes early to
 * take over from a slow one, few enough that each part's fixed cost
 * (opening its sources) stays small.  A WAL entry is unsorted, so every
 * part reads all of it again (only the rows of its keys are kept): with
 * WAL entries in the snapshot, each participant gets one part.
 */
#define PARTS_PER_PARTICIPANT	4

struct ParallelScanShared
{
	pg_atomic_uint32 next_part; /* the next part to hand out */
	int			boundary_count; /* parts - 1 */
	Size		snapshot_offset;	/* of the snapshot, from the data */
	slock_t		mutex;			/* protects workers */
	ScanCounters workers;		/* what the workers read, for EXPLAIN */
	/* then, at SHARED_DATA_OFFSET, the boundaries and the snapshot */
};

/* where the data starts: MAXALIGNed, as snapshot_restore needs */
#define SHARED_DATA_OFFSET	MAXALIGN(sizeof(ParallelScanShared))
#define SHARED_DATA(shared)	((char *) (shared) + SHARED_DATA_OFFSET)

/* The store's key type, which boundaries and key ranges are values of. */
static const SegmentColumn *
scan_key_column(RolloutScanState *state)
{
	return &state->store->schema.columns[state->store->key_column];
}

/*
 * IsForeignScanParallelSafe: a scan only reads, and a worker reads the
 * leader's snapshot through shared memory, so a parallel-aware scan is
 * safe; which paths are is decided in scan_plan.c.
 */
static bool
rollout_is_foreign_scan_parallel_safe(PlannerInfo *root, RelOptInfo *rel,
									  RangeTblEntry *rte)
{
	return true;
}

/*
 * EstimateDSMForeignScan: take the snapshot (the leader's, as its isolation
 * level says), split its key space for the planned participants, and
 * flatten both into parallel_bytes, which InitializeDSMForeignScan copies.
 * snapshot_offset is where the snapshot starts in them.
 */
static Size
rollout_estimate_dsm_foreign_scan(ForeignScanState *node,
								  ParallelContext *pcxt)
{
	RolloutScanState *state = node->fdw_state;
	const SegmentColumn *key = scan_key_column(state);
	MemoryContext oldcontext = MemoryContextSwitchTo(state->scan_context);
	StringInfo	bytes = makeStringInfo();

	if (state->snapshot == NULL)
		state->snapshot = rollout_scan_take_snapshot(state);
	state->part_boundary_count =
		key_space_split(state->store, state->snapshot,
						(pcxt->nworkers + 1) *
						(state->snapshot->wal_object_count > 0 ? 1 : PARTS_PER_PARTICIPANT),
						&state->part_boundaries);
	snapshot_serialize_keys(state->part_boundaries, state->part_boundary_count,
							key->typlen, key->typbyval, bytes);
	state->parallel_snapshot_offset = bytes->len;
	snapshot_serialize(state->snapshot, key->typlen, key->typbyval, bytes);
	state->parallel_bytes = bytes;
	MemoryContextSwitchTo(oldcontext);
	return add_size(SHARED_DATA_OFFSET, bytes->len);
}

/* InitializeDSMForeignScan: the leader fills in the shared state. */
static void
rollout_initialize_dsm_foreign_scan(ForeignScanState *node,
									ParallelContext *pcxt, void *coordinate)
{
	RolloutScanState *state = node->fdw_state;
	ParallelScanShared *shared = coordinate;

	pg_atomic_init_u32(&shared->next_part, 0);
	shared->boundary_count = state->part_boundary_count;
	shared->snapshot_offset = state->parallel_snapshot_offset;
	SpinLockInit(&shared->mutex);
	memset(&shared->workers, 0, sizeof(ScanCounters));
	memcpy(SHARED_DATA(shared), state->parallel_bytes->data,
		   state->parallel_bytes->len);
	state->parallel = shared;
	state->part_count_shown = state->part_boundary_count + 1;
	/* the bytes are in shared memory now: this copy would only take room */
	pfree(state->parallel_bytes->data);
	pfree(state->parallel_bytes);
	state->parallel_bytes = NULL;
}

/*
 * ReInitializeDSMForeignScan: before a rescan's workers start, every part
 * is unclaimed again; the workers' counters go on adding up.
 */
static void
rollout_reinitialize_dsm_foreign_scan(ForeignScanState *node,
									  ParallelContext *pcxt, void *coordinate)
{
	ParallelScanShared *shared = coordinate;

	pg_atomic_write_u32(&shared->next_part, 0);
}

/*
 * InitializeWorkerForeignScan: a worker reads the leader's boundaries and
 * snapshot (pointing into the shared memory, which outlives the worker's
 * scan).  The transaction's own rows are in that snapshot already.
 */
static void
rollout_initialize_worker_foreign_scan(ForeignScanState *node,
									   shm_toc *toc, void *coordinate)
{
	RolloutScanState *state = node->fdw_state;
	ParallelScanShared *shared = coordinate;
	const SegmentColumn *key = scan_key_column(state);
	MemoryContext oldcontext = MemoryContextSwitchTo(state->scan_context);
	const char *cursor = SHARED_DATA(shared);

	state->parallel = shared;
	state->is_worker = true;
	state->part_boundary_count = shared->boundary_count;
	state->part_boundaries = snapshot_restore_keys(&cursor, shared->boundary_count);
	state->snapshot = snapshot_restore(SHARED_DATA(shared) + shared->snapshot_offset,
									   key->typlen, key->typbyval);
	state->own_rows_taken = true;
	MemoryContextSwitchTo(oldcontext);
}

/* See scan_internal.h. */
bool
scan_parallel_next_part(RolloutScanState *state, KeyRange *range)
{
	uint32		part = pg_atomic_fetch_add_u32(&state->parallel->next_part, 1);

	if (part > (uint32) state->part_boundary_count)
		return false;
	state->part = part;
	key_range_set_slice(range, state->store, state->part_boundaries,
						state->part_boundary_count, part);
	return true;
}

/*
 * A worker adds what it read to the shared counters, once, when its scan
 * ends (see scan_internal.h).
 */
void
scan_parallel_report(RolloutScanState *state)
{
	if (!state->is_worker || state->worker_reported || state->parallel == NULL)
		return;
	rollout_scan_close_read(state);
	SpinLockAcquire(&state->parallel->mutex);
	scan_counters_add(&state->parallel->workers, &state->counters);
	SpinLockRelease(&state->parallel->mutex);
	state->worker_reported = true;
}

/*
 * ShutdownForeignScan: runs before the shared memory goes.  A worker
 * reports; the leader adds the workers' counters to its own for EXPLAIN
 * ANALYZE and forgets the shared state, which a later rescan of the
 * Gather sets up anew.
 */
static void
rollout_shutdown_foreign_scan(ForeignScanState *node)
{
	RolloutScanState *state = node->fdw_state;

	if (state == NULL || state->parallel == NULL)
		return;
	if (state->is_worker)
	{
		scan_parallel_report(state);
		return;
	}
	SpinLockAcquire(&state->parallel->mutex);
	scan_counters_add(&state->counters, &state->parallel->workers);
	SpinLockRelease(&state->parallel->mutex);
	state->parallel = NULL;
}

void
rollout_parallel_routines(FdwRoutine *routine)
{
	routine->IsForeignScanParallelSafe = rollout_is_foreign_scan_parallel_safe;
	routine->EstimateDSMForeignScan = rollout_estimate_dsm_foreign_scan;
	routine->InitializeDSMForeignScan = rollout_initialize_dsm_foreign_scan;
	routine->ReInitializeDSMForeignScan = rollout_reinitialize_dsm_foreign_scan;
	routine->InitializeWorkerForeignScan = rollout_initialize_worker_foreign_scan;
	routine->ShutdownForeignScan = rollout_shutdown_foreign_scan;
}
