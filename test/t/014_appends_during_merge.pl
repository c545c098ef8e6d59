
# Copyright (c) rollout_fdw authors
#
# 014_appends_during_merge.pl — with the shared-memory writer, appends keep
# committing while a merge is held open (DESIGN.md §7.1, §11.3; issue 4).
#
# Preloaded.  Three generations and a memtable tail exist; a session runs
# rollout_merge held at the fault point merge.after_fragment_put for 6 s.
# Meanwhile another session commits 60 single-row INSERTs (group commit,
# memtable), each timed, and a third commits a 500-row transaction: all
# commit, the slowest far faster than the merge, while the merge is still
# running; their rows are visible at once.  Afterwards the merge succeeds,
# and counts are exact before and after a second merge that folds in the
# rows inserted meanwhile.

use strict;
use warnings;

use IPC::Run;
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('merge_appends');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'rollout_fdw'
rollout_fdw.worker_databases = 'postgres'
rollout_fdw.flush_interval = 0
rollout_fdw.merge_after_generations = 0
rollout_fdw.gc_interval = 0
});
$node->start;

my $location = PostgreSQL::Test::Utils::tempdir('rollout_store');
my $scripts = PostgreSQL::Test::Utils::tempdir('scripts');
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE SERVER s FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://$location');
CREATE FOREIGN TABLE t (id text, v int) SERVER s OPTIONS (store 'ma', key 'id');
});

my %expected;    # id => v

sub insert_range
{
	my ($prefix, $lo, $hi, $add) = @_;
	$add //= 0;
	$node->safe_psql('postgres',
		"INSERT INTO t SELECT '$prefix' || lpad(i::text, 4, '0'), $add + i FROM generate_series($lo, $hi) i");
	$expected{ sprintf('%s%04d', $prefix, $_) } = $add + $_ for $lo .. $hi;
}

sub check_table
{
	my ($label) = @_;
	my $n = scalar(keys %expected);
	my $sum = 0;
	$sum += $_ for values %expected;
	is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT id), sum(v) FROM t}),
		"$n|$n|$sum", "$label: count = distinct = $n, sum = $sum");
}

my $session_number = 0;
sub start_session
{
	my ($sql) = @_;
	my %s = (out => '', err => '');
	my $file = "$scripts/session" . ++$session_number . '.sql';
	open(my $fh, '>', $file) or die "open $file: $!";
	print $fh $sql;
	close $fh;
	$s{h} = IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres'), '-f', $file
		],
		'<', \undef, '>', \$s{out}, '2>', \$s{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return \%s;
}

sub finish_session
{
	my ($s) = @_;
	$s->{h}->finish;
	my $out = $s->{out};
	chomp $out;
	return ($s->{h}->result(0), $out, $s->{err});
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
my $merge = start_session(q{
SET rollout_fdw.fail_at = 'merge.after_fragment_put:sleep=6';
SELECT generations_merged, rows_merged, fragments_added,
       round(extract(epoch FROM clock_timestamp() - statement_timestamp())::numeric, 1)
FROM rollout_merge('t');
});
ok($node->wait_for_log(qr/fault point "merge\.after_fragment_put" reached: sleeping/, $offset),
	'the merge is held after uploading its fragment');

my ($puts_before, $xacts_before) = split /\|/, $node->safe_psql('postgres',
	q{SELECT wal_puts, transactions_committed FROM rollout_stat_stores WHERE store = 'ma'});

# 60 timed single-row commits from one session
my $bg = $node->background_psql('postgres');
my @latency;
my $t_start = time;
for my $i (1 .. 60)
{
	my $t0 = time;
	$bg->query_safe(sprintf(q{INSERT INTO t VALUES ('b%04d', %d)}, $i, $i));
	push @latency, time - $t0;
	$expected{ sprintf('b%04d', $i) } = $i;
}
my $inserts_took = time - $t_start;
# and one larger transaction from another session
my $t_big = time;
$bg->query_safe(q{BEGIN});
$bg->query_safe(q{INSERT INTO t SELECT 'c' || lpad(i::text, 4, '0'), 2 * i FROM generate_series(1, 500) i});
$bg->query_safe(q{COMMIT});
my $big_took = time - $t_big;
$expected{ sprintf('c%04d', $_) } = 2 * $_ for 1 .. 500;
my ($max_latency) = sort { $b <=> $a } @latency;
note(sprintf('60 INSERTs took %.3f s during the merge (max %.3f s); the 500-row transaction %.3f s',
		$inserts_took, $max_latency, $big_took));

is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%rollout_merge(''t'')%' AND pid <> pg_backend_pid()}),
	'1', 'the merge is still running after all 61 commits');
cmp_ok($max_latency, '<', 1.0, 'no single-row INSERT waited for the merge (max latency < 1 s)');
cmp_ok($big_took, '<', 1.0, 'the 500-row transaction did not wait either');
is($node->safe_psql('postgres', q{SELECT count(*), sum(v) FROM t WHERE id LIKE 'b%' OR id LIKE 'c%'}),
	'560|' . (60 * 61 / 2 + 500 * 501), 'the 560 rows committed during the merge are visible at once');
my ($puts_after, $xacts_after, $mem_rows) = split /\|/, $node->safe_psql('postgres',
	q{SELECT wal_puts, transactions_committed, memtable_rows FROM rollout_stat_stores WHERE store = 'ma'});
is($xacts_after - $xacts_before, 61, 'the view counts the 61 transactions');
is($mem_rows, 560, 'their 560 rows are in the memtable');

my ($ret, $out, $err) = finish_session($merge);
is($ret, 0, 'the held merge succeeds') or diag($err);
my ($gm, $rm, $fa, $secs) = split /\|/, $out;
is("$gm|$rm|$fa", '4|550|1', 'the merge folded 4 generations (3 + its own flush) into 550 rows, 1 fragment');
cmp_ok($secs, '>=', 6, "the merge was held for at least 6 s ($secs s)");
cmp_ok($max_latency * 10, '<', $secs, 'the slowest INSERT took less than a tenth of the merge');
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
