
# Copyright (c) rollout_fdw authors
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
# visible.

use strict;
use warnings;

use IPC::Run;
use JSON::PP;
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $SESSIONS = 16;
my $PER_SESSION = 150;

my $node = PostgreSQL::Test::Cluster->new('group_commit');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'rollout_fdw'
rollout_fdw.worker_databases = 'postgres'
rollout_fdw.flush_interval = 0
rollout_fdw.merge_after_generations = 0
rollout_fdw.gc_interval = 0
max_connections = 40
});
$node->start;

my $location = PostgreSQL::Test::Utils::tempdir('rollout_store');
my $scripts = PostgreSQL::Test::Utils::tempdir('scripts');
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE SERVER s FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://$location');
CREATE FOREIGN TABLE t (id text, v bigint, payload jsonb) SERVER s OPTIONS (store 'gc', key 'id');
});
my $shard = $node->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
my $wal_dir = "$location/gc/shards/$shard/wal";

sub wal_positions
{
	opendir(my $dh, $wal_dir) or die "opendir $wal_dir: $!";
	my @p = sort { $a <=> $b }
	  map { /^(\d{20})\.wal$/ ? $1 + 0 : () } readdir($dh);
	closedir($dh);
	return @p;
}

sub wal_metadata
{
	my ($p) = @_;
	my $bytes = slurp_file(sprintf("%s/%020d.wal", $wal_dir, $p));
	my ($meta) = $bytes =~ /(\{"kind":\s*"(?:wal|fence)".*?\]\})/s;
	die "no metadata in WAL position $p" unless defined $meta;
	return decode_json($meta);
}

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
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres'), '-f', "$scripts/s$k.sql"
		],
		'<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	push @runs, [ $k, $h, \$err ];
}
my $failed_sessions = 0;
for my $r (@runs)
{
	my ($k, $h, $err) = @$r;
	$h->finish;
	if ($h->result(0) != 0)
	{
		$failed_sessions++;
		diag("session $k failed:\n$$err");
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
my @pos = wal_positions();
is_deeply(\@pos, [ 1 .. scalar(@pos) ], 'the WAL holds positions 1..N without a hole');
is(scalar(@pos), $puts + 1, 'N = the PUTs counted by the view + the fence marker');
my ($fences, $entry_xacts, $max_xacts) = (0, 0, 0);
for my $p (@pos)
{
	my $m = wal_metadata($p);
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

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

$node->stop;
done_testing();
