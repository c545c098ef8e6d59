
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 047_manifest_view.pl — snapshots from this cluster's view of a store's
# manifest versions (core/manifest_view.c, docs/ARCHITECTURE.md "The path of
# a SELECT").
#
# Preloaded, a snapshot takes the manifest versions this cluster knows
# instead of listing them, while the view was refreshed from the store less
# than rollout_fdw.manifest_refresh_interval ago; every flush, merge,
# compaction and claim of this cluster records its version in the view as it
# commits.  So:
#   (a) a warm read lists nothing ("Manifests: shared view") and still sees
#       every row this cluster committed, flushed, merged and compacted;
#   (b) another cluster's flush is seen once the interval has passed (and at
#       once with the interval at 0), never before a refresh;
#   (c) a table with read_wal_tail always lists, and sees the other
#       cluster's commits at once;
#   (d) objects a stale view names that garbage collection deleted (on
#       another cluster, with a grace shorter than this one's minimum) make
#       the read take its snapshot from the store, with the right rows;
#   (f) a view is never trusted longer than half rollout_fdw.min_gc_grace;
#   (e) readers counting a store while this cluster inserts, flushes, merges
#       and compacts it never see the count go back (a flush's memtable
#       batches are dropped only after the view knows its manifest);
#   (g) after a restart, before this cluster's writer holds a memtable of
#       the store, a read that found its own WAL tail empty spares the next
#       reads the listing, and a commit is still seen at once;
#   (h) on the remote stores, the same through a second location naming the
#       store differently (its own slot), with the commit made through the
#       first location.
# Without preloading there is no view: every snapshot lists.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(preload mode_node with_min_gc_grace);
use Test::More;

my $pre = preload();
my $store = RolloutStore->for_test('047_manifest_view');

my %node;
for my $name ('a', 'b')
{
	my $n = mode_node("view_$name",
		conf => ['max_parallel_workers_per_gather = 0']);
	$store->create_extension_and_server($n);
	$n->safe_psql(
		'postgres', q{
CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'viewed');
CREATE FOREIGN TABLE t_tail (id int, v text) SERVER s OPTIONS (store 'viewed', read_wal_tail 'true');
});
	$node{$name} = $n;
}
my ($A, $B) = ($node{a}, $node{b});

