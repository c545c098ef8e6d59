
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 008_compaction_gc.pl — compaction and garbage collection, alone and racing
# with merges, other compactions and scans (DESIGN.md §5, §7.2, §7.3, §11).
#
#  (a) a compaction held before its commit composes with a concurrent merge:
#      it commits (skipped_reason NULL), the merge's new fragment survives,
#      appends never wait for it, every row keeps its newest version;
#  (b) a second compaction of the same store while one runs returns a
#      skipped_reason, not an error;
#  (c) compaction picks the smallest fragments first (max_source_fragments),
#      respects min_fragments (and rollout_should_compact agrees), keeps the
#      newest version of every key, drops exactly the shadowed versions, and
#      after a full compaction physical rows = logical rows;
#  (d) gc deletes exactly the superseded objects and reports them exactly; a
#      cursor open across a compaction and a default-grace gc returns the
#      complete result of its snapshot; a scan whose snapshot's objects are
#      deleted by gc (grace 0) takes a fresh snapshot and returns the exact
#      result;
#  (d4) gc's grace counts from when a manifest unlinked an object: hour-old
#      fragments that a base version named until a moment ago are kept for
#      the scan still reading them;
#  (e) a failed compaction is recorded in rollout_compaction_stats() (and its
#      uploaded output is collected by gc); a later successful one clears
#      last_error and counts itself;
#  (f) an output that waited longer than half of rollout_fdw.min_gc_grace is
#      never committed (gc may have deleted it): a clear skipped_reason;
#  (g) two clusters compacting one store: the later commit finds an input
#      gone and gives up with a skipped_reason, deleting its output;
#  (h) gc deletes only the generation object it listed, never one a flush
#      uploaded later under the same number (generation keys are unique),
#      and collects an orphan of a shard that has no manifest yet.

use strict;
use warnings;

use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(time);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use ExpectedRows;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(mode_node shard_of observe still_running wait_for_fault release_faults hold_faults count_in_log
  set_min_gc_grace with_min_gc_grace);
use Test::More;

# preload: rollout_fdw in shared_preload_libraries, its timed sweeper off (a
# flush or merge of its own would change the fragments and results below)
my $node = mode_node('compaction_gc');

# the object store of the backend under test (ROLLOUT_TEST_BACKEND)
my $store = RolloutStore->for_test('008_compaction_gc');

my @tables = qw(ca cb cc cd ce cf cg ch ci cj ck cl);
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	join('',
		map { "CREATE FOREIGN TABLE $_ (id text, v int) SERVER s OPTIONS (store 'st_$_', key 'id');\n" }
		  @tables));
my $shard = shard_of($node);

# ---------------------------------------------------------------------------
# Helpers.

# table => { key => v } (ExpectedRows); keys <second letter of the table>0001..
my $expected = ExpectedRows->new($node);

# INSERT keys <p><i> into $table with v = i + $offset, p being the table's
# second letter ('a' for ca).
sub insert_range
{
	my ($table, $from, $to, $offset) = @_;
	$expected->insert_range($table, substr($table, 1, 1), $from, $to, $offset);
}

# count | distinct | sum | md5 of "id=v" in key order
my $fingerprint = q{SELECT count(*), count(DISTINCT id), coalesce(sum(v), 0),
  md5(coalesce(string_agg(id || '=' || v, ',' ORDER BY id COLLATE "C"), '')) FROM };

sub expected_fingerprint
{
	my ($table) = @_;
	my $h = $expected->rows($table);
	my @k = sort keys %$h;
	my $sum = 0;
	$sum += $_ for values %$h;
	my $n = scalar(@k);
	return "$n|$n|$sum|" . md5_hex(join(',', map { "$_=$h->{$_}" } @k));
}

sub check_table
{
	my ($table, $label) = @_;
	return is($node->safe_psql('postgres', $fingerprint . $table),
		expected_fingerprint($table),
		"$label: every row once, with its newest version");
}

my $compact_cols = 'fragments_before, fragments_after, rows_written, versions_dropped, coalesce(skipped_reason, \'-\')';

# Every object of a table's rollout store: key => size.
sub store_files
{
	my ($table) = @_;
	return $store->sizes("st_$table/");
}

sub merge
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT generations_merged, rows_merged, fragments_added FROM rollout_merge('$table')");
}

