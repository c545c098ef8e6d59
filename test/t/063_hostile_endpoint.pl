
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 063_hostile_endpoint.pl — what an object store says reaches errors and the
# server log only as printable ASCII, cut short (objstore_server_text).
#
# A role with USAGE on the wrapper may point a server of its own at any
# endpoint, and what that endpoint answers is quoted in errors, which go to
# the client and into the server log.  An endpoint here answers every S3 and
# Azure request with a 403 whose error code and message hold a line break
# followed by a made-up log line, terminal escapes, bytes that are not
# UTF-8 and a message of a thousand characters.  Each answer must come back:
#   1. as the usual error, with its SQLSTATE (42501 for a 403);
#   2. with every byte outside printable ASCII replaced by "?" (so a client
#      gets valid UTF-8 and no escape sequence);
#   3. with the code cut at 64 characters and the message at 256;
#   4. without a line of its own in the server log, where a line break
#      would have let it write a line that looks like the server's.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use IO::Socket::INET;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutTest qw(writer_node);
use Test::More;

my $forged = "LOG:  forged by the endpoint";
my $escape = "\e[2J";

# An S3 error body must be well-formed XML, which has no escapes or bytes
# that are not UTF-8 (libxml2 refuses such a body, and nothing of it is
# quoted): it has line breaks, a tab, "é" and a right-to-left override.
my $s3_code = "Denied\n$forged\t\xc3\xa9\xe2\x80\xae" . ('C' x 40);
my $s3_message = "Go away\r\n$forged\xc3\xa9" . ('M' x 1000);
# Azure's code is taken from a header, or from the body as it is.
my $azure_header_code = "${escape}Auth\xffFailed";
my $azure_body_code = "Denied\n$forged$escape\xff\xfe" . ('C' x 40);

# The endpoint: one child answering each connection with a 403, as S3 (an
# XML error body) or as Azure (requests with an x-ms-version header: the
# x-ms-error-code header, or only a <Code> in the body for requests whose
# path holds "nocodeheader").
my $listener = IO::Socket::INET->new(
	Listen => 64,
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Proto => 'tcp',
	ReuseAddr => 1) or die "cannot listen: $!";
my $port = $listener->sockport;
my $child = fork() // die "cannot fork: $!";
if ($child == 0)
{
	while (my $client = $listener->accept)
	{
		my $request = '';
		my $content_length = 0;
		while (my $line = <$client>)
		{
			$request .= $line;
			$content_length = $1 if $line =~ /^content-length:\s*(\d+)/i;
			last if $line eq "\r\n";
		}
		read($client, my $ignored, $content_length) if $content_length > 0;
		my $azure = $request =~ /^x-ms-version:/mi;
		my $body =
		  $azure
		  ? "<Error><Code>$azure_body_code</Code></Error>"
		  : "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		  . "<Error><Code>$s3_code</Code><Message>$s3_message</Message></Error>";
		my $header =
		  ($azure && $request !~ /nocodeheader/)
		  ? "x-ms-error-code: $azure_header_code\r\n"
		  : '';
		print $client "HTTP/1.1 403 Forbidden\r\n"
		  . "Content-Type: application/xml\r\n"
		  . $header
		  . "Content-Length: " . length($body) . "\r\n"
		  . "Connection: close\r\n\r\n"
		  . $body;
		close $client;
	}
	POSIX::_exit(0);			# not the parent's END blocks
}
close $listener;

# A run that dies must not leave the endpoint accepting: it holds prove's
# output pipe, and prove would wait for it for good.
END { kill 'TERM', $child if $child; }

my $node = writer_node('hostile_endpoint');
$node->safe_psql('postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE ROLE mallory LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER rollout_fdw TO mallory;
GRANT CREATE ON SCHEMA public TO mallory;
SET ROLE mallory;
CREATE SERVER hostile_s3 FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://bucket/x', endpoint 'http://127.0.0.1:$port', region 'us-east-1',
           request_timeout '10');
CREATE USER MAPPING FOR mallory SERVER hostile_s3
  OPTIONS (access_key_id 'AKIDEXAMPLE', secret_access_key 'the-secret-key');
