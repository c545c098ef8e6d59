
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its cluster preloads the writer in every run; scripts/test.sh)
#
# 068_store_slots_recycled.pl — when every shared-memory slot is taken, a
# store that commits gets the least recently used slot that has been idle
# for 10 s (core/shared_store.c, slot_recycle; docs/WRITER.md, max_stores),
# instead of committing without group commit and memtable until a restart.
#
# Preloaded with max_stores = 2 and three stores of the same columns:
#  - a store whose slot was taken keeps every row (they are durable WAL
#    entries) and reads them from the store;
#  - the store that got the slot commits through it (its counters start at
#    zero, no WARNING), and reads exact;
#  - a scan of the first store that found its slot before it changed hands,
#    and copies the memtable after (held at a fault point), reads none of the
#    new owner's rows: with the slot's generation unchecked it returned them
#    as its own;
#  - while no slot is idle long enough, a store still goes the direct path
#    with the WARNING;
#  - a commit that found no slot, and whose store gets one before it appends,
#    commits through that slot instead (held at a fault point);
#  - after a crash every committed row is there once.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(writer_node wait_for_fault release_faults hold_faults);
use Test::More;
use Time::HiRes qw(sleep);

# no sweeper: its visits would take slots of their own
my $node = writer_node('slots_recycled', 'rollout_fdw.max_stores' => 2,
	'rollout_fdw.worker_databases' => '');
my $store = RolloutStore->for_test('068_store_slots_recycled', backend => 'file');
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	join('', map { "CREATE FOREIGN TABLE s$_ (id int, v int) SERVER s OPTIONS (store 's$_', key 'id');\n" } 1 .. 3));

# store n holds ids 1..count with v = n * 1000 + id
my %count = (1 => 0, 2 => 0, 3 => 0);
sub insert_rows
{
	my ($n, $more) = @_;
	my $from = $count{$n} + 1;
	$count{$n} += $more;
	my ($rc, $out, $err) = $node->psql('postgres',
		join('', map { "INSERT INTO s$n VALUES ($_, $n * 1000 + $_);\n" } $from .. $count{$n}));
	is($rc, 0, "s$n: $more commits succeed") or diag($err);
	return $err;
}
sub expected
{
	my ($n) = @_;
	my $c = $count{$n};
	return sprintf('%d|%d', $c, $c * $n * 1000 + $c * ($c + 1) / 2);
}
sub check_all
{
	my ($when) = @_;
	for my $n (1 .. 3)
	{
		is($node->safe_psql('postgres', "SELECT count(*), coalesce(sum(v), 0) FROM s$n"),
			expected($n), "s$n: every row once, $when");
	}
}
sub slot_stores
{
	return $node->safe_psql('postgres',
		q{SELECT string_agg(store || ':' || transactions_committed, ',' ORDER BY store) FROM rollout_stat_stores});
}

# 1. s1 and s2 take both slots
insert_rows(1, 10);
insert_rows(2, 10);
is(slot_stores(), 's1:10,s2:10', 'two slots: s1 and s2');

# 2. a scan of s1 finds its slot, then waits before it copies the memtable
# (planned before, so that the snapshot held is the scan's, not an estimate's)
my $offset = -s $node->logfile;
my $scan = PsqlScript->start($node, sql => q{
SET plan_cache_mode = force_generic_plan;
PREPARE scan_s1 AS SELECT count(*), sum(v) FROM s1;
EXECUTE scan_s1;
SET rollout_fdw.fail_at = 'snapshot.before_memtable:hold';
EXECUTE scan_s1;
});
wait_for_fault($node, 'snapshot.before_memtable', $offset);

# 3. s2 is read now and then, s1 not: once s1's slot has been idle for 10 s
# it is the one that may change hands
sleep(5);
$node->safe_psql('postgres', 'SELECT count(*) FROM s2');
sleep(5.5);
$node->safe_psql('postgres', 'SELECT count(*) FROM s2');
sleep(1);
$offset = -s $node->logfile;
my $err = insert_rows(3, 10);
unlike($err, qr/WARNING/, 's3 commits through a slot: no WARNING');
ok($node->log_contains(
		qr/LOG:  rollout_fdw: the shared-memory slot of shard "[^"]+" of store "s1" goes to store "s3"/, $offset),
	'the server log says which store gave its slot to which');
is(slot_stores(), 's2:10,s3:10', "s3 got s1's slot, with counters of its own");

# 4. the held scan of s1 copies the memtable now: none of s3's rows
release_faults($node);
my ($rc, $out, $scan_err) = $scan->finish;
is($rc, 0, 'the held scan of s1 ends') or diag($scan_err);
is((split /\n/, $out)[-1], expected(1),
	"the scan that found s1's slot before it changed hands reads s1's rows only");
check_all("after s1's slot went to s3");

# 5. no slot idle long enough: s1 commits without one, and says so
$err = insert_rows(1, 5);
like($err, qr/WARNING:  all 2 rollout_fdw shared store slots are in use/,
	'no idle slot: s1 commits through the direct path, with the WARNING');
check_all('with s1 written through the direct path');

# 6. later s2's slot has been idle long enough (s3 was just read): s1 gets it
sleep(6);
$node->safe_psql('postgres', 'SELECT count(*) FROM s3');
sleep(5);
$err = insert_rows(1, 5);
unlike($err, qr/WARNING/, 's1 gets a slot again once one is idle');
is(slot_stores(), 's1:5,s3:10', "s1 took s2's slot");
check_all('after s2 gave its slot to s1');
insert_rows(2, 3);    # s2: no idle slot, the direct path
for my $n (1 .. 3)
{
	($rc, $out, $err) = $node->psql('postgres', "SELECT rollout_flush('s$n')");
	is($rc, 0, "s$n flushes") or diag($err);
}
check_all('after each store is flushed');

# 7. s1 and s3 hold both slots.  A commit of s2 that found none waits
# before its direct append; s2 gets a slot meanwhile (once s1's and s3's are
# idle), whose claim takes s2's WAL tail.
# The held commit then commits through that slot: appended beside it, its row
# was hidden from every read through the slot's memtable, and the slot's
# next entry found its position taken ("taken by an unexpected entry").
is(slot_stores(), 's1:5,s3:10', 's2 has no slot');
hold_faults($node);
$offset = -s $node->logfile;
$count{2}++;
my $held = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'commit.before_direct:hold';
INSERT INTO s2 VALUES ($count{2}, 2000 + $count{2});
});
wait_for_fault($node, 'commit.before_direct', $offset);
sleep(11);
$err = insert_rows(2, 1);
unlike($err, qr/WARNING/, 's2 gets an idle slot while a commit of it waits to append directly');
release_faults($node);
($rc, $out, $err) = $held->finish;
is($rc, 0, 'the held commit succeeds') or diag($err);
check_all('after a commit that found no slot and then one');
insert_rows(2, 3);
check_all("after more commits through s2's slot");

# 8. a crash: every committed row once
insert_rows($_, 4) for 1 .. 3;
$node->stop('immediate');
$node->start;
check_all('after a crash');

unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC/, 'no backend died');
$node->stop;
done_testing();
