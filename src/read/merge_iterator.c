/*-------------------------------------------------------------------------
 *
 * merge_iterator.c
 *		The deduplicating LSM read: k-way merge of sorted row sources by key,
 *		emitting for each key only its newest version (DESIGN.md §5).
 *
 * Every source yields each key at most once, in ascending order
 * (row_source.c).  A binary heap orders the sources by their current
 * key.  For each key the merge takes every source positioned on it and
 * keeps the newest version by (_ts, shard, WAL position); a tombstone
 * winner hides the key, and so does a winner that fails the query's
 * pushed-down conditions (row_filter.h), checked before the winner's other
 * columns are decoded.  The sources that took part are advanced only at
 * the start of the next call, so that the values returned (which point into
 * a source's current row group) stay valid until then.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "lib/binaryheap.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "rollout/manifest_view.h"
#include "rollout/merge_read.h"
#include "rollout/store_sources.h"

#include "row_source_internal.h"

struct MergeRead
{
	RolloutStore *store;
	bool	   *want;
	KeyRange   *range;
	MemoryContext context;

	RowSource **sources;
	int			source_count;
	bool		(*sample) (void *sample_arg, uint64 cluster);
	void	   *sample_arg;
	binaryheap *heap;			/* sources with a current row, by key */
	RowSourcePrefetcher *prefetcher;	/* batches the sources' reads */

	/* sources positioned on the key returned last; advanced next call */
	RowSource **consumed;
	int			consumed_count;

	bool		keep_tombstones;
	int64		drop_tombstones_before;
	int64		truncate_stamp; /* winners older than this are hidden */
	const RowFilter *filter;	/* or NULL */
	MemoryContext filter_context;	/* what the filter's functions allocate,
									 * reset per row checked */
	MergeReadStats stats;
};

/*
 * binaryheap keeps the largest element on top; invert the key order so the
 * smallest key comes first.
 */
static int
merge_heap_compare(Datum a, Datum b, void *arg)
{
	MergeRead  *read = arg;
	RowSource  *sa = (RowSource *) DatumGetPointer(a);
	RowSource  *sb = (RowSource *) DatumGetPointer(b);

	return -segment_column_compare(&read->store->schema.columns[read->store->key_column],
								   row_source_key(sa), row_source_key(sb));
}

/*
 * Is a's current row a newer version than b's?  Order: _ts, then shard
 * (hash), then WAL position (a generation counts as its last position, a
 * fragment as 0).  Equal on all three means the same version twice (a
 * generation and the fragment it was merged into): either will do.
 */
static bool
merge_version_newer(RowSource *a, RowSource *b)
{
	int64		ta = row_source_ts(a);
	int64		tb = row_source_ts(b);
	const SnapshotSource *ma;
	const SnapshotSource *mb;

	int64		sa;
	int64		sb;

	if (ta != tb)
		return ta > tb;
	/* the row's own shard: fragments hold rows of many shards */
	sa = row_source_shard(a);
	sb = row_source_shard(b);
	if (sa != sb)
		return sa > sb;
	ma = row_source_meta(a);
	mb = row_source_meta(b);
	return ma->position > mb->position;
}

/* Keep an opened source, growing the array as ingest segments add more. */
static void
merge_read_keep_source(MergeRead *read, RowSource *source, int *capacity)
{
	if (read->source_count == *capacity)
	{
		*capacity *= 2;
		read->sources = repalloc(read->sources, sizeof(RowSource *) * *capacity);
	}
	read->sources[read->source_count++] = source;
}

/*
 * The sources of snapshot worth opening: all but the fragments and
 * generations whose every version is below the snapshot's truncate cut,
 * which are counted as skipped.  Leaving them out changes no result: a key
 * whose newest version is in one is hidden by the cut either way, and one
 * whose newest version is elsewhere does not depend on them.
 */
