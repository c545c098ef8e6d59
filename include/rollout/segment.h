/*-------------------------------------------------------------------------
 *
 * segment.h
 *		The one file format for WAL entries, generations and base fragments.
 *
 * A segment is a columnar file: row groups of a few thousand rows, each
 * column of a row group one "chunk" holding a null bitmap and the values as
 * PostgreSQL datum images, compressed with zstd and checksummed with CRC32C.
 * A footer at the end carries the schema, the row-group directory, per
 * column min/max per row group (zone maps), the key range and opaque
 * caller metadata; the last bytes are the footer length and a magic number,
 * so a reader needs one ranged read of the tail to learn everything.  The
 * exact bytes are in docs/FORMAT.md.
 *
 * This layer knows PostgreSQL types (it stores datums) but nothing of
 * manifests, shards or WAL positions: the caller's metadata is an opaque
 * string, and the hidden columns (_ts, _op...) are ordinary columns to it.
 *
 * Ordering.  Min/max statistics and key ranges use one order per type that
 * never depends on the database's collation: the type's default btree
 * operator class, called with the "C" collation for collatable types (byte
 * order for text).  segment_column_compare() exposes that order so the
 * layers above sort and merge with exactly the same one.
 *
 * Corrupt input.  The reader validates magic, version, checksums and every
 * offset and length before it uses them, and raises
 *	ERROR: segment "<object>" is corrupt (ERRCODE_DATA_CORRUPTED)
 * with a detail saying what was wrong.  It never reads out of bounds.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SEGMENT_H
#define ROLLOUT_SEGMENT_H

#include "fmgr.h"
#include "lib/stringinfo.h"

/*
 * The newest format this release writes and reads, and the oldest it reads.
 * Version 1 is version 2 without the key filter section; version 3 is
 * version 2 with a page directory in every chunk entry.  A segment is
 * written as version 3 when it has pages, else as version 2 when it has a
 * key filter, else as version 1, byte for byte what older releases write
 * and read.
 */
#define SEGMENT_FORMAT_VERSION		4
#define SEGMENT_FORMAT_VERSION_MIN	1

/* How much of the tail segment_reader_open() reads first. */
#define SEGMENT_TAIL_READ_SIZE		(64 * 1024)
#define SEGMENT_DEFAULT_ROWS_PER_GROUP	4096

/* One column of a segment's schema. */
typedef struct SegmentColumn
{
	char	   *name;
	char	   *type_name;		/* format_type_with_typemod() text, for checks */
	Oid			typid;			/* meaningful for built-in types only */
	int32		typmod;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	char		typstorage;		/* the writer's: plain varlenas stay long */

	/*
	 * The column's order (see above).  Filled by segment_column_init_order();
	 * has_order is false for types without a default btree opclass, which
	 * then get no min/max statistics.
	 */
	bool		has_order;
	FmgrInfo	compare_proc;
	Oid			compare_collation;
	char		compare_inline; /* SEGMENT_COMPARE_*: see below */

	/*
	 * The structural check of the column's images (image_check.h), or NULL
	 * when any image of the right framing is a value.  Filled by
	 * segment_column_init(); a reader takes it from the schema its source
	 * expects, never from the footer it reads.
	 */
	const struct ImageCheck *image_check;
} SegmentColumn;

/*
 * Types whose default btree order segment_column_compare computes itself,
 * with exactly the result's sign of their support function: a scan compares
 * every key with the one before it, and a merge compares keys at every
 * step, so a function call per comparison is a good part of a scan's time.
 */
#define SEGMENT_COMPARE_CALL	0	/* call compare_proc */
#define SEGMENT_COMPARE_INT16	1	/* btint2cmp */
#define SEGMENT_COMPARE_INT32	2	/* btint4cmp, date_cmp */
#define SEGMENT_COMPARE_INT64	3	/* btint8cmp, timestamp_cmp,
									 * timestamptz_cmp */
#define SEGMENT_COMPARE_UUID	4	/* uuid_cmp: bytewise */

typedef struct SegmentSchema
{
	int			ncolumns;
	SegmentColumn *columns;
	int			key_column;		/* index into columns of the key */
} SegmentSchema;

/*
 * Fill in typlen/typbyval/typalign/type_name and the order of a column from
 * its typid/typmod (catalog lookups; for the writer's side).
 */
extern void segment_column_init(SegmentColumn *column, const char *name,
								Oid typid, int32 typmod);

/* Fill in only the order of a column whose typid is set. */
extern void segment_column_init_order(SegmentColumn *column);

/* Compare two non-null datums of a column by the column's order. */
extern int	segment_column_compare(const SegmentColumn *column, Datum a, Datum b);

/* ---------------------------------------------------------------------
 * Writing
 * ---------------------------------------------------------------------
 */
