/*-------------------------------------------------------------------------
 *
 * json_doc.h
 *		Reading the small JSON documents of a store (_store.json, manifests,
 *		WAL entry metadata) with PostgreSQL's own JSON parser.
 *
 * A document that is not valid JSON, or lacks a required member, or has a
 * member of the wrong kind, is an ERROR naming the object it came from
 * (ERRCODE_DATA_CORRUPTED): these objects are written only by this code, so
 * anything else means corruption or a foreign object.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_JSON_DOC_H
#define ROLLOUT_JSON_DOC_H

#include "utils/jsonb.h"

typedef struct JsonDoc
{
	const char *object_name;	/* for error messages */
	JsonbContainer *root;
} JsonDoc;

/*
 * Parse text (of length len) as a JSON object; ERROR if it is not one, or
 * if it is sealed (json_doc_seal) and its text does not match its seal.
 */
extern JsonDoc *json_doc_parse(const char *text, int len, const char *object_name);

/*
 * Seal the JSON object in buf (its text ends with its closing brace): add a
 * last member "crc32c" with the CRC32C of the text before it, which
 * json_doc_parse checks.  Readers that do not know it ignore the member.
 */
extern void json_doc_seal(StringInfo buf);

/*
 * Member accessors.  "required" members raise the corrupt-object ERROR when
 * absent; optional ones return the given default (or NULL / false).
 */
extern int64 json_doc_int64(const JsonDoc *doc, JsonbContainer *obj,
							const char *member, bool required, int64 default_value);
extern char *json_doc_text(const JsonDoc *doc, JsonbContainer *obj,
						   const char *member, bool required);
extern bool json_doc_bool(const JsonDoc *doc, JsonbContainer *obj,
						  const char *member, bool required, bool default_value);

/* An array or object member's container (NULL if absent and optional). */
extern JsonbContainer *json_doc_container(const JsonDoc *doc, JsonbContainer *obj,
										  const char *member, bool required,
										  bool want_array);

/* Elements of an array container: element i, which must be a container
 * (object) or a scalar as asked. */
extern int	json_doc_array_length(JsonbContainer *array);
extern JsonbContainer *json_doc_array_object(const JsonDoc *doc, JsonbContainer *array,
											 int index);

/* Raise the corrupt-object error with a detail. */
extern void json_doc_corrupt(const JsonDoc *doc, const char *detail) pg_attribute_noreturn();

/* Writing: append "key": value pairs to a JSON object being built. */
extern void json_append_member_text(StringInfo buf, bool *first,
									const char *member, const char *value);
extern void json_append_member_int64(StringInfo buf, bool *first,
									 const char *member, int64 value);
extern void json_append_member_raw(StringInfo buf, bool *first,
								   const char *member, const char *raw_json);

#endif							/* ROLLOUT_JSON_DOC_H */
