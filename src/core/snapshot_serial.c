/*-------------------------------------------------------------------------
 *
 * snapshot_serial.c
 *		A snapshot flattened into bytes, and restored from them.
 *
 * A parallel scan's leader takes the store snapshot its isolation level
 * promises (fdw/scan_snapshot.c) and hands it to its workers in dynamic
 * shared memory; a worker that took its own would read another moment of
 * the store, and could not see the memtable rows or the transaction's own
 * rows the leader copied.  The bytes are read only by a worker of the
 * same server build, so fields are stored in native byte order; every
 * string and row blob is preceded by its length.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/datum.h"

#include "rollout/snapshot.h"

static void
put_int64(StringInfo out, int64 value)
{
	appendBinaryStringInfo(out, (const char *) &value, sizeof(value));
}

static int64
get_int64(const char **cursor)
{
	int64		value;

	memcpy(&value, *cursor, sizeof(value));
	*cursor += sizeof(value);
	return value;
}

/* A string, or NULL as length -1. */
static void
put_string(StringInfo out, const char *value)
{
	put_int64(out, value == NULL ? -1 : (int64) strlen(value));
	if (value != NULL)
		appendBinaryStringInfo(out, value, strlen(value));
}

static char *
get_string(const char **cursor)
{
	int64		length = get_int64(cursor);
	char	   *value;

	if (length < 0)
		return NULL;
	value = pnstrdup(*cursor, length);
	*cursor += length;
	return value;
}

/* Pad out to a MAXALIGNed offset, so that what follows may be read in place. */
static void
put_padding(StringInfo out)
{
	while ((Size) out->len != MAXALIGN(out->len))
		appendStringInfoChar(out, '\0');
}

static void
put_key(StringInfo out, Datum key, int16 key_len, bool key_byval)
{
	Size		size = datumEstimateSpace(key, false, key_byval, key_len);
	char	   *start;

	enlargeStringInfo(out, size);
	start = out->data + out->len;
	datumSerialize(key, false, key_byval, key_len, &start);
	out->len += size;
	out->data[out->len] = '\0';
}

static Datum
get_key(const char **cursor)
{
	bool		isnull;
	char	   *position = (char *) *cursor;
	Datum		key = datumRestore(&position, &isnull);

	*cursor = position;
	return key;
}

void
snapshot_serialize(const RolloutSnapshot *snapshot, int16 key_len,
				   bool key_byval, StringInfo out)
{
	ListCell   *lc;

	put_int64(out, snapshot->base_version);
	put_int64(out, snapshot->fragment_count);
	put_int64(out, snapshot->generation_count);
	put_int64(out, snapshot->wal_entry_count);
	put_int64(out, snapshot->wal_object_count);
	put_int64(out, snapshot->shard_count);
	put_int64(out, snapshot->truncate_stamp);
	put_int64(out, snapshot->manifests_from_view ? 1 : 0);
	put_string(out, snapshot->own_wal_tail);
	put_int64(out, list_length(snapshot->sources));
	foreach(lc, snapshot->sources)
	{
		const SnapshotSource *source = lfirst(lc);

		put_int64(out, source->kind);
		put_string(out, source->key);
		put_string(out, source->shard);
		put_int64(out, source->shard_hash);
		put_int64(out, source->position);
		put_int64(out, source->rows);
		put_int64(out, source->bytes);
		put_int64(out, source->has_key_range);
		if (source->has_key_range)
		{
			put_key(out, source->min_key, key_len, key_byval);
			put_key(out, source->max_key, key_len, key_byval);
		}
		put_int64(out, source->stamp_floor);
		put_int64(out, source->epoch_floor);
		put_int64(out, source->stamp_fixed);
		put_int64(out, source->max_ts);
		put_int64(out, source->min_ts);
		put_string(out, source->disjoint_set);
		put_int64(out, source->rows_data == NULL ? -1 : source->rows_len);
		if (source->rows_data != NULL)
		{
			put_padding(out);
			appendBinaryStringInfo(out, source->rows_data, source->rows_len);
		}
	}
}

void
snapshot_serialize_keys(const Datum *keys, int count, int16 key_len,
						bool key_byval, StringInfo out)
{
	for (int i = 0; i < count; i++)
		put_key(out, keys[i], key_len, key_byval);
	put_padding(out);
}

Datum *
snapshot_restore_keys(const char **cursor, int count)
{
	Datum	   *keys = palloc(sizeof(Datum) * Max(count, 1));

	for (int i = 0; i < count; i++)
		keys[i] = get_key(cursor);
	return keys;
}

RolloutSnapshot *
snapshot_restore(const char *data, int16 key_len, bool key_byval)
{
	RolloutSnapshot *snapshot = palloc0(sizeof(RolloutSnapshot));
	const char *cursor = data;
	int64		count;

	Assert(data == (const char *) MAXALIGN(data));
	snapshot->base_version = get_int64(&cursor);
	snapshot->fragment_count = get_int64(&cursor);
	snapshot->generation_count = get_int64(&cursor);
	snapshot->wal_entry_count = get_int64(&cursor);
	snapshot->wal_object_count = get_int64(&cursor);
	snapshot->shard_count = get_int64(&cursor);
	snapshot->truncate_stamp = get_int64(&cursor);
	snapshot->manifests_from_view = get_int64(&cursor) != 0;
	snapshot->own_wal_tail = get_string(&cursor);
	count = get_int64(&cursor);
	for (int64 i = 0; i < count; i++)
	{
		SnapshotSource *source = snapshot_source_new(get_int64(&cursor));
		int64		rows_len;

		source->key = get_string(&cursor);
		source->shard = get_string(&cursor);
		source->shard_hash = get_int64(&cursor);
		source->position = get_int64(&cursor);
		source->rows = get_int64(&cursor);
		source->bytes = get_int64(&cursor);
		source->has_key_range = get_int64(&cursor) != 0;
		if (source->has_key_range)
		{
			source->min_key = get_key(&cursor);
			source->max_key = get_key(&cursor);
		}
		source->stamp_floor = get_int64(&cursor);
		source->epoch_floor = get_int64(&cursor);
		source->stamp_fixed = get_int64(&cursor);
		source->max_ts = get_int64(&cursor);
		source->min_ts = get_int64(&cursor);
		source->disjoint_set = get_string(&cursor);
		rows_len = get_int64(&cursor);
		if (rows_len >= 0)
		{
			/* the same padding as put_padding, relative to data's start */
			cursor = data + MAXALIGN(cursor - data);
			source->rows_data = cursor;
			source->rows_len = rows_len;
			cursor += rows_len;
		}
		snapshot->sources = lappend(snapshot->sources, source);
	}
	return snapshot;
}
