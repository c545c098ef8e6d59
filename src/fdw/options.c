/*-------------------------------------------------------------------------
 *
 * options.c
 *		Option validation for rollout_fdw and the effective options of a
 *		foreign table.
 *
 * Options are validated from one table of (name, catalog), as postgres_fdw
 * does.  The validator only sees the option list, not the table, so the
 * checks that need the table's columns (the key column exists and can be
 * ordered) run from an event trigger at the end of CREATE/ALTER FOREIGN
 * TABLE (rollout_fdw_check_table, installed by the extension script).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/reloptions.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "catalog/pg_authid.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "rollout/cluster_ranges.h"
#include "rollout/fdw.h"
#include "rollout/named_snapshot.h"
#include "rollout/store_token.h"

/* Which options exist, and where they may appear. */
typedef struct RolloutOption
{
	const char *name;
	Oid			catalog;
} RolloutOption;

static const RolloutOption rollout_options[] = {
	{"location", ForeignServerRelationId},
	/* object-store servers (s3://, az://) */
	{"endpoint", ForeignServerRelationId},
	{"region", ForeignServerRelationId},
	{"url_style", ForeignServerRelationId},
	{"connect_timeout", ForeignServerRelationId},
	{"request_timeout", ForeignServerRelationId},
	{"ca_file", ForeignServerRelationId},
	{"verify_tls", ForeignServerRelationId},
	{"trusted", ForeignServerRelationId},
	/* credentials: only in user mappings, never in server options */
	{"access_key_id", UserMappingRelationId},
	{"secret_access_key", UserMappingRelationId},
	{"session_token", UserMappingRelationId},
	{"account_key", UserMappingRelationId},
	{"sas_token", UserMappingRelationId},
	{"store", ForeignTableRelationId},
	{"key", ForeignTableRelationId},
	{"read_wal_tail", ForeignTableRelationId},
	{"batch_size", ForeignTableRelationId},
	{"cluster_by", ForeignTableRelationId},
	{"cluster_ranges", ForeignTableRelationId},
	{"as_of", ForeignTableRelationId},
	{NULL, InvalidOid}
};

#define ROLLOUT_DEFAULT_BATCH_SIZE	1000

static void rollout_check_server_privileges(List *options);

PG_FUNCTION_INFO_V1(rollout_fdw_validator);
PG_FUNCTION_INFO_V1(rollout_fdw_check_table);

static bool
rollout_option_is_valid(const char *name, Oid catalog)
{
	for (const RolloutOption *opt = rollout_options; opt->name; opt++)
		if (opt->catalog == catalog && strcmp(opt->name, name) == 0)
			return true;
	return false;
}

/*
 * A store name becomes one component of every object key, so it must not be
 * able to walk out of the location or into another store.
 */
char *
rollout_check_store_name(const char *name)
{
	size_t		len = strlen(name);

	if (len == 0)
		return "The store name is empty.";
	if (len > 128)
		return "The store name is longer than 128 characters.";
	if (strcmp(name, ".") == 0 || strstr(name, "..") != NULL)
		return "The store name contains \"..\" or is \".\".";
	if (name[0] == '_')
		return "Store names starting with \"_\" are reserved.";
	for (const char *p = name; *p; p++)
	{
		if (*p == '/')
			return "The store name contains \"/\".";
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
			return "Store names may contain only letters, digits, \"_\", \"-\" and \".\".";
	}
	return NULL;
}

/*
 * Validate the options of a rollout_fdw object (server, table, user
 * mapping, the wrapper itself).
 */
