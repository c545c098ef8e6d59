
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
# Modes: preload  (its cluster preloads the writer in every run; scripts/test.sh)
#
# 064_credentials_reach_other_stores.pl — credentials that reach another
# store by the same location and name never share its shared-memory slot
# (core/shared_store.c, "Whose slot it is").
#
# Ceph RGW keeps a bucket per tenant: the same endpoint and bucket name
# reach another bucket with another tenant's credentials.  Before, a slot
# was found by the location's identity and the store's name alone, so
# mallory, a role with USAGE on the wrapper, could make a table of the same
# names whose user mapping holds her own tenant's keys, and then:
#   - rollout_flush of her table wrote alice's committed, unflushed rows
#     into a generation of her own bucket, and took them out of alice's
#     memtable, so alice no longer saw them until a restart;
#   - commit through alice's writer, at the positions of alice's WAL.
# Now a slot serves only credentials that reach the store its writer
# claimed: the owner's, and those that find the claim's fence marker (its
# put id) with their own.  Others get a slot of their own.  Here:
#   1. mallory's flush takes nothing of alice's, and her bucket holds no
#      byte of alice's rows; alice reads all of hers;
#   2. both write and flush their own stores side by side, each with group
#      commit (a slot each), also when mallory is first after a restart;
#   3. bob, with another key of alice's user (the same bucket), shares
#      alice's slot: no second slot, no fencing, every row read by both;
#   5. a copy of alice's fence in mallory's bucket lets mallory read through
#      alice's slot but neither write through it (writing needs a probe that
#      alice's claim reads back) nor reset it.
# The other backends have no tenants; the test needs RGW.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use PsqlScript;
use RolloutTest qw(writer_node poll_until wait_for_fault release_faults hold_faults with_min_gc_grace);
use Test::More;

plan skip_all => 'needs the tenants of Ceph RGW (the rgw backend)'
  unless RolloutStore::backend() eq 'rgw';

my $store = RolloutStore->for_test('064_credentials_reach_other_stores');
my $tenant = bless {
	%$store,
	access_key_id => $ENV{ROLLOUT_TEST_RGW_TENANT_ACCESS_KEY_ID},
	secret_access_key => $ENV{ROLLOUT_TEST_RGW_TENANT_SECRET_ACCESS_KEY}
  },
  'RolloutStore';

# No sweeper: its first look at each table after a start flushes the table's
# store, which takes a slot for mallory's store too, whenever its pass comes
# (the counts of slots below would depend on when that is).
my $node = writer_node('credentials', 'rollout_fdw.flush_interval' => 3600,
	'rollout_fdw.worker_databases' => '');

my $location = $store->location;
my $endpoint = $store->{endpoint};
my $region = $store->{region};
my %keys = (
	alice => [ $store->{access_key_id}, $store->{secret_access_key} ],
	bob => [ $ENV{ROLLOUT_TEST_RGW_SECOND_ACCESS_KEY_ID}, $ENV{ROLLOUT_TEST_RGW_SECOND_SECRET_ACCESS_KEY} ],
	mallory => [ $tenant->{access_key_id}, $tenant->{secret_access_key} ]);

$node->safe_psql('postgres', 'CREATE EXTENSION rollout_fdw');
for my $role (sort keys %keys)
{
	my ($key, $secret) = @{ $keys{$role} };
	$node->safe_psql('postgres', qq{
CREATE ROLE $role LOGIN;
GRANT USAGE ON FOREIGN DATA WRAPPER rollout_fdw TO $role;
GRANT CREATE ON SCHEMA public TO $role;
SET ROLE $role;
CREATE SERVER server_$role FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location '$location', endpoint '$endpoint', region '$region');
CREATE USER MAPPING FOR $role SERVER server_$role
  OPTIONS (access_key_id '$key', secret_access_key '$secret');
CREATE FOREIGN TABLE t_$role (id int, v text) SERVER server_$role OPTIONS (store 'steps', key 'id');});
}

# Run $sql as $role; returns its output (dies on error).
sub as
{
	my ($role, $sql) = @_;
	return $node->safe_psql('postgres', "SET ROLE $role;\n$sql");
}

# The slots of this cluster for store "steps" (of every location).
sub slots_of_steps
{
	return $node->safe_psql('postgres',
		q{SELECT count(*) FROM rollout_stat_stores WHERE store = 'steps'});
}