# ---------------------------------------------------------------------------
# (a) A compaction held before its commit, racing with inserts and a merge.
#
# Fragments: a0001..a0100; a0101..a0200 + a0001..a0010 (v + 1000);
# a0201..a0250.  The compaction of the three writes 250 rows, dropping 10.
insert_range('ca', 1, 100);
merge('ca');
insert_range('ca', 101, 200);
insert_range('ca', 1, 10, 1000);
merge('ca');
insert_range('ca', 201, 250);
merge('ca');
is(observe($node, 'ca')->{fragments}, 3, '(a) three fragments');

my $off = -s $node->logfile;
my $compaction = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'compact.before_commit:hold';
SELECT $compact_cols FROM rollout_compact('ca', min_fragments => 2);
});
wait_for_fault($node, 'compact.before_commit', $off);
my %listed_before = map { $_ => 1 } $store->listed_fragments('st_ca');

# meanwhile: new keys, and newer versions of keys the compaction rewrites
my $t0 = time;
insert_range('ca', 251, 300);
my $insert_took = time - $t0;
insert_range('ca', 20, 25, 2000);
is(merge('ca'), '1|56|1', '(a) a merge during the compaction adds a fragment of 56 rows');
my @new = grep { !$listed_before{$_} } $store->listed_fragments('st_ca');
is(scalar(@new), 1, '(a) the merge\'s fragment is listed');
is(still_running($node, q{%rollout_compact(''ca''%}), '1',
	'(a) the compaction was still held when the merge committed');
cmp_ok($insert_took, '<', 2, sprintf('(a) an INSERT during the compaction did not wait (%.3f s)', $insert_took));
check_table('ca', '(a) during the compaction');

release_faults($node);
my ($ret, $out, $err) = $compaction->finish;
hold_faults($node);
is($ret, 0, '(a) the held compaction succeeds') or diag($err);
is($out, '3|2|250|10|-',
	'(a) it committed (skipped_reason NULL): 3 inputs into 1 output, plus the merge\'s fragment');
ok((grep { $_ eq $new[0] } $store->listed_fragments('st_ca')),
	'(a) the merge\'s fragment survived the compaction\'s commit');
ok($store->exists($new[0]), '(a) ... and exists');
check_table('ca', '(a) after the compaction');
is( $node->safe_psql('postgres', q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM ca WHERE id IN ('a0001', 'a0020', 'a0026')}),
	'a0001=1001,a0020=2020,a0026=26',
	'(a) the versions written during the compaction win over the compacted ones');
my $o = observe($node, 'ca');
is("$o->{base_rows}|$o->{exact_row_count}|$o->{fragments}", '306|300|2',
	'(a) 306 physical versions (6 shadowed by the merge\'s fragment), 300 rows');
is($node->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('ca', min_fragments => 2)"),
	'2|1|300|6|-', '(a) a full compaction drops exactly those 6');
$o = observe($node, 'ca');
is("$o->{base_rows}|$o->{exact_row_count}", '300|300', '(a) base_rows = exact_row_count = 300');
check_table('ca', '(a) after the full compaction');

# ---------------------------------------------------------------------------
# (b) A second compaction of the same store while one runs is skipped.
for my $r (0 .. 2)
{
	insert_range('cb', $r * 40 + 1, $r * 40 + 40);
	merge('cb');
}
$off = -s $node->logfile;
$compaction = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'compact.after_fragment_put:hold';
SELECT $compact_cols FROM rollout_compact('cb', min_fragments => 2);
});
wait_for_fault($node, 'compact.after_fragment_put', $off);
($ret, $out, $err) = $node->psql('postgres',
	"SELECT $compact_cols FROM rollout_compact('cb', min_fragments => 2)");
is($ret, 0, '(b) a second compaction at the same time does not fail') or diag($err);
like($out, qr/^3\|3\|0\|0\|.*another compaction.*running/,
	"(b) it returns a skipped_reason and changes nothing ($out)");
