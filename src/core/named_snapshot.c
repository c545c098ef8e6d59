/*-------------------------------------------------------------------------
 *
 * named_snapshot.c
 *		Snapshots with a name: a token for a store as it is now, reads as of
 *		such a token, and retentions that keep what a token needs from
 *		garbage collection until a given time.
 *
 * A token names manifest versions: the base manifest's and every shard
 * manifest's, listed in the order a snapshot takes them (store_snapshot.c),
 * so that together they are a consistent cut of the store.  A manifest
 * version never changes once written, so a token reads the same rows for as
 * long as those versions and the fragments and generations they name exist.
 * It names no WAL entry: rollout_snapshot flushes this cluster's shard
 * before it takes the token, so that everything this cluster committed
 * before the call is in a generation.  Rows other clusters committed and
 * have not flushed yet are not in it, as they are not in a read without
 * read_wal_tail.
 *
 * Token text: "rs1:<incarnation>:<base version>:<shard>=<version>,...",
 * shards in the order of the listing (sorted).  The incarnation of the
 * store (_store.json) ties a token to one creation of one store: a store
 * dropped and created again numbers its manifests from 1 again.
 *
 * Retention.  Garbage collection keeps a manifest version only for its grace
 * period after a newer one replaced it.  rollout_retain writes
 * <store>/_retained/<hash of the token>.<until, µs since 2000>.json holding
 * the token, create-if-absent like every object of a store: retaining a
 * token longer is another object, and the latest until wins.  gc (lsm/gc.c)
 * lists them, reads those not expired, keeps the manifest versions they name
 * and everything those reference, and deletes the expired ones.
 * rollout_release deletes every retention of a token.  The until time is in
 * the key so that gc and listings know it without reading the object.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "rollout/grace.h"
#include "rollout/json_doc.h"
#include "rollout/manifest_cache.h"
#include "rollout/named_snapshot.h"
#include "rollout/shard.h"
#include "rollout/store_definition.h"
#include "rollout/store_keys.h"
#include "rollout/store_snapshot.h"
#include "rollout/store_token.h"

#define TOKEN_PREFIX		"rs1:"

char	   *named_snapshot_as_of = NULL;

static bool
check_as_of(char **newval, void **extra, GucSource source)
{
	const char *problem;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (named_snapshot_parse(*newval, &problem) == NULL)
	{
		GUC_check_errdetail("%s", problem);
		return false;
	}
	return true;
}

void
named_snapshot_define_settings(void)
{
	DefineCustomStringVariable("rollout_fdw.as_of",
							   "Named snapshot (a token of rollout_snapshot) that scans of its store read.",
							   "Empty reads the store as it is now. Scans of other stores are not affected.",
							   &named_snapshot_as_of,
							   "",
							   PGC_USERSET,
							   0,
							   check_as_of, NULL, NULL);
}

/* How many times named_snapshot_take reads the manifests for one cut. */
#define NAMED_SNAPSHOT_ATTEMPTS 10

char *
named_snapshot_take(RolloutStore *store)
{
	ManifestVersions versions;
	StringInfoData token;
	ListCell   *lc;

	if (!rollout_store_exists(store) ||
		store->incarnation == NULL || store->incarnation[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("store \"%s\" does not exist yet", store->name),
				 errdetail("A store is created by its first write; there is nothing to name a snapshot of.")));
	if (!store_token_incarnation_valid(store->incarnation))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("store \"%s\" has no incarnation to name in a token", store->name),
				 errdetail("Its _store.json was written by a release that did not record one.")));

	/*
	 * The versions listed form a cut (rollout_manifests_form_a_cut: the base
	 * merged no generation the shard versions do not list; a change feed
	 * started from a token that is none would deliver those rows again), and
	 * name every shard the base merged from (a shard that registered, wrote
	 * and merged between the listings is in the base, and a feed would read
	 * it from its start).  Read again here, a version gc removed meanwhile
	 * makes it list again; never hand out a token that is not such a cut.
	 */
	for (int attempt = 1;; attempt++)
	{
		const ShardManifest **manifests;
		const BaseManifest *base;

		rollout_snapshot_newest_versions(store, &versions);
		if (manifest_cache_read(store, &versions, &manifests, &base) &&
			rollout_manifests_form_a_cut(manifests, list_length(versions.shards), base, NULL) &&
			rollout_manifests_name_merged_shards(manifests, list_length(versions.shards), base))
			break;
		if (attempt >= NAMED_SNAPSHOT_ATTEMPTS)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not name a snapshot of store \"%s\": its manifests kept changing",
							store->name),
					 errdetail("Merges committed between the reads of the shard and base manifests %d times in a row.",
							   attempt),
					 errhint("Retry.")));
	}
	initStringInfo(&token);
	appendStringInfo(&token, TOKEN_PREFIX "%s:" INT64_FORMAT ":",
					 store->incarnation, versions.base_version);
	foreach(lc, versions.shards)
		appendStringInfo(&token, "%s%s=" INT64_FORMAT,
						 foreach_current_index(lc) > 0 ? "," : "",
						 (char *) lfirst(lc),
						 versions.shard_versions[foreach_current_index(lc)]);
	return token.data;
}

