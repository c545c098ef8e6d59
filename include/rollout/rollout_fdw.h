/*-------------------------------------------------------------------------
 *
 * rollout_fdw.h
 *		Settings (GUCs) shared by every layer of rollout_fdw.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROLLOUT_FDW_H
#define ROLLOUT_FDW_H

/* rollout_fdw.shard_id: overrides the shard id (default: system identifier) */
extern char *rollout_shard_id_setting;

/* rollout_fdw.transaction_buffer_size (kB): rows kept in memory per transaction
 * before they spill to a temporary file */
extern int	rollout_transaction_buffer_kb;

/* rollout_fdw.rows_per_group: rows per segment row group */
extern int	rollout_rows_per_group;

/* rollout_fdw.max_wal_append_attempts: positions a commit tries before giving up */
extern int	rollout_max_wal_append_attempts;

/* rollout_fdw.min_gc_grace (seconds): the shortest grace rollout_gc accepts;
 * outputs waiting longer than half of it are abandoned, not committed */
extern int	rollout_min_gc_grace_seconds;

/* rollout_fdw.ingest_threshold (kB): a transaction's rows past this size
 * are staged as an ingest segment instead of going into its WAL entry */
extern int	rollout_ingest_threshold_kb;

/* rollout_fdw.merge_max_bytes (kB): input bytes one merge pass reads at most */
extern int	rollout_merge_max_kb;

/* A path for a local scratch file (segments being built), unique per call. */
extern char *rollout_scratch_file_path(const char *purpose);

#endif							/* ROLLOUT_FDW_H */
