
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# Writers that act on an old view of the WAL must never land an entry in a
# position garbage collection emptied: such an entry would sit at or below
# the shard's replay_after, acknowledged and never read.
#
#  1. gc never collects fence markers (DESIGN.md §8): after two claims, a
#     flush and a gc with no grace, the two fences are still there and every
#     other sealed entry is gone.
#  2. A group-commit leader idle for longer than half of
#     rollout_fdw.min_gc_grace checks the shard manifest before it writes: a
#     cluster whose shard another cluster claimed meanwhile is refused as
#     fenced even when the successor's fence marker is gone (collected by an
#     older build, or by hand), instead of committing into that position.
#  3. A direct commit (no shared-memory writer) that stalls between listing
#     the WAL and its PUT for longer than half the minimum grace lists it
#     again: while it slept another commit took its position, a flush sealed
#     it and gc collected it; the stalled commit lands after the tip and is
#     read.  The fault point wal.before_put in error and crash mode loses
#     nothing either.
# Each part sets up the mode it needs, whatever the suite's mode.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlScript;
use RolloutStore;
use RolloutTest
  qw(writer_node shard_of count_in_log wait_for_fault release_faults hold_faults restart_after_crash with_min_gc_grace);

# ---------------------------------------------------------------------------
# 1. fence markers survive gc

