
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (both clusters preload the writer in every run; scripts/test.sh)
#
# 070_pg_upgrade.pl — pg_upgrade of a cluster with rollout tables, following
# README "Upgrading PostgreSQL with pg_upgrade":
#  - pg_upgrade succeeds although the new cluster preloads the library with
#    its sweeper on "postgres" (pg_upgrade drops and creates that database;
#    a connected sweeper made the restore fail);
#  - the procedure (merge every table first; move the default location's
#    folder into the new data directory) keeps every row, in the embedded
#    default location and in a file:// store outside the data directory;
#  - the new cluster (a new system identifier: a new shard) writes and reads
#    both stores, and the old shard's rows stay visible beside its own.

use strict;
use warnings;

use File::Path qw(rmtree);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node shard_of);
use Test::More;

my $store = RolloutStore->for_test('070_pg_upgrade', backend => 'file');

my $old = writer_node('old_cluster');
$store->create_extension_and_server($old);
$old->safe_psql('postgres', q{
CREATE SERVER embedded FOREIGN DATA WRAPPER rollout_fdw;
CREATE FOREIGN TABLE d (id int, v text) SERVER embedded OPTIONS (store 'up_default', key 'id');
CREATE FOREIGN TABLE e (id int, v text) SERVER s OPTIONS (store 'up_external', key 'id');
INSERT INTO d SELECT g, 'old ' || g FROM generate_series(1, 1000) g;
INSERT INTO e SELECT g, 'old ' || g FROM generate_series(1, 1000) g;
DELETE FROM d WHERE id <= 10;
DELETE FROM e WHERE id <= 10;
});
my $before = q{SELECT (SELECT count(*) || '/' || sum(id) FROM d) || ' ' || (SELECT count(*) || '/' || sum(id) FROM e)};
my $expected = $old->safe_psql('postgres', $before);
is($expected, '990/500445 990/500445', 'the old cluster holds 990 rows in each store');

# the procedure (README, as written there): stop writing, merge every
# rollout table until nothing is left, check, stop the cluster
$old->safe_psql('postgres', q{
DO $$
DECLARE
  t regclass;
BEGIN
  FOR t IN SELECT ft.ftrelid::regclass
           FROM pg_foreign_table ft
           JOIN pg_foreign_server s ON s.oid = ft.ftserver
           JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
           WHERE w.fdwname = 'rollout_fdw'
  LOOP
    WHILE (SELECT generations_merged FROM rollout_merge(t)) > 0 LOOP
    END LOOP;
  END LOOP;
END $$;
});
is($old->safe_psql('postgres', q{
SELECT count(*)
FROM pg_foreign_table ft
JOIN pg_foreign_server s ON s.oid = ft.ftserver
JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
CROSS JOIN LATERAL rollout_observe(ft.ftrelid) o
WHERE w.fdwname = 'rollout_fdw' AND (o.wal_entries > 0 OR o.generations > 0)}),
	'0', 'nothing of the old cluster is left unflushed or unmerged');
my $old_shard = shard_of($old);
$old->stop;

# the new cluster preloads the library, its sweeper configured for "postgres"
my $new = writer_node('new_cluster');
$new->stop;
my $bindir = $new->config_data('--bindir');
my $workdir = PostgreSQL::Test::Utils::tempdir('upgrade');
my $sockdir = PostgreSQL::Test::Utils::tempdir_short();
chdir($workdir) or die "chdir $workdir: $!";
command_ok(
	[
		"$bindir/pg_upgrade", '--no-sync',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $bindir, '-B', $bindir,
		'-p', $old->port, '-P', $new->port,
		'-s', $sockdir,
	],
	'pg_upgrade succeeds with the library preloaded in the new cluster');

# the embedded default location is a folder of the data directory, which
# pg_upgrade does not copy: move it
my $folder = $old->data_dir . '/rollout_fdw';
ok(-d $folder, 'the old data directory holds the default location');
rmtree($new->data_dir . '/rollout_fdw');
rename($folder, $new->data_dir . '/rollout_fdw') or die "rename $folder: $!";

$new->start;
is($new->safe_psql('postgres', $before), $expected, 'after the upgrade both stores hold the same rows');
isnt(shard_of($new), $old_shard, 'the new cluster has a system identifier, so a shard, of its own');
$new->safe_psql('postgres', q{
INSERT INTO d SELECT g, 'new ' || g FROM generate_series(991, 1010) g;
INSERT INTO e SELECT g, 'new ' || g FROM generate_series(991, 1010) g;
DELETE FROM d WHERE id = 500;
DELETE FROM e WHERE id = 500;
});
is($new->safe_psql('postgres', q{SELECT count(*) || ' ' || count(*) FILTER (WHERE v LIKE 'new %') FROM d}),
	'999 20', 'the new cluster writes the default location beside the old rows');
is($new->safe_psql('postgres', q{SELECT count(*) || ' ' || count(*) FILTER (WHERE v LIKE 'new %') FROM e}),
	'999 20', 'and the external store');
$new->safe_psql('postgres', q{SELECT rollout_merge('d'); SELECT rollout_merge('e')});
is($new->safe_psql('postgres', q{SELECT (SELECT count(*) FROM d) || ' ' || (SELECT count(*) FROM e)}),
	'999 999', 'and merges them');

unlike(slurp_file($new->logfile), qr/terminated by signal|PANIC/, 'no backend crashed');
$new->stop;
done_testing();
