#!/usr/bin/perl
#
# typedefs.pl — the typedefs list pg_bsd_indent needs (scripts/indent.pl).
#
#   perl scripts/typedefs.pl > scripts/typedefs.list
#
# pg_bsd_indent must know which words name types to lay out declarations
# ("Datum *values", not "Datum * values").  PostgreSQL builds its list from
# debug symbols; an extension only needs the names it uses, so this reads
# the typedef declarations of the PostgreSQL server headers, of libcurl,
# libxml2, OpenSSL and zstd and of our own tree, and adds the libc types we
# use.  The list is
# checked in, so that the format check gives the same answer on every
# machine; regenerate it when a new type appears.
use strict;
use warnings;
use File::Find;

my $pg_includedir = `pg_config --includedir-server`;
chomp $pg_includedir;
my @dirs = grep { -e $_ } ($pg_includedir, glob('/usr/include/curl /usr/include/*/curl'),
	'/usr/include/libxml2/libxml', '/usr/include/openssl',
	'/usr/include/zstd.h', 'include', 'src');

# libc and compiler types our sources use
my %names = map { $_ => 1 } qw(size_t ssize_t FILE off_t pid_t time_t mode_t
  va_list DIR uint8_t uint16_t uint32_t uint64_t int8_t int16_t int32_t int64_t
  socklen_t);

sub add_typedefs
{
	my ($text) = @_;

	$text =~ s{/\*.*?\*/}{}gs;
	$text =~ s{//[^\n]*}{}g;
	while ($text =~ /\btypedef\b/g)
	{
		my $start = pos($text);
		my ($depth, $i, $body) = (0, $start, '');

		# the declaration up to its ';', without the bodies of { ... }
		for (; $i < length $text; $i++)
		{
			my $c = substr($text, $i, 1);
			$depth++ if $c eq '{';
			$body .= $c if $depth == 0;
			$depth-- if $c eq '}';
			last if $c eq ';' && $depth == 0;
		}
		pos($text) = $i;
		$body =~ s/;$//;
		if ($body =~ /\(\s*\*?\s*(\w+)\s*\)\s*\(/)
		{
			$names{$1} = 1;    # a function or function-pointer type
		}
		else
		{
			$body =~ s/(\s*\[[^\]]*\])+\s*$//;
			$body =~ s/\b__attribute__\s*\(\(.*\)\)\s*$//s;
			$body =~ s/\bpg_attribute_\w+(\([^)]*\))?\s*$//;
			$names{$1} = 1 if $body =~ /(\w+)\s*$/;
		}
	}
}

find(
	{
		no_chdir => 1,
		wanted => sub {
			return unless /\.[ch]$/ && -f $_;
			open(my $fh, '<', $_) or die "$_: $!";
			local $/;
			add_typedefs(<$fh>);
			close $fh;
		}
	},
	@dirs);

print "$_\n" for sort keys %names;
