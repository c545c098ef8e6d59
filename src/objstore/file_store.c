/*-------------------------------------------------------------------------
 *
 * file_store.c
 *		The local-directory object-store backend ("file:///abs/dir").
 *
 * An object is a regular file at <root>/<key>; the '/' separators of the
 * key become directories, created on demand.  The backend gives the same
 * guarantees the LSM protocols rely on from a remote store:
 *
 *	- create-if-absent is atomic and never overwrites.  The bytes go to a
 *	  temporary file in <root>/_tmp/ (same file system as the objects), are
 *	  fsync'd, and the file is then hard-linked to its key.  The temporary
 *	  file is unnamed (O_TMPFILE, linked with linkat(2) through /proc) where
 *	  the file system and /proc allow, which spares a commit creating and
 *	  removing a name in _tmp/; otherwise it is uniquely named and linked
 *	  with link(2).  Either link fails with EEXIST when the name exists,
 *	  whoever created it, so of any number of racing writers (processes of
 *	  one cluster, or several clusters sharing the directory) exactly one
 *	  wins, and readers only ever see complete objects.  The directory
 *	  holding the new name is fsync'd before CREATED is returned, so an
 *	  acknowledged object survives a crash.
 *
 *	- The put id is kept in the object's own inode, as the extended
 *	  attribute user.rollout_put_id, set before the data is fsync'd and
 *	  before the object becomes visible.  A sidecar file would be a second
 *	  object that could be lost or raced independently.  On file systems
 *	  without user extended attributes the put id is simply not kept
 *	  (get_put_id answers NULL).  That loses nothing: the put id exists to
 *	  resolve ambiguous outcomes, and a local create has none, since the
 *	  link either succeeds (the object is ours) or fails with EEXIST (it is
 *	  not).
 *
 *	- Listing walks the directories below the root, skipping _tmp/, and
 *	  sorts full keys in byte order, like an S3 listing.  A prefix may end in
 *	  the middle of a name.  The continuation token is the last key of the
 *	  page, so keys added between pages are listed iff they sort after it.
 *
 *	- A process killed mid-write leaves nothing behind when its temporary
 *	  file was unnamed (the kernel frees an unlinked inode), and a named one
 *	  in _tmp/ otherwise; garbage collection removes such files once they
 *	  are older than its grace (file_store_remove_abandoned_uploads).
 *
 * Directories are never removed, not even when their last object is
 * deleted: a concurrent create may have just made the directory and be about
 * to link into it.  Empty directories list as nothing.
 *
 * Every file descriptor comes from OpenTransientFile or AllocateDir, which
 * the transaction machinery closes on abort; the create paths additionally
 * close their descriptors and remove their temporary file in PG_CATCH, so a
 * caller that catches the error does not keep either.  The exception are
 * the objects kept open between reads (file_store_kept_object), virtual
 * file descriptors of fd.c that live as long as the backend.
 *
 * Copyright (c) rollout_fdw authors
 *
 * IDENTIFICATION
 *		src/objstore/file_store.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "access/xact.h"
#include "common/file_perm.h"
#include "common/file_utils.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "rollout/maintenance_cost.h"
#include "rollout/objstore.h"
#include "storage/fd.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "file_wal_log.h"
#include "objstore_backend.h"

/* Folder at the location root that holds objects being written. */
#define FILE_STORE_TEMP_FOLDER "_tmp"

/* The extended attribute that holds an object's put id. */
#define FILE_STORE_PUT_ID_XATTR "user.rollout_put_id"

/* Longest put id we keep; put ids are UUIDs (36 bytes) in practice. */
#define FILE_STORE_MAX_PUT_ID_LENGTH 1024

/*
 * Buffer size for copying a local file into a temporary object: also how
 * much is handed to writeback at once (PostgreSQL's checkpointer hands 256
 * kB too), and how much a maintenance pass pays for between two delay points
 * (maintenance_cost.c).
 */
#define FILE_STORE_COPY_BUFFER_SIZE (256 * 1024)

/* The backend's private state, ObjectStore.backend. */
typedef struct FileStore
{
	char	   *root;			/* absolute directory, no trailing slash */
	char	   *temp_dir;		/* <root>/_tmp */
} FileStore;

/* Working state of one listing. */
typedef struct FileStoreListing
{
	ObjectStore *store;
	const char *prefix;			/* keys must start with this ("" = all) */
	size_t		prefix_length;
	const char *bound;			/* keys must sort after this, or NULL */
	char	  **keys;			/* candidate keys, unsorted */
	int			key_count;
	int			key_capacity;
} FileStoreListing;

/* Constructor, called by objstore_open (objstore.c). */
extern void file_store_open(ObjectStore *store, const char *root_path,
							bool create_root);

/* Called by objstore_define_settings (objstore.c). */
extern void file_store_define_settings(void);

static ObjectStoreCreateResult file_store_create_if_absent(ObjectStore *store,
														   const char *key,
														   const char *data,
														   size_t len,
														   const char *put_id);
static ObjectStoreCreateResult file_store_create_from_file_if_absent(ObjectStore *store,
																	 const char *key,
																	 const char *local_path,
																	 const char *put_id);
static bool file_store_get_range(ObjectStore *store, const char *key,
								 int64 offset, int64 length, bool immutable,
								 StringInfo out, int64 *object_size);
static bool file_store_get_tail(ObjectStore *store, const char *key,
								int64 length, bool immutable, StringInfo out,
								int64 *object_size);
static bool file_store_get_put_id(ObjectStore *store, const char *key,
								  char **put_id);
static int64 file_store_remove_abandoned_uploads(ObjectStore *store,
												 TimestampTz older_than,
												 int64 *bytes);
static ObjectStoreListing *file_store_list(ObjectStore *store,
										   const char *prefix,
										   const char *start_after,
										   int max_keys,
										   const char *continuation);
static bool file_store_delete_object(ObjectStore *store, const char *key);
static void file_store_close(ObjectStore *store);

static void file_store_check_key(ObjectStore *store, const char *key);
static void file_store_check_prefix(ObjectStore *store, const char *prefix);
static char *file_store_object_path(ObjectStore *store, const char *key);
static char *file_store_parent_directory(const char *path);
static void file_store_fsync_directory(ObjectStore *store, const char *path,
									   const char *key, int elevel);
static void file_store_make_directory(ObjectStore *store, const char *path,
									  const char *key);
static int	file_store_open_unnamed_temp(ObjectStore *store, const char *key);
static void file_store_start_writeback(int fd, off_t offset, off_t nbytes);
static int	file_store_open_temp(ObjectStore *store, const char *key,
								 char **temp_path);
static void file_store_write_all(ObjectStore *store, int fd, const char *key,
								 const char *data, size_t len);
static void file_store_set_put_id(ObjectStore *store, int fd, const char *key,
								  const char *put_id);
static ObjectStoreCreateResult file_store_publish(ObjectStore *store,
												  const char *key, int fd,
												  const char *temp_path);
static ObjectStoreCreateResult file_store_finish_create(ObjectStore *store,
														const char *key,
														volatile int *fd,
														const char *temp_path,
														const char *put_id);
static int	file_store_open_object(ObjectStore *store, const char *key,
								   int64 *size);
static void file_store_read(ObjectStore *store, int fd, const char *key,
							int64 offset, int64 length, StringInfo out);
static void file_store_list_directory(FileStoreListing *listing,
									  const char *directory_path,
									  const char *directory_key);
static void file_store_list_candidate(void *arg, const char *key);

static const ObjectStoreOps file_store_ops = {
	.create_if_absent = file_store_create_if_absent,
	.create_from_file_if_absent = file_store_create_from_file_if_absent,
	.get_range = file_store_get_range,
	.get_tail = file_store_get_tail,
	.get_put_id = file_store_get_put_id,
	.list = file_store_list,
	.list_starts_after = true,
	.delete_object = file_store_delete_object,
	.remove_abandoned_uploads = file_store_remove_abandoned_uploads,
	.close = file_store_close
};

