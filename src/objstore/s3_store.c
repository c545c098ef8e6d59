/*-------------------------------------------------------------------------
 *
 * s3_store.c
 *		The S3 backend (s3://bucket/prefix): AWS S3 and S3-compatible stores.
 *
 * Every operation of objstore.h is one or two S3 requests made through the
 * process's HTTP session (http_session.c: connection reuse, timeouts,
 * retries, interrupts) and signed by libcurl (CURLOPT_AWS_SIGV4):
 *
 *	create-if-absent	PUT with If-None-Match: * and the put id in the
 *						x-amz-meta-rollout-put-id metadata header; 200 is
 *						CREATED, 412 is "exists" and is settled by a HEAD
 *						comparing put ids (ours: CREATED, else ALREADY_EXISTS),
 *						which resolves an ambiguous earlier attempt;
 *	get range / tail	GET with Range: bytes=A-B / bytes=-N; 404 NoSuchKey is
 *						"not found", the size comes from Content-Range; a
 *						batch of reads is the same GETs run concurrently
 *						(http_session_perform_many);
 *	put id				HEAD;
 *	list				ListObjectsV2 (prefix, start-after, continuation-token,
 *						max-keys up to 1000), XML parsed with libxml2;
 *	delete				HEAD (S3 answers 204 to deleting a missing key, so
 *						"did not exist" needs the HEAD) then DELETE; a batch
 *						runs all its HEADs concurrently, then the DELETEs.
 *
 * Bodies.  Objects written from memory (manifests) are sent with
 * POSTFIELDS; objects written from a local file (WAL entries, segments) are
 * streamed from the file with a known Content-Length in one PUT, so no
 * segment is ever held in memory.  The payload is always signed with its
 * real SHA-256 (x-amz-content-sha256; a file is hashed in a first pass), so
 * the store rejects a body damaged in transit.  One PUT takes up to 5 GiB;
 * no multipart upload is needed for the segment sizes rollout_fdw writes.
 *
 * Options.  Server: endpoint (default https://s3.REGION.amazonaws.com),
 * region (default us-east-1), url_style (path | virtual; path whenever an
 * endpoint is set, virtual-hosted for AWS otherwise), connect_timeout,
 * request_timeout, ca_file, verify_tls.  User mapping: access_key_id,
 * secret_access_key, session_token.  Without a key pair in the mapping, and
 * only when the caller allows it (tables and servers owned by superusers,
 * fdw/options.c), the server process's environment (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) is used.  Credentials appear in
 * no message and no log.
 *
 * Copyright (c) rollout_fdw authors
 *
 * IDENTIFICATION
 *		src/objstore/s3_store.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "rollout/maintenance_cost.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "http_session.h"
#include "objstore_backend.h"

/* S3 limits. */
#define S3_MAX_KEYS_PER_PAGE	1000
#define S3_MAX_SINGLE_PUT		(INT64CONST(5) * 1024 * 1024 * 1024)
/* Attempts of a create that meets a concurrent conditional write (409). */
#define S3_CONFLICT_ATTEMPTS	5

#define S3_PUT_ID_HEADER		"x-amz-meta-rollout-put-id"
#define S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct S3Store
{
	const char *location;		/* for messages */
	char	   *prefix;			/* "" or "a/b", no trailing slash */
	char	   *bucket_url;		/* the bucket, for listings */
	char	   *object_url_prefix;	/* + encoded full key = an object */
	char	   *sigv4_provider; /* "aws:amz:REGION:s3" */
	char	   *access_key_id;
	char	   *secret_access_key;
	char	   *session_token;	/* or NULL */
	HttpSettings settings;
	bool		bucket_checked; /* the bucket was seen to exist */
} S3Store;

static const ObjectStoreOps s3_store_ops;

static void s3_raise(ObjectStore *store, const char *operation, const char *key,
					 const HttpResponse *response, const char *body,
					 int body_length) pg_attribute_noreturn();


/* The store's S3 state. */
static S3Store *
s3_state(ObjectStore *store)
{
	return (S3Store *) store->backend;
}

/* The full S3 key of a key relative to the location. */
static char *
s3_full_key(S3Store *s3, const char *key)
{
	if (s3->prefix[0] == '\0')
		return pstrdup(key);
	return psprintf("%s/%s", s3->prefix, key);
}

static char *
s3_object_url(S3Store *s3, const char *key)
{
	return psprintf("%s%s", s3->object_url_prefix,
					http_uri_encode(s3_full_key(s3, key), true));
}

