
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 055_change_feed.pl — rollout_changes (lsm/change_feed.c, sql/changes.c):
#   (a) a consumer keeps a heap replica by applying every change it is
#       given, in the order given, and remembers its position; random
#       inserts, upserts, deletes and truncates, on one cluster and then on
#       two sharing the store (the second one's shard appears in the middle
#       of the feed), interleaved with flush, merge, compaction, gc (with an
#       hour's grace), crashes of a cluster and polls of random max_rows,
#       some left unfinished across the steps after them.  Whenever the
#       consumer has caught up, the replica is exactly the table, and no
#       version (key, stamp, shard) was ever delivered twice;
#   (b) the semantics in small: commit order, a key written twice between
#       polls comes once as its newest version, a delete as 'delete', a
#       TRUNCATE as one 'truncate' row, a transaction is never split by
#       max_rows, an empty poll returns nothing, a poll that moved the
#       position without a change returns one 'position' row, a named
#       snapshot token is a starting position, also when a merge committed
#       while it was taken, of a shard that appeared meanwhile too; a consumer far behind drains its backlog with no
#       poll opening more than max_rows of the sources behind it, and no
#       call comes back empty while changes remain (behind a TRUNCATE, or a
#       key written in every commit);
#   (c) garbage collection: a consumer whose position gc has passed gets a
#       clear error (SQLSTATE 72000) naming the oldest position still
#       available, and can start again from a token of rollout_snapshot; a
#       merge that leaves a flush's adopted ingest segment behind loses
#       nothing;
#   (d) bad positions, a position of another store, max_rows < 1, a table
#       pinned to a named snapshot are refused; a role needs SELECT on the
#       table;
#   (e) a session that opened the table before the store existed, which
#       another session then created, hands out positions and snapshot
#       tokens of the store as it exists (its incarnation).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use PsqlScript;
use RolloutTest qw(preload mode_node restart_after_crash try_sql loop_size pump_if_running
  wait_for_fault release_faults hold_faults count_in_log);
use Test::More;

# the plain and the preloaded run take different random paths by default
my $seed = $ENV{ROLLOUT_TEST_SEED} // 55 + preload();
srand($seed);
note("seed $seed");

my $store = RolloutStore->for_test('055_change_feed');
my %node;
for my $name ('a', 'b')
{
	my $n = mode_node("feed_$name",
		conf => [ 'rollout_fdw.rows_per_group = 50', 'rollout_fdw.min_gc_grace = 0' ]);
	$store->create_extension_and_server($n);
	$n->safe_psql('postgres', q{
CREATE FOREIGN TABLE f (id int, v int, note text)
  SERVER s OPTIONS (store 'feed', key 'id', read_wal_tail 'true');
});
	$node{$name} = $n;
}
my $a = $node{a};
$a->safe_psql('postgres', q{
CREATE TABLE replica (id int PRIMARY KEY, v int, note text);
CREATE TABLE delivered (id int, stamp timestamptz, shard text);
});

# --- (a) a consumer against random writes and maintenance --------------------

my $pos;                # the consumer's position (undef: the start)
my $polls = 0;

