/*-------------------------------------------------------------------------
 *
 * json_doc.c
 *		Parse and build the JSON documents of a store with PostgreSQL's own
 *		JSON machinery.
 *
 * Parsing goes through two steps: pg_parse_json() with the null semantic
 * actions checks the text without throwing, so that malformed input becomes
 * our own "object is corrupt" error naming the object; only then is the
 * text converted with jsonb_in(), which cannot fail any more, and read
 * through the jsonb container API.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "port/pg_crc32c.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/numeric.h"

#include "rollout/json_doc.h"

/*
 * Report a document that does not say what this code wrote.
 */
void
json_doc_corrupt(const JsonDoc *doc, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("object \"%s\" is corrupt", doc->object_name),
			 errdetail("%s", detail)));
	pg_unreachable();
}

/*
 * A sealed document ends with this, eight hex digits of the CRC32C of the
 * text before it, and "}".  Segments checksum every part (FORMAT.md); the
 * JSON documents that say which segments make up a store would otherwise be
 * the one thing read unchecked, where a flipped digit of a position or a
 * stamp hides rows without an error.
 */
#define JSON_SEAL_MEMBER	", \"crc32c\": \""
#define JSON_SEAL_LENGTH	(sizeof(JSON_SEAL_MEMBER) - 1 + 8 + 2)

static pg_crc32c
json_seal_crc(const char *text, int len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, text, len);
	FIN_CRC32C(crc);
	return crc;
}

/* See json_doc.h. */
void
json_doc_seal(StringInfo buf)
{
	Assert(buf->len > 0 && buf->data[buf->len - 1] == '}');
	buf->data[--buf->len] = '\0';
	appendStringInfo(buf, "%s%08x\"}", JSON_SEAL_MEMBER,
					 (unsigned int) json_seal_crc(buf->data, buf->len));
}

/*
 * Check the seal of a document that has one.  A document without one was
 * written by a build that did not seal it, or is not of a sealed kind; one
 * that names a crc32c member anywhere else has a damaged seal.
 */
static void
json_doc_check_seal(const JsonDoc *doc, const char *text, int len)
{
	int			body_length = len - (int) JSON_SEAL_LENGTH;
	const char *seal;
	unsigned int stored;
	char		tail[3];
	pg_crc32c	crc;

	if (body_length < 0 ||
		memcmp(&text[body_length], JSON_SEAL_MEMBER, sizeof(JSON_SEAL_MEMBER) - 1) != 0)
	{
		if (strstr(text, "\"crc32c\": ") != NULL)
			json_doc_corrupt(doc, "Its checksum is not where it belongs.");
		return;
	}
	seal = &text[body_length] + sizeof(JSON_SEAL_MEMBER) - 1;
	if (strspn(seal, "0123456789abcdef") != 8 ||
		sscanf(seal, "%8x%2c", &stored, tail) != 2 ||
		tail[0] != '"' || tail[1] != '}')
		json_doc_corrupt(doc, "Its checksum is not eight hexadecimal digits.");
	crc = json_seal_crc(text, body_length);
	if (crc != stored)
		json_doc_corrupt(doc, psprintf("Its text does not match its checksum (CRC32C %08x, stored %08x).",
									   (unsigned int) crc, stored));
}

/*
 * Parse text as a JSON object.
 */
JsonDoc *
json_doc_parse(const char *text, int len, const char *object_name)
{
	JsonDoc    *doc = palloc0(sizeof(JsonDoc));
	char	   *copy = pnstrdup(text, len);
	JsonLexContext *lex;
	JsonParseErrorType result;
	Jsonb	   *jb;

	doc->object_name = pstrdup(object_name);

	/* jsonb_in would stop at a NUL byte; a document with one is not ours */
	if (strlen(copy) != (size_t) len)
		json_doc_corrupt(doc, "The document contains a NUL byte.");
	json_doc_check_seal(doc, copy, len);

	lex = makeJsonLexContextCstringLen(copy, len, GetDatabaseEncoding(), true);
	result = pg_parse_json(lex, &nullSemAction);

	/*
	 * Where, not what: the text came from the object store, and an endpoint
	 * its server's owner chose may answer with any service's reply, which an
	 * error must not pass on.
	 */
	if (result != JSON_SUCCESS)
		json_doc_corrupt(doc, psprintf("It is not valid JSON (at byte %d).",
									   lex->token_start != NULL
									   ? (int) (lex->token_start - lex->input) : 0));

	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(copy)));
	if (!JB_ROOT_IS_OBJECT(jb))
		json_doc_corrupt(doc, "The document is not a JSON object.");
	doc->root = &jb->root;
	return doc;
}

/* Look up a member; NULL if absent. */
static JsonbValue *
json_doc_member(JsonbContainer *obj, const char *member)
{
	return getKeyJsonValueFromContainer(obj, member, strlen(member), NULL);
}

static void
json_doc_missing(const JsonDoc *doc, const char *member)
{
	json_doc_corrupt(doc, psprintf("Member \"%s\" is missing.", member));
}

