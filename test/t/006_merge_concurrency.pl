
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 006_merge_concurrency.pl — merges racing with appends, flushes and other
# merges (DESIGN.md §7.1, §11.2, §11.3).
#
# A merge is held open between its fragment upload and its commits with the
# fault point merge.after_fragment_put:hold (until the test releases it;
# RolloutTest.pm release_faults), and meanwhile:
#  (a) another session commits single-row INSERTs: every one commits, and
#      quickly, while the merge is held (appends never wait for a merge),
#      none is lost, and the merge's own result is exact;
#  (b) another session inserts, upserts and flushes a new generation: the
#      merge's commits keep that generation listed, and the next merge folds
#      it in; with flush_first the flush waits for the merge's flush lock but
#      is kept as well; between the merge's base and shard commits readers
#      skip the merged generations still listed, and a flush in that window
#      is kept by the shard commit;
#  (c) another session merges the same generations: the loser drops its
#      fragment (neither listed nor left in the store), so no row is duplicated
#      physically; with a partial overlap (the other merge takes only the
#      oldest generation) the held merge starts over and folds in the rest.

use strict;
use warnings;

use JSON::PP;
use Time::HiRes qw(time);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use ExpectedRows;
use PsqlScript;
use RolloutStore;
use RolloutTest
  qw(mode_node shard_of observe still_running wait_for_fault release_faults hold_faults count_in_log);
use Test::More;

# preload: rollout_fdw in shared_preload_libraries, its timed sweeper off
my $node = mode_node('merge_concurrency');

# the object store of the backend under test (ROLLOUT_TEST_BACKEND)
my $store = RolloutStore->for_test('006_merge_concurrency');

$store->create_extension_and_server($node);
$node->safe_psql(
	'postgres', qq{
CREATE FOREIGN TABLE ta (id text, v int) SERVER s OPTIONS (store 'merge_a', key 'id');
CREATE FOREIGN TABLE tb (id text, v int) SERVER s OPTIONS (store 'merge_b', key 'id');
CREATE FOREIGN TABLE tb2 (id text, v int) SERVER s OPTIONS (store 'merge_b2', key 'id');
CREATE FOREIGN TABLE tb3 (id text, v int) SERVER s OPTIONS (store 'merge_b3', key 'id');
CREATE FOREIGN TABLE tc (id text, v int) SERVER s OPTIONS (store 'merge_c', key 'id');
});
my $shard = shard_of($node);

# ---------------------------------------------------------------------------
# Helpers.

# The expected content of each table (ExpectedRows): insert_range(table,
# prefix, from, to, offset) inserts keys <prefix><i> with v = i + offset.
my $expected = ExpectedRows->new($node);

sub check_table
{
	my ($table, $label) = @_;
	my $want = $expected->state($table);
	is($expected->table_state($table), $want,
		"$label: count(*) = count(DISTINCT id), sum(v) exact ($want)");
}

sub log_offset { return -s $node->logfile; }

# The newest version of a store's base / shard manifest, decoded.
sub newest_base  { return $store->newest_manifest("$_[0]/base/_manifest"); }
sub newest_shard { return $store->newest_manifest("$_[0]/shards/$shard/_manifest"); }

# The base lists exactly the fragments in the store, each once.
sub check_fragments_on_disk
{
	my ($name, $label) = @_;
	my @listed = $store->listed_fragments($name);
	my %seen;
	my @dups = grep { $seen{$_}++ } @listed;
	is_deeply(\@dups, [], "$label: no fragment is listed twice");
	is_deeply([ $store->objects_in("$name/base/data") ], \@listed,
		"$label: base/data holds exactly the fragments the newest base lists");
}

my $merge_cols = 'generations_merged, rows_merged, fragments_added';

# ---------------------------------------------------------------------------
# (a) Appends keep committing while a merge is held open.
#
# gen 1: a0001..a0200 (v = i); gen 2: a0201..a0400 and a0001..a0050 again
# (v = 10000 + i); gen 3: a0401..a0500; unflushed: a0501..a0550, which the
# merge flushes first as gen 4.  Distinct keys: 550.
$expected->insert_range('ta', 'a', 1, 200);
$node->safe_psql('postgres', q{SELECT rollout_flush('ta')});
$expected->insert_range('ta', 'a', 201, 400);
$expected->insert_range('ta', 'a', 1, 50, 10000);
$node->safe_psql('postgres', q{SELECT rollout_flush('ta')});
$expected->insert_range('ta', 'a', 401, 500);
$node->safe_psql('postgres', q{SELECT rollout_flush('ta')});
$expected->insert_range('ta', 'a', 501, 550);
check_table('ta', '(a) before the merge');

