--
-- Plans of rollout tables (costs off): row estimates from the store's
-- metadata, sorted output on the key, key joins as lookups, parallel
-- scans, ANALYZE, IMPORT FOREIGN SCHEMA and rollout_stores.
--
\set rollout_server rollout_planner
\ir sql/include/create_server.psql

CREATE FOREIGN TABLE plan_t (id int, grp int, note text)
    SERVER rollout_planner OPTIONS (store 'planner_t');
INSERT INTO plan_t SELECT i, i % 10, 'n' || i FROM generate_series(1, 2000) i;
SELECT rows_flushed FROM rollout_flush('plan_t');
SELECT generations_merged, rows_merged FROM rollout_merge('plan_t');

-- the planner's row count is the store's, not a constant
CREATE FUNCTION plan_rows(query text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || query INTO plan;
  RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
END $$;
SELECT plan_rows('SELECT * FROM plan_t');
SELECT plan_rows('SELECT * FROM plan_t WHERE id = 7');

-- the merged read is in key order: ORDER BY the key needs no Sort, DESC does
EXPLAIN (COSTS OFF) SELECT * FROM plan_t ORDER BY id LIMIT 5;
SELECT id, note FROM plan_t ORDER BY id LIMIT 5;
EXPLAIN (COSTS OFF) SELECT * FROM plan_t ORDER BY id DESC LIMIT 5;

-- a join of a few ids becomes one key lookup per id
CREATE TABLE plan_ids (id int);
INSERT INTO plan_ids VALUES (5), (500), (1500), (99999);
ANALYZE plan_ids;
EXPLAIN (COSTS OFF) SELECT t.id, t.note FROM plan_ids i JOIN plan_t t ON t.id = i.id;
SELECT t.id, t.note FROM plan_ids i JOIN plan_t t ON t.id = i.id ORDER BY t.id;

-- parallel scans, once the settings let a table this small qualify; a key
-- lookup is never parallel
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT grp, count(*) FROM plan_t GROUP BY grp;
SELECT grp, count(*), min(id), max(id) FROM plan_t GROUP BY grp ORDER BY grp;
EXPLAIN (COSTS OFF) SELECT * FROM plan_t WHERE id = 7;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- ANALYZE samples the live rows
INSERT INTO plan_t SELECT i, -1, 'newer' FROM generate_series(1, 2000, 2) i;
ANALYZE plan_t;
SELECT reltuples FROM pg_class WHERE relname = 'plan_t';
SELECT n_distinct FROM pg_stats WHERE tablename = 'plan_t' AND attname = 'grp';

-- the stores at the server's location, and importing one
-- (the other tests' stores share the location: only this one's is shown)
SELECT store, key, columns, row_count, problem FROM rollout_stores('rollout_planner')
WHERE store LIKE 'planner%';
CREATE SCHEMA plan_import;
IMPORT FOREIGN SCHEMA anything LIMIT TO (planner_t) FROM SERVER rollout_planner INTO plan_import;
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'plan_import.planner_t'::regclass AND attnum > 0 ORDER BY attnum;
SELECT count(*), count(DISTINCT id) FROM plan_import.planner_t;
