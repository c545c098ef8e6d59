/* rollout_fdw--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION rollout_fdw UPDATE TO '0.2'" to load this file. \quit

-- 0.2 closes two privilege gaps of 0.1 in existing databases:
--  * the event trigger that pins a table's store also fires on ALTER TABLE
--    (which alters foreign tables too), and refuses dropping the pin;
--  * rollout_stat_stores, which shows every store of the cluster, is for
--    pg_read_all_stats only.
-- (The other checks of 0.2 are in the shared library and need no SQL.)

DROP EVENT TRIGGER rollout_fdw_ddl_check;
DROP FUNCTION rollout_fdw_ddl_check();
DROP FUNCTION rollout_fdw_check_table(regclass);

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

REVOKE ALL ON FUNCTION rollout_stat_stores() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rollout_stat_stores() TO pg_read_all_stats;
GRANT SELECT ON rollout_stat_stores TO pg_read_all_stats;
