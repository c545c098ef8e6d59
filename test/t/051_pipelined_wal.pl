
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 051_pipelined_wal.pl — the windows pipelined WAL writes open
# (docs/WRITER.md, "Pipelined WAL writes"): with rollout_fdw.wal_pipeline_depth
# > 1 a group-commit leader writes position p+1 while p is still being
# written, and a commit is acknowledged only once every position up to its
# own is settled.  Fault points stop the leader of p between taking its
# group and its PUT (group_commit.before_put, instead_of_put) while a second
# session's entry lands at p+1:
#
#   1. p fails while p+1 lands: the leader fills p with an empty entry of its
#      epoch, p's transaction fails, p+1's is acknowledged, and no reader
#      ever sees p's rows;
#   2. a crash with p+1 durable and p not: p+1 was never acknowledged; until
#      the next claim no reader sees it (readers stop at the hole), and the
#      claim's fence at p makes it dead for good (an older epoch after a
#      newer one).  A dead entry landing later, right after a flushed fence
#      (sealed_epoch), is skipped too, and the commit that meets it at its
#      position fails with a retryable error instead of overwriting it;
#   3. fencing in the middle of a pipeline: another cluster claims the shard
#      (same shard id) while p is being written and p+1 has landed; both of
#      this cluster's transactions fail as taken over, and p+1's rows are
#      visible nowhere, also after flushes and a restart;
#   4. a filler that ends a flushed range (p filled while p+1 was in
#      flight, then a crash, then the claim's flush): a change feed poll that
#      max_rows cuts there moves to the filler's position and hands out a
#      position the next poll accepts;
#   5. a crash with p+1 durable and p not, and the cluster started again
#      without the shared writer (rollout_fdw not preloaded, or no slot
#      free): a direct commit must not take the hole under the old epoch,
#      which would bring p+1 back to life, ranked after it; it claims the
#      shard, the claim's fence takes p, and p+1 stays dead.
# A third cluster reads the shard's WAL tail from the store (read_wal_tail)
# throughout: every acknowledged row exactly once, no row of a failed or
# unacknowledged commit.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(writer_node still_running wait_for_fault release_faults
  hold_faults restart_after_crash count_in_log);
use Time::HiRes ();
use Test::More;

my $SHARD = 'twin';
my $store = RolloutStore->for_test('051_pipelined_wal');
my $wal = "piped/shards/$SHARD/wal";

my $A = writer_node('pipe_a', 'rollout_fdw.shard_id' => $SHARD,
	'rollout_fdw.wal_pipeline_depth' => 4);
my $B = writer_node('pipe_b', 'rollout_fdw.shard_id' => $SHARD,
	'rollout_fdw.wal_pipeline_depth' => 4);
my $C = PostgreSQL::Test::Cluster->new('pipe_reader');
$C->init;
$C->start;
for my $n ($A, $B, $C)
{
	$store->create_extension_and_server($n);
	my $tail = $n == $C ? ", read_wal_tail 'true'" : '';
	$n->safe_psql('postgres',
		"CREATE FOREIGN TABLE t (id text, v int) SERVER s OPTIONS (store 'piped', key 'id'$tail)");
}

my %acknowledged;    # id => 1

# Commit row $id on $n; remembers it when the commit returned success.
sub commit_row
{
	my ($n, $id) = @_;
	my ($ret, $out, $err) = $n->psql('postgres', "INSERT INTO t VALUES ('$id', 1)");
	$acknowledged{$id} = 1 if $ret == 0;
	return ($ret, $err);
}

sub ids_on
{
	my ($n) = @_;
	return $n->safe_psql('postgres', 'SELECT string_agg(id, \',\' ORDER BY id) FROM t');
}

sub expected_ids { return join(',', sort keys %acknowledged); }

# Whether object $key appears within 30 s.
sub wait_for_object
{
	my ($key) = @_;
	for (1 .. 300)
	{
		return 1 if $store->exists($key);
		Time::HiRes::usleep(100_000);
	}
	return 0;
}

