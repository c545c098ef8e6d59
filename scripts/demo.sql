-- demo.sql — the rollout_fdw walk-through that scripts/demo.sh runs against a
-- throw-away PostgreSQL 15 cluster:
--   psql -X -v ON_ERROR_STOP=1 -e -f scripts/demo.sql
-- It needs PGHOST/PGPORT/PGUSER/PGDATABASE in the environment (the COPY step
-- starts a second psql that connects with them).

\pset pager off
\set ON_ERROR_STOP 1

\echo
\echo '=== 1. extension, server (default store location: under the data directory), foreign table'
CREATE EXTENSION rollout_fdw;
CREATE SERVER rollout_local FOREIGN DATA WRAPPER rollout_fdw;
CREATE FOREIGN TABLE rollout_steps (
    id          text COLLATE "C",  -- the store's order: ORDER BY id and id ranges use it
    rollout_id  uuid,
    step        int,
    role        text,
    reward      float8,
    created_at  timestamptz,
    payload     jsonb
) SERVER rollout_local OPTIONS (store 'rollout_steps', key 'id');

\echo
\echo '=== 2. a generator of realistic agent-rollout steps: 20 steps per rollout,'
\echo '===    roles system, then user/assistant/tool; rewards on assistant and tool turns'
CREATE FUNCTION rollout_demo_steps(first_rollout int, last_rollout int)
RETURNS TABLE (id text, rollout_id uuid, step int, role text, reward float8,
               created_at timestamptz, payload jsonb)
LANGUAGE sql
AS $fn$
SELECT format('r%s-s%s', lpad(r::text, 4, '0'), lpad(s::text, 2, '0')),
       md5('rollout-' || r)::uuid,
       s,
       rl.role,
       CASE rl.role
           WHEN 'assistant' THEN round((abs(hashint4(r * 31 + s)) % 1000) / 1000.0, 3)::float8
           WHEN 'tool' THEN CASE WHEN (r + s) % 5 = 0 THEN -0.1 ELSE 0.05 END
           ELSE 0
       END,
       timestamptz '2025-05-01 00:00:00+00' + r * interval '7 minutes' + s * interval '4 seconds',
       jsonb_build_object(
           'model', m.model,
           'env', m.env,
           'text', CASE rl.role
               WHEN 'system' THEN format('You are an agent solving %s tasks. Think step by step and call tools when useful.', m.env)
               WHEN 'user' THEN format('[%s #%s] Here is the latest observation; continue the task (turn %s).', m.env, r, (s + 2) / 3)
               WHEN 'assistant' THEN format('Thought: check intermediate result %s before answering. Action: python("print(%s * %s)")', s, r, s)
               ELSE format('stdout: %s', r * s)
           END,
           'tokens', jsonb_build_object(
               'prompt', 180 + s * 35 + r % 50,
               'completion', CASE WHEN rl.role = 'assistant' THEN 40 + abs(hashint4(r * 7 + s)) % 400 ELSE 0 END),
           'tool', CASE WHEN rl.role = 'tool' THEN 'python' END,
           'exit_code', CASE WHEN rl.role = 'tool' THEN CASE WHEN (r + s) % 5 = 0 THEN 1 ELSE 0 END END)
FROM generate_series(first_rollout, last_rollout) AS r,
     generate_series(0, 19) AS s,
     LATERAL (SELECT CASE WHEN s = 0 THEN 'system'
                          ELSE (ARRAY['user', 'assistant', 'tool'])[1 + (s - 1) % 3] END AS role) AS rl,
     LATERAL (SELECT (ARRAY['qwen2.5-7b-instruct', 'llama-3.1-8b-instruct', 'mistral-7b-instruct-v0.3'])[1 + r % 3] AS model,
                     (ARRAY['gsm8k', 'swe-bench-lite', 'webshop', 'alfworld'])[1 + r % 4] AS env) AS m
$fn$;

\echo
\echo '=== 3. transaction 1: rollouts 1-100 (2000 rows) with INSERT ... SELECT'
BEGIN;
INSERT INTO rollout_steps SELECT * FROM rollout_demo_steps(1, 100);
COMMIT;

\echo
\echo '=== 4. transaction 2: rollouts 101-175 (1500 rows) in two statements'
BEGIN;
INSERT INTO rollout_steps SELECT * FROM rollout_demo_steps(101, 150);
INSERT INTO rollout_steps SELECT * FROM rollout_demo_steps(151, 175);
COMMIT;

\echo
\echo '=== 5. an aborted transaction leaves nothing behind (rollouts 900-909 are rolled back)'
BEGIN;
INSERT INTO rollout_steps SELECT * FROM rollout_demo_steps(900, 909);
ROLLBACK;

