
# Copyright (c) rollout_fdw authors
#
# Backends: all
#
# 043_delete_update.pl — DELETE and UPDATE on a rollout table.  DELETE writes
# a tombstone of each deleted key and UPDATE a new version (after a tombstone
# of the old key when the key changes), in the transaction's WAL entry.  Every
# result is compared with a heap table that gets the same statements:
#  - by key, by a non-key condition, by range, with RETURNING, UPDATE of the
#    key itself;
#  - a transaction's own scans see its deletes; a savepoint rolled back and an
#    aborted transaction leave nothing;
#  - a delete large enough for an ingest segment, and one that spills the
#    transaction buffer;
#  - deleted keys stay hidden through flush, merge and compaction, and come
#    back when inserted again;
#  - a randomized run of inserts, deletes and updates interleaved with flush,
#    merge and compaction, checked against the heap after every step;
#  - exact counts equal count(*);
#  - one statement that writes a key twice: a DELETE or UPDATE in a WITH
#    never deletes the row its own statement inserted (it never saw it), in
#    memory and from a spilled buffer; an UPDATE that moves rows onto keys
#    other rows leave keeps them when the keys are equal but not identical
#    (numeric 2 and 2.0, float8 0 and -0).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node observe try_sql preload loop_size);
use Test::More;

srand(43);

my $node = mode_node('delete_update');
my $store = RolloutStore->for_test('043_delete_update');
$store->create_extension_and_server($node);

$node->safe_psql('postgres', q{
CREATE TABLE h (id int PRIMARY KEY, run int, reward float8, note text);
CREATE FOREIGN TABLE r (id int, run int, reward float8, note text)
  SERVER s OPTIONS (store 'du', key 'id');
});

# The same statements on both tables; the rows must agree afterwards.
my $both = sub {
	my ($sql) = @_;
	my $out = '';
	for my $t ('h', 'r')
	{
		(my $s = $sql) =~ s/\bTBL\b/$t/g;
		$out .= $node->safe_psql('postgres', $s) . "\n";
	}
	return $out;
};
my $rows = sub {
	my ($t) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(id || ':' || coalesce(run::text, '-') || ':' || coalesce(reward::text, '-') || ':' || coalesce(note, '-'), ',' ORDER BY id), '') FROM $t");
};
# Selective reads too: pushed conditions, zone maps and key skips must not
# let an older version show through a newer tombstone.
my $filtered = sub {
	my ($t) = @_;
	return $node->safe_psql('postgres', join(' UNION ALL ',
		"SELECT 'run', coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM $t WHERE run = 3",
		"SELECT 'reward', coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM $t WHERE reward BETWEEN 10 AND 40",
		"SELECT 'note', coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM $t WHERE note IS NOT NULL AND id < 200",
		"SELECT 'keys', coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM $t WHERE id IN (7, 40, 41, 50, 51, 365, 399)"));
};
my $agree = sub {
	my ($what) = @_;
	is($rows->('r'), $rows->('h'), $what);
	is($filtered->('r'), $filtered->('h'), "$what (selective reads)");
};

$node->safe_psql('postgres',
	"INSERT INTO h SELECT g, g % 10, g / 4.0, 'n' || g FROM generate_series(1, 400) g;"
	  . "INSERT INTO r SELECT g, g % 10, g / 4.0, 'n' || g FROM generate_series(1, 400) g;"
	  . "SELECT rollout_flush('r'); SELECT rollout_merge('r');");
$node->safe_psql('postgres',
	"INSERT INTO r SELECT g, g % 10, g / 4.0, 'g' || g FROM generate_series(301, 500) g;"
	  . "INSERT INTO h SELECT g, g % 10, g / 4.0, 'g' || g FROM generate_series(301, 500) g"
	  . " ON CONFLICT (id) DO UPDATE SET run = excluded.run, reward = excluded.reward, note = excluded.note;"
	  . "SELECT rollout_flush('r');");
$agree->('base, generation: the same rows as the heap');

