/*-------------------------------------------------------------------------
 *
 * row_source.c
 *		One object of a snapshot as a stream of rows sorted by key, each key
 *		at most once: the input of the k-way merge (merge_iterator.c).
 *
 * Generations and fragments are written sorted and deduplicated, so their
 * rows are streamed one row group at a time (one memory context reset per
 * row group), skipping row groups whose key zone map misses the key range.
 * A WAL entry holds rows in commit order: it is small, so it is loaded
 * whole, sorted by key and reduced to the last row of each key (within one
 * entry the later row is the newer version).  A memtable batch (the rows of
 * a durable WAL entry kept in shared memory) is handled the same way, from
 * its row blob instead of an object, and so are the reading transaction's
 * own rows (SNAPSHOT_TRANSACTION; a transaction whose buffer spilled gives
 * them as a sorted segment in a local file instead).
 *
 * Late materialization.  A row group is read whole (one request per run of
 * chunks; from a local store the deferred chunks are read page by page
 * when needed instead) but only its key column is decoded at once; the
 * others stay compressed until a row of theirs is asked for, and then only
 * that row's page is decoded (format version 3): the version columns for
 * the rows the merge compares, the others (row_source_column) only for the
 * version that wins and passes the pushed-down conditions.  A row group none
 * of whose rows wins, or a lookup's row group of 4,096 rows of which one is
 * wanted and filtered out, never decompresses its payload.
 *
 * Zone maps on other columns skip a row group only where the merge
 * (merge_iterator.c, merge_read_plan_zone_maps) proved it safe: skipping the
 * row group that holds the newest version of a key would let an older
 * version, in another object, win the merge.
 *
 * Row groups are read through the merge's prefetcher (prefetch.c), which
 * fetches them in batches with the other sources' next reads.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <malloc.h>

#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "rollout/key_range.h"
#include "rollout/manifest_view.h"
#include "rollout/row_blob.h"
#include "rollout/store_definition.h"
#include "rollout/store_stats.h"
#include "rollout/store_sources.h"
#include "rollout/wal.h"

#include "row_source_internal.h"

static void row_source_decode_deferred(RowSource *source, SegmentRowGroup *rows,
									   int group, int column, int64 row);

/* rollout_fdw.use_key_filters, rollout_fdw.decode_late, use_zone_maps */
static bool use_key_filters = true;
static bool decode_late = true;
static bool use_zone_maps = true;

bool
row_source_zone_maps_enabled(void)
{
	return use_zone_maps;
}

/* ----------------------------------------------------------------
 * Opening
 * ----------------------------------------------------------------
 */

/*
 * A segment whose schema differs from the store's is not ours: refuse it
 * rather than decode bytes with the wrong types.
 */
static void
row_source_check_schema(RowSource *source)
{
	const SegmentSchema *expected = &source->store->schema;
	const SegmentSchema *found = &source->reader->schema;
	const char *name = source->meta->key;

	if (found->ncolumns != expected->ncolumns ||
		found->key_column != expected->key_column)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("segment \"%s\" does not belong to store \"%s\"",
						name, source->store->name),
				 errdetail("It has %d columns keyed by column %d; the store has %d columns keyed by column %d.",
						   found->ncolumns, found->key_column,
						   expected->ncolumns, expected->key_column)));
	for (int i = 0; i < expected->ncolumns; i++)
	{
		const SegmentColumn *e = &expected->columns[i];
		const SegmentColumn *f = &found->columns[i];

		if (strcmp(e->name, f->name) != 0 || e->typlen != f->typlen ||
			e->typbyval != f->typbyval || e->typalign != f->typalign)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("segment \"%s\" does not belong to store \"%s\"",
							name, source->store->name),
					 errdetail("Its column %d is \"%s\"; the store's is \"%s\" of another storage type.",
							   i + 1, f->name, e->name)));
	}
}

/*
 * qsort_arg comparator of an unsorted source's rows: by key, and for equal
 * keys by row group and row, which is commit order.  qsort is not stable; this
 * tie-break is what lets row_source_sort_unsorted keep the last row of each
 * key as its newest version.
 */
static int
row_ref_compare(const void *a, const void *b, void *arg)
{
	RowSource  *source = arg;
	const RowRef *ra = a;
	const RowRef *rb = b;
	int			key = source->store->key_column;
	int			cmp;

	cmp = segment_column_compare(&source->store->schema.columns[key],
								 source->groups[ra->group].values[key][ra->row],
								 source->groups[rb->group].values[key][rb->row]);
	if (cmp != 0)
		return cmp;
	/* equal keys: keep commit order, so the last one is the newest */
	if (ra->group != rb->group)
		return ra->group < rb->group ? -1 : 1;
	return ra->row < rb->row ? -1 : (ra->row > rb->row ? 1 : 0);
}

/* Load a WAL entry's row groups whole (it is small). */
static void
row_source_load_wal_entry(RowSource *source)
{
	SegmentReader *reader = source->reader;

	row_source_take_prefetched(source, PREFETCHED_ALL_GROUPS);

	source->group_count = reader->row_group_count;
	source->groups = palloc0(sizeof(SegmentRowGroup) * Max(reader->row_group_count, 1));
	for (int g = 0; g < reader->row_group_count; g++)
	{
		CHECK_FOR_INTERRUPTS();
		segment_reader_read_row_group(reader, g, source->want, source->defer,
									  &source->groups[g]);
		source->stats->row_groups_read++;
		source->stats->chunks_deferred += source->groups[g].deferred_count;
	}
}

