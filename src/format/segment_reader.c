/*-------------------------------------------------------------------------
 *
 * segment_reader.c
 *		Read a segment through a SegmentSource: the footer first, with one
 *		ranged read of the tail, then the wanted column chunks of one row
 *		group at a time.
 *
 * Nothing read is trusted.  The trailer, the footer's checksum and every
 * field of the footer are validated before use: the schema, every chunk's
 * offset and size against the object's size, row and null counts, and the
 * statistics images.  Chunks are checked against their CRC32C and their
 * decompressed size before the datum codec decodes them, with its own
 * bounds checks.  Anything wrong raises
 *		ERROR:  segment "<name>" is corrupt
 * (ERRCODE_DATA_CORRUPTED) with a detail saying what.  docs/FORMAT.md
 * describes the bytes and the checks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_createDDict_advanced */
#include <zstd.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "rollout/image_check.h"
#include "segment_internal.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

/* A bounds-checked cursor over the footer body. */
typedef struct FooterCursor
{
	const unsigned char *data;
	int64		length;
	int64		position;
	const char *segment_name;
} FooterCursor;

/* The smallest possible encoding of a column, a row group's chunk, etc. */
#define MIN_COLUMN_ENCODING_SIZE	(4 + 4 + 4 + 4 + 2 + 1 + 1)
#define MIN_CHUNK_ENCODING_SIZE		(8 + 8 + 8 + 4 + 8 + 1)

/* A page directory entry (version 3): row count, frame size, frame CRC. */
#define PAGE_ENTRY_SIZE				(4 + 4 + 4)

/*
 * What one more zstd frame may add to ZSTD_compressBound of the whole: its
 * header and the margin ZSTD_compressBound gives inputs below 128 kB (at
 * most 64 bytes), rounded up generously.
 */
#define PAGE_FRAME_OVERHEAD			128

/* The smallest footer: fixed fields of an empty segment plus its CRC. */
#define MIN_FOOTER_LENGTH \
	(4 + 4 + 4 + 4 + MIN_COLUMN_ENCODING_SIZE + 8 + 4 + 1 + 1 + \
	 SEGMENT_FOOTER_CRC_SIZE)

/* Fail unless length more bytes are left; what names the field. */
static void
cursor_need(FooterCursor *cursor, int64 length, const char *what)
{
	if (length < 0 || length > cursor->length - cursor->position)
		segment_corrupt(cursor->segment_name,
						"The footer ends inside the %s.", what);
}

static uint8
cursor_uint8(FooterCursor *cursor, const char *what)
{
	cursor_need(cursor, 1, what);
	return cursor->data[cursor->position++];
}

/*
 * Read a little-endian uint16 footer field; the footer ending first makes the
 * segment corrupt.
 */
static uint16
cursor_uint16(FooterCursor *cursor, const char *what)
{
	uint16		value;

	cursor_need(cursor, 2, what);
	value = (uint16) cursor->data[cursor->position] |
		((uint16) cursor->data[cursor->position + 1] << 8);
	cursor->position += 2;
	return value;
}

/*
 * Read a little-endian uint32 footer field; the footer ending first makes the
 * segment corrupt.  Counts and the length prefixes of byte strings come
 * through here, and their callers check them against what is left.
 */
static uint32
cursor_uint32(FooterCursor *cursor, const char *what)
{
	uint32		value;

	cursor_need(cursor, 4, what);
	value = segment_get_uint32(cursor->data + cursor->position);
	cursor->position += 4;
	return value;
}

/* Read a signed 64-bit field that must lie in [min, max]. */
static int64
cursor_int64(FooterCursor *cursor, const char *what, int64 min, int64 max)
{
	int64		value;

	cursor_need(cursor, 8, what);
	value = (int64) segment_get_uint64(cursor->data + cursor->position);
	cursor->position += 8;
	if (value < min || value > max)
		segment_corrupt(cursor->segment_name,
						"The %s is %lld, outside the range %lld to %lld.",
						what, (long long) value, (long long) min,
						(long long) max);
	return value;
}

/* Read a boolean byte, which must be 0 or 1. */
static bool
cursor_bool(FooterCursor *cursor, const char *what)
{
	uint8		value = cursor_uint8(cursor, what);

	if (value > 1)
		segment_corrupt(cursor->segment_name,
						"The %s flag is %u, not 0 or 1.", what, value);
	return value == 1;
}

/*
 * Read a length-prefixed byte string; returns a pointer into the footer and
 * sets *length.
 */
static const char *
cursor_bytes(FooterCursor *cursor, const char *what, int64 *length)
{
	const char *data;

	*length = cursor_uint32(cursor, what);
	cursor_need(cursor, *length, what);
	data = (const char *) cursor->data + cursor->position;
	cursor->position += *length;
	return data;
}

/*
 * Read a length-prefixed text field (a name), as a palloc'd NUL-terminated
 * string.  Embedded NULs are rejected so the string means what it says.
 */
static char *
cursor_string(FooterCursor *cursor, const char *what, int64 max_length)
{
	int64		length;
	const char *data = cursor_bytes(cursor, what, &length);

	if (length > max_length)
		segment_corrupt(cursor->segment_name,
						"The %s is %lld bytes long, more than the limit of %lld.",
						what, (long long) length, (long long) max_length);
	if (memchr(data, '\0', length) != NULL)
		segment_corrupt(cursor->segment_name,
						"The %s contains a NUL byte.", what);
	return pnstrdup(data, length);
}

/* Read a length-prefixed datum image of a column, as a Datum. */
static Datum
cursor_image(FooterCursor *cursor, const SegmentColumn *column,
			 const ImageCheck *check, const char *what)
{
	int64		length;
	const char *image = cursor_bytes(cursor, what, &length);

	return segment_datum_from_image(column, check, image, length,
									cursor->segment_name, what);
}

/*
 * Give a column decoded from a footer its order, but only after checking
 * that its typid means the same type here: a built-in type (whose OID is
 * the same in every PostgreSQL 15 cluster) must exist with the stored
 * storage attributes, or the segment is corrupt.  A user-defined type's OID
 * is only meaningful in the cluster that wrote the segment; when it does
 * not name a type of the same storage attributes here, the column simply
 * gets no order, and callers that know the type compare through their own
 * schema.  Calling a comparison function of another type on these bytes
 * could crash the server, hence the check.
 */
static void
column_init_order_checked(SegmentColumn *column, const char *segment_name)
{
	HeapTuple	tuple;
	bool		matches = false;

	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(column->typid));
	if (HeapTupleIsValid(tuple))
	{
		Form_pg_type type = (Form_pg_type) GETSTRUCT(tuple);

		matches = type->typlen == column->typlen &&
			type->typbyval == column->typbyval &&
			type->typalign == column->typalign &&
			type->typisdefined;
		ReleaseSysCache(tuple);
	}

	if (!matches && column->typid < FirstNormalObjectId)
		segment_corrupt(segment_name,
						"Column \"%s\" claims built-in type %u, which does not exist or has another storage layout.",
						column->name, column->typid);

	column->has_order = false;
	column->compare_collation = InvalidOid;
	if (matches)
		segment_column_init_order(column);
}