# --- DELETE ---
is($node->safe_psql('postgres', 'DELETE FROM r WHERE id = 7'), '', 'DELETE by key');
$node->safe_psql('postgres', 'DELETE FROM h WHERE id = 7');
$agree->('a key deleted from the base is gone');
is($node->safe_psql('postgres', 'SELECT count(*) FROM r WHERE id = 7'), '0', 'a lookup of the deleted key finds nothing');

my $ret_r = $node->safe_psql('postgres', 'DELETE FROM r WHERE run = 3 AND id < 100 RETURNING id, note');
my $ret_h = $node->safe_psql('postgres', 'DELETE FROM h WHERE run = 3 AND id < 100 RETURNING id, note');
is(join(',', sort split /\n/, $ret_r), join(',', sort split /\n/, $ret_h),
	'DELETE ... RETURNING returns the deleted rows');
$agree->('DELETE by a non-key condition');

my $deleted_before = preload()
  ? $node->safe_psql('postgres', q{SELECT rows_deleted FROM rollout_stat_stores WHERE store = 'du'}) : 0;
my $range_rows = $node->safe_psql('postgres', 'SELECT count(*) FROM r WHERE id BETWEEN 350 AND 420');
$both->('DELETE FROM TBL WHERE id BETWEEN 350 AND 420');
$agree->('DELETE of a key range over base and generation');
SKIP:
{
	skip 'rollout_stat_stores needs the preloaded writer', 1 unless preload();
	is($node->safe_psql('postgres', q{SELECT rows_deleted FROM rollout_stat_stores WHERE store = 'du'}) - $deleted_before,
		$range_rows, "rollout_stat_stores.rows_deleted counts the $range_rows tombstones");
}

# --- UPDATE ---
$both->("UPDATE TBL SET reward = reward * 10, note = 'upd' WHERE run = 5");
$agree->('UPDATE of non-key columns');
my $up_r = $node->safe_psql('postgres', "UPDATE r SET note = note || '!' WHERE id = 12 RETURNING id, note");
my $up_h = $node->safe_psql('postgres', "UPDATE h SET note = note || '!' WHERE id = 12 RETURNING id, note");
is($up_r, $up_h, 'UPDATE ... RETURNING returns the new row');
$both->('UPDATE TBL SET id = id + 10000 WHERE id IN (20, 21, 22)');
$agree->('UPDATE of the key moves the rows');
# (the heap's primary key is checked row by row, so it takes two steps)
$node->safe_psql('postgres', 'UPDATE r SET id = CASE id WHEN 24 THEN 25 ELSE 24 END WHERE id IN (24, 25)');
$node->safe_psql('postgres', 'UPDATE h SET id = -id WHERE id IN (24, 25);'
	  . 'UPDATE h SET id = CASE id WHEN -24 THEN 25 ELSE 24 END WHERE id IN (-24, -25)');
$agree->('an UPDATE that swaps two keys keeps both rows');
$both->('DELETE FROM TBL WHERE id = 70');
$node->safe_psql('postgres', 'UPDATE r SET id = id + 1 WHERE id BETWEEN 60 AND 69');
$node->safe_psql('postgres', 'UPDATE h SET id = -(id + 1) WHERE id BETWEEN 60 AND 69; UPDATE h SET id = -id WHERE id < 0');
$agree->('an UPDATE that shifts keys onto each other');
$both->('UPDATE TBL SET run = NULL, note = NULL WHERE id = 30');
$agree->('UPDATE to nulls is a version, not a tombstone');

# an AFTER trigger sees the statement's rows, moved keys included
$node->safe_psql('postgres', q{
CREATE TABLE seen (what text);
CREATE FUNCTION log_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('INSERT INTO seen SELECT %L || '':'' || count(*) FILTER (WHERE id = 20012) || '','' || count(*) FILTER (WHERE id = 12) FROM %I',
                 TG_TABLE_NAME, TG_TABLE_NAME);
  RETURN NULL;
END $$;
CREATE TRIGGER r_seen AFTER UPDATE ON r FOR EACH STATEMENT EXECUTE FUNCTION log_seen();
CREATE TRIGGER h_seen AFTER UPDATE ON h FOR EACH STATEMENT EXECUTE FUNCTION log_seen();
});
$both->('UPDATE TBL SET id = id + 20000 WHERE id = 12');
is($node->safe_psql('postgres', q{SELECT string_agg(what, ' ' ORDER BY what) FROM seen}), 'h:1,0 r:1,0',
	'an AFTER STATEMENT trigger sees the moved row at its new key and not at its old one');