is(still_running($node, q{%rollout_compact(''cb''%}), '1', '(b) the first was still running then');
release_faults($node);
($ret, $out, $err) = $compaction->finish;
hold_faults($node);
is($ret, 0, '(b) the first compaction succeeds') or diag($err);
is($out, '3|1|120|0|-', '(b) it compacted the 3 fragments into 1');
is( $node->safe_psql('postgres',
		q{SELECT fragments, total_compactions, last_error IS NULL FROM rollout_compaction_stats('cb')}),
	'1|1|t', '(b) one compaction counted, and a skipped one is no error');
check_table('cb', '(b) after both');

# ---------------------------------------------------------------------------
# (c) Smallest first, min_fragments, newest versions, physical = logical.
#
# Six merges make six fragments of 10, 20, 35, 47, 60 and 71 rows (distinct
# sizes, so "smallest first" is deterministic), with upserts across them.
my @fragments;    # [ { key => 1 } ] per fragment, in size order
my @rounds = (
	[ [ 1, 10 ] ],
	[ [ 11, 30 ] ],
	[ [ 31, 60 ], [ 1, 5, 100 ] ],
	[ [ 61, 100 ], [ 11, 15, 200 ], [ 1, 2, 300 ] ],
	[ [ 101, 150 ], [ 31, 40, 400 ] ],
	[ [ 151, 210 ], [ 61, 70, 500 ], [ 3, 3, 600 ] ],
);
for my $round (@rounds)
{
	my %keys;
	for my $ins (@$round)
	{
		my ($from, $to, $offset) = @$ins;
		insert_range('cc', $from, $to, $offset);
		$keys{ sprintf('c%04d', $_) } = 1 for $from .. $to;
	}
	merge('cc');
	push @fragments, \%keys;
}
my $sizes = $node->safe_psql('postgres', q{SELECT fragments, base_rows FROM rollout_observe('cc')});
is($sizes, '6|243', '(c) six fragments, 243 versions (10 + 20 + 35 + 47 + 60 + 71)');
check_table('cc', '(c) before compaction');

is($node->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('cc', min_fragments => 7)"),
	'6|6|0|0|6 fragments, fewer than min_fragments (7)',
	'(c) min_fragments => 7 with 6 fragments: skipped, nothing changed');
is( $node->safe_psql('postgres',
		q{SELECT rollout_should_compact('cc', 7), rollout_should_compact('cc', 6), rollout_should_compact('cc')}),
	'f|t|t', '(c) rollout_should_compact agrees (default min_fragments 5)');

# The three smallest (10, 20, 35 rows) hold 65 versions of 60 keys.
my %union = map { %$_ } @fragments[ 0 .. 2 ];
is( $node->safe_psql('postgres',
		"SELECT $compact_cols FROM rollout_compact('cc', min_fragments => 2, max_source_fragments => 3)"),
	'6|4|' . scalar(keys %union) . '|5|-',
	'(c) max_source_fragments => 3 compacts the three smallest: 65 versions into 60 rows');
$o = observe($node, 'cc');
is("$o->{fragments}|$o->{base_rows}", '4|238', '(c) four fragments, 238 versions');
check_table('cc', '(c) after the partial compaction');

# A full compaction: 238 versions of 210 keys.
is($node->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('cc', min_fragments => 2)"),
	'4|1|210|28|-', '(c) a full compaction writes 210 rows and drops the 28 shadowed versions');
$o = observe($node, 'cc');
is( "$o->{base_rows}|$o->{exact_row_count}|$o->{fragments}|$o->{generations}|$o->{unflushed_rows}",
	'210|210|1|0|0', '(c) physical rows = logical rows: base_rows = exact_row_count = 210');
is($node->safe_psql('postgres', 'SELECT count(*) FROM cc'), '210', '(c) count(*) = 210');
check_table('cc', '(c) after the full compaction');
is($node->safe_psql('postgres', q{SELECT rollout_should_compact('cc', 2)}), 'f',
	'(c) rollout_should_compact says no with one fragment');

# ---------------------------------------------------------------------------
# (d1) gc deletes exactly the superseded objects of cc.
is($node->safe_psql('postgres', q{SELECT * FROM rollout_gc('cc')}), '0|0',
	'(d1) with the default grace (1 hour) nothing is old enough');
($ret, $out, $err) = $node->psql('postgres', q{SELECT * FROM rollout_gc('cc', '0')});
like($err, qr/shorter than rollout_fdw\.min_gc_grace/, '(d1) grace 0 is refused by default');
# a grace so long that grace * 10^6 microseconds wraps around to +0.45 s
is($node->safe_psql('postgres', q{SELECT * FROM rollout_gc('cc', interval '213503982 days 28910 seconds')}), '0|0',
	'(d1) a grace of 584,942 years keeps everything (no overflow to a cutoff of now)');
my $files_before = store_files('cc');
my %listed_cc = map { $_ => 1 } $store->listed_fragments('st_cc');
my @superseded = grep { !$listed_cc{$_} } $store->objects_in('st_cc/base/data');
is(scalar(@superseded), 7, '(d1) 7 superseded fragments (6 merged, 1 intermediate output) are in the store');
my $gc = with_min_gc_grace($node, 0, sub { $node->safe_psql('postgres', q{SELECT * FROM rollout_gc('cc', '0')}) });
my $files_after = store_files('cc');
my @gone = grep { !exists $files_after->{$_} } keys %$files_before;
my $bytes = 0;
$bytes += $files_before->{$_} for @gone;
is($gc, scalar(@gone) . "|$bytes", "(d1) gc reports exactly what vanished from the store ($gc)");
is_deeply([ grep { $store->exists($_) } @superseded ], [], '(d1) every superseded fragment is gone');
is_deeply([ $store->objects_in('st_cc/base/data') ], [ $store->listed_fragments('st_cc') ],
	'(d1) base/data holds exactly the listed fragment');
is_deeply([ $store->objects_in("st_cc/shards/$shard/gen") ], [], '(d1) every merged generation is gone');
check_table('cc', '(d1) after gc');
is(with_min_gc_grace($node, 0, sub { $node->safe_psql('postgres', q{SELECT * FROM rollout_gc('cc', '0')}) }),
	'0|0', '(d1) a second gc finds nothing');

# (d2) A cursor open across a compaction and a default-grace gc.
for my $r (0 .. 2)
{
	insert_range('cd', $r * 100 + 1, $r * 100 + 100);
	insert_range('cd', $r * 10 + 1, $r * 10 + 5, 1000 * ($r + 1)) if $r > 0;
	merge('cd');
}
insert_range('cd', 301, 320);    # a pending generation
$node->safe_psql('postgres', q{SELECT rollout_flush('cd')});
insert_range('cd', 321, 330);    # and an unflushed tail
my %at_open = %{ $expected->rows('cd') };
my $cursor = $node->background_psql('postgres');
$cursor->query_safe('BEGIN');
$cursor->query_safe('DECLARE c CURSOR FOR SELECT id, v FROM cd');
my $first = $cursor->query_safe('FETCH 10 FROM c');
is(scalar(split /\n/, $first), 10, '(d2) the cursor fetched its first 10 rows');

insert_range('cd', 331, 400);
insert_range('cd', 1, 50, 9000);
is(merge('cd'), '2|150|1', '(d2) meanwhile a merge folds in the generation and the tail (flushed first)');
is($node->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('cd', min_fragments => 2)"),
	'4|1|400|60|-', '(d2) and a compaction rewrites all 4 fragments (460 versions) into 400 rows');
is($node->safe_psql('postgres', q{SELECT * FROM rollout_gc('cd')}), '0|0',
	'(d2) gc with the default grace deletes nothing the cursor may still read');
my $rest = $cursor->query_safe('FETCH ALL FROM c');
$cursor->query_safe('COMMIT');
$cursor->quit;
my %got;
for my $line (split /\n/, "$first\n$rest")
{
	my ($k, $v) = split /\|/, $line;
	$got{$k} = $v;
}
is(scalar(split /\n/, "$first\n$rest"), scalar(keys %at_open),
	'(d2) the cursor returned ' . scalar(keys %at_open) . ' rows, none twice');
is_deeply(\%got, \%at_open, '(d2) ... exactly the rows and versions of its snapshot');
check_table('cd', '(d2) a new scan sees the new state');

# (d3) A scan whose snapshot's objects gc deletes retakes its snapshot.
for my $r (0 .. 2)
{
	insert_range('ce', $r * 100 + 1, $r * 100 + 100);
	insert_range('ce', $r * 10 + 1, $r * 10 + 5, 1000 * ($r + 1)) if $r > 0;
	merge('ce');
}
insert_range('ce', 301, 350);
insert_range('ce', 1, 3, 7000);
$node->safe_psql('postgres', q{SELECT rollout_flush('ce')});    # generation 4, pending
insert_range('ce', 351, 355);    # an unflushed tail of one WAL entry
my $want = expected_fingerprint('ce');
# fence markers (the preloaded writer's claim) are never collected (DESIGN §8)
my $wal_ce = "st_ce/shards/$shard/wal";
my @entries = $store->wal_entries($wal_ce);
my @fences = map { $store->wal_key($wal_ce, $_->[0]) } grep { $_->[1]{kind} eq 'fence' } @entries;
my @named = ($store->listed_fragments('st_ce'), $store->objects_in("st_ce/shards/$shard/gen"),
	map { $store->wal_key($wal_ce, $_->[0]) } grep { $_->[1]{kind} ne 'fence' } @entries);

$off = -s $node->logfile;
my $scan = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'scan.after_snapshot:hold';
$fingerprint ce;
});
wait_for_fault($node, 'scan.after_snapshot', $off);
is(merge('ce'), '2|58|1', '(d3) meanwhile a merge flushes the tail and folds in both generations');
is($node->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('ce', min_fragments => 2)"),
	'4|1|355|13|-', '(d3) and a compaction rewrites all 4 fragments');
