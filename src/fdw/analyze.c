/*-------------------------------------------------------------------------
 *
 * analyze.c
 *		ANALYZE of a rollout table: a sample of its deduplicated rows.
 *
 * PostgreSQL's ANALYZE wants up to targrows rows chosen at random from the
 * rows a scan would return, and how many rows there are.  The merged read
 * over one snapshot is what knows which version of each key is live, so the
 * sample comes from it, but it must not cost a full scan: the read decodes
 * the key and version columns of every row group (as count(*) does) and
 * every other column only for the live rows of sampled clusters
 * (MERGE_READ_SAMPLE_CLUSTER_ROWS rows of a row group that share their
 * pages), each cluster chosen with the same probability by a hash of where
 * it is, seeded anew for every ANALYZE.  The probability aims at about twice
 * targrows candidates by the store's count from metadata; a reservoir
 * (Vitter's algorithm, as file_fdw and PostgreSQL's own ANALYZE use) keeps
 * targrows of them.  Like PostgreSQL's block sampling this is a cluster
 * sample: rows next to each other in one source come together.  The sample
 * is handed over in the order the read returned it, the store's key order,
 * as PostgreSQL's own sample is in physical order: pg_stats.correlation
 * then says how far a column follows the key, which is how far zone maps
 * can skip on it (fdw/scan_plan.c).
 *
 * A table pinned to a named snapshot (its option as_of) is sampled from that
 * snapshot, its row count too: its statistics are public in pg_stats, and
 * such a table may be what a role was granted instead of the live store.
 * The session's rollout_fdw.as_of does not apply: the statistics are the
 * table's, for every session.
 *
 * Autovacuum never analyzes foreign tables: README, "Statistics", shows how
 * to schedule ANALYZE with pg_cron.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "common/hashfn.h"
#include "commands/vacuum.h"
#include "common/pg_prng.h"
#include "foreign/fdwapi.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sampling.h"

#include "rollout/fdw.h"
#include "rollout/merge_read.h"
#include "rollout/named_snapshot.h"
#include "rollout/portable_values.h"
#include "rollout/store_definition.h"
#include "rollout/store_snapshot.h"

/* attempts at a snapshot whose objects garbage collection left in place */
#define ANALYZE_SNAPSHOT_ATTEMPTS	3

/* The state of one sample (rollout_acquire_sample_rows). */
typedef struct RolloutSample
{
	uint64		seed;
	uint64		threshold;		/* a cluster whose hash is <= this is in */
	double		live_rows;		/* live winners the read offered */
} RolloutSample;

/* MergeReadOptions.sample: is cluster in the sample? */
static bool
rollout_sample_cluster(void *arg, uint64 cluster)
{
	RolloutSample *sample = arg;

	sample->live_rows += 1;
	if (hash_bytes_extended((const unsigned char *) &cluster, sizeof(cluster),
							sample->seed) > sample->threshold)
		return false;
	return true;
}

/* A sampled row and the place the read returned it at, for sorting. */
typedef struct SampledRow
{
	HeapTuple	tuple;
	double		position;
} SampledRow;

static int
sampled_row_compare(const void *a, const void *b)
{
	double		pa = ((const SampledRow *) a)->position;
	double		pb = ((const SampledRow *) b)->position;

	return pa < pb ? -1 : (pa > pb ? 1 : 0);
}

/* Put rows[0 .. count - 1] in the order of their positions. */
static void
sort_sample_in_read_order(HeapTuple *rows, const double *positions, int count)
{
	SampledRow *sorted = palloc(sizeof(SampledRow) * Max(count, 1));

	for (int i = 0; i < count; i++)
	{
		sorted[i].tuple = rows[i];
		sorted[i].position = positions[i];
	}
	qsort(sorted, count, sizeof(SampledRow), sampled_row_compare);
	for (int i = 0; i < count; i++)
		rows[i] = sorted[i].tuple;
	pfree(sorted);
}

/*
 * AcquireSampleRowsFunc: up to targrows rows of rel into rows (see the file
 * header); *totalrows gets the live rows the read saw, *totaldeadrows 0
 * (shadowed versions are no rows of the table).  The store is read with the
 * credentials of the table owner's user mapping, as maintenance does: ANALYZE
 * acts for the owner whoever runs it (and the parent's owner, not each
 * child's, is the current user when a partitioned parent is analyzed).
 */
