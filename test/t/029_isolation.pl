
# Copyright (c) rollout_fdw authors
#
# 029_isolation.pl — PostgreSQL's isolation promises on rollout tables
# (issue 10, points 4 and 5).
#
# Snapshots (fdw/scan_snapshot.c):
#   - REPEATABLE READ and SERIALIZABLE READ ONLY: every scan of a store in a
#     transaction reads the snapshot taken at its first read, memtable
#     included, whatever other sessions commit, flush or merge meanwhile;
#   - READ COMMITTED: the next statement sees new commits, and the scans of
#     one statement share one snapshot (two subqueries with a commit
#     between them count the same), as do the STABLE functions it calls,
#     whichever reads the store first, also after a function retook the
#     snapshot because gc removed an object of it; the snapshot goes when
#     the statement ends (no xmin held while idle in the transaction);
#   - garbage collection removing an object of a transaction's snapshot
#     makes its next scan fail with a serialization failure (40001), while a
#     READ COMMITTED statement takes a fresh snapshot;
#   - pg_dump --include-foreign-data dumps the rows of its snapshot.
# Own rows (fdw/xact_buffer.c):
#   - a transaction sees the rows it inserted, as the newest versions of
#     their keys, without the rows a rolled-back savepoint took back, in
#     memory and after its buffer spilled to disk;
#   - a statement does not see its own inserts (INSERT ... SELECT from the
#     same table doubles it exactly once), as with heap tables;
#   - another session sees nothing before COMMIT; another table of the same
#     store, in the same transaction, sees them;
#   - a write after the table's store or its server's location changed
#     within the transaction is refused; a spilled transaction whose spill
#     file cannot be written out fails before anything is committed, and a
#     spill that fails in a rolled-back subtransaction keeps the parent's rows;
#     a procedure committing in a loop does not keep each commit's rows in
#     memory.
# Read-only transactions refuse INSERT, UPDATE, DELETE and TRUNCATE and run
# maintenance (as VACUUM runs there).
# Runs in both modes.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node count_in_log);
use Test::More;

# glibc fills memory with 0xa5 when it is freed: a read of freed memory
# (of a deleted memory context's blocks) then finds garbage rather than the
# old values, and fails visibly
local $ENV{MALLOC_PERTURB_} = 165;
my $node = mode_node('isolation', conf => ['rollout_fdw.min_gc_grace = 0']);

my $store = RolloutStore->for_test('029_isolation', backend => 'file');
$store->create_extension_and_server($node);
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'iso');
CREATE FOREIGN TABLE u (id int, v text) SERVER s OPTIONS (store 'iso_u');
INSERT INTO t SELECT g, 'base' FROM generate_series(1, 100) g;
});

sub other { return $node->safe_psql('postgres', $_[0]); }

# ---------------------------------------------------------------------------
# REPEATABLE READ: one snapshot for the transaction
my $rr = $node->background_psql('postgres', on_error_stop => 0);
$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
is($rr->query_safe('SELECT count(*) FROM t'), '100', 'RR: first read sees 100 rows');
other(q{INSERT INTO t SELECT g, 'later' FROM generate_series(101, 110) g});
is($rr->query_safe('SELECT count(*) FROM t'), '100',
	'RR: a row committed after the first read stays invisible (memtable or WAL tail)');
other(q{SELECT rollout_flush('t')});
other(q{INSERT INTO t VALUES (1, 'updated')});
other(q{SELECT rollout_merge('t')});
is($rr->query_safe(q{SELECT count(*), count(*) FILTER (WHERE v = 'base') FROM t}), '100|100',
	'RR: still the first snapshot after a flush, a new version of a key and a merge');
is($rr->query_safe(q{SELECT v FROM t WHERE id = 1}), 'base', 'RR: the old version of key 1');
$rr->query_safe('COMMIT');
is($rr->query_safe(q{SELECT count(*), min(v) FILTER (WHERE id = 1) FROM t}), '110|updated',
	'after COMMIT the next statement sees everything');

