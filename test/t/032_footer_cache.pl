
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 032_footer_cache.pl — a backend keeps the footers of the base fragments
# and generations it read (core/footer_cache.c), so a second scan of the same
# objects makes no footer request, and results are exactly those of a read
# without the cache:
#   (a) the first scan misses once per fragment, the second hits as often
#       and, on a remote store, makes fewer requests;
#   (b) scans and key lookups with the cache on and off (footer_cache_size
#       = 0, which neither hits nor misses) return the same rows;
#   (c) after a compaction and a gc that deleted the cached fragments, the
#       same session reads the new fragment (a miss) and the right rows;
#   (d) a footer larger than a quarter of the cache is not kept;
#   (e) footers are lent, not copied: a scan of more fragments than the
#       cache holds evicts footers that open readers still point into, and
#       their bytes stay until those readers close (the rows are right, in
#       two scans of one statement and in later statements);
#   (f) preloaded, the shared footer cache (core/shared_footer_cache.c):
#       a new session finds the footers another session read, with fewer
#       requests, and the same rows;
#   (g) footers are also kept decoded: after three scans the cache holds
#       one decoded footer per fragment (pg_backend_memory_contexts), none
#       with the cache off, and with a small cache the decoded forms, page
#       directories decoded into them later included, stay within it;
#   (h) lookups over generations flushed from small commits (numbered, not
#       UUID-named) hit the cache too, with the same rows as without it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node with_min_gc_grace);
use Test::More;

my $node = mode_node('footer_cache');
my $store = RolloutStore->for_test('032_footer_cache');
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t (id int, v int, pad text) SERVER s OPTIONS (store 'fc')});

# four merges: four base fragments, overlapping keys, several versions each
for my $r (1 .. 4)
{
	my $lo = ($r - 1) * 500 + 1;
	$node->safe_psql('postgres',
		"INSERT INTO t SELECT g, g * 10 + $r, repeat('x', 50) FROM generate_series($lo, $lo + 1499) g");
	$node->safe_psql('postgres', q{SELECT rollout_merge('t')});
}
is($node->safe_psql('postgres', q{SELECT fragments, generations FROM rollout_observe('t')}),
	'4|0', 'four base fragments, nothing pending');

my $fingerprint = q{SELECT count(*), count(DISTINCT id), sum(v), sum(length(pad)) FROM t};
# The footer cache is what makes the requests of two scans differ here, so
# nothing else may: every snapshot lists the manifests (preloaded, the
# manifest view spares that listing only to a statement less than
# manifest_refresh_interval after the last listing, which a loaded machine
# does not always make), and requests are counted without retries.
my $lists = "SET rollout_fdw.manifest_refresh_interval = 0;\n";
my $explain = "${lists}EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) $fingerprint;";

# "hits|misses|requests" of each EXPLAIN in a psql output: footers found in
# this backend's cache, and not found there (a footer the shared cache
# supplied, when preloaded, is a miss of this backend's)
sub explain_counters
{
	my ($out) = @_;
	my @hits = $out =~ /"Footer Cache Hits": (\d+)/g;
	my @shared = $out =~ /"Footer Cache Shared Hits": (\d+)/g;
	my @misses = $out =~ /"Footer Cache Misses": (\d+)/g;
	my @requests = $out =~ /"Remote Requests": (\d+)/g;
	my @retries = $out =~ /"Remote Request Retries": (\d+)/g;
	return map { "$hits[$_]|" . ($misses[$_] + $shared[$_]) . '|' . ($requests[$_] - $retries[$_]) }
	  0 .. $#hits;
}

# "shared hits|misses|requests" of an EXPLAIN
sub shared_counters
{
	my ($out) = @_;
	my ($shared) = $out =~ /"Footer Cache Shared Hits": (\d+)/;
	my ($misses) = $out =~ /"Footer Cache Misses": (\d+)/;
	my ($requests) = $out =~ /"Remote Requests": (\d+)/;
	my ($retries) = $out =~ /"Remote Request Retries": (\d+)/;
	return "$shared|$misses|" . ($requests - $retries);
}

# (a) one session, the same scan twice
my @runs = explain_counters($node->safe_psql('postgres', "$explain\n$explain"));
is(scalar(@runs), 2, '(a) two EXPLAIN outputs');
my ($h1, $m1, $r1) = split /\|/, $runs[0];
my ($h2, $m2, $r2) = split /\|/, $runs[1];
is("$h1|$m1", '0|4', '(a) the first scan misses the footer of each of the 4 fragments');
is("$h2|$m2", '4|0', '(a) the second finds all 4 in the cache');
if (RolloutStore::remote())
{
	cmp_ok($r2, '<=', $r1 - 4, "(a) and makes at least 4 requests fewer ($r1 -> $r2)");
}
else
{
	pass('(a) (the file:// store makes no remote requests to compare)');
}

