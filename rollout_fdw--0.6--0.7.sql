/* rollout_fdw--0.6--0.7.sql: named snapshots */

\echo Use "ALTER EXTENSION rollout_fdw UPDATE TO '0.7'" to load this file. \quit

CREATE FUNCTION rollout_snapshot(tbl regclass,
                                 retain_until timestamptz DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'rollout_snapshot'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION rollout_snapshot(regclass, timestamptz) IS
  'a token naming a rollout table''s store as it is now (after flushing this cluster''s shard), for rollout_fdw.as_of; retained until retain_until when given';

CREATE FUNCTION rollout_retain(tbl regclass, token text, until timestamptz)
RETURNS void
AS 'MODULE_PATHNAME', 'rollout_retain'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION rollout_retain(regclass, text, timestamptz) IS
  'keep what a named snapshot reads from rollout_gc until the given time';

CREATE FUNCTION rollout_release(tbl regclass, token text)
RETURNS int
AS 'MODULE_PATHNAME', 'rollout_release'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION rollout_release(regclass, text) IS
  'remove every retention of a named snapshot, so that rollout_gc may collect what only it read';

CREATE FUNCTION rollout_retained(tbl regclass,
                                 OUT token text,
                                 OUT until timestamptz,
                                 OUT expired boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rollout_retained'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION rollout_retained(regclass) IS
  'the retentions of a rollout table''s store: token (NULL once expired), until, expired';
