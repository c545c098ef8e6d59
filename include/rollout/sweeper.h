/*-------------------------------------------------------------------------
 *
 * sweeper.h
 *		The background worker that flushes, merges and collects garbage.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SWEEPER_H
#define ROLLOUT_SWEEPER_H

/*
 * Define the sweeper's settings (from _PG_init); rollout_fdw.worker_databases
 * only while preloading.
 */
extern void sweeper_define_settings(void);

/* Register the sweepers (from _PG_init, while preloading). */
extern void rollout_sweeper_register(void);

#endif							/* ROLLOUT_SWEEPER_H */
