/*-------------------------------------------------------------------------
 *
 * azure_store.c
 *		The Azure Blob Storage backend ("az://account/container/prefix").
 *
 * An object is a block blob named <prefix>/<key> in the container.  The
 * operations of objstore.h map onto the Blob service REST API:
 *
 *	create-if-absent	Put Blob (BlockBlob) with If-None-Match: *; above
 *						AZURE_SINGLE_PUT_LIMIT bytes, Put Block for each
 *						block and Put Block List with If-None-Match: *.
 *						409 BlobAlreadyExists or 412 mean "already exists".
 *						The put id travels as the metadata header
 *						x-ms-meta-rollout_put_id.
 *	get_many			Ranges and tails, Get Blob with x-ms-range; 404 =
 *						does not exist.  A tail needs the size first (Get
 *						Blob Properties) unless the caller knows it; a
 *						batch runs both steps concurrently.  Single reads
 *						are batches of one (objstore.c).
 *	get_put_id			Get Blob Properties (HEAD).
 *	list				List Blobs with prefix, maxresults and marker; the
 *						continuation token is the service's NextMarker, and
 *						start_after is applied by skipping.
 *	delete				Delete Blob; 202 deleted, 404 did not exist.  A
 *						batch sends its requests concurrently.
 *
 * Authentication is Shared Key (an HMAC-SHA256 of the canonical request
 * under the account key, OpenSSL) or a SAS token appended to every URL.
 * They come from the user mapping (account_key, sas_token), else, only when
 * the caller allows it (tables and servers owned by superusers), from the
 * server's environment (AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN).
 * Neither ever reaches a message: errors name the operation, the key, the
 * location, the HTTP status and the service's error code (the x-ms-error-code
 * header), never the URL's query string (a SAS token lives there), the
 * request headers or the response body, which for a failed signature echoes
 * the string that was signed.
 *
 * Robustness.  Requests go through the process's HTTP session
 * (http_session.c), as the S3 backend's do: connection reuse, connect and
 * request timeouts (connect_timeout, request_timeout server options),
 * retries with exponential backoff and jitter on connection errors,
 * timeouts, 408, 429 and 5xx, query cancel while a request is in flight,
 * and no libcurl resource leaked on ERROR.  A request is signed once;
 * its x-ms-date stays well inside the service's 15-minute window over the
 * session's 20-second retry budget.  A create whose attempt failed after
 * the request may have reached the service is ambiguous: it is retried,
 * and an "already exists" that follows is resolved by reading the blob's
 * put id (ours: CREATED).
 *
 * List Blobs answers are parsed with libxml2 (PostgreSQL itself is built
 * with it: USE_LIBXML), without network access or entity expansion, and
 * the document is freed on every path.
 *
 * Copyright (c) rollout_fdw authors
 *
 * IDENTIFICATION
 *		src/objstore/azure_store.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <time.h>

#include "commands/defrem.h"
#include "common/base64.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "rollout/maintenance_cost.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "http_session.h"
#include "objstore_backend.h"

#ifdef USE_LIBXML

#include <curl/curl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

/* The REST API version we speak (x-ms-version). */
#define AZURE_API_VERSION "2021-12-02"

/* The metadata entry that holds an object's put id. */
#define AZURE_PUT_ID_HEADER "x-ms-meta-rollout_put_id"

/* Objects up to this size are one Put Blob; larger ones go in blocks. */
#define AZURE_SINGLE_PUT_LIMIT ((int64) 8 * 1024 * 1024)
#define AZURE_BLOCK_SIZE ((int64) 8 * 1024 * 1024)

/* List Blobs returns at most this many entries per page. */
#define AZURE_MAX_LIST_RESULTS 5000

/* Error responses keep at most this much of the body (for <Code>). */
#define AZURE_ERROR_BODY_MAX 4096

/* The backend's private state, ObjectStore.backend. */
typedef struct AzureStore
{
	char	   *account;
	char	   *container;
	char	   *prefix;			/* "" or "a/b/" (with the trailing slash) */
	char	   *endpoint;		/* "http://127.0.0.1:10000/devstoreaccount1" */
	char	   *endpoint_path;	/* its path: "/devstoreaccount1" or "" */
	unsigned char *account_key; /* decoded, or NULL */
	int			account_key_length;
	char	   *sas_token;		/* without '?', or NULL */
	HttpSettings settings;		/* timeouts and TLS (server options) */
} AzureStore;

/* A request body: bytes in memory or a region of a local file. */
typedef struct AzureBody
{
	const char *data;			/* memory body, or NULL */
	const char *file_path;		/* file body when data == NULL */
	int64		file_offset;
	int64		length;
} AzureBody;

/* A body of length bytes at data. */
static inline AzureBody
azure_memory_body(const char *data, int64 length)
{
	AzureBody	body = {0};

	body.data = data;
	body.length = length;
	return body;
}

/* A body of length bytes at offset of the local file path. */
static inline AzureBody
azure_file_body(const char *path, int64 offset, int64 length)
{
	AzureBody	body = {0};

	body.file_path = path;
	body.file_offset = offset;
	body.length = length;
	return body;
}

/* One request, prepared in palloc'd memory before it is sent. */
typedef struct AzureRequest
{
	const char *operation;		/* "create", "read"... for messages */
	const char *key;			/* the object key, for messages; or NULL */
	const char *method;
	char	   *path;			/* encoded: /container/blob */
	/* query parameters, sorted by name, values not encoded */
	int			query_count;
	const char *query_names[6];
	const char *query_values[6];
	/* headers that are signed in their own slot, or NULL */
	const char *content_type;
	const char *if_none_match;
	/* x-ms-* headers besides date and version, sorted by name */
	int			ms_header_count;
	const char *ms_header_names[4];
	const char *ms_header_values[4];
	AzureBody  *body;			/* or NULL */
	StringInfo	response;		/* 2xx body appended here; or NULL */
} AzureRequest;

/* What came back, taken from the HTTP session's answer. */
typedef struct AzureResponse
{
	long		status;			/* HTTP status of the final attempt */
	int			attempts;
	bool		ambiguous;		/* an earlier attempt may have been applied */
	char		error_code[128];	/* x-ms-error-code */
	char		put_id[128];
	bool		has_put_id;
	int64		content_length; /* -1 if absent */
	int64		range_first;	/* first byte from Content-Range, or -1 */
	int64		range_total;	/* size from Content-Range, -1 if absent */
	char		error_body[AZURE_ERROR_BODY_MAX];	/* start of a non-2xx body */
	int			error_body_length;
} AzureResponse;

