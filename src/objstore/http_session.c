/*-------------------------------------------------------------------------
 *
 * http_session.c
 *		The HTTP session of a backend process: one reused libcurl handle,
 *		timeouts, retries with backoff, interrupts, and clean-up on ERROR.
 *
 * See http_session.h for the contract.  The notes here are about how.
 *
 * One easy handle per process.  libcurl keeps its connection cache in the
 * easy handle, so reusing one handle (curl_easy_reset between requests,
 * which keeps the cache) keeps the TCP/TLS connection to the store open
 * across requests, statements and transactions.  The handle is created on
 * first use and lives until the process exits; nothing about it is tied to
 * a transaction, so an ERROR needs no clean-up of the handle itself.
 *
 * No ERROR crosses libcurl.  A longjmp out of a curl callback would leave
 * the handle in an undefined state, so callbacks never raise: the ones that
 * allocate catch any ERROR, keep it, and make curl stop; the progress
 * callback only asks curl to stop when an interrupt is pending; the ERROR
 * or the interrupt is then raised after curl_easy_perform has returned.
 * What is not palloc'd (curl's header list, the upload file's descriptor) is
 * released in PG_FINALLY.
 *
 * Copyright (c) rollout_fdw authors
 *
 * IDENTIFICATION
 *		src/objstore/http_session.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "commands/defrem.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "portability/instr_time.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "http_session.h"

/* The process's easy handle, created on first use. */
static CURL *session_handle = NULL;

/* Per-attempt state shared with the curl callbacks. */
typedef struct TransferState
{
	MemoryContext context;		/* where headers and errors are allocated */
	StringInfo	body;			/* response body, or NULL to discard */
	bool		body_too_large;
	List	   *headers;		/* HttpHeader *, of the last response seen */

	int			upload_fd;		/* body_file, or -1 */
	int64		upload_base;	/* offset of the body in the file */
	int64		upload_size;
	int64		upload_offset;
	int			upload_errno;

	bool		interrupted;	/* the progress callback stopped the transfer */
	ErrorData  *error;			/* an ERROR caught in a callback */
} TransferState;

/*
 * Catch an ERROR raised by PostgreSQL code inside a callback, so that it can
 * be raised again once curl has returned.
 */
static void
transfer_keep_error(TransferState *state)
{
	MemoryContextSwitchTo(state->context);
	state->error = CopyErrorData();
	FlushErrorState();
}

/* CURLOPT_WRITEFUNCTION: append to the response body. */
static size_t
write_callback(char *data, size_t size, size_t nmemb, void *arg)
{
	TransferState *state = (TransferState *) arg;
	volatile size_t length = size * nmemb;

	if (state->body == NULL || length == 0)
		return length;
	if ((Size) state->body->len + length >= MaxAllocSize)
	{
		state->body_too_large = true;
		return 0;				/* makes curl stop with CURLE_WRITE_ERROR */
	}
	PG_TRY();
	{
		appendBinaryStringInfo(state->body, data, (int) length);
	}
	PG_CATCH();
	{
		transfer_keep_error(state);
		length = 0;
	}
	PG_END_TRY();
	return length;
}

/*
 * CURLOPT_HEADERFUNCTION: collect "Name: value" lines.  A status line starts
 * a new response (an interim "100 Continue" precedes the real one), so it
 * drops what was collected before.
 */