# SERIALIZABLE READ ONLY behaves the same
$rr->query_safe('BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY');
is($rr->query_safe('SELECT count(*) FROM t'), '110', 'SERIALIZABLE: first read');
other(q{INSERT INTO t VALUES (111, 'x')});
is($rr->query_safe('SELECT count(*) FROM t'), '110', 'SERIALIZABLE: the same snapshot');
$rr->query_safe('COMMIT');

# READ COMMITTED: a new snapshot per statement, one per statement
$rr->query_safe('BEGIN ISOLATION LEVEL READ COMMITTED');
is($rr->query_safe('SELECT count(*) FROM t'), '111', 'RC: first statement');
other(q{INSERT INTO t VALUES (112, 'x')});
is($rr->query_safe('SELECT count(*) FROM t'), '112', 'RC: the next statement sees the commit');
$rr->query_safe('COMMIT');

# two scans of one statement, a commit between them: the statement waits
# between its scans on an advisory lock the test holds until the commit
my $gate = $node->background_psql('postgres', on_error_stop => 1);
$gate->query_safe('SELECT pg_advisory_lock(29029)');
my $bg = $node->background_psql('postgres', on_error_stop => 1);
$bg->query_until(qr/started/, q{
\echo started
SELECT (SELECT count(*) FROM t) AS first, pg_advisory_lock(29029), (SELECT count(*) FROM t WHERE id > 0) AS second;
});
$node->poll_query_until('postgres',
	q{SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = 29029 AND NOT granted)})
  or die 'the statement did not reach the advisory lock';
other(q{INSERT INTO t VALUES (113, 'between')});
$gate->query_safe('SELECT pg_advisory_unlock(29029)');
$gate->quit;
my $two = $bg->query_safe('SELECT 1');    # returns once the statement above is done
$bg->quit;
like($two, qr/^112\|\|112$/m,
	'RC: two scans of one statement read one snapshot (a commit between them is not seen)');

# The queries of the STABLE functions a statement calls run under its
# Snapshot, as with heap tables, whichever reads the store first: the
# statement or a function; those of VOLATILE ones take a new one each.
# Before, every call of a function that is not inlined took a new store
# snapshot in READ COMMITTED.
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE f (id int, v text) SERVER s OPTIONS (store 'iso_f');
INSERT INTO f SELECT g, 'base' FROM generate_series(1, 10) g;
CREATE FUNCTION f_stable_sql() RETURNS bigint LANGUAGE sql STABLE AS $$ SELECT count(*) FROM f $$;
CREATE FUNCTION f_stable_pl() RETURNS bigint LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN (SELECT count(*) FROM f); END $$;
CREATE FUNCTION f_volatile() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$ BEGIN RETURN (SELECT count(*) FROM f); END $$;
CREATE FUNCTION f_srf() RETURNS SETOF int LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN QUERY SELECT id FROM f; END $$;
});

# Runs $statement, which waits on advisory lock $lock, in a session of its
# own; runs $meanwhile in another session while it waits; returns the
# statement's output.
sub with_commit_between
{
	my ($lock, $statement, @meanwhile) = @_;
	my $gate = $node->background_psql('postgres', on_error_stop => 1);
	$gate->query_safe("SELECT pg_advisory_lock($lock)");
	my $bg = $node->background_psql('postgres', on_error_stop => 1);
	$bg->query_until(qr/started/, "\\echo started\n$statement\n");
	$node->poll_query_until('postgres',
		"SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $lock AND NOT granted)")
	  or die 'the statement did not reach the advisory lock';
	other($_) for @meanwhile;
	$gate->query_safe("SELECT pg_advisory_unlock($lock)");
	$gate->quit;
	my $out = $bg->query_safe('SELECT 1');    # returns once the statement is done
	$bg->quit;
	return $out;
}

like(
	with_commit_between(29030,
		q{SELECT (SELECT count(*) FROM f) AS first, pg_advisory_lock(29030), f_stable_sql(), f_stable_pl(), f_volatile();},
		q{INSERT INTO f VALUES (11, 'between')}),
	qr/^10\|\|10\|10\|11$/m,
	'RC: STABLE functions read the statement\'s snapshot, a VOLATILE one a new one');
