/*-------------------------------------------------------------------------
 *
 * segment_writer.c
 *		Write a segment to a local file: rows in, row groups of compressed,
 *		checksummed column chunks out, the footer last.
 *
 * The writer buffers one row group at a time.  Each column of the group is
 * encoded as it arrives (datum_codec.c) into its own buffer, with its null
 * bitmap and its statistics (null count, and min/max for columns that have
 * an order).  A group is cut after rows_per_group rows or once its raw size
 * passes SEGMENT_GROUP_RAW_SIZE_LIMIT; then every chunk is compressed with
 * zstd, checksummed with CRC32C and appended to the file, and its directory
 * entry is appended to the footer under construction.  The footer is written
 * by segment_writer_finish().  docs/FORMAT.md describes the bytes.
 *
 * Pages (format version 3).  With a page size, a column's values are cut
 * into pages as they arrive: a page ends before the row that would take it
 * past the page size, or after SEGMENT_PAGE_MAX_ROWS rows.  Each page is its own zstd frame of its rows' values and null
 * bitmap, with its own CRC32C, so that a reader can decode one row's page of
 * a large column without the rest of the chunk.
 *
 * The file is opened with OpenTransientFile(), so an ERROR closes it at
 * transaction abort; the partially written file stays behind for the caller
 * (which writes into a scratch directory) to remove.  zstd compresses with
 * one context per backend, kept across segments (compression_context).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_createCDict_advanced */
#include <zstd.h>
#define ZDICT_STATIC_LINKING_ONLY	/* ZDICT_trainFromBuffer_fastCover */
#include <zdict.h>

#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "segment_internal.h"
#include "storage/fd.h"
#include "utils/datum.h"
#include "utils/memutils.h"

/* The statistics of one column of the row group being buffered. */
typedef struct ColumnGroupState
{
	StringInfoData values;		/* encoded values of the current page */
	int64		page_first_row; /* the current page's first row */
	int			closed_count;	/* pages before the current one */
	int			closed_capacity;
	StringInfoData *closed_values;	/* their values */
	int64	   *closed_rows;	/* their row counts */
	unsigned char *bitmap;		/* bit set = value present, whole group */
	int64		null_count;
	bool		stats_disabled; /* a value's image was too large */
	bool		has_min_max;
	Datum		min;
	Datum		max;
} ColumnGroupState;

/* The statistics of one column over the whole segment. */
typedef struct ColumnTotals
{
	int64		null_count;
	bool		stats_disabled;
	bool		has_min_max;
	Datum		min;
	Datum		max;
} ColumnTotals;

struct SegmentWriter
{
	const SegmentSchema *schema;
	char	   *path;			/* the file, or what the segment is in memory */
	int			fd;				/* -1 when writing to memory */
	StringInfo	memory;			/* the bytes, when writing to memory */
	bool		sorted;
	int			rows_per_group;
	int			page_size;		/* raw bytes per page; 0: one page per chunk */
	bool		compress_once;	/* see segment_writer_compress_once */
	uint32		version;		/* the format version written */
	uint32		header_version; /* the one the header was begun with */
	int64		file_offset;	/* bytes written so far */

	MemoryContext context;		/* the writer and everything segment-wide */
	MemoryContext group_context;	/* reset after each row group */
	MemoryContext row_context;	/* reset after each row */

	/* the row group being buffered */
	int			group_rows;
	int64		group_raw_size;
	ColumnGroupState *columns;

	/* segment-wide */
	int64		row_count;
	int			row_group_count;
	ColumnTotals *totals;
	StringInfoData directory;	/* row-group directory entries, encoded */
	bool		has_previous_key;	/* for checking sorted input */
	Datum		previous_key;

	/* the key filter: bits per key (0: none) and the hash of every key */
	int			key_filter_bits;
	uint64	   *key_hashes;
	int64		key_hash_capacity;

	/*
	 * Compression dictionaries (format version 4): their size (0: none), and
	 * per column the one trained on its first row group, if any, with zstd's
	 * digested form of it (in the writer's context).
	 */
	int			dictionary_size;
	int			dictionary_count;
	char	  **dictionaries;
	size_t	   *dictionary_lengths;
	ZSTD_CDict **compression_dictionaries;
};

/* Append little-endian integers and length-prefixed bytes to a buffer. */
static void
append_uint8(StringInfo buf, uint8 value)
{
	appendStringInfoCharMacro(buf, (char) value);
}

static void
append_uint16(StringInfo buf, uint16 value)
{
	append_uint8(buf, (uint8) value);
	append_uint8(buf, (uint8) (value >> 8));
}

static void
append_uint32(StringInfo buf, uint32 value)
{
	unsigned char bytes[4];

	segment_put_uint32(bytes, value);
	appendBinaryStringInfo(buf, (char *) bytes, 4);
}

