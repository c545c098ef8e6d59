
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 014_appends_during_merge.pl — with the shared-memory writer, appends keep
# committing while a merge is held open (DESIGN.md §7.1, §11.3; issue 4).
#
# Preloaded.  Three generations and a memtable tail exist; a session runs
# rollout_merge held at the fault point merge.after_fragment_put until the
# test releases it (merge.after_fragment_put:hold).  Meanwhile another
# session commits 60 single-row INSERTs (group commit, memtable), each timed,
# and then a 500-row transaction: all commit, each in well under a second,
# while the merge is still held; their rows are visible at once.  Afterwards the merge succeeds,
# and counts are exact before and after a second merge that folds in the
# rows inserted meanwhile.  The held merge holds no lock on the table: an
# ALTER FOREIGN TABLE (ACCESS EXCLUSIVE, as TRUNCATE) does not wait.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use ExpectedRows;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(writer_node still_running wait_for_fault release_faults store_stats);
use Test::More;

my $node = writer_node('merge_appends');

my $store = RolloutStore->for_test('014_appends_during_merge', backend => 'file');
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t (id text, v int) SERVER s OPTIONS (store 'ma', key 'id');});

my $expected = ExpectedRows->new($node);    # table t: id => v

sub insert_range { $expected->insert_range('t', @_); }

sub check_table
{
	my ($label) = @_;
	my ($n, undef, $sum) = split /\|/, $expected->state('t');
	is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id), sum(v) FROM t}),
		"$n|$n|$sum", "$label: count = distinct = $n, sum = $sum");
}

# gen 1: a0001..a0200; gen 2: a0201..a0400 and a0001..a0050 again (v + 10000);
# gen 3: a0401..a0500; memtable: a0501..a0550 (the merge flushes it first).
insert_range('a', 1, 200);
$node->safe_psql('postgres', q{SELECT rollout_flush('t')});
insert_range('a', 201, 400);
insert_range('a', 1, 50, 10000);
$node->safe_psql('postgres', q{SELECT rollout_flush('t')});
insert_range('a', 401, 500);
$node->safe_psql('postgres', q{SELECT rollout_flush('t')});
insert_range('a', 501, 550);
check_table('before the merge');

my $offset = -s $node->logfile;
my $merge = PsqlScript->start($node, sql => q{
SET rollout_fdw.fail_at = 'merge.after_fragment_put:hold';
SELECT generations_merged, rows_merged, fragments_added,
       round(extract(epoch FROM clock_timestamp() - statement_timestamp())::numeric, 1)
FROM rollout_merge('t');
});
ok(wait_for_fault($node, 'merge.after_fragment_put', $offset),
	'the merge is held after uploading its fragment');

my ($puts_before, $xacts_before) = split /\|/,
  store_stats($node, 'ma', qw(wal_puts transactions_committed));

# 60 timed single-row commits from one session
my $bg = $node->background_psql('postgres');
my @latency;
my $t_start = time;
for my $i (1 .. 60)
{
	my $t0 = time;
	$bg->query_safe(sprintf(q{INSERT INTO t VALUES ('b%04d', %d)}, $i, $i));
	push @latency, time - $t0;
	$expected->rows('t')->{ sprintf('b%04d', $i) } = $i;
}
my $inserts_took = time - $t_start;
# and then one larger transaction
my $t_big = time;
$bg->query_safe(q{BEGIN});
$bg->query_safe(q{INSERT INTO t SELECT 'c' || lpad(i::text, 4, '0'), 2 * i FROM generate_series(1, 500) i});
$bg->query_safe(q{COMMIT});
my $big_took = time - $t_big;
$expected->rows('t')->{ sprintf('c%04d', $_) } = 2 * $_ for 1 .. 500;
my ($max_latency) = sort { $b <=> $a } @latency;
note(sprintf('60 INSERTs took %.3f s during the merge (max %.3f s); the 500-row transaction %.3f s',
		$inserts_took, $max_latency, $big_took));

is(still_running($node, q{%rollout_merge(''t'')%}), '1', 'the merge is still running after all 61 commits');

# Nor does the merge hold the table's lock while it works: an ALTER or
# TRUNCATE of the table (its lock is ACCESS EXCLUSIVE) would wait for it, and
# every INSERT after that for the ALTER.  Before, this ALTER ran into its
# lock timeout.
my ($lock_ret, $lock_out, $lock_err) = $node->psql('postgres',
	q{SET lock_timeout = '3s';
ALTER FOREIGN TABLE t OPTIONS (ADD batch_size '50');
ALTER FOREIGN TABLE t OPTIONS (DROP batch_size);}, on_error_stop => 1);
is($lock_ret, 0, 'the table can be altered (ACCESS EXCLUSIVE) while the merge is held') or diag($lock_err);
cmp_ok($max_latency, '<', 1.0, 'no single-row INSERT waited for the merge (max latency < 1 s)');
cmp_ok($big_took, '<', 1.0, 'the 500-row transaction did not wait either');
is($node->safe_psql('postgres', q{SELECT count(*), sum(v) FROM t WHERE id LIKE 'b%' OR id LIKE 'c%'}),
	'560|' . (60 * 61 / 2 + 500 * 501), 'the 560 rows committed during the merge are visible at once');
my ($puts_after, $xacts_after, $mem_rows) = split /\|/,
  store_stats($node, 'ma', qw(wal_puts transactions_committed memtable_rows));
is($xacts_after - $xacts_before, 61, 'the view counts the 61 transactions');
is($mem_rows, 560, 'their 560 rows are in the memtable');

release_faults($node);
my ($ret, $out, $err) = $merge->finish;
is($ret, 0, 'the held merge succeeds') or diag($err);
my ($gm, $rm, $fa, $secs) = split /\|/, $out;
is("$gm|$rm|$fa", '4|550|1', 'the merge folded 4 generations (3 + its own flush) into 550 rows, 1 fragment');
cmp_ok($secs, '>=', $inserts_took + $big_took,
	sprintf('the merge (%s s) lasted through all 61 commits (%.1f s)', $secs, $inserts_took + $big_took));
check_table('after the merge');

is($node->safe_psql('postgres', q{SELECT generations_merged, rows_merged, fragments_added FROM rollout_merge('t')}),
	'1|560|1', 'a second merge folds in the 560 rows committed meanwhile');
check_table('after the second merge');
is($node->safe_psql('postgres', q{SELECT base_rows, generations, exact_row_count FROM rollout_observe('t', true)}),
	'1110|0|1110', 'base rows = exact rows = 1110: no row twice, none lost');
is($node->safe_psql('postgres', q{SELECT merges, memtable_rows, transactions_failed FROM rollout_stat_stores WHERE store = 'ma'}),
	'2|0|0', 'the view: 2 merges, empty memtable, no failed transaction');

$bg->quit;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');
$node->stop;
done_testing();
