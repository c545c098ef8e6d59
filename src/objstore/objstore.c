/*-------------------------------------------------------------------------
 *
 * objstore.c
 *		Location parsing and dispatch for the object-store interface.
 *
 * This file turns a location string into an ObjectStore whose ops belong to
 * one backend, checks location strings for the option validator, and wraps
 * the backend operations in functions that read naturally at the call sites
 * (objstore_get, objstore_list_all, objstore_get_many...).  It knows nothing
 * of the LSM layers above it, and nothing of how a backend stores its bytes:
 * see the backend files and docs/OBJSTORE.md for the contract.
 *
 * Locations understood by this build:
 *
 *	file:///abs/dir		a local (or locally mounted) directory (file_store.c)
 *	(empty)				the embedded default, <DataDir>/rollout_fdw
 *	s3://bucket/prefix	S3 and S3-compatible stores (s3_store.c)
 *	az://account/container/prefix	Azure Blob Storage (azure_store.c)
 *
 * Copyright (c) rollout_fdw authors
 *
 * IDENTIFICATION
 *		src/objstore/objstore.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "rollout/maintenance_cost.h"
#include "rollout/objstore.h"

#include "http_session.h"
#include "objstore_backend.h"

int			objstore_max_concurrent_requests = OBJSTORE_DEFAULT_CONCURRENT_REQUESTS;

StaticAssertDecl(OBJSTORE_MAX_CONCURRENT_REQUESTS <= HTTP_MAX_CONCURRENT_REQUESTS,
				 "a batch may not run more requests than the HTTP session has handles");

/* Define the object stores' settings; _PG_init calls this. */
void
objstore_define_settings(void)
{
	file_store_define_settings();
	maintenance_cost_define_settings();
	DefineCustomIntVariable("rollout_fdw.max_concurrent_requests",
							"Requests to a remote object store one backend may have in flight at once.",
							"Scans fetch segment footers and column chunks, and garbage collection deletes objects, in batches of concurrent requests. 1 makes every request wait for the previous one.",
							&objstore_max_concurrent_requests,
							OBJSTORE_DEFAULT_CONCURRENT_REQUESTS, 1,
							OBJSTORE_MAX_CONCURRENT_REQUESTS,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
}

/* The folder under the data directory that holds the embedded default. */
#define OBJSTORE_DEFAULT_FOLDER "rollout_fdw"

/* Scheme prefixes. */
#define FILE_SCHEME_PREFIX	"file://"
#define S3_SCHEME_PREFIX	"s3://"
#define AZURE_SCHEME_PREFIX "az://"


static bool path_has_dot_dot_component(const char *path);


/*
 * objstore_default_location
 *		The location string of the embedded default store.
 *
 * DataDir is absolute once the postmaster has started (it is made absolute
 * in SelectConfigFiles), so the result is a valid file:// location.
 */
char *
objstore_default_location(void)
{
	return psprintf("%s%s/%s", FILE_SCHEME_PREFIX, DataDir,
					OBJSTORE_DEFAULT_FOLDER);
}

/*
 * path_has_dot_dot_component
 *		True if some '/'-separated component of path is exactly "..".
 *
 * A substring test would wrongly reject names such as "a..b", which are
 * harmless; only a whole ".." component can climb out of a directory.
 */
static bool
path_has_dot_dot_component(const char *path)
{
	const char *component = path;

	for (;;)
	{
		const char *end = strchr(component, '/');
		size_t		component_length;

		component_length = end ? (size_t) (end - component) : strlen(component);
		if (component_length == 2 && component[0] == '.' && component[1] == '.')
			return true;
		if (end == NULL)
			return false;
		component = end + 1;
	}
}

/*
 * Whether a path has a "." or ".." part.  Paths go to the service as they
 * are (http_session.c), where such parts would name other objects than the
 * ones listed or signed for.
 */
static bool
path_has_dot_part(const char *path)
{
	for (const char *part = path; part != NULL;)
	{
		const char *end = strchr(part, '/');
		size_t		len = end ? (size_t) (end - part) : strlen(part);

		if ((len == 1 && part[0] == '.') ||
			(len == 2 && part[0] == '.' && part[1] == '.'))
			return true;
		part = end ? end + 1 : NULL;
	}
	return false;
}

/*
 * Split "first[/second]/prefix..." of an s3:// (parts = 1: bucket) or az://
 * (parts = 2: account, container) location.  Returns NULL when valid, else
 * a sentence for an errdetail.  Names follow the services' rules: S3
 * buckets 3-63 of [a-z0-9.-], Azure accounts 3-24 of [a-z0-9], containers
 * 3-63 of [a-z0-9-]; the prefix may be empty and never holds "..".
 */
static char *
parse_bucket_location(const char *rest, int parts, char **first, char **second,
					  char **prefix)
{
	const char *p = rest;

	for (int part = 0; part < parts; part++)
	{
		const char *end = strchr(p, '/');
		size_t		len = end ? (size_t) (end - p) : strlen(p);
		char	   *name = pnstrdup(p, len);
		const char *allowed;
		size_t		min_len = 3;
		size_t		max_len;

		if (parts == 1)
		{
			allowed = "abcdefghijklmnopqrstuvwxyz0123456789.-";
			max_len = 63;
		}
		else if (part == 0)
		{
			allowed = "abcdefghijklmnopqrstuvwxyz0123456789";
			max_len = 24;
		}
		else
		{
			allowed = "abcdefghijklmnopqrstuvwxyz0123456789-";
			max_len = 63;
		}
		if (len < min_len || len > max_len || strspn(name, allowed) != len)
			return psprintf(parts == 1
							? "\"%s\" is not a valid bucket name: it must be 3 to 63 lowercase letters, digits, dots and hyphens."
							: part == 0
							? "\"%s\" is not a valid storage account name: it must be 3 to 24 lowercase letters and digits."
							: "\"%s\" is not a valid container name: it must be 3 to 63 lowercase letters, digits and hyphens.",
							name);
		if (part == 0)
			*first = name;
		else
			*second = name;
		if (end == NULL)
		{
			if (part + 1 < parts)
				return pstrdup("An az:// location names an account and a container: az://account/container/prefix.");
			p += len;
			break;
		}
		p = end + 1;
	}
	*prefix = pstrdup(p);
	/* no empty components, no "..", no trailing slash needed */
	while (strlen(*prefix) > 0 && (*prefix)[strlen(*prefix) - 1] == '/')
		(*prefix)[strlen(*prefix) - 1] = '\0';
	if (strstr(*prefix, "//") != NULL || path_has_dot_part(*prefix))
		return pstrdup("The prefix must not contain empty, \".\" or \"..\" components.");
	return NULL;
}

/*
 * An endpoint is an http:// or https:// URL to which bucket, container and
 * object names are appended, nothing else.  A query string or fragment
 * would cut them off ("http://internal/admin#" sends GET /admin, whatever
 * the object), and user information or white space have no place in it
 * either: a role allowed to create a server must not aim the requests of
 * the server's backend at any path of any host it likes.
 */
void
objstore_check_endpoint(const char *endpoint)
{
	const char *problem = NULL;

	if (strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0)
		problem = "It must be an http:// or https:// URL.";
	for (const char *c = endpoint; problem == NULL && *c != '\0'; c++)
	{
		if (*c == '?' || *c == '#' || *c == '@' || *c == '\\')
			problem = psprintf("It must not contain \"%c\": an endpoint is a scheme, a host, a port and perhaps a path, to which the store's names are appended.",
							   *c);
		else if ((unsigned char) *c <= ' ' || (unsigned char) *c == 0x7f)
			problem = "It must not contain white space or control characters.";
	}
	if (problem == NULL)
	{
		const char *path = strchr(endpoint + (endpoint[4] == 's' ? 8 : 7), '/');

		if (path != NULL && path_has_dot_part(path))
			problem = "Its path must not contain \".\" or \"..\" parts.";
	}
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"endpoint\": \"%s\"", endpoint),
				 errdetail("%s", problem)));
}