/*
 * Keep the loaded rows in the key range, sort them by key and keep the last
 * (newest) row of each key: within one WAL entry the later row is the newer
 * version.
 */
static void
row_source_sort_unsorted(RowSource *source)
{
	int			key = source->store->key_column;
	int64		count = 0;
	int64		kept = 0;

	for (int g = 0; g < source->group_count; g++)
		count += source->groups[g].row_count;
	source->order = palloc(sizeof(RowRef) * Max(count, 1));
	for (int g = 0; g < source->group_count; g++)
	{
		for (int64 r = 0; r < source->groups[g].row_count; r++)
		{
			if (source->groups[g].isnull[key][r])
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("segment \"%s\" is corrupt",
								source->meta->key ? source->meta->key : "(memtable)"),
						 errdetail("Row %lld has a NULL key.", (long long) r)));
			if (!key_range_contains(source->range, source->groups[g].values[key][r]))
				continue;
			source->order[kept].group = g;
			source->order[kept].row = r;
			kept++;
		}
	}
	source->stats->versions_read += count;

	qsort_arg(source->order, kept, sizeof(RowRef), row_ref_compare, source);

	/* keep the last row of each run of equal keys */
	source->order_count = 0;
	for (int64 i = 0; i < kept; i++)
	{
		if (i + 1 < kept &&
			segment_column_compare(&source->store->schema.columns[key],
								   source->groups[source->order[i].group].values[key][source->order[i].row],
								   source->groups[source->order[i + 1].group].values[key][source->order[i + 1].row]) == 0)
			continue;
		source->order[source->order_count++] = source->order[i];
	}
	source->cursor = -1;
}

/* Count a source as read or skipped, by its kind. */
static void
row_source_count(MergeReadStats *stats, SnapshotSourceKind kind, bool read)
{
	switch (kind)
	{
		case SNAPSHOT_FRAGMENT:
			if (read)
				stats->fragments_read++;
			else
				stats->fragments_skipped++;
			break;
		case SNAPSHOT_GENERATION:
			if (read)
				stats->generations_read++;
			else
				stats->generations_skipped++;
			break;
		case SNAPSHOT_WAL_ENTRY:
		case SNAPSHOT_INGEST:
		case SNAPSHOT_MEMTABLE:
			if (read)
				stats->wal_entries_read++;
			else
				stats->wal_entries_skipped++;
			break;
		case SNAPSHOT_TRANSACTION:
		case SNAPSHOT_TRANSACTION_SEGMENT:
			break;				/* counted by rows (transaction_rows_read) */
	}
}

/*
 * A memtable batch as one in-memory row group: decode the row blob, and
 * give every row the batch's stamp, shard and the insert op.
 */
static void
row_source_load_memtable_batch(RowSource *source)
{
	RolloutStore *store = source->store;
	SnapshotSource *meta = source->meta;
	int			ncolumns = store->schema.ncolumns;
	SegmentRowGroup *group;
	Datum	   *values = palloc(sizeof(Datum) * ncolumns);
	bool	   *isnull = palloc(sizeof(bool) * ncolumns);
	int64		capacity = 64;
	int64		offset = 0;

	source->groups = palloc0(sizeof(SegmentRowGroup));
	source->group_count = 1;
	group = &source->groups[0];
	group->values = palloc0(sizeof(Datum *) * ncolumns);
	group->isnull = palloc0(sizeof(bool *) * ncolumns);
	for (int c = 0; c < ncolumns; c++)
	{
		group->values[c] = palloc(sizeof(Datum) * capacity);
		group->isnull[c] = palloc(sizeof(bool) * capacity);
	}
	while (row_blob_next(store->row_desc, meta->rows_data, meta->rows_len, &offset, values, isnull))
	{
		if (group->row_count == capacity)
		{
			capacity *= 2;
			for (int c = 0; c < ncolumns; c++)
			{
				group->values[c] = repalloc(group->values[c], sizeof(Datum) * capacity);
				group->isnull[c] = repalloc(group->isnull[c], sizeof(bool) * capacity);
			}
		}
		for (int c = 0; c < store->user_column_count; c++)
		{
			group->values[c][group->row_count] = values[c];
			group->isnull[c][group->row_count] = isnull[c];
		}
		group->values[store->ts_column][group->row_count] = Int64GetDatum(meta->stamp_fixed);
		group->values[store->shard_column][group->row_count] = Int64GetDatum(meta->shard_hash);
		/* the blob's _op follows its user columns */
		group->values[store->op_column][group->row_count] = values[store->user_column_count];
		group->isnull[store->ts_column][group->row_count] = false;
		group->isnull[store->shard_column][group->row_count] = false;
		group->isnull[store->op_column][group->row_count] = false;
		group->row_count++;
	}
}

/*
 * Does opening this source read an object?  Not for a memtable batch, nor
 * for a fragment or generation whose manifest key range misses the range.
 */
