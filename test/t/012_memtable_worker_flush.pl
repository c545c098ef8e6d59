
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 012_memtable_worker_flush.pl — read-your-writes from the memtable and
# flushes by the background worker (DESIGN.md §6.4, §9; issue 4).
#
# Preloaded (shared-memory writer).  With rollout_fdw.flush_interval = 0:
# rows committed by one session are visible to another at once, while no
# generation exists and rollout_stat_stores counts them in the memtable.
# With flush_interval = 1 (reloaded) the sweeper seals them into a generation
# within a few seconds, with no user action, and the memtable empties.  After
# an immediate stop and a start, every committed row (flushed or not) is
# still there, and the sweeper flushes the unflushed WAL tail unprompted.
# The first commit after the restart claims epoch 2 with a fence marker.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node shard_of poll_until store_stats observe);
use Test::More;

my $node = writer_node('memtable', 'rollout_fdw.merge_after_generations' => 8);

my $store = RolloutStore->for_test('012_memtable_worker_flush', backend => 'file');
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t (id text, v int, payload jsonb) SERVER s OPTIONS (store 'mem', key 'id');});
my $shard = shard_of($node);
my $wal = "mem/shards/$shard/wal";
my $manifests = "mem/shards/$shard/_manifest";

sub stat_row { return store_stats($node, 'mem', @_); }

sub observe_t
{
	return observe($node, 't', exact => 0,
		columns => [qw(generations generation_rows unflushed_rows wal_entries writer_epoch)]);
}

my $state_sql = q{SELECT count(*), count(DISTINCT id), coalesce(sum(v), 0) FROM t};

# ---------------------------------------------------------------------------
# 1. Visible at once from another session, held in the memtable.
#
# 10 transactions of 10 rows: k000..k099, v = i.
for my $b (0 .. 9)
{
	my ($lo, $hi) = ($b * 10, $b * 10 + 9);
	$node->safe_psql('postgres',
		qq{INSERT INTO t SELECT 'k' || lpad(i::text, 3, '0'), i, jsonb_build_object('i', i) FROM generate_series($lo, $hi) i});
}
# each safe_psql is its own session: this reader did not write anything
is($node->safe_psql('postgres', $state_sql), '100|100|4950',
	'another session sees all 100 committed rows at once');
is(stat_row(qw(memtable_rows transactions_committed rows_appended writer_epoch shared_writer)),
	'100|10|100|1|t',
	'rollout_stat_stores: 100 rows in the memtable, 10 transactions, epoch 1, shared writer');

# give the sweeper several passes: with flush_interval = 0 it must not flush
sleep(3);
my $o = observe_t();
is("$o->{generations}|$o->{generation_rows}", '0|0',
	'flush_interval = 0: no generation after 3 s (rollout_observe)');
my $m = $store->newest_manifest($manifests);
is(scalar(@{ $m->{generations} }), 0, 'the shard manifest lists no generation');
is($m->{replay_after}, 0, 'replay_after is still 0');
ok(!(my @gen = $store->list("mem/shards/$shard/gen/")), 'no generation object exists');
is(stat_row(qw(memtable_rows flushes)), '100|0', 'the memtable still holds the 100 rows; no flush');

# the first WAL entry is the fence of epoch 1 (0 rows), the commits follow
my @pos = $store->wal_positions($wal);
is_deeply(\@pos, [ 1 .. scalar(@pos) ], 'WAL positions are contiguous from 1');
my $fence = $store->wal_entry($wal, 1);
is($fence && "$fence->{kind}|$fence->{epoch}|$fence->{transactions}", 'fence|1|0',
	'position 1 is the fence marker of epoch 1');
my $wal_xacts = 0;
$wal_xacts += ($store->wal_entry($wal, $_) // {})->{transactions} // 0 for @pos[ 1 .. $#pos ];
is($wal_xacts, 10, 'the WAL entries after the fence carry the 10 transactions');

# ---------------------------------------------------------------------------
# 2. flush_interval = 1: the worker flushes within a few seconds, unprompted.
my $reloaded_at = time;
$node->safe_psql('postgres',
	q{ALTER SYSTEM SET rollout_fdw.flush_interval = 1; SELECT pg_reload_conf();});
my $took = poll_until($node, q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 'mem'}, '0', 20,
	$reloaded_at);