static void
append_uint64(StringInfo buf, uint64 value)
{
	append_uint32(buf, (uint32) value);
	append_uint32(buf, (uint32) (value >> 32));
}

static void
append_bytes(StringInfo buf, const char *data, Size length)
{
	append_uint32(buf, (uint32) length);
	appendBinaryStringInfo(buf, data, length);
}

/* Append a value's datum image, length-prefixed (statistics, key range). */
static void
append_image(StringInfo buf, const SegmentColumn *column, Datum value)
{
	Size		size = segment_datum_image_size(column, value);

	append_uint32(buf, (uint32) size);
	enlargeStringInfo(buf, size);
	segment_datum_write_image(column, buf->data + buf->len, value);
	buf->len += size;
	buf->data[buf->len] = '\0';
}

/*
 * Write bytes at the end of the file, retrying short writes, or append them
 * to the memory buffer.  Errors name the file; ENOSPC is reported as such
 * even when write() returns short.
 */
static void
write_bytes(SegmentWriter *writer, const char *data, Size length)
{
	if (writer->memory != NULL)
	{
		appendBinaryStringInfo(writer->memory, data, length);
		writer->file_offset += length;
		return;
	}
	while (length > 0)
	{
		ssize_t		written;

		errno = 0;
		written = write(writer->fd, data, Min(length, (Size) (1024 * 1024 * 1024)));
		if (written < 0 && errno == EINTR)
			continue;
		if (written <= 0)
		{
			if (errno == 0)
				errno = ENOSPC;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write file \"%s\": %m", writer->path)));
		}
		data += written;
		length -= written;
		writer->file_offset += written;
	}
}

/* Start the buffers of a new row group in the (freshly reset) group context. */
static void
start_row_group(SegmentWriter *writer)
{
	const SegmentSchema *schema = writer->schema;
	MemoryContext oldcontext;
	int			i;

	oldcontext = MemoryContextSwitchTo(writer->group_context);
	writer->columns = palloc0(sizeof(ColumnGroupState) * schema->ncolumns);
	for (i = 0; i < schema->ncolumns; i++)
	{
		initStringInfo(&writer->columns[i].values);
		writer->columns[i].bitmap = palloc0((writer->rows_per_group + 7) / 8);
	}
	MemoryContextSwitchTo(oldcontext);
	writer->group_rows = 0;
	writer->group_raw_size = 0;
}

/*
 * Start a segment at local_path (created or truncated), or with local_path
 * NULL in memory, appended to output (its name in messages is name).  The
 * header is written at once; the schema must stay valid until
 * segment_writer_finish().  The key column must have an order, since key
 * ranges and sorted segments are defined by it.
 */
static SegmentWriter *
segment_writer_start(const SegmentSchema *schema, const char *local_path,
					 StringInfo output, const char *name, bool sorted,
					 int rows_per_group, int key_filter_bits, int page_size,
					 int dictionary_size)
{
	SegmentWriter *writer;
	MemoryContext context;
	MemoryContext oldcontext;
	char		header[SEGMENT_HEADER_SIZE];
	int			i;

	if (schema->ncolumns < 1 || schema->ncolumns > SEGMENT_MAX_COLUMNS)
		elog(ERROR, "a segment must have between 1 and %d columns, not %d",
			 SEGMENT_MAX_COLUMNS, schema->ncolumns);
	if (schema->key_column < 0 || schema->key_column >= schema->ncolumns)
		elog(ERROR, "segment key column %d is out of range", schema->key_column);
	for (i = 0; i < schema->ncolumns; i++)
	{
		const SegmentColumn *column = &schema->columns[i];

		if (!segment_column_layout_is_valid(column->typlen, column->typbyval,
											column->typalign))
			elog(ERROR, "column \"%s\" has an invalid type layout", column->name);
	}
	if (!schema->columns[schema->key_column].has_order)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("key column \"%s\" has no ordering",
						schema->columns[schema->key_column].name),
				 errdetail("Type %s has no default btree operator class.",
						   schema->columns[schema->key_column].type_name)));
	if (rows_per_group <= 0)
		rows_per_group = SEGMENT_DEFAULT_ROWS_PER_GROUP;
	if (rows_per_group > SEGMENT_MAX_ROWS_PER_GROUP)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rows per row group must be at most %d",
						SEGMENT_MAX_ROWS_PER_GROUP)));

	context = AllocSetContextCreate(CurrentMemoryContext, "segment writer",
									ALLOCSET_DEFAULT_SIZES);
	oldcontext = MemoryContextSwitchTo(context);

	writer = palloc0(sizeof(SegmentWriter));
	writer->schema = schema;
	writer->path = pstrdup(local_path != NULL ? local_path : name);
	writer->memory = local_path != NULL ? NULL : output;
	writer->sorted = sorted;
	writer->rows_per_group = rows_per_group;
	writer->key_filter_bits = Max(key_filter_bits, 0);
	writer->page_size = Max(page_size, 0);
	writer->version = writer->page_size > 0 ? 3 : 1;	/* 1 may become 2 */
	writer->context = context;
	writer->group_context = AllocSetContextCreate(context, "segment row group",
												  ALLOCSET_DEFAULT_SIZES);
	writer->row_context = AllocSetContextCreate(context, "segment row",
												ALLOCSET_DEFAULT_SIZES);
	writer->totals = palloc0(sizeof(ColumnTotals) * schema->ncolumns);
	initStringInfo(&writer->directory);
	writer->dictionary_size = writer->page_size > 0 ?
		Min(Max(dictionary_size, 0), SEGMENT_MAX_DICTIONARY_SIZE) : 0;
	writer->dictionaries = palloc0(sizeof(char *) * schema->ncolumns);
	writer->dictionary_lengths = palloc0(sizeof(size_t) * schema->ncolumns);
	writer->compression_dictionaries = palloc0(sizeof(ZSTD_CDict *) * schema->ncolumns);
	MemoryContextSwitchTo(oldcontext);

	writer->fd = -1;
	if (local_path != NULL)
	{
		writer->fd = OpenTransientFile(local_path,
									   O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
		if (writer->fd < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create file \"%s\": %m", local_path)));
	}
	else
		resetStringInfo(output);

	header[0] = SEGMENT_MAGIC_0;
	header[1] = SEGMENT_MAGIC_1;
	header[2] = SEGMENT_MAGIC_2;
	header[3] = SEGMENT_MAGIC_3;
	writer->header_version = writer->version;
	segment_put_uint32((unsigned char *) header + 4, writer->version);	/* see finish */
	write_bytes(writer, header, SEGMENT_HEADER_SIZE);

	start_row_group(writer);
	return writer;
}

