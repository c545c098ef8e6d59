/*-------------------------------------------------------------------------
 *
 * merge.c
 *		Fold a shard's generations into the base table (DESIGN.md §7.1).
 *
 * A merge is split in two so that it never holds anything an append needs:
 *
 *	prepare		(optionally flush first,) read the shard manifest and the
 *				base manifest, pick the oldest pending generations (those
 *				above base.merged[shard]), merge them into one sorted,
 *				deduplicated fragment and upload it.  Appends keep flowing:
 *				they touch only the WAL.
 *	commit		two short manifest commits.  First the base: the fragment
 *				is added and merged[shard] raised to G, the newest generation
 *				folded in.  Then the shard manifest drops generations <= G,
 *				keeping the writer epoch it read: a merge never claims an
 *				epoch and so can never fence its own writer.
 *
 * Why no row is ever duplicated physically: the base commit succeeds only if
 * base.merged[shard] still has the value the prepare step saw, i.e. no other
 * merge folded any of our generations in meanwhile.  A merge that finds
 * merged[shard] moved drops its fragment; if the other merge covered all of
 * ours it only drains the shard manifest, otherwise it starts over from the
 * new state.  merged[shard] only grows, and a generation is in the base iff
 * its number is <= merged[shard].
 *
 * Why no row is ever lost: readers skip exactly the generations <= merged
 * [shard] of the base they read, and read shard manifests before the base
 * (snapshot.c).  If the process dies between the two commits, the base
 * already says merged[shard] = G: readers skip those generations, and the
 * next merge (or this one's drain step) removes them from the shard manifest.
 * Generations flushed while a merge runs have numbers above G and survive
 * the shard-manifest commit, which re-reads the newest manifest on conflict.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "rollout/fault.h"
#include "rollout/flush.h"
#include "rollout/grace.h"
#include "rollout/json_doc.h"
#include "rollout/maintenance_cost.h"
#include "rollout/manifest_view.h"
#include "rollout/merge.h"
#include "rollout/rewrite.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_keys.h"
#include "rollout/store_stats.h"

#define MERGE_MAX_ATTEMPTS			10
#define MANIFEST_COMMIT_ATTEMPTS	100

typedef enum MergeCommitOutcome
{
	MERGE_COMMITTED,			/* base now holds our fragment */
	MERGE_ALREADY_MERGED,		/* another merge folded in all our generations */
	MERGE_RESTART				/* state moved under us: drop and start over */
} MergeCommitOutcome;

/* rollout_fdw.merge_max_bytes (kB) */
static int	merge_max_kb = 1024 * 1024;

/* Define rollout_fdw.merge_max_bytes; _PG_init calls this. */
void
merge_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.merge_max_bytes",
							"Generation bytes one merge pass reads at most.",
							"A pass always takes at least one generation.",
							&merge_max_kb,
							1024 * 1024, 1024, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/*
 * Remove generations <= merged from this shard's manifest, keeping its
 * writer epoch, and record base version covering_base (one whose merged mark
 * is at least merged) as holding what it drops.  Retries on conflict: a
 * concurrent flush only adds newer generations, which the re-read manifest
 * keeps.
 */
static void
merge_drain_shard_manifest(RolloutStore *store, int64 merged, int64 covering_base)
{
	for (int attempt = 0; attempt < MANIFEST_COMMIT_ATTEMPTS; attempt++)
	{
		ShardManifest *manifest = shard_manifest_read_for_update(store);
		List	   *kept = NIL;
		ListCell   *lc;

		foreach(lc, manifest->generations)
		{
			GenerationEntry *generation = lfirst(lc);

			if (generation->number > merged)
				kept = lappend(kept, generation);
		}
		if (list_length(kept) == list_length(manifest->generations))
			return;				/* nothing to drain */
		manifest->generations = kept;
		manifest->drops_covered_by_base = Max(manifest->drops_covered_by_base,
											  covering_base);
		CHECK_FOR_INTERRUPTS();
		if (shard_manifest_commit(store, manifest) == MANIFEST_COMMITTED)
		{
			manifest_view_note_shard_commit(store, manifest);
			return;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not commit the shard manifest of shard \"%s\" in store \"%s\": it kept changing",
					store->shard, store->name)));
}

/* The pending generations a pass folds in: oldest first, bounded. */
static List *
merge_choose(List *pending, int max_generations)
{
	List	   *chosen = NIL;
	int64		bytes = 0;
	int64		max_bytes = (int64) merge_max_kb * 1024;
	ListCell   *lc;

	foreach(lc, pending)
	{
		GenerationEntry *generation = lfirst(lc);

		if (chosen != NIL &&
			((max_generations > 0 && list_length(chosen) >= max_generations) ||
			 bytes + generation->bytes > max_bytes))
			break;
		chosen = lappend(chosen, generation);
		bytes += generation->bytes;
	}
	return chosen;
}

