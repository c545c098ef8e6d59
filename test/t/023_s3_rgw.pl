
# Copyright (c) rollout_fdw authors
#
# 023_s3_rgw.pl — the S3 backend against Ceph RGW, a server that verifies
# every SigV4 signature and payload hash (moto, in 020, verifies none).  A
# signing mistake in any request kind fails here with HTTP 403.
#
#  (a) round trip through SQL: insert, select, upsert, flush, merge, compact,
#      gc, observe.  Between them these send every request kind the backend
#      has: PUT with If-None-Match and the put id metadata header, ranged and
#      tail GETs, HEAD, ListObjectsV2 (prefix, start-after), DELETE; the
#      server log (DEBUG2 lines of the S3 session) must show each kind
#      accepted and not one 403; the same under a location prefix that needs
#      percent-encoding (space, +, =, &, parentheses, UTF-8);
#  (b) more than 1000 WAL entries: listings take two pages, so the
#      continuation token is sent back, encoded and signed; a signed HEAD
#      shows a WAL entry's put id metadata as stored;
#  (c) bodies past 1 MiB (the point where libcurl changes how it sends a
#      body): a WAL entry or ingest segment, a base fragment written by a
#      merge, and an ingest segment staged by a COPY, each checked to exceed
#      1 MiB in a signed listing, and read back intact;
#  (d) create-if-absent races on RGW: sessions whose transactions opened a
#      store that did not exist yet commit at the same moment — every one
#      PUTs _store.json and its shard registration with If-None-Match: *,
#      exactly one of each gets 200, the others 412; without preloading they
#      also race for the same WAL positions.  Every acknowledged row is there
#      once, the WAL has no hole;
#  (e) credentials: a wrong secret key, an unknown access key and a bogus
#      session token are refused with a clear error naming the operation, the
#      object and HTTP 403, and write nothing; real temporary credentials from
#      RGW's STS (GetSessionToken) work with their session token and are
#      refused without it (so the token is sent, and signed);
#  (f) a bucket that does not exist: HTTP 404 NoSuchBucket, no crash;
#  (g) no secret, token or signature in any error or in the server log
#      (log_min_messages = debug5).
# When ROLLOUT_TEST_RGW_LOG names radosgw's log, its access lines must show
# listings with continuation-token and start-after answered 200, and no
# request of the extension refused but those with bad credentials.
#
# Needs RGW: scripts/test.sh starts it with test/servers/rgw.sh (as root) and
# exports ROLLOUT_TEST_RGW_ENDPOINT, _REGION, _BUCKET, _ACCESS_KEY_ID,
# _SECRET_ACCESS_KEY and _LOG.  Without ROLLOUT_TEST_RGW_ENDPOINT the test is
# skipped.  This test's own requests (listings, STS) are signed by curl.
# It runs in both modes (RolloutTest::configure_node).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Digest::SHA qw(sha256_hex);
use IPC::Run;
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(preload mode_node contiguous create_mapping try_sql with_min_gc_grace);
use Test::More;

my ($endpoint, $bucket, $region) = RolloutStore::s3_settings('RGW');
plan skip_all =>
  'ROLLOUT_TEST_RGW_ENDPOINT is not set (start Ceph RGW with test/servers/rgw.sh as root and export its settings; scripts/test.sh does)'
  unless $endpoint;
my $key_id = $ENV{ROLLOUT_TEST_RGW_ACCESS_KEY_ID};
my $secret = $ENV{ROLLOUT_TEST_RGW_SECRET_ACCESS_KEY};
die 'ROLLOUT_TEST_RGW_ACCESS_KEY_ID and ROLLOUT_TEST_RGW_SECRET_ACCESS_KEY must be set'
  unless $key_id && $secret;
# At debug5 the postmaster logs its environment: keep the real credentials
# out of it, so that the log check in (g) is about the extension.
delete $ENV{$_} for qw(ROLLOUT_TEST_RGW_ACCESS_KEY_ID ROLLOUT_TEST_RGW_SECRET_ACCESS_KEY
  ROLLOUT_TEST_RGW_SECOND_ACCESS_KEY_ID ROLLOUT_TEST_RGW_SECOND_SECRET_ACCESS_KEY
  ROLLOUT_TEST_RGW_TENANT_ACCESS_KEY_ID ROLLOUT_TEST_RGW_TENANT_SECRET_ACCESS_KEY
  ROLLOUT_TEST_REGRESS_MAPPING_OPTIONS);