/*
 * A member's int64 value.  A JSON null counts as absent.  A number not written
 * as an integer (even 1.0) or outside the int64 range is the corrupt-object
 * error, never rounded or truncated.
 */
int64
json_doc_int64(const JsonDoc *doc, JsonbContainer *obj, const char *member,
			   bool required, int64 default_value)
{
	JsonbValue *v = json_doc_member(obj, member);
	char	   *digits;
	char	   *end;
	long long	result;

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			json_doc_missing(doc, member);
		return default_value;
	}
	if (v->type != jbvNumeric)
		json_doc_corrupt(doc, psprintf("Member \"%s\" is not a number.", member));

	/*
	 * Go through the text form: numeric_int8() would throw its own error on a
	 * fraction or an overflow, and we want ours naming the object.
	 */
	digits = DatumGetCString(DirectFunctionCall1(numeric_out,
												 NumericGetDatum(v->val.numeric)));
	errno = 0;
	result = strtoll(digits, &end, 10);
	if (errno != 0 || *end != '\0' || end == digits)
		json_doc_corrupt(doc, psprintf("Member \"%s\" is not a 64-bit integer.", member));
	return (int64) result;
}

/*
 * A string member as a palloc'd, NUL-terminated copy (jsonb strings are not
 * terminated), or NULL when it is absent or JSON null and not required.
 */
char *
json_doc_text(const JsonDoc *doc, JsonbContainer *obj, const char *member,
			  bool required)
{
	JsonbValue *v = json_doc_member(obj, member);

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			json_doc_missing(doc, member);
		return NULL;
	}
	if (v->type != jbvString)
		json_doc_corrupt(doc, psprintf("Member \"%s\" is not a string.", member));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * A boolean member: only JSON true or false, never a string or number that
 * looks like one.  A JSON null counts as absent.
 */
bool
json_doc_bool(const JsonDoc *doc, JsonbContainer *obj, const char *member,
			  bool required, bool default_value)
{
	JsonbValue *v = json_doc_member(obj, member);

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			json_doc_missing(doc, member);
		return default_value;
	}
	if (v->type != jbvBool)
		json_doc_corrupt(doc, psprintf("Member \"%s\" is not a boolean.", member));
	return v->val.boolean;
}

/*
 * An array (want_array) or object member's container, pointing into the
 * document.  A jsonb binary value may be either, so its kind is checked as
 * well.  A JSON null counts as absent.
 */
JsonbContainer *
json_doc_container(const JsonDoc *doc, JsonbContainer *obj, const char *member,
				   bool required, bool want_array)
{
	JsonbValue *v = json_doc_member(obj, member);
	JsonbContainer *c;

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			json_doc_missing(doc, member);
		return NULL;
	}
	if (v->type != jbvBinary)
		json_doc_corrupt(doc, psprintf("Member \"%s\" is not an %s.", member,
									   want_array ? "array" : "object"));
	c = v->val.binary.data;
	if (want_array ? !JsonContainerIsArray(c) : !JsonContainerIsObject(c))
		json_doc_corrupt(doc, psprintf("Member \"%s\" is not an %s.", member,
									   want_array ? "array" : "object"));
	return c;
}

int
json_doc_array_length(JsonbContainer *array)
{
	return JsonContainerSize(array);
}

/*
 * Element index of array, which must be an object: the arrays of our documents
 * hold only objects.  An index past the end is reported as corrupt in the same
 * way.
 */
JsonbContainer *
json_doc_array_object(const JsonDoc *doc, JsonbContainer *array, int index)
{
	JsonbValue *v = getIthJsonbValueFromContainer(array, index);

	if (v == NULL || v->type != jbvBinary ||
		!JsonContainerIsObject(v->val.binary.data))
		json_doc_corrupt(doc, psprintf("Array element %d is not an object.", index));
	return v->val.binary.data;
}

/*
 * Append member as a JSON string and its colon, after a comma unless *first
 * says this is the object's first member (and clear *first).  Every
 * json_append_member_* starts here.
 */
static void
json_append_key(StringInfo buf, bool *first, const char *member)
{
	if (!*first)
		appendStringInfoString(buf, ", ");
	*first = false;
	escape_json(buf, member);
	appendStringInfoString(buf, ": ");
}

/*
 * Append "member": value, value escaped as a JSON string.  A NULL value is
 * written as JSON null, which the readers take for an absent member.
 */
void
json_append_member_text(StringInfo buf, bool *first, const char *member,
						const char *value)
{
	json_append_key(buf, first, member);
	if (value == NULL)
		appendStringInfoString(buf, "null");
	else
		escape_json(buf, value);
}

void
json_append_member_int64(StringInfo buf, bool *first, const char *member,
						 int64 value)
{
	json_append_key(buf, first, member);
	appendStringInfo(buf, INT64_FORMAT, value);
}

void
json_append_member_raw(StringInfo buf, bool *first, const char *member,
					   const char *raw_json)
{
	json_append_key(buf, first, member);
	appendStringInfoString(buf, raw_json);
}
