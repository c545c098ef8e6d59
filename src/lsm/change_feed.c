/*-------------------------------------------------------------------------
 *
 * change_feed.c
 *		A store's change feed: every version committed after a consumer's
 *		position, read by WAL position, never by a scan of the base.
 *
 * A position says, per shard, which WAL position P the consumer has seen
 * everything up to, the effective stamp S of P and the running writer epoch
 * E there, and the stamp T up to which it has seen the shard's versions (T
 * is S, or more when max_rows cut a read short).  Effective stamps grow
 * strictly along a shard's live WAL entries (row_source.c gives each the
 * maximum of its own stamp and its predecessor's plus one), and flush,
 * merge and compaction keep every version's stamp, so "committed after P"
 * is "stamped after S" in whatever object the version now lives.
 *
 * What a read of one shard opens:
 *	- the generations that hold positions after P: those of the newest shard
 *	  manifest with last_position > P, and when a merge has already dropped
 *	  some of them from it, those of older versions of the manifest, walked
 *	  back until one holds P + 1 or seals nothing after P;
 *	- the WAL entries after max(P, replay_after), up to the first hole,
 *	  their stamps and epochs running on from S and E, or from the
 *	  manifest's last_stamp and sealed_epoch when the generations end the
 *	  run; for this cluster's own shard, when its writer is ready, the
 *	  memtable's batches instead (copied before the manifests are read, as
 *	  a snapshot copies them), which hold the same rows without a read of
 *	  the store.
 * One deduplicating merge over them, tombstones kept, gives each key's
 * newest version among them; a version stamped <= T is not emitted (a
 * generation may straddle P).  Base fragments are never read: their rows
 * were all committed at or before some replay_after a consumer has passed,
 * or are reached through the generations they were merged from while those
 * are kept.  Garbage collection keeps superseded manifest versions and what
 * they name for its grace period, so a consumer that polls more often than
 * that never finds a generation gone; one that does gets an error naming
 * the oldest position still available.
 *
 * A TRUNCATE hides every version of every shard stamped below its cut.  The
 * position carries the newest cut delivered; a read that finds a newer one
 * (in a shard manifest or a WAL entry it opens) emits one TRUNCATE row and
 * drops the versions below the cut.
 *
 * max_rows: a poll opens the sources that hold the oldest versions it has
 * not delivered, about max_rows of them, and leaves the rest for a later poll
 * (feed_select_reads); a call polls again while a poll that left some has
 * nothing to return.  When the sources opened hold no more versions than
 * max_rows (their footers say how many), one pass emits them all.  Otherwise
 * a first pass reads only the keys and hidden columns, to find the highest
 * stamp up to which at most max_rows versions were committed (whole WAL
 * entries: a transaction is never split), and a second emits up to that
 * stamp.  A shard cut short advances T to the cut, and P only over what it
 * delivered whole (feed_shard_advance_within_cut).
 *
 * Position text: "cf1:<incarnation>:<truncate cut>:<shard>=P/S/E/T,...".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "rollout/change_feed.h"
#include "rollout/fault.h"
#include "rollout/manifest.h"
#include "rollout/memtable.h"
#include "rollout/merge_read.h"
#include "rollout/named_snapshot.h"
#include "rollout/shared_store.h"
#include "rollout/store_definition.h"
#include "rollout/store_snapshot.h"
#include "rollout/store_token.h"
#include "rollout/wal.h"

#define POSITION_PREFIX		"cf1:"

/* One shard's part of a read. */
typedef struct FeedShard
{
	ChangeFeedShard from;
	const ShardManifest *manifest;	/* newest */
	List	   *generations;	/* GenerationEntry *: feed_generations */
	int64		superseded_newest;	/* the newest stamp of those a merge took
									 * out of the newest manifest (0: none, or
									 * none says) */
	List	   *sources;		/* SnapshotSource *: generations, then WAL */
	List	   *reading;		/* those this poll reads: feed_select_reads */
	bool		deferred;		/* sources of versions after the poll's stamp
								 * limit were left unread */
	bool		cut_short;		/* versions after the cut were read and left
								 * for a later poll */
	List	   *memtable;		/* this cluster's shard when its writer is
								 * ready: the WAL tail as copied from shared
								 * memory (else NIL) */
	bool		use_memtable;
	int64		memtable_epoch; /* the writer epoch of its batches */
	int64		memtable_stamp; /* the effective stamp of the last one read */
	int64		memtable_next_stamp;	/* of the first batch not copied
										 * (PG_INT64_MAX: none left) */
	int64		memtable_fence; /* the position of the writer's fence, which
								 * has no batch (0: unknown) */
	int64		last_wal_position;	/* of the WAL entries read (0: none) */
	int64		wal_stamp;		/* the running stamp after them */
	int64		wal_epoch;		/* the running epoch after them */
	int64	   *stamps;			/* pass 1: stamps of the versions after T */
	int64		stamp_count;
} FeedShard;

/* Parse a non-negative int64 that is the whole of text. */
static bool
feed_parse_int64(const char *text, int64 *value)
{
	char	   *end;

	if (text[0] < '0' || text[0] > '9')
		return false;
	errno = 0;
	*value = strtoll(text, &end, 10);

	/* stamps and positions stay far from overflowing the readers' + 1 */
	return errno == 0 && *end == '\0' && *value < PG_INT64_MAX / 2;
}

static ChangeFeedShard *
feed_shard_new(const char *shard)
{
	ChangeFeedShard *entry = palloc0(sizeof(ChangeFeedShard));

	entry->shard = pstrdup(shard);
	return entry;
}