my $pre = preload();
# Credentials that must fail, and must never be seen anywhere.
my $wrong_secret = 'rollout+Wrong/Secret0022xyz';
my $unknown_key_id = 'AKIAROLLOUTUNKNOWN22';
my $bogus_token = 'RolloutBogusSessionToken0023';

# A fresh prefix per run: the bucket outlives the test.
my $run = sprintf('t023-%s-%d-%d', $pre ? 'pre' : 'plain', $$, time());
my $location = "s3://$bucket/$run";

my $node = mode_node('s3_rgw', conf => [ 'max_connections = 40', 'log_min_messages = debug5' ]);

# ---------------------------------------------------------------------------
# Helpers

# Percent-encode everything but the unreserved characters (SigV4).
sub uri_encode
{
	my ($s) = @_;
	$s =~ s/([^A-Za-z0-9\-._~])/sprintf('%%%02X', ord($1))/ge;
	return $s;
}

# A signed request with curl: (HTTP status, body).  $query: [name, value]
# pairs, sorted and encoded here (libcurl signs the query as written).
# curl retries a timeout or a 5xx (--retry): RGW serves the other runs of
# the matrix meanwhile, and the test's own listings must not fail for that.
sub signed
{
	my (%o) = @_;
	my $service = $o{service} // 's3';
	my $body = $o{body};
	my $url = $endpoint . ($o{path} // '/');
	if ($o{query})
	{
		$url .= '?'
		  . join('&',
			map { "$_->[0]=" . uri_encode($_->[1]) }
			sort { $a->[0] cmp $b->[0] } @{ $o{query} });
	}
	my @cmd = (
		'curl', '-s', '-S', '-m', '30', '--retry', '3', '-w', "\n%{http_code}",
		'--aws-sigv4', "aws:amz:$region:$service",
		'--user', ($o{key_id} // $key_id) . ':' . ($o{secret} // $secret),
		'-H', 'x-amz-content-sha256: ' . sha256_hex($body // ''));
	push @cmd, '-H', "x-amz-security-token: $o{token}" if $o{token};
	if (defined $body)
	{
		push @cmd, '-H', 'Content-Type: application/x-www-form-urlencoded',
		  '--data-binary', '@-';
	}
	push @cmd, '-I' if $o{head};    # HEAD; the headers are the output
	push @cmd, '-X', $o{method} if $o{method};
	push @cmd, $url;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '<', \($body // ''), '>', \$out, '2>', \$err)
	  or die "curl failed: $err";
	$out =~ s/\n(\d{3})\z// or die "no status from curl: $out";
	return ($1, $out);
}

# Every object under a prefix of the bucket: { key => size }, listed with
# signed ListObjectsV2 requests (pages of 1000, following the tokens).
sub bucket_objects
{
	my ($prefix) = @_;
	my %objects;
	my $token;
	for (;;)
	{
		my @q = ([ 'list-type', '2' ], [ 'prefix', $prefix ]);
		push @q, [ 'continuation-token', $token ] if defined $token;
		my ($status, $body) = signed(path => "/$bucket", query => \@q);
		die "listing $prefix: HTTP $status $body" unless $status == 200;
		while ($body =~ m{<Contents>(.*?)</Contents>}gs)
		{
			my $c = $1;
			my ($k) = $c =~ m{<Key>([^<]*)</Key>};
			$k =~ s/&lt;/</g;
			$k =~ s/&gt;/>/g;
			$k =~ s/&quot;/"/g;
			$k =~ s/&apos;/'/g;
			$k =~ s/&amp;/&/g;
			my ($s) = $c =~ m{<Size>(\d+)</Size>};
			$objects{$k} = $s;
		}
		last unless $body =~ m{<IsTruncated>true</IsTruncated>};
		($token) = $body =~ m{<NextContinuationToken>([^<]*)<};
		die "truncated listing without a token" unless defined $token;
	}
	return \%objects;
}

# Keys under a store of this run, relative to the store ("shards/...").
sub store_objects
{
	my ($store) = @_;
	my $all = bucket_objects("$run/$store/");
	return { map { substr($_, length("$run/$store/")) => $all->{$_} } keys %$all };
}

sub max_size
{
	my ($objects, $re) = @_;
	my $max = -1;
	for (keys %$objects) { $max = $objects->{$_} if /$re/ && $objects->{$_} > $max; }
	return $max;
}

# Every stderr of SQL that may fail (try_sql) and of the racers below.
my @all_stderr;

# The S3 requests the backend logged at DEBUG2 since a log offset:
# [method, url without query, status].
sub logged_requests
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @r;
	push @r, [ $1, $2, $3 ]
	  while $log =~ /rollout_fdw: ([A-Z]+) (http\S+): HTTP (\d+) \(attempt/g;
	return @r;
}

my $store_url = "$endpoint/$bucket/$run";

$node->safe_psql('postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE SERVER rgw FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location '$location', endpoint '$endpoint', region '$region');
CREATE FOREIGN TABLE rt (id text, v int) SERVER rgw OPTIONS (store 'rt', key 'id');
CREATE FOREIGN TABLE many (id text, v int) SERVER rgw OPTIONS (store 'many', key 'id');
CREATE FOREIGN TABLE big (id text, p text) SERVER rgw OPTIONS (store 'big', key 'id');
CREATE FOREIGN TABLE bigcopy (id text, p text) SERVER rgw OPTIONS (store 'bigcopy', key 'id');
CREATE FOREIGN TABLE race (id text, v int) SERVER rgw OPTIONS (store 'race', key 'id');
});
create_mapping($node, 'rgw', "access_key_id '$key_id', secret_access_key '$secret'");

# ---------------------------------------------------------------------------
# (a) round trip
my $log_offset = -s $node->logfile;
my %expected;
for my $batch (1 .. 6)
{
	my $from = ($batch - 1) * 150 + 1;
	my $to = $from + 299;    # overlaps the previous batch: upserts
	$node->safe_psql('postgres',
		"INSERT INTO rt SELECT 'k' || lpad(i::text, 5, '0'), i * $batch FROM generate_series($from, $to) i");
	$expected{ sprintf('k%05d', $_) } = $_ * $batch for $from .. $to;
	$node->safe_psql('postgres', "SELECT rows_flushed FROM rollout_flush('rt')") if $batch % 2 == 0;
}
# one transaction writing a key twice: the later row wins
$node->safe_psql('postgres', "BEGIN; INSERT INTO rt VALUES ('k00007', -1); INSERT INTO rt VALUES ('k00007', 7007); COMMIT;");
$expected{k00007} = 7007;
my $count = scalar(keys %expected);
my $sum = 0;
$sum += $_ for values %expected;
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id), sum(v) FROM rt'),
	"$count|$count|$sum", 'round trip: every key once, at its newest version, across WAL and generations');
is($node->safe_psql('postgres', "SELECT v FROM rt WHERE id = 'k00200'"),
	$expected{k00200}, 'a point lookup reads the newest version');

my ($ok, $out, $err) = try_sql($node, "SELECT generations_merged > 0 FROM rollout_merge('rt')", \@all_stderr);
ok($ok && $out eq 't', 'merge on RGW') or diag($err);
# a second base fragment, so that compaction has something to rewrite
$node->safe_psql('postgres',
	"INSERT INTO rt SELECT 'k' || lpad(i::text, 5, '0'), i * 10 FROM generate_series(1, 100) i");
$expected{ sprintf('k%05d', $_) } = $_ * 10 for 1 .. 100;
$sum = 0;
$sum += $_ for values %expected;
($ok, $out, $err) = try_sql($node, "SELECT fragments_added FROM rollout_merge('rt')", \@all_stderr);
ok($ok && $out eq '1', 'a second merge adds a fragment') or diag("$out $err");
($ok, $out, $err) = try_sql($node,
	"SELECT fragments_before, fragments_after, versions_dropped, skipped_reason IS NULL FROM rollout_compact('rt', min_fragments => 2)", \@all_stderr);
ok($ok && $out =~ /^2\|1\|(\d+)\|t$/ && $1 == 100, 'compaction on RGW: two fragments into one, 100 versions dropped')
  or diag("$out $err");
my $before_gc = store_objects('rt');
($ok, $out, $err) = with_min_gc_grace($node, 0,
	sub { try_sql($node, "SELECT objects_deleted FROM rollout_gc('rt', '0')", \@all_stderr) });
ok($ok && $out > 0, 'gc on RGW deletes the superseded objects') or diag("$out $err");
my $deleted = $ok ? $out : 0;
my $after_gc = store_objects('rt');
is(scalar(keys %$before_gc) - scalar(keys %$after_gc), $deleted,
	'the listing lost exactly the objects gc reported');
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id), sum(v) FROM rt'),
	"$count|$count|$sum", 'the same rows after merges, compaction and gc');
