
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its cluster preloads the writer in every run; scripts/test.sh)
#
# 060_commit_outcome.pl — a committer learns the true outcome of its commit,
# and a backend that goes away in the middle of a flush or a claim leaves
# nothing behind that stops the store (issue: deployment safety; found by
# review).
#
# (a) A follower's request, done and published into the memtable while the
#     follower is descheduled (SIGSTOP here), is dropped by a flush before
#     the follower reads its outcome.  A failing commit then takes the freed
#     memory.  The follower must still be told its commit succeeded (its row
#     is visible), and the memtable must stay sound: later commits all land.
#     (Before: the follower read the failing commit's outcome as its own and
#     freed the memory a second time; two later commits shared one request,
#     one of them vanished, and the next flush crashed.)
# (b) A cancel that arrives while a commit waits for its WAL PUT is not
#     raised between the durable write and PostgreSQL's commit: the
#     transaction reports success exactly when its rows are visible.
# (c) A backend terminated in the middle of a flush, and one terminated in
#     the middle of a claim (a claim flushes the WAL tail after a restart),
#     leave neither the flush flag nor the writer's claim held: the next
#     flush and the next commit go through.
# (d) A leader whose commit raises before it takes the queue (a fault
#     point here; out of memory in life) fails its own transaction alone
#     and gives up leadership: the next commits go through, and the failed
#     row never appears.  (Before: its request stayed queued, for the next
#     leader to write, and its leadership stayed counted; with a pipeline
#     depth of 1 every later commit of the store waited for good.)

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(writer_node poll_until wait_for_fault release_faults hold_faults);
use Test::More;

my $node = writer_node('outcome',
	'rollout_fdw.wal_pipeline_depth' => 1,
	'rollout_fdw.flush_interval' => 0,
	'log_temp_files' => 0);
my $store = RolloutStore->for_test('060_commit_outcome', backend => 'file');
$store->create_extension_and_server($node);
$node->safe_psql('postgres', q{CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'outcome')});

sub ids
{
	return $node->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM t});
}

# The pid of the backend running a statement that starts with $prefix, once
# it waits as $wait_event_type says.
sub backend_of
{
	my ($prefix, $wait_event_type) = @_;
	my $sql = qq{SELECT pid FROM pg_stat_activity WHERE query LIKE '$prefix%'}
	  . ($wait_event_type ? qq{ AND wait_event_type = '$wait_event_type'} : '');
	for (1 .. 600)
	{
		my $pid = $node->safe_psql('postgres', $sql);
		return $pid if $pid ne '';
		usleep(50_000);
	}
	die "no backend runs $prefix";
}

# --- (a) a done request dropped by a flush before its committer read it ------
my $offset = -s $node->logfile;
my $leader = PsqlScript->start($node, name => 'leader',
	sql => "SET rollout_fdw.fail_at = 'group_commit.before_take:hold';\nINSERT INTO t VALUES (1, 'leader');\n");
wait_for_fault($node, 'group_commit.before_take', $offset);
my $follower = PsqlScript->start($node, name => 'follower',
	sql => "INSERT INTO t VALUES (2, 'follower');\n");
my $follower_pid = backend_of('INSERT INTO t VALUES (2', 'Extension');
kill 'STOP', $follower_pid;
release_faults($node);
my ($ret, $out, $err) = $leader->finish;
hold_faults($node);
is($ret, 0, '(a) the leader commits its own row and the follower\'s') or diag($err);
is(ids(), '1,2', '(a) both rows are visible');
is($node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('t')}), '2',
	'(a) a flush takes their batch out of the memtable while the follower sleeps');
($ret, $out, $err) = $node->psql('postgres',
	"SET rollout_fdw.fail_at = 'group_commit.before_put:error';\nINSERT INTO t VALUES (3, 'failed');");
isnt($ret, 0, '(a) a commit that fails takes a request of the same size meanwhile');
kill 'CONT', $follower_pid;
($ret, $out, $err) = $follower->finish;
is($ret, 0, '(a) the follower is told its commit succeeded, as it did') or diag($err);
$node->safe_psql('postgres', "INSERT INTO t VALUES ($_, 'later')") for 10 .. 13;
is(ids(), '1,2,10,11,12,13', '(a) every later commit lands, and the failed one does not');
is($node->safe_psql('postgres', q{SELECT rows_flushed FROM rollout_flush('t')}), '4',
	'(a) the next flush takes exactly the four later rows');
