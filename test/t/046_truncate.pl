# Copyright (c) rollout_fdw authors
#
# Backends: all
#
# 046_truncate.pl — TRUNCATE of a rollout table: a store-wide cut that hides
# every version committed before it, on every shard.
#  - in a transaction: rows written before the TRUNCATE are gone, rows after
#    it stay; its own scans see only them; ROLLBACK and ROLLBACK TO SAVEPOINT
#    take the TRUNCATE back;
#  - order against concurrent single-row inserts on this cluster and on
#    another one: what each inserting session committed before the TRUNCATE
#    began is hidden, what it committed after the TRUNCATE returned is
#    visible, and the visible ids of a session are a suffix of its ids;
#  - the cut survives flush, merge, a crash and a restart, and compaction
#    removes the hidden rows: physical rows equal logical rows again;
#  - preloaded, a TRUNCATE queued for group commit behind other commits of
#    the store (through another table of the same store, whose lock it does
#    not take) hides them all, however the leader groups them: the commits
#    come out in one serial order;
#  - a reader that lists the shard manifests before, and the base after, a
#    flush, merge and compaction sees neither a truncated row nor a deleted
#    one whose tombstone the compaction dropped;
#  - the TRUNCATE privilege is PostgreSQL's, SERIALIZABLE is refused, and
#    two rollout tables in one TRUNCATE are refused.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(mode_node observe poll_until try_sql wait_for_fault release_faults hold_faults
  preload with_min_gc_grace);
use Test::More;

my $store = RolloutStore->for_test('046_truncate');
my %node;
for my $name ('a', 'b')
{
	# each cluster sees the other's commits as soon as they land, and a
	# snapshot lists the manifests (the fault point between them is used)
	my $n = mode_node("truncate_$name", conf => ['rollout_fdw.manifest_refresh_interval = 0']);
	$store->create_extension_and_server($n);
	$n->safe_psql('postgres', q{
CREATE FOREIGN TABLE r (id int, v text) SERVER s OPTIONS (store 'trunc', key 'id', read_wal_tail 'true');
CREATE FOREIGN TABLE other (id int) SERVER s OPTIONS (store 'other', key 'id');
});
	$node{$name} = $n;
}
my ($A, $B) = ($node{a}, $node{b});
my $ids = sub {
	my ($node) = @_;
	return $node->safe_psql('postgres', q{SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM r});
};

# --- in a transaction ------------------------------------------------------
$A->safe_psql('postgres', q{
INSERT INTO r SELECT g, 'old' FROM generate_series(1, 50) g;
SELECT rollout_flush('r'); SELECT rollout_merge('r');
INSERT INTO r SELECT g, 'newer' FROM generate_series(40, 60) g;
});
is($A->safe_psql('postgres', q{
BEGIN;
INSERT INTO r VALUES (100, 'before');
TRUNCATE r;
SELECT 'in txn: ' || count(*) FROM r;
INSERT INTO r VALUES (101, 'after'), (5, 'after');
SELECT 'in txn: ' || string_agg(id || '=' || v, ',' ORDER BY id) FROM r;
COMMIT;
}), "in txn: 0\nin txn: 5=after,101=after", 'a transaction sees only what it wrote after its TRUNCATE');
is($ids->($A), '5,101', 'after COMMIT: the rows written after the TRUNCATE, nothing else');
is($ids->($B), '5,101', 'the other cluster (reading the WAL tail) agrees');

$A->safe_psql('postgres', q{BEGIN; TRUNCATE r; ROLLBACK;});
is($ids->($A), '5,101', 'a rolled-back TRUNCATE hides nothing');
is($A->safe_psql('postgres', q{
BEGIN;
INSERT INTO r VALUES (102, 'x');
SAVEPOINT s;
TRUNCATE r;
INSERT INTO r VALUES (103, 'y');
ROLLBACK TO s;
SELECT string_agg(id::text, ',' ORDER BY id) FROM r;
COMMIT;
}), '5,101,102', 'ROLLBACK TO SAVEPOINT takes the TRUNCATE and its later rows back');
is($ids->($A), '5,101,102', 'and the transaction commits its other rows');

