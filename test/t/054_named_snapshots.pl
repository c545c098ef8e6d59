
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 054_named_snapshots.pl — named snapshots (core/named_snapshot.c):
#   (a) rollout_snapshot returns a token; with rollout_fdw.as_of set to it,
#       scans read the store as it was, whatever was inserted, updated,
#       deleted, truncated, flushed, merged and compacted since, serially
#       and in parallel, while the store as it is now reads differently;
#       the transaction's own rows are not part of the past; a table of
#       another store is not affected; writes are refused while as_of
#       applies;
#   (b) the table option as_of does the same for one table; bad tokens are
#       refused as options and settings;
#   (c) retention: gc keeps what a retained token reads and collects what
#       an unretained one read, which then fails as expired; rollout_release
#       lets gc collect it; an expired retention is deleted by gc;
#       rollout_retain of an expired token is refused and leaves nothing,
#       and so is one of a token the store moved past longer than
#       min_gc_grace ago that no retention keeps (a running gc may be
#       removing what it reads); a retained token can be retained longer;
#   (d) random rounds: a token per round, retained, each checked against a
#       heap copy of the table at that moment after every round's changes
#       and maintenance, and after gc;
#   (e) privileges: a role with SELECT reads a snapshot but cannot take,
#       retain or release one; reading as of a snapshot needs SELECT on
#       the table itself or the columns read (a view's grantee, a SECURITY
#       DEFINER function's caller without it are refused; a partitioned
#       table's grantee reads its rollout partition);
#   (f) a second cluster, not preloaded, that has written only WAL entries:
#       its shard has no manifest yet, and a token names it at version 0;
#       that token reads as of its moment (without those rows), starts a
#       change feed that delivers them, and can be retained.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node try_sql loop_size with_min_gc_grace);
use Test::More;

my $seed = $ENV{ROLLOUT_TEST_SEED} // 54;
srand($seed);
note("seed $seed");

# min_gc_grace 0: gc collects what no kept manifest names at once
my $node = mode_node('named',
	conf => [ 'rollout_fdw.rows_per_group = 50', 'rollout_fdw.min_gc_grace = 0' ]);
my $store = RolloutStore->for_test('054_named_snapshots');
$store->create_extension_and_server($node);

$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE e (id int NOT NULL, v int, note text) SERVER s OPTIONS (store 'named', key 'id');
CREATE FOREIGN TABLE other (id int NOT NULL, v int) SERVER s OPTIONS (store 'other', key 'id');
INSERT INTO other SELECT g, g FROM generate_series(1, 30) g;
INSERT INTO e SELECT g, g, 'first' FROM generate_series(1, 300) g;
CREATE TABLE h1 AS SELECT * FROM e;
});

# The rows of e read as of $token (or now, with undef) that are not in heap
# $heap, plus those of $heap not read: 0 when the read is the heap.
sub differences
{
	my ($token, $heap, %opts) = @_;
	my $set = defined $token ? "SET rollout_fdw.as_of = '$token';" : '';
	my $parallel = $opts{parallel}
	  ? 'SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2;'
	  : '';
	my $table = $opts{table} // 'e';
	return $node->safe_psql('postgres', qq{$set $parallel
SELECT count(*) FROM ((SELECT * FROM $table EXCEPT ALL SELECT * FROM $heap)
  UNION ALL (SELECT * FROM $heap EXCEPT ALL SELECT * FROM $table)) d});
}

sub snapshot_reads
{
	my ($token, $heap, $what, %opts) = @_;
	is(differences($token, $heap, %opts), 0, $what);
}

# --- (a) as_of reads the past -----------------------------------------------
my $t1 = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e')});
like($t1, qr/^rs1:[0-9a-f-]+:\d+:[A-Za-z0-9_-]+=\d+$/, 'rollout_snapshot returns a token');

$node->safe_psql('postgres', q{
UPDATE e SET v = -v, note = 'second' WHERE id % 3 = 0;
DELETE FROM e WHERE id % 7 = 0;
INSERT INTO e SELECT g, g, 'second' FROM generate_series(301, 360) g;
SELECT 1 FROM rollout_flush('e');
SELECT 1 FROM rollout_merge('e');
UPDATE e SET note = 'third' WHERE id % 5 = 0;
SELECT 1 FROM rollout_merge('e');
SELECT 1 FROM rollout_compact('e', min_fragments => 1);
DELETE FROM e WHERE id % 11 = 0;
});
cmp_ok(differences(undef, 'h1'), '>', 100, 'the store as it is now differs from the first copy');
snapshot_reads($t1, 'h1', 'as_of reads the store as it was at rollout_snapshot');
snapshot_reads($t1, 'h1', 'the same in a parallel scan', parallel => 1);
is($node->safe_psql('postgres', qq{SET rollout_fdw.as_of = '$t1'; SELECT count(*) FROM e WHERE id = 14}),
	1, 'a key deleted since is there as of the token');
