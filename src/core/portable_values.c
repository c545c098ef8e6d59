/*-------------------------------------------------------------------------
 *
 * portable_values.c
 *		Decide how a column's values are kept so that they mean the same in
 *		every database, and convert the values that need text.
 *
 * The segment format keeps PostgreSQL datum images (docs/FORMAT.md).  An
 * image is database-independent unless it embeds the OID of a catalog row
 * of its database:
 *	- an enum value is the OID of its label in pg_enum;
 *	- a composite value carries the OID of its row type;
 *	- an array carries its element type's OID, a range (multirange) its
 *	  range type's: fixed for built-in types, different in every database
 *	  for user-defined ones;
 *	- a domain's value is its base type's;
 *	- an aclitem holds role OIDs (the same in every database of a cluster,
 *	  not in another cluster);
 *	- the reg* types are object OIDs by definition.
 * Images of the first four kinds would be read in another database (after
 * pg_dump and restore, or by a second database or cluster sharing the
 * store) as whatever that database has under the OID: an error at best, a
 * wrong value or a misread row at worst.  Their values are therefore kept
 * in the type's canonical text form, written by the type's output function
 * and read back by the reading database's input function, which resolves
 * labels, attributes and element types by name.  Binary send/receive would
 * not do: record_send and array_send embed OIDs too, and their receive
 * functions insist on them.  reg* values have no database-independent form
 * at all, and a column of such a type (or containing one) is refused.
 *
 * A type whose images format/image_check.c cannot check (an extension's, a
 * multirange, tsvector...) is kept as text too, even where its image is
 * database-independent: a store's objects may come from whoever can write
 * where it lives, and only what the reader can check, or parse with the
 * type's input function, is safe to hand to the type's functions.
 *
 * Text output depends on a few settings (DateStyle for dates and times
 * inside composites and arrays, IntervalStyle, extra_float_digits), which
 * are fixed while values are encoded, as postgres_fdw does when it sends
 * values to another server.  What is then written (ISO dates, postgres-style
 * intervals, shortest exact floats) is parsed back exactly whatever those
 * settings are.  Input depends on two settings that output does not:
 * array_nulls (off, a bare NULL element is the string "NULL") and xmloption
 * (document refuses a fragment).  Decoding fixes them to what output assumes
 * (on, content) where a session has them otherwise; else an UPDATE under
 * array_nulls = off would write its NULL elements back as strings.
 *
 * lc_monetary is not fixed: money inside a composite, array or range is
 * written and read in the session's monetary locale, as before 7 Dec 2026
 * (C and en_US write the same); a reader under a locale whose format
 * differs gets an error, never another value.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgroids.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/xml.h"

#include "rollout/image_check.h"
#include "rollout/portable_values.h"

/*
 * The name _store.json records for an encoding, used in messages too.
 * "refused" never reaches a store: a column that needs it is refused when the
 * store is opened, before _store.json is written.  An unknown value falls to
 * it as well.
 */
const char *
portable_encoding_name(PortableEncoding encoding)
{
	switch (encoding)
	{
		case PORTABLE_IMAGE:
			return "image";
		case PORTABLE_TEXT:
			return "text";
		case PORTABLE_REFUSED:
			break;
	}
	return "refused";
}

/* The object-identifier types, whose values name catalog rows. */
static bool
portable_is_reg_type(Oid typid)
{
	switch (typid)
	{
		case REGPROCOID:
		case REGPROCEDUREOID:
		case REGOPEROID:
		case REGOPERATOROID:
		case REGCLASSOID:
		case REGCOLLATIONOID:
		case REGTYPEOID:
		case REGROLEOID:
		case REGNAMESPACEOID:
		case REGCONFIGOID:
		case REGDICTIONARYOID:
			return true;
		default:
			return false;
	}
}

/*
 * The encoding a value of typid needs: IMAGE when its image holds no
 * database-specific OID, TEXT when it does, REFUSED when even its text is
 * an OID (reg* types), looking into domains, arrays, ranges and composites;
 * with checked_images_only, also TEXT when the image cannot be checked.
 * Built-in types have the same OIDs in every database and cluster: an
 * array or range of them is an image like any other.
 */