bool
row_source_reads_object(const SnapshotSource *meta, const KeyRange *range)
{
	if (meta->kind == SNAPSHOT_MEMTABLE || meta->kind == SNAPSHOT_TRANSACTION ||
		meta->kind == SNAPSHOT_TRANSACTION_SEGMENT)
		return false;
	if ((meta->kind == SNAPSHOT_FRAGMENT || meta->kind == SNAPSHOT_GENERATION) &&
		meta->has_key_range &&
		!key_range_overlaps(range, meta->min_key, meta->max_key))
		return false;
	return true;
}

/*
 * Keep freed memory for reuse instead of handing it back to the operating
 * system, once per process, before the first source is read.  A sorted
 * source decodes each row group into a context it resets for the next: a
 * few MB of page buffers and value arrays per row group, all larger than
 * PostgreSQL's allocation sets keep for themselves, so they go back to
 * malloc, which by default trims the top of the heap (and unmaps large
 * chunks) as soon as they are freed.  Every row group then faults its pages
 * in anew: on a virtual machine that made a scan of a 1 KB jsonb column of a
 * million rows three times slower (3.3 s against 1.0 s).  The thresholds
 * bound what a backend keeps: freed memory at the top of the heap is
 * returned past 64 MB, and allocations of 32 MB and more are still mapped
 * on their own.  Only backends that read rollout stores are affected.
 */
static void
row_source_keep_freed_memory(void)
{
	static bool done = false;

	if (done)
		return;
	(void) mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
	(void) mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
	done = true;
}

/*
 * The first row group of a sorted source that can hold a key of its range:
 * the first whose largest key is not below the range's lower bound, or,
 * where the walk over the groups would have stopped before it, the first
 * whose smallest key is past the upper bound (a range whose bounds cross, a
 * parallel worker's slice outside the query's range, must not count as
 * skipped groups the walk never looked at).  A sorted segment's row groups
 * follow key order, so neither their largest nor their smallest keys ever
 * decrease: each condition, and so the first of the two, holds from some
 * group on, and a binary search finds it in a few comparisons.  Walking from
 * group 0 compared the bound with every group before it, which made a
 * lookup's cost grow with the fragment (a 1M-row fragment has over 250
 * groups, each two comparisons through the key type's function).  0 when
 * the range has no lower bound or a group has no key statistics (the walk
 * then decides, as before).
 */
