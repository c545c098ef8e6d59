--
-- Option validation, table checks, schema mismatches and privileges.
--
-- unknown options at every level
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (colour 'blue');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (store 'x');
CREATE FOREIGN DATA WRAPPER rollout_fdw2 HANDLER rollout_fdw_handler VALIDATOR rollout_fdw_validator OPTIONS (location 'file:///tmp');

-- locations
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'relative/path');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location '/tmp/no-scheme');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://tmp/relative');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file:///tmp/../etc');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'ftp://host/x');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 's3://Bad_Bucket/prefix');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 's3://ab');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 's3://bucket/a/../b');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 's3://bucket/./b');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'az://account');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'az://Account/container');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'az://account/c');
-- well-formed remote locations are accepted (nothing is contacted yet)
CREATE SERVER good_s3 FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 's3://my-bucket.2026/rollouts/prod/');
CREATE SERVER good_az FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'az://myaccount/rollouts');
DROP SERVER good_s3;
DROP SERVER good_az;

CREATE SERVER v_server FOREIGN DATA WRAPPER rollout_fdw;
ALTER SERVER v_server OPTIONS (ADD location 'file:///tmp/../x');

-- store names
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (store 'a/b');
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (store '..');
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (store 'x..y');
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (store '');
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (store '_tmp');
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (store 'sp ace');
-- other table options
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (key '');
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (batch_size '0');
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (batch_size 'many');
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (read_wal_tail 'perhaps');
CREATE FOREIGN TABLE bad_table (id text) SERVER v_server OPTIONS (location 'file:///tmp');

-- the key column must exist and be sortable
CREATE FOREIGN TABLE bad_table (rid text) SERVER v_server;
CREATE FOREIGN TABLE bad_table (rid text) SERVER v_server OPTIONS (key 'nope');
CREATE FOREIGN TABLE bad_table (id point) SERVER v_server;
CREATE FOREIGN TABLE bad_table (id json) SERVER v_server;
SELECT count(*) FROM pg_class WHERE relname = 'bad_table';

CREATE FOREIGN TABLE v_table (id text, n int) SERVER v_server OPTIONS (store 'validation_store');
ALTER FOREIGN TABLE v_table DROP COLUMN id;
ALTER FOREIGN TABLE v_table OPTIONS (ADD key 'missing');
ALTER FOREIGN TABLE v_table OPTIONS (ADD key 'n');
ALTER FOREIGN TABLE v_table OPTIONS (DROP key);

-- a store's schema is fixed by its first table
INSERT INTO v_table VALUES ('k1', 1);
CREATE FOREIGN TABLE v_changed_type (id text, n text) SERVER v_server OPTIONS (store 'validation_store');
SELECT * FROM v_changed_type;
INSERT INTO v_changed_type VALUES ('k2', 'two');
CREATE FOREIGN TABLE v_missing_column (id text) SERVER v_server OPTIONS (store 'validation_store');
SELECT * FROM v_missing_column;
CREATE FOREIGN TABLE v_extra_column (id text, n int, extra int) SERVER v_server OPTIONS (store 'validation_store');
SELECT * FROM v_extra_column;
CREATE FOREIGN TABLE v_other_key (id text, n int) SERVER v_server OPTIONS (store 'validation_store', key 'n');
SELECT * FROM v_other_key;
-- column order may differ; typmods do not matter
CREATE FOREIGN TABLE v_reordered (n int, id text) SERVER v_server OPTIONS (store 'validation_store');
SELECT * FROM v_reordered;
CREATE FOREIGN TABLE v_varchar (id varchar(10), n int) SERVER v_server OPTIONS (store 'validation_varchar');
INSERT INTO v_varchar VALUES ('a', 1);
CREATE FOREIGN TABLE v_varchar_wider (id varchar(20), n int) SERVER v_server OPTIONS (store 'validation_varchar');
SELECT * FROM v_varchar_wider;
-- nothing was written by the refused tables
SELECT * FROM v_table;

