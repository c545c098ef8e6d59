
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
# Remote modes: plain  (reads through the store, the same whatever the writer; scripts/test.sh)
#
# 053_clustered_compaction.pl — the table option cluster_by: a compaction
# spreads its rows over ranges of that column, one set of key-sorted
# fragments per range, which share no key (lsm/cluster_ranges.c), and zone
# maps skip the row groups of the ranges a filter misses although every
# fragment covers the whole key range (read/merge_iterator.c):
#   (a) a window of created_at, 1 % of random keys, reads a few row groups
#       of the clustered store and all of a store compacted by key alone;
#       the base manifest names one disjoint set; physical rows equal
#       logical rows; a second compaction counts the set as one fragment
#       and is skipped, min_fragments => 1 compacts it all the same; the
#       option's bad values are refused;
#   (b) adversarial versions: keys whose newest version moved out of a
#       window (or into one) in the unflushed tail, a generation, a merged
#       fragment, with the old version in the clustered set; deletes; at
#       every step each window answers as a heap holding the newest
#       versions does, zone maps on and off, and after a full compaction
#       physical rows equal logical rows;
#   (c) random rounds of updates that move created_at, interleaved with
#       flush, merge and clustered compaction, checked against the heap;
#   (d) two disjoint sets at once, the newer one holding versions whose
#       older ones, in the other window, are in the older set: the windows
#       still answer as the heap does; max_source_fragments that would pick
#       members of one set only is skipped.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node observe try_sql loop_size foreign_scan_of);
use Test::More;

my $seed = $ENV{ROLLOUT_TEST_SEED} // 53;
srand($seed);
note("seed $seed");

# min_gc_grace 0: a compaction drops tombstones at once, so that physical
# rows equal logical rows after it
my $node = mode_node('clustered',
	conf => [ 'rollout_fdw.rows_per_group = 50', 'rollout_fdw.min_gc_grace = 0' ]);
my $store = RolloutStore->for_test('053_clustered_compaction');
$store->create_extension_and_server($node);

my $columns = 'id int, created_at timestamptz, v int';
$node->safe_psql('postgres', qq{
CREATE FOREIGN TABLE c ($columns) SERVER s OPTIONS (store 'clustered', key 'id', cluster_by 'created_at');
CREATE FOREIGN TABLE k ($columns) SERVER s OPTIONS (store 'by_key', key 'id');
CREATE TABLE o ($columns, PRIMARY KEY (id));
});

# --- the option's bad values ------------------------------------------------
for my $bad (
	[ q{cluster_by 'nope'}, qr/cluster_by column "nope" does not exist/ ],
	[ q{cluster_by 'id'}, qr/cluster_by column "id" of foreign table "bad" is its key/ ],
	[ q{cluster_by 'note'}, qr/has type text, which compaction cannot cluster by/ ],
	[ q{cluster_by ''}, qr/invalid value for option "cluster_by": the column name is empty/ ],
	[ q{cluster_ranges '1'}, qr/invalid value for option "cluster_ranges": "1"/ ],
	[ q{cluster_ranges '257'}, qr/It must be an integer from 2 to 256/ ],
	[ q{cluster_ranges 'many'}, qr/invalid value for option "cluster_ranges": "many"/ ])
{
	my ($ok, $out, $err) = try_sql($node,
		"CREATE FOREIGN TABLE bad (id int, note text) SERVER s OPTIONS (store 'bad', $bad->[0])");
	ok(!$ok && $err =~ $bad->[1], "CREATE FOREIGN TABLE with $bad->[0] is refused") or diag($err);
}
my ($ok, $out, $err) = try_sql($node, q{ALTER FOREIGN TABLE k OPTIONS (ADD cluster_by 'v'); ALTER FOREIGN TABLE k OPTIONS (DROP cluster_by);});
ok($ok, 'cluster_by can be added to a table and dropped again') or diag($err);

# --- (a) a window reads few row groups --------------------------------------
# 4,000 keys in a random order; created_at follows the order of insertion
# (one second apart), so in key order it is random.
my $rows = 4000;
my $gen = sub {
	my ($table, $from, $to) = @_;
	return "INSERT INTO $table SELECT (g * 2503) % 4001, timestamptz '2026-01-01 00:00+00' + g * interval '1 s', g FROM generate_series($from, $to) g;";
};
for my $batch (0 .. 3)
{
	my ($from, $to) = ($batch * 1000 + 1, $batch * 1000 + 1000);
	$node->safe_psql('postgres', join("\n",
		(map { $gen->($_, $from, $to) } 'c', 'k', 'o'),
		q{SELECT 1 FROM rollout_merge('c'); SELECT 1 FROM rollout_merge('k');}));
}
is($node->safe_psql('postgres', q{SELECT fragments FROM rollout_observe('c')}), '4',
	'four merged fragments to compact');
