
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 035_disk_cache.pl — reads of base fragments from a remote store go through
# the local disk cache of rollout_fdw.cache_dir (objstore/read_cache.c):
#   (a) results with the cache (cold, then warm) are exactly those without
#       it (rollout_fdw.disk_cache = off), over fragments with many versions
#       per key, generations and a WAL tail: scans, lookups, ranges, filters;
#   (b) a warm scan fetches no block and makes fewer requests; a warm key
#       lookup in a new session fetches nothing but the snapshot's metadata;
#   (c) corrupt cache files (a flipped data byte, a flipped header byte, a
#       truncated file, an empty file, one file's bytes under another's
#       name) are misses, never wrong rows, and are written again;
#   (d) the cache stays near rollout_fdw.cache_size: a full trim leaves it
#       at most 7/8 of the bound after each writer's sixteenth, and removes
#       temporary files an hour old (left by a backend that died writing);
#   (e) the cache is keyed by credentials: a role with other credentials
#       reads nothing another role cached (S3 on moto, where any key works);
#   (f) the settings: only a superuser may see or set cache_dir; a directory
#       others may write to turns the cache off (said in the server log, not
#       to the client) and reads still work.
# On the file:// backend it checks that local stores never use the cache.

use strict;
use warnings;

use File::Path qw(make_path);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node count_in_log foreign_scan_of);
use Test::More;

my $cache_dir = PostgreSQL::Test::Utils::tempdir('rollout_cache') . '/cache';
my $node = mode_node('disk_cache',
	conf => ["rollout_fdw.cache_dir = '$cache_dir'\n"]);
my $store = RolloutStore->for_test('035_disk_cache');
$store->create_extension_and_server($node);
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE t (id int, v int, pad text) SERVER s OPTIONS (store 'dc');
CREATE ROLE reader LOGIN;
GRANT SELECT ON t TO reader;
});

# Many versions per key: four merges of overlapping ranges (four base
# fragments of several cache blocks each), two generations and an
# unflushed commit on top, 200 rows per row group.  Values are pseudo-random
# so that a byte from the wrong place shows.
my $sql = "SET rollout_fdw.rows_per_group = 200;\n";
for my $r (1 .. 6)
{
	my $lo = ($r - 1) * 400 + 1;
	$sql .= "INSERT INTO t SELECT g, (g * 7919 + $r * 104729) % 1000003, "
	  . "(SELECT string_agg(md5((g * $r * 31 + k)::text), '') FROM generate_series(1, 12 + g % 8) k) "
	  . "FROM generate_series($lo, $lo + 1599) g;\n";
	$sql .= $r <= 4 ? "SELECT rollout_merge('t');\n" : "SELECT rollout_flush('t');\n";
}
$sql .= "INSERT INTO t SELECT g, -g, 'tail' FROM generate_series(1, 3000, 97) g;\n";
$node->safe_psql('postgres', $sql);
is($node->safe_psql('postgres', q{SELECT fragments, generations FROM rollout_observe('t')}),
	'4|2', 'four base fragments and two generations');

my @queries = (
	q{SELECT count(*), count(DISTINCT id), sum(v), md5(string_agg(id || ':' || v || ':' || pad, ',' ORDER BY id)) FROM t},
	q{SELECT string_agg(id || '=' || v || pad, ',' ORDER BY id) FROM t WHERE id IN (1, 400, 401, 1203, 2001, 2400, 2401, 3600)},
	q{SELECT count(*), sum(v), md5(string_agg(pad, ',' ORDER BY id)) FROM t WHERE id BETWEEN 777 AND 1999},
	q{SELECT count(*), sum(id) FROM t WHERE v % 13 = 5},
	q{SELECT id, v FROM t WHERE id = 1900});
my $all = join(";\n", @queries) . ";\n";

