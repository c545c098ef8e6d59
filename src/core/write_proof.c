/*-------------------------------------------------------------------------
 *
 * write_proof.c
 *		Confirm that credentials write the store a slot's writer claimed.
 *
 * Credentials that reach a location may reach different stores there: RGW
 * keeps a bucket per tenant under one name, so two users' tables of the same
 * location and store name may address two buckets.  A slot of shared memory
 * serves one of them (shared_store.c).  Other credentials prove that they
 * reach it by reading the claim's fence marker, whose put id only the claim
 * knew; but anyone who can read the store can copy the fence into a bucket
 * of their own, and would pass.  For reading that does no harm: the copy
 * shows that its author reads the store.  Writing through the slot would:
 * a flush would move the slot's rows into the copier's bucket and take them
 * out of the memtable, and a commit would take the store's WAL positions.
 *
 * So a handle that is to write through a slot also writes a probe with its
 * own credentials, under the shard's _probes/, and the slot's claim reads
 * it back with the credentials it was made with, which the slot keeps for
 * that (WRITE_PROOF_ACCESS_LEN bytes of its shared memory: the location,
 * the server and user mapping options, and whether the server's environment
 * credentials were allowed).  Only credentials that write where the claim
 * wrote make the probe appear there, and nobody can forge that by reading.
 * The probe is deleted at once; one left by an interrupted proof is removed
 * by the shard's gc (lsm/gc.c).
 *
 * The kept access is never shown: no view or function returns it, and an
 * error while it is used names the store only.  It stays in the cluster's
 * memory, as the catalog's user mappings stay in its shared buffers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "nodes/makefuncs.h"
#include "utils/memutils.h"

#include "rollout/objstore.h"
#include "rollout/store_keys.h"
#include "rollout/write_proof.h"

/* Append a NUL-terminated text to buffer at *used; false when it is full. */
static bool
access_append(char *buffer, Size size, Size *used, const char *text)
{
	Size		length = strlen(text) + 1;

	if (*used + length > size)
		return false;
	memcpy(buffer + *used, text, length);
	*used += length;
	return true;
}

/*
 * See write_proof.h.  The layout: the location, "1" or "0" for the
 * environment credentials, then each option's name and value, every part
 * ending in a NUL.
 */
Size
write_proof_keep_access(RolloutStore *store, char *buffer, Size size)
{
	Size		used = 0;
	bool		fits;
	ListCell   *lc;

	fits = access_append(buffer, size, &used, store->objstore->location) &&
		access_append(buffer, size, &used, store->access_environment ? "1" : "0");
	foreach(lc, store->access_options)
	{
		DefElem    *option = lfirst_node(DefElem, lc);

		fits = fits &&
			access_append(buffer, size, &used, option->defname) &&
			access_append(buffer, size, &used, defGetString(option));
	}
	if (!fits)
	{
		buffer[0] = '\0';
		return 0;
	}
	return used;
}

/* Wipe the values of options parsed from a kept access. */
static void
access_wipe_options(List *options)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		char	   *value = strVal(lfirst_node(DefElem, lc)->arg);

		explicit_bzero(value, strlen(value));
	}
}

/*
 * Read key through claimer into out; true when it exists.  When the store
 * refuses claimer's credentials (ERRCODE_INSUFFICIENT_PRIVILEGE) *refused is
 * set instead of an ERROR: the request was over when the error was raised,
 * and nothing here holds locks or buffers, so the error can be dropped.
 * Anything else is raised as it came.
 */
static bool
claimer_read(ObjectStore *claimer, const char *key, StringInfo out, bool *refused)
{
	MemoryContext context = CurrentMemoryContext;
	bool		found = false;

	*refused = false;
	PG_TRY();
	{
		found = objstore_get(claimer, key, out);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_INSUFFICIENT_PRIVILEGE)
			PG_RE_THROW();
		FlushErrorState();
		FreeErrorData(edata);
		*refused = true;
	}
	PG_END_TRY();
	return found;
}

