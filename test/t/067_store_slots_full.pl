
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its cluster preloads the writer in every run; scripts/test.sh)
#
# 067_store_slots_full.pl — more stores than rollout_fdw.max_stores: the
# stores without a shared-memory slot are written and read through the
# direct path, lose nothing, and say so (docs/WRITER.md, max_stores).
#
# A store that finds every slot taken, and none idle long enough to take over
# (core/shared_store.c; test 068 has that), commits without group commit and
# memtable, each transaction its own WAL entry, with a WARNING once per
# backend.  Preloaded
# with max_stores = 2 and four stores written, sequentially and from four
# sessions at once: exactly two slots exist, the WARNING names the setting,
# every store reads exact before and after its flush, and after a crash
# (immediate stop) every committed row is there once.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node run_concurrently);
use Test::More;

my $node = writer_node('slots_full', 'rollout_fdw.max_stores' => 2,
	'rollout_fdw.flush_interval' => 3600, 'rollout_fdw.memtable_size' => '8MB');
my $store = RolloutStore->for_test('067_store_slots_full', backend => 'file');
$store->create_extension_and_server($node);
my @stores = map { "s$_" } 1 .. 4;
$node->safe_psql('postgres',
	join('', map { "CREATE FOREIGN TABLE $_ (id int, v int) SERVER s OPTIONS (store '$_', key 'id');\n" } @stores));

# 25 one-row transactions into each store, store after store
my $offset = -s $node->logfile;
my ($rc, $out, $err) = $node->psql('postgres',
	join('', map { my $t = $_; map { "INSERT INTO $t VALUES ($_, $_);\n" } 1 .. 25 } @stores));
is($rc, 0, 'every commit succeeds') or diag($err);
like($err, qr/WARNING:  all 2 rollout_fdw shared store slots are in use.*\n.*DETAIL:  Store "s\d" is written without group commit and memtable.*\n.*HINT:  Raise rollout_fdw.max_stores/,
	'a store without a slot says so, and which setting to raise');
is(scalar(() = $err =~ /WARNING/g), 1, 'once per backend');
is($node->safe_psql('postgres', q{SELECT count(*) FROM rollout_stat_stores}), '2',
	'two slots, as many as max_stores');

# then five sessions at once, one per store and a second one writing the
# same keys of s1 (the newer version of each key wins; the values are equal)
my ($failed, @errors) = run_concurrently($node,
	[ map { my $t = $_; join('', map { "INSERT INTO $t VALUES ($_, $_);" } 26 .. 60) } @stores, 's1' ]);
is($failed, 0, 'five sessions commit at once, with and without slots') or diag("@errors");

sub check_all
{
	my ($when) = @_;
	for my $t (@stores)
	{
		is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT id), sum(v) FROM $t"),
			'60|60|1830', "$t: every row once, $when");
	}
}
check_all('before a flush');
for my $t (@stores)
{
	($rc, $out, $err) = $node->psql('postgres', "SELECT rollout_flush('$t')");
	is($rc, 0, "$t flushes") or diag($err);
}
check_all('after each store is flushed');

$node->safe_psql('postgres',
	join('', map { my $t = $_; map { "INSERT INTO $t VALUES ($_, $_);\n" } 61 .. 70 } @stores));

# A transaction larger than the memtable could take (a quarter of its 70 %
# of 8 MB) is staged as an ingest segment also by a store without a slot,
# which may get one before it commits; before, only a store with a slot
# staged it, and one that got a slot in between waited for room forever.
my @slotless = grep { my $t = $_; !grep { $_ eq $t } split /\n/,
	  $node->safe_psql('postgres', 'SELECT store FROM rollout_stat_stores') } @stores;
my $big = $slotless[0];
$node->safe_psql('postgres',
	"INSERT INTO $big SELECT g, g FROM generate_series(1000001, 1200000) g");
my @staged = grep { /\.seg$/ } $store->objects_in("$big/ingest");
is(scalar(@staged), 1, "a large transaction into slotless $big is staged as one ingest segment");
$node->safe_psql('postgres', "DELETE FROM $big WHERE id > 1000000");
$node->stop('immediate');
$node->start;
for my $t (@stores)
{
	is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT id), sum(v) FROM $t"),
		'70|70|2485', "$t: every committed row once after a crash");
}
unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC/, 'no backend died');
$node->stop;
done_testing();
