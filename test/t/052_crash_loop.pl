
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 052_crash_loop.pl — hard kills under load lose no acknowledged row and
# duplicate none (DESIGN.md §6; docs/WRITER.md).
#
# A preloaded cluster with restart_after_crash = on, its sweeper flushing
# every second and merging every three generations, and pipelined WAL writes
# (the default depth).  Each round, eight sessions commit single-row
# transactions as fast as they can, each printing the id of every commit
# that returned success; one to two seconds after the round's first
# acknowledgement a backend is killed with SIGKILL (a committing one, or the
# sweeper), so the postmaster resets shared memory (the memtable with it)
# and every session loses its connection, some in the middle of a commit.
# After the last round:
#   - every acknowledged id is there exactly once, also after a flush and a
#     clean restart;
#   - nothing else is there but ids some session tried (a commit cut by the
#     kill may or may not have landed: its outcome was unknown to its
#     client, as with PostgreSQL's own tables);
#   - no key has two versions (count = count of distinct ids).
# ROLLOUT_TEST_LONG=1 runs 40 rounds instead of 4 (2 on S3 and Azure, whose
# PUTs take long enough for the pipeline to have several in flight; on
# file:// it overlaps only PUTs that stall).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node loop_size pump_if_running);
use IPC::Run ();
use Time::HiRes ();
use Test::More;

my $WRITERS = 8;
my $ROUNDS = loop_size(file => 4, remote => 2, long => 40);

my $node = writer_node('crashloop',
	max_connections => 40,
	restart_after_crash => 'on',
	'rollout_fdw.flush_interval' => '1s',
	'rollout_fdw.merge_after_generations' => 3);
my $store = RolloutStore->for_test('052_crash_loop');
$store->create_extension_and_server($node);
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t (id text, w int, payload text) SERVER s OPTIONS (store 'crashloop', key 'id')});
my $scripts = PostgreSQL::Test::Utils::tempdir('scripts');

my (%acked, %tried, %failed);

# The script of writer $w in round $r: single-row commits, each followed by
# its id on stdout: "ack" when it succeeded, "fail" with the SQLSTATE when it
# failed with an error (psql's ERROR and LAST_ERROR_SQLSTATE).  A lost
# connection ends psql.
sub writer_script
{
	my ($r, $w) = @_;
	my $path = "$scripts/r$r-w$w.sql";
	open(my $fh, '>', $path) or die "open $path: $!";
	for my $i (1 .. 20000)
	{
		my $id = "r$r-w$w-$i";
		print $fh "INSERT INTO t VALUES ('$id', $w, repeat('x', 200));\n"
		  . "\\if :ERROR\n\\echo fail :LAST_ERROR_SQLSTATE $id\n\\else\n\\echo ack $id\n\\endif\n";
	}
	close $fh;
	return $path;
}

# Whether the node accepts connections within 60 s.  A psql refused while
# the cluster still recovers may exit before it reads the query from its
# stdin, which IPC::Run reports by dying ("Broken pipe"): that is a "not yet".
sub wait_ready
{
	for (1 .. 600)
	{
		my $ret = eval { ($node->psql('postgres', 'SELECT 1'))[0] };
		return 1 if defined $ret && $ret == 0;
		Time::HiRes::usleep(100_000);
	}
	return 0;
}

# Seconds until one of the round's sessions printed an acknowledgement (or
# all of them ended, or three minutes passed).
sub wait_first_ack
{
	my ($runs) = @_;
	my $start = Time::HiRes::time();
	while (Time::HiRes::time() - $start < 180)
	{
		my $running = 0;
		for my $run (@$runs)
		{
			$running++ if pump_if_running($run->{h});
			return Time::HiRes::time() - $start if $run->{out} =~ /^ack /m;
		}
		last unless $running;
		Time::HiRes::usleep(20_000);
	}
	return Time::HiRes::time() - $start;
}

