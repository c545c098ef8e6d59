/* rollout_fdw--0.7--0.8.sql: the change feed */

\echo Use "ALTER EXTENSION rollout_fdw UPDATE TO '0.8'" to load this file. \quit

CREATE FUNCTION rollout_changes(tbl regclass,
                                since text DEFAULT NULL,
                                max_rows int DEFAULT 10000,
                                OUT shard text,
                                OUT stamp timestamptz,
                                OUT op text,
                                OUT key text,
                                OUT "row" jsonb,
                                OUT next_since text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rollout_changes'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION rollout_changes(regclass, text, int) IS
  'the changes committed to a rollout table after the position since (NULL: the start; or a token of rollout_snapshot), at most max_rows, with the position to pass next time';
