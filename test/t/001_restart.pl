
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 001_restart.pl — durability across restarts (DESIGN.md §6.1, §11.1).
#
# Committed rows, flushed into a generation or still in the WAL tail, survive a
# clean stop/start and an immediate (crash) stop; the newest version of an
# upserted key survives; an aborted transaction (ROLLBACK, an error, a rolled
# back savepoint) leaves nothing behind, not even a WAL entry; a successful
# commit leaves no scratch file behind.  Runs against every backend
# (test/perl/RolloutStore.pm).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(preload mode_node shard_of);
use Test::More;

# Positions and generation numbers differ by design between the two modes
# (test/perl/RolloutTest.pm).  With the shared-memory writer (preload) the
# first commit after each startup claims the shard: it flushes the durable
# WAL tail into a generation (the replay), then writes a fence marker at the
# next position, and the commit itself lands one position later.  This test
# commits from one session at a time, so every group commit carries exactly
# one transaction and positions otherwise advance as in plain mode.
my $pre = preload();

my $node = mode_node('restart');

my $store = RolloutStore->for_test('001_restart');

$store->create_extension_and_server($node);
$node->safe_psql(
	'postgres', qq{
CREATE FOREIGN TABLE t (id text, v int, payload jsonb) SERVER s OPTIONS (store 'durable', key 'id');
});

my $shard = shard_of($node);
my $wal_folder = "durable/shards/$shard/wal";

# A fingerprint of the whole table: every column of every row, in key order.
my $fingerprint_sql = q{
SELECT count(*), count(DISTINCT id), coalesce(sum(v), 0),
       md5(coalesce(string_agg(id || ':' || coalesce(v::text, 'null') || ':' || coalesce(payload::text, 'null'), ',' ORDER BY id), ''))
FROM t};

# "position:kind:transactions" of each WAL entry, to tell fence markers from
# entries with rows.
sub wal_kinds
{
	return map {
		my $m = $store->wal_entry($wal_folder, $_);
		defined $m ? "$_:$m->{kind}:$m->{transactions}" : "$_:unreadable"
	} $store->wal_positions($wal_folder);
}

# The newest shard manifest's generations as "number:first-last:rows".
sub generations
{
	my $doc = $store->newest_manifest("durable/shards/$shard/_manifest")
	  or die 'no shard manifest';
	return map { "$_->{number}:$_->{first_position}-$_->{last_position}:$_->{rows}" }
	  sort { $a->{number} <=> $b->{number} } @{ $doc->{generations} };
}

# Scratch files of the extension (segments being built) in pgsql_tmp, on
# the node whatever the backend, and the store's leftovers of unfinished
# writes (RolloutStore::scratch: the file:// store's <location>/_tmp, S3
# multipart uploads, Azure uncommitted blobs).
sub leftover_scratch_files
{
	my @left;
	my $tmp = $node->data_dir . '/base/pgsql_tmp';
	if (opendir(my $dh, $tmp))
	{
		push @left, map { "$tmp/$_" } grep { /rollout/ } readdir($dh);
		closedir($dh);
	}
	push @left, map { "store scratch: $_" } $store->scratch;
	return @left;
}

# ---------------------------------------------------------------------------
# Rows that will be flushed into a generation: one multi-row transaction of
# 100 rows (k000..k099, v = i) and 20 single-row transactions (s00..s19, v = 1000 + i).
$node->safe_psql('postgres',
	q{INSERT INTO t SELECT 'k' || lpad(i::text, 3, '0'), i, jsonb_build_object('i', i, 'flushed', true) FROM generate_series(0, 99) i});
$node->safe_psql('postgres',
	join('', map { "INSERT INTO t VALUES ('s" . sprintf('%02d', $_) . "', " . (1000 + $_) . ", '{\"single\": $_}');\n" } 0 .. 19));

# plain: positions 1..21.  preload: the first commit claimed the shard (empty
# WAL, nothing to replay), so 1 is the fence marker (no rows, 0 transactions)
# and the 21 transactions are 2..22.
is_deeply([ wal_kinds() ],
	$pre
	? [ '1:fence:0', map { "$_:wal:1" } 2 .. 22 ]
	: [ map { "$_:wal:1" } 1 .. 21 ],
	$pre
	? '21 committed transactions made WAL positions 2..22 after the claim\'s fence at 1'
	: '21 committed transactions made WAL positions 1..21');