my $compacted = $node->safe_psql('postgres',
	q{SELECT fragments_after, rows_written FROM rollout_compact('c', min_fragments => 2)});
my ($fragments, $written) = split /\|/, $compacted;
is($written, $rows, 'the clustered compaction wrote every row');
# 4,000 rows, 50 per row group: 40 ranges (two row groups each at least;
# cluster_ranges would allow 64), written in three passes over the inputs
# (16 ranges at most at once, rewrite.h), the NULLs' range a fourth
is($fragments, 40, 'into 40 fragments, one per range of created_at');
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_compact('k', min_fragments => 2)});

my $base = $store->newest_manifest('clustered/base/_manifest');
my %sets = map { ($_->{disjoint_set} // 'none') => 1 } @{ $base->{fragments} };
is(join(',', keys %sets), $base->{fragments}[0]{file},
	'the manifest names every fragment as one disjoint set, after the first of them');

# no key in two fragments: the fragments' rows add up to the keys
my $o = observe($node, 'c');
is($o->{row_count}, $rows, 'physical rows equal logical rows');

sub scan_counters
{
	my ($query, $settings) = @_;
	my $json = $node->safe_psql('postgres',
		($settings // '') . "EXPLAIN (ANALYZE, FORMAT JSON) $query");
	return foreign_scan_of($json);
}
my $window = sub {
	my ($table, $from_s, $to_s) = @_;
	return "SELECT * FROM $table WHERE created_at >= timestamptz '2026-01-01 00:00+00' + interval '$from_s s'"
	  . " AND created_at < timestamptz '2026-01-01 00:00+00' + interval '$to_s s'";
};
# 1 % of the rows, 40 seconds, well inside one range
my $clustered = scan_counters($window->('c', 1210, 1250));
my $by_key = scan_counters($window->('k', 1210, 1250));
is($clustered->{'Actual Rows'}, 40, '(a) the window holds 40 rows');
is($by_key->{'Actual Rows'}, 40, '(a) ... in the store compacted by key too');
cmp_ok($clustered->{'Row Groups Read'}, '<=', 6,
	"(a) the clustered store reads at most two ranges' row groups ($clustered->{'Row Groups Read'} read, "
	  . "$clustered->{'Skipped by Zone Map'} skipped by zone map)");
cmp_ok($by_key->{'Row Groups Read'}, '>=', 70,
	"(a) the store compacted by key reads nearly all ($by_key->{'Row Groups Read'})");
my $off = scan_counters($window->('c', 1210, 1250), 'SET rollout_fdw.use_zone_maps = off; ');
is($off->{'Skipped by Zone Map'}, 0, '(a) with use_zone_maps off nothing is skipped');
is($off->{'Actual Rows'}, 40, '(a) ... and the same rows are found');

my $again = $node->safe_psql('postgres',
	q{SELECT fragments_after, skipped_reason FROM rollout_compact('c', min_fragments => 2)});
like($again, qr/^40\|40 fragments, of which the outputs of one compaction count as one: 1, fewer than min_fragments \(2\)$/,
	'(a) a second compaction counts the set as one fragment and is skipped');
is($node->safe_psql('postgres', q{SELECT rollout_should_compact('c', 2)}), 'f',
	'(a) rollout_should_compact counts it as one too');
is($node->safe_psql('postgres',
		q{SELECT fragments_after, rows_written, skipped_reason IS NULL FROM rollout_compact('c', min_fragments => 1)}),
	"40|$rows|t", '(a) min_fragments => 1 compacts the set again, into the same ranges');
# the table option bounds the ranges; within 16 ranges one pass writes them all
$node->safe_psql('postgres', q{ALTER FOREIGN TABLE c OPTIONS (ADD cluster_ranges '8')});
is($node->safe_psql('postgres',
		q{SELECT fragments_after, rows_written FROM rollout_compact('c', min_fragments => 1)}),
	"8|$rows", '(a) cluster_ranges 8: eight ranges');
is(scan_counters($window->('c', 1210, 1250))->{'Actual Rows'}, 40, '(a) ... and the window finds its rows');
$node->safe_psql('postgres', q{ALTER FOREIGN TABLE c OPTIONS (DROP cluster_ranges)});
is($node->safe_psql('postgres',
		q{SELECT fragments_after, rows_written FROM rollout_compact('c', min_fragments => 1)}),
	"40|$rows", '(a) without it, 40 again');

# --- (b) adversarial versions ---------------------------------------------
# Windows: early (seconds 100-500), late (3500-3900) and some others.
my @windows = ([ 100, 500 ], [ 3500, 3900 ], [ 0, 4001 ], [ 1999, 2001 ], [ 5000, 6000 ], [ -100, 50 ]);

sub answers
{
	my ($table, $settings) = @_;
	my $sql = join("\n",
		map {
			my $w = $window->($table, @$_);
			$w =~ s/^SELECT \* /SELECT '$_->[0]-$_->[1]', count(*), coalesce(sum(id::bigint * (v + 7)), 0), coalesce(string_agg(id::text, ',' ORDER BY id) FILTER (WHERE v < 0), '-') /;
			"$w;"
		} @windows)
	  . "\nSELECT count(*), count(created_at), coalesce(sum(id::bigint * (v + 7)), 0) FROM $table;";
	return $node->safe_psql('postgres', ($settings // '') . "\n$sql");
}

sub check_all
{
	my ($what) = @_;
	my $oracle = answers('o');
	is(answers('c'), $oracle, "$what: every window answers as the heap does");
	is(answers('c', 'SET rollout_fdw.use_zone_maps = off;'), $oracle, "$what: ... with zone maps off too");
	return;
}

# Keys moved out of the early window into the late one, and the reverse,
# marked by a negative v.
my $move = sub {
	my ($ids_sql, $to_s, $v) = @_;
	my $set = defined $to_s
	  ? "created_at = timestamptz '2026-01-01 00:00+00' + interval '$to_s s', v = $v"
	  : "created_at = NULL, v = $v";
	return "UPDATE c SET $set WHERE id IN ($ids_sql); UPDATE o SET $set WHERE id IN ($ids_sql);";
};
my $early_ids = q{SELECT (g * 2503) %% 4001 FROM generate_series(%d, %d) g};
# Each direction is flushed on its own, so that the row groups of the new
# versions hold one window's values only and their zone maps rule the other
# window out.
$node->safe_psql('postgres', $move->(sprintf($early_ids, 200, 209), 3600, -1));
check_all('(b) moved out of the early window, in the unflushed tail');
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_flush('c');}
	  . $move->(sprintf($early_ids, 3700, 3709), 300, -2));
check_all('(b) moved out in a generation, moved in in the unflushed tail');
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_flush('c')});
check_all('(b) moved both ways in generations');
$node->safe_psql('postgres', $move->(sprintf($early_ids, 210, 219), 3610, -3)
	  . q{SELECT 1 FROM rollout_flush('c');}
	  . $move->(sprintf($early_ids, 3710, 3719), 310, -4)
	  . q{SELECT 1 FROM rollout_flush('c');});
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_merge('c')});
check_all('(b) moved in a merged fragment');
$node->safe_psql('postgres', q{DELETE FROM c WHERE id % 97 = 0; DELETE FROM o WHERE id % 97 = 0;}
	  . $move->(sprintf($early_ids, 220, 229), 3620, -5));
