
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
# Modes: preload  (its cluster preloads the writer in every run; scripts/test.sh)
#
# 061_crafted_images.pl — a value crafted inside a store's objects is an
# error, never a crash or a read outside the value (src/format/image_check.c,
# docs/FORMAT.md "How a reader validates").
#
# A store's objects come from whoever can write where it lives: on S3 or
# Azure any role that may create a server can point one at an endpoint of
# its own.  The segment CRCs only prove that bytes are as written.  Here the
# role mallory, no superuser, writes rows whose bytea values are the
# internal images of a jsonb, an array, a numeric, a range, a bit string,
# an inet and a text, each broken in its own way (entries past the value's
# end, an element type that is not the column's, a digit out of range...),
# and then relabels the column in _store.json, as the owner of a store can.
# Reading the column as its new type through mallory's table, and through
# the same table as a superuser, must fail with XX001 naming the problem
# (from the row itself, or from the footer's min/max for a short value),
# while the key column still reads and the server stays up.  On a remote
# store that is so by default.  A local store is trusted as the server's
# files are, and its built-in types read unchecked unless
# rollout_fdw.check_trusted_images is on, which every lane tries too.  Before the
# checks, array_out and jsonb_out followed the crafted sizes out of the
# value.
#
# Arrays are checked as PostgreSQL walks them: every element starts aligned,
# and the elements fill the array exactly (array_cat would take trailing
# bytes for elements).
#
# Rows that have not reached a segment are safe too.  A table whose column
# types are not those the store's unflushed rows were written with (here a
# domain dropped and made again over jsonb, which the store cannot tell
# from the first by its name) reads them from their WAL entries, checked,
# and may not flush them; the same store flushed is checked too, since a
# domain's values are checked even in a trusted store.
#
# Values of types whose images cannot be checked (tsvector here) are kept
# as text by new stores, and read back equal.  A store an earlier build
# made with such a column as images still reads where the store is trusted
# (a local store, or one of a superuser's server marked "trusted", which
# only superusers may set, read with PUBLIC's mapping) and is refused
# elsewhere (SQLSTATE 42501), also to a role with a mapping of its own on
# the marked server.
# int2vector values, whose functions read them without detoasting, keep
# their 4-byte header in segments and read back whole.  A database whose
# encoding differs from the one recorded at the store's creation checks
# what it reads, even from a store it trusts.

use strict;
use warnings;

use FindBin;
use JSON::PP ();
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node create_mapping reseal_json);
use Test::More;

my $node = writer_node('crafted_images');
my $store = RolloutStore->for_test('061_crafted_images');
my $remote = $store->{backend} ne 'file';