# One poll of at most $max changes, applied to the replica in the order
# given, in one transaction with the record of what was delivered; returns
# how many changes (not 'position' rows) it brought.
sub poll
{
	my ($max) = @_;
	my $since = defined $pos ? "'$pos'" : 'NULL';
	my $out = $a->safe_psql('postgres',
		"SELECT op, coalesce(key, ''), coalesce(shard, ''), coalesce(stamp::text, ''), coalesce(\"row\"::text, ''), next_since
		   FROM rollout_changes('f', $since, $max)");
	$polls++;
	my @sql = ('BEGIN;');
	my $changes = 0;
	for my $line (split /\n/, $out)
	{
		my ($op, $key, $shard, $stamp, $row, $next) = split /\|/, $line, 6;
		$pos = $next;
		next if $op eq 'position';
		$changes++;
		if ($op eq 'truncate')
		{
			push @sql, 'TRUNCATE replica;';
			next;
		}
		push @sql, "INSERT INTO delivered VALUES ($key, '$stamp', '$shard');";
		if ($op eq 'delete')
		{
			push @sql, "DELETE FROM replica WHERE id = $key;";
		}
		else
		{
			push @sql,
			  "INSERT INTO replica SELECT * FROM jsonb_populate_record(NULL::replica, '$row') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, note = EXCLUDED.note;";
		}
	}
	push @sql, 'COMMIT;';
	$a->safe_psql('postgres', join("\n", @sql));
	return $changes;
}

# Poll until a poll brings nothing.
sub drain
{
	my $rounds = 0;
	while (poll(1 + int(rand(40))) > 0)
	{
		die "the feed never ends" if ++$rounds > 1_000;
	}
	return;
}

# Rows of the table not in the replica and the other way round.
sub replica_differences
{
	return $a->safe_psql('postgres', q{
SELECT count(*) FROM ((SELECT * FROM f EXCEPT ALL SELECT * FROM replica)
  UNION ALL (SELECT * FROM replica EXCEPT ALL SELECT * FROM f)) d});
}

sub repeats
{
	return $a->safe_psql('postgres',
		'SELECT count(*) FROM (SELECT 1 FROM delivered GROUP BY id, stamp, shard HAVING count(*) > 1) r');
}

my $next_id = 1;
my @ids;    # keys written so far (some deleted since)

sub random_step
{
	my ($writers) = @_;
	my $on = $writers->[ int(rand(@$writers)) ];
	my $n = $node{$on};
	my $r = rand();
	if ($r < 0.30 || !@ids)
	{
		my $count = 1 + int(rand(30));
		my $first = $next_id;
		$next_id += $count;
		push @ids, $first .. $next_id - 1;
		$n->safe_psql('postgres',
			"INSERT INTO f SELECT g, g * 10, '$on new' FROM generate_series($first, " . ($next_id - 1) . ') g');
		return "$on: insert $count";
	}
	if ($r < 0.50)
	{
		my @some = map { $ids[ int(rand(@ids)) ] } 1 .. 1 + int(rand(10));
		my %uniq = map { $_ => 1 } @some;
		my $values = join(',', map { "($_, " . int(rand(1000)) . ", '$on upsert')" } sort keys %uniq);
		$n->safe_psql('postgres', "INSERT INTO f VALUES $values");
		return "$on: upsert";
	}
	if ($r < 0.60)
	{
		my $m = 2 + int(rand(7));
		$n->safe_psql('postgres', "DELETE FROM f WHERE id % $m = " . int(rand($m)));
		return "$on: delete";
	}
	if ($r < 0.63)
	{
		$n->safe_psql('postgres', 'TRUNCATE f');
		return "$on: truncate";
	}
	if ($r < 0.71)
	{
		$n->safe_psql('postgres', "SELECT rollout_flush('f')");
		return "$on: flush";
	}
	if ($r < 0.79)
	{
		$n->safe_psql('postgres', "SELECT rollout_merge('f')");
		return "$on: merge";
	}
	if ($r < 0.84)
	{
		$n->safe_psql('postgres', "SELECT rollout_compact('f')");
		return "$on: compact";
	}
	if ($r < 0.88)
	{
		$n->safe_psql('postgres', "SELECT rollout_gc('f', '1 hour')");
		return "$on: gc";
	}
	if ($r < 0.91)
	{
		$n->stop('immediate');
		$n->start;
		return "$on: crash and restart";
	}
	poll(1 + int(rand(20)));
	return 'a poll in between';
}

my $steps = 0;
my $checks = 0;
my ($first_failure, $first_repeat);
for my $phase ([ 'a' ], [ 'a', 'b' ])
{
	my $rounds = loop_size(file => 20, remote => 6, long => 300);
	for my $round (1 .. $rounds)
	{
		my @done;
		push @done, random_step($phase) for 1 .. 1 + int(rand(6));
		$steps += @done;
		drain();
		$checks++;
		my $diff = replica_differences();
		$first_failure //= "phase @$phase, round $round (@done): $diff rows differ" if $diff ne '0';
		my $rep = repeats();
		$first_repeat //= "phase @$phase, round $round (@done): $rep versions delivered twice" if $rep ne '0';
	}
}
note("$steps random steps, $checks checks, $polls polls");
is($first_failure, undef, '(a) whenever the consumer caught up, its replica was exactly the table');
is($first_repeat, undef, '(a) no version was ever delivered twice');
like($pos, qr/^cf1:[0-9a-f-]+:\d+:[A-Za-z0-9_-]+=\d+\/\d+\/\d+\/\d+,[A-Za-z0-9_-]+=\d+\/\d+\/\d+\/\d+$/,
	'(a) the position names both shards');
cmp_ok($a->safe_psql('postgres', 'SELECT count(DISTINCT shard) FROM delivered'), '==', 2,
	'(a) changes of both shards were delivered');

# --- (b) the semantics in small ---------------------------------------------

$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE small (id int, v text) SERVER s OPTIONS (store 'feed_small', key 'id');
});
sub changes
{
	my ($since, $max, $cols) = @_;
	$cols //= q{op || ':' || coalesce(key, '') || ':' || coalesce("row"->>'v', '')};
	my $s = defined $since ? "'$since'" : 'NULL';
	my $m = defined $max ? $max : 10000;
	return $a->safe_psql('postgres', "SELECT string_agg($cols, ' ') FROM rollout_changes('small', $s, $m)");
}
sub next_of
{
	my ($since, $max) = @_;
	my $s = defined $since ? "'$since'" : 'NULL';
	my $m = defined $max ? $max : 10000;
	return $a->safe_psql('postgres', "SELECT next_since FROM rollout_changes('small', $s, $m) LIMIT 1");
}

is($a->safe_psql('postgres', q{SELECT count(*) FROM rollout_changes('small')}), '0',
	'(b) a store nobody wrote yet has no changes and no position');
$a->safe_psql('postgres', q{INSERT INTO small VALUES (3, 'c'), (1, 'a')});
$a->safe_psql('postgres', q{INSERT INTO small VALUES (2, 'b')});
is(changes(undef), 'upsert:1:a upsert:3:c upsert:2:b',
	'(b) from the start: commit order, one transaction in key order');
my $p1 = next_of(undef);
is(changes($p1), '', '(b) a poll with nothing new returns nothing');
$a->safe_psql('postgres', q{INSERT INTO small VALUES (1, 'a2')});
$a->safe_psql('postgres', q{INSERT INTO small VALUES (1, 'a3'), (4, 'd')});
$a->safe_psql('postgres', q{DELETE FROM small WHERE id = 3});
is(changes($p1), 'upsert:1:a3 upsert:4:d delete:3:',
	'(b) a key written twice comes once, as its newest version; a delete as delete');
