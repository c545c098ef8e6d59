
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 007_fault_points.pl — every maintenance protocol converges after an error
# or a crash at any of its steps (DESIGN.md §7, §11.2, §11.4).
#
# For each fault point of flush, merge, compaction, garbage collection and
# the scan, in both 'error' and 'crash' mode (on S3 and Azure in one of
# them, alternating; see below), on a store of its own:
#  1. prepare data: two base fragments, a pending generation, an unflushed
#     WAL tail, and upserts across all of them;
#  2. run the operation with rollout_fdw.fail_at = 'step:mode': it fails with
#     the fault's error, or the backend is SIGKILLed (the node stops, since
#     restart_after_crash is off in TAP nodes, and is started again);
#  3. every row is still there exactly once with its newest version, and
#     the store is in exactly the intermediate state the step implies (which
#     objects are uploaded but unlisted, which generations are listed, what
#     the base says is merged);
#  4. the operation run again without the fault succeeds with an exact
#     result (gc: exactly the objects and bytes that vanished from disk), and
#     the state is exact again;
#  5. after a final merge and a full compaction, physical rows equal logical
#     rows (base_rows = exact_row_count = count(*));
#  6. after rollout_gc(t, '0') (rollout_fdw.min_gc_grace = 0) every object
#     under base/data and shards/<shard>/gen is referenced by the newest
#     manifests: the fault left no orphan that gc cannot remove.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use ExpectedRows;
use RolloutStore;
use RolloutTest qw(mode_node shard_of observe restart_after_crash loop_size);
use Test::More;

# preload: rollout_fdw in shared_preload_libraries, its timed sweeper off (a
# flush or merge of its own would change the intermediate states below).
# min_gc_grace 0 for the gc steps (it is the server's setting; no step here
# waits long enough for the writers' half-grace rule to matter).
my $node = mode_node('fault_points', conf => ['rollout_fdw.min_gc_grace = 0']);

# the object store of the backend under test (ROLLOUT_TEST_BACKEND)
my $store = RolloutStore->for_test('007_fault_points');

$store->create_extension_and_server($node);
my $shard = shard_of($node);

# step => the operation it interrupts (%s is the table)
my @points = (
	[ 'flush.after_generation_put',  q{SELECT * FROM rollout_flush('%s')} ],
	[ 'flush.after_manifest_commit', q{SELECT * FROM rollout_flush('%s')} ],
	[ 'merge.after_flush',           q{SELECT * FROM rollout_merge('%s')} ],
	[ 'merge.after_fragment_put',    q{SELECT * FROM rollout_merge('%s')} ],
	[ 'merge.after_base_commit',     q{SELECT * FROM rollout_merge('%s')} ],
	[ 'merge.after_shard_commit',    q{SELECT * FROM rollout_merge('%s')} ],
	[ 'compact.after_fragment_put',  q{SELECT * FROM rollout_compact('%s', min_fragments => 2)} ],
	[ 'compact.before_commit',       q{SELECT * FROM rollout_compact('%s', min_fragments => 2)} ],
	[ 'compact.after_commit',        q{SELECT * FROM rollout_compact('%s', min_fragments => 2)} ],
	[ 'gc.after_delete',             q{SELECT * FROM rollout_gc('%s', '0')} ],
	[ 'gc.after_wal_page',           q{SELECT * FROM rollout_gc('%s', '0')} ],
	[ 'scan.after_snapshot',         q{SELECT count(*), sum(v) FROM %s} ],
);

# ---------------------------------------------------------------------------
# Helpers.

# table => { key => v } (ExpectedRows); keys k0001.., v = i + offset
my $expected = ExpectedRows->new($node);

# INSERT k<from>..k<to> into $table with v = i + $offset, in one
# transaction, or with $single in one transaction per row.
sub insert_range
{
	my ($table, $from, $to, $offset, $single) = @_;
	$expected->insert_range($table, 'k', $from, $to, $offset, single => $single);
}

sub check_table
{
	my ($table, $label) = @_;
	my $want = $expected->state($table);
	return is($expected->table_state($table), $want,
		"$label: no row lost or duplicated, newest versions ($want)");
}

# Two fragments (the second with upserts of the first), a pending generation
# with upserts of both, and an unflushed tail with upserts of the generation.
sub prepare
{
	my ($table) = @_;
	insert_range($table, 1, 30, 0);
	insert_range($table, 31, 35, 0, 1);    # five single-row transactions
	$node->safe_psql('postgres', "SELECT rollout_merge('$table')");
	insert_range($table, 36, 60, 0);
	insert_range($table, 1, 5, 1000);
	$node->safe_psql('postgres', "SELECT rollout_merge('$table')");
	insert_range($table, 61, 80, 0);
	insert_range($table, 36, 40, 2000);
	insert_range($table, 6, 8, 3000, 1);
	$node->safe_psql('postgres', "SELECT rollout_flush('$table')");
	insert_range($table, 81, 90, 0);
	insert_range($table, 61, 63, 4000, 1);
}