static size_t
header_callback(char *data, size_t size, size_t nitems, void *arg)
{
	TransferState *state = (TransferState *) arg;
	volatile size_t length = size * nitems;

	PG_TRY();
	{
		MemoryContext old = MemoryContextSwitchTo(state->context);
		char	   *line = pnstrdup(data, length);
		char	   *colon;

		if (strncmp(line, "HTTP/", 5) == 0)
			state->headers = NIL;
		else if ((colon = strchr(line, ':')) != NULL)
		{
			HttpHeader *header = palloc(sizeof(HttpHeader));
			char	   *value = colon + 1;
			char	   *end;

			*colon = '\0';
			while (*value == ' ' || *value == '\t')
				value++;
			end = value + strlen(value);
			while (end > value && (end[-1] == '\r' || end[-1] == '\n' ||
								   end[-1] == ' ' || end[-1] == '\t'))
				*--end = '\0';
			header->name = line;
			header->value = value;
			state->headers = lappend(state->headers, header);
		}
		MemoryContextSwitchTo(old);
	}
	PG_CATCH();
	{
		transfer_keep_error(state);
		length = 0;
	}
	PG_END_TRY();
	return length;
}

/* CURLOPT_READFUNCTION: the next bytes of the upload file. */
static size_t
read_callback(char *buffer, size_t size, size_t nitems, void *arg)
{
	TransferState *state = (TransferState *) arg;
	size_t		want = size * nitems;
	ssize_t		got;

	if (state->upload_offset >= state->upload_size)
		return 0;
	if ((int64) want > state->upload_size - state->upload_offset)
		want = (size_t) (state->upload_size - state->upload_offset);
	got = pread(state->upload_fd, buffer, want,
				state->upload_base + state->upload_offset);
	if (got <= 0)
	{
		/* a file that shrank would otherwise send a short body */
		state->upload_errno = got < 0 ? errno : EIO;
		return CURL_READFUNC_ABORT;
	}
	state->upload_offset += got;
	return (size_t) got;
}

/* CURLOPT_SEEKFUNCTION: curl rewinds the upload to resend it. */
static int
seek_callback(void *arg, curl_off_t offset, int origin)
{
	TransferState *state = (TransferState *) arg;

	if (origin != SEEK_SET || offset < 0 || offset > state->upload_size)
		return CURL_SEEKFUNC_CANTSEEK;
	state->upload_offset = offset;
	return CURL_SEEKFUNC_OK;
}

/*
 * CURLOPT_XFERINFOFUNCTION: stop the transfer when a query cancel or a
 * termination is pending and could be serviced.  curl calls this at least
 * once a second even while it waits for the server, so a cancel interrupts
 * a slow request within about a second.
 */
static int
progress_callback(void *arg, curl_off_t dltotal, curl_off_t dlnow,
				  curl_off_t ultotal, curl_off_t ulnow)
{
	TransferState *state = (TransferState *) arg;

	if (InterruptPending && (QueryCancelPending || ProcDiePending) &&
		INTERRUPTS_CAN_BE_PROCESSED())
	{
		state->interrupted = true;
		return 1;
	}
	return 0;
}

/* The URL without its query string, for messages (SAS tokens live there). */
static char *
url_for_messages(const char *url)
{
	const char *query = strchr(url, '?');

	return query ? pnstrdup(url, query - url) : pstrdup(url);
}

/* The process's easy handle. */
static CURL *
session_get_handle(void)
{
	if (session_handle == NULL)
	{
		static bool global_done = false;

		if (!global_done)
		{
			if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("could not initialize libcurl")));
			global_done = true;
		}
		session_handle = curl_easy_init();
		if (session_handle == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("could not create an HTTP session")));
	}
	return session_handle;
}

/*
 * The options of one attempt.  curl_easy_reset cleared everything but the
 * connection cache, so every option is set again.
 */
