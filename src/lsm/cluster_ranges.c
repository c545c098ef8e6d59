/*-------------------------------------------------------------------------
 *
 * cluster_ranges.c
 *		Choose the ranges of a column a compaction spreads its rows over.
 *
 * A compacted store is sorted by key.  When the key is random (uuids) and a
 * query asks for a window of another column that follows time (created_at),
 * the window's rows lie in every row group, and zone maps skip nothing.  A
 * compaction of a table with the option cluster_by writes one set of
 * fragments per range of that column instead, each sorted by key; a window
 * then falls in one or two of them and zone maps skip the others' row
 * groups (docs/FORMAT.md, "Zone maps", says why that is safe).
 *
 * The ranges hold about equal numbers of rows: their boundaries are
 * quantiles of a uniform sample (reservoir sampling, a fixed seed so that a
 * compaction of the same inputs chooses the same ranges) of the rows the
 * rewrite will write.  Reading the sample costs a pass over the key, the
 * stamp and the column only, a fraction of the rewrite that follows; an
 * estimate from the inputs' zone maps would cost nothing but could not see
 * the versions the rewrite drops.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/pg_prng.h"
#include "miscadmin.h"

#include "rollout/cluster_ranges.h"
#include "rollout/maintenance_cost.h"
#include "rollout/store_definition.h"

/* Values kept in the sample per range, at most */
#define CLUSTER_SAMPLE_PER_RANGE	1024

/* A reservoir sample of the column's non-NULL values */
typedef struct ClusterSample
{
	Datum	   *values;
	int			size;			/* values it may keep */
	int			count;			/* values kept */
	int64		seen;			/* non-NULL values offered */
	pg_prng_state random;
} ClusterSample;

static void
cluster_sample_offer(ClusterSample *sample, Datum value)
{
	sample->seen++;
	if (sample->count < sample->size)
		sample->values[sample->count++] = value;
	else
	{
		int64		slot = (int64) pg_prng_uint64_range(&sample->random, 0,
														sample->seen - 1);

		if (slot < sample->size)
			sample->values[slot] = value;
	}
}

/* The bytes of the columns the sampling pass decodes, what it is charged */
static int64
cluster_row_bytes(RolloutStore *store, const Datum *values)
{
	const SegmentColumn *key = &store->schema.columns[store->key_column];
	int64		bytes = 2 * sizeof(int64);	/* the stamp and the column */

	if (key->typlen > 0)
		bytes += key->typlen;
	else if (key->typlen == -1)
		bytes += VARSIZE_ANY(DatumGetPointer(values[store->key_column]));
	else
		bytes += strlen(DatumGetCString(values[store->key_column])) + 1;
	return bytes;
}

static int
cluster_value_compare(const void *a, const void *b, void *arg)
{
	return segment_column_compare((const SegmentColumn *) arg,
								  *(const Datum *) a, *(const Datum *) b);
}

RewriteClusters *
cluster_ranges_choose(RolloutStore *store, RolloutSnapshot *snapshot,
					  int column, int max_ranges, int64 drop_tombstones_before)
{
	const SegmentColumn *definition = &store->schema.columns[column];
	int			ncolumns = store->schema.ncolumns;
	bool	   *want = palloc0(sizeof(bool) * ncolumns);
	Datum	   *values = palloc0(sizeof(Datum) * ncolumns);
	bool	   *isnull = palloc0(sizeof(bool) * ncolumns);
	MergeReadOptions options = {0};
	ClusterSample sample = {0};
	MergeRead  *read;
	RewriteClusters *clusters;
	int64		rows = 0;
	int			ranges;

	/* the sample holds Datums: the column's values must not be pointers */
	Assert(definition->typbyval);
	want[store->key_column] = true;
	want[store->ts_column] = true;
	want[column] = true;
	Assert(max_ranges >= 2 && max_ranges <= CLUSTER_MAX_RANGES);
	sample.size = CLUSTER_SAMPLE_PER_RANGE * max_ranges;
	sample.values = palloc(sizeof(Datum) * sample.size);
	pg_prng_seed(&sample.random, 0x636c7573);	/* "clus" */

	/* the rewrite's options: the sample is of the rows it writes */
	options.keep_tombstones = true;
	options.drop_tombstones_before = drop_tombstones_before;
	options.follow_ingest = true;
	read = merge_read_begin(store, snapshot, want, NULL, &options);
	while (merge_read_next(read, values, isnull))
	{
		CHECK_FOR_INTERRUPTS();
		rows++;
		if (!isnull[column])
			cluster_sample_offer(&sample, values[column]);

		/* compaction's work too: it yields as the rewrite does */
		if (maintenance_cost_active())
		{
			maintenance_cost_charge_row_bytes(cluster_row_bytes(store, values));
			maintenance_cost_delay_point();
		}
	}
	clusters = palloc0(sizeof(RewriteClusters));
	clusters->rows = rows;
	clusters->null_rows = rows - sample.seen;
	clusters->versions_read = merge_read_stats(read)->versions_read;
	clusters->tombstones_dropped = merge_read_stats(read)->tombstones_dropped;
	merge_read_end(read);

	ranges = (int) Min(max_ranges,
					   sample.seen / (2 * (int64) store_rows_per_group));
	if (ranges < 2)
		return NULL;
	qsort_arg(sample.values, sample.count, sizeof(Datum),
			  cluster_value_compare, (void *) definition);

	/* quantiles, distinct: many equal values make fewer ranges */
	clusters->column = column;
	clusters->boundaries = palloc(sizeof(Datum) * (ranges - 1));
	for (int i = 1; i < ranges; i++)
	{
		Datum		boundary = sample.values[(int64) i * sample.count / ranges];

		if (clusters->boundary_count > 0 &&
			segment_column_compare(definition,
								   clusters->boundaries[clusters->boundary_count - 1],
								   boundary) >= 0)
			continue;
		clusters->boundaries[clusters->boundary_count++] = boundary;
	}
	return clusters->boundary_count > 0 ? clusters : NULL;
}