like(
	with_commit_between(29031,
		q{SELECT f_stable_pl() AS first, pg_advisory_lock(29031), f_stable_sql(), f_stable_pl(), (SELECT count(*) FROM f) AS last;},
		q{INSERT INTO f VALUES (12, 'between')}),
	qr/^11\|\|11\|11\|11$/m,
	'RC: a snapshot a STABLE function took first serves the later calls and the statement\'s own scan');

# A set-returning STABLE function reads the store first and has ended
# before the statement's rescans read the same snapshot (a version of this
# change kept the snapshot in the function's memory: the rescans read freed
# memory and the backend crashed).
is($node->safe_psql('postgres', q{
SELECT count(*) FROM (SELECT x FROM f_srf() x UNION ALL SELECT id FROM f) u
 WHERE EXISTS (SELECT 1 FROM f g WHERE g.id = u.x AND g.v IS NOT NULL);
SELECT string_agg(x || ':' || (SELECT count(*) FROM f g WHERE g.id <= x), ',' ORDER BY x)
  FROM f_srf() x WHERE x <= 3;}),
	"24\n1:1,2:2,3:3", 'RC: a set-returning STABLE function read first, then correlated rescans: right rows, no crash');

# Garbage collection removes a generation of the statement's snapshot while
# it waits: the next function call finds it gone and retakes the snapshot
# inside the function; the statement's own scan and the last call read that
# retaken snapshot (which must outlive the call that took it).
other(q{SELECT rollout_flush('f')});
like(
	with_commit_between(29032,
		q{SELECT f_stable_pl() AS a, pg_advisory_lock(29032), f_stable_pl() AS b, (SELECT count(*) FROM f) AS c, f_stable_sql() AS d;},
		q{INSERT INTO f VALUES (13, 'between')},
		q{SELECT rollout_flush('f')},
		q{SELECT rollout_merge('f')},
		q{SELECT rollout_compact('f', 0)},
		q{SELECT rollout_gc('f', '0')}),
	qr/^12\|\|13\|13\|13$/m,
	'RC: a snapshot retaken inside a function after gc serves the rest of the statement');
is(count_in_log($node, qr/terminated by signal/), 0, 'no backend crashed');

# A statement's store snapshot goes when the statement ends: the session
# idles in its transaction without holding back the xmin horizon, and a
# statement calling a VOLATILE function 200 times keeps at most a few
# store snapshots at once.
my $idle = $node->background_psql('postgres', on_error_stop => 1);
$idle->query_safe('BEGIN ISOLATION LEVEL READ COMMITTED');
is($idle->query_safe('SELECT f_stable_pl()'), '13', 'RC: a transaction reads through a function');
my $idle_pid = $idle->query_safe('SELECT pg_backend_pid()');
is(other("SELECT backend_xmin IS NULL FROM pg_stat_activity WHERE pid = $idle_pid"), 't',
	'RC: idle in its transaction, the session holds no snapshot');
is($idle->query_safe(q{
SELECT sum(f_volatile()) FROM generate_series(1, 200);
SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'rollout statement snapshot';}),
	"2600\n0", 'RC: 200 VOLATILE calls, and no store snapshot is left once the statement ended');
$idle->query_safe(q{
CREATE FUNCTION pg_temp.snapshots_after_calls(n int) RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  FOR i IN 1 .. n LOOP PERFORM f_volatile(); END LOOP;
  RETURN (SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'rollout statement snapshot');
END $$;});
cmp_ok($idle->query_safe('SELECT pg_temp.snapshots_after_calls(100)'), '<=', 2,
	'RC: within a statement, the snapshots of ended VOLATILE calls are freed as it goes');
$idle->query_safe('COMMIT');
$idle->quit;