-- maintenance functions check their argument and the caller
SELECT * FROM rollout_flush(NULL);
SELECT * FROM rollout_flush('pg_class');
CREATE TABLE v_heap (id text);
SELECT * FROM rollout_flush('v_heap');
CREATE FOREIGN DATA WRAPPER v_other_fdw;
CREATE SERVER v_other_server FOREIGN DATA WRAPPER v_other_fdw;
CREATE FOREIGN TABLE v_other (id text) SERVER v_other_server;
SELECT * FROM rollout_flush('v_other');
CREATE ROLE rollout_v_stranger;
GRANT SELECT ON v_table TO rollout_v_stranger;
SET ROLE rollout_v_stranger;
SELECT count(*) FROM v_table;
SELECT * FROM rollout_flush('v_table');
INSERT INTO v_table VALUES ('k3', 3);
RESET ROLE;
-- a member of the owning role may flush
CREATE ROLE rollout_v_owner;
ALTER FOREIGN TABLE v_table OWNER TO rollout_v_owner;
GRANT rollout_v_owner TO rollout_v_stranger;
SET ROLE rollout_v_stranger;
SELECT rows_flushed FROM rollout_flush('v_table');
RESET ROLE;

-- GUCs
SET rollout_fdw.shard_id = 'no/slash';
SET rollout_fdw.shard_id = 'shard-B_2';
RESET rollout_fdw.shard_id;
SET rollout_fdw.no_such_setting = 1;
SET rollout_fdw.rows_per_group = 0;

DROP FOREIGN TABLE v_other;
DROP SERVER v_other_server;
DROP FOREIGN DATA WRAPPER v_other_fdw;
DROP FOREIGN TABLE v_table;
DROP OWNED BY rollout_v_stranger;
DROP ROLE rollout_v_stranger;
DROP ROLE rollout_v_owner;

-- an unusable location is a clear error naming it, never a crash
CREATE SERVER v_unwritable FOREIGN DATA WRAPPER rollout_fdw
    OPTIONS (location 'file:///proc/rollout_fdw_cannot_exist');
CREATE FOREIGN TABLE v_nowhere (id text) SERVER v_unwritable;
SELECT count(*) FROM v_nowhere;
INSERT INTO v_nowhere VALUES ('x');

-- the default store name is pinned at CREATE, so a rename keeps the store
CREATE FOREIGN TABLE v_pinned (id text) SERVER v_server;
SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = 'v_pinned'::regclass;
INSERT INTO v_pinned VALUES ('kept');
ALTER FOREIGN TABLE v_pinned RENAME TO v_renamed;
SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = 'v_renamed'::regclass;
SELECT * FROM v_renamed;

-- the event trigger does not get in the way of other wrappers' tables or
-- of non-superusers
CREATE FOREIGN DATA WRAPPER v_dummy_fdw;
CREATE SERVER v_dummy_server FOREIGN DATA WRAPPER v_dummy_fdw;
CREATE ROLE rollout_v_creator;
GRANT USAGE ON FOREIGN SERVER v_dummy_server TO rollout_v_creator;
GRANT USAGE ON FOREIGN SERVER v_server TO rollout_v_creator;
GRANT CREATE ON SCHEMA public TO rollout_v_creator;
SET ROLE rollout_v_creator;
CREATE FOREIGN TABLE v_dummy (id int) SERVER v_dummy_server;
CREATE FOREIGN TABLE v_creators (id text) SERVER v_server;
CREATE FOREIGN TABLE v_creators_bad (x text) SERVER v_server;
RESET ROLE;
DROP OWNED BY rollout_v_creator;
DROP ROLE rollout_v_creator;
DROP SERVER v_dummy_server;
DROP FOREIGN DATA WRAPPER v_dummy_fdw;

