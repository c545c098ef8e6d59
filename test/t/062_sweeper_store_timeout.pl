
# Copyright (c) rollout_fdw authors
#
# Modes: preload  (its clusters preload the writer in every run; scripts/test.sh)
#
# 062_sweeper_store_timeout.pl — one stalling store cannot hold back the
# sweeper of its database (worker/sweeper.c, rollout_fdw.sweeper_store_timeout).
#
# mallory, a role with USAGE on the wrapper and nothing else, points a server
# of her own at an endpoint that accepts connections and never answers, with
# request timeouts of a day (a server's owner sets them), and makes a table
# on it.  The sweeper reaches her store on its flush interval and waits on it.
# Before the timeout it waited for the whole request timeout, and flushed no
# other store of the database meanwhile: their committers then had to flush
# for themselves.  Now its turn on a store ends after the timeout (2 s here):
#   1. another store's rows are flushed by the sweeper all the same;
#   2. the server log says why the stalling store's turn ended, and it is
#      left alone for a while, twice as long after each turn in a row that
#      ran out;
#   3. with the stalling table gone, the sweeper goes on flushing as before;
#   4. a table whose ALTER waits behind a long reader is skipped by the
#      sweeper rather than waited for (it would hold back the other stores);
#   5. a garbage collection larger than a turn stops at half the turn's
#      time and goes on at the next pass, not a gc_interval later;
#   6. one the timeout cancels all the same goes on at the next turn;
#   7. unless it had deleted nothing: then it waits for gc_interval.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node poll_until store_stats);
use Test::More;

# An endpoint that completes TCP handshakes (the kernel does, up to the
# backlog) and never reads or answers a request.
my $blackhole = IO::Socket::INET->new(
	Listen => 64,
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Proto => 'tcp') or die "cannot listen: $!";
my $port = $blackhole->sockport;

my $node = writer_node('sweeper_timeout',
	'rollout_fdw.flush_interval' => 1,
	'rollout_fdw.gc_interval' => 1,
	'rollout_fdw.sweeper_store_timeout' => 2);
my $store = RolloutStore->for_test('062_sweeper_store_timeout', backend => 'file');

# mallory's server comes first in the sweeper's order (servers by oid)
$node->safe_psql('postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE ROLE mallory LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER rollout_fdw TO mallory;
GRANT CREATE ON SCHEMA public TO mallory;
SET ROLE mallory;
CREATE SERVER stall FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://stall/x', endpoint 'http://127.0.0.1:$port', region 'us-east-1',
           connect_timeout '86400', request_timeout '86400');
CREATE USER MAPPING FOR mallory SERVER stall
  OPTIONS (access_key_id 'k', secret_access_key 's');
CREATE FOREIGN TABLE stalled (id int, v text) SERVER stall OPTIONS (store 'stalled', key 'id');
RESET ROLE;
} . $store->server_sql('s') . q{
CREATE FOREIGN TABLE t (id int, v text) SERVER s OPTIONS (store 'healthy', key 'id');
});

# 1. the healthy store's rows are flushed by the sweeper
$node->safe_psql('postgres', 'INSERT INTO t SELECT g, g::text FROM generate_series(1, 100) g');
my $flushed = poll_until($node,
	q{SELECT flushes > 0 AND memtable_rows = 0 FROM rollout_stat_stores WHERE store = 'healthy'},
	't', 60);
ok(defined $flushed, 'the sweeper flushes a store while another one stalls')
  or diag(store_stats($node, 'healthy', qw(flushes memtable_rows last_error)));

# 2. why the stalling store's turn ended, and its rests growing (the log:
# a store that never opened has no row in rollout_stat_stores)
ok( $node->wait_for_log(
		qr/rollout_fdw sweeper: store "stalled": its turn ran out of time while opening the store \(rollout_fdw\.sweeper_store_timeout = 2 s\) and is left alone for 2 s/),
	"the server log says the stalling store's turn ran out of time, and for how long it rests");
ok( $node->wait_for_log(
		qr/store "stalled": its turn ran out of time while opening the store \(rollout_fdw\.sweeper_store_timeout = 2 s\) and is left alone for 4 s/),
	'the rest doubles after the next turn that runs out');

# the healthy store keeps being flushed between the stalling store's turns
$node->safe_psql('postgres', 'INSERT INTO t SELECT g, g::text FROM generate_series(101, 200) g');
ok( defined poll_until($node,
		q{SELECT memtable_rows = 0 FROM rollout_stat_stores WHERE store = 'healthy'}, 't', 60),
	'and later rows of the healthy store too');
