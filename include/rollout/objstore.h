/*-------------------------------------------------------------------------
 *
 * objstore.h
 *		The object-store interface: the only way the upper layers touch
 *		storage.
 *
 * A location ("file:///abs/dir", later "s3://bucket/prefix" and
 * "az://account/container/prefix") is opened into an ObjectStore.  Every
 * backend implements the same small set of operations, chosen so that the
 * LSM protocols (DESIGN.md §3, §6.2) can be built on any of them:
 *
 *	- create-if-absent: the only write.  Objects are written once and never
 *	  overwritten; "already exists" is an ordinary result, not an error, because
 *	  the commit protocols decide races with it.
 *	- get, whole or a byte range, and the tail of an object (for footers);
 *	- list by prefix in lexicographic key order, paginated;
 *	- delete.
 *
 * Errors.  Operations raise a PostgreSQL ERROR for real failures (I/O error,
 * permission, unreachable store), naming the operation and the object key and
 * never any credential.  "Not found" (get, delete) and "already exists"
 * (create) are returned, not raised.
 *
 * Ambiguous outcomes.  A remote backend may not know whether a create
 * landed (a timeout after the request was sent).  Callers therefore pass a
 * put id, unique per logical write; the backend stores it with the object and,
 * when an outcome is ambiguous, retries the same create-if-absent: "already
 * exists" carrying our put id means the first attempt landed, and is reported
 * as OBJSTORE_CREATED.  A backend never reports CREATED for a write that did
 * not land, nor ALREADY_EXISTS for one that did.  The local-directory backend
 * has no ambiguity (the syscalls either complete or fail) but keeps the put id
 * in the same way so that callers can always ask who wrote an object.
 *
 * Keys are relative to the location root and use '/' as separator, e.g.
 * "mystore/shards/42/wal/00000000000000000001.wal".  All returned memory is
 * palloc'd in CurrentMemoryContext.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_OBJSTORE_H
#define ROLLOUT_OBJSTORE_H

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

typedef struct ObjectStore ObjectStore;

/* Result of a create-if-absent. */
typedef enum ObjectStoreCreateResult
{
	OBJSTORE_CREATED,			/* the object is ours (possibly after a retry) */
	OBJSTORE_ALREADY_EXISTS		/* someone else's object holds the key */
} ObjectStoreCreateResult;

/* One entry of a listing. */
typedef struct ObjectStoreEntry
{
	char	   *key;			/* full key, relative to the location root */
	int64		size;			/* bytes */
	TimestampTz modified;		/* last modification (creation) time */
} ObjectStoreEntry;

/* One page of a listing. */
typedef struct ObjectStoreListing
{
	ObjectStoreEntry *entries;	/* sorted by key, strictly ascending */
	int			count;
	/* opaque token for the next page, or NULL when this was the last page */
	char	   *continuation;
} ObjectStoreListing;

/*
 * One read of a batch (objstore_get_many): a byte range of an object, or its
 * tail, with the same meaning as objstore_get_range and objstore_get_tail.
 * The caller fills in the request; the batch fills in the result.
 */
typedef struct ObjectStoreRead
{
	const char *key;
	int64		offset;			/* first byte; ignored by a tail read */
	int64		length;			/* bytes; < 0: to the end (a tail: all) */
	bool		tail;			/* the last length bytes instead */

	/*
	 * The object's size when the caller knows it (from a listing or a
	 * manifest), else -1.  Only an optimisation: a backend without suffix
	 * ranges (Azure) then needs no request to learn it; a wrong hint costs a
	 * request, never a wrong result.
	 */
	int64		size_hint;

	/*
	 * The caller knows that the object's name is never used again for other
	 * bytes (base fragments, ingest segments): a backend may keep it open
	 * between reads, and a read may then succeed after the object was
	 * deleted, returning the bytes it had.
	 */
	bool		immutable;
	StringInfo	out;			/* receives the bytes (appended); one per read
								 * of a batch, since each answer is checked
								 * against what its read asked for */

	/* results */
	bool		found;			/* false: the object does not exist */
	int64		object_size;	/* its total size, when found */
	int64		answer_first;	/* the byte of the object the answer began
								 * with, if the server said (a remote store's
								 * Content-Range), else -1 */
} ObjectStoreRead;

