
# Copyright (c) rollout_fdw authors
#
# 024_parallel_reads.pl — scans fetch the segments they read with concurrent
# requests, at most rollout_fdw.max_concurrent_requests at once:
#
#  (a) correctness: a store of base fragments, 20 generations and a WAL tail
#      (or memtable), several row groups per segment, on S3 (moto) and on
#      Azure (Azurite): full scans, point and range lookups give the same
#      rows with max_concurrent_requests = 1 (one request after the other)
#      and 16, and both match a model of the inserts;
#  (b) the requests really overlap: through the latency proxy
#      (test/servers/latency_proxy.py, 25 ms each way, a 50 ms round trip)
#      in front of moto, a scan over 20 generations sends the same requests
#      either way, but with 16 they take a fraction of the sequential rounds
#      (EXPLAIN's Remote Requests counter, checked against what the proxy
#      counted); elapsed time is only reported;
#  (c) a request of a batch that gets 500 is retried on its own, the scan
#      succeeds;
#  (d) a cancel (statement_timeout) while a batch waits for answers that
#      never come ends the statement cleanly, and the same backend then
#      scans normally;
#  (e) objects of the snapshot deleted (merged and collected) before the
#      batch reads them: the scan takes a fresh snapshot, as the sequential
#      path does, and returns the exact result;
#  (f) garbage collection deletes with concurrent requests too (S3 and
#      Azure, through proxies that count the requests in flight at once).
#
# Needs moto (ROLLOUT_TEST_S3_ENDPOINT; skipped without it); the Azure part
# also needs Azurite (ROLLOUT_TEST_AZURE_ENDPOINT; skipped without it).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Digest::MD5 qw(md5_hex);
use JSON::PP;
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use LatencyProxy;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(mode_node wait_for_fault release_faults hold_faults count_in_log foreign_scan_of with_min_gc_grace);
use Test::More;

my ($endpoint, $bucket, $region) = RolloutStore::s3_settings('S3');
plan skip_all =>
  'ROLLOUT_TEST_S3_ENDPOINT is not set (start an S3 server with test/servers/moto.sh and export its settings; scripts/test.sh does)'
  unless $endpoint;
my ($upstream) = $endpoint =~ m{^http://([0-9.]+:\d+)/?$}
  or BAIL_OUT("ROLLOUT_TEST_S3_ENDPOINT must be http://HOST:PORT for the proxy tests");

my ($az_endpoint, $az_key, $az_container) = RolloutStore::azure_settings();
delete $ENV{$_} for qw(ROLLOUT_TEST_AZURE_KEY AZURE_STORAGE_KEY AZURE_STORAGE_SAS_TOKEN
  ROLLOUT_TEST_REGRESS_MAPPING_OPTIONS);

# A fresh prefix per run: the bucket and the container outlive the test.
my $run = sprintf('t024-%d-%d', $$, time());

# --- the latency proxy in front of moto ---------------------------------------
my $proxy = LatencyProxy->start(target => $upstream, delay_ms => 0, control => 1);
my ($proxy_port, $control_port) = ($proxy->port, $proxy->control_port);
ok($proxy_port && $control_port, "latency proxy listening on $proxy_port (control $control_port)");

# --- the cluster ----------------------------------------------------------------
my $node = mode_node('parallel_reads', conf => ["log_min_messages = debug1\n"]);

$node->safe_psql('postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE SERVER s3 FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://$bucket/$run', endpoint '$endpoint', region '$region');
CREATE SERVER s3proxy FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://$bucket/$run', endpoint 'http://127.0.0.1:$proxy_port',
           region '$region');
SET log_statement = 'none';
CREATE USER MAPPING FOR PUBLIC SERVER s3 OPTIONS (access_key_id 'k', secret_access_key 's');
CREATE USER MAPPING FOR PUBLIC SERVER s3proxy OPTIONS (access_key_id 'k', secret_access_key 's');
CREATE FOREIGN TABLE s3t (id text COLLATE "C", v int) SERVER s3 OPTIONS (store 'layers', key 'id');
CREATE FOREIGN TABLE s3gen (id text COLLATE "C", v int) SERVER s3 OPTIONS (store 'gens', key 'id');
CREATE FOREIGN TABLE s3gen_slow (id text COLLATE "C", v int) SERVER s3proxy OPTIONS (store 'gens', key 'id');
CREATE FOREIGN TABLE s3vanish (id text COLLATE "C", v int) SERVER s3 OPTIONS (store 'vanish', key 'id');
});

