
# Copyright (c) rollout_fdw authors
#
# 025_tls_verification.pl — HTTPS to the object store is verified by default
# (issue 5): the S3 and the Azure backend, each behind the project's proxy
# (test/servers/latency_proxy.py --tls-cert) terminating TLS in front of moto
# and Azurite with certificates made here.
#
#   - a self-signed certificate the client does not know: refused, with an
#     error naming the operation and the store, and nothing written;
#   - the same certificate given as ca_file: works;
#   - a certificate of another CA given as ca_file: refused;
#   - a certificate for another host name (localhost only, reached as
#     127.0.0.1): refused even with the right ca_file — host names are
#     verified, not only the chain;
#   - a ca_file that does not exist: a clear error;
#   - verify_tls = false (the explicit opt-out): works without ca_file.
#
# Needs moto and Azurite (scripts/test.sh starts both); skipped without them.

use strict;
use warnings;

use FindBin;
use IPC::Run;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use LatencyProxy;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;

plan skip_all => 'moto and Azurite are not running (scripts/test.sh starts them)'
  unless $ENV{ROLLOUT_TEST_S3_ENDPOINT} && $ENV{ROLLOUT_TEST_AZURE_ENDPOINT};

my $tmp = PostgreSQL::Test::Utils::tempdir('tls');

# Certificates: "good" for 127.0.0.1 and localhost, "other" from another
# self-signed CA, "named" for localhost only.
sub make_certificate
{
	my ($name, $san) = @_;
	my ($out, $err);
	IPC::Run::run(
		[
			'openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes',
			'-keyout', "$tmp/$name.key", '-out', "$tmp/$name.pem",
			'-days', '2', '-subj', "/CN=rollout-test-$name",
			'-addext', "subjectAltName=$san"
		],
		'>', \$out, '2>', \$err)
	  or BAIL_OUT("openssl req failed: $err");
	chmod 0644, "$tmp/$name.pem", "$tmp/$name.key";
	return "$tmp/$name.pem";
}
my $good = make_certificate('good', 'IP:127.0.0.1,DNS:localhost');
my $other = make_certificate('other', 'IP:127.0.0.1,DNS:localhost');
make_certificate('named', 'DNS:localhost');

# A TLS-terminating proxy in front of $target with certificate $name; returns
# its port.
my @proxies;
sub tls_proxy
{
	my ($target, $name) = @_;
	my $proxy = LatencyProxy->start(
		target => $target,
		tls_cert => "$tmp/$name.pem",
		tls_key => "$tmp/$name.key");
	push @proxies, $proxy;
	BAIL_OUT("TLS proxy for $target did not start") unless $proxy->port;
	return $proxy->port;
}

my $node = mode_node('tls', conf => ["log_min_messages = debug1\n"]);
$node->safe_psql('postgres', 'CREATE EXTENSION rollout_fdw');