/* Check the header's magic and version, given its first 8 bytes. */
static uint32
check_header(const char *bytes, const char *segment_name)
{
	uint32		version;

	if (bytes[0] != SEGMENT_MAGIC_0 || bytes[1] != SEGMENT_MAGIC_1 ||
		bytes[2] != SEGMENT_MAGIC_2 || bytes[3] != SEGMENT_MAGIC_3)
		segment_corrupt(segment_name,
						"The header does not start with the segment magic number.");
	version = segment_get_uint32((const unsigned char *) bytes + 4);
	if (version < SEGMENT_FORMAT_VERSION_MIN || version > SEGMENT_FORMAT_VERSION)
		segment_corrupt(segment_name,
						"The header says format version %u; this reader knows versions %d to %d.",
						version, SEGMENT_FORMAT_VERSION_MIN, SEGMENT_FORMAT_VERSION);
	return version;
}

/* The header's format version (0: not read) must be the footer's. */
static void
check_versions_agree(SegmentReader *reader, uint32 header_version)
{
	if (header_version != 0 && header_version != reader->format_version)
		segment_corrupt(reader->source->name,
						"The header says format version %u, the footer %u.",
						header_version, reader->format_version);
}

/*
 * Set reader->image_checks, in CurrentMemoryContext: the checks of the
 * columns of the schema the source expects, once the footer's schema is
 * found to have its layout.  A source without an expected schema (a file
 * this backend wrote itself) is read unchecked.
 */
static void
reader_take_image_checks(SegmentReader *reader, const char *segment_name)
{
	const SegmentSchema *expected = reader->source->expected_schema;
	const SegmentSchema *found = &reader->schema;

	reader->image_checks = palloc0(sizeof(ImageCheck *) * found->ncolumns);
	if (expected == NULL)
		return;

	if (found->ncolumns != expected->ncolumns ||
		found->key_column != expected->key_column)
		segment_corrupt(segment_name,
						"It has %d columns keyed by column %d; %d columns keyed by column %d were expected.",
						found->ncolumns, found->key_column + 1,
						expected->ncolumns, expected->key_column + 1);
	for (int i = 0; i < found->ncolumns; i++)
	{
		const SegmentColumn *e = &expected->columns[i];
		const SegmentColumn *f = &found->columns[i];

		if (e->typlen != f->typlen || e->typbyval != f->typbyval ||
			e->typalign != f->typalign)
			segment_corrupt(segment_name,
							"Its column %d (\"%s\") has another storage layout than the expected column \"%s\".",
							i + 1, f->name, e->name);
		reader->image_checks[i] = e->image_check;
	}
}

/* The footer's schema: column count, key column and each column's type. */
static void
decode_footer_schema(FooterCursor *c, SegmentReader *reader)
{
	const char *name = c->segment_name;
	SegmentSchema *schema = &reader->schema;
	uint32		ncolumns;
	uint32		key_column;

	ncolumns = cursor_uint32(c, "column count");
	if (ncolumns < 1 || ncolumns > SEGMENT_MAX_COLUMNS)
		segment_corrupt(name, "The footer says %u columns.", ncolumns);
	cursor_need(c, (int64) ncolumns * MIN_COLUMN_ENCODING_SIZE, "schema");
	key_column = cursor_uint32(c, "key column");
	if (key_column >= ncolumns)
		segment_corrupt(name, "The key column %u is not one of the %u columns.",
						key_column, ncolumns);
	schema->ncolumns = ncolumns;
	schema->key_column = key_column;
	schema->columns = palloc0(sizeof(SegmentColumn) * ncolumns);
	for (int i = 0; i < (int) ncolumns; i++)
	{
		SegmentColumn *column = &schema->columns[i];

		column->name = cursor_string(c, "column name", SEGMENT_MAX_NAME_LENGTH);
		column->type_name = cursor_string(c, "type name", SEGMENT_MAX_NAME_LENGTH);
		column->typid = cursor_uint32(c, "type OID");
		column->typmod = (int32) cursor_uint32(c, "type modifier");
		column->typlen = (int16) cursor_uint16(c, "type length");
		column->typbyval = cursor_bool(c, "by-value");
		column->typalign = (char) cursor_uint8(c, "type alignment");
		if (!segment_column_layout_is_valid(column->typlen, column->typbyval,
											column->typalign))
			segment_corrupt(name,
							"Column \"%s\" has an invalid storage layout (length %d, by-value %d, alignment %d).",
							column->name, (int) column->typlen,
							(int) column->typbyval, (int) column->typalign);
		column_init_order_checked(column, name);
	}
	reader_take_image_checks(reader, name);
}

/*
 * Chunk j of row group i.  Chunks tile the space between the header and
 * the footer (footer_start) in order: *expected_offset is where this one
 * must start, and becomes where the next one must.
 */
static void
decode_footer_chunk(FooterCursor *c, SegmentReader *reader,
					SegmentRowGroupInfo *group, int i, int j,
					int64 *expected_offset, int64 footer_start)
{
	const char *name = c->segment_name;
	SegmentChunkInfo *chunk = &group->chunks[j];
	SegmentColumn *column = &reader->schema.columns[j];

	chunk->offset = cursor_int64(c, "chunk offset", SEGMENT_HEADER_SIZE,
								 footer_start);
	if (chunk->offset != *expected_offset)
		segment_corrupt(name,
						"Chunk %d of row group %d starts at %lld, but the previous chunk ends at %lld.",
						j, i, (long long) chunk->offset,
						(long long) *expected_offset);
	chunk->compressed_size = cursor_int64(c, "chunk's compressed size",
										  1, footer_start - chunk->offset);
	*expected_offset = chunk->offset + chunk->compressed_size;
	chunk->raw_size = cursor_int64(c, "chunk's raw size",
								   (group->row_count + 7) / 8,
								   SEGMENT_MAX_CHUNK_RAW_SIZE);
	chunk->crc = cursor_uint32(c, "chunk checksum");
	chunk->null_count = cursor_int64(c, "chunk's null count", 0,
									 group->row_count);
	chunk->has_stats = cursor_bool(c, "statistics");
	if (chunk->has_stats)
	{
		if (chunk->null_count == group->row_count)
			segment_corrupt(name,
							"Chunk %d of row group %d has statistics but only nulls.",
							j, i);
		chunk->min = cursor_image(c, column, reader->image_checks[j],
								  "chunk minimum");
		chunk->max = cursor_image(c, column, reader->image_checks[j],
								  "chunk maximum");
	}
	if (j == reader->schema.key_column &&
		(chunk->null_count != 0 || !chunk->has_stats))
		segment_corrupt(name,
						"The key column has nulls or lacks its range in row group %d.",
						i);

	/* version 3: the page directory, decoded when first needed */
	chunk->page_count = 1;
	chunk->page_entries = NULL;
	chunk->pages = NULL;
	if (reader->format_version >= 3)
	{
		uint32		page_count = cursor_uint32(c, "chunk's page count");

		if (page_count < 1 || page_count > group->row_count ||
			page_count > chunk->compressed_size)
			segment_corrupt(name,
							"Chunk %d of row group %d says %u pages for %lld rows.",
							j, i, page_count, (long long) group->row_count);
		chunk->page_count = (int) page_count;
		if (page_count > 1)
		{
			cursor_need(c, (int64) page_count * PAGE_ENTRY_SIZE, "page directory");
			chunk->page_entries = c->data + c->position;
			c->position += (int64) page_count * PAGE_ENTRY_SIZE;
		}
	}

	/*
	 * No more than zstd makes of raw_size bytes: in one frame, or in one per
	 * page, each with its own header and small-input margin.
	 */
	if (chunk->compressed_size > (int64) ZSTD_compressBound(chunk->raw_size) +
		(int64) (chunk->page_count - 1) * PAGE_FRAME_OVERHEAD)
		segment_corrupt(name,
						"Chunk %d of row group %d is %lld bytes compressed, more than zstd makes of %lld bytes.",
						j, i, (long long) chunk->compressed_size,
						(long long) chunk->raw_size);
}

