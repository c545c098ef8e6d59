/*-------------------------------------------------------------------------
 *
 * manifest.c
 *		Read the newest base or shard manifest, and commit the next version.
 *
 * Versions live at <prefix><20-digit version>.json.  The newest is found by
 * listing the _manifest/ folder, starting after the newest version this
 * backend has already seen (a hint: versions only ever grow, and garbage
 * collection never removes the newest one).  Committing is a create-if-absent
 * of version v+1: exactly one committer of v+1 wins, and the others learn
 * of the conflict and rebase.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tupmacs.h"
#include "catalog/pg_type_d.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "rollout/grace.h"
#include "rollout/image_check.h"
#include "rollout/json_doc.h"
#include "rollout/manifest.h"
#include "rollout/shard.h"
#include "rollout/store_keys.h"

/* Key of one manifest version under prefix. */
char *
manifest_key(const char *prefix, int64 version)
{
	return psprintf("%s%020lld.json", prefix, (long long) version);
}

/*
 * The newest version under prefix, by listing after the hint (0 when there
 * is none).
 */
static int64
manifest_newest_version(RolloutStore *store, const char *prefix, int64 hint)
{
	char	   *start_after = hint > 0 ? manifest_key(prefix, hint) : NULL;
	List	   *entries = objstore_list_all(store->objstore, prefix, start_after);
	int64		newest = hint;

	for (int i = list_length(entries) - 1; i >= 0; i--)
	{
		ObjectStoreEntry *entry = list_nth(entries, i);
		int64		number = rollout_key_number(entry->key);

		if (number > newest)
		{
			newest = number;
			break;
		}
	}
	return newest;
}

/*
 * Find and fetch the newest version under prefix.  Returns the version (0
 * when there is none) and the document in *json.
 */
static int64
manifest_fetch_latest(RolloutStore *store, const char *prefix, int64 hint,
					  StringInfo json, char **key_out)
{
	int			attempts = 0;

	for (;;)
	{
		int64		newest = manifest_newest_version(store, prefix, hint);
		char	   *key;

		if (newest == 0)
			return 0;

		key = manifest_key(prefix, newest);
		resetStringInfo(json);
		if (objstore_get(store->objstore, key, json))
		{
			*key_out = key;
			return newest;
		}

		/*
		 * The version vanished between listing and reading: only garbage
		 * collection removes manifests, and never the newest, so a newer one
		 * exists now.  Start over without the hint.
		 */
		if (++attempts >= 5)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("could not read a stable version of manifest \"%s\"",
							prefix)));
		hint = 0;
	}
}

/*
 * Check that a manifest's own "version" member is the version its key says, so
 * that an object copied or renamed to another version's key is reported as
 * corrupt instead of being read as that version.
 */
static void
manifest_check_version(JsonDoc *doc, int64 expected)
{
	int64		version = json_doc_int64(doc, doc->root, "version", true, 0);

	if (version != expected)
		json_doc_corrupt(doc, psprintf("It says version %lld but is stored as version %lld.",
									   (long long) version, (long long) expected));
}

/* ----------------------------------------------------------------
 * Datum images as hex, for keys kept in manifests
 * ----------------------------------------------------------------
 */

/*
 * A datum image is the bytes PostgreSQL itself stores for the value (flat,
 * uncompressed for varlena), so a key round-trips without going through
 * the type's text I/O.
 */
static char *
manifest_datum_to_hex(const SegmentColumn *column, Datum value)
{
	char		byval_image[sizeof(Datum)];
	const char *image;
	Size		len;
	char	   *hex;

	if (column->typbyval)
	{
		store_att_byval(byval_image, value, column->typlen);
		image = byval_image;
		len = column->typlen;
	}
	else if (column->typlen > 0)
	{
		image = DatumGetPointer(value);
		len = column->typlen;
	}
	else if (column->typlen == -1)
	{
		struct varlena *flat = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));

		image = (const char *) flat;
		len = VARSIZE_ANY(flat);
	}
	else
	{
		image = DatumGetCString(value);
		len = strlen(image) + 1;
	}
	hex = palloc(len * 2 + 1);
	hex[hex_encode(image, len, hex)] = '\0';
	return hex;
}

/*
 * The inverse of manifest_datum_to_hex, checking that the image is a
 * well-formed value of the column's storage class (ERROR naming the object
 * otherwise), so that a damaged manifest cannot produce a wild pointer.
 */
