
# Copyright (c) rollout_fdw authors
#
# 019_store_recreated.pl — a store deleted and created again under the same
# name is a new store: nothing of the old one (in particular rows the shared
# writer still holds in its memtable, or ingest segments it names) may leak
# into it.  Runs in both modes (ROLLOUT_TEST_PRELOAD decides).

use strict;
use warnings;

use File::Path qw(rmtree);
use Time::HiRes qw(sleep);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;

# preload: no sweeper (RolloutTest::configure_node), nothing may flush the
# old rows behind the test's back
my $node = mode_node('recreated', conf => ['rollout_fdw.min_gc_grace = 0']);

my $store = RolloutStore->for_test('019_store_recreated', backend => 'file');
$store->create_extension_and_server($node);

for my $round (1 .. 3)
{
	$node->safe_psql(
		'postgres', qq{
CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'again');
SET rollout_fdw.ingest_threshold = '64kB';
INSERT INTO t SELECT g, 'round $round big' FROM generate_series(1, 3000) g;
INSERT INTO t SELECT g, 'round $round small' FROM generate_series(5001, 5010) g;
});
	is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
		'3010', "round $round: the store holds this round's rows");
	is($node->safe_psql('postgres', "SELECT count(*) FROM t WHERE v NOT LIKE 'round $round %'"),
		'0', "round $round: no row of an earlier round");

	# drop the table and delete the store while the cluster runs
	$node->safe_psql('postgres', 'DROP FOREIGN TABLE t');
	rmtree($store->path('again'));
}

$node->safe_psql('postgres',
	"CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'again')");
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '0', 'a recreated store starts empty');
$node->safe_psql('postgres', "INSERT INTO t VALUES (1, 'fresh')");
is($node->safe_psql('postgres', "SELECT rows_flushed FROM rollout_flush('t')"),
	'1', 'its first flush seals only its own row');
is($node->safe_psql('postgres', 'SELECT id, v FROM t'), '1|fresh', 'and reads only it');
is($node->safe_psql('postgres', "SELECT exact_row_count, base_rows + generation_rows FROM rollout_observe('t', true)"),
	'1|1', 'rollout_observe agrees');

# Sessions that opened a store before it was deleted and created again must
# not take the old creation's names in the new one: a handle reads
# _store.json again before it believes a change feed position or a token (at
# most a second after its last look), and always before gc decides what
# retentions keep.  Before, such a session's feed accepted the old
# creation's position, and its gc judged the new store's retentions by the
# old creation's identity.
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE u (id int, v text) SERVER s OPTIONS (store 'reborn', key 'id');
INSERT INTO u VALUES (1, 'old');});
my $feed_session = $node->background_psql('postgres', on_error_stop => 0);
my $old_position = $feed_session->query_safe(q{SELECT next_since FROM rollout_changes('u') LIMIT 1});
my $gc_session = $node->background_psql('postgres', on_error_stop => 0);
$gc_session->query_safe('SELECT count(*) FROM u');
rmtree($store->path('reborn'));
$node->safe_psql('postgres', q{INSERT INTO u VALUES (2, 'new')});
my $token = $node->safe_psql('postgres', q{SELECT rollout_snapshot('u', now() + interval '1 day')});
my ($token_incarnation) = $token =~ /^rs1:([^:]+):/;
$node->safe_psql('postgres', q{
INSERT INTO u VALUES (3, 'newer');
SELECT 1 FROM rollout_merge('u');
SELECT 1 FROM rollout_compact('u', min_fragments => 1);});

# (a handle trusts its look at _store.json for a second)
sleep(1.1);
$feed_session->query(qq{SELECT count(*) FROM rollout_changes('u', '$old_position')});
like($feed_session->{stderr}, qr/is not a position in store "reborn"/,
	"a session's handle older than the store looks again, and refuses its old change feed position");
$feed_session->{stderr} = '';
# a feed started there from nothing names the new creation: its next
# position is good for the next poll
my $new_position = $feed_session->query_safe(q{SELECT next_since FROM rollout_changes('u') LIMIT 1});
is($feed_session->query_safe(qq{SELECT count(*) FROM rollout_changes('u', '$new_position')}), '0',
	'... and a position it hands out from the start is one of the new creation');
like($feed_session->query_safe(q{SELECT rollout_snapshot('u')}), qr/^rs1:\Q$token_incarnation\E:/,
	'... as is a snapshot it takes');
$feed_session->quit;