sub last_position { my @p = $store->wal_positions($wal); return $p[-1] // 0; }

# Start a session on $n whose commit of $id leads its own group and stops at
# the fault points of @faults; returns the session once it waits there.
sub start_stopped_leader
{
	my ($n, $id, @faults) = @_;
	my $offset = -s $n->logfile;
	my $s = PsqlScript->start($n,
		sql => "SET rollout_fdw.fail_at = '" . join(', ', @faults) . "';\nINSERT INTO t VALUES ('$id', 1);\n");
	wait_for_fault($n, 'group_commit.before_put', $offset);
	return $s;
}

# A session on $n committing $id while the leader of position $p is held:
# waits until its entry landed at $p + 1.
sub start_follower
{
	my ($n, $id, $p) = @_;
	my $s = PsqlScript->start($n, sql => "INSERT INTO t VALUES ('$id', 1);\n");
	ok(wait_for_object($store->wal_key($wal, $p + 1)),
		"$id: its entry landed at " . ($p + 1) . " while $p is still being written");
	return $s;
}

# The leader of the next position p ($leader) crashes before its PUT while
# $follower's entry lands at p+1; A starts again.  Returns p and the epoch
# the entries were written under.
sub crash_with_hole
{
	my ($leader, $follower) = @_;
	my $epoch = $store->wal_entry($wal, last_position())->{epoch};
	my $hole = last_position() + 1;
	my $s1 = start_stopped_leader($A, $leader, 'group_commit.before_put:hold',
		'group_commit.instead_of_put:crash');
	my $s2 = start_follower($A, $follower, $hole);
	release_faults($A);
	my ($exit) = $s1->finish;
	hold_faults($A);
	isnt($exit, 0, "$leader: the leader of p crashed");
	($exit) = $s2->finish;
	isnt($exit, 0, "$follower: its committer lost its connection unacknowledged");
	ok(restart_after_crash($A), 'the postmaster stopped after the crash and started again');
	return ($hole, $epoch);
}

# A few commits first: the leaders' spacing is a share of the mean PUT time.
for my $i (1 .. 5)
{
	my ($ret, $err) = commit_row($A, "a$i");
	is($ret, 0, "a$i commits") or diag($err);
}
is(ids_on($C), expected_ids(), 'the reading cluster sees the first commits');

# ---------------------------------------------------------------------------
# 1. p fails while p+1 lands
# ---------------------------------------------------------------------------
my $p = last_position() + 1;
my $s1 = start_stopped_leader($A, 'f1', 'group_commit.before_put:hold',
	'group_commit.instead_of_put:error');
my $s2 = start_follower($A, 'f2', $p);
is(still_running($A, q{INSERT INTO t VALUES (''f2''%}), 1,
	'f2 is not acknowledged while the position before it is open');
release_faults($A);
my ($exit, $out, $err) = $s1->finish;
hold_faults($A);
isnt($exit, 0, 'f1 fails');
like($err, qr/fault point "group_commit.instead_of_put" reached/, '... with its write error');
($exit, $out, $err) = $s2->finish;
is($exit, 0, 'f2 is acknowledged once p is settled') or diag($err);
$acknowledged{f2} = 1;
my $filler = $store->wal_entry($wal, $p);
is($filler->{transactions}, 0, "position $p holds an empty entry");
is($filler->{epoch}, $store->wal_entry($wal, $p + 1)->{epoch}, '... of the writer\'s epoch');
is(count_in_log($A, qr/WAL position $p of shard "$SHARD" in store "piped" was filled with an empty entry/, 0),
	1, 'the filler is logged');
is($A->safe_psql('postgres', q{SELECT wal_fillers || ',' || (wal_puts_pipelined > 0) FROM rollout_stat_stores WHERE store = 'piped'}),
	'1,true', 'rollout_stat_stores counts the filler and the pipelined PUT');
is(ids_on($A), expected_ids(), 'the writer sees f2, not f1');
is(ids_on($C), expected_ids(), 'so does the cluster reading the WAL tail');

# ---------------------------------------------------------------------------
# 2. a crash with p+1 durable and p not
# ---------------------------------------------------------------------------
my $epoch_before;
($p, $epoch_before) = crash_with_hole('c1', 'c2');
ok(!$store->exists($store->wal_key($wal, $p)), "position $p is a hole");
is($store->wal_entry($wal, $p + 1)->{epoch}, $epoch_before, 'position ' . ($p + 1) . ' holds c2\'s entry');
is(ids_on($A), expected_ids(), 'before the next claim, readers stop at the hole: no c1, no c2');
is(ids_on($C), expected_ids(), '... on the reading cluster too');

my ($ret);
($ret, $err) = commit_row($A, 'c3');
is($ret, 0, 'the next commit claims the shard and commits') or diag($err);
my $fence = $store->wal_entry($wal, $p);
is($fence->{kind}, 'fence', "the claim's fence took the hole at $p");
is($fence->{epoch}, $epoch_before + 1, '... under the next epoch');
ok($store->exists($store->wal_key($wal, $p + 2)), 'c3 landed after the dead entry, at ' . ($p + 2));
is(ids_on($A), expected_ids(), 'c2 is dead: visible nowhere');
is(ids_on($C), expected_ids(), '... not on the reading cluster either');

is($A->safe_psql('postgres', q{SELECT count(*) FROM rollout_flush('t')}), '1', 'a flush seals the fence and c3');
my $manifest = $store->newest_manifest("piped/shards/$SHARD/_manifest");
is($manifest->{sealed_epoch}, $epoch_before + 1, 'the shard manifest records the epoch of what it sealed');

# A dead entry landing late, right after the flushed fence: the old
# writer's PUT of c2, as if it had been slow.
my $late = last_position() + 1;
$store->put($store->wal_key($wal, $late), $store->get($store->wal_key($wal, $p + 1)));
is(ids_on($C), expected_ids(), 'a dead entry right after replay_after is skipped (sealed_epoch)');
($ret, $err) = commit_row($A, 'c4');
isnt($ret, 0, 'the commit whose position holds the dead entry fails');
like($err, qr/holds an entry a previous writer left behind; retry the transaction/, '... asking for a retry');
is($store->wal_entry($wal, $late)->{epoch}, $epoch_before, '... and leaves the entry there as it was');
($ret, $err) = commit_row($A, 'c4');
is($ret, 0, 'the retry commits') or diag($err);
is(ids_on($A), expected_ids(), 'the writer sees c4, not c2');
is(ids_on($C), expected_ids(), '... and so does the reading cluster');

# ---------------------------------------------------------------------------
# 3. fencing in the middle of a pipeline
# ---------------------------------------------------------------------------
$p = last_position() + 1;
$s1 = start_stopped_leader($A, 'm1', 'group_commit.before_put:hold');
$s2 = start_follower($A, 'm2', $p);
($ret, $err) = commit_row($B, 'b1');
is($ret, 0, 'another cluster with the same shard id claims the shard and commits') or diag($err);
is($store->wal_entry($wal, $p)->{kind}, 'fence', "its fence took position $p, which A was still writing");
my $taken = qr/shard "\Q$SHARD\E" of store "piped" was taken over by another writer/;
release_faults($A);
($exit, $out, $err) = $s1->finish;
hold_faults($A);
isnt($exit, 0, 'm1 fails');
like($err, $taken, '... taken over');
($exit, $out, $err) = $s2->finish;
isnt($exit, 0, 'm2, whose entry landed after the position the fence took, fails');
like($err, $taken, '... taken over too');
is(ids_on($B), expected_ids(), 'the new owner sees every acknowledged row, and no m1 or m2');
is(ids_on($C), expected_ids(), '... and so does the reading cluster');

($ret, $err) = commit_row($A, 'a6');
is($ret, 0, 'A claims the shard back (fenced once) and commits') or diag($err);
is($A->safe_psql('postgres', q{SELECT count(*) FROM rollout_flush('t')}), '1', 'A flushes');
is(ids_on($C), expected_ids(), 'after the flushes, exactly the acknowledged rows');
$A->restart;
$B->restart;
is(ids_on($A), expected_ids(), 'after a restart: the same on A');
is(ids_on($C), expected_ids(), '... and on the reading cluster');
is($C->safe_psql('postgres', q{SELECT count(*) FROM t}), scalar(keys %acknowledged),
	'each acknowledged row once');

# ---------------------------------------------------------------------------
# 4. a change feed cut by max_rows just before a filler that ends a flush
# ---------------------------------------------------------------------------
# x1 fails at p while x2 leads p+1, so p gets a filler; x2's backend then
# crashes, and the next claim flushes the WAL tail: the rows, then the
# filler, stamped after them.  A poll cut at the last row moves its position
# to the filler's (the manifest's replay_after and last_stamp), and the
# position it hands out must still be one the next poll accepts.
my $fwal = "piped_feed/shards/$SHARD/wal";
$A->safe_psql('postgres',
	"CREATE FOREIGN TABLE ff (id text, v int) SERVER s OPTIONS (store 'piped_feed', key 'id')");
$A->safe_psql('postgres', "INSERT INTO ff VALUES ('w$_', 1)") for 1 .. 3;
my $since = $A->safe_psql('postgres', q{SELECT rollout_snapshot('ff')});
$A->safe_psql('postgres', "INSERT INTO ff VALUES ('r$_', 1)") for 1 .. 2;
my @fpositions = $store->wal_positions($fwal);
$p = $fpositions[-1] + 1;
my $offset = -s $A->logfile;
$s1 = PsqlScript->start($A,
	sql => "SET rollout_fdw.fail_at = 'group_commit.before_put:hold=x1, group_commit.instead_of_put:error';\n"
	  . "INSERT INTO ff VALUES ('x1', 1);\n");
wait_for_fault($A, 'group_commit.before_put', $offset);
$offset = -s $A->logfile;
$s2 = PsqlScript->start($A,
	sql => "SET rollout_fdw.fail_at = 'group_commit.before_put:hold=x2, group_commit.instead_of_put:crash';\n"
	  . "INSERT INTO ff VALUES ('x2', 1);\n");
wait_for_fault($A, 'group_commit.before_put', $offset);
release_faults($A, 'x1');
($exit) = $s1->finish;
isnt($exit, 0, 'x1, the leader of p, fails while x2 leads p+1');
release_faults($A, 'x2');
($exit) = $s2->finish;
isnt($exit, 0, 'x2\'s backend crashes before its PUT');
hold_faults($A, $_) for qw(x1 x2);
ok(restart_after_crash($A), 'the postmaster stopped after the crash and started again');
is($store->wal_entry($fwal, $p)->{transactions}, 0, "position $p holds a filler");
ok(!$store->exists($store->wal_key($fwal, $p + 1)), 'and nothing follows it');
$A->safe_psql('postgres', "INSERT INTO ff VALUES ('n$_', 1)") for 1 .. 2;
is($store->wal_entry($fwal, $p + 1)->{kind}, 'fence',
	'the next commit claimed the shard (its flush sealed the filler), fencing at p+1');
my $first = $A->safe_psql('postgres',
	qq{SELECT string_agg(key, ' ' ORDER BY stamp, key) || '|' || max(next_since) FROM rollout_changes('ff', '$since', 2)});
my ($got, $next) = split /\|/, $first;
is($got, 'r1 r2', 'a poll of at most 2 rows brings the flushed rows');
like($next, qr/=\Q$p\E\//, '... and moves its position to the filler that ended the flush');
my ($rc, $second, $feed_err) = $A->psql('postgres',
	qq{SELECT string_agg(key, ' ' ORDER BY stamp, key) FROM rollout_changes('ff', '$next', 2)});
is($rc, 0, 'the next poll accepts that position') or diag($feed_err);
is($second, 'n1 n2', '... and brings the rows after the filler');

# ---------------------------------------------------------------------------
# 5. a crash leaves a hole, and the next commit takes the direct path
# ---------------------------------------------------------------------------
# (first a commit that claims the shard for the writer restarted in 4)
($ret, $err) = commit_row($A, 'h0');
is($ret, 0, 'h0 commits') or diag($err);
($p, $epoch_before) = crash_with_hole('h1', 'h2');
$A->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$A->restart;
ok(!$store->exists($store->wal_key($wal, $p)), "position $p is a hole");
is($store->wal_entry($wal, $p + 1)->{epoch}, $epoch_before, 'position ' . ($p + 1) . ' holds h2\'s entry');
($ret, $err) = commit_row($A, 'h3');
is($ret, 0, 'a direct commit (rollout_fdw not preloaded) commits') or diag($err);
$fence = $store->wal_entry($wal, $p);
is($fence->{kind}, 'fence', "it claimed the shard first: a fence took the hole at $p");
is($fence->{epoch}, $epoch_before + 1, '... under the next epoch');
is(ids_on($A), expected_ids(), 'h2 stays dead, h3 is there');
is(ids_on($C), expected_ids(), '... on the reading cluster too');
($ret, $err) = commit_row($A, 'h4');
is($ret, 0, 'the next direct commit needs no claim') or diag($err);
is($store->wal_entry($wal, last_position())->{epoch}, $epoch_before + 1, '... and writes under the new epoch');
is($A->safe_psql('postgres', q{SELECT count(*) FROM rollout_flush('t')}), '1', 'a flush seals the WAL tail');
is(ids_on($C), expected_ids(), 'after it, exactly the acknowledged rows');

done_testing();