-- object-store options: values are checked, and credentials belong in user
-- mappings, never in server options
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (url_style 'sideways');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (request_timeout '0');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (connect_timeout 'soon');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (endpoint 'ftp://example');
-- an endpoint is where names are appended: no query, fragment or user
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (endpoint 'http://127.0.0.1:9/admin#');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (endpoint 'http://127.0.0.1:9/?x=');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (endpoint 'http://me@127.0.0.1:9');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (endpoint 'http://127.0.0.1:9/a b');
-- paths go out as they are: no dot parts that would name other objects
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (endpoint 'http://127.0.0.1:9/a/../admin');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (verify_tls 'maybe');
CREATE SERVER bad_server FOREIGN DATA WRAPPER rollout_fdw OPTIONS (secret_access_key 'leak');
CREATE SERVER v_remote FOREIGN DATA WRAPPER rollout_fdw
    OPTIONS (endpoint 'http://127.0.0.1:9', region 'eu-west-1', url_style 'path',
             connect_timeout '2', request_timeout '5', verify_tls 'true');
CREATE USER MAPPING FOR CURRENT_USER SERVER v_remote
    OPTIONS (access_key_id 'AKIDEXAMPLE', secret_access_key 'not-a-real-secret');
CREATE USER MAPPING FOR PUBLIC SERVER v_remote OPTIONS (location 'file:///tmp');
CREATE USER MAPPING FOR PUBLIC SERVER v_remote OPTIONS (sas_token 'sv=2021&sig=x', account_key 'a2V5');
DROP USER MAPPING FOR PUBLIC SERVER v_remote;
-- a line break in a credential would start a request header of the role's
-- choosing; the message names the option, never the value
CREATE USER MAPPING FOR PUBLIC SERVER v_remote OPTIONS (session_token E'tok\r\nX-Amz-Evil: 1');
CREATE USER MAPPING FOR PUBLIC SERVER v_remote OPTIONS (sas_token E'sv=2021\n&sig=x');
DROP USER MAPPING FOR CURRENT_USER SERVER v_remote;
DROP SERVER v_remote;

-- servers whose stores live on this machine (no location: the default
-- folder in the data directory; or file://) are written as the server's OS
-- user, so only superusers and pg_write_server_files may define them, as
-- file_fdw asks; ca_file names a server file: pg_read_server_files
CREATE ROLE rollout_v_maker;
GRANT USAGE ON FOREIGN DATA WRAPPER rollout_fdw TO rollout_v_maker;
SET ROLE rollout_v_maker;
CREATE SERVER v_mine FOREIGN DATA WRAPPER rollout_fdw;
CREATE SERVER v_mine FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file:///tmp/rollout_v_mine');
CREATE SERVER v_mine FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 's3://my-bucket/x', ca_file '/etc/ssl/certs/ca-certificates.crt');
CREATE SERVER v_mine FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 's3://my-bucket/x');
ALTER SERVER v_mine OPTIONS (SET location 'file:///tmp/rollout_v_mine');
ALTER SERVER v_mine OPTIONS (DROP location);
ALTER SERVER v_mine OPTIONS (ADD ca_file '/etc/ssl/certs/ca-certificates.crt');
-- values read from a trusted server's stores go unchecked: superusers only
ALTER SERVER v_mine OPTIONS (ADD trusted 'true');
ALTER SERVER v_mine OPTIONS (ADD trusted 'false');
ALTER SERVER v_mine OPTIONS (DROP trusted);
ALTER SERVER v_mine OPTIONS (ADD trusted 'maybe');
RESET ROLE;
GRANT pg_write_server_files, pg_read_server_files TO rollout_v_maker;
SET ROLE rollout_v_maker;
ALTER SERVER v_mine OPTIONS (SET location 'file:///tmp/rollout_v_mine', ADD ca_file '/etc/ssl/certs/ca-certificates.crt');
CREATE SERVER v_mine_default FOREIGN DATA WRAPPER rollout_fdw;
RESET ROLE;
SELECT srvname, srvoptions FROM pg_foreign_server WHERE srvname LIKE 'v_mine%' ORDER BY 1;
DROP SERVER v_mine, v_mine_default;
DROP OWNED BY rollout_v_maker;
DROP ROLE rollout_v_maker;

