
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
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
# that saw the failure.  With the pipelined WAL writer (preload) a commit may
# also land an entry right after the intruder while the intruder's PUT is in
# flight: it is never acknowledged, and the claim after the intruder is gone
# makes it dead (docs/WRITER.md, "Pipelined WAL writes"); the last preload
# case forces that order with a fault point.
#
# Both modes must keep these rules; they reach them differently.  Without
# preloading, a committing backend lists the WAL and creates the next
# position.  With the shared-memory writer (preload), the group-commit leader
# creates tip + 1 without listing, and on "already exists" reads the
# occupant's metadata: garbage or another shard's entry must fail the commit
# the same way.  Positions differ by design: in preload the first commit
# claims the shard and writes a fence marker at position 1, so every
# position of our shard is one higher ($off), and so is the other shard's
# first entry with rows.
#
# Runs against every backend (test/perl/RolloutStore.pm): the intruder is put
# in place, compared and removed through the store's own interface, so on
# S3 and Azure it meets the conditional create of those services.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(preload mode_node shard_of segment_metadata wait_for_fault
  release_faults hold_faults still_running);
use Time::HiRes;
use Test::More;

my $pre = preload();
my $off = $pre ? 1 : 0;

my $node = mode_node('taken');

my $store = RolloutStore->for_test('004_wal_position_taken');

$store->create_extension_and_server($node);
$node->safe_psql(
	'postgres', qq{
CREATE FOREIGN TABLE t (id text, v int, payload jsonb) SERVER s OPTIONS (store 'taken');
});
my $shard = shard_of($node);
my $wal_folder = "taken/shards/$shard/wal";

# The key of position $p of our shard's WAL.
sub wal_key { return $store->wal_key($wal_folder, $_[0]); }

# The shard named by a WAL entry with rows (kind "wal"), from its footer.
sub wal_entry_shard
{
	my ($bytes) = @_;
	my $meta = segment_metadata($bytes);
	return undef unless defined $meta && $meta->{kind} eq 'wal';
	return $meta->{shard};
}

