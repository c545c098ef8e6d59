
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 018_fencing.pl — two clusters misconfigured with the same shard id on one
# store: epochs, fence markers, reopen-once (DESIGN.md §8; issue 4).
#
# Both clusters are preloaded and set rollout_fdw.shard_id = 'twin'.
#   A commits      -> claims epoch 1 (fence at position 1)
#   B commits      -> claims epoch 2, fencing A
#   A commits      -> fails: the shard was taken over (nothing written)
#   A commits      -> A reopens once: claims epoch 3, fencing B; succeeds
#   B commits      -> fails: taken over
#   B commits      -> B reopens once: epoch 4, fencing A; succeeds
#   A commits      -> fails: taken over (A's second fence)
#   A commits      -> refused: fenced twice, A does not claim again
#   B commits      -> succeeds (B was fenced once only)
# Every commit that returned success is readable on both clusters after a
# flush; no row of a failed commit is anywhere; the WAL holds four fence
# markers with epochs 1..4 and no hole.  Then, on a second store, a reader
# that knew its shard's WAL tail empty (manifest_view.c) does not trust that
# once its own writer committed and was fenced.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node);
use Test::More;

my $store = RolloutStore->for_test('018_fencing', backend => 'file');
my $SHARD = 'twin';

my %node;
for my $name ('a', 'b')
{
	my $n = writer_node("fence_$name", 'rollout_fdw.shard_id' => $SHARD);
	$store->create_extension_and_server($n);
	$n->safe_psql('postgres',
		q{CREATE FOREIGN TABLE t (id text, v int, origin text) SERVER s OPTIONS (store 'fenced', key 'id');});
	$node{$name} = $n;
}
my ($A, $B) = ($node{a}, $node{b});
my $wal = "fenced/shards/$SHARD/wal";

my (%committed, %failed);    # id prefix => rows

# Commit 10 rows "<label>-1..10" (v = 1..10) on $n; returns (ret, stderr).
sub commit_batch
{
	my ($n, $label) = @_;
	my ($ret, $out, $err) = $n->psql('postgres',
		"INSERT INTO t SELECT '$label-' || i, i, '$label' FROM generate_series(1, 10) i");
	if ($ret == 0) { $committed{$label} = 1; }
	else { $failed{$label} = 1; }
	return ($ret, $err);
}

# The footer metadata of the WAL entry at position $p.
sub wal_metadata
{
	my ($p) = @_;
	return $store->wal_entry($wal, $p) // die "no metadata in WAL position $p";
}

sub epoch_of
{
	my ($n) = @_;
	return $n->safe_psql('postgres', q{SELECT writer_epoch FROM rollout_stat_stores WHERE store = 'fenced'});
}

my $taken_over = qr/shard "\Q$SHARD\E" of store "fenced" was taken over by another writer/;

# ---------------------------------------------------------------------------
my ($ret, $err) = commit_batch($A, 'a1');
is($ret, 0, 'A commits first (claims epoch 1)') or diag($err);
is(epoch_of($A), 1, 'A writes with epoch 1');

($ret, $err) = commit_batch($B, 'b1');
is($ret, 0, 'B commits (claims epoch 2, fencing A)') or diag($err);
is(epoch_of($B), 2, 'B writes with epoch 2');

($ret, $err) = commit_batch($A, 'a2');
isnt($ret, 0, "A's next commit fails");
like($err, $taken_over, '... with a clear error naming the shard: taken over');
like($err, qr/Nothing was written/, '... saying nothing was written');

($ret, $err) = commit_batch($A, 'a3');
is($ret, 0, 'A reopens once: its next commit claims again and succeeds') or diag($err);
is(epoch_of($A), 3, 'A now writes with epoch 3');

($ret, $err) = commit_batch($B, 'b2');
isnt($ret, 0, "B's next commit fails");
like($err, $taken_over, '... taken over');

($ret, $err) = commit_batch($B, 'b3');
is($ret, 0, 'B reopens once and succeeds') or diag($err);
is(epoch_of($B), 4, 'B now writes with epoch 4');

($ret, $err) = commit_batch($A, 'a4');
isnt($ret, 0, "A's next commit fails (fenced a second time)");
like($err, $taken_over, '... taken over');

($ret, $err) = commit_batch($A, 'a5');
isnt($ret, 0, 'A, fenced twice, refuses the next commit');
like($err, qr/shard "\Q$SHARD\E" of store "fenced" is owned by another writer/, '... with a clear error');
like($err, qr/fenced twice/, '... saying it was fenced twice');
my $fence_count = grep { wal_metadata($_)->{kind} eq 'fence' } $store->wal_positions($wal);
is($fence_count, 4, 'the refusal claimed nothing (still 4 fences)');

($ret, $err) = commit_batch($B, 'b4');
is($ret, 0, 'B, fenced only once, keeps committing') or diag($err);

is_deeply([ sort keys %committed ], [qw(a1 a3 b1 b3 b4)], 'committed: a1 a3 b1 b3 b4');
is_deeply([ sort keys %failed ], [qw(a2 a4 a5 b2)], 'failed: a2 a4 a5 b2');

# ---------------------------------------------------------------------------
# The WAL: no hole, four fences with epochs 1..4, each commit once.
my @pos = $store->wal_positions($wal);
is_deeply(\@pos, [ 1 .. scalar(@pos) ], 'the WAL has no hole');
my @kinds = map { my $m = wal_metadata($_); "$m->{kind}:$m->{epoch}" } @pos;
is(join(' ', @kinds), 'fence:1 wal:1 fence:2 wal:2 fence:3 wal:3 fence:4 wal:4 wal:4',
	'WAL: fence 1, a1, fence 2, b1, fence 3, a3, fence 4, b3, b4');