# a TRUNCATE alone, then one with nothing before it to hide
$A->safe_psql('postgres', 'TRUNCATE r');
is($ids->($A), '', 'TRUNCATE alone empties the table');
$A->safe_psql('postgres', 'TRUNCATE r');
is($ids->($B), '', 'a second TRUNCATE of an empty table is harmless');

# --- order against concurrent inserts on both clusters ---------------------
# Each session commits one row per transaction, in id order, until told to
# stop; it stops only after the TRUNCATE has returned and rows of both
# sessions committed after it are visible, however slow the machine (a
# fixed number of inserts could all land before the TRUNCATE on a loaded
# machine, and then the test would check nothing). CALL prints its last id.
my %first = (a => 10_000, b => 50_000);
for my $n ($A, $B)
{
	$n->safe_psql('postgres', q{
CREATE TABLE insert_control (stop bool NOT NULL);
INSERT INTO insert_control VALUES (false);
CREATE PROCEDURE insert_until_stopped(first int, INOUT last int) LANGUAGE plpgsql AS $$
BEGIN
	last := first - 1;
	LOOP
		INSERT INTO r VALUES (last + 1, 'c');
		COMMIT;
		last := last + 1;
		-- 20,000 commits is far more than the test waits for: a runaway
		-- session ends on its own
		EXIT WHEN last >= first + 19999 OR (SELECT stop FROM insert_control);
		PERFORM pg_sleep(0.002);
	END LOOP;
END $$;
});
}
my %session = (
	a => PsqlScript->start($A, command => "CALL insert_until_stopped($first{a}, NULL)"),
	b => PsqlScript->start($B, command => "CALL insert_until_stopped($first{b}, NULL)"));
# SELECT of $aggregate over session a's rows, then over session b's
my $per_session = sub {
	my ($aggregate) = @_;
	return "SELECT $aggregate FILTER (WHERE id < $first{b}), $aggregate FILTER (WHERE id >= $first{b}) FROM r";
};
my $both_have = sub {
	my ($rows) = @_;
	return "SELECT count(*) FILTER (WHERE id < $first{b}) >= $rows"
	  . " AND count(*) FILTER (WHERE id >= $first{b}) >= $rows FROM r";
};
ok(defined poll_until($A, $both_have->(100), 't', 120),
	'both inserting sessions have committed 100 rows');
my %max_before;
@max_before{qw(a b)} = split /\|/, $A->safe_psql('postgres', $per_session->('max(id)'));
$A->safe_psql('postgres', 'TRUNCATE r');
my %after;
@after{qw(a b)} = split /\|/, $A->safe_psql('postgres', $per_session->('max(id)'));
ok(defined poll_until($A, $both_have->(20), 't', 120),
	'both sessions have committed 20 rows after the TRUNCATE returned');
$_->safe_psql('postgres', 'UPDATE insert_control SET stop = true') for ($A, $B);
my %last;
for my $who ('a', 'b')
{
	my ($exit, $out, $err) = $session{$who}->finish;
	is($exit, 0, "inserting session $who finished") or diag($err);
	$last{$who} = $out;
}
$B->safe_psql('postgres', q{SELECT rollout_flush('r')});
$A->safe_psql('postgres', q{SELECT rollout_flush('r')});

for my $reader ($A, $B)
{
	my $name = $reader == $A ? 'a' : 'b';
	for my $who ('a', 'b')
	{
		my ($n, $lo, $hi) = split /\|/, $reader->safe_psql('postgres',
			"SELECT count(*), min(id), max(id) FROM r WHERE id BETWEEN $first{$who} AND $last{$who}");
		cmp_ok($lo, '>', $max_before{$who},
			"read on $name: session $who\'s rows committed before the TRUNCATE began are hidden");
		is($hi, $last{$who}, "read on $name: session $who\'s rows committed after it are visible");
		is($n, $hi - $lo + 1, "read on $name: session $who\'s visible rows are a suffix of its ids");
	}
}
note(join('; ', map {
	"session $_: up to $max_before{$_} before the TRUNCATE, up to "
	  . ($after{$_} || 'none') . " right after it, last $last{$_}"
} 'a', 'b'));

