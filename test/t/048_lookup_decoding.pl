
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
# Remote modes: plain  (reads through the store, the same whatever the writer; scripts/test.sh)
#
# 048_lookup_decoding.pl — a lookup of one key decodes only what it needs
# (read/row_source.c, format/segment_reader.c, format/datum_codec.c), and
# that never changes a value:
#   - its key chunk page by page, only the pages its binary search visits,
#     and of keys spread evenly (uuids) nearly always the one page that
#     interpolation between the row group's smallest and largest key points
#     to;
#   - of every other column the one row it returns, out of its page
#     (segment_chunk_decode_row): values before it stepped over, fixed-width
#     ones found by their rank when their length is a multiple of their
#     alignment (int2/4/8, float4/8, uuid, name, bool, char) and by walking
#     otherwise (macaddr: 6 bytes aligned on 4; timetz: 12 on 8), varlenas
#     with 1-byte and 4-byte headers, NULLs before and at the row;
#   - pages compressed in zstd's fast mode and with compression dictionaries
#     (format version 4) alike.
# Every lookup, of keys whose versions lie in a base fragment, a generation
# and the unflushed tail, and of absent keys, must return what a heap table
# holding the newest versions returns, and the same with late decoding off.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;

my $node = mode_node('lookup_decoding',
	conf => [ 'rollout_fdw.rows_per_group = 256', 'rollout_fdw.page_size = 1',
		'rollout_fdw.dictionary_size = 1' ]);
my $store = RolloutStore->for_test('048_lookup_decoding');
$store->create_extension_and_server($node);

my $columns = q{id int, a int2, b int4, c int8, d float4, e uuid, f macaddr,
	g timetz, h text, i jsonb, j name, k bool, l numeric, m char(3)};
$node->safe_psql(
	'postgres', qq{
CREATE FOREIGN TABLE t ($columns) SERVER s OPTIONS (store 'lookups', key 'id');
CREATE TABLE oracle ($columns, PRIMARY KEY (id));
});

# Rows of version $v for keys $lo..$hi: every column NULL on its own period,
# text long enough for 4-byte headers on some rows and for a dictionary.
sub rows
{
	my ($lo, $hi, $v) = @_;
	return qq{
SELECT g,
       CASE WHEN g % 3 = 0 THEN NULL ELSE (g * $v) % 30000 END,
       CASE WHEN g % 5 = 0 THEN NULL ELSE g * 7 + $v END,
       CASE WHEN g % 7 = 0 THEN NULL ELSE g::int8 * 100003 + $v END,
       CASE WHEN g % 4 = 1 THEN NULL ELSE g / 7.0 + $v END,
       CASE WHEN g % 6 = 2 THEN NULL ELSE md5(g::text || $v)::uuid END,
       CASE WHEN g % 9 = 4 THEN NULL ELSE ('08:00:2b:01:02:' || lpad(to_hex((g + $v) % 256), 2, '0'))::macaddr END,
       CASE WHEN g % 8 = 3 THEN NULL ELSE ('12:00:00+0' || (g % 9))::timetz + (g || ' seconds')::interval END,
       CASE WHEN g % 11 = 5 THEN NULL
            WHEN g % 4 = 0 THEN repeat('rollout step reward ' || g, 1 + g % 9)
            ELSE 'v$v-' || g END,
       CASE WHEN g % 10 = 7 THEN NULL
            ELSE jsonb_build_object('g', g, 'v', $v, 'text', repeat('agent tool call ', g % 12)) END,
       CASE WHEN g % 13 = 6 THEN NULL ELSE ('n' || g)::name END,
       CASE WHEN g % 12 = 0 THEN NULL ELSE g % 2 = 0 END,
       CASE WHEN g % 14 = 1 THEN NULL ELSE (g * 1.5 + $v)::numeric END,
       CASE WHEN g % 15 = 2 THEN NULL ELSE lpad((g % 1000)::text, 3, 'x') END
FROM generate_series($lo, $hi) g};
}

sub write_both
{
	my ($lo, $hi, $v) = @_;
	my $rows = rows($lo, $hi, $v);
	$node->safe_psql('postgres', qq{
INSERT INTO t $rows;
INSERT INTO oracle $rows ON CONFLICT (id) DO UPDATE SET
  a = excluded.a, b = excluded.b, c = excluded.c, d = excluded.d, e = excluded.e,
  f = excluded.f, g = excluded.g, h = excluded.h, i = excluded.i, j = excluded.j,
  k = excluded.k, l = excluded.l, m = excluded.m;
});
}