static int
row_source_first_group(RowSource *source)
{
	SegmentReader *reader = source->reader;
	int			key = source->store->key_column;
	int			low = 0;
	int			high = reader->row_group_count;

	if (!key_range_has_lower(source->range))
		return 0;
	for (int g = 0; g < reader->row_group_count; g++)
		if (!reader->row_groups[g].chunks[key].has_stats)
			return 0;
	while (low < high)
	{
		int			middle = low + (high - low) / 2;
		const SegmentChunkInfo *chunk = &reader->row_groups[middle].chunks[key];

		if (key_range_below_lower(source->range, chunk->max) &&
			!key_range_past_upper(source->range, chunk->min))
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

/*
 * A new source of meta, in its own memory context under
 * CurrentMemoryContext, reading the wanted columns plus the key and the
 * hidden ones.
 */
static RowSource *
row_source_create(RolloutStore *store, SnapshotSource *meta, const bool *want,
				  const KeyRange *range, MergeReadStats *stats)
{
	MemoryContext context;
	RowSource  *source;

	row_source_keep_freed_memory();
	context = AllocSetContextCreate(CurrentMemoryContext, "rollout row source",
									ALLOCSET_DEFAULT_SIZES);
	source = MemoryContextAllocZero(context, sizeof(RowSource));

	source->store = store;
	source->meta = meta;
	source->range = range;
	source->stats = stats;
	source->context = context;
	source->group_context = AllocSetContextCreate(context, "rollout row group",
												  ALLOCSET_DEFAULT_SIZES);
	source->group = -1;
	source->prefetched_group = -1;
	source->want = MemoryContextAlloc(context, sizeof(bool) * store->schema.ncolumns);
	for (int i = 0; i < store->schema.ncolumns; i++)
		source->want[i] = want[i];
	source->want[store->key_column] = true;
	source->want[store->ts_column] = true;
	source->want[store->shard_column] = true;
	source->want[store->op_column] = true;

	/*
	 * All but the key is decoded late, page by page: the version columns only
	 * for the rows in the key range that meet in the merge, the others only
	 * for the winners.
	 */
	source->defer = MemoryContextAlloc(context, sizeof(bool) * store->schema.ncolumns);
	for (int i = 0; i < store->schema.ncolumns; i++)
		source->defer[i] = decode_late && source->want[i] &&
			i != store->key_column;
	if (meta->stamp_fixed >= 0)
	{
		source->has_stamp = true;
		source->stamp = meta->stamp_fixed;
	}
	return source;
}

/*
 * Open a memtable batch (already durable and stamped) or the transaction's
 * own rows: decoded and sorted at once.  A batch counts like the WAL entry
 * it holds, one row group, skipped when no row is in the key range.  The
 * transaction's own rows are newer than anything committed; they are no
 * WAL entry, so the running maximum of stamps does not pass over them.
 */
static RowSource *
row_source_open_in_memory(RowSource *source, WalRunning *running)
{
	SnapshotSource *meta = source->meta;
	MergeReadStats *stats = source->stats;
	MemoryContext oldcontext;

	if (meta->kind == SNAPSHOT_MEMTABLE)
		running->stamp = Max(running->stamp, meta->stamp_fixed);
	oldcontext = MemoryContextSwitchTo(source->context);
	row_source_load_memtable_batch(source);
	source->sorted = false;
	row_source_sort_unsorted(source);
	source->loaded = true;
	MemoryContextSwitchTo(oldcontext);
	if (source->order_count == 0)
	{
		stats->versions_read -= source->groups[0].row_count;
		row_source_count(stats, meta->kind, false);
		row_source_close(source);
		return NULL;
	}
	if (meta->kind == SNAPSHOT_TRANSACTION)
		stats->transaction_rows_read += source->order_count;
	stats->row_groups_read++;
	row_source_count(stats, meta->kind, true);
	return source;
}

/*
 * Whether a WAL entry written under epoch is dead, advancing the running
 * epoch of its shard over it otherwise.  The run starts at the first entry
 * of a shard's run (epoch_floor, the manifest's sealed_epoch) and at 0
 * when a source of another shard comes without one.
 */
static bool
row_source_wal_entry_dead(SnapshotSource *meta, int64 epoch, WalRunning *running)
{
	if (meta->epoch_floor >= 0 ||
		running->shard == NULL || strcmp(running->shard, meta->shard) != 0)
	{
		running->epoch = Max(meta->epoch_floor, 0);
		running->shard = meta->shard;
	}
	if (epoch < running->epoch)
		return true;
	running->epoch = epoch;
	return false;
}

/*
 * A WAL entry's footer metadata: check its shard, and unless the entry is
 * dead (then source->dead is set and nothing else happens), give the source
 * its effective stamp (the running maximum advances over every live entry,
 * those the key range then skips and fence markers included) and, when
 * ingest is not NULL, append its ingest references there, in
 * CurrentMemoryContext.
 */
static void
row_source_read_wal_metadata(RowSource *source, WalRunning *running,
							 List **ingest)
{
	SnapshotSource *meta = source->meta;
	MemoryContext oldcontext = MemoryContextSwitchTo(source->context);
	WalEntryMetadata *metadata;
	ListCell   *lc;

	metadata = wal_metadata_from_json(source->reader->metadata, meta->key);
	MemoryContextSwitchTo(oldcontext);
	if (strcmp(metadata->shard, meta->shard) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("WAL entry \"%s\" belongs to shard \"%s\", not \"%s\"",
						meta->key, metadata->shard, meta->shard)));
	if (meta->stamp_floor >= 0)
		running->stamp = meta->stamp_floor;
	if (row_source_wal_entry_dead(meta, metadata->epoch, running))
	{
		source->dead = true;
		return;
	}
	source->has_stamp = true;
	source->stamp = Max(metadata->stamp, running->stamp + 1);
	running->stamp = source->stamp;
	if (metadata->truncate)
		source->stats->wal_truncate_stamp = Max(source->stats->wal_truncate_stamp,
												source->stamp);

	if (ingest == NULL)
		return;
	foreach(lc, metadata->ingest)
	{
		WalIngestRef *ref = lfirst(lc);
		IngestSeen *seen = palloc0(sizeof(IngestSeen));

		seen->file = pstrdup(ref->file);
		seen->rows = ref->rows;
		seen->position = meta->position;
		seen->stamp = source->stamp;
		*ingest = lappend(*ingest, seen);
	}
}

/* Define the read's settings; _PG_init calls this. */
void
row_source_define_settings(void)
{
	DefineCustomBoolVariable("rollout_fdw.decode_late",
							 "Decodes the columns other than the key only for the versions a read returns.",
							 "Off decodes every wanted column of every row group read; results are the same either way.",
							 &decode_late,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("rollout_fdw.use_zone_maps",
							 "Lets a scan skip row groups whose column statistics rule out its pushed conditions, where no older version elsewhere could then win.",
							 "Off reads every row group in the key range; results are the same either way.",
							 &use_zone_maps,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("rollout_fdw.use_key_filters",
							 "Lets a lookup of one key skip the segments whose key filter rules it out.",
							 "Off reads them as releases without key filters did; results are the same either way.",
							 &use_key_filters,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

/*
 * May the opened source hold the key of a single-key range?  Asks its key
 * filter when it has one and the range allows it (key_range_filter_key).
 */
static bool
row_source_filter_may_hold(RowSource *source)
{
	const SegmentColumn *key = &source->store->schema.columns[source->store->key_column];
	Datum		value;

	if (!use_key_filters || source->range == NULL ||
		source->reader->key_filter == NULL ||
		!key_range_filter_key(source->range, key->typid, &value))
		return true;
	return segment_reader_may_contain_key(source->reader, value);
}

/*
 * Open a source (row_source.h).  In-memory sources (a memtable batch, the
 * transaction's own rows) are decoded and sorted at once, and an object whose
 * manifest key range misses the range is counted as skipped without a request.
 * A WAL entry's metadata is read before the footer's key range is checked, so
 * that the running stamp advances over entries the range then skips and their
 * ingest references are still reported.  A transaction's spilled segment is a
 * local file, read directly, never through the prefetcher.
 */
RowSource *
row_source_open(RolloutStore *store, SnapshotSource *meta, SegmentSource *segment,
				const bool *want, const KeyRange *range, WalRunning *running,
				MergeReadStats *stats, RowSourcePrefetcher *prefetcher,
				bool *vanished, List **ingest)
{
	MemoryContext oldcontext;
	RowSource  *source;
	SegmentReader *reader;
	bool		is_wal = meta->kind == SNAPSHOT_WAL_ENTRY;
	bool		is_local = meta->kind == SNAPSHOT_TRANSACTION_SEGMENT;

	if (ingest != NULL)
		*ingest = NIL;
	if (meta->kind == SNAPSHOT_MEMTABLE || meta->kind == SNAPSHOT_TRANSACTION)
		return row_source_open_in_memory(row_source_create(store, meta, want,
														   range, stats),
										 running);

	/* objects the manifest describes: the key range may spare a GET */
	if (!is_local && !row_source_reads_object(meta, range))
	{
		row_source_count(stats, meta->kind, false);
		return NULL;
	}

	source = row_source_create(store, meta, want, range, stats);
	oldcontext = MemoryContextSwitchTo(source->context);
	if (is_local)
	{
		/* a local file: read directly, never through the prefetcher */
		segment = rollout_local_segment_source(meta->key);
		prefetcher = NULL;
	}
	else if (segment == NULL)
		segment = rollout_segment_source(store, meta->key, meta->bytes,
										 meta->max_ts);
	reader = segment_reader_open(segment);
	if (reader == NULL && vanished != NULL)
	{
		*vanished = true;
		MemoryContextSwitchTo(oldcontext);
		MemoryContextDelete(source->context);
		return NULL;
	}
	if (reader == NULL)
	{
		/* the snapshot was too old: the next one reads the store */
		manifest_view_forget(store);
		/* unless the store was deleted under the handle: say that instead */
		rollout_store_check_current(store, 0);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("object \"%s\" of store \"%s\" vanished during the scan",
						meta->key, store->name),
				 errhint("Garbage collection removed it; run the query again.")));
	}
	source->reader = reader;
	row_source_check_schema(source);
	MemoryContextSwitchTo(oldcontext);

	if (is_wal)
	{
		row_source_read_wal_metadata(source, running, ingest);
		if (source->dead)
		{
			stats->wal_dead_skipped++;
			row_source_count(stats, meta->kind, false);
			row_source_close(source);
			return NULL;
		}
	}
	source->sorted = reader->sorted && !is_wal;

	/*
	 * A lookup of one key in a sorted segment needs one of a row group's
	 * keys: its key chunk is decoded late too, page by page, so that the
	 * binary search decodes (and from a local store reads) the few pages it
	 * visits instead of the whole chunk (row_source_key_at).  Of the other
	 * columns it needs the one row of the key, so only that row of their
	 * pages is decoded.  Unsorted segments are loaded whole and sorted by key
	 * at once.
	 */
	if (source->sorted && decode_late && range != NULL && range->single_key)
	{
		source->defer[store->key_column] = true;
		source->one_row_decode = true;
	}

	if (reader->row_count == 0 ||
		(reader->has_key_range &&
		 !key_range_overlaps(range, reader->key_min, reader->key_max)))
	{
		row_source_count(stats, meta->kind, false);
		row_source_close(source);
		return NULL;
	}
	if (!row_source_filter_may_hold(source))
	{
		stats->key_filter_skipped++;
		row_source_count(stats, meta->kind, false);
		row_source_close(source);
		return NULL;
	}
	row_source_count(stats, meta->kind, true);
	if (is_local)
		stats->transaction_rows_read += reader->row_count;
	if (source->sorted)
	{
		int			first = row_source_first_group(source);

		/* the groups below the range are skipped as the walk would have */
		source->group = first - 1;
		stats->row_groups_skipped += first;
	}

	/* read nothing yet: the first row group joins the merge's first batch */
	source->prefetcher = prefetcher;
	if (prefetcher != NULL)
	{
		oldcontext = MemoryContextSwitchTo(GetMemoryChunkContext(prefetcher));
		prefetcher->sources = lappend(prefetcher->sources, source);
		MemoryContextSwitchTo(oldcontext);
	}
	return source;
}

/* Did a read made ahead for the source's object find it gone? */
bool
row_source_object_missing(RowSource *source)
{
	return source->reader != NULL &&
		rollout_segment_source_missing(source->reader->source);
}

/* ----------------------------------------------------------------
 * Iteration
 * ----------------------------------------------------------------
 */

/*
 * The row group a sorted source reads after `after`: the next one whose key
 * zone map overlaps the range, or -1 when none is left.  The same choice
 * row_source_next_group makes, without counting anything.
 */
int
row_source_upcoming_group(RowSource *source, int after)
{
	SegmentReader *reader = source->reader;
	int			key = source->store->key_column;

	for (int g = after + 1; g < reader->row_group_count; g++)
	{
		SegmentChunkInfo *chunk = &reader->row_groups[g].chunks[key];

		if (chunk->has_stats && key_range_past_upper(source->range, chunk->min))
			return -1;
		if (source->zone_skipped != NULL && source->zone_skipped[g])
			continue;
		if (!chunk->has_stats ||
			key_range_overlaps(source->range, chunk->min, chunk->max))
			return g;
	}
	return -1;
}

/*
 * Counted here, around the calls that read objects (opening, the first
 * batch, each next row group), where the store is known: a process-wide
 * difference taken by the scan node would also give a nested scan's reads
 * of another store to the outer one.
 */
void
row_source_count_cache_reads(RolloutStore *store, const ReadCacheCounters *before)
{
	ReadCacheCounters after;

	read_cache_get_counters(&after);
	shared_store_note_cache_reads(store, before, &after);
}

/* Load the next row group of a sorted source that can hold keys in range. */
static bool
row_source_next_group(RowSource *source)
{
	SegmentReader *reader = source->reader;
	int			key = source->store->key_column;

	while (++source->group < reader->row_group_count)
	{
		SegmentChunkInfo *chunk = &reader->row_groups[source->group].chunks[key];
		MemoryContext oldcontext;
		ReadCacheCounters cache_before;

		if (chunk->has_stats)
		{
			if (key_range_past_upper(source->range, chunk->min))
				return false;	/* sorted: every later group is past it too */
			if (!key_range_overlaps(source->range, chunk->min, chunk->max))
			{
				source->stats->row_groups_skipped++;
				continue;
			}
		}
		if (source->zone_skipped != NULL && source->zone_skipped[source->group])
		{
			source->stats->row_groups_skipped++;
			source->stats->zone_map_skipped++;
			continue;
		}
		CHECK_FOR_INTERRUPTS();

		/*
		 * The previous key points into the group about to be freed; keep a
		 * copy for the order check (by-value keys need none).
		 */
		if (source->has_previous_key)
		{
			const SegmentColumn *column = &source->store->schema.columns[key];

			if (!column->typbyval)
			{
				MemoryContext oldcontext = MemoryContextSwitchTo(source->context);
				Datum		copy = datumCopy(source->previous_key, false, column->typlen);

				if (source->previous_key_copy != NULL)
					pfree(source->previous_key_copy);
				source->previous_key_copy = DatumGetPointer(copy);
				source->previous_key = copy;
				MemoryContextSwitchTo(oldcontext);
			}
		}
		MemoryContextReset(source->group_context);
		read_cache_get_counters(&cache_before);
		row_source_take_prefetched(source, source->group);
		oldcontext = MemoryContextSwitchTo(source->group_context);
		segment_reader_read_row_group(reader, source->group, source->want,
									  source->defer, &source->rows);
		/* a lookup wants single pages, never the ones after them */
		if (source->one_row_decode)
			source->rows.read_ahead = NULL;
		MemoryContextSwitchTo(oldcontext);
		row_source_count_cache_reads(source->store, &cache_before);
		source->stats->row_groups_read++;
		source->stats->chunks_deferred += source->rows.deferred_count;
		source->stats->versions_read += source->rows.row_count;
		source->row = -1;
		source->group_in_range = chunk->has_stats &&
			!key_range_below_lower(source->range, chunk->min) &&
			!key_range_past_upper(source->range, chunk->max);
		return true;
	}
	return false;
}

/*
 * The key of row `row` of a sorted source's current row group, decoding its
 * page first when the key chunk is decoded late (a one-key lookup).  A NULL
 * key makes the segment corrupt.
 */
static inline Datum
row_source_key_at(RowSource *source, int64 row)
{
	int			key = source->store->key_column;

	if (unlikely(!segment_row_group_row_ready(&source->rows, key, row)))
		row_source_decode_deferred(source, &source->rows, source->group, key,
								   row);
	if (source->rows.isnull[key][row])
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("segment \"%s\" is corrupt", source->meta->key),
				 errdetail("A row has a NULL key.")));
	return source->rows.values[key][row];
}

/*
 * A key's place on a line on which keys of a uniform distribution (uuids,
 * hashes, counters) lie evenly: the value of an integer key, the first 8
 * bytes of a uuid.  False for other types, which have no such place.
 */
static bool
row_source_key_place(const SegmentColumn *column, Datum key, double *place)
{
	switch (column->compare_inline)
	{
		case SEGMENT_COMPARE_INT16:
			*place = DatumGetInt16(key);
			return true;
		case SEGMENT_COMPARE_INT32:
			*place = DatumGetInt32(key);
			return true;
		case SEGMENT_COMPARE_INT64:
			*place = (double) DatumGetInt64(key);
			return true;
		case SEGMENT_COMPARE_UUID:
			{
				const unsigned char *bytes = (const unsigned char *) DatumGetPointer(key);
				uint64		prefix = 0;

				for (int i = 0; i < 8; i++)
					prefix = (prefix << 8) | bytes[i];
				*place = (double) prefix;
				return true;
			}
	}
	return false;
}

/*
 * The row where a lookup's key probably is in the loaded row group, by
 * linear interpolation between the group's smallest and largest key; -1
 * when the key's type has no place (row_source_key_place), the bound is of
 * another type, or the group has no key statistics.
 */
static int64
row_source_guess_row(RowSource *source)
{
	int			key = source->store->key_column;
	const SegmentColumn *column = &source->store->schema.columns[key];
	const SegmentChunkInfo *keys = &source->reader->row_groups[source->group].chunks[key];
	const KeyBound *lower = &source->range->lower;
	double		low,
				high,
				place;

	if (!keys->has_stats || lower->value_type != column->typid ||
		!row_source_key_place(column, keys->min, &low) ||
		!row_source_key_place(column, keys->max, &high) ||
		!row_source_key_place(column, lower->value, &place) ||
		!(high > low))
		return -1;
	if (place <= low)
		return 0;
	if (place >= high)
		return source->rows.row_count - 1;
	return (int64) ((place - low) / (high - low) * (double) (source->rows.row_count - 1));
}

/*
 * Position a sorted source that has just loaded a row group before its first
 * row not below the range, by binary search over the group's (ascending)
 * keys: a lookup compares a dozen keys of 4,096 instead of half of them, and
 * with its key chunk decoded late decodes the three or four pages of it
 * that those keys are in.  Rows skipped so are never returned, so the
 * ascending check below does not need them.
 *
 * A lookup of a key spread evenly (a uuid, say) first decodes the page
 * where interpolation puts it, and narrows the search by that page's first
 * and last key: the key is nearly always in that page, and the search then
 * decodes no other.  When it is not, the search has lost nothing but one
 * page it would have decoded anyway some of the time.
 */
static void
row_source_seek_lower(RowSource *source)
{
	int64		low = 0;
	int64		high = source->rows.row_count;

	if (!key_range_has_lower(source->range))
		return;
	if (source->range->single_key && source->one_row_decode)
	{
		int64		guess = row_source_guess_row(source);
		int64		first;
		int64		end;

		if (guess >= 0)
		{
			segment_reader_page_rows(source->reader, source->group,
									 source->store->key_column, guess,
									 &first, &end);
			if (key_range_below_lower(source->range, row_source_key_at(source, first)))
				low = first + 1;
			else
				high = first;
			if (end - 1 < high)
			{
				if (key_range_below_lower(source->range, row_source_key_at(source, end - 1)))
					low = end;
				else
					high = end - 1;
			}
		}
	}
	while (low < high)
	{
		int64		middle = low + (high - low) / 2;

		if (key_range_below_lower(source->range, row_source_key_at(source, middle)))
			low = middle + 1;
		else
			high = middle;
	}
	source->row = low - 1;
}

/*
 * Advance to the next row (row_source.h).  A WAL entry is loaded, filtered by
 * the key range, sorted and deduplicated whole at its first call (an in-memory
 * source was at open), so that opening it reads only its footer.  A sorted
 * source moves through its row groups, skipping rows below the range and
 * stopping at the first key past it; keys that are not strictly ascending make
 * the segment corrupt, since the merge would otherwise return a key twice.
 */
bool
row_source_next(RowSource *source)
{
	int			key = source->store->key_column;

	if (source->exhausted)
		return false;

	if (!source->sorted)
	{
		if (!source->loaded)
		{
			MemoryContext oldcontext = MemoryContextSwitchTo(source->context);

			row_source_load_wal_entry(source);
			row_source_sort_unsorted(source);
			source->loaded = true;
			MemoryContextSwitchTo(oldcontext);
		}
		if (++source->cursor >= source->order_count)
		{
			source->exhausted = true;
			return false;
		}
		return true;
	}

	for (;;)
	{
		Datum		current;

		if (source->group < 0 || source->row + 1 >= source->rows.row_count)
		{
			if (!row_source_next_group(source))
			{
				source->exhausted = true;
				return false;
			}
			if (source->rows.row_count == 0)
				continue;
			if (!source->group_in_range)
				row_source_seek_lower(source);
			if (source->row + 1 >= source->rows.row_count)
				continue;		/* every row is below the range */
		}
		source->row++;
		current = row_source_key_at(source, source->row);
		if (!source->group_in_range)
		{
			if (key_range_past_upper(source->range, current))
			{
				source->exhausted = true;
				return false;
			}
			if (!key_range_contains(source->range, current))
				continue;
		}

		/*
		 * The merge relies on each source being strictly ascending; a segment
		 * that is not is corrupt, and must not silently produce duplicates.
		 */
		if (source->has_previous_key &&
			segment_column_compare(&source->store->schema.columns[key],
								   source->previous_key, current) >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("segment \"%s\" is corrupt", source->meta->key),
					 errdetail("Its keys are not strictly ascending.")));
		source->has_previous_key = true;
		source->previous_key = current;
		return true;
	}
}

