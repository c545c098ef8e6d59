/*-------------------------------------------------------------------------
 *
 * http_session.h
 *		One HTTP session per backend process, shared by the remote object-store
 *		backends (s3_store.c, azure_store.c).  Private to src/objstore.
 *
 * A backend describes one request (method, URL, headers, body from memory or
 * from a local file, optional SigV4 signing) in an HttpRequest and calls
 * http_session_perform(), or describes several and calls
 * http_session_perform_many(), which runs up to max_in_flight of them at
 * once (libcurl's multi interface).  The session
 *
 *	- keeps connections open between requests for the life of the process
 *	  (keep-alive), one per request that may run at once;
 *	- applies the connect and whole-request timeouts and the TLS settings of
 *	  HttpSettings (peer and host verification on unless verify_tls = false);
 *	- retries, with exponential backoff and full jitter, on connection errors,
 *	  timeouts, HTTP 408, 429 and every 5xx but 501 and 505, at most
 *	  HTTP_MAX_ATTEMPTS attempts and HTTP_RETRY_BUDGET_MS of waiting between
 *	  them, each request of a batch on its own, the others running meanwhile;
 *	- checks for interrupts at least every HTTP_POLL_INTERVAL_MS while
 *	  requests are in flight or waiting for a retry (a query cancel or a
 *	  termination ends the whole batch, serviced as usual);
 *	- frees everything that is not palloc'd (header lists, upload files,
 *	  transfers in flight) on every path, ERROR included.  The handles
 *	  themselves are kept for the next requests.
 *
 * What the caller gets back is the final attempt's status, its response
 * headers and body, and whether an earlier attempt may have been applied by
 * the server (HttpResponse.ambiguous): a create-if-absent that sees
 * "already exists" after an ambiguous attempt must find out whose object it
 * is (objstore.h, "Ambiguous outcomes").  HTTP statuses, errors included,
 * are results: interpreting them (404 = not found, 412 = exists...) is the
 * backend's job.  Only failures without an HTTP answer (connection refused,
 * timeout, TLS verification failure, after the retries) raise an ERROR here,
 * worded with the caller's description of the request.
 *
 * Credentials.  Nothing this file logs or raises contains a header value, a
 * user name or password, or a URL query string (an Azure SAS token lives
 * there): messages name the caller's description, the method and the URL
 * without its query.  Curl's verbose mode is never enabled.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_HTTP_SESSION_H
#define ROLLOUT_HTTP_SESSION_H

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

/* Retry policy: attempts per request and total backoff between them. */
#define HTTP_MAX_ATTEMPTS			5
#define HTTP_RETRY_BASE_MS			100 /* first backoff ceiling, doubled */
#define HTTP_RETRY_MAX_BACKOFF_MS	5000	/* ceiling of one backoff */
#define HTTP_RETRY_BUDGET_MS		20000	/* total backoff of one request */

/* The most requests one batch may run at once. */
#define HTTP_MAX_CONCURRENT_REQUESTS	256

/* Connection settings of a store (server options), filled by the backend. */
typedef struct HttpSettings
{
	int			connect_timeout_s;	/* connect_timeout, default 10 */
	int			request_timeout_s;	/* request_timeout per attempt, default 60 */
	const char *ca_file;		/* ca_file, or NULL for the system CAs */
	bool		verify_tls;		/* verify_tls, default true */
} HttpSettings;

/* upload files up to this size are sent from memory (no Expect round trip) */
#define HTTP_MEMORY_UPLOAD_MAX		(1024 * 1024)

#define HTTP_DEFAULT_CONNECT_TIMEOUT_S	10
#define HTTP_DEFAULT_REQUEST_TIMEOUT_S	60

/*
 * Parse the connection options shared by remote backends (connect_timeout,
 * request_timeout, ca_file, verify_tls) from a DefElem list into settings;
 * other options are ignored.  Raises an ERROR for an invalid value.
 */
extern void http_settings_from_options(HttpSettings *settings, List *options);

