/*-------------------------------------------------------------------------
 *
 * maintenance_cost.h
 *		The cost-based delay of merge, compaction and garbage collection
 *		(objstore/maintenance_cost.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_MAINTENANCE_COST_H
#define ROLLOUT_MAINTENANCE_COST_H

/*
 * What work costs, in the units of rollout_fdw.maintenance_cost_limit.  A
 * page is 8 kB.  Row data is what a rewrite reads, merges and encodes again
 * (CPU, mostly); written bytes are what reaches the store (the device or
 * the network, and their queues that commits wait in); a deleted object is
 * one request or one unlink and directory update.
 */
#define MAINTENANCE_COST_PAGE_SIZE			8192
#define MAINTENANCE_COST_ROW_DATA_PAGE		40
#define MAINTENANCE_COST_WRITTEN_PAGE		40
#define MAINTENANCE_COST_DELETED_OBJECT		20

/* Define rollout_fdw.maintenance_cost_delay and _limit (from _PG_init). */
extern void maintenance_cost_define_settings(void);

/*
 * Where this process takes its delay from instead of
 * rollout_fdw.maintenance_cost_delay (the sweeper: its own setting, read
 * again after a reload).  It is asked when a pass begins and before each
 * sleep, so that a reload reaches a pass already running; a negative answer
 * means the setting.  NULL goes back to the setting.
 */
typedef double (*MaintenanceCostDelaySource) (void);
extern void maintenance_cost_set_delay_source(MaintenanceCostDelaySource source);

/*
 * Start charging the work of a maintenance pass; returns what to pass to
 * maintenance_cost_end, which the caller must reach on every path (also on
 * ERROR), so that the commits of this session are never delayed.  Passes
 * nest: the outermost one decides.
 */
extern bool maintenance_cost_begin(void);
extern void maintenance_cost_end(bool was_active);

/* Is a pass being charged?  A cheap test for callers that measure work. */
extern bool maintenance_cost_active(void);

/* Charge cost units to the running pass; a no-op outside a pass. */
extern void maintenance_cost_charge(int64 units);

/* Charge bytes of row data or of written object bytes. */
extern void maintenance_cost_charge_row_bytes(int64 bytes);
extern void maintenance_cost_charge_written_bytes(int64 bytes);

/*
 * Sleep if the pass has used up its budget.  Call only where no lock that
 * commits or reads wait for is held.
 */
extern void maintenance_cost_delay_point(void);

#endif							/* ROLLOUT_MAINTENANCE_COST_H */
