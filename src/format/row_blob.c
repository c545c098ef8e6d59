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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"

#include "rollout/row_blob.h"

/*
 * Append one row to blob: its length as a uint32 in host byte order, then the
 * minimal tuple formed from values/isnull under row_desc.  Host byte order is
 * enough because a row blob never leaves this cluster's memory (a WAL entry
 * stores the rows as a segment), and the length prefix is what lets
 * row_blob_next find each tuple without any padding between them.
 */
void
row_blob_append(TupleDesc row_desc, StringInfo blob, const Datum *values,
				const bool *isnull)
{
	MinimalTuple tuple = heap_form_minimal_tuple(row_desc,
												 (Datum *) values, (bool *) isnull);
	uint32		len = tuple->t_len;

	appendBinaryStringInfo(blob, (const char *) &len, sizeof(len));
	appendBinaryStringInfo(blob, (const char *) tuple, len);
	pfree(tuple);
}

/*
 * Decode the row at *offset (row_blob.h).  The framing length is checked
 * against the rest of the blob before it is used, and the tuple is copied to a
 * palloc'd buffer first: the blob packs tuples back to back, so one may start
 * at any byte, and heap_deform_tuple needs it aligned.  The decoded values
 * point into that copy.
 */
bool
row_blob_next(TupleDesc row_desc, const char *data, int64 len, int64 *offset,
			  Datum *values, bool *isnull)
{
	uint32		tuple_len;
	MinimalTuple tuple;
	HeapTupleData htup;

	if (*offset >= len)
		return false;
	if (len - *offset < (int64) sizeof(tuple_len))
		elog(ERROR, "rollout row blob is truncated at offset %lld", (long long) *offset);
	memcpy(&tuple_len, data + *offset, sizeof(tuple_len));
	if (tuple_len < SizeofMinimalTupleHeader ||
		len - *offset - (int64) sizeof(tuple_len) < (int64) tuple_len)
		elog(ERROR, "rollout row blob has a bad row length at offset %lld", (long long) *offset);

	/* an aligned copy: the blob packs tuples without padding */
	tuple = palloc(tuple_len);
	memcpy(tuple, data + *offset + sizeof(tuple_len), tuple_len);
	*offset += sizeof(tuple_len) + tuple_len;

	htup.t_len = tuple->t_len + MINIMAL_TUPLE_OFFSET;
	htup.t_data = (HeapTupleHeader) ((char *) tuple - MINIMAL_TUPLE_OFFSET);
	ItemPointerSetInvalid(&htup.t_self);
	htup.t_tableOid = InvalidOid;
	heap_deform_tuple(&htup, row_desc, values, isnull);
	return true;
}