/*
 * Whether the probe at key reads back as content through the store access
 * (write_proof_keep_access) reaches.  A refusal of the probe's read is not
 * yet a refusal of the credentials: S3 answers 403 for a key that does not
 * exist to credentials that may not list the bucket.  So the claim's fence
 * at fence_key, which exists, is read too: refused as well, the credentials
 * are stale; read, the probe is simply not there.  The handle and the
 * options parsed for it live in a context of their own, whose secrets are
 * wiped before it goes (what the object-store backend copies of them goes
 * with it unwiped).
 */
static WriteProof
access_reads_probe(const char *access, Size access_len, const char *key,
				   const char *content, const char *fence_key)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext,
												  "rollout write proof",
												  ALLOCSET_SMALL_SIZES);
	MemoryContext oldcontext = MemoryContextSwitchTo(context);
	const char *location = access;
	const char *part = location + strlen(location) + 1;
	bool		environment = strcmp(part, "1") == 0;
	List	   *options = NIL;
	ObjectStore *volatile claimer = NULL;
	WriteProof	proof = WRITE_PROOF_REFUTED;

	for (part += strlen(part) + 1; part < access + access_len;)
	{
		const char *name = part;
		const char *value = name + strlen(name) + 1;

		options = lappend(options, makeDefElem(pstrdup(name),
											   (Node *) makeString(pstrdup(value)), -1));
		part = value + strlen(value) + 1;
	}
	PG_TRY();
	{
		StringInfoData found;
		bool		refused;

		claimer = objstore_open(location, options, environment);
		initStringInfo(&found);
		if (claimer_read(claimer, key, &found, &refused))
			proof = found.len == (int) strlen(content) &&
				memcmp(found.data, content, found.len) == 0 ?
				WRITE_PROOF_CONFIRMED : WRITE_PROOF_REFUTED;
		else if (refused)
		{
			resetStringInfo(&found);
			(void) claimer_read(claimer, fence_key, &found, &refused);
			proof = refused ? WRITE_PROOF_STALE : WRITE_PROOF_REFUTED;
		}
	}
	PG_FINALLY();
	{
		if (claimer != NULL)
			objstore_close(claimer);
		access_wipe_options(options);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcontext);
	MemoryContextDelete(context);
	return proof;
}

/* errcontext of a proof: the store only, never whose access it reads with */
static void
write_proof_error_context(void *arg)
{
	errcontext("while confirming that the credentials of this table write the store \"%s\" that this cluster's writer claimed",
			   (const char *) arg);
}

/* See write_proof.h. */
WriteProof
write_proof_confirm(RolloutStore *store, const char *access, Size access_len,
					int64 claim_position)
{
	ErrorContextCallback callback;
	char	   *key;
	char	   *content = objstore_new_put_id();
	WriteProof	proof = WRITE_PROOF_REFUTED;

	if (access_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot confirm that these credentials write store \"%s\"",
						store->name),
				 errdetail("The options of the server and user mapping this cluster's writer of the store claimed it with are longer than the %d bytes its shared memory keeps of them.",
						   WRITE_PROOF_ACCESS_LEN),
				 errhint("Write the store through the same user mapping as that writer, or shorten the options.")));

	callback.callback = write_proof_error_context;
	callback.arg = store->name;
	callback.previous = error_context_stack;
	error_context_stack = &callback;

	key = psprintf("%s%s.probe", rollout_key_write_probe_prefix(store, store->shard),
				   objstore_new_put_id());
	if (objstore_create_if_absent(store->objstore, key, content, strlen(content),
								  content) == OBJSTORE_CREATED)
	{
		proof = access_reads_probe(access, access_len, key, content,
								   rollout_key_wal(store, store->shard, claim_position));
		(void) objstore_delete(store->objstore, key);
	}

	error_context_stack = callback.previous;
	return proof;
}