$gc = with_min_gc_grace($node, 0, sub { $node->safe_psql('postgres', q{SELECT objects_deleted > 0 FROM rollout_gc('ce', '0')}) });
is($gc, 't', '(d3) gc with grace 0 deletes objects');
is_deeply([ grep { $store->exists($_) } @named ], [],
	'(d3) every fragment, generation and WAL entry the scan\'s snapshot named is gone');
is(scalar(grep { $store->exists($_) } @fences), scalar(@fences), '(d3) but not the fence markers');
is(still_running($node, '%string_agg%FROM%ce%'), '1', '(d3) while the scan still waits');
release_faults($node);    # the second snapshot passes too
($ret, $out, $err) = $scan->finish;
hold_faults($node);
is($ret, 0, '(d3) the scan succeeds') or diag($err);
is($out, $want, '(d3) with the exact, complete result');
is( count_in_log($node, qr/fault point "scan\.after_snapshot" reached/, $off),
	2, '(d3) it took a second snapshot after finding objects gone');
check_table('ce', '(d3) afterwards');

# (d4) The grace period counts from when a manifest unlinked an object, not
# from when the object was written.  Everything of cg is made older than the
# grace; a scan holds a snapshot naming cg's two fragments while they are
# compacted away and gc runs: the fragments are older than the grace, but the
# base version that named them was current a moment ago, so they stay, and
# the scan needs no second snapshot.  Once that version is (made) older than
# the grace, they go.
#
# On the file:// store the grace is 30 minutes and objects are made to look
# an hour old by backdating their files (its listing reports mtimes).  A
# remote store's modification times are set by the server and cannot be
# changed, so there the grace is a few seconds (rollout_fdw.min_gc_grace
# lowered to allow it) and the objects get older than it by waiting.  The
# grace must outlast the compaction and gc below (the compaction's base
# version has to be younger than it), and the wait must exceed it by more
# than the one-second resolution of remote modification times.
my $d4_wait = 12;    # seconds, remote stores only
my ($d4_grace, $d4_min_grace, $d4_age, $d4_hold) =
  RolloutStore::remote()
  ? ('10 s', 10, "$d4_wait s", 8)
  : ('30 min', undef, 'an hour', 3);
