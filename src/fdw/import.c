/*-------------------------------------------------------------------------
 *
 * import.c
 *		IMPORT FOREIGN SCHEMA: one foreign table per store at a server's
 *		location, defined by the store's _store.json.
 *
 * A store is a top-level folder of the location holding _store.json, which
 * fixes the columns (names, types as qualified names, typmods) and the key
 * (core/store_definition.c).  A second cluster that attaches to a shared
 * store therefore needs nothing but this statement.  The remote schema
 * named in the statement means nothing here: a location has no schemas.
 *
 * Where the backend lists from start_after (S3, file://), the stores are
 * found without listing every object: each listing starts where the
 * previous store's keys end (its name followed by the character after '/',
 * which sorts after every "name/..." key), so a location of N stores costs
 * about N + 1 listings of one page and N reads of _store.json, however many
 * objects the stores hold.  Azure has no such start: there the listing goes
 * through every key once, page by page.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "parser/parse_type.h"
#include "utils/builtins.h"

#include "rollout/fdw.h"
#include "rollout/json_doc.h"
#include "rollout/objstore.h"

/* keys per listing page */
#define IMPORT_LISTING_PAGE		100

static List *import_stores(ImportForeignSchemaStmt *stmt, ForeignServer *server,
						   ObjectStore *objstore);

/* Would the statement's LIMIT TO / EXCEPT import a table of this name? */
static bool
import_wanted(ImportForeignSchemaStmt *stmt, const char *name)
{
	ListCell   *lc;
	bool		listed = false;

	if (stmt->list_type == FDW_IMPORT_SCHEMA_ALL)
		return true;
	foreach(lc, stmt->table_list)
		listed |= strcmp(((RangeVar *) lfirst(lc))->relname, name) == 0;
	return stmt->list_type == FDW_IMPORT_SCHEMA_LIMIT_TO ? listed : !listed;
}

/*
 * The CREATE FOREIGN TABLE statement for store name from its _store.json, or
 * NULL when the folder holds none (not a store, or one whose first write has
 * not happened).  A column type that does not exist in this database is an
 * ERROR naming it: the table could not read the store.
 */
static char *
import_store_table(ObjectStore *objstore, ForeignServer *server,
				   const char *name)
{
	char	   *key = psprintf("%s/_store.json", name);
	StringInfoData json;
	StringInfoData sql;
	JsonDoc    *doc;
	JsonbContainer *columns;
	int			ncolumns;

	initStringInfo(&json);
	if (!objstore_get(objstore, key, &json))
		return NULL;
	doc = json_doc_parse(json.data, json.len, key);
	columns = json_doc_container(doc, doc->root, "columns", true, true);
	ncolumns = json_doc_array_length(columns);

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE FOREIGN TABLE %s (", quote_identifier(name));
	for (int c = 0; c < ncolumns; c++)
	{
		JsonbContainer *col = json_doc_array_object(doc, columns, c);
		char	   *column = json_doc_text(doc, col, "name", true);
		char	   *type = json_doc_text(doc, col, "type", true);
		int32		typmod = (int32) json_doc_int64(doc, col, "typmod", false, -1);
		Oid			typid;
		int32		parsed_typmod;

		parseTypeString(type, &typid, &parsed_typmod, true);
		if (!OidIsValid(typid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("cannot import store \"%s\": type %s of its column \"%s\" does not exist in this database",
							name, type, column),
					 errhint("Create the type first, or leave the store out with EXCEPT.")));
		appendStringInfo(&sql, "%s%s %s", c > 0 ? ", " : "",
						 quote_identifier(column),
						 format_type_with_typemod(typid, typmod));
	}
	appendStringInfo(&sql, ") SERVER %s OPTIONS (store %s, key %s)",
					 quote_identifier(server->servername),
					 quote_literal_cstr(name),
					 quote_literal_cstr(json_doc_text(doc, doc->root, "key", true)));
	return sql.data;
}

/*
 * ImportForeignSchema: the statements for every store at the server's
 * location that the statement's LIMIT TO / EXCEPT lets through, found as the
 * file header explains, with the credentials of the current user's mapping.
 */
static List *
rollout_import_foreign_schema(ImportForeignSchemaStmt *stmt, Oid serverOid)
{
	ForeignServer *server = GetForeignServer(serverOid);
	const char *location = NULL;
	ObjectStore *objstore;
	List	   *volatile commands = NIL;
	ListCell   *lc;

	foreach(lc, server->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "location") == 0)
			location = defGetString(def);
	}
	/* the server's environment credentials: only as for a table (options.c) */
	objstore = objstore_open(location,
							 rollout_location_options(serverOid, GetUserId()),
							 superuser_arg(server->owner) && superuser());
	PG_TRY();
	{
		commands = import_stores(stmt, server, objstore);
	}
	PG_FINALLY();
	{
		objstore_close(objstore);
	}
	PG_END_TRY();
	return commands;
}

/* The statements for the stores of objstore (see the file header). */
static List *
import_stores(ImportForeignSchemaStmt *stmt, ForeignServer *server,
			  ObjectStore *objstore)
{
	List	   *commands = NIL;
	char	   *after = NULL;
	char	   *continuation = NULL;
	char	   *last_name = NULL;

	for (;;)
	{
		ObjectStoreListing *page;

		CHECK_FOR_INTERRUPTS();
		page = objstore_list_page(objstore, "", after, IMPORT_LISTING_PAGE,
								  continuation);
		for (int i = 0; i < page->count; i++)
		{
			const char *key = page->entries[i].key;
			const char *slash = strchr(key, '/');
			char	   *name;
			char	   *command;

			if (slash == NULL)
				continue;		/* an object at the top: no store */
			name = pnstrdup(key, slash - key);
			if (last_name != NULL && strcmp(name, last_name) == 0)
				continue;		/* more of the store just seen */
			last_name = name;
			if (rollout_check_store_name(name) != NULL || !import_wanted(stmt, name))
				continue;
			command = import_store_table(objstore, server, name);
			if (command != NULL)
				commands = lappend(commands, command);
		}
		if (page->continuation == NULL)
			break;
		if (objstore->ops->list_starts_after && last_name != NULL)
		{
			/* skip the rest of the last store: '0' follows '/' */
			after = psprintf("%s0", last_name);
			continuation = NULL;
		}
		else
			continuation = page->continuation;
	}
	return commands;
}

void
rollout_import_routines(FdwRoutine *routine)
{
	routine->ImportForeignSchema = rollout_import_foreign_schema;
}
