/*-------------------------------------------------------------------------
 *
 * scan_explain.c
 *		EXPLAIN of a rollout table scan: the store, the key conditions used
 *		and, with ANALYZE, what the read skipped and how it reached the
 *		store.
 *
 * Never the location's options: secrets live there (docs/OBJSTORE.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/explain.h"

#include "scan_internal.h"

/*
 * A cache's counts: "<label>: hits=N [shared=S] misses=M" in text, and
 * "<label> Hits", "<label> Shared Hits", "<label> Misses" otherwise.
 */
static void
explain_cache_counts(ExplainState *es, const char *label, int64 hits,
					 const int64 *shared_hits, int64 misses)
{
	if (es->format == EXPLAIN_FORMAT_TEXT)
	{
		char	   *shared = shared_hits == NULL ? "" :
		psprintf(" shared=%lld", (long long) *shared_hits);

		ExplainPropertyText(label,
							psprintf("hits=%lld%s misses=%lld", (long long) hits,
									 shared, (long long) misses), es);
		return;
	}
	ExplainPropertyInteger(psprintf("%s Hits", label), NULL, hits, es);
	if (shared_hits != NULL)
		ExplainPropertyInteger(psprintf("%s Shared Hits", label), NULL,
							   *shared_hits, es);
	ExplainPropertyInteger(psprintf("%s Misses", label), NULL, misses, es);
}