is($node->safe_psql('postgres', 'SELECT count(*), sum(id) FROM t'), '200|20100',
	'every row of the healthy store reads back');

# 3. without the stalling table the sweeper goes on as before
$node->safe_psql('postgres', 'DROP FOREIGN TABLE stalled');
$node->safe_psql('postgres', 'INSERT INTO t SELECT g, g::text FROM generate_series(201, 300) g');
ok( defined poll_until($node,
		q{SELECT memtable_rows = 0 FROM rollout_stat_stores WHERE store = 'healthy'}, 't', 30),
	'with the stalling table dropped, the sweeper flushes as before');
unlike(slurp_file($node->logfile), qr/terminated by signal|sweeper.*exited with exit code/,
	'the sweeper never died');

# 4. a table whose ALTER waits behind a long reader is skipped, not waited
# for: queued behind the ALTER, the sweeper held back every store after it
# until its turn ran out
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE q (id int, v text) SERVER s OPTIONS (store 'queued', key 'id');
INSERT INTO q VALUES (1, 'x');
});
my $log_offset = -s $node->logfile;
my $reader = $node->background_psql('postgres');
$reader->query_safe('BEGIN');
$reader->query_safe('SELECT count(*) FROM q');
my $ddl = $node->background_psql('postgres');
$ddl->query_until(qr/altering/, "\\echo altering\nALTER FOREIGN TABLE q OPTIONS (ADD read_wal_tail 'true');\n");
ok( defined poll_until($node,
		q{SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND mode = 'AccessExclusiveLock'}, 't', 30),
	'an ALTER of table q waits behind a reader');
$node->safe_psql('postgres', 'INSERT INTO t SELECT g, g::text FROM generate_series(301, 400) g');
ok( defined poll_until($node,
		q{SELECT memtable_rows = 0 FROM rollout_stat_stores WHERE store = 'healthy'}, 't', 30),
	'the sweeper flushes the healthy store meanwhile');
sleep(3);    # more than the store timeout of 2 s, a few passes
unlike(substr(slurp_file($node->logfile), $log_offset), qr/store "queued": its turn ran out of time/,
	'and never waits on the locked table until its turn runs out');
$reader->query_safe('COMMIT');
$ddl->quit;
$reader->quit;
is($node->safe_psql('postgres', 'SELECT count(*) FROM q'), '1', 'the ALTER went through, the table reads');

# Helpers of 5 and 6 (table g, store "collected").

# ALTER SYSTEM SET (or, for undef, RESET) rollout_fdw settings, and reload
sub reconfigure
{
	my (@pairs) = @_;
	my $sql = '';
	while (my ($name, $value) = splice(@pairs, 0, 2))
	{
		$sql .= defined $value
		  ? "ALTER SYSTEM SET rollout_fdw.$name = '$value';\n"
		  : "ALTER SYSTEM RESET rollout_fdw.$name;\n";
	}
	$node->safe_psql('postgres', $sql . 'SELECT pg_reload_conf();');
	return;
}

# A line of the log since $offset saying the sweeper's gc of g ran out of time
# and that the store rests $rest s.
sub gc_ran_out
{
	my ($rest, $offset) = @_;
	return $node->wait_for_log(
		qr/store "collected": its turn ran out of time while collecting garbage \(rollout_fdw\.sweeper_store_timeout = 2 s\) and is left alone for $rest s/,
		$offset);
}

# The WAL entries of a store of the file:// server s.
sub wal_entries
{
	my ($store_name) = @_;
	return scalar(grep { m{/wal/} } $store->list("$store_name/"));
}

# $n one-row commits into g, flushed: returns the WAL entries listed then
sub sealed_wal_entries
{
	my ($first, $n) = @_;
	$node->safe_psql('postgres',
		join('', map { "INSERT INTO g VALUES ($_, 'x');\n" } $first .. $first + $n - 1)
		  . "SELECT rollout_flush('g');");
	return wal_entries('collected');
}