/*
 * Describe one signed S3 request.  payload_hash is the hex SHA-256 of the
 * body (NULL: no body).  extra_headers are "Name: value" strings.
 */
static void
s3_request_init(S3Store *s3, HttpRequest *request, const char *method,
				const char *url, List *extra_headers, const char *body,
				size_t body_length, const char *body_file,
				const char *payload_hash, StringInfo response_body,
				const char *description)
{
	List	   *headers = list_copy(extra_headers);

	headers = lappend(headers, psprintf("x-amz-content-sha256: %s",
										payload_hash ? payload_hash : S3_EMPTY_SHA256));
	if (s3->session_token != NULL)
		headers = lappend(headers, psprintf("x-amz-security-token: %s",
											s3->session_token));

	memset(request, 0, sizeof(HttpRequest));
	request->method = method;
	request->url = url;
	request->headers = headers;
	request->body = body;
	request->body_length = body_length;
	request->body_file = body_file;
	request->aws_sigv4 = s3->sigv4_provider;
	request->access_key_id = s3->access_key_id;
	request->secret_access_key = s3->secret_access_key;
	request->settings = &s3->settings;
	request->response_body = response_body;
	request->description = description;
}

/* Perform one signed S3 request (see s3_request_init). */
static void
s3_perform(S3Store *s3, const char *method, const char *url,
		   List *extra_headers, const char *body, size_t body_length,
		   const char *body_file, const char *payload_hash,
		   StringInfo response_body, const char *description,
		   HttpResponse *response)
{
	HttpRequest request;

	s3_request_init(s3, &request, method, url, extra_headers, body,
					body_length, body_file, payload_hash, response_body,
					description);
	http_session_perform(&request, response);
}

/* libxml2: parse an S3 XML answer, or NULL when it is not XML. */
static xmlDocPtr
s3_parse_xml(const char *data, int length)
{
	if (data == NULL || length <= 0)
		return NULL;
	/* no network, no entity substitution, no messages on stderr */
	return xmlReadMemory(data, length, NULL, NULL,
						 XML_PARSE_NONET | XML_PARSE_NOERROR |
						 XML_PARSE_NOWARNING | XML_PARSE_NOBLANKS);
}

/* The first child element of node with the given local name, or NULL. */
static xmlNodePtr
xml_child(xmlNodePtr node, const char *name)
{
	for (xmlNodePtr child = node ? node->children : NULL; child; child = child->next)
	{
		if (child->type == XML_ELEMENT_NODE &&
			strcmp((const char *) child->name, name) == 0)
			return child;
	}
	return NULL;
}

/* The text of an element (entities decoded), palloc'd, or NULL. */
static char *
xml_text(xmlNodePtr node)
{
	xmlChar    *content;
	char	   *result;

	if (node == NULL)
		return NULL;
	content = xmlNodeGetContent(node);
	if (content == NULL)
		return NULL;
	result = pstrdup((const char *) content);
	xmlFree(content);
	return result;
}

/*
 * The Code and Message of an S3 error body (<Error><Code>..), or NULLs.
 * Nothing else of the body is used: some answers echo the access key id.
 */
static void
s3_error_body(const char *data, int length, char **code, char **message)
{
	xmlDocPtr	doc = s3_parse_xml(data, length);

	*code = NULL;
	*message = NULL;
	if (doc == NULL)
		return;
	PG_TRY();
	{
		xmlNodePtr	root = xmlDocGetRootElement(doc);

		if (root != NULL && strcmp((const char *) root->name, "Error") == 0)
		{
			*code = xml_text(xml_child(root, "Code"));
			*message = xml_text(xml_child(root, "Message"));
			if (*code != NULL)
				*code = objstore_server_text(*code, 64);
			if (*message != NULL)
				*message = objstore_server_text(*message, 256);
		}
	}
	PG_FINALLY();
	{
		xmlFreeDoc(doc);
	}
	PG_END_TRY();
}

/*
 * Raise the ERROR for an unexpected answer: operation ("create", "read"...),
 * key, HTTP status and the S3 error code.
 */
