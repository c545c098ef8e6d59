
# Copyright (c) rollout_fdw authors
#
# LatencyProxy.pm — test/servers/latency_proxy.py, the project's TCP proxy in
# front of an object-store server, started for one test: it delays every
# direction, answers requests with errors or withholds answers when told to
# on its control port, or terminates TLS with a given certificate.
#
#   my $proxy = LatencyProxy->start(target => 'IP:PORT', delay_ms => 20, control => 1);
#   my $proxy = LatencyProxy->start(target => 'IP:PORT', tls_cert => $pem, tls_key => $key);
#   $proxy->port, $proxy->control_port   where it listens (the kernel picks the ports)
#   $proxy->command('fail 2 500')        a control command; dies unless it is answered "ok"
#   $proxy->counter('requests')          a counter of the "status" command
#   $proxy->stop
#
# start waits up to 10 s for the proxy to write its ports; the test checks
# that they are set.

package LatencyProxy;

use strict;
use warnings;

use File::Basename qw(dirname);
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Utils ();

sub start
{
	my ($class, %opts) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir('proxy');
	my @cmd = (
		'python3', dirname(__FILE__) . '/../servers/latency_proxy.py',
		'--listen', '127.0.0.1:0', '--target', $opts{target});
	push @cmd, '--delay-ms', $opts{delay_ms} if defined $opts{delay_ms};
	push @cmd, '--tls-cert', $opts{tls_cert}, '--tls-key', $opts{tls_key} if $opts{tls_cert};
	push @cmd, '--control', '127.0.0.1:0' if $opts{control};
	push @cmd, '--port-file', "$dir/ports";
	my $self = bless {}, $class;
	$self->{h} = IPC::Run::start(\@cmd, '>', "$dir/proxy.log", '2>&1');
	for (1 .. 100)
	{
		last if -s "$dir/ports";
		select(undef, undef, undef, 0.1);
	}
	@$self{qw(port control_port)} = split ' ', PostgreSQL::Test::Utils::slurp_file("$dir/ports");
	return $self;
}

sub port { return $_[0]->{port}; }
sub control_port { return $_[0]->{control_port}; }

sub command
{
	my ($self, $command) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$self->{control_port}", Timeout => 5)
	  or die "proxy control: $!";
	print $s "$command\n";
	my $reply = <$s>;
	close $s;
	chomp $reply;
	die "proxy control: $command: $reply" unless $reply =~ /^ok/;
	return $reply;
}

sub counter
{
	my ($self, $name) = @_;
	my ($n) = $self->command('status') =~ /\b$name=(\d+)/;
	return $n;
}

sub stop
{
	my ($self) = @_;
	$self->{h}->kill_kill;
	return;
}

1;