static Datum
manifest_datum_from_hex(const SegmentColumn *column, const char *hex,
						const char *object_name)
{
	size_t		hexlen = strlen(hex);
	char	   *image;
	Size		len;
	const char *problem = NULL;

	if (hexlen % 2 != 0)
		problem = "has an odd number of hexadecimal digits";
	else
	{
		for (const char *p = hex; *p; p++)
			if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
				  (*p >= 'A' && *p <= 'F')))
			{
				problem = "is not hexadecimal";
				break;
			}
	}
	if (problem == NULL)
	{
		/* palloc0 with room to spare keeps short images aligned and padded */
		image = palloc0(MAXALIGN(hexlen / 2 + 1) + sizeof(Datum));
		len = hex_decode(hex, hexlen, image);

		if (column->typlen > 0 && len != (Size) column->typlen)
			problem = "has the wrong length for the type";
		else if (column->typlen == -1)
		{
			if (len < 1 || VARATT_IS_EXTERNAL(image) ||
				(!VARATT_IS_1B(image) && len < VARHDRSZ) ||
				VARATT_IS_COMPRESSED(image) || VARSIZE_ANY(image) != len)
				problem = "is not a plain varlena";
		}
		else if (column->typlen == -2)
		{
			if (len < 1 || image[len - 1] != '\0' || strlen(image) != len - 1)
				problem = "is not a C string";
		}
		if (problem == NULL && column->image_check != NULL)
			problem = image_check_value(column->image_check, image, len);
		if (problem == NULL)
		{
			if (column->typbyval)
				return fetch_att(image, true, column->typlen);
			return PointerGetDatum(image);
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("object \"%s\" is corrupt", object_name),
			 errdetail("A key value of column \"%s\" %s.",
					   column->name, problem)));
	return (Datum) 0;			/* keep compiler quiet */
}

/* Read an optional hex key member into *value; returns whether present. */
static bool
manifest_read_key(RolloutStore *store, JsonDoc *doc, JsonbContainer *obj,
				  const char *member, Datum *value)
{
	char	   *hex = json_doc_text(doc, obj, member, false);

	if (hex == NULL)
		return false;
	*value = manifest_datum_from_hex(&store->schema.columns[store->key_column],
									 hex, doc->object_name);
	return true;
}

/*
 * Is the order of a key column the same wherever it is computed?  The
 * inline-compared types and these are: text types are compared in the "C"
 * collation (segment.h), the others have no collation.  Not jsonb, whose
 * comparison of strings follows the database's default collation.
 */
static bool
manifest_key_order_portable(const SegmentColumn *key)
{
	if (!key->has_order)
		return false;
	if (key->compare_inline != SEGMENT_COMPARE_CALL)
		return true;
	switch (key->typid)
	{
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case BYTEAOID:
		case NUMERICOID:
		case FLOAT4OID:
		case FLOAT8OID:
			return true;
		default:
			return false;
	}
}

/*
 * An object's key range, members "min_key" and "max_key": false when it has
 * none.  A range whose ends are reversed is corrupt: every read that skips
 * by key range would skip the object's rows without a word.  (Checked only
 * where the order cannot differ from the writer's.)
 */
static bool
manifest_read_key_range(RolloutStore *store, JsonDoc *doc, JsonbContainer *object,
						Datum *min_key, Datum *max_key)
{
	const SegmentColumn *key = &store->schema.columns[store->key_column];

	if (!manifest_read_key(store, doc, object, "min_key", min_key) ||
		!manifest_read_key(store, doc, object, "max_key", max_key))
		return false;
	if (manifest_key_order_portable(key) &&
		segment_column_compare(key, *min_key, *max_key) > 0)
		json_doc_corrupt(doc, "An object's min_key is greater than its max_key.");
	return true;
}

static void
manifest_append_key(RolloutStore *store, StringInfo buf, bool *first,
					const char *member, Datum value)
{
	json_append_member_text(buf, first, member,
							manifest_datum_to_hex(&store->schema.columns[store->key_column],
												  value));
}

/* ----------------------------------------------------------------
 * Shard manifests
 * ----------------------------------------------------------------
 */

/*
 * Whether a stamp read from a manifest is one a writer could have made:
 * stamps are microseconds, and readers and the change feed add to them
 * (change_feed.c refuses positions from half the int64 range on).
 */
static bool
manifest_stamp_in_range(int64 stamp)
{
	return stamp >= 0 && stamp < PG_INT64_MAX / 2;
}