static void
s3_raise(ObjectStore *store, const char *operation, const char *key,
		 const HttpResponse *response, const char *body, int body_length)
{
	char	   *code;
	char	   *message;
	int			sqlstate;

	s3_error_body(body, body_length, &code, &message);

	/* an expired or invalid session token is a 400 */
	if (response->status == 401 || response->status == 403 ||
		(code != NULL && (strcmp(code, "ExpiredToken") == 0 ||
						  strcmp(code, "InvalidToken") == 0)))
		sqlstate = ERRCODE_INSUFFICIENT_PRIVILEGE;
	else if (code != NULL && strcmp(code, "NoSuchBucket") == 0)
		sqlstate = ERRCODE_UNDEFINED_OBJECT;
	else if (response->status >= 500 || response->status == 429)
		sqlstate = ERRCODE_CONNECTION_FAILURE;
	else
		sqlstate = ERRCODE_FDW_ERROR;

	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("could not %s object \"%s\" in store \"%s\": HTTP %ld%s%s",
					operation, key, store->location, response->status,
					code ? " " : "", code ? code : ""),
			 (message && message[0]) ? errdetail("The S3 server said: %s", message) : 0,
			 response->attempts > 1 ? errcontext("after %d attempts", response->attempts) : 0,
			 (response->status == 403) ?
			 errhint("Check access_key_id and secret_access_key in the user mapping, and the region server option.") : 0));
}

/*
 * A request answered 404 without saying why (HEAD has no body): make sure
 * the bucket exists, so that a wrong bucket is an error rather than an
 * empty store.  Checked once per store.
 */
static void
s3_check_bucket(ObjectStore *store, const char *operation, const char *key)
{
	S3Store    *s3 = s3_state(store);
	HttpResponse response;
	StringInfoData body;

	if (s3->bucket_checked)
		return;
	initStringInfo(&body);
	s3_perform(s3, "HEAD", s3->bucket_url, NIL, NULL, 0, NULL, NULL, &body,
			   psprintf("check of the bucket of store \"%s\"", store->location),
			   &response);
	if (response.status == 200)
	{
		s3->bucket_checked = true;
		return;
	}
	if (response.status == 404)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("could not %s object \"%s\" in store \"%s\": HTTP 404 NoSuchBucket",
						operation, key, store->location),
				 errdetail("The bucket does not exist.")));
	s3_raise(store, operation, key, &response, body.data, body.len);
}

/*
 * Interpret a 404 with body: NoSuchKey is "not found" (returns normally),
 * anything else (NoSuchBucket) an ERROR.
 */
static void
s3_not_found_or_raise(ObjectStore *store, const char *operation, const char *key,
					  const HttpResponse *response, const char *body, int body_length)
{
	char	   *code;
	char	   *message;

	s3_error_body(body, body_length, &code, &message);
	if (code != NULL && strcmp(code, "NoSuchKey") == 0)
	{
		s3_state(store)->bucket_checked = true;
		return;
	}
	if (code == NULL)
	{
		s3_check_bucket(store, operation, key);
		return;
	}
	s3_raise(store, operation, key, response, body, body_length);
}

/*
 * HEAD an object.  Returns false when it does not exist; otherwise fills
 * *response (size in Content-Length, put id in the metadata header).
 */
static bool
s3_head(ObjectStore *store, const char *key, const char *operation,
		HttpResponse *response)
{
	S3Store    *s3 = s3_state(store);

	s3_perform(s3, "HEAD", s3_object_url(s3, key), NIL, NULL, 0, NULL, NULL,
			   NULL, psprintf("%s of object \"%s\" in store \"%s\"", operation, key,
							  store->location),
			   response);
	if (response->status == 200)
	{
		s3->bucket_checked = true;
		return true;
	}
	if (response->status == 404)
	{
		s3_check_bucket(store, operation, key);
		return false;
	}
	s3_raise(store, operation, key, response, NULL, 0);
}

/* Parse a decimal int64 header value; -1 when absent or malformed. */
static int64
parse_size(const char *digits)
{
	int64		value = 0;

	if (digits == NULL || *digits == '\0')
		return -1;
	for (const char *c = digits; *c != '\0'; c++)
	{
		if (*c < '0' || *c > '9' || value > PG_INT64_MAX / 10 - 10)
			return -1;
		value = value * 10 + (*c - '0');
	}
	return value;
}

/* The total size in "Content-Range: bytes A-B/SIZE" (or "bytes * /SIZE"). */
static int64
content_range_size(const HttpResponse *response)
{
	int64		first;
	int64		total;

	http_content_range(response, &first, &total);
	return total;
}

/*
 * Create key unless it exists, from memory (data) or a file (local_path).
 */
