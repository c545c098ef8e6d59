
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 002_concurrent_inserts.pl — concurrent committers of one shard (DESIGN.md §6.2).
#
# Eight sessions commit single-row and multi-row transactions at the same time.
# Afterwards: no row is lost or returned twice (count, distinct count and sum
# are exact), the shard's WAL holds exactly positions 1..N without holes, the
# entries account for every committed transaction, and a flush changes
# nothing visible.  A second run has one session flush again and again while
# the others insert: the generations must cover the WAL positions exactly
# once, and the result must again be exact, before and after a final flush.
# Its inserting sessions stop half-way at a gate (an advisory lock) until a
# flush has sealed their first halves, so that rows are flushed both before
# and after the gate however fast they commit.
# Runs against every backend (test/perl/RolloutStore.pm).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(preload mode_node shard_of contiguous loop_size poll_until);
use Test::More;

my $node = mode_node('concurrent', conf => ['max_connections = 30']);

# Without the preloaded writer every commit is its own WAL entry.  With the
# shared-memory writer (preload) the first commit claims the shard and writes
# a fence marker (no rows, "transactions": 0, epoch 1) at position 1, and
# later entries are group commits: one entry may carry several transactions
# ("transactions" in its footer metadata).
my $group_commit = preload();

my $store = RolloutStore->for_test('002_concurrent_inserts');
my $scripts = PostgreSQL::Test::Utils::tempdir('scripts');

$store->create_extension_and_server($node);
$node->safe_psql(
	'postgres', qq{
CREATE FOREIGN TABLE t1 (id text, v int, payload jsonb) SERVER s OPTIONS (store 'conc1');
CREATE FOREIGN TABLE t2 (id text, v int, payload jsonb) SERVER s OPTIONS (store 'conc2');
});
my $shard = shard_of($node);

# single-row transactions per session; without the shared-memory writer on
# S3 and Azure each one is a conditional PUT racing seven others
my $SINGLE = loop_size(file => 120, remote => 25, long => 400);
my $MULTI = 5;        # multi-row transactions per session
my $MULTI_ROWS = 10;  # rows per multi-row transaction (two statements)

# The script of inserting session $k into $table; returns (sql, rows, sum, transactions).
sub session_script
{
	my ($table, $prefix, $k) = @_;
	my ($sql, $rows, $sum, $xacts) = ('', 0, 0, 0);
	for my $i (1 .. $SINGLE)
	{
		my $v = $k * 100000 + $i;
		$sql .= "INSERT INTO $table VALUES ('$prefix$k-$i', $v, '{\"s\": $k, \"i\": $i}');\n";
		$rows++;
		$sum += $v;
		$xacts++;
		if ($i % int($SINGLE / $MULTI) == 0)
		{
			my $j = $i / int($SINGLE / $MULTI);
			my $half = $MULTI_ROWS / 2;
			my $base = $k * 100000 + 50000 + $j * 100;
			$sql .= "BEGIN;\n"
			  . "INSERT INTO $table SELECT '${prefix}m$k-$j-' || r, $base + r, '{}' FROM generate_series(1, $half) r;\n"
			  . "INSERT INTO $table SELECT '${prefix}m$k-$j-' || r, $base + r, '{}' FROM generate_series($half + 1, $MULTI_ROWS) r;\n"
			  . "COMMIT;\n";
			$rows += $MULTI_ROWS;
			$sum += $base * $MULTI_ROWS + $MULTI_ROWS * ($MULTI_ROWS + 1) / 2;
			$xacts++;
		}
	}
	return ($sql, $rows, $sum, $xacts);
}

# Start psql on each script at once; wait for all; check each succeeded.
sub run_parallel
{
	my ($label, @files) = @_;
	return finish_sessions($label, start_sessions(@files));
}

sub start_sessions
{
	return [ map { [ $_, PsqlScript->start($node, file => $_) ] } @_ ];
}

# Wait for the sessions of start_sessions; check each succeeded; their output
# by script.
sub finish_sessions
{
	my ($label, $runs) = @_;
	my %output;
	for my $r (@$runs)
	{
		my ($f, $session) = @$r;
		my ($ret, undef, $err) = $session->finish;
		is($ret, 0, "$label: session $f exited cleanly")
		  or diag("stderr of $f:\n$err");
		$output{$f} = $session->{out};
	}
	return \%output;
}

# The WAL folder of rollout store $name (the table's store option).
sub wal_folder { return "$_[0]/shards/$shard/wal"; }