# gc of cg at the grace of (d4)
sub d4_gc
{
	my ($select) = @_;
	my $sql = "SELECT $select FROM rollout_gc('cg', '$d4_grace')";
	return $node->safe_psql('postgres', $sql) unless defined $d4_min_grace;
	return with_min_gc_grace($node, $d4_min_grace, sub { $node->safe_psql('postgres', $sql) });
}
sub age_past_grace
{
	my ($table) = @_;
	if (RolloutStore::remote())
	{
		sleep $d4_wait;
		return;
	}
	my $t = time - 3600;
	$store->set_modified($_, $t) for keys %{ store_files($table) };
}
insert_range('cg', 1, 100);
merge('cg');
insert_range('cg', 101, 200);
insert_range('cg', 1, 5, 100);
merge('cg');
age_past_grace('cg');
my @inputs = $store->listed_fragments('st_cg');
my @base_versions = $store->objects_in('st_cg/base/_manifest');
$want = expected_fingerprint('cg');
$off = -s $node->logfile;
$scan = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'scan.after_snapshot:sleep=$d4_hold';
$fingerprint cg;
});
wait_for_fault($node, 'scan.after_snapshot', $off);
is($node->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('cg', min_fragments => 2)"),
	'2|1|200|5|-', "(d4) the two $d4_age old fragments are compacted during the scan");
$gc = d4_gc('objects_deleted > 0');
is($gc, 't', "(d4) gc (grace $d4_grace) deletes the $d4_age old garbage (merged generations, old versions)");
is_deeply([ grep { !$store->exists($_) } @inputs ], [],
	'(d4) ... but not the fragments the base named until a moment ago');
ok($store->exists($base_versions[-1]), '(d4) ... nor that base version');
is(still_running($node, '%string_agg%FROM%cg%'), '1', '(d4) while the scan still waits');
($ret, $out, $err) = $scan->finish;
is($ret, 0, '(d4) the scan succeeds') or diag($err);
is($out, $want, '(d4) with the exact, complete result');
is( count_in_log($node, qr/fault point "scan\.after_snapshot" reached/, $off),
	1, '(d4) from its first snapshot');
