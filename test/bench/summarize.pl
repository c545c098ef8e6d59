#!/usr/bin/perl
# summarize.pl — turn the raw figures of test/bench/run.sh into the results table.
#
#   perl summarize.pl WORKLOADS.tsv RAW.csv SUMMARY.csv > results-table.md
#
# WORKLOADS.tsv: one line per workload, in report order:
#   id <TAB> section <TAB> label <TAB> unit <TAB> better (higher|lower|none)
# RAW.csv: workload,table,run,value (table = heap or rollout; one line per run).
# Each figure is the median of its runs; the ratio is rollout / heap, and the
# "better" column says which direction of that ratio favours the rollout table.
use strict;
use warnings;

my ($wl_file, $raw_file, $sum_file) = @ARGV;
die "usage: summarize.pl WORKLOADS.tsv RAW.csv SUMMARY.csv\n" unless defined $sum_file;

my (@order, %meta, %vals);
open(my $wl, '<', $wl_file) or die "$wl_file: $!\n";
while (<$wl>) {
	chomp;
	next if $_ eq '';
	my ($id, $section, $label, $unit, $better) = split /\t/;
	next if exists $meta{$id};
	push @order, $id;
	$meta{$id} = { section => $section, label => $label, unit => $unit, better => $better };
}
close $wl;

open(my $raw, '<', $raw_file) or die "$raw_file: $!\n";
while (<$raw>) {
	chomp;
	next if /^workload,/;
	my ($id, $table, $run, $value) = split /,/;
	next unless defined $value && $value ne '';
	push @{ $vals{$id}{$table} }, $value;
}
close $raw;

sub median {
	my @v = sort { $a <=> $b } @_;
	return undef unless @v;
	my $n = @v;
	return $n % 2 ? $v[ ($n - 1) / 2 ] : ($v[ $n / 2 - 1 ] + $v[ $n / 2 ]) / 2;
}

sub fmt {
	my ($v) = @_;
	return '—' unless defined $v;
	my $a = abs($v);
	return sprintf('%.0f', $v) if $a >= 1000;
	return sprintf('%.1f', $v) if $a >= 100;
	return sprintf('%.2f', $v) if $a >= 1;
	return sprintf('%.3f', $v) if $a >= 0.01;
	return sprintf('%.4f', $v);
}

open(my $sum, '>', $sum_file) or die "$sum_file: $!\n";
print $sum "workload,section,label,unit,heap_median,rollout_median,ratio_rollout_over_heap,better,heap_runs,rollout_runs\n";
print "| workload | heap | rollout | rollout/heap |\n";
print "|---|--:|--:|---|\n";
my $section = '';
for my $id (@order) {
	my $m = $meta{$id};
	if ($m->{section} ne $section) {
		$section = $m->{section};
		print "| **$section** | | | |\n";
	}
	my $h = median(@{ $vals{$id}{heap} // [] });
	my $r = median(@{ $vals{$id}{rollout} // [] });
	my $ratio;
	$ratio = $r / $h if defined $h && defined $r && $h != 0;
	my $rtxt = defined $ratio ? sprintf('%.2f×', $ratio) : '—';
	if (defined $ratio && $m->{better} eq 'higher') {
		$rtxt .= ' (higher is better)';
	} elsif (defined $ratio && $m->{better} eq 'lower') {
		$rtxt .= ' (lower is better)';
	}
	my $hn = scalar @{ $vals{$id}{heap}    // [] };
	my $rn = scalar @{ $vals{$id}{rollout} // [] };
	printf "| %s (%s) | %s | %s | %s |\n", $m->{label}, $m->{unit}, fmt($h), fmt($r), $rtxt;
	(my $label_csv = $m->{label}) =~ s/[",]/ /g;
	(my $section_csv = $section) =~ s/[",]/ /g;
	printf $sum "%s,%s,%s,%s,%s,%s,%s,%s,%d,%d\n", $id, $section_csv, $label_csv, $m->{unit},
	  $h // '', $r // '', defined $ratio ? sprintf('%.4f', $ratio) : '', $m->{better}, $hn, $rn;
}
close $sum;
