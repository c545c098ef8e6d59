/* rollout_fdw--0.5--0.6.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION rollout_fdw UPDATE TO '0.6'" to load this file. \quit

-- 0.6 pipelines WAL writes, and rollout_stat_stores shows it:
-- wal_puts_pipelined, the WAL PUTs begun while an earlier position of the
-- shard was still being written, and wal_fillers, the positions filled with an
-- empty entry after a failed PUT.  The view and its function are made again
-- with the new columns, with the privileges of 0.5.

DROP VIEW rollout_stat_stores;
DROP FUNCTION rollout_stat_stores();

CREATE FUNCTION rollout_stat_stores(
    OUT location text,
    OUT store text,
    OUT shard text,
    OUT writer_epoch bigint,
    OUT wal_tip bigint,
    OUT rows_appended bigint,
    OUT bytes_appended bigint,
    OUT transactions_committed bigint,
    OUT transactions_failed bigint,
    OUT wal_puts bigint,
    OUT put_latency_mean_ms float8,
    OUT put_latency_max_ms float8,
    OUT memtable_rows bigint,
    OUT memtable_bytes bigint,
    OUT memtable_batches bigint,
    OUT backpressure_waits bigint,
    OUT flushes bigint,
    OUT last_flush_ms float8,
    OUT merges bigint,
    OUT last_merge_ms float8,
    OUT compactions bigint,
    OUT last_compaction_ms float8,
    OUT gc_runs bigint,
    OUT last_gc_ms float8,
    OUT last_error text,
    OUT last_error_at timestamptz,
    OUT shared_writer boolean,
    OUT errors bigint,
    OUT cache_hits bigint,
    OUT cache_misses bigint,
    OUT cache_hit_bytes bigint,
    OUT cache_miss_bytes bigint,
    OUT rows_deleted bigint,
    OUT wal_puts_pipelined bigint,
    OUT wal_fillers bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rollout_stat_stores'
LANGUAGE C STRICT;

CREATE VIEW rollout_stat_stores AS SELECT * FROM rollout_stat_stores();

COMMENT ON VIEW rollout_stat_stores IS
  'per-store counters of this cluster''s shared-memory writer and reads: appends, WAL PUTs, memtable, maintenance, errors, disk cache, deletes, pipelined WAL writes';

REVOKE ALL ON FUNCTION rollout_stat_stores() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rollout_stat_stores() TO pg_read_all_stats;
GRANT SELECT ON rollout_stat_stores TO pg_read_all_stats;
