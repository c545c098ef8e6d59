
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 011_fuzz_segments.pl — random damage to segments never crashes a backend
# (DESIGN.md §4, §11.6).  A seeded generator mutates a generation, a WAL
# entry and a generation with compression dictionaries (format version 4)
# many times (bit flips, random bytes, overwritten runs, truncation,
# insertion, extension); after each mutation a scan (and, for the last, a
# lookup of one key, which decodes single rows of pages) must either fail
# with "data corrupted" (XX001) naming the object, or, when the mutation
# changed nothing that is read, return exactly the original result.  Set
# ROLLOUT_FUZZ_ITERATIONS and ROLLOUT_FUZZ_SEED to run longer or elsewhere;
# by default 150 iterations on file://, 40 on S3 and Azure (every mutation is
# a PUT and a scan through the emulator), 1000 with ROLLOUT_TEST_LONG=1.  The
# default seed differs between the plain and the preloaded run, so that the
# two file:// runs of the matrix try 300 different mutations per object.
#
# With the shared-memory writer (preload) the claim's fence marker takes
# position 1, so the unflushed entry is position 3; and scans on the writing
# cluster read unflushed rows from the memtable, not from the WAL object.  So
# that the WAL entry's bytes are what the scans decode, the node is restarted
# after the insert: until a commit claims the shard again, scans read the
# WAL tail from the store, as in plain mode.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(preload mode_node loop_size);
use Test::More;

my $pre = preload();

my $iterations = $ENV{ROLLOUT_FUZZ_ITERATIONS}
  // loop_size(file => 150, remote => 40, long => 1000);
my $seed = $ENV{ROLLOUT_FUZZ_SEED} // 20261129 + $pre;
note "seed $seed, $iterations iterations per object";

my $node = mode_node('fuzz');

# the object store of the backend under test (ROLLOUT_TEST_BACKEND)
my $store = RolloutStore->for_test('011_fuzz_segments');
$store->create_extension_and_server($node);
$node->safe_psql(
	'postgres', qq{
CREATE FOREIGN TABLE t (id text, n int, f float8, ts timestamptz, payload jsonb, note text)
  SERVER s OPTIONS (store 'fuzzed');
SET rollout_fdw.rows_per_group = 50;
SET rollout_fdw.page_size = 1;  -- 1 kB: payload and note chunks of several pages
INSERT INTO t SELECT 'k' || lpad(g::text, 4, '0'), g, g / 3.0, '2026-01-01'::timestamptz + g * interval '1 minute',
                     jsonb_build_object('g', g, 'tags', jsonb_build_array('a', g % 7)),
                     CASE WHEN g % 5 = 0 THEN NULL ELSE repeat('x', g % 40) END
FROM generate_series(1, 300) g;
});
$node->safe_psql('postgres', "SELECT rollout_flush('t')");
$node->safe_psql('postgres',
	"SET rollout_fdw.rows_per_group = 20; INSERT INTO t SELECT 'w' || g, g, NULL, NULL, NULL, 'tail' FROM generate_series(1, 60) g");

# a store whose generation has compression dictionaries: long, wordy text
$node->safe_psql(
	'postgres', q{
CREATE FOREIGN TABLE d (id int, doc text, n int) SERVER s OPTIONS (store 'fuzzed_dict');
SET rollout_fdw.rows_per_group = 200;
SET rollout_fdw.page_size = 1;
SET rollout_fdw.dictionary_size = 1;
INSERT INTO d SELECT g, string_agg(w, ' '), g % 7
FROM generate_series(1, 600) g,
     LATERAL (SELECT (ARRAY['rollout', 'step', 'reward', 'agent', 'tool', 'call'])[1 + (g * k) % 6] AS w
              FROM generate_series(1, 20 + g % 30) k) words
GROUP BY g;
SELECT rollout_flush('d');
});
my $dict_query = q{SELECT count(*), sum(n), md5(string_agg(doc, ',' ORDER BY id)) FROM d};
my $dict_lookup = q{SELECT md5(doc), n FROM d WHERE id = 457};
my $dict_original = $node->safe_psql('postgres', $dict_query);
my $dict_lookup_original = $node->safe_psql('postgres', $dict_lookup);

my $query = q{SELECT count(*), sum(n), md5(string_agg(id || coalesce(payload::text, '') || coalesce(note, ''), ',' ORDER BY id)) FROM t};
my $original = $node->safe_psql('postgres', $query);
if ($pre)
{
	$node->stop;
	$node->start;
	is($node->safe_psql('postgres', $query), $original,
		'after a restart the same rows, the tail now read from the WAL object');
}

