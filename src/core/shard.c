/*-------------------------------------------------------------------------
 *
 * shard.c
 *		This cluster's shard of a store: its id, its registration, and
 *		whether this server may write it.
 *
 * A store is written by shards, one per PostgreSQL cluster (DESIGN.md §8).
 * A cluster's shard id is its system identifier unless rollout_fdw.shard_id
 * names another; a standby has its primary's identifier and so its shard,
 * which is why the checks that a server may write at all (not in recovery,
 * not superseded by a promoted standby) live here too.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "rollout/shard.h"
#include "rollout/store_keys.h"

/* rollout_fdw.shard_id: empty means the system identifier */
static char *shard_id_setting = NULL;

/*
 * GUC check hook of rollout_fdw.shard_id: empty (use the system identifier) or
 * a valid shard id, since the id becomes part of object keys.
 */
static bool
check_shard_id(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!rollout_shard_id_is_valid(*newval))
	{
		GUC_check_errdetail("A shard id is 1 to 64 letters, digits, \"_\" or \"-\".");
		return false;
	}
	return true;
}

/* Define rollout_fdw.shard_id (superuser only); _PG_init calls it. */
void
shard_define_settings(void)
{
	DefineCustomStringVariable("rollout_fdw.shard_id",
							   "Shard this cluster writes to in every rollout store.",
							   "Empty means the PostgreSQL system identifier. Two clusters must never write with the same shard id.",
							   &shard_id_setting,
							   "",
							   PGC_SUSET,
							   0,
							   check_shard_id, NULL, NULL);
}

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
	if (shard_id_setting != NULL && shard_id_setting[0] != '\0')
		return pstrdup(shard_id_setting);
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

/*
 * ERROR: this writer (of epoch) was fenced, by an entry of owner_epoch at
 * WAL position, or (position < 0) by the shard manifest's epoch.  The one
 * message every path that meets a newer writer reports.
 */
void
shard_raise_taken_over(RolloutStore *store, int64 position, int64 owner_epoch,
					   int64 epoch)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("shard \"%s\" of store \"%s\" was taken over by another writer",
					store->shard, store->name),
			 position >= 0
			 ? errdetail("WAL position %lld holds an entry of writer epoch %lld; this writer has epoch %lld. Nothing was written.",
						 (long long) position, (long long) owner_epoch,
						 (long long) epoch)
			 : errdetail("The shard manifest says writer epoch %lld; this writer has epoch %lld. Nothing was written.",
						 (long long) owner_epoch, (long long) epoch),
			 errhint("Another cluster writes this shard. Give each cluster its own rollout_fdw.shard_id.")));
	pg_unreachable();
}

/* The value of the hidden _shard column: a stable hash of the shard id. */
int64
rollout_shard_hash(const char *shard)
{
	return (int64) hash_bytes_extended((const unsigned char *) shard,
									   strlen(shard), 0);
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
