/*-------------------------------------------------------------------------
 *
 * read_cache.c
 *		A cache on local disk of what remote stores returned, for objects
 *		whose bytes never change, shared by every backend of the cluster.
 *
 * What is cached.  The caller names each read's object for good (a cache
 * id: store_sources.c makes it from the store's access fingerprint, so
 * that one set of credentials never reads what only another could fetch,
 * and a key no other object will ever have), or passes NULL for an object
 * whose name may be reused.  Bytes are kept in blocks of
 * READ_CACHE_BLOCK_SIZE aligned in the object, so that reads of different
 * ranges of one object (another query's columns; a footer and the row group
 * before it) share what they overlap.  A miss fetches whole blocks, and the
 * misses of a batch go to the store in one batch, so a cold read costs the
 * round trips it cost without the cache.  A tail read needs the object's
 * size to find its blocks: a size record (block -1, no data) keeps it once
 * known; until then the tail is read as asked and the whole blocks it holds
 * are kept.
 *
 * Files.  One per block, <cache_dir>/<32 hex digits of a hash of the cache
 * id and block>.  The header holds the cache id itself, the block, the
 * object's size and CRC32Cs of the data and of the header, and a file is
 * used only if all of them match: a hash collision, a torn write or a
 * flipped bit is a miss (the file is removed), never wrong bytes.  So a
 * file is written to a temporary name and renamed without fsync: after a
 * crash the file may be empty or hold anything, and the checks turn it into
 * a miss.  Two backends missing the same block both write it; the last
 * rename wins and both files hold the same bytes.
 *
 * Bound.  rollout_fdw.cache_size, without shared memory, so that the cache
 * works the same with and without shared_preload_libraries: every backend
 * trims the directory itself after each sixteenth of the bound it writes,
 * and at its first write unless another backend trimmed in the last
 * TRIM_FRESH_SECS (the mtime of the file "trimmed" says when), so that short
 * sessions neither all list the directory nor together escape trimming.
 * Trimming lists the directory and removes the least recently used files (a
 * hit touches a file's mtime at most once a minute) until the cache is at
 * seven eighths of the bound, and temporary files an hour old, left by a
 * backend that died writing.  Between trims the cache may exceed the bound
 * by a sixteenth of it per writing backend, plus what new sessions write in
 * TRIM_FRESH_SECS.  Independently of the bound, nothing is written while the
 * file system is nearly full (read_cache_space_left).
 *
 * Errors.  The cache never makes a read fail: a file that cannot be read is
 * a miss, one that cannot be written is not kept, and a directory that
 * cannot be used turns the cache off for the backend.  Messages about the
 * directory go to the server log only (LOG_SERVER_ONLY): its path is the
 * server's business, not the client's (the setting is superuser-only).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/file_perm.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "rollout/read_cache.h"

/* rollout_fdw.cache_dir ("" turns the cache off) */
static char *read_cache_dir = NULL;

/* rollout_fdw.cache_size (kB; 0 turns the cache off) */
static int	read_cache_size_kb = 1024 * 1024;

/* rollout_fdw.disk_cache: a session may do without the cache */
static bool read_cache_wanted = true;

static ReadCacheCounters read_cache_counters;

/* Bytes this backend wrote since it last trimmed; -1: never trimmed. */
static int64 written_since_trim = -1;

/* The directory last checked, and whether it could be used. */
static char *checked_dir = NULL;
static bool checked_dir_usable = false;

#define READ_CACHE_MAGIC		0x31434352	/* "RCC1" */
#define SIZE_RECORD_BLOCK		((int64) -1)
#define CACHE_FILE_NAME_LEN		32
#define TEMP_FILE_PREFIX		"tmp."
#define TEMP_FILE_MAX_AGE_SECS	3600
#define HIT_TOUCH_INTERVAL_SECS 60
#define TRIM_STATE_FILE			"trimmed"
#define TRIM_FRESH_SECS			10
#define SPACE_CHECK_SECS		10