/*
 * The operations every backend implements.  A backend fills one of these in
 * (file_store.c, later s3_store.c and azure_store.c); objstore.c dispatches.
 */
typedef struct ObjectStoreOps
{
	/* Create key with the given bytes unless it exists. */
	ObjectStoreCreateResult (*create_if_absent) (ObjectStore *store,
												 const char *key,
												 const char *data, size_t len,
												 const char *put_id);

	/*
	 * Create key with the contents of a local file unless it exists.  The
	 * local file is left in place (the caller removes it).
	 */
	ObjectStoreCreateResult (*create_from_file_if_absent) (ObjectStore *store,
														   const char *key,
														   const char *local_path,
														   const char *put_id);

	/*
	 * Read length bytes at offset into *out (appended).  length < 0 means "to
	 * the end".  A range past the end is truncated to the object.  Returns
	 * false when the object does not exist.  If object_size is not NULL it
	 * receives the object's total size.  May be NULL when get_many is not:
	 * objstore.c then reads with a batch of one.
	 */
	bool		(*get_range) (ObjectStore *store, const char *key,
							  int64 offset, int64 length, bool immutable,
							  StringInfo out, int64 *object_size);

	/*
	 * Read the last length bytes (or the whole object, if smaller) into *out.
	 * Returns false when the object does not exist; *object_size receives the
	 * object's total size.  May be NULL when get_many is not, as get_range.
	 */
	bool		(*get_tail) (ObjectStore *store, const char *key,
							 int64 length, bool immutable, StringInfo out,
							 int64 *object_size);

	/*
	 * Return the put id stored with key, or NULL if the object has none.
	 * Returns false when the object does not exist.
	 */
	bool		(*get_put_id) (ObjectStore *store, const char *key,
							   char **put_id);

	/*
	 * List keys that start with prefix and sort strictly after start_after
	 * (NULL: from the start), at most max_keys of them, continuing from a
	 * previous page's continuation token when it is not NULL.
	 */
	ObjectStoreListing *(*list) (ObjectStore *store, const char *prefix,
								 const char *start_after, int max_keys,
								 const char *continuation);

	/*
	 * Does a listing with start_after begin there (S3's start-after, a
	 * directory walk that skips what sorts before it), or does the backend
	 * list from the start of the prefix and drop what it is sent before it
	 * (Azure, whose markers are opaque)?  Callers that skip ahead by
	 * start_after repeatedly need to know which costs what.
	 */
	bool		list_starts_after;

	/* Delete key.  Returns false when it did not exist. */
	bool		(*delete_object) (ObjectStore *store, const char *key);

	/*
	 * Delete count keys with at most max_in_flight requests in flight at
	 * once; deleted[i] is what delete_object would have returned for keys[i].
	 * An ERROR of any deletion is raised for the batch (the others may or may
	 * not have happened).  May be NULL: objstore.c then deletes one key after
	 * the other.
	 */
	void		(*delete_many) (ObjectStore *store, const char *const *keys,
								int count, bool *deleted, int max_in_flight);

	/*
	 * Perform nreads reads with at most max_in_flight requests in flight at
	 * once, each with the result get_range or get_tail would give.  An ERROR
	 * of any read is raised for the batch.  May be NULL: objstore.c then
	 * performs the reads one after the other.
	 */
	void		(*get_many) (ObjectStore *store, ObjectStoreRead *reads,
							 int nreads, int max_in_flight);

	/*
	 * Remove what writes left behind outside the key space when the process
	 * writing them died (the file backend's temporary files under _tmp/), if
	 * last modified before older_than.  Returns how many were removed and
	 * adds their bytes to *bytes.  May be NULL: a backend whose interrupted
	 * uploads leave nothing behind, or whose service expires them (S3 single
	 * PUTs; Azure's uncommitted blocks, dropped by the service after a week).
	 */
	int64		(*remove_abandoned_uploads) (ObjectStore *store,
											 TimestampTz older_than,
											 int64 *bytes);

	/* Release backend resources (connections, handles).  May be NULL. */
	void		(*close) (ObjectStore *store);
} ObjectStoreOps;