# max_rows 1 never splits a transaction, and each poll goes on after the one
# before.  A poll returns each key's newest version among the sources it
# opened, and opens only those of the oldest versions it has not delivered:
# with the shared writer, the memtable's first batch alone (1:a2, which the
# next poll's 1:a3 supersedes); without it, the WAL entries, which are all
# read (their stamps are known once read), so 1:a2 is superseded in the first.
my @by_one = preload()
  ? ('upsert:1:a2', 'upsert:1:a3 upsert:4:d', 'delete:3:')
  : ('upsert:1:a3 upsert:4:d', 'delete:3:');
my ($by_one_pos, $p2, @by_one_got) = ($p1);
for (1 .. 5)
{
	my $got = changes($by_one_pos, 1);
	last if $got eq '';
	push @by_one_got, $got;
	$by_one_pos = next_of($by_one_pos, 1);
	$p2 = $by_one_pos if $got eq 'upsert:1:a3 upsert:4:d';
}
is(join(' | ', @by_one_got), join(' | ', @by_one),
	'(b) max_rows 1 does not split the transaction of two rows, and polls go on after each other');
$a->safe_psql('postgres', q{SELECT rollout_flush('small'); SELECT rollout_merge('small')});
is(changes($p1), 'upsert:1:a3 upsert:4:d delete:3:', '(b) the same after a flush and a merge');
is(changes($p2, 1), 'delete:3:', '(b) ... also from a position inside a flushed generation');
my $p3 = next_of($p1);
$a->safe_psql('postgres', q{TRUNCATE small; INSERT INTO small VALUES (9, 'i')});
is(changes($p3), 'truncate:: upsert:9:i', '(b) a TRUNCATE is one row, before what followed it');
is(changes($p1), 'truncate:: upsert:9:i', '(b) ... and hides what it removed from a consumer further back');
my $token = $a->safe_psql('postgres', q{SELECT rollout_snapshot('small')});
$a->safe_psql('postgres', q{INSERT INTO small VALUES (10, 'j')});
is(changes($token), 'upsert:10:j', '(b) a snapshot token is the position right after the snapshot');
my $p4 = next_of($token);
like($p4, qr/^cf1:/, '(b) ... and gives a cf1 position');
is(changes($p4), '', '(b) ... which has nothing after it');
my $token2 = $a->safe_psql('postgres', q{SELECT rollout_snapshot('small')});
is(changes($token2), 'position::', '(b) a token with nothing after it gives one position row');
is($a->safe_psql('postgres', qq{SELECT next_since FROM rollout_changes('small', '$token2')}), $p4,
	'(b) ... holding the same position as the poll that read up to there');
# A merge that commits between a snapshot's listings of the shard manifests
# and of the base: the token is taken again, never as a cut whose base holds
# rows its shard versions do not, which a feed would deliver twice.
$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE cut (id int, v text) SERVER s OPTIONS (store 'feed_cut', key 'id');
INSERT INTO cut VALUES (1, 'a');});
my $offset = -s $a->logfile;
my $taking = PsqlScript->start($a,
	sql => "SET rollout_fdw.fail_at = 'snapshot.after_shard_manifests:hold';\nSELECT rollout_snapshot('cut');\n");
wait_for_fault($a, 'snapshot.after_shard_manifests', $offset);
$a->safe_psql('postgres', q{INSERT INTO cut VALUES (2, 'b'); SELECT rollout_merge('cut')});
release_faults($a);
my ($ret, $token3, $taking_err) = $taking->finish;
hold_faults($a);
is($ret, 0, "(b) a snapshot a merge came between is taken") or diag($taking_err);
cmp_ok(count_in_log($a, qr/fault point "snapshot\.after_shard_manifests" reached/, $offset), '>=', 2,
	'(b) ... after listing the manifests again');
chomp $token3;
is($a->safe_psql('postgres', qq{SELECT string_agg(op, ' ') FROM rollout_changes('cut', '$token3')}), 'position',
	'(b) ... and a feed from its token delivers none of the merged rows');
# A shard that registers, commits and merges between those two listings is
# in the base: the token must name it, or a feed from the token would read
# that shard from its start and deliver its merged rows again.
$node{b}->safe_psql('postgres',
	q{CREATE FOREIGN TABLE cut (id int, v text) SERVER s OPTIONS (store 'feed_cut', key 'id');});
$offset = -s $a->logfile;
$taking = PsqlScript->start($a,
	sql => "SET rollout_fdw.fail_at = 'snapshot.after_shard_manifests:hold';\nSELECT rollout_snapshot('cut');\n");
wait_for_fault($a, 'snapshot.after_shard_manifests', $offset);
$node{b}->safe_psql('postgres', q{INSERT INTO cut VALUES (3, 'c'); SELECT rollout_merge('cut')});
release_faults($a);
($ret, my $token4, $taking_err) = $taking->finish;
hold_faults($a);
is($ret, 0, "(b) a snapshot a new shard's merge came between is taken") or diag($taking_err);
chomp $token4;
is($a->safe_psql('postgres', qq{BEGIN; SET LOCAL rollout_fdw.as_of = '$token4';
SELECT string_agg(id::text, ',' ORDER BY id) FROM cut; COMMIT;}),
	'1,2,3', "(b) ... holds the new shard's merged row");
