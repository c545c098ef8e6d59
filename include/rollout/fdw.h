/*-------------------------------------------------------------------------
 *
 * fdw.h
 *		The foreign-data-wrapper layer: options, the per-backend cache of
 *		opened stores, and the callback groups the handler assembles.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_FDW_LAYER_H
#define ROLLOUT_FDW_LAYER_H

#include "datatype/timestamp.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "nodes/execnodes.h"
#include "utils/relcache.h"

#include "rollout/snapshot.h"
#include "rollout/store.h"
#include "rollout/store_catalog.h"

/* A foreign table's effective options (defaults applied). */
typedef struct RolloutTableOptions
{
	char	   *location;		/* NULL: the embedded default */
	char	   *store_name;		/* default: the table's name */
	char	   *key_column;		/* default: "id" */
	bool		read_wal_tail;	/* read other shards' WAL tails too */
	int			batch_size;		/* rows per ExecForeignBatchInsert call */
	char	   *cluster_by;		/* the column compaction clusters by, or NULL */
	int			cluster_ranges; /* into at most this many ranges of it */
	char	   *as_of;			/* the named snapshot scans read, or NULL */
} RolloutTableOptions;

/*
 * The named snapshot (a token) scans of rel read: its option as_of, else
 * rollout_fdw.as_of when that names a snapshot of store; NULL for the store
 * as it is now.
 */
extern const char *rollout_table_as_of(const RolloutTableOptions *options,
									   RolloutStore *store);

/*
 * ERROR unless the role running the query (and, in a SECURITY DEFINER
 * function, the one that called it) may select the columns attnos (any
 * column, when NULL) of table relid itself, or, with through_ancestors (a
 * table read through a parent), of a table it inherits from: a scan that
 * reads the table as of rollout_fdw.as_of checks it, since a view over the
 * table grants its rows as they are, not the table's past.
 */
extern void rollout_check_as_of_privilege(Oid relid, const Bitmapset *attnos,
										  bool through_ancestors);

extern RolloutTableOptions *rollout_table_options(Oid relid);

/* Why name cannot be a store name (a message), or NULL when it can. */
extern char *rollout_check_store_name(const char *name);

/*
 * Are the stores of server (at location, NULL for the embedded default),
 * reached with userid's credentials, as trusted as the server's own files
 * (RolloutStoreSpec.trusted)?
 */
extern bool rollout_server_is_trusted(ForeignServer *server,
									  const char *location, Oid userid);

/*
 * The options an object-store backend gets for server serverid: the
 * server's, then those of userid's user mapping (or PUBLIC's).
 */
extern List *rollout_location_options(Oid serverid, Oid userid);

/*
 * A server's location without a table (fdw/server_location.c), with the
 * current user's mapping: the object store, to close with objstore_close,
 * and the spec of one of its stores from the store's own definition, NULL
 * when a column type of it does not exist in this database.
 */
extern ObjectStore *rollout_open_server_location(Oid serverid);
extern RolloutStoreSpec *rollout_server_store_spec(Oid serverid,
												   const StoredDefinition *definition);

/*
 * The opened store of a rollout foreign table, cached for the backend's
 * life and reopened after DDL on the table, its server or user mapping.
 * Credentials come from the user mapping of the current user (queries,
 * as postgres_fdw does), of the table's owner (maintenance, which acts
 * for the owner whoever calls it or when the sweeper does), or of userid.
 */
extern RolloutStore *rollout_store_for_relation(Relation rel);
extern RolloutStore *rollout_store_for_relation_as_owner(Relation rel);
extern RolloutStore *rollout_store_for_relation_as(Relation rel, Oid userid);

/*
 * The same, for a read: when the last look at the store's _store.json is
 * older than ROLLOUT_STORE_RECHECK_MS, look again, and reopen the handle if
 * the store was deleted (and perhaps created again) under it.  Without it a
 * long-lived session would read a new creation through what it cached of
 * the old one (manifests by version number, footers, disk cache blocks) and
 * return the old rows, or skip the new ones.
 */
extern RolloutStore *rollout_store_for_reading(Relation rel, Oid userid);

/*
 * The role whose user mapping a scan or modification of range table entry
 * rtindex uses: the entry's checkAsUser (a view's owner) or, without one,
 * the current user, as postgres_fdw chooses.  rtindex 0: the current user.
 */
extern Oid	rollout_user_for_range_table_entry(EState *estate, Index rtindex);

/*
 * The planner's count of a store's rows, from metadata only
 * (scan_estimate.c): versions in the sources of a snapshot, WAL entries
 * counted by a sample of their footers.
 */
typedef struct StoreEstimate
{
	int64		rows;			/* versions of rows, an upper bound */
	int			sources;		/* objects and memtable batches */
	double		wal_entry_rows; /* mean rows per WAL entry, -1 unknown */
	TimestampTz wal_sampled_at; /* when that mean was sampled */
	TimestampTz counted_at;
} StoreEstimate;

/*
 * The planner's row count when the store is not asked (no SELECT privilege,
 * or a named snapshot it cannot read)
 */
#define ROLLOUT_UNKNOWN_ROWS	1000

extern StoreEstimate scan_estimate_get(RolloutStore *store, bool all_wal_tails);
extern StoreEstimate scan_estimate_get_as_of(RolloutStore *store,
											 bool all_wal_tails,
											 const char *as_of);
extern StoreEstimate scan_estimate_of_named_snapshot(RolloutStore *store,
													 const RolloutSnapshot *snapshot);
extern void scan_estimate_note_snapshot(RolloutStore *store, bool all_wal_tails,
										const RolloutSnapshot *snapshot);
extern void scan_estimate_forget(RolloutStore *store);

/* ERROR unless relid is a foreign table of this wrapper. */
extern void rollout_check_is_rollout_table(Oid relid);

/* Callback groups (scan_plan.c, analyze.c, scan.c, modify.c). */
extern void rollout_plan_routines(FdwRoutine *routine);
extern void rollout_analyze_routines(FdwRoutine *routine);
extern void rollout_import_routines(FdwRoutine *routine);

/* Define rollout_fdw.push_down_conditions (fdw/scan_filter.c; _PG_init). */
extern void scan_filter_define_settings(void);
extern void rollout_scan_routines(FdwRoutine *routine);
extern void rollout_modify_routines(FdwRoutine *routine);

/* Cache invalidation hooks, registered once (store_cache.c). */
extern void rollout_store_cache_init(void);

#endif							/* ROLLOUT_FDW_LAYER_H */