is($node->safe_psql('postgres', qq{SET rollout_fdw.as_of = '$t1'; SELECT count(*) FROM other}),
	30, 'a table of another store is read as it is now');

# the transaction's own rows are not part of the past
is($node->safe_psql('postgres', qq{BEGIN; INSERT INTO e VALUES (9999, 1, 'mine');
SET LOCAL rollout_fdw.as_of = '$t1'; SELECT count(*) FROM e WHERE id = 9999; ROLLBACK;}),
	0, "a transaction's own uncommitted rows are not read as of a token");

for my $write (
	q{INSERT INTO e VALUES (5000, 1, 'x')},
	q{UPDATE e SET v = 0 WHERE id = 1},
	q{DELETE FROM e WHERE id = 1},
	q{TRUNCATE e})
{
	my ($ok, $out, $err) = try_sql($node, "SET rollout_fdw.as_of = '$t1'; $write");
	ok(!$ok && $err =~ /cannot modify foreign table "e" while it is read as of a named snapshot/,
		"$write is refused while as_of applies") or diag($err);
}
my ($ok, $out, $err) = try_sql($node, qq{SET rollout_fdw.as_of = '$t1'; INSERT INTO other VALUES (31, 31)});
ok($ok, 'a table of another store can be written while as_of names another store') or diag($err);

# a TRUNCATE after a token hides nothing the token reads
$node->safe_psql('postgres', q{CREATE TABLE h2 AS SELECT * FROM e});
my $t2 = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e', now() + interval '1 hour')});
$node->safe_psql('postgres', q{TRUNCATE e; INSERT INTO e VALUES (1, 1, 'after truncate'); SELECT 1 FROM rollout_flush('e');});
is($node->safe_psql('postgres', 'SELECT count(*) FROM e'), 1, 'after TRUNCATE the store holds one row');
snapshot_reads($t2, 'h2', 'a token taken before a TRUNCATE reads the rows the TRUNCATE hid');

# --- (b) the table option --------------------------------------------------
$node->safe_psql('postgres',
	qq{CREATE FOREIGN TABLE e_then (id int NOT NULL, v int, note text) SERVER s OPTIONS (store 'named', key 'id', as_of '$t2')});
snapshot_reads(undef, 'h2', 'a table with the option as_of reads its snapshot', table => 'e_then');
like($node->safe_psql('postgres', 'EXPLAIN SELECT * FROM e_then'), qr/As Of: \Q$t2\E/,
	'EXPLAIN shows the snapshot a table with as_of reads');
like($node->safe_psql('postgres', qq{SET rollout_fdw.as_of = '$t2'; EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM e}),
	qr/As Of: \Q$t2\E/, 'EXPLAIN ANALYZE shows the snapshot rollout_fdw.as_of makes a scan read');
($ok, $out, $err) = try_sql($node, q{INSERT INTO e_then VALUES (5000, 1, 'x')});
ok(!$ok && $err =~ /while it is read as of a named snapshot/, 'a table with as_of cannot be written')
  or diag($err);
# Nor does what shows the store as it is now show it through such a table,
# which may be what a role was granted instead of the store: before, a role
# with SELECT on e_then alone learned the live row counts this way.
for my $call (q{SELECT * FROM rollout_observe('e_then', true)},
	q{SELECT * FROM rollout_should_compact('e_then')},
	q{SELECT * FROM rollout_compaction_stats('e_then')},
	q{SELECT * FROM rollout_retained('e_then')})
{
	($ok, $out, $err) = try_sql($node, $call);
	ok(!$ok && $err =~ /cannot read foreign table "e_then": it reads the named snapshot of its option as_of/,
		"$call is refused for a table with as_of") or diag($err);
}
for my $bad ('nope', 'rs1:xyz:1:', 'rs1:abc:-1:', 'rs1:abc:1:bad shard=1', 'rs1:abc:1:s=-1', 'rs1:abc:1:s=')
{
	($ok, $out, $err) = try_sql($node, qq{ALTER FOREIGN TABLE e_then OPTIONS (SET as_of '$bad')});
	ok(!$ok && $err =~ /invalid value for option "as_of"/, "option as_of '$bad' is refused") or diag($err);
	# (a first read loads the library, which checks the setting from then on)
	($ok, $out, $err) = try_sql($node, qq{SELECT count(*) FROM other; SET rollout_fdw.as_of = '$bad'});
	ok(!$ok && $err =~ /invalid value for parameter "rollout_fdw.as_of"/, "setting as_of '$bad' is refused")
	  or diag($err);
}
my $t_other = $node->safe_psql('postgres', q{SELECT rollout_snapshot('other')});
($ok, $out, $err) = try_sql($node, qq{ALTER FOREIGN TABLE e_then OPTIONS (SET as_of '$t_other'); SELECT count(*) FROM e_then});
ok(!$ok && $err =~ /is not a snapshot of store "named"/, "a table option naming another store's snapshot is an error")
  or diag($err);