/*
 * The start of a cache file, followed by the cache id (id_length bytes,
 * no NUL) and the data.  The files never leave this machine, so the
 * fields are in native byte order.
 */
typedef struct ReadCacheFileHeader
{
	uint32		magic;
	uint32		id_length;
	uint32		data_length;
	pg_crc32c	data_crc;
	int64		object_size;
	int64		block;
	pg_crc32c	header_crc;		/* of the fields above and the id */
	uint32		padding;
} ReadCacheFileHeader;

/* Define rollout_fdw.cache_dir, cache_size and disk_cache. */
void
read_cache_define_settings(void)
{
	DefineCustomStringVariable("rollout_fdw.cache_dir",
							   "Directory of the local disk cache of reads from remote object stores.",
							   "Empty turns the cache off. A relative path is relative to the data directory. The directory must be the server's alone.",
							   &read_cache_dir,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("rollout_fdw.cache_size",
							"Bound of the local disk cache of reads from remote object stores.",
							"0 turns the cache off.",
							&read_cache_size_kb,
							1024 * 1024, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("rollout_fdw.disk_cache",
							 "Whether this session's reads use the disk cache of rollout_fdw.cache_dir.",
							 NULL,
							 &read_cache_wanted,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

bool
read_cache_enabled(void)
{
	return read_cache_wanted && read_cache_dir != NULL &&
		read_cache_dir[0] != '\0' && read_cache_size_kb > 0;
}

void
read_cache_get_counters(ReadCacheCounters *counters)
{
	*counters = read_cache_counters;
}

/*
 * Can the directory of rollout_fdw.cache_dir be used?  It is created if
 * missing; one that other users may write to, or a symbolic link another
 * user made, is refused, since whoever writes there decides what scans read
 * (the checksums guard against accidents, not against a forger).  Checked
 * again only when the setting changes.
 */
static bool
read_cache_directory_ready(void)
{
	struct stat st;
	struct stat link;
	char	   *path;

	if (!read_cache_enabled())
		return false;
	if (checked_dir != NULL && strcmp(checked_dir, read_cache_dir) == 0)
		return checked_dir_usable;

	if (checked_dir != NULL)
		pfree(checked_dir);
	checked_dir = MemoryContextStrdup(TopMemoryContext, read_cache_dir);
	checked_dir_usable = false;
	written_since_trim = -1;

	path = pstrdup(read_cache_dir);
	if (pg_mkdir_p(path, pg_dir_create_mode) != 0 && errno != EEXIST)
		ereport(LOG_SERVER_ONLY,
				(errcode_for_file_access(),
				 errmsg("rollout_fdw.cache_dir \"%s\" could not be created, the read cache is off: %m",
						read_cache_dir)));
	else if (lstat(read_cache_dir, &link) != 0 || stat(read_cache_dir, &st) != 0)
		ereport(LOG_SERVER_ONLY,
				(errcode_for_file_access(),
				 errmsg("could not stat rollout_fdw.cache_dir \"%s\", the read cache is off: %m",
						read_cache_dir)));
	else if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
			 (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 ||
			 (S_ISLNK(link.st_mode) && link.st_uid != geteuid()))
		ereport(LOG_SERVER_ONLY,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("rollout_fdw.cache_dir \"%s\" is not a directory of the server's own that only it can write to, the read cache is off",
						read_cache_dir)));
	else
		checked_dir_usable = true;
	pfree(path);
	return checked_dir_usable;
}

/* The path of the cache file of (id, block). */
static void
cache_file_path(const char *id, int64 block, char *path)
{
	size_t		id_length = strlen(id);
	unsigned char *key = palloc(id_length + 1 + sizeof(int64));
	uint64		first;
	uint64		second;

	memcpy(key, id, id_length + 1);
	memcpy(key + id_length + 1, &block, sizeof(int64));
	first = hash_bytes_extended(key, id_length + 1 + sizeof(int64), 0);
	second = hash_bytes_extended(key, id_length + 1 + sizeof(int64),
								 UINT64CONST(0x9e3779b97f4a7c15));
	pfree(key);
	snprintf(path, MAXPGPATH, "%s/%016llx%016llx", read_cache_dir,
			 (unsigned long long) first, (unsigned long long) second);
}

/* The bytes block holds in an object of object_size (a size record: none). */
static int64
cache_block_length(int64 block, int64 object_size)
{
	if (block == SIZE_RECORD_BLOCK)
		return 0;
	return Max(0, Min(READ_CACHE_BLOCK_SIZE,
					  object_size - block * READ_CACHE_BLOCK_SIZE));
}

static pg_crc32c
cache_header_crc(const ReadCacheFileHeader *header, const char *id)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, header, offsetof(ReadCacheFileHeader, header_crc));
	COMP_CRC32C(crc, id, header->id_length);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * Is the file's content, of file_size bytes, a valid entry of (id, block)?
 */
static bool
cache_file_valid(const char *content, off_t file_size, const char *id,
				 int64 block)
{
	ReadCacheFileHeader header;
	size_t		id_length = strlen(id);
	pg_crc32c	crc;

	if (file_size < (off_t) (sizeof(header) + id_length))
		return false;
	memcpy(&header, content, sizeof(header));
	if (header.magic != READ_CACHE_MAGIC || header.id_length != id_length ||
		header.block != block || header.object_size < 0 ||
		header.data_length != cache_block_length(block, header.object_size) ||
		(off_t) (sizeof(header) + id_length + header.data_length) != file_size ||
		memcmp(content + sizeof(header), id, id_length) != 0 ||
		header.header_crc != cache_header_crc(&header, id))
		return false;
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, content + sizeof(header) + id_length, header.data_length);
	FIN_CRC32C(crc);
	return crc == header.data_crc;
}

/*
 * Append the cached bytes of (id, block) to out and set *object_size, or
 * return false: a miss.  A file that is there but not valid is removed.
 */
static bool
cache_file_load(const char *id, int64 block, StringInfo out,
				int64 *object_size)
{
	char		path[MAXPGPATH];
	int			fd;
	struct stat st;
	char	   *content = NULL;
	bool		valid = false;

	cache_file_path(id, block, path);
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 &&
		st.st_size <= (off_t) (sizeof(ReadCacheFileHeader) + strlen(id) +
							   READ_CACHE_BLOCK_SIZE))
	{
		content = palloc(st.st_size);
		valid = pg_pread(fd, content, st.st_size, 0) == st.st_size &&
			cache_file_valid(content, st.st_size, id, block);
	}
	if (valid)
	{
		ReadCacheFileHeader header;

		memcpy(&header, content, sizeof(header));
		appendBinaryStringInfo(out, content + sizeof(header) + header.id_length,
							   header.data_length);
		*object_size = header.object_size;
		/* least recently used is by mtime: say this one was used */
		if (time(NULL) - st.st_mtime > HIT_TOUCH_INTERVAL_SECS)
			(void) futimens(fd, NULL);
	}
	CloseTransientFile(fd);
	if (content != NULL)
		pfree(content);
	if (!valid)
	{
		(void) unlink(path);
		read_cache_counters.discarded++;
	}
	return valid;
}

