
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its cluster preloads the writer in every run; scripts/test.sh)
#
# 059_search_path.pl — what the extension runs with a superuser's rights
# resolves no name through a schema other roles can write (issue:
# deployment safety, privileges).
#
# Two pieces of the extension run SQL on behalf of whoever is around: the
# DDL event trigger, as the role running CREATE or ALTER (a superuser too),
# and the sweeper, which lists the rollout tables as a superuser.  Both name
# functions and operators.  A role that may create objects in a schema on
# the search_path (here: public, as in databases created before
# PostgreSQL 15) defines closer matches than pg_catalog's, each of which
# would make it a superuser and note the call:
#   - format(text, regclass, text), which the event trigger's
#     format('ALTER FOREIGN TABLE %s OPTIONS (ADD store %L)', ...) picks over
#     pg_catalog's variadic format() when a superuser creates a rollout table
#     without the store option;
#   - the operator =(oid, regclass), which the sweeper's query
#     (d.classid = 'pg_catalog.pg_proc'::regclass) picks over oid = oid.
# Neither may run: the event trigger's function qualifies every name
# (extension version 0.9), the sweeper empties its search_path.  The table still
# gets its pin, and the sweeper still finds and flushes it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node poll_until);
use Test::More;

my $node = writer_node('search_path', 'rollout_fdw.flush_interval' => 1);
my $store = RolloutStore->for_test('059_search_path', backend => 'file');
$store->create_extension_and_server($node);

$node->safe_psql('postgres', q{
CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO mallory;
SET ROLE mallory;
CREATE TABLE public.calls (what text);
GRANT INSERT ON public.calls TO PUBLIC;
CREATE FUNCTION public.promote(what text) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	RAISE LOG 'mallory''s % called in %', what, pg_catalog.current_setting('application_name');
	INSERT INTO public.calls VALUES (what);
	EXECUTE 'ALTER ROLE mallory SUPERUSER';
END $f$;
CREATE FUNCTION public.format(text, regclass, text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM public.promote('format');
	RETURN pg_catalog.format($1, $2, $3);
END $f$;
CREATE FUNCTION public.oid_is(oid, regclass) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM public.promote('operator');
	RETURN $1 OPERATOR(pg_catalog.=) $2::oid;
END $f$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.oid_is);
RESET ROLE;});
is($node->safe_psql('postgres', q{SELECT format('%s', 'pg_class'::regclass, 'y'), 'pg_class'::regclass::oid = 'pg_class'::regclass}),
	'pg_class|t', "mallory's format() and = answer like pg_catalog's");
is($node->safe_psql('postgres', q{SELECT string_agg(what, ',' ORDER BY what) FROM public.calls}), 'format,operator',
	'... and are what a superuser with the default search_path calls');
$node->safe_psql('postgres', q{DELETE FROM public.calls; ALTER ROLE mallory NOSUPERUSER;});

# a superuser creates a rollout table: the event trigger pins its store
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE t (id int, v text) SERVER s;
INSERT INTO t VALUES (1, 'one');});
is($node->safe_psql('postgres', q{SELECT array_to_string(ftoptions, ',') FROM pg_foreign_table WHERE ftrelid = 't'::regclass::oid}),
	'store=t', 'the event trigger pinned the store of a table created by a superuser');

# the sweeper lists the tables, and flushes this one
ok(defined poll_until($node, q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 't'}, '0', 60),
	'the sweeper found the table and flushed it');
$node->safe_psql('postgres', q{INSERT INTO t VALUES (2, 'two')});
ok(defined poll_until($node, q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 't'}, '0', 60),
	'... again, after more passes');
is($node->safe_psql('postgres', q{SELECT string_agg(v, ',' ORDER BY id) FROM t}), 'one,two', 'the rows are there');

is($node->safe_psql('postgres', q{SELECT coalesce(string_agg(what, ','), 'none') FROM public.calls}), 'none',
	"neither the event trigger nor the sweeper called mallory's format() or =");
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
	'mallory is not a superuser');

done_testing();