my $kills = 0;
for my $r (1 .. $ROUNDS)
{
	my @runs;
	for my $w (1 .. $WRITERS)
	{
		my $run = { out => '', err => '', path => writer_script($r, $w) };
		$run->{h} = IPC::Run::start(
			[ 'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres'), '-f', $run->{path} ],
			'>', \$run->{out}, '2>', \$run->{err});
		push @runs, $run;
	}
	# The first commit after a crash waits for the shard claim, which first
	# flushes the WAL tail the crash left (DESIGN.md §8): on a loaded machine
	# and a remote store, seconds.  The kill comes one to two seconds after
	# the round's first acknowledgement.
	my $waited = wait_first_ack(\@runs);
	note(sprintf('round %d: first acknowledgement after %.1f s', $r, $waited));
	Time::HiRes::sleep(1 + rand(1));

	# a committing backend most rounds, the sweeper every third
	my $victim_sql = $r % 3 == 0
	  ? q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'rollout_fdw sweeper' LIMIT 1}
	  : q{SELECT pid FROM pg_stat_activity WHERE query LIKE 'INSERT INTO t %' AND state = 'active' ORDER BY random() LIMIT 1};
	my $victim = $node->safe_psql('postgres', $victim_sql);
	$victim = $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE query LIKE 'INSERT INTO t %' ORDER BY random() LIMIT 1})
	  if $victim eq '';
	ok($victim =~ /^\d+$/, "round $r: a backend to kill ($victim)");
	kill 'KILL', $victim;
	$kills++;

	my $round_acked = 0;
	my %round_failed;
	for my $run (@runs)
	{
		$run->{h}->finish;
		$round_failed{$_}++ for $run->{out} =~ /^fail (\w+) /mg;
		for my $line (split /\n/, $run->{out})
		{
			# a failure whose outcome is unknown (08007) may have landed
			$failed{$2} = $1 if $line =~ /^fail (\w+) (\S+)$/ && $1 ne '08007';
			next unless $line =~ /^ack (\S+)$/;
			$acked{$1}++;
			$round_acked++;
		}
		# what a session tried: up to the first id it did not acknowledge
		my ($r0, $w0) = $run->{path} =~ m{/r(\d+)-w(\d+)\.sql$};
		my ($last) = reverse grep { /^(?:ack|fail \w+) / } split /\n/, $run->{out};
		my $n = defined $last && $last =~ /-(\d+)$/ ? $1 : 0;
		$tried{"r$r0-w$w0-$_"} = 1 for 1 .. $n + 1;
	}
	cmp_ok($round_acked, '>', 0, "round $r: commits were acknowledged before the kill ($round_acked)")
	  or diag('failed commits by SQLSTATE: ' . join(', ', map { "$_ $round_failed{$_}" } sort keys %round_failed)
		  . "\nfirst session's stderr: " . substr($runs[0]{err}, 0, 2000));
	note("round $r: $round_acked acknowledged, failed: "
		  . join(', ', map { "$_ $round_failed{$_}" } sort keys %round_failed));
	ok(wait_ready(), "round $r: the cluster is back after the crash");
}

is(scalar(grep { $acked{$_} > 1 } keys %acked), 0, 'no id was acknowledged twice');

# Each acknowledged id present once; nothing present that nobody tried.
sub check_rows
{
	my ($label) = @_;
	my %present;
	my $dups = 0;
	for my $id (split /\n/, $node->safe_psql('postgres', 'SELECT id FROM t'))
	{
		$dups++ if $present{$id}++;
	}
	is($dups, 0, "$label: no id is returned twice");
	my @lost = grep { !$present{$_} } keys %acked;
	is(scalar(@lost), 0, "$label: every one of " . scalar(keys %acked) . ' acknowledged rows is there')
	  or diag('lost: ' . join(', ', (sort @lost)[ 0 .. ($#lost < 9 ? $#lost : 9) ]));
	my @stray = grep { !$tried{$_} } keys %present;
	is(scalar(@stray), 0, "$label: nothing is there that no session tried")
	  or diag('stray: ' . join(', ', (sort @stray)[ 0 .. ($#stray < 9 ? $#stray : 9) ]));
	my @failed_present = grep { $present{$_} } keys %failed;
	is(scalar(@failed_present), 0,
		"$label: none of the " . scalar(keys %failed) . ' commits that failed with an error is there')
	  or diag(join(', ', map { "$_ ($failed{$_})" } @failed_present));
	is($node->safe_psql('postgres', 'SELECT count(*) = count(DISTINCT id) FROM t'), 't',
		"$label: one version per key");
	return;
}

check_rows("after $kills kills");
is($node->safe_psql('postgres', q{SELECT count(*) FROM rollout_flush('t')}), '1', 'a flush');
$node->restart;
check_rows('after a flush and a clean restart');

done_testing();