/*
 * Decode a column of a row group that was deferred, in the context the row
 * group lives in: the per-group one of a sorted source, the source's own for
 * a loaded WAL entry.
 */
static void
row_source_decode_deferred(RowSource *source, SegmentRowGroup *rows,
						   int group, int column, int64 row)
{
	MemoryContext oldcontext;
	bool		first = rows->values[column] == NULL;

	oldcontext = MemoryContextSwitchTo(source->sorted ? source->group_context
									   : source->context);
	if (source->one_row_decode && column != source->store->key_column)
	{
		segment_row_group_decode_deferred_row(source->reader, group, rows,
											  column, row);
		source->stats->pages_decoded_late++;
	}
	else
		source->stats->pages_decoded_late +=
			segment_row_group_decode_deferred(source->reader, group, rows,
											  column, row);
	MemoryContextSwitchTo(oldcontext);
	if (first)
		source->stats->chunks_decoded_late++;
}

/* See row_source.h. */
uint64
row_source_cluster(RowSource *source, int rows_per_cluster)
{
	int			group = source->group;
	int64		row = source->row;

	if (!source->sorted)
	{
		group = source->order[source->cursor].group;
		row = source->order[source->cursor].row;
	}
	return ((uint64) (uint32) group << 32) | (uint32) (row / rows_per_cluster);
}

