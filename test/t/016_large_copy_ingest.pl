
# Copyright (c) rollout_fdw authors
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

use strict;
use warnings;

use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $ROWS = 20000;

my $node = PostgreSQL::Test::Cluster->new('ingest');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'rollout_fdw'
rollout_fdw.worker_databases = 'postgres'
rollout_fdw.ingest_threshold = '64kB'
rollout_fdw.flush_interval = 0
rollout_fdw.merge_after_generations = 0
rollout_fdw.gc_interval = 0
});
$node->start;

my $location = PostgreSQL::Test::Utils::tempdir('rollout_store');
my $scripts = PostgreSQL::Test::Utils::tempdir('scripts');
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE SERVER s FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://$location');
CREATE FOREIGN TABLE t (id text, v int, payload text) SERVER s OPTIONS (store 'ing', key 'id');
});
my $shard = $node->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
my $wal_dir = "$location/ing/shards/$shard/wal";
my $ingest_dir = "$location/ing/ingest";

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

sub ingest_objects
{
	return () unless opendir(my $dh, $ingest_dir);
	my @o = sort grep { /\.seg$/ } readdir($dh);
	closedir($dh);
	return @o;
}

sub wal_positions
{
	return () unless opendir(my $dh, $wal_dir);
	my @p = sort { $a <=> $b }
	  map { /^(\d{20})\.wal$/ ? $1 + 0 : () } readdir($dh);
	closedir($dh);
	return @p;
}

sub wal_metadata
{
	my ($p) = @_;
	my $bytes = slurp_file(sprintf("%s/%020d.wal", $wal_dir, $p));
	my ($meta) = $bytes =~ /(\{"kind":\s*"(?:wal|fence)".*?\]\})/s;
	die "no metadata in WAL position $p" unless defined $meta;
	return decode_json($meta);
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
$writer->query_safe('BEGIN');
$writer->query_safe("COPY t FROM '$csv_a' WITH (FORMAT csv)");
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum",
	'(a) before COMMIT another session sees none of the COPY');
is_deeply([ ingest_objects() ], [], '(a) nothing is staged before COMMIT');

# a reader polling the count while the COPY commits
my ($rout, $rerr) = ('', '');
my $reader_file = "$scripts/reader.sql";
{
	open(my $fh, '>', $reader_file) or die;
	print $fh "SELECT count(*) FROM t WHERE id LIKE 'a%';\nSELECT pg_sleep(0.005);\n" x 150;
	close $fh;
}
my $reader = IPC::Run::start(
	[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', $reader_file ],
	'<', \undef, '>', \$rout, '2>', \$rerr,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
# let the reader start polling, then commit
$node->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE '%pg_sleep(0.005)%' AND pid <> pg_backend_pid()});
$writer->query_safe('COMMIT');
$reader->finish;
is($reader->result(0), 0, '(a) the polling reader ran without error') or diag($rerr);
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
my @pos = wal_positions();
my $meta = wal_metadata($pos[-1]);
is(scalar(@{ $meta->{ingest} }), 1, '(a) the newest WAL entry references one ingest segment');
is($meta->{ingest}[0]{file}, "ing/ingest/" . ($live[0] // ''), '(a) ... the one staged');
is($meta->{ingest}[0]{rows}, $ROWS, "(a) ... with its $ROWS rows");
cmp_ok(-s "$wal_dir/" . sprintf('%020d.wal', $pos[-1]), '<', 64 * 1024,
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
is_deeply([ wal_positions() ], \@pos, '(b) and writes no WAL entry');
$writer->quit;

# ---------------------------------------------------------------------------
# (c) the commit fails after staging: a foreign object at the next position
my $tip = $node->safe_psql('postgres', q{SELECT wal_tip FROM rollout_stat_stores WHERE store = 'ing'});
is($tip, $pos[-1], '(c) the view\'s wal_tip is the last WAL position');
my $blocker = sprintf('%s/%020d.wal', $wal_dir, $tip + 1);
{
	open(my $fh, '>', $blocker) or die "open $blocker: $!";
	print $fh "not a WAL entry\n";
	close $fh;
}
my $csv_c = make_csv('c');
my ($ret, $out, $err) = $node->psql('postgres', "COPY t FROM '$csv_c' WITH (FORMAT csv)");
isnt($ret, 0, '(c) the COPY fails at commit');
like($err, qr/WAL position \d+ of shard "\Q$shard\E" in store "ing"/, '(c) with an error naming the WAL position, shard and store')
  or diag($err);
note("(c) error: $err");
unlink($blocker) or die "unlink $blocker: $!";
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
my $gc = q{SET rollout_fdw.min_gc_grace = 0; SELECT objects_deleted FROM rollout_gc('t', '0')};
my $deleted = $node->safe_psql('postgres', $gc);
cmp_ok($deleted, '>=', 1, "(d) gc deleted $deleted object(s)");
is_deeply([ ingest_objects() ], \@live, '(d) the orphan is gone, the live segment (named by an unflushed WAL entry) is kept');
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", '(d) exact after gc');

# flush adopts the live segment as a generation; gc keeps it
my $flushed = $node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('t')});
is($flushed, 10 + $ROWS + 1, "(d) the flush seals all unflushed rows ($flushed)");
my $m = decode_json(slurp_file(
	(sort glob("$location/ing/shards/$shard/_manifest/*.json"))[-1]));
my @adopted = grep { $_->{file} eq 'ing/ingest/' . $live[0] } @{ $m->{generations} };
is(scalar(@adopted), 1, '(d) the shard manifest lists the ingest segment as a generation (adopted, not rewritten)');
is($adopted[0]{rows}, $ROWS, "(d) ... of $ROWS rows") if @adopted;
sleep(1);
$node->safe_psql('postgres', $gc);
is_deeply([ ingest_objects() ], \@live, '(d) gc keeps the adopted segment');
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", '(d) exact after flush and gc');

$node->stop;
$node->start;
is($node->safe_psql('postgres', $state_sql), "$count|$count|$sum", 'exact after a restart');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');
$node->stop;
done_testing();
