
# Copyright (c) rollout_fdw authors
#
# 021_azure_basic.pl — the Azure Blob Storage backend against Azurite
# (issue 5): a full SQL round trip on an az:// server, many sessions racing
# for WAL position 1 of an empty store, the documented errors (wrong key,
# wrong SAS token, unknown container, unreachable endpoint), and
# credentials never appearing in the server log, error messages or EXPLAIN,
# even at log_min_messages = debug5.
#
# Needs a running Azurite: test/servers/azurite.sh start, then
# ROLLOUT_TEST_AZURE_ENDPOINT (e.g. http://127.0.0.1:10000/devstoreaccount1),
# ROLLOUT_TEST_AZURE_KEY and ROLLOUT_TEST_AZURE_CONTAINER from
# `test/servers/azurite.sh env`.  Skipped when the endpoint is unset.

use strict;
use warnings;

use FindBin;
use IPC::Run;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node with_min_gc_grace);
use Test::More;

# The key: the emulator's published development key, unless told otherwise.
my ($endpoint, $key, $container) = RolloutStore::azure_settings();
plan skip_all =>
  'ROLLOUT_TEST_AZURE_ENDPOINT is not set (start Azurite with test/servers/azurite.sh start; eval "$(test/servers/azurite.sh env)")'
  unless $endpoint;
# The server inherits our environment, and at debug5 PostgreSQL itself logs
# its whole environment at start: keep keys out of it.
delete $ENV{$_} for qw(ROLLOUT_TEST_AZURE_KEY AZURE_STORAGE_KEY AZURE_STORAGE_SAS_TOKEN
  ROLLOUT_TEST_REGRESS_MAPPING_OPTIONS);
my ($account) = $endpoint =~ m{/([a-z0-9]{3,24})/?$};
$account //= 'devstoreaccount1';
# A fresh prefix per run: Azurite keeps blobs while it runs.
my $run = sprintf('t021-%d-%d', $$, time);

# A valid base64 key that is not the account's, and a SAS token that is
# not valid: both must be refused without appearing anywhere.
my $wrong_key = 'V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3Jvbmc=';
my $wrong_sas = 'sv=2021-12-02&ss=b&srt=sco&sp=rwdlac&se=2099-01-01T00:00:00Z&sig=SecretSasSignatureXyz123';

my $node = mode_node('azure_basic',
	conf => ["log_min_messages = debug5\nlog_error_verbosity = verbose\nlog_statement = none\n"]);

# Everything below runs at debug5; the statements themselves are not
# logged (log_statement = none), as for postgres_fdw passwords.
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION rollout_fdw;
CREATE SERVER az FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/$container/$run/main', endpoint '$endpoint',
           connect_timeout '5', request_timeout '20');
CREATE USER MAPPING FOR PUBLIC SERVER az OPTIONS (account_key '$key');
CREATE FOREIGN TABLE t (id text, v int, payload jsonb) SERVER az OPTIONS (store 'round', key 'id');
});

# --- full round trip ------------------------------------------------------

$node->safe_psql('postgres',
	q{INSERT INTO t SELECT 'k' || g, g, jsonb_build_object('g', g) FROM generate_series(1, 200) g});
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'),
	'200|20100', 'rows read back from Azurite');

# a row written again under its key replaces the older version
$node->safe_psql('postgres', q{INSERT INTO t VALUES ('k1', 1001, '{}')});
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'),
	'200|21100', 'a newer version replaces the older one');

my ($flushed) = split /\|/, $node->safe_psql('postgres', q{SELECT * FROM rollout_flush('t')});
ok($flushed > 0, "flush wrote a generation ($flushed rows)");
$node->safe_psql('postgres',
	q{INSERT INTO t SELECT 'm' || g, g, '{}' FROM generate_series(1, 50) g});
$node->safe_psql('postgres', q{SELECT * FROM rollout_flush('t')});
my $merge = $node->safe_psql('postgres', q{SELECT generations_merged FROM rollout_merge('t')});
ok($merge >= 2, "merge folded $merge generations");
$node->safe_psql('postgres',
	q{INSERT INTO t SELECT 'n' || g, g, '{}' FROM generate_series(1, 50) g});
$node->safe_psql('postgres', q{SELECT * FROM rollout_merge('t')});
my $compact = $node->safe_psql('postgres',
	q{SELECT fragments_before, fragments_after FROM rollout_compact('t', min_fragments => 2)});
like($compact, qr/^\d+\|\d+$/, "compact ran ($compact)");
my $gc = with_min_gc_grace($node, 0,
	sub { $node->safe_psql('postgres', q{SELECT objects_deleted FROM rollout_gc('t', '0 s')}) });
ok(defined $gc && $gc =~ /^\d+$/, "gc ran ($gc objects deleted)");
is($node->safe_psql('postgres', 'SELECT row_count FROM rollout_observe(\'t\', exact => true)'),
	'300', 'observe counts every row');
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'),
	'300|23650', 'rows unchanged by flush, merge, compact and gc');

# A new session (a new connection, a new process) reads the same.
$node->stop;
$node->start;
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM t'),
	'300|23650', 'rows survive a restart');

# --- racing creators of WAL position 1 ---------------------------------------