($ok, $out, $err) = try_sql($node,
	"SELECT exact_row_count, fragments, generations FROM rollout_observe('rt', exact => true)", \@all_stderr);
ok($ok && $out eq "$count|1|0", 'observe counts the rows, one fragment, no generation') or diag("$out $err");

my @req = logged_requests($log_offset);
my %seen;
$seen{"$_->[0] $_->[2]"}++ for @req;
note('round trip requests: ' . join(', ', map { "$_ x$seen{$_}" } sort keys %seen));
is(scalar(grep { $_->[2] == 403 || $_->[2] == 400 } @req), 0,
	'RGW accepted the signature of every round-trip request (no 400/403)');
ok(scalar(grep { $_->[0] eq 'PUT' && $_->[2] == 200 && $_->[1] =~ m{/wal/} } @req),
	'conditional PUTs of WAL entries (If-None-Match, put id header) accepted');
ok(scalar(grep { $_->[0] eq 'GET' && $_->[2] == 206 } @req), 'ranged and tail GETs accepted (206)');
ok(scalar(grep { $_->[0] eq 'GET' && $_->[2] == 200 && $_->[1] eq "$endpoint/$bucket" } @req),
	'ListObjectsV2 requests accepted');
ok(scalar(grep { $_->[0] eq 'HEAD' && $_->[2] == 200 } @req), 'HEAD requests accepted');
ok(scalar(grep { $_->[0] eq 'DELETE' && $_->[2] == 204 } @req), 'DELETE requests accepted');