/* The "cf1:" text parsed, or NULL when it is not one. */
static ChangeFeedPosition *
feed_position_parse_text(const char *text)
{
	ChangeFeedPosition *position = palloc0(sizeof(ChangeFeedPosition));
	StoreToken	token;
	char	   *shard;
	char	   *value;
	bool		malformed;

	if (!store_token_split(text, POSITION_PREFIX, &token) ||
		!feed_parse_int64(token.head, &position->truncate_stamp))
		return NULL;
	position->incarnation = token.incarnation;
	while (store_token_next_shard(&token.shards, &shard, &value, &malformed))
	{
		char	   *fields[4];
		int64		numbers[4];
		ChangeFeedShard *entry;

		fields[0] = value;
		for (int i = 1; i < 4; i++)
		{
			if ((fields[i] = strchr(fields[i - 1], '/')) == NULL)
				return NULL;
			*fields[i]++ = '\0';
		}
		for (int i = 0; i < 4; i++)
			if (!feed_parse_int64(fields[i], &numbers[i]))
				return NULL;
		if (numbers[3] < numbers[1])
			return NULL;
		entry = feed_shard_new(shard);
		entry->position = numbers[0];
		entry->position_stamp = numbers[1];
		entry->epoch = numbers[2];
		entry->delivered_stamp = numbers[3];
		position->shards = lappend(position->shards, entry);
	}
	if (malformed)
		return NULL;
	if (list_length(position->shards) > 1)
	{
		const char **names = palloc(sizeof(const char *) * list_length(position->shards));
		ListCell   *lc;

		foreach(lc, position->shards)
			names[foreach_current_index(lc)] = ((ChangeFeedShard *) lfirst(lc))->shard;
		if (store_token_repeated_shard(names, list_length(position->shards)) != NULL)
			return NULL;		/* each shard once */
		pfree(names);
	}
	return position;
}

/*
 * The position just after a named snapshot: per shard, the replay_after of
 * the manifest version the token names, with its stamp and epoch.
 */
static ChangeFeedPosition *
feed_position_of_snapshot(RolloutStore *store, const char *token,
						  const NamedSnapshot *named)
{
	ChangeFeedPosition *position = palloc0(sizeof(ChangeFeedPosition));
	ShardManifest **manifests;
	BaseManifest *base;
	int			count = list_length(named->versions.shards);

	named_snapshot_check_of_store(store, named, token, "");
	manifests = shard_manifests_read_versions(store, named->versions.shards,
											  named->versions.shard_versions);
	base = base_manifest_read_version(store, named->versions.base_version);
	if (base == NULL && named->versions.base_version > 0)
		named_snapshot_raise_expired(store, token);
	position->incarnation = pstrdup(named->incarnation);
	position->truncate_stamp = base != NULL ? base->truncate_stamp : 0;
	for (int i = 0; i < count; i++)
	{
		ChangeFeedShard *entry;

		if (manifests[i] == NULL)
			named_snapshot_raise_expired(store, token);
		entry = feed_shard_new(list_nth(named->versions.shards, i));
		entry->position = manifests[i]->replay_after;
		entry->position_stamp = manifests[i]->last_stamp;
		entry->epoch = manifests[i]->sealed_epoch;
		entry->delivered_stamp = manifests[i]->last_stamp;
		position->truncate_stamp = Max(position->truncate_stamp,
									   manifests[i]->truncate_stamp);
		position->shards = lappend(position->shards, entry);
	}
	return position;
}

ChangeFeedPosition *
change_feed_position_parse(RolloutStore *store, const char *since)
{
	ChangeFeedPosition *position;

	if (since == NULL)
	{
		position = palloc0(sizeof(ChangeFeedPosition));
		if (!rollout_store_exists(store))
			return position;	/* nothing written yet: no position */
		if (store->incarnation == NULL ||
			!store_token_incarnation_valid(store->incarnation))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("store \"%s\" has no incarnation to name in a change feed position",
							store->name),
					 errdetail("Its _store.json was written by a release that did not record one.")));
		position->incarnation = store->incarnation;
		return position;
	}
	if (strncmp(since, "rs1:", 4) == 0)
	{
		return feed_position_of_snapshot(store, since,
										 named_snapshot_parse_or_raise(since));
	}
	position = feed_position_parse_text(since);
	if (position == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid change feed position \"%s\"", store_token_for_message(since)),
				 errdetail("A position is the next_since text rollout_changes returned, or a token of rollout_snapshot, or NULL for the start.")));
	/* a handle older than the store's creation would take an old position */
	rollout_store_check_current(store, ROLLOUT_STORE_RECHECK_MS);
	if (!rollout_store_exists(store) || store->incarnation == NULL ||
		strcmp(store->incarnation, position->incarnation) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("change feed position \"%s\" is not a position in store \"%s\"",
						store_token_for_message(since), store->name),
				 errdetail("It was handed out for another store, or for an earlier creation of this one.")));
	return position;
}

char *
change_feed_position_text(const ChangeFeedPosition *position)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s%s:%lld:", POSITION_PREFIX,
					 position->incarnation ? position->incarnation : "",
					 (long long) position->truncate_stamp);
	foreach(lc, position->shards)
	{
		ChangeFeedShard *entry = lfirst(lc);

		appendStringInfo(&buf, "%s%s=%lld/%lld/%lld/%lld",
						 foreach_current_index(lc) > 0 ? "," : "",
						 entry->shard, (long long) entry->position,
						 (long long) entry->position_stamp,
						 (long long) entry->epoch,
						 (long long) entry->delivered_stamp);
	}
	return buf.data;
}

/* The consumer's entry for shard, or a fresh one at the shard's start. */
static ChangeFeedShard
feed_shard_since(const ChangeFeedPosition *since, const char *shard)
{
	ListCell   *lc;
	ChangeFeedShard start = {0};

	foreach(lc, since->shards)
	{
		ChangeFeedShard *entry = lfirst(lc);

		if (strcmp(entry->shard, shard) == 0)
			return *entry;
	}
	start.shard = pstrdup(shard);
	return start;
}

static int
feed_shard_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp(((ChangeFeedShard *) lfirst(a))->shard,
				  ((ChangeFeedShard *) lfirst(b))->shard);
}