ok(defined $took, 'the memtable empties with no user action');
cmp_ok($took // 99, '<', 6, sprintf('... within a few seconds (%.1f s)', $took // -1));
$o = observe_t();
is("$o->{generations}|$o->{generation_rows}|$o->{unflushed_rows}", '1|100|0',
	'rollout_observe: one generation of 100 rows, nothing unflushed');
$m = $store->newest_manifest($manifests);
is($m->{replay_after}, $pos[-1], "the manifest sealed up to the last WAL position ($pos[-1])");
is(scalar(@{ $m->{generations} }), 1, 'the manifest lists one generation');
is($m->{generations}[0]{rows}, 100, 'holding the 100 rows');
ok($store->exists($m->{generations}[0]{file}), 'the generation object exists');
is(stat_row(qw(memtable_rows memtable_batches flushes)), '0|0|1',
	'the view: memtable empty, one flush');
is($node->safe_psql('postgres', $state_sql), '100|100|4950', 'the rows read the same from the generation');

# ---------------------------------------------------------------------------
# 3. Immediate stop with unflushed rows; the worker flushes them after start.
#
# flush_interval back to 0 for the running server; the next start reads 1
# from postgresql.auto.conf.
$node->safe_psql('postgres',
	q{ALTER SYSTEM SET rollout_fdw.flush_interval = 0; SELECT pg_reload_conf();});
# let the sweeper take the new setting (it reloads on its next pass)
sleep(2);
my $flushes_before = stat_row('flushes');
# 5 transactions of 10 rows (u00..u49, v = 1000 + i) and an upsert of k007
for my $b (0 .. 4)
{
	my ($lo, $hi) = ($b * 10, $b * 10 + 9);
	$node->safe_psql('postgres',
		qq{INSERT INTO t SELECT 'u' || lpad(i::text, 2, '0'), 1000 + i, '{}' FROM generate_series($lo, $hi) i});
}
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('k007', 70007, '{"v": 2}')});
my $expected = '150|150|' . (4950 - 7 + 70007 + 50 * 1000 + 49 * 50 / 2);
is($node->safe_psql('postgres', $state_sql), $expected, 'before the crash: 150 rows, k007 upserted');
sleep(2);
is(stat_row(qw(memtable_rows flushes)), "51|$flushes_before",
	'51 rows wait in the memtable; flush_interval = 0 flushed nothing');
@pos = $store->wal_positions($wal);
my $tip = $pos[-1];
cmp_ok($tip, '>', $store->newest_manifest($manifests)->{replay_after}, "WAL entries up to $tip are unflushed");

$node->safe_psql('postgres', q{ALTER SYSTEM SET rollout_fdw.flush_interval = 1});
$node->stop('immediate');
$node->start;
my $started_at = time;

# Nobody writes now: the reads come from the store's WAL tail (or the
# worker's generation, if it was quicker), never from a claim.
is($node->safe_psql('postgres', $state_sql), $expected,
	'after the immediate stop every committed row is there, exactly once');
is($node->safe_psql('postgres', q{SELECT v FROM t WHERE id = 'k007'}), '70007',
	'the newest version of k007 survived');

$took = poll_until($node, q{SELECT wal_entries FROM rollout_observe('t')}, '0', 20, $started_at);
ok(defined $took, 'the worker flushed the WAL tail unprompted after the restart');
cmp_ok($took // 99, '<', 8, sprintf('... within a few seconds of the start (%.1f s)', $took // -1));
$m = $store->newest_manifest($manifests);
is($m->{replay_after}, $tip, "replay_after advanced to the last WAL position $tip");
is(scalar(@{ $m->{generations} }), 2, 'a second generation holds the replayed tail');
is($m->{generations}[1]{rows}, 51, '... with its 51 rows');
is($m->{writer_epoch}, 1, 'the flush did not claim the shard (epoch still 1)');
is($node->safe_psql('postgres', $state_sql), $expected, 'after the worker\'s flush: still exact');
is(stat_row(qw(flushes memtable_rows)), '1|0', 'the view counts the worker\'s flush after restart');

# The first commit after the restart claims epoch 2 and fences at tip + 1.
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('after', 5, '{}')});
$fence = $store->wal_entry($wal, $tip + 1);
is($fence && "$fence->{kind}|$fence->{epoch}|$fence->{transactions}", 'fence|2|0',
	'the first commit after the restart wrote the fence of epoch 2 at tip + 1');
# flush_interval = 1: the sweeper may have flushed the row already, which
# moves it from memtable_rows to a flush
my ($epoch_now, $tip_now, $memtable_rows, $flushes) =
  split /\|/, stat_row(qw(writer_epoch wal_tip memtable_rows flushes));
is("$epoch_now|$tip_now|" . ($memtable_rows + $flushes - 1), '2|' . ($tip + 2) . '|1',
	"the view: epoch 2, the commit at tip + 2, one row in the memtable or flushed ($memtable_rows|$flushes)");
my ($c, $d, $s) = split /\|/, $expected;
is($node->safe_psql('postgres', $state_sql), ($c + 1) . '|' . ($d + 1) . '|' . ($s + 5),
	'the new row joins the others');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC|rollout_fdw sweeper: store/,
	'no crash and no sweeper error');

$node->stop;
done_testing();
