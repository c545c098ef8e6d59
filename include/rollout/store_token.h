/*-------------------------------------------------------------------------
 *
 * store_token.h
 *		The text layout shared by the tokens that name a state of a store
 *		(core/store_token.c): named snapshots ("rs1:") and change feed
 *		positions ("cf1:").
 *
 * "<prefix><incarnation>:<head>:<shard>=<value>,<shard>=<value>,..."
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_STORE_TOKEN_H
#define ROLLOUT_STORE_TOKEN_H

/* A token split into its parts, which point into a copy of the text. */
typedef struct StoreToken
{
	char	   *incarnation;	/* hex digits and dashes, not empty */
	char	   *head;			/* what comes before the shards */
	char	   *shards;			/* the shard list, for store_token_next_shard */
} StoreToken;

/*
 * Split string, which must begin with prefix, into a copy of its parts; false
 * when it is not laid out as above.
 */
extern bool store_token_split(const char *string, const char *prefix,
							  StoreToken *token);

/* Can incarnation stand in a token (hex digits and dashes, not empty)? */
extern bool store_token_incarnation_valid(const char *incarnation);

/*
 * The next "<shard>=<value>" of the list at *cursor: *shard and *value
 * point into it, and *cursor moves past it.  False at the end, and with
 * *malformed set when the entry is not one (no "=", or not a valid shard
 * id).
 */
extern bool store_token_next_shard(char **cursor, char **shard, char **value,
								   bool *malformed);

/*
 * A shard named more than once among the count names, or NULL.  In
 * O(count log count): a token is text anyone may pass, of any length.
 */
extern const char *store_token_repeated_shard(const char **names, int count);

/*
 * A token as an error message quotes it: whole when short, else its start
 * and "...", so that a long one (a store of many shards, or anyone's text)
 * does not fill the log.
 */
extern const char *store_token_for_message(const char *text);

#endif							/* ROLLOUT_STORE_TOKEN_H */