# Every object of mallory's bucket under the prefix, and what holds $needle.
sub tenant_objects_holding
{
	my ($needle) = @_;
	my @keys = $tenant->list('');
	return (scalar(@keys), grep { index($tenant->get($_) // '', $needle) >= 0 } @keys);
}

# --- 1. mallory's flush takes nothing of alice's ---------------------------
as('alice', q{
INSERT INTO t_alice VALUES (1, 'alice one');
SELECT rows_flushed FROM rollout_flush('t_alice');
INSERT INTO t_alice VALUES (2, 'alice unflushed two');
INSERT INTO t_alice VALUES (3, 'alice unflushed three');});

is(as('mallory', 'SELECT count(*) FROM t_mallory'), '0',
	"mallory's table reads her own bucket: nothing");
is(as('mallory', q{SELECT coalesce(sum(rows_flushed), 0) FROM rollout_flush('t_mallory')}), '0',
	"mallory's flush flushes none of alice's unflushed rows");
my ($objects, @holding) = tenant_objects_holding('alice unflushed');
is(scalar(@holding), 0, "no object of mallory's bucket holds alice's rows ($objects objects)")
  or diag("@holding");
is(as('alice', q{SELECT string_agg(v, ',') FROM (SELECT v FROM t_alice ORDER BY id) s}),
	'alice one,alice unflushed two,alice unflushed three',
	'alice still reads every row, the unflushed ones too');
is(as('alice', q{SELECT unflushed_rows FROM rollout_observe('t_alice')}), '2',
	"alice's unflushed rows are still hers to flush");

# --- 2. both write their own stores, each with its own slot ---------------
as('mallory', q{INSERT INTO t_mallory SELECT g, 'mallory ' || g FROM generate_series(100, 104) g;});
as('alice', q{INSERT INTO t_alice VALUES (4, 'alice four');});
is(as('mallory', q{SELECT string_agg(id::text, ',') FROM (SELECT id FROM t_mallory ORDER BY id) s}),
	'100,101,102,103,104', 'mallory reads her rows only');
is(as('alice', q{SELECT string_agg(id::text, ',') FROM (SELECT id FROM t_alice ORDER BY id) s}),
	'1,2,3,4', 'alice reads her rows only');
is(slots_of_steps(), '2', 'the two stores of the same names have a slot each');
is(as('mallory', q{SELECT rows_flushed FROM rollout_flush('t_mallory')}), '5',
	'mallory flushes her own five rows');
is(as('alice', q{SELECT rows_flushed FROM rollout_flush('t_alice')}), '3',
	'alice flushes her three');
($objects, @holding) = tenant_objects_holding('alice ');
is(scalar(@holding), 0, "still no object of mallory's bucket holds alice's rows ($objects objects)")
  or diag("@holding");
is( $node->safe_psql('postgres',
		q{SELECT bool_and(transactions_committed > 0) FROM rollout_stat_stores WHERE store = 'steps'}),
	't', 'both committed through group commit, each in its slot');

# after a restart mallory comes first, and alice still commits with her own
$node->stop;
$node->start;
as('mallory', q{INSERT INTO t_mallory VALUES (105, 'mallory after restart');});
as('alice', q{INSERT INTO t_alice VALUES (5, 'alice after restart');});
is(as('alice', q{SELECT string_agg(id::text, ',') FROM (SELECT id FROM t_alice ORDER BY id) s}),
	'1,2,3,4,5', 'after a restart with mallory first, alice reads all of hers');
is(as('mallory', 'SELECT count(*) FROM t_mallory'), '6', 'and mallory all of hers');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FILTER (WHERE transactions_committed > 0) FROM rollout_stat_stores WHERE store = 'steps'}),
	'2', 'each committed through group commit in a slot of its own');
is(as('mallory', q{SELECT rows_flushed FROM rollout_flush('t_mallory')}), '1',
	'mallory flushes her one row, not alice\'s');
is(as('alice', q{SELECT rows_flushed FROM rollout_flush('t_alice')}), '1',
	'alice flushes hers');

# --- 3. bob: another key, the same bucket, the same slot -------------------
$node->safe_psql('postgres', 'GRANT SELECT, INSERT ON t_alice TO bob; GRANT SELECT ON t_bob TO alice;');
as('alice', q{INSERT INTO t_alice VALUES (6, 'alice six');});
as('bob', q{INSERT INTO t_bob VALUES (7, 'bob seven');});
as('alice', q{INSERT INTO t_alice VALUES (8, 'alice eight');});
is(as('bob', q{SELECT string_agg(id::text, ',') FROM (SELECT id FROM t_bob ORDER BY id) s}),
	'1,2,3,4,5,6,7,8', 'bob reads the whole store, alice\'s unflushed rows too');
