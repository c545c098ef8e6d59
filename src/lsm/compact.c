/*-------------------------------------------------------------------------
 *
 * compact.c
 *		Rewrite base fragments into fewer, deduplicated ones (DESIGN.md §7.2).
 *
 * One pass picks fragments smallest first (at most max_source_fragments),
 * merges them by key keeping the newest version of each key, writes
 * fragments of about target_rows_per_fragment rows, and commits base v+1 =
 * v - inputs + outputs.  The outputs share no key, and the manifest says so
 * (their disjoint set, manifest.h); min_fragments counts them as one.  With
 * a cluster column (the table option cluster_by), the rows are spread over
 * ranges of that column first, each range's fragments sorted by key
 * (cluster_ranges.c), so that a filter on the column reads few of them.
 *
 * Any subset of fragments may be compacted: the version order is carried by
 * the rows (_ts, shard), not by which fragment holds them, so keeping only
 * the newest version among the inputs never changes what a read returns.
 * A tombstone is kept while it may still hide an older version in a fragment,
 * generation or WAL entry that is not an input, and dropped, with its key,
 * once it is below the tombstone horizon (tombstone_horizon.c): that is how
 * deleted rows leave the store for good.
 *
 * Concurrency.  The commit rebases: it re-reads the newest base and succeeds
 * when every input is still listed there.  Merges only add fragments and
 * raise merged[shard], so a concurrent merge never makes a compaction fail;
 * only another compaction that removed one of our inputs does, and then this
 * pass gives up with a skipped_reason, deleting its outputs.  On one cluster
 * a second compaction of the same store does not even start: it finds the
 * store's compaction lock taken and reports "skipped".
 *
 * Crash safety.  Until the commit, the outputs are unreferenced objects
 * (garbage collection removes them after the grace period); after it, the
 * inputs are.  Either way every row is in exactly the fragments the newest
 * base lists.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "rollout/cluster_ranges.h"
#include "rollout/compact.h"
#include "rollout/fault.h"
#include "rollout/grace.h"
#include "rollout/json_doc.h"
#include "rollout/maintenance_cost.h"
#include "rollout/manifest_view.h"
#include "rollout/rewrite.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_definition.h"
#include "rollout/store_keys.h"
#include "rollout/store_stats.h"
#include "rollout/subtransaction.h"
#include "rollout/tombstone_horizon.h"

#define MANIFEST_COMMIT_ATTEMPTS	100

/*
 * Try to take this store's compaction lock on this cluster for the rest of
 * the transaction; false when another session holds it.
 */
static bool
compact_try_lock_store(RolloutStore *store)
{
	LOCKTAG		tag;

	rollout_store_lock_tag(store, 0x5243, &tag);	/* "RC" */
	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * list_sort comparator: fewest rows first, ties broken by file name so that
 * the choice of inputs does not depend on the manifest's order.
 */
static int
fragment_size_compare(const ListCell *a, const ListCell *b)
{
	const FragmentEntry *fa = lfirst(a);
	const FragmentEntry *fb = lfirst(b);

	if (fa->rows != fb->rows)
		return fa->rows < fb->rows ? -1 : 1;
	return strcmp(fa->file, fb->file);
}

/*
 * The input fragments as the sources of a rewrite.  They carry no key range
 * and no size, so each is read in full.  With the store's truncate cut, the
 * versions a TRUNCATE hid for good are left out.
 */
static RolloutSnapshot *
compact_sources(List *inputs, int64 truncate_stamp)
{
	RolloutSnapshot *snapshot = palloc0(sizeof(RolloutSnapshot));
	ListCell   *lc;

	snapshot->truncate_stamp = truncate_stamp;
	foreach(lc, inputs)
	{
		FragmentEntry *fragment = lfirst(lc);
		SnapshotSource *source = snapshot_source_new(SNAPSHOT_FRAGMENT);

		source->key = fragment->file;
		source->rows = fragment->rows;
		source->stamp_floor = -1;
		source->max_ts = fragment->max_ts;	/* wholly below the cut: not read */
		/* members of one set share no key: zone maps may skip among them */
		source->disjoint_set = fragment->disjoint_set;
		snapshot->sources = lappend(snapshot->sources, source);
		snapshot->fragment_count++;
	}
	return snapshot;
}

/*
 * Write and upload the outputs; returns their fragment entries, and in
 * *first_upload_at when the first upload began: no output is older than
 * that, however long the others took (the delay of maintenance_cost.c
 * stretches them), so that is the age the commit must check.
 */
static List *
compact_write_outputs(RolloutStore *store, List *inputs, int64 target_rows,
					  const CompactClustering *clustering, int64 horizon,
					  int64 truncate_stamp, RewriteResult *rewrite,
					  TimestampTz *first_upload_at)
{
	List	   *entries = NIL;
	RewriteClusters *clusters = NULL;
	char	   *disjoint_set = NULL;
	ListCell   *lc;

	if (clustering != NULL)
		clusters = cluster_ranges_choose(store, compact_sources(inputs, truncate_stamp),
										 clustering->column,
										 clustering->max_ranges, horizon);
	rewrite_sources(store, compact_sources(inputs, truncate_stamp), target_rows,
					clusters,
					"{\"kind\": \"fragment\", \"made_by\": \"compaction\"}",
					true, horizon, rewrite);
	*first_upload_at = GetCurrentTimestamp();
	foreach(lc, rewrite->outputs)
	{
		RewriteOutput *output = lfirst(lc);
		char	   *key = rollout_key_new_fragment(store);
		FragmentEntry *entry;

		CHECK_FOR_INTERRUPTS();
		if (objstore_create_from_file_if_absent(store->objstore, key, output->path,
												objstore_new_put_id()) != OBJSTORE_CREATED)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("fragment \"%s\" of store \"%s\" already exists", key, store->name)));
		entry = rollout_fragment_entry(key, output);
		/* named after the first output, whose name no other object takes */
		if (list_length(rewrite->outputs) > 1)
			disjoint_set = entry->disjoint_set = disjoint_set != NULL ? disjoint_set : key;
		entries = lappend(entries, entry);
		rollout_fault_point("compact.after_fragment_put");
	}
	return entries;
}