$node->safe_psql('postgres', qq{ALTER FOREIGN TABLE e_then OPTIONS (SET as_of '$t2')});

# ANALYZE of a pinned table samples its snapshot, and the planner counts its
# rows there: pg_stats and reltuples are public, and EXPLAIN is anyone's with
# SELECT.  Before, all three showed the live store (its values included).
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE pin_live (id int NOT NULL, note text) SERVER s OPTIONS (store 'pinned', key 'id');
INSERT INTO pin_live SELECT g, 'then' FROM generate_series(1, 10) g;
});
my $t_pin = $node->safe_psql('postgres', q{SELECT rollout_snapshot('pin_live')});
$node->safe_psql('postgres', qq{
CREATE FOREIGN TABLE pin_then (id int NOT NULL, note text) SERVER s OPTIONS (store 'pinned', key 'id', as_of '$t_pin');
INSERT INTO pin_live SELECT g, 'LIVE-ONLY' FROM generate_series(11, 2010) g;
SELECT 1 FROM rollout_flush('pin_live');
ANALYZE pin_then;
});
is($node->safe_psql('postgres', q{SELECT reltuples FROM pg_class WHERE relname = 'pin_then'}), '10',
	'ANALYZE of a pinned table counts the rows of its snapshot');
is($node->safe_psql('postgres', q{SELECT string_agg(most_common_vals::text || coalesce(histogram_bounds::text, ''), ' ')
	FROM pg_stats WHERE tablename = 'pin_then' AND attname = 'note'}), '{then}',
	'... and its statistics hold the values of the snapshot alone');
like($node->safe_psql('postgres', q{EXPLAIN SELECT * FROM pin_then}), qr/rows=10 /,
	"the planner counts the snapshot's rows");
like($node->safe_psql('postgres', q{EXPLAIN SELECT * FROM pin_live}), qr/rows=2010 /,
	"... and the live store's for a table that is not pinned");
$node->safe_psql('postgres', q{SET rollout_fdw.as_of = '' ; ANALYZE pin_live});
is($node->safe_psql('postgres', q{SELECT reltuples FROM pg_class WHERE relname = 'pin_live'}), '2010',
	'ANALYZE of the live table counts the live store');
like($node->safe_psql('postgres', qq{SET rollout_fdw.as_of = '$t_pin'; ANALYZE pin_live; SELECT reltuples FROM pg_class WHERE relname = 'pin_live'}),
	qr/^2010$/m, "... also in a session whose rollout_fdw.as_of names a snapshot: the statistics are the table's");

# --- (c) retention ------------------------------------------------------------
my $t3 = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e')});    # not retained
$node->safe_psql('postgres', q{CREATE TABLE h3 AS SELECT * FROM e});
$node->safe_psql('postgres', q{
INSERT INTO e SELECT g, g, 'later' FROM generate_series(2, 200) g;
SELECT 1 FROM rollout_merge('e');
SELECT 1 FROM rollout_compact('e', min_fragments => 1);
SELECT 1 FROM rollout_gc('e', '0');
});
snapshot_reads($t2, 'h2', 'gc keeps what a retained token reads');
snapshot_reads(undef, 'h2', 'and the table option still reads it', table => 'e_then');
for my $token ($t1, $t3)
{
	($ok, $out, $err) = try_sql($node, qq{SET rollout_fdw.as_of = '$token'; SELECT count(*) FROM e});
	ok(!$ok && $err =~ /snapshot "\Q$token\E" of store "named" has expired/,
		'an unretained token is expired once gc collected what it read') or diag($err);
}
($ok, $out, $err) = try_sql($node, qq{SELECT rollout_retain('e', '$t3', now() + interval '1 hour')});
ok(!$ok && $err =~ /has expired/, 'rollout_retain of an expired token is refused') or diag($err);
# ANALYZE skips a table pinned to an expired snapshot with a WARNING, rather
# than failing (a database-wide ANALYZE, the sweeper's)
$node->safe_psql('postgres',
	qq{CREATE FOREIGN TABLE e_gone (id int NOT NULL, v int, note text) SERVER s OPTIONS (store 'named', key 'id', as_of '$t1')});
($ok, $out, $err) = try_sql($node, 'ANALYZE e_gone');
ok($ok && $err =~ /WARNING:  the named snapshot that foreign table "e_gone" reads \(its option as_of\) cannot be read/,
	'ANALYZE skips a table pinned to an expired snapshot, with a WARNING') or diag($err);
$node->safe_psql('postgres', 'DROP FOREIGN TABLE e_gone');
is($node->safe_psql('postgres', q{SELECT string_agg(token, ',') FROM rollout_retained('e')}),
	$t2, 'rollout_retained lists the one retained token, not the refused one');