my $off = log_offset();
my $merge_a = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'merge.after_fragment_put:hold';
SELECT $merge_cols, round(extract(epoch FROM clock_timestamp() - statement_timestamp())::numeric, 1)
FROM rollout_merge('ta') m;
});
wait_for_fault($node, 'merge.after_fragment_put', $off);

# 60 single-row transactions from one session, each timed.
my $bg = $node->background_psql('postgres');
my @latency;
my $t_start = time;
for my $i (1 .. 60)
{
	my $t0 = time;
	$bg->query_safe("INSERT INTO ta VALUES ('b" . sprintf('%03d', $i) . "', $i)");
	push @latency, time - $t0;
	$expected->rows('ta')->{ sprintf('b%03d', $i) } = $i;
}
my $inserts_took = time - $t_start;
my ($max_latency) = sort { $b <=> $a } @latency;
note(sprintf('60 INSERTs took %.3f s while the merge was held; max latency %.3f s',
		$inserts_took, $max_latency));

is(still_running($node, q{%rollout_merge(''ta'')%}), '1', '(a) the merge is still running after all 60 INSERTs committed');
cmp_ok($max_latency, '<', 2.0,
	'(a) no INSERT waited for the merge (max latency < 2 s)');
is($node->safe_psql('postgres', q{SELECT count(*) FROM ta WHERE id LIKE 'b%'}),
	'60', '(a) all 60 rows inserted during the merge are visible while it runs');

release_faults($node);
my ($ret, $out, $err) = $merge_a->finish;
hold_faults($node);
is($ret, 0, '(a) the held merge succeeds') or diag($err);
my ($gm, $rm, $fa, $secs) = split /\|/, $out;
is("$gm|$rm|$fa", '4|550|1',
	'(a) the merge folded in 4 generations (3 flushed + its own flush) as 550 distinct rows, 1 fragment');
cmp_ok($secs, '>=', $inserts_took,
	sprintf('(a) the merge (%s s) lasted through all 60 INSERTs (%.1f s)', $secs, $inserts_took));

check_table('ta', '(a) after the merge');
my $o = observe($node, 'ta');
is( "$o->{base_rows}|$o->{fragments}|$o->{generations}|$o->{unflushed_rows}|$o->{exact_row_count}",
	'550|1|0|60|610',
	'(a) observe: 550 base rows in 1 fragment, no generation, the 60 new rows unflushed, 610 in all');

is($node->safe_psql('postgres', "SELECT $merge_cols FROM rollout_merge('ta')"),
	'1|60|1', '(a) the next merge folds in the 60 rows inserted meanwhile');
check_table('ta', '(a) after the second merge');
$o = observe($node, 'ta');
is("$o->{base_rows}|$o->{exact_row_count}|$o->{generations}|$o->{wal_entries}",
	'610|610|0|0', '(a) base_rows = exact_row_count = 610: no row twice, none lost');
check_fragments_on_disk('merge_a', '(a)');
$bg->quit;

# ---------------------------------------------------------------------------
# (b) A generation flushed while a merge is in progress is not dropped.
#
# gen 1: b0001..b0100, gen 2: b0101..b0200.  The merge (flush_first =>
# false) is held; meanwhile b0201..b0240 are inserted, b0001..b0010 upserted
# (v = 50000 + i) and flushed as gen 3.
$expected->insert_range('tb', 'b', 1, 100);
$node->safe_psql('postgres', q{SELECT rollout_flush('tb')});
$expected->insert_range('tb', 'b', 101, 200);
$node->safe_psql('postgres', q{SELECT rollout_flush('tb')});

$off = log_offset();
my $merge_b = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'merge.after_fragment_put:hold';
SELECT $merge_cols FROM rollout_merge('tb', flush_first => false);
});
wait_for_fault($node, 'merge.after_fragment_put', $off);
$expected->insert_range('tb', 'b', 201, 240);
$expected->insert_range('tb', 'b', 1, 10, 50000);
is($node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('tb')}),
	'50|3', '(b) a flush during the merge seals 50 rows as generation 3');