/*
 * A temporary file untouched this long has lost its writer, whatever grace
 * garbage collection runs with: a write in progress changes its file at
 * least every buffer, and links it into place right after its fsync.
 */
#define FILE_STORE_ABANDONED_MIN_AGE_S	300

/* Makes temporary names unique within this process. */
static uint32 file_store_temp_counter = 0;


/*
 * file_store_open
 *		Attach the file backend to store, rooted at root_path.
 *
 * root_path is absolute and canonical (objstore.c checked it).  With
 * create_root the directory is made now (the embedded default); otherwise it
 * is made by the first write, and a missing root reads as an empty store.
 */
void
file_store_open(ObjectStore *store, const char *root_path, bool create_root)
{
	FileStore  *file_store = palloc0(sizeof(FileStore));

	file_store->root = pstrdup(root_path);
	file_store->temp_dir = psprintf("%s/%s", root_path, FILE_STORE_TEMP_FOLDER);

	store->ops = &file_store_ops;
	store->backend = file_store;

	if (create_root)
		file_store_make_directory(store, file_store->root, "");
}

/*
 * file_store_close
 *		Free the backend state; a file store holds no open resources.
 */
static void
file_store_close(ObjectStore *store)
{
	FileStore  *file_store = (FileStore *) store->backend;

	if (file_store == NULL)
		return;
	pfree(file_store->root);
	pfree(file_store->temp_dir);
	pfree(file_store);
	store->backend = NULL;
}

/*
 * file_store_check_key
 *		Reject keys that are not plain relative names below the root.
 *
 * The upper layers build keys from fixed names and numbers, so a bad key is
 * a bug; refusing it here is defence in depth against a key that would
 * escape the location ("..", a leading '/'), alias another key ("a//b",
 * "./a", "a/"), or reach into the temporary folder.
 */
static void
file_store_check_key(ObjectStore *store, const char *key)
{
	FileStore  *file_store = (FileStore *) store->backend;
	const char *component;
	bool		first = true;

	if (key == NULL || key[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("object key must not be empty")));

	if (key[0] == '/')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid object key \"%s\"", key),
				 errdetail("Object keys are relative to the store location and must not start with \"/\".")));

	component = key;
	for (;;)
	{
		const char *end = strchr(component, '/');
		size_t		length = end ? (size_t) (end - component) : strlen(component);

		if (length == 0 ||
			(length == 1 && component[0] == '.') ||
			(length == 2 && component[0] == '.' && component[1] == '.'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid object key \"%s\"", key),
					 errdetail("Object keys must not contain empty, \".\" or \"..\" components.")));

		if (first && length == strlen(FILE_STORE_TEMP_FOLDER) &&
			strncmp(component, FILE_STORE_TEMP_FOLDER, length) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid object key \"%s\"", key),
					 errdetail("The folder \"%s\" at the root of a file location is reserved for objects being written.",
							   FILE_STORE_TEMP_FOLDER)));

		if (end == NULL)
			break;
		component = end + 1;
		first = false;
	}

	if (strlen(file_store->root) + 1 + strlen(key) >= MAXPGPATH)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("object key \"%s\" is too long for store \"%s\"",
						key, store->location)));
}

/*
 * file_store_check_prefix
 *		Reject listing prefixes that could not match any valid key.
 *
 * A prefix may end in the middle of a name or with '/', and may be empty;
 * what it may not do is start with '/' or contain a ".." component.  The
 * prefix is never used to build a path, so this too is defence in depth.
 */
static void
file_store_check_prefix(ObjectStore *store, const char *prefix)
{
	const char *component = prefix;

	if (prefix == NULL || prefix[0] == '\0')
		return;

	if (prefix[0] == '/')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid object key prefix \"%s\"", prefix),
				 errdetail("Object keys are relative to the store location and must not start with \"/\".")));

	for (;;)
	{
		const char *end = strchr(component, '/');
		size_t		length = end ? (size_t) (end - component) : strlen(component);

		if (length == 2 && component[0] == '.' && component[1] == '.')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid object key prefix \"%s\"", prefix),
					 errdetail("Object keys must not contain \"..\" components.")));
		if (end == NULL)
			break;
		component = end + 1;
	}
}

/*
 * file_store_object_path
 *		The file system path of a (checked) key.
 */
static char *
file_store_object_path(ObjectStore *store, const char *key)
{
	FileStore  *file_store = (FileStore *) store->backend;

	return psprintf("%s/%s", file_store->root, key);
}

/*
 * file_store_parent_directory
 *		The directory part of an absolute path ("/" for "/name").
 */
static char *
file_store_parent_directory(const char *path)
{
	const char *slash = strrchr(path, '/');

	Assert(slash != NULL);
	if (slash == path)
		return pstrdup("/");
	return pnstrdup(path, slash - path);
}

/*
 * file_store_fsync_directory
 *		fsync a directory, so that entries made or removed in it are durable.
 *
 * Some file systems refuse to fsync a directory (EBADF, EINVAL); like
 * PostgreSQL's own fsync_fname, we accept that.  elevel is ERROR where a
 * failure leaves nothing visible that we then report as failed, and
 * data_sync_elevel(ERROR) (PANIC unless data_sync_retry is on) after an
 * object has been published, matching how PostgreSQL treats an fsync failure
 * on data it has already acknowledged.
 */
static void
file_store_fsync_directory(ObjectStore *store, const char *path,
						   const char *key, int elevel)
{
	int			fd;
	int			save_errno;

	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		/* Opening a directory for reading is not allowed on every system. */
		if (errno == EACCES || errno == EISDIR)
			return;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not open directory \"%s\" for object \"%s\" in store \"%s\": %m",
						path, key, store->location)));
		return;
	}

	if (pg_fsync(fd) != 0 && errno != EBADF && errno != EINVAL)
	{
		save_errno = errno;
		CloseTransientFile(fd);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not fsync directory \"%s\" for object \"%s\" in store \"%s\": %m",
						path, key, store->location)));
		return;
	}

	CloseTransientFile(fd);
}

/*
 * file_store_make_directory
 *		Make a directory and any missing parents (mkdir -p), durably.
 *
 * Each directory we create is made durable by fsyncing its parent, so that
 * an object linked into it later (whose own directory is then fsync'd) is
 * reachable after a crash.  Racing creators are fine: EEXIST on a directory
 * counts as success.  key is only for messages.
 */
static void
file_store_make_directory(ObjectStore *store, const char *path,
						  const char *key)
{
	struct stat st;
	char	   *parent;

	check_stack_depth();

	if (stat(path, &st) == 0)
	{
		if (S_ISDIR(st.st_mode))
			return;
		errno = ENOTDIR;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\" for object \"%s\" in store \"%s\": %m",
						path, key, store->location)));
	}

	if (mkdir(path, pg_dir_create_mode) != 0)
	{
		if (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			return;
		if (errno != ENOENT || strcmp(path, "/") == 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create directory \"%s\" for object \"%s\" in store \"%s\": %m",
							path, key, store->location)));

		/* A parent is missing: make it, then try again. */
		parent = file_store_parent_directory(path);
		file_store_make_directory(store, parent, key);
		pfree(parent);

		if (mkdir(path, pg_dir_create_mode) != 0)
		{
			if (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
				return;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create directory \"%s\" for object \"%s\" in store \"%s\": %m",
							path, key, store->location)));
		}
	}

	parent = file_store_parent_directory(path);
	file_store_fsync_directory(store, parent, key, ERROR);
	pfree(parent);
}

/*
 * rollout_fdw.file_unnamed_temp_files: write objects through unnamed
 * temporary files where this process can.
 */
static bool file_store_use_unnamed_temp_files = true;

/*
 * Do unnamed temporary files work in this process?  1 yes, 0 no, -1 not
 * known yet (file_store_probe_unnamed_temp_files).
 */
static int	file_store_unnamed_temp_files_work = -1;

