
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 040_sweeper_analyze.pl — with rollout_fdw.analyze_after_compaction the
# background sweeper runs ANALYZE on a rollout table once it finds the
# store's base compacted (worker/sweeper.c): not before a compaction, after
# one (whoever ran it: here a pg_cron-like call from another session), with
# the live row count of the compacted store, and no more once the setting
# is off again; a table some session holds ANALYZE's lock on is analyzed
# once the lock is free, not left until the next compaction.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node poll_until store_stats);
use Test::More;

my $node = writer_node('sweeper_analyze',
	'rollout_fdw.flush_interval' => 1,
	'rollout_fdw.analyze_after_compaction' => 'on');
my $store = RolloutStore->for_test('040_sweeper_analyze', backend => 'file');
$store->create_extension_and_server($node);

my $reltuples = q{SELECT reltuples FROM pg_class WHERE relname = 't'};
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'swept');
INSERT INTO t SELECT i, 'first' FROM generate_series(1, 3000) i;
SELECT rollout_flush('t'); SELECT rollout_merge('t');
INSERT INTO t SELECT i, 'second' FROM generate_series(2001, 5000) i;
SELECT rollout_flush('t'); SELECT rollout_merge('t');});

# A pass of the sweeper flushes, then looks at the base.  A row it flushed
# proves a pass under way; the second of two proves the first pass over.
sub sweeper_passes
{
	my ($passes, $label) = @_;
	for my $i (1 .. $passes)
	{
		$node->safe_psql('postgres', "INSERT INTO t VALUES (-$i, 'marker')");
		ok(defined poll_until($node, q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 'swept'}, '0', 60),
			"$label: the sweeper flushed marker row $i");
	}
}
sweeper_passes(2, 'before a compaction');
is($node->safe_psql('postgres', $reltuples), '-1', 'no ANALYZE without a compaction');

$node->safe_psql('postgres', q{SELECT rollout_compact('t', min_fragments => 1)});
ok(defined poll_until($node, $reltuples, '5002', 60),
	'after a compaction the sweeper analyzed the table: reltuples is the 5,002 live rows');
is($node->safe_psql('postgres', q{SELECT n_distinct FROM pg_stats WHERE tablename = 't' AND attname = 'v'}),
	'3', 'and pg_stats has the live versions\' statistics (first, second, marker)');

# off again: a further compaction leaves the statistics alone
$node->append_conf('postgresql.conf', 'rollout_fdw.analyze_after_compaction = off');
$node->reload;
sweeper_passes(2, 'after the reload');
$node->safe_psql('postgres', q{INSERT INTO t SELECT i, 'third' FROM generate_series(5001, 6000) i;
SELECT rollout_flush('t'); SELECT rollout_merge('t'); SELECT rollout_compact('t', min_fragments => 1);});
sweeper_passes(3, 'with the setting off');
is($node->safe_psql('postgres', $reltuples), '5002', 'with the setting off it did not analyze again');

# on again: the sweeper catches up on the compaction made while it was off
$node->append_conf('postgresql.conf', 'rollout_fdw.analyze_after_compaction = on');
$node->reload;
ok(defined poll_until($node, $reltuples, '6003', 60),
	'on again, the sweeper analyzes after the compaction made while it was off (6,003 live rows)');

# a compaction while another session holds ANALYZE's lock: the sweeper
# cannot analyze then, and does so at a later look.  (ANALYZE (SKIP_LOCKED)
# skipped the table with a warning and succeeded, and the compaction counted
# as analyzed until the next one.)  COMMENT ON takes that lock (SHARE UPDATE
# EXCLUSIVE): LOCK TABLE refuses foreign tables, and an ANALYZE would write
# reltuples in place, whether it commits or not.
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; COMMENT ON FOREIGN TABLE t IS 'held';});
$node->safe_psql('postgres', q{INSERT INTO t SELECT i, 'fourth' FROM generate_series(6001, 7000) i;
SELECT rollout_flush('t'); SELECT rollout_merge('t'); SELECT rollout_compact('t', min_fragments => 1);});
sweeper_passes(3, "while another session holds ANALYZE's lock");
is($node->safe_psql('postgres', $reltuples), '6003', 'the sweeper could not analyze the locked table');
$holder->query_safe('ROLLBACK');
$holder->quit;
ok(defined poll_until($node, $reltuples, '7003', 60),
	'once the lock is free it analyzes the table: reltuples is the 7,003 live rows');

unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|rollout_fdw sweeper: store/,
	'no crash and no sweeper error');
$node->stop;
done_testing();
