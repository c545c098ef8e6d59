
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
# Remote modes: plain  (reads through the store, the same whatever the writer; scripts/test.sh)
#
# 038_import_schema.pl — IMPORT FOREIGN SCHEMA (fdw/import.c) makes one
# foreign table per store at the server's location:
#   (a) with the columns, types (typmods included) and key of the store's
#       _store.json, the server and the store option; stores never written
#       (no _store.json) are left out, and so is a store whose objects fill
#       several listing pages, only once;
#   (b) LIMIT TO and EXCEPT name stores;
#   (c) the imported tables read the same rows, of every type, and accept
#       inserts that the original table sees;
#   (d) a column type missing in the importing database is an error naming
#       it, and EXCEPT leaves that store out;
#   (e) rollout_stores(server) lists the same stores with their key, column
#       count and cheap counts (NULL counts where a type is missing), needs
#       USAGE on the server, and refuses a server of another wrapper.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;

my $node = mode_node('import_schema');
my $store = RolloutStore->for_test('038_import_schema');
$store->create_extension_and_server($node);

# 150 commits: more WAL entries than one listing page (100 keys) holds
my $many = join("\n", map { "INSERT INTO big VALUES ($_, 'row $_');" } 1 .. 150);
$node->safe_psql('postgres', qq{
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE FOREIGN TABLE typed (code varchar(12), amount numeric(10,2), at timestamptz(3), tags text[])
  SERVER s OPTIONS (store 'typed', key 'code');
INSERT INTO typed VALUES ('a', 1.25, '2026-01-01 00:00:00.123+00', '{x,y}');
CREATE FOREIGN TABLE big (id int, note text) SERVER s OPTIONS (store 'big');
$many
CREATE FOREIGN TABLE feelings (id int, m mood) SERVER s OPTIONS (store 'feelings');
INSERT INTO feelings VALUES (1, 'happy');
CREATE FOREIGN TABLE never_written (id int) SERVER s OPTIONS (store 'never_written');
SELECT count(*) FROM never_written;
CREATE SCHEMA imported;
IMPORT FOREIGN SCHEMA whatever FROM SERVER s INTO imported;});

sub tables_in
{
	my ($schema) = @_;
	return $node->safe_psql('postgres', qq{SELECT string_agg(relname, ',' ORDER BY relname)
  FROM pg_class WHERE relnamespace = '$schema'::regnamespace});
}

# (a)
is(tables_in('imported'), 'big,feelings,typed', 'one table per store that was written, each once');
is( $node->safe_psql('postgres', q{SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid = 'imported.typed'::regclass AND attnum > 0}),
	'code character varying(12), amount numeric(10,2), at timestamp(3) with time zone, tags text[]',
	'columns and types, typmods included, from _store.json');
is( $node->safe_psql('postgres', q{SELECT ftoptions, srvname FROM pg_foreign_table JOIN pg_foreign_server ON ftserver = oid
  WHERE ftrelid = 'imported.typed'::regclass}),
	'{store=typed,key=code}|s', 'the server, the store and the key');

# (b)
$node->safe_psql('postgres', q{
CREATE SCHEMA only_big; CREATE SCHEMA but_big;
IMPORT FOREIGN SCHEMA x LIMIT TO (big, no_such_store) FROM SERVER s INTO only_big;
IMPORT FOREIGN SCHEMA x EXCEPT (big) FROM SERVER s INTO but_big;});
is(tables_in('only_big'), 'big', 'LIMIT TO');
is(tables_in('but_big'), 'feelings,typed', 'EXCEPT');

# (c)
is($node->safe_psql('postgres', q{SELECT count(*), sum(id) FROM imported.big}), '150|11325',
	'an imported table reads the same rows');
is($node->safe_psql('postgres', q{SELECT code, amount, at AT TIME ZONE 'UTC', tags FROM imported.typed}),
	'a|1.25|2026-01-01 00:00:00.123|{x,y}', 'values of every type');
is($node->safe_psql('postgres', q{SELECT m FROM imported.feelings}), 'happy', 'an enum column');
$node->safe_psql('postgres', q{INSERT INTO imported.big VALUES (151, 'through the import')});
is($node->safe_psql('postgres', q{SELECT note FROM big WHERE id = 151}), 'through the import',
	'the imported table writes the same store');