/* Sort cache files oldest first. */
typedef struct CacheFileAge
{
	time_t		mtime;
	off_t		size;
	char		name[CACHE_FILE_NAME_LEN + 1];
} CacheFileAge;

static int
cache_file_age_cmp(const void *a, const void *b)
{
	const CacheFileAge *x = a;
	const CacheFileAge *y = b;

	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Say when the cache was last trimmed: the trim state file's mtime. */
static void
read_cache_note_trim(void)
{
	char		path[MAXPGPATH];
	int			fd;

	snprintf(path, sizeof(path), "%s/" TRIM_STATE_FILE, read_cache_dir);
	fd = OpenTransientFilePerm(path, O_WRONLY | O_CREAT | PG_BINARY,
							   pg_file_create_mode);
	if (fd >= 0)
	{
		(void) futimens(fd, NULL);
		CloseTransientFile(fd);
	}
}

/* Was the cache trimmed, by any backend, less than TRIM_FRESH_SECS ago? */
static bool
read_cache_trimmed_lately(void)
{
	char		path[MAXPGPATH];
	struct stat st;

	snprintf(path, sizeof(path), "%s/" TRIM_STATE_FILE, read_cache_dir);
	return stat(path, &st) == 0 && time(NULL) - st.st_mtime < TRIM_FRESH_SECS;
}

/*
 * Is there room on the cache's file system?  The cache gives way when less
 * than 1 GB or a tenth of the file system (the smaller) is free: the
 * directory may share a disk with the data directory and its WAL, which
 * must never run out because of a cache.  Asked at most every
 * SPACE_CHECK_SECS.
 */
static bool
read_cache_space_left(void)
{
	static time_t checked_at = 0;
	static bool space_left = true;
	struct statvfs fs;
	time_t		now = time(NULL);

	if (now - checked_at < SPACE_CHECK_SECS)
		return space_left;
	checked_at = now;
	if (statvfs(read_cache_dir, &fs) != 0)
		space_left = false;
	else
	{
		uint64		free_bytes = (uint64) fs.f_bavail * fs.f_frsize;
		uint64		floor_bytes = Min((uint64) 1024 * 1024 * 1024,
									  (uint64) fs.f_blocks * fs.f_frsize / 10);

		space_left = free_bytes >= floor_bytes;
	}
	return space_left;
}

/*
 * Bring the cache under its bound: remove the least recently used files
 * until it holds seven eighths of it, and old temporary files.
 */
static void
read_cache_trim(void)
{
	int64		limit = (int64) read_cache_size_kb * 1024;
	int64		total = 0;
	CacheFileAge *files;
	int			nfiles = 0;
	int			capacity = 1024;
	DIR		   *dir;
	struct dirent *de;
	time_t		now = time(NULL);
	char		path[MAXPGPATH];

	written_since_trim = 0;
	dir = AllocateDir(read_cache_dir);
	if (dir == NULL)
		return;
	files = palloc(sizeof(CacheFileAge) * capacity);
	while ((de = ReadDirExtended(dir, read_cache_dir, LOG_SERVER_ONLY)) != NULL)
	{
		struct stat st;
		bool		temp = strncmp(de->d_name, TEMP_FILE_PREFIX,
								   strlen(TEMP_FILE_PREFIX)) == 0;

		if (!temp && (strlen(de->d_name) != CACHE_FILE_NAME_LEN ||
					  strspn(de->d_name, "0123456789abcdef") != CACHE_FILE_NAME_LEN))
			continue;
		snprintf(path, sizeof(path), "%s/%s", read_cache_dir, de->d_name);
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (temp)
		{
			if (now - st.st_mtime > TEMP_FILE_MAX_AGE_SECS)
				(void) unlink(path);
			continue;
		}
		if (nfiles == capacity)
		{
			capacity *= 2;
			files = repalloc_huge(files, sizeof(CacheFileAge) * capacity);
		}
		files[nfiles].mtime = st.st_mtime;
		files[nfiles].size = st.st_size;
		strlcpy(files[nfiles].name, de->d_name, sizeof(files[nfiles].name));
		nfiles++;
		total += st.st_size;
	}
	FreeDir(dir);
	read_cache_note_trim();

	if (total > limit)
	{
		qsort(files, nfiles, sizeof(CacheFileAge), cache_file_age_cmp);
		for (int i = 0; i < nfiles && total > limit - limit / 8; i++)
		{
			snprintf(path, sizeof(path), "%s/%s", read_cache_dir, files[i].name);
			if (unlink(path) == 0)
				read_cache_counters.evicted++;
			total -= files[i].size;
		}
	}
	pfree(files);
}

/*
 * Keep data as the cache file of (id, block).  Failing is not an error:
 * the block is simply not kept (and the server log says why, once per
 * backend).
 */
static void
cache_file_save(const char *id, int64 block, const char *data, uint32 length,
				int64 object_size)
{
	static uint32 temp_counter = 0;
	static bool write_failure_logged = false;
	ReadCacheFileHeader header = {0};
	char		path[MAXPGPATH];
	char		temp[MAXPGPATH];
	StringInfoData content;
	int			fd;
	bool		written;

	header.magic = READ_CACHE_MAGIC;
	header.id_length = strlen(id);
	header.data_length = length;
	header.object_size = object_size;
	header.block = block;
	INIT_CRC32C(header.data_crc);
	COMP_CRC32C(header.data_crc, data, length);
	FIN_CRC32C(header.data_crc);
	header.header_crc = cache_header_crc(&header, id);

	if (!read_cache_space_left())
		return;
	if (written_since_trim < 0 && read_cache_trimmed_lately())
		written_since_trim = 0;
	if (written_since_trim < 0 ||
		written_since_trim + (int64) sizeof(header) + header.id_length + length >
		Max((int64) read_cache_size_kb * 1024 / 16, READ_CACHE_BLOCK_SIZE))
		read_cache_trim();

	initStringInfo(&content);
	appendBinaryStringInfo(&content, (const char *) &header, sizeof(header));
	appendBinaryStringInfo(&content, id, header.id_length);
	appendBinaryStringInfo(&content, data, length);

	cache_file_path(id, block, path);
	snprintf(temp, sizeof(temp), "%s/" TEMP_FILE_PREFIX "%d.%u",
			 read_cache_dir, MyProcPid, temp_counter++);
	fd = OpenTransientFilePerm(temp, O_WRONLY | O_CREAT | O_EXCL | PG_BINARY,
							   pg_file_create_mode);
	if (fd < 0 && errno == EEXIST)
	{
		/* left by a backend that died with our process id */
		(void) unlink(temp);
		fd = OpenTransientFilePerm(temp, O_WRONLY | O_CREAT | O_EXCL | PG_BINARY,
								   pg_file_create_mode);
	}
	errno = 0;
	written = fd >= 0 && write(fd, content.data, content.len) == content.len;
	if (fd >= 0 && !written && errno == 0)
		errno = ENOSPC;			/* a short write sets none */
	if (fd >= 0 && CloseTransientFile(fd) != 0)
		written = false;
	if (written && rename(temp, path) != 0)
		written = false;
	if (!written)
	{
		if (!write_failure_logged)
			ereport(LOG_SERVER_ONLY,
					(errcode_for_file_access(),
					 errmsg("could not write a file of rollout_fdw.cache_dir \"%s\", the block is not kept: %m",
							read_cache_dir)));
		write_failure_logged = true;
		if (fd >= 0)
			(void) unlink(temp);
	}
	else
		written_since_trim += content.len;
	pfree(content.data);
}

/*
 * Keep the whole blocks within data, which holds the object's bytes from
 * offset on (the blocks ending at the object's end count as whole).
 */
static void
cache_save_covered_blocks(const char *id, const char *data, int64 length,
						  int64 offset, int64 object_size)
{
	int64		block = (offset + READ_CACHE_BLOCK_SIZE - 1) / READ_CACHE_BLOCK_SIZE;

	for (; block * READ_CACHE_BLOCK_SIZE < object_size; block++)
	{
		int64		start = block * READ_CACHE_BLOCK_SIZE;
		int64		block_length = Min(READ_CACHE_BLOCK_SIZE, object_size - start);

		if (start + block_length > offset + length)
			break;
		cache_file_save(id, block, data + (start - offset),
						(uint32) block_length, object_size);
	}
}

/* ----------------------------------------------------------------
 * Reads through the cache
 * ----------------------------------------------------------------
 */

/* How a caller's read is served. */
typedef enum PlannedReadKind
{
	READ_UNCACHED,				/* from the store, as asked */
	READ_LEARNING,				/* from the store as asked, kept afterwards */
	READ_BY_BLOCKS				/* cached blocks and fetched runs of blocks */
} PlannedReadKind;

typedef struct PlannedRead
{
	ObjectStoreRead *read;		/* the caller's */
	const char *id;
	PlannedReadKind kind;
	int64		object_size;	/* -1: unknown before fetching */
	bool		size_recorded;	/* the cache holds its size record */
	int64		start;			/* READ_BY_BLOCKS: the bytes wanted */
	int64		end;			/* (end exclusive; -1: to the object's end) */
	int64		first_block;
	int			nblocks;
	StringInfoData *blocks;		/* each block's bytes, .data NULL if missing */
	int			first_fetch;	/* its reads in the batch */
	int			nfetches;
	int			out_start;		/* READ_LEARNING: where its bytes begin */
} PlannedRead;

/* Add to the batch one read of blocks [first, first + count) of plan's. */
static void
plan_fetch_blocks(PlannedRead *plan, ObjectStoreRead *fetch, int64 first,
				  int count)
{
	fetch->key = plan->read->key;
	fetch->offset = first * READ_CACHE_BLOCK_SIZE;
	fetch->length = (int64) count * READ_CACHE_BLOCK_SIZE;
	fetch->tail = false;
	fetch->size_hint = plan->read->size_hint;
	fetch->out = makeStringInfo();
}

/*
 * Decide how plan's read is served and load the blocks the cache has.
 * Returns how many reads it adds to the batch (at most its block count, or
 * one).
 */
static int
plan_read(PlannedRead *plan)
{
	ObjectStoreRead *read = plan->read;
	StringInfoData none;
	int64		last_block;

	plan->object_size = -1;
	plan->kind = READ_UNCACHED;
	if (plan->id == NULL || read->length == 0 ||
		(!read->tail && (read->offset < 0 ||
						 read->offset > PG_INT64_MAX - (int64) MaxAllocSize)) ||
		read->length > (int64) MaxAllocSize)
		return 1;				/* as asked: the store says what (or errs) */

	initStringInfo(&none);
	plan->size_recorded = cache_file_load(plan->id, SIZE_RECORD_BLOCK, &none,
										  &plan->object_size);
	pfree(none.data);
	if (plan->object_size < 0 && read->size_hint >= 0)
		plan->object_size = read->size_hint;

	if (read->tail || read->length < 0)
	{
		if (plan->object_size < 0)
		{
			plan->kind = READ_LEARNING;
			return 1;
		}
		plan->start = read->tail ?
			Max(0, read->length < 0 ? 0 : plan->object_size - read->length) :
			read->offset;
		plan->end = plan->object_size;
	}
	else
	{
		plan->start = read->offset;
		plan->end = read->offset + read->length;
		if (plan->object_size >= 0)
			plan->end = Min(plan->end, plan->object_size);
	}
	if (plan->start >= plan->end)
		return 1;				/* nothing to read: the store says what */

	plan->kind = READ_BY_BLOCKS;
	plan->first_block = plan->start / READ_CACHE_BLOCK_SIZE;
	last_block = (plan->end - 1) / READ_CACHE_BLOCK_SIZE;
	plan->nblocks = (int) (last_block - plan->first_block + 1);
	plan->blocks = palloc0(sizeof(StringInfoData) * plan->nblocks);
	for (int j = 0; j < plan->nblocks; j++)
	{
		StringInfoData bytes;
		int64		size;

		initStringInfo(&bytes);
		if (!cache_file_load(plan->id, plan->first_block + j, &bytes, &size))
		{
			pfree(bytes.data);
			continue;
		}
		if (plan->object_size >= 0 && size != plan->object_size)
		{
			/* a wrong size hint, or a cache that disagrees: trust neither */
			pfree(bytes.data);
			for (int k = 0; k < j; k++)
				if (plan->blocks[k].data != NULL)
					pfree(plan->blocks[k].data);
			plan->kind = READ_UNCACHED;
			return 1;
		}
		plan->object_size = size;
		plan->blocks[j] = bytes;
	}

	plan->nfetches = 0;
	for (int j = 0; j < plan->nblocks; j++)
		if (plan->blocks[j].data == NULL &&
			(j == 0 || plan->blocks[j - 1].data != NULL))
			plan->nfetches++;
	return plan->nfetches;
}

/* Fill in plan's reads of the batch, from fetches[plan->first_fetch] on. */
static void
plan_fill_fetches(PlannedRead *plan, ObjectStoreRead *fetches)
{
	ObjectStoreRead *fetch = &fetches[plan->first_fetch];

	if (plan->kind != READ_BY_BLOCKS)
	{
		*fetch = *plan->read;
		plan->out_start = plan->read->out->len;
		return;
	}
	for (int j = 0; j < plan->nblocks; j++)
	{
		int			count = 0;

		if (plan->blocks[j].data != NULL ||
			(j > 0 && plan->blocks[j - 1].data == NULL))
			continue;
		while (j + count < plan->nblocks && plan->blocks[j + count].data == NULL)
			count++;
		plan_fetch_blocks(plan, fetch++, plan->first_block + j, count);
	}
}

/*
 * Split the fetched runs of plan into its blocks and keep them.  False when
 * the object's size or bytes do not add up (a size hint that was wrong):
 * the read must then go to the store as asked.
 */
static bool
plan_take_fetched_blocks(PlannedRead *plan, ObjectStoreRead *fetches)
{
	ObjectStoreRead *fetch = &fetches[plan->first_fetch];
	int64		size = plan->object_size;

	for (int k = 0; k < plan->nfetches; k++)
	{
		if (!fetch[k].found)
			return true;		/* the object is gone: the read says so */
		if (size >= 0 && fetch[k].object_size != size)
			return false;
		size = fetch[k].object_size;
	}
	for (int k = 0; k < plan->nfetches; k++, fetch++)
	{
		int64		run_end = Min(fetch->offset + fetch->length, size);
		int			j = (int) (fetch->offset / READ_CACHE_BLOCK_SIZE - plan->first_block);

		if (run_end <= fetch->offset ||
			fetch->out->len != run_end - fetch->offset)
			return false;
		read_cache_counters.miss_bytes += fetch->out->len;
		for (int64 start = fetch->offset; start < run_end;
			 start += READ_CACHE_BLOCK_SIZE, j++)
		{
			int			length = (int) Min(READ_CACHE_BLOCK_SIZE, run_end - start);
			const char *bytes = fetch->out->data + (start - fetch->offset);

			cache_file_save(plan->id, plan->first_block + j, bytes, length, size);
			/* the block points into the run: the batch holds its bytes once */
			plan->blocks[j].data = (char *) bytes;
			plan->blocks[j].len = length;
			read_cache_counters.misses++;
		}
	}
	plan->object_size = size;
	return true;
}

/*
 * The caller's result of a read by blocks, once every block is there.  A
 * block missing now lies past the object's end (a range past the end is
 * truncated to the object, as the store does).
 */
static void
plan_assemble(PlannedRead *plan)
{
	ObjectStoreRead *read = plan->read;
	int64		end = Min(plan->end, plan->object_size);

	for (int j = 0; j < plan->nblocks; j++)
	{
		int64		block_start = (plan->first_block + j) * READ_CACHE_BLOCK_SIZE;
		int64		from = Max(plan->start, block_start);
		int64		to = Min(end, block_start + plan->blocks[j].len);

		if (plan->blocks[j].data == NULL || to <= from)
			continue;
		appendBinaryStringInfo(read->out,
							   plan->blocks[j].data + (from - block_start),
							   (int) (to - from));
	}
	read->found = true;
	read->object_size = plan->object_size;
}

/*
 * Settle plan's read after the batch.  False when it must go to the store
 * as asked after all.
 */
static bool
plan_finish(PlannedRead *plan, ObjectStoreRead *fetches)
{
	ObjectStoreRead *read = plan->read;
	ObjectStoreRead *fetch = &fetches[plan->first_fetch];

	if (plan->kind != READ_BY_BLOCKS)
	{
		read->found = fetch->found;
		read->object_size = fetch->object_size;
		if (plan->kind == READ_LEARNING && read->found)
		{
			int64		length = read->out->len - plan->out_start;
			int64		offset = read->tail ? read->object_size - length : read->offset;

			read_cache_counters.misses++;
			read_cache_counters.miss_bytes += length;
			cache_file_save(plan->id, SIZE_RECORD_BLOCK, NULL, 0, read->object_size);
			cache_save_covered_blocks(plan->id, read->out->data + plan->out_start,
									  length, offset, read->object_size);
		}
		return true;
	}

	for (int j = 0; j < plan->nblocks; j++)
		if (plan->blocks[j].data != NULL)
		{
			read_cache_counters.hits++;
			read_cache_counters.hit_bytes += plan->blocks[j].len;
		}
	if (!plan_take_fetched_blocks(plan, fetches))
		return false;
	for (int k = 0; k < plan->nfetches; k++)
		if (!fetch[k].found)
		{
			read->found = false;
			read->object_size = -1;
			return true;
		}
	if (!plan->size_recorded)
		cache_file_save(plan->id, SIZE_RECORD_BLOCK, NULL, 0, plan->object_size);
	plan_assemble(plan);
	return true;
}

void
read_cache_get_many(ObjectStore *store, ObjectStoreRead *reads,
					const char *const *cache_ids, int nreads)
{
	MemoryContext context;
	MemoryContext oldcontext;
	PlannedRead *plans;
	ObjectStoreRead *fetches;
	int			nfetches = 0;
	ObjectStoreRead *retries;
	int		   *again;
	int			nagain = 0;
	bool		any_cached = false;

	for (int i = 0; cache_ids != NULL && i < nreads; i++)
		if (cache_ids[i] != NULL)
			any_cached = true;
	if (!any_cached || !read_cache_directory_ready())
	{
		objstore_get_many(store, reads, nreads);
		return;
	}

	/*
	 * The blocks live in a context of their own; the callers' buffers grow
	 * where they were made.
	 */
	context = AllocSetContextCreate(CurrentMemoryContext, "rollout read cache",
									ALLOCSET_DEFAULT_SIZES);
	oldcontext = MemoryContextSwitchTo(context);
	plans = palloc0(sizeof(PlannedRead) * nreads);
	for (int i = 0; i < nreads; i++)
	{
		CHECK_FOR_INTERRUPTS();
		plans[i].read = &reads[i];
		plans[i].id = cache_ids[i];
		plans[i].first_fetch = nfetches;
		plans[i].nfetches = plan_read(&plans[i]);
		nfetches += plans[i].nfetches;
	}
	fetches = palloc0(sizeof(ObjectStoreRead) * Max(nfetches, 1));
	for (int i = 0; i < nreads; i++)
		plan_fill_fetches(&plans[i], fetches);
	if (nfetches > 0)
		objstore_get_many(store, fetches, nfetches);

	/* the few reads whose size hint was wrong go again, as asked */
	again = palloc(sizeof(int) * nreads);
	retries = palloc(sizeof(ObjectStoreRead) * nreads);
	for (int i = 0; i < nreads; i++)
		if (!plan_finish(&plans[i], fetches))
		{
			retries[nagain] = reads[i];
			again[nagain++] = i;
		}
	if (nagain > 0)
		objstore_get_many(store, retries, nagain);
	for (int k = 0; k < nagain; k++)
	{
		reads[again[k]].found = retries[k].found;
		reads[again[k]].object_size = retries[k].object_size;
	}
	MemoryContextSwitchTo(oldcontext);
	MemoryContextDelete(context);
}