/* A column's value in the current row, decoding its chunk if deferred. */
static inline Datum
row_source_value(RowSource *source, int column, bool *isnull)
{
	SegmentRowGroup *rows;
	int			group;
	int64		row;

	if (source->sorted)
	{
		rows = &source->rows;
		group = source->group;
		row = source->row;
	}
	else
	{
		RowRef	   *ref = &source->order[source->cursor];

		rows = &source->groups[ref->group];
		group = ref->group;
		row = ref->row;
	}
	if (unlikely(!segment_row_group_row_ready(rows, column, row)))
		row_source_decode_deferred(source, rows, group, column, row);
	*isnull = rows->isnull[column][row];
	return rows->values[column][row];
}

/*
 * One wanted column of the current row (the pushed-down conditions read
 * them); a by-reference value points into the source's current rows.
 */
Datum
row_source_column(RowSource *source, int column, bool *isnull)
{
	return row_source_value(source, column, isnull);
}

/*
 * Is a wanted column of the current row NULL?  A deferred chunk whose row
 * group has no NULL, or only NULLs, in it answers without being decoded.
 */
bool
row_source_column_is_null(RowSource *source, int column)
{
	bool		isnull;

	if (source->sorted && source->rows.deferred != NULL &&
		source->rows.deferred[column] != NULL)
	{
		SegmentRowGroupInfo *group = &source->reader->row_groups[source->group];

		if (group->chunks[column].null_count == 0)
			return false;
		if (group->chunks[column].null_count == group->row_count)
			return true;
	}
	(void) row_source_value(source, column, &isnull);
	return isnull;
}