/* ERROR: what a read after position of shard needs is gone. */
static void
feed_raise_too_old(RolloutStore *store, const char *shard, int64 position,
				   int64 oldest)
{
	ereport(ERROR,
			(errcode(ERRCODE_SNAPSHOT_TOO_OLD),
			 errmsg("change feed position %lld of shard \"%s\" in store \"%s\" is older than what garbage collection kept",
					(long long) position, shard, store->name),
			 oldest >= 0 ?
			 errdetail("The oldest position still available in that shard is %lld.",
					   (long long) oldest) : 0,
			 errhint("Poll more often than the grace period of garbage collection (rollout_fdw.gc_grace, or the grace of rollout_gc), or start again from a token of rollout_snapshot.")));
}

/*
 * The oldest position of shard a poll can start from with what the newest
 * manifest lists: just before its oldest flush's generation, or, with none,
 * its replay_after (the WAL entries after it).  Older manifest versions may
 * still reach further back; this one is there for sure.
 */
static int64
feed_oldest_listed_position(RolloutStore *store, const char *shard)
{
	ShardManifest *manifest = shard_manifest_read_latest(store, shard);
	int64		oldest = manifest->replay_after;
	ListCell   *lc;

	foreach(lc, manifest->generations)
	{
		GenerationEntry *generation = lfirst(lc);

		/* as in feed_generations: an adopted segment starts no run */
		if (generation->stamp == 0)
			oldest = Min(oldest, generation->first_position - 1);
	}
	return oldest;
}

/* Is a generation of number already in list (GenerationEntry *)? */
static bool
feed_generation_listed(List *list, int64 number)
{
	ListCell   *lc;

	foreach(lc, list)
	{
		if (((GenerationEntry *) lfirst(lc))->number == number)
			return true;
	}
	return false;
}

static int
feed_generation_cmp(const ListCell *a, const ListCell *b)
{
	int64		x = ((GenerationEntry *) lfirst(a))->number;
	int64		y = ((GenerationEntry *) lfirst(b))->number;

	return x < y ? -1 : x > y;
}

static int
feed_generation_first_cmp(const ListCell *a, const ListCell *b)
{
	int64		x = ((GenerationEntry *) lfirst(a))->first_position;
	int64		y = ((GenerationEntry *) lfirst(b))->first_position;

	return x < y ? -1 : x > y;
}

/*
 * The generations of shard that hold positions after from->position: those
 * of the newest manifest, and, when they do not reach back to the position
 * after it, those of older versions, until a version holds that position or
 * seals nothing after it.  ERROR when a version needed is gone.
 */
static List *
feed_generations(RolloutStore *store, const ShardManifest *newest,
				 const ChangeFeedShard *from, int64 *superseded_newest)
{
	List	   *generations = NIL;
	int64		lowest_first = newest->replay_after + 1;
	const ShardManifest *manifest = newest;

	if (from->position >= newest->replay_after)
		return NIL;
	for (int64 version = newest->version;; version--)
	{
		ListCell   *lc;

		/* each version is a read; a store may serve many */
		CHECK_FOR_INTERRUPTS();
		foreach(lc, manifest->generations)
		{
			GenerationEntry *generation = lfirst(lc);

			if (generation->last_position <= from->position ||
				feed_generation_listed(generations, generation->number))
				continue;
			generations = lappend(generations, generation);
			if (manifest != newest)
				*superseded_newest = Max(*superseded_newest,
										 generation_newest_stamp(generation));

			/*
			 * An adopted ingest segment (stamp > 0) holds one position in the
			 * middle of its flush's range, and a merge may take that range
			 * and leave it: only a flush's rewritten generation says where a
			 * run of positions begins.
			 */
			if (generation->stamp == 0)
				lowest_first = Min(lowest_first, generation->first_position);
		}
		if (lowest_first <= from->position + 1 ||
			manifest->replay_after <= from->position || version <= 1)
			break;
		manifest = shard_manifest_read_version(store, newest->shard, version - 1);
		if (manifest == NULL)
			feed_raise_too_old(store, newest->shard, from->position,
							   lowest_first - 1);
	}
	list_sort(generations, feed_generation_cmp);
	return generations;
}

/* A memtable batch's effective stamp, whatever kind of source holds it. */
static int64
feed_batch_stamp(const SnapshotSource *batch)
{
	return batch->stamp_fixed >= 0 ? batch->stamp_fixed : batch->stamp_floor + 1;
}

/*
 * Collect shard's sources after from (feed_generations, then the WAL run
 * without holes), into feed.
 */
static void
feed_shard_sources(RolloutStore *store, FeedShard *feed)
{
	const ShardManifest *manifest = feed->manifest;
	const ChangeFeedShard *from = &feed->from;
	int64		wal_after = Max(from->position, manifest->replay_after);
	int64		stamp_floor = manifest->last_stamp;
	int64		epoch_floor = manifest->sealed_epoch;
	List	   *entries;
	ListCell   *lc;

	feed->generations = feed_generations(store, manifest, from,
										 &feed->superseded_newest);
	foreach(lc, feed->generations)
		feed->sources = lappend(feed->sources,
								rollout_snapshot_generation_source(store, manifest->shard,
																   lfirst(lc)));

	/*
	 * The first WAL entry's readers go on from the stamp and epoch of the
	 * position before it: the consumer's, or the manifest's when the
	 * generations end after the consumer's position.
	 */
	if (from->position >= manifest->replay_after)
	{
		stamp_floor = from->position_stamp;
		epoch_floor = Max(from->epoch, manifest->sealed_epoch);
	}

	/*
	 * This cluster's own tail is in the memtable when its writer is ready:
	 * every batch after replay_after, acknowledged, in position order, with
	 * its effective stamp.  A batch a flush sealed after the copy is in a
	 * generation of the manifest read since, and left out here.
	 */
	if (feed->use_memtable)
	{
		foreach(lc, feed->memtable)
		{
			SnapshotSource *source = lfirst(lc);

			if (source->position <= wal_after)
				continue;
			feed->sources = lappend(feed->sources, source);
			feed->last_wal_position = Max(feed->last_wal_position,
										  source->position);
			feed->memtable_stamp = Max(feed->memtable_stamp,
									   feed_batch_stamp(source));
		}
		return;
	}
	entries = wal_contiguous_prefix(wal_list_after(store, manifest->shard,
												   wal_after),
									wal_after);
	foreach(lc, entries)
	{
		bool		first = foreach_current_index(lc) == 0;

		feed->sources = lappend(feed->sources,
								rollout_snapshot_wal_source(manifest->shard,
															lfirst(lc),
															first ? stamp_floor : -1,
															first ? epoch_floor : -1));
		feed->last_wal_position = ((WalEntryRef *) lfirst(lc))->position;
	}
}

