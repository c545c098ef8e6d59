#!/usr/bin/env perl
#
# s3_fault_proxy.pl — an HTTP proxy in front of a local object store that
# injects faults on request, for the S3 backend tests (test/t/020_s3_moto.pl).
#
#   perl test/servers/s3_fault_proxy.pl LISTEN_PORT UPSTREAM_HOST:PORT STATE_FILE
#
# Listens on 127.0.0.1:LISTEN_PORT and relays each HTTP/1.1 request to the
# upstream on a fresh connection (answering with "Connection: close", so every
# client request is one proxy connection).  The STATE_FILE holds the faults
# to inject, one per line, consumed in order by the requests they match:
#
#   fail METHOD N [TEXT]   answer the next N METHOD requests (or * for any)
#                          whose path contains TEXT (if given) with 500
#                          InternalError, without forwarding them
#   bogus METHOD N [TEXT]  answer the next N such requests with 200 and an
#                          S3 <Error> document, as a gateway in front of a
#                          store may, without forwarding them
#   whole METHOD N [TEXT]  forward the next N such requests without their
#                          Range header, so that the upstream answers with
#                          the whole object (200), as a gateway or cache in
#                          front of a store may (moto checks no signature)
#   shift METHOD N [TEXT]  forward the next N such requests with their Range
#                          moved to the start of the object (the same number
#                          of bytes): a server that sends the wrong part
#   short METHOD N [TEXT]  forward the next N such requests and relay only
#                          the first half of the answer's body (its
#                          Content-Length fixed to match): bytes other than
#                          those asked for
#   delay METHOD N MS [TEXT]
#                          forward the next N such requests, then hold the
#                          upstream's answer for MS milliseconds before
#                          relaying it (the request has taken effect: a client
#                          that times out meanwhile sees an ambiguous outcome)
#
# Every request handled is appended to STATE_FILE.log as "METHOD PATH STATUS
# [fault]" (a listing as "GET PATH list=PREFIX STATUS"), so a test can count
# what was sent, and in what order.  Write the state file with
# rename() so that the proxy never reads half of it.  Runs until killed.

use strict;
use warnings;

use Fcntl qw(:flock);
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep);

my ($listen_port, $upstream, $state_file) = @ARGV;
die "usage: $0 LISTEN_PORT UPSTREAM_HOST:PORT STATE_FILE\n"
  unless $listen_port && $upstream && $state_file;

my $server = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => $listen_port,
	Listen => 64,
	ReuseAddr => 1) or die "listen on $listen_port: $!";
$SIG{CHLD} = 'IGNORE';
print "listening on 127.0.0.1:$listen_port\n";
STDOUT->flush;