/* One request. */
typedef struct HttpRequest
{
	const char *method;			/* "GET", "HEAD", "PUT", "DELETE", "POST" */
	const char *url;			/* absolute, already percent-encoded */
	List	   *headers;		/* of char * "Name: value"; all are sent */

	/* body: memory (body != NULL), a local file (body_file), or none */
	const char *body;
	size_t		body_length;
	const char *body_file;		/* uploaded with a known Content-Length */
	int64		body_file_offset;	/* where in body_file the body starts */
	int64		body_file_length;	/* its length; 0: to the end of the file */

	/*
	 * SigV4 signing by libcurl: the CURLOPT_AWS_SIGV4 provider string
	 * ("aws:amz:REGION:s3") and the key pair, or NULL for no signing.  The
	 * caller adds x-amz-content-sha256 (and x-amz-security-token) itself.
	 */
	const char *aws_sigv4;
	const char *access_key_id;
	const char *secret_access_key;

	const HttpSettings *settings;

	/*
	 * Where the response body goes: appended to *response_body, which the
	 * session truncates back to its original length before each attempt. NULL
	 * discards it.  HEAD never has one.
	 */
	StringInfo	response_body;

	/*
	 * Words for messages, e.g. "create of object \"k\" in store \"s3://b\"";
	 * must not contain credentials.
	 */
	const char *description;
} HttpRequest;

/* The outcome of the final attempt. */
typedef struct HttpResponse
{
	long		status;			/* HTTP status of the final attempt */
	List	   *headers;		/* of HttpHeader *, in order received */
	int			attempts;		/* attempts made, 1 when no retry */

	/*
	 * True when an earlier attempt ended without a usable answer after the
	 * request may have reached the server (timeout, connection lost, 5xx), so
	 * the request may have taken effect before the final attempt.
	 */
	bool		ambiguous;
} HttpResponse;

typedef struct HttpHeader
{
	char	   *name;			/* as received */
	char	   *value;			/* trimmed */
} HttpHeader;

/*
 * Perform a request, retrying as described above, and fill *response.
 * Raises an ERROR when no attempt got an HTTP answer (after the retries),
 * when the request is cancelled, and for local failures (the upload file
 * cannot be read).
 */
extern void http_session_perform(const HttpRequest *request,
								 HttpResponse *response);

/*
 * Perform count requests, at most max_in_flight at a time (clamped to
 * 1..HTTP_MAX_CONCURRENT_REQUESTS), each exactly as http_session_perform
 * would, and fill responses[i] for requests[i].  Every request has its own
 * response body.  Raises the first ERROR any request meets (the others are
 * abandoned, whatever they had done), and on a cancel.
 */
extern void http_session_perform_many(const HttpRequest *requests,
									  HttpResponse *responses,
									  int count, int max_in_flight);

/*
 * What this process has sent: attempts, and rounds, the sequential round
 * trips they amount to.  A request alone is one round per attempt; a batch
 * of n attempts run w at a time is ceil(n / w) rounds.
 */
typedef struct HttpSessionCounters
{
	int64		requests;
	int64		rounds;
	int64		retries;		/* attempts after a request's first */
	int64		maybe_applied;	/* attempts of a write (not GET or HEAD) that
								 * failed after sending (part of) the request,
								 * or were answered 5xx: the server may have
								 * carried them out */
} HttpSessionCounters;

extern void http_session_get_counters(HttpSessionCounters *counters);

/* A response header's value (case-insensitive name), or NULL. */
extern const char *http_response_header(const HttpResponse *response,
										const char *name);

/*
 * The Content-Range of an answer: "bytes FIRST-LAST/TOTAL" (TOTAL may be
 * "*") or, answering a range past the end, "bytes * /TOTAL".  *first and
 * *total are -1 where the header does not say (or is absent or malformed).
 */
extern void http_content_range(const HttpResponse *response, int64 *first,
							   int64 *total);

/*
 * Percent-encode s for a URL: every byte except the unreserved characters
 * A-Z a-z 0-9 - _ . ~ (and '/' when keep_slash) becomes %XX (upper case),
 * the encoding SigV4 signs and Azure accepts.
 */
extern char *http_uri_encode(const char *s, bool keep_slash);

/* Lower-case hex SHA-256 of data (65 bytes with the terminator). */
extern void http_sha256_hex(const char *data, size_t len, char *hex);

/*
 * Lower-case hex SHA-256 of a local file's contents, and its size; raises an
 * ERROR naming the path when it cannot be read.
 */
extern void http_sha256_file_hex(const char *path, char *hex, int64 *size);

#endif							/* ROLLOUT_HTTP_SESSION_H */