/*
 * The same for positions, epochs, generation numbers and counts: writers
 * add one to them (a position past replay_after that wrapped around would
 * name a WAL entry no listing shows, acknowledged and never read).
 */
static bool
manifest_number_in_range(int64 number)
{
	return number >= 0 && number < PG_INT64_MAX / 2;
}

/* Parse one shard manifest version (json from object key). */
static ShardManifest *
shard_manifest_parse(RolloutStore *store, const char *shard, int64 version,
					 StringInfo json, const char *key)
{
	ShardManifest *manifest = palloc0(sizeof(ShardManifest));
	JsonDoc    *doc;
	JsonbContainer *generations;
	char	   *stored_shard;

	manifest->shard = pstrdup(shard);
	manifest->version = version;
	doc = json_doc_parse(json->data, json->len, key);
	manifest_check_version(doc, manifest->version);
	stored_shard = json_doc_text(doc, doc->root, "shard", true);
	if (strcmp(stored_shard, shard) != 0)
		json_doc_corrupt(doc, psprintf("It belongs to shard \"%s\".", stored_shard));
	manifest->writer_epoch = json_doc_int64(doc, doc->root, "writer_epoch", true, 0);
	manifest->writer_timeline = json_doc_int64(doc, doc->root, "writer_timeline", false, 1);
	if (manifest->writer_timeline < 1)
		json_doc_corrupt(doc, "Its writer timeline is out of range.");
	manifest->epoch_start_position = json_doc_int64(doc, doc->root, "epoch_start_position", true, 0);
	manifest->replay_after = json_doc_int64(doc, doc->root, "replay_after", true, 0);
	manifest->last_stamp = json_doc_int64(doc, doc->root, "last_stamp", true, 0);
	manifest->sealed_epoch = json_doc_int64(doc, doc->root, "sealed_epoch", false, 0);
	manifest->truncate_stamp = json_doc_int64(doc, doc->root, "truncate_stamp", false, 0);
	manifest->drops_covered_by_base = json_doc_int64(doc, doc->root,
													 "drops_covered_by_base", false, 0);
	manifest->next_generation = json_doc_int64(doc, doc->root, "next_generation", true, 0);
	if (!manifest_number_in_range(manifest->replay_after) ||
		!manifest_number_in_range(manifest->writer_epoch) ||
		!manifest_number_in_range(manifest->epoch_start_position) ||
		!manifest_number_in_range(manifest->sealed_epoch) ||
		!manifest_number_in_range(manifest->drops_covered_by_base) ||
		manifest->next_generation < 1 ||
		!manifest_number_in_range(manifest->next_generation))
		json_doc_corrupt(doc, "Its positions are out of range.");
	if (!manifest_stamp_in_range(manifest->last_stamp) ||
		!manifest_stamp_in_range(manifest->truncate_stamp))
		json_doc_corrupt(doc, "Its stamps are out of range.");

	generations = json_doc_container(doc, doc->root, "generations", true, true);
	for (int i = 0; i < json_doc_array_length(generations); i++)
	{
		JsonbContainer *g = json_doc_array_object(doc, generations, i);
		GenerationEntry *entry = palloc0(sizeof(GenerationEntry));

		entry->number = json_doc_int64(doc, g, "number", true, 0);
		entry->file = json_doc_text(doc, g, "file", true);
		entry->first_position = json_doc_int64(doc, g, "first_position", true, 0);
		entry->last_position = json_doc_int64(doc, g, "last_position", true, 0);
		entry->rows = json_doc_int64(doc, g, "rows", true, 0);
		entry->bytes = json_doc_int64(doc, g, "bytes", true, 0);
		entry->min_ts = json_doc_int64(doc, g, "min_ts", false, 0);
		entry->max_ts = json_doc_int64(doc, g, "max_ts", false, 0);
		entry->stamp = json_doc_int64(doc, g, "stamp", false, 0);
		entry->has_key_range =
			manifest_read_key_range(store, doc, g, &entry->min_key, &entry->max_key);
		if (!rollout_key_is_store_segment(store, entry->file))
			json_doc_corrupt(doc, psprintf("Generation %lld is not a segment of the store's folder.",
										   (long long) entry->number));
		if (entry->number < 0 || entry->number >= manifest->next_generation ||
			entry->first_position < 0 ||
			entry->first_position > entry->last_position ||
			entry->last_position > manifest->replay_after ||
			!manifest_number_in_range(entry->rows) ||
			!manifest_number_in_range(entry->bytes) ||
			!manifest_stamp_in_range(entry->stamp))
			json_doc_corrupt(doc, psprintf("Generation %lld is inconsistent with the manifest.",
										   (long long) entry->number));

		/*
		 * Flushes append generations and merges take them from the front, so
		 * they are in ascending order, which merge and readers rely on
		 */
		if (manifest->generations != NIL &&
			((GenerationEntry *) llast(manifest->generations))->number >= entry->number)
			json_doc_corrupt(doc, psprintf("Generation %lld is listed after a newer or equal one.",
										   (long long) entry->number));
		manifest->generations = lappend(manifest->generations, entry);
	}
	return manifest;
}