static void
session_set_options(CURL *handle, const HttpRequest *request,
					struct curl_slist *headers, TransferState *state,
					char *error_buffer)
{
	const HttpSettings *settings = request->settings;

	curl_easy_setopt(handle, CURLOPT_URL, request->url);
	/* never signals: a multi-process server owns its signal handlers */
	curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);
	curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(handle, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT,
					 (long) (settings ? settings->connect_timeout_s : HTTP_DEFAULT_CONNECT_TIMEOUT_S));
	curl_easy_setopt(handle, CURLOPT_TIMEOUT,
					 (long) (settings ? settings->request_timeout_s : HTTP_DEFAULT_REQUEST_TIMEOUT_S));
	if (settings != NULL && settings->ca_file != NULL)
		curl_easy_setopt(handle, CURLOPT_CAINFO, settings->ca_file);
	if (settings != NULL && !settings->verify_tls)
	{
		curl_easy_setopt(handle, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(handle, CURLOPT_SSL_VERIFYHOST, 0L);
	}

	curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, header_callback);
	curl_easy_setopt(handle, CURLOPT_HEADERDATA, state);
	curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, write_callback);
	curl_easy_setopt(handle, CURLOPT_WRITEDATA, state);
	curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, progress_callback);
	curl_easy_setopt(handle, CURLOPT_XFERINFODATA, state);

	if (request->aws_sigv4 != NULL)
	{
		curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, request->aws_sigv4);
		curl_easy_setopt(handle, CURLOPT_USERNAME, request->access_key_id);
		curl_easy_setopt(handle, CURLOPT_PASSWORD, request->secret_access_key);
	}

	if (strcmp(request->method, "HEAD") == 0)
		curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
	else if (request->body_file != NULL)
	{
		/* streamed with a known length: Content-Length, no chunking */
		curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, (curl_off_t) state->upload_size);
		curl_easy_setopt(handle, CURLOPT_READFUNCTION, read_callback);
		curl_easy_setopt(handle, CURLOPT_READDATA, state);
		curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, seek_callback);
		curl_easy_setopt(handle, CURLOPT_SEEKDATA, state);
		if (strcmp(request->method, "PUT") != 0)
			curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request->method);
	}
	else if (request->body != NULL)
	{
		/*
		 * POSTFIELDS gives a Content-Length and, up to 1 MiB, no Expect
		 * header (whose removal entry curl would sign but not send).
		 */
		curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) request->body_length);
		curl_easy_setopt(handle, CURLOPT_POSTFIELDS, request->body);
		curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request->method);
	}
	else if (strcmp(request->method, "GET") != 0)
		curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request->method);
}

/*
 * Was an attempt that failed with this curl error worth retrying, and may
 * the request have reached the server?
 */
static bool
curl_error_is_transient(CURLcode code)
{
	switch (code)
	{
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_CONNECT:
		case CURLE_OPERATION_TIMEDOUT:
		case CURLE_SEND_ERROR:
		case CURLE_RECV_ERROR:
		case CURLE_GOT_NOTHING:
		case CURLE_PARTIAL_FILE:
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_HTTP2:
		case CURLE_HTTP2_STREAM:
			return true;
		default:
			return false;
	}
}

/*
 * HTTP statuses worth retrying: a request the server timed out reading,
 * throttling, and server errors other than "not implemented" and "version
 * not supported", which no retry changes.
 */
static bool
http_status_is_transient(long status)
{
	return status == 408 || status == 429 ||
		(status >= 500 && status != 501 && status != 505);
}

/*
 * Wait before the next attempt: full jitter over an exponentially growing
 * ceiling.  Returns false, without waiting, when the wait would exceed what
 * is left of the retry budget.  The wait is on the process latch, so
 * interrupts are serviced while waiting.
 */
