/*-------------------------------------------------------------------------
 *
 * sql_common.h
 *		Argument checks shared by the SQL-callable functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SQL_COMMON_H
#define ROLLOUT_SQL_COMMON_H

#include "fmgr.h"
#include "utils/relcache.h"

/* What the caller must hold on the table. */
typedef enum RolloutTableAccess
{
	ROLLOUT_ACCESS_READ,		/* SELECT privilege, and not a table pinned to
								 * a named snapshot (option as_of): what these
								 * functions show is the store as it is now,
								 * and such a table may be what a role was
								 * granted instead of it */
	ROLLOUT_ACCESS_MAINTAIN		/* ownership, or membership in the owner */
} RolloutTableAccess;

/*
 * Open argument 0 (a regclass) as a rollout table, checking that it is not
 * NULL, is a rollout foreign table, and that the caller has the access.
 */
extern Relation rollout_open_table_argument(FunctionCallInfo fcinfo,
											const char *function,
											RolloutTableAccess access);

/* ERROR naming the function and argument when argument n is NULL. */
extern void rollout_require_argument(FunctionCallInfo fcinfo, int n,
									 const char *function, const char *name);

/* The composite result row of a function declared with OUT arguments. */
extern Datum rollout_sql_result_row(FunctionCallInfo fcinfo, Datum *values,
									bool *nulls);

#endif							/* ROLLOUT_SQL_COMMON_H */
