/* rollout_fdw--0.3--0.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION rollout_fdw UPDATE TO '0.4'" to load this file. \quit

-- 0.4 adds rollout_stores(server): the stores at a server's location, what
-- IMPORT FOREIGN SCHEMA would import, with their cheap counts.  It needs
-- USAGE on the server, as IMPORT FOREIGN SCHEMA does, and reads with the
-- caller's user mapping.  A store it cannot open here is listed with NULL
-- counts and the reason in "problem".

CREATE FUNCTION rollout_stores(server name,
    OUT store text,
    OUT key text,
    OUT columns int,
    OUT row_count bigint,
    OUT base_rows bigint,
    OUT fragments int,
    OUT generations int,
    OUT unflushed_rows bigint,
    OUT bytes bigint,
    OUT problem text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rollout_stores'
LANGUAGE C STRICT;

COMMENT ON FUNCTION rollout_stores(name) IS
  'the stores at a rollout_fdw server''s location: key, column count and cheap counts';
