/*-------------------------------------------------------------------------
 *
 * fault.c
 *		Fault points: interrupt a protocol between two object-store writes.
 *
 * The crash-safety argument of every maintenance protocol is "whatever
 * step dies, the next run converges".  Fault points make that testable: the
 * tests set rollout_fdw.fail_at to stop a flush, merge, compaction or gc at
 * each named step, then run it again and check that no row was lost or
 * duplicated and that no orphan escapes garbage collection.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "rollout/fault.h"

/* rollout_fdw.fail_at */
static char *fail_at_setting = NULL;

/*
 * What "hold" waits for: this file in the data directory (a test creates it
 * once it has done what the held backend must not see done too early), and
 * for how long at most.  "hold=NAME" waits for the file's name followed by
 * "." and NAME instead, so that a test can release two held backends one at
 * a time.
 */
#define FAULT_RELEASE_FILE		"rollout_fault_release"
#define FAULT_HOLD_MAX_S		600
#define FAULT_HOLD_NAME_MAX		32

/* A hold's name: 1 to FAULT_HOLD_NAME_MAX letters, digits or underscores. */
static bool
fault_hold_name_valid(const char *name)
{
	size_t		length = strlen(name);

	if (length == 0 || length > FAULT_HOLD_NAME_MAX)
		return false;
	for (const char *c = name; *c; c++)
	{
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			  (*c >= '0' && *c <= '9') || *c == '_'))
			return false;
	}
	return true;
}

/*
 * Parse one "step:action" item.  Returns false on a malformed item.  For
 * "sleep=N", *action is "sleep" and *seconds N; for "hold" and "hold=NAME",
 * *action is "hold" and *release the file the hold waits for.
 */
static bool
fault_parse_item(const char *item, char **step, char **action, int *seconds,
				 char **release)
{
	const char *colon = strchr(item, ':');

	if (colon == NULL || colon == item || colon[1] == '\0')
		return false;
	*step = pnstrdup(item, colon - item);
	*action = pstrdup(colon + 1);
	*seconds = 0;
	*release = NULL;
	if (strcmp(*action, "error") == 0 || strcmp(*action, "crash") == 0)
		return true;
	if (strcmp(*action, "hold") == 0)
	{
		*release = FAULT_RELEASE_FILE;
		return true;
	}
	if (strncmp(*action, "hold=", 5) == 0)
	{
		if (!fault_hold_name_valid(*action + 5))
			return false;
		*release = psprintf("%s.%s", FAULT_RELEASE_FILE, *action + 5);
		(*action)[4] = '\0';	/* "hold" */
		return true;
	}
	if (strncmp(*action, "sleep=", 6) == 0)
	{
		char	   *end;
		long		value = strtol(*action + 6, &end, 10);

		if (*end != '\0' || end == *action + 6 || value < 0 || value > 3600)
			return false;
		*seconds = (int) value;
		(*action)[5] = '\0';	/* "sleep" */
		return true;
	}
	return false;
}

/* Split the setting into trimmed items. */
static List *
fault_items(const char *setting)
{
	List	   *items = NIL;
	char	   *copy = pstrdup(setting);
	char	   *saveptr = NULL;

	for (char *tok = strtok_r(copy, ",", &saveptr); tok; tok = strtok_r(NULL, ",", &saveptr))
	{
		while (*tok == ' ')
			tok++;
		for (char *end = tok + strlen(tok); end > tok && end[-1] == ' '; end--)
			end[-1] = '\0';
		if (*tok != '\0')
			items = lappend(items, tok);
	}
	return items;
}

/* Refuse a setting with a malformed item. */
static bool
fail_at_check(char **newval, void **extra, GucSource source)
{
	ListCell   *lc;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	foreach(lc, fault_items(*newval))
	{
		char	   *step;
		char	   *action;
		int			seconds;
		char	   *release;

		if (!fault_parse_item(lfirst(lc), &step, &action, &seconds, &release))
		{
			GUC_check_errdetail("\"%s\" is not of the form step:error, step:crash, step:sleep=N, step:hold or step:hold=NAME.",
								(char *) lfirst(lc));
			return false;
		}
	}
	return true;
}

/* Define rollout_fdw.fail_at (superuser only); _PG_init calls it. */
void
fault_define_settings(void)
{
	DefineCustomStringVariable("rollout_fdw.fail_at",
							   "Fault points for tests: step:error, step:crash, step:sleep=N, step:hold or step:hold=NAME, comma-separated.",
							   "The steps are listed in docs/MAINTENANCE.md. Never set this in production.",
							   &fail_at_setting,
							   "",
							   PGC_SUSET,
							   GUC_NOT_IN_SAMPLE,
							   fail_at_check, NULL, NULL);
}

/*
 * Act on step if rollout_fdw.fail_at names it.  Called at every named step of
 * the maintenance protocols, it costs nothing while the setting is empty, as
 * it is outside tests.  The setting is parsed afresh on each call, so a test
 * may change it between steps, and every item naming the step acts in turn.
 * "crash" kills this backend with SIGKILL so that no error cleanup runs,
 * exactly as in a real crash; "sleep" checks for interrupts every 100 ms so
 * that a test can cancel it.  "hold" waits, the same way, until the test
 * creates FAULT_RELEASE_FILE (or, for "hold=NAME", that name followed by
 * ".NAME"): a window as long as the test's work in it, however slow the
 * machine, where a sleep is a guess.
 */
void
rollout_fault_point(const char *step)
{
	ListCell   *lc;

	if (fail_at_setting == NULL || fail_at_setting[0] == '\0')
		return;
	foreach(lc, fault_items(fail_at_setting))
	{
		char	   *item_step;
		char	   *action;
		int			seconds;
		char	   *release;

		if (!fault_parse_item(lfirst(lc), &item_step, &action, &seconds, &release) ||
			strcmp(item_step, step) != 0)
			continue;

		if (strcmp(action, "error") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("rollout_fdw fault point \"%s\" reached", step),
					 errdetail("rollout_fdw.fail_at asked for an error here.")));
		else if (strcmp(action, "crash") == 0)
		{
			ereport(LOG,
					(errmsg("rollout_fdw fault point \"%s\" reached: crashing", step)));
			(void) kill(MyProcPid, SIGKILL);
			pg_usleep(10 * 1000 * 1000L);	/* not reached */
		}
		else if (strcmp(action, "hold") == 0)
		{
			ereport(LOG,
					(errmsg("rollout_fdw fault point \"%s\" reached: holding until \"%s\" exists",
							step, release)));
			for (int ms = 0; access(release, F_OK) != 0; ms += 100)
			{
				if (ms >= FAULT_HOLD_MAX_S * 1000)
					ereport(ERROR,
							(errcode(ERRCODE_INTERNAL_ERROR),
							 errmsg("rollout_fdw fault point \"%s\" was not released", step),
							 errdetail("It held for %d s without \"%s\" appearing in the data directory.",
									   FAULT_HOLD_MAX_S, release)));
				CHECK_FOR_INTERRUPTS();
				pg_usleep(100 * 1000L);
			}
		}
		else
		{
			ereport(LOG,
					(errmsg("rollout_fdw fault point \"%s\" reached: sleeping %d s",
							step, seconds)));
			for (int ms = 0; ms < seconds * 1000; ms += 100)
			{
				CHECK_FOR_INTERRUPTS();
				pg_usleep(100 * 1000L);
			}
		}
	}
}
