
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
# Modes: preload  (its cluster preloads the writer in every run; scripts/test.sh)
#
# 066_claim_credentials_rotated.pl — the credentials a slot's claim was made
# with stop working, and other credentials of the same store still write it
# (src/core/write_proof.c; docs/WRITER.md, "Slots and credentials").
#
# A slot keeps the access its writer claimed the store with, to read back
# the probes by which other credentials prove that they write the store.
# When those credentials are rotated, revoked or expire, no probe can be read
# back any more.  Here the claim is made through an account SAS token that
# expires a few seconds later; then a role whose mapping holds the account
# key commits.  Its probe cannot be read through the expired token (HTTP
# 403): the claim is forgotten (its rows stay durable in the WAL), the role
# takes the slot over, claims the shard, and its commit succeeds.  In a
# first version every commit of such credentials failed with the expired
# token's 403 until the server restarted.
#
# Azurite checks SAS tokens and their expiry; the test needs it (the azure
# backend) and skips elsewhere.

use strict;
use warnings;

use Digest::SHA qw(hmac_sha256_base64);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use MIME::Base64 qw(decode_base64);
use POSIX qw(strftime);
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(writer_node count_in_log);
use Test::More;

plan skip_all => 'needs Azurite, which checks the expiry of SAS tokens (the azure backend)'
  unless RolloutStore::backend() eq 'azure';

my ($endpoint, $key, $container) = RolloutStore::azure_settings();
my ($account) = $endpoint =~ m{/([a-z0-9]{3,24})/?$}
  or BAIL_OUT("ROLLOUT_TEST_AZURE_ENDPOINT must end with the account name");
my $run = sprintf('t066-%d-%d', $$, time);

# An account SAS token for blobs (version 2021-12-02) that expires at $expiry
# (epoch seconds), signed with the account key.
sub account_sas
{
	my ($expiry) = @_;
	my $se = strftime('%Y-%m-%dT%H:%M:%SZ', gmtime($expiry));
	my ($sp, $ss, $srt, $sv, $spr) = ('racwdl', 'b', 'sco', '2021-12-02', 'https,http');
	my $to_sign = join("\n", $account, $sp, $ss, $srt, '', $se, '', $spr, $sv, '') . "\n";
	my $sig = hmac_sha256_base64($to_sign, decode_base64($key));
	$sig .= '=' while length($sig) % 4;
	$sig =~ s/([^A-Za-z0-9\-_.~])/sprintf('%%%02X', ord($1))/ge;
	return "sv=$sv&ss=$ss&srt=$srt&sp=$sp&se=$se&spr=$spr&sig=$sig";
}

my $node = writer_node('rotated', 'rollout_fdw.flush_interval' => 3600);
my $expiry = int(time) + 8;
my $sas = account_sas($expiry);
$node->safe_psql('postgres', qq{
SET log_statement = 'none';
CREATE EXTENSION rollout_fdw;
CREATE SERVER az FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$account/$container/$run', endpoint '$endpoint');
CREATE ROLE token_user LOGIN;
CREATE ROLE key_user LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER rollout_fdw TO token_user, key_user;
GRANT USAGE ON FOREIGN SERVER az TO token_user, key_user;
GRANT CREATE ON SCHEMA public TO token_user, key_user;
CREATE USER MAPPING FOR token_user SERVER az OPTIONS (sas_token '$sas');
SET ROLE token_user;
CREATE FOREIGN TABLE t_token_user (id int, v text) SERVER az OPTIONS (store 'steps', key 'id');});

sub as
{
	my ($role, $sql) = @_;
	return $node->psql('postgres', "SET ROLE $role;\n$sql");
}

my ($rc, $out, $err) = as('token_user', q{INSERT INTO t_token_user VALUES (1, 'through the token');});
is($rc, 0, "the token's role commits: its writer claims the store with the token") or diag($err);
is($node->safe_psql('postgres', q{SELECT count(*) FROM rollout_stat_stores WHERE store = 'steps'}),
	'1', 'one slot for the store');

sleep($expiry + 2 - time) if time < $expiry + 2;
($rc, $out, $err) = as('token_user', q{SELECT count(*) FROM t_token_user;});
like($err, qr/HTTP status 403/, 'the token has expired: its role is refused');

# The key's table comes only now: the sweeper, which maintains every table
# as its owner, would otherwise have proved the key while the token worked.
my $offset = -s $node->logfile;
$node->safe_psql('postgres', qq{
SET log_statement = 'none';
CREATE USER MAPPING FOR key_user SERVER az OPTIONS (account_key '$key');
SET ROLE key_user;
CREATE FOREIGN TABLE t_key_user (id int, v text) SERVER az OPTIONS (store 'steps', key 'id');});
($rc, $out, $err) = as('key_user', q{INSERT INTO t_key_user VALUES (2, 'through the key');});
is($rc, 0, "the key's role commits although the claim's token is refused") or diag($err);
like(slurp_file($node->logfile, $offset),
	qr/forgot the claim of shard "[^"]+" of store "steps" in shared memory: its credentials are refused now/,
	'the log says the stale claim was forgotten');
is($node->safe_psql('postgres', q{SELECT count(*) FROM rollout_stat_stores WHERE store = 'steps'}),
	'1', 'the key took the same slot over: still one slot for the store');
($rc, $out, $err) = as('key_user', q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM t_key_user;});
is($out, '1:through the token,2:through the key', 'both rows, once each') or diag($err);
($rc, $out, $err) = as('key_user', q{INSERT INTO t_key_user VALUES (3, 'again');});
is($rc, 0, "the key's role goes on committing") or diag($err);
($rc, $out, $err) = as('key_user', q{SELECT rows_flushed FROM rollout_flush('t_key_user');});
is($rc, 0, 'and flushes the store') or diag($err);

$node->restart;
($rc, $out, $err) = as('key_user', q{SELECT count(*), count(DISTINCT id) FROM t_key_user;});
is($out, '3|3', 'after a restart: every row, once');
unlike(slurp_file($node->logfile), qr/terminated by signal/, 'no backend died');
$node->stop;
done_testing();