/* Define rollout_fdw.file_unnamed_temp_files; objstore.c calls this. */
void
file_store_define_settings(void)
{
	DefineCustomBoolVariable("rollout_fdw.file_unnamed_temp_files",
							 "Writes objects of file:// stores through unnamed temporary files (O_TMPFILE).",
							 "An unnamed file needs no name in the store's _tmp folder to be made and removed, and a writer that dies leaves nothing there. Where the file system or a missing /proc does not allow it, named files are used anyway.",
							 &file_store_use_unnamed_temp_files,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
	file_wal_log_define_settings();
}

/*
 * A new, unique path for a named temporary file in <root>/_tmp/.  The name
 * combines the process id, a per-process counter (or "probe" for the one
 * file_store_probe_unnamed_temp_files links) and random bits, so that
 * processes of different clusters sharing the directory (possibly on
 * different hosts, with equal pids) do not collide.
 */
static char *
file_store_temp_name(FileStore *file_store, int attempt, bool probe)
{
	uint32		random_bits = 0;

	if (!pg_strong_random(&random_bits, sizeof(random_bits)))
		random_bits = (uint32) MyStartTime ^ (uint32) attempt;
	if (probe)
		return psprintf("%s/%d.probe.%08x.tmp", file_store->temp_dir,
						MyProcPid, random_bits);
	return psprintf("%s/%d.%u.%08x.tmp", file_store->temp_dir, MyProcPid,
					++file_store_temp_counter, random_bits);
}

/*
 * Link the unnamed file open as fd to path (linkat through /proc/self/fd:
 * linkat with AT_EMPTY_PATH would need a capability the server does not
 * have); 0 or -1 with errno, like linkat.
 */
static int
file_store_link_unnamed(int fd, const char *path)
{
	char		fd_path[32];

	snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, fd_path, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

#ifdef O_TMPFILE
/*
 * Find out, once per process, whether an unnamed file opened as fd can be
 * given a name: by linking it to a temporary name and removing that again.
 * No /proc, or a sandbox that forbids linking through it, makes this
 * process use named files from then on.  The probe uses fd up: a file once
 * linked cannot be linked again after its name is gone.  A crash between
 * the link and the unlink leaves a named temporary file, which garbage
 * collection removes.
 */
static void
file_store_probe_unnamed_temp_files(ObjectStore *store, int fd)
{
	FileStore  *file_store = (FileStore *) store->backend;
	char	   *path = file_store_temp_name(file_store, 0, true);

	if (file_store_link_unnamed(fd, path) == 0)
	{
		file_store_unnamed_temp_files_work = 1;
		if (unlink(path) != 0)
			ereport(WARNING,
					(errcode_for_file_access(),
					 errmsg("could not remove temporary file \"%s\": %m", path)));
	}
	else
	{
		elog(DEBUG1, "store \"%s\": unnamed temporary files cannot be linked (%m); named ones are used",
			 store->location);
		file_store_unnamed_temp_files_work = 0;
	}
	pfree(path);
}
#endif

/*
 * file_store_open_unnamed_temp
 *		Create an unnamed temporary file in <root>/_tmp/ (O_TMPFILE); -1 when
 *		rollout_fdw.file_unnamed_temp_files is off or this process cannot
 *		(then named files are used).
 *
 * An unnamed file costs no name in _tmp/ to create and remove, and vanishes
 * by itself when its writer dies before linking it.
 */
static int
file_store_open_unnamed_temp(ObjectStore *store, const char *key)
{
#ifdef O_TMPFILE
	FileStore  *file_store = (FileStore *) store->backend;

	for (int attempt = 0;
		 file_store_use_unnamed_temp_files && file_store_unnamed_temp_files_work != 0;
		 attempt++)
	{
		int			fd = OpenTransientFile(file_store->temp_dir,
										   O_TMPFILE | O_WRONLY | PG_BINARY);

		if (fd >= 0 && file_store_unnamed_temp_files_work > 0)
			return fd;
		if (fd >= 0)
		{
			/* the first one is the probe's; open another if it worked */
			file_store_probe_unnamed_temp_files(store, fd);
			CloseTransientFile(fd);
		}
		else if (errno == ENOENT && attempt < 3)
			file_store_make_directory(store, file_store->temp_dir, key);
		else if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)
			file_store_unnamed_temp_files_work = 0; /* not on this file system */
		else
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create a temporary file in \"%s\" for object \"%s\" in store \"%s\": %m",
							file_store->temp_dir, key, store->location)));
	}
#endif
	return -1;
}

/*
 * file_store_open_temp
 *		Create a new temporary file in <root>/_tmp/: unnamed where possible
 *		(*temp_path is then NULL), else named by file_store_temp_name, with
 *		O_EXCL making a collision a retry rather than a shared file.
 *		Returns the descriptor, and the path in *temp_path.
 */
static int
file_store_open_temp(ObjectStore *store, const char *key, char **temp_path)
{
	FileStore  *file_store = (FileStore *) store->backend;
	int			unnamed_fd = file_store_open_unnamed_temp(store, key);

	*temp_path = NULL;
	if (unnamed_fd >= 0)
		return unnamed_fd;
	for (int attempt = 0;; attempt++)
	{
		char	   *path = file_store_temp_name(file_store, attempt, false);
		int			fd = OpenTransientFile(path, O_WRONLY | O_CREAT | O_EXCL | PG_BINARY);

		if (fd >= 0)
		{
			*temp_path = path;
			return fd;
		}

		if (errno == ENOENT && attempt < 3)
			file_store_make_directory(store, file_store->temp_dir, key);
		else if (errno != EEXIST || attempt >= 10)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create temporary file \"%s\" for object \"%s\" in store \"%s\": %m",
							path, key, store->location)));
		pfree(path);
	}
}

/*
 * file_store_write_all
 *		Write len bytes to fd, failing loudly on a short write.
 */
static void
file_store_write_all(ObjectStore *store, int fd, const char *key,
					 const char *data, size_t len)
{
	while (len > 0)
	{
		size_t		chunk = Min(len, (size_t) MaxAllocSize);
		ssize_t		written;

		errno = 0;
		written = write(fd, data, chunk);
		if (written < 0 && errno == EINTR)
			continue;
		if (written <= 0)
		{
			/* A short write with no error set means the disk is full. */
			if (errno == 0)
				errno = ENOSPC;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write object \"%s\" in store \"%s\": %m",
							key, store->location)));
		}
		data += written;
		len -= written;
	}
}

/*
 * file_store_set_put_id
 *		Attach the put id to the object's inode as an extended attribute.
 *
 * Done on the temporary file, before fsync and before the object becomes
 * visible, so that no reader can see the object without its put id.  A file
 * system without user extended attributes keeps no put id (see the header
 * comment for why that is safe locally).
 */
static void
file_store_set_put_id(ObjectStore *store, int fd, const char *key,
					  const char *put_id)
{
	size_t		length;

	if (put_id == NULL)
		return;

	length = strlen(put_id);
	if (length > FILE_STORE_MAX_PUT_ID_LENGTH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("put id for object \"%s\" is too long", key)));

	if (fsetxattr(fd, FILE_STORE_PUT_ID_XATTR, put_id, length, 0) != 0)
	{
		if (errno == ENOTSUP || errno == EOPNOTSUPP)
		{
			elog(DEBUG1, "store \"%s\" does not support extended attributes; put id of object \"%s\" not kept",
				 store->location, key);
			return;
		}
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not set put id of object \"%s\" in store \"%s\": %m",
						key, store->location)));
	}
}

/*
 * file_store_publish
 *		Give a complete, fsync'd temporary file its key, unless taken: the
 *		named temp_path, or with temp_path NULL the unnamed file open as fd.
 *
 * A link is the create-if-absent: it never replaces an existing name, and
 * EEXIST is the "already exists" answer.  A missing parent directory
 * (ENOENT) is created and the link retried.  Once the link succeeds the
 * write has landed, so nothing after it may report failure except an fsync
 * failure, which is treated like one on PostgreSQL's own data.  A temporary
 * name is removed in both outcomes.
 */
