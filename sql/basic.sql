--
-- Basic behaviour: insert, select, upsert, transactions, COPY, flush.
--
\set rollout_server rollout_local
\ir sql/include/create_server.psql

CREATE FOREIGN TABLE steps (
    id text,
    rollout_id int,
    step int,
    role text,
    reward float8,
    created_at timestamptz,
    payload jsonb
) SERVER rollout_local OPTIONS (store 'basic_steps');

-- single and multi-row INSERT, RETURNING
INSERT INTO steps VALUES ('r1-s1', 1, 1, 'user', 0.0, '2026-01-01 00:00:00+00', '{"text": "hello"}');
INSERT INTO steps VALUES
    ('r1-s2', 1, 2, 'assistant', 0.5, '2026-01-01 00:00:01+00', '{"text": "hi"}'),
    ('r1-s3', 1, 3, 'tool', NULL, '2026-01-01 00:00:02+00', NULL)
RETURNING id, step, role;
SELECT * FROM steps ORDER BY id;

-- upsert: a newer version of a key replaces the older one
INSERT INTO steps VALUES ('r1-s1', 1, 1, 'user', 1.0, '2026-01-01 00:00:00+00', '{"text": "hello again"}');
SELECT id, reward, payload FROM steps ORDER BY id;
-- the same key twice in one transaction: the later row wins
BEGIN;
INSERT INTO steps VALUES ('r1-s2', 1, 2, 'assistant', 2.0, NULL, '{"v": 1}');
INSERT INTO steps VALUES ('r1-s2', 1, 2, 'assistant', 3.0, NULL, '{"v": 2}');
COMMIT;
SELECT id, reward, payload FROM steps WHERE id = 'r1-s2';

-- an aborted transaction leaves nothing
BEGIN;
INSERT INTO steps VALUES ('aborted', 9, 9, 'user', 9, NULL, NULL);
ROLLBACK;
-- a failed transaction leaves nothing either
BEGIN;
INSERT INTO steps VALUES ('failed', 9, 9, 'user', 9, NULL, NULL);
SELECT 1/0;
COMMIT;
SELECT count(*) FROM steps WHERE id IN ('aborted', 'failed');

-- savepoints: rolled-back subtransactions lose exactly their own rows
BEGIN;
INSERT INTO steps (id, step) VALUES ('sp-a', 1);
SAVEPOINT one;
INSERT INTO steps (id, step) VALUES ('sp-b', 2);
SAVEPOINT two;
INSERT INTO steps (id, step) VALUES ('sp-c', 3);
RELEASE SAVEPOINT two;
ROLLBACK TO SAVEPOINT one;
INSERT INTO steps (id, step) VALUES ('sp-d', 4);
SAVEPOINT three;
SAVEPOINT four;
INSERT INTO steps (id, step) VALUES ('sp-e', 5);
RELEASE SAVEPOINT four;
SAVEPOINT five;
INSERT INTO steps (id, step) VALUES ('sp-f', 6);
ROLLBACK TO SAVEPOINT five;
COMMIT;
SELECT id, step FROM steps WHERE id LIKE 'sp-%' ORDER BY id;

-- an error inside a savepoint, rolled back, keeps the rest
BEGIN;
INSERT INTO steps (id, step) VALUES ('sp-g', 7);
SAVEPOINT s;
INSERT INTO steps (id, step) VALUES ('sp-h', 8);
INSERT INTO steps (id, step) VALUES (NULL, 9);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT id, step FROM steps WHERE id IN ('sp-g', 'sp-h') ORDER BY id;

-- NULL key
INSERT INTO steps (id, step) VALUES (NULL, 1);

-- batch insert (INSERT ... SELECT goes through ExecForeignBatchInsert)
ALTER FOREIGN TABLE steps OPTIONS (ADD batch_size '7');
INSERT INTO steps (id, rollout_id, step, role, reward, payload)
SELECT 'b-' || lpad(g::text, 4, '0'), 100 + g / 10, g % 10, 'user', g * 0.25,
       jsonb_build_object('n', g)
