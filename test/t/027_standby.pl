
# Copyright (c) rollout_fdw authors
#
# 027_standby.pl — a streaming standby reads rollout stores but never
# writes them; promoted, it takes the shard over and fences its old primary
# (issue 10, point 2; DESIGN.md §8).
#
# A standby made by pg_basebackup has its primary's system identifier, so it
# is the primary's shard.  Both servers reach the store at one file://
# location outside their data directories (shared storage).
#   1. The standby reads every committed row, the primary's unflushed ones
#      included (from the WAL entries on the store), and keeps up with new
#      commits.  A named snapshot's token taken on the primary reads the
#      same there, and so does the change feed after it.
#   2. On the standby rollout_flush, rollout_merge, rollout_compact and
#      rollout_gc fail with SQLSTATE 25006 (read-only SQL transaction), and
#      INSERT fails as PostgreSQL makes it: the store's objects stay exactly
#      as they were (names and sizes).
#   3. A store in the embedded default location (a folder of the data
#      directory, which the standby only has a stale copy of) is refused on
#      the standby with a clear error.
#   4. Promoted, the standby (now on timeline 2) claims the shard at its
#      first commit: a shard manifest with writer_timeline 2 and a new epoch,
#      and a fence marker.  The old primary, still running, is refused every
#      further commit and flush ("taken over by a promoted standby"), and
#      nothing it acknowledged is lost: the new primary reads every row
#      committed on either server, exactly once.  Its copy of the embedded
#      default location (as old as the base backup) is not written on as if
#      it were current: the first commit names the problem, and an explicit
#      location for that folder is how to continue with the copy.
# Runs in both modes (plain and preloaded; test/perl/RolloutTest.pm).

use strict;
use warnings;

use File::Find;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node shard_of);
use Test::More;

my $store = RolloutStore->for_test('027_standby', backend => 'file');

my $primary = mode_node('primary', init => { allows_streaming => 1 });
$store->create_extension_and_server($primary, 'shared');
$primary->safe_psql(
	'postgres', q{
CREATE SERVER local FOREIGN DATA WRAPPER rollout_fdw;
CREATE FOREIGN TABLE t (id int, v text, origin text) SERVER shared OPTIONS (store 'ha');
CREATE FOREIGN TABLE d (id int) SERVER local OPTIONS (store 'local_only');
});
my $shard = shard_of($primary);

$primary->safe_psql('postgres',
	"INSERT INTO t SELECT g, 'v' || g, 'p1' FROM generate_series(1, 100) g");
$primary->safe_psql('postgres', "SELECT rollout_flush('t')");
$primary->safe_psql('postgres',
	"INSERT INTO t SELECT g, 'v' || g, 'p2' FROM generate_series(101, 150) g");
$primary->safe_psql('postgres', 'INSERT INTO d SELECT generate_series(1, 5)');

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is(shard_of($standby), $shard, 'it has the primary\'s system identifier: the same shard');

# --- 1. reads on the standby
is($standby->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id), sum(id) FROM t'),
	'150|150|11325', 'the standby reads all 150 committed rows, the 50 unflushed ones included');
is($standby->safe_psql('postgres', "SELECT exact_row_count FROM rollout_observe('t', true)"),
	'150', 'rollout_observe works on the standby');
$primary->safe_psql('postgres',
	"INSERT INTO t SELECT g, 'v' || g, 'p3' FROM generate_series(151, 170) g");
is($standby->safe_psql('postgres', 'SELECT count(*) FROM t'), '170',
	'a commit on the primary is visible on the standby at once');

# --- 2. nothing writes on the standby
sub store_listing
{
	my %objects;
	find(sub { $objects{$File::Find::name} = -s $_ if -f $_; }, $store->dir);
	return join("\n", map { "$_ $objects{$_}" } sort keys %objects);
}
my $before = store_listing();
for my $call (
	"SELECT * FROM rollout_flush('t')",
	"SELECT * FROM rollout_merge('t')",
	"SELECT * FROM rollout_compact('t', 0)",
	"SELECT * FROM rollout_gc('t', '1 hour')")
{
	my ($ret, $out, $err) = $standby->psql('postgres', "\\set VERBOSITY verbose\n$call");
	isnt($ret, 0, "refused on the standby: $call");
	like($err, qr/ERROR:\s+25006: cannot \w+( garbage in)? store "ha" during recovery/,
		'... with SQLSTATE 25006 and a message naming the store');
}
my ($ret, $out, $err) = $standby->psql('postgres', "INSERT INTO t VALUES (999, 'x', 's')");
isnt($ret, 0, 'INSERT is refused on the standby');
like($err, qr/read-only transaction/, '... as PostgreSQL refuses writes in recovery');
is(store_listing(), $before, 'the store\'s objects are exactly as before (names and sizes)');