age_past_grace('cg');
d4_gc('*');
is_deeply([ grep { $store->exists($_) } @inputs ], [],
	'(d4) once the compaction\'s base version is older than the grace, gc deletes them');
is_deeply([ $store->objects_in('st_cg/base/data') ], [ $store->listed_fragments('st_cg') ],
	'(d4) base/data holds exactly the listed fragment');
check_table('cg', '(d4) after gc');

# ---------------------------------------------------------------------------
# (e) Compaction errors are recorded.
insert_range('cf', 1, 50);
merge('cf');
insert_range('cf', 51, 80);
insert_range('cf', 1, 4, 500);
merge('cf');
is( $node->safe_psql('postgres',
		q{SELECT fragments, total_compactions, last_compaction IS NULL, last_error IS NULL FROM rollout_compaction_stats('cf')}),
	'2|0|t|t', '(e) no compaction yet');
($ret, $out, $err) = $node->psql('postgres', q{
SET rollout_fdw.fail_at = 'compact.after_fragment_put:error';
SELECT * FROM rollout_compact('cf', min_fragments => 2);});
isnt($ret, 0, '(e) a compaction failing at compact.after_fragment_put fails');
like($err, qr/fault point "compact\.after_fragment_put" reached/, '(e) with the fault\'s error');
is( $node->safe_psql('postgres',
		q{SELECT fragments, total_compactions, last_compaction IS NULL, last_error FROM rollout_compaction_stats('cf')}),
	'2|0|t|rollout_fdw fault point "compact.after_fragment_put" reached',
	'(e) rollout_compaction_stats shows the error; nothing was compacted');
check_table('cf', '(e) after the failed compaction');
is($node->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('cf', min_fragments => 2)"),
	'2|1|80|4|-', '(e) the next compaction succeeds');
is( $node->safe_psql('postgres',
		q{SELECT fragments, total_compactions, last_compaction IS NOT NULL, last_error IS NULL FROM rollout_compaction_stats('cf')}),
	'1|1|t|t', '(e) it cleared last_error and counted itself');
my $last = $node->safe_psql('postgres', q{SELECT last_compaction FROM rollout_compaction_stats('cf')});
like($node->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('cf', min_fragments => 2)"),
	qr/^1\|1\|0\|0\|1 fragments/, '(e) a compaction with nothing to do is skipped');
is( $node->safe_psql('postgres',
		q{SELECT total_compactions, last_compaction, last_error IS NULL FROM rollout_compaction_stats('cf')}),
	"1|$last|t", '(e) a skipped compaction is neither counted nor an error');
with_min_gc_grace($node, 0, sub { $node->safe_psql('postgres', q{SELECT rollout_gc('cf', '0')}) });
is_deeply([ $store->objects_in('st_cf/base/data') ], [ $store->listed_fragments('st_cf') ],
	'(e) gc removed the failed compaction\'s output and the inputs');
check_table('cf', '(e) at the end');

# ---------------------------------------------------------------------------
# (f) An output that waited longer than half of rollout_fdw.min_gc_grace is
# never committed: gc may already have deleted it (and here does).
insert_range('ch', 1, 60);
merge('ch');
insert_range('ch', 61, 100);
merge('ch');
my @ch_inputs = $store->listed_fragments('st_ch');
my $ch_min_grace = set_min_gc_grace($node, 2);
$off = -s $node->logfile;
$compaction = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'compact.before_commit:hold';
SELECT $compact_cols FROM rollout_compact('ch', min_fragments => 2);
});
wait_for_fault($node, 'compact.before_commit', $off);
my %ch_listed = map { $_ => 1 } @ch_inputs;
my @ch_output = grep { !$ch_listed{$_} } $store->objects_in('st_ch/base/data');
is(scalar(@ch_output), 1, '(f) the held compaction uploaded one output');
sleep 3;
$node->safe_psql('postgres', q{SELECT rollout_gc('ch', '2 s')});
ok(!$store->exists($ch_output[0]), '(f) gc (grace 2 s) deleted the 3 s old unreferenced output');
release_faults($node);
($ret, $out, $err) = $compaction->finish;
hold_faults($node);
set_min_gc_grace($node, $ch_min_grace);
is($ret, 0, '(f) the compaction ends without an error') or diag($err);
is($out, '2|2|0|0|the outputs waited longer than half of rollout_fdw.min_gc_grace',
	'(f) it gave up its commit with a clear skipped_reason');