is($a->safe_psql('postgres',
		qq{SELECT coalesce(string_agg(op || ':' || key, ' '), '') FROM rollout_changes('cut', '$token4') WHERE op <> 'position'}),
	'', '(b) ... and a feed from its token does not deliver it again');
like($a->safe_psql('postgres', qq{SELECT stamp > now() - interval '1 hour' AND shard IS NOT NULL FROM rollout_changes('small', '$token')}),
	qr/^t$/, '(b) a change carries its shard and a commit stamp');
# a fence marker (the claim of a restarted writer) moves the position without a change
$a->restart;
$a->safe_psql('postgres', q{SELECT rollout_flush('small')});
my $moved = $a->safe_psql('postgres', qq{SELECT op || ':' || (next_since <> '$p4') FROM rollout_changes('small', '$p4')});
ok($moved eq '' || $moved eq 'position:true',
	'(b) a poll past entries without changes returns no change, at most one position row') or diag($moved);

# A consumer far behind catches up with a small max_rows.  Each poll cut
# short moves the position over what it delivered whole (flushed
# generations; with the shared writer, the memtable's batches), so later
# polls do not read it again; a flush and a restart between polls change
# where the rows live, not what is delivered.
$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE catchup (id int, v text) SERVER s OPTIONS (store 'feed_catchup', key 'id');
INSERT INTO catchup VALUES (0, 'start');
});
my $catch_pos = $a->safe_psql('postgres', q{SELECT next_since FROM rollout_changes('catchup') LIMIT 1});
for my $g (0 .. 2)
{
	$a->safe_psql('postgres', "INSERT INTO catchup VALUES (" . ($g * 10 + $_) . ", 'x')") for 1 .. 10;
	$a->safe_psql('postgres', q{SELECT rollout_flush('catchup')});
}
$a->safe_psql('postgres', "INSERT INTO catchup VALUES ($_, 'y')") for 31 .. 42;
my (@caught, %positions);
for my $poll (1 .. 40)
{
	my $out = $a->safe_psql('postgres', qq{
SELECT string_agg(key, ' ' ORDER BY ordinality) || '|' || max(next_since)
  FROM rollout_changes('catchup', '$catch_pos', 4) WITH ORDINALITY WHERE op = 'upsert'});
	last if $out eq '' || $out =~ /^\|/;
	my ($keys, $next) = split /\|/, $out;
	my @keys = split / /, $keys;
	push @caught, @keys;
	my ($p) = $next =~ /=(\d+)\//;
	$positions{$p} = 1;
	$catch_pos = $next;
	$a->safe_psql('postgres', q{SELECT rollout_flush('catchup')}) if $poll == 8;
	$a->restart if $poll == 9;
}
is(join(' ', @caught), join(' ', 1 .. 42),
	'(b) a consumer catching up 4 rows a poll gets every row once, in commit order');
cmp_ok(scalar(keys %positions), '>=', 4,
	'(b) ... and its position moves in polls that max_rows cut short')
  or diag(join(' ', sort { $::a <=> $::b } keys %positions));