CREATE FOREIGN TABLE s3_table (id int, v text) SERVER hostile_s3 OPTIONS (store 'st', key 'id');
CREATE SERVER hostile_azure FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://acct/container/x', endpoint 'http://127.0.0.1:$port/acct');
CREATE USER MAPPING FOR mallory SERVER hostile_azure
  OPTIONS (account_key 'c2VjcmV0LWtleS1vZi10aGUtYWNjb3VudA==');
CREATE FOREIGN TABLE azure_table (id int, v text) SERVER hostile_azure OPTIONS (store 'st', key 'id');
CREATE SERVER hostile_azure_body FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://acct/nocodeheader/x', endpoint 'http://127.0.0.1:$port/acct');
CREATE USER MAPPING FOR mallory SERVER hostile_azure_body
  OPTIONS (account_key 'c2VjcmV0LWtleS1vZi10aGUtYWNjb3VudA==');
CREATE FOREIGN TABLE azure_body_table (id int, v text) SERVER hostile_azure_body OPTIONS (store 'st', key 'id');
});

# One query as mallory, in verbose error mode so that the detail and the
# SQLSTATE come too; returns psql's stderr.
sub error_of
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-U', 'mallory', '-v', 'VERBOSITY=verbose' ]);
	isnt($rc, 0, "the query fails: $sql");
	return $err;
}

# What every quoted answer must satisfy, besides its own expectations.
sub printable_only
{
	my ($err, $what) = @_;
	my ($first_line) = $err =~ /^(.*)$/m;
	unlike($err, qr/[^\x20-\x7e\n\t]/, "$what: the client gets printable ASCII only");
	unlike($err, qr/^\Q$forged\E/m, "$what: no line of the answer stands on its own");
	unlike($err, qr/the-secret-key|c2VjcmV0/, "$what: no secret is quoted");
	return $first_line;
}

my $log_offset = -s $node->logfile;

# S3: the code in the message, the message in the detail
my $err = error_of('SELECT * FROM s3_table');
printable_only($err, 'S3');
like($err, qr/ERROR:  42501: could not \w+ object "[^"]*" in store "s3:\/\/bucket\/x": HTTP 403 Denied\?LOG:  forged by the endpoint\?{6}C+$/m,
	'S3: the error quotes the code with a "?" for each byte that is not printable ASCII');
my ($quoted_code) = $err =~ /HTTP 403 (.*)$/m;
is(length($quoted_code // ''), 64, 'S3: the quoted code is cut at 64 characters');
my ($quoted_message) = $err =~ /^DETAIL:  The S3 server said: (.*)$/m;
ok(defined $quoted_message, 'S3: the detail quotes the message') or diag($err);
is(length($quoted_message // ''), 256, 'S3: the quoted message is cut at 256 characters');
# (XML reads the message's "\r\n" as one line break)
like($quoted_message // '', qr/^Go away\?LOG:  forged by the endpoint\?\?M+$/,
	'S3: line breaks and UTF-8 of the message become "?"');

# Azure: the code of the x-ms-error-code header, then the one of the body
$err = error_of('SELECT * FROM azure_table');
printable_only($err, 'Azure, code in a header');
like($err, qr/ERROR:  42501: could not .* HTTP status 403, Azure error code \?\[2JAuth\?Failed$/m,
	'Azure: the header\'s code is quoted with "?" for the escape and the byte that is not ASCII');
$err = error_of('SELECT * FROM azure_body_table');
printable_only($err, 'Azure, code in the body');
like($err, qr/HTTP status 403, Azure error code Denied\?LOG:  forged by the endpoint\?\[2J\?\?C+$/m,
	'Azure: the body\'s code is quoted with "?" for each byte that is not printable ASCII');

# The server log has the same errors, each on its own lines only
my $log = slurp_file($node->logfile, $log_offset);
like($log, qr/HTTP 403 Denied\?LOG:  forged by the endpoint/, 'the server log has the S3 error');
like($log, qr/Azure error code Denied\?LOG:  forged by the endpoint/, 'the server log has the Azure error');
unlike($log, qr/^\s*\Q$forged\E/m, 'no line of the server log is the endpoint\'s');
unlike($log, qr/[\x00-\x08\x0b-\x1f\x7f-\xff]/, 'the server log gets no control character or byte outside ASCII');

kill 'TERM', $child;
waitpid($child, 0);
$child = 0;			# reaped: its pid may be another process's now
$node->stop;
done_testing();
