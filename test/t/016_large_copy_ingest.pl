
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 016_large_copy_ingest.pl — large transactions through ingest segments with
# the shared-memory writer (DESIGN.md §6.3, §7.3; issue 4).
#
# Preloaded, rollout_fdw.ingest_threshold = 64kB (the minimum).
#  (a) A COPY of 20000 rows (~2 MB, far past the threshold) in an open
#      transaction is invisible to others; a concurrent reader polling while
#      it commits sees either none or all of its rows, never a part; after
#      COMMIT all are visible.  Exactly one ingest/ object appeared, and the
#      commit's WAL entry names it with its row count.
#  (b) The same COPY rolled back leaves nothing visible and no object.
#  (c) A COPY whose commit fails (a foreign object sits at the next WAL
#      position, so the WAL PUT fails) fails with an error, leaves nothing
#      visible, and leaves one unreferenced ingest segment: the orphan.
#  (d) rollout_gc (grace 0) removes the orphan and keeps the live segment,
#      named by an unflushed WAL entry; after a flush adopts the live one as
#      a generation, gc keeps it still.  Counts stay exact throughout.
#  (e) A backend terminated while its rows wait in a local scratch segment
#      removes that file as it exits.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(writer_node shard_of wait_for_fault with_min_gc_grace);
use Test::More;

my $ROWS = 20000;

my $node = writer_node('ingest', 'rollout_fdw.ingest_threshold' => '64kB');

my $store = RolloutStore->for_test('016_large_copy_ingest', backend => 'file');
my $scripts = PostgreSQL::Test::Utils::tempdir('scripts');
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t (id text, v int, payload text) SERVER s OPTIONS (store 'ing', key 'id');});
my $shard = shard_of($node);
my $wal = "ing/shards/$shard/wal";

# A CSV file of $ROWS rows: <prefix>00001.., v = i, ~100 bytes of payload.
sub make_csv
{
	my ($prefix) = @_;
	my $f = "$scripts/$prefix.csv";
	open(my $fh, '>', $f) or die "open $f: $!";
	printf $fh "%s%05d,%d,%s\n", $prefix, $_, $_, ('p' x 90) . $_ for 1 .. $ROWS;
	close $fh;
	return $f;
}
my $rows_sum = $ROWS * ($ROWS + 1) / 2;

# The names of the ingest segments in the store's ingest/ folder.
sub ingest_objects
{
	return map { s{^ing/ingest/}{}r } grep { /\.seg$/ } $store->objects_in('ing/ingest');
}

my $state_sql = q{SELECT count(*), count(DISTINCT id), coalesce(sum(v), 0) FROM t};

# a first small commit: claims the shard, 10 rows
$node->safe_psql('postgres', q{INSERT INTO t SELECT 'small' || i, i, 'x' FROM generate_series(1, 10) i});
my ($count, $sum) = (10, 55);
is_deeply([ ingest_objects() ], [], 'a small transaction stages no ingest segment');

# ---------------------------------------------------------------------------
# (a) a COPY past the threshold commits atomically
my $csv_a = make_csv('a');
my $writer = $node->background_psql('postgres');
# held until the COMMIT returned: the reader's last read comes after it
$writer->query_safe('SELECT pg_advisory_lock(16016)');
$writer->query_safe('BEGIN');
$writer->query_safe("COPY t FROM '$csv_a' WITH (FORMAT csv)");
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum",
	'(a) before COMMIT another session sees none of the COPY');
is_deeply([ ingest_objects() ], [], '(a) nothing is staged before COMMIT');

# a reader polling the count while the COPY commits
my $reader = PsqlScript->start($node, name => 'reader',
	sql => "SELECT count(*) FROM t WHERE id LIKE 'a%';\nSELECT pg_sleep(0.005);\n" x 150
	  . "SELECT pg_advisory_lock(16016);\nSELECT count(*) FROM t WHERE id LIKE 'a%';\n");
# let the reader start polling, then commit
$node->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE '%pg_sleep(0.005)%' AND pid <> pg_backend_pid()});
$writer->query_safe('COMMIT');
$writer->query_safe('SELECT pg_advisory_unlock(16016)');
my ($reader_ret, $rout, $rerr) = $reader->finish;
is($reader_ret, 0, '(a) the polling reader ran without error') or diag($rerr);
my @seen = grep { /^\d+$/ } split /\n/, $rout;
my @partial = grep { $_ != 0 && $_ != $ROWS } @seen;
is_deeply(\@partial, [], "(a) the reader saw 0 or $ROWS rows of the COPY, never a part (" . scalar(@seen) . ' reads)');
is($seen[-1], $ROWS, '(a) its last read, after COMMIT, saw all of them');
$count += $ROWS;
$sum += $rows_sum;
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", '(a) after COMMIT all rows are visible, once');

