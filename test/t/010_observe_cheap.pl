
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 010_observe_cheap.pl — rollout_observe's cheap mode reads no data
# (DESIGN.md §11.5): it answers from manifests, listings and the footers of
# unflushed WAL entries (which say how many rows each holds), never from a
# row group, while the exact mode, which must read keys, fails cleanly when
# the data is unreadable.  The cheap count includes the durable rows of
# unflushed WAL entries in both modes, so it never falls below count(*)
# (issue 10, point 8).
#
# Runs against every backend (test/perl/RolloutStore.pm).  "Unreadable" is
# reached in two ways: on every backend each segment is overwritten with
# garbage of the same size, and each WAL entry too except its footer
# (listings, keys and sizes unchanged; any read of the data fails
# validation), and on the file:// store also by taking away the read
# permission, which remote stores have no per-object equivalent of.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;

# preload: rollout_fdw in shared_preload_libraries, its timed sweeper off
my $node = mode_node('observe');

my $store = RolloutStore->for_test('010_observe_cheap');
$store->create_extension_and_server($node);
$node->safe_psql(
	'postgres', qq{
CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'observed');
});
$node->safe_psql('postgres', "INSERT INTO t SELECT g, 'a' FROM generate_series(1, 500) g");
$node->safe_psql('postgres', "SELECT rollout_merge('t')");
$node->safe_psql('postgres', "INSERT INTO t SELECT g, 'b' FROM generate_series(400, 700) g");
$node->safe_psql('postgres', "SELECT rollout_flush('t')");
$node->safe_psql('postgres', "INSERT INTO t SELECT g, 'c' FROM generate_series(1, 10) g");

my $cheap_sql = q{SELECT row_count, base_rows, fragments, generations, generation_rows,
  unflushed_rows IS NULL, wal_entries, bytes > 0 FROM rollout_observe('t')};
my $cheap = $node->safe_psql('postgres', $cheap_sql);
# plain: the 10 unflushed rows are in a WAL entry whose footer says so;
# preload: they are in the memtable, which knows its row count without
# reading any object.  Either way row_count 811, unflushed_rows 10, one
# unflushed WAL entry.
is($cheap, '811|500|1|1|301|f|1|t',
	'cheap counts: 500 base rows + 301 generation rows + 10 unflushed rows, one unflushed entry');
is($node->safe_psql('postgres', q{SELECT unflushed_rows FROM rollout_observe('t')}),
	'10', 'cheap mode knows the 10 unflushed rows');
is($node->safe_psql('postgres',
		"SELECT exact_row_count, unflushed_rows, (SELECT count(*) FROM t) FROM rollout_observe('t', true)"),
	'700|10|700', 'the exact count equals count(*)');

# make every row group unreadable: listings still show the objects, any
# read of their data fails
my @data = grep { /\.(seg|wal)$/ } $store->list('observed/');
ok(@data >= 3, 'the store has data objects: ' . scalar(@data));

# The bytes of a segment's footer: its length (u32 before the trailing
# magic) plus those 8 bytes (docs/FORMAT.md).
sub footer_bytes
{
	my ($bytes) = @_;
	return unpack('V', substr($bytes, length($bytes) - 8, 4)) + 8;
}

# (a) every backend: garbage of the same size in place of each segment, and
# of each WAL entry but its 8-byte header and its footer
my %original = map { $_ => $store->get($_) } @data;
srand(20241010);
for my $key (@data)
{
	my $bytes = $original{$key};
	my ($head, $tail) = $key =~ /\.wal$/ ? (8, footer_bytes($bytes)) : (0, 0);
	my $garbage = join('', map { chr(int(rand(256))) } 1 .. (length($bytes) - $head - $tail));
	$store->put($key, substr($bytes, 0, $head) . $garbage . substr($bytes, length($bytes) - $tail));
}
is($node->safe_psql('postgres', $cheap_sql), $cheap,
	'cheap counts read no row group (every one is garbage)');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT * FROM rollout_observe('t', true)");
isnt($ret, 0, 'the exact count fails without readable data objects');
my $damaged = join('|', map { quotemeta } @data);
like($err, qr/ERROR:\s+segment "(?:$damaged)" is corrupt/,
	'with a clear error naming one: ' . (split /\n/, $err)[0]);
$store->put($_, $original{$_}) for @data;
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '700', 'restored');

# (b) file:// only: the data files lose their read permission.  A remote
# store has no per-object permission a test could take away (moto checks no
# credentials, Azure authorizes per account).
# Without preloading the cheap mode reads the unflushed WAL entries'
# footers, so only the segments lose the permission then.
if (!RolloutStore::remote())
{
	my @files = map { $store->path($_) }
	  grep { RolloutTest::preload() || /\.seg$/ } @data;
	chmod 0, @files;

	is($node->safe_psql('postgres', $cheap_sql), $cheap,
		'cheap counts read no unreadable object');
	($ret, $out, $err) = $node->psql('postgres', "SELECT * FROM rollout_observe('t', true)");
	isnt($ret, 0, 'the exact count fails without its data objects');
	like($err, qr/could not .*Permission denied/, 'with a clear error: ' . (split /\n/, $err)[0]);

	chmod 0600, @files;
	is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '700', 'restored');
}

$node->stop;
done_testing();