# A value-per-call set-returning SQL function reads the store first and is
# still running while the statement's correlated rescans read the same
# snapshot; they go on after it ended.
$node->safe_psql('postgres', q{
CREATE FUNCTION f_srf_sql() RETURNS SETOF int LANGUAGE sql STABLE AS $$ SELECT id FROM f ORDER BY id $$;
CREATE FUNCTION f_two_queries() RETURNS bigint LANGUAGE sql VOLATILE AS $$ SELECT count(*) FROM f; SELECT count(*) FROM f $$;
CREATE PROCEDURE p_commits() LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  FOR i IN 1 .. 3 LOOP SELECT count(*) INTO n FROM f; COMMIT; END LOOP;
END $$;
CREATE TABLE heap_t AS SELECT g AS x FROM generate_series(1, 1000) g;
ANALYZE heap_t;
});
is($node->safe_psql('postgres', q{
SELECT count(*), sum(c) FROM (
  SELECT x, (SELECT count(*) FROM f g WHERE g.id <= s.x) AS c
	FROM (SELECT f_srf_sql() AS x UNION ALL SELECT id FROM f) s) q;}),
	'26|182', 'RC: a value-per-call SQL function and correlated rescans while it runs: right rows, no crash');

# The statement reads the store first; a function then finds a generation
# of that snapshot collected and retakes it, for the rest of the statement
# too (the retaken snapshot must live as long as the statement's).
other(q{INSERT INTO f VALUES (14, 'flushed')});
other(q{SELECT rollout_flush('f')});
like(
	with_commit_between(29033,
		q{SELECT (SELECT count(*) FROM f) AS a, pg_advisory_lock(29033), f_stable_pl() AS b, (SELECT count(*) FROM f WHERE v IS NOT NULL) AS c;},
		q{INSERT INTO f VALUES (15, 'between')},
		q{SELECT rollout_flush('f')},
		q{SELECT rollout_merge('f')},
		q{SELECT rollout_compact('f', 0)},
		q{SELECT rollout_gc('f', '0')}),
	qr/^14\|\|15\|15$/m,
	'RC: a snapshot the statement took and a function retook after gc serves the rest of the statement');

# Every way a statement's snapshot can end leaves nothing held: after each,
# the session idles in its transaction with no xmin.
my $s = $node->background_psql('postgres', on_error_stop => 0);
my $s_pid = $s->query_safe('SELECT pg_backend_pid()');
sub holds_nothing
{
	my ($what) = @_;
	is(other("SELECT backend_xmin IS NULL FROM pg_stat_activity WHERE pid = $s_pid"), 't',
		"RC: after $what, idle in the transaction, no xmin is held");
}
$s->query_safe('BEGIN ISOLATION LEVEL READ COMMITTED');
is($s->query_safe('SELECT count(*) FROM heap_t WHERE x < f_stable_pl()'), '14',
	'RC: a STABLE function the planner also runs');
holds_nothing('a function the planner ran');
$s->query_safe('PREPARE q AS SELECT count(*) FROM f');
is($s->query_safe('EXECUTE q'), '15', 'RC: EXECUTE of a prepared statement reads');
holds_nothing('EXECUTE, whose portal holds its snapshot');
like($s->query_safe('EXPLAIN SELECT * FROM heap_t WHERE x < f_stable_pl()'), qr/Seq Scan on heap_t/,
	'RC: EXPLAIN plans a query whose planning runs a function that reads');
holds_nothing('EXPLAIN');
$s->query_safe('DECLARE c CURSOR FOR SELECT id FROM f ORDER BY id');
is($s->query_safe('FETCH 2 FROM c'), "1\n2", 'RC: a cursor reads');
is($s->query_safe('SELECT f_stable_pl()'), '15', 'RC: a statement between its FETCHes reads too');
is($s->query_safe('FETCH 2 FROM c'), "3\n4", 'RC: the cursor reads on');
$s->query_safe('CLOSE c');
holds_nothing('a cursor closed');
$s->query_safe('SAVEPOINT sp');
$s->query('SELECT f_stable_pl() / 0');
$s->{stderr} = '';
$s->query_safe('ROLLBACK TO sp');
is($s->query_safe('SELECT f_two_queries()'), '15', 'RC: after an error rolled back to a savepoint');
holds_nothing('an error in a function and a rollback to a savepoint');
$s->query_safe('DECLARE h CURSOR WITH HOLD FOR SELECT count(*) FROM f');
$s->query_safe('COMMIT');
is($s->query_safe('FETCH ALL FROM h'), '15', 'RC: a cursor WITH HOLD reads after its COMMIT');
$s->query_safe('CLOSE h');
$s->query_safe('CALL p_commits()');
$s->query_safe('BEGIN');
is($s->query_safe('SELECT f_stable_sql()'), '15', 'RC: a procedure committing in a loop, then a new transaction');
holds_nothing('a procedure that committed');
$s->query_safe('COMMIT');
$s->quit;
is(count_in_log($node, qr/snapshot reference leak|registered snapshots seem to remain|still active/), 0,
	'no snapshot was leaked or left registered');