($ok, $out, $err) = try_sql($node, qq{SELECT rollout_retain('e', '$t2', now() - interval '1 hour')});
ok(!$ok && $err =~ /must be a finite time in the future/, 'a retention must end in the future') or diag($err);

# a token retained after it was taken, before gc collected it, is kept
my $t5 = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e')});
$node->safe_psql('postgres', q{CREATE TABLE h5 AS SELECT * FROM e});
$node->safe_psql('postgres', q{DELETE FROM e WHERE id < 100; SELECT 1 FROM rollout_merge('e'); SELECT 1 FROM rollout_compact('e', min_fragments => 1);});
# (retaining a token the store moved past is safe only within min_gc_grace
# of that, which this node sets to 0: the default meanwhile)
with_min_gc_grace($node, 600,
	sub { $node->safe_psql('postgres', qq{SELECT rollout_retain('e', '$t5', now() + interval '1 hour')}) });
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_gc('e', '0')});
snapshot_reads($t5, 'h5', 'a token retained by rollout_retain after it was taken survives gc');
$node->safe_psql('postgres', qq{SELECT rollout_retain('e', '$t5', now() + interval '2 hours')});
is($node->safe_psql('postgres', qq{SELECT count(*) FROM rollout_retained('e') WHERE token = '$t5'}), 2,
	'a retained token can be retained longer at any time (its retention keeps it meanwhile)');
is($node->safe_psql('postgres', qq{SELECT rollout_release('e', '$t5')}), 2, 'and is released, both retentions');

# a token the store moved past longer than min_gc_grace ago (here 0), which
# no retention keeps, is refused even while what it reads is still there: a
# gc that listed the retentions before the new one existed may be removing
# it at this moment
my $t7 = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e')});
$node->safe_psql('postgres', q{UPDATE e SET v = 7 WHERE id = 150; SELECT 1 FROM rollout_merge('e');});
# A retention of another token under the same 64-bit hash (planted here, as
# a colliding text would be) is no other retention of it: before, it passed
# for one, and the retention was written unchecked.
my $t7_hash = $node->safe_psql('postgres', qq{SELECT lpad(to_hex(hashtextextended('$t7', 0)), 16, '0')});
my $planted = "named/_retained/$t7_hash." . int((time - 946684800 + 3600) * 1_000_000) . '.json';
$store->put($planted, qq{{"token": "$t5", "until": "planted"}});
($ok, $out, $err) = try_sql($node, qq{SELECT rollout_retain('e', '$t7', now() + interval '1 hour')});
ok(!$ok && $err =~ /snapshot "\Q$t7\E" of store "named" can no longer be retained/,
	'a token the store moved past more than min_gc_grace ago cannot be retained, also beside a retention of another token under its hash')
  or diag($err);
$store->delete($planted);
like($err, qr/rollout_snapshot\(tbl, retain_until/, '... and the hint says how to retain one');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM rollout_retained('e') WHERE token = '$t7'}), 0,
	'the refused retention is not left behind');
$node->safe_psql('postgres', qq{SET rollout_fdw.as_of = '$t7'; SELECT count(*) FROM e});    # still readable
with_min_gc_grace($node, 600,
	sub { $node->safe_psql('postgres', qq{SELECT rollout_retain('e', '$t7', now() + interval '1 hour')}) });
is($node->safe_psql('postgres', qq{SELECT rollout_release('e', '$t7')}), '1',
	'within min_gc_grace of the change the same token is retained');

# a retention keeps its snapshot through merges, compactions and gc
my $t4 = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e', now() + interval '1 hour')});
$node->safe_psql('postgres', q{CREATE TABLE h4 AS SELECT * FROM e});
$node->safe_psql('postgres', q{UPDATE e SET v = 0; SELECT 1 FROM rollout_merge('e'); SELECT 1 FROM rollout_compact('e', min_fragments => 1); SELECT 1 FROM rollout_gc('e', '0');});
snapshot_reads($t4, 'h4', 'a retention keeps its snapshot');
is($node->safe_psql('postgres', qq{SELECT rollout_release('e', '$t4')}), 1, '... until it is released');

# a retention that expires is deleted by gc, and then keeps nothing.  The
# store changes only after it expired: however slow the machine, nothing
# the token reads was collected while the retention held.
my $t6 = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e', now() + interval '3 seconds')});
sleep(4);
$node->safe_psql('postgres', q{UPDATE e SET v = 1; SELECT 1 FROM rollout_merge('e'); SELECT 1 FROM rollout_compact('e', min_fragments => 1);});
is($node->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE expired) FROM rollout_retained('e')}),
	1, 'rollout_retained shows the retention as expired');
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_gc('e', '0')});
is($node->safe_psql('postgres', q{SELECT count(*) FROM rollout_retained('e')}),
	1, 'gc deleted the expired retention (the other is left)');
