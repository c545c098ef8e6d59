/*-------------------------------------------------------------------------
 *
 * row_blob.h
 *		Committed rows in transit: a byte string of length-prefixed minimal
 *		tuples in the store's column order.
 *
 * A transaction's rows leave its backend as a row blob: into a WAL entry
 * written by itself or by a group-commit leader in another backend, and
 * into the shared memtable.  Using the store's column order (not the foreign
 * table's) means any backend that has the store open can decode them, even
 * one connected to another database with a differently ordered table.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_ROW_BLOB_H
#define ROLLOUT_ROW_BLOB_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "lib/stringinfo.h"

/* Append one row (values of row_desc's columns) to blob. */
extern void row_blob_append(TupleDesc row_desc, StringInfo blob,
							const Datum *values, const bool *isnull);

/*
 * Decode the row at *offset of a blob into values/isnull (row_desc's
 * columns) and advance *offset; false at the end.  The values point into
 * data (keep it while they are used) or into memory allocated in
 * CurrentMemoryContext.  A malformed blob is an ERROR.
 */
extern bool row_blob_next(TupleDesc row_desc, const char *data, int64 len,
						  int64 *offset, Datum *values, bool *isnull);

#endif							/* ROLLOUT_ROW_BLOB_H */