Datum
rollout_fdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst(lc);

		if (!rollout_option_is_valid(def->defname, catalog))
		{
			StringInfoData valid;

			initStringInfo(&valid);
			for (const RolloutOption *opt = rollout_options; opt->name; opt++)
				if (opt->catalog == catalog)
					appendStringInfo(&valid, "%s%s", valid.len > 0 ? ", " : "", opt->name);
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\"", def->defname),
					 valid.len > 0
					 ? errhint("Valid options in this context are: %s.", valid.data)
					 : errhint("There are no valid options in this context.")));
		}

		if (strcmp(def->defname, "location") == 0)
		{
			char	   *problem = objstore_check_location(defGetString(def));

			if (problem != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"location\": \"%s\"",
								defGetString(def)),
						 errdetail("%s", problem)));
		}
		else if (strcmp(def->defname, "store") == 0)
		{
			char	   *problem = rollout_check_store_name(defGetString(def));

			if (problem != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"store\": \"%s\"",
								defGetString(def)),
						 errdetail("%s", problem)));
		}
		else if (strcmp(def->defname, "key") == 0 ||
				 strcmp(def->defname, "cluster_by") == 0)
		{
			if (defGetString(def)[0] == '\0')
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"%s\": the column name is empty",
								def->defname)));
		}
		else if (strcmp(def->defname, "read_wal_tail") == 0 ||
				 strcmp(def->defname, "verify_tls") == 0 ||
				 strcmp(def->defname, "trusted") == 0)
			(void) defGetBoolean(def);
		else if (strcmp(def->defname, "as_of") == 0)
		{
			const char *problem;

			if (named_snapshot_parse(defGetString(def), &problem) == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"as_of\": \"%s\"",
								store_token_for_message(defGetString(def))),
						 errdetail("%s", problem)));
		}
		else if (strcmp(def->defname, "url_style") == 0)
		{
			char	   *value = defGetString(def);

			if (strcmp(value, "path") != 0 && strcmp(value, "virtual") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"url_style\": \"%s\"", value),
						 errdetail("It must be \"path\" or \"virtual\".")));
		}
		else if (strcmp(def->defname, "connect_timeout") == 0 ||
				 strcmp(def->defname, "request_timeout") == 0)
		{
			char	   *value = defGetString(def);
			int			seconds;

			if (!parse_int(value, &seconds, 0, NULL) || seconds < 1)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"%s\": \"%s\"", def->defname, value),
						 errdetail("It must be a positive number of seconds.")));
		}
		else if (strcmp(def->defname, "endpoint") == 0)
		{
			objstore_check_endpoint(defGetString(def));
		}
		else if (catalog == UserMappingRelationId)
			objstore_check_credential(def->defname, defGetString(def));
		else if (strcmp(def->defname, "batch_size") == 0)
		{
			char	   *value = defGetString(def);
			int			batch_size;

			if (!parse_int(value, &batch_size, 0, NULL) || batch_size < 1)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"batch_size\": \"%s\"", value),
						 errdetail("It must be a positive integer.")));
		}
		else if (strcmp(def->defname, "cluster_ranges") == 0)
		{
			char	   *value = defGetString(def);
			int			ranges;

			if (!parse_int(value, &ranges, 0, NULL) ||
				ranges < 2 || ranges > CLUSTER_MAX_RANGES)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"cluster_ranges\": \"%s\"", value),
						 errdetail("It must be an integer from 2 to %d.",
								   CLUSTER_MAX_RANGES)));
		}
	}
	if (catalog == ForeignServerRelationId)
		rollout_check_server_privileges(options);
	PG_RETURN_VOID();
}

/*
 * Who may define a server.  The validator sees the whole option list of
 * CREATE SERVER and of ALTER SERVER ... OPTIONS (the result of the change),
 * so a server can neither be created with nor altered to what its role may
 * not use.  As for file_fdw:
 *	- stores on this machine (a file:// location, or none: the embedded
 *	  default under the data directory) are read, written and deleted as
 *	  the server's operating-system user, so only superusers and members of
 *	  pg_write_server_files may name them;
 *	- ca_file names a file the server reads, so only superusers and members
 *	  of pg_read_server_files may set it.
 * Remote locations need no such role: their credentials are the user's own
 * (user mappings), never the server's (rollout_store_spec_for).
 */