/* See segment.h. */
SegmentWriter *
segment_writer_begin(const SegmentSchema *schema, const char *local_path,
					 bool sorted, int rows_per_group, int key_filter_bits,
					 int page_size, int dictionary_size)
{
	return segment_writer_start(schema, local_path, NULL, NULL, sorted,
								rows_per_group, key_filter_bits, page_size,
								dictionary_size);
}

/* See segment.h. */
SegmentWriter *
segment_writer_begin_in_memory(const SegmentSchema *schema, StringInfo output,
							   const char *name, bool sorted,
							   int rows_per_group, int key_filter_bits,
							   int page_size, int dictionary_size)
{
	return segment_writer_start(schema, NULL, output, name, sorted,
								rows_per_group, key_filter_bits, page_size,
								dictionary_size);
}

/* See segment.h. */
void
segment_writer_compress_once(SegmentWriter *writer)
{
	writer->compress_once = true;
}

/*
 * Replace *slot (a copy in context, or nothing) by a copy of value.  Old
 * copies are freed so that a group arriving in descending order does not
 * accumulate one copy per row.
 */
static void
replace_datum(Datum *slot, bool had_value, Datum value,
			  const SegmentColumn *column, MemoryContext context)
{
	MemoryContext oldcontext = MemoryContextSwitchTo(context);

	if (had_value && !column->typbyval)
		pfree(DatumGetPointer(*slot));
	*slot = datumCopy(value, column->typbyval, column->typlen);
	MemoryContextSwitchTo(oldcontext);
}

/* Fold a value into a running min/max. */
static void
update_min_max(bool *has_min_max, Datum *min, Datum *max, Datum value,
			   const SegmentColumn *column, MemoryContext context)
{
	if (!*has_min_max)
	{
		replace_datum(min, false, value, column, context);
		replace_datum(max, false, value, column, context);
		*has_min_max = true;
		return;
	}
	if (segment_column_compare(column, value, *min) < 0)
		replace_datum(min, true, value, column, context);
	if (segment_column_compare(column, value, *max) > 0)
		replace_datum(max, true, value, column, context);
}

/*
 * Append to a page's values the null bitmap of its rows: bits first_row ..
 * first_row + rows - 1 of the row group's bitmap, as bits 0 .. rows - 1.
 */
static void
append_bitmap_slice(StringInfo values, const unsigned char *bitmap,
					int64 first_row, int64 rows)
{
	int64		size = (rows + 7) / 8;
	unsigned char *dest;

	enlargeStringInfo(values, size);
	dest = (unsigned char *) values->data + values->len;
	memset(dest, 0, size);
	for (int64 r = 0; r < rows; r++)
	{
		int64		source = first_row + r;

		if (bitmap[source / 8] & (1 << (source % 8)))
			dest[r / 8] |= (1 << (r % 8));
	}
	values->len += size;
	values->data[values->len] = '\0';
}

