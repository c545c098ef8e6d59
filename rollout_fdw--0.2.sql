/* rollout_fdw--0.2.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION rollout_fdw" to load this file. \quit

CREATE FUNCTION rollout_fdw_handler()
RETURNS fdw_handler
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FUNCTION rollout_fdw_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER rollout_fdw
  HANDLER rollout_fdw_handler
  VALIDATOR rollout_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER rollout_fdw IS
  'rollout stores: an LSM on object storage exposed as foreign tables';

-- Checks that need the table's columns, which an FDW validator cannot see,
-- run at the end of CREATE FOREIGN TABLE and of every ALTER of a foreign
-- table (ALTER FOREIGN TABLE, and ALTER TABLE, which also alters foreign
-- tables) by the event trigger below.  rollout_fdw_check_table() raises an
-- error for a bad rollout table; at creation it returns the store name to
-- pin when the table relies on the default (its own name), so that renaming
-- the table later cannot switch it to another store, and after an ALTER it
-- refuses a table whose pin was dropped.  It reads only the catalogs;
-- anyone may call it.
CREATE FUNCTION rollout_fdw_check_table(tbl regclass, creating boolean)
RETURNS text
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FUNCTION rollout_fdw_ddl_check()
RETURNS event_trigger
LANGUAGE plpgsql
AS $$
DECLARE
  r record;
  pinned text;
BEGIN
  FOR r IN SELECT objid FROM pg_event_trigger_ddl_commands()
           WHERE object_type = 'foreign table'
  LOOP
    pinned := @extschema@.rollout_fdw_check_table(r.objid::regclass,
                                                  TG_TAG = 'CREATE FOREIGN TABLE');
    IF pinned IS NOT NULL THEN
      EXECUTE format('ALTER FOREIGN TABLE %s OPTIONS (ADD store %L)',
                     r.objid::regclass, pinned);
    END IF;
  END LOOP;
END
$$;

CREATE EVENT TRIGGER rollout_fdw_ddl_check
  ON ddl_command_end
  WHEN TAG IN ('CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE', 'ALTER TABLE')
  EXECUTE FUNCTION rollout_fdw_ddl_check();

CREATE FUNCTION rollout_flush(tbl regclass,
                              OUT rows_flushed bigint,
                              OUT generation bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'rollout_flush'
LANGUAGE C;

COMMENT ON FUNCTION rollout_flush(regclass) IS
  'seal this cluster''s WAL tail of a rollout table''s store into one generation';


CREATE FUNCTION rollout_merge(tbl regclass,
                              max_generations int DEFAULT NULL,
                              flush_first boolean DEFAULT true,
                              OUT generations_merged int,
                              OUT rows_merged bigint,
                              OUT fragments_added int)
RETURNS record
AS 'MODULE_PATHNAME', 'rollout_merge'
LANGUAGE C;

COMMENT ON FUNCTION rollout_merge(regclass, int, boolean) IS
  'fold this cluster''s oldest generations of a rollout table''s store into one base fragment';

CREATE FUNCTION rollout_compact(tbl regclass,
                                min_fragments int DEFAULT 5,
                                target_rows_per_fragment bigint DEFAULT 1048576,
                                max_source_fragments int DEFAULT NULL,
                                OUT fragments_before int,
                                OUT fragments_after int,
                                OUT rows_written bigint,
                                OUT versions_dropped bigint,
                                OUT skipped_reason text)
RETURNS record
AS 'MODULE_PATHNAME', 'rollout_compact'
LANGUAGE C;

COMMENT ON FUNCTION rollout_compact(regclass, int, bigint, int) IS
  'rewrite base fragments of a rollout table''s store into fewer, deduplicated fragments';

CREATE FUNCTION rollout_should_compact(tbl regclass,
                                       min_fragments int DEFAULT 5,
                                       quiet_hours text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rollout_should_compact'
LANGUAGE C;

COMMENT ON FUNCTION rollout_should_compact(regclass, int, text) IS
  'true when a rollout table''s base has min_fragments fragments and the UTC hour is outside quiet_hours (''22-06'')';

CREATE FUNCTION rollout_compaction_stats(tbl regclass,
                                         OUT fragments int,
                                         OUT total_compactions bigint,
                                         OUT last_compaction timestamptz,
                                         OUT last_error text)
RETURNS record
AS 'MODULE_PATHNAME', 'rollout_compaction_stats'
LANGUAGE C;

COMMENT ON FUNCTION rollout_compaction_stats(regclass) IS
  'compaction history of a rollout table''s store, kept in its base manifest';

CREATE FUNCTION rollout_observe(tbl regclass,
                                exact boolean DEFAULT false,
                                OUT row_count bigint,
                                OUT exact_row_count bigint,
                                OUT base_rows bigint,
                                OUT fragments int,
                                OUT generations int,
                                OUT generation_rows bigint,
                                OUT unflushed_rows bigint,
                                OUT bytes bigint,
                                OUT base_version bigint,
                                OUT writer_epoch bigint,
                                OUT wal_entries int)
RETURNS record
AS 'MODULE_PATHNAME', 'rollout_observe'
LANGUAGE C;

COMMENT ON FUNCTION rollout_observe(regclass, boolean) IS
  'counts and sizes of a rollout table''s store: cheap from metadata, exact (= count(*)) when asked';

CREATE FUNCTION rollout_gc(tbl regclass,
                           grace interval DEFAULT '1 hour',
                           OUT objects_deleted bigint,
                           OUT bytes_freed bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'rollout_gc'
LANGUAGE C;

COMMENT ON FUNCTION rollout_gc(regclass, interval) IS
  'delete objects of a rollout table''s store that no manifest current within the grace period references';

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
    OUT errors bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rollout_stat_stores'
LANGUAGE C STRICT;

CREATE VIEW rollout_stat_stores AS SELECT * FROM rollout_stat_stores();

COMMENT ON VIEW rollout_stat_stores IS
  'per-store counters of this cluster''s shared-memory writer: appends, WAL PUTs, memtable, maintenance, errors';

-- The counters cover every store of the cluster, whoever owns it: their
-- locations, names and last errors are for monitoring roles, as with
-- pg_stat_statements (pg_read_all_stats, which pg_monitor includes).
REVOKE ALL ON FUNCTION rollout_stat_stores() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rollout_stat_stores() TO pg_read_all_stats;
GRANT SELECT ON rollout_stat_stores TO pg_read_all_stats;
