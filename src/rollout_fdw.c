/*-------------------------------------------------------------------------
 *
 * rollout_fdw.c
 *		Module entry point: every module defines its settings, then the
 *		callbacks and hooks are registered.
 *
 * The extension works without shared_preload_libraries: then only the
 * settings that size shared memory, and the shared-memory writer and the
 * sweepers themselves, are missing, and every commit takes the direct path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "rollout/commit.h"
#include "rollout/fault.h"
#include "rollout/fdw.h"
#include "rollout/flush.h"
#include "rollout/footer_cache.h"
#include "rollout/grace.h"
#include "rollout/manifest_view.h"
#include "rollout/group_commit.h"
#include "rollout/memtable.h"
#include "rollout/merge.h"
#include "rollout/named_snapshot.h"
#include "rollout/objstore.h"
#include "rollout/read_cache.h"
#include "rollout/row_source.h"
#include "rollout/scan_snapshot.h"
#include "rollout/shard.h"
#include "rollout/shared_footer_cache.h"
#include "rollout/shared_store.h"
#include "rollout/shmem.h"
#include "rollout/store_definition.h"
#include "rollout/sweeper.h"
#include "rollout/wal.h"
#include "rollout/xact_buffer.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Module load: define every module's settings, then register the rest. */
void
_PG_init(void)
{
	/* settings, from the bottom layer up */
	objstore_define_settings();
	read_cache_define_settings();
	fault_define_settings();
	store_define_settings();
	footer_cache_define_settings();
	row_source_define_settings();
	scan_filter_define_settings();
	shard_define_settings();
	manifest_view_define_settings();
	named_snapshot_define_settings();
	wal_define_settings();
	commit_define_settings();
	group_commit_define_settings();
	merge_define_settings();
	flush_define_settings();
	grace_define_settings();
	sweeper_define_settings();
	xact_buffer_define_settings();

	/*
	 * The shared-memory writer exists only when the library is preloaded: its
	 * settings size shared memory, and defining a PGC_POSTMASTER setting
	 * later would be fatal.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		memtable_define_settings();
		shared_store_define_settings();
		shared_footer_cache_define_settings();
		rollout_shmem_register();
		rollout_sweeper_register();
	}

	/*
	 * Only after every setting is defined: this drops the placeholders of
	 * names still undefined, so a value set before the library was loaded
	 * (SET, ALTER ROLE ... SET, postgresql.conf) would be lost for a setting
	 * defined later.
	 */
	MarkGUCPrefixReserved("rollout_fdw");

	xact_buffer_init();
	rollout_store_cache_init();

	/*
	 * Transaction callbacks run newest first: the statement snapshots give
	 * their pins back before the transaction buffer makes its rows durable,
	 * so that a failure there still aborts the transaction.
	 */
	rollout_scan_snapshot_init();
}