/*
 * The pages of a chunk of more than one page, decoding its page directory
 * the first time: row counts that add up to the row group's, frames that
 * tile the chunk exactly.
 */
static SegmentPageInfo *
chunk_pages(SegmentReader *reader, int row_group, int column)
{
	SegmentRowGroupInfo *group = &reader->row_groups[row_group];
	SegmentChunkInfo *chunk = &group->chunks[column];
	const unsigned char *entry = chunk->page_entries;
	SegmentPageInfo *pages;
	int64		first_row = 0;
	int64		offset = 0;

	if (chunk->pages != NULL)
		return chunk->pages;
	pages = MemoryContextAlloc(reader->footer_context,
							   sizeof(SegmentPageInfo) * chunk->page_count);
	for (int p = 0; p < chunk->page_count; p++, entry += PAGE_ENTRY_SIZE)
	{
		pages[p].first_row = first_row;
		pages[p].row_count = segment_get_uint32(entry);
		pages[p].offset = offset;
		pages[p].compressed_size = segment_get_uint32(entry + 4);
		pages[p].crc = segment_get_uint32(entry + 8);
		if (pages[p].row_count < 1 ||
			pages[p].row_count > group->row_count - first_row ||
			pages[p].compressed_size < 1 ||
			pages[p].compressed_size > chunk->compressed_size - offset)
		{
			/* footer_context may be a kept decoded footer's: leave nothing */
			pfree(pages);
			segment_corrupt(reader->source->name,
							"Page %d of chunk %d of row group %d does not fit the chunk.",
							p, column, row_group);
		}
		first_row += pages[p].row_count;
		offset += pages[p].compressed_size;
	}
	if (first_row != group->row_count || offset != chunk->compressed_size)
	{
		pfree(pages);
		segment_corrupt(reader->source->name,
						"The pages of chunk %d of row group %d hold %lld rows in %lld bytes, not %lld in %lld.",
						column, row_group, (long long) first_row,
						(long long) offset, (long long) group->row_count,
						(long long) chunk->compressed_size);
	}
	chunk->pages = pages;
	return pages;
}

/*
 * The row-group directory: each group's row count and chunks, which must
 * add up to the footer's row count and fill the space before footer_start.
 */
static void
decode_footer_row_groups(FooterCursor *c, SegmentReader *reader,
						 int64 footer_start)
{
	const char *name = c->segment_name;
	int			ncolumns = reader->schema.ncolumns;
	uint32		row_group_count;
	int64		rows_seen = 0;
	int64		expected_offset = SEGMENT_HEADER_SIZE;

	reader->row_count = cursor_int64(c, "row count", 0, PG_INT64_MAX);
	row_group_count = cursor_uint32(c, "row group count");
	if (row_group_count > (uint32) PG_INT32_MAX)
		segment_corrupt(name, "The footer says %u row groups.", row_group_count);
	cursor_need(c, (int64) row_group_count *
				(8 + (int64) ncolumns * MIN_CHUNK_ENCODING_SIZE),
				"row group directory");
	reader->row_group_count = (int) row_group_count;
	reader->row_groups = palloc0(sizeof(SegmentRowGroupInfo) *
								 Max(row_group_count, 1));

	for (int i = 0; i < (int) row_group_count; i++)
	{
		SegmentRowGroupInfo *group = &reader->row_groups[i];

		CHECK_FOR_INTERRUPTS();
		group->row_count = cursor_int64(c, "row group's row count", 1,
										SEGMENT_MAX_ROWS_PER_GROUP);
		rows_seen += group->row_count;
		group->chunks = palloc0(sizeof(SegmentChunkInfo) * ncolumns);
		for (int j = 0; j < ncolumns; j++)
			decode_footer_chunk(c, reader, group, i, j, &expected_offset,
								footer_start);
	}
	if (expected_offset != footer_start)
		segment_corrupt(name,
						"The chunks end at %lld, but the footer starts at %lld.",
						(long long) expected_offset, (long long) footer_start);
	if (rows_seen != reader->row_count)
		segment_corrupt(name,
						"The row groups hold %lld rows, but the footer says %lld.",
						(long long) rows_seen, (long long) reader->row_count);
}

/*
 * The key filter section (format version 2): probe count, bit count and the
 * bits, which must be there in full.
 */
static void
decode_key_filter(FooterCursor *c, SegmentReader *reader)
{
	int64		probes = cursor_uint32(c, "key filter probe count");
	int64		nbits = cursor_int64(c, "key filter bit count", 64,
									 (int64) SEGMENT_KEY_FILTER_MAX_BITS);

	if (probes < 1 || probes > SEGMENT_KEY_FILTER_MAX_PROBES)
		segment_corrupt(c->segment_name,
						"The key filter has %lld probes; 1 to %d are allowed.",
						(long long) probes, SEGMENT_KEY_FILTER_MAX_PROBES);
	if (nbits % 64 != 0)
		segment_corrupt(c->segment_name,
						"The key filter has %lld bits, not a multiple of 64.",
						(long long) nbits);
	if (reader->row_count == 0)
		segment_corrupt(c->segment_name, "The footer has a key filter for no rows.");
	cursor_need(c, nbits / 8, "key filter");
	/* the footer's bytes stay with the reader: no copy of a large filter */
	reader->key_filter = c->data + c->position;
	c->position += nbits / 8;
	reader->key_filter_bits = (uint64) nbits;
	reader->key_filter_probes = (int) probes;
}

/*
 * The compression dictionaries (format version 4): a count, then per
 * dictionary the column it belongs to and its bytes.  They are digested for
 * decompression when a page of their column is first decompressed
 * (dictionary_of), once per decoded footer, so that every reader sharing it
 * shares them; a lookup that skips the segment by its key filter never pays
 * for it.
 */
static void
decode_dictionaries(FooterCursor *c, SegmentReader *reader)
{
	int64		count = cursor_uint32(c, "dictionary count");

	if (count > reader->schema.ncolumns)
		segment_corrupt(c->segment_name,
						"The footer has %lld compression dictionaries for %d columns.",
						(long long) count, reader->schema.ncolumns);
	if (count == 0)
		return;
	reader->dictionaries = palloc0(sizeof(SegmentDictionary) * reader->schema.ncolumns);
	for (int64 d = 0; d < count; d++)
	{
		int64		column = cursor_uint32(c, "dictionary column");
		int64		length;
		const char *bytes;

		if (column >= reader->schema.ncolumns ||
			reader->dictionaries[column].length > 0)
			segment_corrupt(c->segment_name,
							"Compression dictionary %lld names column %lld, which is out of range or has one already.",
							(long long) d, (long long) column);
		bytes = cursor_bytes(c, "dictionary", &length);
		if (length < 1 || length > SEGMENT_MAX_DICTIONARY_SIZE)
			segment_corrupt(c->segment_name,
							"Compression dictionary %lld is %lld bytes long; 1 to %d are allowed.",
							(long long) d, (long long) length,
							SEGMENT_MAX_DICTIONARY_SIZE);
		reader->dictionaries[column].bytes = bytes;
		reader->dictionaries[column].length = length;
	}
}

/*
 * The digested dictionary of column, made at its first use, or NULL when
 * the column has none.  It refers to the dictionary's bytes in the footer
 * and lives in the decoded footer's context, which holds both (and is
 * counted by the footer cache when it keeps the footer decoded).
 */
