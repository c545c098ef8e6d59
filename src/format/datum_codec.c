/*-------------------------------------------------------------------------
 *
 * datum_codec.c
 *		Column types, their order, and PostgreSQL datum images: how one
 *		value and one column chunk of a segment are laid out in bytes.
 *
 * A value is stored as its datum image, the bytes PostgreSQL itself keeps in
 * a heap tuple: typlen bytes for by-value and fixed-length by-reference
 * types, the whole flat varlena for varlena types (never toasted, never
 * compressed: the writer detoasts, zstd compresses the chunk instead), the
 * bytes up to and including the NUL for cstrings.  Varlenas that fit are
 * stored with a 1-byte header, exactly as heap_fill_tuple() does; longer
 * ones keep their 4-byte header.  Values are aligned per typalign inside the
 * chunk (1-byte-header varlenas and cstrings are not aligned) so that a
 * decoded Datum can point straight into the decompressed chunk.
 *
 * A chunk, uncompressed, is the values of the non-null rows one after
 * another, followed by the null bitmap (bit set = value present, least
 * significant bit first).  docs/FORMAT.md has the details.
 *
 * The decoder trusts nothing: every value is bounds-checked against the
 * chunk and every varlena header is checked, and external or compressed
 * varlena headers are rejected as corruption.  What is inside a value with
 * a structure of its own (an array, a jsonb, a range...) is checked by
 * image_check.c, with the check the caller passes for the column.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/pg_bitutils.h"

#include "access/detoast.h"
#include "access/tupmacs.h"
#include "catalog/pg_collation.h"
#include "port/pg_bswap.h"
#include "rollout/image_check.h"
#include "segment_internal.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"
#include "utils/uuid.h"

/*
 * Fill in a column from its type: the storage attributes the datum images
 * depend on, the type's name (so that readers can check a segment against
 * the schema they expect) and the column's order.  Used on the writer's
 * side, where the type is known to the catalog.
 */
void
segment_column_init(SegmentColumn *column, const char *name,
					Oid typid, int32 typmod)
{
	memset(column, 0, sizeof(SegmentColumn));
	column->name = pstrdup(name);
	column->typid = typid;
	column->typmod = typmod;
	get_typlenbyvalalign(typid, &column->typlen, &column->typbyval,
						 &column->typalign);
	column->typstorage = get_typstorage(typid);
	column->type_name = format_type_with_typemod(typid, typmod);
	column->image_check = image_check_for_type(typid);

	if (!segment_column_layout_is_valid(column->typlen, column->typbyval,
										column->typalign))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("type %s cannot be stored in a segment",
						column->type_name)));

	segment_column_init_order(column);
}

/*
 * Fill in the order of a column whose typid is set: the comparison support
 * function of the type's default btree operator class, called with the "C"
 * collation for collatable types so that the order never depends on the
 * database's collation.  Types without a default btree operator class get
 * has_order = false (and so no min/max statistics).  The FmgrInfo lives in
 * CurrentMemoryContext.
 */
void
segment_column_init_order(SegmentColumn *column)
{
	TypeCacheEntry *typentry;

	typentry = lookup_type_cache(column->typid, TYPECACHE_CMP_PROC);
	if (!OidIsValid(typentry->cmp_proc))
	{
		column->has_order = false;
		column->compare_collation = InvalidOid;
		return;
	}

	fmgr_info(typentry->cmp_proc, &column->compare_proc);
	column->compare_collation =
		type_is_collatable(column->typid) ? C_COLLATION_OID : InvalidOid;
	column->has_order = true;
	switch (typentry->cmp_proc)
	{
		case F_BTINT2CMP:
			column->compare_inline = SEGMENT_COMPARE_INT16;
			break;
		case F_BTINT4CMP:
		case F_DATE_CMP:
			column->compare_inline = SEGMENT_COMPARE_INT32;
			break;
		case F_BTINT8CMP:
		case F_TIMESTAMP_CMP:
		case F_TIMESTAMPTZ_CMP:
			column->compare_inline = SEGMENT_COMPARE_INT64;
			break;
		case F_UUID_CMP:
			column->compare_inline = SEGMENT_COMPARE_UUID;
			break;
		default:
			column->compare_inline = SEGMENT_COMPARE_CALL;
			break;
	}
}

