
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
# Remote modes: plain  (reads through the store, the same whatever the writer; scripts/test.sh)
#
# 033_key_filters.pl — every segment carries a Bloom filter of its keys
# (format versions 2 and 3, docs/FORMAT.md), and a lookup of one key skips the
# segments whose filter rules the key out, without changing any result:
#   (a) over 10 generations whose key ranges all overlap, a lookup of an
#       absent key skips at least 9 of them by their filters, a present key
#       at least 8, and a key every generation holds none;
#   (b) lookups return the same rows with rollout_fdw.use_key_filters on
#       and off, the newest version of each key;
#   (c) rollout_fdw.key_filter_bits = 0 with page_size = 0 writes format
#       version 1 segments (no filter, no pages), page_size = 0 alone version
#       2 (a filter, no pages), and all are read alongside version 3 ones;
#   (d) keys whose equality is not byte equality (numeric: 1.0 = 1.00) and
#       cross-type conditions (int4 key = bigint) never use the filter and
#       find their rows.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node shard_of);
use Test::More;

my $node = mode_node('key_filters');
my $store = RolloutStore->for_test('033_key_filters');
$store->create_extension_and_server($node);
my $shard = shard_of($node);
$node->safe_psql('postgres', q{CREATE FOREIGN TABLE k (id text, v int) SERVER s OPTIONS (store 'kf')});

# 10 generations: each spans 'a-..' to 'z-..' (so key ranges skip nothing),
# holds 300 keys of its own and a new version of 'common'
for my $r (1 .. 10)
{
	$node->safe_psql('postgres', qq{
INSERT INTO k SELECT 'g$r-' || i, $r * 1000 + i FROM generate_series(1, 300) i;
INSERT INTO k VALUES ('a-$r', $r), ('z-$r', $r), ('common', $r);
SELECT rollout_flush('k');});
}
is($node->safe_psql('postgres', q{SELECT generations FROM rollout_observe('k')}), '10',
	'10 pending generations');
my @gens = sort grep { /\.seg$/ } $store->objects_in("kf/shards/$shard/gen");
is(scalar(@gens), 10, '10 generation objects');
is(join(',', map { unpack('V', substr($store->get($_), 4, 4)) } @gens),
	join(',', (3) x 10), 'all of format version 3 (key filters and pages)');

# "skipped|row groups read|result" of a lookup
sub lookup
{
	my ($key, $settings) = @_;
	$settings //= '';
	my $out = $node->safe_psql('postgres', qq{$settings
EXPLAIN (ANALYZE, FORMAT JSON) SELECT v FROM k WHERE id = '$key';
SELECT coalesce(string_agg(v::text, ','), '-') FROM k WHERE id = '$key';});
	my ($skipped) = $out =~ /"Skipped by Key Filter": (\d+)/;
	my ($groups) = $out =~ /"Row Groups Read": (\d+)/;
	my ($result) = $out =~ /\n([^\n]*)\z/;
	return ($skipped, $groups, $result);
}

# (a)
my ($skipped, $groups, $result) = lookup('m-absent');
cmp_ok($skipped, '>=', 9, "(a) an absent key: $skipped of 10 generations skipped by their filters");
is($result, '-', '(a) and nothing found');
cmp_ok($groups, '<=', 1, "(a) $groups row groups read (at most one false positive)");
($skipped, $groups, $result) = lookup('g5-7');
cmp_ok($skipped, '>=', 8, "(a) a key of one generation: $skipped skipped");
is($result, '5007', '(a) and its row found');
($skipped, $groups, $result) = lookup('common');
is($skipped, '0', '(a) a key every generation holds: none skipped');
is($result, '10', '(a) its newest version');
($skipped) = lookup('m-absent', 'SET rollout_fdw.use_key_filters = off;');
is($skipped, '0', '(a) with use_key_filters off nothing is skipped');

