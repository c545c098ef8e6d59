/*-------------------------------------------------------------------------
 *
 * subtransaction.h
 *		Running a step in an internal subtransaction, to learn of its error
 *		without losing the transaction (core/subtransaction.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SUBTRANSACTION_H
#define ROLLOUT_SUBTRANSACTION_H

/*
 * Run step(arg) in an internal subtransaction, in the caller's memory
 * context.  Returns NULL when it succeeded.  Otherwise the subtransaction
 * is rolled back and its error returned, copied into the caller's memory
 * context, for the caller to record, report or raise again (ReThrowError).
 * The caller's memory context and resource owner are restored either way.
 */
extern ErrorData *rollout_try_in_subtransaction(void (*step) (void *arg),
												void *arg);

#endif							/* ROLLOUT_SUBTRANSACTION_H */
