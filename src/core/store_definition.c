/*-------------------------------------------------------------------------
 *
 * store_definition.c
 *		Open a rollout store: create or check _store.json, and build the
 *		segment schema and the column codecs it fixes.
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
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "storage/fd.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "rollout/image_check.h"
#include "rollout/json_doc.h"
#include "rollout/shard.h"
#include "rollout/store_definition.h"
#include "rollout/store_keys.h"

int			store_rows_per_group = SEGMENT_DEFAULT_ROWS_PER_GROUP;
bool		store_check_trusted_images = false;
int			store_key_filter_bits = 10;
int			store_page_size = 8;
int			store_dictionary_size = 32;

static void store_init_schema_from_json(RolloutStore *store,
										const RolloutStoreSpec *spec,
										const char *json, int len,
										const char *object_name);
static char *store_json_for_spec(const RolloutStoreSpec *spec);
static char *store_type_name(Oid typid);
static void store_init_column(RolloutStore *store, int c, JsonDoc *doc,
							  JsonbContainer *col, const char *name,
							  const RolloutColumnSpec *spec_column,
							  bool trusted);

/* ----------------------------------------------------------------
 * Opening
 * ----------------------------------------------------------------
 */

/*
 * Define rollout_fdw.rows_per_group, .key_filter_bits, .page_size,
 * .dictionary_size and .check_trusted_images; _PG_init calls it.
 */
void
store_define_settings(void)
{
	DefineCustomBoolVariable("rollout_fdw.check_trusted_images",
							 "Checks the inside of the values read from trusted stores too.",
							 "Values read from other stores are always checked before PostgreSQL reads them (arrays, jsonb, ranges, text encoding...). Trusted stores are local ones and those of superusers' tables on superusers' servers: only roles as powerful as a superuser can write to them. Takes effect from the next statement.",
							 &store_check_trusted_images,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.rows_per_group",
							"Rows per row group in the segments this backend writes.",
							NULL,
							&store_rows_per_group,
							SEGMENT_DEFAULT_ROWS_PER_GROUP, 1, 1024 * 1024,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.key_filter_bits",
							"Bits per key of the key filter in the segments this backend writes.",
							"A lookup of one key skips every segment whose filter rules the key out; 10 bits make about 1% of the segments without the key still read. 0 writes no filter (and segments of format version 1, which builds of rollout_fdw without key filters read too).",
							&store_key_filter_bits,
							10, 0, 32,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.page_size",
							"Raw size of the pages column chunks are cut into in the segments this backend writes.",
							"A read that needs a few rows of a row group decodes only their pages. 0 writes chunks of one page (segments of format version 1 or 2, which builds of rollout_fdw without pages read too).",
							&store_page_size,
							8, 0, 1024 * 1024,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.dictionary_size",
							"Size of the zstd dictionary a wide column gets in the segments this backend writes.",
							"Trained on the column's first row group, it lets small pages compress as well as large ones. A column gets one when its first row group holds at least eight times as many bytes. 0 writes none (and segments of format version 3 at most, which builds of rollout_fdw without dictionaries read too).",
							&store_dictionary_size,
							32, 0, 1024,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

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
		store->access_options = copyObject(spec->location_options);
		store->access_environment = spec->allow_environment_credentials;
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
 * Which creation of the store a _store.json (doc) names: its "incarnation",
 * or "created_at" as written before incarnations were, or "" for neither.
 */
static char *
store_json_incarnation(JsonDoc *doc)
{
	char	   *incarnation = json_doc_text(doc, doc->root, "incarnation", false);

	if (incarnation == NULL)
		incarnation = json_doc_text(doc, doc->root, "created_at", false);
	return incarnation != NULL ? incarnation : pstrdup("");
}

/*
 * Take over the definition another session or cluster wrote to _store.json
 * (key, its text in json) for a store this handle was about to create:
 * ERROR unless it is the definition this store was opened with; then the
 * store's incarnation is the one written, and nothing is pending.
 */
static void
store_adopt_definition(RolloutStore *store, const char *key, StringInfo json)
{
	JsonDoc    *doc = json_doc_parse(json->data, json->len, key);
	JsonbContainer *columns = json_doc_container(doc, doc->root, "columns", true, true);
	bool		same;
	char	   *winner;

	same = strcmp(json_doc_text(doc, doc->root, "key", true),
				  store->schema.columns[store->key_column].name) == 0 &&
		json_doc_array_length(columns) == store->user_column_count;
	for (int c = 0; same && c < store->user_column_count; c++)
	{
		JsonbContainer *col = json_doc_array_object(doc, columns, c);

		char	   *encoding = json_doc_text(doc, col, "encoding", false);
		char	   *image = json_doc_text(doc, col, "image", false);

		same = strcmp(json_doc_text(doc, col, "name", true),
					  store->schema.columns[c].name) == 0 &&
			strcmp(json_doc_text(doc, col, "type", true),
				   store_type_name(store->codecs[c].typid)) == 0 &&
			strcmp(encoding ? encoding : "image",
				   portable_encoding_name(store->codecs[c].encoding)) == 0 &&
			(image == NULL ||
			 strcmp(image, image_check_signature(store->codecs[c].typid)) == 0);
	}
	if (!same)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("store \"%s\" was just created by another session with a different definition",
						store->name),
				 errhint("Check the foreign table against %s and retry.", key)));
	winner = store_json_incarnation(doc);
	store->incarnation = MemoryContextStrdup(store->context, winner);
	store->incarnation_checked_at = GetCurrentTimestamp();
	store->pending_definition = NULL;
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
	store_adopt_definition(store, key, &json);
}