\echo
\echo '=== 6. transaction 3: rollouts 176-250 (1500 rows) with COPY FROM STDIN,'
\echo '===    fed by "COPY (SELECT ...) TO STDOUT" from a second psql:'
\echo '===    \\copy rollout_steps FROM PROGRAM ''psql -X -q -c "COPY (SELECT * FROM rollout_demo_steps(176, 250)) TO STDOUT"'''
\copy rollout_steps FROM PROGRAM 'psql -X -q -c "COPY (SELECT * FROM rollout_demo_steps(176, 250)) TO STDOUT"'

\echo
\echo '=== 7. 250 rollouts x 20 steps: expect 5000 rows'
\timing on
SELECT count(*) FROM rollout_steps;
\timing off

\echo
\echo '=== 8. upsert: re-score rollout 7 with a newer reward model; the same 20 ids get'
\echo '===    a newer version each, and the newest version wins'
INSERT INTO rollout_steps
SELECT id, rollout_id, step, role,
       CASE WHEN role = 'assistant' THEN 1.0 ELSE reward END,
       created_at + interval '1 day',
       payload || '{"rescored_by": "reward-model-v2"}'
FROM rollout_steps
WHERE rollout_id = md5('rollout-7')::uuid;

SELECT count(*) AS rows_after_upsert FROM rollout_steps;

\echo
\echo '=== 9. queries'
SELECT role, count(*) AS steps, round(avg(reward)::numeric, 4) AS avg_reward
FROM rollout_steps
GROUP BY role
ORDER BY role;

-- key lookup (the upserted version)
SELECT id, step, role, reward, payload->>'rescored_by' AS rescored_by, payload->'tokens' AS tokens
FROM rollout_steps
WHERE id = 'r0007-s02';

-- one rollout's trajectory
SELECT step, role, reward, left(payload->>'text', 72) AS text
FROM rollout_steps
WHERE rollout_id = md5('rollout-42')::uuid
ORDER BY step;

EXPLAIN SELECT * FROM rollout_steps WHERE id = 'r0042-s03';

\echo
\echo '=== 10. flush the rows written so far into an immutable, sorted generation'
SELECT * FROM rollout_flush('rollout_steps');

SELECT count(*) AS rows_after_flush FROM rollout_steps;

SELECT id, reward, payload->>'rescored_by' AS rescored_by
FROM rollout_steps
WHERE id = 'r0007-s02';

\echo
\echo '=== 11. merge the generation into the base; what the store holds (cheap counts from'
\echo '===     metadata, the exact one by reading the key columns)'
SELECT * FROM rollout_merge('rollout_steps');
SELECT row_count, exact_row_count, base_rows, fragments, generations
FROM rollout_observe('rollout_steps', exact => true);

\echo
\echo '=== 12. the planner: row estimates come from the store metadata, column statistics from ANALYZE'
EXPLAIN SELECT * FROM rollout_steps;
ANALYZE rollout_steps;
EXPLAIN SELECT * FROM rollout_steps WHERE role = 'tool';
SELECT attname, n_distinct, most_common_vals
FROM pg_stats WHERE tablename = 'rollout_steps' AND attname IN ('role', 'step') ORDER BY attname;

\echo
\echo '=== 13. the merged read returns rows in key order: ORDER BY id LIMIT needs no Sort'
\echo '===     and reads only the first row group'
EXPLAIN (COSTS OFF) SELECT id, reward FROM rollout_steps ORDER BY id LIMIT 5;
SELECT id, role, reward FROM rollout_steps ORDER BY id LIMIT 5;

\echo
\echo '=== 14. a join on the key: a few ids from across the store, one key lookup each'
\echo '===     (ids from one corner of the key space would make a merge join cheaper)'
CREATE TEMP TABLE picked AS
SELECT unnest(ARRAY['r0007-s03', 'r0042-s05', 'r0128-s01', 'r0201-s10', 'r0249-s19']) AS id;
ANALYZE picked;
EXPLAIN (COSTS OFF) SELECT s.id, s.reward FROM picked p JOIN rollout_steps s ON s.id = p.id;
SELECT s.id, s.role, s.reward FROM picked p JOIN rollout_steps s ON s.id = p.id ORDER BY s.id;

\echo
\echo '=== 15. parallel workers split the key space (these settings let a table this small qualify)'
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT role, count(*), avg(reward) FROM rollout_steps GROUP BY role;
SELECT role, count(*), round(avg(reward)::numeric, 3) AS avg_reward
FROM rollout_steps GROUP BY role ORDER BY role;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

\echo
\echo '=== 16. the stores at the server location (what IMPORT FOREIGN SCHEMA would import)'
SELECT store, key, columns, row_count FROM rollout_stores('rollout_local');

\echo
\echo '=== 17. what this cluster did with the store (preloaded: group commit, memtable, sweeper)'
SELECT store, transactions_committed, wal_puts, rows_appended, memtable_rows, flushes, merges
FROM rollout_stat_stores;