check_table('tb', '(b) during the merge');
is(still_running($node, q{%rollout_merge(''tb''%}), '1', '(b) the merge was still held when the flush committed');

release_faults($node);
($ret, $out, $err) = $merge_b->finish;
hold_faults($node);
is($ret, 0, '(b) the held merge succeeds') or diag($err);
is($out, '2|200|1', '(b) it merged generations 1 and 2 (200 rows) into one fragment');

my $sm = newest_shard('merge_b');
is_deeply([ map { $_->{number} } @{ $sm->{generations} } ], [3],
	'(b) the shard manifest still lists generation 3 (and only it)');
ok($store->exists($sm->{generations}[0]{file}), '(b) generation 3 exists');
$o = observe($node, 'tb');
is( "$o->{base_rows}|$o->{generations}|$o->{generation_rows}|$o->{exact_row_count}",
	'200|1|50|240', '(b) observe: 200 base rows, generation 3 with 50 rows pending, 240 rows');
check_table('tb', '(b) after the merge');
is( $node->safe_psql('postgres', q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM tb WHERE id IN ('b0001', 'b0010', 'b0011')}),
	'b0001=50001,b0010=50010,b0011=11',
	'(b) the upserts flushed during the merge win over the merged versions');

is($node->safe_psql('postgres', "SELECT $merge_cols FROM rollout_merge('tb')"),
	'1|50|1', '(b) the next merge folds generation 3 in');
$o = observe($node, 'tb');
is("$o->{base_rows}|$o->{exact_row_count}|$o->{generations}",
	'250|240|0',
	'(b) 250 physical versions (10 shadowed by the upserts), 240 logical rows');
check_table('tb', '(b) after the second merge');
check_fragments_on_disk('merge_b', '(b)');
is( $node->safe_psql('postgres',
		q{SELECT fragments_before, fragments_after, rows_written, versions_dropped, skipped_reason IS NULL FROM rollout_compact('tb', min_fragments => 2)}),
	'2|1|240|10|t', '(b) a full compaction drops exactly the 10 shadowed versions');
$o = observe($node, 'tb');
is("$o->{base_rows}|$o->{exact_row_count}", '240|240',
	'(b) base_rows = exact_row_count = distinct keys');
check_table('tb', '(b) after compaction');

# (b2) The same with flush_first (the default): the merge flushes the tail
# itself and keeps the store's flush lock until it commits, so a concurrent
# rollout_flush waits for it; either way its generation is kept.  The merge
# sleeps rather than holds here: the flush cannot end before the merge does,
# and this session would wait for it, and the merge for the session, forever.
$expected->insert_range('tb2', 'c', 1, 100);
$node->safe_psql('postgres', q{SELECT rollout_flush('tb2')});
$expected->insert_range('tb2', 'c', 101, 150);    # the merge flushes these as gen 2
$off = log_offset();
my $merge_b2 = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'merge.after_fragment_put:sleep=5';
SELECT $merge_cols FROM rollout_merge('tb2');
});
wait_for_fault($node, 'merge.after_fragment_put', $off);
$expected->insert_range('tb2', 'c', 151, 170);
$expected->insert_range('tb2', 'c', 1, 5, 70000);
my $t0 = time;
is($node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('tb2')}),
	'25|3', '(b2) a flush during a flush_first merge seals 25 rows as generation 3');
note(sprintf('(b2) that rollout_flush took %.1f s (it waits for the merge\'s flush lock)', time - $t0));
($ret, $out, $err) = $merge_b2->finish;
is($ret, 0, '(b2) the held merge succeeds') or diag($err);
is($out, '2|150|1', '(b2) it merged generations 1 and 2 (150 rows)');
$o = observe($node, 'tb2');
is("$o->{base_rows}|$o->{generations}|$o->{generation_rows}|$o->{exact_row_count}",
	'150|1|25|170', '(b2) generation 3 is still pending with its 25 rows');
check_table('tb2', '(b2) after the merge');
is($node->safe_psql('postgres', "SELECT $merge_cols FROM rollout_merge('tb2')"),
	'1|25|1', '(b2) the next merge folds it in');
check_table('tb2', '(b2) after the second merge');