/* What ExplainForeignScan shows (docs in README, "EXPLAIN"). */
void
rollout_explain_foreign_scan(ForeignScanState *node, ExplainState *es)
{
	RolloutScanState *state = node->fdw_state;

	ExplainPropertyText("Rollout Store", state->options->store_name, es);
	/* rollout_fdw.as_of is known to apply once the store is open (ANALYZE) */
	if (state->as_of != NULL || state->options->as_of != NULL)
		ExplainPropertyText("As Of",
							state->as_of ? state->as_of : state->options->as_of, es);
	if (es->verbose)
		ExplainPropertyText("Location",
							state->options->location ? state->options->location
							: "(embedded default)", es);
	if (state->key_quals != NIL)
		ExplainPropertyInteger("Key Conditions", NULL,
							   list_length(state->key_quals), es);
	if (state->pushed_conditions != NIL)
		ExplainPropertyInteger("Pushed Conditions", NULL,
							   list_length(state->pushed_conditions), es);

	/* a parallel scan's leader knows how the key space was cut */
	if (es->analyze && state->part_count_shown > 0)
		ExplainPropertyInteger("Key Space Parts", NULL,
							   state->part_count_shown, es);
	if (es->analyze && state->snapshot != NULL)
	{
		MergeReadStats *t;

		/* EXPLAIN runs before EndForeignScan: fold in the open read */
		rollout_scan_close_read(state);
		t = &state->counters.reads;

		if (es->format == EXPLAIN_FORMAT_TEXT)
		{
			ExplainPropertyText("Fragments",
								psprintf("read=%d skipped=%d",
										 t->fragments_read, t->fragments_skipped), es);
			ExplainPropertyText("Generations",
								psprintf("read=%d skipped=%d",
										 t->generations_read, t->generations_skipped), es);
			ExplainPropertyText("WAL Entries",
								psprintf("read=%d skipped=%d",
										 t->wal_entries_read, t->wal_entries_skipped), es);
			ExplainPropertyText("Row Groups",
								psprintf("read=%lld skipped=%lld",
										 (long long) t->row_groups_read,
										 (long long) t->row_groups_skipped), es);
		}
		else
		{
			ExplainPropertyInteger("Fragments Read", NULL, t->fragments_read, es);
			ExplainPropertyInteger("Fragments Skipped", NULL, t->fragments_skipped, es);
			ExplainPropertyInteger("Generations Read", NULL, t->generations_read, es);
			ExplainPropertyInteger("Generations Skipped", NULL, t->generations_skipped, es);
			ExplainPropertyInteger("WAL Entries Read", NULL, t->wal_entries_read, es);
			ExplainPropertyInteger("WAL Entries Skipped", NULL, t->wal_entries_skipped, es);
			ExplainPropertyInteger("Row Groups Read", NULL, t->row_groups_read, es);
			ExplainPropertyInteger("Row Groups Skipped", NULL, t->row_groups_skipped, es);
		}
		if (state->key_quals != NIL)
			ExplainPropertyInteger("Skipped by Key Filter", NULL,
								   t->key_filter_skipped, es);
		ExplainPropertyInteger("Versions Read", NULL, t->versions_read, es);
		if (state->pushed_conditions != NIL)
		{
			ExplainPropertyInteger("Skipped by Zone Map", NULL,
								   t->zone_map_skipped, es);
			ExplainPropertyInteger("Rows Filtered by Store", NULL,
								   t->rows_filtered, es);
		}

		/*
		 * Chunks of columns only winners need, and how many were needed: a
		 * figure of segments only (a memtable batch has no chunks), so it
		 * differs with the writer's mode, and only VERBOSE shows it.
		 */
		if (es->verbose && t->chunks_deferred > 0)
		{
			int64		skipped = t->chunks_deferred - t->chunks_decoded_late;

			if (es->format == EXPLAIN_FORMAT_TEXT)
				ExplainPropertyText("Late Chunks",
									psprintf("decoded=%lld skipped=%lld pages=%lld",
											 (long long) t->chunks_decoded_late,
											 (long long) skipped,
											 (long long) t->pages_decoded_late), es);
			else
			{
				ExplainPropertyInteger("Late Chunks Decoded", NULL,
									   t->chunks_decoded_late, es);
				ExplainPropertyInteger("Late Chunks Skipped", NULL, skipped, es);
				ExplainPropertyInteger("Late Pages Decoded", NULL,
									   t->pages_decoded_late, es);
			}
		}
		if (t->transaction_rows_read > 0)
			ExplainPropertyInteger("Transaction Rows Read", NULL,
								   t->transaction_rows_read, es);

		/*
		 * How the reads went to the store: these vary with the location and
		 * with rollout_fdw.max_concurrent_requests, so only VERBOSE shows
		 * them.
		 */
		if (es->verbose)
		{
			/* where the snapshot's manifest versions came from */
			ExplainPropertyText("Manifests",
								state->snapshot->manifests_from_view ?
								"shared view" : "listed", es);
			/* and this cluster's own WAL tail: a listing at every statement? */
			if (state->snapshot->own_wal_tail != NULL)
				ExplainPropertyText("Own WAL Tail",
									state->snapshot->own_wal_tail, es);
			ExplainPropertyInteger("Prefetch Batches", NULL, t->prefetch_batches, es);
			/* retries are attempts too: a slow or failing store shows here */
			if (es->format == EXPLAIN_FORMAT_TEXT)
				ExplainPropertyText("Remote Requests",
									psprintf("%lld in %lld rounds%s",
											 (long long) state->counters.remote_requests,
											 (long long) state->counters.remote_rounds,
											 state->counters.remote_retries > 0 ?
											 psprintf(", %lld retries",
													  (long long) state->counters.remote_retries) :
											 ""), es);
			else
			{
				ExplainPropertyInteger("Remote Requests", NULL,
									   state->counters.remote_requests, es);
				ExplainPropertyInteger("Remote Request Rounds", NULL,
									   state->counters.remote_rounds, es);
				ExplainPropertyInteger("Remote Request Retries", NULL,
									   state->counters.remote_retries, es);
			}
			explain_cache_counts(es, "Footer Cache", state->counters.footer_cache_hits,
								 &state->counters.footer_cache_shared_hits,
								 state->counters.footer_cache_misses);
			if (state->counters.disk_cache_hits + state->counters.disk_cache_misses > 0)
				explain_cache_counts(es, "Disk Cache", state->counters.disk_cache_hits,
									 NULL, state->counters.disk_cache_misses);
		}
	}
}