/* -1, 0 or 1 as a is below, equal to or above b */
#define COMPARE_VALUES(a, b) (((a) > (b)) - ((a) < (b)))

/*
 * uuid_cmp's order (memcmp of the 16 bytes) as two comparisons of
 * big-endian 64-bit words, without a call.
 */
static inline int
compare_uuid_bytes(const char *a, const char *b)
{
	uint64		a_word;
	uint64		b_word;

	StaticAssertStmt(UUID_LEN == 16, "a uuid is two 64-bit words");
	memcpy(&a_word, a, 8);
	memcpy(&b_word, b, 8);
	if (a_word == b_word)
	{
		memcpy(&a_word, a + 8, 8);
		memcpy(&b_word, b + 8, 8);
	}
	a_word = pg_hton64(a_word);
	b_word = pg_hton64(b_word);
	return COMPARE_VALUES(a_word, b_word);
}

/*
 * Compare two non-null datums of a column by the column's order; negative,
 * zero or positive like a btree support function.  The function may cache
 * state in the FmgrInfo (array and record comparisons do), hence the cast.
 */
int
segment_column_compare(const SegmentColumn *column, Datum a, Datum b)
{
	if (!column->has_order)
		elog(ERROR, "column \"%s\" of type %s has no order",
			 column->name, column->type_name);

	switch (column->compare_inline)
	{
		case SEGMENT_COMPARE_INT16:
			return COMPARE_VALUES(DatumGetInt16(a), DatumGetInt16(b));
		case SEGMENT_COMPARE_INT32:
			return COMPARE_VALUES(DatumGetInt32(a), DatumGetInt32(b));
		case SEGMENT_COMPARE_INT64:
			return COMPARE_VALUES(DatumGetInt64(a), DatumGetInt64(b));
		case SEGMENT_COMPARE_UUID:
			return compare_uuid_bytes(DatumGetPointer(a), DatumGetPointer(b));
	}
	return DatumGetInt32(FunctionCall2Coll((FmgrInfo *) &column->compare_proc,
										   column->compare_collation, a, b));
}

/*
 * Whether a column's storage attributes are ones this format can hold:
 * by-value types of 1, 2, 4 or 8 bytes (8 only where Datum is 8 bytes),
 * fixed-length by-reference types, varlenas and cstrings, with one of the
 * four alignment codes.  The reader uses it on the schema of a footer.
 */
bool
segment_column_layout_is_valid(int16 typlen, bool typbyval, char typalign)
{
	if (typalign != TYPALIGN_CHAR && typalign != TYPALIGN_SHORT &&
		typalign != TYPALIGN_INT && typalign != TYPALIGN_DOUBLE)
		return false;

	if (typbyval)
		return typlen == 1 || typlen == 2 || typlen == 4 ||
			(typlen == 8 && SIZEOF_DATUM == 8);

	return typlen > 0 || typlen == -1 || typlen == -2;
}

/*
 * Make a value storable: varlenas are detoasted and decompressed (expanded
 * objects flattened); 1-byte-header varlenas are kept as they are.  Other
 * values are returned unchanged.  The result may be palloc'd in
 * CurrentMemoryContext.
 */
Datum
segment_datum_flatten(const SegmentColumn *column, Datum value)
{
	if (column->typlen == -1)
		return PointerGetDatum(pg_detoast_datum_packed((struct varlena *)
													   DatumGetPointer(value)));
	return value;
}

/*
 * Whether a flattened value's image is a varlena with a 1-byte header, which
 * like in a heap tuple is stored without alignment.
 */