typedef struct SegmentWriter SegmentWriter;

/* What a finished segment holds; Datums are copies in the caller's context. */
typedef struct SegmentWriteSummary
{
	int64		row_count;
	int64		bytes;			/* size of the written file */
	int			row_group_count;
	bool		has_key_range;	/* false only when row_count == 0 */
	Datum		key_min;
	Datum		key_max;
	/* per column (schema order): whether min/max exist, and the values */
	bool	   *has_stats;
	Datum	   *column_min;
	Datum	   *column_max;
	int64	   *null_count;
} SegmentWriteSummary;

/*
 * Start a segment that will be written to local_path (created, truncated).
 * If sorted is true the caller promises rows arrive in ascending key order
 * (generations, fragments); the flag is recorded in the footer.  With
 * key_filter_bits > 0 the footer gets a key filter of about that many bits
 * per row (format version 2).  With page_size > 0 each column chunk is cut
 * into pages of about that many raw bytes, each decodable on its own (format
 * version 3); 0 writes one page per chunk and version 1 or 2.  With pages and
 * dictionary_size > 0, a wide column gets a zstd dictionary of at most that
 * many bytes, trained on its first row group (format version 4).  The schema
 * must stay valid until segment_writer_finish().
 */
extern SegmentWriter *segment_writer_begin(const SegmentSchema *schema,
										   const char *local_path,
										   bool sorted,
										   int rows_per_group,
										   int key_filter_bits,
										   int page_size,
										   int dictionary_size);

/*
 * The same, with the segment appended to output (emptied first) instead of
 * a file: for segments small enough to keep in memory, such as most WAL
 * entries, whose writers then spare the file system a scratch file.  name
 * stands for the segment in messages.  output must outlive the writer.
 */
extern SegmentWriter *segment_writer_begin_in_memory(const SegmentSchema *schema,
													 StringInfo output,
													 const char *name,
													 bool sorted,
													 int rows_per_group,
													 int key_filter_bits,
													 int page_size,
													 int dictionary_size);

/*
 * Compress every page once: at level 1, or in fast mode if it is small,
 * without also trying fast mode where that would make reads cheaper (the
 * default, which favours readers): for segments written on a commit's path
 * and rewritten soon, such as WAL entries.  Call right after beginning.
 */
extern void segment_writer_compress_once(SegmentWriter *writer);

/* Append one row.  Varlena values may be toasted; they are stored flat. */
extern void segment_writer_add_row(SegmentWriter *writer,
								   const Datum *values, const bool *isnull);

/*
 * Write the footer (with the caller's opaque metadata, may be NULL), close the
 * file and fill *summary.  The file is not fsync'd: the object store makes
 * the final object durable.  A segment in memory is complete in its output.
 */
extern void segment_writer_finish(SegmentWriter *writer,
								  const char *metadata,
								  SegmentWriteSummary *summary);

/*
 * Close and remove the file (or empty the memory output, which must still
 * exist) after an error path that does not ERROR.
 */
extern void segment_writer_discard(SegmentWriter *writer);

/* ---------------------------------------------------------------------
 * Reading
 * ---------------------------------------------------------------------
 */

struct SegmentReader;			/* below; a SegmentSource may hand one out */

/*
 * Where the reader's bytes come from: the lsm layer wraps an object-store
 * object, tests and fuzzers wrap a memory buffer.  Both callbacks append to
 * out and return false when the object does not exist (any more).
 *
 * The reader asks for exactly the ranges a caller can learn beforehand: the
 * last SEGMENT_TAIL_READ_SIZE bytes when it opens (then, for a footer larger
 * than that, the footer itself), and per row group the ranges of
 * segment_reader_row_group_ranges().  A source may therefore have fetched
 * them ahead of time, many objects at once (store_sources.h, prefetching),
 * and serve them from memory.
 *
 * A source may also know the footer already (a cache: segments never change
 * once written).  known_footer, when set, is asked first: it points *footer
 * at the footer (footer_length bytes, its checksum included), valid until
 * CurrentMemoryContext (the reader's) goes, sets *object_size and returns
 * true, or returns false to have it read.  Only footers the reader read and
 * checked are known: it hands each to footer_read, when set, and does not
 * check a known footer's checksum again (its structure it decodes as
 * carefully as ever).
 *
 * Decoding a footer costs as much as it is long (a million-row fragment's
 * has thousands of chunk entries, and a lookup needs one), so a source
 * with known footers may also keep them decoded.  known_footer then sets
 * *decoded to the decoded form kept with that footer, or NULL; the reader
 * copies it instead of decoding.  When there is none and footer_decoded is
 * set, the reader decodes into a new context and hands the decoded form
 * over, context and all, to be kept with the footer it came from (it
 * points into those bytes) and lent the same way.
 */
