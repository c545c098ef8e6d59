
# Copyright (c) rollout_fdw authors
#
# PsqlScript.pm — psql running SQL in the background (IPC::Run), for tests
# that need sessions at work at the same time: start several, then wait for
# each and look at its exit status and output.
#
#   my $s = PsqlScript->start($node, sql => $sql);      # written to a script file here
#   my $s = PsqlScript->start($node, sql => $sql, name => 'ins1');   # ... named ins1.sql
#   my $s = PsqlScript->start($node, file => $path);    # a script file of the test
#   my $s = PsqlScript->start($node, command => $sql);  # psql -c
#   my ($exit, $stdout, $stderr) = $s->finish;          # stdout without its last newline
#   $s->{out}, $s->{err}                                 # the output as psql wrote it
#
# psql runs with -X -q -A -t -v ON_ERROR_STOP=1 against database postgres,
# with no standard input, and is killed after the suite's default timeout.

package PsqlScript;

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils ();

my $script_dir;
my $script_number = 0;

sub start
{
	my ($class, $node, %opts) = @_;
	my $self = bless { name => $opts{name}, out => '', err => '' }, $class;
	my @run;
	if (defined $opts{command})
	{
		@run = ('-c', $opts{command});
	}
	else
	{
		my $file = $opts{file};
		if (!defined $file)
		{
			$script_dir //= PostgreSQL::Test::Utils::tempdir('scripts');
			$file = "$script_dir/" . ($opts{name} // 'session' . ++$script_number) . '.sql';
			open(my $fh, '>', $file) or die "open $file: $!";
			print $fh $opts{sql};
			close $fh;
		}
		$self->{file} = $file;
		@run = ('-f', $file);
	}
	$self->{h} = IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres'), @run
		],
		'<', \undef, '>', \$self->{out}, '2>', \$self->{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return $self;
}

# Waits for psql to end: (exit status, stdout without its last newline, stderr).
sub finish
{
	my ($self) = @_;
	$self->{h}->finish;
	my $out = $self->{out};
	chomp $out;
	return ($self->{h}->result(0), $out, $self->{err});
}

1;