bool
segment_datum_image_is_short(const SegmentColumn *column, Datum flat)
{
	Pointer		pointer;

	if (column->typlen != -1)
		return false;
	pointer = DatumGetPointer(flat);
	return VARATT_IS_SHORT(pointer) ||
		(VARATT_CAN_MAKE_SHORT(pointer) && column->typstorage != TYPSTORAGE_PLAIN);
}

/* The size of a flattened value's image. */
Size
segment_datum_image_size(const SegmentColumn *column, Datum flat)
{
	Pointer		pointer;

	if (column->typlen > 0)
		return column->typlen;
	pointer = DatumGetPointer(flat);
	if (column->typlen == -2)
		return strlen(pointer) + 1;

	if (VARATT_IS_SHORT(pointer))
		return VARSIZE_SHORT(pointer);
	if (VARATT_CAN_MAKE_SHORT(pointer) && column->typstorage != TYPSTORAGE_PLAIN)
		return VARATT_CONVERTED_SHORT_SIZE(pointer);
	return VARSIZE(pointer);
}

/*
 * Write a flattened value's image (segment_datum_image_size() bytes) to
 * dest, which need not be aligned.  Short-able 4-byte-header varlenas are
 * converted to a 1-byte header, as heap_fill_tuple() does, except those of
 * types of plain storage (int2vector, oidvector), whose functions read them
 * without detoasting.
 */
void
segment_datum_write_image(const SegmentColumn *column, char *dest, Datum flat)
{
	Pointer		pointer;

	if (column->typbyval)
	{
		/* store_att_byval needs an aligned target; go through a Datum */
		union
		{
			Datum		datum;
			char		bytes[sizeof(Datum)];
		}			aligned;

		store_att_byval(aligned.bytes, flat, column->typlen);
		memcpy(dest, aligned.bytes, column->typlen);
		return;
	}

	pointer = DatumGetPointer(flat);
	if (column->typlen > 0)
		memcpy(dest, pointer, column->typlen);
	else if (column->typlen == -2)
		memcpy(dest, pointer, strlen(pointer) + 1);
	else if (VARATT_IS_SHORT(pointer))
		memcpy(dest, pointer, VARSIZE_SHORT(pointer));
	else if (VARATT_CAN_MAKE_SHORT(pointer) && column->typstorage != TYPSTORAGE_PLAIN)
	{
		Size		size = VARATT_CONVERTED_SHORT_SIZE(pointer);

		SET_VARSIZE_SHORT(dest, size);
		memcpy(dest + 1, VARDATA(pointer), size - 1);
	}
	else
		memcpy(dest, pointer, VARSIZE(pointer));
}

/*
 * Append a flattened value to a chunk under construction: zero padding up to
 * the value's alignment (none for 1-byte-header varlenas and cstrings), then
 * its image.  Offsets are relative to the start of the chunk, which the
 * reader decompresses into a MAXALIGN'd buffer.
 */
void
segment_chunk_append_value(const SegmentColumn *column, StringInfo chunk,
						   Datum flat)
{
	Size		size = segment_datum_image_size(column, flat);
	int64		start = chunk->len;

	if (column->typlen != -2 && !segment_datum_image_is_short(column, flat))
		start = segment_align(chunk->len, column->typalign);

	enlargeStringInfo(chunk, (start - chunk->len) + size);
	memset(chunk->data + chunk->len, 0, start - chunk->len);
	segment_datum_write_image(column, chunk->data + start, flat);
	chunk->len = start + size;
	chunk->data[chunk->len] = '\0';
}

/*
 * Check that length bytes at image are one well-formed varlena: a 1-byte
 * header (not an external pointer) or an uncompressed 4-byte header, whose
 * size is exactly length.  Returns a description of the problem, or NULL.
 */
