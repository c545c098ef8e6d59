
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its cluster preloads the writer in every run; scripts/test.sh)
#
# 057_memtable_eviction.pl — a memtable full of stores nobody flushes does
# not stop the cluster's commits (issue: deployment safety).
#
# The memtable is shared by every store of the cluster, and only the sweeper
# (for the tables it finds) or a committer of the same store flushes one.  A
# store whose tables were dropped with rows in the memtable is flushed by
# nobody: a role allowed to create a server could fill the memtable that way,
# and every later commit of every store, in every database, waited for room
# until a restart.  Preloaded with a 1 MB memtable (700 kB usable) and no
# timed flush, four stores get about 160 kB each (a committer flushes its own store past a
# quarter of the memtable) through tables dropped in the same transactions
# as their inserts.  Then a commit to another store, which does not fit,
# evicts the idle stores' batches after MEMTABLE_EVICT_IDLE_S (10 s) and
# commits.  The evicted rows are durable in their WAL: new tables of the
# stores read all of them, a flush seals them from the WAL, and the next
# commit claims the shard again.  Then a writer fenced by a twin cluster,
# holding most of the memtable, has its batches evicted at once.  Last, a
# store whose flush is held keeps its batches, and a commit to another store
# fails after rollout_fdw.memtable_wait_timeout instead of waiting for good.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(poll_until writer_node wait_for_fault release_faults hold_faults);
use Test::More;

my $node = writer_node('evict', 'rollout_fdw.memtable_size' => '1MB');
my $store = RolloutStore->for_test('057_memtable_eviction', backend => 'file');
$store->create_extension_and_server($node);

# four stores, each a transaction of 150 rows of 1 kB through a table it drops
for my $x (1 .. 4)
{
	$node->safe_psql('postgres', qq{
CREATE FOREIGN TABLE a$x (id text, v int, payload text) SERVER s OPTIONS (store 'ev_$x', key 'id');
BEGIN;
INSERT INTO a$x SELECT '$x-' || r, r, repeat(md5('$x-' || r), 32) FROM generate_series(1, 150) r;
DROP FOREIGN TABLE a$x;
COMMIT;});
}
my $held = $node->safe_psql('postgres', q{SELECT sum(memtable_bytes) FROM rollout_stat_stores WHERE store ~ '^ev_[0-9]$'});
cmp_ok($held, '>', 600 * 1024, "the dropped tables' stores hold most of the memtable ($held bytes)")
  or diag($node->safe_psql('postgres', q{SELECT store, memtable_bytes, flushes FROM rollout_stat_stores}));

$node->safe_psql('postgres', q{CREATE FOREIGN TABLE b (id text, v int, payload text) SERVER s OPTIONS (store 'ev_b', key 'id');});
my $offset = -s $node->logfile;
my $t0 = time;
my $commit = PsqlScript->start($node, name => 'b', sql =>
	  q{INSERT INTO b SELECT 'b-' || r, r, repeat(md5('b-' || r), 32) FROM generate_series(1, 150) r;});
my ($ret, $out, $err) = $commit->finish;
my $took = time - $t0;
is($ret, 0, sprintf('a commit to another store that does not fit commits (after %.1f s)', $took)) or diag($err);
# (only the stores idle for 10 s go, and only as many evictions happen as
# the commit needs: on a slow machine the stores written last may stay)
my @evicted = slurp_file($node->logfile, $offset) =~
  /evicted \d+ bytes of shard "[^"]+" of store "(ev_\d)" from the memtable to make room/g;
ok(scalar(@evicted) >= 1, 'the log says which stores were evicted (' . join(', ', @evicted) . ')');
is($node->safe_psql('postgres',
		q{SELECT string_agg(store, ', ' ORDER BY store) FROM rollout_stat_stores WHERE store ~ '^ev_[0-9]$' AND memtable_bytes = 0}),
	join(', ', sort @evicted), 'those stores hold nothing in the memtable any more');