static PortableEncoding
portable_walk(Oid typid, bool checked_images_only, char **why)
{
	HeapTuple	tuple;
	Form_pg_type type;
	PortableEncoding result = PORTABLE_IMAGE;

	check_stack_depth();
	if (portable_is_reg_type(typid))
	{
		if (why != NULL)
			*why = psprintf("Values of type %s are OIDs of database objects, which name other objects, or none, in another database.",
							format_type_be(typid));
		return PORTABLE_REFUSED;
	}

	/* an ACL item names roles by OID; its text form names them by name */
	if (typid == ACLITEMOID)
		return PORTABLE_TEXT;

	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for type %u", typid);
	type = (Form_pg_type) GETSTRUCT(tuple);

	switch (type->typtype)
	{
		case TYPTYPE_DOMAIN:
			result = portable_walk(type->typbasetype, checked_images_only, why);
			break;
		case TYPTYPE_ENUM:
			result = PORTABLE_TEXT;
			break;
		case TYPTYPE_COMPOSITE:
			{
				TupleDesc	desc = lookup_rowtype_tupdesc(typid, -1);

				result = PORTABLE_TEXT;
				for (int i = 0; i < desc->natts && result != PORTABLE_REFUSED; i++)
				{
					Form_pg_attribute attr = TupleDescAttr(desc, i);

					if (!attr->attisdropped &&
						portable_walk(attr->atttypid, checked_images_only, why) == PORTABLE_REFUSED)
						result = PORTABLE_REFUSED;
				}
				ReleaseTupleDesc(desc);
				break;
			}
		case TYPTYPE_RANGE:
			result = portable_walk(get_range_subtype(typid), checked_images_only,
								   why);
			if (result != PORTABLE_REFUSED && typid >= FirstNormalObjectId)
				result = PORTABLE_TEXT;
			break;
		case TYPTYPE_MULTIRANGE:
			result = portable_walk(get_multirange_range(typid), checked_images_only,
								   why);
			if (result != PORTABLE_REFUSED && typid >= FirstNormalObjectId)
				result = PORTABLE_TEXT;
			break;
		case TYPTYPE_BASE:
			if (IsTrueArrayType(type))
			{
				result = portable_walk(type->typelem, checked_images_only, why);
				if (result != PORTABLE_REFUSED && type->typelem >= FirstNormalObjectId)
					result = PORTABLE_TEXT;
			}
			break;
		default:
			break;
	}
	ReleaseSysCache(tuple);

	if (result == PORTABLE_IMAGE && checked_images_only &&
		!image_check_covers_type(typid))
		result = PORTABLE_TEXT;
	return result;
}

PortableEncoding
portable_type_encoding(Oid typid, char **why)
{
	return portable_walk(typid, true, why);
}

PortableEncoding
portable_type_encoding_unchecked(Oid typid)
{
	return portable_walk(typid, false, NULL);
}

/*
 * Does the order of typid's values depend on the database?  Every key and
 * statistic of a store is compared in one order: the type's default btree
 * comparison, under the "C" collation for collatable types (format/
 * datum_codec.c).  jsonb ignores that collation: it orders its strings by
 * the database's default collation, so two databases (or clusters) with
 * different collations order the same jsonb values differently.  Arrays and
 * domains of jsonb inherit that.  (A range or composite over jsonb is kept
 * as text and never compared.)
 */
bool
portable_type_order_is_local(Oid typid)
{
	HeapTuple	tuple;
	Form_pg_type type;
	bool		local = false;

	check_stack_depth();
	if (typid == JSONBOID)
		return true;
	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for type %u", typid);
	type = (Form_pg_type) GETSTRUCT(tuple);
	if (type->typtype == TYPTYPE_DOMAIN)
		local = portable_type_order_is_local(type->typbasetype);
	else if (type->typtype == TYPTYPE_BASE && IsTrueArrayType(type))
		local = portable_type_order_is_local(type->typelem);
	ReleaseSysCache(tuple);
	return local;
}

/*
 * Only a text-encoded column gets functions; an image column's codec just
 * records its encoding and type, and portable_encode and portable_decode must
 * not be called with it.  The FmgrInfos are set up in CurrentMemoryContext, so
 * the codec lasts as long as that context.
 */
