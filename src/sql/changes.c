/*-------------------------------------------------------------------------
 *
 * changes.c
 *		rollout_changes: a rollout table's change feed in SQL
 *		(lsm/change_feed.c).
 *
 * Each change is returned with its shard, its commit stamp, what happened
 * ('upsert', 'delete' or 'truncate'), the key as text, the row as jsonb
 * (to_jsonb of the table's row type, so that every type prints as it would
 * in the table) and the position to pass next time, the same on every row
 * of a call.  Rows come in stamp order (commit order within each shard, the
 * shards' stamps interleaved), the changes of one stamp in key order.  A
 * call that delivers nothing returns no row, or, when its position moved on
 * all the same, one 'position' row that carries only next_since.  Reading
 * the feed reads the table: it asks for SELECT on it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/params.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "rollout/change_feed.h"
#include "rollout/fdw.h"
#include "rollout/portable_values.h"
#include "rollout/shard.h"
#include "rollout/sql_common.h"
#include "rollout/store_definition.h"

PG_FUNCTION_INFO_V1(rollout_changes);

#define CHANGES_COLUMNS 6

/*
 * Not a change: the row a call returns when it delivered nothing but moved
 * the position on (past entries that held nothing to deliver, or from a
 * snapshot token or NULL to a "cf1:" position), so that the consumer can
 * keep the newer one.  Its columns are NULL but op and next_since.
 */
#define CHANGES_OP_POSITION (-1)

/* One change, until the rows are sorted. */
typedef struct Change
{
	int64		stamp;
	int			shard;			/* index in state->shards; -1 TRUNCATE */
	int64		shard_hash;		/* the tie-break of equal stamps, as in a
								 * scan: the higher hash is the newer */
	int64		sequence;		/* emission order: key order within a shard */
	text	   *key;			/* NULL for a TRUNCATE */
	Datum		row;			/* jsonb */
	int16		op;
} Change;

/* What the emit callback needs. */
typedef struct ChangesState
{
	RolloutStore *store;
	TupleDesc	tupdesc;		/* of the table */
	int		   *attr_to_column; /* table attribute -> segment schema column */
	Datum	   *attr_values;
	bool	   *attr_isnull;
	FmgrInfo	key_output;
	ParamListInfo params;		/* $1: the row, for to_jsonb($1) */
	ExprState  *to_jsonb;
	ExprContext *econtext;
	List	   *shards;			/* char *, in order of first appearance */
	Change	   *changes;
	int64		count;
	int64		allocated;
} ChangesState;

/* to_jsonb($1), $1 of the table's row type. */
static void
changes_prepare_to_jsonb(ChangesState *state, Oid rowtype)
{
	Param	   *param = makeNode(Param);
	FuncExpr   *expr;

	param->paramkind = PARAM_EXTERN;
	param->paramid = 1;
	param->paramtype = rowtype;
	param->paramtypmod = -1;
	param->paramcollid = InvalidOid;
	param->location = -1;
	expr = makeFuncExpr(F_TO_JSONB, JSONBOID, list_make1(param), InvalidOid,
						InvalidOid, COERCE_EXPLICIT_CALL);
	state->params = makeParamList(1);
	state->params->numParams = 1;
	state->params->params[0].ptype = rowtype;
	state->params->params[0].pflags = PARAM_FLAG_CONST;
	state->to_jsonb = ExecInitExprWithParams((Expr *) expr, state->params);
	state->econtext = CreateStandaloneExprContext();
	state->econtext->ecxt_param_list_info = state->params;
}

/* The index of shard in state->shards, added when new. */
static int
changes_shard_index(ChangesState *state, const char *shard)
{
	ListCell   *lc;

	foreach(lc, state->shards)
		if (strcmp(lfirst(lc), shard) == 0)
		return foreach_current_index(lc);
	state->shards = lappend(state->shards, pstrdup(shard));
	return list_length(state->shards) - 1;
}

/* ChangeFeedEmit: keep the change, its row made jsonb. */
static void
changes_emit(void *arg, const ChangeFeedRow *row)
{
	ChangesState *state = arg;
	RolloutStore *store = state->store;
	Change	   *change;
	MemoryContext oldcontext;
	char	   *key = NULL;
	Datum		jsonb = (Datum) 0;

	if (state->count == state->allocated)
	{
		state->allocated = Max(state->allocated * 2, 64);
		state->changes = state->changes == NULL ?
			palloc(sizeof(Change) * state->allocated) :
			repalloc_huge(state->changes, sizeof(Change) * state->allocated);
	}
	change = &state->changes[state->count];
	memset(change, 0, sizeof(Change));
	change->stamp = row->stamp;
	change->op = row->op;
	change->sequence = state->count++;
	change->shard = row->shard == NULL ? -1 : changes_shard_index(state, row->shard);
	change->shard_hash = row->shard == NULL ? PG_INT64_MIN : rollout_shard_hash(row->shard);
	if (row->op == ROLLOUT_OP_TRUNCATE || row->op == CHANGES_OP_POSITION)
		return;

	/*
	 * Decoding, the key's output and the row's jsonb make garbage in the
	 * per-row memory; only the key's text and the jsonb are kept.
	 */
	oldcontext = MemoryContextSwitchTo(state->econtext->ecxt_per_tuple_memory);
	for (int i = 0; i < state->tupdesc->natts; i++)
	{
		int			column = state->attr_to_column[i];

		state->attr_isnull[i] = column < 0 || row->isnull[column];
		state->attr_values[i] = (Datum) 0;
		if (state->attr_isnull[i])
			continue;
		state->attr_values[i] = row->values[column];
		if (store->codecs != NULL && column < store->user_column_count &&
			store->codecs[column].encoding == PORTABLE_TEXT)
			state->attr_values[i] = portable_decode(&store->codecs[column],
													state->attr_values[i]);
		if (column == store->key_column)
			key = OutputFunctionCall(&state->key_output, state->attr_values[i]);
	}
	if (row->op == ROLLOUT_OP_INSERT)
	{
		HeapTuple	tuple = heap_form_tuple(state->tupdesc, state->attr_values,
											state->attr_isnull);
		bool		isnull;

		state->params->params[0].value = HeapTupleGetDatum(tuple);
		state->params->params[0].isnull = false;
		jsonb = ExecEvalExpr(state->to_jsonb, state->econtext, &isnull);
	}
	MemoryContextSwitchTo(oldcontext);
	if (key != NULL)
		change->key = cstring_to_text(key);
	if (jsonb != (Datum) 0)
		change->row = PointerGetDatum(PG_DETOAST_DATUM_COPY(jsonb));
	ResetExprContext(state->econtext);
}

