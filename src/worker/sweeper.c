/*-------------------------------------------------------------------------
 *
 * sweeper.c
 *		The background worker "rollout_fdw sweeper": flushes, merges and
 *		collects garbage on its own, so that a busy store needs no human and
 *		no cron to stay healthy (DESIGN.md §9).
 *
 * One sweeper per database named in rollout_fdw.worker_databases (default
 * "postgres"), registered at startup like pg_cron's single database: a
 * worker connected to a database would block DROP DATABASE, and connected to
 * template1 even CREATE DATABASE, so it connects only where it is asked to.
 *
 * Each pass (every second, on its latch) it finds the rollout tables of its
 * database through the catalogs, one table per server, store and owner (it
 * acts with the owner's user mapping), and for each:
 *	- flushes when rollout_fdw.flush_interval has passed since its last flush
 *	  (after a restart this is what flushes the durable WAL tail unprompted);
 *	- merges when this cluster's shard has rollout_fdw.merge_after_generations
 *	  pending generations;
 *	- collects garbage every rollout_fdw.gc_interval with rollout_fdw.gc_grace;
 *	- with rollout_fdw.analyze_after_compaction, runs ANALYZE on the table
 *	  when it finds that the store's base was compacted since it last
 *	  looked (autovacuum never analyzes foreign tables, and a compaction is
 *	  when the rows' versions, so the statistics, change most).
 * Merges and garbage collection yield to commits with the cost-based delay
 * rollout_fdw.sweeper_cost_delay (maintenance_cost.c), as autovacuum does
 * with autovacuum_vacuum_cost_delay; flushes do not, since commits wait for
 * the memtable room a flush frees.
 * Every store is handled in its own transaction; an error is caught, logged
 * (an error that repeats pass after pass once every SWEEPER_REPEAT_LOG_S,
 * with its count), recorded in rollout_stat_stores, and the store is tried
 * again next pass.
 * A store's turn may last rollout_fdw.sweeper_store_timeout: a store whose
 * object store stalls (unreachable, or an endpoint a server's owner pointed
 * at a server that never answers, under request timeouts that owner sets)
 * is cancelled then and left alone for a while, so that it cannot hold back
 * the flushes of the database's other stores.
 * SIGHUP reloads the settings, SIGTERM ends the worker at once, and the
 * loop waits on its latch with a timeout: it never busy-waits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "rollout/compact.h"
#include "rollout/fdw.h"
#include "rollout/flush.h"
#include "rollout/gc.h"
#include "rollout/manifest.h"
#include "rollout/grace.h"
#include "rollout/maintenance_cost.h"
#include "rollout/memtable.h"
#include "rollout/merge.h"
#include "rollout/observe.h"
#include "rollout/shard.h"
#include "rollout/shared_store.h"
#include "rollout/store_stats.h"
#include "rollout/sweeper.h"

#define SWEEPER_PASS_MS			1000
#define SWEEPER_MAX_DATABASES	16
#define SWEEPER_MERGE_CHECK_S	10

/* a gc's time in a turn is at least this, or half the turn (sweeper_gc_stop_at) */
#define SWEEPER_GC_MIN_BUDGET_S	10

/*
 * A store that fails the same way on every pass (a bucket gone, a key
 * revoked) has that error logged once, and again at most this often, with
 * how many times it came meanwhile; rollout_stat_stores.last_error shows
 * every failure as it happens.
 */
#define SWEEPER_REPEAT_LOG_S	600

/* The sweeper's settings (sweeper_define_settings) */
static int	flush_interval_s = 30;
static int	merge_after_generations = 8;
static int	gc_interval_s = 3600;
static int	gc_grace_s = 3600;
static bool analyze_after_compaction = false;
static double sweeper_cost_delay_ms = 2;
static int	store_timeout_s = 300;
static char *worker_databases = NULL;

PGDLLEXPORT void rollout_sweeper_main(Datum main_arg);

