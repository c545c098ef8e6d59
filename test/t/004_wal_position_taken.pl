
# Copyright (c) rollout_fdw authors
#
# 004_wal_position_taken.pl — a WAL position held by something that is not a
# WAL entry of this shard (DESIGN.md §6.2: positions are never overwritten,
# never skipped).
#
# After N commits, position N+1 of the shard's WAL is occupied by (a) garbage,
# (b) a valid WAL entry of another shard copied there.  The next commit must
# fail with an error naming the shard and saying nothing was overwritten; the
# intruder must be byte-identical afterwards; position N+2 must not exist; the
# committed rows must be unchanged.  Once the intruder is removed, commits
# work again and land at N+1 — both from a new session and from the session
# that saw the failure.

use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('taken');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = '$ENV{ROLLOUT_TEST_PRELOAD}'")
  if $ENV{ROLLOUT_TEST_PRELOAD};
$node->start;

my $location = PostgreSQL::Test::Utils::tempdir('rollout_store');

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE SERVER s FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://$location');
CREATE FOREIGN TABLE t (id text, v int, payload jsonb) SERVER s OPTIONS (store 'taken');
});
my $shard = $node->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
my $wal_dir = "$location/taken/shards/$shard/wal";

sub wal_file { return sprintf("%s/%020d.wal", $wal_dir, $_[0]); }

sub slurp_bin
{
	my ($f) = @_;
	open(my $fh, '<:raw', $f) or return undef;
	local $/;
	my $b = <$fh>;
	close $fh;
	return $b // '';
}

sub write_bin
{
	my ($f, $b) = @_;
	open(my $fh, '>:raw', $f) or die "open $f: $!";
	print $fh $b;
	close $fh or die "close $f: $!";
}

sub wal_positions
{
	opendir(my $dh, $wal_dir) or die "opendir $wal_dir: $!";
	my @p = sort { $a <=> $b }
	  map { /^(\d{20})\.wal$/ ? $1 + 0 : () } readdir($dh);
	closedir($dh);
	return @p;
}

sub wal_entry_shard
{
	my ($bytes) = @_;
	return undef unless defined $bytes;
	my ($meta) = $bytes =~ /(\{"kind":\s*"wal".*?\})/s;
	return defined $meta ? decode_json($meta)->{shard} : undef;
}

sub leftover_scratch_files
{
	my @left;
	for my $dir ($node->data_dir . '/base/pgsql_tmp', "$location/_tmp")
	{
		next unless opendir(my $dh, $dir);
		push @left, map { "$dir/$_" } grep { !/^\.\.?$/ } readdir($dh);
		closedir($dh);
	}
	return @left;
}

sub table_state
{
	return $node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t');
}

# A long-lived session: it commits the first rows, sees the failures, and
# commits again once the intruder is gone, with whatever it cached meanwhile.
my $bg = $node->background_psql('postgres', on_error_stop => 0);
sub bg_query
{
	my ($sql) = @_;
	$bg->{stderr} = '';
	my $out = $bg->query($sql);
	my $err = $bg->{stderr};
	$bg->{stderr} = '';
	return ($out, $err);
}

# N = 5 commits
for my $i (1 .. 5)
{
	my ($out, $err) = bg_query("INSERT INTO t VALUES ('r$i', $i, '{\"i\": $i}')");
	is($err, '', "commit $i succeeds");
}
is_deeply([ wal_positions() ], [ 1 .. 5 ], 'five commits made positions 1..5');
is(table_state(), '5|15', '5 rows, sum 15');

# A valid WAL entry of another shard of the same store.
$node->safe_psql('postgres', q{
SET rollout_fdw.shard_id = 'other';
INSERT INTO t VALUES ('x1', 1000, '{"from": "other"}'), ('x2', 2000, '{"from": "other"}');
});
my $other_file = sprintf("%s/taken/shards/other/wal/%020d.wal", $location, 1);
ok(-f $other_file, 'shard "other" wrote its first WAL entry');
my $other_bytes = slurp_bin($other_file);
is(wal_entry_shard($other_bytes), 'other', 'its metadata names shard "other"');
is(table_state(), '5|15', 'the other shard\'s unflushed rows are not read as ours');