# garbage collection under a long snapshot.  The snapshot holds a
# generation: a base fragment this backend has read stays open to it
# (objstore/file_store.c, kept-open immutable objects) and would still read
# after its deletion, but a generation is reopened at every read.
other(q{SELECT rollout_flush('t')});
$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
is($rr->query_safe('SELECT count(*) FROM t'), '113', 'RR: snapshot taken');
other(q{INSERT INTO t VALUES (114, 'later')});
other(q{SELECT rollout_flush('t')});
other(q{SELECT rollout_merge('t')});
other(q{SELECT rollout_compact('t', 0)});
my $gc = other(q{SELECT objects_deleted > 0 FROM rollout_gc('t', '0')});
is($gc, 't', 'gc with grace 0 deleted objects of the old snapshot');
my $err = '';
eval { $rr->query_safe('SELECT count(*) FROM t'); 1 } or $err = $@;
like($err, qr/could not serialize access to store "iso": an object of the transaction's snapshot was removed/,
	'RR: the next scan fails with a serialization failure instead of reading another snapshot');
$rr->{stderr} = '';    # BackgroundPsql keeps stderr across queries
$rr->query('ROLLBACK');
is($rr->query_safe('SELECT count(*) FROM t'), '114', 'the next transaction reads the store');

# a snapshot of base fragments only, which this backend keeps open: it reads
# on after garbage collection deleted them, the same rows
$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
is($rr->query_safe('SELECT count(*), sum(id) FROM t'), '114|6555', 'RR: a snapshot of one fragment');
other(q{INSERT INTO t VALUES (115, 'later')});
other(q{SELECT rollout_flush('t')});
other(q{SELECT rollout_merge('t')});
other(q{SELECT rollout_compact('t', 0)});
is(other(q{SELECT objects_deleted > 0 FROM rollout_gc('t', '0')}), 't',
	'gc deleted the fragment of that snapshot');
is($rr->query_safe('SELECT count(*), sum(id) FROM t'), '114|6555',
	'RR: the fragment kept open still reads, the same rows');
$rr->query_safe('COMMIT');
is($rr->query_safe('SELECT count(*) FROM t'), '115', 'and the next transaction reads the new one');

# pg_dump reads its snapshot
my $dump = "$PostgreSQL::Test::Utils::tmp_check/iso.sql";
$node->command_ok([ 'pg_dump', '--include-foreign-data=s', '-t', 't', '-d', $node->connstr('postgres'), '-f', $dump ],
	'pg_dump --include-foreign-data');
