/*-------------------------------------------------------------------------
 *
 * scan_plan.c
 *		Planning a scan of a rollout table: the columns it reads, the key
 *		conditions it may skip data with, its estimates.
 *
 * A scan runs the deduplicating merge read over a snapshot of the store
 * (scan.c).  What the planner can push down:
 *
 *	- projection: only the columns the query uses are decoded (plus the key
 *	  and the hidden version columns the merge needs);
 *	- key conditions: "key op value" where op belongs to the key type's
 *	  default btree family and value does not depend on the scanned row.
 *	  They become a key range that skips objects and row groups.  Because the
 *	  store is sorted in a collation-independent order (byte order for
 *	  text), a range condition is used only when its collation is "C" (or
 *	  the type has none), and an equality only under a deterministic
 *	  collation, where equal means byte-equal.  Every condition is still
 *	  rechecked by the executor, so skipping never decides what matches;
 *	- other simple conditions, on any column (scan_filter.c): the merge read
 *	  checks them on each key's winning version before decoding the rest of
 *	  its row.  They too stay in the executor's qual.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_statistic.h"
#include "nodes/makefuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"


#include "scan_internal.h"

/* rows of a row group a lookup looks at per source, for its cost */
#define ROLLOUT_LOOKUP_ROWS		64

/* Index of items in a ForeignScan's fdw_private list. */
enum RolloutScanPrivate
{
	ScanPrivateRetrievedAttrs,	/* Integer list of attnos the query uses */
	ScanPrivateKeyQuals,		/* list of KeyQual descriptions, see below */
	ScanPrivatePushedConditions /* list of serialized PushedConditions */
};

/* Planner state of one rollout relation. */
typedef struct RolloutPlanState
{
	RolloutTableOptions *options;
	AttrNumber	key_attno;
	List	   *key_quals;		/* KeyQual * */
	List	   *pushed_conditions;	/* PushedCondition *, none a key qual */
	List	   *key_clauses;	/* the RestrictInfos of key_quals */
	bool		has_key_equality;
	Oid			key_type;		/* InvalidOid without a key column */
	Oid			key_opfamily;	/* its default btree family, or InvalidOid */
	StoreEstimate estimate;
} RolloutPlanState;

/*
 * Is node baserel's key column itself (not a Var of an outer query level),
 * possibly under binary-compatible relabelings, as when a varchar key is
 * compared with a text operator?
 */