/*
 * A version number of a token: digits, at least minimum.  0 is a manifest
 * not yet written: the base of a store never merged, or the shard of a
 * cluster that has written only WAL entries so far (a snapshot reads none of
 * those).
 */
static bool
parse_version(const char *text, int64 minimum, int64 *version)
{
	int64		value = 0;

	if (*text == '\0')
		return false;
	for (const char *c = text; *c != '\0'; c++)
	{
		if (*c < '0' || *c > '9' || value > (PG_INT64_MAX - 9) / 10)
			return false;
		value = value * 10 + (*c - '0');
	}
	*version = value;
	return value >= minimum;
}

NamedSnapshot *
named_snapshot_parse(const char *text, const char **problem)
{
	NamedSnapshot *snapshot = palloc0(sizeof(NamedSnapshot));
	StoreToken	token;
	char	   *shard;
	char	   *version;
	bool		malformed;
	int			count = 0;
	const char *dummy;

	if (problem == NULL)
		problem = &dummy;
	*problem = "A token is the text rollout_snapshot returned, \"rs1:\" and then the store's incarnation, the base version and the shards' versions.";
	if (!store_token_split(text, TOKEN_PREFIX, &token) ||
		!parse_version(token.head, 0, &snapshot->versions.base_version))
		return NULL;
	snapshot->incarnation = token.incarnation;
	snapshot->versions.shard_versions =
		palloc(sizeof(int64) * (strlen(token.shards) / 3 + 1));
	while (store_token_next_shard(&token.shards, &shard, &version, &malformed))
	{
		if (!parse_version(version, 0, &snapshot->versions.shard_versions[count]))
			return NULL;
		snapshot->versions.shards = lappend(snapshot->versions.shards, shard);
		count++;
	}
	if (malformed)
		return NULL;

	/*
	 * Each shard once: gc keeps one retained version per token and shard
	 * (gc.c), and rollout_snapshot never lists a shard twice.
	 */
	if (count > 1)
	{
		const char **names = palloc(sizeof(const char *) * count);
		const char *repeated;
		ListCell   *lc;

		foreach(lc, snapshot->versions.shards)
			names[foreach_current_index(lc)] = lfirst(lc);
		if ((repeated = store_token_repeated_shard(names, count)) != NULL)
		{
			*problem = psprintf("It lists shard \"%s\" twice.", repeated);
			return NULL;
		}
		pfree(names);
	}
	*problem = NULL;
	return snapshot;
}

bool
named_snapshot_of_store(RolloutStore *store, const NamedSnapshot *snapshot)
{
	/* a handle older than the store's creation would take an old token */
	if (!rollout_store_is_current(store, ROLLOUT_STORE_RECHECK_MS) ||
		!rollout_store_exists(store) || store->incarnation == NULL)
		return false;
	if (strcmp(store->incarnation, snapshot->incarnation) == 0)
		return true;

	/*
	 * Another creation's token: maybe this store's newer one, the handle
	 * having gone stale within the second its last look is trusted.  Look
	 * again, once per such token, not at every scan of the tables of other
	 * stores that a session's rollout_fdw.as_of does not name.
	 */
	if (store->incarnation_mismatched == NULL ||
		strcmp(store->incarnation_mismatched, snapshot->incarnation) != 0)
	{
		if (store->incarnation_mismatched != NULL)
			pfree(store->incarnation_mismatched);
		store->incarnation_mismatched = MemoryContextStrdup(store->context,
															snapshot->incarnation);
		(void) rollout_store_is_current(store, 0);
	}
	return false;
}