# --- the cut survives flush, merge, a crash, a restart; compaction ---------
$A->safe_psql('postgres', q{INSERT INTO r VALUES (1, 'pre')});
$A->safe_psql('postgres', q{SELECT rollout_flush('r'); SELECT rollout_merge('r')});
$A->safe_psql('postgres', 'TRUNCATE r');
$A->safe_psql('postgres', q{INSERT INTO r VALUES (2, 'post')});
$A->stop('immediate');
$A->start;
is($ids->($A), '2', 'after a crash: the TRUNCATE still hides the older rows');
$B->safe_psql('postgres', q{SELECT rollout_flush('r'); SELECT rollout_merge('r')});
$A->safe_psql('postgres', q{SELECT rollout_flush('r'); SELECT rollout_merge('r')});
is($ids->($B), '2', 'after flush and merge: the other cluster agrees');
$A->safe_psql('postgres', q{
CREATE FOREIGN TABLE r_plain (id int, v text) SERVER s OPTIONS (store 'trunc', key 'id');
});
is($A->safe_psql('postgres', 'SELECT string_agg(id::text, \',\') FROM r_plain'), '2',
	'a table without read_wal_tail agrees once everything is flushed');
cmp_ok(observe($A, 'r')->{row_count}, '>', 1, 'before compaction the hidden rows are still stored');
$A->safe_psql('postgres', q{SELECT rollout_compact('r', min_fragments => 2)});
my $o = observe($A, 'r');
is($o->{exact_row_count}, 1, 'exact count after compaction');
is($o->{row_count}, 1, 'compaction removed the rows the TRUNCATE hid');
is($ids->($B), '2', 'and reads still agree');

# --- a reader that read the shard manifests before the flush of a TRUNCATE,
# and the base after its merge, sees the cut (the base keeps it) -----------
$B->safe_psql('postgres', q{
CREATE FOREIGN TABLE r_plain (id int, v text) SERVER s OPTIONS (store 'trunc', key 'id');
});
$A->safe_psql('postgres', q{
INSERT INTO r SELECT g, 'old' FROM generate_series(10, 14) g;
SELECT rollout_flush('r'); SELECT rollout_merge('r');
});
is($B->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM r_plain}),
	'2,10,11,12,13,14', 'the other cluster sees the rows once merged');
my $offset = -s $B->logfile;
my $reader = PsqlScript->start($B, name => 'slow_reader', sql => q{
SELECT count(*) FROM r_plain;
SET rollout_fdw.fail_at = 'snapshot.after_shard_manifests:hold';
SELECT string_agg(id::text, ',' ORDER BY id) FROM r_plain;
});
wait_for_fault($B, 'snapshot.after_shard_manifests', $offset);
$A->safe_psql('postgres', q{
BEGIN; TRUNCATE r; INSERT INTO r VALUES (30, 'new'); COMMIT;
SELECT rollout_flush('r'); SELECT rollout_merge('r');
});
release_faults($B);
my ($reader_exit, $reader_out) = $reader->finish;
hold_faults($B);
is($reader_exit, 0, 'the slow reader finished');
is((split /\n/, $reader_out)[-1], '30',
	'it sees the TRUNCATE\'s row and not the rows before it, though its shard manifest predates the flush');