/* The manifest of a shard that has none yet. */
static ShardManifest *
shard_manifest_empty(const char *shard)
{
	ShardManifest *manifest = palloc0(sizeof(ShardManifest));

	manifest->shard = pstrdup(shard);
	manifest->next_generation = 1;
	manifest->epoch_start_position = 1;
	manifest->writer_timeline = 1;
	return manifest;
}

ShardManifest *
shard_manifest_read_for_update(RolloutStore *store)
{
	ShardManifest *manifest = shard_manifest_read_latest(store, store->shard);

	rollout_check_not_superseded(store, manifest->writer_timeline);
	return manifest;
}

/*
 * Only this cluster's own shard has a listing hint
 * (store->shard_manifest_hint), which this read also advances; another shard's
 * newest version is found by listing its whole _manifest/ folder.  A shard
 * without a manifest yet gets the defaults of shard_manifest_empty (next
 * generation 1, timeline 1), not an error.
 */
ShardManifest *
shard_manifest_read_latest(RolloutStore *store, const char *shard)
{
	char	   *prefix = rollout_key_shard_manifest_prefix(store, shard);
	bool		own_shard = strcmp(shard, store->shard) == 0;
	StringInfoData json;
	char	   *key = NULL;
	int64		version;
	TimestampTz read_at = GetCurrentTimestamp();
	ShardManifest *manifest;

	initStringInfo(&json);
	version = manifest_fetch_latest(store, prefix,
									own_shard ? store->shard_manifest_hint : 0,
									&json, &key);
	if (version == 0)
		manifest = shard_manifest_empty(shard);
	else
	{
		if (own_shard)
			store->shard_manifest_hint = version;
		manifest = shard_manifest_parse(store, shard, version, &json, key);
	}
	manifest->read_at = read_at;
	return manifest;
}

/*
 * The newest version of shard's manifest (0: none yet), by listing its
 * _manifest/ folder; this cluster's own shard lists after its hint and moves
 * it on.
 */
int64
shard_manifest_newest_version(RolloutStore *store, const char *shard)
{
	bool		own_shard = strcmp(shard, store->shard) == 0;
	int64		version;

	version = manifest_newest_version(store,
									  rollout_key_shard_manifest_prefix(store, shard),
									  own_shard ? store->shard_manifest_hint : 0);
	if (own_shard)
		store->shard_manifest_hint = Max(store->shard_manifest_hint, version);
	return version;
}

/*
 * shard_manifests_read_versions
 *		Given versions of several shards' manifests, in the order of shards.
 *
 * The documents are read in one batch of concurrent requests: a snapshot of a
 * store many clusters write to waits for one read instead of one per shard.
 * Version 0 gives the empty manifest of a shard that has none yet; a version
 * that does not exist (any more) gives NULL.
 */
ShardManifest **
shard_manifests_read_versions(RolloutStore *store, List *shards,
							  const int64 *versions)
{
	int			count = list_length(shards);
	ObjectStoreRead *reads = palloc0(sizeof(ObjectStoreRead) * Max(count, 1));
	int		   *read_of = palloc(sizeof(int) * Max(count, 1));
	ShardManifest **manifests = palloc0(sizeof(ShardManifest *) * Max(count, 1));
	int			nreads = 0;
	ListCell   *lc;

	foreach(lc, shards)
	{
		const char *shard = lfirst(lc);
		int			i = foreach_current_index(lc);

		if (versions[i] == 0)
		{
			manifests[i] = shard_manifest_empty(shard);
			continue;
		}
		reads[nreads].key = manifest_key(rollout_key_shard_manifest_prefix(store, shard),
										 versions[i]);
		reads[nreads].length = -1;
		reads[nreads].size_hint = -1;
		reads[nreads].out = makeStringInfo();
		read_of[nreads++] = i;
	}

	objstore_get_many(store->objstore, reads, nreads);

	for (int r = 0; r < nreads; r++)
	{
		int			i = read_of[r];

		if (reads[r].found)
			manifests[i] = shard_manifest_parse(store, list_nth(shards, i),
												versions[i], reads[r].out,
												reads[r].key);
	}
	return manifests;
}