is_deeply([ $store->listed_fragments('st_ch') ], \@ch_inputs, '(f) the base still lists the two inputs');
is_deeply([ grep { !$store->exists($_) } $store->listed_fragments('st_ch') ], [],
	'(f) every listed fragment exists (no dangling reference)');
is( $node->safe_psql('postgres', q{SELECT total_compactions, last_error IS NULL FROM rollout_compaction_stats('ch')}),
	'0|t', '(f) nothing counted, no error recorded');
check_table('ch', '(f) after the abandoned compaction');
is($node->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('ch', min_fragments => 2)"),
	'2|1|100|0|-', '(f) the next compaction succeeds');
check_table('ch', '(f) after compaction');

# ---------------------------------------------------------------------------
# (g) Two clusters compact the same store at once: the compaction lock is
# per cluster, so the commit's rebase decides.  The later one finds an input
# gone, gives up with a skipped_reason and deletes its output.
my $other = mode_node('compaction_gc_other');
$store->create_extension_and_server($other);
$other->safe_psql('postgres', qq{
CREATE FOREIGN TABLE ci (id text, v int) SERVER s OPTIONS (store 'st_ci', key 'id');
});
for my $r (0 .. 2)
{
	insert_range('ci', $r * 50 + 1, $r * 50 + 50);
	insert_range('ci', $r + 1, $r + 1, 1000) if $r > 0;
	merge('ci');
}
my @ci_inputs = $store->listed_fragments('st_ci');
$off = -s $node->logfile;
$compaction = PsqlScript->start($node, sql => qq{
SET rollout_fdw.fail_at = 'compact.before_commit:hold';
SELECT $compact_cols FROM rollout_compact('ci', min_fragments => 2);
});
wait_for_fault($node, 'compact.before_commit', $off);
my %ci_listed = map { $_ => 1 } @ci_inputs;
my @ci_output = grep { !$ci_listed{$_} } $store->objects_in('st_ci/base/data');
is(scalar(@ci_output), 1, '(g) the held compaction uploaded one output');
is($other->safe_psql('postgres', "SELECT $compact_cols FROM rollout_compact('ci', min_fragments => 2)"),
	'3|1|150|2|-', '(g) the other cluster compacts the same 3 fragments meanwhile');
release_faults($node);
($ret, $out, $err) = $compaction->finish;
hold_faults($node);
is($ret, 0, '(g) the held compaction ends without an error') or diag($err);
is($out, '3|3|0|0|a concurrent compaction removed one of the input fragments',
	'(g) it gives up with a clear skipped_reason');
ok(!$store->exists($ci_output[0]), '(g) and deleted its output');
my @ci_listed_now = $store->listed_fragments('st_ci');
is(scalar(@ci_listed_now), 1, '(g) the base lists the other cluster\'s single output');
is_deeply([ $store->objects_in('st_ci/base/data') ], [ sort(@ci_inputs, @ci_listed_now) ],
	'(g) base/data holds that output and the (not yet collected) inputs, nothing else');
$o = observe($node, 'ci');
is("$o->{base_rows}|$o->{exact_row_count}|$o->{fragments}", '150|150|1',
	'(g) base_rows = exact_row_count = 150: nothing duplicated');
check_table('ci', '(g) on this cluster');
is($other->safe_psql('postgres', $fingerprint . 'ci'), expected_fingerprint('ci'),
	'(g) the other cluster reads the same rows and versions');
is( $node->safe_psql('postgres', q{SELECT total_compactions, last_error IS NULL FROM rollout_compaction_stats('ci')}),
	'1|t', '(g) one compaction counted, the skipped one is no error');
$other->stop;

# ---------------------------------------------------------------------------
# (h) A generation's object key is never made twice, so gc deletes only the
# object it listed.  When keys were named by the generation's number alone,
# a flush that tried again under the same number re-created a key a gc run
# had listed as an orphan and was about to delete: the gc then deleted the
# committed generation, its rows were lost and every scan failed.
sub generation_keys
{
	my ($table) = @_;
	return $store->objects_in("st_$table/shards/$shard/gen");
}

# Every case of (h) runs with rollout_fdw.min_gc_grace at 2 s.
set_min_gc_grace($node, 2);