FROM generate_series(1, 1000) g;
SELECT count(*), sum(reward), min(id), max(id) FROM steps WHERE id LIKE 'b-%';

-- COPY FROM and COPY TO
COPY steps (id, rollout_id, step, role, reward) FROM STDIN WITH (FORMAT csv);
c-1,200,1,user,0.1
c-2,200,2,assistant,0.2
c-3,200,3,tool,0.3
\.
COPY (SELECT id, rollout_id, step, role, reward FROM steps WHERE id LIKE 'c-%' ORDER BY id) TO STDOUT WITH (FORMAT csv);
-- COPY of a key that exists makes a newer version
COPY steps (id, rollout_id, step, role, reward) FROM STDIN WITH (FORMAT csv);
c-2,200,2,assistant,9.5
\.
SELECT id, reward FROM steps WHERE id LIKE 'c-%' ORDER BY id;

-- a result before and after flush is identical
CREATE TEMP TABLE before_flush AS SELECT * FROM steps;
SELECT rows_flushed > 0 AS flushed, generation FROM rollout_flush('steps');
(SELECT * FROM steps EXCEPT ALL SELECT * FROM before_flush)
UNION ALL
(SELECT * FROM before_flush EXCEPT ALL SELECT * FROM steps);
SELECT count(*) = (SELECT count(*) FROM before_flush) AS same_count FROM steps;
-- nothing left to flush
SELECT * FROM rollout_flush('steps');

-- newest version wins across a generation and the WAL tail
INSERT INTO steps (id, reward) VALUES ('r1-s1', 42);
SELECT id, reward, payload FROM steps WHERE id = 'r1-s1';
SELECT generation FROM rollout_flush('steps');
SELECT id, reward, payload FROM steps WHERE id = 'r1-s1';

-- spill the transaction buffer to a temporary file, with savepoints
SET rollout_fdw.transaction_buffer_size = '64kB';
BEGIN;
INSERT INTO steps (id, payload)
SELECT 'spill-' || g, jsonb_build_object('pad', repeat('x', 200)) FROM generate_series(1, 2000) g;
SAVEPOINT s;
INSERT INTO steps (id, payload)
SELECT 'spill-gone-' || g, jsonb_build_object('pad', repeat('y', 200)) FROM generate_series(1, 2000) g;
ROLLBACK TO SAVEPOINT s;
INSERT INTO steps (id) VALUES ('spill-last');
COMMIT;
RESET rollout_fdw.transaction_buffer_size;
SELECT count(*) FILTER (WHERE id LIKE 'spill-gone-%') AS gone,
       count(*) FILTER (WHERE id LIKE 'spill-%' AND id NOT LIKE 'spill-gone-%') AS kept
FROM steps;

-- toasted values from a heap table are stored flat
CREATE TEMP TABLE big (id text, payload jsonb);
INSERT INTO big SELECT 'big-' || g, jsonb_build_object('text', repeat(md5(g::text), 500)) FROM generate_series(1, 3) g;
INSERT INTO steps (id, payload) SELECT id, payload FROM big;
SELECT count(*) FROM steps s JOIN big b USING (id) WHERE s.payload = b.payload;

-- projection: one column, whole row, no column at all
SELECT count(*) FROM steps;
SELECT count(role) FROM steps;
SELECT count(s.*) FROM steps s;

-- PREPARE TRANSACTION after writing is refused; the rows are not committed
BEGIN;
INSERT INTO steps (id) VALUES ('prepared');
PREPARE TRANSACTION 'p1';
SELECT count(*) FROM steps WHERE id = 'prepared';

-- one rollout table per transaction
CREATE FOREIGN TABLE other_steps (id text) SERVER rollout_local OPTIONS (store 'basic_other');
BEGIN;
INSERT INTO steps (id) VALUES ('two-tables');
INSERT INTO other_steps VALUES ('two-tables');
ROLLBACK;

-- UPDATE writes a new version of the row, DELETE a tombstone of its key
BEGIN;
UPDATE steps SET reward = 0 WHERE id = 'r1-s1' RETURNING id, reward;
DELETE FROM steps WHERE id = 'r1-s1' RETURNING id, reward;
SELECT count(*) FROM steps WHERE id = 'r1-s1';
ROLLBACK;

