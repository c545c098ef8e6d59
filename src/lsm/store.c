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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/tupmacs.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "storage/fd.h"
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
static void store_init_column(RolloutStore *store, int c, JsonDoc *doc,
							  JsonbContainer *col, const char *name,
							  const RolloutColumnSpec *spec_column);

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

/*
 * The PostgreSQL timeline this cluster writes on.  Promotion moves a
 * standby to a new, higher timeline, while the primary it replaces (if it
 * still runs) stays on the old one; both have the same system identifier,
 * so the timeline is what tells the shard's new writer from its old one.
 * Only meaningful outside recovery, where every caller is (a standby never
 * writes).
 */
int64
rollout_writer_timeline(void)
{
	Assert(!RecoveryInProgress());
	return (int64) GetWALInsertionTimeLine();
}

/*
 * ERROR when the shard's newest claim came from a higher timeline than this
 * cluster's: a standby of this cluster was promoted and took the shard
 * over, and this cluster, its old primary, must not write it again.
 */
void
rollout_check_not_superseded(RolloutStore *store, int64 writer_timeline)
{
	int64		mine = rollout_writer_timeline();

	if (writer_timeline > mine)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("shard \"%s\" of store \"%s\" was taken over by a promoted standby",
						store->shard, store->name),
				 errdetail("The shard's writer is on timeline %lld; this server is on timeline %lld and writes nothing more to the shard.",
						   (long long) writer_timeline, (long long) mine),
				 errhint("This server was replaced by its promoted standby. Rebuild it as a standby of the new primary (pg_rewind or pg_basebackup).")));
}

/*
 * ERROR when this server is in recovery: a standby reads stores but never
 * writes them (it shares its primary's shard).  operation is a verb for the
 * message ("flush", "merge" ...).  The object-store layer refuses writes
 * during recovery too (objstore.c); checking here first names what was
 * asked and writes nothing at all, not even a first object.
 */
void
rollout_check_writable(RolloutStore *store, const char *operation)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot %s store \"%s\" during recovery", operation, store->name),
				 errdetail("This server is a standby: it reads rollout stores but never writes to them."),
				 errhint("Run it on the primary.")));
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

	/*
	 * The embedded default is a folder of this data directory.  A standby's
	 * copy of it came with its base backup and never follows the primary:
	 * reading it would show stale rows as if they were current.
	 */
	if (RecoveryInProgress() && objstore_location_is_default(spec->location))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot read store \"%s\" in the embedded default location on a standby",
						spec->store_name),
				 errdetail("The embedded default is a folder of the primary's data directory; a standby's copy of it is as old as its base backup."),
				 errhint("Keep stores that standbys read at a location both servers reach: file:// on shared storage, s3:// or az://.")));

	context = AllocSetContextCreate(parent, "rollout store",
									ALLOCSET_SMALL_SIZES);
	oldcontext = MemoryContextSwitchTo(context);

	/* a store that fails to open must not leave its context in parent */
	PG_TRY();
	{
		store = palloc0(sizeof(RolloutStore));
		store->context = context;
		store->name = pstrdup(spec->store_name);
		store->objstore = objstore_open(spec->location, spec->location_options,
										spec->allow_environment_credentials);
		store->location = pstrdup(store->objstore->location);
		store->location_is_default = objstore_location_is_default(spec->location);
		store->shard = rollout_current_shard_id();
		store->shard_hash = rollout_shard_hash(store->shard);

		key = rollout_key_store_json(store);
		initStringInfo(&json);
		if (!objstore_get(store->objstore, key, &json))
		{
			/*
			 * A new store.  Reading it needs nothing on storage (it is
			 * empty), so _store.json is written by the first write, not by a
			 * SELECT (which may run on a hot standby, or by a user who may
			 * only read).
			 */
			store->pending_definition = store_json_for_spec(spec);
			appendStringInfoString(&json, store->pending_definition);
		}
		store_init_schema_from_json(store, spec, json.data, json.len, key);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcontext);
		MemoryContextDelete(context);
		PG_RE_THROW();
	}
	PG_END_TRY();

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

		char	   *encoding = json_doc_text(doc, col, "encoding", false);

		same = strcmp(json_doc_text(doc, col, "name", true),
					  store->schema.columns[c].name) == 0 &&
			strcmp(json_doc_text(doc, col, "type", true),
				   store_type_name(store->codecs[c].typid)) == 0 &&
			strcmp(encoding ? encoding : "image",
				   portable_encoding_name(store->codecs[c].encoding)) == 0;
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
		json_append_member_text(&buf, &cfirst, "encoding",
								portable_encoding_name(portable_type_encoding(spec->columns[i].typid,
																			  NULL)));
		json_append_member_int64(&buf, &cfirst, "typid", spec->columns[i].typid);
		json_append_member_int64(&buf, &cfirst, "typmod", spec->columns[i].typmod);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoString(&buf, "]}");
	return buf.data;
}