static bool
is_key_var(Node *node, RelOptInfo *baserel, AttrNumber key_attno)
{
	while (node && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return node && IsA(node, Var) &&
		(Index) ((Var *) node)->varno == baserel->relid &&
		((Var *) node)->varattno == key_attno &&
		((Var *) node)->varlevelsup == 0;
}

/*
 * Recognise "key op value" (or "value op key") as a key condition the scan
 * may use to skip data, under the collation rules in the file header.  The
 * value may use other relations' columns (a join clause of a parameterized
 * path, a lateral reference): the planner turns those into parameters,
 * fixed for each rescan.
 */
static KeyQual *
classify_key_qual(PlannerInfo *root, Expr *clause, RelOptInfo *baserel,
				  AttrNumber key_attno, Oid key_type, Oid key_opfamily)
{
	OpExpr	   *op;
	Node	   *left;
	Node	   *right;
	Node	   *value;
	bool		commuted;
	int			strategy;
	Oid			lefttype;
	Oid			righttype;
	KeyQual    *qual;

	if (!IsA(clause, OpExpr))
		return NULL;
	op = (OpExpr *) clause;
	if (list_length(op->args) != 2)
		return NULL;
	left = linitial(op->args);
	right = lsecond(op->args);
	if (is_key_var(left, baserel, key_attno))
	{
		value = right;
		commuted = false;
	}
	else if (is_key_var(right, baserel, key_attno))
	{
		value = left;
		commuted = true;
	}
	else
		return NULL;

	/* the value must be fixed for the whole scan (or rescan) */
	if (bms_is_member(baserel->relid, pull_varnos(root, value)) ||
		contain_volatile_functions(value))
		return NULL;
	if (!op_in_opfamily(op->opno, key_opfamily))
		return NULL;
	get_op_opfamily_properties(op->opno, key_opfamily, false,
							   &strategy, &lefttype, &righttype);
	if (commuted)
	{
		Oid			tmp = lefttype;

		lefttype = righttype;
		righttype = tmp;
		strategy = BTCommuteStrategyNumber(strategy);
	}
	if (lefttype != key_type && !IsBinaryCoercible(key_type, lefttype))
		return NULL;
	if (!OidIsValid(get_opfamily_proc(key_opfamily, lefttype, righttype,
									  BTORDER_PROC)))
		return NULL;

	if (type_is_collatable(key_type))
	{
		Oid			collation = op->inputcollid;

		if (!OidIsValid(collation))
			return NULL;
		if (strategy == BTEqualStrategyNumber)
		{
			if (!get_collation_isdeterministic(collation))
				return NULL;
		}
		else if (!lc_collate_is_c(collation))
			return NULL;
	}

	qual = palloc0(sizeof(KeyQual));
	qual->strategy = strategy;
	qual->opfamily = key_opfamily;
	qual->lefttype = lefttype;
	qual->righttype = righttype;
	qual->value = (Expr *) value;
	return qual;
}

/*
 * The store's row count for baserel, opened with the credentials its scan
 * will use (the checkAsUser of a view's owner, else the current user), of
 * the named snapshot the scan reads if any.  This reads metadata, never data; plain EXPLAIN does so too, which is what
 * makes its estimates worth reading.
 */
static StoreEstimate
rollout_plan_estimate(RelOptInfo *baserel, Oid foreigntableid,
					  RolloutTableOptions *options)
{
	Oid			userid = OidIsValid(baserel->userid) ? baserel->userid : GetUserId();
	Relation	rel;
	RolloutStore *store;
	const char *as_of;
	StoreEstimate unknown = {ROLLOUT_UNKNOWN_ROWS, 1, -1, 0, 0};

	/*
	 * A role that may not read the table gets no request sent on its behalf:
	 * its query fails the permission check before it runs.
	 */
	if (pg_class_aclcheck(foreigntableid, userid, ACL_SELECT) != ACLCHECK_OK)
		return unknown;
	rel = table_open(foreigntableid, NoLock);
	store = rollout_store_for_reading(rel, userid);
	table_close(rel, NoLock);
	as_of = rollout_table_as_of(options, store);
	if (as_of != NULL && options->as_of == NULL)
		rollout_check_as_of_privilege(foreigntableid, NULL,
									  baserel->reloptkind == RELOPT_OTHER_MEMBER_REL);
	return scan_estimate_get_as_of(store, options->read_wal_tail, as_of);
}

/*
 * GetForeignRelSize: find the key conditions among the restriction clauses and
 * estimate the rows.  The plan state (options, key column, key conditions) is
 * kept in baserel->fdw_private for GetForeignPaths and GetForeignPlan.  A key
 * column that is missing or whose type has no default btree family just gives
 * no key conditions.
 */
static void
rollout_get_foreign_rel_size(PlannerInfo *root, RelOptInfo *baserel,
							 Oid foreigntableid)
{
	RolloutPlanState *state = palloc0(sizeof(RolloutPlanState));
	Oid			key_type = InvalidOid;
	Oid			key_opfamily;
	ListCell   *lc;
	bool		has_equality = false;

	state->options = rollout_table_options(foreigntableid);
	state->key_attno = get_attnum(foreigntableid, state->options->key_column);
	baserel->fdw_private = state;
	state->estimate = rollout_plan_estimate(baserel, foreigntableid,
											state->options);

	key_opfamily = InvalidOid;
	if (state->key_attno != InvalidAttrNumber)
	{
		key_type = get_atttype(foreigntableid, state->key_attno);
		key_opfamily = lookup_type_cache(key_type, TYPECACHE_BTREE_OPFAMILY)->btree_opf;
	}
	state->key_type = key_type;
	state->key_opfamily = key_opfamily;
	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *rinfo = lfirst(lc);
		KeyQual    *qual = NULL;
		PushedCondition *condition;

		if (OidIsValid(key_opfamily))
			qual = classify_key_qual(root, rinfo->clause, baserel, state->key_attno,
									 key_type, key_opfamily);
		if (qual != NULL)
		{
			state->key_quals = lappend(state->key_quals, qual);
			state->key_clauses = lappend(state->key_clauses, rinfo);
			if (qual->strategy == BTEqualStrategyNumber)
				has_equality = true;
			continue;
		}
		condition = scan_filter_classify(rinfo, baserel, foreigntableid);
		if (condition != NULL)
			state->pushed_conditions = lappend(state->pushed_conditions,
											   condition);
	}

	/*
	 * The rows are the store's count from metadata (scan_estimate.c), the
	 * selectivity the conditions' (from ANALYZE's statistics when there are
	 * any); a key equality returns at most one row, since the scan
	 * deduplicates by key.
	 */
	state->has_key_equality = has_equality;
	baserel->tuples = Max(state->estimate.rows, 1);
	baserel->rows = has_equality ? 1 :
		clamp_row_est(baserel->tuples *
					  clauselist_selectivity(root, baserel->baserestrictinfo,
											 0, JOIN_INNER, NULL));
}