$gc_session->query(q{SELECT objects_deleted FROM rollout_gc('u', '0')});
like($gc_session->{stderr}, qr/store "reborn" was deleted since this session opened it/,
	"a session's handle older than the store does not collect garbage in the new one");
$gc_session->{stderr} = '';
$gc_session->query_safe(q{SELECT objects_deleted FROM rollout_gc('u', '0')});
$gc_session->quit;
is($node->safe_psql('postgres', qq{SET rollout_fdw.as_of = '$token'; SELECT string_agg(id::text, ',' ORDER BY id) FROM u}),
	'2', '... and, reopened, its gc keeps what the new store\'s retention keeps');

# A cached plan of a session whose handle is older than the store's
# creation, run with a token of the new creation: the scan finds its handle
# stale, opens the store again and reads the token.  Before the fix, it took
# the token for another store's and read the live rows.
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE w (id int, v text) SERVER s OPTIONS (store 'reborn_w', key 'id');
INSERT INTO w VALUES (1, 'old');});
my $plan_session = $node->background_psql('postgres', on_error_stop => 0);
$plan_session->query_safe(q{PREPARE ids AS SELECT string_agg(id::text, ',' ORDER BY id) FROM w});
is($plan_session->query_safe('EXECUTE ids'), '1', 'a prepared read of the store as it first was');
rmtree($store->path('reborn_w'));
$node->safe_psql('postgres', q{INSERT INTO w VALUES (2, 'new')});
my $w_token = $node->safe_psql('postgres', q{SELECT rollout_snapshot('w')});
$node->safe_psql('postgres', q{INSERT INTO w VALUES (3, 'newer')});
# (no wait: a token of another creation makes the handle look again at once)
$plan_session->query_safe("SET rollout_fdw.as_of = '$w_token'");
is($plan_session->query_safe('EXECUTE ids'), '2',
	'run again with a token of the new creation, it reads that token');
$plan_session->query_safe('RESET rollout_fdw.as_of');
is($plan_session->query_safe('EXECUTE ids'), '2,3', '... and, without it, the store as it is now');
$plan_session->quit;

# Plain reads in a session whose handle is older than the store's creation:
# they must read the new creation, not what the session cached of the old
# one under the same names (manifests by version number, footers with their
# key ranges, fragments).  Before, such a session went on returning the old
# rows, skipped new ones, or failed ("corrupt", "vanished") until it
# reconnected.  x: both creations flushed once (the same manifest versions);
# y: the old one merged into the base, the new one only flushed.
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE x (id int, v text) SERVER s OPTIONS (store 'reborn_x', key 'id');
CREATE FOREIGN TABLE y (id int, v text) SERVER s OPTIONS (store 'reborn_y', key 'id');
INSERT INTO x SELECT g, 'old' FROM generate_series(1, 100) g;
INSERT INTO y SELECT g, 'old' FROM generate_series(1, 100) g;
SELECT 1 FROM rollout_flush('x');
SELECT 1 FROM rollout_flush('y');
SELECT 1 FROM rollout_merge('y');});
my $summary = q{SELECT count(*) || '|' || min(v) || '|' || min(id) || '|' || max(id) FROM };
my $read_session = $node->background_psql('postgres', on_error_stop => 0);
for my $t (qw(x y))
{
	is($read_session->query_safe($summary . $t), '100|old|1|100', "$t: a long-lived session reads the store");
	is($read_session->query_safe("SELECT count(*) FROM $t WHERE id = 50"), '1', "$t: and looks up a key");
	rmtree($store->path("reborn_$t"));
	$node->safe_psql('postgres', qq{
INSERT INTO $t SELECT g, 'new' FROM generate_series(1001, 1005) g;
SELECT 1 FROM rollout_flush('$t');});
}
# (a handle trusts its look at _store.json for a second)
sleep(1.1);
for my $t (qw(x y))
{
	my ($out, $ret) = $read_session->query($summary . $t);
	is($out, '5|new|1001|1005', "$t: deleted and created again, the session reads the new creation")
	  or diag($read_session->{stderr});
	$read_session->{stderr} = '';
	is($read_session->query_safe("SELECT count(*) FROM $t WHERE id = 1002"), '1',
		"$t: a lookup finds a new row");
	is($read_session->query_safe("SELECT count(*) FROM $t WHERE id = 50"), '0',
		"$t: and no old one");
	is($read_session->query_safe("SELECT exact_row_count FROM rollout_observe('$t', true)"), '5',
		"$t: rollout_observe counts the new creation");
}
$read_session->quit;

$node->stop;
done_testing();
