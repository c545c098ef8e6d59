/*-------------------------------------------------------------------------
 *
 * scratch.c
 *		Local scratch files: segments being built before they are uploaded,
 *		and a transaction's own rows sorted for its scans.
 *
 * They live in the data directory's temporary folder with PostgreSQL's
 * temporary-file prefix, so a crash leaves nothing that the next server
 * start does not remove.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "miscadmin.h"
#include "storage/fd.h"

#include "rollout/scratch.h"

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
	char	   *dir = psprintf("base/%s", PG_TEMP_FILES_DIR);

	if (MakePGDirectory(dir) < 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", dir)));
	return psprintf("%s/%s_rollout%d.%u.%s", dir, PG_TEMP_FILE_PREFIX,
					MyProcPid, counter++, purpose);
}