# (b) the same answers with the filters on and off
my @keys = ('common', 'a-1', 'z-10', 'absent', map { ("g$_-1", "g$_-150", "g$_-300", "g$_-301") } 1 .. 10);
my $sql = join("\n", map { "SELECT '$_', coalesce(string_agg(v::text, ','), '-') FROM k WHERE id = '$_';" } @keys);
my $on = $node->safe_psql('postgres', $sql);
my $off = $node->safe_psql('postgres', "SET rollout_fdw.use_key_filters = off;\n$sql");
is($on, $off, '(b) ' . scalar(@keys) . ' lookups answer the same with the filters on and off');
like($on, qr/^g7-150\|7150$/m, '(b) a row of generation 7');
like($on, qr/^g3-301\|-$/m, '(b) a key no generation holds');

# (c) page_size = 0: a version 2 generation; and with key_filter_bits = 0 a
# version 1 one, read with the others
$node->safe_psql('postgres', q{
SET rollout_fdw.page_size = 0;
INSERT INTO k VALUES ('v2-format', 12), ('common', 12);
SELECT rollout_flush('k');});
my @v2 = grep { my $g = $_; !grep { $_ eq $g } @gens } sort grep { /\.seg$/ } $store->objects_in("kf/shards/$shard/gen");
is(scalar(@v2), 1, '(c) one more generation');
is(unpack('V', substr($store->get($v2[0]), 4, 4)), 2, '(c) of format version 2');
push @gens, @v2;
$node->safe_psql('postgres', q{
SET rollout_fdw.key_filter_bits = 0;
SET rollout_fdw.page_size = 0;
INSERT INTO k VALUES ('a-11', 11), ('old-format', 11), ('common', 11), ('z-11', 11);
SELECT rollout_flush('k');});
my @new = grep { my $g = $_; !grep { $_ eq $g } @gens } sort grep { /\.seg$/ } $store->objects_in("kf/shards/$shard/gen");
is(scalar(@new), 1, '(c) and one more');
is(unpack('V', substr($store->get($new[0]), 4, 4)), 1, '(c) of format version 1');
is($node->safe_psql('postgres', q{SELECT v FROM k WHERE id = 'v2-format'}), '12',
	'(c) the version 2 generation is read');
($skipped, $groups, $result) = lookup('old-format');
is($result, '11', '(c) its row is found');
cmp_ok($skipped, '>=', 10, '(c) the version 2 and 3 generations are skipped by their filters');
($skipped, $groups, $result) = lookup('common');
is("$skipped|$result", '0|11', '(c) the newest version of common is in the version 1 generation');
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id) FROM k}), '3025|3025',
	'(c) a full scan reads every key once');
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_merge('k')});
($skipped, $groups, $result) = lookup('g9-9');
is($result, '9009', '(c) after a merge into a fragment, lookups still find their rows');

# (d) numeric keys and cross-type conditions
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE n (id numeric, v int) SERVER s OPTIONS (store 'kf_numeric');
CREATE FOREIGN TABLE i (id int, v int) SERVER s OPTIONS (store 'kf_int');
INSERT INTO n VALUES (1.00, 1), (2.5, 2);
INSERT INTO i SELECT g, g FROM generate_series(1, 100) g;
SELECT rollout_flush('n'), rollout_flush('i');});
my $out = $node->safe_psql('postgres', q{
SELECT v FROM n WHERE id = 1.0;
SELECT v FROM n WHERE id = 2.50;
SELECT v FROM i WHERE id = 42::bigint;
SELECT v FROM i WHERE id = 42;});
is($out, "1\n2\n42\n42", '(d) numeric 1.0 finds 1.00, 2.50 finds 2.5, an int key a bigint and an int');
($skipped) = $node->safe_psql('postgres',
	q{EXPLAIN (ANALYZE, FORMAT JSON) SELECT v FROM n WHERE id = 1.0}) =~ /"Skipped by Key Filter": (\d+)/;
is($skipped, '0', '(d) numeric keys never use the filter');

$node->stop;
done_testing();