/* What the sweeper remembers of a table (a store, for one owner) between passes. */
typedef struct SweptStore
{
	Oid			relid;
	char	   *location;		/* NULL: the embedded default */
	char	   *store_name;
	TimestampTz last_flush;
	TimestampTz last_gc;
	bool		gc_running;		/* its gc began and has not returned */
	int64		compactions_seen;	/* the base's compaction count, -1 before
									 * the first look */
	int			timeouts;		/* turns in a row that ran out of time */

	/*
	 * The store's shared-memory slot in this turn, once the turn opened the
	 * store, and the generation the handle found it at: a failure of the turn
	 * is recorded there while the slot stands for the store.  Only there:
	 * other servers' stores of the same location string and name (another
	 * endpoint, other credentials) are not this one.  A turn that could not
	 * open its store records its failure in the log alone.
	 */
	SharedStoreSlot *slot;
	uint64		slot_generation;
	TimestampTz resting_until;	/* after those, left alone until then */

	/*
	 * Turns in a row that failed, and the error last logged for them (in
	 * sweeper_context; NULL when none failed since the last success), when,
	 * and how many failures with the same error were not logged since
	 * (sweeper_log_failure).
	 */
	int64		failures;
	char	   *error_logged;
	TimestampTz error_logged_at;
	int64		error_repeats;
} SweptStore;

static MemoryContext sweeper_context = NULL;
static List *swept_stores = NIL;

/*
 * The timeout of a store's turn (sweeper_turn_begin), whether it fired, and
 * what the turn was doing (for the log)
 */
static TimeoutId store_timeout_id;
static volatile sig_atomic_t store_timeout_fired = false;
static const char *turn_step = "";
static TimestampTz turn_gc_stop_at = 0;

/* rollout_gc_batches_sent() when the turn's gc began */
static int64 turn_gc_batches_before = 0;

/* ----------------------------------------------------------------
 * Settings and registration
 * ----------------------------------------------------------------
 */

/* Define the sweeper's settings; worker_databases only while preloading. */
void
sweeper_define_settings(void)
{
	/* which sweepers run is fixed at start, so only while preloading */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomStringVariable("rollout_fdw.worker_databases",
								   "Databases whose rollout tables the background sweeper maintains.",
								   "A comma-separated list; one sweeper per database. Empty disables the sweeper.",
								   &worker_databases,
								   "postgres",
								   PGC_POSTMASTER,
								   0,
								   NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.flush_interval",
							"Seconds between the sweeper's flushes of a store; 0 disables them.",
							NULL,
							&flush_interval_s,
							30, 0, 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.merge_after_generations",
							"Pending generations of a shard at which the sweeper merges them; 0 disables merging.",
							"Read cost grows with pending generations, so they are kept bounded.",
							&merge_after_generations,
							8, 0, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.gc_interval",
							"Seconds between the sweeper's garbage collections of a store; 0 disables them.",
							NULL,
							&gc_interval_s,
							3600, 0, 7 * 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.gc_grace",
							"Grace period of the sweeper's garbage collection.",
							"Never shorter than rollout_fdw.min_gc_grace.",
							&gc_grace_s,
							3600, 0, 7 * 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("rollout_fdw.analyze_after_compaction",
							 "Whether the sweeper runs ANALYZE on a rollout table after a compaction of its store.",
							 "It looks for compactions when it looks for merges; the first look after a start only takes note.",
							 &analyze_after_compaction,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.sweeper_store_timeout",
							"Longest time the sweeper spends on one store in a pass; 0 means no limit.",
							"A store that takes longer is cancelled and then left alone for a while (twice as long after each turn in a row that runs out, at most an hour), so that a stalling object store cannot hold back the database's other stores.",
							&store_timeout_s,
							300, 0, 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomRealVariable("rollout_fdw.sweeper_cost_delay",
							 "Cost-based delay of the sweeper's merges and garbage collections, in milliseconds.",
							 "-1 uses rollout_fdw.maintenance_cost_delay; 0 turns the delay off.",
							 &sweeper_cost_delay_ms,
							 2, -1, 100,
							 PGC_SIGHUP,
							 GUC_UNIT_MS,
							 NULL, NULL, NULL);
}

/*
 * Register one sweeper per database in rollout_fdw.worker_databases (called
 * from _PG_init while preloading).
 */
void
rollout_sweeper_register(void)
{
	char	   *names;
	List	   *databases;
	ListCell   *lc;

	if (worker_databases == NULL || worker_databases[0] == '\0')
		return;

	/*
	 * pg_upgrade starts the new cluster to restore every database, dropping
	 * and creating "postgres" among them: a sweeper connected to it would
	 * make the restore fail.  Nothing is to be maintained meanwhile anyway.
	 */
	if (IsBinaryUpgrade)
		return;
	names = pstrdup(worker_databases);
	if (!SplitIdentifierString(names, ',', &databases))
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid list syntax in rollout_fdw.worker_databases")));
	if (list_length(databases) > SWEEPER_MAX_DATABASES)
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rollout_fdw.worker_databases names more than %d databases",
						SWEEPER_MAX_DATABASES)));
	foreach(lc, databases)
	{
		const char *database = lfirst(lc);
		BackgroundWorker worker = {0};

		if (strlen(database) >= BGW_EXTRALEN)
			ereport(FATAL,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("database name \"%s\" in rollout_fdw.worker_databases is too long",
							database)));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = 5;
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "rollout_fdw");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "rollout_sweeper_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "rollout_fdw sweeper for %s", database);
		snprintf(worker.bgw_type, BGW_MAXLEN, "rollout_fdw sweeper");
		strlcpy(worker.bgw_extra, database, BGW_EXTRALEN);
		RegisterBackgroundWorker(&worker);
	}
}