($ok, $out, $err) = try_sql($node, qq{SET rollout_fdw.as_of = '$t6'; SELECT count(*) FROM e});
ok(!$ok && $err =~ /has expired/, 'after its retention expired, gc collected what the token read') or diag($err);

# release
is($node->safe_psql('postgres', qq{SELECT rollout_release('e', '$t2')}), 1, 'rollout_release removes the retention');
is($node->safe_psql('postgres', qq{SELECT rollout_release('e', '$t2')}), 0, 'releasing again removes nothing');
($ok, $out, $err) = try_sql($node, qq{SELECT rollout_release('other', '$t2')});
ok(!$ok && $err =~ /snapshot "\Q$t2\E" is not a snapshot of store "other"\n.*DETAIL:  .*nothing was released/,
	"releasing a token through another store's table is an error, not a release of nothing") or diag($err);
($ok, $out, $err) = try_sql($node, q{SELECT rollout_release('e', 'rs1:nonsense')});
ok(!$ok && $err =~ /invalid snapshot token "rs1:nonsense"/, 'releasing an invalid token that no retention holds is an error')
  or diag($err);
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_gc('e', '0')});
($ok, $out, $err) = try_sql($node, qq{SET rollout_fdw.as_of = '$t2'; SELECT count(*) FROM e});
ok(!$ok && $err =~ /has expired/ && $err =~ /rollout_retain/, 'a released token is expired after gc, with a hint')
  or diag($err);

# A token that lists a shard twice is refused: gc keeps one version per
# token and shard.  Before, rollout_retain took one that repeated this
# cluster's shard, and the next gc wrote a version per repetition into an
# array of one per retention, past its end (any role owning a table of the
# store could plant it, and every gc of the store, the sweeper's too, then
# crashed its backend).  A retention planted in the bucket directly, whose
# token is not valid, makes gc keep every version while it lasts (what it
# keeps cannot be known), with a WARNING; before, gc ignored it and deleted
# what the snapshot it was meant to keep read.
my $fresh = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e')});
$node->safe_psql('postgres', q{CREATE TABLE h_fresh AS SELECT * FROM e});
$node->safe_psql('postgres',
	q{UPDATE e SET v = 42 WHERE id BETWEEN 100 AND 160; SELECT 1 FROM rollout_merge('e'); SELECT 1 FROM rollout_compact('e', min_fragments => 1);});
my ($first_shard) = (split /:/, $fresh)[-1] =~ /^([^,]+)/;
my $doubled = $fresh . ",$first_shard" x 200;
($ok, $out, $err) = try_sql($node, qq{SELECT rollout_retain('e', '$doubled', now() + interval '1 hour')});
ok(!$ok && $err =~ /invalid snapshot token.*\n.*DETAIL:  It lists shard "[^"]+" twice/,
	'a token listing a shard twice is refused') or diag($err);
($ok, $out, $err) = try_sql($node, qq{SELECT rollout_retain('e', '$fresh,', now() + interval '1 hour')});
ok(!$ok && $err =~ /invalid snapshot token/, 'a token with a trailing comma is refused') or diag($err);
my $until_us = int((time - 946684800 + 3600) * 1_000_000);
$store->put("named/_retained/0000000000000001.$until_us.json",
	qq{{"token": "$doubled", "until": "planted"}});
# and one that is not JSON at all, and one with a number jsonb cannot hold:
# before, every gc of the store failed on them
$store->put("named/_retained/0000000000000002.$until_us.json", 'damaged {');
$store->put("named/_retained/0000000000000003.$until_us.json", '{"token": 1e1000000}');
($ok, $out, $err) = try_sql($node, q{SELECT 1 FROM rollout_gc('e', '0')});
ok($ok, 'gc goes on past a planted retention whose token lists a shard 200 times, and one that is not JSON')
  or diag($err);
like($err, qr/WARNING:  retention "named\/_retained\/0000000000000002\.\d+\.json" of store "named" does not hold a valid snapshot token/,
	'... and warns about the one that is not JSON too');
is($node->safe_psql('postgres', q{SELECT count(*) FROM rollout_retained('e') WHERE token = ''}), '2',
	'rollout_retained lists them with an empty token');
$store->delete("named/_retained/0000000000000002.$until_us.json");
$store->delete("named/_retained/0000000000000003.$until_us.json");
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'and the server is still up');
like($err, qr/WARNING:  retention "named\/_retained\/0000000000000001\.\d+\.json" of store "named" does not hold a valid snapshot token\n.*DETAIL:  Until it expires at .*, garbage collection keeps every manifest version/,
	'gc warns that an unreadable retention makes it keep every version');