/*
 * objstore_check_credential
 *		Refuse a credential with a control character.
 *
 * Credentials go into request headers (a session token) and URLs (an SAS
 * token): a line break would end the header and start another of the
 * role's choosing.  The value is a secret, so no message shows it.
 */
void
objstore_check_credential(const char *name, const char *value)
{
	for (const char *c = value; *c != '\0'; c++)
		if ((unsigned char) *c < ' ' || (unsigned char) *c == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"%s\"", name),
					 errdetail("It contains a line break or another control character.")));
}

/*
 * objstore_server_text
 *		What an object store said, fit to quote in an error.
 *
 * An endpoint may be anyone's server (a role may create a server for its
 * own), and its words reach errors and the server log, also the sweeper's.
 * Only printable ASCII is kept (every other byte becomes "?"), so that they
 * can neither break a log line nor be invalid in the database encoding,
 * and only so much of it.
 */
char *
objstore_server_text(const char *text, int max_length)
{
	int			length = Min((int) strlen(text), max_length);
	char	   *result = palloc(length + 1);

	for (int i = 0; i < length; i++)
		result[i] = (text[i] >= ' ' && text[i] <= '~') ? text[i] : '?';

	result[length] = '\0';
	return result;
}

/*
 * objstore_check_location
 *		Check a location string without opening it.
 *
 * Used by the option validator, so that CREATE SERVER fails early with a
 * clear message instead of the first INSERT failing later.  Returns NULL when
 * the location is usable by this build, otherwise a palloc'd sentence that
 * says what is wrong, for the errdetail of the caller's error.  NULL and "" are valid:
 * they mean the embedded default.
 */
