/*-------------------------------------------------------------------------
 *
 * image_check.c
 *		Check the inside of a datum image before PostgreSQL reads it.
 *
 * The segment decoder (datum_codec.c) checks how values are framed: each
 * lies inside its chunk, each varlena header is sound.  That is all
 * PostgreSQL needs of a bytea or a uuid, but not of values with a structure
 * inside: array_out walks an array's elements by its dimensions, jsonb
 * operators follow a jsonb's entry offsets, range functions trust a range's
 * flags, and none of them checks what it reads, since every value they meet
 * was built by PostgreSQL itself.  A store's objects are written by whoever
 * can write where the store lives, so a crafted image could make a backend
 * (or the sweeper, which runs as a superuser) read outside the value: crash
 * the server, or show other memory as a value.
 *
 * So every image of a type with an inner structure is checked here as the
 * type's receive function checks its binary input, before anything reads
 * it: whatever passes is a value the type's own functions can read safely.
 * The checks mirror what PostgreSQL 15's own readers assume (array_iter,
 * getJsonbOffset, range_deserialize), on the bytes as they will be read: a
 * varlena with a 1-byte header is checked as the 4-byte-header copy that
 * detoasting it makes.
 *
 * Types this module does not know (those of extensions, multiranges,
 * tsvector and a few internal ones) are not kept as images in new stores:
 * core/portable_values.c keeps them as text, parsed by the type's input
 * function, which checks everything.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/socket.h>

#include "access/htup_details.h"
#include "access/tupmacs.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/geo_decls.h"
#include "utils/inet.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rangetypes.h"
#include "utils/syscache.h"
#include "utils/varbit.h"

#include "rollout/image_check.h"

typedef enum ImageCheckKind
{
	IMAGE_CHECK_ANY,			/* any bytes of its length are a value */
	IMAGE_CHECK_UNKNOWN,		/* a structure this module does not know */
	IMAGE_CHECK_TEXT,			/* characters in the database encoding */
	IMAGE_CHECK_NAME,			/* a NUL-terminated name in 64 bytes */
	IMAGE_CHECK_NUMERIC,
	IMAGE_CHECK_JSONB,
	IMAGE_CHECK_ARRAY,
	IMAGE_CHECK_VECTOR,			/* int2vector, oidvector: 1-D arrays */
	IMAGE_CHECK_RANGE,
	IMAGE_CHECK_INET,
	IMAGE_CHECK_BIT,
	IMAGE_CHECK_PATH,
	IMAGE_CHECK_POLYGON
} ImageCheckKind;

/* The kinds' names in signatures (recorded in _store.json: never change one) */
static const char *const image_check_kind_names[] = {
	[IMAGE_CHECK_ANY] = "any",
	[IMAGE_CHECK_UNKNOWN] = "unknown",
	[IMAGE_CHECK_TEXT] = "text",
	[IMAGE_CHECK_NAME] = "name",
	[IMAGE_CHECK_NUMERIC] = "numeric",
	[IMAGE_CHECK_JSONB] = "jsonb",
	[IMAGE_CHECK_ARRAY] = "array",
	[IMAGE_CHECK_VECTOR] = "vector",
	[IMAGE_CHECK_RANGE] = "range",
	[IMAGE_CHECK_INET] = "inet",
	[IMAGE_CHECK_BIT] = "bit",
	[IMAGE_CHECK_PATH] = "path",
	[IMAGE_CHECK_POLYGON] = "polygon"
};

struct ImageCheck
{
	ImageCheckKind kind;
	Oid			typid;			/* a range's own type (its images name it) */
	int			encoding;		/* TEXT, NAME, JSONB: the database's */

	/* ARRAY, VECTOR: the element type; RANGE: the bound type */
	Oid			inner_typid;
	int16		inner_typlen;
	bool		inner_typbyval;
	char		inner_typalign;
	const ImageCheck *inner;	/* NULL: any inner value of its size */
};

/*
 * The layout of a numeric's header, from src/backend/utils/adt/numeric.c,
 * which keeps it private; it is on-disk format and has not changed since
 * PostgreSQL 14 added infinities.
 */
#define NUMERIC_SIGN_MASK		0xC000
#define NUMERIC_SHORT			0x8000
#define NUMERIC_SPECIAL			0xC000
#define NUMERIC_NAN				0xC000
#define NUMERIC_PINF			0xD000
#define NUMERIC_NINF			0xF000
#define NUMERIC_NBASE			10000