my @live = ingest_objects();
is(scalar(@live), 1, '(a) exactly one ingest segment was staged');
like($live[0] // '', qr/^\Q$shard\E\.[0-9a-f-]+\.seg$/, '(a) named after the shard and a uuid');
my @pos = $store->wal_positions($wal);
my $meta = $store->wal_entry($wal, $pos[-1]) // die "no metadata in WAL position $pos[-1]";
is(scalar(@{ $meta->{ingest} }), 1, '(a) the newest WAL entry references one ingest segment');
is($meta->{ingest}[0]{file}, "ing/ingest/" . ($live[0] // ''), '(a) ... the one staged');
is($meta->{ingest}[0]{rows}, $ROWS, "(a) ... with its $ROWS rows");
cmp_ok(length($store->get($store->wal_key($wal, $pos[-1]))), '<', 64 * 1024,
	'(a) the WAL entry itself is small (it only names the segment)');
is($node->safe_psql('postgres', q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 'ing'}),
	'10', '(a) the COPY\'s rows are not copied into the memtable');

# ---------------------------------------------------------------------------
# (b) rolled back: nothing
my $csv_b = make_csv('b');
$writer->query_safe('BEGIN');
$writer->query_safe("COPY t FROM '$csv_b' WITH (FORMAT csv)");
$writer->query_safe('ROLLBACK');
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", '(b) a rolled-back COPY leaves nothing visible');
is_deeply([ ingest_objects() ], \@live, '(b) and stages nothing');
is_deeply([ $store->wal_positions($wal) ], \@pos, '(b) and writes no WAL entry');
$writer->quit;

# ---------------------------------------------------------------------------
# (c) the commit fails after staging: a foreign object at the next position
my $tip = $node->safe_psql('postgres', q{SELECT wal_tip FROM rollout_stat_stores WHERE store = 'ing'});
is($tip, $pos[-1], '(c) the view\'s wal_tip is the last WAL position');
my $blocker = $store->wal_key($wal, $tip + 1);
$store->put($blocker, "not a WAL entry\n");
my $csv_c = make_csv('c');
my ($ret, $out, $err) = $node->psql('postgres', "COPY t FROM '$csv_c' WITH (FORMAT csv)");
isnt($ret, 0, '(c) the COPY fails at commit');
like($err, qr/WAL position \d+ of shard "\Q$shard\E" in store "ing"/, '(c) with an error naming the WAL position, shard and store')
  or diag($err);
note("(c) error: $err");
$store->delete($blocker) or die "unlink $blocker: $!";
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", '(c) none of its rows is visible');
my @after_c = ingest_objects();
is(scalar(@after_c), 2, '(c) it left one more ingest segment');
my %is_live = map { $_ => 1 } @live;
my @orphans = grep { !$is_live{$_} } @after_c;
is(scalar(@orphans), 1, '(c) the orphan is a new object');
is($node->safe_psql('postgres', q{SELECT transactions_failed FROM rollout_stat_stores WHERE store = 'ing'}),
	'1', '(c) the view counts one failed transaction');

# the writer goes on after the failure
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('after-c', 3, 'y')});
$count += 1;
$sum += 3;
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", '(c) the next commit succeeds');

# ---------------------------------------------------------------------------
# (d) gc: the orphan goes, the live segment stays
sleep(1);    # every object is now older than a 0 s grace
my $gc = q{SELECT objects_deleted FROM rollout_gc('t', '0')};
my $deleted = with_min_gc_grace($node, 0, sub { $node->safe_psql('postgres', $gc) });
cmp_ok($deleted, '>=', 1, "(d) gc deleted $deleted object(s)");
is_deeply([ ingest_objects() ], \@live, '(d) the orphan is gone, the live segment (named by an unflushed WAL entry) is kept');
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", '(d) exact after gc');

# flush adopts the live segment as a generation; gc keeps it
my $flushed = $node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('t')});
is($flushed, 10 + $ROWS + 1, "(d) the flush seals all unflushed rows ($flushed)");
my $m = $store->newest_manifest("ing/shards/$shard/_manifest");
my @adopted = grep { $_->{file} eq 'ing/ingest/' . $live[0] } @{ $m->{generations} };
is(scalar(@adopted), 1, '(d) the shard manifest lists the ingest segment as a generation (adopted, not rewritten)');
is($adopted[0]{rows}, $ROWS, "(d) ... of $ROWS rows") if @adopted;
sleep(1);
with_min_gc_grace($node, 0, sub { $node->safe_psql('postgres', $gc) });
is_deeply([ ingest_objects() ], \@live, '(d) gc keeps the adopted segment');
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", '(d) exact after flush and gc');

# (e) a backend terminated while it stages its rows (its sorted scratch
# segment written, not yet uploaded) removes the scratch file on its way
# out, rather than leaving it until the server's next start
my $csv_e = make_csv('e');
my $offset = -s $node->logfile;
my $terminated = PsqlScript->start($node, name => 'terminated_copy', sql => qq{
SET rollout_fdw.fail_at = 'ingest.after_sort:hold';
COPY t FROM '$csv_e' WITH (FORMAT csv);
});
ok(wait_for_fault($node, 'ingest.after_sort', $offset), '(e) a COPY holds with its rows sorted into a scratch file');
my $scratch_glob = $node->data_dir . '/base/pgsql_tmp/pgsql_tmp_rollout*.ingest';
my @scratch = glob($scratch_glob);
is(scalar(@scratch), 1, '(e) its scratch segment is in the temporary folder');
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE query LIKE 'COPY t FROM%'});
$terminated->finish;
my $gone = 0;
for (1 .. 100)
{
	@scratch = glob($scratch_glob);
	$gone = 1, last unless @scratch;
	select(undef, undef, undef, 0.1);
}
ok($gone, '(e) the terminated backend removed it');
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", '(e) and nothing of it is visible');

$node->stop;
$node->start;
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", 'exact after a restart');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');
$node->stop;
done_testing();