static bool azure_blob_missing(AzureResponse *response);

static ObjectStoreCreateResult azure_create_if_absent(ObjectStore *store,
													  const char *key,
													  const char *data,
													  size_t len,
													  const char *put_id);
static ObjectStoreCreateResult azure_create_from_file_if_absent(ObjectStore *store,
																const char *key,
																const char *local_path,
																const char *put_id);
static bool azure_get_put_id(ObjectStore *store, const char *key,
							 char **put_id);
static ObjectStoreListing *azure_list(ObjectStore *store, const char *prefix,
									  const char *start_after, int max_keys,
									  const char *continuation);
static bool azure_delete_object(ObjectStore *store, const char *key);
static void azure_delete_many(ObjectStore *store, const char *const *keys,
							  int count, bool *deleted, int max_in_flight);
static void azure_get_many(ObjectStore *store, ObjectStoreRead *reads,
						   int nreads, int max_in_flight);

static const ObjectStoreOps azure_store_ops = {
	.create_if_absent = azure_create_if_absent,
	.create_from_file_if_absent = azure_create_from_file_if_absent,
	.get_range = NULL,			/* get_many reads */
	.get_tail = NULL,
	.get_put_id = azure_get_put_id,
	.list = azure_list,
	.list_starts_after = false,
	.delete_object = azure_delete_object,
	.delete_many = azure_delete_many,
	.get_many = azure_get_many,
	.close = NULL,
};

bool
azure_store_available(void)
{
	return true;
}

/* ----------------------------------------------------------------
 * Options
 * ----------------------------------------------------------------
 */

/* The value of option name in options, or NULL. */
static const char *
azure_option(List *options, const char *name)
{
	ListCell   *lc;
	const char *value = NULL;

	/* later entries (the user mapping) win over earlier ones */
	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, name) == 0)
			value = defGetString(def);
	}
	return value;
}

/*
 * azure_store_open
 *		Fill in an ObjectStore for az://account/container/prefix.
 *
 * Nothing is sent here: a wrong key or a missing container is reported by
 * the first request, naming it.  Credentials are required (there is no
 * anonymous write access to a container), from the user mapping or else the
 * server's environment.
 */
void
azure_store_open(ObjectStore *store, const char *account,
				 const char *container, const char *prefix, List *options,
				 bool allow_environment_credentials)
{
	AzureStore *azure = palloc0(sizeof(AzureStore));
	const char *endpoint = azure_option(options, "endpoint");
	const char *account_key = azure_option(options, "account_key");
	const char *sas_token = azure_option(options, "sas_token");
	const char *after_scheme;
	const char *path;

	azure->account = pstrdup(account);
	azure->container = pstrdup(container);
	azure->prefix = (prefix && prefix[0]) ? psprintf("%s/", prefix) : pstrdup("");

	if (endpoint == NULL)
		azure->endpoint = psprintf("https://%s.blob.core.windows.net", account);
	else
	{
		azure->endpoint = pstrdup(endpoint);
		/* the path is joined with '/': drop trailing slashes */
		while (strlen(azure->endpoint) > 0 &&
			   azure->endpoint[strlen(azure->endpoint) - 1] == '/')
			azure->endpoint[strlen(azure->endpoint) - 1] = '\0';
	}
	if (strchr(azure->endpoint, '?') != NULL || strchr(azure->endpoint, '#') != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"endpoint\" of store \"%s\"", store->location),
				 errdetail("The endpoint must not hold a query string; give a SAS token in the user mapping option \"sas_token\".")));
	objstore_check_endpoint(azure->endpoint);
	after_scheme = strstr(azure->endpoint, "://") + 3;
	path = strchr(after_scheme, '/');
	azure->endpoint_path = pstrdup(path ? path : "");

	http_settings_from_options(&azure->settings, options);

	/*
	 * Credentials: the user mapping, else (when the caller allows it) the
	 * environment.
	 */
	if (account_key == NULL && sas_token == NULL && allow_environment_credentials)
	{
		account_key = getenv("AZURE_STORAGE_KEY");
		if (account_key != NULL && account_key[0] == '\0')
			account_key = NULL;
		if (account_key == NULL)
		{
			sas_token = getenv("AZURE_STORAGE_SAS_TOKEN");
			if (sas_token != NULL && sas_token[0] == '\0')
				sas_token = NULL;
		}
	}
	if (account_key != NULL)
	{
		int			encoded_length = strlen(account_key);
		int			decoded_capacity = pg_b64_dec_len(encoded_length);

		azure->account_key = palloc(decoded_capacity + 1);
		azure->account_key_length = pg_b64_decode(account_key, encoded_length,
												  (char *) azure->account_key,
												  decoded_capacity);
		if (azure->account_key_length <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid account key for store \"%s\"", store->location),
					 errdetail("An Azure account key is base64; the value given does not decode.")));
	}
	else if (sas_token != NULL)
	{
		while (*sas_token == '?')
			sas_token++;
		azure->sas_token = pstrdup(sas_token);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("no credentials for store \"%s\"", store->location),
				 allow_environment_credentials
				 ? errhint("Set the option \"account_key\" or \"sas_token\" in a user mapping for the server, or AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN in the server's environment.")
				 : errhint("Set the option \"account_key\" or \"sas_token\" in a user mapping for the server. The server's environment credentials serve only tables and servers owned by superusers.")));

	/* where the blobs are: endpoint, container and prefix */
	store->identity = psprintf("az %s %s/%s/%s", azure->endpoint, azure->account,
							   azure->container, azure->prefix);
	{
		const char *parts[2] = {account_key, sas_token};

		objstore_set_access_fingerprint(store, parts, 2);
	}

	store->ops = &azure_store_ops;
	store->backend = azure;
}

/* ----------------------------------------------------------------
 * Keys, URLs and signing
 * ----------------------------------------------------------------
 */

/* Append s percent-encoded: unreserved characters kept, '/' kept if asked. */
static void
azure_append_encoded(StringInfo buf, const char *s, bool keep_slash)
{
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			(c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
			c == '~' || (keep_slash && c == '/'))
			appendStringInfoChar(buf, c);
		else
			appendStringInfo(buf, "%%%02X", c);
	}
}

/* Refuse keys the contract forbids (bugs in the caller). */
static void
azure_check_key(ObjectStore *store, const char *key)
{
	if (key == NULL || key[0] == '\0' || key[0] == '/' ||
		strstr(key, "//") != NULL || strlen(key) > 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid object key \"%s\" for store \"%s\"",
						key ? key : "", store->location)));
}