static int
rollout_acquire_sample_rows(Relation rel, int elevel, HeapTuple *rows,
							int targrows, double *totalrows,
							double *totaldeadrows)
{
	RolloutTableOptions *options = rollout_table_options(RelationGetRelid(rel));
	RolloutStore *store = rollout_store_for_reading(rel, rel->rd_rel->relowner);
	TupleDesc	tupdesc = RelationGetDescr(rel);
	StoreEstimate estimate;
	MemoryContext caller_context = CurrentMemoryContext;
	MemoryContext read_context;
	RolloutSnapshot *pinned = NULL;
	MemoryContext row_context;
	RolloutSample sample = {0};
	ReservoirStateData reservoir;
	double		candidates = 0;
	double		skip = -1;
	int			count = 0;
	int		   *attr_to_column = palloc(sizeof(int) * Max(tupdesc->natts, 1));
	bool	   *want = palloc0(sizeof(bool) * store->schema.ncolumns);
	Datum	   *values = palloc0(sizeof(Datum) * store->schema.ncolumns);
	bool	   *isnull = palloc0(sizeof(bool) * store->schema.ncolumns);
	Datum	   *tuple_values = palloc(sizeof(Datum) * Max(tupdesc->natts, 1));
	bool	   *tuple_isnull = palloc(sizeof(bool) * Max(tupdesc->natts, 1));
	MergeRead  *read = NULL;
	double		fraction;
	double	   *positions = palloc(sizeof(double) * Max(targrows, 1));

	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		attr_to_column[i] = attr->attisdropped ? -1 :
			rollout_store_column_index(store, NameStr(attr->attname));
		if (attr_to_column[i] >= 0)
			want[attr_to_column[i]] = true;
	}

	read_context = AllocSetContextCreate(CurrentMemoryContext, "rollout analyze",
										 ALLOCSET_DEFAULT_SIZES);
	row_context = AllocSetContextCreate(read_context, "rollout analyze row",
										ALLOCSET_SMALL_SIZES);

	/* a named snapshot is never retaken: read once, counted and sampled */
	MemoryContextSwitchTo(read_context);
	if (options->as_of != NULL)
	{
		pinned = named_snapshot_read(store, options->as_of);
		estimate = scan_estimate_of_named_snapshot(store, pinned);
	}
	else
		estimate = scan_estimate_get(store, options->read_wal_tail);

	fraction = estimate.rows > 0 ? 2.0 * targrows / estimate.rows : 1.0;
	sample.seed = pg_prng_uint64(&pg_global_prng_state);
	sample.threshold = fraction >= 1.0 ? PG_UINT64_MAX :
		(uint64) (fraction * (double) PG_UINT64_MAX);
	reservoir_init_selection_state(&reservoir, targrows);
	for (int attempt = 0; read == NULL; attempt++)
	{
		bool		vanished = false;
		MergeReadOptions read_options = {0};

		read_options.follow_ingest = true;
		read_options.sample = rollout_sample_cluster;
		read_options.sample_arg = &sample;
		if (pinned != NULL)
		{
			read_options.vanished = &vanished;
			read = merge_read_begin(store, pinned, want, NULL, &read_options);
			if (read == NULL)
				named_snapshot_raise_expired(store, options->as_of);
			continue;
		}
		read_options.vanished = attempt < ANALYZE_SNAPSHOT_ATTEMPTS - 1 ? &vanished : NULL;
		read = merge_read_begin(store,
								rollout_snapshot_take(store, options->read_wal_tail),
								want, NULL, &read_options);
	}

	while (merge_read_next(read, values, isnull))
	{
		int			replace = -1;

		vacuum_delay_point();
		if (count < targrows)
			replace = count++;
		else
		{
			/*
			 * Vitter: how many candidates to pass over before the next one,
			 * from the number seen before this one
			 */
			if (skip < 0)
				skip = reservoir_get_next_S(&reservoir, candidates, targrows);
			if (skip <= 0)
			{
				replace = (int) (targrows * sampler_random_fract(&reservoir.randstate));
				heap_freetuple(rows[replace]);
			}
			skip -= 1;
		}
		candidates += 1;
		if (replace < 0)
			continue;

		MemoryContextSwitchTo(row_context);
		for (int i = 0; i < tupdesc->natts; i++)
		{
			int			column = attr_to_column[i];

			tuple_isnull[i] = column < 0 || isnull[column];
			tuple_values[i] = tuple_isnull[i] ? (Datum) 0 : values[column];
			if (!tuple_isnull[i] && store->codecs[column].encoding == PORTABLE_TEXT)
				tuple_values[i] = portable_decode(&store->codecs[column],
												  tuple_values[i]);
		}
		MemoryContextSwitchTo(caller_context);
		rows[replace] = heap_form_tuple(tupdesc, tuple_values, tuple_isnull);
		positions[replace] = candidates;
		MemoryContextReset(row_context);
		MemoryContextSwitchTo(read_context);
	}
	merge_read_end(read);
	MemoryContextSwitchTo(caller_context);
	MemoryContextDelete(read_context);
	sort_sample_in_read_order(rows, positions, count);

	*totalrows = sample.live_rows;
	*totaldeadrows = 0;
	ereport(elevel,
			(errmsg("\"%s\": store \"%s\" holds %.0f live rows; %d sampled from %.0f candidates",
					RelationGetRelationName(rel), store->name, sample.live_rows,
					count, candidates)));
	return count;
}

/*
 * AnalyzeForeignTable: every rollout table can be analyzed.  totalpages (what
 * pg_class.relpages records) is the store's size in rows of a heap page's
 * worth, roughly.
 */
static bool
rollout_analyze_foreign_table(Relation rel, AcquireSampleRowsFunc *func,
							  BlockNumber *totalpages)
{
	RolloutTableOptions *options = rollout_table_options(RelationGetRelid(rel));
	RolloutStore *store = rollout_store_for_reading(rel, rel->rd_rel->relowner);
	RolloutSnapshot *pinned = NULL;
	StoreEstimate estimate;

	/*
	 * A pinned table whose snapshot cannot be read (expired, or not a token
	 * of this store) is skipped with a WARNING, as PostgreSQL skips what it
	 * cannot analyze, rather than failing a database-wide ANALYZE or the
	 * sweeper's; its scans say what is wrong.
	 */
	if (options->as_of != NULL &&
		(pinned = named_snapshot_try_read(store, options->as_of)) == NULL)
	{
		ereport(WARNING,
				(errmsg("the named snapshot that foreign table \"%s\" reads (its option as_of) cannot be read",
						RelationGetRelationName(rel)),
				 errhint("A scan of the table says why.")));
		return false;
	}
	estimate = pinned != NULL ? scan_estimate_of_named_snapshot(store, pinned) :
		scan_estimate_get(store, options->read_wal_tail);

	*func = rollout_acquire_sample_rows;
	*totalpages = (BlockNumber) Min(Max(estimate.rows / 32, 1), MaxBlockNumber);
	return true;
}

void
rollout_analyze_routines(FdwRoutine *routine)
{
	routine->AnalyzeForeignTable = rollout_analyze_foreign_table;
}