# --- 3. the embedded default location is the primary's data directory
($ret, $out, $err) = $standby->psql('postgres', 'SELECT count(*) FROM d');
isnt($ret, 0, 'a store in the embedded default location is refused on the standby');
like($err, qr/cannot read store "local_only" in the embedded default location on a standby/,
	'... with a clear error');
like($err, qr/HINT:.*location both servers reach/, '... and a hint to use a shared location');
is($primary->safe_psql('postgres', 'SELECT count(*) FROM d'), '5', 'the primary reads it');

# --- named snapshots: taken, retained and released on the primary only; a
# token taken there reads the same on the standby
$before = store_listing();
for my $call (
	"SELECT rollout_snapshot('t')",
	"SELECT rollout_retain('t', 'rs1:0:1:', now() + interval '1 hour')",
	"SELECT rollout_release('t', 'rs1:0:1:')")
{
	($ret, $out, $err) = $standby->psql('postgres', "\\set VERBOSITY verbose\n$call");
	like($err, qr/ERROR:\s+25006: cannot (take a named snapshot|retain a snapshot|release a snapshot) of store "ha" during recovery/,
		"refused on the standby with SQLSTATE 25006: $call");
}
is(store_listing(), $before, 'the refused calls wrote nothing');
# (a store of its own, so that the promotion below finds "ha" as it was)
$primary->safe_psql('postgres', q{
CREATE FOREIGN TABLE ns (id int, origin text) SERVER shared OPTIONS (store 'ha_named');
INSERT INTO ns SELECT g, 'first' FROM generate_series(1, 20) g;});
my $token = $primary->safe_psql('postgres', q{SELECT rollout_snapshot('ns', now() + interval '1 hour')});
$primary->safe_psql('postgres', q{UPDATE ns SET origin = 'changed' WHERE id <= 10});
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE origin = 'changed'), count(*) FROM ns}),
	'10|20', 'the standby reads the update made after the token');
is($standby->safe_psql('postgres', qq{SET rollout_fdw.as_of = '$token'; SELECT count(*) FILTER (WHERE origin = 'changed'), count(*) FROM ns}),
	'0|20', 'and, as of the token taken on the primary, the rows as they were');
is($standby->safe_psql('postgres', qq{SELECT string_agg(op || ':' || ("row"->>'origin'), ',' ORDER BY key::int), count(DISTINCT next_since) FROM rollout_changes('ns', '$token')}),
	join(',', ('upsert:changed') x 10) . '|1', 'the change feed after the token works on the standby');
$primary->safe_psql('postgres', qq{SELECT rollout_release('ns', '$token')});

# --- the view of the store's manifest versions across a promotion.  The
# standby reads with a long refresh interval, so (preloaded) its shared view
# keeps the shard and base versions of that read; then the primary merges
# its generations into the base, which drains them from the shard manifest.
# After the promotion, the new primary's first commit claims the shard: the
# shard manifest it commits is built on the drained one, and its view must
# learn the base that holds the drained rows with it (the manifest says
# which, drops_covered_by_base), or its reads would miss them.
my $long = "SET rollout_fdw.manifest_refresh_interval = '60s';";
is($standby->safe_psql('postgres', "$long SELECT count(*) FROM t"), '170',
	'the standby reads with a long refresh interval');
$primary->safe_psql('postgres', "SELECT rollout_merge('t')");
is($primary->safe_psql('postgres', "SELECT fragments, generations FROM rollout_observe('t')"),
	'1|0', 'the primary merged every generation into the base');
is($standby->safe_psql('postgres', "$long SELECT count(*), sum(id) FROM t"), '170|14535',
	'the standby still reads every row (its view is older than the merge)');

