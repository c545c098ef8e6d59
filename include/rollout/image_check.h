/*-------------------------------------------------------------------------
 *
 * image_check.h
 *		Structural checks of datum images read from a store.
 *
 * A store's objects come from whoever can write where the store lives: for
 * a remote store that may be any role allowed to create a server, pointing
 * it at an endpoint of its own.  PostgreSQL's functions trust the inside of
 * the values they are given (an array's element offsets, a jsonb's entry
 * table, a range's flags), so an image is checked before anything reads it
 * (src/format/image_check.c).  The types this module knows are the ones a
 * store keeps as images; values of other types are kept as text and parsed
 * by the type's input function (core/portable_values.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_IMAGE_CHECK_H
#define ROLLOUT_IMAGE_CHECK_H

typedef struct ImageCheck ImageCheck;

/* Can every image of typid (or of its base type) be checked? */
extern bool image_check_covers_type(Oid typid);

/*
 * What reading typid's images safely depends on, as a string: two types of
 * the same signature (and storage layout) may read each other's images
 * (text and varchar, a domain and its base type), two of different ones may
 * not (bytea and jsonb).  For the schema digest of core/store_definition.c.
 */
extern char *image_check_signature(Oid typid);

/*
 * The check of typid's images, made in CurrentMemoryContext, or NULL when
 * there is nothing to check (any bytes of the right length are a value) or
 * the type is not one image_check_covers_type accepts.
 */
extern const ImageCheck *image_check_for_type(Oid typid);

/*
 * What is wrong with one image of a column (length bytes, whose varlena or
 * cstring framing has been checked), as a phrase such as "is a jsonb whose
 * entries run past its end", or NULL when nothing is.
 */
extern const char *image_check_value(const ImageCheck *check,
									 const char *image, int64 length);

#endif							/* ROLLOUT_IMAGE_CHECK_H */