/*
 * The pathkeys of the merged read's output, or NIL.  The read emits rows in
 * ascending key order by the key type's default btree comparison, under the
 * "C" collation for a collatable type (segment.h).  That is the order of
 * the key column's own ORDER BY only when the type is not collatable or the
 * column's collation is "C"; otherwise (text under en_US, say) nothing is
 * claimed and the planner sorts.  Only a pathkey the query already has an
 * equivalence class for (ORDER BY, a merge join) is built, so claiming the
 * order never changes a plan that does not use it.
 */
static List *
rollout_key_pathkeys(PlannerInfo *root, RelOptInfo *baserel,
					 Oid foreigntableid, AttrNumber key_attno)
{
	Oid			key_type;
	int32		typmod;
	Oid			collation;
	TypeCacheEntry *typentry;
	Var		   *var;

	if (key_attno == InvalidAttrNumber)
		return NIL;
	get_atttypetypmodcoll(foreigntableid, key_attno, &key_type, &typmod,
						  &collation);
	if (type_is_collatable(key_type) &&
		(!OidIsValid(collation) || !lc_collate_is_c(collation)))
		return NIL;
	typentry = lookup_type_cache(key_type, TYPECACHE_LT_OPR | TYPECACHE_CMP_PROC);
	if (!OidIsValid(typentry->lt_opr) || !OidIsValid(typentry->cmp_proc))
		return NIL;

	var = makeVar(baserel->relid, key_attno, key_type, typmod, collation, 0);
	return build_expression_pathkey(root, (Expr *) var, NULL,
									typentry->lt_opr, baserel->relids, false);
}

/*
 * Add a path that is not parallel-aware, and so must not run in a parallel
 * worker: there it would take a snapshot of its own, not the leader's, and
 * miss the rows the transaction wrote (scan_parallel.c).
 */
static void
add_serial_path(RelOptInfo *baserel, ForeignPath *path)
{
	path->path.parallel_safe = false;
	add_path(baserel, (Path *) path);
}

/*
 * The cost of one key lookup: opening each source (a cached footer, its key
 * filter asked) and a binary search in one row group's keys, then one
 * page of each column for the row found.
 */
static Cost
rollout_lookup_cost(RolloutPlanState *state)
{
	return 10 + Max(state->estimate.sources, 1) *
		(seq_page_cost + ROLLOUT_LOOKUP_ROWS * cpu_tuple_cost);
}

/* generate_implied_equalities_for_column's test: the key column's classes */
typedef struct KeyClassSearch
{
	AttrNumber	key_attno;
	List	   *already_used;	/* EquivalenceClass * tried before */
	EquivalenceClass *current;
} KeyClassSearch;

static bool
key_class_member(PlannerInfo *root, RelOptInfo *rel, EquivalenceClass *ec,
				 EquivalenceMember *em, void *arg)
{
	KeyClassSearch *search = arg;

	if (!is_key_var((Node *) em->em_expr, rel, search->key_attno) ||
		list_member_ptr(search->already_used, ec))
		return false;
	if (search->current == NULL)
		search->current = ec;
	return search->current == ec;
}

