#!/usr/bin/perl
#
# check_layers.pl — the include rules of docs/ARCHITECTURE.md, checked.
#
#   perl scripts/check_layers.pl
#
# Reads the layer table of docs/ARCHITECTURE.md (the rows between the
# "layer table" markers: rank, layer, directory, public headers) and every
# #include "..." of src/ and include/rollout/.  It fails on
#   - an upward include: a file including a public header of a layer of a
#     higher rank, or of another layer of the same rank;
#   - a private header (a header of src/, included as "x.h") of another
#     directory;
#   - a public header that the table does not place in exactly one layer;
#   - a cycle of includes between modules (a module is a .c file and its
#     public header of the same name), within a layer too.
# PostgreSQL's and the system's headers are not checked.
# Prints one line per finding and a summary; exit status 1 on any finding.
use strict;
use warnings;
use File::Find;
use FindBin;

chdir "$FindBin::Bin/.." or die "cannot enter the repository: $!";

# --- the layer table -------------------------------------------------------
my (%rank_of_layer, %layer_of_dir, %layer_of_header, @findings);
{
	open(my $fh, '<', 'docs/ARCHITECTURE.md') or die "docs/ARCHITECTURE.md: $!";
	my $inside = 0;
	while (my $line = <$fh>)
	{
		$inside = 1, next if $line =~ /<!-- layer table -->/;
		last if $line =~ /<!-- end of layer table -->/;
		next unless $inside && $line =~ /^\|\s*(\d+)\s*\|/;
		my (undef, $rank, $layer, $dir, $headers) = split /\s*\|\s*/, $line;
		$dir =~ s/`//g;
		$rank_of_layer{$layer} = $rank;
		$layer_of_dir{$dir} = $layer;
		for my $h (split /[\s,]+/, $headers // '')
		{
			$h =~ s/`//g;
			next unless $h =~ /\.h$/;
			push @findings, "table: $h is listed in $layer_of_header{$h} and $layer"
			  if exists $layer_of_header{$h};
			$layer_of_header{$h} = $layer;
		}
	}
	close $fh;
	die "check_layers.pl: no layer table in docs/ARCHITECTURE.md\n"
	  unless %layer_of_dir;
}

# The layer of a file, by its directory (src/<dir>/... or a file of src/).
sub layer_of_file
{
	my ($path) = @_;
	if ($path =~ m{^include/rollout/([^/]+\.h)$})
	{
		return $layer_of_header{$1};
	}
	return $layer_of_dir{$path} if exists $layer_of_dir{$path};
	return $layer_of_dir{$1} if $path =~ m{^(src/[^/]+)/} && exists $layer_of_dir{$1};
	return undef;
}

# --- the files ---------------------------------------------------------------
my @files;
find({ no_chdir => 1, wanted => sub { push @files, $_ if /\.[ch]$/ && -f $_ } },
	'src', 'include/rollout');
@files = sort map { s{^\./}{}r } @files;

for my $h (map { m{^include/rollout/(.*)$} ? $1 : () } @files)
{
	push @findings, "table: include/rollout/$h is in no layer of the table"
	  unless exists $layer_of_header{$h};
}

# the private headers: those of src/ (their names; one directory each)
my %private_headers = map { m{([^/]+)$}; ($1 => $_) } grep { m{^src/.*\.h$} } @files;

# module -> { module it includes }, by public headers only: a private header
# belongs to its directory's implementation, checked by the rule above
my %graph;
for my $path (@files)
{
	my $layer = layer_of_file($path);
	if (!defined $layer)
	{
		push @findings, "table: $path is in no layer's directory"
		  unless $path =~ m{^include/rollout/};    # reported above
		next;
	}
	my ($module) = $path =~ m{([^/]+)\.[ch]$};
	open(my $fh, '<', $path) or die "$path: $!";
	while (my $line = <$fh>)
	{
		next unless $line =~ /^\s*#\s*include\s+"([^"]+)"/;
		my $inc = $1;
		if ($inc =~ m{^rollout/([^/]+\.h)$})
		{
			my $header = $1;
			my $to = $layer_of_header{$header};
			next unless defined $to;    # reported above
			my ($target) = $header =~ /^(.*)\.h$/;
			$graph{$module}{$target} = 1 if $target ne $module;
			next if $to eq $layer;
			if ($rank_of_layer{$to} >= $rank_of_layer{$layer})
			{
				push @findings,
				  "upward: $path ($layer) includes rollout/$header ($to)";
			}
		}
		else
		{
			# PostgreSQL's and the system's headers are not ours to check
			my ($base) = $inc =~ m{([^/]+)$};
			next unless exists $private_headers{$base};
			my $dir = $path =~ m{^(.*)/[^/]+$} ? $1 : '.';
			push @findings,
			  "private: $path includes \"$inc\" of another directory"
			  unless $inc !~ m{/} && -f "$dir/$inc";
		}
	}
	close $fh;
}

# --- cycles between modules (Tarjan's strongly connected components) -------
my (%index, %low, %on_stack, @stack, @cycles);
my $counter = 0;
sub visit
{
	my ($v) = @_;
	$index{$v} = $low{$v} = $counter++;
	push @stack, $v;
	$on_stack{$v} = 1;
	for my $w (sort keys %{ $graph{$v} // {} })
	{
		if (!exists $index{$w})
		{
			visit($w);
			$low{$v} = $low{$w} if $low{$w} < $low{$v};
		}
		elsif ($on_stack{$w})
		{
			$low{$v} = $index{$w} if $index{$w} < $low{$v};
		}
	}
	if ($low{$v} == $index{$v})
	{
		my @component;
		while (1)
		{
			my $w = pop @stack;
			delete $on_stack{$w};
			push @component, $w;
			last if $w eq $v;
		}
		push @cycles, [ sort @component ] if @component > 1;
	}
}
visit($_) for grep { !exists $index{$_} } sort keys %graph;
push @findings, 'cycle: ' . join(' <-> ', @$_) for @cycles;

print "$_\n" for @findings;
printf "layers: %d files, %d findings\n", scalar @files, scalar @findings;
exit(@findings ? 1 : 0);
