/*-------------------------------------------------------------------------
 *
 * server_location.c
 *		A server's location without a foreign table: opening it, and
 *		describing one of its stores from the store's own definition
 *		(IMPORT FOREIGN SCHEMA, rollout_stores).
 *
 * The credentials are those of the current user's mapping, as for a table
 * the user reads.  The server's environment credentials may serve only
 * where superusers chose both where requests go and what they address
 * (store_cache.c): here, with no table, that is the server's owner and the
 * current user.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "parser/parse_type.h"

#include "rollout/fdw.h"
#include "rollout/objstore.h"

/* The server's location option, or NULL for the embedded default. */
static char *
server_location(ForeignServer *server)
{
	ListCell   *lc;

	foreach(lc, server->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "location") == 0)
			return defGetString(def);
	}
	return NULL;
}

static bool
server_may_use_environment(ForeignServer *server)
{
	return superuser_arg(server->owner) && superuser();
}

/* See fdw.h. */
ObjectStore *
rollout_open_server_location(Oid serverid)
{
	ForeignServer *server = GetForeignServer(serverid);

	return objstore_open(server_location(server),
						 rollout_location_options(serverid, GetUserId()),
						 server_may_use_environment(server));
}

/* See fdw.h. */
RolloutStoreSpec *
rollout_server_store_spec(Oid serverid, const StoredDefinition *definition)
{
	ForeignServer *server = GetForeignServer(serverid);
	RolloutStoreSpec *spec = palloc0(sizeof(RolloutStoreSpec));

	spec->location = server_location(server);
	spec->location_options = rollout_location_options(serverid, GetUserId());
	spec->allow_environment_credentials = server_may_use_environment(server);
	spec->trusted = rollout_server_is_trusted(server, spec->location,
											  GetUserId());
	spec->store_name = definition->store_name;
	spec->key_column = definition->key_column;
	spec->columns = palloc0(sizeof(RolloutColumnSpec) * Max(definition->ncolumns, 1));
	for (int c = 0; c < definition->ncolumns; c++)
	{
		const StoredColumn *column = &definition->columns[c];
		RolloutColumnSpec *out = &spec->columns[c];
		int32		parsed_typmod;

		parseTypeString(column->type_name, &out->typid, &parsed_typmod, true);
		if (!OidIsValid(out->typid))
			return NULL;
		out->name = column->name;
		out->typmod = column->typmod;
	}
	spec->ncolumns = definition->ncolumns;
	return spec;
}