static const ZSTD_DDict *
dictionary_of(SegmentReader *reader, int column)
{
	SegmentDictionary *dictionary;
	ZSTD_customMem memory;

	if (reader->dictionaries == NULL ||
		reader->dictionaries[column].length == 0)
		return NULL;
	dictionary = &reader->dictionaries[column];
	if (dictionary->digested == NULL)
	{
		memory.customAlloc = segment_zstd_alloc;
		memory.customFree = segment_zstd_free;
		memory.opaque = reader->footer_context;
		dictionary->digested =
			ZSTD_createDDict_advanced(dictionary->bytes, dictionary->length,
									  ZSTD_dlm_byRef, ZSTD_dct_auto, memory);
		if (dictionary->digested == NULL)
			segment_corrupt(reader->source->name,
							"The compression dictionary of column \"%s\" cannot be loaded.",
							reader->schema.columns[column].name);
	}
	return dictionary->digested;
}

/*
 * Decode the footer body into reader (in the reader's context), checking
 * every field against what the rest of the footer and the segment's size
 * allow: a corrupt footer is an ERROR naming the segment, never a crash.
 */
static void
decode_footer(SegmentReader *reader, const char *body, int64 body_length,
			  int64 footer_start)
{
	const char *name = reader->source->name;
	FooterCursor cursor;
	FooterCursor *c = &cursor;
	SegmentSchema *schema = &reader->schema;
	uint32		flags;

	cursor.data = (const unsigned char *) body;
	cursor.length = body_length;
	cursor.position = 0;
	cursor.segment_name = name;

	reader->format_version = cursor_uint32(c, "format version");
	if (reader->format_version < SEGMENT_FORMAT_VERSION_MIN ||
		reader->format_version > SEGMENT_FORMAT_VERSION)
		segment_corrupt(name,
						"The footer says format version %u; this reader knows versions %d to %d.",
						reader->format_version, SEGMENT_FORMAT_VERSION_MIN,
						SEGMENT_FORMAT_VERSION);

	flags = cursor_uint32(c, "flags");
	if ((flags & ~SEGMENT_KNOWN_FLAGS) != 0)
		segment_corrupt(name, "The footer has unknown flags 0x%08x.",
						flags & ~SEGMENT_KNOWN_FLAGS);
	if ((flags & SEGMENT_FLAG_BIG_ENDIAN) != SEGMENT_NATIVE_BYTE_ORDER_FLAG)
		segment_corrupt(name,
						"Its datum images are in another byte order than this server's.");
	reader->sorted = (flags & SEGMENT_FLAG_SORTED) != 0;

	decode_footer_schema(c, reader);
	decode_footer_row_groups(c, reader, footer_start);

	/* key range */
	reader->has_key_range = cursor_bool(c, "key range");
	if (reader->has_key_range != (reader->row_count > 0))
		segment_corrupt(name,
						"The footer %s a key range for %lld rows.",
						reader->has_key_range ? "has" : "lacks",
						(long long) reader->row_count);
	if (reader->has_key_range)
	{
		reader->key_min = cursor_image(c, &schema->columns[schema->key_column],
									   reader->image_checks[schema->key_column],
									   "key minimum");
		reader->key_max = cursor_image(c, &schema->columns[schema->key_column],
									   reader->image_checks[schema->key_column],
									   "key maximum");
	}

	/* the caller's metadata */
	reader->metadata = NULL;
	if (cursor_bool(c, "metadata"))
	{
		int64		length;
		const char *data = cursor_bytes(c, "metadata", &length);

		if (memchr(data, '\0', length) != NULL)
			segment_corrupt(name, "The metadata contains a NUL byte.");
		reader->metadata = pnstrdup(data, length);
	}

	/* version 2: the key filter */
	reader->key_filter = NULL;
	if (reader->format_version >= 2 && cursor_bool(c, "key filter"))
		decode_key_filter(c, reader);

	/* version 4: compression dictionaries */
	reader->dictionaries = NULL;
	if (reader->format_version >= 4)
		decode_dictionaries(c, reader);

	if (cursor.position != cursor.length)
		segment_corrupt(name,
						"The footer has %lld bytes after its last field.",
						(long long) (cursor.length - cursor.position));
}

/*
 * Check that a footer of footer_length bytes fits an object of object_size
 * bytes, and return where it starts.
 */
static int64
footer_start_in_object(const char *name, int64 footer_length, int64 object_size)
{
	if (object_size < SEGMENT_HEADER_SIZE + MIN_FOOTER_LENGTH + SEGMENT_TRAILER_SIZE)
		segment_corrupt(name,
						"The object is %lld bytes long, too short for a segment.",
						(long long) object_size);
	if (footer_length < MIN_FOOTER_LENGTH ||
		footer_length > SEGMENT_MAX_FOOTER_LENGTH ||
		footer_length > object_size - SEGMENT_HEADER_SIZE - SEGMENT_TRAILER_SIZE)
		segment_corrupt(name,
						"The footer length %lld does not fit an object of %lld bytes.",
						(long long) footer_length, (long long) object_size);
	return object_size - SEGMENT_TRAILER_SIZE - footer_length;
}

/*
 * Check a footer's checksum and decode it into reader.  The footer's bytes
 * must stay as long as the reader (in its context): the key filter and the
 * page directories, decoded when first needed, point into them.
 */
static void
check_and_decode_footer(SegmentReader *reader, const char *footer,
						int64 footer_length, int64 footer_start,
						bool check_crc)
{
	int64		body_length = footer_length - SEGMENT_FOOTER_CRC_SIZE;
	pg_crc32c	crc;

	if (check_crc)
	{
		INIT_CRC32C(crc);
		COMP_CRC32C(crc, footer, body_length);
		FIN_CRC32C(crc);
		if (crc != segment_get_uint32((const unsigned char *) footer + body_length))
			segment_corrupt(reader->source->name, "The footer checksum does not match.");
	}
	decode_footer(reader, footer, body_length, footer_start);
}

/*
 * Open a segment whose footer the source knows already (known_footer): a
 * footer this or an earlier reader read and checked, lent, decoded like one
 * read from the object, or its decoded form lent and copied.  Returns false
 * when the source does not know it.
 */
static bool
segment_reader_open_known(SegmentReader *reader)
{
	SegmentSource *source = reader->source;
	const char *footer;
	int64		footer_length;
	int64		object_size = -1;
	int64		footer_start;
	const SegmentReader *decoded = NULL;
	SegmentReader *kept;
	MemoryContext footer_context;
	MemoryContext oldcontext;

	if (source->known_footer == NULL ||
		!source->known_footer(source->arg, &footer, &footer_length, &object_size,
							  &decoded))
		return false;
	if (decoded != NULL)
	{
		/* lent like the footer, for as long as the reader's context lives */
		MemoryContext context = reader->context;

		*reader = *decoded;
		reader->source = source;
		reader->context = context;
		oldcontext = MemoryContextSwitchTo(context);
		reader_take_image_checks(reader, source->name);
		MemoryContextSwitchTo(oldcontext);
		return true;
	}
	footer_start = footer_start_in_object(source->name, footer_length, object_size);
	reader->object_size = object_size;
	if (source->footer_decoded == NULL)
	{
		/* lent for as long as the reader's context lives; checked when read */
		check_and_decode_footer(reader, footer, footer_length, footer_start, false);
		return true;
	}

	/*
	 * Decode into a context of its own, a child of the reader's until it is
	 * handed over (an ERROR on a corrupt footer frees it with the reader).
	 */
	footer_context = AllocSetContextCreate(reader->context, "decoded segment footer",
										   ALLOCSET_SMALL_SIZES);
	oldcontext = MemoryContextSwitchTo(footer_context);
	reader->footer_context = footer_context;
	check_and_decode_footer(reader, footer, footer_length, footer_start, false);
	kept = palloc(sizeof(SegmentReader));
	*kept = *reader;
	kept->source = NULL;
	kept->context = NULL;
	MemoryContextSwitchTo(oldcontext);
	source->footer_decoded(source->arg, kept, footer_context);
	return true;
}