/* ----------------------------------------------------------------
 * One pass
 * ----------------------------------------------------------------
 */

/*
 * Warn, at start and after each reload, when flushing and merging are both
 * disabled: committed rows would then stay in the memtable and WAL until
 * someone runs rollout_flush().
 */
static void
sweeper_warn_if_idle(void)
{
	if (flush_interval_s == 0 && merge_after_generations == 0)
		ereport(WARNING,
				(errmsg("rollout_fdw sweeper: flushing and merging are both disabled"),
				 errdetail("rollout_fdw.flush_interval and rollout_fdw.merge_after_generations are 0."),
				 errhint("Without them, committed rows stay in the memtable and WAL until rollout_flush() runs.")));
}

/*
 * The sweeper's memory of table relid, made on first sight; its location
 * and store name are refreshed (an ALTER may have changed them).
 */
static SweptStore *
sweeper_remember(Oid relid, const char *location, const char *store_name)
{
	ListCell   *lc;
	SweptStore *swept = NULL;
	MemoryContext oldcontext = MemoryContextSwitchTo(sweeper_context);

	foreach(lc, swept_stores)
	{
		if (((SweptStore *) lfirst(lc))->relid == relid)
			swept = lfirst(lc);
	}
	if (swept == NULL)
	{
		swept = palloc0(sizeof(SweptStore));
		swept->relid = relid;
		swept->last_flush = GetCurrentTimestamp();
		swept->last_gc = GetCurrentTimestamp();
		swept->compactions_seen = -1;
		swept_stores = lappend(swept_stores, swept);
	}
	else
	{
		/* moved to another store: its compactions are not the old one's */
		if (strcmp(swept->store_name, store_name) != 0 ||
			(swept->location == NULL) != (location == NULL) ||
			(location != NULL && strcmp(swept->location, location) != 0))
			swept->compactions_seen = -1;
		if (swept->location)
			pfree(swept->location);
		pfree(swept->store_name);
	}
	swept->location = location ? pstrdup(location) : NULL;
	swept->store_name = pstrdup(store_name);
	MemoryContextSwitchTo(oldcontext);
	return swept;
}