/* The encoded request path of a blob: /container/prefix/key. */
static char *
azure_blob_path(AzureStore *azure, const char *key)
{
	StringInfoData path;

	initStringInfo(&path);
	appendStringInfoChar(&path, '/');
	azure_append_encoded(&path, azure->container, false);
	appendStringInfoChar(&path, '/');
	azure_append_encoded(&path, azure->prefix, true);
	azure_append_encoded(&path, key, true);
	return path.data;
}

/* Base64 of an HMAC-SHA256 of message under the account key. */
static char *
azure_sign(AzureStore *azure, const char *message)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_length = 0;
	char	   *encoded;
	int			encoded_length;

	if (HMAC(EVP_sha256(), azure->account_key, azure->account_key_length,
			 (const unsigned char *) message, strlen(message),
			 mac, &mac_length) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute an HMAC-SHA256 request signature")));
	encoded = palloc(pg_b64_enc_len(mac_length) + 1);
	encoded_length = pg_b64_encode((const char *) mac, mac_length, encoded,
								   pg_b64_enc_len(mac_length));
	if (encoded_length < 0)
		elog(ERROR, "could not base64-encode a request signature");
	encoded[encoded_length] = '\0';
	explicit_bzero(mac, sizeof(mac));
	return encoded;
}

/* An RFC 1123 date for x-ms-date, independent of the locale. */
static char *
azure_http_date(void)
{
	static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	"Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	time_t		now = time(NULL);
	struct tm	tm;

	gmtime_r(&now, &tm);
	return psprintf("%s, %02d %s %04d %02d:%02d:%02d GMT",
					days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon],
					tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* ----------------------------------------------------------------
 * Requests
 * ----------------------------------------------------------------
 */

/* The URL of a request, with its query string and any SAS token. */
static char *
azure_request_url(AzureStore *azure, AzureRequest *request)
{
	StringInfoData url;
	char		separator = '?';

	initStringInfo(&url);
	appendStringInfoString(&url, azure->endpoint);
	appendStringInfoString(&url, request->path);
	for (int i = 0; i < request->query_count; i++)
	{
		appendStringInfoChar(&url, separator);
		appendStringInfo(&url, "%s=", request->query_names[i]);
		azure_append_encoded(&url, request->query_values[i], false);
		separator = '&';
	}
	if (azure->sas_token != NULL)
	{
		appendStringInfoChar(&url, separator);
		appendStringInfoString(&url, azure->sas_token);
	}
	return url.data;
}

/*
 * The header lines of a request (palloc'd "Name: value" strings, NULL
 * terminated), with the Shared Key Authorization when there is an account
 * key.  The string to sign follows the Blob service's rules for versions
 * 2015-02-21 and later: the standard headers in fixed slots (an empty
 * Content-Length when zero), then the x-ms-* headers sorted, then the
 * canonicalized resource "/account<path>" with the query parameters as
 * "\nname:value" lines.  For the emulator's path-style URLs the path
 * itself starts with the account name, so the account appears twice.
 */
static char **
azure_request_headers(AzureStore *azure, AzureRequest *request)
{
	char	  **lines = palloc0(sizeof(char *) * 16);
	int			n = 0;
	char	   *date = azure_http_date();
	int64		content_length = request->body ? request->body->length : 0;
	const char *ms_names[8];
	const char *ms_values[8];
	int			ms_count = 0;

	/* x-ms-* headers in sorted order: the request's, date and version */
	ms_names[ms_count] = "x-ms-date";
	ms_values[ms_count++] = date;
	for (int i = 0; i < request->ms_header_count; i++)
	{
		ms_names[ms_count] = request->ms_header_names[i];
		ms_values[ms_count++] = request->ms_header_values[i];
	}
	ms_names[ms_count] = "x-ms-version";
	ms_values[ms_count++] = AZURE_API_VERSION;
	for (int i = 1; i < ms_count; i++)
	{
		for (int j = i; j > 0 && strcmp(ms_names[j - 1], ms_names[j]) > 0; j--)
		{
			const char *t = ms_names[j];

			ms_names[j] = ms_names[j - 1];
			ms_names[j - 1] = t;
			t = ms_values[j];
			ms_values[j] = ms_values[j - 1];
			ms_values[j - 1] = t;
		}
	}

	for (int i = 0; i < ms_count; i++)
		lines[n++] = psprintf("%s: %s", ms_names[i], ms_values[i]);
	if (request->content_type)
		lines[n++] = psprintf("Content-Type: %s", request->content_type);
	if (request->if_none_match)
		lines[n++] = psprintf("If-None-Match: %s", request->if_none_match);
	if (request->body)
		lines[n++] = pstrdup("Expect:");	/* no 100-continue round trip */

	if (azure->account_key != NULL)
	{
		StringInfoData to_sign;
		char	   *signature;

		initStringInfo(&to_sign);
		/* verb, then the empty encoding and language */
		appendStringInfo(&to_sign, "%s\n\n\n", request->method);
		if (content_length > 0)
			appendStringInfo(&to_sign, INT64_FORMAT, content_length);
		/* empty MD5, the type, empty date, if-*, range */
		appendStringInfo(&to_sign, "\n\n%s\n\n\n\n%s\n\n\n",
						 request->content_type ? request->content_type : "",
						 request->if_none_match ? request->if_none_match : "");
		for (int i = 0; i < ms_count; i++)
			appendStringInfo(&to_sign, "%s:%s\n", ms_names[i], ms_values[i]);
		appendStringInfo(&to_sign, "/%s%s%s", azure->account,
						 azure->endpoint_path, request->path);
		for (int i = 0; i < request->query_count; i++)
			appendStringInfo(&to_sign, "\n%s:%s", request->query_names[i],
							 request->query_values[i]);

		signature = azure_sign(azure, to_sign.data);
		lines[n++] = psprintf("Authorization: SharedKey %s:%s",
							  azure->account, signature);
		pfree(signature);
		pfree(to_sign.data);
	}
	lines[n] = NULL;
	return lines;
}

/*
 * Describe a request for the HTTP session: its URL, its signed headers and
 * its body.  The header lines (one holds the signature) are returned in
 * *header_lines so that the caller can wipe them once the request is done.
 */
static void
azure_prepare(ObjectStore *store, AzureRequest *request, HttpRequest *http,
			  char ***header_lines)
{
	AzureStore *azure = (AzureStore *) store->backend;
	List	   *headers = NIL;

	*header_lines = azure_request_headers(azure, request);
	for (int i = 0; (*header_lines)[i] != NULL; i++)
		headers = lappend(headers, (*header_lines)[i]);

	memset(http, 0, sizeof(HttpRequest));
	http->method = request->method;
	http->url = azure_request_url(azure, request);
	http->headers = headers;
	if (request->body != NULL)
	{
		if (request->body->data != NULL)
		{
			http->body = request->body->data;
			http->body_length = (size_t) request->body->length;
		}
		else
		{
			http->body_file = request->body->file_path;
			http->body_file_offset = request->body->file_offset;
			http->body_file_length = request->body->length;
		}
	}
	http->settings = &azure->settings;
	http->description = request->key ?
		psprintf("%s of object \"%s\" in store \"%s\"", request->operation,
				 request->key, store->location) :
		psprintf("%s of objects in store \"%s\"", request->operation,
				 store->location);
}

/* Wipe and free the header lines of a request (one holds a signature). */
static void
azure_free_header_lines(char **header_lines)
{
	for (int i = 0; header_lines[i] != NULL; i++)
	{
		explicit_bzero(header_lines[i], strlen(header_lines[i]));
		pfree(header_lines[i]);
	}
	pfree(header_lines);
}

/* A decimal header value, or -1 when absent or malformed. */
static int64
azure_header_int64(const HttpResponse *http, const char *name)
{
	const char *value = http_response_header(http, name);
	char	   *end;
	int64		result;

	if (value == NULL || *value == '\0')
		return -1;
	errno = 0;
	result = strtoll(value, &end, 10);
	if (errno != 0 || *end != '\0' || result < 0)
		return -1;
	return result;
}

/*
 * Turn the HTTP session's answer into an AzureResponse.  The body of a
 * successful answer stays in body (after start); the beginning of any other
 * answer's body is moved into response->error_body, for the <Code> element,
 * and taken out of body, so that a failed read leaves nothing behind.
 */
static void
azure_interpret(const HttpResponse *http, StringInfo body, int start,
				AzureResponse *response)
{
	const char *value;

	memset(response, 0, sizeof(AzureResponse));
	response->status = http->status;
	response->attempts = http->attempts;
	response->ambiguous = http->ambiguous;
	response->content_length = azure_header_int64(http, "Content-Length");

	value = http_response_header(http, "x-ms-error-code");
	if (value != NULL)
		strlcpy(response->error_code, value, sizeof(response->error_code));
	value = http_response_header(http, AZURE_PUT_ID_HEADER);
	if (value != NULL)
	{
		strlcpy(response->put_id, value, sizeof(response->put_id));
		response->has_put_id = true;
	}
	http_content_range(http, &response->range_first, &response->range_total);

	if (body != NULL && (response->status < 200 || response->status >= 300))
	{
		int			length = Min(body->len - start, AZURE_ERROR_BODY_MAX - 1);

		memcpy(response->error_body, body->data + start, length);
		response->error_body[length] = '\0';
		response->error_body_length = length;
		body->len = start;
		body->data[start] = '\0';
	}
}

/* The service's error code of a failed response, for messages. */
static const char *
azure_error_code(AzureResponse *response)
{
	const char *start;
	const char *end;

	if (response->error_code[0] != '\0')
		return objstore_server_text(response->error_code, 64);
	/* fall back to <Code>...</Code> of the body */
	start = strstr(response->error_body, "<Code>");
	if (start != NULL)
	{
		start += strlen("<Code>");
		end = strstr(start, "</Code>");
		if (end != NULL && end - start < (long) sizeof(response->error_code))
		{
			memcpy(response->error_code, start, end - start);
			response->error_code[end - start] = '\0';
			return objstore_server_text(response->error_code, 64);
		}
	}
	return NULL;
}

/*
 * Raise the ERROR for a failed request: the operation, the key, the store,
 * the HTTP status and Azure's error code, never the URL or the headers.
 */
static void
azure_report_failure(ObjectStore *store, AzureRequest *request,
					 AzureResponse *response)
{
	const char *what = "objects";
	const char *code;

	if (request->key != NULL)
		what = psprintf("object \"%s\"", request->key);

	code = azure_error_code(response);
	ereport(ERROR,
			(errcode(response->status == 401 || response->status == 403 ?
					 ERRCODE_INSUFFICIENT_PRIVILEGE :
					 response->status == 404 ? ERRCODE_UNDEFINED_OBJECT :
					 ERRCODE_FDW_ERROR),
			 errmsg("could not %s %s in store \"%s\": HTTP status %ld%s%s",
					request->operation, what, store->location,
					response->status, code ? ", Azure error code " : "",
					code ? code : ""),
			 response->status == 403 ?
			 errhint("Check the account_key or sas_token of the user mapping.") : 0,
			 code != NULL && strcmp(code, "ContainerNotFound") == 0 ?
			 errhint("The container named in the location does not exist; create it first.") : 0));
}

/*
 * Perform prepared requests, concurrently when there are several; their
 * header lines are wiped on every path.
 */
static void
azure_perform_many(HttpRequest *http, HttpResponse *http_responses, int count,
				   int max_in_flight, char ***header_lines)
{
	PG_TRY();
	{
		if (count == 1)
			http_session_perform(http, http_responses);
		else
			http_session_perform_many(http, http_responses, count, max_in_flight);
	}
	PG_CATCH();
	{
		for (int i = 0; i < count; i++)
			azure_free_header_lines(header_lines[i]);
		PG_RE_THROW();
	}
	PG_END_TRY();
	for (int i = 0; i < count; i++)
		azure_free_header_lines(header_lines[i]);
}

/*
 * azure_request_many
 *		Send requests through the HTTP session, at most max_in_flight at
 *		once; the session retries what is worth retrying.
 *
 * Fills responses[i] for requests[i], whatever the HTTP status (the caller
 * decides what 404 or 409 mean).  Failures without an HTTP answer, after
 * the retries, are raised by the session.
 */
static void
azure_request_many(ObjectStore *store, AzureRequest *requests,
				   AzureResponse *responses, int count, int max_in_flight)
{
	HttpRequest *http = palloc0(sizeof(HttpRequest) * count);
	HttpResponse *http_responses = palloc0(sizeof(HttpResponse) * count);
	char	 ***header_lines = palloc0(sizeof(char **) * count);
	StringInfo *bodies = palloc0(sizeof(StringInfo) * count);
	int		   *starts = palloc0(sizeof(int) * count);

	for (int i = 0; i < count; i++)
	{
		/* error bodies are wanted even without a response buffer */
		bodies[i] = requests[i].response ? requests[i].response : makeStringInfo();
		starts[i] = bodies[i]->len;
	}
	for (int i = 0; i < count; i++)
	{
		PG_TRY();
		{
			azure_prepare(store, &requests[i], &http[i], &header_lines[i]);
		}
		PG_CATCH();
		{
			for (int j = 0; j < i; j++)
				azure_free_header_lines(header_lines[j]);
			PG_RE_THROW();
		}
		PG_END_TRY();
		http[i].response_body = bodies[i];
	}

	azure_perform_many(http, http_responses, count, max_in_flight, header_lines);

	for (int i = 0; i < count; i++)
	{
		azure_interpret(&http_responses[i], bodies[i], starts[i], &responses[i]);
		if (bodies[i] != requests[i].response)
		{
			pfree(bodies[i]->data);
			pfree(bodies[i]);
		}
		pfree((char *) http[i].url);
	}
	pfree(http);
	pfree(http_responses);
	pfree(header_lines);
	pfree(bodies);
	pfree(starts);
}

/*
 * azure_request
 *		One request (see azure_request_many).  Returns its HTTP status;
 *		*ambiguous is set when some failed attempt may have been carried
 *		out by the service.
 */
static long
azure_request(ObjectStore *store, AzureRequest *request,
			  AzureResponse *response, bool *ambiguous)
{
	azure_request_many(store, request, response, 1, 1);
	if (ambiguous)
		*ambiguous = response->ambiguous;
	return response->status;
}

/* A blob request skeleton. */
static void
azure_blob_request(AzureRequest *request, ObjectStore *store,
				   const char *operation, const char *method, const char *key)
{
	memset(request, 0, sizeof(*request));
	request->operation = operation;
	request->method = method;
	request->key = key;
	request->path = azure_blob_path((AzureStore *) store->backend, key);
}

/* ----------------------------------------------------------------
 * Operations
 * ----------------------------------------------------------------
 */

/*
 * Get Blob Properties: false if absent; the size and the put id (NULL if
 * none) otherwise.
 */
static bool
azure_blob_properties(ObjectStore *store, const char *key,
					  int64 *size, char **put_id)
{
	AzureRequest request;
	AzureResponse response;
	long		status;

	azure_blob_request(&request, store, "read properties of", "HEAD", key);
	status = azure_request(store, &request, &response, NULL);
	if (azure_blob_missing(&response))
		return false;
	if (status != 200)
		azure_report_failure(store, &request, &response);
	if (size)
		*size = response.content_length;
	if (put_id)
		*put_id = response.has_put_id ? pstrdup(response.put_id) : NULL;
	return true;
}

/*
 * Decide the outcome of a create that found the key taken: our own earlier
 * attempt may be the one holding it, and the put id says.  Checked after
 * every such answer, not only after an attempt known to be ambiguous,
 * because libcurl itself resends a request once when a reused connection
 * turns out to be closed (as s3_store.c does).
 */
static ObjectStoreCreateResult
azure_resolve_existing(ObjectStore *store, const char *key,
					   const char *put_id, bool ambiguous)
{
	char	   *holder = NULL;

	if (put_id == NULL)
		return OBJSTORE_ALREADY_EXISTS;
	if (!azure_blob_properties(store, key, NULL, &holder))
	{
		if (!ambiguous)
			return OBJSTORE_ALREADY_EXISTS; /* deleted since: not ours */
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not create object \"%s\" in store \"%s\": it was reported to exist and then was not found",
						key, store->location)));
	}
	if (holder != NULL && strcmp(holder, put_id) == 0)
	{
		elog(DEBUG1, "rollout_fdw: create of object \"%s\" in store \"%s\" landed on an earlier attempt%s",
			 key, store->location, ambiguous ? "" : " (a resent request)");
		return OBJSTORE_CREATED;
	}
	return OBJSTORE_ALREADY_EXISTS;
}