/*
 * Read bytes [offset, offset + length) of the segment into a new buffer in
 * CurrentMemoryContext; a missing object or a short read is an ERROR.
 */
static char *
read_bytes(SegmentReader *reader, int64 offset, int64 length)
{
	const char *name = reader->source->name;
	StringInfoData buffer;

	CHECK_FOR_INTERRUPTS();
	initStringInfo(&buffer);
	if (!reader->source->read_range(reader->source->arg, offset, length, &buffer))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("segment \"%s\" vanished while being read", name)));
	if (buffer.len != length)
		segment_corrupt(name,
						"Reading %lld bytes at offset %lld returned %d bytes.",
						(long long) length, (long long) offset, buffer.len);
	return buffer.data;
}

/*
 * Read and validate the footer: one read of the tail (SEGMENT_TAIL_READ_SIZE
 * bytes), and one more ranged read if the footer is larger, unless the source
 * knows the footer already.  Returns NULL if the object does not exist.  The
 * reader lives in a new child of CurrentMemoryContext.
 */
SegmentReader *
segment_reader_open(SegmentSource *source)
{
	const char *name = source->name;
	MemoryContext context;
	MemoryContext oldcontext;
	SegmentReader *reader;
	StringInfoData tail;
	int64		object_size = -1;
	int64		expected_tail;
	const char *trailer;
	int64		footer_length;
	int64		footer_start;
	const char *footer;
	bool		footer_in_tail;
	uint32		header_version = 0;

	context = AllocSetContextCreate(CurrentMemoryContext, "segment reader",
									ALLOCSET_SMALL_SIZES);
	oldcontext = MemoryContextSwitchTo(context);

	reader = palloc0(sizeof(SegmentReader));
	reader->source = source;
	reader->context = context;
	reader->footer_context = context;

	if (segment_reader_open_known(reader))
	{
		MemoryContextSwitchTo(oldcontext);
		return reader;
	}

	initStringInfo(&tail);
	if (!source->read_tail(source->arg, SEGMENT_TAIL_READ_SIZE, &tail,
						   &object_size))
	{
		MemoryContextSwitchTo(oldcontext);
		MemoryContextDelete(context);
		return NULL;
	}
	reader->object_size = object_size;

	if (object_size < SEGMENT_HEADER_SIZE + MIN_FOOTER_LENGTH + SEGMENT_TRAILER_SIZE)
		segment_corrupt(name,
						"The object is %lld bytes long, too short for a segment.",
						(long long) object_size);
	expected_tail = Min(object_size, (int64) SEGMENT_TAIL_READ_SIZE);
	if (tail.len != expected_tail)
		segment_corrupt(name,
						"Reading the last %lld bytes returned %d bytes.",
						(long long) expected_tail, tail.len);

	/* trailer: footer length, magic */
	trailer = tail.data + tail.len - SEGMENT_TRAILER_SIZE;
	if (trailer[4] != SEGMENT_MAGIC_0 || trailer[5] != SEGMENT_MAGIC_1 ||
		trailer[6] != SEGMENT_MAGIC_2 || trailer[7] != SEGMENT_MAGIC_3)
		segment_corrupt(name,
						"The object does not end with the segment magic number.");
	footer_length = segment_get_uint32((const unsigned char *) trailer);
	footer_start = footer_start_in_object(name, footer_length, object_size);

	/* the header, when the tail covers it */
	if (tail.len == object_size)
		header_version = check_header(tail.data, name);

	/* the footer, from the tail or with one more read */
	footer_in_tail = (footer_length + SEGMENT_TRAILER_SIZE <= tail.len);
	if (footer_in_tail)
	{
		/*
		 * The reader points into its footer's bytes for as long as it lives:
		 * keep just those, not the whole tail (a scan holds many readers).
		 */
		char	   *copy = palloc_extended(footer_length, MCXT_ALLOC_HUGE);

		memcpy(copy, trailer - footer_length, footer_length);
		footer = copy;
		pfree(tail.data);
	}
	else
		footer = read_bytes(reader, footer_start, footer_length);

	check_and_decode_footer(reader, footer, footer_length, footer_start, true);
	check_versions_agree(reader, header_version);
	if (source->footer_read != NULL)
		source->footer_read(source->arg, footer, footer_length, object_size);

	/* the footer's bytes stay: the reader points into them */
	if (!footer_in_tail)
		pfree(tail.data);

	MemoryContextSwitchTo(oldcontext);
	return reader;
}

/*
 * The backend's zstd decompression context, made at first use and kept: a
 * lookup decompresses a few small pages, and making a context per frame (as
 * ZSTD_decompress does) would cost more than decompressing them.  It is
 * zstd's own memory, reset by every call, so an ERROR in between leaks
 * nothing.
 */
static ZSTD_DCtx *
decompression_context(void)
{
	static ZSTD_DCtx *context = NULL;

	if (context == NULL)
	{
		context = ZSTD_createDCtx();
		if (context == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Could not create a zstd decompression context.")));
	}
	return context;
}

/*
 * Check and decompress one zstd frame of a chunk (all of it, or one page):
 * its CRC32C must be crc and its content size exactly raw_size, or, when
 * raw_size is negative, at most -raw_size - 1 bytes (PAGE_RAW_AT_MOST: what is
 * left of the chunk's raw size once its other decoded pages are counted, so
 * that the pages of a corrupt chunk cannot each claim all of it before
 * their sum is checked).  Returns the raw bytes in
 * CurrentMemoryContext and their length in *length.  what names the frame
 * in errors ("chunk 3 of row group 2", "page 5 of chunk 3 of row group 2").
 */
static char *
decompress_frame(SegmentReader *reader, int column, const SegmentChunkInfo *chunk,
				 const char *frame, int64 frame_size, uint32 crc_expected,
				 int64 raw_size, const char *what, int64 *length)
{
	const ZSTD_DDict *dictionary = dictionary_of(reader, column);
	const char *name = reader->source->name;
	pg_crc32c	crc;
	unsigned long long content_size;
	char	   *raw;
	size_t		decompressed;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, frame, frame_size);
	FIN_CRC32C(crc);
	if (crc != crc_expected)
		segment_corrupt(name, "The checksum of %s does not match.", what);

	content_size = ZSTD_getFrameContentSize(frame, frame_size);
	if (content_size == ZSTD_CONTENTSIZE_ERROR ||
		content_size == ZSTD_CONTENTSIZE_UNKNOWN ||
		(raw_size >= 0 && content_size != (unsigned long long) raw_size) ||
		(raw_size < 0 && content_size > (unsigned long long) (-raw_size - 1)))
		segment_corrupt(name, "%s is not a zstd frame of %lld bytes%s.",
						what, (long long) (raw_size >= 0 ? raw_size : -raw_size - 1),
						raw_size >= 0 ? "" : " at most");

	raw = palloc(Max(content_size, 1));
	decompressed = dictionary != NULL ?
		ZSTD_decompress_usingDDict(decompression_context(), raw, content_size,
								   frame, frame_size, dictionary) :
		ZSTD_decompressDCtx(decompression_context(), raw, content_size, frame,
							frame_size);
	if (ZSTD_isError(decompressed))
		segment_corrupt(name, "%s could not be decompressed: %s.",
						what, ZSTD_getErrorName(decompressed));
	if ((unsigned long long) decompressed != content_size)
		segment_corrupt(name, "%s decompressed to %lld bytes instead of %lld.",
						what, (long long) decompressed, (long long) content_size);
	*length = (int64) content_size;
	return raw;
}

