/*-------------------------------------------------------------------------
 *
 * http_session.c
 *		The HTTP session of a backend process: reused connections, requests
 *		alone or many at once, timeouts, retries with backoff, interrupts,
 *		and clean-up on ERROR.
 *
 * See http_session.h for the contract.  The notes here are about how.
 *
 * One multi handle per process.  Every request, alone or in a batch, is an
 * easy handle run by the process's libcurl multi handle.  The connection
 * cache belongs to the multi handle, so a connection opened by one request
 * (of a batch, or alone) is reused by the next one whatever easy handle
 * carries it: keep-alive across requests, batches, statements and
 * transactions.  The easy handles come from a pool (at most
 * HTTP_MAX_CONCURRENT_REQUESTS, created on first use and reset between
 * requests); the cache keeps as many idle connections as the last batch
 * was allowed to run at once.  Nothing of this is tied to a transaction.
 *
 * One loop for one request or many.  http_session_perform_many() starts up
 * to max_in_flight transfers, drives them with curl_multi_perform, and
 * waits in curl_multi_poll for at most HTTP_POLL_INTERVAL_MS at a time,
 * checking for interrupts between waits, so a query cancel is serviced
 * within that interval even while every transfer waits for the server.
 * Each request keeps its own attempts, backoff and retry budget: a request
 * to be retried waits for its backoff without holding a slot, while the
 * others run.  http_session_perform() is a batch of one.
 *
 * No ERROR crosses libcurl.  A longjmp out of a curl callback would leave
 * the handles in an undefined state, so callbacks never raise: the ones that
 * allocate catch any ERROR, keep it, and make curl stop; the progress
 * callback only asks curl to stop when an interrupt is pending; the ERROR
 * or the interrupt is raised by the loop, outside libcurl.  Whatever is
 * raised, PG_FINALLY takes every unfinished transfer out of the multi
 * handle, gives its easy handle back to the pool and frees what is not
 * palloc'd (header lists, upload files' descriptors).
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

/* How long the loop waits in curl_multi_poll before it checks interrupts. */
#define HTTP_POLL_INTERVAL_MS	100

/* The process's multi handle, and the pool of easy handles it runs. */
static CURLM *session_multi = NULL;
static CURL *session_pool[HTTP_MAX_CONCURRENT_REQUESTS];
static bool session_pool_busy[HTTP_MAX_CONCURRENT_REQUESTS];
static int	session_pool_size = 0;

/* Requests sent and rounds waited, for EXPLAIN (http_session_get_counters). */
static HttpSessionCounters session_counters;

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

