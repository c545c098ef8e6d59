
# Copyright (c) rollout_fdw authors
#
# 022_azure_faults.pl — the Azure backend through the project's latency
# proxy (test/servers/latency_proxy.py) in front of Azurite (issue 5):
#
#   - 20 ms per direction: everything still works;
#   - the service answers 500 to the next two requests, then recovers: the
#     retries absorb it and the commit succeeds;
#   - 500 for longer than the retry budget: a clean error naming the
#     operation, the key, the HTTP status and the Azure error code, and no
#     row of the failed transaction is visible; the next commit works;
#   - the PUT of a WAL entry lands but its answer never comes (the request
#     times out after the object was written): the retry finds the blob
#     holding our put id, the commit is reported as done, and the row is
#     there exactly once;
#   - the same PUT lands unanswered, and then the service fails every
#     request, its retries and the look at what landed included: the commit
#     fails as unknown (SQLSTATE 08007), never as "not written"; its row is
#     there once, and the commits after it go on (a position given back
#     would meet the landed entry again and fail every commit after it);
#   - the PUT of a WAL entry is carried out, and the connection it went on
#     (a reused one) closes before a byte of the answer: libcurl resends it
#     by itself, the resend meets the blob the first one made, and the put
#     id on it says it is ours: the transaction is in one WAL entry, not
#     written again at the next position as if a concurrent writer had won.
#
# Needs Azurite (test/servers/azurite.sh start) and
# ROLLOUT_TEST_AZURE_ENDPOINT; skipped when it is unset.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use LatencyProxy;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(mode_node shard_of);
use Test::More;

my ($endpoint, $key, $container) = RolloutStore::azure_settings();
plan skip_all =>
  'ROLLOUT_TEST_AZURE_ENDPOINT is not set (start Azurite with test/servers/azurite.sh start; eval "$(test/servers/azurite.sh env)")'
  unless $endpoint;
my ($target, $account) = $endpoint =~ m{^http://([0-9.]+:\d+)/([a-z0-9]{3,24})/?$}
  or BAIL_OUT("ROLLOUT_TEST_AZURE_ENDPOINT must be http://HOST:PORT/ACCOUNT for the proxy tests");
my $run = sprintf('t022-%d-%d', $$, time);

# The proxy, on ports the kernel picks.
my $proxy = LatencyProxy->start(target => $target, delay_ms => 20, control => 1);
my ($proxy_port, $control_port) = ($proxy->port, $proxy->control_port);
ok($proxy_port && $control_port, "latency proxy listening on $proxy_port (control $control_port)");

my $node = mode_node('azure_faults', conf => ["log_min_messages = debug1\n"]);

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE SERVER az FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/$container/$run', endpoint 'http://127.0.0.1:$proxy_port/$account',
           connect_timeout '2', request_timeout '2');
CREATE USER MAPPING FOR PUBLIC SERVER az OPTIONS (account_key '$key');
CREATE FOREIGN TABLE t (id text, v int) SERVER az OPTIONS (store 'faults', key 'id');
});

# --- latency alone -----------------------------------------------------------

$node->safe_psql('postgres', q{INSERT INTO t VALUES ('a', 1)});
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'), '1|1',
	'a commit and a scan through the 20 ms proxy');
ok($proxy->counter('requests') > 0, 'requests went through the proxy');

# --- 500, then recovery ------------------------------------------------------

$proxy->command('fail 2 500');
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('b', 2)});
is($proxy->counter('failed'), 2, 'the proxy answered two requests with 500');
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'), '2|3',
	'the retries absorbed the 500s: the commit went through');

# --- 500 beyond the retry budget -----------------------------------------------

$proxy->command('fail 50 503');
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{INSERT INTO t VALUES ('c', 3)});
isnt($ret, 0, 'a service failing every attempt fails the statement');
like($stderr, qr/ERROR:  could not \w+.* in store "az:\/\/$account\/$container\/$run": HTTP status 503, Azure error code InjectedFault/,
	'the error names the operation, the store, the HTTP status and the Azure error code');
$proxy->command('reset');
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'), '2|3',
	'nothing of the failed transaction is visible, nothing else was lost');
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('c', 3)});
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'), '3|6',
	'the next commit works');

# --- a PUT that lands but whose answer is lost ------------------------------------