is_deeply([ leftover_scratch_files() ], [],
	'no scratch files are left after successful commits');

my $flushed = $node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t')});
is($flushed, '120|1', 'rollout_flush sealed 120 rows into generation 1');
is_deeply([ leftover_scratch_files() ], [], 'no scratch files are left after a flush');

# ---------------------------------------------------------------------------
# Unflushed rows (WAL tail): 30 rows in 3 transactions, then upserts of a
# flushed key (k005) and of an unflushed key (u00), each twice.
for my $b (0 .. 2)
{
	my $lo = $b * 10;
	my $hi = $lo + 9;
	$node->safe_psql('postgres',
		qq{INSERT INTO t SELECT 'u' || lpad(i::text, 2, '0'), 2000 + i, jsonb_build_object('i', i, 'flushed', false) FROM generate_series($lo, $hi) i});
}
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('k005', 50005, '{"version": 2}')});
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('k005', 500005, '{"version": 3}')});
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('u00', 70000, '{"version": 2}')});
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('u00', 700000, '{"version": 3}')});

# one position later in preload (the fence at 1)
my $p0 = $pre ? 1 : 0;
is_deeply([ $store->wal_positions($wal_folder) ], [ 1 .. 28 + $p0 ],
	'seven more commits made positions ' . (22 + $p0) . '..' . (28 + $p0));

# ---------------------------------------------------------------------------
# Aborted transactions leave nothing: ROLLBACK, a failing statement after the
# insert, a rolled-back savepoint (its rows only), and a multi-row ROLLBACK.
$node->safe_psql('postgres',
	q{BEGIN; INSERT INTO t VALUES ('aborted1', 1, '{}'); ROLLBACK;});
my ($ret, $out, $err) = $node->psql('postgres',
	q{BEGIN; INSERT INTO t VALUES ('aborted2', 1, '{}'); SELECT 1/0; COMMIT;});
isnt($ret, 0, 'a transaction with a failing statement fails');
like($err, qr/division by zero/, '... with the expected error');
$node->safe_psql('postgres',
	q{BEGIN; INSERT INTO t VALUES ('kept-sp', 42, '{"sp": "outer"}'); SAVEPOINT sp; INSERT INTO t VALUES ('aborted-sp', 1, '{}'); ROLLBACK TO SAVEPOINT sp; COMMIT;});
$node->safe_psql('postgres',
	q{BEGIN; INSERT INTO t SELECT 'aborted-multi-' || i, i, '{}' FROM generate_series(1, 500) i; ROLLBACK;});
# an INSERT that fails in autocommit mode (type error after some rows)
($ret, $out, $err) = $node->psql('postgres',
	q{INSERT INTO t SELECT 'aborted-cast-' || i, (CASE WHEN i < 5 THEN i::text ELSE 'x' END)::int, '{}' FROM generate_series(1, 10) i});
isnt($ret, 0, 'an INSERT failing halfway fails');

is_deeply([ $store->wal_positions($wal_folder) ], [ 1 .. 29 + $p0 ],
	'aborted transactions wrote no WAL entry; the savepoint transaction wrote one');
is_deeply([ leftover_scratch_files() ], [],
	'no scratch files are left after aborts and commits');

# expected content
# 100 k rows: sum 0..99 = 4950, but k005 replaced: 4950 - 5 + 500005
# 20 s rows: sum 1000..1019 = 20190
# 30 u rows: sum 2000..2029 = 60435, but u00 replaced: 60435 - 2000 + 700000
# kept-sp: 42
my $expected_count = 100 + 20 + 30 + 1;
my $expected_sum = (4950 - 5 + 500005) + 20190 + (60435 - 2000 + 700000) + 42;