is(as('alice', q{SELECT string_agg(id::text, ',') FROM (SELECT id FROM t_alice ORDER BY id) s}),
	'1,2,3,4,5,6,7,8', 'alice reads bob\'s row');
is(slots_of_steps(), '2', 'bob shares alice\'s slot: still one slot per store');
is(as('bob', q{SELECT rows_flushed FROM rollout_flush('t_bob')}), '3',
	'bob flushes the rows of both (the same store)');
unlike(slurp_file($node->logfile), qr/owned by another writer|taken over|changed hands|another shared-memory slot/,
	'no writer of the cluster fenced another, and no commit had to be retried');
($objects, @holding) = tenant_objects_holding('alice ');
is(scalar(@holding), 0, "mallory's bucket never got a row of alice's ($objects objects)");

# A session of bob's that read the store before alice's writer claimed its
# slot commits through that slot afterwards, in the same session, and the
# store never gets a second slot.  (In a first version bob's read made a
# slot of his own, and every later commit of that session failed: "another
# shared-memory slot of this cluster writes it".)
$node->stop;
$node->start;
as('alice', 'SELECT count(*) FROM t_alice');
my $bob = $node->background_psql('postgres', on_error_stop => 0);
$bob->query_safe('SET ROLE bob');
is($bob->query_safe('SELECT count(*) FROM t_bob'), '8', "bob's session reads the store first");
as('alice', q{INSERT INTO t_alice VALUES (9, 'alice nine');});
for my $i (10 .. 12)
{
	$bob->{stderr} = '';
	$bob->query("INSERT INTO t_bob VALUES ($i, 'bob $i')");
	is($bob->{stderr}, '', "the same session of bob's commits (row $i)");
}
$bob->quit;
is(slots_of_steps(), '1', 'through the one slot of the store');
is(as('alice', 'SELECT count(*) FROM t_alice'), '12', 'alice reads every row');

# A committer whose slot another tenant took over while it staged its rows
# (the slot was not claimed yet) does not reset the other's writer: it fails
# with a retryable error, and its retry commits through a slot of its own.
# (In a first version its handle reset the slot it no longer owned, as if
# the store had been created again, and claimed its store through it.)
$node->stop;
$node->start;
my $offset = -s $node->logfile;
my $held = PsqlScript->start($node, sql => q{
SET rollout_fdw.fail_at = 'commit.after_ingest_staged:hold';
SET rollout_fdw.ingest_threshold = '64kB';
SET ROLE alice;
INSERT INTO t_alice SELECT g, repeat('a', 100) FROM generate_series(1000, 1999) g;
});
ok(wait_for_fault($node, 'commit.after_ingest_staged', $offset), "alice's large commit waits after staging its rows");
as('mallory', q{INSERT INTO t_mallory VALUES (200, 'mallory while alice waits');});
release_faults($node);
my ($held_rc, $held_out, $held_err) = $held->finish;
hold_faults($node);
ok($held_rc == 0 || $held_err =~ /changed hands/,
	"alice's commit either went through a slot of her own or is to be retried") or diag($held_err);
as('alice', q{INSERT INTO t_alice SELECT g, repeat('a', 100) FROM generate_series(1000, 1999) g;})
  if $held_rc != 0;
is(slots_of_steps(), '2', "alice's store and mallory's each have their own slot");
is(as('mallory', q{SELECT rows_flushed FROM rollout_flush('t_mallory')}), '1',
	"mallory's writer was left alone: her row flushes from her memtable");
is(as('alice', q{SELECT count(*) FROM t_alice WHERE id BETWEEN 1000 AND 1999}), '1000',
	"alice's thousand rows are there once");
is(as('mallory', q{SELECT count(*) FROM t_mallory WHERE id >= 1000}), '0', 'and not in mallory\'s store');