# ---------------------------------------------------------------------------
# The checks made while position $p is taken by $intruder.
sub check_position_taken
{
	my ($label, $p, $intruder, $rows_before) = @_;
	write_bin(wal_file($p), $intruder);

	# from a new session, autocommit
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nINSERT INTO t VALUES ('never-a', 1, '{}')");
	isnt($ret, 0, "$label: a commit from a new session fails");
	like($err, qr/shard "\Q$shard\E"/, "$label: the error names the shard")
	  or diag($err);
	like($err, qr/nothing was overwritten/i, "$label: the error says nothing was overwritten");
	note("error was: $err");

	# from the long-lived session, explicit transaction: COMMIT fails
	($out, $err) = bg_query("BEGIN; INSERT INTO t VALUES ('never-b', 1, '{}'); COMMIT;");
	like($err, qr/ERROR: .*shard "\Q$shard\E"/s, "$label: COMMIT in the long-lived session fails naming the shard")
	  or diag($err);
	($out, $err) = bg_query('SELECT 42');
	is($out, '42', "$label: the long-lived session is usable after the failed COMMIT");

	# a multi-row autocommit INSERT fails too
	($ret, $out, $err) = $node->psql('postgres',
		q{INSERT INTO t SELECT 'never-c' || i, i, '{}' FROM generate_series(1, 100) i});
	isnt($ret, 0, "$label: a multi-row commit fails as well");

	is(slurp_bin(wal_file($p)), $intruder, "$label: position $p is byte-identical afterwards");
	ok(!-e wal_file($p + 1), "$label: no position " . ($p + 1) . ' was created (nothing skipped)');
	is_deeply([ wal_positions() ], [ 1 .. $p ], "$label: the WAL holds exactly 1..$p");
	is_deeply([ leftover_scratch_files() ], [], "$label: the failed commits left no scratch files");

	# A read while the intruder is there: a clean error naming it, or exactly
	# the committed rows (never the intruder's rows, never a crash).
	($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT count(*), sum(v) FROM t");
	if ($ret == 0)
	{
		is($out, $rows_before, "$label: a read returns exactly the committed rows");
	}
	else
	{
		like($err, qr/ERROR:\s+[0-9A-Z]{5}: .*\Q$shard\E\/wal\/0*$p\.wal/,
			"$label: a read fails cleanly, naming the intruder");
	}
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$label: the server is up");

	unlink(wal_file($p)) or die "unlink: $!";
	is(table_state(), $rows_before, "$label: with the intruder removed, the committed rows are unchanged");
}

# (a) garbage at N+1 = 6
srand(4242);
my $garbage = join('', map { chr(int(rand(256))) } 1 .. 700);
check_position_taken('garbage at 6', 6, $garbage, '5|15');

# the long-lived session commits again: it must land at 6
{
	my ($out, $err) = bg_query(q{INSERT INTO t VALUES ('r6', 6, '{"i": 6}')});
	is($err, '', 'after removing the garbage, the long-lived session commits');
}
is_deeply([ wal_positions() ], [ 1 .. 6 ], 'and its commit landed at position 6');
is(wal_entry_shard(slurp_bin(wal_file(6))), $shard, 'position 6 is an entry of our shard');
is(table_state(), '6|21', '6 rows, sum 21');

# (b) the other shard's valid entry at N+1 = 7
check_position_taken('another shard\'s entry at 7', 7, $other_bytes, '6|21');

$node->safe_psql('postgres', q{INSERT INTO t VALUES ('r7', 7, '{"i": 7}')});
is_deeply([ wal_positions() ], [ 1 .. 7 ], 'after removing it, a new session\'s commit lands at 7');
{
	my ($out, $err) = bg_query(q{INSERT INTO t VALUES ('r8', 8, '{"i": 8}')});
	is($err, '', 'the long-lived session commits too');
}
is_deeply([ wal_positions() ], [ 1 .. 8 ], '... at 8');
is(wal_entry_shard(slurp_bin(wal_file($_))), $shard, "position $_ is an entry of our shard") for 7, 8;
is(table_state(), '8|36', '8 rows, sum 36');
is($node->safe_psql('postgres', q{SELECT string_agg(id, ',' ORDER BY id) FROM t}),
	'r1,r2,r3,r4,r5,r6,r7,r8', 'exactly the committed keys, none of the failed ones');

# The intruder at a position right after replay_after: flush, then intrude.
is($node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t')}),
	'8|1', 'flush seals positions 1..8');
check_position_taken('garbage right after replay_after (9)', 9, $garbage, '8|36');
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('r9', 9, '{}')});
is_deeply([ wal_positions() ], [ 1 .. 9 ], 'after removing it, the commit lands at 9');
is(table_state(), '9|45', '9 rows, sum 45');

# other shard's file untouched throughout
is(slurp_bin($other_file), $other_bytes, 'the other shard\'s entry was never modified');

$bg->quit;

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

$node->stop;
done_testing();
