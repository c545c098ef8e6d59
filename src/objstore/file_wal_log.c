/*-------------------------------------------------------------------------
 *
 * file_wal_log.c
 *		WAL entries of a file:// store appended to preallocated segment
 *		files, as PostgreSQL appends its own WAL.
 *
 * Why.  A WAL entry is a small object written once per group commit.  As a
 * file of its own it costs the file system a new inode and a new name, two
 * journal commits that ext4 makes in its journal thread; on a busy machine
 * waiting for that thread, not the disk, is most of a commit (1.3 ms against
 * 0.26 ms for a write into a file whose blocks exist, docs/PERFORMANCE.md).
 * So the entries of a WAL folder are appended to segment files that were
 * filled with zeros and synced when they were made: a commit then writes
 * into blocks that already exist and syncs them with fdatasync, which
 * changes no metadata.
 *
 * The upper layers see nothing of it: an entry is still the object
 * "<...>/wal/<20 digits>.wal", created if absent, read, listed and deleted
 * through the object-store interface, and file_store.c looks for every such
 * key both as a file and here.
 *
 * Layout of a WAL folder (the log's own names start with "_log.", which no
 * key of the upper layers does, and listings skip them):
 *
 *	_log.lock					the lock; a counter of deletions and the log's
 *								random identity
 *	_log.<20 digits>			segments, named by the first of the 1,024
 *								positions each holds
 *	<20 digits>.wal				entries kept as files: written before the log
 *								existed, larger than FILE_WAL_LOG_MAX_RECORD,
 *								past a segment's FILE_WAL_LOG_MAX_SEGMENT_BYTES,
 *								or with rollout_fdw.file_wal_log off
 *
 * A segment starts with a 64-byte header (magic, first position, CRC) and
 * holds records from there on, each at an 8-byte boundary: a 96-byte header
 * (state, CRC of the header, segment, position, length, CRC-32C of the
 * entry, creation time, put id) and the entry's bytes.  It is made with 1 MB
 * of zeros and grows by as much, synced, when full.  The first record that
 * does not check out ends the segment's log: a record torn by a crash is
 * where the next one is written.
 *
 * The protocol:
 *
 *	- Creates and deletes hold an exclusive OFD lock on _log.lock, which
 *	  serializes them between the processes of one cluster and between
 *	  clusters that share the folder.  Under it a create checks that the
 *	  position is free, in the log and as a file (file_store.c), appends, and
 *	  calls fdatasync before it lets go: so no other process ever finds a
 *	  record that is not durable yet, and create-if-absent stays atomic.
 *	  Every record is written after every record before it in its segment
 *	  has been synced, so a crash can only tear the last one.
 *
 *	- Readers find records by scanning, under a shared lock (so never a
 *	  record while it is written), and remember what they found: each
 *	  process keeps, per folder, where each entry is and how far each
 *	  segment was scanned, and scans only what was appended since.  Reading
 *	  an entry it knows needs no lock: records never move; a record that is
 *	  not the one expected sends the reader back to the log under its lock.
 *
 *	- A delete marks the record dead and syncs that, then punches a hole
 *	  over the entry's bytes (zeros where the file system cannot), so that
 *	  an erasure leaves nothing of them and the space is freed, syncs again,
 *	  and adds one to the counter in _log.lock.  A process whose counter or
 *	  identity differs from the lock file's forgets what it knew.  A reader
 *	  racing a delete sees either the whole record or the dead state.  A
 *	  segment whose every record is dead is removed; a later entry of its
 *	  positions makes it again.
 *
 *	- A process killed between its write and its fdatasync leaves a record
 *	  that other processes can find once its lock is gone, though it is not
 *	  synced yet: the same as a create whose outcome was never reported
 *	  (an ambiguous PUT that landed).  The next append to that segment syncs
 *	  it with its own, the first record of the next segment syncs the one
 *	  before it, and whatever the entry after it is (a record of another
 *	  segment, a file), it is made durable before that one is written
 *	  (sync_previous_entry, file_wal_log_sync_entry): no entry is ever
 *	  acknowledged over a hole that a power loss could make.
 *
 * Copyright (c) rollout_fdw authors
 *
 * IDENTIFICATION
 *		src/objstore/file_wal_log.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/file_perm.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "port/pg_iovec.h"
#include "storage/fd.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "file_wal_log.h"
#include "objstore_backend.h"

/*
 * The positions one segment holds: segment k has the entries of positions
 * k * FILE_WAL_LOG_SEGMENT_POSITIONS up to the next multiple, so that the
 * writer of a position reads one segment to know whether it is free, and a
 * listing after a position skips the segments before it.
 */
#define FILE_WAL_LOG_SEGMENT_POSITIONS	1024

/*
 * A segment is made with this many bytes of zeros, and grows by as many
 * (or by what a record needs, if more) when it is full: each growth costs a
 * metadata sync, once per megabyte.
 */
#define FILE_WAL_LOG_GROWTH			(1024 * 1024)

/*
 * Entries whose record takes more than this go to files: a file costs
 * little next to writing them, and a segment's reader then never has to
 * hold more than this of one record.
 */
#define FILE_WAL_LOG_MAX_RECORD		(4 * 1024 * 1024)

/*
 * A segment takes records up to this many bytes; an entry that would take
 * it further goes to a file.  Offsets then fit in 32 bits with room to
 * spare, and a few very large entries cannot make a segment huge.
 */
#define FILE_WAL_LOG_MAX_SEGMENT_BYTES	(256 * 1024 * 1024)

/* Segments a process remembers per folder before it forgets them all. */
#define FILE_WAL_LOG_KNOWN_SEGMENTS	16

/* Folders a process remembers before it forgets them all. */
#define FILE_WAL_LOG_KNOWN_LOGS		64

/*
 * Bytes read at once when scanning a segment: at first a few records' worth
 * (a writer usually finds one or two new ones), then more.
 */
#define FILE_WAL_LOG_SCAN_FIRST		(8 * 1024)
#define FILE_WAL_LOG_SCAN_CHUNK		(64 * 1024)

#define FILE_WAL_LOG_PREFIX			"_log."
#define FILE_WAL_LOG_LOCK_NAME		"_log.lock"
#define FILE_WAL_LOG_NEW_NAME		"_log.new"

#define FILE_WAL_LOG_SEGMENT_MAGIC	UINT64CONST(0x31474f4c4c415752) /* "RWALLOG1" */
#define FILE_WAL_LOG_LIVE			0x45564c52	/* "RLVE" */
#define FILE_WAL_LOG_DEAD			0x44414552	/* "READ" */

#define FILE_WAL_LOG_PUT_ID_MAX		51

/* The first bytes of a segment. */
typedef struct SegmentHeader
{
	uint64		magic;
	int64		first;			/* the first position it holds */
	pg_crc32c	crc;			/* of the two fields above */
	uint8		unused[44];
} SegmentHeader;

/* The header of a record, followed by its entry's bytes. */
typedef struct RecordHeader
{
	uint32		state;			/* FILE_WAL_LOG_LIVE or _DEAD */
	pg_crc32c	header_crc;		/* of every field after this one */
	int64		segment;		/* first position of its segment */
	int64		position;
	uint32		length;			/* of the entry */
	pg_crc32c	data_crc;		/* of the entry */
	int64		created;		/* TimestampTz */
	uint8		put_id_length;
	char		put_id[FILE_WAL_LOG_PUT_ID_MAX];
} RecordHeader;