static void
rollout_check_server_privileges(List *options)
{
	const char *location = NULL;
	bool		has_ca_file = false;
	bool		trusted = false;
	ListCell   *lc;

	if (superuser())
		return;
	foreach(lc, options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "location") == 0)
			location = defGetString(def);
		else if (strcmp(def->defname, "ca_file") == 0)
			has_ca_file = true;
		else if (strcmp(def->defname, "trusted") == 0)
			trusted = defGetBoolean(def);
	}
	if (trusted)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to mark a rollout_fdw server trusted"),
				 errdetail("The values read from a trusted server's stores are not checked before PostgreSQL's functions read them: whoever can write where the stores live could make the database server read memory outside a value."),
				 errhint("Only superusers can set option \"trusted\".")));
	if (objstore_location_is_local(location) &&
		!has_privs_of_role(GetUserId(), ROLE_PG_WRITE_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to use a local location for a rollout_fdw server"),
				 errdetail("%s keeps its stores in files the database server writes and deletes as its operating-system user.",
						   objstore_location_is_default(location)
						   ? "A server without a \"location\" option"
						   : "A file:// location"),
				 errhint("Only superusers and roles with the privileges of pg_write_server_files can create or alter such a server; others can use an s3:// or az:// location.")));
	if (has_ca_file &&
		!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to set option \"ca_file\" of a rollout_fdw server"),
				 errdetail("The option names a file the database server reads."),
				 errhint("Only superusers and roles with the privileges of pg_read_server_files can set it.")));
}

/*
 * See fdw.h.  A local store's objects are server files, which only roles as
 * powerful as a superuser can write.  A remote store is trusted only when a
 * superuser said so (the server option "trusted", which only superusers may
 * set), still owns the server, and chose the credentials userid uses: anyone else who can write where its
 * stores live (a bucket shared with others, an endpoint of one's own) could
 * craft their values.  Ownership of the table does not matter: a role that
 * writes through the table writes values PostgreSQL made, in the types of
 * the store's columns (store_definition.c, and the schema digest, store.h).
 */
bool
rollout_server_is_trusted(ForeignServer *server, const char *location,
						  Oid userid)
{
	ListCell   *lc;
	bool		trusted = false;

	if (location == NULL || objstore_location_is_local(location))
		return true;
	if (!superuser_arg(server->owner))
		return false;
	foreach(lc, server->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "trusted") == 0)
			trusted = defGetBoolean(def);
	}

	/*
	 * The superuser vouched for the location with the credentials it chose:
	 * PUBLIC's mapping or the server's environment.  A role with a mapping of
	 * its own (which any role with USAGE may create) may reach another bucket
	 * under the same name (an account or tenant of its own).
	 */
	if (trusted && !superuser_arg(userid) &&
		SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(userid),
							  ObjectIdGetDatum(server->serverid)))
		trusted = false;
	return trusted;
}

/* The effective options of a rollout table, defaults applied. */
RolloutTableOptions *
rollout_table_options(Oid relid)
{
	RolloutTableOptions *options = palloc0(sizeof(RolloutTableOptions));
	ForeignTable *table = GetForeignTable(relid);
	ForeignServer *server = GetForeignServer(table->serverid);
	ListCell   *lc;

	options->key_column = "id";
	options->batch_size = ROLLOUT_DEFAULT_BATCH_SIZE;
	options->cluster_ranges = CLUSTER_DEFAULT_RANGES;
	foreach(lc, server->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "location") == 0)
			options->location = defGetString(def);
	}
	foreach(lc, table->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "store") == 0)
			options->store_name = defGetString(def);
		else if (strcmp(def->defname, "key") == 0)
			options->key_column = defGetString(def);
		else if (strcmp(def->defname, "read_wal_tail") == 0)
			options->read_wal_tail = defGetBoolean(def);
		else if (strcmp(def->defname, "batch_size") == 0)
			(void) parse_int(defGetString(def), &options->batch_size, 0, NULL);
		else if (strcmp(def->defname, "cluster_by") == 0)
			options->cluster_by = defGetString(def);
		else if (strcmp(def->defname, "cluster_ranges") == 0)
			(void) parse_int(defGetString(def), &options->cluster_ranges, 0, NULL);
		else if (strcmp(def->defname, "as_of") == 0)
			options->as_of = defGetString(def);
	}
	if (options->store_name == NULL)
	{
		/*
		 * The table's name, when nothing pinned the store (a table created
		 * while the extension's event trigger could not run).  A name that
		 * could walk into another store's folder is never used.
		 */
		char	   *problem;

		options->store_name = get_rel_name(relid);
		problem = rollout_check_store_name(options->store_name);
		if (problem != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("the name of foreign table \"%s\" is not a valid store name",
							options->store_name),
					 errdetail("%s", problem),
					 errhint("Name the store with the table option \"store\".")));
	}
	return options;
}