/* Generations as the sources of a rewrite. */
static RolloutSnapshot *
merge_sources(RolloutStore *store, List *generations)
{
	RolloutSnapshot *snapshot = palloc0(sizeof(RolloutSnapshot));
	ListCell   *lc;

	foreach(lc, generations)
	{
		GenerationEntry *generation = lfirst(lc);
		SnapshotSource *source = snapshot_source_new(SNAPSHOT_GENERATION);

		source->key = generation->file;
		source->shard = store->shard;
		source->shard_hash = store->shard_hash;
		source->position = generation->last_position;
		source->rows = generation->rows;
		source->has_key_range = false;	/* no key range: read everything */
		source->stamp_fixed = generation->stamp > 0 ? generation->stamp : -1;
		snapshot->sources = lappend(snapshot->sources, source);
		snapshot->generation_count++;
	}
	return snapshot;
}

/*
 * The footer metadata of a fragment made by a merge: its kind, the shard and
 * the range of generation numbers folded into it, recorded in the object
 * itself.
 */
static char *
merge_fragment_metadata(RolloutStore *store, int64 first, int64 last)
{
	StringInfoData buf;
	bool		first_member = true;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_append_member_text(&buf, &first_member, "kind", "fragment");
	json_append_member_text(&buf, &first_member, "made_by", "merge");
	json_append_member_text(&buf, &first_member, "shard", store->shard);
	json_append_member_int64(&buf, &first_member, "first_generation", first);
	json_append_member_int64(&buf, &first_member, "last_generation", last);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* Merge the chosen generations into a fragment and upload it. */
static FragmentEntry *
merge_write_fragment(RolloutStore *store, List *chosen, RewriteResult *rewrite)
{
	GenerationEntry *first = linitial(chosen);
	GenerationEntry *last = llast(chosen);
	RewriteOutput *output;
	char	   *key;

	rewrite_sources(store, merge_sources(store, chosen), 0, NULL,
					merge_fragment_metadata(store, first->number, last->number),
					true, 0, rewrite);
	if (rewrite->outputs == NIL)
		return NULL;			/* only possible if every generation was empty */
	output = linitial(rewrite->outputs);
	key = rollout_key_new_fragment(store);
	rewrite->upload_started_at = GetCurrentTimestamp();
	if (objstore_create_from_file_if_absent(store->objstore, key, output->path,
											objstore_new_put_id()) != OBJSTORE_CREATED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fragment \"%s\" of store \"%s\" already exists", key, store->name),
				 errdetail("Fragment names are random UUIDs; a collision means the store is damaged.")));
	return rollout_fragment_entry(key, output);
}

/*
 * The same, removing the scratch file whatever happens, and charged to the
 * maintenance cost delay (maintenance_cost.h), the upload included.
 */
static FragmentEntry *
merge_prepare_fragment(RolloutStore *store, List *chosen, RewriteResult *rewrite)
{
	FragmentEntry *volatile fragment = NULL;
	bool		cost_was_active;

	cost_was_active = maintenance_cost_begin();
	PG_TRY();
	{
		fragment = merge_write_fragment(store, chosen, rewrite);
	}
	PG_CATCH();
	{
		maintenance_cost_end(cost_was_active);
		rewrite_cleanup(rewrite);
		PG_RE_THROW();
	}
	PG_END_TRY();
	maintenance_cost_end(cost_was_active);
	rewrite_cleanup(rewrite);
	return fragment;
}

/*
 * Commit the base manifest with our fragment and merged[shard] = last, if
 * merged[shard] is still expected (the value the prepare step saw).  The
 * base takes the truncate cut of the shard manifest the generations came
 * from: a reader whose shard manifest predates the flush that sealed a
 * TRUNCATE, but whose base has the TRUNCATE's later rows, must see the cut.
 */
static MergeCommitOutcome
merge_commit_base(RolloutStore *store, int64 expected, int64 last,
				  int64 truncate_stamp, FragmentEntry *fragment,
				  TimestampTz uploaded_at, int64 *merged_now,
				  int64 *base_version)
{
	for (int attempt = 0; attempt < MANIFEST_COMMIT_ATTEMPTS; attempt++)
	{
		BaseManifest *base = base_manifest_read_latest(store);
		int64		merged = base_manifest_merged_generation(base, store->shard);
		ListCell   *lc;
		bool		found = false;

		*merged_now = merged;
		*base_version = base->version;
		if (merged >= last)
			return MERGE_ALREADY_MERGED;
		if (merged != expected || rollout_output_too_old(uploaded_at))
			return MERGE_RESTART;

		if (fragment != NULL)
			base->fragments = lappend(base->fragments, fragment);
		foreach(lc, base->merged)
		{
			MergedMark *mark = lfirst(lc);

			if (strcmp(mark->shard, store->shard) == 0)
			{
				mark->generation = last;
				found = true;
			}
		}
		if (!found)
		{
			MergedMark *mark = palloc0(sizeof(MergedMark));

			mark->shard = store->shard;
			mark->generation = last;
			base->merged = lappend(base->merged, mark);
		}
		base->truncate_stamp = Max(base->truncate_stamp, truncate_stamp);
		CHECK_FOR_INTERRUPTS();
		if (base_manifest_commit(store, base) == MANIFEST_COMMITTED)
		{
			manifest_view_note_base_commit(store, base->version);
			*merged_now = last;
			*base_version = base->version;
			return MERGE_COMMITTED;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not commit the base manifest of store \"%s\": it kept changing",
					store->name)));
	return MERGE_RESTART;		/* keep compiler quiet */
}

