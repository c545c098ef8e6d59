/*-------------------------------------------------------------------------
 *
 * portable_values.h
 *		Values that mean the same in every database and cluster.
 *
 * A store is shared by databases and clusters whose catalogs differ, so a
 * value must not depend on the OIDs of the database that wrote it.  Most
 * types' datum images do not (numbers, text, jsonb, uuid, timestamps,
 * arrays and ranges of built-in types), and they are stored as images.  An
 * enum value is the OID of its label, a composite value carries its row
 * type's OID, an array or range of a user-defined type its element or range
 * type's OID: those are stored in their canonical text form and parsed by
 * the reading database's input function, which resolves labels, attributes
 * and element types by name.  So are values of types whose images
 * rollout_fdw cannot check before reading them (image_check.h: extensions'
 * types, multiranges, tsvector...).  The reg* types (regclass...) are
 * object OIDs by definition and cannot be stored at all.  docs/FORMAT.md,
 * "Column encodings".
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_PORTABLE_VALUES_H
#define ROLLOUT_PORTABLE_VALUES_H

#include "fmgr.h"

/* How a column's values are kept in segments, WAL entries and memtable. */
typedef enum PortableEncoding
{
	PORTABLE_IMAGE,				/* the datum image, as PostgreSQL stores it */
	PORTABLE_TEXT,				/* the type's text output, as text */
	PORTABLE_REFUSED			/* no database-independent form */
} PortableEncoding;

/* The names _store.json records ("image", "text"). */
extern const char *portable_encoding_name(PortableEncoding encoding);

/*
 * How values of type typid (domains, arrays, ranges and composites looked
 * into) are kept.  For PORTABLE_REFUSED, *why (if not NULL) receives a
 * sentence for an errdetail.
 */
extern PortableEncoding portable_type_encoding(Oid typid, char **why);

/*
 * The encoding versions before 0.10 chose: images also for types whose
 * images cannot be checked.  Stores they created may keep such columns as
 * images, which only trusted stores may serve (RolloutStoreSpec).
 */
extern PortableEncoding portable_type_encoding_unchecked(Oid typid);

/*
 * Does the order of typid's values depend on the database's collation
 * (jsonb, arrays and domains of it)?  Such a type cannot be a store's key,
 * and its statistics rule out nothing.
 */
extern bool portable_type_order_is_local(Oid typid);

/* What a column needs to convert its values (text-encoded columns only). */
typedef struct PortableCodec
{
	PortableEncoding encoding;
	Oid			typid;			/* the table column's type */
	FmgrInfo	output;			/* its output function */
	FmgrInfo	input;			/* its base type's input function */
	Oid			input_ioparam;
	int32		input_typmod;
} PortableCodec;

/* Fill in a codec for a column of typid/typmod (lookups in CurrentMemoryContext). */
extern void portable_codec_init(PortableCodec *codec, PortableEncoding encoding,
								Oid typid, int32 typmod);

/*
 * Writing text-encoded values: between begin and end the settings that
 * change text output (DateStyle, IntervalStyle, extra_float_digits) are
 * fixed to values whose output any database parses back exactly, as
 * postgres_fdw does for the values it sends.  An ERROR in between undoes
 * them with the (sub)transaction.
 */
extern int	portable_encode_begin(void);
extern void portable_encode_end(int nest_level);

/* A value of the column as stored (text), palloc'd in CurrentMemoryContext. */
extern Datum portable_encode(PortableCodec *codec, Datum value);

/*
 * A stored value (text) as a value of the column's type.  The settings that
 * change what input functions make of a text (array_nulls, xmloption) are
 * fixed for the call when the session has them otherwise.  A text the input
 * function refuses is an ERROR that does not quote it: the caller may not be
 * allowed to read that column (an UPDATE, an ANALYZE decode whole rows).
 */
extern Datum portable_decode(PortableCodec *codec, Datum stored);

#endif							/* ROLLOUT_PORTABLE_VALUES_H */
