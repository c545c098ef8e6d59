
# Copyright (c) rollout_fdw authors
#
# 042_key_order.pl — the key types whose order segment_column_compare
# computes without calling the type's btree support function (int2, int4,
# int8, date, timestamp, timestamptz, uuid: format/datum_codec.c) order
# exactly as PostgreSQL does.  The writer sorts and checks segments with
# that comparison, and the planner, the key ranges and the zone maps use
# PostgreSQL's: any disagreement shows up as rows out of order, rows
# missed by a key range, or a segment refused as not ascending.  Each type
# gets extreme, negative and sign-bit values (uuids with bytes above 0x7f)
# spread over a merged fragment, a generation and the WAL tail, and every
# result is compared with a heap table's.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;
use List::Util qw(shuffle);

srand(42);

my $node = mode_node('key_order');
my $store = RolloutStore->for_test('042_key_order', backend => 'file');
$store->create_extension_and_server($node);

my %values = (
	int2 => [qw(-32768 -32767 -256 -255 -1 0 1 127 128 255 256 32766 32767)],
	int4 => [qw(-2147483648 -2147483647 -65536 -1 0 1 65535 65536 2147483646 2147483647)],
	int8 => [qw(-9223372036854775808 -9223372036854775807 -4294967296 -2147483649 -1 0 1
	  2147483648 4294967296 9223372036854775806 9223372036854775807)],
	date => ['-infinity', '4713-01-01 BC', '0001-12-31 BC', '1999-12-31', '2000-01-01',
		'2000-01-02', '5874897-12-31', 'infinity'],
	timestamp => ['-infinity', '4713-01-01 00:00 BC', '1969-12-31 23:59:59.999999',
		'1970-01-01 00:00', '2000-01-01 00:00', '2000-01-01 00:00:00.000001', '294276-12-31 23:59:59', 'infinity'],
	timestamptz => ['-infinity', '4713-01-01 00:00+00 BC', '1969-12-31 23:59:59.999999+00',
		'1970-01-01 00:00+00', '2000-01-01 00:00+00', '2000-01-01 00:00:00.000001+00', 'infinity'],
	uuid => [qw(00000000-0000-0000-0000-000000000000 00000000-0000-0000-0000-000000000001
	  00000000-0000-0000-0000-0000000000ff 00000000-0000-0000-8000-000000000000
	  00000000-0000-0000-ffff-ffffffffffff 00000000-0000-0001-0000-000000000000
	  7fffffff-ffff-ffff-ffff-ffffffffffff 80000000-0000-0000-0000-000000000000
	  80000000-0000-0000-0000-000000000001 ff000000-0000-0000-0000-000000000000
	  ffffffff-ffff-ffff-ffff-fffffffffffe ffffffff-ffff-ffff-ffff-ffffffffffff)]);

for my $type (sort keys %values)
{
	my @v = @{ $values{$type} };
	# three parts in a scrambled order: base fragment, generation, WAL tail
	my @order = shuffle(@v);
	my @parts = ([ @order[grep { $_ % 3 == 0 } 0 .. $#order] ],
		[ @order[grep { $_ % 3 == 1 } 0 .. $#order] ],
		[ @order[grep { $_ % 3 == 2 } 0 .. $#order] ]);
	my $insert = sub {
		my ($table, $part, $tag) = @_;
		return "INSERT INTO $table VALUES "
		  . join(', ', map { "('$_'::$type, '$tag')" } @$part) . ';';
	};
	$node->safe_psql('postgres', join("\n",
		"CREATE TABLE h_$type (k $type PRIMARY KEY, v text);",
		"CREATE FOREIGN TABLE r_$type (k $type, v text) SERVER s OPTIONS (store 'order_$type', key 'k');",
		(map { $insert->("h_$type", $parts[$_], "p$_") } 0 .. 2),
		$insert->("r_$type", $parts[0], 'p0'),
		"SELECT rollout_flush('r_$type'); SELECT rollout_merge('r_$type');",
		$insert->("r_$type", $parts[1], 'p1'),
		"SELECT rollout_flush('r_$type');",
		$insert->("r_$type", $parts[2], 'p2'),
		# and a second version of every third key, in the WAL tail
		"INSERT INTO h_$type SELECT k, 'again' FROM h_$type WHERE v = 'p0' ON CONFLICT (k) DO UPDATE SET v = 'again';",
		"INSERT INTO r_$type VALUES " . join(', ', map { "('$_'::$type, 'again')" } @{ $parts[0] }) . ';'));

	my $heap = $node->safe_psql('postgres', "SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM h_$type");
	is($node->safe_psql('postgres', "SELECT string_agg(k || '=' || v, ',') FROM r_$type"),
		$heap, "$type: a plain scan returns the keys in PostgreSQL's order, newest versions");
	is($node->safe_psql('postgres', "SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM r_$type"),
		$heap, "$type: ORDER BY the key");
	$node->safe_psql('postgres', "SELECT rollout_merge('r_$type')");
	is($node->safe_psql('postgres', "SELECT string_agg(k || '=' || v, ',') FROM r_$type"),
		$heap, "$type: after merging everything into sorted fragments");
	for my $i (1, int(@v / 2), $#v)
	{
		my $bound = "'$v[$i]'::$type";
		my $ranges = "SELECT (SELECT count(*) FROM %s WHERE k >= $bound), (SELECT count(*) FROM %s WHERE k < $bound),"
		  . " (SELECT string_agg(v, ',') FROM %s WHERE k = $bound)";
		is($node->safe_psql('postgres', sprintf($ranges, ("r_$type") x 3)),
			$node->safe_psql('postgres', sprintf($ranges, ("h_$type") x 3)),
			"$type: key ranges around $v[$i]");
	}
}

done_testing();
