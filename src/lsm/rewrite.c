/*-------------------------------------------------------------------------
 *
 * rewrite.c
 *		Merge sorted sources into new sorted, deduplicated segments.
 *
 * Flush (WAL entries into a generation), merge (generations into a base
 * fragment) and compaction (fragments into fewer fragments) are the same
 * operation over different inputs: a deduplicating k-way merge that keeps
 * tombstones, written out as sorted segments with their key range and stamp
 * range recorded for the manifest.  Only the inputs, the naming of the
 * outputs and the manifest commit differ, and those stay with the callers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"

#include "rollout/maintenance_cost.h"
#include "rollout/rewrite.h"
#include "rollout/scratch.h"
#include "rollout/store_definition.h"

/*
 * The bytes of a row as it is held in memory, what a maintenance pass is
 * charged for rewriting it (maintenance_cost.h).
 */
static int64
rewrite_row_bytes(const SegmentSchema *schema, const Datum *values,
				  const bool *isnull)
{
	int64		bytes = 0;

	for (int i = 0; i < schema->ncolumns; i++)
	{
		int16		typlen = schema->columns[i].typlen;

		if (isnull[i])
			continue;
		if (typlen > 0)
			bytes += typlen;
		else if (typlen == -1)
			bytes += VARSIZE_ANY(DatumGetPointer(values[i]));
		else
			bytes += strlen(DatumGetCString(values[i])) + 1;
	}
	return bytes;
}

/*
 * What a row a pass's filter drops is charged (maintenance_cost.h): the
 * key, stamp, operation and cluster column it decoded, about.
 */
#define REWRITE_FILTERED_ROW_BYTES	48

/* The output being written for one range of the rows (one without clusters) */
typedef struct RewriteTarget
{
	SegmentWriter *writer;		/* NULL: none open */
	RewriteOutput *output;
	int64		rows;			/* in output */
} RewriteTarget;

/* Finish the target's output, if any. */
static void
rewrite_finish_output(RewriteTarget *target, const char *metadata)
{
	if (target->writer == NULL)
		return;
	segment_writer_finish(target->writer, metadata, &target->output->summary);
	target->writer = NULL;
}

/* Open a new output for target, registered in result before it exists. */
static void
rewrite_open_output(RolloutStore *store, RewriteTarget *target,
					RewriteResult *result)
{
	RewriteOutput *output = palloc0(sizeof(RewriteOutput));

	output->path = rollout_scratch_file_path("segment");
	output->min_ts = PG_INT64_MAX;
	output->max_ts = PG_INT64_MIN;
	/* registered before it exists, so cleanup never misses it */
	result->outputs = lappend(result->outputs, output);
	target->writer = segment_writer_begin(&store->schema, output->path, true,
										  store_rows_per_group,
										  store_key_filter_bits,
										  store_page_size * 1024,
										  store_dictionary_size * 1024);
	target->output = output;
	target->rows = 0;
}