StaticAssertDecl(sizeof(SegmentHeader) == 64, "segment header is 64 bytes");
StaticAssertDecl(sizeof(RecordHeader) == 96, "record header is 96 bytes");

#define RECORD_CRC_OFFSET	offsetof(RecordHeader, segment)

/* Where this process knows an entry to be. */
typedef struct KnownEntry
{
	int64		position;		/* hash key */
	uint32		offset;			/* of its record header in its segment */
	uint32		length;
	TimestampTz created;
} KnownEntry;

/* What this process knows of one segment. */
typedef struct KnownSegment
{
	int64		first;			/* hash key */
	bool		exists;			/* false: no file (yet, or any more) */
	uint32		scanned;		/* records before this offset are known */
	uint32		size;			/* of the file */
	int			live;			/* live records in it */
} KnownSegment;

/* What this process knows of one folder's log. */
typedef struct KnownLog
{
	char		folder[MAXPGPATH];	/* hash key */
	uint64		identity;		/* the lock file's random id when last seen */
	uint64		deletions;		/* the lock file's counter when last seen */
	HTAB	   *segments;		/* KnownSegment by first position, those read */
	HTAB	   *entries;		/* KnownEntry by position, of those segments */
} KnownLog;

struct FileWalLogLock
{
	ObjectStore *store;
	KnownLog   *log;
	int			fd;				/* the lock file, holding the lock */
	const char *key;			/* for messages */
	struct LockFileContents *contents;	/* as read when locked, and since */
};

static bool file_wal_log_enabled = true;
static HTAB *known_logs = NULL;


void
file_wal_log_define_settings(void)
{
	DefineCustomBoolVariable("rollout_fdw.file_wal_log",
							 "Appends the WAL entries of file:// stores to preallocated segment files.",
							 "A commit then writes into blocks that exist and changes no file system metadata, as PostgreSQL's own WAL does, instead of creating a file per entry. Entries are read from either form whatever this is set to.",
							 &file_wal_log_enabled,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
}

bool
file_wal_log_key(const char *key, int64 *position, size_t *folder_length)
{
	size_t		length = strlen(key);
	const char *name;
	int64		value = 0;

	/* "wal/" + 20 digits + ".wal" */
	if (length < 28 || strcmp(key + length - 4, ".wal") != 0)
		return false;
	name = key + length - 24;
	if (strncmp(name - 4, "wal/", 4) != 0 ||
		(name - 4 != key && name[-5] != '/'))
		return false;
	for (int i = 0; i < 20; i++)
	{
		if (name[i] < '0' || name[i] > '9')
			return false;
		if (value > (PG_INT64_MAX - (name[i] - '0')) / 10)
			return false;
		value = value * 10 + (name[i] - '0');
	}
	*position = value;
	*folder_length = name - key;
	return true;
}

bool
file_wal_log_own_file(const char *folder_key, const char *name)
{
	size_t		length = strlen(folder_key);

	return strncmp(name, FILE_WAL_LOG_PREFIX, strlen(FILE_WAL_LOG_PREFIX)) == 0 &&
		length >= 4 && strcmp(folder_key + length - 4, "wal/") == 0 &&
		(length == 4 || folder_key[length - 5] == '/');
}

/* ----------------------------------------------------------------
 * What this process knows
 * ----------------------------------------------------------------
 */

static int64
segment_of(int64 position)
{
	return position - position % FILE_WAL_LOG_SEGMENT_POSITIONS;
}

static char *
segment_path(const char *folder, int64 first)
{
	return psprintf("%s/" FILE_WAL_LOG_PREFIX "%020lld", folder,
					(long long) first);
}

static KnownLog *
known_log(const char *folder, bool may_forget)
{
	KnownLog   *log;
	bool		found;

	if (strlen(folder) >= MAXPGPATH)
		elog(ERROR, "WAL folder path \"%s\" is too long", folder);
	if (known_logs == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = MAXPGPATH;
		ctl.entrysize = sizeof(KnownLog);
		ctl.hcxt = TopMemoryContext;
		known_logs = hash_create("rollout file WAL logs", 16, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	log = hash_search(known_logs, folder, HASH_FIND, NULL);
	if (log == NULL && may_forget &&
		hash_get_num_entries(known_logs) >= FILE_WAL_LOG_KNOWN_LOGS)
	{
		HASH_SEQ_STATUS seq;
		KnownLog   *known;

		hash_seq_init(&seq, known_logs);
		while ((known = hash_seq_search(&seq)) != NULL)
		{
			hash_destroy(known->segments);
			hash_destroy(known->entries);
			(void) hash_search(known_logs, known->folder, HASH_REMOVE, NULL);
		}
	}
	log = hash_search(known_logs, folder, HASH_ENTER, &found);
	if (!found)
	{
		HASHCTL		ctl;

		log->identity = 0;
		log->deletions = 0;
		ctl.keysize = sizeof(int64);
		ctl.entrysize = sizeof(KnownSegment);
		ctl.hcxt = TopMemoryContext;
		log->segments = hash_create("rollout file WAL log segments", 16, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		ctl.entrysize = sizeof(KnownEntry);
		log->entries = hash_create("rollout file WAL log entries", 256, &ctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	return log;
}

/* Forget everything known of a log, to read it again when asked. */
static void
forget_log(KnownLog *log)
{
	HASH_SEQ_STATUS seq;
	KnownEntry *entry;
	KnownSegment *segment;

	hash_seq_init(&seq, log->entries);
	while ((entry = hash_seq_search(&seq)) != NULL)
		(void) hash_search(log->entries, &entry->position, HASH_REMOVE, NULL);
	hash_seq_init(&seq, log->segments);
	while ((segment = hash_seq_search(&seq)) != NULL)
		(void) hash_search(log->segments, &segment->first, HASH_REMOVE, NULL);
}

/*
 * Forget a segment and its entries; what is needed of it again is read
 * again.
 */
static void
forget_segment(KnownLog *log, int64 first)
{
	for (int64 position = first;
		 position < first + FILE_WAL_LOG_SEGMENT_POSITIONS; position++)
		(void) hash_search(log->entries, &position, HASH_REMOVE, NULL);
	(void) hash_search(log->segments, &first, HASH_REMOVE, NULL);
}

/* Forget one entry (deleted, or found dead). */
static void
forget_entry(KnownLog *log, int64 position)
{
	int64		first = segment_of(position);
	KnownSegment *segment;

	if (hash_search(log->entries, &position, HASH_REMOVE, NULL) == NULL)
		return;
	segment = hash_search(log->segments, &first, HASH_FIND, NULL);
	if (segment != NULL)
		segment->live--;
}

/* ----------------------------------------------------------------
 * The lock file
 * ----------------------------------------------------------------
 */

/*
 * Open folder's lock file, for reading or, for_write, for writing too (an
 * exclusive lock needs that), made if need be with create; -1 when it does
 * not exist and !create, or the folder does not exist.  Not inlined: in
 * lock_file_lock's PG_TRY its reassigned descriptor would be a variable
 * longjmp may clobber.
 */
static pg_noinline int
lock_file_open(ObjectStore *store, const char *folder, const char *key,
			   bool for_write, bool create)
{
	char	   *path = psprintf("%s/%s", folder, FILE_WAL_LOG_LOCK_NAME);
	int			flags = (for_write ? O_RDWR : O_RDONLY) | PG_BINARY;
	int			fd;

	/*
	 * Without O_CREAT first: it exists but once per folder, and an open that
	 * may create takes the folder's inode lock and costs twice as much.
	 */
	fd = OpenTransientFile(path, flags);
	if (fd < 0 && errno == ENOENT && create)
		fd = OpenTransientFilePerm(path, flags | O_CREAT, pg_file_create_mode);
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
	{
		pfree(path);
		return -1;
	}
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open the WAL log lock \"%s\" for object \"%s\" in store \"%s\": %m",
						path, key, store->location)));
	pfree(path);
	return fd;
}

/*
 * Take an OFD lock (F_RDLCK or F_WRLCK) on the whole lock file.  An OFD lock
 * belongs to the open file, so closing fd releases it, also when the process
 * dies.  Holders keep it for one append, delete or scan, well under a
 * millisecond but for the sync, so a busy lock is tried again after a short
 * sleep, longer each time up to FILE_WAL_LOG_LOCK_MAX_SLEEP_US, with the
 * wait shown in pg_stat_activity and interrupts serviced in between: a
 * holder that never lets go (a process of another cluster stuck in its
 * sync) cannot keep a reader from being cancelled.  A create holds off
 * interrupts anyway (wal.c), and waits.
 */
#define FILE_WAL_LOG_LOCK_MAX_SLEEP_US	1000

static void lock_file_wait(ObjectStore *store, int fd, short type,
						   const char *key);

/*
 * Whether the open file fd is the file at path (device and inode).
 *
 * statx asks for the inode number only: a stat(2) would also read the
 * timestamps, and on Linux 6.13 and later a file whose timestamps were read
 * takes a fine-grained one at its next write, marking its inode dirty each
 * time.  The lock file's inode shares an inode table block with the
 * segments', and ext4 without a journal writes that block in every fsync of
 * a segment while it is dirty: one more synchronous device write per commit
 * (docs/PERFORMANCE.md).
 */
static bool
is_file_at_path(int fd, const char *path)
{
	struct stat opened;
	struct stat named;

#ifdef STATX_INO
	struct statx opened_x;
	struct statx named_x;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_INO, &opened_x) == 0 &&
		(opened_x.stx_mask & STATX_INO) != 0)
	{
		if (statx(AT_FDCWD, path, 0, STATX_INO, &named_x) != 0)
			return false;		/* gone, or another file: open it again */
		return (named_x.stx_mask & STATX_INO) != 0 &&
			opened_x.stx_dev_major == named_x.stx_dev_major &&
			opened_x.stx_dev_minor == named_x.stx_dev_minor &&
			opened_x.stx_ino == named_x.stx_ino;
	}
	/* no statx here (a sandbox may refuse it): what stat(2) says */
#endif
	if (fstat(fd, &opened) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (stat(path, &named) != 0)
	{
		if (errno == ENOENT || errno == ENOTDIR)
			return false;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	}
	return opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
}

/*
 * Open and lock folder's lock file: -1 when lock_file_open gives none.  A
 * folder removed and made again between the open and the lock would leave
 * us holding the lock of the old file, beside the holder of the new one: so
 * the lock is taken again until the file locked is the file at the path.
 */
static int
lock_file_lock(ObjectStore *store, const char *folder, const char *key,
			   short type, bool create)
{
	char	   *path = psprintf("%s/%s", folder, FILE_WAL_LOG_LOCK_NAME);

	for (;;)
	{
		int			fd = lock_file_open(store, folder, key, type == F_WRLCK,
										create);

		if (fd < 0)
		{
			pfree(path);
			return -1;
		}
		PG_TRY();
		{
			lock_file_wait(store, fd, type, key);
		}
		PG_CATCH();
		{
			CloseTransientFile(fd);
			PG_RE_THROW();
		}
		PG_END_TRY();
		if (is_file_at_path(fd, path))
		{
			pfree(path);
			return fd;
		}
		CloseTransientFile(fd);
	}
}

static void
lock_file_wait(ObjectStore *store, int fd, short type, const char *key)
{
	struct flock lock;
	long		sleep_us = 20;
	bool		waiting = false;

	memset(&lock, 0, sizeof(lock));
	lock.l_type = type;
	lock.l_whence = SEEK_SET;
	lock.l_start = 0;
	lock.l_len = 0;
	while (fcntl(fd, F_OFD_SETLK, &lock) != 0)
	{
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EACCES)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not lock the WAL log for object \"%s\" in store \"%s\": %m",
							key, store->location)));
		if (!waiting)
		{
			pgstat_report_wait_start(PG_WAIT_EXTENSION);
			waiting = true;
		}
		pg_usleep(sleep_us);
		sleep_us = Min(sleep_us * 2, FILE_WAL_LOG_LOCK_MAX_SLEEP_US);
		CHECK_FOR_INTERRUPTS();
	}
	if (waiting)
		pgstat_report_wait_end();
}