/* Initialize libcurl and the process's multi handle, once. */
static void
session_init(void)
{
	static bool global_done = false;

	if (session_multi != NULL)
		return;
	if (!global_done)
	{
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not initialize libcurl")));
		global_done = true;
	}
	session_multi = curl_multi_init();
	if (session_multi == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create an HTTP session")));
}

/*
 * A free easy handle of the pool, marked busy; its slot goes to *slot.
 * Creates handles up to HTTP_MAX_CONCURRENT_REQUESTS; the caller never has
 * more than that many transfers running.
 */
static CURL *
session_pool_take(int *slot)
{
	for (int i = 0; i < session_pool_size; i++)
	{
		if (!session_pool_busy[i])
		{
			session_pool_busy[i] = true;
			*slot = i;
			return session_pool[i];
		}
	}
	if (session_pool_size >= HTTP_MAX_CONCURRENT_REQUESTS)
		elog(ERROR, "no free HTTP handle in a pool of %d", session_pool_size);
	session_pool[session_pool_size] = curl_easy_init();
	if (session_pool[session_pool_size] == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create an HTTP session")));
	session_pool_busy[session_pool_size] = true;
	*slot = session_pool_size;
	return session_pool[session_pool_size++];
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

	/*
	 * Keys go as they are: libcurl would otherwise resolve "." and ".." parts
	 * of a path, and a key that holds them (object names come from the store)
	 * would address another object than the one signed for or listed, outside
	 * the location under a SAS token.
	 */
	curl_easy_setopt(handle, CURLOPT_PATH_AS_IS, 1L);
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
 * The wait before the next attempt of a request: full jitter over an
 * exponentially growing ceiling.  Returns -1 when the wait would exceed what
 * is left of the request's retry budget (the request then ends with its last
 * answer or error).
 */
static int
session_backoff_ms(int attempt, int *budget_used_ms)
{
	int64		ceiling = HTTP_RETRY_BASE_MS;
	int			wait_ms;

	for (int i = 1; i < attempt && ceiling < HTTP_RETRY_MAX_BACKOFF_MS; i++)
		ceiling *= 2;
	ceiling = Min(ceiling, HTTP_RETRY_MAX_BACKOFF_MS);
	wait_ms = (int) (ceiling / 2 + pg_prng_uint64_range(&pg_global_prng_state, 0, ceiling / 2));
	if (*budget_used_ms + wait_ms > HTTP_RETRY_BUDGET_MS)
		return -1;
	*budget_used_ms += wait_ms;
	return wait_ms;
}

/* Where a request of a batch stands. */
typedef enum TransferPhase
{
	TRANSFER_READY,				/* to be started (perhaps after a backoff) */
	TRANSFER_RUNNING,			/* its easy handle is in the multi handle */
	TRANSFER_DONE				/* *response holds the final answer */
} TransferPhase;

/* One request of a batch, across its attempts. */
typedef struct Transfer
{
	const HttpRequest *request;
	HttpResponse *response;
	TransferPhase phase;
	int			attempt;		/* attempts started */
	int			budget_used_ms; /* backoff waited so far */
	int64		not_before_us;	/* a retry waits for this time */
	bool		backing_off;	/* not_before is set */
	instr_time	started;		/* of the running attempt */

	CURL	   *handle;			/* while running, from the pool */
	int			pool_slot;
	struct curl_slist *headers; /* curl's copy of the request headers */
	int			upload_fd;		/* body_file, or -1 */
	int			original_length;	/* of *response_body, before any attempt */
	char	   *safe_url;		/* the URL without its query, for messages */
	TransferState state;
	char		error_buffer[CURL_ERROR_SIZE];
} Transfer;

/*
 * Build curl's header list of a request: its headers, and a Content-Type
 * for a body without one (curl would otherwise add an unsigned form type;
 * a header set here is sent and signed).
 */
static void
transfer_build_headers(Transfer *transfer)
{
	const HttpRequest *request = transfer->request;
	ListCell   *lc;
	bool		has_content_type = false;

	foreach(lc, request->headers)
	{
		const char *line = (const char *) lfirst(lc);
		struct curl_slist *appended;

		if (pg_strncasecmp(line, "content-type:", 13) == 0)
			has_content_type = true;
		appended = curl_slist_append(transfer->headers, line);
		if (appended == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		transfer->headers = appended;
	}
	if (!has_content_type && (request->body != NULL || request->body_file != NULL))
	{
		struct curl_slist *appended = curl_slist_append(transfer->headers,
														"Content-Type: application/octet-stream");

		if (appended == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		transfer->headers = appended;
	}
}

/* Open the file a request uploads its body from, and check the region. */
static void
transfer_open_upload(Transfer *transfer)
{
	const HttpRequest *request = transfer->request;
	struct stat st;

	transfer->upload_fd = OpenTransientFile(request->body_file, O_RDONLY | PG_BINARY);
	if (transfer->upload_fd < 0 || fstat(transfer->upload_fd, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\" for %s: %m",
						request->body_file, request->description)));
	transfer->state.upload_fd = transfer->upload_fd;
	transfer->state.upload_base = request->body_file_offset;
	transfer->state.upload_size = request->body_file_length > 0 ?
		request->body_file_length : st.st_size - request->body_file_offset;
	if (request->body_file_offset < 0 || transfer->state.upload_size < 0 ||
		transfer->state.upload_base + transfer->state.upload_size > st.st_size)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not read file \"%s\" for %s: the body lies outside the file",
						request->body_file, request->description)));
}

