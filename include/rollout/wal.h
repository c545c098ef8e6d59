/*-------------------------------------------------------------------------
 *
 * wal.h
 *		A shard's write-ahead log on the object store.
 *
 * Each WAL entry is a segment at shards/<shard>/wal/<position>.wal holding one
 * or more committed transactions' rows.  Positions have no holes and are
 * never reused (DESIGN.md §6.2): a writer creates position p+1 only once p
 * exists (or p is the shard manifest's replay_after), with create-if-absent;
 * "already exists" under the same epoch means another committer of this
 * shard was first, and the writer moves on to the next position.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_WAL_H
#define ROLLOUT_WAL_H

#include "rollout/store.h"

/*
 * A segment staged under ingest/ by a large transaction; the WAL entry that
 * names it is its commit (DESIGN.md §6.3).
 */
typedef struct WalIngestRef
{
	char	   *file;			/* object key */
	int64		rows;
	TimestampTz staged_at;		/* when its upload began (0: not staged by
								 * this backend); never stored */
} WalIngestRef;

/* What a WAL entry's footer metadata says about it. */
typedef struct WalEntryMetadata
{
	char	   *kind;			/* "wal", or "fence" for a fence marker */
	char	   *shard;
	int64		epoch;
	int64		stamp;			/* the writer's stamp, before the running max */
	char	   *put_id;
	int64		transactions;
	List	   *ingest;			/* WalIngestRef * */

	/*
	 * The entry holds a TRUNCATE: it hides every version of the store with a
	 * _ts below the entry's effective stamp (the truncate cut), on every
	 * shard; its own rows (stamped with that stamp) stay.
	 */
	bool		truncate;
} WalEntryMetadata;

/*
 * Refuse a commit whose ingest segments were staged longer ago than half the
 * minimum gc grace: garbage collection takes a segment that no WAL entry
 * names for an orphan once it is older than its grace, so a commit that waited
 * that long (for memtable room, or for the WAL) could name a segment that is
 * gone, acknowledged and never readable (grace.h).  A retryable ERROR.
 */
extern void wal_check_ingest_fresh(RolloutStore *store, List *ingest);

/* Define rollout_fdw.max_wal_append_attempts (from _PG_init). */
extern void wal_define_settings(void);

/* What wal_put_entry found. */
typedef enum WalPutResult
{
	WAL_PUT_CREATED,			/* the entry is ours */
	WAL_PUT_TAKEN,				/* an entry of this or an older epoch is there */
	WAL_PUT_FENCED				/* an entry of a newer epoch is there */
} WalPutResult;

/*
 * A WAL entry's segment, encoded and ready for its PUT (wal_write_entry):
 * in memory when its rows are few, else in a local scratch file.  Initialize
 * with wal_entry_image_init; wal_entry_image_discard removes the scratch file
 * (if one was written) and frees the memory, on every path out.
 */
typedef struct WalEntryImage
{
	bool		in_memory;		/* the entry is in bytes, else in spill_path */
	StringInfoData bytes;
	char	   *spill_path;		/* NULL until a large entry needs it */
} WalEntryImage;

extern void wal_entry_image_init(WalEntryImage *image);
extern void wal_entry_image_discard(WalEntryImage *image);

/*
 * Create the WAL entry image at position with put_id; when the position is
 * taken, *owner_epoch (may be NULL) is the epoch of the entry there.  An
 * object there that is not a WAL entry of this shard is an ERROR;
 * *reading_owner (may be NULL) is set just before the object there is read,
 * so that a caller catching an error can tell a verdict on that object from
 * a failed create.  Interrupts are held during the create.
 */
extern WalPutResult wal_put_entry(RolloutStore *store, int64 position,
								  const WalEntryImage *image,
								  const char *put_id, int64 epoch,
								  int64 *owner_epoch,
								  volatile bool *reading_owner);

/*
 * The same for an entry that carries a commit's rows: a create that failed
 * after the store may have carried it out (no answer to a request sent, or
 * a 5xx) is raised with SQLSTATE transaction_resolution_unknown, the
 * store's message kept: the entry may exist, or appear later, and the
 * caller must not report it as not written.
 */
