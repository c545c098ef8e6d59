
# Copyright (c) rollout_fdw authors
#
# 030_leftovers_and_counts.pl — a crash leaves nothing garbage collection
# cannot remove, a flush never commits a generation gc may have taken, and
# the cheap count never falls below the durable rows (issue 10, points 7
# and 8).
#
#   1. Temporary files a killed writer left in the file store's _tmp/ (they
#      are outside the key space, so listings never show them) are removed
#      by rollout_gc once older than its grace; younger ones, which a live
#      writer may still be writing, stay.
#   2. A flush whose generation waited longer than half of
#      rollout_fdw.min_gc_grace between its upload and the manifest commit
#      abandons it (deletes it) instead of committing it, like merge and
#      compaction; the rows stay in the WAL and the next flush seals them.
#   3. Right after a crash, before anything replays the WAL, the cheap count
#      of rollout_observe includes the rows of the durable WAL entries: it
#      equals count(*), in both modes.
#   4. A large transaction whose ingest segment was staged longer than half
#      of rollout_fdw.min_gc_grace before its commit (it waited for memtable
#      room, or for the WAL) is not committed: gc may already have taken the
#      segment for an orphan, and a WAL entry naming it would be an
#      acknowledged commit whose rows are gone.  The segment is an orphan gc
#      removes; the retry commits.  Preloaded, the same when the segment
#      aged waiting for the group-commit leader's PUT (4b).
#   5. A flush whose shard manifest was read longer than half of
#      rollout_fdw.min_gc_grace before its commit reads it again rather
#      than commit the next version of it: gc may have collected a newer
#      version since, and a version created again below the newest would
#      count for nothing.
#   6. Two garbage collections at once never take an adopted ingest segment
#      for an orphan.  A gc reads the shard manifests, then lists the WAL
#      entries that name segments; if meanwhile a flush adopted a segment
#      and the other gc collected the WAL entry that named it, the segment
#      is named by neither.  The gc that read before leaves the segments to
#      its next run when the shard had no manifest and has one now, or when
#      its manifests are older than half of rollout_fdw.min_gc_grace.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use PsqlScript;
use RolloutTest qw(preload mode_node shard_of wait_for_fault release_faults hold_faults count_in_log);
use Test::More;

my $node = mode_node('leftovers', conf => ['rollout_fdw.min_gc_grace = 0']);
my $store = RolloutStore->for_test('030_leftovers', backend => 'file');
$store->create_extension_and_server($node);
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'left');
INSERT INTO t SELECT g, 'v' FROM generate_series(1, 100) g;
});
my $tmp = $store->dir . '/_tmp';

# --- 1. temporary files of dead writers
ok(-d $tmp, 'the store has a _tmp folder');
my $old = time - 2 * 3600;
for my $name ('4242.1.0badc0de.tmp', '4243.7.12345678.tmp')
{
	open(my $fh, '>', "$tmp/$name") or die $!;
	print $fh 'x' x 1000;
	close $fh;
	utime($old, $old, "$tmp/$name");
}
open(my $fh, '>', "$tmp/4244.1.feedface.tmp") or die $!;
print $fh 'y' x 10;
close $fh;
open($fh, '>', "$tmp/notes.txt") or die $!;
close $fh;
utime($old, $old, "$tmp/notes.txt");
my ($deleted, $freed) = split /\|/, $node->safe_psql('postgres',
	q{SELECT objects_deleted, bytes_freed FROM rollout_gc('t', '1 hour')});
ok($deleted >= 2 && $freed >= 2000, "gc removed the two old temporary files ($deleted objects, $freed bytes)");
ok(!-e "$tmp/4242.1.0badc0de.tmp" && !-e "$tmp/4243.7.12345678.tmp", 'they are gone');
ok(-e "$tmp/4244.1.feedface.tmp", 'a fresh temporary file (perhaps being written) stays');
ok(-e "$tmp/notes.txt", 'a file that is not a temporary object file stays');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '100', 'no row was lost');

# --- 2. a flush that waited too long abandons its generation
$node->safe_psql('postgres', q{ALTER SYSTEM SET rollout_fdw.min_gc_grace = 2; SELECT pg_reload_conf()});
my $shard = shard_of($node);
my @manifests_before = $store->manifest_versions("left/shards/$shard/_manifest");
my ($ret, $out, $err) = $node->psql('postgres', q{
SET rollout_fdw.fail_at = 'flush.after_generation_put:sleep=2';
SELECT * FROM rollout_flush('t');
});
isnt($ret, 0, 'a flush whose every generation waited 2 s (grace 2 s) fails');
like($err, qr/its generations waited too long before their commit/, '... saying why');
is(join(',', $store->list("left/shards/$shard/gen/")), '', 'no generation object is left behind');
is(join(',', $store->manifest_versions("left/shards/$shard/_manifest")), join(',', @manifests_before),
	'no shard manifest was committed');