# Positions a flush sealed without a generation (here a TRUNCATE alone) hold
# no rows, and a poll cut short moves the position past them.  Before, it
# stopped in front of the first one for as long as every poll was cut short,
# walking back to its manifest version at each, and lost the position once gc
# removed that version (the review of 6 Dec).
$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE gap (id int, v text) SERVER s OPTIONS (store 'feed_gap', key 'id');
INSERT INTO gap VALUES (0, 'start');
SELECT 1 FROM rollout_flush('gap');
});
my $gap_pos = $a->safe_psql('postgres', q{SELECT max(next_since) FROM rollout_changes('gap')});
my ($gap_from) = $gap_pos =~ /=(\d+)\//;
$a->safe_psql('postgres', q{TRUNCATE gap; SELECT 1 FROM rollout_flush('gap');});
for my $g (0 .. 2)
{
	$a->safe_psql('postgres', "INSERT INTO gap VALUES (" . ($g * 6 + $_) . ", 'x')") for 1 .. 6;
	$a->safe_psql('postgres', q{SELECT rollout_flush('gap')});
}
my (@gap_keys, @gap_positions, $gap_truncates);
for my $poll (1 .. 30)
{
	my $out = $a->safe_psql('postgres', qq{
SELECT coalesce(string_agg(key, ' ' ORDER BY ordinality) FILTER (WHERE op = 'upsert'), '') || '|'
       || count(*) FILTER (WHERE op = 'truncate') || '|' || max(next_since)
  FROM rollout_changes('gap', '$gap_pos', 4) WITH ORDINALITY});
	my ($keys, $truncates, $next) = split /\|/, $out;
	last if !defined $next || $next eq '';
	push @gap_keys, split / /, $keys;
	$gap_truncates += $truncates;
	push @gap_positions, ($next =~ /=(\d+)\//)[0];
	$gap_pos = $next;
	last if @gap_keys == 18;
}
is(join(' ', @gap_keys), join(' ', 1 .. 18), '(b) past a TRUNCATE flushed alone: every row once, in commit order');
is($gap_truncates, 1, '(b) ... after one truncate row');
cmp_ok($gap_positions[0], '>=', $gap_from + 1,
	'(b) ... and the first poll cut short moves the position past the position the TRUNCATE took')
  or diag("from $gap_from: @gap_positions");

# With the shared writer, a new store's WAL starts with the claim's fence,
# which has no batch in the memtable: a poll cut short steps over it, so its
# position moves past what it delivered.  Before, it stayed in front of the
# fence until a flush, and every poll copied again every batch it had
# already delivered (a drain quadratic in the unflushed backlog).
if (preload())
{
	$a->safe_psql('postgres', q{CREATE FOREIGN TABLE fenced (id int, v text) SERVER s OPTIONS (store 'feed_fenced', key 'id');});
	$a->safe_psql('postgres', join('', map { "INSERT INTO fenced VALUES ($_, 'x');\n" } 1 .. 12));
	my ($fenced_pos, @fenced_keys, @fenced_positions) = ('NULL');
	for my $poll (1 .. 10)
	{
		my $out = $a->safe_psql('postgres', qq{
SELECT coalesce(string_agg(key, ' ' ORDER BY ordinality) FILTER (WHERE op = 'upsert'), '') || '|' || max(next_since)
  FROM rollout_changes('fenced', $fenced_pos, 3) WITH ORDINALITY});
		my ($keys, $next) = split /\|/, $out;
		last if $keys eq '';
		push @fenced_keys, split / /, $keys;
		push @fenced_positions, ($next =~ /=(\d+)\//)[0];
		$fenced_pos = "'$next'";
	}
	is(join(' ', @fenced_keys), join(' ', 1 .. 12),
		'(b) an unflushed new store drained 3 rows a poll: every row once, in commit order');
	is(join(' ', @fenced_positions[0 .. 2]), '4 7 10',
		'(b) ... and each poll cut short moves the position past the fence and what it delivered');
}

# A poll opens only the sources of the oldest versions it has not delivered,
# about max_rows of them, whatever the backlog behind them: twelve flushed
# generations of 5 rows, and with the shared writer 20 single-row batches in
# the memtable, drained 5 at a time (the feed says at DEBUG1 what it read).
$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE drain (id int, v text) SERVER s OPTIONS (store 'feed_drain', key 'id');
INSERT INTO drain VALUES (0, 'start');
});
my $drain_pos = $a->safe_psql('postgres', q{SELECT next_since FROM rollout_changes('drain') LIMIT 1});
my $drain_rows = 60 + (preload() ? 20 : 0);
$a->safe_psql('postgres', join('',
	map { "INSERT INTO drain VALUES ($_, 'x');\n" . ($_ % 5 == 0 ? "SELECT rollout_flush('drain');\n" : '') } 1 .. 60));
$a->safe_psql('postgres', join('', map { "INSERT INTO drain VALUES ($_, 'y');\n" } 61 .. $drain_rows));
my (@drained, @reads);
for my $poll (1 .. 40)
{
	my ($rc, $out, $err) = $a->psql('postgres', qq{
SET client_min_messages = debug1;
SELECT string_agg(key, ' ' ORDER BY ordinality) || '|' || max(next_since)
  FROM rollout_changes('drain', '$drain_pos', 5) WITH ORDINALITY WHERE op = 'upsert';
});
	die "poll failed: $err" if $rc != 0;
	push @reads, "$1/$2" if $err =~ /change feed of store "feed_drain": (\d+) of (\d+) sources/;
	last if $out eq '' || $out =~ /^\|/;
	my ($keys, $next) = split /\|/, $out;
	push @drained, split / /, $keys;
	$drain_pos = $next;
}
is(join(' ', @drained), join(' ', 1 .. $drain_rows),
	'(b) a consumer draining a backlog 5 rows a poll gets every row once, in commit order');
my @wide = grep { my ($read) = split m{/}; $read > 5 } @reads;
ok(@reads > 12 && (split m{/}, $reads[0])[1] >= 12 && !@wide,
	'(b) ... and no poll opens more than 5 of the sources behind it')
  or diag("sources read/after the position, per poll: @reads");

# A call returns no change only when there is none, also when the sources a
# poll would open first hold nothing to return: (1) a backlog of generations
# that a TRUNCATE then hid; (2) a key written in every commit, so that its
# older versions are superseded by one the poll does not reach (without the
# shared writer, a WAL entry every poll reads).
$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE hot (id int, v text) SERVER s OPTIONS (store 'feed_hot', key 'id');
INSERT INTO hot VALUES (0, 'start');
});
my $hot_pos = $a->safe_psql('postgres', q{SELECT next_since FROM rollout_changes('hot') LIMIT 1});
$a->safe_psql('postgres', join('',
	map { "INSERT INTO hot VALUES ($_, 'x');\n" . ($_ % 5 == 0 ? "SELECT rollout_flush('hot');\n" : '') } 1 .. 60));
$a->safe_psql('postgres', q{TRUNCATE hot; INSERT INTO hot VALUES (100, 'after'), (101, 'after');});
is($a->safe_psql('postgres', qq{SELECT string_agg(op || ':' || coalesce(key, ''), ' ' ORDER BY ordinality)
  FROM rollout_changes('hot', '$hot_pos', 5) WITH ORDINALITY}),
	'truncate: upsert:100 upsert:101',
	'(b) a consumer behind a TRUNCATE gets it and what followed in one call, not the hidden backlog');