static const char *
segment_varlena_problem(const char *image, int64 length)
{
	if (length < 1)
		return "is empty";
	if (VARATT_IS_1B_E(image))
		return "is an external TOAST pointer";
	if (VARATT_IS_1B(image))
		return (int64) VARSIZE_1B(image) == length ? NULL :
			"has a 1-byte header that disagrees with its length";
	if (length < VARHDRSZ)
		return "is shorter than its 4-byte header";
	if (VARATT_IS_4B_C(image))
		return "is compressed";
	if (!VARATT_IS_4B_U(image))
		return "has an invalid header";
	if ((int64) VARSIZE_4B(image) != length)
		return "has a 4-byte header that disagrees with its length";
	return NULL;
}

/*
 * Turn a stored image (a min/max statistic or a key bound) back into a Datum
 * of the column, after checking that it is well-formed for the column's
 * storage attributes.  By-reference values are copied into a MAXALIGN'd
 * palloc'd buffer in CurrentMemoryContext.  what names the image in the
 * error detail.
 */
Datum
segment_datum_from_image(const SegmentColumn *column, const ImageCheck *check,
						 const char *image, int64 length,
						 const char *segment_name, const char *what)
{
	char	   *copy;

	if (column->typlen > 0)
	{
		if (length != column->typlen)
			segment_corrupt(segment_name,
							"The %s of column \"%s\" is %lld bytes long, but its type is %d bytes long.",
							what, column->name, (long long) length,
							(int) column->typlen);
	}
	else if (column->typlen == -2)
	{
		if (length < 1 || memchr(image, '\0', length) != image + length - 1)
			segment_corrupt(segment_name,
							"The %s of column \"%s\" is not one NUL-terminated string.",
							what, column->name);
	}
	else
	{
		const char *problem = segment_varlena_problem(image, length);

		if (problem != NULL)
			segment_corrupt(segment_name,
							"The %s of column \"%s\" %s.",
							what, column->name, problem);
	}

	copy = palloc(length);
	memcpy(copy, image, length);
	if (check != NULL)
	{
		const char *problem = image_check_value(check, copy, length);

		if (problem != NULL)
			segment_corrupt(segment_name, "The %s of column \"%s\" %s.",
							what, column->name, problem);
	}
	if (column->typbyval)
		return fetch_att(copy, true, column->typlen);
	return PointerGetDatum(copy);
}

/*
 * The null bitmap of a decompressed chunk of row_count rows (at its end),
 * checked; *values_end receives the length of the value area before it.
 */
static const unsigned char *
chunk_bitmap(const SegmentColumn *column, const char *raw, int64 raw_size,
			 int64 row_count, int64 *values_end, const char *segment_name)
{
	int64		bitmap_size = (row_count + 7) / 8;
	const unsigned char *bitmap;

	if (raw_size < bitmap_size)
		segment_corrupt(segment_name,
						"A chunk of column \"%s\" is %lld bytes long, too short for the null bitmap of %lld rows.",
						column->name, (long long) raw_size,
						(long long) row_count);
	*values_end = raw_size - bitmap_size;
	bitmap = (const unsigned char *) raw + *values_end;

	/* bits past the last row must be clear */
	if (row_count % 8 != 0 &&
		(bitmap[bitmap_size - 1] >> (row_count % 8)) != 0)
		segment_corrupt(segment_name,
						"The null bitmap of a chunk of column \"%s\" has bits set past its last row.",
						column->name);
	return bitmap;
}

/* Raise the corrupt-segment error if check finds a problem in a value. */
static void
chunk_check_value(const SegmentColumn *column, const ImageCheck *check,
				  const char *value, int64 length, int64 row,
				  const char *segment_name)
{
	const char *problem = image_check_value(check, value, length);

	if (problem != NULL)
		segment_corrupt(segment_name,
						"Row %lld of a chunk of column \"%s\" %s.",
						(long long) row, column->name, problem);
}

