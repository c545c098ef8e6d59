/*-------------------------------------------------------------------------
 *
 * store_cache.c
 *		The per-backend cache of opened stores: relation (and role) to
 *		RolloutStore, with the credentials of the right user mapping.
 *
 * As postgres_fdw keeps its connections in connection.c, a backend keeps
 * each rollout table's store open here, keyed by the table and the role
 * whose user mapping it was opened with, and reopens it after DDL on the
 * table, its server or the mapping (invalidation callbacks).  A replaced
 * store is closed only when the transaction ends, since a scan or the
 * transaction's buffer may still hold it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "access/xact.h"
#include "catalog/pg_user_mapping.h"
#include "executor/executor.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "rollout/fdw.h"
#include "rollout/objstore.h"
#include "rollout/shard.h"
#include "rollout/store_definition.h"

/*
 * A table's store, opened for one role: the role whose user mapping holds
 * the credentials (the current user for queries, the owner for
 * maintenance), so the same table may be open once per role.
 */
typedef struct StoreCacheKey
{
	Oid			relid;
	Oid			userid;
} StoreCacheKey;

typedef struct StoreCacheEntry
{
	StoreCacheKey key;			/* hash key */
	bool		valid;
	RolloutStore *store;
} StoreCacheEntry;

static HTAB *store_cache = NULL;
static MemoryContext store_cache_context = NULL;

/*
 * Stores replaced since the transaction began: a scan or the transaction's
 * buffer may still hold them, so they are closed only when the transaction
 * ends (store_cache_close_retired), when nothing does any more.
 */
static List *retired_stores = NIL;

/*
 * Invalidate one table's entries, or all.  The next use reopens the store
 * and retires the old one.
 */
static void
store_cache_invalidate_relation(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	StoreCacheEntry *entry;

	if (store_cache == NULL)
		return;
	hash_seq_init(&status, store_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (relid == InvalidOid || entry->key.relid == relid)
			entry->valid = false;
}

static void
store_cache_invalidate_all(Datum arg, int cacheid, uint32 hashvalue)
{
	store_cache_invalidate_relation(arg, InvalidOid);
}

/*
 * Transaction callback: once the transaction has ended (committed, aborted or
 * prepared), close the stores retired during it.  Not at PRE_COMMIT: the
 * transaction buffer commits its rows there, possibly to a store that was
 * retired after its first write.
 */
static void
store_cache_close_retired(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_PARALLEL_COMMIT &&
		event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	foreach(lc, retired_stores)
		rollout_store_close(lfirst(lc));
	list_free(retired_stores);
	retired_stores = NIL;
}

/*
 * Register the cache's callbacks, once from _PG_init: closing retired stores
 * when a transaction ends, and invalidating entries after DDL.  A relcache
 * event invalidates the one table's entries; a change to any server, foreign
 * table, user mapping or role invalidates them all, rather than working out
 * which tables a syscache hash value concerns.
 */
void
rollout_store_cache_init(void)
{
	RegisterXactCallback(store_cache_close_retired, NULL);
	CacheRegisterRelcacheCallback(store_cache_invalidate_relation, (Datum) 0);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, store_cache_invalidate_all, (Datum) 0);
	CacheRegisterSyscacheCallback(FOREIGNTABLEREL, store_cache_invalidate_all, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, store_cache_invalidate_all, (Datum) 0);
	/* superuser status decides whether environment credentials may serve */
	CacheRegisterSyscacheCallback(AUTHOID, store_cache_invalidate_all, (Datum) 0);
}

/*
 * The options an object-store backend gets: the server's, then those of the
 * user mapping of userid (or PUBLIC's), which hold any credentials.  A
 * missing mapping is no error: a file:// store needs none, and a remote
 * backend reports missing credentials itself.
 */
List *
rollout_location_options(Oid serverid, Oid userid)
{
	List	   *options = list_copy(GetForeignServer(serverid)->options);
	Oid			users[2] = {userid, InvalidOid};

	for (int i = 0; i < 2; i++)
	{
		HeapTuple	tuple = SearchSysCache2(USERMAPPINGUSERSERVER,
											ObjectIdGetDatum(users[i]),
											ObjectIdGetDatum(serverid));

		if (HeapTupleIsValid(tuple))
		{
			bool		isnull;
			Datum		datum = SysCacheGetAttr(USERMAPPINGUSERSERVER, tuple,
												Anum_pg_user_mapping_umoptions,
												&isnull);

			if (!isnull)
				options = list_concat(options, untransformRelOptions(datum));
			ReleaseSysCache(tuple);
			break;
		}
	}
	return options;
}

/*
 * Describe a foreign table for the lsm layer, with the credentials of
 * userid.
 *
 * The server's environment credentials (AWS_*, AZURE_STORAGE_*) are the
 * server's own, like the operating-system identity postgres_fdw uses for a
 * connection without a password.  They may serve a table only when
 * superusers chose both where the requests go (the server's owner sets the
 * endpoint) and what they address (the table's owner sets the store).
 * Otherwise a role that may merely create servers and tables could point
 * the backend, and the background sweeper, at any host and have the
 * server's credentials sent there.  Tables owned by other roles must carry
 * credentials in a user mapping, as postgres_fdw's password_required makes
 * non-superusers supply a password.
 *
 * Whether the store's values are read unchecked is another matter
 * (rollout_server_is_trusted).
 */