# The WAL entries of a store left, once fewer than $below or after 90 s.
sub wal_entries_below
{
	my ($below, $store_name) = @_;
	my $left;
	for (1 .. 90)
	{
		$left = wal_entries($store_name // 'collected');
		last if $left < $below;
		sleep(1);
	}
	return $left;
}

# 5. a garbage collection larger than a turn goes on at the next pass.  It
# used to run until the turn's timeout cancelled it, which counted as done:
# the next one came a gc_interval later, so a store whose backlog one turn
# cannot delete (a slow object store, a busy shard) fell further behind every
# hour.  Now the sweeper's gc stops gathering deletions once a batch went out
# and half the turn's time passed, and goes on at the next pass.  Here each
# batch (up to 128 objects) is followed by a sleep of 5 s, longer than half
# the turn of 8 s, so each pass deletes one batch of 300 sealed WAL entries
# and an old manifest version.  The other stores' garbage goes first, with
# no fault, and gc_interval stays 0 while g's entries are written and
# listed: with a grace of 0 the sweeper would collect them at once.
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE g (id int, v text) SERVER s OPTIONS (store 'collected', key 'id');});
reconfigure(gc_interval => 1, min_gc_grace => 0, gc_grace => 0, sweeper_store_timeout => 8);
ok(wal_entries_below(5, 'healthy') < 5 && wal_entries_below(5, 'queued') < 5,
	"the sweeper collects the other stores' sealed WAL entries");
reconfigure(gc_interval => 0);

cmp_ok(sealed_wal_entries(1, 300), '>=', 300, '300 one-row commits leave 300 WAL entries, sealed by a flush');
$log_offset = -s $node->logfile;
reconfigure(fail_at => 'gc.after_delete:sleep=5', gc_interval => 1);
cmp_ok(wal_entries_below(300), '<', 300, "the sweeper's gc of the store deleted its first batch of them");
# from now on a gc that went well is due an hour after it began
reconfigure(gc_interval => 3600);
cmp_ok(wal_entries_below(5), '<', 5,
	"the next passes collect the rest of the backlog (all but the claim's fence markers)");
unlike(substr(slurp_file($node->logfile), $log_offset), qr/store "collected": its turn ran out of time/,
	'in turns that end well, without the timeout');

# 6. a gc the timeout cancels all the same (here: its first batch's sleep is
# longer than the turn of 2 s) goes on at the next turn too, after the rest
reconfigure(gc_interval => 0, sweeper_store_timeout => 2, fail_at => undef);
cmp_ok(sealed_wal_entries(301, 200), '>=', 200, '200 more WAL entries, sealed');
$log_offset = -s $node->logfile;
reconfigure(fail_at => 'gc.after_delete:sleep=5', gc_interval => 1);
ok(gc_ran_out(2, $log_offset), "the sweeper's garbage collection of the store runs out of time");
reconfigure(gc_interval => 3600);
ok(gc_ran_out(4, $log_offset), 'it goes on at the next turn, after the rest, not an hour later');
reconfigure(fail_at => undef);
cmp_ok(wal_entries_below(5), '<', 5, 'and collects the rest of the backlog');
is($node->safe_psql('postgres', 'SELECT count(*), sum(id) FROM g'), '500|125250', 'every row of the store reads back');

# 7. ... but a gc the timeout cancels before it deleted anything waits for
# gc_interval: it would only be cut at the same place again, every turn,
# and leave the store resting for up to an hour at a time.  Here a large
# transaction's ingest segment (adopted by a flush, so gc keeps it) makes gc
# reach the fault point gc.before_ingest_wal, whose sleep is longer than the
# turn, before it has sent anything.
reconfigure(gc_interval => 0);
$node->safe_psql('postgres', q{
SET rollout_fdw.ingest_threshold = '64kB';
INSERT INTO g SELECT i, repeat('y', 100) FROM generate_series(1001, 3000) i;
SELECT rollout_flush('g');
});
ok(scalar(grep { m{/ingest/} } $store->list('collected/')) > 0, 'a large transaction left an ingest segment');
$log_offset = -s $node->logfile;
reconfigure(fail_at => 'gc.before_ingest_wal:sleep=5', gc_interval => 1);
ok(gc_ran_out('\d+', $log_offset), "the sweeper's gc runs out of time before its first deletion");
reconfigure(gc_interval => 3600);
sleep(8);    # the rest after that turn, and a few passes
is(scalar(() = substr(slurp_file($node->logfile), $log_offset) =~ /store "collected": its turn ran out of time while collecting garbage/g),
	1, 'and is not run again at the next turn, only to be cut at the same place');
reconfigure(fail_at => undef);

$node->stop;
close($blackhole);
done_testing();