char *
objstore_check_location(const char *location)
{
	if (location == NULL || location[0] == '\0')
		return NULL;

	if (strncmp(location, FILE_SCHEME_PREFIX, strlen(FILE_SCHEME_PREFIX)) == 0)
	{
		const char *path = location + strlen(FILE_SCHEME_PREFIX);
		const char *c;

		/*
		 * "file://host/dir" and "file://dir" both fail this test: only the
		 * three-slash form naming an absolute local path is accepted.
		 */
		if (path[0] != '/')
			return pstrdup("A file location must name an absolute path, as in file:///var/lib/rollout.");
		if (path_has_dot_dot_component(path))
			return pstrdup("The path must not contain \"..\" components.");
		for (c = path; *c == '/'; c++)
			;
		if (*c == '\0')
			return pstrdup("The path must name a directory other than the file system root.");
		for (c = path; *c != '\0'; c++)
		{
			if ((unsigned char) *c < 0x20 || *c == 0x7f)
				return pstrdup("The path must not contain control characters.");
		}
		if (strlen(path) >= MAXPGPATH / 2)
			return pstrdup("The path is too long.");
		return NULL;
	}

	if (strncmp(location, S3_SCHEME_PREFIX, strlen(S3_SCHEME_PREFIX)) == 0)
	{
		char	   *bucket;
		char	   *prefix;

		if (!s3_store_available())
			return pstrdup("The s3 backend is not available in this build.");
		return parse_bucket_location(location + strlen(S3_SCHEME_PREFIX), 1,
									 &bucket, NULL, &prefix);
	}

	if (strncmp(location, AZURE_SCHEME_PREFIX, strlen(AZURE_SCHEME_PREFIX)) == 0)
	{
		char	   *account;
		char	   *container;
		char	   *prefix;

		if (!azure_store_available())
			return pstrdup("The az (Azure Blob Storage) backend is not available in this build.");
		return parse_bucket_location(location + strlen(AZURE_SCHEME_PREFIX), 2,
									 &account, &container, &prefix);
	}

	return pstrdup("A location must start with file://, s3:// or az://.");
}

/*
 * objstore_location_is_default
 *		True for the embedded default (no location, or an empty one).
 */
bool
objstore_location_is_default(const char *location)
{
	return location == NULL || location[0] == '\0';
}

/*
 * objstore_location_is_local
 *		True when the stores of location live on this machine's disks: the
 *		embedded default and file:// locations.  Their objects are written
 *		and deleted as the operating-system user of the server, which is why
 *		only roles allowed to write server files may name them (fdw/options.c).
 */
bool
objstore_location_is_local(const char *location)
{
	return objstore_location_is_default(location) ||
		strncmp(location, FILE_SCHEME_PREFIX, strlen(FILE_SCHEME_PREFIX)) == 0;
}

