# Copyright (c) rollout_fdw authors
#
# Backends: all
#
# 045_random_two_clusters.pl — a store written by one cluster, then one
# written by two, against a heap oracle.  Random inserts, upserts, deletes,
# updates and truncates go to the phase's clusters (in the two-cluster phase
# each reads the other's WAL tail, read_wal_tail, so a statement sees every
# committed row wherever it was written), interleaved with flush, merge,
# compaction and gc, with maintenance interrupted at fault points (an error,
# or a crash of the cluster followed by a restart).  After every step every
# cluster of the phase must return exactly the heap's rows.  At the end of a
# phase, flush, merge and a compaction of every fragment leave physical rows
# equal to logical rows: every tombstone is gone.
#
# 30 + 60 steps on file://, 15 + 30 on S3 and Azure; ROLLOUT_TEST_LONG=1
# runs 500 + 1000.  The default seed differs between the plain and the
# preloaded run, so that the two file:// runs of the matrix take different
# paths.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(preload mode_node observe restart_after_crash try_sql loop_size);
use Test::More;

my $seed = $ENV{ROLLOUT_TEST_SEED} // 45 + preload();
srand($seed);
note("seed $seed");

my $store = RolloutStore->for_test('045_random_two_clusters');
my %node;
for my $name ('a', 'b')
{
	my $n = mode_node("random_$name", conf => ['rollout_fdw.min_gc_grace = 0']);
	$store->create_extension_and_server($n);
	$n->safe_psql('postgres', q{
CREATE FOREIGN TABLE r (id int, v int, note text)
  SERVER s OPTIONS (store 'random', key 'id', read_wal_tail 'true');
});
	$node{$name} = $n;
}
# The one-cluster phase has a store of its own, written by cluster a only.
$node{a}->safe_psql('postgres', q{
CREATE TABLE h (id int PRIMARY KEY, v int, note text);
CREATE TABLE h1 (id int PRIMARY KEY, v int, note text);
CREATE FOREIGN TABLE r1 (id int, v int, note text) SERVER s OPTIONS (store 'random_one', key 'id');
});

# The phase's rollout table and heap oracle.
my ($T, $H);

my $rows_sql = "SELECT coalesce(string_agg(id || ':' || coalesce(v::text, '-') || ':' || coalesce(note, '-'), ',' ORDER BY id), '') FROM";
sub rows_of { my ($n, $t) = @_; return $node{$n}->safe_psql('postgres', "$rows_sql $t"); }