typedef struct SegmentSource
{
	const char *name;			/* object key, for error messages */
	void	   *arg;
	bool		(*read_range) (void *arg, int64 offset, int64 length,
							   StringInfo out);
	bool		(*read_tail) (void *arg, int64 length, StringInfo out,
							  int64 *object_size);
	bool		(*known_footer) (void *arg, const char **footer,
								 int64 *footer_length, int64 *object_size,
								 const struct SegmentReader **decoded);
	void		(*footer_decoded) (void *arg, struct SegmentReader *decoded,
								   MemoryContext context);
	void		(*footer_read) (void *arg, const char *footer, int64 footer_length,
								int64 object_size);

	/*
	 * Does another small read cost no round trip (a local file)?  Then a row
	 * group's deferred columns are not read with it, but page by page when
	 * decoded (segment_reader_read_row_group).
	 */
	bool		cheap_reads;

	/*
	 * The schema the segment must have (the store's), whose columns' image
	 * checks the reader applies to every value and statistic it decodes; a
	 * footer of another layout is corrupt.  NULL: nothing is checked (a file
	 * this backend wrote itself, rollout_local_segment_source).
	 */
	const struct SegmentSchema *expected_schema;
} SegmentSource;

/* One page of a chunk of format version 3 (segment_reader.c). */
typedef struct SegmentPageInfo
{
	int64		first_row;
	int64		row_count;
	int64		offset;			/* of its zstd frame, from the chunk's start */
	int64		compressed_size;
	uint32		crc;			/* CRC32C of the frame */
} SegmentPageInfo;

/* One column chunk's directory entry. */
typedef struct SegmentChunkInfo
{
	int64		offset;			/* of the compressed chunk in the file */
	int64		compressed_size;
	int64		raw_size;
	uint32		crc;			/* CRC32C of the compressed bytes */
	int64		null_count;
	bool		has_stats;
	Datum		min;			/* valid when has_stats */
	Datum		max;

	/*
	 * Pages: 1 for chunks of format versions 1 and 2.  The page directory of
	 * a chunk of more is decoded (into pages) when first needed, from its
	 * bytes in the footer, which the reader keeps.
	 */
	int			page_count;
	const unsigned char *page_entries;
	SegmentPageInfo *pages;
} SegmentChunkInfo;

typedef struct SegmentRowGroupInfo
{
	int64		row_count;
	SegmentChunkInfo *chunks;	/* one per schema column */
} SegmentRowGroupInfo;

typedef struct SegmentReader
{
	SegmentSource *source;
	int64		object_size;
	uint32		format_version;
	bool		sorted;
	SegmentSchema schema;		/* as stored in the footer (order initialised) */

	/*
	 * Per schema column, the check of its images (see SegmentColumn), from
	 * the source's expected schema; in the reader's own context, since a
	 * decoded footer is shared by readers of several sources.
	 */
	const struct ImageCheck **image_checks;
	int64		row_count;
	int			row_group_count;
	SegmentRowGroupInfo *row_groups;
	bool		has_key_range;
	Datum		key_min;
	Datum		key_max;
	char	   *metadata;		/* writer's metadata (a string), or NULL */
	const uint8 *key_filter;	/* the key filter's bits (in the footer's
								 * bytes, which the reader keeps), or NULL */
	uint64		key_filter_bits;
	int			key_filter_probes;

	/*
	 * Per schema column, the zstd dictionary its pages were compressed with
	 * (version 4); NULL when no column has one.  Shared by the readers of a
	 * decoded footer, as long as its context lives.
	 */
	struct SegmentDictionary *dictionaries;
	MemoryContext context;		/* the reader's: freed with it */

	/*
	 * Holds the decoded footer (schema, row groups, the page directories
	 * decoded later): context, or a kept decoded footer's (see
	 * SegmentSource), which the reader shares and must not change but by
	 * decoding page directories into this context.
	 */
	MemoryContext footer_context;
} SegmentReader;

/*
 * A column's compression dictionary: its bytes (in the footer's bytes) and,
 * once a page of the column was decompressed, zstd's digested form of it,
 * made then (in the decoded footer's context): a lookup that skips the
 * segment by its key filter, or reads none of the column, never pays for it.
 * length 0: no dictionary.
 */
typedef struct SegmentDictionary
{
	const char *bytes;
	int64		length;
	struct ZSTD_DDict_s *digested;
} SegmentDictionary;