# A location prefix with characters that must be percent-encoded in paths
# and in the prefix and start-after parameters of listings (space, +, =, &,
# parentheses, UTF-8), and that come back XML-escaped in listings.
my $odd_prefix = "$run/odd dir+plus=eq&amp(\xc3\xbc)";
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', qq{
CREATE SERVER odd FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://$bucket/$odd_prefix', endpoint '$endpoint', region '$region');
CREATE FOREIGN TABLE odd (id text, v int) SERVER odd OPTIONS (store 'odd', key 'id');
});
create_mapping($node, 'odd', "access_key_id '$key_id', secret_access_key '$secret'");
($ok, $out, $err) = with_min_gc_grace($node, 0, sub { try_sql($node, q{
INSERT INTO odd SELECT 'o' || i, i FROM generate_series(1, 100) i;
SELECT rows_flushed FROM rollout_flush('odd');
INSERT INTO odd SELECT 'o' || i, i * 2 FROM generate_series(51, 150) i;
SELECT generations_merged FROM rollout_merge('odd');
INSERT INTO odd VALUES ('o1', 1000);
SELECT count(*), sum(v) FROM odd;
SELECT exact_row_count, fragments FROM rollout_observe('odd', exact => true);
SELECT objects_deleted > 0 FROM rollout_gc('odd', '0');
SELECT count(*), sum(v) FROM odd;}, \@all_stderr) });
my $odd_sum = 999 + 50 * 51 / 2 + 2 * (150 * 151 / 2 - 50 * 51 / 2);
is($out, "100\n2\n150|$odd_sum\n150|1\nt\n150|$odd_sum",
	'a prefix needing percent-encoding: insert, flush, merge, scan, observe, gc') or diag($err);
my @odd_keys = keys %{ bucket_objects("$odd_prefix/odd/") };
cmp_ok(scalar(@odd_keys), '>=', 4, 'the objects are under the prefix as written') or diag("@odd_keys");
@req = logged_requests($log_offset);
is(scalar(grep { $_->[2] == 403 || $_->[2] == 400 } @req), 0,
	'RGW accepted every request under that prefix');