/* Which range of clusters a row belongs to (rewrite.h). */
static int
rewrite_cluster_of(RolloutStore *store, const RewriteClusters *clusters,
				   const Datum *values, const bool *isnull)
{
	const SegmentColumn *column = &store->schema.columns[clusters->column];
	int			low = 0;
	int			high = clusters->boundary_count;

	if (isnull[clusters->column])
		return clusters->boundary_count + 1;
	/* the number of boundaries <= the value */
	while (low < high)
	{
		int			middle = (low + high) / 2;

		if (segment_column_compare(column, clusters->boundaries[middle],
								   values[clusters->column]) <= 0)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

/*
 * One read of the sources: every row the filter (or NULL) lets through goes
 * to its range's target, each output cut at rows_per_output rows.  Returns
 * the read, still open for its statistics; the caller ends it.  A vanished
 * source is an ERROR here, not a retry.
 */
static MergeRead *
rewrite_pass(RolloutStore *store, RolloutSnapshot *snapshot,
			 int64 rows_per_output, const RewriteClusters *clusters,
			 RewriteTarget *targets, const RowFilter *filter,
			 const char *metadata, bool follow_ingest,
			 int64 drop_tombstones_before, RewriteResult *result)
{
	int			ncolumns = store->schema.ncolumns;
	bool	   *want = palloc(sizeof(bool) * ncolumns);
	Datum	   *values = palloc0(sizeof(Datum) * ncolumns);
	bool	   *isnull = palloc0(sizeof(bool) * ncolumns);
	MergeReadOptions options = {0};
	MergeRead  *read;
	int64		filtered_charged = 0;

	for (int i = 0; i < ncolumns; i++)
		want[i] = true;
	options.keep_tombstones = true;
	options.drop_tombstones_before = drop_tombstones_before;
	options.follow_ingest = follow_ingest;
	options.filter = filter;
	read = merge_read_begin(store, snapshot, want, NULL, &options);
	while (merge_read_next(read, values, isnull))
	{
		int64		ts = DatumGetInt64(values[store->ts_column]);
		RewriteTarget *target = &targets[clusters == NULL ? 0
										 : rewrite_cluster_of(store, clusters,
															  values, isnull)];

		if (target->writer == NULL)
			rewrite_open_output(store, target, result);
		segment_writer_add_row(target->writer, values, isnull);
		if (maintenance_cost_active())
		{
			int64		filtered = merge_read_stats(read)->rows_filtered;

			/* and the rows the filter passed over since, a few columns each */
			maintenance_cost_charge_row_bytes(rewrite_row_bytes(&store->schema,
																values, isnull) +
											  (filtered - filtered_charged) * REWRITE_FILTERED_ROW_BYTES);
			filtered_charged = filtered;
			maintenance_cost_delay_point();
		}
		target->output->min_ts = Min(target->output->min_ts, ts);
		target->output->max_ts = Max(target->output->max_ts, ts);
		result->rows_written++;
		if (rows_per_output > 0 && ++target->rows >= rows_per_output)
			rewrite_finish_output(target, metadata);
	}
	if (maintenance_cost_active())
		maintenance_cost_charge_row_bytes((merge_read_stats(read)->rows_filtered - filtered_charged) *
										  REWRITE_FILTERED_ROW_BYTES);
	pfree(want);
	pfree(values);
	pfree(isnull);
	return read;
}

/*
 * The condition that lets only the rows of ranges first .. last of clusters
 * through, the NULLs' range alone when first is it: the row groups of no
 * other range are then skipped by their zone maps, and the wide columns of
 * no other range's rows decoded.
 */
static RowFilter *
rewrite_ranges_filter(RolloutStore *store, const RewriteClusters *clusters,
					  int first, int last)
{
	RowFilter  *filter = palloc0(sizeof(RowFilter));
	RowCondition *condition = palloc0(sizeof(RowCondition));

	filter->count = 1;
	filter->conditions = condition;
	condition->column = clusters->column;
	if (first == clusters->boundary_count + 1)
	{
		condition->kind = ROW_CONDITION_IS_NULL;
		return filter;
	}
	/* range i holds boundaries[i - 1] <= v < boundaries[i] */
	condition->kind = ROW_CONDITION_SEGMENT_RANGE;
	condition->definition = &store->schema.columns[clusters->column];
	condition->has_low = first > 0;
	if (condition->has_low)
		condition->low = clusters->boundaries[first - 1];
	condition->has_high = last < clusters->boundary_count;
	if (condition->has_high)
		condition->high = clusters->boundaries[last];
	return filter;
}

/* Keep what a flush needs of a read's statistics before the read is freed. */
static void
rewrite_keep_stats(MergeRead *read, RewriteResult *result)
{
	const MergeReadStats *stats = merge_read_stats(read);
	ListCell   *lc;

	result->versions_read = stats->versions_read;
	result->tombstones_dropped = stats->tombstones_dropped;
	result->last_wal_stamp = stats->last_wal_stamp;
	result->last_wal_epoch = stats->last_wal_epoch;
	result->truncate_stamp = stats->wal_truncate_stamp;

	/*
	 * The read's memory goes with merge_read_end: keep copies of the ingest
	 * segments it saw, which the caller (a flush) adopts afterwards.
	 */
	result->ingest_seen = NIL;
	foreach(lc, stats->ingest_seen)
	{
		IngestSeen *seen = palloc(sizeof(IngestSeen));

		*seen = *(IngestSeen *) lfirst(lc);
		seen->file = pstrdup(seen->file);
		result->ingest_seen = lappend(result->ingest_seen, seen);
	}
}

/*
 * The common core of flush, merge and compaction (rewrite.h): a merge read of
 * every column over the whole key range, keeping tombstones (but those below
 * drop_tombstones_before, compaction's horizon), cut into outputs
 * of rows_per_output rows, per range of clusters when given.  Every output
 * is sorted by key, and no key is in two of them.
 * Each output is registered in result before its file is created, so
 * rewrite_cleanup never misses one.
 */
void
rewrite_sources(RolloutStore *store, RolloutSnapshot *snapshot,
				int64 rows_per_output, const RewriteClusters *clusters,
				const char *metadata,
				bool follow_ingest, int64 drop_tombstones_before,
				RewriteResult *result)
{
	int			range_count = clusters == NULL ? 1 : clusters->boundary_count + 2;
	RewriteTarget *targets = palloc0(sizeof(RewriteTarget) * range_count);
	MergeRead  *read;

	/* the ranges of values, and the NULLs' */
	if (range_count <= REWRITE_MAX_OPEN_OUTPUTS + 1)
	{
		read = rewrite_pass(store, snapshot, rows_per_output, clusters, targets,
							NULL, metadata, follow_ingest,
							drop_tombstones_before, result);
		for (int i = 0; i < range_count; i++)
			rewrite_finish_output(&targets[i], metadata);
		rewrite_keep_stats(read, result);
		merge_read_end(read);
		return;
	}

	/* the choosing read followed ingest segments, as a compaction does */
	Assert(follow_ingest);

	/* a pass per group of ranges, the NULLs' range last and alone */
	for (int first = 0; first < range_count;)
	{
		int64		written_before = result->rows_written;
		int			last;
		RowFilter  *filter;

		if (first == range_count - 1)
			last = first;
		else
			last = Min(first + REWRITE_MAX_OPEN_OUTPUTS, range_count - 1) - 1;
		filter = rewrite_ranges_filter(store, clusters, first, last);

		read = rewrite_pass(store, snapshot, rows_per_output, clusters, targets,
							filter, metadata, follow_ingest,
							drop_tombstones_before, result);
		for (int i = first; i <= last; i++)
			rewrite_finish_output(&targets[i], metadata);
		rewrite_keep_stats(read, result);
		merge_read_end(read);
		if (first == range_count - 1 &&
			result->rows_written - written_before != clusters->null_rows)
			elog(ERROR, "a rewrite in passes over ranges of column \"%s\" wrote " INT64_FORMAT " rows with a NULL there where the read that chose the ranges saw " INT64_FORMAT,
				 store->schema.columns[clusters->column].name,
				 result->rows_written - written_before, clusters->null_rows);
		first = last + 1;
	}
	if (result->rows_written != clusters->rows)
		elog(ERROR, "a rewrite in passes over ranges of column \"%s\" wrote " INT64_FORMAT " rows where the read that chose the ranges saw " INT64_FORMAT,
			 store->schema.columns[clusters->column].name,
			 result->rows_written, clusters->rows);
	result->versions_read = clusters->versions_read;
	result->tombstones_dropped = clusters->tombstones_dropped;
}

/*
 * Remove the scratch file of every output (rewrite.h).  unlink errors are
 * ignored, so an output whose file was never created or is already removed
 * does no harm; the outputs stay listed in result, whose summaries the caller
 * still uses after the cleanup.
 */
void
rewrite_cleanup(RewriteResult *result)
{
	ListCell   *lc;

	if (result == NULL)
		return;
	foreach(lc, result->outputs)
	{
		RewriteOutput *output = lfirst(lc);

		(void) rollout_scratch_file_remove(output->path);
	}
}

/* The base-manifest entry of an uploaded output, stored at key. */
FragmentEntry *
rollout_fragment_entry(const char *key, const RewriteOutput *output)
{
	FragmentEntry *entry = palloc0(sizeof(FragmentEntry));

	entry->file = pstrdup(key);
	entry->rows = output->summary.row_count;
	entry->bytes = output->summary.bytes;
	entry->min_ts = output->min_ts;
	entry->max_ts = output->max_ts;
	entry->has_key_range = output->summary.has_key_range;
	entry->min_key = output->summary.key_min;
	entry->max_key = output->summary.key_max;
	return entry;
}