/*
 * objstore_resolved_directory
 *		The directory path resolved through symbolic links, as far as it
 *		exists: its longest existing ancestor by realpath(3), the rest as
 *		written.
 *
 * Two spellings of one directory (a symbolic link, a path through another
 * mount point of it) must give one identity, or one cluster would run two
 * writers of one shard.  The folders a store creates later do not change
 * the result, so the identity of a location stays the same from its first
 * open on.
 */
static char *
objstore_resolved_directory(const char *path)
{
	char	   *existing = pstrdup(path);

	for (;;)
	{
		char	   *slash;
		char	   *resolved = realpath(existing, NULL);	/* malloc'd */

		if (resolved != NULL)
		{
			char	   *result = psprintf("%s%s",
										  strcmp(resolved, "/") == 0 ? "" : resolved,
										  path + strlen(existing));

			free(resolved);
			return result;
		}
		slash = strrchr(existing, '/');
		if (slash == NULL || slash == existing)
			return pstrdup(path);
		*slash = '\0';
	}
}

/*
 * objstore_set_access_fingerprint
 *		Set store->access_fingerprint to the hex SHA-256 of the identity
 *		(already set) and the credential material of the backend.
 *
 * The identity goes in first and a NUL separates the parts, so that no
 * shift of bytes between identity and credentials gives the same digest.
 */
void
objstore_set_access_fingerprint(ObjectStore *store, const char *const *parts,
								int nparts)
{
	pg_cryptohash_ctx *context = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	bool		ok;

	ok = context != NULL &&
		pg_cryptohash_init(context) == 0 &&
		pg_cryptohash_update(context, (const uint8 *) store->identity,
							 strlen(store->identity) + 1) == 0;
	for (int i = 0; ok && i < nparts; i++)
		ok = pg_cryptohash_update(context, (const uint8 *) (parts[i] ? parts[i] : ""),
								  strlen(parts[i] ? parts[i] : "") + 1) == 0;
	ok = ok && pg_cryptohash_final(context, digest, sizeof(digest)) == 0;
	pg_cryptohash_free(context);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute the access fingerprint of store \"%s\"",
						store->location)));
	for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		snprintf(store->access_fingerprint + 2 * i, 3, "%02x", digest[i]);
}

/*
 * objstore_open
 *		Open a location into an ObjectStore.
 *
 * A NULL or empty location opens the embedded default, whose directory is
 * created here (mkdir -p) so that it exists as soon as a store is opened.
 * An explicit file:// directory is not created at open: its folders appear
 * on the first write, the way a prefix comes to exist in a bucket, and a
 * missing directory simply reads as an empty store.  options (server and
 * user-mapping DefElems) are for backends that need credentials or an
 * endpoint; the file backend needs none.  allow_environment_credentials
 * lets a remote backend use the server's environment when options carry no
 * credentials (objstore.h).
 */
ObjectStore *
objstore_open(const char *location, List *options,
			  bool allow_environment_credentials)
{
	ObjectStore *store;
	char	   *message;
	bool		is_default = objstore_location_is_default(location);
	char	   *root_path;

	if (is_default)
		location = objstore_default_location();

	message = objstore_check_location(location);
	if (message != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid location \"%s\"", location),
				 errdetail("%s", message)));

	store = palloc0(sizeof(ObjectStore));
	store->location = pstrdup(location);

	if (strncmp(location, S3_SCHEME_PREFIX, strlen(S3_SCHEME_PREFIX)) == 0)
	{
		char	   *bucket;
		char	   *prefix;

		store->scheme = pstrdup("s3");
		(void) parse_bucket_location(location + strlen(S3_SCHEME_PREFIX), 1,
									 &bucket, NULL, &prefix);
		s3_store_open(store, bucket, prefix, options,
					  allow_environment_credentials);
		Assert(store->identity != NULL && store->access_fingerprint[0] != '\0');
		return store;
	}
	if (strncmp(location, AZURE_SCHEME_PREFIX, strlen(AZURE_SCHEME_PREFIX)) == 0)
	{
		char	   *account;
		char	   *container;
		char	   *prefix;

		store->scheme = pstrdup("az");
		(void) parse_bucket_location(location + strlen(AZURE_SCHEME_PREFIX), 2,
									 &account, &container, &prefix);
		azure_store_open(store, account, container, prefix, options,
						 allow_environment_credentials);
		Assert(store->identity != NULL && store->access_fingerprint[0] != '\0');
		return store;
	}

	store->scheme = pstrdup("file");

	/* Drop repeated and trailing slashes so that keys join cleanly. */
	root_path = pstrdup(location + strlen(FILE_SCHEME_PREFIX));
	canonicalize_path(root_path);

	/* a directory needs no credentials: where it really is is all there is */
	store->identity = psprintf("%s%s", FILE_SCHEME_PREFIX,
							   objstore_resolved_directory(root_path));
	objstore_set_access_fingerprint(store, NULL, 0);

	file_store_open(store, root_path, is_default && !RecoveryInProgress());

	return store;
}