my ($dict_generation) = grep { /\.seg$/ } $store->list('fuzzed_dict/');
ok(defined $dict_generation, 'a generation with dictionaries to damage');
is(unpack('V', substr($store->get($dict_generation), 4, 4)), 4,
	'it is of format version 4 (a column got a dictionary)');

my @objects = $store->list('fuzzed/');
my @generations = grep { /\.seg$/ } @objects;
my @wal = grep { /\.wal$/ } @objects;
is(scalar(@generations), 1, 'one generation to damage');
# the flushed entry is still stored (gc has not run); damage the unflushed one
@wal = (sort @wal)[-1];
my $tail_position = $pre ? 3 : 2;
like($wal[0], qr/\/0*$tail_position\.wal$/, "the unflushed WAL entry is position $tail_position");

sub mutate
{
	my ($bytes) = @_;
	my $len = length($bytes);
	my $kind = int(rand(7));
	my $at = int(rand($len));
	if ($kind == 0)    # flip one bit
	{
		substr($bytes, $at, 1) = chr(ord(substr($bytes, $at, 1)) ^ (1 << int(rand(8))));
	}
	elsif ($kind == 1)    # a few random bytes
	{
		substr($bytes, int(rand($len)), 1) = chr(int(rand(256))) for 1 .. 1 + int(rand(8));
	}
	elsif ($kind == 2)    # overwrite a run with 0x00 or 0xff
	{
		my $run = 1 + int(rand(64));
		$run = $len - $at if $at + $run > $len;
		substr($bytes, $at, $run) = (rand() < 0.5 ? "\0" : "\xff") x $run;
	}
	elsif ($kind == 3)    # truncate
	{
		$bytes = substr($bytes, 0, $at);
	}
	elsif ($kind == 4)    # insert random bytes
	{
		substr($bytes, $at, 0) = join('', map { chr(int(rand(256))) } 1 .. 1 + int(rand(16)));
	}
	elsif ($kind == 5)    # append garbage
	{
		$bytes .= join('', map { chr(int(rand(256))) } 1 .. 1 + int(rand(32)));
	}
	else    # a plausible little-endian length in the trailer or anywhere
	{
		my $where = rand() < 0.5 ? $len - 8 : $at;
		$where = 0 if $where < 0;
		substr($bytes, $where, 4) = pack('V', int(rand(2**32)));
	}
	return $bytes;
}

# Seeded here, after the set-up: creating the store draws random numbers (a
# temporary directory, a remote prefix), differently on each backend, and a
# seed should give the same mutations on all of them.
srand($seed);
for my $key ($generations[0], $wal[0], $dict_generation)
{
	my $name = $key =~ /\.wal$/ ? 'WAL entry'
	  : $key eq $dict_generation ? 'generation with dictionaries' : 'generation';
	my @checks = $key eq $dict_generation
	  ? ([ $dict_query, $dict_original ], [ $dict_lookup, $dict_lookup_original ])
	  : ([ $query, $original ]);
	my $pristine = $store->get($key);
	my ($corrupt, $same, $other) = (0, 0, 0);
	for my $i (1 .. $iterations)
	{
		my ($sql, $want) = @{ $checks[ $i % scalar(@checks) ] };

		$store->put($key, mutate($pristine));
		my ($ret, $out, $err) = $node->psql('postgres', $sql,
			extra_params => [ '-v', 'VERBOSITY=verbose' ]);
		if ($ret != 0 && $err =~ /XX001/ && $err =~ /fuzzed/) { $corrupt++ }
		elsif ($ret == 0 && $out eq $want) { $same++ }
		else
		{
			$other++;
			diag "$name mutation $i: ret=$ret out=$out err=$err";
		}
	}
	$store->put($key, $pristine);
	is($other, 0, "$name: every mutation was rejected as corrupt ($corrupt) or harmless ($same)");
	# the damaged object was really read (in preload too: see the restart above)
	cmp_ok($corrupt, '>', $iterations / 4, "$name: most mutations were detected ($corrupt of $iterations)");
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$name: the server is up");
}

is($node->safe_psql('postgres', $query), $original, 'restored objects read as before');
is($node->safe_psql('postgres', $dict_query), $dict_original,
	'the restored generation with dictionaries reads as before');
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

$node->stop;
done_testing();