/* A varlena with a 1-byte header, copied with a 4-byte one (and aligned). */
typedef union ShortVarlenaCopy
{
	char		data[VARHDRSZ + 127];
	double		force_alignment;
	int64		force_alignment_int;
} ShortVarlenaCopy;


/* ----------------------------------------------------------------
 * Which types are checked, and how
 * ----------------------------------------------------------------
 */

/* The kind of check of base type typid (domains resolved by the caller). */
static ImageCheckKind
image_check_kind(Oid typid)
{
	HeapTuple	tuple;
	Form_pg_type type;
	ImageCheckKind kind = IMAGE_CHECK_UNKNOWN;

	switch (typid)
	{
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case JSONOID:
		case XMLOID:
		case REFCURSOROID:
			return IMAGE_CHECK_TEXT;
		case NAMEOID:
			return IMAGE_CHECK_NAME;
		case NUMERICOID:
			return IMAGE_CHECK_NUMERIC;
		case JSONBOID:
			return IMAGE_CHECK_JSONB;
		case INT2VECTOROID:
		case OIDVECTOROID:
			return IMAGE_CHECK_VECTOR;
		case INETOID:
		case CIDROID:
			return IMAGE_CHECK_INET;
		case BITOID:
		case VARBITOID:
			return IMAGE_CHECK_BIT;
		case PATHOID:
			return IMAGE_CHECK_PATH;
		case POLYGONOID:
			return IMAGE_CHECK_POLYGON;
		case BYTEAOID:
		case TIDOID:
		case MACADDROID:
		case MACADDR8OID:
		case TIMETZOID:
		case POINTOID:
		case LSEGOID:
		case BOXOID:
		case LINEOID:
		case CIRCLEOID:
		case INTERVALOID:
		case UUIDOID:
			return IMAGE_CHECK_ANY;
	}

	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for type %u", typid);
	type = (Form_pg_type) GETSTRUCT(tuple);

	/*
	 * Built-in by-value types read nothing but the Datum.  An extension's
	 * could still use it as an index or a pointer, so it is not trusted.
	 */
	if (type->typbyval && typid < FirstGenbkiObjectId)
		kind = IMAGE_CHECK_ANY;
	else if (type->typtype == TYPTYPE_BASE && IsTrueArrayType(type))
	{
		if (image_check_kind(getBaseType(type->typelem)) != IMAGE_CHECK_UNKNOWN)
			kind = IMAGE_CHECK_ARRAY;
	}
	else if (type->typtype == TYPTYPE_RANGE && typid < FirstGenbkiObjectId)
	{
		if (image_check_kind(getBaseType(get_range_subtype(typid))) != IMAGE_CHECK_UNKNOWN)
			kind = IMAGE_CHECK_RANGE;
	}
	ReleaseSysCache(tuple);
	return kind;
}

char *
image_check_signature(Oid typid)
{
	Oid			base = getBaseType(typid);
	ImageCheckKind kind;

	check_stack_depth();
	kind = image_check_kind(base);
	switch (kind)
	{
		case IMAGE_CHECK_UNKNOWN:
			return psprintf("type %s", format_type_be_qualified(base));
		case IMAGE_CHECK_ARRAY:
		case IMAGE_CHECK_VECTOR:
			return psprintf("%s[%s]", image_check_kind_names[kind],
							image_check_signature(get_element_type(base)));
		case IMAGE_CHECK_RANGE:
			/* a built-in range type's OID: the same in every database */
			return psprintf("%s(%u)", image_check_kind_names[kind], base);
		default:
			return pstrdup(image_check_kind_names[kind]);
	}
}

bool
image_check_covers_type(Oid typid)
{
	check_stack_depth();
	return image_check_kind(getBaseType(typid)) != IMAGE_CHECK_UNKNOWN;
}