/*
 * objstore_close
 *		Release a store's backend resources and the store itself.
 */
void
objstore_close(ObjectStore *store)
{
	if (store == NULL)
		return;
	if (store->ops->close != NULL)
		store->ops->close(store);
	pfree(store->location);
	pfree(store->scheme);
	pfree(store);
}

/*
 * objstore_check_writable
 *		ERROR unless this server may write to object stores.
 *
 * A hot standby shares its primary's shard id (DESIGN.md §8), so any object
 * it wrote would land in the primary's shard.  The operations above this
 * layer refuse first, naming what they were asked to do; this is the last
 * line, so that no path can write during recovery.
 */
static void
objstore_check_writable(ObjectStore *store, const char *key)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot write object \"%s\" of store \"%s\" during recovery",
						key, store->location),
				 errdetail("A standby never writes to a rollout store; its primary does.")));
}

/*
 * objstore_create_if_absent
 *		Write key with the given bytes unless it exists; see objstore.h.
 */
ObjectStoreCreateResult
objstore_create_if_absent(ObjectStore *store, const char *key,
						  const char *data, size_t len, const char *put_id)
{
	objstore_check_writable(store, key);
	return store->ops->create_if_absent(store, key, data, len, put_id);
}

/*
 * objstore_create_from_file_if_absent
 *		Write key with a local file's contents unless it exists.
 */
ObjectStoreCreateResult
objstore_create_from_file_if_absent(ObjectStore *store, const char *key,
									const char *local_path, const char *put_id)
{
	objstore_check_writable(store, key);
	return store->ops->create_from_file_if_absent(store, key, local_path,
												  put_id);
}

/*
 * A read's answer must be the bytes it asked for: read->out holds them after
 * its first "before" bytes.  HTTP lets a server answer a ranged GET with the
 * whole object, and a gateway or cache in front of a store may do so; such an
 * answer (one that names no range: answer_first < 0) is cut down to the
 * range here.  An answer of any other length, or
 * one the server says begins elsewhere, is not what was asked for (a range
 * the server got wrong, a body cut short): an ERROR, never bytes taken for
 * other bytes of the object (and kept in the disk cache as such).
 */
static void
objstore_check_answer(ObjectStore *store, const ObjectStoreRead *read,
					  int before)
{
	StringInfo	out = read->out;
	int64		size = read->object_size;
	int64		got = out->len - before;
	int64		start;
	int64		wanted;

	if (!read->found || size < 0)
		return;					/* nothing to compare with */
	if (read->tail)
	{
		wanted = read->length < 0 ? size : Min(read->length, size);
		start = size - wanted;
	}
	else
	{
		start = Min(read->offset, size);
		wanted = read->length < 0 ? size - start : Min(read->length, size - start);
	}
	if (got == wanted && (read->answer_first < 0 || wanted == 0 ||
						  read->answer_first == start))
		return;
	if (got == size && got != wanted && read->answer_first < 0)
	{
		memmove(out->data + before, out->data + before + start, wanted);
		out->len = before + (int) wanted;
		out->data[out->len] = '\0';
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("store \"%s\" answered a read of object \"%s\" with other bytes than asked for",
					store->location, read->key),
			 errdetail("The read asked for " INT64_FORMAT " bytes from byte " INT64_FORMAT " of an object of " INT64_FORMAT " bytes and got " INT64_FORMAT " bytes from byte %s.",
					   wanted, start, size, got,
					   read->answer_first >= 0 ?
					   psprintf(INT64_FORMAT, read->answer_first) : "(not said)")));
}