/*
 * The backend's zstd compression context, made at first use and kept: pages
 * are small, and making a context per frame (as ZSTD_compress does) costs
 * more than compressing one.  It is zstd's own memory and every call starts
 * a fresh frame, so an ERROR in between leaks nothing.
 */
static ZSTD_CCtx *
compression_context(void)
{
	static ZSTD_CCtx *context = NULL;

	if (context == NULL)
	{
		context = ZSTD_createCCtx();
		if (context == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Could not create a zstd compression context.")));
	}
	return context;
}

/*
 * Train the dictionary of column i on its pages of the first row group
 * (pages[0 .. count - 1], each a sample, at most
 * SEGMENT_DICTIONARY_SAMPLE_BYTES of them), when the column is worth one
 * (segment_internal.h).  A training that fails (too few or too uniform
 * samples) leaves the column without: its pages compress as before.
 */
static void
train_dictionary(SegmentWriter *writer, int i, StringInfo *pages, int count,
				 int64 raw_size)
{
	const SegmentColumn *column = &writer->schema->columns[i];
	StringInfoData samples;
	size_t	   *sample_sizes;
	int			nsamples = 0;
	char	   *dictionary;
	size_t		length;
	ZDICT_fastCover_params_t params;
	ZSTD_customMem memory;
	MemoryContext oldcontext;

	if (writer->dictionary_size <= 0 || column->typlen > 0 ||
		raw_size < (int64) writer->dictionary_size * SEGMENT_DICTIONARY_MIN_RAW_SHARE)
		return;

	initStringInfo(&samples);
	sample_sizes = palloc(sizeof(size_t) * count);
	for (int p = 0; p < count &&
		 samples.len + pages[p]->len <= SEGMENT_DICTIONARY_SAMPLE_BYTES; p++)
	{
		appendBinaryStringInfo(&samples, pages[p]->data, pages[p]->len);
		sample_sizes[nsamples++] = pages[p]->len;
	}

	/*
	 * fastCover with fixed parameters: a few milliseconds, where the
	 * parameter search of ZDICT_trainFromBuffer takes tens.
	 */
	memset(&params, 0, sizeof(params));
	params.k = 256;
	params.d = 8;
	params.f = 18;
	params.accel = 1;
	params.steps = 1;
	params.zParams.compressionLevel = SEGMENT_ZSTD_LEVEL;
	oldcontext = MemoryContextSwitchTo(writer->context);
	dictionary = palloc(writer->dictionary_size);
	MemoryContextSwitchTo(oldcontext);
	length = nsamples < 8 ? 0 :
		ZDICT_trainFromBuffer_fastCover(dictionary, writer->dictionary_size,
										samples.data, sample_sizes, nsamples,
										params);
	pfree(samples.data);
	pfree(sample_sizes);
	if (length == 0 || ZDICT_isError(length))
	{
		pfree(dictionary);
		return;
	}
	memory.customAlloc = segment_zstd_alloc;
	memory.customFree = segment_zstd_free;
	memory.opaque = writer->context;
	writer->compression_dictionaries[i] =
		ZSTD_createCDict_advanced(dictionary, length, ZSTD_dlm_byRef,
								  ZSTD_dct_auto,
								  ZSTD_getCParams(SEGMENT_ZSTD_LEVEL, 0, length),
								  memory);
	if (writer->compression_dictionaries[i] == NULL)
		elog(ERROR, "could not load the compression dictionary of column \"%s\"",
			 column->name);
	writer->dictionaries[i] = dictionary;
	writer->dictionary_lengths[i] = length;
	writer->dictionary_count++;
	writer->version = 4;
}

/* Compress raw into compressed (of size bound) at level; the frame's size. */
static size_t
compress_frame(SegmentWriter *writer, StringInfo raw, char *compressed,
			   size_t bound, int level)
{
	size_t		compressed_size;

	compressed_size = ZSTD_compressCCtx(compression_context(), compressed,
										bound, raw->data, raw->len, level);
	if (ZSTD_isError(compressed_size))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compress a chunk of segment \"%s\": %s",
						writer->path, ZSTD_getErrorName(compressed_size))));
	return compressed_size;
}

/*
 * Compress one page (values and bitmap) into a zstd frame and write it;
 * *page_crc receives the frame's CRC32C, and the frame is added to the
 * running CRC of its chunk.  Returns the frame's size.  The frame is level
 * 1's, or fast mode's where that costs little room (segment_internal.h):
 * reads of such pages, lookups above all, then spend far less time in zstd.
 * A small page is compressed in fast mode only (SEGMENT_SMALL_PAGE_SIZE); a
 * writer told so (segment_writer_compress_once) keeps level 1's frame of a
 * larger one without trying fast mode.
 */
