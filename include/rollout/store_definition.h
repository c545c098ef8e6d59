/*-------------------------------------------------------------------------
 *
 * store_definition.h
 *		Opening a store: its definition (_store.json), created at the first
 *		write and checked against the table at every open
 *		(core/store_definition.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_STORE_DEFINITION_H
#define ROLLOUT_STORE_DEFINITION_H

#include "storage/lock.h"

#include "rollout/store.h"

/* rollout_fdw.rows_per_group: rows per row group of the segments written */
extern int	store_rows_per_group;

/* rollout_fdw.key_filter_bits: bits per key of their key filters (0: none) */
extern int	store_key_filter_bits;

/* rollout_fdw.page_size: kB of raw values per page of a chunk (0: no pages) */
extern int	store_page_size;
extern int	store_dictionary_size;

/* rollout_fdw.check_trusted_images: check values from trusted stores too */
extern bool store_check_trusted_images;

/* Define rollout_fdw.rows_per_group and the others above (from _PG_init). */
extern void store_define_settings(void);

/* Open (and on first use create) a store.  Result lives in a new child
 * context of parent. */
extern RolloutStore *rollout_store_open(const RolloutStoreSpec *spec,
										MemoryContext parent);
extern void rollout_store_close(RolloutStore *store);

/* Create _store.json if the store is new (before its first write). */
extern void rollout_store_ensure_created(RolloutStore *store);

/*
 * Does the store exist?  A handle opened before anyone wrote to the store
 * holds the definition it would create, with an incarnation of its own;
 * when another session or cluster has created the store since, this takes
 * over that one's incarnation (what names snapshots and change feed
 * positions).
 */
extern bool rollout_store_exists(RolloutStore *store);

/*
 * Is the store still the creation this handle opened?  False when its
 * _store.json is gone or holds another incarnation (the store was deleted,
 * and perhaps created again, under a live session), read again when the
 * last look is older than max_age_ms; the handle is then marked stale, and
 * the next use opens the store anew.  For what an old creation's names
 * would silently mislead in a new one: snapshot tokens, change feed
 * positions, gc's retentions.
 */
extern bool rollout_store_is_current(RolloutStore *store, int max_age_ms);

/* rollout_store_is_current, or ERROR */
extern void rollout_store_check_current(RolloutStore *store, int max_age_ms);

/* How old a look at _store.json the feed and named snapshots still trust */
#define ROLLOUT_STORE_RECHECK_MS	1000

/* The segment column of a table column, by name; -1 if none. */
extern int	rollout_store_column_index(RolloutStore *store, const char *name);

/*
 * An advisory lock tag for one kind of work on this store in this database
 * (kind: a two-letter tag apart from user advisory locks' 1 and 2).  It
 * names the store by where it really is (the object store's identity, not
 * the location string another server may repeat with another endpoint) and
 * its name, through a 64-bit hash.
 */
extern void rollout_store_lock_tag(RolloutStore *store, uint16 kind,
								   LOCKTAG *tag);

/*
 * The same for work on one shard of the store (shard not NULL), held in
 * every database of the cluster (no database in the tag) rather than this
 * one's.
 */
extern void rollout_store_shard_lock_tag(RolloutStore *store, const char *shard,
										 uint16 kind,
										 LOCKTAG *tag);

#endif							/* ROLLOUT_STORE_DEFINITION_H */