{
	my $store = RolloutStore->for_test('031_fences', backend => 'file');
	my $node = writer_node('fences');
	$node->safe_psql('postgres',
		"CREATE EXTENSION rollout_fdw;\n" . $store->server_sql('s')
		  . "CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'f');");
	my $wal = 'f/shards/' . shard_of($node) . '/wal';

	# claim 1 (fence at 1), two entries; restart; claim 2 (fence at 4), one entry
	$node->safe_psql('postgres', "INSERT INTO t VALUES (1, 'a')");
	$node->safe_psql('postgres', "INSERT INTO t VALUES (2, 'b')");
	$node->restart;
	$node->safe_psql('postgres', "INSERT INTO t VALUES (3, 'c')");
	my %kind = map { $_->[0] => $_->[1]{kind} } $store->wal_entries($wal);
	is(join(',', map { "$_:$kind{$_}" } sort { $a <=> $b } keys %kind),
		'1:fence,2:wal,3:wal,4:fence,5:wal', 'two claims wrote fences at 1 and 4');

	with_min_gc_grace($node, 0, sub { $node->safe_psql('postgres', q{
SELECT rollout_flush('t');
SELECT objects_deleted FROM rollout_gc('t', '0');}) });
	is(join(',', $store->wal_positions($wal)), '1,4',
		'gc with no grace deleted every sealed entry but the fence markers');
	is($node->safe_psql('postgres', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM t'),
		'1,2,3', 'and every row is still read');
	$node->stop;
}

# ---------------------------------------------------------------------------
# 2. an idle leader checks the manifest before it writes

{
	my $store = RolloutStore->for_test('031_idle', backend => 'file');
	my %node;
	for my $name ('a', 'b')
	{
		$node{$name} = writer_node("idle_$name",
			'rollout_fdw.shard_id' => 'twin',
			'rollout_fdw.min_gc_grace' => '2s');
		$node{$name}->safe_psql('postgres',
			"CREATE EXTENSION rollout_fdw;\n" . $store->server_sql('s')
			  . "CREATE FOREIGN TABLE t (id text, v int) SERVER s OPTIONS (store 'idle');");
	}
	my ($A, $B) = ($node{a}, $node{b});
	my $wal = 'idle/shards/twin/wal';

	$A->safe_psql('postgres', "INSERT INTO t VALUES ('a1', 1)");    # fence 1, entry 2
	$B->safe_psql('postgres', "INSERT INTO t VALUES ('b1', 1)");    # fence 3, entry 4
	my $fence = $store->wal_entry($wal, 3);
	is($fence->{kind} . ':' . $fence->{epoch}, 'fence:2', 'B claimed epoch 2 with a fence at 3');

	# the fence vanishes, as an older gc could have collected it
	ok($store->delete($store->wal_key($wal, 3)), 'the fence marker is deleted');

	# A's leader wrote last at position 2, more than half the grace ago
	sleep 2;
	my $offset = -s $A->logfile;
	my ($ret, $out, $err) = $A->psql('postgres', "INSERT INTO t VALUES ('a2', 2)");
	isnt($ret, 0, "A's commit after B's claim fails");
	like($err, qr/taken over by another writer/, '... as taken over');
	is(count_in_log($A, qr/checking that this cluster still owns shard "twin"/, $offset), 1,
		'A looked at the shard manifest before writing');
	ok(!$store->exists($store->wal_key($wal, 3)), 'nothing was written at the emptied position');
	is($B->safe_psql('postgres', 'SELECT string_agg(id, \',\' ORDER BY id) FROM t'),
		'a1,b1', "B reads A's first row and its own, and no row of A's refused commit");
	$A->stop;
	$B->stop;
}

# ---------------------------------------------------------------------------
# 3. a stalled direct commit looks at the WAL again

{
	my $store = RolloutStore->for_test('031_stall', backend => 'file');
	my $node = PostgreSQL::Test::Cluster->new('stall');
	$node->init;
	$node->append_conf('postgresql.conf', "rollout_fdw.min_gc_grace = '2s'");
	$node->start;
	$node->safe_psql('postgres',
		"CREATE EXTENSION rollout_fdw;\n" . $store->server_sql('s')
		  . "CREATE FOREIGN TABLE t (id text, v int) SERVER s OPTIONS (store 'stall');");
	my $wal = 'stall/shards/' . shard_of($node) . '/wal';
	$node->safe_psql('postgres', "INSERT INTO t VALUES ('first', 0)");    # position 1

	# X lists the WAL (tip 1), then holds before its PUT at 2
	my $offset = -s $node->logfile;
	my $x = PsqlScript->start($node, sql => q{
SET rollout_fdw.fail_at = 'wal.before_put:hold';
INSERT INTO t VALUES ('stalled', 1);
});
	wait_for_fault($node, 'wal.before_put', $offset);

	# meanwhile Y commits at 2, a flush seals it, and gc collects it
	$node->safe_psql('postgres', "INSERT INTO t VALUES ('y', 2)");
	$node->safe_psql('postgres', "SELECT rollout_flush('t')");
	sleep 3;    # the sealing manifest's predecessor and entry 2 age past the grace
	$node->safe_psql('postgres', "SELECT objects_deleted FROM rollout_gc('t', '2 s')");
	ok(!$store->exists($store->wal_key($wal, 2)), 'gc collected the sealed position 2');

	release_faults($node);
	my ($exit, $stdout, $stderr) = $x->finish;
	hold_faults($node);
	is($exit, 0, 'the stalled commit succeeds') or diag($stderr);
	is(count_in_log($node, qr/looking at the WAL of shard "[^"]+" of store "stall" again/, $offset), 1,
		'after listing the WAL again');
	is($node->safe_psql('postgres', 'SELECT string_agg(id, \',\' ORDER BY id) FROM t'),
		'first,stalled,y', 'its row is read with the others');
	is(join(',', $store->wal_positions($wal)), '3', 'it landed at 3, after the sealed tip');

	# the same fault point in error and crash mode: nothing of the commit is visible
	my ($ret, $out, $err) = $node->psql('postgres', q{
SET rollout_fdw.fail_at = 'wal.before_put:error';
INSERT INTO t VALUES ('error', 3);});
	isnt($ret, 0, 'wal.before_put:error fails the commit');
	($ret, $out, $err) = $node->psql('postgres', q{
SET rollout_fdw.fail_at = 'wal.before_put:crash';
INSERT INTO t VALUES ('crash', 4);});
	isnt($ret, 0, 'wal.before_put:crash ends the session');

	ok(restart_after_crash($node), 'the postmaster stopped after the crash');
	is($node->safe_psql('postgres', 'SELECT string_agg(id, \',\' ORDER BY id) FROM t'),
		'first,stalled,y', 'neither interrupted commit is visible');
	$node->safe_psql('postgres', "INSERT INTO t VALUES ('after', 5)");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '4', 'and the next commit works');
	is(join(',', $store->wal_positions($wal)), '3,4', 'at the next position');
	$node->stop;
}

done_testing();