/* Allocate a column's decoded arrays in out, for the whole row group. */
static void
allocate_column(SegmentRowGroupInfo *group, int column, SegmentRowGroup *out)
{
	if (out->values[column] != NULL)
		return;
	out->values[column] = palloc(sizeof(Datum) * group->row_count);
	out->isnull[column] = palloc(sizeof(bool) * group->row_count);
}

/* decompress_frame's raw_size for a page of at most `bytes` raw bytes */
#define PAGE_RAW_AT_MOST(bytes)	(-(bytes) - 1)

/*
 * Decode page p of a chunk of several pages, whose compressed bytes are at
 * frame, into its rows of out's arrays (CurrentMemoryContext).  The page
 * decompresses to at most raw_left bytes; returns how many.
 */
static int64
read_page(SegmentReader *reader, int row_group, int column, int p,
		  const char *frame, int64 raw_left, SegmentRowGroup *out)
{
	SegmentRowGroupInfo *group = &reader->row_groups[row_group];
	SegmentChunkInfo *chunk = &group->chunks[column];
	SegmentPageInfo *page = &chunk_pages(reader, row_group, column)[p];
	char	   *what = psprintf("page %d of chunk %d of row group %d",
								p, column, row_group);
	int64		raw_size;
	char	   *raw;

	raw = decompress_frame(reader, column, chunk, frame, page->compressed_size,
						   page->crc, PAGE_RAW_AT_MOST(raw_left), what,
						   &raw_size);
	allocate_column(group, column, out);
	segment_chunk_decode(&reader->schema.columns[column],
						 reader->image_checks[column], raw, raw_size,
						 page->row_count, -1,
						 out->values[column] + page->first_row,
						 out->isnull[column] + page->first_row,
						 reader->source->name);
	pfree(what);
	return raw_size;
}

/*
 * Once every page of a chunk is decoded: their raw sizes and nulls must add
 * up to what the footer says of the chunk.
 */
static void
check_pages_total(SegmentReader *reader, int row_group, int column,
				  int64 raw_total, const SegmentRowGroup *out)
{
	const char *name = reader->source->name;
	SegmentRowGroupInfo *group = &reader->row_groups[row_group];
	SegmentChunkInfo *chunk = &group->chunks[column];
	int64		nulls = 0;

	if (raw_total != chunk->raw_size)
		segment_corrupt(name,
						"The pages of chunk %d of row group %d decompress to %lld bytes, but the footer says %lld.",
						column, row_group, (long long) raw_total,
						(long long) chunk->raw_size);
	for (int64 r = 0; r < group->row_count; r++)
		nulls += out->isnull[column][r] ? 1 : 0;
	if (nulls != chunk->null_count)
		segment_corrupt(name,
						"Chunk %d of row group %d has %lld nulls, but the footer says %lld.",
						column, row_group, (long long) nulls,
						(long long) chunk->null_count);
}

/*
 * Check, decompress and decode one whole chunk whose compressed bytes are at
 * compressed: its one frame, or each of its pages, whose raw sizes and nulls
 * must then add up to the chunk's.  The result goes into
 * out->values[column]/out->isnull[column] in CurrentMemoryContext.
 */
static void
read_chunk(SegmentReader *reader, int row_group, int column_index,
		   const char *compressed, SegmentRowGroup *out)
{
	const char *name = reader->source->name;
	SegmentRowGroupInfo *group = &reader->row_groups[row_group];
	SegmentChunkInfo *chunk = &group->chunks[column_index];
	char	   *what;
	int64		raw_size;
	char	   *raw;

	if (chunk->page_count > 1)
	{
		SegmentPageInfo *pages = chunk_pages(reader, row_group, column_index);
		int64		raw_total = 0;

		for (int p = 0; p < chunk->page_count; p++)
			raw_total += read_page(reader, row_group, column_index, p,
								   compressed + pages[p].offset,
								   chunk->raw_size - raw_total, out);
		check_pages_total(reader, row_group, column_index, raw_total, out);
		return;
	}

	what = psprintf("chunk %d of row group %d", column_index, row_group);
	raw = decompress_frame(reader, column_index, chunk, compressed,
						   chunk->compressed_size, chunk->crc, chunk->raw_size,
						   what, &raw_size);
	pfree(what);
	allocate_column(group, column_index, out);
	segment_chunk_decode(&reader->schema.columns[column_index],
						 reader->image_checks[column_index], raw,
						 chunk->raw_size, group->row_count, chunk->null_count,
						 out->values[column_index], out->isnull[column_index],
						 name);
}

/*
 * The byte ranges segment_reader_read_row_group() reads for one row group:
 * one per run of wanted chunks separated by at most SEGMENT_MAX_READ_GAP
 * bytes of unwanted ones (up to SEGMENT_MAX_COALESCED_READ bytes), in order.  A run that starts at the first chunk of the segment is
 * extended backwards over the header, which is then checked on the way.
 * Returns the number of ranges; *ranges is palloc'd (NULL when none).
 */
int
segment_reader_row_group_ranges(SegmentReader *reader, int row_group,
								const bool *want_arg, const bool *defer,
								SegmentRange **ranges)
{
	int			ncolumns = reader->schema.ncolumns;
	SegmentRowGroupInfo *group;
	int			count = 0;
	int			first = 0;
	bool	   *want = (bool *) want_arg;

	/* from a source of cheap reads, deferred columns are read when decoded */
	if (defer != NULL && reader->source->cheap_reads)
	{
		want = palloc(sizeof(bool) * ncolumns);
		for (int i = 0; i < ncolumns; i++)
			want[i] = want_arg[i] && !defer[i];
	}

	if (row_group < 0 || row_group >= reader->row_group_count)
		elog(ERROR, "row group %d of segment \"%s\" does not exist",
			 row_group, reader->source->name);
	group = &reader->row_groups[row_group];
	*ranges = NULL;

	while (first < ncolumns)
	{
		int			last;
		int64		start;
		int64		end;

		if (!want[first])
		{
			first++;
			continue;
		}

		/*
		 * A run of wanted chunks: one read.  Unwanted chunks between them are
		 * read too (and not decoded) when they are small: on a remote store
		 * another request costs far more than a few more bytes.
		 */
		last = first;
		for (int next = first + 1; next < ncolumns; next++)
		{
			int64		gap;

			if (!want[next])
				continue;
			gap = group->chunks[next].offset -
				(group->chunks[last].offset + group->chunks[last].compressed_size);
			if (gap > SEGMENT_MAX_READ_GAP ||
				group->chunks[next].offset + group->chunks[next].compressed_size -
				group->chunks[first].offset > SEGMENT_MAX_COALESCED_READ)
				break;
			last = next;
		}
		start = group->chunks[first].offset;
		end = group->chunks[last].offset + group->chunks[last].compressed_size;
		if (start == SEGMENT_HEADER_SIZE)
			start = 0;

		if (*ranges == NULL)
			*ranges = palloc(sizeof(SegmentRange) * ncolumns);
		(*ranges)[count].offset = start;
		(*ranges)[count].length = end - start;
		(*ranges)[count].first_column = first;
		(*ranges)[count].last_column = last;
		count++;
		first = last + 1;
	}
	if (want != want_arg)
		pfree(want);
	return count;
}