like(slurp_file($node->logfile), qr/abandons generation "left\/shards\/\Q$shard\E\/gen\//,
	'the log names the abandoned generation');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '100', 'every row is still there');
is($node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('t')}), '100',
	'the next flush seals them');
$node->safe_psql('postgres', q{ALTER SYSTEM SET rollout_fdw.min_gc_grace = 0; SELECT pg_reload_conf()});

# A large transaction into $table, a new store of that name, whose ingest
# segment ages 3 s at fault point $fault, past half the grace (4 s): it
# fails, leaving only an orphan that gc removes, and the retry commits.
sub check_stale_ingest
{
	my ($label, $table, $fault) = @_;
	$node->safe_psql('postgres', qq{ALTER SYSTEM SET rollout_fdw.min_gc_grace = 4; SELECT pg_reload_conf();
CREATE FOREIGN TABLE $table (id int, v text) SERVER s OPTIONS (store '$table');
INSERT INTO $table VALUES (0, 'first');});
	my $insert = qq{SET rollout_fdw.ingest_threshold = '64kB';
INSERT INTO $table SELECT g, repeat('i', 1000) FROM generate_series(1, 200) g;};
	my ($ret, $out, $err) = $node->psql('postgres', "SET rollout_fdw.fail_at = '$fault:sleep=3';\n$insert");
	isnt($ret, 0, "$label: a transaction whose ingest segment waited 3 s (grace 4 s) fails");
	like($err, qr/ingest segment waited too long for its WAL entry/, "$label: ... saying why") or diag($err);
	like($err, qr/The transaction is not committed/, "$label: ... and that it is not committed");
	is($node->safe_psql('postgres', "SELECT count(*) FROM $table"), '1', "$label: none of its rows is visible");
	my @segments = $store->list("$table/ingest/");
	is(scalar(@segments), 1, "$label: its segment is left in the store, named by no WAL entry");
	sleep 4;
	$node->safe_psql('postgres', qq{SELECT objects_deleted FROM rollout_gc('$table', '4 s')});
	@segments = $store->list("$table/ingest/");
	is(scalar(@segments), 0, "$label: gc removed that orphan");
	is($node->safe_psql('postgres', "SELECT count(*) FROM $table"), '1', "$label: and the store reads as before");
	$node->safe_psql('postgres', $insert);
	is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT id) FROM $table"), '201|201',
		"$label: the retry commits, through a new segment, every row once");
	@segments = $store->list("$table/ingest/");
	is(scalar(@segments), 1, "$label: whose segment is in the store");
	$node->safe_psql('postgres', q{ALTER SYSTEM SET rollout_fdw.min_gc_grace = 0; SELECT pg_reload_conf()});
	return;
}

# --- 4. an ingest segment staged too long before its commit
check_stale_ingest('staged before the commit', 'big', 'commit.after_ingest_staged');

# --- 4b. preloaded: an ingest segment that waited for the group-commit
# leader's PUT.  The committer checked its segment before it queued its
# request; the leader checks again right before its PUT.  Before, a segment
# that aged past half the grace in the queue or behind earlier entries was
# named by a WAL entry anyway, while a gc could delete it: the commit was
# acknowledged, its rows lost and the store unreadable (the gc audit of
# 7 Dec 2026).
if (preload())
{
	check_stale_ingest('waiting for the leader\'s PUT', 'queued', 'group_commit.before_put');
	is($node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('queued')}), '201',
		'and a flush seals its rows');
}

# --- 5. a manifest read too long before its commit is read again
$node->safe_psql('postgres', q{ALTER SYSTEM SET rollout_fdw.min_gc_grace = 4; SELECT pg_reload_conf();
INSERT INTO big VALUES (1000, 'five');});
my $offset = -s $node->logfile;
my $flush = PsqlScript->start($node,
	sql => "SET rollout_fdw.fail_at = 'flush.after_manifest_read:hold';\nSELECT rows_flushed FROM rollout_flush('big');\n");
wait_for_fault($node, 'flush.after_manifest_read', $offset);
sleep 3;    # the manifest it read ages past half the grace
release_faults($node);
($ret, $out, $err) = $flush->finish;
hold_faults($node);
is($ret, 0, 'the flush succeeds') or diag($err);
is(count_in_log($node, qr/not committing version \d+ of the shard "[^"]+" manifest of store "big": the version before it was read more than half/, $offset),
	1, 'after refusing to commit on its first, too old, read of the manifest');
is(count_in_log($node, qr/fault point "flush\.after_manifest_read" reached/, $offset), 2,
	'and reading it again');
is($node->safe_psql('postgres', q{SELECT v FROM big WHERE id = 1000}), 'five', 'the flushed row is read');
$node->safe_psql('postgres', q{ALTER SYSTEM SET rollout_fdw.min_gc_grace = 0; SELECT pg_reload_conf()});