/*
 * The lock file holds two numbers: a counter of deletions (bytes 0-7) and a
 * random identity of the log (bytes 8-15), written by the writer that made
 * the file.  A folder removed and made again (a store dropped and created
 * again) has a new identity, so that no process goes on with what it knew
 * of the old one.
 */
typedef struct LockFileContents
{
	uint64		deletions;
	uint64		identity;
	int64		synced_segment; /* the last append's segment and end: every */
	uint64		synced_end;		/* record before it there was synced */
} LockFileContents;

static void
lock_file_read(ObjectStore *store, int fd, const char *key,
			   LockFileContents *contents)
{
	ssize_t		nread;

	memset(contents, 0, sizeof(*contents));
	nread = pg_pread(fd, contents, sizeof(*contents), 0);
	if (nread < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read the WAL log lock for object \"%s\" in store \"%s\": %m",
						key, store->location)));
	if (nread < (ssize_t) offsetof(LockFileContents, synced_segment))
		contents->identity = 0;
	if (nread < (ssize_t) sizeof(*contents))
	{
		contents->synced_segment = -1;
		contents->synced_end = 0;
	}
}

static void
lock_file_write(ObjectStore *store, int fd, const char *key,
				const LockFileContents *contents)
{
	if (pg_pwrite(fd, contents, sizeof(*contents), 0) != sizeof(*contents))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write the WAL log lock for object \"%s\" in store \"%s\": %m",
						key, store->location)));
}

/*
 * Under a lock: forget what this process knows of the log if a delete
 * happened since it last looked (the counter moved), or the log is another
 * one (the identity changed).  Under the exclusive lock, a lock file made
 * just now gets its identity.
 */
static void
check_deletions(ObjectStore *store, KnownLog *log, int fd, const char *key,
				bool exclusive, LockFileContents *read)
{
	LockFileContents contents;

	lock_file_read(store, fd, key, &contents);
	if (read != NULL)
		*read = contents;
	if (contents.identity == 0 && exclusive)
	{
		if (!pg_strong_random(&contents.identity, sizeof(contents.identity)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random number")));
		contents.identity |= 1;
		lock_file_write(store, fd, key, &contents);
		if (read != NULL)
			*read = contents;
	}
	if (contents.deletions != log->deletions ||
		contents.identity != log->identity)
	{
		forget_log(log);
		log->deletions = contents.deletions;
		log->identity = contents.identity;
	}
}

/* ----------------------------------------------------------------
 * Scanning
 * ----------------------------------------------------------------
 */

static pg_crc32c
record_header_crc(const RecordHeader *header)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, (const char *) header + RECORD_CRC_OFFSET,
				sizeof(RecordHeader) - RECORD_CRC_OFFSET);
	FIN_CRC32C(crc);
	return crc;
}

