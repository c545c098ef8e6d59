/*-------------------------------------------------------------------------
 *
 * store.c
 *		Open a rollout store: create or check _store.json, build the segment
 *		schema, and name the objects of the store.
 *
 * _store.json is written exactly once, with create-if-absent, by the first
 * cluster that opens the store; every later open compares the foreign
 * table's columns with it.  The schema it fixes (column order, types, key)
 * is the schema of every segment in the store, so a table whose definition
 * drifted from it must be refused before it reads or writes anything.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tupmacs.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "rollout/json_doc.h"
#include "rollout/rollout_fdw.h"
#include "rollout/store.h"

static void store_init_schema_from_json(RolloutStore *store,
										const RolloutStoreSpec *spec,
										const char *json, int len,
										const char *object_name);
static char *store_json_for_spec(const RolloutStoreSpec *spec);
static char *store_type_name(Oid typid);

/* ----------------------------------------------------------------
 * Shard identity
 * ----------------------------------------------------------------
 */

/*
 * This cluster's shard id: rollout_fdw.shard_id when set, otherwise the
 * PostgreSQL system identifier, so that a promoted standby (same identifier)
 * takes its primary's shard over.
 */
char *
rollout_current_shard_id(void)
{
	if (rollout_shard_id_setting != NULL && rollout_shard_id_setting[0] != '\0')
		return pstrdup(rollout_shard_id_setting);
	return psprintf(UINT64_FORMAT, GetSystemIdentifier());
}

/*
 * Shard ids become object-key components, so only a conservative set of
 * characters is allowed.
 */
bool
rollout_shard_id_is_valid(const char *shard)
{
	size_t		len = strlen(shard);

	if (len == 0 || len > 64)
		return false;
	for (const char *p = shard; *p; p++)
	{
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			return false;
	}
	return true;
}

/* The value of the hidden _shard column: a stable hash of the shard id. */
int64
rollout_shard_hash(const char *shard)
{
	return (int64) hash_bytes_extended((const unsigned char *) shard,
									   strlen(shard), 0);
}

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
rollout_key_wal(RolloutStore *store, const char *shard, int64 position)
{
	return psprintf("%s/shards/%s/wal/%020lld.wal", store->name, shard,
					(long long) position);
}