# Batch b of inserts: 150 distinct keys out of 2000, values unique to it.
sub batch_sql
{
	my ($table, $b) = @_;
	return "INSERT INTO $table SELECT 'k' || lpad((($b * 37 + i * 13) % 2000)::text, 4, '0'), $b * 100000 + i FROM generate_series(1, 150) i";
}

sub model_batch
{
	my ($model, $b) = @_;
	$model->{ sprintf('k%04d', ($b * 37 + $_ * 13) % 2000) } = $b * 100000 + $_ for 1 .. 150;
}

# Batches @b into $table, each flushed as a generation of its own, in one
# psql run; the model learns them.
sub insert_flushed_batches
{
	my ($table, $model, @b) = @_;
	my $sql = '';
	for my $b (@b)
	{
		$sql .= batch_sql($table, $b) . ";\nSELECT rollout_flush('$table');\n";
		model_batch($model, $b);
	}
	$node->safe_psql('postgres', $sql);
}

# count|sum|md5 of the rows in key order, as the SQL fingerprint prints them
my $fingerprint_sql =
  "SELECT count(*), sum(v), md5(string_agg(id || '=' || v, ',' ORDER BY id)) FROM";

sub model_fingerprint
{
	my ($model, $filter) = @_;
	my @keys = sort grep { !$filter || $filter->($_) } keys %$model;
	my $sum = 0;
	$sum += $model->{$_} for @keys;
	return sprintf('%d|%s|%s', scalar(@keys), @keys ? $sum : '',
		md5_hex(join(',', map { "$_=$model->{$_}" } @keys)));
}

# Build a store of every kind of source: 2 base fragments (from merges of
# 4 generations), 20 pending generations and 3 unflushed commits (WAL
# entries, or the memtable when preloaded), 50 rows per row group.
sub build_layers
{
	my ($table) = @_;
	my %model;
	my $sql = "SET rollout_fdw.rows_per_group = 50;\n";
	for my $b (1 .. 27)
	{
		$sql .= batch_sql($table, $b) . ";\n";
		model_batch(\%model, $b);
		$sql .= "SELECT rollout_flush('$table');\n" if $b <= 24;
		$sql .= "SELECT rollout_merge('$table');\n" if $b == 2 || $b == 4;
	}
	$node->safe_psql('postgres', $sql);
	return \%model;
}

# The queries of (a), with the model's answers.
sub check_queries
{
	my ($table, $model, $what) = @_;
	my %answers;
	for my $width (1, 16)
	{
		my $set = "SET rollout_fdw.max_concurrent_requests = $width;";
		$answers{$width} = [
			$node->safe_psql('postgres', "$set $fingerprint_sql $table"),
			$node->safe_psql('postgres', "$set SELECT v FROM $table WHERE id = 'k0777'"),
			$node->safe_psql('postgres',
				"$set $fingerprint_sql $table WHERE id >= 'k1000' AND id < 'k1100'"),
		];
	}
	is_deeply($answers{16}, $answers{1},
		"$what: the same rows with 16 requests in flight as with 1");
	is($answers{16}[0], model_fingerprint($model), "$what: a full scan returns every key at its newest version");
	is($answers{16}[1], $model->{k0777}, "$what: a point lookup");
	is($answers{16}[2], model_fingerprint($model, sub { $_[0] ge 'k1000' && $_[0] lt 'k1100' }),
		"$what: a key range");
}

# EXPLAIN (ANALYZE, VERBOSE) counters of a scan of $table, without footer
# caches (preloaded, the shared one would spare a later session the footer
# requests of an earlier one, and the counts would differ by that).
sub scan_counters
{
	my ($table, $width) = @_;
	# every snapshot lists the manifests: with the view, a statement planned
	# more than manifest_refresh_interval after the last listing (six round
	# trips through the proxy, on a loaded machine) would list and others not
	my $json = $node->safe_psql('postgres',
		"SET rollout_fdw.max_concurrent_requests = $width; SET rollout_fdw.footer_cache_size = 0; "
		  . "SET rollout_fdw.manifest_refresh_interval = 0; "
		  . "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) SELECT count(*), sum(v) FROM $table");
	return foreign_scan_of($json);
}