/*
 * The join clauses "key = expression of other relations" that could make
 * this scan a key lookup per outer row: those written as such (joininfo)
 * and those the equivalence classes of the key column imply (a.id = b.id),
 * found one class at a time as postgres_fdw does.
 */
static List *
rollout_key_join_clauses(PlannerInfo *root, RelOptInfo *baserel,
						 RolloutPlanState *state)
{
	List	   *candidates = list_copy(baserel->joininfo);
	List	   *clauses = NIL;
	ListCell   *lc;

	if (baserel->has_eclass_joins)
	{
		KeyClassSearch search = {state->key_attno, NIL, NULL};

		for (;;)
		{
			List	   *implied;

			search.current = NULL;
			implied = generate_implied_equalities_for_column(root, baserel,
															 key_class_member,
															 &search,
															 baserel->lateral_referencers);
			if (search.current == NULL)
				break;
			candidates = list_concat(candidates, implied);
			search.already_used = lappend(search.already_used, search.current);
		}
	}

	foreach(lc, candidates)
	{
		RestrictInfo *rinfo = lfirst(lc);
		KeyQual    *qual;

		if (!join_clause_is_movable_to(rinfo, baserel))
			continue;
		qual = classify_key_qual(root, rinfo->clause, baserel, state->key_attno,
								 state->key_type, state->key_opfamily);
		if (qual != NULL && qual->strategy == BTEqualStrategyNumber)
			clauses = lappend(clauses, rinfo);
	}
	return clauses;
}

/*
 * Parameterized paths: one key lookup per outer row, for each set of outer
 * relations a key join clause needs.  The executor's nested loop sets the
 * parameters and rescans; a rescan evaluates the key range anew over the
 * same snapshot (scan.c).
 */
static void
rollout_add_key_join_paths(PlannerInfo *root, RelOptInfo *baserel,
						   RolloutPlanState *state)
{
	List	   *done = NIL;		/* Relids already given a path */
	ListCell   *lc;

	if (!OidIsValid(state->key_opfamily))
		return;
	foreach(lc, rollout_key_join_clauses(root, baserel, state))
	{
		RestrictInfo *rinfo = lfirst(lc);
		Relids		required_outer;
		ListCell   *dc;
		bool		seen = false;
		Cost		cost = rollout_lookup_cost(state);

		required_outer = bms_union(bms_difference(rinfo->clause_relids,
												  baserel->relids),
								   baserel->lateral_relids);
		if (bms_is_empty(required_outer))
			continue;
		foreach(dc, done)
			seen |= bms_equal(lfirst(dc), required_outer);
		if (seen)
			continue;
		done = lappend(done, required_outer);
		(void) get_baserel_parampathinfo(root, baserel, required_outer);
		add_serial_path(baserel,
						create_foreignscan_path(root, baserel, NULL, 1, cost,
												cost + cpu_tuple_cost, NIL,
												required_outer, NULL, NIL));
	}
}

/* pg_stats.correlation of the table's column attno, if ANALYZE computed it. */
static bool
rollout_column_correlation(RangeTblEntry *rte, AttrNumber attno, double *correlation)
{
	HeapTuple	tuple;
	AttStatsSlot slot;
	bool		found = false;

	tuple = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(rte->relid),
							Int16GetDatum(attno), BoolGetDatum(rte->inh));
	if (!HeapTupleIsValid(tuple))
		return false;
	if (get_attstatsslot(&slot, tuple, STATISTIC_KIND_CORRELATION, InvalidOid,
						 ATTSTATSSLOT_NUMBERS))
	{
		if (slot.nnumbers == 1)
		{
			*correlation = slot.numbers[0];
			found = true;
		}
		free_attstatsslot(&slot);
	}
	ReleaseSysCache(tuple);
	return found;
}