# --- 6. a gc held between its manifest read and its WAL listing
$node->safe_psql('postgres', q{ALTER SYSTEM SET rollout_fdw.min_gc_grace = 4; SELECT pg_reload_conf();
CREATE FOREIGN TABLE adopt (id int, v text) SERVER s OPTIONS (store 'adopt');});
my $large = sub {
	my ($first) = @_;
	$node->safe_psql('postgres', qq{SET rollout_fdw.ingest_threshold = '64kB';
INSERT INTO adopt SELECT g, repeat('a', 1000) FROM generate_series($first, $first + 199) g;});
};

# Held while this gc waits between listing the (empty) shard manifest
# folder and listing the WAL; meanwhile the segment is adopted and its WAL
# entry collected.
my $held_gc = sub {
	my ($case) = @_;
	my $offset = -s $node->logfile;
	my $gc = PsqlScript->start($node,
		sql => "SET rollout_fdw.fail_at = 'gc.before_ingest_wal:hold';\nSELECT 'deleted ' || objects_deleted FROM rollout_gc('adopt', '4 s');\n");
	wait_for_fault($node, 'gc.before_ingest_wal', $offset);
	return ($gc, $offset);
};
my $adopt_and_collect = sub {
	my ($rows, $wait, $collected) = @_;
	is($node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('adopt')}), $rows,
		"meanwhile a flush adopts the segment ($rows rows)");
	sleep $wait if $wait;
	my $wal = "adopt/shards/" . shard_of($node) . "/wal/";
	my @before = $store->list($wal);
	$node->safe_psql('postgres', q{SELECT rollout_gc('adopt', '4 s')});
	my @after = $store->list($wal);
	my $counts = scalar(@before) . ' entries before, ' . scalar(@after) . ' after';
	# (a fence marker, which gc never collects, may stay)
	if ($collected)
	{
		ok(@after < @before, "and a second gc collects the WAL entry that named it ($counts)");
	}
	else
	{
		is(scalar(@after), scalar(@before),
			"a second gc keeps the WAL entry that named it, sealed only by a version younger than the grace ($counts)");
	}
};
my $held_gc_finishes = sub {
	my ($gc, $offset, $segments, $rows, $skipped, $why) = @_;
	release_faults($node);
	my ($ret, $out, $err) = $gc->finish;
	hold_faults($node);
	is($ret, 0, "the held gc finishes ($why)") or diag($err);
	is(count_in_log($node, qr/garbage collection of store "adopt" leaves its ingest segments to its next run/, $offset),
		$skipped ? 1 : 0, $skipped ? '... leaving the segments alone, and saying so' : '... as usual');
	my @segments = $store->list('adopt/ingest/');
	is(scalar(@segments), $segments, "the adopted segments are there ($segments)");
	is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM adopt'), "$rows|$rows",
		"every row is read ($rows)");
};

# 6a. the shard had no manifest when the held gc looked (a plain writer; a
# preloaded one writes the first version when it claims the shard, which
# then keeps the WAL entry from the second gc)
$large->(1);
sleep 5;    # the segment and its WAL entry are older than the grace
my @claimed = $store->manifest_versions('adopt/shards/' . shard_of($node) . '/_manifest');
my $no_manifest = !@claimed;
my ($gc, $gc_offset) = $held_gc->();
$adopt_and_collect->(200, 0, $no_manifest);
$held_gc_finishes->($gc, $gc_offset, 1, 200, $no_manifest,
	$no_manifest ? 'the shard has a manifest now' : 'the shard had one already');

# 6b. the shard had one; the held gc's read ages past half the grace
$large->(1001);
sleep 5;
($gc, $gc_offset) = $held_gc->();
# the second gc collects the WAL entry only once the version the held gc
# read was superseded longer than the grace ago
$adopt_and_collect->(200, 5, 1);
$held_gc_finishes->($gc, $gc_offset, 2, 400, 1, 'its manifests are older than half the grace');
$node->safe_psql('postgres', q{ALTER SYSTEM SET rollout_fdw.min_gc_grace = 0; SELECT pg_reload_conf()});

# --- 3. the cheap count after a crash
$node->safe_psql('postgres', q{INSERT INTO t SELECT g, 'w' FROM generate_series(101, 160) g});
$node->safe_psql('postgres', q{INSERT INTO t SELECT g, 'w' FROM generate_series(161, 170) g});
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', q{SELECT row_count, unflushed_rows, wal_entries > 0 FROM rollout_observe('t')}),
	'170|70|t', 'right after the crash the cheap count includes the 70 rows of unflushed WAL entries');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '170', '... as count(*) does');
$node->safe_psql('postgres', q{INSERT INTO t VALUES (171, 'after')});
is($node->safe_psql('postgres', q{SELECT row_count FROM rollout_observe('t')}), '171',
	'and after the next commit (preloaded: the claim replays the WAL)');

unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC/, 'no backend crashed');
$node->stop;
done_testing();
