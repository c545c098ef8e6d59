
# Copyright (c) rollout_fdw authors
#
# 019_store_recreated.pl — a store deleted and created again under the same
# name is a new store: nothing of the old one (in particular rows the shared
# writer still holds in its memtable, or ingest segments it names) may leak
# into it.  Runs in both modes (ROLLOUT_TEST_PRELOAD decides).

use strict;
use warnings;

use File::Path qw(rmtree);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;

# preload: no sweeper (RolloutTest::configure_node), nothing may flush the
# old rows behind the test's back
my $node = mode_node('recreated');

my $store = RolloutStore->for_test('019_store_recreated', backend => 'file');
$store->create_extension_and_server($node);

for my $round (1 .. 3)
{
	$node->safe_psql(
		'postgres', qq{
CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'again');
SET rollout_fdw.ingest_threshold = '64kB';
INSERT INTO t SELECT g, 'round $round big' FROM generate_series(1, 3000) g;
INSERT INTO t SELECT g, 'round $round small' FROM generate_series(5001, 5010) g;
});
	is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
		'3010', "round $round: the store holds this round's rows");
	is($node->safe_psql('postgres', "SELECT count(*) FROM t WHERE v NOT LIKE 'round $round %'"),
		'0', "round $round: no row of an earlier round");

	# drop the table and delete the store while the cluster runs
	$node->safe_psql('postgres', 'DROP FOREIGN TABLE t');
	rmtree($store->path('again'));
}

$node->safe_psql('postgres',
	"CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'again')");
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '0', 'a recreated store starts empty');
$node->safe_psql('postgres', "INSERT INTO t VALUES (1, 'fresh')");
is($node->safe_psql('postgres', "SELECT rows_flushed FROM rollout_flush('t')"),
	'1', 'its first flush seals only its own row');
is($node->safe_psql('postgres', 'SELECT id, v FROM t'), '1|fresh', 'and reads only it');
is($node->safe_psql('postgres', "SELECT exact_row_count, base_rows + generation_rows FROM rollout_observe('t', true)"),
	'1|1', 'rollout_observe agrees');

$node->stop;
done_testing();
