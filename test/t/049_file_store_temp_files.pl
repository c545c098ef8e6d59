
# Copyright (c) rollout_fdw authors
#
# 049_file_store_temp_files.pl — the file:// store writes each object
# through an unnamed temporary file (O_TMPFILE, linked to its key with
# linkat through /proc) where it can, and through a named one in the
# store's _tmp/ folder otherwise; rollout_fdw.file_unnamed_temp_files = off
# forces the named files (objstore/file_store.c).  Both ways:
#
#   1. a large commit, a flush and a merge write their objects, and every
#      row reads back; while they write, a watcher lists _tmp/ every few
#      milliseconds: with unnamed files no object's name ever appears there
#      (only, for an instant, the name each process links its first unnamed
#      file to, to learn whether linking works), with named files the
#      object's temporary name does (which proves that the
#      setting switches the path, and that the watcher would see a name);
#   2. 16 concurrent first inserts into an empty store all commit, each WAL
#      position taken exactly once: the link is the create-if-absent either
#      way;
#   3. _tmp/ is empty afterwards.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use IPC::Run;
use Time::HiRes qw(sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node contiguous run_concurrently pump_if_running);
use Test::More;

my $node = mode_node('tempfiles');
my $store = RolloutStore->for_test('049_temp_files', backend => 'file');
$store->create_extension_and_server($node);
my $tmp = $store->dir . '/_tmp';

# Names in _tmp/ now.
sub temp_names
{
	opendir(my $dh, $tmp) or return ();
	my @names = grep { !/^\.\.?$/ } readdir($dh);
	closedir($dh);
	return @names;
}

# Run $sql with the setting in a psql of its own while listing _tmp/ every
# 2 ms; returns (psql's exit code, its stderr, the names seen).
sub run_watched
{
	my ($setting, $sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', "SET rollout_fdw.file_unnamed_temp_files = $setting", '-c', $sql ],
		'>', \$out, '2>', \$err);
	my %seen;
	do
	{
		$seen{$_} = 1 for temp_names();
		sleep(0.002);
	} while (pump_if_running($h));
	$h->finish;
	return ($h->full_result(0) >> 8, $err, sort keys %seen);
}

# Rows of about 300 bytes that compress little: an entry of 300,000 of them
# takes long enough to write that the watcher lists _tmp/ many times.
my $rows = 300_000;
my $value = q{md5(g::text) || md5((g + 1)::text) || md5((g + 2)::text) || md5((g + 3)::text)
  || md5((g + 4)::text) || md5((g + 5)::text) || md5((g + 6)::text) || md5((g + 7)::text)};

for my $setting ('on', 'off')
{
	my $t = "t_$setting";
	$node->safe_psql('postgres',
		"CREATE FOREIGN TABLE $t (id int, v text) SERVER s OPTIONS (store '$t', key 'id')");

	# 1. a large commit, a flush and a merge
	my ($rc, $err, @commit_names) = run_watched($setting,
		"INSERT INTO $t SELECT g, $value FROM generate_series(1, $rows) g");
	is($rc, 0, "$setting: the large commit succeeds") or diag($err);
	my @maintenance_names;
	for my $step ("SELECT rollout_flush('$t')", "SELECT rollout_merge('$t')")
	{
		($rc, $err, my @names) = run_watched($setting, $step);
		is($rc, 0, "$setting: $step succeeds") or diag($err);
		push @maintenance_names, @names;
	}
	is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT id), sum(length(v)) FROM $t"),
		"$rows|$rows|" . ($rows * 256), "$setting: every row reads back");
	is($node->safe_psql('postgres', "SELECT generations, fragments FROM rollout_observe('$t')"),
		'0|1', "$setting: the rows went through a generation into a base fragment");
	if ($setting eq 'on')
	{
		# A process's first unnamed file is linked once to a "<pid>.probe.*"
		# name and unlinked again, to learn whether linking through /proc
		# works; only that name may flash by, never an object's own.
		is_deeply([ grep { !/^\d+\.probe\.[0-9a-f]{8}\.tmp$/ } @commit_names, @maintenance_names ], [],
			'on: no temporary name ever appeared in _tmp/ while the objects were written');
	}
	else
	{
		# The name lives while the segment is copied; a watcher descheduled
		# on a loaded machine can miss that once: up to two more large
		# commits before concluding.
		my @named = grep { /\.tmp$/ } @commit_names;
		for my $again (1 .. 2)
		{
			last if @named;
			($rc, $err, my @names) = run_watched($setting,
				"INSERT INTO $t SELECT g + $again * $rows, $value FROM generate_series(1, $rows) g");
			is($rc, 0, "$setting: another large commit succeeds") or diag($err);
			@named = grep { /\.tmp$/ } @names;
		}
		ok(scalar(@named), 'off: the commit\'s temporary file had a name in _tmp/ while it was written')
		  or diag("seen: @commit_names");
	}

	# 2. concurrent first inserts into an empty store
	my $race = "race_$setting";
	$node->safe_psql('postgres',
		"CREATE FOREIGN TABLE $race (id int, v int) SERVER s OPTIONS (store '$race', key 'id')");
	my ($failed, @errors) = run_concurrently($node,
		[ map { "SET rollout_fdw.file_unnamed_temp_files = $setting; INSERT INTO $race VALUES ($_, $_)" } 1 .. 16 ]);
	diag(join('', @errors)) if $failed;
	is($failed, 0, "$setting: 16 concurrent first inserts all commit");
	is($node->safe_psql('postgres', "SELECT count(*), sum(v) FROM $race"), '16|136',
		"$setting: no row lost or doubled");
	my @pos = RolloutStore::wal_positions_of($store->list("$race/shards/"));
	ok(@pos && contiguous(@pos), "$setting: the WAL holds positions 1..N, each once") or diag("@pos");

	# 3. nothing left behind
	is_deeply([ temp_names() ], [], "$setting: _tmp/ is empty afterwards");
}

done_testing();
