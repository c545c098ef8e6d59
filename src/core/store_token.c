/*-------------------------------------------------------------------------
 *
 * store_token.c
 *		Split the tokens that name a state of a store: a prefix naming the
 *		kind and its version, the store's incarnation (a store dropped and
 *		created again is another store), a head, then one value per shard.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"

#include "rollout/shard.h"
#include "rollout/store_token.h"

bool
store_token_incarnation_valid(const char *incarnation)
{
	return incarnation[0] != '\0' &&
		strspn(incarnation, "0123456789abcdefABCDEF-") == strlen(incarnation);
}

bool
store_token_split(const char *string, const char *prefix, StoreToken *token)
{
	char	   *copy;
	char	   *head;
	char	   *shards;

	if (strncmp(string, prefix, strlen(prefix)) != 0)
		return false;
	copy = pstrdup(string + strlen(prefix));
	if ((head = strchr(copy, ':')) == NULL)
		return false;
	*head++ = '\0';
	if ((shards = strchr(head, ':')) == NULL)
		return false;
	*shards++ = '\0';
	if (!store_token_incarnation_valid(copy))
		return false;
	/* "a=1," is no list: its end was cut off, or something was added */
	if (shards[0] != '\0' && shards[strlen(shards) - 1] == ',')
		return false;
	token->incarnation = copy;
	token->head = head;
	token->shards = shards;
	return true;
}

bool
store_token_next_shard(char **cursor, char **shard, char **value,
					   bool *malformed)
{
	char	   *entry = *cursor;
	char	   *end;
	char	   *equals;

	/* a token may be as long as a text value: let a cancel in */
	CHECK_FOR_INTERRUPTS();
	*malformed = false;
	if (*entry == '\0')
		return false;
	end = strchr(entry, ',');
	if (end != NULL)
		*end++ = '\0';
	else
		end = entry + strlen(entry);
	*cursor = end;
	equals = strchr(entry, '=');
	if (equals == NULL)
	{
		*malformed = true;
		return false;
	}
	*equals = '\0';
	if (!rollout_shard_id_is_valid(entry))
	{
		*malformed = true;
		return false;
	}
	*shard = entry;
	*value = equals + 1;
	return true;
}

static int
shard_name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

const char *
store_token_repeated_shard(const char **names, int count)
{
	const char **sorted;
	const char *repeated = NULL;

	if (count < 2)
		return NULL;
	sorted = palloc(sizeof(const char *) * count);
	memcpy(sorted, names, sizeof(const char *) * count);
	qsort(sorted, count, sizeof(const char *), shard_name_cmp);
	for (int i = 1; i < count && repeated == NULL; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0)
			repeated = sorted[i];
	pfree(sorted);
	return repeated;
}

#define TOKEN_MESSAGE_CHARS 160

const char *
store_token_for_message(const char *text)
{
	int			length = strlen(text);

	if (length <= TOKEN_MESSAGE_CHARS)
		return text;

	return psprintf("%.*s...", pg_mbcliplen(text, length, TOKEN_MESSAGE_CHARS),
					text);
}
