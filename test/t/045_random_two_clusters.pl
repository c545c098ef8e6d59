# Copyright (c) rollout_fdw authors
#
# Backends: all
#
# 045_random_two_clusters.pl — two clusters writing one store, against a heap
# oracle.  Random inserts, upserts, deletes, updates and truncates go to either
# cluster (each reads the other's WAL tail, read_wal_tail, so a statement sees every
# committed row wherever it was written), interleaved with flush, merge,
# compaction and gc on either cluster, with maintenance interrupted at fault
# points (an error, or a crash of the cluster followed by a restart).  After
# every step both clusters must return exactly the heap's rows.  At the end,
# flush, merge and a compaction of every fragment leave physical rows equal to
# logical rows: every tombstone is gone.
#
# ROLLOUT_TEST_LONG=1 runs 1000 steps instead of 100.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node observe restart_after_crash try_sql);
use Test::More;

my $seed = $ENV{ROLLOUT_TEST_SEED} // 45;
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
$node{a}->safe_psql('postgres', 'CREATE TABLE h (id int PRIMARY KEY, v int, note text)');

my $rows_sql = "SELECT coalesce(string_agg(id || ':' || coalesce(v::text, '-') || ':' || coalesce(note, '-'), ',' ORDER BY id), '') FROM";
sub rows_of { my ($n, $t) = @_; return $node{$n}->safe_psql('postgres', "$rows_sql $t"); }

# A statement on one cluster's rollout table and the same on the heap.  The
# heap needs ON CONFLICT for what is an upsert on the rollout table.
sub write_both
{
	my ($on, $sql, $heap_sql) = @_;
	$node{$on}->safe_psql('postgres', $sql =~ s/\bTBL\b/r/gr);
	$node{a}->safe_psql('postgres', ($heap_sql // $sql) =~ s/\bTBL\b/h/gr);
	return "$on: " . ($sql =~ s/\bTBL\b/r/gr);
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
	q{SELECT rollout_flush('r')},
	q{SELECT rollout_merge('r')},
	q{SELECT rollout_compact('r', min_fragments => 2)},
	q{SELECT rollout_gc('r', '0')});

# Maintenance interrupted: the step, and the statement it interrupts.
my @faults = (
	[ 'flush.after_generation_put', q{SELECT rollout_flush('r')} ],
	[ 'merge.after_fragment_put', q{SELECT rollout_merge('r')} ],
	[ 'merge.after_base_commit', q{SELECT rollout_merge('r')} ],
	[ 'compact.after_fragment_put', q{SELECT rollout_compact('r', min_fragments => 2)} ],
	[ 'compact.before_commit', q{SELECT rollout_compact('r', min_fragments => 2)} ],
	[ 'gc.after_delete', q{SELECT rollout_gc('r', '0')} ]);

my $steps = $ENV{ROLLOUT_TEST_LONG} ? 1000 : 100;
my ($crashes, $failures) = (0, 0);
for my $step (1 .. $steps)
{
	my $on = rand() < 0.5 ? 'a' : 'b';
	my $dice = rand();
	my $what;
	if ($dice < 0.55)
	{
		$what = $writes[ int(rand(@writes)) ]->($on);
	}
	elsif ($dice < 0.85)
	{
		my $sql = $maintenance[ int(rand(@maintenance)) ];
		$node{$on}->safe_psql('postgres', $sql);
		$what = "$on: $sql";
	}
	else
	{
		my ($fault, $sql) = @{ $faults[ int(rand(@faults)) ] };
		my $mode = rand() < 0.6 ? 'error' : 'crash';
		my ($ok) = try_sql($node{$on}, "SET rollout_fdw.fail_at = '$fault:$mode';\n$sql");
		$failures++ unless $ok;
		if ($mode eq 'crash' && !$ok)
		{
			$crashes++ if restart_after_crash($node{$on});
		}
		$what = "$on: $sql at $fault:$mode";
	}
	my $expected = rows_of('a', 'h');
	my ($ra, $rb) = (rows_of('a', 'r'), rows_of('b', 'r'));
	if ($ra ne $expected || $rb ne $expected)
	{
		is($ra, $expected, "step $step ($what): cluster a agrees with the heap");
		is($rb, $expected, "step $step ($what): cluster b agrees with the heap");
		BAIL_OUT("diverged at step $step (seed $seed)");
	}
}
pass("both clusters agreed with the heap after each of $steps steps");
cmp_ok($failures, '>', 0, "maintenance was interrupted ($failures times, $crashes crashes)");

# Everything into the base, then a compaction of every fragment: no
# tombstone and no shadowed version is left.  A key inserted and deleted
# again makes sure there are two fragments to compact.
$node{a}->safe_psql('postgres', q{
INSERT INTO r VALUES (100000, 0, 'sentinel');
SELECT rollout_flush('r'); SELECT rollout_merge('r');
DELETE FROM r WHERE id = 100000;
});
for my $n ('a', 'b')
{
	$node{$n}->safe_psql('postgres', q{SELECT rollout_flush('r'); SELECT rollout_merge('r');});
}
$node{a}->safe_psql('postgres', q{SELECT rollout_compact('r', min_fragments => 2)});
my $count = $node{a}->safe_psql('postgres', 'SELECT count(*) FROM h');
my $o = observe($node{a}, 'r');
is($o->{exact_row_count}, $count, 'exact count equals the heap\'s count');
is($o->{row_count}, $count, 'after a full compaction physical rows equal logical rows');
is(rows_of('b', 'r'), rows_of('a', 'h'), 'and the rows are still the heap\'s');

done_testing();
