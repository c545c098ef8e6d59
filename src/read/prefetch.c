/*-------------------------------------------------------------------------
 *
 * prefetch.c
 *		Fetching the row groups the sources of one merge read next, in
 *		batches of concurrent requests.
 *
 * Prefetching.  On a remote store every read is a round trip, and a merge
 * over many objects needs the first row group of each before it can return
 * a row, then the next row group of each at about the same time.  The
 * sources of one merge therefore share a RowSourcePrefetcher: when a source
 * needs a row group it does not have, it fetches it in one batch of
 * concurrent requests together with the row group every other source will
 * read next (rollout_segment_sources_prefetch).  What is fetched is exactly
 * what each reader would have read (segment_reader_row_group_ranges), so
 * results do not change, only how many round trips they take.  The bytes
 * fetched ahead and not yet read are bounded by PREFETCH_BUDGET; the source
 * that needs its row group always gets it.  A WAL entry is loaded whole the
 * first time it is advanced, so its row groups join a batch the same way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "rollout/store_sources.h"

#include "row_source_internal.h"

/* A prefetcher for the sources of one merge, in CurrentMemoryContext. */
RowSourcePrefetcher *
row_source_prefetcher_create(RolloutStore *store, MergeReadStats *stats)
{
	RowSourcePrefetcher *prefetcher = palloc0(sizeof(RowSourcePrefetcher));

	prefetcher->store = store;
	prefetcher->stats = stats;
	return prefetcher;
}

/*
 * Detach the prefetcher from its sources, before they are all closed: each
 * then closes without updating it.
 */
void
row_source_prefetcher_release(RowSourcePrefetcher *prefetcher)
{
	ListCell   *lc;

	foreach(lc, prefetcher->sources)
		((RowSource *) lfirst(lc))->prefetcher = NULL;
	list_free(prefetcher->sources);
	prefetcher->sources = NIL;
	prefetcher->outstanding = 0;
}

/*
 * Add the reads of one row group (or, with PREFETCHED_ALL_GROUPS, of every
 * row group) of a source to *prefetches; returns their bytes.
 */
static int64
row_source_plan(RowSource *source, int group, SegmentPrefetch **prefetches,
				int *count, int *capacity)
{
	bool		all = group == PREFETCHED_ALL_GROUPS;
	int			first = all ? 0 : group;
	int			last = all ? source->reader->row_group_count - 1 : group;
	int64		bytes = 0;

	for (int g = first; g <= last; g++)
	{
		SegmentRange *ranges;
		int			nranges = segment_reader_row_group_ranges(source->reader, g,
															  source->want,
															  source->defer,
															  &ranges);

		for (int r = 0; r < nranges; r++)
		{
			SegmentPrefetch *prefetch;

			if (*count == *capacity)
			{
				*capacity *= 2;
				*prefetches = repalloc(*prefetches, sizeof(SegmentPrefetch) * *capacity);
			}
			prefetch = &(*prefetches)[(*count)++];
			prefetch->source = source->reader->source;
			prefetch->tail = false;
			prefetch->offset = ranges[r].offset;
			prefetch->length = ranges[r].length;
			bytes += ranges[r].length;
		}
		if (ranges != NULL)
			pfree(ranges);
	}
	return bytes;
}

/*
 * The next read of a source: the row group it reads next, every row group
 * of a WAL entry not loaded yet, or nothing (-1).
 */
static int
row_source_next_read(RowSource *source)
{
	if (source->exhausted || source->reader == NULL)
		return -1;
	if (!source->sorted)
		return source->loaded ? -1 : PREFETCHED_ALL_GROUPS;
	return row_source_upcoming_group(source, source->group);
}

/*
 * row_source_prefetch
 *		Fetch, in one batch, the row group `group` of `needing` (if not NULL)
 *		and the next read of every other source of the prefetcher that has
 *		not fetched it yet, as long as the bytes fit PREFETCH_BUDGET.
 */
void
row_source_prefetch(RowSourcePrefetcher *prefetcher, RowSource *needing,
					int group)
{
	int			capacity = 16;
	int			count = 0;
	SegmentPrefetch *prefetches = palloc(sizeof(SegmentPrefetch) * capacity);
	ListCell   *lc;

	if (needing != NULL)
	{
		needing->prefetched_bytes = row_source_plan(needing, group, &prefetches,
													&count, &capacity);
		needing->prefetched_group = group;
		prefetcher->outstanding += needing->prefetched_bytes;
	}

	foreach(lc, prefetcher->sources)
	{
		RowSource  *source = lfirst(lc);
		int			next;
		int			before = count;
		int64		bytes;

		if (source == needing)
			continue;
		next = row_source_next_read(source);
		if (next == -1 || source->prefetched_group == next)
			continue;
		/* it has something else fetched: wait until it reads that */
		if (source->prefetched_group != -1)
			continue;
		if (prefetcher->outstanding >= PREFETCH_BUDGET)
			break;
		bytes = row_source_plan(source, next, &prefetches, &count, &capacity);
		if (prefetcher->outstanding + bytes > PREFETCH_BUDGET)
		{
			count = before;		/* does not fit: it reads it itself later */
			continue;
		}
		source->prefetched_group = next;
		source->prefetched_bytes = bytes;
		prefetcher->outstanding += bytes;
	}

	if (count > 0)
	{
		rollout_segment_sources_prefetch(prefetcher->store, prefetches, count);
		prefetcher->stats->prefetch_batches++;
	}
	pfree(prefetches);
}

/*
 * A source is about to read `group` (or all its groups): account for what
 * was fetched for it, or fetch it now with whatever the others need next.
 */
void
row_source_take_prefetched(RowSource *source, int group)
{
	RowSourcePrefetcher *prefetcher = source->prefetcher;

	if (prefetcher == NULL)
		return;
	if (source->prefetched_group != group)
	{
		/*
		 * Something else fetched for it would be a bug in the planning; the
		 * reads then go to the store one by one, which is slower, not wrong.
		 */
		if (source->prefetched_group != -1)
			elog(DEBUG1, "rollout_fdw: row group %d of \"%s\" read, %d prefetched",
				 group, source->meta->key, source->prefetched_group);
		else
			row_source_prefetch(prefetcher, source, group);
	}
	prefetcher->outstanding -= source->prefetched_bytes;
	source->prefetched_bytes = 0;
	source->prefetched_group = -1;
}