const ImageCheck *
image_check_for_type(Oid typid)
{
	Oid			base = getBaseType(typid);
	ImageCheckKind kind;
	ImageCheck *check;

	check_stack_depth();
	kind = image_check_kind(base);
	if (kind == IMAGE_CHECK_ANY || kind == IMAGE_CHECK_UNKNOWN)
		return NULL;

	check = palloc0(sizeof(ImageCheck));
	check->kind = kind;
	check->typid = base;
	check->encoding = GetDatabaseEncoding();
	if (kind == IMAGE_CHECK_ARRAY || kind == IMAGE_CHECK_VECTOR ||
		kind == IMAGE_CHECK_RANGE)
	{
		check->inner_typid = kind == IMAGE_CHECK_RANGE ?
			get_range_subtype(base) : get_element_type(base);
		get_typlenbyvalalign(check->inner_typid, &check->inner_typlen,
							 &check->inner_typbyval, &check->inner_typalign);
		check->inner = image_check_for_type(check->inner_typid);
	}
	return check;
}

/* ----------------------------------------------------------------
 * Checks of one kind each
 * ----------------------------------------------------------------
 */

/* Characters valid in the database encoding, without a NUL. */
static const char *
check_text(const ImageCheck *check, const char *data, int64 length)
{
	if (!pg_verify_mbstr(check->encoding, data, (int) length, true))
		return "is text that is not valid in the database encoding";
	return NULL;
}

static const char *
check_numeric(const char *data, int64 length)
{
	uint16		header;
	int64		header_size;

	if (length < (int64) sizeof(uint16))
		return "is a numeric shorter than its header";
	memcpy(&header, data, sizeof(uint16));
	if ((header & NUMERIC_SIGN_MASK) == NUMERIC_SPECIAL)
	{
		/* NUMERIC_IS_NAN and the others compare the whole header */
		if ((header != NUMERIC_NAN && header != NUMERIC_PINF &&
			 header != NUMERIC_NINF) || length != (int64) sizeof(uint16))
			return "is a numeric with an invalid special value";
		return NULL;
	}
	header_size = (header & NUMERIC_SHORT) != 0 ? sizeof(uint16) :
		sizeof(uint16) + sizeof(int16);
	if (length < header_size || (length - header_size) % sizeof(int16) != 0)
		return "is a numeric whose digits do not fill it";
	for (int64 offset = header_size; offset < length; offset += sizeof(int16))
	{
		int16		digit;

		memcpy(&digit, data + offset, sizeof(int16));
		if (digit < 0 || digit >= NUMERIC_NBASE)
			return "is a numeric with a digit out of range";
	}
	return NULL;
}

static const char *
check_inet(const char *data, int64 length)
{
	const inet_struct *address = (const inet_struct *) data;
	int64		size = offsetof(inet_struct, ipaddr);

	if (length < size)
		return "is a network address shorter than its header";
	if (address->family == PGSQL_AF_INET)
		size += 4;
	else if (address->family == PGSQL_AF_INET6)
		size += 16;
	else
		return "is a network address of an unknown family";
	if (length != size ||
		address->bits > (address->family == PGSQL_AF_INET ? 32 : 128))
		return "is a network address of the wrong size";
	return NULL;
}

static const char *
check_bit_string(const char *data, int64 length)
{
	int32		bit_length;

	if (length < (int64) VARBITHDRSZ)
		return "is a bit string shorter than its header";
	memcpy(&bit_length, data, sizeof(int32));
	if (bit_length < 0 ||
		length - (int64) VARBITHDRSZ != ((int64) bit_length + BITS_PER_BYTE - 1) / BITS_PER_BYTE)
		return "is a bit string whose length disagrees with its size";
	if (bit_length % BITS_PER_BYTE != 0 &&
		((unsigned char) data[length - 1] &
		 ((1 << (BITS_PER_BYTE - bit_length % BITS_PER_BYTE)) - 1)) != 0)
		return "is a bit string with bits set past its end";
	return NULL;
}

/*
 * A path or polygon: npts points after a header of header_size bytes, at
 * least one (as path_recv and poly_recv insist: distance functions read the
 * first point of any).
 */
static const char *
check_points(const char *data, int64 length, int64 header_size)
{
	int32		points;

	if (length < header_size)
		return "is a geometric value shorter than its header";
	memcpy(&points, data, sizeof(int32));
	if (points < 1 || length != header_size + (int64) points * (int64) sizeof(Point))
		return "is a geometric value whose point count disagrees with its size";
	return NULL;
}