# A statement on one cluster's rollout table and the same on the heap.  The
# heap needs ON CONFLICT for what is an upsert on the rollout table.
sub write_both
{
	my ($on, $sql, $heap_sql) = @_;
	$node{$on}->safe_psql('postgres', $sql =~ s/\bTBL\b/$T/gr);
	$node{a}->safe_psql('postgres', ($heap_sql // $sql) =~ s/\bTBL\b/$H/gr);
	return "$on: " . ($sql =~ s/\bTBL\b/$T/gr);
}

my @writes;
@writes = (
	sub {
		my ($on) = @_;
		my $lo = 1 + int(rand(300));
		my $hi = $lo + int(rand(40));
		my $v = int(rand(10));
		my $ins = "INSERT INTO TBL SELECT g, $v, 'n' || g || '.$v' FROM generate_series($lo, $hi) g";
		return write_both($on, $ins,
			"$ins ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, note = EXCLUDED.note");
	},
	sub {
		my ($on) = @_;
		my $lo = 1 + int(rand(300));
		my $hi = $lo + int(rand(30));
		return write_both($on, "DELETE FROM TBL WHERE id BETWEEN $lo AND $hi");
	},
	sub {
		my ($on) = @_;
		my $v = int(rand(10));
		return write_both($on, "DELETE FROM TBL WHERE v = $v AND id % 3 = " . int(rand(3)));
	},
	sub {
		my ($on) = @_;
		my $m = 2 + int(rand(5));
		my $k = int(rand($m));
		return write_both($on,
			"UPDATE TBL SET v = coalesce(v, 0) + 1, note = CASE WHEN id % 2 = 0 THEN NULL ELSE note || 'u' END WHERE id % $m = $k");
	},
	sub {
		my ($on) = @_;
		# now and then a TRUNCATE, with rows written before and after it in
		# its transaction
		return $writes[0]->($on) if rand() < 0.6;
		my $id = 1 + int(rand(300));
		my $sql = "BEGIN; INSERT INTO TBL VALUES ($id, 1, 'gone')%s; TRUNCATE TBL; INSERT INTO TBL VALUES ($id + 1, 2, 'kept'); COMMIT";
		return write_both($on, sprintf($sql, ''),
			sprintf($sql, ' ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v'));
	},
	sub {
		my ($on) = @_;
		my $id = 1 + int(rand(300));
		# a delete and an insert of the same key in one transaction
		return write_both($on,
			"BEGIN; DELETE FROM TBL WHERE id = $id; INSERT INTO TBL VALUES ($id, 42, 'again'); COMMIT");
	});

my @maintenance = (
	q{SELECT rollout_flush('TBL')},
	q{SELECT rollout_merge('TBL')},
	q{SELECT rollout_compact('TBL', min_fragments => 2)},
	q{SELECT rollout_gc('TBL', '0')});

# Maintenance interrupted: the step, and the statement it interrupts.
my @faults = (
	[ 'flush.after_generation_put', q{SELECT rollout_flush('TBL')} ],
	[ 'merge.after_fragment_put', q{SELECT rollout_merge('TBL')} ],
	[ 'merge.after_base_commit', q{SELECT rollout_merge('TBL')} ],
	[ 'compact.after_fragment_put', q{SELECT rollout_compact('TBL', min_fragments => 2)} ],
	[ 'compact.before_commit', q{SELECT rollout_compact('TBL', min_fragments => 2)} ],
	[ 'gc.after_delete', q{SELECT rollout_gc('TBL', '0')} ]);

# Every cluster of @clusters returns the heap's rows, or the run stops.
sub agree_with_heap
{
	my ($phase, $when, @clusters) = @_;
	my $expected = rows_of('a', $H);
	for my $n (@clusters)
	{
		my $got = rows_of($n, $T);
		next if $got eq $expected;
		is($got, $expected, "$phase, $when: cluster $n agrees with the heap");
		BAIL_OUT("$phase diverged at $when (seed $seed)");
	}
	return;
}

# One phase: $steps random steps on the clusters named, checked after each
# against the heap; then everything into the base and a compaction of every
# fragment, after which physical rows equal logical rows.
sub run_phase
{
	my ($phase, $steps, @clusters) = @_;
	my ($crashes, $failures) = (0, 0);
	for my $step (1 .. $steps)
	{
		my $on = $clusters[ int(rand(@clusters)) ];
		my $dice = rand();
		my $what;
		if ($dice < 0.55)
		{
			$what = $writes[ int(rand(@writes)) ]->($on);
		}
		elsif ($dice < 0.85)
		{
			my $sql = $maintenance[ int(rand(@maintenance)) ] =~ s/\bTBL\b/$T/gr;
			$node{$on}->safe_psql('postgres', $sql);
			$what = "$on: $sql";
		}
		else
		{
			my ($fault, $sql) = @{ $faults[ int(rand(@faults)) ] };
			my $mode = rand() < 0.6 ? 'error' : 'crash';
			$sql =~ s/\bTBL\b/$T/g;
			my ($ok) = try_sql($node{$on}, "SET rollout_fdw.fail_at = '$fault:$mode';\n$sql");
			$failures++ unless $ok;
			if ($mode eq 'crash' && !$ok)
			{
				$crashes++ if restart_after_crash($node{$on});
			}
			$what = "$on: $sql at $fault:$mode";
		}
		agree_with_heap($phase, "step $step ($what)", @clusters);
	}
	if ($failures == 0)
	{
		# A short run may meet no fault that fires (a flush with nothing to
		# flush never reaches its fault point): one that does ends the
		# phase, so that every phase reads the store after an interruption.
		my $on = $clusters[0];
		my $what = $writes[0]->($on);
		my ($ok) = try_sql($node{$on},
			"SET rollout_fdw.fail_at = 'flush.after_generation_put:error';\nSELECT rollout_flush('$T')");
		$failures++ unless $ok;
		agree_with_heap($phase, "last step ($what, then an interrupted flush)", @clusters);
	}
	pass("$phase: every cluster agreed with the heap after each of $steps steps");
	cmp_ok($failures, '>', 0, "$phase: maintenance was interrupted ($failures times, $crashes crashes)");

	# A key inserted and deleted again makes sure there are two fragments.
	$node{a}->safe_psql('postgres', qq{
INSERT INTO $T VALUES (100000, 0, 'sentinel');
SELECT rollout_flush('$T'); SELECT rollout_merge('$T');
DELETE FROM $T WHERE id = 100000;
});
	for my $n (@clusters)
	{
		$node{$n}->safe_psql('postgres', "SELECT rollout_flush('$T'); SELECT rollout_merge('$T');");
	}
	$node{a}->safe_psql('postgres', "SELECT rollout_compact('$T', min_fragments => 2)");
	my $count = $node{a}->safe_psql('postgres', "SELECT count(*) FROM $H");
	my $o = observe($node{a}, $T);
	is($o->{exact_row_count}, $count, "$phase: exact count equals the heap's count");
	is($o->{row_count}, $count, "$phase: after a full compaction physical rows equal logical rows");
	is(rows_of($clusters[-1], $T), rows_of('a', $H), "$phase: and the rows are still the heap's");
	return;
}

my $steps = loop_size(file => 60, remote => 30, long => 1000);
($T, $H) = ('r1', 'h1');
run_phase('one cluster', $steps / 2, 'a');
($T, $H) = ('r', 'h');
run_phase('two clusters', $steps, 'a', 'b');

done_testing();