/*
 * The rollout tables of this database to maintain, one per server, store
 * and owner, as a list in result_context (a transaction must be open).
 * Empty when the extension is not installed here.
 *
 * One table per store would be enough if every table of a store reached it
 * the same way; but two servers may share a location string and differ in
 * endpoint, and each table is maintained with its owner's user mapping, so
 * a table whose owner has no credentials must not hide one whose owner has.
 * Nothing here validates a table's options: a table that cannot be opened
 * fails in its own pass (sweeper_sweep_store), not the sweeper.  A table
 * pinned to a named snapshot (option as_of) is taken only when no other
 * table of its group is: its ANALYZE samples the snapshot, not the store.
 */
static List *
sweeper_find_tables(MemoryContext result_context)
{
	List	   *tables = NIL;
	int			ret;

	if (!OidIsValid(get_extension_oid("rollout_fdw", true)))
		return NIL;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ret = SPI_execute("SELECT DISTINCT ON (ft.ftserver, store, c.relowner) c.oid"
					  " FROM pg_catalog.pg_class c"
					  " JOIN pg_catalog.pg_foreign_table ft ON ft.ftrelid = c.oid"
					  " JOIN pg_catalog.pg_foreign_server s ON s.oid = ft.ftserver"
					  " JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw"
					  " JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass"
					  "   AND d.objid = w.fdwhandler AND d.deptype = 'e'"
					  " JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'rollout_fdw'"
					  " CROSS JOIN LATERAL (SELECT coalesce((SELECT option_value"
					  "     FROM pg_catalog.pg_options_to_table(ft.ftoptions)"
					  "     WHERE option_name = 'store'), c.relname::text) AS store) st"
					  " ORDER BY ft.ftserver, store, c.relowner,"
					  "   EXISTS (SELECT FROM pg_catalog.pg_options_to_table(ft.ftoptions)"
					  "     WHERE option_name = 'as_of'), c.oid", true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "could not list rollout tables: SPI_execute returned %d", ret);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 1,
														   &isnull));
		MemoryContext oldcontext = MemoryContextSwitchTo(result_context);

		tables = lappend_oid(tables, relid);
		MemoryContextSwitchTo(oldcontext);
	}
	SPI_finish();
	return tables;
}

/* Does this cluster's shard have enough pending generations to merge? */
static bool
sweeper_merge_due(RolloutStore *store)
{
	ShardManifest *shard = shard_manifest_read_latest(store, store->shard);
	BaseManifest *base;
	int64		merged;
	int			pending = 0;
	ListCell   *lc;

	if (list_length(shard->generations) < merge_after_generations)
		return false;
	base = base_manifest_read_latest(store);
	merged = base_manifest_merged_generation(base, store->shard);
	foreach(lc, shard->generations)
	{
		if (((GenerationEntry *) lfirst(lc))->number > merged)
			pending++;
	}
	return pending >= merge_after_generations;
}

/*
 * ANALYZE the table when its store's base was compacted since the sweeper
 * last looked (the base manifest counts compactions, whoever ran them).  The
 * first look only takes note: the sweeper cannot know what happened before.
 * The count is remembered only once the ANALYZE is through, so that one
 * that failed, or found the table locked, is tried again at the next look:
 * a table some session is altering or analyzing must not hold up the
 * sweeper's flushes.
 */
static void
sweeper_analyze_if_compacted(Relation rel, RolloutStore *store,
							 SweptStore *swept)
{
	int64		compactions = base_manifest_read_latest(store)->total_compactions;
	char	   *command;

	if (swept->compactions_seen < 0 || compactions <= swept->compactions_seen)
	{
		swept->compactions_seen = compactions;
		return;
	}

	/*
	 * SKIP_LOCKED skips a table whose lock is not to be had at once with a
	 * WARNING, and succeeds: the compaction would count as analyzed until the
	 * next one.  So the sweeper takes ANALYZE's lock first, and without it
	 * comes back at its next look.
	 */
	if (!ConditionalLockRelationOid(RelationGetRelid(rel),
									ShareUpdateExclusiveLock))
		return;
	command = psprintf("ANALYZE (SKIP_LOCKED) %s",
					   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												  RelationGetRelationName(rel)));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "rollout_fdw sweeper: SPI_connect failed");
	if (SPI_execute(command, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "rollout_fdw sweeper: \"%s\" failed", command);
	SPI_finish();
	swept->compactions_seen = compactions;
}