-- a join that brings one row back twice updates or deletes it once, as on a
-- heap table: not a copy of the row under each new key
CREATE FOREIGN TABLE renames (id int, note text) SERVER rollout_local OPTIONS (store 'basic_renames', key 'id');
CREATE TEMP TABLE renames_heap (id int PRIMARY KEY, note text);
CREATE TEMP TABLE rename_map (old int, new int);
INSERT INTO renames VALUES (1, 'one'), (2, 'two');
INSERT INTO renames_heap VALUES (1, 'one'), (2, 'two');
INSERT INTO rename_map VALUES (1, 5), (1, 6);
UPDATE renames SET id = m.new FROM rename_map m WHERE renames.id = m.old RETURNING renames.note;
UPDATE renames_heap SET id = m.new FROM rename_map m WHERE renames_heap.id = m.old;
SELECT count(*) AS rollout_rows, (SELECT count(*) FROM renames_heap) AS heap_rows,
       count(*) FILTER (WHERE note = 'one') AS copies_of_one FROM renames;
UPDATE rename_map SET old = 2;
DELETE FROM renames USING rename_map m WHERE renames.id = m.old RETURNING renames.*;
SELECT count(*) FROM renames;
-- without a join each row comes once, and every one is written
UPDATE renames SET note = note || '!';
SELECT note FROM renames;

-- writable CTEs: each is a ModifyTable of its own, and a row two of them
-- reach is modified once, as on a heap table (the later one finds it
-- modified by this command): no copy under each new key, no row written
-- back after its tombstone
CREATE FOREIGN TABLE cte_rows (id int, v text) SERVER rollout_local OPTIONS (store 'basic_cte', key 'id');
CREATE TEMP TABLE cte_heap (id int PRIMARY KEY, v text);
INSERT INTO cte_rows VALUES (1, 'one'), (2, 'two'), (3, 'three');
INSERT INTO cte_heap VALUES (1, 'one'), (2, 'two'), (3, 'three');
WITH a AS (UPDATE cte_rows SET id = 10 WHERE id = 1 RETURNING 1) UPDATE cte_rows SET id = 20 WHERE id = 1;
WITH a AS (UPDATE cte_heap SET id = 10 WHERE id = 1 RETURNING 1) UPDATE cte_heap SET id = 20 WHERE id = 1;
WITH d AS (DELETE FROM cte_rows WHERE id = 2 RETURNING id)
UPDATE cte_rows SET v = 'resurrected' WHERE id IN (SELECT id FROM d);
WITH d AS (DELETE FROM cte_heap WHERE id = 2 RETURNING id)
UPDATE cte_heap SET v = 'resurrected' WHERE id IN (SELECT id FROM d);
SELECT (SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM cte_rows) AS rollout,
       (SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM cte_heap) AS heap;

-- SERIALIZABLE transactions cannot write: PostgreSQL may still fail their
-- commit after the rows were made durable
BEGIN ISOLATION LEVEL SERIALIZABLE;
INSERT INTO steps (id) VALUES ('serializable');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FROM steps WHERE id = 'serializable';
COMMIT;

-- a transaction whose only rollout rows were rolled back may write another table
BEGIN;
SAVEPOINT s;
INSERT INTO steps (id) VALUES ('undone');
ROLLBACK TO SAVEPOINT s;
INSERT INTO other_steps VALUES ('other');
COMMIT;
SELECT (SELECT count(*) FROM steps WHERE id = 'undone') AS undone,
       (SELECT count(*) FROM other_steps) AS other;

-- the shard id is re-read: a new shard id writes a new shard at once
SET rollout_fdw.shard_id = 'basic_second_shard';
INSERT INTO other_steps VALUES ('from-second-shard');
SELECT id FROM other_steps ORDER BY id;
RESET rollout_fdw.shard_id;
-- back on the first shard, the second shard's unflushed row is not visible
SELECT id FROM other_steps ORDER BY id;
