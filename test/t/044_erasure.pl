# Copyright (c) rollout_fdw authors
#
# Backends: all
#
# 044_erasure.pl — deleted rows leave the store for good.  Rows carrying a
# unique marker (in their key, a text column and a jsonb column) are written
# as several versions spread over WAL entries, an ingest segment,
# generations and base fragments, on two clusters; then they are deleted and
# the procedure of README "Deleting data" runs: flush, merge, a compaction of
# every fragment, gc past the grace period, on each cluster.  Afterwards no
# object of the store holds the marker, neither in its raw bytes nor in any
# zstd frame it contains.  The search is first shown to find the marker
# before the procedure, so that it cannot pass by finding nothing anywhere.
#
# Compaction drops a tombstone only below its tombstone horizon
# (src/lsm/tombstone_horizon.c): an older version of a deleted key that is
# still outside the compacted fragments (in the other cluster's WAL, then in
# its unmerged generation) keeps the tombstone, and the key stays deleted.
# Counts: cheap counts include tombstones until the compaction drops them,
# then physical rows equal logical rows.

use strict;
use warnings;

use File::Find;
use File::Temp qw(tempfile);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node observe);
use Test::More;

my $marker = sprintf('ERASEME%08x%08x', int(rand(2**32)), int(rand(2**32)));
my $store = RolloutStore->for_test('044_erasure');

my %node;
for my $name ('a', 'b')
{
	# each cluster sees the other's flushes as soon as they commit
	my $n = mode_node("erasure_$name",
		conf => ['rollout_fdw.min_gc_grace = 0', 'rollout_fdw.manifest_refresh_interval = 0']);
	$store->create_extension_and_server($n);
	$n->safe_psql('postgres', q{
CREATE FOREIGN TABLE t (id text, run int, note text, payload jsonb)
  SERVER s OPTIONS (store 'erase', key 'id');
});
	$node{$name} = $n;
}
my ($A, $B) = ($node{a}, $node{b});

# The bytes of every object of the store (the file:// backend: every file
# under the location, its scratch area included).
sub all_objects
{
	my %objects;
	if (defined $store->dir)
	{
		find({ no_chdir => 1, wanted => sub {
			return unless -f $_;
			open(my $fh, '<:raw', $_) or die "$_: $!";
			local $/;
			$objects{ substr($_, length($store->dir) + 1) } = <$fh>;
			close $fh;
		} }, $store->dir);
	}
	else
	{
		$objects{$_} = $store->get($_) for $store->list('');
	}
	return \%objects;
}

# The text of every zstd frame in $bytes, each decompressed from where its
# magic number starts (zstd stops at the end of the frame).
sub zstd_frames
{
	my ($bytes) = @_;
	my @frames;
	my $at = 0;
	while (($at = index($bytes, "\x28\xb5\x2f\xfd", $at)) >= 0)
	{
		my ($fh, $file) = tempfile(UNLINK => 1);
		binmode $fh;
		print $fh substr($bytes, $at);
		close $fh;
		my $text = `zstd -d -c -q '$file' 2>/dev/null`;
		push @frames, $text if length $text;
		unlink $file;
		$at++;
	}
	return @frames;
}

# The objects holding the marker, raw or in a zstd frame; how many frames
# were looked into; how many objects hold it in a zstd frame (footers hold
# keys uncompressed, so those objects show it raw as well).
sub objects_with_marker
{
	my $objects = all_objects();
	my (@hits, $frames, $in_frames);
	for my $key (sort keys %$objects)
	{
		my @frames = zstd_frames($objects->{$key});
		my $raw = index($objects->{$key}, $marker) >= 0;
		my $compressed = grep { index($_, $marker) >= 0 } @frames;
		$frames += @frames;
		push @hits, $key if $raw || $compressed;
		$in_frames++ if $compressed;
	}
	return (\@hits, $frames, $in_frames // 0);
}

my $rows = sub {
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) || ':' || count(*) FILTER (WHERE id LIKE '%$marker%' OR note LIKE '%$marker%' OR payload::text LIKE '%$marker%') FROM t");
};