$node->safe_psql('postgres', 'DROP TRIGGER r_seen ON r; DROP TRIGGER h_seen ON h');
$agree->('after the UPDATE with a trigger');

# --- one statement that writes a key twice ---
# A heap with a primary key cannot take these statements (its INSERT meets
# the old row), so the rollout table's rows are checked as a heap without
# one would have them, and the heap gets the same change in two steps.
$node->safe_psql('postgres', q{WITH d AS (DELETE FROM r WHERE id = 80) INSERT INTO r VALUES (80, 8, 8, 'cte')});
$node->safe_psql('postgres', q{UPDATE h SET run = 8, reward = 8, note = 'cte' WHERE id = 80});
$agree->('a DELETE in a WITH keeps the row its statement inserts under the same key');
$node->safe_psql('postgres', q{WITH u AS (UPDATE r SET id = 90081 WHERE id = 81) INSERT INTO r VALUES (81, 0, 0, 'new81')});
$node->safe_psql('postgres', q{UPDATE h SET id = 90081 WHERE id = 81; INSERT INTO h VALUES (81, 0, 0, 'new81')});
$agree->('an UPDATE in a WITH moves the old row away and keeps the new one');
$node->safe_psql('postgres', q{WITH i AS (INSERT INTO r VALUES (84, 3, 3, 'ins84') RETURNING id) DELETE FROM r WHERE id IN (SELECT id FROM i)});
$node->safe_psql('postgres', q{UPDATE h SET run = 3, reward = 3, note = 'ins84' WHERE id = 84});
$agree->('a DELETE of the keys a WITH inserts deletes the old rows only');
$node->safe_psql('postgres', q{SET rollout_fdw.transaction_buffer_size = 64;
WITH d AS (DELETE FROM r WHERE id BETWEEN 1 AND 199 AND id % 3 = 0)
INSERT INTO r SELECT g, 33, 33, repeat('s', 200) FROM generate_series(1, 199) g WHERE g % 3 = 0});
$node->safe_psql('postgres', q{DELETE FROM h WHERE id BETWEEN 1 AND 199 AND id % 3 = 0;
INSERT INTO h SELECT g, 33, 33, repeat('s', 200) FROM generate_series(1, 199) g WHERE g % 3 = 0});
$agree->('the same with the statement\'s rows spilled to a file before its tombstones');

$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE rn (id numeric, v text) SERVER s OPTIONS (store 'du_numeric', key 'id');
INSERT INTO rn VALUES (1, 'A'), (2, 'B');
UPDATE rn SET id = id + 1.0;
CREATE FOREIGN TABLE rf (id float8, v text) SERVER s OPTIONS (store 'du_float', key 'id');
INSERT INTO rf VALUES (-1, 'a'), (0, 'b');
UPDATE rf SET id = CASE WHEN id = -1 THEN '-0'::float8 ELSE 7 END;
});
is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM rn}), '2.0:A,3.0:B',
	'an UPDATE that moves a row to 2.0 and another away from 2 keeps both (one key, two images)');
is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM rf}), '-0:a,7:b',
	'an UPDATE that moves a row to -0 and another away from 0 keeps both');
$node->safe_psql('postgres', q{SELECT rollout_flush('rn'); SELECT rollout_flush('rf')});
is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM rn}) . ' '
	  . $node->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM rf}),
	'2.0:A,3.0:B -0:a,7:b', '... also once flushed');

