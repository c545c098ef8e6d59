/*-------------------------------------------------------------------------
 *
 * store_keys.c
 *		The names of a store's objects (DESIGN.md §3).
 *
 * Every object key is relative to the location root and starts with the
 * store's name.  Numbered objects (WAL positions, generations, manifest
 * versions) have 20-digit zero-padded names, so that a listing in byte
 * order is numeric order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "rollout/store_keys.h"

/* ----------------------------------------------------------------
 * Object keys
 * ----------------------------------------------------------------
 */

char *
rollout_key_store_json(RolloutStore *store)
{
	return psprintf("%s/_store.json", store->name);
}

char *
rollout_key_shard_registry(RolloutStore *store, const char *shard)
{
	return psprintf("%s/_shards/%s", store->name, shard);
}

char *
rollout_key_wal_prefix(RolloutStore *store, const char *shard)
{
	return psprintf("%s/shards/%s/wal/", store->name, shard);
}

char *
rollout_key_write_probe_prefix(RolloutStore *store, const char *shard)
{
	return psprintf("%s/shards/%s/_probes/", store->name, shard);
}

char *
rollout_key_wal(RolloutStore *store, const char *shard, int64 position)
{
	return psprintf("%s/shards/%s/wal/%020lld.wal", store->name, shard,
					(long long) position);
}

char *
rollout_key_new_generation(RolloutStore *store, const char *shard, int64 number)
{
	return psprintf("%s/shards/%s/gen/%020lld-%s.seg", store->name, shard,
					(long long) number, objstore_new_put_id());
}

char *
rollout_key_shard_manifest_prefix(RolloutStore *store, const char *shard)
{
	return psprintf("%s/shards/%s/_manifest/", store->name, shard);
}

char *
rollout_key_base_manifest_prefix(RolloutStore *store)
{
	return psprintf("%s/base/_manifest/", store->name);
}

/*
 * The number in the last path component of a key such as
 * ".../wal/00000000000000000042.wal"; -1 when the name is not 20 digits and an
 * extension (a foreign object, which callers ignore).
 */
int64
rollout_key_number(const char *key)
{
	const char *name = strrchr(key, '/');
	int64		value = 0;
	int			digits = 0;

	name = name ? name + 1 : key;
	for (const char *p = name; *p && *p != '.'; p++)
	{
		if (*p < '0' || *p > '9' || digits >= 20)
			return -1;
		if (value > (PG_INT64_MAX - 9) / 10)
			return -1;
		value = value * 10 + (*p - '0');
		digits++;
	}
	if (digits != 20 || name[digits] != '.')
		return -1;
	return value;
}


/*
 * Is key a name no other object of the store will ever have, not even after
 * the store is deleted and created again?  Base fragments and ingest
 * segments are named by a fresh UUID; WAL entries and generations by
 * numbers a new incarnation of the store starts again from.
 */
bool
rollout_key_is_unique(RolloutStore *store, const char *key)
{
	size_t		name_len = strlen(store->name);

	if (strncmp(key, store->name, name_len) != 0 || key[name_len] != '/')
		return false;
	key += name_len + 1;
	return strncmp(key, "base/data/", 10) == 0 || strncmp(key, "ingest/", 7) == 0;
}

/*
 * Is key, read from a manifest or a WAL entry, one of store's segments: a
 * base fragment, an ingest segment or a shard's generation, in the store's
 * own folder, with no empty, "." or ".." part?  Such names come from the
 * store, which whoever writes it controls: a name outside the folder would
 * read another store's rows, and one with dot parts may be resolved by the
 * HTTP stack to an object outside the location.
 */
bool
rollout_key_is_store_segment(RolloutStore *store, const char *key)
{
	return rollout_key_is_segment_of(store->name, strlen(store->name), key);
}

/* The same for the store named by the first name_len bytes of name. */
bool
rollout_key_is_segment_of(const char *name, size_t name_len, const char *key)
{
	const char *rest;

	if (name_len == 0 || strncmp(key, name, name_len) != 0 || key[name_len] != '/')
		return false;
	rest = key + name_len + 1;
	for (const char *part = rest;;)
	{
		const char *end = strchr(part, '/');
		size_t		len = end ? (size_t) (end - part) : strlen(part);

		if (len == 0 || (len == 1 && part[0] == '.') ||
			(len == 2 && part[0] == '.' && part[1] == '.'))
			return false;
		if (end == NULL)
			break;
		part = end + 1;
	}
	return strncmp(rest, "base/data/", 10) == 0 ||
		strncmp(rest, "ingest/", 7) == 0 ||
		(strncmp(rest, "shards/", 7) == 0 && strstr(rest, "/gen/") != NULL);
}

/*
 * Is key a generation of a shard?  A generation's key names one object for
 * good: it carries a fresh uuid (rollout_key_new_generation), and stores
 * written before it had one named a generation by its number alone, which
 * manifests only ever raise once committed.  A flush that failed before its
 * commit could reuse such a number, but nothing had read the object it
 * abandoned (no manifest named it).  Across creations the old numbers start
 * again (rollout_key_is_unique says no).
 */
bool
rollout_key_is_generation(RolloutStore *store, const char *key)
{
	size_t		name_len = strlen(store->name);

	if (strncmp(key, store->name, name_len) != 0 || key[name_len] != '/')
		return false;
	key += name_len + 1;
	return strncmp(key, "shards/", 7) == 0 && strstr(key, "/gen/") != NULL;
}

/* Key of a new base fragment: base/data/<uuid>.seg */
char *
rollout_key_new_fragment(RolloutStore *store)
{
	return psprintf("%s/base/data/%s.seg", store->name, objstore_new_put_id());
}