char *
rollout_key_generation(RolloutStore *store, const char *shard, int64 number)
{
	return psprintf("%s/shards/%s/gen/%020lld.seg", store->name, shard,
					(long long) number);
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

/* ----------------------------------------------------------------
 * Opening
 * ----------------------------------------------------------------
 */

/*
 * Open the store a foreign table describes.  Creates _store.json from the
 * table's definition when the store is new; otherwise checks the table
 * against it.  The result lives in a new context under parent.
 */
RolloutStore *
rollout_store_open(const RolloutStoreSpec *spec, MemoryContext parent)
{
	MemoryContext context;
	MemoryContext oldcontext;
	RolloutStore *store;
	StringInfoData json;
	char	   *key;

	context = AllocSetContextCreate(parent, "rollout store",
									ALLOCSET_SMALL_SIZES);
	oldcontext = MemoryContextSwitchTo(context);

	store = palloc0(sizeof(RolloutStore));
	store->context = context;
	store->name = pstrdup(spec->store_name);
	store->objstore = objstore_open(spec->location, spec->location_options);
	store->location = pstrdup(store->objstore->location);
	store->shard = rollout_current_shard_id();
	store->shard_hash = rollout_shard_hash(store->shard);

	key = rollout_key_store_json(store);
	initStringInfo(&json);
	if (!objstore_get(store->objstore, key, &json))
	{
		/*
		 * A new store.  Reading it needs nothing on storage (it is empty), so
		 * _store.json is written by the first write, not by a SELECT (which
		 * may run on a hot standby, or by a user who may only read).
		 */
		store->pending_definition = store_json_for_spec(spec);
		appendStringInfoString(&json, store->pending_definition);
	}
	store_init_schema_from_json(store, spec, json.data, json.len, key);

	MemoryContextSwitchTo(oldcontext);
	return store;
}

/*
 * Make sure _store.json exists before the first write.  Two clusters may
 * create the same store at once: the loser of the create-if-absent checks
 * that the winner's definition is the one this store was opened with.
 */
void
rollout_store_ensure_created(RolloutStore *store)
{
	char	   *key;
	StringInfoData json;
	JsonDoc    *doc;
	JsonbContainer *columns;
	bool		same;

	if (store->pending_definition == NULL)
		return;
	key = rollout_key_store_json(store);
	if (objstore_create_if_absent(store->objstore, key, store->pending_definition,
								  strlen(store->pending_definition),
								  objstore_new_put_id()) == OBJSTORE_CREATED)
	{
		store->pending_definition = NULL;
		return;
	}

	initStringInfo(&json);
	if (!objstore_get(store->objstore, key, &json))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("store \"%s\" vanished while it was being created",
						store->name)));
	doc = json_doc_parse(json.data, json.len, key);
	columns = json_doc_container(doc, doc->root, "columns", true, true);
	same = strcmp(json_doc_text(doc, doc->root, "key", true),
				  store->schema.columns[store->key_column].name) == 0 &&
		json_doc_array_length(columns) == store->user_column_count;
	for (int c = 0; same && c < store->user_column_count; c++)
	{
		JsonbContainer *col = json_doc_array_object(doc, columns, c);

		same = strcmp(json_doc_text(doc, col, "name", true),
					  store->schema.columns[c].name) == 0 &&
			strcmp(json_doc_text(doc, col, "type", true),
				   store_type_name(store->schema.columns[c].typid)) == 0;
	}
	if (!same)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("store \"%s\" was just created by another session with a different definition",
						store->name),
				 errhint("Check the foreign table against %s and retry.", key)));
	{
		char	   *winner = json_doc_text(doc, doc->root, "incarnation", false);
		MemoryContext oldcontext = MemoryContextSwitchTo(store->context);

		if (winner != NULL)
			store->incarnation = pstrdup(winner);
		MemoryContextSwitchTo(oldcontext);
	}
	store->pending_definition = NULL;
}

void
rollout_store_close(RolloutStore *store)
{
	objstore_close(store->objstore);
	MemoryContextDelete(store->context);
}

/* The type's name as _store.json records it (no typmod: storage ignores it). */
static char *
store_type_name(Oid typid)
{
	return format_type_be_qualified(typid);
}

/*
 * _store.json for a new store: the format version, the key and the columns
 * in the table's order.
 */