static ObjectStoreCreateResult
file_store_publish(ObjectStore *store, const char *key, int fd,
				   const char *temp_path)
{
	char	   *path = file_store_object_path(store, key);
	char	   *directory = file_store_parent_directory(path);
	int			attempt;

	for (attempt = 0;; attempt++)
	{
		if ((temp_path != NULL ? link(temp_path, path) :
			 file_store_link_unnamed(fd, path)) == 0)
			break;

		if (errno == EEXIST)
		{
			struct stat st;

			/*
			 * A folder of that name holds other keys, which a bucket would
			 * allow but a directory cannot; reading the key would find no
			 * object, so answering "already exists" would be a lie.
			 */
			if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_FILE),
						 errmsg("could not create object \"%s\" in store \"%s\": a folder of that name holds other objects",
								key, store->location)));

			if (temp_path != NULL && unlink(temp_path) != 0)
				ereport(WARNING,
						(errcode_for_file_access(),
						 errmsg("could not remove temporary file \"%s\": %m",
								temp_path)));
			pfree(path);
			pfree(directory);
			return OBJSTORE_ALREADY_EXISTS;
		}

		if (errno != ENOENT || attempt >= 3)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create object \"%s\" in store \"%s\": %m",
							key, store->location)));

		file_store_make_directory(store, directory, key);
	}

	if (temp_path != NULL && unlink(temp_path) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not remove temporary file \"%s\": %m",
						temp_path)));

	PG_TRY();
	{
		file_store_fsync_directory(store, directory, key, data_sync_elevel(ERROR));
	}
	PG_CATCH();
	{
		/* linked: the create happened, durably or not (objstore.h) */
		objstore_note_maybe_applied();
		PG_RE_THROW();
	}
	PG_END_TRY();

	pfree(path);
	pfree(directory);
	return OBJSTORE_CREATED;
}

/*
 * file_store_finish_create
 *		Attach the put id to a written temporary file, fsync it and publish
 *		it (file_store_publish); *fd is closed, and -1, on return.
 *
 * A named file is closed before it is linked, so that a close error still
 * fails the create; an unnamed one can only be linked while open, and its
 * close after the link cannot lose what the fsync made durable.
 */
static ObjectStoreCreateResult
file_store_finish_create(ObjectStore *store, const char *key,
						 volatile int *fd, const char *temp_path,
						 const char *put_id)
{
	ObjectStoreCreateResult result;

	file_store_set_put_id(store, *fd, key, put_id);
	if (pg_fsync(*fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not fsync object \"%s\" in store \"%s\": %m",
						key, store->location)));
	if (temp_path == NULL)
	{
		result = file_store_publish(store, key, *fd, NULL);
		CloseTransientFile(*fd);
		*fd = -1;
		return result;
	}
	if (CloseTransientFile(*fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close object \"%s\" in store \"%s\": %m",
						key, store->location)));
	*fd = -1;
	return file_store_publish(store, key, -1, temp_path);
}

/*
 * file_store_create_file
 *		Create key as a file with the given bytes unless it exists.
 *
 * Write a temporary file, then attach the put id, fsync and publish it
 * (file_store_finish_create).  On error the temporary file is closed and
 * removed before the error propagates.
 */
static ObjectStoreCreateResult
file_store_create_file(ObjectStore *store, const char *key,
					   const char *data, size_t len, const char *put_id)
{
	char	   *temp_path = NULL;
	volatile int fd = -1;
	ObjectStoreCreateResult result = OBJSTORE_ALREADY_EXISTS;

	fd = file_store_open_temp(store, key, &temp_path);

	PG_TRY();
	{
		file_store_write_all(store, fd, key, data, len);
		result = file_store_finish_create(store, key, &fd, temp_path, put_id);
	}
	PG_CATCH();
	{
		if (fd >= 0)
			CloseTransientFile(fd);
		if (temp_path != NULL)
			unlink(temp_path);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (temp_path != NULL)
		pfree(temp_path);
	return result;
}

/*
 * file_store_create_file_from_file
 *		Create key as a file with the contents of a local file unless it
 *		exists.
 *
 * The file is copied into a temporary object rather than hard-linked: a
 * link would share the inode with the caller's file, so anything the caller
 * later did to that file (rewrite, truncate, reuse as a spill file) would
 * change an object that must be immutable.  The copy costs one extra write
 * of the data, which is small next to the fsync it is followed by.  The
 * local file is left in place.
 */
static ObjectStoreCreateResult
file_store_create_file_from_file(ObjectStore *store, const char *key,
								 const char *local_path, const char *put_id)
{
	char	   *temp_path = NULL;
	volatile int source_fd = -1;
	volatile int fd = -1;
	char	   *buffer;
	volatile off_t copied = 0;
	ObjectStoreCreateResult result = OBJSTORE_ALREADY_EXISTS;

	buffer = palloc(FILE_STORE_COPY_BUFFER_SIZE);
	fd = file_store_open_temp(store, key, &temp_path);

	PG_TRY();
	{
		source_fd = OpenTransientFile(local_path, O_RDONLY | PG_BINARY);
		if (source_fd < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not open file \"%s\" to create object \"%s\" in store \"%s\": %m",
							local_path, key, store->location)));

		for (;;)
		{
			ssize_t		nread;

			CHECK_FOR_INTERRUPTS();

			nread = read(source_fd, buffer, FILE_STORE_COPY_BUFFER_SIZE);
			if (nread < 0 && errno == EINTR)
				continue;
			if (nread < 0)
				ereport(ERROR,
						(errcode_for_file_access(),
						 errmsg("could not read file \"%s\" to create object \"%s\" in store \"%s\": %m",
								local_path, key, store->location)));
			if (nread == 0)
				break;
			file_store_write_all(store, fd, key, buffer, nread);

			/*
			 * Start writing this chunk back now, so that the fsync at the end
			 * finds little left to write: a fragment of a hundred megabytes
			 * written back in one burst puts every commit's fsync behind it
			 * in the device's queue.  A maintenance pass also pays for the
			 * chunk here and yields (maintenance_cost.c).
			 */
			file_store_start_writeback(fd, copied, nread);
			copied += nread;
			maintenance_cost_charge_written_bytes(nread);
			maintenance_cost_delay_point();
		}

		CloseTransientFile(source_fd);
		source_fd = -1;

		result = file_store_finish_create(store, key, &fd, temp_path, put_id);
	}
	PG_CATCH();
	{
		if (source_fd >= 0)
			CloseTransientFile(source_fd);
		if (fd >= 0)
			CloseTransientFile(fd);
		if (temp_path != NULL)
			unlink(temp_path);
		PG_RE_THROW();
	}
	PG_END_TRY();

	pfree(buffer);
	if (temp_path != NULL)
		pfree(temp_path);
	return result;
}

/*
 * file_store_create_wal_entry
 *		Create the WAL entry key (at position) unless it exists: appended to
 *		its folder's log (file_wal_log.c) when the log takes it, otherwise
 *		as a file.
 *
 * Both forms are decided under the log's lock, so that of two writers of
 * the position exactly one wins whichever form each would use.  A name that
 * is a folder is left to the file path, which reports it.
 */