/* Hex SHA-256: 64 digits and a NUL. */
#define OBJSTORE_FINGERPRINT_LEN	65

struct ObjectStore
{
	const ObjectStoreOps *ops;
	char	   *location;		/* the location as given, for messages */
	char	   *scheme;			/* "file", "s3", "az" */
	void	   *backend;		/* the backend's private state */

	/*
	 * Where the objects really are: the canonical directory, or the endpoint,
	 * bucket (account, container) and prefix.  Two servers with the same
	 * location string but different endpoints are different stores; two
	 * spellings of one directory are the same.  No secret.
	 */
	char	   *identity;

	/*
	 * A SHA-256 over the identity and the credentials the store was opened
	 * with (hex).  Processes that share state about a store (the group commit
	 * queue and memtable, group_commit.c and memtable.c) compare it, so that
	 * no backend reads or writes through another's credentials.  A hash,
	 * never the credentials themselves.
	 */
	char		access_fingerprint[OBJSTORE_FINGERPRINT_LEN];
};

/*
 * Open a location.  options is a List of DefElem (server and user-mapping
 * options that the backend may need: credentials, endpoint...).  A NULL or
 * empty location means the embedded default: a folder "rollout_fdw" under
 * the data directory.  Raises an ERROR for a malformed location.
 *
 * Credentials come from options.  Only when allow_environment_credentials
 * is true may a remote backend fall back to the server process's own
 * environment (AWS_*, AZURE_STORAGE_*): those are the server's credentials,
 * and the caller decides who may borrow them (see fdw/options.c).
 */
extern ObjectStore *objstore_open(const char *location, List *options,
								  bool allow_environment_credentials);

/* Is location (NULL or "" meaning the default) on this machine's disks? */
extern bool objstore_location_is_local(const char *location);

/* Is location the embedded default (a folder of the data directory)? */
extern bool objstore_location_is_default(const char *location);

/* The effective location string for the embedded default. */
extern char *objstore_default_location(void);

/*
 * Check a location string without opening it (used by the option
 * validator).  Returns NULL when valid, otherwise a palloc'd message.
 */
extern char *objstore_check_location(const char *location);

/* ERROR unless endpoint is a valid "endpoint" option (S3 and Azure). */
extern void objstore_check_endpoint(const char *endpoint);

/*
 * ERROR unless value (of credential option name) is free of line breaks
 * and other control characters; the message never shows the value.
 */
extern void objstore_check_credential(const char *name, const char *value);

/*
 * A server's words (an error code or message from its answer) fit for an
 * error message: printable ASCII only, at most max_length bytes, palloc'd.
 */
extern char *objstore_server_text(const char *text, int max_length);

extern void objstore_close(ObjectStore *store);

/* Thin wrappers over the ops, so callers read naturally. */
extern ObjectStoreCreateResult objstore_create_if_absent(ObjectStore *store,
														 const char *key,
														 const char *data,
														 size_t len,
														 const char *put_id);
extern ObjectStoreCreateResult objstore_create_from_file_if_absent(ObjectStore *store,
																   const char *key,
																   const char *local_path,
																   const char *put_id);
extern bool objstore_get(ObjectStore *store, const char *key, StringInfo out);
extern bool objstore_get_range(ObjectStore *store, const char *key,
							   int64 offset, int64 length,
							   StringInfo out, int64 *object_size);
extern bool objstore_get_tail(ObjectStore *store, const char *key,
							  int64 length, StringInfo out, int64 *object_size);
extern bool objstore_get_put_id(ObjectStore *store, const char *key,
								char **put_id);

/*
 * Perform a batch of reads, at most rollout_fdw.max_concurrent_requests
 * requests in flight at once (the backend's native batch; one after the
 * other for backends without one, or when the setting is 1).  Each read's
 * result is what objstore_get_range or objstore_get_tail would have given
 * it; an object that does not exist is a result (found = false), not an
 * error.  Interrupts are serviced while the batch waits.
 */