void
named_snapshot_raise_expired(RolloutStore *store, const char *token)
{
	ereport(ERROR,
			(errcode(ERRCODE_SNAPSHOT_TOO_OLD),
			 errmsg("snapshot \"%s\" of store \"%s\" has expired", store_token_for_message(token),
					store->name),
			 errdetail("Garbage collection removed objects it needs."),
			 errhint("Keep a snapshot with rollout_retain, or with retain_until of rollout_snapshot, for as long as it is read.")));
}

NamedSnapshot *
named_snapshot_parse_or_raise(const char *token)
{
	const char *problem;
	NamedSnapshot *named = named_snapshot_parse(token, &problem);

	if (named == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid snapshot token \"%s\"", store_token_for_message(token)),
				 errdetail("%s", problem)));
	return named;
}

void
named_snapshot_check_of_store(RolloutStore *store, const NamedSnapshot *named,
							  const char *token, const char *outcome)
{
	if (!named_snapshot_of_store(store, named))
	{
		/* the handle's store was deleted under it: say that instead */
		rollout_store_check_current(store, 0);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snapshot \"%s\" is not a snapshot of store \"%s\"",
						store_token_for_message(token), store->name),
				 errdetail("It was taken of another store, or of an earlier creation of this one%s.",
						   outcome)));
	}
}

RolloutSnapshot *
named_snapshot_read(RolloutStore *store, const char *token)
{
	NamedSnapshot *named = named_snapshot_parse_or_raise(token);
	RolloutSnapshot *snapshot;

	named_snapshot_check_of_store(store, named, token, "");
	snapshot = rollout_snapshot_at_versions(store, &named->versions);
	if (snapshot == NULL)
		named_snapshot_raise_expired(store, token);
	return snapshot;
}

/* See named_snapshot.h. */
RolloutSnapshot *
named_snapshot_try_read(RolloutStore *store, const char *token)
{
	NamedSnapshot *named = named_snapshot_parse(token, NULL);

	if (named == NULL || !named_snapshot_of_store(store, named))
		return NULL;
	return rollout_snapshot_at_versions(store, &named->versions);
}

/* The folder of store's retentions, and the key prefix of token's */
static char *
retention_prefix(RolloutStore *store, const char *token)
{
	if (token == NULL)
		return psprintf("%s/_retained/", store->name);
	return psprintf("%s/_retained/%016" INT64_MODIFIER "x.", store->name,
					(int64) hash_bytes_extended((const unsigned char *) token,
												(int) strlen(token), 0));
}

/* The until time in a retention's key, or false when it is not one */
static bool
retention_until(const char *key, TimestampTz *until)
{
	const char *name = strrchr(key, '/');
	const char *dot;
	char	   *digits;

	name = name == NULL ? key : name + 1;
	if ((dot = strchr(name, '.')) == NULL || dot - name != 16)
		return false;
	digits = pstrdup(dot + 1);
	if (strlen(digits) <= 5 || strcmp(digits + strlen(digits) - 5, ".json") != 0)
		return false;
	digits[strlen(digits) - 5] = '\0';
	return parse_version(digits, 0, until);
}

/*
 * Does every object snapshot reads exist?  One listing per object: only
 * rollout_retain of a token that is not new asks.
 */
static bool
named_snapshot_objects_exist(RolloutStore *store, RolloutSnapshot *snapshot)
{
	ListCell   *lc;

	foreach(lc, snapshot->sources)
	{
		SnapshotSource *source = lfirst(lc);
		List	   *listed = objstore_list_all(store->objstore, source->key, NULL);

		if (listed == NIL ||
			strcmp(((ObjectStoreEntry *) linitial(listed))->key, source->key) != 0)
			return false;
	}
	return true;
}

/*
 * Whether version of the manifests under prefix is kept by every gc, one
 * that is running now included: it is the newest, or the version after it
 * was written less than rollout_fdw.min_gc_grace ago.  gc keeps a superseded
 * version, and what it references, while its successor is younger than the
 * grace of that gc, which is never shorter.
 */