# ---------------------------------------------------------------------------
# (a) correctness on S3
my $model = build_layers('s3t');
my $layout = scan_counters('s3t', 16);
is($layout->{'Fragments Read'}, 2, '(a) the store has 2 base fragments');
is($layout->{'Generations Read'}, 20, '(a) ... 20 pending generations');
is($layout->{'WAL Entries Read'}, 3, '(a) ... and 3 unflushed commits');
cmp_ok($layout->{'Row Groups Read'}, '>', 3 * 22, '(a) ... of several row groups each')
  or diag(encode_json($layout));
check_queries('s3t', $model, '(a) S3');
# The two widths compared in the same state, after the queries above: the
# first scan after the store was written once sent one request more than
# a later one (a CI run, 111 against 110), whatever its width.
my $sequential = scan_counters('s3t', 1);
my $parallel = scan_counters('s3t', 16);
is($sequential->{'Remote Request Rounds'}, $sequential->{'Remote Requests'},
	'(a) with 1 request in flight, every request is a round of its own');
is($parallel->{'Remote Requests'}, $sequential->{'Remote Requests'},
	'(a) both send the same requests');
cmp_ok($parallel->{'Remote Request Rounds'} * 3, '<', $sequential->{'Remote Request Rounds'},
	'(a) with 16, in far fewer rounds')
  or diag("16: $parallel->{'Remote Request Rounds'} rounds, 1: $sequential->{'Remote Request Rounds'}");

# (a) correctness on Azure
SKIP:
{
	skip 'ROLLOUT_TEST_AZURE_ENDPOINT is not set', 5 unless $az_endpoint;
	my ($account) = $az_endpoint =~ m{/([a-z0-9]{3,24})/?$};
	$node->safe_psql('postgres', qq{
CREATE SERVER az FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/$az_container/$run', endpoint '$az_endpoint');
SET log_statement = 'none';
CREATE USER MAPPING FOR PUBLIC SERVER az OPTIONS (account_key '$az_key');
CREATE FOREIGN TABLE azt (id text COLLATE "C", v int) SERVER az OPTIONS (store 'layers', key 'id');
});
	my $az_model = build_layers('azt');
	check_queries('azt', $az_model, '(a) Azure');
	my $az = scan_counters('azt', 16);
	cmp_ok($az->{'Remote Request Rounds'} * 3, '<', scan_counters('azt', 1)->{'Remote Request Rounds'},
		'(a) Azure: with 16 in flight, far fewer rounds than with 1');
}

# ---------------------------------------------------------------------------
# (b) the requests overlap: 20 generations behind a 50 ms round trip
my %gens;
insert_flushed_batches('s3gen', \%gens, 1 .. 20);
$proxy->command('delay 25');
my %timed;
for my $width (1, 16)
{
	my $requests_before = $proxy->counter('requests');
	my $t0 = time();
	my $c = scan_counters('s3gen_slow', $width);
	$timed{$width} = { seconds => time() - $t0, counters => $c };
	my $seen = $proxy->counter('requests') - $requests_before;
	is($c->{'Generations Read'}, 20, "(b) width $width: a scan over 20 generations");
	cmp_ok($seen, '>=', $c->{'Remote Requests'},
		"(b) width $width: the proxy saw the requests EXPLAIN counts ($c->{'Remote Requests'})");
	# besides: the store's opening, and the planner's row count from the
	# store's metadata (a new session's first plan: listings and manifests)
	cmp_ok($seen, '<=', $c->{'Remote Requests'} + 12,
		"(b) width $width: ... and few others (the store's opening, the planner's count)")
	  or diag("proxy saw $seen");
}
my ($r1, $r16) = map { $timed{$_}{counters}{'Remote Request Rounds'} } (1, 16);
note(sprintf('20 generations at a 50 ms round trip: width 1: %d requests, %d rounds, %.2f s; width 16: %d requests, %d rounds, %.2f s',
	$timed{1}{counters}{'Remote Requests'}, $r1, $timed{1}{seconds},
	$timed{16}{counters}{'Remote Requests'}, $r16, $timed{16}{seconds}));
is($timed{16}{counters}{'Remote Requests'}, $timed{1}{counters}{'Remote Requests'},
	'(b) the same requests either way');