static ObjectStoreCreateResult
s3_create(ObjectStore *store, const char *key, const char *data, size_t len,
		  const char *local_path, const char *put_id)
{
	S3Store    *s3 = s3_state(store);
	char		hash[65];
	char	   *url = s3_object_url(s3, key);
	char	   *description = psprintf("create of object \"%s\" in store \"%s\"",
									   key, store->location);
	List	   *headers = NIL;
	HttpResponse response;
	HttpResponse head;
	StringInfoData body;
	bool		ambiguous = false;
	char	   *code = NULL;
	char	   *message;
	const char *theirs;

	if (local_path != NULL)
	{
		int64		size;

		http_sha256_file_hex(local_path, hash, &size);
		if (size > S3_MAX_SINGLE_PUT)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("could not create object \"%s\" in store \"%s\": " INT64_FORMAT " bytes is more than one S3 PUT takes",
							key, store->location, size)));
	}
	else
		http_sha256_hex(data ? data : "", len, hash);

	headers = lappend(headers, "If-None-Match: *");
	headers = lappend(headers, "Content-Type: application/octet-stream");
	if (put_id != NULL)
		headers = lappend(headers, psprintf(S3_PUT_ID_HEADER ": %s", put_id));

	initStringInfo(&body);
	for (int attempt = 1;; attempt++)
	{
		resetStringInfo(&body);
		s3_perform(s3, "PUT", url, headers,
				   local_path ? NULL : (data ? data : ""), len,
				   local_path, hash, &body, description, &response);
		ambiguous |= response.ambiguous;

		if (response.status == 200 || response.status == 201)
		{
			s3->bucket_checked = true;
			return OBJSTORE_CREATED;
		}
		if (response.status == 412)
			break;
		/* a concurrent conditional write to this key is in flight (AWS) */
		if (response.status == 409 && attempt < S3_CONFLICT_ATTEMPTS)
		{
			s3_error_body(body.data, body.len, &code, &message);
			if (code != NULL && strcmp(code, "ConditionalRequestConflict") == 0)
			{
				ambiguous = true;
				CHECK_FOR_INTERRUPTS();
				pg_usleep(50000L * attempt);
				continue;
			}
		}
		s3_raise(store, "create", key, &response, body.data, body.len);
	}

	/*
	 * 412: the key exists.  It is ours if an earlier attempt landed; the put
	 * id says so.  Checked after every 412, not only after an attempt known
	 * to be ambiguous, because libcurl itself resends a request once when a
	 * reused connection turns out to be closed.
	 */
	if (put_id == NULL)
		return OBJSTORE_ALREADY_EXISTS;
	if (!s3_head(store, key, "create", &head))
		return OBJSTORE_ALREADY_EXISTS; /* deleted since; it was not ours */
	theirs = http_response_header(&head, S3_PUT_ID_HEADER);
	if (theirs != NULL && strcmp(theirs, put_id) == 0)
	{
		if (!ambiguous)
			elog(DEBUG1, "rollout_fdw: object \"%s\" in store \"%s\" was created by a resent request",
				 key, store->location);
		return OBJSTORE_CREATED;
	}
	return OBJSTORE_ALREADY_EXISTS;
}

static ObjectStoreCreateResult
s3_create_if_absent(ObjectStore *store, const char *key, const char *data,
					size_t len, const char *put_id)
{
	return s3_create(store, key, data, len, NULL, put_id);
}

static ObjectStoreCreateResult
s3_create_from_file_if_absent(ObjectStore *store, const char *key,
							  const char *local_path, const char *put_id)
{
	ObjectStoreCreateResult result = s3_create(store, key, NULL, 0,
											   local_path, put_id);
	struct stat st;

	/* a maintenance pass pays for the upload after it (maintenance_cost.c) */
	if (maintenance_cost_active() && stat(local_path, &st) == 0)
	{
		maintenance_cost_charge_written_bytes((int64) st.st_size);
		maintenance_cost_delay_point();
	}
	return result;
}

/*
 * The outcome of a GET into out (its bytes appended after start): true with
 * *size for the object's bytes, false when the object does not exist.  416
 * (the range starts at or past the end) is an empty read of an existing
 * object.  Anything else raises the ERROR.
 */