# (1') the same with an unflushed backlog: with the shared writer the
# batches below the TRUNCATE's cut do not count against max_rows, so one
# round of the call copies them all (the feed says each round at DEBUG1);
# before, a round copied max_rows of them, and the call went round once
# per max_rows rows it never returned.
$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE hot_tail (id int, v text) SERVER s OPTIONS (store 'feed_hot_tail', key 'id');
INSERT INTO hot_tail VALUES (0, 'start');
});
my $tail_pos = $a->safe_psql('postgres', q{SELECT next_since FROM rollout_changes('hot_tail') LIMIT 1});
$a->safe_psql('postgres', join('', map { "INSERT INTO hot_tail VALUES ($_, 'x');\n" } 1 .. 200));
$a->safe_psql('postgres', q{TRUNCATE hot_tail; INSERT INTO hot_tail VALUES (300, 'after');});
my ($tail_rc, $tail_out, $tail_err) = $a->psql('postgres', qq{
SET client_min_messages = debug1;
SELECT string_agg(op || ':' || coalesce(key, ''), ' ' ORDER BY ordinality)
  FROM rollout_changes('hot_tail', '$tail_pos', 1) WITH ORDINALITY});
is($tail_out, 'truncate: upsert:300',
	'(b) a consumer behind a TRUNCATE of an unflushed tail gets it and what followed in one call')
  or diag($tail_err);
my $rounds = () = $tail_err =~ /change feed of store "feed_hot_tail"/g;
ok(!preload() || $rounds <= 2, "(b) ... in one or two rounds, not one per row hidden ($rounds)");

$hot_pos = $a->safe_psql('postgres', q{SELECT next_since FROM rollout_changes('hot') LIMIT 1});
for my $g (1 .. 12)
{
	$a->safe_psql('postgres', "INSERT INTO hot VALUES (7, 'v$g');\n" . "SELECT rollout_flush('hot');\n");
}
$a->safe_psql('postgres', q{INSERT INTO hot VALUES (7, 'newest')});
my (@hot_got, $hot_empty);
for my $call (1 .. 30)
{
	my $out = $a->safe_psql('postgres', qq{
SELECT coalesce(string_agg("row"->>'v', ' ' ORDER BY ordinality), '') || '|' || max(next_since)
  FROM rollout_changes('hot', '$hot_pos', 1) WITH ORDINALITY WHERE op <> 'position'});
	my ($values, $next) = split /\|/, $out;
	if ($values eq '')
	{
		$hot_empty = $call if !@hot_got || $hot_got[-1] ne 'newest';
		last;
	}
	push @hot_got, $values;
	$hot_pos = $next;
}
ok(!defined $hot_empty && @hot_got && $hot_got[-1] eq 'newest',
	'(b) a key written in every commit: no call comes back empty before its newest version')
  or diag('empty call ' . ($hot_empty // 'none') . ', got: ' . join(' ', @hot_got));

# --- (c) garbage collection passes a consumer ---------------------------------

$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE lag (id int, v int) SERVER s OPTIONS (store 'feed_lag', key 'id');
INSERT INTO lag SELECT g, g FROM generate_series(1, 10) g;
});
my $lag_pos = $a->safe_psql('postgres', q{SELECT next_since FROM rollout_changes('lag') LIMIT 1});
for my $i (1 .. 3)
{
	$a->safe_psql('postgres', "INSERT INTO lag SELECT g, g FROM generate_series($i * 100, $i * 100 + 9) g");
	$a->safe_psql('postgres', q{SELECT rollout_flush('lag')});
}
is($a->safe_psql('postgres', qq{SELECT count(*) FROM rollout_changes('lag', '$lag_pos')}), '30',
	'(c) before gc a lagging consumer gets everything after its position');
$a->safe_psql('postgres', q{SELECT rollout_merge('lag')});
is($a->safe_psql('postgres', qq{SELECT count(*) FROM rollout_changes('lag', '$lag_pos')}), '30',
	'(c) ... also after the merge dropped the generations from the newest manifest');
# a poll that listed the older manifests' generations, which gc then removes
# before the poll opens them
my $gc_offset = -s $a->logfile;
my $held_poll = PsqlScript->start($a,
	sql => "\\set VERBOSITY verbose\nSET rollout_fdw.fail_at = 'feed.after_sources:hold';\nSELECT count(*) FROM rollout_changes('lag', '$lag_pos');\n");
wait_for_fault($a, 'feed.after_sources', $gc_offset);
$a->safe_psql('postgres', q{SELECT rollout_gc('lag', '0 seconds')});
release_faults($a);
my ($held_ret, $held_out, $held_err) = $held_poll->finish;
hold_faults($a);
isnt($held_ret, 0, '(c) a poll whose generations gc removed after it listed them fails');
like($held_err, qr/72000.*change feed position \d+ of shard "[^"]+" in store "feed_lag" is older than what garbage collection kept/s,
	'(c) ... as too old');
like($held_err, qr/The oldest position still available in that shard is \d+/, '(c) ... naming the oldest position still available');
my ($ok, $out, $err) = try_sql($a,
	qq{\\set VERBOSITY verbose\nSELECT count(*) FROM rollout_changes('lag', '$lag_pos')});
ok(!$ok, '(c) after gc passed the position, the poll fails');
like($err, qr/72000.*change feed position \d+ of shard "[^"]+" in store "feed_lag" is older than what garbage collection kept/s,
	'(c) ... with SQLSTATE 72000 and the position');