static ObjectStoreCreateResult
file_store_create_wal_entry(ObjectStore *store, const char *key,
							int64 position, size_t folder_length,
							const char *data, size_t len,
							const char *local_path, const char *put_id)
{
	FileStore  *file_store = (FileStore *) store->backend;
	char	   *folder = psprintf("%s/%.*s", file_store->root,
								  (int) folder_length - 1, key);
	char	   *path = file_store_object_path(store, key);
	FileWalLogLock *lock;
	struct stat st;
	volatile ObjectStoreCreateResult result = OBJSTORE_ALREADY_EXISTS;

	lock = file_wal_log_lock(store, folder, key, true);
	if (lock == NULL)
	{
		/* the first entry of a folder makes it */
		file_store_make_directory(store, folder, key);
		lock = file_wal_log_lock(store, folder, key, true);
		if (lock == NULL)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create the WAL log of object \"%s\" in store \"%s\": %m",
							key, store->location)));
	}
	PG_TRY();
	{
		if (file_wal_log_holds(lock, position) ||
			(lstat(path, &st) == 0 && !S_ISDIR(st.st_mode)))
			result = OBJSTORE_ALREADY_EXISTS;
		else if (local_path == NULL &&
				 file_wal_log_append(lock, position, data, len, put_id))
			result = OBJSTORE_CREATED;
		else
		{
			/*
			 * A record before it, which a writer killed before its sync may
			 * have left, is synced first: no sync of this file's would make
			 * it durable, and the file must not be acknowledged over a hole.
			 * (The name of a file before it is kept by this one's sync of the
			 * folder.)
			 */
			file_wal_log_sync_entry(lock, position - 1);
			if (local_path == NULL)
				result = file_store_create_file(store, key, data, len, put_id);
			else
				result = file_store_create_file_from_file(store, key, local_path,
														  put_id);
		}
	}
	PG_FINALLY();
	{
		file_wal_log_unlock(lock);
	}
	PG_END_TRY();
	pfree(folder);
	pfree(path);
	return result;
}

/*
 * file_store_create_if_absent
 *		Create key with the given bytes unless it exists.
 */
static ObjectStoreCreateResult
file_store_create_if_absent(ObjectStore *store, const char *key,
							const char *data, size_t len, const char *put_id)
{
	int64		position;
	size_t		folder_length;

	file_store_check_key(store, key);
	if (file_wal_log_key(key, &position, &folder_length))
		return file_store_create_wal_entry(store, key, position, folder_length,
										   data, len, NULL, put_id);
	return file_store_create_file(store, key, data, len, put_id);
}

/*
 * file_store_create_from_file_if_absent
 *		Create key with the contents of a local file unless it exists.
 */
static ObjectStoreCreateResult
file_store_create_from_file_if_absent(ObjectStore *store, const char *key,
									  const char *local_path,
									  const char *put_id)
{
	int64		position;
	size_t		folder_length;

	file_store_check_key(store, key);
	if (file_wal_log_key(key, &position, &folder_length))
		return file_store_create_wal_entry(store, key, position, folder_length,
										   NULL, 0, local_path, put_id);
	return file_store_create_file_from_file(store, key, local_path, put_id);
}

/*
 * Ask the kernel to start writing a range of fd back.  Not PostgreSQL's
 * pg_flush_data: that one escalates a failure to PANIC (data_sync_retry),
 * whereas here a failure only means the fsync that follows has more to do,
 * and reports whatever is really wrong as an ERROR.
 */
static void
file_store_start_writeback(int fd, off_t offset, off_t nbytes)
{
#ifdef HAVE_SYNC_FILE_RANGE
	if (enableFsync)
		(void) sync_file_range(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE);
#endif
}

/*
 * file_store_report_unreadable
 *		ERROR for an object whose name exists but cannot be read: open(2)
 *		(at_open) or fstat(2) failed with failed_errno, or, failed_errno 0,
 *		the name is not a regular file.
 *
 * Something that is not a file where an object should be (a directory, a
 * device) is not "no object": reading on as if the object were missing
 * would, for _store.json, skip the check of the table against the store.
 */
static void
pg_attribute_noreturn()
file_store_report_unreadable(ObjectStore *store, const char *key, const char *path,
							 bool at_open, int failed_errno)
{
	errno = failed_errno;
	if (failed_errno != 0 && at_open)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open object \"%s\" in store \"%s\": %m",
						key, store->location)));
	if (failed_errno != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat object \"%s\" in store \"%s\": %m",
						key, store->location)));
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("object \"%s\" in store \"%s\" is not a regular file",
					key, store->location),
			 errdetail("\"%s\" is a directory or a special file.", path)));
}

/*
 * file_store_open_object
 *		Open an object for reading; -1 if there is no object at key.
 *
 * A key whose path is missing or runs through a regular file (ENOTDIR) has
 * no object.  A key naming a directory or another non-file is an ERROR, not
 * a missing object: the directory occupies the name, so nothing could ever
 * be created there.  *size receives the object's size.
 */
static int
file_store_open_object(ObjectStore *store, const char *key, int64 *size)
{
	char	   *path = file_store_object_path(store, key);
	struct stat st;
	int			stat_errno;
	int			fd;

	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT || errno == ENOTDIR)
		{
			pfree(path);
			return -1;
		}
		file_store_report_unreadable(store, key, path, true, errno);
	}
	stat_errno = fstat(fd, &st) != 0 ? errno : 0;
	if (stat_errno != 0 || !S_ISREG(st.st_mode))
	{
		CloseTransientFile(fd);
		file_store_report_unreadable(store, key, path, false, stat_errno);
	}

	pfree(path);
	*size = (int64) st.st_size;
	return fd;
}

/*
 * file_store_read
 *		Append length bytes at offset of an open object to *out.
 *
 * The caller has already clipped the range to the object.  Objects are
 * immutable, so reading fewer bytes than the size fstat reported means the
 * file was damaged behind our back.
 */
static void
file_store_read(ObjectStore *store, int fd, const char *key,
				int64 offset, int64 length, StringInfo out)
{
	if (length <= 0)
		return;

	if (length > (int64) (MaxAllocSize - 1) - out->len)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("could not read object \"%s\" in store \"%s\": range of " INT64_FORMAT " bytes is too large",
						key, store->location, length)));

	enlargeStringInfo(out, (int) length);

	while (length > 0)
	{
		ssize_t		nread;

		nread = pg_pread(fd, out->data + out->len, (size_t) length,
						 (off_t) offset);
		if (nread < 0 && errno == EINTR)
			continue;
		if (nread < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read object \"%s\" in store \"%s\": %m",
							key, store->location)));
		if (nread == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("could not read object \"%s\" in store \"%s\": unexpected end of file at offset " INT64_FORMAT,
							key, store->location, offset)));
		out->len += (int) nread;
		offset += nread;
		length -= nread;
	}
	out->data[out->len] = '\0';
}

/* ----------------------------------------------------------------
 * Objects kept open between reads
 *
 * A lookup reads a fragment several times: the key pages of a row group,
 * then one page of each column it returns.  Opening, checking and closing
 * the file for each read costs three system calls more than the pread
 * itself, a good part of a lookup on a machine where system calls are dear.
 * So a read of an object whose name is never reused
 * (ObjectStoreRead.immutable: base fragments and ingest segments) keeps its
 * file open for the next one, until the end of the transaction (a statement,
 * in autocommit): a deleted fragment's space is then not held by a backend
 * that idles, and an erasure is complete once the transactions that read
 * the object have ended.  The files are fd.c's virtual file descriptors,
 * which close and reopen the kernel's descriptors themselves when the
 * process runs short; at most FILE_STORE_KEPT_OPEN are kept, the least
 * recently used closed first.  A merge read takes turns among its sources,
 * so fewer slots than it has sources would reopen a file for nearly every
 * read: there are enough for a compaction's set of the most cluster ranges
 * a table allows (256, cluster_ranges.h) and then some.  A slot is matched
 * by the hash of its path before the path itself.  An object kept open reads the bytes it
 * always had after garbage collection deleted it, which are what a reader
 * whose snapshot still names it expects; once its descriptor is closed, it
 * reads as missing, like any deleted object.
 * ----------------------------------------------------------------
 */
#define FILE_STORE_KEPT_OPEN	512

typedef struct KeptObject
{
	char	   *path;			/* NULL: unused slot */
	uint32		path_hash;
	File		file;
	int64		size;
	uint64		last_used;
} KeptObject;

static KeptObject kept_objects[FILE_STORE_KEPT_OPEN];
static uint64 kept_objects_clock = 0;
static bool kept_objects_callback_registered = false;