# (b3) Between a merge's two commits: the base already says merged[shard] =
# 2 while the shard manifest still lists generations 1 and 2.  Readers must
# skip them (no row twice), and a flush in that window appends generation 3,
# which the merge's shard commit keeps.
$expected->insert_range('tb3', 'd', 1, 60);
$node->safe_psql('postgres', q{SELECT rollout_flush('tb3')});
$expected->insert_range('tb3', 'd', 61, 100);
$expected->insert_range('tb3', 'd', 1, 10, 500);
$node->safe_psql('postgres', q{SELECT rollout_flush('tb3')});
$off = log_offset();
my $merge_b3 = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'merge.after_base_commit:hold';
SELECT $merge_cols FROM rollout_merge('tb3', flush_first => false);
});
wait_for_fault($node, 'merge.after_base_commit', $off);
is_deeply([ map { $_->{number} } @{ newest_shard('merge_b3')->{generations} } ], [ 1, 2 ],
	'(b3) in the window the shard manifest still lists generations 1 and 2');
is_deeply([ map { $_->{generation} } @{ newest_base('merge_b3')->{merged} } ], [2],
	'(b3) while the base already says merged = 2');
check_table('tb3', '(b3) a read in the window');
$o = observe($node, 'tb3');
is("$o->{base_rows}|$o->{generations}|$o->{exact_row_count}", '100|0|100',
	'(b3) observe in the window: 100 base rows, no pending generation');
$expected->insert_range('tb3', 'd', 101, 120);
$expected->insert_range('tb3', 'd', 11, 12, 900);
is($node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('tb3')}),
	'22|3', '(b3) a flush in the window seals generation 3');
check_table('tb3', '(b3) a read after that flush');
release_faults($node);
($ret, $out, $err) = $merge_b3->finish;
hold_faults($node);
is($ret, 0, '(b3) the merge succeeds') or diag($err);
is($out, '2|100|1', '(b3) it merged generations 1 and 2 (100 distinct rows)');
is_deeply([ map { $_->{number} } @{ newest_shard('merge_b3')->{generations} } ], [3],
	'(b3) its shard commit dropped 1 and 2 and kept generation 3');
check_table('tb3', '(b3) after the merge');
is($node->safe_psql('postgres', "SELECT $merge_cols FROM rollout_merge('tb3')"),
	'1|22|1', '(b3) the next merge folds generation 3 in');
$o = observe($node, 'tb3');
is("$o->{base_rows}|$o->{exact_row_count}", '122|120',
	'(b3) 122 physical versions (2 shadowed), 120 rows');

# ---------------------------------------------------------------------------
# (c) Two merges racing on the same generations.
#
# (c1) gens 1..4 of 50 new keys each (c0001..c0200).  A (flush_first =>
# false) is held after uploading its fragment; B merges everything.
for my $g (0 .. 3)
{
	$expected->insert_range('tc', 'c', $g * 50 + 1, $g * 50 + 50);
	$node->safe_psql('postgres', q{SELECT rollout_flush('tc')});
}
$off = log_offset();
my $merge_c = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'merge.after_fragment_put:hold';
SELECT $merge_cols FROM rollout_merge('tc', flush_first => false);
});
wait_for_fault($node, 'merge.after_fragment_put', $off);
my @held = $store->objects_in('merge_c/base/data');
is(scalar(@held), 1, '(c1) the held merge uploaded one fragment');
is($node->safe_psql('postgres', "SELECT $merge_cols FROM rollout_merge('tc')"),
	'4|200|1', '(c1) a racing full merge folds in all 4 generations');
release_faults($node);
($ret, $out, $err) = $merge_c->finish;
hold_faults($node);
is($ret, 0, '(c1) the held merge ends without an error') or diag($err);
is($out, '0|0|0', '(c1) it reports that it merged nothing (the other merge did its work)');
ok(!(grep { $_ eq $held[0] } $store->listed_fragments('merge_c')),
	'(c1) the loser\'s fragment is not listed in the newest base');
ok(!$store->exists($held[0]), '(c1) the loser\'s fragment was deleted');
$o = observe($node, 'tc');
is("$o->{base_rows}|$o->{exact_row_count}|$o->{fragments}|$o->{generations}",
	'200|200|1|0', '(c1) base_rows = exact_row_count = 200 in one fragment: no duplicate');
check_table('tc', '(c1) after the race');
check_fragments_on_disk('merge_c', '(c1)');