like($err, qr/The oldest position still available in that shard is \d+/, '(c) ... naming the oldest position still available');
my $lag_token = $a->safe_psql('postgres', q{SELECT rollout_snapshot('lag')});
$a->safe_psql('postgres', q{INSERT INTO lag VALUES (1000, 1000)});
is($a->safe_psql('postgres', qq{SELECT string_agg(key, ',') FROM rollout_changes('lag', '$lag_token')}),
	'1000', '(c) a consumer starts again from a snapshot token');

# A consumer draining a merged generation in small polls, each well within
# gc's grace, never meets the error: the poll that reaches a generation a
# merge took out of the newest manifest returns all of it.  Before, it
# returned max_rows of it and kept the position in front of the generation,
# which gc removed once its grace after the merge had passed.
$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE drained (id int, v int) SERVER s OPTIONS (store 'feed_drained', key 'id');
INSERT INTO drained VALUES (0, 0);});
my $merged_pos = $a->safe_psql('postgres', q{SELECT next_since FROM rollout_changes('drained') LIMIT 1});
$a->safe_psql('postgres', join('', map { "INSERT INTO drained VALUES ($_, $_);\n" } 1 .. 60));
$a->safe_psql('postgres', q{SELECT rollout_flush('drained'); SELECT rollout_merge('drained');});
my ($drained, $drain_next) = split /\|/, $a->safe_psql('postgres',
	qq{SELECT count(*) FILTER (WHERE op = 'upsert'), max(next_since) FROM rollout_changes('drained', '$merged_pos', 10)});
is($drained, '60', '(c) a poll that reaches a generation a merge took returns all of it, past max_rows');
sleep 2;
$a->safe_psql('postgres', q{SELECT rollout_gc('drained', '1 second')});
($ok, $out, $err) = try_sql($a, qq{SELECT count(*) FROM rollout_changes('drained', '$drain_next', 10)});
ok($ok, "(c) ... so the next poll, within gc's grace of the last one, does not find it gone") or diag($err);
is($out, '0', '(c) ... and has nothing more to return');

# an adopted ingest segment (one position inside its flush's range) left
# behind by a merge that took its flush's other generation
$a->safe_psql('postgres', q{
CREATE FOREIGN TABLE ing (id int, v text) SERVER s OPTIONS (store 'feed_ingest', key 'id');
INSERT INTO ing VALUES (1, 'a');
});
my $ing_pos = $a->safe_psql('postgres', q{SELECT next_since FROM rollout_changes('ing') LIMIT 1});
$a->safe_psql('postgres', q{
SET rollout_fdw.ingest_threshold = '64kB';
INSERT INTO ing SELECT g, repeat(md5(g::text), 8) FROM generate_series(100, 2099) g;
RESET rollout_fdw.ingest_threshold;
INSERT INTO ing VALUES (2, 'b'), (3, 'c');
SELECT rollout_flush('ing');
});
my $ing_gens = $a->safe_psql('postgres', q{SELECT generations FROM rollout_observe('ing')});
$a->safe_psql('postgres', q{SELECT rollout_merge('ing', 1)});
is($a->safe_psql('postgres', qq{SELECT count(*) FROM rollout_changes('ing', '$ing_pos')}),
	'2002', "(c) a merge that leaves a flush's adopted ingest segment behind loses no change ($ing_gens generations before it)");

# --- (d) bad input and privileges ---------------------------------------------

