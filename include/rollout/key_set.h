/*-------------------------------------------------------------------------
 *
 * key_set.h
 *		A set of key values that are equal when the store says they are the
 *		same key (format/key_set.c).
 *
 * The store identifies a record by its key's order, not by its bytes:
 * numeric 2 and 2.0 are one key, as are float8 0 and -0 (segment.h).  A set
 * that must answer "was this key written already" has to agree with that,
 * or it mistakes one key for two.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_KEY_SET_H
#define ROLLOUT_KEY_SET_H

#include "rollout/segment.h"

typedef struct KeySet KeySet;

/*
 * An empty set of values of column (which must have an order), allocated
 * in context together with every key added later.
 */
extern KeySet *key_set_create(const SegmentColumn *column, MemoryContext context);

/* Is a key equal to key (by the column's order) in set? */
extern bool key_set_contains(KeySet *set, Datum key);

/* Add a copy of key to set, unless an equal key is there. */
extern void key_set_add(KeySet *set, Datum key);

#endif							/* ROLLOUT_KEY_SET_H */
