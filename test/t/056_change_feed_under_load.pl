
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its cluster preloads the writer in every run; scripts/test.sh)
#
# 056_change_feed_under_load.pl — a trainer's consumer of rollout_changes
# against a live cluster: pgbench writers commit rows of new keys (three per
# transaction) and record each acknowledged key in a heap table in the same
# transaction; the sweeper flushes every second, merges at two generations
# and collects garbage every two seconds (30 s grace); pg_cron compacts the
# store every minute.  The consumer polls the way README shows, in one
# statement that stores what it got and its new position in heap tables,
# with random max_rows.  In the middle a writer's backend is killed (kill
# -9), which takes the cluster down under load, and it is restarted, and the consumer goes on from
# the position it had committed.  Then the writers stop and the consumer
# drains the feed:
#   - every acknowledged key was delivered, and exactly once;
#   - no key was delivered twice, and every delivered key is in the table;
#   - every row in the table was delivered (rows committed to the store
#     whose acknowledgement the kill cut off included);
#   - the sweeper merged, gc ran and pg_cron ran its compaction job meanwhile.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use IPC::Run;
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node pump_if_running restart_after_crash);
use Test::More;

my $seed = $ENV{ROLLOUT_TEST_SEED} // 56;
srand($seed);
note("seed $seed");

my $node = writer_node('feedload',
	shared_preload_libraries => 'pg_cron,rollout_fdw',
	'cron.database_name' => 'postgres',
	'cron.use_background_workers' => 'on',
	max_worker_processes => 16,
	'rollout_fdw.flush_interval' => 1,
	'rollout_fdw.merge_after_generations' => 2,
	'rollout_fdw.gc_interval' => 2,
	'rollout_fdw.min_gc_grace' => 0,
	'rollout_fdw.gc_grace' => 30);
my $store = RolloutStore->for_test('056_change_feed_load', backend => 'file');
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron');
$store->create_extension_and_server($node);
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE load (id bigint, writer int, payload text)
  SERVER s OPTIONS (store 'feed_load', key 'id');
CREATE SEQUENCE ids;
CREATE TABLE acked (id bigint PRIMARY KEY);
CREATE TABLE delivered (id bigint, stamp timestamptz, shard text);
CREATE TABLE consumer (pos text);
INSERT INTO consumer VALUES (NULL);
SELECT cron.schedule('compact_feed_load', '* * * * *', $$SELECT rollout_compact('load', min_fragments => 2)$$);
});

my $script = $node->basedir . '/writer.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
WITH n AS MATERIALIZED (SELECT nextval('ids') AS id FROM generate_series(1, 3)),
     l AS (INSERT INTO load SELECT id, :client_id, repeat(md5(id::text), 4) FROM n)
INSERT INTO acked SELECT id FROM n;
});

# pgbench for $seconds in the background
sub start_writers
{
	my ($seconds) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', $seconds, '-f', $script,
		  '-d', $node->connstr('postgres') ],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

# One poll, as README's trainer loop does it; the changes it brought.
my $polls = 0;
sub poll
{
	my $max = 1 + int(rand(1500));
	$polls++;
	return $node->safe_psql('postgres', qq{
WITH c AS MATERIALIZED (SELECT * FROM rollout_changes('load', (SELECT pos FROM consumer FOR UPDATE), $max)),
     d AS (INSERT INTO delivered SELECT key::bigint, stamp, shard FROM c WHERE op = 'upsert'),
     u AS (UPDATE consumer SET pos = (SELECT next_since FROM c LIMIT 1) WHERE EXISTS (SELECT 1 FROM c))
SELECT count(*) FILTER (WHERE op <> 'position') FROM c});
}

# Poll while the writers run, and for at least $min seconds, and until
# $until returns true (if given), starting writers again as they finish.
sub poll_during
{
	my ($writers, $min, $until) = @_;
	my $start = time();
	for (;;)
	{
		my $running = pump_if_running($writers->{h});
		my $more = time() - $start < $min || ($until && !$until->());
		last if !$running && !$more;
		poll();
		sleep(0.05 + rand(0.2));
		if (!$running)
		{
			$writers->{h}->finish;
			$writers = start_writers(5);
		}
		die 'the load phase did not end (pg_cron never ran the compaction?)'
		  if time() - $start > 150;
	}
	$writers->{h}->finish;
	return;
}

sub cron_runs
{
	return $node->safe_psql('postgres',
		q{SELECT count(*) FROM cron.job_run_details WHERE status = 'succeeded'});
}

# 1. writers, sweeper, gc and pg_cron, until the compaction job ran once
poll_during(start_writers(5), 10, sub { cron_runs() > 0 });
my $before_crash = $node->safe_psql('postgres', 'SELECT count(*) FROM acked');
note("before the kill: $before_crash keys acknowledged, $polls polls");

# 2. a crash under load, then a restart
my $writers = start_writers(30);
my $t0 = time();
while (time() - $t0 < 3)
{
	poll();
	sleep(0.1);
}
# a writer's backend killed: the postmaster takes every process down
my $victim = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE query LIKE 'WITH n AS%' AND pid <> pg_backend_pid() LIMIT 1});
ok($victim =~ /^\d+$/ && kill('KILL', $victim), 'a writer is killed under load');
$writers->{h}->finish;    # pgbench fails: its server went away
ok(restart_after_crash($node), 'the cluster went down and came back');

# 3. more writers after the restart, then drain
poll_during(start_writers(5), 5);
$node->safe_psql('postgres', q{SELECT rollout_flush('load')});
my $rounds = 0;
while (poll() ne '0')
{
	die 'the feed never ends' if ++$rounds > 10_000;
}

my $acked = $node->safe_psql('postgres', 'SELECT count(*) FROM acked');
my $rows = $node->safe_psql('postgres', 'SELECT count(*) FROM load');
note("$acked keys acknowledged, $rows rows in the table, $polls polls");
cmp_ok($acked, '>', $before_crash, 'writers committed before and after the kill');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM acked a WHERE (SELECT count(*) FROM delivered d WHERE d.id = a.id) <> 1}),
	'0', 'every acknowledged key was delivered exactly once');
is($node->safe_psql('postgres', 'SELECT count(*) FROM (SELECT id FROM delivered GROUP BY id HAVING count(*) > 1) r'),
	'0', 'no key was delivered twice');
is($node->safe_psql('postgres', q{
CREATE TEMP TABLE l AS SELECT id FROM load;
SELECT (SELECT count(*) FROM delivered d WHERE NOT EXISTS (SELECT 1 FROM l WHERE l.id = d.id)),
       (SELECT count(*) FROM l WHERE NOT EXISTS (SELECT 1 FROM delivered d WHERE d.id = l.id))}),
	'0|0', 'the keys delivered are the keys of the table');
my ($merges, $gcs) = split /\|/, $node->safe_psql('postgres',
	q{SELECT merges, gc_runs FROM rollout_stat_stores WHERE store = 'feed_load'});
cmp_ok($merges, '>', 0, 'the sweeper merged meanwhile');
cmp_ok($gcs, '>', 0, 'garbage collection ran meanwhile');
cmp_ok(cron_runs(), '>', 0, 'pg_cron ran its compaction job meanwhile');

done_testing();
