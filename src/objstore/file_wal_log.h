/*-------------------------------------------------------------------------
 *
 * file_wal_log.h
 *		The file backend's WAL logs (private to src/objstore): WAL entries
 *		appended to preallocated segment files of their folder.
 *
 * See file_wal_log.c for the layout and the protocol.  file_store.c routes
 * every key that names a WAL entry ("<...>/wal/<20 digits>.wal") through
 * here as well as through its own files, so that an entry is found
 * whichever of the two holds it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_FILE_WAL_LOG_H
#define ROLLOUT_FILE_WAL_LOG_H

#include "rollout/objstore.h"

/* The exclusive hold on one folder's log, taken for a create or delete. */
typedef struct FileWalLogLock FileWalLogLock;

/* Define rollout_fdw.file_wal_log (from file_store_define_settings). */
extern void file_wal_log_define_settings(void);

/*
 * Does key name a WAL entry?  *position receives its number and
 * *folder_length the length of its folder's part of the key (up to and
 * including the last '/').
 */
extern bool file_wal_log_key(const char *key, int64 *position,
							 size_t *folder_length);

/* Is a file of that name in a folder whose key is folder_key the log's own? */
extern bool file_wal_log_own_file(const char *folder_key, const char *name);

/*
 * Take the exclusive lock of the log of folder_path, waiting for other
 * writers and readers, and bring this process's view of the log up to date.
 * NULL when the folder does not exist, or, without create, has no log.  key
 * is only for messages.
 */
extern FileWalLogLock *file_wal_log_lock(ObjectStore *store,
										 const char *folder_path,
										 const char *key, bool create);
extern void file_wal_log_unlock(FileWalLogLock *lock);

/* Under the lock: does the log hold the entry at position? */
extern bool file_wal_log_holds(FileWalLogLock *lock, int64 position);

/*
 * Under the lock, with no entry at position (neither in the log nor as a
 * file): append the entry and make it durable.  False, with nothing
 * written, when the log does not take it (rollout_fdw.file_wal_log off, an
 * entry too large for a segment, a put id too long): the caller then
 * creates a file, still under the lock.
 */
extern bool file_wal_log_append(FileWalLogLock *lock, int64 position,
								const char *data, size_t length,
								const char *put_id);

/*
 * Under the lock, right after file_wal_log_holds(lock, position + 1): make
 * the entry at position durable, if the log holds it (before the entry after
 * it is written as a file: see sync_previous_entry in file_wal_log.c).
 */
extern void file_wal_log_sync_entry(FileWalLogLock *lock, int64 position);

/*
 * Under the lock: remove the entry at position, if the log holds one; its
 * bytes are overwritten with zeros.  Returns whether there was one.
 */
extern bool file_wal_log_delete(FileWalLogLock *lock, int64 position);

/*
 * Read [offset, offset + length) of the entry at position (tail: its last
 * length bytes; length < 0: all), clipped to the entry, as get_range and
 * get_tail do; false when the log of folder_path holds none.  put_id, when
 * not NULL, receives the entry's put id.  Takes no lock unless this
 * process has not seen the entry yet.
 */
extern bool file_wal_log_read(ObjectStore *store, const char *folder_path,
							  const char *key, int64 position,
							  int64 offset, int64 length, bool tail,
							  StringInfo out, int64 *object_size,
							  char **put_id);

/*
 * Add the key of every entry the log of folder_path holds (folder_key
 * followed by the entry's name) to a listing through add, and answer their
 * sizes and times afterwards through file_wal_log_stat.  Segments whose
 * keys all sort at or before bound (when not NULL) are not read.
 */
extern void file_wal_log_list(ObjectStore *store, const char *folder_path,
							  const char *folder_key, const char *bound,
							  void (*add) (void *arg, const char *key),
							  void *arg);
extern bool file_wal_log_stat(const char *folder_path, int64 position,
							  int64 *size, TimestampTz *modified);

#endif							/* ROLLOUT_FILE_WAL_LOG_H */