/*
 * shard_manifests_read_latest
 *		The newest manifest of each of shards, in the same order.
 *
 * What shard_manifest_read_latest does for each, with the reads of the
 * newest versions made in one batch (shard_manifests_read_versions).  The
 * listings still go one after the other.  A version that vanished between
 * listing and reading (garbage collection never removes the newest, so a
 * newer one exists) is looked for again, alone.
 */
List *
shard_manifests_read_latest(RolloutStore *store, List *shards)
{
	int			count = list_length(shards);
	int64	   *versions = palloc0(sizeof(int64) * Max(count, 1));
	ShardManifest **manifests;
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, shards)
		versions[foreach_current_index(lc)] =
		shard_manifest_newest_version(store, lfirst(lc));
	manifests = shard_manifests_read_versions(store, shards, versions);
	foreach(lc, shards)
	{
		int			i = foreach_current_index(lc);

		if (manifests[i] == NULL)
			manifests[i] = shard_manifest_read_latest(store, lfirst(lc));
		result = lappend(result, manifests[i]);
	}
	return result;
}

/*
 * One given version of shard's manifest, or NULL when it does not exist (any
 * more: a concurrent garbage collection may have removed it).  Unlike
 * shard_manifest_read_latest it neither uses nor moves the listing hint.
 */
ShardManifest *
shard_manifest_read_version(RolloutStore *store, const char *shard, int64 version)
{
	char	   *key = manifest_key(rollout_key_shard_manifest_prefix(store, shard), version);
	StringInfoData json;

	initStringInfo(&json);
	if (!objstore_get(store->objstore, key, &json))
		return NULL;
	return shard_manifest_parse(store, shard, version, &json, key);
}

/*
 * Whether a manifest, read as the newest at read_at, is too old to commit
 * the next version of.  It may have been superseded twice since and the
 * version after it collected by gc (a superseded version goes once its
 * successor is older than gc's grace): that number would be free again, and
 * a create-if-absent of it would succeed below a newer version and count for
 * nothing, while the committer believed its change made.  Within half the
 * minimum grace that cannot have happened (grace.h).
 */
static bool
manifest_read_too_old(RolloutStore *store, const char *which, int64 version,
					  TimestampTz read_at)
{
	if (read_at == 0 || !rollout_output_too_old(read_at))
		return false;
	ereport(LOG,
			(errmsg("rollout_fdw: not committing version %lld of the %s manifest of store \"%s\": the version before it was read more than half of rollout_fdw.min_gc_grace ago",
					(long long) version, which, store->name),
			 errdetail("Garbage collection may have taken a version since; the committer reads the manifest again.")));
	return true;
}

/*
 * Write manifest as version manifest->version + 1 with create-if-absent: of
 * two committers of the same version exactly one wins, and the other gets
 * MANIFEST_CONFLICT and rebases.  A manifest read too long ago
 * (manifest_read_too_old) is a conflict too, without writing anything.  For
 * this cluster's own shard it first raises an ERROR when a promoted standby
 * superseded this server, judged by the timeline of the version read; a
 * takeover committed since then holds the next version and makes this commit
 * a conflict anyway.  A generation's stamp and key range are written only
 * when it has them, as the parser treats them as optional.
 */
