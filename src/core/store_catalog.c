/*-------------------------------------------------------------------------
 *
 * store_catalog.c
 *		The stores at a location: their names and definitions, read
 *		without opening them (IMPORT FOREIGN SCHEMA, rollout_stores).
 *
 * A store is a top-level folder of the location holding _store.json, which
 * fixes the columns (names, types as qualified names, typmods) and the key
 * (store_definition.c writes it).
 *
 * Where the backend lists from start_after (S3, file://), the stores are
 * found without listing every object: each listing starts where the
 * previous store's keys end (its name followed by the character after '/',
 * which sorts after every "name/..." key), so a location of N stores costs
 * about N + 1 listings of one page however many objects the stores hold.
 * Azure has no such start: there the listing goes through every key once,
 * page by page.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "rollout/json_doc.h"
#include "rollout/store_catalog.h"

/* keys per listing page */
#define CATALOG_LISTING_PAGE	100

void
store_catalog_list(ObjectStore *objstore,
				   void (*visit) (const char *name, void *arg), void *arg)
{
	char	   *after = NULL;
	char	   *continuation = NULL;
	char	   *last_name = NULL;

	for (;;)
	{
		ObjectStoreListing *page;
		char	   *name_before = last_name;

		CHECK_FOR_INTERRUPTS();
		page = objstore_list_page(objstore, "", after, CATALOG_LISTING_PAGE,
								  continuation);
		for (int i = 0; i < page->count; i++)
		{
			const char *key = page->entries[i].key;
			const char *slash = strchr(key, '/');
			char	   *name;

			if (slash == NULL)
				continue;		/* an object at the top: no store */
			name = pnstrdup(key, slash - key);
			if (last_name != NULL && strcmp(name, last_name) == 0)
				continue;		/* more of the store just seen */
			last_name = name;
			visit(name, arg);
		}
		if (page->continuation == NULL)
			break;

		/*
		 * A page that named no new store (top-level objects only) gives no
		 * key to skip to: go on from where it ended.
		 */
		if (objstore->ops->list_starts_after && last_name != NULL &&
			last_name != name_before)
		{
			/* skip the rest of the last store: '0' follows '/' */
			after = psprintf("%s0", last_name);
			continuation = NULL;
		}
		else
			continuation = page->continuation;
	}
}

StoredDefinition *
store_catalog_read(ObjectStore *objstore, const char *name)
{
	char	   *key = psprintf("%s/_store.json", name);
	StringInfoData json;
	JsonDoc    *doc;
	JsonbContainer *columns;
	StoredDefinition *definition;

	initStringInfo(&json);
	if (!objstore_get(objstore, key, &json))
		return NULL;
	doc = json_doc_parse(json.data, json.len, key);
	columns = json_doc_container(doc, doc->root, "columns", true, true);
	definition = palloc0(sizeof(StoredDefinition));
	definition->store_name = pstrdup(name);
	definition->key_column = json_doc_text(doc, doc->root, "key", true);
	definition->ncolumns = json_doc_array_length(columns);
	definition->columns = palloc0(sizeof(StoredColumn) * Max(definition->ncolumns, 1));
	for (int c = 0; c < definition->ncolumns; c++)
	{
		JsonbContainer *col = json_doc_array_object(doc, columns, c);
		StoredColumn *column = &definition->columns[c];

		column->name = json_doc_text(doc, col, "name", true);
		column->type_name = json_doc_text(doc, col, "type", true);
		column->typmod = (int32) json_doc_int64(doc, col, "typmod", false, -1);
	}
	return definition;
}