/*
 * A 404 that means "no such blob".  A missing container also answers 404
 * (ContainerNotFound): that is a misconfigured store, not an empty one.
 */
static bool
azure_blob_missing(AzureResponse *response)
{
	const char *code;

	if (response->status != 404)
		return false;
	code = azure_error_code(response);
	return code == NULL || strcmp(code, "BlobNotFound") == 0;
}

static bool
azure_status_means_exists(AzureResponse *response)
{
	return response->status == 409 || response->status == 412;
}

/* Put Blob with If-None-Match: * from a body. */
static ObjectStoreCreateResult
azure_put_blob(ObjectStore *store, const char *key, AzureBody *body,
			   const char *put_id)
{
	AzureRequest request;
	AzureResponse response;
	bool		ambiguous;
	long		status;

	azure_blob_request(&request, store, "create", "PUT", key);
	request.content_type = "application/octet-stream";
	request.if_none_match = "*";
	request.ms_header_names[0] = "x-ms-blob-type";
	request.ms_header_values[0] = "BlockBlob";
	request.ms_header_names[1] = AZURE_PUT_ID_HEADER;
	request.ms_header_values[1] = put_id;
	request.ms_header_count = 2;
	request.body = body;

	status = azure_request(store, &request, &response, &ambiguous);
	if (status == 201)
		return OBJSTORE_CREATED;
	if (azure_status_means_exists(&response))
		return azure_resolve_existing(store, key, put_id, ambiguous);
	azure_report_failure(store, &request, &response);
	return OBJSTORE_ALREADY_EXISTS; /* not reached */
}