static char *
store_json_for_spec(const RolloutStoreSpec *spec)
{
	StringInfoData buf;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_append_member_int64(&buf, &first, "format_version",
							 ROLLOUT_STORE_FORMAT_VERSION);
	json_append_member_text(&buf, &first, "store", spec->store_name);
	json_append_member_text(&buf, &first, "key", spec->key_column);
	json_append_member_text(&buf, &first, "incarnation", objstore_new_put_id());
	json_append_member_text(&buf, &first, "created_at",
							timestamptz_to_str(GetCurrentTimestamp()));
	json_append_member_raw(&buf, &first, "columns", "[");
	for (int i = 0; i < spec->ncolumns; i++)
	{
		bool		cfirst = true;

		if (i > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoChar(&buf, '{');
		json_append_member_text(&buf, &cfirst, "name", spec->columns[i].name);
		json_append_member_text(&buf, &cfirst, "type",
								store_type_name(spec->columns[i].typid));
		json_append_member_int64(&buf, &cfirst, "typid", spec->columns[i].typid);
		json_append_member_int64(&buf, &cfirst, "typmod", spec->columns[i].typmod);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoString(&buf, "]}");
	return buf.data;
}

/*
 * Check the table (spec) against _store.json and build the segment schema:
 * the stored columns in stored order, then the hidden columns.
 */
static void
store_init_schema_from_json(RolloutStore *store, const RolloutStoreSpec *spec,
							const char *json, int len, const char *object_name)
{
	JsonDoc    *doc = json_doc_parse(json, len, object_name);
	int64		format_version;
	char	   *stored_key;
	JsonbContainer *columns;
	int			ncolumns;
	SegmentSchema *schema = &store->schema;
	bool	   *matched;

	format_version = json_doc_int64(doc, doc->root, "format_version", true, 0);
	if (format_version != ROLLOUT_STORE_FORMAT_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("store \"%s\" has format version %lld, but this build of rollout_fdw reads version %d",
						store->name, (long long) format_version,
						ROLLOUT_STORE_FORMAT_VERSION)));

	/*
	 * Which creation of the store this is: a store deleted and created again
	 * under the same name is another store, and state kept about the old one
	 * (the shared writer's memtable) must not leak into it.
	 */
	store->incarnation = json_doc_text(doc, doc->root, "incarnation", false);
	if (store->incarnation == NULL)
		store->incarnation = json_doc_text(doc, doc->root, "created_at", false);
	if (store->incarnation == NULL)
		store->incarnation = pstrdup("");

	stored_key = json_doc_text(doc, doc->root, "key", true);
	if (strcmp(stored_key, spec->key_column) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("store \"%s\" is keyed by column \"%s\", not \"%s\"",
						store->name, stored_key, spec->key_column),
				 errhint("Set the foreign table's \"key\" option to \"%s\".",
						 stored_key)));

	columns = json_doc_container(doc, doc->root, "columns", true, true);
	ncolumns = json_doc_array_length(columns);
	if (ncolumns < 1)
		json_doc_corrupt(doc, "The store has no columns.");

	schema->ncolumns = ncolumns + ROLLOUT_HIDDEN_COLUMNS;
	schema->columns = palloc0(sizeof(SegmentColumn) * schema->ncolumns);
	schema->key_column = -1;
	store->user_column_count = ncolumns;
	matched = palloc0(sizeof(bool) * Max(spec->ncolumns, 1));

	for (int c = 0; c < ncolumns; c++)
	{
		JsonbContainer *col = json_doc_array_object(doc, columns, c);
		char	   *name = json_doc_text(doc, col, "name", true);
		char	   *type = json_doc_text(doc, col, "type", true);
		int			t;

		for (t = 0; t < spec->ncolumns; t++)
			if (strcmp(spec->columns[t].name, name) == 0)
				break;
		if (t == spec->ncolumns)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("foreign table has no column \"%s\" of store \"%s\"",
							name, store->name),
					 errdetail("The store's columns are fixed by its _store.json when it was created."),
					 errhint("Add column \"%s\" of type %s to the foreign table.",
							 name, type)));
		if (strcmp(store_type_name(spec->columns[t].typid), type) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" has type %s in the foreign table but %s in store \"%s\"",
							name, format_type_be(spec->columns[t].typid),
							type, store->name),
					 errdetail("A store's column types are fixed by its _store.json when it was created.")));
		matched[t] = true;
		segment_column_init(&schema->columns[c], name, spec->columns[t].typid,
							spec->columns[t].typmod);
		if (strcmp(name, stored_key) == 0)
			schema->key_column = c;
	}

	for (int t = 0; t < spec->ncolumns; t++)
	{
		if (!matched[t])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("column \"%s\" of the foreign table does not exist in store \"%s\"",
							spec->columns[t].name, store->name),
					 errdetail("The store's columns are fixed by its _store.json when it was created.")));
	}
	if (schema->key_column < 0)
		json_doc_corrupt(doc, "The key column is not among the columns.");
	if (!schema->columns[schema->key_column].has_order)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("key column \"%s\" of store \"%s\" has a type without a default btree operator class",
						stored_key, store->name)));

	store->row_desc = CreateTemplateTupleDesc(ncolumns);
	for (int c = 0; c < ncolumns; c++)
		TupleDescInitEntry(store->row_desc, (AttrNumber) (c + 1),
						   schema->columns[c].name, schema->columns[c].typid,
						   schema->columns[c].typmod, 0);

	store->key_column = schema->key_column;
	store->ts_column = ncolumns;
	store->shard_column = ncolumns + 1;
	store->op_column = ncolumns + 2;
	segment_column_init(&schema->columns[store->ts_column], "_ts", INT8OID, -1);
	segment_column_init(&schema->columns[store->shard_column], "_shard", INT8OID, -1);
	segment_column_init(&schema->columns[store->op_column], "_op", INT2OID, -1);
}