# fragments wholly below the cut are not even opened
my $plan = $B->safe_psql('postgres', q{
EXPLAIN (ANALYZE, FORMAT JSON, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM r_plain});
my ($read) = $plan =~ /"Fragments Read": (\d+)/;
my ($skipped) = $plan =~ /"Fragments Skipped": (\d+)/;
cmp_ok($skipped // 0, '>=', 1, "a scan skips the fragments the cut hides ($skipped skipped, $read read)");
is($B->safe_psql('postgres', q{SELECT string_agg(id::text, ',') FROM r_plain}), '30',
	'and returns the same rows');

# --- the same reader and a DELETE's tombstone, which unlike the cut a
# compaction drops: A's row is still in A's WAL tail (memtable, preloaded)
# when B's tombstone of it reaches the base; a flush and merge of A's shard
# and a compaction that drops both the row and the tombstone all commit
# between the reader's listing of the shard manifests and of the base.  Its
# shard manifest still shows the row unflushed, its base no longer has the
# tombstone that hid it: it must list again rather than bring the row back
# (store_snapshot.c, rollout_manifests_form_a_cut) ------------------------
$A->safe_psql('postgres', q{INSERT INTO r VALUES (500, 'deleted by b')});
is($B->safe_psql('postgres', q{DELETE FROM r WHERE id = 500 RETURNING v}), 'deleted by b',
	'the other cluster deletes the row from its WAL tail');
$B->safe_psql('postgres', q{SELECT rollout_merge('r')});
is($A->safe_psql('postgres', q{SELECT count(*) FROM r WHERE id = 500}), '0',
	'the tombstone in the base hides the row still in the WAL tail');
$offset = -s $A->logfile;
# (r_plain reads only A's own WAL tail: the shard that flushed and merged)
$reader = PsqlScript->start($A, name => 'reader_of_tombstone', sql => q{
SELECT count(*) FROM r_plain WHERE id = 500;  -- the planner's count is known: only the scan holds
SET rollout_fdw.fail_at = 'snapshot.after_shard_manifests:hold';
SELECT count(*) FROM r_plain WHERE id = 500;
});
wait_for_fault($A, 'snapshot.after_shard_manifests', $offset);
my $dropped = with_min_gc_grace($A, 0, sub { $A->safe_psql('postgres', q{
SELECT rollout_merge('r');
SELECT versions_dropped FROM rollout_compact('r', min_fragments => 2);
}) });
cmp_ok((split /\n/, $dropped)[-1], '>=', 2, 'the compaction dropped the row and its tombstone');
release_faults($A);
($reader_exit, $reader_out) = $reader->finish;
hold_faults($A);
is($reader_exit, 0, 'the reader between the listings finished');
is((split /\n/, $reader_out)[-1], '0', 'and the deleted row did not come back');
is($A->safe_psql('postgres', q{SELECT count(*) FROM r WHERE id = 500}), '0',
	'nor does it for a new reader');

# --- a TRUNCATE after the transaction's buffer spilled to disk --------------
is($A->safe_psql('postgres', q{
SET rollout_fdw.transaction_buffer_size = 64;
BEGIN;
INSERT INTO r SELECT g, repeat('s', 200) FROM generate_series(100000, 104000) g;
TRUNCATE r;
INSERT INTO r SELECT g, 'kept' FROM generate_series(1, 3000) g;
SAVEPOINT s;
TRUNCATE r;
ROLLBACK TO s;
SELECT count(*) || '|' || min(id) || '|' || max(id) FROM r;
COMMIT;
}), '3000|1|3000', 'spilled: the transaction sees the rows after its TRUNCATE');
is($B->safe_psql('postgres', q{SELECT count(*) || '|' || min(id) || '|' || max(id) FROM r}),
	'3000|1|3000', 'spilled: and commits exactly those');

# --- a TRUNCATE queued behind other commits of the store ------------------
# Two tables of one store: a TRUNCATE of one takes no lock of the other, so
# commits through the other queue beside it.  One leader at a time, held
# before it takes the queue; behind it a commit of two rows, then a
# TRUNCATE with a row of its own.  The TRUNCATE comes after both in the
# queue's order, so it hides both: a leader must not put it in one WAL entry
# after them, where its cut (the entry's stamp) would hide none of them.
if (preload())
{
	$A->safe_psql('postgres', 'ALTER SYSTEM SET rollout_fdw.wal_pipeline_depth = 1');
	$A->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$A->safe_psql('postgres', q{
CREATE FOREIGN TABLE q1 (id int, v text) SERVER s OPTIONS (store 'trunc_queue', key 'id');
CREATE FOREIGN TABLE q2 (id int, v text) SERVER s OPTIONS (store 'trunc_queue', key 'id');
INSERT INTO q1 VALUES (0, 'before');
});
	my $waiting = sub {
		my ($like) = @_;
		return qq{SELECT count(*) FROM pg_stat_activity
		  WHERE wait_event_type = 'Extension' AND query LIKE '$like'};
	};
	my $offset = -s $A->logfile;
	my $leader = PsqlScript->start($A,
		sql => "SET rollout_fdw.fail_at = 'group_commit.before_take:hold=queue';
INSERT INTO q1 VALUES (1, 'L');
");
	wait_for_fault($A, 'group_commit.before_take', $offset);
	my $first = PsqlScript->start($A, sql => "INSERT INTO q1 VALUES (2, 'A'), (3, 'A');
");
	ok(defined poll_until($A, $waiting->('INSERT INTO q1 VALUES (2%'), '1', 60),
		'queued: a commit of two rows behind the held leader');
	my $truncate = PsqlScript->start($A,
		sql => "BEGIN;
TRUNCATE q2;
INSERT INTO q2 VALUES (2, 'B');
COMMIT;
");
	ok(defined poll_until($A, $waiting->('COMMIT%'), '1', 60), 'queued behind it: a TRUNCATE with a row');
	release_faults($A, 'queue');
	for my $session ([ 'the held leader', $leader ], [ 'the two rows', $first ], [ 'the TRUNCATE', $truncate ])
	{
		my ($ret, undef, $err) = $session->[1]->finish;
		is($ret, 0, "$session->[0] commits") or diag($err);
	}
	my $rows = q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM q1};
	is($A->safe_psql('postgres', $rows), '2=B',
		'the TRUNCATE hides every commit queued before it, and keeps its own row');
	$A->safe_psql('postgres', q{SELECT rollout_flush('q1')});
	is($A->safe_psql('postgres', $rows), '2=B', 'also once flushed');
	$A->safe_psql('postgres', 'ALTER SYSTEM RESET rollout_fdw.wal_pipeline_depth');
	$A->safe_psql('postgres', 'SELECT pg_reload_conf()');
}

# --- privileges and refusals -----------------------------------------------
$A->safe_psql('postgres', q{
CREATE ROLE writer LOGIN;
GRANT USAGE ON FOREIGN SERVER s TO writer;
GRANT SELECT, INSERT ON r TO writer;
});
my ($ok, $out, $err) = try_sql($A, 'SET ROLE writer; TRUNCATE r');
ok(!$ok && $err =~ /permission denied for foreign table r/, 'TRUNCATE needs the TRUNCATE privilege')
  or diag($err);
$A->safe_psql('postgres', 'GRANT TRUNCATE ON r TO writer');
($ok, $out, $err) = try_sql($A, 'SET ROLE writer; TRUNCATE r');
ok($ok, 'with the privilege granted, it works') or diag($err);
is($ids->($A), '', 'and empties the table');
($ok, $out, $err) = try_sql($A, 'BEGIN ISOLATION LEVEL SERIALIZABLE; TRUNCATE r; COMMIT');
ok(!$ok && $err =~ /SERIALIZABLE/, 'TRUNCATE in a SERIALIZABLE transaction is refused') or diag($err);
($ok, $out, $err) = try_sql($A, 'TRUNCATE r, other');
ok(!$ok && $err =~ /only one rollout table/, 'two rollout tables in one TRUNCATE are refused')
  or diag($err);

done_testing();
