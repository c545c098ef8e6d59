
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 050_maintenance_cost_delay.pl — merge, compaction and garbage collection
# yield to commits with a cost-based delay, as VACUUM does
# (objstore/maintenance_cost.c):
#
#   1. rollout_fdw.maintenance_cost_delay = 0 (the default for SQL calls):
#      a compaction never sleeps;
#   2. with a delay it sleeps, reporting how often at DEBUG1, and a ten times
#      larger rollout_fdw.maintenance_cost_limit makes it sleep far less
#      often; the rows are the same whatever the setting;
#   3. a throttled compaction can be cancelled (statement_timeout), and the
#      session's next flush is not throttled: the delay ends with its pass,
#      also on ERROR;
#   4. a commit is never delayed by a throttled pass: INSERTs commit while a
#      compaction of the same store sleeps;
#   5. the sweeper's merges use rollout_fdw.sweeper_cost_delay: its merge is
#      seen sleeping (wait event VacuumDelay) with a large delay, and with 0
#      finishes.
# On S3 and Azure an upload is charged when it ends, and paid in sleeps of at
# most four times the delay: the same assertions hold.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node poll_until);
use Test::More;

my $node = writer_node('costdelay');
my $store = RolloutStore->for_test('050_cost_delay');
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t (id int, v int, payload text) SERVER s OPTIONS (store 'cd', key 'id')});

my $state_sql = q{SELECT count(*), sum(v), sum(length(payload)) FROM t};

# Three batches of 3,000 rows of about 1 kB, each merged into its own
# fragment; the last two overwrite half of the first's keys.
sub load_fragments
{
	my ($first) = @_;
	for my $b (0 .. 2)
	{
		my $lo = $first + $b * 1500;
		$node->safe_psql('postgres',
			qq{INSERT INTO t SELECT i, i + $b, repeat(md5(i::text || '$b'), 32) FROM generate_series($lo, $lo + 2999) i});
		$node->safe_psql('postgres', q{SELECT rollout_merge('t')});
	}
}

# Run @sql in one psql session with client_min_messages = debug1; returns
# its stdout and the number of delays the DEBUG1 line reports (0 if none).
sub run_debug
{
	my (@sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		join(";\n", 'SET client_min_messages = debug1', @sql));
	is($ret, 0, "ran: $sql[-1]") or diag($err);
	my $delays = 0;
	$delays += $1 while $err =~ /maintenance cost delay: slept [0-9.]+ ms in (\d+) delays/g;
	return ($out, $delays);
}

# 1. No delay by default.
load_fragments(0);
my $before = $node->safe_psql('postgres', $state_sql);
my (undef, $delays) = run_debug(q{SELECT fragments_after FROM rollout_compact('t', 2, 1000000)});
is($delays, 0, 'maintenance_cost_delay = 0 by default: the compaction never sleeps');
is($node->safe_psql('postgres', $state_sql), $before, 'the compaction kept every row');

# 2. With a delay, limit 200 versus 2000.
load_fragments(10000);
$before = $node->safe_psql('postgres', $state_sql);
my $delays_200;
(undef, $delays_200) = run_debug(q{SET rollout_fdw.maintenance_cost_delay = '1ms'},
	q{SELECT fragments_after FROM rollout_compact('t', 2, 1000000)});
cmp_ok($delays_200, '>=', 50, "delay 1 ms, limit 200: the compaction slept ($delays_200 times)");
is($node->safe_psql('postgres', $state_sql), $before, 'the throttled compaction kept every row');

load_fragments(20000);
$before = $node->safe_psql('postgres', $state_sql);
my $delays_2000;
(undef, $delays_2000) = run_debug(q{SET rollout_fdw.maintenance_cost_delay = '1ms'},
	q{SET rollout_fdw.maintenance_cost_limit = 2000},
	q{SELECT fragments_after FROM rollout_compact('t', 2, 1000000)});
cmp_ok($delays_2000, '>', 0, "limit 2000: the compaction still slept ($delays_2000 times)");
cmp_ok($delays_2000 * 3, '<', $delays_200,
	"limit 2000 sleeps far less often than limit 200 ($delays_2000 vs $delays_200 before on fewer rows)");