$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE race (id text, v int) SERVER az OPTIONS (store 'race', key 'id')});
my $sessions = 8;
my $start_at = time + 3;
my @runs;
for my $i (1 .. $sessions)
{
	my ($out, $err) = ('', '');
	my $sql = qq{BEGIN;
INSERT INTO race VALUES ('s$i', $i);
SELECT pg_sleep(greatest(0, $start_at - extract(epoch from clock_timestamp())));
COMMIT;};
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$out, '2>', \$err);
	push @runs, [ $h, \$out, \$err ];
}
my $failed = 0;
for my $r (@runs)
{
	$r->[0]->finish;
	if ($r->[0]->result != 0)
	{
		$failed++;
		diag("racing session failed: ${ $r->[2] }");
	}
}
is($failed, 0, "all $sessions racing sessions committed");
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM race'),
	$sessions . '|' . ($sessions * ($sessions + 1) / 2),
	'every racing row is there exactly once');

# --- errors ------------------------------------------------------------------

sub psql_error
{
	my ($sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql('postgres', $sql);
	return $ret == 0 ? '' : $stderr;
}

# wrong key
$node->safe_psql(
	'postgres', qq{
CREATE SERVER az_wrong_key FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/$container/$run/wrong', endpoint '$endpoint');
CREATE USER MAPPING FOR PUBLIC SERVER az_wrong_key OPTIONS (account_key '$wrong_key');
CREATE FOREIGN TABLE wk (id text, v int) SERVER az_wrong_key OPTIONS (store 'wk', key 'id');
});
my $err = psql_error(q{INSERT INTO wk VALUES ('a', 1)});
like($err, qr/ERROR:.*store "az:\/\/$account\/$container\/$run\/wrong": HTTP status 403/,
	'a wrong account key is a clean 403 error naming the store');
like($err, qr/Azure error code \w+/, 'the error names the Azure error code');
like($err, qr/HINT:.*account_key or sas_token/, 'the hint names the options to check');

# wrong SAS token
$node->safe_psql(
	'postgres', qq{
CREATE SERVER az_wrong_sas FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/$container/$run/sas', endpoint '$endpoint');
CREATE USER MAPPING FOR PUBLIC SERVER az_wrong_sas OPTIONS (sas_token '$wrong_sas');
CREATE FOREIGN TABLE ws (id text, v int) SERVER az_wrong_sas OPTIONS (store 'ws', key 'id');
});
$err = psql_error(q{SELECT count(*) FROM ws});
like($err, qr/ERROR:.*HTTP status 403/, 'an invalid SAS token is a clean 403 error');

# unknown container
$node->safe_psql(
	'postgres', qq{
CREATE SERVER az_nocontainer FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/no-such-container-$$/x', endpoint '$endpoint');
CREATE USER MAPPING FOR PUBLIC SERVER az_nocontainer OPTIONS (account_key '$key');
CREATE FOREIGN TABLE nc (id text, v int) SERVER az_nocontainer OPTIONS (store 'nc', key 'id');
});
$err = psql_error(q{SELECT count(*) FROM nc});
like($err, qr/ERROR:.*HTTP status 404, Azure error code ContainerNotFound/,
	'an unknown container is an error on read, not an empty store');
like($err, qr/HINT:.*container .*does not exist/, 'with a hint');
$err = psql_error(q{INSERT INTO nc VALUES ('a', 1)});
like($err, qr/ContainerNotFound/, 'and on write');

# unreachable endpoint (nothing listens on port 1)
my $t0 = time;
$node->safe_psql(
	'postgres', qq{
CREATE SERVER az_down FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/$container/$run/down', endpoint 'http://127.0.0.1:1/$account',
           connect_timeout '1', request_timeout '2');
CREATE USER MAPPING FOR PUBLIC SERVER az_down OPTIONS (account_key '$key');
CREATE FOREIGN TABLE down (id text, v int) SERVER az_down OPTIONS (store 'down', key 'id');
});
$err = psql_error(q{INSERT INTO down VALUES ('a', 1)});
like($err, qr/ERROR:.*could not \w+ .*store "az:\/\/$account\/$container\/$run\/down": .*(connect|Connection)/i,
	'an unreachable endpoint is a clean connection error');
like($err, qr/after \d+ attempt/, 'after the retry budget');
ok(time - $t0 < 30, 'and does not hang');

# no credentials at all
$node->safe_psql(
	'postgres', qq{
CREATE SERVER az_nocred FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/$container/$run/nocred', endpoint '$endpoint');
CREATE FOREIGN TABLE nocred (id text, v int) SERVER az_nocred OPTIONS (store 'nocred', key 'id');
});
$err = psql_error(q{SELECT count(*) FROM nocred});
like($err, qr/ERROR:.*no credentials for store/, 'missing credentials are named')
  unless $ENV{AZURE_STORAGE_KEY} || $ENV{AZURE_STORAGE_SAS_TOKEN};

# --- credentials never shown -------------------------------------------------

my $explain = $node->safe_psql('postgres',
	q{EXPLAIN (VERBOSE, ANALYZE, COSTS OFF) SELECT * FROM t WHERE id = 'k5'});
my $all_errors = join("\n", $err, psql_error(q{INSERT INTO wk VALUES ('b', 2)}),
	psql_error(q{SELECT count(*) FROM ws}));
my $log = slurp_file($node->logfile);
ok(length($log) > 10000, 'the server log is verbose (debug5)');
(my $sas_signature = $wrong_sas) =~ s/.*sig=//;
for my $secret ([ 'account key', $key ], [ 'wrong account key', $wrong_key ],
	[ 'SAS token', $sas_signature ], [ 'Authorization header', 'SharedKey' ])
{
	my ($what, $value) = @$secret;
	unlike($log, qr/\Q$value\E/, "the $what is not in the server log");
	unlike($explain, qr/\Q$value\E/, "the $what is not in EXPLAIN");
	unlike($all_errors, qr/\Q$value\E/, "the $what is not in error messages");
}

$node->stop;
done_testing();