/*
 * Is the foreign table relid served by rollout_fdw?  The wrapper is
 * recognised by its handler's callbacks, not by its name, which users may
 * choose freely; a wrapper without a handler is not ours.
 */
static bool
rollout_is_rollout_foreign_table(Oid relid)
{
	ForeignDataWrapper *fdw;
	FdwRoutine *routine;
	FdwRoutine	ours = {0};

	fdw = GetForeignDataWrapper(GetForeignServer(GetForeignTable(relid)->serverid)->fdwid);
	if (!OidIsValid(fdw->fdwhandler))
		return false;
	routine = GetFdwRoutine(fdw->fdwhandler);
	rollout_scan_routines(&ours);
	return routine->BeginForeignScan == ours.BeginForeignScan;
}

/* ERROR unless relid is a foreign table served by rollout_fdw. */
void
rollout_check_is_rollout_table(Oid relid)
{
	char	   *name = get_rel_name(relid);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a rollout foreign table", name),
				 errdetail("It is not a foreign table.")));
	if (!rollout_is_rollout_foreign_table(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a rollout foreign table", name),
				 errdetail("Its foreign-data wrapper is not rollout_fdw.")));
}

/* The live column of tupdesc called name, or NULL. */
static Form_pg_attribute
rollout_column_named(TupleDesc tupdesc, const char *name)
{
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		if (!attr->attisdropped && strcmp(NameStr(attr->attname), name) == 0)
			return attr;
	}
	return NULL;
}

/*
 * The column of the option cluster_by (compact.c spreads a compaction's
 * outputs over ranges of it) must exist, must not be the key, and must be of
 * a type whose values are held by value and have the same order in every
 * database (a timestamp, a date, a number): the ranges are chosen from a
 * sample of plain values, and zone maps keep their minimum and maximum.
 */
static void
rollout_check_cluster_column(Relation rel, const RolloutTableOptions *options)
{
	Form_pg_attribute column = rollout_column_named(RelationGetDescr(rel),
													options->cluster_by);

	if (column == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("cluster_by column \"%s\" does not exist in foreign table \"%s\"",
						options->cluster_by, RelationGetRelationName(rel))));
	if (strcmp(options->cluster_by, options->key_column) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("cluster_by column \"%s\" of foreign table \"%s\" is its key",
						options->cluster_by, RelationGetRelationName(rel)),
				 errdetail("A compacted store is sorted by its key already.")));
	if (!column->attbyval ||
		portable_type_encoding(column->atttypid, NULL) != PORTABLE_IMAGE ||
		!OidIsValid(lookup_type_cache(column->atttypid, TYPECACHE_CMP_PROC)->cmp_proc))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cluster_by column \"%s\" of foreign table \"%s\" has type %s, which compaction cannot cluster by",
						options->cluster_by, RelationGetRelationName(rel),
						format_type_be(column->atttypid)),
				 errhint("Cluster by a column of a type such as timestamptz, date or bigint.")));
}

/* The owner of relation relid (which exists). */
static Oid
relation_owner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * Checks of a rollout table that need its columns, run by the extension's
 * event trigger after CREATE FOREIGN TABLE and every ALTER of a foreign
 * table (ALTER FOREIGN TABLE and ALTER TABLE, RENAME included): the key
 * column exists and its type has a default btree operator class (the store
 * sorts by it), and every column's type can be stored.  Tables of other
 * wrappers are ignored.
 *
 * The store a table reads and writes is pinned in its "store" option.  At
 * creation (creating = true) a table without the option gets its own name,
 * which must be a valid store name, and the function returns it for the
 * trigger to pin; RENAME then cannot switch stores.  After an ALTER the
 * option must still be there: dropping it would make the table's name
 * choose the store again.  Returns NULL when nothing is to be pinned.
 */
