/*-------------------------------------------------------------------------
 *
 * write_proof.h
 *		Confirming that a handle's credentials write the store a slot's
 *		writer claimed (core/write_proof.c).
 *
 * A slot serves the credentials of one store (shared_store.c).  Reading the
 * claim's fence marker shows that credentials can read that store, which is
 * all a reader needs; but a fence can be copied by whoever can read it, into
 * a bucket of their own that the same names reach.  Writing through the
 * slot (a commit, a flush, a claim) needs more: a probe written with the
 * handle's credentials and read back with those the claim was made with.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_WRITE_PROOF_H
#define ROLLOUT_WRITE_PROOF_H

#include "rollout/store.h"

/* Room a slot keeps for the access of its claim (location and options). */
#define WRITE_PROOF_ACCESS_LEN	8192

/*
 * Put what store's handle was opened with (its location, options and
 * whether it may use the server's environment credentials) into buffer of
 * size bytes; returns its length, or 0 (and buffer "") when it does not fit.
 * The result holds secrets: it is kept only in the slot's shared memory.
 */
extern Size write_proof_keep_access(RolloutStore *store, char *buffer,
									Size size);

/* What a proof found (write_proof_confirm). */
typedef enum WriteProof
{
	WRITE_PROOF_CONFIRMED,		/* the probe is where the claim reads */
	WRITE_PROOF_REFUTED,		/* it is not: another store */
	WRITE_PROOF_STALE			/* the claim's credentials are refused now
								 * (rotated, revoked, expired) */
} WriteProof;

/*
 * Whether store's credentials write into the store that access (of length
 * access_len, from write_proof_keep_access) reaches: a probe created with
 * store's credentials, read back through access, then deleted.  The claim's
 * fence at claim_position of store's shard tells a refused read of a probe
 * that is not there from refused credentials.  ERROR when access_len is 0
 * (nothing could be kept), or when a request fails for another reason than
 * the claim's credentials being refused.
 */
extern WriteProof write_proof_confirm(RolloutStore *store, const char *access,
									  Size access_len, int64 claim_position);

#endif							/* ROLLOUT_WRITE_PROOF_H */