/* Release what a transfer holds outside palloc: header list, file. */
static void
transfer_release(Transfer *transfer)
{
	if (transfer->handle != NULL)
	{
		curl_multi_remove_handle(session_multi, transfer->handle);
		session_pool_busy[transfer->pool_slot] = false;
		transfer->handle = NULL;
	}
	if (transfer->headers != NULL)
	{
		curl_slist_free_all(transfer->headers);
		transfer->headers = NULL;
	}
	if (transfer->upload_fd >= 0)
	{
		CloseTransientFile(transfer->upload_fd);
		transfer->upload_fd = -1;
	}
}

/* Start the next attempt of a request on a handle of the pool. */
static void
transfer_start(Transfer *transfer)
{
	const HttpRequest *request = transfer->request;
	CURLMcode	code;

	if (transfer->attempt == 0)
	{
		transfer_build_headers(transfer);
		if (request->body_file != NULL)
			transfer_open_upload(transfer);
	}

	/* a retry starts from the caller's body again */
	if (request->response_body != NULL)
	{
		request->response_body->len = transfer->original_length;
		request->response_body->data[transfer->original_length] = '\0';
	}
	transfer->state.body = request->response_body;
	transfer->state.body_too_large = false;
	transfer->state.headers = NIL;
	transfer->state.upload_offset = 0;
	transfer->state.upload_errno = 0;
	transfer->state.interrupted = false;
	transfer->error_buffer[0] = '\0';

	transfer->handle = session_pool_take(&transfer->pool_slot);
	curl_easy_reset(transfer->handle);
	session_set_options(transfer->handle, request, transfer->headers,
						&transfer->state, transfer->error_buffer);
	curl_easy_setopt(transfer->handle, CURLOPT_PRIVATE, transfer);
	code = curl_multi_add_handle(session_multi, transfer->handle);
	if (code != CURLM_OK)
	{
		session_pool_busy[transfer->pool_slot] = false;
		transfer->handle = NULL;
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not start %s: %s", request->description,
						curl_multi_strerror(code))));
	}
	transfer->attempt++;
	transfer->backing_off = false;
	transfer->phase = TRANSFER_RUNNING;
	session_counters.requests++;
	if (transfer->attempt > 1)
		session_counters.retries++;
	INSTR_TIME_SET_CURRENT(transfer->started);
}

/* A monotonic clock in microseconds, for backoff deadlines. */
static int64
session_now_us(void)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	return (int64) INSTR_TIME_GET_MICROSEC(now);
}

/*
 * A running attempt ended with code: decide whether the request is done
 * (its status is the caller's to interpret), is to be retried after a
 * backoff, or failed (an ERROR).  The same policy as http_session.h states
 * for every request.
 */
