/* rollout_fdw--0.1.sql */

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

-- Checks that need the table's columns, which an FDW validator cannot see:
-- run at the end of CREATE/ALTER FOREIGN TABLE by the event trigger below.
CREATE FUNCTION rollout_fdw_check_table(regclass)
RETURNS void
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FUNCTION rollout_fdw_ddl_check()
RETURNS event_trigger
LANGUAGE plpgsql
AS $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT objid FROM pg_event_trigger_ddl_commands()
           WHERE object_type = 'foreign table'
  LOOP
    PERFORM @extschema@.rollout_fdw_check_table(r.objid::regclass);
  END LOOP;
END
$$;

CREATE EVENT TRIGGER rollout_fdw_ddl_check
  ON ddl_command_end
  WHEN TAG IN ('CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE')
  EXECUTE FUNCTION rollout_fdw_ddl_check();

CREATE FUNCTION rollout_flush(tbl regclass,
                              OUT rows_flushed bigint,
                              OUT generation bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'rollout_flush'
LANGUAGE C;

COMMENT ON FUNCTION rollout_flush(regclass) IS
  'seal this cluster''s WAL tail of a rollout table''s store into one generation';

REVOKE ALL ON FUNCTION rollout_fdw_check_table(regclass) FROM PUBLIC;