# ---------------------------------------------------------------------------
# (b) more than 1000 WAL entries: two-page listings
my $many = 1050;
my $t0 = time();
$log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	join('', map { "INSERT INTO many VALUES ('m$_', $_);\n" } 1 .. $many));
note(sprintf('%d single-row transactions on RGW in %.1f s', $many, time() - $t0));
my @pos = RolloutStore::wal_positions_of(keys %{ store_objects('many') });
cmp_ok(scalar(@pos), '>', 1000, 'more than 1000 WAL entries');
my ($some_wal) = grep { m{/wal/\d+\.wal$} } keys %{ bucket_objects("$run/many/shards/") };
my ($head_status, $head) = signed(path => "/$bucket/" . uri_encode($some_wal) =~ s/%2F/\//gr, head => 1);
like($head, qr/^x-amz-meta-rollout-put-id: [0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\r?$/mi,
	'a WAL entry carries its put id (the signed x-amz-meta header was stored)') or diag("HTTP $head_status\n$head");
ok(contiguous(@pos), 'WAL positions 1..N without a hole');
my $total = $many * ($many + 1) / 2;
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM many'),
	"$many|$total", 'a scan sees every row');
is($node->safe_psql('postgres', "SELECT wal_entries FROM rollout_observe('many')"),
	scalar(@pos), 'observe lists every WAL entry (two pages)');
($ok, $out, $err) = try_sql($node, "SELECT rows_flushed FROM rollout_flush('many')", \@all_stderr);
ok($ok && $out == $many, 'flush seals all the WAL entries (listed over two pages)') or diag("$out $err");
is($node->safe_psql('postgres', "SELECT count(*), sum(v) FROM many"),
	"$many|$total", 'every row after the flush');
@req = logged_requests($log_offset);
is(scalar(grep { $_->[2] == 403 || $_->[2] == 400 } @req), 0,
	'no request refused while listing past 1000 keys');

# ---------------------------------------------------------------------------
# (c) bodies past 1 MiB
# 30000 rows of base64 hashes: about 2.8 MB that compress poorly.
my $rows_sql = q{SELECT 'b' || lpad(i::text, 6, '0') AS id,
  encode(sha256(int4send(i)), 'base64') || encode(sha256(int4send(-i)), 'base64') AS p
  FROM generate_series(1, 30000) i};
my $expect_digest = $node->safe_psql('postgres',
	"SELECT count(*), md5(string_agg(id || p, ',' ORDER BY id)) FROM ($rows_sql) s");
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', "INSERT INTO big $rows_sql");
my $objects = store_objects('big');
my $first = max_size($objects, qr{^(shards/[^/]+/wal/|ingest/)});
cmp_ok($first, '>', 1024 * 1024, 'the transaction was uploaded as one object past 1 MiB')
  or diag(explain($objects));
($ok, $out, $err) = try_sql($node, "SELECT fragments_added FROM rollout_merge('big')", \@all_stderr);
ok($ok && $out == 1, 'merged into a base fragment') or diag("$out $err");
$objects = store_objects('big');
cmp_ok(max_size($objects, qr{^base/data/}), '>', 1024 * 1024, 'the base fragment is past 1 MiB')
  or diag(explain($objects));
is($node->safe_psql('postgres',
		"SELECT count(*), md5(string_agg(id || p, ',' ORDER BY id)) FROM big"),
	$expect_digest, 'the large objects read back intact (ranged GETs over them)');

# COPY staged as an ingest segment (threshold lowered to its minimum)
my $copy_dir = PostgreSQL::Test::Utils::tempdir('copy');
$node->safe_psql('postgres', "COPY ($rows_sql) TO '$copy_dir/big.copy'");
$node->safe_psql('postgres',
	"SET rollout_fdw.ingest_threshold = '64kB'; COPY bigcopy FROM '$copy_dir/big.copy'");
$objects = store_objects('bigcopy');
cmp_ok(max_size($objects, qr{^ingest/}), '>', 1024 * 1024, 'COPY staged an ingest segment past 1 MiB')
  or diag(explain($objects));
is($node->safe_psql('postgres',
		"SELECT count(*), md5(string_agg(id || p, ',' ORDER BY id)) FROM bigcopy"),
	$expect_digest, 'the ingest segment reads back intact');
@req = logged_requests($log_offset);
is(scalar(grep { $_->[2] == 403 || $_->[2] == 400 } @req), 0,
	'RGW accepted every upload past 1 MiB (signature and payload hash)');

# ---------------------------------------------------------------------------
# (d) create-if-absent races
# Each session's transaction opens the store while it does not exist yet
# (its definition is pending); then all commit at once.
my $racers = 12;
my @sessions;
sub start_racers
{
	my ($round) = @_;
	@sessions = ();
	for my $i (1 .. $racers)
	{
		my %s = (in => '', out => '', err => '',
			timer => IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default));
		$s{h} = IPC::Run::start(
			[ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') ],
			'<', \$s{in}, '>', \$s{out}, '2>', \$s{err}, $s{timer});
		$s{in} .= "BEGIN;\nINSERT INTO race VALUES ('r$round-$i', $i);\n\\echo ready\n";
		push @sessions, \%s;
	}
	for my $s (@sessions)
	{
		pump_until($s->{h}, $s->{timer}, \$s->{out}, qr/ready/)
		  or die "racer not ready: $s->{err}";
	}
}

sub commit_racers
{
	$_->{in} .= "COMMIT;\n\\echo committed\n\\q\n" for @sessions;
	$_->{h}->pump_nb for @sessions;
	my $failed = 0;
	for my $s (@sessions)
	{
		$s->{h}->finish;
		push @all_stderr, $s->{err};
		if ($s->{h}->result != 0 || $s->{out} !~ /committed/)
		{
			$failed++;
			diag($s->{err});
		}
	}
	return $failed;
}

$log_offset = -s $node->logfile;
start_racers(1);
is(commit_racers(), 0, "$racers sessions creating one new store commit at once: all commit");
@req = logged_requests($log_offset);
my @store_json = grep { $_->[0] eq 'PUT' && $_->[1] eq "$store_url/race/_store.json" } @req;
is(scalar(grep { $_->[2] == 200 } @store_json), 1, 'exactly one PUT of _store.json got 200');
is(scalar(grep { $_->[2] == 412 } @store_json), $racers - 1, 'every other one got 412 from If-None-Match: *')
  or diag(join("\n", map { "@$_" } @store_json));
my @registry = grep { $_->[0] eq 'PUT' && $_->[1] =~ m{^\Q$store_url\E/race/_shards/} } @req;
is(scalar(grep { $_->[2] == 200 } @registry), 1, 'exactly one shard registration got 200, the others 412')
  or diag(join("\n", map { "@$_" } @registry));
is(scalar(grep { $_->[2] != 200 && $_->[2] != 412 } @registry), 0, '(nothing but 200 and 412)');

# More rounds of simultaneous commits: without preloading, each commit
# creates the next WAL position itself, and simultaneous commits race for it.
my $rounds = 1;
my $wal_412 = 0;
for my $round (2 .. 6)
{
	start_racers($round);
	is(commit_racers(), 0, "round $round: all $racers sessions commit") or last;
	$rounds = $round;
	$wal_412 = grep { $_->[0] eq 'PUT' && $_->[1] =~ m{/race/shards/.*/wal/} && $_->[2] == 412 }
	  logged_requests($log_offset);
	last if $round >= 3 && ($pre || $wal_412 > 0);
}
note("$wal_412 WAL PUTs lost a race (412) in $rounds rounds");
SKIP:
{
	skip 'preloaded, the group-commit leader writes the WAL: sessions do not race for positions', 1
	  if $pre;
	cmp_ok($wal_412, '>', 0, 'commits raced for WAL positions (412s) and each race had one winner');
}
my $n = $racers * $rounds;
my $race_sum = $rounds * $racers * ($racers + 1) / 2;
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id), sum(v) FROM race'),
	"$n|$n|$race_sum", 'every acknowledged row is there exactly once');