static int
changes_cmp(const void *a, const void *b)
{
	const Change *x = a;
	const Change *y = b;

	if (x->stamp != y->stamp)
		return x->stamp < y->stamp ? -1 : 1;
	if (x->shard_hash != y->shard_hash)
		return x->shard_hash < y->shard_hash ? -1 : 1;
	return x->sequence < y->sequence ? -1 : x->sequence > y->sequence;
}

static const char *
changes_op_name(int16 op)
{
	switch (op)
	{
		case ROLLOUT_OP_INSERT:
			return "upsert";
		case ROLLOUT_OP_DELETE:
			return "delete";
		case CHANGES_OP_POSITION:
			return "position";
		default:
			return "truncate";
	}
}

/*
 * rollout_changes(tbl regclass, since text DEFAULT NULL,
 *				   max_rows int DEFAULT 10000)
 * returns setof (shard text, stamp timestamptz, op text, key text,
 *				  row jsonb, next_since text)
 */
Datum
rollout_changes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	rel;
	RolloutStore *store;
	ChangesState state = {0};
	ChangeFeedPosition *since;
	ChangeFeedPosition *after;
	bool	   *want;
	int32		max_rows = PG_ARGISNULL(2) ? 10000 : PG_GETARG_INT32(2);
	Oid			key_output;
	bool		key_varlena;
	char	   *since_text;
	char	   *next_since = NULL;
	Datum		next_since_datum;

	if (max_rows < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rollout_changes: max_rows must be at least 1")));

	/*
	 * A table pinned to a named snapshot may be what a role was granted in
	 * place of the store as it is: its feed would show rows its scans never
	 * do.
	 */
	rel = rollout_open_table_argument(fcinfo, "rollout_changes",
									  ROLLOUT_ACCESS_READ);
	store = rollout_store_for_reading(rel, GetUserId());
	since_text = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	since = change_feed_position_parse(store, since_text);

	/* every stored column of the table, mapped to its attribute */
	state.store = store;
	state.tupdesc = RelationGetDescr(rel);
	state.attr_to_column = palloc(sizeof(int) * Max(state.tupdesc->natts, 1));
	state.attr_values = palloc0(sizeof(Datum) * Max(state.tupdesc->natts, 1));
	state.attr_isnull = palloc0(sizeof(bool) * Max(state.tupdesc->natts, 1));
	want = palloc0(sizeof(bool) * store->schema.ncolumns);
	for (int i = 0; i < state.tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(state.tupdesc, i);
		int			column = attr->attisdropped ? -1 :
		rollout_store_column_index(store, NameStr(attr->attname));

		state.attr_to_column[i] = column;
		if (column >= 0)
			want[column] = true;
		if (column == store->key_column)
		{
			getTypeOutputInfo(attr->atttypid, &key_output, &key_varlena);
			fmgr_info(key_output, &state.key_output);
		}
	}
	changes_prepare_to_jsonb(&state, RelationGetForm(rel)->reltype);

	after = change_feed_read(store, since, max_rows, want, changes_emit, &state);
	if (after->incarnation != NULL)
		next_since = change_feed_position_text(after);
	if (state.count == 0 && next_since != NULL &&
		(since_text == NULL || strcmp(since_text, next_since) != 0))
	{
		ChangeFeedRow position = {NULL, 0, CHANGES_OP_POSITION, NULL, NULL};

		changes_emit(&state, &position);
	}

	InitMaterializedSRF(fcinfo, 0);
	next_since_datum = next_since ? CStringGetTextDatum(next_since) : (Datum) 0;
	if (state.count > 0)
		qsort(state.changes, state.count, sizeof(Change), changes_cmp);
	for (int64 i = 0; i < state.count; i++)
	{
		Change	   *change = &state.changes[i];
		Datum		values[CHANGES_COLUMNS];
		bool		nulls[CHANGES_COLUMNS] = {false};

		nulls[0] = change->shard < 0;
		values[0] = nulls[0] ? (Datum) 0 :
			CStringGetTextDatum(list_nth(state.shards, change->shard));
		nulls[1] = change->op == CHANGES_OP_POSITION;
		values[1] = TimestampTzGetDatum(change->stamp);
		values[2] = CStringGetTextDatum(changes_op_name(change->op));
		nulls[3] = change->key == NULL;
		values[3] = PointerGetDatum(change->key);
		nulls[4] = change->op != ROLLOUT_OP_INSERT;
		values[4] = change->row;
		values[5] = next_since_datum;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	FreeExprContext(state.econtext, true);
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}