cmp_ok($r16 * 4, '<=', $r1, '(b) with 16 in flight they take at most a quarter of the rounds')
  or diag("width 1: $r1 rounds, width 16: $r16");
# (the time each took is in the note above, not asserted: moto serialises
# its work on a loaded machine; the rounds are what the overlap changes)
is($node->safe_psql('postgres',
	"SET rollout_fdw.max_concurrent_requests = 16; $fingerprint_sql s3gen_slow"),
	model_fingerprint(\%gens), '(b) the rows read through the proxy are right');
$proxy->command('delay 0');

# ---------------------------------------------------------------------------
# (c) 500s inside a batch are retried per request
$proxy->command('fail 3 500 GET /gen/');
is($node->safe_psql('postgres',
	"SET rollout_fdw.max_concurrent_requests = 16; $fingerprint_sql s3gen_slow"),
	model_fingerprint(\%gens), '(c) three reads of a batch answered 500: retried, the scan is right');
is($proxy->counter('failed'), 3, '(c) the proxy failed three of them');
$proxy->command('reset');
$proxy->command('fail 2 500 GET /gen/');
my $retried = foreign_scan_of($node->safe_psql('postgres',
	"SET rollout_fdw.max_concurrent_requests = 16; SET rollout_fdw.footer_cache_size = 0; "
	  . "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) SELECT count(*) FROM s3gen_slow"));
is($retried->{'Remote Request Retries'}, 2, '(c) EXPLAIN counts the two retries');
$proxy->command('reset');

# ---------------------------------------------------------------------------
# (d) cancel while a batch waits: the reads of generations are forwarded
# but their answers withheld; statement_timeout cancels the scan.
my $reset = qq{\\! python3 -c "import socket; s = socket.create_connection(('127.0.0.1', $control_port)); s.sendall(b'reset\\\\n'); s.recv(100)"};
my $hung_before = $proxy->counter('hung');
my ($out, $err) = ('', '');
my $t0 = time();
$node->psql('postgres', qq{
SELECT 'pid', pg_backend_pid();
SET rollout_fdw.max_concurrent_requests = 16;
SET statement_timeout = '1s';
\\! python3 -c "import socket; s = socket.create_connection(('127.0.0.1', $control_port)); s.sendall(b'hang 1000 GET /gen/\\\\n'); s.recv(100)"
SELECT count(*) FROM s3gen_slow;
$reset
RESET statement_timeout;
SELECT 'pid', pg_backend_pid();
$fingerprint_sql s3gen_slow;
}, stdout => \$out, stderr => \$err, on_error_stop => 0);
my $secs = time() - $t0;
like($err, qr/canceling statement due to statement timeout/, '(d) the scan is cancelled')
  or diag($err);
unlike($err, qr/could not|FATAL|PANIC|server closed/, '(d) cleanly: no other error') or diag($err);
cmp_ok($proxy->counter('hung') - $hung_before, '>=', 2, '(d) while several reads of one batch were waiting');
cmp_ok($secs, '<', 15, '(d) within seconds, not the 60 s request timeout') or diag("$secs s");
my @pids = $out =~ /^pid\|(\d+)$/mg;
is(scalar(@pids), 2, '(d) the session went on') or diag($out);
is($pids[0], $pids[1], '(d) in the same backend');
like($out, qr/^\Q${\ model_fingerprint(\%gens)}\E$/m, '(d) whose next scan is right') or diag($out);

# ---------------------------------------------------------------------------
# (e) objects vanish between the snapshot and the batch that reads them
my %vanish;
insert_flushed_batches('s3vanish', \%vanish, 1 .. 6);
my $offset = -s $node->logfile;
my $scan = PsqlScript->start($node,
	command => "SET rollout_fdw.max_concurrent_requests = 16; SET rollout_fdw.fail_at = 'scan.after_snapshot:hold'; $fingerprint_sql s3vanish");
wait_for_fault($node, 'scan.after_snapshot', $offset);
$node->safe_psql('postgres', q{SELECT rollout_merge('s3vanish')});
is(with_min_gc_grace($node, 0,
		sub { $node->safe_psql('postgres', q{SELECT objects_deleted > 0 FROM rollout_gc('s3vanish', '0')}) }),
	't', '(e) while the scan waits, its generations are merged and collected');