# (c2) Roles swapped: the held merge flushes first (and holds the flush
# lock), the racing one does not flush.  gens 5..7 of 50 keys, and 20
# unflushed keys that the held merge flushes as gen 8.
for my $g (4 .. 6)
{
	$expected->insert_range('tc', 'c', $g * 50 + 1, $g * 50 + 50);
	$node->safe_psql('postgres', q{SELECT rollout_flush('tc')});
}
$expected->insert_range('tc', 'c', 351, 370);
$off = log_offset();
$merge_c = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'merge.after_fragment_put:hold';
SELECT $merge_cols FROM rollout_merge('tc');
});
wait_for_fault($node, 'merge.after_fragment_put', $off);
my %before_c2 = map { $_ => 1 } $store->listed_fragments('merge_c');
@held = grep { !$before_c2{$_} } $store->objects_in('merge_c/base/data');
is(scalar(@held), 1, '(c2) the held merge uploaded one fragment');
is($node->safe_psql('postgres', "SELECT $merge_cols FROM rollout_merge('tc', flush_first => false)"),
	'4|170|1', '(c2) a racing merge without flush folds in generations 5..8');
release_faults($node);
($ret, $out, $err) = $merge_c->finish;
hold_faults($node);
is($ret, 0, '(c2) the held merge ends without an error') or diag($err);
is($out, '0|0|0', '(c2) it reports that it merged nothing');
ok(!(grep { $_ eq $held[0] } $store->listed_fragments('merge_c')),
	'(c2) the loser\'s fragment is not listed');
ok(!$store->exists($held[0]), '(c2) the loser\'s fragment was deleted');
$o = observe($node, 'tc');
is("$o->{base_rows}|$o->{exact_row_count}|$o->{fragments}|$o->{generations}",
	'370|370|2|0', '(c2) base_rows = exact_row_count = 370 in two fragments');
check_table('tc', '(c2) after the race');
check_fragments_on_disk('merge_c', '(c2)');

# (c3) Partial overlap: gens 9..11 (c0371..c0520).  A takes all three and is
# held; B merges only the oldest one.  A's commit finds merged[shard] moved
# past what it saw but short of its last generation: it drops its fragment,
# starts over (held again) and merges the remaining two.
for my $g (0 .. 2)
{
	$expected->insert_range('tc', 'c', 371 + $g * 50, 420 + $g * 50);
	$node->safe_psql('postgres', q{SELECT rollout_flush('tc')});
}
$off = log_offset();
$merge_c = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'merge.after_fragment_put:hold';
SELECT $merge_cols FROM rollout_merge('tc', flush_first => false);
});
wait_for_fault($node, 'merge.after_fragment_put', $off);
my %before_c3 = map { $_ => 1 } $store->listed_fragments('merge_c');
@held = grep { !$before_c3{$_} } $store->objects_in('merge_c/base/data');
is(scalar(@held), 1, '(c3) the held merge uploaded one fragment for gens 9..11');
is( $node->safe_psql('postgres',
		"SELECT $merge_cols FROM rollout_merge('tc', max_generations => 1, flush_first => false)"),
	'1|50|1', '(c3) a racing merge with max_generations => 1 folds in generation 9 only');
release_faults($node);    # its second preparation passes too
($ret, $out, $err) = $merge_c->finish;
hold_faults($node);
is($ret, 0, '(c3) the held merge succeeds') or diag($err);
is($out, '2|100|1', '(c3) after starting over it merged generations 10 and 11 (100 rows)');
is(count_in_log($node, qr/fault point "merge\.after_fragment_put" reached: holding/, $off),
	2, '(c3) the held merge prepared twice (dropped its first fragment and started over)');
ok(!(grep { $_ eq $held[0] } $store->listed_fragments('merge_c')),
	'(c3) its first fragment is not listed');
ok(!$store->exists($held[0]), '(c3) its first fragment was deleted');
$o = observe($node, 'tc');
is("$o->{base_rows}|$o->{exact_row_count}|$o->{fragments}|$o->{generations}",
	'520|520|4|0', '(c3) base_rows = exact_row_count = 520 in four fragments: no duplicate');
check_table('tc', '(c3) after the partial-overlap race');
check_fragments_on_disk('merge_c', '(c3)');
is_deeply([ map { $_->{number} } @{ newest_shard('merge_c')->{generations} } ], [],
	'(c3) the shard manifest lists no generation any more');

# Everything survives a restart.
$node->stop;
$node->start;
check_table($_, "$_ after restart") for qw(ta tb tb2 tb3 tc);

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

$node->stop;
done_testing();