# Flush on the live writer (B), then read on both clusters.
$B->safe_psql('postgres', q{SELECT rollout_flush('t')});
my $n_ok = 10 * scalar(keys %committed);
my $sum_ok = 55 * scalar(keys %committed);
for my $pair ([ 'B', $B ], [ 'A', $A ])
{
	my ($name, $n) = @$pair;
	is($n->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id), sum(v) FROM t}),
		"$n_ok|$n_ok|$sum_ok", "$name reads every committed row exactly once ($n_ok rows)");
	is($n->safe_psql('postgres', q{SELECT string_agg(DISTINCT origin, ',' ORDER BY origin) FROM t}),
		'a1,a3,b1,b3,b4', "$name: the rows of exactly the successful commits");
}

# A fenced cluster may still flush what the WAL holds (nothing here) and read.
my $m = $store->newest_manifest("fenced/shards/$SHARD/_manifest");
is($m->{writer_epoch}, 4, 'the shard manifest says epoch 4');
is($m->{replay_after}, $pos[-1], 'and is flushed to the last position');

# A restart of A lets it claim again (the hint says so); B is then fenced.
$A->stop;
$A->start;
($ret, $err) = commit_batch($A, 'a6');
is($ret, 0, 'after a restart A claims the shard again') or diag($err);
is(epoch_of($A), 5, '... with epoch 5');
($ret, $err) = commit_batch($B, 'b5');
isnt($ret, 0, 'B is fenced by it');
like($err, $taken_over, '... taken over');
$A->safe_psql('postgres', q{SELECT rollout_flush('t')});
$n_ok += 10;
$sum_ok += 55;
is($A->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id), sum(v) FROM t}),
	"$n_ok|$n_ok|$sum_ok", "in the end every committed row is there ($n_ok), none of a failed commit");
is($A->safe_psql('postgres', q{SELECT count(*) FROM t WHERE origin IN ('a2', 'a4', 'a5', 'b2', 'b5')}),
	'0', 'no row of a failed commit is visible');

# ---------------------------------------------------------------------------
# This shard's WAL tail known empty from A's shared view (manifest_view.c):
# while A's writer of a store holds no memtable of it, A's reads list the
# shard's WAL once and then know the tail is empty, until A's writer or
# anybody A's slot hears of adds an entry.  On another store, so that both
# writers start afresh: B writes and flushes, A only reads; A then commits
# (claim: the memtable), B takes the shard back, A's next commit is refused
# and A's writer holds no memtable again.  A's reads must then list the
# tail and find A's acknowledged row there, not trust what they knew before
# A's commit.
$_->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t2 (id text, v int, origin text) SERVER s OPTIONS (store 'tailed', key 'id');})
  for ($A, $B);
my $slow_view = q{SET rollout_fdw.manifest_refresh_interval = '60s';};

# (rows of t2, where the own WAL tail came from) as a reader on $n sees them
sub tail_read
{
	my ($n) = @_;
	my $out = $n->safe_psql('postgres', qq{$slow_view
SELECT string_agg(DISTINCT origin, ',' ORDER BY origin) || '|' || count(*) FROM t2;
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM t2;});
	my ($rows) = split /\n/, $out;
	my ($tail) = $out =~ /Own WAL Tail: (.*)$/m;
	return ($rows, $tail // 'none');
}

$B->safe_psql('postgres', q{INSERT INTO t2 SELECT 'b0-' || i, i, 'b0' FROM generate_series(1, 10) i});
$B->safe_psql('postgres', q{SELECT rollout_flush('t2')});
# merged, so that every later shard manifest says which base holds what it
# dropped, and A's view keeps trusting itself across the claims below
$B->safe_psql('postgres', q{SELECT rollout_merge('t2')});
my ($rows, $tail) = tail_read($A);
is($rows, 'b0|10', 'A, which never wrote t2, reads what B flushed');
($rows, $tail) = tail_read($A);
is($tail, 'shared view', '... and then knows its shard\'s WAL tail is empty without listing it');
is($rows, 'b0|10', '... with the same rows');

($ret, $err) = $A->psql('postgres', q{INSERT INTO t2 SELECT 'a1-' || i, i, 'a1' FROM generate_series(1, 10) i});
is($ret, 0, 'A commits to t2 (claiming the shard for it)') or diag($err);
($rows, $tail) = tail_read($A);
is_deeply([ $rows, $tail ], [ 'a1,b0|20', 'memtable' ], 'A reads its commit from its memtable');
($ret) = $B->psql('postgres', q{INSERT INTO t2 VALUES ('b1', 1, 'b1')});
isnt($ret, 0, "B's next commit is refused (taken over)");
($ret, $err) = $B->psql('postgres', q{INSERT INTO t2 SELECT 'b2-' || i, i, 'b2' FROM generate_series(1, 10) i});
is($ret, 0, 'B claims the shard back and commits') or diag($err);
($ret) = $A->psql('postgres', q{INSERT INTO t2 VALUES ('a2', 1, 'a2')});
isnt($ret, 0, "A's next commit is refused: A's writer holds no memtable any more");
($rows, $tail) = tail_read($A);
is($rows, 'a1,b0,b2|30', 'A reads its acknowledged commit from the WAL, and B\'s')
  or diag("the tail came from: $tail");
is($tail, 'listed', '... listing the tail it knew empty before its commit');
($rows, $tail) = tail_read($B);
is($rows, 'a1,b0,b2|30', 'B reads the same rows');
is($tail, 'memtable', "... B's own from its memtable, A's from the WAL");

for my $n ($A, $B)
{
	my $log = slurp_file($n->logfile);
	unlike($log, qr/terminated by signal|PANIC/, $n->name . ': no backend crashed');
	$n->stop;
}
done_testing();