static List *
merge_read_live_sources(MergeRead *read, const RolloutSnapshot *snapshot)
{
	List	   *live = NIL;
	ListCell   *lc;

	if (snapshot->truncate_stamp <= 0)
		return snapshot->sources;
	foreach(lc, snapshot->sources)
	{
		SnapshotSource *meta = lfirst(lc);

		if (meta->max_ts > 0 && meta->max_ts < snapshot->truncate_stamp)
		{
			if (meta->kind == SNAPSHOT_FRAGMENT)
				read->stats.fragments_skipped++;
			else if (meta->kind == SNAPSHOT_GENERATION)
				read->stats.generations_skipped++;
			continue;
		}
		live = lappend(live, meta);
	}
	return live;
}

/*
 * Open the sources of metas, in order.  Their footers are fetched a window
 * at a time, each window in one batch of concurrent requests, so that a
 * remote store costs a few round trips rather than one per object while the
 * bytes held at once stay bounded (a footer read is up to
 * SEGMENT_TAIL_READ_SIZE).  WAL entries of metas may name ingest segments:
 * with ingest not NULL they are appended to it as sources to open next (or,
 * when not following them, to stats.ingest_seen).  Returns false when an
 * object vanished and the caller asked to be told (options->vanished).
 */
static bool
merge_read_open_sources(MergeRead *read, List *metas, WalRunning *running,
						const MergeReadOptions *options, List **ingest,
						int *capacity)
{
	int			count = list_length(metas);
	int			window = Max(64, 4 * objstore_max_concurrent_requests);
	SegmentSource **segments = palloc(sizeof(SegmentSource *) * window);
	SegmentPrefetch *prefetches = palloc(sizeof(SegmentPrefetch) * window);

	for (int start = 0; start < count; start += window)
	{
		int			end = Min(count, start + window);
		int			nprefetch = 0;

		for (int i = start; i < end; i++)
		{
			SnapshotSource *meta = list_nth(metas, i);

			segments[i - start] = NULL;
			if (!row_source_reads_object(meta, read->range))
				continue;
			segments[i - start] = rollout_segment_source(read->store, meta->key,
														 meta->bytes,
														 meta->max_ts);
			prefetches[nprefetch].source = segments[i - start];
			prefetches[nprefetch].tail = true;
			prefetches[nprefetch].offset = 0;
			prefetches[nprefetch].length = SEGMENT_TAIL_READ_SIZE;
			nprefetch++;
		}
		if (nprefetch > 0)
		{
			rollout_segment_sources_prefetch(read->store, prefetches, nprefetch);
			read->stats.prefetch_batches++;
		}

		for (int i = start; i < end; i++)
		{
			SnapshotSource *meta = list_nth(metas, i);
			List	   *seen_list = NIL;
			RowSource  *source;
			ListCell   *ic;

			CHECK_FOR_INTERRUPTS();
			source = row_source_open(read->store, meta, segments[i - start],
									 read->want, read->range, running,
									 &read->stats, read->prefetcher,
									 options->vanished,
									 ingest != NULL ? &seen_list : NULL);
			if (options->vanished != NULL && *options->vanished)
				return false;
			if (source != NULL)
				merge_read_keep_source(read, source, capacity);

			/*
			 * A large transaction's rows are in the ingest segments its WAL
			 * entry names, with that entry's stamp.  A flush adopts them as
			 * they are instead (ingest_seen).
			 */
			foreach(ic, seen_list)
			{
				IngestSeen *seen = lfirst(ic);
				SnapshotSource *ingest_meta;

				if (!options->follow_ingest)
				{
					read->stats.ingest_seen = lappend(read->stats.ingest_seen, seen);
					continue;
				}
				ingest_meta = snapshot_source_new(SNAPSHOT_INGEST);
				ingest_meta->key = seen->file;
				ingest_meta->shard = meta->shard;
				ingest_meta->shard_hash = meta->shard_hash;
				ingest_meta->position = meta->position;
				ingest_meta->rows = seen->rows;
				ingest_meta->stamp_fixed = seen->stamp;
				*ingest = lappend(*ingest, ingest_meta);
			}
		}
	}
	pfree(segments);
	pfree(prefetches);
	return true;
}