static int64
write_page(SegmentWriter *writer, StringInfo raw, const ZSTD_CDict *dictionary,
		   uint32 *page_crc, pg_crc32c *chunk_crc)
{
	size_t		bound = ZSTD_compressBound(raw->len);
	char	   *compressed = palloc_extended(bound, MCXT_ALLOC_HUGE);
	size_t		compressed_size;
	size_t		fast_size;
	pg_crc32c	crc;

	if (dictionary != NULL)
	{
		compressed_size = ZSTD_compress_usingCDict(compression_context(),
												   compressed, bound,
												   raw->data, raw->len,
												   dictionary);
		if (ZSTD_isError(compressed_size))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not compress a chunk of segment \"%s\": %s",
							writer->path, ZSTD_getErrorName(compressed_size))));
	}
	else if (raw->len < SEGMENT_SMALL_PAGE_SIZE)
		compressed_size = compress_frame(writer, raw, compressed, bound,
										 SEGMENT_ZSTD_LEVEL_FAST);
	else if (writer->compress_once)
		compressed_size = compress_frame(writer, raw, compressed, bound,
										 SEGMENT_ZSTD_LEVEL);
	else if ((compressed_size = compress_frame(writer, raw, compressed, bound,
											   SEGMENT_ZSTD_LEVEL)) >
			 (size_t) raw->len -
			 (size_t) raw->len / SEGMENT_FAST_MODE_SAVING_SHARE)
		compressed_size = compress_frame(writer, raw, compressed, bound,
										 SEGMENT_ZSTD_LEVEL_FAST);
	else
	{
		char	   *fast = palloc_extended(bound, MCXT_ALLOC_HUGE);

		fast_size = compress_frame(writer, raw, fast, bound,
								   SEGMENT_ZSTD_LEVEL_FAST);
		if (fast_size <= compressed_size +
			compressed_size / SEGMENT_FAST_MODE_GROWTH_SHARE)
		{
			pfree(compressed);
			compressed = fast;
			compressed_size = fast_size;
		}
		else
			pfree(fast);
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, compressed, compressed_size);
	FIN_CRC32C(crc);
	*page_crc = crc;
	COMP_CRC32C(*chunk_crc, compressed, compressed_size);
	write_bytes(writer, compressed, compressed_size);
	pfree(compressed);
	return (int64) compressed_size;
}

/*
 * Compress, checksum and write the buffered row group, and append its
 * directory entry; fold its statistics into the segment's.  Then start the
 * next group.
 */
static void
flush_row_group(SegmentWriter *writer)
{
	const SegmentSchema *schema = writer->schema;
	StringInfo	directory = &writer->directory;
	MemoryContext oldcontext;
	int			i;

	if (writer->group_rows == 0)
		return;

	oldcontext = MemoryContextSwitchTo(writer->group_context);
	append_uint64(directory, (uint64) writer->group_rows);

	for (i = 0; i < schema->ncolumns; i++)
	{
		const SegmentColumn *column = &schema->columns[i];
		ColumnGroupState *state = &writer->columns[i];
		ColumnTotals *totals = &writer->totals[i];
		int64		compressed_size = 0;
		int64		raw_size = 0;
		pg_crc32c	crc;
		int64		offset = writer->file_offset;
		bool		has_stats;
		int			page_count = state->closed_count + 1;
		int64		first_row = 0;
		StringInfo *page_values;
		int64	   *page_rows;
		StringInfoData pages;

		CHECK_FOR_INTERRUPTS();

		/* the pages, each values then null bitmap */
		page_values = palloc(sizeof(StringInfo) * page_count);
		page_rows = palloc(sizeof(int64) * page_count);
		for (int p = 0; p < page_count; p++)
		{
			bool		current = (p == state->closed_count);

			page_values[p] = current ? &state->values : &state->closed_values[p];
			page_rows[p] = current ? writer->group_rows - first_row
				: state->closed_rows[p];
			append_bitmap_slice(page_values[p], state->bitmap, first_row,
								page_rows[p]);
			raw_size += page_values[p]->len;
			first_row += page_rows[p];
		}
		if (writer->row_group_count == 0)
			train_dictionary(writer, i, page_values, page_count, raw_size);

		/* compressed and written, the chunk CRC spanning them */
		initStringInfo(&pages);
		INIT_CRC32C(crc);
		for (int p = 0; p < page_count; p++)
		{
			uint32		page_crc;
			int64		page_compressed;

			page_compressed = write_page(writer, page_values[p],
										 writer->compression_dictionaries[i],
										 &page_crc, &crc);
			compressed_size += page_compressed;
			append_uint32(&pages, (uint32) page_rows[p]);
			append_uint32(&pages, (uint32) page_compressed);
			append_uint32(&pages, page_crc);
		}
		FIN_CRC32C(crc);

		has_stats = column->has_order && !state->stats_disabled &&
			state->has_min_max;

		append_uint64(directory, (uint64) offset);
		append_uint64(directory, (uint64) compressed_size);
		append_uint64(directory, (uint64) raw_size);
		append_uint32(directory, crc);
		append_uint64(directory, (uint64) state->null_count);
		append_uint8(directory, has_stats ? 1 : 0);
		if (has_stats)
		{
			append_image(directory, column, state->min);
			append_image(directory, column, state->max);
		}
		if (writer->version >= 3)
		{
			/* the page directory, when there is more than the one page */
			append_uint32(directory, (uint32) page_count);
			if (page_count > 1)
				appendBinaryStringInfo(directory, pages.data, pages.len);
		}
		pfree(pages.data);

		/* segment-wide statistics */
		totals->null_count += state->null_count;
		if (state->stats_disabled)
			totals->stats_disabled = true;
		if (has_stats && !totals->stats_disabled)
		{
			update_min_max(&totals->has_min_max, &totals->min, &totals->max,
						   state->min, column, writer->context);
			update_min_max(&totals->has_min_max, &totals->min, &totals->max,
						   state->max, column, writer->context);
		}
	}

	MemoryContextSwitchTo(oldcontext);

	writer->row_group_count++;
	MemoryContextReset(writer->group_context);
	start_row_group(writer);
}

