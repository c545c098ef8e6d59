/*-------------------------------------------------------------------------
 *
 * key_split.c
 *		Splitting a snapshot's key space into parts of about equal rows.
 *
 * A parallel scan hands out parts of the key space, not objects: every
 * version of a key must meet in one merge, so that exactly one participant
 * decides which version wins.  The parts are cut where the rows are: the
 * footers of the snapshot's fragments and generations give each row group's
 * smallest key and row count (no data is read, and the footers are usually
 * cached), and the boundaries are those keys at equal steps of the rows
 * counted in key order.  WAL entries and memtable batches are unsorted and
 * small; their rows fall into whichever parts hold their keys.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/datum.h"

#include "rollout/key_split.h"
#include "rollout/store_sources.h"

/* A row group's smallest key and how many rows start there. */
typedef struct KeyWeight
{
	Datum		key;
	int64		rows;
} KeyWeight;

typedef struct SplitState
{
	RolloutStore *store;
	KeyWeight  *weights;
	int			count;
	int			capacity;
	int64		total_rows;
} SplitState;

/* rollout_segment_footers callback: collect the row groups' smallest keys */
static void
split_collect_footer(SegmentReader *reader, int index, void *arg)
{
	SplitState *state = arg;
	const SegmentColumn *key_column = &state->store->schema.columns[state->store->key_column];
	int			key = reader == NULL ? -1 : reader->schema.key_column;

	if (reader == NULL || !reader->sorted || key < 0)
		return;					/* gone (the scan will say so) or unsorted */
	for (int g = 0; g < reader->row_group_count; g++)
	{
		const SegmentChunkInfo *chunk = &reader->row_groups[g].chunks[key];

		if (!chunk->has_stats || reader->row_groups[g].row_count == 0)
			continue;
		if (state->count == state->capacity)
		{
			state->capacity *= 2;
			state->weights = repalloc(state->weights,
									  sizeof(KeyWeight) * state->capacity);
		}
		state->weights[state->count].key =
			datumCopy(chunk->min, key_column->typbyval, key_column->typlen);
		state->weights[state->count].rows = reader->row_groups[g].row_count;
		state->total_rows += reader->row_groups[g].row_count;
		state->count++;
	}
}

/* qsort_arg comparison of KeyWeights by key; arg is the key column */
static int
key_weight_compare(const void *a, const void *b, void *arg)
{
	return segment_column_compare(arg, ((const KeyWeight *) a)->key,
								  ((const KeyWeight *) b)->key);
}

int
key_space_split(RolloutStore *store, const RolloutSnapshot *snapshot,
				int max_parts, Datum **boundaries)
{
	const SegmentColumn *column = &store->schema.columns[store->key_column];
	SplitState	state = {0};
	char	  **keys;
	int64	   *sizes;
	int			objects = 0;
	int			found = 0;
	int64		seen = 0;
	int			next = 1;
	ListCell   *lc;

	*boundaries = NULL;
	state.store = store;
	if (max_parts <= 1 || !column->has_order)
		return 0;
	keys = palloc(sizeof(char *) * Max(list_length(snapshot->sources), 1));
	sizes = palloc(sizeof(int64) * Max(list_length(snapshot->sources), 1));
	foreach(lc, snapshot->sources)
	{
		SnapshotSource *source = lfirst(lc);

		if (source->kind != SNAPSHOT_FRAGMENT && source->kind != SNAPSHOT_GENERATION)
			continue;
		keys[objects] = source->key;
		sizes[objects] = source->bytes;
		objects++;
	}
	state.capacity = 64;
	state.weights = palloc(sizeof(KeyWeight) * state.capacity);
	rollout_segment_footers(store, keys, sizes, objects, split_collect_footer,
							&state);
	if (state.count == 0)
		return 0;

	qsort_arg(state.weights, state.count, sizeof(KeyWeight), key_weight_compare,
			  (void *) column);

	/*
	 * Boundary p (1 .. max_parts - 1) is the smallest key at which the rows
	 * of the row groups before it reach p / max_parts of all.  A key equal to
	 * the previous boundary, or to the very first key, would only make an
	 * empty part.
	 */
	*boundaries = palloc(sizeof(Datum) * max_parts);
	for (int i = 0; i < state.count && next < max_parts; i++)
	{
		Datum		key = state.weights[i].key;

		if (seen * max_parts >= state.total_rows * next)
		{
			if (segment_column_compare(column, key, state.weights[0].key) > 0 &&
				(found == 0 ||
				 segment_column_compare(column, key, (*boundaries)[found - 1]) > 0))
				(*boundaries)[found++] = key;
			while (next < max_parts && seen * max_parts >= state.total_rows * next)
				next++;
		}
		seen += state.weights[i].rows;
	}
	return found;
}

/*
 * The bounds use the store's own order of keys (the key column's comparison
 * under the segment's collation), the one the merge sorts by.
 */
void
key_range_set_slice(KeyRange *range, RolloutStore *store,
					const Datum *boundaries, int count, int part)
{
	const SegmentColumn *column = &store->schema.columns[store->key_column];
	KeyBound	bound = {0};

	bound.present = true;
	bound.value_type = column->typid;
	bound.compare_proc = column->compare_proc;
	bound.collation = column->compare_collation;
	memset(&range->slice_lower, 0, sizeof(KeyBound));
	memset(&range->slice_upper, 0, sizeof(KeyBound));
	if (part > 0)
	{
		range->slice_lower = bound;
		range->slice_lower.inclusive = true;
		range->slice_lower.value = boundaries[part - 1];
	}
	if (part < count)
	{
		range->slice_upper = bound;
		range->slice_upper.inclusive = false;
		range->slice_upper.value = boundaries[part];
	}
}