extern WalPutResult wal_put_rows_entry(RolloutStore *store, int64 position,
									   const WalEntryImage *image,
									   const char *put_id, int64 epoch,
									   int64 *owner_epoch);

/* A WAL entry found by listing. */
typedef struct WalEntryRef
{
	int64		position;
	char	   *key;
	int64		size;
} WalEntryRef;

/*
 * Make rows durable as this shard's next WAL entry, written by this backend
 * (the path without the shared-memory writer): the blobs' rows (row_blob.h),
 * plus the ingest segments metadata names.  metadata->epoch is set to the
 * shard's current epoch.  Returns the position it landed at, or, nothing
 * written, WAL_APPEND_CLAIM_FIRST when this cluster was promoted since the
 * shard's last claim and must claim it first (shard_claim), or
 * WAL_APPEND_FENCE_HOLE when the WAL holds entries past a hole, which a
 * claim's fence must make dead first (a pipelined writer's unacknowledged
 * entries: docs/WRITER.md).  Raises an ERROR naming the shard when the
 * position is taken by another writer, when a promoted standby took the
 * shard over, and for store errors; nothing is ever overwritten or skipped.
 */
#define WAL_APPEND_CLAIM_FIRST	0
#define WAL_APPEND_FENCE_HOLE	(-2)
extern int64 wal_append_rows(RolloutStore *store, List *blobs,
							 WalEntryMetadata *metadata);

/*
 * Encode a WAL entry's segment into image, replacing what it held: the rows
 * of every blob (row blobs, row_blob.h, as StringInfo) stamped with
 * metadata->stamp, this shard and their ops, with metadata in the footer.
 */
extern void wal_write_entry(RolloutStore *store, List *blobs,
							const WalEntryMetadata *metadata,
							WalEntryImage *image);

/* The metadata string a WAL entry's segment is written with. */
extern char *wal_metadata_to_json(const WalEntryMetadata *metadata);

/* Parse (and check) a WAL entry's metadata; ERROR naming key if invalid. */
extern WalEntryMetadata *wal_metadata_from_json(const char *json, const char *key);

/*
 * A SegmentFooterCallback (store_sources.h) counting WAL entries' rows:
 * adds to *(int64 *) arg the rows of the entry whose reader it gets, its
 * own and those of the ingest segments it references.  An entry gone since
 * (flushed and collected) adds nothing.
 */
extern void wal_entry_count_rows(SegmentReader *reader, int index, void *arg);

/*
 * The same for the WAL entries a read would return rows of: arg is a
 * WalLiveRows over keys in position order per shard, whose epoch_floors[i]
 * is the first entry's running epoch start for each shard (the manifest's
 * sealed_epoch), -1 for the entries after it; dead entries (an epoch below
 * the running one, docs/WRITER.md) add nothing.
 */
typedef struct WalLiveRows
{
	int64		rows;
	const int64 *epoch_floors;
	int64		running_epoch;
} WalLiveRows;

extern void wal_entry_count_live_rows(SegmentReader *reader, int index, void *arg);

/*
 * The metadata of the WAL entry at position (object key).  Anything there
 * that is not a WAL entry of this shard is an ERROR naming the shard and
 * saying that nothing was overwritten.
 */
extern WalEntryMetadata *wal_read_metadata(RolloutStore *store, const char *key,
										   int64 position);

/*
 * The put id of the WAL entry at position of store's shard, read with the
 * handle's credentials, or NULL when there is none there (shared_store.c
 * tells by it whether a handle reaches the store a slot's writer claimed).
 */
extern char *wal_entry_put_id(RolloutStore *store, int64 position);

/* A stamp for a new entry: the wall clock, never below a previous one. */
extern int64 wal_next_stamp(void);

/* List a shard's WAL entries with position > after, ascending. */
extern List *wal_list_after(RolloutStore *store, const char *shard, int64 after);

/*
 * Of a list from wal_list_after(after), the longest prefix of consecutive
 * positions after+1, after+2, ...: what a flush may seal.
 */
extern List *wal_contiguous_prefix(List *entries, int64 after);

#endif							/* ROLLOUT_WAL_H */
