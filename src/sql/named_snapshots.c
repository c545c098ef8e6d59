/*-------------------------------------------------------------------------
 *
 * named_snapshots.c
 *		SQL-callable named snapshots: rollout_snapshot, rollout_retain,
 *		rollout_release, rollout_retained (core/named_snapshot.c).
 *
 * Taking, retaining and releasing a snapshot write to the store (a flush, a
 * retention object) with the owner's credentials and hold back garbage
 * collection, so they ask for what maintenance asks: ownership of the table
 * or membership in its owner.  Listing the retentions asks for SELECT.
 * Reading a snapshot is a scan (rollout_fdw.as_of or the table option
 * as_of) and asks for SELECT like any other.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "rollout/fdw.h"
#include "rollout/flush.h"
#include "rollout/named_snapshot.h"
#include "rollout/shard.h"
#include "rollout/sql_common.h"

PG_FUNCTION_INFO_V1(rollout_snapshot);
PG_FUNCTION_INFO_V1(rollout_retain);
PG_FUNCTION_INFO_V1(rollout_release);
PG_FUNCTION_INFO_V1(rollout_retained);

/* ERROR unless until is a finite time after now */
static void
check_until(TimestampTz until, const char *function)
{
	if (TIMESTAMP_NOT_FINITE(until) || until <= GetCurrentTimestamp())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: the time to retain until must be a finite time in the future",
						function)));
}

/*
 * rollout_snapshot(tbl regclass, retain_until timestamptz DEFAULT NULL)
 * returns text
 *
 * A token for the table's store as it is now: this cluster's shard is
 * flushed first, so the token holds every row this cluster committed before
 * the call.  Not on a standby (reading a token there is fine).  With
 * retain_until, the token is retained until then at once, while gc still
 * keeps its manifest versions for their grace.
 */
Datum
rollout_snapshot(PG_FUNCTION_ARGS)
{
	Relation	rel = rollout_open_table_argument(fcinfo, "rollout_snapshot",
												  ROLLOUT_ACCESS_MAINTAIN);
	RolloutStore *store = rollout_store_for_reading(rel, rel->rd_rel->relowner);
	char	   *token;

	if (!PG_ARGISNULL(1))
		check_until(PG_GETARG_TIMESTAMPTZ(1), "rollout_snapshot");

	/*
	 * A standby can flush nothing, so its token would miss what the primary
	 * committed and has not flushed yet, although the standby reads it.
	 */
	rollout_check_writable(store, "take a named snapshot of");
	(void) rollout_flush_shard(store);
	token = named_snapshot_take(store);
	if (!PG_ARGISNULL(1))
		named_snapshot_retain(store, token, PG_GETARG_TIMESTAMPTZ(1), true);
	table_close(rel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(token));
}

/*
 * rollout_retain(tbl regclass, token text, until timestamptz) returns void
 *
 * Keep what the token's snapshot reads from gc until then.
 */
Datum
rollout_retain(PG_FUNCTION_ARGS)
{
	Relation	rel;
	char	   *token;
	TimestampTz until;

	rollout_require_argument(fcinfo, 1, "rollout_retain", "token");
	rollout_require_argument(fcinfo, 2, "rollout_retain", "until");
	token = text_to_cstring(PG_GETARG_TEXT_PP(1));
	until = PG_GETARG_TIMESTAMPTZ(2);
	check_until(until, "rollout_retain");
	rel = rollout_open_table_argument(fcinfo, "rollout_retain",
									  ROLLOUT_ACCESS_MAINTAIN);
	named_snapshot_retain(rollout_store_for_reading(rel, rel->rd_rel->relowner), token, until,
						  false);
	table_close(rel, AccessShareLock);
	PG_RETURN_VOID();
}

/*
 * rollout_release(tbl regclass, token text) returns int
 *
 * Remove every retention of the token: how many there were.  gc may then
 * collect what only the token's snapshot read.
 */
Datum
rollout_release(PG_FUNCTION_ARGS)
{
	Relation	rel;
	char	   *token;
	int			released;

	rollout_require_argument(fcinfo, 1, "rollout_release", "token");
	token = text_to_cstring(PG_GETARG_TEXT_PP(1));
	rel = rollout_open_table_argument(fcinfo, "rollout_release",
									  ROLLOUT_ACCESS_MAINTAIN);
	released = named_snapshot_release(rollout_store_for_reading(rel, rel->rd_rel->relowner),
									  token);
	table_close(rel, AccessShareLock);
	PG_RETURN_INT32(released);
}

/*
 * rollout_retained(tbl regclass) returns setof (token text, until
 * timestamptz, expired boolean)
 *
 * The retentions of the table's store; an expired one (its token not read)
 * shows a NULL token until gc deletes it.
 */
Datum
rollout_retained(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	rel = rollout_open_table_argument(fcinfo, "rollout_retained",
												  ROLLOUT_ACCESS_READ);
	TimestampTz now = GetCurrentTimestamp();
	List	   *retentions;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	retentions = named_snapshot_retentions(rollout_store_for_reading(rel, GetUserId()), now);
	foreach(lc, retentions)
	{
		RetainedSnapshot *retained = lfirst(lc);
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = retained->token ? CStringGetTextDatum(retained->token) : (Datum) 0;
		nulls[0] = retained->token == NULL;
		values[1] = TimestampTzGetDatum(retained->until);
		values[2] = BoolGetDatum(retained->until <= now);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}