/*
 * Pages of a deferred chunk read in one go (SegmentRowGroup.read_ahead).
 * A late-materializing scan whose filter passes many rows decodes nearly
 * every page of a wide column, each a read of its own (a system call, or
 * a cache lookup) for a few kB.  Once a row needs the page right after one
 * already decoded, the pages are evidently wanted one after another, and
 * the following ones, up to SEGMENT_READ_AHEAD_BYTES, come with it.  A
 * lookup or a sparse filter never reads two neighbours and reads only the
 * page it needs.
 */
#define SEGMENT_READ_AHEAD_BYTES	(256 * 1024)

typedef struct SegmentReadAhead
{
	char	   *buffer;			/* what read_deferred_bytes allocated */
	const char *first_frame;	/* page first_page's compressed bytes */
	int			first_page;
	int			end_page;		/* pages first_page .. end_page - 1 */
} SegmentReadAhead;

/*
 * A deferred chunk not read with its row group (from a source with cheap
 * reads): its pages are read when decoded.
 */
static const char chunk_not_read[1];

/*
 * Read bytes of a deferred chunk when it is decoded, into a new buffer
 * (*buffer, to free) in CurrentMemoryContext, returning where they start in
 * it.  A read of the segment's first chunk is extended back over the header,
 * which is checked on the way, as a row group read starting there is.
 */
static const char *
read_deferred_bytes(SegmentReader *reader, int64 offset, int64 length,
					char **buffer)
{
	if (offset != SEGMENT_HEADER_SIZE)
		return *buffer = read_bytes(reader, offset, length);
	*buffer = read_bytes(reader, 0, length + SEGMENT_HEADER_SIZE);
	check_versions_agree(reader, check_header(*buffer, reader->source->name));
	return *buffer + SEGMENT_HEADER_SIZE;
}

/*
 * Read the wanted columns of one row group into *out, in CurrentMemoryContext,
 * with the ranges segment_reader_row_group_ranges() names, and decode those
 * not deferred.  A read buffer holding a deferred chunk is kept (in the same
 * context) until the row group is freed.
 */
void
segment_reader_read_row_group(SegmentReader *reader, int row_group,
							  const bool *want, const bool *defer,
							  SegmentRowGroup *out)
{
	const char *name = reader->source->name;
	int			ncolumns = reader->schema.ncolumns;
	SegmentRowGroupInfo *group;
	SegmentRange *ranges;
	int			range_count;

	range_count = segment_reader_row_group_ranges(reader, row_group, want,
												  defer, &ranges);
	group = &reader->row_groups[row_group];

	out->row_count = group->row_count;
	out->values = palloc0(sizeof(Datum *) * ncolumns);
	out->isnull = palloc0(sizeof(bool *) * ncolumns);
	out->deferred = palloc0(sizeof(const char *) * ncolumns);
	out->deferred_count = 0;
	out->ready_start = NULL;
	out->ready_end = NULL;
	out->page_decoded = NULL;
	out->raw_decoded = NULL;
	out->read_ahead = NULL;
	if (defer != NULL)
	{
		out->ready_start = palloc0(sizeof(int64) * ncolumns);
		out->ready_end = palloc0(sizeof(int64) * ncolumns);
		out->page_decoded = palloc0(sizeof(bool *) * ncolumns);
		out->raw_decoded = palloc0(sizeof(int64) * ncolumns);
		out->read_ahead = palloc0(sizeof(SegmentReadAhead *) * ncolumns);

		/* deferred columns a source of cheap reads reads when decoded */
		for (int i = 0; i < ncolumns && reader->source->cheap_reads; i++)
		{
			if (want[i] && defer[i])
			{
				out->deferred[i] = chunk_not_read;
				out->deferred_count++;
			}
		}
	}

	for (int r = 0; r < range_count; r++)
	{
		int64		read_start = ranges[r].offset;
		int64		length = ranges[r].length;
		char	   *buffer = read_bytes(reader, read_start, length);
		bool		keep_buffer = false;

		if (read_start == 0)
			check_versions_agree(reader, check_header(buffer, name));

		for (int i = ranges[r].first_column; i <= ranges[r].last_column; i++)
		{
			const char *compressed = buffer + (group->chunks[i].offset - read_start);

			if (!want[i])
				continue;		/* a small gap read along */
			if (out->deferred[i] == chunk_not_read)
			{
				/* deferred and not planned, but read along in a gap: use it */
				out->deferred[i] = compressed;
				keep_buffer = true;
				continue;
			}
			if (defer != NULL && defer[i])
			{
				out->deferred[i] = compressed;
				out->deferred_count++;
				keep_buffer = true;
				continue;
			}
			CHECK_FOR_INTERRUPTS();
			read_chunk(reader, row_group, i, compressed, out);
		}
		if (!keep_buffer)
			pfree(buffer);
	}
	if (ranges != NULL)
		pfree(ranges);
}

/*
 * The compressed frame of page p of a deferred chunk that was not read:
 * from the pages read ahead, or read now, with the pages after it when the
 * page before it was decoded.  Pages are laid out one after another
 * (segment_writer.c); a layout that is not stops the run.
 */
static const char *
read_deferred_page(SegmentReader *reader, SegmentRowGroup *rows, int column,
				   const SegmentChunkInfo *chunk, const SegmentPageInfo *pages,
				   int p, char **single_buffer)
{
	SegmentReadAhead *ahead = rows->read_ahead != NULL ? rows->read_ahead[column] : NULL;
	int			end = p + 1;
	int64		length = pages[p].compressed_size;
	char	   *buffer;
	const char *frame;

	*single_buffer = NULL;
	if (ahead != NULL && p >= ahead->first_page && p < ahead->end_page)
		return ahead->first_frame + (pages[p].offset - pages[ahead->first_page].offset);

	if (rows->read_ahead != NULL && p > 0 && rows->page_decoded[column][p - 1])
	{
		while (end < chunk->page_count &&
			   !rows->page_decoded[column][end] &&
			   pages[end].offset == pages[end - 1].offset + pages[end - 1].compressed_size &&
			   length + pages[end].compressed_size <= SEGMENT_READ_AHEAD_BYTES)
			length += pages[end++].compressed_size;
	}
	frame = read_deferred_bytes(reader, chunk->offset + pages[p].offset, length,
								&buffer);
	if (end == p + 1)
	{
		*single_buffer = buffer;	/* the caller frees it after decoding */
		return frame;
	}
	if (ahead == NULL)
		ahead = rows->read_ahead[column] = palloc0(sizeof(SegmentReadAhead));
	else
		pfree(ahead->buffer);
	ahead->buffer = buffer;
	ahead->first_frame = frame;
	ahead->first_page = p;
	ahead->end_page = end;
	return frame;
}

/* The page of a chunk of several pages that holds row (binary search). */
static int
page_of_row(const SegmentPageInfo *pages, int page_count, int64 row)
{
	int			low = 0;
	int			high = page_count - 1;

	while (low < high)
	{
		int			middle = (low + high + 1) / 2;

		if (pages[middle].first_row <= row)
			low = middle;
		else
			high = middle - 1;
	}
	return low;
}

/* The rows of the page that holds row (segment.h). */
void
segment_reader_page_rows(SegmentReader *reader, int row_group, int column,
						 int64 row, int64 *first, int64 *end)
{
	SegmentRowGroupInfo *group = &reader->row_groups[row_group];
	SegmentChunkInfo *chunk = &group->chunks[column];
	SegmentPageInfo *pages;
	int			p;

	if (chunk->page_count <= 1)
	{
		*first = 0;
		*end = group->row_count;
		return;
	}
	pages = chunk_pages(reader, row_group, column);
	p = page_of_row(pages, chunk->page_count, row);
	*first = pages[p].first_row;
	*end = pages[p].first_row + pages[p].row_count;
}

