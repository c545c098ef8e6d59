
# Copyright (c) rollout_fdw authors
#
# 026_privileges.pl — nobody borrows the server's files or credentials
# (issue 10, point 1; README "Privileges").
#
# A role "app" that is no superuser has USAGE on the wrapper and CREATE on
# the schema, as postgres_fdw users often have.  The test shows, with a
# recording stand-in for a hostile S3 endpoint (test/perl/RecordingS3.pm)
# and the suite's Ceph RGW (which checks signatures):
#   1. a table owned by app never uses the server's environment credentials
#      (AWS_* in the postmaster's environment): not for app's queries, not
#      for a superuser's, not for maintenance, not for the sweeper; with no
#      mapping of its own nothing at all reaches the endpoint, and with one
#      only app's own key does;
#   2. a superuser's table on a superuser's server does use them;
#   3. maintenance acts with the table owner's user mapping, whoever calls
#      it;
#   4. preloaded: a server with the same location string but another
#      endpoint shares nothing with the real store's shared-memory writer:
#      app's server pointed at the recording endpoint sees none of the
#      unflushed rows another role's table holds in the memtable, and the
#      endpoint receives none of their bytes; and a group-commit leader
#      writes only the transactions that came with its own credentials
#      (two commits queued while one leader holds make one WAL entry with the
#      same credentials, two with different ones; moto takes any key);
#   5. an _store.json that cannot be read (a directory, no permission) is an
#      error, never taken for a new store;
#   6. the store-name pin holds for ALTER TABLE and RENAME, and a table name
#      that would reach into another store's folder is refused;
#   7. rows an INSERT through a view routes into a rollout partition are
#      written with the view owner's mapping, not the inserter's.
# Local locations and ca_file (superuser, pg_write_server_files,
# pg_read_server_files) are covered by the pg_regress suite (validation).

use strict;
use warnings;

use File::Path qw(make_path);
use FindBin;
use JSON::PP;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RecordingS3;
use RolloutStore;
use RolloutTest qw(mode_node shard_of wait_for_fault release_faults hold_faults);
use Test::More;

my $have_rgw = defined $ENV{ROLLOUT_TEST_RGW_ENDPOINT};
my $ENV_KEY = $have_rgw ? $ENV{ROLLOUT_TEST_RGW_ACCESS_KEY_ID} : 'AKIAENVIRONMENTKEY00';
my $ENV_SECRET = $have_rgw ? $ENV{ROLLOUT_TEST_RGW_SECRET_ACCESS_KEY} : 'environment-secret';

my $node;
{
	# the postmaster's environment holds credentials, as on a cloud VM
	local $ENV{AWS_ACCESS_KEY_ID} = $ENV_KEY;
	local $ENV{AWS_SECRET_ACCESS_KEY} = $ENV_SECRET;
	# the sweeper visits every rollout table of "postgres" each second
	# (without flushing: rows stay in the memtable for point 4)
	$node = mode_node('privileges',
		conf => [
			RolloutTest::preload()
			? (qq{
rollout_fdw.worker_databases = 'postgres'
rollout_fdw.flush_interval = 0
rollout_fdw.gc_interval = 0
})
			: ()
		]);
}
$node->safe_psql('postgres', q{
CREATE EXTENSION rollout_fdw;
CREATE ROLE app LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER rollout_fdw TO app;
GRANT CREATE ON SCHEMA public TO app;
});
sub as_app
{
	my ($sql) = @_;
	return $node->psql('postgres', "SET ROLE app;\n$sql");
}

# --- 1. a non-superuser's table never falls back to the environment
my $hostile = RecordingS3->start;
my $endpoint = $hostile->endpoint;
my ($ret, $out, $err) = as_app(qq{
CREATE SERVER evil FOREIGN DATA WRAPPER rollout_fdw
	OPTIONS (location 's3://victim-bucket/prod', endpoint '$endpoint', region 'us-east-1');
CREATE FOREIGN TABLE loot (id int, v text) SERVER evil OPTIONS (store 'loot');
});
is($ret, 0, 'app may create a server and a table at a remote location') or diag($err);
($ret, $out, $err) = as_app('SELECT * FROM loot');
isnt($ret, 0, "app's query without a user mapping fails");
like($err, qr/no S3 credentials for store "s3:\/\/victim-bucket\/prod"/, '... for lack of credentials');
like($err, qr/environment credentials serve only tables and servers owned by superusers/,
	'... and says why the environment does not serve');