# "count|sum" of t and where the snapshot's manifests came from, read in one
# session with the given refresh interval.
sub read_state
{
	my ($node, $interval, $table) = @_;
	$table //= 't';
	my $out = $node->safe_psql(
		'postgres', qq{
SET rollout_fdw.manifest_refresh_interval = '$interval';
SELECT count(*) || '|' || coalesce(sum(id), 0) FROM $table;
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM $table;
});
	my ($state) = split /\n/, $out;
	my ($manifests) = $out =~ /Manifests: (.*)$/m;
	return ($state, $manifests // 'none');
}

sub sum_to { my ($n) = @_; return $n * ($n + 1) / 2; }

# Call $check until it is true or $timeout seconds pass; whether it was.
sub eventually
{
	my ($check, $timeout) = @_;
	my $t0 = Time::HiRes::time();
	while (Time::HiRes::time() - $t0 < $timeout)
	{
		return 1 if $check->();
		usleep(100_000);
	}
	return 0;
}

# ---------------------------------------------------------------------------
# (a) this cluster's own commits, with a long interval: only the first read
# lists, every later one uses the view and sees everything at once.
$A->safe_psql('postgres', 'INSERT INTO t SELECT g, $$a$$ FROM generate_series(1, 100) g');
my ($state, $from) = read_state($A, '60s');
is($state, '100|' . sum_to(100), 'A reads its rows');
$from = (read_state($A, '60s'))[1];
is($from, $pre ? 'shared view' : 'listed',
	$pre ? 'a second read takes the manifests from the view' : 'without preloading every read lists');

my $n = 100;
for my $step ('flush', 'merge', 'insert', 'compact', 'flush', 'merge', 'compact')
{
	if ($step eq 'insert')
	{
		$A->safe_psql('postgres',
			"INSERT INTO t SELECT g, 'a' FROM generate_series($n + 1, $n + 50) g");
		$n += 50;
	}
	elsif ($step eq 'flush')
	{
		$A->safe_psql('postgres', "SELECT * FROM rollout_flush('t')");
	}
	elsif ($step eq 'merge')
	{
		$A->safe_psql('postgres', "SELECT * FROM rollout_merge('t')");
	}
	else
	{
		$A->safe_psql('postgres', "SELECT * FROM rollout_compact('t', 1)");
	}
	($state, $from) = read_state($A, '60s');
	is($state, "$n|" . sum_to($n), "after A's $step A sees all its rows at once");
	is($from, $pre ? 'shared view' : 'listed', "... reading the manifests from the "
		  . ($pre ? 'view' : 'store'));
}
with_min_gc_grace($A, 0, sub { $A->safe_psql('postgres', "SELECT rollout_gc('t', '0')") });
is((read_state($A, '60s'))[0], "$n|" . sum_to($n), 'and after its gc');

# ---------------------------------------------------------------------------
# (b) another cluster's flush: seen after a refresh, not before.
$B->safe_psql('postgres',
	"INSERT INTO t SELECT g, 'b' FROM generate_series(1001, 1010) g");
$B->safe_psql('postgres', "SELECT * FROM rollout_flush('t')");
my $with_b = ($n + 10) . '|' . (sum_to($n) + sum_to(1010) - sum_to(1000));
($state, $from) = read_state($A, '60s');
if ($pre)
{
	is($state, "$n|" . sum_to($n),
		"within the interval A does not see B's flush yet (the bound the setting gives)");
}
else
{
	is($state, $with_b, "without preloading A sees B's flush at once");
}
($state, $from) = read_state($A, '0');
is($state, $with_b, 'with the interval at 0 A sees it at once');
is($from, 'listed', '... listing the manifests');
is((read_state($A, '60s'))[0], $with_b,
	'and the refresh it made serves the next reads');

# the default-like short interval: a new flush of B shows up by itself
$B->safe_psql('postgres',
	"INSERT INTO t SELECT g, 'b' FROM generate_series(1011, 1020) g");
$B->safe_psql('postgres', "SELECT * FROM rollout_flush('t')");
my $with_b2 = ($n + 20) . '|' . (sum_to($n) + sum_to(1020) - sum_to(1000));
ok(eventually(sub { (read_state($A, '500ms'))[0] eq $with_b2 }, 30),
	"with a 500 ms interval A sees B's next flush without asking");

# ---------------------------------------------------------------------------
# (c) read_wal_tail: B's commits at once, always listed
$B->safe_psql('postgres',
	"INSERT INTO t SELECT g, 'b' FROM generate_series(1021, 1025) g");
my $with_b3 = ($n + 25) . '|' . (sum_to($n) + sum_to(1025) - sum_to(1000));
($state, $from) = read_state($A, '60s', 't_tail');
is($state, $with_b3, 'read_wal_tail sees B\'s unflushed commit at once');
is($from, 'listed', '... and lists the manifests');
$B->safe_psql('postgres', "SELECT * FROM rollout_flush('t')");

# ---------------------------------------------------------------------------
# (d) a stale view naming objects gc deleted: A's view (60 s) still names
# B's generations and the base A read; B merges, compacts and collects with
# grace 0, so the objects A's view names are gone.
is((read_state($A, '0'))[0], $with_b3, 'A refreshes its view');
$B->safe_psql('postgres', "SELECT * FROM rollout_merge('t')");
$B->safe_psql('postgres', "SELECT * FROM rollout_compact('t', 1)");
with_min_gc_grace($B, 0, sub { $B->safe_psql('postgres', "SELECT rollout_gc('t', '0')") });
($state, $from) = read_state($A, '60s');
is($state, $with_b3,
	'a view naming deleted objects gives way to the store: the same rows');

# ---------------------------------------------------------------------------
# (f) with min_gc_grace at 0 the view is never trusted
if ($pre)
{
	is((read_state($A, '60s'))[1], 'shared view', 'A reads through its view');
	is(with_min_gc_grace($A, 0, sub { $A->safe_psql('postgres', q{
SET rollout_fdw.manifest_refresh_interval = '60s';
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM t;
}) }) =~ /Manifests: (.*)$/m ? $1 : 'none', 'listed',
		'with min_gc_grace 0 the same read lists the manifests');
}

# (e) readers while this cluster writes and maintains the store: a reader
# counts until the writer's last row (id -1) appears; the count must never
# go back.
my $reader = $A->background_psql('postgres', on_error_stop => 0);
$reader->query_safe("SET rollout_fdw.manifest_refresh_interval = '60s'");
$reader->query_until(
	qr/started/, q{
\echo started
DO $$
DECLARE
	previous bigint := 0;
	c bigint;
	reads int := 0;
BEGIN
	LOOP
		SELECT count(*) INTO c FROM t;
		reads := reads + 1;
		IF c < previous THEN
			RAISE EXCEPTION 'count went back from % to % at read %', previous, c, reads;
		END IF;
		previous := c;
		EXIT WHEN EXISTS (SELECT FROM t WHERE id = -1);
	END LOOP;
	RAISE NOTICE 'reads: %', reads;
END $$;
\echo reader-done
});
my $base = 2000;
for my $round (1 .. 30)
{
	$A->safe_psql('postgres',
		"INSERT INTO t SELECT g, 'w' FROM generate_series($base + 1, $base + 20) g");
	$base += 20;
	$A->safe_psql('postgres', "SELECT * FROM rollout_flush('t')") if $round % 2 == 0;
	$A->safe_psql('postgres', "SELECT * FROM rollout_merge('t')") if $round % 5 == 0;
	$A->safe_psql('postgres', "SELECT * FROM rollout_compact('t', 2)")
	  if $round % 10 == 0;
}
$A->safe_psql('postgres', "INSERT INTO t VALUES (-1, 'stop')");
$reader->query_until(qr/reader-done/, "\\echo waiting\n");
unlike($reader->{stderr}, qr/ERROR/, 'no reader saw the count go back')
  or diag($reader->{stderr});
like($reader->{stderr}, qr/reads: \d+/, 'the reader counted while the writer worked');
note($reader->{stderr} =~ /(reads: \d+)/ ? $1 : 'no count of reads');
$reader->quit;
is((read_state($A, '60s'))[0] =~ s/\|.*//r,
	$n + 25 + 601, 'every row is there at the end');

# ---------------------------------------------------------------------------
# (g) this cluster's own WAL tail before its writer claims the shard: after a
# restart A only reads.  Preloaded, a read that listed the tail and found it
# empty lets the next ones skip the listing; A's next commit is seen at once.
$A->safe_psql('postgres', "SELECT * FROM rollout_flush('t')");
$A->restart;
my $own_tail = sub {
	my $out = $A->safe_psql('postgres', q{
SET rollout_fdw.manifest_refresh_interval = '60s';
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM t WHERE id = 1;});
	return $out =~ /Own WAL Tail: (.*)$/m ? $1 : 'none';
};
$own_tail->();
is($own_tail->(), $pre ? 'shared view' : 'listed',
	$pre ? '(g) after a restart a second read knows its own WAL tail is empty'
	: '(g) without preloading every read lists its own WAL tail');
$A->safe_psql('postgres', "INSERT INTO t VALUES (-2, 'after the restart')");
is($A->safe_psql('postgres', q{SET rollout_fdw.manifest_refresh_interval = '60s'; SELECT v FROM t WHERE id = -2}),
	'after the restart', '... and a commit made after that is read at once');
is($own_tail->(), $pre ? 'memtable' : 'listed',
	'... from ' . ($pre ? 'the memtable (the commit claimed the shard)' : 'the listing'));

# (h) one store under two locations that name it differently (the endpoint
# by address and by host name): a slot each, so the alias's writer holds no
# memtable and its reads may know the WAL tail empty.  A commit through the
# other location must still be seen at once through the alias.  file://
# locations are resolved to one directory, hence one slot: remote only.
if ($store->{backend} ne 'file')
{
	(my $alias_endpoint = $store->{endpoint}) =~ s{//127\.0\.0\.1([:/])}{//localhost$1};
	isnt($alias_endpoint, $store->{endpoint}, '(h) the alias names the endpoint otherwise');
	$A->safe_psql('postgres', $store->server_sql('s_alias', endpoint => $alias_endpoint)
		  . q{CREATE FOREIGN TABLE t_alias (id int, v text) SERVER s_alias OPTIONS (store 'viewed');});
	$A->safe_psql('postgres', "SELECT * FROM rollout_flush('t')");
	my $alias_read = sub {
		my $out = $A->safe_psql('postgres', q{
SET rollout_fdw.manifest_refresh_interval = '60s';
SELECT count(*) FROM t_alias WHERE id = -3;
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM t_alias WHERE id = -3;});
		my ($count) = split /\n/, $out;
		return ($count, $out =~ /Own WAL Tail: (.*)$/m ? $1 : 'none');
	};
	$alias_read->();
	my ($count, $tail) = $alias_read->();
	is_deeply([ $count, $tail ], [ 0, $pre ? 'shared view' : 'listed' ],
		'(h) the alias reads the store, ' . ($pre ? 'knowing its WAL tail empty' : 'listing its WAL tail'));
	$A->safe_psql('postgres', "INSERT INTO t VALUES (-3, 'through the first location')");
	($count, $tail) = $alias_read->();
	is($count, 1, '(h) the alias sees a commit made through the other location at once')
	  or diag("its WAL tail came from: $tail");
	is($tail, 'listed', '... listing the tail again');
}

done_testing();
