
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 009_pg_cron.pl — compaction scheduled from pg_cron, as docs/MAINTENANCE.md
# shows it: the job runs in a background worker, finds enough fragments
# outside the quiet hours, compacts, and every row survives.  pg_cron 1.4 has
# minute granularity, so the test waits for the next minute boundary.  Runs
# against every backend (test/perl/RolloutStore.pm): the job's worker reaches
# a remote store through the server's user mapping like any session.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cron');
$node->init;
my $preload = 'pg_cron';
$preload .= ",$ENV{ROLLOUT_TEST_PRELOAD}" if $ENV{ROLLOUT_TEST_PRELOAD};
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = '$preload'
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 16
});
$node->start;

my $store = RolloutStore->for_test('009_pg_cron');
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron');
$store->create_extension_and_server($node);
$node->safe_psql(
	'postgres', qq{
CREATE FOREIGN TABLE steps (id int, v int) SERVER s OPTIONS (store 'cron_steps');
});

# four fragments: four merged batches, the last one updating keys of the first
for my $batch (0 .. 3)
{
	my $first = $batch == 3 ? 1 : $batch * 100 + 1;
	$node->safe_psql('postgres',
		"INSERT INTO steps SELECT g, g + $batch * 1000 FROM generate_series($first, $first + 99) g");
	$node->safe_psql('postgres', "SELECT rollout_merge('steps')");
}
my $before = $node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM steps');
is($before, '300|' . (45150 + 100 * 1000 + 100 * 2000 + 100 * 3000),
	'four batches, the last one upserting the first');
is($node->safe_psql('postgres', "SELECT fragments FROM rollout_observe('steps')"),
	'4', 'four fragments before the job');

# the schedule of docs/MAINTENANCE.md, with quiet hours that cover neither
# now nor the next minutes, when the job runs (starting them at the next
# hour would, near the top of this one)
my $hour = $node->safe_psql('postgres',
	"SELECT extract(hour FROM now() AT TIME ZONE 'UTC')::int");
my $quiet = sprintf('%d-%d', ($hour + 2) % 24, ($hour + 3) % 24);
$node->safe_psql(
	'postgres', qq{
SELECT cron.schedule('rollout-compact', '* * * * *', \$\$
  SELECT rollout_compact('steps', min_fragments => 2, max_source_fragments => 32)
  WHERE rollout_should_compact('steps', 2, quiet_hours => '$quiet')\$\$);
});

# wait for the first run (at the next minute boundary) to end; on a loaded
# CI machine compacting through a remote test server has taken two minutes
my $status = '';
for (my $i = 0; $i < 360; $i++)
{
	$status = $node->safe_psql('postgres',
		"SELECT status FROM cron.job_run_details ORDER BY runid LIMIT 1");
	last if $status eq 'succeeded' || $status eq 'failed';
	sleep 1;
}
is($status, 'succeeded', 'the scheduled compaction ran and succeeded');
$node->safe_psql('postgres', "SELECT cron.unschedule('rollout-compact')");

is($node->safe_psql('postgres',
		"SELECT fragments, total_compactions, last_error IS NULL FROM rollout_compaction_stats('steps')"),
	'1|1|t', 'one fragment left, one compaction recorded, no error');
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM steps'),
	$before, 'every row and its newest version survived');
is($node->safe_psql('postgres',
		"SELECT row_count = exact_row_count AND base_rows = exact_row_count FROM rollout_observe('steps', true)"),
	't', 'physical rows = logical rows after the full compaction');

$node->stop;
done_testing();
