
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
# Remote modes: plain  (reads through the store, the same whatever the writer; scripts/test.sh)
#
# 036_zone_maps.pl — a scan skips the row groups whose column statistics
# rule out its pushed conditions, but only where no older version of their
# keys lies elsewhere (read/merge_iterator.c, merge_read_plan_zone_maps):
#   (a) adversarial versions at every step between two base fragments, two
#       generations, the unflushed tail (WAL entries or the memtable) and the
#       transaction's own rows: keys whose old version matches and whose new
#       one, in a row group the statistics rule out, does not (skipping that
#       group would bring the old one back), and the reverse; every
#       condition answers as a heap holding the newest versions does, with
#       zone maps on and off;
#   (b) skipping happens where it is safe: the oldest fragment's row groups
#       (every other source is newer), and a compacted store's; EXPLAIN
#       ANALYZE counts them (Skipped by Zone Map), and with
#       rollout_fdw.use_zone_maps off nothing is skipped;
#   (c) operators whose order is not the statistics' (text under a
#       non-"C" collation) are still answered right, and equality under a
#       deterministic collation does use the statistics.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node foreign_scan_of);
use Test::More;

my $node = mode_node('zone_maps', conf => ['rollout_fdw.rows_per_group = 20']);
my $store = RolloutStore->for_test('036_zone_maps');
$store->create_extension_and_server($node);

my $columns = 'id int, c int, name text, pad text';
$node->safe_psql('postgres', qq{
CREATE FOREIGN TABLE z ($columns) SERVER s OPTIONS (store 'zm', key 'id');
CREATE TABLE o ($columns, PRIMARY KEY (id));});

