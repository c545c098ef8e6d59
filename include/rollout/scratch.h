/*-------------------------------------------------------------------------
 *
 * scratch.h
 *		Local scratch files (core/scratch.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SCRATCH_H
#define ROLLOUT_SCRATCH_H

/*
 * A path for a new local scratch file, unique per call, in the data
 * directory's temporary folder (removed at the next start after a crash).
 * purpose ends the name, for whoever looks at the folder.
 */
extern char *rollout_scratch_file_path(const char *purpose);

/*
 * Remove such a file (unlink's result and errno); what is not removed so is
 * removed when the backend exits.
 */
extern int	rollout_scratch_file_remove(const char *path);

#endif							/* ROLLOUT_SCRATCH_H */
