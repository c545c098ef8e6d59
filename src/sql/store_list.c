/*-------------------------------------------------------------------------
 *
 * store_list.c
 *		rollout_stores(server): the stores at a server's location, with
 *		their definitions and cheap counts.
 *
 * What IMPORT FOREIGN SCHEMA would import, shown before importing: every
 * store (a folder holding _store.json, core/store_catalog.c) with its key,
 * its column count and the counts rollout_observe gives without an exact
 * read, for this cluster's shard's unflushed rows (the table option
 * read_wal_tail's default).  The caller needs USAGE on the server, as for
 * IMPORT FOREIGN SCHEMA, and reads with its user mapping.  A store that
 * cannot be opened here (a column type this database lacks, a malformed
 * _store.json) is listed with NULL counts and the reason in "problem".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "rollout/fdw.h"
#include "rollout/observe.h"
#include "rollout/sql_common.h"
#include "rollout/store_catalog.h"
#include "rollout/store_definition.h"
#include "rollout/subtransaction.h"

PG_FUNCTION_INFO_V1(rollout_stores);

#define STORE_LIST_COLUMNS	10

typedef struct StoreListState
{
	ReturnSetInfo *rsinfo;
	Oid			serverid;
	ObjectStore *objstore;
	MemoryContext store_context;	/* one store's reads, reset after it */
} StoreListState;

/*
 * Fill in the row of store name from its definition and cheap counts;
 * false when the folder is no store.  The counts stay NULL for a store
 * whose column types this database lacks.
 */
static bool
store_list_describe(StoreListState *state, const char *name, Datum *values,
					bool *nulls)
{
	StoredDefinition *definition = store_catalog_read(state->objstore, name);
	RolloutStoreSpec *spec;
	RolloutStore *store;
	ObserveResult result;

	if (definition == NULL)
		return false;
	values[1] = CStringGetTextDatum(definition->key_column);
	values[2] = Int32GetDatum(definition->ncolumns);
	nulls[1] = nulls[2] = false;
	spec = rollout_server_store_spec(state->serverid, definition);
	if (spec == NULL)
	{
		values[9] = CStringGetTextDatum("a column type of the store does not exist in this database");
		nulls[9] = false;
		return true;
	}
	store = rollout_store_open(spec, CurrentMemoryContext);
	PG_TRY();
	{
		result = rollout_observe_store(store, false, false);
	}
	PG_FINALLY();
	{
		rollout_store_close(store);
	}
	PG_END_TRY();
	values[3] = Int64GetDatum(result.row_count);
	values[4] = Int64GetDatum(result.base_rows);
	values[5] = Int32GetDatum(result.fragments);
	values[6] = Int32GetDatum(result.generations);
	values[7] = Int64GetDatum(result.unflushed_rows);
	values[8] = Int64GetDatum(result.bytes);
	for (int i = 3; i <= 8; i++)
		nulls[i] = false;
	nulls[7] = !result.unflushed_known;
	return true;
}

/* One store's row, being made (store_list_visit). */
typedef struct StoreRow
{
	StoreListState *state;
	const char *name;
	Datum		values[STORE_LIST_COLUMNS];
	bool		nulls[STORE_LIST_COLUMNS];
} StoreRow;

/* store_list_visit's step: describe the store, and add its row if it is one */
static void
store_row_step(void *arg)
{
	StoreRow   *row = arg;
	MemoryContext oldcontext = MemoryContextSwitchTo(row->state->store_context);
	bool		is_store = store_list_describe(row->state, row->name,
											   row->values, row->nulls);

	MemoryContextSwitchTo(oldcontext);
	if (is_store)
		tuplestore_putvalues(row->state->rsinfo->setResult,
							 row->state->rsinfo->setDesc, row->values, row->nulls);
}

/*
 * store_catalog_list's visit: one row per store.  Each store is read in a
 * subtransaction, so that one that cannot be read (a malformed _store.json,
 * a column type that means something else here) is listed with the reason
 * in "problem" instead of failing the listing; a cancel still ends it.
 */
static void
store_list_visit(const char *name, void *arg)
{
	StoreListState *state = arg;
	StoreRow	row = {0};
	ErrorData  *error;

	if (rollout_check_store_name(name) != NULL)
		return;
	row.state = state;
	row.name = name;
	for (int i = 0; i < STORE_LIST_COLUMNS; i++)
		row.nulls[i] = true;
	row.values[0] = CStringGetTextDatum(name);
	row.nulls[0] = false;
	error = rollout_try_in_subtransaction(store_row_step, &row);
	MemoryContextReset(state->store_context);
	if (error == NULL)
		return;
	if (error->sqlerrcode == ERRCODE_QUERY_CANCELED)
		ReThrowError(error);
	for (int i = 1; i < STORE_LIST_COLUMNS; i++)
		row.nulls[i] = true;
	row.values[9] = CStringGetTextDatum(error->message);
	row.nulls[9] = false;
	tuplestore_putvalues(state->rsinfo->setResult, state->rsinfo->setDesc,
						 row.values, row.nulls);
	FreeErrorData(error);
}

/*
 * rollout_stores(server name) returns setof (store text, key text,
 *		columns int, row_count bigint, base_rows bigint, fragments int,
 *		generations int, unflushed_rows bigint, bytes bigint, problem text)
 */
Datum
rollout_stores(PG_FUNCTION_ARGS)
{
	ForeignServer *server = GetForeignServerByName(NameStr(*PG_GETARG_NAME(0)), false);
	ForeignDataWrapper *wrapper = GetForeignDataWrapper(server->fdwid);
	StoreListState state = {0};
	AclResult	aclresult;

	if (strcmp(wrapper->fdwname, "rollout_fdw") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a rollout_fdw server", server->servername),
				 errdetail("Its foreign-data wrapper is \"%s\".", wrapper->fdwname)));
	aclresult = pg_foreign_server_aclcheck(server->serverid, GetUserId(), ACL_USAGE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, server->servername);

	InitMaterializedSRF(fcinfo, 0);
	state.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	state.serverid = server->serverid;
	state.objstore = rollout_open_server_location(server->serverid);
	state.store_context = AllocSetContextCreate(CurrentMemoryContext,
												"rollout_stores store",
												ALLOCSET_DEFAULT_SIZES);
	PG_TRY();
	{
		store_catalog_list(state.objstore, store_list_visit, &state);
	}
	PG_FINALLY();
	{
		objstore_close(state.objstore);
	}
	PG_END_TRY();
	return (Datum) 0;
}
