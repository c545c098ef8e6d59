/*-------------------------------------------------------------------------
 *
 * manifest.h
 *		Base and shard manifests: the only mutable state of a store.
 *
 * A manifest is a complete JSON document (no deltas) written once under a
 * zero-padded version number; "the newest version" is decided by
 * create-if-absent of version v+1 (DESIGN.md §3).  A commit that finds v+1
 * taken reports a conflict, and the caller re-reads and rebases.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_MANIFEST_H
#define ROLLOUT_MANIFEST_H

#include "rollout/store.h"

/* A flushed generation, as listed in a shard manifest. */
typedef struct GenerationEntry
{
	int64		number;
	char	   *file;			/* object key */
	int64		first_position;
	int64		last_position;
	int64		rows;
	int64		bytes;
	int64		min_ts;
	int64		max_ts;
	bool		has_key_range;
	Datum		min_key;
	Datum		max_key;

	/*
	 * 0, or the effective stamp of the WAL entry that committed this segment
	 * when flush adopted a large transaction's ingest segment as a generation
	 * without rewriting it: readers give every row this _ts.
	 */
	int64		stamp;
} GenerationEntry;

/*
 * The newest _ts a reader gives a version of generation: its fixed stamp when
 * it has one, else its rows' newest (0 when the manifest does not know it).
 */
static inline int64
generation_newest_stamp(const GenerationEntry *generation)
{
	return generation->stamp > 0 ? generation->stamp : generation->max_ts;
}

typedef struct ShardManifest
{
	char	   *shard;
	int64		version;		/* 0: no manifest written yet */
	int64		writer_epoch;

	/*
	 * The PostgreSQL timeline of the cluster that claimed writer_epoch (1
	 * when no claim recorded one).  A standby promoted to primary writes on a
	 * higher timeline than the primary it replaces, which makes the old
	 * primary's writes refusable: a claim records the claimer's timeline, and
	 * a cluster on a lower one never writes the shard again.
	 */
	int64		writer_timeline;
	int64		epoch_start_position;
	int64		replay_after;	/* every position <= this is in a generation
								 * or in the base */
	int64		last_stamp;		/* effective stamp of position replay_after */

	/*
	 * The newest writer epoch among the WAL entries sealed so far (0: not
	 * recorded, as before pipelined writes).  A reader of the WAL tail starts
	 * its running epoch here: an entry after replay_after written under an
	 * older epoch is dead, the unacknowledged leftover of a writer fenced
	 * while its pipeline was in flight (docs/WRITER.md, "Pipelined WAL
	 * writes"), even when the fence that killed it is already sealed.
	 */
	int64		sealed_epoch;

	/*
	 * The newest truncate cut sealed from this shard's WAL (0: none): every
	 * version of the store, of any shard, with a _ts below it is hidden for
	 * good.  Kept by every later version of the manifest.
	 */
	int64		truncate_stamp;

	/*
	 * A base manifest version that holds every generation this version, or
	 * any it was built on, dropped (0: unknown, or none dropped yet).  A
	 * merge sets it when it drains the generations it folded into the base,
	 * and every later version keeps it.  Whoever reads this shard manifest
	 * and a base at least this new misses no merged row: this cluster's view
	 * of the store's manifest versions (manifest_view.c) relies on it.
	 */
	int64		drops_covered_by_base;
	int64		next_generation;
	List	   *generations;	/* GenerationEntry *, ascending number */
	TimestampTz read_at;		/* when the read that found it newest began
								 * (0: not read so); never stored */
} ShardManifest;

/* A base-table fragment, as listed in the base manifest. */
typedef struct FragmentEntry
{
	char	   *file;
	int64		rows;
	int64		bytes;
	int64		min_ts;
	int64		max_ts;
	bool		has_key_range;
	Datum		min_key;
	Datum		max_key;

	/*
	 * The fragments one compaction wrote share this name (the first output's
	 * file) and no key: each key of their rows is in one of them only.  NULL
	 * for the other fragments.  A reader's zone maps need not fear that a
	 * fragment shadows another of its own set (docs/FORMAT.md, "Zone maps").
	 */
	char	   *disjoint_set;
} FragmentEntry;

