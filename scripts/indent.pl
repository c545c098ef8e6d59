#!/usr/bin/perl
#
# indent.pl — PostgreSQL's layout for our C sources, with pg_bsd_indent.
#
#   perl scripts/indent.pl            check: print what differs, exit 1 if any
#   perl scripts/indent.pl --fix      rewrite the files that differ
#   perl scripts/indent.pl [--fix] FILE...
#
# Without FILE arguments: every tracked .c and .h file under src/ and
# include/ (every one there, in a copy of the tree without .git).  pg_bsd_indent (Debian package pg-bsd-indent) runs with the
# options PostgreSQL's pgindent gives it and our typedefs list
# (scripts/typedefs.list, made by scripts/typedefs.pl).  pgindent itself is
# not packaged; of its clean-ups around pg_bsd_indent we need one: a
# function's return type on its own line keeps "char *" together.
use strict;
use warnings;
use File::Temp qw(tempfile);
use FindBin;

my @INDENT_OPTIONS = qw(-bad -bap -bbb -bc -bl -cli1 -cp33 -cdb -nce -d0 -di12
  -nfc1 -i4 -l79 -lp -lpl -nip -npro -sac -tpg -ts4);

my $fix = 0;
my @files;
for my $arg (@ARGV)
{
	if ($arg eq '--fix') { $fix = 1; }
	else { push @files, $arg; }
}
chdir "$FindBin::Bin/.." or die "cannot enter the repository: $!";
if (!@files)
{
	# the tracked files; in a copy without .git, every file of the folders
	my $list = `git ls-files src include 2>/dev/null`;
	$list = `find src include -type f` if $? != 0 || $list eq '';
	@files = sort grep { m{^(src|include)/.*\.[ch]$} } split /\n/, $list;
}
die "indent.pl: no C files found\n" unless @files;

my $indent = 'pg_bsd_indent';
system("$indent --version >/dev/null 2>&1") == 0
  or die "indent.pl: pg_bsd_indent not found (apt-get install pg-bsd-indent)\n";
my $typedefs = 'scripts/typedefs.list';

sub read_file
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "$path: $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

# What pg_bsd_indent makes of a file, as pgindent would leave it.
sub formatted
{
	my ($path) = @_;
	my ($fh, $out) = tempfile(UNLINK => 1);
	close $fh;
	my $status = system($indent, @INDENT_OPTIONS, "-U$typedefs", $path, $out);
	die "indent.pl: pg_bsd_indent failed on $path\n" if $status != 0;
	my $text = read_file($out);

	# "char\t   *" alone on a line is a function's return type: "char *"
	$text =~ s/^((?:\w+ )*\w+)[\t ]+(\*+)$/$1 $2/mg;
	return $text;
}

my $differing = 0;
for my $path (@files)
{
	my $before = read_file($path);
	my $after = formatted($path);
	next if $before eq $after;
	$differing++;
	if ($fix)
	{
		open(my $fh, '>', $path) or die "$path: $!";
		print $fh $after;
		close $fh;
		print "reformatted $path\n";
		next;
	}
	my ($fh, $tmp) = tempfile(UNLINK => 1);
	print $fh $after;
	close $fh;
	system('diff', '-u', '--label', "$path", '--label', "$path (pgindent)",
		$path, $tmp);
}
if (!$fix && $differing)
{
	print STDERR "indent.pl: $differing file(s) differ from PostgreSQL's layout; "
	  . "run perl scripts/indent.pl --fix\n";
	exit 1;
}
exit 0;
