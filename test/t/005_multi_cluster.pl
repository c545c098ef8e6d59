
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 005_multi_cluster.pl — two clusters sharing one store (DESIGN.md §5, §8).
#
# Two PostgreSQL clusters (different system identifiers, hence different
# shards) use the same location and store, on any backend
# (test/perl/RolloutStore.pm).  Each writes only its own
# shard and sees its own rows at once.  The other cluster's rows become
# visible after that cluster flushes (a snapshot reads every shard's
# generations), or at once through a table with read_wal_tail 'true'.  For a
# key written on both clusters, the version written later wins, whichever
# cluster wrote it and wherever the version lives (generation or WAL tail).
#
# With the shared-memory writer (preload) each cluster's first commit claims
# its own shard: writer_epoch 1 and a fence marker at position 1 of its own
# WAL, so its entries with rows start at position 2.  One cluster's claim
# must not touch the other's shard (its epoch stays 1, its WAL has one fence).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(preload mode_node shard_of);
use Test::More;

my $pre = preload();
my $off = $pre ? 1 : 0;
my $epoch = $pre ? 1 : 0;    # writer_epoch of both shards, in every WAL entry

my $store = RolloutStore->for_test('005_multi_cluster');

my %node;
for my $name ('a', 'b')
{
	# each cluster sees the other's flushes as soon as they commit
	my $n = mode_node("cluster_$name", conf => ['rollout_fdw.manifest_refresh_interval = 0']);
	$store->create_extension_and_server($n);
	$n->safe_psql(
		'postgres', qq{
CREATE FOREIGN TABLE t (id text, v int, origin text, payload jsonb) SERVER s OPTIONS (store 'shared');
CREATE FOREIGN TABLE t_tail (id text, v int, origin text, payload jsonb) SERVER s OPTIONS (store 'shared', read_wal_tail 'true');
});
	$node{$name} = $n;
}
my ($A, $B) = ($node{a}, $node{b});

my $shard_a = shard_of($A);
my $shard_b = shard_of($B);
isnt($shard_a, $shard_b, 'the two clusters have different system identifiers');

sub state_of
{
	my ($node, $table, $where) = @_;
	$where //= 'true';
	return $node->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT id), coalesce(sum(v), 0) FROM $table WHERE $where");
}

# "kind:shard:epoch" of the entry at position $p of $shard's WAL.
sub wal_entry_owner
{
	my ($shard, $p) = @_;
	my $m = $store->wal_entry("shared/shards/$shard/wal", $p);
	return defined $m ? "$m->{kind}:$m->{shard}:$m->{epoch}" : undef;
}

# ---------------------------------------------------------------------------
# A writes 50 rows (a1..a50, v = 1..50) in 5 transactions; B writes 30 rows
# (b1..b30, v = 1001..1030) in 3 transactions.
for my $x (0 .. 4)
{
	my ($lo, $hi) = ($x * 10 + 1, $x * 10 + 10);
	$A->safe_psql('postgres',
		"INSERT INTO t SELECT 'a' || i, i, 'A', '{}' FROM generate_series($lo, $hi) i");
}
for my $x (0 .. 2)
{
	my ($lo, $hi) = ($x * 10 + 1, $x * 10 + 10);
	$B->safe_psql('postgres',
		"INSERT INTO t SELECT 'b' || i, 1000 + i, 'B', '{}' FROM generate_series($lo, $hi) i");
}
my $sum_a = 50 * 51 / 2;               # 1275
my $sum_b = 30 * 1000 + 30 * 31 / 2;   # 30465

# plain: A 1..5, B 1..3.  preload: each claim's fence at 1, then A 2..6, B 2..4.
is_deeply([ $store->wal_positions("shared/shards/$shard_a/wal") ], [ 1 .. 5 + $off ],
	'A wrote positions ' . (1 + $off) . '..' . (5 + $off) . " of its own shard $shard_a");
is_deeply([ $store->wal_positions("shared/shards/$shard_b/wal") ], [ 1 .. 3 + $off ],
	'B wrote positions ' . (1 + $off) . '..' . (3 + $off) . " of its own shard $shard_b");
is(wal_entry_owner($shard_a, 1 + $off), "wal:$shard_a:$epoch", "A's entries are stamped with A's shard");
is(wal_entry_owner($shard_b, 1 + $off), "wal:$shard_b:$epoch", "B's entries are stamped with B's shard");
if ($pre)
{
	is(wal_entry_owner($shard_a, 1), "fence:$shard_a:1", "A's claim fenced position 1 of A's shard, epoch 1");
	is(wal_entry_owner($shard_b, 1), "fence:$shard_b:1", "B's claim fenced position 1 of B's shard, epoch 1");
}
ok($store->exists("shared/_shards/$shard_a") && $store->exists("shared/_shards/$shard_b"),
	'both shards are registered in the store');