# The footer metadata of every WAL entry: returns the sum of "transactions"
# over the entries and the positions of the fence markers.  Every entry must
# be of this shard; a fence carries 0 transactions, an entry with rows at
# least 1.
sub wal_transactions
{
	my ($name) = @_;
	my $total = 0;
	my @fences;
	for my $p ($store->wal_positions(wal_folder($name), required => 1))
	{
		my $doc = $store->wal_entry(wal_folder($name), $p);
		die "no WAL metadata in position $p" unless defined $doc;
		die "position $p belongs to shard $doc->{shard}" unless $doc->{shard} eq $shard;
		if ($doc->{kind} eq 'fence')
		{
			die "fence at $p carries $doc->{transactions} transactions" if $doc->{transactions} != 0;
			push @fences, $p;
		}
		else
		{
			die "position $p is a \"$doc->{kind}\" entry" unless $doc->{kind} eq 'wal';
			die "position $p carries $doc->{transactions} transactions"
			  unless $doc->{transactions} >= 1;
			die "position $p carries $doc->{transactions} transactions without group commit"
			  if !$group_commit && $doc->{transactions} != 1;
		}
		$total += $doc->{transactions};
	}
	return wantarray ? ($total, \@fences) : $total;
}

# The fence markers expected in a store's WAL: preload claims each shard once
# per startup, at position 1 here (an empty WAL); plain mode writes none.
my @expected_fences = $group_commit ? (1) : ();

# The scripts of inserting sessions @k into $table (session_script), written
# to $scripts/<name>_<k>.sql; returns (rows, sum, transactions, files).
sub write_session_scripts
{
	my ($table, $prefix, $name, $gate, @k) = @_;
	my ($rows, $sum, $xacts, @files) = (0, 0, 0);
	for my $k (@k)
	{
		my ($sql, $r, $s, $x) = session_script($table, $prefix, $k);

		# the gate, before the middle single-row insert: it waits while the
		# test holds the advisory lock $gate
		my $middle = "INSERT INTO $table VALUES ('$prefix$k-" . (int($SINGLE / 2) + 1) . "'";
		$sql =~ s/^(?=\Q$middle\E)/SELECT pg_advisory_lock_shared($gate); SELECT pg_advisory_unlock_shared($gate);\n/m
		  or die "no middle insert in the script of session $k"
		  if defined $gate;
		my $f = "$scripts/${name}_$k.sql";
		open(my $fh, '>', $f) or die;
		print $fh $sql;
		close $fh;
		push @files, $f;
		($rows, $sum, $xacts) = ($rows + $r, $sum + $s, $xacts + $x);
	}
	return ($rows, $sum, $xacts, @files);
}

sub check_table
{
	my ($table, $rows, $sum, $label) = @_;
	my $got = $node->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT id), sum(v) FROM $table");
	is($got, "$rows|$rows|$sum", "$label: count(*) = count(DISTINCT id) = $rows, sum(v) = $sum");
}

# ---------------------------------------------------------------------------
# Run 1: eight inserting sessions.
my ($rows1, $sum1, $xacts1, @files1) = write_session_scripts('t1', 's', 'ins1', undef, 0 .. 7);
my $t0 = time;
run_parallel('8 inserters', @files1);
note(sprintf('8 sessions committed %d transactions in %d s', $xacts1, time - $t0));

check_table('t1', $rows1, $sum1, 'after 8 concurrent sessions');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM t1 WHERE id ~ '^s[0-7]-[0-9]+$'}),
	8 * $SINGLE, 'every single-row transaction is visible');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM t1 WHERE id ~ '^sm[0-7]-[0-9]+-[0-9]+$'}),
	8 * $MULTI * $MULTI_ROWS, 'every row of every multi-row transaction is visible');

my @pos = $store->wal_positions(wal_folder('conc1'), required => 1);
ok(contiguous(@pos), 'the WAL holds positions 1..N with no hole')
  or diag("positions: @pos");
my ($wal_xacts, $fences) = wal_transactions('conc1');
is_deeply($fences, \@expected_fences,
	$group_commit ? 'the claim\'s fence marker is position 1, the only fence' : 'no fence markers');
if ($group_commit)
{
	# group commit: positions 2..N hold the rows, at most one per transaction
	cmp_ok(scalar(@pos) - 1, '<=', $xacts1, 'no more WAL entries with rows than transactions');
	note(sprintf('%d transactions in %d WAL entries', $xacts1, scalar(@pos) - 1));
}
else
{
	is(scalar(@pos), $xacts1, "N = $xacts1, one WAL entry per committed transaction");
}
is($wal_xacts, $xacts1,
	'the entries, all of this shard, account for every committed transaction');

my $before_flush = $node->safe_psql('postgres',
	q{SELECT md5(string_agg(id || ':' || v || ':' || payload::text, ',' ORDER BY id)) FROM t1});
my $flush = $node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t1')});
is($flush, "$rows1|1", "rollout_flush seals all $rows1 rows into generation 1");
check_table('t1', $rows1, $sum1, 'after flush');
is( $node->safe_psql('postgres',
		q{SELECT md5(string_agg(id || ':' || v || ':' || payload::text, ',' ORDER BY id)) FROM t1}),
	$before_flush, 'every row and column is identical after the flush');