/*
 * The table, share-locked, unless that lock is not to be had at once (an
 * ALTER, DROP or TRUNCATE holds or waits for the table) or the table is gone:
 * NULL then, and the sweeper comes back next pass.  Queued behind DDL that
 * itself waits for a long reader, it would hold back every other store of
 * the database until its turn ran out.
 */
static Relation
sweeper_try_open(Oid relid)
{
	Relation	rel;

	if (!ConditionalLockRelationOid(relid, AccessShareLock))
		return NULL;
	rel = try_table_open(relid, NoLock);
	if (rel == NULL)
		UnlockRelationOid(relid, AccessShareLock);
	return rel;
}

/*
 * Flush, merge and collect one store, in the current transaction, acting as
 * the table's owner: with the owner's user mapping (never the server's
 * environment credentials for a table a non-superuser owns), and, like
 * autovacuum, in a restricted security context, so that nothing the owner
 * wrote runs with the sweeper's superuser rights.  An error ends the
 * transaction, which restores the sweeper's own user.  False when the table
 * was skipped (sweeper_try_open).
 */
static bool
sweeper_maintain(Oid relid, SweptStore *swept)
{
	Relation	rel = sweeper_try_open(relid);
	Oid			save_userid;
	int			save_sec_context;
	RolloutStore *store;
	TimestampTz now = GetCurrentTimestamp();
	bool		flush_due;
	bool		analyze_due = false;
	SharedStoreSlot *slot;
	int64		memtable_bytes = 0;

	if (rel == NULL)
	{
		elog(DEBUG1, "rollout_fdw sweeper: table %u is locked or gone; skipped this pass", relid);
		return false;
	}
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   save_sec_context | SECURITY_RESTRICTED_OPERATION |
						   SECURITY_LOCAL_USERID_CHANGE);
	store = rollout_store_for_relation_as_owner(rel);

	/*
	 * The work is on the store, which the table only names: the table's lock
	 * is let go now, so that an ALTER or TRUNCATE of it never waits for a
	 * merge, with every INSERT queued behind it (sql/maintenance.c says the
	 * same of the maintenance functions).  ANALYZE opens it again.
	 */
	table_close(rel, AccessShareLock);
	slot = shared_store_slot(store, false); /* also: visible in the view */
	swept->slot = slot;
	swept->slot_generation = store->shared_slot_generation;

	/*
	 * A store holding more than a quarter of the memtable is flushed at once:
	 * committers of every store share the memtable, and a committer can only
	 * flush its own store.
	 */
	if (slot != NULL)
		(void) memtable_oldest(slot, &memtable_bytes);
	if (memtable_bytes > memtable_max_transaction_bytes())
		swept->last_flush = 0;

	/*
	 * Flush on its interval; look for merges at the same cadence (every
	 * SWEEPER_MERGE_CHECK_S when flushing is off): generations only appear
	 * with flushes, and each look costs manifest reads.
	 */
	flush_due = swept->last_flush == 0;
	if (flush_due ||
		TimestampDifferenceExceeds(swept->last_flush, now,
								   (flush_interval_s > 0
									? flush_interval_s
									: SWEEPER_MERGE_CHECK_S) * 1000))
	{
		swept->last_flush = now;
		turn_step = "flushing";
		if (flush_interval_s > 0 || flush_due)
			(void) rollout_flush_shard(store);
		turn_step = "merging";
		if (merge_after_generations > 0 && sweeper_merge_due(store))
			(void) rollout_merge_shard(store, 0, false);
		analyze_due = analyze_after_compaction;
	}
	if (gc_interval_s > 0 &&
		TimestampDifferenceExceeds(swept->last_gc, now, gc_interval_s * 1000))
	{
		GcResult	gc;

		swept->last_gc = now;
		swept->gc_running = true;
		turn_gc_batches_before = rollout_gc_batches_sent();
		turn_step = "collecting garbage";
		gc = rollout_gc_store(store, Max(gc_grace_s, gc_min_grace_seconds()),
							  turn_gc_stop_at);
		swept->gc_running = false;

		/*
		 * What it deleted stays deleted: one that stopped for the time of the
		 * turn goes on at the next pass, so that a backlog larger than a turn
		 * can delete is worked off pass by pass, the store's flushes and
		 * merges and the other stores' turns in between.
		 */
		if (gc.stopped)
			swept->last_gc = 0;
	}
	/* last: nothing after it may abort the transaction its statistics are in */
	turn_step = "analyzing the table";
	if (analyze_due && (rel = sweeper_try_open(relid)) != NULL)
	{
		sweeper_analyze_if_compacted(rel, store, swept);
		table_close(rel, AccessShareLock);
	}
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return true;
}

