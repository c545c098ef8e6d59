/*-------------------------------------------------------------------------
 *
 * store.h
 *		An opened rollout store: its object store, its schema and this
 *		cluster's shard.
 *
 * The store is every layer's handle on "<location>/<store>/"; this header
 * only says what one is, as PostgreSQL's rel.h says what a relation is.
 * Opening one (store_definition.h) creates _store.json once
 * (create-if-absent) and otherwise checks the caller's columns against it,
 * so that every upper layer can trust that the segments it reads and
 * writes have the schema it expects.
 *
 * The lower layers know nothing of relations: the fdw layer describes the
 * foreign table with a RolloutStoreSpec.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_STORE_H
#define ROLLOUT_STORE_H

#include "access/tupdesc.h"

#include "rollout/objstore.h"
#include "rollout/portable_values.h"
#include "rollout/segment.h"

/*
 * The format version of _store.json a new store gets.  Version 2 records
 * each column's encoding (image or text, portable_values.h); a version-1
 * store has images only and is read as before, unless one of its columns
 * is of a type version 2 encodes as text (docs/FORMAT.md).
 */
#define ROLLOUT_STORE_FORMAT_VERSION		2
#define ROLLOUT_STORE_OLDEST_FORMAT_VERSION	1

/*
 * Hidden columns, appended after the user columns in every segment:
 *	_ts		int8	commit stamp in microseconds (non-decreasing along a
 *					shard's WAL positions; see wal.c)
 *	_shard	int8	a hash of the writing shard's id: the tie-break between
 *					shards whose stamps are equal
 *	_op		int2	ROLLOUT_OP_INSERT, or ROLLOUT_OP_DELETE for a tombstone
 */
#define ROLLOUT_HIDDEN_COLUMNS	3
#define ROLLOUT_OP_INSERT		0
#define ROLLOUT_OP_DELETE		1

/*
 * Not a row operation: marks a TRUNCATE in a transaction's buffered row
 * stream (fdw/xact_buffer.c).  It never reaches a segment; the commit turns
 * it into its WAL entry's truncate flag.
 */
#define ROLLOUT_OP_TRUNCATE		2

/* A user column as the foreign table declares it. */
typedef struct RolloutColumnSpec
{
	char	   *name;
	Oid			typid;
	int32		typmod;
} RolloutColumnSpec;

/* What the fdw layer knows about a foreign table. */
typedef struct RolloutStoreSpec
{
	char	   *location;		/* NULL: the embedded default */
	List	   *location_options;	/* DefElem list for the backend */

	/*
	 * May a remote backend fall back to the server's environment credentials
	 * when location_options carry none?  The fdw layer decides (only for
	 * superusers' tables and servers).
	 */
	bool		allow_environment_credentials;

	/*
	 * Is the store's content as trusted as the server's own files?  Only then
	 * are the values of its built-in types read without checking their inside
	 * (unless rollout_fdw.check_trusted_images), and images of types that
	 * cannot be checked (kept so by earlier builds: portable_values.h) read
	 * at all.  The fdw layer decides (rollout_server_is_trusted): local
	 * stores, whose objects are server files, and those of servers a
	 * superuser owns and marked trusted.
	 */
	bool		trusted;
	char	   *store_name;
	char	   *key_column;
	int			ncolumns;
	RolloutColumnSpec *columns; /* in the table's attribute order */
} RolloutStoreSpec;

typedef struct RolloutStore
{
	ObjectStore *objstore;
	char	   *location;		/* effective location, for messages */

	/*
	 * What objstore was opened with (RolloutStoreSpec), so that a claim can
	 * leave them in its slot, where they confirm that other credentials write
	 * the same store (core/write_proof.c).  Holds secrets: never shown.
	 */
	List	   *access_options;
	bool		access_environment;
	bool		location_is_default;	/* the embedded default (no location) */
	char	   *name;			/* store name */

	/*
	 * The segment schema: the table's columns in the order _store.json fixed
	 * when the store was created, then the hidden columns.
	 */
	SegmentSchema schema;
	int			user_column_count;
	TupleDesc	row_desc;		/* the user columns as stored, for row blobs */

	/*
	 * Per user column (store order): how its values are stored.  A
	 * text-encoded column is a text column in every segment, WAL entry and
	 * row blob; writers encode into it, and a scan decodes it back.
	 */
	PortableCodec *codecs;
	bool		has_text_columns;
	int			format_version; /* of _store.json */
	int			key_column;		/* == schema.key_column */
	int			ts_column;
	int			shard_column;
	int			op_column;

	/* _store.json to create at the first write; NULL once it exists */
	char	   *pending_definition;

	/* which creation of the store this is (_store.json "incarnation") */
	char	   *incarnation;
	TimestampTz incarnation_checked_at; /* last read of it */
	bool		stale;			/* the store was deleted since: reopen */
	char	   *incarnation_mismatched; /* of the last token found another's */

	/*
	 * The encoding of the database that created the store (_store.json
	 * "database_encoding"), in which its text is; NULL for a store made
	 * before that was recorded.
	 */
	char	   *database_encoding;

	/*
	 * Digests of this handle's view of the store's columns, the same in every
	 * database that sees them alike.  schema_digest: names, the base types of
	 * their stored form and their storage layout; rows in shared memory
	 * (commit requests, memtable batches) are only ever decoded by a handle
	 * with the digest they were written with.  read_digest also says which
	 * columns' values are checked when read (image_check.h): whatever is kept
	 * of decoded objects (footers, manifests) is only reused by a handle with
	 * the same.  A table whose column types are not the ones the rows were
	 * written with (a relabelled _store.json, a domain dropped and made again
	 * over another type) may otherwise decode them with the wrong types, or
	 * unchecked.
	 */
	uint64		schema_digest;
	uint64		read_digest;

	/*
	 * rollout_fdw.check_trusted_images when the columns were set up: a handle
	 * opened under the other value is reopened (fdw/store_cache.c), so that
	 * the setting holds from a session's next statement.
	 */
	bool		checks_trusted_images;

	/* This cluster's shard. */
	char	   *shard;			/* shard id text */
	int64		shard_hash;		/* value of the _shard column */
	bool		shard_registered;	/* _shards/<shard> known to exist */

	/* Hints that save listings; only ever hints (see manifest.c). */
	int64		base_manifest_hint;
	int64		shard_manifest_hint;	/* of this cluster's shard */
	int64		wal_tip_hint;	/* highest WAL position known to exist and to
								 * be an entry of this shard */

	/*
	 * the shared-memory slot of this shard (shared_store.c), or NULL, and its
	 * namespace_generation when this handle was found to belong to it
	 */
	struct SharedStoreSlot *shared_slot;
	uint64		shared_slot_generation;
	bool		shared_slot_claimed;	/* seen claimed in that generation */
	bool		shared_slot_writes; /* found to write its store, not only to
									 * read it (shared_store.c) */

	MemoryContext context;		/* everything above lives here */
} RolloutStore;

/*
 * A callback producing rows one by one, values in the store's user-column
 * order (the table's values, before any column encoding), followed by the
 * row's operation at values[user_column_count] (Int16: ROLLOUT_OP_INSERT, or
 * ROLLOUT_OP_DELETE for a tombstone, whose values other than the key are
 * null); false at the end.  Rows come in commit order: a later row of the
 * same key is the newer version.
 */
typedef bool (*StoreRowReader) (void *arg, Datum *values, bool *isnull);

#endif							/* ROLLOUT_STORE_H */