# --- 5. a copy of alice's fence lets mallory read, not write -------------
# Whoever can read a store can copy its objects, the fence of its writer's
# claim among them.  Here mallory copies every object of alice's store
# "episodes" into her own bucket under the same names (the test copies with
# alice's keys, as read access to alice's bucket would let mallory do), so
# her credentials find alice's fence at alice's claim position.  That admits
# her to read through alice's slot, which shows her nothing she cannot read
# anyway; to write through it she must also write a probe that alice's claim
# reads back (core/write_proof.c), and her probe lands in her own bucket.
# Before, the copy admitted her to write: her commit took a position of
# alice's WAL, and her flush moved alice's unflushed rows into her bucket.
$offset = -s $node->logfile;
for my $role ('alice', 'mallory')
{
	as($role, qq{CREATE FOREIGN TABLE e_$role (id int, v text) SERVER server_$role OPTIONS (store 'episodes', key 'id');});
}
as('alice', q{
INSERT INTO e_alice VALUES (1, 'alice e1');
SELECT rows_flushed FROM rollout_flush('e_alice');
INSERT INTO e_alice VALUES (2, 'alice e2');});
my @copied = $store->list('episodes/');
$tenant->put($_, $store->get($_)) for @copied;
ok(scalar(grep { m{/wal/} } @copied) > 0,
	'mallory copied alice\'s store, the WAL of her claim with its fence too (' . scalar(@copied) . ' objects)');
as('alice', q{INSERT INTO e_alice VALUES (3, 'alice e3');});

# Admitted only to read, mallory must not change alice's slot either: here
# her copy says it is another creation of the store, which a handle that
# writes the store would take for a store created again and reset the slot
# for (its memtable, its claim).  Hers reads without the slot instead.
my $definition = $tenant->get('episodes/_store.json');
(my $forged_definition = $definition) =~ s/"incarnation": "[^"]+"/"incarnation": "forged"/;
isnt($forged_definition, $definition, "mallory's copy names another creation of the store");
$tenant->put('episodes/_store.json', $forged_definition);
is($node->safe_psql('postgres', q{SELECT sum(memtable_rows) FROM rollout_stat_stores WHERE store = 'episodes'}),
	'2', "alice's two unflushed rows are in her slot's memtable");
as('mallory', q{SELECT count(*) FROM e_mallory});
is($node->safe_psql('postgres', q{SELECT sum(memtable_rows) FROM rollout_stat_stores WHERE store = 'episodes'}),
	'2', "a read of mallory's through the copied fence did not reset alice's slot");
$tenant->put('episodes/_store.json', $definition);

as('mallory', q{INSERT INTO e_mallory VALUES (300, 'mallory e300');});
as('mallory', q{SELECT rollout_flush('e_mallory');});
is(as('alice', q{SELECT string_agg(id::text, ',') FROM (SELECT id FROM e_alice ORDER BY id) s}),
	'1,2,3', "alice reads her rows, and not mallory's");
is(as('alice', q{SELECT unflushed_rows FROM rollout_observe('e_alice')}), '2',
	"mallory's flush took none of alice's unflushed rows out of her memtable");
like(as('mallory', q{SELECT string_agg(id::text, ',') FROM (SELECT id FROM e_mallory ORDER BY id) s}),
	qr/^(1,)?(2,)?300$/, 'mallory reads her row (and what she copied), not alice\'s later row');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM rollout_stat_stores WHERE store = 'episodes'}),
	'2', "mallory's commit went through a slot of her own");
my @alice_holding = grep { index($store->get($_) // '', 'mallory e300') >= 0 } $store->list('episodes/');
is(scalar(@alice_holding), 0, "no object of alice's bucket holds mallory's row") or diag("@alice_holding");
is(as('alice', q{SELECT rows_flushed FROM rollout_flush('e_alice')}), '2',
	'alice flushes her two unflushed rows herself');
is(as('alice', q{SELECT string_agg(id::text, ',') FROM (SELECT id FROM e_alice ORDER BY id) s}),
	'1,2,3', 'and reads them after her flush');
unlike(substr(slurp_file($node->logfile), $offset),
	qr/owned by another writer|taken over|changed hands|another shared-memory slot/,
	'no writer fenced another, and no commit had to be retried');

# The proofs of bob (section 3) and mallory left no probe behind; a probe
# left by an interrupted proof is removed by gc of the shard.
is(scalar(grep { m{/_probes/} } $store->list(''), $tenant->list('')), 0,
	'every probe was deleted once it was read');
my ($probe_prefix) = map { m{^(.*/shards/[^/]+/)wal/} ? $1 : () } $store->list('episodes/');
$store->put("${probe_prefix}_probes/left-behind.probe", 'x');
with_min_gc_grace($node, 0,
	sub { $node->safe_psql('postgres', q{SET ROLE alice; SELECT rollout_gc('e_alice', '0');}) });
is(scalar(grep { m{/_probes/} } $store->list('episodes/')), 0,
	'gc removed a probe an interrupted proof left behind');

unlike(slurp_file($node->logfile), qr/terminated by signal/, 'no backend died');
$node->stop;
done_testing();