/*
 * The end of a store's turn: cancel the sweeper's work on it, as a statement
 * timeout cancels a statement (the error ends the store's transaction, and
 * what it wrote to the store is left as after any failed flush or merge).
 */
static void
sweeper_store_timeout_handler(void)
{
	store_timeout_fired = true;
	QueryCancelPending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/*
 * When the sweeper's gc of a store, begun in the turn that begins now, stops
 * gathering deletions (0: never, without a turn timeout).  At half the turn
 * (so that a large backlog ends the turn well and goes on at the next pass,
 * rather than being cancelled and leaving the store resting), and at most
 * rollout_fdw.flush_interval (10 s at least) after the turn began: while one
 * store works off a backlog, the others' turns, and their flushes, come
 * between its runs.
 */
static TimestampTz
sweeper_gc_stop_at(void)
{
	int64		budget_ms;

	if (store_timeout_s <= 0)
		return 0;
	budget_ms = Min((int64) store_timeout_s * 500,
					(int64) Max(flush_interval_s, SWEEPER_GC_MIN_BUDGET_S) * 1000);
	return TimestampTzPlusMilliseconds(GetCurrentTimestamp(), budget_ms);
}

/* Start the clock of a store's turn (rollout_fdw.sweeper_store_timeout). */
static void
sweeper_turn_begin(void)
{
	store_timeout_fired = false;
	turn_gc_stop_at = sweeper_gc_stop_at();
	turn_step = "opening the store";
	if (store_timeout_s > 0)
		enable_timeout_after(store_timeout_id, store_timeout_s * 1000);
}

/*
 * Stop the clock; returns whether the turn ran out of time.  A cancel the
 * clock raised after the turn's last check for interrupts is dropped, so
 * that it cannot end the next store's turn.
 */
static bool
sweeper_turn_end(void)
{
	bool		ran_out;

	/* once the timeout is disabled, its handler cannot run any more */
	disable_timeout(store_timeout_id, false);
	ran_out = store_timeout_fired;
	if (ran_out)
	{
		QueryCancelPending = false;
		store_timeout_fired = false;
	}
	return ran_out;
}

/*
 * After a turn of swept that ran out of time: leave the store alone for the
 * timeout, doubled after each such turn in a row, at most an hour (or the
 * timeout, if longer).  Returns the rest, in seconds.
 */
static int
sweeper_rest(SweptStore *swept)
{
	int64		rest = store_timeout_s;

	swept->timeouts++;
	for (int i = 1; i < swept->timeouts && rest < SECS_PER_HOUR; i++)
		rest *= 2;
	rest = Min(rest, Max(SECS_PER_HOUR, store_timeout_s));
	swept->resting_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   rest * 1000);
	return (int) rest;
}

/*
 * Log that swept's turn failed with message, unless the same error was
 * logged for it less than SWEEPER_REPEAT_LOG_S ago: a store that stays
 * broken would otherwise add a line to the log every second.
 */