static bool
s3_get_result(ObjectStore *store, const char *key, StringInfo out, int start,
			  int64 *size, const HttpResponse *response)
{
	if (response->status == 200 || response->status == 206)
	{
		s3_state(store)->bucket_checked = true;
		*size = response->status == 206 ? content_range_size(response) : out->len - start;
		if (*size < 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("could not read object \"%s\" in store \"%s\": no object size in the answer",
							key, store->location)));
		return true;
	}

	/* not the object's bytes: take the error body out of *out */
	{
		char	   *body = pnstrdup(out->data + start, out->len - start);
		int			body_length = out->len - start;

		out->len = start;
		out->data[start] = '\0';

		if (response->status == 404)
		{
			s3_not_found_or_raise(store, "read", key, response, body, body_length);
			return false;
		}
		if (response->status == 416)
		{
			HttpResponse head;

			*size = content_range_size(response);
			if (*size < 0)
			{
				if (!s3_head(store, key, "read", &head))
					return false;
				*size = parse_size(http_response_header(&head, "Content-Length"));
			}
			return true;
		}
		s3_raise(store, "read", key, response, body, body_length);
	}
}

/*
 * The Range header value of a read: "bytes=A-B", "bytes=A-" or the suffix
 * "bytes=-N" of a tail; NULL for the whole object.
 */
static char *
s3_read_range(bool tail, int64 offset, int64 length)
{
	if (tail)
		return psprintf("bytes=-" INT64_FORMAT, length);
	if (length > 0)
		return psprintf("bytes=" INT64_FORMAT "-" INT64_FORMAT, offset,
						offset + length - 1);
	if (offset > 0)
		return psprintf("bytes=" INT64_FORMAT "-", offset);
	return NULL;
}

/* Is a read a tail of some bytes (a tail of everything is a plain GET)? */
static bool
s3_read_is_tail(const ObjectStoreRead *read)
{
	return read->tail && read->length >= 0;
}

/*
 * Reads of a batch, every one a GET with a Range header, at most
 * max_in_flight at once.  Reads of no bytes only want the object's size:
 * a HEAD each, made first (callers do not batch those).  A server that
 * ignores Range sends the whole object, which objstore.c then clips.
 */
static void
s3_get_many(ObjectStore *store, ObjectStoreRead *reads, int nreads,
			int max_in_flight)
{
	S3Store    *s3 = s3_state(store);
	HttpRequest *requests = palloc0(sizeof(HttpRequest) * nreads);
	HttpResponse *responses = palloc0(sizeof(HttpResponse) * nreads);
	int		   *read_of = palloc(sizeof(int) * nreads);
	int		   *starts = palloc(sizeof(int) * nreads);
	int			count = 0;

	for (int i = 0; i < nreads; i++)
	{
		ObjectStoreRead *read = &reads[i];
		List	   *headers = NIL;
		char	   *range;

		if (read->length == 0)
		{
			HttpResponse head;

			read->found = s3_head(store, read->key, "read", &head);
			if (read->found)
				read->object_size = parse_size(http_response_header(&head, "Content-Length"));
			continue;
		}

		range = s3_read_is_tail(read) ?
			s3_read_range(true, 0, read->length) :
			s3_read_range(false, read->tail ? 0 : read->offset, read->length);
		if (range != NULL)
			headers = lappend(headers, psprintf("Range: %s", range));
		starts[count] = read->out->len;
		read_of[count] = i;
		s3_request_init(s3, &requests[count], "GET", s3_object_url(s3, read->key),
						headers, NULL, 0, NULL, NULL, read->out,
						psprintf("read of object \"%s\" in store \"%s\"",
								 read->key, store->location));
		count++;
	}

	if (count == 1)
		http_session_perform(&requests[0], &responses[0]);
	else if (count > 1)
		http_session_perform_many(requests, responses, count, max_in_flight);

	for (int j = 0; j < count; j++)
	{
		ObjectStoreRead *read = &reads[read_of[j]];
		int			start = starts[j];
		int64		size;

		read->found = s3_get_result(store, read->key, read->out, start, &size,
									&responses[j]);
		if (!read->found)
			continue;
		read->object_size = size;
		if (responses[j].status == 206)
			http_content_range(&responses[j], &read->answer_first, &size);
	}

	pfree(requests);
	pfree(responses);
	pfree(read_of);
	pfree(starts);
}

/*
 * HEAD key and return the put id of its x-amz-meta-rollout-put-id metadata
 * (get_put_id): false when the object does not exist, *put_id NULL when it has
 * none.  The put id is how a writer tells its own landed create from another
 * writer's.
 */
static bool
s3_get_put_id(ObjectStore *store, const char *key, char **put_id)
{
	HttpResponse response;
	const char *value;

	if (!s3_head(store, key, "look up", &response))
		return false;
	value = http_response_header(&response, S3_PUT_ID_HEADER);
	*put_id = value ? pstrdup(value) : NULL;
	return true;
}

