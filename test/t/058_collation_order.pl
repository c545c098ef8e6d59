
# Copyright (c) rollout_fdw authors
#
# 058_collation_order.pl — a store's order is the same in every database,
# whatever its default collation (docs/FORMAT.md, "Order").
#
# Keys, key ranges and min/max statistics are compared in one order that
# ignores the database's collation ("C" for collatable types).  jsonb does
# not take a collation: it orders the strings inside its values by the
# database's default collation.  One cluster has a database in the "C"
# collation and one in ICU's en-US, which orders "a" before "B" where "C"
# puts "B" first.  Then:
#   - a jsonb (and jsonb[]) column written in the "C" database answers
#     conditions in the en-US database exactly as a heap table there does,
#     from a merged fragment, a generation and the unflushed tail: the
#     writer's min/max, computed in "C", must not skip a row group there;
#   - a new store keyed by jsonb, jsonb[] or a domain over jsonb is refused
#     at its first use, before anything is written to the store;
#   - a store created with a jsonb key before that (its _store.json written
#     here by hand) still opens, takes rows and reads them.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;

my $node = mode_node('collation');
my $store = RolloutStore->for_test('058_collation_order', backend => 'file');

$node->safe_psql('postgres', q{
CREATE DATABASE c_db TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
CREATE DATABASE icu_db TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'
	LOCALE_PROVIDER icu ICU_LOCALE 'en-US';});
for my $db ('c_db', 'icu_db')
{
	$node->safe_psql($db, 'CREATE EXTENSION rollout_fdw;' . $store->server_sql('s')
		  . q{CREATE FOREIGN TABLE z (id int, doc jsonb, tags jsonb[]) SERVER s OPTIONS (store 'z');
CREATE TABLE h (id int, doc jsonb, tags jsonb[]);});
}
is($node->safe_psql('icu_db', q{SELECT '"a"'::jsonb < '"B"'::jsonb}), 't',
	'the en-US database orders jsonb "a" before "B"');
is($node->safe_psql('c_db', q{SELECT '"a"'::jsonb < '"B"'::jsonb}), 'f',
	'the "C" database orders jsonb "B" before "a"');

# Written in the "C" database: a merged fragment and a generation of strings
# only (so their min/max are strings whose order the collations dispute),
# and an unflushed tail of other kinds of values.
my @batches = (
	[ [ 1, '"a"' ], [ 2, '"B"' ] ],
	[ [ 3, '"b"' ], [ 4, '"A"' ] ],
	[ [ 5, '{"k": "a"}' ], [ 6, '{"k": "B"}' ], [ 7, '["a", "B"]' ], [ 8, '1' ], [ 9, 'null' ] ]);
my @docs;
for my $i (0 .. $#batches)
{
	my $values = join(', ', map { push @docs, $_->[1]; "($_->[0], '$_->[1]', ARRAY['$_->[1]'::jsonb])" } @{ $batches[$i] });
	for my $db ('c_db', 'icu_db')
	{
		$node->safe_psql($db, "INSERT INTO h VALUES $values");
	}
	$node->safe_psql('c_db', "INSERT INTO z VALUES $values");
	$node->safe_psql('c_db', "SELECT rollout_flush('z')") if $i < 2;
	$node->safe_psql('c_db', "SELECT rollout_merge('z')") if $i == 0;
}
my $probes = join(', ', map { "('$_'::jsonb)" } @docs, '"Z"', '"c"');

for my $db ('c_db', 'icu_db')
{
	for my $op ('=', '<', '<=', '>', '>=')
	{
		for my $column ('doc', 'tags')
		{
			my $probe = $column eq 'doc' ? 'p' : 'ARRAY[p]';
			my $sql = "SELECT p, (SELECT string_agg(id::text, ',' ORDER BY id) FROM %s WHERE $column $op $probe) FROM (VALUES $probes) AS v(p) ORDER BY 1";
			is($node->safe_psql($db, sprintf($sql, 'z')), $node->safe_psql($db, sprintf($sql, 'h')),
				"$db: $column $op ... answers as a heap table in the same database");
		}
	}
}
# the int key's ranges still skip objects there
like($node->safe_psql('icu_db', q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM z WHERE id = 3}),
	qr/Fragments: read=0 skipped=1/, 'the key still skips the merged fragment in the en-US database');

# New stores keyed by a type whose order depends on the collation
$node->safe_psql('icu_db', q{
CREATE DOMAIN doc_key AS jsonb;
CREATE FOREIGN TABLE k_jsonb (id jsonb, v int) SERVER s OPTIONS (store 'k_jsonb');
CREATE FOREIGN TABLE k_array (id jsonb[], v int) SERVER s OPTIONS (store 'k_array');
CREATE FOREIGN TABLE k_domain (id doc_key, v int) SERVER s OPTIONS (store 'k_domain');});
for my $t ('k_jsonb', 'k_array', 'k_domain')
{
	my $value = $t eq 'k_array' ? q{ARRAY['"a"'::jsonb]} : q{'"a"'};
	my ($ret, $out, $err) = $node->psql('icu_db', "INSERT INTO $t VALUES ($value, 1)");
	isnt($ret, 0, "$t: an INSERT into a new store keyed by it fails");
	like($err, qr/key column "id" of store "$t" has type \S+, whose order depends on the database's collation/,
		"$t: the error says why");
	like($err, qr/HINT:  Use a key of type text/, "$t: the hint names a key type that works");
	($ret, $out, $err) = $node->psql('icu_db', "SELECT * FROM $t");
	like($err, qr/whose order depends on the database's collation/, "$t: so does a SELECT");
	is($store->exists("$t/_store.json"), 0, "$t: nothing was written to the store");
}

# A store created with a jsonb key by an earlier version: its definition as
# that version wrote it, in the layout of a store created here.
$node->safe_psql('c_db', q{
CREATE FOREIGN TABLE shape (id text, v int) SERVER s OPTIONS (store 'shape');
INSERT INTO shape VALUES ('x', 1);});
my $definition = $store->get('shape/_store.json');
ok($definition =~ s/"store": "shape"/"store": "legacy"/
	  && $definition =~ s/\{"name": "id", "type": "[^"]+", "encoding": "image", (?:"image": "[^"]+", )?"typid": 25,/{"name": "id", "type": "pg_catalog.jsonb", "encoding": "image", "typid": 3802,/,
	'a definition with a jsonb key is made')
  or diag($definition);
$store->put('legacy/_store.json', $definition);
$node->safe_psql('c_db', q{
CREATE FOREIGN TABLE legacy (id jsonb, v int) SERVER s OPTIONS (store 'legacy');
INSERT INTO legacy VALUES ('"b"', 2), ('"a"', 1);
SELECT rollout_flush('legacy');
INSERT INTO legacy VALUES ('"a"', 10);});
is($node->safe_psql('c_db', q{SELECT string_agg(id::text || '=' || v, ' ' ORDER BY v) FROM legacy}),
	'"b"=2 "a"=10', 'a store created with a jsonb key keeps working: newest version wins');

done_testing();