int
rollout_store_column_index(RolloutStore *store, const char *name)
{
	for (int i = 0; i < store->user_column_count; i++)
		if (strcmp(store->schema.columns[i].name, name) == 0)
			return i;
	return -1;
}

/* ----------------------------------------------------------------
 * Shards
 * ----------------------------------------------------------------
 */

/*
 * Record this cluster's shard under _shards/ before its first WAL entry, so
 * that readers can enumerate shards with one small listing instead of
 * listing every object under shards/.
 */
void
rollout_store_register_shard(RolloutStore *store)
{
	char	   *key;
	char	   *body;

	if (store->shard_registered)
		return;
	key = rollout_key_shard_registry(store, store->shard);
	body = psprintf("{\"shard\": \"%s\"}", store->shard);
	/* "already exists" is the normal case after the first write */
	(void) objstore_create_if_absent(store->objstore, key, body, strlen(body),
									 objstore_new_put_id());
	store->shard_registered = true;
}

/* The shard ids registered in the store, sorted. */
List *
rollout_store_list_shards(RolloutStore *store)
{
	char	   *prefix = psprintf("%s/_shards/", store->name);
	size_t		prefix_len = strlen(prefix);
	List	   *entries = objstore_list_all(store->objstore, prefix, NULL);
	List	   *shards = NIL;
	ListCell   *lc;

	foreach(lc, entries)
	{
		ObjectStoreEntry *entry = lfirst(lc);
		const char *shard = entry->key + prefix_len;

		/* ignore anything that could not be one of our shard ids */
		if (rollout_shard_id_is_valid(shard))
			shards = lappend(shards, pstrdup(shard));
	}
	return shards;
}

/* ----------------------------------------------------------------
 * Segment sources over store objects
 * ----------------------------------------------------------------
 */

/*
 * A segment source over one object.  Bytes fetched ahead of time by
 * rollout_segment_sources_prefetch() wait in prefetched until the reader asks
 * for exactly that range (or that tail); each is served once and then freed,
 * so what a source holds is bounded by what was prefetched for it.  A read
 * nothing was prefetched for goes to the object store as before.
 */
typedef struct StoreObjectSource
{
	ObjectStore *objstore;
	char	   *key;
	int64		size_hint;		/* the object's size if known, else -1 */
	List	   *prefetched;		/* PrefetchedRead * */
	MemoryContext context;		/* where the source and its reads live */
} StoreObjectSource;

/* One read made ahead of time: its request and its result. */
typedef struct PrefetchedRead
{
	bool		tail;
	int64		offset;
	int64		length;
	bool		found;
	int64		object_size;
	StringInfoData data;
} PrefetchedRead;

/*
 * The prefetched read matching a request, taken out of the source's list,
 * or NULL.
 */
static PrefetchedRead *
store_object_take_prefetched(StoreObjectSource *source, bool tail,
							 int64 offset, int64 length)
{
	ListCell   *lc;

	foreach(lc, source->prefetched)
	{
		PrefetchedRead *read = lfirst(lc);

		if (read->tail == tail && read->length == length &&
			(tail || read->offset == offset))
		{
			source->prefetched = foreach_delete_current(source->prefetched, lc);
			return read;
		}
	}
	return NULL;
}

