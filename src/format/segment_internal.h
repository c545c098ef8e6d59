/*-------------------------------------------------------------------------
 *
 * segment_internal.h
 *		Private to src/format: the constants of the segment byte layout, the
 *		little-endian integer helpers and the datum codec shared by
 *		segment_writer.c and segment_reader.c.
 *
 * Nothing outside src/format includes this file; the public surface is
 * include/rollout/segment.h and the bytes are described in docs/FORMAT.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_SEGMENT_INTERNAL_H
#define ROLLOUT_SEGMENT_INTERNAL_H

#include "catalog/pg_type_d.h"
#include "rollout/segment.h"
#include "utils/memutils.h"

/* "ROSG": the first four and the last four bytes of every segment. */
#define SEGMENT_MAGIC_0			'R'
#define SEGMENT_MAGIC_1			'O'
#define SEGMENT_MAGIC_2			'S'
#define SEGMENT_MAGIC_3			'G'
#define SEGMENT_MAGIC_SIZE		4

/* Header: magic, uint32 format version. */
#define SEGMENT_HEADER_SIZE		8
/* Trailer: uint32 footer length, magic. */
#define SEGMENT_TRAILER_SIZE	8
/* The footer ends with the CRC32C of the footer body. */
#define SEGMENT_FOOTER_CRC_SIZE 4

/* Footer flag bits; a reader rejects any bit it does not know. */
#define SEGMENT_FLAG_SORTED		0x00000001	/* rows ascend by key */
#define SEGMENT_FLAG_BIG_ENDIAN 0x00000002	/* datum images are big-endian */
#define SEGMENT_KNOWN_FLAGS		(SEGMENT_FLAG_SORTED | SEGMENT_FLAG_BIG_ENDIAN)

#ifdef WORDS_BIGENDIAN
#define SEGMENT_NATIVE_BYTE_ORDER_FLAG SEGMENT_FLAG_BIG_ENDIAN
#else
#define SEGMENT_NATIVE_BYTE_ORDER_FLAG 0
#endif

/* Limits a reader enforces (and a writer never exceeds). */
#define SEGMENT_MAX_COLUMNS			1600	/* MaxHeapAttributeNumber */
#define SEGMENT_MAX_ROWS_PER_GROUP	(1 << 20)
#define SEGMENT_MAX_CHUNK_RAW_SIZE	((int64) MaxAllocSize)
#define SEGMENT_MAX_NAME_LENGTH		4096
#define SEGMENT_MAX_FOOTER_LENGTH	((int64) 512 * 1024 * 1024)

/* Key filters (key_filter.c): at most this many probes and 2^28 bits (32 MB) */
#define SEGMENT_KEY_FILTER_MAX_PROBES	16
#define SEGMENT_KEY_FILTER_MAX_BITS		((uint64) 1 << 28)

extern uint64 segment_key_hash(const SegmentColumn *column, Datum value);
extern int	segment_key_filter_probes(int bits_per_key);
extern void segment_key_filter_add(uint8 *bits, uint64 nbits, int probes,
								   uint64 hash);
extern bool segment_key_filter_test(const uint8 *bits, uint64 nbits,
									int probes, uint64 hash);

/* Adjacent wanted chunks are fetched together up to this many bytes. */
#define SEGMENT_MAX_COALESCED_READ	((int64) 64 * 1024 * 1024)

/*
 * Wanted chunks separated by at most this many bytes of unwanted ones are
 * fetched together, gap included: about what a cloud store delivers in the
 * time of a round trip, so bridging a gap never costs more than it saves.
 */
#define SEGMENT_MAX_READ_GAP		((int64) 256 * 1024)

/* Min/max of a chunk are skipped when a value's image is larger than this. */
#define SEGMENT_MAX_STATS_IMAGE_SIZE 256

/*
 * A page (format version 3) holds at most this many rows, so that reading
 * one row of a small column decodes an eighth of a default row group.
 */
#define SEGMENT_PAGE_MAX_ROWS		512

/* A row group is cut when its raw (uncompressed) size passes this. */
#define SEGMENT_GROUP_RAW_SIZE_LIMIT (16 * 1024 * 1024)

/* The zstd level chunks are compressed with. */
#define SEGMENT_ZSTD_LEVEL			1

/*
 * zstd's fast mode (a negative level) stores literals without entropy
 * coding: its frames decompress three to twenty times faster than level 1's,
 * which spend most of their time on entropy tables for small pages.  A page
 * is written in fast mode when that costs little room: when level 1 saves
 * less than 1 / SEGMENT_FAST_MODE_SAVING_SHARE of the page (random keys,
 * stamps, hashes), or when the fast frame is at most 1 /
 * SEGMENT_FAST_MODE_GROWTH_SHARE larger than level 1's (many numbers).
 * Either is a zstd frame, so readers of every version read it.
 */
#define SEGMENT_ZSTD_LEVEL_FAST			(-1)

/*
 * A page of fewer raw bytes than this is compressed once, in fast mode,
 * without trying level 1 first: what level 1 could save on it is a few
 * hundred bytes at most, while the second compression is most of the CPU a
 * one-row WAL entry spends in zstd (every page of such an entry is this
 * small).  Pages of a full chunk are SEGMENT page_size (8 kB by default), so
 * in larger segments only a chunk's last page can be this small.
 */