is(ids(), '1,2,10,11,12,13', '(a) ... and the rows read the same after it');

# --- (b) a cancel during the wait for the WAL PUT ------------------------------
$offset = -s $node->logfile;
my $canceled = PsqlScript->start($node, name => 'canceled', sql => q{
SET rollout_fdw.transaction_buffer_size = 64;
SET rollout_fdw.fail_at = 'group_commit.before_put:sleep=4';
INSERT INTO t SELECT g, 'big' FROM generate_series(1000, 5999) g;
});
wait_for_fault($node, 'group_commit.before_put', $offset);
my $canceled_pid = backend_of('INSERT INTO t SELECT g');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($canceled_pid)");
($ret, $out, $err) = $canceled->finish;
my $visible = $node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE v = 'big'});
is($ret, 0, '(b) the commit a cancel arrived during is reported as done') or diag($err);
is($visible, '5000', '(b) ... and its rows are there');

# --- (c) a backend terminated in the middle of a flush or of a claim -----------
$node->safe_psql('postgres', q{SELECT rollout_flush('t')});
$node->safe_psql('postgres', q{INSERT INTO t VALUES (20, 'before the flush')});
$offset = -s $node->logfile;
my $flushing = PsqlScript->start($node, name => 'flushing',
	sql => "SET rollout_fdw.fail_at = 'flush.after_manifest_read:hold';\nSELECT rollout_flush('t');\n");
wait_for_fault($node, 'flush.after_manifest_read', $offset);
$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . backend_of('SELECT rollout_flush') . ')');
$flushing->finish;
($ret, $out, $err) = $node->psql('postgres', q{SELECT rows_flushed FROM rollout_flush('t')}, timeout => 60);
is($ret, 0, '(c) a flush after one whose backend was terminated goes through') or diag($err);
is($out, '1', '(c) ... and flushes the row');

# after a restart the first commit claims the shard, and the claim flushes
# the WAL tail the previous run left (no statement_timeout at commit: the
# psql calls time out instead, should they wait)
$node->safe_psql('postgres', q{INSERT INTO t VALUES (21, 'in the tail')});
$node->restart;
$offset = -s $node->logfile;
my $claiming = PsqlScript->start($node, name => 'claiming',
	sql => "SET rollout_fdw.fail_at = 'flush.after_manifest_read:hold';\nINSERT INTO t VALUES (22, 'claiming');\n");
wait_for_fault($node, 'flush.after_manifest_read', $offset);
$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . backend_of('INSERT INTO t VALUES (22') . ')');
$claiming->finish;
($ret, $out, $err) = $node->psql('postgres', q{INSERT INTO t VALUES (23, 'after')}, timeout => 60);
is($ret, 0, '(c) a commit after a claim whose backend was terminated claims again and commits') or diag($err);
is($node->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM t WHERE id BETWEEN 20 AND 29}),
	'20,21,23', '(c) every committed row is there, and the terminated one is not');
($ret, $out, $err) = $node->psql('postgres', q{SELECT rollout_flush('t')}, timeout => 60);
is($ret, 0, '(c) and the store flushes') or diag($err);

# --- (d) a leader that raises before it takes the queue -------------------------
for my $round (1 .. 3)
{
	($ret, $out, $err) = $node->psql('postgres',
		"SET rollout_fdw.fail_at = 'group_commit.before_take:error';\n"
		  . "INSERT INTO t VALUES (3$round, 'abandoned');", timeout => 60);
	isnt($ret, 0, "(d) round $round: the commit whose leader raised fails");
	like($err, qr/group_commit\.before_take/, "(d) round $round: with the leader's error");
	($ret, $out, $err) = $node->psql('postgres', "INSERT INTO t VALUES (4$round, 'next')",
		timeout => 60);
	is($ret, 0, "(d) round $round: the next commit goes through") or diag($err);
}
is($node->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM t WHERE id BETWEEN 30 AND 49}),
	'41,42,43', '(d) the later rows are there, and no row of a failed commit');

done_testing();
