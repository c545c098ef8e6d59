/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		The shared-memory hooks: ask the postmaster for the space every
 *		module needs, and let each set its part up.
 *
 * As PostgreSQL's ipci.c does for the core modules, this file only adds up
 * the modules' sizes and calls their init functions, in one place; the
 * modules themselves (core/shared_store.c, core/memtable.c) own their
 * layouts.  Both hooks exist only when the library is preloaded.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "rollout/memtable.h"
#include "rollout/shared_footer_cache.h"
#include "rollout/shared_store.h"
#include "rollout/shmem.h"

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* The postmaster asks how much shared memory preloaded libraries need. */
static void
rollout_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(add_size(shared_store_shmem_size(),
											 memtable_shmem_size()),
									shared_footer_cache_shmem_size()));
}

/*
 * Every process (and the postmaster, first) creates or attaches the
 * modules' structures, under AddinShmemInitLock as ShmemInitStruct asks.
 */
static void
rollout_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared_store_shmem_init();
	memtable_shmem_init();
	shared_footer_cache_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

void
rollout_shmem_register(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = rollout_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = rollout_shmem_startup;
}