my $text = slurp_file($dump);
my ($copy) = $text =~ /COPY public\.t \(id, v\) FROM stdin;\n(.*?)\\\.\n/s;
is(scalar(split /\n/, $copy // ''), 115, 'the dump holds the 115 rows of its snapshot');

# ---------------------------------------------------------------------------
# A transaction sees its own rows
$rr->query_safe('BEGIN');
$rr->query_safe(q{INSERT INTO u SELECT g, 'mine' FROM generate_series(1, 20) g});
is($rr->query_safe(q{SELECT count(*), min(v) FROM u}), '20|mine',
	'own rows: a transaction sees the 20 rows it inserted');
is(other('SELECT count(*) FROM u'), '0', 'another session sees none of them');
$rr->query_safe(q{INSERT INTO u VALUES (5, 'newer')});
is($rr->query_safe(q{SELECT count(*), string_agg(v, ',') FILTER (WHERE id = 5) FROM u}), '20|newer',
	'a key inserted twice shows its newest version once');
$rr->query_safe('SAVEPOINT a');
$rr->query_safe(q{INSERT INTO u SELECT g, 'rolled back' FROM generate_series(21, 30) g});
is($rr->query_safe('SELECT count(*) FROM u'), '30', 'rows of a savepoint are seen');
$rr->query_safe('ROLLBACK TO SAVEPOINT a');
is($rr->query_safe(q{SELECT count(*), count(*) FILTER (WHERE v = 'rolled back') FROM u}), '20|0',
	'rows of a rolled-back savepoint are gone');
$rr->query_safe(q{INSERT INTO u SELECT id + 100, 'copy' FROM u});
is($rr->query_safe(q{SELECT count(*) FROM u}), '40',
	'INSERT ... SELECT from the same table reads what earlier commands wrote, not its own rows');
is($rr->query_safe(q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM u}) =~ /Transaction Rows Read: 40/ ? 'yes' : 'no',
	'yes', 'EXPLAIN ANALYZE counts the transaction\'s rows');
# another table of the same store sees them too (before, only the table
# written through did: a table with read_wal_tail, say, did not)
other(q{CREATE FOREIGN TABLE u_tail (id int, v text) SERVER s OPTIONS (store 'iso_u', read_wal_tail 'true')});
is($rr->query_safe(q{SELECT count(*), string_agg(v, ',') FILTER (WHERE id = 5) FROM u_tail}), '40|newer',
	'another table of the same store sees the transaction\'s rows as well');
$rr->query_safe('COMMIT');
is(other(q{SELECT count(*), string_agg(v, ',') FILTER (WHERE id = 5) FROM u}), '40|newer',
	'after COMMIT everyone sees the same 40 rows');

# the buffer spilled to disk: the rows come from a sorted scratch segment
$rr->query_safe(q{SET rollout_fdw.transaction_buffer_size = '64kB'});
$rr->query_safe('BEGIN');
$rr->query_safe(q{INSERT INTO u SELECT g, repeat('x', 200) FROM generate_series(1000, 3999) g});
$rr->query_safe(q{INSERT INTO u VALUES (1000, 'newest')});
is($rr->query_safe(q{SELECT count(*), count(DISTINCT id), min(v) FILTER (WHERE id = 1000) FROM u}),
	'3040|3040|newest', 'own rows of a spilled buffer: 3000 new keys, the newest version of each');
is($rr->query_safe(q{SELECT count(*) FROM u WHERE id BETWEEN 1990 AND 2009}), '20',
	'... and a key range over them');
$rr->query_safe('ROLLBACK');
is(other('SELECT count(*) FROM u'), '40', 'after ROLLBACK nothing of it is anywhere');
my @scratch = glob($node->data_dir . '/base/pgsql_tmp/*own*');
is(scalar(@scratch), 0, 'no scratch segment is left behind');

# A spilled transaction that ends with a TRUNCATE commits whatever its spill
# file's last buffer could not be written: nothing reads the rows before the
# TRUNCATE, and the file is removed without writing it (here temp_file_limit
# is set to what the file holds already).  Before, the file was written when
# it was closed, after the TRUNCATE was durable, so the COMMIT failed and the
# table was empty all the same.
other(q{CREATE FOREIGN TABLE spilt (id int, v text) SERVER s OPTIONS (store 'iso_spilt', key 'id');
INSERT INTO spilt SELECT g, 'kept' FROM generate_series(1, 5) g;});
$rr->query_safe('BEGIN');
$rr->query_safe(q{INSERT INTO spilt SELECT g, repeat('x', 500) FROM generate_series(100, 1099) g});
$rr->query_safe('TRUNCATE spilt');
my $spilt_kb = $rr->query_safe(
	q{SELECT sum(size) / 1024 FROM pg_ls_tmpdir() WHERE name LIKE 'pgsql_tmp' || pg_backend_pid() || '.%'});
cmp_ok($spilt_kb, '>', 0, "the transaction's rows spilled to a temporary file ($spilt_kb kB)");
$rr->query_safe("SET LOCAL temp_file_limit = $spilt_kb");
$rr->query_safe('COMMIT');
is(other(q{SELECT count(*) FROM spilt}), '0', 'the TRUNCATE committed, and nothing before it');
is($rr->query_safe(q{SELECT count(*) FROM pg_ls_tmpdir() WHERE name LIKE 'pgsql_tmp' || pg_backend_pid() || '.%'}),
	'0', 'the spill file is gone');
$rr->query_safe('RESET temp_file_limit');

# A spill that fails inside a subtransaction (here temp_file_limit, below
# what the buffer holds) and is rolled back leaves the parent's rows in
# memory: COMMIT writes them, as a heap table keeps the rows an exception
# block did not take back.  Before, the buffer counted as moved to a file
# that held only part of them, and the COMMIT failed.
$rr->query_safe(q{SET rollout_fdw.transaction_buffer_size = '256kB'});
$rr->query_safe('BEGIN');
$rr->query_safe(q{INSERT INTO spilt SELECT g, repeat('p', 200) FROM generate_series(2000, 2799) g});
$rr->query_safe('SET LOCAL temp_file_limit = 64');
is($rr->query(q{DO $$
BEGIN
	INSERT INTO spilt SELECT g, repeat('s', 200) FROM generate_series(3000, 3999) g;
EXCEPTION WHEN others THEN
	RAISE NOTICE 'caught: %', SQLERRM;
END $$;
SELECT count(*) FROM spilt WHERE id >= 2000}), '800',
	'the failed spill was rolled back with its subtransaction; the parent\'s rows remain');
like($rr->{stderr}, qr/caught: temporary file size exceeds temp_file_limit/,
	'... after the spill failed');
$rr->{stderr} = '';
is($rr->query_safe(q{SELECT count(*) FROM pg_ls_tmpdir() WHERE name LIKE 'pgsql_tmp' || pg_backend_pid() || '.%'}),
	'0', 'the half-written spill file is gone');
$rr->query_safe('COMMIT');
is(other(q{SELECT count(*) FROM spilt WHERE id >= 2000}), '800', 'and COMMIT wrote them');

# A spill file made in a subtransaction whose later write fails: rolling the
# subtransaction back removes the file without writing its last buffer.
# Before, closing the file wrote that buffer again inside the abort, failed
# again, and PostgreSQL retried the abort until it PANICked: every session of
# the cluster was ended.
$rr->query_safe(q{SET rollout_fdw.transaction_buffer_size = '64kB'});
$rr->query_safe('BEGIN');
$rr->query_safe('SET LOCAL temp_file_limit = 1024');
$rr->query_safe('SAVEPOINT s');
$rr->query(q{INSERT INTO spilt SELECT g, repeat('f', 500) FROM generate_series(5000, 9999) g});
like($rr->{stderr}, qr/temporary file size exceeds temp_file_limit/,
	'a spilled buffer outgrows temp_file_limit inside a savepoint');
$rr->{stderr} = '';
$rr->query_safe('ROLLBACK TO s');
is($rr->query_safe(q{SELECT count(*) FROM pg_ls_tmpdir() WHERE name LIKE 'pgsql_tmp' || pg_backend_pid() || '.%'}),
	'0', 'ROLLBACK TO removed the spill file');
$rr->query_safe(q{INSERT INTO spilt VALUES (4000, 'after the savepoint')});
$rr->query_safe('COMMIT');
is(other(q{SELECT count(*), min(v) FROM spilt WHERE id >= 4000}), '1|after the savepoint',
	'... and the transaction went on and committed its row');
$rr->query_safe('RESET rollout_fdw.transaction_buffer_size');

# A procedure that commits in a loop: each COMMIT runs in memory that lasts
# for the whole CALL, so a commit must give back what its rows took (half a
# megabyte each here; before, 30 commits kept 16 MB).
other(q{
CREATE FOREIGN TABLE batches (id int, v text) SERVER s OPTIONS (store 'iso_batches', key 'id');
CREATE TABLE memory_probe (batch int, bytes bigint);
CREATE PROCEDURE load_in_batches() LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..40 LOOP
		INSERT INTO batches SELECT g, repeat('m', 1000) FROM generate_series(i * 1000, i * 1000 + 499) g;
		COMMIT;
		IF i IN (10, 40) THEN
			INSERT INTO memory_probe SELECT i, sum(total_bytes) FROM pg_backend_memory_contexts;
			COMMIT;
		END IF;
	END LOOP;
END $$;
CALL load_in_batches();});
is(other(q{SELECT count(*) FROM batches}), '20000', 'a procedure committed 40 batches of rows');
my $growth = other(q{SELECT max(bytes) FILTER (WHERE batch = 40) - max(bytes) FILTER (WHERE batch = 10) FROM memory_probe});
cmp_ok($growth, '<', 4 * 1024 * 1024,
	"30 of its commits left the backend's memory where it was (it grew by $growth bytes)");

# A table whose store changed after the transaction wrote to it, in the same
# transaction or by another session, is refused: the buffer commits to the
# store of the first write (a write with another role's credentials too:
# 026_privileges.pl).  Before, the rows, deletes and TRUNCATE written after the change went
# to the old store at commit while the transaction's reads went to the new.
other(q{CREATE FOREIGN TABLE sw (id int, v text) SERVER s OPTIONS (store 'sw_a', key 'id');
INSERT INTO sw VALUES (5, 'five'); ALTER FOREIGN TABLE sw OPTIONS (SET store 'sw_b');
INSERT INTO sw VALUES (5, 'five'); ALTER FOREIGN TABLE sw OPTIONS (SET store 'sw_a');});
$rr->query_safe('BEGIN');
$rr->query_safe(q{INSERT INTO sw VALUES (1, 'x')});
$rr->query_safe(q{ALTER FOREIGN TABLE sw OPTIONS (SET store 'sw_b')});
$rr->query(q{DELETE FROM sw WHERE id = 5});
like($rr->{stderr}, qr/the store of rollout table "sw" changed after this transaction wrote to it/,
	'a write after the table\'s store changed in the transaction is refused');
$rr->{stderr} = '';
$rr->query_safe('ROLLBACK');
is(other(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM sw}), '5', 'store sw_a is untouched');
# another session moves the server meanwhile (which takes no lock on the
# table the transaction holds)
my $elsewhere = PostgreSQL::Test::Utils::tempdir('elsewhere');
chmod(0777, $elsewhere);
my $server_location = other(q{SELECT option_value FROM pg_options_to_table(
	(SELECT srvoptions FROM pg_foreign_server WHERE srvname = 's')) WHERE option_name = 'location'});
