
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 015_memtable_backpressure.pl — a full memtable makes committers wait for a
# flush, not fail (DESIGN.md §6.4; issue 4; a wait longer than
# rollout_fdw.memtable_wait_timeout fails, test 057).
#
# Preloaded with rollout_fdw.memtable_size = 1MB (the minimum) and
# flush_interval = 0, so the only flushes are the ones back-pressure makes.
# Four sessions commit 80 transactions of 20 rows of ~1 kB each (about
# 6.5 MB in all, six times the memtable) at the same time, while a fifth
# samples rollout_stat_stores.memtable_bytes.  Every transaction commits,
# backpressure_waits > 0, the memtable never holds more than 1 MB, the
# flushes made generations, and the table is exact.  The server log says,
# once per session at most, that commits flushed the store themselves; in a
# database the sweeper does not serve, its hint names the setting to change.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(writer_node);
use Test::More;

my $SESSIONS = 4;
my $XACTS = 80;
my $ROWS = 20;
my $MEMTABLE = 1024 * 1024;

my $node = writer_node('backpressure', 'rollout_fdw.memtable_size' => '1MB');

is($node->safe_psql('postgres', q{SHOW rollout_fdw.memtable_size}), '1MB', 'memtable_size is 1MB');

my $store = RolloutStore->for_test('015_memtable_backpressure', backend => 'file');
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t (id text, v int, payload text) SERVER s OPTIONS (store 'bp', key 'id');});

# session k, transaction x: ids k-x-r, v = r, payload 1 kB of hex
my ($rows, $sum) = (0, 0);
my @inserters;
for my $k (1 .. $SESSIONS)
{
	my $sql = '';
	for my $x (1 .. $XACTS)
	{
		$sql .= "INSERT INTO t SELECT '$k-$x-' || r, r, repeat(md5('$k-$x-' || r), 32) FROM generate_series(1, $ROWS) r;\n";
		$rows += $ROWS;
		$sum += $ROWS * ($ROWS + 1) / 2;
	}
	push @inserters, PsqlScript->start($node, name => "ins$k", sql => $sql);
}
# the sampler: memtable bytes every 20 ms while the inserters run
my $sampler = PsqlScript->start($node, name => 'sampler', sql =>
	  "SELECT memtable_bytes FROM rollout_stat_stores WHERE store = 'bp';\nSELECT pg_sleep(0.02);\n" x 300);

my $t0 = time;
my $failed = 0;
for my $s (@inserters)
{
	my ($ret, $out, $err) = $s->finish;
	if ($ret != 0)
	{
		$failed++;
		diag("$s->{name} failed:\n$err");
	}
}
my $took = time - $t0;
$sampler->finish;
my @samples = grep { /^\d+$/ } split /\n/, $sampler->{out};
my ($max_sample) = sort { $b <=> $a } @samples;
note(sprintf('%d transactions (%.1f MB of payload) committed in %.1f s; %d samples, max memtable_bytes %d',
		$SESSIONS * $XACTS, $rows * 1024 / 1048576, $took, scalar(@samples), $max_sample // -1));

is($failed, 0, 'no transaction failed: every session committed all its transactions');
cmp_ok(scalar(@samples), '>', 20, 'the sampler read the view many times');
cmp_ok($max_sample // 0, '>', 0, 'the sampler saw rows in the memtable');
cmp_ok($max_sample // 0, '<=', $MEMTABLE, 'memtable_bytes never exceeded 1 MB');

my ($xacts, $xfailed, $appended, $waits, $flushes, $mem_bytes) = split /\|/,
  $node->safe_psql('postgres',
	q{SELECT transactions_committed, transactions_failed, rows_appended, backpressure_waits, flushes, memtable_bytes
	  FROM rollout_stat_stores WHERE store = 'bp'});
is($xacts, $SESSIONS * $XACTS, "the view: $SESSIONS x $XACTS transactions committed");
is($xfailed, 0, 'the view: none failed');
is($appended, $rows, "the view: $rows rows appended");
cmp_ok($waits, '>', 0, "committers waited for room ($waits back-pressure waits)");
cmp_ok($flushes, '>', 0, "back-pressure flushed ($flushes flushes, with flush_interval = 0)");
cmp_ok($mem_bytes, '<=', $MEMTABLE, "memtable_bytes is within 1 MB at the end ($mem_bytes)");
my $gens = $node->safe_psql('postgres', q{SELECT generations FROM rollout_observe('t')});
cmp_ok($gens, '>=', 5, "the flushes made generations ($gens): the data is 6 x the memtable");

is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id), sum(v), sum(length(payload)) FROM t}),
	"$rows|$rows|$sum|" . ($rows * 1024), "exact: $rows rows, each once, every payload whole");
$node->safe_psql('postgres', q{SELECT rollout_flush('t')});
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id), sum(v) FROM t}),
	"$rows|$rows|$sum", 'still exact after a final flush');
is($node->safe_psql('postgres', q{SELECT memtable_rows, memtable_bytes FROM rollout_stat_stores WHERE store = 'bp'}),
	'0|0', 'the memtable is empty after the final flush');

# and the memtable keeps working after it was full
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('last', 7, 'x')});
is($node->safe_psql('postgres', q{SELECT count(*), memtable_rows FROM t, rollout_stat_stores WHERE store = 'bp' GROUP BY 2}),
	($rows + 1) . '|1', 'a commit after all that lands in the memtable');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');
my $noted = () = $log =~ /LOG:  rollout_fdw: the memtable is full, so a commit flushes store "bp" itself/g;
cmp_ok($noted, '>=', 1, "the server log says that commits flushed the store ($noted times)");
cmp_ok($noted, '<=', $SESSIONS, '... at most once per session');
like($log, qr/HINT:  The sweeper did not flush it in time: a larger rollout_fdw.memtable_size/,
	'... with a hint at the memtable\'s size, since the sweeper serves this database');

# A database the sweeper does not serve: its commits flush the store every
# time the memtable is full, and the hint names the setting to change.
$node->safe_psql('postgres', 'CREATE DATABASE unswept');
$node->safe_psql('unswept', 'CREATE EXTENSION rollout_fdw;' . $store->server_sql('s'));
$node->safe_psql('unswept',
	q{CREATE FOREIGN TABLE t (id text, v int, payload text) SERVER s OPTIONS (store 'bp_unswept', key 'id');});
$node->safe_psql('unswept',
	join('', map { "INSERT INTO t SELECT '$_-' || r, r, repeat(md5(r::text), 32) FROM generate_series(1, 20) r;\n" } 1 .. 80));
is($node->safe_psql('unswept', q{SELECT count(*) FROM t}), 1600,
	'a database the sweeper does not serve: 1,600 rows committed through a full memtable');
$log = slurp_file($node->logfile);
like($log, qr/LOG:  rollout_fdw: the memtable is full, so a commit flushes store "bp_unswept" itself/,
	'... the log says that its commit flushed the store');
like($log, qr/HINT:  No sweeper flushes the stores of database "unswept": add it to rollout_fdw.worker_databases/,
	'... and that no sweeper flushes the stores of that database, naming the setting');
$node->stop;
done_testing();