/* Hand a prefetched read's result to the reader, and free it. */
static bool
store_object_serve_prefetched(PrefetchedRead *read, StringInfo out,
							  int64 *object_size)
{
	bool		found = read->found;

	if (found)
	{
		appendBinaryStringInfo(out, read->data.data, read->data.len);
		if (object_size)
			*object_size = read->object_size;
	}
	pfree(read->data.data);
	pfree(read);
	return found;
}

static bool
store_object_read_range(void *arg, int64 offset, int64 length, StringInfo out)
{
	StoreObjectSource *source = arg;
	PrefetchedRead *read = store_object_take_prefetched(source, false,
														offset, length);

	if (read != NULL)
		return store_object_serve_prefetched(read, out, NULL);
	return objstore_get_range(source->objstore, source->key, offset, length,
							  out, NULL);
}

static bool
store_object_read_tail(void *arg, int64 length, StringInfo out,
					   int64 *object_size)
{
	StoreObjectSource *source = arg;
	PrefetchedRead *read = store_object_take_prefetched(source, true, 0, length);

	if (read != NULL)
		return store_object_serve_prefetched(read, out, object_size);
	return objstore_get_tail(source->objstore, source->key, length, out,
							 object_size);
}

SegmentSource *
rollout_segment_source(RolloutStore *store, const char *key, int64 size_hint)
{
	SegmentSource *source = palloc0(sizeof(SegmentSource));
	StoreObjectSource *arg = palloc0(sizeof(StoreObjectSource));

	arg->objstore = store->objstore;
	arg->key = pstrdup(key);
	arg->size_hint = size_hint;
	arg->context = CurrentMemoryContext;
	source->name = arg->key;
	source->arg = arg;
	source->read_range = store_object_read_range;
	source->read_tail = store_object_read_tail;
	return source;
}

/*
 * rollout_segment_sources_prefetch
 *		Fetch reads of many store objects in one batch of concurrent requests
 *		and keep each result in its source, for the reader to find.
 *
 * The results (bytes, or "the object does not exist") are exactly what the
 * reads would have returned if made one by one now; the reader meets them
 * when it asks, as it would have met them from the store.  Each source must
 * come from rollout_segment_source(); the bytes live in its memory context.
 */
void
rollout_segment_sources_prefetch(RolloutStore *store,
								 SegmentPrefetch *prefetches, int count)
{
	ObjectStoreRead *reads;
	PrefetchedRead **results;

	if (count <= 0)
		return;
	reads = palloc0(sizeof(ObjectStoreRead) * count);
	results = palloc(sizeof(PrefetchedRead *) * count);
	for (int i = 0; i < count; i++)
	{
		StoreObjectSource *source = prefetches[i].source->arg;
		PrefetchedRead *result = MemoryContextAllocZero(source->context,
														sizeof(PrefetchedRead));

		Assert(prefetches[i].source->read_range == store_object_read_range);
		result->tail = prefetches[i].tail;
		result->offset = prefetches[i].tail ? 0 : prefetches[i].offset;
		result->length = prefetches[i].length;
		result->data.data = MemoryContextAlloc(source->context, 1024);
		result->data.maxlen = 1024;
		result->data.len = 0;
		result->data.data[0] = '\0';
		results[i] = result;

		reads[i].key = source->key;
		reads[i].offset = result->offset;
		reads[i].length = result->length;
		reads[i].tail = result->tail;
		reads[i].size_hint = source->size_hint;
		reads[i].out = &result->data;
	}

	objstore_get_many(store->objstore, reads, count);

	for (int i = 0; i < count; i++)
	{
		StoreObjectSource *source = prefetches[i].source->arg;
		MemoryContext oldcontext = MemoryContextSwitchTo(source->context);

		results[i]->found = reads[i].found;
		results[i]->object_size = reads[i].object_size;
		source->prefetched = lappend(source->prefetched, results[i]);
		MemoryContextSwitchTo(oldcontext);
	}
	pfree(reads);
	pfree(results);
}