/*
 * One read through the backend: its get_range or get_tail, or, for a
 * backend that reads only in batches (the HTTP ones), a batch of one.
 */
static bool
objstore_read_one(ObjectStore *store, const char *key, int64 offset,
				  int64 length, bool tail, bool immutable, StringInfo out,
				  int64 *object_size)
{
	ObjectStoreRead read = {0};
	int			before = out->len;

	read.key = key;
	read.offset = offset;
	read.length = length;
	read.tail = tail;
	read.immutable = immutable;
	read.size_hint = -1;
	read.out = out;
	read.object_size = -1;
	read.answer_first = -1;
	if (tail && store->ops->get_tail != NULL)
		read.found = store->ops->get_tail(store, key, length, immutable, out,
										  &read.object_size);
	else if (!tail && store->ops->get_range != NULL)
		read.found = store->ops->get_range(store, key, offset, length,
										   immutable, out, &read.object_size);
	else
		store->ops->get_many(store, &read, 1, 1);
	objstore_check_answer(store, &read, before);
	if (read.found && object_size != NULL)
		*object_size = read.object_size;
	return read.found;
}

/*
 * objstore_get
 *		Append a whole object to *out; false if it does not exist.
 */
bool
objstore_get(ObjectStore *store, const char *key, StringInfo out)
{
	return objstore_read_one(store, key, 0, -1, false, false, out, NULL);
}

/*
 * objstore_get_range
 *		Append a byte range of an object to *out; false if it does not exist.
 */
bool
objstore_get_range(ObjectStore *store, const char *key,
				   int64 offset, int64 length,
				   StringInfo out, int64 *object_size)
{
	if (offset < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid offset " INT64_FORMAT " for object \"%s\" in store \"%s\"",
						offset, key, store->location)));
	return objstore_read_one(store, key, offset, length, false, false, out,
							 object_size);
}

/*
 * objstore_get_tail
 *		Append the last length bytes of an object (footers) to *out.
 */
bool
objstore_get_tail(ObjectStore *store, const char *key,
				  int64 length, StringInfo out, int64 *object_size)
{
	return objstore_read_one(store, key, 0, length, true, false, out,
							 object_size);
}

/*
 * objstore_get_put_id
 *		Ask who wrote an object: *put_id receives its put id, or NULL.
 */
bool
objstore_get_put_id(ObjectStore *store, const char *key, char **put_id)
{
	return store->ops->get_put_id(store, key, put_id);
}

/*
 * objstore_get_many
 *		A batch of reads, concurrent when the backend can; see objstore.h.
 *
 * With one read, a backend without a batch operation, or the setting at 1,
 * the reads are made one after the other (objstore_read_one):
 * exactly what the callers did before batches existed, so setting
 * rollout_fdw.max_concurrent_requests to 1 restores that behaviour.
 */
void
objstore_get_many(ObjectStore *store, ObjectStoreRead *reads, int nreads)
{
	for (int i = 0; i < nreads; i++)
	{
		if (!reads[i].tail && reads[i].offset < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid offset " INT64_FORMAT " for object \"%s\" in store \"%s\"",
							reads[i].offset, reads[i].key, store->location)));
		reads[i].found = false;
		reads[i].object_size = -1;
		reads[i].answer_first = -1;
	}

	if (nreads > 1 && store->ops->get_many != NULL &&
		objstore_max_concurrent_requests > 1)
	{
		int		   *before = palloc(sizeof(int) * nreads);

		for (int i = 0; i < nreads; i++)
			before[i] = reads[i].out->len;
		store->ops->get_many(store, reads, nreads,
							 objstore_max_concurrent_requests);
		for (int i = 0; i < nreads; i++)
			objstore_check_answer(store, &reads[i], before[i]);
		pfree(before);
		return;
	}

	for (int i = 0; i < nreads; i++)
	{
		ObjectStoreRead *read = &reads[i];

		CHECK_FOR_INTERRUPTS();
		read->found = objstore_read_one(store, read->key, read->offset,
										read->length, read->tail,
										read->immutable, read->out,
										&read->object_size);
	}
}