-- the store a table uses is pinned at CREATE; no later ALTER (ALTER TABLE
-- included) or RENAME can take the pin away, and a table's name must be a
-- valid store name for the default to apply
CREATE FOREIGN TABLE "payroll/shards" (id text) SERVER v_server;
CREATE FOREIGN TABLE "_hidden" (id text) SERVER v_server;
CREATE FOREIGN TABLE "payroll/shards" (id text) SERVER v_server OPTIONS (store 'payroll_shards');
DROP FOREIGN TABLE "payroll/shards";
CREATE FOREIGN TABLE v_pin (id text) SERVER v_server;
ALTER TABLE v_pin OPTIONS (DROP store);
ALTER FOREIGN TABLE v_pin OPTIONS (DROP store);
ALTER TABLE v_pin RENAME TO "payroll/shards";
SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = '"payroll/shards"'::regclass;
ALTER TABLE "payroll/shards" OPTIONS (SET store 'x/y');
-- naming another store explicitly is the way to switch
ALTER TABLE "payroll/shards" OPTIONS (SET store 'v_pin_moved');
SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = '"payroll/shards"'::regclass;
DROP FOREIGN TABLE "payroll/shards";

-- values must mean the same in every database: OID types are refused,
-- enums, composites and their arrays are stored as text (docs/FORMAT.md),
-- and such a type cannot be a key
CREATE TYPE v_mood AS ENUM ('sad', 'ok');
CREATE TYPE v_holder AS (name text, r regproc);
CREATE FOREIGN TABLE bad_table (id text, r regclass) SERVER v_server;
CREATE FOREIGN TABLE bad_table (id text, r regtype[]) SERVER v_server;
CREATE FOREIGN TABLE bad_table (id text, h v_holder) SERVER v_server;
CREATE FOREIGN TABLE bad_table (id v_mood) SERVER v_server;
CREATE FOREIGN TABLE v_moods (id text, m v_mood, ms v_mood[]) SERVER v_server;
INSERT INTO v_moods VALUES ('a', 'ok', '{sad,ok}'), ('b', NULL, '{}');
SELECT * FROM v_moods ORDER BY id;

-- INSERT ... ON CONFLICT would not keep the existing row: refused, and
-- nothing is written
INSERT INTO v_moods VALUES ('a', 'sad') ON CONFLICT DO NOTHING;
INSERT INTO v_moods SELECT 'c', 'ok' ON CONFLICT DO NOTHING;
SELECT * FROM v_moods ORDER BY id;
DROP FOREIGN TABLE v_moods;
DROP TYPE v_mood, v_holder;

-- the statistics of every store of the cluster are for monitoring roles
CREATE ROLE rollout_v_watcher;
SET ROLE rollout_v_watcher;
SELECT count(*) >= 0 FROM rollout_stat_stores;
SELECT count(*) >= 0 FROM rollout_stat_stores();
RESET ROLE;
GRANT pg_monitor TO rollout_v_watcher;
SET ROLE rollout_v_watcher;
SELECT count(*) >= 0 FROM rollout_stat_stores;
RESET ROLE;
DROP ROLE rollout_v_watcher;

-- a setting given before the library is loaded (SET, ALTER ROLE ... SET,
-- postgresql.conf) keeps its value once it loads: every setting is defined
-- before the prefix is reserved
\c
SET rollout_fdw.commit_delay = 0;
SET rollout_fdw.ingest_threshold = '1MB';
SET rollout_fdw.max_concurrent_requests = 4;
SET rollout_fdw.max_wal_append_attempts = 10;
SET rollout_fdw.merge_max_bytes = '2MB';
SET rollout_fdw.rows_per_group = 100;
SET rollout_fdw.transaction_buffer_size = 64;
LOAD 'rollout_fdw';
SELECT name, setting FROM pg_settings
 WHERE name LIKE 'rollout_fdw.%' AND source = 'session' ORDER BY name;