($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM loot');
isnt($ret, 0, "a superuser's query of app's table does not use them either");
($ret, $out, $err) = $node->psql('postgres', "SELECT * FROM rollout_flush('loot')");
isnt($ret, 0, "nor does maintenance of app's table called by a superuser");
like($err, qr/no S3 credentials/, '... no credentials');
if (RolloutTest::preload())
{
	my $deadline = time + 30;
	sleep 1 until time > $deadline
	  || slurp_file($node->logfile) =~ /rollout_fdw sweeper: store "loot": no S3 credentials/;
	like(slurp_file($node->logfile), qr/rollout_fdw sweeper: store "loot": no S3 credentials/,
		'the sweeper, visiting app\'s table, gets no credentials either');
}
my @before_mapping = $hostile->requests;
is(scalar(@before_mapping), 0, 'not one request reached the endpoint');

($ret, $out, $err) = as_app(q{
CREATE USER MAPPING FOR app SERVER evil OPTIONS (access_key_id 'AKIAAPPOWNKEY0000000', secret_access_key 'app-secret');
SELECT count(*) FROM loot;
});
is($ret, 0, 'with a mapping of its own app reads (an empty store)') or diag($err);
sleep 2 if RolloutTest::preload();    # sweeper passes with the mapping
my @requests = $hostile->requests;
ok(@requests > 0, 'requests now reach the endpoint: ' . scalar(@requests));
is(scalar(grep { ($_->{headers}{authorization} // '') =~ /Credential=AKIAAPPOWNKEY0000000\// } @requests),
	scalar(@requests), '... every one signed with app\'s own key');
is(scalar(grep { JSON::PP->new->canonical->encode($_) =~ /\Q$ENV_KEY\E|\Q$ENV_SECRET\E/ } @requests),
	0, '... none carries the environment\'s key or secret');
($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM loot');
isnt($ret, 0, "a superuser still cannot read app's table with the environment credentials");

SKIP:
{
	skip 'Ceph RGW is not running (scripts/test.sh starts it)', 9 unless $have_rgw;
	my $rgw = RolloutStore->for_test('026_rgw', backend => 'rgw');
	my $location = $rgw->location;
	my $rgw_endpoint = $ENV{ROLLOUT_TEST_RGW_ENDPOINT};
	my $region = $ENV{ROLLOUT_TEST_RGW_REGION} || 'us-east-1';

	# --- 2. superusers' tables on superusers' servers use the environment
	$node->safe_psql('postgres', qq{
CREATE SERVER rgw_env FOREIGN DATA WRAPPER rollout_fdw
	OPTIONS (location '$location', endpoint '$rgw_endpoint', region '$region');
CREATE FOREIGN TABLE envt (id int) SERVER rgw_env OPTIONS (store 'env_ok');
INSERT INTO envt SELECT generate_series(1, 3);
GRANT SELECT ON envt TO app;
});
	is($node->safe_psql('postgres', 'SELECT count(*) FROM envt'), '3',
		"a superuser's table on a superuser's server works with the environment credentials");
	($ret, $out, $err) = as_app('SELECT count(*) FROM envt');
	is($out, '3', 'and app, granted SELECT, reads it (the owner chose what the credentials reach)');

	# --- 3. maintenance acts with the owner's mapping
	$node->safe_psql('postgres', qq{
CREATE SERVER rgw_shared FOREIGN DATA WRAPPER rollout_fdw
	OPTIONS (location '$location', endpoint '$rgw_endpoint', region '$region');
GRANT USAGE ON FOREIGN SERVER rgw_shared TO app;
});
	($ret, $out, $err) = as_app(qq{
CREATE USER MAPPING FOR app SERVER rgw_shared
	OPTIONS (access_key_id '$ENV{ROLLOUT_TEST_RGW_ACCESS_KEY_ID}', secret_access_key '$ENV{ROLLOUT_TEST_RGW_SECRET_ACCESS_KEY}');
CREATE FOREIGN TABLE mine (id int) SERVER rgw_shared OPTIONS (store 'apps');
INSERT INTO mine SELECT generate_series(1, 5);
});
	is($ret, 0, 'app writes its own table with its own mapping') or diag($err);
	is($node->safe_psql('postgres', "SELECT rows_flushed FROM rollout_flush('mine')"), '5',
		"a superuser's rollout_flush of app's table runs with app's mapping");
	($ret, $out, $err) = as_app(q{DROP USER MAPPING FOR app SERVER rgw_shared; INSERT INTO mine VALUES (6)});
	isnt($ret, 0, 'without the mapping app cannot write');
	($ret, $out, $err) = $node->psql('postgres', "SELECT * FROM rollout_merge('mine')");
	isnt($ret, 0, "and a superuser's maintenance of app's table does not fall back to the environment");
	like($err, qr/no S3 credentials/, '... no credentials');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM envt'), '3', 'the superuser\'s own table is unaffected');
	ok(defined $rgw->get('apps/_store.json'), "app's store exists on RGW");
}

# --- 4. the shared-memory writer belongs to one endpoint
SKIP:
{
	skip 'the shared-memory writer runs only when preloaded', 4 unless RolloutTest::preload();
	skip 'Ceph RGW is not running (scripts/test.sh starts it)', 4 unless $have_rgw;
	# the real store, on RGW, written by a superuser through a mapping of
	# its own (no PUBLIC mapping app could use)
	my $real = RolloutStore->for_test('026_memtable', backend => 'rgw');
	my $loc = $real->location;
	my $sql = $real->server_sql('real_store');
	$sql =~ s/FOR PUBLIC/FOR postgres/;
	$node->safe_psql('postgres', $sql);
	$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE secrets (id int, v text) SERVER real_store OPTIONS (store 'secrets');
INSERT INTO secrets SELECT g, 'SECRET-MARKER-' || g FROM generate_series(1, 10) g;
});
	is($node->safe_psql('postgres', q{SELECT memtable_rows FROM rollout_stat_stores WHERE store = 'secrets'}),
		'10', 'ten rows wait in the memtable');
	# app's server names the same location string, at its own endpoint
	($ret, $out, $err) = as_app(qq{
CREATE SERVER lookalike FOREIGN DATA WRAPPER rollout_fdw
	OPTIONS (location '$loc', endpoint '$endpoint');
CREATE USER MAPPING FOR app SERVER lookalike OPTIONS (access_key_id 'AKIAAPPOWNKEY0000000', secret_access_key 'x');
CREATE FOREIGN TABLE peek (id int, v text) SERVER lookalike OPTIONS (store 'secrets');
SELECT count(*), (SELECT unflushed_rows FROM rollout_observe('peek')) FROM peek;
});
	is($out, '0|0', 'app sees no row and no unflushed row of the memtable') or diag($err);
	is(scalar(grep { JSON::PP->new->canonical->encode($_) =~ /SECRET-MARKER/ } $hostile->requests),
		0, 'none of the rows reached app\'s endpoint');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM secrets'), '10', 'the owner reads all ten');
}


SKIP:
{
	skip 'the shared-memory writer runs only when preloaded', 6 unless RolloutTest::preload();
	skip 'moto is not running (scripts/test.sh starts it)', 6 unless $ENV{ROLLOUT_TEST_S3_ENDPOINT};
	my $moto = RolloutStore->for_test('026_groups', backend => 's3');
	my $sql = $moto->server_sql('groups');
	$sql =~ s/CREATE USER MAPPING.*//s;
	$node->safe_psql('postgres', $sql . q{
CREATE USER MAPPING FOR postgres SERVER groups OPTIONS (access_key_id 'AKIAGROUPOWNER000000', secret_access_key 'owner');
GRANT USAGE ON FOREIGN SERVER groups TO app;
CREATE FOREIGN TABLE grouped (id int, who text) SERVER groups OPTIONS (store 'grouped');
GRANT INSERT, SELECT ON grouped TO app;
ALTER SYSTEM SET rollout_fdw.wal_pipeline_depth = 1;
SELECT pg_reload_conf();
INSERT INTO grouped VALUES (0, 'claim');
});
	($ret, $out, $err) = as_app(q{CREATE USER MAPPING FOR app SERVER groups OPTIONS (access_key_id 'AKIAGROUPAPP00000000', secret_access_key 'app')});
	is($ret, 0, 'app has a mapping with other credentials') or diag($err);
	$node->poll_query_until('postgres',
		q{SELECT current_setting('rollout_fdw.wal_pipeline_depth') = '1'})
	  or die 'the reload did not set wal_pipeline_depth';
	my $shard = shard_of($node);
	my $wal = "grouped/shards/$shard/wal";

	# two commits while one leader waits: $first leads and holds before it
	# takes the queue (a fault point, until the test releases it); $second
	# queues behind it (one entry in flight at a time) and is in the queue
	# when $first takes it
	my $entries_for = sub {
		my ($second_role, $id) = @_;
		my @before = $moto->wal_positions($wal);
		my $first = $node->background_psql('postgres');
		my $second = $node->background_psql('postgres');
		$second->query_safe("SET ROLE $second_role");
		my $second_pid = $second->query_safe('SELECT pg_backend_pid()');
		$first->query_safe(q{SET rollout_fdw.fail_at = 'group_commit.before_take:hold'});
		my $offset = -s $node->logfile;
		$first->query_until(qr/go/, "\\echo go\nINSERT INTO grouped VALUES ($id, 'first');\n");
		wait_for_fault($node, 'group_commit.before_take', $offset);
		# $second's commit waits for the held leader (Extension): it is queued
		$second->query_until(qr/go/, "\\echo go\nINSERT INTO grouped VALUES ($id + 1, 'second');\n");
		$node->poll_query_until('postgres',
			"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $second_pid")
		  or die 'the second commit did not queue';
		release_faults($node);
		$first->query_safe('SELECT 1');
		$second->query_safe('SELECT 1');
		hold_faults($node);
		$first->quit;
		$second->quit;
		my %seen = map { $_ => 1 } @before;
		return map { $moto->wal_entry($wal, $_)->{transactions} } grep { !$seen{$_} } $moto->wal_positions($wal);
	};
	is(join(',', $entries_for->('postgres', 10)), '2',
		'two commits with the same credentials queued together: one WAL entry of two transactions');
	is(join(',', $entries_for->('app', 20)), '1,1',
		'with different credentials: two entries, each written with its own transaction\'s credentials');
	is($node->safe_psql('postgres', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM grouped'),
		'0,10,11,20,21', 'every row committed once');
	# one transaction writing with two roles' mappings is refused: its rows
	# become one entry, written with one set of credentials (before, app's row
	# went in with the superuser's)
	($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
INSERT INTO grouped VALUES (30, 'postgres');
SET LOCAL ROLE app;
INSERT INTO grouped VALUES (31, 'app');
COMMIT;});
	like($err, qr/a transaction can write to rollout table "grouped" with only one user mapping's credentials/,
		'a transaction cannot write with two roles\' mappings');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM grouped WHERE id >= 30'), '0', '... and none of its rows is committed');
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET rollout_fdw.wal_pipeline_depth; SELECT pg_reload_conf()');
}

# --- 5. an unreadable _store.json is an error, not a new store
my $files = RolloutStore->for_test('026_files', backend => 'file');
$node->safe_psql('postgres', $files->server_sql('files'));
make_path($files->path('broken/_store.json'));
$node->safe_psql('postgres', 'CREATE FOREIGN TABLE broken (id int) SERVER files');
for my $sql ('SELECT * FROM broken', 'INSERT INTO broken VALUES (1)')
{
	($ret, $out, $err) = $node->psql('postgres', $sql);
	isnt($ret, 0, "a directory named _store.json: $sql fails");
	like($err, qr/object "broken\/_store\.json" in store ".*" is not a regular file/, '... naming the object');
}
is(join(',', $files->list('broken/')), '', 'nothing was written into the store');
$node->safe_psql('postgres', q{CREATE FOREIGN TABLE locked (id int) SERVER files; INSERT INTO locked VALUES (1)});
chmod 0, $files->path('locked/_store.json');
($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM locked');
isnt($ret, 0, 'an _store.json without read permission fails the query');
like($err, qr/could not open object "locked\/_store\.json".*Permission denied/, '... with the reason');
chmod 0600, $files->path('locked/_store.json');
is($node->safe_psql('postgres', 'SELECT count(*) FROM locked'), '1', 'readable again');

# --- 6. the store-name pin
$node->safe_psql('postgres', q{CREATE FOREIGN TABLE payroll (id int, salary int) SERVER files; INSERT INTO payroll VALUES (1, 100)});
($ret, $out, $err) = $node->psql('postgres', q{CREATE FOREIGN TABLE "payroll/shards" (id int) SERVER files});
isnt($ret, 0, 'a table named "payroll/shards" needs an explicit store');
like($err, qr/not a valid store name/, '... its name is no store name');
$node->safe_psql('postgres', q{CREATE FOREIGN TABLE innocent (id int) SERVER files; INSERT INTO innocent VALUES (7)});
($ret, $out, $err) = $node->psql('postgres', q{ALTER TABLE innocent OPTIONS (DROP store)});
like($err, qr/cannot drop option "store"/, 'ALTER TABLE cannot drop the pin');
$node->safe_psql('postgres', q{ALTER TABLE innocent RENAME TO "payroll/shards"});
$node->safe_psql('postgres', q{INSERT INTO "payroll/shards" VALUES (8)});
is($node->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM "payroll/shards"}), '7,8',
	'renamed, the table still uses its own store');
is(join(',', grep { m{^payroll/shards/(_store\.json|_shards|shards|base|ingest)(/|$)} } $files->list('payroll/')), '',
	"no other store's objects were created inside the payroll store's folder");
is(join(',', grep { m{/_store\.json$} } $files->list('')), 'innocent/_store.json,locked/_store.json,payroll/_store.json',
	'... every store has its _store.json at its own top');
is($node->safe_psql('postgres', 'SELECT * FROM payroll'), '1|100', 'the payroll store is as it was');

# --- the DDL check is for a table's owner: anyone else could only lock the
# table to the end of a transaction (holding off its ALTER and DROP)
($ret, $out, $err) = as_app(q{BEGIN; SELECT rollout_fdw_check_table('payroll', false); SELECT count(*) FROM pg_locks WHERE relation = 'payroll'::regclass::oid AND pid = pg_backend_pid(); COMMIT;});
isnt($ret, 0, "app cannot run the DDL check on the superuser's table");
like($err, qr/must be owner of foreign table payroll/, '... it must own it');
is($node->safe_psql('postgres', q{SELECT rollout_fdw_check_table('payroll', false)}), '',
	'its owner can (nothing to pin)');
# ALTER ... OWNER TO a role its caller is a member of without inheriting
# its rights: the trigger's check runs as that caller after the change
$node->safe_psql('postgres', q{
CREATE ROLE team NOLOGIN;
CREATE ROLE lead LOGIN NOINHERIT IN ROLE team;
GRANT CREATE ON SCHEMA public TO team, lead;
GRANT USAGE ON FOREIGN SERVER evil TO lead;});
($ret, $out, $err) = $node->psql('postgres', q{SET ROLE lead;
CREATE FOREIGN TABLE handed_over (id int) SERVER evil OPTIONS (store 'handed_over');
ALTER FOREIGN TABLE handed_over OWNER TO team;});
is($ret, 0, 'a NOINHERIT member of a role can hand its rollout table over to that role') or diag($err);
is($node->safe_psql('postgres', q{SELECT relowner::regrole FROM pg_class WHERE relname = 'handed_over'}), 'team',
	'... which then owns it');

# --- an installation of version 0.1 updated (to 0.2, then 0.9) gets the pin
# on ALTER TABLE, the privileges of rollout_stat_stores and its new columns
$node->safe_psql('postgres', 'CREATE DATABASE upgraded');
$node->safe_psql('upgraded', q{CREATE EXTENSION rollout_fdw VERSION '0.1'});
my $tags = q{SELECT array_to_string(evttags, ',') FROM pg_event_trigger WHERE evtname = 'rollout_fdw_ddl_check'};
is($node->safe_psql('upgraded', $tags), 'CREATE FOREIGN TABLE,ALTER FOREIGN TABLE', 'version 0.1 as it was');
is($node->safe_psql('upgraded', q{SELECT has_function_privilege('app', 'rollout_stat_stores()', 'EXECUTE')}),
	't', 'in 0.1 anyone could read the statistics of every store');
$node->safe_psql('upgraded', q{ALTER EXTENSION rollout_fdw UPDATE TO '0.2'});
# a database still at 0.2 declares 28 columns; this build's function has more
is($node->safe_psql('upgraded', q{SELECT count(*) = (SELECT count(*) FROM rollout_stat_stores() s WHERE s.errors >= 0) FROM rollout_stat_stores}),
	't', 'rollout_stat_stores works in a database still at 0.2');
$node->safe_psql('upgraded', 'ALTER EXTENSION rollout_fdw UPDATE');
is($node->safe_psql('upgraded', q{SELECT extversion FROM pg_extension WHERE extname = 'rollout_fdw'}), '0.9',
	'ALTER EXTENSION ... UPDATE goes to 0.9');
my $trigger_source = q{SELECT prosrc FROM pg_proc WHERE proname = 'rollout_fdw_ddl_check'};
is($node->safe_psql('upgraded', $trigger_source), $node->safe_psql('postgres', $trigger_source),
	'... whose event trigger function is a new installation\'s');
like($node->safe_psql('upgraded', $trigger_source), qr/pg_catalog\.format\(/,
	'... which names format() qualified (059_search_path.pl)');
is($node->safe_psql('upgraded', q{SELECT pg_get_function_result('rollout_stores(name)'::regprocedure)}),
	$node->safe_psql('postgres', q{SELECT pg_get_function_result('rollout_stores(name)'::regprocedure)}),
	'... with rollout_stores as a new installation has it');
is($node->safe_psql('upgraded',
		q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'rollout_stat_stores'::regclass AND attnum > 26}),
	'shared_writer,errors,cache_hits,cache_misses,cache_hit_bytes,cache_miss_bytes,rows_deleted,wal_puts_pipelined,wal_fillers',
	'... whose rollout_stat_stores has the disk cache counters, rows_deleted and the pipeline counters');
is($node->safe_psql('upgraded',
		q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'rollout_stat_stores'::regclass AND attnum > 0}),
	$node->safe_psql('postgres',
		q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'rollout_stat_stores'::regclass AND attnum > 0}),
	'... the same columns as a new installation');