/*
 * End a column's current page before `row`, its values kept until the row
 * group is written, and begin the next one (in the group context, with its
 * own offsets: values are aligned relative to their page).
 */
static void
close_page(SegmentWriter *writer, ColumnGroupState *state, int64 row)
{
	MemoryContext oldcontext = MemoryContextSwitchTo(writer->group_context);

	if (state->closed_count == state->closed_capacity)
	{
		int			capacity = Max(8, state->closed_capacity * 2);

		if (state->closed_values == NULL)
		{
			state->closed_values = palloc(sizeof(StringInfoData) * capacity);
			state->closed_rows = palloc(sizeof(int64) * capacity);
		}
		else
		{
			state->closed_values = repalloc(state->closed_values,
											sizeof(StringInfoData) * capacity);
			state->closed_rows = repalloc(state->closed_rows,
										  sizeof(int64) * capacity);
		}
		state->closed_capacity = capacity;
	}
	state->closed_values[state->closed_count] = state->values;
	state->closed_rows[state->closed_count] = row - state->page_first_row;
	state->closed_count++;
	initStringInfo(&state->values);
	state->page_first_row = row;
	MemoryContextSwitchTo(oldcontext);
}

/*
 * Append one row.  Varlena values may be toasted or compressed; they are
 * stored flat.  The key must not be null, and in a sorted segment keys must
 * not descend.
 */
void
segment_writer_add_row(SegmentWriter *writer, const Datum *values,
					   const bool *isnull)
{
	const SegmentSchema *schema = writer->schema;
	int			row = writer->group_rows;
	MemoryContext oldcontext;
	int			i;

	if (isnull[schema->key_column])
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("key column \"%s\" must not be null",
						schema->columns[schema->key_column].name)));

	oldcontext = MemoryContextSwitchTo(writer->row_context);

	for (i = 0; i < schema->ncolumns; i++)
	{
		const SegmentColumn *column = &schema->columns[i];
		ColumnGroupState *state = &writer->columns[i];
		bool		is_key = (i == schema->key_column);
		Datum		flat = (Datum) 0;
		Size		incoming = 0;
		int64		before;

		if (!isnull[i])
		{
			flat = segment_datum_flatten(column, values[i]);
			incoming = segment_datum_image_size(column, flat);
		}

		/*
		 * A page ends before the row that would take it past the page size
		 * (so a value larger than a page gets one of its own) or past
		 * SEGMENT_PAGE_MAX_ROWS rows.
		 */
		if (writer->page_size > 0 && row > state->page_first_row &&
			(state->values.len + incoming > (Size) writer->page_size ||
			 row - state->page_first_row >= SEGMENT_PAGE_MAX_ROWS))
			close_page(writer, state, row);
		if (isnull[i])
		{
			state->null_count++;
			continue;
		}
		state->bitmap[row / 8] |= (1 << (row % 8));

		before = state->values.len;
		segment_chunk_append_value(column, &state->values, flat);
		writer->group_raw_size += state->values.len - before;

		if (is_key && writer->key_filter_bits > 0)
		{
			if (writer->row_count >= writer->key_hash_capacity)
			{
				int64		capacity = Max(1024, writer->key_hash_capacity * 2);

				writer->key_hashes = writer->key_hashes == NULL
					? MemoryContextAllocHuge(writer->context, capacity * sizeof(uint64))
					: repalloc_huge(writer->key_hashes, capacity * sizeof(uint64));
				writer->key_hash_capacity = capacity;
			}
			writer->key_hashes[writer->row_count] = segment_key_hash(column, flat);
		}
		if (is_key && writer->sorted)
		{
			if (writer->has_previous_key &&
				segment_column_compare(column, flat, writer->previous_key) < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("rows of sorted segment \"%s\" arrived out of key order",
								writer->path)));
			replace_datum(&writer->previous_key, writer->has_previous_key,
						  flat, column, writer->context);
			writer->has_previous_key = true;
		}

		if (!column->has_order || state->stats_disabled)
			continue;
		if (!is_key &&
			segment_datum_image_size(column, flat) > SEGMENT_MAX_STATS_IMAGE_SIZE)
		{
			state->stats_disabled = true;
			continue;
		}
		update_min_max(&state->has_min_max, &state->min, &state->max, flat,
					   column, writer->group_context);
	}

	MemoryContextSwitchTo(oldcontext);
	MemoryContextReset(writer->row_context);

	writer->group_rows++;
	writer->row_count++;
	if (writer->group_rows >= writer->rows_per_group ||
		writer->group_raw_size >= SEGMENT_GROUP_RAW_SIZE_LIMIT)
		flush_row_group(writer);
}