# EXPLAIN (ANALYZE, VERBOSE) counters of $query in a new session:
# { hits, misses, requests, plan }.  The cache is what makes requests differ
# here, so nothing else may: every snapshot lists the manifests (preloaded,
# the manifest view would spare that listing only to a statement less than
# manifest_refresh_interval after the last, which a loaded CI machine
# does not always make), and requests are first attempts (a retry of a
# slow store is not the cache's doing).
sub counters
{
	my ($query, $prefix) = @_;
	my $json = $node->safe_psql('postgres',
		"SET rollout_fdw.manifest_refresh_interval = 0;\n"
		  . ($prefix // '') . "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) $query");
	my $plan = foreign_scan_of($json);
	return {
		hits => $plan->{'Disk Cache Hits'} // 0,
		misses => $plan->{'Disk Cache Misses'} // 0,
		requests => ($plan->{'Remote Requests'} // 0) - ($plan->{'Remote Request Retries'} // 0),
		plan => $json,
	};
}

sub cache_files
{
	return () unless -d $cache_dir;
	opendir(my $dh, $cache_dir) or die "opendir $cache_dir: $!";
	my @files = sort grep { /^[0-9a-f]{32}$/ } readdir($dh);
	closedir($dh);
	return @files;
}

sub cache_bytes
{
	my $total = 0;
	$total += -s "$cache_dir/$_" for cache_files();
	return $total;
}

my $uncached = $node->safe_psql('postgres', "SET rollout_fdw.disk_cache = off;\n$all");
like($uncached, qr/^3600\|3600\|/, 'the uncached read sees 3600 keys, each once');

if (!RolloutStore::remote())
{
	my $c = counters($queries[0]);
	is($node->safe_psql('postgres', $all), $uncached, 'file:// reads are the same');
	is("$c->{hits}|$c->{misses}", '0|0', 'a file:// store never uses the disk cache');
	my @none = cache_files();
	is(scalar(@none), 0, '... and nothing is written to it');
	done_testing();
	exit;
}

# (a) cold, then warm, then warm in one session: the same rows
my $cold = counters($queries[0]);
cmp_ok($cold->{misses}, '>', 0, "(a) the cold scan fetches blocks into the cache ($cold->{misses})");
my $files_after_cold = scalar(cache_files());
cmp_ok($files_after_cold, '>', 4, "(a) ... which become files ($files_after_cold)");
is($node->safe_psql('postgres', $all), $uncached, '(a) every query returns the same with the cache as without');
is($node->safe_psql('postgres', "$all$all"), "$uncached\n$uncached", '(a) ... twice in one session');

# (b) warm reads
my $warm = counters($queries[0]);
is($warm->{misses}, 0, '(b) a warm scan fetches no block');
cmp_ok($warm->{hits}, '>=', $cold->{misses}, "(b) ... and reads them all from the cache ($warm->{hits})");
cmp_ok($warm->{requests}, '<', $cold->{requests},
	"(b) ... with fewer requests ($cold->{requests} -> $warm->{requests})");
my $off = counters($queries[0], 'SET rollout_fdw.disk_cache = off; ');
is("$off->{hits}|$off->{misses}", '0|0', '(b) with disk_cache off the scan does not look');
# key 100 is in the first fragment only: the generations' footers (which
# the cache does not keep, their names are not unique) rule it out
counters(q{SELECT * FROM t WHERE id = 100});
my $lookup = counters(q{SELECT * FROM t WHERE id = 100});
cmp_ok($lookup->{hits}, '>', 0, '(b) a warm key lookup in a new session reads blocks from the cache');
is($lookup->{misses}, 0, '(b) ... and fetches none');
my $snapshot_only = counters(q{SELECT * FROM t WHERE id = -5});
cmp_ok($lookup->{requests}, '<=', $snapshot_only->{requests},
	"(b) ... and no more requests than a lookup of a key no object holds ($lookup->{requests} <= $snapshot_only->{requests})")
  or diag("the lookup: $lookup->{plan}\nthe key no object holds: $snapshot_only->{plan}");

SKIP:
{
	skip 'rollout_stat_stores needs shared_preload_libraries', 2
	  unless RolloutTest::preload();
	my ($hits, $misses) = split /\|/, $node->safe_psql('postgres',
		q{SELECT cache_hits, cache_misses FROM rollout_stat_stores WHERE store = 'dc'});
	cmp_ok($hits, '>=', $warm->{hits} + $lookup->{hits}, "(b) rollout_stat_stores counts the hits ($hits)");
	cmp_ok($misses, '>=', $cold->{misses}, "(b) ... and the misses ($misses)");
}

# (c) corrupt cache files
my @files = cache_files();
my %corrupted;
sub corrupt
{
	my ($file, $how) = @_;
	my $path = "$cache_dir/$file";
	my $bytes = RolloutTest::slurp_bin($path);
	if ($how eq 'data') { substr($bytes, -100, 1) ^= "\x01"; }
	elsif ($how eq 'header') { substr($bytes, 20, 1) ^= "\x80"; }
	elsif ($how eq 'truncated') { $bytes = substr($bytes, 0, length($bytes) - 17); }
	elsif ($how eq 'empty') { $bytes = ''; }
	RolloutTest::write_bin($path, $bytes);
	$corrupted{$file} = $how;
}
my @big = grep { -s "$cache_dir/$_" > 1000 } @files;
cmp_ok(scalar(@big), '>=', 6, '(c) enough cached blocks to corrupt');
corrupt($big[0], 'data');
corrupt($big[1], 'header');
corrupt($big[2], 'truncated');
corrupt($big[3], 'empty');
# one block's file under another's name: a valid file of the wrong block
RolloutTest::write_bin("$cache_dir/$big[4]", RolloutTest::slurp_bin("$cache_dir/$big[5]"));
$corrupted{ $big[4] } = 'swapped';
is($node->safe_psql('postgres', $all), $uncached, '(c) corrupt cache files give the same rows');
my $again = counters($queries[0]);
is($again->{misses}, 0, '(c) ... they were fetched again and kept, and the next scan fetches none');
is($node->safe_psql('postgres', $all), $uncached, '(c) ... and reads the same rows');
# garbage under every name at once
for my $file (cache_files())
{
	RolloutTest::write_bin("$cache_dir/$file", "\0" x 64 . ('garbage' x 100));
}
is($node->safe_psql('postgres', $all), $uncached, '(c) garbage in every cache file: the same rows');

# (d) the bound
my $old_temp = "$cache_dir/tmp.99999.1";
my $new_temp = "$cache_dir/tmp.99999.2";
RolloutTest::write_bin($_, 'half a block') for ($old_temp, $new_temp);
utime(time - 7200, time - 7200, $old_temp);
my $bound = 256 * 1024;
$node->append_conf('postgresql.conf', "rollout_fdw.cache_size = '256kB'\n");
$node->reload;
$node->safe_psql('postgres', "SET rollout_fdw.disk_cache = off; SELECT 1");    # wait for the reload
unlink "$cache_dir/$_" for (cache_files())[0 .. 2];    # misses, so the session writes
# the last trim long ago, so that the session's first write trims (a trim
# less than 10 s old spares a new session's first write the listing)
ok(-e "$cache_dir/trimmed", '(d) earlier sessions said when they trimmed');
utime(time - 3600, time - 3600, "$cache_dir/trimmed");
my $before_trim = cache_bytes();
cmp_ok($before_trim, '>', 2 * $bound, "(d) the cache holds more than twice the new bound ($before_trim bytes)");
is($node->safe_psql('postgres', "$all"), $uncached, '(d) reads under a small bound give the same rows');
my $after_trim = cache_bytes();
# the trim at the session's first write leaves 7/8 of the bound; the session
# then writes at most a block (a sixteenth of a bound this small is less)
# before it trims again, and a block more until it does
cmp_ok($after_trim, '<=', $bound * 7 / 8 + 2 * (262144 + 1024),
	"(d) a session's first write trims the cache to its bound ($after_trim bytes)");
ok(!-e $old_temp, '(d) a temporary file two hours old is removed');
ok(-e $new_temp, '(d) a fresh one is left to its writer');
unlink $new_temp;
$node->append_conf('postgresql.conf', "rollout_fdw.cache_size = '1GB'\n");
$node->reload;

# (e) other credentials, another cache
SKIP:
{
	skip 'other credentials need a server that takes any key (moto)', 3
	  unless RolloutStore::backend() eq 's3';
	$node->safe_psql('postgres',
		q{CREATE USER MAPPING FOR reader SERVER s OPTIONS (access_key_id 'other', secret_access_key 'other')});
	counters($queries[0]);    # the owner's blocks, back after (d)
	is(counters($queries[0])->{misses}, 0, '(e) the owner\'s scan is warm');
	my $files = scalar(cache_files());
	my $json = $node->safe_psql('postgres',
		"EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) $queries[0]", connstr => 'user=reader dbname=postgres');
	my $plan = foreign_scan_of($json);
	# (a cold scan also hits: a read of one row group fetches the whole
	# block, the start of the next one included)
	is($plan->{'Disk Cache Misses'}, $cold->{misses},
		'(e) a role with other credentials fetches every block the cold scan fetched');
	cmp_ok(scalar(cache_files()), '>=', $files + $cold->{misses},
		'(e) ... and keeps them under names of its own');
}

# (f) the settings
# (a setting of a library not loaded yet is a placeholder anyone may read:
# PostgreSQL's rule for every extension, so the role reads the table first)
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN; GRANT SELECT ON t TO plain');
my $loaded = 'SELECT count(*) FROM t WHERE id = 1;';
my ($ret, $out, $err) = $node->psql('postgres', "$loaded SHOW rollout_fdw.cache_dir",
	connstr => 'user=plain dbname=postgres');
like($err, qr/permission denied|must be superuser|privileges of pg_read_all_settings/,
	'(f) a plain role may not see cache_dir');
($ret, $out, $err) = $node->psql('postgres', "$loaded SET rollout_fdw.cache_dir = '/tmp'",
	connstr => 'user=plain dbname=postgres');
like($err, qr/cannot be changed now|permission denied/, '(f) ... nor set it');
($ret, $out, $err) = $node->psql('postgres', "ALTER SYSTEM SET rollout_fdw.cache_dir = '/tmp'",
	connstr => 'user=plain dbname=postgres');
like($err, qr/permission denied|must be superuser/, '(f) ... nor ALTER SYSTEM it');

chmod(0777, $cache_dir) or die "chmod: $!";
my $log_offset = -s $node->logfile;
($ret, $out, $err) = $node->psql('postgres', $all);
is($out, $uncached, '(f) a directory others may write to: reads still give the same rows');
unlike($err, qr/cache_dir/, '(f) ... the client is not told the path');
my $shared = counters($queries[0]);
is("$shared->{hits}|$shared->{misses}", '0|0', '(f) ... and the cache is off');
like(slurp_file($node->logfile, $log_offset), qr/rollout_fdw\.cache_dir ".*" is not a directory of the server's own/,
	'(f) the server log says why');
chmod(0700, $cache_dir) or die "chmod: $!";

$node->stop;
done_testing();