# version 1 of keys 1..2000 into a base fragment, version 2 of 1000..1499
# into a generation, version 3 of 1400..1449 unflushed
write_both(1, 2000, 1);
$node->safe_psql('postgres', "SELECT rollout_flush('t'); SELECT rollout_merge('t')");
write_both(1000, 1499, 2);
$node->safe_psql('postgres', "SELECT rollout_flush('t')");
write_both(1400, 1449, 3);

my @fragments = grep { /\.seg$/ } $store->list('lookups/base/data/');
is(scalar(@fragments), 1, 'one base fragment');
is(unpack('V', substr($store->get($fragments[0]), 4, 4)), 4,
	'written with compression dictionaries (format version 4)');

# every key of a few row groups, and a spread of others, absent ones too
my @keys = ((1 .. 130), (990 .. 1010), (1395 .. 1455), (1900 .. 2005),
	map { $_ * 37 % 2100 } 1 .. 120);
my $lookups = join('', map { "SELECT t FROM t WHERE id = $_;\n" } @keys);
my $expected = join('', map { "SELECT t FROM oracle t WHERE id = $_;\n" } @keys);

my $want = $node->safe_psql('postgres', $expected);
is($node->safe_psql('postgres', $lookups), $want,
	scalar(@keys) . ' lookups return the newest version of every column, absent keys nothing');
is($node->safe_psql('postgres', "SET rollout_fdw.decode_late = off;\n$lookups"), $want,
	'the same with late decoding off');
is($node->safe_psql('postgres', 'SELECT t FROM t ORDER BY id'),
	$node->safe_psql('postgres', 'SELECT t FROM oracle t ORDER BY id'),
	'a scan of every row agrees too');

# what the lookup decoded
my $plan = $node->safe_psql('postgres',
	'EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM t WHERE id = 57');
my ($decoded, $skipped, $pages) = $plan =~ /Late Chunks: decoded=(\d+) skipped=(\d+) pages=(\d+)/;
ok(defined $pages, 'EXPLAIN shows the late chunks') or diag($plan);
cmp_ok($pages, '<=', 20,
	"a lookup decodes a handful of pages: the key's it searched, one per other column ($pages)");

# Keys spread evenly (uuids): a lookup starts at the key page interpolation
# between the row group's smallest and largest key points to
# (read/row_source.c, row_source_guess_row), which nearly always holds the
# key, and decodes no other key page. 256 uuids per row group are 4 kB of
# keys, 4 pages of 1 kB: a binary search alone visits 2 or 3 of them.
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE u (id uuid, v int) SERVER s OPTIONS (store 'uuid_lookups', key 'id');
CREATE TABLE u_oracle (id uuid PRIMARY KEY, v int);
INSERT INTO u SELECT md5('k' || g)::uuid, g FROM generate_series(1, 3000) g;
INSERT INTO u_oracle SELECT md5('k' || g)::uuid, g FROM generate_series(1, 3000) g;
SELECT rollout_flush('u'); SELECT rollout_merge('u');
});
my @ukeys = map { "md5('k' || $_)::uuid" } ((map { $_ * 29 % 3000 + 1 } 1 .. 60), 3001 .. 3010);
is($node->safe_psql('postgres', join('', map { "SELECT * FROM u WHERE id = $_;\n" } @ukeys)),
	$node->safe_psql('postgres', join('', map { "SELECT * FROM u_oracle WHERE id = $_;\n" } @ukeys)),
	'uuid lookups return what the heap does, absent keys nothing');
my @upages;
for my $key (@ukeys[0 .. 39])
{
	my $uplan = $node->safe_psql('postgres',
		"EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM u WHERE id = $key");
	push @upages, $uplan =~ /Late Chunks: decoded=\d+ skipped=\d+ pages=(\d+)/ ? $1 : 99;
}
my %histogram;
$histogram{$_}++ for @upages;
my $histogram = join(', ', map { "$histogram{$_} with $_" } sort { $a <=> $b } keys %histogram);
# two pages: the key's, and the row of v; a binary search alone makes 3 or 4
cmp_ok(scalar(grep { $_ <= 2 } @upages), '>=', 30,
	"most uuid lookups decode one key page and one page of v ($histogram)");

done_testing();