Datum
row_source_key(RowSource *source)
{
	bool		isnull;

	return row_source_value(source, source->store->key_column, &isnull);
}

/*
 * The current row's version stamp: the source's effective stamp when it has
 * one (a WAL entry's stored _ts is only its committer's clock, which the
 * running maximum may have raised), else the row's _ts, 0 if NULL.
 */
int64
row_source_ts(RowSource *source)
{
	bool		isnull;
	Datum		value;

	if (source->has_stamp)
		return source->stamp;
	value = row_source_value(source, source->store->ts_column, &isnull);
	return isnull ? 0 : DatumGetInt64(value);
}

int16
row_source_op(RowSource *source)
{
	bool		isnull;
	Datum		value;

	/*
	 * A row group without tombstones says so in its _op chunk's statistics:
	 * then no page of that chunk needs decoding for the merge to know.
	 */
	if (source->sorted && source->reader != NULL)
	{
		const SegmentChunkInfo *chunk =
		&source->reader->row_groups[source->group].chunks[source->store->op_column];

		if (chunk->null_count >= source->rows.row_count ||
			(chunk->has_stats &&
			 DatumGetInt16(chunk->min) == ROLLOUT_OP_INSERT &&
			 DatumGetInt16(chunk->max) == ROLLOUT_OP_INSERT))
			return ROLLOUT_OP_INSERT;
	}
	value = row_source_value(source, source->store->op_column, &isnull);
	return isnull ? ROLLOUT_OP_INSERT : DatumGetInt16(value);
}