static void
file_store_forget_kept(KeptObject *kept)
{
	FileClose(kept->file);
	pfree(kept->path);
	kept->path = NULL;
}

/* Transaction callback: close every kept-open object when it ends. */
static void
file_store_close_kept(XactEvent event, void *arg)
{
	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PARALLEL_COMMIT &&
		event != XACT_EVENT_PARALLEL_ABORT && event != XACT_EVENT_PREPARE)
		return;
	for (int i = 0; i < FILE_STORE_KEPT_OPEN; i++)
		if (kept_objects[i].path != NULL)
			file_store_forget_kept(&kept_objects[i]);
}

/*
 * The kept-open object of key, opened now if need be; NULL when it does not
 * exist.  A name that is not a regular file is an ERROR, as for
 * file_store_open_object.
 */
static KeptObject *
file_store_kept_object(ObjectStore *store, const char *key)
{
	char	   *path = file_store_object_path(store, key);
	uint32		path_hash = hash_bytes((const unsigned char *) path, strlen(path));
	KeptObject *slot = NULL;
	File		file;
	struct stat st;
	int			stat_errno;

	for (int i = 0; i < FILE_STORE_KEPT_OPEN; i++)
	{
		KeptObject *kept = &kept_objects[i];

		if (kept->path != NULL && kept->path_hash == path_hash &&
			strcmp(kept->path, path) == 0)
		{
			kept->last_used = ++kept_objects_clock;
			pfree(path);
			return kept;
		}
		if (slot == NULL || (slot->path != NULL &&
							 (kept->path == NULL || kept->last_used < slot->last_used)))
			slot = kept;
	}

	if (!kept_objects_callback_registered)
	{
		RegisterXactCallback(file_store_close_kept, NULL);
		kept_objects_callback_registered = true;
	}
	file = PathNameOpenFile(path, O_RDONLY | PG_BINARY);
	if (file < 0)
	{
		if (errno == ENOENT || errno == ENOTDIR)
		{
			pfree(path);
			return NULL;
		}
		file_store_report_unreadable(store, key, path, true, errno);
	}
	stat_errno = fstat(FileGetRawDesc(file), &st) != 0 ? errno : 0;
	if (stat_errno != 0 || !S_ISREG(st.st_mode))
	{
		FileClose(file);
		file_store_report_unreadable(store, key, path, false, stat_errno);
	}

	if (slot->path != NULL)
		file_store_forget_kept(slot);
	slot->path = MemoryContextStrdup(TopMemoryContext, path);
	slot->path_hash = path_hash;
	slot->file = file;
	slot->size = st.st_size;
	slot->last_used = ++kept_objects_clock;
	pfree(path);
	return slot;
}

/*
 * Append length bytes at offset of a kept-open object to *out.  False when
 * it cannot be read any more because it is gone (its descriptor was closed
 * under pressure and the file deleted since): the caller then treats the
 * object as missing.
 */
static bool
file_store_read_kept(ObjectStore *store, KeptObject *kept, const char *key,
					 int64 offset, int64 length, StringInfo out)
{
	if (length <= 0)
		return true;
	if (length > (int64) (MaxAllocSize - 1) - out->len)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("could not read object \"%s\" in store \"%s\": range of " INT64_FORMAT " bytes is too large",
						key, store->location, length)));
	enlargeStringInfo(out, (int) length);
	while (length > 0)
	{
		int			nread = FileRead(kept->file, out->data + out->len,
									 (int) length, (off_t) offset,
									 WAIT_EVENT_DATA_FILE_READ);

		if (nread < 0 && errno == EINTR)
			continue;
		if (nread < 0 && (errno == ENOENT || errno == ENOTDIR))
		{
			file_store_forget_kept(kept);
			out->data[out->len] = '\0';
			return false;
		}
		if (nread < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read object \"%s\" in store \"%s\": %m",
							key, store->location)));
		if (nread == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("could not read object \"%s\" in store \"%s\": unexpected end of file at offset " INT64_FORMAT,
							key, store->location, offset)));
		out->len += nread;
		offset += nread;
		length -= nread;
	}
	out->data[out->len] = '\0';
	return true;
}

/*
 * The bytes [offset, offset + length) of key (tail: its last length bytes),
 * clipped to the object, from its kept-open file; false if it does not exist.
 */
static bool
file_store_get_kept(ObjectStore *store, const char *key, bool tail,
					int64 offset, int64 length, StringInfo out,
					int64 *object_size)
{
	KeptObject *kept = file_store_kept_object(store, key);
	int64		size;

	if (kept == NULL)
		return false;
	size = kept->size;
	objstore_clip_range(size, tail, &offset, &length);
	if (!file_store_read_kept(store, kept, key, offset, length, out))
		return false;
	if (object_size != NULL)
		*object_size = size;
	return true;
}

/* Does key name a WAL entry, which its folder's log may hold? */
static bool
file_store_is_wal_entry(const char *key)
{
	int64		position;
	size_t		folder_length;

	return file_wal_log_key(key, &position, &folder_length);
}

/*
 * Read key from its folder's WAL log, as get_range (tail: get_tail) would;
 * false when it is no WAL entry or the log does not hold it.
 */
static bool
file_store_read_wal_log(ObjectStore *store, const char *key, int64 offset,
						int64 length, bool tail, StringInfo out,
						int64 *object_size, char **put_id)
{
	FileStore  *file_store = (FileStore *) store->backend;
	int64		position;
	size_t		folder_length;
	char	   *folder;
	bool		found;

	if (!file_wal_log_key(key, &position, &folder_length))
		return false;
	folder = psprintf("%s/%.*s", file_store->root, (int) folder_length - 1, key);
	found = file_wal_log_read(store, folder, key, position, offset, length,
							  tail, out, object_size, put_id);
	pfree(folder);
	return found;
}

/*
 * file_store_get_range
 *		Append bytes [offset, offset + length) of key to *out, clipped to the
 *		object; length < 0 reads to the end.  False if key does not exist.
 */
static bool
file_store_get_range(ObjectStore *store, const char *key,
					 int64 offset, int64 length, bool immutable,
					 StringInfo out, int64 *object_size)
{
	int			fd;
	int64		size = 0;

	file_store_check_key(store, key);
	if (immutable && !file_store_is_wal_entry(key))
		return file_store_get_kept(store, key, false, offset, length, out,
								   object_size);

	fd = file_store_open_object(store, key, &size);
	if (fd < 0)
		return file_store_read_wal_log(store, key, offset, length, false, out,
									   object_size, NULL);

	objstore_clip_range(size, false, &offset, &length);
	file_store_read(store, fd, key, offset, length, out);
	CloseTransientFile(fd);

	if (object_size != NULL)
		*object_size = size;
	return true;
}

/*
 * file_store_get_tail
 *		Append the last length bytes of key (all of it if smaller, or if
 *		length < 0) to *out.  False if key does not exist.
 */
static bool
file_store_get_tail(ObjectStore *store, const char *key,
					int64 length, bool immutable, StringInfo out,
					int64 *object_size)
{
	int			fd;
	int64		size = 0;
	int64		offset = 0;

	file_store_check_key(store, key);
	if (immutable && !file_store_is_wal_entry(key))
		return file_store_get_kept(store, key, true, 0, length, out,
								   object_size);

	fd = file_store_open_object(store, key, &size);
	if (fd < 0)
		return file_store_read_wal_log(store, key, 0, length, true, out,
									   object_size, NULL);

	objstore_clip_range(size, true, &offset, &length);
	file_store_read(store, fd, key, offset, length, out);
	CloseTransientFile(fd);

	if (object_size != NULL)
		*object_size = size;
	return true;
}

/*
 * file_store_get_put_id
 *		Read the put id kept with key; *put_id is NULL if it has none.
 */
