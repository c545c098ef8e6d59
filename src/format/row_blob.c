/*-------------------------------------------------------------------------
 *
 * row_blob.c
 *		Encode and decode rows in transit (see row_blob.h).
 *
 * Each row is a uint32 length followed by a minimal tuple formed with the
 * caller's row descriptor (a store's user columns as stored, in
 * _store.json order).  Minimal
 * tuples are PostgreSQL's own compact row format, so encoding and decoding
 * cost one heap_form_minimal_tuple and one heap_deform_tuple; the values are
 * flat (no toast pointers) because the transaction buffer detoasts them.
 *
 * The length is padded to ROW_BLOB_HEADER bytes and the tuple to a multiple
 * of MAXIMUM_ALIGNOF, so that every row starts at an aligned offset of its
 * blob, and so does every row of blobs appended one to another (a memtable
 * batch joins its transactions' blobs).  A reader whose copy of the blob is
 * aligned, as palloc's and the memtable's are, deforms each tuple where it
 * lies: a flush decodes every row of the memtable, and copying each tuple
 * first to align it was a tenth of its time.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"

#include "rollout/row_blob.h"

#define ROW_BLOB_HEADER		MAXALIGN(sizeof(uint32))

/*
 * Append one row to blob: its length as a uint32 in host byte order, then the
 * minimal tuple formed from values/isnull under row_desc, each padded with
 * zeros as the header comment says.  Host byte order is enough because a row
 * blob never leaves this cluster's memory (a WAL entry stores the rows as a
 * segment, which is what readers decode after a restart).
 */
void
row_blob_append(TupleDesc row_desc, StringInfo blob, const Datum *values,
				const bool *isnull)
{
	MinimalTuple tuple = heap_form_minimal_tuple(row_desc,
												 (Datum *) values, (bool *) isnull);
	uint32		len = tuple->t_len;
	int			row_bytes = ROW_BLOB_HEADER + MAXALIGN(len);
	char	   *row;

	Assert(blob->len % MAXIMUM_ALIGNOF == 0);
	enlargeStringInfo(blob, row_bytes);
	row = blob->data + blob->len;
	memset(row, 0, row_bytes);
	memcpy(row, &len, sizeof(len));
	memcpy(row + ROW_BLOB_HEADER, tuple, len);
	blob->len += row_bytes;
	blob->data[blob->len] = '\0';
	pfree(tuple);
}

/*
 * Decode the row at *offset (row_blob.h).  The framing length is checked
 * against the rest of the blob before it is used.  heap_deform_tuple needs
 * the tuple aligned: it is where it lies when data is aligned, else it is
 * copied to a palloc'd buffer first.  The decoded values point into the one
 * or the other.
 */
bool
row_blob_next(TupleDesc row_desc, const char *data, int64 len, int64 *offset,
			  Datum *values, bool *isnull)
{
	uint32		tuple_len;
	const char *start;
	MinimalTuple tuple;
	HeapTupleData htup;

	if (*offset >= len)
		return false;
	if (len - *offset < (int64) ROW_BLOB_HEADER)
		elog(ERROR, "rollout row blob is truncated at offset %lld", (long long) *offset);
	memcpy(&tuple_len, data + *offset, sizeof(tuple_len));
	if (tuple_len < SizeofMinimalTupleHeader ||
		len - *offset - (int64) ROW_BLOB_HEADER < (int64) MAXALIGN(tuple_len))
		elog(ERROR, "rollout row blob has a bad row length at offset %lld", (long long) *offset);

	start = data + *offset + ROW_BLOB_HEADER;
	if ((uintptr_t) start % MAXIMUM_ALIGNOF == 0)
		tuple = (MinimalTuple) unconstify(char *, start);
	else
	{
		tuple = palloc(tuple_len);
		memcpy(tuple, start, tuple_len);
	}
	*offset += ROW_BLOB_HEADER + MAXALIGN(tuple_len);

	htup.t_len = tuple->t_len + MINIMAL_TUPLE_OFFSET;
	htup.t_data = (HeapTupleHeader) ((char *) tuple - MINIMAL_TUPLE_OFFSET);
	ItemPointerSetInvalid(&htup.t_self);
	htup.t_tableOid = InvalidOid;
	heap_deform_tuple(&htup, row_desc, values, isnull);
	return true;
}