/*
 * Begin a read of feed's sources (every version, tombstones kept) and fold
 * the truncate cut of the WAL entries it opened into *truncate_stamp.
 */
static MergeRead *
feed_read_begin(RolloutStore *store, FeedShard *feed, const bool *want,
				int64 *truncate_stamp)
{
	RolloutSnapshot *snapshot = palloc0(sizeof(RolloutSnapshot));
	MergeReadOptions options = {0};
	bool		vanished = false;
	MergeRead  *read;
	const MergeReadStats *stats;

	snapshot->sources = list_copy(feed->reading);
	snapshot->shard_count = 1;
	options.keep_tombstones = true;
	options.follow_ingest = true;
	options.vanished = &vanished;
	read = merge_read_begin(store, snapshot, want, NULL, &options);
	if (read == NULL)
	{
		int64		oldest = feed_oldest_listed_position(store, feed->from.shard);

		/*
		 * What vanished was sealed and collected after the listing, while
		 * what the position needs is still there: the next poll finds it.
		 */
		if (oldest <= feed->from.position)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("objects of shard \"%s\" of store \"%s\" were collected while the change feed read them",
							feed->from.shard, store->name),
					 errhint("Poll again from the same position.")));
		feed_raise_too_old(store, feed->from.shard, feed->from.position, oldest);
	}
	stats = merge_read_stats(read);
	feed->wal_stamp = stats->last_wal_stamp;
	feed->wal_epoch = stats->last_wal_epoch;
	*truncate_stamp = Max(*truncate_stamp, stats->wal_truncate_stamp);
	return read;
}

static int
feed_stamp_cmp(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : x > y;
}

/*
 * The highest stamp up to which at most max_rows of the stamps were
 * committed, never inside a run of equal stamps (one WAL entry); when the
 * first run alone is longer, its stamp.  PG_INT64_MAX when there are no
 * more than max_rows.
 */
static int64
feed_cut(int64 *stamps, int64 count, int64 max_rows)
{
	int64		i;

	if (count <= max_rows)
		return PG_INT64_MAX;
	qsort(stamps, count, sizeof(int64), feed_stamp_cmp);
	for (i = max_rows; i > 0 && stamps[i - 1] == stamps[i]; i--)
		;
	return i > 0 ? stamps[i - 1] : stamps[0];
}

/* Place after at the manifest's replay_after, as reading every generation does. */
static void
feed_position_at_replay_after(const ShardManifest *manifest,
							  ChangeFeedShard *after)
{
	after->position = manifest->replay_after;
	after->position_stamp = manifest->last_stamp;
	after->epoch = Max(after->epoch, manifest->sealed_epoch);
}

/*
 * Move the position of a read cut short at cut (after, which starts as the
 * consumer's) over the positions it delivered whole, so that the next poll
 * does not open them again (docs/PERFORMANCE.md, "A consumer far behind").
 *
 * First the generations: P may pass the positions the generations cover from
 * P + 1 on (and those between them, which hold no rows), as long as none of
 * them holds a version stamped after cut and no generation that does (or
 * whose newest stamp is unknown) starts at or below.  An adopted ingest segment holds one position inside
 * its flush's range, so the second condition is what stops P in front of it.
 * Below the manifest's replay_after, position_stamp and epoch are never
 * read (a WAL reader starts from the manifest's there), so they keep the
 * newest stamp delivered whole and the consumer's epoch.
 *
 * Then, once P has reached replay_after, this cluster's memtable batches in
 * position order (their rows, ingest segments or WAL entries), one after the
 * other without a gap, while their effective stamp is <= cut: a cut is never
 * inside a WAL entry, and stamp and epoch come out as the uncut read's do.
 * An entry without rows has no batch: the writer's claim fence (the slot
 * says where it is) is stepped over; a filler, or a dead entry a claim
 * passed, stops P (they are rare: a failed PUT, a crash).
 * WAL entries read from the store keep P in front of them: their effective
 * stamps are the reader's running maximum, which a read does not hand out
 * per entry.
 */
