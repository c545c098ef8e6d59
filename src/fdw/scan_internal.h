/*-------------------------------------------------------------------------
 *
 * scan_internal.h
 *		What the scan's planning (scan_plan.c), execution (scan.c) and
 *		EXPLAIN (scan_explain.c) share; private to the fdw layer.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SCAN_INTERNAL_H
#define ROLLOUT_SCAN_INTERNAL_H

#include "commands/explain.h"
#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"

#include "rollout/fdw.h"
#include "rollout/footer_cache.h"
#include "rollout/read_cache.h"
#include "rollout/merge_read.h"

/*
 * A key condition: "key op value" with op of the key type's default btree
 * family.  In a plan it is (strategy, opfamily, lefttype, righttype), its
 * value expression the same-numbered member of fdw_exprs (scan_plan.c).
 */
typedef struct KeyQual
{
	int			strategy;		/* BTLessStrategyNumber ... */
	Oid			opfamily;
	Oid			lefttype;
	Oid			righttype;
	Expr	   *value;
} KeyQual;

/*
 * A condition pushed down into the merge read (scan_filter.c): at planning,
 * the clause's parts; at execution it becomes a RowCondition.
 */
typedef struct PushedCondition
{
	RowConditionKind kind;
	AttrNumber	attno;			/* of the scanned table's column */
	Oid			function;		/* the operator's function, or InvalidOid */
	Oid			collation;
	bool		column_on_left;
	bool		use_or;
	Expr	   *value;			/* value or array expression, or NULL */
	int			zone_strategy;	/* RowCondition.zone_strategy */
} PushedCondition;

/*
 * What a scan read, for EXPLAIN ANALYZE: the merge reads' statistics, the
 * requests to a remote store (and the sequential rounds they took), and the
 * footers and blocks looked up in the footer and disk caches.  Summed over
 * rescans, and in a parallel scan's leader over its workers.
 */
typedef struct ScanCounters
{
	MergeReadStats reads;
	int64		remote_requests;
	int64		remote_rounds;
	int64		remote_retries; /* of the requests, attempts after the first */
	int64		footer_cache_hits;
	int64		footer_cache_misses;
	int64		footer_cache_shared_hits;	/* of the misses, found in the
											 * shared cache */
	int64		disk_cache_hits;
	int64		disk_cache_misses;
} ScanCounters;

typedef struct ParallelScanShared ParallelScanShared;

/* Executor state of one scan. */
typedef struct RolloutScanState
{
	Relation	rel;
	RolloutStore *store;
	RolloutTableOptions *options;
	const char *as_of;			/* the named snapshot read, or NULL: now */
	int			natts;
	int		   *attr_to_column; /* per attno-1: segment column, or -1 */
	bool	   *want;			/* per segment column */
	List	   *key_quals;		/* KeyQual * (value unused) */
	List	   *pushed_conditions;	/* serialized PushedConditions */
	List	   *value_states;	/* ExprState * of fdw_exprs: the key
								 * conditions' values, then the pushed ones' */
	MemoryContext scan_context; /* lives across rescans */
	MemoryContext rescan_context;	/* key range and read: reset per rescan */
	MemoryContext row_context;	/* decoded values of the current row */
	EState	   *estate;
	RolloutSnapshot *snapshot;	/* what the read reads: the statement's or
								 * transaction's snapshot, plus own rows */
	bool		own_rows_taken; /* own_rows was looked for */
	bool		own_truncate;	/* the transaction truncated the table before
								 * this command */
	SnapshotSource *own_rows;	/* the transaction's own rows, or NULL */
	MergeRead  *read;
	Datum	   *values;
	bool	   *isnull;
	ScanCounters counters;

	/* where the process-wide counters stood when the current read began */
	ObjectStoreCounters counters_mark;
	FooterCacheCounters footer_mark;
	ReadCacheCounters disk_cache_mark;

	/*
	 * A parallel scan (scan_parallel.c): the state its participants share,
	 * NULL for a serial scan, and the key-space parts they take in turn.
	 */
	ParallelScanShared *parallel;
	bool		is_worker;
	Datum	   *part_boundaries;
	int			part_boundary_count;	/* parts - 1 */
	int			part;			/* the part being read */
	bool		parts_done;		/* no part left for this participant */
	int			part_count_shown;	/* the leader's parts, for EXPLAIN */
	StringInfo	parallel_bytes; /* the leader's, Estimate to Initialize */
	Size		parallel_snapshot_offset;	/* of the snapshot in them */
	bool		worker_reported;	/* a worker's counters are in shared */
} RolloutScanState;

/*
 * The plan's retrieved attribute numbers, key conditions and pushed
 * conditions (scan_plan.c).
 */
extern List *scan_plan_retrieved_attrs(ForeignScan *plan);
extern List *scan_plan_key_quals(ForeignScan *plan);
extern List *scan_plan_pushed_conditions(ForeignScan *plan);

/* Pushing down conditions (scan_filter.c). */
extern PushedCondition *scan_filter_classify(RestrictInfo *rinfo,
											 RelOptInfo *baserel, Oid relid);
extern List *scan_filter_serialize(PushedCondition *condition, List **fdw_exprs);
extern RowFilter *scan_filter_build(RolloutScanState *state,
									ExprContext *econtext);

/* Fold the open read's statistics into the totals and end it (scan.c). */
extern void rollout_scan_close_read(RolloutScanState *state);

/* The snapshot a scan reads, its own rows included (scan.c). */
extern RolloutSnapshot *rollout_scan_take_snapshot(RolloutScanState *state);

/* Add one scan's counters to another's (scan.c). */
extern void scan_counters_add(ScanCounters *into, const ScanCounters *add);

/*
 * A parallel scan (scan_parallel.c): claim the next part of the key space
 * for this participant and limit range to it; false when none is left.
 */
extern bool scan_parallel_next_part(RolloutScanState *state, KeyRange *range);
extern void scan_parallel_report(RolloutScanState *state);
extern void rollout_parallel_routines(FdwRoutine *routine);

/* ExplainForeignScan (scan_explain.c). */
extern void rollout_explain_foreign_scan(ForeignScanState *node,
										 ExplainState *es);

#endif							/* ROLLOUT_SCAN_INTERNAL_H */