static void
sweeper_log_failure(SweptStore *swept, const char *message)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz since = swept->error_logged_at;
	bool		same;
	int64		repeats;

	same = swept->error_logged != NULL && strcmp(swept->error_logged, message) == 0;
	repeats = same ? swept->error_repeats : 0;
	swept->failures++;
	if (same && !TimestampDifferenceExceeds(swept->error_logged_at, now,
											SWEEPER_REPEAT_LOG_S * 1000))
	{
		swept->error_repeats++;
		return;
	}
	ereport(LOG,
			(errmsg("rollout_fdw sweeper: store \"%s\": %s",
					swept->store_name, message),
			 repeats > 0 ?
			 errdetail("The same error came %lld more times since it was logged at %s; it is logged again at most every %d s while it lasts.",
					   (long long) repeats, timestamptz_to_str(since),
					   SWEEPER_REPEAT_LOG_S) : 0));
	if (swept->error_logged != NULL)
		pfree(swept->error_logged);
	swept->error_logged = MemoryContextStrdup(sweeper_context, message);
	swept->error_logged_at = now;
	swept->error_repeats = 0;
}

/* Log that swept was maintained again after turns that failed. */
static void
sweeper_log_recovery(SweptStore *swept)
{
	if (swept->failures == 0)
		return;
	ereport(LOG,
			(errmsg("rollout_fdw sweeper: store \"%s\" maintained again after %lld failed turns",
					swept->store_name, (long long) swept->failures)));
	swept->failures = 0;
	if (swept->error_logged != NULL)
		pfree(swept->error_logged);
	swept->error_logged = NULL;
	swept->error_repeats = 0;
}

/*
 * Handle one store in its own transaction, within its time
 * (sweeper_turn_begin).  An error is recorded (rollout_stat_stores.last_error)
 * and logged (once while it repeats: sweeper_log_failure), and the store is
 * tried again next pass, or, when its turn ran out of time, after a rest
 * (sweeper_rest).
 */