/*
 * Create key from bytes in memory (create_if_absent) with one conditional Put
 * Blob; a NULL data with len 0 makes an empty blob.
 */
static ObjectStoreCreateResult
azure_create_if_absent(ObjectStore *store, const char *key, const char *data,
					   size_t len, const char *put_id)
{
	AzureBody	body = azure_memory_body(data ? data : "", (int64) len);

	azure_check_key(store, key);
	return azure_put_blob(store, key, &body, put_id);
}

/*
 * A large object in blocks: Put Block for each AZURE_BLOCK_SIZE region of
 * the file, then Put Block List with If-None-Match: *, which makes the
 * blob appear whole or not at all.  Block ids carry the put id, so racing
 * writers of one key never mix their blocks; uncommitted blocks of a
 * loser are collected by the service.
 */
static ObjectStoreCreateResult
azure_put_blocks(ObjectStore *store, const char *key, const char *local_path, int64 size,
				 const char *put_id)
{
	int			block_count = (int) ((size + AZURE_BLOCK_SIZE - 1) / AZURE_BLOCK_SIZE);
	char	  **block_ids = palloc(sizeof(char *) * block_count);
	StringInfoData block_list;
	AzureRequest request;
	AzureResponse response;
	AzureBody	list_body;
	bool		ambiguous;
	long		status;

	for (int i = 0; i < block_count; i++)
	{
		char	   *raw = psprintf("%.36s-%08d", put_id, i);
		int			raw_length = strlen(raw);
		char	   *encoded = palloc(pg_b64_enc_len(raw_length) + 1);
		int			encoded_length = pg_b64_encode(raw, raw_length, encoded,
												   pg_b64_enc_len(raw_length));
		AzureBody	body = azure_file_body(local_path, (int64) i * AZURE_BLOCK_SIZE,
										   Min(AZURE_BLOCK_SIZE,
											   size - (int64) i * AZURE_BLOCK_SIZE));

		encoded[encoded_length] = '\0';
		block_ids[i] = encoded;

		CHECK_FOR_INTERRUPTS();
		azure_blob_request(&request, store, "upload a block of", "PUT", key);
		request.content_type = "application/octet-stream";
		request.query_names[0] = "blockid";
		request.query_values[0] = encoded;
		request.query_names[1] = "comp";
		request.query_values[1] = "block";
		request.query_count = 2;
		request.body = &body;
		status = azure_request(store, &request, &response, NULL);
		if (status != 201)
			azure_report_failure(store, &request, &response);
		pfree(raw);
	}

	initStringInfo(&block_list);
	appendStringInfoString(&block_list,
						   "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
	for (int i = 0; i < block_count; i++)
		appendStringInfo(&block_list, "<Latest>%s</Latest>", block_ids[i]);
	appendStringInfoString(&block_list, "</BlockList>");

	list_body = azure_memory_body(block_list.data, block_list.len);
	azure_blob_request(&request, store, "create", "PUT", key);
	request.content_type = "application/xml";
	request.if_none_match = "*";
	request.query_names[0] = "comp";
	request.query_values[0] = "blocklist";
	request.query_count = 1;
	request.ms_header_names[0] = AZURE_PUT_ID_HEADER;
	request.ms_header_values[0] = put_id;
	request.ms_header_names[1] = "x-ms-blob-content-type";
	request.ms_header_values[1] = "application/octet-stream";
	request.ms_header_count = 2;
	request.body = &list_body;

	status = azure_request(store, &request, &response, &ambiguous);
	if (status == 201)
		return OBJSTORE_CREATED;
	if (azure_status_means_exists(&response))
		return azure_resolve_existing(store, key, put_id, ambiguous);
	if (status == 400 && azure_error_code(&response) != NULL &&
		strcmp(azure_error_code(&response), "InvalidBlockList") == 0)
	{
		/* a winner's commit discarded our uncommitted blocks */
		char	   *holder = NULL;

		if (azure_blob_properties(store, key, NULL, &holder))
			return (holder && strcmp(holder, put_id) == 0) ?
				OBJSTORE_CREATED : OBJSTORE_ALREADY_EXISTS;
	}
	azure_report_failure(store, &request, &response);
	return OBJSTORE_ALREADY_EXISTS; /* not reached */
}

/*
 * Create key from a local file (create_from_file_if_absent): one Put Blob up
 * to AZURE_SINGLE_PUT_LIMIT bytes, else blocks committed by one conditional
 * Put Block List (azure_put_blocks).  The size is taken from stat() once, so
 * the file must not change while it is uploaded.
 */
static ObjectStoreCreateResult
azure_create_from_file_if_absent(ObjectStore *store, const char *key,
								 const char *local_path, const char *put_id)
{
	struct stat st;
	ObjectStoreCreateResult result;

	azure_check_key(store, key);
	if (stat(local_path, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\" to create object \"%s\" in store \"%s\": %m",
						local_path, key, store->location)));

	if ((int64) st.st_size <= AZURE_SINGLE_PUT_LIMIT)
	{
		AzureBody	body = azure_file_body(local_path, 0, (int64) st.st_size);

		result = azure_put_blob(store, key, &body, put_id);
	}
	else
		result = azure_put_blocks(store, key, local_path, (int64) st.st_size,
								  put_id);

	/* a maintenance pass pays for the upload after it (maintenance_cost.c) */
	maintenance_cost_charge_written_bytes((int64) st.st_size);
	maintenance_cost_delay_point();
	return result;
}