static bool
file_store_get_put_id(ObjectStore *store, const char *key, char **put_id)
{
	int			fd;
	int64		size;
	char		buffer[FILE_STORE_MAX_PUT_ID_LENGTH + 1];
	ssize_t		length;

	file_store_check_key(store, key);

	fd = file_store_open_object(store, key, &size);
	if (fd < 0)
	{
		StringInfoData ignored;
		bool		found;

		initStringInfo(&ignored);
		found = file_store_read_wal_log(store, key, 0, 0, false, &ignored,
										NULL, put_id);
		pfree(ignored.data);
		return found;
	}

	length = fgetxattr(fd, FILE_STORE_PUT_ID_XATTR, buffer,
					   FILE_STORE_MAX_PUT_ID_LENGTH);
	if (length < 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		if (save_errno == ENODATA || save_errno == ENOTSUP ||
			save_errno == EOPNOTSUPP)
		{
			*put_id = NULL;
			return true;
		}
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read put id of object \"%s\" in store \"%s\": %m",
						key, store->location)));
	}

	CloseTransientFile(fd);
	*put_id = pnstrdup(buffer, length);
	return true;
}

/*
 * file_store_list_candidate
 *		Remember a key of a listing if it has the prefix and sorts after the
 *		bound (arg is the FileStoreListing, for file_wal_log_list).
 */
static void
file_store_list_candidate(void *arg, const char *key)
{
	FileStoreListing *listing = (FileStoreListing *) arg;

	if (strncmp(key, listing->prefix, listing->prefix_length) != 0)
		return;
	if (listing->bound != NULL && strcmp(key, listing->bound) <= 0)
		return;
	if (listing->key_count >= listing->key_capacity)
	{
		listing->key_capacity *= 2;
		listing->keys = repalloc(listing->keys,
								 listing->key_capacity * sizeof(char *));
	}
	listing->keys[listing->key_count++] = pstrdup(key);
}

/*
 * file_store_list_directory
 *		Collect the candidate keys at and below one directory.
 *
 * directory_key is the key prefix the directory stands for ("" at the root,
 * otherwise ending in '/').  Whole subtrees are skipped when no key in them
 * can match: when the prefix diverges from the subtree's key prefix, or when
 * every key in the subtree sorts at or before the bound (the start_after or
 * continuation), which keeps later pages of a long listing cheap.  Files are
 * filtered by name alone; they are stat'ed only if they make the page.
 * Entries that are neither regular files nor directories (symbolic links
 * included, which could form loops) are not objects and are skipped.
 */
static void
file_store_list_directory(FileStoreListing *listing,
						  const char *directory_path,
						  const char *directory_key)
{
	DIR		   *dir;
	struct dirent *de;
	StringInfoData key;
	StringInfoData path;
	bool		at_root = (directory_key[0] == '\0');
	bool		has_wal_log = false;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();

	dir = AllocateDir(directory_path);
	if (dir == NULL)
	{
		/* A root not yet written to, or a name that is a file: no keys. */
		if (errno == ENOENT || errno == ENOTDIR)
			return;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open directory \"%s\" to list store \"%s\": %m",
						directory_path, listing->store->location)));
	}

	initStringInfo(&key);
	initStringInfo(&path);

	while ((de = ReadDir(dir, directory_path)) != NULL)
	{
		PGFileType	type;
		size_t		compare_length;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (at_root && strcmp(de->d_name, FILE_STORE_TEMP_FOLDER) == 0)
			continue;
		if (file_wal_log_own_file(directory_key, de->d_name))
		{
			has_wal_log = true;
			continue;
		}

		resetStringInfo(&key);
		appendStringInfoString(&key, directory_key);
		appendStringInfoString(&key, de->d_name);

		resetStringInfo(&path);
		appendStringInfo(&path, "%s/%s", directory_path, de->d_name);

		type = get_dirent_type(path.data, de, false, DEBUG1);

		if (type == PGFILETYPE_REG)
			file_store_list_candidate(listing, key.data);
		else if (type == PGFILETYPE_DIR)
		{
			appendStringInfoChar(&key, '/');

			/* Descend only if the prefix and this subtree can meet. */
			compare_length = Min((size_t) key.len, listing->prefix_length);
			if (strncmp(key.data, listing->prefix, compare_length) != 0)
				continue;

			/* Skip a subtree whose keys all sort at or before the bound. */
			if (listing->bound != NULL &&
				strncmp(key.data, listing->bound, key.len) < 0)
				continue;

			file_store_list_directory(listing, path.data, key.data);
		}
	}

	FreeDir(dir);
	pfree(key.data);
	pfree(path.data);

	if (has_wal_log)
		file_wal_log_list(listing->store, directory_path, directory_key,
						  listing->bound, file_store_list_candidate, listing);
}

/*
 * The length of the directory part of prefix (up to and including its last
 * '/') where a listing may start instead of at the root, or 0 to walk from
 * the root.  Every key under the prefix lies in that directory's subtree,
 * and the walk from the root would descend exactly along it, so starting
 * there lists the same keys without reading the directories above it (the
 * root holds every store of the location).  Only plain names qualify: the
 * walk from the root never produces a key with an empty, "." or ".."
 * component, nor one under the temporary folder.  A symbolic link among the
 * prefix's own directories is followed, as reading an object by its key
 * follows it; below the start the walk skips links as before.
 */
static size_t
file_store_list_start_length(const char *prefix)
{
	const char *last_slash = strrchr(prefix, '/');
	const char *component = prefix;

	if (last_slash == NULL)
		return 0;
	while (component <= last_slash)
	{
		const char *end = strchr(component, '/');
		size_t		length = end - component;

		if (length == 0 ||
			(length == 1 && component[0] == '.') ||
			(length == 2 && component[0] == '.' && component[1] == '.') ||
			(component == prefix && length == strlen(FILE_STORE_TEMP_FOLDER) &&
			 strncmp(component, FILE_STORE_TEMP_FOLDER, length) == 0))
			return 0;
		component = end + 1;
	}
	return last_slash - prefix + 1;
}

/*
 * Drop repeated keys of a sorted array (an entry both in a WAL log and as a
 * file); returns the new count.
 */
static int
file_store_list_unique(char **keys, int count)
{
	int			kept = 0;

	for (int i = 0; i < count; i++)
		if (kept == 0 || strcmp(keys[kept - 1], keys[i]) != 0)
			keys[kept++] = keys[i];
	return kept;
}

/*
 * Add key to page if it is an entry of a WAL log that the listing found
 * (file_wal_log_list has just looked at its folder).
 */
static void
file_store_list_wal_log_entry(ObjectStore *store, ObjectStoreListing *page,
							  const char *key)
{
	FileStore  *file_store = (FileStore *) store->backend;
	int64		position;
	size_t		folder_length;
	int64		size;
	TimestampTz modified;
	char	   *folder;
	bool		found;

	if (!file_wal_log_key(key, &position, &folder_length))
		return;
	folder = psprintf("%s/%.*s", file_store->root, (int) folder_length - 1, key);
	found = file_wal_log_stat(folder, position, &size, &modified);
	pfree(folder);
	if (found)
	{
		ObjectStoreEntry *entry = &page->entries[page->count++];

		entry->key = pstrdup(key);
		entry->size = size;
		entry->modified = modified;
	}
}

/*
 * file_store_list
 *		One page of the keys starting with prefix, after start_after and the
 *		continuation token, in byte order.
 *
 * The continuation token is the last key of the page: the next page lists
 * what sorts after it at the time it is asked for.  So a key created between
 * pages is listed if and only if it sorts after the page boundary, as with
 * S3.  The walk happens in a scratch memory context; only the page is
 * copied out.
 */