void
portable_codec_init(PortableCodec *codec, PortableEncoding encoding,
					Oid typid, int32 typmod)
{
	Oid			output_function;
	bool		output_varlena;
	Oid			input_function;
	Oid			base;

	memset(codec, 0, sizeof(PortableCodec));
	codec->encoding = encoding;
	codec->typid = typid;
	if (encoding != PORTABLE_TEXT)
		return;
	getTypeOutputInfo(typid, &output_function, &output_varlena);
	fmgr_info(output_function, &codec->output);

	/*
	 * Parse with the base type's input function: a domain's constraints were
	 * checked when the value was written, and checking them again on every
	 * read would make a store unreadable where they differ.
	 */
	codec->input_typmod = typmod;
	base = getBaseTypeAndTypmod(typid, &codec->input_typmod);
	getTypeInputInfo(base, &input_function, &codec->input_ioparam);
	fmgr_info(input_function, &codec->input);
}

/*
 * Fix DateStyle, IntervalStyle and extra_float_digits for encoding, as
 * postgres_fdw's set_transmission_modes does: each one that differs is set
 * with GUC_ACTION_SAVE in a new GUC nest level, which portable_encode_end (or
 * an abort) pops.  Returns that nest level.
 */
int
portable_encode_begin(void)
{
	int			nest_level = NewGUCNestLevel();

	if (DateStyle != USE_ISO_DATES)
		(void) set_config_option("datestyle", "ISO", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	if (IntervalStyle != INTSTYLE_POSTGRES)
		(void) set_config_option("intervalstyle", "postgres", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (extra_float_digits < 3)
		(void) set_config_option("extra_float_digits", "3", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nest_level;
}

void
portable_encode_end(int nest_level)
{
	AtEOXact_GUC(true, nest_level);
}

Datum
portable_encode(PortableCodec *codec, Datum value)
{
	Assert(codec->encoding == PORTABLE_TEXT);
	return PointerGetDatum(cstring_to_text(OutputFunctionCall(&codec->output,
															  value)));
}

/*
 * Fix array_nulls and xmloption for one decode, where the session has them
 * otherwise: a new GUC nest level, which the caller pops with AtEOXact_GUC
 * (an ERROR pops it with the (sub)transaction).  Returns that nest level, or
 * -1 when nothing needed fixing, which is the common case and costs nothing.
 */
static int
portable_decode_begin(void)
{
	int			nest_level;

	if (Array_nulls && xmloption == XMLOPTION_CONTENT)
		return -1;
	nest_level = NewGUCNestLevel();
	if (!Array_nulls)
		(void) set_config_option("array_nulls", "on", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	if (xmloption != XMLOPTION_CONTENT)
		(void) set_config_option("xmloption", "content", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nest_level;
}

Datum
portable_decode(PortableCodec *codec, Datum stored)
{
	char	   *stored_text = text_to_cstring(DatumGetTextPP(stored));
	volatile int nest_level = portable_decode_begin();
	MemoryContext oldcontext = CurrentMemoryContext;
	Datum		value = (Datum) 0;

	Assert(codec->encoding == PORTABLE_TEXT);
	PG_TRY();
	{
		value = InputFunctionCall(&codec->input, stored_text, codec->input_ioparam,
								  codec->input_typmod);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/*
		 * A cancel, a shutdown, a lack of resources, a deadlock or a lock
		 * timeout (a domain check's function may take locks) goes on as it
		 * is; every other error is the input function refusing the text (data
		 * exceptions, but also syntax errors, as tsvector's, or an elog of an
		 * extension's type), and its message may quote it.
		 */
		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_TRANSACTION_ROLLBACK ||
			edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_INSUFFICIENT_RESOURCES ||
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_PROGRAM_LIMIT_EXCEEDED ||
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION ||
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_SYSTEM_ERROR)
			PG_RE_THROW();
		FlushErrorState();

		/* the input function's message quotes the text: leave it out */
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a stored value of type %s could not be read",
						format_type_be(codec->typid)),
				 errdetail("The type's input function refused the value's stored text form."),
				 errhint("Values of a type that is not built in are kept as text and read back with the reading database's definition of the type, which must accept them.")));
	}
	PG_END_TRY();
	if (nest_level >= 0)
		AtEOXact_GUC(true, nest_level);
	return value;
}
