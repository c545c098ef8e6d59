#!/usr/bin/perl
#
# check_test_modes.pl — the "# Modes: preload" marks of the TAP tests, checked.
#
#   perl scripts/check_test_modes.pl
#
# In the whole matrix, a plain run leaves the TAP tests marked
# "# Modes: preload" to the same backend's preloaded run (scripts/test.sh).
# That is right only for a test whose clusters do not depend on the run's
# mode, so this fails on
#   - a marked test that asks for the run's mode (mode_node, configure_node,
#     preload(), ROLLOUT_TEST_PRELOAD): its plain half would never run;
#   - a test that builds its clusters with writer_node only and is not
#     marked: it would run twice, the same both times;
#   - a test marked "# Remote modes: plain" that is not "# Backends: all"
#     or is marked "# Modes: preload": the mark would mean nothing.
# Prints one line per finding and a summary; exit status 1 on any finding.
use strict;
use warnings;
use FindBin;

chdir "$FindBin::Bin/.." or die "cannot enter the repository: $!";

my @findings;
my @tests = sort glob('test/t/*.pl');
for my $test (@tests)
{
	open(my $fh, '<', $test) or die "$test: $!";
	my $text = do { local $/; <$fh> };
	close $fh;
	my $marked = $text =~ /^# Modes: preload\b/m;
	(my $code = $text) =~ s/^\s*#.*$//mg;
	my $asks_mode = $code =~ /\b(?:mode_node|configure_node)\s*\(|\bpreload\b(?!\s*=>)|ROLLOUT_TEST_PRELOAD/;
	my $writer_nodes = $code =~ /\bwriter_node\s*\(/;
	push @findings, "$test: marked \"# Modes: preload\" but depends on the run's mode"
	  if $marked && $asks_mode;
	push @findings, "$test: builds its clusters with writer_node only; mark it \"# Modes: preload\""
	  if $writer_nodes && !$asks_mode && !$marked;
	# "# Remote modes: plain" leaves a test out of the remote preloaded runs:
	# meaningful only for a test that runs on the remote backends in both
	push @findings, "$test: marked \"# Remote modes: plain\" but not \"# Backends: all\" or marked \"# Modes: preload\""
	  if $text =~ /^# Remote modes: plain\b/m
	  && ($marked || $text !~ /^# Backends: all\b/m);
}
print "$_\n" for @findings;
printf "check_test_modes: %d tests, %d findings\n", scalar(@tests), scalar(@findings);
exit(@findings ? 1 : 0);