/* Append "&name=value" (value encoded) to a query being built. */
static void
append_query(StringInfo query, const char *name, const char *value)
{
	if (query->len > 0)
		appendStringInfoChar(query, '&');
	appendStringInfo(query, "%s=%s", name, http_uri_encode(value, false));
}

/* Parse "2024-05-01T12:00:00.000Z" into a TimestampTz. */
static TimestampTz
s3_parse_timestamp(const char *text)
{
	return DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
												   CStringGetDatum(text),
												   ObjectIdGetDatum(InvalidOid),
												   Int32GetDatum(-1)));
}

/*
 * One page of ListObjectsV2 (list).  prefix and start_after are relative to
 * the store's prefix, which is added to them and stripped from the keys
 * returned; a key outside it is skipped.  The query parameters are appended in
 * name order because the request is signed with the query as written, and a
 * truncated answer without a continuation token is an ERROR rather than a
 * listing that silently stops short.
 */
static ObjectStoreListing *
s3_list(ObjectStore *store, const char *prefix, const char *start_after,
		int max_keys, const char *continuation)
{
	S3Store    *s3 = s3_state(store);
	StringInfoData query;
	StringInfoData body;
	HttpResponse response;
	char	   *root_prefix = s3->prefix[0] ? psprintf("%s/", s3->prefix) : pstrdup("");
	size_t		root_length = strlen(root_prefix);
	ObjectStoreListing *listing = palloc0(sizeof(ObjectStoreListing));
	xmlDocPtr	doc;
	const char *what = prefix && prefix[0] ? prefix : "(all)";

	/* parameters in name order: SigV4 signs the query as written */
	initStringInfo(&query);
	if (continuation != NULL)
		append_query(&query, "continuation-token", continuation);
	append_query(&query, "list-type", "2");
	append_query(&query, "max-keys", psprintf("%d", Min(max_keys, S3_MAX_KEYS_PER_PAGE)));
	append_query(&query, "prefix", psprintf("%s%s", root_prefix, prefix ? prefix : ""));
	if (start_after != NULL)
		append_query(&query, "start-after", psprintf("%s%s", root_prefix, start_after));

	initStringInfo(&body);
	s3_perform(s3, "GET", psprintf("%s?%s", s3->bucket_url, query.data), NIL,
			   NULL, 0, NULL, NULL, &body,
			   psprintf("listing of prefix \"%s\" in store \"%s\"", what, store->location),
			   &response);
	if (response.status != 200)
		s3_raise(store, "list", what, &response, body.data, body.len);
	s3->bucket_checked = true;

	doc = s3_parse_xml(body.data, body.len);
	if (doc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not list prefix \"%s\" in store \"%s\": the answer is not XML",
						what, store->location)));
	PG_TRY();
	{
		xmlNodePtr	root = xmlDocGetRootElement(doc);
		int			capacity = 16;
		char	   *truncated;

		/*
		 * Anything else (an <Error> document a gateway answers with 200)
		 * would read as an empty, complete listing: a store with nothing in
		 * it, or a manifest version older than the newest.
		 */
		if (root == NULL || strcmp((const char *) root->name, "ListBucketResult") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("could not list prefix \"%s\" in store \"%s\": the answer is not a ListBucketResult",
							what, store->location)));
		listing->entries = palloc(sizeof(ObjectStoreEntry) * capacity);
		for (xmlNodePtr node = root->children; node; node = node->next)
		{
			ObjectStoreEntry *entry;
			char	   *full_key;
			char	   *size;
			char	   *modified;

			if (node->type != XML_ELEMENT_NODE ||
				strcmp((const char *) node->name, "Contents") != 0)
				continue;
			full_key = xml_text(xml_child(node, "Key"));
			size = xml_text(xml_child(node, "Size"));
			modified = xml_text(xml_child(node, "LastModified"));
			if (full_key == NULL || size == NULL || modified == NULL ||
				parse_size(size) < 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("could not list prefix \"%s\" in store \"%s\": malformed entry in the answer",
								what, store->location)));
			if (strncmp(full_key, root_prefix, root_length) != 0)
				continue;
			if (listing->count == capacity)
			{
				capacity *= 2;
				listing->entries = repalloc(listing->entries, sizeof(ObjectStoreEntry) * capacity);
			}
			entry = &listing->entries[listing->count++];
			entry->key = pstrdup(full_key + root_length);
			entry->size = parse_size(size);
			entry->modified = s3_parse_timestamp(modified);
		}
		truncated = xml_text(xml_child(root, "IsTruncated"));
		if (truncated != NULL && strcmp(truncated, "true") == 0)
		{
			listing->continuation = xml_text(xml_child(root, "NextContinuationToken"));
			if (listing->continuation == NULL || listing->continuation[0] == '\0')
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("could not list prefix \"%s\" in store \"%s\": a truncated answer without a continuation token",
								what, store->location)));
		}
	}
	PG_FINALLY();
	{
		xmlFreeDoc(doc);
	}
	PG_END_TRY();
	return listing;
}