is(state_of($A, 't'), "50|50|$sum_a", 'A sees its own 50 unflushed rows at once (and only those)');
is(state_of($B, 't'), "30|30|$sum_b", 'B sees its own 30 unflushed rows at once (and only those)');
is(state_of($B, 't_tail'), '80|80|' . ($sum_a + $sum_b), "with read_wal_tail, B also sees A's unflushed rows");
is(state_of($A, 't_tail'), '80|80|' . ($sum_a + $sum_b), "with read_wal_tail, A also sees B's unflushed rows");

# A flushes: B now sees A's rows through A's generation.
is($A->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t')}),
	'50|1', 'A flushes its 50 rows into generation 1 of its shard');
my @a_gen = $store->listed_generations('shared', $shard_a);
ok(@a_gen == 1 && $a_gen[0] =~ m{^shared/shards/\Q$shard_a\E/gen/00000000000000000001-[0-9a-f-]{36}\.seg$}
	  && $store->exists($a_gen[0]), "the generation is in A's shard");
my @b_gen = $store->list("shared/shards/$shard_b/gen/");
is_deeply(\@b_gen, [], 'B\'s shard has no generation');
is(state_of($B, 't'), '80|80|' . ($sum_a + $sum_b), "after A's flush, B sees A's 50 rows and its own 30");
is(state_of($B, 't', q{origin = 'A'}), "50|50|$sum_a", "... exactly A's rows");
is(state_of($A, 't'), "50|50|$sum_a", "A still does not see B's unflushed rows");

# A writes 10 more rows, unflushed: only read_wal_tail sees them on B.
$A->safe_psql('postgres',
	"INSERT INTO t SELECT 'a' || i, i, 'A', '{}' FROM generate_series(51, 60) i");
my $sum_a2 = $sum_a + (51 + 60) * 10 / 2;    # + 555
is(state_of($B, 't'), '80|80|' . ($sum_a + $sum_b), "B's plain table does not see A's new WAL tail");
is(state_of($B, 't_tail'), '90|90|' . ($sum_a2 + $sum_b),
	"B's read_wal_tail table sees A's generation and A's new WAL tail");
is(state_of($A, 't'), "60|60|$sum_a2", 'A sees all of its 60 rows');

# B flushes: A sees B's rows.
is($B->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t')}),
	'30|1', 'B flushes its 30 rows into generation 1 of its shard');
is(state_of($A, 't'), '90|90|' . ($sum_a2 + $sum_b), "after B's flush, A sees B's rows too");
is(state_of($B, 't'), '80|80|' . ($sum_a + $sum_b), "B still misses A's unflushed tail in the plain table");

# ---------------------------------------------------------------------------
# Newest version across shards: the key 'shared-1' is written alternately,
# a few milliseconds apart, and the version written last must win on both
# clusters, whether it lives in a generation or a WAL tail.
sub version_seen
{
	my ($node, $table) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) || ':' || string_agg(origin || v, ',') FROM $table WHERE id = 'shared-1'");
}

$A->safe_psql('postgres', q{INSERT INTO t VALUES ('shared-1', 1, 'A', '{"version": 1}')});
$A->safe_psql('postgres', q{SELECT rollout_flush('t')});
usleep(20_000);
$B->safe_psql('postgres', q{INSERT INTO t VALUES ('shared-1', 2, 'B', '{"version": 2}')});
is(version_seen($B, 't'), '1:B2', "B: its own later WAL-tail version beats A's older generation");
is(version_seen($A, 't'), '1:A1', 'A: sees only its own version while B has not flushed');
is(version_seen($A, 't_tail'), '1:B2', "A with read_wal_tail: B's later version wins");

$B->safe_psql('postgres', q{SELECT rollout_flush('t')});
is(version_seen($A, 't'), '1:B2', "A: B's later version (B's generation) beats A's older one (A's generation)");

usleep(20_000);
$A->safe_psql('postgres', q{INSERT INTO t VALUES ('shared-1', 3, 'A', '{"version": 3}')});
is(version_seen($A, 't'), '1:A3', "A: its own later WAL-tail version beats B's generation");
is(version_seen($B, 't'), '1:B2', "B: A's version 3 is not visible before A flushes");
is(version_seen($B, 't_tail'), '1:A3', "B with read_wal_tail: A's later version wins");
$A->safe_psql('postgres', q{SELECT rollout_flush('t')});
is(version_seen($B, 't'), '1:A3', "B: after A's flush, A's later version wins");

usleep(20_000);
$B->safe_psql('postgres', q{INSERT INTO t VALUES ('shared-1', 4, 'B', '{"version": 4}')});
$B->safe_psql('postgres', q{SELECT rollout_flush('t')});
is(version_seen($A, 't'), '1:B4', 'A: B\'s version 4, flushed last, wins');
is(version_seen($B, 't'), '1:B4', 'B: its version 4 wins');

