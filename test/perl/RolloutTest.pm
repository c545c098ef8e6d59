
# Copyright (c) rollout_fdw authors
#
# RolloutTest.pm — helpers shared by the TAP tests in test/t.
#
# The suite runs in two modes (scripts/test.sh runs both):
#   plain    nothing preloaded: every committing transaction writes its own
#            WAL entry at the next position; scans read the WAL tail from the
#            store.
#   preload  ROLLOUT_TEST_PRELOAD=rollout_fdw puts the extension in
#            shared_preload_libraries: the shared-memory writer.  The first
#            commit after startup claims the shard (flushes the durable WAL
#            tail, commits a shard manifest with writer_epoch + 1, writes a
#            fence marker — a WAL entry without rows — at the next position);
#            later commits are group commits (one entry may carry several
#            transactions) and their rows are scanned from the memtable.
# Tests whose expectations differ between the modes by design ask preload()
# and state the expected value of each mode explicitly.
#
# Loaded with:  use FindBin; use lib "$FindBin::RealBin/../perl";

package RolloutTest;

use strict;
use warnings;

use Exporter 'import';
use JSON::PP;

our @EXPORT_OK = qw(preload configure_node slurp_bin write_bin
  segment_metadata wal_positions wal_entry wal_entries);

# True when the suite runs with the shared-memory writer.
sub preload
{
	return (($ENV{ROLLOUT_TEST_PRELOAD} // '') =~ /\brollout_fdw\b/) ? 1 : 0;
}

# postgresql.conf of a TAP node for the current mode.  With the extension
# preloaded its background sweeper would, by default, flush every 30 s and
# merge at 8 generations in database "postgres" — on its own schedule, which
# would make the positions, generations and versions these tests predict
# depend on timing.  The tests here are about the write and read protocols,
# so they switch the sweeper off (rollout_fdw.worker_databases = '').
sub configure_node
{
	my ($node) = @_;
	return unless $ENV{ROLLOUT_TEST_PRELOAD};
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = '$ENV{ROLLOUT_TEST_PRELOAD}'");
	$node->append_conf('postgresql.conf', "rollout_fdw.worker_databases = ''")
	  if preload();
	return;
}

sub slurp_bin
{
	my ($f) = @_;
	open(my $fh, '<:raw', $f) or return undef;
	local $/;
	my $b = <$fh>;
	close $fh;
	return $b // '';
}

sub write_bin
{
	my ($f, $b) = @_;
	open(my $fh, '>:raw', $f) or die "open $f: $!";
	print $fh $b;
	close $fh or die "close $f: $!";
	return;
}

# The caller metadata of a segment (docs/FORMAT.md): the last field of the
# footer body, a u32 length and the text, right before the footer CRC.
# Returns the decoded JSON, or undef when the bytes are not a segment with
# JSON metadata.
sub segment_metadata
{
	my ($b) = @_;
	return undef unless defined $b && length($b) >= 16;
	my $n = length($b);
	return undef unless substr($b, $n - 4, 4) eq 'ROSG';
	my $footer_length = unpack('V', substr($b, $n - 8, 4));
	return undef if $footer_length < 4 || $footer_length > $n - 16;
	my $body = substr($b, $n - 8 - $footer_length, $footer_length - 4);
	# the metadata is a JSON object at the very end of the body
	my $start = rindex($body, '{"kind"');
	return undef if $start < 5;
	my $len = unpack('V', substr($body, $start - 4, 4));
	return undef
	  unless $len == length($body) - $start && ord(substr($body, $start - 5, 1)) == 1;
	my $doc = eval { decode_json(substr($body, $start)) };
	return $doc;
}

# Positions of the WAL entries (and fence markers) in a shard's wal/ folder.
sub wal_positions
{
	my ($dir) = @_;
	return () unless opendir(my $dh, $dir);
	my @p = sort { $a <=> $b }
	  map { /^(\d{20})\.wal$/ ? $1 + 0 : () } readdir($dh);
	closedir($dh);
	return @p;
}

# The metadata of the WAL entry at position $p ({kind, shard, epoch, stamp,
# put_id, transactions, ingest}), or undef if unreadable.
sub wal_entry
{
	my ($dir, $p) = @_;
	return segment_metadata(slurp_bin(sprintf('%s/%020d.wal', $dir, $p)));
}

# [position, metadata] of every entry in the folder, in position order.
sub wal_entries
{
	my ($dir) = @_;
	return map { [ $_, wal_entry($dir, $_) ] } wal_positions($dir);
}

1;
