/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		rollout_fdw's shared memory: requested and set up for every module
 *		that keeps state there (worker/shmem.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SHMEM_H
#define ROLLOUT_SHMEM_H

/* Install the shmem request and startup hooks (from _PG_init, preloading). */
extern void rollout_shmem_register(void);

#endif							/* ROLLOUT_SHMEM_H */