/*
 * objstore_read
 *		One read described as a member of a batch is (objstore_get_many).
 */
void
objstore_read(ObjectStore *store, ObjectStoreRead *read)
{
	objstore_get_many(store, read, 1);
}

/* writes to local stores that failed after they may have happened */
static int64 local_maybe_applied = 0;

/* See objstore_backend.h. */
void
objstore_note_maybe_applied(void)
{
	local_maybe_applied++;
}

/*
 * objstore_get_counters
 *		Requests sent to remote stores, and their rounds; see objstore.h.
 */
void
objstore_get_counters(ObjectStoreCounters *counters)
{
	HttpSessionCounters http;

	http_session_get_counters(&http);
	counters->requests = http.requests;
	counters->rounds = http.rounds;
	counters->retries = http.retries;
	counters->maybe_applied = http.maybe_applied + local_maybe_applied;
}

/*
 * A listing answers with keys under the prefix it asked for; callers take
 * the rest of each key after the prefix.  An endpoint (possibly one a
 * server's owner chose) that answers with others is refused, not believed.
 */
static void
listing_check_prefix(ObjectStore *store, const ObjectStoreListing *page,
					 const char *prefix)
{
	const char *asked = prefix ? prefix : "";
	size_t		prefix_len = strlen(asked);

	for (int i = 0; i < page->count; i++)
		if (strncmp(page->entries[i].key, asked, prefix_len) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("listing of store \"%s\" under \"%s\" returned a key outside it",
							store->location, asked)));
}

/*
 * objstore_list_page
 *		One page of a prefix listing, in key order.
 */
ObjectStoreListing *
objstore_list_page(ObjectStore *store, const char *prefix,
				   const char *start_after, int max_keys,
				   const char *continuation)
{
	ObjectStoreListing *page;

	if (max_keys <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid page size %d for a listing of store \"%s\"",
						max_keys, store->location)));
	page = store->ops->list(store, prefix, start_after, max_keys,
							continuation);
	listing_check_prefix(store, page, prefix);

	/*
	 * The same token back would make a caller's loop over the pages run until
	 * cancelled.
	 */
	if (continuation != NULL && page->continuation != NULL &&
		strcmp(page->continuation, continuation) == 0)
		elog(ERROR, "listing of store \"%s\" did not advance past continuation token \"%s\"",
			 store->location, objstore_server_text(continuation, 128));
	return page;
}

/*
 * objstore_list_begin
 *		Start a listing read a page at a time (objstore_list_next).
 */
void
objstore_list_begin(ObjectStoreListScan *scan, ObjectStore *store,
					const char *prefix, const char *start_after, int page_size)
{
	scan->store = store;
	scan->prefix = prefix;
	scan->start_after = start_after;
	scan->page_size = page_size;
	scan->continuation = NULL;
	scan->last_key = start_after != NULL ? pstrdup(start_after) : NULL;
	scan->done = false;
	scan->context = CurrentMemoryContext;
}

/*
 * objstore_list_next
 *		The next page of a listing, or NULL after the last one.
 *
 * Interrupts are checked before each page, since a remote listing of a large
 * prefix is many requests.  A page out of order would give the caller a
 * wrongly sorted listing, so it is reported as an internal error instead
 * (objstore_list_page refuses a token handed back unchanged).
 */
ObjectStoreListing *
objstore_list_next(ObjectStoreListScan *scan)
{
	ObjectStore *store = scan->store;
	ObjectStoreListing *page;
	const char *last_key = scan->last_key;
	MemoryContext oldcontext;

	if (scan->done)
		return NULL;
	CHECK_FOR_INTERRUPTS();

	page = objstore_list_page(store, scan->prefix, scan->start_after,
							  scan->page_size, scan->continuation);
	for (int i = 0; i < page->count; i++)
	{
		const char *key = page->entries[i].key;

		if (last_key != NULL && strcmp(key, last_key) <= 0)
			elog(ERROR, "listing of store \"%s\" returned key \"%s\" out of order after \"%s\"",
				 store->location, objstore_server_text(key, 256),
				 objstore_server_text(last_key, 256));
		last_key = key;
	}

	/* what the next page needs outlives this one */
	oldcontext = MemoryContextSwitchTo(scan->context);
	if (page->count > 0)
	{
		if (scan->last_key != NULL)
			pfree(scan->last_key);
		scan->last_key = pstrdup(last_key);
	}
	if (scan->continuation != NULL)
		pfree(scan->continuation);
	scan->continuation = page->continuation != NULL ?
		pstrdup(page->continuation) : NULL;
	scan->done = page->continuation == NULL;
	MemoryContextSwitchTo(oldcontext);
	return page;
}