@pos = RolloutStore::wal_positions_of(keys %{ store_objects('race') });
ok(contiguous(@pos), 'the raced WAL holds positions 1..N without a hole') or diag("@pos");
if ($pre)
{
	cmp_ok(scalar(@pos), '<=', $n + 1, 'preloaded: group commits, no more entries than transactions + the fence');
}
else
{
	is(scalar(@pos), $n, 'one WAL entry per transaction');
}

# ---------------------------------------------------------------------------
# (e) credentials
$node->safe_psql('postgres', qq{
CREATE SERVER badsecret FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location '$location/badsecret', endpoint '$endpoint', region '$region');
CREATE FOREIGN TABLE bs (id text, v int) SERVER badsecret OPTIONS (store 'bs', key 'id');
CREATE SERVER badkey FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location '$location/badkey', endpoint '$endpoint', region '$region');
CREATE FOREIGN TABLE bk (id text, v int) SERVER badkey OPTIONS (store 'bk', key 'id');
CREATE SERVER badtoken FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location '$location/badtoken', endpoint '$endpoint', region '$region');
CREATE FOREIGN TABLE bt (id text, v int) SERVER badtoken OPTIONS (store 'bt', key 'id');
});
create_mapping($node, 'badsecret', "access_key_id '$key_id', secret_access_key '$wrong_secret'");
create_mapping($node, 'badkey', "access_key_id '$unknown_key_id', secret_access_key '$secret'");
create_mapping($node, 'badtoken',
	"access_key_id '$key_id', secret_access_key '$secret', session_token '$bogus_token'");

