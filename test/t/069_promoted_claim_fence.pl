
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its old primary preloads the writer in every run; scripts/test.sh)
#
# 069_promoted_claim_fence.pl — a standby promoted without the shared writer
# claims the shard on its first commit (lsm/writer_epoch.c, shard_claim)
# while its old primary, which has the shared writer, still commits.  The
# old primary's writer does not read the shard manifest before each PUT, so
# its next entry can land at the very position the claim's fence was to take,
# after the claim committed its epoch.  The claim must then fence in its
# next round all the same: returning as if another backend had claimed for
# this timeline leaves no fence of the new epoch in the WAL, and the old
# primary appending under the old epoch until the new primary's own first
# entry lands (docs/WRITER.md: every write of the shard from a lower
# timeline is refused).  The fault point claim.before_fence holds the
# standby's claim between its manifest commit and its fence.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(writer_node shard_of wait_for_fault release_faults);
use Test::More;

my $store = RolloutStore->for_test('069_promoted_claim_fence', backend => 'file');

# the old primary: the shared writer, its sweeper doing nothing on its own;
# it streams to the standby
my $old = writer_node('old_primary', { allows_streaming => 1 });
$store->create_extension_and_server($old);
$old->safe_psql('postgres',
	q{CREATE FOREIGN TABLE t (id int, origin text) SERVER s OPTIONS (store 'pf', key 'id')});
$old->safe_psql('postgres', q{INSERT INTO t SELECT g, 'a1' FROM generate_series(1, 10) g});
my $shard = shard_of($old);
my $wal = "pf/shards/$shard/wal";
my $manifests = "pf/shards/$shard/_manifest";

# the standby: nothing preloaded, so its commits take the direct path
$old->backup('base');
my $new = PostgreSQL::Test::Cluster->new('promoted');
$new->init_from_backup($old, 'base', has_streaming => 1);
$new->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$new->start;
$old->wait_for_catchup($new);
$new->promote;
$new->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby did not leave recovery';
ok($new->poll_query_until('postgres', 'SELECT timeline_id >= 2 FROM pg_control_checkpoint()'),
	'the promoted standby writes on a new timeline');
my $epoch_before = $store->newest_manifest($manifests)->{writer_epoch};

# The new primary's first commit claims; it stops before writing its fence.
my $offset = -s $new->logfile;
my $claimer = PsqlScript->start($new,
	sql => "SET rollout_fdw.fail_at = 'claim.before_fence:hold';\n"
	  . "INSERT INTO t SELECT g, 's1' FROM generate_series(11, 20) g;\n");
wait_for_fault($new, 'claim.before_fence', $offset);
my $claimed = $store->newest_manifest($manifests);
is($claimed->{writer_epoch}, $epoch_before + 1, 'the claim committed the next epoch');
my $fence_position = $claimed->{replay_after} + 1;

# Meanwhile the old primary commits: its entry takes the fence's position.
$old->safe_psql('postgres', q{INSERT INTO t SELECT g, 'a2' FROM generate_series(21, 30) g});
is($store->wal_entry($wal, $fence_position)->{epoch}, $epoch_before,
	"the old primary's entry landed at $fence_position, where the fence was to go");

release_faults($new);
my ($exit, $out, $err) = $claimer->finish;
is($exit, 0, 'the new primary\'s commit goes through') or diag($err);

my $manifest = $store->newest_manifest($manifests);
my @fences = grep { $_->[1]{kind} eq 'fence' && $_->[1]{epoch} == $manifest->{writer_epoch} }
  $store->wal_entries($wal);
is(scalar(@fences), 1, "the claim fenced in its next round: a fence of epoch $manifest->{writer_epoch} is in the WAL");
cmp_ok($fences[0][0], '>', $fence_position, '... after the old primary\'s entry')
  if @fences;
is($manifest->{writer_timeline}, 2, 'the shard manifest names the new timeline');

my ($ret, $stderr);
for my $attempt (1 .. 2)
{
	($ret, $out, $stderr) = $old->psql('postgres',
		"INSERT INTO t SELECT g, 'old$attempt' FROM generate_series(31, 40) g");
	isnt($ret, 0, "the old primary's commit $attempt is refused");
}
like($stderr, qr/taken over by a promoted standby/, '... the shard was taken over by a promoted standby');

is($new->safe_psql('postgres', q{SELECT string_agg(DISTINCT origin, ',' ORDER BY origin), count(*) FROM t}),
	'a1,a2,s1|30', 'the new primary reads the rows of exactly the acknowledged commits, once each');

$old->stop;
$new->stop;
done_testing();
