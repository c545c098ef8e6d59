/*-------------------------------------------------------------------------
 *
 * subtransaction.c
 *		Running a step in an internal subtransaction.
 *
 * Where a failure must be recorded somewhere that outlives it (a
 * compaction's error in the base manifest) or must not end a larger
 * operation (one store of a listing), the step runs in a subtransaction:
 * its error rolls back only what the step did, and the caller decides what
 * becomes of it.  This is the pattern of PL/pgSQL's exception blocks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/resowner.h"

#include "rollout/subtransaction.h"

ErrorData *
rollout_try_in_subtransaction(void (*step) (void *arg), void *arg)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile error = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		step(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcontext);
		error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcontext);
	CurrentResourceOwner = oldowner;
	return error;
}