# With STS enabled, RGW answers every authentication failure with 403
# AccessDenied (without STS: SignatureDoesNotMatch, InvalidAccessKeyId).
my $auth_code = qr/AccessDenied|SignatureDoesNotMatch|InvalidAccessKeyId/;
for my $c (
	[ 'bs', 'badsecret', 'a wrong secret key' ],
	[ 'bk', 'badkey', 'an unknown access key' ],
	[ 'bt', 'badtoken', 'a bogus session token' ])
{
	my ($table, $dir, $what) = @$c;
	($ok, $out, $err) = try_sql($node, "INSERT INTO $table VALUES ('a', 1)", \@all_stderr);
	ok(!$ok, "$what: the insert fails");
	like($err,
		qr/ERROR:  could not (read|create|list|check) object "$table\/[^"]+" in store "\Q$location\E\/$dir": HTTP 403 (?:$auth_code)/,
		"$what: the error names the operation, the object and HTTP 403") or diag($err);
	($ok, $out, $err) = try_sql($node, "SELECT count(*) FROM $table", \@all_stderr);
	ok(!$ok && $err =~ /could not \w+ object "$table\/[^"]+" .*HTTP 403/, "$what: a scan fails the same way")
	  or diag($err);
	is(scalar(keys %{ bucket_objects("$run/$dir/") }), 0, "$what: nothing was written");
}

# Real temporary credentials from RGW's STS.
my ($sts_status, $sts) = signed(
	service => 'sts', path => '/', method => 'POST',
	body => 'Action=GetSessionToken&DurationSeconds=3600&Version=2011-06-15');
my ($tmp_key) = $sts =~ m{<AccessKeyId>([^<]+)<};
my ($tmp_secret) = $sts =~ m{<SecretAccessKey>([^<]+)<};
my ($tmp_token) = $sts =~ m{<SessionToken>([^<]+)<};
ok($sts_status == 200 && $tmp_key && $tmp_secret && $tmp_token, 'STS GetSessionToken gave temporary credentials')
  or diag("HTTP $sts_status: $sts");
$tmp_token //= 'none';
$tmp_secret //= 'none';
$node->safe_psql('postgres', qq{
CREATE SERVER sts FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location '$location', endpoint '$endpoint', region '$region');
CREATE FOREIGN TABLE sts_rt (id text, v int) SERVER sts OPTIONS (store 'rt', key 'id');
CREATE FOREIGN TABLE sts_new (id text, v int) SERVER sts OPTIONS (store 'sts_new', key 'id');
CREATE SERVER notoken FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location '$location', endpoint '$endpoint', region '$region');
CREATE FOREIGN TABLE nt (id text, v int) SERVER notoken OPTIONS (store 'nt', key 'id');
});
create_mapping($node, 'sts', "access_key_id '$tmp_key', secret_access_key '$tmp_secret', session_token '$tmp_token'");
create_mapping($node, 'notoken', "access_key_id '$tmp_key', secret_access_key '$tmp_secret'");
($ok, $out, $err) = try_sql($node, "INSERT INTO sts_new SELECT 's' || i, i FROM generate_series(1, 10) i", \@all_stderr);
ok($ok, 'temporary credentials with their session token: insert') or diag($err);
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM sts_new'), '10|55',
	'temporary credentials with their session token: scan');
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM sts_rt'), "$count|$sum",
	'temporary credentials read a store written with the user keys');
($ok, $out, $err) = try_sql($node, "INSERT INTO nt VALUES ('a', 1)", \@all_stderr);
ok(!$ok && $err =~ /HTTP 403/, 'the same temporary credentials without the token are refused (403)')
  or diag($err);

