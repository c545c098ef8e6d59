
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 013_group_commit.pl — group commit under 16 concurrent committers
# (DESIGN.md §6.2; issue 4).
#
# Preloaded.  Sixteen sessions each commit 150 single-row transactions at
# the same time (2400 in all).  Afterwards no row is lost or returned twice
# (count, distinct count and sum exact), the shard's WAL holds positions
# 1..N without a hole (a fence marker and the data entries), the entries'
# "transactions" fields add up to exactly 2400, and rollout_stat_stores
# counts exactly 2400 committed transactions in fewer WAL PUTs than that:
# one PUT carried several transactions.  A flush then changes nothing
# visible.  Then 72 sessions wait at once behind a held leader, more than
# the slot's registry of sleeping committers holds (64): the rest wait on
# the condition variable, and none is lost or left waiting.  Two commits of
# one key queued together, the second staged as an ingest segment: the
# second's version wins before and after a flush and a merge.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(writer_node shard_of poll_until wait_for_fault release_faults);
use Test::More;

my $SESSIONS = 16;
my $PER_SESSION = 150;

my $node = writer_node('group_commit', max_connections => 100);

my $store = RolloutStore->for_test('013_group_commit', backend => 'file');
my $scripts = PostgreSQL::Test::Utils::tempdir('scripts');
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t (id text, v bigint, payload jsonb) SERVER s OPTIONS (store 'gc', key 'id');});
my $shard = shard_of($node);
my $wal = "gc/shards/$shard/wal";

# ---------------------------------------------------------------------------
# The sessions: session k inserts s<k>-<i>, v = k * 1000000 + i.
my ($rows, $sum) = (0, 0);
my @runs;
for my $k (1 .. $SESSIONS)
{
	my $sql = '';
	for my $i (1 .. $PER_SESSION)
	{
		my $v = $k * 1000000 + $i;
		$sql .= "INSERT INTO t VALUES ('s$k-$i', $v, '{\"k\": $k}');\n";
		$rows++;
		$sum += $v;
	}
	my $f = "$scripts/s$k.sql";
	open(my $fh, '>', $f) or die "open $f: $!";
	print $fh $sql;
	close $fh;
}
my $t0 = time;
for my $k (1 .. $SESSIONS)
{
	push @runs, [ $k, PsqlScript->start($node, file => "$scripts/s$k.sql") ];
}
my $failed_sessions = 0;
for my $r (@runs)
{
	my ($k, $session) = @$r;
	my ($ret, $out, $err) = $session->finish;
	if ($ret != 0)
	{
		$failed_sessions++;
		diag("session $k failed:\n$err");
	}
}
my $elapsed = time - $t0;
is($failed_sessions, 0, "all $SESSIONS sessions committed every transaction");
note(sprintf('%d sessions committed %d transactions in %.1f s (%.0f/s)',
		$SESSIONS, $rows, $elapsed, $rows / $elapsed));

my $state_sql = q{SELECT count(*), count(DISTINCT id), sum(v) FROM t};
is($node->safe_psql('postgres', $state_sql), "$rows|$rows|$sum",
	"none lost, none duplicated: count = distinct = $rows, sum = $sum");
is($node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE v % 1000000 BETWEEN 1 AND } . $PER_SESSION),
	$rows, 'every row has one of the values written');

my ($xacts, $failed, $puts, $appended, $mem_rows) = split /\|/,
  $node->safe_psql('postgres',
	q{SELECT transactions_committed, transactions_failed, wal_puts, rows_appended, memtable_rows
	  FROM rollout_stat_stores WHERE store = 'gc'});
is($xacts, $rows, "rollout_stat_stores: transactions_committed = $rows");
is($failed, 0, 'rollout_stat_stores: no failed transaction');
is($appended, $rows, "rollout_stat_stores: rows_appended = $rows");
is($mem_rows, $rows, 'all rows are in the memtable (nothing flushed)');
cmp_ok($puts, '<', $xacts, "fewer WAL PUTs ($puts) than transactions ($xacts)");
note(sprintf('WAL PUTs per transaction: %.3f (%d PUTs, %d transactions; %.1f transactions per PUT)',
		$puts / $xacts, $puts, $xacts, $xacts / $puts));

# The WAL on the store agrees with the view.
my @pos = $store->wal_positions($wal, required => 1);
is_deeply(\@pos, [ 1 .. scalar(@pos) ], 'the WAL holds positions 1..N without a hole');
is(scalar(@pos), $puts + 1, 'N = the PUTs counted by the view + the fence marker');
my ($fences, $entry_xacts, $max_xacts) = (0, 0, 0);
for my $p (@pos)
{
	my $m = $store->wal_entry($wal, $p) // die "no metadata in WAL position $p";
	die "position $p belongs to shard $m->{shard}" unless $m->{shard} eq $shard;
	if ($m->{kind} eq 'fence')
	{
		$fences++;
		next;
	}
	$entry_xacts += $m->{transactions};
	$max_xacts = $m->{transactions} if $m->{transactions} > $max_xacts;
}
is($fences, 1, 'one fence marker (the claim of epoch 1)');
is($entry_xacts, $rows, "the entries' transaction counts add up to $rows");
cmp_ok($max_xacts, '>', 1, "at least one entry carries several transactions (at most $max_xacts)");