cmp_ok($node->safe_psql('postgres', q{SELECT backpressure_waits FROM rollout_stat_stores WHERE store = 'ev_b'}),
	'>', 0, 'the commit waited for room first');

# the evicted rows: read from the WAL, flushed from there, and the store
# writable again
$node->safe_psql('postgres', join('', map {
	"CREATE FOREIGN TABLE a$_ (id text, v int, payload text) SERVER s OPTIONS (store 'ev_$_', key 'id');" } 1 .. 4));
my $all = join(' UNION ALL ', map { "SELECT * FROM a$_" } 1 .. 4);
is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT id), sum(length(payload)) FROM ($all) r"),
	'600|600|' . (600 * 1024), 'new tables of the evicted stores read every row they committed');
is($node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('a1')}), '150',
	'a flush seals them from the WAL');
$node->safe_psql('postgres', q{INSERT INTO a1 VALUES ('after', 1, 'x')});
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id) FROM a1}), '151|151',
	'and the store takes commits again');
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id) FROM b}), '150|150',
	'the other store has its rows');

# A writer that lost its claim keeps batches nobody reads any more, and no
# flush takes them; no commit of its store may ever come to claim it again.
# Here it is fenced by a second cluster writing the same shard (a broken
# pipeline leaves it the same way).  Before, eviction took only claimed
# writers' batches, so a memtable full of them made every commit of the
# cluster wait until a restart; now they go at the first eviction, without
# waiting for MEMTABLE_EVICT_IDLE_S.
$node->safe_psql('postgres', join('', map { "SELECT rollout_flush('$_');" } qw(a1 a2 a3 a4 b)));
my $shard = $node->safe_psql('postgres', q{SELECT shard FROM rollout_stat_stores WHERE store = 'ev_b'});
for my $x (1 .. 4)
{
	$node->safe_psql('postgres', qq{
CREATE FOREIGN TABLE f (id text, v int, payload text) SERVER s OPTIONS (store 'ev_fenced', key 'id');
BEGIN;
INSERT INTO f SELECT 'f$x-' || r, r, repeat(md5('f$x-' || r), 32) FROM generate_series(1, 150) r;
DROP FOREIGN TABLE f;
COMMIT;});
}
my $twin = writer_node('evict_twin', 'rollout_fdw.shard_id' => $shard);
$store->create_extension_and_server($twin);
$twin->safe_psql('postgres', q{
CREATE FOREIGN TABLE f (id text, v int, payload text) SERVER s OPTIONS (store 'ev_fenced', key 'id');
INSERT INTO f VALUES ('twin', 1, 'x');});
($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
CREATE FOREIGN TABLE f (id text, v int, payload text) SERVER s OPTIONS (store 'ev_fenced', key 'id');
INSERT INTO f VALUES ('fenced', 1, 'x');
DROP FOREIGN TABLE f;
COMMIT;});
like($err, qr/was taken over by another writer/, "the first cluster's next commit to the store meets the twin's fence");
my $fenced_bytes = $node->safe_psql('postgres', q{SELECT memtable_bytes FROM rollout_stat_stores WHERE store = 'ev_fenced'});
cmp_ok($fenced_bytes, '>', 600 * 1024,
	"its writer, unclaimed now, still holds most of the memtable ($fenced_bytes bytes)");

$node->safe_psql('postgres', q{CREATE FOREIGN TABLE c (id text, v int, payload text) SERVER s OPTIONS (store 'ev_c', key 'id');});
$offset = -s $node->logfile;
$t0 = time;
$commit = PsqlScript->start($node, name => 'c', sql =>
	  q{SET application_name = 'fill_c';
INSERT INTO c SELECT 'c-' || r, r, repeat(md5('c-' || r), 32) FROM generate_series(1, 150) r;});
my $waited = poll_until($node,
	q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'fill_c'}, '0', 30, $t0);
ok(defined $waited, sprintf('a commit to another store that does not fit commits (after %.1f s)', $waited // 30))
  or $node->safe_psql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'fill_c'});