my $before = $node->safe_psql('postgres', $fingerprint_sql);
my ($count, $distinct, $sum) = split /\|/, $before;
is($count, $expected_count, "count(*) is $expected_count before restart");
is($distinct, $expected_count, 'no key is returned twice');
is($sum, $expected_sum, "sum(v) is $expected_sum before restart");
is( $node->safe_psql('postgres',
		q{SELECT v, payload->>'version' FROM t WHERE id IN ('k005', 'u00') ORDER BY id}),
	"500005|3\n700000|3",
	'the newest versions of upserted keys win (flushed and unflushed)');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM t WHERE id LIKE 'aborted%'}),
	'0', 'no row of an aborted transaction or savepoint is visible');

# ---------------------------------------------------------------------------
# Clean stop and start.
$node->stop;
$node->start;
is($node->safe_psql('postgres', $fingerprint_sql), $before,
	'after stop/start every row, column and version is as before');
is( $node->safe_psql('postgres',
		q{SELECT v, payload->>'version' FROM t WHERE id IN ('k005', 'u00') ORDER BY id}),
	"500005|3\n700000|3",
	'after stop/start the newest upserted versions still win');

# ---------------------------------------------------------------------------
# Immediate stop (no shutdown checkpoint, no clean exit of backends): commit
# more rows first, then crash.
$node->safe_psql('postgres',
	q{INSERT INTO t SELECT 'c' || i, 3000 + i, '{"crash": true}' FROM generate_series(1, 25) i});
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('k006', 600006, '{"version": 2}')});
$expected_count += 25;
$expected_sum += (3001 + 3025) * 25 / 2 + 600006 - 6;

# Transactions whose rows spill from memory to a temporary file (a 64 kB
# buffer): one that commits 3000 rows, one that rolls back a savepoint holding
# 2000 of its rows, one that aborts.  Each commit is one WAL entry.
my $spill = q{SET rollout_fdw.transaction_buffer_size = 64;};
$node->safe_psql('postgres', $spill
	  . q{INSERT INTO t SELECT 'big-' || i, 1, jsonb_build_object('pad', repeat('x', 100), 'i', i) FROM generate_series(1, 3000) i;});
$node->safe_psql('postgres', $spill . q{
BEGIN;
INSERT INTO t SELECT 'spk-' || i, 1, jsonb_build_object('pad', repeat('y', 100)) FROM generate_series(1, 1000) i;
SAVEPOINT a;
INSERT INTO t SELECT 'aborted-spd-' || i, 1, jsonb_build_object('pad', repeat('z', 100)) FROM generate_series(1, 2000) i;
ROLLBACK TO SAVEPOINT a;
INSERT INTO t SELECT 'spk2-' || i, 1, jsonb_build_object('pad', repeat('w', 100)) FROM generate_series(1, 500) i;
COMMIT;});
$node->safe_psql('postgres', $spill . q{
BEGIN;
INSERT INTO t SELECT 'aborted-spa-' || i, 1, jsonb_build_object('pad', repeat('v', 100)) FROM generate_series(1, 3000) i;
ROLLBACK;});
$expected_count += 3000 + 1500;
$expected_sum += 3000 + 1500;
# plain: c.. at 30, k006 at 31, the spilling ones at 32 and 33.  preload: the
# first commit after the restart claimed the shard again: it flushed the tail
# 23..30 into generation 2, wrote the fence at 31 (epoch 2), and the four
# commits are 32..35.
my $p1 = $pre ? 2 : 0;
is_deeply([ wal_kinds() ],
	$pre
	? [ '1:fence:0', (map { "$_:wal:1" } 2 .. 30), '31:fence:0', map { "$_:wal:1" } 32 .. 35 ]
	: [ map { "$_:wal:1" } 1 .. 33 ],
	'the two committed spilling transactions made positions ' . (32 + $p1) . ' and '
	  . (33 + $p1) . ', the aborted one nothing');
my $pgsql_tmp = $node->data_dir . '/base/pgsql_tmp';
my @tmp_left = -d $pgsql_tmp ? glob("$pgsql_tmp/*") : ();
is_deeply(\@tmp_left, [], 'spilled transactions leave no temporary file behind');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FILTER (WHERE id LIKE 'spk-%'), count(*) FILTER (WHERE id LIKE 'spk2-%'), count(*) FILTER (WHERE id LIKE 'aborted%') FROM t}),
	'1000|500|0',
	'a rolled-back savepoint discards only its own (spilled) rows');