static bool
manifest_version_kept_by_gc(RolloutStore *store, const char *prefix,
							int64 version, TimestampTz now)
{
	char	   *after;
	ObjectStoreListing *next = NULL;

	if (version == 0)
		return true;			/* no manifest: nothing for gc to take */
	after = manifest_key(prefix, version);

	/* a page may be empty and go on (Azure has no "start after") */
	do
	{
		CHECK_FOR_INTERRUPTS();
		next = objstore_list_page(store->objstore, prefix, after, 1000,
								  next ? next->continuation : NULL);
	} while (next->count == 0 && next->continuation != NULL);

	return next->count == 0 ||
		!TimestampDifferenceExceeds(next->entries[0].modified, now,
									gc_min_grace_seconds() * 1000);
}

static bool retention_holds_token(RolloutStore *store, const char *key,
								  const char *token);

/*
 * The token the body of the retention at key holds; "" when the body is
 * damaged (not JSON, or without a token), which no valid token equals.  gc
 * then keeps every manifest version while the retention lasts, and warns,
 * as for a token that is not valid: what a damaged retention keeps cannot be
 * known either, and failing every gc of the store (the sweeper's too) would
 * let it grow for good.  Only what a body can make the JSON reader raise is
 * caught: "corrupt" (json_doc.c), a data exception (a number jsonb cannot
 * hold, say) and a program limit (nesting too deep); the reader takes no
 * resource a caught error would leave behind, and a cancel or anything else
 * still raises.
 */
static char *
retention_body_token(const StringInfo body, const char *key)
{
	MemoryContext context = CurrentMemoryContext;
	char	   *volatile token = NULL;

	PG_TRY();
	{
		JsonDoc    *doc = json_doc_parse(body->data, body->len, key);

		token = json_doc_text(doc, doc->root, "token", true);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_DATA_CORRUPTED &&
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_PROGRAM_LIMIT_EXCEEDED)
			PG_RE_THROW();
		FlushErrorState();
		FreeErrorData(edata);
		token = "";
	}
	PG_END_TRY();
	return token;
}

/*
 * Whether a gc that listed the retentions before this one existed, and is
 * still running, cannot be removing what token reads: another retention of
 * it (holding exactly token: the hash in its name is no proof) has not
 * expired (whoever wrote that one made the same check), or every
 * manifest version it names is kept by every gc anyway
 * (manifest_version_kept_by_gc).  our_key is the retention just written.
 */
static bool
named_snapshot_safe_from_running_gc(RolloutStore *store, const char *token,
									const char *our_key)
{
	TimestampTz now = GetCurrentTimestamp();
	ManifestVersions *versions = &named_snapshot_parse(token, NULL)->versions;
	ListCell   *lc;

	foreach(lc, objstore_list_all(store->objstore, retention_prefix(store, token), NULL))
	{
		ObjectStoreEntry *entry = lfirst(lc);
		TimestampTz other_until;

		if (strcmp(entry->key, our_key) != 0 &&
			retention_until(entry->key, &other_until) && other_until > now &&
			retention_holds_token(store, entry->key, token))
			return true;
	}
	if (!manifest_version_kept_by_gc(store, rollout_key_base_manifest_prefix(store),
									 versions->base_version, now))
		return false;
	foreach(lc, versions->shards)
	{
		if (!manifest_version_kept_by_gc(store,
										 rollout_key_shard_manifest_prefix(store, lfirst(lc)),
										 versions->shard_versions[foreach_current_index(lc)],
										 now))
			return false;
	}
	return true;
}