static pg_crc32c
data_crc(const char *data, size_t length)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, length);
	FIN_CRC32C(crc);
	return crc;
}

static pg_crc32c
segment_header_crc(const SegmentHeader *header)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, header, offsetof(SegmentHeader, crc));
	FIN_CRC32C(crc);
	return crc;
}

/* The offset of the record after one at offset with length bytes. */
static uint32
next_record(uint32 offset, uint32 length)
{
	return TYPEALIGN(8, offset + sizeof(RecordHeader) + length);
}

/* Read up to length bytes at offset of fd; returns how many (0 at the end). */
static size_t
read_at(ObjectStore *store, int fd, char *buffer, size_t length, off_t offset,
		const char *path)
{
	size_t		done = 0;

	while (done < length)
	{
		ssize_t		nread = pg_pread(fd, buffer + done, length - done,
									 offset + done);

		if (nread < 0 && errno == EINTR)
			continue;
		if (nread < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read WAL log segment \"%s\" of store \"%s\": %m",
							path, store->location)));
		if (nread == 0)
			break;
		done += nread;
	}
	return done;
}

/*
 * Does header check out as the header of a record at offset of the segment
 * of first, size bytes long (its entry's CRC aside)?
 */
static bool
header_checks_out(const RecordHeader *header, int64 first, uint64 offset,
				  uint64 size)
{
	return (header->state == FILE_WAL_LOG_LIVE || header->state == FILE_WAL_LOG_DEAD) &&
		EQ_CRC32C(header->header_crc, record_header_crc(header)) &&
		header->segment == first &&
		header->position >= first &&
		header->position < first + FILE_WAL_LOG_SEGMENT_POSITIONS &&
		offset + sizeof(RecordHeader) <= size &&
		header->length <= size - offset - sizeof(RecordHeader) &&
		header->put_id_length < FILE_WAL_LOG_PUT_ID_MAX;
}

/*
 * Does the record whose header is at buffer (its entry, when live, right
 * after it: available bytes in all) check out as a record of segment?
 * *needed receives the bytes header and entry take when more are needed
 * than available.
 */
static bool
record_checks_out(const char *buffer, size_t available, int64 first,
				  uint32 offset, uint32 size, size_t *needed)
{
	RecordHeader header;

	*needed = 0;
	if (available < sizeof(RecordHeader))
	{
		*needed = sizeof(RecordHeader);
		return false;
	}
	memcpy(&header, buffer, sizeof(header));
	if (!header_checks_out(&header, first, offset, size))
		return false;
	if (header.state == FILE_WAL_LOG_DEAD)
		return true;
	if (available < sizeof(RecordHeader) + header.length)
	{
		*needed = sizeof(RecordHeader) + header.length;
		return false;
	}
	return EQ_CRC32C(header.data_crc,
					 data_crc(buffer + sizeof(RecordHeader), header.length));
}

/*
 * A record at segment->scanned does not check out (bytes: what of it was
 * read).  It is the end of the log, or a record a crash tore (the last one
 * written), or damage: if a record that checks out comes after it,
 * acknowledged entries would be lost by taking it for the end, so that is
 * an ERROR.  The next record can only start within a record's greatest
 * length, so that much is searched for one.  Zeros where a process already
 * knows records up to (from_start false) are the end as far as it wrote or
 * read, and are not searched: a commit's writer looks at every new record
 * this way.
 */
static void
check_end_of_log(ObjectStore *store, int fd, KnownSegment *segment,
				 const char *bytes, size_t available, const char *path,
				 bool from_start)
{
	size_t		checked = Min(available, sizeof(RecordHeader));
	bool		zeros = true;
	char	   *buffer;
	uint64		offset;
	uint64		limit;

	for (size_t i = 0; i < checked && zeros; i++)
		zeros = bytes[i] == 0;
	if (zeros && !from_start)
		return;

	limit = Min((uint64) segment->size,
				(uint64) segment->scanned + sizeof(RecordHeader) + FILE_WAL_LOG_MAX_RECORD + 8);
	buffer = palloc(FILE_WAL_LOG_SCAN_CHUNK + sizeof(RecordHeader));
	for (offset = segment->scanned + 8; offset + sizeof(RecordHeader) <= limit;)
	{
		size_t		nread = read_at(store, fd, buffer,
									FILE_WAL_LOG_SCAN_CHUNK + sizeof(RecordHeader),
									offset, path);

		CHECK_FOR_INTERRUPTS();
		for (size_t i = 0; i + sizeof(RecordHeader) <= nread; i += 8)
		{
			RecordHeader header;

			memcpy(&header, buffer + i, sizeof(header));
			if (header_checks_out(&header, segment->first, offset + i, segment->size))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("WAL log segment \"%s\" of store \"%s\" is damaged at offset %u",
								path, store->location, segment->scanned),
						 errdetail("A record that does not check out comes before the record of position " INT64_FORMAT " at offset " INT64_FORMAT ".",
								   header.position, (int64) (offset + i))));
		}
		if (nread < FILE_WAL_LOG_SCAN_CHUNK + sizeof(RecordHeader) ||
			offset + FILE_WAL_LOG_SCAN_CHUNK >= limit)
			break;
		offset += FILE_WAL_LOG_SCAN_CHUNK;
	}
	pfree(buffer);
}

/*
 * Learn the records of segment from where this process stopped, reading
 * what follows in chunks, up to the first record that does not check out:
 * the end of the log in this segment (zeros, or a record a crash tore).
 */
