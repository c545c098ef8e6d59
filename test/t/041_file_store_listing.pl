
# Copyright (c) rollout_fdw authors
#
# 041_file_store_listing.pl — a listing of the file:// store starts at the
# deepest directory its prefix names (objstore/file_store.c), not at the
# location's root, which holds every store of the server: a query of one
# store does not read a directory per store of the location three times
# over.  Proved by taking the read permission of the root away (it stays
# searchable): everything a table does still works, with the same rows as
# before, and only what must list the root (rollout_stores) fails, with a
# clear error.  Also a WAL listing longer than one page (continuation
# from the deep start), and, for the walk from the root, that a store-like
# folder in the temporary folder is not listed.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node try_sql with_min_gc_grace);
use Test::More;

# (root reads any directory; PostgreSQL refuses to run as root anyway)
plan skip_all => 'the test takes a directory\'s read permission away, which root ignores'
  if $> == 0;

my $node = mode_node('listing');
my $store = RolloutStore->for_test('041_file_store_listing', backend => 'file');
$store->create_extension_and_server($node);
my $root = $store->dir;

# Neighbours at the root: other stores and loose files, which the walk from
# the root had to read past for every listing.
$node->safe_psql('postgres', join("\n",
	'CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store \'listed\');',
	map { "CREATE FOREIGN TABLE n$_ (id int) SERVER s OPTIONS (store 'neighbour$_'); INSERT INTO n$_ VALUES ($_);" } 1 .. 20));
for my $i (1 .. 50)
{
	open(my $fh, '>', "$root/loose$i.txt") or die "loose$i.txt: $!";
	print $fh "not a store\n";
	close $fh;
}

# Base, a generation and a tail of more WAL entries than a listing page
# holds (1,000 keys): 1,100 one-row transactions.
$node->safe_psql('postgres', q{
INSERT INTO t SELECT i, 'base' FROM generate_series(1, 5000) i;
SELECT rollout_flush('t'); SELECT rollout_merge('t');
INSERT INTO t SELECT i, 'generation' FROM generate_series(4001, 6000) i;
SELECT rollout_flush('t');});
$node->safe_psql('postgres', join("\n",
	map { "INSERT INTO t VALUES (" . (10000 + $_) . ", 'tail');" } 1 .. 1100));

my $summary = q{SELECT count(*), count(DISTINCT id), sum(id), string_agg(DISTINCT v, ',' ORDER BY v) FROM t};
my $before = $node->safe_psql('postgres', $summary);
is($before, '7100|7100|' . (6000 * 6001 / 2 + 1100 * 10000 + 1100 * 1101 / 2) . '|base,generation,tail',
	'base, generation and a 1,100-entry WAL tail read as one table');

# The root is searchable but not readable from now on (and readable again
# when the test ends, however it ends, so that its directory can go).
chmod(0311, $root) or die "chmod $root: $!";
END { chmod(0700, $root) if defined $root; }
die "$root stays readable without read permission" if opendir(my $probe, $root);

is($node->safe_psql('postgres', $summary), $before, 'with the root unreadable: the same rows');
is($node->safe_psql('postgres', q{SELECT v FROM t WHERE id = 10777}), 'tail', 'a lookup in the WAL tail');
$node->safe_psql('postgres', q{INSERT INTO t VALUES (1, 'after'), (20000, 'after')});
is($node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE v = 'after'}), '2', 'an INSERT, read back');
my ($flushed) = $node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('t')});
cmp_ok($flushed, '>=', 2, 'rollout_flush (it flushed the tail)');
is($node->safe_psql('postgres', q{SELECT generations_merged > 0 FROM rollout_merge('t')}), 't', 'rollout_merge');
is($node->safe_psql('postgres', q{SELECT rows_written FROM rollout_compact('t', min_fragments => 1)}),
	'7101', 'rollout_compact: one version of each of the 7,101 keys');
is($node->safe_psql('postgres', q{SELECT exact_row_count FROM rollout_observe('t', exact => true)}), '7101', 'rollout_observe');
cmp_ok(with_min_gc_grace($node, 0, sub { $node->safe_psql('postgres', q{SELECT objects_deleted FROM rollout_gc('t', '0')}) }), '>', 0,
	'rollout_gc deletes what the compaction replaced');
is($node->safe_psql('postgres', q{SELECT count(*), sum(id) FROM t WHERE v <> 'after'}),
	'7099|' . (6000 * 6001 / 2 - 1 + 1100 * 10000 + 1100 * 1101 / 2), 'after all of it: the other rows unchanged');
is($node->safe_psql('postgres', q{SELECT sum(id) FROM n7}), '7', 'a neighbour store reads too');

# Only a listing of the whole location needs the root.
my ($ok, undef, $err) = try_sql($node, q{SELECT * FROM rollout_stores('s')});
ok(!$ok && $err =~ /could not open directory ".*" to list store ".*": Permission denied/,
	'rollout_stores, which lists the root, says it cannot read it')
  or diag($err);

chmod(0700, $root) or die "chmod $root: $!";
is($node->safe_psql('postgres', q{SELECT count(*) FROM rollout_stores('s')}), '21',
	'readable again: rollout_stores lists the 21 stores past the loose files');

# The walk from the root never lists the temporary folder.
mkdir("$root/_tmp");
mkdir("$root/_tmp/listed");
open(my $fh, '>', "$root/_tmp/listed/_store.json") or die $!;
print $fh "{}\n";
close $fh;
is($node->safe_psql('postgres', q{SELECT count(*) FROM rollout_stores('s')}), '21',
	'a store-like folder in the temporary folder is not listed');

done_testing();