static void
feed_shard_advance_within_cut(const FeedShard *feed, int64 cut,
							  ChangeFeedShard *after)
{
	const ShardManifest *manifest = feed->manifest;
	int64		blocked_from = PG_INT64_MAX;
	int64		covered = after->position;
	int64		covered_stamp = after->position_stamp;
	List	   *by_first;
	ListCell   *lc;

	foreach(lc, feed->generations)
	{
		const GenerationEntry *generation = lfirst(lc);
		int64		newest = generation_newest_stamp(generation);

		if (newest == 0 || newest > cut)
			blocked_from = Min(blocked_from, generation->first_position);
	}
	by_first = list_copy(feed->generations);
	list_sort(by_first, feed_generation_first_cmp);
	foreach(lc, by_first)
	{
		const GenerationEntry *generation = lfirst(lc);
		int64		newest = generation_newest_stamp(generation);

		/*
		 * Positions up to replay_after that no generation holds hold no rows:
		 * a flush sealed them without writing any (a fence, a filler, a
		 * TRUNCATE, rows a TRUNCATE hid), and feed_generations lists every
		 * generation after P (merges take generations from the front, so none
		 * after one it lists is missing).  P passes them up to the first
		 * generation it cannot pass, or to replay_after once every generation
		 * was delivered whole.  Stopping at the first such gap kept a
		 * consumer whose every poll is cut short in front of it for as long
		 * as its backlog lasted, walking back more manifest versions at each
		 * poll, until gc removed the version it needed and the position was
		 * lost.
		 */
		if (newest == 0 || newest > cut)
		{
			covered = Max(covered, generation->first_position - 1);
			break;
		}
		if (generation->last_position > covered)
		{
			covered = generation->last_position;
			covered_stamp = Max(covered_stamp, newest);
		}
	}
	if (lc == NULL)
		covered = Max(covered, manifest->replay_after);
	covered = Min(covered, blocked_from - 1);
	if (covered >= manifest->replay_after && after->position < manifest->replay_after)
	{
		/* every generation delivered whole: P at replay_after, as uncut */
		feed_position_at_replay_after(manifest, after);
	}
	else if (covered > after->position)
	{
		after->position = covered;
		after->position_stamp = Min(covered_stamp, cut);
		return;
	}
	if (after->position < manifest->replay_after || !feed->use_memtable)
		return;
	foreach(lc, feed->sources)
	{
		const SnapshotSource *batch = lfirst(lc);
		int64		next = after->position + 1;

		/* a batch's rows, its ingest segments, or its WAL entry */
		if (batch->kind == SNAPSHOT_GENERATION || batch->position <= after->position)
			continue;

		/*
		 * The writer's fence has no batch: stepped over, or every poll cut
		 * short in front of it (a new store's first commits, those after a
		 * restart) would copy again all it already delivered, until a flush.
		 */
		if (next == feed->memtable_fence)
			next++;
		if (batch->position != next || feed_batch_stamp(batch) > cut)
			break;
		after->position = batch->position;
		after->position_stamp = feed_batch_stamp(batch);
		after->epoch = Max(after->epoch, feed->memtable_epoch);
	}
}

/* The new position of feed's shard after a read cut at cut. */
static ChangeFeedShard *
feed_shard_after(const FeedShard *feed, int64 cut)
{
	ChangeFeedShard *after = palloc(sizeof(ChangeFeedShard));

	*after = feed->from;
	if (feed->cut_short || feed->deferred)
	{
		feed_shard_advance_within_cut(feed, cut, after);

		/*
		 * T >= S also when P moved to replay_after, whose last_stamp may be
		 * above the cut: the entries there without rows (a filler, a fence)
		 * are stamped after every version of the generations.  Every version
		 * after P is stamped after S, so none is skipped.
		 */
		after->delivered_stamp = Max(Max(after->delivered_stamp, cut),
									 after->position_stamp);
		return after;
	}
	if (feed->last_wal_position > 0)
	{
		after->position = feed->last_wal_position;
		after->position_stamp = Max(feed->wal_stamp, feed->memtable_stamp);
		after->epoch = Max(Max(after->epoch, feed->wal_epoch),
						   feed->memtable_epoch);
	}
	else if (after->position < feed->manifest->replay_after)
		feed_position_at_replay_after(feed->manifest, after);
	after->delivered_stamp = Max(after->delivered_stamp, after->position_stamp);
	return after;
}

/*
 * The first of two passes: the stamps of the versions of feed's shard
 * after what the consumer has seen and not below the truncate cut, into
 * feed->stamps.
 */
static void
feed_collect_stamps(RolloutStore *store, FeedShard *feed,
					const bool *want_stamps, int64 truncate_stamp)
{
	int64		allocated = 64;
	int64		ignored = 0;
	Datum	   *values = palloc0(sizeof(Datum) * store->schema.ncolumns);
	bool	   *isnull = palloc0(sizeof(bool) * store->schema.ncolumns);
	MergeRead  *read = feed_read_begin(store, feed, want_stamps, &ignored);

	feed->stamps = palloc(sizeof(int64) * allocated);
	while (merge_read_next(read, values, isnull))
	{
		int64		stamp = DatumGetInt64(values[store->ts_column]);

		if (stamp <= feed->from.delivered_stamp || stamp < truncate_stamp)
			continue;
		if (feed->stamp_count == allocated)
		{
			allocated *= 2;
			feed->stamps = repalloc_huge(feed->stamps, sizeof(int64) * allocated);
		}
		feed->stamps[feed->stamp_count++] = stamp;
	}
	merge_read_end(read);
}

/*
 * Emit the versions read returns that the consumer has not seen, not below
 * the truncate cut and not after cut.
 */
static void
feed_emit(RolloutStore *store, FeedShard *feed, MergeRead *read,
		  int64 truncate_stamp, int64 cut, ChangeFeedEmit emit, void *arg)
{
	Datum	   *values = palloc0(sizeof(Datum) * store->schema.ncolumns);
	bool	   *isnull = palloc0(sizeof(bool) * store->schema.ncolumns);
	ChangeFeedRow row;

	row.shard = feed->from.shard;
	row.values = values;
	row.isnull = isnull;
	while (merge_read_next(read, values, isnull))
	{
		row.stamp = DatumGetInt64(values[store->ts_column]);
		if (row.stamp <= feed->from.delivered_stamp || row.stamp < truncate_stamp)
			continue;
		if (row.stamp > cut)
		{
			feed->cut_short = true;
			continue;
		}
		row.op = DatumGetInt16(values[store->op_column]);
		emit(arg, &row);
	}
}