/*
 * The size of the object a read's answer came from: a 206's Content-Range
 * total (its Content-Length is the range's; without the total there is no
 * size), else its Content-Length.
 */
static int64
azure_answer_object_size(ObjectStore *store, const char *key,
						 const AzureResponse *response)
{
	if (response->status != 206)
		return response->content_length;
	if (response->range_total < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not read object \"%s\" in store \"%s\": no object size in the answer",
						key, store->location)));
	return response->range_total;
}

/*
 * A batch of reads: Get Blob with x-ms-range, at most max_in_flight at once.
 *
 * The Blob service has no suffix ranges, so a tail read needs the object's
 * size first: the caller's size_hint, else Get Blob Properties, all of the
 * batch's at once before the reads.  A hint is checked against the size the
 * read reports (Content-Range); a read made with a wrong hint is made again
 * without it.  A read of no bytes is only the properties.  A range starting
 * at or past the end (416) reads as empty, the size then coming from the
 * properties.
 */
static void
azure_get_many(ObjectStore *store, ObjectStoreRead *reads, int nreads,
			   int max_in_flight)
{
	AzureRequest *requests = palloc0(sizeof(AzureRequest) * nreads);
	AzureResponse *responses = palloc0(sizeof(AzureResponse) * nreads);
	int		   *read_of = palloc(sizeof(int) * nreads);
	int64	   *sizes = palloc(sizeof(int64) * nreads);
	bool	   *skip = palloc0(sizeof(bool) * nreads);
	bool	   *hinted = palloc0(sizeof(bool) * nreads);
	int		   *out_before = palloc(sizeof(int) * nreads);
	int			count = 0;

	/* 1. the sizes that tails (without a hint) and empty reads need */
	for (int i = 0; i < nreads; i++)
	{
		ObjectStoreRead *read = &reads[i];

		azure_check_key(store, read->key);
		sizes[i] = -1;
		if (read->tail && read->length >= 0 && read->size_hint >= 0)
		{
			sizes[i] = read->size_hint;
			hinted[i] = true;
		}
		else if (read->length == 0 || (read->tail && read->length > 0))
		{
			azure_blob_request(&requests[count], store, "read properties of",
							   "HEAD", read->key);
			read_of[count++] = i;
		}
	}
	if (count > 0)
		azure_request_many(store, requests, responses, count, max_in_flight);
	for (int j = 0; j < count; j++)
	{
		int			i = read_of[j];

		if (azure_blob_missing(&responses[j]))
		{
			reads[i].found = false;
			skip[i] = true;
			continue;
		}
		if (responses[j].status != 200)
			azure_report_failure(store, &requests[j], &responses[j]);
		sizes[i] = responses[j].content_length;
		if (reads[i].length == 0)
		{
			reads[i].found = true;
			reads[i].object_size = sizes[i];
			skip[i] = true;
		}
	}

	/* 2. the reads */
	count = 0;
	for (int i = 0; i < nreads; i++)
	{
		ObjectStoreRead *read = &reads[i];
		AzureRequest *request = &requests[count];
		int64		offset = read->tail ? 0 : read->offset;
		int64		length = read->length;

		if (skip[i])
			continue;
		if (read->tail && read->length >= 0)
		{
			offset = read->length >= sizes[i] ? 0 : sizes[i] - read->length;
			length = sizes[i] - offset;
			if (length == 0)
			{
				/* an empty object: nothing to read */
				read->found = true;
				read->object_size = sizes[i];
				continue;
			}
		}
		azure_blob_request(request, store, "read", "GET", read->key);
		if (offset > 0 || length > 0)
		{
			request->ms_header_names[0] = "x-ms-range";
			request->ms_header_values[0] = length > 0 ?
				psprintf("bytes=" INT64_FORMAT "-" INT64_FORMAT, offset, offset + length - 1) :
				psprintf("bytes=" INT64_FORMAT "-", offset);
			request->ms_header_count = 1;
		}
		request->response = read->out;
		out_before[i] = read->out->len;
		read_of[count++] = i;
	}
	if (count > 0)
		azure_request_many(store, requests, responses, count, max_in_flight);
	for (int j = 0; j < count; j++)
	{
		int			i = read_of[j];
		ObjectStoreRead *read = &reads[i];
		AzureResponse *response = &responses[j];
		int64		size;

		if (hinted[i] && (response->status == 416 ||
						  (response->status == 206 && response->range_total != sizes[i])))
		{
			/*
			 * The hint was wrong: drop what the range brought (the bytes
			 * before the real tail) and read the tail the long way.
			 */
			ObjectStoreRead again = *read;

			read->out->len = out_before[i];
			read->out->data[read->out->len] = '\0';
			again.size_hint = -1;
			azure_get_many(store, &again, 1, 1);
			read->found = again.found;
			read->object_size = again.object_size;
			read->answer_first = again.answer_first;
			continue;
		}
		if (azure_blob_missing(response))
		{
			read->found = false;
			continue;
		}
		if (response->status == 416)
		{
			if (!azure_blob_properties(store, read->key, &size, NULL))
			{
				read->found = false;
				continue;
			}
			read->found = true;
			read->object_size = size;
			continue;
		}
		if (response->status != 200 && response->status != 206)
			azure_report_failure(store, &requests[j], response);
		read->found = true;
		read->object_size = azure_answer_object_size(store, read->key, response);
		if (response->status == 206)
			read->answer_first = response->range_first;
	}

	pfree(requests);
	pfree(responses);
	pfree(read_of);
	pfree(sizes);
	pfree(skip);
	pfree(hinted);
	pfree(out_before);
}

