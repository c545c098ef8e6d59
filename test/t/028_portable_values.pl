
# Copyright (c) rollout_fdw authors
#
# 028_portable_values.pl — values mean the same in every database and
# cluster (issue 10, point 3; docs/FORMAT.md, "Column encodings").
#
# The types whose datum image embeds an OID of its database — enums,
# composite types, arrays of them, ranges of user-defined range types,
# domains over them — are created in three databases and a second cluster
# with different OIDs (filler types created first shift them, and an enum
# label added later gets an out-of-order OID).  One store holds them, read
# and written by:
#   cluster A, database db1 (where the store is created);
#   cluster A, database db2 (same types, other OIDs);
#   cluster A, database db3, restored by pg_dump | psql from db1;
#   cluster B, database postgres (same types, other OIDs again).
# Every reader sees every row with the same text form, whoever wrote it,
# from the memtable (preloaded), the WAL tail, generations and fragments.
# Column types whose values are OIDs (reg*) are refused at CREATE; a store
# of format version 1 with such columns is refused with a clear error, one
# with only image columns is read and written as before.
#
# The file:// store runs always; the same scenario runs on S3 (moto) when
# the suite's S3 server is up (scripts/test.sh starts it).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;

# each cluster sees the other's flushes as soon as they commit
my $A = mode_node('portable_a', conf => ['rollout_fdw.manifest_refresh_interval = 0']);
my $B = mode_node('portable_b', conf => ['rollout_fdw.manifest_refresh_interval = 0']);

# The types, in a given database, after $fillers unrelated types (so their
# OIDs differ between databases).  The enum gets a label added later, whose
# OID is then out of the creation order.
sub create_types
{
	my ($node, $db, $fillers) = @_;
	my $sql = join('', map { "CREATE TYPE filler_$_ AS ENUM ('f$_');\n" } 1 .. $fillers);
	$sql .= q{
CREATE TYPE mood AS ENUM ('sad', 'happy');
ALTER TYPE mood ADD VALUE 'ok' BEFORE 'happy';
CREATE TYPE pair AS (n int, label text, m mood, at timestamptz, x float8);
CREATE DOMAIN good_mood AS mood CHECK (VALUE <> 'sad');
CREATE TYPE numspan AS RANGE (subtype = numeric);
};
	$node->safe_psql($db, $sql);
	return $node->safe_psql($db, q{SELECT string_agg(t::regtype::oid::text, ',' ORDER BY t)
		FROM unnest(ARRAY['mood', 'pair', 'good_mood', 'numspan']) t});
}

my $COLUMNS = 'id int, m mood, p pair, ms mood[], ps pair[], g good_mood, r numspan, note text';

# A row written by $who: every kind of value, with text forms that depend on
# DateStyle and extra_float_digits (set on purpose to odd values).
sub insert_row
{
	my ($node, $db, $table, $id, $who) = @_;
	$node->safe_psql(
		$db, qq{
SET datestyle = 'SQL, DMY';
SET extra_float_digits = -5;
SET intervalstyle = 'sql_standard';
INSERT INTO $table VALUES ($id, 'ok', ($id, 'l$id', 'happy', '2024-03-04 05:06:07.089+00', 0.1 + $id),
	'{sad,ok,happy}', ARRAY[($id, 'a', 'sad', '2001-02-03 04:05:06+00', 1e-300)::pair, NULL],
	'happy', numrange($id, $id + 0.5)::text::numspan, '$who');
});
	return;
}

# What a reader sees, in a fixed text form.
sub read_rows
{
	my ($node, $db, $table) = @_;
	return $node->safe_psql(
		$db, qq{
SET datestyle = 'ISO, YMD';
SET extra_float_digits = 1;
SELECT id, m, p, ms, ps, g, r, (p).x, (ps[1]).x, m < 'happy', note FROM $table ORDER BY id;
});
}