/*
 * The share of the stored versions a scan still reads after zone maps skip
 * the row groups its pushed conditions rule out (read/merge_iterator.c),
 * estimated as PostgreSQL estimates an index scan's pages: a column whose
 * values follow the store's key order (pg_stats.correlation near 1 or -1,
 * measured on ANALYZE's sample in key order, fdw/analyze.c) is read about
 * as much as its conditions select, an unrelated one (correlation near 0)
 * whole; in between the squared correlation interpolates.  The column the
 * table's compactions cluster by (its option cluster_by) is read as much as
 * its conditions select plus one of the ranges compaction spreads the rows
 * over (lsm/cluster_ranges.c), whatever ANALYZE measured: its sample comes
 * in key order, in which that column follows nothing.  This assumes the
 * store was compacted since the option was set, into the most ranges the
 * table allows (its option cluster_ranges; a small store has fewer).  The smallest share of any
 * column counts, since the conditions are ANDed.  1 for other columns
 * without statistics, or with zone maps off.
 */
static double
rollout_zone_map_share(PlannerInfo *root, RelOptInfo *baserel,
					   RolloutPlanState *state)
{
	RangeTblEntry *rte = planner_rt_fetch(baserel->relid, root);
	const char *use_zone_maps = GetConfigOption("rollout_fdw.use_zone_maps", true, false);
	Bitmapset  *done = NULL;
	double		share = 1.0;
	AttrNumber	cluster_attno = InvalidAttrNumber;
	ListCell   *lc;

	if (use_zone_maps == NULL || strcmp(use_zone_maps, "on") != 0)
		return 1.0;
	if (state->options->cluster_by != NULL)
		cluster_attno = get_attnum(rte->relid, state->options->cluster_by);
	foreach(lc, state->pushed_conditions)
	{
		PushedCondition *condition = lfirst(lc);
		List	   *clauses = NIL;
		double		correlation = 0.0;
		bool		has_correlation;
		double		squared;
		Selectivity selectivity;
		ListCell   *rc;

		if (condition->zone_strategy == 0 ||
			bms_is_member(condition->attno, done))
			continue;
		has_correlation = rollout_column_correlation(rte, condition->attno, &correlation);
		if (!has_correlation && condition->attno != cluster_attno)
			continue;
		done = bms_add_member(done, condition->attno);

		/* the restrictions on that column alone */
		foreach(rc, baserel->baserestrictinfo)
		{
			RestrictInfo *rinfo = lfirst(rc);
			Bitmapset  *attnos = NULL;

			pull_varattnos((Node *) rinfo->clause, baserel->relid, &attnos);
			if (bms_num_members(attnos) == 1 &&
				bms_is_member(condition->attno - FirstLowInvalidHeapAttributeNumber,
							  attnos))
				clauses = lappend(clauses, rinfo);
		}
		if (clauses == NIL)
			continue;
		selectivity = clauselist_selectivity(root, clauses, baserel->relid,
											 JOIN_INNER, NULL);
		squared = correlation * correlation;
		if (has_correlation)
			share = Min(share, selectivity * squared + (1.0 - squared));
		if (condition->attno == cluster_attno)
			share = Min(share, Min(1.0, selectivity + 1.0 / state->options->cluster_ranges));
	}
	return share;
}

/*
 * The share of a parallel path's rows and run cost each participant takes:
 * the workers', plus what the leader does besides gathering (costsize.c's
 * rule: it reads less the more workers it must serve).
 */
static double
rollout_parallel_divisor(int workers)
{
	double		leader = 1.0 - 0.3 * workers;

	return workers + (parallel_leader_participation && leader > 0 ? leader : 0);
}

/*
 * A partial path: the participants of a parallel scan split the key space
 * (scan_parallel.c).  Offered for a scan of the whole store or of a key
 * range, not for a lookup or a lateral scan.  The workers are PostgreSQL's
 * choice for a heap of the bytes the scan decodes, so that the settings
 * that govern parallel heap scans (min_parallel_table_scan_size,
 * max_parallel_workers_per_gather) govern this one alike.  Each
 * participant's rows come out in key order, so the path keeps the pathkeys.
 */
