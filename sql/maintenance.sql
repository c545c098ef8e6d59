--
-- Merge, compaction, observe, gc: the deterministic parts (the races and
-- crashes are in test/t/).
--
\set rollout_server rollout_maint
\ir sql/include/create_server.psql
CREATE FOREIGN TABLE events (id int, v int) SERVER rollout_maint OPTIONS (store 'maint_events');

-- cheap and exact counts agree with count(*) on an empty store
SELECT row_count, exact_row_count, base_rows, fragments, generations,
       generation_rows, unflushed_rows, base_version, wal_entries
FROM rollout_observe('events', true);

-- 30 serial single-row transactions, a flush after each and a merge every
-- 10: after every merge, no physical duplicate ever
CREATE TABLE merge_checks (after_insert int, row_count bigint, exact_row_count bigint,
                           count_star bigint, base_rows bigint, distinct_keys bigint,
                           fragments int, generations int);
CREATE PROCEDURE insert_flush_merge(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    INSERT INTO events VALUES (i, i);
    COMMIT;
    PERFORM rollout_flush('events');
    COMMIT;
    IF i % 10 = 0 THEN
      PERFORM rollout_merge('events');
      COMMIT;
      INSERT INTO merge_checks
      SELECT i, o.row_count, o.exact_row_count, (SELECT count(*) FROM events),
             o.base_rows, (SELECT count(DISTINCT id) FROM events), o.fragments, o.generations
      FROM rollout_observe('events', true) o;
      COMMIT;
    END IF;
  END LOOP;
END $$;
CALL insert_flush_merge(30);
SELECT * FROM merge_checks ORDER BY after_insert;

-- updates: the newest version wins; the cheap count counts versions until
-- compaction removes the shadowed ones
INSERT INTO events SELECT g, -g FROM generate_series(1, 5) g;
SELECT generations_merged, rows_merged FROM rollout_merge('events');
SELECT id, v FROM events WHERE id <= 6 ORDER BY id;
SELECT row_count, exact_row_count, base_rows, (SELECT count(*) FROM events) AS count_star
FROM rollout_observe('events', true);

-- a merge with nothing to do
SELECT * FROM rollout_merge('events');
-- max_generations bounds a pass, flush_first => false leaves the WAL alone
INSERT INTO events VALUES (100, 1);
SELECT generation IS NOT NULL AS flushed FROM rollout_flush('events');
INSERT INTO events VALUES (101, 1);
SELECT generation IS NOT NULL AS flushed FROM rollout_flush('events');
INSERT INTO events VALUES (102, 1);
SELECT * FROM rollout_merge('events', max_generations => 1, flush_first => false);
SELECT generations, wal_entries FROM rollout_observe('events');
SELECT * FROM rollout_merge('events', flush_first => false);
SELECT generations, wal_entries FROM rollout_observe('events');
SELECT * FROM rollout_merge('events');
SELECT row_count, exact_row_count, base_rows, fragments, generations, wal_entries
FROM rollout_observe('events', true);

-- compaction: skipped below min_fragments, then everything into one fragment
SELECT * FROM rollout_compact('events', min_fragments => 100);
SELECT * FROM rollout_compaction_stats('events');
SELECT rollout_should_compact('events', 100), rollout_should_compact('events', 2);
-- quiet hours around the current UTC hour say no; elsewhere yes
SELECT rollout_should_compact('events', 2,
         format('%s-%s', h, (h + 1) % 24)) AS in_quiet_hours,
       rollout_should_compact('events', 2,
         format('%s-%s', (h + 1) % 24, (h + 2) % 24)) AS outside_quiet_hours,
       rollout_should_compact('events', 2,
         format('%s-%s', (h + 1) % 24, h)) AS wrapping_quiet_hours
FROM (SELECT extract(hour FROM now() AT TIME ZONE 'UTC')::int AS h) n;
SELECT * FROM rollout_compact('events', min_fragments => 2);
SELECT fragments, total_compactions, last_compaction IS NOT NULL AS has_time, last_error
FROM rollout_compaction_stats('events');
-- after merging everything and a full compaction, physical rows = logical rows
SELECT row_count, exact_row_count, base_rows, fragments, generations,
       (SELECT count(*) FROM events) AS count_star
FROM rollout_observe('events', true);
SELECT * FROM rollout_compact('events', min_fragments => 2);

-- target_rows_per_fragment splits the output
INSERT INTO events SELECT g, g FROM generate_series(1000, 1099) g;
SELECT generations_merged, rows_merged FROM rollout_merge('events');
SELECT fragments_before, fragments_after, rows_written, versions_dropped, skipped_reason
FROM rollout_compact('events', 2, target_rows_per_fragment => 40);
SELECT fragments, base_rows, exact_row_count FROM rollout_observe('events', true);
SELECT count(*), sum(v) FROM events;

-- garbage collection: nothing is young enough to keep at grace 0, yet every
-- row stays; a second run has nothing left to do
SELECT * FROM rollout_gc('events', '0');
-- rollout_fdw.min_gc_grace is the server's setting: a session cannot lower
-- it (a gc run there could delete what a writer in another session, trusting
-- the configured value, is about to commit), nor a role or database setting
SET rollout_fdw.min_gc_grace = 0;
SELECT set_config('rollout_fdw.min_gc_grace', '0', false);
ALTER ROLE CURRENT_USER SET rollout_fdw.min_gc_grace = 0;
ALTER SYSTEM SET rollout_fdw.min_gc_grace = 0;
SELECT pg_reload_conf();
\c
SHOW rollout_fdw.min_gc_grace;
SELECT objects_deleted > 0 AS deleted, bytes_freed > 0 AS freed FROM rollout_gc('events', '0');
SELECT * FROM rollout_gc('events', '0');
SELECT count(*), sum(v) FROM events;
SELECT row_count, exact_row_count, base_rows FROM rollout_observe('events', true);
-- with the default grace, recent objects are kept
INSERT INTO events VALUES (5000, 1);
SELECT generations_merged FROM rollout_merge('events');
SELECT * FROM rollout_gc('events');
ALTER SYSTEM RESET rollout_fdw.min_gc_grace;
SELECT pg_reload_conf();
\c
SELECT * FROM rollout_gc('events', '0');

-- argument checks
SELECT * FROM rollout_merge('events', max_generations => 0);
SELECT * FROM rollout_merge('events', flush_first => NULL);
SELECT * FROM rollout_compact('events', target_rows_per_fragment => 0);
SELECT * FROM rollout_compact('events', max_source_fragments => 1);
SELECT * FROM rollout_compact('events', min_fragments => -1);
SELECT * FROM rollout_should_compact('events', 5, '25-03');
SELECT * FROM rollout_should_compact('events', 5, '3-3');
SELECT * FROM rollout_should_compact('events', 5, 'nights');
SELECT * FROM rollout_gc('events', '-1 hour');
SELECT * FROM rollout_observe('events', NULL);
SELECT * FROM rollout_observe(NULL);
SELECT * FROM rollout_merge('merge_checks');
-- privileges: reading needs SELECT, maintenance needs ownership
CREATE ROLE rollout_m_reader;
GRANT SELECT ON events TO rollout_m_reader;
SET ROLE rollout_m_reader;
SELECT exact_row_count FROM rollout_observe('events', true);
SELECT fragments FROM rollout_compaction_stats('events');
SELECT * FROM rollout_merge('events');
SELECT * FROM rollout_compact('events');
SELECT * FROM rollout_gc('events');
RESET ROLE;
CREATE ROLE rollout_m_stranger;
SET ROLE rollout_m_stranger;
SELECT * FROM rollout_observe('events');
SELECT * FROM rollout_should_compact('events');
RESET ROLE;
DROP OWNED BY rollout_m_reader;
DROP ROLE rollout_m_reader;
DROP ROLE rollout_m_stranger;

-- fault points are superuser-only and checked
SET rollout_fdw.fail_at = 'merge.after_fragment_put';
SET rollout_fdw.fail_at = 'merge.after_fragment_put:explode';
SET rollout_fdw.fail_at = 'merge.after_fragment_put:sleep=x';
-- a hold's name becomes part of a file name: letters, digits and _ only
SET rollout_fdw.fail_at = 'merge.after_fragment_put:hold=../x';
SET rollout_fdw.fail_at = 'merge.after_fragment_put:hold=';
SET rollout_fdw.fail_at = 'merge.after_fragment_put:hold=first_1';
RESET rollout_fdw.fail_at;
-- an interrupted merge converges on the next run
INSERT INTO events VALUES (6000, 6);
SET rollout_fdw.fail_at = 'merge.after_fragment_put:error';
SELECT * FROM rollout_merge('events');
RESET rollout_fdw.fail_at;
SELECT generations_merged, rows_merged, fragments_added FROM rollout_merge('events');
SET rollout_fdw.fail_at = 'merge.after_base_commit:error';
INSERT INTO events VALUES (6001, 6);
SELECT * FROM rollout_merge('events');
RESET rollout_fdw.fail_at;
-- the base already says merged: readers skip the generation, the next merge drains it
SELECT generations, base_rows, exact_row_count FROM rollout_observe('events', true);
SELECT * FROM rollout_merge('events');
SELECT generations, base_rows, exact_row_count FROM rollout_observe('events', true);
SELECT count(*), count(DISTINCT id) FROM events;