# --- partitions: rollout tables as partitions of one table ---
$node->safe_psql('postgres', q{
CREATE TABLE p (id int, part int, note text) PARTITION BY LIST (part);
CREATE TABLE p1 PARTITION OF p FOR VALUES IN (1);
CREATE FOREIGN TABLE p2 PARTITION OF p FOR VALUES IN (2) SERVER s OPTIONS (store 'p2', key 'id');
CREATE FOREIGN TABLE p3 (note text, part int, id int) SERVER s OPTIONS (store 'p3', key 'id');
ALTER TABLE p ATTACH PARTITION p3 FOR VALUES IN (3);
INSERT INTO p1 VALUES (1, 1, 'a');
INSERT INTO p2 VALUES (2, 2, 'b'), (4, 2, 'd');
INSERT INTO p3 VALUES ('c', 3, 3), ('e', 3, 5);
});
my $parts = q{SELECT string_agg(tableoid::regclass || ':' || id || ':' || note, ',' ORDER BY id) FROM p};
is($node->safe_psql('postgres', 'DELETE FROM p WHERE id = 3 RETURNING id, note'), '3|c',
	'DELETE through the parent of rollout partitions whose keys are at other positions');
$node->safe_psql('postgres', q{UPDATE p SET part = 2, note = note || '+' WHERE id IN (1, 2, 4)});
is($node->safe_psql('postgres', $parts), 'p2:1:a+,p2:2:b+,p2:4:d+,p3:5:e',
	'an UPDATE that moves a row into a rollout partition it also updates');
$node->safe_psql('postgres', q{UPDATE p SET id = id + 100 WHERE part = 2});
is($node->safe_psql('postgres', $parts), 'p3:5:e,p2:101:a+,p2:102:b+,p2:104:d+',
	'an UPDATE of the key through the parent');

# --- transactions ---
is($node->safe_psql('postgres', q{
BEGIN;
DELETE FROM r WHERE id = 40;
SELECT count(*) FROM r WHERE id IN (40, 41);
SAVEPOINT a;
DELETE FROM r WHERE id = 41;
SELECT count(*) FROM r WHERE id IN (40, 41);
ROLLBACK TO a;
SELECT count(*) FROM r WHERE id IN (40, 41);
UPDATE r SET note = 'mine' WHERE id = 41;
SELECT note FROM r WHERE id = 41;
COMMIT;
}), "1\n0\n1\nmine", 'a transaction sees its own deletes and updates; a savepoint rolls one back');
$node->safe_psql('postgres', "DELETE FROM h WHERE id = 40; UPDATE h SET note = 'mine' WHERE id = 41;");
$agree->('after the commit: the delete and the update, not the rolled-back delete');

$node->safe_psql('postgres', 'BEGIN; DELETE FROM r; ROLLBACK;');
$agree->('an aborted DELETE leaves every row');

# deleted then inserted again in one transaction: the later version wins
$node->safe_psql('postgres', "BEGIN; DELETE FROM r WHERE id = 50; INSERT INTO r VALUES (50, 0, 0, 'again'); COMMIT;");
$node->safe_psql('postgres', "UPDATE h SET run = 0, reward = 0, note = 'again' WHERE id = 50;");
$agree->('delete and insert of a key in one transaction: the insert wins');
$node->safe_psql('postgres', "BEGIN; INSERT INTO r VALUES (51, 1, 1, 'x'); DELETE FROM r WHERE id = 51; COMMIT;");
$node->safe_psql('postgres', 'DELETE FROM h WHERE id = 51;');
$agree->('insert and delete of a key in one transaction: the delete wins');

# a large DELETE goes to an ingest segment; a small buffer spills to a file
$both->('DELETE FROM TBL WHERE id % 7 = 1');
$both->("INSERT INTO TBL SELECT g, 0, 0, 'bulk' FROM generate_series(100000, 105000) g");
my @ingest_before = $store->objects_in('du/ingest');
$node->safe_psql('postgres',
	"SET rollout_fdw.ingest_threshold = 64; DELETE FROM r WHERE id % 7 = 2 OR note = 'bulk';");
