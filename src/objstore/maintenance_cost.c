/*-------------------------------------------------------------------------
 *
 * maintenance_cost.c
 *		The cost-based delay of merge, compaction and garbage collection.
 *
 * Maintenance competes with commits for the same CPUs, the same device
 * queue and the same network: a compaction that writes a 100 MB fragment in
 * one burst puts every commit's fsync or PUT behind it.  Like VACUUM's
 * vacuum_cost_delay, a pass counts the work it does in cost units and,
 * whenever the count reaches rollout_fdw.maintenance_cost_limit, sleeps
 * rollout_fdw.maintenance_cost_delay (scaled by how far it overshot, in
 * sleeps of at most four times the delay) and counts on from what is left.
 * The pass then takes longer and uses the machine in short slices instead
 * of one long burst.  The weights (maintenance_cost.h) are set so that at
 * the sweeper's default, 2 ms per 200 units, a rewrite on a 2-core
 * reference machine works about a sixth of the time: rewriting 8 kB of rows takes about 75 us of CPU there
 * (docs/MAINTENANCE.md has the measurements behind the choice).
 *
 * Who is delayed.  Only work between maintenance_cost_begin and _end: the
 * rewrites of merge and compaction, their uploads, and gc's deletions.
 * Flushes are not, wherever they run: a flush empties the memtable that
 * commits fill, and a slower flush would hold commits back instead of
 * sparing them.  Commits never are: the delay ends with the pass that
 * began it, also on ERROR.  The setting is 0 (off) for SQL calls, like a
 * manual VACUUM; the sweeper uses rollout_fdw.sweeper_cost_delay (2 ms)
 * instead, as autovacuum uses autovacuum_vacuum_cost_delay, through a
 * MaintenanceCostDelaySource that also re-reads the configuration.
 *
 * A sleeping pass shows the wait event VacuumDelay in pg_stat_activity,
 * the one PostgreSQL reports for the same delay of VACUUM: monitoring that
 * knows it needs nothing new, and it is never reported otherwise in a
 * rollout_fdw process.
 *
 * Where it sleeps.  At delay points, which the callers place where no lock
 * that commits or reads wait for is held: once per row of a rewrite, once
 * per chunk of a file-store upload, once per deletion.  Charging alone never
 * sleeps.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "rollout/maintenance_cost.h"

/* The settings. */
static double maintenance_cost_delay_ms = 0;
static int	maintenance_cost_limit = 200;

/* Where the sweeper's own delay comes from, or NULL: the setting. */
static MaintenanceCostDelaySource delay_source = NULL;

/* The running pass. */
static bool pass_active = false;
static double pass_delay_ms = 0;
static int64 pass_balance = 0;
static int64 pass_delays = 0;	/* its sleeps so far, for DEBUG1 */
static double pass_delayed_ms = 0;

void
maintenance_cost_define_settings(void)
{
	DefineCustomRealVariable("rollout_fdw.maintenance_cost_delay",
							 "Cost-based delay of merge, compaction and garbage collection called from SQL, in milliseconds.",
							 "0 (the default) turns it off, as for a manual VACUUM. The sweeper uses rollout_fdw.sweeper_cost_delay instead.",
							 &maintenance_cost_delay_ms,
							 0, 0, 100,
							 PGC_USERSET,
							 GUC_UNIT_MS,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.maintenance_cost_limit",
							"Work a merge, compaction or garbage collection does between two delays, in cost units.",
							"8 kB of row data rewritten costs 40, 8 kB written to the store 40, an object deleted 20.",
							&maintenance_cost_limit,
							200, 1, 10000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
}

void
maintenance_cost_set_delay_source(MaintenanceCostDelaySource source)
{
	delay_source = source;
}

/* The delay this process's passes use now, in milliseconds. */
static double
maintenance_cost_current_delay(void)
{
	double		delay_ms = delay_source != NULL ? delay_source() : -1;

	return delay_ms >= 0 ? delay_ms : maintenance_cost_delay_ms;
}

bool
maintenance_cost_begin(void)
{
	bool		was_active = pass_active;

	if (!was_active)
	{
		pass_delay_ms = maintenance_cost_current_delay();
		pass_active = pass_delay_ms > 0;
		pass_balance = 0;
		pass_delays = 0;
		pass_delayed_ms = 0;
	}
	return was_active;
}

void
maintenance_cost_end(bool was_active)
{
	if (was_active || !pass_active)
		return;
	pass_active = false;
	if (pass_delays > 0)
		elog(DEBUG1, "maintenance cost delay: slept %.1f ms in %lld delays of at most %.1f ms",
			 pass_delayed_ms, (long long) pass_delays, pass_delay_ms * 4);
}

bool
maintenance_cost_active(void)
{
	return pass_active;
}

/*
 * The balance is kept in 1/MAINTENANCE_COST_PAGE_SIZE of a unit, so that
 * rows, far smaller than a page, are charged what they are.
 */
void
maintenance_cost_charge(int64 units)
{
	if (pass_active)
		pass_balance += units * MAINTENANCE_COST_PAGE_SIZE;
}

void
maintenance_cost_charge_row_bytes(int64 bytes)
{
	if (pass_active)
		pass_balance += bytes * MAINTENANCE_COST_ROW_DATA_PAGE;
}

void
maintenance_cost_charge_written_bytes(int64 bytes)
{
	if (pass_active)
		pass_balance += bytes * MAINTENANCE_COST_WRITTEN_PAGE;
}

void
maintenance_cost_delay_point(void)
{
	int64		limit;
	double		delay_ms;

	if (!pass_active)
		return;
	limit = (int64) maintenance_cost_limit * MAINTENANCE_COST_PAGE_SIZE;

	/*
	 * Pay what is due in sleeps of at most four times the delay: a charge of
	 * a whole upload at once (S3, Azure) is paid in full, in slices that a
	 * cancel can interrupt, not forgiven beyond the first slice.
	 */
	while (pass_balance >= limit)
	{
		/*
		 * a reload may have changed the delay, even to 0, since the pass
		 * began
		 */
		if (delay_source != NULL)
			pass_delay_ms = maintenance_cost_current_delay();
		if (pass_delay_ms <= 0)
		{
			pass_balance = 0;	/* nothing is owed once the delay is off */
			return;
		}
		delay_ms = pass_delay_ms * (double) pass_balance / (double) limit;
		delay_ms = Min(delay_ms, pass_delay_ms * 4);
		pgstat_report_wait_start(WAIT_EVENT_VACUUM_DELAY);
		pg_usleep((long) (delay_ms * 1000));
		pgstat_report_wait_end();
		pass_delays++;
		pass_delayed_ms += delay_ms;
		pass_balance -= (int64) (delay_ms / pass_delay_ms * limit);
		CHECK_FOR_INTERRUPTS();
	}
}