/* ----------------------------------------------------------------
 * Zone maps
 * ----------------------------------------------------------------
 */

/*
 * A stamp no version of source is older than: PG_INT64_MAX for the reading
 * transaction's own rows (newer than anything committed), the effective
 * stamp of a source that has one (a WAL entry, a memtable batch, an ingest
 * segment), else the least _ts of its row groups' statistics, or
 * PG_INT64_MIN when it has none.
 */
static int64
merge_source_oldest_stamp(RowSource *source)
{
	int			ts = source->store->ts_column;
	int64		oldest = PG_INT64_MAX;

	if (source->meta->kind == SNAPSHOT_TRANSACTION ||
		source->meta->kind == SNAPSHOT_TRANSACTION_SEGMENT)
		return PG_INT64_MAX;
	if (source->has_stamp)
		return source->stamp;
	if (source->reader == NULL)
		return PG_INT64_MIN;
	for (int g = 0; g < source->reader->row_group_count; g++)
	{
		SegmentChunkInfo *chunk = &source->reader->row_groups[g].chunks[ts];

		/* a NULL _ts sorts as 0 in the merge, and statistics omit it */
		if (!chunk->has_stats || chunk->null_count > 0)
			return PG_INT64_MIN;
		oldest = Min(oldest, DatumGetInt64(chunk->min));
	}
	return oldest;
}

/*
 * May two sources hold a common key?  Not when one compaction wrote both
 * (their disjoint set, manifest.h) or their key ranges miss each other;
 * without either to tell: yes.
 */
static bool
merge_sources_may_overlap(RolloutStore *store, RowSource *a, RowSource *b)
{
	const SegmentColumn *key = &store->schema.columns[store->key_column];

	if (a->meta->disjoint_set != NULL && b->meta->disjoint_set != NULL &&
		strcmp(a->meta->disjoint_set, b->meta->disjoint_set) == 0)
		return false;
	if (a->reader == NULL || b->reader == NULL ||
		!a->reader->has_key_range || !b->reader->has_key_range)
		return true;
	return segment_column_compare(key, a->reader->key_max, b->reader->key_min) >= 0 &&
		segment_column_compare(key, b->reader->key_max, a->reader->key_min) >= 0;
}

/*
 * Mark the row groups the read's filter lets it skip by their zone maps
 * (the chunks' min, max and null counts, row_filter_excludes_group).
 *
 * Skipping a row group G drops its versions from the merge.  For a key whose
 * newest version is not in G nothing changes.  For a key whose newest
 * version v is in G, v fails the filter (G's statistics say every row of G
 * does), so the right answer is no row, and dropping G gives exactly that
 * unless another source holds an older version of the key, which would then
 * win and might pass.  So G is skipped only when every other source that may
 * share a key with G's source is strictly newer than G: its oldest stamp
 * (merge_source_oldest_stamp) is above G's newest _ts.  Ties are not
 * skipped (the merge breaks them by shard and position).  Within one source
 * a key appears once, and within the fragments of one compaction too (a
 * compaction that clusters its outputs by a column, compact.c, writes
 * fragments whose key ranges all overlap but which share no key).  The transaction's own rows are newer than all, never
 * an obstacle and never skipped.  Sources opened at all are the only ones
 * that can hold a key of the read's range (the others were skipped by key
 * range or key filter).  docs/FORMAT.md, "Zone maps", gives the argument
 * with an example.
 */