# Take the fault for a request of this method, if one is pending; returns
# ('fail'), ('bogus'), ('delay', ms) or ().  Under a lock: children race.
sub take_fault
{
	my ($method, $path) = @_;
	open(my $lock, '>>', "$state_file.lock") or return ();
	flock($lock, LOCK_EX);
	my @lines;
	if (open(my $fh, '<', $state_file))
	{
		@lines = <$fh>;
		close $fh;
	}
	my @result;
	for my $i (0 .. $#lines)
	{
		my @f = split ' ', $lines[$i];
		next unless @f >= 3 && $f[2] > 0;
		next unless $f[1] eq '*' || $f[1] eq $method;
		my $text = $f[0] eq 'delay' ? $f[4] : $f[3];
		next if defined $text && index($path, $text) < 0;
		$f[2]--;
		@result = $f[0] eq 'delay' ? ('delay', $f[3]) : ($f[0]);
		$lines[$i] = join(' ', @f) . "\n";
		last;
	}
	if (@result)
	{
		open(my $out, '>', "$state_file.tmp") or die;
		print $out @lines;
		close $out;
		rename("$state_file.tmp", $state_file);
	}
	close $lock;
	return @result;
}

sub log_request
{
	my ($line) = @_;
	open(my $fh, '>>', "$state_file.log") or return;
	flock($fh, LOCK_EX);
	print $fh "$line\n";
	close $fh;
}

sub read_request
{
	my ($client) = @_;
	my $head = '';
	while ($head !~ /\r\n\r\n/)
	{
		my $n = sysread($client, my $buf, 4096);
		return undef unless $n;
		$head .= $buf;
	}
	my ($header, $rest) = split(/\r\n\r\n/, $head, 2);
	my ($length) = $header =~ /^content-length:\s*(\d+)/mi;
	$length //= 0;
	my $expect = $header =~ /^expect:\s*100-continue/mi;
	if ($expect && length($rest) < $length)
	{
		syswrite($client, "HTTP/1.1 100 Continue\r\n\r\n");
	}
	while (length($rest) < $length)
	{
		my $n = sysread($client, my $buf, 65536);
		return undef unless $n;
		$rest .= $buf;
	}
	# the upstream gets no Expect (the body is complete) and closes after
	$header =~ s/^expect:[^\r]*\r\n//mi;
	$header =~ s/\r\nexpect:[^\r]*//gi;
	$header =~ s/\r\nconnection:[^\r]*//gi;
	$header .= "\r\nConnection: close";
	return ($header, $rest, $expect);
}

sub handle
{
	my ($client) = @_;
	my ($header, $body, $expect) = read_request($client);
	return unless defined $header;
	my ($method, $path) = $header =~ /^(\S+) (\S+)/;
	(my $short_path = $path) =~ s/\?.*//;
	# a listing is logged with its prefix, so a test can tell which it was
	if ($path =~ /[?&]list-type=/)
	{
		my ($prefix) = $path =~ /[?&]prefix=([^&]*)/;
		($prefix //= '') =~ s/%([0-9A-Fa-f]{2})/chr(hex($1))/ge;
		$short_path .= " list=$prefix";
	}
	# the log shows which requests waited for "100 Continue" (a round trip)
	$short_path .= ' expect-100' if $expect;
	my @fault = take_fault($method, $path);

	if (@fault && ($fault[0] eq 'fail' || $fault[0] eq 'bogus'))
	{
		my $xml = '<?xml version="1.0" encoding="UTF-8"?>'
		  . '<Error><Code>InternalError</Code><Message>injected by the fault proxy</Message></Error>';
		my $payload = $method eq 'HEAD' ? '' : $xml;
		my $status = $fault[0] eq 'fail' ? '500 Internal Server Error' : '200 OK';
		syswrite($client,
			    "HTTP/1.1 $status\r\nContent-Type: application/xml\r\n"
			  . "Content-Length: "
			  . length($xml)
			  . "\r\nConnection: close\r\n\r\n$payload");
		log_request("$method $short_path " . substr($status, 0, 3) . " $fault[0]");
		return;
	}

	# "whole": without its Range header (logged as such only if it had one)
	my $fault_note = @fault ? $fault[0] : '';
	if ($fault_note eq 'whole')
	{
		$fault_note = 'whole-unranged' unless $header =~ s/\r\nrange:[^\r]*//i;
	}
	if ($fault_note eq 'shift')
	{
		# "bytes=A-B" and "bytes=-N" become the same length from byte 0
		$fault_note = 'shift-unranged'
		  unless $header =~ s/(\r\nrange:\s*bytes=)(\d+)-(\d+)/$1 . '0-' . ($3 - $2)/ie
		  || $header =~ s/(\r\nrange:\s*bytes=)-(\d+)/$1 . '0-' . ($2 - 1)/ie;
	}

	my ($host, $port) = split /:/, $upstream;
	my $up = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port)
	  or do { log_request("$method $short_path 502"); return; };
	syswrite($up, "$header\r\n\r\n$body");
	my $answer = '';
	while (sysread($up, my $buf, 65536)) { $answer .= $buf; }
	close $up;
	my ($status) = $answer =~ /^HTTP\/\S+ (\d+)/;
	$status //= 0;
	# logged before a delay: the client's retry may be logged meanwhile
	log_request("$method $short_path $status" . ($fault_note ne '' ? " $fault_note" : ''));
	if (@fault && $fault[0] eq 'delay')
	{
		sleep($fault[1] / 1000);
	}
	if ($fault_note eq 'short' && $answer =~ /\r\n\r\n/)
	{
		my ($answer_head, $answer_body) = split(/\r\n\r\n/, $answer, 2);
		$answer_body = substr($answer_body, 0, int(length($answer_body) / 2));
		$answer_head =~ s/(\r\ncontent-length:\s*)\d+/$1 . length($answer_body)/ie;
		$answer = "$answer_head\r\n\r\n$answer_body";
	}
	$answer =~ s/\r\nconnection:[^\r]*//i;
	$answer =~ s/\r\n\r\n/\r\nConnection: close\r\n\r\n/;
	local $SIG{PIPE} = 'IGNORE';
	syswrite($client, $answer);
}

while (1)
{
	my $client = $server->accept or next;
	my $pid = fork();
	if (!defined $pid) { close $client; next; }
	if ($pid == 0)
	{
		close $server;
		handle($client);
		close $client;
		POSIX::_exit(0);
	}
	close $client;
}
