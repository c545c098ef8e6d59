/*-------------------------------------------------------------------------
 *
 * snapshot.c
 *		The pieces of a snapshot: one source per object (or memtable batch,
 *		or the reading transaction's own rows) a read sees.
 *
 * What a snapshot is, and what each kind of source means, is in
 * snapshot.h; store_snapshot.c takes a store's snapshot.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "rollout/snapshot.h"

/*
 * -1 marks rows, bytes, stamp_floor, epoch_floor and stamp_fixed as unset, since 0 is a
 * real row count or size; everything else starts zeroed, for the caller to
 * fill in.
 */
SnapshotSource *
snapshot_source_new(SnapshotSourceKind kind)
{
	SnapshotSource *source = palloc0(sizeof(SnapshotSource));

	source->kind = kind;
	source->rows = -1;
	source->bytes = -1;
	source->stamp_floor = -1;
	source->epoch_floor = -1;
	source->stamp_fixed = -1;
	return source;
}