static void
scan_segment(ObjectStore *store, KnownLog *log, KnownSegment *segment)
{
	char	   *path = segment_path(log->folder, segment->first);
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	off_t		file_size;
	size_t		capacity = FILE_WAL_LOG_SCAN_CHUNK;
	size_t		want = FILE_WAL_LOG_SCAN_FIRST;
	bool		from_start = segment->scanned < sizeof(SegmentHeader);
	char	   *buffer;

	if (fd < 0)
	{
		if (errno != ENOENT)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not open WAL log segment \"%s\" of store \"%s\": %m",
							path, store->location)));
		segment->exists = false;
		pfree(path);
		return;
	}

	/* the size from lseek: a stat would read timestamps (is_file_at_path) */
	file_size = lseek(fd, 0, SEEK_END);
	if (file_size < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not find the size of WAL log segment \"%s\" of store \"%s\": %m",
						path, store->location)));
	if (file_size > (off_t) FILE_WAL_LOG_MAX_SEGMENT_BYTES + FILE_WAL_LOG_GROWTH)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("WAL log segment \"%s\" of store \"%s\" is damaged: it is larger than a segment can grow",
						path, store->location)));
	segment->exists = true;
	segment->size = (uint32) file_size;
	buffer = palloc(capacity);

	if (segment->scanned < sizeof(SegmentHeader))
	{
		SegmentHeader header;

		if (read_at(store, fd, (char *) &header, sizeof(header), 0, path) != sizeof(header) ||
			header.magic != FILE_WAL_LOG_SEGMENT_MAGIC ||
			header.first != segment->first ||
			!EQ_CRC32C(header.crc, segment_header_crc(&header)))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("WAL log segment \"%s\" of store \"%s\" is damaged: its header does not check out",
							path, store->location)));
		segment->scanned = sizeof(SegmentHeader);
	}

	while (segment->scanned + sizeof(RecordHeader) <= segment->size)
	{
		size_t		available;
		size_t		used = 0;
		size_t		needed = 0;

		CHECK_FOR_INTERRUPTS();
		want = Min(want, segment->size - segment->scanned);
		available = read_at(store, fd, buffer, want, segment->scanned, path);
		while (used < available)
		{
			uint32		offset = segment->scanned;
			RecordHeader header;

			if (!record_checks_out(buffer + used, available - used,
								   segment->first, offset, segment->size,
								   &needed))
				break;
			memcpy(&header, buffer + used, sizeof(header));
			if (header.state == FILE_WAL_LOG_LIVE)
			{
				KnownEntry *entry;
				bool		found;

				entry = hash_search(log->entries, &header.position,
									HASH_ENTER, &found);
				if (found)
					ereport(ERROR,
							(errcode(ERRCODE_DATA_CORRUPTED),
							 errmsg("WAL log segment \"%s\" of store \"%s\" is damaged: two live records of position " INT64_FORMAT,
									path, store->location, header.position),
							 errdetail("The second is at offset %u.", offset)));
				entry->offset = offset;
				entry->length = header.length;
				entry->created = header.created;
				segment->live++;
			}
			segment->scanned = next_record(offset, header.length);
			used += segment->scanned - offset;
		}
		if (used < available && needed == 0)
		{
			/* a record that does not check out: the end, or damage */
			check_end_of_log(store, fd, segment, buffer + used,
							 available - used, path, from_start);
			break;
		}
		if (needed > 0 && (available < want || (used == 0 && needed <= available)))
			break;				/* the file ends inside the record */
		if (needed > capacity)
		{
			/* a record larger than the buffer: read it whole next time */
			capacity = needed;
			buffer = repalloc(buffer, capacity);
		}
		want = capacity;
	}

	pfree(buffer);
	CloseTransientFile(fd);
	pfree(path);
}

/*
 * The segment holding position as this process knows it, scanned up to
 * what is in the file now; the caller holds a lock.  With may_forget, the
 * other segments it knows are forgotten first if it knows too many (a
 * listing, which reads many at once, forgets them on the next call).
 */
static KnownSegment *
current_segment(ObjectStore *store, KnownLog *log, int64 position,
				bool may_forget)
{
	int64		first = segment_of(position);
	bool		found;
	KnownSegment *segment;

	/*
	 * A process remembers a few segments, not the whole log: a writer needs
	 * the one it writes into, and gc deletes old entries only now and then.
	 */
	segment = hash_search(log->segments, &first, HASH_FIND, NULL);
	if (segment == NULL && may_forget &&
		hash_get_num_entries(log->segments) >= FILE_WAL_LOG_KNOWN_SEGMENTS)
	{
		HASH_SEQ_STATUS seq;
		KnownSegment *known;

		hash_seq_init(&seq, log->segments);
		while ((known = hash_seq_search(&seq)) != NULL)
			forget_segment(log, known->first);
	}
	segment = hash_search(log->segments, &first, HASH_ENTER, &found);
	if (!found)
	{
		segment->exists = false;
		segment->scanned = 0;
		segment->size = 0;
		segment->live = 0;
	}
	scan_segment(store, log, segment);
	return segment;
}

/* ----------------------------------------------------------------
 * Creates and deletes
 * ----------------------------------------------------------------
 */

FileWalLogLock *
file_wal_log_lock(ObjectStore *store, const char *folder_path, const char *key,
				  bool create)
{
	int			fd = lock_file_lock(store, folder_path, key, F_WRLCK, create);
	FileWalLogLock *lock;

	if (fd < 0)
		return NULL;
	lock = palloc0(sizeof(FileWalLogLock));
	lock->store = store;
	lock->key = key;
	lock->log = known_log(folder_path, true);
	lock->fd = fd;
	lock->contents = palloc(sizeof(LockFileContents));
	PG_TRY();
	{
		check_deletions(store, lock->log, lock->fd, key, true, lock->contents);
	}
	PG_CATCH();
	{
		CloseTransientFile(lock->fd);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return lock;
}

void
file_wal_log_unlock(FileWalLogLock *lock)
{
	/* closing the lock file is what lets the lock go */
	CloseTransientFile(lock->fd);
	pfree(lock->contents);
	pfree(lock);
}

bool
file_wal_log_holds(FileWalLogLock *lock, int64 position)
{
	(void) current_segment(lock->store, lock->log, position, true);
	return hash_search(lock->log->entries, &position, HASH_FIND, NULL) != NULL;
}

static void
sync_segment(ObjectStore *store, int fd, const char *path, bool data_only,
			 int elevel)
{
	if ((data_only ? pg_fdatasync(fd) : pg_fsync(fd)) != 0)
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not sync WAL log segment \"%s\" of store \"%s\": %m",
						path, store->location)));
}

/* Write length zeros at offset of fd (a segment at path). */
static void
write_zeros(ObjectStore *store, int fd, off_t offset, size_t length,
			const char *path)
{
	char	   *zeros = palloc0(Min(length, (size_t) FILE_WAL_LOG_GROWTH));

	while (length > 0)
	{
		size_t		chunk = Min(length, (size_t) FILE_WAL_LOG_GROWTH);
		ssize_t		written = pg_pwrite(fd, zeros, chunk, offset);

		if (written != (ssize_t) chunk)
		{
			if (written >= 0)
				errno = ENOSPC;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write WAL log segment \"%s\" of store \"%s\": %m",
							path, store->location)));
		}
		offset += chunk;
		length -= chunk;
	}
	pfree(zeros);
}

/*
 * Make the segment of first, of size bytes of zeros after its header, under
 * a temporary name and then renamed into place, so that no process ever
 * finds it half made.
 */