static void
merge_read_plan_zone_maps(MergeRead *read)
{
	RolloutStore *store = read->store;
	int			ts = store->ts_column;
	int64	   *oldest;

	if (read->filter == NULL || !row_source_zone_maps_enabled() ||
		read->source_count == 0)
		return;
	oldest = palloc(sizeof(int64) * read->source_count);
	for (int i = 0; i < read->source_count; i++)
		oldest[i] = merge_source_oldest_stamp(read->sources[i]);

	for (int i = 0; i < read->source_count; i++)
	{
		RowSource  *source = read->sources[i];
		SegmentReader *reader = source->reader;
		int64		limit = PG_INT64_MAX;

		if (!source->sorted || reader == NULL ||
			source->meta->kind == SNAPSHOT_TRANSACTION_SEGMENT)
			continue;
		for (int j = 0; j < read->source_count; j++)
			if (j != i && oldest[j] != PG_INT64_MAX &&
				merge_sources_may_overlap(store, source, read->sources[j]))
				limit = Min(limit, oldest[j]);

		for (int g = 0; g < reader->row_group_count; g++)
		{
			SegmentRowGroupInfo *group = &reader->row_groups[g];
			SegmentChunkInfo *stamps = &group->chunks[ts];
			SegmentChunkInfo *keys = &group->chunks[store->key_column];
			int64		newest;

			CHECK_FOR_INTERRUPTS();
			/* groups outside the key range are skipped anyway */
			if (keys->has_stats &&
				key_range_past_upper(read->range, keys->min))
				break;
			if (keys->has_stats &&
				!key_range_overlaps(read->range, keys->min, keys->max))
				continue;
			if (source->has_stamp)
				newest = source->stamp;
			else if (stamps->has_stats)
				newest = DatumGetInt64(stamps->max);
			else
				continue;
			if (newest >= limit ||
				!row_filter_excludes_group(read->filter, &store->schema,
										   group->chunks, group->row_count))
				continue;
			if (source->zone_skipped == NULL)
				source->zone_skipped =
					MemoryContextAllocZero(source->context,
										   sizeof(bool) * reader->row_group_count);
			source->zone_skipped[g] = true;
		}
	}
	pfree(oldest);
}

/* Did the reads made ahead for any source find its object gone? */
static bool
merge_read_found_missing(MergeRead *read)
{
	for (int i = 0; i < read->source_count; i++)
	{
		if (row_source_object_missing(read->sources[i]))
			return true;
	}
	return false;
}

/*
 * Begin a merge read (merge_read.h).  The snapshot's sources are opened in
 * order with one running stamp carried along, so that each WAL entry gets its
 * effective stamp, then the ingest segments their WAL entries name; only
 * footers are read, and the first row groups of all sources are then fetched
 * in one batch.  An empty key range opens nothing.  Returns NULL, everything
 * freed, when an object vanished and options->vanished asked to be told;
 * the snapshot was then too old, and the manifest versions this cluster
 * knows are forgotten too, so that the caller's next snapshot reads the
 * store (manifest_view.h).
 */