static ObjectStoreListing *
file_store_list(ObjectStore *store, const char *prefix,
				const char *start_after, int max_keys,
				const char *continuation)
{
	FileStore  *file_store = (FileStore *) store->backend;
	MemoryContext caller_context = CurrentMemoryContext;
	MemoryContext walk_context;
	FileStoreListing listing;
	ObjectStoreListing *page;
	int			page_keys;
	int			i;
	size_t		start_length;

	file_store_check_prefix(store, prefix);
	if (max_keys <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid page size %d for a listing of store \"%s\"",
						max_keys, store->location)));

	memset(&listing, 0, sizeof(listing));
	listing.store = store;
	listing.prefix = prefix ? prefix : "";
	listing.prefix_length = strlen(listing.prefix);

	/* The token is never before start_after, but take the later anyway. */
	listing.bound = start_after;
	if (continuation != NULL &&
		(listing.bound == NULL || strcmp(continuation, listing.bound) > 0))
		listing.bound = continuation;

	walk_context = AllocSetContextCreate(CurrentMemoryContext,
										 "rollout file store listing",
										 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(walk_context);

	listing.key_capacity = 64;
	listing.keys = palloc(listing.key_capacity * sizeof(char *));
	start_length = file_store_list_start_length(listing.prefix);
	if (start_length == 0)
		file_store_list_directory(&listing, file_store->root, "");
	else
	{
		char	   *start_key = pnstrdup(listing.prefix, start_length);

		/* the directory's path without the key's trailing '/' */
		file_store_list_directory(&listing,
								  psprintf("%s/%.*s", file_store->root,
										   (int) start_length - 1, start_key),
								  start_key);
	}

	qsort(listing.keys, listing.key_count, sizeof(char *), pg_qsort_strcmp);
	listing.key_count = file_store_list_unique(listing.keys, listing.key_count);

	MemoryContextSwitchTo(caller_context);

	page_keys = Min(listing.key_count, max_keys);
	page = palloc0(sizeof(ObjectStoreListing));
	page->entries = palloc0(Max(page_keys, 1) * sizeof(ObjectStoreEntry));
	page->count = 0;

	for (i = 0; i < page_keys; i++)
	{
		char	   *path = psprintf("%s/%s", file_store->root, listing.keys[i]);
		struct stat st;
		ObjectStoreEntry *entry;

		if (stat(path, &st) != 0)
		{
			/* An entry of a WAL log, or deleted since: no longer listed. */
			if (errno == ENOENT || errno == ENOTDIR)
			{
				pfree(path);
				file_store_list_wal_log_entry(store, page, listing.keys[i]);
				continue;
			}
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not stat object \"%s\" in store \"%s\": %m",
							listing.keys[i], store->location)));
		}
		pfree(path);

		entry = &page->entries[page->count++];
		entry->key = pstrdup(listing.keys[i]);
		entry->size = (int64) st.st_size;
		entry->modified = time_t_to_timestamptz(st.st_mtime) +
			st.st_mtim.tv_nsec / 1000;
	}

	/*
	 * There is a next page only if keys remain.  The token is the last key
	 * considered, even if it vanished before we could stat it, so that a page
	 * always advances.
	 */
	if (listing.key_count > max_keys)
		page->continuation = pstrdup(listing.keys[page_keys - 1]);
	else
		page->continuation = NULL;

	MemoryContextDelete(walk_context);

	return page;
}

/*
 * Remove the file of key at path; false if there was none.  The directory
 * is fsync'd so that the deletion survives a crash (garbage collection
 * would otherwise find the object again, which is harmless but wasteful).
 */
static bool
file_store_unlink_object(ObjectStore *store, const char *key, const char *path)
{
	char	   *directory;

	if (unlink(path) != 0)
	{
		struct stat st;
		bool		no_object;

		/*
		 * ENOENT: no such key.  ENOTDIR: a component of the key is a file.
		 * EISDIR (Linux) or EPERM (POSIX): the key is a folder, which holds
		 * other keys but is not an object itself.
		 */
		no_object = (errno == ENOENT || errno == ENOTDIR || errno == EISDIR ||
					 (errno == EPERM && stat(path, &st) == 0 &&
					  S_ISDIR(st.st_mode)));
		if (no_object)
			return false;
		errno = (errno == 0) ? EPERM : errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not delete object \"%s\" in store \"%s\": %m",
						key, store->location)));
	}

	directory = file_store_parent_directory(path);
	file_store_fsync_directory(store, directory, key, ERROR);
	pfree(directory);
	return true;
}

/*
 * Delete the WAL entry key (at position, its file at path) from its
 * folder's log and as a file, both under the log's lock, so that no create
 * of the position can come between and lose its object to the second
 * half.  -1 when the folder has no log (nothing was done).
 */
static int
file_store_delete_wal_entry(ObjectStore *store, const char *key,
							const char *path, int64 position)
{
	char	   *folder = file_store_parent_directory(path);
	FileWalLogLock *lock = file_wal_log_lock(store, folder, key, false);
	volatile bool deleted = false;

	pfree(folder);
	if (lock == NULL)
		return -1;
	PG_TRY();
	{
		deleted = file_wal_log_delete(lock, position);
		if (file_store_unlink_object(store, key, path))
			deleted = true;
	}
	PG_FINALLY();
	{
		file_wal_log_unlock(lock);
	}
	PG_END_TRY();
	return deleted ? 1 : 0;
}

/*
 * file_store_delete_object
 *		Remove key; false if it did not exist.  Directories are left in
 *		place; see the header comment.
 */
static bool
file_store_delete_object(ObjectStore *store, const char *key)
{
	char	   *path;
	int64		position;
	size_t		folder_length;
	int			deleted = -1;

	file_store_check_key(store, key);

	path = file_store_object_path(store, key);
	if (file_wal_log_key(key, &position, &folder_length))
		deleted = file_store_delete_wal_entry(store, key, path, position);
	if (deleted < 0)
		deleted = file_store_unlink_object(store, key, path) ? 1 : 0;
	pfree(path);
	return deleted > 0;
}

/*
 * file_store_remove_abandoned_uploads
 *		Remove the temporary files under _tmp/ last changed before
 *		older_than (and at least FILE_STORE_ABANDONED_MIN_AGE_S ago).
 *
 * A process killed between creating its temporary file and linking it into
 * place leaves the file behind, and listings skip _tmp/, so nothing else
 * would ever remove it.  Only regular files whose names look like ours
 * (ending in ".tmp") are removed; anything else is left alone.
 */
static int64
file_store_remove_abandoned_uploads(ObjectStore *store, TimestampTz older_than,
									int64 *bytes)
{
	FileStore  *file_store = (FileStore *) store->backend;
	TimestampTz floor;
	TimestampTz cutoff;
	DIR		   *dir;
	struct dirent *de;
	int64		removed = 0;

	/* never younger than the minimum age, whatever the caller's grace */
	floor = GetCurrentTimestamp() -
		(TimestampTz) FILE_STORE_ABANDONED_MIN_AGE_S * USECS_PER_SEC;
	cutoff = Min(older_than, floor);

	dir = AllocateDir(file_store->temp_dir);
	if (dir == NULL)
	{
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;			/* nothing was ever written here */
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open directory \"%s\" of store \"%s\": %m",
						file_store->temp_dir, store->location)));
	}
	while ((de = ReadDir(dir, file_store->temp_dir)) != NULL)
	{
		size_t		len = strlen(de->d_name);
		char	   *path;
		struct stat st;

		CHECK_FOR_INTERRUPTS();
		if (len < 5 || strcmp(de->d_name + len - 4, ".tmp") != 0)
			continue;
		path = psprintf("%s/%s", file_store->temp_dir, de->d_name);
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
			time_t_to_timestamptz(st.st_mtime) < cutoff)
		{
			if (unlink(path) == 0)
			{
				removed++;
				*bytes += (int64) st.st_size;
			}
			else if (errno != ENOENT)
				ereport(ERROR,
						(errcode_for_file_access(),
						 errmsg("could not remove temporary file \"%s\" of store \"%s\": %m",
								path, store->location)));
		}
		pfree(path);
	}
	FreeDir(dir);
	if (removed > 0)
		file_store_fsync_directory(store, file_store->temp_dir, "_tmp", ERROR);
	return removed;
}