# (h1) A flush held after its upload for longer than half of the grace
# abandons that upload and commits a new one; a gc run that listed the
# abandoned upload as an orphan sends its delete after that commit.
insert_range('cj', 1, 100);
$node->safe_psql('postgres', q{SELECT rollout_flush('cj')});
insert_range('cj', 101, 150);
$off = -s $node->logfile;
my $held_flush = PsqlScript->start($node, sql => q{
SET rollout_fdw.fail_at = 'flush.after_generation_put:hold=flush';
SELECT rows_flushed FROM rollout_flush('cj');
});
wait_for_fault($node, 'flush.after_generation_put', $off);
sleep 3;
$off = -s $node->logfile;
my $held_gc = PsqlScript->start($node, sql => q{
SET rollout_fdw.fail_at = 'gc.after_generation_list:hold=gc';
SELECT objects_deleted FROM rollout_gc('cj', '2 s');
});
wait_for_fault($node, 'gc.after_generation_list', $off);
release_faults($node, 'flush');
($ret, $out, $err) = $held_flush->finish;
hold_faults($node, 'flush');
is($ret, 0, '(h1) the held flush commits') or diag($err);
is($out, '50', '(h1) its 50 rows');
ok(count_in_log($node, qr/store "st_cj" abandons generation/, $off) >= 1,
	'(h1) after abandoning its first upload');
release_faults($node, 'gc');
($ret, $out, $err) = $held_gc->finish;
hold_faults($node, 'gc');
is($ret, 0, '(h1) the held gc ends without an error') or diag($err);
check_table('cj', '(h1) after the gc that listed the abandoned upload');
is_deeply([ grep { !$store->exists($_) } $store->listed_generations('st_cj', $shard) ], [],
	'(h1) every generation the shard manifest names exists');
my @cj_keys = generation_keys('cj');
ok(@cj_keys && !grep({ !m{/gen/\d{20}-[0-9a-f-]{36}\.seg$} } @cj_keys),
	'(h1) generation keys carry a unique suffix') or diag(join("\n", @cj_keys));

# (h2) A flush leaves an orphan generation; two gc runs list it, the first
# held after listing; the second deletes it; a flush then commits under the
# number the orphan had; the held gc's delete must not reach it.
insert_range('ck', 1, 100);
$node->safe_psql('postgres', q{SELECT rollout_flush('ck')});
insert_range('ck', 101, 150);
($ret, $out, $err) = $node->psql('postgres', q{
SET rollout_fdw.fail_at = 'flush.after_generation_put:error';
SELECT rollout_flush('ck');
});
isnt($ret, 0, '(h2) a flush fails after its upload, leaving an orphan');
my @ck_listed = $store->listed_generations('st_ck', $shard);
is(scalar(generation_keys('ck')), scalar(@ck_listed) + 1,
	'(h2) one generation object no manifest names');
sleep 3;
$off = -s $node->logfile;
$held_gc = PsqlScript->start($node, sql => q{
SET rollout_fdw.fail_at = 'gc.after_generation_list:hold=gc';
SELECT objects_deleted FROM rollout_gc('ck', '2 s');
});
wait_for_fault($node, 'gc.after_generation_list', $off);
is($node->safe_psql('postgres', q{SELECT objects_deleted > 0 FROM rollout_gc('ck', '2 s')}),
	't', '(h2) a second gc run deletes the orphan');
is($node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('ck')}), '50',
	'(h2) a flush then commits the rows');
release_faults($node, 'gc');
($ret, $out, $err) = $held_gc->finish;
hold_faults($node, 'gc');
is($ret, 0, '(h2) the held gc ends without an error') or diag($err);
check_table('ck', '(h2) after the held gc');
is_deeply([ grep { !$store->exists($_) } $store->listed_generations('st_ck', $shard) ], [],
	'(h2) every generation the shard manifest names exists');

# (h3) The first flush of a shard fails after its upload: no shard manifest
# exists yet, and gc still collects the orphan once it is older than the
# grace (before, only shards with a manifest had their generations listed).
insert_range('cl', 1, 40);
($ret, $out, $err) = $node->psql('postgres', q{
SET rollout_fdw.fail_at = 'flush.after_generation_put:error';
SELECT rollout_flush('cl');
});
isnt($ret, 0, '(h3) the first flush of a shard fails after its upload');
my @cl_orphans = generation_keys('cl');
is(scalar(@cl_orphans), 1, '(h3) leaving one generation and no shard manifest');
sleep 3;
$node->safe_psql('postgres', q{SELECT rollout_gc('cl', '2 s')});
is_deeply([ grep { $store->exists($_) } @cl_orphans ], [], '(h3) gc deleted the orphan');
is($node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('cl')}), '40',
	'(h3) the next flush commits the rows');
check_table('cl', '(h3) after the orphan was collected');

# Everything survives a restart.
$node->stop;
$node->start;
check_table($_, "$_ after restart") for @tables;

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

$node->stop;
done_testing();