/*
 * One element of an array or bound of a range, at *position (before
 * alignment) in a value ending at end, as PostgreSQL steps over it: an
 * array's elements always start aligned (array_iter), a range's bounds as a
 * heap tuple's attributes (range_deserialize: a varlena whose first byte is
 * not zero has a 1-byte header and is not aligned).  *position moves past
 * it.
 */
static const char *
check_inner_value(const ImageCheck *check, const char **position,
				  const char *end)
{
	const char *value = *position;
	int64		size;

	if (check->kind != IMAGE_CHECK_RANGE || check->inner_typlen != -1 ||
		value >= end || *value == 0)
		value = (const char *) att_align_nominal((uintptr_t) value,
												 check->inner_typalign);
	if (value >= end)
		return "has an element past its end";

	if (check->inner_typlen > 0)
		size = check->inner_typlen;
	else if (check->inner_typlen == -2)
	{
		const char *nul = memchr(value, '\0', end - value);

		if (nul == NULL)
			return "has an element that is not a NUL-terminated string";
		size = nul - value + 1;
	}
	else if (VARATT_IS_1B_E(value))
		return "has an element that is an external TOAST pointer";
	else if (VARATT_IS_1B(value))
		size = VARSIZE_1B(value);
	else
	{
		if (end - value < VARHDRSZ || !VARATT_IS_4B_U(value))
			return "has an element with an invalid varlena header";
		size = VARSIZE_4B(value);
		if (size < VARHDRSZ)
			return "has an element with an invalid varlena header";
	}
	if (size > end - value)
		return "has an element past its end";
	if (check->inner != NULL)
	{
		const char *problem = image_check_value(check->inner, value, size);

		if (problem != NULL)
			return problem;
	}
	*position = value + size;
	return NULL;
}

/* An array (or a vector), with a 4-byte header, aligned. */
static const char *
check_array(const ImageCheck *check, const char *image, int64 length)
{
	const ArrayType *array = (const ArrayType *) image;
	int			dimensions;
	int64		items = 1;
	int64		data_offset;
	const bits8 *nulls = NULL;
	const char *position;
	const char *end = image + length;

	if (length < (int64) sizeof(ArrayType))
		return "is an array shorter than its header";
	dimensions = ARR_NDIM(array);
	if (dimensions < 0 || dimensions > MAXDIM)
		return "is an array with an invalid number of dimensions";
	if (ARR_ELEMTYPE(array) != check->inner_typid)
		return "is an array of another element type";
	if (length < (int64) (sizeof(ArrayType) + 2 * sizeof(int) * dimensions))
		return "is an array shorter than its header";
	for (int d = 0; d < dimensions; d++)
	{
		int			upper;

		if (ARR_DIMS(array)[d] < 0 ||
			pg_add_s32_overflow(ARR_LBOUND(array)[d], ARR_DIMS(array)[d], &upper))
			return "is an array with invalid bounds";
		items *= ARR_DIMS(array)[d];
		if (items > (int64) MaxArraySize)
			return "is an array with too many elements";
	}
	if (dimensions == 0)
		items = 0;
	if (check->kind == IMAGE_CHECK_VECTOR &&
		(dimensions != 1 || ARR_HASNULL(array) || ARR_LBOUND(array)[0] != 0))
		return "is a vector that is not a one-dimensional array without nulls";

	if (ARR_HASNULL(array))
	{
		data_offset = ARR_OVERHEAD_WITHNULLS(dimensions, items);
		if (array->dataoffset != data_offset || dimensions == 0)
			return "is an array with an invalid data offset";
		nulls = ARR_NULLBITMAP(array);
	}
	else
		data_offset = ARR_OVERHEAD_NONULLS(dimensions);
	if (data_offset > length)
		return "is an array shorter than its header";

	/*
	 * The elements fill the data area exactly, each padded to the element
	 * alignment, as construct_md_array sizes it: bytes after them would be
	 * taken for elements by array_cat and the functions that set elements.
	 */
	position = image + data_offset;
	if (check->inner == NULL && check->inner_typlen > 0 && nulls == NULL &&
		check->inner_typlen % att_align_nominal(1, check->inner_typalign) == 0)
		return items * check->inner_typlen > length - data_offset ?
			"has an element past its end" :
			items * check->inner_typlen < length - data_offset ?
			"has elements that do not fill it exactly" : NULL;
	for (int64 i = 0; i < items; i++)
	{
		const char *problem;

		if (nulls != NULL && (nulls[i / 8] & (1 << (i % 8))) == 0)
			continue;
		problem = check_inner_value(check, &position, end);
		if (problem != NULL)
			return problem;
	}
	if ((const char *) att_align_nominal((uintptr_t) position,
										 check->inner_typalign) != end)
		return "has elements that do not fill it exactly";
	return NULL;
}