/*
 * The shards of store as a read after since sees them, into *count feeds:
 * this cluster's memtable first, as a snapshot copies it (store_snapshot.c:
 * a flush drops batches only after committing the manifest that seals
 * them), then the newest manifests, in the order a snapshot reads them, and
 * each shard's sources after the consumer's position.  *truncate_stamp
 * rises to the newest TRUNCATE the memtable and the manifests know.
 */
static FeedShard *
feed_open_shards(RolloutStore *store, const ChangeFeedPosition *since,
				 int64 max_rows, int *count, int64 *truncate_stamp)
{
	ManifestVersions versions;
	ShardManifest **manifests;
	FeedShard  *feeds;
	SharedStoreSlot *slot;
	List	   *memtable = NIL;
	bool		have_memtable = false;
	int64		memtable_epoch = 0;
	MemtableBudget budget = {0, max_rows, PG_INT64_MAX, 0};

	/*
	 * The batches up to the consumer's position in this shard are not copied:
	 * no read after it opens them; nor are those after the first max_rows
	 * rows it has not seen, which only a later poll can return
	 * (feed_select_reads).
	 */
	slot = shared_store_lookup(store);
	if (slot != NULL)
	{
		ChangeFeedShard own = feed_shard_since(since, store->shard);
		int64		memtable_truncate = 0;

		budget.delivered_stamp = own.delivered_stamp;
		have_memtable = memtable_sources(store, slot, own.position, &budget,
										 &memtable, &memtable_truncate,
										 &memtable_epoch);
		*truncate_stamp = Max(*truncate_stamp, memtable_truncate);
	}

	rollout_snapshot_newest_versions(store, &versions);
	*count = list_length(versions.shards);
	manifests = shard_manifests_read_versions(store, versions.shards,
											  versions.shard_versions);
	feeds = palloc0(sizeof(FeedShard) * Max(*count, 1));
	for (int i = 0; i < *count; i++)
	{
		if (manifests[i] == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the newest manifest of shard \"%s\" of store \"%s\" vanished while it was read",
							(char *) list_nth(versions.shards, i), store->name)));
		feeds[i].manifest = manifests[i];
		feeds[i].from = feed_shard_since(since, manifests[i]->shard);
		feeds[i].memtable_next_stamp = PG_INT64_MAX;
		if (have_memtable && strcmp(manifests[i]->shard, store->shard) == 0)
		{
			feeds[i].use_memtable = true;
			feeds[i].memtable = memtable;
			feeds[i].memtable_epoch = memtable_epoch;
			feeds[i].memtable_next_stamp = budget.next_stamp;
			feeds[i].memtable_fence = budget.fence_position;
		}
		*truncate_stamp = Max(*truncate_stamp, manifests[i]->truncate_stamp);
		feed_shard_sources(store, &feeds[i]);
	}
	rollout_fault_point("feed.after_sources");
	return feeds;
}

/* A source whose stamps are known before it is opened. */
typedef struct FeedCandidate
{
	FeedShard  *feed;
	int			index;			/* in the feeds' sources, counted across feeds */
	int64		rows;
	int64		pending;		/* the oldest stamp it may hold that a poll
								 * could return */
} FeedCandidate;

/*
 * The stamps feed's source's versions lie between, and how many there are,
 * when known without opening it: a fixed stamp (memtable batches, ingest
 * segments, adopted generations), a generation's min_ts and max_ts from its
 * manifest, or, for a memtable batch read as its WAL entry (written with
 * other credentials), the batch's stamp, with its rows counted as one.  WAL
 * entries read from the store tell only once read.
 */
static bool
feed_source_bounds(const FeedShard *feed, const SnapshotSource *source,
				   int64 *oldest, int64 *newest, int64 *rows)
{
	*rows = Max(source->rows, 1);
	if (source->stamp_fixed >= 0)
	{
		*oldest = *newest = source->stamp_fixed;
		return true;
	}
	if (source->kind == SNAPSHOT_WAL_ENTRY && feed->use_memtable)
	{
		*oldest = *newest = feed_batch_stamp(source);
		return true;
	}
	if (source->kind != SNAPSHOT_GENERATION || source->min_ts <= 0 ||
		source->max_ts <= 0)
		return false;
	*oldest = source->min_ts;
	*newest = source->max_ts;
	return true;
}

static int
feed_candidate_cmp(const void *a, const void *b)
{
	const FeedCandidate *x = a;
	const FeedCandidate *y = b;

	if (x->pending != y->pending)
		return x->pending < y->pending ? -1 : 1;
	return x->index - y->index;
}

/*
 * Choose which of count feeds' sources this poll reads (feed->reading, in
 * the order of feed->sources), and return the stamp limit of what it may
 * emit: PG_INT64_MAX, or one below the oldest stamp that matters of the
 * sources it left for a later poll (docs/MAINTENANCE.md, "The change feed").
 *
 * What matters of a source are its versions stamped after what its shard
 * delivered (T) and not below the truncate cut.  A source without any is
 * not read.  When the sources whose stamps the manifests and the memtable
 * give hold more than max_rows versions, they are taken in order of their
 * oldest stamp that matters until they hold max_rows, with every other
 * whose oldest stamp that matters is the same; the rest are left for a later
 * poll.  Whatever the cut of this poll then is, it is below every version
 * that matters of the sources left, so a poll reads about max_rows versions
 * whatever the backlog behind them, and a consumer far behind drains it in
 * linear time.  Ties are taken together, so that a transaction (one stamp)
 * is never split between a source read and one left.  A source left out
 * holds no version the poll could emit, though it could hold a newer version
 * of a key the poll emits: that version comes in a later poll, like one
 * committed after it.  Sources whose stamps are only known once read are
 * always read.
 *
 * A generation that a merge took out of the newest manifest is neither left
 * for later nor cut inside: garbage collection may take it once its grace
 * after the merge has passed, however often the consumer polls, so the poll
 * that reaches it delivers all of it, past max_rows if need be.  *pin is the
 * newest stamp of such generations that matters (0: none), which every
 * source with an older one is read for and the cut is never below.
 */
