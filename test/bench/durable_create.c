/*-------------------------------------------------------------------------
 *
 * durable_create.c
 *		What a durable create of a small new file costs on this file system,
 *		next to what the heap's commit costs: a write into a preallocated
 *		file and fdatasync.  A program that prints figures (run by
 *		durable_create.sh), never a test.
 *
 * Each pattern makes `count` objects of `size` bytes in a directory and
 * prints the mean milliseconds per object:
 *
 *	heap_flush		pwrite into a file allocated and fsync'd beforehand, then
 *					fdatasync: no metadata changes, so no journal commit
 *					(PostgreSQL's WAL segments).
 *	rollout_create	what the file:// store does per WAL entry
 *					(src/objstore/file_store.c): an unnamed file (O_TMPFILE),
 *					write, the put id as an extended attribute, fsync, linkat
 *					to the key, fsync of the directory.
 *	no_dir_fsync	the same without the directory's fsync.  Not durable:
 *					the name may be lost in a crash after the create returned.
 *	link_then_fsync	link first, then fsync the file and the directory: one
 *					journal commit fewer on ext4, but the object is visible
 *					before it is durable, and a crash can leave it empty.
 *
 * Copyright (c) rollout_fdw authors
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static void
die(const char *what)
{
	fprintf(stderr, "durable_create: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
write_all(int fd, const char *data, size_t size, off_t offset)
{
	while (size > 0)
	{
		ssize_t		n = pwrite(fd, data, size, offset);

		if (n <= 0)
			die("write");
		data += n;
		size -= n;
		offset += n;
	}
}

static void
sync_or_die(int fd, int data_only)
{
	if ((data_only ? fdatasync(fd) : fsync(fd)) != 0)
		die("fsync");
}

/* heap_flush: the preallocated file is written and synced before timing */
static double
heap_flush(const char *dir, const char *data, size_t size, int count)
{
	char		path[4096];
	int			fd;
	double		start;

	snprintf(path, sizeof(path), "%s/preallocated", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die("open preallocated file");
	for (int i = 0; i < count; i++)
		write_all(fd, data, size, (off_t) i * size);
	sync_or_die(fd, 0);

	start = now_ms();
	for (int i = 0; i < count; i++)
	{
		write_all(fd, data, size, (off_t) i * size);
		sync_or_die(fd, 1);
	}
	close(fd);
	return (now_ms() - start) / count;
}

/* one new object, linked as <dir>/objects/<pattern>.<i> */
static void
create_one(const char *dir, int dir_fd, const char *pattern, int i,
		   const char *data, size_t size, int link_first, int sync_dir)
{
	char		tmp_dir[4096];
	char		proc_path[64];
	char		key_path[4096];
	int			fd;

	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tmp", dir);
	snprintf(key_path, sizeof(key_path), "%s/objects/%s.%d", dir, pattern, i);
	fd = open(tmp_dir, O_TMPFILE | O_WRONLY, 0600);
	if (fd < 0)
		die("open O_TMPFILE");
	snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", fd);
	write_all(fd, data, size, 0);
	if (fsetxattr(fd, "user.rollout_put_id", "0123456789abcdef0123456789abcdef", 32, 0) != 0 &&
		errno != ENOTSUP)
		die("fsetxattr");
	if (!link_first)
		sync_or_die(fd, 0);
	if (linkat(AT_FDCWD, proc_path, AT_FDCWD, key_path, AT_SYMLINK_FOLLOW) != 0)
		die("linkat");
	if (link_first)
		sync_or_die(fd, 0);
	if (sync_dir)
		sync_or_die(dir_fd, 0);
	close(fd);
}

static double
create_pattern(const char *dir, const char *pattern, const char *data,
			   size_t size, int count, int link_first, int sync_dir)
{
	char		objects[4096];
	int			dir_fd;
	double		start;

	snprintf(objects, sizeof(objects), "%s/objects", dir);
	dir_fd = open(objects, O_RDONLY | O_DIRECTORY);
	if (dir_fd < 0)
		die("open objects directory");
	start = now_ms();
	for (int i = 0; i < count; i++)
		create_one(dir, dir_fd, pattern, i, data, size, link_first, sync_dir);
	close(dir_fd);
	return (now_ms() - start) / count;
}

int
main(int argc, char **argv)
{
	const char *dir;
	int			count;
	size_t		size;
	char	   *data;
	char		path[4096];
	double		heap;

	if (argc != 4)
	{
		fprintf(stderr, "usage: durable_create DIR COUNT SIZE\n");
		return 2;
	}
	dir = argv[1];
	count = atoi(argv[2]);
	size = (size_t) atol(argv[3]);
	if (count <= 0 || size == 0)
	{
		fprintf(stderr, "durable_create: COUNT and SIZE must be positive\n");
		return 2;
	}
	data = malloc(size);
	if (data == NULL)
		die("malloc");
	for (size_t i = 0; i < size; i++)
		data[i] = (char) (i * 7919 % 251);
	snprintf(path, sizeof(path), "%s/tmp", dir);
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		die("mkdir tmp");
	snprintf(path, sizeof(path), "%s/objects", dir);
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		die("mkdir objects");

	heap = heap_flush(dir, data, size, count);
	printf("heap_flush %.3f 1.00\n", heap);
	{
		double		ms = create_pattern(dir, "rollout_create", data, size, count, 0, 1);

		printf("rollout_create %.3f %.2f\n", ms, ms / heap);
		ms = create_pattern(dir, "no_dir_fsync", data, size, count, 0, 0);
		printf("no_dir_fsync %.3f %.2f\n", ms, ms / heap);
		ms = create_pattern(dir, "link_then_fsync", data, size, count, 1, 1);
		printf("link_then_fsync %.3f %.2f\n", ms, ms / heap);
	}
	free(data);
	return 0;
}