static void
transfer_finish(Transfer *transfer, CURLcode code)
{
	const HttpRequest *request = transfer->request;
	HttpResponse *response = transfer->response;
	TransferState *state = &transfer->state;
	CURL	   *handle = transfer->handle;
	instr_time	elapsed;
	bool		transient;
	bool		maybe_applied;
	long		request_size = 0;
	int			wait_ms;

	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, transfer->started);
	if (code == CURLE_OK)
		curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response->status);
	else
		curl_easy_getinfo(handle, CURLINFO_REQUEST_SIZE, &request_size);
	curl_multi_remove_handle(session_multi, handle);
	session_pool_busy[transfer->pool_slot] = false;
	transfer->handle = NULL;
	transfer->phase = TRANSFER_READY;

	response->attempts = transfer->attempt;
	if (state->error != NULL)
		ReThrowError(state->error);
	if (state->interrupted)
	{
		/* raises the cancel or termination */
		CHECK_FOR_INTERRUPTS();
	}
	if (state->upload_errno != 0)
	{
		errno = state->upload_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\" for %s: %m",
						request->body_file, request->description)));
	}
	if (state->body_too_large)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("response to %s is too large", request->description),
				 errdetail("%s %s returned more than 1 GB.", request->method,
						   transfer->safe_url)));

	if (code == CURLE_OK)
	{
		response->headers = state->headers;
		elog(DEBUG2, "rollout_fdw: %s %s: HTTP %ld (attempt %d, %.1f ms)",
			 request->method, transfer->safe_url, response->status,
			 transfer->attempt, INSTR_TIME_GET_MILLISEC(elapsed));
		transient = http_status_is_transient(response->status);
		/* a 5xx may come after the request was applied; 408, 429 never */
		maybe_applied = response->status >= 500;
	}
	else
	{
		elog(DEBUG2, "rollout_fdw: %s %s: %s (attempt %d, %.1f ms)",
			 request->method, transfer->safe_url,
			 transfer->error_buffer[0] ? transfer->error_buffer : curl_easy_strerror(code),
			 transfer->attempt, INSTR_TIME_GET_MILLISEC(elapsed));
		transient = curl_error_is_transient(code) || state->interrupted;
		/* nothing of the request sent: it cannot have been applied */
		maybe_applied = request_size > 0;
	}
	/* what a read "carried out" changes nothing: count writes only */
	if (maybe_applied && strcmp(request->method, "GET") != 0 &&
		strcmp(request->method, "HEAD") != 0)
		session_counters.maybe_applied++;

	wait_ms = -1;
	if (transient && transfer->attempt < HTTP_MAX_ATTEMPTS)
		wait_ms = session_backoff_ms(transfer->attempt, &transfer->budget_used_ms);
	if (wait_ms < 0)
	{
		if (code == CURLE_OK)
		{
			/* the caller reports the HTTP status */
			transfer->phase = TRANSFER_DONE;
			transfer_release(transfer);
			return;
		}
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not complete %s: %s", request->description,
						transfer->error_buffer[0] ? transfer->error_buffer : curl_easy_strerror(code)),
				 errdetail("%s %s failed after %d attempt%s.",
						   request->method, transfer->safe_url, transfer->attempt,
						   transfer->attempt == 1 ? "" : "s"),
				 (code == CURLE_PEER_FAILED_VERIFICATION ||
				  code == CURLE_SSL_CACERT_BADFILE) ?
				 errhint("Set the server option \"ca_file\" to the certificate authority of the endpoint, or \"verify_tls\" to false to accept any certificate.") : 0));
	}
	if (maybe_applied)
		response->ambiguous = true;

	/* retry after the backoff; the slot is free for others meanwhile */
	transfer->not_before_us = session_now_us() + (int64) wait_ms * 1000;
	transfer->backing_off = true;
}

/* Milliseconds from now_us until t_us, rounded up (0 if past). */
static long
session_ms_until(int64 t_us, int64 now_us)
{
	return t_us > now_us ? (long) ((t_us - now_us + 999) / 1000) : 0;
}

/*
 * Run the batch: start transfers while slots are free, drive curl, collect
 * finished attempts, wait.  Returns when every request is done; raises the
 * first ERROR (the caller's PG_FINALLY cleans up).
 */