($ret, $out, $err) = $commit->finish;
is($ret, 0, '... without an error') or diag($err);
like(slurp_file($node->logfile, $offset),
	qr/evicted \d+ bytes of shard "[^"]+" of store "ev_fenced" from the memtable to make room/,
	"the unclaimed writer's batches were evicted");
is($node->safe_psql('postgres', q{SELECT memtable_bytes FROM rollout_stat_stores WHERE store = 'ev_fenced'}),
	'0', '... and hold nothing any more');
$twin->safe_psql('postgres', q{SELECT rollout_flush('f')});
is($twin->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE id = 'fenced') FROM f}),
	'601|601|0', 'every row acknowledged to either cluster is in the store, and not the refused one');
$twin->stop;

# A store that stays busy is never evicted: here its flush is held, as an
# object store that does not answer (an endpoint its server's owner chose,
# any role with USAGE on the wrapper) would hold it for as long as its
# request_timeout says.  A commit to another store that does not fit waits
# for rollout_fdw.memtable_wait_timeout, then fails naming that store, having
# written nothing (statement_timeout does not reach a commit: before, it
# waited until that flush ended).
$node->safe_psql('postgres', q{SELECT rollout_flush('c');
CREATE FOREIGN TABLE busy (id text, v int, payload text) SERVER s OPTIONS (store 'ev_busy', key 'id');
CREATE FOREIGN TABLE d (id text, v int, payload text) SERVER s OPTIONS (store 'ev_d', key 'id');
INSERT INTO busy VALUES ('first', 1, 'x');});
$offset = -s $node->logfile;
my $flush = PsqlScript->start($node, name => 'busy_flush', sql =>
	  q{SET rollout_fdw.fail_at = 'flush.after_manifest_read:hold=busy'; SELECT rollout_flush('busy');});
wait_for_fault($node, 'flush.after_manifest_read', $offset);
for my $x (1 .. 8)
{
	last if $node->safe_psql('postgres', q{SELECT sum(memtable_bytes) FROM rollout_stat_stores}) > 560 * 1024;
	$node->safe_psql('postgres',
		qq{INSERT INTO busy SELECT 'busy$x-' || r, r, repeat(md5('busy$x-' || r), 32) FROM generate_series(1, 100) r;});
}
my $busy_bytes = $node->safe_psql('postgres', q{SELECT memtable_bytes FROM rollout_stat_stores WHERE store = 'ev_busy'});
cmp_ok($busy_bytes, '>', 500 * 1024, "the store being flushed holds most of the memtable ($busy_bytes bytes)");
($ret, $out, $err) = $node->psql('postgres', q{
SET rollout_fdw.memtable_wait_timeout = '3s';
SET statement_timeout = '1s';
INSERT INTO d SELECT 'd-' || r, r, repeat(md5('d-' || r), 32) FROM generate_series(1, 150) r;},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  53400: the rollout_fdw memtable had no room for a transaction of \d+ bytes for 3000 ms/,
	'a commit to another store that does not fit fails after memtable_wait_timeout, not statement_timeout')
  or diag($err);
like($err, qr/DETAIL:  Store "ev_busy" holds \d+ bytes of it and its flush has not finished\. Nothing of this transaction was written\./,
	'... naming the store that holds the memtable');
is($node->safe_psql('postgres', q{SELECT count(*) FROM d}), '0', '... and nothing of it is visible');
release_faults($node, 'busy');
($ret, $out, $err) = $flush->finish;
is($ret, 0, 'the held flush finishes once released') or diag($err);
hold_faults($node, 'busy');
$node->safe_psql('postgres', q{INSERT INTO d SELECT 'd-' || r, r, repeat(md5('d-' || r), 32) FROM generate_series(1, 150) r;});
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id) FROM d}), '150|150',
	'then the same commit fits');
is($node->safe_psql('postgres', q{SHOW rollout_fdw.memtable_wait_timeout}), '2min', 'memtable_wait_timeout is 2 minutes by default');

unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC/, 'no backend crashed');
$node->stop;
done_testing();