snapshot_reads($fresh, 'h_fresh', 'while it lasts, gc keeps what an unretained token read');
is($node->safe_psql('postgres', q{SELECT count(*) FROM e WHERE v = 42}), '61', '(which the store no longer holds)');
$store->delete("named/_retained/0000000000000001.$until_us.json");
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_gc('e', '0')});
($ok, $out, $err) = try_sql($node, qq{SET rollout_fdw.as_of = '$fresh'; SELECT count(*) FROM e});
ok(!$ok && $err =~ /has expired/, 'once it is removed, gc collects what no retention keeps') or diag($err);

# --- (d) random rounds ----------------------------------------------------------
my $rounds = loop_size(file => 8, remote => 4);
my @tokens;
for my $round (1 .. $rounds)
{
	my @sql;
	for (1 .. 3)
	{
		my $dice = rand();
		my $from = 1 + int(rand(400));
		my $to = $from + int(rand(60));
		if ($dice < 0.4)
		{
			push @sql, "UPDATE e SET v = $round WHERE id BETWEEN $from AND $to;",
			  "INSERT INTO e SELECT g, $round, 'round $round' FROM generate_series($from, $to) g WHERE g % 2 = 0;";
		}
		elsif ($dice < 0.7)
		{
			push @sql, "DELETE FROM e WHERE id BETWEEN $from AND $to AND id % 3 <> 0;";
		}
		elsif ($dice < 0.75)
		{
			push @sql, "TRUNCATE e; INSERT INTO e SELECT g, $round, 'refilled' FROM generate_series(1, 50) g;";
		}
		else
		{
			push @sql, "SELECT 1 FROM rollout_flush('e');";
		}
	}
	push @sql, q{SELECT 1 FROM rollout_merge('e');} if rand() < 0.5;
	push @sql, q{SELECT 1 FROM rollout_compact('e', min_fragments => 1);} if rand() < 0.3;
	push @sql, q{SELECT 1 FROM rollout_gc('e', '0');} if rand() < 0.5;
	($ok, $out, $err) = try_sql($node, join("\n", @sql));
	ok($ok, "round $round: the changes and maintenance ran") or diag($err);
	$node->safe_psql('postgres', "CREATE TABLE r$round AS SELECT * FROM e");
	push @tokens,
	  $node->safe_psql('postgres', q{SELECT rollout_snapshot('e', now() + interval '1 hour')});
	my $bad = 0;
	for my $i (0 .. $#tokens)
	{
		$bad++ if differences($tokens[$i], 'r' . ($i + 1)) != 0;
	}
	is($bad, 0, "round $round: every token so far reads its round's copy");
}
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_merge('e'); SELECT 1 FROM rollout_compact('e', min_fragments => 1); SELECT 1 FROM rollout_gc('e', '0');});
for my $i (0 .. $#tokens)
{
	snapshot_reads($tokens[$i], 'r' . ($i + 1), 'after a final compaction and gc, round ' . ($i + 1) . ' reads its copy');
}
snapshot_reads(undef, "r$rounds", 'and the store as it is now reads the last copy');

# --- (e) privileges ---------------------------------------------------------------
$node->safe_psql('postgres', q{
CREATE ROLE reader LOGIN;
GRANT SELECT ON e TO reader;
GRANT USAGE ON FOREIGN SERVER s TO reader;
});
# (the server's user mapping is for PUBLIC)
my $last = $tokens[-1];
my $reader_diff = $node->safe_psql('postgres', qq{SET ROLE reader; SET rollout_fdw.as_of = '$last';
SELECT count(*) FROM e});
is($reader_diff, $node->safe_psql('postgres', "SELECT count(*) FROM r$rounds"),
	'a role with SELECT reads a snapshot');
for my $call (q{rollout_snapshot('e')}, qq{rollout_retain('e', '$last', now() + interval '1 day')},
	qq{rollout_release('e', '$last')})
{
	($ok, $out, $err) = try_sql($node, "SET ROLE reader; SELECT $call");
	ok(!$ok && $err =~ /must be owner|permission denied/, "a role with SELECT cannot call $call")
	  or diag($err);
}

# A role granted a view over the table, or a function reading it, is granted
# the rows as they are: rollout_fdw.as_of needs SELECT on the table itself,
# or on the columns read.  A row committed after the token makes reading it
# and reading now differ.
$node->safe_psql('postgres', q{
INSERT INTO e VALUES (990001, 1, 'after the last token');
CREATE VIEW e_now AS SELECT id, v FROM e;
CREATE VIEW e_ids AS SELECT id FROM e;
CREATE VIEW e_vs AS SELECT v FROM e;
CREATE ROLE viewer LOGIN;
GRANT SELECT ON e_now, e_ids, e_vs TO viewer;
GRANT USAGE ON FOREIGN SERVER s TO viewer;
GRANT SELECT ON e_now TO reader;});
my $live = $node->safe_psql('postgres', 'SELECT count(*) FROM e');
isnt($live, $reader_diff, "the store has changed since the token ($live rows now, $reader_diff then)");
is($node->safe_psql('postgres', 'SET ROLE viewer; SELECT count(*) FROM e_now'), $live,
	'a role granted only a view reads the live rows through it');
my $denied = qr/permission denied to read foreign table "e" as of a named snapshot/;
for my $query ('SELECT count(*) FROM e_now', 'EXPLAIN SELECT count(*) FROM e_now')
{
	($ok, $out, $err) = try_sql($node, "SET ROLE viewer; SET rollout_fdw.as_of = '$last'; $query");
	ok(!$ok && $err =~ $denied, "... but not as of a snapshot ($query)") or diag($err);
}
is($node->safe_psql('postgres', qq{SET ROLE reader; SET rollout_fdw.as_of = '$last'; SELECT count(*) FROM e_now}),
	$reader_diff, 'a role with SELECT on the table reads the snapshot through the view');
# SELECT granted on a column: the snapshot of that column, not of others
$node->safe_psql('postgres', q{GRANT SELECT (id) ON e TO viewer;});
is($node->safe_psql('postgres', qq{SET ROLE viewer; SET rollout_fdw.as_of = '$last'; SELECT count(id) FROM e}),
	$reader_diff, 'a role with SELECT on a column reads that column as of a snapshot');
is($node->safe_psql('postgres', qq{SET ROLE viewer; SET rollout_fdw.as_of = '$last'; SELECT count(*) FROM e_ids}),
	$reader_diff, '... also through a view of that column');
($ok, $out, $err) = try_sql($node, qq{SET ROLE viewer; SET rollout_fdw.as_of = '$last'; SELECT count(*) FROM e_vs});
ok(!$ok && $err =~ $denied, '... but not through a view of another column') or diag($err);
# a partition read through its partitioned table: the root's privileges count
$node->safe_psql('postgres', q{
CREATE TABLE ep (id int NOT NULL, v int, note text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE ep_all PARTITION OF ep FOR VALUES FROM (MINVALUE) TO (MAXVALUE)
  SERVER s OPTIONS (store 'named', key 'id');
GRANT SELECT ON ep TO viewer;});
is($node->safe_psql('postgres', qq{SET ROLE viewer; SET rollout_fdw.as_of = '$last'; SELECT count(*) FROM ep}),
	$reader_diff, 'a role with SELECT on a partitioned table reads its rollout partition as of a snapshot');
# ... at any level, and through plain inheritance too
$node->safe_psql('postgres', q{
CREATE TABLE ep2 (id int NOT NULL, v int, note text) PARTITION BY RANGE (id);
CREATE TABLE ep2_mid PARTITION OF ep2 FOR VALUES FROM (MINVALUE) TO (MAXVALUE) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE ep2_leaf PARTITION OF ep2_mid FOR VALUES FROM (MINVALUE) TO (MAXVALUE)
  SERVER s OPTIONS (store 'named', key 'id');
GRANT SELECT ON ep2_mid TO viewer;
CREATE TABLE eh (id int NOT NULL, v int, note text);
CREATE FOREIGN TABLE eh_child () INHERITS (eh) SERVER s OPTIONS (store 'named', key 'id');
GRANT SELECT ON eh TO viewer;});
is($node->safe_psql('postgres', qq{SET ROLE viewer; SET rollout_fdw.as_of = '$last'; SELECT count(*) FROM ep2_mid}),
	$reader_diff, '... of a partitioned table in the middle of the tree');
is($node->safe_psql('postgres', qq{SET ROLE viewer; SET rollout_fdw.as_of = '$last'; SELECT count(*) FROM eh}),
	$reader_diff, '... and of a table it inherits from');
# Through views of another role: a leaf named by the view, a parent the role
# may not read, and a parent whose row-level security applies to the role
# (the view's owner would filter the rows by its own policies) are refused.
$node->safe_psql('postgres', q{
CREATE ROLE stranger LOGIN;
GRANT USAGE ON FOREIGN SERVER s TO stranger;
CREATE VIEW ep2_leaf_v AS SELECT * FROM ep2_leaf;
CREATE VIEW ep2_v AS SELECT * FROM ep2;
CREATE VIEW eh_v AS SELECT * FROM eh;
GRANT SELECT ON ep2_leaf_v, ep2_v, eh_v TO viewer, stranger;
ALTER TABLE eh ENABLE ROW LEVEL SECURITY;
CREATE POLICY nothing ON eh USING (false);});
for my $case ([ 'viewer', 'ep2_leaf_v', 'a view of the leaf for a role that may read only its parents' ],
	[ 'stranger', 'ep2_v', 'a view of the parent for a role that may read no table of it' ],
	[ 'viewer', 'eh_v', 'a view of a parent whose row-level security applies to the role' ])
{
	my ($role, $view, $what) = @$case;
	is($node->safe_psql('postgres', "SET ROLE $role; SELECT count(*) > 0 FROM $view"), 't',
		"$what: the live rows");
	($ok, $out, $err) = try_sql($node, qq{SET ROLE $role; SET rollout_fdw.as_of = '$last'; SELECT count(*) FROM $view});
	ok(!$ok && $err =~ /permission denied to read foreign table "\w+" as of a named snapshot/,
		"$what: not as of a snapshot")
	  or diag($err);
}
$node->safe_psql('postgres', q{DROP POLICY nothing ON eh; ALTER TABLE eh DISABLE ROW LEVEL SECURITY;});
# a SECURITY DEFINER function reads as its owner, but its caller chose the snapshot
$node->safe_psql('postgres', q{
CREATE FUNCTION e_count() RETURNS bigint LANGUAGE sql SECURITY DEFINER AS 'SELECT count(*) FROM e';
GRANT EXECUTE ON FUNCTION e_count() TO stranger, reader;});
is($node->safe_psql('postgres', q{SET ROLE stranger; SELECT e_count()}), $live,
	'a SECURITY DEFINER function reads the live rows for any caller');
($ok, $out, $err) = try_sql($node, qq{SET ROLE stranger; SET rollout_fdw.as_of = '$last'; SELECT e_count()});
ok(!$ok && $err =~ $denied, 'a SECURITY DEFINER function does not read the past for a caller who may not')
  or diag($err);
is($node->safe_psql('postgres', qq{SET ROLE reader; SET rollout_fdw.as_of = '$last'; SELECT e_count()}),
	$reader_diff, '... and does for one who may');

# --- (f) a cluster that has written only WAL entries -----------------------------
my $plain = PostgreSQL::Test::Cluster->new('named_plain');
$plain->init;
$plain->start;
$store->create_extension_and_server($plain);
$plain->safe_psql('postgres', q{
CREATE FOREIGN TABLE e (id int NOT NULL, v int, note text) SERVER s OPTIONS (store 'named', key 'id');
INSERT INTO e VALUES (900001, 1, 'plain');});
my $plain_shard = $plain->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
my $t0 = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e')});
like($t0, qr/\Q$plain_shard\E=0(?:,|$)/, 'a token names the shard of a cluster that never flushed at version 0');
is($node->safe_psql('postgres', "SET rollout_fdw.as_of = '$t0'; SELECT count(*) FROM e"),
	$node->safe_psql('postgres', 'SELECT count(*) FROM e WHERE id <> 900001'),
	'it reads the store as of its moment: everything but that cluster\'s unflushed row');
is($node->safe_psql('postgres', "SELECT string_agg(key, ',') FROM rollout_changes('e', '$t0')"), '900001',
	'a change feed started from it delivers that row');
($ok, $out, $err) = try_sql($node, "SELECT rollout_retain('e', '$t0', now() + interval '1 day')");
ok($ok, 'it can be retained') or diag($err);
($ok, $out, $err) = try_sql($node, "SELECT rollout_release('e', '$t0')");
ok($ok, 'and released') or diag($err);
($ok, $out, $err) = try_sql($node, "SELECT rollout_snapshot('e', now() + interval '1 day')");
ok($ok && $out =~ /^rs1:/, 'a snapshot taken and retained in one call') or diag($err);
$plain->stop;

# A gc stopped between deleting what a token reads and deleting its manifests
# (gc deletes objects first): the token's manifests still read, its
# fragments are gone; here they are deleted by hand, as such a gc would.  A
# scan says the token expired, a parallel one too (it said 'vanished during
# the scan, run the query again' before, which never works for a named
# snapshot).
my $t_cut = $node->safe_psql('postgres', q{SELECT rollout_snapshot('e')});
my @cut_fragments = $store->listed_fragments('named');
$node->safe_psql('postgres', q{
INSERT INTO e SELECT g, g, 'after the cut' FROM generate_series(1, 50) g;
SELECT 1 FROM rollout_merge('e');
SELECT 1 FROM rollout_compact('e', min_fragments => 1);});
my %live = map { $_ => 1 } $store->listed_fragments('named');
my @gone = grep { !$live{$_} } @cut_fragments;
ok(@gone > 0 && @gone == grep({ $store->delete($_) } @gone),
	'the fragments only the token reads are deleted (' . scalar(@gone) . ')');
for my $parallel ('', 'SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2;')
{
	($ok, $out, $err) = try_sql($node, qq{SET rollout_fdw.as_of = '$t_cut'; $parallel SELECT count(*) FROM e});
	ok(!$ok && $err =~ /snapshot "\Q$t_cut\E" of store "named" has expired/,
		'a token whose fragments are gone reads as expired' . ($parallel ? ', in a parallel scan too' : ''))
	  or diag($err);
}
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_gc('e', '0')});

done_testing();