static void
make_segment(FileWalLogLock *lock, KnownSegment *segment, size_t size)
{
	ObjectStore *store = lock->store;
	KnownLog   *log = lock->log;
	char	   *temp_path = psprintf("%s/%s", log->folder, FILE_WAL_LOG_NEW_NAME);
	char	   *path = segment_path(log->folder, segment->first);
	SegmentHeader header;
	int			fd;

	memset(&header, 0, sizeof(header));
	header.magic = FILE_WAL_LOG_SEGMENT_MAGIC;
	header.first = segment->first;
	header.crc = segment_header_crc(&header);

	fd = OpenTransientFilePerm(temp_path, O_RDWR | O_CREAT | O_TRUNC | PG_BINARY,
							   pg_file_create_mode);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create WAL log segment \"%s\" of store \"%s\": %m",
						temp_path, store->location)));
	PG_TRY();
	{
		write_zeros(store, fd, 0, size, temp_path);
		if (pg_pwrite(fd, &header, sizeof(header), 0) != sizeof(header))
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write WAL log segment \"%s\" of store \"%s\": %m",
							temp_path, store->location)));
		sync_segment(store, fd, temp_path, false, ERROR);
		if (rename(temp_path, path) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not rename WAL log segment \"%s\" to \"%s\" in store \"%s\": %m",
							temp_path, path, store->location)));
	}
	PG_CATCH();
	{
		/* a disk full halfway leaves no megabyte of zeros behind */
		CloseTransientFile(fd);
		(void) unlink(temp_path);
		PG_RE_THROW();
	}
	PG_END_TRY();
	CloseTransientFile(fd);
	fsync_fname_ext(log->folder, true, false, data_sync_elevel(ERROR));

	segment->exists = true;
	segment->scanned = sizeof(SegmentHeader);
	segment->size = size;
	segment->live = 0;

	/*
	 * The hint of the last append may name an earlier segment of these
	 * positions (its records all deleted since, and the file removed), with
	 * an end past what this one holds: a record that a writer killed before
	 * its sync leaves here would look synced to the next writer, which would
	 * then not sync it before its own (file_wal_log_append).  The hint is
	 * this segment's start now.
	 */
	lock->contents->synced_segment = segment->first;
	lock->contents->synced_end = segment->scanned;
	lock_file_write(store, lock->fd, lock->key, lock->contents);
	pfree(temp_path);
	pfree(path);
}

/* Sync the segment of first, if it exists (the lock held). */
static void
sync_segment_file(FileWalLogLock *lock, int64 first)
{
	char	   *path = segment_path(lock->log->folder, first);
	int			fd;

	fd = OpenTransientFile(path, O_RDWR | PG_BINARY);
	if (fd >= 0)
	{
		sync_segment(lock->store, fd, path, true, data_sync_elevel(ERROR));
		CloseTransientFile(fd);
	}
	else if (errno != ENOENT)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open WAL log segment \"%s\" of store \"%s\": %m",
						path, lock->store->location)));
	pfree(path);
}

/*
 * Before the first record of the segment of first: sync the segment before
 * it.  A writer killed between its write and its sync may have left its
 * record there, found by others but not durable, and no later record of
 * that segment (which would sync it) may come.
 */
static void
sync_previous_segment(FileWalLogLock *lock, int64 first)
{
	if (first >= FILE_WAL_LOG_SEGMENT_POSITIONS)
		sync_segment_file(lock, first - FILE_WAL_LOG_SEGMENT_POSITIONS);
}

/*
 * Before the record of position goes into segment: make the entry before it
 * durable where this record's own sync would not.  Its writer may have been
 * killed before its sync, leaving an entry that others find (the writer of
 * position found it as the tip) but that a power loss may take away, and
 * position must never be acknowledged over a hole.  A record of the same
 * segment is synced by this record's fdatasync (and first, for order, by
 * file_wal_log_append's check of the hint); one at the end of the segment
 * before is synced here, also when this segment exists already (pipelined
 * writers may have made it); and the name of an entry kept as a file, whose
 * writer may have died between its link and its sync of the folder, by a
 * sync of the folder, which a record's fdatasync does not make.
 */
static void
sync_previous_entry(FileWalLogLock *lock, KnownSegment *segment, int64 position,
					bool segment_made)
{
	int64		previous = position - 1;
	char	   *path;
	struct stat st;

	/*
	 * A segment just made synced the one before it and the folder
	 * (make_segment): whatever form the entry before has, it is durable.
	 */
	if (position == 0 || segment_made)
		return;
	if (segment_of(previous) == segment->first)
	{
		/*
		 * The caller's look at position scanned this segment: what this
		 * process knows of it is what is there, and a record of it is synced
		 * by this record's fdatasync.  (No system call in the steady state.)
		 */
		if (hash_search(lock->log->entries, &previous, HASH_FIND, NULL) != NULL)
			return;
	}
	else if (file_wal_log_holds(lock, previous))
	{
		elog(DEBUG1, "rollout_fdw: WAL entry %lld of \"%s\" is synced before entry %lld, a record of the next segment",
			 (long long) previous, lock->key, (long long) position);
		sync_segment_file(lock, segment_of(previous));
		return;
	}
	path = psprintf("%s/%020lld.wal", lock->log->folder, (long long) previous);
	if (lstat(path, &st) == 0)
	{
		elog(DEBUG1, "rollout_fdw: the folder of WAL entry file %lld of \"%s\" is synced before entry %lld, a record",
			 (long long) previous, lock->key, (long long) position);
		fsync_fname_ext(lock->log->folder, true, false, data_sync_elevel(ERROR));
	}
	pfree(path);
}

/* See file_wal_log.h. */
void
file_wal_log_sync_entry(FileWalLogLock *lock, int64 position)
{
	bool		held;

	if (position <= 0)
		return;
	/* the caller's file_wal_log_holds of position + 1 scanned its segment */
	if (segment_of(position) == segment_of(position + 1))
		held = hash_search(lock->log->entries, &position, HASH_FIND, NULL) != NULL;
	else
		held = file_wal_log_holds(lock, position);
	if (held)
	{
		elog(DEBUG1, "rollout_fdw: WAL entry %lld of \"%s\" is synced before the entry after it, a file",
			 (long long) position, lock->key);
		sync_segment_file(lock, segment_of(position));
	}
}