/* merged[shard] = highest generation folded into the base. */
typedef struct MergedMark
{
	char	   *shard;
	int64		generation;
} MergedMark;

typedef struct BaseManifest
{
	int64		version;		/* 0: no manifest written yet */
	List	   *fragments;		/* FragmentEntry * */
	List	   *merged;			/* MergedMark * */

	/*
	 * The newest truncate cut of the shard manifests the base's merges and
	 * compactions read (0: none): a reader that sees a fragment made after a
	 * TRUNCATE sees its cut here, even if the shard manifest it read first
	 * was older than the flush that sealed the cut.
	 */
	int64		truncate_stamp;
	int64		total_compactions;
	char	   *last_compaction;	/* timestamptz text, or NULL */
	char	   *last_compaction_error;	/* or NULL */
	TimestampTz read_at;		/* as in ShardManifest */
} BaseManifest;

typedef enum ManifestCommitResult
{
	MANIFEST_COMMITTED,
	MANIFEST_CONFLICT			/* version taken: re-read and rebase */
} ManifestCommitResult;

/* Read the newest version (an empty version-0 manifest if there is none). */
extern ShardManifest *shard_manifest_read_latest(RolloutStore *store,
												 const char *shard);

/*
 * The newest manifests of several shards, in order, their documents read in
 * one batch of concurrent requests (for snapshots).
 */
extern List *shard_manifests_read_latest(RolloutStore *store, List *shards);

extern BaseManifest *base_manifest_read_latest(RolloutStore *store);

/*
 * The newest version number (0: none yet), from a listing of the _manifest/
 * folder: what the *_read_latest functions read, without reading it.
 */
extern int64 shard_manifest_newest_version(RolloutStore *store,
										   const char *shard);
extern int64 base_manifest_newest_version(RolloutStore *store);

/*
 * Given versions of several shards' manifests (versions[i] of the i-th of
 * shards), read in one batch: an array in the order of shards, with the
 * empty manifest for version 0 and NULL for a version that does not exist
 * (any more).
 */
extern ShardManifest **shard_manifests_read_versions(RolloutStore *store,
													 List *shards,
													 const int64 *versions);

/*
 * The newest manifest of this cluster's shard, to change and commit: ERROR
 * (before anything is written) when a promoted standby took the shard over
 * (rollout_check_not_superseded).
 */
extern ShardManifest *shard_manifest_read_for_update(RolloutStore *store);

/* Read one version; NULL when it does not exist (any more). */
extern ShardManifest *shard_manifest_read_version(RolloutStore *store,
												  const char *shard,
												  int64 version);
extern BaseManifest *base_manifest_read_version(RolloutStore *store, int64 version);

/* Key of one manifest version under a _manifest/ prefix. */
extern char *manifest_key(const char *prefix, int64 version);

/* Commit manifest->version + 1; on success manifest->version is bumped. */
extern ManifestCommitResult shard_manifest_commit(RolloutStore *store,
												  ShardManifest *manifest);
extern ManifestCommitResult base_manifest_commit(RolloutStore *store,
												 BaseManifest *manifest);

/*
 * How many fragments (FragmentEntry *), the outputs of one compaction (a
 * disjoint set) counted as one: what compaction's min_fragments compares
 * with.
 */
extern int	fragment_run_count(List *fragments);

/* Is a fragment with this file name in fragments (FragmentEntry *)? */
extern bool fragment_entry_listed(List *fragments, const char *file);

/* The generation of a shard already folded into the base (0: none). */
extern int64 base_manifest_merged_generation(const BaseManifest *base,
											 const char *shard);

#endif							/* ROLLOUT_MANIFEST_H */