static int64
feed_select_reads(FeedShard *feeds, int count, int64 max_rows,
				  int64 truncate_stamp, int64 *pin)
{
	int			total = 0;
	int			ncandidates = 0;
	int			index = 0;
	int64		rows = 0;
	int64		limit = PG_INT64_MAX;
	FeedCandidate *candidates;
	char	   *decision;		/* per source: 'r'ead, 'd'elivered, 'l'ater */

	*pin = 0;
	for (int i = 0; i < count; i++)
	{
		total += list_length(feeds[i].sources);
		if (feeds[i].superseded_newest > feeds[i].from.delivered_stamp &&
			feeds[i].superseded_newest >= truncate_stamp)
			*pin = Max(*pin, feeds[i].superseded_newest);
	}
	candidates = palloc(sizeof(FeedCandidate) * Max(total, 1));
	decision = palloc(Max(total, 1));
	for (int i = 0; i < count; i++)
	{
		int64		floor = Max(feeds[i].from.delivered_stamp + 1, truncate_stamp);
		ListCell   *lc;

		foreach(lc, feeds[i].sources)
		{
			FeedCandidate *candidate = &candidates[ncandidates];
			int64		oldest;
			int64		newest;

			decision[index] = 'r';
			if (feed_source_bounds(&feeds[i], lfirst(lc), &oldest, &newest,
								   &candidate->rows))
			{
				if (newest < floor)
					decision[index] = 'd';
				else
				{
					candidate->feed = &feeds[i];
					candidate->index = index;
					candidate->pending = Max(oldest, floor);
					rows += candidate->rows;
					ncandidates++;
				}
			}
			index++;
		}
	}

	if (rows > max_rows)
	{
		int			k;
		int64		last_taken = 0;

		qsort(candidates, ncandidates, sizeof(FeedCandidate), feed_candidate_cmp);
		rows = 0;
		for (k = 0; k < ncandidates; k++)
		{
			if (rows >= max_rows && candidates[k].pending > last_taken &&
				candidates[k].pending > *pin)
				break;
			rows += candidates[k].rows;
			last_taken = candidates[k].pending;
		}
		for (; k < ncandidates; k++)
		{
			decision[candidates[k].index] = 'l';
			candidates[k].feed->deferred = true;
			limit = Min(limit, candidates[k].pending - 1);
		}
	}

	/* the memtable batches not copied come after every batch that was */
	for (int i = 0; i < count; i++)
	{
		if (feeds[i].memtable_next_stamp == PG_INT64_MAX)
			continue;
		feeds[i].deferred = true;
		limit = Min(limit, feeds[i].memtable_next_stamp - 1);
	}

	index = 0;
	for (int i = 0; i < count; i++)
	{
		ListCell   *lc;

		feeds[i].reading = NIL;
		foreach(lc, feeds[i].sources)
			if (decision[index++] == 'r')
			feeds[i].reading = lappend(feeds[i].reading, lfirst(lc));
	}
	return limit;
}

/*
 * The stamp at which to cut the read of count feeds so that it emits at most
 * max_rows versions and nothing after limit (feed_select_reads), or
 * PG_INT64_MAX when it emits all.  reads[i] are open on the sources the feeds
 * read (NULL for those without any).  When they hold no more versions than
 * max_rows, they are used as they are: one pass; otherwise a first pass over
 * the stamps finds the cut, and they are opened again.
 */
static int64
feed_find_cut(RolloutStore *store, FeedShard *feeds, int count,
			  MergeRead **reads, int64 max_rows, int64 limit, int64 pin,
			  const bool *want_rows, int64 *truncate_stamp)
{
	int			ncolumns = store->schema.ncolumns;
	bool	   *want_stamps = palloc0(sizeof(bool) * ncolumns);
	int64		held = 0;
	int64		total = 0;
	int64	   *all_stamps;
	int64		cut;

	for (int i = 0; i < count; i++)
		if (reads[i] != NULL)
			held += merge_read_versions_held(reads[i]);
	if (held <= max_rows)
		return limit;

	want_stamps[store->ts_column] = true;
	want_stamps[store->op_column] = true;
	want_stamps[store->key_column] = true;
	for (int i = 0; i < count; i++)
	{
		if (reads[i] == NULL)
			continue;
		merge_read_end(reads[i]);
		reads[i] = NULL;
		feed_collect_stamps(store, &feeds[i], want_stamps, *truncate_stamp);
		total += feeds[i].stamp_count;
	}
	all_stamps = palloc_extended(sizeof(int64) * Max(total, 1), MCXT_ALLOC_HUGE);
	total = 0;
	for (int i = 0; i < count; i++)
	{
		if (feeds[i].stamp_count == 0)
			continue;
		memcpy(all_stamps + total, feeds[i].stamps,
			   sizeof(int64) * feeds[i].stamp_count);
		total += feeds[i].stamp_count;
	}
	cut = Min(Max(feed_cut(all_stamps, total, max_rows), pin), limit);
	for (int i = 0; i < count; i++)
		if (feeds[i].stamp_count > 0)
			reads[i] = feed_read_begin(store, &feeds[i], want_rows, truncate_stamp);
	return cut;
}

/* What a poll reads, for a consumer (and a test) to see at DEBUG1. */
static void
feed_log_reads(RolloutStore *store, const FeedShard *feeds, int count,
			   int64 limit)
{
	int			sources = 0;
	int			reading = 0;

	for (int i = 0; i < count; i++)
	{
		sources += list_length(feeds[i].sources);
		reading += list_length(feeds[i].reading);
	}
	if (limit == PG_INT64_MAX)
		elog(DEBUG1, "change feed of store \"%s\": %d of %d sources found after the position read",
			 store->name, reading, sources);
	else
		elog(DEBUG1, "change feed of store \"%s\": %d of %d sources found after the position read, the rest left for a later poll",
			 store->name, reading, sources);
}