/* A range, with a 4-byte header, aligned. */
static const char *
check_range(const ImageCheck *check, const char *image, int64 length)
{
	const RangeType *range = (const RangeType *) image;
	const char *position = image + sizeof(RangeType);
	const char *end = image + length - 1;
	char		flags;
	const char *problem;

	if (length < (int64) sizeof(RangeType) + 1)
		return "is a range shorter than its header";
	if (range->rangetypid != check->typid)
		return "is a range of another type";
	flags = *end;
	if ((flags & (RANGE_LB_NULL | RANGE_UB_NULL | RANGE_CONTAIN_EMPTY)) != 0 ||
		((flags & RANGE_EMPTY) != 0 && flags != RANGE_EMPTY))
		return "is a range with invalid flags";
	if (RANGE_HAS_LBOUND(flags) &&
		(problem = check_inner_value(check, &position, end)) != NULL)
		return problem;
	if (RANGE_HAS_UBOUND(flags) &&
		(problem = check_inner_value(check, &position, end)) != NULL)
		return problem;
	return NULL;
}

/*
 * A jsonb container of length bytes (4-byte aligned), as getJsonbOffset,
 * getJsonbLength and fillJsonbValue read it: entries within the data area,
 * object keys strings in jsonb's order, numerics and nested containers
 * 4-byte aligned with whole 4-byte varlena headers.  Only the top container
 * may be a scalar's one-element array.
 */
static const char *
check_jsonb_container(const ImageCheck *check, const char *container,
					  int64 length, bool top)
{
	uint32		header;
	uint32		count;
	uint32		flags;
	int64		entries;
	const JEntry *children = (const JEntry *) (container + sizeof(uint32));
	const char *data;
	int64		data_length;
	int64		offset = 0;
	const char *previous_key = NULL;
	int64		previous_key_length = 0;

	check_stack_depth();
	if (length < (int64) sizeof(uint32))
		return "is a jsonb with a container shorter than its header";
	memcpy(&header, container, sizeof(uint32));
	count = header & JB_CMASK;
	flags = header & ~JB_CMASK;
	if (flags == JB_FOBJECT)
		entries = (int64) count * 2;
	else if (flags == JB_FARRAY || (top && flags == (JB_FARRAY | JB_FSCALAR) && count == 1))
		entries = count;
	else
		return "is a jsonb with a container of an unknown kind";
	if (entries * (int64) sizeof(JEntry) > length - (int64) sizeof(uint32))
		return "is a jsonb whose entries run past its end";
	data = container + sizeof(uint32) + entries * sizeof(JEntry);
	data_length = length - sizeof(uint32) - entries * sizeof(JEntry);

	for (int64 i = 0; i < entries; i++)
	{
		JEntry		entry = children[i];
		int64		end = JBE_HAS_OFF(entry) ? JBE_OFFLENFLD(entry) :
		offset + JBE_OFFLENFLD(entry);
		const char *value = data + offset;
		int64		value_length = end - offset;
		int64		padding = INTALIGN(offset) - offset;
		const char *problem = NULL;

		if (end < offset || end > data_length)
			return "is a jsonb whose entries run past its end";
		if (flags == JB_FOBJECT && i < count && !JBE_ISSTRING(entry))
			return "is a jsonb object with a key that is not a string";
		if (flags != JB_FOBJECT && (flags & JB_FSCALAR) != 0 && JBE_ISCONTAINER(entry))
			return "is a jsonb scalar that is a container";

		switch (entry & JENTRY_TYPEMASK)
		{
			case JENTRY_ISSTRING:
				problem = check_text(check, value, value_length);
				if (problem == NULL && flags == JB_FOBJECT && i < count)
				{
					/* keys ascend by length, then bytes (jsonb's own order) */
					if (previous_key != NULL &&
						(value_length < previous_key_length ||
						 (value_length == previous_key_length &&
						  memcmp(previous_key, value, value_length) >= 0)))
						return "is a jsonb object whose keys are out of order";
					previous_key = value;
					previous_key_length = value_length;
				}
				break;
			case JENTRY_ISNUMERIC:
				if (padding > value_length ||
					value_length - padding < VARHDRSZ ||
					!VARATT_IS_4B_U(value + padding) ||
					VARSIZE_4B(value + padding) != value_length - padding)
					return "is a jsonb with an invalid number";
				problem = check_numeric(value + padding + VARHDRSZ,
										value_length - padding - VARHDRSZ);
				break;
			case JENTRY_ISCONTAINER:
				if (padding > value_length)
					return "is a jsonb whose entries run past its end";
				problem = check_jsonb_container(check, value + padding,
												value_length - padding, false);
				break;
			case JENTRY_ISBOOL_FALSE:
			case JENTRY_ISBOOL_TRUE:
			case JENTRY_ISNULL:
				break;
			default:
				return "is a jsonb with an entry of an unknown type";
		}
		if (problem != NULL)
			return problem;
		offset = end;
	}
	return NULL;
}