static void
sweeper_sweep_store(Oid relid)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	SweptStore *volatile swept = NULL;
	bool		took_turn;

	PG_TRY();
	{
		RolloutTableOptions *options;

		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		options = rollout_table_options(relid);
		swept = sweeper_remember(relid, options->location, options->store_name);
		swept->slot = NULL;
		took_turn = swept->resting_until == 0 ||
			GetCurrentTimestamp() >= swept->resting_until;
		if (took_turn)
		{
			sweeper_turn_begin();
			/* a table skipped for its lock is no turn that went well */
			took_turn = sweeper_maintain(relid, swept);
			(void) sweeper_turn_end();
		}
		PopActiveSnapshot();
		CommitTransactionCommand();
		if (took_turn)
		{
			swept->timeouts = 0;
			swept->resting_until = 0;
			sweeper_log_recovery(swept);
		}
	}
	PG_CATCH();
	{
		bool		ran_out = sweeper_turn_end();
		ErrorData  *edata;
		char	   *message;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		MemoryContextSwitchTo(oldcontext);	/* the pass's, reset after it */
		message = edata->message;
		if (ran_out && swept != NULL)
			message = psprintf("its turn ran out of time while %s (rollout_fdw.sweeper_store_timeout = %d s) and is left alone for %d s",
							   turn_step, store_timeout_s, sweeper_rest(swept));

		/*
		 * A gc cut short by the timeout after it deleted something (its stop
		 * time comes only after a first batch, and a batch or the listing
		 * after it can be slow) goes on at the store's next turn, after the
		 * rest, rather than a gc_interval later: what it deleted stays
		 * deleted, and the next run gets further.  One that had deleted
		 * nothing would only be cut at the same place again, so it waits for
		 * the interval, as does one that failed otherwise or succeeded.
		 */
		if (ran_out && swept != NULL && swept->gc_running &&
			rollout_gc_batches_sent() > turn_gc_batches_before)
			swept->last_gc = 0;
		if (swept != NULL)
			swept->gc_running = false;
		if (swept != NULL)
			sweeper_log_failure(swept, message);
		else
			ereport(LOG,
					(errmsg("rollout_fdw sweeper: rollout table %u: %s",
							relid, message)));
		if (swept != NULL && swept->slot != NULL)
			shared_store_note_error_if_same(swept->slot, swept->slot_generation,
											message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

/*
 * One pass: list this database's rollout tables in a short transaction of its
 * own, then maintain each in its own transaction (sweeper_sweep_store), so
 * that one store's failure does not stop the others.  The list is made in the
 * caller's pass context, which outlives the listing transaction.
 */
static void
sweeper_pass(void)
{
	MemoryContext pass_context = CurrentMemoryContext;
	List	   *tables;
	ListCell   *lc;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	tables = sweeper_find_tables(pass_context);
	PopActiveSnapshot();
	CommitTransactionCommand();

	foreach(lc, tables)
	{
		CHECK_FOR_INTERRUPTS();
		sweeper_sweep_store(lfirst_oid(lc));
	}
}

/* ----------------------------------------------------------------
 * Main loop
 * ----------------------------------------------------------------
 */

/*
 * The delay of the sweeper's merges and garbage collections (its
 * MaintenanceCostDelaySource), asked before each of their sleeps.
 *
 * It reads the configuration again when a reload is pending, as autovacuum
 * workers do in their delays: a merge that crawls under a large delay must
 * not keep it until the merge ends.  And it is 0 while the memtable is more
 * than half full: the sweeper handles one store after the other, so while it
 * merges one store it flushes no other, and committers that find the
 * memtable full wait for those flushes.  Sparing their CPU would then cost
 * them far more than it gives.
 */
static double
sweeper_cost_delay(void)
{
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
	if (memtable_budget_used_fraction() > 0.5)
		return 0;
	return sweeper_cost_delay_ms;
}

/*
 * Entry point of a sweeper background worker.  It connects to the database
 * named in bgw_extra and runs a pass every SWEEPER_PASS_MS (sooner when its
 * latch is set), reloading the settings on SIGHUP.  Each pass runs in
 * pass_context, reset afterwards; what the sweeper remembers of its tables
 * between passes lives in sweeper_context.
 */
void
rollout_sweeper_main(Datum main_arg)
{
	MemoryContext pass_context;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(MyBgworkerEntry->bgw_extra, NULL, 0);
	pgstat_report_appname("rollout_fdw sweeper");
	store_timeout_id = RegisterTimeout(USER_TIMEOUT, sweeper_store_timeout_handler);

	/*
	 * The sweeper runs as a superuser, and its queries name operators and
	 * functions.  With the database's default search_path, a role allowed to
	 * create objects in a schema on it could define a closer match (an
	 * operator =(oid, regclass), say) and have its code run with the
	 * sweeper's rights.  An empty path resolves everything in pg_catalog, as
	 * autovacuum does.
	 */
	SetConfigOption("search_path", "", PGC_SUSET, PGC_S_OVERRIDE);

	sweeper_context = AllocSetContextCreate(TopMemoryContext, "rollout sweeper",
											ALLOCSET_DEFAULT_SIZES);
	pass_context = AllocSetContextCreate(TopMemoryContext, "rollout sweeper pass",
										 ALLOCSET_DEFAULT_SIZES);
	maintenance_cost_set_delay_source(sweeper_cost_delay);
	ereport(LOG,
			(errmsg("rollout_fdw sweeper started for database \"%s\"",
					MyBgworkerEntry->bgw_extra)));
	sweeper_warn_if_idle();

	for (;;)
	{
		MemoryContext oldcontext;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SWEEPER_PASS_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			sweeper_warn_if_idle();
		}
		oldcontext = MemoryContextSwitchTo(pass_context);
		sweeper_pass();
		MemoryContextSwitchTo(oldcontext);
		MemoryContextReset(pass_context);
	}
}