/*
 * Decode a row of a deferred column (segment.h): its page is checked and
 * decompressed only now, or the whole chunk when it is one page.  Once
 * every page is decoded the column is no longer deferred.
 */
int
segment_row_group_decode_deferred(SegmentReader *reader, int row_group,
								  SegmentRowGroup *rows, int column, int64 row)
{
	SegmentChunkInfo *chunk = &reader->row_groups[row_group].chunks[column];
	SegmentPageInfo *pages;
	bool	   *decoded;
	int			p;
	int			pages_decoded = 0;

	if (rows->deferred == NULL || rows->deferred[column] == NULL ||
		row < 0 || row >= rows->row_count)
		elog(ERROR, "row %lld of column %d of row group %d of segment \"%s\" is not deferred",
			 (long long) row, column, row_group, reader->source->name);
	if (chunk->page_count == 1)
	{
		const char *compressed = rows->deferred[column];
		char	   *buffer;

		if (compressed == chunk_not_read)
			compressed = read_deferred_bytes(reader, chunk->offset,
											 chunk->compressed_size, &buffer);
		read_chunk(reader, row_group, column, compressed, rows);
		rows->deferred[column] = NULL;
		rows->deferred_count--;
		return 1;
	}

	pages = chunk_pages(reader, row_group, column);
	if (rows->page_decoded[column] == NULL)
		rows->page_decoded[column] = palloc0(sizeof(bool) * chunk->page_count);
	decoded = rows->page_decoded[column];
	p = page_of_row(pages, chunk->page_count, row);
	if (!decoded[p])
	{
		if (rows->deferred[column] == chunk_not_read)
		{
			char	   *buffer;
			const char *frame = read_deferred_page(reader, rows, column, chunk,
												   pages, p, &buffer);

			rows->raw_decoded[column] +=
				read_page(reader, row_group, column, p, frame,
						  chunk->raw_size - rows->raw_decoded[column], rows);
			if (buffer != NULL)
				pfree(buffer);
		}
		else
			rows->raw_decoded[column] +=
				read_page(reader, row_group, column, p,
						  rows->deferred[column] + pages[p].offset,
						  chunk->raw_size - rows->raw_decoded[column], rows);
		decoded[p] = true;
		pages_decoded = 1;
	}
	rows->ready_start[column] = pages[p].first_row;
	rows->ready_end[column] = pages[p].first_row + pages[p].row_count;

	for (p = 0; p < chunk->page_count; p++)
	{
		if (!decoded[p])
			return pages_decoded;
	}
	check_pages_total(reader, row_group, column, rows->raw_decoded[column],
					  rows);
	rows->deferred[column] = NULL;	/* every page decoded */
	rows->deferred_count--;
	return pages_decoded;
}

/*
 * Decode row `row` alone of a deferred column (segment.h): its page (or its
 * chunk of one page) is checked and decompressed, and only that row is
 * decoded into rows, which then has exactly that row ready.  The page stays
 * undecoded: another row of it needs segment_row_group_decode_deferred.
 */
void
segment_row_group_decode_deferred_row(SegmentReader *reader, int row_group,
									  SegmentRowGroup *rows, int column,
									  int64 row)
{
	SegmentRowGroupInfo *group = &reader->row_groups[row_group];
	SegmentChunkInfo *chunk = &group->chunks[column];
	const char *compressed = rows->deferred != NULL ? rows->deferred[column] : NULL;
	char	   *buffer = NULL;
	int64		first_row = 0;
	int64		page_rows = group->row_count;
	int64		raw_size;
	char	   *raw;
	char	   *what;

	if (compressed == NULL || row < 0 || row >= rows->row_count)
		elog(ERROR, "row %lld of column %d of row group %d of segment \"%s\" is not deferred",
			 (long long) row, column, row_group, reader->source->name);
	if (chunk->page_count == 1)
	{
		if (compressed == chunk_not_read)
			compressed = read_deferred_bytes(reader, chunk->offset,
											 chunk->compressed_size, &buffer);
		what = psprintf("chunk %d of row group %d", column, row_group);
		raw = decompress_frame(reader, column, chunk, compressed, chunk->compressed_size,
							   chunk->crc, chunk->raw_size, what, &raw_size);
	}
	else
	{
		SegmentPageInfo *pages = chunk_pages(reader, row_group, column);
		int			p = page_of_row(pages, chunk->page_count, row);

		if (compressed == chunk_not_read)
			compressed = read_deferred_bytes(reader, chunk->offset + pages[p].offset,
											 pages[p].compressed_size, &buffer);
		else
			compressed += pages[p].offset;
		what = psprintf("page %d of chunk %d of row group %d", p, column, row_group);
		raw = decompress_frame(reader, column, chunk, compressed, pages[p].compressed_size,
							   pages[p].crc, PAGE_RAW_AT_MOST(chunk->raw_size),
							   what, &raw_size);
		first_row = pages[p].first_row;
		page_rows = pages[p].row_count;
	}
	if (buffer != NULL)
		pfree(buffer);
	allocate_column(group, column, rows);
	segment_chunk_decode_row(&reader->schema.columns[column],
							 reader->image_checks[column], raw, raw_size,
							 page_rows, row - first_row,
							 &rows->values[column][row],
							 &rows->isnull[column][row], reader->source->name);
	rows->ready_start[column] = row;
	rows->ready_end[column] = row + 1;
	pfree(what);
}

/* Free the reader and everything it holds. */
void
segment_reader_close(SegmentReader *reader)
{
	MemoryContextDelete(reader->context);
}

/* The state of a SegmentSource over a memory buffer. */
typedef struct BufferSource
{
	const char *data;
	int64		size;
} BufferSource;

/* read_range of a buffer source; asking outside the buffer is a bug. */
static bool
buffer_read_range(void *arg, int64 offset, int64 length, StringInfo out)
{
	BufferSource *buffer = (BufferSource *) arg;

	if (offset < 0 || length < 0 || offset > buffer->size ||
		length > buffer->size - offset || length > (int64) MaxAllocSize - 1)
		elog(ERROR, "read of %lld bytes at %lld is outside a buffer of %lld bytes",
			 (long long) length, (long long) offset, (long long) buffer->size);
	appendBinaryStringInfo(out, buffer->data + offset, (int) length);
	return true;
}

/* read_tail of a buffer source: the last min(length, size) bytes. */
static bool
buffer_read_tail(void *arg, int64 length, StringInfo out, int64 *object_size)
{
	BufferSource *buffer = (BufferSource *) arg;
	int64		take = Min(length, buffer->size);

	*object_size = buffer->size;
	if (take > 0)
		appendBinaryStringInfo(out, buffer->data + buffer->size - take,
							   (int) take);
	return true;
}

/*
 * A SegmentSource over a memory buffer (tests, fuzzing), in
 * CurrentMemoryContext.  The buffer is not copied and must outlive the
 * source.
 */
SegmentSource *
segment_source_from_buffer(const char *name, const char *data, int64 size)
{
	SegmentSource *source = palloc0(sizeof(SegmentSource));
	BufferSource *buffer = palloc0(sizeof(BufferSource));

	buffer->data = data;
	buffer->size = size;
	source->name = pstrdup(name);
	source->arg = buffer;
	source->read_range = buffer_read_range;
	source->read_tail = buffer_read_tail;
	source->cheap_reads = true;
	return source;
}