static RolloutStoreSpec *
store_spec_for_relation(Relation rel, Oid userid)
{
	RolloutStoreSpec *spec = palloc0(sizeof(RolloutStoreSpec));
	Oid			relid = RelationGetRelid(rel);
	RolloutTableOptions *options = rollout_table_options(relid);
	ForeignServer *server = GetForeignServer(GetForeignTable(relid)->serverid);
	TupleDesc	tupdesc = RelationGetDescr(rel);

	spec->location = options->location;
	spec->location_options = rollout_location_options(server->serverid, userid);
	spec->allow_environment_credentials =
		superuser_arg(rel->rd_rel->relowner) && superuser_arg(server->owner);
	spec->trusted = rollout_server_is_trusted(server, spec->location, userid);
	spec->store_name = options->store_name;
	spec->key_column = options->key_column;
	spec->columns = palloc0(sizeof(RolloutColumnSpec) * Max(tupdesc->natts, 1));
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		if (attr->attisdropped)
			continue;
		spec->columns[spec->ncolumns].name = pstrdup(NameStr(attr->attname));
		spec->columns[spec->ncolumns].typid = attr->atttypid;
		spec->columns[spec->ncolumns].typmod = attr->atttypmod;
		spec->ncolumns++;
	}
	return spec;
}

/*
 * See fdw.h.  The cache is made at first use, under CacheMemoryContext.  An
 * entry is reopened when invalidated or when rollout_fdw.shard_id or
 * rollout_fdw.check_trusted_images changed since it was opened; the store it replaces is retired, not closed, since a
 * scan or the transaction's buffer may still hold it.  If opening fails, the
 * entry is left invalid and without a store, and the next call tries again.
 */
RolloutStore *
rollout_store_for_relation_as(Relation rel, Oid userid)
{
	StoreCacheKey key;
	StoreCacheEntry *entry;
	bool		found;

	if (store_cache == NULL)
	{
		HASHCTL		ctl;

		store_cache_context = AllocSetContextCreate(CacheMemoryContext,
													"rollout store cache",
													ALLOCSET_SMALL_SIZES);
		ctl.keysize = sizeof(StoreCacheKey);
		ctl.entrysize = sizeof(StoreCacheEntry);
		ctl.hcxt = store_cache_context;
		store_cache = hash_create("rollout store cache", 16, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	memset(&key, 0, sizeof(key));
	key.relid = RelationGetRelid(rel);
	key.userid = userid;
	entry = hash_search(store_cache, &key, HASH_ENTER, &found);
	if (!found)
	{
		entry->valid = false;
		entry->store = NULL;
	}

	/*
	 * The shard id is a setting: a store opened under another one must be
	 * reopened, or this backend would keep writing the old shard.
	 */
	if (entry->valid && strcmp(entry->store->shard, rollout_current_shard_id()) != 0)
		entry->valid = false;

	/*
	 * Nor may a store set up to read a trusted store's values unchecked go on
	 * doing so once rollout_fdw.check_trusted_images is on, or the other way
	 * round; what the handle kept is left behind with it, and what the
	 * backend keeps across handles is keyed by its read_digest.
	 */
	if (entry->valid &&
		entry->store->checks_trusted_images != store_check_trusted_images)
		entry->valid = false;
	/* the store was deleted under the handle (rollout_store_check_current) */
	if (entry->valid && entry->store->stale)
		entry->valid = false;
	if (!entry->valid)
	{
		RolloutStoreSpec *spec = store_spec_for_relation(rel, userid);

		if (entry->store != NULL)
		{
			MemoryContext oldcontext = MemoryContextSwitchTo(store_cache_context);

			retired_stores = lappend(retired_stores, entry->store);
			MemoryContextSwitchTo(oldcontext);
		}
		entry->store = NULL;
		entry->store = rollout_store_open(spec, store_cache_context);
		entry->valid = true;
	}
	return entry->store;
}

/*
 * See fdw.h.  A store nobody has written yet has nothing cached to mislead:
 * it is not looked at again (rollout_store_exists does when it is read).
 */
RolloutStore *
rollout_store_for_reading(Relation rel, Oid userid)
{
	RolloutStore *store = rollout_store_for_relation_as(rel, userid);

	if (store->pending_definition == NULL &&
		!rollout_store_is_current(store, ROLLOUT_STORE_RECHECK_MS))
		store = rollout_store_for_relation_as(rel, userid);
	return store;
}

/*
 * See fdw.h.  This is the choice postgres_fdw makes for its connections, so
 * that a query through a view reads and writes with the credentials of the
 * view's owner.
 */
Oid
rollout_user_for_range_table_entry(EState *estate, Index rtindex)
{
	RangeTblEntry *rte;

	if (rtindex == 0)
		return GetUserId();
	rte = exec_rt_fetch(rtindex, estate);
	return OidIsValid(rte->checkAsUser) ? rte->checkAsUser : GetUserId();
}

RolloutStore *
rollout_store_for_relation(Relation rel)
{
	return rollout_store_for_relation_as(rel, GetUserId());
}

RolloutStore *
rollout_store_for_relation_as_owner(Relation rel)
{
	return rollout_store_for_relation_as(rel, rel->rd_rel->relowner);
}