/*
 * The same, removing the scratch files whatever happens, and charged to the
 * maintenance cost delay (maintenance_cost.h), the uploads included.
 */
static List *
compact_prepare_outputs(RolloutStore *store, List *inputs, int64 target_rows,
						const CompactClustering *clustering, int64 horizon,
						int64 truncate_stamp, RewriteResult *rewrite,
						TimestampTz *first_upload_at)
{
	List	   *volatile outputs = NIL;
	bool		cost_was_active;

	cost_was_active = maintenance_cost_begin();
	PG_TRY();
	{
		outputs = compact_write_outputs(store, inputs, target_rows, clustering,
										horizon, truncate_stamp, rewrite,
										first_upload_at);
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
	return outputs;
}

/*
 * Commit base v+1 = newest base - inputs + outputs, if every input is still
 * listed (fragment_entry_listed, used both ways: every input still in the
 * newest base, and the inputs left out of the new one).  Returns NULL on success, else why it gave up.
 */
static char *
compact_commit(RolloutStore *store, List *inputs, List *outputs,
			   int64 truncate_stamp, TimestampTz uploaded_at, int *fragments_after)
{
	for (int attempt = 0; attempt < MANIFEST_COMMIT_ATTEMPTS; attempt++)
	{
		BaseManifest *base = base_manifest_read_latest(store);
		List	   *fragments = NIL;
		ListCell   *lc;

		foreach(lc, inputs)
		{
			if (!fragment_entry_listed(base->fragments, ((FragmentEntry *) lfirst(lc))->file))
				return "a concurrent compaction removed one of the input fragments";
		}
		if (rollout_output_too_old(uploaded_at))
			return "the outputs waited longer than half of rollout_fdw.min_gc_grace";

		foreach(lc, base->fragments)
		{
			FragmentEntry *fragment = lfirst(lc);

			if (!fragment_entry_listed(inputs, fragment->file))
				fragments = lappend(fragments, fragment);
		}
		fragments = list_concat(fragments, outputs);
		base->fragments = fragments;
		/* the outputs lack what the cut hid: readers of them need the cut */
		base->truncate_stamp = Max(base->truncate_stamp, truncate_stamp);
		base->total_compactions++;
		base->last_compaction = pstrdup(timestamptz_to_str(GetCurrentTimestamp()));
		base->last_compaction_error = NULL;
		CHECK_FOR_INTERRUPTS();
		if (base_manifest_commit(store, base) == MANIFEST_COMMITTED)
		{
			manifest_view_note_base_commit(store, base->version);
			*fragments_after = list_length(fragments);
			return NULL;
		}
	}
	return "the base manifest kept changing";
}

/*
 * One compaction pass (compact.h).  The refusals come before anything is
 * written: a standby (an ERROR), another session holding this store's
 * compaction lock (reported as skipped, not as an error), too few fragments.
 * The outputs are uploaded before the commit; when the commit gives up, no
 * manifest can ever name them, so they are deleted at once rather than left
 * to garbage collection.
 */
CompactResult
rollout_compact_store(RolloutStore *store, int min_fragments,
					  int64 target_rows_per_fragment, int max_source_fragments,
					  const CompactClustering *clustering)
{
	CompactResult result = {0};
	TimestampTz started = GetCurrentTimestamp();
	List	   *manifests;
	BaseManifest *base;
	int64		horizon;
	int64		truncate_stamp = 0;
	List	   *inputs;
	List	   *outputs;
	int			runs;
	RewriteResult *rewrite = palloc0(sizeof(RewriteResult));
	TimestampTz uploaded_at;
	int64		versions_in = 0;
	ListCell   *lc;

	rollout_check_writable(store, "compact");

	base = base_manifest_read_latest(store);
	result.fragments_before = list_length(base->fragments);
	result.fragments_after = result.fragments_before;

	if (!compact_try_lock_store(store))
	{
		result.skipped_reason = "another compaction of this store is running";
		return result;
	}

	/*
	 * The outputs of one compaction count as one fragment: compacting them
	 * again drops no version, unless the caller asks for it (min_fragments 1:
	 * to drop tombstones they kept, or to lay them out anew by cluster_by).
	 */
	runs = fragment_run_count(base->fragments);
	if (result.fragments_before < 2 || runs < min_fragments)
	{
		result.skipped_reason = runs == result.fragments_before
			? psprintf("%d fragments, fewer than min_fragments (%d)",
					   result.fragments_before, Max(min_fragments, 2))
			: psprintf("%d fragments, of which the outputs of one compaction count as one: %d, fewer than min_fragments (%d)",
					   result.fragments_before, runs, min_fragments);
		return result;
	}

	/*
	 * The shard manifests, then the base again: the tombstone horizon needs
	 * them read in this order (a skipped pass above reads neither).
	 */
	manifests = shard_manifests_read_latest(store, rollout_store_list_shards(store));
	base = base_manifest_read_latest(store);

	/* smallest first, bounded */
	inputs = list_copy(base->fragments);
	list_sort(inputs, fragment_size_compare);
	if (max_source_fragments > 0 && list_length(inputs) > max_source_fragments)
		inputs = list_truncate(inputs, max_source_fragments);
	if (list_length(inputs) < 2)
	{
		result.skipped_reason = "fewer than two fragments to compact";
		return result;
	}
	if (min_fragments > 1 && fragment_run_count(inputs) < 2)
	{
		result.skipped_reason = "the smallest fragments (max_source_fragments) are the outputs of one compaction";
		return result;
	}
	foreach(lc, inputs)
		versions_in += ((FragmentEntry *) lfirst(lc))->rows;

	horizon = rollout_tombstone_horizon(store, manifests, base, inputs, started);
	truncate_stamp = base->truncate_stamp;
	foreach(lc, manifests)
		truncate_stamp = Max(truncate_stamp, ((ShardManifest *) lfirst(lc))->truncate_stamp);
	outputs = compact_prepare_outputs(store, inputs, target_rows_per_fragment,
									  clustering, horizon, truncate_stamp,
									  rewrite, &uploaded_at);
	rollout_fault_point("compact.before_commit");

	result.skipped_reason = compact_commit(store, inputs, outputs, truncate_stamp,
										   uploaded_at,
										   &result.fragments_after);
	if (result.skipped_reason != NULL)
	{
		/* not committed: nobody will ever name the outputs */
		foreach(lc, outputs)
			(void) objstore_delete(store->objstore, ((FragmentEntry *) lfirst(lc))->file);
		result.fragments_after = result.fragments_before;
		return result;
	}
	rollout_fault_point("compact.after_commit");
	shared_store_note_event(store, SHARED_EVENT_COMPACTION,
							(int64) (GetCurrentTimestamp() - started));
	result.rows_written = rewrite->rows_written;
	result.versions_dropped = versions_in - rewrite->rows_written;
	ereport(DEBUG1,
			(errmsg_internal("compaction of store \"%s\" dropped %lld tombstones below its horizon %lld",
							 store->name, (long long) rewrite->tombstones_dropped,
							 (long long) horizon)));
	return result;
}

/* rollout_compaction_record_error's step */
typedef struct RecordedError
{
	RolloutStore *store;
	const char *message;
} RecordedError;

static void
record_error_step(void *arg)
{
	RecordedError *recorded = arg;

	for (int attempt = 0; attempt < MANIFEST_COMMIT_ATTEMPTS; attempt++)
	{
		BaseManifest *base = base_manifest_read_latest(recorded->store);

		base->last_compaction_error = pnstrdup(recorded->message, 1000);
		if (base_manifest_commit(recorded->store, base) == MANIFEST_COMMITTED)
		{
			manifest_view_note_base_commit(recorded->store, base->version);
			break;
		}
	}
}

/*
 * Record a failed compaction in the base manifest, so that
 * rollout_compaction_stats() shows it on every cluster.  Best effort: a
 * failure to record is logged, never raised over the original error.
 */
void
rollout_compaction_record_error(RolloutStore *store, const char *message)
{
	RecordedError recorded = {store, message};
	ErrorData  *error;

	/* a standby records nothing: it writes nothing */
	if (RecoveryInProgress())
		return;
	error = rollout_try_in_subtransaction(record_error_step, &recorded);
	if (error != NULL)
		ereport(WARNING,
				(errmsg("could not record the compaction error of store \"%s\": %s",
						store->name, error->message)));
}