/*
 * rollout_segment_footers
 *		Open many objects' segment readers, their footers fetched with
 *		concurrent requests, and hand each to callback in order.
 *
 * The footers are fetched a window at a time (one batch each), so that a
 * remote store costs a few round trips per window rather than one per
 * object, while the bytes held at once stay bounded.  callback gets the
 * reader of keys[i], or NULL when the object does not exist; the reader is
 * closed when callback returns, so callback must not keep it.  sizes may be
 * NULL (unknown) or give each object's size (-1: unknown).
 */
void
rollout_segment_footers(RolloutStore *store, char *const *keys,
						const int64 *sizes, int count,
						SegmentFooterCallback callback, void *arg)
{
	int			window = Max(64, 4 * objstore_max_concurrent_requests);
	MemoryContext window_context;
	MemoryContext oldcontext = CurrentMemoryContext;

	if (count <= 0)
		return;
	window_context = AllocSetContextCreate(CurrentMemoryContext,
										   "rollout segment footers",
										   ALLOCSET_DEFAULT_SIZES);
	for (int start = 0; start < count; start += window)
	{
		int			end = Min(count, start + window);
		SegmentPrefetch *prefetches;

		MemoryContextSwitchTo(window_context);
		prefetches = palloc(sizeof(SegmentPrefetch) * (end - start));
		for (int i = start; i < end; i++)
		{
			prefetches[i - start].source =
				rollout_segment_source(store, keys[i], sizes ? sizes[i] : -1);
			prefetches[i - start].tail = true;
			prefetches[i - start].offset = 0;
			prefetches[i - start].length = SEGMENT_TAIL_READ_SIZE;
		}
		rollout_segment_sources_prefetch(store, prefetches, end - start);

		for (int i = start; i < end; i++)
		{
			SegmentReader *reader;

			CHECK_FOR_INTERRUPTS();
			MemoryContextSwitchTo(window_context);
			reader = segment_reader_open(prefetches[i - start].source);
			MemoryContextSwitchTo(oldcontext);
			callback(reader, i, arg);
			if (reader != NULL)
				segment_reader_close(reader);
		}
		MemoryContextReset(window_context);
	}
	MemoryContextSwitchTo(oldcontext);
	MemoryContextDelete(window_context);
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
char *
rollout_datum_to_hex(const SegmentColumn *column, Datum value)
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
 * The inverse of rollout_datum_to_hex, checking that the image is a
 * well-formed value of the column's storage class (ERROR naming the object
 * otherwise), so that a damaged manifest cannot produce a wild pointer.
 */
Datum
rollout_datum_from_hex(const SegmentColumn *column, const char *hex,
					   const char *object_name)
{
	size_t		hexlen = strlen(hex);
	char	   *image;
	Size		len;
	const char *problem = NULL;

	if (hexlen % 2 != 0)
		problem = "odd length";
	else
	{
		for (const char *p = hex; *p; p++)
			if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
				  (*p >= 'A' && *p <= 'F')))
			{
				problem = "not hexadecimal";
				break;
			}
	}
	if (problem == NULL)
	{
		/* palloc0 with room to spare keeps short images aligned and padded */
		image = palloc0(MAXALIGN(hexlen / 2 + 1) + sizeof(Datum));
		len = hex_decode(hex, hexlen, image);

		if (column->typlen > 0 && len != (Size) column->typlen)
			problem = "wrong length for the type";
		else if (column->typlen == -1)
		{
			if (len < 1 || VARATT_IS_EXTERNAL(image) ||
				(!VARATT_IS_1B(image) && len < VARHDRSZ) ||
				VARATT_IS_COMPRESSED(image) || VARSIZE_ANY(image) != len)
				problem = "not a plain varlena";
		}
		else if (column->typlen == -2)
		{
			if (len < 1 || image[len - 1] != '\0' || strlen(image) != len - 1)
				problem = "not a C string";
		}
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
			 errdetail("A key value of column \"%s\" is invalid: %s.",
					   column->name, problem)));
	return (Datum) 0;			/* keep compiler quiet */
}