# Temporary files in the node's pgsql_tmp (whatever the backend), and the
# store's leftovers of unfinished writes (RolloutStore::scratch: the file://
# store's <location>/_tmp, S3 multipart uploads, Azure uncommitted blobs).
sub leftover_scratch_files
{
	my @left;
	my $dir = $node->data_dir . '/base/pgsql_tmp';
	if (opendir(my $dh, $dir))
	{
		push @left, map { "$dir/$_" } grep { !/^\.\.?$/ } readdir($dh);
		closedir($dh);
	}
	push @left, map { "store scratch: $_" } $store->scratch;
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
# plain: 1..5.  preload: the claim's fence at 1 (epoch 1), the commits 2..6.
is_deeply([ $store->wal_positions($wal_folder, required => 1) ], [ 1 .. 5 + $off ], 'five commits made positions ' . (1 + $off) . '..' . (5 + $off));
if ($pre)
{
	my $fence = $store->wal_entry($wal_folder, 1);
	is( join(':', map { $fence->{$_} // 'undef' } qw(kind shard epoch transactions)),
		"fence:$shard:1:0", 'position 1 is the fence marker of epoch 1');
}
is(table_state(), '5|15', '5 rows, sum 15');

# A valid WAL entry of another shard of the same store.
$node->safe_psql('postgres', q{
SET rollout_fdw.shard_id = 'other';
INSERT INTO t VALUES ('x1', 1000, '{"from": "other"}'), ('x2', 2000, '{"from": "other"}');
});
# preload: that session claimed shard "other" too (fence at its position 1),
# so its rows are at position 2.
my $other_key = $store->wal_key('taken/shards/other/wal', 1 + $off);
ok($store->exists($other_key), 'shard "other" wrote its first WAL entry with rows');
my $other_bytes = $store->get($other_key);
is(wal_entry_shard($other_bytes), 'other', 'its metadata names shard "other"');
is(table_state(), '5|15', 'the other shard\'s unflushed rows are not read as ours');

# 5,000 rows of 1 kB: more than the 4 MB of rows a WAL entry is encoded in
# memory for, less than the 16 MB of rollout_fdw.ingest_threshold, so the
# entry is built in a scratch file, which must never be left behind.
my $big_insert = q{INSERT INTO t SELECT 'big' || i, 0, jsonb_build_object('pad', repeat('x', 1000)) FROM generate_series(1, 5000) i};

# A read while an intruder is at position $p: a clean error naming it, or
# exactly the committed rows $rows (never the intruder's rows, never a
# crash).
sub check_read_with_intruder
{
	my ($label, $p, $rows) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT count(*), sum(v) FROM t");
	if ($ret == 0)
	{
		is($out, $rows, "$label: a read returns exactly the committed rows");
	}
	else
	{
		like($err, qr/ERROR:\s+[0-9A-Z]{5}: .*\Q$shard\E\/wal\/0*$p\.wal/,
			"$label: a read fails cleanly, naming the intruder");
	}
	return;
}

# ---------------------------------------------------------------------------
# The checks made while position $p is taken by $intruder.
sub check_position_taken
{
	my ($label, $p, $intruder, $rows_before) = @_;
	$store->put(wal_key($p), $intruder);

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

	# and one whose entry is too large to encode in memory (a scratch file)
	($ret, $out, $err) = $node->psql('postgres', $big_insert =~ s/big/never-e/r);
	isnt($ret, 0, "$label: a commit of 5 MB of rows fails as well");

	is($store->get(wal_key($p)), $intruder, "$label: position $p is byte-identical afterwards");
	ok(!$store->exists(wal_key($p + 1)), "$label: no position " . ($p + 1) . ' was created (nothing skipped)');
	is_deeply([ $store->wal_positions($wal_folder, required => 1) ], [ 1 .. $p ], "$label: the WAL holds exactly 1..$p");
	is_deeply([ leftover_scratch_files() ], [], "$label: the failed commits left no scratch files");

	check_read_with_intruder($label, $p, $rows_before);
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$label: the server is up");

	$store->delete(wal_key($p)) or die 'no intruder at ' . wal_key($p) . ' to remove';
	is(table_state(), $rows_before, "$label: with the intruder removed, the committed rows are unchanged");
}

# (a) garbage at N+1 = 6 (preload: 7)
srand(4242);
my $garbage = join('', map { chr(int(rand(256))) } 1 .. 700);
my $p = 6 + $off;
check_position_taken("garbage at $p", $p, $garbage, '5|15');

# the long-lived session commits again: it must land at N+1
{
	my ($out, $err) = bg_query(q{INSERT INTO t VALUES ('r6', 6, '{"i": 6}')});
	is($err, '', 'after removing the garbage, the long-lived session commits');
}
is_deeply([ $store->wal_positions($wal_folder, required => 1) ], [ 1 .. $p ], "and its commit landed at position $p");
is(wal_entry_shard($store->get(wal_key($p))), $shard, "position $p is an entry of our shard");
is(table_state(), '6|21', '6 rows, sum 21');

# (b) the other shard's valid entry at N+2 = 7 (preload: 8)
$p = 7 + $off;
check_position_taken("another shard's entry at $p", $p, $other_bytes, '6|21');

$node->safe_psql('postgres', q{INSERT INTO t VALUES ('r7', 7, '{"i": 7}')});
is_deeply([ $store->wal_positions($wal_folder, required => 1) ], [ 1 .. $p ], "after removing it, a new session's commit lands at $p");
{
	my ($out, $err) = bg_query(q{INSERT INTO t VALUES ('r8', 8, '{"i": 8}')});
	is($err, '', 'the long-lived session commits too');
}
is_deeply([ $store->wal_positions($wal_folder, required => 1) ], [ 1 .. $p + 1 ], '... at ' . ($p + 1));
is(wal_entry_shard($store->get(wal_key($_))), $shard, "position $_ is an entry of our shard") for $p, $p + 1;
is(table_state(), '8|36', '8 rows, sum 36');
is($node->safe_psql('postgres', q{SELECT string_agg(id, ',' ORDER BY id) FROM t}),
	'r1,r2,r3,r4,r5,r6,r7,r8', 'exactly the committed keys, none of the failed ones');

# The intruder at a position right after replay_after: flush, then intrude.
# (preload: the flush writes the memtable, positions 1..9 with the fence.)
$p = 8 + $off;
is($node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t')}),
	'8|1', "flush seals positions 1..$p");
$p++;
check_position_taken("garbage right after replay_after ($p)", $p, $garbage, '8|36');
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('r9', 9, '{}')});
is_deeply([ $store->wal_positions($wal_folder, required => 1) ], [ 1 .. $p ], "after removing it, the commit lands at $p");
is(table_state(), '9|45', '9 rows, sum 45');

# preload: a group commit that meets an intruder.  With commit_delay the
# leader waits before it takes the queue, so concurrent committers join its
# entry as followers; the whole group must fail (a follower learns the
# leader's error), nothing is overwritten, and afterwards the next commit
# lands.  Whether a given session was leader or follower depends on timing;
# so does whether a committer that queued after the group was taken led an
# entry of its own to the next position while the intruder's PUT was in
# flight (rollout_fdw.wal_pipeline_depth, docs/WRITER.md "Pipelined WAL
# writes").  Such an entry sits behind a position that is never settled: its
# committer fails as well, the next commit claims the shard, and the claim's
# fence makes it dead.  What must hold does not depend on timing.
if ($pre)
{
	$p++;
	$store->put(wal_key($p), $garbage);
	my @runs = map {
		PsqlScript->start($node,
			command => "SET rollout_fdw.commit_delay = 100000; INSERT INTO t VALUES ('never-g$_', 1, '{}')")
	} 1 .. 4;
	my $k = 0;
	for my $session (@runs)
	{
		$k++;
		my ($ret, undef, $err) = $session->finish;
		isnt($ret, 0, "group with garbage at $p: committer $k fails");
		like($err, qr/ERROR: .*\Q$shard\E/s, "group with garbage at $p: committer ${k}'s error names the shard")
		  or diag($err);
		note("committer $k: $err");
	}
	is($store->get(wal_key($p)), $garbage, "group with garbage at $p: position $p is byte-identical afterwards");
	my @positions = $store->wal_positions($wal_folder, required => 1);
	my @past = grep { $_ > $p } @positions;
	note('entries pipelined past the intruder: ' . scalar(@past));
	is_deeply([ grep { $_ <= $p } @positions ], [ 1 .. $p ], "group with garbage at $p: the WAL holds 1..$p");
	ok(@past <= 3, "group with garbage at $p: at most one entry past it per other committer");
	is(join(',', map { wal_entry_shard($store->get(wal_key($_))) } @past),
		join(',', map { $shard } @past), "group with garbage at $p: whatever lies past it is an entry of our shard");

	check_read_with_intruder("group with garbage at $p", $p, '9|45');
	$store->delete(wal_key($p)) or die 'no intruder at ' . wal_key($p) . ' to remove';
	is(table_state(), '9|45', "group with garbage at $p: with it removed, no row of the failed group is visible");
	$node->safe_psql('postgres', q{INSERT INTO t VALUES ('r10', 10, '{}')});
	my @after = $store->wal_positions($wal_folder, required => 1);
	if (@past)
	{
		# the claim's fence took position $p: what was past it is dead
		ok($store->exists(wal_key($p)) && @after > @positions,
			"after removing it, a claim filled $p and the next commit landed after the dead entries");
	}
	else
	{
		is_deeply(\@after, [ 1 .. $p ], "after removing it, the next commit lands at $p");
	}
	is(table_state(), '10|55', '10 rows, sum 55');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE id LIKE 'never%'}),
		'0', 'no row of any failed commit is visible');

	# The same, made certain: the leader of the intruder's position is held
	# before its PUT while the next committer's entry lands right after it.
	# That entry's committer must not be acknowledged over the intruder, and
	# once the intruder is gone the claim's fence makes the entry dead.
	my $q = ($store->wal_positions($wal_folder, required => 1))[-1] + 1;
	$store->put(wal_key($q), $garbage);
	my $offset = -s $node->logfile;
	my $held = PsqlScript->start($node,
		sql => "\\set VERBOSITY verbose\nSET rollout_fdw.fail_at = 'group_commit.before_put:hold=intruder';\nINSERT INTO t VALUES ('never-h1', 1, '{}');\n");
	wait_for_fault($node, 'group_commit.before_put', $offset);
	my $next = PsqlScript->start($node, sql => "\\set VERBOSITY verbose\nINSERT INTO t VALUES ('never-h2', 1, '{}');\n");
	my $landed = 0;
	for (1 .. 300)
	{
		last if ($landed = $store->exists(wal_key($q + 1)));
		Time::HiRes::usleep(100_000);
	}
	ok($landed, "pipelined past garbage at $q: the next committer's entry lands at " . ($q + 1));
	is(still_running($node, q{INSERT INTO t VALUES (''never-h2''%}), 1,
		'... and is not acknowledged while the intruder\'s position is open');
	release_faults($node, 'intruder');
	for my $session ($held, $next)
	{
		my ($ret, undef, $err) = $session->finish;
		isnt($ret, 0, "pipelined past garbage at $q: a committer fails");
		like($err, qr/ERROR: .*\Q$shard\E/s, '... naming the shard') or diag($err);

		# certainly failed: the intruder holds the position for good, so
		# the entry past it is dead once claimed (not 08007, "unknown")
		like($err, qr/ERROR:\s+XX001: .*\Q$shard\/wal\/\E0*$q\.wal.* is corrupt.*nothing was overwritten/s,
			'... as data corrupted at the intruder\'s position, not as an unknown outcome')
		  or diag($err);
	}
	hold_faults($node, 'intruder');
	is($store->get(wal_key($q)), $garbage, "pipelined past garbage at $q: position $q is byte-identical afterwards");
	is(wal_entry_shard($store->get(wal_key($q + 1))), $shard, '... and ' . ($q + 1) . ' holds our shard\'s entry');
	check_read_with_intruder("pipelined past garbage at $q", $q, '10|55');
	$store->delete(wal_key($q)) or die 'no intruder at ' . wal_key($q) . ' to remove';
	is(table_state(), '10|55', "pipelined past garbage at $q: with it removed, the entry behind the hole is read by nobody");
	$node->safe_psql('postgres', q{INSERT INTO t VALUES ('r11', 11, '{}')});
	is(segment_metadata($store->get(wal_key($q)))->{kind}, 'fence',
		"the next commit claimed the shard: its fence took position $q");
	is(table_state(), '11|66', '... and landed; the entry at ' . ($q + 1) . ' is dead');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE id LIKE 'never%'}),
		'0', 'no row of any failed commit is visible');
}