$rr->query_safe('BEGIN');
$rr->query_safe(q{INSERT INTO sw VALUES (1, 'x')});
other(qq{ALTER SERVER s OPTIONS (SET location 'file://$elsewhere')});
$rr->query(q{TRUNCATE sw});
like($rr->{stderr}, qr/the store of rollout table "sw" changed after this transaction wrote to it/,
	'... also when another session moved its server');
$rr->{stderr} = '';
$rr->query_safe('ROLLBACK');
other(qq{ALTER SERVER s OPTIONS (SET location '$server_location')});
is(other(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM sw}), '5', 'and store sw_a is still untouched');
$rr->quit;

# ---------------------------------------------------------------------------
# READ ONLY transactions refuse every change of rows, as on any table, and
# let maintenance run, as PostgreSQL lets VACUUM and CLUSTER: it changes no
# row a query sees (README, "SQL reference")
for my $write (q{INSERT INTO sw VALUES (7, 'ro')}, q{DELETE FROM sw WHERE id = 5},
	q{UPDATE sw SET v = 'ro' WHERE id = 5}, q{TRUNCATE sw})
{
	my ($ret, $out, $err) = $node->psql('postgres', "BEGIN READ ONLY; $write; COMMIT");
	like($err, qr/cannot execute [A-Z ]+ in a read-only transaction/,
		"a read-only transaction refuses: $write");
}
other(q{INSERT INTO sw VALUES (6, 'flushed read-only')});
is(other(q{SET default_transaction_read_only = on;
SELECT generation IS NOT NULL FROM rollout_flush('sw')}), 't',
	'rollout_flush runs in a read-only transaction');
is(other(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM sw}), '5,6',
	'and the read-only transactions changed no row');

unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC/, 'no backend crashed');
$node->stop;
done_testing();