/*
 * Append the key filter section of a version 2 footer: has_key_filter, then
 * the probe count, the bit count and the bits.  About key_filter_bits bits
 * per row, a multiple of 64, at least 64, at most
 * SEGMENT_KEY_FILTER_MAX_BITS.
 */
static void
append_key_filter(SegmentWriter *writer, StringInfo footer)
{
	uint64		nbits = (uint64) writer->row_count * writer->key_filter_bits;
	int			probes = segment_key_filter_probes(writer->key_filter_bits);
	uint8	   *bits;

	nbits = Min(Max(nbits, 64), SEGMENT_KEY_FILTER_MAX_BITS);
	nbits = (nbits + 63) / 64 * 64;
	bits = palloc_extended(nbits / 8, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	for (int64 i = 0; i < writer->row_count; i++)
		segment_key_filter_add(bits, nbits, probes, writer->key_hashes[i]);

	append_uint8(footer, 1);
	append_uint32(footer, (uint32) probes);
	append_uint64(footer, nbits);
	appendBinaryStringInfo(footer, (const char *) bits, (int) (nbits / 8));
	pfree(bits);
}

/*
 * Overwrite the header's format version: a segment without pages is begun as
 * version 1 and becomes version 2 only if its footer gets a key filter; one
 * with pages is begun as version 3 and becomes version 4 if a column got a
 * compression dictionary.
 */
static void
rewrite_header_version(SegmentWriter *writer, uint32 version)
{
	unsigned char bytes[4];

	segment_put_uint32(bytes, version);
	if (writer->memory != NULL)
		memcpy(writer->memory->data + SEGMENT_MAGIC_SIZE, bytes, 4);
	else if (pg_pwrite(writer->fd, bytes, 4, SEGMENT_MAGIC_SIZE) != 4)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", writer->path)));
}

/*
 * Write the last row group and the footer, close the file and fill
 * *summary with copies in the caller's memory context.  The writer is
 * freed.  The file is not fsync'd: the object store makes the final object
 * durable.
 */
void
segment_writer_finish(SegmentWriter *writer, const char *metadata,
					  SegmentWriteSummary *summary)
{
	const SegmentSchema *schema = writer->schema;
	MemoryContext caller_context = CurrentMemoryContext;
	const SegmentColumn *key = &schema->columns[schema->key_column];
	ColumnTotals *key_totals = &writer->totals[schema->key_column];
	StringInfoData footer;
	pg_crc32c	crc;
	uint32		flags;
	uint32		version;
	int			i;

	flush_row_group(writer);
	version = writer->version;
	if (version == 1 && writer->key_filter_bits > 0 && writer->row_count > 0)
		version = 2;

	MemoryContextSwitchTo(writer->context);
	initStringInfo(&footer);

	flags = SEGMENT_NATIVE_BYTE_ORDER_FLAG;
	if (writer->sorted)
		flags |= SEGMENT_FLAG_SORTED;

	append_uint32(&footer, version);
	append_uint32(&footer, flags);
	append_uint32(&footer, (uint32) schema->ncolumns);
	append_uint32(&footer, (uint32) schema->key_column);
	for (i = 0; i < schema->ncolumns; i++)
	{
		const SegmentColumn *column = &schema->columns[i];

		append_bytes(&footer, column->name, strlen(column->name));
		append_bytes(&footer, column->type_name, strlen(column->type_name));
		append_uint32(&footer, column->typid);
		append_uint32(&footer, (uint32) column->typmod);
		append_uint16(&footer, (uint16) column->typlen);
		append_uint8(&footer, column->typbyval ? 1 : 0);
		append_uint8(&footer, (uint8) column->typalign);
	}
	append_uint64(&footer, (uint64) writer->row_count);
	append_uint32(&footer, (uint32) writer->row_group_count);
	appendBinaryStringInfo(&footer, writer->directory.data,
						   writer->directory.len);

	/* the key column's statistics are never disabled: they are the range */
	append_uint8(&footer, key_totals->has_min_max ? 1 : 0);
	if (key_totals->has_min_max)
	{
		append_image(&footer, key, key_totals->min);
		append_image(&footer, key, key_totals->max);
	}

	append_uint8(&footer, metadata != NULL ? 1 : 0);
	if (metadata != NULL)
		append_bytes(&footer, metadata, strlen(metadata));
	if (version >= 2)
	{
		if (writer->key_filter_bits > 0 && writer->row_count > 0)
			append_key_filter(writer, &footer);
		else
			append_uint8(&footer, 0);	/* no key filter */
	}
	if (version >= 4)
	{
		append_uint32(&footer, (uint32) writer->dictionary_count);
		for (i = 0; i < schema->ncolumns; i++)
		{
			if (writer->dictionaries[i] == NULL)
				continue;
			append_uint32(&footer, (uint32) i);
			append_bytes(&footer, writer->dictionaries[i],
						 writer->dictionary_lengths[i]);
		}
	}

	if (footer.len + SEGMENT_FOOTER_CRC_SIZE > SEGMENT_MAX_FOOTER_LENGTH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("footer of segment \"%s\" would be too large", writer->path),
				 errdetail("The footer would be %lld bytes long; the limit is %lld.",
						   (long long) footer.len + SEGMENT_FOOTER_CRC_SIZE,
						   (long long) SEGMENT_MAX_FOOTER_LENGTH)));

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, footer.data, footer.len);
	FIN_CRC32C(crc);
	append_uint32(&footer, crc);

	/* trailer: footer length (body and CRC), magic */
	append_uint32(&footer, (uint32) footer.len);
	append_uint8(&footer, SEGMENT_MAGIC_0);
	append_uint8(&footer, SEGMENT_MAGIC_1);
	append_uint8(&footer, SEGMENT_MAGIC_2);
	append_uint8(&footer, SEGMENT_MAGIC_3);

	write_bytes(writer, footer.data, footer.len);
	if (version != writer->header_version)
		rewrite_header_version(writer, version);

	if (writer->fd >= 0 && CloseTransientFile(writer->fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", writer->path)));
	writer->fd = -1;

	/* the summary, in the caller's context */
	MemoryContextSwitchTo(caller_context);
	memset(summary, 0, sizeof(SegmentWriteSummary));
	summary->row_count = writer->row_count;
	summary->bytes = writer->file_offset;
	summary->row_group_count = writer->row_group_count;
	summary->has_key_range = key_totals->has_min_max;
	if (summary->has_key_range)
	{
		summary->key_min = datumCopy(key_totals->min, key->typbyval, key->typlen);
		summary->key_max = datumCopy(key_totals->max, key->typbyval, key->typlen);
	}
	summary->has_stats = palloc0(sizeof(bool) * schema->ncolumns);
	summary->column_min = palloc0(sizeof(Datum) * schema->ncolumns);
	summary->column_max = palloc0(sizeof(Datum) * schema->ncolumns);
	summary->null_count = palloc0(sizeof(int64) * schema->ncolumns);
	for (i = 0; i < schema->ncolumns; i++)
	{
		const SegmentColumn *column = &schema->columns[i];
		ColumnTotals *totals = &writer->totals[i];

		summary->null_count[i] = totals->null_count;
		if (totals->stats_disabled || !totals->has_min_max)
			continue;
		summary->has_stats[i] = true;
		summary->column_min[i] = datumCopy(totals->min, column->typbyval,
										   column->typlen);
		summary->column_max[i] = datumCopy(totals->max, column->typbyval,
										   column->typlen);
	}

	MemoryContextDelete(writer->context);
}

/*
 * Close and remove the file, and free the writer, on an error path that does
 * not raise an ERROR (after an ERROR the file descriptor is closed at abort,
 * and the memory goes with the caller's context).
 */
void
segment_writer_discard(SegmentWriter *writer)
{
	if (writer->fd >= 0)
		CloseTransientFile(writer->fd);
	if (writer->memory != NULL)
		resetStringInfo(writer->memory);
	else if (unlink(writer->path) != 0 && errno != ENOENT)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m", writer->path)));
	MemoryContextDelete(writer->context);
}