$node->safe_psql('postgres', q{
CREATE DATABASE utf8_db TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';});
$node->safe_psql('utf8_db', 'CREATE EXTENSION rollout_fdw;' . $store->server_sql('s'));
$node->safe_psql('utf8_db', q{
CREATE ROLE mallory LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER rollout_fdw TO mallory;
GRANT USAGE ON FOREIGN SERVER s TO mallory;
GRANT CREATE ON SCHEMA public TO mallory;});

# mallory's own server: on a remote store one she creates (the attack), on a
# file store the superuser's (only privileged roles create those).
if ($remote)
{
	my $sql = $store->server_sql('ms');
	$node->safe_psql('utf8_db', "SET ROLE mallory;\n$sql");
}
else
{
	$node->safe_psql('utf8_db', 'CREATE SERVER ms FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location '
		  . "'" . $store->location . "');\nGRANT USAGE ON FOREIGN SERVER ms TO mallory;");
}

sub as_mallory { my ($sql) = @_; return "SET ROLE mallory;\n$sql"; }

# Run $sql in utf8_db; returns (ok, stdout, stderr).
sub run
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql('utf8_db', $sql, stdout => \$out, stderr => \$err,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($rc == 0, $out, $err);
}

# Rewrite column v (or column => NAME) of store $name in its _store.json:
# %set replaces fields (undef: removes one).
sub relabel
{
	my ($name, %set) = @_;
	my $key = "$name/_store.json";
	my $json = JSON::PP->new->canonical;
	my $definition = $json->decode($store->get($key));
	my $which = delete $set{column} // 'v';
	for my $column (@{ $definition->{columns} })
	{
		next unless $column->{name} eq $which;
		for my $field (keys %set)
		{
			if (defined $set{$field}) { $column->{$field} = $set{$field}; }
			else { delete $column->{$field}; }
		}
	}
	$store->put($key, $json->encode($definition));
	return;
}

# Write $hex as a bytea row of a new store $name (mallory's), flushed into a
# segment, then relabel the column as $type (its _store.json name, OID).
sub craft
{
	my ($name, $hex, $type, $typid) = @_;
	$node->safe_psql('utf8_db', as_mallory(qq{
CREATE FOREIGN TABLE raw_$name (id int, v bytea) SERVER ms OPTIONS (store '$name', key 'id');
INSERT INTO raw_$name VALUES (1, '\\x$hex');
SELECT rollout_flush('raw_$name');
DROP FOREIGN TABLE raw_$name;}));
	# what the store says its images are goes too: whoever can write the
	# store can write _store.json, so only the checks stand in the way
	relabel($name, type => $type, typid => $typid, image => undef);
	return;
}

my $pad = '00' x 300;    # past SEGMENT_MAX_STATS_IMAGE_SIZE: no min/max

# name, the column's SQL type, its _store.json name and OID, the crafted
# varlena payload, and the problem the error must name.
my @cases = (
	[ 'jsonb_offsets', 'jsonb', 'pg_catalog.jsonb', 3802,
	  # an object of one pair whose key claims 2^28 - 1 bytes
	  '01000020' . 'ffffff0f' . '00000000' . $pad,
	  qr/Row 0 of a chunk of column "v" is a jsonb whose entries run past its end/ ],
	[ 'jsonb_key', 'jsonb', 'pg_catalog.jsonb', 3802,
	  # an object whose key is a null
	  '01000020' . '00000040' . '00000040' . $pad,
	  qr/is a jsonb object with a key that is not a string/ ],
	[ 'jsonb_nested', 'jsonb', 'pg_catalog.jsonb', 3802,
	  # an array holding a container whose entry runs past it
	  '01000040' . '0c000050' . '01000040' . 'ffffff0f' . '00000000' . $pad,
	  qr/is a jsonb whose entries run past its end/ ],
	[ 'array_elements', 'int[]', 'integer[]', 1007,
	  # int4[] of 1,000,000 elements and no data
	  '01000000' . '00000000' . '17000000' . '40420f00' . '01000000' . $pad,
	  qr/Row 0 of a chunk of column "v" has an element past its end/ ],
	[ 'array_type', 'text[]', 'pg_catalog.text[]', 1009,
	  # claims int4 elements in a text[] column
	  '01000000' . '00000000' . '17000000' . '01000000' . '01000000' . $pad,
	  qr/is an array of another element type/ ],
	[ 'array_dims', 'int[]', 'integer[]', 1007,
	  '07000000' . '00000000' . '17000000' . $pad,
	  qr/is an array with an invalid number of dimensions/ ],
	[ 'numeric_digit', 'numeric', 'numeric', 1700,
	  # short form, one digit of 0xffff, then zero digits
	  '0080' . 'ffff' . $pad,
	  qr/is a numeric with a digit out of range/ ],
	[ 'range_type', 'int4range', 'pg_catalog.int4range', 3904,
	  # names int8range
	  '560f0000' . $pad . '00',
	  qr/is a range of another type/ ],
	[ 'range_bounds', 'int4range', 'pg_catalog.int4range', 3904,
	  # both bounds present, neither there
	  '400f0000' . '00',
	  qr/The chunk m(?:in|ax)imum of column "v" has an element past its end/ ],
	[ 'varbit_length', 'varbit', 'bit varying', 1562,
	  '40420f00' . 'ff' . $pad,
	  qr/is a bit string whose length disagrees with its size/ ],
	[ 'inet_family', 'inet', 'pg_catalog.inet', 869,
	  '0720' . '01020304' . $pad,
	  qr/is a network address of an unknown family/ ],
	[ 'text_encoding', 'text', 'pg_catalog.text', 25,
	  '61ff62' . ('61' x 300),
	  qr/is text that is not valid in the database encoding/ ],
	[ 'array_alignment', 'text[]', 'pg_catalog.text[]', 1009,
	  # two elements: "abcd" (1-byte header), then "xy" right after it, where
	  # only heap tuples put it; array_iter reads element 2 aligned, at a
	  # 4-byte header that claims a gigabyte
	  '01000000' . '00000000' . '19000000' . '02000000' . '01000000'
		. '0b61626364' . '077879' . 'fcffffff' . $pad,
	  qr/Row 0 of a chunk of column "v" has an element past its end/ ],
	[ 'array_trailing', 'text[]', 'pg_catalog.text[]', 1009,
	  # {a}, then a varlena header array_cat would take for an element
	  '01000000' . '00000000' . '19000000' . '01000000' . '01000000'
		. '0561' . '0000' . 'fcffffff',
	  qr/has elements that do not fill it exactly/ ],
	[ 'numeric_special', 'numeric', 'numeric', 1700,
	  # NaN's sign bits with stray bits below: prints as NaN, sorts as -Infinity
	  '0fc0',
	  qr/is a numeric with an invalid special value/ ],
	[ 'jsonb_short', 'jsonb', 'pg_catalog.jsonb', 3802,
	  # short enough for the footer's min/max, which are checked too
	  '01000020' . 'ffffff0f' . '00000000',
	  qr/The chunk m(?:in|ax)imum of column "v" is a jsonb whose entries run past its end/ ],
);

for my $case (@cases)
{
	my ($name, $sql_type, $type, $typid, $hex, $problem) = @$case;
	craft($name, $hex, $type, $typid);
	$node->safe_psql('utf8_db', as_mallory(
		"CREATE FOREIGN TABLE $name (id int, v $sql_type) SERVER ms OPTIONS (store '$name', key 'id');"));

	my @readers = ([ 'anyone checking trusted stores too',
			sub { "SET rollout_fdw.check_trusted_images = on;\n" . as_mallory($_[0]) } ]);
	push @readers, [ 'mallory', \&as_mallory ], [ 'a superuser', sub { $_[0] } ]
	  if $remote;
	for my $who (@readers)
	{
		my ($ok, $out, $err) = run($who->[1]->("SELECT v FROM $name;"));
		ok(!$ok, "$name: reading v as $sql_type fails for $who->[0]");
		like($err, qr/XX001/, "$name: with SQLSTATE XX001 (data corrupted)");
		like($err, $problem, "$name: naming the problem");
	}
	if ($hex =~ /$pad/)
	{
		is($node->safe_psql('utf8_db', "SELECT id FROM $name"), '1',
			"$name: the key column still reads");
	}
	is($node->safe_psql('utf8_db', 'SELECT 1'), '1', "$name: the server is up");
}
# A key bound in a manifest (JSON, the image in hexadecimal) is checked too:
# an int[] key range whose lower end claims a million elements.
$node->safe_psql('utf8_db', as_mallory(q{
CREATE FOREIGN TABLE array_key (id int[], v int) SERVER ms OPTIONS (store 'array_key', key 'id');
INSERT INTO array_key VALUES ('{1,2}', 1), ('{3,4}', 2);
SELECT rollout_flush('array_key');}));
my $shard = $node->safe_psql('utf8_db', 'SELECT system_identifier FROM pg_control_system()');
my ($manifest_key) = grep { $store->get($_) =~ /"min_key"/ }
  map { my $f = $_; map { sprintf('%s/%020d.json', $f, $_) } ($store->manifest_versions($f))[-1] // () }
  ("array_key/shards/$shard/_manifest", 'array_key/base/_manifest');
ok(defined $manifest_key, 'a manifest holds the key range of the rows');
my $manifest = $store->get($manifest_key);
my $crafted_key = '60000000' . '01000000' . '00000000' . '17000000' . '40420f00' . '01000000';
(my $forged = $manifest) =~ s/"min_key":\s*"[0-9a-f]+"/"min_key": "$crafted_key"/;
# whoever writes the store can seal what they write (a CRC is no signature)
$store->put($manifest_key, reseal_json($forged));
for my $reader ([ 'checking trusted stores too', "SET rollout_fdw.check_trusted_images = on;\n" ],
	$remote ? ([ 'by default', '' ]) : ())
{
	my ($ok, $out, $err) = run($reader->[1] . as_mallory(q{SELECT v FROM array_key WHERE id = '{3,4}';}));
	ok(!$ok, "a forged key bound in $manifest_key fails the read ($reader->[0])");
	like($err, qr/XX001.*A key value of column "id" has an element past its end/s,
		'naming the key value');
}

# rollout_fdw.check_trusted_images holds from a session's next statement,
# also for a store the session already read unchecked: its handle is
# reopened (fdw/store_cache.c), and nothing decoded unchecked is reused.
# Before, the handle kept reading unchecked until the session ended, and
# the crafted jsonb below came back as '{" ": ""}'.  In one session, a local
# store is read unchecked (the key column only, which loads the footer
# holding the crafted minimum of v), then with checks on: reading v must
# fail on the footer's minimum as a first checked read does.  The forged key
# bound is read the same way (rollout_observe parses the manifests).
if (!$remote)
{
	# (only a superuser may change the setting: it is changed between reads as mallory)
	my ($ok, $out, $err) = run(q{
SET rollout_fdw.check_trusted_images = off;
SET ROLE mallory;
SELECT id FROM jsonb_short;
RESET ROLE;
SET rollout_fdw.check_trusted_images = on;
SET ROLE mallory;
SELECT v FROM jsonb_short;});
	is($out, '1', 'a trusted store read unchecked first gives its key column');
	ok(!$ok, 'then, with checks on in the same session, reading v fails');
	like($err, qr/XX001.*The chunk m(?:in|ax)imum of column "v" is a jsonb whose entries run past its end/s,
		'on the footer kept from the unchecked read, which is checked again');

	($ok, $out, $err) = run(q{
SET rollout_fdw.check_trusted_images = off;
SET ROLE mallory;
SELECT count(*) FROM rollout_observe('array_key');
RESET ROLE;
SET rollout_fdw.check_trusted_images = on;
SET ROLE mallory;
SELECT v FROM array_key WHERE id = '{3,4}';});
	is($out, '1', 'the store with the forged key bound is observed unchecked first');
	ok(!$ok, 'then, with checks on in the same session, a key lookup fails');
	like($err, qr/XX001.*A key value of column "id" has an element past its end/s,
		'on the key bound of the manifest kept from the unchecked read');
}

# Nor may a role switch off the checks an administrator turned on: before,
# the setting was anyone's, and mallory read the crafted jsonb unchecked.
if (!$remote)
{
	$node->safe_psql('postgres', 'ALTER SYSTEM SET rollout_fdw.check_trusted_images = on; SELECT pg_reload_conf()');
	$node->poll_query_until('utf8_db', 'SHOW rollout_fdw.check_trusted_images', 'on')
	  or die 'the setting did not reach new sessions';
	my ($ok, $out, $err) = run(as_mallory(q{SET rollout_fdw.check_trusted_images = off;}));
	ok(!$ok && $err =~ /permission denied to set parameter "rollout_fdw.check_trusted_images"/,
		'a role that is no superuser cannot switch the checks off') or diag($err);
	($ok, $out, $err) = run(as_mallory(q{SELECT v FROM jsonb_short;}));
	ok(!$ok && $err =~ /XX001/, '... and reads of the crafted value stay checked') or diag($err);
	($ok, $out, $err) = run(as_mallory(q{ALTER ROLE mallory SET rollout_fdw.check_trusted_images = off;}));
	ok(!$ok, '... nor set it for itself at login') or diag($err);
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET rollout_fdw.check_trusted_images; SELECT pg_reload_conf()');
}

unlike(slurp_file($node->logfile), qr/terminated by signal/,
	'no backend died on a crafted value');

# --- types whose images cannot be checked -----------------------------------

# mallory's table $table on her server, over an older store keeping $column
# of $type as unchecked images: refused on a remote store, read on a local
# one (trusted as the server's files are).
sub refused_where_untrusted
{
	my ($table, $column, $type) = @_;
	my ($ok, $out, $err) = run(as_mallory("SELECT $column FROM $table;"));
	if ($remote)
	{
		ok(!$ok, "$table: mallory's table on her own remote server is refused the older store");
		like($err, qr/42501.*keeps column "$column" of type $type as images that cannot be checked/s,
			"$table: naming the column and why");
	}
	else
	{
		ok($ok, "$table: a local store is trusted as the server's files are: mallory reads it");
	}
	return;
}

$node->safe_psql('utf8_db', q{
CREATE FOREIGN TABLE ts_new (id int, v tsvector) SERVER s OPTIONS (store 'ts_new', key 'id');
INSERT INTO ts_new VALUES (1, to_tsvector('simple', 'rollouts keep traces')), (2, ''::tsvector);
SELECT rollout_flush('ts_new');});
is($node->safe_psql('utf8_db', 'SELECT id, v FROM ts_new ORDER BY id'),
	"1|'keep':2 'rollouts':1 'traces':3\n2|", 'a new store reads tsvector values back');
my ($tsv) = grep { $_->{name} eq 'v' }
  @{ JSON::PP->new->decode($store->get('ts_new/_store.json'))->{columns} };
is($tsv->{encoding}, 'text', 'and keeps them as text, not as unchecked images');

# Only a superuser marks a server trusted.
my ($ok, $out, $err) = run(as_mallory(q{ALTER SERVER ms OPTIONS (ADD trusted 'true');}));
if ($remote)
{
	ok(!$ok, 'mallory may not mark her server trusted');
	like($err, qr/42501.*permission denied to mark a rollout_fdw server trusted/s,
		'with a clear error');
	$node->safe_psql('utf8_db', q{ALTER SERVER s OPTIONS (ADD trusted 'true');});
}

# A store as an earlier build wrote it: the column kept as images (here the
# image of an empty tsvector).
craft('legacy', '00000000', 'pg_catalog.tsvector', 3614);
relabel('legacy', encoding => 'image');
$node->safe_psql('utf8_db',
	q{CREATE FOREIGN TABLE legacy_su (id int, v tsvector) SERVER s OPTIONS (store 'legacy', key 'id');});
is($node->safe_psql('utf8_db', q{SELECT id, length(v), v = ''::tsvector FROM legacy_su}),
	'1|0|t', 'a trusted server reads the older store');
($ok, $out, $err) = run(q{SET rollout_fdw.check_trusted_images = on;
SELECT v FROM legacy_su;});
ok(!$ok, 'but not while checking trusted stores too');
like($err, qr/42501.*as images that cannot be checked/s, 'which it says');

$node->safe_psql('utf8_db', as_mallory(
	q{CREATE FOREIGN TABLE legacy_m (id int, v tsvector) SERVER ms OPTIONS (store 'legacy', key 'id');}));
refused_where_untrusted('legacy_m', 'v', 'tsvector');

# A marked server's trust goes with the credentials a superuser gave it (the
# PUBLIC mapping, or the environment's), not with those of a mapping a role
# has of its own, which may reach objects that role wrote: mallory reads the
# older store through the superuser's table with PUBLIC's mapping, and is
# refused once she has a mapping of her own (here with the same credentials).
if ($remote)
{
	$node->safe_psql('utf8_db', 'GRANT SELECT ON legacy_su TO mallory;');
	is($node->safe_psql('utf8_db', as_mallory('SELECT id, length(v) FROM legacy_su;')),
		'1|0', "a role reading a marked server with PUBLIC's mapping has its trust");
	my $public_options = $node->safe_psql('utf8_db', q{
SELECT string_agg(format('%s %L', split_part(o, '=', 1), substr(o, strpos(o, '=') + 1)), ', ')
  FROM pg_user_mappings, unnest(umoptions) o WHERE srvname = 's' AND usename = 'public';});
	$node->safe_psql('utf8_db', "CREATE USER MAPPING FOR mallory SERVER s OPTIONS ($public_options);");
	($ok, $out, $err) = run(as_mallory('SELECT v FROM legacy_su;'));
	ok(!$ok, 'a role with a mapping of its own does not');
	like($err, qr/42501.*keeps column "v" of type tsvector as images that cannot be checked/s,
		'and is refused the images that cannot be checked');
	$node->safe_psql('utf8_db', 'DROP USER MAPPING FOR mallory SERVER s;');
}


# A key of such a type: refused for a new store at its first use; a store an
# earlier build keyed by citext (images of text) still reads where trusted.
$node->safe_psql('utf8_db', 'CREATE EXTENSION citext;');
$node->safe_psql('utf8_db',
	q{CREATE FOREIGN TABLE ck_new (id citext, v int) SERVER s OPTIONS (store 'ck_new', key 'id');});
($ok, $out, $err) = run(q{INSERT INTO ck_new VALUES ('a', 1);});
ok(!$ok, 'a new store keyed by citext is refused');
like($err, qr/0A000.*key column "id" of store "ck_new" has a type whose values are stored as text/s,
	'as a key kept as text');

$node->safe_psql('utf8_db', as_mallory(q{
CREATE FOREIGN TABLE raw_ck (id text, v int) SERVER ms OPTIONS (store 'legacy_key', key 'id');
INSERT INTO raw_ck VALUES ('Abc', 1), ('abd', 2);
SELECT rollout_flush('raw_ck');
DROP FOREIGN TABLE raw_ck;}));
relabel('legacy_key', column => 'id', type => 'public.citext', typid => 0, image => undef);
$node->safe_psql('utf8_db',
	q{CREATE FOREIGN TABLE ck_old (id citext, v int) SERVER s OPTIONS (store 'legacy_key', key 'id');});
is($node->safe_psql('utf8_db', q{SELECT v FROM ck_old WHERE id = 'ABC'}), '1',
	'a citext-keyed store of an earlier build reads where trusted');

$node->safe_psql('utf8_db', as_mallory(
	q{CREATE FOREIGN TABLE ck_m (id citext, v int) SERVER ms OPTIONS (store 'legacy_key', key 'id');}));
refused_where_untrusted('ck_m', 'id', 'citext');

# --- a domain made again over another type ----------------------------------
# mallory writes bytes through a domain over bytea, then makes the domain
# again over jsonb: _store.json names the column's type "public.d_...".
# A store records what its images are, and refuses the new domain; one
# created before it did (the member removed here) relies on the checks.
sub domain_swap
{
	my ($name, $flush, $legacy) = @_;
	$node->safe_psql('utf8_db', as_mallory(qq{
CREATE DOMAIN public.d_$name AS bytea;
CREATE FOREIGN TABLE w_$name (id int, v public.d_$name) SERVER ms OPTIONS (store '$name', key 'id');
INSERT INTO w_$name VALUES (1, '\\x01000020ffffff0f00000000$pad');
} . ($flush ? "SELECT rollout_flush('w_$name');\n" : '') . qq{
DROP DOMAIN public.d_$name CASCADE;
DROP FOREIGN TABLE w_$name;
CREATE DOMAIN public.d_$name AS jsonb;
CREATE FOREIGN TABLE r_$name (id int, v public.d_$name) SERVER ms OPTIONS (store '$name', key 'id');}));
	relabel($name, image => undef) if $legacy;
	return;
}

domain_swap('swap_recorded', 1, 0);
($ok, $out, $err) = run(as_mallory('SELECT v FROM r_swap_recorded;'));
ok(!$ok, 'a domain made again over another type is refused');
like($err, qr/42804.*holds values of another type than d_swap_recorded here/s,
	'by what the store records of its images');

domain_swap('swap_unflushed', 0, 1);
($ok, $out, $err) = run(as_mallory('SELECT v FROM r_swap_unflushed;'));
ok(!$ok, 'unflushed rows of another column type are not read as the new one');
like($err, qr/XX001.*is a jsonb whose entries run past its end/s,
	'they are read from their WAL entry, checked');
($ok, $out, $err) = run(as_mallory(q{SELECT rollout_flush('r_swap_unflushed');}));
ok(!$ok, 'nor flushed as the new type');
like($err, qr/has unflushed rows written with other column types than this table's/,
	'which the flush says');

domain_swap('swap_flushed', 1, 1);
($ok, $out, $err) = run(as_mallory('SELECT v FROM r_swap_flushed;'));
ok(!$ok, "a domain's values are checked, even in a trusted store");
like($err, qr/XX001.*is a jsonb whose entries run past its end/s, 'naming the problem');

# --- int2vector keeps its 4-byte header ------------------------------------
$node->safe_psql('utf8_db', q{
CREATE FOREIGN TABLE vectors (id int, v int2vector) SERVER s OPTIONS (store 'vectors', key 'id');
INSERT INTO vectors VALUES (1, '7 8 9');
SELECT rollout_flush('vectors');});
is($node->safe_psql('utf8_db', q{SELECT v::text FROM vectors}), '7 8 9',
	'an int2vector reads back whole from a segment');
is($node->safe_psql('utf8_db', q{SET rollout_fdw.check_trusted_images = on; SELECT v::text FROM vectors}),
	'7 8 9', '... checked too');

# --- a table altered after the transaction wrote to it ----------------------
# Its rows are buffered with the columns it had: a later row formed, or the
# buffer read, with another type's descriptor would read an integer as a
# pointer.
$node->safe_psql('utf8_db', as_mallory(
	q{CREATE FOREIGN TABLE altered (id int, v text) SERVER ms OPTIONS (store 'altered', key 'id');}));
($ok, $out, $err) = run(as_mallory(q{
BEGIN;
INSERT INTO altered VALUES (1, 'x');
ALTER FOREIGN TABLE altered ALTER COLUMN v TYPE int8;
INSERT INTO altered VALUES (2, 140737488355328);
COMMIT;}));
ok(!$ok, 'a row written after the table was altered in the transaction is refused');
like($err, qr/rollout table "altered" changed after this transaction wrote to it/,
	'with a clear error');
($ok, $out, $err) = run(as_mallory(q{
BEGIN;
INSERT INTO altered VALUES (1, 'x');
ALTER FOREIGN TABLE altered ALTER COLUMN v TYPE int8;
SELECT * FROM altered;
COMMIT;}));
ok(!$ok, '... and so is reading the rows back');
like($err, qr/rollout table "altered" changed after this transaction wrote to it/,
	'with the same error');
is($node->safe_psql('utf8_db', 'SELECT count(*) FROM altered'), '0', 'and nothing was written');

# --- a store written by a database of another encoding ----------------------
# _store.json records the encoding of the database that created the store.  A
# database of another one checks every value it reads, even from a store it
# trusts: text a LATIN1 database wrote is not valid UTF-8.
$node->safe_psql('postgres',
	q{CREATE DATABASE latin1_db TEMPLATE template0 ENCODING 'LATIN1' LOCALE 'C';});
$node->safe_psql('latin1_db', 'CREATE EXTENSION rollout_fdw;' . $store->server_sql('s'));
$node->safe_psql('latin1_db', q{
CREATE FOREIGN TABLE accents (id int, t text) SERVER s OPTIONS (store 'latin1_text', key 'id');
INSERT INTO accents VALUES (1, convert_from('\xe9'::bytea, 'LATIN1'));
SELECT rollout_flush('accents');});
is($node->safe_psql('latin1_db', q{SELECT id, convert_to(t, 'LATIN1') FROM accents}),
	'1|\xe9', 'a LATIN1 database reads back the text it wrote');
$node->safe_psql('utf8_db',
	q{CREATE FOREIGN TABLE accents (id int, t text) SERVER s OPTIONS (store 'latin1_text', key 'id');});
($ok, $out, $err) = run('SELECT t FROM accents;');
ok(!$ok, 'a UTF-8 database does not read it as text of its own, though it trusts the store');
like($err, qr/XX001.*is text that is not valid in the database encoding/s,
	'it says the value is not valid in its encoding');

# Nor does a database of another encoding write rows into a store created
# in UTF-8: a UTF-8 database reads its store's text unchecked where it
# trusts it, and LATIN1 bytes written into it would be invalid there.
# Before, the write went through and the UTF-8 database returned the bytes.
$node->safe_psql('utf8_db', q{
CREATE FOREIGN TABLE accents_utf8 (id int, t text) SERVER s OPTIONS (store 'utf8_text', key 'id');
INSERT INTO accents_utf8 VALUES (1, 'é');});
$node->safe_psql('latin1_db',
	q{CREATE FOREIGN TABLE accents_utf8 (id int, t text) SERVER s OPTIONS (store 'utf8_text', key 'id');});
for my $write (q{INSERT INTO accents_utf8 VALUES (2, convert_from('\xe9'::bytea, 'LATIN1'))},
	q{UPDATE accents_utf8 SET t = 'x' WHERE id = 1},
	q{DELETE FROM accents_utf8 WHERE id = 1},
	q{COPY accents_utf8 FROM STDIN})
{
	my ($rc, $stdout, $stderr) = $node->psql('latin1_db', $write, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	isnt($rc, 0, "a LATIN1 database may not write a UTF-8 store: $write");
	like($stderr, qr/0A000: cannot write to foreign table "accents_utf8" from a database with encoding LATIN1/,
		'it is told why');
}
is($node->safe_psql('latin1_db', 'SELECT count(*) FROM accents_utf8'), '1',
	'the LATIN1 database still reads the store (checked)');
is($node->safe_psql('utf8_db', 'SELECT id, t FROM accents_utf8'), '1|é',
	'and the UTF-8 database reads what it wrote, nothing else');

# A _store.json that lists a column twice is corrupt: before, the column's
# second entry overwrote the first one's place in the schema, and the rows
# read back with that column always NULL.
$node->safe_psql('utf8_db', q{
CREATE FOREIGN TABLE twice (id int, v int) SERVER s OPTIONS (store 'twice', key 'id');
INSERT INTO twice VALUES (1, 10);});
{
	my $json = JSON::PP->new->canonical;
	my $definition = $json->decode($store->get('twice/_store.json'));
	my ($v) = grep { $_->{name} eq 'v' } @{ $definition->{columns} };
	push @{ $definition->{columns} }, {%$v};
	$store->put('twice/_store.json', $json->encode($definition));
}
($ok, $out, $err) = run('SELECT * FROM twice');
ok(!$ok && $err =~ /XX001: object "twice\/_store\.json" is corrupt\n.*DETAIL:  Column "v" is listed twice\./,
	'a _store.json listing a column twice is corrupt, and says which') or diag($err);

unlike(slurp_file($node->logfile), qr/terminated by signal/,
	'no backend died on any of it');
$node->stop;
done_testing();