/*
 * The current row's shard hash, which orders versions of equal stamp.  A
 * source with a stamp of its own holds one shard's rows and answers from its
 * metadata; any other answers from the row's _shard column (0 if NULL), since
 * a fragment mixes shards.
 */
int64
row_source_shard(RowSource *source)
{
	bool		isnull;
	Datum		value;

	/* a WAL entry's rows are its shard's; a fragment mixes shards */
	if (source->has_stamp)
		return source->meta->shard_hash;
	value = row_source_value(source, source->store->shard_column, &isnull);
	return isnull ? 0 : DatumGetInt64(value);
}

const SnapshotSource *
row_source_meta(RowSource *source)
{
	return source->meta;
}

/*
 * Copy the wanted columns of the current row into values/isnull, indexed by
 * segment schema column; by-reference values point into the source's current
 * rows.  A source with a stamp of its own reports that stamp as _ts, so that
 * flush and merge write the effective stamp, not the stored one, into the
 * segments they make.
 */
void
row_source_values(RowSource *source, const bool *want, Datum *values,
				  bool *isnull)
{
	for (int i = 0; i < source->store->schema.ncolumns; i++)
	{
		if (!want[i])
			continue;
		values[i] = row_source_value(source, i, &isnull[i]);
	}
	/* WAL entries carry the effective stamp, not the stored one */
	if (source->has_stamp && want[source->store->ts_column])
	{
		values[source->store->ts_column] = Int64GetDatum(source->stamp);
		isnull[source->store->ts_column] = false;
	}
}

/*
 * Close a source and free everything it holds, the RowSource itself included
 * (it lives in its own context).  A source the prefetcher still knows gives
 * back the budget of the bytes fetched ahead for it and leaves its list, so
 * later batches neither count them nor fetch for it.
 */
void
row_source_close(RowSource *source)
{
	if (source->prefetcher != NULL)
	{
		source->prefetcher->outstanding -= source->prefetched_bytes;
		source->prefetcher->sources = list_delete_ptr(source->prefetcher->sources,
													  source);
	}
	if (source->reader)
		segment_reader_close(source->reader);
	MemoryContextDelete(source->context);
}