check_all('(b) deleted and moved again');
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_merge('c')});
my $result = $node->safe_psql('postgres',
	q{SELECT fragments_after, skipped_reason IS NULL FROM rollout_compact('c', min_fragments => 2)});
like($result, qr/\|t$/, "(b) the set and two merged fragments compact again ($result)");
check_all('(b) compacted again');
my $count = $node->safe_psql('postgres', q{SELECT count(*) FROM o});
$o = observe($node, 'c');
is($o->{row_count}, $count, '(b) physical rows equal logical rows after it');
cmp_ok(scan_counters($window->('c', 3600, 3630))->{'Skipped by Zone Map'}, '>', 0,
	'(b) and a window still skips row groups by zone map');

# --- (c) random rounds -------------------------------------------------------
my $rounds = loop_size(file => 20, remote => 5, long => 200);
for my $round (1 .. $rounds)
{
	my @sql;
	for (1 .. 3)
	{
		my $lo = int(rand(4000));
		my $hi = $lo + int(rand(60));
		# now and then to no time at all: the NULLs' range, a pass of its own
		my $to = rand() < 0.15 ? undef : int(rand(4400)) - 200;
		push @sql, $move->("SELECT g FROM generate_series($lo, $hi) g", $to, -int(rand(9)) - 1);
	}
	my $dice = rand();
	push @sql, q{SELECT 1 FROM rollout_flush('c');} if $dice < 0.8;
	push @sql, q{SELECT 1 FROM rollout_merge('c');} if $dice < 0.6;
	push @sql, q{SELECT 1 FROM rollout_compact('c', min_fragments => 2);} if $dice < 0.3;
	$node->safe_psql('postgres', join("\n", @sql));
	@windows = map { my $lo = int(rand(4400)) - 200; [ $lo, $lo + 1 + int(rand(400)) ] } 1 .. 6;
	my $oracle = answers('o');
	my $got = answers('c');
	next if $got eq $oracle;
	is($got, $oracle, "(c) round $round: the windows answer as the heap does");
	BAIL_OUT("clustered store diverged in round $round (seed $seed)");
}
pass("(c) $rounds random rounds answered as the heap does");
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_merge('c'); SELECT 1 FROM rollout_compact('c', min_fragments => 2)});
$count = $node->safe_psql('postgres', q{SELECT count(*) FROM o});
$o = observe($node, 'c');
is($o->{exact_row_count}, $count, '(c) the exact count is the heap\'s');
is($o->{row_count}, $count, '(c) and after a full compaction physical rows equal logical rows');