bool
file_wal_log_append(FileWalLogLock *lock, int64 position, const char *data,
					size_t length, const char *put_id)
{
	ObjectStore *store = lock->store;
	KnownLog   *log = lock->log;
	KnownSegment *segment;
	RecordHeader header;
	struct iovec iov[2];
	char	   *path;
	int			fd;
	ssize_t		written;
	size_t		put_id_length = put_id ? strlen(put_id) : 0;
	size_t		record = sizeof(RecordHeader) + length;
	int64		first = segment_of(position);
	KnownEntry *entry;
	bool		segment_made;

	if (!file_wal_log_enabled || record > FILE_WAL_LOG_MAX_RECORD ||
		put_id_length >= FILE_WAL_LOG_PUT_ID_MAX)
		return false;

	/* file_wal_log_holds has just brought it up to date */
	segment = hash_search(log->segments, &first, HASH_FIND, NULL);
	if (segment == NULL)
		segment = current_segment(store, log, position, true);
	Assert(hash_search(log->entries, &position, HASH_FIND, NULL) == NULL);
	if (segment->exists &&
		(size_t) segment->scanned + record > FILE_WAL_LOG_MAX_SEGMENT_BYTES)
		return false;			/* full: a file, as for a large entry */
	segment_made = !segment->exists;
	if (segment_made)
	{
		sync_previous_segment(lock, segment->first);
		make_segment(lock, segment,
					 TYPEALIGN(FILE_WAL_LOG_GROWTH, sizeof(SegmentHeader) + record));
	}
	sync_previous_entry(lock, segment, position, segment_made);

	memset(&header, 0, sizeof(header));
	header.state = FILE_WAL_LOG_LIVE;
	header.segment = segment->first;
	header.position = position;
	header.length = (uint32) length;
	header.data_crc = data_crc(data, length);
	header.created = GetCurrentTimestamp();
	header.put_id_length = (uint8) put_id_length;
	if (put_id_length > 0)
		memcpy(header.put_id, put_id, put_id_length);
	header.header_crc = record_header_crc(&header);

	path = segment_path(log->folder, segment->first);
	fd = OpenTransientFile(path, O_RDWR | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open WAL log segment \"%s\" for object \"%s\" in store \"%s\": %m",
						path, lock->key, store->location)));

	/*
	 * Records past the last append's synced end are a writer's that died
	 * before its sync: synced now, before ours goes after them, so that a
	 * crash cannot keep ours and lose theirs (which would read as damage).
	 */
	if (segment->scanned > sizeof(SegmentHeader) &&
		(lock->contents->synced_segment != segment->first ||
		 lock->contents->synced_end < segment->scanned))
		sync_segment(store, fd, path, true, data_sync_elevel(ERROR));

	/*
	 * Full: grow by zeros, synced with the file's new size before the record
	 * goes in, so that the record's own sync has no metadata to wait for.
	 */
	if ((size_t) segment->scanned + record > segment->size)
	{
		size_t		growth = TYPEALIGN(FILE_WAL_LOG_GROWTH,
									   segment->scanned + record - segment->size);

		write_zeros(store, fd, segment->size, growth, path);
		sync_segment(store, fd, path, false, ERROR);
		segment->size += growth;
	}

	iov[0].iov_base = &header;
	iov[0].iov_len = sizeof(header);
	iov[1].iov_base = unconstify(char *, data);
	iov[1].iov_len = length;
	written = pg_pwritev(fd, iov, 2, segment->scanned);
	if (written != (ssize_t) record)
	{
		if (written >= 0)
			errno = ENOSPC;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write object \"%s\" to WAL log segment \"%s\" of store \"%s\": %m",
						lock->key, path, store->location)));
	}

	/*
	 * This also syncs a record that a writer killed before its own sync left
	 * in this segment.  Once written, the record is there for whoever scans
	 * after us, so a failed sync cannot be reported as a create that did not
	 * happen: treated as PostgreSQL treats a failed fsync of its own WAL.
	 */
	PG_TRY();
	{
		sync_segment(store, fd, path, true, data_sync_elevel(ERROR));
		CloseTransientFile(fd);

		entry = hash_search(log->entries, &position, HASH_ENTER, NULL);
		entry->offset = segment->scanned;
		entry->length = (uint32) length;
		entry->created = header.created;
		segment->live++;
		segment->scanned = next_record(segment->scanned, (uint32) length);

		/* a hint for the next writer: no sync of its own is needed (above) */
		lock->contents->synced_segment = segment->first;
		lock->contents->synced_end = segment->scanned;
		lock_file_write(store, lock->fd, lock->key, lock->contents);
	}
	PG_CATCH();
	{
		/*
		 * The record is in the segment, for whoever scans next, and may be
		 * durable: whatever failed after its write, the create may have
		 * happened (objstore.h, maybe_applied), and a commit must say that
		 * its outcome is unknown, not that nothing was written.
		 */
		objstore_note_maybe_applied();
		PG_RE_THROW();
	}
	PG_END_TRY();
	pfree(path);
	return true;
}

/*
 * Free length bytes at offset of a segment: punch a hole (the blocks go back
 * to the file system, the range reads as zeros), or write zeros where the
 * file system cannot.
 */
static void
free_record_bytes(FileWalLogLock *lock, int fd, const char *path, off_t offset,
				  size_t length)
{
	char	   *zeros;

	if (length == 0)
		return;
#if defined(FALLOC_FL_PUNCH_HOLE) && defined(FALLOC_FL_KEEP_SIZE)
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) == 0)
		return;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not free the bytes of object \"%s\" in WAL log segment \"%s\" of store \"%s\": %m",
						lock->key, path, lock->store->location)));
#endif
	zeros = palloc0(length);
	if (pg_pwrite(fd, zeros, length, offset) != (ssize_t) length)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not free the bytes of object \"%s\" in WAL log segment \"%s\" of store \"%s\": %m",
						lock->key, path, lock->store->location)));
	pfree(zeros);
}

bool
file_wal_log_delete(FileWalLogLock *lock, int64 position)
{
	ObjectStore *store = lock->store;
	KnownLog   *log = lock->log;
	KnownSegment *segment = current_segment(store, log, position, true);
	KnownEntry *entry = hash_search(log->entries, &position, HASH_FIND, NULL);
	uint32		state = FILE_WAL_LOG_DEAD;
	LockFileContents contents;
	uint32		offset;
	uint32		length;
	char	   *path;
	int			fd;

	if (entry == NULL)
		return false;
	offset = entry->offset;
	length = entry->length;
	path = segment_path(log->folder, segment->first);
	fd = OpenTransientFile(path, O_RDWR | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open WAL log segment \"%s\" to delete object \"%s\" in store \"%s\": %m",
						path, lock->key, store->location)));

	/*
	 * The state first, synced: a crash must never leave a live header over
	 * zeros, which would read as damage before the records after it.  Then
	 * the entry's bytes go: a hole punched where the file system can (which
	 * frees the space, and reads as zeros), zeros written otherwise, so that
	 * an erasure leaves nothing of them.  A reader racing it sees the whole
	 * record or a dead one.
	 */
	if (pg_pwrite(fd, &state, sizeof(state), offset) != sizeof(state))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not delete object \"%s\" from WAL log segment \"%s\" of store \"%s\": %m",
						lock->key, path, store->location)));

	/*
	 * Others learn of it at once, before anything below can fail: a process
	 * that went on taking the entry for alive would answer "already exists"
	 * for it.
	 */
	contents = *lock->contents;
	contents.deletions = ++log->deletions;
	contents.identity = log->identity;
	lock_file_write(store, lock->fd, lock->key, &contents);
	*lock->contents = contents;
	forget_entry(log, position);

	sync_segment(store, fd, path, true, ERROR);
	free_record_bytes(lock, fd, path, offset + sizeof(RecordHeader), length);
	sync_segment(store, fd, path, false, ERROR);
	CloseTransientFile(fd);

	/*
	 * A segment with nothing alive goes; a later entry of its positions makes
	 * it again.  Others see the counter move and read it again.
	 */
	if (segment->live <= 0)
	{
		if (unlink(path) != 0 && errno != ENOENT)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not remove WAL log segment \"%s\" of store \"%s\": %m",
							path, store->location)));
		fsync_fname_ext(log->folder, true, false, ERROR);
		segment->exists = false;
		segment->scanned = 0;
		segment->size = 0;
		segment->live = 0;
	}
	pfree(path);
	return true;
}

/* ----------------------------------------------------------------
 * Reads and listings
 * ----------------------------------------------------------------
 */

/*
 * Take a shared lock of the log and bring what this process knows of the
 * segments up to date: the one of position (if >= 0), or every one whose
 * last position's key sorts after bound (all, if bound is NULL) when
 * position < 0.  Returns the locked lock file, for unlock_log, or -1 when
 * the folder has no log.
 */