# --- 4. promotion
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby did not leave recovery';
my $new = $standby;
# the control file shows the new timeline after the checkpoint that
# promotion requests, which runs in the background
ok($new->poll_query_until('postgres', 'SELECT timeline_id >= 2 FROM pg_control_checkpoint()'),
	'the promoted standby writes on a new timeline');

my $manifests = "ha/shards/$shard/_manifest";
my $epoch_before = $store->newest_manifest($manifests)->{writer_epoch};

$new->safe_psql('postgres',
	"INSERT INTO t SELECT g, 'v' || g, 'n1' FROM generate_series(171, 200) g");
is($new->safe_psql('postgres', "$long SELECT count(*), sum(id) FROM t"), '200|20100',
	'after its claim the new primary reads every row, the merged ones included, through its view');
my $m = $store->newest_manifest($manifests);
is($m->{writer_timeline}, 2, 'the new primary claimed the shard with its timeline');
is($m->{writer_epoch}, $epoch_before + 1, '... and the next writer epoch');
my @wal = $store->wal_entries("ha/shards/$shard/wal");
my ($fence) = grep { $_->[1]{kind} eq 'fence' && $_->[1]{epoch} == $m->{writer_epoch} } @wal;
ok(defined $fence, "a fence marker of epoch $m->{writer_epoch} is in the WAL");

# the old primary lives on, and is refused
my @errors;
for my $attempt (1 .. 2)
{
	($ret, $out, $err) = $primary->psql('postgres',
		"INSERT INTO t SELECT g, 'v' || g, 'old$attempt' FROM generate_series(1001, 1010) g");
	isnt($ret, 0, "the old primary's commit $attempt is refused");
	push @errors, $err;
}
like($errors[0], qr/shard "\Q$shard\E" of store "ha" was taken over by/,
	'... the shard was taken over');
like($errors[1], qr/was taken over by a promoted standby/,
	'... by a promoted standby, as the old primary then knows');
like($errors[1], qr/timeline 2.*timeline 1/s, '... naming both timelines');
($ret, $out, $err) = $primary->psql('postgres', "SELECT * FROM rollout_flush('t')");
isnt($ret, 0, 'the old primary cannot flush the new primary\'s entries');
like($err, qr/taken over by a promoted standby/, '... taken over');

# nothing lost, nothing twice
is($new->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id), sum(id) FROM t'),
	'200|200|20100', 'the new primary reads every committed row exactly once (200)');
is($new->safe_psql('postgres', "SELECT count(*) FROM t WHERE origin LIKE 'old%'"), '0',
	'no row of a refused commit is anywhere');
$new->safe_psql('postgres', "SELECT rollout_flush('t')");
$new->safe_psql('postgres',
	"INSERT INTO t SELECT g, 'v' || g, 'n2' FROM generate_series(201, 210) g");
$new->safe_psql('postgres', "SELECT rollout_merge('t')");
is($new->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM t'),
	'210|210', 'after flush and merge on the new primary: 210 rows, once each');
is($primary->safe_psql('postgres', 'SELECT count(*) FROM t'), '210',
	'the old primary still reads the store');
is($new->safe_psql('postgres',
		"SELECT string_agg(DISTINCT origin, ',' ORDER BY origin) FROM t"),
	'n1,n2,p1,p2,p3', 'the rows of exactly the acknowledged commits');

# the new primary's copy of the embedded default location
($ret, $out, $err) = $new->psql('postgres', 'INSERT INTO d VALUES (6)');
isnt($ret, 0, 'the promoted server does not write its copy of a default-location store');
like($err, qr/store "local_only" in the embedded default location was last written on timeline 1, but this server is on timeline 2/,
	'... naming the store and both timelines');
like($err, qr/HINT:.*ALTER SERVER \.\.\. OPTIONS \(ADD location 'file:\/\/.*rollout_fdw'\)/,
	'... and how to continue with the copy');
my $copy = $new->data_dir . '/rollout_fdw';
$new->safe_psql('postgres', "ALTER SERVER local OPTIONS (ADD location 'file://$copy')");
$new->safe_psql('postgres', 'INSERT INTO d VALUES (6)');
is($new->safe_psql('postgres', 'SELECT count(*) FROM d'), '6',
	'with the folder named explicitly it continues with the copy');

for my $n ($primary, $new)
{
	unlike(slurp_file($n->logfile), qr/terminated by signal|PANIC/, $n->name . ': no backend crashed');
	$n->stop;
}
done_testing();