# (d) a database without the enum
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', 'CREATE EXTENSION rollout_fdw;' . $store->server_sql('s'));
my ($ret, $out, $err) = $node->psql('other', 'IMPORT FOREIGN SCHEMA x FROM SERVER s INTO public');
isnt($ret, 0, 'a store with a type this database lacks fails the import');
like($err, qr/cannot import store "feelings": type public\.mood of its column "m" does not exist in this database/,
	'with an error naming the store, the type and the column');
$node->safe_psql('other', 'IMPORT FOREIGN SCHEMA x EXCEPT (feelings) FROM SERVER s INTO public');
is($node->safe_psql('other', q{SELECT count(*) FROM big}), '151', 'EXCEPT leaves it out; the rest imports');

# (e) rollout_stores
my $listing = q{SELECT string_agg(concat_ws('|', store, key, columns, row_count, fragments, generations, unflushed_rows),
  ',' ORDER BY store) FROM rollout_stores('s')};
is($node->safe_psql('postgres', $listing),
	'big|id|2|151|0|0|151,feelings|id|2|1|0|0|1,typed|code|4|1|0|0|1',
	'rollout_stores: the stores written, with key, columns and cheap counts');
$node->safe_psql('postgres', q{SELECT rollout_flush('big'); SELECT rollout_merge('big');});
is($node->safe_psql('postgres', q{SELECT concat_ws('|', row_count, base_rows, fragments, generations, unflushed_rows, bytes > 0)
  FROM rollout_stores('s') WHERE store = 'big'}), '151|151|1|0|0|t', 'after a merge: the rows in one fragment');
is($node->safe_psql('other', q{SELECT concat_ws('|', store, key, columns, row_count IS NULL, problem) FROM rollout_stores('s') WHERE store = 'feelings'}),
	'feelings|id|2|t|a column type of the store does not exist in this database',
	'a store with a type this database lacks is listed without counts, saying why');
is($node->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE problem IS NULL), count(*) FROM rollout_stores('s')}),
	'3|3', 'here no store has a problem');
$node->safe_psql('postgres', q{CREATE ROLE lister LOGIN});
($ret, $out, $err) = $node->psql('postgres', q{SET ROLE lister; SELECT * FROM rollout_stores('s')});
like($err, qr/permission denied for foreign server s/, 'rollout_stores needs USAGE on the server');
if (!RolloutStore::remote())
{
	# a store folder whose _store.json is not JSON: listed with the reason,
	# the others still counted
	mkdir($store->path('broken'));
	open(my $fh, '>', $store->path('broken/_store.json')) or die $!;
	print $fh '{"columns": [';
	close $fh;
	is($node->safe_psql('postgres', q{SELECT string_agg(store || ':' || coalesce(row_count::text, '-') || ':' || (problem IS NOT NULL), ',' ORDER BY store) FROM rollout_stores('s')}),
		'big:151:false,broken:-:true,feelings:1:false,typed:1:false',
		'a malformed _store.json is listed with its problem; the listing goes on');
	like($node->safe_psql('postgres', q{SELECT problem FROM rollout_stores('s') WHERE store = 'broken'}),
		qr/_store\.json/, '... and the problem names the object');
	# a full listing page of objects at the top between two stores, which
	# name no store to skip to: the listing goes on past them
	for my $i (1 .. 120)
	{
		open(my $top, '>', $store->path(sprintf('bz%03d', $i))) or die $!;
		close $top;
	}
	is($node->safe_psql('postgres', q{SELECT string_agg(store, ',' ORDER BY store) FROM rollout_stores('s')}),
		'big,broken,feelings,typed', 'objects at the top of the location, more than a page, are passed over');
	$node->safe_psql('postgres', q{GRANT USAGE ON FOREIGN SERVER s TO lister});
	is($node->safe_psql('postgres', q{SET ROLE lister; SELECT count(*) FROM rollout_stores('s')}), '4',
		'with USAGE on the server a role lists the stores');
}
$node->safe_psql('postgres', q{CREATE FOREIGN DATA WRAPPER other_wrapper; CREATE SERVER elsewhere FOREIGN DATA WRAPPER other_wrapper});
($ret, $out, $err) = $node->psql('postgres', q{SELECT * FROM rollout_stores('elsewhere')});
like($err, qr/server "elsewhere" is not a rollout_fdw server/, 'and refuses a server of another wrapper');
($ret, $out, $err) = $node->psql('postgres', q{SELECT * FROM rollout_stores('nowhere')});
like($err, qr/server "nowhere" does not exist/, 'and names a server that does not exist');

done_testing();