Datum
rollout_fdw_check_table(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);

	/* the SQL function of extension version 0.1 passes no second argument */
	bool		creating = PG_NARGS() < 2 || PG_GETARG_BOOL(1);
	RolloutTableOptions *options;
	Relation	rel;
	TupleDesc	tupdesc;
	Form_pg_attribute key;
	bool		pinned = false;
	ListCell   *lc;

	if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE ||
		!rollout_is_rollout_foreign_table(relid))
		PG_RETURN_NULL();

	/*
	 * The event trigger calls this for a table its caller just created or
	 * altered, so owns (or, after ALTER ... OWNER TO, is a member of the
	 * owner, perhaps without inheriting its rights).  Anyone else could only
	 * use it to take a lock on a table (held to the end of the transaction,
	 * holding off its ALTER, DROP and TRUNCATE) and to learn about its
	 * columns.
	 */
	if (!pg_class_ownercheck(relid, GetUserId()) &&
		!is_member_of_role(GetUserId(), relation_owner(relid)))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_FOREIGN_TABLE, get_rel_name(relid));

	foreach(lc, GetForeignTable(relid)->options)
	{
		if (strcmp(((DefElem *) lfirst(lc))->defname, "store") == 0)
			pinned = true;
	}
	if (!pinned && !creating)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("cannot drop option \"store\" of rollout table \"%s\"",
						get_rel_name(relid)),
				 errdetail("The option pins the store the table reads and writes; without it the table's name would choose the store."),
				 errhint("To use another store, set the option to its name.")));

	options = rollout_table_options(relid);
	rel = table_open(relid, AccessShareLock);
	tupdesc = RelationGetDescr(rel);
	key = rollout_column_named(tupdesc, options->key_column);
	if (key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("key column \"%s\" does not exist in foreign table \"%s\"",
						options->key_column, RelationGetRelationName(rel)),
				 errhint("Name an existing column with the table option \"key\" (default \"id\").")));
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);
		char	   *why = NULL;

		if (!attr->attisdropped &&
			portable_type_encoding(attr->atttypid, &why) == PORTABLE_REFUSED)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("column \"%s\" of foreign table \"%s\" has type %s, which a rollout store cannot keep",
							NameStr(attr->attname), RelationGetRelationName(rel),
							format_type_be(attr->atttypid)),
					 errdetail("%s", why),
					 errhint("Store the object's name (text) instead.")));
	}
	{
		Form_pg_attribute attr = key;
		TypeCacheEntry *typentry = lookup_type_cache(attr->atttypid,
													 TYPECACHE_CMP_PROC);

		/*
		 * A type kept as images only by earlier builds (one whose images
		 * cannot be checked, citext say) passes here: a store those builds
		 * created with such a key still opens where it is trusted, and a new
		 * store refuses it at first use (core/store_definition.c).
		 */
		if (portable_type_encoding_unchecked(attr->atttypid) != PORTABLE_IMAGE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("key column \"%s\" of foreign table \"%s\" has type %s, which cannot be a store's key",
							options->key_column, RelationGetRelationName(rel),
							format_type_be(attr->atttypid)),
					 errdetail("Its values are stored as text so that they mean the same in every database, and their order could differ between databases."),
					 errhint("Use a key of a built-in type, such as text, uuid or bigint.")));

		if (!OidIsValid(typentry->cmp_proc))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("key column \"%s\" of foreign table \"%s\" has type %s, which has no default btree operator class",
							options->key_column, RelationGetRelationName(rel),
							format_type_be(attr->atttypid)),
					 errhint("Use a key of a type that can be sorted, such as text, uuid or bigint.")));
	}
	if (options->cluster_by != NULL)
		rollout_check_cluster_column(rel, options);
	table_close(rel, AccessShareLock);

	if (pinned)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(options->store_name));
}

/* See fdw.h. */
const char *
rollout_table_as_of(const RolloutTableOptions *options, RolloutStore *store)
{
	NamedSnapshot *named;

	if (options->as_of != NULL)
		return options->as_of;	/* read checks that it is store's */
	if (named_snapshot_as_of == NULL || named_snapshot_as_of[0] == '\0')
		return NULL;
	named = named_snapshot_parse(named_snapshot_as_of, NULL);
	if (named == NULL || !named_snapshot_of_store(store, named))
		return NULL;
	return named_snapshot_as_of;
}