sub scenario
{
	my ($store, $label) = @_;
	my $name = "portable_$label";
	my $server = "s_$label";

	for my $db ('db1', 'db2')
	{
		$A->safe_psql($db, $store->server_sql($server));
		$A->safe_psql($db, "CREATE FOREIGN TABLE t_$label ($COLUMNS) SERVER $server OPTIONS (store '$name')");
	}
	$B->safe_psql('postgres', $store->server_sql($server));
	$B->safe_psql('postgres', "CREATE FOREIGN TABLE t_$label ($COLUMNS) SERVER $server OPTIONS (store '$name')");

	my $json = JSON::PP::decode_json($store->get("$name/_store.json") // '{}');
	ok(!defined $json->{format_version}, "$label: no store yet before the first write");

	insert_row($A, 'db1', "t_$label", 1, 'db1');
	$json = JSON::PP::decode_json($store->get("$name/_store.json"));
	is($json->{format_version}, 2, "$label: a new store has format version 2");
	is(join(',', map { "$_->{name}:$_->{encoding}" } @{ $json->{columns} }),
		'id:image,m:text,p:text,ms:text,ps:text,g:text,r:text,note:image',
		"$label: enum, composite, their arrays, the domain and the range are stored as text");

	my $expected = read_rows($A, 'db1', "t_$label");
	like($expected, qr/^1\|ok\|\(1,l1,happy,"2024-03-04 05:06:07\.089\+00",1\.1\)\|\{sad,ok,happy\}\|/,
		"$label: db1 reads its row back exactly (ISO times, exact floats)");
	is(read_rows($A, 'db2', "t_$label"), $expected,
		"$label: db2, with other type OIDs, reads the same row (unflushed)");
	is(read_rows($B, 'postgres', "t_$label"), '',
		"$label: cluster B sees nothing before a flush (its WAL tail is its own)");

	# db2 writes; db1 must still read everything (the bug: once db2 wrote, db1 failed too)
	insert_row($A, 'db2', "t_$label", 2, 'db2');
	$expected = read_rows($A, 'db1', "t_$label");
	like($expected, qr/^1\|.*\|db1\n2\|ok\|\(2,l2,happy,.*\|db2$/s,
		"$label: db1 reads the row db2 wrote, with db1's own enum values");
	is(read_rows($A, 'db2', "t_$label"), $expected, "$label: db2 reads the same");
	is($A->safe_psql('db1', "SELECT count(*) FROM t_$label WHERE m = 'ok' AND g::mood = 'happy' AND ms @> '{ok}' AND (p).m = 'happy'"),
		'2', "$label: the values compare as db1's own enum values");

	$A->safe_psql('db1', "SELECT rollout_flush('t_$label')");
	is(read_rows($A, 'db2', "t_$label"), $expected, "$label: the same from a generation");
	is(read_rows($B, 'postgres', "t_$label"), $expected,
		"$label: cluster B, with other OIDs again, reads the same");

	insert_row($B, 'postgres', "t_$label", 3, 'B');
	$B->safe_psql('postgres', "SELECT rollout_merge('t_$label')");
	$expected = read_rows($B, 'postgres', "t_$label");
	is(read_rows($A, 'db1', "t_$label"), $expected,
		"$label: db1 reads cluster B's row from the base (3 rows)");
	like($expected, qr/\n3\|ok\|.*\|B$/s, "$label: ... including B's row");

	# pg_dump of db1, restored as db3: the foreign table definition and the
	# types come back with new OIDs; the store reads the same
	my $dump = "$PostgreSQL::Test::Utils::tmp_check/db1_$label.sql";
	$A->command_ok([ 'pg_dump', '-d', $A->connstr('db1'), '-f', $dump ], "$label: pg_dump db1");
	$A->safe_psql('postgres', "CREATE DATABASE db3_$label");
	$A->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $A->connstr("db3_$label"), '-f', $dump ],
		"$label: restore it into db3");
	isnt($A->safe_psql("db3_$label", "SELECT 'mood'::regtype::oid"),
		$A->safe_psql('db1', "SELECT 'mood'::regtype::oid"), "$label: db3's types have other OIDs");
	is(read_rows($A, "db3_$label", "t_$label"), $expected, "$label: db3 reads the same rows");
	insert_row($A, "db3_$label", "t_$label", 4, 'db3');
	like(read_rows($A, 'db1', "t_$label"), qr/\n4\|ok\|\(4,l4,happy,.*\|db3$/s,
		"$label: and db1 reads what db3 wrote");
	return;
}

for my $db ('db1', 'db2')
{
	$A->safe_psql('postgres', "CREATE DATABASE $db");
	$A->safe_psql($db, 'CREATE EXTENSION rollout_fdw');
}
$B->safe_psql('postgres', 'CREATE EXTENSION rollout_fdw');
my %oids = (
	db1 => create_types($A, 'db1', 0),
	db2 => create_types($A, 'db2', 7),
	B => create_types($B, 'postgres', 3));
isnt($oids{db1}, $oids{db2}, "db1 and db2 have different type OIDs ($oids{db1} / $oids{db2})");
isnt($oids{db1}, $oids{B}, "so do the two clusters ($oids{db1} / $oids{B})");
isnt($A->safe_psql('db1', q{SELECT string_agg(oid::text, ',' ORDER BY enumsortorder) FROM pg_enum WHERE enumtypid = 'mood'::regtype}),
	$A->safe_psql('db2', q{SELECT string_agg(oid::text, ',' ORDER BY enumsortorder) FROM pg_enum WHERE enumtypid = 'mood'::regtype}),
	'and different enum value OIDs');

scenario(RolloutStore->for_test('028_file', backend => 'file'), 'file');
if (!RolloutStore::remote() && $ENV{ROLLOUT_TEST_S3_ENDPOINT})
{
	scenario(RolloutStore->for_test('028_s3', backend => 's3'), 's3');
}
elsif (RolloutStore::remote())
{
	scenario(RolloutStore->for_test('028_remote'), RolloutStore::backend());
}

# --- types that cannot be stored, and keys that cannot be text
my ($ret, $out, $err) = $A->psql('db1',
	'CREATE FOREIGN TABLE bad (id int, c regclass) SERVER s_file');
isnt($ret, 0, 'a regclass column is refused');
like($err, qr/column "c" of foreign table "bad" has type regclass, which a rollout store cannot keep/,
	'... with an error naming the column and type');
($ret, $out, $err) = $A->psql('db1', 'CREATE FOREIGN TABLE bad (id mood) SERVER s_file');
isnt($ret, 0, 'an enum key is refused');
like($err, qr/key column "id" of foreign table "bad" has type mood, which cannot be a store's key/,
	'... with a clear error');

# --- stores written before format version 2
my $legacy = RolloutStore->for_test('028_legacy', backend => 'file');
$A->safe_psql('db1', $legacy->server_sql('s_legacy'));
$A->safe_psql('db1', q{
CREATE FOREIGN TABLE legacy_typed (id int, m mood) SERVER s_legacy OPTIONS (store 'typed');
CREATE FOREIGN TABLE legacy_plain (id int, v text) SERVER s_legacy OPTIONS (store 'plain');
INSERT INTO legacy_typed VALUES (1, 'ok');
INSERT INTO legacy_plain VALUES (1, 'one');
});
# rewrite their _store.json as version 1 wrote it: no encodings
for my $store ('typed', 'plain')
{
	my $doc = JSON::PP::decode_json($legacy->get("$store/_store.json"));
	$doc->{format_version} = 1;
	delete $_->{encoding} for @{ $doc->{columns} };
	$legacy->put("$store/_store.json", JSON::PP->new->canonical->encode($doc));
}
($ret, $out, $err) = $A->psql('db1', 'SELECT * FROM legacy_typed');
isnt($ret, 0, 'a version-1 store with an enum column is refused');
like($err, qr/store "typed" keeps column "m" of type mood in a database-specific form/,
	'... with an error naming the column');
like($err, qr/format version 1/, '... and the format version');
is($A->safe_psql('db1', q{INSERT INTO legacy_plain VALUES (2, 'two'); SELECT string_agg(v, ',' ORDER BY id) FROM legacy_plain}),
	'one,two', 'a version-1 store of image columns only is read and written as before');

# --- the settings input functions read and output does not assume
# array_nulls = off made a stored NULL array element the string "NULL" (and
# an UPDATE wrote it back so); xmloption = document refused a stored
# fragment.  Decoding fixes both for itself, and only for itself.
$A->safe_psql('db1', q{
CREATE DOMAIN label_text AS text;
CREATE TYPE xml_pair AS (n int, x xml);
CREATE FOREIGN TABLE settings_t (id int, a label_text[], p xml_pair, v int)
	SERVER s_legacy OPTIONS (store 'settings', key 'id');
INSERT INTO settings_t VALUES (1, ARRAY['x', NULL]::label_text[], ROW(1, 'abc<a/>')::xml_pair, 1);
});
is($A->safe_psql('db1', q{SET array_nulls = off;
SELECT a[2] IS NULL, ('{x,NULL}'::text[])[2] IS NULL FROM settings_t}),
	't|f', 'array_nulls = off: a stored NULL element stays NULL (the session keeps its setting)');
is($A->safe_psql('db1', q{SET array_nulls = off; UPDATE settings_t SET v = 2; RESET array_nulls;
SELECT a[2] IS NULL, v FROM settings_t}),
	't|2', '... and an UPDATE under it writes it back NULL');
is($A->safe_psql('db1', q{SET xmloption = document; SELECT (p).x::text FROM settings_t}),
	'abc<a/>', 'xmloption = document: a stored xml fragment is read');
is($A->safe_psql('db1', q{SET xmloption = document; SET array_nulls = off;
SELECT count(*) FROM settings_t; SHOW xmloption; SHOW array_nulls}),
	"1\ndocument\noff", '... and the session\'s settings are as it set them');

# A value its input function refuses (another database's type of the same
# name) is an error that does not quote it: the reader may not be allowed
# to see that column (an UPDATE reads whole rows).
$A->safe_psql('db1', q{
CREATE TYPE secret_pair AS (v text);
CREATE FOREIGN TABLE secret_t (id int, s secret_pair, pub int) SERVER s_legacy OPTIONS (store 'secret', key 'id');
INSERT INTO secret_t VALUES (1, ROW('TOPSECRET')::secret_pair, 1);
});
$A->safe_psql('db2', $legacy->server_sql('s_legacy'));
$A->safe_psql('db2', q{
CREATE TYPE secret_pair AS (v int);
CREATE FOREIGN TABLE secret_t (id int, s secret_pair, pub int) SERVER s_legacy OPTIONS (store 'secret', key 'id');
});
($ret, $out, $err) = $A->psql('db2', 'UPDATE secret_t SET pub = 2');
like($err, qr/a stored value of type secret_pair could not be read/, 'a value the input function refuses is a clear error');
unlike($err, qr/TOPSECRET/, '... that does not quote the value');
# the same for an input function that refuses it with a syntax error
# (another SQLSTATE class), as tsvector's does
$A->safe_psql('db1', q{
CREATE TYPE secret_doc AS (v text);
CREATE FOREIGN TABLE secret_d (id int, s secret_doc, pub int) SERVER s_legacy OPTIONS (store 'secret_doc', key 'id');
INSERT INTO secret_d VALUES (1, ROW('top secret :: payload')::secret_doc, 1);
});
$A->safe_psql('db2', q{
CREATE TYPE secret_doc AS (v tsvector);
CREATE FOREIGN TABLE secret_d (id int, s secret_doc, pub int) SERVER s_legacy OPTIONS (store 'secret_doc', key 'id');
});
($ret, $out, $err) = $A->psql('db2', 'UPDATE secret_d SET pub = 2');
like($err, qr/a stored value of type secret_doc could not be read/, 'a syntax error of the input function is the same clear error');
unlike($err, qr/top secret/, '... that does not quote the value');

for my $n ($A, $B)
{
	unlike(slurp_file($n->logfile), qr/terminated by signal|PANIC/, $n->name . ': no backend crashed');
	$n->stop;
}
done_testing();
