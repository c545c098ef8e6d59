/*-------------------------------------------------------------------------
 *
 * grace.c
 *		The minimum grace period of garbage collection, and the rule every
 *		writer follows because of it.
 *
 * gc deletes only objects older than its grace, and never a grace shorter
 * than rollout_fdw.min_gc_grace (lsm/gc.c).  So anything a writer saw less
 * than that long ago is still there, or was deleted only after the manifest
 * that unlinked it was durable.  A writer that acts later on what it saw
 * could be wrong about it: a merge's uploaded fragment may have been taken
 * for an orphan, and a WAL position a writer believes to be the free tip may
 * have held an entry that was sealed and collected since, so a write there
 * would land below the shard's replay_after, acknowledged and never read.
 * Every such writer therefore checks rollout_output_too_old and, past half
 * the minimum grace, abandons its output or looks again.
 *
 * The rule holds only if gc's floor is never below the value the writers
 * use, so the setting is the server's (PGC_SIGHUP), not a session's: a
 * session that lowered it for its own gc run would delete a staged ingest
 * segment or an uploaded generation that a writer in another session,
 * trusting the configured value, is about to commit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"
#include "utils/timestamp.h"

#include "rollout/grace.h"

/* rollout_fdw.min_gc_grace (seconds) */
static int	min_gc_grace_seconds = 600;

/* Define rollout_fdw.min_gc_grace; _PG_init calls this. */
void
grace_define_settings(void)
{
	DefineCustomIntVariable("rollout_fdw.min_gc_grace",
							"Shortest grace period rollout_gc accepts.",
							"Merges, compactions and flushes abandon outputs that waited longer than half of it before their commit, and WAL writers look at the WAL again when what they saw of it is that old, so that garbage collection can never delete an object a write relies on.",
							&min_gc_grace_seconds,
							600, 0, 7 * 24 * 3600,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

int
gc_min_grace_seconds(void)
{
	return min_gc_grace_seconds;
}

/*
 * Half the minimum grace leaves the other half for clock steps between the
 * writer and the store, and for the write itself to land.
 */
bool
rollout_output_too_old(TimestampTz since)
{
	if (min_gc_grace_seconds <= 0)
		return false;
	return TimestampDifferenceExceeds(since, GetCurrentTimestamp(),
									  min_gc_grace_seconds * 1000 / 2);
}