/*
 * Set up stored column c (named name; col is its _store.json object) for
 * the table column spec_column: its codec and its segment column.
 *
 * The encoding comes from the column's type here, and must be the one the
 * store recorded: "image" unless _store.json (version 2) says "text".  A
 * version-1 store kept images for every type, so one with a column whose
 * values now need text holds OIDs of the database that wrote it, which this
 * database cannot tell apart from its own: it is refused.
 */
static void
store_init_column(RolloutStore *store, int c, JsonDoc *doc, JsonbContainer *col,
				  const char *name, const RolloutColumnSpec *spec_column)
{
	char	   *why = NULL;
	PortableEncoding local = portable_type_encoding(spec_column->typid, &why);
	char	   *stored_name = json_doc_text(doc, col, "encoding", false);
	PortableEncoding stored = PORTABLE_IMAGE;
	SegmentColumn *column = &store->schema.columns[c];

	if (local == PORTABLE_REFUSED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("column \"%s\" of store \"%s\" has type %s, which a rollout store cannot keep",
						name, store->name, format_type_be(spec_column->typid)),
				 errdetail("%s", why)));
	if (stored_name != NULL && strcmp(stored_name, "text") == 0)
		stored = PORTABLE_TEXT;
	else if (stored_name != NULL && strcmp(stored_name, "image") != 0)
		json_doc_corrupt(doc, psprintf("Column \"%s\" has the unknown encoding \"%s\".",
									   name, stored_name));
	if (local != stored && store->format_version < 2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("store \"%s\" keeps column \"%s\" of type %s in a database-specific form",
						store->name, name, format_type_be(spec_column->typid)),
				 errdetail("The store was created with format version %d, which kept the internal image of such values; it names objects by OID, which mean other things, or nothing, in another database.",
						   store->format_version),
				 errhint("Copy the rows, from the database that wrote them and with the rollout_fdw version that wrote them, into a new store.")));
	if (local != stored)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of store \"%s\" is stored as %s, but type %s here needs %s",
						name, store->name, portable_encoding_name(stored),
						format_type_be(spec_column->typid),
						portable_encoding_name(local)),
				 errdetail("The type has the same name as the store's but is a different kind of type.")));

	portable_codec_init(&store->codecs[c], local, spec_column->typid,
						spec_column->typmod);
	if (local == PORTABLE_TEXT)
	{
		/* kept as text, and never compared: text order is not its order */
		segment_column_init(column, name, TEXTOID, -1);
		column->has_order = false;
		store->has_text_columns = true;
	}
	else
		segment_column_init(column, name, spec_column->typid,
							spec_column->typmod);
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
	if (format_version < ROLLOUT_STORE_OLDEST_FORMAT_VERSION ||
		format_version > ROLLOUT_STORE_FORMAT_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("store \"%s\" has format version %lld, but this build of rollout_fdw reads versions %d to %d",
						store->name, (long long) format_version,
						ROLLOUT_STORE_OLDEST_FORMAT_VERSION,
						ROLLOUT_STORE_FORMAT_VERSION)));
	store->format_version = (int) format_version;

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
	store->codecs = palloc0(sizeof(PortableCodec) * ncolumns);
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
		store_init_column(store, c, doc, col, name, &spec->columns[t]);
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
	if (store->codecs[schema->key_column].encoding != PORTABLE_IMAGE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("key column \"%s\" of store \"%s\" has a type whose values are stored as text",
						stored_key, store->name),
				 errdetail("The order of such values can differ between databases.")));
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
 * A segment in a local file (the sorted rows of a transaction whose buffer
 * spilled to disk, read by its own scans): every read opens, reads and
 * closes the file, so nothing stays open across an ERROR.
 */
static bool
local_file_read(const char *path, int64 offset, int64 length, bool tail,
				StringInfo out, int64 *object_size)
{
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	struct stat st;
	int64		start;
	int64		count;

	if (fd < 0)
	{
		if (errno == ENOENT)
			return false;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	}
	if (fstat(fd, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (object_size != NULL)
		*object_size = (int64) st.st_size;
	if (tail)
	{
		count = Min(length, (int64) st.st_size);
		start = (int64) st.st_size - count;
	}
	else
	{
		start = Min(offset, (int64) st.st_size);
		count = length < 0 ? (int64) st.st_size - start
			: Min(length, (int64) st.st_size - start);
	}
	enlargeStringInfo(out, (int) count);
	if (count > 0 &&
		pg_pread(fd, out->data + out->len, count, start) != count)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", path)));
	out->len += (int) count;
	out->data[out->len] = '\0';
	CloseTransientFile(fd);
	return true;
}

static bool
local_file_read_range(void *arg, int64 offset, int64 length, StringInfo out)
{
	return local_file_read(arg, offset, length, false, out, NULL);
}

static bool
local_file_read_tail(void *arg, int64 length, StringInfo out, int64 *object_size)
{
	return local_file_read(arg, 0, length, true, out, object_size);
}

SegmentSource *
rollout_local_segment_source(const char *path)
{
	SegmentSource *source = palloc0(sizeof(SegmentSource));
	char	   *copy = pstrdup(path);

	source->name = copy;
	source->arg = copy;
	source->read_range = local_file_read_range;
	source->read_tail = local_file_read_tail;
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