# (b) the same rows with the cache on and off, scans and key lookups
my $queries = qq{$fingerprint;
SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM t WHERE id IN (1, 499, 500, 501, 1250, 2000, 2001, 2999, 3000);
SELECT count(*), sum(v) FROM t WHERE id BETWEEN 700 AND 1900;};
my $with = $node->safe_psql('postgres', "$queries\n$queries");
my $without = $node->safe_psql('postgres',
	"SET rollout_fdw.footer_cache_size = 0;\n$queries\n$queries");
is($with, $without, '(b) scans and lookups return the same with the cache and without');
my ($first, $second) = ($with =~ /\A(.*)\n\1\z/s);
ok(defined $first, '(b) and the same twice in one session (from the cache the second time)');
like($with, qr/^3000\|3000\|\d+\|150000$/m, '(b) 3000 keys, each once');
like($with, qr/1=11,499=4991,500=5001,501=5012,1250=12503,2000=20004,2001=20014,2999=29994,3000=30004/,
	'(b) the newest version of each looked-up key');
@runs = explain_counters($node->safe_psql('postgres',
		"SET rollout_fdw.footer_cache_size = 0;\n$explain"));
is($runs[0] =~ s/\|\d+$//r, '0|0', '(b) with the cache off nothing is looked up');

# (c) compaction and gc delete the cached fragments; the session that cached
# them reads the new one (min_gc_grace, the server's setting, at 0 meanwhile)
my $after = with_min_gc_grace($node, 0, sub { $node->safe_psql('postgres', qq{
$fingerprint;
SELECT fragments_before FROM rollout_compact('t', min_fragments => 2);
SELECT objects_deleted >= 4 FROM rollout_gc('t', '0');
$fingerprint;
$explain
}) });
my @lines = split /\n/, $after;
is($lines[1], '4', '(c) the compaction rewrote the 4 fragments');
is($lines[2], 't', '(c) gc deleted them');
is($lines[3], $lines[0], '(c) the same session reads the same rows from the new fragment');
@runs = explain_counters($after);
is($runs[0] =~ s/\|\d+$//r, '1|0', '(c) whose footer it cached at the first read after the compaction');

# (d) a cache too small for a footer keeps none
@runs = explain_counters($node->safe_psql('postgres',
		"SET rollout_fdw.footer_cache_size = '1kB';\n$explain\n$explain"));
is(join(',', map { s/\|\d+$//r } @runs), '0|1,0|1', '(d) a footer over a quarter of the cache is not kept');

# (e) 12 fragments, a cache of about 8 of their footers: the first scan of
# the statement evicts footers it still reads, the second borrows some
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE ev (id int, v int, pad text) SERVER s OPTIONS (store 'fc_evict')});
for my $r (1 .. 12)
{
	$node->safe_psql('postgres',
		"INSERT INTO ev SELECT g, g * 100 + $r, repeat('y', 20) FROM generate_series($r * 50, $r * 50 + 399) g;
		 SELECT rollout_merge('ev');");
}
my @fragments = grep { /\.seg$/ } $store->objects_in('fc_evict/base/data');
is(scalar(@fragments), 12, '(e) 12 base fragments');
my $bytes = $store->get($fragments[0]);
my $footer_length = unpack('V', substr($bytes, length($bytes) - 8, 4));
my $cache_kb = int(($footer_length + 300) * 8 / 1024) + 1;
my $evict_query = q{SELECT count(*), count(DISTINCT id), sum(v) FROM ev
UNION ALL SELECT count(*), count(DISTINCT id), sum(v) FROM (SELECT * FROM ev WHERE id % 2 = 0 UNION ALL SELECT * FROM ev WHERE id % 2 = 1) both_halves};
my $uncached = $node->safe_psql('postgres',
	"SET rollout_fdw.footer_cache_size = 0;
$evict_query");
my $cached = $node->safe_psql('postgres',
	"SET rollout_fdw.footer_cache_size = '${cache_kb}kB';
$evict_query;
$evict_query;
$evict_query");
is($cached, join("\n", ($uncached) x 3),
	"(e) with a cache of $cache_kb kB (footers of $footer_length bytes), evicted while lent, the same rows");
@runs = explain_counters($node->safe_psql('postgres', "SET rollout_fdw.footer_cache_size = '${cache_kb}kB';
EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) SELECT count(*) FROM ev;
EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) SELECT count(*) FROM ev;"));
my ($hits, $misses) = split /\|/, $runs[1];
cmp_ok($misses, '>', 0, "(e) the cache is too small for all 12 ($hits hits, $misses misses)");
cmp_ok($hits + $misses, '==', 12, '(e) and every fragment was looked up');

# (g) decoded footers, in the memory contexts of the session that read them
my $decoded = q{SELECT count(*), coalesce(sum(total_bytes), 0) FROM pg_backend_memory_contexts
  WHERE name = 'decoded segment footer' AND parent = 'rollout footer cache'};
my $three_scans = join(";\n", ($evict_query) x 3);
my @g = split /\n/, $node->safe_psql('postgres', "$three_scans;\n$decoded");
is($g[-1] =~ s/\|\d+$//r, '12', '(g) three scans: a decoded footer kept for each of the 12 fragments');
is(join("\n", @g[0 .. 5]), join("\n", ($uncached) x 3), '(g) and the rows of a read without the cache');
my $all_decoded = $g[-1];
@g = split /\n/, $node->safe_psql('postgres', "SET rollout_fdw.footer_cache_size = 0;\n$three_scans;\n$decoded");
is($g[-1], '0|0', '(g) with the cache off none is kept');
# a cache that holds the 12 footers' bytes with room to spare (so that the
# scans find them there and decode them, plain or preloaded) but only half
# of their decoded forms
my (undef, $all_decoded_bytes) = split /\|/, $all_decoded;
my $half_kb = int((12 * ($footer_length + 600) + $all_decoded_bytes / 2) / 1024) + 1;
@g = split /\n/, $node->safe_psql('postgres', "SET rollout_fdw.footer_cache_size = '${half_kb}kB';\n$three_scans;\n$decoded");
my ($kept, $kept_bytes) = split /\|/, $g[-1];
ok($kept > 0 && $kept < 12, "(g) a cache of $half_kb kB (all 12 decoded took $all_decoded_bytes bytes) keeps some ($kept)");
cmp_ok($kept_bytes + $kept * $footer_length, '<=', $half_kb * 1024,
	"(g) in $kept_bytes bytes, with their footers within the cache's size");
is(join("\n", @g[0 .. 5]), join("\n", ($uncached) x 3), '(g) and the rows are still right');

# (f) the shared cache (preloaded): a new session finds the footers another
# read, with no request for them, and reads the same rows
SKIP:
{
	skip 'the shared footer cache needs shared_preload_libraries', 4
	  unless RolloutTest::preload();
	$node->safe_psql('postgres',
		q{CREATE FOREIGN TABLE sh (id int, v int, pad text) SERVER s OPTIONS (store 'fc_shared')});
	for my $r (1 .. 3)
	{
		$node->safe_psql('postgres',
			"INSERT INTO sh SELECT g, g * 10 + $r, 'z' FROM generate_series($r * 100, $r * 100 + 499) g;
			 SELECT rollout_merge('sh');");
	}
	my $query = q{SELECT count(*), count(DISTINCT id), sum(v) FROM sh};
	my $first = $node->safe_psql('postgres', "${lists}EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) $query");
	my ($s1, $m1, $r1) = split /\|/, shared_counters($first);
	is("$s1|$m1", '0|3', '(f) the first session reads the 3 footers');
	my $second = $node->safe_psql('postgres', "${lists}EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) $query");
	my ($s2, $m2, $r2) = split /\|/, shared_counters($second);
	is("$s2|$m2", '3|0', '(f) a new session finds all 3 in the shared cache');
	if (RolloutStore::remote())
	{
		cmp_ok($r2, '<=', $r1 - 3, "(f) and makes 3 requests fewer ($r1 -> $r2)");
	}
	else
	{
		pass('(f) (the file:// store makes no remote requests to compare)');
	}
	is($node->safe_psql('postgres', $query),
		$node->safe_psql('postgres', "SET rollout_fdw.footer_cache_size = 0; $query"),
		'(f) the same rows as without any footer cache');
}

# (h) generations: five flushed from small commits, then lookups
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE gen (id int, v text) SERVER s OPTIONS (store 'fc_generations')});
for my $r (1 .. 5)
{
	$node->safe_psql('postgres',
		"INSERT INTO gen SELECT g, 'r$r-' || g FROM generate_series($r * 100, $r * 100 + 149) g;
		 SELECT rollout_flush('gen');");
}
is($node->safe_psql('postgres', q{SELECT fragments, generations FROM rollout_observe('gen')}),
	'0|5', '(h) five generations, no fragment');
my $gen_explain = q{EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) SELECT * FROM gen WHERE id = 260;};
@runs = explain_counters($node->safe_psql('postgres', "$gen_explain
$gen_explain"));
like($runs[0], qr/^0\|[1-9]/, "(h) the first lookup misses ($runs[0])");
like($runs[1], qr/^[1-9]\d*\|0\|/, "(h) the second finds every footer it needs in the cache ($runs[1])");
my $gen_lookups = join('', map { "SELECT v FROM gen WHERE id = $_;\n" } (95, 100, 249, 250, 260, 400, 649, 650));
is($node->safe_psql('postgres', $gen_lookups),
	$node->safe_psql('postgres', "SET rollout_fdw.footer_cache_size = 0;\n$gen_lookups"),
	'(h) the same rows with the cache off');

$node->stop;
done_testing();