static bool
session_backoff(int attempt, int *budget_used_ms)
{
	int64		ceiling = HTTP_RETRY_BASE_MS;
	int			wait_ms;
	instr_time	start;

	for (int i = 1; i < attempt && ceiling < HTTP_RETRY_MAX_BACKOFF_MS; i++)
		ceiling *= 2;
	ceiling = Min(ceiling, HTTP_RETRY_MAX_BACKOFF_MS);
	wait_ms = (int) (ceiling / 2 + pg_prng_uint64_range(&pg_global_prng_state, 0, ceiling / 2));
	if (*budget_used_ms + wait_ms > HTTP_RETRY_BUDGET_MS)
		return false;
	*budget_used_ms += wait_ms;

	INSTR_TIME_SET_CURRENT(start);
	for (;;)
	{
		instr_time	now;
		long		left;

		CHECK_FOR_INTERRUPTS();
		INSTR_TIME_SET_CURRENT(now);
		INSTR_TIME_SUBTRACT(now, start);
		left = wait_ms - (long) INSTR_TIME_GET_MILLISEC(now);
		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	CHECK_FOR_INTERRUPTS();
	return true;
}

/*
 * http_session_perform
 *		Perform one request, with retries; see http_session.h.
 */
void
http_session_perform(const HttpRequest *request, HttpResponse *response)
{
	CURL	   *handle = session_get_handle();
	struct curl_slist *volatile headers = NULL;
	volatile int upload_fd = -1;
	TransferState state;
	int			original_length = request->response_body ? request->response_body->len : 0;
	char		error_buffer[CURL_ERROR_SIZE];
	const char *safe_url = url_for_messages(request->url);

	memset(response, 0, sizeof(HttpResponse));
	memset(&state, 0, sizeof(state));
	state.context = CurrentMemoryContext;
	state.upload_fd = -1;

	PG_TRY();
	{
		ListCell   *lc;
		bool		has_content_type = false;
		int			budget_used_ms = 0;

		foreach(lc, request->headers)
		{
			const char *line = (const char *) lfirst(lc);
			struct curl_slist *appended;

			if (pg_strncasecmp(line, "content-type:", 13) == 0)
				has_content_type = true;
			appended = curl_slist_append(headers, line);
			if (appended == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OUT_OF_MEMORY),
						 errmsg("out of memory")));
			headers = appended;
		}

		/*
		 * curl would otherwise add an unsigned form Content-Type to a body;
		 * a header set here is sent and signed.
		 */
		if (!has_content_type && (request->body != NULL || request->body_file != NULL))
		{
			struct curl_slist *appended = curl_slist_append(headers, "Content-Type: application/octet-stream");

			if (appended == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OUT_OF_MEMORY),
						 errmsg("out of memory")));
			headers = appended;
		}

		if (request->body_file != NULL)
		{
			struct stat st;

			upload_fd = OpenTransientFile(request->body_file, O_RDONLY | PG_BINARY);
			if (upload_fd < 0 || fstat(upload_fd, &st) != 0)
				ereport(ERROR,
						(errcode_for_file_access(),
						 errmsg("could not read file \"%s\" for %s: %m",
								request->body_file, request->description)));
			state.upload_fd = upload_fd;
			state.upload_base = request->body_file_offset;
			state.upload_size = request->body_file_length > 0 ?
				request->body_file_length : st.st_size - request->body_file_offset;
			if (request->body_file_offset < 0 || state.upload_size < 0 ||
				state.upload_base + state.upload_size > st.st_size)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("could not read file \"%s\" for %s: the body lies outside the file",
								request->body_file, request->description)));
		}

		for (int attempt = 1;; attempt++)
		{
			CURLcode	code;
			bool		transient;
			bool		maybe_applied;
			instr_time	start;
			instr_time	elapsed;

			CHECK_FOR_INTERRUPTS();

			if (request->response_body != NULL)
			{
				request->response_body->len = original_length;
				request->response_body->data[original_length] = '\0';
			}
			state.body = request->response_body;
			state.body_too_large = false;
			state.headers = NIL;
			state.upload_offset = 0;
			state.upload_errno = 0;
			state.interrupted = false;
			error_buffer[0] = '\0';

			curl_easy_reset(handle);
			session_set_options(handle, request, headers, &state, error_buffer);

			INSTR_TIME_SET_CURRENT(start);
			code = curl_easy_perform(handle);
			INSTR_TIME_SET_CURRENT(elapsed);
			INSTR_TIME_SUBTRACT(elapsed, start);

			response->attempts = attempt;
			if (state.error != NULL)
				ReThrowError(state.error);
			if (state.interrupted)
			{
				/* raises the cancel or termination */
				CHECK_FOR_INTERRUPTS();
			}
			if (state.upload_errno != 0)
			{
				errno = state.upload_errno;
				ereport(ERROR,
						(errcode_for_file_access(),
						 errmsg("could not read file \"%s\" for %s: %m",
								request->body_file, request->description)));
			}
			if (state.body_too_large)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("response to %s is too large", request->description),
						 errdetail("%s %s returned more than 1 GB.", request->method, safe_url)));

			if (code == CURLE_OK)
			{
				curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response->status);
				response->headers = state.headers;
				elog(DEBUG2, "rollout_fdw: %s %s: HTTP %ld (attempt %d, %.1f ms)",
					 request->method, safe_url, response->status, attempt,
					 INSTR_TIME_GET_MILLISEC(elapsed));
				transient = http_status_is_transient(response->status);
				/* a 5xx may come after the request was applied; 408, 429 never */
				maybe_applied = response->status >= 500;
				if (!transient)
					break;
			}
			else
			{
				long		request_size = 0;

				elog(DEBUG2, "rollout_fdw: %s %s: %s (attempt %d, %.1f ms)",
					 request->method, safe_url,
					 error_buffer[0] ? error_buffer : curl_easy_strerror(code),
					 attempt, INSTR_TIME_GET_MILLISEC(elapsed));
				transient = curl_error_is_transient(code) || state.interrupted;
				/* nothing of the request sent: it cannot have been applied */
				curl_easy_getinfo(handle, CURLINFO_REQUEST_SIZE, &request_size);
				maybe_applied = request_size > 0;
			}

			if (!transient || attempt >= HTTP_MAX_ATTEMPTS ||
				!session_backoff(attempt, &budget_used_ms))
			{
				if (code == CURLE_OK)
					break;		/* the caller reports the HTTP status */
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not complete %s: %s", request->description,
								error_buffer[0] ? error_buffer : curl_easy_strerror(code)),
						 errdetail("%s %s failed after %d attempt%s.",
								   request->method, safe_url, attempt,
								   attempt == 1 ? "" : "s"),
						 (code == CURLE_PEER_FAILED_VERIFICATION ||
						  code == CURLE_SSL_CACERT_BADFILE) ?
						 errhint("Set the server option \"ca_file\" to the certificate authority of the endpoint, or \"verify_tls\" to false to accept any certificate.") : 0));
			}
			if (maybe_applied)
				response->ambiguous = true;
		}
	}
	PG_FINALLY();
	{
		if (headers != NULL)
			curl_slist_free_all(headers);
		if (upload_fd >= 0)
			CloseTransientFile(upload_fd);
	}
	PG_END_TRY();
}

