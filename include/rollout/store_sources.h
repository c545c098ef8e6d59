/*-------------------------------------------------------------------------
 *
 * store_sources.h
 *		Segments of a store as the segment reader reads them
 *		(core/store_sources.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_STORE_SOURCES_H
#define ROLLOUT_STORE_SOURCES_H

#include "rollout/segment.h"
#include "rollout/store.h"

/*
 * A SegmentSource reading an object of this store, in CurrentMemoryContext.
 * size_hint is the object's size when known (from a manifest or a listing),
 * else -1: a backend without suffix ranges then reads a footer with one
 * request instead of two.  manifest_stamp is the newest stamp the manifest
 * gives the object (its max_ts), else -1: a generation's footer is cached
 * only with it (store_sources.c).
 */
extern SegmentSource *rollout_segment_source(RolloutStore *store, const char *key,
											 int64 size_hint,
											 int64 manifest_stamp);

/* A SegmentSource reading a segment in a local file. */
extern SegmentSource *rollout_local_segment_source(const char *path);

/* Did a read made ahead for source find the object gone? */
extern bool rollout_segment_source_missing(SegmentSource *source);

/*
 * A read to make ahead of time for a source of rollout_segment_source():
 * the tail of length bytes (tail = true), or length bytes at offset.
 */
typedef struct SegmentPrefetch
{
	SegmentSource *source;
	bool		tail;
	int64		offset;
	int64		length;
} SegmentPrefetch;

/*
 * Make the reads in one batch of concurrent requests (objstore_get_many)
 * and keep each result in its source, where the segment reader finds it
 * when it asks for exactly that range, once.  A read that finds the object
 * gone is kept too: the reader then sees "does not exist", as it would have.
 */
extern void rollout_segment_sources_prefetch(RolloutStore *store,
											 SegmentPrefetch *prefetches,
											 int count);

/*
 * Open the segment readers of many objects, their footers fetched in
 * batches of concurrent requests, and call callback(reader, i, arg) for
 * keys[i] in order: reader is NULL when the object does not exist, and is
 * closed when callback returns.  sizes (may be NULL) are size hints.
 */
typedef void (*SegmentFooterCallback) (SegmentReader *reader, int index,
									   void *arg);
extern void rollout_segment_footers(RolloutStore *store, char *const *keys,
									const int64 *sizes, int count,
									SegmentFooterCallback callback, void *arg);

#endif							/* ROLLOUT_STORE_SOURCES_H */
