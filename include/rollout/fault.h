/*-------------------------------------------------------------------------
 *
 * fault.h
 *		Named fault points between the object-store writes of the
 *		maintenance protocols, for tests that interrupt each step.
 *
 * rollout_fdw.fail_at (superuser only) holds a comma-separated list of
 * "step:action", for example
 *		SET rollout_fdw.fail_at = 'merge.after_fragment_put:error';
 * where action is
 *		error		raise an ERROR at the step
 *		crash		kill this backend with SIGKILL (the postmaster then
 *					restarts or stops the cluster, as after a real crash)
 *		sleep=N		wait N seconds (interruptible), e.g. to hold a merge
 *					open while other sessions work
 * Every step's name is listed in docs/MAINTENANCE.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_FAULT_H
#define ROLLOUT_FAULT_H

/* Define rollout_fdw.fail_at (from _PG_init). */
extern void fault_define_settings(void);

/* Act on the step if rollout_fdw.fail_at names it. */
extern void rollout_fault_point(const char *step);

#endif							/* ROLLOUT_FAULT_H */
