/*-------------------------------------------------------------------------
 *
 * scratch.c
 *		Local scratch files: segments being built before they are uploaded,
 *		and a transaction's own rows sorted for its scans.
 *
 * They live in the data directory's temporary folder with PostgreSQL's
 * temporary-file prefix, so a crash leaves nothing that the next server
 * start does not remove.  A backend that exits while it has some (a
 * terminated COPY of gigabytes, in its commit's sort or upload) removes them
 * on its way out: PG_FINALLY blocks do not run on FATAL, and the server may
 * run for months before its next start.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "rollout/scratch.h"

/* Paths this backend made and has not removed yet, all in TopMemoryContext. */
static List *live_scratch_files = NIL;

/* on_proc_exit: remove what is left. */
static void
scratch_remove_at_exit(int code, Datum arg)
{
	ListCell   *lc;

	foreach(lc, live_scratch_files)
		(void) unlink((const char *) lfirst(lc));
	live_scratch_files = NIL;
}

/*
 * Only a name is made, nothing is opened: the segment writer and the
 * object-store upload open the file by path, and the caller removes it.  The
 * name follows PostgreSQL's temporary-file pattern (prefix, PID, counter) so
 * that the cleanup at server start removes whatever a crash left; the folder
 * is created here because PostgreSQL makes it only on first need.  The path is
 * relative to the data directory, a backend's working directory.
 */
char *
rollout_scratch_file_path(const char *purpose)
{
	static uint32 counter = 0;
	static bool exit_callback_registered = false;
	char	   *dir = psprintf("base/%s", PG_TEMP_FILES_DIR);
	char	   *path;

	if (MakePGDirectory(dir) < 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", dir)));
	path = psprintf("%s/%s_rollout%d.%u.%s", dir, PG_TEMP_FILE_PREFIX,
					MyProcPid, counter++, purpose);
	if (!exit_callback_registered)
	{
		on_proc_exit(scratch_remove_at_exit, (Datum) 0);
		exit_callback_registered = true;
	}
	{
		/* the list's cells too: lappend allocates them where it runs */
		MemoryContext oldcontext = MemoryContextSwitchTo(TopMemoryContext);

		live_scratch_files = lappend(live_scratch_files, pstrdup(path));
		MemoryContextSwitchTo(oldcontext);
	}
	return path;
}

/*
 * Remove a scratch file rollout_scratch_file_path named (scratch.h): unlink's
 * result, with its errno.
 */
int
rollout_scratch_file_remove(const char *path)
{
	int			result = unlink(path);
	int			saved_errno = errno;
	ListCell   *lc;

	foreach(lc, live_scratch_files)
	{
		char	   *live = lfirst(lc);

		if (strcmp(live, path) == 0)
		{
			live_scratch_files = foreach_delete_current(live_scratch_files, lc);
			pfree(live);
			break;
		}
	}
	errno = saved_errno;
	return result;
}