ManifestCommitResult
shard_manifest_commit(RolloutStore *store, ShardManifest *manifest)
{
	StringInfoData buf;
	bool		first = true;
	ListCell   *lc;
	char	   *key;
	int64		version = manifest->version + 1;

	/* a cluster superseded by a promoted standby changes the shard no more */
	if (strcmp(manifest->shard, store->shard) == 0)
		rollout_check_not_superseded(store, manifest->writer_timeline);
	if (manifest_read_too_old(store, psprintf("shard \"%s\"", manifest->shard),
							  version, manifest->read_at))
		return MANIFEST_CONFLICT;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_append_member_text(&buf, &first, "shard", manifest->shard);
	json_append_member_int64(&buf, &first, "version", version);
	json_append_member_int64(&buf, &first, "previous", manifest->version);
	json_append_member_text(&buf, &first, "created_at",
							timestamptz_to_str(GetCurrentTimestamp()));
	json_append_member_int64(&buf, &first, "writer_epoch", manifest->writer_epoch);
	json_append_member_int64(&buf, &first, "writer_timeline", manifest->writer_timeline);
	json_append_member_int64(&buf, &first, "epoch_start_position",
							 manifest->epoch_start_position);
	json_append_member_int64(&buf, &first, "replay_after", manifest->replay_after);
	json_append_member_int64(&buf, &first, "last_stamp", manifest->last_stamp);
	if (manifest->sealed_epoch > 0)
		json_append_member_int64(&buf, &first, "sealed_epoch", manifest->sealed_epoch);
	if (manifest->truncate_stamp > 0)
		json_append_member_int64(&buf, &first, "truncate_stamp", manifest->truncate_stamp);
	if (manifest->drops_covered_by_base > 0)
		json_append_member_int64(&buf, &first, "drops_covered_by_base",
								 manifest->drops_covered_by_base);
	json_append_member_int64(&buf, &first, "next_generation",
							 manifest->next_generation);
	json_append_member_raw(&buf, &first, "generations", "[");
	foreach(lc, manifest->generations)
	{
		GenerationEntry *entry = lfirst(lc);
		bool		gfirst = true;

		if (foreach_current_index(lc) > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoChar(&buf, '{');
		json_append_member_int64(&buf, &gfirst, "number", entry->number);
		json_append_member_text(&buf, &gfirst, "file", entry->file);
		json_append_member_int64(&buf, &gfirst, "first_position", entry->first_position);
		json_append_member_int64(&buf, &gfirst, "last_position", entry->last_position);
		json_append_member_int64(&buf, &gfirst, "rows", entry->rows);
		json_append_member_int64(&buf, &gfirst, "bytes", entry->bytes);
		json_append_member_int64(&buf, &gfirst, "min_ts", entry->min_ts);
		json_append_member_int64(&buf, &gfirst, "max_ts", entry->max_ts);
		if (entry->stamp > 0)
			json_append_member_int64(&buf, &gfirst, "stamp", entry->stamp);
		if (entry->has_key_range)
		{
			manifest_append_key(store, &buf, &gfirst, "min_key", entry->min_key);
			manifest_append_key(store, &buf, &gfirst, "max_key", entry->max_key);
		}
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoString(&buf, "]}");
	json_doc_seal(&buf);

	key = manifest_key(rollout_key_shard_manifest_prefix(store, manifest->shard),
					   version);
	if (objstore_create_if_absent(store->objstore, key, buf.data, buf.len,
								  objstore_new_put_id()) != OBJSTORE_CREATED)
		return MANIFEST_CONFLICT;
	manifest->version = version;
	if (strcmp(manifest->shard, store->shard) == 0)
		store->shard_manifest_hint = version;
	return MANIFEST_COMMITTED;
}

/* ----------------------------------------------------------------
 * Base manifests
 * ----------------------------------------------------------------
 */

/* Parse one base manifest version (json from object key). */
static BaseManifest *
base_manifest_parse(RolloutStore *store, int64 version, StringInfo json,
					const char *key)
{
	BaseManifest *manifest = palloc0(sizeof(BaseManifest));
	JsonDoc    *doc;
	JsonbContainer *fragments;
	JsonbContainer *merged;
	JsonbContainer *compactions;

	manifest->version = version;
	doc = json_doc_parse(json->data, json->len, key);
	manifest_check_version(doc, manifest->version);
	fragments = json_doc_container(doc, doc->root, "fragments", true, true);
	for (int i = 0; i < json_doc_array_length(fragments); i++)
	{
		JsonbContainer *f = json_doc_array_object(doc, fragments, i);
		FragmentEntry *entry = palloc0(sizeof(FragmentEntry));

		entry->file = json_doc_text(doc, f, "file", true);
		entry->rows = json_doc_int64(doc, f, "rows", true, 0);
		entry->bytes = json_doc_int64(doc, f, "bytes", true, 0);
		entry->min_ts = json_doc_int64(doc, f, "min_ts", false, 0);
		entry->max_ts = json_doc_int64(doc, f, "max_ts", false, 0);
		entry->has_key_range =
			manifest_read_key_range(store, doc, f, &entry->min_key, &entry->max_key);
		entry->disjoint_set = json_doc_text(doc, f, "disjoint_set", false);
		if (!rollout_key_is_store_segment(store, entry->file) ||
			!manifest_number_in_range(entry->rows) ||
			!manifest_number_in_range(entry->bytes))
			json_doc_corrupt(doc, psprintf("Fragment %d is not a segment of the store's folder, or its counts are out of range.",
										   i + 1));
		manifest->fragments = lappend(manifest->fragments, entry);
	}

	/* merged: an array of {shard, generation} */
	merged = json_doc_container(doc, doc->root, "merged", true, true);
	for (int i = 0; i < json_doc_array_length(merged); i++)
	{
		JsonbContainer *m = json_doc_array_object(doc, merged, i);
		MergedMark *mark = palloc0(sizeof(MergedMark));

		mark->shard = json_doc_text(doc, m, "shard", true);
		mark->generation = json_doc_int64(doc, m, "generation", true, 0);
		if (!manifest_number_in_range(mark->generation))
			json_doc_corrupt(doc, "A merged generation number is out of range.");
		manifest->merged = lappend(manifest->merged, mark);
	}

	manifest->truncate_stamp = json_doc_int64(doc, doc->root, "truncate_stamp", false, 0);
	if (!manifest_stamp_in_range(manifest->truncate_stamp))
		json_doc_corrupt(doc, "Its truncate stamp is out of range.");
	compactions = json_doc_container(doc, doc->root, "compactions", false, false);
	if (compactions != NULL)
	{
		manifest->total_compactions = json_doc_int64(doc, compactions, "count", false, 0);
		manifest->last_compaction = json_doc_text(doc, compactions, "last_time", false);
		manifest->last_compaction_error = json_doc_text(doc, compactions, "last_error", false);
	}
	return manifest;
}

/*
 * The newest base manifest, or an empty version-0 one (no fragments, nothing
 * merged) for a store never merged.  Uses and advances
 * store->base_manifest_hint, so that repeated reads list only versions newer
 * than the newest one seen.
 */
BaseManifest *
base_manifest_read_latest(RolloutStore *store)
{
	char	   *prefix = rollout_key_base_manifest_prefix(store);
	StringInfoData json;
	char	   *key = NULL;
	int64		version;
	TimestampTz read_at = GetCurrentTimestamp();
	BaseManifest *manifest;

	initStringInfo(&json);
	version = manifest_fetch_latest(store, prefix, store->base_manifest_hint,
									&json, &key);
	if (version == 0)
		manifest = palloc0(sizeof(BaseManifest));
	else
	{
		store->base_manifest_hint = version;
		manifest = base_manifest_parse(store, version, &json, key);
	}
	manifest->read_at = read_at;
	return manifest;
}

/* The newest base manifest version (0: none yet), listed after the hint. */
int64
base_manifest_newest_version(RolloutStore *store)
{
	int64		version = manifest_newest_version(store,
												  rollout_key_base_manifest_prefix(store),
												  store->base_manifest_hint);

	store->base_manifest_hint = Max(store->base_manifest_hint, version);
	return version;
}

/*
 * One given version of the base manifest, or NULL when it does not exist (any
 * more: a concurrent garbage collection may have removed it).  Garbage
 * collection reads the kept versions this way to learn which fragments they
 * reference; the listing hint is left alone.
 */
BaseManifest *
base_manifest_read_version(RolloutStore *store, int64 version)
{
	char	   *key = manifest_key(rollout_key_base_manifest_prefix(store), version);
	StringInfoData json;

	initStringInfo(&json);
	if (!objstore_get(store->objstore, key, &json))
		return NULL;
	return base_manifest_parse(store, version, &json, key);
}

/*
 * Write manifest as the next base version with create-if-absent, as
 * shard_manifest_commit does; on MANIFEST_CONFLICT the caller re-reads and
 * rebases.  There is no superseded check here: the base belongs to no single
 * shard, and the callers check that this server may write.  The compactions
 * object is always written, with JSON null for what never happened.
 */
ManifestCommitResult
base_manifest_commit(RolloutStore *store, BaseManifest *manifest)
{
	StringInfoData buf;
	bool		first = true;
	bool		cfirst = true;
	ListCell   *lc;
	char	   *key;
	int64		version = manifest->version + 1;

	if (manifest_read_too_old(store, "base", version, manifest->read_at))
		return MANIFEST_CONFLICT;
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_append_member_int64(&buf, &first, "version", version);
	json_append_member_int64(&buf, &first, "previous", manifest->version);
	json_append_member_text(&buf, &first, "created_at",
							timestamptz_to_str(GetCurrentTimestamp()));
	json_append_member_raw(&buf, &first, "fragments", "[");
	foreach(lc, manifest->fragments)
	{
		FragmentEntry *entry = lfirst(lc);
		bool		ffirst = true;

		if (foreach_current_index(lc) > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoChar(&buf, '{');
		json_append_member_text(&buf, &ffirst, "file", entry->file);
		json_append_member_int64(&buf, &ffirst, "rows", entry->rows);
		json_append_member_int64(&buf, &ffirst, "bytes", entry->bytes);
		json_append_member_int64(&buf, &ffirst, "min_ts", entry->min_ts);
		json_append_member_int64(&buf, &ffirst, "max_ts", entry->max_ts);
		if (entry->has_key_range)
		{
			manifest_append_key(store, &buf, &ffirst, "min_key", entry->min_key);
			manifest_append_key(store, &buf, &ffirst, "max_key", entry->max_key);
		}
		if (entry->disjoint_set != NULL)
			json_append_member_text(&buf, &ffirst, "disjoint_set", entry->disjoint_set);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoString(&buf, "]");
	json_append_member_raw(&buf, &first, "merged", "[");
	foreach(lc, manifest->merged)
	{
		MergedMark *mark = lfirst(lc);
		bool		mfirst = true;

		if (foreach_current_index(lc) > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoChar(&buf, '{');
		json_append_member_text(&buf, &mfirst, "shard", mark->shard);
		json_append_member_int64(&buf, &mfirst, "generation", mark->generation);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoString(&buf, "]");
	if (manifest->truncate_stamp > 0)
		json_append_member_int64(&buf, &first, "truncate_stamp", manifest->truncate_stamp);
	json_append_member_raw(&buf, &first, "compactions", "{");
	json_append_member_int64(&buf, &cfirst, "count", manifest->total_compactions);
	json_append_member_text(&buf, &cfirst, "last_time", manifest->last_compaction);
	json_append_member_text(&buf, &cfirst, "last_error", manifest->last_compaction_error);
	appendStringInfoString(&buf, "}}");
	json_doc_seal(&buf);

	key = manifest_key(rollout_key_base_manifest_prefix(store), version);
	if (objstore_create_if_absent(store->objstore, key, buf.data, buf.len,
								  objstore_new_put_id()) != OBJSTORE_CREATED)
		return MANIFEST_CONFLICT;
	manifest->version = version;
	store->base_manifest_hint = version;
	return MANIFEST_COMMITTED;
}

/*
 * The fragments, those of one disjoint set counted once (manifest.h).  A
 * set has few members, and a base few sets: the quadratic search is cheap.
 */
int
fragment_run_count(List *fragments)
{
	int			runs = 0;
	ListCell   *lc;

	foreach(lc, fragments)
	{
		FragmentEntry *fragment = lfirst(lc);
		bool		counted = false;

		for (ListCell *earlier = list_head(fragments);
			 fragment->disjoint_set != NULL && earlier != lc;
			 earlier = lnext(fragments, earlier))
		{
			const char *set = ((FragmentEntry *) lfirst(earlier))->disjoint_set;

			if (set != NULL && strcmp(set, fragment->disjoint_set) == 0)
				counted = true;
		}
		if (!counted)
			runs++;
	}
	return runs;
}

/* Is a fragment with this file name in fragments (manifest.h)? */
bool
fragment_entry_listed(List *fragments, const char *file)
{
	ListCell   *lc;

	foreach(lc, fragments)
	{
		if (strcmp(((FragmentEntry *) lfirst(lc))->file, file) == 0)
			return true;
	}
	return false;
}

/*
 * merged[shard]: the highest generation of shard already folded into the base,
 * or 0 when none was.  A snapshot skips the shard's generations up to it,
 * whose rows the base's fragments already hold, and merge folds only the ones
 * after it.
 */
int64
base_manifest_merged_generation(const BaseManifest *base, const char *shard)
{
	ListCell   *lc;

	foreach(lc, base->merged)
	{
		MergedMark *mark = lfirst(lc);

		if (strcmp(mark->shard, shard) == 0)
			return mark->generation;
	}
	return 0;
}