/* ----------------------------------------------------------------
 * Entry point
 * ----------------------------------------------------------------
 */

/*
 * A varlena image as the type's functions see it: itself when it has a
 * 4-byte header (the decoder keeps those aligned per the type), else the
 * aligned 4-byte-header copy detoasting would make, in *copy.
 */
static const char *
varlena_as_read(const char *image, ShortVarlenaCopy *copy)
{
	Size		data_length;

	if (!VARATT_IS_1B(image))
		return image;
	data_length = VARSIZE_1B(image) - VARHDRSZ_SHORT;
	SET_VARSIZE(copy->data, data_length + VARHDRSZ);
	memcpy(copy->data + VARHDRSZ, image + VARHDRSZ_SHORT, data_length);
	return copy->data;
}

const char *
image_check_value(const ImageCheck *check, const char *image, int64 length)
{
	ShortVarlenaCopy copy;
	const char *value;

	if (check->kind == IMAGE_CHECK_NAME)
	{
		const char *nul = memchr(image, '\0', Min(length, NAMEDATALEN));

		if (nul == NULL)
			return "is a name without a terminating NUL";
		return check_text(check, image, nul - image);
	}

	/* every other kind is a varlena whose framing the caller checked */
	switch (check->kind)
	{
		case IMAGE_CHECK_TEXT:
			return check_text(check, VARDATA_ANY(image), VARSIZE_ANY_EXHDR(image));
		case IMAGE_CHECK_NUMERIC:
			return check_numeric(VARDATA_ANY(image), VARSIZE_ANY_EXHDR(image));
		case IMAGE_CHECK_INET:
			return check_inet(VARDATA_ANY(image), VARSIZE_ANY_EXHDR(image));
		case IMAGE_CHECK_BIT:
			return check_bit_string(VARDATA_ANY(image), VARSIZE_ANY_EXHDR(image));
		case IMAGE_CHECK_PATH:
			return check_points(VARDATA_ANY(image), VARSIZE_ANY_EXHDR(image),
								offsetof(PATH, p) - VARHDRSZ);
		case IMAGE_CHECK_POLYGON:
			return check_points(VARDATA_ANY(image), VARSIZE_ANY_EXHDR(image),
								offsetof(POLYGON, p) - VARHDRSZ);
		default:
			break;
	}

	/*
	 * A vector's functions take it without detoasting (its storage is plain,
	 * so PostgreSQL never gives it a 1-byte header): it must have its 4-byte
	 * header already.
	 */
	if (check->kind == IMAGE_CHECK_VECTOR && VARATT_IS_1B(image))
		return "is a vector with a 1-byte header";
	value = varlena_as_read(image, &copy);
	switch (check->kind)
	{
		case IMAGE_CHECK_JSONB:
			return check_jsonb_container(check, value + VARHDRSZ,
										 VARSIZE(value) - VARHDRSZ, true);
		case IMAGE_CHECK_ARRAY:
		case IMAGE_CHECK_VECTOR:
			return check_array(check, value, VARSIZE(value));
		case IMAGE_CHECK_RANGE:
			return check_range(check, value, VARSIZE(value));
		default:
			break;
	}
	elog(ERROR, "unexpected image check kind %d", (int) check->kind);
	return NULL;
}