static bool
azure_get_put_id(ObjectStore *store, const char *key, char **put_id)
{
	azure_check_key(store, key);
	return azure_blob_properties(store, key, NULL, put_id);
}

/*
 * Delete Blob (delete_object): true when the blob was deleted.  A 404 after an
 * ambiguous attempt counts as deleted too, since our own earlier attempt may
 * have removed it; a missing container is an ERROR, not an absent blob.
 */
static bool
azure_delete_object(ObjectStore *store, const char *key)
{
	AzureRequest request;
	AzureResponse response;
	bool		ambiguous;
	long		status;

	azure_check_key(store, key);
	azure_blob_request(&request, store, "delete", "DELETE", key);
	status = azure_request(store, &request, &response, &ambiguous);
	if (status == 202 || status == 200)
		return true;
	if (azure_blob_missing(&response))
		return ambiguous;		/* gone: perhaps by our own earlier attempt */
	azure_report_failure(store, &request, &response);
	return false;				/* not reached */
}

/*
 * Delete a batch of blobs (delete_many): the Delete Blob requests at once,
 * each answered as azure_delete_object would answer it.
 */
static void
azure_delete_many(ObjectStore *store, const char *const *keys, int count,
				  bool *deleted, int max_in_flight)
{
	AzureRequest *requests = palloc0(sizeof(AzureRequest) * count);
	AzureResponse *responses = palloc0(sizeof(AzureResponse) * count);

	for (int i = 0; i < count; i++)
	{
		azure_check_key(store, keys[i]);
		azure_blob_request(&requests[i], store, "delete", "DELETE", keys[i]);
	}
	azure_request_many(store, requests, responses, count, max_in_flight);
	for (int i = 0; i < count; i++)
	{
		if (responses[i].status == 202 || responses[i].status == 200)
			deleted[i] = true;
		else if (azure_blob_missing(&responses[i]))
			deleted[i] = responses[i].ambiguous;	/* see azure_delete_object */
		else
			azure_report_failure(store, &requests[i], &responses[i]);
	}
	pfree(requests);
	pfree(responses);
}

/* ----------------------------------------------------------------
 * Listing
 * ----------------------------------------------------------------
 */

/* The concatenated text of a node's children (bounded by libxml2). */
static void
azure_xml_text(xmlNode *node, StringInfo out)
{
	resetStringInfo(out);
	for (xmlNode *child = node->children; child != NULL; child = child->next)
	{
		if ((child->type == XML_TEXT_NODE || child->type == XML_CDATA_SECTION_NODE) &&
			child->content != NULL)
			appendStringInfoString(out, (const char *) child->content);
	}
}

static bool
azure_xml_is(xmlNode *node, const char *name)
{
	return node->type == XML_ELEMENT_NODE &&
		strcmp((const char *) node->name, name) == 0;
}

