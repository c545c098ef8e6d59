/*-------------------------------------------------------------------------
 *
 * handler.c
 *		The foreign-data wrapper handler: assembles the callback groups of
 *		scan_plan.c, scan.c and modify.c into one FdwRoutine.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "nodes/nodes.h"

#include "rollout/fdw.h"

PG_FUNCTION_INFO_V1(rollout_fdw_handler);

Datum
rollout_fdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *routine = makeNode(FdwRoutine);

	rollout_plan_routines(routine);
	rollout_scan_routines(routine);
	rollout_modify_routines(routine);
	PG_RETURN_POINTER(routine);
}