MergeRead *
merge_read_begin(RolloutStore *store, RolloutSnapshot *snapshot,
				 const bool *want, const KeyRange *range,
				 const MergeReadOptions *options)
{
	MemoryContext context;
	MemoryContext oldcontext;
	MergeRead  *read;
	WalRunning	running = {0};
	int			capacity;

	context = AllocSetContextCreate(CurrentMemoryContext, "rollout merge read",
									ALLOCSET_DEFAULT_SIZES);
	oldcontext = MemoryContextSwitchTo(context);

	read = palloc0(sizeof(MergeRead));
	read->store = store;
	read->context = context;
	read->keep_tombstones = options->keep_tombstones;
	read->drop_tombstones_before = options->drop_tombstones_before;
	read->sample = options->sample;
	read->sample_arg = options->sample_arg;
	read->filter = options->filter != NULL && options->filter->count > 0 ?
		options->filter : NULL;
	if (read->filter != NULL)
		read->filter_context = AllocSetContextCreate(context,
													 "rollout merge filter",
													 ALLOCSET_SMALL_SIZES);
	read->want = palloc(sizeof(bool) * store->schema.ncolumns);
	memcpy(read->want, want, sizeof(bool) * store->schema.ncolumns);
	if (range != NULL)
	{
		read->range = palloc(sizeof(KeyRange));
		*read->range = *range;
	}
	capacity = Max(list_length(snapshot->sources), 1);
	read->sources = palloc0(sizeof(RowSource *) * capacity);
	read->prefetcher = row_source_prefetcher_create(store, &read->stats);

	if (read->range == NULL || !read->range->empty)
	{
		List	   *ingest = NIL;
		ReadCacheCounters cache_before;

		read_cache_get_counters(&cache_before);

		/* the snapshot's objects, then the ingest segments they name */
		if (!merge_read_open_sources(read, merge_read_live_sources(read, snapshot),
									 &running,
									 options, &ingest, &capacity) ||
			!merge_read_open_sources(read, ingest, &running, options,
									 NULL, &capacity))
		{
			MemoryContextSwitchTo(oldcontext);
			merge_read_end(read);
			manifest_view_forget(store);
			return NULL;
		}

		/* before the first batch, which must not fetch what is skipped */
		merge_read_plan_zone_maps(read);

		/* the first row groups of all of them, in one batch */
		row_source_prefetch(read->prefetcher, NULL, 0);
		row_source_count_cache_reads(store, &cache_before);

		/*
		 * An object whose footer came from the footer cache was not read when
		 * opened: the first batch is what finds it gone, and the caller that
		 * asked is told as if opening it had.
		 */
		if (options->vanished != NULL && merge_read_found_missing(read))
		{
			*options->vanished = true;
			MemoryContextSwitchTo(oldcontext);
			merge_read_end(read);
			manifest_view_forget(store);
			return NULL;
		}
	}

	read->consumed = palloc0(sizeof(RowSource *) * Max(read->source_count, 1));
	read->heap = binaryheap_allocate(Max(read->source_count, 1),
									 merge_heap_compare, read);
	for (int i = 0; i < read->source_count; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (row_source_next(read->sources[i]))
			binaryheap_add_unordered(read->heap, PointerGetDatum(read->sources[i]));
	}
	binaryheap_build(read->heap);
	read->stats.last_wal_stamp = running.stamp;
	read->stats.last_wal_epoch = running.epoch;

	/*
	 * Every WAL entry was opened above, so the cut is whole before the first
	 * row is returned: the snapshot's, or a newer one in an entry it reads.
	 */
	read->truncate_stamp = Max(snapshot->truncate_stamp, read->stats.wal_truncate_stamp);

	MemoryContextSwitchTo(oldcontext);
	return read;
}

/*
 * Advance the sources that produced the previous key, then take every source
 * positioned on the smallest key off the heap (into read->consumed) and
 * return the one with the newest version; NULL when every source is done.
 */
static RowSource *
merge_read_take_smallest(MergeRead *read, const SegmentColumn *key_column)
{
	RowSource  *winner;
	Datum		key;

	for (int i = 0; i < read->consumed_count; i++)
	{
		if (row_source_next(read->consumed[i]))
			binaryheap_add(read->heap, PointerGetDatum(read->consumed[i]));
	}
	read->consumed_count = 0;

	if (binaryheap_empty(read->heap))
		return NULL;

	CHECK_FOR_INTERRUPTS();

	winner = (RowSource *) DatumGetPointer(binaryheap_remove_first(read->heap));
	key = row_source_key(winner);
	read->consumed[read->consumed_count++] = winner;
	while (!binaryheap_empty(read->heap))
	{
		RowSource  *next = (RowSource *) DatumGetPointer(binaryheap_first(read->heap));

		if (segment_column_compare(key_column, row_source_key(next), key) != 0)
			break;
		(void) binaryheap_remove_first(read->heap);
		read->consumed[read->consumed_count++] = next;
		if (merge_version_newer(next, winner))
			winner = next;
	}
	return winner;
}