static void
session_run(Transfer *transfers, int count, int max_in_flight)
{
	int			done = 0;

	while (done < count)
	{
		int			running = 0;
		int			in_flight = 0;
		bool		progressed = false;
		long		wait_ms = HTTP_POLL_INTERVAL_MS;
		long		curl_timeout = -1;
		int64		now;
		CURLMcode	mcode;
		CURLMsg    *message;
		int			queued;

		CHECK_FOR_INTERRUPTS();

		/* start whatever may start */
		now = session_now_us();
		for (int i = 0; i < count; i++)
		{
			if (transfers[i].phase == TRANSFER_RUNNING)
				in_flight++;
		}
		for (int i = 0; i < count && in_flight < max_in_flight; i++)
		{
			Transfer   *transfer = &transfers[i];

			if (transfer->phase != TRANSFER_READY)
				continue;
			if (transfer->backing_off &&
				session_ms_until(transfer->not_before_us, now) > 0)
			{
				wait_ms = Min(wait_ms, session_ms_until(transfer->not_before_us, now));
				continue;
			}
			transfer_start(transfer);
			in_flight++;
		}

		mcode = curl_multi_perform(session_multi, &running);
		if (mcode != CURLM_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not run HTTP requests: %s",
							curl_multi_strerror(mcode))));

		while ((message = curl_multi_info_read(session_multi, &queued)) != NULL)
		{
			Transfer   *transfer = NULL;

			if (message->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **) &transfer);
			if (transfer == NULL || transfer->handle != message->easy_handle)
				elog(ERROR, "HTTP session finished a transfer it does not know");
			transfer_finish(transfer, message->data.result);
			if (transfer->phase == TRANSFER_DONE)
				done++;
			progressed = true;
		}
		if (progressed || done == count)
			continue;

		/*
		 * Nothing finished: wait for the sockets, curl's own timers or the
		 * next backoff to end, at most HTTP_POLL_INTERVAL_MS, so interrupts
		 * are serviced promptly.
		 */
		if (curl_multi_timeout(session_multi, &curl_timeout) == CURLM_OK &&
			curl_timeout >= 0)
			wait_ms = Min(wait_ms, curl_timeout);
		if (running > 0)
		{
			mcode = curl_multi_poll(session_multi, NULL, 0, (int) wait_ms, NULL);
			if (mcode != CURLM_OK)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("could not wait for HTTP requests: %s",
								curl_multi_strerror(mcode))));
		}
		else if (wait_ms > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait_ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}

/*
 * http_session_perform_many
 *		Perform requests concurrently, at most max_in_flight at a time, each
 *		with the retries of http_session_perform; see http_session.h.
 */
void
http_session_perform_many(const HttpRequest *requests, HttpResponse *responses,
						  int count, int max_in_flight)
{
	Transfer   *volatile transfers;
	int			limit = Max(1, Min(max_in_flight, HTTP_MAX_CONCURRENT_REQUESTS));
	int			width = Min(limit, count);

	if (count <= 0)
		return;
	session_init();

	/*
	 * The connection cache keeps as many idle connections as a batch may use
	 * at once, so that the next batch finds them open.  A single request
	 * leaves the size alone.
	 */
	if (count > 1)
		curl_multi_setopt(session_multi, CURLMOPT_MAXCONNECTS, (long) limit);

	transfers = palloc0(sizeof(Transfer) * count);
	for (int i = 0; i < count; i++)
	{
		Transfer   *transfer = &transfers[i];

		memset(&responses[i], 0, sizeof(HttpResponse));
		transfer->request = &requests[i];
		transfer->response = &responses[i];
		transfer->phase = TRANSFER_READY;
		transfer->upload_fd = -1;
		transfer->original_length = requests[i].response_body ?
			requests[i].response_body->len : 0;
		transfer->safe_url = url_for_messages(requests[i].url);
		transfer->state.context = CurrentMemoryContext;
		transfer->state.upload_fd = -1;
	}

	PG_TRY();
	{
		session_run(transfers, count, width);
	}
	PG_FINALLY();
	{
		for (int i = 0; i < count; i++)
			transfer_release(&transfers[i]);
	}
	PG_END_TRY();

	/* rounds of waiting: the attempts, spread over the slots they had */
	{
		int			attempts = 0;

		for (int i = 0; i < count; i++)
			attempts += transfers[i].attempt;
		session_counters.rounds += (attempts + width - 1) / width;
	}
	pfree(transfers);
}

/*
 * Read a small upload file into memory, or return NULL when it is larger than
 * HTTP_MEMORY_UPLOAD_MAX.
 *
 * Why: libcurl 7.88 sends "Expect: 100-continue" with every streamed upload
 * and then waits for the server's interim answer before the body: one more
 * round trip for every WAL entry, the very latency a commit waits for.  The
 * header cannot simply be removed — curl signs the removal entry for SigV4
 * but does not send it, and the server then rejects the signature — but a
 * body given from memory (POSTFIELDS) is sent without it up to 1 MiB.  So
 * small files go from memory; large segments stream, where the interim
 * answer costs little and lets the server refuse before the body is sent.
 */
