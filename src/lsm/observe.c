/*-------------------------------------------------------------------------
 *
 * observe.c
 *		Counts and sizes of a store: cheap from metadata, exact on request.
 *
 * The cheap count reads only manifests and listings, never a data object:
 * base rows (fragments) plus the rows of generations not yet merged.  It
 * counts versions, so it is an upper bound of the distinct keys that
 * becomes exact once merges and a full compaction have removed shadowed
 * versions.  The rows of unflushed WAL entries are not in any manifest: with
 * the shared-memory writer the memtable knows them; without it the cheap
 * mode reports how many entries there are, and the exact mode counts their
 * rows.
 *
 * The exact count is what SELECT count(*) returns: the deduplicating read
 * over the same snapshot, decoding only the key and version columns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "rollout/maintenance.h"
#include "rollout/merge_read.h"
#include "rollout/shared_writer.h"
#include "rollout/snapshot.h"
#include "rollout/wal.h"

ObserveResult
rollout_observe_store(RolloutStore *store, bool exact, bool all_wal_tails)
{
	ObserveResult result = {0};
	List	   *shards = rollout_store_list_shards(store);
	List	   *manifests = NIL;
	BaseManifest *base;
	ListCell   *lc;

	/* the same order as a snapshot: shard manifests, then the base */
	foreach(lc, shards)
		manifests = lappend(manifests, shard_manifest_read_latest(store, lfirst(lc)));
	base = base_manifest_read_latest(store);

	result.base_version = base->version;
	result.fragments = list_length(base->fragments);
	foreach(lc, base->fragments)
	{
		FragmentEntry *fragment = lfirst(lc);

		result.base_rows += fragment->rows;
		result.bytes += fragment->bytes;
	}

	foreach(lc, manifests)
	{
		ShardManifest *manifest = lfirst(lc);
		int64		merged = base_manifest_merged_generation(base, manifest->shard);
		ListCell   *gc;

		if (strcmp(manifest->shard, store->shard) == 0)
			result.writer_epoch = manifest->writer_epoch;
		foreach(gc, manifest->generations)
		{
			GenerationEntry *generation = lfirst(gc);

			if (generation->number <= merged)
				continue;
			result.generations++;
			result.generation_rows += generation->rows;
			result.bytes += generation->bytes;
		}
		if (strcmp(manifest->shard, store->shard) == 0 || all_wal_tails)
		{
			List	   *entries = wal_list_after(store, manifest->shard,
												 manifest->replay_after);
			ListCell   *ec;

			result.wal_entries += list_length(entries);
			foreach(ec, entries)
				result.bytes += ((WalEntryRef *) lfirst(ec))->size;
		}
	}
	result.row_count = result.base_rows + result.generation_rows;

	/* with the shared-memory writer, the memtable knows its rows */
	{
		SharedStoreSlot *slot = shared_store_lookup(store);
		int64		rows;

		if (slot != NULL && shared_memtable_rows(slot, &rows))
		{
			result.unflushed_known = true;
			result.unflushed_rows = rows;
			result.row_count += rows;
		}
	}

	if (exact)
	{
		RolloutSnapshot *snapshot = rollout_snapshot_take(store, all_wal_tails);
		bool	   *want = palloc0(sizeof(bool) * store->schema.ncolumns);
		Datum	   *values = palloc0(sizeof(Datum) * store->schema.ncolumns);
		bool	   *isnull = palloc0(sizeof(bool) * store->schema.ncolumns);
		MergeReadOptions options = {.keep_tombstones = false, .follow_ingest = true};
		MergeRead  *read = merge_read_begin(store, snapshot, want, NULL, &options);

		while (merge_read_next(read, values, isnull))
			result.exact_row_count++;
		merge_read_end(read);
		result.exact_known = true;

		/*
		 * unflushed rows: memtable batches and the ingest segments they
		 * name know theirs; WAL entries say it in their footers
		 */
		if (result.unflushed_known)
			result.row_count -= result.unflushed_rows;
		result.unflushed_rows = 0;
		foreach(lc, snapshot->sources)
		{
			SnapshotSource *source = lfirst(lc);
			SegmentReader *reader;
			ListCell   *ic;

			if (source->kind == SNAPSHOT_MEMTABLE || source->kind == SNAPSHOT_INGEST)
			{
				result.unflushed_rows += Max(source->rows, 0);
				continue;
			}
			if (source->kind != SNAPSHOT_WAL_ENTRY)
				continue;
			CHECK_FOR_INTERRUPTS();
			reader = segment_reader_open(rollout_segment_source(store, source->key, -1));
			if (reader == NULL)
				continue;		/* flushed and collected meanwhile */
			result.unflushed_rows += reader->row_count;
			/* a large transaction's rows are in the ingest segments it names */
			foreach(ic, wal_metadata_from_json(reader->metadata, source->key)->ingest)
				result.unflushed_rows += ((WalIngestRef *) lfirst(ic))->rows;
			segment_reader_close(reader);
		}
		result.unflushed_known = true;
		result.row_count += result.unflushed_rows;
	}
	return result;
}