my $log_offset = -s $node->logfile;
$proxy->command('hang 1 PUT /wal/');
my $t0 = time;
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('d', 4)});
is($proxy->counter('hung'), 1, 'the proxy withheld the answer to the PUT of a WAL entry');
ok(time - $t0 >= 2, 'the commit waited for the request timeout');
my $log = substr(slurp_file($node->logfile), $log_offset);
like($log, qr/landed on an earlier attempt/,
	'the retry found our put id on the blob: the outcome was resolved as created');
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'), '4|10',
	'the row is there exactly once');
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('e', 5)});
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'), '5|15',
	'later commits go on at the next position');

# --- a PUT that lands unanswered, and then nothing answers --------------------

# a 10 s request timeout: the test must make the service fail before the
# withheld PUT times out and is retried
$node->safe_psql('postgres', q{ALTER SERVER az OPTIONS (SET request_timeout '10')});
my $hung_before = $proxy->counter('hung');
$proxy->command('hang 1 PUT /wal/');
my $commit = PsqlScript->start($node,
	sql => "\\set VERBOSITY verbose\nINSERT INTO t VALUES ('f', 6);\n");
for (1 .. 300)
{
	last if $proxy->counter('hung') > $hung_before;
	select(undef, undef, undef, 0.1);
}
is($proxy->counter('hung'), $hung_before + 1, 'the PUT of the WAL entry went through, its answer withheld');
$proxy->command('fail 100 503');    # its retries, and whatever looks at what landed
($ret, $stdout, $stderr) = $commit->finish;
$proxy->command('reset');
isnt($ret, 0, 'with the service failing every request after it, the commit fails');
like($stderr, qr/ERROR:  08007: /, '... as transaction_resolution_unknown (08007), not as a definite failure')
  or diag($stderr);
unlike($stderr, qr/nothing of it is visible/, '... and does not say that nothing was written');
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('g', 7)});
is($node->safe_psql('postgres', q{SELECT string_agg(id, ',' ORDER BY id) FROM t WHERE id IN ('f', 'g')}),
	'f,g', 'the next commit works, and the row whose PUT landed unanswered is there');
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('h', 8)});
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id), sum(v) FROM t'), '8|8|36',
	'later commits go on; every row once');
$node->safe_psql('postgres', q{ALTER SERVER az OPTIONS (SET request_timeout '2')});

# A scan whose GET times out once is retried too.
$proxy->command('hang 1 GET');
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'), '8|36',
	'a read whose answer is lost is retried');

# --- a PUT carried out, and its reused connection closed unanswered ----------

# A store of its own, whose WAL this test lists (through Azurite directly).
my $vanish = RolloutStore->for_test('022_vanish', backend => 'azure');
$node->safe_psql('postgres',
	$vanish->server_sql('az_v', endpoint => "http://127.0.0.1:$proxy_port/$account",
		request_timeout => '2')
	  . q{CREATE FOREIGN TABLE tv (id text, v int) SERVER az_v OPTIONS (store 'vanish', key 'id');});
$node->safe_psql('postgres', q{INSERT INTO tv VALUES ('a', 1)});
my $vanish_wal = 'vanish/shards/' . shard_of($node) . '/wal';
my @positions_before = $vanish->wal_positions($vanish_wal, required => 1);
$log_offset = -s $node->logfile;
$proxy->command('vanish 1 PUT /wal/');
# the scan first, in the same session: the PUT then goes on a connection
# the scan's requests opened, which libcurl reuses
$node->safe_psql('postgres', q{SELECT count(*) FROM tv; INSERT INTO tv VALUES ('b', 2);});
is($proxy->counter('vanished'), 1,
	'the proxy closed the connection of a WAL entry\'s PUT once the blob was made, unanswered');
$log = substr(slurp_file($node->logfile), $log_offset);
like($log, qr/landed on an earlier attempt \(a resent request\)/,
	'libcurl resent the PUT by itself, and the put id on the blob it met said the blob was ours');
my @positions_after = $vanish->wal_positions($vanish_wal);
is(scalar(@positions_after) - scalar(@positions_before), 1,
	'the transaction is in one new WAL entry, not written again at the next position');
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM tv'), '2|3', 'each row once');

$node->stop;
$proxy->stop;
done_testing();
