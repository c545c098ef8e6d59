
# Copyright (c) rollout_fdw authors
#
# RecordingS3.pm — a stand-in for a hostile S3 endpoint: it records every
# request it receives and answers like an empty bucket.
#
# The privilege tests point a server that an unprivileged role created at
# it, and check what reached it: nothing at all when the role has no
# credentials of its own, and never the server's environment credentials
# or another role's rows.
#
#   my $s3 = RecordingS3->start;
#   ... CREATE SERVER ... OPTIONS (location 's3://bucket/p', endpoint $s3->endpoint) ...
#   my @requests = $s3->requests;   # each { method, target, headers, body }
#   $s3->stop;
#
# Answers: a ListObjectsV2 request gets an empty listing, every other
# request 404 NoSuchKey; each connection serves one request and closes.

package RecordingS3;

use strict;
use warnings;

use IO::Socket::INET;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Utils ();

sub start
{
	my ($class) = @_;
	my $listener = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Listen => 16,
		Proto => 'tcp',
		ReuseAddr => 1) or die "RecordingS3: cannot listen: $!";
	my $log = PostgreSQL::Test::Utils::tempdir('recording_s3') . '/requests.jsonl';
	my $self = bless { port => $listener->sockport, log => $log }, $class;

	my $pid = fork();
	die "RecordingS3: fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		while (my $client = $listener->accept)
		{
			_serve($client, $log);
			close $client;
		}
		POSIX::_exit(0);
	}
	close $listener;
	$self->{pid} = $pid;
	return $self;
}

sub _serve
{
	my ($client, $log) = @_;
	local $/ = "\r\n";
	my $line = <$client>;
	return unless defined $line;
	$line =~ s/\r\n$//;
	my ($method, $target) = split / /, $line;
	my %headers;
	while (my $h = <$client>)
	{
		$h =~ s/\r\n$//;
		last if $h eq '';
		my ($name, $value) = $h =~ /^([^:]+):\s*(.*)$/;
		$headers{ lc $name } = $value if defined $name;
	}
	my $body = '';
	if (my $length = $headers{'content-length'})
	{
		read($client, $body, $length);
	}
	if (open(my $fh, '>>', $log))
	{
		print $fh JSON::PP->new->canonical->encode(
			{ method => $method, target => $target, headers => \%headers, body => $body })
		  . "\n";
		close $fh;
	}
	my ($status, $xml);
	if ($method eq 'GET' && $target =~ /[?&]list-type=2/)
	{
		($status, $xml) = ('200 OK',
			'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>');
	}
	else
	{
		($status, $xml) = ('404 Not Found',
			'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>none</Message></Error>');
	}
	$xml = '' if $method eq 'HEAD';
	print $client "HTTP/1.1 $status\r\nContent-Type: application/xml\r\n"
	  . 'Content-Length: ' . length($xml) . "\r\nConnection: close\r\n\r\n$xml";
	return;
}

sub endpoint { return "http://127.0.0.1:$_[0]->{port}"; }

# The requests received so far, oldest first.
sub requests
{
	my ($self) = @_;
	open(my $fh, '<', $self->{log}) or return ();
	my @requests = map { JSON::PP::decode_json($_) } <$fh>;
	close $fh;
	return @requests;
}

sub stop
{
	my ($self) = @_;
	return unless $self->{pid};
	kill 'TERM', $self->{pid};
	waitpid($self->{pid}, 0);
	$self->{pid} = undef;
	return;
}

sub DESTROY { $_[0]->stop; }

1;