/*
 * The non-null value of row `row` that starts at or after *offset in the
 * value area of raw (values_end bytes), checked against the end of the area
 * and, for a varlena, its header, and then by check (NULL: no check of its
 * inside); *offset moves past it.
 */
static pg_attribute_always_inline Datum
chunk_next_value(const SegmentColumn *column, const ImageCheck *check,
				 const char *raw, int64 values_end, int64 *offset, int64 row,
				 const char *segment_name)
{
	const char *value;
	int64		remaining;
	int64		length;

	if (column->typlen > 0)
	{
		*offset = segment_align(*offset, column->typalign);
		if (*offset > values_end || values_end - *offset < column->typlen)
			segment_corrupt(segment_name,
							"Row %lld of a chunk of column \"%s\" runs past the end of the chunk.",
							(long long) row, column->name);
		value = raw + *offset;
		*offset += column->typlen;
		if (check != NULL)
			chunk_check_value(column, check, value, column->typlen, row,
							  segment_name);
		return fetch_att(value, column->typbyval, column->typlen);
	}

	if (column->typlen == -2)
	{
		const char *end;

		remaining = values_end - *offset;
		end = remaining > 0 ? memchr(raw + *offset, '\0', remaining) : NULL;
		if (end == NULL)
			segment_corrupt(segment_name,
							"Row %lld of a chunk of column \"%s\" is not a NUL-terminated string.",
							(long long) row, column->name);
		value = raw + *offset;
		*offset += (end - value) + 1;
		return PointerGetDatum(value);
	}

	/*
	 * A varlena.  As in heap tuples, padding bytes are zero and a 1-byte
	 * header is never zero, so a non-zero byte where the value may begin is a
	 * 1-byte header and anything else is padding before an aligned 4-byte
	 * header.
	 */
	if (*offset >= values_end)
		segment_corrupt(segment_name,
						"Row %lld of a chunk of column \"%s\" runs past the end of the chunk.",
						(long long) row, column->name);
	if (!VARATT_IS_1B(raw + *offset))
		*offset = segment_align(*offset, column->typalign);
	if (*offset >= values_end)
		segment_corrupt(segment_name,
						"Row %lld of a chunk of column \"%s\" runs past the end of the chunk.",
						(long long) row, column->name);
	value = raw + *offset;
	remaining = values_end - *offset;

	if (VARATT_IS_1B_E(value))
		segment_corrupt(segment_name,
						"Row %lld of a chunk of column \"%s\" is an external TOAST pointer.",
						(long long) row, column->name);
	if (VARATT_IS_1B(value))
		length = VARSIZE_1B(value);
	else
	{
		if (remaining < VARHDRSZ)
			segment_corrupt(segment_name,
							"Row %lld of a chunk of column \"%s\" runs past the end of the chunk.",
							(long long) row, column->name);
		if (!VARATT_IS_4B_U(value))
			segment_corrupt(segment_name,
							"Row %lld of a chunk of column \"%s\" is a compressed or malformed varlena.",
							(long long) row, column->name);
		length = VARSIZE_4B(value);
		if (length < VARHDRSZ)
			segment_corrupt(segment_name,
							"Row %lld of a chunk of column \"%s\" has a varlena header shorter than itself.",
							(long long) row, column->name);
	}
	if (length > remaining)
		segment_corrupt(segment_name,
						"Row %lld of a chunk of column \"%s\" runs past the end of the chunk.",
						(long long) row, column->name);
	*offset += length;
	if (check != NULL)
		chunk_check_value(column, check, value, length, row, segment_name);
	return PointerGetDatum(value);
}

/*
 * Decode one decompressed chunk of row_count rows into values/isnull (arrays
 * of row_count elements).  By-reference Datums point into raw, which must be
 * MAXALIGN'd and outlive them.  Everything is checked: the bitmap against
 * null_count, every value against the end of the value area, every varlena
 * header, every value's inside by check (NULL: nothing inside to check), and
 * that the values fill the area exactly.
 */
