
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 017_worker_store_errors.pl — the background worker survives a store that
# became unreadable, reports it, and recovers (DESIGN.md §9; issue 4).
#
# Preloaded.  Two stores: 'sick' and 'well'.  Rows wait in the memtable of
# both (flush_interval = 0), then the 'sick' store's folder is made
# unreadable (chmod 000) and flush_interval is reloaded as 1.  The worker's
# flushes of 'sick' fail on every pass: the view shows each in last_error /
# last_error_at, the log shows the error once (not a line per second), the
# worker keeps its PID, and the 'well' store is flushed all the same.  Once
# the folder is readable again the next pass flushes 'sick' too, the log
# says so, and every row is there, exactly once.  Last, another server's
# failing store of the same location and name is not charged to this one.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node shard_of poll_until store_stats count_in_log);
use Test::More;

my $node = writer_node('worker_errors');

my $store = RolloutStore->for_test('017_worker_store_errors', backend => 'file');
$store->create_extension_and_server($node);
$node->safe_psql(
	'postgres', q{
CREATE FOREIGN TABLE sick (id text, v int) SERVER s OPTIONS (store 'sick', key 'id');
CREATE FOREIGN TABLE well (id text, v int) SERVER s OPTIONS (store 'well', key 'id');
});
my $shard = shard_of($node);

sub stat_of { return store_stats($node, @_); }

sub sweeper_pid
{
	return $node->safe_psql('postgres',
		q{SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'rollout_fdw sweeper'});
}

my $pid = sweeper_pid();
like($pid, qr/^\d+$/, "one sweeper runs (pid $pid)");

# 5 transactions of 20 rows in each store
for my $b (0 .. 4)
{
	my ($lo, $hi) = ($b * 20 + 1, $b * 20 + 20);
	$node->safe_psql('postgres', "INSERT INTO sick SELECT 's' || i, i FROM generate_series($lo, $hi) i");
	$node->safe_psql('postgres', "INSERT INTO well SELECT 'w' || i, i FROM generate_series($lo, $hi) i");
}
is($node->safe_psql('postgres', q{SELECT count(*), sum(v) FROM sick}), '100|5050', 'sick: 100 rows');
is(stat_of('sick', qw(memtable_rows flushes)), '100|0', 'sick: all in the memtable, unflushed');
is(stat_of('well', qw(memtable_rows flushes)), '100|0', 'well: all in the memtable, unflushed');

# The sweeper's passes (one a second) open both stores, and its handles stay
# open: a turn's failure is recorded in the view's row of the store the turn
# opened, and one that cannot open its store (another server's store of the
# same name, see the end) only logs it.
sleep(3);

# ---------------------------------------------------------------------------
# The store becomes unreadable; the worker starts flushing.
chmod(0000, $store->path('sick')) or die "chmod: $!";
my $offset = -s $node->logfile;
my $t_broken = time;
$node->safe_psql('postgres',
	q{ALTER SYSTEM SET rollout_fdw.flush_interval = 1; SELECT pg_reload_conf();});

ok(defined poll_until($node, q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 'well'}, '0', 20),
	'the healthy store is flushed by the worker');
ok(defined poll_until($node, q{SELECT last_error IS NOT NULL FROM rollout_stat_stores WHERE store = 'sick'}, 't', 20),
	'the failing store gets a last_error in the view');
my ($last_error, $recent) = split /\|/,
  stat_of('sick', 'last_error', q{last_error_at BETWEEN now() - interval '1 minute' AND now()});
like($last_error, qr/permission denied/i, "last_error says why: $last_error");
is($recent, 't', 'last_error_at is recent');

# several passes with the store still unreadable: retried on each, logged once
my $first_error_at = stat_of('sick', 'last_error_at');
sleep(4);
my $failures = count_in_log($node, qr/rollout_fdw sweeper: store "sick": .*permission denied/i, $offset);
is($failures, 1, 'the worker logged the failure once, not on every pass');
cmp_ok(stat_of('sick', qq{last_error_at > '$first_error_at'}), 'eq', 't',
	'and retried on the passes since (last_error_at moved on)');
is(sweeper_pid(), $pid, 'the worker is still running, with the same PID');
is(stat_of('sick', qw(memtable_rows flushes)), '100|0', 'the failing store keeps its rows in the memtable');
is(stat_of('well', qw(flushes last_error)), '1|', 'the healthy store flushed once and has no error');
is($node->safe_psql('postgres', q{SELECT count(*), sum(v) FROM well}), '100|5050',
	'the healthy store reads exact from its generation');