sub write_rows
{
	my ($rows, $then) = @_;
	my $values = join(",\n", @$rows);
	return qq{
INSERT INTO z VALUES $values;
INSERT INTO o VALUES $values ON CONFLICT (id) DO UPDATE SET
  c = excluded.c, name = excluded.name, pad = excluded.pad;
} . ($then // '');
}

# background rows: c follows the key, so each row group has a narrow range
sub background
{
	my ($round, $from, $to) = @_;
	return map {
		my $name = $_ % 7 == 0 ? 'NULL' : sprintf(q{'n%04d'}, $_);
		"($_, $_, $name, 'r$round')"
	} $from .. $to;
}

# Round r (1..6) is layer r.  Step k (1..5) has its old versions in layer k
# and its new ones in layer k + 1: key 3000 + 100k matches the window (c
# between 100000 and 100010) when old and not when new, key 7000 + k the
# reverse.  25 background keys after each key 3000 + 100k, in every round,
# keep each such key in a row group of its own kind (20 rows per group):
# the row group of a new version that does not match holds no row that
# does, so the statistics rule it out, and only the check for older
# versions elsewhere keeps it.  Each round also rewrites a slice of the
# background.
sub round_rows
{
	my ($round) = @_;
	my @rows = background($round, ($round - 1) * 300 + 1, ($round - 1) * 300 + 600);
	push @rows, background($round, 3000 + 100 * $_ + 1, 3000 + 100 * $_ + 25) for 1 .. 5;
	for my $k (1 .. 5)
	{
		my ($a, $b) = (3000 + 100 * $k, 7000 + $k);
		if ($round == $k)
		{
			push @rows, "($a, " . (100000 + $k) . ", 'old', 'a-old')",
			  "($b, " . (-100 - $k) . ", 'old', 'b-old')";
		}
		elsif ($round == $k + 1)
		{
			push @rows, "($a, " . (-$k) . ", 'new', 'a-new')",
			  "($b, 100005, 'new', 'b-new')";
		}
	}
	return \@rows;
}

$node->safe_psql('postgres', write_rows(round_rows(1), q{SELECT 1 FROM rollout_merge('z');}));
$node->safe_psql('postgres', write_rows(round_rows(2), q{SELECT 1 FROM rollout_merge('z');}));
$node->safe_psql('postgres', write_rows(round_rows(3), q{SELECT 1 FROM rollout_flush('z');}));
$node->safe_psql('postgres', write_rows(round_rows(4), q{SELECT 1 FROM rollout_flush('z');}));
$node->safe_psql('postgres', write_rows(round_rows(5)));
my $own_rows = write_rows(round_rows(6));
is($node->safe_psql('postgres', q{SELECT fragments, generations FROM rollout_observe('z')}),
	'2|2', 'two base fragments and two generations, besides the tail');

my @conditions = (
	'c BETWEEN 100000 AND 100010', 'c >= 100000', 'c > 99999 AND c < 100006',
	'c = 100005', 'c IN (100001, 100003, 7)', q{c = ANY ('{100002,NULL}')},
	q{c < ALL ('{-1,-2}')}, 'c < 0', 'c <= -101', 'c = -3',
	'name IS NULL', q{name = 'new'}, q{name = 'old'}, q{name < 'o' COLLATE "C"},
	q{name > 'n1000'}, q{name = ANY ('{old,n0005}')},
	q{pad = 'a-old'}, q{pad = 'b-new' AND c > 0});

# Every condition's rows, in a transaction that first writes its own rows
# (the newest layer) when $own.
sub answers
{
	my ($table, $settings, $own) = @_;
	my $sql = join("\n",
		map { "SELECT \$c\$$_\$c\$, count(*), coalesce(string_agg(format('%s:%s:%s:%s', id, c, name, pad), ' ' ORDER BY id), '-') FROM $table WHERE $_;" }
		  @conditions);
	return $node->safe_psql('postgres',
		"$settings\nBEGIN;\n" . ($own ? $own_rows : '') . "$sql\nCOMMIT;");
}

# (a) own rows inserted in the asking transaction: into both tables, then
# committed, so the oracle is asked after
my $rollout = answers('z', '', 1);
my $oracle = answers('o', '', 0);
is($rollout, $oracle, '(a) ' . scalar(@conditions) . ' conditions answer as the heap does, zone maps on');
like($oracle, qr/^c BETWEEN 100000 AND 100010\|5\|7001:100005:new:b-new 7002:100005:new:b-new 7003:100005:new:b-new 7004:100005:new:b-new 7005:100005:new:b-new$/m,
	'(a) the window holds exactly the keys whose newest version moved into it');
is(answers('z', 'SET rollout_fdw.use_zone_maps = off;', 0), $oracle,
	'(a) and the same with zone maps off');
is(answers('z', '', 0), $oracle, '(a) and on again, after the commit');

# (b) what was skipped
sub scan_counters
{
	my ($query, $settings) = @_;
	my $json = $node->safe_psql('postgres',
		($settings // '') . "EXPLAIN (ANALYZE, FORMAT JSON) $query");
	return foreign_scan_of($json);
}
my $window = 'SELECT * FROM z WHERE c BETWEEN 100000 AND 100010';
my $on = scan_counters($window);
cmp_ok($on->{'Skipped by Zone Map'}, '>=', 20,
	"(b) the oldest fragment's row groups are skipped ($on->{'Skipped by Zone Map'} of "
	  . ($on->{'Row Groups Read'} + $on->{'Row Groups Skipped'}) . ')');
my $off = scan_counters($window, 'SET rollout_fdw.use_zone_maps = off; ');
is($off->{'Skipped by Zone Map'}, 0, '(b) with use_zone_maps off none is');
cmp_ok($off->{'Row Groups Read'}, '>', $on->{'Row Groups Read'}, '(b) ... and more row groups are read');
is($on->{'Actual Rows'}, $off->{'Actual Rows'}, '(b) the same rows either way');

# a compacted store: one fragment, every row group not in the window skipped
$node->safe_psql('postgres', q{SELECT 1 FROM rollout_flush('z'); SELECT 1 FROM rollout_merge('z');
SELECT 1 FROM rollout_compact('z', min_fragments => 2)});
is($node->safe_psql('postgres', q{SELECT fragments, generations FROM rollout_observe('z')}),
	'1|0', '(b) compacted into one fragment');
my $compacted = scan_counters($window);
is($compacted->{'Row Groups Read'}, 1, '(b) a compacted store reads the one row group the window is in')
  or diag(encode_json($compacted));
is(answers('z', '', 0), $oracle, '(b) and answers as the heap does');
is(answers('z', 'SET rollout_fdw.use_zone_maps = off;', 0), $oracle, '(b) with zone maps off too');

# (c) collations: "<" under a collation other than "C" does not use the
# statistics (which are in "C" order); "=" under a deterministic one does
my $collation = $node->safe_psql('postgres',
	q{SELECT quote_ident(collname) FROM pg_collation WHERE collname IN ('und-x-icu', 'en_US.utf8', 'en_US') ORDER BY collname DESC LIMIT 1});
SKIP:
{
	skip 'no collation other than "C" here', 2 unless $collation;
	my $lt = scan_counters(qq{SELECT * FROM z WHERE name < 'n0005' COLLATE $collation});
	is($lt->{'Skipped by Zone Map'}, 0, qq{(c) "<" under $collation skips nothing by min/max});
	is($node->safe_psql('postgres', qq{SELECT string_agg(id::text, ',' ORDER BY id) FROM z WHERE name < 'Old' COLLATE $collation}),
		$node->safe_psql('postgres', qq{SELECT string_agg(id::text, ',' ORDER BY id) FROM o WHERE name < 'Old' COLLATE $collation}),
		'(c) ... and answers as the heap does');
}
my $eq = scan_counters(q{SELECT * FROM z WHERE name = 'n1500' COLLATE "C"});
cmp_ok($eq->{'Skipped by Zone Map'}, '>', 0, '(c) "=" uses them');
SKIP:
{
	skip 'no collation other than "C" here', 1 unless $collation;
	my $eq_other = scan_counters(qq{SELECT * FROM z WHERE name = 'n1500' COLLATE $collation});
	cmp_ok($eq_other->{'Skipped by Zone Map'}, '>', 0, qq{(c) ... under $collation (deterministic) too});
}
is($eq->{'Actual Rows'}, 1, '(c) ... and finds the row');

$node->stop;
done_testing();