bool
rollout_store_exists(RolloutStore *store)
{
	char	   *key;
	StringInfoData json;

	if (store->pending_definition == NULL)
		return true;
	key = rollout_key_store_json(store);
	initStringInfo(&json);
	if (!objstore_get(store->objstore, key, &json))
		return false;
	store_adopt_definition(store, key, &json);
	return true;
}

/* See store_definition.h. */
bool
rollout_store_is_current(RolloutStore *store, int max_age_ms)
{
	TimestampTz now = GetCurrentTimestamp();
	char	   *key;
	StringInfoData json;
	bool		current;

	if (store->stale)
		return false;
	/* nothing written yet, or read a moment ago */
	if (!rollout_store_exists(store) || store->incarnation == NULL ||
		!TimestampDifferenceExceeds(store->incarnation_checked_at, now, max_age_ms))
		return true;
	key = rollout_key_store_json(store);
	initStringInfo(&json);
	current = objstore_get(store->objstore, key, &json) &&
		strcmp(store_json_incarnation(json_doc_parse(json.data, json.len, key)),
			   store->incarnation) == 0;
	pfree(json.data);
	if (!current)
		store->stale = true;
	else
		store->incarnation_checked_at = now;
	return current;
}

/* See store_definition.h. */
void
rollout_store_check_current(RolloutStore *store, int max_age_ms)
{
	if (!rollout_store_is_current(store, max_age_ms))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("store \"%s\" was deleted since this session opened it",
						store->name),
				 errdetail("If it was created again, it is another store now, whose snapshots, change feed positions and retentions are not the old one's."),
				 errhint("Run the command again: the next one opens the store as it is now.")));
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
	json_append_member_text(&buf, &first, "database_encoding",
							GetDatabaseEncodingName());
	json_append_member_raw(&buf, &first, "columns", "[");
	for (int i = 0; i < spec->ncolumns; i++)
	{
		bool		cfirst = true;
		PortableEncoding encoding = portable_type_encoding(spec->columns[i].typid,
														   NULL);

		if (i > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoChar(&buf, '{');
		json_append_member_text(&buf, &cfirst, "name", spec->columns[i].name);
		json_append_member_text(&buf, &cfirst, "type",
								store_type_name(spec->columns[i].typid));
		json_append_member_text(&buf, &cfirst, "encoding",
								portable_encoding_name(encoding));
		if (encoding == PORTABLE_IMAGE)
			json_append_member_text(&buf, &cfirst, "image",
									image_check_signature(spec->columns[i].typid));
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
				  const char *name, const RolloutColumnSpec *spec_column,
				  bool trusted)
{
	char	   *why = NULL;
	PortableEncoding local = portable_type_encoding(spec_column->typid, &why);

	/* rollout_fdw.check_trusted_images: trust no store */
	bool		unchecked = trusted && !store_check_trusted_images;
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

	/*
	 * Earlier builds kept images also of types whose images cannot be checked
	 * before PostgreSQL reads them.  Whoever can write to the store could
	 * craft such an image to make a backend read outside it, so they are read
	 * only where the store is trusted.
	 */
	if (local == PORTABLE_TEXT && stored == PORTABLE_IMAGE &&
		portable_type_encoding_unchecked(spec_column->typid) == PORTABLE_IMAGE)
	{
		/*
		 * Nothing ties a domain to what it was when the images were written:
		 * one made again, under the name, over bytea would let its table
		 * write any bytes as images of the real type.
		 */
		if (get_typtype(spec_column->typid) == TYPTYPE_DOMAIN)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("store \"%s\" keeps column \"%s\" as images that cannot be checked, and its type %s here is a domain",
							store->name, name, format_type_be(spec_column->typid)),
					 errdetail("An earlier build of rollout_fdw created the store and kept values of this type as their internal images, which are read only through the type itself."),
					 errhint("Declare the column with the domain's base type.")));
		if (!unchecked)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("store \"%s\" keeps column \"%s\" of type %s as images that cannot be checked",
							store->name, name, format_type_be(spec_column->typid)),
					 errdetail("An earlier build of rollout_fdw created the store, and kept values of this type as their internal images. Whoever can write to a store could craft such an image to make the server read memory outside it, so they are read only from trusted stores: local ones, and those of servers a superuser owns and marked trusted."),
					 errhint("Copy the rows, through a trusted server, into a new store, which keeps such values as text.")));
		local = PORTABLE_IMAGE;
	}
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

	/*
	 * The images of the column must be read as what they were written as. A
	 * type name means different types in different databases, and over time
	 * (a domain made again over another type): since the store records what
	 * its images are (the member "image", image_check_signature), a table
	 * whose column reads them as something else is refused.  A store created
	 * before that relies on the checks (a domain's values are checked even in
	 * a trusted store).
	 */
	if (local == PORTABLE_IMAGE)
	{
		char	   *recorded = json_doc_text(doc, col, "image", false);

		if (recorded != NULL &&
			strcmp(recorded, image_check_signature(spec_column->typid)) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of store \"%s\" holds values of another type than %s here",
							name, store->name, format_type_be(spec_column->typid)),
					 errdetail("The type has the name of the store's column type, but another base type."),
					 errhint("Declare the column with the type the store was created with.")));
	}

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

	/*
	 * A trusted store's values are read as PostgreSQL reads its own files,
	 * unchecked: checking a jsonb column's values takes about as long as
	 * decompressing and decoding them.  Not those of a column whose type is
	 * not built in (a domain): such a type can be dropped and made again,
	 * under the same name, over another type, by a role that merely wrote
	 * values of the first one into the store.
	 */
	if (unchecked && spec_column->typid < FirstNormalObjectId)
		column->image_check = NULL;
}

