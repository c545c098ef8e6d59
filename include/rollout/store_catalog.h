/*-------------------------------------------------------------------------
 *
 * store_catalog.h
 *		The stores at a location, found without opening them
 *		(core/store_catalog.c): their names, and the definitions their
 *		_store.json objects record.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_STORE_CATALOG_H
#define ROLLOUT_STORE_CATALOG_H

#include "rollout/objstore.h"

/* A column as _store.json records it: the type as a qualified name. */
typedef struct StoredColumn
{
	char	   *name;
	char	   *type_name;
	int32		typmod;			/* -1 when none was recorded */
} StoredColumn;

typedef struct StoredDefinition
{
	char	   *store_name;
	char	   *key_column;
	int			ncolumns;
	StoredColumn *columns;		/* in the store's order */
} StoredDefinition;

/*
 * Call visit(name, arg) for the name of every top-level folder at the
 * location that holds objects, once each, in name order.  Folders that are
 * not stores (no _store.json) are visited too.
 */
extern void store_catalog_list(ObjectStore *objstore,
							   void (*visit) (const char *name, void *arg),
							   void *arg);

/*
 * The definition the _store.json of store name records, or NULL when there
 * is none (not a store, or one whose first write has not happened).  A
 * malformed _store.json is an ERROR naming it.
 */
extern StoredDefinition *store_catalog_read(ObjectStore *objstore,
											const char *name);

#endif							/* ROLLOUT_STORE_CATALOG_H */