/*
 * An emit callback that counts the versions it passes on, and calls the
 * caller's in the caller's memory context (a round's own is deleted when it
 * returned nothing but a TRUNCATE).
 */
typedef struct FeedEmitCounter
{
	ChangeFeedEmit emit;
	void	   *arg;
	MemoryContext context;
	int64		versions;
} FeedEmitCounter;

static void
feed_emit_counted(void *arg, const ChangeFeedRow *row)
{
	FeedEmitCounter *counter = arg;
	MemoryContext round_context = MemoryContextSwitchTo(counter->context);

	if (row->op != ROLLOUT_OP_TRUNCATE)
		counter->versions++;
	counter->emit(counter->arg, row);
	MemoryContextSwitchTo(round_context);
}

/*
 * One read of the changes after since (change_feed_read); *left tells
 * whether it left sources for a later poll.
 */
static ChangeFeedPosition *
feed_poll(RolloutStore *store, const ChangeFeedPosition *since,
		  int64 max_rows, const bool *want_rows, ChangeFeedEmit emit,
		  void *arg, bool *left)
{
	ChangeFeedPosition *after = palloc0(sizeof(ChangeFeedPosition));
	int			count;
	FeedShard  *feeds;
	int64		truncate_stamp = since->truncate_stamp;
	int64		limit;
	int64		pin;
	int64		cut;
	MergeRead **reads;
	ListCell   *lc;

	after->incarnation = since->incarnation;
	feeds = feed_open_shards(store, since, max_rows, &count, &truncate_stamp);
	limit = feed_select_reads(feeds, count, max_rows, truncate_stamp, &pin);
	*left = limit != PG_INT64_MAX;
	feed_log_reads(store, feeds, count, limit);

	/* open every shard's read: the truncate cut is whole once all are open */
	reads = palloc0(sizeof(MergeRead *) * Max(count, 1));
	for (int i = 0; i < count; i++)
		if (feeds[i].reading != NIL)
			reads[i] = feed_read_begin(store, &feeds[i], want_rows, &truncate_stamp);
	cut = feed_find_cut(store, feeds, count, reads, max_rows, limit, pin,
						want_rows, &truncate_stamp);

	/* emit: the TRUNCATE first, then each shard's versions up to the cut */
	if (truncate_stamp > since->truncate_stamp)
	{
		ChangeFeedRow row = {NULL, truncate_stamp, ROLLOUT_OP_TRUNCATE, NULL, NULL};

		emit(arg, &row);
	}
	for (int i = 0; i < count; i++)
	{
		if (reads[i] == NULL)
			continue;
		feed_emit(store, &feeds[i], reads[i], truncate_stamp, cut, emit, arg);
		merge_read_end(reads[i]);
	}

	/*
	 * The position after: every shard of the store, and any it forgot (since
	 * names each shard once, so only the store's need looking through).
	 */
	after->truncate_stamp = truncate_stamp;
	for (int i = 0; i < count; i++)
		after->shards = lappend(after->shards, feed_shard_after(&feeds[i], cut));
	foreach(lc, since->shards)
	{
		ChangeFeedShard *entry = lfirst(lc);
		bool		listed = false;

		for (int i = 0; i < count && !listed; i++)
			listed = strcmp(((ChangeFeedShard *) list_nth(after->shards, i))->shard,
							entry->shard) == 0;
		if (!listed)
			after->shards = lappend(after->shards, entry);
	}
	list_sort(after->shards, feed_shard_cmp);
	return after;
}

ChangeFeedPosition *
change_feed_read(RolloutStore *store, const ChangeFeedPosition *since,
				 int64 max_rows, const bool *want, ChangeFeedEmit emit,
				 void *arg)
{
	int			ncolumns = store->schema.ncolumns;
	bool	   *want_rows = palloc(sizeof(bool) * ncolumns);
	FeedEmitCounter counter = {emit, arg, CurrentMemoryContext, 0};

	/* a read returns the hidden columns it is asked for, like any other */
	memcpy(want_rows, want, sizeof(bool) * ncolumns);
	want_rows[store->ts_column] = true;
	want_rows[store->op_column] = true;
	want_rows[store->key_column] = true;
	max_rows = Max(max_rows, 1);

	if (since->incarnation == NULL)
		return palloc0(sizeof(ChangeFeedPosition)); /* nothing was ever
													 * written */

	/*
	 * A poll that left sources for later may still have no version to return:
	 * every version it read was below a truncate cut (one it may only have
	 * found in a WAL entry it read, after choosing its sources), or
	 * superseded by a version after its limit (a key written in every
	 * commit).  Such a poll goes on from where it got, so that a call returns
	 * no change only when there is none, what a consumer takes to mean that
	 * it has caught up, and a TRUNCATE comes with what followed it.  Each
	 * round leaves behind its position and any TRUNCATE it emitted.
	 */
	for (;;)
	{
		MemoryContext round_context = AllocSetContextCreate(CurrentMemoryContext,
															"rollout change feed round",
															ALLOCSET_DEFAULT_SIZES);
		MemoryContext caller_context = MemoryContextSwitchTo(round_context);
		ChangeFeedPosition *after;
		bool		left;
		char	   *text;

		after = feed_poll(store, since, max_rows, want_rows, feed_emit_counted,
						  &counter, &left);
		MemoryContextSwitchTo(caller_context);
		if (counter.versions > 0 || !left)
			return after;		/* its round's memory goes with the caller's */
		text = change_feed_position_text(after);

		MemoryContextDelete(round_context);
		since = feed_position_parse_text(text);

		/* a stamp or position the store holds that no writer could make */
		if (since == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("store \"%s\" holds a stamp or position out of range",
							store->name),
					 errdetail("The change feed's position after its last round cannot be read back: \"%s\".",
							   text)));
		CHECK_FOR_INTERRUPTS();
	}
}