#define SEGMENT_SMALL_PAGE_SIZE			2048

/*
 * Compression dictionaries (format version 4).  Pages of a few kB compress
 * poorly on their own (zstd has nothing to refer back to); a dictionary
 * trained on the column's first row group gives each page that history, so
 * that small pages (fast lookups) compress as well as large ones.  A
 * variable-length column gets one when its raw bytes in the first row group
 * are at least SEGMENT_DICTIONARY_MIN_RAW_SHARE times the dictionary's size
 * (so that the dictionary is a small part of the segment), trained on at
 * most SEGMENT_DICTIONARY_SAMPLE_BYTES of its pages.  Readers refuse a
 * dictionary larger than SEGMENT_MAX_DICTIONARY_SIZE.
 */
#define SEGMENT_DICTIONARY_MIN_RAW_SHARE	8
#define SEGMENT_DICTIONARY_SAMPLE_BYTES		(256 * 1024)
#define SEGMENT_MAX_DICTIONARY_SIZE			(1024 * 1024)

/*
 * zstd's memory for a dictionary digested for compression or decompression,
 * allocated in a memory context (the opaque pointer): counted there, and
 * freed with it, on error too.  palloc's own ERROR on exhaustion stands for
 * zstd's NULL.
 */
static inline void *
segment_zstd_alloc(void *context, size_t size)
{
	return MemoryContextAllocExtended((MemoryContext) context, size,
									  MCXT_ALLOC_HUGE);
}

static inline void
segment_zstd_free(void *context, void *address)
{
	if (address != NULL)
		pfree(address);
}
#define SEGMENT_FAST_MODE_SAVING_SHARE	4
#define SEGMENT_FAST_MODE_GROWTH_SHARE	10

/* SEGMENT_TAIL_READ_SIZE (segment.h): how much of the tail is read first */

/*
 * Raise the one corrupt-segment error.  The detail says what was wrong, in a
 * full sentence.
 */
#define segment_corrupt(segment_name, ...) \
	ereport(ERROR, \
			(errcode(ERRCODE_DATA_CORRUPTED), \
			 errmsg("segment \"%s\" is corrupt", (segment_name)), \
			 errdetail(__VA_ARGS__)))

/* Little-endian fixed-width integers, independent of the host byte order. */
static inline void
segment_put_uint32(unsigned char *dest, uint32 value)
{
	dest[0] = (unsigned char) (value);
	dest[1] = (unsigned char) (value >> 8);
	dest[2] = (unsigned char) (value >> 16);
	dest[3] = (unsigned char) (value >> 24);
}

static inline uint32
segment_get_uint32(const unsigned char *src)
{
	return (uint32) src[0] | ((uint32) src[1] << 8) |
		((uint32) src[2] << 16) | ((uint32) src[3] << 24);
}

static inline uint64
segment_get_uint64(const unsigned char *src)
{
	return (uint64) segment_get_uint32(src) |
		((uint64) segment_get_uint32(src + 4) << 32);
}

/*
 * The format's alignment of a typalign code: 1, 2, 4 or 8 bytes, the same on
 * every platform (PostgreSQL's 'd' may be 4 on some 32-bit machines; aligning
 * to 8 there is merely more than needed).
 */
static inline int64
segment_align(int64 offset, char typalign)
{
	int64		alignment;

	switch (typalign)
	{
		case TYPALIGN_SHORT:
			alignment = 2;
			break;
		case TYPALIGN_INT:
			alignment = 4;
			break;
		case TYPALIGN_DOUBLE:
			alignment = 8;
			break;
		default:
			alignment = 1;
			break;
	}
	return (offset + alignment - 1) & ~(alignment - 1);
}

/* datum_codec.c: value images */
extern Datum segment_datum_flatten(const SegmentColumn *column, Datum value);
extern bool segment_datum_image_is_short(const SegmentColumn *column,
										 Datum flat);
extern Size segment_datum_image_size(const SegmentColumn *column, Datum flat);
extern void segment_datum_write_image(const SegmentColumn *column, char *dest,
									  Datum flat);
extern void segment_chunk_append_value(const SegmentColumn *column,
									   StringInfo chunk, Datum flat);
extern Datum segment_datum_from_image(const SegmentColumn *column,
									  const struct ImageCheck *check,
									  const char *image, int64 length,
									  const char *segment_name,
									  const char *what);

/* datum_codec.c: schema checks and whole chunks */
extern bool segment_column_layout_is_valid(int16 typlen, bool typbyval,
										   char typalign);
extern void segment_chunk_decode(const SegmentColumn *column,
								 const struct ImageCheck *check,
								 const char *raw, int64 raw_size,
								 int64 row_count, int64 null_count,
								 Datum *values, bool *isnull,
								 const char *segment_name);
extern void segment_chunk_decode_row(const SegmentColumn *column,
									 const struct ImageCheck *check,
									 const char *raw, int64 raw_size,
									 int64 row_count, int64 row,
									 Datum *value, bool *isnull,
									 const char *segment_name);

#endif							/* ROLLOUT_SEGMENT_INTERNAL_H */