# A flush seals every entry and changes nothing visible.
is($node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t')}),
	"$rows|1", "rollout_flush seals the $rows rows into generation 1");
is($node->safe_psql('postgres', $state_sql), "$rows|$rows|$sum", 'exact after the flush');
is($node->safe_psql('postgres', q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 'gc'}),
	'0', 'the memtable is empty after the flush');

# ---------------------------------------------------------------------------
# More committers waiting at once than the slot's registry of sleepers holds
# (64): a leader is held before it takes the queue (one entry in flight at a
# time), 72 sessions queue behind it, and those that found the registry full
# wait on the slot's condition variable instead of their semaphore
# (group_commit.c).  Released, every one learns its outcome.
my $MANY = 72;
$node->safe_psql('postgres', 'ALTER SYSTEM SET rollout_fdw.wal_pipeline_depth = 1');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE many (id text, v bigint) SERVER s OPTIONS (store 'many', key 'id');
	  INSERT INTO many VALUES ('first', 0);});
my $offset = -s $node->logfile;
my $held = PsqlScript->start($node,
	sql => "SET rollout_fdw.fail_at = 'group_commit.before_take:hold=many';
INSERT INTO many VALUES ('held leader', 0);
");
wait_for_fault($node, 'group_commit.before_take', $offset);
my @many_runs = map { [ $_, PsqlScript->start($node, sql => "INSERT INTO many VALUES ('m$_', $_);\n") ] } 1 .. $MANY;
ok(defined poll_until($node,
		q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE 'INSERT INTO many VALUES (''m%'},
		"$MANY", 120),
	"$MANY commits wait behind the held leader");
release_faults($node, 'many');
my $many_failed = 0;
for my $r ([ 'held leader', $held ], map { [ "m$_->[0]", $_->[1] ] } @many_runs)
{
	my ($name, $session) = @$r;
	my ($ret, $out, $err) = $session->finish;
	if ($ret != 0)
	{
		$many_failed++;
		diag("session $name failed:\n$err");
	}
}
is($many_failed, 0, "the held leader and all $MANY sessions committed");
my $many_sum = 0;
$many_sum += $_ for 1 .. $MANY;
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id), sum(v) FROM many}),
	($MANY + 2) . '|' . ($MANY + 2) . "|$many_sum", "$MANY waiting at once: none lost, none duplicated");

# Two transactions queued behind one leader write the same key, the second
# staged as an ingest segment: it gets a WAL entry of its own, so its version
# is the newer one at every stage.  Before, both went into one entry with one
# stamp and position, the reader could not order them, and after a flush
# (which files inline rows and segment as two generations) the first
# transaction's version won for good.
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE tie (id int, v text) SERVER s OPTIONS (store 'tie', key 'id');
	  INSERT INTO tie VALUES (0, 'first');});
$offset = -s $node->logfile;
my $tie_leader = PsqlScript->start($node,
	sql => "SET rollout_fdw.fail_at = 'group_commit.before_take:hold=tie';
INSERT INTO tie VALUES (-1, 'leader');
");
wait_for_fault($node, 'group_commit.before_take', $offset);
my $queued = sub {
	my ($like) = @_;
	return defined poll_until($node,
		qq{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '$like%'},
		'1', 120);
};
my $tie_b = PsqlScript->start($node, sql => "INSERT INTO tie VALUES (1, 'B');\n");
ok($queued->('INSERT INTO tie VALUES (1'), 'B queues behind the held leader');
my $tie_a = PsqlScript->start($node,
	sql => "SET rollout_fdw.ingest_threshold = '64kB';
INSERT INTO tie SELECT g, 'A' || repeat('a', 200) FROM generate_series(1, 2000) g;
");
ok($queued->('INSERT INTO tie SELECT'), 'then A, staged as an ingest segment, queues behind B');
release_faults($node, 'tie');
for my $session ($tie_leader, $tie_b, $tie_a)
{
	my ($ret, $out, $err) = $session->finish;
	is($ret, 0, 'the commit succeeds') or diag($err);
}
my $tie_value = q{SELECT left(v, 1) FROM tie WHERE id = 1};
is($node->safe_psql('postgres', $tie_value), 'A', 'key 1 holds the version of A, which committed after B');
$node->safe_psql('postgres', q{SELECT rollout_flush('tie')});
is($node->safe_psql('postgres', $tie_value), 'A', '... also after a flush');
$node->safe_psql('postgres', q{SELECT rollout_merge('tie')});
is($node->safe_psql('postgres', $tie_value), 'A', '... and a merge');
is($node->safe_psql('postgres', q{SELECT count(*) FROM tie}), '2002', 'every key once');

$node->safe_psql('postgres', 'ALTER SYSTEM RESET rollout_fdw.wal_pipeline_depth');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

$node->stop;
done_testing();
