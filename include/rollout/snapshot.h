/*-------------------------------------------------------------------------
 *
 * snapshot.h
 *		The set of objects one read sees (DESIGN.md §5).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SNAPSHOT_H
#define ROLLOUT_SNAPSHOT_H

#include "lib/stringinfo.h"

#include "rollout/store.h"

typedef enum SnapshotSourceKind
{
	SNAPSHOT_FRAGMENT,
	SNAPSHOT_GENERATION,
	SNAPSHOT_WAL_ENTRY,
	SNAPSHOT_INGEST,			/* a large transaction's staged segment */
	SNAPSHOT_MEMTABLE,			/* rows of a WAL entry held in shared memory */

	/*
	 * The reading transaction's own rows, not committed yet: the newest
	 * versions of all (stamp_fixed is PG_INT64_MAX).  In memory as a row
	 * blob, or, for a buffer that spilled to disk, a sorted segment in a
	 * local scratch file (key is its path).
	 */
	SNAPSHOT_TRANSACTION,
	SNAPSHOT_TRANSACTION_SEGMENT
} SnapshotSourceKind;

/* One object a snapshot reads: everything but the WAL is sorted by key. */
typedef struct SnapshotSource
{
	SnapshotSourceKind kind;
	char	   *key;			/* object key */
	char	   *shard;			/* NULL for fragments */
	int64		shard_hash;
	int64		position;		/* WAL: its position; generation: its last */
	int64		rows;			/* -1 when unknown (WAL entries) */
	int64		bytes;			/* object size (manifest, listing); -1 unknown */
	bool		has_key_range;	/* from the manifest */
	Datum		min_key;
	Datum		max_key;

	/*
	 * WAL entries only: the effective stamp of the position before this one
	 * when that one is not itself in the snapshot (the manifest's
	 * last_stamp), else -1.  Readers apply the running maximum from here.
	 */
	int64		stamp_floor;

	/*
	 * WAL entries only, set on the first entry of each shard's run: the epoch
	 * its readers' running epoch starts from (the manifest's sealed_epoch; 0
	 * when every entry is known to be live), else -1.  An entry written under
	 * an epoch below the running one is dead and read as empty
	 * (docs/WRITER.md, "Pipelined WAL writes").
	 */
	int64		epoch_floor;

	/*
	 * When >= 0, every row's _ts is this stamp (ingest segments and adopted
	 * generations carry the effective stamp of the WAL entry that committed
	 * them; memtable batches theirs).
	 */
	int64		stamp_fixed;

	/*
	 * Fragments and generations: the newest _ts among their rows, from the
	 * manifest (0: unknown).  A source entirely below the snapshot's truncate
	 * cut is not opened at all.
	 */
	int64		max_ts;

	/*
	 * Fragments and generations: the oldest _ts among their rows, from the
	 * manifest (0: unknown).  The change feed leaves a source whose oldest
	 * version comes after what a poll can return for a later poll.
	 */
	int64		min_ts;

	/* Fragments: the manifest's disjoint_set (manifest.h), or NULL */
	char	   *disjoint_set;

	/* SNAPSHOT_MEMTABLE, _TRANSACTION: the rows as a row blob (row_blob.h) */
	const char *rows_data;
	int64		rows_len;
} SnapshotSource;

/* An ingest segment a WAL entry referenced, with that entry's stamp. */
typedef struct IngestSeen
{
	char	   *file;
	int64		rows;
	int64		position;		/* of the WAL entry */
	int64		stamp;			/* its effective stamp */
} IngestSeen;

typedef struct RolloutSnapshot
{
	List	   *sources;		/* fragments, generations, then WAL entries
								 * grouped by shard in position order */
	int64		base_version;
	int			fragment_count;
	int			generation_count;
	int			wal_entry_count;	/* the memtable's sources included */
	int			wal_object_count;	/* of those, WAL entries read from the
									 * store */
	int			shard_count;

	/*
	 * The truncate cut known when the snapshot was taken (0: none): the
	 * newest of the shard manifests' and of the memtable's; PG_INT64_MAX in a
	 * transaction that truncated the table itself.  A read drops every key
	 * whose newest version is older; WAL entries it reads add their own cuts
	 * (merge_read.h).
	 */
	int64		truncate_stamp;

	/*
	 * Were the manifest versions this cluster's shared view of them
	 * (core/manifest_view.c) rather than listed in the store?  For EXPLAIN.
	 */
	bool		manifests_from_view;

	/*
	 * Where this cluster's own shard's WAL tail came from, for EXPLAIN: its
	 * "memtable", the "shared view" (known empty, manifest_view.h), or
	 * "listed" from the store; NULL when the shard has no manifest yet.
	 */
	const char *own_wal_tail;
} RolloutSnapshot;

/*
 * A new source of the given kind, with no stamp floor, no fixed stamp and
 * unknown size.
 */
extern SnapshotSource *snapshot_source_new(SnapshotSourceKind kind);

/*
 * A snapshot flattened into bytes and back (core/snapshot_serial.c), so that
 * a parallel scan's workers read exactly the leader's snapshot.  key_len and
 * key_byval describe the key type of min_key and max_key.  Rows held in
 * memory (memtable batches, the transaction's own rows) are copied into the
 * bytes, and a restored snapshot points into them: data must be MAXALIGNed
 * and outlive the snapshot.
 */
extern void snapshot_serialize(const RolloutSnapshot *snapshot, int16 key_len,
							   bool key_byval, StringInfo out);
extern RolloutSnapshot *snapshot_restore(const char *data, int16 key_len,
										 bool key_byval);

/*
 * Key values flattened the same way (count of them, then padding to a
 * MAXALIGNed length), for what travels beside a snapshot.  The restored
 * array and its by-reference values are palloc'd copies.
 */
extern void snapshot_serialize_keys(const Datum *keys, int count,
									int16 key_len, bool key_byval,
									StringInfo out);
extern Datum *snapshot_restore_keys(const char **cursor, int count);

#endif							/* ROLLOUT_SNAPSHOT_H */