/*
 * http_response_header
 *		The value of a response header, by case-insensitive name.
 */
const char *
http_response_header(const HttpResponse *response, const char *name)
{
	ListCell   *lc;

	foreach(lc, response->headers)
	{
		HttpHeader *header = (HttpHeader *) lfirst(lc);

		if (pg_strcasecmp(header->name, name) == 0)
			return header->value;
	}
	return NULL;
}

/*
 * http_settings_from_options
 *		Connection settings from server options.
 */
void
http_settings_from_options(HttpSettings *settings, List *options)
{
	ListCell   *lc;

	settings->connect_timeout_s = HTTP_DEFAULT_CONNECT_TIMEOUT_S;
	settings->request_timeout_s = HTTP_DEFAULT_REQUEST_TIMEOUT_S;
	settings->ca_file = NULL;
	settings->verify_tls = true;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "connect_timeout") == 0 ||
			strcmp(def->defname, "request_timeout") == 0)
		{
			int			seconds;

			if (!parse_int(defGetString(def), &seconds, 0, NULL) || seconds < 1)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"%s\": \"%s\"",
								def->defname, defGetString(def)),
						 errdetail("It must be a positive number of seconds.")));
			if (def->defname[0] == 'c')
				settings->connect_timeout_s = seconds;
			else
				settings->request_timeout_s = seconds;
		}
		else if (strcmp(def->defname, "ca_file") == 0)
			settings->ca_file = pstrdup(defGetString(def));
		else if (strcmp(def->defname, "verify_tls") == 0)
			settings->verify_tls = defGetBoolean(def);
	}
}