static char *
read_small_upload(const char *path, const char *description, size_t *length)
{
	struct stat st;
	int			fd;
	char	   *data;
	size_t		done = 0;

	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0 || fstat(fd, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\" for %s: %m", path, description)));
	if (st.st_size > HTTP_MEMORY_UPLOAD_MAX)
	{
		CloseTransientFile(fd);
		return NULL;
	}
	data = palloc(st.st_size + 1);
	while (done < (size_t) st.st_size)
	{
		ssize_t		n = read(fd, data + done, st.st_size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
		{
			if (n == 0)
				errno = EIO;	/* the file shrank under us */
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\" for %s: %m", path, description)));
		}
		done += n;
	}
	CloseTransientFile(fd);
	*length = done;
	return data;
}

/*
 * http_session_get_counters
 *		Requests sent and rounds waited by this process so far.
 */
void
http_session_get_counters(HttpSessionCounters *counters)
{
	*counters = session_counters;
}

/*
 * http_session_perform
 *		Perform one request, with retries (a batch of one); a small upload
 *		file goes from memory (see read_small_upload).
 */
void
http_session_perform(const HttpRequest *request, HttpResponse *response)
{
	/* a whole file; a region of one (Azure's blocks) is large by design */
	if (request->body_file != NULL &&
		request->body_file_offset == 0 && request->body_file_length == 0)
	{
		size_t		length;
		char	   *data = read_small_upload(request->body_file,
											 request->description, &length);

		if (data != NULL)
		{
			HttpRequest from_memory = *request;

			from_memory.body = data;
			from_memory.body_length = length;
			from_memory.body_file = NULL;
			http_session_perform_many(&from_memory, response, 1, 1);
			pfree(data);
			return;
		}
	}
	http_session_perform_many(request, response, 1, 1);
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

/* Parse the decimal at *c, advancing *c past it; -1 if there is none. */
static int64
http_parse_decimal(const char **c)
{
	int64		value = 0;

	if (**c < '0' || **c > '9')
		return -1;
	for (; **c >= '0' && **c <= '9'; (*c)++)
	{
		if (value > PG_INT64_MAX / 10 - 10)
			return -1;
		value = value * 10 + (**c - '0');
	}
	return value;
}

/*
 * http_content_range
 *		The first byte and the total size an answer's Content-Range names.
 */
void
http_content_range(const HttpResponse *response, int64 *first, int64 *total)
{
	const char *c = http_response_header(response, "Content-Range");
	int64		parsed_first = -1;
	int64		last = -1;

	*first = -1;
	*total = -1;
	if (c == NULL || pg_strncasecmp(c, "bytes ", 6) != 0)
		return;
	c += 6;
	if (*c == '*')
		c++;
	else
	{
		bool		negative;

		/*
		 * Azurite names an empty range at the end "bytes N-(N-1)/N" (of an
		 * empty blob, "bytes 0--1/0"): its total still counts.
		 */
		parsed_first = http_parse_decimal(&c);
		if (parsed_first < 0 || *c++ != '-')
			return;
		negative = *c == '-';
		if (negative)
			c++;
		last = http_parse_decimal(&c);
		if (last < 0)
			return;
		if (negative)
			last = -last;
		if (last < parsed_first - 1)
			return;
	}
	if (*c++ != '/')
		return;
	if (*c != '*')
	{
		int64		parsed_total = http_parse_decimal(&c);

		if (parsed_total < 0 || *c != '\0' || last >= parsed_total)
			return;
		*total = parsed_total;
	}
	*first = parsed_first;
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

/*
 * Write length bytes of digest into hex as lowercase hexadecimal,
 * NUL-terminated; hex must hold 2 * length + 1 bytes.  Lowercase because that
 * is the form SigV4 wants for x-amz-content-sha256.
 */
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