/* Decoded columns of one row group. */
typedef struct SegmentRowGroup
{
	int64		row_count;
	/* per schema column; NULL for columns that were not requested */
	Datum	  **values;
	bool	  **isnull;

	/*
	 * Per schema column, or NULL: the compressed chunk of a column read but
	 * not decoded yet (segment_row_group_decode_deferred), NULL once wholly
	 * decoded.  A deferred column's values and isnull exist once one of its
	 * pages is decoded; rows ready_start .. ready_end - 1 (the page decoded
	 * last) are, and page_decoded says which other pages are.
	 */
	const char **deferred;
	int			deferred_count; /* columns still deferred */
	int64	   *ready_start;
	int64	   *ready_end;
	bool	  **page_decoded;
	int64	   *raw_decoded;	/* bytes its decoded pages decompressed to */

	/*
	 * Per schema column, or NULL: pages of a chunk that was not read along (a
	 * source of cheap reads), read ahead of the page a row needed once its
	 * pages are wanted one after another.  A reader that wants no read-ahead
	 * (a lookup) sets it to NULL.
	 */
	struct SegmentReadAhead **read_ahead;
} SegmentRowGroup;

/* Is row `row` of column `column` decoded (not deferred, or its page is)? */
static inline bool
segment_row_group_row_ready(const SegmentRowGroup *rows, int column, int64 row)
{
	return rows->deferred == NULL || rows->deferred[column] == NULL ||
		(row >= rows->ready_start[column] && row < rows->ready_end[column]);
}

/*
 * Read and validate the footer.  Returns NULL when the object does not exist;
 * raises the corrupt-segment ERROR for anything malformed.  The reader lives
 * in a child of CurrentMemoryContext.
 */
extern SegmentReader *segment_reader_open(SegmentSource *source);

/*
 * One ranged read of a row group: the chunks of columns first..last (of
 * which the unwanted ones, read along when small, are not decoded).
 */
typedef struct SegmentRange
{
	int64		offset;
	int64		length;
	int			first_column;
	int			last_column;
} SegmentRange;

/*
 * The ranged reads segment_reader_read_row_group() will make for these
 * columns of this row group (with the same want and defer), in order
 * (nearby chunks coalesced).  Returns how many; *ranges is palloc'd in
 * CurrentMemoryContext, NULL when none.
 */
extern int	segment_reader_row_group_ranges(SegmentReader *reader, int row_group,
											const bool *want, const bool *defer,
											SegmentRange **ranges);

/*
 * Read the requested columns (want[i] for schema column i) of one row group
 * into *out and decode them, except those with defer[i] (defer may be NULL):
 * their compressed chunks are kept, checked and decoded only when
 * segment_row_group_decode_deferred asks for them (and from a source with
 * cheap_reads they are not even read until then, page by page), so that a
 * reader that
 * settles which rows it needs from a few columns never decompresses the
 * others for a row group it then does not need.  Everything lives in
 * CurrentMemoryContext (Datums point into its buffers), so a caller resets
 * one context per row group.  Raises ERROR if the object vanished or a
 * decoded chunk is corrupt.
 */
extern void segment_reader_read_row_group(SegmentReader *reader, int row_group,
										  const bool *want, const bool *defer,
										  SegmentRowGroup *out);

/*
 * Decode row `row` of a deferred column of a row group read by reader: the
 * page holding it (all of the chunk, for one of a single page), with no
 * I/O, into CurrentMemoryContext, which must be the one the row group was
 * read in.  Returns how many pages it decoded (0 when its page already
 * was).  Raises the corrupt-segment ERROR for a corrupt page.
 */
extern int	segment_row_group_decode_deferred(SegmentReader *reader,
											  int row_group,
											  SegmentRowGroup *rows,
											  int column, int64 row);

/*
 * The rows first .. *end - 1 of the page of chunk (row_group, column) that
 * holds row `row`: the rows one decode of that page makes ready (all of the
 * row group's for a chunk of one page).
 */
extern void segment_reader_page_rows(SegmentReader *reader, int row_group,
									 int column, int64 row, int64 *first,
									 int64 *end);

/*
 * The same for row `row` alone, for a read that needs one row of the page
 * (a key lookup's winner): the page is decompressed, but only that row is
 * decoded, and only it is ready afterwards; the page counts as not decoded.
 */
extern void segment_row_group_decode_deferred_row(SegmentReader *reader,
												  int row_group,
												  SegmentRowGroup *rows,
												  int column, int64 row);

extern void segment_reader_close(SegmentReader *reader);

/*
 * May the segment hold this key (a value of the key column's type)?  False
 * only when its key filter rules the key out; true without a filter.  The
 * caller must only ask for keys whose equality is byte equality (key_filter.c).
 */
extern bool segment_reader_may_contain_key(SegmentReader *reader, Datum key);

/* A SegmentSource over a memory buffer (tests, fuzzing). */
extern SegmentSource *segment_source_from_buffer(const char *name,
												 const char *data, int64 size);

#endif							/* ROLLOUT_SEGMENT_H */