/* One read as a batch member describes it (its results filled in). */
extern void objstore_read(ObjectStore *store, ObjectStoreRead *read);
extern void objstore_get_many(ObjectStore *store, ObjectStoreRead *reads,
							  int nreads);

/* rollout_fdw.max_concurrent_requests: the width of objstore_get_many. */
extern int	objstore_max_concurrent_requests;

/* Define rollout_fdw.max_concurrent_requests (from _PG_init). */
extern void objstore_define_settings(void);

#define OBJSTORE_DEFAULT_CONCURRENT_REQUESTS	16
#define OBJSTORE_MAX_CONCURRENT_REQUESTS		256

/*
 * Requests this process has sent to remote stores and the sequential round
 * trips they amounted to (a batch of n requests run w at a time is
 * ceil(n / w) rounds), for EXPLAIN ANALYZE.  Only ever grows; callers take
 * differences.  Local (file://) stores send none.
 */
typedef struct ObjectStoreCounters
{
	int64		requests;
	int64		rounds;
	int64		retries;		/* of the requests, attempts after the first */
	int64		maybe_applied;	/* failed attempts of writes the server may
								 * have carried out all the same (no answer
								 * after the request was sent, or a 5xx; on a
								 * local store, a failure after the write) */
} ObjectStoreCounters;

extern void objstore_get_counters(ObjectStoreCounters *counters);
extern ObjectStoreListing *objstore_list_page(ObjectStore *store,
											  const char *prefix,
											  const char *start_after,
											  int max_keys,
											  const char *continuation);

/*
 * List every key under prefix after start_after, following continuation
 * tokens; returns a List of ObjectStoreEntry *, sorted.  Checks for
 * interrupts between pages.
 */
extern List *objstore_list_all(ObjectStore *store, const char *prefix,
							   const char *start_after);

/*
 * The page size to ask a listing for: remote backends clamp it to what their
 * service allows (1,000 keys for S3, 5,000 for Azure); the file backend walks its
 * directories once per page, so large pages keep big listings cheap there.
 */
#define OBJSTORE_LIST_PAGE_SIZE 10000

/*
 * The same listing a page at a time, for a caller that acts on each page
 * before it asks for the next one and may stop early (gc of a long WAL):
 * objstore_list_begin, then objstore_list_next until it returns NULL, pages
 * of at most page_size keys (fewer where a service's pages are smaller).  The
 * pages are checked as objstore_list_all checks them.  A page may be freed
 * once the next one is asked for; the scan keeps what it needs in the
 * memory context that was current at objstore_list_begin.
 */
typedef struct ObjectStoreListScan
{
	ObjectStore *store;
	const char *prefix;
	const char *start_after;
	int			page_size;
	char	   *continuation;	/* of the next page; NULL before the first */
	char	   *last_key;		/* the last key returned, for the order */
	bool		done;
	MemoryContext context;		/* holds continuation and last_key */
} ObjectStoreListScan;

extern void objstore_list_begin(ObjectStoreListScan *scan, ObjectStore *store,
								const char *prefix, const char *start_after,
								int page_size);
extern ObjectStoreListing *objstore_list_next(ObjectStoreListScan *scan);
extern bool objstore_delete(ObjectStore *store, const char *key);

/*
 * Delete a batch of keys, at most rollout_fdw.max_concurrent_requests
 * requests in flight at once (one after the other for backends without a
 * batch, or when the setting is 1); deleted[i] is what objstore_delete would
 * have returned for keys[i].  Garbage collection deletes this way: with one
 * request after the other, a store 20 ms away took longer to collect a busy
 * hour's WAL entries than the hour.
 */
extern void objstore_delete_many(ObjectStore *store, const char *const *keys,
								 int count, bool *deleted);

/*
 * Remove leftovers of uploads interrupted by a crash that are older than
 * older_than (see ObjectStoreOps.remove_abandoned_uploads); returns how
 * many, and adds their bytes to *bytes.  0 for backends that leave none.
 */
extern int64 objstore_remove_abandoned_uploads(ObjectStore *store,
											   TimestampTz older_than,
											   int64 *bytes);

/* A fresh put id (a random UUID in text form). */
extern char *objstore_new_put_id(void);

#endif							/* ROLLOUT_OBJSTORE_H */