/* May role read the columns attnos of relid (any of them, when NULL)? */
static bool
role_may_select(Oid relid, Oid role, const Bitmapset *attnos)
{
	int			attno = -1;

	if (pg_class_aclcheck(relid, role, ACL_SELECT) == ACLCHECK_OK)
		return true;
	if (bms_is_empty(attnos))
		return pg_attribute_aclcheck_all(relid, role, ACL_SELECT, ACLMASK_ANY) == ACLCHECK_OK;
	while ((attno = bms_next_member(attnos, attno)) >= 0)
		if (pg_attribute_aclcheck(relid, attno, role, ACL_SELECT) != ACLCHECK_OK)
			return false;
	return true;
}

/* The tables relid inherits from directly (pg_inherits): a partition's parent. */
static List *
relation_parents(Oid relid)
{
	Relation	inherits = table_open(InheritsRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *parents = NIL;

	ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(inherits, InheritsRelidSeqnoIndexId, true,
							  NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		parents = lappend_oid(parents, ((Form_pg_inherits) GETSTRUCT(tuple))->inhparent);
	systable_endscan(scan);
	table_close(inherits, AccessShareLock);
	return parents;
}

/*
 * role_may_select, or, with through_ancestors, may role read the same
 * columns (by name, as PostgreSQL maps an inherited column) of a table relid
 * inherits from, at any level?  A table read through a parent is checked by
 * PostgreSQL as that parent, whichever level the query named.  A parent
 * whose row-level security applies to role does not count: read through a
 * view or function of another role, the child's rows would be filtered by
 * that role's policies, not role's.  The ancestors are visited once each,
 * breadth first (a hierarchy of multiple inheritance has many paths).
 */
static bool
role_may_select_through(Oid relid, Oid role, const Bitmapset *attnos,
						bool through_ancestors)
{
	List	   *queue;
	List	   *seen;

	if (role_may_select(relid, role, attnos))
		return true;
	if (!through_ancestors)
		return false;
	queue = relation_parents(relid);
	seen = list_make1_oid(relid);
	while (queue != NIL)
	{
		Oid			ancestor = linitial_oid(queue);
		Bitmapset  *mapped = NULL;
		bool		all_there = true;
		int			attno = -1;

		CHECK_FOR_INTERRUPTS();
		queue = list_delete_first(queue);
		if (list_member_oid(seen, ancestor))
			continue;
		seen = lappend_oid(seen, ancestor);
		queue = list_concat(queue, relation_parents(ancestor));
		if (check_enable_rls(ancestor, role, false) == RLS_ENABLED)
			continue;
		while (all_there && (attno = bms_next_member(attnos, attno)) >= 0)
		{
			AttrNumber	in_ancestor = get_attnum(ancestor,
												 get_attname(relid, attno, false));

			all_there = in_ancestor != InvalidAttrNumber;
			mapped = bms_add_member(mapped, in_ancestor);
		}
		if (all_there && role_may_select(ancestor, role, mapped))
			return true;
	}
	return false;
}

/*
 * See fdw.h.  The setting is the session's, so only a role that may read
 * the table itself may read it as of a snapshot: one granted a view over it,
 * or a function reading it, is granted the rows as they are, not rows since
 * updated, deleted or erased.  PostgreSQL checks a view's tables as its
 * owner; this checks the role running the query (GetUserId()), and inside a
 * SECURITY DEFINER function also the role that called it (the outer one),
 * which chose the setting.
 */
void
rollout_check_as_of_privilege(Oid relid, const Bitmapset *attnos,
							  bool through_ancestors)
{
	Oid			role = GetUserId();

	if (!role_may_select_through(relid, role, attnos, through_ancestors) ||
		(InLocalUserIdChange() && GetOuterUserId() != role &&
		 !role_may_select_through(relid, role = GetOuterUserId(), attnos,
								  through_ancestors)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to read foreign table \"%s\" as of a named snapshot",
						get_rel_name(relid)),
				 errdetail("rollout_fdw.as_of names a snapshot of its store, and role \"%s\" may not select those columns from the table itself.",
						   GetUserNameFromId(role, false)),
				 errhint("Reset rollout_fdw.as_of to read the rows as they are now.")));
}