is($node->safe_psql('upgraded', $tags), 'CREATE FOREIGN TABLE,ALTER FOREIGN TABLE,ALTER TABLE',
	'the updated trigger also sees ALTER TABLE');
is($node->safe_psql('upgraded', q{SELECT has_function_privilege('app', 'rollout_stat_stores()', 'EXECUTE')}),
	'f', 'and the statistics are for monitoring roles only');
$node->safe_psql('upgraded', q{CREATE SERVER s FOREIGN DATA WRAPPER rollout_fdw; CREATE FOREIGN TABLE kept (id int) SERVER s});
($ret, $out, $err) = $node->psql('upgraded', q{ALTER TABLE kept OPTIONS (DROP store)});
like($err, qr/cannot drop option "store"/, 'the pin holds after the update');

# --- 7. rows routed into a rollout partition use the view owner's mapping
# An INSERT through app's view over app's partitioned table, by a role with a
# mapping of its own, reaches the rollout partition with app's credentials,
# as an INSERT through a view naming a rollout table does (postgres_fdw
# chooses the same).  Before, the routed partition, which has no range table
# entry of its own, used the inserter's mapping.
$node->safe_psql('postgres', 'CREATE ROLE clerk LOGIN');
($ret, $out, $err) = as_app(q{
CREATE USER MAPPING FOR clerk SERVER evil OPTIONS (access_key_id 'AKIACLERKOWNKEY00000', secret_access_key 'clerk-secret');
CREATE TABLE parted (id int, v text) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE parted_r PARTITION OF parted FOR VALUES FROM (0) TO (1000) SERVER evil OPTIONS (store 'routed');
CREATE VIEW parted_v AS SELECT * FROM parted;
GRANT INSERT ON parted_v TO clerk;
});
is($ret, 0, 'app makes a view over a partitioned table with a rollout partition') or diag($err);
my $seen = scalar($hostile->requests);
$node->psql('postgres', "SET ROLE clerk;
INSERT INTO parted_v VALUES (1, 'routed')");
my @routed = ($hostile->requests)[ $seen .. scalar($hostile->requests) - 1 ];
ok(@routed > 0, "clerk's INSERT through the view reached the endpoint: " . scalar(@routed) . ' requests');
is(scalar(grep { ($_->{headers}{authorization} // '') =~ /Credential=AKIAAPPOWNKEY0000000\// } @routed),
	scalar(@routed), "... every one signed with the view owner's key");
is(scalar(grep { JSON::PP->new->canonical->encode($_) =~ /AKIACLERKOWNKEY00000|clerk-secret/ } @routed),
	0, "... none with the inserter's");
$hostile->stop;

unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC/, 'no backend crashed');
$node->stop;
done_testing();
