/*-------------------------------------------------------------------------
 *
 * sweeper.h
 *		The background worker that flushes, merges and collects garbage.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SWEEPER_H
#define ROLLOUT_SWEEPER_H

extern int	rollout_flush_interval_s;
extern int	rollout_merge_after_generations;
extern int	rollout_gc_interval_s;
extern int	rollout_gc_grace_s;
extern char *rollout_worker_databases;

/* Register the sweepers (from _PG_init, while preloading). */
extern void rollout_sweeper_register(void);

#endif							/* ROLLOUT_SWEEPER_H */