/*
 * Delete key (delete_object).  S3 answers 204 to a DELETE whether or not the
 * key existed, so a HEAD first tells "did not exist" (false).  The two
 * requests are not atomic: a key someone else deletes between them still
 * returns true.
 */
static bool
s3_delete_object(ObjectStore *store, const char *key)
{
	S3Store    *s3 = s3_state(store);
	HttpResponse response;
	StringInfoData body;

	/* S3 answers 204 whether or not the key existed */
	if (!s3_head(store, key, "delete", &response))
		return false;
	initStringInfo(&body);
	s3_perform(s3, "DELETE", s3_object_url(s3, key), NIL, NULL, 0, NULL, NULL,
			   &body, psprintf("delete of object \"%s\" in store \"%s\"", key,
							   store->location),
			   &response);
	if (response.status == 204 || response.status == 200)
		return true;
	if (response.status == 404)
		return false;
	s3_raise(store, "delete", key, &response, body.data, body.len);
}

/*
 * Delete a batch of keys (delete_many): the HEADs of all of them at once,
 * then the DELETEs of those that exist, each answered as s3_delete_object
 * would answer it.
 */
static void
s3_delete_many(ObjectStore *store, const char *const *keys, int count,
			   bool *deleted, int max_in_flight)
{
	S3Store    *s3 = s3_state(store);
	HttpRequest *requests = palloc0(sizeof(HttpRequest) * count);
	HttpResponse *responses = palloc0(sizeof(HttpResponse) * count);
	StringInfo *bodies = palloc0(sizeof(StringInfo) * count);
	int		   *key_of = palloc(sizeof(int) * count);
	int			existing = 0;
	int			missing = -1;

	/* 1. which exist: S3 answers 204 to deleting a missing key */
	for (int i = 0; i < count; i++)
		s3_request_init(s3, &requests[i], "HEAD", s3_object_url(s3, keys[i]),
						NIL, NULL, 0, NULL, NULL, NULL,
						psprintf("delete of object \"%s\" in store \"%s\"",
								 keys[i], store->location));
	http_session_perform_many(requests, responses, count, max_in_flight);
	for (int i = 0; i < count; i++)
	{
		deleted[i] = false;
		if (responses[i].status == 200)
			key_of[existing++] = i;
		else if (responses[i].status == 404)
			missing = i;
		else
			s3_raise(store, "delete", keys[i], &responses[i], NULL, 0);
	}
	if (existing > 0)
		s3->bucket_checked = true;
	if (missing >= 0)
		s3_check_bucket(store, "delete", keys[missing]);	/* not the bucket's */

	/* 2. the DELETEs */
	for (int j = 0; j < existing; j++)
	{
		const char *key = keys[key_of[j]];

		bodies[j] = makeStringInfo();
		s3_request_init(s3, &requests[j], "DELETE", s3_object_url(s3, key),
						NIL, NULL, 0, NULL, NULL, bodies[j],
						psprintf("delete of object \"%s\" in store \"%s\"",
								 key, store->location));
	}
	if (existing > 0)
		http_session_perform_many(requests, responses, existing, max_in_flight);
	for (int j = 0; j < existing; j++)
	{
		int			i = key_of[j];

		if (responses[j].status == 204 || responses[j].status == 200)
			deleted[i] = true;
		else if (responses[j].status != 404)
			s3_raise(store, "delete", keys[i], &responses[j], bodies[j]->data,
					 bodies[j]->len);
	}
	pfree(requests);
	pfree(responses);
	pfree(bodies);
	pfree(key_of);
}

static void
s3_close(ObjectStore *store)
{
	/* the connection belongs to the process's HTTP session and stays open */
}