# ---------------------------------------------------------------------------
# (f) a bucket that does not exist
$node->safe_psql('postgres', qq{
CREATE SERVER nobucket FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://rollout-no-such-bucket-t023/x', endpoint '$endpoint', region '$region');
CREATE FOREIGN TABLE nb (id text, v int) SERVER nobucket OPTIONS (store 'nb', key 'id');
});
create_mapping($node, 'nobucket', "access_key_id '$key_id', secret_access_key '$secret'");
($ok, $out, $err) = try_sql($node, "INSERT INTO nb VALUES ('a', 1)", \@all_stderr);
ok(!$ok, 'insert into a store in a missing bucket fails');
like($err, qr/object "nb\/[^"]+" in store "s3:\/\/rollout-no-such-bucket-t023\/x": HTTP 404 NoSuchBucket/,
	'the error names the object, the store and HTTP 404 NoSuchBucket') or diag($err);
($ok, $out, $err) = try_sql($node, "SELECT count(*) FROM nb", \@all_stderr);
ok(!$ok && $err =~ /HTTP 404 NoSuchBucket/, 'a scan of it fails the same way, not as an empty store')
  or diag($err);
is($node->safe_psql('postgres', 'SELECT count(*) FROM many'), $many, 'the server is still up');

# ---------------------------------------------------------------------------
# RGW's own access log (when rgw.sh says where it is): the query strings the
# extension sent, and the status RGW gave each of its requests.
SKIP:
{
	my $rgw_log = $ENV{ROLLOUT_TEST_RGW_LOG};
	skip 'ROLLOUT_TEST_RGW_LOG is not set or not readable', 4
	  unless $rgw_log && -r $rgw_log;
	my @lines;
	open(my $fh, '<', $rgw_log) or die "$rgw_log: $!";
	while (my $l = <$fh>)
	{
		# beast: ... "METHOD URI HTTP/1.1" STATUS BYTES - "USER-AGENT" ...
		next unless $l =~ /beast: .*"([A-Z]+) (\S*\Q$run\E\S*) HTTP\/[\d.]+" (\d{3}) \S+ \S+ (\S+)/;
		next if $4 =~ /curl/;    # this test's own requests
		push @lines, [ $1, $2, $3 ];
	}
	close $fh;
	note(scalar(@lines) . " requests of the extension in RGW's log");
	ok(scalar(grep { $_->[0] eq 'GET' && $_->[1] =~ /[?&]continuation-token=[^&]+/ && $_->[2] == 200 } @lines),
		'RGW log: ListObjectsV2 with a continuation-token answered 200');
	ok(scalar(grep { $_->[0] eq 'GET' && $_->[1] =~ /[?&]start-after=[^&]+/ && $_->[2] == 200 } @lines),
		'RGW log: ListObjectsV2 with start-after answered 200');
	my @refused = grep { $_->[2] == 400 || $_->[2] == 403 } @lines;
	my @unexpected = grep { $_->[1] !~ m{(/|%2F)(badsecret|badkey|badtoken|nt)(/|%2F)} } @refused;
	is(scalar(@unexpected), 0, 'RGW log: no request refused except with the bad credentials')
	  or diag(join("\n", map { "@$_" } @unexpected));
	cmp_ok(scalar(@refused), '>=', 4, 'RGW log: the bad credentials were refused (403)');
}

# ---------------------------------------------------------------------------
# (g) credentials nowhere
$node->stop;
my $log = slurp_file($node->logfile);
my $errors = join("\n", @all_stderr);
like($log, qr/rollout_fdw: PUT http/, 'the debug log does show the requests');
for my $c (
	[ 'secret access key', $secret ],
	[ 'wrong secret key', $wrong_secret ],
	[ 'bogus session token', $bogus_token ],
	[ 'temporary secret key', $tmp_secret ],
	[ 'session token', $tmp_token ])
{
	my ($what, $value) = @$c;
	unlike($log, qr/\Q$value\E/, "the $what is not in the server log (debug5)");
	unlike($errors, qr/\Q$value\E/, "the $what is in no error message");
}
unlike($log, qr/Authorization:|AWS4-HMAC-SHA256|Signature=/i, 'no Authorization header or signature in the log');

done_testing();