$node->safe_psql('postgres', "DELETE FROM h WHERE id % 7 = 2 OR note = 'bulk';");
cmp_ok(scalar($store->objects_in('du/ingest')), '>', scalar(@ingest_before),
	'5,000 tombstones past ingest_threshold went to an ingest segment');
$agree->('a DELETE staged as an ingest segment');
$node->safe_psql('postgres',
	"SET rollout_fdw.transaction_buffer_size = 64; BEGIN; DELETE FROM r WHERE id % 7 = 3; UPDATE r SET note = 'spill' WHERE id % 7 = 4; SELECT count(*) FROM r; COMMIT;");
$node->safe_psql('postgres', "DELETE FROM h WHERE id % 7 = 3; UPDATE h SET note = 'spill' WHERE id % 7 = 4;");
$agree->('a DELETE and UPDATE whose buffer spilled to a file');

# --- maintenance keeps deleted keys hidden ---
$node->safe_psql('postgres', "SELECT rollout_flush('r')");
$agree->('after flush');
$node->safe_psql('postgres', "SELECT rollout_merge('r')");
$agree->('after merge');
$node->safe_psql('postgres', "SELECT rollout_compact('r', 1)");
$agree->('after compaction');
my $o = observe($node, 'r');
is($o->{exact_row_count}, $node->safe_psql('postgres', 'SELECT count(*) FROM h'),
	'exact counts do not count deleted keys');

$both->("INSERT INTO TBL VALUES (7, 7, 7, 'back')");
$agree->('a deleted key inserted again is back');

# --- what is refused ---
my ($ok, undef, $err) = try_sql($node,
	'BEGIN ISOLATION LEVEL SERIALIZABLE; DELETE FROM r WHERE id = 6; COMMIT;');
ok(!$ok && $err =~ /SERIALIZABLE/, 'DELETE in a SERIALIZABLE transaction is refused')
  or diag($err);
$agree->('the refused DELETE changed nothing');

# --- randomized against the heap ---
my $steps = loop_size(file => 40, remote => 20, long => 200);
my $agreed = 0;
for my $step (1 .. $steps)
{
	my $op = int(rand(9));
	my $a = int(rand(600));
	my $b = $a + int(rand(40));
	my $what;
	if ($op <= 2)
	{
		my $n = 1 + int(rand(30));
		$what = "upsert $a..+$n";
		$node->safe_psql('postgres',
			"INSERT INTO r SELECT g, $step, g * 0.5, 's$step' FROM generate_series($a, $a + $n) g;"
			  . "INSERT INTO h SELECT g, $step, g * 0.5, 's$step' FROM generate_series($a, $a + $n) g"
			  . " ON CONFLICT (id) DO UPDATE SET run = excluded.run, reward = excluded.reward, note = excluded.note;");
	}
	elsif ($op <= 4)
	{
		$what = "delete $a..$b";
		$both->("DELETE FROM TBL WHERE id BETWEEN $a AND $b");
	}
	elsif ($op == 5)
	{
		$what = "delete run $step % 10";
		$both->('DELETE FROM TBL WHERE run = ' . ($step % 10));
	}
	elsif ($op == 6)
	{
		$what = "update $a..$b";
		$both->("UPDATE TBL SET reward = -reward, note = 'u$step' WHERE id BETWEEN $a AND $b");
	}
	elsif ($op == 7)
	{
		$what = 'flush';
		$node->safe_psql('postgres', "SELECT rollout_flush('r')");
	}
	else
	{
		$what = 'merge and compaction';
		$node->safe_psql('postgres', "SELECT rollout_merge('r'); SELECT rollout_compact('r', 2)");
	}
	my ($got, $want) = ($rows->('r') . $filtered->('r'), $rows->('h') . $filtered->('h'));
	if ($got ne $want)
	{
		diag("step $step ($what):\n got $got\nwant $want");
		last;
	}
	$agreed++;
}
is($agreed, $steps, "$steps random steps agree with the heap after each step");
is(observe($node, 'r')->{exact_row_count}, $node->safe_psql('postgres', 'SELECT count(*) FROM h'),
	'exact counts equal count(*) after the random steps');

done_testing();