# "fragments stored the newest base does not list | generations stored the
# newest shard manifest does not list | fragments listed | generation numbers
# listed | merged[shard] | pending generations (observe) | WAL entries after
# replay_after (observe)"
sub store_state
{
	my ($table, $name) = @_;
	my $base = $store->newest_manifest("$name/base/_manifest");
	my $sm = $store->newest_manifest("$name/shards/$shard/_manifest");
	my %lf = map { $_->{file} => 1 } @{ $base->{fragments} };
	my %lg = map { $_->{file} => 1 } @{ $sm->{generations} };
	my $uf = grep { !$lf{$_} } $store->objects_in("$name/base/data");
	my $ug = grep { !$lg{$_} } $store->objects_in("$name/shards/$shard/gen");
	my ($merged) = map { $_->{generation} } grep { $_->{shard} eq $shard } @{ $base->{merged} };
	my $o = observe($node, $table);
	return join('|', $uf, $ug, scalar(keys %lf),
		join(',', map { $_->{number} } @{ $sm->{generations} }),
		$merged // 0, $o->{generations}, $o->{wal_entries});
}

# The state right after the fault, per step (see store_state).  After
# prepare(): 2 fragments, generations 1 and 2 merged (unlisted, not yet
# collected), generation 3 pending, 4 WAL entries unflushed.
my %after_fault = (
	'flush.after_generation_put'  => '0|3|2|3|2|1|4',      # generation 4 uploaded, never listed
	'flush.after_manifest_commit' => '0|2|2|3,4|2|2|0',
	'merge.after_flush'           => '0|2|2|3,4|2|2|0',
	'merge.after_fragment_put'    => '1|2|2|3,4|2|2|0',    # the fragment is unreferenced
	'merge.after_base_commit'     => '0|2|3|3,4|4|0|0',    # base says merged: 3 and 4 are skipped
	'merge.after_shard_commit'    => '0|4|3||4|0|0',
	'compact.after_fragment_put'  => '1|2|2|3|2|1|4',
	'compact.before_commit'       => '1|2|2|3|2|1|4',
	'compact.after_commit'        => '2|2|1|3|2|1|4',      # the inputs are unreferenced
	'scan.after_snapshot'         => '0|2|2|3|2|1|4',
);

# The result of running the operation again, per step.  Generation 3 holds
# 28 keys (k0061..k0080, k0036..k0040, k0006..k0008), the tail 13 rows of
# which 10 new keys (k0081..k0090): a merge of both writes 38 rows.  The
# compaction of the two fragments (35 + 30 rows, k0001..k0005 in both) writes
# 60 rows and drops 5 versions.
my %rerun = (
	'flush.after_generation_put'  => qr/^13\|\d+$/,
	'flush.after_manifest_commit' => qr/^0\|$/,
	'merge.after_flush'           => qr/^2\|38\|1$/,
	'merge.after_fragment_put'    => qr/^2\|38\|1$/,
	'merge.after_base_commit'     => qr/^0\|0\|0$/,
	'merge.after_shard_commit'    => qr/^0\|0\|0$/,
	'compact.after_fragment_put'  => qr/^2\|1\|60\|5\|$/,
	'compact.before_commit'       => qr/^2\|1\|60\|5\|$/,
	'compact.after_commit'        => qr/^1\|1\|0\|0\|1 fragments, fewer than min_fragments \(2\)$/,
	'scan.after_snapshot'         => qr/^90\|40095$/,
);

# ---------------------------------------------------------------------------
# On file:// every fault point runs in both modes.  On S3 and Azure, where
# each case takes ten times as long, each point runs in one, the two modes
# alternating down the list, so that every step of every protocol is still
# interrupted on every backend; ROLLOUT_TEST_LONG=1 runs both everywhere.
my $both_modes = loop_size(file => 1, remote => 0);
my $case = 0;
my $crashes = 0;
for my $p (0 .. $#points)
{
	my ($step, $op_format) = @{ $points[$p] };
	for my $mode ($both_modes ? ('error', 'crash') : ($p % 2 ? 'crash' : 'error'))
	{
		$case++;
		my $table = "f$case";
		my $name = "fp$case";
		my $label = "$step:$mode";
		my $op = sprintf($op_format, $table);
		$node->safe_psql('postgres',
			"CREATE FOREIGN TABLE $table (id text, v int) SERVER s OPTIONS (store '$name', key 'id')");
		prepare($table);
		check_table($table, "$label: prepared");

		my $files_before = $store->sizes("$name/");
		my $offset = -s $node->logfile;
		my ($ret, $out, $err) = $node->psql('postgres',
			"SET rollout_fdw.fail_at = '$step:$mode';\n$op");
		isnt($ret, 0, "$label: the operation fails");
		if ($mode eq 'error')
		{
			like($err, qr/fault point "\Q$step\E" reached/, "$label: with the fault's error")
			  or diag("stdout: $out\nstderr: $err");
		}
		else
		{
			$crashes++;
			ok(restart_after_crash($node), "$label: the postmaster stopped after the crash");
			like(slurp_file($node->logfile, $offset),
				qr/fault point "\Q$step\E" reached: crashing/,
				"$label: the backend crashed at the fault point");
		}
		check_table($table, "$label: after the fault");
		my $files_mid = $store->sizes("$name/");
		if (defined $after_fault{$step})
		{
			is(store_state($table, $name), $after_fault{$step},
				"$label: the store is in the expected intermediate state");
		}
		else
		{
			# the fault follows a batch of deletions (lsm/gc.c, GcDeletions)
			cmp_ok(scalar(keys %{ $store->sizes("$name/") }), '<', scalar(keys %$files_before),
				"$label: gc deleted a batch of objects before the fault");
		}

		# the same operation again, without the fault
		($ret, $out, $err) = $node->psql('postgres', $op);
		is($ret, 0, "$label: the operation succeeds when run again")
		  or diag("stderr: $err");
		if ($step =~ /^gc/)
		{
			my $files_after = $store->sizes("$name/");
			my @gone_now = grep { !exists $files_after->{$_} } keys %$files_mid;
			my $bytes_now = 0;
			$bytes_now += $files_mid->{$_} for @gone_now;
			is($out, scalar(@gone_now) . "|$bytes_now",
				"$label: the second run reports exactly the objects and bytes that vanished from the store");
			cmp_ok(scalar(@gone_now), '>', 0, "$label: the second run deleted the rest of the garbage");
		}
		else
		{
			like($out, $rerun{$step}, "$label: the second run's result is exact ($out)");
		}
		check_table($table, "$label: after running it again");
		my $o = observe($node, $table);
		if ($step =~ /^flush/)
		{
			is($o->{wal_entries}, 0, "$label: the flush sealed the whole WAL tail");
		}
		elsif ($step =~ /^merge/)
		{
			is("$o->{generations}|$o->{wal_entries}", '0|0',
				"$label: the merge left no pending generation and no WAL tail");
		}
		elsif ($step =~ /^compact/)
		{
			is($o->{fragments}, 1, "$label: the base has one fragment after compaction");
		}

		# a final merge and a full compaction: physical rows = logical rows
		$node->safe_psql('postgres', "SELECT rollout_merge('$table')");
		$out = $node->safe_psql('postgres',
			"SELECT fragments_after, skipped_reason FROM rollout_compact('$table', min_fragments => 2)");
		like($out, qr/^1\|/, "$label: the final compaction leaves one fragment ($out)");
		$o = observe($node, $table);
		my $n = scalar(keys %{ $expected->rows($table) });
		is( "$o->{base_rows}|$o->{exact_row_count}|$o->{generations}|$o->{unflushed_rows}",
			"$n|$n|0|0",
			"$label: base_rows = exact_row_count = count(*) = $n");

		# gc at grace 0 leaves exactly what the newest manifests reference
		$node->safe_psql('postgres',
			"SELECT rollout_gc('$table', '0')");
		my $sm = $store->newest_manifest("$name/shards/$shard/_manifest");
		is_deeply(
			[ $store->objects_in("$name/base/data") ],
			[ $store->listed_fragments($name) ],
			"$label: after gc, base/data holds exactly the fragments of the newest base");
		is_deeply(
			[ $store->objects_in("$name/shards/$shard/gen") ],
			[ sort map { $_->{file} } @{ $sm->{generations} } ],
			"$label: after gc, gen/ holds exactly the generations of the newest shard manifest");
		is( scalar($store->manifest_versions("$name/base/_manifest")) . '|'
			  . scalar($store->manifest_versions("$name/shards/$shard/_manifest")),
			'1|1', "$label: after gc only the newest manifest versions remain");
		check_table($table, "$label: after gc");
	}
}

# Temporary files of the file:// store: nothing left behind by any fault.
# Only the file:// backend has such a scratch directory (_tmp/ in its
# location, where objects are written before they are renamed into place); a
# remote store receives each object in one request and has nothing like it.
if (!RolloutStore::remote())
{
	my @tmp_left;
	if (opendir(my $dh, $store->dir . '/_tmp'))
	{
		@tmp_left = grep { !/^\.\.?$/ } readdir($dh);
		closedir($dh);
	}
	is_deeply(\@tmp_left, [], 'no temporary file of the store is left');
}

# Exactly the crashes the fault points asked for, and nothing worse.
my $log = join('', map { slurp_file($_) } glob($node->logfile . '*'));
my $killed = () = $log =~ /terminated by signal 9/g;
is($killed, $crashes, "exactly $crashes backends were killed, all by fault points");
unlike($log, qr/PANIC|terminated by signal (?!9\b)\d+/, 'no PANIC, no other signal');

$node->stop;
done_testing();