/*
 * Parse a List Blobs answer into page (entries after bound, keys with the
 * store prefix removed).  The document is freed on every path.
 */
static void
azure_parse_listing(ObjectStore *store, StringInfo body, const char *bound,
					int max_keys, ObjectStoreListing *page)
{
	AzureStore *azure = (AzureStore *) store->backend;
	size_t		prefix_length = strlen(azure->prefix);
	volatile int capacity = Max(max_keys, 1);
	xmlDoc	   *volatile doc;

	doc = xmlReadMemory(body->data, body->len, "list-blobs.xml", NULL,
						XML_PARSE_NONET | XML_PARSE_NOERROR |
						XML_PARSE_NOWARNING | XML_PARSE_NOCDATA);
	if (doc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not list objects in store \"%s\": the List Blobs answer is not valid XML",
						store->location)));
	PG_TRY();
	{
		xmlNode    *root = xmlDocGetRootElement(doc);
		StringInfoData text;

		initStringInfo(&text);
		if (root == NULL || !azure_xml_is(root, "EnumerationResults"))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("could not list objects in store \"%s\": unexpected List Blobs answer",
							store->location)));
		for (xmlNode *node = root->children; node != NULL; node = node->next)
		{
			if (azure_xml_is(node, "NextMarker"))
			{
				azure_xml_text(node, &text);
				if (text.len > 0)
					page->continuation = pstrdup(text.data);
			}
			else if (azure_xml_is(node, "Blobs"))
			{
				for (xmlNode *blob = node->children; blob != NULL; blob = blob->next)
				{
					char	   *name = NULL;
					int64		size = 0;
					TimestampTz modified = 0;

					if (!azure_xml_is(blob, "Blob"))
						continue;
					for (xmlNode *field = blob->children; field != NULL; field = field->next)
					{
						if (azure_xml_is(field, "Name"))
						{
							azure_xml_text(field, &text);
							name = pstrdup(text.data);
						}
						else if (azure_xml_is(field, "Properties"))
						{
							for (xmlNode *property = field->children; property != NULL;
								 property = property->next)
							{
								if (azure_xml_is(property, "Content-Length"))
								{
									azure_xml_text(property, &text);
									size = strtoll(text.data, NULL, 10);
								}
								else if (azure_xml_is(property, "Last-Modified"))
								{
									time_t		t;

									azure_xml_text(property, &text);
									t = curl_getdate(text.data, NULL);
									if (t != (time_t) -1)
										modified = time_t_to_timestamptz((pg_time_t) t);
								}
							}
						}
					}
					if (name == NULL || strncmp(name, azure->prefix, prefix_length) != 0)
						continue;
					if (bound != NULL && strcmp(name + prefix_length, bound) <= 0)
						continue;

					/*
					 * Without its time a blob would look older than any grace
					 * to garbage collection, an upload in flight included.
					 */
					if (modified == 0)
						ereport(ERROR,
								(errcode(ERRCODE_FDW_ERROR),
								 errmsg("could not list objects in store \"%s\": blob \"%s\" has no readable Last-Modified time",
										store->location, name)));

					/*
					 * More than maxresults (a server that ignores it) are
					 * kept too: the next page starts after NextMarker, so
					 * entries left out here would be lost to the listing.
					 */
					if (page->count == capacity)
					{
						capacity *= 2;
						page->entries = repalloc(page->entries,
												 sizeof(ObjectStoreEntry) * capacity);
					}
					page->entries[page->count].key = pstrdup(name + prefix_length);
					page->entries[page->count].size = size;
					page->entries[page->count].modified = modified;
					page->count++;
				}
			}
		}
	}
	PG_FINALLY();
	{
		xmlFreeDoc(doc);
	}
	PG_END_TRY();
}

/*
 * One page of List Blobs.  The continuation token is the service's
 * NextMarker, opaque to us and to callers.  Azure has no "start after", so
 * entries at or before start_after are skipped; a page may then be short
 * or even empty while a NextMarker remains.
 */
static ObjectStoreListing *
azure_list(ObjectStore *store, const char *prefix, const char *start_after,
		   int max_keys, const char *continuation)
{
	AzureStore *azure = (AzureStore *) store->backend;
	AzureRequest request;
	AzureResponse response;
	ObjectStoreListing *page = palloc0(sizeof(ObjectStoreListing));
	StringInfoData body;
	char	   *full_prefix = psprintf("%s%s", azure->prefix, prefix ? prefix : "");
	char	   *max_results;
	long		status;
	int			n = 0;

	max_keys = Min(max_keys, AZURE_MAX_LIST_RESULTS);
	max_results = psprintf("%d", max_keys);

	memset(&request, 0, sizeof(request));
	request.operation = "list";
	request.method = "GET";
	request.path = psprintf("/%s", azure->container);
	/* sorted by name, as the signature wants */
	request.query_names[n] = "comp";
	request.query_values[n++] = "list";
	if (continuation != NULL)
	{
		request.query_names[n] = "marker";
		request.query_values[n++] = continuation;
	}
	request.query_names[n] = "maxresults";
	request.query_values[n++] = max_results;
	if (full_prefix[0] != '\0')
	{
		request.query_names[n] = "prefix";
		request.query_values[n++] = full_prefix;
	}
	request.query_names[n] = "restype";
	request.query_values[n++] = "container";
	request.query_count = n;
	initStringInfo(&body);
	request.response = &body;

	status = azure_request(store, &request, &response, NULL);
	if (status != 200)
		azure_report_failure(store, &request, &response);

	page->entries = palloc0(sizeof(ObjectStoreEntry) * Max(max_keys, 1));
	azure_parse_listing(store, &body, start_after, max_keys, page);
	pfree(body.data);
	return page;
}

#else							/* !USE_LIBXML */

/*
 * Without libxml2 (PostgreSQL built without --with-libxml) this build has
 * no List Blobs parser: az:// locations are refused with a clear message.
 */
bool
azure_store_available(void)
{
	return false;
}

/*
 * The constructor of a build without libxml2.  objstore_check_location
 * already refuses az:// locations when azure_store_available() is false, so
 * this is reached only if that check is bypassed, and refuses the same way.
 */
void
azure_store_open(ObjectStore *store, const char *account, const char *container,
				 const char *prefix, List *options,
				 bool allow_environment_credentials)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("the az (Azure Blob Storage) backend is not available in this build"),
			 errdetail("It needs PostgreSQL built with libxml2.")));
}

#endif							/* USE_LIBXML */