static MergeResult rollout_merge_shard_timed(RolloutStore *store, int max_generations,
											 bool flush_first);

/* Merge, and count it in rollout_stat_stores. */
MergeResult
rollout_merge_shard(RolloutStore *store, int max_generations, bool flush_first)
{
	TimestampTz started = GetCurrentTimestamp();
	MergeResult result;

	rollout_check_writable(store, "merge");
	result = rollout_merge_shard_timed(store, max_generations, flush_first);

	if (result.generations_merged > 0)
		shared_store_note_event(store, SHARED_EVENT_MERGE,
								(int64) (GetCurrentTimestamp() - started));
	return result;
}

/*
 * The merge itself, without the writability check and the timing that
 * rollout_merge_shard adds.  Each attempt reads the shard manifest, then the
 * base, folds the oldest pending generations into one fragment and commits.
 * When another merge folded in all of them meanwhile, the fragment is deleted
 * and the shard manifest only drained; when merged[shard] moved otherwise, or
 * the fragment waited too long, it is deleted and the merge starts over, at
 * most MERGE_MAX_ATTEMPTS times.  With nothing pending it still drains the
 * shard manifest, which finishes a merge interrupted between its two commits.
 */
static MergeResult
rollout_merge_shard_timed(RolloutStore *store, int max_generations, bool flush_first)
{
	MergeResult result = {0};

	if (flush_first)
	{
		(void) rollout_flush_shard(store);
		rollout_fault_point("merge.after_flush");
	}

	for (int attempt = 0; attempt < MERGE_MAX_ATTEMPTS; attempt++)
	{
		ShardManifest *shard = shard_manifest_read_for_update(store);
		BaseManifest *base = base_manifest_read_latest(store);
		int64		merged = base_manifest_merged_generation(base, store->shard);
		List	   *pending = NIL;
		List	   *chosen;
		int64		last;
		FragmentEntry *fragment;
		RewriteResult *rewrite = palloc0(sizeof(RewriteResult));
		TimestampTz uploaded_at;
		int64		merged_now;
		int64		merged_in_base;
		ListCell   *lc;

		foreach(lc, shard->generations)
		{
			GenerationEntry *generation = lfirst(lc);

			if (generation->number > merged)
				pending = lappend(pending, generation);
		}
		if (pending == NIL)
		{
			/* an interrupted merge may have left merged generations listed */
			merge_drain_shard_manifest(store, merged, base->version);
			return result;
		}

		chosen = merge_choose(pending, max_generations);
		last = ((GenerationEntry *) llast(chosen))->number;

		fragment = merge_prepare_fragment(store, chosen, rewrite);
		uploaded_at = fragment != NULL ? rewrite->upload_started_at : GetCurrentTimestamp();
		rollout_fault_point("merge.after_fragment_put");

		switch (merge_commit_base(store, merged, last, shard->truncate_stamp,
								  fragment, uploaded_at, &merged_now,
								  &merged_in_base))
		{
			case MERGE_COMMITTED:
				rollout_fault_point("merge.after_base_commit");
				merge_drain_shard_manifest(store, last, merged_in_base);
				rollout_fault_point("merge.after_shard_commit");
				result.generations_merged = list_length(chosen);
				result.rows_merged = rewrite->rows_written;
				result.fragments_added = fragment != NULL ? 1 : 0;
				return result;

			case MERGE_ALREADY_MERGED:
				/* a racing merge did our work: nobody will ever name ours */
				if (fragment != NULL)
					(void) objstore_delete(store->objstore, fragment->file);
				merge_drain_shard_manifest(store, merged_now, merged_in_base);
				return result;

			case MERGE_RESTART:
				if (fragment != NULL)
					(void) objstore_delete(store->objstore, fragment->file);
				continue;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not merge shard \"%s\" of store \"%s\": other merges kept changing the base",
					store->shard, store->name),
			 errhint("Retry.")));
	return result;				/* keep compiler quiet */
}