void
segment_chunk_decode(const SegmentColumn *column, const ImageCheck *check,
					 const char *raw, int64 raw_size, int64 row_count,
					 int64 null_count, Datum *values, bool *isnull,
					 const char *segment_name)
{
	int64		values_end;
	const unsigned char *bitmap = chunk_bitmap(column, raw, raw_size, row_count,
											   &values_end, segment_name);
	int64		nulls = 0;
	int64		offset = 0;

	/*
	 * Fixed-length values without nulls (keys, stamps, most numbers): each at
	 * rank times its length, when that keeps them aligned.  The bitmap must
	 * then be all ones, and the value area exactly that long.
	 */
	if (column->typlen > 0 && check == NULL &&
		column->typlen % segment_align(1, column->typalign) == 0 &&
		(null_count == 0 || null_count == -1) &&
		values_end == row_count * column->typlen &&
		pg_popcount((const char *) bitmap, (row_count + 7) / 8) == (uint64) row_count)
	{
		for (int64 row = 0; row < row_count; row++)
		{
			values[row] = fetch_att(raw + row * column->typlen,
									column->typbyval, column->typlen);
			isnull[row] = false;
		}
		return;
	}

	for (int64 row = 0; row < row_count; row++)
	{
		if ((bitmap[row / 8] & (1 << (row % 8))) == 0)
		{
			values[row] = (Datum) 0;
			isnull[row] = true;
			nulls++;
			continue;
		}
		isnull[row] = false;
		values[row] = chunk_next_value(column, check, raw, values_end, &offset,
									   row, segment_name);
	}

	if (null_count >= 0 && nulls != null_count)
		segment_corrupt(segment_name,
						"A chunk of column \"%s\" has %lld nulls, but the footer says %lld.",
						column->name, (long long) nulls, (long long) null_count);
	if (offset != values_end)
		segment_corrupt(segment_name,
						"The values of a chunk of column \"%s\" end at byte %lld, but the value area is %lld bytes long.",
						column->name, (long long) offset,
						(long long) values_end);
}

/*
 * Decode row `row` alone of one decompressed chunk of row_count rows into
 * *value and *isnull, for a read that needs one row of a page (a key
 * lookup): the values before it are stepped over, not decoded, and a
 * fixed-length value whose length is a multiple of its alignment is found
 * by its rank alone.  The bitmap, the framing of the values up to the row
 * and the row's own value, inside too, are checked as segment_chunk_decode
 * checks them; what lies after it is not looked at (the page's CRC has been
 * checked).
 */
void
segment_chunk_decode_row(const SegmentColumn *column, const ImageCheck *check,
						 const char *raw, int64 raw_size, int64 row_count,
						 int64 row, Datum *value, bool *isnull,
						 const char *segment_name)
{
	int64		values_end;
	const unsigned char *bitmap = chunk_bitmap(column, raw, raw_size, row_count,
											   &values_end, segment_name);
	int64		rank = 0;
	int64		offset = 0;

	Assert(row >= 0 && row < row_count);
	if ((bitmap[row / 8] & (1 << (row % 8))) == 0)
	{
		*value = (Datum) 0;
		*isnull = true;
		return;
	}
	*isnull = false;
	rank = (int64) pg_popcount((const char *) bitmap, row / 8);
	for (int64 r = row / 8 * 8; r < row; r++)
		rank += (bitmap[r / 8] >> (r % 8)) & 1;

	if (column->typlen > 0 &&
		column->typlen % segment_align(1, column->typalign) == 0)
		offset = rank * column->typlen;
	else
	{
		for (int64 r = 0; r < rank; r++)
			(void) chunk_next_value(column, NULL, raw, values_end, &offset, r,
									segment_name);
	}
	*value = chunk_next_value(column, check, raw, values_end, &offset, row,
							  segment_name);
}