/*
 * http_uri_encode
 *		Percent-encode everything but the unreserved characters.
 */
char *
http_uri_encode(const char *s, bool keep_slash)
{
	StringInfoData buf;
	static const char hex[] = "0123456789ABCDEF";

	initStringInfo(&buf);
	for (const unsigned char *p = (const unsigned char *) s; *p; p++)
	{
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			(*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
			*p == '.' || *p == '~' || (keep_slash && *p == '/'))
			appendStringInfoChar(&buf, (char) *p);
		else
		{
			appendStringInfoChar(&buf, '%');
			appendStringInfoChar(&buf, hex[*p >> 4]);
			appendStringInfoChar(&buf, hex[*p & 0x0f]);
		}
	}
	return buf.data;
}

static void
digest_to_hex(const unsigned char *digest, unsigned int length, char *hex)
{
	static const char digits[] = "0123456789abcdef";

	for (unsigned int i = 0; i < length; i++)
	{
		hex[2 * i] = digits[digest[i] >> 4];
		hex[2 * i + 1] = digits[digest[i] & 0x0f];
	}
	hex[2 * length] = '\0';
}

/*
 * http_sha256_hex
 *		Hex SHA-256 of a buffer (for x-amz-content-sha256).
 */
void
http_sha256_hex(const char *data, size_t len, char *hex)
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int digest_length = 0;

	if (EVP_Digest(data, len, digest, &digest_length, EVP_sha256(), NULL) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute a SHA-256 digest")));
	digest_to_hex(digest, digest_length, hex);
}

/*
 * Hash an open file into context; returns its size.  Raises an ERROR on a
 * read failure (the caller frees the context and closes the file).
 */
static int64
sha256_update_from_file(EVP_MD_CTX *context, int fd, const char *path)
{
	char	   *buffer = palloc(65536);
	int64		total = 0;
	int			chunks = 0;
	ssize_t		got;

	while ((got = read(fd, buffer, 65536)) != 0)
	{
		if (got < 0)
		{
			if (errno == EINTR)
				continue;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", path)));
		}
		if (EVP_DigestUpdate(context, buffer, got) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not compute a SHA-256 digest")));
		total += got;
		if (++chunks % 64 == 0)
			CHECK_FOR_INTERRUPTS();
	}
	pfree(buffer);
	return total;
}

/*
 * http_sha256_file_hex
 *		Hex SHA-256 and size of a local file.
 */
void
http_sha256_file_hex(const char *path, char *hex, int64 *size)
{
	EVP_MD_CTX *volatile context = NULL;
	volatile int fd = -1;
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int digest_length = 0;

	PG_TRY();
	{
		context = EVP_MD_CTX_new();
		if (context == NULL || EVP_DigestInit_ex(context, EVP_sha256(), NULL) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not compute a SHA-256 digest")));
		fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
		if (fd < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not open file \"%s\": %m", path)));
		*size = sha256_update_from_file(context, fd, path);
		if (EVP_DigestFinal_ex(context, digest, &digest_length) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not compute a SHA-256 digest")));
	}
	PG_CATCH();
	{
		if (context != NULL)
			EVP_MD_CTX_free(context);
		if (fd >= 0)
			CloseTransientFile(fd);
		PG_RE_THROW();
	}
	PG_END_TRY();
	EVP_MD_CTX_free(context);
	CloseTransientFile(fd);
	digest_to_hex(digest, digest_length, hex);
}