/*
 * objstore_list_all
 *		Every key under prefix after start_after, as a sorted List of
 *		ObjectStoreEntry *, page after page (objstore_list_next).
 */
List *
objstore_list_all(ObjectStore *store, const char *prefix,
				  const char *start_after)
{
	List	   *entries = NIL;
	ObjectStoreListScan scan;
	ObjectStoreListing *page;

	objstore_list_begin(&scan, store, prefix, start_after,
						OBJSTORE_LIST_PAGE_SIZE);
	while ((page = objstore_list_next(&scan)) != NULL)
		for (int i = 0; i < page->count; i++)
			entries = lappend(entries, &page->entries[i]);
	return entries;
}

/*
 * objstore_delete
 *		Delete an object; false if it did not exist.
 */
bool
objstore_delete(ObjectStore *store, const char *key)
{
	objstore_check_writable(store, key);
	maintenance_cost_charge(MAINTENANCE_COST_DELETED_OBJECT);
	return store->ops->delete_object(store, key);
}

/*
 * objstore_delete_many
 *		Delete a batch of keys, concurrently when the backend can; see
 *		objstore.h.
 */
void
objstore_delete_many(ObjectStore *store, const char *const *keys, int count,
					 bool *deleted)
{
	for (int i = 0; i < count; i++)
	{
		objstore_check_writable(store, keys[i]);
		maintenance_cost_charge(MAINTENANCE_COST_DELETED_OBJECT);
	}
	if (count > 1 && store->ops->delete_many != NULL &&
		objstore_max_concurrent_requests > 1)
		store->ops->delete_many(store, keys, count, deleted,
								objstore_max_concurrent_requests);
	else
	{
		for (int i = 0; i < count; i++)
		{
			CHECK_FOR_INTERRUPTS();
			deleted[i] = store->ops->delete_object(store, keys[i]);
		}
	}
}

/*
 * objstore_remove_abandoned_uploads
 *		Remove what interrupted uploads left behind before older_than.
 */
int64
objstore_remove_abandoned_uploads(ObjectStore *store, TimestampTz older_than,
								  int64 *bytes)
{
	if (store->ops->remove_abandoned_uploads == NULL)
		return 0;
	objstore_check_writable(store, "(abandoned uploads)");
	return store->ops->remove_abandoned_uploads(store, older_than, bytes);
}

/*
 * objstore_new_put_id
 *		A fresh put id: a random (version 4) UUID in its text form.
 *
 * Put ids must be unique per logical write across every cluster writing to a
 * store, with no coordination, so they come from the strong random source
 * rather than from anything process- or clock-based.
 */
char *
objstore_new_put_id(void)
{
	uint8		bytes[16];

	if (!pg_strong_random(bytes, sizeof(bytes)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate random put id")));

	/* RFC 4122: version 4, variant 10xx. */
	bytes[6] = (bytes[6] & 0x0f) | 0x40;
	bytes[8] = (bytes[8] & 0x3f) | 0x80;

	return psprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
					bytes[0], bytes[1], bytes[2], bytes[3],
					bytes[4], bytes[5], bytes[6], bytes[7],
					bytes[8], bytes[9], bytes[10], bytes[11],
					bytes[12], bytes[13], bytes[14], bytes[15]);
}

void
objstore_clip_range(int64 size, bool tail, int64 *offset, int64 *length)
{
	if (tail)
	{
		if (*length < 0 || *length > size)
			*length = size;
		*offset = size - *length;
		return;
	}
	if (*offset < 0)
		*offset = 0;
	if (*offset > size)
		*offset = size;
	if (*length < 0 || *length > size - *offset)
		*length = size - *offset;
}