/*
 * Set store->schema_digest and read_digest (store.h) from the stored
 * columns: the database encoding (text is bytes in it), and for each
 * column its name, what reading its images safely depends on
 * (image_check_signature: the same in every database, and the same for a
 * domain over varchar and one over text), its layout and whether its images
 * are checked.
 */
static void
store_compute_digests(RolloutStore *store)
{
	StringInfoData schema;
	StringInfoData checks;

	initStringInfo(&schema);
	initStringInfo(&checks);
	appendStringInfo(&schema, "%s%c", GetDatabaseEncodingName(), '\0');
	for (int c = 0; c < store->schema.ncolumns; c++)
	{
		const SegmentColumn *column = &store->schema.columns[c];

		appendStringInfo(&schema, "%s%c%s%c%d/%d/%c%c", column->name, '\0',
						 image_check_signature(column->typid), '\0',
						 (int) column->typlen, (int) column->typbyval,
						 column->typalign, '\0');
		appendStringInfoChar(&checks, column->image_check != NULL ? 'c' : 'u');
	}
	store->schema_digest = hash_bytes_extended((const unsigned char *) schema.data,
											   schema.len, 0);
	store->read_digest = hash_bytes_extended((const unsigned char *) checks.data,
											 checks.len, store->schema_digest);
	pfree(schema.data);
	pfree(checks.data);
}

/*
 * Read what _store.json says of the store as a whole: its format version,
 * its incarnation and the encoding of the database that created it.
 * Returns whether its values may be read unchecked here (spec->trusted).
 */
