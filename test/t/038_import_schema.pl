
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
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
#       it, and EXCEPT leaves that store out.

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

done_testing();