# The large commit, with its position free: one WAL entry holding its rows
# (not an ingest segment), readable, and no scratch file left.
{
	my @before = $store->wal_positions($wal_folder, required => 1);
	my ($count, $sum) = split /\|/, table_state();
	my ($ret, $out, $err) = $node->psql('postgres',
		"SET client_min_messages = debug1;\n$big_insert");
	is($ret, 0, 'a commit of 5 MB of rows succeeds');
	like($err, qr/a WAL entry of \d+ bytes of rows is encoded in scratch file/,
		'... its entry encoded in a scratch file, not in memory');
	my @after = $store->wal_positions($wal_folder, required => 1);
	is(scalar(@after), scalar(@before) + 1, '... as one WAL entry');
	my $entry = $store->get(wal_key($after[-1]));
	my $meta = segment_metadata($entry);
	is(join(':', $meta->{kind}, $meta->{transactions}, scalar(@{ $meta->{ingest} })),
		'wal:1:0', '... holding its rows itself, not an ingest segment');
	is(unpack('V', substr($entry, 4, 4)), 3,
		'... of format version 3: a WAL entry gets no compression dictionary');
	is( $node->safe_psql('postgres',
			q{SELECT count(*), min(length(payload->>'pad')) FROM t WHERE id LIKE 'big%'}),
		'5000|1000', '... and its rows read back whole');
	is(table_state(), ($count + 5000) . "|$sum", 'no other row changed');
	is_deeply([ leftover_scratch_files() ], [], '... and its scratch file is gone');
}

# other shard's file untouched throughout
is($store->get($other_key), $other_bytes, 'the other shard\'s entry was never modified');

$bg->quit;

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

$node->stop;
done_testing();