void
named_snapshot_retain(RolloutStore *store, const char *token, TimestampTz until,
					  bool just_taken)
{
	char	   *key = psprintf("%s" INT64_FORMAT ".json",
							   retention_prefix(store, token), (int64) until);
	StringInfoData body;
	bool		first = true;
	bool		created;
	RolloutSnapshot *snapshot;

	rollout_check_writable(store, "retain a snapshot of");
	(void) named_snapshot_read(store, token);	/* checks store and syntax */
	initStringInfo(&body);
	appendStringInfoChar(&body, '{');
	json_append_member_text(&body, &first, "token", token);
	json_append_member_text(&body, &first, "until",
							timestamptz_to_str(until));
	appendStringInfoString(&body, "}\n");
	created = objstore_create_if_absent(store->objstore, key, body.data,
										body.len, objstore_new_put_id()) ==
		OBJSTORE_CREATED;

	/*
	 * The versions of a token just taken are the newest, which gc keeps for
	 * its grace period anyway.  An older token's may be in the middle of
	 * being collected by a gc that listed the retentions before this one
	 * existed (it deletes the objects before the manifests).  Every later gc
	 * sees the retention; a running one is harmless only while something else
	 * keeps the token (named_snapshot_safe_from_running_gc).  Finding the
	 * objects still there is not enough: that gc may delete them next.  The
	 * same retention found already written passed these checks then, and must
	 * not be removed here.
	 */
	if (just_taken || !created)
		return;
	snapshot = rollout_snapshot_at_versions(store,
											&named_snapshot_parse(token, NULL)->versions);
	if (snapshot == NULL || !named_snapshot_objects_exist(store, snapshot))
	{
		(void) objstore_delete(store->objstore, key);
		named_snapshot_raise_expired(store, token);
	}
	if (!named_snapshot_safe_from_running_gc(store, token, key))
	{
		(void) objstore_delete(store->objstore, key);
		ereport(ERROR,
				(errcode(ERRCODE_SNAPSHOT_TOO_OLD),
				 errmsg("snapshot \"%s\" of store \"%s\" can no longer be retained",
						store_token_for_message(token), store->name),
				 errdetail("The store changed after the snapshot was taken, more than rollout_fdw.min_gc_grace (%d s) ago, and no retention keeps the snapshot: a garbage collection running now may be removing what it reads.",
						   gc_min_grace_seconds()),
				 errhint("Retain a snapshot when taking it, with rollout_snapshot(tbl, retain_until => ...), or within rollout_fdw.min_gc_grace of the store changing; extend a retention before it expires.")));
	}
}

/*
 * Whether the retention at key holds exactly token: a 64-bit hash in its
 * name is no proof, and a text made to collide with another's token must
 * not release that one.  False when it is gone meanwhile.
 */
static bool
retention_holds_token(RolloutStore *store, const char *key, const char *token)
{
	StringInfoData body;

	initStringInfo(&body);
	if (!objstore_get(store->objstore, key, &body))
		return false;
	return strcmp(retention_body_token(&body, key), token) == 0;
}

/*
 * Retentions are found by the token's hash, whatever the token: one that is
 * not valid (a retention written into the store by hand, which makes gc keep
 * everything) can be released by its text too.  Only when nothing was
 * released does a token that is not valid, or is another store's, say so:
 * that is a mistake worth an error, not a release of nothing.
 */
int
named_snapshot_release(RolloutStore *store, const char *token)
{
	List	   *objects;
	ListCell   *lc;
	int			released = 0;

	rollout_check_writable(store, "release a snapshot of");
	objects = objstore_list_all(store->objstore,
								retention_prefix(store, token), NULL);
	foreach(lc, objects)
	{
		ObjectStoreEntry *entry = lfirst(lc);
		TimestampTz until;

		if (retention_until(entry->key, &until) &&
			retention_holds_token(store, entry->key, token) &&
			objstore_delete(store->objstore, entry->key))
			released++;
	}
	if (released > 0)
		return released;
	named_snapshot_check_of_store(store, named_snapshot_parse_or_raise(token),
								  token, "; nothing was released");
	return 0;
}

List *
named_snapshot_retentions(RolloutStore *store, TimestampTz now)
{
	List	   *objects = objstore_list_all(store->objstore,
											retention_prefix(store, NULL), NULL);
	List	   *retentions = NIL;
	ListCell   *lc;

	foreach(lc, objects)
	{
		ObjectStoreEntry *entry = lfirst(lc);
		RetainedSnapshot *retained;
		StringInfoData body;
		TimestampTz until;

		if (!retention_until(entry->key, &until))
			continue;			/* not a retention: left alone */
		retained = palloc0(sizeof(RetainedSnapshot));
		retained->entry = entry;
		retained->until = until;
		retentions = lappend(retentions, retained);
		if (until <= now)
			continue;
		initStringInfo(&body);
		if (!objstore_get(store->objstore, entry->key, &body))
			continue;			/* released meanwhile */
		retained->token = retention_body_token(&body, entry->key);
		retained->snapshot = named_snapshot_parse(retained->token, NULL);
	}
	return retentions;
}