static bool
store_read_identity(RolloutStore *store, const RolloutStoreSpec *spec,
					JsonDoc *doc)
{
	int64		format_version;
	char	   *database_encoding;

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
	store->incarnation = store_json_incarnation(doc);
	store->incarnation_checked_at = GetCurrentTimestamp();

	/*
	 * Text is bytes in the encoding of the database that wrote it.  A store
	 * created in another encoding (recorded since _store.json gained the
	 * member) may hold text invalid in this one, which PostgreSQL's string
	 * functions do not expect: its values are checked, trusted or not.
	 */
	database_encoding = json_doc_text(doc, doc->root, "database_encoding", false);
	store->database_encoding = database_encoding;
	return spec->trusted &&
		(database_encoding == NULL ||
		 strcmp(database_encoding, GetDatabaseEncodingName()) == 0);
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
	bool		trusted;
	char	   *stored_key;
	JsonbContainer *columns;
	int			ncolumns;
	SegmentSchema *schema = &store->schema;
	bool	   *matched;

	trusted = store_read_identity(store, spec, doc);
	store->checks_trusted_images = store_check_trusted_images;

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
		if (matched[t])
			json_doc_corrupt(doc, psprintf("Column \"%s\" is listed twice.", name));
		matched[t] = true;
		store_init_column(store, c, doc, col, name, &spec->columns[t],
						  trusted);
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
				 errdetail("Values of type %s are kept as text, whose order is not the type's: they name database objects by OID, or their internal form cannot be checked when read.",
						   format_type_be(store->codecs[schema->key_column].typid)),
				 errhint("Use a key of a built-in type, such as text, uuid or bigint.")));

	/*
	 * Only for a new store: a store created before this check keeps working,
	 * in one order per database (docs/FORMAT.md, "Order").
	 */
	if (store->pending_definition != NULL &&
		portable_type_order_is_local(store->codecs[schema->key_column].typid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("key column \"%s\" of store \"%s\" has type %s, whose order depends on the database's collation",
						stored_key, store->name,
						format_type_be(store->codecs[schema->key_column].typid)),
				 errdetail("jsonb orders strings by the database's default collation, so databases or clusters with different collations would sort the store's keys differently."),
				 errhint("Use a key of type text (the jsonb value cast to text, for example), uuid or bigint.")));
	if (!schema->columns[schema->key_column].has_order)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("key column \"%s\" of store \"%s\" has a type without a default btree operator class",
						stored_key, store->name)));

	/* a row as commits and memtable batches carry it: user columns, then _op */
	store->row_desc = CreateTemplateTupleDesc(ncolumns + 1);
	for (int c = 0; c < ncolumns; c++)
		TupleDescInitEntry(store->row_desc, (AttrNumber) (c + 1),
						   schema->columns[c].name, schema->columns[c].typid,
						   schema->columns[c].typmod, 0);
	TupleDescInitEntry(store->row_desc, (AttrNumber) (ncolumns + 1), "_op",
					   INT2OID, -1, 0);

	store->key_column = schema->key_column;
	store->ts_column = ncolumns;
	store->shard_column = ncolumns + 1;
	store->op_column = ncolumns + 2;
	segment_column_init(&schema->columns[store->ts_column], "_ts", INT8OID, -1);
	segment_column_init(&schema->columns[store->shard_column], "_shard", INT8OID, -1);
	segment_column_init(&schema->columns[store->op_column], "_op", INT2OID, -1);
	store_compute_digests(store);
}

int
rollout_store_column_index(RolloutStore *store, const char *name)
{
	for (int i = 0; i < store->user_column_count; i++)
		if (strcmp(store->schema.columns[i].name, name) == 0)
			return i;
	return -1;
}

/*
 * An advisory lock tag naming the store (and shard, if not NULL) by a 64-bit
 * hash of where it really is and its names, in database (InvalidOid: every
 * database).
 */
static void
store_lock_tag(RolloutStore *store, const char *shard, Oid database,
			   uint16 kind, LOCKTAG *tag)
{
	StringInfoData name;
	uint64		hash;

	initStringInfo(&name);
	appendStringInfoString(&name, store->objstore->identity);
	appendStringInfoChar(&name, '\0');
	appendStringInfoString(&name, store->name);
	if (shard != NULL)
	{
		appendStringInfoChar(&name, '\0');
		appendStringInfoString(&name, shard);
	}
	hash = hash_bytes_extended((const unsigned char *) name.data, name.len, 0);
	pfree(name.data);
	SET_LOCKTAG_ADVISORY(*tag, database, (uint32) (hash >> 32), (uint32) hash,
						 kind);
}

/* See store_definition.h. */
void
rollout_store_lock_tag(RolloutStore *store, uint16 kind, LOCKTAG *tag)
{
	store_lock_tag(store, NULL, MyDatabaseId, kind, tag);
}

/* See store_definition.h. */
void
rollout_store_shard_lock_tag(RolloutStore *store, const char *shard,
							 uint16 kind, LOCKTAG *tag)
{
	store_lock_tag(store, shard, InvalidOid, kind, tag);
}