is($node->safe_psql('postgres', $state_sql), $before, 'and kept every row');

# The merges of a session with a delay sleep too.
$node->safe_psql('postgres',
	q{INSERT INTO t SELECT i, i, repeat('x', 1000) FROM generate_series(40000, 42999) i});
(undef, $delays) = run_debug(q{SET rollout_fdw.maintenance_cost_delay = '1ms'},
	q{SELECT generations_merged FROM rollout_merge('t')});
cmp_ok($delays, '>', 0, "a merge with a delay sleeps too ($delays times)");

# 3. Cancel a crawling compaction, then flush in the same session.
load_fragments(50000);
$before = $node->safe_psql('postgres', $state_sql);
my ($ret, $out, $err) = $node->psql('postgres', q{
	\set ON_ERROR_STOP 0
	SET rollout_fdw.maintenance_cost_delay = 100;
	SET rollout_fdw.maintenance_cost_limit = 1;
	SET statement_timeout = '2s';
	SELECT rollout_compact('t', 2, 1000000);
	RESET statement_timeout;
	INSERT INTO t SELECT i, i, repeat('y', 1000) FROM generate_series(60000, 64999) i;
	SET statement_timeout = '60s';
	SELECT rows_flushed FROM rollout_flush('t');
});
my @timeouts = $err =~ /canceling statement due to statement timeout/g;
is(scalar(@timeouts), 1,
	'a throttled compaction is cancelled by statement_timeout, and only it: the same session '
	  . 'then flushes 5,000 rows within 60 s (throttled at limit 1 and 100 ms it would take minutes)');
is($out, '5000', 'the flush wrote the 5,000 rows');
is($node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE id >= 50000}), '11000',
	'the cancelled compaction lost nothing (6,000 keys before it, 5,000 after)');

# 4. Commits proceed while a compaction of the same store sleeps.
my ($cout, $cerr) = ('', '');
my $compaction = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'),
	  '-c', 'SET rollout_fdw.maintenance_cost_delay = 100',
	  '-c', 'SET rollout_fdw.maintenance_cost_limit = 1',
	  '-c', q{SET application_name = 'throttled'},
	  '-c', q{SELECT rollout_compact('t', 2, 1000000)} ],
	'>', \$cout, '2>', \$cerr);
ok(poll_until($node,
		q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'throttled' AND wait_event = 'VacuumDelay'},
		'1', 60),
	'the throttled compaction shows the wait event VacuumDelay');
for my $i (1 .. 20)
{
	$node->safe_psql('postgres', qq{INSERT INTO t VALUES (${\ (70000 + $i)}, $i, 'during')});
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE payload = 'during'}), '20',
	'20 INSERTs committed while the compaction slept');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'throttled' AND state = 'active'}),
	'1', 'and the compaction was still running after them');
$node->safe_psql('postgres',
	q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'throttled'});
$compaction->finish;
like($cerr, qr/canceling statement due to user request/, 'a throttled compaction answers a cancel');

# 5. The sweeper: a merge crawls with sweeper_cost_delay = 100 and the
# limit at 1, and finishes once the delay is 0.
$node->append_conf('postgresql.conf', qq{
rollout_fdw.flush_interval = 1
rollout_fdw.merge_after_generations = 1
rollout_fdw.sweeper_cost_delay = 100
rollout_fdw.maintenance_cost_limit = 1
});
$node->reload;
$node->safe_psql('postgres',
	q{INSERT INTO t SELECT i, i, repeat('z', 1000) FROM generate_series(80000, 82999) i});
ok(poll_until($node,
		q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rollout_fdw sweeper' AND wait_event = 'VacuumDelay'},
		'1', 60),
	'the sweeper merges with its cost delay (wait event VacuumDelay)');
$node->append_conf('postgresql.conf', qq{rollout_fdw.sweeper_cost_delay = 0\n});
$node->reload;
ok(poll_until($node, q{SELECT generations, unflushed_rows FROM rollout_observe('t')}, '0|0', 60),
	'with sweeper_cost_delay = 0 the sweeper flushes and merges everything');
is($node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE id >= 80000 AND id < 83000}), '3000',
	'every row the sweeper merged reads back');

$node->stop;
done_testing();