static int
lock_log_shared(ObjectStore *store, KnownLog *log, int64 position,
				const char *folder_key, const char *bound, const char *key)
{
	int			fd = lock_file_lock(store, log->folder, key, F_RDLCK, false);

	if (fd < 0)
	{
		forget_log(log);
		return -1;
	}
	PG_TRY();
	{
		check_deletions(store, log, fd, key, false, NULL);
		if (position >= 0)
			(void) current_segment(store, log, position, true);
		else
		{
			DIR		   *dir = AllocateDir(log->folder);
			struct dirent *de;
			size_t		prefix_length = strlen(FILE_WAL_LOG_PREFIX);

			while (dir != NULL && (de = ReadDir(dir, log->folder)) != NULL)
			{
				char	   *end;
				long long	first;
				char	   *last_key;
				bool		wanted;

				if (strncmp(de->d_name, FILE_WAL_LOG_PREFIX, prefix_length) != 0 ||
					strlen(de->d_name) != prefix_length + 20)
					continue;
				errno = 0;
				first = strtoll(de->d_name + prefix_length, &end, 10);
				if (errno != 0 || *end != '\0' || first < 0 ||
					first != segment_of(first))
					continue;
				last_key = psprintf("%s%020lld.wal", folder_key,
									first + FILE_WAL_LOG_SEGMENT_POSITIONS - 1);
				wanted = bound == NULL || strcmp(last_key, bound) > 0;
				pfree(last_key);
				if (wanted)
					(void) current_segment(store, log, first, false);
			}
			if (dir != NULL)
				FreeDir(dir);
		}
	}
	PG_CATCH();
	{
		CloseTransientFile(fd);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return fd;
}

/* Let go of a lock of lock_log_shared. */
static void
unlock_log(int fd)
{
	CloseTransientFile(fd);
}

/* What read_record found where a process knows an entry to be. */
typedef enum ReadOutcome
{
	READ_LIVE,					/* the entry, whole */
	READ_GONE,					/* deleted: dead, or its segment removed */
	READ_OTHER					/* not that entry: stale, or damaged */
} ReadOutcome;

/*
 * Read the record where entry says position's is, into *header and data
 * (entry->length bytes).
 */
static ReadOutcome
read_record(ObjectStore *store, const char *folder_path, const char *key,
			int64 position, const KnownEntry *entry, RecordHeader *header,
			char *data)
{
	char	   *path = segment_path(folder_path, segment_of(position));
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	ReadOutcome outcome = READ_LIVE;

	if (fd < 0 && errno == ENOENT)
	{
		/* removed with its last live record since we looked */
		pfree(path);
		return READ_GONE;
	}
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open object \"%s\" in WAL log segment \"%s\" of store \"%s\": %m",
						key, path, store->location)));
	if (read_at(store, fd, (char *) header, sizeof(*header), entry->offset, path) != sizeof(*header) ||
		read_at(store, fd, data, entry->length, entry->offset + sizeof(*header), path) != entry->length)
		outcome = READ_OTHER;
	else if (header->state == FILE_WAL_LOG_DEAD &&
			 EQ_CRC32C(header->header_crc, record_header_crc(header)) &&
			 header->position == position)
		outcome = READ_GONE;
	else if (header->state != FILE_WAL_LOG_LIVE ||
			 !EQ_CRC32C(header->header_crc, record_header_crc(header)) ||
			 header->position != position || header->length != entry->length ||
			 header->put_id_length >= FILE_WAL_LOG_PUT_ID_MAX ||
			 !EQ_CRC32C(header->data_crc, data_crc(data, entry->length)))
	{
		/* a delete may have overwritten it while we read: look again */
		uint32		state = 0;

		if (read_at(store, fd, (char *) &state, sizeof(state), entry->offset,
					path) == sizeof(state) &&
			state == FILE_WAL_LOG_DEAD && header->position == position)
			outcome = READ_GONE;
		else
			outcome = READ_OTHER;
	}
	CloseTransientFile(fd);
	pfree(path);
	return outcome;
}

/* read_record under the lock of fd, which goes whatever happens. */
static ReadOutcome
read_record_and_unlock(ObjectStore *store, const char *folder_path,
					   const char *key, int64 position, const KnownEntry *entry,
					   RecordHeader *header, char *data, int fd)
{
	volatile ReadOutcome outcome = READ_OTHER;

	PG_TRY();
	{
		outcome = read_record(store, folder_path, key, position, entry, header,
							  data);
	}
	PG_CATCH();
	{
		unlock_log(fd);
		PG_RE_THROW();
	}
	PG_END_TRY();
	unlock_log(fd);
	return outcome;
}

bool
file_wal_log_read(ObjectStore *store, const char *folder_path, const char *key,
				  int64 position, int64 offset, int64 length, bool tail,
				  StringInfo out, int64 *object_size, char **put_id)
{
	KnownLog   *log = known_log(folder_path, true);
	RecordHeader header;
	char	   *data = NULL;
	KnownEntry *entry;
	int64		size;
	int			fd;
	ReadOutcome outcome;

	/*
	 * Where this process knows the entry to be, without a lock: records never
	 * move, and a whole live record of the position there is the entry.
	 * Anything else (dead, gone, another record) may be stale knowledge, so
	 * the log is read again and the record with it, under the shared lock,
	 * where no create or delete can come between.
	 */
	entry = hash_search(log->entries, &position, HASH_FIND, NULL);
	if (entry != NULL)
	{
		data = palloc(entry->length + 1);
		if (read_record(store, folder_path, key, position, entry, &header,
						data) == READ_LIVE)
			goto found;
		pfree(data);
		forget_log(log);
	}
	fd = lock_log_shared(store, log, position, NULL, NULL, key);
	if (fd < 0)
		return false;
	entry = hash_search(log->entries, &position, HASH_FIND, NULL);
	if (entry == NULL)
	{
		unlock_log(fd);
		return false;
	}
	data = palloc(entry->length + 1);
	outcome = read_record_and_unlock(store, folder_path, key, position, entry,
									 &header, data, fd);
	if (outcome == READ_GONE)
	{
		pfree(data);
		forget_entry(log, position);
		return false;
	}
	if (outcome == READ_OTHER)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("object \"%s\" in store \"%s\" is damaged: its record in WAL log segment \"%s\" does not check out",
						key, store->location, segment_path(folder_path, segment_of(position)))));

found:
	size = entry->length;
	objstore_clip_range(size, tail, &offset, &length);
	appendBinaryStringInfo(out, data + offset, (int) length);
	if (object_size != NULL)
		*object_size = size;
	if (put_id != NULL)
		*put_id = header.put_id_length > 0 ?
			pnstrdup(header.put_id, header.put_id_length) : NULL;
	pfree(data);
	return true;
}

void
file_wal_log_list(ObjectStore *store, const char *folder_path,
				  const char *folder_key, const char *bound,
				  void (*add) (void *arg, const char *key), void *arg)
{
	KnownLog   *log = known_log(folder_path, false);
	HASH_SEQ_STATUS seq;
	KnownEntry *entry;
	char	   *key;
	int			fd = lock_log_shared(store, log, -1, folder_key, bound, folder_key);

	if (fd < 0)
		return;
	unlock_log(fd);
	hash_seq_init(&seq, log->entries);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		key = psprintf("%s%020lld.wal", folder_key, (long long) entry->position);
		add(arg, key);
		pfree(key);
	}
}

bool
file_wal_log_stat(const char *folder_path, int64 position, int64 *size,
				  TimestampTz *modified)
{
	KnownLog   *log;
	KnownEntry *entry;

	if (known_logs == NULL ||
		(log = hash_search(known_logs, folder_path, HASH_FIND, NULL)) == NULL)
		return false;
	entry = hash_search(log->entries, &position, HASH_FIND, NULL);
	if (entry == NULL)
		return false;
	*size = entry->length;
	*modified = entry->created;
	return true;
}