for my $case (
	[ q{'garbage'}, qr/invalid change feed position "garbage"/, 'a position that is not one' ],
	[ q{'cf1:0000:0:bad shard=1/1/1/1'}, qr/invalid change feed position/, 'a malformed position' ],
	[ q{'rs1:x'}, qr/invalid snapshot token/, 'a malformed snapshot token' ],
	[ "'$p4', 0", qr/max_rows must be at least 1/, 'max_rows 0' ],
	[ "'" . ($p4 =~ s/:(\d+):(.*)$/:$1:$2,$2/r) . "'", qr/invalid change feed position/, 'a shard named twice' ],
	[ "'$p4,'", qr/invalid change feed position/, 'a position with a trailing comma' ],
	[ "'" . ($p4 =~ s/=\d+\//=9223372036854775806\//r) . "'", qr/invalid change feed position/, 'a position past any store' ])
{
	my ($since, $re, $what) = @$case;
	my ($ok2, undef, $err2) = try_sql($a, "SELECT * FROM rollout_changes('small', $since)");
	ok(!$ok2 && $err2 =~ $re, "(d) refused: $what") or diag($err2);
}
my ($ok3, undef, $err3) = try_sql($a, qq{SELECT * FROM rollout_changes('lag', '$p4')});
ok(!$ok3 && $err3 =~ /is not a position in store "feed_lag"/, '(d) refused: a position of another store')
  or diag($err3);

# A position or token is text anyone with SELECT may pass, of any length:
# parsing 200,000 shard entries is linear and the error quotes only its
# start (a check of every pair took 12 s for 80,000, past statement_timeout
# and any cancel).
{
	my $inc = ($p4 =~ /^cf1:([^:]+):/)[0];
	my $many_pos = q{(SELECT string_agg('s' || i || '=1/1/1/1', ',') FROM generate_series(1, 200000) i)};
	my $many_tok = q{(SELECT string_agg('s' || i || '=1', ',') FROM generate_series(1, 200000) i)};
	my ($ok7, $out7, $err7) = try_sql($a,
		"SET statement_timeout = '20s'; SELECT count(*) FROM rollout_changes('small', 'cf1:$inc:0:' || $many_pos || ',s5=1/1/1/1')");
	ok(!$ok7 && $err7 =~ /invalid change feed position "cf1:\Q$inc\E:0:s1=1\/1\/1\/1,s2=.{20,200}\.\.\."\n/,
		'(d) refused: a shard named twice in a position of 200,000 shards, quoted by its start only')
	  or diag(substr($err7, 0, 500));
	($ok7, $out7, $err7) = try_sql($a,
		"SET statement_timeout = '20s'; SELECT rollout_retain('small', 'rs1:$inc:0:' || $many_tok || ',s7=2', now() + interval '1 hour')");
	ok(!$ok7 && $err7 =~ /invalid snapshot token "rs1:\Q$inc\E:0:s1=1,s2=1.{20,200}\.\.\."\n.*lists shard "s7" twice/s,
		'(d) refused: a shard named twice in a token of 200,000 shards, quoted by its start only')
	  or diag(substr($err7, 0, 500));
	($ok7, $out7, $err7) = try_sql($a,
		"SET statement_timeout = '20s'; SELECT count(*) FROM rollout_changes('small', 'cf1:$inc:0:' || $many_pos)");
	ok($ok7, '(d) a well-formed position of 200,000 unknown shards is read within statement_timeout')
	  or diag(substr($err7, 0, 500));
}
my $pinned = $a->safe_psql('postgres', q{SELECT rollout_snapshot('small')});
$a->safe_psql('postgres', qq{CREATE FOREIGN TABLE small_pinned (id int, v text) SERVER s OPTIONS (store 'feed_small', key 'id', as_of '$pinned')});
my ($ok6, undef, $err6) = try_sql($a, q{SELECT * FROM rollout_changes('small_pinned')});
ok(!$ok6 && $err6 =~ /rollout_changes cannot read foreign table "small_pinned": it reads the named snapshot of its option as_of/,
	'(d) refused: a table pinned to a named snapshot') or diag($err6);
$a->safe_psql('postgres', q{
CREATE ROLE reader LOGIN; GRANT SELECT ON small TO reader;
CREATE ROLE stranger LOGIN;
GRANT USAGE ON FOREIGN SERVER s TO reader, stranger;
});
is($a->safe_psql('postgres', qq{SET ROLE reader; SELECT count(*) FROM rollout_changes('small', '$token')}),
	'1', '(d) a role with SELECT on the table reads its feed');
my ($ok4, undef, $err4) = try_sql($a, q{SET ROLE stranger; SELECT * FROM rollout_changes('small')});
ok(!$ok4 && $err4 =~ /permission denied for foreign table small/, '(d) a role without SELECT does not')
  or diag($err4);

# --- (e) a handle opened before the store existed ----------------------------

# late for the feed, late2 for a snapshot token: each session's first use
for my $n ($a, $node{b})
{
	$n->safe_psql('postgres', q{
CREATE FOREIGN TABLE late (id int, v int) SERVER s OPTIONS (store 'feed_late', key 'id');
CREATE FOREIGN TABLE late2 (id int, v int) SERVER s OPTIONS (store 'feed_late2', key 'id');
});
}
# the session waits on an advisory lock the test holds between its two looks
my $gate = $a->background_psql('postgres');
$gate->query_safe('SELECT pg_advisory_lock(55055)');
my ($late_out, $late_err) = ('', '');
my $h = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $a->connstr('postgres'),
	  '-c', q{SELECT count(*) FROM rollout_changes('late')},
	  '-c', q{SELECT count(*) FROM late2},
	  '-c', q{SELECT pg_advisory_lock(55055)},
	  '-c', q{SELECT op || ':' || key || ' ' || next_since FROM rollout_changes('late')},
	  '-c', q{SELECT rollout_snapshot('late2')} ],
	'>', \$late_out, '2>', \$late_err);
$a->poll_query_until('postgres',
	q{SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = 55055 AND NOT granted)})
  or die 'the session did not reach the advisory lock';
$node{b}->safe_psql('postgres', q{
INSERT INTO late VALUES (7, 7); INSERT INTO late2 VALUES (7, 7);
SELECT rollout_flush('late2');
});
$gate->query_safe('SELECT pg_advisory_unlock(55055)');
$h->finish;
$gate->quit;
# (pg_advisory_lock prints an empty line, left out)
my @late = grep { $_ ne '' } split /\n/, $late_out;
is("@late[0, 1]", '0 0', '(e) before the stores exist the session sees nothing') or diag($late_err);
like($late[2] // '', qr/^upsert:7 cf1:/, '(e) the same session then sees the other cluster\'s row') or diag($late_err);
my ($late_pos) = ($late[2] // '') =~ / (cf1:\S+)$/;
my $late_token = $late[3] // '';
$node{b}->safe_psql('postgres', q{INSERT INTO late VALUES (8, 8)});
is($node{b}->safe_psql('postgres', qq{SELECT string_agg(key, ',') FROM rollout_changes('late', '$late_pos')}),
	'8', '(e) ... and its position is one of the store as it exists');
my ($ok5, $as_of, $err5) = try_sql($node{b},
	qq{SET rollout_fdw.as_of = '$late_token'; SELECT string_agg(id::text, ',') FROM late2});
is($as_of, '7', '(e) ... and so is a snapshot token it takes') or diag($err5);

done_testing();