static const ObjectStoreOps s3_store_ops = {
	.create_if_absent = s3_create_if_absent,
	.create_from_file_if_absent = s3_create_from_file_if_absent,
	.get_range = NULL,			/* get_many reads */
	.get_tail = NULL,
	.get_put_id = s3_get_put_id,
	.list = s3_list,
	.list_starts_after = true,
	.delete_object = s3_delete_object,
	.delete_many = s3_delete_many,
	.get_many = s3_get_many,
	.close = s3_close,
};

bool
s3_store_available(void)
{
	return true;
}

/*
 * An option's value (a copy: the option list may be freed before the store
 * is), or NULL.
 */
static char *
option_value(List *options, const char *name)
{
	ListCell   *lc;
	char	   *value = NULL;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, name) == 0)
			value = pstrdup(defGetString(def));
	}
	return value;
}

/* An environment variable, or NULL when unset or empty. */
static char *
env_value(const char *name)
{
	const char *value = getenv(name);

	return (value && value[0]) ? pstrdup(value) : NULL;
}

/*
 * s3_store_open
 *		Fill store with the S3 backend for bucket and prefix.
 *
 * No request is made here: a wrong bucket or wrong credentials show on the
 * first operation, with its key and the server's answer.
 */
void
s3_store_open(ObjectStore *store, const char *bucket, const char *prefix,
			  List *options, bool allow_environment_credentials)
{
	S3Store    *s3 = palloc0(sizeof(S3Store));
	const char *region = option_value(options, "region");
	const char *endpoint = option_value(options, "endpoint");
	const char *url_style = option_value(options, "url_style");
	bool		virtual_style;
	char	   *base;

	if (region == NULL || region[0] == '\0')
		region = "us-east-1";
	if (strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"region\": \"%s\"", region)));
	if (url_style != NULL)
		virtual_style = strcmp(url_style, "virtual") == 0;
	else
		virtual_style = (endpoint == NULL);
	if (endpoint == NULL)
		endpoint = psprintf("https://s3.%s.amazonaws.com", region);
	else
	{
		/* again: a server defined before the validator refused this one */
		objstore_check_endpoint(endpoint);
	}

	base = pstrdup(endpoint);
	while (strlen(base) > 0 && base[strlen(base) - 1] == '/')
		base[strlen(base) - 1] = '\0';

	if (virtual_style)
	{
		const char *host = strstr(base, "://");

		if (host == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"endpoint\": \"%s\"", endpoint)));
		host += 3;
		s3->bucket_url = psprintf("%.*s%s.%s/", (int) (host - base), base, bucket, host);
		s3->object_url_prefix = s3->bucket_url;
	}
	else
	{
		s3->bucket_url = psprintf("%s/%s", base, bucket);
		s3->object_url_prefix = psprintf("%s/%s/", base, bucket);
	}

	s3->location = store->location;
	s3->prefix = pstrdup(prefix ? prefix : "");
	s3->sigv4_provider = psprintf("aws:amz:%s:s3", region);
	http_settings_from_options(&s3->settings, options);

	s3->access_key_id = option_value(options, "access_key_id");
	s3->secret_access_key = option_value(options, "secret_access_key");
	s3->session_token = option_value(options, "session_token");
	if (s3->access_key_id == NULL && s3->secret_access_key == NULL &&
		allow_environment_credentials)
	{
		s3->access_key_id = env_value("AWS_ACCESS_KEY_ID");
		s3->secret_access_key = env_value("AWS_SECRET_ACCESS_KEY");
		if (s3->session_token == NULL)
			s3->session_token = env_value("AWS_SESSION_TOKEN");
	}
	if (s3->access_key_id == NULL || s3->secret_access_key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("no S3 credentials for store \"%s\"", store->location),
				 allow_environment_credentials
				 ? errhint("Set access_key_id and secret_access_key in a user mapping for the server, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment of the PostgreSQL server.")
				 : errhint("Set access_key_id and secret_access_key in a user mapping for the server. The server's environment credentials serve only tables and servers owned by superusers.")));
	if (s3->session_token != NULL && s3->session_token[0] == '\0')
		s3->session_token = NULL;

	/*
	 * Where the objects are: the URL objects are addressed by, which holds
	 * endpoint, bucket and URL style, and the prefix.
	 */
	store->identity = psprintf("s3 %s %s", s3->object_url_prefix, s3->prefix);
	{
		const char *parts[3] = {s3->access_key_id, s3->secret_access_key,
		s3->session_token};

		objstore_set_access_fingerprint(store, parts, 3);
	}

	store->ops = &s3_store_ops;
	store->backend = s3;
}