for my $backend ('s3', 'azure')
{
	my $store = RolloutStore->for_test("025_tls_$backend", backend => $backend);
	my ($scheme, $target, $path) = $store->{endpoint} =~ m{^(http)://([0-9.]+:\d+)(/.*)?$}
	  or BAIL_OUT("the $backend endpoint must be http://IP:PORT[/path]: $store->{endpoint}");
	$path //= '';
	my $good_port = tls_proxy($target, 'good');
	my $named_port = tls_proxy($target, 'named');
	my $n = 0;

	# A server and a table through the proxy with these options; returns the
	# table's name.
	my $table = sub {
		my (%options) = @_;
		$n++;
		my $server = "${backend}_$n";
		$node->safe_psql('postgres',
			$store->server_sql($server, connect_timeout => 5, request_timeout => 10, %options)
			  . "CREATE FOREIGN TABLE t_$server (id text, v int) SERVER $server"
			  . " OPTIONS (store 'tls$n', key 'id');");
		return "t_$server";
	};

	# --- an unknown self-signed certificate is refused -------------------------
	my $t = $table->(endpoint => "https://127.0.0.1:$good_port$path");
	my ($ret, $out, $err) = $node->psql('postgres', "INSERT INTO $t VALUES ('a', 1)");
	isnt($ret, 0, "$backend: unknown certificate: the INSERT fails");
	like($err, qr/certificate|SSL|TLS/i, "$backend: the error says why (certificate)");
	like($err, qr/"tls1\/_store\.json" in store "\Q${\ $store->location }\E"/,
		"$backend: the error names the object and the store");
	is_deeply([ $store->list('tls1/') ], [], "$backend: nothing was written");
	($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM $t");
	isnt($ret, 0, "$backend: a SELECT is refused as well");

	# --- the certificate as ca_file: trusted -----------------------------------
	$t = $table->(endpoint => "https://127.0.0.1:$good_port$path", ca_file => $good);
	$node->safe_psql('postgres', "INSERT INTO $t VALUES ('a', 1), ('b', 2)");
	$node->safe_psql('postgres', "INSERT INTO $t VALUES ('a', 10)");
	is($node->safe_psql('postgres', "SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM $t"),
		'a=10,b=2', "$backend: with ca_file the store works over HTTPS");
	ok(scalar(grep { m{/wal/} } $store->list('tls2/')) >= 1,
		"$backend: the WAL entries are on the server behind the TLS proxy");
	is($node->safe_psql('postgres', "SELECT rows_flushed FROM rollout_flush('$t')"), '2',
		"$backend: a flush over HTTPS");

	# --- another CA's certificate as ca_file: refused ---------------------------
	$t = $table->(endpoint => "https://127.0.0.1:$good_port$path", ca_file => $other);
	($ret, $out, $err) = $node->psql('postgres', "INSERT INTO $t VALUES ('a', 1)");
	isnt($ret, 0, "$backend: a certificate from another CA is refused");
	like($err, qr/certificate|SSL|TLS/i, "$backend: ... with a certificate error");
	is_deeply([ $store->list('tls3/') ], [], "$backend: ... and nothing written");

	# --- the host name is verified, not only the chain -------------------------
	$t = $table->(endpoint => "https://127.0.0.1:$named_port$path", ca_file => "$tmp/named.pem");
	($ret, $out, $err) = $node->psql('postgres', "INSERT INTO $t VALUES ('a', 1)");
	isnt($ret, 0, "$backend: a certificate for another host name is refused");
	like($err, qr/certificate|SSL|TLS|host/i, "$backend: ... with a verification error");
	$t = $table->(endpoint => "https://localhost:$named_port$path", ca_file => "$tmp/named.pem");
	$node->safe_psql('postgres', "INSERT INTO $t VALUES ('n', 5)");
	is($node->safe_psql('postgres', "SELECT sum(v) FROM $t"), '5',
		"$backend: the same certificate works under the name it was made for");

	# --- a ca_file that does not exist ------------------------------------------
	$t = $table->(endpoint => "https://127.0.0.1:$good_port$path", ca_file => "$tmp/missing.pem");
	($ret, $out, $err) = $node->psql('postgres', "INSERT INTO $t VALUES ('a', 1)");
	isnt($ret, 0, "$backend: a missing ca_file fails");
	like($err, qr/ERROR/, "$backend: ... with an ERROR, not a crash");
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$backend: the server is fine");

	# --- verify_tls = false: the explicit opt-out ------------------------------
	$t = $table->(endpoint => "https://127.0.0.1:$good_port$path", verify_tls => 'false');
	$node->safe_psql('postgres', "INSERT INTO $t VALUES ('u', 7)");
	is($node->safe_psql('postgres', "SELECT sum(v) FROM $t"), '7',
		"$backend: verify_tls = false accepts the unknown certificate");
}

$node->stop;
$_->stop for @proxies;
done_testing();