# ---------------------------------------------------------------------------
# Readable again: the next pass flushes.
chmod(0700, $store->path('sick')) or die "chmod: $!";
my $took = poll_until($node, q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 'sick'}, '0', 20);
ok(defined $took, 'once readable again, the worker flushes the store');
note(sprintf('recovered %.1f s after the folder became readable', $took // -1));
like(count_in_log($node, qr/rollout_fdw sweeper: store "sick" maintained again after \d+ failed turns/, $offset),
	qr/^1$/, 'the log says that the store is maintained again');
is(stat_of('sick', qw(flushes memtable_batches)), '1|0', 'the view: one successful flush, memtable empty');
cmp_ok(stat_of('sick', 'last_flush_ms'), '>', 0, 'last_flush_ms records its duration');
my $m = $store->newest_manifest("sick/shards/$shard/_manifest");
is(scalar(@{ $m->{generations} }), 1, 'the shard manifest lists one generation');
is($m->{generations}[0]{rows}, 100, '... with the 100 rows');
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id), sum(v) FROM sick}), '100|100|5050',
	'sick: every row there, exactly once');
is(sweeper_pid(), $pid, 'the same worker did it');

# and it goes on: new rows are flushed on the next passes
$node->safe_psql('postgres', q{INSERT INTO sick VALUES ('later', 1000)});
ok(defined poll_until($node, q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 'sick'}, '0', 20),
	'a later commit is flushed too');
is($node->safe_psql('postgres', q{SELECT count(*), sum(v) FROM sick}), '101|6050', 'exact at the end');

# ---------------------------------------------------------------------------
# A failing store is charged its own failures, not those of another server's
# store of the same location string and name.  Here mallory, with USAGE on
# the wrapper, makes a server with the location of a real S3 store and an
# endpoint where nothing listens, and a table of the same store name.  The
# sweeper recorded each failure of a turn in every slot of the location
# string and store name: the real store's row in the view showed mallory's
# errors, every pass.
SKIP:
{
	my ($endpoint, undef, $region) = RolloutStore::s3_settings('S3');
	skip 'no S3 server (ROLLOUT_TEST_S3_ENDPOINT)', 4 unless $endpoint;
	my $s3 = RolloutStore->for_test('017_worker_store_errors_s3', backend => 's3');
	my $location = $s3->location;
	my $dead_port = PostgreSQL::Test::Cluster::get_free_port();
	# before mallory's table exists: the sweeper's first turn on it may come
	# at once, and a failure that repeats is logged only once in 10 minutes
	$offset = -s $node->logfile;
	$node->safe_psql('postgres', qq{
CREATE SERVER real FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location '$location', endpoint '$endpoint', region '$region');
CREATE USER MAPPING FOR CURRENT_USER SERVER real
  OPTIONS (access_key_id 'AKIAROLLOUT017', secret_access_key 'rollout-017-secret');
CREATE FOREIGN TABLE steps (id text, v int) SERVER real OPTIONS (store 'steps', key 'id');
INSERT INTO steps VALUES ('a', 1);
CREATE ROLE mallory LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER rollout_fdw TO mallory;
GRANT CREATE ON SCHEMA public TO mallory;
SET ROLE mallory;
CREATE SERVER fake FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location '$location', endpoint 'http://127.0.0.1:$dead_port', region '$region',
           connect_timeout '1', request_timeout '1');
CREATE USER MAPPING FOR mallory SERVER fake
  OPTIONS (access_key_id 'AKIAMALLORY017', secret_access_key 'mallory-017-secret');
CREATE FOREIGN TABLE mallory_steps (id text, v int) SERVER fake OPTIONS (store 'steps', key 'id');
RESET ROLE;
});
	ok($node->wait_for_log(qr/rollout_fdw sweeper: store "steps": /, $offset),
		"the sweeper's turns on mallory's table fail");
	ok(defined poll_until($node,
			q{SELECT count(*) FROM rollout_stat_stores WHERE store = 'steps' AND flushes > 0 AND memtable_rows = 0}, '1', 20),
		'the real store is flushed meanwhile');
	sleep(3);    # more passes, each failing on mallory's table
	is($node->safe_psql('postgres',
			q{SELECT errors, last_error IS NULL FROM rollout_stat_stores WHERE store = 'steps' AND flushes > 0}),
		'0|t', "the real store's row shows none of mallory's errors");
	is($node->safe_psql('postgres', q{SELECT count(*), sum(v) FROM steps}), '1|1', 'and its row reads back');
}

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC|background worker "rollout_fdw sweeper.*exited/,
	'no crash; the worker never exited');
$node->stop;
done_testing();