/*
 * Return the newest version of the next key (merge_read.h).  The sources that
 * produced the previous key are advanced only now, since the values returned
 * last point into their current row groups.  Every source on the smallest key
 * is then taken off the heap, the newest version among them wins
 * (merge_version_newer), and a tombstone winner hides the key unless the read
 * keeps tombstones (and then still when it is below the read's tombstone
 * horizon); so does a winner the read's filter drops.
 */
bool
merge_read_next(MergeRead *read, Datum *values, bool *isnull)
{
	const SegmentColumn *key_column = &read->store->schema.columns[read->store->key_column];

	for (;;)
	{
		RowSource  *winner;

		if (read->consumed_count == 1 && binaryheap_empty(read->heap))
		{
			/*
			 * The only source left (a compacted store, say): each of its keys
			 * is there once, so its next row wins without the heap.
			 */
			winner = read->consumed[0];
			if (!row_source_next(winner))
			{
				read->consumed_count = 0;
				return false;
			}
			CHECK_FOR_INTERRUPTS();
		}
		else
			winner = merge_read_take_smallest(read, key_column);
		if (winner == NULL)
			return false;

		if (read->truncate_stamp > 0 && row_source_ts(winner) < read->truncate_stamp)
		{
			/*
			 * A TRUNCATE committed after the newest version hides the key.
			 * Only a cut makes this decode _ts: scans of keys with one
			 * version each leave it undecoded otherwise (decode_late).
			 */
			read->stats.rows_truncated++;
			continue;
		}
		if (row_source_op(winner) == ROLLOUT_OP_DELETE)
		{
			/* the newest version is a tombstone */
			if (!read->keep_tombstones)
				continue;
			if (row_source_ts(winner) < read->drop_tombstones_before)
			{
				read->stats.tombstones_dropped++;
				continue;
			}
		}
		/* a cluster is its source (the pointer, fixed for the read) and place */
		if (read->sample != NULL &&
			!read->sample(read->sample_arg,
						  hash_combine64((uint64) (uintptr_t) winner,
										 row_source_cluster(winner, MERGE_READ_SAMPLE_CLUSTER_ROWS))))
			continue;
		if (read->filter != NULL)
		{
			/*
			 * The operators allocate as they like (a jsonb argument is
			 * detoasted, say); the executor resets its per-tuple memory for
			 * every row, and so does this for every row it checks.
			 */
			MemoryContext oldcontext = MemoryContextSwitchTo(read->filter_context);
			bool		matches = row_filter_matches(read->filter, winner);

			MemoryContextSwitchTo(oldcontext);
			MemoryContextReset(read->filter_context);
			if (!matches)
			{
				read->stats.rows_filtered++;
				continue;
			}
		}

		row_source_values(winner, read->want, values, isnull);
		read->stats.rows_returned++;
		return true;
	}
}

const MergeReadStats *
merge_read_stats(MergeRead *read)
{
	return &read->stats;
}

int64
merge_read_versions_held(MergeRead *read)
{
	int64		held = 0;

	for (int i = 0; i < read->source_count; i++)
	{
		RowSource  *source = read->sources[i];

		if (source->dead)
			continue;
		if (source->reader != NULL)
			held += source->reader->row_count;
		else if (source->loaded)
			held += source->order_count;
	}
	return held;
}

/*
 * Close every source and free the read.  The prefetcher forgets its sources
 * first, so closing them one by one does not search and shrink its list each
 * time.
 */
void
merge_read_end(MergeRead *read)
{
	/* closing many sources one by one need not update the prefetcher */
	row_source_prefetcher_release(read->prefetcher);
	for (int i = 0; i < read->source_count; i++)
		row_source_close(read->sources[i]);
	MemoryContextDelete(read->context);
}
