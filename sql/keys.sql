--
-- Keys of several types, the collation-independent store order, and
-- key-range skipping.
--
\set rollout_server rollout_keys
\ir sql/include/create_server.psql

-- text keys under a linguistic collation: results must equal a heap table's
CREATE FOREIGN TABLE text_keys (id text COLLATE "en-x-icu", n int)
    SERVER rollout_keys OPTIONS (store 'keys_text');
CREATE TABLE text_keys_heap (id text COLLATE "en-x-icu", n int);
INSERT INTO text_keys VALUES ('a', 1), ('B', 2), ('b', 3), ('é', 4), ('Z', 5);
SELECT generation FROM rollout_flush('text_keys');
INSERT INTO text_keys VALUES ('aa', 6), ('ab', 7), ('0', 8), (' space', 9), ('e', 10), ('É', 11);
INSERT INTO text_keys_heap SELECT * FROM text_keys;
SELECT count(*) FROM text_keys_heap;

-- the store order is byte order, whatever the table's collation says
SELECT id FROM text_keys;
-- ORDER BY uses the column's collation as usual
SELECT id FROM text_keys ORDER BY id;

-- every comparison agrees with the heap table (each query returns 0 rows)
CREATE FUNCTION keys_disagree(cond text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
    '(SELECT id FROM text_keys WHERE %1$s EXCEPT ALL SELECT id FROM text_keys_heap WHERE %1$s)
     UNION ALL
     (SELECT id FROM text_keys_heap WHERE %1$s EXCEPT ALL SELECT id FROM text_keys WHERE %1$s)', cond);
END $$;
SELECT * FROM keys_disagree($$id < 'b'$$);
SELECT * FROM keys_disagree($$id >= 'B'$$);
SELECT * FROM keys_disagree($$id > 'a' AND id <= 'e'$$);
SELECT * FROM keys_disagree($$id = 'é'$$);
SELECT * FROM keys_disagree($$id COLLATE "C" < 'b'$$);
SELECT * FROM keys_disagree($$id COLLATE "C" BETWEEN 'B' AND 'b'$$);
SELECT * FROM keys_disagree($$'b' > id$$);
SELECT count(*) FROM text_keys WHERE id < 'b';
SELECT count(*) FROM text_keys WHERE id COLLATE "C" < 'b';

-- which conditions may skip: ranges only in "C", equality in any
-- deterministic collation
EXPLAIN (COSTS OFF) SELECT * FROM text_keys WHERE id < 'b';
EXPLAIN (COSTS OFF) SELECT * FROM text_keys WHERE id COLLATE "C" < 'b';
EXPLAIN (COSTS OFF) SELECT * FROM text_keys WHERE id = 'b';
EXPLAIN (COSTS OFF) SELECT * FROM text_keys WHERE n = 3;

-- skipping: two generations with disjoint key ranges and row groups of 10
SET rollout_fdw.rows_per_group = 10;
CREATE FOREIGN TABLE skip_keys (id text COLLATE "C", n int)
    SERVER rollout_keys OPTIONS (store 'keys_skip');
INSERT INTO skip_keys SELECT 'k' || lpad(g::text, 3, '0'), g FROM generate_series(1, 100) g;
SELECT rows_flushed FROM rollout_flush('skip_keys');
INSERT INTO skip_keys SELECT 'k' || lpad(g::text, 3, '0'), g FROM generate_series(101, 200) g;
SELECT rows_flushed FROM rollout_flush('skip_keys');
INSERT INTO skip_keys VALUES ('k150', -150);
RESET rollout_fdw.rows_per_group;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
    SELECT * FROM skip_keys WHERE id = 'k042';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
    SELECT * FROM skip_keys WHERE id = 'k150';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
    SELECT * FROM skip_keys WHERE id >= 'k195';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
    SELECT * FROM skip_keys WHERE id > 'k999';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
    SELECT * FROM skip_keys WHERE n = 42;
SELECT * FROM skip_keys WHERE id = 'k042';
SELECT * FROM skip_keys WHERE id = 'k150';
SELECT count(*), min(id), max(id) FROM skip_keys WHERE id >= 'k195';
SELECT count(*) FROM skip_keys WHERE id > 'k999';
SELECT count(*), sum(n) FROM skip_keys;
-- contradictory and NULL bounds match nothing
SELECT count(*) FROM skip_keys WHERE id = NULL;
SELECT count(*) FROM skip_keys WHERE id > 'k150' AND id < 'k100';

-- parameters and rescans
PREPARE lookup(text) AS SELECT n FROM skip_keys WHERE id = $1;
EXECUTE lookup('k007');
EXECUTE lookup('k150');
EXECUTE lookup('nope');
SELECT v.x, s.n FROM (VALUES ('k001'), ('k150'), ('k200'), ('zzz')) v(x)
    LEFT JOIN LATERAL (SELECT n FROM skip_keys WHERE id = v.x) s ON true
ORDER BY v.x;

-- bigint keys: numeric order (not byte order), cross-type comparisons
CREATE FOREIGN TABLE int_keys (id bigint, label text)
    SERVER rollout_keys OPTIONS (store 'keys_bigint');
INSERT INTO int_keys SELECT g, 'n' || g FROM generate_series(-5, 5) g;
INSERT INTO int_keys VALUES (9223372036854775807, 'max'), (-9223372036854775808, 'min');
SELECT generation FROM rollout_flush('int_keys');
INSERT INTO int_keys VALUES (3, 'three');
SELECT id, label FROM int_keys;
SELECT label FROM int_keys WHERE id = 3;
SELECT count(*) FROM int_keys WHERE id BETWEEN -2 AND 2;
SELECT count(*) FROM int_keys WHERE id < 0::int2;
EXPLAIN (COSTS OFF) SELECT * FROM int_keys WHERE id = 3;

-- uuid keys, and a key that is not the first column
CREATE FOREIGN TABLE uuid_keys (label text, rid uuid)
    SERVER rollout_keys OPTIONS (store 'keys_uuid', key 'rid');
INSERT INTO uuid_keys VALUES
    ('one', '00000000-0000-0000-0000-000000000001'),
    ('two', 'ffffffff-0000-0000-0000-000000000002'),
    ('three', '80000000-0000-0000-0000-000000000003');
INSERT INTO uuid_keys VALUES ('two, again', 'ffffffff-0000-0000-0000-000000000002');
SELECT rid, label FROM uuid_keys;
SELECT label FROM uuid_keys WHERE rid = 'ffffffff-0000-0000-0000-000000000002';

-- timestamptz and numeric keys; numerically equal numerics are one key
CREATE FOREIGN TABLE ts_keys (id timestamptz, v int) SERVER rollout_keys OPTIONS (store 'keys_ts');
INSERT INTO ts_keys VALUES ('2026-01-02 00:00:00+00', 2), ('2026-01-01 00:00:00+00', 1);
SELECT v FROM ts_keys WHERE id > '2026-01-01 12:00:00+00';
CREATE FOREIGN TABLE numeric_keys (id numeric, v text) SERVER rollout_keys OPTIONS (store 'keys_numeric');
INSERT INTO numeric_keys VALUES (1.0, 'first');
INSERT INTO numeric_keys VALUES (1.00, 'second');
SELECT id, v FROM numeric_keys;
