/* rollout_fdw--0.8--0.9.sql: the DDL check names nothing through search_path */

\echo Use "ALTER EXTENSION rollout_fdw UPDATE TO '0.9'" to load this file. \quit

/*
 * The event trigger runs on every CREATE FOREIGN TABLE, ALTER FOREIGN TABLE
 * and ALTER TABLE, as whoever runs it: a superuser too.  Its body named
 * format(), pg_event_trigger_ddl_commands(), the = operator and its types
 * bare, resolved through the caller's search_path.  A role allowed to create
 * objects in a schema on that path could define, say, format(text, regclass,
 * text), a closer match than pg_catalog's variadic format(), and have its
 * SQL run with a superuser's rights the next time one created a rollout
 * table.  Every name is now qualified.  (A pinned search_path would do the
 * same, but would also qualify the type names in the checks' messages.)
 */
CREATE OR REPLACE FUNCTION @extschema@.rollout_fdw_ddl_check()
RETURNS event_trigger
LANGUAGE plpgsql
AS $$
DECLARE
  r pg_catalog.record;
  pinned pg_catalog.text;
BEGIN
  FOR r IN SELECT c.objid FROM pg_catalog.pg_event_trigger_ddl_commands() AS c
           WHERE c.object_type OPERATOR(pg_catalog.=) 'foreign table'
  LOOP
    pinned := @extschema@.rollout_fdw_check_table(r.objid::pg_catalog.regclass,
                                                  TG_TAG OPERATOR(pg_catalog.=) 'CREATE FOREIGN TABLE');
    IF pinned IS NOT NULL THEN
      EXECUTE pg_catalog.format('ALTER FOREIGN TABLE %s OPTIONS (ADD store %L)',
                                r.objid::pg_catalog.regclass, pinned);
    END IF;
  END LOOP;
END
$$;