my $before_crash = $node->safe_psql('postgres', $fingerprint_sql);
($count, $distinct, $sum) = split /\|/, $before_crash;
is($count, $expected_count, "count(*) is $expected_count before the immediate stop");
is($sum, $expected_sum, "sum(v) is $expected_sum before the immediate stop");

$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', $fingerprint_sql), $before_crash,
	'after an immediate stop every committed row and version survives');
is_deeply([ $store->wal_positions($wal_folder) ], [ 1 .. 33 + $p1 ],
	'the WAL still holds positions 1..' . (33 + $p1));

# Writing after the crash continues at the next position, overwriting nothing.
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('after-crash', 7, '{}')});
# preload: this commit claimed the shard a third time: the replay flushed
# 31..35 (generation 3 with the WAL rows, generations 4 and 5 adopting the two
# ingest segments), the fence of epoch 3 is at 36 and the commit at 37.
is_deeply([ wal_kinds() ],
	$pre
	? [ '1:fence:0', (map { "$_:wal:1" } 2 .. 30), '31:fence:0', (map { "$_:wal:1" } 32 .. 35),
		'36:fence:0', '37:wal:1' ]
	: [ map { "$_:wal:1" } 1 .. 34 ],
	'the first commit after the crash lands at position ' . ($pre ? 37 : 34));
$expected_count += 1;
$expected_sum += 7;

# Flushing everything after the crash changes nothing visible.  The two
# transactions that spilled to disk were staged as ingest segments; flush
# adopts each as a generation of its own, so the newest is generation 4.
#
# plain: this flush seals 22..34: 32 rows of 22..29 after deduplication (u00
# three times, k005 twice), 25 + 1 + 1 of 30, 31 and 34 = 59 rows in
# generation 2, and adopts the ingest segments of 32 (3000 rows) and 33 (1500
# rows) as generations 3 and 4: 4559 rows, newest generation 4.
# preload: the claims already flushed 23..30 (generation 2: 32 rows) and
# 31..35 (generation 3: 26 rows; 4 and 5: the ingest segments); this flush
# writes the memtable, positions 36..37 (the fence and 'after-crash'): 1 row
# into generation 6.  Both modes hold the same 4679 physical rows in
# generations.
if ($pre)
{
	is( $node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t')}),
		'1|6',
		'flush after the crash seals the memtable (positions 36..37, 1 row) into generation 6');
	is( $node->safe_psql('postgres', q{SELECT generations FROM rollout_observe('t')}),
		'6',
		'generations 1, 2 (restart replay), 3 (crash replay), 4 and 5 (adopted ingest segments) and 6 are pending');
	is_deeply([ generations() ],
		[ '1:1-22:120', '2:23-30:32', '3:31-35:26', '4:34-34:3000', '5:35-35:1500', '6:36-37:1' ],
		'the generations tile positions 1..37, each replay and flush exactly once');
}
else
{
	is( $node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t')}),
		'4559|4',
		'flush after the crash seals positions 22..34 (4559 rows; two spilled transactions adopted) up to generation 4');
	is( $node->safe_psql('postgres', q{SELECT generations FROM rollout_observe('t')}),
		'4', 'generations 1 (before the crash), 2 (the WAL rows) and 3 and 4 (the adopted ingest segments) are pending');
	is_deeply([ generations() ],
		[ '1:1-21:120', '2:22-34:59', '3:32-32:3000', '4:33-33:1500' ],
		'the generations tile positions 1..34, each flushed exactly once');
}

my $after_flush = $node->safe_psql('postgres', $fingerprint_sql);
($count, $distinct, $sum) = split /\|/, $after_flush;
is($count, $expected_count, "count(*) is $expected_count after the second flush");
is($distinct, $expected_count, 'still no key twice');
is($sum, $expected_sum, "sum(v) is $expected_sum after the second flush");

$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', $fingerprint_sql), $after_flush,
	'a second immediate stop after a flush loses nothing');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM t WHERE id IN ('k005', 'k006', 'u00')}),
	'k005=500005,k006=600006,u00=700000',
	'newest versions survive flush + crash');
is_deeply([ leftover_scratch_files() ], [], 'no scratch files at the end');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

$node->stop;
done_testing();