static void
rollout_add_partial_path(PlannerInfo *root, RelOptInfo *baserel,
						 RolloutPlanState *state, Cost startup_cost,
						 Cost run_cost, double read_share, List *pathkeys)
{
	double		pages;
	int			workers;
	double		divisor;
	ForeignPath *path;

	if (!baserel->consider_parallel || state->has_key_equality ||
		!bms_is_empty(baserel->lateral_relids))
		return;
	pages = baserel->tuples * read_share * (baserel->reltarget->width + 24) / BLCKSZ;
	workers = compute_parallel_worker(baserel, pages, -1,
									  max_parallel_workers_per_gather);
	if (workers <= 0)
		return;
	divisor = rollout_parallel_divisor(workers);
	path = create_foreignscan_path(root, baserel, NULL,
								   clamp_row_est(baserel->rows / divisor),
								   startup_cost,
								   startup_cost + run_cost / divisor,
								   pathkeys, NULL, NULL, NIL);
	path->path.parallel_aware = true;
	path->path.parallel_safe = true;
	path->path.parallel_workers = workers;
	add_partial_path(baserel, (Path *) path);
}

/*
 * GetForeignPaths: offer the one access path, a merge read of the store, in
 * key order (rollout_key_pathkeys).  Its cost: opening each source; then
 * every stored version read several times over (its key and version
 * columns decoded, the merge's comparisons) in the part of the key space
 * the key conditions leave, about a row group per source for a key
 * equality; then the rows returned.  Like postgres_fdw's, the path is
 * parameterized only by the relation's lateral references.
 */
static void
rollout_get_foreign_paths(PlannerInfo *root, RelOptInfo *baserel,
						  Oid foreigntableid)
{
	RolloutPlanState *state = baserel->fdw_private;
	Cost		startup_cost;
	Cost		run_cost;
	double		versions_read = baserel->tuples;
	double		read_share = rollout_zone_map_share(root, baserel, state);
	List	   *pathkeys;

	if (state->key_clauses != NIL)
		versions_read *= clauselist_selectivity(root, state->key_clauses,
												baserel->relid, JOIN_INNER,
												NULL);
	versions_read *= read_share;
	startup_cost = 10 + state->estimate.sources * seq_page_cost;
	run_cost = versions_read * cpu_tuple_cost * 4 + baserel->rows * cpu_tuple_cost;
	if (state->has_key_equality)
	{
		startup_cost = rollout_lookup_cost(state);
		run_cost = cpu_tuple_cost;
	}

	pathkeys = rollout_key_pathkeys(root, baserel, foreigntableid,
									state->key_attno);
	add_serial_path(baserel,
					create_foreignscan_path(root, baserel, NULL, baserel->rows,
											startup_cost, startup_cost + run_cost,
											pathkeys, baserel->lateral_relids,
											NULL, NIL));
	rollout_add_key_join_paths(root, baserel, state);
	rollout_add_partial_path(root, baserel, state, startup_cost, run_cost,
							 read_share, pathkeys);
}

/*
 * GetForeignPlan: make the ForeignScan.  fdw_private holds the attribute
 * numbers the query uses (those of its target list and of every condition, or
 * all columns for a whole-row reference), the key conditions and the pushed
 * conditions flattened to integer lists, since it must survive copyObject;
 * their value expressions go into fdw_exprs (the key conditions' first), so
 * that setrefs.c fixes them up and the executor can evaluate them.  Every
 * clause stays a local qual: the key range and the pushed conditions only
 * spare reading and decoding, they never decide what matches.
 */
