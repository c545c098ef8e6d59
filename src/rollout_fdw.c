/*-------------------------------------------------------------------------
 *
 * rollout_fdw.c
 *		Module entry point: settings (GUCs) and callback registration.
 *
 * The extension works without shared_preload_libraries: nothing here
 * needs shared memory yet, so every setting is defined on first load in
 * any backend.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/guc.h"

#include "rollout/fault.h"
#include "rollout/fdw.h"
#include "rollout/objstore.h"
#include "rollout/rollout_fdw.h"
#include "rollout/segment.h"
#include "rollout/shared_writer.h"
#include "rollout/store.h"
#include "rollout/sweeper.h"
#include "rollout/xact_buffer.h"

PG_MODULE_MAGIC;

char	   *rollout_shard_id_setting = NULL;
int			rollout_transaction_buffer_kb = 16 * 1024;
int			rollout_rows_per_group = SEGMENT_DEFAULT_ROWS_PER_GROUP;
int			rollout_max_wal_append_attempts = 1000;
int			rollout_min_gc_grace_seconds = 600;
int			rollout_merge_max_kb = 1024 * 1024;
int			rollout_ingest_threshold_kb = 16 * 1024;

void		_PG_init(void);

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

void
_PG_init(void)
{
	DefineCustomStringVariable("rollout_fdw.shard_id",
							   "Shard this cluster writes to in every rollout store.",
							   "Empty means the PostgreSQL system identifier. Two clusters must never write with the same shard id.",
							   &rollout_shard_id_setting,
							   "",
							   PGC_SUSET,
							   0,
							   check_shard_id, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.transaction_buffer_size",
							"Memory for a transaction's buffered rows before they spill to a temporary file.",
							NULL,
							&rollout_transaction_buffer_kb,
							16 * 1024, 64, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.rows_per_group",
							"Rows per row group in the segments this backend writes.",
							NULL,
							&rollout_rows_per_group,
							SEGMENT_DEFAULT_ROWS_PER_GROUP, 1, 1024 * 1024,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.max_wal_append_attempts",
							"WAL positions a commit tries before it gives up.",
							"Each attempt that finds its position taken by a concurrent commit of the same shard moves to the next.",
							&rollout_max_wal_append_attempts,
							1000, 1, 1000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.min_gc_grace",
							"Shortest grace period rollout_gc accepts.",
							"Merges, compactions and flushes abandon outputs that waited longer than half of it before their commit, so that garbage collection can never delete an object a commit is about to reference.",
							&rollout_min_gc_grace_seconds,
							600, 0, 7 * 24 * 3600,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.ingest_threshold",
							"Size past which a transaction's rows are staged as a sorted ingest segment.",
							"Its WAL entry then only names the segment, so large COPYs need neither memory nor shared memory in proportion to their size. A transaction whose buffer spilled to disk always uses an ingest segment.",
							&rollout_ingest_threshold_kb,
							16 * 1024, 64, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.merge_max_bytes",
							"Generation bytes one merge pass reads at most.",
							"A pass always takes at least one generation.",
							&rollout_merge_max_kb,
							1024 * 1024, 1024, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.max_concurrent_requests",
							"Requests to a remote object store one backend may have in flight at once.",
							"Scans fetch segment footers and column chunks in batches of concurrent requests. 1 makes every request wait for the previous one.",
							&objstore_max_concurrent_requests,
							OBJSTORE_DEFAULT_CONCURRENT_REQUESTS, 1,
							OBJSTORE_MAX_CONCURRENT_REQUESTS,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomStringVariable("rollout_fdw.fail_at",
							   "Fault points for tests: step:error, step:crash or step:sleep=N, comma-separated.",
							   "The steps are listed in docs/MAINTENANCE.md. Never set this in production.",
							   &rollout_fail_at_setting,
							   "",
							   PGC_SUSET,
							   GUC_NOT_IN_SAMPLE,
							   rollout_fail_at_check, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.commit_delay",
							"Microseconds a group-commit leader waits for more transactions before it writes.",
							"-1 (default): automatic, a tenth of the store's mean WAL PUT time (at most 5 ms) while transactions commit concurrently; 0: never wait.",
							&rollout_commit_delay_us,
							-1, -1, 100000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	/*
	 * The shared-memory writer exists only when the library is preloaded:
	 * its settings size shared memory, and defining a PGC_POSTMASTER setting
	 * later would be fatal.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomIntVariable("rollout_fdw.memtable_size",
								"Shared memory for the memtable: committed rows not yet flushed.",
								"When it is full, committers wait for a flush.",
								&rollout_memtable_size_kb,
								256 * 1024, 1024, MAX_KILOBYTES,
								PGC_POSTMASTER,
								GUC_UNIT_KB,
								NULL, NULL, NULL);
		DefineCustomIntVariable("rollout_fdw.max_stores",
								"Stores (per shard) this cluster can write with group commit and memtable.",
								NULL,
								&rollout_max_stores,
								64, 1, 10000,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
		DefineCustomStringVariable("rollout_fdw.worker_databases",
								   "Databases whose rollout tables the background sweeper maintains.",
								   "A comma-separated list; one sweeper per database. Empty disables the sweeper.",
								   &rollout_worker_databases,
								   "postgres",
								   PGC_POSTMASTER,
								   0,
								   NULL, NULL, NULL);
		rollout_shared_init();
		rollout_sweeper_register();
	}
	DefineCustomIntVariable("rollout_fdw.flush_interval",
							"Seconds between the sweeper's flushes of a store; 0 disables them.",
							NULL,
							&rollout_flush_interval_s,
							30, 0, 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.merge_after_generations",
							"Pending generations of a shard at which the sweeper merges them; 0 disables merging.",
							"Read cost grows with pending generations, so they are kept bounded.",
							&rollout_merge_after_generations,
							8, 0, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.gc_interval",
							"Seconds between the sweeper's garbage collections of a store; 0 disables them.",
							NULL,
							&rollout_gc_interval_s,
							3600, 0, 7 * 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.gc_grace",
							"Grace period of the sweeper's garbage collection.",
							"Never shorter than rollout_fdw.min_gc_grace.",
							&rollout_gc_grace_s,
							3600, 0, 7 * 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("rollout_fdw");

	xact_buffer_init();
	rollout_store_cache_init();
}

/*
 * A path for a scratch file (a segment being built before upload).  The name
 * starts with PG_TEMP_FILE_PREFIX in the data directory's temporary folder, so
 * a crash leaves nothing that the next server start does not remove.
 */
char *
rollout_scratch_file_path(const char *purpose)
{
	static uint32 counter = 0;
	char	   *dir = psprintf("base/%s", PG_TEMP_FILES_DIR);

	if (MakePGDirectory(dir) < 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", dir)));
	return psprintf("%s/%s_rollout%d.%u.%s", dir, PG_TEMP_FILE_PREFIX,
					MyProcPid, counter++, purpose);
}