# An older version in A's own WAL tail loses to a newer one in B's generation.
$A->safe_psql('postgres', q{INSERT INTO t VALUES ('shared-2', 1, 'A', '{"version": 1}')});
usleep(20_000);
$B->safe_psql('postgres', q{INSERT INTO t VALUES ('shared-2', 2, 'B', '{"version": 2}')});
$B->safe_psql('postgres', q{SELECT rollout_flush('t')});
is($A->safe_psql('postgres', q{SELECT origin || v FROM t WHERE id = 'shared-2'}), 'B2',
	"A: B's newer flushed version beats A's own older unflushed one");
is($B->safe_psql('postgres', q{SELECT origin || v FROM t_tail WHERE id = 'shared-2'}), 'B2',
	"B with read_wal_tail: its own newer version beats A's older WAL-tail one");

# Several keys at once, alternating owners: key k<i> last written by A when i
# is even, by B when i is odd.
$A->safe_psql('postgres', q{INSERT INTO t SELECT 'multi-' || i, i, 'A', '{}' FROM generate_series(1, 20) i});
$A->safe_psql('postgres', q{SELECT rollout_flush('t')});
usleep(20_000);
$B->safe_psql('postgres', q{INSERT INTO t SELECT 'multi-' || i, 100 + i, 'B', '{}' FROM generate_series(1, 20) i WHERE i % 2 = 1});
$B->safe_psql('postgres', q{SELECT rollout_flush('t')});
usleep(20_000);
$A->safe_psql('postgres', q{INSERT INTO t SELECT 'multi-' || i, 200 + i, 'A', '{}' FROM generate_series(1, 20) i WHERE i % 4 = 0});
# multi-i: i%4=0 -> A 200+i (A's WAL tail), odd -> B 100+i, i%4=2 -> A i (A's generation)
my $expect_multi = 0;
for my $i (1 .. 20)
{
	$expect_multi += $i % 4 == 0 ? 200 + $i : $i % 2 ? 100 + $i : $i;
}
is(state_of($A, 't', q{id LIKE 'multi-%'}), "20|20|$expect_multi",
	'A: each of 20 keys written on both clusters appears once, in its newest version');
is(state_of($B, 't_tail', q{id LIKE 'multi-%'}), "20|20|$expect_multi",
	'B with read_wal_tail: the same 20 newest versions');
$A->safe_psql('postgres', q{SELECT rollout_flush('t')});
is(state_of($B, 't', q{id LIKE 'multi-%'}), "20|20|$expect_multi",
	'B after A flushes: the same 20 newest versions');

# Totals: a1..a60, b1..b30, shared-1 (v 4), shared-2 (v 2), multi-1..20
my $total_sum = $sum_a2 + $sum_b + 4 + 2 + $expect_multi;
is(state_of($A, 't'), "112|112|$total_sum", 'A: 112 keys in total, none twice');
is(state_of($B, 't'), "112|112|$total_sum", 'B: the same 112 keys and sum');
is($B->safe_psql('postgres', q{SELECT origin || v FROM t WHERE id = 'shared-2'}), 'B2',
	"B after A flushed its older shared-2: B's newer version still wins");

# Each cluster wrote only its own shard: every WAL entry names its shard and
# the shard's one epoch (preload: 1, the single claim of each cluster; the
# other cluster's claim did not bump it), and the only fence marker is the
# claim's at position 1 (preload) or there is none (plain).
my @bad;
for my $s ($shard_a, $shard_b)
{
	for my $p ($store->wal_positions("shared/shards/$s/wal"))
	{
		my $owner = wal_entry_owner($s, $p) // 'unreadable';
		my $kind = ($pre && $p == 1) ? 'fence' : 'wal';
		push @bad, "$s/$p: $owner" if $owner ne "$kind:$s:$epoch";
	}
}
is_deeply(\@bad, [], 'every WAL entry lies in the shard that wrote it, under its one epoch');
is( $A->safe_psql('postgres', q{SELECT writer_epoch FROM rollout_observe('t')}) . ','
	  . $B->safe_psql('postgres', q{SELECT writer_epoch FROM rollout_observe('t')}),
	"$epoch,$epoch", "each cluster's shard manifest says writer_epoch $epoch");

# Both survive restarts (the store is the only state).
$_->stop for $A, $B;
$_->start for $A, $B;
is(state_of($A, 't'), "112|112|$total_sum", 'A after restart: same result');
is(state_of($B, 't'), "112|112|$total_sum", 'B after restart: same result');

for my $n ($A, $B)
{
	unlike(slurp_file($n->logfile), qr/terminated by signal|PANIC/, $n->name . ': no backend crashed');
	$n->stop;
}
done_testing();