# --- (d) two disjoint sets ---------------------------------------------------
# The whole store is one set again. 60 keys of the seconds 1000-1059 move
# to 3000 and beyond, 60 of 2000-2059 into 1000 and beyond; each group is
# merged into a fragment of its own, and those two (the smallest) compact
# into a second set of 50-row fragments (120 rows: too few for ranges).
# Every key gets its first time back first (g of id = g * 2503 % 4001 is
# id * 211 % 4001): the moves of (c) gave many keys one time, or none, and a
# range boundary never splits equal values, so some ranges, and the NULLs',
# could be fragments smaller than those two, which max_source_fragments
# would then pick instead (it takes the smallest).
$node->safe_psql('postgres', join('',
	map { "UPDATE $_ SET created_at = timestamptz '2026-01-01 00:00+00' + (id * 211 % 4001) * interval '1 s';" }
	  'c', 'o')
	  . q{SELECT 1 FROM rollout_flush('c'); SELECT 1 FROM rollout_merge('c');});
my $ranges = $node->safe_psql('postgres', q{SELECT fragments_after FROM rollout_compact('c', min_fragments => 1)});
cmp_ok($ranges, '>', 16, "(d) the whole store in one set of $ranges fragments");
$node->safe_psql('postgres', $move->(sprintf($early_ids, 1000, 1059), 3000, -11)
	  . q{SELECT 1 FROM rollout_merge('c');});
$node->safe_psql('postgres', $move->(sprintf($early_ids, 2000, 2059), 1000, -12)
	  . q{SELECT 1 FROM rollout_merge('c');});
# (the keys deleted in (b) are not moved)
my $moved = $node->safe_psql('postgres', q{SELECT count(*) FROM o WHERE v IN (-11, -12)});
$result = $node->safe_psql('postgres',
	q{SELECT rows_written, skipped_reason IS NULL FROM rollout_compact('c', min_fragments => 2, target_rows_per_fragment => 50, max_source_fragments => 2)});
is($result, "$moved|t", '(d) the two merged fragments compact into a set of their own');
$base = $store->newest_manifest('clustered/base/_manifest');
%sets = ();
$sets{ $_->{disjoint_set} // 'none' }++ for @{ $base->{fragments} };
is(join(',', sort { $a <=> $b } values %sets), int(($moved + 49) / 50) . ",$ranges",
	'(d) the base holds two disjoint sets: the ranges, and the 50-row fragments of the moved rows')
  or diag(encode_json($base->{fragments}));
@windows = ([ 1000, 1060 ], [ 2000, 2060 ], [ 3000, 3100 ], [ 990, 1010 ], [ 0, 4001 ]);
check_all('(d) two sets, the newer one moving keys between the windows');
cmp_ok(scan_counters($window->('c', 1000, 1060))->{'Skipped by Zone Map'}, '>', 0,
	'(d) the older set still has row groups skipped');
$result = $node->safe_psql('postgres',
	q{SELECT skipped_reason FROM rollout_compact('c', min_fragments => 2, max_source_fragments => 2)});
like($result, qr/are the outputs of one compaction/,
	'(d) a compaction whose inputs would be one set only is skipped');

$node->stop;
done_testing();