static ForeignScan *
rollout_get_foreign_plan(PlannerInfo *root, RelOptInfo *baserel,
						 Oid foreigntableid, ForeignPath *best_path,
						 List *tlist, List *scan_clauses, Plan *outer_plan)
{
	RolloutPlanState *state = baserel->fdw_private;
	Bitmapset  *attrs = NULL;
	List	   *retrieved_attrs = NIL;
	List	   *key_qual_info = NIL;
	List	   *key_quals;
	List	   *equalities;
	List	   *others;
	List	   *pushed_info = NIL;
	List	   *fdw_exprs = NIL;
	ListCell   *lc;
	bool		whole_row;

	/* the columns the query needs: its target list and all conditions */
	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid, &attrs);
	foreach(lc, scan_clauses)	/* with a lookup path's join clauses */
		pull_varattnos((Node *) ((RestrictInfo *) lfirst(lc))->clause,
					   baserel->relid, &attrs);
	whole_row = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs);
	{
		Relation	rel = table_open(foreigntableid, NoLock);
		TupleDesc	tupdesc = RelationGetDescr(rel);

		for (int i = 1; i <= tupdesc->natts; i++)
		{
			if (TupleDescAttr(tupdesc, i - 1)->attisdropped)
				continue;
			if (whole_row ||
				bms_is_member(i - FirstLowInvalidHeapAttributeNumber, attrs))
				retrieved_attrs = lappend_int(retrieved_attrs, i);
		}
		table_close(rel, NoLock);
	}

	/* a lookup path's join clauses are key conditions too */
	key_quals = list_copy(state->key_quals);
	if (best_path->path.param_info != NULL)
		foreach(lc, best_path->path.param_info->ppi_clauses)
	{
		RestrictInfo *rinfo = lfirst(lc);
		KeyQual    *qual = NULL;

		if (OidIsValid(state->key_opfamily) &&
			!list_member_ptr(baserel->baserestrictinfo, rinfo))
			qual = classify_key_qual(root, rinfo->clause, baserel,
									 state->key_attno, state->key_type,
									 state->key_opfamily);
		if (qual != NULL)
			key_quals = lappend(key_quals, qual);
	}

	/*
	 * Equalities first: the key range keeps the first bound of each side
	 * (scan.c), and a lookup's equality must be it, not a range condition
	 * that happens to come earlier (a join's key plus the query's id > 0).
	 */
	equalities = NIL;
	others = NIL;
	foreach(lc, key_quals)
	{
		KeyQual    *qual = lfirst(lc);

		if (qual->strategy == BTEqualStrategyNumber)
			equalities = lappend(equalities, qual);
		else
			others = lappend(others, qual);
	}
	key_quals = list_concat(equalities, others);

	foreach(lc, key_quals)
	{
		KeyQual    *qual = lfirst(lc);

		key_qual_info = lappend(key_qual_info,
								list_make4(makeInteger(qual->strategy),
										   makeInteger(qual->opfamily),
										   makeInteger(qual->lefttype),
										   makeInteger(qual->righttype)));
		fdw_exprs = lappend(fdw_exprs, qual->value);
	}
	/* after the key conditions' values, which must come first */
	foreach(lc, state->pushed_conditions)
		pushed_info = lappend(pushed_info,
							  scan_filter_serialize(lfirst(lc), &fdw_exprs));

	/* every condition stays a local filter: skipping only saves reading */
	scan_clauses = extract_actual_clauses(scan_clauses, false);

	return make_foreignscan(tlist, scan_clauses, baserel->relid, fdw_exprs,
							list_make3(retrieved_attrs, key_qual_info, pushed_info),
							NIL, NIL, outer_plan);
}

List *
scan_plan_retrieved_attrs(ForeignScan *plan)
{
	return list_nth(plan->fdw_private, ScanPrivateRetrievedAttrs);
}

/*
 * Rebuild the plan's key conditions from the integer lists in fdw_private (see
 * rollout_get_foreign_plan).  Their value stays NULL: the values are the
 * plan's fdw_exprs, in the same order.
 */
List *
scan_plan_key_quals(ForeignScan *plan)
{
	List	   *quals = NIL;
	ListCell   *lc;

	foreach(lc, (List *) list_nth(plan->fdw_private, ScanPrivateKeyQuals))
	{
		List	   *info = lfirst(lc);
		KeyQual    *qual = palloc0(sizeof(KeyQual));

		qual->strategy = intVal(linitial(info));
		qual->opfamily = intVal(lsecond(info));
		qual->lefttype = intVal(lthird(info));
		qual->righttype = intVal(lfourth(info));
		quals = lappend(quals, qual);
	}
	return quals;
}

List *
scan_plan_pushed_conditions(ForeignScan *plan)
{
	return list_nth(plan->fdw_private, ScanPrivatePushedConditions);
}

void
rollout_plan_routines(FdwRoutine *routine)
{
	routine->GetForeignRelSize = rollout_get_foreign_rel_size;
	routine->GetForeignPaths = rollout_get_foreign_paths;
	routine->GetForeignPlan = rollout_get_foreign_plan;
}
