/*-------------------------------------------------------------------------
 *
 * import.c
 *		IMPORT FOREIGN SCHEMA: one foreign table per store at a server's
 *		location, defined by the store's _store.json.
 *
 * The stores are those at the server's location (core/store_catalog.c,
 * which finds them without listing every object where the backend can), each
 * defined by its _store.json: the columns, their types and the key.  A
 * second cluster that attaches to a shared store therefore needs nothing but
 * this statement.  The remote schema named in the statement means nothing
 * here: a location has no schemas.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "parser/parse_type.h"
#include "utils/builtins.h"

#include "rollout/fdw.h"
#include "rollout/store_catalog.h"

/* What import_visit_store collects the statements with. */
typedef struct ImportState
{
	ImportForeignSchemaStmt *stmt;
	ForeignServer *server;
	ObjectStore *objstore;
	List	   *commands;
} ImportState;

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
	StoredDefinition *definition = store_catalog_read(objstore, name);
	StringInfoData sql;

	if (definition == NULL)
		return NULL;
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE FOREIGN TABLE %s (", quote_identifier(name));
	for (int c = 0; c < definition->ncolumns; c++)
	{
		StoredColumn *column = &definition->columns[c];
		Oid			typid;
		int32		parsed_typmod;

		parseTypeString(column->type_name, &typid, &parsed_typmod, true);
		if (!OidIsValid(typid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("cannot import store \"%s\": type %s of its column \"%s\" does not exist in this database",
							name, column->type_name, column->name),
					 errhint("Create the type first, or leave the store out with EXCEPT.")));
		appendStringInfo(&sql, "%s%s %s", c > 0 ? ", " : "",
						 quote_identifier(column->name),
						 format_type_with_typemod(typid, column->typmod));
	}
	appendStringInfo(&sql, ") SERVER %s OPTIONS (store %s, key %s)",
					 quote_identifier(server->servername),
					 quote_literal_cstr(name),
					 quote_literal_cstr(definition->key_column));
	return sql.data;
}

/* store_catalog_list's visit: the statement for one store, if wanted */
static void
import_visit_store(const char *name, void *arg)
{
	ImportState *state = arg;
	char	   *command;

	if (rollout_check_store_name(name) != NULL || !import_wanted(state->stmt, name))
		return;
	command = import_store_table(state->objstore, state->server, name);
	if (command != NULL)
		state->commands = lappend(state->commands, command);
}

/*
 * ImportForeignSchema: the statements for every store at the server's
 * location that the statement's LIMIT TO / EXCEPT lets through, with the
 * credentials of the current user's mapping.
 */
static List *
rollout_import_foreign_schema(ImportForeignSchemaStmt *stmt, Oid serverOid)
{
	ForeignServer *server = GetForeignServer(serverOid);
	ObjectStore *objstore = rollout_open_server_location(serverOid);
	ImportState state = {0};

	PG_TRY();
	{
		state.stmt = stmt;
		state.server = server;
		state.objstore = objstore;
		store_catalog_list(objstore, import_visit_store, &state);
	}
	PG_FINALLY();
	{
		objstore_close(objstore);
	}
	PG_END_TRY();
	return state.commands;
}

void
rollout_import_routines(FdwRoutine *routine)
{
	routine->ImportForeignSchema = rollout_import_foreign_schema;
}
