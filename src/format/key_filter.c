/*-------------------------------------------------------------------------
 *
 * key_filter.c
 *		The per-segment key filter: a Bloom filter over the keys of a
 *		segment, stored in its footer (format version 2, docs/FORMAT.md).
 *
 * A lookup of one key can skip every segment whose filter says the key is
 * not there; a filter never says "absent" for a key the segment holds, so
 * skipping by it changes no result (false positives only cost a read).
 *
 * The hash is defined here on the key's bytes, not taken from PostgreSQL's
 * hash functions, so that every server that can read the segment computes
 * the same bits: 64-bit FNV-1a, then the splitmix64 finaliser to spread
 * it, and k probes by double hashing (Kirsch and Mitzenmacher).  The bytes
 * of a fixed-length key are its datum image; of a varlena key, its data
 * without the header, so that a short and a long header give one hash.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "rollout/segment.h"
#include "segment_internal.h"

/* 64-bit FNV-1a over len bytes. */
static uint64
fnv1a64(const unsigned char *data, Size len)
{
	uint64		h = UINT64CONST(0xcbf29ce484222325);

	for (Size i = 0; i < len; i++)
	{
		h ^= data[i];
		h *= UINT64CONST(0x100000001b3);
	}
	return h;
}

/* The splitmix64 finaliser: every input bit affects every output bit. */
static uint64
mix64(uint64 h)
{
	h ^= h >> 30;
	h *= UINT64CONST(0xbf58476d1ce4e5b9);
	h ^= h >> 27;
	h *= UINT64CONST(0x94d049bb133111eb);
	h ^= h >> 31;
	return h;
}

/* The filter hash of a key value (flat, as the writer stores it). */
uint64
segment_key_hash(const SegmentColumn *column, Datum value)
{
	if (column->typlen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));

		return mix64(fnv1a64((const unsigned char *) VARDATA_ANY(v),
							 VARSIZE_ANY_EXHDR(v)));
	}
	else
	{
		Size		size = segment_datum_image_size(column, value);
		char	   *image = palloc(size);
		uint64		h;

		segment_datum_write_image(column, image, value);
		h = mix64(fnv1a64((const unsigned char *) image, size));
		pfree(image);
		return h;
	}
}

/*
 * How many probes a filter of bits_per_key bits per key uses: about
 * bits_per_key * ln 2, the number that minimises false positives.
 */
int
segment_key_filter_probes(int bits_per_key)
{
	int			k = (int) (bits_per_key * 0.69 + 0.5);

	return Max(1, Min(k, SEGMENT_KEY_FILTER_MAX_PROBES));
}

/* Set the bits of one key's hash in a filter of nbits bits. */
void
segment_key_filter_add(uint8 *bits, uint64 nbits, int probes, uint64 hash)
{
	uint64		h1 = hash;
	uint64		h2 = mix64(hash ^ UINT64CONST(0x9e3779b97f4a7c15)) | 1;

	for (int i = 0; i < probes; i++)
	{
		uint64		bit = (h1 + (uint64) i * h2) % nbits;

		bits[bit / 8] |= (uint8) (1 << (bit % 8));
	}
}

/* Are all the bits of hash set?  False means the key is not there. */
bool
segment_key_filter_test(const uint8 *bits, uint64 nbits, int probes, uint64 hash)
{
	uint64		h1 = hash;
	uint64		h2 = mix64(hash ^ UINT64CONST(0x9e3779b97f4a7c15)) | 1;

	for (int i = 0; i < probes; i++)
	{
		uint64		bit = (h1 + (uint64) i * h2) % nbits;

		if ((bits[bit / 8] & (1 << (bit % 8))) == 0)
			return false;
	}
	return true;
}

/*
 * May reader's segment hold key (a flat value of the key column's type)?
 * True when the segment has no filter.
 */
bool
segment_reader_may_contain_key(SegmentReader *reader, Datum key)
{
	const SegmentColumn *column = &reader->schema.columns[reader->schema.key_column];

	if (reader->key_filter == NULL)
		return true;
	return segment_key_filter_test(reader->key_filter, reader->key_filter_bits,
								   reader->key_filter_probes,
								   segment_key_hash(column, key));
}