# --- rows that must go, in every kind of object -----------------------------
my $keep = "'k-' || lpad(g::text, 4, '0')";
my $gone = "'m-$marker-' || g";
$A->safe_psql('postgres', qq{
INSERT INTO t SELECT $keep, g % 7, 'kept ' || g, jsonb_build_object('g', g) FROM generate_series(1, 300) g;
INSERT INTO t SELECT $gone, 1, 'secret $marker', jsonb_build_object('s', '$marker') FROM generate_series(1, 20) g;
SELECT rollout_flush('t'); SELECT rollout_merge('t');
UPDATE t SET run = 2, note = note || ' again' WHERE id LIKE 'm-%';
SELECT rollout_flush('t'); SELECT rollout_merge('t');
UPDATE t SET run = 3 WHERE id LIKE 'm-%';
SELECT rollout_flush('t');
});
# a large transaction: its rows go to an ingest segment the WAL entry names
$A->safe_psql('postgres', qq{
SET rollout_fdw.ingest_threshold = 64;
INSERT INTO t SELECT $gone, 4, 'big secret $marker ' || repeat('x', 3000), NULL FROM generate_series(21, 60) g;
});
# the other cluster's versions of the same keys: a merged one, and one it
# leaves in its WAL (older than the delete that follows)
$B->safe_psql('postgres', qq{
INSERT INTO t SELECT $gone, 5, 'from b $marker', jsonb_build_object('b', '$marker') FROM generate_series(1, 60) g;
SELECT rollout_flush('t'); SELECT rollout_merge('t');
INSERT INTO t SELECT $gone, 6, 'b unflushed $marker', NULL FROM generate_series(1, 10) g;
});
is($rows->($A), '360:60', 'both clusters see 300 rows to keep and 60 to erase');

my ($hits, $frames, $in_frames) = objects_with_marker();
cmp_ok(scalar(@$hits), '>=', 6, 'before: the search finds the marker in the store (' . scalar(@$hits) . ' objects)');
ok((grep { m{/ingest/} } @$hits), 'before: the marker is in an ingest segment');
ok((grep { m{/wal/} } @$hits), 'before: the marker is in WAL entries');
ok((grep { m{/base/data/} } @$hits), 'before: the marker is in base fragments');
cmp_ok($frames, '>', 0, 'before: the search looks into zstd frames');
cmp_ok($in_frames, '>', 0, "before: $in_frames objects hold the marker in compressed chunks");

# --- the delete -------------------------------------------------------------
is($A->safe_psql('postgres', "DELETE FROM t WHERE id LIKE 'm-%'"), '', 'DELETE runs');
is($A->safe_psql('postgres', "SELECT count(*) FROM t"), '300', 'the deleted rows are gone from reads');

# --- the procedure, while the other cluster still holds an older version -----
$A->safe_psql('postgres', q{SELECT rollout_flush('t'); SELECT rollout_merge('t');});
my $before = observe($A, 't');
is($before->{exact_row_count}, 300, 'exact count after the delete');
cmp_ok($before->{row_count}, '>', $before->{exact_row_count},
	'cheap count still includes the tombstones and shadowed versions');
$A->safe_psql('postgres', q{SELECT rollout_compact('t', min_fragments => 2)});
is($rows->($B), '300:0',
	'compaction with an older version in the other cluster\'s WAL keeps the key deleted there');
# that version now becomes a generation of B, still not in the base; a
# second fragment gives the compaction something to do
$B->safe_psql('postgres', q{SELECT rollout_flush('t')});
$A->safe_psql('postgres', qq{
INSERT INTO t VALUES ('k-0301', 0, 'kept 301', NULL);
SELECT rollout_flush('t'); SELECT rollout_merge('t');
DELETE FROM t WHERE id = 'k-0301';
SELECT rollout_flush('t'); SELECT rollout_merge('t');
});
is($A->safe_psql('postgres', q{SELECT fragments_after FROM rollout_compact('t', min_fragments => 2)}),
	'1', 'a compaction with an older version in an unmerged generation of the other cluster');
is($rows->($B), '300:0', 'after B flushed and A compacted: its older versions stay hidden');
cmp_ok(observe($A, 't')->{base_rows}, '>=', 300 + 60,
	'the tombstones could not go yet: the base still holds them');

# now everything older is in the base: the compaction may drop the tombstones
$B->safe_psql('postgres', q{SELECT rollout_merge('t')});
$A->safe_psql('postgres', q{SELECT rollout_compact('t', min_fragments => 2)});
is($rows->($A), '300:0', 'after the full compaction: cluster a');
is($rows->($B), '300:0', 'after the full compaction: cluster b');
my $after = observe($A, 't');
is($after->{row_count}, 300, 'physical rows equal logical rows again');
is($after->{exact_row_count}, 300, 'exact count equals count(*)');

for my $n ($A, $B)
{
	$n->safe_psql('postgres', q{SELECT rollout_gc('t', '0')});
}
($hits, $frames) = objects_with_marker();
is(join(', ', @$hits), '', 'after gc past the grace period: no object holds the marker');
cmp_ok($frames, '>', 0, 'after: the search still looked into zstd frames');
is($A->safe_psql('postgres', "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM t"),
	'300|300|k-0001|k-0300', 'the kept rows are all there');

# a deleted key can come back, and is found like any other
$B->safe_psql('postgres', "INSERT INTO t VALUES ('m-$marker-1', 9, 'back', NULL)");
$B->safe_psql('postgres', q{SELECT rollout_flush('t')});
is($A->safe_psql('postgres', "SELECT run, note FROM t WHERE id = 'm-$marker-1'"), '9|back',
	'a key inserted again after its erasure is visible');

done_testing();