release_faults($node);    # the second snapshot passes too
my ($scan_ret, $scan_out, $scan_err) = $scan->finish;
hold_faults($node);
is($scan_ret, 0, '(e) the scan succeeds') or diag($scan_err);
is($scan_out, model_fingerprint(\%vanish), '(e) with the exact result');
is(count_in_log($node, qr/fault point "scan\.after_snapshot" reached/, $offset),
	2, '(e) after a second snapshot, as when reading one object at a time');

# ---------------------------------------------------------------------------
# (f) garbage collection deletes in batches of concurrent requests.  Each
# round commits 30 transactions (30 WAL entries), flushes them and collects
# them through a proxy (10 ms each way); the proxy's peaks say how many
# DELETEs (and on S3 the HEADs before them, since S3 answers 204 to deleting
# a missing key) were in flight at once.  One after the other before; the
# rounds at width 16 fail with the batches undone.  Either way a second gc
# finds nothing left (the last, partial batch was sent too), and every row
# reads back.
sub gc_round
{
	my ($via, $table, $width, $round) = @_;
	$node->safe_psql('postgres',
		join('', map { "INSERT INTO $table VALUES ('g$round-$_', $_);\n" } 1 .. 30)
		  . "SELECT rollout_flush('$table');");
	$via->command('delay 10');
	$via->command('peaks');
	my $deleted = with_min_gc_grace($node, 0,
		sub {
			$node->safe_psql('postgres',
				"SET rollout_fdw.max_concurrent_requests = $width; SELECT objects_deleted FROM rollout_gc('$table', '0')");
		});
	my %peak = $via->command('peaks') =~ /(\w+)=(\d+)/g;
	$via->command('delay 0');
	my $again = with_min_gc_grace($node, 0,
		sub { $node->safe_psql('postgres', "SELECT objects_deleted FROM rollout_gc('$table', '0')") });
	return ($deleted, $again, \%peak);
}

sub gc_rounds
{
	my ($via, $table, $what) = @_;
	for my $width (1, 16)
	{
		my ($deleted, $again, $peak) = gc_round($via, $table, $width, $width);
		cmp_ok($deleted, '>=', 30, "(f) $what, width $width: gc deletes the 30 sealed WAL entries");
		is($again, '0', "(f) $what, width $width: a second gc finds nothing left");
		my @checked = $what eq 'S3' ? qw(DELETE HEAD) : qw(DELETE);
		for my $method (@checked)
		{
			if ($width == 1)
			{
				is($peak->{$method}, 1, "(f) $what, width 1: one $method at a time");
			}
			else
			{
				cmp_ok($peak->{$method} // 0, '>=', 4, "(f) $what, width 16: several ${method}s in flight at once")
				  or diag(join(' ', map { "$_=$peak->{$_}" } sort keys %$peak));
			}
		}
	}
	is($node->safe_psql('postgres', "SELECT count(*), sum(v) FROM $table"), '60|930',
		"(f) $what: every row reads back");
}

$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE s3gc (id text COLLATE "C", v int) SERVER s3proxy OPTIONS (store 'gc', key 'id');});
gc_rounds($proxy, 's3gc', 'S3');

SKIP:
{
	skip 'ROLLOUT_TEST_AZURE_ENDPOINT is not set', 7 unless $az_endpoint;
	my ($az_upstream, $account) = $az_endpoint =~ m{^http://([0-9.]+:\d+)/([a-z0-9]{3,24})/?$}
	  or BAIL_OUT("ROLLOUT_TEST_AZURE_ENDPOINT must be http://HOST:PORT/ACCOUNT for the proxy tests");
	my $az_proxy = LatencyProxy->start(target => $az_upstream, delay_ms => 0, control => 1);
	my $az_proxy_port = $az_proxy->port;
	$node->safe_psql('postgres', qq{
CREATE SERVER azproxy FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/$az_container/$run', endpoint 'http://127.0.0.1:$az_proxy_port/$account');
SET log_statement = 'none';
CREATE USER MAPPING FOR PUBLIC SERVER azproxy OPTIONS (account_key '$az_key');
CREATE FOREIGN TABLE azgc (id text COLLATE "C", v int) SERVER azproxy OPTIONS (store 'gc', key 'id');
});
	gc_rounds($az_proxy, 'azgc', 'Azure');
	$az_proxy->stop;
}

$proxy->stop;
$node->stop;
done_testing();
