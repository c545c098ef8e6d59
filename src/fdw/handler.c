/*-------------------------------------------------------------------------
 *
 * handler.c
 *		The foreign-data wrapper handler: assembles the callback groups of
 *		scan_plan.c, analyze.c, import.c, scan.c and modify.c into one
 *		FdwRoutine.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "nodes/nodes.h"

#include "rollout/fdw.h"

PG_FUNCTION_INFO_V1(rollout_fdw_handler);

/*
 * Foreign-data wrapper handler function: returns the FdwRoutine of rollout
 * tables.  Each part fills in its own callbacks (planning in scan_plan.c,
 * ANALYZE in analyze.c, IMPORT FOREIGN SCHEMA in import.c, scan execution in
 * scan.c, INSERT, UPDATE, DELETE and TRUNCATE in modify.c); those left
 * NULL make the core code refuse the operation.
 */
Datum
rollout_fdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *routine = makeNode(FdwRoutine);

	rollout_plan_routines(routine);
	rollout_analyze_routines(routine);
	rollout_import_routines(routine);
	rollout_scan_routines(routine);
	rollout_modify_routines(routine);
	PG_RETURN_POINTER(routine);
}