my $m = $store->newest_manifest("conc1/shards/$shard/_manifest");
is($m->{replay_after}, scalar(@pos), 'the manifest says replay_after = N');
is(scalar(@{ $m->{generations} }), 1, 'one generation');
is("$m->{generations}[0]{first_position}-$m->{generations}[0]{last_position}",
	'1-' . scalar(@pos), 'the generation covers positions 1..N');

# ---------------------------------------------------------------------------
# Run 2: seven inserting sessions and one that flushes over and over.
my ($rows2, $sum2, $xacts2, @files2) = write_session_scripts('t2', 'f', 'ins2', 2002, 0 .. 6);
my $flusher = "$scripts/flusher.sql";
{
	open(my $fh, '>', $flusher) or die;
	print $fh "SELECT rows_flushed, generation FROM rollout_flush('t2');\nSELECT pg_sleep(0.01);\n"
	  for 1 .. 60;
	close $fh;
}
my $gate_lock = q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 2002};
my $gate = PsqlScript->start($node, command => 'SELECT pg_advisory_lock(2002); SELECT pg_sleep(600)');
ok(defined poll_until($node, "$gate_lock AND granted", '1', 60), 'the gate is closed');
$t0 = time;
my $sessions = start_sessions(@files2, $flusher);
ok(defined poll_until($node, "$gate_lock AND NOT granted", '7', 180),
	'every inserting session waits at the gate, half-way');
my $at_gate = $node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t2')});
my $generations_at_gate = scalar(@{ $store->newest_manifest("conc2/shards/$shard/_manifest")->{generations} });
cmp_ok($generations_at_gate, '>=', 1, 'the first halves are flushed while the sessions wait');
$node->safe_psql('postgres',
	q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()});
$gate->finish;
my $outputs = finish_sessions('7 inserters + flusher', $sessions);
note(sprintf('7 sessions committed %d transactions in %d s while flushing', $xacts2, time - $t0));

# the non-empty flushes: the flusher's and the one at the gate
my @made = grep { (split /\|/)[0] > 0 } $at_gate, grep { /^\d+\|\d+$/ } split /\n/, $outputs->{$flusher};

check_table('t2', $rows2, $sum2, 'after inserts racing with flushes');

@pos = $store->wal_positions(wal_folder('conc2'), required => 1);
ok(contiguous(@pos), 'the WAL of run 2 holds positions 1..N with no hole')
  or diag("positions: @pos");
my ($wal_xacts2, $fences2) = wal_transactions('conc2');
is($wal_xacts2, $xacts2, 'its entries account for every committed transaction');
is_deeply($fences2, \@expected_fences,
	$group_commit ? 'the claim\'s fence marker is position 1, the only fence' : 'no fence markers');

my $final = $node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t2')});
like($final, qr/^\d+\|\d*$/, "a final flush succeeds ($final)");
check_table('t2', $rows2, $sum2, 'after the final flush');
is($node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('t2')}),
	'0', 'a flush with nothing left to seal seals nothing');
check_table('t2', $rows2, $sum2, 'after an empty flush');

# The generations tile positions 1..N exactly once and hold every row once
# (all keys are distinct, so no generation drops a version).  The one gap
# allowed: a fence marker (preload) that a flush sealed on its own — a flush
# of the WAL tail racing with the claim can seal just the fence, which has no
# rows and so makes no generation.  Positions with rows are never skipped.
$m = $store->newest_manifest("conc2/shards/$shard/_manifest");
my @gens = sort { $a->{number} <=> $b->{number} } @{ $m->{generations} };
my %is_fence = map { $_ => 1 } @$fences2;
cmp_ok(scalar(@gens), '>', $generations_at_gate,
	'the second halves are in generations of their own, after the gate')
  or diag("flusher output:\n$outputs->{$flusher}");
my ($next, $ok, $gen_rows) = (1, 1, 0);
for my $g (@gens)
{
	$next++ while $g->{first_position} > $next && $is_fence{$next};
	$ok = 0 if $g->{first_position} != $next || $g->{last_position} < $g->{first_position};
	$next = $g->{last_position} + 1;
	$gen_rows += $g->{rows};
}
$next++ while $next <= scalar(@pos) && $is_fence{$next};
ok($ok, 'each generation starts right after the previous one ends')
  or diag(encode_json($m->{generations}));
is($next - 1, scalar(@pos), 'the generations end at the last WAL position');
is($m->{replay_after}, scalar(@pos), 'replay_after = N');
is($gen_rows, $rows2, "the generations hold $rows2 rows in all: none twice, none lost");
my @missing = grep { !$store->exists($_->{file}) } @gens;
is_deeply([ map { $_->{file} } @missing ], [], 'every listed generation exists');
is(scalar(@gens), scalar(@made) + ((split /\|/, $final)[0] > 0 ? 1 : 0),
	'every successful non-empty flush made exactly one listed generation');

# A restart re-reads everything from the store.
$node->stop;
$node->start;
check_table('t1', $rows1, $sum1, 't1 after restart');
check_table('t2', $rows2, $sum2, 't2 after restart');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

$node->stop;
done_testing();
